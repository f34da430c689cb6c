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
#include "vramfit/spec/hybrid.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/quant.hpp"
#include "vramfit/spec/vision.hpp"
#include "checked.hpp"

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
// Building a ModelSpec from a row of the model-type table (spec/architectures.cpp) and the
// config's keys. Nothing below tests a model_type: what a type does differently is a field of
// its row; what a layout builds (module names and shapes) is a `switch (layout)`.

/// The engine's activations by their ACT2FN names, in Activation's order.
constexpr std::string_view kActivationNames[] = {"silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "relu2",
                                                 "xielu"};

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
  if (s == "relu2") return Activation::relu2;  // ReLUSquaredActivation
  if (s == "xielu") return Activation::xielu;  // XIELUActivation
  return std::nullopt;
}

/// Elements of one rotary `inv_freq` buffer: torch.arange(0, dim, 2) for the rotary dim.
std::uint64_t inv_freq_elems(std::uint64_t rotary_dim) { return (rotary_dim + 1) / 2; }

/// Bytes of one rotary embedding module: transformers 5 registers `inv_freq` and
/// `original_inv_freq` (modeling_rope_utils / LlamaRotaryEmbedding), both fp32 (built with
/// `.float()`), so they stay fp32 whatever the model's dtype. Measured: 256 bytes for
/// head_dim 64 and 512 for head_dim 128 (../shared/truth/results/public.jsonl).
std::uint64_t rotary_bytes(std::uint64_t rotary_dim) { return 2 * inv_freq_elems(rotary_dim) * 4; }

using detail::add;  // checked products and sums of dimensions (spec/checked.hpp)
using detail::mul;

Linear lin(Role role, std::string name, std::uint64_t in, std::uint64_t out, bool bias = false) {
  Linear l;
  l.role = role;
  l.name = std::move(name);
  l.in_features = in;
  l.out_features = out;
  l.bias = bias;
  return l;
}

Linear expert(Role role, std::string name, std::uint64_t in, std::uint64_t out, std::uint64_t copies,
              bool bias = false) {
  Linear l = lin(role, std::move(name), in, out, bias);
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
        last.other_params == layer.other_params && last.head_dim == layer.head_dim &&
        last.kv_heads == layer.kv_heads && last.kv_shared == layer.kv_shared && last.intermediate == layer.intermediate &&
        std::equal(last.linears.begin(), last.linears.end(), layer.linears.begin(), layer.linears.end(),
                   same)) {
      last.count += layer.count;
      return;
    }
  }
  groups.push_back(std::move(layer));
}

/// Counts entries of a config's `layer_types` list equal to `kind` ("sliding_attention").
std::optional<std::uint64_t> sliding_from_layer_types(Reader& r, std::string_view kind = "sliding_attention") {
  const json* lt = r.find("layer_types");
  if (lt == nullptr || !lt->is_array()) return std::nullopt;
  std::uint64_t n = 0;
  for (const json& t : *lt)
    if (t.is_string() && t.get<std::string>() == kind) ++n;
  return n;
}

/// Llama4's chunked layers: layer_types' "chunked_attention" entries, else the layers that
/// rotate (no_rope_layers' 1s, else all but every no_rope_layer_interval-th).
std::uint64_t chunked_layers(Reader& r, std::uint64_t L, std::uint64_t interval) {
  if (const auto lt = sliding_from_layer_types(r, "chunked_attention")) return *lt;
  if (const json* nr = r.find("no_rope_layers"); nr != nullptr && nr->is_array() && !nr->empty()) {
    std::uint64_t n = 0;
    for (const json& e : *nr) n += e.is_number() && e.get<double>() != 0 ? 1 : 0;
    return n;
  }
  return L - L / interval;
}

/// Everything read from the config before any module is laid out.
struct Shape {
  std::uint64_t H = 0, L = 0, heads = 0, kv = 0, hd = 0, I = 0, V = 0, max_pos = 0;
  bool head_dim_given = false;
};

