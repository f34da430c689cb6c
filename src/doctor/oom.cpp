#include "vramfit/doctor/oom.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "vramfit/core/text.hpp"

// How the scanner works. PyTorch builds its OOM texts from fixed pieces (see the sources
// below), so the scanner reads them piece by piece, in order, from a copy of the text with all
// whitespace removed: the same pieces match whether the message sits on one line, is wrapped by
// a terminal in the middle of a word (a real fairseq log prints "CUD\nA out of memory"), or
// has its spaces changed. Every match is case-insensitive. Each message is read only up to the
// next message's start, so a truncated message cannot borrow figures from the next one; the
// whole scan is linear in the text.
//
// The texts, by source:
//   current  c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.1 and later; 2.1 spells "capacty"):
//     "CUDA out of memory. Tried to allocate " S ". GPU " N " has a total capacity of " S
//     " of which " S " is free. " {proc_info} {S " allowed; "} "Of the allocated memory " S
//     " is allocated by PyTorch, " {"with " S " allocated in private pools (e.g., CUDA Graphs), "}
//     "and " S " is reserved by PyTorch but unallocated." + a hint naming PYTORCH_*_ALLOC_CONF.
//     proc_info, per NVML process on the device: "Including non-PyTorch memory, this process"
//     (own pid) or "Process " PID, then " has " S " memory in use. "
//     The XPU, MLU and generic ("Out of memory.") allocators print the same pieces.
//   legacy   the same file, PyTorch 1.x to 2.0:
//     "CUDA out of memory. Tried to allocate " S " (GPU " N "; " S " total capacity; " S
//     " already allocated; " S " free; " {S " allowed; "} S " reserved in total by PyTorch)"
//     Before 1.5 it ended S " cached)" (or S " cached; " S " inactive)"), where cached was
//     amount_cached - amount_allocated: reserved but unallocated. NPU forks add
//     S " current active; ".
//   mps      aten/src/ATen/mps/MPSAllocator.mm:
//     "MPS backend out of memory (MPS allocated: " S ", other allocations: " S ", max allowed: "
//     S "). Tried to allocate " S " on " {shared|private} " pool."
//   runtime_error: "CUDA error: out of memory" (c10/cuda/CUDAException.h, also HIP and
//     "CUDA driver error"), "cuda runtime error (2) : out of memory" (THC, PyTorch <= 1.0),
//     "CUBLAS_STATUS_ALLOC_FAILED" (cuBLAS could not allocate its workspace), and an
//     OutOfMemoryError printed without PyTorch's text (e.g. ComfyUI's "Allocation on device").
//   memory_summary: torch/cuda/memory.py, memory_summary().
// S is c10's format_size: "%.2f" of KiB/MiB/GiB, or "N bytes" up to 1024.

namespace vramfit::doctor {

namespace {

constexpr bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
constexpr bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr char to_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// The text without whitespace, lower-cased, with a way back to offsets in the original.
class Flat {
 public:
  explicit Flat(std::string_view text) : text_(text) {
    s_.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (is_space(text[i])) continue;
      if (s_.size() % kStride == 0) marks_.push_back(i);
      s_.push_back(to_lower(text[i]));
    }
  }
  [[nodiscard]] std::string_view view() const noexcept { return s_; }
  // Offset in the original text of flat position i (text.size() past the end).
  [[nodiscard]] std::size_t original(std::size_t i) const noexcept {
    if (i >= s_.size()) return text_.size();
    std::size_t o = marks_[i / kStride];
    std::size_t n = i % kStride;
    for (;; ++o) {
      if (is_space(text_[o])) continue;
      if (n == 0) return o;
      --n;
    }
  }

 private:
  static constexpr std::size_t kStride = 256;
  std::string_view text_;
  std::string s_;
  std::vector<std::size_t> marks_;  // marks_[k]: original offset of s_[k * kStride]
};

// A reading position in a lower-cased, whitespace-free view that ends where the message ends.
struct Cursor {
  std::string_view f;
  std::size_t pos = 0;

