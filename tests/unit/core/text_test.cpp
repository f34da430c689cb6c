// core/text: the small helpers every module shares.
#include "vramfit/core/text.hpp"

#include <catch2/catch.hpp>

using namespace vramfit;

TEST_CASE("trim, lower, joined, quoted_list", "[core][text]") {
  CHECK(trim("  24GiB \t\n") == "24GiB");
  CHECK(trim(" \t ").empty());
  CHECK(trim("a b") == "a b");
  CHECK(lower("H100-80GB_Sxm") == "h100-80gb_sxm");
  CHECK(lower("\xC3\x89") == "\xC3\x89");  // bytes outside ASCII are kept
  CHECK(joined({}).empty());
  CHECK(joined({"a", "b", "c"}) == "a, b, c");
  CHECK(joined({"a", "b"}, " | ") == "a | b");
  CHECK(quoted_list({}).empty());
  CHECK(quoted_list({"a"}) == "'a'");
  CHECK(quoted_list({"a", "b"}) == "'a' or 'b'");
  CHECK(quoted_list({"a", "b", "c"}) == "'a', 'b' or 'c'");
}

TEST_CASE("upper, iequals, is_digit", "[core][text]") {
  CHECK(upper("q4_k_m") == "Q4_K_M");
  CHECK(upper("\xC3\xA9x") == "\xC3\xA9X");  // bytes outside ASCII are kept
  CHECK(iequals("Q4_K_M", "q4_k_M"));
  CHECK_FALSE(iequals("Q4_K", "Q4_K_M"));
  CHECK_FALSE(iequals("Q4_0", "Q4_1"));
  CHECK(iequals("", ""));
  CHECK(is_digit('0'));
  CHECK(is_digit('9'));
  CHECK_FALSE(is_digit('a'));
  CHECK_FALSE(is_digit('\xB2'));  // superscript two in Latin-1: not an ASCII digit
  static_assert(is_digit('5'));
}

TEST_CASE("edit_distance counts an adjacent swap as one edit", "[core][text]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("adamw", "adamw-8bit") == 5);
  CHECK(edit_distance("quantise", "quantize") == 1);
  CHECK(edit_distance("h100", "h010") == 1);
}

TEST_CASE("did_you_mean_fix: one message for every unknown name", "[core][text]") {
  const std::vector<std::string> known{"zero1", "zero2", "zero3", "fsdp", "ddp"};
  CHECK(did_you_mean_fix("zero4", known, "one of the list", "no match") ==
        "did you mean 'zero1', 'zero2' or 'zero3'? one of the list");
  CHECK(did_you_mean_fix("FSDP", known, "", "no match") == "did you mean 'fsdp'?");
  CHECK(did_you_mean_fix("megatron", known, "one of the list", "no match") == "no match");
  CHECK(did_you_mean_fix("", known, "then", "otherwise") == "otherwise");
  CHECK(did_you_mean_fix(std::string(300, 'z'), known, "then", "otherwise") == "otherwise");
}
