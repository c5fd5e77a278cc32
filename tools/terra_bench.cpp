// terra-bench: placeholder entry point until the benchmark tool lands (see programs/).
#include <cstdio>

#include "../programs/program.h"

int main() {
  for (auto& p : terra::programs::all_programs()) std::printf("%s\n", p.name.c_str());
  return 0;
}
