#pragma once
// Every fix vramfit names, one row each. The advisor's walk (advisor/advise.cpp) and the OOM
// doctor's hints (doctor/diagnose.cpp) read this one table, so a fix has one id everywhere
// (JSON, --allow, --deny, explain's list). The ids are API: scripts and CI read them.

#include <array>
#include <optional>
#include <string_view>

namespace vramfit {

/// The fixes, in the table's order.
enum class Fix {
  reduce_batch,
  mixed_precision,
  gradient_checkpointing,
  quantize,  ///< either quantization step: the doctor's hint, an alias in --allow/--deny
  quantize_8bit,
  quantize_4bit,
  inference_mode,
  expandable_segments,
  free_other_processes,
  raise_memory_fraction,
  chunked_logits,
  selective_checkpointing,
  activation_offload,
  optimizer_in_backward,
  compile,
  fused_attention,
  shorter_sequence,
  larger_gpu,
};

/// One fix.
struct FixRow {
  Fix fix;
  std::string_view id;  ///< stable id
  /// Its number in the seed's ordered list (shared/seed, "Les correctifs, dans l'ordre"):
  /// 1 to 6; 0 when the fix does not come from that list.
  int seed_step = 0;
  /// The advisor's short title when the walk tries this fix (in table order); empty when the
  /// walk does not (the doctor's own hints, the quantize alias).
  std::string_view walk_title;
  /// The doctor's one-line instruction when it suggests this fix; empty when it does not (the
  /// walk's two quantization steps, which the doctor names together as `quantize`).
  std::string_view hint;
  /// The fixes an alias stands for in --allow/--deny (quantize: both quantization steps).
  std::array<std::optional<Fix>, 2> stands_for{};
};

/// The table. Order: the seed's six steps in its order (quantize and its two walk steps share
/// step 4), then the doctor's own fixes.
inline constexpr std::array<FixRow, 18> kFixTable{{
    // 1. fewer samples per step, same effective batch through gradient accumulation
    {Fix::reduce_batch, "reduce_batch", 1, "Smaller micro-batch",
     "Halve the batch size; keep the effective batch with gradient accumulation"},
    // 2. activations in 16 bits: torch.autocast with bf16 (or fp16 and a GradScaler); 16-bit
    //    weights for inference
    {Fix::mixed_precision, "mixed_precision", 2, "Mixed precision",
     "Use mixed precision: torch.autocast with bfloat16 (fp16 with a GradScaler)"},
    // 3. recompute activations in backward instead of keeping them (training only)
    {Fix::gradient_checkpointing, "gradient_checkpointing", 3, "Gradient checkpointing",
     "Turn on gradient checkpointing (model.gradient_checkpointing_enable())"},
    // 4. 8- or 4-bit weights (bitsandbytes), QLoRA for fine-tuning: the doctor's single hint,
    //    and the name that denies or allows both walk steps at once
    {Fix::quantize, "quantize", 4, "",
     "Load the weights in 8 or 4 bits (bitsandbytes); fine-tune with QLoRA",
     {Fix::quantize_8bit, Fix::quantize_4bit}},
    // 4a. int8 weights (inference, LoRA base); never for full fine-tuning
    {Fix::quantize_8bit, "quantize_8bit", 4, "8-bit weights", ""},
    // 4b. nf4 weights (inference), QLoRA (LoRA, or full fine-tuning that cannot fit)
    {Fix::quantize_4bit, "quantize_4bit", 4, "4-bit weights", ""},
    // 5. no autograd state when only running the model (the engine already assumes it)
    {Fix::inference_mode, "inference_mode", 5, "Inference mode",
     "For inference, run under torch.inference_mode() with model.eval()"},
    // 6. fragmentation: let the allocator grow segments (the doctor's title names the variable
    //    the message used)
    {Fix::expandable_segments, "expandable_segments", 6, "Expandable allocator segments",
     "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
    // other processes on the card
    {Fix::free_other_processes, "free_other_processes", 0, "",
     "Free the GPU: stop the other processes on it (nvidia-smi), or use another GPU "
     "(CUDA_VISIBLE_DEVICES)"},
    // a per-process cap set by the program
    {Fix::raise_memory_fraction, "raise_memory_fraction", 0, "",
     "Raise the per-process memory cap (torch.cuda.set_per_process_memory_fraction)"},
    // huge logits
    {Fix::chunked_logits, "chunked_logits", 0, "Fused or chunked loss",
     "Compute logits and loss in chunks, or only for the positions needed (logits_to_keep)"},
    // The training levers beyond the seed (engine/levers), tried by the walk after the seed's
    // steps: part of each layer's activations kept (when full checkpointing is ruled out)
    {Fix::selective_checkpointing, "selective_checkpointing", 0, "Selective activation checkpointing", ""},
    // saved activations in host memory
    {Fix::activation_offload, "activation_offload", 0, "Activation offloading", ""},
    // no full set of gradients alive
    {Fix::optimizer_in_backward, "optimizer_in_backward", 0, "Optimizer step in backward", ""},
    // fused kernels that save fewer intermediates (torch.compile of the layers and the loss)
    {Fix::compile, "compile", 0, "torch.compile", ""},
    // huge attention scores
    {Fix::fused_attention, "fused_attention", 0, "",
     "Use fused attention: attn_implementation=\"sdpa\" or \"flash_attention_2\" instead of eager"},
    // both grow with the sequence
    {Fix::shorter_sequence, "shorter_sequence", 0, "Shorter sequences",
     "Shorten the sequences (max_length, truncation, packing)"},
    // the seed's last resort ("Quand passer à un GPU avec plus de VRAM")
    {Fix::larger_gpu, "larger_gpu", 0, "",
     "Use a GPU with more memory, or shard over several GPUs (FSDP, device_map=\"auto\")"},
}};

/// The row of a fix (rows are in enum order: checked at compile time below).
constexpr const FixRow& fix_row(Fix f) noexcept { return kFixTable[static_cast<std::size_t>(f)]; }

/// The fix with this id, if any.
constexpr std::optional<Fix> fix_of(std::string_view id) noexcept {
  for (const FixRow& r : kFixTable)
    if (r.id == id) return r.fix;
  return std::nullopt;
}

namespace detail {
constexpr bool fix_table_in_enum_order() {
  for (std::size_t i = 0; i < kFixTable.size(); ++i)
    if (static_cast<std::size_t>(kFixTable[i].fix) != i) return false;
  return static_cast<std::size_t>(Fix::larger_gpu) + 1 == kFixTable.size();
}
}  // namespace detail
static_assert(detail::fix_table_in_enum_order(), "kFixTable: one row per Fix, in the enum's order");

}  // namespace vramfit