  [[nodiscard]] bool at_end() const noexcept { return pos >= f.size(); }
  [[nodiscard]] char peek(std::size_t ahead = 0) const noexcept {
    return pos + ahead < f.size() ? f[pos + ahead] : '\0';
  }
  [[nodiscard]] bool starts_with(std::string_view lit) const noexcept {
    return f.substr(pos).starts_with(lit);
  }
  bool eat(std::string_view lit) noexcept {
    if (!starts_with(lit)) return false;
    pos += lit.size();
    return true;
  }
  // Digits as an unsigned integer of at most `max_digits` digits.
  std::optional<std::uint64_t> eat_uint(std::size_t max_digits = 18) noexcept {
    std::size_t p = pos;
    std::uint64_t v = 0;
    while (p < f.size() && is_digit(f[p]) && p - pos < max_digits) {
      v = v * 10 + static_cast<std::uint64_t>(f[p] - '0');
      ++p;
    }
    if (p == pos || (p < f.size() && is_digit(f[p]))) return std::nullopt;
    pos = p;
    return v;
  }
  std::optional<Bytes> eat_size() noexcept;
  // Why the figure at pos, if there is one, cannot be read as a size: negative, not a number,
  // or past 2^64 - 1 bytes. Empty when no figure starts here (the message is cut, or its text
  // differs). Looks at most kFigureLook bytes ahead.
  [[nodiscard]] std::string why_not_size() const;
};

constexpr std::size_t kFigureLook = 40;

// Units as PyTorch's formatters print them, longest spelling first. "KB"/"MB"/"GB" are the
// older spellings of the same binary units (torch.cuda.memory_summary before 1.13, MPS).
struct Unit {
  std::string_view name;  // lower case
  std::uint64_t bytes;
};
constexpr std::array<Unit, 13> kUnits{{
    {"bytes", 1},
    {"byte", 1},
    {"kib", 1ULL << 10},
    {"mib", 1ULL << 20},
    {"gib", 1ULL << 30},
    {"tib", 1ULL << 40},
    {"pib", 1ULL << 50},
    {"kb", 1ULL << 10},
    {"mb", 1ULL << 20},
    {"gb", 1ULL << 30},
    {"tb", 1ULL << 40},
    {"pb", 1ULL << 50},
    {"b", 1},
}};

std::optional<Bytes> Cursor::eat_size() noexcept {
  __extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning
  constexpr std::size_t kMaxIntDigits = 20;      // 10^20 * 2^50 < 2^128
  constexpr std::size_t kMaxFracDigits = 18;     // further digits are ignored
  std::size_t p = pos;
  const std::size_t int_start = p;
  u128 whole = 0;
  while (p < f.size() && is_digit(f[p])) {
    if (p - int_start == kMaxIntDigits) return std::nullopt;  // far above 2^64 bytes
    whole = whole * 10 + static_cast<unsigned>(f[p] - '0');
    ++p;
  }
  if (p == int_start) return std::nullopt;
  u128 frac = 0;
  u128 scale = 1;
  if (p + 1 < f.size() && f[p] == '.' && is_digit(f[p + 1])) {
    ++p;
    std::size_t digits = 0;
    while (p < f.size() && is_digit(f[p])) {
      if (digits < kMaxFracDigits) {
        frac = frac * 10 + static_cast<unsigned>(f[p] - '0');
        scale *= 10;
        ++digits;
      }
      ++p;
    }
  }
  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (f.substr(p).starts_with(u.name)) {
      unit = &u;
      break;
    }
  }
  if (unit == nullptr) return std::nullopt;
  p += unit->name.size();
  // The printed figure times the unit, to the nearest byte (half up).
  const u128 value = whole * unit->bytes + (frac * unit->bytes + scale / 2) / scale;
  if (value > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  pos = p;
  return Bytes{static_cast<std::uint64_t>(value)};
}

std::string Cursor::why_not_size() const {
  const std::string_view ahead = f.substr(pos, kFigureLook);
  // The figure as printed (flattened: lower case, no spaces), up to its unit.
  std::size_t n = 0;
  while (n < ahead.size() && (is_digit(ahead[n]) || ahead[n] == '-' || ahead[n] == '+' || ahead[n] == '.' ||
                              ahead[n] == 'e' || ahead[n] == 'n' || ahead[n] == 'a' || ahead[n] == 'i' ||
                              ahead[n] == 'f'))
    ++n;
  const std::string_view number = ahead.substr(0, n);
  std::size_t unit_len = 0;
  for (const Unit& u : kUnits)
    if (ahead.substr(n).starts_with(u.name)) {
      unit_len = u.name.size();
      break;
    }
  if (number.empty() || unit_len == 0) return {};
  const std::string shown(ahead.substr(0, n + unit_len));
  if (number.starts_with("-") && number.size() > 1 && is_digit(number[1]))
    return fmt::format("'{}' is negative", shown);
  if (number.starts_with("nan") || number.starts_with("inf") || number.starts_with("-nan") ||
      number.starts_with("-inf") || number.starts_with("+"))
    return fmt::format("'{}' is not a number of bytes", shown);
  if (is_digit(number[0])) {
    Cursor probe{f, pos};
    if (!probe.eat_size()) return fmt::format("'{}' is past 2^64 - 1 bytes (16 EiB)", shown);
  }
  return {};
}

// Backends that prefix PyTorch's allocator messages, as they appear (lower case) and as shown.
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kBackends{{
    {"cuda", "CUDA"},
    {"hip", "HIP"},
    {"xpu", "XPU"},
    {"musa", "MUSA"},
    {"npu", "NPU"},
    {"mlu", "MLU"},
    {"dpcpp", "DPCPP"},
    {"mps", "MPS"},
}};

// The backend word that ends exactly at flat position `end`, if any: {shown name, length}.
std::pair<std::string_view, std::size_t> backend_before(std::string_view f, std::size_t end) {
  for (const auto& [low, shown] : kBackends) {
    if (end >= low.size() && f.substr(end - low.size(), low.size()) == low) {
      return {shown, low.size()};
    }
  }
  return {{}, 0};
}

// Text for a human: whitespace runs become one space, control bytes and invalid UTF-8 become
// '?', at most `cap` bytes (never cutting a character). Keeps JSON dumps from throwing.
std::string clean_text(std::string_view in, std::size_t cap) {
  std::string out;
  out.reserve(std::min(in.size(), cap));
  bool space = false;
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (is_space(static_cast<char>(c))) {
      space = !out.empty();
      ++i;
      continue;
    }
    std::size_t len = 1;
    bool ok = true;
    if (c < 0x20 || c == 0x7f) {
      ok = false;
    } else if (c >= 0x80) {
      // Well-formed UTF-8 only (RFC 3629): no overlongs, no surrogates, <= U+10FFFF.
      if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
      } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
      } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
      } else {
        ok = false;
      }
      if (ok && i + len > in.size()) ok = false;
      for (std::size_t k = 1; ok && k < len; ++k) {
        if ((static_cast<unsigned char>(in[i + k]) & 0xc0) != 0x80) ok = false;
      }
      if (ok && len == 3) {
        const auto c1 = static_cast<unsigned char>(in[i + 1]);
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0)) ok = false;
      }
      if (ok && len == 4) {
        const auto c1 = static_cast<unsigned char>(in[i + 1]);
        if ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90)) ok = false;
      }
    }
    if (!ok) len = 1;
    const std::size_t need = len + (space ? 1 : 0);
    if (out.size() + need > cap) break;
    if (space) out.push_back(' ');
    space = false;
    if (ok) {
      out.append(in.substr(i, len));
    } else {
      out.push_back('?');
    }
    i += len;
  }
  return out;
}

