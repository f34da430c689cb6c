#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::cli {

/// The most a text input is read: configs, catalogs and indexes are kilobytes (the largest
/// Hugging Face config.json files, with thousands of labels, about 1 MB), logs and truth files
/// megabytes. Past it (a wrong file) reading stops with an error. Standard input has no size
/// to check up front, so its bound is lower: a log piped in is held whole.
inline constexpr std::uint64_t kMaxConfigFile = 16ULL << 20;
inline constexpr std::uint64_t kMaxLogFile = 1ULL << 30;
inline constexpr std::uint64_t kMaxStdinLog = 64ULL << 20;

/// The whole text of a regular file, at most `max_bytes`, read in 64 KiB chunks. The type is
/// checked before opening and the open does not block: a folder, a FIFO, a socket or a device
/// (/dev/zero) is refused without waiting or reading. Throws InputError naming `field` when the
/// file is missing, is not a regular file, cannot be read, or is longer than `max_bytes`.
std::string read_file(const std::filesystem::path& path, std::string_view field,
                      std::uint64_t max_bytes = kMaxConfigFile);

/// Up to `max_bytes` first bytes of a file (fewer when the file is shorter); same errors.
std::string read_prefix(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view field);

/// All of `in`, read in 64 KiB chunks; throws InputError naming `field`, with `fix`, once it
/// passes `max_bytes` (a stream that never ends, `< /dev/zero`) or fails.
std::string read_stream(std::istream& in, std::uint64_t max_bytes, std::string_view field, std::string_view fix);

/// Why the file descriptor `fd` (standard input) is no text to read, or empty: a folder, or a
/// device that is not a terminal (/dev/zero, /dev/urandom never end).
std::string stdin_problem(int fd);

/// The files of a catalog folder (gpus.json and models/*.json), keyed as Catalog::parse
/// expects: "gpus.json", "models/<id>.json". Throws InputError naming `field` when the
/// folder or gpus.json is missing.
std::map<std::string, std::string> read_data_dir(const std::filesystem::path& dir, std::string_view field);

/// safetensors refuses headers over 100 MB (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

/// The header length in a safetensors file's first 8 bytes (little-endian u64). Throws
/// InputError naming `origin` when it is over kMaxSafetensorsHeader.
std::uint64_t safetensors_header_length(std::string_view first8, const std::string& origin);

/// One safetensors file's head, read from a folder or fetched from the Hub: where it came from,
/// the file's size and its first 8 + header-length bytes.
struct SafetensorsHead {
  std::string origin;
  std::uint64_t file_size = 0;
  std::string prefix;
};

/// A checkpoint's spec from config.json's text (`config_origin` names it) and its safetensors
/// heads. With no heads the config alone decides (an unknown model_type is refused); with heads
/// their tensors give the exact count, and an unknown model_type is laid out from them.
/// `where` names the checkpoint in messages. Throws InputError naming `field`.
spec::ModelSpec spec_from_checkpoint(std::string_view config_text, const std::string& config_origin,
                                     const std::vector<SafetensorsHead>& heads, std::string_view field,
                                     const std::string& where);

/// One GGUF file's header, read as far as it goes: its first MiB, then more while the header
/// runs on (a tokenizer's vocabulary), spec::kGgufMaxHeader at most. Throws InputError naming
/// `field` or the file, as parse_gguf_header.
spec::GgufHeader read_gguf_header(const std::filesystem::path& file, std::string_view field);

/// A GGUF file's header, or a split GGUF's (llama.cpp's gguf-split: split.count files named
/// <prefix>-0000k-of-0000n.gguf, any of which may be given): the first file's metadata with every
/// file's tensors, each marked with its file (GgufTensor::file). `origin` is the path given.
/// Throws InputError naming `field` when a file is missing, unreadable or not of the same split.
spec::GgufHeader read_gguf(const std::filesystem::path& file, std::string_view field);

/// Builds a spec from `--config PATH`: a config.json (any file name), or a folder holding
/// config.json. In a folder, safetensors headers (model.safetensors, the shards listed in
/// model.safetensors.index.json, or any *.safetensors) give the exact parameter count and
/// checkpoint dtype; only their first 8 + header-length bytes are read. A `.gguf` file, or a
/// folder holding exactly one `.gguf` file and no config.json, gives a spec from the GGUF
/// header (read_gguf_header: its first spec::kGgufMaxHeader = 64 MiB at most are read).
/// Throws InputError naming `field` (or the file) on every problem.
spec::ModelSpec load_config(const std::filesystem::path& path, std::string_view field = "--config");

}  // namespace vramfit::cli
