// The training levers of issue #18 against what they measured on the H200
// (tests/accuracy/levers: measure_levers.py on one GPU, measure_levers_sharded.py for FSDP2 on
// 2 ranks sharing it). Regression bounds: the plain loop's (median |error| <= 1%, no case
// under by more than 5%); `vramfit validate tests/accuracy/levers/results/levers.jsonl` prints
// the table.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/render/validate.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"
#include "../../src/engine/levers.hpp"
#include "measured.hpp"

namespace {

using namespace vramfit;

const std::filesystem::path kDir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/levers";

struct Measured {
  std::vector<accuracy::TruthCase> cases;
  accuracy::CaseModels models;
  std::vector<accuracy::CaseResult> results;
  std::string text;
};

const Measured& measured() {
  static const Measured m = [] {
    Measured out;
    for (const char* file :
         {"results/levers.jsonl", "results/sharded.jsonl", "results/more.jsonl", "results/more_sharded.jsonl",
          "results/loss.jsonl", "results/loss_unsloth.jsonl", "results/sharded_more.jsonl"}) {
      const std::string text = vramfit::test::read_text(kDir / file);
      if (out.text.empty()) out.text = text;
      for (auto& c : accuracy::parse_truth(text, file)) out.cases.push_back(std::move(c));
    }
    out.models = test::models_in(kDir, out.cases);
    out.results = accuracy::evaluate_all(out.cases, out.models, "tests/accuracy/levers/results");
    return out;
  }();
  return m;
}

// The lever a case measures, from its workload.
std::string lever_of(const spec::Workload& w) {
  const bool sharded = w.sharding != spec::Sharding::none;
  if (w.master_weights) return sharded ? "master-weights (fsdp)" : "master-weights";
  if (w.lora.half_adapters) return sharded ? "lora-dtype bf16 (fsdp)" : "lora-dtype bf16";
  if (w.fsdp_param_dtype) return "fsdp-mixed-precision";
  if (w.sharding != spec::Sharding::none) return "fsdp + autocast (LoRA)";
  if (w.loss != spec::Loss::hf) return std::string("loss ") + std::string(spec::name_of(w.loss));
  if (w.activation_offload) return "activation offload";
  if (w.optimizer_in_backward) return "optimizer in backward";
  if (w.checkpoint_selective) return "selective checkpointing";
  if (w.checkpoint_every > 1) return "checkpointing every-2";
  if (w.autocast && w.weights == DType::fp32)
    return std::string(spec::name_of(w.mode)) + " fp32 + autocast" + (w.checkpointing ? " (ckpt)" : "");
  return "other";
}

}  // namespace

TEST_CASE("training levers meet the plain loop's bounds on the H200", "[accuracy][levers]") {
  const auto& m = measured();
  // 104 cases of session 7, less its 12 fused-linear cases measured with the earlier stand-in,
  // plus results/loss.jsonl (12 fused-linear with the stand-in written after Liger's code, 12 cce)
  // and results/loss_unsloth.jsonl (15: Unsloth's fused cross-entropy, session 9), and
  // results/sharded_more.jsonl (6 FSDP2 cases on the models and sizes the levers lacked, session 12).
  REQUIRE(m.cases.size() == 137);
  std::map<std::string, std::vector<const accuracy::CaseResult*>> by_lever;
  std::vector<const accuracy::CaseResult*> all;
  for (const auto& r : m.results) {
    INFO(r.truth->id);
    REQUIRE(r.truth->status == "ok");
    by_lever[lever_of(r.truth->workload)].push_back(&r);
    all.push_back(&r);
  }
  // The README's table: per lever its cases, models, sizes (batch x seq), median |error|,
  // worst under and worst over; each lever is held to the plain loop's bounds.
  std::string table;
  for (const auto& [lever, rs] : by_lever) {
    const auto st = accuracy::stats(rs);
    double worst_under = 0, worst_over = 0;
    std::map<std::string, int> models;
    std::map<std::uint64_t, int> sizes;
    for (const auto* r : rs) {
      worst_under = std::min(worst_under, r->error);
      worst_over = std::max(worst_over, r->error);
      ++models[r->truth->config];
      ++sizes[r->truth->workload.batch * r->truth->workload.seq];
    }
    table += fmt::format("| {} | {} | {} | {} | {:.2f} % | {:+.2f} % | {:+.2f} % |\n", lever, st.cases, models.size(),
                         sizes.size(), st.median_abs * 100, worst_under * 100, worst_over * 100);
    INFO(lever);
    // Without logits the peaks are the model's own forward transients at the last layer and the
    // final norm (the forward_layer phase: engine/activations.cpp, forward_transient).
    CHECK(st.median_abs <= 0.01);
    CHECK(models.size() >= 3);
    CHECK(sizes.size() >= 2);
  }
  const auto st = accuracy::stats(all);
  WARN(table << "all: " << st.cases << " cases, median |error| " << st.median_abs * 100 << "%");
  CHECK(by_lever.count("other") == 0);
  CHECK(by_lever.size() == 17);
  CHECK(st.median_abs <= 0.01);
  for (const auto* r : all) {
    INFO(r->truth->id << ": " << r->error * 100 << "%");
    CHECK(r->error >= -0.05);  // no unsafe under-estimate
    CHECK(r->error <= 0.05);
  }
}

