// The command line: CLI11 wiring, the commands, and the one place errors are caught.
#include "vramfit/cli/run.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/fit.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/advise.hpp"
#include "vramfit/cli/estimate.hpp"
#include "vramfit/cli/explain.hpp"
#include "vramfit/cli/serving.hpp"
#include "vramfit/cli/validate.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/render/explain.hpp"
#include "vramfit/render/render.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace {

constexpr const char* kDescription =
    "vramfit: estimates the GPU memory of a transformer job (inference, generate, training, LoRA, QLoRA),\n"
    "says whether it fits a GPU, what to change when it does not, and what an OOM message means.";

/// The --optimizer help, from the spec's one table of optimizer names.
std::string optimizer_help() {
  std::string names;
  for (const auto n : spec::optimizer_names()) names += (names.empty() ? "" : " ") + std::string(n);
  return names + " (training; default adamw)";
}

/// The commands, in help order (also the list "unknown command" names).
const std::vector<std::string> kCommands{"estimate", "advise", "fit", "explain",
                                         "validate", "models", "gpus"};

constexpr const char* kCatalogNote =
    "--data-dir PATH (or env VRAMFIT_DATA_DIR) reads another catalog folder; it may come before or after the "
    "command.";

constexpr const char* kEstimateFooter = R"(Examples:
  vramfit estimate --model llama-3.1-8b --mode train --gpu h100-80gb
  vramfit estimate --params 7B --mode qlora --batch 4 --seq 1024 --budget 24GiB
  vramfit estimate --config ./my-model --mode generate --new-tokens 512 --json
  vramfit estimate --model qwen2.5-7b --mode lora --gpu a100-80gb --headroom 10%

When the job does not fit the budget, the report ends with the advisor's short advice (JSON: the
"advice" key; null when it fits); 'vramfit advise' with the same flags gives the details.
)";

constexpr const char* kEstimateExit =
    "Exit codes: 0 ok, fits or tight, 1 does not fit the budget (tight too with --fail-on-tight), 2 usage or "
    "input error, 3 internal error.";

constexpr const char* kAdviseFooter = R"(Examples:
  vramfit advise --model llama-3.1-8b --mode train --gpu rtx-4090
  vramfit advise --model qwen2.5-7b --mode lora --batch 8 --budget 24GiB --headroom 10% --deny quantize
  vramfit advise --model llama-3.3-70b --gpu h100-80gb --provider aws --json

The fixes, tried in this order until the job fits (ids for --allow and --deny; 'quantize' names both
quantize steps):
)";

constexpr const char* kAdviseExit =
    "Exit codes: 0 the job fits as given (no step is needed; tight too unless --fail-on-tight), 1 it does not\n"
    "(the advice is printed either way), 2 usage or input error, 3 internal error.";

constexpr const char* kFitFooter = R"(Examples:
  vramfit fit --model llama-3.1-8b --mode lora --seq 2048 --gpu a100-80gb
  vramfit fit --model qwen2.5-7b --mode generate --batch 8 --gpu l4 --solve seq --json
  vramfit fit --params 13B --mode qlora --budget 24GiB --headroom 2GiB

The other flags are the workload as given; the search changes only the --solve dimension.
Exit codes: 0 some value fits, 1 nothing fits (even 1; with --fail-on-tight also when the answer's
upper bound does not fit), 2 usage or input error, 3 internal error.)";

constexpr const char* kExplainFooter = R"(Examples:
  vramfit explain train.log
  python train.py 2>&1 | vramfit explain -
  vramfit explain train.log --model llama-3.1-8b --mode train --batch 8 --seq 2048 --json

Reads PyTorch's "CUDA out of memory" messages (current and legacy texts, HIP, MPS, memory summaries)
anywhere in a log. With --model/--config/--params (and the workload flags), it also estimates the job,
names the tensor the failed request matches (logits, attention scores), and sets the estimate beside the
card's total from the message.
Exit codes: 0 an OOM message was found and explained, 1 the text holds none, 2 unreadable input or bad
flags, 3 internal error.)";

