#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "vramfit/spec/model_spec.hpp"

namespace vramfit::cli {

/// The most a text input is read: configs, catalogs and indexes are kilobytes, logs and truth
/// files megabytes. Past it (a wrong file, /dev/zero) reading stops with an error.
inline constexpr std::uint64_t kMaxConfigFile = 64ULL << 20;
inline constexpr std::uint64_t kMaxLogFile = 1ULL << 30;

/// The whole text of a file, at most `max_bytes`. Throws InputError naming `field` when it is
/// missing, is a folder, cannot be read, or is longer.
std::string read_file(const std::filesystem::path& path, std::string_view field,
                      std::uint64_t max_bytes = kMaxConfigFile);

/// Up to `max_bytes` first bytes of a file (fewer when the file is shorter); same errors.
std::string read_prefix(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view field);

/// The files of a catalog folder (gpus.json and models/*.json), keyed as Catalog::parse
/// expects: "gpus.json", "models/<id>.json". Throws InputError naming `field` when the
/// folder or gpus.json is missing.
std::map<std::string, std::string> read_data_dir(const std::filesystem::path& dir, std::string_view field);

/// Builds a spec from `--config PATH`: a config.json (any file name), or a folder holding
/// config.json. In a folder, safetensors headers (model.safetensors, the shards listed in
/// model.safetensors.index.json, or any *.safetensors) give the exact parameter count and
/// checkpoint dtype; only their first 8 + header-length bytes are read. A `.gguf` file, or a
/// folder holding exactly one `.gguf` file and no config.json, gives a spec from the GGUF
/// header (its first spec::kGgufMaxHeader = 64 MiB at most are read).
/// Throws InputError naming `field` (or the file) on every problem.
spec::ModelSpec load_config(const std::filesystem::path& path, std::string_view field = "--config");

}  // namespace vramfit::cli
