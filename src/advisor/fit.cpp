#include "vramfit/advisor/fit.hpp"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"

namespace vramfit::advisor {

namespace {

struct DimensionName {
  std::string_view name;
  Dimension dimension;
};

// Spellings of --solve; the first of each dimension is the stable one.
constexpr std::array<DimensionName, 5> kDimensionNames{{
    {"batch", Dimension::batch},       // Workload.batch
    {"seq", Dimension::seq},           // Workload.seq
    {"batch_size", Dimension::batch},  // Hugging Face's spelling
    {"sequence", Dimension::seq},      // spelled out
    {"seq_len", Dimension::seq},       // common in scripts
}};

std::uint64_t& field_of(spec::Workload& w, Dimension d) { return d == Dimension::batch ? w.batch : w.seq; }

}  // namespace

std::string_view name_of(Dimension d) noexcept { return d == Dimension::batch ? "batch" : "seq"; }

Dimension parse_dimension(std::string_view text, std::string_view field) {
  for (const auto& [name, d] : kDimensionNames)
    if (name == text) return d;
  throw InputError(std::string(field), fmt::format("unknown dimension '{}'", text), "use 'batch' or 'seq'");
}

ExitCode exit_code(const FitResult& fit) noexcept {
  return fit.fits_at_one ? ExitCode::ok : ExitCode::does_not_fit;
}

std::uint64_t search_cap(Dimension d) noexcept {
  // Far above any real job; powers of two so the doubling lands on them exactly.
  return d == Dimension::batch ? (std::uint64_t{1} << 20) : (std::uint64_t{1} << 24);
}

FitResult solve(const spec::ModelSpec& model, const spec::Workload& workload, const Budget& budget,
                Dimension dimension) {
  check_budget(budget);
  FitResult r;
  r.dimension = dimension;
  r.budget = budget;

  spec::Workload w = workload;
  // Evaluates one value; an estimate that overflows 64 bits counts as not fitting.
  const auto fits_at = [&](std::uint64_t v, engine::Breakdown& out) {
    field_of(w, dimension) = v;
    ++r.estimates;
    try {
      out = engine::estimate(model, w);
    } catch (const InputError&) {
      if (v == 1) throw;  // at 1 the input itself is wrong: the user must hear it
      return false;
    }
    return budget.fits(out.device_total);
  };

  engine::Breakdown best;
  if (!fits_at(1, best)) {
    r.workload = w;
    r.estimate = std::move(best);
    r.notes.push_back(
        fmt::format("nothing fits: even {} 1 needs more than the budget allows", name_of(dimension)));
    return r;
  }
  r.fits_at_one = true;
  const std::uint64_t cap = search_cap(dimension);
  // Exponential phase: 2, 4, 8, ... until a miss or the cap.
  std::uint64_t lo = 1;
  std::uint64_t hi = 0;  // first known miss; 0 = none yet
  engine::Breakdown probe;
  for (std::uint64_t v = 2; v <= cap; v *= 2) {
    if (fits_at(v, probe)) {
      lo = v;
      best = std::move(probe);
    } else {
      hi = v;
      break;
    }
  }
  if (hi == 0) {
    r.capped = true;
  } else {
    // Binary phase, assuming memory never falls as the dimension grows: lo fits, hi does not.
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (fits_at(mid, probe)) {
        lo = mid;
        best = std::move(probe);
      } else {
        hi = mid;
      }
    }
  }
  r.value = lo;
  field_of(w, dimension) = lo;
  r.workload = w;
  r.estimate = std::move(best);
  if (r.capped)
    r.notes.push_back(
        fmt::format("the search stops at {} {}: larger values may fit too", name_of(dimension), cap));
  if (dimension == Dimension::seq && model.max_positions > 0) {
    std::uint64_t tokens = checked_add(r.value, w.mode == spec::Mode::generate ? w.new_tokens : 0);
    // --images: their tokens are positions of the sequence too (the value solved is the text's).
    if (w.images > 0 && model.vision)
      tokens = checked_add(tokens, spec::image_work(*model.vision, w.images, w.image_width, w.image_height).prompt_tokens);
    if (tokens > model.max_positions)
      r.notes.push_back(
          fmt::format("{} tokens exceed the model's max_position_embeddings ({}): memory allows it, "
                      "the model may not",
                      tokens, model.max_positions));
  }
  return r;
}

}  // namespace vramfit::advisor
