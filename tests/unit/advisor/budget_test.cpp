// Headroom parsing, margins and the fit rule of a Budget.
#include "vramfit/advisor/budget.hpp"

#include <limits>

#include "fixtures.hpp"

using namespace vramfit;
using namespace vramfit::advisor;
using advisor_test::error_of;

namespace {
const std::string kFix = " (give a percentage of the budget like 10% or a size like 2GiB)";
}

TEST_CASE("parse_headroom reads percentages exactly", "[advisor]") {
  const Headroom ten = parse_headroom("10%");
  CHECK(ten.is_percent);
  CHECK(ten.ppm == 100000);
  CHECK(ten.on(GiB(80)) == GiB(8));
  CHECK(ten.label() == "10%");

  const Headroom frac = parse_headroom(" 7.5 % ");
  CHECK(frac.ppm == 75000);
  CHECK(frac.label() == "7.5%");
  CHECK(frac.on(Bytes{1000}) == Bytes{75});

  const Headroom tiny = parse_headroom("0.0001%");
  CHECK(tiny.ppm == 1);
  CHECK(tiny.label() == "0.0001%");
  CHECK(tiny.on(Bytes{1}) == Bytes{1});  // rounded up: a margin errs on the safe side
  CHECK(tiny.on(Bytes{1000000}) == Bytes{1});
  CHECK(tiny.on(Bytes{1000001}) == Bytes{2});

  CHECK(parse_headroom("99.9999%").ppm == 999999);
  CHECK(parse_headroom("0%").on(GiB(80)) == Bytes{0});
  CHECK(parse_headroom("007%").ppm == 70000);
  CHECK(parse_headroom(".5%").ppm == 5000);
  // No overflow on huge memories: split by 10^6 before multiplying.
  CHECK(parse_headroom("50%").on(Bytes{~std::uint64_t{0}}) == Bytes{~std::uint64_t{0} / 2 + 1});
}

TEST_CASE("parse_headroom reads sizes and zero", "[advisor]") {
  const Headroom h = parse_headroom("2GiB");
  CHECK_FALSE(h.is_percent);
  CHECK(h.bytes == GiB(2));
  CHECK(h.on(GiB(80)) == GiB(2));
  CHECK(h.on(GiB(1)) == GiB(2));  // a fixed size may exceed a small card
  CHECK(parse_headroom("500MB").bytes == Bytes{500'000'000});
  CHECK(parse_headroom("0") == Headroom{});
  CHECK(parse_headroom("0.0") == Headroom{});
  CHECK(parse_headroom("0GiB") == Headroom{});
  CHECK(parse_headroom("0").label() == "0");
}

TEST_CASE("parse_headroom rejects bad values with the field and a fix", "[advisor]") {
  CHECK(error_of([] { parse_headroom(""); }) == "--headroom: is empty" + kFix);
  CHECK(error_of([] { parse_headroom("-5%"); }) == "--headroom: '-5%' is negative" + kFix);
  CHECK(error_of([] { parse_headroom("-1GiB"); }) == "--headroom: '-1GiB' is negative" + kFix);
  CHECK(error_of([] { parse_headroom("100%"); }) ==
        "--headroom: 100% is not below 100% of the budget" + kFix);
  CHECK(error_of([] { parse_headroom("150%"); }) ==
        "--headroom: 150% is not below 100% of the budget" + kFix);
  CHECK(error_of([] { parse_headroom("12345%"); }) ==
        "--headroom: 12345% is not below 100% of the budget" + kFix);
  CHECK(error_of([] { parse_headroom("nan%"); }) == "--headroom: 'nan%' is not a finite number" + kFix);
  CHECK(error_of([] { parse_headroom("NaN"); }) == "--headroom: 'NaN' is not a finite number" + kFix);
  CHECK(error_of([] { parse_headroom("inf"); }) == "--headroom: 'inf' is not a finite number" + kFix);
  CHECK(error_of([] { parse_headroom("abc%"); }) == "--headroom: 'abc%' is not a percentage" + kFix);
  CHECK(error_of([] { parse_headroom("1e1%"); }) == "--headroom: '1e1%' is not a percentage" + kFix);
  CHECK(error_of([] { parse_headroom("%"); }) == "--headroom: '%' is not a percentage" + kFix);
  CHECK(error_of([] { parse_headroom(".%"); }) == "--headroom: '.%' is not a percentage" + kFix);
  CHECK(error_of([] { parse_headroom("1.23456%"); }) ==
        "--headroom: '1.23456%' has more than 4 decimals" + kFix);
  CHECK(error_of([] { parse_headroom("-5%", "--margin"); }) == "--margin: '-5%' is negative" + kFix);
  // Sizes go through spec::parse_size, which names the same field.
  CHECK(error_of([] { parse_headroom("lots"); }).rfind("--headroom: ", 0) == 0);
  CHECK(error_of([] { parse_headroom("0xyz"); }).rfind("--headroom: ", 0) == 0);
}

