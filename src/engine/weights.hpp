#pragma once
// Internal to the engine: the bytes the stored weights take, plain or quantized.

#include <cstdint>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

/// PyTorch's caching allocator rounds every block up to 512 bytes (kMinBlockSize in
/// c10/cuda/CUDACachingAllocator.cpp), and memory_allocated() counts the rounded size: it
/// matters for the small per-tensor scale tensors of quantized formats.
inline constexpr std::uint64_t kMinBlock = 512;

/// Bytes one linear module takes stored under scheme `q` (all of its copies; scales, zeros
/// and index tensors included, each rounded to the allocator's block).
Bytes quantized_linear_bytes(const spec::Linear& l, const spec::Quantization& q);

/// True when `q` leaves the linear `l` in 16 bits (skip_modules, matched like LoRA targets).
bool skipped(const spec::Linear& l, const spec::Quantization& q);

/// The weights and buffers of the model as the workload stores them: 16/32-bit parameters,
/// or the decoder's linears packed (embeddings, lm_head, norms and skipped modules stay 16-bit),
/// or the exact bytes of a pre-quantized checkpoint when the workload keeps its scheme.
Bytes weight_bytes(const spec::ModelSpec& m, const spec::Workload& w, std::uint64_t param_bytes);

/// The largest linear's weight dequantized to 16 bits: the buffer packed kernels fill per matmul.
Bytes dequant_buffer(const spec::ModelSpec& m);

}  // namespace vramfit::engine::detail
