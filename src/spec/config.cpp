// Builds a ModelSpec from a Hugging Face config.json.
//
// Every shape below mirrors the module tree that transformers builds for the model type
// (src/transformers/models/<type>/modeling_<type>.py, transformers 5.x, the version the
// measured truth in ../shared/truth used), so that count_params() equals what
// `sum(p.numel() for p in model.parameters())` prints. Defaults for absent keys follow the
// config classes (configuration_<type>.py).

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/spec/architectures.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/quant.hpp"
#include "vramfit/spec/vision.hpp"

namespace vramfit::spec {

namespace {

using nlohmann::json;

// No real dimension comes near 2^40 (a trillion); a value that large is a typo or a
// corrupted file, and products of such values would overflow 64 bits.
constexpr std::uint64_t kMaxDim = 1ULL << 40;

constexpr std::string_view kConfigFix =
    "check the value against the model's config.json on the Hugging Face Hub";

/// A JSON value as the user wrote it, cut short for a one-line diagnostic.
std::string show(const json& v) { return json_excerpt(v); }

std::string_view kind_of(const json& v) { return json_kind(v); }

/// Reads typed values out of one JSON object, adding a diagnostic for each bad one.
class Reader {
 public:
  Reader(const json& obj, std::string prefix, Diagnostics& diags)
      : obj_(obj), prefix_(std::move(prefix)), diags_(diags) {}

  [[nodiscard]] std::string field(std::string_view key) const { return prefix_ + std::string(key); }
  [[nodiscard]] const json& object() const { return obj_; }

  /// The value under `key`, or nullptr when absent. `null` values count as present.
  [[nodiscard]] const json* find(std::string_view key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  /// True when `key` holds something other than null.
  [[nodiscard]] bool has(std::string_view key) const {
    const json* v = find(key);
    return v != nullptr && !v->is_null();
  }

  /// An optional integer: nullopt when absent or null; a diagnostic (and nullopt) when bad.
  std::optional<std::uint64_t> uint(std::string_view key, bool zero_ok = false) {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    return checked_uint(key, *v, zero_ok);
  }

  /// The first of `keys` that is present; a "missing" diagnostic naming keys[0] when none is.
  /// Returns 0 after any diagnostic.
  std::uint64_t required(std::initializer_list<std::string_view> keys, bool zero_ok = false) {
    for (std::string_view k : keys) {
      if (const json* v = find(k)) return checked_uint(k, *v, zero_ok).value_or(0);
    }
    const std::string_view first = *keys.begin();
    diags_.add(
        field(first), "missing: the model's size cannot be worked out without it",
        fmt::format("add \"{}\" as it appears in the model's config.json on the Hugging Face Hub", first));
    return 0;
  }

  /// The first of `keys` present and not null, or nullopt.
  std::optional<std::uint64_t> any(std::initializer_list<std::string_view> keys, bool zero_ok = false) {
    for (std::string_view k : keys)
      if (has(k)) return uint(k, zero_ok);
    return std::nullopt;
  }

  /// A boolean, `dflt` when absent or null.
  bool flag(std::string_view key, bool dflt) {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return dflt;
    if (v->is_boolean()) return v->get<bool>();
    diags_.add(field(key), fmt::format("expected true or false, got {}", show(*v)),
               "write true or false without quotes");
    return dflt;
  }

  /// A number, `dflt` when absent or null.
  double number(std::string_view key, double dflt) {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return dflt;
    if (v->is_number()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d >= 0) return d;
    }
    diags_.add(field(key), fmt::format("expected a non-negative number, got {}", show(*v)),
               std::string(kConfigFix));
    return dflt;
  }

  /// A string, nullopt when absent or null; a diagnostic when another type.
  std::optional<std::string> string(std::string_view key) {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    diags_.add(field(key), fmt::format("expected a string, got {}", show(*v)), std::string(kConfigFix));
    return std::nullopt;
  }

  Diagnostics& diags() { return diags_; }

 private:
  std::optional<std::uint64_t> checked_uint(std::string_view key, const json& v, bool zero_ok) {
    const std::string_view want = zero_ok ? "a non-negative integer" : "a positive integer";
    std::uint64_t x = 0;
    bool ok = false;
    if (v.is_number_unsigned()) {
      x = v.get<std::uint64_t>();
      ok = true;
    } else if (v.is_number_integer()) {
      const auto i = v.get<std::int64_t>();
      ok = i >= 0;
      x = ok ? static_cast<std::uint64_t>(i) : 0;
    }
    if (!ok || (x == 0 && !zero_ok)) {
      diags_.add(field(key), fmt::format("expected {}, got {}", want, show(v)),
                 v.is_string() ? "write the number without quotes" : std::string(kConfigFix));
      return std::nullopt;
    }
    if (x > kMaxDim) {
      diags_.add(field(key), fmt::format("{} is absurdly large (over 2^40)", x), std::string(kConfigFix));
      return std::nullopt;
    }
    return x;
  }

