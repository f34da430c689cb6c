// core/json: the one bounded parser and printer of JSON values (issue #14: deep nesting, NUL
// bytes, megabyte values quoted in messages).
#include <catch2/catch.hpp>

#include <string>

#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"

using nlohmann::json;
using vramfit::InputError;
using vramfit::json_excerpt;
using vramfit::json_shape_problem;
using vramfit::kMaxJsonDepth;
using vramfit::parse_json;
using vramfit::text_excerpt;
using vramfit::try_parse_json;

namespace {
std::string nested(std::size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

std::string error_of(std::string_view text) {
  try {
    (void)parse_json(text, "f.json", "fix it");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("json_shape_problem: depth 64 passes, 65 is refused with the offset", "[json]") {
  CHECK(json_shape_problem(nested(kMaxJsonDepth)).empty());
  CHECK(json_shape_problem(nested(kMaxJsonDepth + 1)) ==
        "nests arrays and objects deeper than 64 levels (at offset 64)");
  CHECK(json_shape_problem(nested(100000, '{', '}')) ==
        "nests arrays and objects deeper than 64 levels (at offset 64)");
  // Brackets inside strings (and escaped quotes inside them) do not count.
  CHECK(json_shape_problem("{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}").empty());
  // Siblings do not add up: 1000 arrays one after the other are one level deep.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i) siblings += i ? ",[]" : "[]";
  CHECK(json_shape_problem(siblings + "]").empty());
}

TEST_CASE("json_shape_problem: a NUL byte is refused, not taken as the end of the document", "[json]") {
  using namespace std::string_literals;
  CHECK(json_shape_problem("{}\0{\"x\": 1}"s) == "holds a NUL byte at offset 2, which JSON does not allow");
  CHECK(json_shape_problem("{\"a\": \"x\0\"}"s) == "holds a NUL byte at offset 8, which JSON does not allow");
}

TEST_CASE("json_shape_problem: more than 2^20 values are refused before parsing", "[json]") {
  std::string many = "[0";
  for (std::size_t i = 1; i < vramfit::kMaxJsonValues; ++i) many += ",0";
  CHECK(json_shape_problem(many + "]").empty());  // 2^20 values: the limit itself
  CHECK(json_shape_problem(many + ",0]") == "holds more than 1048576 values (at offset 2097152); no real file has that many");
  // Commas inside strings are text.
  CHECK(json_shape_problem("[\"" + std::string(3'000'000, ',') + "\"]").empty());
}

TEST_CASE("parse_json: names the field, the problem and the fix", "[json]") {
  CHECK(error_of(nested(100000)) ==
        "f.json: nests arrays and objects deeper than 64 levels (at offset 64) (fix it)");
  CHECK(error_of("{\"a\": 1,}") ==
        "f.json: not valid JSON: parse error at line 1, column 9: syntax error while parsing object key - "
        "unexpected '}'; expected string literal (fix it)");
  CHECK(error_of("[1e400]") ==
        "f.json: not valid JSON: number overflow parsing '1e400' (fix it)");
  // nlohmann quotes the whole token it stopped at: a 10 MB unterminated string stays short.
  const std::string msg = error_of("\"" + std::string(10'000'000, 'a'));
  CHECK(msg.size() < 260);
  CHECK(parse_json(nested(kMaxJsonDepth), "f", "x").is_array());
  CHECK(try_parse_json(nested(kMaxJsonDepth + 1)) == std::nullopt);
  CHECK(try_parse_json("{\"a\": ") == std::nullopt);
  CHECK(try_parse_json("{\"a\": 1}")->at("a") == 1);
}

TEST_CASE("json_excerpt: bounded whatever the value's size, escaped, depth-limited", "[json]") {
  CHECK(json_excerpt(json::parse(R"({"a":[1,2.5,"x"],"b":null,"c":true})")) == R"({"a":[1,2.5,"x"],"b":null,"c":true})");
  CHECK(json_excerpt(json(std::string(10'000'000, 'a'))) == "\"" + std::string(36, 'a') + "...");
  CHECK(json_excerpt(json(std::string("caf\xc3\xa9 \"q\"\n"))) == R"("caf\xc3\xa9 \"q\"\u000a")");
  json big = json::array();
  for (int i = 0; i < 1'000'000; ++i) big.push_back(i);
  CHECK(json_excerpt(big) == "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,1...");
  CHECK(json_excerpt(json(1), 3) == "1");
  // A value built in code (not parsed) may nest deeper: the excerpt still stops at 64 levels.
  json deep = json::array();
  for (int i = 0; i < 200; ++i) deep = json::array({std::move(deep)});
  CHECK(json_excerpt(deep, 1000) == std::string(64, '[') + "[...]" + std::string(64, ']'));
}

TEST_CASE("text_excerpt: printable and at most 80 bytes by default", "[json]") {
  CHECK(text_excerpt("h100") == "h100");
  CHECK(text_excerpt(std::string(10'000'000, 'x')) == std::string(77, 'x') + "...");
  CHECK(text_excerpt("\xff") == "\\xff");
}
