// `vramfit validate`: the engine against a measured truth file.
#include "vramfit/cli/validate.hpp"

#include <filesystem>
#include <limits>
#include <optional>
#include <vector>
#include <ostream>

#include <fmt/format.h>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/render/validate.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace fs = std::filesystem;

namespace {

/// Where a case's config is: beside the truth file, else one folder up (shared/truth keeps
/// results/*.jsonl beside models/*.json).
fs::path find_config(const fs::path& truth_file, const accuracy::TruthCase& c) {
  const fs::path dir = truth_file.parent_path();
  std::error_code ec;
  for (const fs::path& base : {dir, dir.parent_path()}) {
    const fs::path p = base / c.config;
    if (fs::is_regular_file(p, ec)) return p;
  }
  const std::string shown = dir.empty() ? "." : dir.string();
  throw InputError(
      fmt::format("{}: case '{}': config", truth_file.string(), c.id),
      fmt::format("'{}' is neither in '{}' nor in its parent folder", c.config, shown),
      "keep the model configs where the truth file names them; shared/truth keeps results/ beside models/");
}

}  // namespace

ExitCode run_validate(const std::string& path, render::Format format, std::ostream& out, bool one_process) {
  const fs::path file(path);
  const std::string text = read_file(file, "truth file", kMaxLogFile);
  const std::vector<accuracy::TruthCase> cases = accuracy::parse_truth(text, file.string());
  if (cases.empty())
    throw InputError("truth file", fmt::format("'{}' holds no cases", file.string()),
                     "give a JSONL file written by measure.py: one case per line");

  const accuracy::CaseModels models(cases, [&](const accuracy::TruthCase& c) {
    const fs::path config = find_config(file, c);
    return spec::from_config_text(read_file(config, "config"), config.string());
  });
  const std::vector<accuracy::CaseResult> results = accuracy::evaluate_all(cases, models, file.string());
  // Without the environment line the card's memory is unknown: no OOM case counts as predicted.
  const std::optional<Bytes> device = accuracy::truth_device_bytes(text);
  const accuracy::Report report =
      accuracy::make_report(results, device.value_or(Bytes{std::numeric_limits<std::uint64_t>::max()}));

  render::Validation v{file.string(), cases.size(), device, report, {}};
  std::optional<accuracy::InProcess> in_process;
  if (one_process) {
    in_process = accuracy::evaluate_in_process(cases, models.of_all(cases));
    v.one_process = render::OneProcess{in_process->processes, in_process->unknown, {}, {}, {}};
    std::vector<const accuracy::CaseResult*> ptrs;
    // The reserved column: a copy whose device error leaves the context out on both sides.
    std::vector<accuracy::CaseResult> reserved = in_process->results;
    std::vector<const accuracy::CaseResult*> reserved_ptrs;
    for (auto& r : reserved) {
      const accuracy::TruthCase& t = *r.truth;
      const Bytes context = r.estimate_context;
      if (t.status == "ok" && t.peak_reserved.value() > 0 && r.estimate_device_total > context)
        r.device_error = static_cast<double>((r.estimate_device_total - context).value()) /
                             static_cast<double>(t.peak_reserved.value()) - 1;
      reserved_ptrs.push_back(&r);
    }
    v.one_process->reserved = accuracy::stats(reserved_ptrs, true);
    for (std::size_t i = 0; i < results.size(); ++i) {
      ptrs.push_back(&in_process->results[i]);
      if (results[i].truth->status == "ok" &&
          (results[i].device_error < -0.05 || in_process->results[i].device_error < -0.05))
        v.one_process->under.push_back({&results[i], &in_process->results[i]});
    }
    v.one_process->device = accuracy::stats(ptrs, true);
  }
  // Render first, print after: an error while rendering leaves stdout empty.
  const std::string shown = render::render_validate(v, format);
  out << shown;
  return ExitCode::ok;
}

}  // namespace vramfit::cli
