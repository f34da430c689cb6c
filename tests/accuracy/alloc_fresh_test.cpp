// The estimate against jobs as users run them: one case per process (tests/accuracy/alloc/fresh,
// fresh.py: CUDA initialised, the warm-up matmul, the model built, the case; H200, torch 2.11,
// transformers 5.17, peft 0.21). shared/truth's measure.py runs the cases of a model in one process,
// where segments pinned by earlier cases (the autograd thread's cuBLAS workspace, kept for the
// process) and a CUDA context grown by them stay; here nothing came before the case.
//  - one_process.jsonl: the 8 public cases the truth puts under by more than 5 % and a stratified
//    sample of public train / LoRA / generate cases (40 cases, run_s8.sh and run_s8b.sh);
//  - one_process_expandable.jsonl: three training cases with expandable_segments:True.
// Print the current table: VRAMFIT_PRINT_FRESH_TABLE=1 ./build/tests/vramfit_tests "[fresh]"
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
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

const fs::path kFresh = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh";

struct Expected {
  const char* id;
  int reserve_mib;    // the estimate's allocator reserve
  int device_tenths;  // device total error, tenths of a percent
};

// clang-format off
const std::vector<Expected> kOneProcess = {
    {"gpt2/forward/bf16/b8s1024", 276, 126},  // measured reserve 287 MiB
    {"gpt2/forward/bf16/b1s1024", 52, 242},  // measured reserve 51 MiB
    {"gpt2/forward/fp16/b2s1024", 79, 206},  // measured reserve 90 MiB
    {"smollm2-135m/forward/bf16/b8s2048", 297, 110},  // measured reserve 267 MiB
    {"smollm2-135m/forward/bf16/b1s8192", 150, 142},  // measured reserve 156 MiB
    {"gpt2/generate/bf16/b1s512n256", 48, 227},  // measured reserve 52 MiB
    {"smollm2-135m/generate/bf16/b1s512n256", 34, 241},  // measured reserve 35 MiB
    {"qwen2.5-0.5b/generate/bf16/b32s256n256", 49, 113},  // measured reserve 78 MiB
    {"qwen2.5-0.5b/lora/bf16/adamw/r16-all-linear/b4s2048/ckpt", 2979, 3},  // measured reserve 3078 MiB
    {"qwen2.5-0.5b/lora/bf16/adamw/r16-q+v/b4s1024", 1328, 5},  // measured reserve 1416 MiB
    {"smollm2-360m/lora/bf16/adamw/r16-q+k+v+o-drop0.05/b4s1024", 1302, -2},  // measured reserve 1267 MiB
    {"gpt2/train/bf16/adamw/b8s1024/ckpt", 572, 27},  // measured reserve 560 MiB
    {"gpt2-medium/train/fp32-ampbf16/adamw/b8s1024", 1383, 6},  // measured reserve 1379 MiB
    {"gpt2/lora/bf16/adamw/r16-all-linear/b4s1024/ckpt", 571, 38},  // measured reserve 572 MiB
    {"gpt2-medium/generate/bf16/b32s256n256", 2996, 42},  // measured reserve 2992 MiB
    {"smollm2-135m/train/fp32-ampbf16/adamw/b8s2048/ckpt", 1084, 11},  // measured reserve 1112 MiB
    {"smollm2-360m/train/fp32-ampbf16/adamw/b4s1024", 564, 3},  // measured reserve 695 MiB
    {"gpt2-medium/lora/bf16/adamw/r16-c_attn-drop0.05/b4s1024", 445, 18},  // measured reserve 456 MiB
    {"smollm2-360m/generate/bf16/b8s1024n512", 82, 81},  // measured reserve 129 MiB
    {"qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048", 1264, 3},  // measured reserve 1239 MiB
    {"qwen2.5-1.5b/train/bf16/adamw/b8s2048/ckpt", 10183, 12},  // measured reserve 9775 MiB
    {"qwen2.5-1.5b/lora/bf16/adamw/r64-all-linear/b8s4096/ckpt", 13338, -6},  // measured reserve 13986 MiB
    {"qwen2.5-1.5b/generate/bf16/b8s1024n512", 312, 49},  // measured reserve 309 MiB
    {"llama-3.2-1b/train/fp32-ampbf16/adamw/b8s2048/ckpt", 5877, 19},  // measured reserve 5171 MiB
    {"qwen2.5-7b/train/bf16/adamw/b1s1024", 3309, 2},  // measured reserve 3310 MiB
    {"llama-3.2-1b/lora/bf16/adamw/r16-q+k+v+o-drop0.05/b4s1024", 1084, 8},  // measured reserve 1152 MiB
    {"gpt2/train/fp32/adamw/b2s1024", 559, 83},  // measured reserve 270 MiB
    {"smollm2-360m/train/bf16/adamw/b8s2048/ckpt", 837, 15},  // measured reserve 805 MiB
    {"qwen2.5-7b/lora/bf16/adamw/r16-q+v/b2s1024", 800, 4},  // measured reserve 837 MiB
    {"qwen2.5-1.5b/train/fp32-ampbf16/sgd/b4s1024", 3774, 5},  // measured reserve 3768 MiB
    {"llama-3.1-8b/train/bf16/adamw/b4s2048/ckpt", 12517, 2},  // measured reserve 12521 MiB
    {"smollm2-135m/lora/bf16/adamw/r16-q+k+v+o-drop0.05/b4s1024", 1265, 9},  // measured reserve 1287 MiB
    {"gpt2-medium/train/fp32-ampbf16/adamw/b16s1024/ckpt", 3335, 2},  // measured reserve 3476 MiB
    {"llama-3.2-1b/train/fp32-ampbf16/adamw/b4s1024/eager", 2374, 22},  // measured reserve 1544 MiB
    {"llama-3.1-8b/lora/bf16/adamw/r16-all-linear/b1s8192/ckpt", 4085, 8},  // measured reserve 3985 MiB
    {"qwen2.5-0.5b/train/bf16/adamw/b4s1024", 1911, 9},  // measured reserve 1911 MiB
    {"smollm2-135m/train/fp32-ampbf16/adafactor/b4s1024", 1287, 30},  // measured reserve 1196 MiB
    {"smollm2-360m/lora/bf16/adamw/r64-all-linear/b8s4096/ckpt", 4686, 1},  // measured reserve 4807 MiB
    {"qwen2.5-1.5b/train/fp32-ampbf16/adamw/b4s1024", 5477, 4},  // measured reserve 5466 MiB
    {"gpt2-medium/train/bf16/adamw/b8s1024/ckpt", 1408, 21},  // measured reserve 1383 MiB
};
const std::vector<Expected> kOneProcessExpandable = {
    {"qwen2.5-1.5b/train/fp32-ampbf16/adamw/b4s1024", 1329, 5},  // measured reserve 1277 MiB
    {"qwen2.5-1.5b/train/bf16/adamw/b4s1024", 1421, 7},  // measured reserve 1389 MiB
    {"qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048", 4868, 3},  // measured reserve 4833 MiB
};
// clang-format on