constexpr const char* kValidateFooter = R"(Examples:
  vramfit validate ../shared/truth/results/public.jsonl
  vramfit validate tests/accuracy/h200/results/architectures.jsonl --json

A truth file is JSON lines as measure.py writes them: an environment line (the GPU's total_bytes),
then one measured case a line. Each case's "config" is read relative to the file's folder, else its
parent folder. Errors are |estimate / measured - 1| of the peak allocated memory; "unsafe" is an
estimate below 95% of the measured peak.
Exit codes: 0 the report was printed, 2 the file or a config is missing or malformed, 3 internal error.)";

/// The option values of every command, bound to CLI11 before parsing.
struct Options {
  std::string data_dir;
  EstimateFlags estimate;  ///< shared by estimate, advise, fit and explain (one command runs)
  /// Per command: long name -> option, for EstimateFlags::given.
  std::map<std::string, std::vector<std::pair<std::string, CLI::Option*>>> flag_options;
  AdviseFlags advise;
  ServingFlags serving;  ///< --engine and the serving engines' flags (estimate, advise, fit)
  std::string solve = "batch";
  std::string path;  ///< explain's FILE, validate's PATH
  bool json = false;
  bool one_process = false;  ///< validate --one-process
};

/// Registers one flag of the shared set on `app`, remembering it for EstimateFlags::given.
CLI::Option* add(CLI::App* app, Options& o, const std::string& name, std::string& target,
                 const std::string& type, const std::string& help, const std::string& group) {
  CLI::Option* opt = app->add_option(name, target, help)->type_name(type)->group(group);
  o.flag_options[app->get_name()].emplace_back(name, opt);
  return opt;
}

/// A flag without a value (on when given), registered like add()'s options.
CLI::Option* add_switch(CLI::App* app, Options& o, const std::string& name, bool& target, const std::string& help,
                        const std::string& group) {
  CLI::Option* opt = app->add_flag(name, target, help)->group(group);
  o.flag_options[app->get_name()].emplace_back(name, opt);
  return opt;
}

