// Bounded JSON reading and quoting: every JSON document vramfit reads (config.json, safetensors
// headers, the catalog, presets, truth lines, checkpoint indexes) is parsed here, and every parsed
// value quoted in a message is printed here.
#include "vramfit/core/json.hpp"

#include <fmt/format.h>

#include "vramfit/core/error.hpp"

namespace vramfit {

using nlohmann::json;

std::string json_shape_problem(std::string_view text) {
  // One pass: track strings (with their escapes) so brackets inside them do not count. On
  // invalid JSON the count may differ from nlohmann's, but nlohmann stops at the first error
  // and builds no deeper than the brackets seen before it, which this pass has counted.
  std::size_t depth = 0;
  std::size_t values = 0;  // containers and commas: every value but the first of each container
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') return fmt::format("holds a NUL byte at offset {}, which JSON does not allow", i);
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return fmt::format("nests arrays and objects deeper than {} levels (at offset {})", kMaxJsonDepth, i);
      ++values;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',') {
      ++values;
    }
    if (values > kMaxJsonValues)
      return fmt::format("holds more than {} values (at offset {}); no real file has that many", kMaxJsonValues, i);
  }
  return {};
}

namespace {

/// nlohmann's message without its "[json.exception.parse_error.101] " tag, printable and short:
/// its "last read: '...'" quotes the whole token, which may be megabytes long.
std::string short_reason(const json::exception& e) {
  std::string msg = e.what();
  if (const auto p = msg.find("] "); p != std::string::npos && msg.rfind("[json.exception", 0) == 0)
    msg = msg.substr(p + 2);
  if (msg.size() > 160) msg = msg.substr(0, 157) + "...";
  return printable(msg);
}

void append_string(std::string& out, const std::string& s, std::size_t limit) {
  out += '"';
  for (const char c : s) {
    if (out.size() > limit) return;
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else if (u >= 0x80) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
}

/// Appends `v` to `out` until `out` passes `limit` bytes; `depth` levels are left to walk.
void append_value(std::string& out, const json& v, std::size_t limit, std::size_t depth) {
  if (out.size() > limit) return;
  switch (v.type()) {
    case json::value_t::object: {
      if (depth == 0) {
        out += "{...}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        append_string(out, it.key(), limit);
        out += ':';
        append_value(out, it.value(), limit, depth - 1);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      if (depth == 0) {
        out += "[...]";
        return;
      }
      out += '[';
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        append_value(out, *it, limit, depth - 1);
      }
      out += ']';
      return;
    }
    case json::value_t::string: append_string(out, v.get_ref<const std::string&>(), limit); return;
    default: out += v.dump(); return;  // a scalar: a few bytes, no recursion
  }
}

}  // namespace

json parse_json(std::string_view text, const std::string& field, const std::string& fix,
                std::string_view problem_prefix) {
  if (const std::string p = json_shape_problem(text); !p.empty()) throw InputError(field, p, fix);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range.406 for 1e999
    throw InputError(field, std::string(problem_prefix) + short_reason(e), fix);
  }
}

std::optional<json> try_parse_json(std::string_view text) {
  if (!json_shape_problem(text).empty()) return std::nullopt;
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string json_excerpt(const json& v, std::size_t max_chars) {
  std::string out;
  append_value(out, v, max_chars, kMaxJsonDepth);
  if (out.size() > max_chars) out = out.substr(0, max_chars < 3 ? 0 : max_chars - 3) + "...";
  return out;
}

std::string text_excerpt(std::string_view s, std::size_t max_chars) {
  if (s.size() <= max_chars) return printable(s);
  return printable(s.substr(0, max_chars < 3 ? 0 : max_chars - 3)) + "...";
}

std::string_view json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::null: return "null";
    case json::value_t::number_float: return "a number with a fraction";
    default: return "a number";
  }
}

}  // namespace vramfit
