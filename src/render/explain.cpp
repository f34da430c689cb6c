#include "vramfit/render/explain.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "vramfit/core/text.hpp"
#include "vramfit/render/advice.hpp"
#include "vramfit/render/format.hpp"

namespace vramfit::render {

using doctor::Diagnosis;
using doctor::OomMessage;
using doctor::OomScan;
using doctor::FixHint;
using doctor::format_torch_size;
using doctor::MemorySummary;
using doctor::OtherProcess;
using doctor::SummaryRow;

namespace {

using OptBytes = std::optional<Bytes>;

nlohmann::json bytes_or_null(const OptBytes& b) {
  return b ? nlohmann::json(b->value()) : nlohmann::json(nullptr);
}

template <typename T>
nlohmann::json value_or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const SummaryRow& r) {
  return {{"current_bytes", bytes_or_null(r.current)},
          {"peak_bytes", bytes_or_null(r.peak)},
          {"allocated_total_bytes", bytes_or_null(r.allocated_total)},
          {"freed_total_bytes", bytes_or_null(r.freed_total)}};
}

std::string describe_message(const OomScan& scan, const OomMessage& m) {
  const std::size_t n = scan.messages.size();
  const std::size_t found = std::max(scan.messages_found, n);
  const std::size_t index = scan.chosen_index() + (found - n);  // among all found
  std::string what = m.backend.empty() ? std::string("out of memory") : m.backend + " out of memory";
  if (m.gpu) what += fmt::format(" on GPU {}", *m.gpu);
  std::string where = fmt::format("line {}, {} format", m.line, m.format);
  if (found > 1) {
    where += index + 1 == found ? fmt::format("; the last of {} OOM messages", found)
                                : fmt::format("; message {} of {}, the last with figures", index + 1, found);
    if (found > n) where += fmt::format("; the last {} kept", n);
  }
  return fmt::format("{} ({})", what, where);
}

}  // namespace

std::string explain_text(const OomScan& scan, const std::optional<Diagnosis>& diagnosis) {
  const OomMessage* m = scan.chosen();
  if (m == nullptr || !diagnosis) {
    std::string out = "No out-of-memory message found";
    if (scan.summary) {
      out += fmt::format(" (a memory summary on line {} reports {} OOMs)", scan.summary->line,
                         scan.summary->ooms ? fmt::format("{}", *scan.summary->ooms) : "no");
    }
    return out + ".\n";
  }
  const Diagnosis& d = *diagnosis;
  std::string out = fmt::format("OOM: {}\n", describe_message(scan, *m));
  if (!m->excerpt.empty()) out += fmt::format("  {}\n", m->excerpt);

  // Where the card's memory was, as a two-column table (only the known rows).
  std::vector<std::pair<std::string, std::string>> rows;
  const auto row = [&](std::string label, const OptBytes& b, std::string note = {}) {
    if (!b) return;
    std::string v = format_torch_size(*b);
    if (!note.empty()) v += "  " + note;
    rows.emplace_back(std::move(label), std::move(v));
  };
  row("requested", d.requested);
  row("card total", d.total, d.format == "mps" ? "(high watermark)" : "");
  row("free", d.free);
  row("PyTorch allocated", d.allocated_by_pytorch, "(tensors)");
  row("PyTorch cached", d.reserved_unallocated, "(reserved but unallocated)");
  row("PyTorch reserved", d.reserved_total, "(allocated + cached)");
  row("this process", d.process_in_use, "(as NVML sees it)");
  row(d.format == "mps" ? "other allocations" : "outside PyTorch", d.process_non_pytorch,
      d.format == "mps" ? "(this process, outside PyTorch's MPS allocator)"
                        : "(this process: CUDA context, libraries)");
  if (d.other_processes && d.other_processes->value() == 0) {
    rows.emplace_back("other processes", "none listed");
  } else {
    row("other processes", d.other_processes);
  }
  if (!d.process_non_pytorch) row("outside PyTorch", d.outside_pytorch, "(context + others)");
  // Used by no listed process; a few MiB are only the rounding of the printed figures.
  if (d.unattributed && d.total && d.unattributed->value() * 100 >= d.total->value()) {
    row("unlisted", d.unattributed, "(used, but by no process PyTorch listed)");
  }
  row("job needed >=", d.job_needs, "(at the failure point)");
  row("over the card by", d.over_card);
  if (!rows.empty()) {
    std::size_t width = 0;
    for (const auto& [label, value] : rows) width = std::max(width, label.size());
    out += "\n";
    for (const auto& [label, value] : rows) {
      out += fmt::format("  {:<{}}  {}\n", label, width, value);
    }
  }

  out += fmt::format("\nDiagnosis: {}", d.primary);
  if (d.kinds.size() > 1) {
    out += fmt::format(" (also: {})", joined({d.kinds.begin() + 1, d.kinds.end()}));
  }
  out += "\n";
  for (const std::string& s : d.findings) out += fmt::format("  - {}\n", s);

  if (!d.fixes.empty()) {
    out += "\nFixes, in order:\n";
    for (std::size_t i = 0; i < d.fixes.size(); ++i) {
      const FixHint& h = d.fixes[i];
      out += fmt::format("  {}. {} [{}]\n     {}\n", i + 1, h.title, h.id, h.reason);
    }
  }
  return out;
}

