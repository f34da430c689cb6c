#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::accuracy {

/// One measured case of a truth file (shared/truth/results/*.jsonl, written by measure.py).
struct TruthCase {
  std::string id;
  std::string model;
  std::string config;              ///< path relative to the truth folder
  std::string status;              ///< "ok" or "oom" (or "error")
  spec::Workload workload;
  std::uint64_t params = 0;        ///< counted by PyTorch on the built model
  Bytes peak_allocated;            ///< torch.cuda.max_memory_allocated()
  Bytes peak_reserved;
  Bytes non_torch;
};

/// Parses a truth JSONL file: the environment line is skipped, every other line is a case.
/// Throws InputError naming `origin` and the line for malformed lines or fields.
std::vector<TruthCase> parse_truth(std::string_view jsonl, std::string_view origin);

/// The total device memory of the truth's GPU (the environment line's total_bytes), if given.
std::optional<Bytes> truth_device_bytes(std::string_view jsonl);

/// One case estimated.
struct CaseResult {
  const TruthCase* truth = nullptr;
  Bytes estimate_peak;
  Bytes estimate_device_total;
  Bytes estimate_device_upper;    ///< Breakdown::upper(): the device total's upper bound
  Bytes estimate_context;         ///< Breakdown::cuda_context: the estimate's non-PyTorch memory
  std::uint64_t estimate_params = 0;
  double error = 0;          ///< estimate / measured - 1 (peak allocated), ok cases only
  double device_error = 0;   ///< device total against peak_reserved + non_torch
};

/// Estimates one case on its model (the spec built from the case's config).
CaseResult evaluate(const TruthCase& truth, const spec::ModelSpec& model);

/// The model of every case of a truth file: one spec per distinct `config` path, built once by
/// `load(case)` for the first case naming it (it reads the case's config where the caller keeps
/// it and parses it; its InputError passes through).
class CaseModels {
 public:
  using Loader = std::function<spec::ModelSpec(const TruthCase& first)>;
  CaseModels() = default;
  CaseModels(const std::vector<TruthCase>& cases, const Loader& load);
  const spec::ModelSpec& of(const TruthCase& c) const { return by_config_.at(c.config); }
  /// One pointer per case, in the order of `cases` (what evaluate_in_process takes).
  std::vector<const spec::ModelSpec*> of_all(const std::vector<TruthCase>& cases) const;

 private:
  std::map<std::string, spec::ModelSpec> by_config_;
};

/// evaluate() for every case, in order. An InputError a case raises names `origin` and the case.
std::vector<CaseResult> evaluate_all(const std::vector<TruthCase>& cases, const CaseModels& models,
                                     std::string_view origin);

/// The cases of a truth file estimated as shared/truth's measure.py ran them: in one process, in
/// the file's order, each case after the ones before it (engine::estimate_in_process: the segment
/// the first backward's cuBLAS workspace pins stays reserved). A case whose non_torch_bytes is
/// below the case before it starts a new process (measure.py resumed after its deadline: the
/// context only grows within a process). Failed cases (OOM, error) are taken to leave nothing.
struct InProcess {
  std::vector<CaseResult> results;  ///< in the order of `cases`; estimate_peak as evaluate()'s
  std::size_t processes = 0;
  std::size_t unknown = 0;  ///< cases after a first backward whose workspace placement is not modelled
};
InProcess evaluate_in_process(const std::vector<TruthCase>& cases, const std::vector<const spec::ModelSpec*>& models);

/// Error figures of a set of results.
struct Stats {
  std::size_t cases = 0;
  double median_abs = 0;      ///< median |error|
  double p90_abs = 0;         ///< 90th percentile |error|
  double unsafe_share = 0;    ///< share of estimates below 95% of measured
  double max_abs = 0;
};

/// Statistics over `results` (ok cases only); `device` selects device_error.
Stats stats(const std::vector<const CaseResult*>& results, bool device = false);

/// The accuracy report: per mode, per model, per sharding strategy, all, device totals, OOM cases,
/// parameter counts.
struct Report {
  std::vector<std::pair<std::string, Stats>> by_mode;
  std::vector<std::pair<std::string, Stats>> by_model;
  /// Sharded cases only (gpus/sharding in the truth file): per strategy ("fsdp"), then per
  /// strategy and world size ("fsdp x4"); empty for single-GPU truth.
  std::vector<std::pair<std::string, Stats>> by_sharding;
  Stats all;
  Stats device;
  std::size_t oom_cases = 0;
  std::size_t oom_predicted = 0;  ///< OOM cases estimated above the card's memory
  std::size_t params_checked = 0;
  std::size_t params_exact = 0;
  std::vector<const CaseResult*> worst;  ///< largest |error| first (up to 10)
};

/// Builds the report; `device_bytes` is the measured card's memory (for the OOM cases).
Report make_report(const std::vector<CaseResult>& results, Bytes device_bytes);

}  // namespace vramfit::accuracy