/// The model and workload flags (every command that estimates), and the budget flags.
void add_estimate_flags(CLI::App* e, Options& o, bool budget, const std::string& model_group) {
  auto& f = o.estimate;
  add(e, o, "--params", f.params, "N", "parameter count: 7e9, 7B, 1.5b, 350M (a Llama-like shape is assumed)",
      model_group);
  add(e, o, "--model", f.model, "ID",
      "a preset (list them with 'vramfit models'), or a Hugging Face repo org/name[@revision] found in the "
      "local Hugging Face cache",
      model_group);
  add(e, o, "--config", f.config, "PATH",
      "a Hugging Face config.json, or a folder holding it (and safetensors files, read for exact sizes)",
      model_group);
  add(e, o, "--dtype", f.dtype, "DTYPE",
      "weights dtype: fp32 fp16 bf16 fp8 int8 int4 nf4 (default: the dtype the config declares, as transformers 5 "
      "loads it, else bf16; nf4 for qlora; a checkpoint's quantization_config when it has one)",
      model_group);
  const std::string quant = "Quantization";
  add(e, o, "--quant", f.quant, "SCHEME",
      "how the weights are packed: nf4 fp4 bnb-int8 gptq-int2/3/4/8 awq-int4 fp8 fp8-channel fp8-block mxfp4, or "
      "a GGUF type q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k_s/m/l q4_k_s/m q5_k_s/m q6_k",
      quant);
  add(e, o, "--group-size", f.group_size, "N", "GPTQ/AWQ group size (default 128; 0 = one group per row)", quant);
  add_switch(e, o, "--double-quant", f.double_quant,
             "bitsandbytes 4-bit double quantization (bnb_4bit_use_double_quant)", quant);
  add(e, o, "--skip-modules", f.skip_modules, "LIST",
      "linear modules left in 16 bits (llm_int8_skip_modules), e.g. down_proj,o_proj", quant);
  add(e, o, "--kv-cache", f.kv_cache, "DTYPE",
      "KV cache storage (generate): bf16 fp16 fp32, fp8 (1 byte), int8 or int4 (Hugging Face QuantizedCache)",
      quant);
  const std::string work = "Workload";
  add(e, o, "--mode", f.mode, "MODE", "inference generate train lora qlora (default inference)", work);
  add(e, o, "--batch", f.batch, "N", "sequences per step (default 1)", work);
  add(e, o, "--seq", f.seq, "N", "tokens per sequence; the prompt for generate (default 2048)", work);
  add(e, o, "--new-tokens", f.new_tokens, "N", "tokens generated (generate; default 256)", work);
  add(e, o, "--images", f.images, "N",
      "images per sequence (vision-language models): their tokens join the prompt, the vision tower runs first "
      "(default 0)",
      work);
  add(e, o, "--image-size", f.image_size, "WxH",
      "each image's size in pixels, WIDTHxHEIGHT or N for N x N, for models that take any size (Qwen-VL, "
      "llava_next, pixtral, idefics3, internvl, llama4; default: the model's own)",
      work);
  add(e, o, "--optimizer", f.optimizer, "NAME", optimizer_help(), work);
  add(e, o, "--autocast", f.autocast, "DTYPE", "bf16 or fp16: mixed precision over the stored weights", work);
  add(e, o, "--checkpointing", f.checkpointing_kind, "[KIND]",
      "gradient (activation) checkpointing: full (the default when no KIND is given), selective "
      "(torchtitan's op policy) or every-N (every N-th layer)",
      work)
      ->expected(0, 1);
  add(e, o, "--attention", f.attention, "IMPL", "sdpa or eager (default sdpa)", work);
  add(e, o, "--lora-rank", f.lora_rank, "R", "LoRA rank (lora, qlora; default 16)", work);
  add(e, o, "--lora-targets", f.lora_targets, "LIST",
      "all-linear, or module names: q_proj,v_proj (default all-linear)", work);
  add(e, o, "--lora-dropout", f.lora_dropout, "P", "LoRA dropout probability (default 0)", work);
  add(e, o, "--lora-dtype", f.lora_dtype, "DTYPE",
      "the adapters' dtype: fp32 (peft's default) or bf16 / fp16 (peft autocast_adapter_dtype=False, torchtune)", work);
  add(e, o, "--lora-kernels", f.lora_kernels, "KIND",
      "peft (peft's LoRA layers, the default) or unsloth (Unsloth's fused LoRA_QKV / LoRA_W / LoRA_MLP and its "
      "RMSNorm / RoPE kernels)",
      work);
  add(e, o, "--grad-accum", f.grad_accum, "K", "gradient accumulation steps (default 1)", work);
  add(e, o, "--gpus", f.gpus, "N", "GPUs the job runs on (default 1)", work);
  add(e, o, "--sharding", f.sharding, "HOW",
      "none ddp zero1 zero2 zero3 fsdp fsdp-grad-op tp pp device-map (default none)", work);
  add(e, o, "--nodes", f.nodes, "N", "machines, each with --gpus GPUs (default 1)", work);
  add(e, o, "--offload", f.offload, "WHAT",
      "none, optimizer (ZeRO-Offload) or params (ZeRO-3 offload_param, FSDP CPUOffload)", work);
  add_switch(e, o, "--master-weights", f.master_weights,
             "16-bit weights with an fp32 master copy in the optimizer (DeepSpeed, Megatron)", work);
  add(e, o, "--alloc-conf", f.alloc_conf, "CONF",
      "PYTORCH_CUDA_ALLOC_CONF for the job: expandable_segments:True,max_split_size_mb:512,...", work);
  add(e, o, "--cuda-context", f.cuda_context, "SIZE",
      "memory outside PyTorch's allocator per GPU (CUDA context, cuBLAS, kernels), when you measured it: 700MiB; with "
      "--engine llama.cpp, outside its buffers (nvidia-smi's use less the logged buffers)",
      work);
  const std::string levers = "Training levers";
  add(e, o, "--loss", f.loss, "KIND",
      "hf (transformers: full fp32 logits, the default), chunked (torchtune), fused-linear (Liger), cce (Apple's Cut "
      "Cross-Entropy) or unsloth (Unsloth's chunked fused cross-entropy)",
      levers);
  add(e, o, "--fsdp-mixed-precision", f.fsdp_mixed_precision, "DTYPE",
      "bf16 or fp16: FSDP MixedPrecisionPolicy param_dtype over fp32 sharded weights (--dtype fp32 --sharding fsdp)",
      levers);
  add(e, o, "--recipe", f.recipe, "STACK",
      "hf-trainer, trl-sft, torchtune, axolotl-liger or unsloth: the levers that stack turns on by default "
      "(explicit flags win; see the README)",
      levers);
  add(e, o, "--compile", f.compile_kind, "[WHAT]",
      "torch.compile of the training step: all (the decoder layers and the loss, torchtune's compile; the "
      "default when no WHAT is given) or layers (each decoder layer, the loss eager: torchtitan)",
      levers)
      ->expected(0, 1);
  add_switch(e, o, "--activation-offload", f.activation_offload,
             "saved activations go to host memory (torch.autograd.graph.save_on_cpu)", levers);
  add_switch(e, o, "--optimizer-in-backward", f.optimizer_in_backward,
             "step each parameter as its gradient is ready and free the gradient (torchtune)", levers);
  add_switch(e, o, "--packing", f.sequence_packing,
             "padding-free packed rows (DataCollatorWithFlattening): --batch rows of --seq tokens each, "
             "several sequences per row",
             levers);
  if (!budget) return;
  const std::string group = e->get_name() == "estimate" ? "Budget (at most one)" : "Budget (exactly one)";
  add(e, o, "--gpu", f.gpu, "ID", "a GPU of the catalog (list them with 'vramfit gpus')", group);
  add(e, o, "--budget", f.budget, "SIZE", "memory per GPU: 24GiB, 80GB, 81920MiB (GB = 10^9, GiB = 2^30)",
      group);
  add(e, o, "--headroom", f.headroom, "MARGIN",
      "keep a margin free on the GPU: 10% of its memory, or a size (2GiB); fits when total + margin <= "
      "budget",
      group);
  add_switch(e, o, "--fail-on-tight", f.fail_on_tight,
             "exit 1 (does not fit) when the verdict is TIGHT: the estimate fits but its measured upper bound "
             "does not (default: TIGHT exits 0)",
             group);
}

