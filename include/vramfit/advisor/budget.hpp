#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/bytes.hpp"

namespace vramfit::advisor {

/// A safety margin kept free on every GPU (`--headroom 10%` or `--headroom 2GiB`).
/// A percentage applies to each GPU's own memory (the budget, or a tier's card);
/// a size applies as is. The default keeps no margin.
struct Headroom {
  /// Parts per million of the memory: 10% = 100000. Used when `is_percent`.
  std::uint64_t ppm = 0;
  /// Fixed bytes. Used when not `is_percent`.
  Bytes bytes;
  bool is_percent = false;

  /// The margin on a GPU of `memory` bytes: ppm * memory / 10^6 rounded up (a margin errs
  /// on the safe side), or the fixed bytes. May exceed `memory` for a fixed size.
  [[nodiscard]] Bytes on(Bytes memory) const;
  /// "10%", "2147483648 B" or "0": how the margin was given, for reports.
  [[nodiscard]] std::string label() const;

  friend bool operator==(const Headroom&, const Headroom&) = default;
};

/// Parses `--headroom`: a percentage of the budget (`10%`, `7.5%`, at most 4 decimals,
/// 0 <= p < 100) or a size as spec::parse_size reads it (`2GiB`, `500MB`, bytes); `0` is no
/// margin. Throws InputError naming `field` for anything else: empty, negative, NaN,
/// infinite, 100% or more, a bad size.
Headroom parse_headroom(std::string_view text, std::string_view field = "--headroom");

/// Whether a job fits a budget. Decided in one place, Budget::verdict; everything that prints
/// or returns "fits" (estimate, advise, fit, the exit codes) asks it.
enum class Verdict {
  fits,          ///< device_total + margin <= bytes (with an upper bound: the bound fits too)
  does_not_fit,  ///< it does not
  tight,         ///< the estimate fits, the device total's upper bound does not
};

/// Stable spellings: "fits", "does_not_fit", "tight".
std::string_view name_of(Verdict v) noexcept;

/// The memory a job may use on one GPU, and the margin to keep free on it. The one budget of
/// every command: the advisor's walk and search, the renderers and the exit codes read it.
struct Budget {
  Bytes bytes;           ///< the GPU's memory (`--gpu`) or the `--budget` size
  Headroom headroom;     ///< kept free: the job fits when device_total + margin <= bytes
  bool gpu_bf16 = true;  ///< the GPU computes in bf16 (decides bf16 vs fp16 mixed precision)
  std::string gpu_id;    ///< the catalog id when given by `--gpu`; empty for `--budget`
  /// How the budget was given, for reports: "h100-80gb (NVIDIA H100 80GB HBM3)" for `--gpu`,
  /// the `--budget` text ("24GiB") otherwise; may be empty (a budget built in code).
  std::string label;
  /// The `--headroom` text as typed ("10%", "2GiB"); empty when no margin was asked for.
  std::string headroom_label;

  /// The margin in bytes on this budget (headroom.on(bytes)).
  [[nodiscard]] Bytes headroom_bytes() const { return headroom.on(bytes); }
  /// The verdict for a job needing `device_total` bytes on the GPU (no overflow: compared by
  /// subtraction).
  [[nodiscard]] Verdict verdict(Bytes device_total) const;
  /// The three-way verdict: fits when the upper bound of the device total fits, tight when only
  /// the estimate does, does_not_fit otherwise (engine::Breakdown::upper()).
  [[nodiscard]] Verdict verdict(Bytes device_total, Bytes upper) const;
  /// verdict(device_total) == Verdict::fits.
  [[nodiscard]] bool fits(Bytes device_total) const { return verdict(device_total) == Verdict::fits; }
  /// bytes - device_total, the margin not counted: what is left on the GPU, negative when the
  /// job needs more than the GPU has (saturates at the int64 range).
  [[nodiscard]] std::int64_t spare(Bytes device_total) const noexcept;
  /// How much device_total + margin exceeds bytes (saturated at 2^64 - 1); zero when it fits.
  [[nodiscard]] Bytes short_by(Bytes device_total) const noexcept;
};

/// The budget of one catalog GPU: its memory, its bf16 support, its id.
Budget budget_for_gpu(const catalog::Gpu& gpu, const Headroom& headroom = {});

/// A `--budget SIZE` budget: no GPU known, so bf16 is assumed (every GPU since Ampere).
Budget budget_of(Bytes bytes, const Headroom& headroom = {});

/// Throws InputError (field `--headroom`) when the margin leaves nothing of the budget:
/// headroom_bytes() >= bytes. Called by advise() and solve(); the CLI may call it early.
void check_budget(const Budget& budget);

}  // namespace vramfit::advisor
