// `--engine llama.cpp|ollama|vllm`: flags -> ModelSpec + the engine's settings -> its buffers
// -> report, advice (re-estimates with the engine's own knobs) or a solved dimension.
#include "vramfit/cli/serving.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "vramfit/advisor/budget.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/cli/hub_cache.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/engine/llamacpp.hpp"
#include "vramfit/engine/vllm.hpp"
#include "vramfit/render/serving.hpp"
#include "vramfit/spec/hybrid.hpp"
#include "vramfit/spec/gguf.hpp"
#include "common.hpp"
#include "vramfit/spec/mmproj.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace {

namespace fs = std::filesystem;

enum class Engine { llamacpp, ollama, vllm };

std::string_view engine_name(Engine e) {
  switch (e) {
    case Engine::llamacpp: return "llama.cpp";
    case Engine::ollama: return "ollama";
    case Engine::vllm: return "vllm";
  }
  return "";
}

std::optional<Engine> parse_engine(std::string_view s) {
  if (s == "llama.cpp" || s == "llamacpp" || s == "llama-cpp") return Engine::llamacpp;
  if (s == "ollama") return Engine::ollama;
  if (s == "vllm") return Engine::vllm;
  return std::nullopt;
}

/// One serving flag: its name, whether llama.cpp/Ollama or vLLM reads it.
struct FlagRow {
  std::string_view flag;
  bool llama;
  bool vllm;
};
constexpr FlagRow kFlags[] = {
    {"--gpu-layers", true, false},      {"--n-cpu-moe", true, false},     {"--tensor-split", true, false},
    {"--split-mode", true, false},      {"--ctx-size", true, false},      {"--parallel", true, false},
    {"--cache-type-k", true, false},    {"--cache-type-v", true, false},  {"--batch-size", true, false},
    {"--ubatch-size", true, false},     {"--flash-attn", true, false},    {"--no-mmap", true, false},
    {"--kv-unified", true, false},      {"--swa-full", true, false},      {"--no-op-offload", true, false},
    {"--device", true, false},
    {"--mmproj", true, false},          {"--override-tensor", true, false},
    {"--gpu-memory-utilization", false, true}, {"--max-model-len", false, true}, {"--max-num-seqs", false, true},
    {"--max-num-batched-tokens", false, true}, {"--kv-cache-dtype", false, true}, {"--enforce-eager", false, true},
    {"--tensor-parallel-size", false, true},   {"--pipeline-parallel-size", false, true},
    {"--block-size", false, true},     {"--kv-cache-memory-bytes", false, true},     {"--disable-hybrid-kv-cache-manager", false, true},
    {"--vllm-version", false, true},   {"--no-flashinfer", false, true},
};

/// The transformers workload flags that mean nothing to a serving engine.
constexpr std::string_view kTransformersOnly[] = {
    "--mode", "--batch", "--seq", "--new-tokens", "--optimizer", "--autocast", "--checkpointing", "--attention",
    "--lora-rank", "--lora-targets", "--lora-dropout", "--grad-accum", "--sharding", "--offload", "--nodes",
    "--master-weights", "--kv-cache", "--gpus", "--loss", "--fsdp-mixed-precision",
    "--activation-offload", "--optimizer-in-backward", "--recipe", "--alloc-conf", "--cuda-context", "--images",
    "--image-size"};

/// llama.cpp keeps its counts in 32-bit ints (common_params: n_ctx, n_batch, n_ubatch, n_parallel,
/// n_gpu_layers) and vLLM's would not fit a GPU long before: a larger value wrapped round (a
/// --ctx-size of 2^64-1 became a context of 0 with exit 0; issue #14's adversarial pass).
constexpr std::uint64_t kMaxCount = 2147483647;

std::uint64_t count_of(const std::string& text, const std::string& flag, Diagnostics& d, bool zero_ok = false,
                       std::string_view example = "4096") {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  bool whole = !text.empty() && ec == std::errc() && ptr == end;
  if (!whole) {
    // "32e3" is a whole number too, as in --seq; a form beyond 2^53 is past the 32-bit limit below.
    const auto exponent = util::whole_from_exponent(text);
    whole = exponent.status != util::ExponentForm::not_one;
    v = exponent.status == util::ExponentForm::whole ? exponent.value : kMaxCount + 1;
  }
  if (!whole || (v == 0 && !zero_ok)) {
    d.add(flag, fmt::format("'{}' is not a {} whole number", text, zero_ok ? "non-negative" : "positive"),
          fmt::format("e.g. {} {}", flag, zero_ok ? "0" : example));
    return 0;
  }
  if (v > kMaxCount) {
    d.add(flag, fmt::format("{} is more than the engines take (at most {}, a 32-bit count)", text, kMaxCount),
          fmt::format("e.g. {} {}", flag, zero_ok ? "0" : example));
    return 0;
  }
  return v;
}

double real_of(const std::string& text, const std::string& flag, Diagnostics& d) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) {
    d.add(flag, fmt::format("'{}' is not a number", text), fmt::format("e.g. {} 0.9", flag));
    return 0;
  }
  return v;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : text + ",") {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}


/// The model and, for a GGUF file, its tensors.
struct Model {
  spec::ModelSpec spec;
  std::optional<std::vector<spec::GgufTensor>> tensors;
};

Model load_model(const EstimateFlags& f, CatalogSource& catalog) {
  Model m;
  std::vector<std::string> sources;
  for (const char* s : {"--params", "--model", "--config"})
    if (f.has(s)) sources.emplace_back(s);
  if (sources.size() != 1)
    throw InputError("model", sources.empty() ? "no model given" : "more than one model source given",
                     "give exactly one of --params, --model, --config (a .gguf file for llama.cpp)");
  if (f.has("--params")) {
    m.spec = spec::from_param_count(spec::parse_param_count(f.params, "--params"));
    m.spec.name = "--params " + f.params;
    m.spec.source = "params";
  } else if (f.has("--model")) {
    m.spec = load_model_arg(f.model, catalog.get(), "--model");
  } else {
    fs::path path = f.config;
    std::error_code ec;
    if (fs::is_directory(path, ec) && !fs::exists(path / "config.json", ec)) {
      // The language model's GGUF; a projector beside it (mmproj*.gguf) is read by llama_job.
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().extension() == ".gguf" && !spec::is_mmproj_name(e.path())) path = e.path();
    }
    if (path.extension() == ".gguf") {
      const spec::GgufHeader h = read_gguf(path, "--config");  // a split GGUF's files together
      m.spec = spec::spec_from_gguf(h, path.string());
      m.tensors = h.tensors;
    } else {
      m.spec = load_config(f.config, "--config");
    }
  }
  spec::refuse_linear_attention(m.spec, "--engine");  // hybrids: no serving engine's state cache is modelled
  return m;
}

/// The budget: one card or several (--gpu a,b), or --budget SIZE per card; and the margin.
struct Cards {
  std::vector<Bytes> memory;
  std::vector<unsigned> compute_capability;  // per card, 0 unknown (--budget)
  std::vector<unsigned> sm_count;            // per card, 0 unknown
  std::vector<std::string> labels;
  Bytes headroom;  // per card
};

std::optional<Cards> cards_of(const EstimateFlags& f, CatalogSource& catalog, std::uint64_t count, bool required) {
  advisor::Headroom headroom;
  if (f.has("--headroom")) headroom = advisor::parse_headroom(f.headroom, "--headroom");
  Cards c;
  if (f.has("--gpu") && f.has("--budget"))
    throw InputError("--budget", "--gpu and --budget were both given", "give one: --gpu ID[,ID...] or --budget SIZE");
  if (f.has("--gpu")) {
    for (const std::string& id : split(f.gpu)) {
      const auto& g = catalog.get().gpu(id, "--gpu");
      c.memory.push_back(g.memory);
      c.compute_capability.push_back(g.compute_capability);
      c.sm_count.push_back(g.sm_count);
      c.labels.push_back(g.id);
    }
  } else if (f.has("--budget")) {
    c.memory.push_back(spec::parse_size(f.budget, "--budget"));
    c.compute_capability.push_back(0);
    c.sm_count.push_back(0);
    c.labels.push_back(f.budget);
  } else if (required) {
    throw InputError("budget", "no budget given", "give --gpu ID (or --gpu a,b for several cards) or --budget SIZE");
  } else {
    if (f.has("--headroom")) throw InputError("--headroom", "a margin needs a budget", "give --gpu ID or --budget SIZE too");
    return std::nullopt;
  }
  // One card type repeated for vLLM's tensor parallel, or llama.cpp without a list.
  while (c.memory.size() < count) {
    c.memory.push_back(c.memory.front());
    c.compute_capability.push_back(c.compute_capability.front());
    c.sm_count.push_back(c.sm_count.front());
    c.labels.push_back(c.labels.front());
  }
  c.headroom = advisor::budget_of(c.memory.front(), headroom).headroom_bytes();
  advisor::check_budget(advisor::budget_of(c.memory.front(), headroom));
  return c;
}

// ---------------------------------------------------------------------------------------
// llama.cpp / Ollama

