#include "vramfit/render/render.hpp"

#include <catch2/catch.hpp>

#include <limits>

#include <nlohmann/json.hpp>

using namespace vramfit;
using namespace vramfit::render;

namespace {

/// A report built by hand, independent of the spec and engine modules.
EstimateReport sample() {
  EstimateReport r;
  auto& m = r.model;
  m.name = "llama-3.1-8b";
  m.source = "preset";
  m.model_type = "llama";
  m.family = "llama";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  m.max_positions = 131072;
  m.params = 8030261248ULL;
  m.notes = {"a model note"};
  r.workload.mode = spec::Mode::train;
  r.workload.batch = 2;
  r.workload.seq = 1024;
  r.workload.checkpointing = true;
  auto& b = r.breakdown;
  using engine::ComponentId;
  using engine::PhaseId;
  b.components = {{ComponentId::weights, Bytes{16060522496ULL}, "model parameters", true},
                  {ComponentId::gradients, Bytes{16060522496ULL}, "one per trainable parameter", true},
                  {ComponentId::activations, GiB(2), "saved for backward", true},
                  {ComponentId::kv_cache, Bytes{0}, "no cache in training: hidden in the table", true},
                  {ComponentId::allocator_reserve, GiB(1), "caching allocator reserve", false},
                  {ComponentId::cuda_context, MiB(700), "CUDA context", false}};
  b.phases = {{PhaseId::forward_end, Bytes{16060522496ULL} * 2 + GiB(2)},
              {PhaseId::backward_end, Bytes{16060522496ULL} * 2 + GiB(2)}};
  b.peak_phase = PhaseId::backward_end;
  b.peak_allocated = Bytes{16060522496ULL} * 2 + GiB(2);
  b.allocator_reserve = GiB(1);
  b.cuda_context = MiB(700);
  b.device_total = b.peak_allocated + GiB(1) + MiB(700);
  b.notes = {"an engine note", "a model note"};
  r.notes = {"a command note"};
  return r;
}

/// A budget as the CLI builds it: `label` is how it was given, `gpu` the catalog id or empty.
advisor::Budget budget(Bytes bytes, std::string label, std::string gpu) {
  advisor::Budget b = advisor::budget_of(bytes);
  b.label = std::move(label);
  b.gpu_id = std::move(gpu);
  return b;
}

}  // namespace

TEST_CASE("notes: model, engine, command, no duplicates", "[render]") {
  CHECK(all_notes(sample()) == std::vector<std::string>{"a model note", "an engine note", "a command note"});
}

TEST_CASE("render_estimate as text", "[render]") {
  auto r = sample();
  CHECK(render_estimate(r, Format::text) ==
        "Model     llama-3.1-8b (preset, llama)\n"
        "          8.03B parameters (8,030,261,248), weights bf16\n"
        "          32 layers, hidden 4096, 32 heads (8 KV, head dim 128), MLP 14336, vocab 128,256\n"
        "Workload  train: batch 2 x 1024 tokens, adamw, sdpa attention\n"
        "          gradient checkpointing\n"
        "\n"
        "Component              Memory   Share  Description\n"
        "weights             14.96 GiB   46.9%  model parameters\n"
        "gradients           14.96 GiB   46.9%  one per trainable parameter\n"
        "activations          2.00 GiB    6.3%  saved for backward\n"
        "peak allocated      31.92 GiB  100.0%  at backward_end\n"
        "allocator_reserve    1.00 GiB       -  caching allocator reserve\n"
        "cuda_context       700.00 MiB       -  CUDA context\n"
        "device total        33.60 GiB          what the GPU must have\n"
        "\n"
        "Notes\n"
        "  - a model note\n"
        "  - an engine note\n"
        "  - a command note\n");

  r.budget = budget(GiB(24), "rtx-4090 (NVIDIA GeForce RTX 4090)", "rtx-4090");
  const std::string text = render_estimate(r, Format::text);
  CHECK(text.find("Budget   rtx-4090 (NVIDIA GeForce RTX 4090), 24.00 GiB\n"
                  "Verdict  DOES NOT FIT, short by 9.60 GiB\n") != std::string::npos);
  r.budget = budget(GiB(40), "40GiB", "");
  CHECK(render_estimate(r, Format::text)
            .find("Budget   40.00 GiB (40GiB)\n"
                  "Verdict  FITS, headroom 6.40 GiB\n") != std::string::npos);
}

