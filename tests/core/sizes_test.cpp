// Sizes and dtypes: element counts that overflow int64, negative or out-of-range sizes and indices,
// storage that cannot be allocated and matmul/linear on mixed dtypes all raise a clear error naming
// the op and the shape, in every mode, and leave the engine usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include <terra/terra.h>

namespace terra {
namespace {

constexpr int64_t k62 = int64_t(1) << 62;

// Runs f, expects an E whose message starts with `prefix` and contains `part`.
template <class E = std::invalid_argument, class F>
void expect_error(F&& f, const std::string& prefix, const std::string& part = "") {
  try {
    f();
    ADD_FAILURE() << "expected an error starting with " << prefix;
  } catch (const E& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
    if (!part.empty()) EXPECT_NE(m.find(part), std::string::npos) << "'" << m << "' lacks '" << part << "'";
  }
}

TEST(Sizes, ShapeHelpersCheckOverflow) {
  EXPECT_EQ(numel_of({6, 8}), 48);
  EXPECT_EQ(numel_of({0, 5}), 0);
  EXPECT_EQ(numel_of({k62, 1}), k62);
  expect_error([] { numel_of("reshape", {k62 + 12, 4}); }, "[reshape] shape [4611686018427387916, 4]",
               "more elements than int64");
  expect_error([] { numel_of({k62, 16}); }, "[numel] shape [4611686018427387904, 16]");
  expect_error([] { contiguous_strides({k62, 16}); }, "[strides] shape [4611686018427387904, 16]");
  expect_error([] { check_shape("op", {2, -3}); }, "[op] negative dimension in shape [2, -3]");
  expect_error([] { check_shape("op", {int64_t(1) << 61}, 8); }, "[op] shape [2305843009213693952]", "bytes");
  check_shape("op", {int64_t(1) << 60}, 4);  // 2^62 bytes: counts fit, no error
  expect_error([] { checked_mul("op", k62, 2, "size"); }, "[op] size overflows int64");
  expect_error([] { checked_add("op", INT64_MAX, 1, "size"); }, "[op] size overflows int64");
}

TEST(Sizes, ReshapeAndViewRejectOverflowingShapes) {
  Tensor x = zeros({6, 8});
  // The product wrapped to 48 before, and the view was accepted.
  expect_error([&] { x.reshape({k62 + 12, 4}); }, "[reshape] shape [4611686018427387916, 4]", "int64");
  expect_error([&] { x.view({k62 + 12, 4}); }, "[view] shape [4611686018427387916, 4]", "int64");
  expect_error([&] { x.reshape({-1, k62, 4}); }, "[reshape] shape [-1, 4611686018427387904, 4]", "int64");
  expect_error([&] { x.reshape({6, -8}); }, "[reshape] invalid dimension in shape [6, -8]");
  expect_error([&] { x.reshape({-1, -1}); }, "[reshape] only one dimension can be -1");
  // The sweep's segfault: select was bounds-checked against the wrapped shape and read past storage.
  expect_error([&] { x.reshape({k62 + 12, 4}).select(0, int64_t(1) << 40).sum().item<float>(); }, "[reshape]");
  expect_error([&] { x.select(0, int64_t(1) << 40); }, "[select] index 1099511627776 is out of range", "[6, 8]");
  expect_error([&] { x.select(1, INT64_MIN); }, "[select] index", "[6, 8]");
  EXPECT_EQ(x.reshape({-1, 4}).shape(), (Shape{12, 4}));
  EXPECT_EQ(x.reshape({0 + 48}).numel(), 48);
}

TEST(Sizes, SliceWithHugeStepHasOneElement) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {6});
  Tensor s = x.slice(0, 1, 6, INT64_MAX);  // (end - start + step - 1) overflowed to a size of 0
  EXPECT_EQ(s.shape(), (Shape{1}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{2.f}));
  EXPECT_EQ(x.slice(0, INT64_MIN, INT64_MAX, 2).to_vector<float>(), (std::vector<float>{1.f, 3.f, 5.f}));
  Tensor m = x.reshape({2, 3}).slice(0, 1, 2, INT64_MAX);  // stride 3 * step would overflow
  EXPECT_EQ(m.strides(), (Shape{3, 1}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{4.f, 5.f, 6.f}));
}