enum class AnchorKind {
  numbers,        // "<backend> out of memory. Tried to allocate": current or legacy
  mps,            // "MPS backend out of memory ("
  runtime_error,  // "CUDA error: out of memory", THC, a backend named without figures
  cublas,         // "CUBLAS_STATUS_ALLOC_FAILED"
  bare_error,     // "OutOfMemoryError:" not followed by PyTorch's text
  summary,        // "memory summary, device ID"
};

struct Anchor {
  std::size_t start;  // flat position where the message starts (its first piece)
  std::size_t body;   // flat position where reading continues
  AnchorKind kind;
  std::string_view backend;
};

// Finds every anchor, sorted by start.
std::vector<Anchor> find_anchors(std::string_view f) {
  std::vector<Anchor> out;
  constexpr std::string_view kOom = "outofmemory";
  for (std::size_t p = f.find(kOom); p != std::string_view::npos; p = f.find(kOom, p + 1)) {
    const std::size_t after = p + kOom.size();
    const std::string_view rest = f.substr(after);
    if (rest.starts_with(".triedtoallocate")) {
      const auto [name, len] = backend_before(f, p);
      out.push_back({p - len, after + 16, AnchorKind::numbers, name});
      continue;
    }
    if (p >= 10 && f.substr(p - 10, 10) == "mpsbackend") {
      out.push_back({p - 10, after, AnchorKind::mps, "MPS"});
      continue;
    }
    // "<backend> error: out of memory", "<backend> driver error:", "cuda runtime error (2) :".
    for (const std::string_view err : {std::string_view{"error:"}, std::string_view{"error(2):"}}) {
      if (p < err.size() || f.substr(p - err.size(), err.size()) != err) continue;
      std::size_t word_end = p - err.size();
      for (const std::string_view mid : {std::string_view{"driver"}, std::string_view{"runtime"}}) {
        if (word_end >= mid.size() && f.substr(word_end - mid.size(), mid.size()) == mid) {
          word_end -= mid.size();
          break;
        }
      }
      const auto [name, len] = backend_before(f, word_end);
      if (len > 0) out.push_back({word_end - len, after, AnchorKind::runtime_error, name});
      break;
    }
    if (!out.empty() && out.back().body == after) continue;
    // "CUDA out of memory" with no figures; not "CUDAOutOfMemoryError" (a type name).
    if (rest.starts_with("error")) continue;
    const auto [name, len] = backend_before(f, p);
    if (len > 0 && name != "MPS") out.push_back({p - len, after, AnchorKind::runtime_error, name});
  }
  constexpr std::string_view kCublas = "cublas_status_alloc_failed";
  for (std::size_t p = f.find(kCublas); p != std::string_view::npos; p = f.find(kCublas, p + 1)) {
    out.push_back({p, p + kCublas.size(), AnchorKind::cublas, "CUDA"});
  }
  constexpr std::string_view kError = "outofmemoryerror:";
  for (std::size_t p = f.find(kError); p != std::string_view::npos; p = f.find(kError, p + 1)) {
    // Source lines in a traceback ("except torch.OutOfMemoryError:") are not messages.
    const std::size_t from = p >= 24 ? p - 24 : 0;
    if (f.substr(from, p - from).find("except") != std::string_view::npos) continue;
    out.push_back({p, p + kError.size(), AnchorKind::bare_error, {}});
  }
  constexpr std::string_view kSummary = "memorysummary,deviceid";
  for (std::size_t p = f.find(kSummary); p != std::string_view::npos; p = f.find(kSummary, p + 1)) {
    out.push_back({p, p + kSummary.size(), AnchorKind::summary, {}});
  }
  std::sort(out.begin(), out.end(), [](const Anchor& a, const Anchor& b) { return a.start < b.start; });
  // A bare "OutOfMemoryError:" right before PyTorch's own text is that message's type name.
  std::vector<Anchor> kept;
  kept.reserve(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].kind == AnchorKind::bare_error && i + 1 < out.size() &&
        out[i + 1].kind != AnchorKind::summary && out[i + 1].start <= out[i].body + 64) {
      continue;
    }
    kept.push_back(out[i]);
  }
  return kept;
}

