// File input of the CLI: the only module that touches the file system.
#include "vramfit/cli/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>
#include <set>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/parse.hpp"

#include "common.hpp"

namespace vramfit::cli {

namespace fs = std::filesystem;

namespace {

using util::quote;

// Files are read this many bytes at a time, so memory follows what was read, never what a
// header or a device claims.
constexpr std::size_t kReadChunk = std::size_t{1} << 16;

[[noreturn]] void throw_too_long(const fs::path& path, std::string_view field, std::uint64_t max_bytes) {
  throw InputError(std::string(field),
                   fmt::format("{} is longer than {} MiB: not the file expected", quote(path), max_bytes >> 20),
                   "check the path");
}

/// What a path that is not a regular file is, for a message; empty for a regular file.
std::string not_a_file(const struct ::stat& st) {
  if (S_ISREG(st.st_mode)) return {};
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

/// A file descriptor closed at the end of its scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

/// An open regular file and its size when opened.
struct OpenFile {
  Fd fd;
  std::uint64_t size;
};

/// The type and size of `path` by stat (nothing is opened); throws InputError naming `field`
/// when it is missing, unreadable or not a regular file.
struct ::stat stat_regular(const fs::path& path, std::string_view field);

/// Opens a regular file for reading, without ever blocking: the type is checked with stat
/// before opening (a FIFO with no writer would block open() forever, /dev/zero would never
/// end), the open itself is non-blocking, and fstat checks the type again on what was opened
/// (the path may have changed in between). Returns the descriptor and the file's size.
[[noreturn]] void refuse_kind(const fs::path& path, std::string_view field, const std::string& kind) {
  if (kind == "a folder")
    throw InputError(std::string(field), fmt::format("{} is a folder, not a file", quote(path)), "give a file");
  throw InputError(std::string(field), fmt::format("{} is {}, not a file", quote(path), kind),
                   "save the input to a regular file and give that file");
}

struct ::stat stat_regular(const fs::path& path, std::string_view field) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      throw InputError(std::string(field), fmt::format("{} does not exist", quote(path)), "check the path");
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(err)),
                     "check the file's permissions");
  }
  if (const std::string kind = not_a_file(st); !kind.empty()) refuse_kind(path, field, kind);
  return st;
}

OpenFile open_regular(const fs::path& path, std::string_view field) {
  struct ::stat st = stat_regular(path, field);
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0)
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)),
                     "check the file's permissions");
  if (::fstat(fd.get(), &st) != 0)
    throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)),
                     "check the file");
  if (const std::string kind = not_a_file(st); !kind.empty()) refuse_kind(path, field, kind);
  return {std::move(fd), static_cast<std::uint64_t>(st.st_size)};
}

/// Reads at most `max_bytes` from `fd` in 64 KiB chunks. `over` is called (and must throw)
/// when there is more; with `stop_at_max` the read simply stops there instead.
std::string read_bounded(int fd, std::uint64_t max_bytes, bool stop_at_max, const fs::path& path,
                         std::string_view field) {
  std::string text;
  if (stop_at_max) text.reserve(static_cast<std::size_t>(max_bytes));  // no copies as it grows
  std::string chunk(kReadChunk, '\0');
  for (;;) {
    const std::uint64_t room = stop_at_max ? max_bytes - text.size() : max_bytes + 1 - text.size();
    if (room == 0) break;
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), room));
    const ::ssize_t n = ::read(fd, chunk.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(std::string(field), fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)),
                       "check the file");
    }
    if (n == 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(n));
    if (!stop_at_max && text.size() > max_bytes) throw_too_long(path, field, max_bytes);
  }
  return text;
}

std::uint64_t file_size(const fs::path& path, std::string_view field) {
  // A folder named like a shard (`model.safetensors/`), a FIFO or a device: said as such.
  return static_cast<std::uint64_t>(stat_regular(path, field).st_size);
}

