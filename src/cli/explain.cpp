// `vramfit explain`: the OOM doctor on a log, reconciled with the engine's estimate when the
// model flags are given.
#include "vramfit/cli/explain.hpp"

#include <unistd.h>

#include <iostream>
#include <istream>
#include <ostream>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/budget.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/doctor/oom.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/render/explain.hpp"

namespace vramfit::cli {

std::string read_log(const std::string& path, std::istream& in) {
  if (!path.empty() && path != "-") return read_file(path, "log", kMaxLogFile);
  // The process's own standard input may be checked for what it is; a stream given by a test or
  // an embedding program is read as it is, with the same bound.
  if (&in == &std::cin)
    if (const std::string problem = stdin_problem(STDIN_FILENO); !problem.empty())
      throw InputError("log", problem, "give the log as a file: vramfit explain FILE");
  return read_stream(in, kMaxStdinLog, "log",
                     "give the log as a file (vramfit explain FILE), or pipe only its end: tail -c 50M LOG | vramfit "
                     "explain -");
}

std::vector<doctor::NamedSize> candidate_sizes(const spec::ModelSpec& m, const spec::Workload& w) {
  // The engine's own compute-dtype and logits rules, so the doctor matches what it models.
  std::vector<doctor::NamedSize> out;
  for (auto& t : engine::single_requests(m, w)) out.push_back({std::move(t.name), t.size});
  return out;
}

ExitCode run_explain(std::string_view log, const std::optional<Estimate>& estimate, render::Format format,
                     std::ostream& out) {
  const doctor::OomScan scan = doctor::scan(log);
  std::optional<render::Reconcile> reconcile;
  if (estimate) reconcile = render::Reconcile{estimate->report, candidate_sizes(estimate->report.model, estimate->report.workload), {}};
  const std::optional<doctor::Diagnosis> diagnosis =
      doctor::explain(scan, reconcile ? reconcile->candidates : std::vector<doctor::NamedSize>{});
  // Over the card the message describes: the advisor's walk against its total, no tiers.
  if (reconcile && diagnosis && diagnosis->total) {
    const advisor::Budget card = advisor::budget_of(*diagnosis->total);
    if (!card.fits(reconcile->report.breakdown.device_total)) {
      advisor::AdviseOptions options;
      options.tiers = false;
      reconcile->advice = advisor::advise(reconcile->report.model, reconcile->report.workload, card,
                                          catalog::Catalog::embedded(), options);
    }
  }
  // Render first, print after: an error while rendering leaves stdout empty.
  out << render::render_explain(scan, diagnosis, reconcile, format);
  return doctor::explain_exit_code(scan);
}

}  // namespace vramfit::cli
