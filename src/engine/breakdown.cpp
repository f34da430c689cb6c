#include "vramfit/engine/breakdown.hpp"

namespace vramfit::engine {

const Component* Breakdown::find(std::string_view id) const noexcept {
  for (const auto& c : components)
    if (c.id == id) return &c;
  return nullptr;
}

}  // namespace vramfit::engine
