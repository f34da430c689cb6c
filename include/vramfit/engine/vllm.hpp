#pragma once

// vLLM's start-up memory budget, as its GPU worker works it out (vllm/v1/worker/gpu_worker.py,
// determine_available_memory; vllm/utils memory_profiling; vllm/v1/core/kv_cache_utils.py):
// the budget is gpu_memory_utilization x the card; the weights, the profile run's activation
// peak at max_num_batched_tokens and the non-torch memory come off it; what is left becomes KV
// blocks of block_size tokens. The CUDA context sits outside the budget; the CUDA graphs too up
// to vLLM 0.20, inside it (vLLM's own estimate taken off the KV cache) from 0.21.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::vllm {

/// What vLLM counts as memory outside PyTorch (see engine/vllm.cpp non_torch).
enum class Profiler {
  since_snapshot,  ///< vLLM >= 0.6.5: the increase since init_device's snapshot
  device_wide,     ///< vLLM <= 0.6.4: used - torch allocated, the CUDA context included
};

/// A vLLM release (major.minor.patch): what it captures as CUDA graphs and where it counts them.
struct Release {
  unsigned major = 0;
  unsigned minor = 27;
  unsigned patch = 1;
  [[nodiscard]] bool at_least(unsigned ma, unsigned mi) const { return major > ma || (major == ma && minor >= mi); }
};

/// "0.11", "0.6.4", "v0.21.0" (a leading v and a suffix after the numbers such as
/// ".post1" or "rc1" are allowed); nullopt for anything else.
std::optional<Release> parse_release(const std::string& text);

/// vLLM's engine arguments that change memory (vllm/engine/arg_utils.py), with the defaults of
/// `vllm serve` (V1 engine).
struct Settings {
  Bytes gpu_memory;                          ///< the card's total memory (per GPU)
  double gpu_memory_utilization = 0.9;       ///< --gpu-memory-utilization
  /// --kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes, from 0.11): the KV cache per GPU,
  /// as given; gpu_memory_utilization is then not read (gpu_worker.py determine_available_memory
  /// still runs the profile and returns this figure).
  std::optional<Bytes> kv_cache_memory;
  std::optional<std::uint64_t> max_model_len;  ///< --max-model-len; unset: the model's max_position_embeddings
  std::uint64_t max_num_seqs = 256;          ///< --max-num-seqs
  std::uint64_t max_num_batched_tokens = 8192;  ///< --max-num-batched-tokens (chunked prefill)
  std::uint64_t block_size = 16;             ///< --block-size
  bool kv_fp8 = false;                       ///< --kv-cache-dtype fp8 (fp8_e4m3 / fp8_e5m2)
  bool enforce_eager = false;                ///< --enforce-eager: no CUDA graphs
  std::uint64_t tensor_parallel = 1;         ///< --tensor-parallel-size
  std::uint64_t pipeline_parallel = 1;       ///< --pipeline-parallel-size
  /// Weights: dtype and quantization as the workload says (AWQ/GPTQ/FP8/MXFP4 via --quant).
  spec::Workload weights;
  /// The V0 engine (vLLM < 0.8, vllm/worker/worker.py): its sampler profile holds only the fp32
  /// logits of the dummy requests.
  bool v0_engine = false;
  /// V1's hybrid KV cache manager (vLLM >= 0.10; off with --disable-hybrid-kv-cache-manager):
  /// sliding-window layers hold only their window's blocks. Off, or on the V0 engine, every
  /// layer keeps a full-length cache.
  bool hybrid_kv = true;
  /// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE as set in the environment ("1" or "0");
  /// unset: the release's default (engine/vllm.cpp hybrid_manager).
  std::optional<bool> chunked_local_hybrid;
  Profiler profiler = Profiler::since_snapshot;
  /// The release (--vllm-version; default the newest seen, 0.27.1): the CUDA graph capture
  /// sizes and whether the graphs' estimate comes off the KV cache (see cuda_graphs()).
  Release release;
  /// FlashInfer is installed (a default dependency of vLLM's CUDA wheels only from late 2025; a
  /// plain pip install before had none): without it, a release whose default is FlashInfer's
  /// sampler falls back to the PyTorch-native sort ("FlashInfer is not available. Falling back
  /// to the PyTorch-native implementation of top-p & top-k sampling").
  bool flashinfer = true;
  /// The card's CUDA compute capability x 10 (catalog::Gpu; 0 unknown, e.g. --budget): it picks
  /// the MXFP4 MoE kernels and so how the experts are laid out (see Mxfp4Backend).
  unsigned compute_capability = 0;
  /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (read from the environment, as vLLM reads it): a
  /// --max-model-len past the model's derived maximum is taken with a warning, not refused.
  bool allow_long_max_model_len = false;
};

