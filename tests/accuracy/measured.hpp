#pragma once
// A measured results file kept in the tests (tests/accuracy/<folder>/results.jsonl, its configs
// beside it), each case estimated once with its config's spec.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"

namespace vramfit::test {

struct Measured {
  std::string text;                                 ///< the JSONL as read
  std::vector<accuracy::TruthCase> cases;
  std::map<std::string, spec::ModelSpec> specs;     ///< by the cases' config path
  std::vector<accuracy::CaseResult> results;        ///< one per case, in order
};

/// Reads `dir / file`, builds each config (relative to `dir`) once and estimates every case.
inline Measured evaluate_measured(const std::filesystem::path& dir, const std::string& file) {
  Measured m;
  m.text = read_text(dir / file);
  m.cases = accuracy::parse_truth(m.text, file);
  for (const auto& c : m.cases) {
    if (!m.specs.count(c.config)) m.specs.emplace(c.config, spec::from_config_text(read_text(dir / c.config), c.config));
    m.results.push_back(accuracy::evaluate(c, m.specs.at(c.config)));
  }
  return m;
}

}  // namespace vramfit::test
