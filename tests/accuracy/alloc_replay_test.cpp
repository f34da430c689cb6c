// The allocator model against PyTorch 2.11 on the H200 (tests/accuracy/alloc/traces.json, made by
// tests/accuracy/alloc/replay_traces.py: 6 random traces of 400 malloc/free, 1 B to 300 MiB,
// replayed with torch.empty per PYTORCH_CUDA_ALLOC_CONF). Default and max_split_size_mb:64: peak
// allocated and peak reserved byte-exact on all 12. Not yet modelled exactly (measured, kept as
// known gaps): expandable_segments:True peak reserved -10.3 .. +5.9 % (the page mapping and reuse
// order differ), roundup_power2_divisions:4 allocated -0.06 .. 0 % and reserved -16.7 .. 0 %.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "vramfit/engine/allocator.hpp"

using namespace vramfit::engine;

TEST_CASE("allocator replay matches PyTorch's measured peaks", "[accuracy][allocator]") {
  std::ifstream in(VRAMFIT_SOURCE_DIR "/tests/accuracy/alloc/traces.json");
  REQUIRE(in);
  const auto d = nlohmann::json::parse(in);
  int exact = 0;
  for (const std::string conf : {"default", "max_split_size_mb:64"}) {
    AllocConf c;
    if (conf == "max_split_size_mb:64") c.max_split_size = 64ULL << 20;
    const auto& run = d.at("runs").at(conf);
    for (std::size_t i = 0; i < d.at("traces").size(); ++i) {
      CachingAllocator a(c);
      std::map<long, CachingAllocator::Handle> h;
      for (const auto& e : d["traces"][i]["events"]) {
        if (e[0] == "m") {
          h[e[1].get<long>()] = a.malloc(e[2].get<std::uint64_t>());
        } else {
          a.free(h.at(e[1].get<long>()));
          h.erase(e[1].get<long>());
        }
      }
      INFO(conf << " " << d["traces"][i]["name"].get<std::string>());
      CHECK(a.peak_allocated() == run["cases"][i]["peak_allocated"].get<std::uint64_t>());
      CHECK(a.peak_reserved() == run["cases"][i]["peak_reserved"].get<std::uint64_t>());
      ++exact;
    }
  }
  CHECK(exact == 12);
  // The CUDA context measured by the same run (device used - reserved), for the record.
  const auto& ctx = d.at("cuda_context");
  CHECK(ctx.at("after_init").get<std::uint64_t>() == 552402944);          // 526.8 MiB
  CHECK(ctx.at("after_first_matmul").get<std::uint64_t>() == 718077952);  // 684.8 MiB
}