struct Row {
  std::string id;
  std::uint64_t reserve_mib = 0;
  double device = 0;
};

std::vector<Row> estimate_file(const char* file) {
  const auto m = test::evaluate_measured(kFresh, file, VRAMFIT_TRUTH_DIR);
  std::vector<Row> rows;
  for (const auto& r : m.results) {
    const accuracy::TruthCase& c = *r.truth;
    REQUIRE(c.status == "ok");
    const auto b = engine::estimate(m.models.of(c), c.workload);
    rows.push_back({c.id, b.allocator_reserve.value() >> 20, r.device_error});
    if (std::getenv("VRAMFIT_PRINT_FRESH_TABLE"))
      std::printf("    {\"%s\", %d, %d},  // measured reserve %llu MiB\n", c.id.c_str(),
                  static_cast<int>(rows.back().reserve_mib), static_cast<int>(std::lround(rows.back().device * 1000)),
                  static_cast<unsigned long long>((c.peak_reserved.value() - c.peak_allocated.value()) >> 20));
  }
  return rows;
}

void check_rows(const std::vector<Row>& rows, const std::vector<Expected>& table) {
  REQUIRE(rows.size() == table.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].id << ": reserve " << rows[i].reserve_mib << " MiB, device total " << rows[i].device * 100 << " %");
    CHECK(rows[i].id == table[i].id);
    CHECK(rows[i].reserve_mib == static_cast<std::uint64_t>(table[i].reserve_mib));
    CHECK(std::fabs(rows[i].device * 1000 - table[i].device_tenths) <= 1.0);
  }
}

}  // namespace

