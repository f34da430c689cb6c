// engine/allocator.cpp: each expected figure follows by hand from the rules of PyTorch's
// CUDACachingAllocator listed in allocator.hpp (512 B rounding, 2 MiB small segments, 20 MiB
// large segments under 10 MiB, 2 MiB rounding above, best fit, split thresholds, max_split_size,
// roundup_power2_divisions, expandable segments' 2/20 MiB pages, garbage collection).
#include <catch2/catch.hpp>

#include "vramfit/engine/allocator.hpp"

using vramfit::engine::AllocConf;
using vramfit::engine::CachingAllocator;

namespace {
constexpr std::uint64_t MiB = 1ULL << 20;
}

TEST_CASE("allocator: request rounding and segment sizes", "[engine][allocator]") {
  const AllocConf def;
  CHECK(CachingAllocator::round_size(1, def) == 512);
  CHECK(CachingAllocator::round_size(512, def) == 512);
  CHECK(CachingAllocator::round_size(513, def) == 1024);
  CHECK(CachingAllocator::round_size(9 * MiB + 1, def) == 9 * MiB + 512);
  AllocConf p2;
  p2.roundup_power2_divisions = 4;
  // 9 MiB + 1 lies in [8, 16) MiB cut in 4 steps of 2 MiB: 10 MiB.
  CHECK(CachingAllocator::round_size(9 * MiB + 1, p2) == 10 * MiB);
  CHECK(CachingAllocator::round_size(8 * MiB, p2) == 8 * MiB);
  // 1500 B is not above 512 x 4: plain 512 B rounding.
  CHECK(CachingAllocator::round_size(1500, p2) == 1536);
  // 3000 B: [2048, 4096) in steps of 512: 3072.
  CHECK(CachingAllocator::round_size(3000, p2) == 3072);

  CHECK(CachingAllocator::allocation_size(512) == 2 * MiB);
  CHECK(CachingAllocator::allocation_size(MiB) == 2 * MiB);
  CHECK(CachingAllocator::allocation_size(MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::allocation_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::allocation_size(11 * MiB + 512) == 12 * MiB);
}

TEST_CASE("allocator: pools, best fit, splitting and merging", "[engine][allocator]") {
  CachingAllocator a;
  const auto s = a.malloc(1000);  // small pool: 1024 B in a 2 MiB segment
  CHECK(a.allocated() == 1024);
  CHECK(a.reserved() == 2 * MiB);
  const auto x = a.malloc(3 * MiB);  // large pool: 20 MiB segment, 17 MiB left (> 1 MiB: split)
  CHECK(a.block_size(x) == 3 * MiB);
  CHECK(a.reserved() == 22 * MiB);
  const auto y = a.malloc(12 * MiB);  // fits the 17 MiB rest; 5 MiB left, split again
  CHECK(a.reserved() == 22 * MiB);
  CHECK(a.allocated() == 15 * MiB + 1024);
  const auto z = a.malloc(6 * MiB);  // the 5 MiB rest is too small: a second 20 MiB segment
  CHECK(a.reserved() == 42 * MiB);
  CHECK(a.segments() == 3);
  a.free(x);
  a.free(y);  // merges with x's block and the 5 MiB rest: one free 20 MiB block
  a.free(z);
  a.free(s);
  CHECK(a.allocated() == 0);
  CHECK(a.reserved() == 42 * MiB);  // cached, not returned
  // 19.5 MiB: best fit is a whole free 20 MiB block; 0.5 MiB left is not > 1 MiB, so no split
  const auto w = a.malloc(19 * MiB + MiB / 2);
  CHECK(a.block_size(w) == 20 * MiB);
  CHECK(a.allocated() == 20 * MiB);
  CHECK(a.reserved() == 42 * MiB);
  CHECK(a.peak_allocated() == 21 * MiB + 1024);
  CHECK(a.peak_reserved() == 42 * MiB);
  CHECK_FALSE(a.oom());
}

TEST_CASE("allocator: the small pool splits down to 512 B", "[engine][allocator]") {
  CachingAllocator a;
  a.malloc(MiB);  // 2 MiB segment, 1 MiB rest (>= 512 B: split)
  a.malloc(MiB);  // takes the rest
  CHECK(a.reserved() == 2 * MiB);
  a.malloc(512);  // nothing free: a second small segment
  CHECK(a.reserved() == 4 * MiB);
  CHECK(a.segments() == 2);
  a.malloc(0);  // no memory, as torch.empty(0)
  CHECK(a.allocated() == 2 * MiB + 512);
}

TEST_CASE("allocator: max_split_size keeps oversize blocks whole", "[engine][allocator]") {
  AllocConf c;
  c.max_split_size = 8 * MiB;
  CachingAllocator a(c);
  a.free(a.malloc(10 * MiB));  // a cached 10 MiB oversize block
  a.malloc(3 * MiB);           // under max_split_size: may not take it; new 20 MiB segment
  CHECK(a.reserved() == 30 * MiB);
  const auto big = a.malloc(9 * MiB);  // best fit is the 10 MiB block (< 9 + 20 MiB); not split
  CHECK(a.block_size(big) == 10 * MiB);
  CHECK(a.allocated() == 13 * MiB);
  CHECK(a.reserved() == 30 * MiB);
  // Without the setting the 3 MiB request splits the cached 10 MiB block instead.
  CachingAllocator d;
  d.free(d.malloc(10 * MiB));
  d.malloc(3 * MiB);
  CHECK(d.reserved() == 10 * MiB);
}

TEST_CASE("allocator: roundup_power2_divisions", "[engine][allocator]") {
  AllocConf c;
  c.roundup_power2_divisions = 4;
  CachingAllocator a(c);
  const auto h = a.malloc(9 * MiB + 1);
  CHECK(a.block_size(h) == 10 * MiB);
  CHECK(a.reserved() == 10 * MiB);
}

TEST_CASE("allocator: expandable segments grow one segment per pool", "[engine][allocator]") {
  AllocConf c;
  c.expandable_segments = true;
  CachingAllocator a(c);
  const auto x = a.malloc(3 * MiB);  // maps one 20 MiB page; 17 MiB free tail
  CHECK(a.reserved() == 20 * MiB);
  a.malloc(30 * MiB);  // tail 17 MiB + one more 20 MiB page = 37 MiB; 7 MiB left
  CHECK(a.reserved() == 40 * MiB);
  CHECK(a.allocated() == 33 * MiB);
  a.free(x);
  a.malloc(2 * MiB);  // best fit: the freed 3 MiB block, split (1 MiB >= 512 B)
  CHECK(a.allocated() == 32 * MiB);
  CHECK(a.reserved() == 40 * MiB);
  CHECK(a.segments() == 1);
  a.malloc(100);  // small pool: its own segment, 2 MiB pages
  CHECK(a.reserved() == 42 * MiB);
  CHECK(a.segments() == 2);
  // The default allocator needs three segments for the same requests: 20 + 30 + 2 MiB.
  CachingAllocator d;
  const auto dx = d.malloc(3 * MiB);
  d.malloc(30 * MiB);
  d.free(dx);
  d.malloc(2 * MiB);
  d.malloc(100);
  CHECK(d.reserved() == 52 * MiB);
}

TEST_CASE("allocator: a full device releases the cache, then reports OOM", "[engine][allocator]") {
  CachingAllocator a({}, 40 * MiB);
  a.free(a.malloc(15 * MiB));  // 16 MiB cached
  a.malloc(30 * MiB);          // 16 + 30 > 40: the cached segment is released first
  CHECK(a.reserved() == 30 * MiB);
  CHECK(a.peak_reserved() == 30 * MiB);
  CHECK_FALSE(a.oom());
  CHECK(a.alloc_retries() == 1);  // memory_stats' num_alloc_retries
  a.malloc(15 * MiB);  // 30 + 16 > 40 with nothing cached
  CHECK(a.oom());
  CHECK(a.alloc_retries() == 2);
}

TEST_CASE("allocator: garbage_collection_threshold", "[engine][allocator]") {
  AllocConf c;
  c.garbage_collection_threshold = 0.5;
  CachingAllocator a(c, 100 * MiB);
  a.free(a.malloc(30 * MiB));
  a.malloc(40 * MiB);  // 30 + 40 > 50 MiB: the idle 30 MiB segment is collected
  CHECK(a.reserved() == 40 * MiB);
  CachingAllocator d({}, 100 * MiB);
  d.free(d.malloc(30 * MiB));
  d.malloc(40 * MiB);
  CHECK(d.reserved() == 70 * MiB);
}

TEST_CASE("allocator: requested bytes and what whole blocks add at the peak", "[engine][allocator]") {
  // allocated_bytes counts block->size, requested_bytes the request (alloc_found_block).
  CachingAllocator a;
  const auto s = a.malloc(1000);  // small pool: a 1024 B block
  CHECK(a.requested() == 1000);
  // 19 MiB: a fresh segment of 20 MiB (rounded to 2 MiB above 10 MiB); 1 MiB would remain,
  // not > kSmallSize, so the block stays whole and counts 20 MiB.
  const auto big = a.malloc(19 * MiB);
  CHECK(a.block_size(big) == 20 * MiB);
  CHECK(a.allocated() == 20 * MiB + 1024);
  CHECK(a.requested() == 19 * MiB + 1000);
  a.begin_region();
  CHECK(a.region_peak() == 20 * MiB + 1024);
  CHECK(a.region_excess() == MiB + 24);
  a.free(big);
  CHECK(a.requested() == 1000);
  // 3 MiB in the cached 20 MiB block: 17 MiB remain, split; the region's peak stays the first moment.
  const auto x = a.malloc(3 * MiB);
  CHECK(a.block_size(x) == 3 * MiB);
  CHECK(a.region_peak() == 20 * MiB + 1024);
  CHECK(a.region_excess() == MiB + 24);
  // A region begun here: 16.5 MiB in the 17 MiB rest leaves 0.5 MiB, so the block stays whole
  // (17 MiB); the region's peak is 20 MiB + 1024 B again, with 0.5 MiB + 24 B of excess.
  a.begin_region();
  const auto y = a.malloc(16 * MiB + MiB / 2);
  CHECK(a.block_size(y) == 17 * MiB);
  CHECK(a.region_peak() == 20 * MiB + 1024);
  CHECK(a.region_excess() == MiB / 2 + 24);
  CHECK(a.peak_allocated() == 20 * MiB + 1024);
  a.free(x);
  a.free(y);
  a.free(s);
  CHECK(a.requested() == 0);
  CHECK(a.allocated() == 0);
}

TEST_CASE("allocator: equal free blocks go to the lowest address, as cudaMalloc laid the segments out",
          "[engine][allocator]") {
  // Two free 100 MiB blocks: a whole 100 MiB segment made first, and the tail of a 150 MiB segment
  // made after it. BlockComparatorSize ranks equal sizes by address: in creation order the first
  // segment's block is lower; with top_down_addresses() (segments over 20 MiB placed each below the
  // last, as recorded from CUDA's init) the later segment's is.
  for (const bool top_down : {false, true}) {
    CachingAllocator a;
    if (top_down) a.top_down_addresses();
    const auto first = a.malloc(100 * MiB);
    a.free(a.malloc(150 * MiB));
    const auto head = a.malloc(50 * MiB);  // best fit: the 150 MiB segment's head
    CHECK(a.place_of(head).segment_size == 150 * MiB);
    a.free(first);
    const auto x = a.malloc(100 * MiB);
    INFO(top_down);
    CHECK(a.place_of(x).segment_size == (top_down ? 150 : 100) * MiB);
    CHECK(a.place_of(x).offset == (top_down ? 50 : 0) * MiB);
    CHECK(a.reserved() == 250 * MiB);
  }
}
