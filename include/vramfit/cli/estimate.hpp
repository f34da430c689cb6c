#pragma once

#include <iosfwd>
#include <optional>
#include <set>
#include <string>

#include "vramfit/advisor/budget.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/exit_code.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::cli {

/// Where the catalog comes from: the embedded data/, or a folder given by `--data-dir`
/// (or VRAMFIT_DATA_DIR). Loaded on first use, so commands that need no catalog never
/// read it.
class CatalogSource {
 public:
  /// `data_dir` empty: the embedded catalog. `field` names the flag in errors.
  explicit CatalogSource(std::string data_dir = {}, std::string field = "--data-dir");

  /// The catalog; throws InputError when the folder cannot be read or does not validate.
  const catalog::Catalog& get();

 private:
  std::string dir_;
  std::string field_;
  std::optional<catalog::Catalog> loaded_;
};

/// The model, workload and budget flags shared by `estimate`, `advise`, `fit` and `explain`,
/// exactly as typed: each value is the raw text (empty when the flag was not given), parsed
/// and checked by build_estimate so every message is ours.
struct EstimateFlags {
  std::string params, model, config, dtype;
  std::string mode, batch, seq, new_tokens, optimizer, autocast, attention;
  std::string lora_rank, lora_targets, lora_dropout, grad_accum, gpus, sharding;
  std::string quant, group_size, skip_modules, kv_cache, offload, nodes;
  std::string loss, fsdp_mixed_precision;  ///< the memory levers (engine/levers)
  std::string alloc_conf, cuda_context;    ///< `--alloc-conf`, `--cuda-context`
  std::string checkpointing_kind;          ///< `--checkpointing [full|selective|every-N]` ("" = full)
  std::string compile_kind;                ///< `--compile [all|layers]` ("" = all)
  std::string lora_dtype;                  ///< `--lora-dtype fp32|bf16|fp16`
  std::string lora_kernels;                ///< `--lora-kernels peft|unsloth`
  std::string recipe;                      ///< `--recipe`: a stack's default levers
  std::string images, image_size;          ///< `--images N`, `--image-size WxH` (vision-language models)
  bool activation_offload = false;
  bool optimizer_in_backward = false;
  bool sequence_packing = false;         ///< `--packing` (padding-free packed rows)
  bool double_quant = false;
  bool master_weights = false;
  std::string gpu, budget, headroom;
  /// `--fail-on-tight`: a TIGHT verdict (the estimate fits, its upper bound does not) exits with
  /// the does-not-fit code instead of 0.
  bool fail_on_tight = false;
  /// Long names of the flags given on the command line ("--optimizer", ...), from CLI11's
  /// option->count(): a flag given with its default value still counts as given.
  std::set<std::string> given;

  [[nodiscard]] bool has(const std::string& flag) const { return given.count(flag) != 0; }
  /// True when a model source (--params, --model, --config) was given.
  [[nodiscard]] bool has_model() const { return has("--params") || has("--model") || has("--config"); }
};

/// Whether a command needs a budget (`advise`, `fit`) or may go without (`estimate`).
enum class BudgetRule { optional, required };

/// A checked command line: the engine's report (report.budget is the one budget, its
/// --headroom margin and the GPU's bf16 support included).
struct Estimate {
  render::EstimateReport report;
  bool fail_on_tight = false;  ///< EstimateFlags::fail_on_tight
};

/// Checks the flags, builds the model and the workload, runs the engine. Collects every
/// problem it can before throwing InputError (fields are flag names): bad values, a
/// --headroom without a budget, no budget under BudgetRule::required, a margin that leaves
/// nothing of the budget.
Estimate build_estimate(const EstimateFlags& flags, CatalogSource& catalog,
                        BudgetRule rule = BudgetRule::optional);

/// `vramfit estimate`: the report, and under an exceeded budget the advisor's short advice
/// (text: advice_summary after the report; JSON: the `advice` key, null when the job fits or
/// there is no budget). Returns ok, or does_not_fit when the budget is exceeded (or, with
/// --fail-on-tight, when only the estimate fits and not its upper bound). Under a TIGHT verdict
/// the advisor walks again against the budget the upper bound needs, and the report names the
/// fix that buys the missing margin.
ExitCode run_estimate(const Estimate& estimate, CatalogSource& catalog, render::Format format,
                      std::ostream& out);

}  // namespace vramfit::cli
