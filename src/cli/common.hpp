#pragma once

// Internal to src/cli: small helpers more than one file of the CLI layer needs, each once.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "vramfit/cli/hub_cache.hpp"

namespace vramfit::cli::util {

/// The environment variable `name`, empty when unset.
[[nodiscard]] std::string env(const char* name);

/// True when `s` holds an ASCII control character (below 0x20, or DEL).
[[nodiscard]] bool has_control(std::string_view s) noexcept;

/// `p` quoted for a message: "'/path/to/file'" (at most 200 characters of it).
[[nodiscard]] std::string quote(const std::filesystem::path& p);

/// True when every '/'-separated part of `s` is non-empty and neither "." nor ".." (a revision
/// under refs/, a shard name in a snapshot: nothing that climbs out of its folder).
[[nodiscard]] bool plain_path_parts(std::string_view s) noexcept;

/// The huggingface-cli command that downloads what vramfit reads of `id` (config.json and the
/// index): "huggingface-cli download org/name [--revision R] --include config.json '*.json'".
[[nodiscard]] std::string hub_download_command(const HubId& id);

/// A count typed with an exponent ("32e3", "1.5e3"): `whole` with its value when the form is an
/// exact whole number below 2^53 (where a double still holds every whole number), `too_large` above
/// that, `not_one` for anything else ("4096", "1e-3", "2.5e0", "inf", "2k"), left to the caller.
enum class ExponentForm { not_one, whole, too_large };
struct ExponentValue {
  ExponentForm status = ExponentForm::not_one;
  std::uint64_t value = 0;
};
[[nodiscard]] ExponentValue whole_from_exponent(const std::string& text);

}  // namespace vramfit::cli::util
