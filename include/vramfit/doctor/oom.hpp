#pragma once

// The OOM doctor, part 1: finding and reading the out-of-memory messages PyTorch prints.
// Pure: text in, values out; no files, no environment, never throws on any input.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/bytes.hpp"

namespace vramfit::doctor {

/// Another process on the same GPU, as PyTorch lists it from NVML:
/// "Process 4078482 has 11.29 GiB memory in use."
struct OtherProcess {
  std::uint64_t pid = 0;
  Bytes in_use;
};

/// One out-of-memory message found in a log. Every size is the figure as printed, converted to
/// bytes: PyTorch prints two decimals ("3.44 MiB"), so the value is that rounded figure times
/// the unit, rounded to the nearest byte (3.44 MiB == 3607101), not the exact byte count of the
/// allocator. A field the message does not carry (or that could not be read) is empty.
struct OomMessage {
  /// Which text it is (stable ids):
  ///   "current"        PyTorch >= 2.1: "Tried to allocate X. GPU 0 has a total capacity of ..."
  ///   "legacy"         PyTorch <= 2.0: "Tried to allocate X (GPU 0; Y total capacity; ...)"
  ///   "runtime_error"  no figures: "CUDA error: out of memory", "cuda runtime error (2) : out
  ///                    of memory", "CUBLAS_STATUS_ALLOC_FAILED", a bare OutOfMemoryError
  ///   "mps"            Apple: "MPS backend out of memory (MPS allocated: ...)"
  ///   "memory_summary" no message, but a torch.cuda.memory_summary() reporting CUDA OOMs >= 1
  ///   "truncated"      "... out of memory. Tried to allocate" cut before the format shows
  ///   "unreadable"     a figure is there but cannot be a size (negative, NaN, past 2^64 - 1
  ///                    bytes), the card's total reads 0 bytes, or the figures add up past
  ///                    2^64 bytes: every figure is dropped and `unreadable` says why
  std::string format;
  /// Why the message's figures were dropped ("'-2.00gib' is negative"); empty otherwise.
  std::string unreadable;
  /// The device family the message names: "CUDA", "HIP" (ROCm prints the same texts with
  /// HIP), "XPU", "MPS", "MUSA", "NPU", "MLU"; empty when the message names none.
  std::string backend;
  std::optional<int> gpu;                     ///< device index ("GPU 3")
  std::optional<Bytes> requested;             ///< "Tried to allocate": the segment asked for
  std::optional<Bytes> total;                 ///< the device's total capacity (MPS: max allowed)
  std::optional<Bytes> free;                  ///< free on the device, as the driver reported it
  std::optional<Bytes> process_in_use;        ///< "this process has X memory in use" (NVML)
  std::optional<Bytes> allocated_by_pytorch;  ///< live tensors ("already allocated" in legacy)
  std::optional<Bytes> private_pools;         ///< "with X allocated in private pools (CUDA Graphs)"
  /// Cached by PyTorch but in no tensor: "is reserved by PyTorch but unallocated" (current),
  /// "X cached)" (PyTorch <= 1.4, which printed cached minus allocated).
  std::optional<Bytes> reserved_unallocated;
  std::optional<Bytes> reserved_total;     ///< "reserved in total by PyTorch" (legacy, >= 1.5)
  std::optional<Bytes> allowed;            ///< "X allowed;": a per-process memory fraction cap
  std::optional<Bytes> other_allocations;  ///< MPS only: "other allocations"
  std::vector<OtherProcess> others;        ///< "Process 1234 has X memory in use."
  /// The allocator setting the message itself recommends ("PYTORCH_CUDA_ALLOC_CONF",
  /// "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"), empty when it names none.
  std::string alloc_conf_var;
  bool mentions_max_split_size = false;  ///< pre-2.2 hint: "try setting max_split_size_mb"
  bool complete = false;                 ///< every field of its format was read up to the message's end
  std::size_t line = 0;                  ///< 1-based line where the message starts
  std::string excerpt;  ///< the message, whitespace runs collapsed, valid UTF-8, <= 1000 bytes