TEST(Sizes, FactoriesRejectOverflowingAndNegativeShapes) {
  // zeros({2^62, 16}) returned a tensor with numel 0.
  expect_error([] { zeros({k62, 16}); }, "[zeros] shape [4611686018427387904, 16]", "int64");
  expect_error([] { ones({k62, 16}); }, "[ones] shape [4611686018427387904, 16]");
  expect_error([] { full({16, k62}, 1.0); }, "[full] shape [16, 4611686018427387904]");
  expect_error([] { rand({k62, 16}); }, "[rand", "[4611686018427387904, 16]");
  expect_error([] { zeros({int64_t(1) << 61}, DType::Float64); }, "[zeros] shape [2305843009213693952]", "bytes");
  expect_error([] { zeros({3, -2}); }, "[zeros] negative dimension in shape [3, -2]");
  expect_error([] { eye(int64_t(1) << 32, int64_t(1) << 32); }, "[eye] shape [4294967296, 4294967296]", "int64");
  expect_error([] { tensor(std::vector<float>{}, {k62, 16, 0}); }, "[tensor] shape [4611686018427387904, 16, 0]");
  expect_error([] { tensor_bool({}, {-1}); }, "[tensor] negative dimension");
  // e - s overflowed: a range of 2^63 elements became a tensor of 0.
  expect_error([] { arange(-k62, k62); }, "[arange] range [-4611686018427387904, 4611686018427387904)", "int64");
  expect_error([] { arange(INT64_MIN, INT64_MAX, 1); }, "[arange]", "int64");
  EXPECT_EQ(arange(INT64_MIN, INT64_MAX, INT64_MAX).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
  EXPECT_EQ(arange(5, -6, -5).to_vector<int64_t>(), (std::vector<int64_t>{5, 0, -5}));
  EXPECT_EQ(zeros({0, k62}).numel(), 0);
}

TEST(Sizes, ViewsAndBroadcastsRejectOverflow) {
  Tensor one = zeros({1});
  expect_error([&] { one.expand({k62, 16}); }, "[expand] shape [4611686018427387904, 16]", "int64");
  expect_error([&] { one.expand({-2}); }, "[expand] invalid size -2");
  Tensor a = one.expand({int64_t(1) << 40, 1}), b = one.expand({1, int64_t(1) << 40});
  expect_error([&] { add(a, b); }, "[add] shape [1099511627776, 1099511627776]", "int64");
  Tensor ma = zeros({1, 2, 2}).expand({int64_t(1) << 40, 1, 2, 2});
  Tensor mb = zeros({1, 2, 2}).expand({1, int64_t(1) << 40, 2, 2});
  expect_error([&] { matmul(ma, mb); }, "[matmul] shape [1099511627776, 1099511627776, 2, 2]");
  // A view of 2^60 elements needs no memory; eight of them concatenated have 2^63.
  Tensor big = one.expand({int64_t(1) << 60});
  expect_error([&] { cat(std::vector<Tensor>(8, big), 0); }, "[cat] size of dim 0 overflows int64");
  expect_error([&] { one.expand({int64_t(1) << 62}); }, "[expand] shape [4611686018427387904]", "bytes");
  expect_error([&] { split(tensor({1.f, 2.f}, {2}), {INT64_MAX, 2}, 0); }, "[split] sum of sizes", "overflows");
  auto parts = split(tensor({1.f, 2.f, 3.f}, {3}), INT64_MAX, 0);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].numel(), 3);
}

TEST(Sizes, ConvOutputSizeDoesNotWrap) {
  Tensor x = zeros({1, 1, 4, 4}), w = zeros({1, 1, 3, 3});
  expect_error([&] { conv2d(x, w, {}, {1, 1}, {INT64_MAX / 2, 0}); }, "[conv2d] padded input size overflows int64");
  expect_error([&] { conv2d(x, w, {}, {1, 1}, {0, 0}, {INT64_MAX / 2, 1}); }, "[conv2d] kernel of size", "larger");
  expect_error([&] { conv_transpose2d(x, w, {}, {INT64_MAX / 2, 1}); }, "[conv_transpose2d] output size overflows int64");
}

TEST(Sizes, AllocationFailureNamesOpAndShape) {
  AllocatorStats before = allocator_stats();
  // 2^50 floats: a valid shape, but no machine has 4 PiB (was a bare std::bad_alloc).
  expect_error<OutOfMemory>([] { zeros({int64_t(1) << 50}); },
                            "[full] cannot allocate 4503599627370496 bytes for shape [1125899906842624]");
  expect_error<std::runtime_error>([] { empty({int64_t(1) << 50}, DType::Float32, "myop"); },
                                   "[myop] cannot allocate 4503599627370496 bytes");
  AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);  // the failed block is not counted as in use
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(zeros({2, 2}).sum().item<float>(), 0.f);  // still usable
}

