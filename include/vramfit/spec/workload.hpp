#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/dtype.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/quant.hpp"

namespace vramfit::spec {

/// What the job does with the model.
enum class Mode {
  inference,  ///< one forward pass under torch.inference_mode(), logits for every position
  generate,   ///< model.generate(): prefill `seq` tokens, then `new_tokens` with the KV cache
  train,      ///< full fine-tuning: forward, loss, backward, optimizer step
  lora,       ///< peft LoRA on a frozen base in the weights dtype
  qlora,      ///< peft LoRA on a 4-bit (nf4) base
};

/// True for the modes that train LoRA adapters on a frozen base (lora, qlora).
constexpr bool uses_lora(Mode m) noexcept { return m == Mode::lora || m == Mode::qlora; }
/// The mode runs a backward pass and an optimizer step (train, lora, qlora).
constexpr bool trains(Mode m) noexcept { return m == Mode::train || uses_lora(m); }

/// torch.optim optimizers and the lean ones people use; see engine/optimizers for sizes.
enum class Optimizer {
  adamw, adamw_fused, adamw_forloop, adam, sgd, sgd_momentum, adafactor, adamw_8bit, lion,
  paged_adamw, paged_adamw_8bit,  ///< bitsandbytes paged optimizers: state in CUDA unified memory
};
/// How many optimizers there are. Each has one row in spec's name table (workload.cpp) and one
/// in the engine's traits table (engine/optimizers.cpp), in the enum's order: both are checked
/// against this count at compile time, so a missing row does not build.
inline constexpr std::size_t kOptimizerCount = 11;

/// Attention implementation passed as attn_implementation.
enum class Attention { sdpa, eager };

/// Multi-GPU strategy.
enum class Sharding {
  none,
  ddp,           ///< DistributedDataParallel: a full replica per GPU
  zero1,         ///< DeepSpeed ZeRO-1: optimizer state sharded
  zero2,         ///< ZeRO-2: optimizer state and gradients sharded
  zero3,         ///< ZeRO-3: parameters too
  fsdp,          ///< FSDP full shard (FSDP2 fully_shard, reshard_after_forward=True)
  fsdp_grad_op,  ///< FSDP shard-grad-op (reshard_after_forward=False): parameters stay gathered
  tp,            ///< tensor parallel over the GPUs of a node
  pp,            ///< pipeline parallel: one stage per GPU, 1F1B schedule
  device_map,    ///< Accelerate device_map="auto": whole layers per GPU, one GPU at a time
};

/// What DeepSpeed ZeRO-Offload / FSDP CPUOffload move to host memory.
enum class Offload {
  none,
  optimizer,  ///< optimizer state and its step on the CPU (ZeRO-Offload offload_optimizer)
  params,     ///< parameters and gradients too (ZeRO-3 offload_param, FSDP CPUOffload(offload_params=True))
};

/// How the loss is computed from the last hidden states (engine/levers.cpp has the sizes).
enum class Loss {
  hf,            ///< transformers' ForCausalLMLoss: the full logits, upcast to fp32
  chunked,       ///< torchtune's CEWithChunkedOutputLoss: 8 chunks, each upcast on its own
  fused_linear,  ///< Liger's fused linear cross-entropy: lm_head + loss per chunk, no full logits
  cce,           ///< Apple's Cut Cross-Entropy: logits only in on-chip tiles, recomputed in backward
  unsloth,       ///< Unsloth's UnslothFusedLoss: lm_head + loss per chunk of at most 4 GiB of fp32 logits
};

/// torch.compile of the training step (`--compile`; engine/levers.cpp has what it changes).
enum class Compile {
  none,
  layers,  ///< each decoder layer compiled, the loss eager (torchtitan's apply_compile)
  all,     ///< the layers and the loss function (torchtune `compile: True`; HF Trainer torch_compile)
};

/// peft LoRA settings; alpha does not change memory.
struct Lora {
  std::uint64_t rank = 16;
  bool all_linear = true;                ///< peft's "all-linear" shorthand
  std::vector<std::string> targets;      ///< module names when not all_linear
  double dropout = 0.0;
  /// `--lora-dtype bf16|fp16`: the adapters in 16 bits (peft's autocast_adapter_dtype=False,
  /// torchtune's LoRALinear in the model's dtype); false: fp32, as peft creates them by default.
  bool half_adapters = false;
  bool half_is_fp16 = false;  ///< with half_adapters: fp16 rather than bf16 (the JSON names it)
  /// `--lora-kernels unsloth`: Unsloth's fused LoRA autograd functions (unsloth/kernels/
  /// fast_lora.py LoRA_QKV, LoRA_W, LoRA_MLP) and its RMSNorm / RoPE kernels replace peft's
  /// forward in each decoder layer (engine/activations.cpp has what they save); false: peft.
  bool unsloth_kernels = false;
};

/// A workload: the mode and every knob that changes memory.
/// PYTORCH_CUDA_ALLOC_CONF's settings other than expandable_segments (PyTorch's defaults: 0 and
/// false mean "not set").
struct AllocConf {
  std::uint64_t max_split_size_mb = 0;         ///< blocks above this are never split; 0: no limit
  std::uint64_t roundup_power2_divisions = 0;  ///< sizes rounded up to 1/N of a power of 2; 0: off
  double garbage_collection_threshold = 0;     ///< free cached blocks past this share of the cap; 0: off
  bool async_backend = false;                  ///< backend:cudaMallocAsync (the driver's pool)
};

struct Workload {
  Mode mode = Mode::inference;
  DType weights = DType::bf16;           ///< storage dtype of the weights
  /// How packed weights are stored (method none for fp32/fp16/bf16). `weights` holds the
  /// scheme's packed dtype (packed_dtype), so code that only needs "4-bit" reads that.
  Quantization quant;
  /// The KV cache's storage: the compute dtype when unset; fp8 = one byte per value
  /// (vLLM/TensorRT-LLM style); int8/int4 = Hugging Face's QuantizedCache (HQQ/quanto).
  std::optional<DType> kv_cache;
  std::optional<DType> autocast;         ///< torch.autocast compute dtype (bf16/fp16)
  std::uint64_t batch = 1;
  std::uint64_t seq = 2048;              ///< tokens per sequence (the prompt, for generate)
  std::uint64_t new_tokens = 0;          ///< generated tokens (generate)
  /// Images per sequence (`--images`, vision-language models): each adds its tokens to the
  /// sequence's prompt (spec::image_work) and runs through the vision tower first; 0 = text only.
  /// `seq` stays the text tokens.
  std::uint64_t images = 0;
  /// `--image-size`: each image's width and height in pixels; 0 = the model's default size
  /// (spec::native_image_size).
  std::uint64_t image_width = 0;
  std::uint64_t image_height = 0;
  Optimizer optimizer = Optimizer::adamw;
  bool checkpointing = false;            ///< gradient checkpointing (non-reentrant)
  /// With checkpointing: only every N-th decoder layer is checkpointed (layers i with
  /// i % N == 0, torchtune/torchtitan's selective layer checkpointing); 1 = every layer.
  std::uint64_t checkpoint_every = 1;
  /// With checkpointing: torchtitan's op-level selective policy inside each checkpointed
  /// layer (the outputs of every other mm and of attention are kept, the rest recomputed).
  bool checkpoint_selective = false;
  /// Saved activations are moved to host memory as they are saved
  /// (torch.autograd.graph.save_on_cpu; torchtune's OffloadActivations).
  bool activation_offload = false;
  /// The optimizer steps each parameter in a post-accumulate-grad hook and frees its
  /// gradient at once (torchtune optimizer_in_bwd): no full set of gradients is alive.
  bool optimizer_in_backward = false;
  /// Padding-free packed batches (`--packing`; transformers' DataCollatorWithFlattening, TRL's
  /// padding_free): each of `batch` rows holds `seq` tokens made of several sequences, told
  /// apart by position_ids restarting at 0. With SDPA, transformers' masking_utils builds a
  /// block-diagonal causal mask of (batch, 1, seq, seq) booleans instead of using is_causal.
  bool sequence_packing = false;
  Attention attention = Attention::sdpa;
  Lora lora;
  std::uint64_t grad_accum = 1;
  std::uint64_t gpus = 1;                ///< GPUs per node
  std::uint64_t nodes = 1;               ///< nodes, each with `gpus` GPUs
  Sharding sharding = Sharding::none;
  Offload offload = Offload::none;
  /// 16-bit weights with an fp32 master copy in the optimizer (DeepSpeed bf16/fp16, Megatron,
  /// Apex O2): the state holds master weights + moments, the step an fp32 gradient copy.
  bool master_weights = false;
  /// The loss (`--loss`).
  Loss loss = Loss::hf;
  /// torch.compile of the training step (`--compile [layers|all]`).
  Compile compile = Compile::none;
  /// FSDP's MixedPrecisionPolicy(param_dtype=..., reduce_dtype=fp32) (`--fsdp-mixed-precision`):
  /// fp32 sharded masters, each unit gathered in this 16-bit dtype when it runs.
  std::optional<DType> fsdp_param_dtype;
  /// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (changes the allocator's reserve only).
  bool expandable_segments = false;
  /// The rest of PYTORCH_CUDA_ALLOC_CONF (`--alloc-conf`).
  AllocConf alloc;
  /// `--cuda-context SIZE`: the memory outside PyTorch's allocator on each GPU (CUDA context,
  /// cuBLAS workspaces, kernel images), when the user has measured it; unset: the engine's.
  std::optional<vramfit::Bytes> cuda_context;
  /// The GPU's CUDA compute capability times ten (`--gpu`'s catalog entry: 9.0 -> 90); 0 when
  /// no GPU is named (`--budget`, no budget): the H200's, the GPU the engine was measured on.
  /// SDPA's backend order depends on it (engine/context.hpp: cuDNN attention's graphs).
  unsigned compute_capability = 0;
  /// The GPU's memory as CUDA reports it (`--gpu`'s catalog entry, `--budget`, a truth file's
  /// total_bytes); 0 when none is given. PyTorch's caching allocator, when a new segment does not
  /// fit the card, frees its cached segments and retries before it reports OOM: the replays
  /// reserve within this (less the context) as the allocator would (engine/reserve.cpp).
  std::uint64_t device_memory = 0;

