#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/quant.hpp"

using namespace vramfit;
using spec::QuantMethod;

namespace {

spec::Quantization from(const char* text) { return spec::quant_from_config(nlohmann::json::parse(text), "config.json"); }

// The single diagnostic of an InputError thrown by `f`, as "field: problem -> fix".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    const auto& d = e.diagnostics()[0];
    return d.field + ": " + d.problem + " -> " + d.fix;
  }
  FAIL("no InputError");
  return {};
}

}  // namespace

TEST_CASE("every --quant name parses back to itself", "[quant]") {
  for (const auto& name : spec::quant_names()) {
    const auto q = spec::parse_quant(name);
    REQUIRE(q.has_value());
    CHECK(spec::name_of(*q) == name);
  }
  CHECK(spec::parse_quant("Q4_K_M")->gguf_type == "Q4_K_M");
  CHECK(spec::parse_quant("GPTQ-INT3")->bits == 3);
  CHECK_FALSE(spec::parse_quant("q4_k_x").has_value());
  CHECK_FALSE(spec::parse_quant("gptq-int5").has_value());
  CHECK_FALSE(spec::parse_quant("").has_value());
}

TEST_CASE("packed dtypes of --dtype imply a scheme and back", "[quant]") {
  CHECK(spec::default_quantization(DType::nf4).method == QuantMethod::bnb_4bit);
  CHECK(spec::default_quantization(DType::int8).method == QuantMethod::bnb_8bit);
  CHECK(spec::default_quantization(DType::int4).method == QuantMethod::gptq);
  CHECK(spec::default_quantization(DType::int4).group_size == 128);
  CHECK(spec::default_quantization(DType::fp8).method == QuantMethod::fp8);
  CHECK(spec::default_quantization(DType::bf16).method == QuantMethod::none);
  for (const DType d : {DType::nf4, DType::int8, DType::int4, DType::fp8})
    CHECK(spec::packed_dtype(spec::default_quantization(d)) == d);
  CHECK(spec::packed_dtype(*spec::parse_quant("q8_0")) == DType::int8);
  CHECK(spec::packed_dtype(*spec::parse_quant("q4_k_m")) == DType::int4);
  CHECK(spec::packed_dtype(*spec::parse_quant("mxfp4")) == DType::int4);
}

TEST_CASE("quantization_config: bitsandbytes 4-bit and 8-bit", "[quant]") {
  // As published by unsloth/llama-3-8b-bnb-4bit (transformers' BitsAndBytesConfig.to_dict()).
  const auto q = from(R"({"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": false,
      "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16",
      "llm_int8_skip_modules": null, "llm_int8_threshold": 6.0})");
  CHECK(q.method == QuantMethod::bnb_4bit);
  CHECK(q.double_quant);
  CHECK_FALSE(q.fp4);
  CHECK(q.compute_dtype == DType::bf16);
  CHECK(spec::name_of(q) == "nf4");

  // transformers < 4.35 wrote no quant_method.
  const auto e = from(R"({"load_in_8bit": true, "llm_int8_skip_modules": ["lm_head", "mlp.down_proj"]})");
  CHECK(e.method == QuantMethod::bnb_8bit);
  CHECK(e.skip_modules == std::vector<std::string>{"lm_head", "mlp.down_proj"});
  CHECK(spec::name_of(from(R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
      "bnb_4bit_quant_type": "fp4"})")) == "fp4");
}

TEST_CASE("quantization_config: GPTQ, AWQ, fp8, mxfp4, compressed-tensors", "[quant]") {
  const auto g = from(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true})");
  CHECK((g.method == QuantMethod::gptq && g.bits == 4 && g.group_size == 128));
  CHECK(from(R"({"quant_method": "gptq", "bits": 8, "group_size": -1})").group_size == 0);
  const auto a = from(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
      "version": "gemm", "modules_to_not_convert": ["gate"]})");
  CHECK((a.method == QuantMethod::awq && a.group_size == 64 && a.skip_modules.size() == 1));
  // DeepSeek-V3's config.json.
  const auto f = from(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
      "weight_block_size": [128, 128]})");
  CHECK((f.method == QuantMethod::fp8 && f.fp8_block_rows == 128 && f.fp8_block_cols == 128));
  CHECK(spec::name_of(f) == "fp8-block");
  CHECK(from(R"({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]})").method ==
        QuantMethod::mxfp4);
  // llm-compressor: FP8 per channel (Meta-Llama-3.1-8B-Instruct-FP8 style) and W4A16 groups.
  const auto c = from(R"({"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups":
      {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})");
  CHECK(spec::name_of(c) == "fp8-channel");
  const auto w4 = from(R"({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights":
      {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}})");
  CHECK((w4.method == QuantMethod::gptq && w4.bits == 4 && w4.group_size == 128));
}

TEST_CASE("quantization_config: every bad field is named with the way out", "[quant]") {
  const std::string fix =
      "remove quantization_config from a copy of config.json and describe the weights with --quant (see "
      "'vramfit estimate --help')";
  CHECK(error_of([] { from(R"({"quant_method": "hqq"})"); }) ==
        "config.json: quantization_config.quant_method: 'hqq' is not modelled (bitsandbytes, gptq, awq, fp8, "
        "mxfp4 and compressed-tensors are) -> " + fix);
  CHECK(error_of([] { from(R"({"bits": 4})"); }) == "config.json: quantization_config.quant_method: missing -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "gptq", "bits": "4"})"); }) ==
        "config.json: quantization_config.bits: expected a whole number -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "gptq", "bits": 5})"); }) ==
        "config.json: quantization_config.bits: 5 bits is not a size this method stores -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "gptq", "group_size": -7})"); }) ==
        "config.json: quantization_config.group_size: -7 is not a group size -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": true})"); }) ==
        "config.json: quantization_config: bitsandbytes needs exactly one of load_in_4bit and load_in_8bit set to "
        "true -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "bitsandbytes", "load_in_4bit": "yes"})"); }) ==
        "config.json: quantization_config.load_in_4bit: expected true or false -> " + fix);
  CHECK(error_of([] { from(R"({"quant_method": "fp8", "weight_block_size": [128]})"); }) ==
        "config.json: quantization_config.weight_block_size: expected two positive whole numbers, e.g. [128, 128] "
        "-> " + fix);
  CHECK(error_of([] { from(R"([1, 2])"); }) == "config.json: quantization_config: expected a JSON object -> " + fix);
}

TEST_CASE("a config.json's quantization_config reaches the spec", "[quant]") {
  const auto m = spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
      "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}})",
                                        "awq.json");
  REQUIRE(m.quantization.has_value());
  CHECK(spec::name_of(*m.quantization) == "awq-int4");
  CHECK(error_of([] {
          spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
              "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
              "quantization_config": {"quant_method": "eetq"}})",
                                 "eetq.json");
        }).rfind("eetq.json: quantization_config.quant_method: 'eetq' is not modelled", 0) == 0);
}

TEST_CASE("same storage: the name is not enough", "[quant]") {
  auto a = *spec::parse_quant("gptq-int4");
  auto b = a;
  CHECK(spec::same_storage(a, b));
  b.group_size = 32;  // same name "gptq-int4", other bytes
  CHECK_FALSE(spec::same_storage(a, b));
  auto file = spec::Quantization{};  // a GGUF file's type as spec_from_gguf sets it
  file.method = QuantMethod::gguf;
  file.gguf_type = "Q4_K_M";
  CHECK(spec::same_storage(file, *spec::parse_quant("q4_k_m")));
  CHECK_FALSE(spec::same_storage(file, *spec::parse_quant("q5_k_m")));
}
