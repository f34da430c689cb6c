#include "vramfit/render/format.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace vramfit;
using namespace vramfit::render;

TEST_CASE("format_bytes picks a unit and rounds exactly", "[render]") {
  CHECK(format_bytes(Bytes{0}) == "0 B");
  CHECK(format_bytes(Bytes{1}) == "1 B");
  CHECK(format_bytes(Bytes{1023}) == "1023 B");
  CHECK(format_bytes(Bytes{1024}) == "1.00 KiB");
  CHECK(format_bytes(Bytes{1536}) == "1.50 KiB");
  CHECK(format_bytes(Bytes{1029}) == "1.00 KiB");        // 1.0048...
  CHECK(format_bytes(Bytes{1030}) == "1.01 KiB");        // 1.0058... rounds half up
  CHECK(format_bytes(MiB(1) - Bytes{1}) == "1.00 MiB");  // 1023.999 KiB rounds into the next unit
  CHECK(format_bytes(MiB(700)) == "700.00 MiB");
  CHECK(format_bytes(GiB(1)) == "1.00 GiB");
  // Llama 3.1 8B in bf16: 8,030,261,248 parameters x 2 bytes.
  CHECK(format_bytes(Bytes{16060522496ULL}) == "14.96 GiB");
  CHECK(format_bytes(Bytes{85520809984ULL}) == "79.65 GiB");
  CHECK(format_bytes(GiB(1024)) == "1.00 TiB");
  CHECK(format_bytes(GiB(1024) * 2048) == "2048.00 TiB");  // TiB is the largest unit
  CHECK(format_bytes(Bytes{std::numeric_limits<std::uint64_t>::max()}) == "16777216.00 TiB");
}

TEST_CASE("format_signed_bytes", "[render]") {
  CHECK(format_signed_bytes(0) == "0 B");
  CHECK(format_signed_bytes(1536) == "1.50 KiB");
  CHECK(format_signed_bytes(-1536) == "-1.50 KiB");
  CHECK(format_signed_bytes(std::numeric_limits<std::int64_t>::min()) == "-8388608.00 TiB");
}

TEST_CASE("format_count and format_params", "[render]") {
  CHECK(format_count(0) == "0");
  CHECK(format_count(999) == "999");
  CHECK(format_count(1000) == "1,000");
  CHECK(format_count(8030261248ULL) == "8,030,261,248");
  CHECK(format_params(0) == "0");
  CHECK(format_params(999) == "999");
  CHECK(format_params(1000) == "1.00K");
  CHECK(format_params(124439808) == "124M");
  CHECK(format_params(134515008) == "135M");
  CHECK(format_params(1543714304) == "1.54B");
  CHECK(format_params(8030261248ULL) == "8.03B");
  CHECK(format_params(70553706496ULL) == "70.6B");
  CHECK(format_params(405853388800ULL) == "406B");
  CHECK(format_params(999600000) == "1.00B");  // not "1000M"
  CHECK(format_params(9996000000ULL) == "10.0B");
  CHECK(format_params(1500000000000ULL) == "1.50T");
}

TEST_CASE("format_share", "[render]") {
  CHECK(format_share(Bytes{1}, Bytes{3}) == "33.3%");
  CHECK(format_share(Bytes{3}, Bytes{3}) == "100.0%");
  CHECK(format_share(Bytes{0}, Bytes{3}) == "0.0%");
  CHECK(format_share(Bytes{1}, Bytes{0}) == "-");
}

TEST_CASE("table aligns columns without trailing spaces", "[render]") {
  CHECK(table({{"a", "1", "x"}, {"long", "1000", ""}}, {Align::left, Align::right}) ==
        "a        1  x\n"
        "long  1000\n");
  CHECK(table({{"a", "b"}}, {}, "  ") == "  a  b\n");
  CHECK(table({}, {}).empty());
}
