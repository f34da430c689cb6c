#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/advisor/budget.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::advisor {

/// One fix the advisor knows, in the order it tries them (the seed document's order).
struct FixInfo {
  std::string_view id;     ///< stable id (JSON, `--allow`, `--deny`): "reduce_batch", ...
  std::string_view title;  ///< short human title: "Smaller micro-batch"
};

/// The fixes in the order the walk tries them: reduce_batch, mixed_precision,
/// gradient_checkpointing, quantize_8bit, quantize_4bit, inference_mode, expandable_segments.
std::span<const FixInfo> fixes() noexcept;

/// One fix of the walk, tried on the workload the earlier fixes left.
struct StepResult {
  std::string id;          ///< a FixInfo id
  std::string title;       ///< what the fix is here ("QLoRA: ..." for quantize_4bit in training)
  bool applied = false;    ///< false: skipped, ruled out, or it would not lower memory
  bool ruled_out = false;  ///< not applied because of --allow/--deny
  std::string reason;      ///< applied: what changed ("batch 8 -> 2, grad_accum 1 -> 4");
                           ///< skipped: why ("inference keeps no activations for backward")
  std::string how;  ///< the code or setting that does it; may be empty (inference_mode sets it when skipped)
  std::string warning;               ///< applied: the cost ("can cost quality"); may be empty
  /// The workload after this step (unchanged when skipped), its allocator setting included
  /// (spec::Workload::expandable_segments).
  spec::Workload workload;
  Bytes before;                      ///< device_total before the step
  Bytes after;                       ///< device_total after it (== before when not applied)
  bool fits = false;                 ///< the budget holds `after` (only the last step may say true)
};

/// A cloud tier (or `count` x a catalog GPU) that runs the workload.
struct TierChoice {
  catalog::Tier tier;       ///< provider tier, or a synthetic one ("h100-80gb-x2", provider "")
  Bytes gpu_memory;         ///< memory of one GPU of the tier
  Bytes total_memory;       ///< count x gpu_memory: the order of "smallest"
  Bytes per_gpu_total;      ///< the engine's per-GPU device_total on this tier
  spec::Workload workload;  ///< the workload as run there (gpus = count, sharding set)
  std::vector<std::string> fixes;  ///< ids of the fixes applied on this tier (empty: unchanged)
};

/// A larger micro-batch that still fits once the later fixes are on (see Advice::larger_batch).
struct LargerBatch {
  std::uint64_t batch = 1;       ///< the micro-batch
  std::uint64_t grad_accum = 1;  ///< training: keeps batch x grad_accum as the user gave it
  Bytes device_total;            ///< the engine's estimate with every applied fix and this batch
};

/// The advisor's answer.
struct Advice {
  Budget budget;                ///< the budget the walk ran against (Budget::verdict decides)
  bool fits_initially = false;  ///< the workload as given fits the budget
  bool fits = false;            ///< the final workload fits (after the fixes if any)
  engine::Breakdown initial_estimate;
  /// The fixes tried in order, up to the first that makes the workload fit (all of them when
  /// none does). Empty when the workload fits as given.
  std::vector<StepResult> steps;
  spec::Workload final_workload;  ///< after every applied step
  engine::Breakdown final_estimate;  ///< engine::estimate of the final workload
  /// When reduce_batch cut the micro-batch and later fixes freed memory, the largest micro-batch
  /// above the walk's and up to the user's own (training: a divisor of the effective batch) that
  /// still fits with every applied fix (binary search, monotone assumption). The user's own batch
  /// means reduce_batch was not needed once the later fixes are on. A suggestion: final_workload
  /// keeps the walk's batch, so the steps stay consistent.
  std::optional<LargerBatch> larger_batch;
  /// The smallest tier that runs the workload as given (per-GPU micro-batch unchanged).
  std::optional<TierChoice> tier_unchanged;
  /// The smallest tier where the fixes (same order, same allow/deny) make it fit.
  std::optional<TierChoice> tier_with_fixes;
  std::optional<std::string> provider;  ///< the provider the tiers were restricted to
  std::size_t tiers_considered = 0;     ///< how many candidate tiers were looked at
};

/// Options of `advise`.
struct AdviseOptions {
  /// Fix ids the walk may use (empty: all). Entries may hold comma-separated ids.
  std::vector<std::string> allow;
  /// Fix ids the walk must not use. Entries may hold comma-separated ids.
  std::vector<std::string> deny;
  /// Restrict the tiers to this provider's list (catalog provider id).
  std::optional<std::string> provider;
  /// Look for tiers at all (the short form under `estimate` may turn this off).
  bool tiers = true;
};

/// Walks the fixes in order on `workload`, re-estimating with the engine after each, and
/// stops at the first configuration that fits `budget`; then looks for the smallest tiers.
/// Throws InputError for unknown ids in allow/deny (with "did you mean"), an id both allowed
/// and denied, an unknown provider, or a headroom that leaves nothing of the budget.
Advice advise(const spec::ModelSpec& model, const spec::Workload& workload, const Budget& budget,
              const catalog::Catalog& catalog, const AdviseOptions& options = {});

/// The exit code of `advise` and of `estimate` with a budget: ok when the workload as given
/// fits, does_not_fit otherwise (even when the fixes make it fit: CI asks about the job as
/// written).
ExitCode exit_code(const Advice& advice) noexcept;

/// The candidate tiers, smallest first: least total memory (count x GPU memory), then fewer
/// GPUs, then id. With `provider`, that provider's tiers only (InputError naming `--provider`
/// when unknown); without, every catalog GPU at 1, 2, 4 and 8 cards (ids "<gpu>-x<count>",
/// provider "") plus every provider tier, a provider tier replacing the synthetic tier of
/// the same GPU and count.
std::vector<catalog::Tier> candidate_tiers(const catalog::Catalog& catalog,
                                           const std::optional<std::string>& provider);

/// The workload as run on `count` GPUs: gpus = count; on one GPU sharding none; on several,
/// the user's sharding when it splits the model (zero3, fsdp, tp, device_map), else fsdp for
/// training (ZeRO-3-style: the engine returns the per-GPU estimate) and device_map (layers
/// split across cards) for inference and generation. The per-GPU micro-batch is unchanged.
spec::Workload on_gpus(const spec::Workload& workload, std::uint64_t count);

}  // namespace vramfit::advisor