  const json& obj_;
  std::string prefix_;
  Diagnostics& diags_;
};

// ---------------------------------------------------------------------------------------
// The model types we know, and how each one's modules are laid out.

// The model types and their config-class defaults are a table (spec/architectures.cpp); the
// layouts below build each one's modules.
using Builder = Layout;
using TypeRow = Architecture;

const TypeRow* find_type(std::string_view model_type) { return find_architecture(model_type); }

/// Maps a Hugging Face activation name (ACT2FN's keys) to what the engine distinguishes.
std::optional<Activation> activation_from(std::string_view s) {
  // activations.py: "gelu_new" is NewGELUActivation (tanh formula in Python ops, saves
  // several intermediates); "gelu_pytorch_tanh" is one fused torch op; "gelu_fast" is
  // FastGELUActivation, also Python ops.
  if (s == "silu" || s == "swish") return Activation::silu;
  if (s == "gelu" || s == "gelu_python" || s == "quick_gelu" || s == "gelu_accurate") return Activation::gelu;
  if (s == "gelu_new" || s == "gelu_fast") return Activation::gelu_tanh_python;
  if (s == "gelu_pytorch_tanh") return Activation::gelu_pytorch_tanh;
  if (s == "relu") return Activation::relu;
  return std::nullopt;
}

/// Elements of one rotary `inv_freq` buffer: torch.arange(0, dim, 2) for the rotary dim.
std::uint64_t inv_freq_elems(std::uint64_t rotary_dim) { return (rotary_dim + 1) / 2; }

/// Bytes of one rotary embedding module: transformers 5 registers `inv_freq` and
/// `original_inv_freq` (modeling_rope_utils / LlamaRotaryEmbedding), both fp32 (built with
/// `.float()`), so they stay fp32 whatever the model's dtype. Measured: 256 bytes for
/// head_dim 64 and 512 for head_dim 128 (../shared/truth/results/public.jsonl).
std::uint64_t rotary_bytes(std::uint64_t rotary_dim) { return 2 * inv_freq_elems(rotary_dim) * 4; }

/// A product of config dimensions (each up to 2^40): checked, since two of them can
/// overflow 64 bits. Overflow is reported by from_config with the config's name.
std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return checked_mul(a, b, "parameters"); }

Linear lin(Role role, std::string name, std::uint64_t in, std::uint64_t out, bool bias = false) {
  Linear l;
  l.role = role;
  l.name = std::move(name);
  l.in_features = in;
  l.out_features = out;
  l.bias = bias;
  return l;
}

Linear expert(Role role, std::string name, std::uint64_t in, std::uint64_t out, std::uint64_t copies) {
  Linear l = lin(role, std::move(name), in, out);
  l.copies = copies;
  l.expert = true;
  return l;
}

Linear shared(Role role, std::string name, std::uint64_t in, std::uint64_t out) {
  Linear l = lin(role, std::move(name), in, out);
  l.shared_expert = true;
  return l;
}

/// Appends a layer to the groups, merging it into the last group when identical.
void push_layer(std::vector<LayerGroup>& groups, LayerGroup layer) {
  if (!groups.empty()) {
    LayerGroup& last = groups.back();
    const auto same = [](const Linear& a, const Linear& b) {
      return a.name == b.name && a.in_features == b.in_features && a.out_features == b.out_features &&
             a.bias == b.bias && a.copies == b.copies && a.expert == b.expert &&
             a.shared_expert == b.shared_expert;
    };
    if (last.moe == layer.moe && last.norm_params == layer.norm_params &&
        last.other_params == layer.other_params &&
        std::equal(last.linears.begin(), last.linears.end(), layer.linears.begin(), layer.linears.end(),
                   same)) {
      last.count += layer.count;
      return;
    }
  }
  groups.push_back(std::move(layer));
}

/// Counts entries of a config's `layer_types` list equal to "sliding_attention".
std::optional<std::uint64_t> sliding_from_layer_types(Reader& r) {
  const json* lt = r.find("layer_types");
  if (lt == nullptr || !lt->is_array()) return std::nullopt;
  std::uint64_t n = 0;
  for (const json& t : *lt)
    if (t.is_string() && t.get<std::string>() == "sliding_attention") ++n;
  return n;
}

/// Everything read from the config before any module is laid out.
struct Shape {
  std::uint64_t H = 0, L = 0, heads = 0, kv = 0, hd = 0, I = 0, V = 0, max_pos = 0;
  bool head_dim_given = false;
};

/// Reads the common dimensions, with the type's key spellings, and checks that they agree.
Shape read_shape(Reader& r, const TypeRow* row, bool needs_intermediate) {
  Shape s;
  const bool gpt2 = row != nullptr && (row->layout == Builder::gpt2 || row->layout == Builder::gptj);
  if (gpt2) {
    // GPT2Config's attribute_map: hidden_size -> n_embd, num_hidden_layers -> n_layer, ...
    s.H = r.required({"n_embd", "hidden_size"});
    s.L = r.required({"n_layer", "num_hidden_layers"});
    s.heads = r.required({"n_head", "num_attention_heads"});
    s.V = r.required({"vocab_size"});
    s.max_pos = r.any({"n_positions", "max_position_embeddings"}).value_or(0);
    if (!r.has("n_positions") && !r.has("max_position_embeddings"))
      s.max_pos = row->layout == Builder::gptj ? 2048 : 1024;  // GPT2Config 1024, GPTJConfig 2048
    // n_inner null or absent: 4 * n_embd (GPT2Block).
    s.I = r.any({"n_inner", "intermediate_size"}).value_or(s.H * 4);
  } else {
    // BloomConfig's attribute_map (n_embed), MptConfig's (d_model, n_layers, n_heads, max_seq_len).
    s.H = r.required({"hidden_size", "n_embd", "d_model", "n_embed"});
    s.L = r.required({"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
    s.heads = r.required({"num_attention_heads", "n_head", "n_heads"});
    s.V = r.required({"vocab_size"});
    s.max_pos = r.any({"max_position_embeddings", "n_positions", "max_seq_len"}).value_or(0);
    if (needs_intermediate)
      s.I = r.required({"intermediate_size"});
    else
      s.I = r.uint("intermediate_size").value_or(0);
  }
  s.kv = r.uint("num_key_value_heads").value_or(s.heads);
  if (const auto hd = r.uint("head_dim")) {
    s.hd = *hd;
    s.head_dim_given = true;
  } else if (row != nullptr && row->head_dim != 0 && !r.has("head_dim")) {
    s.hd = row->head_dim;  // the config class's default, not hidden / heads
  } else if (s.H != 0 && s.heads != 0) {
    if (s.H % s.heads != 0) {
      r.diags().add(r.field(gpt2 && r.has("n_head") ? "n_head" : "num_attention_heads"),
                    fmt::format("{} does not divide {} {}", s.heads,
                                gpt2 && r.has("n_embd") ? "n_embd" : "hidden_size", s.H),
                    "check both values against the model's config.json; set head_dim if the model has one");
    }
    s.hd = s.H / s.heads;
  }
  if (s.heads != 0 && s.kv != 0 && s.heads % s.kv != 0) {
    r.diags().add(
        r.field("num_key_value_heads"),
        fmt::format("{} does not divide num_attention_heads {}", s.kv, s.heads),
        "grouped-query attention needs a whole number of query heads per key/value head: check both values");
  }
  return s;
}

/// The attention projections of a Llama-like layer and their biases.
struct AttnBias {
  bool q = false, k = false, v = false, o = false;
};

/// Llama-like attention: q_proj, k_proj, v_proj, o_proj (LlamaAttention).
void llama_attention(LayerGroup& g, const Shape& s, AttnBias b) {
  g.linears.push_back(lin(Role::attn_in, "q_proj", s.H, mul(s.heads, s.hd), b.q));
  g.linears.push_back(lin(Role::attn_in, "k_proj", s.H, mul(s.kv, s.hd), b.k));
  g.linears.push_back(lin(Role::attn_in, "v_proj", s.H, mul(s.kv, s.hd), b.v));
  g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, s.hd), s.H, b.o));
}

/// Gated MLP: gate_proj, up_proj, down_proj (LlamaMLP), with `prefix` for shared experts.
void gated_mlp(LayerGroup& g, std::uint64_t H, std::uint64_t I, bool bias) {
  g.linears.push_back(lin(Role::mlp_in, "gate_proj", H, I, bias));
  g.linears.push_back(lin(Role::mlp_in, "up_proj", H, I, bias));
  g.linears.push_back(lin(Role::mlp_out, "down_proj", I, H, bias));
}

/// Shorthand for the few optional MoE keys.
struct MoeKeys {
  std::uint64_t experts = 0, top_k = 0, expert_I = 0, shared_I = 0;
  std::uint64_t sparse_step = 1;
  std::set<std::uint64_t> mlp_only;
  std::uint64_t first_dense = 0, layer_freq = 1;
  std::uint64_t n_shared = 0;
};

}  // namespace

