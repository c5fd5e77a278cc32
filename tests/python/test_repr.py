"""repr(tensor) reads like torch's: the same text as torch 1.13 prints for the same values (torch only
as an oracle), with `terra.` instead of `torch.` in dtype suffixes and terra's node names in grad_fn.
Also a fetch point in every mode (a pending value is printed with its real contents).

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_repr.py
"""
import unittest

import numpy as np
import torch

import terra

NAN, INF = float("nan"), float("inf")


def both(values, dtype="float32"):
    a = np.array(values, dtype=dtype)
    return terra.tensor(a), torch.from_numpy(a.copy())


def torch_text(t):
    return repr(t).replace("torch.", "terra.")


# (name, values, numpy dtype)
CASES = [
    ("matrix", [[1.0, 2.0], [3.0, 4.0]], "float32"),
    ("fractions", [[0.5, -1.25, 3.0], [2.0, 0.125, -7.5]], "float32"),
    ("scalar_float", 3.0, "float32"),
    ("scalar_fraction", -0.3333, "float32"),
    ("scalar_int", 7, "int64"),
    ("ints", [[1, -20, 300], [4, 5, 6]], "int64"),
    ("bools", [True, False, True], "bool"),
    ("sci_small", [1e-5, 1.0, 3.5], "float32"),
    ("sci_wide_ints", [1.0, 1e6], "float32"),
    ("nonfinite", [NAN, INF, -INF, 0.0, 2.5], "float32"),
    ("nonfinite_ints", [NAN, 1.0, -3.0], "float32"),
    ("zeros", [0.0, 0.0], "float32"),
    ("float64", [1.5, 2.25], "float64"),
    ("float64_matrix", [[1.0, 2.0], [3.0, 4.0]], "float64"),
    ("3d", np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0, "float32"),
    ("long_row_wraps", np.linspace(-3, 3, 40), "float32"),
    ("summarized_1d", np.arange(2000), "int64"),
    ("summarized_2d", np.arange(3000, dtype=np.float32).reshape(60, 50) / 3.0, "float32"),
    ("summarized_3d_float64", np.arange(2400, dtype=np.float64).reshape(10, 12, 20) * 0.5, "float64"),
    ("empty", np.zeros((0,)), "float32"),
    ("empty_2d", np.zeros((0, 3)), "float32"),
    ("empty_int", np.zeros((0,)), "int64"),
]


class TestRepr(unittest.TestCase):
    def test_matches_torch(self):
        for name, values, dtype in CASES:
            with self.subTest(name):
                a, b = both(values, dtype)
                self.assertEqual(repr(a), torch_text(b))
                self.assertEqual(str(a), repr(a))

    def test_the_brief_example(self):
        self.assertEqual(repr(terra.tensor([[1.0, 2.0], [3.0, 4.0]])), "tensor([[1., 2.],\n        [3., 4.]])")

    def test_requires_grad_and_grad_fn(self):
        a = np.array([[1.0, -2.0], [0.5, 4.0]], dtype=np.float32)
        x = terra.tensor(a, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        self.assertEqual(repr(x), torch_text(tx))
        self.assertTrue(repr(x).endswith(", requires_grad=True)"))
        y, ty = x * 2.0, tx * 2.0
        self.assertEqual(repr(y), torch_text(ty))  # grad_fn=<MulBackward0> in both
        s, ts = (x * x).sum(), (tx * tx).sum()
        self.assertEqual(repr(s), torch_text(ts))  # grad_fn=<SumBackward0>
        self.assertIsNone(x.grad_fn)
        self.assertEqual(y.grad_fn.name(), "MulBackward0")
        self.assertEqual(repr(y.detach()), torch_text(ty.detach()))

    def test_suffix_wraps_like_torch(self):
        a = np.linspace(-1, 1, 9).astype(np.float64)  # a line near 80 columns, then the dtype
        self.assertEqual(repr(terra.tensor(a)), torch_text(torch.from_numpy(a)))

    def test_pending_value_prints_its_contents_in_every_mode(self):
        for mode in ("eager", "lazy", "coexec"):
            eng = terra.Engine(mode)
            for s in range(3):
                with eng.step():
                    y = terra.arange(4).to(terra.float32) * 0.5 + float(s)
                    self.assertEqual(repr(y), torch_text(torch.arange(4).float() * 0.5 + s), mode)
            eng.synchronize()


if __name__ == "__main__":
    unittest.main(verbosity=2)
