// libFuzzer target for cli::run: a whole command line, run in a sandbox folder.
// The body is vramfit::fuzz::fuzz_cli (targets.cpp), which the replay test also runs on
// corpus/cli/ and crashes/cli/. Build and run with .ci/fuzz cli (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_cli(data, size);
}
