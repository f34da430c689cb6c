#pragma once

// The bodies of the fuzz targets, shared by the libFuzzer binaries (tests/fuzz/*_fuzz.cpp, one
// line each) and the replay test (tests/regress/fuzz_replay_test.cpp), which feeds them every
// file of tests/fuzz/corpus/<name>/ and tests/fuzz/crashes/<name>/.
//
// Contract of every entry function: any bytes are fine. An InputError is the expected answer to
// bad input and is caught inside. Anything else escapes: another exception (InvariantBroken
// when a successful result is absurd: a zero size, a parameter total that disagrees with its
// parts, exit code 3), a crash, or a sanitizer report. Under libFuzzer an escaping exception
// aborts, which is a crash.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

namespace vramfit::fuzz {

/// A successful result broke an invariant of its parser.
class InvariantBroken : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

using Entry = int (*)(const std::uint8_t* data, std::size_t size);

/// spec::parse_size on the bytes; a result is never 0 and prints back to itself.
int fuzz_size(const std::uint8_t* data, std::size_t size);
/// spec::parse_param_count on the bytes; a result is in [1, 1e15] and prints back to itself.
int fuzz_params(const std::uint8_t* data, std::size_t size);
/// spec::from_config_text on the bytes; a spec's parts add up to its total, and the engine
/// estimates it (inference and training) without anything but InputError.
int fuzz_config(const std::uint8_t* data, std::size_t size);
/// spec::parse_safetensors_header. The bytes are a file's head: the 8-byte length N, N bytes of
/// header, then up to 8 bytes read as the data section's size (little-endian), so the file size
/// is 8 + N + that. Shorter inputs are a truncated file of exactly their size.
int fuzz_safetensors(const std::uint8_t* data, std::size_t size);
/// catalog::Catalog::parse. The bytes are NUL-separated parts: gpus.json, then files given as
/// "<path>\n<text>" (models/<id>.json). Lookups and the presets' configs are exercised too.
int fuzz_catalog(const std::uint8_t* data, std::size_t size);
/// cli::run. The bytes are NUL-separated arguments after "vramfit"; after an empty argument
/// (two NULs) the rest is standard input. It runs in a sandbox folder holding a catalog
/// (gpus.json, models/), config.json, a checkpoint folder (ckpt/), a log and a truth file;
/// arguments that could reach other files (a '/' or "..") are not run. An argument
/// "=NAME\nTEXT" is no argument: it writes TEXT to the sandbox's file NAME for this run (NAME:
/// letters, digits, '.', '_', '-', optionally under ckpt/ or models/; "\\0" in TEXT is a NUL
/// byte), so the files vary too; the sandbox is restored afterwards. Exit code 3 is a bug.
int fuzz_cli(const std::uint8_t* data, std::size_t size);
/// accuracy::parse_truth and truth_device_bytes on the bytes as a truth file (JSON lines); every
/// case parsed has a positive batch and sequence and an id and config, and re-parsing the same
/// bytes gives the same cases.
int fuzz_truth(const std::uint8_t* data, std::size_t size);
/// spec::parse_gguf_header on the bytes as a whole file and as the head of a larger one, then
/// spec_from_gguf and gguf_model_bytes on whatever parses.
int fuzz_gguf(const std::uint8_t* data, std::size_t size);
/// doctor::scan, diagnose, explain and both renderers, parse_torch_size: never throws.
int fuzz_oom(const std::uint8_t* data, std::size_t size);
/// The Hub client's response parsing (src/cli/hub_parse.hpp; no network): the bytes as header
/// lines (X-Error-Code, Content-Range), Content-Range's file size, a safetensors index's
/// weight_map, the error a failed response means, and the first line as a repo id
/// (cli::parse_hub_id). Header values stay within their bounds, a size is the digits it came
/// from, shard names are plain and sorted once each, every failure is an InputError.
int fuzz_hub(const std::uint8_t* data, std::size_t size);

struct Target {
  std::string_view name;  ///< tests/fuzz/<name>_fuzz.cpp, corpus/<name>/, crashes/<name>/
  Entry entry;
};

/// Every fuzz target; the replay test fails for a tests/fuzz/*_fuzz.cpp missing here.
inline constexpr Target kTargets[] = {
    {"size", fuzz_size},       {"params", fuzz_params},
    {"config", fuzz_config},   {"safetensors", fuzz_safetensors},
    {"catalog", fuzz_catalog}, {"cli", fuzz_cli},
    {"gguf", fuzz_gguf},       {"oom", fuzz_oom},
    {"truth", fuzz_truth},     {"hub", fuzz_hub},
};

}  // namespace vramfit::fuzz