/// Reads the common dimensions, with the type's key spellings, and checks that they agree.
Shape read_shape(Reader& r, const Architecture& row) {
  Shape s;
  const bool gpt2 = row.keys == ConfigKeys::gpt2;
  if (gpt2) {
    // GPT2Config's attribute_map: hidden_size -> n_embd, num_hidden_layers -> n_layer, ...
    s.H = r.required({"n_embd", "hidden_size"});
    s.L = r.required({"n_layer", "num_hidden_layers"});
    s.heads = r.required({"n_head", "num_attention_heads"});
    s.V = r.required({"vocab_size"});
    s.max_pos = r.any({"n_positions", "max_position_embeddings"}).value_or(0);
    if (!r.has("n_positions") && !r.has("max_position_embeddings")) s.max_pos = row.max_positions_default;
  } else {
    // BloomConfig's attribute_map (n_embed), MptConfig's (d_model, n_layers, n_heads, max_seq_len).
    s.H = r.required({"hidden_size", "n_embd", "d_model", "n_embed"});
    s.L = r.required({"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
    s.heads = r.required({"num_attention_heads", "n_head", "n_heads"});
    s.V = r.required({"vocab_size"});
    s.max_pos = r.any({"max_position_embeddings", "n_positions", "max_seq_len"}).value_or(0);
    if (row.max_positions_default != 0 && !r.has("max_position_embeddings")) s.max_pos = row.max_positions_default;
  }
  switch (row.mlp_width) {
    case MlpWidth::n_inner: s.I = r.any({"n_inner", "intermediate_size"}).value_or(s.H * 4); break;  // GPT2Block
    case MlpWidth::intermediate_size_or_4h: s.I = r.uint("intermediate_size").value_or(mul(4, s.H)); break;
    case MlpWidth::intermediate_size:
    case MlpWidth::prefix_dense_intermediate_size:  // the experts' width (cohere2_moe)
    case MlpWidth::intermediate_size_mlp: s.I = r.required({"intermediate_size"}); break;  // llama4: the experts' width
    default: s.I = r.uint("intermediate_size").value_or(0); break;  // set from the type's own key below
  }
  s.kv = r.uint("num_key_value_heads").value_or(s.heads);
  if (const auto hd = r.uint("head_dim")) {
    s.hd = *hd;
    s.head_dim_given = true;
  } else if (row.head_dim != 0 && !r.has("head_dim")) {
    s.hd = row.head_dim;  // the config class's default, not hidden / heads
  } else if (s.H != 0 && s.heads != 0) {
    // MLA (Layout::deepseek) sizes its heads from qk_nope/qk_rope/v_head_dim, never hidden / heads:
    // GLM-4.7-Flash has 20 heads over hidden 2048.
    if (s.H % s.heads != 0 && row.layout != Layout::deepseek) {
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

/// Llama-like attention: q_proj, k_proj, v_proj, o_proj (LlamaAttention), or one fused q/k/v
/// projection, by the row's names.
void llama_attention(LayerGroup& g, const Shape& s, AttnBias b, const ModuleNames& n = {}) {
  if (!n.qkv.empty()) {
    g.linears.push_back(lin(Role::attn_in, std::string(n.qkv), s.H,
                            mul(add(s.heads, mul(2, s.kv)), s.hd), b.q));
  } else {
    g.linears.push_back(lin(Role::attn_in, std::string(n.q), s.H, mul(s.heads, s.hd), b.q));
    g.linears.push_back(lin(Role::attn_in, std::string(n.k), s.H, mul(s.kv, s.hd), b.k));
    g.linears.push_back(lin(Role::attn_in, std::string(n.v), s.H, mul(s.kv, s.hd), b.v));
  }
  g.linears.push_back(lin(Role::attn_out, std::string(n.o), mul(s.heads, s.hd), s.H, b.o));
}

/// Gated MLP: gate_proj, up_proj, down_proj (LlamaMLP), by the row's names.
void gated_mlp(LayerGroup& g, std::uint64_t H, std::uint64_t I, bool bias, const ModuleNames& n = {}) {
  g.linears.push_back(lin(Role::mlp_in, std::string(n.gate), H, I, bias));
  g.linears.push_back(lin(Role::mlp_in, std::string(n.up), H, I, bias));
  g.linears.push_back(lin(Role::mlp_out, std::string(n.down), I, H, bias));
}

/// The layouts whose MLP is two linears around the activation (no gate).
bool plain_mlp(Layout l) {
  return l == Layout::gpt2 || l == Layout::gpt_neox || l == Layout::phi || l == Layout::starcoder2 ||
         l == Layout::falcon || l == Layout::opt || l == Layout::gptj || l == Layout::bloom || l == Layout::mpt;
}

/// Shorthand for the few optional MoE keys.
struct MoeKeys {
  std::uint64_t experts = 0, top_k = 0, expert_I = 0, shared_I = 0;
  std::uint64_t sparse_step = 1;
  std::set<std::uint64_t> mlp_only;
  std::uint64_t first_dense = 0, layer_freq = 1;
  std::uint64_t n_shared = 0;
  std::optional<std::uint64_t> last_sparse = {};  ///< moe_layer_end_index; nullopt: the last layer
  std::optional<std::set<std::uint64_t>> moe_list;  ///< llama4's moe_layers, when the config lists them
  std::optional<std::uint64_t> mlp_types_size = {};  ///< entries in mlp_layer_types (one per layer)
};

/// A config list of layer indices (mlp_only_layers, moe_layers), a diagnostic for anything else.
std::set<std::uint64_t> read_layer_list(Reader& r, Diagnostics& diags, std::string_view key, const json& m) {
  std::set<std::uint64_t> out;
  if (!m.is_array()) {
    diags.add(r.field(key), fmt::format("expected a list of layer indices, got {}", show(m)), std::string(kConfigFix));
    return out;
  }
  for (const json& e : m) {
    if (e.is_number_integer() && e.get<std::int64_t>() >= 0)
      out.insert(e.get<std::uint64_t>());
    else
      diags.add(r.field(key), fmt::format("expected layer indices, got {}", show(e)), std::string(kConfigFix));
  }
  return out;
}

/// The language model's part of a config: the whole config, or its text_config.
struct Root {
  const json* obj = nullptr;
  std::string prefix;      ///< "config.json: " or "config.json: text_config."
  std::string model_type;  ///< the language model's type
  json filled;             ///< text_config with the row's nested defaults filled in
};

/// What build()'s steps share: the config, its row, what has been read so far, and the
/// ModelSpec being built.
struct Ctx {
  const json& config;
  const std::string& org;
  Diagnostics& diags;
  ModelSpec& spec;
  Reader r;
  const Architecture& row;  ///< generic_architecture() for an unknown type
  bool known;               ///< the type has a row of its own
  Shape s = {};
  MoeKeys mk = {};
  // Read from the config (the row says which keys and defaults).
  bool tied = false, qkv_bias = false, o_bias = false, mlp_bias = false, qk_norm_on = false, parallel = false;
  bool lm_head_bias = false;
  std::optional<std::string> act_name = {};
  double rotary_fraction = 1.0;
  bool qwen_sliding = false;
  std::uint64_t max_window_layers = 0, window_pattern = 0, window = 0, nextn = 0, mtp = 0, mtp_layers = 0;
  bool rotary_dim_ignored = false;
  double final_softcap = 0, attn_softcap = 0;
  // Keys of one layout.
  bool falcon_new = false, falcon_parallel = false;
  std::uint64_t falcon_ln = 0, gptj_rot = 0, opt_proj = 0;
  bool opt_affine = false, opt_final_norm = false;
  std::optional<std::uint64_t> q_lora = {};  ///< deepseek's q_lora_rank (null: a plain q_proj)
  // Layout::gemma4: the per-layer-input embeddings and projection, and the rotary buffers.
  std::uint64_t ple_params = 0, gemma4_rotary = 0;
  bool post_norms_on = false;      ///< the row's post_norms flag (hyperclovax use_post_norm)
  bool attn_gate_per_head = false; ///< the attention output gate has one value per head (laguna gating)
  // Derived.
  std::uint64_t norm_size = 0;
  bool any_dense = false;
  std::vector<std::pair<std::string_view, bool>> flags_read = {};

  [[nodiscard]] Layout layout() const { return row.layout; }

  /// A boolean key of the row, each key read once (several fields may name the same key).
  bool flag(const ConfigFlag& f) {
    if (f.key.empty()) return f.dflt;
    for (const auto& [k, v] : flags_read)
      if (k == f.key) return f.negated ? !v : v;
    const bool v = r.flag(f.key, f.negated ? !f.dflt : f.dflt);
    flags_read.emplace_back(f.key, v);
    return f.negated ? !v : v;
  }
};

/// Which of `keys` the config sets (not null, not false), quoted and comma-separated.
std::string keys_set(const json& obj, std::span<const std::string_view> keys) {
  std::string out;
  for (std::string_view k : keys)
    if (const auto it = obj.find(k); it != obj.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
      out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", k);
  return out;
}

/// The config keys of `obj` that announce a structure a Llama-like decoder lacks, quoted.
std::string structure_keys_of(const json& obj) { return keys_set(obj, structure_keys()); }

// --- the language model's keys, the type and its row ---------------------------------------

/// Finds the language model's keys (multimodal configs keep them in text_config) and its type.
void find_language_model(const json& config, const std::string& org, Diagnostics& diags, ModelSpec& spec,
                         Root& root) {
  root.obj = &config;
  root.prefix = org + ": ";
  if (const auto it = config.find("model_type"); it != config.end() && it->is_string())
    root.model_type = it->get<std::string>();
  else if (it != config.end() && !it->is_null())
    diags.add(org + ": model_type", fmt::format("expected a string, got {}", show(*it)), std::string(kConfigFix));

  const auto text_it = config.find("text_config");
  // PaliGemma's config keeps a legacy top-level hidden_size beside a full text_config: the
  // top level describes the language model only when it also counts layers.
  const bool top_has_dims =
      (config.contains("hidden_size") || config.contains("n_embd") || config.contains("d_model")) &&
      (config.contains("num_hidden_layers") || config.contains("n_layer") || config.contains("num_layers"));
  if (text_it == config.end() || !text_it->is_object() || top_has_dims) return;
  const std::string outer = root.model_type.empty() ? "unknown" : root.model_type;
  root.obj = &*text_it;
  root.prefix = org + ": text_config.";
  // A text_config without its own model_type is the outer type's text model ("gemma3" ->
  // "gemma3_text"); LlavaConfig's is a LlamaConfig (a one-off of the outer multimodal type,
  // which has no row in this table: spec/vision.cpp has the vision towers').
  if (const auto mt = text_it->find("model_type"); mt != text_it->end() && mt->is_string())
    root.model_type = mt->get<std::string>();
  else if (outer == "llava" || outer == "llava_next")
    root.model_type = "llama";
  else
    root.model_type = outer + "_text";
  spec.notes.push_back(fmt::format("multimodal config (model_type '{}'): the language model is text_config ('{}')",
                                   outer, root.model_type));
}

/// Encoders and encoder-decoders are refused whatever else the folder holds: their memory is
/// not a decoder's, and laying them out as one gives a wrong number (bert: 160M for 110M).
void refuse_not_decoders(const json& config, const std::string& org, const std::string& model_type,
                         Diagnostics& diags) {
  std::string outer_type;
  if (const auto it = config.find("model_type"); it != config.end() && it->is_string())
    outer_type = it->get<std::string>();
  const auto ed = config.find("is_encoder_decoder");
  const bool enc_dec = ed != config.end() && ed->is_boolean() && ed->get<bool>();
  const std::string& enc = not_decoder(outer_type) ? outer_type : model_type;
  const std::optional<NotDecoder> kind = not_decoder(enc);
  if (!kind && !enc_dec) return;
  diags.add(org + (enc_dec && !kind ? ": is_encoder_decoder" : ": model_type"),
            fmt::format("'{}' is {}, not a decoder-only language model: vramfit does not estimate it",
                        enc.empty() ? "this model" : enc,
                        enc_dec || kind == NotDecoder::encoder_decoder ? "an encoder-decoder" : "an encoder"),
            "vramfit estimates decoder-only text-generation models (llama, qwen2, gpt2, ...): see the "
            "README's list of supported model types");
  diags.throw_if_any();
}

/// What a hybrid model's refusal tells the user to do.
constexpr std::string_view kHybridFix =
    "vramfit lays out full, sliding and chunked attention layers only: hybrid models with state-space (Mamba), "
    "linear-attention, convolution or compressed/sparse-attention layers (lfm2, falcon_h1, "
    "granitemoehybrid, bamba, jamba, nemotron_h, zamba2, mamba, minimax, deepseek_v4) are not supported yet (the Gated "
    "DeltaNet of qwen3_next, qwen3_5 and qwen3_5_moe is, for inference and generate); see the README's list of "
    "supported model types";

/// Layers that are not attention have caches (SSM and conv states, not keys and values) and
/// activations no row models: refused by name, whatever the model_type (a row that reads
/// layer_types would otherwise count only its sliding entries and lay the rest out as full
/// attention), and for an unknown type even when the checkpoint's headers give the exact weights.
void refuse_other_layers(const json& obj, const std::string& org, const std::string& prefix,
                         const std::string& model_type, bool known, Diagnostics& diags) {
  const std::string type = model_type.empty() ? std::string("this model") : fmt::format("model_type '{}'", model_type);
  // An unknown type's keys first: its refusal names model_type, as it does without them. A row's
  // config class reads none of these keys (transformers ignores them too).
  if (!known) {
    if (const std::string keys = keys_set(obj, layer_kind_keys()); !keys.empty()) {
      diags.add(org + ": model_type",
                fmt::format("{} is not one vramfit knows, and its {} announce layers that are not attention "
                            "(state-space, linear-attention, convolution or recurrent layers): their state caches and "
                            "activations are not modelled, not even from the checkpoint's exact weights",
                            type, keys),
                std::string(kHybridFix));
      diags.throw_if_any();
    }
  }
  // An unknown type's attention cache, after its layer kinds (a type whose layer_types name layers
  // that are not attention is refused for those first).
  const auto unknown_cache = [&] {
    if (known) return;
    if (const std::string cache = keys_set(obj, cache_layout_keys()); !cache.empty()) {
      diags.add(org + ": model_type",
                fmt::format("{} is not one vramfit knows, and its {} announce an attention cache that is not every "
                            "layer's keys and values (a compressed latent, an indexer's cache, layers sharing a "
                            "cache): its KV cache cannot be approximated as a Llama-like decoder's, not even beside "
                            "the checkpoint's exact weights",
                            type, cache),
                "where the model is a known one under a new name, give a copy of config.json with that model_type "
                "(a config whose architectures names a known model's class, as Kimi-K2's DeepseekV3ForCausalLM, is "
                "read as that model); see the README's list of supported model types");
      diags.throw_if_any();
    }
  };
  const auto lt = obj.find("layer_types");
  if (lt == obj.end() || !lt->is_array()) return unknown_cache();
  // The first kind that is not attention, how many layers have it and the first of them.
  std::string kind;
  std::uint64_t n = 0, first = 0, i = 0;
  for (const json& t : *lt) {
    if (t.is_string() && !attention_layer_kind(t.get_ref<const std::string&>())) {
      if (kind.empty()) {
        kind = t.get<std::string>();
        first = i;
      }
      n += t.get_ref<const std::string&>() == kind ? 1 : 0;
    }
    ++i;
  }
  if (kind.empty()) return unknown_cache();
  diags.add(prefix + "layer_types",
            fmt::format("'{}' layers ({} of {}, the first is layer {}) are not a kind vramfit lays out (full, sliding "
                        "or chunked attention): their caches and activations are not modelled, so {} cannot be "
                        "estimated",
                        kind, n, lt->size(), first, type),
            std::string(kHybridFix));
  diags.throw_if_any();
}

/// A nested text_config that leaves size keys to its config class gets the class's defaults
/// (the row's nested_defaults), as transformers would fill them.
void fill_nested_defaults(const Architecture* row, ModelSpec& spec, Root& root, bool nested) {
  if (!nested || row == nullptr || row->nested_defaults.values.empty()) return;
  root.filled = *root.obj;
  std::string list;
  for (const auto& [k, v] : row->nested_defaults.values)
    if (!root.filled.contains(k)) {
      root.filled[std::string(k)] = v;
      list += (list.empty() ? "" : ", ") + std::string(k);
    }
  if (!list.empty())
    spec.notes.push_back(fmt::format("text_config leaves {} to {}'s defaults; used those", list,
                                     row->nested_defaults.config_class));
  root.obj = &root.filled;
}

/// The row of an unknown type: refused (exit 2), or the generic row when the checkpoint's
/// headers will give the exact weights.
const Architecture& unknown_row(const json& config, const json& root, const std::string& org,
                                const std::string& model_type, UnknownType unknown, Diagnostics& diags,
                                ModelSpec& spec) {
  // Without a layout, the config alone cannot give the size: a Llama-like guess was 9 times
  // too small for gpt_oss. Only a checkpoint's headers (exact weights) make it estimable.
  const std::string keys = structure_keys_of(root);
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
  spec.notes.push_back(fmt::format(
      "{}: the weights are counted exactly from the checkpoint's headers; activations and KV cache are "
      "approximated as a Llama-like decoder's{}",
      what, keys.empty() ? "" : fmt::format(" (its {} are not modelled)", keys)));
  return generic_architecture();
}

/// An unknown model_type that ships its own code (`auto_map`, which transformers and vLLM load
/// with trust_remote_code; without it neither loads an unknown type) and names a known row's class
/// in `architectures` (Kimi-K2's kimi_k2 with DeepseekV3ForCausalLM): that row, as vLLM's registry
/// picks the implementation by the class; transformers runs the repository's code, taken to be that
/// class's. The spec's model_type becomes the row's (the engines look rows up by it), a note says so.
/// Only a top-level language model: a composite's class names the whole model.
const Architecture* row_of_class(const json& config, Root& root, ModelSpec& spec) {
  const auto it = config.find("architectures");
  const auto code = config.find("auto_map");
  if (root.obj != &config || it == config.end() || !it->is_array() || code == config.end() || !code->is_object())
    return nullptr;
  for (const json& c : *it) {
    if (!c.is_string()) continue;
    const Architecture* row = find_architecture_by_class(c.get_ref<const std::string&>());
    if (row == nullptr) continue;
    spec.notes.push_back(fmt::format(
        "model_type '{}' is not one vramfit knows; read as {}, the model of the class its config's architectures "
        "names ({}): vLLM picks its implementation by that class, transformers runs the repository's code "
        "(auto_map, trust_remote_code), taken to be that class's",
        text_excerpt(root.model_type), row->model_type, text_excerpt(c.get_ref<const std::string&>())));
    root.model_type = std::string(row->model_type);
    spec.model_type = root.model_type;
    return row;
  }
  return nullptr;
}

// --- reading the config ------------------------------------------------------------------

/// The experts per token under the row's top_k_key: an integer, or one per layer
/// (HunYuanMoEV1Gate takes config.moe_topk[layer_idx]): the largest, which sizes the peak.
std::uint64_t read_top_k(Ctx& c) {
  const std::string_view key = c.row.top_k_key;
  const json* v = c.r.find(key);
  if (v == nullptr || !v->is_array()) return c.r.required({key});
  std::uint64_t top = 0;
  bool uneven = false;
  for (const json& e : *v) {
    if (!e.is_number_integer() || e.get<std::int64_t>() <= 0) {
      c.diags.add(c.r.field(key), fmt::format("expected positive integers, got {}", show(e)), std::string(kConfigFix));
      return 0;
    }
    const auto k = e.get<std::uint64_t>();
    uneven = uneven || (top != 0 && k != top);
    top = std::max(top, k);
  }
  if (top == 0) c.diags.add(c.r.field(key), "an empty list", std::string(kConfigFix));
  if (uneven)
    c.spec.notes.push_back(
        fmt::format("{} differs between layers: the largest, {}, is used for every layer's activations", key, top));
  return top;
}

/// The number of experts, their width, and which layers are sparse.
void read_moe_keys(Ctx& c) {
  const Architecture& row = c.row;
  MoeKeys& mk = c.mk;
  if (!row.moe()) return;
  switch (row.experts) {
    case Experts::none: break;
    case Experts::num_local_experts: mk.experts = c.r.required({"num_local_experts"}); break;
    case Experts::num_experts: mk.experts = c.r.required({"num_experts", "num_local_experts"}); break;
    // Qwen3MoeConfig (transformers 5) writes num_experts as num_local_experts.
    case Experts::num_experts_or_dense:
      mk.experts = c.r.required({"num_experts", "num_local_experts"}, /*zero_ok=*/true);
      break;
    case Experts::n_routed_experts:
      mk.experts = c.r.find("n_routed_experts") == nullptr ? row.default_experts
                                                            : c.r.uint("n_routed_experts", true).value_or(0);
      break;
    case Experts::moe_num_experts: mk.experts = c.r.required({"moe_num_experts"}); break;
  }
  if (!row.refused_if_true.empty() && c.r.flag(row.refused_if_true, false))
    c.diags.add(c.r.field(row.refused_if_true),
                fmt::format("true is not laid out for model_type '{}' (the biases it adds to the fused experts are "
                            "not modelled)",
                            row.model_type),
                "vramfit estimates this type with it false, as the published checkpoints have it");
  mk.top_k = row.top_k_key.empty() ? c.r.required({"num_experts_per_tok", "experts_per_token"}) : read_top_k(c);
  if (mk.experts != 0 && mk.top_k > mk.experts) {
    c.diags.add(c.r.field("num_experts_per_tok"), fmt::format("{} is more than the {} experts", mk.top_k, mk.experts),
                "a token cannot be routed to more experts than exist: check both values");
  }
  if (row.expert_width == ExpertWidth::moe_intermediate_size && mk.experts != 0)
    mk.expert_I = c.r.required({"moe_intermediate_size"});
  if (row.shared_expert == SharedExpert::gated)
    mk.shared_I = c.r.uint("shared_expert_intermediate_size", true).value_or(0);
  if (row.sparse_layers == SparseLayers::step) {
    mk.sparse_step = c.r.uint("decoder_sparse_step").value_or(1);
    if (const json* m = c.r.find("mlp_only_layers"); m && !m->is_null())
      mk.mlp_only = read_layer_list(c.r, c.diags, "mlp_only_layers", *m);
  }
  if (row.sparse_layers == SparseLayers::moe_layers) {
    if (const json* m = c.r.find("moe_layers"); m && !m->is_null())
      mk.moe_list = read_layer_list(c.r, c.diags, "moe_layers", *m);
    else
      mk.sparse_step = c.r.uint("interleave_moe_layer_step").value_or(1);  // (i + 1) % step == 0
  }
  if (row.sparse_layers == SparseLayers::mlp_layer_types || row.sparse_layers == SparseLayers::mlp_layer_types_or_first_k) {
    // "dense" / "sparse" per layer; without the list, the config class's default.
    if (const json* m = c.r.find("mlp_layer_types"); m && !m->is_null()) {
      std::set<std::uint64_t> sparse;
      std::uint64_t i = 0;
      const bool list = m->is_array();
      for (const json& e : list ? *m : json::array()) {
        if (e == "sparse")
          sparse.insert(i);
        else if (e != "dense")
          c.diags.add(c.r.field("mlp_layer_types"), fmt::format("expected \"dense\" or \"sparse\", got {}", show(e)),
                      std::string(kConfigFix));
        ++i;
      }
      if (!list)
        c.diags.add(c.r.field("mlp_layer_types"), fmt::format("expected a list, got {}", show(*m)),
                    std::string(kConfigFix));
      mk.moe_list = std::move(sparse);
      mk.mlp_types_size = i;
    } else {
      mk.first_dense = row.sparse_layers == SparseLayers::mlp_layer_types
                           ? 1
                           : c.r.uint(row.first_k_dense_key, true).value_or(row.first_k_dense_default);
    }
  }
  if (row.sparse_layers == SparseLayers::first_k_dense) {
    mk.first_dense = c.r.uint(row.first_k_dense_key, true).value_or(0);
    mk.layer_freq = c.r.uint("moe_layer_freq").value_or(1);
  }
  if (row.sparse_layers == SparseLayers::start_end_interval) {
    // Ernie4_5_MoeConfig: moe_layer_start_index 1, moe_layer_end_index -1 (the last layer),
    // moe_layer_interval 1.
    mk.first_dense = c.r.uint("moe_layer_start_index", true).value_or(1);
    mk.sparse_step = c.r.uint("moe_layer_interval").value_or(1);
    if (const json* e = c.r.find("moe_layer_end_index"); e && !e->is_null() && !(e->is_number_integer() && e->get<std::int64_t>() == -1))
      mk.last_sparse = c.r.uint("moe_layer_end_index", true);
  }
  if (row.shared_expert == SharedExpert::n_shared) mk.n_shared = c.r.uint(row.n_shared_key, true).value_or(0);
  if (row.shared_expert == SharedExpert::shared_intermediate_size)
    mk.shared_I = c.r.uint("shared_intermediate_size", true).value_or(0);
  if (row.shared_expert == SharedExpert::shared_expert_intermediate_size)
    mk.shared_I = c.r.uint("shared_expert_intermediate_size", true).value_or(0);
}

/// The dimensions, with the keys only one layout has.
void read_dims(Ctx& c) {
  c.s = read_shape(c.r, c.row);
  Shape& s = c.s;
  if (c.row.moe() && c.row.expert_width == ExpertWidth::intermediate_size) c.mk.expert_I = s.I;
  switch (c.row.mlp_width) {
    case MlpWidth::four_hidden: s.I = mul(4, s.H); break;  // BloomMLP
    case MlpWidth::expansion_ratio: s.I = mul(c.r.uint("expansion_ratio").value_or(4), s.H); break;  // MptMLP
    case MlpWidth::ffn_hidden_size: s.I = c.r.uint("ffn_hidden_size").value_or(mul(4, s.H)); break;  // FalconConfig
    case MlpWidth::ffn_dim: s.I = c.r.required({"ffn_dim"}); break;                                   // OPTConfig
    // Llama4TextDecoderLayer: Llama4TextMLP(config, intermediate_size=config.intermediate_size_mlp).
    case MlpWidth::intermediate_size_mlp: s.I = c.r.uint("intermediate_size_mlp").value_or(0); break;
    // Cohere2MoeDecoderLayer: Cohere2MoeMLP(config, config.prefix_dense_intermediate_size), whose
    // width falls back to intermediate_size when null.
    case MlpWidth::prefix_dense_intermediate_size:
      s.I = c.r.uint("prefix_dense_intermediate_size", true).value_or(s.I);
      break;
    default: break;
  }
  // GPTBigCode: multi_query (default true) keeps one k/v head.
  if (c.row.kv_heads == KvHeads::multi_query) s.kv = c.r.flag("multi_query", true) ? 1 : s.heads;
  switch (c.layout()) {
    case Layout::gptj:  // GPTJConfig rotary_dim (64; null: the whole embedding width) sizes embed_positions.
      c.gptj_rot = c.r.uint("rotary_dim", true).value_or(0);
      break;
    case Layout::falcon:
      // FalconAttention: k/v heads are num_kv_heads with new_decoder_architecture, else 1 when
      // multi_query; parallel_attn, and num_ln_in_parallel_attn norms (2 by default with the new
      // architecture).
      c.falcon_new = c.r.flag("new_decoder_architecture", false);
      c.falcon_parallel = c.r.flag("parallel_attn", true);
      c.falcon_ln = c.r.uint("num_ln_in_parallel_attn").value_or(c.falcon_new ? 2 : 1);
      if (c.falcon_new)
        s.kv = c.r.uint("num_kv_heads").value_or(s.heads);
      else
        s.kv = c.r.flag("multi_query", true) ? 1 : s.heads;
      if (s.heads != 0 && s.kv != 0 && s.heads % s.kv != 0)
        c.diags.add(c.r.field("num_kv_heads"), fmt::format("{} does not divide num_attention_heads {}", s.kv, s.heads),
                    "grouped-query attention needs a whole number of query heads per key/value head: check both "
                    "values");
      break;
    case Layout::opt:
      // OPT: embeddings of word_embed_proj_dim (OPTConfig: hidden_size when absent), optional
      // norm weights (layer_norm_elementwise_affine), no final norm when post-norm (350m).
      c.opt_affine = c.r.flag("layer_norm_elementwise_affine", true);
      c.opt_final_norm = c.r.flag("do_layer_norm_before", true) && !c.r.flag("_remove_final_layer_norm", false);
      c.opt_proj = c.r.uint("word_embed_proj_dim").value_or(s.H);
      break;
    case Layout::deepseek:
      // MLA (deepseek): the latent ranks and the split of a head into rope and no-rope parts.
      c.spec.kv_lora_rank = c.r.required({"kv_lora_rank"});
      c.spec.qk_rope_head_dim = c.r.required({"qk_rope_head_dim"});
      c.spec.qk_nope_head_dim = c.r.required({"qk_nope_head_dim"});
      // MiniCPM3Config: v_head_dim null (its default) is hidden_size // num_attention_heads.
      if (c.row.mla_v_head_dim_from_heads)
        c.spec.v_head_dim = c.r.uint("v_head_dim").value_or(s.heads != 0 ? s.H / s.heads : 0);
      else
        c.spec.v_head_dim = c.r.required({"v_head_dim"});
      if (const json* q = c.r.find("q_lora_rank"); q == nullptr) {
        c.q_lora = c.row.q_lora_default;  // the config class's default
        c.spec.notes.push_back(
            fmt::format("q_lora_rank is absent: used the config class's default {}", c.row.q_lora_default));
      } else if (!q->is_null()) {
        c.q_lora = c.r.uint("q_lora_rank");
      }
      break;
    default: break;
  }
}

/// The rotary scalings as the config writes them (`rope_parameters`, transformers 5, which may
/// hold one per layer type; else `rope_scaling`), its top-level original_max_position_embeddings
/// and model_max_length: what a serving engine derives its longest context from (vLLM's
/// _get_and_verify_max_len). Kept as written; the engine decides what they mean.
void read_rope_scaling(Ctx& c) {
  const auto one = [&c](const json& obj, std::string prefix) {
    Reader rope(obj, std::move(prefix), c.diags);
    RopeScaling rs;
    rs.type = rope.string("rope_type").value_or(rope.string("type").value_or(""));
    if (rope.has("factor")) rs.factor = rope.number("factor", 1.0);
    rs.original_max_positions = rope.uint("original_max_position_embeddings").value_or(0);
    c.spec.rope_scaling.push_back(std::move(rs));
  };
  const json* rp = c.r.find("rope_parameters");
  if (rp == nullptr || !rp->is_object()) rp = c.r.find("rope_scaling");
  if (rp != nullptr && rp->is_object() && !rp->empty()) {
    const std::string key = c.r.find("rope_parameters") == rp ? "rope_parameters" : "rope_scaling";
    // transformers 5's per-layer-type form: {"full_attention": {...}, "sliding_attention": {...}}.
    const bool per_layer_type = std::all_of(rp->begin(), rp->end(), [](const json& v) { return v.is_object(); });
    if (per_layer_type)
      for (auto it = rp->begin(); it != rp->end(); ++it) one(*it, c.r.field(key + "." + it.key() + "."));
    else
      one(*rp, c.r.field(key + "."));
  }
  c.spec.original_max_positions = c.r.uint("original_max_position_embeddings").value_or(0);
  c.spec.model_max_length = c.r.uint("model_max_length").value_or(0);
}

/// The row's flags, activation, rotary share, windows, soft-caps and dropouts.
void read_options(Ctx& c) {
  const Architecture& row = c.row;
  c.tied = c.r.flag("tie_word_embeddings", row.tied_default);
  // A multimodal model ties its language model's head as the outer config says (transformers
  // 5 reads tie_word_embeddings from the top-level config: internvl and mistral3 tie although
  // their text_config says false; measured, tests/unit/spec/data/vision.json).
  if (&c.r.object() != &c.config)
    if (const auto t = c.config.find("tie_word_embeddings"); t != c.config.end() && t->is_boolean())
      c.tied = t->get<bool>();
  c.qkv_bias = c.flag(row.qkv_bias);
  c.o_bias = c.flag(row.o_bias);
  c.qk_norm_on = row.qk_norm != QkNorm::none && c.flag(row.qk_norm_on);
  c.parallel = c.flag(row.parallel_residual);
  c.mlp_bias = c.flag(row.mlp_bias);
  c.lm_head_bias = c.flag(row.lm_head_bias);
  c.act_name = c.r.string(row.activation_key);
  c.post_norms_on = c.flag(row.post_norms);
  if (!row.attn_gate_per_head_key.empty()) {
    // LagunaConfig gating: true or "per-head" gives one gate value per head, another string one per
    // head dimension (LagunaAttention.gate_per_head).
    const json* gk = c.r.find(row.attn_gate_per_head_key);
    c.attn_gate_per_head = gk == nullptr || gk->is_null() || (gk->is_boolean() && gk->get<bool>()) ||
                           (gk->is_string() && gk->get<std::string>() == "per-head");
  }
  if (!row.heads_per_layer_key.empty()) {
    // Per-layer query-head counts are not laid out: a list is accepted when every entry is
    // num_attention_heads (the config class's default list), refused otherwise.
    if (const json* hl = c.r.find(row.heads_per_layer_key); hl != nullptr && !hl->is_null()) {
      bool uniform = hl->is_array();
      for (const json& e : hl->is_array() ? *hl : json::array())
        uniform = uniform && e.is_number_unsigned() && e.get<std::uint64_t>() == c.s.heads;
      if (!uniform)
        c.diags.add(c.r.field(row.heads_per_layer_key),
                    fmt::format("layers with other query-head counts than num_attention_heads ({}) are not laid out by "
                                "vramfit: their attention widths differ layer by layer",
                                c.s.heads),
                    fmt::format("vramfit estimates model_type '{}' only with every entry equal to num_attention_heads",
                                row.model_type));
    }
  }

  // Partial rotary: partial_rotary_factor (or gpt_neox's rotary_pct); transformers 5 may also
  // nest it in rope_parameters.
  c.rotary_fraction = c.r.number("partial_rotary_factor", c.r.number("rotary_pct", row.rotary_fraction));
  if (const json* rp = c.r.find("rope_parameters"); rp && rp->is_object()) {
    // Read like the top-level key: a negative factor would make the rotary width a negative
    // double, and converting that to an integer is undefined (it surfaced as an overflow).
    Reader rope(*rp, c.r.field("rope_parameters."), c.diags);
    c.rotary_fraction = rope.number("partial_rotary_factor", c.rotary_fraction);
  }
  read_rope_scaling(c);
  if (c.rotary_fraction > 1.0) {
    c.diags.add(c.r.field("partial_rotary_factor"), fmt::format("{} is more than 1", c.rotary_fraction),
                "the rotary share of a head is a fraction between 0 and 1");
    c.rotary_fraction = 1.0;
  }
  c.spec.partial_rotary_factor = c.rotary_fraction;

  c.window = c.r.uint("sliding_window", true).value_or(0);  // 0 or null: none
  if (row.sliding == Sliding::from_max_window) {
    c.qwen_sliding = c.r.flag("use_sliding_window", false);
    c.max_window_layers = c.r.uint("max_window_layers", true).value_or(c.s.L);
  }
  if (row.sliding == Sliding::pattern) c.window_pattern = c.r.uint("sliding_window_pattern").value_or(row.sliding_pattern);
  if (row.sliding == Sliding::pattern_first_full) c.window_pattern = row.sliding_pattern;  // not a config key
  if (row.sliding == Sliding::chunked) {
    // Llama4TextConfig: attention_chunk_size 8192 (null: no chunking), no_rope_layer_interval 4.
    c.window = c.r.find("attention_chunk_size") == nullptr ? 8192 : c.r.uint("attention_chunk_size", true).value_or(0);
    c.window_pattern = c.r.uint("no_rope_layer_interval").value_or(4);
  }
  c.nextn = c.r.uint("num_nextn_predict_layers", true).value_or(0);
  // MiniMax-M2's config.json: num_mtp_modules (with use_mtp); MiniMaxM2Config reads neither.
  c.mtp = c.r.uint("num_mtp_modules", true).value_or(0);
  // Qwen3.5's text_config: mtp_num_hidden_layers; Qwen3_5ForConditionalGeneration builds no MTP
  // module (_keys_to_ignore_on_load_unexpected drops the checkpoint's mtp.* weights).
  c.mtp_layers = c.r.uint("mtp_num_hidden_layers", true).value_or(0);
  // rotary_dim: only GPTJConfig reads it among the rows (MiniMaxM2Config does not: the Hub
  // config's 64 leaves the whole 128-wide head rotating in transformers 5.17).
  c.rotary_dim_ignored = c.layout() != Layout::gptj && c.r.has("rotary_dim");
  if (row.softcaps) {
    c.final_softcap = c.r.number("final_logit_softcapping", row.final_softcap_default);
    c.attn_softcap = c.r.number("attn_logit_softcapping", row.attn_softcap_default);
  }

  // Dropout probabilities (the engine counts dropout masks in training): the row's keys.
  // nn.Dropout raises for p outside [0, 1]: a larger value is a broken config, not a mask.
  const auto probability = [&](std::string_view key, double dflt) {
    if (key.empty()) return 0.0;
    const double p = c.r.number(key, dflt);
    if (p <= 1.0) return p;
    c.diags.add(c.r.field(key), fmt::format("{} is more than 1", p),
                "a dropout probability is between 0 and 1: check the value");
    return dflt;
  };
  c.spec.attention_dropout = probability(row.dropout.attention, row.dropout.attention_dflt);
  c.spec.hidden_dropout = probability(row.dropout.hidden, row.dropout.hidden_dflt);
  c.spec.embedding_dropout = probability(row.dropout.embedding, row.dropout.embedding_dflt);
}

// --- which layers are sparse ---------------------------------------------------------------

/// Whether layer i is sparse: Qwen2MoeDecoderLayer (not in mlp_only_layers and
/// (i + 1) % decoder_sparse_step == 0), DeepseekV2DecoderLayer (i >= first_k_dense_replace
/// and i % moe_layer_freq == 0); Mixtral and OLMoE: every layer.
bool layer_is_moe(const Ctx& c, std::uint64_t i) {
  if (!c.row.moe() || c.mk.experts == 0) return false;
  switch (c.row.sparse_layers) {
    case SparseLayers::first_k_dense: return i >= c.mk.first_dense && i % c.mk.layer_freq == 0;
    case SparseLayers::step: return c.mk.mlp_only.count(i) == 0 && (i + 1) % c.mk.sparse_step == 0;
    case SparseLayers::moe_layers: return c.mk.moe_list ? c.mk.moe_list->count(i) != 0 : (i + 1) % c.mk.sparse_step == 0;
    case SparseLayers::every: return true;
    case SparseLayers::mlp_layer_types:
    case SparseLayers::mlp_layer_types_or_first_k:
      return c.mk.moe_list ? c.mk.moe_list->count(i) != 0 : i >= c.mk.first_dense;
    case SparseLayers::start_end_interval:
      return i >= c.mk.first_dense && (!c.mk.last_sparse || i <= *c.mk.last_sparse) &&
             (i + 1) % c.mk.sparse_step == 0;
  }
  return true;
}

bool periodic(const Ctx& c) { return c.mk.sparse_step > 1 || c.mk.layer_freq > 1 || c.mk.moe_list.has_value(); }

/// The first layer after i where the kind may change: first_k_dense_replace, or the nearest
/// mlp_only layer m >= i (at m itself when m > i, after it when m == i). One ordered-set lookup,
/// so laying out a config with tens of thousands of mlp_only_layers stays linear (issue #14:
/// rescanning the list at every change took 14 s for a 275 KB qwen3_moe config).
std::uint64_t next_boundary(const Ctx& c, std::uint64_t i) {
  std::uint64_t j = c.s.L;
  if (c.mk.first_dense > i) j = std::min(j, c.mk.first_dense);
  if (c.mk.last_sparse && *c.mk.last_sparse >= i) j = std::min(j, *c.mk.last_sparse + 1);  // moe_layer_end_index
  if (const auto it = c.mk.mlp_only.lower_bound(i); it != c.mk.mlp_only.end()) j = std::min(j, *it == i ? i + 1 : *it);
  return j;
}

/// The first layer after i whose kind differs (or L). Without a period, the kind changes only
/// at first_k_dense_replace and around mlp_only_layers, so configs with absurd layer counts
/// are still laid out in a few steps.
std::uint64_t next_change(const Ctx& c, std::uint64_t i) {
  if (periodic(c)) return i + 1;
  std::uint64_t j = next_boundary(c, i);
  const bool k = layer_is_moe(c, i);
  // Merge neighbours of the same kind (push_layer merges them too).
  while (j < c.s.L && layer_is_moe(c, j) == k) j = next_boundary(c, j);
  return j;
}

/// Whether some layer is dense, and its MLP width is known when it must be.
void plan_layers(Ctx& c) {
  if (periodic(c) && c.s.L > 100000)
    c.diags.add(c.r.field("num_hidden_layers"), fmt::format("{} layers is far more than any real model has", c.s.L),
                std::string(kConfigFix));
  // PretrainedConfig's layer_type_validation: "`num_hidden_layers` (L) must be equal to the number of
  // layer types" (a ValueError); the sliding and chunked layers are counted from the list.
  if (const json* lt = c.r.find("layer_types"); lt != nullptr && lt->is_array() && lt->size() != c.s.L)
    c.diags.add(c.r.field("layer_types"), fmt::format("{} entries for num_hidden_layers {}", lt->size(), c.s.L),
                "give one entry per layer (\"full_attention\", \"sliding_attention\", ...), as the model's "
                "config.json has them");
  // transformers indexes mlp_layer_types by layer (an IndexError when it is short).
  if (c.mk.mlp_types_size && *c.mk.mlp_types_size != c.s.L)
    c.diags.add(c.r.field("mlp_layer_types"),
                fmt::format("{} entries for num_hidden_layers {}", *c.mk.mlp_types_size, c.s.L),
                "give one entry (\"dense\" or \"sparse\") per layer, as the model's config.json has them");
  for (std::uint64_t i = 0; i < c.s.L && !c.any_dense; i = next_change(c, i)) c.any_dense = !layer_is_moe(c, i);
  const std::string_view width_key =
      c.row.mlp_width == MlpWidth::intermediate_size_mlp ? "intermediate_size_mlp" : "intermediate_size";
  if (c.any_dense && c.s.I == 0 && c.row.mlp_width != MlpWidth::intermediate_size && c.diags.empty())
    c.diags.add(c.r.field(width_key), "missing: some layers are dense and their MLP width is needed",
                fmt::format("add \"{}\" as it appears in the model's config.json on the Hugging Face Hub", width_key));
}

// --- shape-level fields ----------------------------------------------------------------------

void fill_shape(Ctx& c) {
  const Architecture& row = c.row;
  const Shape& s = c.s;
  ModelSpec& spec = c.spec;
  const bool mla = c.layout() == Layout::deepseek;
  spec.hidden_size = s.H;
  spec.num_layers = s.L;
  spec.num_heads = s.heads;
  spec.num_kv_heads = mla ? s.heads : s.kv;
  spec.head_dim = mla ? spec.qk_nope_head_dim + spec.qk_rope_head_dim : s.hd;
  spec.q_lora_rank = c.q_lora.value_or(0);
  spec.mla_latent_cache = mla && row.mla_latent_cache;
  spec.vocab_size = s.V;
  spec.max_positions = s.max_pos;
  spec.tied_embeddings = c.tied;
  if (spec.head_dim > kMaxDim) throw InputError(c.r.field("head_dim"), "absurdly large", std::string(kConfigFix));

  // Activation: the config class's default, then the config's own.
  spec.activation = row.activation;
  if (c.act_name) {
    if (const auto a = activation_from(*c.act_name))
      spec.activation = *a;
    else
      spec.notes.push_back(fmt::format("activation '{}' is not modelled: counted as {}", *c.act_name,
                                       kActivationNames[static_cast<std::size_t>(spec.activation)]));
  }

  // One norm's parameters.
  switch (row.norm) {
    case NormKind::rms:
    case NormKind::rms_fp32: spec.norm = Norm::rms; c.norm_size = s.H; break;
    case NormKind::layer: spec.norm = Norm::layer; c.norm_size = 2 * s.H; break;
    case NormKind::layer_no_bias: spec.norm = Norm::layer; c.norm_size = s.H; break;
    case NormKind::layer_no_params: spec.norm = Norm::layer; c.norm_size = 0; break;
  }
  if (c.layout() == Layout::opt && !c.opt_affine) c.norm_size = 0;  // LayerNorm(elementwise_affine=False)
  if (c.layout() == Layout::mpt && !c.mlp_bias) c.norm_size = s.H;  // MptBlock: norm bias set to None with no_bias

  spec.gated_mlp = !plain_mlp(c.layout()) && !row.ungated_mlp;
  spec.learned_positions = row.positions == Positions::learned;
  // FalconDecoderLayer adds the MLP to the attention output (not to its residual) when
  // parallel_attn or new_decoder_architecture.
  spec.parallel_residual = c.parallel || (c.layout() == Layout::falcon && (c.falcon_parallel || c.falcon_new));
  // phi's qk_layernorm (LayerNorms with biases) is counted in the parameters only: its
  // measured training fits without the q/k-norm activations (tests/accuracy/arch).
  spec.qk_norm = c.qk_norm_on && row.qk_norm != QkNorm::head_dim_layer;
  spec.scaled_embeddings = row.scaled_embeddings;
  spec.norm_fp32_scale = row.norm == NormKind::rms_fp32;
}

/// How many layers use sliding_window: the config's layer_types when it lists them, else the
/// row's rule.
void fill_sliding(Ctx& c) {
  const std::uint64_t L = c.s.L;
  if (c.window != 0) {
    std::uint64_t sliding = 0;
    if (c.row.sliding == Sliding::chunked) {
      sliding = chunked_layers(c.r, L, c.window_pattern);
    } else if (const auto lt = sliding_from_layer_types(c.r)) {
      sliding = *lt;
    } else {
      switch (c.row.sliding) {
        case Sliding::none: break;
        case Sliding::every: sliding = L; break;
        case Sliding::alternate: sliding = (L + 1) / 2; break;  // layers 0, 2, ...
        case Sliding::pattern: sliding = L - L / c.window_pattern; break;
        case Sliding::pattern_first_full:  // full at i % pattern == 0: ceil(L / pattern) layers
          sliding = L - (L / c.window_pattern + (L % c.window_pattern != 0 ? 1 : 0));
          break;
        case Sliding::from_max_window:
          if (c.qwen_sliding) sliding = c.max_window_layers < L ? L - c.max_window_layers : 0;
          break;
        case Sliding::chunked: break;  // above
      }
    }
    if (sliding != 0) {
      c.spec.sliding_window = c.window;
      c.spec.sliding_layers = std::min(sliding, L);
    }
  }
  c.spec.scaled_logits = c.row.scaled_logits;
  if (c.row.eager_only)
    c.spec.notes.push_back(fmt::format("{}: transformers has no SDPA path for this type; attention is estimated as "
                                       "eager (the scores are materialised) whatever the attention setting",
                                       c.spec.model_type));
  if (c.row.softcaps) {
    c.spec.final_logit_softcap = c.final_softcap;
    c.spec.attn_logit_softcap = c.attn_softcap;
  }
}

// --- decoder layers ----------------------------------------------------------------------------

/// The attention projections of one layer, by layout, and the q/k norms of the row.
void attention(const Ctx& c, LayerGroup& g) {
  const Shape& s = c.s;
  const std::uint64_t H = s.H;
  const bool qkv = c.qkv_bias, o = c.o_bias;
  switch (c.layout()) {
    case Layout::gpt2: {
      // GPT2Attention: c_attn (Conv1D hidden -> 3*hidden), c_proj; all with biases. GPTBigCode's
      // multi-query c_attn holds q for every head and k, v for the k/v heads.
      const std::uint64_t qkv_out = c.row.kv_heads == KvHeads::multi_query
                                        ? add(H, mul(2, mul(s.kv, s.hd)))
                                        : 3 * H;
      g.linears.push_back(lin(Role::attn_in, "c_attn", H, qkv_out, true));
      g.linears.push_back(lin(Role::attn_out, "c_proj", H, H, true));
      break;
    }
    case Layout::gpt_neox:
      // GPTNeoXAttention: query_key_value and dense, bias=attention_bias.
      g.linears.push_back(lin(Role::attn_in, "query_key_value", H, 3 * H, qkv));
      g.linears.push_back(lin(Role::attn_out, "dense", H, H, o));
      break;
    case Layout::phi3: {
      // Phi3Attention: qkv_proj (q, k and v fused), o_proj; no biases.
      const std::uint64_t op = checked_add(mul(s.heads, s.hd), mul(2, mul(s.kv, s.hd)), "parameters");
      g.linears.push_back(lin(Role::attn_in, "qkv_proj", H, op));
      g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, s.hd), H));
      break;
    }
    case Layout::phi:
      // PhiAttention: q_proj, k_proj, v_proj, dense, all with biases.
      llama_attention(g, s, AttnBias{true, true, true, true});
      g.linears.back() = lin(Role::attn_out, "dense", mul(s.heads, s.hd), H, true);
      break;
    case Layout::deepseek: {
      // DeepseekV2Attention / DeepseekV3Attention (multi-head latent attention).
      const ModelSpec& m = c.spec;
      const std::uint64_t qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
      if (c.q_lora) {
        g.linears.push_back(lin(Role::attn_in, "q_a_proj", H, *c.q_lora, qkv));
        g.norm_params += *c.q_lora;  // q_a_layernorm
        g.linears.push_back(lin(Role::attn_inner, "q_b_proj", *c.q_lora, mul(s.heads, qk_head)));
      } else {
        g.linears.push_back(lin(Role::attn_in, "q_proj", H, mul(s.heads, qk_head)));
      }
      g.linears.push_back(lin(Role::attn_in, "kv_a_proj_with_mqa", H, m.kv_lora_rank + m.qk_rope_head_dim, qkv));
      g.norm_params += m.kv_lora_rank;  // kv_a_layernorm
      g.linears.push_back(
          lin(Role::attn_inner, "kv_b_proj", m.kv_lora_rank, mul(s.heads, m.qk_nope_head_dim + m.v_head_dim)));
      g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, m.v_head_dim), H, o));
      break;
    }
    case Layout::falcon:
      // FalconAttention: query_key_value (q heads + 2 * kv heads), dense; bias=config.bias.
      g.linears.push_back(lin(Role::attn_in, "query_key_value", H,
                              mul(add(s.heads, mul(2, s.kv)), s.hd), qkv));
      g.linears.push_back(lin(Role::attn_out, "dense", mul(s.heads, s.hd), H, o));
      break;
    case Layout::gptj:
      // GPTJAttention: k_proj, v_proj, q_proj, out_proj, no biases.
      llama_attention(g, s, AttnBias{});
      g.linears.back() = lin(Role::attn_out, "out_proj", mul(s.heads, s.hd), H);
      break;
    case Layout::bloom:
      // BloomAttention: query_key_value (3 * hidden) and dense, with biases.
      g.linears.push_back(lin(Role::attn_in, "query_key_value", H, mul(3, H), true));
      g.linears.push_back(lin(Role::attn_out, "dense", H, H, true));
      break;
    case Layout::mpt:
      // MptAttention: Wqkv (3 * d_model) and out_proj, biases unless no_bias.
      g.linears.push_back(lin(Role::attn_in, "Wqkv", H, mul(3, H), qkv));
      g.linears.push_back(lin(Role::attn_out, "out_proj", H, H, o));
      break;
    case Layout::opt:
      // OPTAttention: k_proj, v_proj, q_proj, out_proj, bias=enable_bias.
      llama_attention(g, s, AttnBias{qkv, qkv, qkv, o});
      g.linears.back() = lin(Role::attn_out, "out_proj", mul(s.heads, s.hd), H, o);
      break;
    case Layout::llama:
    case Layout::gemma4:  // laid out by gemma4_layer
    case Layout::gemma: llama_attention(g, s, AttnBias{qkv, qkv, qkv, o}, c.row.names); break;
    case Layout::starcoder2: llama_attention(g, s, AttnBias{qkv, qkv, qkv, o}); break;
  }
  if (c.row.attention_sinks || c.row.sink_logits) g.other_params += s.heads;  // one learned sink logit per head
  // An output gate (AfmoeAttention.gate_proj, LagunaAttention.g_proj): reads the attention norm's output.
  if (!c.row.attn_gate.empty())
    g.linears.push_back(lin(Role::attn_in, std::string(c.row.attn_gate), H, c.attn_gate_per_head ? s.heads : mul(s.heads, s.hd)));
  if (!c.qk_norm_on) return;
  switch (c.row.qk_norm) {
    case QkNorm::none: break;
    case QkNorm::head_dim: g.norm_params += 2 * s.hd; break;
    case QkNorm::per_head: g.norm_params += mul(add(s.heads, s.kv), s.hd); break;
    // q_norm(heads * head_dim), k_norm(kv * head_dim): Olmo2Attention, MiniMaxM2Attention (head_dim
    // 128 beside hidden 3072 / 48 heads); OlmoeAttention's hidden_size is the same product.
    case QkNorm::projection: g.norm_params += mul(add(s.heads, s.kv), s.hd); break;
    case QkNorm::head_dim_layer: g.norm_params += 2 * 2 * s.hd; break;
    case QkNorm::l2: break;  // no parameters
  }
}