// The allocator setting the message recommends, read from the hint that follows the figures.
void read_hints(std::string_view region, OomMessage& m) {
  constexpr std::string_view kConf = "alloc_conf=expandable_segments";
  const std::size_t c = region.find(kConf);
  if (c != std::string_view::npos) {
    // Whitespace is gone, so the name starts at the last "pytorch_" before it:
    // "pytorch_cuda_", "pytorch_hip_" or just "pytorch_" (the device-generic spelling).
    const std::size_t b = region.rfind("pytorch_", c);
    const std::string_view name =
        b == std::string_view::npos ? std::string_view{} : region.substr(b, c + 10 - b);
    if (!name.empty() && name.size() <= 32 &&
        std::all_of(name.begin(), name.end(), [](char ch) { return is_alpha(ch) || ch == '_'; })) {
      // Shown in upper case, the way the variable is spelled.
      m.alloc_conf_var = upper(name);
    }
  }
  m.mentions_max_split_size = region.find("max_split_size_mb") != std::string_view::npos;
}

// Reads "current" text after "Tried to allocate S".
void read_current(Cursor& c, OomMessage& m) {
  m.format = "current";
  // ". GPU 0 has a total capacity of S" (generic allocators: "Device 0", MLU: "MLU 0").
  bool device = false;
  for (const std::string_view word : {"gpu", "device", "mlu", "npu", "xpu"}) {
    if (c.eat(word)) {
      device = true;
      break;
    }
  }
  if (!device) return;
  if (auto n = c.eat_uint(6)) m.gpu = static_cast<int>(*n);
  if (!c.eat("hasatotalcapacityof") && !c.eat("hasatotalcapactyof")) return;
  m.total = c.eat_size();
  if (!m.total) return;
  if (c.eat("ofwhich")) {
    m.free = c.eat_size();
    if (!m.free || !c.eat("isfree")) return;
  }
  c.eat(".");
  // proc_info and allowed_info, in any number.
  for (;;) {
    if (c.eat("includingnon-pytorchmemory,thisprocesshas")) {
      m.process_in_use = c.eat_size();
      if (!m.process_in_use || !c.eat("memoryinuse")) return;
      c.eat(".");
      continue;
    }
    if (c.starts_with("process") && is_digit(c.peek(7))) {
      c.eat("process");
      const auto pid = c.eat_uint(19);
      if (!pid || !c.eat("has")) return;
      const auto used = c.eat_size();
      if (!used || !c.eat("memoryinuse")) return;
      m.others.push_back({*pid, *used});
      c.eat(".");
      continue;
    }
    if (is_digit(c.peek())) {
      Cursor probe = c;
      const auto allowed = probe.eat_size();
      if (allowed && probe.eat("allowed;")) {
        m.allowed = allowed;
        c = probe;
        continue;
      }
    }
    break;
  }
  if (!c.eat("oftheallocatedmemory")) return;
  m.allocated_by_pytorch = c.eat_size();
  if (!m.allocated_by_pytorch || !c.eat("isallocatedbypytorch,")) return;
  if (c.eat("with")) {
    m.private_pools = c.eat_size();
    if (!m.private_pools || !c.eat("allocatedinprivatepools")) return;
    // "(e.g., CUDA Graphs), "
    if (c.eat("(e.g.,cudagraphs)")) c.eat(",");
  }
  if (!c.eat("and")) return;
  m.reserved_unallocated = c.eat_size();
  if (!m.reserved_unallocated) return;
  if (c.eat("isreservedbypytorchbutunallocated")) {
    c.eat(".");
    m.complete = true;
  }
}

