#pragma once
// Device memory outside PyTorch's allocator (the `cuda_context` component), from its parts.
//
// `non_torch_bytes` (total - free - torch.cuda.memory_reserved(), measure.py) is not a constant: it
// is the CUDA context, plus the kernel modules a process has loaded so far (CUDA's lazy loading
// loads a module at its first launch), plus the cuDNN graphs PyTorch's SDPA has built so far. It
// only grows through a process. Measured on the H200 (torch 2.11+cu130, driver 580.159.04) in every
// results file (shared/truth public, heldout*, h200/architectures, alloc/fresh):
//
//   part                                                            MiB     where it is seen
//   after CUDA init, a bf16 matmul and empty_cache                  684.8   every env line (718077952 bytes)
//   kernels of a first forward (eager, fp32 or no cuDNN)            +2      686.8 after any first forward
//   cuDNN SDPA: the library's kernels, first 16-bit sdpa forward    +8      694.8 for every fresh bf16/fp16 forward
//   kernels of a first training step (autograd, loss, optimizer)   +64     750.8 fresh fp32 or eager training
//   cuDNN SDPA backward on the autograd thread                     +8      766.8 fresh 16-bit sdpa training
//   each further model trained in the process                      +2      shapes' GEMM/optimizer kernels (fit)
//   one cuDNN attention graph per distinct SDPA shape              92 KiB  fitted over 57 generate cases, below
//
// The driver maps these in 2 MiB pages: every measured value is 684.8 + an even number of MiB, and
// the parts above init are summed, then rounded up to 2 MiB.
//
// The graphs: on SM90/SM10x with cuDNN newer than 9.15.0, PyTorch puts cuDNN attention first in
// SDPA's priority order (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp,
// check_prefer_cudnn_attention; can_use_cudnn_attention: fp16/bf16 inputs, head dims multiples of 8
// up to 256 on SM90, a key length other than 1; masks allowed, so prefill, q_len=1 decode and
// backward all take it). The H200 data confirms it for torch 2.11+cu130: 16-bit sdpa grows per
// shape, fp32 sdpa (not cuDNN: it falls to efficient attention) and eager do not.
// aten/src/ATen/native/cudnn/MHA.cpp builds one cudnn_frontend graph per MHAParams key (dtype,
// q/k/v sizes and strides, b, h, s_q, s_kv, d, causal, bias) and keeps it in a thread_local,
// unbounded MHAGraphCache (one for forward, one for backward; pytorch PR #190388 adds an opt-in cap,
// TORCH_CUDNN_SDPA_LRU_CACHE_LIMIT). Each `generate` decode step attends over one more key: a new
// s_kv, a new graph, for every step of every call, kept until the process ends. Eager attention and
// fp32 sdpa (not cuDNN) add none: measured, generate with attn=eager adds 0 MiB.
//
//   new tokens  cases  measured growth (MiB)   model: 92 KiB x shapes (MiB)
//   32          13     2-4                     2.9
//   64          1      6                       5.8
//   100         5      8-12                    9.0
//   128         2      12                      11.5
//   200         1      22                      18.0
//   256         20     20-26                   23.0
//   300         8      24-32                   27.0
//   512         7      42-50                   46.0
// (growth: non_torch_bytes after the case minus the case before it, cuDNN already loaded; least
// squares over the 57 cases: 92.0 KiB per shape, intercept 0.33 MiB.)

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

inline constexpr Bytes kContextAfterInit{718077952};
inline constexpr Bytes kForwardKernels = MiB(2);
inline constexpr Bytes kCudnnAttentionKernels = MiB(8);
inline constexpr Bytes kTrainingKernels = MiB(64);
inline constexpr Bytes kCudnnBackwardKernels = MiB(8);
inline constexpr Bytes kTrainedModelKernels = MiB(2);
inline constexpr Bytes kCudnnPlan{92ULL * 1024};
inline constexpr std::uint64_t kDriverPage = 2ULL * 1024 * 1024;

/// What a process has loaded outside PyTorch's allocator so far.
struct ContextState {
  bool forward = false;          ///< a forward ran (kForwardKernels)
  bool training = false;         ///< a training step ran (kTrainingKernels)
  bool cudnn = false;            ///< cuDNN SDPA ran (kCudnnAttentionKernels)
  bool cudnn_backward = false;   ///< cuDNN SDPA backward ran (kCudnnBackwardKernels)
  std::set<std::string> trained_models;  ///< models trained so far (kTrainedModelKernels each after the first)
  /// The cuDNN graphs cached so far: per key (thread, pass, dtype, b, heads, kv heads, head dims,
  /// s_q, causal), the key lengths, as sorted disjoint closed intervals.
  std::map<std::array<std::uint64_t, 9>, std::vector<std::pair<std::uint64_t, std::uint64_t>>> plans;
  std::uint64_t plan_count = 0;  ///< distinct graphs, all keys
};

/// The context a process holds after `state`: kContextAfterInit + its parts rounded up to 2 MiB.
Bytes context_bytes(const ContextState& state);

/// Adds what `w` on `m` loads to `state`; returns the number of cuDNN graphs it builds that the
/// process did not have. Closed form per key (a decode's key lengths are one interval): no loop
/// over generated tokens.
std::uint64_t add_workload(ContextState& state, const spec::ModelSpec& m, const spec::Workload& w);

/// Whether PyTorch's SDPA tries cuDNN attention first on a GPU of compute capability `cc` x 10
/// (sdp_utils.cpp check_prefer_cudnn_attention: major 9 or 10 with minor 0, i.e. sm90 (H100,
/// H200, H20, GH200) and sm100 (B200, GB200)); elsewhere flash attention (sm80-sm121) or
/// efficient attention runs 16-bit SDPA and builds no cuDNN graph. 0 (no GPU named): the H200's.
bool prefers_cudnn_attention(unsigned cc);

/// Whether SDPA runs `w` on `m` through cuDNN attention (its GPU, 16-bit inputs, sdpa, head dims).
bool uses_cudnn_attention(const spec::ModelSpec& m, const spec::Workload& w);

}  // namespace vramfit::engine