TEST_CASE("parts add up on every levers case", "[accuracy][levers]") {
  const auto& m = measured();
  REQUIRE(!m.cases.empty());
  for (const auto& c : m.cases) {
    const auto b = engine::estimate(m.models.of(c), c.workload);
    Bytes sum;
    for (const auto& comp : b.components)
      if (comp.in_peak_allocated) sum += comp.bytes;
    INFO(c.id);
    CHECK(sum == b.peak_allocated);
  }
}

namespace {

// --packing (results/packing.jsonl): packed rows of T tokens beside the unpacked batch of the
// same tokens, per model and mode.
using Packing = test::Measured;

const Packing& packing() {
  static const Packing p = test::evaluate_measured(kDir, "results/packing.jsonl");
  return p;
}

}  // namespace

TEST_CASE("sequence packing (--packing) meets the plain loop's bounds on the H200", "[accuracy][levers][packing]") {
  const auto& p = packing();
  REQUIRE(p.cases.size() == 30);
  std::vector<const accuracy::CaseResult*> packed, unpacked;
  std::map<std::string, int> models;
  std::map<std::uint64_t, int> lengths;
  for (const auto& r : p.results) {
    INFO(r.truth->id << ": " << r.error * 100 << "%");
    REQUIRE(r.truth->status == "ok");
    CHECK(r.error >= -0.05);
    CHECK(r.error <= 0.05);
    if (r.truth->workload.sequence_packing) {
      packed.push_back(&r);
      ++models[r.truth->config];
      ++lengths[r.truth->workload.seq];
    } else {
      unpacked.push_back(&r);
    }
  }
  const auto sp = accuracy::stats(packed);
  const auto su = accuracy::stats(unpacked);
  double worst_under = 0, worst_over = 0;
  for (const auto* r : packed) {
    worst_under = std::min(worst_under, r->error);
    worst_over = std::max(worst_over, r->error);
  }
  WARN("packed: " << sp.cases << " cases, median |error| " << sp.median_abs * 100 << "%, worst under "
                  << worst_under * 100 << "%, worst over " << worst_over * 100 << "%; unpacked: " << su.cases
                  << " cases, median " << su.median_abs * 100 << "%");
  CHECK(packed.size() == 18);
  CHECK(models.size() == 3);
  CHECK(lengths.size() == 3);  // T = 2048, 4096 (2 rows), 8192
  CHECK(sp.median_abs <= 0.01);
  CHECK(su.median_abs <= 0.01);
}

TEST_CASE("sequence packing: what packing adds at equal tokens, estimated against measured", "[accuracy][levers][packing]") {
  // Each packed row of T tokens beside the unpacked batch of T tokens (4 x 512, 8 x 1024):
  // the difference is the mask (the boolean one, the additive copy each layer saves) and
  // repeat_kv's copies of k and v, with the longer rows' own share.
  const auto& p = packing();
  std::map<std::string, const accuracy::CaseResult*> by_id;
  for (const auto& r : p.results) by_id[r.truth->id] = &r;
  int pairs = 0;
  for (const auto& r : p.results) {
    const auto& w = r.truth->workload;
    if (!w.sequence_packing || w.batch != 1 || w.checkpointing) continue;
    const std::string id = r.truth->id;
    const std::string base = w.seq == 2048 ? "b4s512" : "b8s1024";
    std::string uid = id.substr(0, id.find("/b1s")) + "/" + base + "/unpacked";
    REQUIRE(by_id.count(uid) == 1);
    const auto* u = by_id.at(uid);
    const double measured = static_cast<double>(r.truth->peak_allocated.value()) - static_cast<double>(u->truth->peak_allocated.value());
    const double estimated = static_cast<double>(r.estimate_peak.value()) - static_cast<double>(u->estimate_peak.value());
    INFO(id << ": packing adds " << measured / (1 << 20) << " MiB measured, " << estimated / (1 << 20) << " MiB estimated");
    CHECK(measured > 0);
    CHECK(std::abs(estimated - measured) <= 0.02 * static_cast<double>(r.truth->peak_allocated.value()));
    ++pairs;
  }
  CHECK(pairs == 12);
}

