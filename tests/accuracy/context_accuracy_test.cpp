// The context model (engine/context.hpp) against every measure.py-style results file: each case's
// non_torch_bytes (after the case, in the file's process) against the estimate_in_process context.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"

namespace {

namespace fs = std::filesystem;
using namespace vramfit;

struct ContextFit {
  std::size_t cases = 0;
  std::size_t under_page = 0;  ///< modelled below measured by more than one 2 MiB page
  std::size_t over_page = 0;   ///< modelled above measured by more than one 2 MiB page
  std::int64_t worst_under_mib = 0, worst_over_mib = 0;
};

ContextFit fit(const fs::path& dir, const std::string& file) {
  const std::string text = test::read_text(dir / file);
  const auto cases = accuracy::parse_truth(text, file);
  std::map<std::string, spec::ModelSpec> specs;
  std::vector<const spec::ModelSpec*> models;
  for (const auto& c : cases)
    if (!specs.count(c.config)) specs.emplace(c.config, spec::from_config_text(test::read_text(dir.parent_path() / c.config), c.config));
  for (const auto& c : cases) models.push_back(&specs.at(c.config));
  const auto one = accuracy::evaluate_in_process(cases, models);
  ContextFit f;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].status != "ok") continue;
    ++f.cases;
    const auto d = (static_cast<std::int64_t>(one.results[i].estimate_context.value()) -
                    static_cast<std::int64_t>(cases[i].non_torch.value())) /
                   (1 << 20);
    if (d < -2) ++f.under_page;
    if (d > 2) ++f.over_page;
    f.worst_under_mib = std::min(f.worst_under_mib, d);
    f.worst_over_mib = std::max(f.worst_over_mib, d);
  }
  return f;
}

void check(const ContextFit& f, std::size_t cases, std::size_t under, std::size_t over, std::int64_t worst_under,
           std::int64_t worst_over) {
  CHECK(f.cases == cases);
  CHECK(f.under_page == under);
  CHECK(f.over_page == over);
  CHECK(f.worst_under_mib == worst_under);
  CHECK(f.worst_over_mib == worst_over);
}

}  // namespace

// Per file: ok cases; modelled more than one 2 MiB page under / over the measured; the worst under and
// over (MiB). The model follows the processes from 687 to 1277 MiB within -10 .. +10 MiB (it was the
// 938.8 MiB median: -338 .. +252). What is left: kernels loaded lazily by a case's new shapes (GEMM
// and elementwise variants), modelled only as 2 MiB per further model trained: late in public's first
// process it is 10 MiB under; in h200/architectures' second process, where few new kernels came, 10 over.
TEST_CASE("context model: each case's non-PyTorch memory through its measure.py process", "[accuracy][context]") {
  const fs::path src(VRAMFIT_SOURCE_DIR);
  const fs::path truth = src.parent_path() / "shared/truth/results";
  if (fs::exists(truth / "public.jsonl")) {
    SECTION("shared/truth public") { check(fit(truth, "public.jsonl"), 157, 41, 5, -10, 4); }
  } else {
    WARN("../shared/truth is not there: public skipped");
  }
  SECTION("heldout") { check(fit(src / "tests/accuracy/heldout/results", "heldout.jsonl"), 57, 8, 10, -4, 6); }
  SECTION("heldout-exp") { check(fit(src / "tests/accuracy/heldout/results", "heldout-exp.jsonl"), 39, 2, 10, -4, 6); }
  SECTION("heldout-arch") { check(fit(src / "tests/accuracy/heldout/results", "heldout-arch.jsonl"), 45, 29, 0, -6, 2); }
  SECTION("h200 architectures") {
    check(fit(src / "tests/accuracy/h200/results", "architectures.jsonl"), 67, 1, 21, -4, 10);
  }
}
