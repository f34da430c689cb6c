// The allocator model (engine/allocator.cpp) fed the recorded allocations of real training and
// LoRA steps: tests/accuracy/alloc/fresh/traces_s8, three steps of each case in a process of its
// own on the H200 (torch 2.11; fresh.py --traces: gzip JSON {"start_reserved", "start_allocated",
// "events": [[code, size, addr], ...]}, codes a(lloc), f(ree), S (segment alloc / map), U
// (segment free / unmap), m (marker)). The process starts with the built model: the replay
// starts from one block of start_allocated bytes, then every recorded malloc and free in order.
// The measured reserve beyond the peak is the trace's own: its largest reserved (start_reserved
// plus the segment events) minus its largest allocated (each request rounded up to 512 B).
// What this shows: replaying the real sequence, the model reserves what PyTorch reserved (within
// 1.5 % or 40 MiB) with and without expandable segments, so where an estimate's reserve is off, the
// synthesized sequence (engine/reserve.cpp) is, not the allocator's rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/allocator.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/process.hpp"
#include "vramfit/spec/parse.hpp"
#include "measured.hpp"

#ifdef VRAMFIT_HAVE_ZLIB
#include <zlib.h>
#endif

namespace {

using vramfit::engine::AllocConf;
using vramfit::engine::CachingAllocator;
namespace fs = std::filesystem;

const fs::path kTraces = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh/traces_s8";
// Session 10 (fresh.py --addresses): the trace from the warm-up on ("build_events": CUDA's init, the main
// thread's cuBLAS workspace, the model's build) and the segments at the case's start and end.
const fs::path kTraces10 = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh/traces_s10";

struct Replayed {
  std::int64_t measured_mib, replayed_mib;
};

#ifdef VRAMFIT_HAVE_ZLIB
std::string gunzip(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

// The trace's mallocs and frees replayed through `a` (live: the blocks by address); returns the
// frees of blocks not allocated within the trace.
std::size_t replay_events(CachingAllocator& a, const nlohmann::json& events,
                          std::unordered_map<std::uint64_t, CachingAllocator::Handle>& live) {
  std::size_t unknown = 0;
  for (const auto& e : events) {
    const auto code = e.at(0).get<std::string>();
    const auto addr = e.at(2).get<std::uint64_t>();
    if (code == "a") {
      live[addr] = a.malloc(e.at(1).get<std::uint64_t>());
    } else if (code == "f") {
      const auto it = live.find(addr);
      if (it == live.end()) {
        ++unknown;
        continue;
      }
      a.free(it->second);
      live.erase(it);
    }
  }
  return unknown;
}

// A session-10 trace replayed from CUDA's init: the build's events, empty_cache (sync_reset), then
// the case's; the replay's reserve beyond the peak from the case's start. The measured figure is
// the recorded run's peak_reserved_bytes - peak_allocated_bytes.
Replayed replay_from_build(const fs::path& file, bool top_down) {
  const auto d = nlohmann::json::parse(gunzip(file));
  CachingAllocator a;
  if (top_down) a.top_down_addresses();
  std::unordered_map<std::uint64_t, CachingAllocator::Handle> live;
  CHECK(replay_events(a, d.at("build_events"), live) == 0);
  a.empty_cache();
  CHECK(a.allocated() == d.at("start_allocated").get<std::uint64_t>());  // the build, block by block
  a.reset_peaks();
  CHECK(replay_events(a, d.at("events"), live) == 0);
  return {(d.at("peak_reserved_bytes").get<std::int64_t>() - d.at("peak_allocated_bytes").get<std::int64_t>()) >> 20,
          static_cast<std::int64_t>(a.peak_reserved() - a.peak_allocated()) >> 20};
}

Replayed replay(const fs::path& file, bool expandable) {
  const auto d = nlohmann::json::parse(gunzip(file));
  AllocConf conf;
  conf.expandable_segments = expandable;
  CachingAllocator a(conf);
  const auto start_reserved = d.at("start_reserved").get<std::int64_t>();
  const auto start_allocated = d.at("start_allocated").get<std::int64_t>();
  a.malloc(static_cast<std::uint64_t>(start_allocated));
  a.reset_peaks();
  std::int64_t reserved = start_reserved, allocated = start_allocated, peak_reserved = reserved, peak_allocated = allocated;
  std::unordered_map<std::uint64_t, std::pair<CachingAllocator::Handle, std::int64_t>> live;
  std::size_t unknown = 0;  // frees of blocks not allocated within the trace
  for (const auto& e : d.at("events")) {
    const auto code = e.at(0).get<std::string>();
    const auto size = e.at(1).get<std::int64_t>();
    const auto addr = e.at(2).get<std::uint64_t>();
    if (code == "a") {
      const std::int64_t rounded = (size + 511) / 512 * 512;
      live[addr] = {a.malloc(static_cast<std::uint64_t>(size)), rounded};
      allocated += rounded;
      peak_allocated = std::max(peak_allocated, allocated);
    } else if (code == "f") {
      const auto it = live.find(addr);
      if (it == live.end()) {
        ++unknown;
        continue;
      }
      a.free(it->second.first);
      allocated -= it->second.second;
      live.erase(it);
    } else if (code == "S") {
      reserved += size;
      peak_reserved = std::max(peak_reserved, reserved);
    } else if (code == "U") {
      reserved -= size;
    }
  }
  CHECK(unknown == 0);  // every freed block was allocated within the trace
  return {(peak_reserved - peak_allocated) >> 20,
          static_cast<std::int64_t>(a.peak_reserved() - a.peak_allocated()) >> 20};
}
#endif

struct Expected {
  const char* file;
  bool expandable;  // the allocator model's setting (the expandable traces are also replayed without)
  int measured_mib, replayed_mib;
};

// clang-format off
const Expected kTable[] = {
    // The default allocator (each within 1.5 % or 22 MiB).
    {"default/gpt2-medium__lora__bf16__adamw__r16-c_attn-drop0.05__b4s1024.json.gz", false, 458, 448},
    {"default/gpt2-medium__train__fp32-ampbf16__adamw__b8s1024.json.gz", false, 1379, 1377},
    {"default/gpt2__lora__bf16__adamw__r16-all-linear__b4s1024__ckpt.json.gz", false, 574, 569},
    {"default/gpt2__train__bf16__adamw__b8s1024__ckpt.json.gz", false, 568, 554},
    {"default/llama-3.2-1b__train__fp32-ampbf16__adamw__b8s2048__ckpt.json.gz", false, 5171, 5193},
    {"default/qwen2.5-0.5b__lora__bf16__adamw__r16-all-linear__b4s2048__ckpt.json.gz", false, 3078, 3066},
    {"default/qwen2.5-0.5b__lora__bf16__adamw__r16-q+v__b4s1024.json.gz", false, 1416, 1436},
    {"default/qwen2.5-1.5b__lora__bf16__adamw__r64-all-linear__b8s4096__ckpt.json.gz", false, 13987, 13851},
    // expandable_segments:True. A free block at the segment's mapped end is taken only when no
    // other cached block fits (get_free_block ranks it by the size it can grow into); ranked by
    // its mapped size instead, the first and third replay 4853 and 1297 MiB. The second is 38 MiB
    // over: the replay's start has the build's free bytes as one block at the end.
    {"expandable/qwen2.5-0.5b__train__fp32-ampbf16__adamw__b8s2048.json.gz", true, 4833, 4833},
    {"expandable/qwen2.5-1.5b__train__bf16__adamw__b4s1024.json.gz", true, 1389, 1427},
    {"expandable/qwen2.5-1.5b__train__fp32-ampbf16__adamw__b4s1024.json.gz", true, 1277, 1277},
    // The same steps under the default allocator (the measured column stays the expandable run's).
    // The default runs of two of these cases (one_process.jsonl) reserved 5466 MiB beyond the peak
    // for qwen2.5-1.5b fp32-amp (replayed 5464: both put the backward's cuBLAS workspace in a freed
    // fp32-logits segment) and 1239 for qwen2.5-0.5b fp32-amp, whose run carved the workspace from
    // a free 56 MiB segment; the replay, whose start lacks the built model's 82 segments, takes a
    // logits segment, so the next logits need a new 9496 MiB one (10619; 10732 from the built
    // model's segments, engine/reserve.cpp: with ties between equal-size free blocks broken by
    // the highest address instead of the lowest, 1239: cudaMalloc's address order decides).
    {"expandable/qwen2.5-0.5b__train__fp32-ampbf16__adamw__b8s2048.json.gz", false, 4833, 10619},
    {"expandable/qwen2.5-1.5b__train__bf16__adamw__b4s1024.json.gz", false, 1389, 2620},
    {"expandable/qwen2.5-1.5b__train__fp32-ampbf16__adamw__b4s1024.json.gz", false, 1277, 5464},
};
// clang-format on

}  // namespace

TEST_CASE("the allocator model replays recorded one-process training and LoRA steps", "[accuracy][allocator][recorded]") {
#ifndef VRAMFIT_HAVE_ZLIB
  WARN("built without zlib: the recorded traces (gzip) are not replayed");
#else
  for (const Expected& e : kTable) {
    const Replayed r = replay(kTraces / e.file, e.expandable);
    if (std::getenv("VRAMFIT_PRINT_RECORDED_TABLE"))
      std::printf("    {\"%s\", %s, %lld, %lld},\n", e.file, e.expandable ? "true" : "false",
                  static_cast<long long>(r.measured_mib), static_cast<long long>(r.replayed_mib));
    INFO(e.file << (e.expandable ? " (expandable)" : " (default)") << ": measured " << r.measured_mib << " MiB, replayed "
                << r.replayed_mib);
    CHECK(r.measured_mib == e.measured_mib);
    CHECK(r.replayed_mib == e.replayed_mib);
  }
#endif
}

TEST_CASE("the allocator model replays recorded one-process steps from CUDA's init", "[accuracy][allocator][recorded]") {
#ifndef VRAMFIT_HAVE_ZLIB
  WARN("built without zlib: the recorded traces (gzip) are not replayed");
#else
  // Reserved beyond the peak, MiB: the recorded run's, and its events replayed from CUDA's init.
  // The build replays block for block (start_allocated exact). With the segments' real addresses
  // (cudaMalloc's, from the trace; a test-side driver) the replay gives the recorded reserve within
  // 1 MiB for all five: 8490, 3144, 1239, 5466, 1287. The lowest address wins among equal-size free
  // blocks (CUDACachingAllocator's BlockComparatorSize), and cudaMalloc placed segments over 20 MiB
  // top-down, each below the last, and those of 20 MiB and less in a region above them that grows
  // upward: the model with that layout (top_down_addresses(), as the training replay uses it) gives
  // four of five within 1 MiB (replayed column). Numbered in creation order (the model's default,
  // second column) gemma-2-2b's backward workspace goes into another 3000 MiB logits segment than
  // the recorded one. qwen2.5-0.5b's second-step logits do not find the freed segment the recorded
  // run reused (a fourth 9496 MiB segment) either way: its build's freed ranges were reused by later
  // segments, which the layout does not place.
  struct Row {
    const char* file;
    int measured_mib, replayed_mib, creation_order_mib;
  };
  // clang-format off
  const Row rows[] = {
      {"traces_s10/fresh/gemma-2-2b__train__bf16__adamw__b3s1024.json.gz", 8490, 8490, 5006},
      {"traces_s10/fresh/qwen3-0.6b__train__fp32__adamw-forloop__b6s1536-ckpt.json.gz", 3144, 3144, 3072},
      {"traces_s10/fresh/qwen2.5-0.5b__train__fp32-ampbf16__adamw__b8s2048.json.gz", 1239, 10734, 10732},
      {"traces_s10/fresh/qwen2.5-1.5b__train__fp32-ampbf16__adamw__b4s1024.json.gz", 5466, 5467, 5484},
      {"traces_s10/fresh/smollm2-135m__lora__bf16__adamw__r16-q+k+v+o-drop0.05__b4s1024.json.gz", 1287, 1287, 1287},
      // Session 14, on an H100 (traces_s14/run_s14.sh): gpt_neox's layer (engine/reserve.cpp neox_forward).
      {"traces_s14/fresh/pythia-410m__train__bf16__adamw__b2s1024.json.gz", 233, 233, 233},
  };
  // clang-format on
  for (const Row& e : rows) {
    CHECK(replay_from_build(kTraces10.parent_path() / e.file, false).replayed_mib == e.creation_order_mib);
    const Replayed r = replay_from_build(kTraces10.parent_path() / e.file, true);
    if (std::getenv("VRAMFIT_PRINT_RECORDED_TABLE"))
      std::printf("      {\"%s\", %lld, %lld, %d},\n", e.file, static_cast<long long>(r.measured_mib),
                  static_cast<long long>(r.replayed_mib), e.creation_order_mib);
    INFO(e.file << ": measured " << r.measured_mib << " MiB, replayed " << r.replayed_mib);
    CHECK(r.measured_mib == e.measured_mib);
    CHECK(r.replayed_mib == e.replayed_mib);
  }
#endif
}

#ifdef VRAMFIT_HAVE_ZLIB
TEST_CASE("measure.py's one process keeps the segment the first backward's cuBLAS workspace lands in",
          "[accuracy][allocator][recorded][history]") {
  // traces_s10/history (history.py): heldout-arch's cases in measure.py's order and process, recorded.
  // gemma-2-2b bf16 b3 x 1024 training, the process's first backward, carved the backward thread's
  // 32 MiB workspace from a freed 3000 MiB fp32-logits segment (3 x 1024 x 256000 x 4 bytes); after
  // empty_cache that segment stays (one allocated block), and every later case (gpt2-large,
  // pythia-410m, qwen3-0.6b) allocates inside it: their reserved is that segment, the main thread's
  // 32 MiB workspace segment and small-pool segments.
  const auto seg_of = [](const fs::path& f) {
    const auto d = nlohmann::json::parse(gunzip(kTraces10 / f));
    std::vector<std::pair<std::int64_t, std::int64_t>> pinned;  // (segment MiB, the live block's offset MiB)
    for (const auto& s : d.at("start_segments")) {
      if (s.at(1).get<std::int64_t>() < (1LL << 30)) continue;
      for (const auto& b : s.at(3))
        if (b.at(2).get<int>() == 1 && b.at(1).get<std::int64_t>() == (32LL << 20))
          pinned.emplace_back(s.at(1).get<std::int64_t>() >> 20, b.at(0).get<std::int64_t>() >> 20);
    }
    return std::make_pair(pinned, (d.at("start_reserved").get<std::int64_t>() >> 20));
  };
  using P = std::vector<std::pair<std::int64_t, std::int64_t>>;
  CHECK(seg_of("history/gemma-2-2b__train__bf16__adamw__b3s1024.json.gz").first.empty());  // before its backward
  for (const char* f : {"gpt2-large__generate__bf16__b3s700n32.json.gz", "pythia-410m__forward__bf16__b3s1536.json.gz",
                        "pythia-410m__generate__bf16__b8s200n100.json.gz", "qwen3-0.6b__forward__bf16__b1s1536.json.gz"}) {
    INFO(f);
    const auto [pinned, start] = seg_of(fs::path("history") / f);
    CHECK(pinned == P{{3000, 2625}});
    CHECK(start >= 3034);  // 3000 + 32 (main thread's workspace) + small-pool segments, with the model built inside
    CHECK(start <= 3036);
  }
  // traces_s10/history-public (run4.sh): shared/truth public's first process, its first backward
  // (gpt2-medium bf16 b4 x 1024 training) then gpt2 and smollm2-135m cases: the workspace 98 MiB into
  // a 786 MiB fp32-logits segment (4 x 1024 x 50257 x 4 bytes), kept; every later case starts at
  // 820 (gpt2) or 874 MiB (smollm2-135m) reserved, and peaked where shared/truth has it (within 2 MiB).
  CHECK(seg_of("history-public/gpt2-medium__train__bf16__adamw__b4s1024.json.gz").first.empty());
  for (const char* f : {"gpt2__forward__bf16__b8s1024.json.gz", "gpt2__forward__bf16__b1s1024.json.gz",
                        "gpt2__generate__bf16__b1s512n256.json.gz", "gpt2__forward__fp16__b2s1024.json.gz",
                        "smollm2-135m__forward__bf16__b4s1024__eager.json.gz",
                        "smollm2-135m__generate__bf16__b1s512n256.json.gz"}) {
    INFO(f);
    const auto d = nlohmann::json::parse(gunzip(kTraces10 / "history-public" / f));
    std::vector<std::pair<std::int64_t, std::int64_t>> pinned;
    for (const auto& s : d.at("start_segments"))
      for (const auto& b : s.at(3))
        if (s.at(1).get<std::int64_t>() > (32LL << 20) && b.at(2).get<int>() == 1 && b.at(1).get<std::int64_t>() == (32LL << 20))
          pinned.emplace_back(s.at(1).get<std::int64_t>() >> 20, b.at(0).get<std::int64_t>() >> 20);
    CHECK(pinned == P{{786, 98}});
  }
}
#endif

namespace {

// One of tests/accuracy/heldout's truth files (configs beside results/), measured in one process.
vramfit::test::Measured heldout_process(const std::string& file) {
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/heldout";
  return vramfit::test::evaluate_measured(dir / "results", file, dir);
}

}  // namespace

TEST_CASE("estimate_in_process: the first backward pins its workspace's segment for the cases after it",
          "[accuracy][allocator][history]") {
  using namespace vramfit;
  const auto process = heldout_process("heldout-arch.jsonl");
  const auto& cases = process.cases;
  const auto& specs = process.models;
  const auto models = specs.of_all(cases);
  const auto find = [&](const std::string& id) {
    return static_cast<std::size_t>(
        std::find_if(cases.begin(), cases.end(), [&](const auto& c) { return c.id == id; }) - cases.begin());
  };
  // The replay of gemma-2-2b's training puts the workspace in a 3000 MiB fp32-logits segment at
  // 2625 MiB into it, as measured (gemma's layer, its soft-capped logits and cudaMalloc's segment
  // layout replayed; in creation order, 1125 MiB into another one).
  const std::size_t train = find("gemma-2-2b/train/bf16/adamw/b3s1024");
  const std::size_t pythia = find("pythia-410m/forward/bf16/b3s1536");
  engine::ProcessHistory h;
  const auto fresh = engine::estimate(*models[train], cases[train].workload);
  const auto first = engine::estimate_in_process(*models[train], cases[train].workload, h);
  // The first backward's case is its own fresh process: the same peak and reserve. Its context is the
  // fresh process's (init, a forward's, training's and cuDNN's forward and backward kernels, two
  // attention graphs: 768.8 MiB; measured alone 766.8, heldout-arch-fresh), not the 938.8 allowance.
  CHECK(first.peak_allocated == fresh.peak_allocated);
  CHECK(first.allocator_reserve == fresh.allocator_reserve);
  // Its synthesized step (gemma's layer, the soft-capped logits, Adam's two states, cudaMalloc's
  // segment layout) reserves what the recorded one did beyond its peak (traces_s10/fresh: 8490 MiB;
  // 4253 with llama's layer and one block of both states).
  CHECK(fresh.allocator_reserve.value() >> 20 == 8492);
  CHECK(fresh.cuda_context == engine::kCudaContext);
  CHECK(first.cuda_context.value() == 718077952ULL + (84ULL << 20));
  CHECK(h.pinned_segment == 3000ULL << 20);
  CHECK(h.pinned_offset == 2625ULL << 20);
  CHECK_FALSE(h.unknown);
  // A later small model: its build and forward fit in the pinned segment's free parts, so what is
  // reserved is that segment; in a process of its own the estimate's reserve is its own segments'.
  engine::ProcessHistory after = h;
  const auto later = engine::estimate_in_process(*models[pythia], cases[pythia].workload, after);
  const auto alone = engine::estimate(*models[pythia], cases[pythia].workload);
  CHECK(after.pinned_segment == h.pinned_segment);  // a forward leaves the history as it was
  CHECK(later.peak_allocated == alone.peak_allocated);
  CHECK(alone.allocator_reserve.value() >> 20 == 278);
  CHECK(later.allocator_reserve.value() >> 20 == 1741);
  // A process with no backward yet estimates the reserve as engine::estimate does; its context is
  // the fresh process's after a bf16 forward (696.8 MiB, measured 694.8) instead of the allowance.
  engine::ProcessHistory none;
  const auto first_case = engine::estimate_in_process(*models[pythia], cases[pythia].workload, none);
  CHECK(first_case.device_total - first_case.cuda_context == alone.device_total - alone.cuda_context);
  CHECK(first_case.cuda_context.value() == 718077952ULL + (12ULL << 20));

  // The whole file as measure.py ran it (one process): heldout-arch's 7 cases under by more than 5 %
  // in processes of their own become 2 (gemma-2-2b LoRA r64 and pythia-410m bf16 training: reserve
  // misses the 938.8 MiB allowance hid while the process's context was 797-855 MiB, now modelled
  // within 2 MiB); the small-model cases after gemma's training are over. gemma-2-2b's own training
  // was replayed 4.2 GiB under (-8.8 % alone, -9.1 % here) before its layer was replayed as gemma's
  // (engine/reserve.cpp, fp32_norm_step): +0.4 % alone. gemma-2-2b LoRA r64 is replayed since (LoRA's
  // step, llama's layer with gemma-2's soft-capped logits): +0.1 % alone, -1.0 % here (-5.4 % with
  // LoRA's fitted share; -6.6 % replayed after gemma's pinned segment with segments in creation
  // order: 635 MiB of reserve, top-down 1635, measured 1742). pythia-410m bf16 training was under
  // (-6.68 %, gpt_neox's layer replayed as llama's and each linear's weight and bias one block) until
  // its layer was replayed as recorded (traces_s14) and each bias made a parameter of its own: over.
  std::vector<accuracy::CaseResult> own;
  for (std::size_t i = 0; i < cases.size(); ++i) own.push_back(accuracy::evaluate(cases[i], *models[i]));
  const auto one = accuracy::evaluate_in_process(cases, models);
  CHECK(one.processes == 1);
  CHECK(one.unknown == 0);
  std::vector<std::string> under_own, under_one;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].status != "ok") continue;
    if (own[i].device_error < -0.05) under_own.push_back(cases[i].id);
    if (one.results[i].device_error < -0.05) under_one.push_back(cases[i].id);
  }
  CHECK(under_own.size() == 7);
  CHECK(under_one.empty());
  // gemma-2-2b LoRA r64, replayed after gemma's training pinned its segment: 1635 MiB of reserve
  // (measured 1742).
  const std::size_t lora = find("gemma-2-2b/lora/bf16/adamw/r64-all-linear/b1s1024");
  CHECK(std::fabs(one.results[lora].device_error + 0.0098) < 0.0005);
}

