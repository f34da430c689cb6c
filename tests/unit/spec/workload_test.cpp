// Tests of workload spellings and validate().
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/workload.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

const ModelSpec& llama() {
  static const ModelSpec m = from_config_text(
      R"({"model_type":"llama","hidden_size":256,"intermediate_size":688,"num_hidden_layers":2,
          "num_attention_heads":8,"num_key_value_heads":2,"vocab_size":1000})",
      "config.json");
  return m;
}

std::vector<Diagnostic> check(const Workload& w, const ModelSpec& m = llama()) {
  Diagnostics d;
  validate(w, m, d);
  return d.items();
}

}  // namespace

TEST_CASE("workload: names round-trip", "[spec]") {
  for (Mode m : {Mode::inference, Mode::generate, Mode::train, Mode::lora, Mode::qlora})
    CHECK(parse_mode(name_of(m)) == m);
  for (Optimizer o :
       {Optimizer::adamw, Optimizer::adamw_fused, Optimizer::adamw_forloop, Optimizer::adam, Optimizer::sgd,
        Optimizer::sgd_momentum, Optimizer::adafactor, Optimizer::adamw_8bit, Optimizer::lion})
    CHECK(parse_optimizer(name_of(o)) == o);
  for (Attention a : {Attention::sdpa, Attention::eager}) CHECK(parse_attention(name_of(a)) == a);
  for (Sharding s : {Sharding::none, Sharding::ddp, Sharding::zero1, Sharding::zero2, Sharding::zero3,
                     Sharding::fsdp, Sharding::tp, Sharding::device_map})
    CHECK(parse_sharding(name_of(s)) == s);
}

TEST_CASE("workload: exact spellings", "[spec]") {
  CHECK(name_of(Mode::inference) == "inference");
  CHECK(name_of(Mode::qlora) == "qlora");
  CHECK(name_of(Optimizer::adamw_fused) == "adamw-fused");
  CHECK(name_of(Optimizer::adamw_forloop) == "adamw-forloop");
  CHECK(name_of(Optimizer::sgd_momentum) == "sgd-momentum");
  CHECK(name_of(Optimizer::adamw_8bit) == "adamw-8bit");
  CHECK(name_of(Sharding::device_map) == "device-map");
  CHECK(name_of(Attention::eager) == "eager");
  CHECK(parse_mode("forward") == Mode::inference);
  CHECK(parse_optimizer("adamw_fused") == Optimizer::adamw_fused);
  CHECK(parse_optimizer("AdamW") == Optimizer::adamw);
  CHECK(parse_sharding("device_map") == Sharding::device_map);
  CHECK_FALSE(parse_mode("training"));
  CHECK_FALSE(parse_optimizer("adagrad"));
  CHECK_FALSE(parse_attention("flash"));
  CHECK_FALSE(parse_sharding("zero4"));
  CHECK_FALSE(parse_mode(""));
}

TEST_CASE("workload: the default workload is valid", "[spec]") {
  CHECK(check(Workload{}).empty());
  Workload t;
  t.mode = Mode::train;
  t.gpus = 8;
  t.sharding = Sharding::zero3;
  CHECK(check(t).empty());
}

TEST_CASE("workload: sizes", "[spec]") {
  Workload w;
  w.batch = 0;
  w.seq = 0;
  w.grad_accum = 0;
  auto d = check(w);
  REQUIRE(d.size() == 3);
  CHECK(d[0].str() == "--batch: must be at least 1, got 0 (use --batch 1 or more)");
  CHECK(d[1].str() == "--seq: must be at least 1 token, got 0 (use --seq 1 or more (e.g. 2048))");
  CHECK(d[2].str() == "--grad-accum: must be at least 1, got 0 (use --grad-accum 1 or more)");

  Workload l;
  l.seq = (1ULL << 31) + 1;
  d = check(l);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "--seq");
  CHECK(d[0].problem == "2147483649 tokens is beyond what vramfit models (at most 2^31 = 2147483648)");
  l.seq = 1ULL << 31;
  CHECK(check(l).empty());
}

TEST_CASE("workload: generate needs new tokens", "[spec]") {
  Workload w;
  w.mode = Mode::generate;
  auto d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "--new-tokens: generate needs at least 1 new token, got 0 (set --new-tokens (e.g. "
        "--new-tokens 256))");
  w.new_tokens = 128;
  CHECK(check(w).empty());
  w.seq = 1ULL << 31;
  d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "--new-tokens");
}

