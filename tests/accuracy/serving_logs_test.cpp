// The serving engines against what llama.cpp and vLLM print about their own memory, as posted
// with their settings in issues and logs (tests/accuracy/serving/*.jsonl, one log a line, each
// with its source). Every line item the log shows is compared: the error table is printed by
//   ./build/tests/vramfit_tests "[.serving-report]" -s
// and the bounds below are the ones the README states.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/engine/llamacpp.hpp"
#include "vramfit/engine/vllm.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/quant.hpp"
#include "vramfit/spec/workload.hpp"

using namespace vramfit;
using nlohmann::json;

namespace {

std::vector<json> read_lines(const std::string& name) {
  std::ifstream in(std::string(VRAMFIT_SOURCE_DIR) + "/tests/accuracy/serving/" + name);
  REQUIRE(in.good());
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

spec::ModelSpec spec_of(const json& e) {
  if (e.contains("preset")) {
    const auto& p = catalog::Catalog::embedded().preset(e.at("preset").get<std::string>(), "preset");
    // config_overrides: keys where the served checkpoint's config.json differs from the preset
    // of its shapes (Qwen3-Coder-30B-A3B's max_position_embeddings 262144 against Qwen3-30B-A3B's
    // 40960: vLLM refuses a max_model_len past it).
    if (e.contains("config_overrides")) {
      json c = p.config;
      c.merge_patch(e.at("config_overrides"));
      return spec::from_config(c, p.id);
    }
    return spec::from_config(p.config, p.id);
  }
  return spec::from_config(e.at("config"), e.at("id").get<std::string>());
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

/// One compared line item.
struct Item {
  std::string log_id, item;
  double log = 0, ours = 0;  // in the log's unit
  std::string unit;
  bool exact_mix = true;  // the file's tensor types follow llama-quantize's rules
  bool sampler_bound = false;  // vLLM: the logged profile peak is the sampler's (see the log's note)
  double tolerance = 0;        // what the log's rounding allows, in the item's unit
  bool reported = false;       // llama.cpp: a figure the log shows but no bound holds (see the log's note)
  bool excluded = false;       // vLLM: the log's setup has a part vramfit cannot express (its "kv_excluded")
  [[nodiscard]] double error() const { return log == 0 ? 0 : ours / log - 1; }
};

std::vector<Item> llamacpp_items() {
  std::vector<Item> items;
  for (const json& e : read_lines("llamacpp_logs.jsonl")) {
    const spec::ModelSpec m = spec_of(e);
    const std::string ft = e.at("file_type").is_null() ? "Q4_K_M" : e.at("file_type").get<std::string>();
    engine::llamacpp::Settings s;
    s.gpu_layers = e.at("gpu_layers");
    s.layer_rule = e.at("layer_rule") == "legacy" ? engine::llamacpp::LayerRule::legacy
                                                 : engine::llamacpp::LayerRule::current;
    s.glu_op = e.value("glu_op", true);  // false: a build from before ggml's GLU op (June 2025)
    s.set_rows = e.value("set_rows", s.glu_op);  // false: before LLAMA_SET_ROWS was on by default (late July 2025)
    // The fused QKV split of the log's build: "copies" (to mid-2025), "v_copy", or views.
    if (const std::string q = e.value("fused_qkv", std::string("views")); q == "copies")
      s.fused_qkv = engine::llamacpp::FusedQkv::copies;
    else if (q == "v_copy")
      s.fused_qkv = engine::llamacpp::FusedQkv::v_copy;
    // The KQ mask of the log's build: "padded" (to December 2025, the logs' default), "unpadded"
    // (to May 2026) or "f16" (llama.cpp#23764); the embeddings input beside the token ids from
    // January 2026 (llama.cpp#18550).
    if (const std::string k = e.value("kq_mask", std::string("padded")); k == "f16")
      s.kq_mask = engine::llamacpp::KqMask::f16;
    else
      s.kq_mask = k == "unpadded" ? engine::llamacpp::KqMask::unpadded : engine::llamacpp::KqMask::padded;
    s.embd_input = e.value("embd_input", false);
    // The attention rotation of a quantized cache (llama.cpp#21038, April 2026): builds with the f16
    // mask (May 2026) have it; an older log says so with "attn_rot".
    s.attn_rot = e.value("attn_rot", s.kq_mask == engine::llamacpp::KqMask::f16);
    s.ctx_size = e.at("ctx_size");
    s.parallel = e.at("parallel");
    s.kv_unified = e.value("kv_unified", false);
    s.swa_full = e.value("swa_full", false);
    s.op_offload = e.value("op_offload", true);  // false: --no-op-offload
    s.no_gpu = e.value("device", std::string()) == "none";  // a CPU-only build: no GPU backend
    s.mmap = e.value("mmap", true);
    s.n_cpu_moe = e.value("n_cpu_moe", 0);
    s.batch_size = e.at("batch_size");
    s.ubatch_size = e.at("ubatch_size");
    s.flash_attn = e.at("flash_attn");
    s.cache_type_k = e.at("cache_type_k");
    s.cache_type_v = e.at("cache_type_v");
    // Several equal cards: llama.cpp's default split by free memory is an even one.
    s.gpu_memory.assign(e.value("gpus", 1), GiB(24));
    // A split the log shows (its cards differ): --tensor-split with the logged layer counts.
    if (e.contains("tensor_split")) s.tensor_split = e.at("tensor_split").get<std::vector<double>>();
    auto tensors = engine::llamacpp::tensors_of(m, ft);
    // The routed experts' type where the file's differs from the file type's rules: MXFP4
    // (ggml type 39: blocks of 32 values in 17 bytes, an e8m0 scale and 16 bytes of nibbles;
    // gpt-oss's GGUF, "file type = MXFP4 MoE": its other matrices Q8_0).
    static constexpr spec::GgmlType kMxfp4{"MXFP4", 39, 32, 17};
    if (e.value("expert_type", std::string()) == "MXFP4")
      for (auto& t : tensors)
        if (t.name.find("_exps.weight") != std::string::npos) {
          t.type = &kMxfp4;
          t.bytes = spec::ggml_tensor_bytes(kMxfp4, t.ne, "test");
        }
    // A deepseek2 GGUF converted before llama.cpp's MLA support (April 2025): one attn_kv_b per
    // layer where newer files hold attn_k_b and attn_v_b.
    if (e.value("legacy_kv_b", false)) {
      std::vector<spec::GgufTensor> merged;
      for (auto& t : tensors) {
        if (t.name.find(".attn_v_b.") != std::string::npos) {
          merged.back().bytes += t.bytes;
          continue;
        }
        if (const auto at = t.name.find(".attn_k_b."); at != std::string::npos) t.name.replace(at, 10, ".attn_kv_b.");
        merged.push_back(t);
      }
      tensors = std::move(merged);
    }
    if (e.contains("expert_type") || e.value("legacy_kv_b", false)) {  // the file's offsets follow the tensors' new sizes
      std::uint64_t offset = 0;
      for (auto& t : tensors) {
        t.offset = offset;
        offset += (t.bytes + 31) / 32 * 32;  // GGUF_DEFAULT_ALIGNMENT
      }
    }
    const auto r = engine::llamacpp::estimate(m, tensors, s);
    const auto& g = r.gpus.at(0);
    const std::pair<const char*, Bytes> ours[] = {
        {"gpu_model", g.model},     {"host_model", r.host.model}, {"gpu_kv", g.kv},
        {"host_kv", r.host.kv},     {"gpu_compute", g.compute},   {"host_compute", r.host.compute},
        {"host_repack", r.host.repack}};
    const auto reported = [&](const std::string& key) {  // listed in the log's "reported_only"
      if (!e.contains("reported_only")) return false;
      for (const auto& k : e.at("reported_only"))
        if (k == key) return true;
      return false;
    };
    for (const auto& [key, bytes] : ours)
      if (e.at("log_mib").contains(key))
        items.push_back({e.at("id"), key, e.at("log_mib").at(key).get<double>(),
                         static_cast<double>(bytes.value()) / kMiB, "MiB", e.value("mix_exact", true), false, 0,
                         reported(key)});
    // "llama_kv_cache: size = X MiB (N cells, L layers, ...)": each cache's K and V over every
    // device, the non-SWA cache's and the SWA one's (logs whose device split is not shown).
    for (const auto& [key, bytes] : {std::pair<const char*, Bytes>{"kv_size", r.kv_size}, {"kv_size_swa", r.kv_size_swa}})
      if (e.at("log_mib").contains(key))
        items.push_back({e.at("id"), key, e.at("log_mib").at(key).get<double>(),
                         static_cast<double>(bytes.value()) / kMiB, "MiB", e.value("mix_exact", true), false, 0,
                         reported(key)});
    // llama-bench runs filling the cache (-d), nvidia-smi polled: what the process held beyond its
    // logged buffers, less vramfit's ggml-cuda pool, is what the reserve must cover (reported).
    if (e.contains("nvidia_smi_peak_mib")) {
      const double outside = e.at("nvidia_smi_peak_mib").get<double>() - e.at("gpu_buffers_mib").get<double>();
      items.push_back({e.at("id"), "outside_less_pool", outside, outside - static_cast<double>(g.pool.value()) / kMiB,
                       "MiB", true, false, 0, true});
    }
    for (std::size_t d = 1; d < r.gpus.size(); ++d)  // "CUDA<d> model/KV/compute buffer size"
      for (const auto& [what, bytes] : {std::pair<const char*, Bytes>{"model", r.gpus[d].model},
                                        {"kv", r.gpus[d].kv}, {"compute", r.gpus[d].compute}})
        if (const std::string key = fmt::format("gpu{}_{}", d, what); e.at("log_mib").contains(key))
          items.push_back({e.at("id"), key, e.at("log_mib").at(key).get<double>(),
                           static_cast<double>(bytes.value()) / kMiB, "MiB", e.value("mix_exact", true), false, 0,
                           reported(key)});
  }
  return items;
}

std::vector<Item> vllm_items() {
  std::vector<Item> items;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    const spec::ModelSpec m = spec_of(e);
    engine::vllm::Settings s;
    s.gpu_memory = Bytes{static_cast<std::uint64_t>(e.at("gpu_memory_gib").get<double>() * kGiB)};
    s.gpu_memory_utilization = e.at("gpu_memory_utilization");
    s.max_model_len = e.at("max_model_len").get<std::uint64_t>();
    s.max_num_seqs = e.at("max_num_seqs");
    s.max_num_batched_tokens = e.at("max_num_batched_tokens");
    s.block_size = e.at("block_size");
    s.tensor_parallel = e.at("tensor_parallel_size");
    s.pipeline_parallel = e.value("pipeline_parallel_size", 1);
    s.v0_engine = e.value("v0_engine", false);
    s.kv_fp8 = e.value("kv_cache_dtype", std::string("auto")).rfind("fp8", 0) == 0;
    if (e.value("profiler", std::string()) == "device_wide") s.profiler = engine::vllm::Profiler::device_wide;
    // The release: older than 0.21 for every log here unless it says (the graphs outside the
    // budget); it sets the dummy sampler's kernel (the late-2025 releases sorted the logits).
    const auto release = engine::vllm::parse_release(e.value("release", std::string("0.11.0")));
    REQUIRE(release);
    s.release = *release;
    // A log whose profile peak shows its sampler: the release's own (engine::vllm::sampler_kernel),
    // or the sort where the log says FlashInfer is not installed.
    s.flashinfer = e.value("flashinfer", true);
    // The card's compute capability, where the log names the card ("9.0" for an H100): it picks
    // the MXFP4 experts' kernels and their layout.
    if (e.contains("compute_capability")) {
      const std::string cc = e.at("compute_capability");
      s.compute_capability = static_cast<unsigned>(std::stoul(cc.substr(0, cc.find('.'))) * 10 + std::stoul(cc.substr(cc.find('.') + 1)));
    }
    if (e.contains("sampler") && !s.v0_engine)
      CHECK((engine::vllm::sampler_kernel(s.release) == engine::vllm::SamplerKernel::torch_sort || !s.flashinfer) ==
            (e.at("sampler") == "torch-sort"));
    // V0 sorts the dummy requests' logits where chunked prefill is off, and from 0.8 with it
    // too (engine/vllm.cpp sampler_peak).
    if (e.contains("sampler") && s.v0_engine)
      CHECK((e.at("sampler") == "v0-sort") == (s.max_num_batched_tokens >= *s.max_model_len || s.release.minor >= 8));
    if (e.contains("quant")) {
      const auto q = spec::parse_quant(e.at("quant").get<std::string>());
      REQUIRE(q);
      spec::set_packing(s.weights, *q);
    } else if (m.quantization) {  // the config's quantization_config, as `vramfit --engine vllm` takes it
      spec::set_packing(s.weights, *m.quantization);
    }
    const auto r = engine::vllm::estimate(m, s);
    const json& log = e.at("log");
    const std::string id = e.at("id");
    const auto gib = [](Bytes b) { return static_cast<double>(b.value()) / kGiB; };
    if (log.contains("weights_gib")) {
      // vLLM prints "Model loading took" with %.4f (V0, V1 to late 2025) or as format_gib's
      // round(x, 2) (vllm/utils/mem_utils.py): "14.99" is any figure in [14.985, 14.995) GiB.
      const double logged = log["weights_gib"];
      const double unit = std::abs(logged * 100 - std::round(logged * 100)) < 1e-9 ? 0.01 : 0.0001;
      items.push_back({id, "weights", logged, gib(r.weights), "GiB", true, false, unit / 2});
    }
    if (log.contains("activation_gib")) {
      // Printed to 0.01 GiB ("0.45") or to 0.0001 (V0's "0.0612").
      const double logged = log["activation_gib"];
      const double unit = std::abs(logged * 100 - std::round(logged * 100)) < 1e-9 ? 0.01 : 0.0001;
      items.push_back({id, "activation_peak", logged, gib(r.activation_peak), "GiB", true,
                       e.value("sampler_bound", false), unit / 2});
    }
    if (log.contains("non_torch_gib")) items.push_back({id, "non_torch", log["non_torch_gib"], gib(r.non_torch), "GiB"});
    // A log whose setup vramfit cannot express (a KV connector: its "kv_excluded" says why) is
    // reported end to end but left out of every bound on the KV memory and concurrency.
    const bool excluded = e.contains("kv_excluded");
    if (log.contains("kv_gib") && !e.value("partial_settings", false))  // end to end where the settings are all known
      items.push_back({id, "kv_cache_memory", log["kv_gib"], static_cast<double>(r.available_kv) / kGiB, "GiB", true,
                       false, 0, false, excluded});
    if (log.contains("num_gpu_blocks")) {
      items.push_back({id, "num_gpu_blocks", log["num_gpu_blocks"], static_cast<double>(r.num_gpu_blocks), "blocks"});
      // The block count from the log's own KV memory: the page-size formula alone.
      const double from_log = std::floor(log["kv_gib"].get<double>() * kGiB / static_cast<double>(r.page_bytes));
      // The log prints the KV memory to 0.01 GiB: +-0.005 GiB is this many blocks.
      const double slack = std::ceil(0.005 * kGiB / static_cast<double>(r.page_bytes)) + 1;
      items.push_back({id, "blocks_from_logged_kv", log["num_gpu_blocks"], from_log, "blocks", true, false, slack});
    }
    if (log.contains("kv_cache_tokens") && log.contains("kv_gib") && !log.contains("num_gpu_blocks")) {
      // "GPU KV cache size: N tokens" from the logged KV memory and the page size alone.
      // With the hybrid manager the tokens are one group's blocks (num_blocks // groups).
      const double blocks = std::floor(log["kv_gib"].get<double>() * kGiB / static_cast<double>(r.page_bytes));
      const double from_log =
          std::floor(blocks / static_cast<double>(r.kv_groups)) * static_cast<double>(s.block_size);
      items.push_back({id, "tokens_from_logged_kv", log["kv_cache_tokens"], from_log, "tokens"});
    }
    if (log.contains("kv_needed_gib")) {
      // V1's "X GiB KV cache is needed" for one max_model_len request: the layout alone.
      const double needed =
          static_cast<double>(engine::vllm::kv_bytes_for_request(m, s, *s.max_model_len)) / kGiB;
      items.push_back({id, "kv_needed_max_model_len", log["kv_needed_gib"], needed, "GiB", true, false, 0.005});
    }
    if (log.contains("estimated_max_model_len") && log.contains("kv_gib")) {
      // "the estimated maximum model length is N" from the printed available KV memory; the
      // print's 0.005 GiB of rounding is this many tokens.
      const auto avail = static_cast<std::uint64_t>(log["kv_gib"].get<double>() * kGiB);
      const double ours = static_cast<double>(engine::vllm::largest_model_len(m, s, avail));
      const double slack = (std::ceil(0.005 * kGiB / static_cast<double>(r.page_bytes)) + 1) *
                           static_cast<double>(s.block_size);
      items.push_back({id, "max_len_from_logged_kv", log["estimated_max_model_len"], ours, "tokens", true, false, slack});
    }
    if (log.contains("max_concurrency") && !e.value("partial_settings", false))  // end to end, as kv_cache_memory
      items.push_back({id, "max_concurrency", log["max_concurrency"], std::floor(r.max_concurrency * 100) / 100, "x", true,
                       false, 0, false, excluded});
  }
  return items;
}

/// The CUDA graph logs (tests/accuracy/serving/vllm_graph_logs.jsonl): the graphs captured,
/// and what they took where the log says.
std::vector<Item> vllm_graph_items() {
  std::vector<Item> items;
  for (const json& e : read_lines("vllm_graph_logs.jsonl")) {
    engine::vllm::Settings s;
    const auto release = engine::vllm::parse_release(e.at("release").get<std::string>());
    REQUIRE(release);
    s.release = *release;
    s.v0_engine = e.value("v0_engine", false);
    s.max_num_seqs = e.at("max_num_seqs");
    s.max_num_batched_tokens = e.at("max_num_batched_tokens");
    s.tensor_parallel = e.at("tensor_parallel_size");
    const spec::ModelSpec m = e.contains("preset") ? spec_of(e) : spec_of(json{{"preset", "llama-3.2-1b"}});  // the sizes alone
    const auto g = engine::vllm::cuda_graphs(m, s);
    const json& log = e.at("log");
    const std::string id = e.at("id");
    const auto count = [&](const char* key, double ours) {
      if (log.contains(key)) items.push_back({id, std::string("graphs_") + key, log[key], ours, "graphs"});
    };
    count("piecewise", static_cast<double>(g.piecewise));
    count("full", static_cast<double>(g.full));
    count("largest", static_cast<double>(g.sizes.empty() ? 0 : g.sizes.front()));
    count("largest_full", static_cast<double>(g.largest_full));
    if (!e.contains("preset")) continue;
    const bool reported = e.value("reported_only", false);  // a figure no constant was set from
    if (log.contains("cuda_graph_gib") && reported)
      items.push_back({id, "cuda_graphs_reported", log["cuda_graph_gib"], static_cast<double>(g.bytes.value()) / kGiB, "GiB"});
    if (log.contains("cuda_graph_gib") && !reported)  // printed to 0.01 GiB
      items.push_back({id, "cuda_graphs", log["cuda_graph_gib"], static_cast<double>(g.bytes.value()) / kGiB, "GiB",
                       true, false, 0.005});
    if (log.contains("cuda_graph_mib_per_size"))  // printed to 0.01 MiB, but the sizes vary by +-2 MiB
      items.push_back({id, "cuda_graph_per_size", log["cuda_graph_mib_per_size"],
                       static_cast<double>(g.bytes.value()) / kMiB / static_cast<double>(g.sizes.size()), "MiB",
                       true, false, 1.0});
  }
  return items;
}

std::string table(const std::vector<Item>& items) {
  std::string s = fmt::format("{:<38} {:<22} {:>12} {:>12} {:>8}\n", "log", "line item", "log", "vramfit", "error");
  for (const auto& i : items)
    s += fmt::format("{:<38} {:<22} {:>12.4f} {:>12.4f} {:>+7.2f}%  {}{}{}{}\n", i.log_id, i.item, i.log, i.ours,
                     100 * i.error(), i.unit, i.reported ? "  (reported)" : "",
                     i.excluded ? "  (excluded: a KV connector, see the log's kv_excluded)" : "",
                     i.tolerance > 0 && std::abs(i.ours - i.log) <= i.tolerance ? "  (exact: within the log's rounding)" : "");
  return s;
}

}  // namespace

TEST_CASE("serving logs: the error table", "[.serving-report]") {
  std::string out = "llama.cpp\n" + table(llamacpp_items()) + "\nvLLM\n" + table(vllm_items()) +
                    "\nvLLM CUDA graphs\n" + table(vllm_graph_items());
  WARN(out);
}

TEST_CASE("llama.cpp logs: KV buffers to the printed digit, weights to the byte where the mix is known", "[accuracy][serving]") {
  std::size_t host = 0, host_exact = 0;
  for (const Item& i : llamacpp_items()) {
    if (i.reported) continue;
    INFO(i.log_id << " " << i.item << ": log " << i.log << " MiB, vramfit " << i.ours << " MiB");
    // Printed with %.2f: a figure exactly halfway (Gemma 4 31B's 3224.375 MiB, printed 3224.38) is
    // 0.005 off, which the bound admits (plus the doubles' rounding).
    if (i.item.find("_kv") != std::string::npos || i.item.rfind("kv_size", 0) == 0)
      CHECK(std::abs(i.ours - i.log) <= 0.005 + 1e-9);
    // CPU_REPACK: the weights a CPU-only run repacks (gpt-oss-20b's MXFP4 experts, 9682.03 MiB).
    const bool model = i.item.find("_model") != std::string::npos || i.item == "host_repack";
    if (model && i.exact_mix) CHECK(std::abs(i.ours - i.log) <= 0.005);
    if (model) CHECK(std::abs(i.error()) <= 0.005);
    // The host compute buffer is the graph inputs, or where the CPU runs layers (-ngl 0,
    // --no-op-offload) its graph simulated with its inputs as leaves: exact but for a few KiB of
    // small inputs (the 11 CPU runs of the build machine, dense, MoE and Gemma 3's SWA, to the digit).
    if (i.item == "host_compute") CHECK(std::abs(i.error()) <= 0.01);
    if (i.item == "host_compute") {
      ++host;
      if (std::abs(i.ours - i.log) <= 0.005) ++host_exact;  // printed to 0.01 MiB
    }
  }
  // Off: an early-2024 Llama 2 (9.00 logged, +6 KiB here) and a Qwen2.5-3B at ubatch 4096 (-0.06%).
  // Quantized caches' attention rotation (llama.cpp#21038) adds its matrices to the inputs: the H200
  // runs with q8_0 or q4_0 caches 32.09 and 52.07 MiB as logged (32.01 and 52.01 before).
  // The H100 runs of stop 37 (23 logs): -ngl 0 with a GPU, the host's compute buffer its inputs
  // alone (24.01 as logged; 266.50 when vramfit ran the CPU's own graph there).
  // Stop 38's CPU runs of StarCoder2's, GPT-2's, Pythia's and Phi-3's widths (16): LayerNorm's
  // ggml_norm out of place (ggml_op_can_inplace lists RMS_NORM only), GPT-2's position table added
  // to the embeddings and its Q/K/V plain views, GPT-NeoX's parallel residual in ggml's order
  // (the FFN before the output projection), plain GELU MLPs, Phi-3's FFN residual in place over
  // the residual (its first source): all to the digit (StarCoder2's 114.00 MiB was 108.00, GPT-2's
  // 188.01 was 180.51, Phi-3's 90.64 was 96.64).
  CHECK(host == 119);
  CHECK(host_exact == 117);
}

TEST_CASE("llama.cpp runs filling the cache: ggml-cuda's pool is what the GPU held beyond the buffers", "[accuracy][serving]") {
  // Stop 37's H100 runs (llama-bench -d, nvidia-smi every 50 ms): the process's peak less its logged
  // buffers ("log") and less vramfit's pool ("vramfit"). With flash attention nothing is in the pool
  // (609.17 MiB at 512 and 8192 cells, with a q8_0 cache at 16384); without it, at ubatch 512, the
  // f16 copy of the scores makes the rest grow with the cells: 925.66 MiB at 8192 and 1181.66 at
  // 16384 (Llama 3.1 8B's shapes, Q8_0), 926.87 for Qwen3-30B-A3B's, 926.00 for a Q4_K file; less the
  // pool (262 and 518 MiB) 663.66 to 664.87: the context, cuBLAS (loaded only without flash
  // attention: +54.5 MiB) and the kernels, a constant. Stop 39's runs of two more architectures
  // agree: gpt-oss-20b's shapes 1180.86 (518 MiB of pool: its full layers' 64 heads), Gemma 3 12B's
  // 796.87 (134 MiB: 1 layer in 6 holds the whole cache's scores): 662.86 and 662.87 less the pool.
  std::vector<double> fa, nofa;
  for (const Item& i : llamacpp_items()) {
    if (i.item != "outside_less_pool") continue;
    INFO(i.log_id << ": " << i.log << " MiB beyond the buffers, " << i.ours << " less the pool");
    if (i.log_id.find("-fa") != std::string::npos) {
      CHECK(i.ours == i.log);  // no pool with flash attention
      fa.push_back(i.ours);
    } else if (i.log_id.find("ub1024") == std::string::npos) {
      CHECK(i.log - i.ours >= 130);  // a pool of a full cache's scores
      nofa.push_back(i.ours);
    }
  }
  REQUIRE(fa.size() == 3);
  REQUIRE(nofa.size() == 6);
  CHECK(*std::max_element(fa.begin(), fa.end()) - *std::min_element(fa.begin(), fa.end()) <= 0.5);
  CHECK(*std::max_element(nofa.begin(), nofa.end()) - *std::min_element(nofa.begin(), nofa.end()) <= 2.1);
  CHECK(*std::min_element(nofa.begin(), nofa.end()) - *std::max_element(fa.begin(), fa.end()) > 50);
}

TEST_CASE("llama.cpp logs: GPU compute buffers to the printed digit where ggml-alloc is simulated, else within 5%", "[accuracy][serving]") {
  // Dense, MoE and interleaved-SWA decoders are simulated (engine/llamacpp.cpp simulated_compute,
  // experts left in host memory included, phi3's fused QKV split as the log's build splits it:
  // Phi-3 mini of July 2025, 150.00 logged, 150.002 here); two logs are not reproduced to the
  // digit: a Qwen2.5-3B at ubatch 4096 (64 MiB short), Qwen3-235B-A22B on Vulkan with its
  // output layer in host memory (+24 MiB: three of the offloaded output stage's [n_embd, ub]
  // activations). A quantized cache's attention rotation (llama.cpp#21038: Q and K rotated after
  // RoPE, V before its store, the output back) is simulated: Llama 3.1 8B's shapes with a q8_0 K
  // cache and no flash attention 1084.07 MiB as logged (1092.01 before). The host's layers that the main GPU runs by op offload (-ngl
  // below the layer count) are simulated too: -ngl 20 and 8 without flash attention, 593.00 as
  // logged (564.01 before, -4.9%).
  std::size_t exact = 0, all = 0;
  for (const Item& i : llamacpp_items()) {
    if (i.reported || i.item.find("_compute") == std::string::npos || i.item == "host_compute") continue;
    INFO(i.log_id << " " << i.item << ": log " << i.log << " MiB, vramfit " << i.ours << " MiB");
    CHECK(std::abs(i.error()) <= 0.05);
    ++all;
    const bool known_gap = i.log_id == "qwen2.5-3b-q8-fa-ub4096" || i.log_id == "qwen3-235b-a22b-q3ks-vulkan-ngl93-ctx4096";
    if (!known_gap) CHECK(std::abs(i.ours - i.log) <= 0.01);  // printed to 0.01 MiB
    if (std::abs(i.ours - i.log) <= 0.01) ++exact;
  }
  // Stop 37's H100 runs: -ngl 1 (593.00) and -ngl 0 (669.48: the output layer's copy and logits)
  // as logged; reported, not bounded here: Qwen3-30B-A3B's shapes -ngl 30 with flash attention
  // (-3.6%), Qwen3 8B's -ngl 10 (-2.0%), Gemma 3 12B's -ngl 30 without (+0.36%). Stop 39's H100
  // runs: gpt-oss-20b's shapes on the GPU with and without flash attention, -ngl 12 with it, and
  // Qwen3-30B-A3B's -ngl 0 with it, all to the digit (6 items); gpt-oss-20b's -ngl 12 without flash
  // attention 4168.89 as logged (2140.83 before a host layer's soft_max started its own split for
  // its attn_sinks, its mask copied in above KQ); Llama 3.1 8B's -ngl 0 at 8192 cells
  // without it 891.31 as logged (790.81 before the last host layer's get_rows ran on the GPU).
  // Stop 39's third H100 run, predicted before it ran (8 logs): gpt-oss-20b's shapes at -ngl 0, 6 and
  // 18 without flash attention, Llama 3.1 8B's, a Q4_K file's, Qwen3 8B's, Qwen3-30B-A3B's and
  // Gemma 3 12B's at -ngl 0 without it, all to the digit after three fixes the trace showed (the
  // biased Q's split takes the positions; Qwen3's q/k norm weights are copied in; a tied output's
  // token_embd is what op offload copies for the logits: Gemma 3 12B 1539.87 MiB, 374.94 before),
  // and the earlier Qwen3 gaps with them (-ngl 30 with flash attention 312.00, was -3.6%; -ngl 10
  // without 1176.00, was -2.0%).
  CHECK(all == 87);
  CHECK(exact == 85);
}

TEST_CASE("vLLM logs: the page size exactly, weights and the profile peak within a few percent", "[accuracy][serving]") {
  for (const Item& i : vllm_items()) {
    INFO(i.log_id << " " << i.item << ": log " << i.log << ", vramfit " << i.ours);
    if (i.item == "blocks_from_logged_kv" || i.item == "kv_needed_max_model_len" || i.item == "max_len_from_logged_kv")
      CHECK(std::abs(i.ours - i.log) <= i.tolerance);
    if (i.item == "tokens_from_logged_kv" && i.log_id.find("tp") == std::string::npos)
      CHECK(std::abs(i.error()) <= 0.001);
    if (i.item == "weights") CHECK(std::abs(i.error()) <= 0.02);
    // The forward pass's peak; a sampler-bound peak is reported, not bounded.
    if (i.item == "activation_peak" && !i.sampler_bound) CHECK(std::abs(i.error()) <= 0.20);
  }
}

TEST_CASE("vLLM logs: unquantized weights to the printed digit, as the caching allocator lays them out", "[accuracy][serving]") {
  // engine/vllm.cpp allocated_weights: every tensor's block (a segment rounded to 2 MiB is not
  // split when 1 MiB or less would be left), the norms whole on each tensor-parallel rank, the
  // attention's scalar tensors. The logs print 0.0001 GiB (%.4f) or round(x, 2) (format_gib, from
  // late 2025): the five Llama 3.1 8B logs printing "14.99" hold 14.9889 GiB here, inside that
  // print's [14.985, 14.995): exact, not 11 MiB short. A Qwen2.5-1.5B on V1 0.11.2 (2.8871
  // logged) is exact with V1's runner buffers in place before the load (engine/vllm.cpp
  // runner_buffers; 2.8876 without them). Not to the digit: an 8B on a late-2026 release's Model
  // Runner V2 ("15.0" is round(x, 2), so x >= 14.995 GiB: 6 to 17 MiB more than 14.9889, not
  // the print's rounding).
  std::size_t n = 0, exact = 0, rounded = 0;
  const std::vector<Item> items = vllm_items();
  std::size_t mla = 0;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    if (e.contains("quant") || spec_of(e).quantization) continue;
    for (const Item& i : items) {
      if (i.log_id != e.at("id") || i.item != "weights") continue;
      if (spec_of(e).kv_lora_rank > 0) {
        // MLA is not replayed: the parameters' bytes, the norms, routers and the latent
        // projections whole on each tensor-parallel rank (DeepSeek-Coder-V2-Lite on TP 4: 7.3858
        // logged, 7.3830 here with the attention scalars; 7.3335, -0.71%, with the latent projections split).
        INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB");
        CHECK(std::abs(i.error()) <= 0.001);
        ++mla;
        continue;
      }
      INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB (printed to +-" << i.tolerance << ")");
      ++n;
      const bool known_gap = i.log_id == "llama3.1-8b-h100-late2026-len131072";
      if (!known_gap) CHECK(std::abs(i.ours - i.log) <= i.tolerance);
      if (std::abs(i.ours - i.log) <= i.tolerance) ++exact;
      if (i.log == 14.99 && std::abs(i.ours - i.log) <= i.tolerance) ++rounded;
    }
  }
  CHECK(mla == 1);
  CHECK(rounded == 5);  // 14.9889 inside "14.99"'s rounding
  CHECK(n == 30);
  CHECK(exact == 29);
}