TEST_CASE("estimate_in_process on shared/truth public: the pinned segment as measured, the gpt2 cases over",
          "[accuracy][allocator][history]") {
  using namespace vramfit;
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR).parent_path() / "shared/truth";
  if (!fs::exists(dir / "results/public.jsonl")) {
    WARN("../shared/truth is not there: skipped");
    return;
  }
  const auto process = test::evaluate_measured(dir / "results", "public.jsonl", dir);
  const auto& cases = process.cases;
  const auto& specs = process.models;
  const auto models = specs.of_all(cases);
  // The first backward of the first process: the replay puts the workspace 100 MiB into a 786 MiB
  // fp32-logits segment; recorded (traces_s10/history-public): 98 MiB into a 786 MiB one.
  engine::ProcessHistory h;
  for (const auto& c : cases) {
    if (c.id == "gpt2-medium/train/bf16/adamw/b4s1024") {
      (void)engine::estimate_in_process(specs.of(c), c.workload, h);
      break;
    }
    (void)engine::estimate_in_process(specs.of(c), c.workload, h);
  }
  CHECK(h.pinned_segment == 786ULL << 20);
  CHECK(h.pinned_offset == 105023488);  // 100.16 MiB
  const auto one = accuracy::evaluate_in_process(cases, models);
  CHECK(one.processes == 3);  // measure.py resumed twice (its context drops: 1277 -> 739, 929 -> 767 MiB)
  CHECK(one.unknown == 0);
  std::vector<std::string> under;
  std::vector<const accuracy::CaseResult*> ptrs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ptrs.push_back(&one.results[i]);
    if (cases[i].status == "ok" && one.results[i].device_error < -0.05) under.push_back(cases[i].id);
  }
  // Own process: 8 under (4 gpt2, 3 smollm2-135m, qwen2.5-0.5b generate b32). In one process the
  // gpt2 cases are over; the cases late in the first process, whose context had grown to 1053-1277
  // MiB against the allowance's 938.8, are modelled with the process's context (engine/context.hpp:
  // kernels loaded once, a cuDNN attention graph per SDPA shape; was 7 under, 1.41 % / 5.95 %).
  // Left: llama-3.1-8b fused AdamW checkpointed (its reserve). memory_allocated() counting whole
  // blocks (block_rounding) moved the median 0.69 -> 0.62 %; Adam's two states as blocks of their
  // own and cudaMalloc's segment layout in the training replay 0.62 -> 0.66 % (p90 2.44 -> 2.47 %;
  // llama-3.1-8b fused -5.96 -> -5.61 %); LoRA's reserve replayed (its 23 cases' one-process errors
  // -4.5 .. +9.6 %, were -3.5 .. +2.1 %: gpt2 r16 all-linear checkpointed +2.0 -> +9.6 %) 0.66 -> 0.55 %;
  // each bias a parameter of its own (engine/reserve.cpp param_tensors) 0.55 -> 0.42 %, p90 2.47 -> 2.31 %;
  // the llama-family layer in 16-bit weights replayed as recorded (llama16_forward) 0.42 -> 0.38 %,
  // p90 2.31 -> 2.22 %.
  CHECK(under == std::vector<std::string>{"llama-3.1-8b/train/bf16/adamw-fused/b2s2048/ckpt"});
  const auto st = accuracy::stats(ptrs, true);
  CHECK(st.median_abs == Approx(0.0038).margin(0.0001));
  CHECK(st.p90_abs == Approx(0.0222).margin(0.0001));
}

