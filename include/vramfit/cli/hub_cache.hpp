#pragma once

// `--model org/name[@revision]`: a Hugging Face repo id, resolved from a preset whose hf_repo is
// that id, else from the local Hugging Face cache (the folder layout written by huggingface_hub:
// models--org--name/{refs,snapshots,blobs}), else fetched from the Hub (hub_http.hpp) unless
// HF_HUB_OFFLINE is set. Only config.json, the index and the safetensors headers are read, never
// the weights.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::cli {

/// A repo id as given: "org/name" or "name", with an optional "@revision".
struct HubId {
  std::string repo;      ///< "Qwen/Qwen2.5-7B"
  std::string revision;  ///< "main" when none was given
  bool revision_given = false;
};

/// Parses and checks `text` as the Hub allows (parts of letters, digits, '-', '_', '.', at most
/// 96 characters each, no '--' or '..', not starting or ending with '-' or '.', a name not ending
/// in '.git'; at most one '/';
/// a revision without control characters, '..' or a leading '/'). Throws InputError naming
/// `field` otherwise.
HubId parse_hub_id(std::string_view text, std::string_view field);

/// The hub cache folder, as huggingface_hub's constants.py computes it: HF_HUB_CACHE, else
/// HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
/// ~/.cache/huggingface/hub ($HOME); empty variables count as unset. Empty when none can be
/// formed (no HOME). `from`, when given, receives where it came from, for messages.
std::filesystem::path hub_cache_dir(std::string* from = nullptr);

/// The model of `--model VALUE`: a preset id; a preset whose hf_repo is VALUE (without
/// @revision); else the snapshot of VALUE in the Hugging Face cache; else, for an id with an
/// organisation or a revision, the Hub (fetch_from_hub) unless HF_HUB_OFFLINE is set. Throws
/// InputError naming `field` with the paths looked at and the fix when nothing is found.
spec::ModelSpec load_model_arg(std::string_view value, const catalog::Catalog& catalog,
                               std::string_view field = "--model");

}  // namespace vramfit::cli
