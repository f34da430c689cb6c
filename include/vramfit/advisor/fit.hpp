#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/advisor/budget.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::advisor {

/// What `vramfit fit --solve` searches for.
enum class Dimension {
  batch,  ///< micro-batch size (Workload.batch); grad_accum is left as given
  seq,    ///< sequence length (Workload.seq: the prompt, for generate)
};

/// Stable spellings: "batch", "seq".
std::string_view name_of(Dimension d) noexcept;
/// Parses "batch" or "seq" (also "sequence", "seq_len"); InputError naming `field` otherwise.
Dimension parse_dimension(std::string_view text, std::string_view field = "--solve");

/// The largest value the search tries: 2^20 for batch, 2^24 for seq.
std::uint64_t search_cap(Dimension d) noexcept;

/// The largest workload that fits.
struct FitResult {
  Dimension dimension = Dimension::batch;
  /// False when even 1 does not fit; then `value` is 0 and `workload`/`estimate` are at 1.
  bool fits_at_one = false;
  std::uint64_t value = 0;         ///< the largest batch (or seq) that fits; 0 when none
  bool capped = false;             ///< `value` is search_cap: larger ones may fit too
  spec::Workload workload;         ///< the workload at `value` (at 1 when nothing fits)
  engine::Breakdown estimate;      ///< the engine's estimate of `workload`
  Budget budget;                   ///< the budget searched against (Budget::verdict decides)
  std::uint64_t estimates = 0;     ///< engine calls the search made
  std::vector<std::string> notes;  ///< e.g. a seq above the model's max_position_embeddings
};

/// The largest batch (or sequence length) of `workload` that fits `budget`: doubles from 1
/// until it does not fit (or reaches search_cap), then bisects between the last fit and the
/// first miss. Assumes device_total never decreases as the dimension grows (monotone). An
/// estimate that overflows 64 bits counts as not fitting (above 1). Throws InputError when
/// the headroom leaves nothing of the budget, or when the engine rejects the workload at 1.
FitResult solve(const spec::ModelSpec& model, const spec::Workload& workload, const Budget& budget,
                Dimension dimension);

/// The exit code of `fit`: ok when some value fits, does_not_fit when nothing fits at 1.
ExitCode exit_code(const FitResult& fit) noexcept;

}  // namespace vramfit::advisor
