// Tests of the OOM report (src/render/explain.cpp): the text for a human, the JSON for scripts,
// and the exit code of `vramfit explain`.

#include <catch2/catch.hpp>

#include <string>

#include "../doctor/fixtures.hpp"
#include "vramfit/render/explain.hpp"

using namespace vramfit::doctor;
using namespace vramfit::render;
using vramfit::Bytes;
using vramfit::ExitCode;
using vramfit::doctor::test::fixture;

TEST_CASE("explain exit codes: 0 found, 1 none", "[doctor]") {
  CHECK(explain_exit_code(scan(fixture("current_chained_exception.txt"))) == ExitCode::ok);
  CHECK(explain_exit_code(scan(fixture("thc_runtime_error.txt"))) == ExitCode::ok);
  CHECK(explain_exit_code(scan(fixture("memory_summary_only.txt"))) == ExitCode::ok);
  CHECK(explain_exit_code(scan("Epoch 1/3: loss 2.31\nDone.\n")) == ExitCode::does_not_fit);
  CHECK(to_int(explain_exit_code(scan(""))) == 1);
}

TEST_CASE("text report of a legacy message, whole", "[doctor]") {
  const OomScan s = scan(fixture("legacy_free_exceeds_request.txt"));
  const std::string text = explain_text(s, explain(s));
  CHECK(text ==
        "OOM: CUDA out of memory on GPU 0 (line 1, legacy format)\n"
        "  CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; "
        "781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch)\n"
        "\n"
        "  requested          2.26 GiB\n"
        "  card total         6.00 GiB\n"
        "  free               3.03 GiB\n"
        "  PyTorch allocated  781.59 MiB  (tensors)\n"
        "  PyTorch cached     488.17 MiB  (reserved but unallocated)\n"
        "  PyTorch reserved   1.24 GiB  (allocated + cached)\n"
        "  outside PyTorch    1.73 GiB  (context + others)\n"
        "  job needed >=      4.75 GiB  (at the failure point)\n"
        "\n"
        "Diagnosis: fragmentation (also: huge_request)\n"
        "  - The allocator asked for 2.26 GiB on CUDA GPU 0 (38% of its 6.00 GiB) with 3.03 GiB "
        "free.\n"
        "  - PyTorch held 1.24 GiB reserved: 781.59 MiB in tensors and 488.17 MiB cached but "
        "unallocated (38% of reserved).\n"
        "  - The driver reported 3.03 GiB free, at least the 2.26 GiB requested, yet the "
        "allocation failed: the free memory was not usable in one piece (on Windows, WDDM "
        "reserves part of it; another process may also have taken it in between).\n"
        "  - One request of 2.26 GiB is 38% of the card. A tensor that large is typically logits "
        "(batch x seq x vocab, 4 bytes each in fp32) or attention scores (batch x heads x seq x "
        "seq, materialized by eager attention).\n"
        "\n"
        "Fixes, in order:\n"
        "  1. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True [expandable_segments]\n"
        "     the driver reported 3.03 GiB free yet no 2.26 GiB piece could be had; expandable "
        "segments map memory in pages instead of one contiguous block (Linux only)\n"
        "  2. Halve the batch size; keep the effective batch with gradient accumulation "
        "[reduce_batch]\n"
        "     the 2.26 GiB tensor grows with the batch: halving the batch halves it to 1.13 GiB\n"
        "  3. Shorten the sequences (max_length, truncation, packing) [shorter_sequence]\n"
        "     logits grow linearly and attention scores quadratically with the sequence: halving "
        "it makes the 2.26 GiB tensor half or a quarter\n"
        "  4. Use fused attention: attn_implementation=\"sdpa\" or \"flash_attention_2\" instead "
        "of eager [fused_attention]\n"
        "     eager attention holds batch x heads x seq x seq scores; SDPA and FlashAttention work "
        "in tiles and never hold a 2.26 GiB score tensor\n"
        "  5. Compute logits and loss in chunks, or only for the positions needed "
        "(logits_to_keep) [chunked_logits]\n"
        "     logits are batch x seq x vocab (x 4 bytes in fp32); a chunked loss, or logits only "
        "where needed, never holds the whole 2.26 GiB\n"
        "  6. Use mixed precision: torch.autocast with bfloat16 (fp16 with a GradScaler) "
        "[mixed_precision]\n"
        "     if the 2.26 GiB request is an fp32 activation, bf16 makes it 1.13 GiB; 16-bit "
        "activations take about half the memory (skip if autocast is already on)\n"
        "  7. Turn on gradient checkpointing (model.gradient_checkpointing_enable()) "
        "[gradient_checkpointing]\n"
        "     in training, activations are much of the 781.59 MiB PyTorch held; checkpointing "
        "keeps them only at layer boundaries and recomputes the rest in backward (one more "
        "forward pass)\n"
        "  8. Load the weights in 8 or 4 bits (bitsandbytes); fine-tune with QLoRA [quantize]\n"
        "     weights are part of the 781.59 MiB allocated; 8-bit weights take half and 4-bit a "
        "quarter of 16-bit ones (7B parameters: 14 GB, 7 GB, 3.5 GB)\n"
        "  9. For inference, run under torch.inference_mode() with model.eval() [inference_mode]\n"
        "     only if this ran inference: without it PyTorch keeps, within the 781.59 MiB "
        "allocated, what a backward pass would need\n");
}

