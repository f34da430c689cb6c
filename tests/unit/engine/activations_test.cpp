// engine/activations.cpp: what one decoder layer saves for backward and creates in a forward,
// with exact bytes per token for a small Llama (hidden 256, 4 heads of 64, 2 KV heads, gated
// MLP 512, RMSNorm, rotary, no dropout). Each figure is summed term by term from the rules in
// activations.cpp's comments.
#include <catch2/catch.hpp>

#include "../../../src/engine/activations.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::engine::detail;

namespace {

spec::ModelSpec tiny() {
  return spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
      "tie_word_embeddings": false})",
                                "tiny.json");
}

spec::Workload with(spec::Mode mode, DType weights) {
  spec::Workload w;
  w.mode = mode;
  w.weights = weights;
  return w;
}

}  // namespace

TEST_CASE("precision_of: storage, compute and residual bytes", "[engine][activations]") {
  const Precision bf16 = precision_of(with(spec::Mode::train, DType::bf16));
  CHECK((bf16.param == 2 && bf16.compute == 2 && bf16.residual == 2 && !bf16.autocast && !bf16.quantized));
  const Precision fp32 = precision_of(with(spec::Mode::train, DType::fp32));
  CHECK((fp32.param == 4 && fp32.compute == 4 && fp32.residual == 4 && !fp32.autocast));
  auto amp = with(spec::Mode::train, DType::fp32);
  amp.autocast = DType::bf16;
  const Precision mixed = precision_of(amp);
  CHECK((mixed.param == 4 && mixed.compute == 2 && mixed.residual == 4 && mixed.autocast));
  const Precision nf4 = precision_of(with(spec::Mode::qlora, DType::nf4));
  CHECK((nf4.param == 2 && nf4.compute == 2 && nf4.residual == 2 && nf4.quantized));
}

TEST_CASE("layer_saved: bf16 full training with SDPA", "[engine][activations]") {
  const auto m = tiny();
  const auto w = with(spec::Mode::train, DType::bf16);
  const LayerSaved s = layer_saved(m, m.layers.front(), w, precision_of(w));
  // attention norm: fp32 copy 256x4 + normalised 256x2 = 1536; q/k/v share their input: 512;
  // SDPA: rotary q and k (256+128)x2 + v 128x2 = 1024; output 256x2 + fp32 logsumexp 4x4 = 528;
  // MLP norm 1536; gate/up input 512; silu(gate), up, product 3x512x2 = 3072; down's input 1024.
  CHECK(s.per_token == 1536 + 512 + 1024 + 528 + 1536 + 512 + 3072 + 1024);
  CHECK(s.per_token_position == 0);
  CHECK(s.fixed == 0);
}

TEST_CASE("layer_saved: fp32 weights under bf16 autocast", "[engine][activations]") {
  const auto m = tiny();
  auto w = with(spec::Mode::train, DType::fp32);
  w.autocast = DType::bf16;
  const LayerSaved s = layer_saved(m, m.layers.front(), w, precision_of(w));
  // norms in fp32: 256x4 + 256x4 = 2048 each; q, k and v each save a 16-bit cast of the fp32
  // input: 3 x 512 (gate, up: 2 x 512); SDPA 1024 + 528; MLP 3072 + 1024.
  CHECK(s.per_token == 2048 + 1536 + 1024 + 528 + 2048 + 1024 + 3072 + 1024);
  // autocast's cached 16-bit weights: q 65536 + k 32768 + v 32768 + o 65536 + 3 x 131072.
  CHECK(s.fixed == 589824ULL * 2);
}

TEST_CASE("layer_saved: LoRA on every linear of a frozen bf16 base", "[engine][activations]") {
  const auto m = tiny();
  const auto w = with(spec::Mode::lora, DType::bf16);
  const LayerSaved s = layer_saved(m, m.layers.front(), w, precision_of(w));
  // norms keep only the fp32 copy (frozen weight): 1024 each; each adapter saves peft's fp32
  // cast of its input: q, k, v 3 x 1024, o 1024, gate/up 2 x 1024, down 512 x 4 = 2048; SDPA
  // 1024 + 528; silu(gate), up, product 3072.
  CHECK(s.per_token == 1024 + 3072 + 1024 + 528 + 1024 + 1024 + 2048 + 3072 + 2048);
  CHECK(s.fixed == 0);
  // Adapters on q_proj only: o, gate, up and down save nothing, k and v nothing.
  auto q = w;
  q.lora.all_linear = false;
  q.lora.targets = {"q_proj"};
  CHECK(layer_saved(m, m.layers.front(), q, precision_of(q)).per_token == 1024 + 1024 + 1024 + 528 + 1024 + 3072);
}

TEST_CASE("head_saved, inference peaks and backward transients", "[engine][activations]") {
  const auto m = tiny();
  const auto train = with(spec::Mode::train, DType::bf16);
  // final norm 1536 + lm_head's input 256x2.
  CHECK(head_saved(m, train, precision_of(train)).per_token == 1536 + 512);
  auto amp = with(spec::Mode::train, DType::fp32);
  amp.autocast = DType::bf16;
  const LayerSaved h = head_saved(m, amp, precision_of(amp));
  CHECK(h.per_token == 2048 + 512);
  CHECK(h.fixed == 32000ULL * 256 * 2);  // autocast's 16-bit copy of lm_head

  auto inf = with(spec::Mode::inference, DType::bf16);
  InferencePeak p = inference_layer_peak(m, m.layers.front(), inf, precision_of(inf));
  CHECK(p.mlp_per_token == 3 * 512 * 2 + 4 * 256 * 2);
  CHECK(p.attn_per_token == 0);
  CHECK(p.attn_per_token_position == 0);
  inf.attention = spec::Attention::eager;
  p = inference_layer_peak(m, m.layers.front(), inf, precision_of(inf));
  CHECK(p.attn_per_token_position == 4 * 10 + 2);
  CHECK(p.attn_per_token == (6 * 256 + 2 * 128) * 2);

  CHECK(backward_layer_transient(m, m.layers.front(), train, precision_of(train)) == (3 * 512 + 2 * 256) * 2);
}

TEST_CASE("lora_targets follows peft's matching", "[engine][activations]") {
  const auto m = tiny();
  auto w = with(spec::Mode::lora, DType::bf16);
  w.lora.all_linear = false;
  w.lora.targets = {"q_proj", "self_attn.v_proj"};
  std::vector<std::string> adapted;
  for (const auto& l : m.layers.front().linears)
    if (lora_targets(w, l)) adapted.push_back(l.name);
  CHECK(adapted == std::vector<std::string>{"q_proj", "v_proj"});
  w.mode = spec::Mode::train;  // no adapters outside the peft modes
  for (const auto& l : m.layers.front().linears) CHECK_FALSE(lora_targets(w, l));
}
