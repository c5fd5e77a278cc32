"""Sizes and dtypes from Python: ints outside int64 raise OverflowError naming the op, shapes whose
element count overflows raise ValueError, storage that cannot be allocated raises MemoryError with
terra's message, mixed-dtype matmul/linear raise ValueError; in every mode, the engine stays usable.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_sizes.py
"""
import unittest

import terra
import terra.nn.functional as F

BIG = 2 ** 70


class TestIntArguments(unittest.TestCase):
    def test_ints_out_of_int64_raise_overflow_error(self):
        x = terra.zeros(6, 8)
        # Each of these was pybind's "Unable to cast Python instance to C++ type" (or a TypeError).
        cases = [
            (lambda: terra.zeros(BIG, 3), r"^\[zeros\] size 1180591620717411303424 is out of the int64 range"),
            (lambda: terra.ones((3, BIG)), r"^\[ones\] size"),
            (lambda: terra.full((BIG,), 1.0), r"^\[full\] size"),
            (lambda: terra.rand(BIG), r"^\[rand\] size"),
            (lambda: x.reshape(BIG), r"^\[reshape\] size 1180591620717411303424"),
            (lambda: terra.reshape(x, (BIG, 1)), r"^\[reshape\] size"),
            (lambda: x.view(-BIG), r"^\[view\] size -1180591620717411303424"),
            (lambda: x.expand(BIG, 8), r"^\[expand\] size"),
            (lambda: x.select(0, 2 ** 64), r"^\[select\] index 18446744073709551616 is out of the int64 range"),
            (lambda: terra.select(x, 2 ** 64, 0), r"^\[select\] dim"),
            (lambda: x.slice(0, 0, BIG, 1), r"^\[slice\] end"),
            (lambda: x.transpose(0, BIG), r"^\[transpose\] dim1"),
            (lambda: x.unsqueeze(BIG), r"^\[unsqueeze\] dim"),
            (lambda: x.sum(BIG), r"^\[sum\] dim"),
            (lambda: terra.arange(BIG), r"^\[arange\] end"),
            (lambda: terra.arange(0, 10, BIG), r"^\[arange\] step"),
            (lambda: terra.eye(BIG), r"^\[eye\] n"),
            (lambda: terra.cat([x, x], BIG), r"^\[cat\] dim"),
            (lambda: terra.randint(0, BIG, (2,)), r"^\[randint\] high"),
            (lambda: x[BIG], r"^\[index\] index"),
            (lambda: terra.softmax(x, BIG), r"^\[softmax\] dim"),
            (lambda: terra.nn.Linear(BIG, 3), r"^\[nn.Linear\] in_features"),
            (lambda: terra.nn.Embedding(3, -BIG), r"^\[nn.Embedding\] embedding_dim"),
            (lambda: terra.nn.Conv2d(1, 1, 3, stride=BIG), r"^\[nn.Conv2d\] stride"),
        ]
        for f, pattern in cases:
            with self.assertRaisesRegex(OverflowError, pattern):
                f()

    def test_in_range_ints_still_work(self):
        x = terra.arange(6).reshape(2, 3)
        self.assertEqual(x.select(1, -1).tolist(), [2, 5])
        self.assertEqual(x.slice(1, 0, 2 ** 62, 2).tolist(), [[0, 2], [3, 5]])
        self.assertEqual(terra.arange(1, 7, 2).tolist(), [1, 3, 5])
        self.assertEqual(terra.eye(2, 3).shape, (2, 3))
        self.assertEqual(x.transpose(0, 1).shape, (3, 2))
        self.assertEqual(x.flatten().shape, (6,))
        self.assertEqual(x[1].tolist(), [3, 4, 5])
        self.assertEqual(x.sum((0, 1)).item(), 15)
        self.assertEqual(terra.cat([x, x], 1).shape, (2, 6))
        self.assertEqual(terra.nn.Linear(3, 2).weight.shape, (2, 3))
        self.assertEqual(terra.nn.Conv2d(1, 2, 3, padding=1).weight.shape, (2, 1, 3, 3))
        with self.assertRaises(TypeError):
            x.select(0, 1.5)  # floats are still not ints