TEST_CASE("vLLM logs: the sorting sampler's profile peak within 1%, the KV memory within 0.11 GiB", "[accuracy][serving]") {
  std::size_t n = 0, kv = 0;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    if (e.value("sampler", std::string()) != "torch-sort") continue;
    for (const Item& i : vllm_items()) {
      if (i.log_id != e.at("id")) continue;
      INFO(i.log_id << " " << i.item << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB");
      if (i.item == "activation_peak") {
        CHECK(std::abs(i.error()) <= 0.01);
        ++n;
      }
      if (i.item == "kv_cache_memory") {  // end to end: budget - weights - peak - non-torch
        CHECK(std::abs(i.ours - i.log) <= 0.11);
        ++kv;
      }
    }
  }
  CHECK(n == 9);   // the 8 H100 runs of 0.11.1-0.15 and a 0.11 run without FlashInfer (Qwen3-8B-FP8)
  CHECK(kv == 7);
}

TEST_CASE("vLLM logs: FlashInfer's sampler peak to the printed digit", "[accuracy][serving]") {
  // engine/vllm.cpp sampler_peak: FlashInfer's top_k_top_p_sampling_from_logits masks the fp32
  // logits into a new tensor and takes its softmax while the bf16 logits and their fp32 copy stay
  // referenced, 14 bytes a logit. Llama 3.2 1B on V1 0.10 with 256 requests: 0.45 logged, 0.4458
  // here (0.5070, +12.7%, at the 16 bytes taken before); Qwen2.5-0.5B-Instruct on 0.10 (llm-d
  // benchmark's quoted run): 0.52 logged, 0.5193 here (0.5919 at 16 bytes).
  std::size_t n = 0;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    if (e.value("sampler", std::string()) != "flashinfer") continue;
    for (const Item& i : vllm_items()) {
      if (i.log_id != e.at("id") || i.item != "activation_peak") continue;
      INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB (printed to +-" << i.tolerance << ")");
      CHECK(std::abs(i.ours - i.log) <= i.tolerance);
      ++n;
    }
  }
  CHECK(n == 2);
}

