#pragma once
// The serving engines' answers (`--engine llama.cpp|ollama|vllm` for estimate, advise and fit)
// as text and JSON: the estimate's heading, the engine's own buffers as its logs name them, and
// what the command adds (the engine's fixes, or the solved dimension).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/engine/llamacpp.hpp"
#include "vramfit/engine/vllm.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

/// llama.cpp / Ollama: the engine's result, the settings it ran with, and what the report names.
struct LlamaCppAnswer {
  engine::llamacpp::Result result;
  engine::llamacpp::Settings settings;
  std::string engine;                   ///< "llama.cpp" or "ollama"
  std::string file_type;                ///< the GGUF file type ("Q4_K_M")
  std::vector<std::string> gpu_labels;  ///< one per GPU when --gpu was given, else empty
  std::vector<Bytes> gpu_memory;        ///< each GPU's memory as given, else empty
};

/// vLLM: the engine's result and the settings it ran with.
struct VllmAnswer {
  engine::vllm::Result result;
  engine::vllm::Settings settings;
};

using ServingAnswer = std::variant<LlamaCppAnswer, VllmAnswer>;

/// One of the engine's own fixes, re-estimated from the settings as given.
struct ServingFix {
  std::string id;      ///< stable id ("fewer-gpu-layers", "lower-max-model-len", ...)
  std::string change;  ///< the flags to set, for a human
  bool fits = false;
  Bytes device_total;  ///< the binding GPU's total after the change
};

/// What estimate and advise print under the engine's figures.
struct ServingAdvice {
  bool fits_as_given = true;
  bool advise = false;  ///< the `advise` command: the advice is shown even when it fits
  std::vector<ServingFix> fixes;
};

/// What `fit --solve` found: the dimension ("gpu-layers", "ctx", "concurrency",
/// "max-model-len") and the largest value that fits, if any.
struct ServingFit {
  std::string dimension;
  std::optional<std::uint64_t> value;
};

/// The engine object of the JSON document (the README's "engine" keys).
nlohmann::ordered_json llamacpp_json(const LlamaCppAnswer& a);
nlohmann::ordered_json vllm_json(const VllmAnswer& a);

/// The engine's figures as a table, as its own logs name them. Ends with a newline.
std::string llamacpp_text(const LlamaCppAnswer& a);
std::string vllm_text(const VllmAnswer& a);

/// estimate / advise with a serving engine: text, the estimate, the engine's table, the fixes
/// (when any) and, for advise, a line when it fits as given; JSON, the estimate document with
/// `engine` and `advice` ({fits_as_given, fixes: [{id, change, fits, device_total_bytes}]},
/// null for estimate when it fits). Ends with a newline.
std::string render_serving(const EstimateReport& report, const ServingAnswer& answer, const ServingAdvice& advice,
                           Format f);

/// fit --solve with a serving engine: text, the estimate at the answer, the engine's table and
/// a "fit:" line; JSON, the estimate document with `engine`, `solve`, `value` (null when
/// nothing fits) and `fits`. Ends with a newline.
std::string render_serving_fit(const EstimateReport& report, const ServingAnswer& answer, const ServingFit& fit,
                               Format f);

}  // namespace vramfit::render
