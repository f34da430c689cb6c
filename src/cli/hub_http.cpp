// `--model org/name` from the Hugging Face Hub over HTTP (see hub_http.hpp). What is fetched and
// how follows huggingface_hub: file_download.py (hf_hub_url: {endpoint}/{repo}/resolve/{revision}/
// {file}, the revision quoted whole; the X-Error-Code header: RepoNotFound, RevisionNotFound,
// EntryNotFound, GatedRepo) and hf_api.py get_safetensors_metadata (the index's weight_map, then
// each shard's first bytes by a Range request: 8 bytes of header length, then the JSON header).
#include "vramfit/cli/hub_http.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/cli/files.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"

#include "common.hpp"
#include "hub_parse.hpp"

#ifdef VRAMFIT_HAVE_CURL
#include <curl/curl.h>
#endif

namespace vramfit::cli {

namespace {

using util::env;

/// huggingface_hub's _is_true: "1", "ON", "YES", "TRUE" in any case.
bool is_true(std::string_view v) {
  const std::string u = upper(v);
  return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

/// Percent-encodes every byte but RFC 3986's unreserved ones (and '/' when `keep_slash`).
std::string percent_encode(std::string_view s, bool keep_slash) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

std::string download_fix(const HubId& id) {
  return fmt::format("or download its config and index with {}, and give --model again (vramfit reads the local "
                     "cache) or --config PATH",
                     util::hub_download_command(id));
}

// An index lists a few to a few hundred shards (DeepSeek-V3: 163); more is no checkpoint.
constexpr std::size_t kMaxShards = 4096;
constexpr std::uint64_t kMaxIndex = 64ULL << 20;
// The first request for a shard asks for this many bytes: a header of a few hundred tensors
// (30 to 60 KB) comes whole, a larger one takes a second request.
constexpr std::uint64_t kFirstRange = 1ULL << 17;

}  // namespace

// --- the responses, parsed (hub_parse.hpp) ---------------------------------------------------

namespace hub {

void read_header_line(std::string_view line, ResponseHeaders& h) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {  // a new response (after a redirect): its own headers
    h.error_code.clear();
    h.content_range.clear();
    return;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string name = lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (name == "x-error-code") h.error_code = std::string(value.substr(0, 64));
  if (name == "content-range") h.content_range = std::string(value.substr(0, 128));
}

std::optional<std::uint64_t> content_range_size(std::string_view content_range) {
  // "bytes 0-131071/4976698672"
  const auto slash = content_range.rfind('/');
  const std::string_view size = slash == std::string_view::npos ? std::string_view() : content_range.substr(slash + 1);
  const bool digits = !size.empty() && size.size() <= 19 && std::all_of(size.begin(), size.end(), is_digit);
  if (!content_range.starts_with("bytes 0-") || !digits) return std::nullopt;
  return std::stoull(std::string(size));
}

bool plain_shard_name(std::string_view s) {
  if (s.empty() || s.size() > 255 || s.front() == '/' || !s.ends_with(".safetensors")) return false;
  if (util::has_control(s) || s.find('\\') != std::string_view::npos) return false;
  return util::plain_path_parts(s);
}

std::vector<std::string> shards_of_index(const std::string& text, const std::string& origin) {
  // parse_json's limits (depth, values), as every document vramfit reads.
  const std::optional<nlohmann::json> index = try_parse_json(text);
  if (!index || !index->is_object() || !index->contains("weight_map") || !(*index)["weight_map"].is_object())
    throw InputError(origin, "not a safetensors index (no weight_map object)", "check the repo's index file");
  std::set<std::string> names;
  for (const auto& [tensor, file] : (*index)["weight_map"].items()) {
    if (!file.is_string() || !plain_shard_name(file.get_ref<const std::string&>()))
      throw InputError(origin + ": weight_map." + text_excerpt(tensor),
                       "not the relative name of a .safetensors file", "check the repo's index file");
    names.insert(file.get<std::string>());
    if (names.size() > kMaxShards)
      throw InputError(origin + ": weight_map", fmt::format("more than {} shards", kMaxShards),
                       "check the repo's index file");
  }
  if (names.empty()) throw InputError(origin + ": weight_map", "lists no shard", "check the repo's index file");
  return {names.begin(), names.end()};
}

void throw_response_error(long status, std::string_view error_code, const HubId& id, const HubEndpoint& endpoint,
                          std::string_view file, const std::string& field) {
  const std::string repo = text_excerpt(id.repo);
  if (error_code == "GatedRepo")
    throw InputError(field, fmt::format("'{}' is a gated repo on {}", repo, endpoint.base),
                     endpoint.token.empty()
                         ? "accept its conditions on the model's page, then set HF_TOKEN to a token of yours"
                         : "accept its conditions on the model's page with the account of HF_TOKEN's token");
  if (error_code == "RevisionNotFound")
    throw InputError(field,
                     fmt::format("revision '{}' of '{}' was not found on {}", text_excerpt(id.revision), repo,
                                 endpoint.base),
                     "give a branch, tag or commit the repo has (@main is the default)");
  if (error_code == "EntryNotFound" || (status == 404 && error_code.empty()))
    throw InputError(field, fmt::format("'{}' has no {} at revision '{}' on {}", repo, file,
                                        text_excerpt(id.revision), endpoint.base),
                     "give a Hugging Face model repo (it holds config.json), or --config PATH");
  if (status == 401 || status == 403 || error_code == "RepoNotFound")
    throw InputError(field,
                     fmt::format("'{}' was not found on {} (HTTP {}): no such repo, or a private one", repo,
                                 endpoint.base, status),
                     endpoint.token.empty() ? "check the repo id; for a private repo, set HF_TOKEN"
                                            : "check the repo id, and that HF_TOKEN's token can read it");
  throw InputError(field, fmt::format("{} answered HTTP {} for {} of '{}'", endpoint.base, status, file, repo),
                   "try again later, " + download_fix(id));
}

}  // namespace hub

HubEndpoint hub_endpoint_from_env() {
  HubEndpoint e;
  e.base = env("HF_ENDPOINT");
  if (e.base.empty()) e.base = "https://huggingface.co";
  while (e.base.size() > 1 && e.base.back() == '/') e.base.pop_back();
  const bool http = e.base.starts_with("http://") || e.base.starts_with("https://");
  bool clean = true;
  for (const char c : e.base)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) clean = false;
  if (!http || !clean || e.base.size() > 2048)
    throw InputError("HF_ENDPOINT", fmt::format("'{}' is not an http:// or https:// URL", text_excerpt(e.base)),
                     "unset it (the Hub is https://huggingface.co) or give the mirror's URL");
  e.token = env("HF_TOKEN");
  if (e.token.empty()) e.token = env("HUGGING_FACE_HUB_TOKEN");
  e.offline = is_true(env("HF_HUB_OFFLINE"));
  return e;
}

std::string hub_file_url(const HubEndpoint& endpoint, const HubId& id, std::string_view file) {
  return fmt::format("{}/{}/resolve/{}/{}", endpoint.base, id.repo, percent_encode(id.revision, false),
                     percent_encode(file, true));
}

#ifndef VRAMFIT_HAVE_CURL

bool hub_fetch_available() noexcept { return false; }

spec::ModelSpec fetch_from_hub(const HubId& id, const HubEndpoint&, std::string_view field) {
  throw InputError(std::string(field),
                   fmt::format("'{}' is not a preset's repo nor in the Hugging Face cache, and this vramfit was "
                               "built without libcurl, so it cannot fetch from the Hub",
                               text_excerpt(id.repo)),
                   "install libcurl4-openssl-dev and rebuild, " + download_fix(id));
}

#else

bool hub_fetch_available() noexcept { return true; }

namespace {

struct Response {
  long status = 0;
  std::string body;
  hub::ResponseHeaders headers;  ///< of the last response
  std::uint64_t limit = 0;
  bool over_limit = false;    ///< the body passed `limit` and the transfer was cut there
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::size_t len = size * count;
  if (r->body.size() + len > r->limit) {
    r->body.append(data, r->limit - r->body.size());
    r->over_limit = true;
    return 0;  // stops the transfer (CURLE_WRITE_ERROR)
  }
  r->body.append(data, len);
  return len;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::size_t len = size * count;
  hub::read_header_line(std::string_view(data, len), r->headers);
  return len;
}

void init_curl_once() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  if (!done) throw InputError("--model", "libcurl could not be initialised", "check the system's libcurl");
}

class Fetcher {
 public:
  Fetcher(const HubId& id, const HubEndpoint& endpoint, std::string_view field)
      : id_(id), endpoint_(endpoint), field_(field) {
    init_curl_once();
    curl_ = curl_easy_init();
    if (curl_ == nullptr) throw InputError(field_, "libcurl could not start a request", "check the system's libcurl");
    if (!endpoint.token.empty())
      headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + endpoint.token).c_str());
  }
  ~Fetcher() {
    curl_slist_free_all(headers_);
    curl_easy_cleanup(curl_);
  }
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  /// GET `file`, keeping at most `limit` bytes of its body; `range` ("0-131071") asks for part of it.
  /// Throws on a transport error; an over-limit body throws unless `cut_ok`.
  Response get(std::string_view file, std::uint64_t limit, const std::string& range = {}, bool cut_ok = false) {
    const std::string url = hub_file_url(endpoint_, id_, file);
    Response r;
    r.limit = limit;
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl_, CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "vramfit");
    if (headers_ != nullptr) curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    if (!range.empty()) curl_easy_setopt(curl_, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &r);
    const CURLcode rc = curl_easy_perform(curl_);
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
    if (rc == CURLE_WRITE_ERROR && r.over_limit) {
      if (cut_ok) return r;
      throw InputError(field_, fmt::format("{} is larger than {} bytes", url, limit),
                       "check HF_ENDPOINT: the Hub's files of this kind are far smaller");
    }
    if (rc != CURLE_OK)
      throw InputError(field_,
                       fmt::format("'{}' is not a preset's repo nor in the Hugging Face cache, and {} could not be "
                                   "fetched: {}",
                                   text_excerpt(id_.repo), url, curl_easy_strerror(rc)),
                       "check the network (or HF_ENDPOINT), " + download_fix(id_) +
                           "; HF_HUB_OFFLINE=1 never fetches");
    return r;
  }

  /// Throws the error a failed response means, for `file`.
  [[noreturn]] void fail(const Response& r, std::string_view file) const {
    hub::throw_response_error(r.status, r.headers.error_code, id_, endpoint_, file, field_);
  }

  /// The head of one shard: its size and its first 8 + header-length bytes.
  SafetensorsHead head(const std::string& file) {
    const std::string origin = hub_file_url(endpoint_, id_, file);
    Response r = get(file, kFirstRange, fmt::format("0-{}", kFirstRange - 1), true);
    if (r.status != 200 && r.status != 206) fail(r, file);
    std::uint64_t total = 0;
    if (r.status == 206) {
      const auto size = hub::content_range_size(r.headers.content_range);
      if (!size)
        throw InputError(origin, fmt::format("the server's Content-Range '{}' gives no file size",
                                             text_excerpt(r.headers.content_range)),
                         "check HF_ENDPOINT: the Hub answers a range request with the file's size");
      total = *size;
    } else {
      // The server ignored the range: the body is the file, cut at kFirstRange (the transfer stops there).
      curl_off_t length = -1;
      curl_easy_getinfo(curl_, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      total = length >= 0 ? static_cast<std::uint64_t>(length) : r.body.size();
      if (!r.over_limit) total = r.body.size();
    }
    SafetensorsHead h{origin, total, std::move(r.body)};
    if (h.prefix.size() > total) h.prefix.resize(total);
    const std::uint64_t header_len = safetensors_header_length(h.prefix, origin);
    if (h.prefix.size() < 8) return h;  // too short: parse_safetensors_header says so
    const std::uint64_t needed = 8 + header_len;
    if (needed > total)
      throw InputError(origin, fmt::format("header length {} is past the file's end ({} bytes)", header_len, total),
                       "the file is not a safetensors file, or is damaged");
    if (needed <= h.prefix.size()) {
      h.prefix.resize(needed);
      return h;
    }
    const std::uint64_t have = h.prefix.size();
    Response rest = get(file, needed - have, fmt::format("{}-{}", have, needed - 1));
    if (rest.status != 206 || rest.body.size() != needed - have)
      throw InputError(origin,
                       fmt::format("the header's bytes {} to {} did not come (HTTP {}, {} bytes)", have, needed - 1,
                                   rest.status, rest.body.size()),
                       "try again; a server that ignores range requests cannot serve a header this long");
    h.prefix += rest.body;
    return h;
  }

 private:
  const HubId& id_;
  const HubEndpoint& endpoint_;
  std::string field_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
};

}  // namespace

