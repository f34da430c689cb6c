// libFuzzer target for the GGUF reader: spec::parse_gguf_header on any bytes, then
// spec_from_gguf and gguf_model_bytes on whatever parses. InputError is the expected answer
// to bad input; anything else escaping (another exception, a crash, a sanitizer report, a
// parsed header that breaks its invariants) is a bug. The body is vramfit::fuzz::fuzz_gguf
// (targets.cpp), which the replay test also runs on corpus/gguf/ and crashes/gguf/. Built by
// tests/fuzz/CMakeLists.txt (VRAMFIT_FUZZ=ON, clang) and run with .ci/fuzz gguf.
//
// A seed corpus: a few real or test-written headers (tests/unit/spec/gguf_writer.hpp).

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return vramfit::fuzz::fuzz_gguf(data, size);
}
