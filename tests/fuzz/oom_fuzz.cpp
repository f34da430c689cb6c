// libFuzzer target for the OOM doctor: scan any bytes, diagnose every message found, render
// both reports.
// The body is vramfit::fuzz::fuzz_oom (targets.cpp), which the replay test also runs on
// corpus/oom/ and crashes/oom/. Build and run with .ci/fuzz oom (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_oom(data, size);
}