TEST_CASE("workload: LoRA settings", "[spec]") {
  Workload w;
  w.mode = Mode::lora;
  CHECK(check(w).empty());
  w.lora.rank = 0;
  w.lora.dropout = 1.0;
  auto d = check(w);
  REQUIRE(d.size() == 2);
  CHECK(d[0].str() == "--lora-rank: must be at least 1, got 0 (use a rank like 8, 16 or 64)");
  CHECK(d[1].str() == "--lora-dropout: must be in [0, 1), got 1 (use 0, 0.05 or 0.1)");
  w.lora.rank = 512;
  w.lora.dropout = -0.1;
  d = check(w);
  REQUIRE(d.size() == 2);
  CHECK(d[0].problem == "512 is more than the model's hidden size 256");
  CHECK(d[1].field == "--lora-dropout");
  w.lora.rank = 256;
  w.lora.dropout = 0.05;
  CHECK(check(w).empty());
  // Settings of LoRA are not checked when the mode is not LoRA.
  w.mode = Mode::train;
  w.lora.rank = 0;
  CHECK(check(w).empty());
}

TEST_CASE("workload: LoRA targets must be linear modules of the model", "[spec]") {
  Workload w;
  w.mode = Mode::lora;
  w.lora.all_linear = false;
  w.lora.targets = {"q_proj", "v_proj"};
  CHECK(check(w).empty());
  w.lora.targets = {"self_attn.q_proj", "model.layers.0.mlp.down_proj", "all-linear"};
  CHECK(check(w).empty());

  w.lora.targets = {"qproj", "attention"};
  auto d = check(w);
  REQUIRE(d.size() == 2);
  CHECK(d[0].str() ==
        "--lora-targets: 'qproj' is not a linear module of this model (did you mean 'q_proj'? "
        "modules: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
  CHECK(d[1].str() ==
        "--lora-targets: 'attention' is not a linear module of this model (modules: q_proj, k_proj, "
        "v_proj, o_proj, gate_proj, up_proj, down_proj)");

  w.lora.targets = {};
  d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "no modules given");

  // GPT-2's Conv1D names, each listed once.
  const ModelSpec g = from_config_text(
      R"({"model_type":"gpt2","n_embd":64,"n_layer":1,"n_head":4,"vocab_size":100,"n_positions":2048})", "gpt2.json");
  w.lora.targets = {"c_attn"};
  CHECK(check(w, g).empty());
  w.lora.targets = {"mlp"};
  d = check(w, g);
  REQUIRE(d.size() == 1);
  CHECK(d[0].fix == "modules: c_attn, c_proj, c_fc");
}

TEST_CASE("workload: GPUs and sharding", "[spec]") {
  Workload w;
  w.gpus = 0;
  auto d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() == "--gpus: must be at least 1, got 0 (use --gpus 1 or more)");
  w.gpus = 4097;
  w.sharding = Sharding::ddp;
  d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "--gpus");
  CHECK(d[0].problem == "4097 GPUs is more than vramfit models (at most 4096)");
  w.gpus = 4096;
  CHECK(check(w).empty());

  w.gpus = 1;
  w.sharding = Sharding::zero3;
  d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "--gpus: --sharding zero3 needs at least 2 GPUs, got 1 (set --gpus 2 or more, or drop "
        "--sharding)");
  w.gpus = 4;
  w.sharding = Sharding::none;
  d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "--sharding: 4 GPUs but no sharding strategy (say how the model is split: --sharding "
        "ddp|zero1|zero2|zero3|fsdp|fsdp-grad-op|tp|pp|device-map)");
}

TEST_CASE("workload: dtypes and modes", "[spec]") {
  Workload w;
  w.autocast = DType::fp32;
  auto d = check(w);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() == "--autocast: fp32 is not an autocast dtype (use --autocast bf16 or --autocast fp16)");
  w.autocast = DType::bf16;
  CHECK(check(w).empty());
  w.autocast = DType::fp16;
  CHECK(check(w).empty());
  w.autocast = DType::int8;
  CHECK(check(w).size() == 1);

  Workload q;
  q.mode = Mode::qlora;
  d = check(q);  // bf16 weights
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "--dtype: qlora needs 4-bit weights, got bf16 (use --dtype nf4 (the default for --mode "
        "qlora) or int4, or --mode lora)");
  q.weights = DType::nf4;
  CHECK(check(q).empty());
  q.weights = DType::int4;
  CHECK(check(q).empty());

  for (DType t : {DType::fp8, DType::int8, DType::int4, DType::nf4}) {
    INFO(name_of(t));
    Workload f;
    f.mode = Mode::train;
    f.weights = t;
    d = check(f);
    REQUIRE(d.size() == 1);
    CHECK(d[0].str() ==
          "--dtype: full fine-tuning of quantized weights is not supported (use --mode qlora or lora)");
  }
  Workload l;
  l.mode = Mode::lora;
  l.weights = DType::int8;
  CHECK(check(l).empty());
}