TEST_CASE("vLLM logs: quantized weights to the printed digit, with the attention layers' scalar tensors", "[accuracy][serving]") {
  // engine/vllm.cpp weights_on_gpu: a quantized model is not replayed through the allocator (its
  // kernels repack the weights), but its attention layers make their scalar tensors all the same,
  // one 512-byte block each (2 a layer from 0.6.5, 7 from 0.7.3). Llama-3.1-70B W8A8 on V1 0.7
  // (vllm#12569) prints 67.7229 (%.4f): 67.72287 here (67.72279 without the 80 x 2 blocks). The
  // FP8 runs print round(x, 2) and stay inside it. AWQ with Marlin is replayed through the
  // allocator (engine/vllm.cpp allocated_weights: the AWQ tensors, then awq_marlin's repacking of
  // each linear): Llama 3.1 70B AWQ on an RTX PRO 6000 prints 37.09, 37.0946 here (inside
  // [37.085, 37.095)); 37.0682, 22 MiB short, with the parameters' bytes alone.
  std::size_t n = 0, exact = 0;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    if (!e.contains("quant")) continue;
    for (const Item& i : vllm_items()) {
      if (i.log_id != e.at("id") || i.item != "weights") continue;
      INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB (printed to +-" << i.tolerance << ")");
      ++n;
      CHECK(std::abs(i.ours - i.log) <= i.tolerance);
      if (std::abs(i.ours - i.log) <= i.tolerance) ++exact;
    }
  }
  CHECK(n == 5);
  CHECK(exact == 5);
}

