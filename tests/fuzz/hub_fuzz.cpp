// libFuzzer target for the Hub client's response parsing (src/cli/hub_parse.hpp): header lines,
// Content-Range, the safetensors index's weight_map, the HF error headers, the repo id. No
// network. The body is vramfit::fuzz::fuzz_hub (targets.cpp), which the replay test also runs on
// corpus/hub/ and crashes/hub/. Build and run with .ci/fuzz hub (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_hub(data, size);
}
