// Tests of Linear::params and count_params.
#include <catch2/catch.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/model_spec.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {
Linear make(std::uint64_t in, std::uint64_t out, bool bias = false, std::uint64_t copies = 1) {
  Linear l;
  l.name = "x";
  l.in_features = in;
  l.out_features = out;
  l.bias = bias;
  l.copies = copies;
  return l;
}
}  // namespace

TEST_CASE("model_spec: Linear::params counts weight, bias and copies", "[spec]") {
  CHECK(make(4096, 1024).params() == 4194304);
  CHECK(make(768, 2304, true).params() == 768 * 2304 + 2304);  // GPT-2 c_attn
  CHECK(make(4096, 14336, false, 8).params() == 8ULL * 4096 * 14336);
  CHECK(make(10, 3, true, 4).params() == 4 * 33);
  CHECK(make(0, 5).params() == 0);
}

TEST_CASE("model_spec: Linear::params overflow throws", "[spec]") {
  CHECK_THROWS_AS(make(1ULL << 40, 1ULL << 40).params(), InputError);
  CHECK_THROWS_AS(make(1ULL << 31, 1ULL << 31, false, 1ULL << 10).params(), InputError);
  CHECK_THROWS_AS(make(~0ULL, 1, true).params(), InputError);  // weight + bias overflows
}

TEST_CASE("model_spec: count_params sums every part", "[spec]") {
  ModelSpec s;
  CHECK(count_params(s) == 0);
  s.embedding_params = 1000;
  s.lm_head_params = 200;
  s.final_norm_params = 30;
  LayerGroup a;
  a.count = 3;
  a.linears = {make(10, 10), make(10, 5, true)};  // 100 + 55
  a.norm_params = 20;
  a.other_params = 1;
  LayerGroup b;
  b.count = 2;
  b.moe = true;
  b.linears = {make(4, 4, false, 8)};  // 128
  s.layers = {a, b};
  CHECK(count_params(s) == 1230 + 3 * (155 + 21) + 2 * 128);

  s.layers[1].count = ~0ULL;
  CHECK_THROWS_AS(count_params(s), InputError);
}