TEST_CASE("render_estimate as JSON: stable keys, integer bytes", "[render]") {
  auto r = sample();
  r.budget = budget(GiB(24), "rtx-4090", "rtx-4090");
  const std::string text = render_estimate(r, Format::json);
  const auto j = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"schema_version", "model", "workload", "image_tokens", "components", "phases",
                                         "peak_phase", "peak_allocated_bytes", "device_total_bytes",
                                         "device_total_upper_bytes", "upper_bound", "budget", "tight_fix",
                                         "notes"});
  keys.clear();
  for (const auto& [k, v] : j["model"].items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"name", "source", "model_type", "family", "params", "dtype",
                                         "quantization", "checkpoint_dtype", "exact_from_checkpoint", "hidden_size",
                                         "num_layers", "num_heads", "num_kv_heads", "head_dim",
                                         "intermediate_size", "vocab_size", "max_positions",
                                         "tied_embeddings", "moe"});
  keys.clear();
  for (const auto& [k, v] : j["workload"].items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"mode", "weights", "batch", "seq", "new_tokens", "optimizer", "autocast",
                                         "checkpointing", "attention", "lora", "grad_accum", "gpus",
                                         "nodes", "sharding", "offload", "master_weights", "kv_cache",
                                         "expandable_segments", "alloc_conf", "cuda_context", "checkpointing_kind", "activation_offload",
                                         "optimizer_in_backward", "sequence_packing", "loss", "fsdp_mixed_precision",
                                         "images", "image_size", "compile"});
  CHECK(j["schema_version"] == 3);
  CHECK(j["model"]["params"] == 8030261248ULL);
  CHECK(j["model"]["dtype"] == "bf16");
  CHECK(j["workload"]["optimizer"] == "adamw");
  CHECK(j["workload"]["lora"].is_null());
  CHECK(j["components"].size() == 6);
  CHECK(j["components"][0] ==
        nlohmann::ordered_json::parse(
            R"({"id": "weights", "bytes": 16060522496, "description": "model parameters",
                                      "in_peak_allocated": true})"));
  CHECK(j["components"][3]["bytes"] == 0);
  CHECK(j["components"][5]["in_peak_allocated"] == false);
  CHECK(j["phases"][1] == nlohmann::ordered_json::parse(R"({"id": "backward_end", "bytes": 34268528640})"));
  CHECK(j["peak_phase"] == "backward_end");
  CHECK(j["peak_allocated_bytes"] == 34268528640ULL);
  CHECK(j["device_total_bytes"] == 36076273664ULL);
  CHECK(j["budget"] ==
        nlohmann::ordered_json::parse(
            R"({"bytes": 25769803776, "gpu": "rtx-4090", "headroom_bytes": 0, "fits": false,
                "spare_bytes": -10306469888, "verdict": "does_not_fit", "upper_spare_bytes": -10306469888})"));
  // A hand-built breakdown has no calibration: the bound is the device total, upper_bound null.
  CHECK(j["device_total_upper_bytes"] == 36076273664ULL);
  CHECK(j["upper_bound"].is_null());
  CHECK(j["tight_fix"].is_null());
  CHECK(j["notes"].size() == 3);
  CHECK(text.back() == '\n');
}