TEST_CASE("workload: a learned position table bounds the sequence, rotary models run past their length", "[spec]") {
  // GPT-2's wpe has n_positions rows (1024 when the config omits it): nn.Embedding raises
  // IndexError past them, so the job is refused, not estimated.
  const ModelSpec g = from_config_text(
      R"({"model_type":"gpt2","n_embd":64,"n_layer":1,"n_head":4,"vocab_size":100})", "gpt2.json");
  REQUIRE(g.max_positions == 1024);
  Workload w;
  w.seq = 1024;
  CHECK(check(w, g).empty());
  w.seq = 1025;
  auto d = check(w, g);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "--seq: 1025 positions is more than the 1024 of this model's learned position table (transformers fails "
        "with IndexError: index out of range) (use --seq 1024 or less)");
  // generate() feeds seq + new_tokens - 1 positions: 1000 + 25 fits, 1000 + 26 does not.
  w.mode = Mode::generate;
  w.seq = 1000;
  w.new_tokens = 25;
  CHECK(check(w, g).empty());
  w.new_tokens = 26;
  d = check(w, g);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "--new-tokens");
  CHECK(d[0].fix == "keep --seq + --new-tokens at most 1025");
  // Packed rows restart their positions per sequence: a 4096-token row is allowed.
  w = Workload{};
  w.mode = Mode::train;
  w.seq = 4096;
  w.sequence_packing = true;
  CHECK(check(w, g).empty());
  // Llama's rotary positions have no table: 1M tokens past max_position_embeddings is estimated.
  w = Workload{};
  w.seq = 1 << 20;
  CHECK(check(w).empty());
}

TEST_CASE("workload: without --dtype the weights take the dtype the config declares (transformers 5's dtype=auto)", "[spec]") {
  const auto spec_with = [](const std::string& extra) {
    return from_config_text(R"({"model_type":"llama","hidden_size":256,"intermediate_size":688,"num_hidden_layers":2,
        "num_attention_heads":8,"vocab_size":1000)" + extra + "}", "config.json");
  };
  const ModelSpec f32 = spec_with(R"(,"torch_dtype":"float32")");
  REQUIRE(f32.stored_dtype == DType::fp32);
  // transformers 5 writes `dtype`; it wins over an older `torch_dtype` key.
  CHECK(spec_with(R"(,"dtype":"float16","torch_dtype":"float32")").stored_dtype == DType::fp16);
  CHECK(spec_with(R"(,"text_config":{"torch_dtype":"bfloat16"})").stored_dtype == DType::bf16);
  // A value vramfit does not model leaves the default.
  CHECK_FALSE(spec_with(R"(,"torch_dtype":"float64")").stored_dtype.has_value());
  CHECK_FALSE(spec_with(R"(,"torch_dtype":7)").stored_dtype.has_value());

  Workload w;  // bf16 by default
  auto note = resolve_packing(w, f32, {std::nullopt, false, false, {}});
  CHECK(w.weights == DType::fp32);
  REQUIRE(note.has_value());
  CHECK(*note ==
        "weights in fp32, the dtype config.json declares: transformers 5 loads a checkpoint in its own dtype unless "
        "from_pretrained() is given one; --dtype bf16 estimates them in bf16");
  // --dtype given: it stands, no note.
  w = Workload{};
  CHECK_FALSE(resolve_packing(w, f32, {std::nullopt, true, false, {}}).has_value());
  CHECK(w.weights == DType::bf16);
  // QLoRA packs the base weights in nf4 whatever the config declares.
  w = Workload{};
  w.mode = Mode::qlora;
  (void)resolve_packing(w, f32, {std::nullopt, false, false, {}});
  CHECK(w.weights == DType::nf4);
}
