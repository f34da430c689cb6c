// The device total's upper bound: the measured error of the device total per kind of workload
// (data/calibration.json, written by the [calibration] test from every measured case).
#include "vramfit/engine/upper_bound.hpp"

#include <limits>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vramfit::catalog {
const std::map<std::string, std::string>& embedded_files();
}

namespace vramfit::engine {

namespace {

struct Entry {
  std::string from;
  std::uint64_t permille = 1000;
  std::size_t cases = 0;
};

// The embedded calibration, parsed once. A missing or malformed file is a build defect: the
// [calibration] test checks the file, so a bad one never ships; here it throws logic_error.
const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = [] {
    std::map<std::string, Entry> out;
    const auto& files = catalog::embedded_files();
    const auto it = files.find("calibration.json");
    if (it == files.end()) throw std::logic_error("data/calibration.json is not embedded");
    const auto j = nlohmann::json::parse(it->second);
    for (const auto& [name, g] : j.at("groups").items())
      out[name] = Entry{g.at("from").get<std::string>(), g.at("factor_permille").get<std::uint64_t>(),
                        g.at("from_cases").get<std::size_t>()};
    return out;
  }();
  return t;
}

}  // namespace

std::string calibration_mode(const spec::Workload& w) {
  switch (w.mode) {
    case spec::Mode::inference: return "inference";
    case spec::Mode::generate: return "generate";
    case spec::Mode::train: return "train";
    case spec::Mode::lora:
    case spec::Mode::qlora: return "lora";
  }
  return "all";
}

std::string calibration_group(const spec::Workload& w) {
  std::string g = calibration_mode(w);
  g += w.sharding == spec::Sharding::none ? "/single" : "/sharded";
  if (w.trains() && w.checkpointing) g += "/ckpt";
  return g;
}

UpperFactor upper_factor(const spec::Workload& w) {
  const auto& t = table();
  UpperFactor f;
  f.group = calibration_group(w);
  for (const std::string& key : {f.group, calibration_mode(w), std::string("all")}) {
    const auto it = t.find(key);
    if (it == t.end()) continue;
    f.from = it->second.from;
    f.permille = it->second.permille;
    f.cases = it->second.cases;
    return f;
  }
  f.from = "none";
  return f;
}

Bytes apply_upper(Bytes total, std::uint64_t permille) noexcept {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t v = total.value();
  const std::uint64_t whole = v / 1000;
  const std::uint64_t rest = v % 1000;
  if (permille != 0 && whole > kMax / permille) return Bytes{kMax};
  const std::uint64_t a = whole * permille;
  const std::uint64_t b = (rest * permille + 999) / 1000;  // rest < 1000: no overflow for sane factors
  if (a > kMax - b) return Bytes{kMax};
  return Bytes{a + b};
}

}  // namespace vramfit::engine
