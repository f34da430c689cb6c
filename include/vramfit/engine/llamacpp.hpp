#pragma once

// llama.cpp's memory, buffer by buffer and device by device, as llama.cpp itself allocates
// it: the model buffers (weights placed by -ngl, --n-cpu-moe, --tensor-split, --split-mode),
// the KV cache buffers (--ctx-size, --parallel, --cache-type-k/v, SWA caches), the compute
// buffers (--batch-size, --ubatch-size, flash attention) and what stays in host memory.
// Ollama runs the same buffers under its own defaults (ollama_settings()).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::engine::llamacpp {

/// How the layers are spread over several GPUs (--split-mode).
enum class SplitMode {
  layer,  ///< whole layers per GPU, in --tensor-split proportions (llama.cpp's default)
  row,    ///< every weight matrix split by rows over the GPUs; KV and compute on the main GPU
  none,   ///< one GPU only (the main GPU)
};

/// Which llama.cpp build: its -ngl rule and its compute graph's output stage (see
/// src/engine/llamacpp.cpp ComputeShape). Which -ngl rule the llama.cpp build follows. The meaning of -ngl N changed: before, the
/// last N blocks went to the GPU and the output layer only with N > n_layer; now the output
/// layer goes first and N - 1 blocks with it (src/llama-model.cpp, load_tensors:
/// i_gpu_start = max(n_layer + 1 - ngl, 0); it was max(n_layer - ngl, 0)).
enum class LayerRule { current, legacy };

/// How the build splits a fused QKV product (phi3's attn_qkv) into Q, K and V
/// (src/models/phi3.cpp; llama-model.cpp's llm_build_phi3 before):
/// - copies: Q, K and V each a ggml_cont of a strided ggml_view_2d, then reshaped (builds to
///   mid-2025: ggml_reshape_3d needs a contiguous tensor);
/// - v_copy: Q and K strided ggml_view_3d's, V a ggml_cont_3d (mid-2025 to September 2025);
/// - views: all three ggml_view_3d's (llama.cpp#15662, "avoid ggml_cont_3d for fused QKV
///   weights", September 2025, and after).
enum class FusedQkv { views, v_copy, copies };

/// The KQ mask input of the build (llama-graph.cpp build_attn_inp_kq_mask):
/// - padded: [n_kv, GGML_PAD(n_tokens, GGML_KQ_MASK_PAD = 64)] f32, cast to f16 by a graph node
///   under flash attention (until December 2025);
/// - unpadded: [n_kv, n_tokens] f32 and its f16 cast (llama.cpp#17910 removed the padding,
///   December 2025, to May 2026);
/// - f16: [n_kv, n_tokens], reserved in f16 under flash attention, no cast (llama.cpp#23764,
///   late May 2026, and after).
enum class KqMask { f16, unpadded, padded };