struct LlamaJob {
  Model model;
  std::vector<spec::GgufTensor> tensors;
  std::string file_type;
  engine::llamacpp::Settings settings;
  std::optional<Cards> cards;
  std::optional<spec::Mmproj> mmproj;  ///< --mmproj, or the mmproj*.gguf found in the --config folder
  std::string ctx_note;                ///< Ollama: how its default num_ctx was picked
  std::string fa_note;                 ///< llama.cpp: what --flash-attn auto resolved to
};

/// The projector: --mmproj FILE, else the one mmproj*.gguf in the folder --config names.
std::optional<spec::Mmproj> mmproj_of(const EstimateFlags& f, const ServingFlags& s) {
  std::error_code ec;
  fs::path path;
  std::string field = "--mmproj";
  if (!s.mmproj.empty()) {
    path = s.mmproj;
    if (fs::is_directory(path, ec))
      throw InputError(field, fmt::format("{} is a folder", path.string()), "give the mmproj-*.gguf file itself");
    if (path.extension() != ".gguf")
      throw InputError(field, fmt::format("{} is not a .gguf file", path.string()),
                       "give the projector GGUF published beside the model (mmproj-*.gguf)");
  } else if (f.has("--config") && fs::is_directory(f.config, ec) && !fs::exists(fs::path(f.config) / "config.json", ec)) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(f.config, ec))
      if (spec::is_mmproj_name(e.path()) && e.is_regular_file(ec)) found.push_back(e.path());
    if (found.empty()) return std::nullopt;
    std::sort(found.begin(), found.end());
    if (found.size() > 1)
      throw InputError("--config", fmt::format("folder {} holds {} projector files", f.config, found.size()),
                       fmt::format("name the one llama.cpp loads with --mmproj, e.g. --mmproj {}", found.front().string()));
    path = found.front();
    field = "--config";
  } else {
    return std::nullopt;
  }
  return spec::mmproj_from_gguf(read_gguf_header(path, field), path.string(), field);
}

render::LlamaCppAnswer llama_answer(const engine::llamacpp::Result& r, const engine::llamacpp::Settings& st,
                                    const LlamaJob& j, Engine e) {
  render::LlamaCppAnswer a{r, st, std::string(engine_name(e)), j.file_type, {}, {}};
  if (j.cards) {
    a.gpu_labels = j.cards->labels;
    a.gpu_memory = j.cards->memory;
  }
  return a;
}

/// Why a --override-tensor pattern could make std::regex_search run for minutes (it backtracks):
/// a repeat of a group that itself repeats or alternates ("(.*)*", "(.|.)*"), or more than four repeats in all
/// (".*.*.*.*.*x" is polynomial of that degree over every tensor name), or crash it (too long);
/// empty when it is safe.
std::string slow_pattern(const std::string& p) {
  // libstdc++'s regex recurses per element: a pattern of 120000 characters overflowed the stack.
  // GGUF tensor names are at most 63 characters (GGML_MAX_NAME 64).
  if (p.size() > 1024) return fmt::format("{} characters (at most 1024)", p.size());
  std::vector<bool> group;  // per open group: it contains a repeat
  bool top = false, closed_repeats = false, after_atom = false;
  std::size_t repeats = 0;
  const auto mark = [&] {
    if (group.empty()) top = true;
    else group.back() = true;
  };
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool was_group = closed_repeats;
    closed_repeats = false;
    if (c == '\\') {
      ++i;
      after_atom = true;
      continue;
    }
    if (c == '[') {  // a class: quantifier characters inside are literal
      for (++i; i < p.size() && p[i] != ']'; ++i)
        if (p[i] == '\\') ++i;
      after_atom = true;
      continue;
    }
    if (c == '(') {
      group.push_back(false);
      after_atom = false;
      continue;
    }
    if (c == ')') {
      const bool inner = !group.empty() && group.back();
      if (!group.empty()) group.pop_back();
      closed_repeats = inner;
      if (inner) mark();
      after_atom = true;
      continue;
    }
    if (c == '|') {  // (.|.)* backtracks through 2^n ways of matching n characters
      if (!group.empty()) group.back() = true;
      after_atom = false;
      continue;
    }
    if (c == '?' && after_atom) {  // an optional atom: (.?.?)* is as ambiguous as (.|.)*; a
      mark();                      // group made optional matches at most once, as safe as itself
      after_atom = false;
      continue;
    }
    if ((c == '*' || c == '+' || c == '{') && after_atom) {
      if (was_group) return "a group that repeats holds a repeat or an alternation (as in (.*)* or (a|b)*)";
      if (++repeats > 4) return "more than four repeats (*, + or {n,m})";
      mark();
      if (c == '{')
        while (i < p.size() && p[i] != '}') ++i;
      if (i + 1 < p.size() && p[i + 1] == '?') ++i;  // lazy
      after_atom = false;
      continue;
    }
    after_atom = c != '|' && c != '^' && c != '?';
  }
  return {};
}

