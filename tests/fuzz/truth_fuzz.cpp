// libFuzzer target for the truth-file parser (accuracy::parse_truth, truth_device_bytes).
// The body is vramfit::fuzz::fuzz_truth (targets.cpp), which the replay test also runs on
// corpus/truth/ and crashes/truth/. Build and run with .ci/fuzz truth (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_truth(data, size);
}
