#pragma once

// Writes GGUF headers for the tests (docs/gguf.md in llama.cpp): little-endian, the metadata,
// then tensor infos whose offsets follow each other, padded to the alignment as gguf.cpp
// writes them. Tensor data is not written: data_size() says how much a file would hold.

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vramfit::test {

class GgufWriter {
 public:
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;               ///< for the offsets; set general.alignment to match
  std::optional<std::uint64_t> force_offset;  ///< replaces the first tensor's offset
  std::map<std::size_t, std::uint64_t> offset_of;  ///< replaces tensor i's offset (overlaps, gaps)

  void kv_raw(const std::string& key, std::uint32_t type, const std::string& value) {
    put_str(kvs_, key);
    put(kvs_, type, 4);
    kvs_ += value;
    ++n_kv_;
  }
  void kv_u32(const std::string& key, std::uint32_t v) { kv_raw(key, 4, le(v, 4)); }
  void kv_i32(const std::string& key, std::int32_t v) {
    kv_raw(key, 5, le(static_cast<std::uint32_t>(v), 4));
  }
  void kv_u64(const std::string& key, std::uint64_t v) { kv_raw(key, 10, le(v, 8)); }
  void kv_bool(const std::string& key, bool v) { kv_raw(key, 7, std::string(1, v ? '\1' : '\0')); }
  void kv_f32(const std::string& key, float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    kv_raw(key, 6, le(bits, 4));
  }
  void kv_str(const std::string& key, const std::string& v) {
    std::string s;
    put_str(s, v);
    kv_raw(key, 8, s);
  }
  void kv_strings(const std::string& key, const std::vector<std::string>& v) {
    std::string s = le(8, 4) + le(v.size(), 8);
    for (const auto& x : v) put_str(s, x);
    kv_raw(key, 9, s);
  }
  void kv_u32_array(const std::string& key, const std::vector<std::uint32_t>& v) {
    std::string s = le(4, 4) + le(v.size(), 8);
    for (const auto x : v) s += le(x, 4);
    kv_raw(key, 9, s);
  }

  /// A tensor of ggml shape `ne` (row length first) and ggml type id `type`.
  /// The tensors written so far: names and shapes.
  [[nodiscard]] std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensor_list() const {
    std::vector<std::pair<std::string, std::vector<std::uint64_t>>> out;
    for (const T& t : tensors_) out.emplace_back(t.name, t.ne);
    return out;
  }
  void tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type) {
    tensors_.push_back({name, std::move(ne), type});
  }

  /// The header, padded to the alignment: the data section starts right after it.
  [[nodiscard]] std::string header() const {
    std::string s = "GGUF" + le(version, 4) + le(tensors_.size(), 8) + le(n_kv_, 8) + kvs_;
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const T& t = tensors_[i];
      put_str(s, t.name);
      s += le(t.ne.size(), 4);
      for (const auto d : t.ne) s += le(d, 8);
      s += le(t.type, 4);
      const auto forced = offset_of.find(i);
      s += le(forced != offset_of.end() ? forced->second : i == 0 && force_offset ? *force_offset : offset, 8);
      offset += padded(bytes(t));
    }
    s.resize(padded(s.size()), '\0');
    return s;
  }

  /// Bytes of the data section: every tensor padded to the alignment.
  [[nodiscard]] std::uint64_t data_size() const {
    std::uint64_t n = 0;
    for (const T& t : tensors_) n += padded(bytes(t));
    return n;
  }
  /// Bytes of the tensors themselves.
  [[nodiscard]] std::uint64_t data_size_unpadded() const {
    std::uint64_t n = 0;
    for (const T& t : tensors_) n += bytes(t);
    return n;
  }

 private:
  struct T {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
  };

  static std::string le(std::uint64_t v, int n) {
    std::string s(static_cast<std::size_t>(n), '\0');
    for (int i = 0; i < n; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
    return s;
  }
  static void put(std::string& s, std::uint64_t v, int n) { s += le(v, n); }
  static void put_str(std::string& s, const std::string& v) { s += le(v.size(), 8) + v; }

  [[nodiscard]] std::uint64_t padded(std::uint64_t n) const {
    return (n + alignment - 1) / alignment * alignment;
  }

  /// Bytes of a tensor for the few types the tests use (ggml-common.h); 0 when unknown or
  /// when the row does not fill whole blocks.
  static std::uint64_t bytes(const T& t) {
    std::uint64_t block = 1, size = 0;
    switch (t.type) {
      case 0: size = 4; break;                  // F32
      case 1: size = 2; break;                  // F16
      case 8: block = 32, size = 34; break;     // Q8_0
      case 12: block = 256, size = 144; break;  // Q4_K
      case 14: block = 256, size = 210; break;  // Q6_K
      case 39: block = 32, size = 17; break;    // MXFP4
      default: return 0;
    }
    const std::uint64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % block != 0) return 0;
    std::uint64_t n = row / block * size;
    for (std::size_t i = 1; i < t.ne.size(); ++i) n *= t.ne[i];
    return n;
  }

  std::string kvs_;
  std::uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