LlamaJob llama_job(Engine e, const EstimateFlags& f, const ServingFlags& s, CatalogSource& catalog, bool required) {
  LlamaJob j;
  Diagnostics d;
  auto& st = j.settings;
  if (e == Engine::ollama) st = engine::llamacpp::ollama_settings();
  // common/arg.cpp -ngl: a number, "all" (-2: every layer) or "auto" (-1: --fit picks them).
  if (s.gpu_layers == "all" || s.gpu_layers == "-2")
    st.gpu_layers = 999;
  else if (s.gpu_layers == "auto" || s.gpu_layers == "-1")
    d.add("--gpu-layers", fmt::format("'{}' leaves the layers to llama.cpp's --fit, which moves them to the CPU until "
                                      "the model fits",
                                      s.gpu_layers),
          "run 'vramfit fit --solve gpu-layers' with the same flags for the most that fit, or give a number or all");
  else if (!s.gpu_layers.empty())
    st.gpu_layers = count_of(s.gpu_layers, "--gpu-layers", d, true);
  if (!s.n_cpu_moe.empty()) st.n_cpu_moe = count_of(s.n_cpu_moe, "--n-cpu-moe", d, true);
  // --ctx-size 0 is llama.cpp's -c 0 (the model's trained context, kept whole); --ctx-size fit is
  // llama-server without -c (the trained context, cut by --fit to what fits). Both settled below.
  bool ctx_train = false, ctx_fit = false;
  if (e == Engine::llamacpp && (s.ctx_size == "fit" || s.ctx_size == "0")) {
    ctx_fit = s.ctx_size == "fit";
    ctx_train = !ctx_fit;
  } else if (!s.ctx_size.empty()) {
    st.ctx_size = count_of(s.ctx_size, "--ctx-size", d);
  }
  if (!s.parallel.empty()) st.parallel = count_of(s.parallel, "--parallel", d, false, "4");
  if (!s.batch_size.empty()) st.batch_size = count_of(s.batch_size, "--batch-size", d, false, "2048");
  if (!s.ubatch_size.empty()) st.ubatch_size = count_of(s.ubatch_size, "--ubatch-size", d, false, "512");
  if (!s.cache_type_k.empty()) st.cache_type_k = s.cache_type_k;
  if (!s.cache_type_v.empty()) st.cache_type_v = s.cache_type_v;
  if (!s.flash_attn.empty()) {
    if (s.flash_attn == "on" || s.flash_attn == "1" || s.flash_attn == "true") st.flash_attn = true;
    else if (s.flash_attn == "off" || s.flash_attn == "0" || s.flash_attn == "false") st.flash_attn = false;
    else if (s.flash_attn != "auto")
      d.add("--flash-attn", fmt::format("'{}' is not on, off or auto", s.flash_attn), "give --flash-attn on, off or auto");
  }
  if (!s.split_mode.empty()) {
    if (s.split_mode == "layer") st.split_mode = engine::llamacpp::SplitMode::layer;
    else if (s.split_mode == "row") st.split_mode = engine::llamacpp::SplitMode::row;
    else if (s.split_mode == "none") st.split_mode = engine::llamacpp::SplitMode::none;
    else d.add("--split-mode", fmt::format("unknown split mode '{}'", s.split_mode), "one of layer, row, none");
  }
  if (s.no_mmap) st.mmap = false;
  if (s.kv_unified) st.kv_unified = true;
  if (s.swa_full) st.swa_full = true;
  if (s.no_op_offload) st.op_offload = false;
  if (!s.device.empty()) {
    // common/arg.cpp --device: a comma-separated list of devices, "none" for none.
    if (s.device == "none") {
      st.no_gpu = true;
      st.gpu_layers = 0;  // no GPU to put a layer on: llama.cpp runs the whole model on the CPU
    } else {
      d.add("--device", fmt::format("'{}': only 'none' (no GPU backend, a CPU-only run) is modelled", s.device),
            "give --device none, or leave it out and pick the GPUs with --gpu");
    }
  }
  if (!s.override_tensor.empty()) {
    // common/arg.cpp: comma-separated PATTERN=BUFFER; the buffer a ggml buffer type's name.
    std::string item;
    for (const char c : s.override_tensor + ",") {
      if (c != ',') {
        item += c;
        continue;
      }
      const std::size_t eq = item.rfind('=');
      if (eq == std::string::npos || eq == 0) {
        d.add("--override-tensor", fmt::format("'{}' is not PATTERN=BUFFER", item),
              "e.g. --override-tensor 'ffn_.*_exps=CPU' (a regex over GGUF tensor names = CPU or CUDA0, CUDA1, ...)");
      } else {
        const std::string buf = item.substr(eq + 1);
        int dev = -2;
        if (buf == "CPU") {
          dev = -1;
        } else if (buf.size() > 4 && buf.size() <= 7 && buf.rfind("CUDA", 0) == 0 &&
                   buf.find_first_not_of("0123456789", 4) == std::string::npos) {
          dev = std::stoi(buf.substr(4));
        }
        const std::string pattern = item.substr(0, eq);
        const std::string slow = slow_pattern(pattern);
        if (dev == -2)
          d.add("--override-tensor", fmt::format("unknown buffer type '{}'", buf), "one of CPU, CUDA0, CUDA1, ...");
        else if (!slow.empty())
          d.add("--override-tensor",
                fmt::format("'{}': {}, which std::regex cannot run safely over the tensor names", pattern, slow),
                "name the tensors more plainly, e.g. 'blk\\.(1[0-9])\\.ffn_.*_exps=CPU'");
        else
          st.override_tensor.push_back({pattern, dev});
      }
      item.clear();
    }
    if (st.override_tensor.size() > 64) {
      d.add("--override-tensor", fmt::format("{} patterns (at most 64)", st.override_tensor.size()),
            "join them into fewer regexes, e.g. 'blk\\.(1[0-9]|2[0-9])\\.ffn_.*_exps=CPU'");
      st.override_tensor.clear();
    }
  }
  if (!s.tensor_split.empty())
    for (const std::string& x : split(s.tensor_split)) st.tensor_split.push_back(real_of(x, "--tensor-split", d));
  d.throw_if_any();

  j.model = load_model(f, catalog);
  if (auto mm = mmproj_of(f, s)) {
    st.mmproj = Bytes{mm->bytes};
    j.mmproj = std::move(mm);
  }
  if (j.model.tensors) {
    j.tensors = *j.model.tensors;
    j.file_type = j.model.spec.quantization && !j.model.spec.quantization->gguf_type.empty()
                      ? std::string(j.model.spec.quantization->gguf_type)
                      : "GGUF";
  } else {
    // A config or preset: the tensors a GGUF of --quant's type would hold (Ollama's default
    // download is Q4_K_M).
    std::string ft = "Q4_K_M";
    if (f.has("--quant")) ft = f.quant;
    else if (f.has("--dtype")) ft = f.dtype == "fp32" ? "F32" : f.dtype == "bf16" ? "BF16" : f.dtype == "fp16" ? "F16" : f.dtype;
    const spec::GgufFileType* t = spec::gguf_file_type_by_name(ft);
    if (t == nullptr || !t->mix_known)
      throw InputError(f.has("--quant") ? "--quant" : "--dtype", fmt::format("'{}' is not a GGUF file type vramfit lays out", ft),
                       "e.g. --quant q4_k_m, q8_0, f16, or give the .gguf file with --config");
    j.file_type = std::string(t->name);
    j.tensors = engine::llamacpp::tensors_of(j.model.spec, j.file_type);
  }
  j.cards = cards_of(f, catalog, 1, required);
  if (j.cards) {
    st.gpu_memory = j.cards->memory;
    for (Bytes& m : st.gpu_memory) m = Bytes::saturating_sub(m, j.cards->headroom);
    // llama.cpp on cards whose SMs are known: the bare context each holds (the largest, for the
    // one reserve), and the kernels and cuBLAS measured beyond it; Ollama keeps its own 457 MiB.
    Bytes context;
    bool known = e == Engine::llamacpp;
    for (std::size_t i = 0; i < j.cards->sm_count.size(); ++i) {
      const Bytes c = engine::llamacpp::cuda_context_bytes(j.cards->sm_count[i], j.cards->compute_capability[i]);
      if (c.value() == 0) known = false;
      context = std::max(context, c);
    }
    if (known) {
      st.gpu_reserve = context;
      st.gpu_kernels = engine::llamacpp::Settings::kGpuKernels;
      st.gpu_cublas = engine::llamacpp::Settings::kGpuCublas;
    }
  }
  // --cuda-context SIZE: what the user measured outside llama.cpp's buffers on each GPU (nvidia-smi's
  // use less the logged buffers), the whole of it, for a card vramfit does not know or to replace
  // the rule and the H100's kernels.
  if (f.has("--cuda-context")) {
    st.gpu_reserve = spec::parse_size(f.cuda_context, "--cuda-context");
    st.gpu_kernels = st.gpu_cublas = Bytes{0};
  }
  if (st.no_gpu) st.gpu_reserve = st.gpu_kernels = st.gpu_cublas = Bytes{0};  // --device none: no CUDA context
  if (e == Engine::ollama && s.ctx_size.empty()) {
    // Ollama's default num_ctx from the cards' total memory, capped at the model's trained
    // context (llm/server.go: "requested context size too large for model").
    Bytes total;
    if (j.cards)
      for (const Bytes& m : j.cards->memory) total = total + m;
    if (j.cards) st.ctx_size = engine::llamacpp::ollama_default_ctx(total);
    const std::uint64_t tier = st.ctx_size;
    if (j.model.spec.max_positions != 0) st.ctx_size = std::min<std::uint64_t>(st.ctx_size, j.model.spec.max_positions);
    j.ctx_note = j.cards ? fmt::format("Ollama (0.15.5 and later) sets num_ctx from the total VRAM: {:.2f} GiB gives {}{} "
                                       "(4096 under 23 GiB, 32768 from 23, 262144 from 47; before 0.15.5, 4096); "
                                       "--ctx-size sets another",
                                       static_cast<double>(total.value()) / (1ULL << 30), tier,
                                       st.ctx_size < tier ? fmt::format(", the model's {}", st.ctx_size) : std::string())
                         : std::string("Ollama's num_ctx: 4096 without a card (from 0.15.5 Ollama picks it from the "
                                       "total VRAM: give --gpu, or --ctx-size)");
  }
  // llama.cpp's --flash-attn auto (its default since August 2025, llama.cpp#15434): on where
  // every layer's attention runs CUDA's flash-attention kernels. Ollama: on for the
  // architectures it lists, unless OLLAMA_FLASH_ATTENTION says otherwise (--flash-attn).
  if (e == Engine::ollama && (s.flash_attn.empty() || s.flash_attn == "auto")) {
    st.flash_attn = engine::llamacpp::ollama_flash_attn(j.model.spec, j.tensors);
    j.fa_note = fmt::format("Ollama's flash attention: {} for model_type '{}' (its list of architectures; "
                            "OLLAMA_FLASH_ATTENTION overrides it: --flash-attn on|off)",
                            st.flash_attn ? "on" : "off", j.model.spec.model_type);
  }
  // Current llama.cpp's own -c default is 0, the model's trained context (common.h n_ctx = 0),
  // which llama-server's --fit then shrinks to what fits (down to --fit-ctx 4096); vramfit keeps
  // 4096 unless --ctx-size is given, and says so where the model's context is longer.
  if (e == Engine::llamacpp && s.ctx_size.empty() && j.model.spec.max_positions > st.ctx_size)
    j.ctx_note = fmt::format("--ctx-size not given: estimated at {} cells; current llama.cpp's own default (-c 0) is the "
                             "model's {}, which llama-server's --fit shrinks to what fits (not below 4096): give "
                             "--ctx-size fit for that, or --ctx-size 0 for the whole context",
                             st.ctx_size, j.model.spec.max_positions);
  // With no GPU backend (--device none) the CPU's flash attention takes every head size and cache
  // type, and llama_context's auto check finds FLASH_ATTN_EXT on the layers' device: on.
  if (e == Engine::llamacpp && (s.flash_attn.empty() || s.flash_attn == "auto")) {
    st.flash_attn_auto = true;
    st.flash_attn =
        st.no_gpu || engine::llamacpp::flash_attn_auto(j.model.spec, j.tensors, st.cache_type_k, st.cache_type_v);
    j.fa_note = st.no_gpu ? "--flash-attn auto (llama.cpp's default since August 2025): on, the CPU's flash attention "
                            "takes every head size; --flash-attn off for an older build's default"
              : st.flash_attn
                    ? "--flash-attn auto (llama.cpp's default since August 2025): on, every layer's heads run CUDA's "
                      "flash attention; --flash-attn off for an older build's default"
                    : "--flash-attn auto (llama.cpp's default since August 2025): off, a head size or cache type "
                      "CUDA's flash attention does not take";
  }
  // --ctx-size 0: llama.cpp's -c 0, the model's trained context (llama_context: n_ctx = 0 takes
  // hparams.n_ctx_train), which --fit keeps whole since llama.cpp#19070 (January 2026).
  // --ctx-size fit: no -c, the same context that llama-server's --fit (on by default since
  // December 2025) cuts before loading, keeping 1024 MiB free a device, not below 4096.
  if (ctx_train || ctx_fit) {
    const std::uint64_t train = j.model.spec.max_positions;
    if (train == 0 || train > kMaxCount)
      throw InputError("--ctx-size",
                       train == 0 ? fmt::format("{} asks for the model's trained context, which the model does not give",
                                                s.ctx_size)
                                  : fmt::format("{} asks for the model's trained context, {} cells, more than llama.cpp "
                                                "takes (a 32-bit count)",
                                                s.ctx_size, train),
                       "give the context, e.g. --ctx-size 8192");
    // --fit without -c and without --kv-unified gives every sequence the whole trained context
    // (llama.cpp#27496, August 2026): n_ctx = n_ctx_train x --parallel.
    const std::uint64_t streams = ctx_fit && !st.kv_unified ? st.parallel : 1;
    const std::uint64_t whole = train * streams;  // both at most 2^31 - 1
    if (whole > kMaxCount)
      throw InputError("--parallel",
                       fmt::format("{} sequences of the model's {} cells are {} cells, more than llama.cpp takes (a "
                                   "32-bit count)",
                                   streams, train, whole),
                       "fewer sequences, --kv-unified, or --ctx-size N");
    const std::string per_seq =
        streams > 1 ? fmt::format(" ({} a sequence x {} sequences, llama.cpp#27496)", train, streams) : std::string();
    st.ctx_size = whole;
    if (ctx_train) {
      j.ctx_note = fmt::format("--ctx-size 0: the model's trained context, {} cells, kept whole as llama.cpp keeps an "
                               "explicit -c 0 (--fit may still move layers); --ctx-size fit for llama-server's default",
                               train);
    } else if (!j.cards) {
      j.ctx_note = fmt::format("--ctx-size fit: the model's trained context, {} cells{}; give --gpu to see what "
                               "llama-server's --fit keeps",
                               whole, per_seq);
    } else {
      const engine::llamacpp::FitCtx fit = engine::llamacpp::fit_ctx(j.model.spec, j.tensors, st, whole);
      st.ctx_size = fit.n_ctx;
      const auto mib = [](Bytes b) { return b.value() / (1ULL << 20); };
      std::string what;
      if (fit.cut())
        what = fmt::format("cuts the model's {} cells{} to {} (interpolating its projections at {} and at 4096 so that "
                           "1024 MiB stay free a device)",
                           whole, per_seq, fit.n_ctx, whole);
      else
        what = fmt::format("keeps the model's {} cells{}{}", whole, per_seq,
                           fit.uneven ? " (the GPUs together keep 1024 MiB each, so it moves layers between them instead)"
                           : fit.short_by > Bytes{} ? " (not above --fit-ctx's 4096, it is not cut)"
                                                    : ", 1024 MiB staying free a device");
      j.ctx_note = fmt::format("--ctx-size fit: llama-server's --fit (its default since December 2025; --fit off keeps the "
                               "model's context) {}{}",
                               what,
                               fit.short_by > Bytes{} ? fmt::format("; still {} MiB short, it then moves {} to the CPU",
                                                                    mib(fit.short_by),
                                                                    j.model.spec.moe.num_experts > 0
                                                                        ? "expert tensors (then layers)"
                                                                        : "layers")
                                                      : std::string());
    }
  }
  // Ollama's slots share one context: num_ctx per request x OLLAMA_NUM_PARALLEL.
  if (e == Engine::ollama) st.ctx_size = st.ctx_size * st.parallel;
  return j;
}

