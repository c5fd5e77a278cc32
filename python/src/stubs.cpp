// Groups whose C++ side has not landed yet bind nothing; each moves to its own file when it lands.
#include "binding.h"

namespace terra::python {
void bind_nn(py::module_&) {}
void bind_optim(py::module_&) {}
void bind_engine(py::module_&) {}
}  // namespace terra::python