/// --engine and the llama.cpp/Ollama and vLLM flags (estimate, advise, fit; see cli/serving).
void add_serving_flags(CLI::App* e, Options& o) {
  auto& s = o.serving;
  const std::string g = "Serving engine (--engine)";
  add(e, o, "--engine", s.engine, "NAME",
      "transformers (default), llama.cpp, ollama or vllm: whose memory to model", g);
  add(e, o, "--gpu-layers", s.gpu_layers, "N", "llama.cpp -ngl: layers on the GPU, a number or all (default all; auto: see fit --solve gpu-layers)", g);
  add(e, o, "--n-cpu-moe", s.n_cpu_moe, "N", "llama.cpp: routed experts of the first N blocks stay on the CPU", g);
  add(e, o, "--tensor-split", s.tensor_split, "A,B", "llama.cpp: share of each GPU of --gpu a,b (default by memory)", g);
  add(e, o, "--split-mode", s.split_mode, "MODE", "llama.cpp: layer (default), row or none", g);
  add(e, o, "--ctx-size", s.ctx_size, "N", "llama.cpp: KV cells over all sequences (default 4096); 0: the model's whole context (-c 0); fit: as llama-server's --fit cuts it without -c", g);
  add(e, o, "--parallel", s.parallel, "N", "llama.cpp: sequences sharing the context (default 1; llama-server without -np: 4, with --kv-unified)", g);
  add(e, o, "--cache-type-k", s.cache_type_k, "T", "llama.cpp: K cache type f16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1 (default f16)", g);
  add(e, o, "--cache-type-v", s.cache_type_v, "T", "llama.cpp: V cache type (quantized needs --flash-attn on)", g);
  add(e, o, "--batch-size", s.batch_size, "N", "llama.cpp: logical batch (default 2048)", g);
  add(e, o, "--ubatch-size", s.ubatch_size, "N", "llama.cpp: physical batch, sizes the compute buffers (default 512)", g);
  add(e, o, "--flash-attn", s.flash_attn, "on|off|auto", "llama.cpp: flash attention (default auto, as llama.cpp: on where CUDA's kernels take the heads; Ollama: its list of architectures)", g);
  add(e, o, "--mmproj", s.mmproj, "FILE",
      "llama.cpp: a multimodal projector (mmproj-*.gguf), its weights counted on the first GPU; found by itself "
      "in a --config folder",
      g);
  add(e, o, "--override-tensor", s.override_tensor, "PATTERN=BUF,...",
      "llama.cpp -ot: tensors whose GGUF name matches the regex go to CPU or CUDA<n>", g);
  add_switch(e, o, "--no-mmap", s.no_mmap, "llama.cpp: read the weights into RAM instead of mapping them", g);
  add_switch(e, o, "--kv-unified", s.kv_unified,
             "llama.cpp -kvu: the --parallel sequences share one KV stream of --ctx-size cells (llama-server's default "
             "without -np: 4 slots, unified)",
             g);
  add_switch(e, o, "--no-op-offload", s.no_op_offload,
             "llama.cpp: the layers left on the CPU (--gpu-layers) run there, not on the main GPU (ggml's op offload of "
             "batches of 32 rows or more, on by default)",
             g);
  add(e, o, "--device", s.device, "none",
      "llama.cpp --device none: no GPU backend (as a CPU-only build): every layer and the graph on the CPU, "
      "and the CPU's repacked weights counted",
      g);
  add_switch(e, o, "--swa-full", s.swa_full,
             "llama.cpp: sliding-window layers keep a full-size cache of --ctx-size cells (for prompt caching), "
             "not the window",
             g);
  add(e, o, "--gpu-memory-utilization", s.gpu_memory_utilization, "F", "vLLM: fraction of each GPU it may use (default 0.9)", g);
  add(e, o, "--max-model-len", s.max_model_len, "N", "vLLM: longest request (default: the model's max_position_embeddings; auto: the longest the cache holds, 0.12+)", g);
  add(e, o, "--max-num-seqs", s.max_num_seqs, "N", "vLLM: concurrent sequences (default as vllm serve: 1024 on a card of 70 GiB or more but an A100, else 256)", g);
  add(e, o, "--max-num-batched-tokens", s.max_num_batched_tokens, "N", "vLLM: tokens per step, sizes the profile run (default as vllm serve: 8192 on a card of 70 GiB or more but an A100, else 2048; V0 releases: see the README)", g);
  add(e, o, "--kv-cache-dtype", s.kv_cache_dtype, "D", "vLLM: auto or fp8 (fp8_e4m3, fp8_e5m2)", g);
  add_switch(e, o, "--enforce-eager", s.enforce_eager, "vLLM: no CUDA graphs", g);
  add_switch(e, o, "--disable-hybrid-kv-cache-manager", s.disable_hybrid_kv_cache_manager,
             "vLLM: sliding-window layers keep a full-length KV cache", g);
  add_switch(e, o, "--no-flashinfer", s.no_flashinfer,
             "vLLM: FlashInfer not installed: the profile run's sampler sorts the logits", g);
  add(e, o, "--tensor-parallel-size", s.tensor_parallel_size, "N", "vLLM: GPUs splitting every layer (default 1)", g);
  add(e, o, "--pipeline-parallel-size", s.pipeline_parallel_size, "N", "vLLM: pipeline stages (default 1)", g);
  add(e, o, "--block-size", s.block_size, "N", "vLLM: tokens per KV block (default 16)", g);
  add(e, o, "--kv-cache-memory-bytes", s.kv_cache_memory_bytes, "SIZE",
      "vLLM (0.11+): the KV cache per GPU (e.g. 20GiB); --gpu-memory-utilization is then not read", g);
  add(e, o, "--vllm-version", s.vllm_version, "X.Y",
      "vLLM: the release (default 0.27.1): its CUDA graph sizes, its sampler, and from 0.21 the graphs inside the budget", g);
}

