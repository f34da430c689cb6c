// `vramfit advise` and `vramfit fit`: the advisor's walk and search over a checked estimate.
#include "vramfit/cli/advise.hpp"

#include <ostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/fit.hpp"
#include "vramfit/advisor/report.hpp"

namespace vramfit::cli {

namespace {

/// {schema_version, model, workload} of the estimate (the workload as given), then every key
/// of `body` in its order; a body key that clashes with those three gets `rename` prefixed.
std::string document(const render::EstimateReport& report, const nlohmann::json& body,
                     const std::string& rename = "body_") {
  const auto estimate = estimate_document(report);
  nlohmann::ordered_json doc;
  doc["schema_version"] = render::kSchemaVersion;
  doc["model"] = estimate["model"];
  doc["workload"] = estimate["workload"];
  for (const auto& [key, value] : body.items()) {
    const bool clash = key == "schema_version" || key == "model" || key == "workload";
    doc[clash ? rename + key : key] = nlohmann::ordered_json(value);
  }
  return doc.dump(2) + "\n";
}

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
  const std::string text = format == render::Format::json
                               ? document(e.report, advisor::advice_json(advice))
                               : estimate_heading(e.report) + "\n" + advisor::advice_text(advice);
  out << text;
  return advisor::exit_code(advice);
}

ExitCode run_fit(const Estimate& e, advisor::Dimension dimension, render::Format format, std::ostream& out) {
  const advisor::FitResult fit = advisor::solve(e.report.model, e.report.workload, budget_of(e), dimension);
  const std::string text = format == render::Format::json
                               ? document(e.report, advisor::fit_json(fit), "solved_")
                               : estimate_heading(e.report) + "\n" + advisor::fit_text(fit);
  out << text;
  return advisor::exit_code(fit);
}

}  // namespace vramfit::cli
