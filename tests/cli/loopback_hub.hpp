#pragma once
// A fixture Hugging Face Hub on the loopback address, for the Hub fetch tests: it answers
// GET /{repo}/resolve/{revision}/{file} as the Hub does (huggingface_hub file_download.py):
// 200 or 206 with Content-Range for a Range request, 401 with X-Error-Code RepoNotFound for an
// unknown repo, GatedRepo for a gated one without the token, 404 EntryNotFound for a missing
// file, 302 for a redirect. One request per connection; it only ever listens on 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vramfit::test {

class LoopbackHub {
 public:
  /// A served file: its first bytes; the rest, up to `size`, reads as zeros.
  struct File {
    std::string head;
    std::uint64_t size = 0;
  };

  LoopbackHub() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0)
      throw std::runtime_error("bind/listen on 127.0.0.1");
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHub() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  LoopbackHub(const LoopbackHub&) = delete;
  LoopbackHub& operator=(const LoopbackHub&) = delete;

  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Serves `text` (or a sparse file of `size` bytes starting with it) as `file` of `repo` at `revision`.
  void add(const std::string& repo, const std::string& revision, const std::string& file, const std::string& text,
           std::uint64_t size = 0) {
    std::lock_guard lock(mutex_);
    repos_.insert(repo);
    files_["/" + repo + "/resolve/" + revision + "/" + file] = File{text, std::max<std::uint64_t>(size, text.size())};
  }
  void gate(const std::string& repo, const std::string& token) {
    std::lock_guard lock(mutex_);
    gated_[repo] = token;
  }
  /// Answers `path` with a 302 to `target` (a path on this server).
  void redirect(const std::string& path, const std::string& target) {
    std::lock_guard lock(mutex_);
    redirects_[path] = target;
  }
  void ignore_ranges(bool on) { ignore_ranges_ = on; }
  /// Every request line seen ("GET /path Range: bytes=0-7").
  [[nodiscard]] std::vector<std::string> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      handle(c);
      ::close(c);
    }
  }

  static void send_all(int c, const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(c, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the client hung up (it had what it wanted)
      sent += static_cast<std::size_t>(n);
    }
  }

  static std::string header_value(const std::string& req, const std::string& name) {
    std::string lower = req;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    const auto at = lower.find("\r\n" + name + ":");
    if (at == std::string::npos) return {};
    auto start = at + 3 + name.size();
    while (start < req.size() && req[start] == ' ') ++start;
    return req.substr(start, req.find("\r\n", start) - start);
  }

  void reply(int c, int status, const std::string& reason, const std::vector<std::string>& headers,
             const std::string& body) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
    for (const auto& h : headers) out += h + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    send_all(c, out);
  }

  void handle(int c) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<std::size_t>(n));
    }
    const auto sp1 = req.find(' ');
    const auto sp2 = req.find(' ', sp1 + 1);
    const std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string range = header_value(req, "range");
    const std::string auth = header_value(req, "authorization");
    std::lock_guard lock(mutex_);
    log_.push_back("GET " + path + (range.empty() ? "" : " Range: " + range) + (auth.empty() ? "" : " Auth: " + auth));
    if (const auto r = redirects_.find(path); r != redirects_.end()) {
      reply(c, 302, "Found", {"Location: " + endpoint() + r->second}, "");
      return;
    }
    // /{org}/{name}/resolve/... or /{name}/resolve/...
    const auto resolve = path.find("/resolve/");
    const std::string repo = resolve == std::string::npos ? std::string() : path.substr(1, resolve - 1);
    if (!repos_.count(repo)) {
      reply(c, 401, "Unauthorized", {"X-Error-Code: RepoNotFound"}, "Repository not found");
      return;
    }
    if (const auto g = gated_.find(repo); g != gated_.end() && auth != "Bearer " + g->second) {
      reply(c, 401, "Unauthorized", {"X-Error-Code: GatedRepo"}, "Access to this model is restricted");
      return;
    }
    const auto f = files_.find(path);
    if (f == files_.end()) {
      reply(c, 404, "Not Found", {"X-Error-Code: EntryNotFound"}, "Entry not found");
      return;
    }
    const File& file = f->second;
    std::uint64_t from = 0;
    std::uint64_t to = file.size - 1;
    const bool ranged = !range.empty() && !ignore_ranges_;
    if (ranged) {
      const auto dash = range.find('-');
      from = std::stoull(range.substr(6, dash - 6));
      if (dash + 1 < range.size()) to = std::min<std::uint64_t>(to, std::stoull(range.substr(dash + 1)));
      if (from >= file.size) {
        reply(c, 416, "Range Not Satisfiable", {"Content-Range: bytes */" + std::to_string(file.size)}, "");
        return;
      }
    }
    std::string body(static_cast<std::size_t>(to - from + 1), '\0');
    if (from < file.head.size())
      file.head.copy(body.data(), std::min<std::size_t>(body.size(), file.head.size() - from), from);
    if (ranged)
      reply(c, 206, "Partial Content",
            {"Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(to) + "/" +
             std::to_string(file.size)},
            body);
    else
      reply(c, 200, "OK", {}, body);
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> ignore_ranges_{false};
  mutable std::mutex mutex_;
  std::set<std::string> repos_;
  std::map<std::string, File> files_;
  std::map<std::string, std::string> gated_;
  std::map<std::string, std::string> redirects_;
  std::vector<std::string> log_;
  std::thread thread_;
};

}  // namespace vramfit::test
