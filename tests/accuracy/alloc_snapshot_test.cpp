// The estimate against the H200 _snapshot() runs of tests/accuracy/alloc/snapshots (snap.py:
// measure.py with torch.cuda.memory._record_memory_history() around each case; default allocator
// and expandable_segments:True). For every case: the estimate's peak allocated against
// max_memory_allocated(), and its device total (peak allocated + allocator reserve + CUDA
// context) against max_memory_reserved() + the memory outside PyTorch (non_torch_bytes).
// The table below is each case's error in tenths of a percent (estimate / measured - 1), as the
// engine gives it now: a change of the reserve model shows here case by case. A computed error
// may differ from its row by at most 0.1 % (0.05 % of rounding, 0.05 % of slack).
// Print the current table: VRAMFIT_PRINT_SNAPSHOT_TABLE=1 ./build/tests/vramfit_tests "[snapshot]"
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"
#include "measured.hpp"

namespace {

using namespace vramfit;
namespace fs = std::filesystem;

struct Expected {
  const char* setting;  // "default" or "expandable"
  const char* id;
  int peak_tenths;    // peak allocated error, tenths of a percent
  int device_tenths;  // device total error, tenths of a percent
};

// clang-format off
const Expected kTable[] = {
    {"default", "gpt2-medium/generate/bf16/b8s512n512", 21, 94},
    {"default", "gpt2-medium/lora/bf16/adamw/r64-all-linear/b8s1024/ckpt", -3, 29},
    {"default", "gpt2-medium/train/fp32-ampbf16/adamw/b8s1024/ckpt", 0, 10},
    {"default", "gpt2/train/bf16/adamw/b8s1024/ckpt", 0, 16},
    {"default", "gpt2/generate/bf16/b1s512n256", -32, 74},
    {"default", "gpt2/lora/bf16/adamw/r16-all-linear/b4s1024/ckpt", -5, 12},
    {"default", "qwen2.5-0.5b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, -2},
    {"default", "qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 6},
    {"default", "qwen2.5-1.5b/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 12},
    {"default", "smollm2-135m/forward/bf16/b1s8192", -1, 44},
    {"default", "smollm2-135m/generate/bf16/b1s512n256", -5, 59},
    {"default", "smollm2-135m/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 2},
    {"default", "smollm2-360m/forward/bf16/b1s8192", -8, 35},
    {"default", "smollm2-360m/generate/bf16/b1s512n256", -14, 24},
    {"default", "smollm2-360m/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", -2, -9},
    {"default", "smollm2-360m/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 12},
    {"default", "gpt2-medium/train/bf16/adamw/b8s1024", 0, -36},
    {"default", "gpt2/train/fp32/adamw/b4s1024", 1, -15},
    {"default", "llama-3.2-1b/train/bf16/adamw/b4s2048/ckpt", 0, 18},
    {"default", "llama-3.2-1b/forward/bf16/b1s16384", 0, 34},
    {"default", "llama-3.2-1b/forward/bf16/b4s4096", 0, 36},
    {"default", "llama-3.2-1b/generate/bf16/b1s8192n128", 0, 26},
    {"default", "llama-3.2-1b/lora/bf16/adamw/r16-q+v/b4s2048", 2, 2},
    {"default", "qwen2.5-0.5b/train/bf16/adamw/b4s2048", 0, 167},
    {"default", "qwen2.5-0.5b/forward/bf16/b1s32768", 0, 8},
    {"default", "qwen2.5-0.5b/generate/bf16/b1s16384n64", -2, 27},
    {"default", "qwen2.5-0.5b/lora/bf16/adamw/r16-all-linear/b8s1024", -2, -1},
    {"default", "qwen2.5-1.5b/forward/bf16/b2s16384", 0, 23},
    {"default", "qwen2.5-1.5b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, 0},
    {"default", "smollm2-135m/forward/bf16/b1s16384", 0, -219},
    {"default", "smollm2-360m/generate/bf16/b8s2048n128", -1, 43},
    {"default", "smollm2-360m/train/fp32-ampbf16/adamw/b4s1024", 0, 12},
    {"default", "gpt2-medium/forward/bf16/b16s1024", 14, 65},
    {"default", "gpt2-medium/generate/bf16/b16s512n256", 16, 65},
    {"default", "gpt2-medium/lora/bf16/adamw/r16-all-linear/b8s1024/ckpt", -3, 34},
    {"default", "gpt2/train/fp32-ampbf16/adamw/b8s1024", 1, 6},
    {"default", "llama-3.2-1b/forward/bf16/b2s8192", 0, 33},
    {"default", "llama-3.2-1b/generate/bf16/b16s1024n256", 2, -32},
    {"default", "llama-3.2-1b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, 8},
    {"default", "llama-3.2-1b/train/fp32-ampbf16/adamw/b4s2048/ckpt", 0, 33},
    {"default", "qwen2.5-0.5b/generate/bf16/b4s4096n128", -5, 20},
    {"default", "qwen2.5-0.5b/lora/bf16/adamw/r8-q+v/b4s4096/ckpt", 0, 6},
    {"default", "qwen2.5-0.5b/train/fp32-ampbf16/adamw/b4s4096/ckpt", 0, 6},
    {"default", "qwen2.5-1.5b/train/bf16/adamw/b4s2048/ckpt", 0, 9},
    {"default", "qwen2.5-1.5b/forward/bf16/b1s16384", 0, 12},
    {"default", "smollm2-135m/train/bf16/adamw/b16s2048/ckpt", 0, 6},
    {"default", "smollm2-135m/lora/bf16/adamw/r32-all-linear/b16s1024", -14, -13},
    {"default", "smollm2-360m/train/bf16/adamw/b4s2048", 0, 4},
    {"default", "smollm2-360m/forward/bf16/b4s4096", -5, 42},
    {"default", "smollm2-360m/lora/bf16/adamw/r16-q+v/b8s2048", -1, -3},
    {"expandable", "gpt2-medium/generate/bf16/b8s512n512", 22, 80},
    {"expandable", "gpt2-medium/lora/bf16/adamw/r64-all-linear/b8s1024/ckpt", -3, 31},
    {"expandable", "gpt2-medium/train/fp32-ampbf16/adamw/b8s1024/ckpt", 0, 28},
    {"expandable", "gpt2/train/bf16/adamw/b8s1024/ckpt", 0, 52},
    {"expandable", "gpt2/generate/bf16/b1s512n256", -4, 88},
    {"expandable", "gpt2/lora/bf16/adamw/r16-all-linear/b4s1024/ckpt", -2, -1},
    {"expandable", "qwen2.5-0.5b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, 2},
    {"expandable", "qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 14},
    {"expandable", "qwen2.5-1.5b/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 27},
    {"expandable", "smollm2-135m/forward/bf16/b1s8192", 0, -9},
    {"expandable", "smollm2-135m/generate/bf16/b1s512n256", 0, 65},
    {"expandable", "smollm2-135m/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 18},
    {"expandable", "smollm2-360m/forward/bf16/b1s8192", 0, 4},
    {"expandable", "smollm2-360m/generate/bf16/b1s512n256", 0, 22},
    {"expandable", "smollm2-360m/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, 17},
    {"expandable", "smollm2-360m/train/fp32-ampbf16/adamw/b8s2048/ckpt", 0, 28},
    {"expandable", "gpt2-medium/train/bf16/adamw/b8s1024", 0, 11},
    {"expandable", "gpt2/train/fp32/adamw/b4s1024", 0, 25},
    {"expandable", "llama-3.2-1b/train/bf16/adamw/b4s2048/ckpt", 0, -56},
    {"expandable", "llama-3.2-1b/forward/bf16/b1s16384", 0, 6},
    {"expandable", "llama-3.2-1b/forward/bf16/b4s4096", 0, 5},
    {"expandable", "llama-3.2-1b/generate/bf16/b1s8192n128", 0, 46},
    {"expandable", "llama-3.2-1b/lora/bf16/adamw/r16-q+v/b4s2048", 2, 3},
    {"expandable", "qwen2.5-0.5b/train/bf16/adamw/b4s2048", 0, 24},
    {"expandable", "qwen2.5-0.5b/forward/bf16/b1s32768", 0, 2},
    {"expandable", "qwen2.5-0.5b/generate/bf16/b1s16384n64", -2, 49},
    {"expandable", "qwen2.5-0.5b/lora/bf16/adamw/r16-all-linear/b8s1024", -2, 1},
    {"expandable", "qwen2.5-1.5b/forward/bf16/b2s16384", 0, -4},
    {"expandable", "qwen2.5-1.5b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, 3},
    {"expandable", "smollm2-135m/forward/bf16/b1s16384", 0, 41},
    {"expandable", "smollm2-360m/generate/bf16/b8s2048n128", -1, 53},
    {"expandable", "smollm2-360m/train/fp32-ampbf16/adamw/b4s1024", 0, 35},
    {"expandable", "gpt2-medium/forward/bf16/b16s1024", 14, 81},
    {"expandable", "gpt2-medium/generate/bf16/b16s512n256", 17, 77},
    {"expandable", "gpt2-medium/lora/bf16/adamw/r16-all-linear/b8s1024/ckpt", -3, 35},
    {"expandable", "gpt2/train/fp32-ampbf16/adamw/b8s1024", 0, 12},
    {"expandable", "llama-3.2-1b/forward/bf16/b2s8192", 0, 2},
    {"expandable", "llama-3.2-1b/generate/bf16/b16s1024n256", 2, 38},
    {"expandable", "llama-3.2-1b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 0, -1},
    {"expandable", "llama-3.2-1b/train/fp32-ampbf16/adamw/b4s2048/ckpt", 0, 36},
    {"expandable", "qwen2.5-0.5b/generate/bf16/b4s4096n128", -1, 36},
    {"expandable", "qwen2.5-0.5b/lora/bf16/adamw/r8-q+v/b4s4096/ckpt", 0, 0},
    {"expandable", "qwen2.5-0.5b/train/fp32-ampbf16/adamw/b4s4096/ckpt", 0, 14},
    {"expandable", "qwen2.5-1.5b/train/bf16/adamw/b4s2048/ckpt", 0, 5},
    {"expandable", "qwen2.5-1.5b/forward/bf16/b1s16384", 0, -1},
    {"expandable", "smollm2-135m/train/bf16/adamw/b16s2048/ckpt", 0, 25},
    {"expandable", "smollm2-135m/lora/bf16/adamw/r32-all-linear/b16s1024", -14, -11},
    {"expandable", "smollm2-360m/train/bf16/adamw/b4s2048", 0, 6},
    {"expandable", "smollm2-360m/forward/bf16/b4s4096", 0, 8},
    {"expandable", "smollm2-360m/lora/bf16/adamw/r16-q+v/b8s2048", 0, -1},
};
// clang-format on

struct Row {
  std::string setting, id;
  double peak = 0, device = 0;  // errors as fractions
};

std::vector<Row> compute() {
  std::vector<Row> rows;
  const fs::path truth = VRAMFIT_TRUTH_DIR;
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/snapshots";
  const std::pair<const char*, const char*> files[] = {{"default", "snap_default.jsonl"},
                                                       {"default", "snap_more_default.jsonl"},
                                                       {"default", "snap_heldout_default.jsonl"},
                                                       {"expandable", "snap_expandable.jsonl"},
                                                       {"expandable", "snap_more_expandable.jsonl"},
                                                       {"expandable", "snap_heldout_expandable.jsonl"}};
  for (const auto& [setting, file] : files) {
    const auto m = test::evaluate_measured(dir, file, truth);
    for (const auto& r : m.results)
      if (r.truth->status == "ok") rows.push_back({setting, r.truth->id, r.error, r.device_error});
  }
  return rows;
}

int tenths(double e) { return static_cast<int>(std::lround(e * 1000)); }

double median_abs(std::vector<double> v) {
  for (auto& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

}  // namespace

TEST_CASE("the estimate against the H200 _snapshot() runs, case by case", "[accuracy][allocator][snapshot]") {
  if (!fs::exists(fs::path(VRAMFIT_TRUTH_DIR) / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  const auto rows = compute();
  if (std::getenv("VRAMFIT_PRINT_SNAPSHOT_TABLE"))
    for (const auto& r : rows)
      std::printf("{\"%s\", \"%s\", %d, %d},\n", r.setting.c_str(), r.id.c_str(), tenths(r.peak), tenths(r.device));
  REQUIRE(rows.size() == std::size(kTable));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Expected& e = kTable[i];
    const Row& r = rows[i];
    INFO(r.setting << " " << r.id << ": peak " << r.peak * 100 << " %, device total " << r.device * 100 << " %");
    CHECK(r.setting == e.setting);
    CHECK(r.id == e.id);
    CHECK(std::fabs(r.peak * 1000 - e.peak_tenths) <= 0.5 + 0.5);
    CHECK(std::fabs(r.device * 1000 - e.device_tenths) <= 0.5 + 0.5);
  }
}

// The same figures summed up per allocator setting: median |error| of the device total, its
// extremes, and how many cases it is under by more than 5 % (the target: median <= 2 %).
TEST_CASE("the device total on the _snapshot() runs, per allocator setting", "[accuracy][allocator][snapshot]") {
  if (!fs::exists(fs::path(VRAMFIT_TRUTH_DIR) / "models")) {
    WARN("shared/truth not found beside the checkout: skipped");
    return;
  }
  struct Summary {
    const char* setting;
    std::size_t runs;
    int median_abs_tenths, min_tenths, max_tenths;
    std::size_t under_5;
  };
  // Before the reserve split the loss's logits from the rest (commit 841d135): default 42, -102 .. 307,
  // 3 under; expandable 81, -175 .. 358, 7 under.
  // After (849f16f): default 38, -80 .. 307, 2 under. Forward's reserve from the layers' transient:
  // With the 18 held-out cases (measured after the model was fitted; see the snapshots README):
  // Then: default 38, -145 .. 209, 4 under; expandable 17, -44 .. 125, 0 under.
  // Generation's reserve replayed through the allocator model (engine/reserve.cpp, generate_reserve):
  // default 33, -145 .. 209, 3 under; expandable 18, -44 .. 125, 0 under.
  // Single-GPU full training replayed too (training_reserve): default 19, -124 .. 209, 1 under;
  // expandable 16, -56 .. 84, 1 under.
  // Generation replayed from the built model's segments (replay_build: their free bytes stay reserved):
  // default 25, -124 .. 209, 1 under; expandable 16, -56 .. 86, 1 under.
  // Forward passes replayed too (forward_reserve; the 0.3 x logits term is gone: smollm2-135m
  // b1 s16384 -12.4 -> -21.9 %, a case whose run started with segments an earlier case pinned):
  // default 20, -219 .. 141, 1 under; expandable 16, -56 .. 86, 1 under.
  // The backward thread's cuBLAS workspace in the training replay (32 MiB at the first backward's
  // first matmul, kept; tests/accuracy/alloc/fresh):
  // default 21, -219 .. 140, 1 under; expandable 16, -56 .. 86, 1 under.
  // The training replay from the built model's segments, autocast over fp32 weights replayed op by
  // op, and expandable segments' free tail taken last (engine/allocator.cpp):
  // default 19, -219 .. 140, 1 under; expandable 16, -56 .. 88, 1 under.
  // memory_allocated() counts whole blocks (block_rounding at each training phase's peak: the peaks of
  // 8 training runs move up 0.1-1.1 %, smollm2-360m fp32 amp -1.0 -> +0.1 %):
  // default 19, -219 .. 142, 1 under; expandable 16, -56 .. 88, 1 under.
  // Adam's two states as blocks of their own and cudaMalloc's segment layout in the training replay
  // (gemma's layer replayed as gemma's; engine/reserve.cpp): default unchanged; expandable 18 (the
  // states' blocks move the training cases' reserve by -15 .. +8 tenths).
  // LoRA's reserve replayed (was its fitted share): the summaries unchanged; its 24 runs within
  // -1.3 .. +3.5 % (were -1.8 .. +3.2 %), their median |error| 0.55 -> 0.30 %.
  // Each bias a parameter of its own (its gradient and optimizer states blocks of their own,
  // engine/reserve.cpp param_tensors): default unchanged (gpt2-medium bf16 b8 x 1024 +4.3 ->
  // -3.6 %); expandable 18 -> 15. The llama-family layer in 16-bit weights replayed as recorded
  // (llama16_forward): default 19 -> 17 (smollm2-360m bf16 b4 x 2048 +3.4 -> +0.4 %, but qwen2.5-0.5b
  // bf16 b4 x 2048, run after earlier cases in snap.py's process, +14.2 -> +16.7 %); expandable 15 -> 17.
  const Summary expected[] = {{"default", 50, 17, -219, 167, 1}, {"expandable", 50, 17, -56, 88, 1}};
  const auto rows = compute();
  for (const auto& e : expected) {
    std::vector<double> dev;
    for (const auto& r : rows)
      if (r.setting == e.setting) dev.push_back(r.device);
    INFO(e.setting);
    REQUIRE(dev.size() == e.runs);
    CHECK(std::fabs(median_abs(dev) * 1000 - e.median_abs_tenths) <= 1.0);
    CHECK(std::fabs(*std::min_element(dev.begin(), dev.end()) * 1000 - e.min_tenths) <= 1.0);
    CHECK(std::fabs(*std::max_element(dev.begin(), dev.end()) * 1000 - e.max_tenths) <= 1.0);
    CHECK(static_cast<std::size_t>(std::count_if(dev.begin(), dev.end(), [](double x) { return x < -0.05; })) ==
          e.under_5);
  }
}
