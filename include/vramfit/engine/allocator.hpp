#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace vramfit::engine {

/// PYTORCH_CUDA_ALLOC_CONF settings the allocator model honours.
struct AllocConf {
  bool expandable_segments = false;
  /// Blocks of this size or larger are "oversize": never split, and not handed to requests
  /// much smaller than them. PyTorch's default is unlimited.
  std::uint64_t max_split_size = std::numeric_limits<std::uint64_t>::max();
  /// roundup_power2_divisions (one value for every size; 0 or 1 = off, PyTorch's default).
  std::uint32_t roundup_power2_divisions = 0;
  /// garbage_collection_threshold in (0, 1); 0 = off. Only acts when a capacity is given
  /// (PyTorch only collects when a memory fraction is set).
  double garbage_collection_threshold = 0.0;
};

/// A model of PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp) for one
/// device and one stream, replaying malloc/free and reporting allocated and reserved bytes.
/// Rules taken from the source:
///  - requests round up to 512 B (kMinBlockSize), or to the next power-of-2 division when
///    roundup_power2_divisions is set and the request is larger than 512 B x divisions;
///  - requests <= 1 MiB (kSmallSize) use the small pool, whose segments are 2 MiB (kSmallBuffer);
///    larger ones use the large pool: 20 MiB segments (kLargeBuffer) for requests under 10 MiB
///    (kMinLargeAlloc), otherwise the request rounded up to 2 MiB (kRoundLarge);
///  - a request takes the smallest cached block that fits (best fit, lowest address among equals);
///    a request under max_split_size is not given an oversize block, and a request of at least
///    max_split_size is not given a block 20 MiB or more larger than itself;
///  - a block is split when the rest is >= 512 B (small pool, or any pool with expandable
///    segments) or > 1 MiB and the request is under max_split_size (large pool);
///  - freed blocks merge with free neighbours of the same segment and stay cached (reserved);
///  - when a new segment would exceed `capacity`, every cached segment with no allocated block
///    is released (cudaFree) and the allocation retried; if it still does not fit, oom() is set;
///  - expandable_segments: one segment per pool that grows by mapping pages of 2 MiB (small
///    pool) or 20 MiB (large pool) at its end, the free tail block extended in place;
///  - garbage_collection_threshold: before a new segment, when reserved exceeds threshold x
///    capacity, cached whole segments are released, least recently freed first, until it does
///    not (PyTorch frees those of above-average age first; the order differs, the amount not).
class CachingAllocator {
 public:
  static constexpr std::uint64_t kMinBlockSize = 512;
  static constexpr std::uint64_t kSmallSize = 1ULL << 20;
  static constexpr std::uint64_t kSmallBuffer = 2ULL << 20;
  static constexpr std::uint64_t kLargeBuffer = 20ULL << 20;
  static constexpr std::uint64_t kMinLargeAlloc = 10ULL << 20;
  static constexpr std::uint64_t kRoundLarge = 2ULL << 20;

  using Handle = std::uint32_t;

  /// capacity 0: unlimited (no OOM, no garbage collection).
  explicit CachingAllocator(AllocConf conf = {}, std::uint64_t capacity = 0);

  /// Allocates `bytes` (0 is allowed and takes no memory, as in PyTorch).
  Handle malloc(std::uint64_t bytes);
  void free(Handle h);