// Reads "legacy" text after "Tried to allocate S": "(GPU 0; S total capacity; ...)".
void read_legacy(Cursor& c, OomMessage& m) {
  m.format = "legacy";
  while (is_alpha(c.peek())) ++c.pos;  // "gpu", "npu", ...
  if (auto n = c.eat_uint(6)) m.gpu = static_cast<int>(*n);
  if (!c.eat(";")) return;
  for (int item = 0; item < 16; ++item) {
    const auto size = c.eat_size();
    if (!size) return;
    const std::size_t label_start = c.pos;
    while (!c.at_end() && c.peek() != ';' && c.peek() != ')' && c.pos - label_start < 64) ++c.pos;
    const std::string_view label = c.f.substr(label_start, c.pos - label_start);
    if (label == "totalcapacity") {
      m.total = size;
    } else if (label == "alreadyallocated") {
      m.allocated_by_pytorch = size;
    } else if (label == "free") {
      m.free = size;
    } else if (label == "allowed") {
      m.allowed = size;
    } else if (label == "reservedintotalbypytorch") {
      m.reserved_total = size;
    } else if (label == "cached") {
      // PyTorch <= 1.4: amount_cached - amount_allocated, i.e. reserved but unallocated.
      m.reserved_unallocated = size;
    }  // else: "inactive", "current active" (forks) and unknown labels carry nothing we use
    if (c.eat(")")) {
      m.complete = m.total && m.allocated_by_pytorch && (m.reserved_total || m.reserved_unallocated);
      return;
    }
    if (!c.eat(";")) return;
  }
}

