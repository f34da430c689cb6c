#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vramfit/core/bytes.hpp"

namespace vramfit::render {

/// A size for a human: "512 B" below 1 KiB, else the largest binary unit (KiB, MiB, GiB, TiB)
/// that keeps the value at or above 1, with two decimals rounded half up: "14.96 GiB".
/// Exact integer arithmetic; a value that rounds up to 1024.00 moves to the next unit.
std::string format_bytes(Bytes b);

/// A signed size: format_bytes of the magnitude, with a leading '-' when negative.
std::string format_signed_bytes(std::int64_t b);

/// An integer with thousands separators: 8030261248 -> "8,030,261,248".
std::string format_count(std::uint64_t n);

/// A parameter count in short form, three significant digits: "8.03B", "124M", "350K", "999".
std::string format_params(std::uint64_t n);

/// Share of `part` in `whole` as a percentage with one decimal ("33.3%"); "-" when whole is 0.
std::string format_share(Bytes part, Bytes whole);

/// Column alignment of a text table.
enum class Align { left, right };

/// Lays out rows as aligned columns separated by two spaces, each line ending in '\n'
/// without trailing spaces. `align` gives each column's alignment (missing: left).
/// Widths count bytes: cells are ASCII.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<Align>& align,
                  const std::string& indent = "");

}  // namespace vramfit::render
