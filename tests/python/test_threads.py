"""terra.set_num_threads / terra.get_num_threads: the count, its validation, and that one count gives
the same bits in every run and mode (loops and the split matmul depend on shapes and the count only).

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_threads.py
"""
import unittest

import numpy as np

import terra
import terra.nn.functional as F


class TestThreads(unittest.TestCase):
    def setUp(self):
        self.saved = terra.get_num_threads()

    def tearDown(self):
        terra.set_num_threads(self.saved)

    def test_set_and_get(self):
        self.assertGreaterEqual(self.saved, 1)
        terra.set_num_threads(3)
        self.assertEqual(terra.get_num_threads(), 3)
        terra.set_num_threads(1)
        self.assertEqual(terra.get_num_threads(), 1)

    def test_counts_below_one_raise_value_error(self):
        terra.set_num_threads(2)
        for bad in (0, -4):
            with self.assertRaisesRegex(ValueError, r"^\[set_num_threads\]"):
                terra.set_num_threads(bad)
        self.assertEqual(terra.get_num_threads(), 2)

    def _program(self, mode, steps=4):
        terra.manual_seed(0)
        w = terra.randn(256, 300, requires_grad=True)
        x = terra.randn(512, 256)
        opt = terra.optim.Adam([w], lr=1e-3)
        eng = terra.Engine(mode)
        out = []
        for _ in range(steps):
            with eng.step():
                h = F.relu(x @ w)  # split over the pool at 2+ threads
                loss = (h * h).mean() + terra.exp(h * 0.01).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        out.extend(w.numpy().ravel()[:1000].tolist())
        return out

    def test_same_bits_in_every_run_and_mode(self):
        for t in (1, 2):
            terra.set_num_threads(t)
            ref = self._program("eager")
            self.assertEqual(self._program("eager"), ref, f"eager again, {t} threads")
            for mode in ("coexec", "lazy"):
                self.assertEqual(self._program(mode), ref, f"{mode}, {t} threads")

    def test_split_matmul_matches_one_thread(self):
        terra.manual_seed(1)
        a, b = terra.randn(300, 200), terra.randn(200, 100)
        terra.set_num_threads(1)
        one = (a @ b).numpy()
        terra.set_num_threads(2)
        two = (a @ b).numpy()
        np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(two, a.numpy().astype(np.float64) @ b.numpy().astype(np.float64), rtol=1e-4, atol=1e-3)



class TestFlushDenormal(unittest.TestCase):
    """terra.set_flush_denormal / terra.get_flush_denormal: terra's kernels flush denormals to zero by
    default; off gives IEEE gradual underflow; Python's own floats are never affected."""

    def tearDown(self):
        terra.set_flush_denormal(True)

    def test_default_on_and_switchable(self):
        self.assertTrue(terra.get_flush_denormal())
        self.assertEqual((terra.full([3], 1e-30) * 1e-9).tolist(), [0.0, 0.0, 0.0])
        self.assertTrue(terra.set_flush_denormal(False))
        self.assertFalse(terra.get_flush_denormal())
        ieee = float(np.float32(1e-30) * np.float32(1e-9))
        self.assertGreater(ieee, 0.0)
        self.assertEqual((terra.full([3], 1e-30) * 1e-9).tolist(), [ieee] * 3)
        self.assertGreater(1e-300 * 1e-10, 0.0)  # the interpreter's floats, after terra's kernels ran

    def test_every_mode_alike(self):
        for flush in (True, False):
            terra.set_flush_denormal(flush)
            got = {}
            for mode in ("eager", "lazy", "coexec"):
                eng = terra.Engine(mode)
                m = terra.full([4096], 1e-36)
                vals = []
                for _ in range(12):
                    with eng.step():
                        m = m * 0.5
                        vals.append(m.sum().item())
                got[mode] = vals
            self.assertEqual(got["lazy"], got["eager"])
            self.assertEqual(got["coexec"], got["eager"])
            self.assertEqual(got["eager"][-1] == 0.0, flush)


if __name__ == "__main__":
    unittest.main(verbosity=1)