// Reads an MPS message after "MPS backend out of memory".
void read_mps(Cursor& c, OomMessage& m) {
  m.format = "mps";
  if (!c.eat("(mpsallocated:")) return;
  m.allocated_by_pytorch = c.eat_size();
  if (!m.allocated_by_pytorch || !c.eat(",otherallocations:")) return;
  m.other_allocations = c.eat_size();
  if (!m.other_allocations || !c.eat(",maxallowed:")) return;
  m.total = c.eat_size();
  if (!m.total || !c.eat(").triedtoallocate")) return;
  m.requested = c.eat_size();
  if (!m.requested || !c.eat("on")) return;
  if ((c.eat("shared") || c.eat("private")) && c.eat("pool")) {
    c.eat(".");
    m.complete = true;
  }
}

// Reads a torch.cuda.memory_summary() table after "memory summary, device ID".
MemorySummary read_summary(Cursor c) {
  MemorySummary s;
  if (auto n = c.eat_uint(6)) s.device = static_cast<int>(*n);
  // A whole summary is about 2,000 characters without whitespace; rows further away belong to
  // something else.
  constexpr std::size_t kSummarySpan = 6000;
  const std::string_view f = c.f.substr(c.pos, kSummarySpan);
  const auto count_after = [&](std::string_view key) -> std::optional<std::uint64_t> {
    const std::size_t k = f.find(key);
    if (k == std::string_view::npos) return std::nullopt;
    Cursor v{f, k + key.size()};
    return v.eat_uint(18);
  };
  s.ooms = count_after("ooms:");
  s.malloc_retries = count_after("mallocretries:");
  const auto row = [&](std::string_view label, SummaryRow& out) {
    const std::size_t k = f.find(label);
    if (k == std::string_view::npos) return;
    Cursor v{f, k + label.size()};
    std::array<std::optional<Bytes>*, 4> cells{&out.current, &out.peak, &out.allocated_total,
                                               &out.freed_total};
    for (auto* cell : cells) {
      *cell = v.eat_size();
      if (!*cell || !v.eat("|")) return;
    }
  };
  row("|allocatedmemory|", s.allocated);
  row("|activememory|", s.active);
  row("|requestedmemory|", s.requested);
  row("|gpureservedmemory|", s.reserved);
  row("|non-releasablememory|", s.non_releasable);
  return s;
}

// The original-text line around `offset`, for messages without figures, looked for in a
// window: the line's start when it is at most kLineBack bytes before `offset` (else kLineLead
// bytes before it, so the excerpt still shows the message), its end at most kLineAhead bytes
// after. Searching the whole line for every anchor on it was quadratic: a 1.3 MB line of
// repeated OOM text took 18 s (issue #14).
constexpr std::size_t kLineBack = 300, kLineLead = 100, kLineAhead = 4096;
std::string_view line_around(std::string_view text, std::size_t offset) {
  if (offset > text.size()) offset = text.size();
  const std::size_t from = offset > kLineBack ? offset - kLineBack : 0;
  std::size_t b = offset;
  while (b > from && text[b - 1] != '\n') --b;
  if (b == from && from > 0 && text[b - 1] != '\n') {
    b = offset - kLineLead;
    while (b < offset && text[b] != ' ') ++b;  // start at a word
    if (b < offset) ++b;
  }
  const std::size_t limit = std::min(text.size(), offset + kLineAhead);
  std::size_t e = offset;
  while (e < limit && text[e] != '\n') ++e;
  return text.substr(b, e - b);
}

// A message whose figures cannot be trusted: all of them are dropped (no diagnosis is built on
// a figure vramfit had to guess), and `why` says what was wrong.
void make_unreadable(OomMessage& m, std::string why) {
  m.requested.reset();
  m.total.reset();
  m.free.reset();
  m.process_in_use.reset();
  m.allocated_by_pytorch.reset();
  m.private_pools.reset();
  m.reserved_unallocated.reset();
  m.reserved_total.reset();
  m.allowed.reset();
  m.other_allocations.reset();
  m.others.clear();
  m.complete = false;
  m.format = "unreadable";
  m.unreadable = std::move(why);
}

