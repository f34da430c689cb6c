// libFuzzer target for spec::parse_param_count: parameter counts typed by users (--params).
// The body is vramfit::fuzz::fuzz_params (targets.cpp), which the replay test also runs on
// corpus/params/ and crashes/params/. Build and run with .ci/fuzz params (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_params(data, size);
}