/// The routed experts, their router and the shared expert of a sparse layer.
void moe_mlp(const Ctx& c, LayerGroup& g) {
  const std::uint64_t H = c.s.H, E = c.mk.experts, I = c.mk.expert_I;
  switch (c.row.expert_linears) {
    case ExpertLinears::fused_gate_up_biased:
    case ExpertLinears::fused_gate_up: {
      const bool bias = c.row.expert_linears == ExpertLinears::fused_gate_up_biased;
      g.linears.push_back(lin(Role::router, "router", H, E, bias));
      g.linears.push_back(expert(Role::mlp_in, "gate_up_proj", H, mul(2, I), E, bias));
      g.linears.push_back(expert(Role::mlp_out, "down_proj", I, H, E, bias));
      break;
    }
    case ExpertLinears::gate_up_down:
      g.linears.push_back(lin(Role::router, "gate", H, E));  // the router
      g.linears.push_back(expert(Role::mlp_in, "gate_proj", H, I, E));
      g.linears.push_back(expert(Role::mlp_in, "up_proj", H, I, E));
      g.linears.push_back(expert(Role::mlp_out, "down_proj", I, H, E));
      break;
  }
  switch (c.row.shared_expert) {
    case SharedExpert::none: break;
    case SharedExpert::gated:
      if (c.mk.shared_I == 0) break;
      g.linears.push_back(shared(Role::mlp_in, "shared_expert.gate_proj", H, c.mk.shared_I));
      g.linears.push_back(shared(Role::mlp_in, "shared_expert.up_proj", H, c.mk.shared_I));
      g.linears.push_back(shared(Role::mlp_out, "shared_expert.down_proj", c.mk.shared_I, H));
      g.linears.push_back(shared(Role::router, "shared_expert_gate", H, 1));
      break;
    case SharedExpert::n_shared: {
      if (c.mk.n_shared == 0) break;
      const std::uint64_t si = mul(I, c.mk.n_shared);
      g.linears.push_back(shared(Role::mlp_in, "shared_experts.gate_proj", H, si));
      g.linears.push_back(shared(Role::mlp_in, "shared_experts.up_proj", H, si));
      g.linears.push_back(shared(Role::mlp_out, "shared_experts.down_proj", si, H));
      break;
    }
    case SharedExpert::dense_width:  // HunYuanMoE.shared_mlp
      g.linears.push_back(shared(Role::mlp_in, "shared_mlp.gate_proj", H, c.s.I));
      g.linears.push_back(shared(Role::mlp_in, "shared_mlp.up_proj", H, c.s.I));
      g.linears.push_back(shared(Role::mlp_out, "shared_mlp.down_proj", c.s.I, H));
      break;
    case SharedExpert::shared_intermediate_size:  // GraniteMoeSharedMLP: gate and up fused in input_linear
      if (c.mk.shared_I == 0) break;
      g.linears.push_back(shared(Role::mlp_in, "shared_mlp.input_linear", H, mul(2, c.mk.shared_I)));
      g.linears.push_back(shared(Role::mlp_out, "shared_mlp.output_linear", c.mk.shared_I, H));
      break;
    case SharedExpert::shared_expert_intermediate_size:  // LagunaSparseMoeBlock.shared_experts, no gate
      if (c.mk.shared_I == 0) break;
      g.linears.push_back(shared(Role::mlp_in, "shared_experts.gate_proj", H, c.mk.shared_I));
      g.linears.push_back(shared(Role::mlp_in, "shared_experts.up_proj", H, c.mk.shared_I));
      g.linears.push_back(shared(Role::mlp_out, "shared_experts.down_proj", c.mk.shared_I, H));
      break;
    case SharedExpert::expert_width:
      g.linears.push_back(shared(Role::mlp_in, "shared_expert.gate_proj", H, I));
      g.linears.push_back(shared(Role::mlp_in, "shared_expert.up_proj", H, I));
      g.linears.push_back(shared(Role::mlp_out, "shared_expert.down_proj", I, H));
      break;
  }
  // Ernie4_5_MoeStatics: e_score_correction_bias, a [1, experts] parameter (not trained).
  if (c.row.router_score_bias_parameter) g.other_params += E;
  if (c.row.moe_post_norm) g.norm_params += c.norm_size;  // AXK1MoE.post_mlp_layernorm
}

