// Tests of the OOM scanner (src/doctor/oom.cpp): exact byte values for every fixture, every
// format, embedding in logs, several messages, and garbage that must not crash.
//
// Expected values: PyTorch prints sizes with two decimals, so a parsed size is the printed
// figure times its unit, rounded to the nearest byte: "3.44 MiB" == round(3.44 * 2^20) ==
// 3607101 (computed with Python's Decimal, ROUND_HALF_UP).

#include <catch2/catch.hpp>

#include "vramfit/render/explain.hpp"

#include <cstdint>
#include <random>
#include <string>

#include "fixtures.hpp"
#include "vramfit/doctor/oom.hpp"

using vramfit::Bytes;
using namespace vramfit::doctor;
using vramfit::doctor::test::fixture;

namespace {

Bytes B(std::uint64_t v) { return Bytes{v}; }

// The only message of a text, checked to be the only one.
OomMessage only(const std::string& text) {
  const OomScan s = scan(text);
  REQUIRE(s.messages.size() == 1);
  return s.messages.front();
}

}  // namespace

// --- sizes ---------------------------------------------------------------------------------------

TEST_CASE("parse_torch_size: the printed figure times the unit, to the nearest byte", "[doctor]") {
  CHECK(parse_torch_size("2.00 GiB") == B(2147483648));
  CHECK(parse_torch_size("3.44 MiB") == B(3607101));  // 3.44 * 2^20 = 3607101.44
  CHECK(parse_torch_size("0 bytes") == B(0));
  CHECK(parse_torch_size("512 bytes") == B(512));
  CHECK(parse_torch_size("1024.00 KiB") == B(1048576));
  CHECK(parse_torch_size("1.5 TiB") == B(1649267441664));
  CHECK(parse_torch_size("1 PiB") == B(1ULL << 50));
  CHECK(parse_torch_size("7 B") == B(7));
  CHECK(parse_torch_size("1 byte") == B(1));
  // Older spellings meant binary units in PyTorch's formatters.
  CHECK(parse_torch_size("15046 MB") == B(15776874496));
  CHECK(parse_torch_size("18475 KB") == B(18918400));
  CHECK(parse_torch_size("8.89 GB") == B(9545564815));
  CHECK(parse_torch_size("1 TB") == B(1ULL << 40));
  // Case and spacing do not matter.
  CHECK(parse_torch_size("2.00gib") == B(2147483648));
  CHECK(parse_torch_size("  2.00   GIB ") == B(2147483648));
  // Rounding half up at the byte.
  CHECK(parse_torch_size("0.5 bytes") == B(1));
  CHECK(parse_torch_size("1.005 KiB") == B(1029));  // 1029.12
}

TEST_CASE("parse_torch_size: absurd, truncated or foreign numbers are not parsed", "[doctor]") {
  CHECK_FALSE(parse_torch_size("2."));
  CHECK_FALSE(parse_torch_size("2. GiB"));
  CHECK_FALSE(parse_torch_size("1e400 GiB"));
  CHECK_FALSE(parse_torch_size("99999999999999999999 GiB"));
  CHECK_FALSE(parse_torch_size("17179869184.00 GiB"));  // exactly 2^64 bytes
  CHECK(parse_torch_size("17179869183.99 GiB") == B(18446744073698814198ULL));
  CHECK(parse_torch_size("18446744073709551615 bytes") == B(18446744073709551615ULL));
  CHECK_FALSE(parse_torch_size("18446744073709551616 bytes"));
  CHECK_FALSE(parse_torch_size("123456789012345678901 bytes"));  // 21 digits
  CHECK_FALSE(parse_torch_size("GiB"));
  CHECK_FALSE(parse_torch_size("-2.00 GiB"));
  CHECK_FALSE(parse_torch_size("2.00 GiB extra"));
  CHECK_FALSE(parse_torch_size("2.00 XB"));
  CHECK_FALSE(parse_torch_size(""));
  // More than 18 decimals: the rest are ignored, not an error.
  CHECK(parse_torch_size("1.0000000000000000009999 GiB") == B(1073741824));
}