/// The safetensors files of a checkpoint folder, in load order.
std::vector<fs::path> safetensors_files(const fs::path& dir, std::string_view field) {
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    const std::string text = read_file(index, field);
    const nlohmann::json j = parse_json(text, index.string(), "download the file again", "malformed JSON: ");
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw InputError(index.string() + ": weight_map", "missing or not an object",
                       "download the file again");
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw InputError(index.string() + ": weight_map." + text_excerpt(tensor), "must be a file name",
                         "download the file again");
      // A shard is a file beside the index (huggingface_hub writes plain names): a path that
      // leaves the folder ('../../etc/passwd', '/dev/zero') is refused, not read (issue #14).
      const std::string name = shard.get<std::string>();
      if (name.empty() || name == "." || name == ".." || name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
        throw InputError(index.string() + ": weight_map." + text_excerpt(tensor),
                         fmt::format("shard {} is not a file name in the model's folder", quote(name)),
                         "download the file again: shards are listed by plain file name");
      shards.insert(name);
    }
    std::vector<fs::path> out;
    for (const auto& s : shards) {
      const fs::path p = dir / s;
      if (!fs::exists(p, ec))
        throw InputError(std::string(field),
                         fmt::format("shard {} listed in model.safetensors.index.json is missing", quote(p)),
                         "download every shard, or give the config file alone");
      out.push_back(p);
    }
    return out;
  }
  if (fs::exists(dir / "model.safetensors", ec)) return {dir / "model.safetensors"};
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// The .gguf files directly in a folder, sorted.
std::vector<fs::path> gguf_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".gguf" && entry.is_regular_file(ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// A spec from a GGUF file (or a split GGUF's files): only headers are read (at most
/// spec::kGgufMaxHeader bytes each).
spec::ModelSpec load_gguf(const fs::path& file, std::string_view field) {
  const std::string origin = file.string();
  spec::ModelSpec spec = spec::spec_from_gguf(read_gguf(file, field), origin);
  spec.name = origin;
  return spec;
}

}  // namespace

spec::GgufHeader read_gguf_header(const fs::path& file, std::string_view field) {
  const std::uint64_t size = file_size(file, field);
  const std::uint64_t cap = std::min(spec::kGgufMaxHeader, size);
  // Reading the whole 64 MiB of a large file took ~0.6 s; most headers end within their first MiB.
  std::uint64_t want = std::min<std::uint64_t>(cap, 1ULL << 20);
  for (;;) {
    const std::string prefix = read_prefix(file, want, field);
    try {
      return spec::parse_gguf_header(prefix, size, file.string());
    } catch (const spec::GgufPrefixShort& e) {
      if (prefix.size() < want || want >= cap) throw;  // the limit, or a file that shrank meanwhile
      want = std::min(cap, std::max<std::uint64_t>(want * 4, e.needed + (1ULL << 20)));
    }
  }
}

spec::GgufHeader read_gguf(const fs::path& file, std::string_view field) {
  spec::GgufHeader first = read_gguf_header(file, field);
  const spec::GgufValue* count = first.find("split.count");
  const std::optional<std::uint64_t> n = count != nullptr ? count->as_uint() : std::nullopt;
  if (!n || *n <= 1) return first;
  // llama.cpp's llama_split_path: "%s-%05d-of-%05d.gguf", 1-based.
  constexpr std::uint64_t kMaxSplits = 9999;
  const std::string name = file.filename().string();
  const std::string tail = fmt::format("-of-{:05d}.gguf", *n);
  if (*n > kMaxSplits || name.size() < tail.size() + 6 || name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    throw InputError(std::string(field),
                     fmt::format("{} is one of {} files of a split GGUF (split.count), but its name is not gguf-split's "
                                 "<prefix>-0000k-of-{:05d}.gguf",
                                 quote(file), *n, *n),
                     "keep the files' names as gguf-split wrote them, in one folder");
  const std::string prefix = name.substr(0, name.size() - tail.size() - 6);
  spec::GgufHeader merged;
  for (std::uint64_t k = 1; k <= *n; ++k) {
    const fs::path part = file.parent_path() / fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, k, *n);
    std::error_code ec;
    if (!fs::exists(part, ec))
      throw InputError(std::string(field),
                       fmt::format("the split GGUF has {} files and {} is missing", *n, quote(part)),
                       "download every file of the split into one folder");
    spec::GgufHeader h = part == file ? first : read_gguf_header(part, field);
    const spec::GgufValue* no = h.find("split.no");
    if (no == nullptr || no->as_uint() != std::optional<std::uint64_t>(k - 1))
      throw InputError(std::string(field), fmt::format("{} is not file {} of the split (its split.no)", quote(part), k),
                       "download the split again");
    if (k == 1) merged = std::move(h);  // the first file holds the model's metadata
    else
      for (spec::GgufTensor& t : h.tensors) {
        t.file = static_cast<std::uint32_t>(k - 1);
        merged.tensors.push_back(std::move(t));
      }
  }
  std::set<std::string_view> names;  // a name in two files
  for (const spec::GgufTensor& t : merged.tensors)
    if (!names.insert(t.name).second)
      throw InputError(std::string(field), fmt::format("tensor '{}' is in two files of the split", t.name),
                       "download the split again");
  return merged;
}

