#include "vramfit/doctor/report.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace vramfit::doctor {

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
  const std::size_t index = scan.chosen_index();
  std::string what = m.backend.empty() ? std::string("out of memory") : m.backend + " out of memory";
  if (m.gpu) what += fmt::format(" on GPU {}", *m.gpu);
  std::string where = fmt::format("line {}, {} format", m.line, m.format);
  if (n > 1) {
    where += index + 1 == n ? fmt::format("; the last of {} OOM messages", n)
                            : fmt::format("; message {} of {}, the last with figures", index + 1, n);
  }
  return fmt::format("{} ({})", what, where);
}

}  // namespace

ExitCode explain_exit_code(const OomScan& scan) noexcept {
  return scan.messages.empty() ? ExitCode::does_not_fit : ExitCode::ok;
}

std::string render_explain_text(const OomScan& scan, const std::optional<Diagnosis>& diagnosis) {
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
    std::string also;
    for (std::size_t i = 1; i < d.kinds.size(); ++i) {
      if (!also.empty()) also += ", ";
      also += d.kinds[i];
    }
    out += fmt::format(" (also: {})", also);
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
  j["messages_found"] = scan.messages.size();
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

}  // namespace vramfit::doctor
