// Text architectures added by #16, measured on an H200 (tests/accuracy/arch: cases.json, models/,
// results.jsonl; `python3 measure.py cases.json results.jsonl` with ../shared/truth/measure.py,
// torch 2.11, transformers 5.17). `vramfit validate tests/accuracy/arch/results.jsonl` prints
// the table. falcon with new_decoder_architecture is under-estimated (see the README's accuracy section): this
// test pins the families that meet the targets and every parameter count.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/render/validate.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;

namespace {

std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("text architectures measured on the H200: exact parameters, opt/olmo2/glm4/cohere/falcon-mq within bounds",
          "[accuracy][arch]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/arch";
  const std::string text = slurp_file(dir / "results.jsonl");
  const auto cases = accuracy::parse_truth(text, "results.jsonl");
  REQUIRE(cases.size() == 24);
  std::map<std::string, spec::ModelSpec> specs;
  std::vector<accuracy::CaseResult> results;
  for (const auto& c : cases) {
    if (!specs.count(c.config)) specs.emplace(c.config, spec::from_config_text(slurp_file(dir / c.config), c.config));
    results.push_back(accuracy::evaluate(c, specs.at(c.config)));
  }
  const auto r = accuracy::make_report(results, *accuracy::truth_device_bytes(text));
  INFO(render::accuracy_text(r));
  CHECK(r.params_checked == 24);
  CHECK(r.params_exact == 24);
  for (const auto& [model, st] : r.by_model) {
    INFO(model);
    if (model == "opt-125m" || model == "olmo2-mini" || model == "glm4-mini" || model == "cohere-mini") {
      CHECK(st.median_abs <= 0.03);
      CHECK(st.max_abs <= 0.06);
      CHECK(st.unsafe_share == 0);
    }
    // Multi-query falcon: SDPA's math backend materialises the scores (was 74.52% under).
    if (model == "falcon-mq-mini") {
      CHECK(st.median_abs <= 0.05);
      CHECK(st.max_abs <= 0.08);
      CHECK(st.unsafe_share == 0);
    }
  }
}
