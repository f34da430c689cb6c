#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "vramfit/advisor/fit.hpp"
#include "vramfit/cli/estimate.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::cli {

/// The flags `vramfit advise` adds to the estimate's, as typed.
struct AdviseFlags {
  std::vector<std::string> allow;  ///< `--allow IDS` (repeatable, comma-separated)
  std::vector<std::string> deny;   ///< `--deny IDS` (repeatable, comma-separated)
  std::string provider;            ///< `--provider ID`; empty when not given
};

/// `vramfit advise`: walks the fixes on the estimate (which must carry a budget) and prints
/// render::render_advice (the estimate's heading and advice_text, or the JSON document
/// {schema_version, model, workload, ...advice_json}). Returns advisor::exit_code:
/// ok when the job fits as given, does_not_fit otherwise. Throws InputError for bad fix ids
/// or providers.
ExitCode run_advise(const Estimate& estimate, const AdviseFlags& flags, CatalogSource& catalog,
                    render::Format format, std::ostream& out);

/// `vramfit fit`: the largest batch (or sequence length) that fits the estimate's budget.
/// render::render_fit (text: the heading and fit_text; JSON: {schema_version, model, workload,
/// ...fit_json}). Returns advisor::exit_code (does_not_fit when even 1 does not fit).
ExitCode run_fit(const Estimate& estimate, advisor::Dimension dimension, render::Format format,
                 std::ostream& out);

}  // namespace vramfit::cli
