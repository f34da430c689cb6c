#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace vramfit {

/// The deepest nesting of arrays and objects a JSON input may have. Real configs, safetensors
/// headers, catalogs and truth lines nest at most 4 levels; nlohmann's dump, copy and compare
/// recurse once a level, so an unbounded depth (100,000 levels in a 200 KB file) overflows the
/// stack. Every JSON document vramfit reads goes through parse_json, which refuses deeper ones.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// The most values (array elements, object members, nested containers) a JSON document may
/// hold. nlohmann keeps each in 16 bytes plus its container's overhead (about 100 bytes an object
/// member), so 14 MB of `0,0,...` take 270 MB once parsed; a config.json holds a few hundred
/// values, one with thousands of labels some 40,000, and a safetensors header 10 a tensor.
inline constexpr std::size_t kMaxJsonValues = std::size_t{1} << 20;

/// The longest excerpt of a value quoted in a message, in bytes (before the trailing "...").
inline constexpr std::size_t kJsonExcerptChars = 40;

/// Where a JSON document cannot be used: the problem, as one line without the field.
/// Empty when `text` is acceptable to parse: no NUL byte (a C string would end there, so the
/// rest would be silently dropped), no nesting deeper than kMaxJsonDepth and no more than
/// kMaxJsonValues values. Linear in the size.
std::string json_shape_problem(std::string_view text);

/// Parses `text` as one JSON document. Throws InputError naming `field`, with `fix`, when it
/// holds a NUL byte, nests deeper than kMaxJsonDepth, holds more than kMaxJsonValues values, or
/// is not valid JSON; the message quotes
/// nlohmann's position and reason (printable, at most 160 bytes), prefixed by `problem_prefix`
/// (e.g. "not valid JSON: ").
nlohmann::json parse_json(std::string_view text, const std::string& field, const std::string& fix,
                          std::string_view problem_prefix = "not valid JSON: ");

/// Like parse_json, without throwing: nullopt for anything parse_json refuses.
std::optional<nlohmann::json> try_parse_json(std::string_view text);

/// `v` as compact JSON text of at most `max_chars` bytes, ending in "..." when cut: the way
/// a value is quoted in a message. Walks at most kMaxJsonDepth levels (deeper ones print as
/// "[...]" or "{...}") and stops as soon as the excerpt is full, so a 10 MB value costs no
/// more than a short one. Bytes outside ASCII are written as \xNN (see printable()).
std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars = kJsonExcerptChars);

/// `s` (a name or id from a parsed file or a flag) for a message: printable (see printable()),
/// at most `max_chars` bytes, ending in "..." when cut.
std::string text_excerpt(std::string_view s, std::size_t max_chars = 2 * kJsonExcerptChars);

/// The kind of a value for a message: "a string", "an object", "a number with a fraction", ...
std::string_view json_kind(const nlohmann::json& v);

}  // namespace vramfit
