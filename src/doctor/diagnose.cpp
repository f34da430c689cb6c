#include "vramfit/doctor/diagnose.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "vramfit/core/fixes.hpp"

namespace vramfit::doctor {

namespace {

using OptBytes = std::optional<Bytes>;
__extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

// --- thresholds, each with where it comes from ------------------------------------------------

// huge_request: one request of at least a quarter of the card (the definition). At that
// size it is one tensor that no ordinary activation reaches: logits or attention scores.
constexpr std::uint64_t kHugeShareDenominator = 4;
// fragmentation by share: reserved-but-unallocated of at least a fifth of what PyTorch reserved,
// and at least 256 MiB. On the H200 truth case qwen2.5-1.5b b16 s4096 it was 30.98 of
// 134.38 GiB (23%), and expandable segments brought it down to 425.68 MiB
// (shared/truth/results/expandable-segments.jsonl): a share that large is reclaimable.
constexpr std::uint64_t kFragShareDenominator = 5;
constexpr std::uint64_t kFragMinimum = 256 * kMiB;
// ... and, when the message has a request, at least a quarter of what was missing (request -
// free): in the truth case above 30.98 GiB against 32.82 GiB missing.
constexpr std::uint64_t kFragOfShortfallDenominator = 4;
// other_process: other processes holding at least 5% of the card and 256 MiB.
constexpr std::uint64_t kOthersShareDenominator = 20;
constexpr std::uint64_t kOthersMinimum = 256 * kMiB;
// Memory a process holds outside PyTorch's allocator (CUDA context, cuBLAS/cuDNN workspaces,
// kernel images). Measured on an H200 (shared/truth/results/public.jsonl): 684.8 MiB right after
// init (non_torch_bytes_after_init 718077952), up to 1.15 GiB during training (1238171648).
// Beyond this allowance, memory outside PyTorch is someone else's.
constexpr std::uint64_t kContextAllowance = 3 * kGiB / 2;
// Unlisted memory is reported as other processes' when it is at least 10% of the card and 1 GiB.
constexpr std::uint64_t kUnlistedShareDenominator = 10;
constexpr std::uint64_t kUnlistedMinimum = kGiB;
// "Near full": the job, with its cache perfectly packed, still used 95% of what it could have.
constexpr std::uint64_t kNearFullPermille = 950;
// A request matches an expected tensor within 2% (the tolerance).
constexpr std::uint64_t kMatchPermille = 20;

// --- arithmetic that never throws (the figures come from arbitrary text) ---------------------

Bytes sat_add(Bytes a, Bytes b) {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  return Bytes{a.value() > max - b.value() ? max : a.value() + b.value()};
}
Bytes sat_sub(Bytes a, Bytes b) { return Bytes::saturating_sub(a, b); }
Bytes half(Bytes a) { return Bytes{a.value() / 2}; }
// part / whole in percent, rounded half up; 0 when whole is 0.
std::uint64_t percent(Bytes part, Bytes whole) {
  if (whole.value() == 0) return 0;
  return static_cast<std::uint64_t>((u128{part.value()} * 100 + whole.value() / 2) / whole.value());
}
// The same as text, "<1%" for a non-zero share that rounds to 0.
std::string pct(Bytes part, Bytes whole) {
  const std::uint64_t p = percent(part, whole);
  return p == 0 && part.value() > 0 ? std::string("<1%") : fmt::format("{}%", p);
}
// a >= whole / den, exactly.
bool share_at_least(Bytes a, Bytes whole, std::uint64_t den) {
  return u128{a.value()} * den >= whole.value();
}

std::string S(Bytes b) { return format_torch_size(b); }
std::string S(const OptBytes& b) { return b ? format_torch_size(*b) : std::string("?"); }

// --- the fixes: the one table of core/fixes.hpp ------------------------------------------------
// The seed (shared/seed/*.txt, "Les correctifs, dans l'ordre") lists six fixes in that order;
// the others come from the classification (other processes, huge tensors, the memory cap) and
// from the seed's closing section ("Quand passer à un GPU avec plus de VRAM"). The doctor
// suggests the rows that carry a hint.

const FixRow& fix_row(std::string_view id) {
  const auto f = fix_of(id);
  return f ? vramfit::fix_row(*f) : kFixTable.back();  // not reached: every id used below is in the table
}

bool has(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Everything the classification and the reasons need.
struct Facts {
  const OomMessage* m = nullptr;
  Diagnosis* d = nullptr;
  OptBytes R, T, F, A, U, Rs, O;
  bool free_known = false;
  bool covers = false;         // the request would fit in free + reserved-but-unallocated
  bool free_unusable = false;  // the driver reported at least the request free
  bool shortage = false;       // it would not fit even then
  bool frag_large = false;     // reserved-but-unallocated is a large share of reserved
  bool huge = false;
  bool others_significant = false;
  bool others_blocking = false;  // without the other processes it would fit
  bool unlisted = false;         // much memory held outside PyTorch by unlisted owners
  OptBytes unlisted_bytes;
  bool limit_blocking = false;  // the per-process cap, not the card, stopped it
  bool near_full = false;
  std::string conf_var;
};

std::string expandable_title(const Facts& f) {
  return fmt::format("Set {}=expandable_segments:True", f.conf_var);
}

// "process 1234 (3.20 GiB), process 99 (1.00 GiB) and 3 more"
std::string others_names(const std::vector<OtherProcess>& others) {
  std::string out;
  for (std::size_t i = 0; i < others.size() && i < 4; ++i) {
    if (!out.empty()) out += ", ";
    out += fmt::format("process {} ({})", others[i].pid, S(others[i].in_use));
  }
  if (others.size() > 4) out += fmt::format(" and {} more", others.size() - 4);
  return out;
}

// --- why each fix applies: one function a fix id ----------------------------------------------

std::string reason_reduce_batch(const Facts& f) {
  if (f.huge && f.R) {
    return fmt::format("the {} tensor grows with the batch: halving the batch halves it to {}", S(f.R),
                       S(half(*f.R)));
  }
  if (f.R && f.free_known) {
    return fmt::format(
        "the failed request was {} with {} free: halving the batch halves activation requests "
        "(this one to about {}) and the activations held",
        S(f.R), S(f.F), S(half(*f.R)));
  }
  return "activations grow with the batch: halve it until the error stops, and accumulate "
         "gradients to keep the effective batch";
}

std::string reason_mixed_precision(const Facts& f) {
  if (f.R) {
    return fmt::format(
        "if the {} request is an fp32 activation, bf16 makes it {}; 16-bit activations take "
        "about half the memory (skip if autocast is already on)",
        S(f.R), S(half(*f.R)));
  }
  return "16-bit activations take about half the memory of 32-bit ones (skip if autocast is "
         "already on)";
}

std::string reason_gradient_checkpointing(const Facts& f) {
  if (f.A) {
    return fmt::format(
        "in training, activations are much of the {} PyTorch held; checkpointing keeps them "
        "only at layer boundaries and recomputes the rest in backward (one more forward pass)",
        S(f.A));
  }
  return "in training, checkpointing keeps activations only at layer boundaries and recomputes "
         "the rest in backward (one more forward pass)";
}

std::string reason_quantize(const Facts& f) {
  const std::string held =
      f.A ? fmt::format("weights are part of the {} allocated; ", S(f.A)) : std::string();
  return held +
         "8-bit weights take half and 4-bit a quarter of 16-bit ones (7B parameters: 14 GB, "
         "7 GB, 3.5 GB)";
}

std::string reason_inference_mode(const Facts& f) {
  return f.A ? fmt::format(
                   "only if this ran inference: without it PyTorch keeps, within the {} "
                   "allocated, what a backward pass would need",
                   S(f.A))
             : std::string(
                   "only if this ran inference: without it PyTorch keeps what a "
                   "backward pass would need");
}

std::string reason_expandable_segments(const Facts& f) {
  const bool numbers = f.R && f.T;
  std::string r;
  if (f.covers) {
    r = fmt::format(
        "{} is reserved by PyTorch but unallocated and {} is free: together {}, at least the {} "
        "request; expandable segments let the allocator reuse the cache instead of needing a new block",
        S(f.U), S(f.F.value_or(Bytes{})), S(sat_add(f.F.value_or(Bytes{}), *f.U)), S(f.R));
  } else if (f.free_unusable) {
    r = fmt::format(
        "the driver reported {} free yet no {} piece could be had; expandable segments map "
        "memory in pages instead of one contiguous block (Linux only)",
        S(f.F), S(f.R));
  } else if (f.frag_large && f.shortage && f.U) {
    r = fmt::format(
        "{} ({} of reserved) is cached but unallocated and expandable segments return most of "
        "it, but free + cached ({}) is below the {} request: this alone will not fix it",
        S(f.U), pct(*f.U, f.Rs.value_or(Bytes{1})), S(sat_add(f.F.value_or(Bytes{}), *f.U)), S(f.R));
  } else if (f.frag_large && f.U) {
    r = fmt::format(
        "{} ({} of what PyTorch reserved) is cached but unallocated; expandable segments "
        "return most of it",
        S(f.U), pct(*f.U, f.Rs.value_or(Bytes{1})));
  } else if (!numbers) {
    r = "helps when the allocator's message shows much memory reserved but unallocated";
  } else {
    r = "part of what PyTorch reserved is cached but unallocated";
  }
  if (f.m->mentions_max_split_size) {
    r += fmt::format(
        " (this PyTorch still suggests max_split_size_mb: if it rejects expandable_segments, "
        "use {}=max_split_size_mb:128)",
        f.conf_var);
  }
  return r;
}

std::string reason_free_other_processes(const Facts& f) {
  const Diagnosis& d = *f.d;
  if (!d.others.empty() && d.other_processes) {
    std::string r =
        d.others.size() == 1
            ? fmt::format("process {} holds {} of the card", d.others[0].pid, S(d.others[0].in_use))
            : fmt::format("{} hold {} of the card", others_names(d.others), S(d.other_processes));
    if (f.others_blocking) {
      r += fmt::format(": without {} the {} request would fit", d.others.size() == 1 ? "it" : "them",
                       S(f.R));
    }
    return r;
  }
  if (f.unlisted && f.unlisted_bytes) {
    return fmt::format(
        "about {} beyond a CUDA context is held outside this process's PyTorch; nvidia-smi "
        "shows by whom",
        S(f.unlisted_bytes));
  }
  return "an out-of-memory error without figures often means the card was already full when "
         "the CUDA call ran: check nvidia-smi for other processes";
}

std::string reason_raise_memory_fraction(const Facts& f) {
  return fmt::format("the process is capped at {}; {} reserved + {} requested exceeds it{}",
                     S(f.m->allowed), S(f.Rs), S(f.R),
                     f.free_known ? fmt::format(" while the card has {} free", S(f.F)) : "");
}

std::string reason_chunked_logits(const Facts& f) {
  return fmt::format(
      "logits are batch x seq x vocab (x 4 bytes in fp32); a chunked loss, or logits only "
      "where needed, never holds the whole {}",
      S(f.R));
}

std::string reason_fused_attention(const Facts& f) {
  return fmt::format(
      "eager attention holds batch x heads x seq x seq scores; SDPA and FlashAttention work in "
      "tiles and never hold a {} score tensor",
      S(f.R));
}

std::string reason_shorter_sequence(const Facts& f) {
  return fmt::format(
      "logits grow linearly and attention scores quadratically with the sequence: halving it "
      "makes the {} tensor half or a quarter",
      S(f.R));
}

std::string reason_larger_gpu(const Facts& f) {
  const Diagnosis& d = *f.d;
  if (d.job_needs && d.card_available && d.over_card) {
    return fmt::format(
        "this process needed at least {} at the failure point, {} more than the {} the card "
        "offers, and the peak comes later; if the fixes above are not enough, move up",
        S(d.job_needs), S(d.over_card), S(d.card_available));
  }
  if (f.near_full && d.job_needs && d.card_available) {
    return fmt::format(
        "even with a perfectly packed cache the job used {} of the {} it could have ({}) when "
        "it failed; if the fixes above are not enough, move up",
        S(d.job_needs), S(d.card_available), pct(*d.job_needs, *d.card_available));
  }
  return "if the fixes above are not enough, the job needs more memory than this card has";
}

/// Why each fix applies to this failure, in the fix table's ids (core/fixes.hpp).
struct Reason {
  std::string_view id;
  std::string (*text)(const Facts&);
};
constexpr Reason kReasons[] = {
    {"reduce_batch", reason_reduce_batch},
    {"mixed_precision", reason_mixed_precision},
    {"gradient_checkpointing", reason_gradient_checkpointing},
    {"quantize", reason_quantize},
    {"inference_mode", reason_inference_mode},
    {"expandable_segments", reason_expandable_segments},
    {"free_other_processes", reason_free_other_processes},
    {"raise_memory_fraction", reason_raise_memory_fraction},
    {"chunked_logits", reason_chunked_logits},
    {"fused_attention", reason_fused_attention},
    {"shorter_sequence", reason_shorter_sequence},
    {"larger_gpu", reason_larger_gpu},
};

std::string reason_for(std::string_view id, const Facts& f) {
  for (const auto& r : kReasons)
    if (r.id == id) return r.text(f);
  return {};
}

void add_fix(Diagnosis& d, std::string_view id, const Facts& f) {
  for (const FixHint& h : d.fixes) {
    if (h.id == id) return;
  }
  const FixRow& row = fix_row(id);
  FixHint h;
  h.id = std::string(row.id);
  h.seed_step = row.seed_step;
  h.title = id == "expandable_segments" ? expandable_title(f) : std::string(row.hint);
  h.reason = reason_for(id, f);
  d.fixes.push_back(std::move(h));
}

void add_kind(Diagnosis& d, std::string_view kind) {
  if (!has(d.kinds, kind)) d.kinds.emplace_back(kind);
}

std::optional<CandidateMatch> find_match(Bytes requested, const std::vector<NamedSize>& cands) {
  std::optional<CandidateMatch> best;
  for (const NamedSize& c : cands) {
    const Bytes a = allocator_request_size(c.size);
    if (a.value() == 0) continue;
    const std::uint64_t diff = requested > a ? requested.value() - a.value() : a.value() - requested.value();
    const auto permille = static_cast<std::uint64_t>(u128{diff} * 1000 / a.value());
    if (u128{diff} * 1000 > u128{a.value()} * kMatchPermille) continue;
    if (!best || permille < best->difference_permille) {
      best = CandidateMatch{c.name, c.size, a, permille};
    }
  }
  return best;
}

/// PyTorch's own split of what it holds: the message gives two of the three terms.
void split_reserved(Facts& f) {
  const OomMessage& m = *f.m;
  Diagnosis& d = *f.d;
  d.reserved_unallocated = m.reserved_unallocated;
  d.reserved_total = m.reserved_total;
  if (!d.reserved_total && m.allocated_by_pytorch && m.reserved_unallocated) {
    d.reserved_total = sat_add(*m.allocated_by_pytorch, *m.reserved_unallocated);
  }
  if (!d.reserved_unallocated && m.allocated_by_pytorch && m.reserved_total) {
    d.reserved_unallocated = sat_sub(*m.reserved_total, *m.allocated_by_pytorch);
  }
  // MPS prints no free figure, and its figures are rounded to a hundredth of a unit (up to
  // ~10 MiB), too coarse to derive one: the message itself means the request did not fit
  // under the high watermark.
  if (m.format == "mps") d.process_non_pytorch = m.other_allocations;

}

/// The other processes on the card, and this process among them when NVML hid its pid.
void attribute_processes(Facts& f) {
  const OomMessage& m = *f.m;
  Diagnosis& d = *f.d;
  // Other processes. Inside a container NVML reports host pids, so PyTorch cannot recognize
  // its own process and lists it as "Process N" (PyTorch 2.1+ prints "this process" only when
  // the pid matches). When no "this process" line exists and exactly one listed process holds
  // at least what PyTorch reserved, it is taken to be this process.
  d.others = m.others;
  if (!m.process_in_use && d.reserved_total && !d.others.empty()) {
    std::size_t self = d.others.size();
    std::size_t count = 0;
    for (std::size_t i = 0; i < d.others.size(); ++i) {
      if (d.others[i].in_use >= *d.reserved_total) {
        self = i;
        ++count;
      }
    }
    if (count == 1) {
      d.process_in_use = d.others[self].in_use;
      d.findings.push_back(
          fmt::format("Process {} ({}) is taken to be this process: no \"this process\" line was printed and "
                      "it is the only one holding at least the {} PyTorch reserved (inside a container NVML "
                      "shows host process ids).",
                      d.others[self].pid, S(d.others[self].in_use), S(d.reserved_total)));
      d.others.erase(d.others.begin() + static_cast<std::ptrdiff_t>(self));
    }
  }
  if (!d.others.empty()) {
    Bytes sum;
    for (const OtherProcess& p : d.others) sum = sat_add(sum, p.in_use);
    d.other_processes = sum;
  } else if (d.process_in_use) {
    d.other_processes = Bytes{};  // the process list was printed and holds no one else
  }

}

/// The accounting: what is outside PyTorch, what the job needs, what the card offers.
void account(Facts& f) {
  const OomMessage& m = *f.m;
  Diagnosis& d = *f.d;
  if (d.process_in_use && d.reserved_total && m.format != "mps") {
    d.process_non_pytorch = sat_sub(*d.process_in_use, *d.reserved_total);
  }
  if (d.total && d.free && d.reserved_total) {
    d.outside_pytorch = sat_sub(sat_sub(*d.total, *d.free), *d.reserved_total);
  }
  if (d.total && d.free && d.process_in_use && d.other_processes) {
    d.unattributed = sat_sub(sat_sub(sat_sub(*d.total, *d.free), *d.process_in_use), *d.other_processes);
  }
  if (d.requested && d.free) d.shortfall = sat_sub(*d.requested, *d.free);
  // This process's memory outside PyTorch: measured when the process line exists, otherwise
  // everything outside PyTorch's cache (which then also holds any other process).
  const OptBytes own_outside = d.process_non_pytorch ? d.process_non_pytorch : d.outside_pytorch;
  if (d.allocated_by_pytorch && d.requested && own_outside) {
    d.job_needs = sat_add(sat_add(*d.allocated_by_pytorch, *d.requested), *own_outside);
  }
  if (d.total) {
    d.card_available = sat_sub(*d.total, d.process_non_pytorch ? f.O.value_or(Bytes{}) : Bytes{});
  }
  if (d.job_needs && d.card_available && *d.job_needs > *d.card_available) {
    d.over_card = sat_sub(*d.job_needs, *d.card_available);
  }

}

/// The classification: the primary kind (what to fix first) and every kind that applies.
void classify(Facts& f) {
  const OomMessage& m = *f.m;
  Diagnosis& d = *f.d;
  const bool numbers = m.has_numbers();
  if (numbers) {
    const Bytes R = *f.R;
    const Bytes T = *f.T;
    const Bytes F = f.F.value_or(Bytes{});  // unknown free counts as none: the request failed
    const Bytes U = f.U.value_or(Bytes{});
    const bool mps = m.format == "mps";
    f.free_unusable = !mps && f.free_known && R <= F;
    f.covers = !mps && !f.free_unusable && U.value() > 0 && R <= sat_add(F, U);
    f.shortage = !f.free_unusable && !f.covers;
    // A large cache counts only when reclaiming it covers at least a quarter of what is
    // missing: 463 MiB cached does not matter to a 55 GiB request on a 12 GiB card.
    f.frag_large = f.U && f.Rs && f.Rs->value() > 0 && share_at_least(*f.U, *f.Rs, kFragShareDenominator) &&
                   f.U->value() >= kFragMinimum &&
                   share_at_least(*f.U, sat_sub(R, F), kFragOfShortfallDenominator);
    f.huge = share_at_least(R, T, kHugeShareDenominator);
    if (f.O && f.O->value() > 0) {
      f.others_significant =
          share_at_least(*f.O, T, kOthersShareDenominator) && f.O->value() >= kOthersMinimum;
      f.others_blocking = f.shortage && R <= sat_add(sat_add(F, U), *f.O);
    }
    if (d.unattributed) {
      if (share_at_least(*d.unattributed, T, kUnlistedShareDenominator) &&
          d.unattributed->value() >= kUnlistedMinimum) {
        f.unlisted = true;
        f.unlisted_bytes = d.unattributed;
      }
    } else if (!d.process_in_use && d.outside_pytorch) {
      const Bytes excess = sat_sub(*d.outside_pytorch, Bytes{kContextAllowance});
      if (share_at_least(excess, T, kUnlistedShareDenominator) && excess.value() >= kUnlistedMinimum) {
        f.unlisted = true;
        f.unlisted_bytes = excess;
      }
    }
    if (m.allowed && f.Rs && sat_add(*f.Rs, R) > *m.allowed) f.limit_blocking = true;
    if (!mps && d.job_needs && d.card_available && !d.over_card && d.card_available->value() > 0) {
      f.near_full = u128{d.job_needs->value()} * 1000 >= u128{d.card_available->value()} * kNearFullPermille;
    }

    // The primary: what to fix first.
    if (f.limit_blocking) {
      d.primary = "shortage";
    } else if (f.covers || f.free_unusable) {
      d.primary = "fragmentation";
    } else if (f.others_blocking) {
      d.primary = "other_process";
    } else if (f.huge) {
      d.primary = "huge_request";
    } else {
      d.primary = "shortage";
    }
    add_kind(d, d.primary);
    if (f.shortage || f.limit_blocking) add_kind(d, "shortage");
    if (f.huge) add_kind(d, "huge_request");
    if (f.covers || f.free_unusable || f.frag_large) add_kind(d, "fragmentation");
    if (f.others_significant || f.others_blocking || f.unlisted) add_kind(d, "other_process");
  } else {
    f.frag_large = f.U && f.Rs && f.Rs->value() > 0 && share_at_least(*f.U, *f.Rs, kFragShareDenominator) &&
                   f.U->value() >= kFragMinimum;
    d.primary = f.frag_large ? "fragmentation" : "no_numbers";
    add_kind(d, d.primary);
    add_kind(d, "no_numbers");
  }

}

/// The findings, in sentences: the figures and what they mean.
/// The request itself: its size, where, and what the allocator's two smallest sizes mean.
void findings_request(Facts& f) {
  const Diagnosis& d = *f.d;
  std::vector<std::string>& out = f.d->findings;
  const std::string where = (d.backend.empty() ? std::string("the GPU") : d.backend + " GPU") +
                            (d.gpu ? fmt::format(" {}", *d.gpu) : std::string());
  out.insert(out.begin(), fmt::format("The allocator asked for {} on {} ({} of its {}){}.", S(f.R), where,
                                      pct(*f.R, *f.T), S(f.T),
                                      f.free_known ? fmt::format(" with {} free", S(f.F)) : std::string()));
  if (f.R->value() == 2 * kMiB) {
    out.push_back(
        "2.00 MiB is the allocator's smallest segment (any tensor up to 1 MiB): the card was "
        "already full and this allocation was the last straw, not the cause.");
  } else if (f.R->value() == 20 * kMiB) {
    out.push_back(
        "20.00 MiB is the segment the allocator takes for any tensor of 1 to 10 MiB: the card "
        "was already full and this allocation was the last straw, not the cause.");
  }
}

/// What held the card: PyTorch's cache, private pools, this process outside PyTorch, other
/// processes, owners no process list names, a driver spilling past the card.
void findings_held(Facts& f) {
  const OomMessage& m = *f.m;
  const Diagnosis& d = *f.d;
  std::vector<std::string>& out = f.d->findings;
  if (f.A && f.Rs) {
    out.push_back(
        fmt::format("PyTorch held {} reserved: {} in tensors and {} cached but unallocated ({} of "
                    "reserved).",
                    S(f.Rs), S(f.A), S(f.U), pct(f.U.value_or(Bytes{}), *f.Rs)));
  }
  if (m.private_pools && m.private_pools->value() > 0) {
    out.push_back(
        fmt::format("{} of the allocated memory sits in private pools (CUDA Graphs, torch.compile "
                    "mode=\"reduce-overhead\"), which the rest of the program cannot reuse.",
                    S(m.private_pools)));
  }
  if (d.process_non_pytorch && m.format != "mps") {
    out.push_back(
        fmt::format("This process used {} outside PyTorch's allocator: CUDA context, cuBLAS/cuDNN "
                    "workspaces, NCCL buffers (measured on an H200: 0.67 GiB after init, up to 1.15 GiB "
                    "while training).",
                    S(d.process_non_pytorch)));
  }
  if (!d.others.empty()) {
    out.push_back(d.others.size() == 1
                      ? fmt::format("Another process is on this GPU: {}.", others_names(d.others))
                      : fmt::format("Other processes on this GPU: {}, {} in all.", others_names(d.others),
                                    S(d.other_processes)));
  }
  if (f.unlisted && f.unlisted_bytes) {
    if (d.unattributed) {
      out.push_back(
          fmt::format("{} of the card is in use by no process PyTorch listed (another container, a MIG or "
                      "driver reservation): nvidia-smi on the host shows whose.",
                      S(d.unattributed)));
    } else {
      out.push_back(
          fmt::format("{} of the card is outside PyTorch's cache; a CUDA context takes about 0.7 to 1.2 GiB, "
                      "so about {} is held by other processes or non-PyTorch libraries (this message lists "
                      "no processes: run nvidia-smi).",
                      S(d.outside_pytorch), S(f.unlisted_bytes)));
    }
  }
  if (f.T && f.Rs && *f.Rs > *f.T) {
    out.push_back(
        fmt::format("PyTorch reports {} reserved while the card has {}: on Windows the driver can spill GPU "
                    "allocations into shared system memory (WDDM), so these figures are not a partition of "
                    "the card, and what lies past the card runs slowly from system RAM.",
                    S(f.Rs), S(f.T)));
  }
}

/// Why the request failed, from the figures: fragmentation, unusable free memory, a shortage,
/// the job's need against the card, a huge tensor, a per-process cap, MPS's watermark.
void findings_cause(Facts& f) {
  const OomMessage& m = *f.m;
  const Diagnosis& d = *f.d;
  std::vector<std::string>& out = f.d->findings;
  // This process's memory outside PyTorch, as the accounting takes it.
  const OptBytes own_outside = d.process_non_pytorch ? d.process_non_pytorch : d.outside_pytorch;
  if (f.covers) {
    out.push_back(
        fmt::format("The request would have fit in the {} PyTorch had cached but unallocated (plus {} "
                    "free): that cache is split into pieces smaller than {}. This is fragmentation.",
                    S(f.U), S(f.F.value_or(Bytes{})), S(f.R)));
  }
  if (f.free_unusable) {
    out.push_back(fmt::format(
        "The driver reported {} free, at least the {} requested, yet the allocation failed: the "
        "free memory was not usable in one piece (on Windows, WDDM reserves part of it; another "
        "process may also have taken it in between).",
        S(f.F), S(f.R)));
  }
  if (m.format == "mps" && f.A && m.other_allocations) {
    const Bytes sum = sat_add(sat_add(*f.A, *m.other_allocations), *f.R);
    out.push_back(
        fmt::format("MPS allocated {} + other allocations {} + the {} request come to {}, past the {} "
                    "high watermark (the figures are rounded to a hundredth of their unit).",
                    S(f.A), S(m.other_allocations), S(f.R), S(sum), S(f.T)));
  } else if (f.shortage) {
    const Bytes pool = sat_add(f.F.value_or(Bytes{}), f.U.value_or(Bytes{}));
    out.push_back(
        fmt::format("A real shortage: even with every cached byte reusable, free + cached ({}) is {} short "
                    "of the {} request.",
                    S(pool), S(sat_sub(*f.R, pool)), S(f.R)));
  }
  if (d.job_needs && d.card_available) {
    if (d.over_card && m.format != "mps") {
      const std::string outside = own_outside && own_outside->value() > 0
                                      ? fmt::format(" + {} outside PyTorch", S(own_outside))
                                      : std::string();
      out.push_back(
          fmt::format("At the failure point this process needed at least {} ({} in tensors + {} "
                      "requested{}) and the card offers {}: {} over, before the rest of the peak.",
                      S(d.job_needs), S(f.A), S(f.R), outside, S(d.card_available), S(d.over_card)));
    } else if (f.near_full) {
      out.push_back(
          fmt::format("Even with its cache perfectly packed the job used {} of the {} it could have ({}) "
                      "when it failed, and later steps (the optimizer's first step creates its state) can "
                      "need more: plan one of the other fixes too.",
                      S(d.job_needs), S(d.card_available), pct(*d.job_needs, *d.card_available)));
    }
  }
  if (f.huge) {
    out.push_back(
        fmt::format("One request of {} is {} of the card. A tensor that large is typically logits (batch x "
                    "seq x vocab, 4 bytes each in fp32) or attention scores (batch x heads x seq x seq, "
                    "materialized by eager attention).",
                    S(f.R), pct(*f.R, *f.T)));
    if (*f.R > *f.T) {
      out.push_back(
          fmt::format("It is larger than the whole card ({}): no allocator setting can serve it; that "
                      "tensor must shrink.",
                      S(f.T)));
    }
  }
  if (m.allowed) {
    out.push_back(fmt::format(
        "This process is capped at {} (set_per_process_memory_fraction or "
        "per_process_memory_fraction){}.",
        S(m.allowed),
        f.limit_blocking ? fmt::format(": {} reserved + {} requested exceeds it", S(f.Rs), S(f.R))
                         : std::string()));
  }
  if (m.format == "mps") {
    out.push_back(
        fmt::format("On Apple GPUs the limit is PyTorch's high watermark ({}), not the whole memory; "
                    "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 lifts it but, as the message warns, may cause "
                    "system failure.",
                    S(f.T)));
  }
}

/// The expected tensor the request matches, when candidates were given.
void findings_match(Facts& f) {
  const Diagnosis& d = *f.d;
  std::vector<std::string>& out = f.d->findings;
  if (d.match) {
    const CandidateMatch& c = *d.match;
    const std::string rounded = c.allocator_size == c.size
                                    ? std::string()
                                    : fmt::format(", {} after the allocator's rounding", S(c.allocator_size));
    out.push_back(fmt::format("The request matches the expected \"{}\" tensor ({}{}): {}.{}% apart.", c.name,
                              S(c.size), rounded, c.difference_permille / 10, c.difference_permille % 10));
  }
}

/// A message without figures: what its form says.
void findings_without_figures(Facts& f) {
  const OomMessage& m = *f.m;
  std::vector<std::string>& out = f.d->findings;
  if (m.format == "runtime_error") {
    const bool cublas = m.excerpt.find("CUBLAS_STATUS_ALLOC_FAILED") != std::string::npos;
    if (cublas) {
      out.push_back(
          "cuBLAS could not allocate its workspace: the card was full when a matrix multiply "
          "started. The message carries no figures.");
    } else {
      out.push_back(
          "This form comes from a CUDA call outside PyTorch's caching allocator (a kernel "
          "workspace, cuBLAS/cuDNN, NCCL, or creating the CUDA context itself), so it carries "
          "no figures. nvidia-smi shows what holds the card; CUDA_LAUNCH_BLOCKING=1 reports "
          "the failing call where it happens.");
    }
  } else if (m.format == "memory_summary") {
    out.push_back(
        "Only a memory summary reports the OOM: it shows what PyTorch held, not what failed "
        "or how large the card is.");
  } else if (m.format == "unreadable") {
    out.push_back(fmt::format(
        "The message's figures cannot be trusted: {}. No real device reports that, so no figure of it "
        "is used: check that the log is not corrupted or edited.",
        m.unreadable));
  } else {
    out.push_back(
        "The message is cut before its figures: look for the full text (it may be higher in "
        "the log) to get a diagnosis from the numbers.");
  }
}

/// What a memory summary of the same device adds: retries, the peak, non-releasable memory.
void findings_summary(Facts& f, const MemorySummary& s) {
  std::vector<std::string>& out = f.d->findings;
  if (s.malloc_retries && *s.malloc_retries > 0) {
    out.push_back(
        fmt::format("The memory summary (line {}) counts cudaMalloc retries: {}. Each time, the allocator "
                    "had to free its cache and try again: a sign of pressure or fragmentation.",
                    s.line, *s.malloc_retries));
  }
  if (s.allocated.peak) {
    out.push_back(
        fmt::format("The memory summary puts the peak of allocated memory at {}.", S(s.allocated.peak)));
  }
  if (s.non_releasable.current && s.reserved.current && s.reserved.current->value() > 0 &&
      share_at_least(*s.non_releasable.current, *s.reserved.current, kFragShareDenominator)) {
    out.push_back(
        fmt::format("Non-releasable memory (free parts of split blocks) was {}, {} of reserved: "
                    "fragmentation.",
                    S(s.non_releasable.current), pct(*s.non_releasable.current, *s.reserved.current)));
  }
}

void add_findings(Facts& f, const std::optional<MemorySummary>& summary) {
  const Diagnosis& d = *f.d;
  const bool numbers = f.m->has_numbers();
  if (numbers) findings_request(f);
  findings_held(f);
  if (numbers) findings_cause(f);
  findings_match(f);
  if (!numbers) findings_without_figures(f);
  if (summary && (!summary->device || !d.gpu || *summary->device == *d.gpu)) findings_summary(f, *summary);
}

/// The fixes, ordered for the classification, then the seed's list in its order.
void add_fixes(Facts& f) {
  const OomMessage& m = *f.m;
  Diagnosis& d = *f.d;
  const bool cuda_like = m.format != "mps";
  const auto key_fixes = [&](std::string_view kind) {
    if (kind == "fragmentation" && cuda_like) {
      add_fix(d, "expandable_segments", f);
    } else if (kind == "other_process") {
      add_fix(d, "free_other_processes", f);
    } else if (kind == "shortage" && f.limit_blocking) {
      add_fix(d, "raise_memory_fraction", f);
    } else if (kind == "no_numbers" && m.format == "runtime_error") {
      add_fix(d, "free_other_processes", f);
    } else if (kind == "huge_request") {
      if (d.match && d.match->name == "logits") {
        add_fix(d, "chunked_logits", f);
      } else if (d.match && d.match->name == "attention_scores") {
        add_fix(d, "fused_attention", f);
      }
      add_fix(d, "reduce_batch", f);
      add_fix(d, "shorter_sequence", f);
      // Both families unless the estimate says which tensor failed.
      if (!d.match || d.match->name != "logits") add_fix(d, "fused_attention", f);
      if (!d.match || d.match->name != "attention_scores") add_fix(d, "chunked_logits", f);
    }
  };
  key_fixes(d.primary);
  if (d.match && d.match->name == "logits") add_fix(d, "chunked_logits", f);
  if (d.match && d.match->name == "attention_scores") add_fix(d, "fused_attention", f);
  for (const std::string& k : d.kinds) key_fixes(k);
  // Then the seed's list, in its order, filtered.
  for (const FixRow& row : kFixTable) {
    if (row.seed_step == 0 || row.hint.empty()) continue;
    if (row.id == "quantize" && d.primary == "huge_request") continue;  // not the failing tensor
    if (row.id == "expandable_segments" &&
        !(cuda_like && (has(d.kinds, "fragmentation") || d.primary == "no_numbers"))) {
      continue;  // the seed: only when much memory is reserved but unallocated
    }
    add_fix(d, row.id, f);
  }
  if ((has(d.kinds, "shortage") || f.near_full) && !f.limit_blocking &&
      !(f.huge && f.R && f.T && *f.R > *f.T)) {
    add_fix(d, "larger_gpu", f);
  }
}

}  // namespace

Diagnosis diagnose(const OomMessage& m, const std::vector<NamedSize>& candidates,
                   const std::optional<MemorySummary>& summary) {
  Diagnosis d;
  Facts f;
  f.m = &m;
  f.d = &d;
  d.format = m.format;
  d.backend = m.backend;
  d.gpu = m.gpu;
  d.requested = m.requested;
  d.total = m.total;
  d.free = m.free;
  d.allocated_by_pytorch = m.allocated_by_pytorch;
  d.process_in_use = m.process_in_use;
  f.conf_var = !m.alloc_conf_var.empty() ? m.alloc_conf_var
               : m.backend == "HIP"      ? std::string("PYTORCH_HIP_ALLOC_CONF")
                                         : std::string("PYTORCH_CUDA_ALLOC_CONF");

  split_reserved(f);
  attribute_processes(f);

  f.R = d.requested;
  f.T = d.total;
  f.F = d.free;
  f.A = d.allocated_by_pytorch;
  f.U = d.reserved_unallocated;
  f.Rs = d.reserved_total;
  f.O = d.other_processes;
  f.free_known = d.free.has_value();

  account(f);
  classify(f);
  if (m.has_numbers() && !candidates.empty()) d.match = find_match(*f.R, candidates);
  add_findings(f, summary);
  add_fixes(f);
  return d;
}

ExitCode explain_exit_code(const OomScan& scan) noexcept {
  return scan.messages.empty() ? ExitCode::does_not_fit : ExitCode::ok;
}

std::optional<Diagnosis> explain(const OomScan& scan, const std::vector<NamedSize>& candidates) {
  const OomMessage* m = scan.chosen();
  if (m == nullptr) return std::nullopt;
  return diagnose(*m, candidates, scan.summary);
}

}  // namespace vramfit::doctor