nlohmann::json explain_json(const OomScan& scan, const std::optional<Diagnosis>& diagnosis) {
  nlohmann::json j;
  j["schema_version"] = kExplainSchemaVersion;
  j["messages_found"] = std::max(scan.messages_found, scan.messages.size());
  j["messages_kept"] = scan.messages.size();
  const OomMessage* m = scan.chosen();
  j["found"] = m != nullptr && diagnosis.has_value();

  if (scan.summary) {
    const MemorySummary& s = *scan.summary;
    j["memory_summary"] = {
        {"line", s.line},
        {"device", value_or_null(s.device)},
        {"ooms", value_or_null(s.ooms)},
        {"malloc_retries", value_or_null(s.malloc_retries)},
        {"allocated", row_json(s.allocated)},
        {"active", row_json(s.active)},
        {"requested", row_json(s.requested)},
        {"reserved", row_json(s.reserved)},
        {"non_releasable", row_json(s.non_releasable)},
    };
  } else {
    j["memory_summary"] = nullptr;
  }

  if (m == nullptr || !diagnosis) {
    j["message"] = nullptr;
    j["primary"] = nullptr;
    j["kinds"] = nlohmann::json::array();
    j["fixes"] = nlohmann::json::array();
    j["findings"] = nlohmann::json::array();
    j["accounting"] = nullptr;
    j["other_processes"] = nlohmann::json::array();
    j["candidate_match"] = nullptr;
    return j;
  }
  const Diagnosis& d = *diagnosis;

  j["message"] = {
      {"index", scan.chosen_index()},
      {"line", m->line},
      {"format", m->format},
      {"backend", m->backend},
      {"gpu", value_or_null(m->gpu)},
      {"complete", m->complete},
      {"excerpt", m->excerpt},
      {"unreadable", m->unreadable.empty() ? nlohmann::json(nullptr) : nlohmann::json(m->unreadable)},
      {"parsed",
       {
           {"requested_bytes", bytes_or_null(m->requested)},
           {"total_bytes", bytes_or_null(m->total)},
           {"free_bytes", bytes_or_null(m->free)},
           {"process_in_use_bytes", bytes_or_null(m->process_in_use)},
           {"allocated_by_pytorch_bytes", bytes_or_null(m->allocated_by_pytorch)},
           {"private_pools_bytes", bytes_or_null(m->private_pools)},
           {"reserved_unallocated_bytes", bytes_or_null(m->reserved_unallocated)},
           {"reserved_total_bytes", bytes_or_null(m->reserved_total)},
           {"allowed_bytes", bytes_or_null(m->allowed)},
           {"other_allocations_bytes", bytes_or_null(m->other_allocations)},
       }},
  };
  j["accounting"] = {
      {"requested_bytes", bytes_or_null(d.requested)},
      {"total_bytes", bytes_or_null(d.total)},
      {"free_bytes", bytes_or_null(d.free)},
      {"allocated_by_pytorch_bytes", bytes_or_null(d.allocated_by_pytorch)},
      {"reserved_unallocated_bytes", bytes_or_null(d.reserved_unallocated)},
      {"reserved_total_bytes", bytes_or_null(d.reserved_total)},
      {"process_in_use_bytes", bytes_or_null(d.process_in_use)},
      {"process_non_pytorch_bytes", bytes_or_null(d.process_non_pytorch)},
      {"other_processes_bytes", bytes_or_null(d.other_processes)},
      {"outside_pytorch_bytes", bytes_or_null(d.outside_pytorch)},
      {"unattributed_bytes", bytes_or_null(d.unattributed)},
      {"shortfall_bytes", bytes_or_null(d.shortfall)},
      {"job_needs_bytes", bytes_or_null(d.job_needs)},
      {"card_available_bytes", bytes_or_null(d.card_available)},
      {"over_card_bytes", bytes_or_null(d.over_card)},
  };
  nlohmann::json others = nlohmann::json::array();
  for (const OtherProcess& p : d.others) {
    others.push_back({{"pid", p.pid}, {"in_use_bytes", p.in_use.value()}});
  }
  j["other_processes"] = std::move(others);
  j["primary"] = d.primary;
  j["kinds"] = d.kinds;
  if (d.match) {
    j["candidate_match"] = {{"name", d.match->name},
                            {"size_bytes", d.match->size.value()},
                            {"allocator_size_bytes", d.match->allocator_size.value()},
                            {"difference_permille", d.match->difference_permille}};
  } else {
    j["candidate_match"] = nullptr;
  }
  nlohmann::json fixes = nlohmann::json::array();
  for (std::size_t i = 0; i < d.fixes.size(); ++i) {
    const FixHint& h = d.fixes[i];
    fixes.push_back({{"rank", i + 1},
                     {"id", h.id},
                     {"seed_step", h.seed_step},
                     {"title", h.title},
                     {"reason", h.reason}});
  }
  j["fixes"] = std::move(fixes);
  j["findings"] = d.findings;
  return j;
}