// Checks the figures read: a card of 0 bytes, or figures adding up past 2^64 bytes, are no real
// device's. The sums the diagnosis makes are sums of these figures, so they cannot overflow.
void check_figures(OomMessage& m) {
  if (m.total && m.total->value() == 0) {
    make_unreadable(m, "the card's total capacity reads 0 bytes");
    return;
  }
  __extension__ typedef unsigned __int128 u128;
  u128 sum = 0;
  for (const auto* b : {&m.requested, &m.total, &m.free, &m.process_in_use, &m.allocated_by_pytorch,
                        &m.private_pools, &m.reserved_unallocated, &m.reserved_total, &m.allowed,
                        &m.other_allocations})
    if (*b) sum += (*b)->value();
  for (const OtherProcess& o : m.others) sum += o.in_use.value();
  if (sum > std::numeric_limits<std::uint64_t>::max())
    make_unreadable(m, "its figures add up to more than 2^64 bytes (16 EiB)");
}

constexpr std::size_t kMaxKeptMessages = 10000;
constexpr std::size_t kExcerptCap = 1000;

}  // namespace

const OomMessage* OomScan::chosen() const noexcept {
  const std::size_t i = chosen_index();
  return i < messages.size() ? &messages[i] : nullptr;
}

std::size_t OomScan::chosen_index() const noexcept {
  for (std::size_t i = messages.size(); i > 0; --i) {
    if (messages[i - 1].has_numbers()) return i - 1;
  }
  return messages.empty() ? messages.size() : messages.size() - 1;
}

OomScan scan(std::string_view text) noexcept {
  OomScan out;
  try {
    const Flat flat(text);
    const std::string_view f = flat.view();
    const std::vector<Anchor> anchors = find_anchors(f);

    // Line numbers, counted incrementally: anchors come in text order.
    std::size_t line_offset = 0;
    std::size_t line = 1;
    const auto line_of = [&](std::size_t original) {
      original = std::min(original, text.size());
      if (original < line_offset) {  // not expected; recount from the start
        line_offset = 0;
        line = 1;
      }
      line +=
          static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(line_offset),
                                              text.begin() + static_cast<std::ptrdiff_t>(original), '\n'));
      line_offset = original;
      return line;
    };

    std::optional<MemorySummary> last_oom_summary;
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      const Anchor& a = anchors[i];
      const std::size_t end = i + 1 < anchors.size() ? anchors[i + 1].start : f.size();
      const std::string_view region = f.substr(0, std::max(end, a.body));
      Cursor c{region, a.body};

      if (a.kind == AnchorKind::summary) {
        MemorySummary s = read_summary(c);
        s.line = line_of(flat.original(a.start));
        ++out.summaries;
        if (s.ooms && *s.ooms > 0) last_oom_summary = s;
        out.summary = std::move(s);
        continue;
      }

      OomMessage m;
      m.backend = std::string(a.backend);
      const std::size_t original_start = flat.original(a.start);
      m.line = line_of(original_start);
      switch (a.kind) {
        case AnchorKind::numbers:
          m.requested = c.eat_size();
          if (m.requested) {
            if (c.eat(".")) {
              read_current(c, m);
            } else if (c.eat("(")) {
              read_legacy(c, m);
            } else {
              m.format = "truncated";  // the figures after the request are missing
            }
          } else {
            m.format = "truncated";
          }
          break;
        case AnchorKind::mps: read_mps(c, m); break;
        case AnchorKind::runtime_error:
        case AnchorKind::cublas:
        case AnchorKind::bare_error:
          m.format = "runtime_error";
          m.complete = true;
          break;
        case AnchorKind::summary: break;
      }

      if (a.kind == AnchorKind::numbers || a.kind == AnchorKind::mps) {
        // Reading stopped at a figure it could not take (negative, NaN, past 16 EiB): say so,
        // rather than report the message as cut short.
        if (!m.complete)
          if (std::string why = c.why_not_size(); !why.empty()) make_unreadable(m, std::move(why));
        if (m.format != "unreadable") check_figures(m);
      }
      if (m.format == "runtime_error") {
        m.excerpt = clean_text(line_around(text, original_start), 300);
      } else {
        // The hint that follows the figures ("... try setting PYTORCH_CUDA_ALLOC_CONF=...").
        const std::size_t hint_end = std::min(end, c.pos + 400);
        read_hints(f.substr(c.pos, hint_end > c.pos ? hint_end - c.pos : 0), m);
        // The excerpt runs through the last piece read.
        const std::size_t last = c.pos > a.start ? c.pos - 1 : a.start;
        const std::size_t original_end = std::min(text.size(), flat.original(last) + 1);
        m.excerpt = clean_text(text.substr(original_start, original_end - original_start), kExcerptCap);
      }
      out.messages.push_back(std::move(m));
      ++out.messages_found;
      if (out.messages.size() > kMaxKeptMessages) {
        // Keep the most recent ones: the message to explain is near the end.
        out.messages.erase(out.messages.begin(),
                           out.messages.begin() + static_cast<std::ptrdiff_t>(kMaxKeptMessages / 2));
      }
    }

    if (out.messages.empty() && last_oom_summary) {
      const MemorySummary& s = *last_oom_summary;
      OomMessage m;
      m.format = "memory_summary";
      m.backend = "CUDA";
      m.gpu = s.device;
      m.allocated_by_pytorch = s.allocated.current;
      m.reserved_total = s.reserved.current;
      m.complete = s.allocated.current && s.reserved.current;
      m.line = s.line;
      m.excerpt = fmt::format("torch.cuda.memory_summary(): CUDA OOMs: {}", *s.ooms);
      out.messages.push_back(std::move(m));
      out.messages_found = 1;
    }
  } catch (...) {
    // Only allocation failure can get here (the text is larger than memory allows): report
    // what was found so far rather than crash.
  }
  return out;
}

