#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/bytes.hpp"

namespace vramfit::engine {

/// The parts of an estimate, in report order. Their names (kComponents) are API: JSON readers
/// depend on them. A new part is one enumerator and one row of kComponents.
enum class ComponentId : std::uint8_t {
  weights,
  lora_adapters,
  cublas_workspace,
  gradients,
  optimizer_state,
  optimizer_step,
  autocast_cache,
  activations,
  kv_cache,
  logits,
  temporaries,
  sharding_buffers,
  block_rounding,  ///< memory_allocated() counts whole blocks (replayed steps only)
  allocator_reserve,
  cuda_context,
  paged_optimizer_state,  ///< only with a paged optimizer
  mmproj,                 ///< llama.cpp: the multimodal projector
  compute_buffer,         ///< llama.cpp: the graph allocator's compute buffer (keep last, or move kComponentCount)
};
inline constexpr std::size_t kComponentCount = static_cast<std::size_t>(ComponentId::compute_buffer) + 1;

struct ComponentInfo {
  ComponentId id;
  std::string_view name;         ///< the id in JSON and text
  std::string_view description;  ///< the transformers engine's description
  bool per_phase;                ///< the transformers engine sums it from the peak phase
};

/// One row per ComponentId, in enumerator order (tested).
inline constexpr std::array<ComponentInfo, kComponentCount> kComponents{{
    {ComponentId::weights, "weights", "model parameters and buffers as stored", true},
    {ComponentId::lora_adapters, "lora_adapters", "LoRA A and B matrices (fp32, as peft creates them)", true},
    {ComponentId::cublas_workspace, "cublas_workspace",
     "cuBLAS/cuBLASLt workspaces allocated through PyTorch's allocator", true},
    {ComponentId::gradients, "gradients", "parameter gradients (.grad), in the parameters' dtype", true},
    {ComponentId::optimizer_state, "optimizer_state", "optimizer state tensors (moments, momentum)", true},
    {ComponentId::optimizer_step, "optimizer_step", "temporaries of optimizer.step()", true},
    {ComponentId::autocast_cache, "autocast_cache", "16-bit copies of fp32 weights made by autocast, kept for backward",
     true},
    {ComponentId::activations, "activations", "tensors saved for backward (or live intermediates, in inference)", true},
    {ComponentId::kv_cache, "kv_cache", "keys and values of every layer for every token", true},
    {ComponentId::logits, "logits", "logits, their fp32 copy, log-softmax and their gradients", true},
    {ComponentId::temporaries, "temporaries", "short-lived buffers at the peak (gradients flowing through a layer)",
     true},
    {ComponentId::sharding_buffers, "sharding_buffers",
     "multi-GPU buffers: DDP gradient buckets, FSDP/ZeRO-3 gathered layers", true},
    {ComponentId::block_rounding, "block_rounding",
     "allocator blocks beyond the requested bytes: 512-byte rounding and remainders of 1 MiB or less left unsplit",
     true},
    {ComponentId::allocator_reserve, "allocator_reserve",
     "reserved by PyTorch's caching allocator beyond the allocated peak", false},
    {ComponentId::cuda_context, "cuda_context", "CUDA context, cuBLAS handles and kernel images (outside PyTorch)",
     false},
    {ComponentId::paged_optimizer_state, "paged_optimizer_state",
     "bitsandbytes paged optimizer state in CUDA unified memory (outside PyTorch's allocator)", false},
    {ComponentId::mmproj, "mmproj", "multimodal projector (llama.cpp --mmproj)", false},
    {ComponentId::compute_buffer, "compute_buffer", "compute buffer (llama.cpp's graph allocator)", false},
}};

static_assert([] {
  for (std::size_t i = 0; i < kComponents.size(); ++i)
    if (static_cast<std::size_t>(kComponents[i].id) != i || kComponents[i].name.empty()) return false;
  return true;
}(), "kComponents: one named row per ComponentId, in the enum's order");

[[nodiscard]] constexpr const ComponentInfo& info(ComponentId id) noexcept {
  return kComponents[static_cast<std::size_t>(id)];
}
[[nodiscard]] constexpr std::string_view to_string(ComponentId id) noexcept { return info(id).name; }
/// The component of this JSON name, or nullopt.
[[nodiscard]] std::optional<ComponentId> parse_component(std::string_view name) noexcept;

/// The phases of a step, in the order the engines build them. Their names (kPhases) are API.
enum class PhaseId : std::uint8_t {
  load,                 ///< what is resident before the step: weights, adapters, workspaces, state
  vision_tower,         ///< --images: the vision tower's forward, before the language model
  forward_logits,       ///< inference: the logits of every position
  forward_layer,        ///< one layer's forward transients: inference's MLP intermediates; training's last layer and final norm when the loss builds no logits
  forward_attention,    ///< inference, eager attention: one layer's scores
  prefill,              ///< generate: the prompt's cache, one layer's intermediates, last logits
  prefill_attention,    ///< generate, eager attention: the prompt's scores
  decode,               ///< generate: the last decode step (the whole cache); llama.cpp: serving
  forward_end,          ///< training: every saved activation plus the loss
  backward_start,       ///< training: the loss's backward
  backward_recompute,   ///< training, checkpointing: the last layer recomputed
  backward_last_layer,  ///< training: the first layer's backward with nearly every gradient
  backward_end,         ///< training: every gradient and the embedding's
  optimizer_step,       ///< training: gradients, state and the step's temporaries
  profile,              ///< vLLM: the profile run at max_num_batched_tokens
  serve,                ///< vLLM: weights, activations and the KV blocks (keep last, or move kPhaseCount)
};
inline constexpr std::size_t kPhaseCount = static_cast<std::size_t>(PhaseId::serve) + 1;

struct PhaseInfo {
  PhaseId id;
  std::string_view name;  ///< the id in JSON and text
  bool backward;          ///< a phase of the backward pass
};

/// One row per PhaseId, in enumerator order (tested).
inline constexpr std::array<PhaseInfo, kPhaseCount> kPhases{{
    {PhaseId::load, "load", false},
    {PhaseId::vision_tower, "vision_tower", false},
    {PhaseId::forward_logits, "forward_logits", false},
    {PhaseId::forward_layer, "forward_layer", false},
    {PhaseId::forward_attention, "forward_attention", false},
    {PhaseId::prefill, "prefill", false},
    {PhaseId::prefill_attention, "prefill_attention", false},
    {PhaseId::decode, "decode", false},
    {PhaseId::forward_end, "forward_end", false},
    {PhaseId::backward_start, "backward_start", true},
    {PhaseId::backward_recompute, "backward_recompute", true},
    {PhaseId::backward_last_layer, "backward_last_layer", true},
    {PhaseId::backward_end, "backward_end", true},
    {PhaseId::optimizer_step, "optimizer_step", false},
    {PhaseId::profile, "profile", false},
    {PhaseId::serve, "serve", false},
}};

static_assert([] {
  for (std::size_t i = 0; i < kPhases.size(); ++i)
    if (static_cast<std::size_t>(kPhases[i].id) != i || kPhases[i].name.empty()) return false;
  return true;
}(), "kPhases: one named row per PhaseId, in the enum's order");

[[nodiscard]] constexpr const PhaseInfo& info(PhaseId id) noexcept { return kPhases[static_cast<std::size_t>(id)]; }
[[nodiscard]] constexpr std::string_view to_string(PhaseId id) noexcept { return info(id).name; }
/// The phase of this JSON name, or nullopt.
[[nodiscard]] std::optional<PhaseId> parse_phase(std::string_view name) noexcept;

/// One labelled part of the estimate.
struct Component {
  ComponentId id;
  Bytes bytes;
  std::string description;
  bool in_peak_allocated = true;  ///< false for allocator_reserve and cuda_context
};

/// Allocated bytes at the worst moment of one phase of the step.
struct Phase {
  PhaseId id;
  Bytes allocated;
  Bytes block_rounding{};  ///< of `allocated`: what whole allocator blocks add (ComponentId::block_rounding)
};

/// The estimate. Invariants (tested on every case):
///   sum of components with in_peak_allocated == peak_allocated
///   peak_allocated + allocator_reserve + cuda_context (+ paged_optimizer_state) == device_total
///   peak_allocated == max over phases
struct Breakdown {
  std::vector<Component> components;
  std::vector<Phase> phases;
  std::optional<PhaseId> peak_phase;  ///< the phase that sets the peak (none in a default Breakdown)
  Bytes peak_allocated;          ///< what torch.cuda.max_memory_allocated() would report
  Bytes allocator_reserve;       ///< reserved by the caching allocator beyond the peak
  Bytes cuda_context;            ///< CUDA context, cuBLAS workspace, kernel images
  Bytes device_total;            ///< what the GPU must have free before the job starts
  /// device_total times the 95th percentile of measured / estimated device totals over the
  /// measured cases of this kind of workload (data/calibration.json; engine::upper_factor).
  /// Zero when no calibration applies (serving engines): upper() is then device_total.
  Bytes device_total_upper;
  std::string upper_group;       ///< the workload's calibration group ("train/single/ckpt")
  std::string upper_from;        ///< the group whose measured cases set the factor
  std::uint64_t upper_permille = 0;  ///< the factor in thousandths (0 without calibration)
  std::size_t upper_cases = 0;   ///< measured cases behind upper_from
  std::vector<std::string> notes;  ///< assumptions and what is not modelled

  /// The upper bound of the device total: device_total_upper, never below device_total.
  [[nodiscard]] Bytes upper() const noexcept {
    return device_total_upper > device_total ? device_total_upper : device_total;
  }
  /// The component with this id, or nullptr.
  [[nodiscard]] const Component* find(ComponentId id) const noexcept;
};

}  // namespace vramfit::engine
