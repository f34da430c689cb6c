// The search for the largest batch or sequence length that fits.
#include "vramfit/advisor/fit.hpp"

#include "fixtures.hpp"

using namespace vramfit;
using namespace vramfit::advisor;
using namespace advisor_test;

namespace {

spec::Workload with(spec::Workload w, Dimension d, std::uint64_t v) {
  (d == Dimension::batch ? w.batch : w.seq) = v;
  return w;
}

/// The answer is the largest value that fits: it fits, and value + 1 does not (unless capped).
void check_largest(const spec::ModelSpec& m, const spec::Workload& w, const Budget& b, Dimension d) {
  const FitResult r = solve(m, w, b, d);
  INFO("dimension " << name_of(d) << ", value " << r.value);
  REQUIRE(r.fits_at_one);
  CHECK(r.value >= 1);
  CHECK(r.value <= search_cap(d));
  CHECK(b.fits(total_of(m, with(w, d, r.value))));
  if (r.capped)
    CHECK(r.value == search_cap(d));
  else
    CHECK_FALSE(b.fits(total_of(m, with(w, d, r.value + 1))));
  CHECK(r.estimate.device_total == total_of(m, with(w, d, r.value)));
  CHECK((d == Dimension::batch ? r.workload.batch : r.workload.seq) == r.value);
  // Doubling then bisection: about two engine calls per bit of the cap, at most.
  CHECK(r.estimates <= 2 * 24 + 2);
  CHECK(r.budget.bytes == b.bytes);
}

}  // namespace

TEST_CASE("solve finds the largest batch and seq that fit", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const Budget b = budget_for_gpu(test_catalog().gpu("h100-80gb"), parse_headroom("10%"));
  check_largest(m, w, b, Dimension::batch);
  check_largest(m, w, b, Dimension::seq);
  auto t = training(1);
  t.weights = DType::bf16;
  t.mode = spec::Mode::lora;
  check_largest(m, t, b, Dimension::batch);
  check_largest(m, t, b, Dimension::seq);
}

TEST_CASE("solve with a budget just above batch 3 returns 3 when 4 costs more", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const Bytes at3 = total_of(m, with(w, Dimension::batch, 3));
  const Bytes at4 = total_of(m, with(w, Dimension::batch, 4));
  const FitResult r = solve(m, w, budget_of(at3), Dimension::batch);
  if (at4 > at3) {
    CHECK(r.value == 3);
    CHECK_FALSE(r.capped);
  }
  CHECK(r.value >= 3);
}

TEST_CASE("solve says clearly when nothing fits even at 1", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.batch = 16;
  const FitResult r = solve(m, w, budget_of(GiB(1)), Dimension::batch);
  CHECK_FALSE(r.fits_at_one);
  CHECK(r.value == 0);
  CHECK_FALSE(r.capped);
  CHECK(r.workload.batch == 1);
  CHECK(r.estimate.device_total == total_of(m, with(w, Dimension::batch, 1)));
  CHECK(r.estimates == 1);
  CHECK(r.notes == std::vector<std::string>{"nothing fits: even batch 1 needs more than the budget allows"});
}

TEST_CASE("solve notes a seq beyond the model's positions and a capped search", "[advisor]") {
  auto m = llama8b();
  m.max_positions = 2;  // any answer above 2 is beyond the model
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const FitResult r = solve(m, w, budget_of(GiB(1000)), Dimension::seq);
  REQUIRE(r.fits_at_one);
  if (r.value > 2)
    CHECK(
        std::find(r.notes.begin(), r.notes.end(),
                  fmt::format(
                      "{} tokens exceed the model's max_position_embeddings (2): memory allows it, the model "
                      "may not",
                      r.value)) != r.notes.end());
  if (r.capped)
    CHECK(std::find(r.notes.begin(), r.notes.end(),
                    "the search stops at seq 16777216: larger values may fit too") != r.notes.end());
}

TEST_CASE("solve refuses a headroom that leaves nothing", "[advisor]") {
  const auto m = llama8b();
  CHECK(error_of([&] {
          solve(m, inference_fp32(), budget_of(GiB(1), parse_headroom("2GiB")), Dimension::batch);
        }).rfind("--headroom: ", 0) == 0);
}

TEST_CASE("dimensions parse and print", "[advisor]") {
  CHECK(parse_dimension("batch") == Dimension::batch);
  CHECK(parse_dimension("seq") == Dimension::seq);
  CHECK(parse_dimension("seq_len") == Dimension::seq);
  CHECK(parse_dimension("sequence") == Dimension::seq);
  CHECK(parse_dimension("batch_size") == Dimension::batch);
  CHECK(name_of(Dimension::batch) == "batch");
  CHECK(name_of(Dimension::seq) == "seq");
  CHECK(search_cap(Dimension::batch) == 1048576);
  CHECK(search_cap(Dimension::seq) == 16777216);
  CHECK(error_of([] { parse_dimension("tokens"); }) ==
        "--solve: unknown dimension 'tokens' (use 'batch' or 'seq')");
}