/// The MLP of a dense layer, by layout.
void dense_mlp(const Ctx& c, LayerGroup& g) {
  const std::uint64_t H = c.s.H, I = c.s.I;
  const auto two = [&](std::string_view in, std::string_view out, bool bias) {
    g.linears.push_back(lin(Role::mlp_in, std::string(in), H, I, bias));
    g.linears.push_back(lin(Role::mlp_out, std::string(out), I, H, bias));
  };
  switch (c.layout()) {
    case Layout::gpt2: two("c_fc", "c_proj", true); break;
    case Layout::gpt_neox: two("dense_h_to_4h", "dense_4h_to_h", true); break;
    case Layout::phi: two("fc1", "fc2", true); break;
    case Layout::starcoder2: two("c_fc", "c_proj", c.mlp_bias); break;
    case Layout::falcon: two("dense_h_to_4h", "dense_4h_to_h", c.mlp_bias); break;
    case Layout::opt: two("fc1", "fc2", c.mlp_bias); break;
    case Layout::gptj: two("fc_in", "fc_out", true); break;              // GPTJMLP
    case Layout::bloom: two("dense_h_to_4h", "dense_4h_to_h", true); break;  // BloomMLP
    case Layout::mpt: two("up_proj", "down_proj", c.mlp_bias); break;     // MptMLP
    case Layout::phi3:
      g.linears.push_back(lin(Role::mlp_in, "gate_up_proj", H, 2 * I));
      g.linears.push_back(lin(Role::mlp_out, "down_proj", I, H));
      break;
    case Layout::llama:
    case Layout::gemma:
    case Layout::gemma4:
    case Layout::deepseek:
      if (c.row.ungated_mlp) {  // ArceeMLP, ApertusMLP: up_proj, down_proj (mlp_bias)
        two(c.row.names.up, c.row.names.down, c.mlp_bias);
      } else if (c.row.fused_gate_up) {  // GlmMLP: gate_up_proj (fused), down_proj; no biases
        g.linears.push_back(lin(Role::mlp_in, "gate_up_proj", H, mul(2, I)));
        g.linears.push_back(lin(Role::mlp_out, "down_proj", I, H));
      } else {
        gated_mlp(g, H, I, c.mlp_bias, c.row.names);
      }
      break;
  }
}

