// `vramfit explain`: the OOM doctor on a log, reconciled with the engine's estimate when the
// model flags are given.
#include "vramfit/cli/explain.hpp"

#include <cstdint>
#include <istream>
#include <iterator>
#include <limits>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/budget.hpp"
#include "vramfit/advisor/report.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/doctor/oom.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/doctor/report.hpp"
#include "vramfit/render/format.hpp"

namespace vramfit::cli {

namespace {

/// estimate - card total, saturated to the int64 range.
std::int64_t signed_difference(Bytes estimate, Bytes card) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (estimate >= card) return static_cast<std::int64_t>(std::min(estimate.value() - card.value(), kMax));
  return -static_cast<std::int64_t>(std::min(card.value() - estimate.value(), kMax));
}

std::string workload_words(const render::EstimateReport& r) {
  const auto& w = r.workload;
  std::string s =
      fmt::format("{}, {}: batch {} x {} tokens", r.model.name, spec::name_of(w.mode), w.batch, w.seq);
  if (w.mode == spec::Mode::generate) s += fmt::format(" + {} new", w.new_tokens);
  return s;
}

/// The advisor's walk against the card the message describes (its total memory), no tiers.
advisor::Advice advice_for_card(const render::EstimateReport& r, Bytes card_total) {
  advisor::AdviseOptions options;
  options.tiers = false;
  return advisor::advise(r.model, r.workload, advisor::budget_of(card_total), catalog::Catalog::embedded(), options);
}

/// The estimate beside what the message says of the card: short, and only what both show.
std::string reconcile_text(const render::EstimateReport& r, const std::optional<doctor::Diagnosis>& d) {
  using render::format_bytes;
  const auto& b = r.breakdown;
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"estimate: device total", format_bytes(b.device_total),
       fmt::format("peak allocated {} + allocator reserve + CUDA context", format_bytes(b.peak_allocated))});
  std::string out = fmt::format("Reconcile with the estimate ({})\n", workload_words(r));
  if (!d || !d->total) {
    out += render::table(rows, {render::Align::left, render::Align::right, render::Align::left}, "  ");
    out += "  The message gives no card total to compare the estimate with.\n";
    return out;
  }
  const Bytes total = *d->total;
  rows.push_back({"message: card total", format_bytes(total), ""});
  if (d->job_needs)
    rows.push_back({"message: job at the failure", format_bytes(*d->job_needs),
                    "allocated + requested + this process's non-PyTorch memory (a lower bound)"});
  out += render::table(rows, {render::Align::left, render::Align::right, render::Align::left}, "  ");
  if (b.device_total > total) {
    out += fmt::format(
        "  The estimate is {} above the card's total: as these flags describe it, the job does not fit this "
        "card.\n  The advisor against the card's {} (as 'vramfit advise' with the same flags and --budget {}):\n",
        format_bytes(b.device_total - total), format_bytes(total), total.value());
    out += advisor::advice_summary(advice_for_card(r, total));
  } else if (d->card_available && b.device_total > *d->card_available) {
    out += fmt::format(
        "  The estimate is {} below the card's total but above the {} other processes left to this job: it "
        "fits an idle card, not this one.\n",
        format_bytes(total - b.device_total), format_bytes(*d->card_available));
  } else {
    out += fmt::format(
        "  The estimate is {} below the card's total: by the estimate the job fits, so the cause is likely "
        "what the estimate does not cover (other processes, fragmentation, a larger batch or sequence than "
        "these flags say); see the diagnosis above.\n",
        format_bytes(total - b.device_total));
  }
  return out;
}

nlohmann::json reconcile_json(const Estimate& e, const std::optional<doctor::Diagnosis>& d) {
  const auto& r = e.report;
  const auto doc = estimate_document(r);
  nlohmann::json j;
  j["model"] = r.model.name;
  j["workload"] = nlohmann::json(doc["workload"]);
  j["peak_allocated_bytes"] = r.breakdown.peak_allocated.value();
  j["device_total_bytes"] = r.breakdown.device_total.value();
  const bool total = d && d->total;
  j["card_total_bytes"] = total ? nlohmann::json(d->total->value()) : nlohmann::json();
  j["over_card_bytes"] =
      total ? nlohmann::json(signed_difference(r.breakdown.device_total, *d->total)) : nlohmann::json();
  j["fits_card"] = total ? nlohmann::json(r.breakdown.device_total <= *d->total) : nlohmann::json();
  // The advisor's walk against the card's total when the estimate does not fit it.
  j["advice"] = total && r.breakdown.device_total > *d->total
                    ? advisor::advice_json(advice_for_card(r, *d->total))
                    : nlohmann::json();
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : candidate_sizes(r.model, r.workload))
    candidates.push_back({{"name", c.name}, {"bytes", c.size.value()}});
  j["candidates"] = std::move(candidates);
  return j;
}

}  // namespace

std::string read_log(const std::string& path, std::istream& in) {
  if (!path.empty() && path != "-") return read_file(path, "log", kMaxLogFile);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw InputError("log", "cannot read standard input", "give the log as a file: vramfit explain FILE");
  return text;
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
  std::vector<doctor::NamedSize> candidates;
  if (estimate) candidates = candidate_sizes(estimate->report.model, estimate->report.workload);
  const std::optional<doctor::Diagnosis> diagnosis = doctor::explain(scan, candidates);
  std::string text;
  if (format == render::Format::json) {
    nlohmann::json j = doctor::explain_json(scan, diagnosis);
    j["estimate"] = estimate ? reconcile_json(*estimate, diagnosis) : nlohmann::json();
    text = j.dump(2) + "\n";
  } else {
    text = doctor::render_explain_text(scan, diagnosis);
    if (estimate && diagnosis) text += "\n" + reconcile_text(estimate->report, diagnosis);
  }
  out << text;
  return doctor::explain_exit_code(scan);
}

}  // namespace vramfit::cli
