#include "vramfit/core/text.hpp"

#include <algorithm>
#include <cctype>
#include <compare>

namespace vramfit {

namespace {

// The longest name did_you_mean compares (ids are at most a few dozen bytes): the distance
// costs the product of the two lengths, so a megabyte-long name would take seconds and
// gigabytes for no suggestion.
constexpr std::size_t kMaxSuggestName = 256;

}  // namespace

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string joined(const std::vector<std::string>& names, std::string_view sep) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) s += sep;
    s += names[i];
  }
  return s;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) s += i + 1 == names.size() ? " or " : ", ";
    s += "'" + names[i] + "'";
  }
  return s;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  if (name.empty() || name.size() > kMaxSuggestName) return {};
  const std::string n = lower(name);
  // Tiers, best first:
  //   0: the name is the start of a known one ("h10" -> "h100-80gb"), in alphabetical order;
  //   1: one typo away, or a known name is the start of this one ("h100-80gb-sxm"), nearest first;
  //   2: up to a third of the name in typos (at least 2), or one name inside the other
  //      ("4090" -> "rtx-4090"), nearest first; shown only when tiers 0 and 1 are empty.
  const std::size_t max_distance = std::max<std::size_t>(2, n.size() / 3);
  struct Match {
    int tier;
    std::size_t distance;  // 0 in tier 0, so that tier sorts by name
    std::size_t length;
    std::string name;
    auto operator<=>(const Match&) const = default;
  };
  std::vector<Match> matches;
  for (const auto& k : known) {
    const std::string kl = lower(k);
    const bool long_enough = n.size() >= 3 && kl.size() >= 3;
    if (long_enough && kl.starts_with(n)) {
      matches.push_back({0, 0, 0, k});
      continue;
    }
    const std::size_t d = edit_distance(n, kl);
    const bool inside = long_enough && (kl.find(n) != std::string::npos || n.find(kl) != std::string::npos);
    if (d <= 1 || (long_enough && n.starts_with(kl)))
      matches.push_back({1, d, k.size(), k});
    else if (d <= max_distance || inside)
      matches.push_back({2, d, k.size(), k});
  }
  std::sort(matches.begin(), matches.end());
  std::vector<std::string> out;
  for (const auto& m : matches) {
    if (out.size() == 3 || (m.tier == 2 && matches.front().tier < 2)) break;
    if (std::find(out.begin(), out.end(), m.name) == out.end()) out.push_back(m.name);
  }
  return out;
}

std::string did_you_mean_fix(std::string_view name, const std::vector<std::string>& known, std::string_view then,
                             std::string_view otherwise) {
  const std::vector<std::string> close = did_you_mean(name, known);
  if (close.empty()) return std::string(otherwise);
  std::string fix = "did you mean " + quoted_list(close) + "?";
  if (!then.empty()) fix += " " + std::string(then);
  return fix;
}

}  // namespace vramfit