namespace {

// --compile (results/compile.jsonl, measure_compile.py): each case compiled ("all": the decoder
// layers and the loss; "layers": the layers only; "model": torch.compile(model)) beside the
// same step in eager.
using Compiled = test::Measured;

const Compiled& compiled() {
  static const Compiled c = test::evaluate_measured(kDir, "results/compile.jsonl");
  return c;
}

}  // namespace

TEST_CASE("compile lever (--compile) meets the plain loop's bounds on the H200", "[accuracy][levers][compile]") {
  const auto& c = compiled();
  REQUIRE(c.cases.size() == 59);
  std::map<std::string, std::vector<const accuracy::CaseResult*>> by_kind;
  for (const auto& r : c.results) {
    INFO(r.truth->id << ": " << r.error * 100 << "%");
    REQUIRE(r.truth->status == "ok");
    const std::string id = r.truth->id;
    const std::string kind = id.substr(id.rfind('/') + 1);
    by_kind[kind].push_back(&r);
    if (kind == "model") continue;  // torch.compile(model): not modelled (README), reported only
    CHECK(r.error >= -0.05);        // no unsafe under-estimate
    CHECK(r.error <= 0.05);
  }
  std::string table;
  for (const auto& [kind, rs] : by_kind) {
    const auto st = accuracy::stats(rs);
    double under = 0, over = 0;
    for (const auto* r : rs) {
      under = std::min(under, r->error);
      over = std::max(over, r->error);
    }
    table += kind + ": " + std::to_string(st.cases) + " cases, median " + std::to_string(st.median_abs * 100) +
             "%, worst under " + std::to_string(under * 100) + "%, worst over " + std::to_string(over * 100) + "%\n";
  }
  WARN(table);
  CHECK(by_kind.size() == 4);  // all, eager, layers, model
  CHECK(by_kind.at("all").size() == 27);
  // Session 9 (the layers' saved tensors from compile_probe.jsonl): all 0.55 %, layers 0.68 %.
  CHECK(accuracy::stats(by_kind.at("all")).median_abs <= 0.01);
  CHECK(accuracy::stats(by_kind.at("layers")).median_abs <= 0.01);
  CHECK(accuracy::stats(by_kind.at("eager")).median_abs <= 0.01);
}

TEST_CASE("compile lever (--compile): the tensors a compiled layer saves, against the probe", "[accuracy][levers][compile]") {
  // results/compile_probe.jsonl (session 9): one forward each, eager and with the layers and the
  // loss compiled, under a saved_tensors_hooks probe that sums the distinct storages autograd
  // saved. Their difference less the loss's (the fp32 log-softmax against the compiled loss's
  // 16-bit logits: tokens x vocab x 2 bytes) is what the layers stopped saving, per token and
  // layer: the engine's compiled_layer_not_saved within 1 %.
  const std::string text = vramfit::test::read_text(kDir / "results/compile_probe.jsonl");
  const auto cases = accuracy::parse_truth(text, "results/compile_probe.jsonl");
  REQUIRE(cases.size() == 12);
  std::map<std::string, std::uint64_t> saved;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("id")) saved[j.at("id").get<std::string>()] = j.at("saved_bytes").get<std::uint64_t>();
    }
  }
  int pairs = 0;
  for (const auto& c : cases) {
    if (c.workload.compile != spec::Compile::all) continue;
    const std::string eager_id = c.id.substr(0, c.id.find("/all/")) + "/eager/probe";
    REQUIRE(saved.count(eager_id) == 1);
    const auto m = spec::from_config_text(vramfit::test::read_text(kDir / c.config), c.config);
    const std::uint64_t tokens = c.workload.batch * c.workload.seq;
    const double measured = (static_cast<double>(saved.at(eager_id)) - static_cast<double>(saved.at(c.id)) -
                             static_cast<double>(tokens * m.vocab_size * 2)) /
                            static_cast<double>(tokens * m.num_layers);
    const auto p = engine::detail::precision_of(c.workload);
    const double estimated =
        static_cast<double>(engine::detail::compiled_layer_not_saved(m, m.layers.front(), c.workload, p));
    INFO(c.id << ": per token and layer, measured " << measured << " bytes, estimated " << estimated);
    CHECK(std::abs(estimated / measured - 1) <= 0.01);
    ++pairs;
  }
  CHECK(pairs == 6);
}