TEST_CASE("format_torch_size prints like c10's format_size and round-trips", "[doctor]") {
  CHECK(format_torch_size(B(0)) == "0 bytes");
  CHECK(format_torch_size(B(1024)) == "1024 bytes");
  CHECK(format_torch_size(B(1025)) == "1.00 KiB");
  CHECK(format_torch_size(B(1048576)) == "1024.00 KiB");
  CHECK(format_torch_size(B(1048577)) == "1.00 MiB");
  CHECK(format_torch_size(B(3607101)) == "3.44 MiB");
  CHECK(format_torch_size(B(1073741824)) == "1024.00 MiB");
  CHECK(format_torch_size(B(150109106995)) == "139.80 GiB");
  CHECK(format_torch_size(B(18446744073709551615ULL)) == "17179869184.00 GiB");
  // Every two-decimal figure parses and prints back the same.
  for (const char* s : {"2.00 GiB", "3.44 MiB", "45.12 MiB", "139.80 GiB", "1.01 GiB", "1019.69 MiB",
                        "1.01 KiB", "999.99 KiB", "512 bytes"}) {
    const auto b = parse_torch_size(s);
    REQUIRE(b);
    CHECK(format_torch_size(*b) == s);
  }
  // Random sizes: the parsed text is within half a hundredth of its unit of the size, and
  // parse(format(parse(text))) == parse(text). (At a unit's edge the text may change: 2^30 + 1
  // bytes print "1.00 GiB", which is 2^30 bytes, which prints "1024.00 MiB", as in PyTorch.)
  std::mt19937_64 rng(20240607);
  for (int i = 0; i < 5000; ++i) {
    const Bytes b{rng() >> (rng() % 64)};
    const std::string text = format_torch_size(b);
    const auto parsed = parse_torch_size(text);
    REQUIRE(parsed);
    const std::uint64_t unit = text.ends_with("GiB")   ? 1ULL << 30
                               : text.ends_with("MiB") ? 1ULL << 20
                               : text.ends_with("KiB") ? 1ULL << 10
                                                       : 1;
    const std::uint64_t diff = *parsed > b ? parsed->value() - b.value() : b.value() - parsed->value();
    CHECK(diff <= unit / 200 + 1);
    CHECK(parse_torch_size(format_torch_size(*parsed)) == parsed);
  }
}

TEST_CASE("allocator_request_size follows CUDACachingAllocator's rounding", "[doctor]") {
  CHECK(allocator_request_size(B(1)) == B(2ULL << 20));           // small pool segment
  CHECK(allocator_request_size(B(1ULL << 20)) == B(2ULL << 20));  // <= 1 MiB
  CHECK(allocator_request_size(B((1ULL << 20) + 1)) == B(20ULL << 20));
  CHECK(allocator_request_size(B((10ULL << 20) - 512)) == B(20ULL << 20));
  CHECK(allocator_request_size(B(10ULL << 20)) == B(10ULL << 20));
  CHECK(allocator_request_size(B((10ULL << 20) + 1)) == B(12ULL << 20));
  // fp32 logits of qwen2.5-1.5b at batch 16, seq 4096: 16 * 4096 * 151936 * 4 bytes
  // (37.09375 GiB), already a multiple of 2 MiB; PyTorch printed "37.09 GiB" on the H200.
  CHECK(allocator_request_size(B(39829110784)) == B(39829110784));
  CHECK(allocator_request_size(B(18446744073709551615ULL)) == B(18446744073709551615ULL));
}

// --- each fixture, exact -------------------------------------------------------------------------

TEST_CASE("fixture legacy_free_exceeds_request", "[doctor]") {
  const OomMessage m = only(fixture("legacy_free_exceeds_request.txt"));
  CHECK(m.format == "legacy");
  CHECK(m.backend == "CUDA");
  CHECK(m.gpu == 0);
  CHECK(m.requested == B(2426656522));
  CHECK(m.total == B(6442450944));
  CHECK(m.allocated_by_pytorch == B(819556516));
  CHECK(m.free == B(3253437727));
  CHECK(m.reserved_total == B(1331439862));
  CHECK_FALSE(m.reserved_unallocated);
  CHECK_FALSE(m.process_in_use);
  CHECK(m.complete);
  CHECK(m.line == 1);
  CHECK(m.excerpt ==
        "CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 781.59 MiB "
        "already allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch)");
}

TEST_CASE("fixture current_chained_exception", "[doctor]") {
  const OomMessage m = only(fixture("current_chained_exception.txt"));
  CHECK(m.format == "current");
  CHECK(m.backend == "CUDA");
  CHECK(m.gpu == 0);
  CHECK(m.requested == B(24459838751));
  CHECK(m.total == B(33790655201));
  CHECK(m.free == B(13668733420));
  CHECK(m.process_in_use == B(20111184364));
  CHECK(m.allocated_by_pytorch == B(9749575762));
  CHECK(m.reserved_unallocated == B(10039486054));
  CHECK(m.others.empty());
  CHECK(m.alloc_conf_var == "PYTORCH_CUDA_ALLOC_CONF");
  CHECK_FALSE(m.mentions_max_split_size);
  CHECK(m.complete);
  CHECK(m.line == 1);
}

