// Real steps recorded on the H200 (tests/accuracy/alloc/traces: snap_trace.py, measure.py with
// torch.cuda.memory._record_memory_history(), each case in a fresh process; run.sh).
//  - The allocator model replays a recorded step exactly: three training steps of qwen2.5-1.5b
//    (bf16, AdamW, batch 8 x 2048, checkpointing): 15356 allocations, the trace's own segment
//    events peak at 47747956736 reserved bytes (45536 MiB) and the replay gives the same bytes.
//  - The estimate against those fresh-process runs, case by case (errors in tenths of a percent, as
//    in the [snapshot] table): the device total of a fresh process has no cached segments left by
//    an earlier case (shared/truth's runs share a process per model: gpt2/forward/bf16/b1s1024
//    reserved 418 MiB beyond its peak there and 52 MiB here) and a smaller CUDA context (695 MiB
//    forward, 717 generate, 767 training, against the 938.8 MiB median of shared/truth).
// Print the current table: VRAMFIT_PRINT_TRACE_TABLE=1 ./build/tests/vramfit_tests "[trace]"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/allocator.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"
#include "measured.hpp"
#include "../../src/engine/reserve.hpp"

namespace {

using namespace vramfit;
namespace fs = std::filesystem;

const fs::path kDir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/traces";

struct Expected {
  const char* file;
  const char* id;
  int reserve_mib;    // the estimate's allocator reserve
  int device_tenths;  // device total error, tenths of a percent
};

// clang-format off
const Expected kTable[] = {
    {"fresh_default.jsonl", "qwen2.5-1.5b/train/bf16/adamw/b8s2048/ckpt", 10183, 12},
    {"fresh_default.jsonl", "gpt2-medium/train/fp32-ampbf16/adamw/b16s1024/ckpt", 3335, 2},
    {"fresh_default.jsonl", "qwen2.5-7b/train/bf16/adamw/b4s2048/ckpt", 14649, -25},
    {"fresh_default.jsonl", "gpt2-medium/generate/bf16/b32s256n256", 2996, 42},
    {"fresh_default.jsonl", "gpt2/forward/bf16/b1s1024", 52, 242},
    {"fresh_default.jsonl", "smollm2-135m/generate/bf16/b1s512n256", 34, 241},
    {"fresh_default.jsonl", "smollm2-135m/forward/bf16/b1s8192", 150, 142},
    {"fresh_default.jsonl", "qwen2.5-1.5b/generate/bf16/b1s512n256", 198, 64},
    {"fresh_default.jsonl", "qwen2.5-0.5b/train/fp32-ampbf16/adamw/b4s1024", 2984, 7},
    {"fresh_default.jsonl", "gpt2/forward/fp16/b2s1024", 79, 206},
    {"fresh_expandable.jsonl", "qwen2.5-1.5b/train/bf16/adamw/b8s2048/ckpt", 6758, 12},
    {"fresh_expandable.jsonl", "gpt2-medium/train/fp32-ampbf16/adamw/b16s1024/ckpt", 2980, 38},
    {"fresh_expandable.jsonl", "gpt2-medium/generate/bf16/b32s256n256", 97, 69},
};
// clang-format on

}  // namespace

TEST_CASE("the allocator model replays a recorded training step byte-exactly", "[accuracy][allocator][trace]") {
  std::ifstream in(kDir / "qwen2.5-1.5b_train_bf16_b8s2048_ckpt.trace");
  REQUIRE(in);
  engine::CachingAllocator a;
  std::vector<engine::CachingAllocator::Handle> handles;
  std::string line;
  std::size_t frees = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::uint64_t v = std::stoull(line.substr(2));
    if (line[0] == 'a') {
      handles.push_back(a.malloc(v));
    } else {
      REQUIRE(line[0] == 'f');
      REQUIRE(v < handles.size());
      a.free(handles[v]);
      ++frees;
    }
  }
  CHECK(handles.size() == 15356);
  CHECK(a.peak_reserved() == 47747956736ULL);
  // The trace records requested sizes (37694216200 bytes at its peak); the allocator counts them
  // rounded up to 512 B, as torch.cuda.max_memory_allocated() does.
  CHECK(a.peak_allocated() == 37694479360ULL);
  CHECK(frees == 15353);
  // Reserved beyond the allocated peak: 9587 MiB; at the peak, 7894 MiB of it is free space in one
  // 9496 MiB segment made for the first step's fp32 logits, which the later steps' checkpointed
  // layer inputs and recompute blocks split (best fit), so the next logits need new segments.
  CHECK((a.peak_reserved() - a.peak_allocated()) >> 20 == 9587);
}

