// `--model org/name[@revision]` from a preset or the local Hugging Face cache (issue #16 item 6).
// The cache layout is huggingface_hub's (file_download.py, constants.py):
//   <cache>/models--<org>--<name>/refs/<revision>       the commit hash a branch or tag points to
//   <cache>/models--<org>--<name>/snapshots/<commit>/   config.json, the index, the weights
//                                                       (symlinks into ../../blobs/)
// A repo that is not in the cache is fetched from the Hub (cli/hub_http.cpp) unless HF_HUB_OFFLINE
// is set or libcurl is missing: then it is refused with the command that downloads it.
#include "vramfit/cli/hub_cache.hpp"

#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/cli/files.hpp"
#include "vramfit/cli/hub_http.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/spec/parse.hpp"

#include "common.hpp"

namespace vramfit::cli {

namespace fs = std::filesystem;

namespace {

using util::env;
using util::has_control;
using util::quote;

// The Hub's limit on each part of a repo id (huggingface_hub utils/_validators.py: REPO_ID_REGEX).
constexpr std::size_t kMaxIdPart = 96;
constexpr std::size_t kMaxRevision = 256;

void check_part(std::string_view part, std::string_view what, std::string_view text, std::string_view field) {
  const auto fail = [&](const std::string& why) {
    throw InputError(std::string(field), fmt::format("'{}' is not a Hugging Face repo id: {}", text_excerpt(text), why),
                     "give a preset id ('vramfit models' lists them) or a repo id such as Qwen/Qwen2.5-7B");
  };
  if (part.empty()) fail(fmt::format("the {} is empty", what));
  if (part.size() > kMaxIdPart) fail(fmt::format("the {} is longer than {} characters", what, kMaxIdPart));
  for (const char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok)
      fail(has_control(std::string_view(&c, 1))
               ? fmt::format("the {} holds a control character", what)
               : fmt::format("the {} holds '{}' (letters, digits, '-', '_' and '.' only)", what, std::string(1, c)));
  }
  if (part.find("--") != std::string_view::npos || part.find("..") != std::string_view::npos)
    fail(fmt::format("the {} holds '--' or '..'", what));
  if (part.front() == '-' || part.front() == '.' || part.back() == '-' || part.back() == '.')
    fail(fmt::format("the {} starts or ends with '-' or '.'", what));
  if (what == "name" && part.ends_with(".git")) fail("the name ends in '.git'");
}

/// "~" and "~/..." expanded with HOME, as os.path.expanduser does.
fs::path expand_user(const std::string& p) {
  if (p == "~" || p.starts_with("~/")) {
    const std::string home = env("HOME");
    if (!home.empty()) return fs::path(home) / p.substr(p.size() == 1 ? 1 : 2);
  }
  return fs::path(p);
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// The download command that fills the cache with what vramfit reads.
std::string download_fix(const HubId& id) {
  return fmt::format(
      "download its config and index first: {} (add '*.safetensors' for the exact weights; vramfit reads only "
      "their headers), or pass --config PATH; {}",
      util::hub_download_command(id),
      hub_fetch_available() ? "vramfit fetches from the Hub itself when HF_HUB_OFFLINE is unset"
                            : "this vramfit was built without libcurl, so it does not fetch from the Hub itself");
}

/// The snapshot folder of `id` in `cache`, or throws naming what was looked at.
fs::path find_snapshot(const fs::path& cache, const std::string& from, const HubId& id, std::string_view field) {
  std::string folder = "models--" + id.repo;
  for (std::size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at + 2))
    folder.replace(at, 1, "--");
  const fs::path repo_dir = cache / folder;
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec))
    throw InputError(std::string(field),
                     fmt::format("'{}' is not a preset's repo and is not in the Hugging Face cache (looked for {}, "
                                 "the cache folder from {})",
                                 text_excerpt(id.repo), quote(repo_dir), from),
                     download_fix(id));
  std::string commit;
  if (is_commit_hash(id.revision) && fs::is_directory(repo_dir / "snapshots" / id.revision, ec)) {
    commit = id.revision;
  } else {
    const fs::path ref = repo_dir / "refs" / id.revision;
    if (!fs::is_regular_file(ref, ec))
      throw InputError(std::string(field),
                       fmt::format("revision '{}' of '{}' is not in the Hugging Face cache ({} is missing)",
                                   text_excerpt(id.revision), text_excerpt(id.repo), quote(ref)),
                       download_fix(id));
    commit = read_file(ref, field, 4096);
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
      commit.pop_back();
    // refs/<revision> holds a commit hash (huggingface_hub writes it): anything else, a path
    // included, is refused before it names a folder.
    if (!is_commit_hash(commit))
      throw InputError(ref.string(), "does not hold a 40-character commit hash",
                       "download the model again: " + download_fix(id));
  }
  const fs::path snapshot = repo_dir / "snapshots" / commit;
  if (!fs::is_directory(snapshot, ec))
    throw InputError(std::string(field),
                     fmt::format("the Hugging Face cache has no snapshot {} of '{}'", quote(snapshot),
                                 text_excerpt(id.repo)),
                     download_fix(id));
  if (!fs::exists(snapshot / "config.json", ec))
    throw InputError(std::string(field),
                     fmt::format("snapshot {} of '{}' has no config.json", quote(snapshot), text_excerpt(id.repo)),
                     download_fix(id));
  return snapshot;
}

