// File input of the CLI: the only module that touches the file system.
#include "vramfit/cli/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace fs = std::filesystem;

namespace {

// safetensors refuses headers over 100 MB (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::ifstream open(const fs::path& path, std::string_view field) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st))
    throw InputError(std::string(field), fmt::format("{} does not exist", quote(path)), "check the path");
  if (fs::is_directory(st))
    throw InputError(std::string(field), fmt::format("{} is a folder, not a file", quote(path)),
                     "give a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)),
                     "check the file's permissions");
  return in;
}

std::uint64_t file_size(const fs::path& path, std::string_view field) {
  std::error_code ec;
  // A folder named like a shard (`model.safetensors/`) would otherwise read "Is a directory
  // (check the file's permissions)": say what is wrong instead.
  if (fs::is_directory(path, ec))
    throw InputError(std::string(field), fmt::format("{} is a folder, not a file", quote(path)),
                     "give a file");
  const auto n = fs::file_size(path, ec);
  if (ec)
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), ec.message()),
                     "check the file's permissions");
  return n;
}

/// The safetensors files of a checkpoint folder, in load order.
std::vector<fs::path> safetensors_files(const fs::path& dir, std::string_view field) {
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    const std::string text = read_file(index, field);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error&) {
      throw InputError(index.string(), "malformed JSON", "download the file again");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw InputError(index.string() + ": weight_map", "missing or not an object",
                       "download the file again");
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw InputError(index.string() + ": weight_map." + tensor, "must be a file name",
                         "download the file again");
      shards.insert(shard.get<std::string>());
    }
    std::vector<fs::path> out;
    for (const auto& s : shards) {
      const fs::path p = dir / s;
      if (!fs::exists(p, ec))
        throw InputError(std::string(field),
                         fmt::format("shard {} listed in model.safetensors.index.json is missing", quote(p)),
                         "download every shard, or give the config file alone");
      out.push_back(p);
    }
    return out;
  }
  if (fs::exists(dir / "model.safetensors", ec)) return {dir / "model.safetensors"};
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// The .gguf files directly in a folder, sorted.
std::vector<fs::path> gguf_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".gguf" && entry.is_regular_file(ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// A spec from a GGUF file: only its header is read (at most spec::kGgufMaxHeader bytes).
spec::ModelSpec load_gguf(const fs::path& file, std::string_view field) {
  const std::string origin = file.string();
  const std::uint64_t size = file_size(file, field);
  const std::string prefix = read_prefix(file, spec::kGgufMaxHeader, field);
  spec::ModelSpec spec = spec::spec_from_gguf(spec::parse_gguf_header(prefix, size, origin), origin);
  spec.name = origin;
  return spec;
}

}  // namespace

std::string read_file(const fs::path& path, std::string_view field, std::uint64_t max_bytes) {
  std::ifstream in = open(path, field);
  // Read in chunks up to the limit: a device or a pipe that never ends (/dev/zero) must not
  // hang the tool or exhaust memory.
  std::string text;
  std::string chunk(std::size_t{1} << 16, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw InputError(std::string(field),
                       fmt::format("{} is longer than {} MiB: not the file expected", quote(path), max_bytes >> 20),
                       "check the path");
  }
  if (in.bad())
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)),
                     "check the file");
  return text;
}

std::string read_prefix(const fs::path& path, std::uint64_t max_bytes, std::string_view field) {
  std::ifstream in = open(path, field);
  const std::uint64_t n = std::min(max_bytes, file_size(path, field));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::map<std::string, std::string> read_data_dir(const fs::path& dir, std::string_view field) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(std::string(field), fmt::format("{} is not a folder", quote(dir)),
                     "give a folder holding gpus.json and models/*.json");
  if (!fs::exists(dir / "gpus.json", ec))
    throw InputError(std::string(field), fmt::format("folder {} has no gpus.json", quote(dir)),
                     "give a folder holding gpus.json and models/*.json");
  std::map<std::string, std::string> files;
  files["gpus.json"] = read_file(dir / "gpus.json", field);
  const fs::path models = dir / "models";
  if (fs::is_directory(models, ec)) {
    for (const auto& entry : fs::directory_iterator(models, ec))
      if (entry.path().extension() == ".json")
        files["models/" + entry.path().filename().string()] = read_file(entry.path(), field);
  }
  return files;
}

spec::ModelSpec load_config(const fs::path& path, std::string_view field) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st))
    throw InputError(std::string(field), fmt::format("{} does not exist", quote(path)),
                     "give a config.json file or the folder holding it");
  const bool folder = fs::is_directory(st);
  if (!folder && path.extension() == ".gguf") return load_gguf(path, field);
  if (!folder && path.extension() == ".safetensors")
    throw InputError(std::string(field), fmt::format("{} is a safetensors file", quote(path)),
                     "give the folder holding it and config.json");
  const fs::path config = folder ? path / "config.json" : path;
  if (folder && !fs::exists(config, ec)) {
    // A llama.cpp download: one .gguf file and no config.json.
    const std::vector<fs::path> ggufs = gguf_files(path);
    if (ggufs.size() == 1) return load_gguf(ggufs.front(), field);
    if (ggufs.size() > 1)
      throw InputError(std::string(field),
                       fmt::format("folder {} has no config.json and {} .gguf files", quote(path), ggufs.size()),
                       fmt::format("give one of them, e.g. {}", quote(ggufs.front())));
    throw InputError(std::string(field), fmt::format("folder {} has no config.json", quote(path)),
                     "give the folder of a Hugging Face checkpoint, or the config file itself");
  }

  spec::ModelSpec spec = spec::from_config_text(read_file(config, field), config.string());
  if (folder) {
    std::vector<spec::TensorInfo> tensors;
    for (const auto& file : safetensors_files(path, field)) {
      const std::string origin = file.string();
      const std::uint64_t size = file_size(file, field);
      const std::string head = read_prefix(file, 8, field);
      std::uint64_t header_len = 0;
      // The first 8 bytes are the header length, little-endian (safetensors format).
      for (std::size_t i = 0; i < head.size(); ++i)
        header_len |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[i])) << (8 * i);
      if (head.size() == 8 && header_len > kMaxSafetensorsHeader)
        throw InputError(origin, fmt::format("header length {} is over the 100 MB limit", header_len),
                         "the file is not a safetensors file, or is damaged");
      const std::string prefix = read_prefix(file, 8 + header_len, field);
      auto part = spec::parse_safetensors_header(prefix, size, origin);
      tensors.insert(tensors.end(), std::make_move_iterator(part.begin()),
                     std::make_move_iterator(part.end()));
    }
    if (!tensors.empty()) spec::apply_checkpoint(spec, tensors);
  }
  spec.name = path.string();
  spec.source = "config";
  return spec;
}

}  // namespace vramfit::cli
