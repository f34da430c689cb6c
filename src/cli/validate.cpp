// `vramfit validate`: the engine against a measured truth file.
#include "vramfit/cli/validate.hpp"

#include <filesystem>
#include <limits>
#include <map>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace fs = std::filesystem;

namespace {

nlohmann::ordered_json stats_json(const accuracy::Stats& s) {
  nlohmann::ordered_json j;
  j["cases"] = s.cases;
  j["median_abs"] = s.median_abs;
  j["p90_abs"] = s.p90_abs;
  j["max_abs"] = s.max_abs;
  j["unsafe_share"] = s.unsafe_share;
  return j;
}

nlohmann::ordered_json named_stats(const std::vector<std::pair<std::string, accuracy::Stats>>& list,
                                   const char* key) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& [name, s] : list) {
    nlohmann::ordered_json j;
    j[key] = name;
    const nlohmann::ordered_json stats = stats_json(s);  // items() must not outlive it
    for (const auto& [k, v] : stats.items()) j[k] = v;
    a.push_back(std::move(j));
  }
  return a;
}

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

ExitCode run_validate(const std::string& path, render::Format format, std::ostream& out) {
  const fs::path file(path);
  const std::string text = read_file(file, "truth file", kMaxLogFile);
  const std::vector<accuracy::TruthCase> cases = accuracy::parse_truth(text, file.string());
  if (cases.empty())
    throw InputError("truth file", fmt::format("'{}' holds no cases", file.string()),
                     "give a JSONL file written by measure.py: one case per line");

  std::map<std::string, spec::ModelSpec> specs;
  for (const auto& c : cases) {
    if (specs.count(c.config) != 0) continue;
    const fs::path config = find_config(file, c);
    specs.emplace(c.config, spec::from_config_text(read_file(config, "config"), config.string()));
  }
  std::vector<accuracy::CaseResult> results;
  results.reserve(cases.size());
  for (const auto& c : cases) {
    try {
      results.push_back(accuracy::evaluate(c, specs.at(c.config)));
    } catch (const InputError& e) {
      std::vector<Diagnostic> diags = e.diagnostics();
      for (auto& d : diags) d.field = fmt::format("{}: case '{}': {}", file.string(), c.id, d.field);
      throw InputError(std::move(diags));
    }
  }
  // Without the environment line the card's memory is unknown: no OOM case counts as predicted.
  const std::optional<Bytes> device = accuracy::truth_device_bytes(text);
  const accuracy::Report report =
      accuracy::make_report(results, device.value_or(Bytes{std::numeric_limits<std::uint64_t>::max()}));

  std::string shown;
  if (format == render::Format::json) {
    nlohmann::ordered_json j;
    j["schema_version"] = render::kSchemaVersion;
    j["file"] = file.string();
    j["cases"] = cases.size();
    j["device_bytes"] = device ? nlohmann::ordered_json(device->value()) : nlohmann::ordered_json();
    j["by_mode"] = named_stats(report.by_mode, "mode");
    j["all"] = stats_json(report.all);
    j["by_model"] = named_stats(report.by_model, "model");
    if (!report.by_sharding.empty()) j["by_sharding"] = named_stats(report.by_sharding, "sharding");
    j["device"] = stats_json(report.device);
    j["oom"] = {
        {"cases", report.oom_cases},
        {"predicted", device ? nlohmann::ordered_json(report.oom_predicted) : nlohmann::ordered_json()}};
    j["params"] = {{"checked", report.params_checked}, {"exact", report.params_exact}};
    nlohmann::ordered_json worst = nlohmann::ordered_json::array();
    for (const auto* w : report.worst) {
      nlohmann::ordered_json o;
      o["id"] = w->truth->id;
      o["error"] = w->error;
      o["estimate_peak_bytes"] = w->estimate_peak.value();
      o["measured_peak_bytes"] = w->truth->peak_allocated.value();
      worst.push_back(std::move(o));
    }
    j["worst"] = std::move(worst);
    shown = j.dump(2) + "\n";
  } else {
    shown = accuracy::render_report(report);
    if (!device)
      shown += "(the file has no environment line with the card's total_bytes: OOM cases were not checked)\n";
  }
  out << shown;
  return ExitCode::ok;
}

}  // namespace vramfit::cli
