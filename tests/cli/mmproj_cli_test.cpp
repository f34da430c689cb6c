// --mmproj: a llama.cpp multimodal projector file counted beside the model (--engine llama.cpp).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "../unit/spec/gguf_writer.hpp"
#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::GgufWriter;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::TempDir;
using json = nlohmann::json;

namespace {

std::string gguf_file(const GgufWriter& w) { return w.header() + std::string(w.data_size(), '\0'); }

/// A tiny projector as convert_hf_to_gguf.py --mmproj writes one: general.architecture clip,
/// a patch embedding in F16 (14*14*3*64*2 = 75264 bytes) and an MLP layer in F32
/// (64*128*4 + 128*4 = 33280 bytes): 108544 bytes of tensors.
GgufWriter tiny_mmproj(const std::string& arch = "clip") {
  GgufWriter w;
  w.kv_str("general.architecture", arch);
  w.kv_str("clip.projector_type", "mlp");
  w.tensor("v.patch_embd.weight", {14, 14, 3, 64}, 1);
  w.tensor("mm.0.weight", {64, 128}, 0);
  w.tensor("mm.0.bias", {128}, 0);
  return w;
}

json engine_of(const CliResult& r) {
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out)["engine"];
}

}  // namespace

TEST_CASE("mmproj: the projector's tensor bytes on CUDA0 (llama.cpp)", "[cli][serving][mmproj]") {
  const TempDir dir;
  const std::string model = dir.write("tiny.gguf", gguf_file(vramfit::test::tiny_llama_gguf()));
  const std::string proj = dir.write("mmproj-tiny-f16.gguf", gguf_file(tiny_mmproj()));

  const json base = engine_of(run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--ctx-size", "512",
                                       "--json"}));
  CHECK_FALSE(base["devices"][0].contains("mmproj_buffer_bytes"));
  const std::uint64_t total = base["devices"][0]["total_bytes"];

  const CliResult r = run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--mmproj", proj,
                               "--ctx-size", "512", "--json"});
  const json e = engine_of(r);
  CHECK(e["devices"][0]["mmproj_buffer_bytes"] == 108544);
  CHECK(e["devices"][0]["total_bytes"] == total + 108544);
  CHECK(e["devices"][0]["model_buffer_bytes"] == 104704);  // the model's own buffer is unchanged
  CHECK(r.out.find("mtmd") != std::string::npos);          // the note says who loads it

  // Whatever --gpu-layers says: mtmd puts the projector on the GPU.
  const json cpu = engine_of(run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--mmproj", proj,
                                      "--gpu-layers", "0", "--ctx-size", "512", "--json"}));
  CHECK(cpu["devices"][0]["mmproj_buffer_bytes"] == 108544);

  // A folder holding the model and one mmproj*.gguf: both found, the same figures.
  const json folder = engine_of(run_cli({"estimate", "--engine", "llama.cpp", "--config", dir.str(), "--ctx-size",
                                         "512", "--json"}));
  CHECK(folder["devices"][0]["mmproj_buffer_bytes"] == 108544);
  CHECK(folder["devices"][0]["model_buffer_bytes"] == 104704);
  CHECK(folder["devices"][0]["total_bytes"] == total + 108544);
}

TEST_CASE("mmproj: misuse exits 2 naming the flag", "[cli][serving][mmproj]") {
  const TempDir dir;
  const std::string model = dir.write("tiny.gguf", gguf_file(vramfit::test::tiny_llama_gguf()));
  const std::string proj = dir.write("mmproj-a.gguf", gguf_file(tiny_mmproj()));

  // transformers loads no GGUF projector: the flag is llama.cpp's.
  require_usage_error(run_cli({"estimate", "--config", model, "--mmproj", proj}),
                      "vramfit: error: --mmproj: applies to a serving engine only (add --engine llama.cpp (or "
                      "ollama))\n");
  // The language model given as the projector.
  const CliResult wrong = run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--mmproj", model});
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("--mmproj: ") != std::string::npos);
  CHECK(wrong.err.find("general.architecture is 'llama'") != std::string::npos);
  // Not a .gguf file, a missing file.
  const CliResult txt = run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--mmproj", dir.str() + "/x.bin"});
  CHECK(txt.code == 2);
  CHECK(txt.err.find("--mmproj: ") != std::string::npos);
  const CliResult missing =
      run_cli({"estimate", "--engine", "llama.cpp", "--config", model, "--mmproj", dir.str() + "/none.gguf"});
  CHECK(missing.code == 2);
  CHECK(missing.err.find("--mmproj") != std::string::npos);
  // Two projectors in the folder: which one is for the user to say.
  dir.write("mmproj-b.gguf", gguf_file(tiny_mmproj()));
  const CliResult two = run_cli({"estimate", "--engine", "llama.cpp", "--config", dir.str()});
  CHECK(two.code == 2);
  CHECK(two.err.find("holds 2 projector files") != std::string::npos);
}
