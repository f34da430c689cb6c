#pragma once

// The OOM doctor, part 3: the diagnosis as text for a human and as JSON for scripts.
// Free functions over the result, returning values; no I/O. (May move into render/ later.)

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "vramfit/core/exit_code.hpp"
#include "vramfit/doctor/diagnose.hpp"
#include "vramfit/doctor/oom.hpp"

namespace vramfit::doctor {

/// Version of the JSON document explain_json() returns. Bump on any breaking change.
inline constexpr int kExplainSchemaVersion = 1;

/// The exit code `vramfit explain` returns for a scan: ok (0) when an OOM message was found and
/// explained, does_not_fit (1) when the text holds none. (Unreadable input, 2, is the CLI's.)
ExitCode explain_exit_code(const OomScan& scan) noexcept;

/// The report for a human: what failed, where the card's memory went, the diagnosis and the
/// ordered fixes. Without a diagnosis: one line saying no OOM message was found. Ends in '\n'.
std::string render_explain_text(const OomScan& scan, const std::optional<Diagnosis>& diagnosis);

/// The report as JSON: schema_version, found, messages_found, the explained message, the
/// accounting in integer bytes (null when unknown), primary, kinds, fixes (stable ids), findings,
/// and the memory summary. Keys are sorted (nlohmann::json), so the order is stable. Every
/// string is valid UTF-8, so dump() never throws.
nlohmann::json explain_json(const OomScan& scan, const std::optional<Diagnosis>& diagnosis);

}  // namespace vramfit::doctor
