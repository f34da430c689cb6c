#pragma once

#include "vramfit/core/bytes.hpp"

namespace vramfit::engine {

/// cuBLAS and cuBLASLt workspaces that PyTorch allocates through its caching allocator on
/// the first matmul of a stream (counted by torch.cuda.memory_allocated()). Measured on the
/// H200 (torch 2.11, CUDA 13): resident bytes minus weights is 66 MiB for every model in
/// shared/truth (e.g. qwen2.5-1.5b: 3156635648 - 2 * 1543714304 bytes = 69207040 = 66 MiB).
inline constexpr Bytes kCublasWorkspace = MiB(66);

/// Device memory outside PyTorch's allocator: the CUDA context, cuBLAS handles and the
/// kernel images loaded by a transformer workload. Median of `non_torch_bytes` over the
/// 157 measured cases of shared/truth (H200, torch 2.11): 938.8 MiB; the context alone
/// after init is 685 MiB (718077952 bytes). Since session 11 the estimate's context is modelled
/// from its parts (engine/context.hpp) and this median is its floor, the allowance for a process
/// that ran other work before the job.
inline constexpr Bytes kCudaContext = Bytes{938ULL * 1024 * 1024 + 819ULL * 1024};

/// PyTorch's caching allocator maps large segments in 2 MiB multiples (kRoundLarge in
/// c10/cuda/CUDACachingAllocator.cpp): the reserve is rounded to it.
inline constexpr std::uint64_t kSegmentRound = 2ULL * 1024 * 1024;

}  // namespace vramfit::engine
