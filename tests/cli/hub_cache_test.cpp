// `--model org/name[@revision]` from the local Hugging Face cache (issue #16 item 6): a fixture
// cache is built in a temporary folder as huggingface_hub lays it out (refs/, snapshots/ with
// symlinks into blobs/), and the environment variables are set per test.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_helper.hpp"
#include "loopback_hub.hpp"
#include "vramfit/cli/hub_cache.hpp"
#include "vramfit/cli/hub_http.hpp"
#include "vramfit/core/error.hpp"

using vramfit::test::CliResult;
using vramfit::test::estimate;
using vramfit::test::require_usage_error;
using vramfit::test::TempDir;
namespace fs = std::filesystem;

namespace {

/// Sets the cache variables for one test and puts the old values back at its end.
class HubEnv {
 public:
  HubEnv() {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_.emplace_back(v == nullptr ? std::nullopt : std::optional<std::string>(v));
      ::unsetenv(name);
    }
    ::setenv("HF_HUB_OFFLINE", "1", 1);  // never the network, unless a test unsets it
  }
  ~HubEnv() {
    for (std::size_t i = 0; i < std::size(kNames); ++i) {
      if (saved_[i]) ::setenv(kNames[i], saved_[i]->c_str(), 1);
      else ::unsetenv(kNames[i]);
    }
  }
  HubEnv(const HubEnv&) = delete;
  HubEnv& operator=(const HubEnv&) = delete;
  void set(const char* name, const std::string& value) const { ::setenv(name, value.c_str(), 1); }
  /// Clears every cache variable again (HOME included), as at the start of the test.
  void clear() const {
    for (const char* name : kNames) ::unsetenv(name);
    ::setenv("HF_HUB_OFFLINE", "1", 1);
  }
  void unset(const char* name) const {
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return std::string_view(n) == name; }) ==
        std::end(kNames))
      throw std::logic_error(std::string("HubEnv does not restore ") + name);
    ::unsetenv(name);
  }

 private:
  static constexpr const char* kNames[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                                           "HOME", "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                                           "HF_HUB_OFFLINE"};
  std::vector<std::optional<std::string>> saved_;
};

/// The refusal's last words: whether this build fetches from the Hub (libcurl) when not offline.
std::string fetch_word() {
  return vramfit::cli::hub_fetch_available()
             ? "vramfit fetches from the Hub itself when HF_HUB_OFFLINE is unset"
             : "this vramfit was built without libcurl, so it does not fetch from the Hub itself";
}

const std::string kMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kV1 = "fedcba9876543210fedcba9876543210fedcba98";

