#include "vramfit/render/serving.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

namespace vramfit::render {

namespace {

using json = nlohmann::ordered_json;

double gib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }
double mib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

json advice_doc(const ServingAdvice& advice) {
  if (advice.fits_as_given && !advice.advise) return json();
  json fixes = json::array();
  for (const auto& o : advice.fixes)
    fixes.push_back({{"id", o.id}, {"change", o.change}, {"fits", o.fits}, {"device_total_bytes", o.device_total.value()}});
  return json{{"fits_as_given", advice.fits_as_given}, {"fixes", fixes}};
}

json engine_json(const ServingAnswer& a) {
  return std::visit(
      [](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, LlamaCppAnswer>) return llamacpp_json(x);
        else return vllm_json(x);
      },
      a);
}

std::string engine_text(const ServingAnswer& a) {
  return std::visit(
      [](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, LlamaCppAnswer>) return llamacpp_text(x);
        else return vllm_text(x);
      },
      a);
}

/// The fixes as a table; llama.cpp's show the binding GPU's total after the change.
std::string fixes_text(const ServingAnswer& a, const std::vector<ServingFix>& fixes) {
  if (fixes.empty()) return "";
  // "together" (vLLM): no fix alone fits, these do at once (cli/serving.cpp vllm_together).
  const bool together = std::any_of(fixes.begin(), fixes.end(), [](const ServingFix& o) { return o.id == "together"; });
  std::string s = together ? "\nFixes (each alone from the settings as given; together: each on what the earlier left):\n"
                           : "\nFixes (each alone, from the settings as given):\n";
  const bool llama = std::holds_alternative<LlamaCppAnswer>(a);
  for (const auto& o : fixes)
    s += llama ? fmt::format("  {:<18} {:<60} {:>10.2f} GiB  {}\n", o.id, o.change, gib(o.device_total.value()),
                             o.fits ? "fits" : "does not fit")
               : fmt::format("  {:<30} {:<55} {}\n", o.id, o.change, o.fits ? "fits" : "does not fit");
  return s;
}

/// "fit: --gpu-layers 30 is the largest that fits", with the engine's own name for the dimension.
std::string fit_line(const ServingAnswer& a, const ServingFit& fit) {
  if (!fit.value) return fmt::format("fit: no {} fits\n", fit.dimension);
  std::string what;
  if (std::holds_alternative<LlamaCppAnswer>(a))
    what = fit.dimension == "concurrency" ? "--parallel" : fit.dimension == "ctx" ? "--ctx-size" : "--gpu-layers";
  else
    what = fit.dimension == "concurrency" ? "concurrency (requests of --max-model-len tokens)" : "--max-model-len";
  return fmt::format("fit: {} {} is the largest that fits\n", what, *fit.value);
}

}  // namespace

json llamacpp_json(const LlamaCppAnswer& a) {
  const auto& r = a.result;
  const auto& st = a.settings;
  json o;
  o["name"] = a.engine;
  o["file_type"] = a.file_type;
  o["gpu_layers"] = r.offloaded;
  o["offloadable_layers"] = r.offloadable;
  o["output_on_gpu"] = r.output_on_gpu;
  o["n_ctx"] = r.n_ctx;
  o["n_ctx_seq"] = r.n_ctx_seq;
  o["n_seq_max"] = st.parallel;
  o["kv_cells_swa"] = r.kv_cells_swa;
  o["cache_type_k"] = st.cache_type_k;
  o["cache_type_v"] = st.cache_type_v;
  o["flash_attn"] = st.flash_attn;
  o["ubatch_size"] = std::min(st.ubatch_size, st.batch_size);
  o["mmap"] = st.mmap;
  json devs = json::array();
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    const auto& g = r.gpus[i];
    json d;
    d["name"] = g.name;
    if (i < a.gpu_labels.size()) d["gpu"] = a.gpu_labels[i];
    d["layers"] = g.layers;
    d["model_buffer_bytes"] = g.model.value();
    d["kv_buffer_bytes"] = g.kv.value();
    d["compute_buffer_bytes"] = g.compute.value();
    if (g.mmproj.value() > 0) d["mmproj_buffer_bytes"] = g.mmproj.value();
    d["pool_bytes"] = g.pool.value();
    d["runtime_bytes"] = g.runtime.value();
    d["reserve_bytes"] = st.gpu_reserve.value();
    d["total_bytes"] = (g.total() + st.gpu_reserve).value();
    if (i < st.gpu_memory.size() && i < a.gpu_memory.size()) {
      d["memory_bytes"] = a.gpu_memory[i].value();
      d["fits"] = g.total() + st.gpu_reserve <= st.gpu_memory[i];
    }
    devs.push_back(d);
  }
  o["devices"] = devs;
  json h;
  h["layers"] = r.host.layers;
  h["model_buffer_bytes"] = r.host.model.value();
  h["kv_buffer_bytes"] = r.host.kv.value();
  h["compute_buffer_bytes"] = r.host.compute.value();
  if (r.host.mmproj.value() > 0) h["mmproj_buffer_bytes"] = r.host.mmproj.value();
  h["repack_buffer_bytes"] = r.host.repack.value();
  h["output_buffer_bytes"] = r.output_buffer.value();
  o["host"] = h;
  o["host_bytes"] = r.host_bytes.value();
  return o;
}

