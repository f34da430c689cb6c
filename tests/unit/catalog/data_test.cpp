// Data tests: every file of data/ (as embedded in the binary) loads and holds together.
#include <set>

#include <catch2/catch.hpp>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/spec/parse.hpp"

using vramfit::catalog::Catalog;

TEST_CASE("the embedded catalog loads and validates", "[catalog][data]") {
  const Catalog& c = Catalog::embedded();
  CHECK_FALSE(c.gpus().empty());
  CHECK_FALSE(c.presets().empty());
  // The same object every time: parsed once.
  CHECK(&Catalog::embedded() == &c);
}

TEST_CASE("catalog ids are unique and tiers name known GPUs", "[catalog][data]") {
  const Catalog& c = Catalog::embedded();
  std::set<std::string> gpu_ids;
  for (const auto& g : c.gpus()) {
    INFO(g.id);
    CHECK(gpu_ids.insert(g.id).second);
    CHECK_FALSE(g.source.empty());
    // Between 1 GiB and 1 TiB: a memory_bytes typo (a missing or extra digit) shows here.
    CHECK(g.memory.value() >= (1ULL << 30));
    CHECK(g.memory.value() <= (1ULL << 40));
  }
  std::set<std::string> tier_ids;
  for (const auto& t : c.tiers()) {
    INFO(t.provider << "/" << t.id);
    CHECK(tier_ids.insert(t.provider + "/" + t.id).second);
    CHECK(gpu_ids.count(t.gpu) == 1);
    CHECK(t.count >= 1);
  }
  std::set<std::string> preset_ids;
  for (const auto& p : c.presets()) {
    INFO(p.id);
    CHECK(preset_ids.insert(p.id).second);
    CHECK_FALSE(p.source.empty());
    CHECK_FALSE(p.hf_repo.empty());
    if (p.published_params) CHECK_FALSE(p.published_params_source.empty());
  }
}

TEST_CASE("the README's quick-start preset and GPU exist", "[catalog][data]") {
  const Catalog& c = Catalog::embedded();
  CHECK(c.preset("llama-3.1-8b").id == "llama-3.1-8b");
  CHECK(c.gpu("h100-80gb").id == "h100-80gb");
}

TEST_CASE("every preset's config builds a model spec", "[catalog][data]") {
  for (const auto& p : Catalog::embedded().presets()) {
    INFO(p.id);
    const auto spec = vramfit::spec::from_config(p.config, "models/" + p.id + ".json: config");
    CHECK(spec.params > 0);
    CHECK(spec.num_layers > 0);
    // A published count (the model card's) agrees with the count from the config within 1%.
    if (p.published_params) {
      const double published = static_cast<double>(*p.published_params);
      const double counted = static_cast<double>(spec.params);
      CHECK(std::abs(counted - published) <= 0.01 * published);
    }
  }
}
