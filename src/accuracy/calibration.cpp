// The device total's measured error per kind of workload, as data/calibration.json holds it.
#include "vramfit/accuracy/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "vramfit/engine/upper_bound.hpp"

namespace vramfit::accuracy {

namespace {

double ratio(const CaseResult& r) {
  const double measured = static_cast<double>((r.truth->peak_reserved + r.truth->non_torch).value());
  return measured / static_cast<double>(r.estimate_device_total.value());
}

// 95th percentile by nearest rank: the smallest value at or above 95% of the sorted values.
double p95(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

std::uint64_t permille_of(double ratio_value) {
  // Rounded up to a thousandth (a tiny epsilon keeps 1.2 from becoming 1.201 through binary
  // rounding), at least 1000: the bound never lies under the estimate.
  const auto p = static_cast<std::uint64_t>(std::ceil(ratio_value * 1000.0 - 1e-9));
  return std::max<std::uint64_t>(p, 1000);
}

}  // namespace

std::vector<GroupCalibration> calibrate(const std::vector<const CaseResult*>& results) {
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, std::string> mode_of;
  for (const auto* r : results) {
    if (r->truth->status != "ok" || r->estimate_device_total.value() == 0) continue;
    const double x = ratio(*r);
    const std::string group = engine::calibration_group(r->truth->workload);
    const std::string mode = engine::calibration_mode(r->truth->workload);
    ratios[group].push_back(x);
    mode_of[group] = mode;
    if (mode != group) ratios[mode].push_back(x);
    ratios["all"].push_back(x);
  }
  std::map<std::string, GroupCalibration> out;
  for (const auto& [name, v] : ratios) {
    GroupCalibration g;
    g.group = name;
    g.cases = v.size();
    g.p95_ratio = p95(v);
    g.max_ratio = *std::max_element(v.begin(), v.end());
    out[name] = g;
  }
  // Factors: "all" from its own cases; a mode pool, then a group, from their own cases when they
  // have enough, else from the pool above, raised to their own 95th percentile when higher.
  auto resolve = [&](GroupCalibration& g, const std::string& pool) {
    if (g.cases >= kMinGroupCases || pool.empty()) {
      g.from = g.group;
      g.from_cases = g.cases;
      g.factor_permille = permille_of(g.p95_ratio);
      return;
    }
    const GroupCalibration& p = out.at(pool);
    g.from = p.from;
    g.from_cases = p.from_cases;
    g.factor_permille = std::max(p.factor_permille, permille_of(g.p95_ratio));
    if (g.factor_permille > p.factor_permille) g.from = p.from + ", raised to this group's own 95th percentile";
  };
  resolve(out.at("all"), "");
  for (auto& [name, g] : out)
    if (name.find('/') == std::string::npos && name != "all") resolve(g, "all");
  for (auto& [name, g] : out)
    if (name.find('/') != std::string::npos) resolve(g, mode_of.at(name));
  // Coverage: measured <= estimate x factor.
  for (const auto* r : results) {
    if (r->truth->status != "ok" || r->estimate_device_total.value() == 0) continue;
    const Bytes measured = r->truth->peak_reserved + r->truth->non_torch;
    const std::string group = engine::calibration_group(r->truth->workload);
    // The bound the engine gives the case: its own group's factor; pools count their cases' bounds.
    const bool in = measured <= engine::apply_upper(r->estimate_device_total, out.at(group).factor_permille);
    for (const std::string& key : {group, engine::calibration_mode(r->truth->workload), std::string("all")})
      out.at(key).covered += in ? 1 : 0;
  }
  std::vector<GroupCalibration> list;
  for (auto& [name, g] : out) list.push_back(g);
  return list;
}

std::string calibration_json(const std::vector<GroupCalibration>& groups, const std::vector<std::string>& sources) {
  nlohmann::ordered_json j;
  j["what"] =
      "Upper bound of the device total per kind of workload: the 95th percentile (nearest rank) of measured "
      "(peak_reserved + non_torch) / estimated device_total over the measured cases, rounded up to a thousandth, "
      "at least 1. Groups with fewer than 20 cases take their pool's factor (mode, then all), raised to their "
      "own 95th percentile when higher.";
  j["regenerate"] = "VRAMFIT_UPDATE_CALIBRATION=1 ./build/tests/vramfit_tests \"[calibration]\"";
  j["sources"] = sources;
  j["min_group_cases"] = kMinGroupCases;
  nlohmann::ordered_json gs = nlohmann::ordered_json::object();
  for (const auto& g : groups) {
    nlohmann::ordered_json o;
    o["cases"] = g.cases;
    o["from"] = g.from;
    o["from_cases"] = g.from_cases;
    o["factor_permille"] = g.factor_permille;
    o["covered"] = g.covered;
    gs[g.group] = o;
  }
  j["groups"] = gs;
  return j.dump(2) + "\n";
}

}  // namespace vramfit::accuracy
