"""Value-dependent errors from Python: raised at the call site with eager's exception type and
message in every mode (the values are host-fed), never a crash (SIGFPE) of the interpreter.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_value_checks.py
"""
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

MODES = ("eager", "lazy", "coexec")
INT64_MIN = -(2 ** 63)


class TestIntegerDivision(unittest.TestCase):
    def test_itruediv_int64_by_zero_raises_in_every_mode(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                eng = terra.Engine(mode)
                with self.assertRaises(ValueError) as cm:
                    with eng.step():
                        t = terra.tensor([1, 2])
                        t /= 0
                self.assertEqual(str(cm.exception),
                                 "[div_] integer division by zero: the int64 divisor of shape [] has a zero "
                                 "element (dividend of shape [2])")
                with self.assertRaises(ValueError) as cm:
                    with eng.step():
                        t = terra.tensor([3, 4])
                        t.div_(terra.tensor([1, 0]))
                self.assertIn("[div_] integer division by zero", str(cm.exception))
                with eng.step():  # the engine keeps working
                    t = terra.tensor([INT64_MIN, 9])
                    t /= -1      # wraps, as INT64_MIN * -1 does, instead of trapping
                    self.assertEqual(t.tolist(), [INT64_MIN, -9])


class TestCrossEntropyBadClass(unittest.TestCase):
    STEPS, BAD = 8, 5  # five good steps first: co-execution runs the skeleton at the bad one

    def _program(self, mode):
        terra.manual_seed(0)
        model = nn.Linear(8, 4)
        opt = terra.optim.SGD(model.parameters(), lr=0.1)
        eng = terra.Engine(mode)
        losses, call_error, late = [], None, []
        traces_before_bad = None
        for i in range(self.STEPS):
            bad = i == self.BAD
            if bad:
                traces_before_bad = eng.stats()["traces"]
            x = terra.tensor(np.sin(np.arange(32, dtype=np.float32) * (i + 1)).reshape(4, 8))
            y = terra.tensor(np.array([i % 4, 1, 4 if bad else 2, 3], dtype=np.int64))
            try:
                with eng.step():
                    out = model(x)
                    try:
                        loss = F.cross_entropy(out, y)
                    except Exception as e:  # what the call itself raised
                        call_error = (type(e), str(e))
                        raise
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
            except Exception as e:
                if call_error is None or not bad:
                    late.append(repr(e))
        eng.synchronize()
        return losses, call_error, late, [p.numpy().copy() for p in model.parameters()], traces_before_bad

    def test_raised_at_the_call_site_in_every_mode(self):
        ref_losses, ref_error, ref_late, ref_params, _ = self._program("eager")
        self.assertEqual(ref_error, (terra.InvalidArgumentError, "[nll_loss] target 4 at position 2 is out of range for 4 classes"))
        self.assertEqual(ref_late, [])
        self.assertEqual(len(ref_losses), self.STEPS - 1)
        for mode in ("lazy", "coexec"):
            with self.subTest(mode=mode):
                losses, error, late, params, traces = self._program(mode)
                self.assertEqual(error, ref_error)
                self.assertEqual(late, [])
                self.assertEqual(losses, ref_losses)  # bit-identical, the engine kept working
                for a, b in zip(ref_params, params):
                    np.testing.assert_array_equal(a, b)
                if mode == "coexec":
                    self.assertLess(traces, self.BAD)  # the bad step ran the skeleton


if __name__ == "__main__":
    unittest.main(verbosity=1)