  /// Whether the message carries the figures a diagnosis needs (requested and total).
  [[nodiscard]] bool has_numbers() const noexcept { return requested && total; }
};

/// One row of torch.cuda.memory_summary(): the current, peak, cumulative allocated and
/// cumulative freed columns. The summary floors each value to a whole unit (Python's
/// `sz //= 1024` in `_format_size`), so a parsed value is a lower bound within one unit.
struct SummaryRow {
  std::optional<Bytes> current, peak, allocated_total, freed_total;
};

/// A torch.cuda.memory_summary() table found in a log. Older versions print "KB"/"MB"/"GB";
/// those are binary units like the newer "KiB"/"MiB"/"GiB".
struct MemorySummary {
  std::optional<int> device;                    ///< "memory summary, device ID 0"
  std::optional<std::uint64_t> ooms;            ///< "CUDA OOMs: 1"
  std::optional<std::uint64_t> malloc_retries;  ///< "cudaMalloc retries: 3"
  SummaryRow allocated;                         ///< "Allocated memory": live tensors
  SummaryRow active;                            ///< "Active memory"
  SummaryRow requested;       ///< "Requested memory" (sizes before rounding; newer versions)
  SummaryRow reserved;        ///< "GPU reserved memory": held by the caching allocator
  SummaryRow non_releasable;  ///< "Non-releasable memory": free parts of split blocks
  std::size_t line = 0;       ///< 1-based line of the summary's title
};

/// Everything scan() found. `messages` are in the order of the text.
struct OomScan {
  std::vector<OomMessage> messages;
  std::optional<MemorySummary> summary;  ///< the last memory summary in the text
  std::size_t summaries = 0;             ///< how many memory summaries the text holds
  /// How many OOM messages the text holds. Only the last ones are kept in `messages` (at most
  /// 10,000; past that the oldest 5,000 are dropped at a time), so this may be larger.
  std::size_t messages_found = 0;

  /// The message to explain: the last one with figures, else the last one; nullptr when none.
  /// A later message without figures ("CUDA error: out of memory") usually follows from the
  /// first failure, while the allocator's own message says what failed and why.
  [[nodiscard]] const OomMessage* chosen() const noexcept;
  /// Index of chosen() in `messages`; messages.size() when none.
  [[nodiscard]] std::size_t chosen_index() const noexcept;
};

/// Finds every OOM message (and the last memory summary) anywhere in `text`: among
/// tracebacks and log lines, with prefixes, hard-wrapped by a terminal ("CUD\nA out of
/// memory"), or escaped into one line. Matching ignores whitespace. Never throws; any bytes are
/// fine (binary data, huge lines, truncated or absurd numbers: those fields stay empty). When
/// only a memory summary reports OOMs, `messages` holds one "memory_summary" entry built
/// from it. Linear in the size of the text.
OomScan scan(std::string_view text) noexcept;

/// Reads one size as PyTorch prints it, e.g. "2.00 GiB", "0 bytes", "3.44MiB", "15046 MB".
/// Units: bytes/byte/B, KiB/MiB/GiB/TiB/PiB, and KB/MB/GB/TB/PB which PyTorch's formatters
/// used for the same binary units. Case-insensitive. Returns nothing for anything else, for
/// exponents ("1e400 GiB") and for values above 2^64 - 1 bytes.
std::optional<Bytes> parse_torch_size(std::string_view text) noexcept;

/// A size the way PyTorch's c10 `format_size` prints it (c10/util/..., CUDACachingAllocator.cpp):
/// "N bytes" up to 1024, then KiB up to 1 MiB, MiB up to 1 GiB, else GiB, two decimals (rounded
/// half up here). The doctor echoes sizes in this form so they match the user's log:
/// format_torch_size(*parse_torch_size("3.44 MiB")) == "3.44 MiB".
std::string format_torch_size(Bytes b);

/// The segment size PyTorch's CUDA caching allocator asks for, and prints after "Tried to
/// allocate", for a tensor of `bytes`: round_size (multiples of 512 bytes), then
/// get_allocation_size (<= 1 MiB: 2 MiB; < 10 MiB: 20 MiB; else multiples of 2 MiB).
/// Source: c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize, kSmallSize, kSmallBuffer,
/// kLargeBuffer, kMinLargeAlloc, kRoundLarge (default settings, no roundup_power2_divisions).
Bytes allocator_request_size(Bytes bytes);

}  // namespace vramfit::doctor