/// The model's longest context as vLLM derives it from the config (vllm/config/model.py
/// _get_and_verify_max_len): max_position_embeddings (model_max_length where the config has it),
/// times the rotary scaling's factor where its type stretches the positions (yarn: from its
/// original_max_position_embeddings; not llama3, longrope or su, whose max_position_embeddings
/// is already the long one; never for gemma3). vLLM refuses a longer --max-model-len.
struct DerivedMaxLen {
  double tokens = 0;      ///< 0: the config has no length key (vLLM takes --max-model-len as given, else 2048)
  std::string key;        ///< the key vLLM names: max_position_embeddings or model_max_length
  bool scaled = false;    ///< a rotary scaling entry was applied (vLLM's figure is then a float)
  std::string rope;       ///< how the scaling moved it, for the messages ("" when it did not)
};
DerivedMaxLen derived_max_model_len(const spec::ModelSpec& m);

/// The max_model_len vLLM takes without --max-model-len: the derived maximum, or for a longrope
/// model from 0.11.1 (vllm#27431) its original_max_position_embeddings (the short factors).
std::uint64_t default_max_model_len(const spec::ModelSpec& m, const Settings& s);

/// The kernels vLLM runs MXFP4 experts with (vllm/model_executor/layers/quantization/mxfp4.py,
/// get_mxfp4_backend, late-2025 releases): each lays the experts out its own way.
enum class Mxfp4Backend {
  triton,           ///< OpenAI's triton_kernels (Hopper; Blackwell without FlashInfer)
  flashinfer_sm100, ///< FlashInfer's TRT-LLM MoE on Blackwell (SM100_FI_MXFP4_BF16)
  marlin,           ///< Marlin (Ampere, Ada, consumer Blackwell, and an unknown card)
};
Mxfp4Backend mxfp4_backend(unsigned compute_capability, bool flashinfer);

/// How V1's dummy sampler run (gpu_model_runner.py _dummy_sampler_run: top-p 0.99 and top-k
/// vocab - 1 on max_num_seqs requests) filters the logits in a release, by the default of
/// vllm/v1/sample/ops/topk_topp_sampler.py; it sets the profile run's sampler peak.
enum class SamplerKernel {
  flashinfer,  ///< FlashInfer's top-k/top-p sampling kernels (the default where it is on)
  torch_sort,  ///< PyTorch-native apply_top_k_top_p: torch.sort of the whole fp32 logits
  triton,      ///< the Triton top-k/top-p kernels (no full sort)
};
/// 0.7: FlashInfer (vllm#11394); 0.8.0 to 0.9.0: the sort (vllm#14815 turned FlashInfer >= 0.2.3
/// off); 0.9.1 to 0.11.0: FlashInfer (vllm#15777 adapted its API); 0.11.1 to 0.15: the sort
/// (vllm#26859, "Disable FlashInfer sampler by default"); from 0.16: Triton (vllm#33538, Feb 2026;
/// later FlashInfer again by default, vllm#40376, at the same peak).
SamplerKernel sampler_kernel(const Release& r);

/// The CUDA graphs vLLM captures on one GPU and what they take.
struct CudaGraphs {
  std::vector<std::uint64_t> sizes;  ///< cudagraph_capture_sizes, in tokens, largest first
  std::uint64_t piecewise = 0;       ///< sizes captured piecewise (V1's compiled model, attention eager)
  std::uint64_t full = 0;            ///< whole-model graphs (V1 FULL decode graphs; V0: every size)
  std::uint64_t largest_full = 0;    ///< the largest FULL size
  Bytes bytes;                       ///< "Graph capturing finished ... took X GiB"
  Bytes pool;                        ///< of bytes: the shared graph pool (the largest capture's activations)
  bool in_budget = false;            ///< vLLM >= 0.21: its estimate comes off the KV cache
};

