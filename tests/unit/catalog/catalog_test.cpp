// Catalog::parse on small fixtures, lookups and did_you_mean.
#include "vramfit/catalog/catalog.hpp"

#include <catch2/catch.hpp>

#include "vramfit/engine/llamacpp.hpp"

#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"

using vramfit::InputError;
using vramfit::catalog::Catalog;
using vramfit::did_you_mean;

namespace {

const std::string kGpus = R"({
  "gpus": [
    {"id": "h100-80gb", "name": "NVIDIA H100 80GB HBM3", "vendor": "nvidia", "memory_label": "80 GB",
     "memory_bytes": 85520809984, "bf16": true, "source": "https://example.com/h100"},
    {"id": "rtx-4090", "name": "NVIDIA GeForce RTX 4090", "vendor": "nvidia", "memory_label": "24 GB",
     "memory_bytes": 25757220864, "bf16": true, "source": "https://example.com/4090"}
  ],
  "providers": [
    {"id": "aws", "name": "Amazon Web Services", "source": "https://example.com/aws",
     "tiers": [{"id": "p5.48xlarge", "gpu": "h100-80gb", "count": 8}]},
    {"id": "home", "name": "A desk", "source": "https://example.com/desk",
     "tiers": [{"id": "desk", "gpu": "rtx-4090", "count": 1}]}
  ]
})";

const std::string kModel = R"({
  "id": "tiny", "name": "Tiny", "hf_repo": "org/tiny", "source": "https://example.com/tiny/config.json",
  "published_params": 1000, "published_params_source": "the model card",
  "config": {"model_type": "llama", "hidden_size": 64}
})";

std::map<std::string, std::string> files(std::string gpus = kGpus, std::string model = kModel) {
  return {{"gpus.json", std::move(gpus)}, {"models/tiny.json", std::move(model)}};
}

/// The single diagnostic line an InputError carries.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    return e.diagnostics()[0].str();
  }
  FAIL("no InputError thrown");
  return {};
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto p = s.find(from);
  REQUIRE(p != std::string::npos);
  return s.replace(p, from.size(), to);
}

}  // namespace