std::optional<Bytes> parse_torch_size(std::string_view text) noexcept {
  try {
    std::string flat;
    flat.reserve(text.size());
    for (char ch : text) {
      if (!is_space(ch)) flat.push_back(to_lower(ch));
    }
    Cursor c{flat, 0};
    auto v = c.eat_size();
    if (!v || !c.at_end()) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::string format_torch_size(Bytes b) {
  const std::uint64_t v = b.value();
  // c10's format_size: "bytes" up to 1024 inclusive, KiB up to 1 MiB, MiB up to 1 GiB, else GiB.
  if (v <= 1024) return fmt::format("{} bytes", v);
  const std::uint64_t unit = v <= (1ULL << 20)   ? (1ULL << 10)
                             : v <= (1ULL << 30) ? (1ULL << 20)
                                                 : (1ULL << 30);
  const std::string_view name = unit == (1ULL << 10) ? "KiB" : unit == (1ULL << 20) ? "MiB" : "GiB";
  std::uint64_t whole = v / unit;
  // rem < unit <= 2^30, so rem * 100 cannot overflow.
  std::uint64_t hundredths = (v % unit * 100 + unit / 2) / unit;
  if (hundredths == 100) {
    ++whole;
    hundredths = 0;
  }
  return fmt::format("{}.{:02} {}", whole, hundredths, name);
}

Bytes allocator_request_size(Bytes bytes) {
  constexpr std::uint64_t kMinBlockSize = 512;           // round_size granule
  constexpr std::uint64_t kSmallSize = 1ULL << 20;       // small pool: requests <= 1 MiB
  constexpr std::uint64_t kSmallBuffer = 2ULL << 20;     // segment for small requests
  constexpr std::uint64_t kLargeBuffer = 20ULL << 20;    // segment for 1-10 MiB requests
  constexpr std::uint64_t kMinLargeAlloc = 10ULL << 20;  // from here, round to kRoundLarge
  constexpr std::uint64_t kRoundLarge = 2ULL << 20;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const auto round_up = [&](std::uint64_t v, std::uint64_t g) {
    return v > kMax - (g - 1) ? kMax : (v + g - 1) / g * g;
  };
  const std::uint64_t size =
      bytes.value() < kMinBlockSize ? kMinBlockSize : round_up(bytes.value(), kMinBlockSize);
  if (size <= kSmallSize) return Bytes{kSmallBuffer};
  if (size < kMinLargeAlloc) return Bytes{kLargeBuffer};
  return Bytes{round_up(size, kRoundLarge)};
}

}  // namespace vramfit::doctor
