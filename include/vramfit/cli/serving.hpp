#pragma once

// `--engine llama.cpp|ollama|vllm` for estimate, advise and fit: the serving runtimes' own
// buffers (engine/llamacpp, engine/vllm) instead of the transformers estimate.

#include <iosfwd>
#include <string>
#include <string_view>

#include "vramfit/cli/estimate.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::cli {

/// The serving flags, as typed (empty when not given). Names are the engines' own flags.
struct ServingFlags {
  std::string engine;
  // llama.cpp / Ollama
  std::string gpu_layers, n_cpu_moe, tensor_split, split_mode, ctx_size, parallel, cache_type_k, cache_type_v;
  std::string batch_size, ubatch_size, flash_attn;
  std::string override_tensor;  ///< --override-tensor PATTERN=BUFFER,... (llama.cpp -ot)
  bool no_mmap = false;
  bool kv_unified = false;  ///< --kv-unified: one KV stream shared by the --parallel sequences
  bool swa_full = false;    ///< --swa-full: sliding-window layers keep a full-size cache
  std::string device;       ///< --device: llama.cpp's device list; only "none" (no GPU backend) is modelled
  bool no_op_offload = false;  ///< --no-op-offload: the host's layers run on the CPU
  std::string mmproj;  ///< --mmproj FILE: a multimodal projector GGUF (llama.cpp, Ollama)
  // vLLM
  std::string gpu_memory_utilization, max_model_len, max_num_seqs, max_num_batched_tokens, kv_cache_dtype;
  std::string tensor_parallel_size, pipeline_parallel_size, block_size;
  std::string kv_cache_memory_bytes;  ///< --kv-cache-memory-bytes SIZE: the KV cache fixed, the utilization ignored
  std::string vllm_version;  ///< --vllm-version X.Y[.Z]: the release's CUDA graphs and profiling
  bool enforce_eager = false;
  bool disable_hybrid_kv_cache_manager = false;
  bool no_flashinfer = false;  ///< --no-flashinfer: FlashInfer not installed (the sampler falls back to the sort)
};

/// True when --engine names a serving runtime (anything but transformers).
bool is_serving(const EstimateFlags& f, const ServingFlags& s);

/// Throws InputError when serving flags are given without a serving --engine (or flags of
/// one engine with another), naming each flag.
void check_serving_flags(const EstimateFlags& f, const ServingFlags& s);

/// Runs `command` (estimate, advise or fit) with the serving engine. `solve` is fit's --solve
/// ("batch" when not given: the engine's default dimension). Returns ok when it fits (fit:
/// some value fits), does_not_fit otherwise. Throws InputError for bad flags.
ExitCode run_serving(std::string_view command, const EstimateFlags& f, const ServingFlags& s,
                     const std::string& solve, CatalogSource& catalog, render::Format format, std::ostream& out);

}  // namespace vramfit::cli
