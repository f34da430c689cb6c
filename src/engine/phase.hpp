#pragma once
// Internal to the engine: a phase of a step as the engine builds it (estimate.cpp) and the
// allocator reserve reads it (reserve.cpp).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramfit/core/bytes.hpp"

namespace vramfit::engine::detail {

/// A phase under construction: bytes per component id.
struct Acc {
  std::string id;
  std::vector<std::pair<std::string, Bytes>> parts;
  void add(std::string_view part, Bytes b) {
    for (auto& [k, v] : parts)
      if (k == part) {
        v += b;
        return;
      }
    parts.emplace_back(std::string(part), b);
  }
  [[nodiscard]] Bytes total() const {
    Bytes t;
    for (const auto& [k, v] : parts) t += v;
    return t;
  }
};

}  // namespace vramfit::engine::detail
