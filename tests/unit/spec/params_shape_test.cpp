// Tests of from_param_count: the user's count is kept, the shape is plausible.
#include <cstdint>

#include <catch2/catch.hpp>

#include "vramfit/spec/parse.hpp"

using namespace vramfit::spec;

namespace {
bool has_note(const ModelSpec& s, const std::string& part) {
  for (const auto& n : s.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("params_shape: 7e9 is a Llama-3.1-8B-wide shape of 27 layers", "[spec]") {
  const ModelSpec s = from_param_count(7000000000ULL);
  CHECK(s.params == 7000000000ULL);  // exactly the user's number
  CHECK(s.source == "params");
  CHECK(s.name == "--params 7000000000");
  CHECK(s.family == "llama");
  CHECK(s.model_type == "llama");
  CHECK(s.hidden_size == 4096);
  CHECK(s.num_layers == 27);
  CHECK(s.num_heads == 32);
  CHECK(s.num_kv_heads == 8);
  CHECK(s.head_dim == 128);
  CHECK(s.intermediate_size == 14336);
  CHECK(s.vocab_size == 128256);
  CHECK_FALSE(s.tied_embeddings);
  CHECK(s.gated_mlp);
  CHECK(s.buffer_bytes == 512);
  REQUIRE(s.layers.size() == 1);
  CHECK(s.layers[0].count == 27);
  CHECK(s.layers[0].linears.size() == 7);
  CHECK(s.layers[0].linears[0].name == "q_proj");
  CHECK(count_params(s) == 6939701248ULL);
  CHECK(has_note(s, "assumed a Llama-3-like shape after Llama-3.1-8B (hidden 4096, 27 layer(s)"));
  CHECK(
      has_note(s,
               "that shape has 6939701248 parameters; weights, gradients and optimizer state use your count, "
               "7000000000"));
  CHECK(has_note(s, "--config"));
  CHECK(has_note(s, "--model"));
}

TEST_CASE("params_shape: the shape lands near the count across real sizes", "[spec]") {
  const std::uint64_t sizes[] = {135000000ULL,   360000000ULL,   1000000000ULL,  1500000000ULL,
                                 3000000000ULL,  8000000000ULL,  13000000000ULL, 33000000000ULL,
                                 70000000000ULL, 405000000000ULL};
  for (std::uint64_t p : sizes) {
    INFO(p);
    const ModelSpec s = from_param_count(p);
    CHECK(s.params == p);
    const double ratio = static_cast<double>(count_params(s)) / static_cast<double>(p);
    CHECK(ratio > 0.85);
    CHECK(ratio < 1.15);
  }
  CHECK(from_param_count(70000000000ULL).hidden_size == 8192);
  CHECK(from_param_count(405000000000ULL).hidden_size == 16384);
  CHECK(from_param_count(1000000000ULL).head_dim == 64);
  CHECK(from_param_count(13000000000ULL).hidden_size == 5120);
}

TEST_CASE("params_shape: tiny and huge counts work without overflow", "[spec]") {
  const ModelSpec tiny = from_param_count(1000);
  CHECK(tiny.params == 1000);
  CHECK(tiny.num_layers == 1);
  CHECK(tiny.hidden_size == 64);
  CHECK(has_note(tiny, "no decoder is this small"));

  const ModelSpec huge = from_param_count(1000000000000000ULL);
  CHECK(huge.params == 1000000000000000ULL);
  CHECK(huge.hidden_size == 16384);
  CHECK(huge.num_layers == 504);
  CHECK(has_note(huge, "no real model is this large: the shape is capped at 504 layers"));

  // Every power of ten in between gives a positive, finite shape.
  for (std::uint64_t p = 1000; p <= 1000000000000000ULL; p *= 10) {
    INFO(p);
    const ModelSpec s = from_param_count(p);
    CHECK(s.params == p);
    CHECK(s.num_layers >= 1);
    CHECK(count_params(s) > 0);
  }
}