bool llama_fits(const engine::llamacpp::Result& r, const engine::llamacpp::Settings& st) {
  if (st.gpu_memory.empty()) return true;
  for (std::size_t i = 0; i < r.gpus.size(); ++i)
    if (r.gpus[i].total() + st.gpu_reserve > st.gpu_memory[i]) return false;
  return true;
}

// ---------------------------------------------------------------------------------------
// vLLM

struct VllmJob {
  Model model;
  engine::vllm::Settings settings;
  std::optional<Cards> cards;
  bool auto_len = false;  ///< --max-model-len auto (or -1): vLLM fits the length to the cache
  std::string block_note;  ///< the block size vLLM forces on the attention backend, when it does
};

/// `vllm serve`'s max_num_batched_tokens when none is given (vllm/engine/arg_utils.py). V1
/// (0.8 on; get_batch_defaults): 8192 on a card of 70 GiB or more whose name is not an A100
/// (PR #17885: a larger budget slowed the A100 down), else 2048 (0.8 and 0.9 tested the names
/// h100/h200 instead of the size: an 80 GiB card of another name differs there). V0
/// (SchedulerConfig): max(max_model_len, 2048), or with chunked prefill, which V0 turns on past
/// 32K tokens of context, 512 in 0.6 and 2048 in 0.7.
std::uint64_t default_batched_tokens(const engine::vllm::Settings& st, std::uint64_t max_model_len,
                                     const std::string& card_label) {
  if (st.v0_engine) {
    if (max_model_len > 32768) return st.release.at_least(0, 7) ? 2048 : 512;
    return std::max<std::uint64_t>(max_model_len, 2048);
  }
  const bool large = st.gpu_memory.value() >= GiB(70).value() && card_label.find("a100") == std::string::npos;
  return large ? 8192 : 2048;
}

