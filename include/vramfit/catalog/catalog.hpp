#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"

namespace vramfit::catalog {

/// `--provider all`: every provider tier and every catalog GPU at 1, 2, 4 and 8 cards (a
/// reserved word, never a provider id).
inline constexpr std::string_view kAllProviders = "all";

/// One GPU model of data/gpus.json.
struct Gpu {
  std::string id;          ///< stable, lower-case: "h100-80gb"
  std::string name;        ///< "NVIDIA H100 80GB HBM3"
  std::string vendor;      ///< "nvidia", "amd"
  Bytes memory;            ///< device memory the driver reports as total (bytes)
  std::string memory_label;  ///< as marketed: "80 GB"
  bool bf16 = true;        ///< supports bf16 compute
  /// CUDA compute capability times ten (9.0 -> 90; data/gpus.json "compute_capability"); 0 for a
  /// card that is not NVIDIA's or whose model is not named. Engines choose kernels by it (vLLM's
  /// MXFP4 MoE backend, engine/vllm.cpp).
  unsigned compute_capability = 0;
  /// Streaming multiprocessors (NVIDIA's spec sheets; data/gpus.json "sm_count", optional): with the
  /// compute capability's resident threads per SM, what the CUDA context reserves scales with it
  /// (engine/llamacpp.hpp's cuda_context_bytes). 0: not known.
  unsigned sm_count = 0;
  std::string source;
};

/// A cloud offer: `count` GPUs of one model in one machine.
struct Tier {
  std::string id;
  std::string provider;
  std::string gpu;         ///< Gpu id
  std::uint64_t count = 1;
  std::string source;
};

/// A model preset of data/models/*.json: a real config.json and where it came from.
struct Preset {
  std::string id;                           ///< file stem: "llama-3.1-8b"
  std::string name;                         ///< "Llama 3.1 8B"
  std::string hf_repo;                      ///< "meta-llama/Llama-3.1-8B"
  std::string source;                       ///< URL of the config.json
  std::optional<std::uint64_t> published_params;  ///< exact count the model card publishes
  std::string published_params_source;
  nlohmann::json config;                    ///< the config.json values
};

/// The GPU catalog, the provider tiers and the model presets.
class Catalog {
 public:
  /// The catalog compiled into the binary from data/.
  static const Catalog& embedded();

  /// Parses catalog files: `files` maps a path relative to the data folder
  /// ("gpus.json", "models/llama-3.1-8b.json") to its text. Validates everything
  /// (unique ids, positive sizes, known GPU ids in tiers); throws InputError naming the file.
  static Catalog parse(const std::map<std::string, std::string>& files);

  [[nodiscard]] const std::vector<Gpu>& gpus() const noexcept { return gpus_; }
  [[nodiscard]] const std::vector<Tier>& tiers() const noexcept { return tiers_; }
  [[nodiscard]] const std::vector<Preset>& presets() const noexcept { return presets_; }
  /// The provider whose tiers the advisor searches when `--provider` is not given (gpus.json
  /// "default_provider": the seed guide's GPU Cloud in the embedded catalog); empty: every tier
  /// and catalog GPU.
  [[nodiscard]] const std::string& default_provider() const noexcept { return default_provider_; }

  /// The GPU with this id (case-insensitive); throws InputError naming `field` with
  /// "did you mean" suggestions otherwise.
  [[nodiscard]] const Gpu& gpu(std::string_view id, std::string_view field = "--gpu") const;
  /// The preset with this id; same error behaviour.
  [[nodiscard]] const Preset& preset(std::string_view id, std::string_view field = "--model") const;

 private:
  std::vector<Gpu> gpus_;
  std::vector<Tier> tiers_;
  std::vector<Preset> presets_;
  std::string default_provider_;
};

}  // namespace vramfit::catalog