TEST_CASE("render_estimate workload lines for generate and lora", "[render]") {
  auto r = sample();
  r.workload.mode = spec::Mode::generate;
  r.workload.checkpointing = false;
  r.workload.new_tokens = 256;
  CHECK(render_estimate(r, Format::text)
            .find("Workload  generate: batch 2, prompt 1024 + 256 new tokens, sdpa "
                  "attention\n\n") != std::string::npos);
  auto j = nlohmann::json::parse(render_estimate(r, Format::json));
  CHECK(j["workload"]["new_tokens"] == 256);
  CHECK(j["workload"]["optimizer"].is_null());

  r.workload.mode = spec::Mode::lora;
  r.workload.new_tokens = 0;
  r.workload.lora.rank = 8;
  r.workload.lora.all_linear = false;
  r.workload.lora.targets = {"q_proj", "v_proj"};
  r.workload.autocast = DType::bf16;
  r.workload.gpus = 4;
  r.workload.sharding = spec::Sharding::ddp;
  CHECK(
      render_estimate(r, Format::text)
          .find("Workload  lora: batch 2 x 1024 tokens, adamw, sdpa attention\n"
                "          LoRA rank 8 on q_proj,v_proj, dropout 0, autocast bf16, 4 GPUs, sharding ddp\n") !=
      std::string::npos);
  j = nlohmann::json::parse(render_estimate(r, Format::json));
  CHECK(j["workload"]["lora"] ==
        nlohmann::json::parse(R"({"rank": 8, "targets": ["q_proj", "v_proj"], "dropout": 0.0, "dtype": "fp32", "kernels": "peft"})"));
  CHECK(j["workload"]["autocast"] == "bf16");
}

TEST_CASE("render_models and render_gpus", "[render]") {
  const auto c = catalog::Catalog::parse(
      {{"gpus.json", R"({"gpus": [{"id": "h100-80gb", "name": "NVIDIA H100", "vendor": "nvidia",
          "memory_label": "80 GB", "memory_bytes": 85520809984, "bf16": true, "source": "s"}],
          "providers": [{"id": "aws", "name": "AWS", "source": "p", "tiers": [{"id": "p5", "gpu": "h100-80gb", "count": 8}]}]})"}});
  CHECK(render_gpus(c, Format::text) ==
        "GPUs\n"
        "  ID         Name         Vendor     Memory  Marketed  bf16\n"
        "  h100-80gb  NVIDIA H100  nvidia  79.65 GiB     80 GB  yes\n"
        "\n"
        "Provider tiers\n"
        "  Provider  Tier  GPUs           Memory per GPU\n"
        "  aws       p5    8 x h100-80gb       79.65 GiB\n"
        "\n"
        "Memory is what the driver reports as total. Use one with: vramfit estimate ... --gpu ID\n");
  const auto j = nlohmann::json::parse(render_gpus(c, Format::json));
  CHECK(j["schema_version"] == 3);
  CHECK(j["gpus"][0]["memory_bytes"] == 85520809984ULL);
  CHECK(j["tiers"][0] ==
        nlohmann::json::parse(R"({"provider": "aws", "id": "p5", "gpu": "h100-80gb", "count": 8,
                                                   "memory_bytes_per_gpu": 85520809984, "source": "p"})"));

  ModelEntry e;
  e.preset.id = "tiny";
  e.preset.name = "Tiny";
  e.preset.hf_repo = "org/tiny";
  e.spec.params = 124439808;
  e.spec.model_type = "gpt2";
  e.spec.num_layers = 12;
  e.spec.hidden_size = 768;
  CHECK(render_models({e}, Format::text) ==
        "ID    Name  Params  Type  Layers  Hidden  Hugging Face repo\n"
        "tiny  Tiny    124M  gpt2      12     768  org/tiny\n"
        "\n"
        "1 presets. Params are counted from each config. Use one with: vramfit estimate --model ID\n");
  const auto m = nlohmann::json::parse(render_models({e}, Format::json));
  CHECK(m["models"][0]["params"] == 124439808);
  CHECK(m["models"][0]["published_params"].is_null());
}
