#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/cli/estimate.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/doctor/diagnose.hpp"
#include "vramfit/render/render.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::cli {

/// The text `vramfit explain` reads: the file `path`, or `in` (standard input) when `path` is
/// empty or "-". Throws InputError (field "log") when the file is missing, is a folder, or
/// cannot be read, or when `in` fails.
std::string read_log(const std::string& path, std::istream& in);

/// The tensor sizes the workload is expected to request, named for the doctor, in bytes:
///   logits_fp32       batch x seq x vocab x 4 (the loss's fp32 copy of the logits)
///   logits            batch x seq x vocab x compute bytes
///   attention_scores  batch x heads x seq x seq x compute bytes (eager attention's matrix)
/// where seq is the prompt for generate and compute bytes are 2 under autocast or for 16-bit
/// and quantized weights, 4 for fp32 weights without autocast. A size whose product
/// overflows 64 bits is left out.
std::vector<doctor::NamedSize> candidate_sizes(const spec::ModelSpec& model, const spec::Workload& workload);

/// `vramfit explain`: scans `log` for PyTorch's OOM messages and explains the chosen one
/// (doctor::scan, doctor::explain). With an estimate (model flags given), passes the
/// candidate sizes to the doctor and adds a reconciliation of the estimate's device total
/// with the card's total from the message: text, a "Reconcile with the estimate" section;
/// JSON, the `estimate` key (null without model flags). Returns ok when an OOM message was
/// found and explained, does_not_fit when the text holds none.
ExitCode run_explain(std::string_view log, const std::optional<Estimate>& estimate, render::Format format,
                     std::ostream& out);

}  // namespace vramfit::cli