TEST_CASE("text report: several messages, a summary, and nothing found", "[doctor]") {
  const OomScan many = scan(fixture("mps_repeated.txt"));
  const std::string text = explain_text(many, explain(many));
  CHECK(
      text.starts_with("OOM: MPS out of memory (line 7, mps format; the last of 4 OOM "
                       "messages)\n"));
  CHECK(text.find("  card total         27.20 GiB  (high watermark)\n") != std::string::npos);
  CHECK(text.find("  other allocations  17.35 GiB  (this process, outside PyTorch's MPS "
                  "allocator)\n") != std::string::npos);

  const OomScan chosen =
      scan(fixture("current_24gb_small_request.txt") + fixture("accelerator_error_chained.txt"));
  CHECK(explain_text(chosen, explain(chosen))
            .starts_with("OOM: CUDA out of memory on GPU 0 (line 1, current format; message 1 of "
                         "2, the last with figures)\n"));

  const OomScan none = scan("loss 2.1\nloss 1.9\n");
  CHECK(explain_text(none, explain(none)) == "No out-of-memory message found.\n");
  const OomScan clean = scan("|  PyTorch CUDA memory summary, device ID 0  |\n|  CUDA OOMs: 0  |");
  CHECK(explain_text(clean, explain(clean)) ==
        "No out-of-memory message found (a memory summary on line 1 reports 0 OOMs).\n");
}

