#pragma once
// Internal to the engine: what one forward pass keeps and creates, per token.
// Every size below is computed with checked_mul / checked_add: a function that would pass
// 2^64 - 1 bytes throws InputError (field "size") instead of returning a wrapped value.

#include <cstdint>

#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

/// The dtypes a workload computes in, in bytes per element.
struct Precision {
  std::uint64_t param = 2;     ///< stored weights (16-bit base for quantized weights' compute)
  std::uint64_t compute = 2;   ///< outputs of matmuls (2 under autocast or 16-bit weights)
  std::uint64_t residual = 2;  ///< the residual stream (4 when the weights are fp32)
  bool autocast = false;       ///< fp32 weights cast to 16 bits op by op
  bool quantized = false;      ///< weights stored in 8 or 4 bits (dequantized per matmul)
  std::uint64_t adapter = 4;   ///< LoRA adapters' compute dtype (peft keeps them fp32; FSDP
                               ///< mixed precision gathers them in its 16-bit param_dtype)
};

/// The precision of a workload.
Precision precision_of(const spec::Workload& w);

/// Bytes one decoder layer keeps for backward during training, split by how they scale.
struct LayerSaved {
  std::uint64_t per_token = 0;          ///< bytes per token of the batch
  std::uint64_t per_token_position = 0; ///< bytes per token per key position (s x s scores)
  std::uint64_t fixed = 0;              ///< bytes independent of tokens (autocast weight copies)
};

/// What one layer of `group` saves for backward in training or LoRA (`w.mode`).
LayerSaved layer_saved(const spec::ModelSpec& m, const spec::LayerGroup& group, const spec::Workload& w,
                       const Precision& p);

/// Bytes the model keeps outside the decoder layers for backward, per token (final norm,
/// lm_head input; the logits are counted apart), and the fixed autocast copy of lm_head.
LayerSaved head_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p);

/// Transient bytes of one layer's forward without autograd (inference_mode), per phase.
struct InferencePeak {
  std::uint64_t mlp_per_token = 0;            ///< MLP intermediates
  std::uint64_t attn_per_token = 0;           ///< eager attention: hidden-sized buffers
  std::uint64_t attn_per_token_position = 0;  ///< eager attention: score matrices
};

/// The transients of one layer of `group` in inference.
InferencePeak inference_layer_peak(const spec::ModelSpec& m, const spec::LayerGroup& group,
                                   const spec::Workload& w, const Precision& p);

/// Bytes per token of the largest gradient transient while backward runs through one layer.
std::uint64_t backward_layer_transient(const spec::ModelSpec& m, const spec::LayerGroup& group,
                                       const spec::Workload& w, const Precision& p);

/// Bytes per token alive during the last decoder layer's forward and the final norm beyond what
/// autograd keeps (training): the transients of the two moments a forward without logits peaks
/// at (engine/activations.cpp has the tensors, from transformers 5.17 and peft 0.21).
struct ForwardTransient {
  std::uint64_t mlp_out = 0;     ///< at the last layer's MLP output linear (down_proj), before the head
  std::uint64_t final_norm = 0;  ///< at the final norm, beside every saved tensor
  bool has_mlp_moment = false;   ///< false where the layer's MLP is not modelled tensor by tensor
  std::uint64_t norm_backward = 0;  ///< the final norm's backward: its fp32 temporaries, per token
};

/// The last layer's and the final norm's forward transients for this workload.
ForwardTransient forward_transient(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p);

/// Bytes per token a pre-norm of the residual stream saves for its own backward in eager (its
/// fp32 copy, and its normalised output when the weight trains; RMSNorm and LayerNorm alike).
std::uint64_t pre_norm_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p);

/// True when a LoRA adapter sits on the module `name` for this workload.
bool lora_targets(const spec::Workload& w, const spec::Linear& l);

}  // namespace vramfit::engine::detail