  [[nodiscard]] bool trains() const noexcept { return spec::trains(mode); }
  /// GPUs over all nodes (the data-parallel world for ZeRO/FSDP).
  [[nodiscard]] std::uint64_t world() const noexcept { return gpus * nodes; }
};

/// Parses PYTORCH_CUDA_ALLOC_CONF's syntax (`key:value,key:value`, as
/// c10/cuda/CUDAAllocatorConfig.cpp reads it) into `w.expandable_segments` and `w.alloc`. Keys:
/// expandable_segments (True/False), max_split_size_mb (> 20), roundup_power2_divisions (a
/// power of 2 up to 64), garbage_collection_threshold (0 < t < 1), backend (native,
/// cudaMallocAsync), and the host-side pinned_* and release_lock_on_cudamalloc keys (no GPU
/// memory: accepted). Anything else is a diagnostic naming `field`, as PyTorch refuses it.
void parse_alloc_conf(std::string_view text, Workload& w, Diagnostics& diags, std::string_view field = "--alloc-conf");

/// `w`'s allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax, keys in a fixed order; "" when
/// every one is PyTorch's default.
std::string alloc_conf_string(const Workload& w);

/// A training stack whose default levers `--recipe` sets (spec/workload.cpp has each one's
/// settings and source).
enum class Recipe { hf_trainer, trl_sft, torchtune, axolotl_liger, unsloth };
std::string_view name_of(Recipe r) noexcept;
std::optional<Recipe> parse_recipe(std::string_view s) noexcept;
std::vector<std::string_view> recipe_names();

/// Sets the levers `r` turns on by default for the workload's mode, leaving alone every lever
/// whose flag `given` says was typed (explicit flags win). Modes that do not train are left as
/// they are.
void apply_recipe(Workload& w, Recipe r, bool (*given)(const void* ctx, std::string_view flag), const void* ctx);

/// How the workload's weights are packed: its scheme, or the default one its packed `weights`
/// dtype implies (method none for 16/32-bit weights).
Quantization scheme_of(const Workload& w);

/// Packs the weights as `q`: w.quant = q and w.weights = packed_dtype(q), the pair the engine
/// reads as set; a scheme of method none clears w.quant and leaves the dtype alone.
void set_packing(Workload& w, const Quantization& q);

/// How the command line asked for the weights' packing, before the model is known.
struct PackingRequest {
  std::optional<Quantization> quant;      ///< `--quant` (with `--group-size` applied)
  bool dtype_given = false;               ///< `--dtype` was given (w.weights holds it)
  bool double_quant = false;              ///< `--double-quant`
  std::vector<std::string> skip_modules;  ///< `--skip-modules`
};

/// The one precedence rule for the weights' packing: `--quant`, else a packed `--dtype`
/// (w.weights: its default scheme), else the checkpoint's own quantization_config or GGUF
/// type (when no `--dtype` was given), else QLoRA's nf4 base, else (no `--dtype`) the float dtype
/// the config declares (ModelSpec::stored_dtype); double quantization and the skipped modules then
/// apply to the scheme chosen. Sets w.quant and w.weights together (set_packing). Returns the note
/// to print when the checkpoint's packing or dtype was chosen.
std::optional<std::string> resolve_packing(Workload& w, const ModelSpec& m, const PackingRequest& request);

/// True when the weights are loaded packed as the checkpoint stores them and its tensors were
/// read: the checkpoint's exact bytes are the weights' footprint.
bool keeps_checkpoint_packing(const ModelSpec& m, const Workload& w);

/// Whether a `--lora-targets` entry selects the linear module `module_name`, as peft does
/// (peft/tuners/tuners_utils.py, check_target_module_exists): the same name, or the same
/// last dotted component (`self_attn.q_proj` selects `q_proj`), or a `.target` suffix.
bool lora_target_matches(std::string_view target, std::string_view module_name) noexcept;

/// Stable spellings (flags and JSON).
std::string_view name_of(Mode m) noexcept;
std::string_view name_of(Optimizer o) noexcept;
std::string_view name_of(Attention a) noexcept;
std::string_view name_of(Sharding s) noexcept;
std::string_view name_of(Offload o) noexcept;
std::string_view name_of(Loss l) noexcept;
std::optional<Mode> parse_mode(std::string_view s) noexcept;
std::optional<Optimizer> parse_optimizer(std::string_view s) noexcept;
std::optional<Attention> parse_attention(std::string_view s) noexcept;
std::optional<Sharding> parse_sharding(std::string_view s) noexcept;
std::optional<Offload> parse_offload(std::string_view s) noexcept;
std::optional<Loss> parse_loss(std::string_view s) noexcept;
/// The flag spellings each parse_* accepts, canonical ones only (no aliases), in order: the
/// lists that error messages offer.
std::vector<std::string_view> mode_names();
std::vector<std::string_view> optimizer_names();
std::vector<std::string_view> attention_names();
std::vector<std::string_view> sharding_names();
std::vector<std::string_view> offload_names();
std::vector<std::string_view> loss_names();

/// Checks a workload against a model: sizes, mode/flag consistency, LoRA targets that
/// exist in the model. Adds every problem to `out` (fields are flag names).
void validate(const Workload& w, const ModelSpec& m, Diagnostics& out);

}  // namespace vramfit::spec
