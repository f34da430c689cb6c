#include "vramfit/engine/breakdown.hpp"

namespace vramfit::engine {

std::optional<ComponentId> parse_component(std::string_view name) noexcept {
  for (const auto& c : kComponents)
    if (c.name == name) return c.id;
  return std::nullopt;
}

std::optional<PhaseId> parse_phase(std::string_view name) noexcept {
  for (const auto& p : kPhases)
    if (p.name == name) return p.id;
  return std::nullopt;
}

const Component* Breakdown::find(ComponentId id) const noexcept {
  for (const auto& c : components)
    if (c.id == id) return &c;
  return nullptr;
}

}  // namespace vramfit::engine