/// One layer of each kind, laid out once; the groups repeat them.
LayerGroup make_layer(const Ctx& c, bool moe) {
  LayerGroup g;
  g.count = 1;
  g.moe = moe;
  attention(c, g);
  if (moe)
    moe_mlp(c, g);
  else
    dense_mlp(c, g);
  // XIELUActivation (ACT2FN["xielu"]) is a module with parameters: alpha_p and alpha_n, [1] each.
  if (!moe && c.spec.activation == Activation::xielu) g.other_params += 2;
  unsigned norms = c.row.layer_norms;
  if (c.parallel && c.row.parallel_one_norm) norms = 1;
  if (c.post_norms_on) norms += 2;  // HyperCLOVAXDecoderLayer post_norm1, post_norm2
  // FalconDecoderLayer: input + post-attention norms without parallel_attn; with it, ln_attn
  // and ln_mlp when num_ln_in_parallel_attn is 2 (the default of new_decoder_architecture),
  // else one input_layernorm.
  if (c.layout() == Layout::falcon && c.falcon_parallel) norms = c.falcon_ln == 2 ? 2 : 1;
  g.norm_params += norms * c.norm_size;
  return g;
}

/// Gemma4TextModel's layers (modeling_gemma4.py, transformers 5.17), one at a time:
/// - Gemma4TextAttention: q_proj and q_norm(head_dim); unless the layer is KV-shared (the last
///   num_kv_shared_layers layers, which read shared_kv_states and cache nothing) k_proj, k_norm,
///   v_norm (no weight) and v_proj, which full-attention layers drop with attention_k_eq_v; o_proj.
///   Full-attention layers take per_layer_config's head_dim / num_key_value_heads
///   (Gemma4TextConfig.__post_init__: global_head_dim, 512, and num_global_key_value_heads with
///   attention_k_eq_v).
/// - Gemma4TextMLP: gate/up/down of intermediate_size, twice as wide on KV-shared layers with
///   use_double_wide_mlp.
/// - enable_moe_block: Gemma4TextRouter (proj, scale [H], per_expert_scale [E]) and
///   Gemma4TextExperts (gate_up_proj [E, 2I, H], down_proj [E, H, I] of moe_intermediate_size)
///   beside the MLP, which then runs on every token as a shared expert does; 3 more norms.
/// - 4 norms; with hidden_size_per_layer_input, per_layer_input_gate, per_layer_projection and
///   post_per_layer_input_norm; a layer_scalar buffer.
void lay_out_gemma4(Ctx& c, std::uint64_t& buffers) {
  const Shape& s = c.s;
  const std::uint64_t H = s.H, L = s.L;
  ModelSpec& spec = c.spec;
  Reader& r = c.r;
  // layer_types, else Gemma4TextConfig's default (sliding but every 6th); the last is forced full.
  std::vector<bool> full(L, false);
  const json* lt = r.find("layer_types");
  if (lt != nullptr && lt->is_array()) {  // of L entries: plan_layers refused another length
    for (std::uint64_t i = 0; i < L; ++i) full[i] = (*lt)[i] != "sliding_attention";
  } else {
    if (lt != nullptr && !lt->is_null())
      c.diags.add(r.field("layer_types"), fmt::format("expected a list of {} layer kinds", L), std::string(kConfigFix));
    for (std::uint64_t i = 0; i < L; ++i) full[i] = (i + 1) % 6 == 0;
  }
  if (L != 0) full[L - 1] = true;
  const std::uint64_t shared_n = r.uint("num_kv_shared_layers", true).value_or(0);
  if (shared_n >= L && L != 0)
    c.diags.add(r.field("num_kv_shared_layers"), fmt::format("{} of {} layers: none would hold keys and values", shared_n, L),
                std::string(kConfigFix));
  const std::uint64_t first_shared = L - std::min(shared_n, L);
  // A KV-shared layer reads shared_kv_states[its kind], stored by the last earlier layer of that kind
  // that computes its own (Gemma4TextAttention.store_full_length_kv): without one, transformers fails.
  for (const bool kind : {false, true}) {
    bool stored = false, reads = false;
    std::uint64_t reader = 0;
    for (std::uint64_t i = 0; i < L; ++i) {
      if (full[i] != kind) continue;
      if (i < first_shared) {
        stored = true;
      } else if (!reads) {
        reads = true;
        reader = i;
      }
    }
    if (reads && !stored)
      c.diags.add(r.field("num_kv_shared_layers"),
                  fmt::format("layer {} reads the shared keys and values of the {} layers, but none of the first {} "
                              "layers (those that compute their own) is one: transformers cannot run this config",
                              reader, kind ? "full_attention" : "sliding_attention", first_shared),
                  "check num_kv_shared_layers and layer_types against the model's config.json");
  }
  const bool k_eq_v = r.flag("attention_k_eq_v", false);
  const bool double_wide = r.flag("use_double_wide_mlp", false);
  const bool moe = r.flag("enable_moe_block", false);
  // Gemma4TextConfig: hidden_size_per_layer_input 256 by default; 0 or null: no per-layer inputs.
  const json* ple = r.find("hidden_size_per_layer_input");
  const std::uint64_t P = ple == nullptr ? 256 : r.uint("hidden_size_per_layer_input", true).value_or(0);
  // Full-attention layers' head_dim and key/value heads: per_layer_config when the config has it
  // (transformers' to_dict writes it), else global_head_dim and num_global_key_value_heads.
  const std::uint64_t global_hd = r.uint("global_head_dim").value_or(512);
  const std::uint64_t global_kv = k_eq_v ? r.uint("num_global_key_value_heads").value_or(s.kv) : s.kv;
  std::vector<std::uint64_t> hd(L, s.hd), kvh(L, s.kv);
  const json* plc = r.find("per_layer_config");
  if (plc != nullptr && plc->is_object()) {
    for (auto it = plc->begin(); it != plc->end(); ++it) {
      std::uint64_t i = 0;
      bool digits = !it.key().empty();
      for (char ch : it.key()) digits = digits && ch >= '0' && ch <= '9' && (i = i * 10 + static_cast<std::uint64_t>(ch - '0')) < L;
      if (!digits || !it->is_object()) {
        c.diags.add(r.field("per_layer_config"), fmt::format("expected layer indices below {} with objects, got \"{}\"", L, it.key()),
                    std::string(kConfigFix));
        continue;
      }
      Reader lr(*it, r.field("per_layer_config." + it.key() + "."), c.diags);
      hd[i] = lr.uint("head_dim").value_or(s.hd);
      kvh[i] = lr.uint("num_key_value_heads").value_or(s.kv);
    }
  } else {
    for (std::uint64_t i = 0; i < L; ++i)
      if (full[i]) {
        hd[i] = global_hd;
        kvh[i] = global_kv;
      }
  }
  std::uint64_t E = 0, top_k = 0, moe_I = 0;
  if (moe) {
    E = r.required({"num_experts"});
    top_k = r.required({"top_k_experts"});
    moe_I = r.required({"moe_intermediate_size"});
    if (E != 0 && top_k > E)
      c.diags.add(r.field("top_k_experts"), fmt::format("{} is more than the {} experts", top_k, E),
                  "a token cannot be routed to more experts than exist: check both values");
  }
  for (std::uint64_t i = 0; i < L; ++i) {
    if (s.heads != 0 && kvh[i] != 0 && s.heads % kvh[i] != 0)
      c.diags.add(r.field("num_key_value_heads"), fmt::format("{} does not divide num_attention_heads {} (layer {})", kvh[i], s.heads, i),
                  "grouped-query attention needs a whole number of query heads per key/value head: check both values");
    if (hd[i] > kMaxDim) c.diags.add(r.field("head_dim"), "absurdly large", std::string(kConfigFix));
  }
  c.diags.throw_if_any();

  const bool bias = c.qkv_bias;
  std::uint64_t sliding = 0, kv_full = 0, kv_sliding = 0;
  for (std::uint64_t i = 0; i < L; ++i) {
    const bool kv_shared = i >= first_shared;
    LayerGroup g;
    g.count = 1;
    g.moe = moe;
    g.head_dim = hd[i] != s.hd ? hd[i] : 0;
    g.kv_heads = kvh[i] != s.kv ? kvh[i] : 0;
    g.kv_shared = kv_shared;
    g.linears.push_back(lin(Role::attn_in, "q_proj", H, mul(s.heads, hd[i]), bias));
    g.norm_params += hd[i];  // q_norm
    if (!kv_shared) {
      g.linears.push_back(lin(Role::attn_in, "k_proj", H, mul(kvh[i], hd[i]), bias));
      if (!(k_eq_v && full[i])) g.linears.push_back(lin(Role::attn_in, "v_proj", H, mul(kvh[i], hd[i]), bias));
      g.norm_params += hd[i];  // k_norm (v_norm has no weight)
      (full[i] ? kv_full : kv_sliding) += mul(mul(2, kvh[i]), hd[i]);
    }
    g.linears.push_back(lin(Role::attn_out, "o_proj", mul(s.heads, hd[i]), H, c.o_bias));
    // Gemma4TextMLP: `layer_idx >= first_kv_shared_layer_idx > 0`.
    const std::uint64_t I = double_wide && kv_shared && first_shared > 0 ? mul(2, s.I) : s.I;
    g.intermediate = I != s.I ? I : 0;
    if (moe) {
      g.linears.push_back(shared(Role::mlp_in, "mlp.gate_proj", H, I));
      g.linears.push_back(shared(Role::mlp_in, "mlp.up_proj", H, I));
      g.linears.push_back(shared(Role::mlp_out, "mlp.down_proj", I, H));
      g.linears.push_back(lin(Role::router, "router.proj", H, E));
      g.other_params += add(H, E);  // router.scale, router.per_expert_scale
      g.linears.push_back(expert(Role::mlp_in, "experts.gate_up_proj", H, mul(2, moe_I), E));
      g.linears.push_back(expert(Role::mlp_out, "experts.down_proj", moe_I, H, E));
      g.norm_params += mul(3, H);  // post_feedforward_layernorm_1, _2, pre_feedforward_layernorm_2
    } else {
      gated_mlp(g, H, I, false);
    }
    g.norm_params += mul(4, H);
    if (P != 0) {
      // The gate reads the hidden state after the MLP's residual add, the projection the gated product.
      g.linears.push_back(lin(Role::mlp_in, "per_layer_input_gate", H, P));
      g.linears.push_back(lin(Role::mlp_out, "per_layer_projection", P, H));
      g.norm_params += H;  // post_per_layer_input_norm
    }
    sliding += full[i] ? 0 : 1;
    push_layer(spec.layers, std::move(g));
  }
  buffers = add(buffers, mul(L, 4));  // layer_scalar, one fp32 value a layer
  if (c.window != 0 && sliding != 0) {
    spec.sliding_window = c.window;
    spec.sliding_layers = sliding;
  }
  // Keys and values a token adds over the layers that cache them (the engine's per-layer rule
  // would count every layer at head_dim x num_key_value_heads).
  spec.kv_full_per_token = spec.sliding_window != 0 ? kv_full : add(kv_full, kv_sliding);
  spec.kv_sliding_per_token = spec.sliding_window != 0 ? kv_sliding : 0;
  if (moe) {
    spec.moe.num_experts = E;
    spec.moe.experts_per_token = top_k;
    spec.moe.expert_intermediate = moe_I;
    spec.moe.shared_intermediate = s.I;
  }
  // Per-layer inputs (PLE): embed_tokens_per_layer [vocab_size_per_layer_input, L * P],
  // per_layer_model_projection (H -> L * P), per_layer_projection_norm (P); its embed_scale.
  if (P != 0) {
    const std::uint64_t V_ple = r.uint("vocab_size_per_layer_input").value_or(262144);
    c.ple_params = add(mul(mul(V_ple, L), P), add(mul(mul(H, L), P), P));
    buffers = add(buffers, 4);
  }
  // Gemma4TextRotaryEmbedding: inv_freq and original_inv_freq per layer type present, each of its
  // head_dim (the proportional rope of the full layers keeps the whole width).
  std::uint64_t full_hd = 0, sliding_hd = 0;
  for (std::uint64_t i = 0; i < L; ++i) (full[i] ? full_hd : sliding_hd) = hd[i];
  c.gemma4_rotary = add(full_hd != 0 ? rotary_bytes(full_hd) : 0, sliding_hd != 0 ? rotary_bytes(sliding_hd) : 0);
  spec.final_logit_softcap = r.number("final_logit_softcapping", 0);
}