VllmJob vllm_job(const EstimateFlags& f, const ServingFlags& s, CatalogSource& catalog, bool required) {
  VllmJob j;
  Diagnostics d;
  auto& st = j.settings;
  if (!s.gpu_memory_utilization.empty())
    st.gpu_memory_utilization = real_of(s.gpu_memory_utilization, "--gpu-memory-utilization", d);
  if (s.max_model_len == "auto" || s.max_model_len == "-1") j.auto_len = true;
  else if (!s.max_model_len.empty()) st.max_model_len = count_of(s.max_model_len, "--max-model-len", d);
  if (!s.max_num_seqs.empty()) st.max_num_seqs = count_of(s.max_num_seqs, "--max-num-seqs", d, false, "256");
  if (!s.max_num_batched_tokens.empty())
    st.max_num_batched_tokens = count_of(s.max_num_batched_tokens, "--max-num-batched-tokens", d);
  if (!s.block_size.empty()) {
    st.block_size = count_of(s.block_size, "--block-size", d, false, "16");
    // vllm/config/cache.py's BlockSize, the argument's choices: Literal[1, 8, 16, 32, 64, 128, 256]
    // (256 since 0.10); argparse refuses any other value.
    constexpr std::uint64_t kSizes[] = {1, 8, 16, 32, 64, 128, 256};
    if (st.block_size != 0 && std::find(std::begin(kSizes), std::end(kSizes), st.block_size) == std::end(kSizes))
      d.add("--block-size", fmt::format("{} is not one of vLLM's block sizes (1, 8, 16, 32, 64, 128, 256)",
                                        st.block_size),
            "give one of them, e.g. --block-size 16 (vLLM's default), or leave it out");
  }
  if (!s.kv_cache_memory_bytes.empty()) {
    try {
      st.kv_cache_memory = spec::parse_size(s.kv_cache_memory_bytes, "--kv-cache-memory-bytes");
      if (st.kv_cache_memory->value() == 0)
        d.add("--kv-cache-memory-bytes", "0 bytes of KV cache", "give a size, e.g. --kv-cache-memory-bytes 20GiB");
    } catch (const InputError& err) {
      for (const auto& x : err.diagnostics()) d.add(x.field, x.problem, x.fix);
    }
  }
  if (!s.tensor_parallel_size.empty()) st.tensor_parallel = count_of(s.tensor_parallel_size, "--tensor-parallel-size", d, false, "2");
  if (!s.pipeline_parallel_size.empty())
    st.pipeline_parallel = count_of(s.pipeline_parallel_size, "--pipeline-parallel-size", d, false, "2");
  // The cards are listed one by one (cards_of): a world of 10^7 GPUs held memory without end
  // (issue #14's adversarial pass). The same bound as --gpus x --nodes for transformers.
  constexpr std::uint64_t kMaxGpus = 4096;
  if (st.tensor_parallel > kMaxGpus || st.pipeline_parallel > kMaxGpus ||
      st.tensor_parallel * st.pipeline_parallel > kMaxGpus)
    d.add(st.tensor_parallel > kMaxGpus || st.pipeline_parallel <= kMaxGpus ? "--tensor-parallel-size" : "--pipeline-parallel-size",
          fmt::format("{} x {} GPUs is more than vramfit models (at most {})", st.tensor_parallel, st.pipeline_parallel, kMaxGpus),
          "estimate per GPU: e.g. --tensor-parallel-size 8 --pipeline-parallel-size 2");
  if (!s.kv_cache_dtype.empty()) {
    if (s.kv_cache_dtype == "fp8" || s.kv_cache_dtype == "fp8_e4m3" || s.kv_cache_dtype == "fp8_e5m2") st.kv_fp8 = true;
    else if (s.kv_cache_dtype != "auto" && s.kv_cache_dtype != "bfloat16" && s.kv_cache_dtype != "float16")
      d.add("--kv-cache-dtype", fmt::format("unknown KV cache dtype '{}'", s.kv_cache_dtype), "one of auto, fp8, fp8_e4m3, fp8_e5m2");
  }
  st.enforce_eager = s.enforce_eager;
  {
    // vllm/envs.py: "1" or "true" (any case, spaces trimmed) lets a --max-model-len past the
    // model's derived maximum through with a warning.
    std::string allow = lower(util::env("VLLM_ALLOW_LONG_MAX_MODEL_LEN"));
    allow.erase(0, allow.find_first_not_of(" \t\n\r"));
    allow.erase(allow.find_last_not_of(" \t\n\r") + 1);
    st.allow_long_max_model_len = allow == "1" || allow == "true";
  }
  st.hybrid_kv = !s.disable_hybrid_kv_cache_manager;
  st.flashinfer = !s.no_flashinfer;
  if (!s.vllm_version.empty()) {
    if (const auto v = engine::vllm::parse_release(s.vllm_version); v && !v->at_least(0, 6)) {
      // The oldest memory profiling whose source was read is 0.6's (worker.py
      // determine_num_available_blocks); earlier releases are refused, not estimated as 0.6.
      d.add("--vllm-version", fmt::format("vLLM {} is older than the oldest release vramfit follows (0.6)", s.vllm_version),
            "give --vllm-version 0.6 or newer (default: the newest, 0.27.1)");
    } else if (v) {
      st.release = *v;
      // The V1 engine is the default from 0.8; up to 0.6.4 the non-torch memory is the
      // device's whole use outside PyTorch (engine/vllm.cpp non_torch).
      st.v0_engine = !v->at_least(0, 8);
      if (v->major == 0 && v->minor == 6 && v->patch < 5)
        st.profiler = engine::vllm::Profiler::device_wide;
    } else {
      d.add("--vllm-version", fmt::format("'{}' is not a vLLM release", s.vllm_version),
            "give major.minor[.patch], e.g. --vllm-version 0.11.2 (default: the newest, 0.27.1)");
    }
  }
  if (st.kv_cache_memory && !st.release.at_least(0, 11))
    d.add("--kv-cache-memory-bytes", fmt::format("vLLM {}.{}.{} has no kv_cache_memory_bytes: it arrived in 0.11",
                                                 st.release.major, st.release.minor, st.release.patch),
          "drop it and give --gpu-memory-utilization, or --vllm-version 0.11 or newer");
  // --max-model-len auto arrived in 0.12 (vllm#29431, kv_cache_utils.py _auto_fit_max_model_len).
  if (j.auto_len && !st.release.at_least(0, 12))
    d.add("--max-model-len", fmt::format("'{}' (auto-fit) is not in vLLM {}.{}.{}: it arrived in 0.12", s.max_model_len,
                                         st.release.major, st.release.minor, st.release.patch),
          "give a length, e.g. --max-model-len 32768, or --vllm-version 0.12 or newer");
  d.throw_if_any();
  j.model = load_model(f, catalog);
  // The weights' packing: --quant, else the checkpoint's quantization_config, else --dtype.
  spec::Workload& w = st.weights;
  if (f.has("--dtype")) {
    if (const auto dt = parse_dtype(f.dtype)) w.weights = *dt;
  }
  std::optional<spec::Quantization> q;
  if (f.has("--quant")) {
    q = spec::parse_quant(f.quant);
    if (!q) throw InputError("--quant", fmt::format("unknown scheme '{}'", f.quant), "e.g. awq-int4, gptq-int4, fp8, mxfp4");
  } else if (j.model.spec.quantization) {
    q = *j.model.spec.quantization;
  } else if (!is_float_compute(w.weights)) {
    q = spec::default_quantization(w.weights);
  }
  if (q) spec::set_packing(w, *q);
  j.cards = cards_of(f, catalog, st.tensor_parallel * st.pipeline_parallel, required);
  st.gpu_memory = j.cards ? j.cards->memory.front() : GiB(80);
  if (j.cards) st.gpu_memory = Bytes::saturating_sub(st.gpu_memory, j.cards->headroom);
  if (j.cards) st.compute_capability = j.cards->compute_capability.front();
  // vllm/envs.py: bool(int(os.getenv(...))), read by VllmConfig only for a model with chunked local
  // attention: "0" off, another integer on; anything else stops vLLM there.
  if (const std::string v = util::env("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE");
      !v.empty() && engine::vllm::chunked_local(j.model.spec)) {
    if (v.find_first_not_of("0123456789") != std::string::npos || v.size() > 9)
      throw InputError("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", fmt::format("'{}' is not an integer", v),
                       "set it to 1 or 0, as vLLM reads it (int(...))");
    st.chunked_local_hybrid = std::stoul(v) != 0;
  }
  // MLA on Hopper: vLLM's default MLA backend there is FlashMLA (from 0.7.3), and the CUDA
  // platform's check_and_update_config forces its block size ("Forcing kv cache block size to 64
  // for FlashMLA backend."): the block count a log prints is of 64-token blocks.
  if (s.block_size.empty() && st.compute_capability == 90 && engine::vllm::served_as_mla(j.model.spec) &&
      (st.release.at_least(0, 8) || (st.release.major == 0 && st.release.minor == 7 && st.release.patch >= 3))) {
    st.block_size = 64;
    j.block_note = "MLA on Hopper: vLLM's FlashMLA backend forces the KV cache's blocks to 64 tokens (\"Forcing kv cache "
                   "block size to 64 for FlashMLA backend.\"); --block-size sets another";
  }
  const std::string label = j.cards ? lower(j.cards->labels.front()) : std::string();
  if (s.max_num_batched_tokens.empty()) {
    const std::uint64_t len = st.max_model_len.value_or(engine::vllm::default_max_model_len(j.model.spec, st));
    st.max_num_batched_tokens = default_batched_tokens(st, len, label);
  }
  // max_num_seqs as `vllm serve` picks it (engine/arg_utils.py get_batch_defaults, V1): 1024 on a
  // card of 70 GiB or more that is not an A100 (H100, H200, MI300X), 256 otherwise, and never
  // more than max_num_batched_tokens; V0: 256. Its dummy sampler run is over that many requests,
  // so an H100's profile peak holds 1024 rows of logits (the late-2025 H100 logs' 4.76 to 7.38 GiB).
  if (s.max_num_seqs.empty()) {
    const bool large = !st.v0_engine && st.gpu_memory.value() >= GiB(70).value() && label.find("a100") == std::string::npos;
    st.max_num_seqs = std::min<std::uint64_t>(large ? 1024 : 256, st.max_num_batched_tokens);
  }
  return j;
}

/// vLLM starts: KV blocks for a full request, and the card's rest (1 - utilization) holds the
/// CUDA context and the graphs.
/// What vLLM needs beyond its budget: the CUDA context, and the CUDA graphs where they are not
/// inside it (before 0.21).
Bytes beyond_budget(const engine::vllm::Result& r) {
  return r.graphs.in_budget ? r.cuda_context : r.cuda_context + r.cuda_graphs;
}

bool vllm_fits(const engine::vllm::Result& r, const engine::vllm::Settings& st) {
  return r.error.empty() && r.budget + beyond_budget(r) <= st.gpu_memory;
}

/// The budget vLLM works within: gpu_memory_utilization x the card.
std::optional<Bytes> vllm_budget(const engine::vllm::Result& r, bool have_cards) {
  if (!have_cards) return std::nullopt;
  return r.budget;
}

// ---------------------------------------------------------------------------------------

render::EstimateReport report_of(const spec::ModelSpec& m, const engine::Breakdown& b, std::optional<Bytes> memory,
                                 Bytes headroom, const std::string& label, std::uint64_t seqs, std::uint64_t ctx) {
  render::EstimateReport r;
  r.model = m;
  r.workload.mode = spec::Mode::generate;
  r.workload.batch = seqs;
  r.workload.seq = ctx;
  r.workload.new_tokens = 0;
  r.breakdown = b;
  if (memory) {
    advisor::Headroom margin;
    margin.bytes = headroom;
    r.budget = advisor::budget_of(*memory, margin);
    r.budget->label = label;
  }
  return r;
}

using Option = render::ServingFix;

/// vLLM's online fp8 quantization (--quantization fp8) for 16-bit weights, where the card runs
/// it: fp8 kernels from Ada/Hopper, weight-only through Marlin from Ampere (fp8.py); a card not
/// named (compute capability 0) is not refused.
std::optional<engine::vllm::Settings> with_fp8_weights(const engine::vllm::Settings& st) {
  if (spec::scheme_of(st.weights).method != spec::QuantMethod::none) return std::nullopt;
  if (st.compute_capability != 0 && st.compute_capability < 80) return std::nullopt;
  const auto fp8 = spec::parse_quant("fp8");
  if (!fp8) return std::nullopt;
  engine::vllm::Settings next = st;
  spec::set_packing(next.weights, *fp8);
  return next;
}

constexpr const char* kFp8WeightsChange = "--quant fp8 (vLLM --quantization fp8: the weights quantized at load)";