std::string smollm_config() { return vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json"); }

/// A safetensors header holding one BF16 tensor of `rows` x 576 (the file is sparse).
std::string safetensors(const std::string& name, std::uint64_t rows) {
  const std::uint64_t elements = rows * 576ULL;
  const std::string header = R"({")" + name + R"(":{"dtype":"BF16","shape":[)" + std::to_string(rows) +
                             R"(,576],"data_offsets":[0,)" + std::to_string(elements * 2) + "]}}";
  std::string prefix(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return prefix + header;
}

/// Writes `text` as blobs/<blob> of `repo_dir` and links snapshots/<commit>/<name> to it, as
/// huggingface_hub does (a relative symlink).
void add_file(const TempDir& dir, const std::string& repo_dir, const std::string& commit, const std::string& name,
              const std::string& text, std::uint64_t sparse_size = 0) {
  const std::string blob = repo_dir + "/blobs/" + name + "-" + commit.substr(0, 8);
  const std::string path = dir.write(blob, text);
  if (sparse_size > 0) fs::resize_file(path, sparse_size);
  const fs::path link = dir.path() / repo_dir / "snapshots" / commit / name;
  fs::create_directories(link.parent_path());
  fs::create_symlink(fs::path("../../blobs") / (name + "-" + commit.substr(0, 8)), link);
}

nlohmann::json run_json(std::vector<std::string> args) {
  args.push_back("--json");
  const CliResult r = estimate(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("hub cache: --model org/name reads config.json from the Hugging Face cache", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());
  const std::string repo = "models--acme--tiny-llama";
  dir.write(repo + "/refs/main", kMain);
  add_file(dir, repo, kMain, "config.json", smollm_config());

  auto j = run_json({"--model", "acme/tiny-llama"});
  CHECK(j["model"]["name"] == "acme/tiny-llama@main");
  CHECK(j["model"]["source"] == "config");
  CHECK(j["model"]["params"] == 134515008);  // as --config tests/cli/data/smollm2-135m.config.json
  CHECK(j["model"]["exact_from_checkpoint"] == false);
  CHECK(j.dump().find("read from the Hugging Face cache: " + dir.str() + "/" + repo + "/snapshots/" + kMain) !=
        std::string::npos);

  // With the weights (a symlink into blobs/): the header gives the exact count; the file is
  // sparse, only its header is read.
  const std::uint64_t rows = 49152;
  const std::string st = safetensors("model.embed_tokens.weight", rows);
  add_file(dir, repo, kMain, "model.safetensors", st, st.size() + rows * 576 * 2);
  j = run_json({"--model", "acme/tiny-llama"});
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j["model"]["params"] == rows * 576);
  CHECK(j["model"]["checkpoint_dtype"] == "bf16");
}

TEST_CASE("hub cache: --model org/name@revision: a branch or tag in refs/, or a commit hash", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());
  const std::string repo = "models--acme--tiny-llama";
  dir.write(repo + "/refs/main", kMain + "\n");
  dir.write(repo + "/refs/v1", kV1);
  add_file(dir, repo, kMain, "config.json", smollm_config());
  std::string wide = smollm_config();  // revision v1: a wider MLP
  wide.replace(wide.find("1536"), 4, "2048");
  add_file(dir, repo, kV1, "config.json", wide);

  // intermediate 1536 -> 2048 adds 3 x 576 x 512 x 30 layers = 26,542,080 parameters.
  CHECK(run_json({"--model", "acme/tiny-llama@main"})["model"]["params"] == 134515008);
  CHECK(run_json({"--model", "acme/tiny-llama@v1"})["model"]["params"] == 134515008 + 26542080);
  auto j = run_json({"--model", "acme/tiny-llama@" + kV1});
  CHECK(j["model"]["params"] == 134515008 + 26542080);
  CHECK(j["model"]["name"] == "acme/tiny-llama@" + kV1);

  // A revision that is not in the cache: exit 2 naming the refs file looked for.
  const std::string ref = dir.str() + "/" + repo + "/refs/v2";
  require_usage_error(
      estimate({"--model", "acme/tiny-llama@v2"}),
      "vramfit: error: --model: revision 'v2' of 'acme/tiny-llama' is not in the Hugging Face cache ('" + ref +
          "' is missing) (download its config and index first: huggingface-cli download acme/tiny-llama "
          "--revision v2 --include config.json '*.json' (add '*.safetensors' for the exact weights; vramfit reads "
          "only their headers), or pass --config PATH; " + fetch_word() + ")\n");

  // refs/<revision> must hold a commit hash, never a path.
  dir.write(repo + "/refs/evil", "../../../../etc");
  const CliResult r = estimate({"--model", "acme/tiny-llama@evil"});
  CHECK(r.code == 2);
  CHECK(r.err.find("refs/evil: does not hold a 40-character commit hash") != std::string::npos);
}

TEST_CASE("hub cache: --model org/name with a sharded checkpoint in the cache", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());
  const std::string repo = "models--acme--sharded";
  dir.write(repo + "/refs/main", kMain);
  add_file(dir, repo, kMain, "config.json", smollm_config());
  add_file(dir, repo, kMain, "model.safetensors.index.json",
           R"({"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                            "b": "model-00002-of-00002.safetensors"}})");

  // Only the JSON files downloaded: the index lists shards that are not there, so the count
  // comes from config.json, and the note says so.
  auto j = run_json({"--model", "acme/sharded"});
  CHECK(j["model"]["params"] == 134515008);
  CHECK(j["model"]["exact_from_checkpoint"] == false);
  CHECK(j.dump().find("the index lists safetensors shards that are not in the cache") != std::string::npos);

  // Both shards there: their headers give the exact sum.
  const std::string a = safetensors("a", 1000);
  const std::string b = safetensors("b", 24);
  add_file(dir, repo, kMain, "model-00001-of-00002.safetensors", a, a.size() + 1000 * 576 * 2);
  add_file(dir, repo, kMain, "model-00002-of-00002.safetensors", b, b.size() + 24 * 576 * 2);
  j = run_json({"--model", "acme/sharded"});
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j["model"]["params"] == 1024 * 576);
}

