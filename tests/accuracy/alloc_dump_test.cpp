// Hidden (not run by ctest): one JSON line per measured single-GPU case with the estimate's phases and
// the measured figures, for working on the allocator reserve.
//   ./build/tests/vramfit_tests "[.dump]" > /tmp/dump.jsonl
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "measured.hpp"

TEST_CASE("dump estimates and measured figures", "[.dump]") {
  using namespace vramfit;
  namespace fs = std::filesystem;
  const auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  const fs::path truth = VRAMFIT_TRUTH_DIR;
  const fs::path snaps = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/snapshots";
  const std::pair<std::string, fs::path> files[] = {
      {"public", truth / "results/public.jsonl"},        {"expandable", truth / "results/expandable-segments.jsonl"},
      {"snap", snaps / "snap_default.jsonl"},            {"snap", snaps / "snap_more_default.jsonl"},
      {"snapx", snaps / "snap_expandable.jsonl"},        {"snapx", snaps / "snap_more_expandable.jsonl"},
      {"held", snaps / "snap_heldout_default.jsonl"},    {"heldx", snaps / "snap_heldout_expandable.jsonl"}};
  for (const auto& [src, file] : files) {
    const std::string text = slurp(file);
    const auto cases = accuracy::parse_truth(text, file.string());
    const auto specs = test::models_in(truth, cases);
    for (const auto& c : cases) {
      const auto b = engine::estimate(specs.of(c), c.workload);
      nlohmann::json j;
      j["src"] = src;
      j["id"] = c.id;
      j["status"] = c.status;
      j["m_alloc"] = c.peak_allocated.value();
      j["m_res"] = c.peak_reserved.value();
      j["m_ctx"] = c.non_torch.value();
      j["e_alloc"] = b.peak_allocated.value();
      j["e_reserve"] = b.allocator_reserve.value();
      j["e_ctx"] = b.cuda_context.value();
      j["e_total"] = b.device_total.value();
      j["peak_phase"] = std::string(engine::to_string(b.peak_phase.value()));
      for (const auto& ph : b.phases) j["phases"][std::string(engine::to_string(ph.id))] = ph.allocated.value();
      for (const auto& co : b.components) j["parts"][std::string(engine::to_string(co.id))] = co.bytes.value();
      std::printf("%s\n", j.dump().c_str());
    }
  }
}