/// True when the snapshot's index lists a shard that is not downloaded (only the JSON files
/// were): the weights' headers are then not all there, and config.json alone is read.
bool shards_missing(const fs::path& snapshot) {
  const fs::path index = snapshot / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::exists(index, ec)) return false;
  std::optional<nlohmann::json> j;
  try {
    j = try_parse_json(read_file(index, "index"));
  } catch (const std::exception&) {
    return false;  // load_config reads it again and says what is wrong
  }
  if (!j || !j->is_object() || !j->contains("weight_map") || !(*j)["weight_map"].is_object()) return false;
  for (const auto& [tensor, shard] : (*j)["weight_map"].items()) {
    if (!shard.is_string()) return false;
    const std::string name = shard.get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
      return false;
    if (!fs::exists(snapshot / name, ec)) return true;  // a dangling symlink counts as missing
  }
  return false;
}

}  // namespace

HubId parse_hub_id(std::string_view text, std::string_view field) {
  if (text.empty())
    throw InputError(std::string(field), "the model id is empty",
                     "give a preset id ('vramfit models' lists them) or a repo id such as Qwen/Qwen2.5-7B");
  HubId id;
  std::string_view repo = text;
  if (const auto at = text.find('@'); at != std::string_view::npos) {
    repo = text.substr(0, at);
    const std::string_view rev = text.substr(at + 1);
    const auto fail = [&](const std::string& why) {
      throw InputError(std::string(field),
                       fmt::format("'{}' has no usable revision after '@': {}", text_excerpt(text), why),
                       "give a branch, tag or commit hash, e.g. Qwen/Qwen2.5-7B@main");
    };
    if (rev.empty()) fail("it is empty");
    if (rev.size() > kMaxRevision) fail(fmt::format("it is longer than {} characters", kMaxRevision));
    if (has_control(rev)) fail("it holds a control character");
    if (rev.front() == '/' || rev.back() == '/' || rev.find('\\') != std::string_view::npos ||
        rev.find("//") != std::string_view::npos)
      fail("it is not a relative name");
    // No path component may be '.' or '..' (the revision names a file under refs/); empty ones
    // were refused above.
    if (!util::plain_path_parts(rev)) fail("it holds '.' or '..' as a path part");
    id.revision = std::string(rev);
    id.revision_given = true;
  } else {
    id.revision = "main";
  }
  if (!repo.empty() && repo.front() == '/')
    throw InputError(std::string(field), fmt::format("'{}' is a path, not a model id", text_excerpt(text)),
                     "give a checkpoint folder or config file with --config PATH");
  const auto slash = repo.find('/');
  if (slash != std::string_view::npos && repo.find('/', slash + 1) != std::string_view::npos)
    throw InputError(std::string(field),
                     fmt::format("'{}' is not a Hugging Face repo id: it holds more than one '/'", text_excerpt(text)),
                     "give org/name, e.g. Qwen/Qwen2.5-7B, or a folder with --config PATH");
  if (slash == std::string_view::npos) {
    check_part(repo, "name", text, field);
  } else {
    check_part(repo.substr(0, slash), "organisation", text, field);
    check_part(repo.substr(slash + 1), "name", text, field);
  }
  id.repo = std::string(repo);
  return id;
}

