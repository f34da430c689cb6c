#include "vramfit/render/validate.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace vramfit::render {

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

}  // namespace

std::string accuracy_text(const accuracy::Report& r) {
  std::string s;
  auto row = [&](const std::string& name, const accuracy::Stats& st) {
    s += fmt::format("  {:<16} {:>5} {:>9.2f}% {:>9.2f}% {:>9.2f}% {:>9.1f}%\n", name, st.cases, st.median_abs * 100,
                     st.p90_abs * 100, st.max_abs * 100, st.unsafe_share * 100);
  };
  s += "peak allocated: |estimate / measured - 1|\n";
  s += fmt::format("  {:<16} {:>5} {:>10} {:>10} {:>10} {:>10}\n", "mode", "cases", "median", "p90", "max", "unsafe");
  for (const auto& [k, v] : r.by_mode) row(k, v);
  row("all", r.all);
  s += "\nby model\n";
  s += fmt::format("  {:<16} {:>5} {:>10} {:>10} {:>10} {:>10}\n", "model", "cases", "median", "p90", "max", "unsafe");
  for (const auto& [k, v] : r.by_model) row(k, v);
  if (!r.by_sharding.empty()) {
    s += "\nby sharding strategy (per GPU: the busiest rank), then strategy x GPUs\n";
    s += fmt::format("  {:<16} {:>5} {:>10} {:>10} {:>10} {:>10}\n", "sharding", "cases", "median", "p90", "max", "unsafe");
    for (const auto& [k, v] : r.by_sharding)
      if (k.find(' ') == std::string::npos) row(k, v);
    for (const auto& [k, v] : r.by_sharding)
      if (k.find(' ') != std::string::npos) row(k, v);
  }
  s += "\ndevice total vs peak reserved + non-PyTorch memory\n";
  row("all", r.device);
  s += fmt::format("\nOOM cases predicted over the card: {} of {}\n", r.oom_predicted, r.oom_cases);
  s += fmt::format("parameter counts exact: {} of {}\n", r.params_exact, r.params_checked);
  s += "\nworst cases\n";
  for (const auto* w : r.worst)
    s += fmt::format("  {:>+8.2f}%  {}\n", w->error * 100, w->truth->id);
  s += "\n(unsafe: estimate below 95% of the measured peak)\n";
  return s;
}

std::string render_validate(const Validation& v, Format f) {
  if (f == Format::json) {
    nlohmann::ordered_json j;
    j["schema_version"] = kSchemaVersion;
    j["file"] = v.file;
    j["cases"] = v.cases;
    j["device_bytes"] = v.device ? nlohmann::ordered_json(v.device->value()) : nlohmann::ordered_json();
    j["by_mode"] = named_stats(v.report.by_mode, "mode");
    j["all"] = stats_json(v.report.all);
    j["by_model"] = named_stats(v.report.by_model, "model");
    if (!v.report.by_sharding.empty()) j["by_sharding"] = named_stats(v.report.by_sharding, "sharding");
    j["device"] = stats_json(v.report.device);
    j["oom"] = {
        {"cases", v.report.oom_cases},
        {"predicted", v.device ? nlohmann::ordered_json(v.report.oom_predicted) : nlohmann::ordered_json()}};
    j["params"] = {{"checked", v.report.params_checked}, {"exact", v.report.params_exact}};
    nlohmann::ordered_json worst = nlohmann::ordered_json::array();
    for (const auto* w : v.report.worst) {
      nlohmann::ordered_json o;
      o["id"] = w->truth->id;
      o["error"] = w->error;
      o["estimate_peak_bytes"] = w->estimate_peak.value();
      o["measured_peak_bytes"] = w->truth->peak_allocated.value();
      worst.push_back(std::move(o));
    }
    j["worst"] = std::move(worst);
    if (v.one_process) {
      nlohmann::ordered_json o;
      o["processes"] = v.one_process->processes;
      o["unknown_cases"] = v.one_process->unknown;
      o["device"] = stats_json(v.one_process->device);
      o["reserved"] = stats_json(v.one_process->reserved);
      nlohmann::ordered_json under = nlohmann::ordered_json::array();
      for (const auto& [own, one] : v.one_process->under)
        under.push_back({{"id", own->truth->id}, {"own_process", own->device_error}, {"one_process", one->device_error}});
      o["under"] = std::move(under);
      j["one_process"] = std::move(o);
    }
    return j.dump(2) + "\n";
  }
  std::string shown = accuracy_text(v.report);
  if (v.one_process) {
    const OneProcess& p = *v.one_process;
    const accuracy::Stats& st = p.device;
    shown += fmt::format(
        "\ndevice total, each case after the file's earlier cases in measure.py's process ({} process{}; the\n"
        "segment the first backward's cuBLAS workspace pins stays reserved: validate --one-process)\n",
        p.processes, p.processes == 1 ? "" : "es");
    shown += fmt::format("  {:<16} {:>5} {:>9.2f}% {:>9.2f}% {:>9.2f}% {:>9.1f}%\n", "all", st.cases, st.median_abs * 100,
                         st.p90_abs * 100, st.max_abs * 100, st.unsafe_share * 100);
    const accuracy::Stats& rs = p.reserved;
    shown += fmt::format("  {:<16} {:>5} {:>9.2f}% {:>9.2f}% {:>9.2f}% {:>9.1f}%\n", "without context", rs.cases,
                         rs.median_abs * 100, rs.p90_abs * 100, rs.max_abs * 100, rs.unsafe_share * 100);
    shown += "  (without context: estimated peak + reserve against the measured peak reserved; the context is the\n"
             "  process's too: kernels loaded once, a cuDNN attention graph per SDPA shape of every case so far)\n";
    if (p.unknown > 0)
      shown += fmt::format("  ({} case{} after a first backward whose workspace placement is not modelled: as in a "
                           "process of their own)\n",
                           p.unknown, p.unknown == 1 ? "" : "s");
    shown += "device total under by more than 5 %: own process, one process, the measured context, the one-process model's\n";
    for (const auto& [own, one] : p.under)
      shown += fmt::format("  {:>+8.2f}% {:>+8.2f}% {:>8.1f} MiB {:>8.1f} MiB  {}\n", own->device_error * 100,
                           one->device_error * 100, static_cast<double>(own->truth->non_torch.value()) / (1024.0 * 1024.0),
                           static_cast<double>(one->estimate_context.value()) / (1024.0 * 1024.0), own->truth->id);
  }
  if (!v.device)
    shown += "(the file has no environment line with the card's total_bytes: OOM cases were not checked)\n";
  return shown;
}

}  // namespace vramfit::render
