#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/dtype.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/model_spec.hpp"

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

/// torch.optim optimizers and the lean ones people use; see engine/optimizers for sizes.
enum class Optimizer { adamw, adamw_fused, adamw_forloop, adam, sgd, sgd_momentum, adafactor, adamw_8bit, lion };

/// Attention implementation passed as attn_implementation.
enum class Attention { sdpa, eager };

/// Multi-GPU strategy.
enum class Sharding { none, ddp, zero1, zero2, zero3, fsdp, tp, device_map };

/// peft LoRA settings; alpha does not change memory.
struct Lora {
  std::uint64_t rank = 16;
  bool all_linear = true;                ///< peft's "all-linear" shorthand
  std::vector<std::string> targets;      ///< module names when not all_linear
  double dropout = 0.0;
};

/// A workload: the mode and every knob that changes memory.
struct Workload {
  Mode mode = Mode::inference;
  DType weights = DType::bf16;           ///< storage dtype of the weights
  std::optional<DType> autocast;         ///< torch.autocast compute dtype (bf16/fp16)
  std::uint64_t batch = 1;
  std::uint64_t seq = 2048;              ///< tokens per sequence (the prompt, for generate)
  std::uint64_t new_tokens = 0;          ///< generated tokens (generate)
  Optimizer optimizer = Optimizer::adamw;
  bool checkpointing = false;            ///< gradient checkpointing (non-reentrant)
  Attention attention = Attention::sdpa;
  Lora lora;
  std::uint64_t grad_accum = 1;
  std::uint64_t gpus = 1;
  Sharding sharding = Sharding::none;
  /// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (changes the allocator's reserve only).
  bool expandable_segments = false;

  [[nodiscard]] bool trains() const noexcept { return mode == Mode::train || uses_lora(mode); }
};

/// Whether a `--lora-targets` entry selects the linear module `module_name`, as peft does
/// (peft/tuners/tuners_utils.py, check_target_module_exists): the same name, or the same
/// last dotted component (`self_attn.q_proj` selects `q_proj`), or a `.target` suffix.
bool lora_target_matches(std::string_view target, std::string_view module_name) noexcept;

/// Stable spellings (flags and JSON).
std::string_view name_of(Mode m) noexcept;
std::string_view name_of(Optimizer o) noexcept;
std::string_view name_of(Attention a) noexcept;
std::string_view name_of(Sharding s) noexcept;
std::optional<Mode> parse_mode(std::string_view s) noexcept;
std::optional<Optimizer> parse_optimizer(std::string_view s) noexcept;
std::optional<Attention> parse_attention(std::string_view s) noexcept;
std::optional<Sharding> parse_sharding(std::string_view s) noexcept;

/// Checks a workload against a model: sizes, mode/flag consistency, LoRA targets that
/// exist in the model. Adds every problem to `out` (fields are flag names).
void validate(const Workload& w, const ModelSpec& m, Diagnostics& out);

}  // namespace vramfit::spec
