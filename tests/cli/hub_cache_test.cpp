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
#include "vramfit/cli/hub_cache.hpp"
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
  }
  void unset(const char* name) const {
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return std::string_view(n) == name; }) ==
        std::end(kNames))
      throw std::logic_error(std::string("HubEnv does not restore ") + name);
    ::unsetenv(name);
  }

 private:
  static constexpr const char* kNames[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                                           "HOME"};
  std::vector<std::optional<std::string>> saved_;
};

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
          "only their headers), or pass --config PATH; vramfit does not fetch from the Hub itself)\n");

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
      "weights; vramfit reads only their headers), or pass --config PATH; vramfit does not fetch from the Hub "
      "itself)\n");
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