namespace {

/// The config keys of `obj` that announce a structure a Llama-like decoder lacks, quoted.
std::string structure_keys_of(const json& obj) {
  std::string out;
  for (std::string_view k : structure_keys())
    if (const auto it = obj.find(k); it != obj.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
      out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", k);
  return out;
}

ModelSpec build(const nlohmann::json& config, std::string_view origin, UnknownType unknown) {
  const std::string org(origin);
  Diagnostics diags;
  if (!config.is_object()) {
    diags.add(org, fmt::format("expected a JSON object ({{...}}), got {}", kind_of(config)),
              "pass the model's config.json, which holds one JSON object");
    diags.throw_if_any();
  }

  ModelSpec spec;
  spec.name = org;
  spec.source = "config";

  // Multimodal configs (gemma3, llava, mistral3, ...) keep the language model's shape in
  // text_config; the top level then lacks hidden_size.
  const json* root = &config;
  std::string prefix = org + ": ";
  std::string model_type;
  if (const auto it = config.find("model_type"); it != config.end() && it->is_string())
    model_type = it->get<std::string>();
  else if (it != config.end() && !it->is_null())
    diags.add(org + ": model_type", fmt::format("expected a string, got {}", show(*it)),
              std::string(kConfigFix));

  const auto text_it = config.find("text_config");
  // PaliGemma's config keeps a legacy top-level hidden_size beside a full text_config: the
  // top level describes the language model only when it also counts layers.
  const bool top_has_dims =
      (config.contains("hidden_size") || config.contains("n_embd") || config.contains("d_model")) &&
      (config.contains("num_hidden_layers") || config.contains("n_layer") || config.contains("num_layers"));
  bool gemma3_text_defaults = false;
  if (text_it != config.end() && text_it->is_object() && !top_has_dims) {
    const std::string outer = model_type.empty() ? "unknown" : model_type;
    root = &*text_it;
    prefix = org + ": text_config.";
    if (const auto mt = text_it->find("model_type"); mt != text_it->end() && mt->is_string())
      model_type = mt->get<std::string>();
    else if (outer == "gemma3")
      model_type = "gemma3_text";
    else if (outer == "llava" || outer == "llava_next")
      model_type = "llama";  // LlavaConfig: text_config defaults to LlamaConfig
    else
      model_type = outer + "_text";
    gemma3_text_defaults = model_type == "gemma3_text";
    spec.notes.push_back(fmt::format(
        "multimodal config (model_type '{}'): the language model is text_config ('{}')",
        outer, model_type));
  }
  spec.model_type = model_type;

  // Encoders and encoder-decoders are refused whatever else the folder holds: their memory is
  // not a decoder's, and laying them out as one gives a wrong number (bert: 160M for 110M).
  {
    std::string outer_type;
    if (const auto it = config.find("model_type"); it != config.end() && it->is_string())
      outer_type = it->get<std::string>();
    const auto ed = config.find("is_encoder_decoder");
    const bool enc_dec = ed != config.end() && ed->is_boolean() && ed->get<bool>();
    const std::string& enc = not_decoder(outer_type) ? outer_type : model_type;
    const std::optional<NotDecoder> kind = not_decoder(enc);
    if (kind || enc_dec) {
      diags.add(org + (enc_dec && !kind ? ": is_encoder_decoder" : ": model_type"),
                fmt::format("'{}' is {}, not a decoder-only language model: vramfit does not estimate it",
                            enc.empty() ? "this model" : enc,
                            enc_dec || kind == NotDecoder::encoder_decoder ? "an encoder-decoder" : "an encoder"),
                "vramfit estimates decoder-only text-generation models (llama, qwen2, gpt2, ...): see the "
                "README's list of supported model types");
      diags.throw_if_any();
    }
  }

  // Gemma3's config.json files leave most of text_config to Gemma3TextConfig's defaults
  // (configuration_gemma3.py): fill those we need, as transformers would.
  json filled;
  if (gemma3_text_defaults) {
    filled = *root;
    const std::pair<const char*, std::uint64_t> defaults[] = {
        {"hidden_size", 2304},      {"intermediate_size", 9216},         {"num_hidden_layers", 26},
        {"num_attention_heads", 8}, {"num_key_value_heads", 4},          {"head_dim", 256},
        {"vocab_size", 262208},     {"max_position_embeddings", 131072}, {"sliding_window", 4096},
    };
    std::vector<std::string> used;
    for (const auto& [k, v] : defaults)
      if (!filled.contains(k)) {
        filled[k] = v;
        used.emplace_back(k);
      }
    if (!used.empty()) {
      std::string list;
      for (const auto& k : used) list += (list.empty() ? "" : ", ") + k;
      spec.notes.push_back("text_config leaves " + list + " to Gemma3TextConfig's defaults; used those");
    }
    root = &filled;
  }
  Reader rr(*root, prefix, diags);

  const TypeRow* row = find_type(model_type);
  if (row == nullptr) {
    // Without a layout, the config alone cannot give the size: a Llama-like guess was 9 times
    // too small for gpt_oss. Only a checkpoint's headers (exact weights) make it estimable.
    const std::string keys = structure_keys_of(*root);
    const std::string what = model_type.empty() ? std::string("the config has no model_type")
                                                : fmt::format("model_type '{}' is not one vramfit knows", model_type);
    const auto given = config.find("model_type");
    const bool bad_type = given != config.end() && !given->is_null() && !given->is_string();  // already reported
    if (unknown == UnknownType::refuse && !bad_type) {
      diags.add(
          org + ": model_type",
          fmt::format("{}{}: its layout, and so its size, cannot be worked out from the config alone", what,
                      keys.empty() ? "" : fmt::format(" (and it has {}, a structure a Llama-like decoder lacks)", keys)),
          "give the checkpoint folder holding config.json and its .safetensors files (their headers give the exact "
          "weights), or a supported model_type: see the README's list");
      diags.throw_if_any();
    }
    spec.family = "generic";
    spec.notes.push_back(fmt::format(
        "{}: the weights are counted exactly from the checkpoint's headers; activations and KV cache are "
        "approximated as a Llama-like decoder's{}",
        what, keys.empty() ? "" : fmt::format(" (its {} are not modelled)", keys)));
  } else {
    spec.family = std::string(row->family);
  }
  const Builder builder = row ? row->layout : Builder::llama;
  const bool moe_type = row && row->moe;

  // --- MoE keys -----------------------------------------------------------------------
  MoeKeys mk;
  if (moe_type) {
    if (model_type == "mixtral" || model_type == "gpt_oss" || model_type == "granitemoe" || model_type == "phimoe") {
      mk.experts = rr.required({"num_local_experts"});
    } else if (builder == Builder::deepseek) {
      mk.experts = rr.uint("n_routed_experts", true).value_or(0);
    } else {
      // Qwen3MoeConfig (transformers 5) writes num_experts as num_local_experts.
      mk.experts = rr.required({"num_experts", "num_local_experts"}, /*zero_ok=*/model_type != "olmoe");
    }
    mk.top_k = rr.required({"num_experts_per_tok", "experts_per_token"});
    if (mk.experts != 0 && mk.top_k > mk.experts) {
      diags.add(rr.field("num_experts_per_tok"),
                fmt::format("{} is more than the {} experts", mk.top_k, mk.experts),
                "a token cannot be routed to more experts than exist: check both values");
    }
    if (model_type == "qwen2_moe" || model_type == "qwen3_moe" || builder == Builder::deepseek) {
      if (mk.experts != 0) mk.expert_I = rr.required({"moe_intermediate_size"});
    }
    if (model_type == "qwen2_moe") mk.shared_I = rr.uint("shared_expert_intermediate_size", true).value_or(0);
    if (model_type == "qwen2_moe" || model_type == "qwen3_moe") {
      mk.sparse_step = rr.uint("decoder_sparse_step").value_or(1);
      if (const json* m = rr.find("mlp_only_layers"); m && !m->is_null()) {
        if (!m->is_array()) {
          diags.add(rr.field("mlp_only_layers"),
                    fmt::format("expected a list of layer indices, got {}", show(*m)),
                    std::string(kConfigFix));
        } else {
          for (const json& e : *m) {
            if (e.is_number_integer() && e.get<std::int64_t>() >= 0)
              mk.mlp_only.insert(e.get<std::uint64_t>());
            else
              diags.add(rr.field("mlp_only_layers"), fmt::format("expected layer indices, got {}", show(e)),
                        std::string(kConfigFix));
          }
        }
      }
    }
    if (builder == Builder::deepseek) {
      mk.first_dense = rr.uint("first_k_dense_replace", true).value_or(0);
      mk.layer_freq = rr.uint("moe_layer_freq").value_or(1);
      mk.n_shared = rr.uint("n_shared_experts", true).value_or(0);
    }
  }

  // Mixtral and OLMoE keep the expert width in intermediate_size; the others need it for
  // their dense MLPs (qwen*_moe only when some layer is dense, so it is optional there).
  const bool needs_I = !(model_type == "qwen2_moe" || model_type == "qwen3_moe" || builder == Builder::falcon ||
                         builder == Builder::opt || builder == Builder::bloom || builder == Builder::mpt);
  Shape s = read_shape(rr, row, needs_I);
  // BloomMLP: 4 * hidden_size; MptMLP: expansion_ratio (MptConfig default 4) * d_model.
  if (builder == Builder::bloom) s.I = mul(4, s.H);
  if (builder == Builder::mpt) s.I = mul(rr.uint("expansion_ratio").value_or(4), s.H);
  // MptConfig no_bias=True: no bias anywhere (linears, and the LayerNorms' set to None).
  const bool mpt_bias = builder == Builder::mpt && !rr.flag("no_bias", true);
  // GPTJConfig rotary_dim (64; null: the whole embedding width) sizes embed_positions.
  const std::uint64_t gptj_rot = builder == Builder::gptj ? rr.uint("rotary_dim", true).value_or(0) : 0;
  // Falcon: ffn_hidden_size (FalconConfig: 4 * hidden_size when null); k/v heads by layout
  // (FalconAttention: num_kv_heads with new_decoder_architecture, else 1 when multi_query).
  const bool falcon_new = builder == Builder::falcon && rr.flag("new_decoder_architecture", false);
  const bool falcon_parallel = builder == Builder::falcon && rr.flag("parallel_attn", true);
  const bool falcon_bias = builder == Builder::falcon && rr.flag("bias", false);
  const std::uint64_t falcon_ln =
      builder == Builder::falcon ? rr.uint("num_ln_in_parallel_attn").value_or(falcon_new ? 2 : 1) : 0;
  if (builder == Builder::falcon) {
    s.I = rr.uint("ffn_hidden_size").value_or(mul(4, s.H));
    if (falcon_new)
      s.kv = rr.uint("num_kv_heads").value_or(s.heads);
    else
      s.kv = rr.flag("multi_query", true) ? 1 : s.heads;
    if (s.heads != 0 && s.kv != 0 && s.heads % s.kv != 0)
      diags.add(rr.field("num_kv_heads"), fmt::format("{} does not divide num_attention_heads {}", s.kv, s.heads),
                "grouped-query attention needs a whole number of query heads per key/value head: check both values");
  }
  // OPT: ffn_dim; embeddings of word_embed_proj_dim (OPTConfig: hidden_size when absent).
  std::uint64_t opt_proj = 0;
  const bool opt_affine = builder == Builder::opt && rr.flag("layer_norm_elementwise_affine", true);
  const bool opt_bias = builder == Builder::opt && rr.flag("enable_bias", true);
  const bool opt_final_norm = builder == Builder::opt && rr.flag("do_layer_norm_before", true) &&
                              !rr.flag("_remove_final_layer_norm", false);
  if (builder == Builder::opt) {
    s.I = rr.required({"ffn_dim"});
    opt_proj = rr.uint("word_embed_proj_dim").value_or(s.H);
    if (!rr.has("max_position_embeddings")) s.max_pos = 2048;  // OPTConfig default
  }
  if (builder == Builder::falcon && !rr.has("max_position_embeddings")) s.max_pos = 2048;  // FalconConfig default
  if (model_type == "mixtral" || model_type == "olmoe" || model_type == "gpt_oss" || model_type == "granitemoe" ||
      model_type == "phimoe")
    mk.expert_I = s.I;
  // GPTBigCode: multi_query (default true) keeps one k/v head.
  const bool bigcode = model_type == "gpt_bigcode";
  if (bigcode) s.kv = rr.flag("multi_query", true) ? 1 : s.heads;
  const bool cohere = model_type == "cohere" || model_type == "cohere2";
  const bool cohere_qk = model_type == "cohere" && rr.flag("use_qk_norm", false);

  // --- flags shared by most builders --------------------------------------------------
  bool tied = rr.flag("tie_word_embeddings", row ? row->tied_default : false);
  // A multimodal model ties its language model's head as the outer config says (transformers
  // 5 reads tie_word_embeddings from the top-level config: internvl and mistral3 tie although
  // their text_config says false; measured, tests/unit/spec/data/vision.json).
  if (root != &config)
    if (const auto t = config.find("tie_word_embeddings"); t != config.end() && t->is_boolean()) tied = t->get<bool>();
  const bool glm = model_type == "glm" || model_type == "glm4";
  const bool olmo2 = model_type == "olmo2" || model_type == "olmo3";
  const bool attention_bias = rr.flag("attention_bias", builder == Builder::gpt_neox || model_type == "gpt_oss" ||
                                                            model_type == "seed_oss" || glm);
  // SeedOssAttention: o_proj's bias is attention_out_bias; GlmAttention: o_proj has none.
  const bool o_bias = model_type == "seed_oss" ? rr.flag("attention_out_bias", false) : attention_bias && !glm;
  const bool ernie_bias = model_type == "ernie4_5" && rr.flag("use_bias", false);
  // StableLmConfig: use_qkv_bias, qk_layernorm, use_parallel_residual, all false by default.
  const bool stablelm = model_type == "stablelm";
  const bool stablelm_qkv_bias = stablelm && rr.flag("use_qkv_bias", false);
  const bool stablelm_qk_norm = stablelm && rr.flag("qk_layernorm", false);
  const bool stablelm_parallel = stablelm && rr.flag("use_parallel_residual", false);
  const bool mlp_bias = rr.flag("mlp_bias", false);

  std::optional<std::string> act_name;
  if (builder == Builder::gpt2 || builder == Builder::opt || builder == Builder::gptj)
    act_name = rr.string("activation_function");
  else if (builder == Builder::falcon)
    act_name = rr.string("activation");
  else if (builder == Builder::gemma)
    act_name = rr.has("hidden_activation") ? rr.string("hidden_activation") : std::nullopt;
  else
    act_name = rr.string("hidden_act");

  // Partial rotary: phi3/phi partial_rotary_factor, gpt_neox rotary_pct; transformers 5
  // may also nest it in rope_parameters.
  double rotary_fraction = 1.0;
  if (builder == Builder::phi) rotary_fraction = 0.5;        // PhiConfig default
  if (builder == Builder::gpt_neox) rotary_fraction = 0.25;  // GPTNeoXConfig default
  if (glm) rotary_fraction = 0.5;                            // GlmConfig / Glm4Config default
  if (stablelm) rotary_fraction = 0.25;                      // StableLmConfig default
  rotary_fraction = rr.number("partial_rotary_factor", rr.number("rotary_pct", rotary_fraction));
  if (const json* rp = rr.find("rope_parameters"); rp && rp->is_object()) {
    // Read like the top-level key: a negative factor would make the rotary width a negative
    // double, and converting that to an integer is undefined (it surfaced as an overflow).
    Reader rope(*rp, rr.field("rope_parameters."), diags);
    rotary_fraction = rope.number("partial_rotary_factor", rotary_fraction);
  }
  if (rotary_fraction > 1.0) {
    diags.add(rr.field("partial_rotary_factor"), fmt::format("{} is more than 1", rotary_fraction),
              "the rotary share of a head is a fraction between 0 and 1");
    rotary_fraction = 1.0;
  }

  const bool use_bias = builder == Builder::starcoder2 && rr.flag("use_bias", true);  // Starcoder2Config
  const bool phi_qk_layernorm = builder == Builder::phi && rr.flag("qk_layernorm", false);
  const bool parallel_residual_flag = builder == Builder::gpt_neox && rr.flag("use_parallel_residual", true);
  const bool qwen_sliding = rr.flag("use_sliding_window", false);
  const std::uint64_t max_window_layers = rr.uint("max_window_layers", true).value_or(s.L);
  const std::uint64_t window_pattern = rr.uint("sliding_window_pattern").value_or(6);
  const std::uint64_t window = rr.uint("sliding_window", true).value_or(0);  // 0 or null: none
  const std::uint64_t nextn = rr.uint("num_nextn_predict_layers", true).value_or(0);
  // Gemma2Config defaults: final_logit_softcapping=30.0, attn_logit_softcapping=50.0.
  const bool gemma2 = model_type == "gemma2";
  const double final_softcap = rr.number("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  const double attn_softcap = rr.number("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);

  // Dropout probabilities (the engine counts dropout masks in training). Keys and defaults:
  // GPT2Config attn_pdrop/resid_pdrop/embd_pdrop = 0.1; PhiConfig resid_pdrop/embd_pdrop = 0;
  // GPTNeoXConfig hidden_dropout = 0; Starcoder2Config residual_dropout/embedding_dropout = 0;
  // everyone's attention_dropout = 0.
  // nn.Dropout raises for p outside [0, 1]: a larger value is a broken config, not a mask.
  const auto probability = [&](std::string_view key, double dflt) {
    const double p = rr.number(key, dflt);
    if (p <= 1.0) return p;
    diags.add(rr.field(key), fmt::format("{} is more than 1", p),
              "a dropout probability is between 0 and 1: check the value");
    return dflt;
  };
  double attn_dropout = 0, hidden_dropout = 0, embedding_dropout = 0;
  if (builder == Builder::gpt2) {
    attn_dropout = probability("attn_pdrop", 0.1);
    hidden_dropout = probability("resid_pdrop", 0.1);
    embedding_dropout = probability("embd_pdrop", 0.1);
  } else {
    attn_dropout = probability("attention_dropout", 0.0);
    if (builder == Builder::phi) {
      hidden_dropout = probability("resid_pdrop", 0.0);
      embedding_dropout = probability("embd_pdrop", 0.0);
    } else if (builder == Builder::gpt_neox) {
      hidden_dropout = probability("hidden_dropout", 0.0);
    } else if (builder == Builder::starcoder2) {
      hidden_dropout = probability("residual_dropout", 0.0);
      embedding_dropout = probability("embedding_dropout", 0.0);
    } else if (builder == Builder::falcon) {
      hidden_dropout = probability("hidden_dropout", 0.0);
    } else if (builder == Builder::opt) {
      hidden_dropout = probability("dropout", 0.1);  // OPTDecoderLayer: after attention and fc2
    }
  }

  // MLA (deepseek): the latent ranks and the split of a head into rope and no-rope parts.
  std::optional<std::uint64_t> q_lora;
  if (builder == Builder::deepseek) {
    spec.kv_lora_rank = rr.required({"kv_lora_rank"});
    spec.qk_rope_head_dim = rr.required({"qk_rope_head_dim"});
    spec.qk_nope_head_dim = rr.required({"qk_nope_head_dim"});
    spec.v_head_dim = rr.required({"v_head_dim"});
    if (const json* q = rr.find("q_lora_rank"); q == nullptr) {
      q_lora = 1536;  // DeepseekV2Config / DeepseekV3Config default
      spec.notes.push_back("q_lora_rank is absent: used the config class's default 1536");
    } else if (!q->is_null()) {
      q_lora = rr.uint("q_lora_rank");
    }
  }

  // Which layers are sparse: Qwen2MoeDecoderLayer (not in mlp_only_layers and
  // (i + 1) % decoder_sparse_step == 0), DeepseekV2DecoderLayer (i >= first_k_dense_replace
  // and i % moe_layer_freq == 0); Mixtral and OLMoE: every layer.
  const auto layer_is_moe = [&](std::uint64_t i) {
    if (!moe_type || mk.experts == 0) return false;
    if (builder == Builder::deepseek) return i >= mk.first_dense && i % mk.layer_freq == 0;
    if (model_type == "qwen2_moe" || model_type == "qwen3_moe")
      return mk.mlp_only.count(i) == 0 && (i + 1) % mk.sparse_step == 0;
    return true;
  };
  // The first layer after i whose kind differs (or L). Without a period, the kind changes
  // only at first_k_dense_replace and around mlp_only_layers, so configs with absurd layer
  // counts are still laid out in a few steps.
  const bool periodic = mk.sparse_step > 1 || mk.layer_freq > 1;
  // The first layer after i where the kind may change: first_k_dense_replace, or the nearest
  // mlp_only layer m >= i (at m itself when m > i, after it when m == i). One ordered-set lookup,
  // so laying out a config with tens of thousands of mlp_only_layers stays linear (issue #14:
  // rescanning the list at every change took 14 s for a 275 KB qwen3_moe config).
  const auto next_boundary = [&](std::uint64_t i) -> std::uint64_t {
    std::uint64_t j = s.L;
    if (mk.first_dense > i) j = std::min(j, mk.first_dense);
    if (const auto it = mk.mlp_only.lower_bound(i); it != mk.mlp_only.end()) j = std::min(j, *it == i ? i + 1 : *it);
    return j;
  };
  const auto next_change = [&](std::uint64_t i) -> std::uint64_t {
    if (periodic) return i + 1;
    std::uint64_t j = next_boundary(i);
    const bool k = layer_is_moe(i);
    // Merge neighbours of the same kind (push_layer merges them too).
    while (j < s.L && layer_is_moe(j) == k) j = next_boundary(j);
    return j;
  };
  if (periodic && s.L > 100000)
    diags.add(rr.field("num_hidden_layers"),
              fmt::format("{} layers is far more than any real model has", s.L), std::string(kConfigFix));
  bool any_dense = false;
  for (std::uint64_t i = 0; i < s.L && !any_dense; i = next_change(i)) any_dense = !layer_is_moe(i);
  if (any_dense && s.I == 0 && !needs_I && diags.empty())
    diags.add(rr.field("intermediate_size"), "missing: some layers are dense and their MLP width is needed",
              "add \"intermediate_size\" as it appears in the model's config.json on the Hugging Face Hub");

  diags.throw_if_any();

  // --- shape-level fields -------------------------------------------------------------
  spec.hidden_size = s.H;
  spec.num_layers = s.L;
  spec.num_heads = s.heads;
  spec.num_kv_heads = builder == Builder::deepseek ? s.heads : s.kv;
  spec.head_dim = builder == Builder::deepseek ? spec.qk_nope_head_dim + spec.qk_rope_head_dim : s.hd;
  spec.q_lora_rank = q_lora.value_or(0);
  spec.vocab_size = s.V;
  spec.max_positions = s.max_pos;
  spec.tied_embeddings = tied;
  if (spec.head_dim > kMaxDim)
    throw InputError(rr.field("head_dim"), "absurdly large", std::string(kConfigFix));

  // Activation: each builder's config-class default, then the config's own.
  switch (builder) {
    case Builder::gpt2:  // GPT2Config "gelu_new"; GPTBigCodeConfig "gelu_pytorch_tanh"
      spec.activation = bigcode ? Activation::gelu_pytorch_tanh : Activation::gelu_tanh_python;
      break;
    case Builder::gpt_neox: spec.activation = Activation::gelu; break;            // "gelu"
    case Builder::phi: spec.activation = Activation::gelu_tanh_python; break;     // "gelu_new"
    case Builder::gemma: spec.activation = Activation::gelu_pytorch_tanh; break;  // hidden_activation
    case Builder::starcoder2: spec.activation = Activation::gelu_pytorch_tanh; break;
    case Builder::falcon: spec.activation = Activation::gelu; break;  // FalconConfig activation="gelu"
    case Builder::opt: spec.activation = Activation::relu; break;     // OPTConfig activation_function="relu"
    case Builder::gptj: spec.activation = Activation::gelu_tanh_python; break;  // GPTJConfig "gelu_new"
    // BloomGelu: the tanh approximation written out, under a custom autograd Function in
    // training that saves only its input (as a native activation does).
    case Builder::bloom: spec.activation = Activation::gelu; break;
    case Builder::mpt: spec.activation = Activation::gelu; break;  // MptMLP: nn.GELU(approximate="none")
    default: spec.activation = Activation::silu; break;
  }
  if (act_name) {
    if (const auto a = activation_from(*act_name))
      spec.activation = *a;
    else
      spec.notes.push_back(fmt::format("activation '{}' is not modelled: counted as {}", *act_name,
                                       spec.activation == Activation::silu ? "silu" : "gelu"));
  }

  const bool layer_norm = builder == Builder::gpt2 || builder == Builder::gpt_neox || builder == Builder::phi ||
                          builder == Builder::starcoder2 || builder == Builder::falcon || builder == Builder::opt ||
                          builder == Builder::gptj || builder == Builder::bloom || builder == Builder::mpt;
  spec.norm = layer_norm ? Norm::layer : Norm::rms;
  std::uint64_t norm_size = layer_norm ? 2 * s.H : s.H;  // weight (+ bias)
  if (model_type == "phimoe") {  // PhimoeDecoderLayer: nn.LayerNorm with bias
    spec.norm = Norm::layer;
    norm_size = 2 * s.H;
  }
  if (cohere) spec.norm = Norm::layer;  // CohereLayerNorm: mean-subtracting, weight only
  if (stablelm) {  // StableLmDecoderLayer: nn.LayerNorm with bias
    spec.norm = Norm::layer;
    norm_size = 2 * s.H;
  }
  if (model_type == "olmo") {  // OlmoLayerNorm: layer norm without parameters
    spec.norm = Norm::layer;
    norm_size = 0;
  }
  if (builder == Builder::opt && !opt_affine) norm_size = 0;  // LayerNorm(elementwise_affine=False)
  if (builder == Builder::mpt && !mpt_bias) norm_size = s.H;  // MptBlock: norm bias set to None

  spec.gated_mlp = !(builder == Builder::gpt2 || builder == Builder::gpt_neox || builder == Builder::phi ||
                     builder == Builder::starcoder2 || builder == Builder::falcon || builder == Builder::opt ||
                     builder == Builder::gptj || builder == Builder::bloom || builder == Builder::mpt);
  spec.learned_positions = builder == Builder::gpt2 || builder == Builder::opt;
  // FalconDecoderLayer adds the MLP to the attention output (not to its residual) when
  // parallel_attn or new_decoder_architecture.
  spec.parallel_residual =
      cohere || builder == Builder::phi || parallel_residual_flag || stablelm_parallel || builder == Builder::gptj || (builder == Builder::falcon && (falcon_parallel || falcon_new));
  spec.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "qwen3_vl_text" ||
                 model_type == "olmoe" || olmo2 || model_type == "gemma3_text" || model_type == "exaone4" || cohere_qk ||
                 stablelm_qk_norm || model_type == "hunyuan_v1_dense";
  spec.scaled_embeddings = builder == Builder::gemma;
  spec.norm_fp32_scale = builder == Builder::gemma;
  spec.attention_dropout = attn_dropout;
  spec.hidden_dropout = hidden_dropout;
  spec.embedding_dropout = embedding_dropout;

  // --- sliding-window attention -------------------------------------------------------
  if (window != 0) {
    std::uint64_t sliding = 0;
    if (const auto lt = sliding_from_layer_types(rr)) {
      sliding = *lt;
    } else if (model_type == "gemma2" || model_type == "gpt_oss") {
      // Gemma2Config / GptOssConfig layer_types: "sliding_attention" when (i + 1) % 2, i.e. layers 0, 2, ...
      sliding = (s.L + 1) / 2;
    } else if (model_type == "gemma3_text") {
      // Gemma3TextConfig: sliding unless (i + 1) % sliding_window_pattern == 0 (pattern 6).
      sliding = s.L - s.L / window_pattern;
    } else if (model_type == "cohere2") {
      // Cohere2Config: sliding unless (i + 1) % sliding_window_pattern == 0 (pattern 4).
      sliding = s.L - s.L / (rr.has("sliding_window_pattern") ? window_pattern : 4);
    } else if (model_type == "qwen2" || model_type == "qwen2_moe" || model_type == "qwen3" ||
               model_type == "qwen3_moe" || model_type == "qwen2_vl_text" || model_type == "qwen2_5_vl_text" ||
               model_type == "qwen3_vl_text") {
      // Qwen2Config: the window applies only with use_sliding_window, from layer
      // max_window_layers on.
      if (qwen_sliding) sliding = max_window_layers < s.L ? s.L - max_window_layers : 0;
    } else if (model_type == "mistral" || model_type == "mixtral" || model_type == "phi3" || model_type == "phimoe" ||
               model_type == "starcoder2" || row == nullptr) {
      sliding = s.L;
    }
    if (sliding != 0) {
      spec.sliding_window = window;
      spec.sliding_layers = std::min(sliding, s.L);
    }
  }
  spec.scaled_logits = row != nullptr && row->scaled_logits;
  if (row != nullptr && row->eager_only)
    spec.notes.push_back(fmt::format("{}: transformers has no SDPA path for this type; attention is estimated as eager "
                                     "(the scores are materialised) whatever the attention setting",
                                     model_type));
  if (builder == Builder::gemma) {
    spec.final_logit_softcap = final_softcap;
    spec.attn_logit_softcap = attn_softcap;
  }

  // --- decoder layers ------------------------------------------------------------------
  const std::uint64_t H = s.H;
  std::uint64_t buffers = 0;

  // One layer of each kind, laid out once; the groups repeat them.
  const auto make_layer = [&](bool moe) {
    LayerGroup g;
    g.count = 1;
    g.moe = moe;

    // Attention.
    switch (builder) {
      case Builder::gpt2:
        // GPT2Attention: c_attn (Conv1D hidden -> 3*hidden), c_proj; all with biases.
        g.linears.push_back(lin(Role::attn_in, "c_attn", H, bigcode ? checked_add(H, mul(2, mul(s.kv, s.hd)), "parameters") : 3 * H, true));
        g.linears.push_back(lin(Role::attn_out, "c_proj", H, H, true));
        break;
      case Builder::gpt_neox:
        // GPTNeoXAttention: query_key_value and dense, bias=attention_bias.
        g.linears.push_back(lin(Role::attn_in, "query_key_value", H, 3 * H, attention_bias));
        g.linears.push_back(lin(Role::attn_out, "dense", H, H, attention_bias));
        break;
      case Builder::phi3: {
        // Phi3Attention: qkv_proj (q, k and v fused), o_proj; no biases.
        const std::uint64_t op = checked_add(mul(s.heads, s.hd), mul(2, mul(s.kv, s.hd)), "parameters");
        g.linears.push_back(lin(Role::attn_in, "qkv_proj", H, op));
        g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, s.hd), H));
        break;
      }
      case Builder::phi:
        // PhiAttention: q_proj, k_proj, v_proj, dense, all with biases.
        g.linears.push_back(lin(Role::attn_in, "q_proj", H, mul(s.heads, s.hd), true));
        g.linears.push_back(lin(Role::attn_in, "k_proj", H, mul(s.kv, s.hd), true));
        g.linears.push_back(lin(Role::attn_in, "v_proj", H, mul(s.kv, s.hd), true));
        g.linears.push_back(lin(Role::attn_out, "dense", mul(s.heads, s.hd), H, true));
        if (phi_qk_layernorm) g.norm_params += 2 * 2 * s.hd;  // LayerNorm(head_dim) x2
        break;
      case Builder::deepseek: {
        // DeepseekV2Attention / DeepseekV3Attention (multi-head latent attention).
        const std::uint64_t qk_head = spec.qk_nope_head_dim + spec.qk_rope_head_dim;
        if (q_lora) {
          g.linears.push_back(lin(Role::attn_in, "q_a_proj", H, *q_lora, attention_bias));
          g.norm_params += *q_lora;  // q_a_layernorm
          g.linears.push_back(lin(Role::attn_inner, "q_b_proj", *q_lora, mul(s.heads, qk_head)));
        } else {
          g.linears.push_back(lin(Role::attn_in, "q_proj", H, mul(s.heads, qk_head)));
        }
        g.linears.push_back(
            lin(Role::attn_in, "kv_a_proj_with_mqa", H, spec.kv_lora_rank + spec.qk_rope_head_dim, attention_bias));
        g.norm_params += spec.kv_lora_rank;  // kv_a_layernorm
        g.linears.push_back(
            lin(Role::attn_inner, "kv_b_proj", spec.kv_lora_rank, mul(s.heads, spec.qk_nope_head_dim + spec.v_head_dim)));
        g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, spec.v_head_dim), H, attention_bias));
        break;
      }
      case Builder::starcoder2:
        llama_attention(g, s, AttnBias{use_bias, use_bias, use_bias, use_bias});
        break;
      case Builder::falcon:
        // FalconAttention: query_key_value (q heads + 2 * kv heads), dense; bias=config.bias.
        g.linears.push_back(lin(Role::attn_in, "query_key_value", H,
                                mul(checked_add(s.heads, mul(2, s.kv), "parameters"), s.hd), falcon_bias));
        g.linears.push_back(lin(Role::attn_out, "dense", mul(s.heads, s.hd), H, falcon_bias));
        break;
      case Builder::gptj:
        // GPTJAttention: k_proj, v_proj, q_proj, out_proj, no biases.
        llama_attention(g, s, AttnBias{});
        g.linears.back() = lin(Role::attn_out, "out_proj", mul(s.heads, s.hd), H);
        break;
      case Builder::bloom:
        // BloomAttention: query_key_value (3 * hidden) and dense, with biases.
        g.linears.push_back(lin(Role::attn_in, "query_key_value", H, mul(3, H), true));
        g.linears.push_back(lin(Role::attn_out, "dense", H, H, true));
        break;
      case Builder::mpt:
        // MptAttention: Wqkv (3 * d_model) and out_proj, biases unless no_bias.
        g.linears.push_back(lin(Role::attn_in, "Wqkv", H, mul(3, H), mpt_bias));
        g.linears.push_back(lin(Role::attn_out, "out_proj", H, H, mpt_bias));
        break;
      case Builder::opt:
        // OPTAttention: k_proj, v_proj, q_proj, out_proj, bias=enable_bias.
        llama_attention(g, s, AttnBias{opt_bias, opt_bias, opt_bias, false});
        g.linears.back() = lin(Role::attn_out, "out_proj", mul(s.heads, s.hd), H, opt_bias);
        break;
      case Builder::llama:
      case Builder::gemma: {
        AttnBias b{attention_bias, attention_bias, attention_bias, o_bias};
        if (row && row->qkv_bias) b = AttnBias{true, true, true, false};
        if (model_type == "ernie4_5") b = AttnBias{ernie_bias, ernie_bias, ernie_bias, ernie_bias};
        if (stablelm) b = AttnBias{stablelm_qkv_bias, stablelm_qkv_bias, stablelm_qkv_bias, false};
        llama_attention(g, s, b);
        if (cohere_qk) {
          g.norm_params += mul(checked_add(s.heads, s.kv, "parameters"), s.hd);  // CohereLayerNorm((heads, head_dim))
        } else if (stablelm_qk_norm) {
          // StableLmLayerNormPerHead: one LayerNorm(head_dim, bias=False) per q head and per k/v head.
          g.norm_params += mul(checked_add(s.heads, s.kv, "parameters"), s.hd);
        } else if (model_type == "olmoe" || olmo2) {
          g.norm_params += H + s.kv * (H / s.heads);  // q_norm(hidden), k_norm(kv * hidden/heads)
        } else if (spec.qk_norm) {
          g.norm_params += 2 * s.hd;  // q_norm, k_norm over head_dim
        }
        break;
      }
    }

    // MLP.
    if (g.moe && model_type == "gpt_oss") {
      // GptOssTopKRouter (weight + bias) and GptOssExperts (fused, with biases); each head's sink.
      const std::uint64_t E = mk.experts;
      g.linears.push_back(lin(Role::router, "router", H, E, true));
      Linear gu = expert(Role::mlp_in, "gate_up_proj", H, mul(2, mk.expert_I), E);
      gu.bias = true;
      g.linears.push_back(gu);
      Linear dn = expert(Role::mlp_out, "down_proj", mk.expert_I, H, E);
      dn.bias = true;
      g.linears.push_back(dn);
      g.other_params += s.heads;
    } else if (g.moe) {
      const std::uint64_t E = mk.experts;
      g.linears.push_back(lin(Role::router, "gate", H, E));  // the router
      g.linears.push_back(expert(Role::mlp_in, "gate_proj", H, mk.expert_I, E));
      g.linears.push_back(expert(Role::mlp_in, "up_proj", H, mk.expert_I, E));
      g.linears.push_back(expert(Role::mlp_out, "down_proj", mk.expert_I, H, E));
      if (model_type == "qwen2_moe" && mk.shared_I != 0) {
        g.linears.push_back(shared(Role::mlp_in, "shared_expert.gate_proj", H, mk.shared_I));
        g.linears.push_back(shared(Role::mlp_in, "shared_expert.up_proj", H, mk.shared_I));
        g.linears.push_back(shared(Role::mlp_out, "shared_expert.down_proj", mk.shared_I, H));
        g.linears.push_back(shared(Role::router, "shared_expert_gate", H, 1));
      }
      if (builder == Builder::deepseek && mk.n_shared != 0) {
        // DeepseekV2MoE: one MLP of moe_intermediate_size * n_shared_experts.
        const std::uint64_t si = mul(mk.expert_I, mk.n_shared);
        g.linears.push_back(shared(Role::mlp_in, "shared_experts.gate_proj", H, si));
        g.linears.push_back(shared(Role::mlp_in, "shared_experts.up_proj", H, si));
        g.linears.push_back(shared(Role::mlp_out, "shared_experts.down_proj", si, H));
      }
    } else {
      switch (builder) {
        case Builder::gpt2:
          g.linears.push_back(lin(Role::mlp_in, "c_fc", H, s.I, true));
          g.linears.push_back(lin(Role::mlp_out, "c_proj", s.I, H, true));
          break;
        case Builder::gpt_neox:
          g.linears.push_back(lin(Role::mlp_in, "dense_h_to_4h", H, s.I, true));
          g.linears.push_back(lin(Role::mlp_out, "dense_4h_to_h", s.I, H, true));
          break;
        case Builder::phi3:
          g.linears.push_back(lin(Role::mlp_in, "gate_up_proj", H, 2 * s.I));
          g.linears.push_back(lin(Role::mlp_out, "down_proj", s.I, H));
          break;
        case Builder::phi:
          g.linears.push_back(lin(Role::mlp_in, "fc1", H, s.I, true));
          g.linears.push_back(lin(Role::mlp_out, "fc2", s.I, H, true));
          break;
        case Builder::starcoder2:
          g.linears.push_back(lin(Role::mlp_in, "c_fc", H, s.I, use_bias));
          g.linears.push_back(lin(Role::mlp_out, "c_proj", s.I, H, use_bias));
          break;
        case Builder::falcon:
          g.linears.push_back(lin(Role::mlp_in, "dense_h_to_4h", H, s.I, falcon_bias));
          g.linears.push_back(lin(Role::mlp_out, "dense_4h_to_h", s.I, H, falcon_bias));
          break;
        case Builder::opt:
          g.linears.push_back(lin(Role::mlp_in, "fc1", H, s.I, opt_bias));
          g.linears.push_back(lin(Role::mlp_out, "fc2", s.I, H, opt_bias));
          break;
        case Builder::gptj:  // GPTJMLP: fc_in, fc_out with biases
          g.linears.push_back(lin(Role::mlp_in, "fc_in", H, s.I, true));
          g.linears.push_back(lin(Role::mlp_out, "fc_out", s.I, H, true));
          break;
        case Builder::bloom:  // BloomMLP: dense_h_to_4h, dense_4h_to_h with biases
          g.linears.push_back(lin(Role::mlp_in, "dense_h_to_4h", H, s.I, true));
          g.linears.push_back(lin(Role::mlp_out, "dense_4h_to_h", s.I, H, true));
          break;
        case Builder::mpt:  // MptMLP: up_proj, down_proj
          g.linears.push_back(lin(Role::mlp_in, "up_proj", H, s.I, mpt_bias));
          g.linears.push_back(lin(Role::mlp_out, "down_proj", s.I, H, mpt_bias));
          break;
        default:
          if (glm) {  // GlmMLP: gate_up_proj (fused), down_proj; no biases
            g.linears.push_back(lin(Role::mlp_in, "gate_up_proj", H, mul(2, s.I)));
            g.linears.push_back(lin(Role::mlp_out, "down_proj", s.I, H));
          } else {
            gated_mlp(g, H, s.I, mlp_bias || ernie_bias);
          }
          break;
      }
    }

    // Per-layer norms: input + post-attention, except where noted.
    std::uint64_t norms = 2;
    if (builder == Builder::phi || builder == Builder::gptj) norms = 1;  // one input_layernorm (ln_1)
    // FalconDecoderLayer: input + post-attention norms without parallel_attn; with it, ln_attn
    // and ln_mlp when num_ln_in_parallel_attn is 2 (the default of new_decoder_architecture),
    // else one input_layernorm.
    if (builder == Builder::falcon && falcon_parallel) norms = falcon_ln == 2 ? 2 : 1;
    if (model_type == "gemma2" || model_type == "gemma3_text" || model_type == "glm4") norms = 4;  // pre/post attn and ffw
    if (model_type == "olmo") norms = 0;  // OlmoLayerNorm: no weight, no bias
    if (cohere) norms = 1;                // CohereDecoderLayer: input_layernorm only
    if (stablelm_parallel) norms = 1;     // StableLmDecoderLayer: no post_attention_layernorm
    g.norm_params += norms * norm_size;
    return g;
  };
  const LayerGroup dense_layer = make_layer(false);
  const LayerGroup moe_layer = make_layer(true);
  if (moe_type && mk.experts != 0 && model_type == "deepseek_v3") {
    // DeepseekV3TopkRouter: e_score_correction_bias (n_routed_experts fp32), a buffer.
    for (std::uint64_t i = 0; i < s.L; i = next_change(i))
      if (layer_is_moe(i)) buffers = checked_add(buffers, checked_mul(next_change(i) - i, mk.experts * 4));
  }
  for (std::uint64_t i = 0; i < s.L;) {
    const std::uint64_t j = next_change(i);
    LayerGroup g = layer_is_moe(i) ? moe_layer : dense_layer;
    g.count = j - i;
    push_layer(spec.layers, std::move(g));
    i = j;
  }

  // --- embeddings, head, final norm, buffers ------------------------------------------
  spec.embedding_params = checked_mul(s.V, H, "parameters");
  if (builder == Builder::gpt2)
    spec.embedding_params = checked_add(spec.embedding_params, mul(s.max_pos, H));  // wpe
  if (builder == Builder::bloom)  // word_embeddings_layernorm (LayerNorm with bias)
    spec.embedding_params = checked_add(spec.embedding_params, mul(2, H));
  if (builder == Builder::opt) {
    // OPTDecoder: embed_tokens(V, word_embed_proj_dim), OPTLearnedPositionalEmbedding
    // (max_position_embeddings + 2 rows: positions are offset by 2), and project_in /
    // project_out (no biases) when word_embed_proj_dim differs from hidden_size.
    spec.embedding_params = checked_add(mul(s.V, opt_proj), mul(checked_add(s.max_pos, 2, "parameters"), H));
    if (opt_proj != H) spec.embedding_params = checked_add(spec.embedding_params, mul(2, mul(opt_proj, H)));
  }
  spec.lm_head_params = tied ? 0 : checked_mul(s.V, builder == Builder::opt ? opt_proj : H, "parameters");
  if (model_type == "phimoe" && !tied && rr.flag("lm_head_bias", false))
    spec.lm_head_params = checked_add(spec.lm_head_params, s.V, "parameters");
  if (builder == Builder::gptj)  // GPTJForCausalLM: lm_head with a bias (its own, tied or not)
    spec.lm_head_params = checked_add(spec.lm_head_params, s.V, "parameters");
  if (builder == Builder::phi && !tied)  // PhiForCausalLM: lm_head bias=True
    spec.lm_head_params = checked_add(spec.lm_head_params, s.V, "parameters");
  spec.final_norm_params = norm_size;
  if (builder == Builder::opt && !opt_final_norm) spec.final_norm_params = 0;  // post-norm OPT (350m)

  if (builder == Builder::gptj) {
    // GPTJAttention.embed_positions: sin/cos table (max positions x rotary_dim or n_embd), fp32, per layer.
    buffers = checked_add(buffers, mul(mul(s.L, s.max_pos), mul(gptj_rot != 0 ? gptj_rot : H, 4)), "parameters");
  } else if (builder != Builder::gpt2 && builder != Builder::opt && builder != Builder::bloom &&
             builder != Builder::mpt) {  // ALiBi (bloom, mpt): no rotary buffers
    std::uint64_t rot_dim = builder == Builder::deepseek
                                ? spec.qk_rope_head_dim
                                : static_cast<std::uint64_t>(static_cast<double>(s.hd) * rotary_fraction);
    std::uint64_t rotaries = 1;
    // Gemma3RotaryEmbedding keeps one inv_freq pair per layer type (full_attention and
    // sliding_attention, the latter with rope_local_base_freq).
    if (model_type == "gemma3_text" || model_type == "olmo3") rotaries = 2;
    buffers += rotaries * rotary_bytes(rot_dim);
  }
  // Gemma*ScaledWordEmbedding registers `embed_scale` (an fp32 scalar): measured with
  // transformers 5.17 on gemma, gemma2 and gemma3_text.
  if (builder == Builder::gemma) buffers += 4;
  // GPTBigCodeModel registers `bias`, a causal mask of max_positions^2 booleans (not cast by
  // .to(dtype)): 1 MiB for 1024 positions, 64 MiB for starcoder's 8192.
  if (bigcode) buffers = checked_add(buffers, mul(s.max_pos, s.max_pos), "parameters");
  spec.buffer_bytes = buffers;

  // --- the MoE summary ----------------------------------------------------------------
  if (moe_type && mk.experts != 0) {
    spec.moe.num_experts = mk.experts;
    spec.moe.experts_per_token = mk.top_k;
    spec.moe.expert_intermediate = mk.expert_I;
    spec.moe.shared_intermediate = model_type == "qwen2_moe"
                                       ? mk.shared_I
                                       : (builder == Builder::deepseek ? mul(mk.expert_I, mk.n_shared) : 0);
    spec.moe.shared_expert_gate = model_type == "qwen2_moe" && mk.shared_I != 0;
  }
  spec.intermediate_size = any_dense ? s.I : 0;

  if (model_type == "deepseek_v3" && nextn != 0)
    spec.notes.push_back(
        "the multi-token-prediction layer (num_nextn_predict_layers) is not built by transformers "
        "and is not counted");
  if (!s.head_dim_given && row == nullptr && !rr.has("head_dim"))
    spec.notes.push_back(fmt::format("head_dim taken as hidden_size / num_attention_heads = {}", s.hd));
  if (row == nullptr && !rr.has("tie_word_embeddings"))
    spec.notes.push_back("tie_word_embeddings is absent: assumed false (a separate lm_head)");

  spec.params = count_params(spec);
  diags.throw_if_any();
  return spec;
}
}  // namespace