TEST_CASE("Catalog::parse reads GPUs, tiers and presets", "[catalog]") {
  const Catalog c = Catalog::parse(files());
  REQUIRE(c.gpus().size() == 2);
  CHECK(c.gpus()[0].id == "h100-80gb");
  CHECK(c.gpus()[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(c.gpus()[0].vendor == "nvidia");
  CHECK(c.gpus()[0].memory.value() == 85520809984ULL);
  CHECK(c.gpus()[0].memory_label == "80 GB");
  CHECK(c.gpus()[0].bf16);
  REQUIRE(c.tiers().size() == 2);
  CHECK(c.tiers()[0].id == "p5.48xlarge");
  CHECK(c.tiers()[0].provider == "aws");
  CHECK(c.tiers()[0].gpu == "h100-80gb");
  CHECK(c.tiers()[0].count == 8);
  CHECK(c.tiers()[0].source == "https://example.com/aws");
  CHECK(c.tiers()[1].provider == "home");
  REQUIRE(c.presets().size() == 1);
  const auto& p = c.presets()[0];
  CHECK(p.id == "tiny");
  CHECK(p.name == "Tiny");
  CHECK(p.hf_repo == "org/tiny");
  CHECK(p.published_params == 1000U);
  CHECK(p.published_params_source == "the model card");
  CHECK(p.config["hidden_size"] == 64);
}

TEST_CASE("Catalog lookups are case-insensitive and suggest close names", "[catalog]") {
  const Catalog c = Catalog::parse(files());
  CHECK(c.gpu("H100-80GB").id == "h100-80gb");
  CHECK(c.preset("tiny").id == "tiny");
  CHECK(error_of([&] { (void)c.gpu("h10"); }) == "--gpu: unknown GPU 'h10' (did you mean 'h100-80gb'?)");
  CHECK(error_of([&] { (void)c.gpu("rtx4090", "budget.gpu"); }) ==
        "budget.gpu: unknown GPU 'rtx4090' (did you mean 'rtx-4090'?)");
  CHECK(error_of([&] { (void)c.gpu("mi300x"); }) ==
        "--gpu: unknown GPU 'mi300x' (run 'vramfit gpus' to list them)");
  CHECK(error_of([&] { (void)c.preset("tyni"); }) ==
        "--model: unknown model preset 'tyni' (did you mean 'tiny'?)");
}

TEST_CASE("Catalog::parse rejects bad files, naming the file and the field", "[catalog]") {
  const auto bad_gpus = [](const std::string& from, const std::string& to) {
    return error_of([&] { (void)Catalog::parse(files(replace(kGpus, from, to))); });
  };
  const auto bad_model = [](const std::string& from, const std::string& to) {
    return error_of([&] { (void)Catalog::parse(files(kGpus, replace(kModel, from, to))); });
  };
  CHECK(error_of([] {
          (void)Catalog::parse({{"models/tiny.json", kModel}});
        }) == "gpus.json: missing from the catalog (the data folder needs gpus.json and models/*.json)");
  CHECK(bad_gpus(R"("memory_bytes": 25757220864)", R"("memory_bytes": 0)") ==
        "gpus.json: gpus[1].memory_bytes: must be a positive integer, not 0 (fix the catalog file)");
  CHECK(bad_gpus(R"("memory_bytes": 25757220864)", R"("memory_bytes": -5)") ==
        "gpus.json: gpus[1].memory_bytes: must be a positive integer, not -5 (fix the catalog file)");
  CHECK(bad_gpus(R"("id": "rtx-4090")", R"("id": "h100-80gb")") ==
        "gpus.json: gpus[1].id: duplicate GPU id 'h100-80gb' (fix the catalog file)");
  CHECK(bad_gpus(R"("id": "rtx-4090")", R"("id": "RTX 4090")") ==
        "gpus.json: gpus[1].id: 'RTX 4090' is not a valid id (use lower-case letters, digits, '-', '.', '_') "
        "(fix the catalog file)");
  CHECK(
      bad_gpus(R"("bf16": true, "source": "https://example.com/4090")", R"("bf16": "yes", "source": "x")") ==
      "gpus.json: gpus[1].bf16: must be true or false, not \"yes\" (fix the catalog file)");
  CHECK(bad_gpus(R"("vendor": "nvidia", "memory_label": "24 GB")", R"("memory_label": "24 GB")") ==
        "gpus.json: gpus[1].vendor: missing (fix the catalog file)");
  CHECK(bad_gpus(R"("gpu": "rtx-4090")", R"("gpu": "rtx-5090")") ==
        "gpus.json: providers[1].tiers[0].gpu: unknown GPU 'rtx-5090' (fix the catalog file)");
  CHECK(bad_gpus(R"("count": 8)", R"("count": 0)") ==
        "gpus.json: providers[0].tiers[0].count: must be a positive integer, not 0 (fix the catalog file)");
  CHECK(bad_gpus(R"("id": "home")", R"("id": "aws")") ==
        "gpus.json: providers[1].id: duplicate provider id 'aws' (fix the catalog file)");
  CHECK(bad_gpus(R"("id": "home")", R"("id": "all")") ==
        "gpus.json: providers[1].id: 'all' is reserved ('--provider all' searches every tier and GPU) "
        "(fix the catalog file)");
  CHECK(bad_gpus(R"("providers": [)", R"("default_provider": "azure", "providers": [)") ==
        "gpus.json: default_provider: names no provider of 'providers' ('azure') (fix the catalog file)");
  CHECK(bad_gpus(R"("providers": [)", R"("default_provider": 3, "providers": [)") ==
        "gpus.json: default_provider: must be a string, not number (fix the catalog file)");
  CHECK(Catalog::parse(files(kGpus)).default_provider().empty());
  CHECK(Catalog::parse(files(replace(kGpus, R"("providers": [)", R"("default_provider": "aws", "providers": [)")))
            .default_provider() == "aws");
  CHECK(bad_gpus(R"("providers": [)", R"("providers": {"x": [)") ==
        "gpus.json: malformed JSON: parse error at line 14, column 2: syntax error while parsing object - "
        "unexpected "
        "end of input; expected '}' (fix the catalog file)");
  CHECK(bad_gpus(R"("gpus": [)", R"("gpus": 3, "x": [)") ==
        "gpus.json: gpus: must be an array, not number (fix the catalog file)");

  CHECK(bad_model(R"("id": "tiny")", R"("id": "small")") ==
        "models/tiny.json: id: 'small' differs from the file name 'tiny' (fix the catalog file)");
  CHECK(bad_model(R"("published_params": 1000)", R"("published_params": 1.5)") ==
        "models/tiny.json: published_params: must be a positive integer, not 1.5 (fix the catalog file)");
  CHECK(bad_model(R"("config": {"model_type": "llama", "hidden_size": 64})", R"("config": [])") ==
        "models/tiny.json: config: must be a JSON object, not array (fix the catalog file)");
  CHECK(bad_model(R"("hf_repo": "org/tiny", )", "") ==
        "models/tiny.json: hf_repo: missing (fix the catalog file)");
  CHECK(error_of([] { (void)Catalog::parse(files(kGpus, "[1, 2]")); }) ==
        "models/tiny.json: must be a JSON object, not array (fix the catalog file)");
  CHECK(error_of([] {
          auto f = files();
          f["model/typo.json"] = kModel;
          (void)Catalog::parse(f);
        }) ==
        "model/typo.json: unexpected file in the catalog (the data folder holds gpus.json and "
        "models/<id>.json only)");
  // Found by tests/fuzz/catalog_fuzz.cpp: a diagnostic must name something.
  CHECK(error_of([] {
          auto f = files();
          f[""] = kModel;
          (void)Catalog::parse(f);
        }) ==
        "catalog: a file with an empty name (the data folder holds gpus.json and models/<id>.json only)");
}

TEST_CASE("published_params may be null", "[catalog]") {
  const Catalog c = Catalog::parse(
      files(kGpus,
            replace(replace(kModel, R"("published_params": 1000)", R"("published_params": null)"),
                    R"("published_params_source": "the model card")", R"("published_params_source": null)")));
  CHECK_FALSE(c.presets()[0].published_params.has_value());
  CHECK(c.presets()[0].published_params_source.empty());
}

TEST_CASE("did_you_mean: prefixes, typos, substrings, best first, at most three", "[catalog]") {
  const std::vector<std::string> gpus{"a100-40gb",  "a100-80gb", "h100-80gb",
                                      "h200-141gb", "l4-24gb",   "rtx-4090"};
  CHECK(did_you_mean("h10", gpus) == std::vector<std::string>{"h100-80gb"});
  CHECK(did_you_mean("H100", gpus) == std::vector<std::string>{"h100-80gb"});
  CHECK(did_you_mean("a100", gpus) == std::vector<std::string>{"a100-40gb", "a100-80gb"});
  CHECK(did_you_mean("h100-80g", gpus) == std::vector<std::string>{"h100-80gb"});
  CHECK(did_you_mean("h100-80gb-sxm", gpus) == std::vector<std::string>{"h100-80gb"});
  CHECK(did_you_mean("rtx4090", gpus) == std::vector<std::string>{"rtx-4090"});
  CHECK(did_you_mean("4090", gpus) == std::vector<std::string>{"rtx-4090"});
  CHECK(did_you_mean("h100-08gb", gpus) ==
        std::vector<std::string>{"h100-80gb"});  // a transposition is one typo
  CHECK(did_you_mean("zzzzzz", gpus).empty());
  CHECK(did_you_mean("", gpus).empty());
  CHECK(did_you_mean("x", {}).empty());
  // The typed name starts known ones: those first, alphabetically, before one-typo matches.
  const std::vector<std::string> real{"a10", "h100-nvl", "h100-80gb", "h100-pcie-80gb", "h200"};
  CHECK(did_you_mean("h10", real) == std::vector<std::string>{"h100-80gb", "h100-nvl", "h100-pcie-80gb"});
  CHECK(did_you_mean("h2000", real) == std::vector<std::string>{"h200"});
  CHECK(did_you_mean("adamw8bit", {"adamw", "adamw-8bit", "adam"}) ==
        std::vector<std::string>{"adamw-8bit", "adamw", "adam"});
  const std::vector<std::string> many{"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b",
                                      "llama-3.2-3b"};
  CHECK(did_you_mean("llama", many) ==
        std::vector<std::string>{"llama-3.1-405b", "llama-3.1-70b", "llama-3.1-8b"});
  CHECK(did_you_mean("lama-3.1-8b", many).front() == "llama-3.1-8b");
  CHECK(did_you_mean("llama-3.1-7b", many).front() == "llama-3.1-8b");
}

TEST_CASE("sm_count: optional, a positive count beside the compute capability", "[catalog]") {
  const auto with = [](const std::string& extra) {
    return replace(kGpus, R"("bf16": true, "source": "https://example.com/h100")",
                   R"("bf16": true, )" + extra + R"(, "source": "https://example.com/h100")");
  };
  CHECK(Catalog::parse(files(with(R"("compute_capability": "9.0", "sm_count": 132)"))).gpu("h100-80gb", "--gpu").sm_count ==
        132);
  CHECK(Catalog::parse(files(with(R"("compute_capability": "9.0")"))).gpu("h100-80gb", "--gpu").sm_count == 0);
  CHECK(error_of([&] { (void)Catalog::parse(files(with(R"("sm_count": 132)"))); }) ==
        "gpus.json: gpus[0].sm_count: an SM count needs the card's compute_capability (fix the catalog file)");
  CHECK(error_of([&] { (void)Catalog::parse(files(with(R"("compute_capability": "9.0", "sm_count": 0)"))); }) ==
        "gpus.json: gpus[0].sm_count: must be a positive integer, not 0 (fix the catalog file)");
  CHECK(error_of([&] { (void)Catalog::parse(files(with(R"("compute_capability": "9.0", "sm_count": 100000)"))); }) ==
        "gpus.json: gpus[0].sm_count: 100000 streaming multiprocessors is not a GPU's (fix the catalog file)");
  // The embedded catalog: every NVIDIA card with its SMs, and the bare context they give.
  const Catalog& c = Catalog::embedded();
  for (const auto& g : c.gpus())
    if (g.vendor == "nvidia") CHECK(g.sm_count > 0);
  CHECK(vramfit::engine::llamacpp::cuda_context_bytes(c.gpu("h100-80gb", "--gpu").sm_count,
                                                      c.gpu("h100-80gb", "--gpu").compute_capability) == vramfit::MiB(528));
  CHECK(vramfit::engine::llamacpp::cuda_context_bytes(c.gpu("rtx-4060-ti-16gb", "--gpu").sm_count,
                                                      c.gpu("rtx-4060-ti-16gb", "--gpu").compute_capability) == vramfit::MiB(102));
  CHECK(vramfit::engine::llamacpp::cuda_context_bytes(c.gpu("t4", "--gpu").sm_count,
                                                      c.gpu("t4", "--gpu").compute_capability) == vramfit::MiB(80));  // 40 x 1024
  CHECK(vramfit::engine::llamacpp::cuda_context_bytes(132, 0) == vramfit::Bytes{0});
}

TEST_CASE("compute_capability: optional, M.m, read as M * 10 + m", "[catalog]") {
  const auto with = [](const std::string& cc) {
    return replace(kGpus, R"("bf16": true, "source": "https://example.com/h100")",
                   R"("bf16": true, "compute_capability": )" + cc + R"(, "source": "https://example.com/h100")");
  };
  CHECK(Catalog::parse(files(with("\"9.0\""))).gpu("h100-80gb", "--gpu").compute_capability == 90);
  CHECK(Catalog::parse(files(with("\"12.0\""))).gpu("h100-80gb", "--gpu").compute_capability == 120);
  CHECK(Catalog::parse(files(with("null"))).gpu("h100-80gb", "--gpu").compute_capability == 0);
  CHECK(Catalog::parse(files()).gpu("rtx-4090", "--gpu").compute_capability == 0);  // absent
  for (const char* bad : {"\"9\"", "\"9.10\"", "\"x.0\"", "\"0.5\"", "\"9.0.1\"", "\".0\""})
    CHECK(error_of([&] { (void)Catalog::parse(files(with(bad))); }) ==
          "gpus.json: gpus[0].compute_capability: must be a CUDA compute capability such as \"9.0\", not '" +
              std::string(bad).substr(1, std::string(bad).size() - 2) + "' (fix the catalog file)");
  CHECK(error_of([&] { (void)Catalog::parse(files(with("9.0"))); }) ==
        "gpus.json: gpus[0].compute_capability: must be a string, not number (fix the catalog file)");
  // The embedded catalog: every NVIDIA card says its capability.
  const Catalog& c = Catalog::embedded();
  CHECK(c.gpu("h100-80gb", "--gpu").compute_capability == 90);
  CHECK(c.gpu("b200", "--gpu").compute_capability == 100);
  CHECK(c.gpu("a100-80gb", "--gpu").compute_capability == 80);
  CHECK(c.gpu("mi300x", "--gpu").compute_capability == 0);
  for (const auto& g : c.gpus())
    if (g.vendor == "nvidia") CHECK(g.compute_capability >= 70);
}