/// When no fix alone makes a vLLM job fit: the fixes together, each re-estimated on what the
/// earlier ones left and kept only while the job still does not fit and where it adds KV
/// tokens, in the order a user gives up least: on the GPUs given first, then the fewest
/// tensor-parallel GPUs; fp8 weights only where the 16-bit ones leave no cache; an fp8 cache,
/// fewer sequences and batched tokens (the profile run's sampler and forward), and last the
/// longest max_model_len the cache then holds. gpu_memory_utilization stays as given (what
/// else runs on the card is not known). Llama 3.1 70B on RTX 4090s: no fix alone fits;
/// --tensor-parallel-size 4 --quant fp8 --kv-cache-dtype fp8 does.
std::optional<Option> vllm_together(const spec::ModelSpec& m, const engine::vllm::Settings& given, std::uint64_t most_tp) {
  namespace vl = engine::vllm;
  for (std::uint64_t tp = given.tensor_parallel; tp <= std::max(most_tp, given.tensor_parallel); tp *= 2) {
    vl::Settings st = given;
    st.tensor_parallel = tp;
    // Each flag once, at the last value a step set.
    std::vector<std::pair<std::string, std::string>> changes;
    const auto set = [&changes](const std::string& flag, const std::string& value) {
      for (auto& c : changes)
        if (c.first == flag) {
          c.second = value;
          return;
        }
      changes.emplace_back(flag, value);
    };
    if (tp != given.tensor_parallel) set("--tensor-parallel-size", std::to_string(tp));
    vl::Result x;
    try {
      x = vl::estimate(m, st);
      if (x.num_gpu_blocks == 0) {
        if (const auto fp8 = with_fp8_weights(st)) {
          st = *fp8;
          x = vl::estimate(m, st);
          set("--quant", "fp8");
        }
      }
    } catch (const InputError&) {
      break;  // the heads do not split over tp GPUs (nor over more)
    }
    const auto keep_if_better = [&](const vl::Settings& next, const std::string& flag, const std::string& value) {
      if (vllm_fits(x, st)) return false;
      const vl::Result y = vl::estimate(m, next);
      if (y.kv_cache_tokens <= x.kv_cache_tokens) return false;
      st = next;
      x = y;
      set(flag, value);
      return true;
    };
    if (!st.kv_fp8) {
      vl::Settings next = st;
      next.kv_fp8 = true;
      keep_if_better(next, "--kv-cache-dtype", "fp8");
    }
    // Fewer sequences or batched tokens only where they make it fit: the most that does.
    const auto largest_fitting = [&](std::uint64_t vl::Settings::*field, std::uint64_t from, std::uint64_t least,
                                     const std::string& flag) {
      for (std::uint64_t n = from / 2; n >= least && !vllm_fits(x, st); n /= 2) {
        vl::Settings next = st;
        next.*field = n;
        const vl::Result y = vl::estimate(m, next);
        if (vllm_fits(y, next)) {
          st = next;
          x = y;
          set(flag, std::to_string(n));
        }
      }
    };
    largest_fitting(&vl::Settings::max_num_seqs, st.max_num_seqs, 16, "--max-num-seqs");
    largest_fitting(&vl::Settings::max_num_batched_tokens, st.max_num_batched_tokens,
                    std::max<std::uint64_t>(2048, st.max_num_seqs), "--max-num-batched-tokens");
    if (!vllm_fits(x, st) && !x.max_model_len_fits && x.largest_model_len > 0) {
      st.max_model_len = x.largest_model_len;
      x = vl::estimate(m, st);
      set("--max-model-len", std::to_string(x.largest_model_len > 0 ? *st.max_model_len : 0));
    }
    if (vllm_fits(x, st) && !changes.empty()) {
      std::string change;
      for (const auto& [flag, value] : changes) change += fmt::format("{}{} {}", change.empty() ? "" : " ", flag, value);
      if (tp != given.tensor_parallel) change += fmt::format(" ({} GPUs)", tp * st.pipeline_parallel);
      return Option{"together", change, true, x.budget + beyond_budget(x)};
    }
  }
  return std::nullopt;
}

/// The fixes worth printing: those that make the job fit, or all of them when none does.
std::vector<Option> worth_showing(std::vector<Option> options) {
  if (std::any_of(options.begin(), options.end(), [](const Option& o) { return o.fits; }))
    options.erase(std::remove_if(options.begin(), options.end(), [](const Option& o) { return !o.fits; }),
                  options.end());
  return options;
}

}  // namespace

bool is_serving(const EstimateFlags& f, const ServingFlags& s) {
  return f.has("--engine") && s.engine != "transformers";
}

void check_serving_flags(const EstimateFlags& f, const ServingFlags& s) {
  Diagnostics d;
  std::optional<Engine> e;
  if (f.has("--engine") && s.engine != "transformers") {
    e = parse_engine(s.engine);
    if (!e)
      d.add("--engine", fmt::format("unknown engine '{}'", s.engine),
            did_you_mean_fix(s.engine, {"transformers", "llama.cpp", "ollama", "vllm"},
                             "one of transformers, llama.cpp, ollama, vllm", "one of transformers, llama.cpp, ollama, vllm"));
  }
  for (const FlagRow& row : kFlags) {
    if (!f.has(std::string(row.flag))) continue;
    if (!e) {
      if (f.has("--engine") && s.engine != "transformers" ) continue;  // reported above
      d.add(std::string(row.flag), "applies to a serving engine only",
            row.llama ? "add --engine llama.cpp (or ollama)" : "add --engine vllm");
    } else if ((*e == Engine::vllm && !row.vllm) || (*e != Engine::vllm && !row.llama)) {
      d.add(std::string(row.flag), fmt::format("does not apply to --engine {}", engine_name(*e)),
            row.llama ? "it is a llama.cpp flag: use --engine llama.cpp, or drop it" : "it is a vLLM flag: use --engine vllm, or drop it");
    }
  }
  if (e)
    for (const auto flag : kTransformersOnly)
      if (f.has(std::string(flag)) && !(flag == "--cuda-context" && *e == Engine::llamacpp))
        d.add(std::string(flag), fmt::format("does not apply to --engine {}", engine_name(*e)),
              *e == Engine::vllm ? "vLLM's own flags: --max-model-len, --max-num-seqs, --tensor-parallel-size"
                                 : "llama.cpp's own flags: --ctx-size, --parallel, --gpu-layers");
  d.throw_if_any();
}

