// The one precedence rule for the weights' packing (spec::resolve_packing).
#include <catch2/catch.hpp>

#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/workload.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

ModelSpec tiny(bool quantized) {
  ModelSpec m = from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000})",
                                 "tiny.json");
  if (quantized) m.quantization = *parse_quant("awq-int4");
  return m;
}

}  // namespace

TEST_CASE("packing: --quant, then a packed --dtype, then the checkpoint, then QLoRA's nf4", "[spec][quant]") {
  // --quant wins over the checkpoint's own scheme, and sets the packed dtype with it.
  Workload w;
  CHECK_FALSE(resolve_packing(w, tiny(true), {parse_quant("nf4"), false, true, {"o_proj"}}));
  CHECK(name_of(w.quant) == "nf4");
  CHECK(w.quant.double_quant);
  CHECK(w.quant.skip_modules == std::vector<std::string>{"o_proj"});
  CHECK(w.weights == DType::nf4);

  // A packed --dtype means its default scheme, the checkpoint's notwithstanding.
  Workload d;
  d.weights = DType::int8;
  CHECK_FALSE(resolve_packing(d, tiny(true), {std::nullopt, true, false, {}}));
  CHECK(d.quant.method == QuantMethod::bnb_8bit);
  CHECK(d.weights == DType::int8);

  // A 16-bit --dtype loads the checkpoint unpacked.
  Workload u;
  CHECK_FALSE(resolve_packing(u, tiny(true), {std::nullopt, true, false, {}}));
  CHECK(u.quant.method == QuantMethod::none);
  CHECK(u.weights == DType::bf16);

  // Nothing given: the checkpoint's scheme, said in a note.
  Workload c;
  c.mode = Mode::qlora;
  CHECK(resolve_packing(c, tiny(true), {}) ==
        "the weights are packed as the checkpoint says (awq-int4); --dtype bf16 estimates them unpacked");
  CHECK(c.quant.method == QuantMethod::awq);
  CHECK(c.weights == DType::int4);

  // QLoRA's base is nf4 when nothing else says how it is packed.
  Workload q;
  q.mode = Mode::qlora;
  CHECK_FALSE(resolve_packing(q, tiny(false), {std::nullopt, false, true, {}}));
  CHECK(q.quant.method == QuantMethod::bnb_4bit);
  CHECK(q.quant.double_quant);
  CHECK(q.weights == DType::nf4);

  // 16-bit weights and no scheme: nothing packed.
  Workload n;
  CHECK_FALSE(resolve_packing(n, tiny(false), {}));
  CHECK(n.quant.method == QuantMethod::none);
  CHECK(n.weights == DType::bf16);
}

TEST_CASE("set_packing keeps the dtype and the scheme together", "[spec][quant]") {
  Workload w;
  set_packing(w, *parse_quant("gptq-int4"));
  CHECK(w.weights == DType::int4);
  set_packing(w, *parse_quant("fp8"));
  CHECK(w.weights == DType::fp8);
  CHECK(w.quant.method == QuantMethod::fp8);
}
