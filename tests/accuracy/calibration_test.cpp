// The device total's upper bound (issue #17 step 1): data/calibration.json is what the measured
// cases give, and the bound covers at least 95% of them in every group.
// Regenerate: VRAMFIT_UPDATE_CALIBRATION=1 ./build/tests/vramfit_tests "[calibration]", rebuild.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "vramfit/accuracy/calibration.hpp"
#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/upper_bound.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"
#include "measured.hpp"

namespace {

using namespace vramfit;
namespace fs = std::filesystem;

// Every measured case of the project: shared/truth and tests/accuracy (configs beside results/).
const std::vector<std::string>& sources() {
  static const std::vector<std::string> s{
      "../shared/truth/results/public.jsonl",           "../shared/truth/results/expandable-segments.jsonl",
      "tests/accuracy/h200/results/architectures.jsonl", "tests/accuracy/sharded/results/sharded.jsonl",
      "tests/accuracy/levers/results/levers.jsonl",      "tests/accuracy/levers/results/sharded.jsonl",
      // The H200 _snapshot() runs (their configs are shared/truth's models/).
      "tests/accuracy/alloc/snapshots/snap_default.jsonl", "tests/accuracy/alloc/snapshots/snap_more_default.jsonl",
      "tests/accuracy/alloc/snapshots/snap_expandable.jsonl",
      "tests/accuracy/alloc/snapshots/snap_more_expandable.jsonl",
      "tests/accuracy/alloc/snapshots/snap_heldout_default.jsonl",
      "tests/accuracy/alloc/snapshots/snap_heldout_expandable.jsonl",
      // The fresh-process H200 runs of tests/accuracy/alloc/traces (same configs).
      "tests/accuracy/alloc/traces/fresh_default.jsonl", "tests/accuracy/alloc/traces/fresh_expandable.jsonl",
      "tests/accuracy/alloc/fresh/one_process.jsonl", "tests/accuracy/alloc/fresh/one_process_expandable.jsonl"};
  return s;
}

struct All {
  std::vector<test::Measured> files;  // per source, kept alive for the results
  std::vector<accuracy::CaseResult> results;
};

const All& all() {
  static const All a = [] {
    All out;
    const fs::path root = VRAMFIT_SOURCE_DIR;
    out.files.reserve(sources().size());
    for (const auto& src : sources()) {
      const fs::path file = root / src;
      REQUIRE(fs::exists(file));
      // Configs are relative to the results folder's parent, else shared/truth's (the runs of its models).
      const fs::path dir = file.parent_path().parent_path();
      const auto first = accuracy::parse_truth(vramfit::test::read_text(file), src);
      const bool own = first.empty() || fs::exists(dir / first.front().config);
      out.files.push_back(test::evaluate_measured(file.parent_path(), file.filename().string(), own ? dir : VRAMFIT_TRUTH_DIR));
      out.results.insert(out.results.end(), out.files.back().results.begin(), out.files.back().results.end());
    }
    return out;
  }();
  return a;
}

std::vector<const accuracy::CaseResult*> pointers() {
  std::vector<const accuracy::CaseResult*> p;
  for (const auto& r : all().results) p.push_back(&r);
  return p;
}

}  // namespace

TEST_CASE("data/calibration.json is what the measured cases give", "[calibration]") {
  const auto groups = accuracy::calibrate(pointers());
  const std::string text = accuracy::calibration_json(groups, sources());
  const fs::path file = fs::path(VRAMFIT_SOURCE_DIR) / "data/calibration.json";
  if (std::getenv("VRAMFIT_UPDATE_CALIBRATION") != nullptr) {
    std::ofstream(file, std::ios::binary) << text;
    WARN("wrote " << file.string() << ": rebuild to embed it");
  }
  INFO("estimates or measured cases changed: regenerate with VRAMFIT_UPDATE_CALIBRATION=1 "
       "./build/tests/vramfit_tests \"[calibration]\", rebuild, and commit data/calibration.json");
  CHECK(vramfit::test::read_text(file) == text);
}

TEST_CASE("the device total's upper bound covers at least 95% of measured cases per group", "[calibration]") {
  std::map<std::string, std::pair<std::size_t, std::size_t>> cover;  // group -> (covered, cases)
  for (const auto& r : all().results) {
    if (r.truth->status != "ok") continue;
    const Bytes measured = r.truth->peak_reserved + r.truth->non_torch;
    const bool in = measured <= r.estimate_device_upper;
    for (const std::string& g : {engine::calibration_group(r.truth->workload),
                                 engine::calibration_mode(r.truth->workload), std::string("all")}) {
      cover[g].second += 1;
      cover[g].first += in ? 1 : 0;
    }
  }
  REQUIRE(cover.count("all") == 1);
  CHECK(cover["all"].second >= 300);
  for (const auto& [g, c] : cover) {
    INFO(g << ": " << c.first << " of " << c.second << " covered");
    CHECK(c.first * 100 >= c.second * 95);
  }
}

TEST_CASE("the upper bound applies its group's factor and never lies under the estimate", "[calibration]") {
  CHECK(engine::apply_upper(Bytes{1000}, 1234) == Bytes{1234});
  CHECK(engine::apply_upper(Bytes{1001}, 1500) == Bytes{1502});  // 1501.5 rounded up
  CHECK(engine::apply_upper(Bytes{~0ULL}, 1001) == Bytes{~0ULL});
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.checkpointing = true;
  CHECK(engine::calibration_group(w) == "train/single/ckpt");
  w.mode = spec::Mode::qlora;
  w.sharding = spec::Sharding::fsdp;
  CHECK(engine::calibration_group(w) == "lora/sharded/ckpt");
  w.mode = spec::Mode::generate;
  CHECK(engine::calibration_group(w) == "generate/sharded");
  for (const auto& r : all().results) CHECK(r.estimate_device_upper >= r.estimate_device_total);
}
