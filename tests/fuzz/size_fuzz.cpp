// libFuzzer target for spec::parse_size: memory sizes typed by users (--budget, --headroom).
// The body is vramfit::fuzz::fuzz_size (targets.cpp), which the replay test also runs on
// corpus/size/ and crashes/size/. Build and run with .ci/fuzz size (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_size(data, size);
}