std::string llamacpp_text(const LlamaCppAnswer& a) {
  const auto& r = a.result;
  const auto& st = a.settings;
  std::string s = fmt::format("{} ({}): offloaded {}/{} layers to GPU, n_ctx {} ({} per sequence), KV {}/{}{}\n",
                              a.engine, a.file_type, r.offloaded, r.offloadable, r.n_ctx, r.n_ctx_seq,
                              st.cache_type_k, st.cache_type_v, st.flash_attn ? ", flash attention" : "");
  s += fmt::format("  {:<8} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "device", "layers", "model MiB", "KV MiB",
                   "compute MiB", "total MiB", "memory MiB");
  for (std::size_t i = 0; i < r.gpus.size() && !st.no_gpu; ++i) {  // --device none: no GPU backend, no row
    const auto& g = r.gpus[i];
    s += fmt::format("  {:<8} {:>7} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12}\n", g.name, g.layers,
                     mib(g.model.value()), mib(g.kv.value()), mib(g.compute.value()),
                     mib((g.total() + st.gpu_reserve).value()),
                     st.gpu_memory.empty() || i >= a.gpu_memory.size()
                         ? std::string("-")
                         : fmt::format("{:.0f}", mib(a.gpu_memory[i].value())));
  }
  s += fmt::format("  {:<8} {:>7} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12}\n", "CPU", r.host.layers,
                   mib(r.host.model.value()), mib(r.host.kv.value()), mib(r.host.compute.value()),
                   mib(r.host_bytes.value()), "-");
  if (r.host.repack.value() > 0)
    s += fmt::format("  the CPU's total includes {:.2f} MiB of CPU_REPACK (its weights repacked for the CPU's kernels)\n",
                     mib(r.host.repack.value()));
  if (st.no_gpu)
    s += "  no GPU backend (--device none): every layer, the cache and the graph on the CPU\n";
  else if (st.gpu_kernels.value() > 0)
    s += fmt::format("  each GPU's total includes its bare CUDA context ({:.0f} MiB: 2 KiB a resident thread) and, where it "
                     "runs part of the graph, {:.0f} MiB of llama.cpp's kernels (+{:.0f} where cuBLAS runs)\n",
                     mib(st.gpu_reserve.value()), mib(st.gpu_kernels.value()), mib(st.gpu_cublas.value()));
  else
    s += fmt::format("  each GPU's total includes {:.0f} MiB kept for the CUDA context and kernels\n",
                     mib(st.gpu_reserve.value()));
  for (const auto& g : r.gpus)
    if (g.pool.value() > 0)
      s += fmt::format("  {}'s total includes {:.0f} MiB of ggml-cuda's pool: cuBLAS's f16 temporaries (without flash "
                       "attention the scores at a full cache, {} cells x ubatch x heads; an f16 file's activations)\n",
                       g.name, mib(g.pool.value()), r.n_ctx_seq);
  return s;
}

json vllm_json(const VllmAnswer& a) {
  const auto& r = a.result;
  const auto& st = a.settings;
  json o;
  o["name"] = "vllm";
  o["gpu_memory_utilization"] = st.gpu_memory_utilization;
  o["budget_bytes"] = r.budget.value();
  o["weights_bytes"] = r.weights.value();
  o["activation_peak_bytes"] = r.activation_peak.value();
  o["non_torch_bytes"] = r.non_torch.value();
  o["cuda_graph_bytes"] = r.cuda_graphs.value();
  o["cuda_graph_pool_bytes"] = r.graphs.pool.value();
  o["cuda_graphs_in_budget"] = r.graphs.in_budget;
  o["cuda_graph_sizes"] = r.graphs.sizes;
  o["cuda_graphs_piecewise"] = r.graphs.piecewise;
  o["cuda_graphs_full"] = r.graphs.full;
  o["vllm_version"] = fmt::format("{}.{}.{}", st.release.major, st.release.minor, st.release.patch);
  o["available_kv_cache_bytes"] = r.available_kv;
  o["kv_cache_bytes"] = r.kv_cache.value();
  o["kv_cache_tokens"] = r.kv_cache_tokens;
  o["num_gpu_blocks"] = r.num_gpu_blocks;
  o["block_size"] = st.block_size;
  o["max_model_len"] = r.max_model_len;
  o["max_concurrency"] = std::floor(r.max_concurrency * 100.0) / 100.0;
  o["max_model_len_fits"] = r.max_model_len_fits;
  o["largest_max_model_len"] = r.largest_model_len;
  o["kv_cache_groups"] = r.kv_groups;
  o["kv_cache_group_layers"] = r.kv_group_size;
  o["max_num_seqs"] = st.max_num_seqs;
  o["max_num_batched_tokens"] = st.max_num_batched_tokens;
  o["kv_cache_dtype"] = st.kv_fp8 ? "fp8" : "auto";
  o["tensor_parallel_size"] = st.tensor_parallel;
  o["pipeline_parallel_size"] = st.pipeline_parallel;
  o["error"] = r.error.empty() ? json() : json(r.error);
  o["fix"] = r.fix.empty() ? json() : json(r.fix);
  return o;
}

