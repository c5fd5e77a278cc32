"""terra.Tensor's + - * / @ and unary - go straight from the interpreter's number slots to the op
(python/src/number_slots.cpp). Each case is checked against the operator methods called by name
(the pybind11 path the slots replace), in every mode; subclasses, reflected operands, numbers of
other types and errors keep their behaviour.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_number_slots.py
"""
import operator
import subprocess
import sys
import unittest

import numpy as np

import terra
import terra.nn as nn

MODES = ("eager", "lazy", "coexec")
# (operator, method, reflected method) — matmul has no reflected method.
BINARY = [
    (operator.add, "__add__", "__radd__"),
    (operator.sub, "__sub__", "__rsub__"),
    (operator.mul, "__mul__", "__rmul__"),
    (operator.truediv, "__truediv__", "__rtruediv__"),
]


def values(t):
    return t.numpy().tolist()


class TestNumberSlots(unittest.TestCase):
    def setUp(self):
        terra.manual_seed(3)
        self.a = terra.randn(2, 3)
        self.b = terra.randn(2, 3) + 3.0  # away from 0: a divisor

    def test_operators_equal_their_methods(self):
        a, b = self.a, self.b
        for op, name, rname in BINARY:
            with self.subTest(op=name):
                self.assertEqual(values(op(a, b)), values(getattr(a, name)(b)))
                for num in (2.5, 3, -7):  # a float, an int (read as a double, as the methods do)
                    self.assertEqual(values(op(a, num)), values(getattr(a, name)(num)))
                    self.assertEqual(values(op(num, b)), values(getattr(b, rname)(num)))
        w = terra.randn(3, 4)
        self.assertEqual(values(a @ w), values(a.__matmul__(w)))
        self.assertEqual(values(-a), values(a.__neg__()))
        self.assertEqual(values(a - 1), (a.numpy() - np.float32(1)).tolist())

    def test_other_numbers_take_the_methods(self):
        a = self.a
        for num in (np.float64(1.5), np.float32(2.0), True):
            with self.subTest(num=repr(num)):
                self.assertEqual(values(a + num), values(a.__add__(num)))
                self.assertEqual(values(num * a), values(a.__rmul__(num)))
        with self.assertRaises(TypeError):
            a + "x"
        with self.assertRaises(TypeError):
            "x" * a
        with self.assertRaises(TypeError):
            a @ 2.0
        self.assertIs(a.__add__(10**400), NotImplemented)  # too large for a double: as before
        with self.assertRaises(TypeError):
            a + 10**400

    def test_errors_keep_their_class_and_message_in_every_mode(self):
        for mode in MODES:
            eng = terra.Engine(mode)
            with self.subTest(mode=mode):
                with self.assertRaisesRegex(terra.InvalidArgumentError, r"\[add\].*\[2, 3\].*\[4, 5\]"):
                    with eng.step():
                        self.a + terra.randn(4, 5)
                with eng.step():  # the engine stays usable
                    r = self.a * 2.0 + self.b
                eng.synchronize()
                self.assertEqual(values(r), values(self.a.__mul__(2.0).__add__(self.b)))

    def test_subclass_operands_mixed_with_tensors(self):
        # A one-element tensor beside a Parameter: Parameter's generic slot asks its reflected
        # method first; that must give tensor op tensor, not a float read through __float__.
        s = terra.tensor([2.0], requires_grad=True)
        p = nn.Parameter(terra.tensor([5.0]))
        for op, name, _ in BINARY:
            with self.subTest(op=name):
                self.assertEqual(values(op(s, p)), values(getattr(s, name)(p)))
                self.assertEqual(values(op(p, s)), values(getattr(p, name)(s)))
        loss = (s * p + s - p / s).sum()
        loss.backward()
        self.assertAlmostEqual(s.grad.item(), 5.0 + 1.0 + 5.0 / 4.0, places=5)
        self.assertAlmostEqual(p.grad.item(), 2.0 - 0.5, places=5)

    def test_modes_give_eager_results(self):
        def run(mode):
            terra.manual_seed(7)
            x = terra.randn(4, 8)
            w = terra.randn(8, 8)
            eng = terra.Engine(mode)
            out = []
            for _ in range(6):
                with eng.step():
                    h = -(x @ w) * 0.5 + 1
                    h = 2.0 / (h * h + 1.0) - x
                    out.append(h.sum())
            eng.synchronize()
            return [t.item() for t in out]

        ref = run("eager")
        for mode in MODES[1:]:
            with self.subTest(mode=mode):
                self.assertEqual(run(mode), ref)

    def test_assigning_a_method_replaces_the_slot(self):
        # In a child process: the replaced slot stays CPython's generic one for the process.
        code = (
            "import terra\n"
            "a, b = terra.ones(2), terra.ones(2)\n"
            "saved = terra.Tensor.__dict__['__sub__']\n"
            "terra.Tensor.__sub__ = lambda self, other: 'replaced'\n"
            "assert a - b == 'replaced'\n"
            "terra.Tensor.__sub__ = saved\n"
            "assert (a - b).tolist() == [0.0, 0.0]\n"
            "print('ok')\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(r.stdout.strip(), "ok", r.stderr)

if __name__ == "__main__":
    unittest.main()