/// A llama GGUF's shape and tensor types (ggml type ids), for llama_gguf.
struct LlamaGguf {
  std::string arch = "llama";  ///< general.architecture, and its keys' prefix (gemma reads the same keys)
  std::uint64_t hidden = 64, layers = 2, ff = 128, heads = 4, kv_heads = 2, vocab = 256, rope_dims = 16, ctx = 512;
  std::uint32_t file_type = 7;
  std::string name = "tiny";  ///< general.name; none when empty
  std::string tokenizer = "llama";  ///< tokenizer.ggml.model; none when empty
  bool tokens = true;               ///< tokenizer.ggml.tokens, `vocab` of them
  std::uint32_t type = 8, attn_v = 8, ffn_down = 8, output = 8;  ///< Q8_0 throughout
};

/// A llama GGUF of shape `g`: the metadata llama.cpp needs, `g.vocab` tokens, and (`with_tensors`)
/// every tensor, untied.
inline GgufWriter llama_gguf(const LlamaGguf& g, bool with_tensors = true) {
  GgufWriter w;
  w.kv_str("general.architecture", g.arch);
  if (!g.name.empty()) w.kv_str("general.name", g.name);
  w.kv_u32("general.file_type", g.file_type);
  w.kv_u32(g.arch + ".context_length", static_cast<std::uint32_t>(g.ctx));
  w.kv_u32(g.arch + ".embedding_length", static_cast<std::uint32_t>(g.hidden));
  w.kv_u32(g.arch + ".block_count", static_cast<std::uint32_t>(g.layers));
  w.kv_u32(g.arch + ".feed_forward_length", static_cast<std::uint32_t>(g.ff));
  w.kv_u32(g.arch + ".attention.head_count", static_cast<std::uint32_t>(g.heads));
  w.kv_u32(g.arch + ".attention.head_count_kv", static_cast<std::uint32_t>(g.kv_heads));
  w.kv_u32(g.arch + ".rope.dimension_count", static_cast<std::uint32_t>(g.rope_dims));
  w.kv_f32(g.arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (!g.tokenizer.empty()) w.kv_str("tokenizer.ggml.model", g.tokenizer);
  if (g.tokens) {
    std::vector<std::string> tokens(g.vocab, "tok");
    if (g.vocab > 256)  // a real vocabulary's strings differ
      for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = "token" + std::to_string(i);
    w.kv_strings("tokenizer.ggml.tokens", tokens);
  }
  if (!with_tensors) return w;
  constexpr std::uint32_t F32 = 0;
  const std::uint64_t kv = g.hidden / g.heads * g.kv_heads;
  w.tensor("token_embd.weight", {g.hidden, g.vocab}, g.type);
  for (std::uint64_t i = 0; i < g.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.tensor(b + "attn_norm.weight", {g.hidden}, F32);
    w.tensor(b + "attn_q.weight", {g.hidden, g.hidden}, g.type);
    w.tensor(b + "attn_k.weight", {g.hidden, kv}, g.type);
    w.tensor(b + "attn_v.weight", {g.hidden, kv}, g.attn_v);
    w.tensor(b + "attn_output.weight", {g.hidden, g.hidden}, g.type);
    w.tensor(b + "ffn_norm.weight", {g.hidden}, F32);
    w.tensor(b + "ffn_gate.weight", {g.hidden, g.ff}, g.type);
    w.tensor(b + "ffn_up.weight", {g.hidden, g.ff}, g.type);
    w.tensor(b + "ffn_down.weight", {g.ff, g.hidden}, g.ffn_down);
  }
  w.tensor("output_norm.weight", {g.hidden}, F32);
  w.tensor("output.weight", {g.hidden, g.vocab}, g.output);
  return w;
}

/// A two-layer llama in Q8_0 (general.file_type 7): hidden 64, 4 heads, 2 kv heads, MLP 128,
/// 256 tokens, untied. 106816 parameters; 114432 bytes of tensors.
inline GgufWriter tiny_llama_gguf(bool with_tensors = true) { return llama_gguf(LlamaGguf{}, with_tensors); }

}  // namespace vramfit::test
