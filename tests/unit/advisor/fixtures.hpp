// Fixtures shared by the advisor tests: a hand-built model (no spec parser involved), a small
// catalog, and helpers that compute expectations with the engine itself, so the tests hold
// whatever numbers the engine gives.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace advisor_test {

using namespace vramfit;

inline spec::Linear lin(std::string name, std::uint64_t in, std::uint64_t out) {
  spec::Linear l;
  l.name = std::move(name);
  l.in_features = in;
  l.out_features = out;
  return l;
}

/// Llama 3.1 8B's shapes, built by hand: 8,030,261,248 parameters.
inline spec::ModelSpec llama8b() {
  spec::ModelSpec m;
  m.name = "llama-3.1-8b";
  m.source = "preset";
  m.model_type = "llama";
  m.family = "llama";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  m.max_positions = 8192;
  spec::LayerGroup g;
  g.count = 32;
  g.linears = {lin("q_proj", 4096, 4096),    lin("k_proj", 4096, 1024),     lin("v_proj", 4096, 1024),
               lin("o_proj", 4096, 4096),    lin("gate_proj", 4096, 14336), lin("up_proj", 4096, 14336),
               lin("down_proj", 14336, 4096)};
  g.norm_params = 2 * 4096;
  m.layers = {g};
  m.embedding_params = 128256ULL * 4096;
  m.lm_head_params = 128256ULL * 4096;
  m.final_norm_params = 4096;
  m.buffer_bytes = 64 * 4;
  m.params = spec::count_params(m);
  return m;
}

/// GPUs of 24, 48, 80 and 96 GiB-ish (decimal GB like the vendors), one without bf16, and a
/// provider whose smallest card has 48 GB and whose largest tier is 8 x 96 GB.
inline const std::string kGpus = R"({
  "gpus": [
    {"id": "rtx-4090", "name": "NVIDIA GeForce RTX 4090", "vendor": "nvidia", "memory_label": "24 GB",
     "memory_bytes": 25757220864, "bf16": true, "source": "https://example.com/4090"},
    {"id": "v100-32gb", "name": "Tesla V100 32GB", "vendor": "nvidia", "memory_label": "32 GB",
     "memory_bytes": 34089730048, "bf16": false, "source": "https://example.com/v100"},
    {"id": "l40s", "name": "NVIDIA L40S", "vendor": "nvidia", "memory_label": "48 GB",
     "memory_bytes": 48305799168, "bf16": true, "source": "https://example.com/l40s"},
    {"id": "h100-80gb", "name": "NVIDIA H100 80GB HBM3", "vendor": "nvidia", "memory_label": "80 GB",
     "memory_bytes": 85520809984, "bf16": true, "source": "https://example.com/h100"},
    {"id": "rtx-pro-6000", "name": "NVIDIA RTX PRO 6000 Blackwell", "vendor": "nvidia", "memory_label": "96 GB",
     "memory_bytes": 102005473280, "bf16": true, "source": "https://example.com/pro6000"}
  ],
  "providers": [
    {"id": "gpu-cloud", "name": "GPU Cloud", "source": "https://example.com/gpu-cloud",
     "tiers": [{"id": "l40s-1", "gpu": "l40s", "count": 1},
               {"id": "pro6000-1", "gpu": "rtx-pro-6000", "count": 1},
               {"id": "pro6000-2", "gpu": "rtx-pro-6000", "count": 2},
               {"id": "pro6000-8", "gpu": "rtx-pro-6000", "count": 8}]},
    {"id": "other", "name": "Other", "source": "https://example.com/other",
     "tiers": [{"id": "h100x8", "gpu": "h100-80gb", "count": 8}]}
  ]
})";

inline const catalog::Catalog& test_catalog() {
  static const catalog::Catalog c = catalog::Catalog::parse({{"gpus.json", kGpus}});
  return c;
}

inline spec::Workload inference_fp32() {
  spec::Workload w;
  w.mode = spec::Mode::inference;
  w.weights = DType::fp32;
  w.batch = 1;
  w.seq = 512;
  return w;
}

inline spec::Workload training(std::uint64_t batch) {
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.weights = DType::fp32;
  w.batch = batch;
  w.seq = 1024;
  w.grad_accum = 1;
  return w;
}

inline Bytes total_of(const spec::ModelSpec& m, const spec::Workload& w) {
  return engine::estimate(m, w).device_total;
}

/// The single diagnostic line an InputError carries.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    return e.diagnostics()[0].str();
  }
  FAIL("no InputError thrown");
  return {};
}

/// Invariants every advice must satisfy, whatever the engine's numbers.
/// An applied step's `after` is the engine's estimate of the workload it recorded: a
/// re-estimate, never a factor.
inline void check_walk_properties(const spec::ModelSpec& m, const advisor::Advice& a,
                                  const advisor::Budget& b) {
  REQUIRE(a.fits_initially == b.fits(a.initial_estimate.device_total));
  if (a.fits_initially) {
    CHECK(a.steps.empty());
    CHECK(a.fits);
    return;
  }
  const auto fixes = advisor::fixes();
  REQUIRE(a.steps.size() <= fixes.size());
  Bytes current = a.initial_estimate.device_total;
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    const auto& s = a.steps[i];
    INFO("step " << s.id);
    CHECK(s.id == fixes[i].id);  // table order, none left out before the stop
    CHECK(s.before == current);  // cumulative
    CHECK(s.after <= s.before);  // no step increases memory
    if (s.applied)
      CHECK(s.after < s.before);  // an applied step lowers it
    else
      CHECK(s.after == s.before);
    CHECK(s.after ==
          engine::estimate(m, s.workload).device_total);
    CHECK_FALSE((s.applied && s.ruled_out));
    CHECK(s.fits == b.fits(s.after));
    if (i + 1 < a.steps.size()) CHECK_FALSE(s.fits);  // the walk stops at the first fit
    current = s.after;
  }
  CHECK(a.final_estimate.device_total == current);
  CHECK(a.final_estimate.device_total ==
        engine::estimate(m, a.final_workload).device_total);
  CHECK(a.fits == b.fits(current));
  if (a.fits)
    CHECK(a.steps.back().fits);
  else
    CHECK(a.steps.size() == fixes.size());
}

}  // namespace advisor_test