TEST_CASE("compile lever (--compile): what compiling saves, estimated against measured", "[accuracy][levers][compile]") {
  // Each compiled case beside its eager twin: the estimate's saving and the measured one.
  const auto& c = compiled();
  std::map<std::string, const accuracy::CaseResult*> by_id;
  for (const auto& r : c.results) by_id[r.truth->id] = &r;
  int pairs = 0;
  for (const auto& r : c.results) {
    const std::string id = r.truth->id;
    if (id.substr(id.rfind('/') + 1) != "all") continue;
    const auto* e = by_id.at(id.substr(0, id.rfind('/')) + "/eager");
    const double measured = static_cast<double>(e->truth->peak_allocated.value()) - static_cast<double>(r.truth->peak_allocated.value());
    const double estimated = static_cast<double>(e->estimate_peak.value()) - static_cast<double>(r.estimate_peak.value());
    INFO(id << ": saving measured " << measured / (1 << 20) << " MiB, estimated " << estimated / (1 << 20) << " MiB");
    // Within 5% of the eager peak: the saving is estimated where it is large.
    CHECK(std::abs(estimated - measured) <= 0.05 * static_cast<double>(e->truth->peak_allocated.value()));
    ++pairs;
  }
  CHECK(pairs == 27);
}

namespace {

// --loss chunked, session 10: results/chunked.jsonl (full training at b1 x 4096 and LoRA at b2 x
// 1024, eager and compiled) and results/chunked_probe.jsonl (full training at b2 x 1024 eager and
// compiled again, llama-3.2-1b's hf loss and its LoRA with the chunked loss), each case with
// measure_compile.py's probe_backward: the caching allocator's events over one more backward,
// replayed from what was allocated at its start.
struct Probed {
  std::vector<accuracy::TruthCase> cases;
  accuracy::CaseModels models;
  std::vector<accuracy::CaseResult> results;
  std::map<std::string, nlohmann::json> probe;
};

const Probed& probed() {
  static const Probed p = [] {
    Probed out;
    for (const char* file : {"results/chunked.jsonl", "results/chunked_probe.jsonl"}) {
      const std::string text = vramfit::test::read_text(kDir / file);
      for (auto& c : accuracy::parse_truth(text, file)) out.cases.push_back(std::move(c));
      std::istringstream in(text);
      std::string line;
      while (std::getline(in, line)) {
        auto j = nlohmann::json::parse(line);
        if (j.contains("id")) out.probe[j.at("id").get<std::string>()] = j.at("backward_probe");
      }
    }
    out.models = test::models_in(kDir, out.cases);
    out.results = accuracy::evaluate_all(out.cases, out.models, "tests/accuracy/levers/results");
    return out;
  }();
  return p;
}

std::uint64_t sum_sizes(const nlohmann::json& counts) {
  std::uint64_t total = 0;
  for (const auto& [size, n] : counts.items()) total += std::stoull(size) * n.get<std::uint64_t>();
  return total;
}

}  // namespace

TEST_CASE("chunked loss: the backward's peak, block by block, against the allocator's events", "[accuracy][levers][chunked]") {
  // At the backward's peak the probe lists the blocks of at least 4 MiB allocated since its start
  // and alive, and those alive at its start and freed. Either the loss's own backward decides it
  // (eager: two fp32 chunks; compiled: one 16-bit chunk; nothing freed yet), or the lm_head's in
  // full training (levers.cpp, chunked_head_backward): 3 vocab x hidden gradients and 6 of the 8
  // chunks' logits gradients alive, every chunk's saved loss tensor freed (eager the fp32
  // log-softmax, compiled the 16-bit logits). Exact to the byte.
  const auto& pr = probed();
  REQUIRE(pr.cases.size() == 20);
  int checked = 0, head_peaks = 0;
  for (const auto& c : pr.cases) {
    if (c.workload.loss != spec::Loss::chunked) continue;
    const auto& m = pr.models.of(c);
    const auto p = engine::detail::precision_of(c.workload);
    const std::uint64_t tokens = c.workload.batch * c.workload.seq;
    const auto loss = engine::detail::loss_bytes(m, c.workload, p, tokens);
    const bool compiled = c.workload.compile == spec::Compile::all;
    const Bytes saved{tokens * m.vocab_size * (compiled ? 2 : 4)};
    const Bytes head = loss.head_logits + loss.head_gradients + loss.head_temporaries;
    const bool head_peak = head > loss.backward_start;
    const auto& probe = pr.probe.at(c.id);
    INFO(c.id << ": probe " << probe.dump().substr(0, 400));
    CHECK(sum_sizes(probe.at("alive_at_peak")) == (head_peak ? head : loss.backward_start - saved).value());
    CHECK(sum_sizes(probe.at("freed_before_peak")) == (head_peak ? saved.value() : 0));
    CHECK((c.workload.mode == spec::Mode::train) == (head.value() > 0));
    head_peaks += head_peak ? 1 : 0;
    ++checked;
  }
  CHECK(checked == 19);
  CHECK(head_peaks == 7);  // full training: compiled on the 3 models at both sizes, eager llama-3.2-1b b2 x 1024
}