TEST_CASE("JSON report of the H200 logits case", "[doctor]") {
  const auto ooms = vramfit::doctor::test::truth_ooms("public.jsonl");
  const OomScan s = scan(ooms[1]["error"].get<std::string>());
  const auto d = explain(s, {{"logits", Bytes{39829110784}}});
  const nlohmann::json j = explain_json(s, d);
  CHECK(j["schema_version"] == 1);
  CHECK(j["found"] == true);
  CHECK(j["messages_found"] == 1);
  CHECK(j["primary"] == "huge_request");
  CHECK(j["kinds"] == nlohmann::json::array({"huge_request", "shortage", "fragmentation"}));
  CHECK(j["message"]["format"] == "current");
  CHECK(j["message"]["backend"] == "CUDA");
  CHECK(j["message"]["gpu"] == 0);
  CHECK(j["message"]["line"] == 1);
  CHECK(j["message"]["index"] == 0);
  CHECK(j["message"]["complete"] == true);
  CHECK(j["message"]["parsed"]["requested_bytes"] == 39825084252ULL);
  CHECK(j["message"]["parsed"]["reserved_total_bytes"].is_null());
  CHECK(j["accounting"]["requested_bytes"] == 39825084252ULL);
  CHECK(j["accounting"]["total_bytes"] == 150109106995ULL);
  CHECK(j["accounting"]["free_bytes"] == 4584877588ULL);
  CHECK(j["accounting"]["allocated_by_pytorch_bytes"] == 111024904602ULL);
  CHECK(j["accounting"]["reserved_unallocated_bytes"] == 33264521708ULL);
  CHECK(j["accounting"]["reserved_total_bytes"] == 144289426310ULL);
  CHECK(j["accounting"]["process_in_use_bytes"] == 145513491988ULL);
  CHECK(j["accounting"]["process_non_pytorch_bytes"] == 1224065678ULL);
  CHECK(j["accounting"]["other_processes_bytes"] == 0);
  CHECK(j["accounting"]["outside_pytorch_bytes"] == 1234803097ULL);
  CHECK(j["accounting"]["unattributed_bytes"] == 10737419ULL);
  CHECK(j["accounting"]["shortfall_bytes"] == 35240206664ULL);
  CHECK(j["accounting"]["job_needs_bytes"] == 152074054532ULL);
  CHECK(j["accounting"]["card_available_bytes"] == 150109106995ULL);
  CHECK(j["accounting"]["over_card_bytes"] == 1964947537ULL);
  CHECK(j["candidate_match"]["name"] == "logits");
  CHECK(j["candidate_match"]["size_bytes"] == 39829110784ULL);
  CHECK(j["candidate_match"]["allocator_size_bytes"] == 39829110784ULL);
  CHECK(j["candidate_match"]["difference_permille"] == 0);
  REQUIRE(j["fixes"].size() == 8);
  CHECK(j["fixes"][0]["rank"] == 1);
  CHECK(j["fixes"][0]["id"] == "chunked_logits");
  CHECK(j["fixes"][0]["seed_step"] == 0);
  CHECK(j["fixes"][1]["id"] == "reduce_batch");
  CHECK(j["fixes"][1]["seed_step"] == 1);
  CHECK(j["fixes"][3]["id"] == "expandable_segments");
  CHECK(j["fixes"][3]["seed_step"] == 6);
  CHECK(j["findings"].size() == d->findings.size());
  CHECK(j["other_processes"] == nlohmann::json::array());
  CHECK(j["memory_summary"].is_null());
}

TEST_CASE("JSON report: stable keys, integer bytes, valid UTF-8, nothing found", "[doctor]") {
  const std::vector<std::string> top = {
      "accounting",     "candidate_match", "findings",       "fixes",           "found",   "kinds",
      "memory_summary", "message",         "messages_found", "messages_kept",   "other_processes", "primary",
      "schema_version"};
  const auto keys = [](const nlohmann::json& j) {
    std::vector<std::string> k;
    for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
    return k;
  };
  const OomScan none = scan("nothing here");
  const nlohmann::json n = explain_json(none, explain(none));
  CHECK(keys(n) == top);
  CHECK(n["found"] == false);
  CHECK(n["messages_found"] == 0);
  CHECK(n["message"].is_null());
  CHECK(n["primary"].is_null());
  CHECK(n["fixes"] == nlohmann::json::array());

  // A fixture with a summary and an other process.
  const OomScan s = scan(fixture("legacy_with_summary_fairseq.txt"));
  const nlohmann::json j = explain_json(s, explain(s));
  CHECK(keys(j) == top);
  CHECK(j["memory_summary"]["line"] == 3);
  CHECK(j["memory_summary"]["device"] == 0);
  CHECK(j["memory_summary"]["ooms"] == 1);
  CHECK(j["memory_summary"]["malloc_retries"] == 3);
  CHECK(j["memory_summary"]["allocated"]["current_bytes"] == 15776874496ULL);
  CHECK(j["memory_summary"]["reserved"]["current_bytes"].is_null());
  for (const auto& [k, v] : j["accounting"].items()) {
    INFO(k);
    CHECK(k.ends_with("_bytes"));
    CHECK((v.is_null() || v.is_number_unsigned()));
  }
  const OomScan o = scan(fixture("current_other_process.txt"));
  const nlohmann::json oj = explain_json(o, explain(o));
  CHECK(oj["other_processes"] == nlohmann::json::parse(R"([{"pid": 4078482, "in_use_bytes": 12122545193}])"));

  // Bytes that are not UTF-8 around a message: the dump must not throw.
  const OomScan bad = scan(std::string("\xc3\x28 RuntimeError: CUDA error: out of memory \xe2\x82"));
  const nlohmann::json b = explain_json(bad, explain(bad));
  CHECK_NOTHROW(b.dump());
  CHECK(b["message"]["excerpt"] == "?( RuntimeError: CUDA error: out of memory ??");
}