// heldout's process: its first backward is gpt2-medium LoRA r64 all-linear b2 x 1024 checkpointed
// (the fourth case). Recorded (heldout-traced, session 12's res12 traces; the backward thread's
// first cuBLAS call after the lm_head's input gradient): the 32 MiB workspace went into a cached
// 32 MiB segment at offset 0 (made by forward's fp32 intermediate-sized adapter blocks). LoRA's
// replay puts it there too, so the 53 cases after it are estimated after that segment instead of
// each as a process of its own (`unknown`, when LoRA's reserve was a fitted share).
TEST_CASE("estimate_in_process on heldout: a LoRA first backward pins its workspace as recorded",
          "[accuracy][allocator][history]") {
  using namespace vramfit;
  const auto process = heldout_process("heldout.jsonl");
  const auto& cases = process.cases;
  const auto& specs = process.models;
  const auto models = specs.of_all(cases);
  engine::ProcessHistory h;
  std::size_t first = 0;
  for (; first < cases.size() && h.pinned_segment == 0; ++first)
    (void)engine::estimate_in_process(*models[first], cases[first].workload, h);
  REQUIRE(first == 4);
  CHECK(cases[first - 1].id == "gpt2-medium/lora/bf16/adamw/r64-all-linear/b2s1024-ckpt");
  CHECK(h.pinned_segment == 32ULL << 20);
  CHECK(h.pinned_offset == 0);
  CHECK_FALSE(h.unknown);
  // The LoRA case itself: 529 MiB of reserve measured; the replay 535 (the fitted share gave 286,
  // device total -6.89 %).
  const auto lora = engine::estimate(*models[first - 1], cases[first - 1].workload);
  CHECK(lora.allocator_reserve.value() >> 20 == 535);
  const auto one = accuracy::evaluate_in_process(cases, models);
  CHECK(one.processes == 1);
  CHECK(one.unknown == 0);  // was 53
  std::vector<std::string> under;
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (cases[i].status == "ok" && one.results[i].device_error < -0.05) under.push_back(cases[i].id);
  // Left under by more than 5 %: one checkpointed Adafactor case whose reserve the replay misses
  // after that segment too (-5.1 %). llama-3.2-1b AdamW(foreach=False) b3 x 1024 ckpt was -5.8 % until
  // the for-loop step's temporaries were replayed parameter by parameter (StepTemp::per_param_x2).
  CHECK(under == std::vector<std::string>{"qwen2.5-1.5b/train/fp32/adafactor/b1s640-ckpt"});
  CHECK(std::fabs(one.results[first - 1].device_error) < 0.001);  // gpt2-medium LoRA: -6.89 -> +0.00 %
}

