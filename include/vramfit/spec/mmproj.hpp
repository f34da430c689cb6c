#pragma once

// A llama.cpp multimodal projector file (mmproj-*.gguf): the vision tower and projector that
// mtmd (tools/mtmd/clip.cpp) loads beside the language model's GGUF.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "vramfit/spec/gguf.hpp"

namespace vramfit::spec {

/// What an mmproj file puts in memory: its tensors' bytes (clip.cpp allocates one backend
/// buffer of exactly the tensors' sizes and reads them into it).
struct Mmproj {
  std::string file;            ///< the path given or found
  std::uint64_t bytes = 0;     ///< sum of the tensors' bytes (ggml_nbytes)
  std::uint64_t tensors = 0;   ///< tensor count
  std::string projector_type;  ///< clip.projector_type ("mlp", "gemma3", "qwen2vl_merger", ...), "" when absent
};

/// Reads an mmproj header: general.architecture must be "clip" (what convert_hf_to_gguf.py
/// writes with --mmproj). Throws InputError naming `field` for another architecture or a
/// malformed header.
Mmproj mmproj_from_gguf(const GgufHeader& h, std::string_view origin, std::string_view field);

/// True for the file names llama.cpp's downloads use for projectors: mmproj*.gguf
/// (case-insensitive), e.g. mmproj-model-f16.gguf, mmproj-F16.gguf.
bool is_mmproj_name(const std::filesystem::path& p);

}  // namespace vramfit::spec
