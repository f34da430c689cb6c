// engine/optimizers.cpp: one row per optimizer, with the exact memory facts of each.
#include <catch2/catch.hpp>

#include "vramfit/engine/optimizers.hpp"
#include "vramfit/spec/workload.hpp"

using namespace vramfit;
using engine::StepTemp;
using engine::traits;
using spec::Optimizer;

TEST_CASE("every optimizer the CLI accepts has its own row", "[engine][optimizer]") {
  const auto names = spec::optimizer_names();
  REQUIRE(names.size() == 11);
  for (const auto name : names) {
    INFO(name);
    const auto o = spec::parse_optimizer(name);
    REQUIRE(o);
    CHECK(traits(*o).id == *o);  // not a fallback to another row
    CHECK(spec::name_of(*o) == name);
    CHECK_FALSE(traits(*o).summary.empty());
  }
}

TEST_CASE("optimizer rows: states, 8-bit and fp32 bytes, temporaries", "[engine][optimizer]") {
  struct Row {
    Optimizer o;
    std::uint64_t tensors, bytes8, bytes32;
    bool factored, paged;
    StepTemp temp;
  };
  const Row rows[] = {
      {Optimizer::adamw, 2, 0, 0, false, false, StepTemp::all_params},
      {Optimizer::adamw_fused, 2, 0, 0, false, false, StepTemp::none},
      {Optimizer::adamw_forloop, 2, 0, 0, false, false, StepTemp::per_param_x2},
      {Optimizer::adam, 2, 0, 0, false, false, StepTemp::all_params},
      {Optimizer::sgd, 0, 0, 0, false, false, StepTemp::none},
      {Optimizer::sgd_momentum, 1, 0, 0, false, false, StepTemp::none},
      {Optimizer::adafactor, 0, 0, 0, true, false, StepTemp::largest_param_x2},
      {Optimizer::adamw_8bit, 0, 2, 0, false, false, StepTemp::none},
      {Optimizer::lion, 1, 0, 0, false, false, StepTemp::largest_param_x2},
      {Optimizer::paged_adamw, 0, 0, 8, false, true, StepTemp::none},
      {Optimizer::paged_adamw_8bit, 0, 2, 0, false, true, StepTemp::none},
  };
  for (const Row& r : rows) {
    INFO(spec::name_of(r.o));
    const auto& t = traits(r.o);
    CHECK(t.state_tensors == r.tensors);
    CHECK(t.state_bytes_8bit == r.bytes8);
    CHECK(t.state_bytes_fp32 == r.bytes32);
    CHECK(t.factored == r.factored);
    CHECK(t.paged == r.paged);
    CHECK(t.temp == r.temp);
  }
  CHECK(traits(Optimizer::adamw).summary == "AdamW (foreach): 2 states, 1 parameter-sized temporary");
}
