// libFuzzer target for spec::from_config_text: a Hugging Face config.json, then the engine on
// the spec it gives.
// The body is vramfit::fuzz::fuzz_config (targets.cpp), which the replay test also runs on
// corpus/config/ and crashes/config/. Build and run with .ci/fuzz config (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_config(data, size);
}
