#include <iostream>

#include "vramfit/cli/run.hpp"

int main(int argc, char** argv) { return vramfit::cli::run(argc, argv, std::cout, std::cerr, std::cin); }