/// The capture sizes for the release and what the graphs take (engine/vllm.cpp has the
/// sources); none with --enforce-eager.
CudaGraphs cuda_graphs(const spec::ModelSpec& m, const Settings& s);

/// Everything vLLM reports at start-up, per GPU.
struct Result {
  Bytes budget;             ///< gpu_memory_utilization x gpu_memory ("requested memory")
  Bytes weights;            ///< "Model loading took X GiB"
  Bytes activation_peak;    ///< "torch peak memory increase" of the profile run
  Bytes non_torch;          ///< "non-torch forward increase memory" (cuBLAS, NCCL)
  Bytes cuda_graphs;        ///< "Graph capturing finished ... took X GiB" (0 with --enforce-eager)
  CudaGraphs graphs;        ///< the sizes captured; graphs.in_budget: cuda_graphs is inside the budget
  Bytes cuda_context;       ///< the CUDA context, before vLLM's first snapshot
  std::int64_t available_kv = 0;  ///< "Available KV cache memory" (negative: none)
  /// Bytes of one block id over this GPU's layers: block_size tokens of every layer without
  /// sliding-window groups; with the hybrid manager, one layer page in each of group_size
  /// shared pools (kv_cache_utils.py get_kv_cache_config_from_groups).
  std::uint64_t page_bytes = 0;
  std::uint64_t kv_groups = 1;          ///< KV cache groups (full + sliding-window)
  std::uint64_t kv_group_size = 0;      ///< layers per group
  /// Blocks one request of max_model_len tokens takes over all groups.
  std::uint64_t blocks_per_request = 0;
  std::uint64_t num_gpu_blocks = 0;
  std::uint64_t kv_cache_tokens = 0;   ///< "GPU KV cache size: N tokens"
  Bytes kv_cache;                       ///< num_gpu_blocks x page_bytes
  std::uint64_t max_model_len = 0;
  double max_concurrency = 0;           ///< "Maximum concurrency for max_model_len tokens per request"
  bool max_model_len_fits = false;
  Bytes kv_for_max_model_len;           ///< the blocks one request of max_model_len tokens needs
  std::uint64_t largest_model_len = 0;  ///< the estimated maximum model length (0: none)
  /// The error vLLM would raise, and its fix; empty when it starts.
  std::string error;
  std::string fix;
  std::vector<std::string> notes;
};

/// Whether the model has chunked local attention layers (Llama 4's attention_chunk_size), which
/// VllmConfig treats on their own (the hybrid manager's default, hybrid_manager in vllm.cpp).
bool chunked_local(const spec::ModelSpec& m);

/// Whether vLLM serves the model as MLA (is_deepseek_mla: a kv_lora_rank and a model type whose
/// attention caches the latent).
bool served_as_mla(const spec::ModelSpec& m);

/// Bytes one token takes in the KV cache of one GPU (all its layers).
std::uint64_t kv_bytes_per_token(const spec::ModelSpec& m, const Settings& s);

/// The KV cache one request of `tokens` tokens needs on one GPU, over every KV cache group
/// (vLLM V1's check_enough_kv_cache_memory / _max_memory_usage_bytes_from_groups).
std::uint64_t kv_bytes_for_request(const spec::ModelSpec& m, const Settings& s, std::uint64_t tokens);

/// The longest request that `available` bytes of KV cache hold ("the estimated maximum model
/// length"), by vLLM's own search; without a full-attention layer, the model's limit.
std::uint64_t largest_model_len(const spec::ModelSpec& m, const Settings& s, std::uint64_t available);

/// vLLM's start-up figures. Pure. Throws InputError (naming the flag) for settings vLLM
/// refuses: a utilization outside (0, 1], parallel sizes that do not divide the heads or layers.
Result estimate(const spec::ModelSpec& m, const Settings& s);

/// As a Breakdown against vLLM's budget (gpu_memory_utilization x the card): weights,
/// activations and kv_cache (the blocks allocated; when one max_model_len request does not fit,
/// the blocks it needs) are PyTorch's; cuda_context is the non-torch memory inside the budget.
/// The device total fits the budget exactly when vLLM starts. The CUDA context and the CUDA
/// graphs, outside the budget, are in the notes.
Breakdown breakdown_of(const Result& r);

}  // namespace vramfit::engine::vllm
