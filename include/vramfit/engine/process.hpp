#pragma once
// A case estimated as it runs in a process that ran other cases before it (shared/truth's
// measure.py runs every case of a file in one process); engine::estimate is a process of its own.

#include <cstdint>

#include "vramfit/engine/breakdown.hpp"
#include "vramfit/engine/context.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

/// What earlier cases of the process left that torch.cuda.empty_cache() cannot release. The
/// autograd engine runs backward on a device thread of its own whose cuBLAS handle gets a 32 MiB
/// workspace at the process's first backward (aten/src/ATen/cuda/CublasHandlePool.cpp: one per
/// handle and stream, never freed), carved best-fit from whatever cached block is free then: that
/// block's segment stays reserved for the rest of the process (empty_cache only releases segments
/// with no allocated block) and later cases allocate inside its free parts. Measured on the H200
/// (tests/accuracy/alloc/fresh/traces_s10/history): gemma-2-2b bf16 b3 x 1024 training put it at
/// 2625 MiB into a 3000 MiB fp32-logits segment; gpt2-large, pythia-410m and qwen3-0.6b cases after
/// it started at 3034-3036 MiB reserved and peaked at 3036-3040, all inside that segment.
struct ProcessHistory {
  std::uint64_t pinned_segment = 0;  ///< bytes of the segment holding the workspace; 0: no backward yet
  std::uint64_t pinned_offset = 0;   ///< the workspace's offset in it
  bool unknown = false;              ///< a backward ran whose workspace placement is not modelled
  /// What the process has loaded outside PyTorch's allocator (engine/context.hpp): kernels loaded
  /// once, a cuDNN attention graph per distinct SDPA shape of every case so far. The case's
  /// cuda_context is this state's context_bytes() after the case, not the one-process allowance.
  ContextState context;
};

/// Estimates `workload` run after `history` in the same process, and updates `history` with
/// what this case pins (its first backward's workspace, when none was pinned before) and loads
/// (kernels, cuDNN graphs). The allocator reserve and the context differ from estimate():
/// replayed workloads start from the pinned segment (and do not allocate the workspace again);
/// the others take the pinned segment as a floor of what is reserved; the context is the
/// process's, grown by every case before (context_bytes(history.context)). Pure: same input, same output.
Breakdown estimate_in_process(const spec::ModelSpec& model, const spec::Workload& workload, ProcessHistory& history);

}  // namespace vramfit::engine