CLI::App* add_command(CLI::App& app, const std::string& name, const std::string& description,
                      const std::string& footer) {
  CLI::App* c = app.add_subcommand(name, description);
  c->fallthrough();  // --data-dir may come after the command
  c->footer(footer);
  return c;
}

void add_json(CLI::App* c, Options& o, const std::string& what) {
  c->add_flag("--json", o.json, what)->group("Output");
}

std::string advise_footer() {
  std::string s = kAdviseFooter;
  std::size_t n = 1;
  for (const auto& f : advisor::fixes()) s += fmt::format("  {}. {:<24} {}\n", n++, f.id, f.title);
  s += "\n";
  s += kAdviseExit;
  return s;
}

void add_commands(CLI::App& app, Options& o) {
  CLI::App* e =
      add_command(app, "estimate", "Estimate the peak GPU memory of a job and check it against a budget",
                  std::string(kEstimateFooter) + "\n" + kCatalogNote + "\n" + kEstimateExit);
  add_estimate_flags(e, o, true, "Model (exactly one)");
  add_serving_flags(e, o);
  add_json(e, o, fmt::format("print JSON (schema_version {}) on stdout", render::kSchemaVersion));

  CLI::App* a = add_command(
      app, "advise", "Say what to change, in order, so that a job fits a GPU, and the smallest cloud tier",
      advise_footer());
  add_estimate_flags(a, o, true, "Model (exactly one)");
  add_serving_flags(a, o);
  a->add_option("--allow", o.advise.allow, "only these fixes may be used (ids, comma-separated; repeatable)")
      ->type_name("IDS")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Advice");
  a->add_option("--deny", o.advise.deny, "these fixes must not be used (ids, comma-separated; repeatable)")
      ->type_name("IDS")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Advice");
  a->add_option("--provider", o.advise.provider,
                "look for tiers of this provider only (default: the catalog's default_provider, gpu-cloud, the seed guide's; 'all': every provider tier and catalog GPU at 1, 2, 4, 8 cards; see 'vramfit gpus')")
      ->type_name("ID")
      ->group("Advice");
  add_json(a, o, fmt::format("print JSON (schema_version {}) on stdout", render::kSchemaVersion));

  CLI::App* f =
      add_command(app, "fit", "Find the largest batch (or sequence length) that fits a GPU", kFitFooter);
  add_estimate_flags(f, o, true, "Model (exactly one)");
  add_serving_flags(f, o);
  f->add_option("--solve", o.solve, "the dimension to maximise: batch or seq (default batch); with --engine: gpu-layers, ctx, concurrency (llama.cpp) or max-model-len, concurrency (vllm)")
      ->type_name("WHAT")
      ->group("Search");
  add_json(f, o, fmt::format("print JSON (schema_version {}) on stdout", render::kSchemaVersion));

  CLI::App* x = add_command(
      app, "explain", "Explain a PyTorch out-of-memory message from a log, and what to do", kExplainFooter);
  x->add_option("FILE", o.path, "the log to read; '-' or nothing reads standard input")->type_name("");
  add_estimate_flags(x, o, false, "Model (optional: estimates the job beside the message)");
  add_json(x, o, fmt::format("print JSON (schema_version {}) on stdout", render::kExplainSchemaVersion));

  CLI::App* v =
      add_command(app, "validate", "Compare the estimates with measured peaks from a truth file (JSONL)",
                  kValidateFooter);
  v->add_option("PATH", o.path, "a truth file written by measure.py (*.jsonl)")->type_name("")->required();
  v->add_flag("--one-process", o.one_process,
              "also the device total with each case estimated after the file's earlier cases in measure.py's one "
              "process (the segment the first backward's cuBLAS workspace pins stays reserved)");
  add_json(v, o, fmt::format("print JSON (schema_version {}) on stdout", render::kSchemaVersion));

  CLI::App* models = add_command(app, "models", "List the model presets", "");
  add_json(models, o, "print JSON on stdout");
  CLI::App* gpus = add_command(app, "gpus", "List the GPU catalog and the cloud providers' tiers", "");
  add_json(gpus, o, "print JSON on stdout");
}

