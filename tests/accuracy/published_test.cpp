// Published peak-memory figures of real fine-tuning / training runs (torchtune, torchtitan,
// Unsloth, PEFT), each run through `vramfit estimate ... --json` in-process and compared like
// with like (tests/accuracy/published/make_training.py says how: the allocated / active peak
// with peak_allocated_bytes, torch's reserved peak with the device total less the CUDA context,
// a device figure or a GPU's capacity with the device total). Each estimate and error is
// asserted exactly against what training.jsonl recorded, so any change in the engine shows up
// here: rerun make_training.py with the new binary and review the table it changes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli/cli_helper.hpp"

namespace {

const std::filesystem::path kSource = VRAMFIT_SOURCE_DIR;

// The medians of |error| make_training.py's table shows for this engine: all figures, and the
// ones whose run uses no lever vramfit lacks (`missing` empty).
constexpr double kPublishedMedian = 0.081926;
constexpr double kExpressibleMedian = 0.073159;

struct Published {
  nlohmann::json rec;
  std::uint64_t estimate = 0;  // the figure compared, from this build
  double error = 0;            // estimate / published - 1
};

std::uint64_t compared_bytes(const nlohmann::json& d, const std::string& measures) {
  if (measures == "active" || measures == "allocated") return d.at("peak_allocated_bytes").get<std::uint64_t>();
  const auto total = d.at("device_total_bytes").get<std::uint64_t>();
  if (measures == "reserved") {
    for (const auto& c : d.at("components"))
      if (c.at("id") == "cuda_context") return total - c.at("bytes").get<std::uint64_t>();
    return total;
  }
  REQUIRE((measures == "device" || measures == "fit"));
  return total;
}

const std::vector<Published>& published() {
  static const std::vector<Published> all = [] {
    std::vector<Published> out;
    std::istringstream in(vramfit::test::read_text(kSource / "tests/accuracy/published/training.jsonl"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      Published p;
      p.rec = nlohmann::json::parse(line);
      std::vector<std::string> args{"estimate"};
      std::string prev;
      for (const auto& a : p.rec.at("args")) {
        auto s = a.get<std::string>();
        if (prev == "--config") s = (kSource / s).string();  // paths are relative to the repository
        args.push_back(s);
        prev = a.get<std::string>();
      }
      args.push_back("--json");
      const auto r = vramfit::test::run_cli(args);
      INFO(p.rec.at("id").get<std::string>() << ": " << r.err);
      REQUIRE(r.code == 0);
      p.estimate = compared_bytes(nlohmann::json::parse(r.out), p.rec.at("measures").get<std::string>());
      p.error = static_cast<double>(p.estimate) / p.rec.at("published_bytes").get<double>() - 1;
      out.push_back(std::move(p));
    }
    return out;
  }();
  return all;
}

double median_abs(std::vector<double> v) {
  if (v.empty()) return 0;
  for (auto& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

TEST_CASE("published training figures: each estimate as recorded", "[accuracy][published]") {
  const auto& all = published();
  REQUIRE(all.size() == 23);
  for (const auto& p : all) {
    INFO(p.rec.at("id").get<std::string>() << ": estimate " << p.estimate << " B, error " << p.error * 100 << "%");
    CHECK(p.estimate == p.rec.at("estimate_bytes").get<std::uint64_t>());
    CHECK(std::abs(p.error - p.rec.at("error").get<double>()) < 1e-6);
    // Every case names its source, the line quoted and what the figure measures.
    CHECK(!p.rec.at("url").get<std::string>().empty());
    CHECK(!p.rec.at("quote").get<std::string>().empty());
  }
}

TEST_CASE("published training figures: the error table", "[accuracy][published]") {
  const auto& all = published();
  std::map<std::string, std::vector<double>> by_source;
  std::vector<double> errors, expressible;
  for (const auto& p : all) {
    const auto id = p.rec.at("id").get<std::string>();
    by_source[id.substr(0, id.find('/'))].push_back(p.error);
    errors.push_back(p.error);
    if (p.rec.at("missing").empty()) expressible.push_back(p.error);
  }
  std::ostringstream table;
  for (const auto& [source, e] : by_source)
    table << source << ": " << e.size() << " figures, median |error| " << median_abs(e) * 100 << "%\n";
  WARN(table.str() << "all: " << errors.size() << " figures, median |error| " << median_abs(errors) * 100
                   << "%; the " << expressible.size() << " vramfit can express fully: " << median_abs(expressible) * 100
                   << "%");
  // Recorded medians (make_training.py's table); a change in the engine moves them.
  CHECK(by_source.size() == 4);
  CHECK(median_abs(errors) == Approx(kPublishedMedian).margin(1e-6));
  CHECK(median_abs(expressible) == Approx(kExpressibleMedian).margin(1e-6));
}
