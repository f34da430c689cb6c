// --alloc-conf (PYTORCH_CUDA_ALLOC_CONF for the job) and --cuda-context (the memory outside
// PyTorch's allocator, when the user measured it): issue #17.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/spec/workload.hpp"

namespace {

using vramfit::test::run_cli;

const std::vector<std::string> kJob{"estimate", "--model", "llama-3.1-8b", "--mode", "train", "--batch", "4",
                                    "--seq", "2048", "--checkpointing", "--json"};

std::vector<std::string> with(const std::vector<std::string>& more) {
  auto args = kJob;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

nlohmann::json component(const nlohmann::json& j, const std::string& id) {
  for (const auto& c : j["components"])
    if (c["id"] == id) return c;
  return nullptr;
}

}  // namespace

TEST_CASE("parse_alloc_conf reads PyTorch's syntax and refuses what PyTorch refuses", "[spec][alloc_conf]") {
  using vramfit::Diagnostics;
  using vramfit::spec::Workload;
  {
    Workload w;
    Diagnostics d;
    vramfit::spec::parse_alloc_conf(" expandable_segments:True , max_split_size_mb:512,roundup_power2_divisions:4,"
                                    "garbage_collection_threshold:0.6,pinned_use_cuda_host_register:True",
                                    w, d);
    CHECK(d.empty());
    CHECK(w.expandable_segments);
    CHECK(w.alloc.max_split_size_mb == 512);
    CHECK(w.alloc.roundup_power2_divisions == 4);
    CHECK(w.alloc.garbage_collection_threshold == 0.6);
    CHECK_FALSE(w.alloc.async_backend);
    CHECK(vramfit::spec::alloc_conf_string(w) ==
          "expandable_segments:True,max_split_size_mb:512,roundup_power2_divisions:4,garbage_collection_threshold:0.6");
  }
  {
    Workload w;
    Diagnostics d;
    vramfit::spec::parse_alloc_conf("backend:cudaMallocAsync,expandable_segments:False", w, d);
    CHECK(d.empty());
    CHECK(w.alloc.async_backend);
    CHECK(vramfit::spec::alloc_conf_string(w) == "backend:cudaMallocAsync");
    Workload none;
    CHECK(vramfit::spec::alloc_conf_string(none).empty());
  }
  for (const std::string bad : {"", "expandable_segments:true", "expandable_segments", "max_split_size_mb:20",
                                "max_split_size_mb:-5", "max_split_size_mb:1e3", "roundup_power2_divisions:3",
                                "roundup_power2_divisions:[256:1,>:4]", "garbage_collection_threshold:1",
                                "garbage_collection_threshold:0", "garbage_collection_threshold:nan",
                                "backend:cuda", "max_split_size:512", "expandable_segments:True,,", ","}) {
    Workload w;
    Diagnostics d;
    vramfit::spec::parse_alloc_conf(bad, w, d);
    INFO(bad);
    CHECK_FALSE(d.empty());
  }
}

TEST_CASE("cuda context and alloc conf flags: --cuda-context replaces the CUDA context, --alloc-conf is carried", "[cli][alloc_conf]") {
  const auto base = nlohmann::json::parse(run_cli(kJob).out);
  CHECK(component(base, "cuda_context")["bytes"] == vramfit::engine::kCudaContext.value());
  CHECK(base["workload"]["cuda_context"].is_null());
  CHECK(base["workload"]["alloc_conf"].is_null());

  const auto r = run_cli(with({"--cuda-context", "700MiB"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(component(j, "cuda_context")["bytes"] == 700ULL << 20);
  CHECK(j["workload"]["cuda_context"] == 700ULL << 20);
  CHECK(j["peak_allocated_bytes"] == base["peak_allocated_bytes"]);
  CHECK(j["device_total_bytes"].get<std::uint64_t>() ==
        base["device_total_bytes"].get<std::uint64_t>() - vramfit::engine::kCudaContext.value() + (700ULL << 20));

  const auto e = nlohmann::json::parse(run_cli(with({"--alloc-conf", "expandable_segments:True"})).out);
  CHECK(e["workload"]["expandable_segments"] == true);
  CHECK(e["workload"]["alloc_conf"] == "expandable_segments:True");
  CHECK(e["device_total_bytes"].get<std::uint64_t>() < base["device_total_bytes"].get<std::uint64_t>());

  // Full training on one GPU is replayed through the allocator model, which honours max_split_size_mb:
  // blocks of 512 MiB and more are never split, so the logits-sized segments are not reused for the
  // layers' blocks and more segments are made.
  const auto m = nlohmann::json::parse(run_cli(with({"--alloc-conf", "max_split_size_mb:512"})).out);
  CHECK(m["workload"]["alloc_conf"] == "max_split_size_mb:512");
  CHECK(m["peak_allocated_bytes"] == base["peak_allocated_bytes"]);
  CHECK(m["device_total_bytes"].get<std::uint64_t>() > base["device_total_bytes"].get<std::uint64_t>());
  bool said = false;
  for (const auto& n : m["notes"]) said = said || n.get<std::string>().rfind("max_split_size_mb:512: the allocator reserve is the step's allocations replayed", 0) == 0;
  CHECK(said);
}

TEST_CASE("cuda context and alloc conf flags: bad values exit 2 naming the flag", "[cli][alloc_conf]") {
  auto r = run_cli(with({"--alloc-conf", "expandable_segments:yes"}));
  CHECK(r.code == 2);
  CHECK(r.err == "vramfit: error: --alloc-conf: expandable_segments:yes: the value must be True or False (e.g. "
                 "--alloc-conf expandable_segments:True,max_split_size_mb:512 (PYTORCH_CUDA_ALLOC_CONF's syntax))\n");
  r = run_cli(with({"--alloc-conf", "max_split_size_mb:16"}));
  CHECK(r.code == 2);
  CHECK(r.err.find("max_split_size_mb:16: must be more than 20") != std::string::npos);
  r = run_cli(with({"--cuda-context", "-1GiB"}));
  CHECK(r.code == 2);
  CHECK(r.err.rfind("vramfit: error: --cuda-context", 0) == 0);
  r = run_cli({"estimate", "--params", "7B", "--engine", "vllm", "--cuda-context", "1GiB"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--cuda-context") != std::string::npos);
}

TEST_CASE("cuda context: --gpu decides whether SDPA builds cuDNN graphs (sm90 and sm100 only)", "[cli][alloc_conf]") {
  // 32768 generated tokens: on an H100 or a B200 (cuDNN attention first) one graph per decode
  // step, 3638.8 MiB outside PyTorch; on an RTX 4090 or an A100 flash attention runs them and the
  // context is the typical process's 938.8 MiB. Nothing else changes.
  const auto on = [](const char* gpu) {
    const auto r = run_cli({"estimate", "--model", "llama-3.2-1b", "--mode", "generate", "--seq", "512", "--new-tokens",
                            "32768", "--gpu", gpu, "--json"});
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto h100 = on("h100-80gb"), b200 = on("b200"), rtx = on("rtx-4090"), a100 = on("a100-80gb");
  CHECK(component(h100, "cuda_context")["bytes"] == 3815571456ULL);
  CHECK(component(b200, "cuda_context")["bytes"] == 3815571456ULL);
  CHECK(component(rtx, "cuda_context")["bytes"] == vramfit::engine::kCudaContext.value());
  CHECK(component(a100, "cuda_context")["bytes"] == vramfit::engine::kCudaContext.value());
  CHECK(h100["peak_allocated_bytes"] == rtx["peak_allocated_bytes"]);
  CHECK(h100["device_total_bytes"].get<std::uint64_t>() - rtx["device_total_bytes"].get<std::uint64_t>() ==
        3815571456ULL - vramfit::engine::kCudaContext.value());
}