/// llama.cpp's settings that change memory, named as its flags (common/arg.cpp). The
/// defaults are llama.cpp's own.
struct Settings {
  std::uint64_t gpu_layers = 999;     ///< -ngl: layers offloaded (more than n_layer + 1 = all)
  std::uint64_t n_cpu_moe = 0;        ///< --n-cpu-moe: expert tensors of the first N blocks on the CPU
  /// -ot / --override-tensor PATTERN=BUFFER,... (common/arg.cpp): llama-model.cpp's
  /// create_tensor puts a tensor whose name matches PATTERN (std::regex_search, the first
  /// pattern that matches) in BUFFER: device -1 for "CPU", n for "CUDA<n>".
  struct TensorOverride {
    std::string pattern;
    int device = -1;
  };
  std::vector<TensorOverride> override_tensor;
  /// --tensor-split: the share of each GPU; empty means "by free memory" (gpu_memory).
  std::vector<double> tensor_split;
  /// Memory of each GPU (--gpu a,b): the default split follows it; its size is the GPU count.
  /// Empty: one GPU.
  std::vector<Bytes> gpu_memory;
  SplitMode split_mode = SplitMode::layer;
  std::uint64_t ctx_size = 4096;      ///< --ctx-size: cells of the KV cache over all sequences
  std::uint64_t parallel = 1;         ///< --parallel: sequences sharing the context
  bool kv_unified = false;            ///< --kv-unified: one KV stream for all sequences
  std::string cache_type_k = "f16";   ///< --cache-type-k: a ggml type name
  std::string cache_type_v = "f16";   ///< --cache-type-v
  std::uint64_t batch_size = 2048;    ///< --batch-size: logical batch
  std::uint64_t ubatch_size = 512;    ///< --ubatch-size: physical batch (the compute graph's size)
  bool flash_attn = false;            ///< --flash-attn on|off
  /// --flash-attn auto (resolved into flash_attn): llama.cpp's checks of an enabled flash attention
  /// (a quantized cache's block dividing the heads) run before it resolves auto.
  bool flash_attn_auto = false;
  bool mmap = true;                   ///< --no-mmap turns it off
  bool kv_offload = true;             ///< --no-kv-offload keeps the KV cache in host memory
  bool swa_full = false;              ///< --swa-full: full-size SWA cache
  bool op_offload = true;             ///< ggml's op offload of host weights' large batches (--no-op-offload: off)
  /// --device none, or a CPU-only build: no GPU backend in the process, so nothing is offloaded
  /// (every layer on the CPU, its own graph) and the CPU's extra buffer types (repack) are reached.
  bool no_gpu = false;
  LayerRule layer_rule = LayerRule::current;
  /// The FFN's gate x up as ggml's GLU op (ggml_swiglu_split, llama.cpp from mid-2025): a new
  /// tensor beside the gate and up products; before, silu and the product ran in place on the
  /// gate's (false). Changes the compute buffer of a dense model's FFN.
  bool glu_op = true;
  /// The KV stores as ggml_set_rows with the cells' indices as graph inputs (llama.cpp's
  /// LLAMA_SET_ROWS, on by default from late July 2025); without flash attention the V indices
  /// are one per element of the transposed V rows. false: ggml_cpy into cache views (older builds).
  bool set_rows = true;
  /// The fused QKV split of the build (FusedQkv): current builds take views.
  FusedQkv fused_qkv = FusedQkv::views;
  /// The KQ mask of the build (KqMask): current builds reserve it in f16 with flash attention.
  KqMask kq_mask = KqMask::f16;
  /// The graph's embeddings input [n_embd, n_tokens] f32 made beside the token ids whatever the
  /// batch holds (llama-graph.cpp build_inp_embd, llama.cpp#18550, January 2026 and after): one
  /// more activation in the host compute buffer. false: older builds.
  bool embd_input = true;
  /// With a quantized K or V cache whose heads are a multiple of 64 wide, Q and K (and V) are
  /// rotated by a Hadamard matrix before the KV store and the attention's output rotated back
  /// (llama.cpp#21038, April 2026; LLAMA_ATTN_ROT_DISABLE=1 turns it off): the matrices are graph
  /// inputs and each rotation a new tensor. false: older builds.
  bool attn_rot = true;
  /// --mmproj: the projector file's tensor bytes. mtmd (tools/mtmd/clip.cpp) loads them into one
  /// buffer on the first GPU backend whatever -ngl says (--no-mmproj-offload keeps them on the CPU).
  Bytes mmproj;
  /// Memory kept free on every GPU beside the buffers (the CUDA context, cuBLAS, kernels); where the
  /// cards are known (cuda_context_bytes), the bare context llama.cpp's --fit sees, and the rest in
  /// gpu_kernels / gpu_cublas.
  Bytes gpu_reserve = kDefaultGpuReserve;
  /// Loaded by a GPU that runs part of the graph beyond the bare context: llama.cpp's kernels and
  /// MMQ's pool (kGpuKernels), and cuBLAS where it runs (kGpuCublas). 0 where the reserve is Ollama's
  /// 457 MiB (cards not known), which stands for the whole.
  Bytes gpu_kernels;
  Bytes gpu_cublas;
  /// Measured on an H100 (stop 37, llama-bench filling the cache, nvidia-smi every 50 ms): 609.17 MiB
  /// beyond the logged buffers with flash attention (512 to 16384 cells), less the bare context's
  /// 527 MiB (free memory 81079 MiB idle, 80552 when llama.cpp's --fit ran); without flash attention,
  /// less the modelled pool, 663.66 to 664.87: cuBLAS's handle, workspace and kernels 54.5 more.
  static constexpr Bytes kGpuKernels = MiB(82);
  static constexpr Bytes kGpuCublas = MiB(55);

