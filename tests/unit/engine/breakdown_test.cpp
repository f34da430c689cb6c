#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "vramfit/engine/breakdown.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "../../cli/cli_helper.hpp"

using namespace vramfit;
using engine::ComponentId;
using engine::PhaseId;

TEST_CASE("breakdown: one named row per component id, and names round-trip", "[engine][breakdown]") {
  // A row missing, out of order or unnamed does not build (static_assert in breakdown.hpp); this
  // checks what the compiler does not: names unique, parse the inverse of to_string.
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < engine::kComponentCount; ++i) {
    const auto id = static_cast<ComponentId>(i);
    const std::string_view name = engine::to_string(id);
    INFO(name);
    CHECK(engine::info(id).id == id);
    CHECK_FALSE(name.empty());
    CHECK(names.insert(name).second);
    CHECK(engine::parse_component(name) == id);
    CHECK_FALSE(engine::info(id).description.empty());
  }
  CHECK(names.size() == engine::kComponents.size());
  CHECK(engine::to_string(ComponentId::kv_cache) == "kv_cache");
  CHECK(engine::to_string(ComponentId::paged_optimizer_state) == "paged_optimizer_state");
  CHECK_FALSE(engine::parse_component("KV_cache"));
  CHECK_FALSE(engine::parse_component(""));
}

TEST_CASE("breakdown: one named row per phase id, and names round-trip", "[engine][breakdown]") {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < engine::kPhaseCount; ++i) {
    const auto id = static_cast<PhaseId>(i);
    const std::string_view name = engine::to_string(id);
    INFO(name);
    CHECK(engine::info(id).id == id);
    CHECK_FALSE(name.empty());
    CHECK(names.insert(name).second);
    CHECK(engine::parse_phase(name) == id);
    // The backward flag marks exactly the phases of the backward pass.
    CHECK(engine::info(id).backward == (name.substr(0, 9) == "backward_"));
  }
  CHECK(names.size() == engine::kPhases.size());
  CHECK(engine::to_string(PhaseId::backward_recompute) == "backward_recompute");
  CHECK_FALSE(engine::parse_phase("backward"));  // no such phase: the ids are the table's
  CHECK_FALSE(engine::parse_phase("forward"));
}

TEST_CASE("breakdown: the transformers engine reports the table's components in its order",
          "[engine][breakdown]") {
  const auto m = spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000})",
                                        "tiny.json");
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.batch = 1;
  w.seq = 64;
  const auto b = engine::estimate(m, w);
  std::vector<ComponentId> expected;
  for (const auto& c : engine::kComponents)
    if (c.per_phase) expected.push_back(c.id);
  expected.push_back(ComponentId::allocator_reserve);
  expected.push_back(ComponentId::cuda_context);
  std::vector<ComponentId> got;
  for (const auto& c : b.components) got.push_back(c.id);
  CHECK(got == expected);
  REQUIRE(b.find(ComponentId::weights) != nullptr);
  CHECK(b.find(ComponentId::weights)->description == engine::info(ComponentId::weights).description);
  CHECK(b.find(ComponentId::mmproj) == nullptr);
  // Training without checkpointing (what is resident, `load`, is in every phase, not one of its own):
  // the forward's last layer first (engine/activations, forward_transient).
  std::vector<PhaseId> phases;
  for (const auto& p : b.phases) phases.push_back(p.id);
  CHECK(phases == std::vector<PhaseId>{PhaseId::forward_layer, PhaseId::forward_end, PhaseId::backward_start,
                                       PhaseId::backward_last_layer, PhaseId::backward_end, PhaseId::optimizer_step});
}

TEST_CASE("engine: no rule tests a model family by name", "[engine][arch]") {
  // What a model type does differently is a field of its architecture row (spec/architectures.hpp).
  for (const char* file : {"src/engine/activations.cpp", "src/engine/estimate.cpp", "src/engine/reserve.cpp"}) {
    INFO(file);
    const std::string src = vramfit::test::read_text(std::filesystem::path(VRAMFIT_SOURCE_DIR) / file);
    CHECK_FALSE(src.empty());
    CHECK(src.find("family ==") == std::string::npos);
    CHECK(src.find("family !=") == std::string::npos);
  }
}

TEST_CASE("breakdown: the README's JSON section names every component and phase id", "[engine][breakdown]") {
  const std::string readme = vramfit::test::read_text(std::filesystem::path(VRAMFIT_SOURCE_DIR) / "README.md");
  const auto begin = readme.find("Component ids are API:");
  REQUIRE(begin != std::string::npos);
  const auto end = readme.find("### `vramfit advise --json`", begin);
  REQUIRE(end != std::string::npos);
  const std::string section = readme.substr(begin, end - begin);
  for (const auto& c : engine::kComponents) {
    INFO(c.name);
    CHECK(section.find("`" + std::string(c.name) + "`") != std::string::npos);
  }
  for (const auto& p : engine::kPhases) {
    INFO(p.name);
    CHECK(section.find("`" + std::string(p.name) + "`") != std::string::npos);
  }
}
