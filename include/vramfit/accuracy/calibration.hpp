#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vramfit/accuracy/truth.hpp"

namespace vramfit::accuracy {

/// The measured error of the device total for one kind of workload (engine::calibration_group),
/// or for a pool of them (a mode: "train"; everything: "all").
struct GroupCalibration {
  std::string group;
  std::size_t cases = 0;           ///< measured ok cases of the group
  double p95_ratio = 0;            ///< 95th percentile (nearest rank) of measured / estimated
  double max_ratio = 0;
  std::string from;                ///< the group whose factor applies (itself, or a pool)
  std::size_t from_cases = 0;
  std::uint64_t factor_permille = 1000;  ///< the upper bound's factor, thousandths
  std::size_t covered = 0;         ///< cases with measured <= estimate x their group's factor
};

/// Groups with fewer measured cases than this take their pool's factor (raised to cover their own
/// 95th percentile when that is higher).
inline constexpr std::size_t kMinGroupCases = 20;

/// The calibration over measured results (ok cases only; OOM cases measure no device total):
/// per group the 95th percentile of measured / estimated device totals (nearest rank), rounded up
/// to a thousandth and at least 1; pools "<mode>" and "all" likewise. Sorted by group name.
std::vector<GroupCalibration> calibrate(const std::vector<const CaseResult*>& results);

/// The data/calibration.json text for these groups; `sources` lists the truth files used.
std::string calibration_json(const std::vector<GroupCalibration>& groups, const std::vector<std::string>& sources);

}  // namespace vramfit::accuracy