  /// Ollama's CUDA "minimum memory" reserve (discover/gpu.go, gpu/gpu.go before: cudaMinimumMemory =
  /// 457 MiB), the room it keeps on each NVIDIA GPU for the CUDA context and kernels. Used
  /// here for llama.cpp too: its buffers leave the same context outside them.
  static constexpr Bytes kDefaultGpuReserve = MiB(457);
};

/// The bare CUDA context a process holds on a card (what cudaMemGetInfo's first call leaves
/// gone): about 2 KiB per resident thread, SMs x the compute capability's max threads per SM. The
/// H100's 527 MiB measured (132 x 2048 threads: 528), an RTX 4060 Ti's 107 and an RTX PRO 6000
/// Blackwell's 555 (llama.cpp#23604; 34 and 188 SMs of 1536 threads: 102 and 564). 0 where the SM
/// count or the compute capability (times ten) is not known.
Bytes cuda_context_bytes(unsigned sm_count, unsigned compute_capability);

/// Ollama's defaults over llama.cpp's (ollama/envconfig and llm/server.go): num_ctx 4096,
/// OLLAMA_NUM_PARALLEL 1, num_batch 512, every layer it can on the GPU, mmap.
Settings ollama_settings();

/// Ollama's default num_ctx from the total VRAM it finds at start-up (server/routes.go since
/// v0.15.5, ollama#13946; its log line "vram-based default context"): 262144 from 47 GiB,
/// 32768 from 23 GiB, 4096 below (thresholds a GiB under the documented 48 and 24 for cards
/// that report a little less). Before 0.15.5 it was 4096 whatever the VRAM.
std::uint64_t ollama_default_ctx(Bytes total_vram);

/// Ollama's flash-attention default (llm/server.go: OLLAMA_FLASH_ATTENTION, else the model's
/// GGML.FlashAttention(), kept only where SupportsFlashAttention: K and V heads of one size): on
/// for the architectures its list names (ArchRow::ollama_fa), off for the rest.
bool ollama_flash_attn(const spec::ModelSpec& m, const std::vector<spec::GgufTensor>& tensors);

/// What llama.cpp's default `--flash-attn auto` (llama.cpp#15434, August 2025) resolves to on
/// CUDA: on when every layer's attention runs the CUDA flash-attention kernels (llama-context.cpp
/// turns it off when a layer's FLASH_ATTN_EXT would fall back to the CPU): K and V head sizes the
/// kernels take and a K/V cache type pair they read.
bool flash_attn_auto(const spec::ModelSpec& m, const std::vector<spec::GgufTensor>& tensors, std::string_view cache_k,
                     std::string_view cache_v);

/// --fit's defaults (common/common.h): the memory kept free on each device (--fit-target, MiB)
/// and the context it does not cut below (--fit-ctx).
inline constexpr Bytes kFitTarget = MiB(1024);
inline constexpr std::uint64_t kFitCtxMin = 4096;

/// llama.cpp's default context (no -c: the model's trained context) as --fit (on by default
/// since December 2025) settles it before the model loads.
struct FitCtx {
  std::uint64_t n_ctx_train = 0;  ///< the model's context (GGUF context_length)
  std::uint64_t n_ctx = 0;        ///< the context --fit keeps (n_ctx_train when nothing is cut)
  /// Memory still missing at n_ctx_min over all devices, margins included: --fit then moves
  /// layers to the CPU (0: none missing).
  Bytes short_by;
  /// Several GPUs that keep their margins together but not each: --fit moves layers between
  /// them, not the context.
  bool uneven = false;
  [[nodiscard]] bool cut() const { return n_ctx < n_ctx_train; }
};

/// common_params_fit_impl's first two steps (common/fit.cpp, llama.cpp#16653 and its 2026
/// rework): project every device's buffers (model + context + compute) at n_ctx_train; if each
/// keeps its margin (`margin`, plus the projector's bytes on the first GPU) of its free memory
/// (gpu_memory less the reserve), nothing changes. Else, where the devices together fall short,
/// the context is interpolated between n_ctx_min and n_ctx_train on the projected totals at
/// both (rounded down to 256, not below n_ctx_min); with several GPUs the target first leaves
/// (n + 1) half layers (a sixth for MoE) of slack. What is short even at n_ctx_min is left to
/// the layer placement. Without gpu_memory (no card), n_ctx_train. `s.ctx_size` is ignored.
FitCtx fit_ctx(const spec::ModelSpec& m, const std::vector<spec::GgufTensor>& tensors, Settings s,
               std::uint64_t n_ctx_train, Bytes margin = kFitTarget, std::uint64_t n_ctx_min = kFitCtxMin);