TEST_CASE("chunked loss: a tied embedding's gradient is added in place, the hf loss's out of place", "[accuracy][levers][chunked]") {
  // The last vocab x hidden events of full training's backward (tied embeddings on all three
  // models): the embedding's dense gradient, then with the chunked loss freed at once (added in
  // place into autograd's sum of the lm_head chunks' gradients), with the hf loss a sum allocated
  // beside it (the buffer holds the lm_head matmul's gradient, a view): backward_end's
  // temporaries. (On llama-3.2-1b at b2 x 1024 the logits' 16-bit gradient has the same size;
  // it comes before.)
  int checked = 0;
  for (const auto& c : probed().cases) {
    if (c.workload.mode != spec::Mode::train) continue;
    const auto& m = probed().models.of(c);
    REQUIRE(m.tied_embeddings);
    const std::uint64_t vh = m.embedding_params * 2;
    std::string tail;
    for (const auto& e : probed().probe.at(c.id).at("large_events"))
      if (e.at(1).get<std::uint64_t>() == vh) tail += e.at(0).get<std::string>();
    INFO(c.id << ": vocab x hidden events " << tail);
    const bool chunked = c.workload.loss == spec::Loss::chunked;
    REQUIRE(tail.size() >= 4);
    // Chunked: the first chunk's product added in place and freed, then the embedding's.
    CHECK(tail.substr(tail.size() - 4) == (chunked ? "+-+-" : "++--"));
    ++checked;
  }
  CHECK(checked == 13);
}

TEST_CASE("chunked loss (--loss chunked, eager and compiled) meets the plain loop's bounds on the H200", "[accuracy][levers][chunked]") {
  // Every chunked case measured: results/levers.jsonl and more.jsonl (eager, 12), compile.jsonl
  // (b2 x 1024 full training, eager and compiled, 6) and chunked.jsonl (12); chunked_probe.jsonl
  // measured compile.jsonl's again (held to the same bounds, not counted twice).
  std::vector<const accuracy::CaseResult*> eager, compiled_cases, again;
  for (const auto& r : measured().results)
    if (r.truth->workload.loss == spec::Loss::chunked) eager.push_back(&r);
  for (const auto& r : compiled().results)
    if (r.truth->workload.loss == spec::Loss::chunked)
      (r.truth->workload.compile == spec::Compile::all ? compiled_cases : eager).push_back(&r);
  for (const auto& r : probed().results) {
    if (r.truth->workload.loss != spec::Loss::chunked) continue;
    if (r.truth->id.find("/probe") != std::string::npos) again.push_back(&r);
    else (r.truth->workload.compile == spec::Compile::all ? compiled_cases : eager).push_back(&r);
  }
  REQUIRE(eager.size() == 21);
  REQUIRE(compiled_cases.size() == 9);
  REQUIRE(again.size() == 7);
  std::string table;
  for (const auto& [name, rs] : {std::pair{"eager", eager}, {"compiled", compiled_cases}, {"measured again", again}}) {
    double under = 0, over = 0;
    for (const auto* r : rs) {
      INFO(r->truth->id << ": " << r->error * 100 << "%");
      under = std::min(under, r->error);
      over = std::max(over, r->error);
      CHECK(r->error >= -0.05);  // no unsafe under-estimate
      CHECK(r->error <= 0.05);
    }
    const auto st = accuracy::stats(rs);
    table += fmt::format("{}: {} cases, median {:.2f} %, worst under {:+.2f} %, worst over {:+.2f} %\n", name, st.cases,
                         st.median_abs * 100, under * 100, over * 100);
    INFO(name);
    // Measured (session 10): eager 0.35 %, compiled 1.01 %, again 0.98 %: qwen2.5-0.5b and
    // smollm2-360m were 60-120 MB under at forward's end. Session 12: memory_allocated() counts
    // whole blocks (block_rounding): eager 0.35 %, compiled 0.18 %, again 0.15 %, worst -1.08 %.
    // Adam's states as two blocks each in the training replay: the eager worst -1.08 -> -1.11 %.
    CHECK(st.median_abs <= 0.004);
    CHECK(under >= -0.0115);
  }
  WARN(table);
}