TEST_CASE("Budget::fits keeps the margin free, boundary included", "[advisor]") {
  Budget b = budget_of(GiB(24), parse_headroom("10%"));
  CHECK(b.headroom_bytes() == Bytes{2576980378});  // ceil(24 GiB / 10)
  CHECK(b.gpu_bf16);
  CHECK(b.gpu_id.empty());
  const Bytes usable = GiB(24) - Bytes{2576980378};
  CHECK(b.fits(usable));
  CHECK_FALSE(b.fits(usable + Bytes{1}));
  CHECK(b.fits(Bytes{0}));

  b.headroom = Headroom{};
  CHECK(b.fits(GiB(24)));
  CHECK_FALSE(b.fits(GiB(24) + Bytes{1}));

  b.headroom = parse_headroom("30GiB");  // more than the budget: nothing fits
  CHECK_FALSE(b.fits(Bytes{0}));
}

TEST_CASE("Budget::verdict decides, spare and short_by say by how much", "[advisor]") {
  Budget b = budget_of(GiB(10));
  CHECK(b.verdict(GiB(10)) == Verdict::fits);
  CHECK(b.verdict(GiB(10) + Bytes{1}) == Verdict::does_not_fit);
  CHECK(name_of(Verdict::fits) == "fits");
  CHECK(name_of(Verdict::does_not_fit) == "does_not_fit");
  CHECK(b.spare(GiB(9)) == static_cast<std::int64_t>(GiB(1).value()));
  CHECK(b.spare(GiB(11)) == -static_cast<std::int64_t>(GiB(1).value()));
  CHECK(b.short_by(GiB(9)) == Bytes{0});
  CHECK(b.short_by(GiB(11)) == GiB(1));
  // The margin counts in the verdict and the shortfall, not in `spare` (what the GPU has left).
  b.headroom = parse_headroom("1GiB");
  CHECK(b.verdict(GiB(9)) == Verdict::fits);
  CHECK(b.verdict(GiB(9) + Bytes{1}) == Verdict::does_not_fit);
  CHECK(b.spare(GiB(9) + Bytes{1}) == static_cast<std::int64_t>(GiB(1).value()) - 1);
  CHECK(b.short_by(GiB(9) + Bytes{1}) == Bytes{1});
  // A fixed margin above the budget adds to the shortfall, saturated.
  b.headroom = parse_headroom("12GiB");
  CHECK(b.short_by(Bytes{0}) == GiB(2));
  CHECK(b.short_by(Bytes{std::numeric_limits<std::uint64_t>::max()}) ==
        Bytes{std::numeric_limits<std::uint64_t>::max()});
  // spare saturates at the int64 range.
  const Budget none = budget_of(Bytes{0});
  CHECK(none.spare(Bytes{std::numeric_limits<std::uint64_t>::max()}) == std::numeric_limits<std::int64_t>::min());
  const Budget all = budget_of(Bytes{std::numeric_limits<std::uint64_t>::max()});
  CHECK(all.spare(Bytes{0}) == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("budget_for_gpu takes the card's memory, bf16 and id", "[advisor]") {
  const auto& v100 = advisor_test::test_catalog().gpu("v100-32gb");
  const Budget b = budget_for_gpu(v100, parse_headroom("1GiB"));
  CHECK(b.bytes == Bytes{34089730048});
  CHECK_FALSE(b.gpu_bf16);
  CHECK(b.gpu_id == "v100-32gb");
  CHECK(b.headroom_bytes() == GiB(1));
}

TEST_CASE("check_budget refuses a margin that leaves nothing", "[advisor]") {
  CHECK_NOTHROW(check_budget(budget_of(GiB(24), parse_headroom("99%"))));
  CHECK(error_of([] { check_budget(budget_of(GiB(2), parse_headroom("2GiB"))); }) ==
        "--headroom: a margin of 2147483648 bytes leaves nothing of the budget (2147483648 bytes) (use a "
        "smaller "
        "margin or a larger budget)");
}

TEST_CASE("the three-way verdict: fits, tight, does not fit", "[advisor]") {
  Budget b = budget_of(GiB(10));
  CHECK(b.verdict(GiB(9), GiB(10)) == Verdict::fits);                 // the bound fits exactly
  CHECK(b.verdict(GiB(9), GiB(10) + Bytes{1}) == Verdict::tight);     // only the estimate fits
  CHECK(b.verdict(GiB(10), GiB(12)) == Verdict::tight);
  CHECK(b.verdict(GiB(10) + Bytes{1}, GiB(12)) == Verdict::does_not_fit);
  CHECK(b.verdict(GiB(9), GiB(1)) == Verdict::fits);                  // a bound under the estimate counts as it
  CHECK(name_of(Verdict::tight) == "tight");
  b.headroom = parse_headroom("1GiB");                                // the margin counts for the bound too
  CHECK(b.verdict(GiB(8), GiB(9)) == Verdict::fits);
  CHECK(b.verdict(GiB(8), GiB(9) + Bytes{1}) == Verdict::tight);
}
