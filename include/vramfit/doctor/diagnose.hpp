#pragma once

// The OOM doctor, part 2: what the numbers of one OOM message say, and what to do, in order.
// Pure: same message in, same diagnosis out.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/doctor/oom.hpp"

namespace vramfit::doctor {

/// A tensor size the workload is expected to request, named: {"logits", bytes},
/// {"attention_scores", bytes}. The lead's estimate hook passes these so the doctor can say
/// which tensor failed. Names are free-form; "logits" and "attention_scores" get tailored fixes.
struct NamedSize {
  std::string name;
  Bytes size;
};

/// The expected tensor the failed request matches.
struct CandidateMatch {
  std::string name;
  Bytes size;            ///< the candidate as given
  Bytes allocator_size;  ///< what the allocator would ask for: allocator_request_size(size)
  /// |requested - allocator_size| in thousandths of allocator_size (a match is <= 20, 2%).
  std::uint64_t difference_permille = 0;
};

/// One suggested fix: a row of the one fix table (vramfit/core/fixes.hpp) that carries a hint.
/// Ids are API (scripts read them):
///   seed fixes, in the seed's order: reduce_batch (1), mixed_precision (2),
///   gradient_checkpointing (3), quantize (4), inference_mode (5), expandable_segments (6);
///   others (seed_step 0): free_other_processes, raise_memory_fraction, chunked_logits,
///   fused_attention, shorter_sequence, larger_gpu.
struct FixHint {
  std::string id;
  int seed_step = 0;   ///< its number in the seed's ordered list, 0 when not from that list
  std::string title;   ///< what to do, one line
  std::string reason;  ///< why, tied to this message's numbers, one line
};

/// The diagnosis of one OOM message.
///
/// Classification ids (stable): "shortage", "fragmentation", "other_process", "huge_request",
/// "no_numbers". `kinds` lists every one that applies, primary first. With R requested, F free,
/// U reserved-but-unallocated, Rs reserved, T total (thresholds and their sources in
/// src/doctor/diagnose.cpp):
///   fragmentation  R <= F + U with U > 0 (the cache would have served it), or F >= R (the
///                  driver had it free but not in one piece), or U >= 20% of Rs, >= 256 MiB and
///                  >= a quarter of R - F (a large, reclaimable cache)
///   shortage       R > F + U: not even a perfectly packed cache would have served it; also
///                  when a per-process cap ("X allowed") is what R would pass
///   huge_request   R >= T / 4: one tensor, typically logits or attention scores
///   other_process  listed processes hold >= 5% of T and >= 256 MiB, or without them R would
///                  fit; or >= 10% of T and >= 1 GiB is used by no listed process (beyond a
///                  1.5 GiB CUDA-context allowance when the message lists no processes)
///   no_numbers     the message has no request or no total (runtime-error forms, a memory
///                  summary alone, a cut message)
/// The primary is the first fix to reach for: the cap if it blocked, else fragmentation when
/// the memory was there, else other_process when those processes block it, else huge_request,
/// else shortage.
///
/// The accounting, in bytes (all from the message; empty when a term is missing):
///   reserved_total      = allocated_by_pytorch + reserved_unallocated   (current format)
///   outside_pytorch     = total - free - reserved_total   (everything on the card PyTorch's
///                         cache does not hold: CUDA context, cuBLAS, other processes)
///   process_non_pytorch = process_in_use - reserved_total (this process's own non-PyTorch
///                         memory: CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers)
///   unattributed        = total - free - process_in_use - other_processes
///   shortfall           = requested - free
///   job_needs           = allocated_by_pytorch + requested + this process's memory outside
///                         PyTorch: the least this process needed at the failure point, with
///                         every cached byte reused; the real peak can only be higher.
///   card_available      = total - other_processes (the most this process could have)
/// Subtractions saturate at zero (Windows can report more allocated than the card holds).
struct Diagnosis {
  std::string primary;             ///< one of the ids above
  std::vector<std::string> kinds;  ///< primary first, then the others that apply

  std::string format;   ///< the message's format id
  std::string backend;  ///< "CUDA", "HIP", ...
  std::optional<int> gpu;

  std::optional<Bytes> requested, total, free;
  std::optional<Bytes> allocated_by_pytorch, reserved_unallocated, reserved_total;
  std::optional<Bytes> process_in_use, process_non_pytorch;
  std::optional<Bytes> other_processes;  ///< sum of `others`
  std::vector<OtherProcess> others;
  std::optional<Bytes> outside_pytorch, unattributed;
  std::optional<Bytes> shortfall;       ///< requested - free (zero when free >= requested)
  std::optional<Bytes> job_needs;       ///< see above
  std::optional<Bytes> card_available;  ///< total - other_processes
  std::optional<Bytes> over_card;       ///< job_needs - card_available, when positive

  std::optional<CandidateMatch> match;  ///< the expected tensor the request matches, if any

  std::vector<FixHint> fixes;         ///< ordered and filtered for the classification
  std::vector<std::string> findings;  ///< what the numbers say, one sentence each
};

/// Diagnoses one message. `candidates` are expected request sizes (may be empty); the closest
/// one within 2% of the request (compared after the allocator's rounding) becomes `match`.
/// `summary`, when given, adds what a memory summary says (retries, peak, non-releasable).
/// Never throws on any message scan() can produce.
Diagnosis diagnose(const OomMessage& message, const std::vector<NamedSize>& candidates = {},
                   const std::optional<MemorySummary>& summary = std::nullopt);

/// The exit code `vramfit explain` returns for a scan: ok (0) when an OOM message was found and
/// explained, does_not_fit (1) when the text holds none. (Unreadable input, 2, is the CLI's.)
ExitCode explain_exit_code(const OomScan& scan) noexcept;

/// Diagnoses scan.chosen() with the scan's memory summary; nothing when the scan found no
/// message.
std::optional<Diagnosis> explain(const OomScan& scan, const std::vector<NamedSize>& candidates = {});

}  // namespace vramfit::doctor