TEST_CASE("vLLM logs: MXFP4 weights with their kernels' layout and the allocator's blocks", "[accuracy][serving]") {
  // engine/vllm.cpp mxfp4_expert_extra: the experts as the card's kernels hold them, each tensor
  // in the caching allocator's block. gpt-oss-120b on an H100 (triton_kernels) "64.38" and
  // gpt-oss-20b on an A100 (Marlin) "13.72" to the print (round(x, 2)); gpt-oss-20b on an H100
  // "13.47" is 13.4614 here, 3.6 to 13.6 MiB short (was 13.4366, 29 to 39 MiB short).
  std::size_t n = 0;
  for (const Item& i : vllm_items()) {
    if (i.item != "weights" || i.log_id.rfind("gpt-oss", 0) != 0) continue;
    INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB");
    ++n;
    if (i.log_id == "gpt-oss-20b-h100-v1-len16000") {
      CHECK(i.ours < i.log - i.tolerance);
      CHECK(i.log - i.tolerance - i.ours <= 4.0 / 1024);  // under 4 MiB below the print's range
    } else {
      CHECK(std::abs(i.ours - i.log) <= i.tolerance);
    }
  }
  CHECK(n == 3);
}

TEST_CASE("vLLM logs: end-to-end KV memory and concurrency within 18%, a log with a KV connector left out", "[accuracy][serving]") {
  // budget - weights - profile peak - non-torch, as determine_available_memory subtracts them.
  // The worst kept: vLLM 0.6.4 on an RTX 3090 (-15.6% in memory, -17.1% in concurrency: the
  // H200-measured CUDA context is 0.45 GiB more than that card's). Left out: Qwen3-235B-A22B-FP8
  // TP 4 run with LMCache's connector (vllm#21348: 8.11 GiB logged, 13.66 here, +68%), whose
  // connector memory, weights, peak and non-torch lines are not in the log; its page-size line
  // (tokens from the logged KV memory) is kept: +1.1%, rank 0's memory against the smallest
  // worker's blocks.
  std::size_t kept = 0;
  std::vector<std::string> excluded;
  for (const Item& i : vllm_items()) {
    if (i.item != "kv_cache_memory" && i.item != "max_concurrency") continue;
    INFO(i.log_id << " " << i.item << ": log " << i.log << ", vramfit " << i.ours);
    if (i.excluded) {
      if (i.item == "kv_cache_memory") excluded.push_back(i.log_id);
      continue;
    }
    CHECK(std::abs(i.error()) <= 0.18);
    ++kept;
  }
  CHECK(kept == 31);
  CHECK(excluded == std::vector<std::string>{"qwen3-235b-fp8-tp4-h100"});
  for (const json& e : read_lines("vllm_logs.jsonl"))
    if (e.contains("kv_excluded")) CHECK(e.at("kv_connector") == "LMCacheConnectorV1");
  for (const Item& i : vllm_items())
    if (i.log_id == "qwen3-235b-fp8-tp4-h100" && i.item == "tokens_from_logged_kv") CHECK(std::abs(i.error()) <= 0.012);
}