TEST_CASE("hub cache: the cache folder follows huggingface_hub: HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME", "[cli][hub]") {
  HubEnv env;
  CHECK(vramfit::cli::hub_cache_dir().empty());
  env.set("HOME", "/home/u");
  CHECK(vramfit::cli::hub_cache_dir() == "/home/u/.cache/huggingface/hub");
  env.set("XDG_CACHE_HOME", "/xdg");
  CHECK(vramfit::cli::hub_cache_dir() == "/xdg/huggingface/hub");
  env.set("HF_HOME", "~/hf");
  CHECK(vramfit::cli::hub_cache_dir() == "/home/u/hf/hub");
  env.set("HUGGINGFACE_HUB_CACHE", "/legacy");
  CHECK(vramfit::cli::hub_cache_dir() == "/legacy");
  env.set("HF_HUB_CACHE", "/hub");
  CHECK(vramfit::cli::hub_cache_dir() == "/hub");

  // The default location, end to end: $HOME/.cache/huggingface/hub.
  TempDir dir;
  env.clear();
  env.set("HOME", dir.str());
  const std::string repo = ".cache/huggingface/hub/models--acme--tiny-llama";
  dir.write(repo + "/refs/main", kMain);
  add_file(dir, repo, kMain, "config.json", smollm_config());
  CHECK(run_json({"--model", "acme/tiny-llama"})["model"]["params"] == 134515008);
  // $HF_HOME/hub wins over HOME.
  TempDir other;
  env.set("HF_HOME", other.str());
  const CliResult r = estimate({"--model", "acme/tiny-llama"});
  CHECK(r.code == 2);
  CHECK(r.err.find("(looked for '" + other.str() + "/hub/models--acme--tiny-llama', the cache folder from $HF_HOME/hub)") !=
        std::string::npos);
}

TEST_CASE("hub cache: --model org/name: a preset with that repo comes first", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());  // empty cache
  auto j = run_json({"--model", "HuggingFaceTB/SmolLM2-135M"});
  CHECK(j["model"]["name"] == "smollm2-135m");
  CHECK(j["model"]["source"] == "preset");
  // Preset ids still work, and a bare name that is neither a preset nor cached keeps the preset error.
  CHECK(run_json({"--model", "smollm2-135m"})["model"]["source"] == "preset");
  CliResult r = estimate({"--model", "gpt2"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("vramfit: error: --model: unknown model preset 'gpt2'", 0) == 0);
  // ... and a bare name cached as models--<name> is read from the cache.
  dir.write("models--gpt2/refs/main", kMain);
  add_file(dir, "models--gpt2", kMain, "config.json", smollm_config());
  j = run_json({"--model", "gpt2"});
  CHECK(j["model"]["name"] == "gpt2@main");
  CHECK(j["model"]["params"] == 134515008);
}

TEST_CASE("hub cache: --model org/name not in the cache: exit 2 with the paths looked at and the fix", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());
  require_usage_error(
      estimate({"--model", "Qwen/Qwen2.5-7B"}),
      "vramfit: error: --model: 'Qwen/Qwen2.5-7B' is not a preset's repo and is not in the Hugging Face cache "
      "(looked for '" + dir.str() + "/models--Qwen--Qwen2.5-7B', the cache folder from HF_HUB_CACHE) (download its config and index first: "
      "huggingface-cli download Qwen/Qwen2.5-7B --include config.json '*.json' (add '*.safetensors' for the exact "
      "weights; vramfit reads only their headers), or pass --config PATH; " + fetch_word() + ")\n");
  // A repo folder with a refs/main but no snapshot, or a snapshot without config.json.
  dir.write("models--acme--broken/refs/main", kMain);
  CliResult r = estimate({"--model", "acme/broken"});
  CHECK(r.code == 2);
  CHECK(r.err.find("the Hugging Face cache has no snapshot '" + dir.str() + "/models--acme--broken/snapshots/" +
                   kMain + "'") != std::string::npos);
  dir.write("models--acme--broken/snapshots/" + kMain + "/tokenizer.json", "{}");
  r = estimate({"--model", "acme/broken"});
  CHECK(r.code == 2);
  CHECK(r.err.find("has no config.json") != std::string::npos);
  // A config.json symlink whose blob is missing (an interrupted download).
  dir.write("models--acme--dangling/refs/main", kMain);
  fs::create_directories(dir.path() / "models--acme--dangling/snapshots" / kMain);
  fs::create_symlink("../../blobs/gone", dir.path() / "models--acme--dangling/snapshots" / kMain / "config.json");
  r = estimate({"--model", "acme/dangling"});
  CHECK(r.code == 2);
  CHECK(r.err.find("has no config.json") != std::string::npos);
  // No cache at all (no HOME either).
  env.unset("HF_HUB_CACHE");
  r = estimate({"--model", "acme/tiny"});
  CHECK(r.code == 2);
  CHECK(r.err.find("there is no Hugging Face cache to look in") != std::string::npos);
}

