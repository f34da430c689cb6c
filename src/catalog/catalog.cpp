#include "vramfit/catalog/catalog.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"

namespace vramfit::catalog {

// Defined in the source that src/catalog/embed_data.cmake generates from data/ at build time.
const std::map<std::string, std::string>& embedded_files();

namespace {

using nlohmann::json;

/// Reads typed fields of one JSON object, every error naming `file: path.field`.
class Reader {
 public:
  Reader(const json& obj, std::string file, std::string path)
      : obj_(obj), file_(std::move(file)), path_(std::move(path)) {
    if (!obj_.is_object()) fail("", fmt::format("must be a JSON object, not {}", obj_.type_name()));
  }

  [[nodiscard]] std::string where(std::string_view key) const {
    std::string p = path_;
    if (!key.empty()) p += p.empty() ? std::string(key) : "." + std::string(key);
    return p.empty() ? file_ : file_ + ": " + p;
  }

  [[noreturn]] void fail(std::string_view key, std::string problem) const {
    throw InputError(where(key), std::move(problem), "fix the catalog file");
  }

  const json& get(std::string_view key) const {
    const auto it = obj_.find(std::string(key));
    if (it == obj_.end()) fail(key, "missing");
    return *it;
  }

  [[nodiscard]] std::string string(std::string_view key, bool allow_empty = false) const {
    const json& v = get(key);
    if (!v.is_string()) fail(key, fmt::format("must be a string, not {}", v.type_name()));
    auto s = v.get<std::string>();
    if (s.empty() && !allow_empty) fail(key, "must not be empty");
    return s;
  }

  [[nodiscard]] std::uint64_t positive(std::string_view key) const {
    const json& v = get(key);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > 0) return v.get<std::uint64_t>();
    fail(key, fmt::format("must be a positive integer, not {}", json_excerpt(v)));
  }

  [[nodiscard]] bool has(std::string_view key) const { return obj_.find(std::string(key)) != obj_.end(); }

  [[nodiscard]] std::optional<std::uint64_t> positive_or_null(std::string_view key) const {
    if (get(key).is_null()) return std::nullopt;
    return positive(key);
  }

  [[nodiscard]] bool boolean(std::string_view key) const {
    const json& v = get(key);
    if (!v.is_boolean()) fail(key, fmt::format("must be true or false, not {}", json_excerpt(v)));
    return v.get<bool>();
  }

  /// "M.m" (a CUDA compute capability: "9.0", "12.0") as M * 10 + m; 0 when the key is absent
  /// or null.
  [[nodiscard]] unsigned compute_capability(std::string_view key) const {
    const auto it = obj_.find(std::string(key));
    if (it == obj_.end() || it->is_null()) return 0;
    const std::string s = string(key);
    const auto dot = s.find('.');
    const bool digits = dot != std::string::npos && dot >= 1 && dot <= 2 && dot + 2 == s.size() &&
                        std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) &&
                        s.find('.', dot + 1) == std::string::npos;
    if (!digits) fail(key, fmt::format("must be a CUDA compute capability such as \"9.0\", not '{}'", text_excerpt(s)));
    const unsigned major = static_cast<unsigned>(std::stoul(s.substr(0, dot)));
    const unsigned minor = static_cast<unsigned>(s[dot + 1] - '0');
    if (major == 0) fail(key, fmt::format("must be a CUDA compute capability such as \"9.0\", not '{}'", text_excerpt(s)));
    return major * 10 + minor;
  }

  [[nodiscard]] const json& array(std::string_view key) const {
    const json& v = get(key);
    if (!v.is_array()) fail(key, fmt::format("must be an array, not {}", v.type_name()));
    return v;
  }

 private:
  const json& obj_;
  std::string file_;
  std::string path_;
};

/// An id is lower-case letters, digits, '-', '.', '_' (they are typed on command lines).
void check_id(const Reader& r, std::string_view key, std::string_view id) {
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok)
      r.fail(key, fmt::format("'{}' is not a valid id (use lower-case letters, digits, '-', '.', '_')",
                              text_excerpt(id)));
  }
}

json parse_json(const std::string& file, const std::string& text) {
  // A number beyond double (`"memory_bytes": 1e400`) is refused here too, not an internal error.
  return vramfit::parse_json(text, file, "fix the catalog file", "malformed JSON: ");
}

