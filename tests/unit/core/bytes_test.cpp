// core/bytes: checked arithmetic, rounding and bit packing, with exact values.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"

using namespace vramfit;

namespace {
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::string overflow_of(void (*f)()) {
  try {
    f();
  } catch (const InputError& e) {
    return e.diagnostics().front().str();
  }
  return "no error";
}
}  // namespace

TEST_CASE("Bytes: units and arithmetic", "[core]") {
  CHECK(KiB(1).value() == 1024);
  CHECK(MiB(3).value() == 3145728);
  CHECK(GiB(80).value() == 85899345920ULL);
  CHECK((GiB(1) + MiB(512)).value() == 1610612736);
  CHECK((GiB(1) - MiB(512)).value() == 536870912);
  CHECK((MiB(2) * 3).value() == 6291456);
  CHECK((3 * MiB(2)).value() == 6291456);
  Bytes b{10};
  b += Bytes{5};
  b -= Bytes{3};
  CHECK(b.value() == 12);
  CHECK(Bytes::saturating_sub(Bytes{3}, Bytes{5}) == Bytes{0});
  CHECK(Bytes::saturating_sub(Bytes{5}, Bytes{3}) == Bytes{2});
  CHECK(Bytes{1} < Bytes{2});
  CHECK(Bytes{} == Bytes{0});
}

TEST_CASE("Bytes: overflow is an input error, going below zero a bug", "[core]") {
  const std::string fix =
      "size: the size overflows 64 bits (over 16 EiB) (use realistic sizes: parameters, batch and sequence "
      "length are far too large)";
  CHECK(overflow_of([] { (void)(Bytes{kMax} + Bytes{1}); }) == fix);
  CHECK(overflow_of([] { (void)(Bytes{kMax / 2 + 1} * 2); }) == fix);
  CHECK_NOTHROW(Bytes{kMax / 2} * 2);
  CHECK_THROWS_AS(Bytes{1} - Bytes{2}, std::logic_error);
  CHECK(checked_mul(1ULL << 32, 1ULL << 31) == 1ULL << 63);
  CHECK(checked_add(kMax - 1, 1) == kMax);
  try {
    (void)checked_mul(1ULL << 32, 1ULL << 32, "--batch");
    FAIL("no overflow");
  } catch (const InputError& e) {
    CHECK(e.diagnostics().front().field == "--batch");
  }
  CHECK_THROWS_AS(checked_add(kMax, 1), InputError);
}

TEST_CASE("Bytes: round_up and bytes_of_bits", "[core]") {
  CHECK(Bytes{0}.round_up(512) == Bytes{0});
  CHECK(Bytes{1}.round_up(512) == Bytes{512});
  CHECK(Bytes{512}.round_up(512) == Bytes{512});
  CHECK(Bytes{513}.round_up(512) == Bytes{1024});
  CHECK(Bytes{2097153}.round_up(2097152) == Bytes{4194304});  // the allocator's 2 MiB segments
  CHECK_THROWS_AS(Bytes{1}.round_up(0), std::logic_error);
  CHECK_THROWS_AS(Bytes{kMax}.round_up(512), InputError);
  CHECK(bytes_of_bits(0, 4) == Bytes{0});
  CHECK(bytes_of_bits(1, 4) == Bytes{1});   // half a byte rounds up
  CHECK(bytes_of_bits(3, 4) == Bytes{2});
  CHECK(bytes_of_bits(4, 4) == Bytes{2});
  CHECK(bytes_of_bits(3, 3) == Bytes{2});   // 9 bits
  CHECK(bytes_of_bits(1000, 16) == Bytes{2000});
  CHECK_THROWS_AS(bytes_of_bits(kMax, 2), InputError);
}
