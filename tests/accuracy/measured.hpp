#pragma once
// A measured results file kept in the tests (tests/accuracy/<folder>/results.jsonl, its configs
// beside it), each case estimated once with its config's spec.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"

namespace vramfit::test {

/// The cases' models, each config read from `dir / config` once.
inline accuracy::CaseModels models_in(const std::filesystem::path& dir, const std::vector<accuracy::TruthCase>& cases) {
  return accuracy::CaseModels(cases, [&dir](const accuracy::TruthCase& c) {
    return spec::from_config_text(read_text(dir / c.config), c.config);
  });
}

struct Measured {
  std::string text;                                 ///< the JSONL as read
  std::vector<accuracy::TruthCase> cases;
  accuracy::CaseModels models;                      ///< by the cases' config path
  std::vector<accuracy::CaseResult> results;        ///< one per case, in order
};

/// Reads `dir / file`, builds each config (relative to `config_dir`, by default `dir`) once and
/// estimates every case.
inline Measured evaluate_measured(const std::filesystem::path& dir, const std::string& file,
                                  const std::filesystem::path& config_dir = {}) {
  std::string text = read_text(dir / file);
  std::vector<accuracy::TruthCase> cases = accuracy::parse_truth(text, file);
  accuracy::CaseModels models = models_in(config_dir.empty() ? dir : config_dir, cases);
  std::vector<accuracy::CaseResult> results = accuracy::evaluate_all(cases, models, file);
  // The results point into `cases`: a moved vector keeps its elements where they are.
  return Measured{std::move(text), std::move(cases), std::move(models), std::move(results)};
}

}  // namespace vramfit::test