std::string read_file(const fs::path& path, std::string_view field, std::uint64_t max_bytes) {
  const OpenFile f = open_regular(path, field);
  // The size first: a file over the limit is refused without reading a byte of it. The read
  // stays bounded as well, as the file may grow meanwhile (or report 0, like /proc files).
  if (f.size > max_bytes) throw_too_long(path, field, max_bytes);
  return read_bounded(f.fd.get(), max_bytes, false, path, field);
}

std::string read_prefix(const fs::path& path, std::uint64_t max_bytes, std::string_view field) {
  const OpenFile f = open_regular(path, field);
  return read_bounded(f.fd.get(), std::min(max_bytes, f.size), true, path, field);
}

std::string read_stream(std::istream& in, std::uint64_t max_bytes, std::string_view field, std::string_view fix) {
  std::string text;
  std::string chunk(kReadChunk, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw InputError(std::string(field), fmt::format("standard input is longer than {} MiB", max_bytes >> 20),
                       std::string(fix));
  }
  if (in.bad()) throw InputError(std::string(field), "cannot read standard input", std::string(fix));
  return text;
}

std::string stdin_problem(int fd) {
  struct ::stat st {};
  if (::fstat(fd, &st) != 0) return {};
  if (S_ISDIR(st.st_mode)) return "standard input is a folder";
  // A terminal is a character device too, and typing (or pasting) a log into it is fine.
  if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && ::isatty(fd) == 0)
    return fmt::format("standard input is a {} device, not a log", S_ISCHR(st.st_mode) ? "character" : "block");
  return {};
}

std::map<std::string, std::string> read_data_dir(const fs::path& dir, std::string_view field) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(std::string(field), fmt::format("{} is not a folder", quote(dir)),
                     "give a folder holding gpus.json and models/*.json");
  if (!fs::exists(dir / "gpus.json", ec))
    throw InputError(std::string(field), fmt::format("folder {} has no gpus.json", quote(dir)),
                     "give a folder holding gpus.json and models/*.json");
  std::map<std::string, std::string> files;
  files["gpus.json"] = read_file(dir / "gpus.json", field);
  const fs::path models = dir / "models";
  if (fs::is_directory(models, ec)) {
    for (const auto& entry : fs::directory_iterator(models, ec))
      if (entry.path().extension() == ".json")
        files["models/" + entry.path().filename().string()] = read_file(entry.path(), field);
  }
  return files;
}

std::uint64_t safetensors_header_length(std::string_view first8, const std::string& origin) {
  std::uint64_t header_len = 0;
  // The first 8 bytes are the header length, little-endian (safetensors format).
  for (std::size_t i = 0; i < first8.size() && i < 8; ++i)
    header_len |= static_cast<std::uint64_t>(static_cast<unsigned char>(first8[i])) << (8 * i);
  if (first8.size() >= 8 && header_len > kMaxSafetensorsHeader)
    throw InputError(origin, fmt::format("header length {} is over the 100 MB limit", header_len),
                     "the file is not a safetensors file, or is damaged");
  return header_len;
}