TEST_CASE("fixture v21_capacty_no_process_info (PyTorch 2.1's typo)", "[doctor]") {
  const OomMessage m = only(fixture("v21_capacty_no_process_info.txt"));
  CHECK(m.format == "current");
  CHECK(m.requested == B(1825361101));
  CHECK(m.total == B(6442450944));
  CHECK(m.free == B(0));
  CHECK_FALSE(m.process_in_use);
  CHECK(m.allocated_by_pytorch == B(3146063544));
  CHECK(m.reserved_unallocated == B(2469606195));
  CHECK(m.alloc_conf_var.empty());
  CHECK(m.mentions_max_split_size);
  CHECK(m.complete);
}

TEST_CASE("fixture request_larger_than_card", "[doctor]") {
  const OomMessage m = only(fixture("request_larger_than_card.txt"));
  CHECK(m.format == "current");
  CHECK(m.requested == B(59667833160));
  CHECK(m.total == B(12884901888));
  CHECK(m.free == B(9685151252));
  CHECK(m.allocated_by_pytorch == B(1032344044));
  CHECK(m.reserved_unallocated == B(485994004));
  CHECK(m.complete);
  CHECK(m.line == 2);  // after the traceback line
}

TEST_CASE("fixture legacy_windows_allocated_over_total", "[doctor]") {
  const OomMessage m = only(fixture("legacy_windows_allocated_over_total.txt"));
  CHECK(m.format == "legacy");
  CHECK(m.requested == B(11521249772));
  CHECK(m.total == B(8589934592));
  CHECK(m.allocated_by_pytorch == B(18468359373));
  CHECK(m.free == B(0));
  CHECK(m.reserved_total == B(20562155930));
  CHECK(m.mentions_max_split_size);
  CHECK(m.complete);
}

TEST_CASE("fixture legacy_cached_pytorch10 (\"X cached)\": cached minus allocated)", "[doctor]") {
  const OomMessage m = only(fixture("legacy_cached_pytorch10.txt"));
  CHECK(m.format == "legacy");
  CHECK(m.requested == B(13107200));
  CHECK(m.total == B(11725260718));
  CHECK(m.allocated_by_pytorch == B(8986296));
  CHECK(m.free == B(9964324127));
  // PyTorch <= 1.4 printed cached minus allocated: reserved but unallocated.
  CHECK(m.reserved_unallocated == B(4907336));
  CHECK_FALSE(m.reserved_total);
  CHECK(m.complete);
}

TEST_CASE("fixture current_other_process", "[doctor]") {
  const OomMessage m = only(fixture("current_other_process.txt"));
  CHECK(m.format == "current");
  CHECK(m.requested == B(121214714511));
  CHECK(m.total == B(84975927951));
  CHECK(m.free == B(62910533468));
  REQUIRE(m.others.size() == 1);
  CHECK(m.others[0].pid == 4078482);
  CHECK(m.others[0].in_use == B(12122545193));
  CHECK(m.process_in_use == B(9932111872));
  CHECK(m.allocated_by_pytorch == B(8879844884));
  CHECK(m.reserved_unallocated == B(524686459));
  CHECK(m.complete);
}

TEST_CASE("fixture hip_current_free_exceeds_request", "[doctor]") {
  const OomMessage m = only(fixture("hip_current_free_exceeds_request.txt"));
  CHECK(m.format == "current");
  CHECK(m.backend == "HIP");
  CHECK(m.requested == B(452984832));
  CHECK(m.total == B(17093969838));
  CHECK(m.free == B(7645041787));
  CHECK(m.allocated_by_pytorch == B(8675833938));
  CHECK(m.reserved_unallocated == B(337599529));
  CHECK(m.alloc_conf_var == "PYTORCH_HIP_ALLOC_CONF");
  CHECK(m.complete);
}

TEST_CASE("fixture hip_unified_memory_apu", "[doctor]") {
  const OomMessage m = only(fixture("hip_unified_memory_apu.txt"));
  CHECK(m.format == "current");
  CHECK(m.backend == "HIP");
  CHECK(m.requested == B(3554085437));
  CHECK(m.total == B(137438953472));
  CHECK(m.free == B(818140938));
  CHECK(m.allocated_by_pytorch == B(61954903245));
  CHECK(m.reserved_unallocated == B(79503032));
  CHECK(m.line == 3);
}

TEST_CASE("fixture runtime_error_wrapped_console", "[doctor]") {
  const OomMessage m = only(fixture("runtime_error_wrapped_console.txt"));
  CHECK(m.format == "runtime_error");
  CHECK(m.backend == "CUDA");
  CHECK_FALSE(m.has_numbers());
  CHECK_FALSE(m.requested);
  CHECK(m.line == 1);
  CHECK(m.excerpt == "CUDA error: out of memory");
}

TEST_CASE("fixture accelerator_error_chained (torch.AcceleratorError)", "[doctor]") {
  const OomMessage m = only(fixture("accelerator_error_chained.txt"));
  CHECK(m.format == "runtime_error");
  CHECK(m.backend == "CUDA");
  CHECK(m.line == 3);
  CHECK(m.excerpt == "torch.AcceleratorError: CUDA error: out of memory");
}

