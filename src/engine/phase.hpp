#pragma once
// Internal to the engine: a phase of a step as the engine builds it (estimate.cpp) and the
// allocator reserve reads it (reserve.cpp).

#include <utility>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/engine/breakdown.hpp"

namespace vramfit::engine::detail {

/// A phase under construction: bytes per component.
struct Acc {
  PhaseId id = PhaseId::load;
  std::vector<std::pair<ComponentId, Bytes>> parts;
  void add(ComponentId part, Bytes b) {
    for (auto& [k, v] : parts)
      if (k == part) {
        v += b;
        return;
      }
    parts.emplace_back(part, b);
  }
  /// The bytes of one component in this phase (zero when absent).
  [[nodiscard]] Bytes part(ComponentId which) const {
    Bytes b;
    for (const auto& [k, v] : parts)
      if (k == which) b += v;
    return b;
  }
  [[nodiscard]] Bytes total() const {
    Bytes t;
    for (const auto& [k, v] : parts) t += v;
    return t;
  }
};

}  // namespace vramfit::engine::detail