class TestSizes(unittest.TestCase):
    def test_element_count_overflow_raises_value_error(self):
        x = terra.zeros(6, 8)
        # The product wrapped to 48: the reshape was accepted and a select then crashed the process.
        with self.assertRaisesRegex(ValueError, r"^\[reshape\] shape \[4611686018427387916, 4\]"):
            x.reshape(2 ** 62 + 12, 4)
        with self.assertRaisesRegex(ValueError, r"^\[select\] index 1099511627776 is out of range"):
            x.select(0, 2 ** 40)
        # zeros(2^62, 16) gave a tensor with numel 0.
        with self.assertRaisesRegex(ValueError, r"^\[zeros\] shape \[4611686018427387904, 16\]"):
            terra.zeros(2 ** 62, 16)
        with self.assertRaisesRegex(ValueError, r"^\[zeros\] negative dimension"):
            terra.zeros(3, -1)
        with self.assertRaisesRegex(ValueError, r"^\[expand\] shape \[4611686018427387904, 16\]"):
            terra.zeros(1).expand(2 ** 62, 16)

    def test_allocation_failure_is_memory_error(self):
        # Was "MemoryError: std::bad_alloc".
        with self.assertRaisesRegex(MemoryError, r"^\[full\] cannot allocate 4503599627370496 bytes "
                                                 r"for shape \[1125899906842624\]"):
            terra.zeros(2 ** 50)
        self.assertEqual(terra.zeros(2, 2).sum().item(), 0.0)

    def test_mixed_dtypes_matmul_and_linear(self):
        f = terra.ones(2, 2)
        i = terra.ones(2, 2, dtype=terra.int64)
        d = terra.ones(2, 2, dtype=terra.float64)
        # Silently promoted before; torch raises "expected scalar type".
        with self.assertRaisesRegex(ValueError, r"^\[matmul\] dtypes int64 and float32 differ"):
            terra.matmul(i, f)
        with self.assertRaisesRegex(ValueError, r"^\[matmul\] dtypes float64 and float32 differ"):
            d @ f
        with self.assertRaisesRegex(ValueError, r"^\[linear\] dtype mismatch"):
            F.linear(d, f)
        with self.assertRaisesRegex(ValueError, r"^\[linear\] dtype mismatch"):
            F.linear(f, f, terra.ones(2, dtype=terra.float64))
        self.assertEqual((i @ i).tolist(), [[2, 2], [2, 2]])


class TestModes(unittest.TestCase):
    def _run(self, mode, bad_call, exc, pattern):
        eng = terra.Engine(mode)
        x = terra.tensor([[1.0, 2.0], [3.0, 4.0]])

        def body(bad):
            y = (x @ x) * 2.0
            z = bad_call(x) if bad else x.sum()
            return (y.sum() + z.sum()).item()

        want = None
        for _ in range(4):  # warm-up: co-execution runs the skeleton afterwards
            with eng.step():
                v = body(False)
                want = v if want is None else want
                self.assertEqual(v, want)
        with self.assertRaisesRegex(exc, pattern):
            with eng.step():
                body(True)
        with eng.step():
            with self.assertRaisesRegex(exc, pattern):
                body(True)
            self.assertEqual(body(False), want)
        for _ in range(2):
            with eng.step():
                self.assertEqual(body(False), want)
        eng.synchronize()

    def test_bad_calls_in_every_mode(self):
        cases = [
            (lambda x: x.reshape(2 ** 62 + 12, 4), ValueError, r"^\[reshape\] shape"),
            (lambda x: x.select(0, 2 ** 40), ValueError, r"^\[select\] index 1099511627776"),
            (lambda x: terra.zeros(2 ** 62, 16), ValueError, r"^\[zeros\] shape"),
            (lambda x: terra.zeros(BIG, 3), OverflowError, r"^\[zeros\] size"),
            (lambda x: x.select(0, 2 ** 64), OverflowError, r"^\[select\] index"),
            (lambda x: x @ x.double(), ValueError, r"^\[matmul\] dtypes float32 and float64 differ"),
            (lambda x: terra.zeros(2 ** 50), MemoryError, r"^\[full\] cannot allocate"),
        ]
        for mode in ("eager", "lazy", "coexec"):
            for bad_call, exc, pattern in cases:
                with self.subTest(mode=mode, pattern=pattern):
                    self._run(mode, bad_call, exc, pattern)


if __name__ == "__main__":
    unittest.main(verbosity=1)
