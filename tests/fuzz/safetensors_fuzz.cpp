// libFuzzer target for spec::parse_safetensors_header: the JSON head of a safetensors file.
// The body is vramfit::fuzz::fuzz_safetensors (targets.cpp), which the replay test also runs on
// corpus/safetensors/ and crashes/safetensors/. Build and run with .ci/fuzz safetensors (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_safetensors(data, size);
}
