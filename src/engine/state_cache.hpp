#pragma once
// Internal to the engine: the linear-attention layers of hybrid models (qwen3_next's Gated
// DeltaNet, spec::LinearAttention): their state caches, the transients of their forward on
// transformers' torch path, and the modes they are estimated in (src/engine/state_cache.cpp).

#include <cstdint>

#include "activations.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

/// Decoder layers that keep keys and values: all of them but the linear-attention ones.
std::uint64_t attention_layers(const spec::ModelSpec& m) noexcept;

/// The linear-attention layers' cache for `batch` sequences (0 without such layers): per layer, a
/// conv state (batch x conv_dim x conv_kernel, compute dtype) and a recurrent state (batch x
/// value_heads x key_head_dim x value_head_dim, fp32), whatever the sequence length.
Bytes linear_state_cache(const spec::ModelSpec& m, std::uint64_t batch, const Precision& p);

/// The peak transient bytes of one linear-attention layer's forward over `batch` sequences of
/// `seq` tokens (prefill or use_cache=False), beside what the model holds before it (0 without
/// such layers).
Bytes linear_attention_forward(const spec::ModelSpec& m, std::uint64_t batch, std::uint64_t seq, const Precision& p);

/// The peak transient bytes of one linear-attention layer's decode step (one token a sequence).
Bytes linear_attention_decode(const spec::ModelSpec& m, std::uint64_t batch, const Precision& p);

/// Throws InputError (field "--mode") for a workload that trains a model with linear-attention
/// layers (train, lora, qlora): their backward is not modelled.
void refuse_linear_attention_training(const spec::ModelSpec& m, const spec::Workload& w);

}  // namespace vramfit::engine::detail