TEST_CASE("fixture legacy_with_summary_fairseq: message and memory summary", "[doctor]") {
  const OomScan s = scan(fixture("legacy_with_summary_fairseq.txt"));
  REQUIRE(s.messages.size() == 1);
  const OomMessage& m = s.messages[0];
  CHECK(m.format == "legacy");
  CHECK(m.requested == B(71303168));
  CHECK(m.total == B(17072495002));
  CHECK(m.allocated_by_pytorch == B(15848429322));
  CHECK(m.free == B(58458112));
  CHECK(m.reserved_total == B(15977278341));
  CHECK(m.complete);
  CHECK(m.line == 1);
  CHECK(s.summaries == 1);
  REQUIRE(s.summary);
  const MemorySummary& sum = *s.summary;
  CHECK(sum.line == 3);
  CHECK(sum.device == 0);
  CHECK(sum.ooms == 1u);
  CHECK(sum.malloc_retries == 3u);
  CHECK(sum.allocated.current == B(15776874496));             // 15046 MB
  CHECK(sum.allocated.peak == B(15848177664));                // 15114 MB
  CHECK(sum.allocated.allocated_total == B(15574625157120));  // 14505 GB
  CHECK(sum.allocated.freed_total == B(15558519029760));      // 14490 GB
  CHECK(sum.active.current == B(15776874496));
  CHECK_FALSE(sum.reserved.current);  // the issue cut the table before this row
}

TEST_CASE("fixture legacy_wrapped_gpu1_fairseq: wrapped mid-word by the terminal", "[doctor]") {
  const OomScan s = scan(fixture("legacy_wrapped_gpu1_fairseq.txt"));
  REQUIRE(s.messages.size() == 1);
  const OomMessage& m = s.messages[0];
  CHECK(m.format == "legacy");
  CHECK(m.backend == "CUDA");
  CHECK(m.gpu == 1);
  CHECK(m.requested == B(3242700308));
  CHECK(m.total == B(25447681229));
  CHECK(m.allocated_by_pytorch == B(18167711662));
  CHECK(m.free == B(1069222461));
  CHECK(m.reserved_total == B(22580790559));
  CHECK(m.complete);
  CHECK(m.line == 1);
  CHECK(m.excerpt.starts_with("CUD A out of memory. Tried to allocate 3.02 GiB (GPU 1;"));
  REQUIRE(s.summary);
  CHECK(s.summary->device == 0);
  CHECK(s.summary->ooms == 0u);
  CHECK(s.summary->malloc_retries == 0u);
}

TEST_CASE("fixture legacy_truncated_gpu4_metaseq: cut inside the last item", "[doctor]") {
  const OomMessage m = only(fixture("legacy_truncated_gpu4_metaseq.txt"));
  CHECK(m.format == "legacy");
  CHECK(m.gpu == 4);
  CHECK(m.requested == B(100663296000));
  CHECK(m.total == B(85008140206));
  CHECK(m.allocated_by_pytorch == B(1632087572));
  CHECK(m.free == B(79607218831));
  CHECK_FALSE(m.reserved_total);  // "1.54 GiB reserved in total" without "by PyTorch)"
  CHECK_FALSE(m.complete);
  CHECK(m.line == 4);
}

TEST_CASE("fixture current_24gb_small_request", "[doctor]") {
  const OomMessage m = only(fixture("current_24gb_small_request.txt"));
  CHECK(m.requested == B(23068672));
  CHECK(m.total == B(25393994138));
  CHECK(m.free == B(11597251));
  CHECK(m.process_in_use == B(25340307046));
  CHECK(m.allocated_by_pytorch == B(24588687770));
  CHECK(m.reserved_unallocated == B(204336005));
  CHECK(m.complete);
}

TEST_CASE("fixture current_windows_shortage", "[doctor]") {
  const OomMessage m = only(fixture("current_windows_shortage.txt"));
  CHECK(m.requested == B(1050673152));
  CHECK(m.total == B(8589934592));
  CHECK(m.free == B(0));
  CHECK(m.allocated_by_pytorch == B(15010910700));
  CHECK(m.reserved_unallocated == B(135769620));
  CHECK(m.complete);
}

TEST_CASE("fixture mps_repeated: four messages, MPS fields", "[doctor]") {
  const OomScan s = scan(fixture("mps_repeated.txt"));
  REQUIRE(s.messages.size() == 4);
  CHECK(s.chosen_index() == 3);
  const OomMessage& m = *s.chosen();
  CHECK(m.format == "mps");
  CHECK(m.backend == "MPS");
  CHECK(m.allocated_by_pytorch == B(10275709256));
  CHECK(m.other_allocations == B(18629420646));
  CHECK(m.total == B(29205777613));
  CHECK(m.requested == B(306708480));
  CHECK_FALSE(m.free);
  CHECK(m.complete);
  CHECK(m.line == 7);
}

