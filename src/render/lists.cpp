// `vramfit models` and `vramfit gpus`: the catalog as tables or JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/render/format.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

namespace {

using ojson = nlohmann::ordered_json;

std::string models_json(const std::vector<ModelEntry>& models) {
  ojson list = ojson::array();
  for (const auto& m : models) {
    ojson o;
    o["id"] = m.preset.id;
    o["name"] = m.preset.name;
    o["hf_repo"] = m.preset.hf_repo;
    o["model_type"] = m.spec.model_type;
    o["family"] = m.spec.family;
    o["params"] = m.spec.params;
    o["published_params"] = m.preset.published_params ? ojson(*m.preset.published_params) : ojson(nullptr);
    o["published_params_source"] = m.preset.published_params_source;
    o["num_layers"] = m.spec.num_layers;
    o["hidden_size"] = m.spec.hidden_size;
    o["source"] = m.preset.source;
    list.push_back(o);
  }
  ojson j;
  j["schema_version"] = kSchemaVersion;
  j["models"] = list;
  return j.dump(2) + "\n";
}

std::string models_text(const std::vector<ModelEntry>& models) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ID", "Name", "Params", "Type", "Layers", "Hidden", "Hugging Face repo"});
  for (const auto& m : models)
    rows.push_back({m.preset.id, m.preset.name, format_params(m.spec.params), m.spec.model_type,
                    std::to_string(m.spec.num_layers), std::to_string(m.spec.hidden_size), m.preset.hf_repo});
  std::string out =
      table(rows, {Align::left, Align::left, Align::right, Align::left, Align::right, Align::right});
  out += fmt::format(
      "\n{} presets. Params are counted from each config. Use one with: vramfit estimate --model ID\n",
      models.size());
  return out;
}

std::string gpus_json(const catalog::Catalog& c) {
  ojson gpus = ojson::array();
  for (const auto& g : c.gpus()) {
    ojson o;
    o["id"] = g.id;
    o["name"] = g.name;
    o["vendor"] = g.vendor;
    o["memory_label"] = g.memory_label;
    o["memory_bytes"] = g.memory.value();
    o["bf16"] = g.bf16;
    if (g.compute_capability != 0)
      o["compute_capability"] = fmt::format("{}.{}", g.compute_capability / 10, g.compute_capability % 10);
    o["source"] = g.source;
    gpus.push_back(o);
  }
  ojson tiers = ojson::array();
  for (const auto& t : c.tiers()) {
    ojson o;
    o["provider"] = t.provider;
    o["id"] = t.id;
    o["gpu"] = t.gpu;
    o["count"] = t.count;
    o["memory_bytes_per_gpu"] = c.gpu(t.gpu, "tier").memory.value();
    o["source"] = t.source;
    tiers.push_back(o);
  }
  ojson j;
  j["schema_version"] = kSchemaVersion;
  j["gpus"] = gpus;
  j["tiers"] = tiers;
  j["default_provider"] = c.default_provider().empty() ? ojson(nullptr) : ojson(c.default_provider());
  return j.dump(2) + "\n";
}

std::string gpus_text(const catalog::Catalog& c) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ID", "Name", "Vendor", "Memory", "Marketed", "bf16"});
  for (const auto& g : c.gpus())
    rows.push_back({g.id, g.name, g.vendor, format_bytes(g.memory), g.memory_label, g.bf16 ? "yes" : "no"});
  std::string out = "GPUs\n";
  out += table(rows, {Align::left, Align::left, Align::left, Align::right, Align::right, Align::left}, "  ");
  if (!c.tiers().empty()) {
    std::vector<std::vector<std::string>> tiers;
    tiers.push_back({"Provider", "Tier", "GPUs", "Memory per GPU"});
    for (const auto& t : c.tiers())
      tiers.push_back({t.provider, t.id, fmt::format("{} x {}", t.count, t.gpu),
                       format_bytes(c.gpu(t.gpu, "tier").memory)});
    out += "\nProvider tiers";
    if (!c.default_provider().empty())
      out += fmt::format(" (the advisor searches {}'s unless told '--provider ID' or '--provider all')",
                         c.default_provider());
    out += "\n";
    out += table(tiers, {Align::left, Align::left, Align::left, Align::right}, "  ");
  }
  out += "\nMemory is what the driver reports as total. Use one with: vramfit estimate ... --gpu ID\n";
  return out;
}

}  // namespace

std::string render_models(const std::vector<ModelEntry>& models, Format f) {
  switch (f) {
    case Format::text: return models_text(models);
    case Format::json: return models_json(models);
  }
  return {};
}

std::string render_gpus(const catalog::Catalog& c, Format f) {
  switch (f) {
    case Format::text: return gpus_text(c);
    case Format::json: return gpus_json(c);
  }
  return {};
}

}  // namespace vramfit::render