/// Runs the parsed command; returns the exit code. Throws InputError.
ExitCode dispatch(const CLI::App& app, Options& o, std::ostream& out, std::istream& in) {
  std::string data_dir = o.data_dir;
  if (data_dir.empty() && app.get_option("--data-dir")->count() > 0)
    throw InputError("--data-dir", "an empty path", "give a catalog folder, or leave --data-dir out for the built-in one");
  std::string field = "--data-dir";
  if (data_dir.empty()) {
    if (const char* env = std::getenv("VRAMFIT_DATA_DIR"); env != nullptr && *env != '\0') {
      data_dir = env;
      field = "VRAMFIT_DATA_DIR";
    }
  }
  CatalogSource catalog(data_dir, field);
  // A catalog folder that was asked for is read and checked whatever the command: an unusable
  // --data-dir or VRAMFIT_DATA_DIR is an error even when this command would not use it.
  if (!data_dir.empty()) (void)catalog.get();
  const auto format = o.json ? render::Format::json : render::Format::text;

  std::string command;
  for (const auto* sub : app.get_subcommands()) command = sub->get_name();
  // A flag given with an empty value ('--ctx-size ""') is refused, not read as absent: the
  // serving engines' flags fell back to their defaults silently (issue #14's adversarial pass).
  Diagnostics empty;
  for (const auto& [name, opt] : o.flag_options[command]) {
    if (opt->count() == 0) continue;
    o.estimate.given.insert(name);
    if (opt->get_expected_min() == 0) continue;  // --checkpointing [KIND]
    for (const std::string& value : opt->results())
      if (value.find_first_not_of(" \t") == std::string::npos) {
        empty.add(name, "an empty value", fmt::format("give a value after {}, or leave the flag out", name));
        break;
      }
  }
  empty.throw_if_any();

  if (command == "estimate" || command == "advise" || command == "fit") {
    check_serving_flags(o.estimate, o.serving);
    if (is_serving(o.estimate, o.serving))
      return run_serving(command, o.estimate, o.serving, o.solve, catalog, format, out);
  }
  if (command == "estimate") return run_estimate(build_estimate(o.estimate, catalog), catalog, format, out);
  if (command == "advise")
    return run_advise(build_estimate(o.estimate, catalog, BudgetRule::required), o.advise, catalog, format,
                      out);
  if (command == "fit") {
    // Every problem at once: the estimate's flags, then --solve.
    Diagnostics diags;
    std::optional<Estimate> e;
    std::optional<advisor::Dimension> dimension;
    diags.collect([&] { e = build_estimate(o.estimate, catalog, BudgetRule::required); });
    diags.collect([&] { dimension = advisor::parse_dimension(o.solve, "--solve"); });
    diags.throw_if_any();
    return run_fit(*e, *dimension, format, out);
  }
  if (command == "explain") {
    // The model is optional; workload flags alone are an error (build_estimate says "no model given").
    std::optional<Estimate> e;
    Diagnostics diags;
    std::string log;
    diags.collect([&] { log = read_log(o.path, in); });
    if (!o.estimate.given.empty()) diags.collect([&] { e = build_estimate(o.estimate, catalog); });
    diags.throw_if_any();
    return run_explain(log, e, format, out);
  }
  if (command == "validate") return run_validate(o.path, format, out, o.one_process);
  if (command == "models") {
    std::vector<render::ModelEntry> models;
    for (const auto& p : catalog.get().presets())
      models.push_back({p, spec::from_config(p.config, "models/" + p.id + ".json: config")});
    out << render::render_models(models, format);
    return ExitCode::ok;
  }
  if (command == "gpus") {
    out << render::render_gpus(catalog.get(), format);
    return ExitCode::ok;
  }
  throw std::logic_error("no command was dispatched");
}