  [[nodiscard]] std::uint64_t allocated() const { return allocated_; }
  [[nodiscard]] std::uint64_t reserved() const { return reserved_; }
  [[nodiscard]] std::uint64_t peak_allocated() const { return peak_allocated_; }
  [[nodiscard]] std::uint64_t peak_reserved() const { return peak_reserved_; }
  /// The bytes requested of the blocks allocated now (torch.cuda.memory_stats()'s
  /// requested_bytes: each malloc's `bytes`, before rounding).
  [[nodiscard]] std::uint64_t requested() const { return requested_; }
  /// A region of the replay (a phase of a step): region_peak() is the most allocated since
  /// begin_region(), region_excess() allocated() - requested() when it was first reached.
  void begin_region() {
    region_peak_ = allocated_;
    region_excess_ = allocated_ - requested_;
  }
  [[nodiscard]] std::uint64_t region_peak() const { return region_peak_; }
  [[nodiscard]] std::uint64_t region_excess() const { return region_excess_; }
  [[nodiscard]] std::size_t segments() const;
  /// Set once an allocation did not fit in `capacity` even after releasing the cache.
  [[nodiscard]] bool oom() const { return oom_; }
  /// How many times a new segment did not fit `capacity` and the cache was released to make room
  /// (torch.cuda.memory_stats()'s num_alloc_retries).
  [[nodiscard]] std::uint64_t alloc_retries() const { return alloc_retries_; }
  /// Bytes the block behind `h` occupies (the rounded request, or the whole block when unsplit).
  [[nodiscard]] std::uint64_t block_size(Handle h) const;
  /// Where the block behind `h` lies: the size of its segment and its offset in it.
  struct Place {
    std::uint64_t segment_size = 0, offset = 0;
  };
  [[nodiscard]] Place place_of(Handle h) const;
  /// Releases every cached segment with no allocated block (torch.cuda.empty_cache()).
  void empty_cache();
  /// The peaks start again from what is allocated and reserved now (torch.cuda.reset_peak_memory_stats()).
  /// Segments made from now on get cudaMalloc's layout as recorded in a fresh process (over 20 MiB
  /// top-down, 20 MiB and less upward in a region above them) instead of addresses in the order
  /// they are made: it decides which of several equal free blocks best fit takes (allocator.cpp).
  void top_down_addresses() { top_down_ = true; }
  void reset_peaks() {
    peak_allocated_ = allocated_;
    peak_reserved_ = reserved_;
  }

  [[nodiscard]] static std::uint64_t round_size(std::uint64_t bytes, const AllocConf& conf);
  [[nodiscard]] static std::uint64_t allocation_size(std::uint64_t rounded);

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  struct Block {
    std::uint64_t addr = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;  ///< the malloc's bytes while allocated
    std::uint32_t segment = kNone;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
    bool small = false;
    bool allocated = false;
    bool live = false;
  };
  struct Segment {
    std::uint64_t base = 0;
    std::uint64_t size = 0;  ///< mapped bytes
    std::uint32_t first = kNone;
    std::uint32_t last = kNone;
    std::uint32_t used = 0;  ///< allocated blocks in it
    std::uint64_t freed_at = 0;
    bool small = false;
    bool live = false;
    bool expandable = false;
  };
  struct FreeKey {
    std::uint64_t size, addr;
    std::uint32_t block;
    bool operator<(const FreeKey& o) const { return size != o.size ? size < o.size : addr < o.addr; }
  };
  using FreeSet = std::set<FreeKey>;

  std::uint32_t new_block();
  std::uint32_t find_free(bool small, std::uint64_t size) const;
  std::uint32_t new_segment(bool small, std::uint64_t size);
  std::uint32_t grow_expandable(bool small, std::uint64_t size);
  [[nodiscard]] bool fits(std::uint64_t more) const { return capacity_ == 0 || reserved_ + more <= capacity_; }
  void release_cached(std::uint64_t target);
  void release_segment(std::uint32_t s);
  void insert_free(std::uint32_t b);
  void erase_free(std::uint32_t b);
  void bump_reserved(std::uint64_t more);

  AllocConf conf_;
  std::uint64_t capacity_;
  std::vector<Block> blocks_;
  std::vector<std::uint32_t> spare_blocks_;
  std::vector<Segment> segments_;
  FreeSet free_[2];  // [0] large pool, [1] small pool
  std::uint32_t expandable_[2] = {kNone, kNone};
  std::uint64_t next_addr_ = 0;
  bool top_down_ = false;
  std::uint64_t clock_ = 0;
  std::uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  std::uint64_t requested_ = 0, region_peak_ = 0, region_excess_ = 0;
  bool oom_ = false;
  std::uint64_t alloc_retries_ = 0;
};

}  // namespace vramfit::engine
