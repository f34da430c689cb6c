// The README's `vramfit models` listing is the output of the built-in catalog, so that it cannot
// drift from data/models: when a preset is added or changed, this test fails with the text to
// paste (VRAMFIT_UPDATE_README=1 ./build/tests/vramfit_tests "[readme]" writes it; review the diff).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "cli_helper.hpp"

using vramfit::test::run_cli;

TEST_CASE("the README's 'vramfit models' listing is the built-in catalog", "[readme][catalog]") {
  const std::filesystem::path readme_path = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "README.md";
  std::ifstream in(readme_path, std::ios::binary);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();

  const auto models = run_cli({"models"});
  REQUIRE(models.code == 0);
  REQUIRE(models.err.empty());

  // The listing sits in a code block right after the command line, up to the closing fence.
  const std::string begin = "$ ./build/vramfit models\n";
  const auto b = readme.find(begin);
  REQUIRE(b != std::string::npos);
  const auto from = b + begin.size();
  const auto e = readme.find("```", from);
  REQUIRE(e != std::string::npos);
  INFO("paste after '" << begin << "' in README.md:\n" << models.out);
  if (std::getenv("VRAMFIT_UPDATE_README") != nullptr) {  // VRAMFIT_UPDATE_README=1: rewrite the listing
    std::ofstream(readme_path, std::ios::binary) << readme.substr(0, from) << models.out << readme.substr(e);
    return;
  }
  CHECK(readme.substr(from, e - from) == models.out);
}
