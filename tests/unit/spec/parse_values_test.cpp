// Tests of parse_param_count and parse_size: exact values and exact errors.
#include <string>

#include <catch2/catch.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {
Diagnostic count_error(const std::string& text) {
  try {
    (void)parse_param_count(text);
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    return e.diagnostics()[0];
  }
  FAIL("no error for '" << text << "'");
  return {};
}

Diagnostic size_error(const std::string& text, const std::string& field = "--budget") {
  try {
    (void)parse_size(text, field);
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    return e.diagnostics()[0];
  }
  FAIL("no error for '" << text << "'");
  return {};
}
}  // namespace

TEST_CASE("parse_param_count: accepted spellings", "[spec]") {
  CHECK(parse_param_count("7e9") == 7000000000ULL);
  CHECK(parse_param_count("7E9") == 7000000000ULL);
  CHECK(parse_param_count("7B") == 7000000000ULL);
  CHECK(parse_param_count("7b") == 7000000000ULL);
  CHECK(parse_param_count("1.5b") == 1500000000ULL);
  CHECK(parse_param_count("350M") == 350000000ULL);
  CHECK(parse_param_count("124m") == 124000000ULL);
  CHECK(parse_param_count("70k") == 70000ULL);
  CHECK(parse_param_count("7000000000") == 7000000000ULL);
  CHECK(parse_param_count("1.2T") == 1200000000000ULL);
  CHECK(parse_param_count(" 8.03B ") == 8030000000ULL);
  CHECK(parse_param_count("7 B") == 7000000000ULL);
  CHECK(parse_param_count("1.5e9") == 1500000000ULL);
  CHECK(parse_param_count("0.5B") == 500000000ULL);
  CHECK(parse_param_count("1e15") == 1000000000000000ULL);  // the limit itself
  CHECK(parse_param_count("8030261248") == 8030261248ULL);
}

TEST_CASE("parse_param_count: rejected inputs", "[spec]") {
  CHECK(count_error("").str() ==
        "--params: no parameter count given (write it like 7e9, 7B, 1.5b, 350M, 70k or 7000000000)");
  CHECK(count_error("abc").str() ==
        "--params: 'abc' is not a parameter count (write it like 7e9, 7B, 1.5b, 350M, 70k or 7000000000)");
  CHECK(count_error("7GB").str() ==
        "--params: '7GB' is a memory size, not a parameter count (give the number of "
        "parameters, like 7B or 7e9; memory sizes go in --budget)");
  CHECK(count_error("7GiB").problem == "'7GiB' is a memory size, not a parameter count");
  CHECK(count_error("-7e9").problem == "'-7e9' is negative: the count must be positive");
  CHECK(count_error("0").problem == "'0' parameters: the count must be positive");
  CHECK(count_error("0.0B").problem == "'0.0B' parameters: the count must be positive");
  CHECK(count_error("nan").problem == "'nan' is not a parameter count");
  CHECK(count_error("inf").problem == "'inf' is not a parameter count");
  CHECK(count_error("1e20").str() ==
        "--params: too large: 1e20 parameters (the largest models have about 2e12) "
        "(check the exponent and the suffix: 7e9 and 7B are 7 billion)");
  CHECK(count_error("1000000000000001").problem ==
        "too large: 1000000000000001 parameters (the largest models have about 2e12)");
  CHECK(count_error("1e999999999").problem ==
        "too large: 1e999999999 parameters (the largest models have about 2e12)");
  CHECK(count_error("7.5").str() ==
        "--params: '7.5' is not a whole number of parameters (give a whole count, like 7500000000 or 7.5B)");
  CHECK(count_error("1e-3").problem == "'1e-3' is not a whole number of parameters");
  CHECK(count_error("7x").problem == "'7x' is not a parameter count");
  CHECK(count_error("7e").problem == "'7e' is not a parameter count");
  CHECK(count_error(".").problem == "'.' is not a parameter count");
  // The field is the caller's.
  try {
    (void)parse_param_count("x", "presets[3].params");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.diagnostics()[0].field == "presets[3].params");
  }
}

TEST_CASE("parse_size: exact bytes", "[spec]") {
  CHECK(parse_size("24GiB").value() == 25769803776ULL);
  CHECK(parse_size("24gib").value() == 25769803776ULL);
  CHECK(parse_size("24 GiB").value() == 25769803776ULL);
  CHECK(parse_size("80GB").value() == 80000000000ULL);
  CHECK(parse_size("80gb").value() == 80000000000ULL);
  CHECK(parse_size("81920MiB").value() == 85899345920ULL);
  CHECK(parse_size("1.5TB").value() == 1500000000000ULL);
  CHECK(parse_size("512KB").value() == 512000ULL);
  CHECK(parse_size("512KiB").value() == 524288ULL);
  CHECK(parse_size("1048576").value() == 1048576ULL);
  CHECK(parse_size("1048576B").value() == 1048576ULL);
  CHECK(parse_size("1TiB").value() == 1099511627776ULL);
  CHECK(parse_size("1.5GiB").value() == 1610612736ULL);
  CHECK(parse_size("1.1GiB").value() == 1181116006ULL);  // 1181116006.4, to the nearest byte
  CHECK(parse_size("0.1GB").value() == 100000000ULL);
  CHECK(parse_size("8e10").value() == 80000000000ULL);
  CHECK(parse_size("18446744073709551615").value() == 18446744073709551615ULL);
  CHECK(parse_size(" 141 GB ").value() == 141000000000ULL);
}

TEST_CASE("parse_size: rejected inputs", "[spec]") {
  CHECK(size_error("16G").str() ==
        "--budget: '16G' is ambiguous (write 16GB (powers of 10) or 16GiB (powers of 2))");
  CHECK(size_error("16g").fix == "write 16GB (powers of 10) or 16GiB (powers of 2)");
  CHECK(size_error("1.5 m").fix == "write 1.5MB (powers of 10) or 1.5MiB (powers of 2)");
  CHECK(size_error("").str() ==
        "--budget: no size given (write it like 24GiB, 80GB, 81920MiB, 1.5TB or a number of bytes)");
  CHECK(size_error("abc").problem == "'abc' is not a memory size");
  CHECK(size_error("nan").problem == "'nan' is not a memory size");
  CHECK(size_error("inf").problem == "'inf' is not a memory size");
  CHECK(size_error("24 gigs").problem == "'24 gigs' is not a memory size");
  CHECK(size_error("0").problem == "'0' is zero bytes: a size must be positive");
  CHECK(size_error("0GiB").problem == "'0GiB' is zero bytes: a size must be positive");
  CHECK(size_error("0.0000000001B").problem == "'0.0000000001B' is zero bytes: a size must be positive");
  CHECK(size_error("-1GB").problem == "'-1GB' is negative: a size must be positive");
  CHECK(size_error("1e30GB").str() ==
        "--budget: too large: 1e30GB does not fit in 64 bits (16 EiB) (check the number and the unit)");
  CHECK(size_error("18446744073709551616").problem ==
        "too large: 18446744073709551616 does not fit in 64 bits (16 EiB)");
  CHECK(size_error("16384PiB").problem == "too large: 16384PiB does not fit in 64 bits (16 EiB)");
  CHECK(size_error("x", "--gpu-memory").field == "--gpu-memory");
}