TEST_CASE("the estimate against fresh-process runs on the H200", "[accuracy][allocator][trace]") {
  const fs::path truth = VRAMFIT_TRUTH_DIR;
  if (!fs::exists(truth / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  struct Row {
    std::string file, id;
    std::uint64_t reserve_mib;
    double device;
  };
  std::vector<Row> rows;
  for (const char* file : {"fresh_default.jsonl", "fresh_expandable.jsonl"}) {
    const auto m = test::evaluate_measured(kDir, file, truth);
    for (const auto& r : m.results) {
      const accuracy::TruthCase& c = *r.truth;
      REQUIRE(c.status == "ok");
      const auto b = engine::estimate(m.models.of(c), c.workload);
      rows.push_back({file, c.id, b.allocator_reserve.value() >> 20, r.device_error});
      if (std::getenv("VRAMFIT_PRINT_TRACE_TABLE"))
        std::printf("    {\"%s\", \"%s\", %d, %d},\n", file, c.id.c_str(), static_cast<int>(rows.back().reserve_mib),
                    static_cast<int>(std::lround(rows.back().device * 1000)));
    }
  }
  REQUIRE(rows.size() == std::size(kTable));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Expected& e = kTable[i];
    INFO(rows[i].file << " " << rows[i].id << ": reserve " << rows[i].reserve_mib << " MiB, device total "
                      << rows[i].device * 100 << " %");
    CHECK(rows[i].file == e.file);
    CHECK(rows[i].id == e.id);
    CHECK(rows[i].reserve_mib == static_cast<std::uint64_t>(e.reserve_mib));
    CHECK(std::fabs(rows[i].device * 1000 - e.device_tenths) <= 0.5 + 0.5);
  }
}

// The model as measure.py builds it (AutoModelForCausalLM.from_config under torch.device("cuda")),
// recorded in a fresh process on the H200 (tests/accuracy/alloc/fresh, fresh.py): what the caching
// allocator holds once the model is built and the cache emptied, against the allocator model's
// replay of the build (engine/reserve.cpp, replay_build). The process also holds the cuBLAS
// workspace of its warm-up matmul: one 32 MiB block in a 32 MiB segment, not part of the build.
TEST_CASE("the built model's segments against fresh-process builds on the H200", "[accuracy][allocator][trace]") {
  const fs::path truth = VRAMFIT_TRUTH_DIR;
  if (!fs::exists(truth / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  constexpr std::uint64_t kWorkspace = 32ULL << 20;
  std::size_t builds = 0, exact = 0;
  for (const char* file : {"fresh_forward.jsonl", "fresh_generate.jsonl"}) {
    const std::string text = vramfit::test::read_text(kDir.parent_path() / "fresh" / file);
    std::istringstream lines(text);
    const auto cases = accuracy::parse_truth(text, file);
    const auto specs = test::models_in(truth, cases);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("\"start_reserved\"") == std::string::npos) continue;
      const auto num = [&](const std::string& key) {
        const auto at = line.find("\"" + key + "\": ");
        REQUIRE(at != std::string::npos);
        return std::stoull(line.substr(at + key.size() + 4));
      };
      const auto id_at = line.find("\"id\": \"") + 7;
      const std::string id = line.substr(id_at, line.find('"', id_at) - id_at);
      const auto c = std::find_if(cases.begin(), cases.end(), [&](const auto& x) { return x.id == id; });
      REQUIRE(c != cases.end());
      const auto built = engine::detail::built_model(specs.of(*c), c->workload);
      REQUIRE(built);
      const std::uint64_t reserved = num("start_reserved") - kWorkspace, allocated = num("start_allocated") - kWorkspace;
      INFO(id << ": measured reserved " << reserved << " allocated " << allocated << ", replayed " << built->reserved
              << " " << built->allocated);
      ++builds;
      // The large pool is replayed exactly. The measured runs hold a few KiB more in the small pool
      // (buffers the spec does not list) and, after the first case of the run, one 1 MiB block that
      // an earlier case left in a 2 MiB small segment of its own.
      REQUIRE(allocated >= built->allocated);
      REQUIRE(reserved >= built->reserved);
      const std::uint64_t more = allocated - built->allocated, seg = reserved - built->reserved;
      constexpr std::uint64_t kFew = 32ULL << 10;
      const bool clean = more < kFew && seg == 0;
      const bool left = more >= (1ULL << 20) && more < (1ULL << 20) + kFew && (seg == 0 || seg == (2ULL << 20));
      CHECK((clean || left));
      exact += clean ? 1 : 0;
      // Allocated includes what the allocator does not split off (a block keeps the rest when less
      // than 1 MiB would remain: qwen2.5-7b's 129.5 MiB MLP weights hold 130 MiB blocks).
    }
  }
  CHECK(builds == 41);
  CHECK(exact == 2);  // the first case of each run
}

// A forward pass replayed from the built model (engine/reserve.cpp, forward_reserve) against the
// one-case runs of tests/accuracy/alloc/fresh: the reserve beyond the peak, measured
// (max_memory_reserved - max_memory_allocated) and replayed. The replay leaves out what the
// harness does not do in a one-case process (segments an earlier case pinned: in shared/truth,
// gpt2/forward/bf16/b1s1024 has 418 MiB where its one-case run has 54).
TEST_CASE("the forward replay against one-case runs on the H200", "[accuracy][allocator][trace]") {
  const fs::path truth = VRAMFIT_TRUTH_DIR;
  if (!fs::exists(truth / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  std::vector<double> errors;
  const std::string file = "fresh_forward.jsonl";
  const auto cases = accuracy::parse_truth(vramfit::test::read_text(kDir.parent_path() / "fresh" / file), file);
  const auto specs = test::models_in(truth, cases);
  for (const auto& c : cases) {
    REQUIRE(c.status == "ok");
    const auto b = engine::estimate(specs.of(c), c.workload);
    const double measured = static_cast<double>(c.peak_reserved.value() - c.peak_allocated.value());
    const double replayed = static_cast<double>(b.allocator_reserve.value());
    INFO(c.id << ": measured " << measured / (1 << 20) << " MiB, replayed " << replayed / (1 << 20));
    // Every case within 17 % (the worst: smollm2-360m fp16 b2 s2048 -16 %, 22 MiB of 135).
    CHECK(std::fabs(replayed / measured - 1) <= 0.17);
    errors.push_back(std::fabs(replayed / measured - 1));
  }
  REQUIRE(errors.size() == 38);
  std::sort(errors.begin(), errors.end());
  const double median = (errors[18] + errors[19]) / 2;
  INFO("median |replayed / measured - 1| " << median);
  // 4.5 % (34 %, worst +169 %, with the closed form: the layers' transient + 0.3 x the logits;
  // 7.8 %, worst -39 %, before the embedding output was kept alive through the layers).
  CHECK(median <= 0.046);
}