namespace {

// A fresh-process truth file's cases in `rows`' order: the reserve beyond the peak, MiB, the
// replay's and the run's (peak_reserved - peak_allocated).
struct ReserveRow {
  const char* id;
  int estimated_mib, measured_mib;
};

void check_reserves(const vramfit::test::Measured& m, std::span<const ReserveRow> rows) {
  using namespace vramfit;
  REQUIRE(m.results.size() == rows.size());
  for (std::size_t i = 0; i < m.results.size(); ++i) {
    const accuracy::TruthCase& c = *m.results[i].truth;
    const auto b = engine::estimate(m.models.of(c), c.workload);
    const auto est = static_cast<int>(b.allocator_reserve.value() >> 20);
    const auto measured = static_cast<int>((c.peak_reserved.value() - c.peak_allocated.value()) >> 20);
    INFO(c.id << ": reserve " << est << " MiB, measured " << measured);
    CHECK(c.id == rows[i].id);
    CHECK(est == rows[i].estimated_mib);
    CHECK(measured == rows[i].measured_mib);
  }
}

}  // namespace

// gpt_neox's layer in the training replay (engine/reserve.cpp neox_forward / neox_backward), against
// the session-14 runs on an H100, each case in a process of its own (traces_s14/fresh-arch.jsonl,
// fresh.py --addresses): the reserve beyond the peak, MiB, estimated and measured. pythia-410m bf16
// AdamW b2 x 1024 was replayed with llama's layer and each linear's weight and bias as one block
// before: 127 MiB (measured 234); with gpt_neox's layer alone 386 (the 6.006 and 8.002 MiB blocks no
// longer pack two to a freed 12 and 16 MiB segment, where the recorded step put Adam's states).
TEST_CASE("the training replay lays out gpt_neox's layer as the recorded pythia-410m steps", "[accuracy][allocator][recorded]") {
  using namespace vramfit;
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh/traces_s14";
  const auto m = test::evaluate_measured(dir, "fresh-arch.jsonl", fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/heldout");
  const ReserveRow rows[] = {
      {"pythia-410m/train/bf16/adamw/b2s1024", 233, 233},
      {"pythia-410m/train/bf16/adamw-forloop/b3s1536", 860, 872},
      // Autocast over fp32 weights is not this sequence (llama's layer with its casts): over.
      {"pythia-410m/train/fp32-ampbf16/sgd-momentum/b1s1536", 287, 181},
  };
  check_reserves(m, rows);
}

// The llama-family layer in 16-bit weights (engine/reserve.cpp llama16_forward / llama16_backward)
// against the session-14 runs on an H100, each case in a process of its own
// (traces_s14/fresh-public.jsonl): reserve beyond the peak, MiB. qwen2.5-7b bf16 AdamW b1 x 1024
// was replayed with layer_forward's llama layer at 6256 MiB (device total +4.0 %): without
// RMSNorm's fp32 blocks, with a transposed copy SDPA's output does not need and the residual sum
// kept, its second step made 13 new 130 MiB segments for the MLP weights' gradients. The
// checkpointed llama-3.1-8b keeps layer_forward (its recompute is not this sequence).
TEST_CASE("the training replay lays out the llama-family layer as the recorded qwen2.5-7b steps", "[accuracy][allocator][recorded]") {
  using namespace vramfit;
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh/traces_s14";
  const auto m = test::evaluate_measured(dir, "fresh-public.jsonl", VRAMFIT_TRUTH_DIR);
  const ReserveRow rows[] = {
      {"qwen2.5-7b/train/bf16/adamw/b1s1024", 3309, 3310},
      {"llama-3.1-8b/train/bf16/adamw-fused/b2s2048/ckpt", 4365, 4291},
  };
  check_reserves(m, rows);
}

// Six llama-family bf16 AdamW training jobs not in any truth file, estimated (traces_s14/
// predictions_run2.txt) before they ran on an H100, each in a process of its own (run2_s14.sh,
// fresh-s14b.jsonl; traces in fresh2/). Every reserve within 4 MiB of the measured one. The first
// is the README's first example: estimated 78.70 GiB, TIGHT on the card's 79.18; it ran, at
// 79652 MiB reserved + 767 MiB of context (78.53 GiB; the estimate's context is the 938.8 MiB
// allowance).
TEST_CASE("the llama-family training replay predicts six unmeasured jobs' reserve on an H100", "[accuracy][allocator][recorded]") {
  using namespace vramfit;
  const fs::path dir = fs::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/alloc/fresh/traces_s14";
  const auto m = test::evaluate_measured(dir, "fresh-s14b.jsonl", VRAMFIT_TRUTH_DIR);
  const ReserveRow rows[] = {
      {"llama-3.1-8b/train/bf16/adamw/b1s2048", 3001, 3005},
      {"llama-3.2-1b/train/bf16/adamw/b4s2048", 1459, 1460},
      {"qwen2.5-1.5b/train/bf16/adamw/b4s2048", 1743, 1741},
      {"smollm2-360m/train/bf16/adamw/b8s1024", 1220, 1218},
      {"qwen2.5-0.5b/train/bf16/adamw/b8s2048", 3053, 3050},
      {"qwen2.5-7b/train/bf16/adamw/b2s1024", 6501, 6502},
  };
  check_reserves(m, rows);
  // Peak allocated: each within 0.01 % of the measured one.
  for (const auto& r : m.results) CHECK(std::fabs(r.error) < 0.0001);
}
