// libFuzzer target for the OOM doctor: scan any bytes, diagnose every message found, render
// both reports. Not built by default; with clang:
//
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DVRAMFIT_TESTS=OFF \
//         -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined"
//   cmake --build build-fuzz --target vramfit_core
//   clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -Iinclude tests/fuzz/oom_fuzz.cpp \
//         build-fuzz/libvramfit_core.a -lfmt -o oom_fuzz
//   ./oom_fuzz -max_len=65536 tests/fixtures/oom
//
// The fixtures make a good seed corpus. Every crash found becomes a replayed test in
// tests/unit/doctor/oom_test.cpp.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vramfit/doctor/diagnose.hpp"
#include "vramfit/doctor/oom.hpp"
#include "vramfit/doctor/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace vramfit::doctor;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const OomScan s = scan(text);  // noexcept: any bytes
  // A candidate built from the input, so the matching code sees varied sizes.
  std::uint64_t seed = 0;
  for (std::size_t i = 0; i < size && i < 8; ++i) seed = seed << 8 | data[i];
  const std::vector<NamedSize> candidates = {{"logits", vramfit::Bytes{seed}},
                                             {"attention_scores", vramfit::Bytes{seed >> 3}}};
  for (const OomMessage& m : s.messages) {
    const Diagnosis d = diagnose(m, candidates, s.summary);
    (void)d;
  }
  const auto d = explain(s, candidates);
  (void)render_explain_text(s, d);
  (void)explain_json(s, d).dump();  // throws on invalid UTF-8: must never happen
  (void)parse_torch_size(text);
  return 0;
}
