#pragma once

// Internal to src/cli: what the Hub client (hub_http.cpp) reads from the Hub's responses, as
// pure functions (no network), so that tests/fuzz/hub_fuzz.cpp can feed them any bytes.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/cli/hub_cache.hpp"
#include "vramfit/cli/hub_http.hpp"

namespace vramfit::cli::hub {

/// The response headers the client reads (huggingface_hub's hf_raise_for_status reads
/// X-Error-Code; a range request's answer carries the file size in Content-Range).
struct ResponseHeaders {
  std::string error_code;     ///< X-Error-Code, at most 64 bytes
  std::string content_range;  ///< Content-Range, at most 128 bytes
};

/// One header line as libcurl hands it over (with its CR LF). A status line ("HTTP/...") starts
/// a new response (after a redirect), whose headers replace those read so far; names are
/// matched in any case, the value's leading spaces dropped.
void read_header_line(std::string_view line, ResponseHeaders& h);

/// The file size a 206 response's Content-Range gives ("bytes 0-131071/4976698672" ->
/// 4976698672): nullopt unless it starts "bytes 0-" and ends in '/' and 1 to 19 digits.
[[nodiscard]] std::optional<std::uint64_t> content_range_size(std::string_view content_range);

/// A shard name from the index: a relative file name ending in .safetensors, at most 255 bytes,
/// without control characters, '\' or an empty, '.' or '..' part.
[[nodiscard]] bool plain_shard_name(std::string_view s);

/// The shard names of a safetensors index's weight_map, sorted and once each (at most 4096).
/// Throws InputError naming `origin` (and the tensor) for anything else.
[[nodiscard]] std::vector<std::string> shards_of_index(const std::string& text, const std::string& origin);

/// Throws the InputError naming `field` that a failed response for `file` means: a gated repo,
/// a revision or file not found, a missing or private repo (401, 403, RepoNotFound), else the
/// HTTP status; each with its fix.
[[noreturn]] void throw_response_error(long status, std::string_view error_code, const HubId& id,
                                       const HubEndpoint& endpoint, std::string_view file, const std::string& field);

}  // namespace vramfit::cli::hub