ExitCode run_serving(std::string_view command, const EstimateFlags& f, const ServingFlags& s, const std::string& solve,
                     CatalogSource& catalog, render::Format format, std::ostream& out) {
  check_serving_flags(f, s);
  const Engine e = *parse_engine(s.engine);
  const bool need_budget = command != "estimate";
  std::string text;
  bool ok = true;

  if (e != Engine::vllm) {
    namespace lc = engine::llamacpp;
    LlamaJob j = llama_job(e, f, s, catalog, need_budget);
    const auto run = [&](const lc::Settings& st) { return lc::estimate(j.model.spec, j.tensors, st); };
    const lc::Result r = run(j.settings);
    const auto report_for = [&](const lc::Result& x, const lc::Settings& st) {
      const std::size_t i = lc::binding_gpu(x, st);
      std::optional<Bytes> mem;
      std::string label;
      if (j.cards) {
        mem = j.cards->memory[i];
        label = j.cards->labels[i] + (j.cards->memory.size() > 1 ? fmt::format(" (CUDA{})", i) : "");
      }
      render::EstimateReport rep = report_of(j.model.spec, lc::breakdown_of(x, st), mem,
                                             j.cards ? j.cards->headroom : Bytes{}, label, st.parallel, x.n_ctx);
      {
        const std::string ft = lower(j.file_type);
        if (const auto q = spec::parse_quant(ft)) spec::set_packing(rep.workload, *q);
        else if (ft == "f16" || ft == "bf16" || ft == "f32")
          rep.workload.weights = ft == "f16" ? DType::fp16 : ft == "bf16" ? DType::bf16 : DType::fp32;
      }
      if (j.mmproj)
        rep.notes.push_back(fmt::format(
            "multimodal projector {} ({} tensors{}): {} bytes on CUDA0, loaded by llama.cpp's mtmd (clip.cpp) "
            "beside the model whatever --gpu-layers says; image tokens and the projector's compute buffer are "
            "not counted",
            j.mmproj->file, j.mmproj->tensors,
            j.mmproj->projector_type.empty() ? std::string() : ", projector " + j.mmproj->projector_type,
            j.mmproj->bytes));
      if (!j.ctx_note.empty()) rep.notes.push_back(j.ctx_note);
      if (!j.fa_note.empty()) rep.notes.push_back(j.fa_note);
      rep.notes.push_back(fmt::format("--engine {}: llama.cpp's buffers on the GPU that binds; the Workload line reads "
                                      "batch as --parallel and seq as the context",
                                      engine_name(e)));
      return rep;
    };
    const std::uint64_t n_all = r.offloadable;
    // The most GPU layers in [least, most] with which the job fits, each device keeping `margin`
    // free; none where even `least` does not. The solver, the fewer-gpu-layers and together
    // fixes (no margin), and llama-server's --fit (llama_params_fit, llama.cpp#16653, on by
    // default since December 2025: --fit-target, 1024 MiB) all search with it.
    const auto most_layers = [&](lc::Settings m, std::uint64_t most, std::uint64_t least,
                                 Bytes margin) -> std::optional<std::uint64_t> {
      for (Bytes& g : m.gpu_memory) g = Bytes::saturating_sub(g, margin);
      for (std::uint64_t n = most + 1; n-- > least;) {
        m.gpu_layers = n;
        if (llama_fits(run(m), m)) return n;
      }
      return std::nullopt;
    };
    const std::uint64_t top = std::min(j.settings.gpu_layers, n_all);  // the layers asked for
    if (command == "fit") {
      std::string what = solve == "batch" ? "gpu-layers" : solve;
      if (what != "gpu-layers" && what != "ctx" && what != "concurrency")
        throw InputError("--solve", fmt::format("'{}' does not apply to --engine {}", solve, engine_name(e)),
                         "one of gpu-layers, ctx, concurrency");
      lc::Settings st = j.settings;
      std::uint64_t value = 0;
      bool found = false;
      if (what == "gpu-layers") {
        // The most layers that fit.
        if (const auto n = most_layers(st, n_all, 0, Bytes{})) {
          value = *n;
          found = true;
        }
      } else {
        // ctx: the largest multiple of 256 up to the model's n_ctx_train; concurrency: the most
        // sequences of the given context each.
        const std::uint64_t per_seq = j.settings.ctx_size / std::max<std::uint64_t>(1, j.settings.parallel);
        const std::uint64_t cap = what == "ctx" ? std::max<std::uint64_t>(256, j.model.spec.max_positions) : 4096;
        std::uint64_t lo = 0, hi = what == "ctx" ? cap / 256 : cap;
        const auto apply = [&](std::uint64_t k) {
          if (what == "ctx") st.ctx_size = k * 256;
          else {
            st.parallel = k;
            st.ctx_size = per_seq * k;
          }
        };
        while (lo < hi) {
          const std::uint64_t mid = lo + (hi - lo + 1) / 2;
          apply(mid);
          if (llama_fits(run(st), st)) lo = mid;
          else hi = mid - 1;
        }
        found = lo > 0;
        value = what == "ctx" ? lo * 256 : lo;
        if (found) apply(lo);
      }
      // llama-server's own --fit (llama_params_fit, on by default since late 2025) places layers so
      // that --fit-target MiB, 1024 by default, stay free on each device: the layers it would pick
      // where that margin costs some (a note; the answer is the most that fit).
      std::string fit_note;
      if (what == "gpu-layers" && found && e == Engine::llamacpp && !f.has("--headroom")) {
        const std::uint64_t with_margin = most_layers(st, value, 0, lc::kFitTarget).value_or(0);
        if (with_margin < value)
          fit_note = fmt::format("llama-server's --fit keeps 1024 MiB free on each device (--fit-target): it would place "
                                 "{} layers, not {}; --headroom 1GiB asks vramfit for the same margin",
                                 with_margin, value);
      }
      // llama-server without -c: its --fit cuts the trained context to what leaves 1024 MiB free a
      // device (--ctx-size fit), a little less than the most that fits.
      if (what == "ctx" && found && e == Engine::llamacpp && !f.has("--headroom") && j.model.spec.max_positions > 0 &&
          j.model.spec.max_positions <= kMaxCount) {
        const lc::FitCtx fc = lc::fit_ctx(j.model.spec, j.tensors, j.settings, j.model.spec.max_positions);
        if (fc.n_ctx != value)
          fit_note = fmt::format("llama-server run without -c picks {} cells itself: its --fit keeps 1024 MiB free a device "
                                 "(--ctx-size fit shows that run)",
                                 fc.n_ctx);
      }
      if (what == "gpu-layers" && found) st.gpu_layers = value;
      if (what == "ctx") j.ctx_note.clear();  // the context is the answer, not the default
      const lc::Result x = run(found ? st : j.settings);
      render::EstimateReport rep = report_for(x, found ? st : j.settings);
      if (!fit_note.empty()) rep.notes.push_back(fit_note);
      text = render::render_serving_fit(rep, llama_answer(x, found ? st : j.settings, j, e),
                                        {what, found ? std::optional<std::uint64_t>(value) : std::nullopt}, format);
      out << text;
      return found ? ExitCode::ok : ExitCode::does_not_fit;
    }

    ok = llama_fits(r, j.settings);
    std::vector<Option> options;
    if (!ok) {  // a job that fits needs no fix
      // The engine's own fixes, each a re-estimate from the settings as given.
      const auto try_fix = [&](const std::string& id, const std::string& change, const lc::Settings& st) {
        try {
          const lc::Result x = run(st);
          options.push_back({id, change, llama_fits(x, st), x.gpus[lc::binding_gpu(x, st)].total() + st.gpu_reserve});
        } catch (const InputError&) {
        }
      };
      // The most layers, fewer than asked for, that fit.
      const std::optional<std::uint64_t> alone =
          top > 0 ? most_layers(j.settings, top - 1, 0, Bytes{}) : std::nullopt;
      const std::uint64_t fewer_n = alone.value_or(0);
      if (alone) {
        lc::Settings st = j.settings;
        st.gpu_layers = fewer_n;
        try_fix("fewer-gpu-layers", fmt::format("--gpu-layers {} (the rest runs on the CPU)", fewer_n), st);
      }
      if (j.model.spec.moe.num_experts > 0) {
        lc::Settings st = j.settings;
        for (std::uint64_t n = st.n_cpu_moe + 1; n <= j.model.spec.num_layers; ++n) {
          st.n_cpu_moe = n;
          if (llama_fits(run(st), st) || n == j.model.spec.num_layers) {
            try_fix("experts-on-cpu", fmt::format("--n-cpu-moe {} (routed experts of the first {} blocks in RAM)", n, n), st);
            break;
          }
        }
      }
      for (const char* t : {"q8_0", "q4_0"}) {
        lc::Settings st = j.settings;
        st.cache_type_k = st.cache_type_v = t;
        st.flash_attn = true;
        try_fix(std::string("kv-cache-") + t, fmt::format("--cache-type-k {} --cache-type-v {} --flash-attn on", t, t), st);
      }
      if (!j.settings.flash_attn) {
        lc::Settings st = j.settings;
        st.flash_attn = true;
        try_fix("flash-attn", "--flash-attn on (no attention-score matrix in the compute buffer)", st);
      }
      for (std::uint64_t ub = std::min(j.settings.ubatch_size, j.settings.batch_size) / 2; ub >= 64; ub /= 2) {
        lc::Settings st = j.settings;
        st.ubatch_size = ub;
        if (llama_fits(run(st), st) || ub == 64) {
          try_fix("smaller-ubatch", fmt::format("--ubatch-size {}", ub), st);
          break;
        }
      }
      {
        lc::Settings st = j.settings;
        std::uint64_t lo = 0, hi = st.ctx_size / 256;
        while (lo < hi) {
          const std::uint64_t mid = lo + (hi - lo + 1) / 2;
          st.ctx_size = mid * 256;
          if (llama_fits(run(st), st)) lo = mid;
          else hi = mid - 1;
        }
        if (lo > 0 && lo * 256 < j.settings.ctx_size) {
          st.ctx_size = lo * 256;
          try_fix("smaller-ctx", fmt::format("--ctx-size {}", lo * 256), st);
        }
      }
      // Where only moving layers (or experts) to the CPU fits, the layers a q8_0 cache with flash
      // attention leaves room for: the fixes together, when they keep more layers on the GPU
      // than fewer-gpu-layers alone (Llama 3.1 70B Q4_K_M at 32768 cells on an RTX 4090: 37
      // layers, 41 with the q8_0 cache).
      const auto keeps_layers = [](const Option& o) {
        return o.fits && o.id != "fewer-gpu-layers" && o.id != "experts-on-cpu";
      };
      const auto fewer = std::find_if(options.begin(), options.end(), [](const Option& o) { return o.id == "fewer-gpu-layers"; });
      if (alone && fewer != options.end() && std::none_of(options.begin(), options.end(), keeps_layers) &&
          j.settings.cache_type_k == "f16" && j.settings.cache_type_v == "f16") {
        lc::Settings st = j.settings;
        st.cache_type_k = st.cache_type_v = "q8_0";
        st.flash_attn = true;
        if (const auto n = most_layers(st, top - 1, fewer_n + 1, Bytes{})) {
          st.gpu_layers = *n;
          try_fix("together",
                  fmt::format("--cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on --gpu-layers {} ({} layers on the GPU, not {})",
                              st.gpu_layers, st.gpu_layers, fewer_n),
                  st);
        }
      }
    }
    options = worth_showing(std::move(options));
    render::EstimateReport rep = report_for(r, j.settings);
    // Where the layers were left to llama.cpp (no --gpu-layers), llama-server does not stop: its
    // --fit places what leaves 1024 MiB free and runs the rest on the CPU.
    if (!ok && e == Engine::llamacpp && s.gpu_layers.empty() && !j.settings.gpu_memory.empty())
      rep.notes.push_back(fmt::format(
          "llama-server's --fit (on by default since December 2025) would not stop here: it keeps 1024 MiB free on "
          "each device and places {} of {} layers on the GPU (--fit off loads as given and fails)",
          most_layers(j.settings, top, 0, lc::kFitTarget).value_or(0), n_all));
    text = render::render_serving(rep, llama_answer(r, j.settings, j, e), {ok, command == "advise", options}, format);
    out << text;
    return ok ? ExitCode::ok : ExitCode::does_not_fit;
  }

  // --- vLLM ---
  namespace vl = engine::vllm;
  VllmJob j = vllm_job(f, s, catalog, need_budget);
  vl::Result r = vl::estimate(j.model.spec, j.settings);
  // --max-model-len auto: the model's length where one request of it fits the cache, else the
  // longest that does (vLLM's estimate_max_model_len; the engine then boots at it).
  std::string auto_note;
  if (j.auto_len) {
    const std::uint64_t full = r.max_model_len;
    if (!r.max_model_len_fits && r.largest_model_len > 0) {
      j.settings.max_model_len = r.largest_model_len;
      r = vl::estimate(j.model.spec, j.settings);
    }
    auto_note = !r.max_model_len_fits
                    ? std::string("--max-model-len auto: no length fits, the weights and the profile run leave no "
                                  "KV cache")
                : r.max_model_len < full
                    ? fmt::format("--max-model-len auto: one request of the model's {} tokens does not fit the cache; "
                                  "vLLM lowers max_model_len to {}, the longest that does",
                                  full, r.max_model_len)
                    : fmt::format("--max-model-len auto: the model's {} tokens fit the cache", full);
  }
  // A cache given in bytes that cannot hold one request of max_model_len: vLLM refuses it at
  // start-up; the flag contradicts --max-model-len, so it is refused here too.
  if (command != "fit" && j.settings.kv_cache_memory && !r.max_model_len_fits)
    throw InputError("--kv-cache-memory-bytes",
                     fmt::format("{} bytes hold {} tokens, less than one request of --max-model-len {} ({} bytes)",
                                 j.settings.kv_cache_memory->value(), r.kv_cache_tokens, r.max_model_len,
                                 r.kv_for_max_model_len.value()),
                     fmt::format("give at least {} bytes, or a smaller --max-model-len (or --max-model-len auto)",
                                 r.kv_for_max_model_len.value()));
  const auto report_for = [&](const vl::Result& x, const vl::Settings& st) {
    std::optional<Bytes> mem = vllm_budget(x, j.cards.has_value());
    std::string label =
        j.cards ? fmt::format("{} x {}", st.gpu_memory_utilization, j.cards->labels.front()) : std::string();
    // A fixed KV cache: the budget is the card less what vLLM needs outside its own figure.
    if (mem && st.kv_cache_memory) {
      mem = Bytes::saturating_sub(st.gpu_memory, beyond_budget(x));
      label = fmt::format("{} less the CUDA context", j.cards->labels.front());
    }
    render::EstimateReport rep = report_of(j.model.spec, vl::breakdown_of(x), mem, Bytes{}, label, st.max_num_seqs,
                                           x.max_model_len);
    rep.workload.quant = st.weights.quant;
    rep.workload.weights = st.weights.weights;
    if (!auto_note.empty()) rep.notes.push_back(auto_note);
    if (!j.block_note.empty()) rep.notes.push_back(j.block_note);
    if (!x.error.empty()) rep.notes.push_back("vLLM would stop at start-up: " + x.error);
    if (j.cards && st.kv_cache_memory && x.budget + beyond_budget(x) > st.gpu_memory)
      rep.notes.push_back(fmt::format(
          "the weights, the profile peak and the {:.2f} GiB of KV cache asked for need {} MiB more than the card: "
          "lower --kv-cache-memory-bytes",
          static_cast<double>(st.kv_cache_memory->value()) / (1ULL << 30),
          (x.budget + beyond_budget(x) - st.gpu_memory).value() >> 20));
    else if (j.cards && x.budget + beyond_budget(x) > st.gpu_memory)
      rep.notes.push_back(fmt::format(
          "the card's rest ({} MiB) is less than the CUDA context and graphs ({} MiB): lower --gpu-memory-utilization",
          (st.gpu_memory - x.budget).value() >> 20, beyond_budget(x).value() >> 20));
    rep.notes.push_back("--engine vllm: per GPU; the Workload line reads batch as --max-num-seqs and seq as "
                        "--max-model-len");
    return rep;
  };
  if (command == "fit") {
    const std::string what = solve == "batch" ? "max-model-len" : solve;
    if (what != "max-model-len" && what != "concurrency")
      throw InputError("--solve", fmt::format("'{}' does not apply to --engine vllm", solve), "one of max-model-len, concurrency");
    vl::Settings st = j.settings;
    std::uint64_t value = 0;
    if (what == "max-model-len") {
      // vLLM refuses a max_model_len past the model's derived maximum (max_position_embeddings
      // and its rotary scaling: engine::vllm::derived_max_model_len) unless
      // VLLM_ALLOW_LONG_MAX_MODEL_LEN is set.
      value = r.largest_model_len;
      const vl::DerivedMaxLen most = vl::derived_max_model_len(j.model.spec);
      if (most.tokens > 0 && !st.allow_long_max_model_len)
        value = std::min<std::uint64_t>(value, static_cast<std::uint64_t>(std::floor(most.tokens)));
      st.max_model_len = std::max<std::uint64_t>(1, value);
    } else {
      value = static_cast<std::uint64_t>(std::floor(r.max_concurrency));
    }
    const bool found = value > 0 && r.budget + beyond_budget(r) <= st.gpu_memory;
    const vl::Result x = vl::estimate(j.model.spec, st);
    const render::EstimateReport rep = report_for(x, st);
    text = render::render_serving_fit(rep, render::VllmAnswer{x, st},
                                      {what, found ? std::optional<std::uint64_t>(value) : std::nullopt}, format);
    out << text;
    return found ? ExitCode::ok : ExitCode::does_not_fit;
  }
  ok = vllm_fits(r, j.settings);
  std::vector<Option> options;
  if (!ok) {  // a job that fits needs no fix
    const auto try_fix = [&](const std::string& id, const std::string& change, const vl::Settings& st) {
      try {
        const vl::Result x = vl::estimate(j.model.spec, st);
        options.push_back({id, change, vllm_fits(x, st), x.budget + beyond_budget(x)});
      } catch (const InputError&) {
      }
    };
    if (r.num_gpu_blocks > 0 && !r.max_model_len_fits) {
      vl::Settings st = j.settings;
      st.max_model_len = r.largest_model_len;
      try_fix("lower-max-model-len", fmt::format("--max-model-len {}", r.largest_model_len), st);
    }
    if (!j.settings.kv_fp8) {
      vl::Settings st = j.settings;
      st.kv_fp8 = true;
      try_fix("fp8-kv-cache", "--kv-cache-dtype fp8 (half the bytes per token)", st);
    }
    if (const auto st = with_fp8_weights(j.settings)) try_fix("fp8-weights", kFp8WeightsChange, *st);
    for (std::uint64_t n = j.settings.max_num_seqs / 2; n >= 16; n /= 2) {
      vl::Settings st = j.settings;
      st.max_num_seqs = n;
      if (vllm_fits(vl::estimate(j.model.spec, st), st) || n < 32) {
        try_fix("lower-max-num-seqs", fmt::format("--max-num-seqs {}", n), st);
        break;
      }
    }
    if (j.settings.max_num_batched_tokens > 2048) {
      vl::Settings st = j.settings;
      st.max_num_batched_tokens = std::max<std::uint64_t>(2048, st.max_num_seqs);
      try_fix("lower-max-num-batched-tokens", fmt::format("--max-num-batched-tokens {}", st.max_num_batched_tokens), st);
    }
    for (std::uint64_t tp = j.settings.tensor_parallel * 2; tp <= 8; tp *= 2) {
      vl::Settings st = j.settings;
      st.tensor_parallel = tp;
      try {
        if (vllm_fits(vl::estimate(j.model.spec, st), st) || tp == 8) {
          try_fix("more-tensor-parallel", fmt::format("--tensor-parallel-size {} ({} GPUs)", tp, tp * st.pipeline_parallel), st);
          break;
        }
      } catch (const InputError&) {
        break;
      }
    }
    if (j.settings.gpu_memory_utilization < 0.95) {
      vl::Settings st = j.settings;
      st.gpu_memory_utilization = 0.95;
      try_fix("raise-gpu-memory-utilization", "--gpu-memory-utilization 0.95 (if nothing else uses the GPU)", st);
    }
    // The fixes together where none alone fits on the GPUs given: on them first, then on more.
    const auto fits_here = [](const Option& o) { return o.fits && o.id != "more-tensor-parallel"; };
    if (std::none_of(options.begin(), options.end(), fits_here)) {
      std::optional<Option> together = vllm_together(j.model.spec, j.settings, j.settings.tensor_parallel);
      if (!together && std::none_of(options.begin(), options.end(), [](const Option& o) { return o.fits; }))
        together = vllm_together(j.model.spec, j.settings, 8);
      if (together) options.push_back(*together);
    }
  }
  options = worth_showing(std::move(options));
  const render::EstimateReport rep = report_for(r, j.settings);
  text = render::render_serving(rep, render::VllmAnswer{r, j.settings}, {ok, command == "advise", options}, format);
  out << text;
  return ok ? ExitCode::ok : ExitCode::does_not_fit;
}

}  // namespace vramfit::cli