void parse_gpus(const std::string& file, const std::string& text, std::vector<Gpu>& gpus,
                std::vector<Tier>& tiers, std::string& default_provider) {
  const json doc = parse_json(file, text);
  const Reader top(doc, file, "");
  const json& gpu_list = top.array("gpus");
  std::set<std::string> gpu_ids;
  for (std::size_t i = 0; i < gpu_list.size(); ++i) {
    const Reader r(gpu_list[i], file, fmt::format("gpus[{}]", i));
    Gpu g;
    g.id = r.string("id");
    check_id(r, "id", g.id);
    if (!gpu_ids.insert(g.id).second) r.fail("id", fmt::format("duplicate GPU id '{}'", text_excerpt(g.id)));
    g.name = r.string("name");
    g.vendor = r.string("vendor");
    g.memory_label = r.string("memory_label");
    g.memory = Bytes{r.positive("memory_bytes")};
    g.bf16 = r.boolean("bf16");
    g.compute_capability = r.compute_capability("compute_capability");
    if (const auto sms = r.has("sm_count") ? r.positive_or_null("sm_count") : std::nullopt) {
      if (*sms > 10000) r.fail("sm_count", fmt::format("{} streaming multiprocessors is not a GPU's", *sms));
      if (g.compute_capability == 0) r.fail("sm_count", "an SM count needs the card's compute_capability");
      g.sm_count = static_cast<unsigned>(*sms);
    }
    g.source = r.string("source");
    gpus.push_back(std::move(g));
  }
  const json& providers = top.array("providers");
  std::set<std::string> provider_ids;
  for (std::size_t i = 0; i < providers.size(); ++i) {
    const Reader p(providers[i], file, fmt::format("providers[{}]", i));
    const std::string provider = p.string("id");
    check_id(p, "id", provider);
    if (!provider_ids.insert(provider).second)
      p.fail("id", fmt::format("duplicate provider id '{}'", text_excerpt(provider)));
    if (provider == kAllProviders)
      p.fail("id", fmt::format("'{}' is reserved ('--provider {}' searches every tier and GPU)", kAllProviders,
                               kAllProviders));
    (void)p.string("name");
    const std::string source = p.string("source");
    const json& tier_list = p.array("tiers");
    std::set<std::string> tier_ids;
    for (std::size_t j = 0; j < tier_list.size(); ++j) {
      const Reader t(tier_list[j], file, fmt::format("providers[{}].tiers[{}]", i, j));
      Tier tier;
      tier.id = t.string("id");
      if (!tier_ids.insert(tier.id).second)
        t.fail("id", fmt::format("duplicate tier id '{}' in provider '{}'", text_excerpt(tier.id), text_excerpt(provider)));
      tier.provider = provider;
      tier.gpu = t.string("gpu");
      if (gpu_ids.count(tier.gpu) == 0) t.fail("gpu", fmt::format("unknown GPU '{}'", text_excerpt(tier.gpu)));
      tier.count = t.positive("count");
      tier.source = source;
      tiers.push_back(std::move(tier));
    }
  }
  // Optional: the provider the advisor's tier search defaults to.
  if (doc.contains("default_provider") && !doc["default_provider"].is_null()) {
    default_provider = top.string("default_provider");
    if (provider_ids.count(default_provider) == 0)
      top.fail("default_provider", fmt::format("names no provider of 'providers' ('{}')", text_excerpt(default_provider)));
  }
}

Preset parse_preset(const std::string& file, const std::string& stem, const std::string& text) {
  const json doc = parse_json(file, text);
  const Reader r(doc, file, "");
  Preset p;
  p.id = r.string("id");
  check_id(r, "id", p.id);
  if (p.id != stem)
    r.fail("id", fmt::format("'{}' differs from the file name '{}'", text_excerpt(p.id), text_excerpt(stem)));
  p.name = r.string("name");
  p.hf_repo = r.string("hf_repo");
  p.source = r.string("source");
  p.published_params = r.positive_or_null("published_params");
  if (p.published_params) {
    p.published_params_source = r.string("published_params_source");
  } else if (doc.contains("published_params_source") && !doc["published_params_source"].is_null()) {
    p.published_params_source = r.string("published_params_source", true);
  }
  const json& config = r.get("config");
  if (!config.is_object()) r.fail("config", fmt::format("must be a JSON object, not {}", config.type_name()));
  p.config = config;
  return p;
}

template <typename T>
const T& lookup(const std::vector<T>& items, std::string_view id, std::string_view field,
                std::string_view what, std::string_view list_command) {
  const std::string wanted = lower(id);
  for (const auto& item : items)
    if (item.id == wanted) return item;
  std::vector<std::string> known;
  known.reserve(items.size());
  for (const auto& item : items) known.push_back(item.id);
  const std::string fix =
      did_you_mean_fix(wanted, known, "", fmt::format("run 'vramfit {}' to list them", list_command));
  throw InputError(std::string(field), fmt::format("unknown {} '{}'", what, text_excerpt(id)), fix);
}

}  // namespace

const Catalog& Catalog::embedded() {
  // Parsed once, on first use; the embedded files were validated by the data tests.
  static const Catalog catalog = parse(embedded_files());
  return catalog;
}

Catalog Catalog::parse(const std::map<std::string, std::string>& files) {
  Catalog c;
  const auto gpus = files.find("gpus.json");
  if (gpus == files.end())
    throw InputError("gpus.json", "missing from the catalog",
                     "the data folder needs gpus.json and models/*.json");
  parse_gpus(gpus->first, gpus->second, c.gpus_, c.tiers_, c.default_provider_);

  constexpr std::string_view kModels = "models/";
  constexpr std::string_view kJson = ".json";
  for (const auto& [path, text] : files) {
    if (path == "gpus.json") continue;
    // The engine's measured error table (engine/upper_bound.cpp), embedded from data/ too.
    if (path == "calibration.json") continue;
    const bool is_model = path.size() > kModels.size() + kJson.size() && path.starts_with(kModels) &&
                          path.ends_with(kJson) && path.find('/', kModels.size()) == std::string::npos;
    if (!is_model) {
      // An empty key would give a diagnostic that names nothing (found by catalog_fuzz).
      throw InputError(path.empty() ? "catalog" : path,
                       path.empty() ? "a file with an empty name" : "unexpected file in the catalog",
                       "the data folder holds gpus.json and models/<id>.json only");
    }
    const std::string stem = path.substr(kModels.size(), path.size() - kModels.size() - kJson.size());
    c.presets_.push_back(parse_preset(path, stem, text));
  }
  // std::map iterates in key order, so presets are sorted by id.
  return c;
}

const Gpu& Catalog::gpu(std::string_view id, std::string_view field) const {
  return lookup(gpus_, id, field, "GPU", "gpus");
}

const Preset& Catalog::preset(std::string_view id, std::string_view field) const {
  return lookup(presets_, id, field, "model preset", "models");
}

}  // namespace vramfit::catalog
