#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include <cstdlib>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  // No test reaches the network: `--model org/name` that is not cached would fetch from the Hub.
  // The Hub tests (tests/cli/hub_http_test.cpp) unset this and point HF_ENDPOINT at a server on
  // the loopback address. Child processes (regress/limits_test.cpp) inherit it.
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  return Catch::Session().run(argc, argv);
}