TEST_CASE("fixture mps_gb_units: GB and MB are binary", "[doctor]") {
  const OomMessage m = only(fixture("mps_gb_units.txt"));
  CHECK(m.format == "mps");
  CHECK(m.allocated_by_pytorch == B(9545564815));
  CHECK(m.other_allocations == B(181382676));
  CHECK(m.total == B(9738838344));
  CHECK(m.requested == B(6553600));
  CHECK(m.complete);
}

TEST_CASE("fixture thc_runtime_error (PyTorch <= 1.0)", "[doctor]") {
  const OomMessage m = only(fixture("thc_runtime_error.txt"));
  CHECK(m.format == "runtime_error");
  CHECK(m.backend == "CUDA");
  CHECK_FALSE(m.has_numbers());
}

TEST_CASE("fixture memory_summary_only: the summary stands in for the message", "[doctor]") {
  const OomScan s = scan(fixture("memory_summary_only.txt"));
  REQUIRE(s.summary);
  CHECK(s.summary->device == 0);
  CHECK(s.summary->ooms == 1u);
  CHECK(s.summary->malloc_retries == 1u);
  CHECK(s.summary->allocated.current == B(1113587712));
  CHECK(s.summary->allocated.peak == B(5113905152));
  CHECK(s.summary->allocated.allocated_total == B(93636788224));
  CHECK(s.summary->allocated.freed_total == B(92523200512));
  CHECK(s.summary->reserved.current == B(13023313920));
  CHECK(s.summary->reserved.peak == B(13023313920));
  CHECK(s.summary->reserved.allocated_total == B(17746100224));
  CHECK(s.summary->reserved.freed_total == B(4722786304));
  REQUIRE(s.messages.size() == 1);
  const OomMessage& m = s.messages[0];
  CHECK(m.format == "memory_summary");
  CHECK(m.gpu == 0);
  CHECK(m.allocated_by_pytorch == B(1113587712));
  CHECK(m.reserved_total == B(13023313920));
  CHECK_FALSE(m.has_numbers());
  CHECK(m.line == 2);
}

TEST_CASE("fixture current_backward_pass", "[doctor]") {
  const OomMessage m = only(fixture("current_backward_pass.txt"));
  CHECK(m.requested == B(236978176));
  CHECK(m.total == B(16857746637));
  CHECK(m.free == B(220599419));
  CHECK(m.process_in_use == B(16621523436));
  CHECK(m.allocated_by_pytorch == B(15902116413));
  CHECK(m.reserved_unallocated == B(353086996));
  CHECK(m.line == 2);
}

// --- the measured H200 truth ---------------------------------------------------------------------

TEST_CASE("the H200 truth errors parse exactly", "[doctor]") {
  const auto ooms = vramfit::doctor::test::truth_ooms("public.jsonl");
  REQUIRE(ooms.size() == 2);
  {
    const OomMessage m = only(ooms[0]["error"].get<std::string>());
    CHECK(ooms[0]["id"] == "llama-3.1-8b/train/fp32-ampbf16/adamw/b1s512/ckpt");
    CHECK(m.format == "current");
    CHECK(m.requested == B(234881024));          // 224.00 MiB
    CHECK(m.total == B(150109106995));           // 139.80 GiB
    CHECK(m.free == B(47311749));                // 45.12 MiB
    CHECK(m.process_in_use == B(150055419904));  // 139.75 GiB
    CHECK(m.allocated_by_pytorch == B(145255793951));
    CHECK(m.reserved_unallocated == B(3822520893));
    CHECK(m.alloc_conf_var == "PYTORCH_CUDA_ALLOC_CONF");
    CHECK(m.complete);
  }
  {
    const OomMessage m = only(ooms[1]["error"].get<std::string>());
    CHECK(m.requested == B(39825084252));  // 37.09 GiB
    CHECK(m.total == B(150109106995));
    CHECK(m.free == B(4584877588));
    CHECK(m.process_in_use == B(145513491988));
    CHECK(m.allocated_by_pytorch == B(111024904602));
    CHECK(m.reserved_unallocated == B(33264521708));
    CHECK(m.complete);
  }
  const auto es = vramfit::doctor::test::truth_ooms("expandable-segments.jsonl");
  REQUIRE(es.size() == 1);
  const OomMessage m = only(es[0]["error"].get<std::string>());
  CHECK(m.requested == B(39825084252));
  CHECK(m.free == B(37849399296));
  CHECK(m.process_in_use == B(112248970281));
  CHECK(m.allocated_by_pytorch == B(111003429765));
  CHECK(m.reserved_unallocated == B(446357832));
}