TEST_CASE("hub cache: --model: invalid repo ids are refused with exit 2", "[cli][hub]") {
  HubEnv env;
  TempDir dir;
  env.set("HF_HUB_CACHE", dir.str());
  const std::string fix = " (give a preset id ('vramfit models' lists them) or a repo id such as Qwen/Qwen2.5-7B)\n";
  require_usage_error(estimate({"--model", "a/b/c"}),
                      "vramfit: error: --model: 'a/b/c' is not a Hugging Face repo id: it holds more than one '/' "
                      "(give org/name, e.g. Qwen/Qwen2.5-7B, or a folder with --config PATH)\n");
  require_usage_error(estimate({"--model", "/etc/passwd"}),
                      "vramfit: error: --model: '/etc/passwd' is a path, not a model id (give a checkpoint folder "
                      "or config file with --config PATH)\n");
  require_usage_error(estimate({"--model", "../x"}),
                      "vramfit: error: --model: '../x' is not a Hugging Face repo id: the organisation holds '--' or "
                      "'..'" + fix);
  require_usage_error(estimate({"--model", "org/na..me"}),
                      "vramfit: error: --model: 'org/na..me' is not a Hugging Face repo id: the name holds '--' or "
                      "'..'" + fix);
  require_usage_error(estimate({"--model", "org/"}),
                      "vramfit: error: --model: 'org/' is not a Hugging Face repo id: the name is empty" + fix);
  require_usage_error(estimate({"--model", "org/-name"}),
                      "vramfit: error: --model: 'org/-name' is not a Hugging Face repo id: the name starts or ends "
                      "with '-' or '.'" + fix);
  const std::string long_name = "org/" + std::string(97, 'a');
  CliResult r = estimate({"--model", long_name});
  CHECK(r.code == 2);
  CHECK(r.err.find("the name is longer than 96 characters") != std::string::npos);
  CHECK(estimate({"--model", "org/" + std::string(96, 'a')}).err.find("is not in the Hugging Face cache") !=
        std::string::npos);
  r = estimate({"--model", "org/name.git"});
  CHECK(r.code == 2);
  CHECK(r.err.find("the name ends in '.git'") != std::string::npos);
  r = estimate({"--model", std::string("org/na\x01me")});
  CHECK(r.code == 2);
  CHECK(r.err.find("the name holds a control character") != std::string::npos);
  r = estimate({"--model", "org/name@"});
  CHECK(r.code == 2);
  CHECK(r.err.find("has no usable revision after '@': it is empty") != std::string::npos);
  r = estimate({"--model", "org/name@../../etc"});
  CHECK(r.code == 2);
  CHECK(r.err.find("it holds '.' or '..' as a path part") != std::string::npos);
  r = estimate({"--model", "org/name@/abs"});
  CHECK(r.code == 2);
  CHECK(r.err.find("it is not a relative name") != std::string::npos);
}

// --- the Hub over HTTP (cli/hub_http.cpp), against a fixture Hub on 127.0.0.1 ----------------

