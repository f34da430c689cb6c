#pragma once

#include <cstdint>
#include <string>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

/// The kind of workload the device total's measured error is grouped by (data/calibration.json):
/// "<mode>/<single|sharded>[/ckpt]" with mode inference, generate, train or lora (qlora counts
/// as lora); "/ckpt" for training with gradient checkpointing. E.g. "train/single/ckpt".
std::string calibration_group(const spec::Workload& workload);

/// The pooled group a workload falls back to: its mode ("train"), and "all" past that.
std::string calibration_mode(const spec::Workload& workload);

/// How far above the device total the real one may be, for one kind of workload: the 95th
/// percentile of measured / estimated device totals over that kind's measured cases, in
/// thousandths, rounded up (at least 1000).
struct UpperFactor {
  std::string group;          ///< the workload's group
  std::string from;           ///< the group whose cases set the factor ("train" when pooled)
  std::uint64_t permille = 1000;
  std::size_t cases = 0;      ///< measured cases behind `from`
};

/// The factor of a workload from the embedded data/calibration.json: its own group when measured
/// with enough cases, else the pooled entry the calibration names, else the mode's pool, else "all".
UpperFactor upper_factor(const spec::Workload& workload);

/// ceil(total * permille / 1000), saturating at 2^64 - 1.
Bytes apply_upper(Bytes total, std::uint64_t permille) noexcept;

}  // namespace vramfit::engine