// --- forms built from PyTorch's source (no public sample found) ----------------------------------

TEST_CASE("built: process list without \"this process\", allowed cap, private pools", "[doctor]") {
  // The pieces of c10/cuda/CUDACachingAllocator.cpp in order: proc_info, allowed_info,
  // private_pool_msg.
  const std::string text =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
      "capacity of 79.19 GiB of which 1.50 GiB is free. Process 1234 has 3.20 GiB memory in use. "
      "Process 99 has 70.49 GiB memory in use. 40.00 GiB allowed; Of the allocated memory "
      "38.00 GiB is allocated by PyTorch, with 4.00 GiB allocated in private pools (e.g., CUDA "
      "Graphs), and 1.25 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
      "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
      "fragmentation.";
  const OomMessage m = only(text);
  CHECK(m.format == "current");
  CHECK(m.gpu == 3);
  CHECK(m.requested == B(2147483648));
  CHECK(m.total == B(85029615043));  // 79.19 GiB
  CHECK(m.free == B(1610612736));
  CHECK_FALSE(m.process_in_use);
  REQUIRE(m.others.size() == 2);
  CHECK(m.others[0].pid == 1234);
  CHECK(m.others[0].in_use == B(3435973837));  // 3.20 GiB
  CHECK(m.others[1].pid == 99);
  CHECK(m.others[1].in_use == B(75688061174));  // 70.49 GiB
  CHECK(m.allowed == B(42949672960));
  CHECK(m.allocated_by_pytorch == B(40802189312));
  CHECK(m.private_pools == B(4294967296));
  CHECK(m.reserved_unallocated == B(1342177280));
  CHECK(m.complete);
}

TEST_CASE("collected: a fairseq warning with PyTorch 1.1's text (fairseq#869)", "[doctor]") {
  const OomMessage m = only(
      "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 20.00 "
      "MiB (GPU 0; 7.93 GiB total capacity; 7.20 GiB already allocated; 17.56 MiB free; 46.25 MiB "
      "cached);\n Skipping batch");
  CHECK(m.format == "legacy");
  CHECK(m.requested == B(20971520));
  CHECK(m.total == B(8514772664));                 // 7.93 GiB
  CHECK(m.allocated_by_pytorch == B(7730941133));  // 7.20 GiB
  CHECK(m.free == B(18412995));                    // 17.56 MiB
  CHECK(m.reserved_unallocated == B(48496640));    // 46.25 MiB
  CHECK(m.complete);
}

TEST_CASE("built: legacy with allowed, NPU-style extra item, generic and XPU texts", "[doctor]") {
  {
    // PyTorch 1.4's THC allocator added an inactive figure.
    const OomMessage m = only(
        "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 10.76 GiB total "
        "capacity; 9.50 GiB already allocated; 10.12 MiB free; 1.01 GiB cached; 512.00 MiB "
        "inactive)");
    CHECK(m.reserved_unallocated == B(1084479242));  // 1.01 GiB
    CHECK_FALSE(m.reserved_total);
    CHECK(m.complete);
  }
  {
    const OomMessage m = only(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
        "capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.60 GiB allowed; 14.59 GiB "
        "reserved in total by PyTorch)");
    CHECK(m.format == "legacy");
    CHECK(m.requested == B(20971520));
    CHECK(m.free == B(3607101));
    CHECK(m.allowed == B(15676630630));
    CHECK(m.reserved_total == B(15665893212));
    CHECK(m.complete);
  }
  {
    const OomMessage m = only(
        "NPU out of memory. Tried to allocate 1.00 GiB (NPU 2; 60.00 GiB total capacity; 50.00 "
        "GiB already allocated; 10.00 GiB current active; 512.00 MiB free; 58.00 GiB reserved in "
        "total by PyTorch)");
    CHECK(m.backend == "NPU");
    CHECK(m.gpu == 2);
    CHECK(m.allocated_by_pytorch == B(53687091200));
    CHECK(m.free == B(536870912));
    CHECK(m.reserved_total == B(62277025792));
  }
  {
    const OomMessage m = only(
        "Out of memory. Tried to allocate 4.00 GiB. Device 1 has a total capacity of 23.99 GiB "
        "of which 1.00 GiB is free. Of the allocated memory 20.00 GiB is allocated by PyTorch, "
        "and 2.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
        "is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.");
    CHECK(m.format == "current");
    CHECK(m.backend.empty());
    CHECK(m.gpu == 1);
    CHECK(m.alloc_conf_var == "PYTORCH_ALLOC_CONF");
    CHECK(m.complete);
  }
  {
    // Older XPU text: no free figure.
    const OomMessage m = only(
        "XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.11 GiB. "
        "Of the allocated memory 12.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by "
        "PyTorch but unallocated. Please use `empty_cache` to release all unoccupied cached "
        "memory.");
    CHECK(m.backend == "XPU");
    CHECK(m.total == B(16224238961));
    CHECK_FALSE(m.free);
    CHECK(m.allocated_by_pytorch == B(12884901888));
    CHECK(m.complete);
  }
}

