#pragma once

// Test helpers for the OOM doctor: fixtures and the measured H200 truth.

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vramfit::doctor::test {

/// The text of tests/fixtures/oom/<name>; throws when missing (a test setup error).
inline std::string fixture(const std::string& name) {
  const std::string path = std::string(VRAMFIT_SOURCE_DIR) + "/tests/fixtures/oom/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing fixture " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The truth records with "status": "oom" from ../shared/truth/results/<file>.
inline std::vector<nlohmann::json> truth_ooms(const std::string& file) {
  const std::string path = std::string(VRAMFIT_TRUTH_DIR) + "/results/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing truth file " + path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    if (j.value("status", "") == "oom") out.push_back(std::move(j));
  }
  return out;
}

}  // namespace vramfit::doctor::test
