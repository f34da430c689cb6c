# ctest runs each Catch2 test case by its name (catch_discover_tests), and CMake cuts a name at
# its first ';': such a test matches nothing, runs nothing and passes. Fails on any such name.
#   cmake -DTESTS_BINARY=path/to/vramfit_tests -P check_test_names.cmake
# (Catch2 v2 exits with the number of tests listed: the output is what counts.)
execute_process(COMMAND "${TESTS_BINARY}" --list-test-names-only OUTPUT_VARIABLE names)
if(names STREQUAL "")
  message(FATAL_ERROR "${TESTS_BINARY} --list-test-names-only listed no test")
endif()
string(FIND "${names}" ";" at)
if(NOT at EQUAL -1)
  string(SUBSTRING "${names}" 0 ${at} before)
  string(REGEX REPLACE ".*\n" "" head "${before}")
  message(FATAL_ERROR "a test name holds ';' (ctest would run nothing for it): '${head};...'")
endif()
string(REGEX MATCHALL "\n" lines "${names}")
list(LENGTH lines count)
message(STATUS "${count} test names, none with ';'")