TEST_CASE("the estimate against one process per case on the H200", "[accuracy][allocator][fresh]") {
  if (!fs::exists(fs::path(VRAMFIT_TRUTH_DIR) / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  const auto rows = estimate_file("one_process.jsonl");
  std::vector<double> a;
  std::size_t under = 0;
  for (const auto& r : rows) {
    a.push_back(std::fabs(r.device));
    under += r.device < -0.05 ? 1 : 0;
  }
  std::sort(a.begin(), a.end());
  const double median = (a[a.size() / 2 - 1] + a[a.size() / 2]) / 2;
  const double p90 = a[(9 * a.size() + 9) / 10 - 1];
  if (std::getenv("VRAMFIT_PRINT_FRESH_TABLE"))
    std::printf("n %zu median %.4f p90 %.4f max %.4f under %zu\n", a.size(), median, p90, a.back(), under);
  check_rows(rows, kOneProcess);
  // shared/truth on the same 40 cases: the 8 cases it puts under by more than 5 % are over here
  // (+11.0 .. +24.2 %: the one-process context is 695-767 MiB against the 938.8 MiB the estimate
  // takes, and no earlier case pinned a segment).
  // Before the training replay allocated the backward thread's cuBLAS workspace: median 4.30 %,
  // p90 14.28 %, 3 under (qwen2.5-1.5b SGD -5.1 %, smollm2-135m Adafactor -7.1 %, LoRA -8.1 %).
  // Before the training replay started from the built model and replayed autocast over fp32
  // weights op by op: median 2.15 %, p90 14.22 % (the reserve's summed error over the 18 training
  // rows and 3 expandable rows 17250 -> 15146 MiB; the median rises with the build's free bytes,
  // which add 10-200 MiB to cases whose one-process context is already 170-250 MiB below the estimate's).
  // GPT-2's layer replayed too (gpt2-medium fp32-amp b8 s1024 2671 -> 1573 MiB): median 2.42 -> 2.22 %.
  // Adam's two states as blocks of their own and cudaMalloc's segment layout in the training replay
  // (engine/reserve.cpp, allocator.cpp): median 2.22 -> 2.46 %, p90 unchanged; qwen2.5-1.5b fp32-amp
  // 4785 -> 5473 MiB (5466 measured), llama-3.1-8b ckpt 12301 -> 12517 (12521), smollm2-360m ckpt
  // 739 -> 837 (805), but qwen2.5-7b b1 s1024 3986 -> 6514 (3310): the summed |reserve error| over
  // the 40 rows 18474 -> 20221 MiB.
  // LoRA replayed (its 11 rows' reserve within 7 % of the measured, smollm2-135m r16 dropout
  // 532 -> 1265 MiB, measured 1287): median 2.46 -> 1.85 %.
  // Each bias a parameter of its own (its gradient, states and step temporaries blocks of their
  // own, engine/reserve.cpp param_tensors): median 1.85 -> 1.64 %, p90 15.58 -> 14.19 %;
  // qwen2.5-0.5b fp32-amp b8 s2048 10759 -> 1264 MiB (1239 measured), gpt2-medium fp32-amp b8
  // 1573 -> 1383 (1379). The llama-family layer in 16-bit weights replayed as recorded (engine/
  // reserve.cpp llama16_forward; traces_s14): median 1.64 -> 1.31 %; qwen2.5-7b b1 x 1024 6256 ->
  // 3309 MiB (3310), qwen2.5-0.5b b4 x 1024 1872 -> 1911 (1911).
  CHECK(std::fabs(median - 0.0131) < 0.0005);
  CHECK(std::fabs(p90 - 0.1419) < 0.0005);
  CHECK(under == 0);
}

TEST_CASE("the estimate against one process per case with expandable segments", "[accuracy][allocator][fresh]") {
  if (!fs::exists(fs::path(VRAMFIT_TRUTH_DIR) / "models")) {
    WARN("shared/truth not found beside the checkout (its models/ hold the configs): skipped");
    return;
  }
  check_rows(estimate_file("one_process_expandable.jsonl"), kOneProcessExpandable);
}