void lay_out_layers(Ctx& c, std::uint64_t& buffers) {
  if (c.layout() == Layout::gemma4) return lay_out_gemma4(c, buffers);
  const LayerGroup dense_layer = make_layer(c, false);
  const LayerGroup moe_layer = make_layer(c, true);
  if (c.row.router_score_bias && c.mk.experts != 0) {
    // DeepseekV3TopkRouter: e_score_correction_bias (n_routed_experts fp32), a buffer.
    for (std::uint64_t i = 0; i < c.s.L; i = next_change(c, i))
      if (layer_is_moe(c, i)) buffers = checked_add(buffers, checked_mul(next_change(c, i) - i, c.mk.experts * 4));
  }
  // XIELUActivation's beta and eps: scalar buffers in each dense MLP (counted fp32, as the others).
  if (c.spec.activation == Activation::xielu)
    for (std::uint64_t i = 0; i < c.s.L; i = next_change(c, i))
      if (!layer_is_moe(c, i)) buffers = add(buffers, checked_mul(next_change(c, i) - i, 8));
  for (std::uint64_t i = 0; i < c.s.L;) {
    const std::uint64_t j = next_change(c, i);
    LayerGroup g = layer_is_moe(c, i) ? moe_layer : dense_layer;
    g.count = j - i;
    push_layer(c.spec.layers, std::move(g));
    i = j;
  }
}

