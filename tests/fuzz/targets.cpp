// The fuzz targets' bodies (see targets.hpp): each feeds the bytes to one parser, accepts an
// InputError, and checks what a successful parse returned.
#include "targets.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/run.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/doctor/diagnose.hpp"
#include "vramfit/doctor/oom.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/render/explain.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/workload.hpp"

#include "../../src/cli/hub_parse.hpp"

namespace vramfit::fuzz {

namespace {

namespace fs = std::filesystem;

std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return size == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), size);
}

void require(bool ok, std::string_view what) {
  if (!ok) throw InvariantBroken(std::string(what));
}

/// An InputError must say where and what: the user sees nothing else.
void check_error(const InputError& e) {
  require(!e.diagnostics().empty(), "an InputError without diagnostics");
  for (const Diagnostic& d : e.diagnostics())
    require(!d.field.empty() && !d.problem.empty(), "a diagnostic without a field or a problem: " + d.str());
}

/// Runs `step`; an InputError is the expected outcome for bad input.
template <typename F>
void expect_input_error_only(F&& step) {
  try {
    step();
  } catch (const InputError& e) {
    check_error(e);
  }
}

std::uint64_t read_le(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) v = v << 8 | static_cast<unsigned char>(bytes[i]);
  return v;
}

/// The parts of a spec, the engine's view of it: every parameter counted once, and a
/// breakdown whose figures are consistent.
void check_spec(const spec::ModelSpec& s) {
  require(s.params > 0, "a spec with no parameters");
  require(s.hidden_size > 0 && s.num_layers > 0 && s.vocab_size > 0, "a spec with a zero dimension");
  for (const double x : {s.final_logit_softcap, s.attn_logit_softcap, s.attention_dropout, s.hidden_dropout,
                         s.embedding_dropout})
    require(std::isfinite(x) && x >= 0, fmt::format("a non-finite or negative value {} in a spec", x));
  for (const double p : {s.attention_dropout, s.hidden_dropout, s.embedding_dropout})
    require(p <= 1, fmt::format("a dropout probability {} above 1", p));
}

void check_estimate(const spec::ModelSpec& s, spec::Mode mode) {
  spec::Workload w;
  w.mode = mode;
  // Inference keeps the checkpoint's own packing (quantization_config), as the CLI does.
  if (mode == spec::Mode::inference && s.quantization) {
    w.quant = *s.quantization;
    w.weights = spec::packed_dtype(w.quant);
  }
  w.new_tokens = mode == spec::Mode::generate ? 16 : 0;
  Diagnostics d;
  spec::validate(w, s, d);
  if (!d.empty()) return;  // the CLI stops here too
  expect_input_error_only([&] {
    const engine::Breakdown b = engine::estimate(s, w);
    require(b.peak_allocated.value() > 0, "an estimate with a zero peak");
    require(b.device_total >= b.peak_allocated, "a device total below the peak allocated");
  });
}

/// The GGUF reader on `bytes` as the head of a file of `file_size` bytes, then what is built
/// from the header (from tests/fuzz/gguf_fuzz.cpp, where the target began).
void gguf_run(std::string_view bytes, std::uint64_t file_size) {
  spec::GgufHeader h;
  try {
    h = spec::parse_gguf_header(bytes, file_size, "fuzz.gguf");
  } catch (const InputError& e) {
    check_error(e);
    return;
  }
  require(h.version == 2 || h.version == 3, "gguf: version");
  require(h.alignment != 0 && (h.alignment & (h.alignment - 1)) == 0, "gguf: alignment");
  require(h.data_start % h.alignment == 0, "gguf: data start");
  std::uint64_t bytes_total = 0;
  for (const spec::GgufTensor& t : h.tensors) {
    require(t.type != nullptr, "gguf: tensor type");
    require(t.ne.size() <= 4, "gguf: dims");
    require(h.data_start + t.offset + t.bytes <= file_size, "gguf: tensor inside the file");
    bytes_total += t.bytes;
  }
  spec::ModelSpec m;
  try {
    m = spec::spec_from_gguf(h, "fuzz.gguf");
  } catch (const InputError& e) {
    check_error(e);
    return;
  }
  require(m.source == "gguf", "gguf: source");
  require(m.packed_weight_bytes == bytes_total, "gguf: packed bytes");
  require(m.quantization.has_value(), "gguf: quantization");
  // The file type's mix on the spec built from the metadata: any answer or an InputError.
  expect_input_error_only([&] {
    if (const auto* f = spec::gguf_file_type_by_name(m.quantization->gguf_type); f != nullptr && f->mix_known)
      (void)spec::gguf_model_bytes(m, f->name);
  });
}