fs::path hub_cache_dir(std::string* from) {
  std::string ignored;
  std::string& source = from != nullptr ? *from : ignored;
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    const std::string v = env(name);
    source = name;
    if (!v.empty()) return expand_user(v);
  }
  source = "$HF_HOME/hub";
  if (const std::string home = env("HF_HOME"); !home.empty()) return expand_user(home) / "hub";
  source = "$XDG_CACHE_HOME/huggingface/hub";
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return expand_user(xdg) / "huggingface" / "hub";
  source = "the default ~/.cache/huggingface/hub";
  if (const std::string home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "huggingface" / "hub";
  source.clear();
  return {};
}

spec::ModelSpec load_model_arg(std::string_view value, const catalog::Catalog& catalog, std::string_view field) {
  const bool plain = value.find('/') == std::string_view::npos && value.find('@') == std::string_view::npos;
  if (plain && !value.empty()) {
    // A preset id first; a bare Hub name ("gpt2") only when no preset has it and it is cached.
    try {
      const auto& preset = catalog.preset(value, field);
      spec::ModelSpec m = spec::from_config(preset.config, "models/" + preset.id + ".json: config");
      m.name = preset.id;
      m.source = "preset";
      return m;
    } catch (const InputError&) {
      const fs::path cache = hub_cache_dir();
      std::error_code ec;
      const bool valid = [&] {
        try {
          parse_hub_id(value, field);
          return true;
        } catch (const InputError&) {
          return false;
        }
      }();
      if (!valid || cache.empty() || !fs::is_directory(cache / ("models--" + std::string(value)), ec)) throw;
    }
  }
  const HubId id = parse_hub_id(value, field);
  if (!id.revision_given) {
    const std::string wanted = lower(id.repo);
    for (const auto& preset : catalog.presets())
      if (lower(preset.hf_repo) == wanted) {
        spec::ModelSpec m = spec::from_config(preset.config, "models/" + preset.id + ".json: config");
        m.name = preset.id;
        m.source = "preset";
        return m;
      }
  }
  std::string from;
  const fs::path cache = hub_cache_dir(&from);
  fs::path snapshot;
  try {
    if (cache.empty())
      throw InputError(std::string(field),
                       fmt::format("'{}' is not a preset's repo, and there is no Hugging Face cache to look in "
                                   "(HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME are unset)",
                                   text_excerpt(id.repo)),
                       download_fix(id));
    snapshot = find_snapshot(cache, from, id, field);
  } catch (const InputError&) {
    // Not in the cache: the Hub itself, unless HF_HUB_OFFLINE says no (or libcurl is missing).
    const HubEndpoint endpoint = hub_endpoint_from_env();
    if (endpoint.offline || !hub_fetch_available()) throw;
    return fetch_from_hub(id, endpoint, field);
  }
  const bool partial = shards_missing(snapshot);
  spec::ModelSpec m = load_config(partial ? snapshot / "config.json" : snapshot, field);
  m.name = id.repo + "@" + id.revision;
  m.notes.push_back(fmt::format("read from the Hugging Face cache: {}", snapshot.string()));
  if (partial)
    m.notes.push_back(
        "the index lists safetensors shards that are not in the cache: parameters counted from config.json "
        "(download the shards for the exact count from their headers)");
  return m;
}

}  // namespace vramfit::cli