// --- embeddings, head, final norm, buffers ---------------------------------------------------

void embeddings_and_buffers(Ctx& c, std::uint64_t buffers) {
  const Shape& s = c.s;
  const std::uint64_t H = s.H;
  ModelSpec& spec = c.spec;
  spec.embedding_params = checked_add(checked_mul(s.V, H, "parameters"), c.ple_params);
  if (c.layout() == Layout::gpt2) spec.embedding_params = checked_add(spec.embedding_params, mul(s.max_pos, H));  // wpe
  if (c.layout() == Layout::bloom)  // word_embeddings_layernorm (LayerNorm with bias)
    spec.embedding_params = checked_add(spec.embedding_params, mul(2, H));
  if (c.layout() == Layout::opt) {
    // OPTDecoder: embed_tokens(V, word_embed_proj_dim), OPTLearnedPositionalEmbedding
    // (max_position_embeddings + 2 rows: positions are offset by 2), and project_in /
    // project_out (no biases) when word_embed_proj_dim differs from hidden_size.
    spec.embedding_params = checked_add(mul(s.V, c.opt_proj), mul(add(s.max_pos, 2), H));
    if (c.opt_proj != H) spec.embedding_params = checked_add(spec.embedding_params, mul(2, mul(c.opt_proj, H)));
  }
  spec.lm_head_params = c.tied ? 0 : checked_mul(s.V, c.layout() == Layout::opt ? c.opt_proj : H, "parameters");
  // A bias of the head is its own, tied weight or not (transformers ties lm_head.weight only).
  if (c.lm_head_bias) spec.lm_head_params = add(spec.lm_head_params, s.V);
  spec.final_norm_params = c.norm_size;
  if (c.layout() == Layout::opt && !c.opt_final_norm) spec.final_norm_params = 0;  // post-norm OPT (350m)

  switch (c.row.positions) {
    case Positions::sincos_table:
      // GPTJAttention.embed_positions: sin/cos table (max positions x rotary_dim or n_embd), fp32, per layer.
      buffers = checked_add(buffers, mul(mul(s.L, s.max_pos), mul(c.gptj_rot != 0 ? c.gptj_rot : H, 4)), "parameters");
      break;
    case Positions::rotary: {
      if (c.layout() == Layout::gemma4) {
        buffers = add(buffers, c.gemma4_rotary);
        break;
      }
      const std::uint64_t rot_dim = c.layout() == Layout::deepseek
                                        ? spec.qk_rope_head_dim
                                        : static_cast<std::uint64_t>(static_cast<double>(s.hd) * c.rotary_fraction);
      buffers += c.row.rotary_tables * rotary_bytes(rot_dim);
      break;
    }
    case Positions::learned:
    case Positions::alibi: break;  // no rotary buffers
  }
  // Gemma*ScaledWordEmbedding registers `embed_scale` (an fp32 scalar): measured with
  // transformers 5.17 on gemma, gemma2 and gemma3_text.
  if (c.row.scaled_embeddings) buffers += 4;
  if (c.row.causal_mask_buffer) buffers = add(buffers, mul(s.max_pos, s.max_pos));
  spec.buffer_bytes = buffers;
}