// --- cli ------------------------------------------------------------------------------

/// The sandbox of the cli target: a fresh folder holding every kind of file the commands read,
/// copied from the tests' fixtures. Removed when the process exits normally.
class Sandbox {
 public:
  Sandbox() {
    dir_ = fs::temp_directory_path() / fmt::format("vramfit-cli-fuzz-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
    const fs::path data = fs::path(VRAMFIT_SOURCE_DIR) / "tests" / "cli" / "data";
    fs::copy_file(data / "gpus.json", dir_ / "gpus.json");
    fs::copy_file(data / "models" / "smollm2-135m.json", dir_ / "models" / "smollm2-135m.json");
    fs::copy_file(data / "smollm2-135m.config.json", dir_ / "config.json");
    fs::copy_file(fs::path(VRAMFIT_SOURCE_DIR) / "tests" / "fixtures" / "oom" / "current_other_process.txt",
                  dir_ / "train.log");
    // A checkpoint folder: the config and a one-tensor safetensors file.
    fs::create_directories(dir_ / "ckpt");
    fs::copy_file(data / "smollm2-135m.config.json", dir_ / "ckpt" / "config.json");
    const std::string header = R"({"lm_head.weight":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,32]}})";
    std::string file(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + std::string(32, '\0');
    write(dir_ / "ckpt" / "model.safetensors", file);
    // A truth file whose cases read their config from truth-models/ (models/ is the catalog's).
    fs::create_directories(dir_ / "truth-models");
    fs::copy_file(data / "truth" / "models" / "smollm2-135m.json",
                  dir_ / "truth-models" / "smollm2-135m.json");
    std::ifstream in(data / "truth" / "results" / "small.jsonl");
    std::string truth((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::size_t p = 0; (p = truth.find("\"models/", p)) != std::string::npos;)
      truth.replace(p, 8, "\"truth-models/");
    write(dir_ / "truth.jsonl", truth);
  }
  ~Sandbox() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  [[nodiscard]] const fs::path& dir() const { return dir_; }

 private:
  static void write(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  fs::path dir_;
};

/// Runs in the sandbox, back in the previous working folder afterwards (the replay test goes on).
class InFolder {
 public:
  explicit InFolder(const fs::path& dir) : previous_(fs::current_path()) { fs::current_path(dir); }
  ~InFolder() {
    std::error_code ec;
    fs::current_path(previous_, ec);
  }
  InFolder(const InFolder&) = delete;
  InFolder& operator=(const InFolder&) = delete;

 private:
  fs::path previous_;
};

/// Whether an argument may reach a file outside the sandbox: any path with a folder in it.
/// Plain names resolve inside the sandbox (the working folder); "-" is the stdin stream.
bool leaves_sandbox(std::string_view arg) {
  return arg.find('/') != std::string_view::npos || arg.find("..") != std::string_view::npos;
}

/// Whether NAME of a "=NAME\nTEXT" argument stays in the sandbox: [A-Za-z0-9._-]+, not starting
/// with '.', optionally under ckpt/ or models/.
bool sandbox_file_name(std::string_view name) {
  for (const std::string_view folder : {"ckpt/", "models/"})
    if (name.starts_with(folder)) name.remove_prefix(folder.size());
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

/// Files written into the sandbox for one run; the previous contents come back at the end.
class Overlay {
 public:
  explicit Overlay(fs::path dir) : dir_(std::move(dir)) {}
  ~Overlay() {
    std::error_code ec;
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      const fs::path p = dir_ / it->first;
      if (it->second) {
        std::ofstream(p, std::ios::binary | std::ios::trunc) << *it->second;
      } else {
        fs::remove(p, ec);
      }
    }
  }
  Overlay(const Overlay&) = delete;
  Overlay& operator=(const Overlay&) = delete;

  void write(const std::string& name, std::string_view text) {
    const fs::path p = dir_ / name;
    std::error_code ec;
    if (fs::is_directory(p, ec)) return;  // ckpt or models themselves: left as they are
    std::optional<std::string> before;
    if (fs::is_regular_file(p, ec)) {
      std::ifstream in(p, std::ios::binary);
      before = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    saved_.emplace_back(name, std::move(before));
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  }

 private:
  fs::path dir_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

int fuzz_size(const std::uint8_t* data, std::size_t size) {
  expect_input_error_only([&] {
    const Bytes b = spec::parse_size(text_of(data, size));
    require(b.value() > 0, "parse_size returned 0 bytes");
    require(spec::parse_size(std::to_string(b.value())) == b, "parse_size does not read back its byte count");
  });
  return 0;
}

int fuzz_params(const std::uint8_t* data, std::size_t size) {
  expect_input_error_only([&] {
    const std::uint64_t n = spec::parse_param_count(text_of(data, size));
    require(n > 0 && n <= 1'000'000'000'000'000ULL, fmt::format("parse_param_count returned {}", n));
    require(spec::parse_param_count(std::to_string(n)) == n,
            "parse_param_count does not read back its count");
  });
  return 0;
}

int fuzz_config(const std::uint8_t* data, std::size_t size) {
  expect_input_error_only([&] {
    const spec::ModelSpec s = spec::from_config_text(text_of(data, size), "config.json");
    check_spec(s);
    require(s.params == spec::count_params(s),
            "a config's parameter total differs from the sum of its parts");
    check_estimate(s, spec::Mode::inference);
    check_estimate(s, spec::Mode::train);
  });
  return 0;
}

int fuzz_safetensors(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = text_of(data, size);
  std::uint64_t file_size = size;
  if (size >= 8) {
    const std::uint64_t n = read_le(bytes.substr(0, 8));
    if (n <= size - 8) {
      const std::uint64_t data_section = read_le(bytes.substr(static_cast<std::size_t>(8 + n), 8));
      file_size = 8 + n + data_section;
      if (file_size < 8 + n) file_size = ~std::uint64_t{0};  // wrapped: the largest file there is
    }
  }
  expect_input_error_only([&] {
    const auto tensors = spec::parse_safetensors_header(bytes, file_size, "model.safetensors");
    for (const spec::TensorInfo& t : tensors) {
      std::uint64_t elements = 1;
      for (const std::uint64_t d : t.shape) elements *= d;  // parse checked the product
      require(t.elements == elements, "a tensor's element count differs from its shape");
    }
    spec::ModelSpec s = spec::from_param_count(7'000'000'000);
    spec::apply_checkpoint(s, tensors);
    require(s.params > 0, "a checkpoint that leaves the model with no parameters");
  });
  return 0;
}

int fuzz_catalog(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = text_of(data, size);
  std::map<std::string, std::string> files;
  std::size_t start = 0;
  for (std::size_t part = 0; start <= bytes.size(); ++part) {
    std::size_t end = bytes.find('\0', start);
    if (end == std::string_view::npos) end = bytes.size();
    const std::string_view p = bytes.substr(start, end - start);
    start = end + 1;
    if (part == 0) {
      files["gpus.json"] = std::string(p);
      continue;
    }
    const std::size_t nl = p.find('\n');
    if (nl == std::string_view::npos) continue;
    files[std::string(p.substr(0, nl))] = std::string(p.substr(nl + 1));
  }
  expect_input_error_only([&] {
    const catalog::Catalog c = catalog::Catalog::parse(files);
    std::vector<std::string> ids;
    for (const catalog::Gpu& g : c.gpus()) {
      require(g.memory.value() > 0, "a GPU with no memory");
      require(&c.gpu(g.id) == &g, "a GPU id that does not look itself up");
      ids.push_back(g.id);
    }
    for (const catalog::Tier& t : c.tiers()) {
      require(t.count > 0, "a tier with no GPUs");
      (void)c.gpu(t.gpu);  // tiers name known GPUs: an InputError here would be a bug
    }
    for (const catalog::Preset& p : c.presets()) {
      require(&c.preset(p.id) == &p, "a preset id that does not look itself up");
      ids.push_back(p.id);
      // A preset's config is parsed like a config.json (its errors are InputErrors).
      expect_input_error_only([&] { check_spec(spec::from_config(p.config, "models/" + p.id + ".json")); });
    }
    // Users type names of a few words; a quadratic edit distance over 30 KB ids would only time out.
    for (const std::string& id : ids)
      if (id.size() < 100) (void)vramfit::did_you_mean(id + "x", ids);
  });
  return 0;
}

int fuzz_cli(const std::uint8_t* data, std::size_t size) {
  // Never the network: a `--model org/name` the cache lacks is refused, not fetched.
  static const int offline = ::setenv("HF_HUB_OFFLINE", "1", 1);
  (void)offline;
  static const Sandbox sandbox;
  const std::string_view bytes = text_of(data, size);
  std::vector<std::string> args{"vramfit"};
  std::string stdin_text;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t end = bytes.find('\0', start);
    if (end == std::string_view::npos) end = bytes.size();
    if (end == start) {  // an empty argument: the rest is standard input
      stdin_text = std::string(bytes.substr(start + 1));
      break;
    }
    args.emplace_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  // "=NAME\nTEXT" arguments are files for this run, not arguments.
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> kept;
  for (std::string& a : args) {
    if (a.starts_with("=")) {
      const std::size_t nl = a.find('\n');
      const std::string name = a.substr(1, nl == std::string::npos ? std::string::npos : nl - 1);
      if (!sandbox_file_name(name)) return 0;
      std::string text = nl == std::string::npos ? std::string() : a.substr(nl + 1);
      // Arguments cannot hold NUL bytes: "\\0" in a file's text stands for one (binary files).
      for (std::size_t p = 0; (p = text.find("\\0", p)) != std::string::npos; ++p) text.replace(p, 2, 1, '\0');
      files.emplace_back(name, std::move(text));
      continue;
    }
    kept.push_back(std::move(a));
  }
  args = std::move(kept);
  bool json = false, help = false;
  for (const std::string& a : args) {
    if (leaves_sandbox(a)) return 0;
    json = json || a == "--json";
    help = help || a.starts_with("-h") || a.starts_with("--h") || a.starts_with("--v");
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Overlay overlay(sandbox.dir());
  for (const auto& [name, text] : files) overlay.write(name, text);

  ::unsetenv("VRAMFIT_DATA_DIR");  // the environment must not choose the catalog
  std::ostringstream out, err;
  std::istringstream in(stdin_text);
  int code = 0;
  {
    const InFolder in_sandbox(sandbox.dir());
    code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err, in);
  }
  require(code >= 0 && code <= 2, fmt::format("exit code {}: {}", code, err.str()));
  require(code != 2 || !err.str().empty(), "exit code 2 without a diagnostic");
  if (json && !help && code != 2 && !out.str().empty()) {
    require(nlohmann::json::accept(out.str()), "--json printed invalid JSON: " + out.str().substr(0, 200));
  }
  return 0;
}

int fuzz_gguf(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = text_of(data, size);
  gguf_run(bytes, size);              // the whole file
  gguf_run(bytes, size + (1 << 20));  // the head of a larger file: tensors may lie past the bytes read
  return 0;
}

int fuzz_oom(const std::uint8_t* data, std::size_t size) {
  using namespace vramfit::doctor;
  const std::string_view text = text_of(data, size);
  const OomScan s = scan(text);  // noexcept: any bytes
  // A candidate built from the input, so the matching code sees varied sizes.
  std::uint64_t seed = 0;
  for (std::size_t i = 0; i < size && i < 8; ++i) seed = seed << 8 | data[i];
  const std::vector<NamedSize> candidates = {{"logits", vramfit::Bytes{seed}},
                                             {"attention_scores", vramfit::Bytes{seed >> 3}}};
  for (const OomMessage& m : s.messages) {
    const Diagnosis d = diagnose(m, candidates, s.summary);
    (void)d;
  }
  const auto d = explain(s, candidates);
  (void)render::explain_text(s, d);
  (void)render::explain_json(s, d).dump();  // throws on invalid UTF-8: must never happen
  (void)parse_torch_size(text);
  return 0;
}

int fuzz_truth(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = text_of(data, size);
  (void)accuracy::truth_device_bytes(text);  // never throws
  expect_input_error_only([&] {
    const auto cases = accuracy::parse_truth(text, "truth.jsonl");
    for (const auto& c : cases) {
      require(c.workload.batch > 0 && c.workload.seq > 0, "a case with batch or seq 0");
      require(c.workload.lora.dropout >= 0 && c.workload.lora.dropout < 1, "a LoRA dropout outside [0, 1)");
    }
    const auto again = accuracy::parse_truth(text, "truth.jsonl");
    require(again.size() == cases.size(), "parsing the same bytes twice gave different cases");
  });
  return 0;
}

int fuzz_hub(const std::uint8_t* data, std::size_t size) {
  namespace hub = cli::hub;
  const std::string_view bytes = text_of(data, size);

  // The bytes as a response's header lines, cut after each '\n' as libcurl hands them over.
  hub::ResponseHeaders h;
  for (std::size_t start = 0; start < bytes.size();) {
    const std::size_t nl = bytes.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? bytes.size() : nl + 1;
    hub::read_header_line(bytes.substr(start, end - start), h);
    start = end;
  }
  require(h.error_code.size() <= 64 && h.content_range.size() <= 128, "a header value past its bound");

  // Content-Range, the headers' and the bytes' own: a size is the number its digits spell.
  for (const std::string_view range : {std::string_view(h.content_range), bytes}) {
    const auto total = hub::content_range_size(range);
    if (!total) continue;
    const std::size_t slash = range.rfind('/');
    require(range.starts_with("bytes 0-") && slash != std::string_view::npos, "a size from no Content-Range");
    std::string_view digits = range.substr(slash + 1);
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    require(fmt::format("{}", *total) == digits, "a Content-Range size that is not its digits");
  }

  // The bytes as model.safetensors.index.json.
  expect_input_error_only([&] {
    const std::vector<std::string> shards = hub::shards_of_index(std::string(bytes), "index.json");
    require(!shards.empty() && shards.size() <= 4096, "an index of no shard or of too many");
    for (std::size_t i = 0; i < shards.size(); ++i) {
      require(hub::plain_shard_name(shards[i]), "a shard name that is not plain: " + text_excerpt(shards[i]));
      require(i == 0 || shards[i - 1] < shards[i], "shard names not sorted once each");
    }
  });

  // The first line as a repo id, then the error a failed response for it means.
  const std::string_view first = bytes.substr(0, std::min(bytes.find('\n'), bytes.size()));
  cli::HubId id{"org/name", "main", false};
  expect_input_error_only([&] {
    id = cli::parse_hub_id(first, "--model");
    require(!id.repo.empty() && !id.revision.empty(), "a repo id without a repo or a revision");
    require(id.revision_given == (first.find('@') != std::string_view::npos), "a revision given without '@'");
  });
  const long status = size >= 2 ? static_cast<long>((data[0] | data[1] << 8) % 600) : 404;
  const cli::HubEndpoint endpoint{"https://huggingface.co", size % 2 == 0 ? "" : "hf_token", false};
  bool threw = false;
  try {
    hub::throw_response_error(status, h.error_code, id, endpoint, "config.json", "--model");
  } catch (const InputError& e) {
    check_error(e);
    threw = true;
  }
  require(threw, "a failed response without an error");
  return 0;
}

}  // namespace vramfit::fuzz