std::string vllm_text(const VllmAnswer& a) {
  const auto& r = a.result;
  const auto& st = a.settings;
  std::string s = st.kv_cache_memory
                      ? fmt::format("vllm: kv_cache_memory_bytes {:.2f} GiB (the utilization not read): {:.2f} GiB "
                                    "per GPU of {:.2f} (TP {}, PP {})\n",
                                    gib(st.kv_cache_memory->value()), gib(r.budget.value()), gib(st.gpu_memory.value()),
                                    st.tensor_parallel, st.pipeline_parallel)
                      : fmt::format("vllm: gpu_memory_utilization {} x {:.2f} GiB = {:.2f} GiB per GPU (TP {}, PP {})\n",
                                    st.gpu_memory_utilization, gib(st.gpu_memory.value()), gib(r.budget.value()),
                                    st.tensor_parallel, st.pipeline_parallel);
  s += fmt::format("  Model loading took {:.2f} GiB\n", gib(r.weights.value()));
  s += fmt::format("  torch peak memory increase {:.2f} GiB; non-torch {:.2f} GiB\n", gib(r.activation_peak.value()),
                   gib(r.non_torch.value()));
  if (!r.graphs.sizes.empty())
    s += fmt::format("  CUDA graphs: {} piecewise + {} FULL (largest {} tokens), {:.2f} GiB ({:.2f} of it the graph pool) {} the budget\n",
                     r.graphs.piecewise, r.graphs.full, r.graphs.sizes.front(), gib(r.cuda_graphs.value()),
                     gib(r.graphs.pool.value()), r.graphs.in_budget ? "inside" : "outside");
  s += fmt::format("  Available KV cache memory: {:.2f} GiB\n", static_cast<double>(r.available_kv) / (1024.0 * 1024.0 * 1024.0));
  s += fmt::format("  # GPU blocks: {}; GPU KV cache size: {} tokens\n", r.num_gpu_blocks, r.kv_cache_tokens);
  if (r.kv_groups > 1)
    s += fmt::format("  KV cache groups: {} of {} layers (hybrid: sliding-window groups keep only the window)\n",
                     r.kv_groups, r.kv_group_size);
  s += fmt::format("  Maximum concurrency for {} tokens per request: {:.2f}x\n", r.max_model_len, r.max_concurrency);
  if (!r.error.empty()) s += fmt::format("  vLLM would fail: {}\n  fix: {}\n", r.error, r.fix);
  return s;
}

std::string render_serving(const EstimateReport& report, const ServingAnswer& answer, const ServingAdvice& advice,
                           Format f) {
  if (f == Format::json) {
    json doc = estimate_json(report);
    doc["engine"] = engine_json(answer);
    doc["advice"] = advice_doc(advice);
    return doc.dump(2) + "\n";
  }
  std::string text = render_estimate(report, f) + "\n" + engine_text(answer) + fixes_text(answer, advice.fixes);
  if (advice.fits_as_given && advice.advise) text += "\nIt fits as given: no change is needed.\n";
  return text;
}

std::string render_serving_fit(const EstimateReport& report, const ServingAnswer& answer, const ServingFit& fit,
                               Format f) {
  if (f == Format::json) {
    json doc = estimate_json(report);
    doc["engine"] = engine_json(answer);
    doc["solve"] = fit.dimension;
    doc["value"] = fit.value ? json(*fit.value) : json();
    doc["fits"] = fit.value.has_value();
    return doc.dump(2) + "\n";
  }
  return render_estimate(report, f) + "\n" + engine_text(answer) + "\n" + fit_line(answer, fit);
}

}  // namespace vramfit::render