// --- the MoE summary and the notes -------------------------------------------------------------

void finish(Ctx& c) {
  ModelSpec& spec = c.spec;
  const MoeKeys& mk = c.mk;
  if (c.row.moe() && mk.experts != 0) {
    spec.moe.num_experts = mk.experts;
    spec.moe.experts_per_token = mk.top_k;
    spec.moe.expert_intermediate = mk.expert_I;
    switch (c.row.shared_expert) {
      case SharedExpert::none: break;
      case SharedExpert::gated: spec.moe.shared_intermediate = mk.shared_I; break;
      case SharedExpert::n_shared: spec.moe.shared_intermediate = mul(mk.expert_I, mk.n_shared); break;
      case SharedExpert::dense_width: spec.moe.shared_intermediate = c.s.I; break;
      case SharedExpert::expert_width: spec.moe.shared_intermediate = mk.expert_I; break;
      case SharedExpert::shared_intermediate_size:
      case SharedExpert::shared_expert_intermediate_size: spec.moe.shared_intermediate = mk.shared_I; break;
    }
    spec.moe.shared_expert_gate = c.row.shared_expert == SharedExpert::gated && mk.shared_I != 0;
  }
  spec.intermediate_size = c.any_dense ? c.s.I : 0;

  if (c.nextn != 0)
    spec.notes.push_back(
        "the multi-token-prediction layer (num_nextn_predict_layers) is not built by transformers "
        "and is not counted");
  if (c.mtp != 0)
    spec.notes.push_back(fmt::format(
        "the {} multi-token-prediction modules (num_mtp_modules) are not built by transformers and are not counted",
        c.mtp));
  if (c.mtp_layers != 0)
    spec.notes.push_back(fmt::format(
        "the {} multi-token-prediction layer(s) (mtp_num_hidden_layers; the checkpoint's mtp.* weights) are not "
        "built by transformers and are not counted",
        c.mtp_layers));
  if (c.rotary_dim_ignored)
    spec.notes.push_back(
        "rotary_dim is not read by transformers for this model_type: rotary embeddings cover the rotary share "
        "of each head that partial_rotary_factor gives (all of it by default)");
  if (!c.s.head_dim_given && !c.known && !c.r.has("head_dim"))
    spec.notes.push_back(fmt::format("head_dim taken as hidden_size / num_attention_heads = {}", c.s.hd));
  if (!c.known && !c.r.has("tie_word_embeddings"))
    spec.notes.push_back("tie_word_embeddings is absent: assumed false (a separate lm_head)");
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

  Root root;
  find_language_model(config, org, diags, spec, root);
  spec.model_type = root.model_type;
  refuse_not_decoders(config, org, root.model_type, diags);
  const Architecture* found = find_architecture(root.model_type);
  if (found == nullptr && !root.model_type.empty()) found = row_of_class(config, root, spec);
  // A row with a LinearMixer lays out its "linear_attention" layers (spec/hybrid.cpp checks its layer_types).
  if (found == nullptr || found->linear_mixer == LinearMixer::none)
    refuse_other_layers(*root.obj, org, root.prefix, root.model_type, found != nullptr, diags);
  fill_nested_defaults(found, spec, root, root.obj != &config);
  const Architecture& row =
      found != nullptr ? *found : unknown_row(config, *root.obj, org, root.model_type, unknown, diags, spec);
  spec.family = std::string(row.family);

  Ctx c{config, org, diags, spec, Reader(*root.obj, root.prefix, diags), row, found != nullptr};
  read_moe_keys(c);
  read_dims(c);
  read_options(c);
  plan_layers(c);
  diags.throw_if_any();

  fill_shape(c);
  fill_sliding(c);
  std::uint64_t buffers = 0;
  lay_out_layers(c, buffers);
  embeddings_and_buffers(c, buffers);
  finish(c);
  lay_out_linear_attention(*root.obj, root.prefix, row, spec, diags);
  diags.throw_if_any();

  spec.params = count_params(spec);
  diags.throw_if_any();
  return spec;
}
}  // namespace

/// The checkpoint's declared dtype: transformers 5's PretrainedConfig keeps it as `dtype` (and reads
/// `torch_dtype` from older files); a composite config may hold it in text_config only. Other
/// values (float64, float8 names, a non-string) give none: the default --dtype then stands.
static std::optional<DType> declared_dtype(const nlohmann::json& config) {
  for (const nlohmann::json* c : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (c == nullptr || !c->is_object()) continue;
    for (const char* key : {"dtype", "torch_dtype"}) {
      const auto it = c->find(key);
      if (it == c->end() || !it->is_string()) continue;
      // core's dtype names (float32, float16, bfloat16 and their aliases), floating 16/32-bit only.
      const std::optional<DType> d = parse_dtype(it->get_ref<const std::string&>());
      if (d == DType::fp32 || d == DType::fp16 || d == DType::bf16) return d;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

ModelSpec from_config(const nlohmann::json& config, std::string_view origin, UnknownType unknown) {
  try {
    ModelSpec spec = build(config, origin, unknown);
    // A vision-language config: count its vision tower and projector too (spec/vision.cpp).
    if (auto vision = vision_from_config(config, origin, spec.hidden_size)) {
      spec.buffer_bytes = add(spec.buffer_bytes, vision->buffer_bytes);
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
    spec.stored_dtype = declared_dtype(config);
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