// --- finding messages in logs --------------------------------------------------------------------

TEST_CASE("messages embedded in long tracebacks and prefixed log lines", "[doctor]") {
  std::string log;
  for (int i = 0; i < 300; ++i) {
    log += "  File \"/usr/lib/python3.11/site-packages/torch/nn/modules/module.py\", line " +
           std::to_string(1500 + i) + ", in _call_impl\n    return forward_call(*args, **kwargs)\n";
  }
  log +=
      "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 "
      "has a total capacity of 79.19 GiB of which 1.01 GiB is free. Including non-PyTorch "
      "memory, this process has 78.17 GiB memory in use. Of the allocated memory 75.00 GiB is "
      "allocated by PyTorch, and 2.50 GiB is reserved by PyTorch but unallocated.\n";
  for (int i = 0; i < 50; ++i) log += "[rank3]:[W] NCCL watchdog thread terminated\n";
  const OomScan s = scan(log);
  REQUIRE(s.messages.size() == 1);
  const OomMessage& m = s.messages[0];
  CHECK(m.line == 601);
  CHECK(m.gpu == 3);
  CHECK(m.requested == B(2147483648));
  CHECK(m.reserved_unallocated == B(2684354560));
  CHECK(m.complete);
  CHECK(m.excerpt.starts_with("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3"));
  CHECK(m.excerpt.ends_with("is reserved by PyTorch but unallocated."));
}

TEST_CASE("several messages: all counted, the last with figures chosen", "[doctor]") {
  const std::string text = fixture("legacy_free_exceeds_request.txt") + "\nretrying...\n" +
                           fixture("current_24gb_small_request.txt") + "\n" +
                           fixture("accelerator_error_chained.txt");
  const OomScan s = scan(text);
  REQUIRE(s.messages.size() == 3);
  CHECK(s.messages[0].format == "legacy");
  CHECK(s.messages[0].line == 1);
  CHECK(s.messages[1].format == "current");
  CHECK(s.messages[1].line == 4);
  CHECK(s.messages[2].format == "runtime_error");
  CHECK(s.messages[2].line == 8);
  CHECK(s.chosen_index() == 1);  // the runtime error carries no figures
  CHECK(s.chosen()->requested == B(23068672));
  // A message cut short does not borrow the next message's figures.
  const OomScan cut = scan(
      "CUDA out of memory. Tried to allocate 2.\nCUDA out of memory. Tried to "
      "allocate 4.00 GiB (GPU 0; 8.00 GiB total capacity; 1.00 GiB already "
      "allocated; 2.00 GiB free; 1.50 GiB reserved in total by PyTorch)");
  REQUIRE(cut.messages.size() == 2);
  CHECK(cut.messages[0].format == "truncated");
  CHECK_FALSE(cut.messages[0].requested);
  CHECK(cut.messages[1].requested == B(4294967296));
  CHECK(cut.chosen_index() == 1);
}

TEST_CASE("the other no-figure forms, and what is not a message", "[doctor]") {
  CHECK(only("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
             "`cublasCreate(handle)`")
            .format == "runtime_error");
  CHECK(only("RuntimeError: HIP error: out of memory").backend == "HIP");
  CHECK(only("RuntimeError: CUDA driver error: out of memory").backend == "CUDA");
  const OomMessage comfy = only(
      "!!! Exception during processing !!! Allocation on device\n"
      "torch.OutOfMemoryError: Allocation on device");
  CHECK(comfy.format == "runtime_error");
  CHECK(comfy.line == 2);
  CHECK(only("RuntimeError: CUDA out of memory.").format == "runtime_error");
  // Not messages: source lines, type names, other tools' words.
  CHECK(scan("    except torch.cuda.OutOfMemoryError:\n        pass\n").messages.empty());
  CHECK(scan("class CUDAOutOfMemoryError(RuntimeError): pass").messages.empty());
  CHECK(scan("fatal: Out of memory, malloc failed (tried to allocate 42 bytes)").messages.empty());
  CHECK(scan("MemoryError: Unable to allocate 30.9 TiB for an array").messages.empty());
  CHECK(scan("").messages.empty());
  // A summary reporting no OOM is kept, but is no message.
  const OomScan clean = scan(
      "|                  PyTorch CUDA memory summary, device ID 0        "
      "         |\n|            CUDA OOMs: 0            |");
  CHECK(clean.messages.empty());
  REQUIRE(clean.summary);
  CHECK(clean.summary->ooms == 0u);
}

