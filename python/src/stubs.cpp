// Groups whose C++ side has not landed yet bind nothing; each moves to its own file when it lands.
#include "binding.h"

namespace terra::python {
void bind_engine(py::module_&) {}
}  // namespace terra::python