namespace {

/// estimate - card total, saturated to the int64 range: the budget's spare bytes, negated.
std::int64_t over_card(Bytes estimate, Bytes card) {
  const std::int64_t spare = advisor::budget_of(card).spare(estimate);
  return spare == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max() : -spare;
}

std::string workload_words(const render::EstimateReport& r) {
  const auto& w = r.workload;
  std::string s =
      fmt::format("{}, {}: batch {} x {} tokens", r.model.name, spec::name_of(w.mode), w.batch, w.seq);
  if (w.mode == spec::Mode::generate) s += fmt::format(" + {} new", w.new_tokens);
  return s;
}

/// The estimate beside what the message says of the card: short, and only what both show.
std::string reconcile_text(const Reconcile& rec, const std::optional<Diagnosis>& d) {
  const EstimateReport& r = rec.report;
  const auto& b = r.breakdown;
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"estimate: device total", format_bytes(b.device_total),
       fmt::format("peak allocated {} + allocator reserve + CUDA context", format_bytes(b.peak_allocated))});
  std::string out = fmt::format("Reconcile with the estimate ({})\n", workload_words(r));
  if (!d || !d->total) {
    out += table(rows, {Align::left, Align::right, Align::left}, "  ");
    out += "  The message gives no card total to compare the estimate with.\n";
    return out;
  }
  const Bytes total = *d->total;
  rows.push_back({"message: card total", format_bytes(total), ""});
  if (d->job_needs)
    rows.push_back({"message: job at the failure", format_bytes(*d->job_needs),
                    "allocated + requested + this process's non-PyTorch memory (a lower bound)"});
  out += table(rows, {Align::left, Align::right, Align::left}, "  ");
  if (!advisor::budget_of(total).fits(b.device_total)) {
    out += fmt::format(
        "  The estimate is {} above the card's total: as these flags describe it, the job does not fit this "
        "card.\n  The advisor against the card's {} (as 'vramfit advise' with the same flags and --budget {}):\n",
        format_bytes(b.device_total - total), format_bytes(total), total.value());
    if (rec.advice) out += advice_summary(*rec.advice);
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

nlohmann::json reconcile_json(const Reconcile& rec, const std::optional<Diagnosis>& d) {
  const EstimateReport& r = rec.report;
  nlohmann::json j;
  j["model"] = r.model.name;
  j["workload"] = nlohmann::json(workload_json(r.workload));
  j["peak_allocated_bytes"] = r.breakdown.peak_allocated.value();
  j["device_total_bytes"] = r.breakdown.device_total.value();
  const bool total = d && d->total;
  j["card_total_bytes"] = total ? nlohmann::json(d->total->value()) : nlohmann::json();
  j["over_card_bytes"] =
      total ? nlohmann::json(over_card(r.breakdown.device_total, *d->total)) : nlohmann::json();
  j["fits_card"] = total ? nlohmann::json(advisor::budget_of(*d->total).fits(r.breakdown.device_total)) : nlohmann::json();
  // The advisor's walk against the card's total when the estimate does not fit it.
  j["advice"] = rec.advice ? nlohmann::json(advice_json(*rec.advice)) : nlohmann::json();
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : rec.candidates)
    candidates.push_back({{"name", c.name}, {"bytes", c.size.value()}});
  j["candidates"] = std::move(candidates);
  return j;
}

}  // namespace

std::string render_explain(const OomScan& scan, const std::optional<Diagnosis>& diagnosis,
                           const std::optional<Reconcile>& reconcile, Format f) {
  if (f == Format::json) {
    nlohmann::json j = explain_json(scan, diagnosis);
    j["estimate"] = reconcile ? reconcile_json(*reconcile, diagnosis) : nlohmann::json();
    return j.dump(2) + "\n";
  }
  std::string text = explain_text(scan, diagnosis);
  if (reconcile && diagnosis) text += "\n" + reconcile_text(*reconcile, diagnosis);
  return text;
}

}  // namespace vramfit::render