/// One ggml backend's buffers, as llama.cpp logs them ("CUDA0 model buffer size = ...").
struct DeviceBuffers {
  std::string name;          ///< "CUDA0", "CUDA1", ... or "CPU" for the host
  Bytes model;               ///< weights (for the host with mmap: the mapped file range)
  Bytes kv;                  ///< KV cache
  Bytes compute;             ///< compute buffer (the scheduler's graph allocation)
  Bytes mmproj;              ///< the multimodal projector's weights (mtmd's clip buffer), first GPU only
  /// ggml-cuda's memory pool beyond what every run keeps (attention without flash attention at a
  /// full context: cuBLAS's f16 temporaries); not a logged buffer, in total() since the GPU holds it.
  Bytes pool;
  /// What the process loads on a GPU that runs part of the graph, beyond the bare context
  /// (Settings::gpu_kernels, and Settings::gpu_cublas where cuBLAS runs: where the pool is used).
  Bytes runtime;
  /// The host only, with no GPU backend (Settings::no_gpu): ggml-cpu's CPU_REPACK model buffer, the
  /// matrices an x86 CPU with AVX2 repacks, read out of the file into their own memory.
  Bytes repack;
  std::uint64_t layers = 0;  ///< repeating layers whose weights are here
  [[nodiscard]] Bytes total() const { return model + kv + compute + mmproj + pool + runtime + repack; }
};

/// The resolved sizes and every buffer.
struct Result {
  std::vector<DeviceBuffers> gpus;  ///< one per GPU, in order
  DeviceBuffers host;               ///< "CPU": CPU_Mapped/CPU model, CPU KV, CPU + CUDA_Host compute
  Bytes output_buffer;              ///< host logits buffer (n_vocab x n_seq_max floats)
  std::uint64_t offloaded = 0;      ///< "offloaded X/Y layers to GPU": X
  std::uint64_t offloadable = 0;    ///< Y = n_layer + 1 (the output layer counts)
  bool output_on_gpu = false;
  int output_gpu = -1;              ///< index into gpus of the output layer's GPU, -1 on the host
  std::uint64_t n_ctx = 0;          ///< after llama.cpp's padding
  std::uint64_t n_ctx_seq = 0;      ///< cells per sequence
  std::uint64_t kv_cells_swa = 0;   ///< cells of the SWA cache (0: no SWA layers)
  std::uint64_t n_stream = 1;       ///< KV streams
  /// Each cache's "llama_kv_cache: size = X MiB (N cells, L layers, ...)": its K and V tensors'
  /// bytes over every device and the layers it holds; the full-attention cache, then the SWA one
  /// (0 without SWA layers). Layers that reuse another layer's cache (gemma4's KV-shared) hold none.
  Bytes kv_size;
  Bytes kv_size_swa;
  std::uint64_t kv_layers = 0;
  std::uint64_t kv_layers_swa = 0;
  /// Host memory the process needs: model (mapped or read), KV and compute on the CPU, the
  /// output buffer.
  Bytes host_bytes;
  std::vector<std::string> notes;
};

/// A GGUF file's tensors as llama.cpp would load them: the header's own tensors, or (for a
/// model given by its config) the tensors llama-quantize writes for `file_type`, laid out in
/// the converter's order.
std::vector<spec::GgufTensor> tensors_of(const spec::ModelSpec& m, std::string_view file_type);

/// llama.cpp's buffers for `model` stored as `tensors`. Pure. Throws InputError naming the
/// flag for settings llama.cpp refuses (a quantized V cache without flash attention, an
/// unknown cache type, a tensor split with another length than the GPU count).
Result estimate(const spec::ModelSpec& model, const std::vector<spec::GgufTensor>& tensors,
                const Settings& s);

/// The device that binds: the GPU with the least free memory left (gpu_memory minus buffers
/// and reserve), or GPU 0 when no memory is known. As a Breakdown: weights, kv_cache,
/// compute_buffer and cuda_context (the reserve); the other GPUs and the host in the notes.
Breakdown breakdown_of(const Result& r, const Settings& s);

/// Index into r.gpus of the device breakdown_of reports.
std::size_t binding_gpu(const Result& r, const Settings& s);

}  // namespace vramfit::engine::llamacpp
