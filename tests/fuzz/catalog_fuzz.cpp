// libFuzzer target for catalog::Catalog::parse: gpus.json and models/<id>.json of a --data-dir folder.
// The body is vramfit::fuzz::fuzz_catalog (targets.cpp), which the replay test also runs on
// corpus/catalog/ and crashes/catalog/. Build and run with .ci/fuzz catalog (clang).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_catalog(data, size);
}