TEST_CASE("garbage never crashes and finds nothing", "[doctor]") {
  std::mt19937_64 rng(0x5eed);
  for (int round = 0; round < 200; ++round) {
    std::string bytes(static_cast<std::size_t>(rng() % 4096), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    const OomScan s = scan(bytes);
    CHECK(s.messages.empty());
  }
  // A 1 MB line, of junk and of near-misses.
  CHECK(scan(std::string(1 << 20, 'x')).messages.empty());
  std::string near;
  while (near.size() < (1u << 20)) near += "out of memor Tried to allocate 2.00 GiB (GPU 0; ";
  CHECK(scan(near).messages.empty());
  // Absurd numbers are not parsed, and nothing overflows.
  const OomMessage m = only(
      "CUDA out of memory. Tried to allocate 1e400 GiB. GPU 0 has a total capacity of "
      "99999999999999999999 GiB of which 1.00 GiB is free.");
  CHECK_FALSE(m.requested);
  CHECK_FALSE(m.total);
  const OomMessage big = only(
      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
      "99999999999999999999 GiB of which 1.00 GiB is free.");
  // A figure that cannot be a size (past 2^64 - 1 bytes) makes the whole message unreadable:
  // no diagnosis is built on the figures around it.
  CHECK_FALSE(big.requested);
  CHECK_FALSE(big.total);
  CHECK_FALSE(big.complete);
  CHECK(big.format == "unreadable");
  CHECK(big.unreadable == "'99999999999999999999gib' is past 2^64 - 1 bytes (16 EiB)");
  CHECK(m.format == "unreadable");
  CHECK(m.unreadable == "'1e400gib' is past 2^64 - 1 bytes (16 EiB)");
  // Invalid UTF-8 and control bytes around a message become '?' in the excerpt.
  const OomMessage u = only(std::string("RuntimeError: CUDA error: out of memory \xff\xfe\x01 tail"));
  CHECK(u.excerpt == "RuntimeError: CUDA error: out of memory ??? tail");
}

TEST_CASE("many messages: the most recent are kept", "[doctor]") {
  std::string text;
  for (int i = 0; i < 25000; ++i) text += "CUDA error: out of memory\n";
  text += fixture("legacy_free_exceeds_request.txt");
  const OomScan s = scan(text);
  CHECK(s.messages.size() <= 10000);
  CHECK(s.messages.size() >= 5000);
  REQUIRE(s.chosen());
  CHECK(s.chosen()->format == "legacy");
  CHECK(s.chosen()->line == 25001);
  // The count says how many there were, beyond those kept (issue #14: it stopped at 10,000).
  CHECK(s.messages_found == 25001);
  CHECK(s.messages.size() == 5001);
  const std::string shown = vramfit::render::explain_text(s, explain(s));
  CHECK(shown.find("(line 25001, legacy format; the last of 25001 OOM messages; the last 5001 kept)") !=
        std::string::npos);
  const auto j = vramfit::render::explain_json(s, explain(s));
  CHECK(j["messages_found"] == 25001);
  CHECK(j["messages_kept"] == 5001);
}

TEST_CASE("extreme figures: refused with the reason, never saturated", "[doctor]") {
  const std::string head = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ";
  const auto msg = [&](const std::string& req, const std::string& total) {
    return only(head + req + ". GPU 0 has a total capacity of " + total +
                " of which 1.00 GiB is free. Of the allocated memory 8.27 GiB is allocated by PyTorch, and 500.38 "
                "MiB is reserved by PyTorch but unallocated.");
  };
  CHECK(msg("-2.00 GiB", "79.14 GiB").unreadable == "'-2.00gib' is negative");
  CHECK(msg("nan GiB", "79.14 GiB").unreadable == "'nangib' is not a number of bytes");
  CHECK(msg("2.00 GiB", "99999999999 PiB").unreadable == "'99999999999pib' is past 2^64 - 1 bytes (16 EiB)");
  const OomMessage zero = msg("2.00 GiB", "0 bytes");
  CHECK(zero.unreadable == "the card's total capacity reads 0 bytes");
  CHECK(zero.format == "unreadable");
  CHECK_FALSE(zero.requested);
  // Each figure fits in 64 bits (15000 PiB is 0.81 x 2^64), their sum does not.
  const OomMessage sum = msg("15000.00 PiB", "15000.00 PiB");
  CHECK(sum.unreadable == "its figures add up to more than 2^64 bytes (16 EiB)");
  CHECK_FALSE(sum.has_numbers());
  const OomMessage fine = msg("2.00 GiB", "79.14 GiB");
  CHECK(fine.unreadable.empty());
  CHECK(fine.format == "current");
  const auto d = explain(scan(head + "-2.00 GiB. GPU 0 has a total capacity of 79.14 GiB"), {});
  REQUIRE(d);
  CHECK(d->primary == "no_numbers");
}