TEST_CASE("vLLM logs: V0's sorting sampler's profile peak within 2%", "[accuracy][serving]") {
  // V0 without chunked prefill (and from 0.8 with it) sorts the dummy requests' fp32 logits (38 bytes a logit); the
  // logs print the peak to 0.01 GiB (0.33 GiB: +-1.5%).
  std::size_t n = 0;
  for (const json& e : read_lines("vllm_logs.jsonl")) {
    if (e.value("sampler", std::string()) != "v0-sort") continue;
    for (const Item& i : vllm_items()) {
      if (i.log_id != e.at("id") || i.item != "activation_peak") continue;
      INFO(i.log_id << ": log " << i.log << " GiB, vramfit " << i.ours << " GiB");
      CHECK(std::abs(i.error()) <= 0.02);
      ++n;
    }
  }
  CHECK(n == 5);  // 0.6.4 on a T4 and an H200, 0.6.5 on H100 with TP 1 and 2, 0.8.5 chunked on four 2080 Ti
}

TEST_CASE("vLLM CUDA graph logs: the capture sizes exactly, the memory of the logs that set it", "[accuracy][serving]") {
  std::size_t counts = 0, memory = 0;
  for (const Item& i : vllm_graph_items()) {
    INFO(i.log_id << " " << i.item << ": log " << i.log << ", vramfit " << i.ours);
    if (i.unit == "graphs") {
      CHECK(i.ours == i.log);
      ++counts;
    } else if (i.item == "cuda_graphs") {  // the logs that set the per-layer figures
      CHECK(std::abs(i.ours - i.log) <= i.tolerance);
      ++memory;
    }
  }
  CHECK(counts == 22);
  CHECK(memory == 3);
}
