#pragma once

// Small text helpers used across the modules: each exists once, here.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vramfit {

/// True for an ASCII digit, '0' to '9' (std::isdigit depends on the locale and takes an int).
[[nodiscard]] constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

/// `s` without leading and trailing ASCII white space.
[[nodiscard]] std::string_view trim(std::string_view s) noexcept;

/// `s` in ASCII lower case.
[[nodiscard]] std::string lower(std::string_view s);

/// `s` in ASCII upper case.
[[nodiscard]] std::string upper(std::string_view s);

/// `a` and `b` equal but for ASCII case.
[[nodiscard]] bool iequals(std::string_view a, std::string_view b) noexcept;

/// The names joined by `sep`: "a, b, c".
[[nodiscard]] std::string joined(const std::vector<std::string>& names, std::string_view sep = ", ");

/// The names quoted, the last after "or": "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
[[nodiscard]] std::string quoted_list(const std::vector<std::string>& names);

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// Up to three known names closest to `name` (case-insensitive), best first: names that
/// `name` starts, then one typo away, then up to a third of the name in typos or one name
/// inside the other. Empty for an empty name or one longer than 256 bytes.
[[nodiscard]] std::vector<std::string> did_you_mean(std::string_view name, const std::vector<std::string>& known);

/// The fix of every "unknown NAME" message: "did you mean 'a' or 'b'? " followed by `then`
/// when names are close to `name`, else `otherwise`. `then` is what always helps (the closed
/// list: "one of a, b, c"), may be empty; `otherwise` is said when there is no suggestion.
[[nodiscard]] std::string did_you_mean_fix(std::string_view name, const std::vector<std::string>& known,
                                           std::string_view then, std::string_view otherwise);

}  // namespace vramfit
