#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace vramfit {

/// A size in bytes: an unsigned 64-bit integer with checked arithmetic. Every overflow
/// throws InputError (field "size"): sizes only overflow when the input is absurd, and the
/// user must hear that rather than read a wrapped number. Units appear only in renderers.
class Bytes {
 public:
  constexpr Bytes() noexcept = default;
  constexpr explicit Bytes(std::uint64_t v) noexcept : v_(v) {}

  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return v_; }

  friend Bytes operator+(Bytes a, Bytes b);
  friend Bytes operator-(Bytes a, Bytes b);  ///< throws if b > a
  friend Bytes operator*(Bytes a, std::uint64_t k);
  friend Bytes operator*(std::uint64_t k, Bytes a) { return a * k; }
  Bytes& operator+=(Bytes o) { return *this = *this + o; }
  Bytes& operator-=(Bytes o) { return *this = *this - o; }

  /// a - b, or zero when b > a.
  [[nodiscard]] static Bytes saturating_sub(Bytes a, Bytes b) noexcept {
    return Bytes{a.v_ > b.v_ ? a.v_ - b.v_ : 0};
  }
  /// Rounds up to a multiple of `granule` (> 0).
  [[nodiscard]] Bytes round_up(std::uint64_t granule) const;

  friend constexpr auto operator<=>(Bytes a, Bytes b) noexcept = default;

 private:
  std::uint64_t v_ = 0;
};

constexpr Bytes KiB(std::uint64_t n) { return Bytes{n * 1024ULL}; }
constexpr Bytes MiB(std::uint64_t n) { return Bytes{n * 1024ULL * 1024ULL}; }
constexpr Bytes GiB(std::uint64_t n) { return Bytes{n * 1024ULL * 1024ULL * 1024ULL}; }

/// Checked products for element counts: throws InputError (field given) on overflow.
std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what = "size");
std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what = "size");

/// Bytes of `elements` values of `bits` bits each, rounded up to whole bytes.
Bytes bytes_of_bits(std::uint64_t elements, std::uint64_t bits);

}  // namespace vramfit
