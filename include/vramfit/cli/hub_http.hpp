#pragma once

// `--model org/name[@revision]` fetched from the Hugging Face Hub when it is neither a preset nor
// in the local cache (issue #16 item 6). Only what the estimate needs travels: config.json,
// model.safetensors.index.json and each shard's safetensors header (HTTP range requests, as
// huggingface_hub's get_safetensors_metadata does); never a weight. Built with libcurl when it is
// found at configure time (VRAMFIT_HTTP); without it the Hub is refused with the download command.
#include <string>
#include <string_view>

#include "vramfit/cli/hub_cache.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::cli {

/// Where and how the Hub is reached, from the environment as huggingface_hub reads it
/// (constants.py): HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (else
/// HUGGING_FACE_HUB_TOKEN), HF_HUB_OFFLINE (1/true/yes/on: never fetch).
struct HubEndpoint {
  std::string base;   ///< "https://huggingface.co", no trailing '/'
  std::string token;  ///< empty: anonymous
  bool offline = false;
};

/// The endpoint the environment names. Throws InputError naming HF_ENDPOINT when it is not an
/// http:// or https:// URL.
HubEndpoint hub_endpoint_from_env();

/// Whether this build can fetch from the Hub (libcurl was found at configure time).
bool hub_fetch_available() noexcept;

/// The resolve URL of `file` in `id` at its revision, as huggingface_hub's hf_hub_url builds it
/// (the revision percent-encoded whole: "refs/pr/1" -> "refs%2Fpr%2F1").
std::string hub_file_url(const HubEndpoint& endpoint, const HubId& id, std::string_view file);

/// The spec of `id` fetched from `endpoint`: config.json, then the index and the shards'
/// headers (or model.safetensors alone); the count is exact from the headers when the repo has
/// safetensors weights. Every failure (no network, a timeout, 401/403 for a gated or private
/// repo, 404, a damaged header, a response over its size limit) throws InputError naming
/// `field`, with the fix. Requests time out (10 s to connect, 60 s without progress), follow
/// at most 5 redirects over http(s) only, and no response body is kept past its limit.
spec::ModelSpec fetch_from_hub(const HubId& id, const HubEndpoint& endpoint, std::string_view field);

}  // namespace vramfit::cli