namespace {

/// A safetensors head whose JSON header is padded with spaces to `pad` bytes (the format allows
/// trailing whitespace), holding one BF16 tensor of `rows` x 576.
std::string padded_safetensors(const std::string& name, std::uint64_t rows, std::size_t pad) {
  std::string st = safetensors(name, rows);
  std::string header = st.substr(8);
  header.resize(std::max(pad, header.size()), ' ');
  std::string prefix(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return prefix + header;
}

/// The environment of a fetch: an empty cache, the network on, HF_ENDPOINT at `hub`.
void online(const HubEnv& env, const TempDir& cache, const vramfit::test::LoopbackHub& hub) {
  env.set("HF_HUB_CACHE", cache.str());
  env.unset("HF_HUB_OFFLINE");
  env.set("HF_ENDPOINT", hub.endpoint());
}

bool logged(const vramfit::test::LoopbackHub& hub, const std::string& line) {
  const auto log = hub.log();
  return std::find(log.begin(), log.end(), line) != log.end();
}

}  // namespace

TEST_CASE("hub fetch: --model org/name missing from the cache comes from the Hub: config.json, then the headers",
          "[cli][hub][http]") {
  HubEnv env;
  TempDir cache;
  vramfit::test::LoopbackHub hub;
  online(env, cache, hub);
  if (!vramfit::cli::hub_fetch_available()) {
    CHECK(estimate({"--model", "acme/tiny-llama"}).err.find("built without libcurl") != std::string::npos);
    return;
  }
  hub.add("acme/tiny-llama", "main", "config.json", smollm_config());
  auto j = run_json({"--model", "acme/tiny-llama"});
  CHECK(j["model"]["name"] == "acme/tiny-llama@main");
  CHECK(j["model"]["params"] == 134515008);  // as --config tests/cli/data/smollm2-135m.config.json
  CHECK(j["model"]["exact_from_checkpoint"] == false);
  const std::string notes = j.dump();
  CHECK(notes.find("fetched from " + hub.endpoint() + ": config.json (no weights downloaded)") != std::string::npos);
  CHECK(notes.find("the repo has no safetensors weights: parameters counted from config.json") != std::string::npos);
  CHECK(hub.log() == std::vector<std::string>{"GET /acme/tiny-llama/resolve/main/config.json",
                                              "GET /acme/tiny-llama/resolve/main/model.safetensors.index.json",
                                              "GET /acme/tiny-llama/resolve/main/model.safetensors Range: bytes=0-7"});

  // model.safetensors of 56 MB (sparse): only its first 128 KiB are asked for, the header is exact.
  const std::uint64_t rows = 49152;
  const std::string st = safetensors("model.embed_tokens.weight", rows);
  hub.add("acme/tiny-llama", "main", "model.safetensors", st, st.size() + rows * 576 * 2);
  j = run_json({"--model", "acme/tiny-llama"});
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j["model"]["params"] == rows * 576);
  CHECK(j["model"]["checkpoint_dtype"] == "bf16");
  CHECK(j.dump().find("config.json and 1 safetensors header (no weights downloaded)") !=
        std::string::npos);
  CHECK(logged(hub, "GET /acme/tiny-llama/resolve/main/model.safetensors Range: bytes=0-131071"));

  // A server that ignores Range requests: the transfer is cut after the first 128 KiB all the same.
  hub.ignore_ranges(true);
  j = run_json({"--model", "acme/tiny-llama"});
  CHECK(j["model"]["params"] == rows * 576);
}

TEST_CASE("hub fetch: shards from the index, a header past the first range, a revision quoted whole, a redirect",
          "[cli][hub][http]") {
  HubEnv env;
  TempDir cache;
  vramfit::test::LoopbackHub hub;
  online(env, cache, hub);
  if (!vramfit::cli::hub_fetch_available()) return;  // the refusal is checked in the test above
  const std::string rev = "refs%2Fpr%2F1";  // huggingface_hub quotes the revision with safe=""
  hub.add("acme/big", "blob", "config.json", smollm_config());
  hub.redirect("/acme/big/resolve/" + rev + "/config.json", "/acme/big/resolve/blob/config.json");
  hub.add("acme/big", rev, "model.safetensors.index.json",
          R"({"metadata":{"total_size":1},"weight_map":{"model.embed_tokens.weight":"model-00001-of-00002.safetensors",)"
          R"("model.layers.0.self_attn.q_proj.weight":"model-00002-of-00002.safetensors"}})");
  const std::string one = padded_safetensors("model.embed_tokens.weight", 1000, 200000);  // > 128 KiB
  const std::string two = safetensors("model.layers.0.self_attn.q_proj.weight", 24);
  hub.add("acme/big", rev, "model-00001-of-00002.safetensors", one, one.size() + 1000 * 576 * 2);
  hub.add("acme/big", rev, "model-00002-of-00002.safetensors", two, two.size() + 24 * 576 * 2);

  const auto j = run_json({"--model", "acme/big@refs/pr/1"});
  CHECK(j["model"]["name"] == "acme/big@refs/pr/1");
  CHECK(j["model"]["params"] == (1000 + 24) * 576);
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j.dump().find("config.json and 2 safetensors headers") != std::string::npos);
  CHECK(logged(hub, "GET /acme/big/resolve/blob/config.json"));  // after the 302
  CHECK(logged(hub, "GET /acme/big/resolve/" + rev + "/model-00001-of-00002.safetensors Range: bytes=131072-200007"));
}