TEST_CASE("what forward leaves alive is what the engine counts as saved", "[accuracy][levers][chunked]") {
  // results/forward_probe.jsonl (session 10, measure_compile.py's probe_forward): the blocks one
  // forward allocated and left alive (the allocator's history), less the loss's saved tensor (the
  // hf loss's fp32 log-softmax in eager, the compiled loss's 16-bit logits), against the engine's
  // forward_end less the weights, workspace, optimizer state and the loss's bytes: the saved
  // tensors are counted within 0.6 %. What the measured peaks have beyond them on qwen2.5-0.5b and
  // smollm2-360m lies outside forward's allocations (the probe's start and untracked bytes; README).
  const std::string text = vramfit::test::read_text(kDir / "results/forward_probe.jsonl");
  const auto cases = accuracy::parse_truth(text, "results/forward_probe.jsonl");
  REQUIRE(cases.size() == 5);
  std::map<std::string, std::uint64_t> alive;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("id")) alive[j.at("id").get<std::string>()] = j.at("forward_probe").at("alive_bytes").get<std::uint64_t>();
    }
  }
  for (const auto& c : cases) {
    const auto m = spec::from_config_text(vramfit::test::read_text(kDir / c.config), c.config);
    const auto b = engine::estimate(m, c.workload);
    Bytes fe, fixed;
    for (const auto& ph : b.phases)
      if (ph.id == engine::PhaseId::forward_end) fe = ph.allocated - ph.block_rounding;  // the requested bytes
    for (const auto& comp : b.components)
      if (comp.id == engine::ComponentId::weights || comp.id == engine::ComponentId::lora_adapters ||
          comp.id == engine::ComponentId::cublas_workspace || comp.id == engine::ComponentId::optimizer_state)
        fixed += comp.bytes;
    const std::uint64_t tokens = c.workload.batch * c.workload.seq;
    const auto p = engine::detail::precision_of(c.workload);
    const auto loss = engine::detail::loss_bytes(m, c.workload, p, tokens);
    const bool compiled = c.workload.compile == spec::Compile::all;
    const double estimated = static_cast<double>((fe - fixed - loss.forward_end).value());
    const double measured = static_cast<double>(alive.at(c.id) - tokens * m.vocab_size * (compiled ? 2 : 4));
    INFO(c.id << ": saved at forward's end, measured " << measured / 1e6 << " MB, estimated " << estimated / 1e6 << " MB");
    CHECK(std::abs(estimated / measured - 1) <= 0.006);
  }
}

TEST_CASE("compile layers at b1 x 4096, and torchtune's published chunked-CE shape, measured", "[accuracy][levers][compile]") {
  // Session 12 (run_s12.sh): --compile layers (torchtitan's: each decoder layer, the loss eager) on
  // the 3 models at b1 x 4096 (compile.jsonl has them at b2 x 1024 only), and Llama 3.2 3B full
  // training at b2 x 4096 with the chunked loss, eager and compiled: the shape of torchtune's
  // "+ Chunked Cross Entropy" row (tests/accuracy/published). The engine is within 0.11 % of both,
  // so the published row's -4.1 % is the published figure's own, not the shape's.
  // (Their device totals are not comparable: the sharded cases ran on the GPU at the same time.)
  for (const char* file : {"results/compile_more.jsonl", "results/published_shape.jsonl"}) {
    const auto m = test::evaluate_measured(kDir, file);
    REQUIRE(m.cases.size() == (std::string(file) == "results/compile_more.jsonl" ? 3U : 2U));
    for (const auto& r : m.results) {
      INFO(r.truth->id << ": " << r.error * 100 << "%");
      REQUIRE(r.truth->status == "ok");
      CHECK(std::abs(r.error) <= 0.002);
    }
  }
}