spec::ModelSpec fetch_from_hub(const HubId& id, const HubEndpoint& endpoint, std::string_view field) {
  Fetcher f(id, endpoint, field);
  const Response config = f.get("config.json", kMaxConfigFile);
  if (config.status != 200) f.fail(config, "config.json");

  std::vector<std::string> shards;
  const std::string index_name = "model.safetensors.index.json";
  const Response index = f.get(index_name, kMaxIndex);
  if (index.status == 200) {
    shards = hub::shards_of_index(index.body, hub_file_url(endpoint, id, index_name));
  } else if (index.status == 404) {
    shards = {"model.safetensors"};
  } else {
    f.fail(index, index_name);
  }

  std::vector<SafetensorsHead> heads;
  bool weights_missing = false;
  for (const auto& shard : shards) {
    if (shards.size() == 1 && shard == "model.safetensors" && index.status == 404) {
      // No index: one model.safetensors, or none (a repo of .bin or .gguf weights).
      const Response probe = f.get(shard, 8, "0-7", true);
      if (probe.status == 404) {
        weights_missing = true;
        break;
      }
    }
    heads.push_back(f.head(shard));
  }
  const std::string config_url = hub_file_url(endpoint, id, "config.json");
  spec::ModelSpec m =
      spec_from_checkpoint(config.body, config_url, heads, field, fmt::format("'{}'", text_excerpt(id.repo)));
  m.name = id.repo + "@" + id.revision;
  m.source = "config";
  m.notes.push_back(fmt::format("fetched from {}: config.json{} (no weights downloaded)", endpoint.base,
                                heads.empty() ? std::string()
                                              : fmt::format(" and {} safetensors header{}", heads.size(),
                                                            heads.size() == 1 ? "" : "s")));
  if (weights_missing)
    m.notes.push_back("the repo has no safetensors weights: parameters counted from config.json");
  return m;
}

#endif

}  // namespace vramfit::cli
