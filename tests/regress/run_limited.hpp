#pragma once

// Runs the real vramfit binary as a child process under resource limits (RLIMIT_AS 256 MiB,
// RLIMIT_CPU 2 s, killed after 2 s of wall time; under ASan resident memory and 10 s): shared by
// limits_test.cpp and adversarial/adversarial_test.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../cli/cli_helper.hpp"

namespace vramfit::test::limited {

using vramfit::test::TempDir;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

constexpr std::uint64_t kMemory = 256ULL << 20;   // bytes of address space (RLIMIT_AS)
constexpr int kSeconds = kAsan ? 10 : 2;          // CPU seconds (RLIMIT_CPU) and wall seconds

struct Outcome {
  int code = -1;          // exit code; -1 when killed by a signal
  int signal = 0;         // the signal that ended it, 0 when it exited
  bool timed_out = false; // killed after kSeconds of wall time
  double wall = 0;        // seconds
  long max_rss_kib = 0;   // ru_maxrss of the child
  std::string err;        // stderr
  std::string out;        // stdout
};

/// Runs `vramfit args...` with stdin from `stdin_path` (/dev/null when empty) and extra
/// environment `env` ("NAME=value"), under the limits above.
inline Outcome run_limited(const std::vector<std::string>& args, const std::string& stdin_path = {},
                    const std::vector<std::string>& env = {}) {
  TempDir tmp;
  const std::string err_path = tmp.str() + "/stderr";
  const std::string out_path = tmp.str() + "/stdout";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit cpu{static_cast<rlim_t>(kSeconds), static_cast<rlim_t>(kSeconds)};
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (!kAsan) {
      rlimit as{kMemory, kMemory};
      ::setrlimit(RLIMIT_AS, &as);
    }
    const int in = ::open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(120);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<std::string> envs{"LC_ALL=C"};
    for (const auto& e : env) envs.push_back(e);
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> all{VRAMFIT_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execve(VRAMFIT_BINARY, argv.data(), envp.data());
    ::_exit(121);
  }
  Outcome o;
  int status = 0;
  rusage usage{};
  for (;;) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kSeconds)) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.max_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status)) o.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  std::ifstream e(err_path);
  o.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::ifstream so(out_path);
  o.out.assign(std::istreambuf_iterator<char>(so), std::istreambuf_iterator<char>());
  return o;
}

/// Checks the bounds and the outcome: `code`, and for exit 2 an error message starting with
/// `err_start`.
inline void expect(const std::string& name, const Outcome& o, int code, const std::string& err_start = "vramfit: error: ") {
  INFO("case '" << name << "': exit " << o.code << ", signal " << o.signal << ", " << o.wall << " s, "
                << o.max_rss_kib << " KiB resident; stderr: " << o.err.substr(0, 300));
  CHECK_FALSE(o.timed_out);
  CHECK(o.signal == 0);  // SIGXCPU past the CPU limit, SIGSEGV/SIGABRT on a crash or out of memory
  CHECK(o.code == code);
  CHECK(static_cast<std::uint64_t>(o.max_rss_kib) * 1024 < kMemory);
  if (code == 2) {
    CHECK(o.err.rfind(err_start, 0) == 0);
    CHECK(o.err.size() < 4096);  // a message, not an echo of the input
  }
}

}  // namespace vramfit::test::limited
