#pragma once
// Internal to the engine: the memory levers training stacks pull (issue #18). Each function
// says what one lever changes in what is allocated; estimate.cpp re-runs its phases with it.

#include <cstdint>

#include "activations.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

/// Whether torch.autocast keeps its 16-bit casts of the weights in its cache until the
/// autocast region ends. PyTorch caches a cast only for an fp32 leaf tensor that requires
/// grad and is not a view (aten/src/ATen/autocast_mode.cpp, cached_cast's can_try_cache):
/// trained weights, not LoRA's frozen base nor FSDP's unsharded parameters (views into the
/// all-gather buffer). Uncached casts are made per use and live only as long as autograd
/// saves them.
bool autocast_caches_weights(const spec::Workload& w);

/// Bytes the loss holds at the end of forward and at the start of backward (the `logits`
/// component of those phases).
struct LossBytes {
  Bytes forward_end;
  Bytes backward_start;
  /// A loss that runs the trained lm_head once per chunk (torchtune's): the moment of its
  /// backward where the chunks' vocab x hidden weight gradients are summed (chunked_head_backward
  /// in levers.cpp): the chunks' logits gradients still waiting (`logits`), autograd's
  /// accumulated gradient (`gradients`) and the new product and the sum (`temporaries`). All 0
  /// otherwise.
  Bytes head_logits{};
  Bytes head_gradients{};
  Bytes head_temporaries{};
  /// The lm_head's gradient reaches its AccumulateGrad as a sum autograd made (a fresh tensor):
  /// a tied embedding's gradient is then added to it in place.
  bool head_grad_summed = false;
};

/// The loss's bytes for `tokens` tokens under the workload's `--loss`.
LossBytes loss_bytes(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p, std::uint64_t tokens);

/// Bytes per token that the lm_head's matmul saves for backward and that a fused linear
/// cross-entropy does not (it computes the gradients in forward: no autograd matmul).
std::uint64_t lm_head_input_not_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p);

/// Bytes per token of the lm_head's input that the loss saves although the lm_head is frozen
/// (LoRA): Cut Cross-Entropy saves e for its backward (its 16-bit cast under autocast).
std::uint64_t frozen_head_input_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p);

/// Bytes per element of a parameter FSDP gathers: the MixedPrecisionPolicy's param_dtype
/// (`--fsdp-mixed-precision`), else the stored dtype.
std::uint64_t gathered_param_bytes(const spec::Workload& w, const Precision& p);

/// Bytes per token one decoder layer of `g` keeps under torchtitan's op-level selective
/// activation checkpointing: its input (the checkpoint's argument), the outputs of every other
/// bias-free linear (aten.mm; a linear with a bias runs addmm, which is recomputed) counted
/// from the first, and attention's output and fp32 logsumexp.
std::uint64_t selective_layer_saved(const spec::ModelSpec& m, const spec::LayerGroup& g, const Precision& p);

/// Decoder layers of a group of `count` layers starting at layer `first` that checkpointing
/// wraps, when every `every`-th layer is (layers i with i % every == 0).
std::uint64_t checkpointed_layers(std::uint64_t first, std::uint64_t count, std::uint64_t every);

/// Whether packed rows (`--packing`) make transformers hand SDPA an explicit mask: masking_utils'
/// create_causal_mask finds the packed sequences from position_ids (find_packed_sequence_indices)
/// and, as the mask is no longer plain causal, builds a (batch, 1, seq, seq) boolean
/// block-diagonal causal mask instead of SDPA's is_causal; with a mask, transformers'
/// use_gqa_in_sdpa is false (repeat_kv copies k and v) and the flash kernel is ruled out.
bool packed_sdpa_mask(const spec::Workload& w);

/// Bytes per token and key position that each decoder layer saves for backward because of the
/// packed mask: SDPA converts the boolean mask to an additive one in the query's dtype
/// (aten/src/ATen/native/transformers/attention.cpp, convert_boolean_attn_mask: zeros_like +
/// masked_fill with -inf) on every call, and the memory-efficient kernel saves that bias for
/// its backward. 0 without packing.
std::uint64_t packed_mask_bias(const spec::Workload& w, const Precision& p);

/// Bytes per token one decoder layer of `g` saves in eager but not when the layer is compiled
/// (`--compile`): AOTAutograd's min-cut partitioner (torch/_functorch/partitioners.py,
/// min_cut_rematerialization_partition) saves what is costly to recompute (matmul and attention
/// outputs, reductions) and recomputes cheap pointwise chains in backward from it, and common
/// subexpression elimination merges identical ops. Each pre-norm keeps its 16-bit input instead
/// of its fp32 copy and normalised output; a gated MLP keeps gate, up and the product and
/// recomputes act(gate); LoRA adapters reading one tensor share one fp32 cast of it.
/// 0 when the layer is not compiled.
std::uint64_t compiled_layer_not_saved(const spec::ModelSpec& m, const spec::LayerGroup& g, const spec::Workload& w,
                                       const Precision& p);

/// torchtune's CEWithChunkedOutputLoss default (num_output_chunks = 8).
inline constexpr std::uint64_t kLossChunks = 8;

/// Rows of one chunk of Liger's fused linear cross-entropy over `tokens` rows, hidden `h`,
/// vocabulary `v`: next_power_of_2(ceil(tokens / ceil(v / h))) (at most `tokens`).
std::uint64_t fused_linear_chunk_rows(std::uint64_t tokens, std::uint64_t h, std::uint64_t v);

/// Rows of one chunk of Unsloth's fused cross-entropy over `tokens` rows and vocabulary `v`
/// (unsloth_zoo fused_losses/cross_entropy_loss.py, get_chunk_size with a 4 GiB target).
std::uint64_t unsloth_chunk_rows(std::uint64_t tokens, std::uint64_t v);

}  // namespace vramfit::engine::detail