TEST_CASE("hub fetch: every failure is exit 2 naming the repo, the cause and the fix", "[cli][hub][http]") {
  HubEnv env;
  TempDir cache;
  vramfit::test::LoopbackHub hub;
  online(env, cache, hub);
  if (!vramfit::cli::hub_fetch_available()) return;
  const std::string at = hub.endpoint();

  require_usage_error(estimate({"--model", "acme/nothing"}),
                      "vramfit: error: --model: 'acme/nothing' was not found on " + at +
                          " (HTTP 401): no such repo, or a private one (check the repo id; for a private repo, set "
                          "HF_TOKEN)\n");

  hub.add("acme/gated", "main", "config.json", smollm_config());
  hub.gate("acme/gated", "hf_secret");
  require_usage_error(estimate({"--model", "acme/gated"}),
                      "vramfit: error: --model: 'acme/gated' is a gated repo on " + at +
                          " (accept its conditions on the model's page, then set HF_TOKEN to a token of yours)\n");
  env.set("HF_TOKEN", "hf_secret");
  CHECK(run_json({"--model", "acme/gated"})["model"]["params"] == 134515008);
  CHECK(logged(hub, "GET /acme/gated/resolve/main/config.json Auth: Bearer hf_secret"));
  env.set("HF_TOKEN", "hf_wrong");
  CHECK(estimate({"--model", "acme/gated"}).err.find("with the account of HF_TOKEN's token") != std::string::npos);
  env.unset("HF_TOKEN");

  hub.add("acme/readme-only", "main", "README.md", "# no model here");
  require_usage_error(estimate({"--model", "acme/readme-only"}),
                      "vramfit: error: --model: 'acme/readme-only' has no config.json at revision 'main' on " + at +
                          " (give a Hugging Face model repo (it holds config.json), or --config PATH)\n");

  // Hostile or damaged files: refused with the file's URL.
  hub.add("acme/bad", "main", "config.json", smollm_config());
  std::string huge(8, '\0');
  huge[7] = 0x10;  // header length 2^60
  hub.add("acme/bad", "main", "model.safetensors", huge, 1000);
  CliResult r = estimate({"--model", "acme/bad"});
  CHECK(r.code == 2);
  CHECK(r.err == "vramfit: error: " + at +
                     "/acme/bad/resolve/main/model.safetensors: header length 1152921504606846976 is over the 100 MB "
                     "limit (the file is not a safetensors file, or is damaged)\n");
  std::string past(8, '\0');
  past[0] = static_cast<char>(0xff);  // 255 bytes of header in a 100-byte file
  hub.add("acme/short", "main", "config.json", smollm_config());
  hub.add("acme/short", "main", "model.safetensors", past, 100);
  r = estimate({"--model", "acme/short"});
  CHECK(r.code == 2);
  CHECK(r.err.find("header length 255 is past the file's end (100 bytes)") != std::string::npos);
  hub.add("acme/escape", "main", "config.json", smollm_config());
  hub.add("acme/escape", "main", "model.safetensors.index.json", R"({"weight_map":{"w":"../../etc/x.safetensors"}})");
  r = estimate({"--model", "acme/escape"});
  CHECK(r.code == 2);
  CHECK(r.err == "vramfit: error: " + at +
                     "/acme/escape/resolve/main/model.safetensors.index.json: weight_map.w: not the relative name of "
                     "a .safetensors file (check the repo's index file)\n");

  // Offline: the cache's refusal, and no request at all.
  const std::size_t before = hub.log().size();
  env.set("HF_HUB_OFFLINE", "1");
  r = estimate({"--model", "acme/gated"});
  CHECK(r.code == 2);
  CHECK(r.err.find("is not in the Hugging Face cache") != std::string::npos);
  CHECK(hub.log().size() == before);
  env.unset("HF_HUB_OFFLINE");

  // Nothing listening, and an endpoint that is no http(s) URL.
  env.set("HF_ENDPOINT", "http://127.0.0.1:1");
  r = estimate({"--model", "acme/gated"});
  CHECK(r.code == 2);
  CHECK(r.err.find("'acme/gated' is not a preset's repo nor in the Hugging Face cache, and "
                   "http://127.0.0.1:1/acme/gated/resolve/main/config.json could not be fetched: ") != std::string::npos);
  CHECK(r.err.find("HF_HUB_OFFLINE=1 never fetches") != std::string::npos);
  env.set("HF_ENDPOINT", "ftp://mirror.example");
  require_usage_error(estimate({"--model", "acme/gated"}),
                      "vramfit: error: HF_ENDPOINT: 'ftp://mirror.example' is not an http:// or https:// URL (unset "
                      "it (the Hub is https://huggingface.co) or give the mirror's URL)\n");
}