void print_diagnostics(const std::vector<Diagnostic>& diags, std::ostream& err) {
  std::vector<std::string> seen;
  for (const auto& d : diags) {
    std::string line = d.str();
    if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
    err << "vramfit: error: " << line << '\n';
    seen.push_back(std::move(line));
  }
}

/// The name of the (sub)command that was being parsed, for "run 'vramfit estimate --help'".
std::string command_of(const CLI::App& app) {
  for (const auto* sub : app.get_subcommands()) return "vramfit " + sub->get_name();
  return "vramfit";
}

/// "estimate, advise, ..., models and gpus".
std::string command_list(const std::string& last_joiner) {
  std::string s;
  for (std::size_t i = 0; i < kCommands.size(); ++i) {
    if (i > 0) s += i + 1 == kCommands.size() ? last_joiner : ", ";
    s += kCommands[i];
  }
  return s;
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err, std::istream& stdin_in) {
  try {
    CLI::App app(kDescription, "vramfit");
    Options o;
    app.set_version_flag("--version", std::string("vramfit ") + VRAMFIT_VERSION);
    app.add_option("--data-dir", o.data_dir,
                   "catalog folder (gpus.json, models/*.json) instead of the built-in one "
                   "(or env VRAMFIT_DATA_DIR)")
        ->type_name("PATH");
    app.require_subcommand(1);
    app.footer("Run 'vramfit COMMAND --help' for the flags of a command.");
    add_commands(app, o);

    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      out << app.help();
      return to_int(ExitCode::ok);
    } catch (const CLI::CallForAllHelp&) {
      out << app.help("", CLI::AppFormatMode::All);
      return to_int(ExitCode::ok);
    } catch (const CLI::CallForVersion& e) {
      out << e.what() << '\n';
      return to_int(ExitCode::ok);
    } catch (const CLI::ParseError& e) {
      if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
        // No command was recognised: name the word that was meant to be one, if any.
        for (const auto& word : app.remaining()) {
          if (word.empty() || word.front() == '-') continue;
          const std::string list = "the commands are " + command_list(" and ");
          err << "vramfit: error: unknown command '" << word << "' (" << did_you_mean_fix(word, kCommands, list, list)
              << ")\n";
          return to_int(ExitCode::usage);
        }
        err << "vramfit: error: a command is required: " << command_list(" or ")
            << " (run 'vramfit --help')\n";
        return to_int(ExitCode::usage);
      }
      err << "vramfit: error: " << e.what() << " (run '" << command_of(app) << " --help')\n";
      return to_int(ExitCode::usage);
    }
    return to_int(dispatch(app, o, out, stdin_in));
  } catch (const InputError& e) {
    print_diagnostics(e.diagnostics(), err);
    return to_int(ExitCode::usage);
  } catch (const std::exception& e) {
    err << "vramfit: internal error: " << e.what() << " (this is a bug in vramfit: please report it)\n";
    return to_int(ExitCode::internal);
  } catch (...) {
    err << "vramfit: internal error: unknown exception (this is a bug in vramfit: please report it)\n";
    return to_int(ExitCode::internal);
  }
}

}  // namespace vramfit::cli
