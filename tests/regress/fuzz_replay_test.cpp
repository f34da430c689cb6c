// Replays every fuzz input kept in the tree through the fuzz targets' bodies (tests/fuzz/targets.hpp):
// the crashes found by .ci/fuzz (tests/fuzz/crashes/<target>/, fixed since) and the seed corpora
// (tests/fuzz/corpus/<target>/). So a fixed crash stays fixed, with no clang or libFuzzer needed.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../fuzz/targets.hpp"
#include "vramfit/core/error.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(VRAMFIT_SOURCE_DIR) / "tests" / "fuzz";

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename().string().front() != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const vramfit::fuzz::Target* find_target(const std::string& name) {
  for (const auto& t : vramfit::fuzz::kTargets)
    if (t.name == name) return &t;
  return nullptr;
}

/// Runs one input: only an InputError may come out (the bodies catch those themselves).
void replay(const vramfit::fuzz::Target& t, const fs::path& file) {
  const std::string bytes = read_all(file);
  INFO("fuzz target '" << t.name << "', input " << file.string());
  try {
    t.entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  } catch (const vramfit::InputError&) {
    // the expected outcome of bad input
  } catch (const std::exception& e) {
    FAIL("threw " << e.what());
  } catch (...) {
    FAIL("threw something that is not a std::exception");
  }
}

/// Replays every file of root/<target>/; returns how many there were.
std::size_t replay_folder(const fs::path& root) {
  std::size_t inputs = 0;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    const auto files = files_in(dir.path());
    if (!dir.is_directory() || files.empty()) continue;  // .ci/fuzz leaves empty folders behind
    const std::string name = dir.path().filename().string();
    const auto* t = find_target(name);
    INFO(root.string() << ": folder '" << name << "'");
    REQUIRE(t != nullptr);  // a folder for no target: rename it, or add the target to kTargets
    for (const auto& f : files) replay(*t, f);
    inputs += files.size();
  }
  return inputs;
}

}  // namespace

TEST_CASE("every tests/fuzz/*_fuzz.cpp has its body in kTargets, so its crashes can be replayed") {
  for (const auto& f : files_in(kFuzzDir)) {
    const std::string file = f.filename().string();
    const std::string suffix = "_fuzz.cpp";
    if (file.size() <= suffix.size() || !file.ends_with(suffix)) continue;
    const std::string name = file.substr(0, file.size() - suffix.size());
    INFO(file << ": add fuzz_" << name << " to tests/fuzz/targets.hpp (kTargets) and move the body there");
    CHECK(find_target(name) != nullptr);
  }
}

TEST_CASE("the fuzz seed corpora run without a crash or a broken invariant") {
  CHECK(replay_folder(kFuzzDir / "corpus") > 0);
}

TEST_CASE("the crashes the fuzzers found stay fixed") { replay_folder(kFuzzDir / "crashes"); }
