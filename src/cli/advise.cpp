// `vramfit advise` and `vramfit fit`: the advisor's walk and search over a checked estimate.
#include "vramfit/cli/advise.hpp"

#include <ostream>
#include <stdexcept>
#include <string>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/fit.hpp"
#include "vramfit/render/advice.hpp"

namespace vramfit::cli {

namespace {

const advisor::Budget& budget_of(const Estimate& e) {
  // build_estimate(BudgetRule::required) guarantees it; a missing one is a bug, not bad input.
  if (!e.report.budget) throw std::logic_error("advise/fit without a budget");
  return *e.report.budget;
}

}  // namespace

ExitCode run_advise(const Estimate& e, const AdviseFlags& flags, CatalogSource& catalog,
                    render::Format format, std::ostream& out) {
  advisor::AdviseOptions options;
  options.allow = flags.allow;
  options.deny = flags.deny;
  if (!flags.provider.empty()) options.provider = flags.provider;
  const advisor::Advice advice =
      advisor::advise(e.report.model, e.report.workload, budget_of(e), catalog.get(), options);
  // Render first, print after: an error while rendering leaves stdout empty.
  out << render::render_advice(e.report, advice, format);
  const engine::Breakdown& b = advice.initial_estimate;
  if (e.fail_on_tight && advice.budget.verdict(b.device_total, b.upper()) == advisor::Verdict::tight)
    return ExitCode::does_not_fit;
  return advisor::exit_code(advice);
}

ExitCode run_fit(const Estimate& e, advisor::Dimension dimension, render::Format format, std::ostream& out) {
  const advisor::FitResult fit = advisor::solve(e.report.model, e.report.workload, budget_of(e), dimension);
  out << render::render_fit(e.report, fit, format);
  const engine::Breakdown& b = fit.estimate;
  if (e.fail_on_tight && fit.fits_at_one && fit.budget.verdict(b.device_total, b.upper()) == advisor::Verdict::tight)
    return ExitCode::does_not_fit;
  return advisor::exit_code(fit);
}

}  // namespace vramfit::cli
