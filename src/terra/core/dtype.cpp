#include "terra/core/dtype.h"

namespace terra {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

static int rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::Int64: return 1;
    case DType::Float32: return 2;
    case DType::Float64: return 3;
  }
  return 0;
}

DType promote(DType a, DType b) { return rank(a) >= rank(b) ? a : b; }

}  // namespace terra