spec::ModelSpec spec_from_checkpoint(std::string_view config_text, const std::string& config_origin,
                                     const std::vector<SafetensorsHead>& heads, std::string_view field,
                                     const std::string& where) {
  // An unknown model_type is estimable only from the checkpoint's exact weights.
  spec::ModelSpec spec = spec::from_config_text(config_text, config_origin,
                                                heads.empty() ? spec::UnknownType::refuse : spec::UnknownType::generic);
  std::vector<spec::TensorInfo> tensors;
  for (const auto& h : heads) {
    auto part = spec::parse_safetensors_header(h.prefix, h.file_size, h.origin);
    tensors.insert(tensors.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  // Safetensors files with no tensor at all are damaged downloads (or placeholders): their
  // weights cannot be checked against the config, so they are refused as empty ones are.
  if (!heads.empty() && tensors.empty())
    throw InputError(std::string(field), fmt::format("the safetensors file(s) in {} hold no tensors", where),
                     "download the weights again, or give the config file alone");
  if (!tensors.empty()) spec::apply_checkpoint(spec, tensors);
  if (!heads.empty() && spec.family == "generic" && !spec.exact_from_checkpoint)
    throw InputError(config_origin + ": model_type",
                     fmt::format("model_type '{}' is not one vramfit knows, and the checkpoint is quantized: its "
                                 "headers do not give the exact weights either",
                                 spec.model_type),
                     "give a supported model_type (see the README's list), or the unquantized checkpoint");
  return spec;
}

spec::ModelSpec load_config(const fs::path& path, std::string_view field) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st))
    throw InputError(std::string(field), fmt::format("{} does not exist", quote(path)),
                     "give a config.json file or the folder holding it");
  const bool folder = fs::is_directory(st);
  if (!folder && path.extension() == ".gguf") return load_gguf(path, field);
  if (!folder && path.extension() == ".safetensors")
    throw InputError(std::string(field), fmt::format("{} is a safetensors file", quote(path)),
                     "give the folder holding it and config.json");
  const fs::path config = folder ? path / "config.json" : path;
  if (folder && !fs::exists(config, ec)) {
    // A llama.cpp download: one .gguf file and no config.json.
    const std::vector<fs::path> ggufs = gguf_files(path);
    if (ggufs.size() == 1) return load_gguf(ggufs.front(), field);
    // A split GGUF alone (gguf-split's -00001-of-0000n.gguf files, sorted: the first holds the
    // metadata): read whole.
    if (ggufs.size() > 1 && ggufs.front().filename().string().find(fmt::format("-00001-of-{:05d}.gguf", ggufs.size())) !=
                                std::string::npos)
      return load_gguf(ggufs.front(), field);
    if (ggufs.size() > 1)
      throw InputError(std::string(field),
                       fmt::format("folder {} has no config.json and {} .gguf files", quote(path), ggufs.size()),
                       fmt::format("give one of them, e.g. {}", quote(ggufs.front())));
    throw InputError(std::string(field), fmt::format("folder {} has no config.json", quote(path)),
                     "give the folder of a Hugging Face checkpoint, or the config file itself");
  }

  std::vector<SafetensorsHead> heads;
  if (folder)
    for (const auto& file : safetensors_files(path, field)) {
      SafetensorsHead h{file.string(), file_size(file, field), read_prefix(file, 8, field)};
      const std::uint64_t header_len = safetensors_header_length(h.prefix, h.origin);
      if (h.prefix.size() == 8) h.prefix = read_prefix(file, 8 + header_len, field);
      heads.push_back(std::move(h));
    }
  spec::ModelSpec spec = spec_from_checkpoint(read_file(config, field), config.string(), heads, field, quote(path));
  spec.name = path.string();
  spec.source = "config";
  return spec;
}

}  // namespace vramfit::cli
