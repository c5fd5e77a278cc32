#include "program.h"

namespace terra::programs {

static std::vector<Program>& registry() {
  static std::vector<Program> r;
  return r;
}
const std::vector<Program>& all_programs() { return registry(); }
void register_program(Program p) { registry().push_back(std::move(p)); }

}  // namespace terra::programs