TEST(Sizes, MatmulAndLinearRefuseMixedDtypes) {
  Tensor f = ones({2, 2}), d = ones({2, 2}, DType::Float64), i = ones({2, 2}, DType::Int64);
  // These were silently promoted; torch raises "expected scalar type".
  expect_error([&] { matmul(i, f); }, "[matmul] dtypes int64 and float32 differ", "[2, 2]");
  expect_error([&] { matmul(d, f); }, "[matmul] dtypes float64 and float32 differ");
  expect_error([&] { matmul(f, ones({2}, DType::Float64)); }, "[matmul] dtypes float32 and float64 differ");
  expect_error([&] { linear(d, f); }, "[linear] dtype mismatch: input float64", "weight float32");
  expect_error([&] { linear(f, f, ones({2}, DType::Float64)); }, "[linear] dtype mismatch", "bias float64");
  expect_error([&] { linear(i, f); }, "[linear] dtype mismatch: input int64");
  expect_error([&] { matmul(ones({2, 2}, DType::Bool), ones({2, 2}, DType::Bool)); }, "[matmul] bool");
  expect_error([&] { conv2d(zeros({1, 1, 3, 3}), zeros({1, 1, 1, 1}, DType::Float64)); }, "[conv2d]", "dtype");
  // Same dtypes keep working (torch allows int64 matmul on CPU).
  EXPECT_EQ(matmul(i, i).to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(matmul(d, d).to_vector<double>(), (std::vector<double>{2, 2, 2, 2}));
  EXPECT_EQ(linear(f, f, ones({2})).to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

// ---- every mode: the bad call inside a step (after warm-up steps, so co-execution runs the skeleton),
// with the exception caught inside the step or escaping it; later steps give the eager values.

using BadOp = std::function<Tensor(const Tensor& x, bool bad)>;

double step_value(const Tensor& x, const BadOp& op, bool bad) {
  Tensor y = matmul(x, x) * 2.0;
  Tensor z = op(x, bad);
  return (y.sum() + z.sum()).item<double>();
}

template <class E = std::invalid_argument>
void check_all_modes(const BadOp& op, const std::string& prefix, const std::string& part = "") {
  for (Mode m : {Mode::Eager, Mode::Lazy, Mode::CoExecution}) {
    SCOPED_TRACE(mode_name(m));
    for (bool escape : {false, true}) {
      SCOPED_TRACE(escape ? "escaping the step" : "caught in the step");
      Engine engine(m);
      Tensor x = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
      double want = 0;
      for (int s = 0; s < 4; ++s) {
        Step st = engine.step();
        double v = step_value(x, op, false);
        if (s == 0) want = v;
        EXPECT_EQ(v, want);
      }
      if (escape) {
        expect_error<E>([&] {
          Step st = engine.step();
          step_value(x, op, true);
        }, prefix, part);
      } else {
        Step st = engine.step();
        expect_error<E>([&] { step_value(x, op, true); }, prefix, part);
        EXPECT_EQ((x * 3.0).sum().item<double>(), 30.0);  // the rest of the step still runs
      }
      for (int s = 0; s < 3; ++s) {
        Step st = engine.step();
        EXPECT_EQ(step_value(x, op, false), want);
      }
      engine.synchronize();
    }
  }
}

TEST(SizesModes, ReshapeOverflow) {
  check_all_modes([](const Tensor& x, bool bad) { return zeros({6, 8}).reshape({bad ? k62 + 12 : 12, 4}) + x.sum(); },
                  "[reshape] shape [4611686018427387916, 4]", "int64");
}

TEST(SizesModes, SelectOutOfRange) {
  check_all_modes([](const Tensor& x, bool bad) { return (x * 1.0).select(0, bad ? int64_t(1) << 40 : 1); },
                  "[select] index 1099511627776 is out of range", "[2, 2]");
}

TEST(SizesModes, SelectOnWrappedReshape) {
  // (2^62 + 1) * 4 wrapped to 4 elements: the reshape passed and the select read far past the storage.
  check_all_modes([](const Tensor& x, bool bad) {
    return (x * 1.0).reshape({bad ? k62 + 1 : 1, 4}).select(0, bad ? int64_t(1) << 40 : 0);
  }, "[reshape] shape [4611686018427387905, 4]", "int64");
}

TEST(SizesModes, FactoryOverflow) {
  check_all_modes([](const Tensor& x, bool bad) { return zeros({bad ? k62 : 2, 16}) + x.sum(); },
                  "[zeros] shape [4611686018427387904, 16]", "int64");
}

TEST(SizesModes, ExpandOverflow) {
  check_all_modes([](const Tensor& x, bool bad) { return x.sum().reshape({1}).expand({bad ? k62 : 2, 16}); },
                  "[expand] shape [4611686018427387904, 16]", "int64");
}

TEST(SizesModes, MatmulMixedDtypes) {
  check_all_modes([](const Tensor& x, bool bad) { return matmul(x, bad ? x.to(DType::Float64) : x); },
                  "[matmul] dtypes float32 and float64 differ");
}

TEST(SizesModes, AllocationFailure) {
  check_all_modes<OutOfMemory>(
      [](const Tensor& x, bool bad) { return zeros({bad ? int64_t(1) << 50 : 2}) + x.sum(); },
      "[full] cannot allocate 4503599627370496 bytes for shape [1125899906842624]");
}

}  // namespace
}  // namespace terra