ModelSpec from_config(const nlohmann::json& config, std::string_view origin, UnknownType unknown) {
  try {
    ModelSpec spec = build(config, origin, unknown);
    // A vision-language config: count its vision tower and projector too (spec/vision.cpp).
    if (auto vision = vision_from_config(config, origin, spec.hidden_size)) {
      spec.buffer_bytes = checked_add(spec.buffer_bytes, vision->buffer_bytes, "parameters");
      spec.notes.push_back(fmt::format(
          "vision-language model: its {} vision tower ({} parameters) and projector ({}) are counted with the "
          "language model ({})",
          vision->tower, vision->tower_params, vision->projector_params, vision->source));
      spec.vision = std::move(vision);
      spec.params = count_params(spec);
    }
    if (spec.params > kMaxParams)
      throw InputError(std::string(origin),
                       fmt::format("the model's sizes describe {} parameters, more than the 10^15 vramfit accepts",
                                   spec.params),
                       "check hidden_size, num_hidden_layers, vocab_size and the other sizes against the model's "
                       "config.json");
    // A pre-quantized checkpoint says how its weights are packed (transformers reads the same key).
    if (const auto qc = config.find("quantization_config"); qc != config.end() && !qc->is_null()) {
      spec.quantization = quant_from_config(*qc, origin);
      // transformers' Mxfp4 integration (replace_with_mxfp4_linear) swaps only the fused experts
      // (GptOssExperts) for packed ones: attention, router, embeddings and lm_head stay 16-bit
      // whatever modules_to_not_convert spells (gpt-oss lists "model.layers.*.self_attn").
      if (spec.quantization->method == QuantMethod::mxfp4)
        for (const LayerGroup& g : spec.layers)
          for (const Linear& l : g.linears)
            if (!l.expert && std::find(spec.quantization->skip_modules.begin(), spec.quantization->skip_modules.end(),
                                       l.name) == spec.quantization->skip_modules.end())
              spec.quantization->skip_modules.push_back(l.name);
    }
    return spec;
  } catch (const InputError& e) {
    // checked_mul/checked_add name the field "parameters": say which file is absurd.
    if (e.diagnostics().size() == 1 && e.diagnostics()[0].field == "parameters") {
      throw InputError(
          std::string(origin), "the model's sizes are absurd: its parameter count overflows 64 bits",
          "check hidden_size, num_hidden_layers, vocab_size and the other sizes against the model's "
          "config.json");
    }
    throw;
  }
}

ModelSpec from_config_text(std::string_view text, std::string_view origin, UnknownType unknown) {
  const std::string org(origin);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw InputError(org, "the file is empty",
                     "pass the model's config.json (download it from the model's Hugging Face repo)");
  }
  const json j = parse_json(text, org, "check the file is a complete config.json");
  return from_config(j, origin, unknown);
}

}  // namespace vramfit::spec
