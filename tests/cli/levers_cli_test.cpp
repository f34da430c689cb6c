// The training levers' flags (--loss, --fsdp-mixed-precision) through the CLI: values,
// where they apply, and what they change.
#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using namespace vramfit::test;

namespace {
const std::vector<std::string> kModel{"--model", "smollm2-135m"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> a = kModel;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

nlohmann::json json_of(const CliResult& r) {
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

std::uint64_t peak(const nlohmann::json& j) { return j["peak_allocated_bytes"].get<std::uint64_t>(); }
}  // namespace

TEST_CASE("levers CLI: the loss is hf, chunked, fused-linear or cce, training only", "[cli][levers]") {
  const auto hf = json_of(estimate(with({"--mode", "lora", "--seq", "4096", "--json"})));
  const auto ch = json_of(estimate(with({"--mode", "lora", "--seq", "4096", "--loss", "chunked", "--json"})));
  const auto fl = json_of(estimate(with({"--mode", "lora", "--seq", "4096", "--loss", "liger", "--json"})));
  const auto cce = json_of(estimate(with({"--mode", "lora", "--seq", "4096", "--loss", "cce", "--json"})));
  CHECK(hf["workload"]["loss"] == "hf");
  CHECK(ch["workload"]["loss"] == "chunked");
  CHECK(fl["workload"]["loss"] == "fused-linear");  // liger is an alias
  CHECK(cce["workload"]["loss"] == "cce");
  CHECK(peak(hf) > peak(ch));
  CHECK(peak(ch) > peak(fl));
  // Neither fused loss builds the full logits: Liger's chunks here are 64 rows (its chunk size for
  // 4096 tokens of a 49152 vocabulary over 576 wide), cce's none, both far below a layer's forward,
  // where the peak of both is.
  for (const auto* j : {&fl, &cce}) {
    CHECK((*j)["peak_phase"] == "forward_layer");
    for (const auto& c : (*j)["components"])
      if (c["id"] == "logits") CHECK(c["bytes"] == 0);
  }
  CHECK(peak(fl) == peak(cce));
  CHECK(json_of(estimate(with({"--json"})))["workload"]["loss"].is_null());

  require_usage_error(estimate(with({"--loss", "chunked"})),
                      "vramfit: error: --loss: does not apply to --mode inference (it is used by --mode train, lora "
                      "and qlora; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "train", "--loss", "chunk"})),
                      "vramfit: error: --loss: unknown loss 'chunk' (did you mean 'chunked'? one of hf, chunked, "
                      "fused-linear, cce, unsloth)\n");
}

TEST_CASE("levers CLI: FSDP mixed precision over fp32 weights only", "[cli][levers]") {
  const auto mp = json_of(estimate(with({"--mode", "train", "--dtype", "fp32", "--gpus", "4", "--sharding", "fsdp",
                                         "--fsdp-mixed-precision", "bf16", "--json"})));
  const auto ac = json_of(estimate(with({"--mode", "train", "--dtype", "fp32", "--gpus", "4", "--sharding", "fsdp",
                                         "--autocast", "bf16", "--json"})));
  CHECK(mp["workload"]["fsdp_mixed_precision"] == "bf16");
  CHECK(peak(mp) < peak(ac));

  require_usage_error(estimate(with({"--mode", "train", "--dtype", "fp32", "--fsdp-mixed-precision", "bf16"})),
                      "vramfit: error: --fsdp-mixed-precision: needs FSDP, got --sharding none (add --sharding fsdp "
                      "(or fsdp-grad-op), or use --autocast bf16 without FSDP)\n");
  require_usage_error(estimate(with({"--mode", "train", "--gpus", "2", "--sharding", "fsdp",
                                     "--fsdp-mixed-precision", "bf16"})),
                      "vramfit: error: --fsdp-mixed-precision: gathers 16-bit copies of fp32 weights, got --dtype "
                      "bf16 (use --dtype fp32 (the sharded fp32 masters), or drop --fsdp-mixed-precision for 16-bit "
                      "weights)\n");
  require_usage_error(estimate(with({"--mode", "train", "--fsdp-mixed-precision", "fp32"})),
                      "vramfit: error: --fsdp-mixed-precision: unknown param dtype 'fp32' (did you mean 'fp16'? one of bf16, fp16)\n");
  require_usage_error(estimate(with({"--fsdp-mixed-precision", "bf16"})),
                      "vramfit: error: --fsdp-mixed-precision: does not apply to --mode inference (it is used by "
                      "--mode train and lora; drop it or change --mode)\n");
}

TEST_CASE("levers CLI: checkpointing kinds, activation offload, optimizer in backward", "[cli][levers]") {
  const auto full = json_of(estimate(with({"--mode", "train", "--checkpointing", "--batch", "1", "--json"})));
  CHECK(full["workload"]["checkpointing"] == true);
  CHECK(full["workload"]["checkpointing_kind"] == "full");
  CHECK(full["workload"]["batch"] == 1);
  const auto e2 = json_of(estimate(with({"--mode", "train", "--checkpointing", "every-2", "--json"})));
  CHECK(e2["workload"]["checkpointing_kind"] == "every-2");
  const auto sel = json_of(estimate(with({"--mode", "train", "--checkpointing=selective", "--json"})));
  CHECK(sel["workload"]["checkpointing_kind"] == "selective");
  const auto none = json_of(estimate(with({"--mode", "train", "--json"})));
  CHECK(none["workload"]["checkpointing_kind"].is_null());
  CHECK(peak(full) < peak(e2));
  CHECK(peak(e2) < peak(none));
  CHECK(peak(sel) < peak(none));
  const auto off = json_of(estimate(with({"--mode", "lora", "--activation-offload", "--json"})));
  CHECK(off["workload"]["activation_offload"] == true);
  // At 128 tokens the gradients decide the peak: one at a time is less.
  const auto ib = json_of(estimate(with({"--mode", "train", "--seq", "128", "--optimizer-in-backward", "--json"})));
  CHECK(ib["workload"]["optimizer_in_backward"] == true);
  CHECK(peak(ib) < peak(json_of(estimate(with({"--mode", "train", "--seq", "128", "--json"})))));

  require_usage_error(estimate(with({"--mode", "train", "--checkpointing", "every-0"})),
                      "vramfit: error: --checkpointing: 'every-0' is not every-N with N a positive whole number "
                      "(give full, selective or every-N (N a whole number >= 1), e.g. --checkpointing every-2)\n");
  require_usage_error(estimate(with({"--mode", "train", "--checkpointing", "partial"})),
                      "vramfit: error: --checkpointing: unknown checkpointing 'partial' (give full, selective or "
                      "every-N (N a whole number >= 1), e.g. --checkpointing every-2)\n");
  require_usage_error(estimate(with({"--activation-offload"})),
                      "vramfit: error: --activation-offload: does not apply to --mode inference (it is used by "
                      "--mode train, lora and qlora; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "train", "--optimizer-in-backward", "--grad-accum", "4"})),
                      "vramfit: error: --optimizer-in-backward: steps at every backward, so --grad-accum 4 cannot "
                      "accumulate (drop --grad-accum or --optimizer-in-backward (torchtune refuses the pair too))\n");
}

TEST_CASE("levers CLI: --packing is training only and costs the packed rows' mask", "[cli][levers]") {
  // One packed row of 4096 tokens against the same row unpacked: SDPA gets a (1, 1, 4096, 4096)
  // boolean mask and each of smollm2-135m's 30 layers saves its bf16 additive copy.
  const auto plain = json_of(estimate(with({"--mode", "lora", "--batch", "1", "--seq", "4096", "--json"})));
  const auto packed =
      json_of(estimate(with({"--mode", "lora", "--batch", "1", "--seq", "4096", "--packing", "--json"})));
  CHECK(plain["workload"]["sequence_packing"] == false);
  CHECK(packed["workload"]["sequence_packing"] == true);
  CHECK(peak(packed) > peak(plain) + 30ull * 4096 * 4096 * 2);
  require_usage_error(estimate(with({"--packing"})),
                      "vramfit: error: --packing: does not apply to --mode inference (it is used by --mode train, "
                      "lora and qlora; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "generate", "--new-tokens", "8", "--packing"})),
                      "vramfit: error: --packing: does not apply to --mode generate (it is used by --mode train, "
                      "lora and qlora; drop it or change --mode)\n");
}

TEST_CASE("levers CLI: a recipe sets its stack's default levers, typed flags win", "[cli][levers]") {
  const auto tt = json_of(estimate(with({"--mode", "train", "--recipe", "torchtune", "--json"})));
  CHECK(tt["workload"]["checkpointing_kind"] == "full");
  CHECK(tt["workload"]["loss"] == "chunked");
  CHECK(tt["workload"]["optimizer"] == "paged-adamw-8bit");
  CHECK(tt["workload"]["optimizer_in_backward"] == true);
  const auto ttl = json_of(estimate(with({"--mode", "lora", "--recipe", "torchtune", "--json"})));
  CHECK(ttl["workload"]["loss"] == "fused-linear");
  CHECK(ttl["workload"]["optimizer"] == "adamw-fused");
  CHECK(ttl["workload"]["optimizer_in_backward"] == false);
  const auto trl = json_of(estimate(with({"--mode", "train", "--dtype", "fp32", "--recipe", "trl-sft", "--json"})));
  CHECK(trl["workload"]["checkpointing_kind"] == "full");
  CHECK(trl["workload"]["loss"] == "chunked");
  CHECK(trl["workload"]["autocast"] == "bf16");
  const auto un = json_of(estimate(with({"--mode", "lora", "--recipe", "unsloth", "--json"})));
  CHECK(un["workload"]["activation_offload"] == true);
  CHECK(un["workload"]["loss"] == "unsloth");  // unsloth_zoo's UnslothFusedLoss (Cut Cross-Entropy is off on torch >= 2.8)
  const auto unc = json_of(estimate(with({"--mode", "lora", "--recipe", "unsloth", "--loss", "cce", "--json"})));
  CHECK(unc["workload"]["loss"] == "cce");  // a typed flag wins
  const auto ax = json_of(estimate(with({"--mode", "lora", "--recipe", "axolotl-liger", "--json"})));
  CHECK(ax["workload"]["loss"] == "fused-linear");
  CHECK(ax["workload"]["checkpointing_kind"] == "full");
  const auto hf = json_of(estimate(with({"--mode", "lora", "--recipe", "hf-trainer", "--json"})));
  CHECK(hf["workload"]["loss"] == "hf");
  CHECK(hf["workload"]["checkpointing_kind"].is_null());
  // Typed flags win over the recipe's; torchtune's optimizer in backward waits for grad_accum 1.
  const auto typed = json_of(estimate(with({"--mode", "train", "--recipe", "torchtune", "--loss", "hf", "--optimizer",
                                            "adamw", "--checkpointing", "every-2", "--grad-accum", "4", "--json"})));
  CHECK(typed["workload"]["loss"] == "hf");
  CHECK(typed["workload"]["optimizer"] == "adamw");
  CHECK(typed["workload"]["checkpointing_kind"] == "every-2");
  CHECK(typed["workload"]["optimizer_in_backward"] == false);

  require_usage_error(estimate(with({"--recipe", "torchtune"})),
                      "vramfit: error: --recipe: does not apply to --mode inference (it is used by --mode train, "
                      "lora and qlora; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "train", "--recipe", "torchtune2"})),
                      "vramfit: error: --recipe: unknown recipe 'torchtune2' (did you mean 'torchtune'? one of "
                      "hf-trainer, trl-sft, torchtune, axolotl-liger, unsloth)\n");
}

TEST_CASE("levers CLI: --compile is training only, all or layers", "[cli][levers]") {
  const auto eager = json_of(estimate(with({"--mode", "train", "--seq", "1024", "--json"})));
  const auto all = json_of(estimate(with({"--mode", "train", "--seq", "1024", "--compile", "--json"})));
  const auto layers = json_of(estimate(with({"--mode", "train", "--seq", "1024", "--compile", "layers", "--json"})));
  CHECK(eager["workload"]["compile"].is_null());
  CHECK(all["workload"]["compile"] == "all");
  CHECK(layers["workload"]["compile"] == "layers");
  CHECK(peak(all) < peak(layers));
  CHECK(peak(layers) < peak(eager));
  require_usage_error(estimate(with({"--compile"})),
                      "vramfit: error: --compile: does not apply to --mode inference (it is used by --mode train, "
                      "lora and qlora; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "train", "--compile", "max-autotune"})),
                      "vramfit: error: --compile: unknown compile 'max-autotune' (give all (the layers and the "
                      "loss) or layers (the decoder layers only), e.g. --compile layers)\n");
}

TEST_CASE("levers CLI: --lora-dtype bf16 halves the adapters and drops peft's fp32 input casts", "[cli][levers]") {
  const auto fp32 = json_of(estimate(with({"--mode", "lora", "--seq", "1024", "--json"})));
  const auto bf16 = json_of(estimate(with({"--mode", "lora", "--seq", "1024", "--lora-dtype", "bf16", "--json"})));
  CHECK(fp32["workload"]["lora"]["dtype"] == "fp32");
  CHECK(bf16["workload"]["lora"]["dtype"] == "bf16");
  const auto part = [](const nlohmann::json& j, const std::string& id) {
    for (const auto& c : j["components"])
      if (c["id"] == id) return c["bytes"].get<std::uint64_t>();
    return std::uint64_t{0};
  };
  CHECK(part(bf16, "lora_adapters") * 2 == part(fp32, "lora_adapters"));
  // The description says the dtype the bytes were counted in.
  const auto described = [](const nlohmann::json& j) {
    for (const auto& c : j["components"])
      if (c["id"] == "lora_adapters") return c["description"].get<std::string>();
    return std::string{};
  };
  CHECK(described(fp32) == "LoRA A and B matrices (fp32, as peft creates them)");
  CHECK(described(bf16) == "LoRA A and B matrices (bf16, --lora-dtype: peft autocast_adapter_dtype=False)");
  const auto fp16 = json_of(estimate(with({"--mode", "lora", "--seq", "1024", "--lora-dtype", "fp16", "--json"})));
  CHECK(described(fp16) == "LoRA A and B matrices (fp16, --lora-dtype: peft autocast_adapter_dtype=False)");
  CHECK(part(bf16, "optimizer_state") * 2 == part(fp32, "optimizer_state"));
  CHECK(part(bf16, "activations") < part(fp32, "activations"));
  require_usage_error(estimate(with({"--mode", "lora", "--lora-dtype", "int8"})),
                      "vramfit: error: --lora-dtype: unknown adapter dtype 'int8' (give fp32 (peft's default), bf16 "
                      "or fp16)\n");
  require_usage_error(estimate(with({"--mode", "train", "--lora-dtype", "bf16"})),
                      "vramfit: error: --lora-dtype: does not apply to --mode train (it is used by --mode lora and "
                      "qlora; drop it or change --mode)\n");
}
