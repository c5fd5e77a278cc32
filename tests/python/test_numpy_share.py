"""NumPy without copies (README.md, "NumPy and terra share memory"): terra.from_numpy(a) shares a's
memory when a is a C-contiguous, aligned, writable float32/float64/int64/bool array, and copies
otherwise; Tensor.numpy() is a view of the tensor's storage (after its value is materialized) unless
the tensor is not contiguous or requires grad. Writes through one side are seen by the other where
sharing is promised, in every mode; the array keeps the storage alive and the tensor keeps the array
alive.

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_numpy_share.py
"""
import gc
import unittest
import weakref

import numpy as np

import terra
import terra.nn as nn

MODES = ("eager", "lazy", "coexec")


def settle():
    """Lets queued releases run (arrays the GraphRunner thread dropped are released by the interpreter)."""
    for _ in range(3):
        gc.collect()
        sum(range(1000))


class TestFromNumpy(unittest.TestCase):
    def test_shares_every_supported_dtype(self):
        for dt in (np.float32, np.float64, np.int64, np.bool_):
            a = np.zeros((2, 3), dtype=dt)
            t = terra.from_numpy(a)
            self.assertEqual(t.dtype.name, np.dtype(dt).name if dt is not np.bool_ else "bool")
            a[1, 2] = 1
            self.assertEqual(t.tolist(), a.tolist(), dt)  # the array's write is the tensor's value
            self.assertTrue(np.shares_memory(t.numpy(), a), dt)

    def test_tensor_writes_reach_the_array(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = terra.from_numpy(a)
        t.add_(10.0)
        t[0, 1] = -1.0
        np.testing.assert_array_equal(a, [[10, -1, 12], [13, 14, 15]])

    def test_copies_what_it_cannot_share(self):
        base = np.arange(12, dtype=np.float32).reshape(3, 4)
        ro = base.copy()
        ro.flags.writeable = False
        cases = {
            "transposed": (base.T, "float32"),
            "sliced": (base[:, ::2], "float32"),
            "float16": (base.astype(np.float16), "float32"),
            "int32": (base.astype(np.int32), "int64"),
            "read-only": (ro, "float32"),
            "big-endian": (base.astype(">f4"), "float32"),
        }
        for name, (a, dtype) in cases.items():
            with self.subTest(name):
                t = terra.from_numpy(a)
                self.assertEqual(t.dtype.name, dtype)
                np.testing.assert_array_equal(t.numpy(), a.astype(np.float64).astype(t.numpy().dtype))
                self.assertFalse(np.shares_memory(t.numpy(), a))

    def test_refuses_non_arrays(self):
        with self.assertRaises(TypeError):
            terra.from_numpy([1.0, 2.0])

    def test_tensor_keeps_the_array_alive_and_releases_it(self):
        a = np.arange(1000, dtype=np.float64)
        ref = weakref.ref(a)
        t = terra.from_numpy(a)
        del a
        settle()
        self.assertIsNotNone(ref())  # the tensor's storage holds it
        junk = [terra.randn(1000) for _ in range(20)]  # reuse freed blocks: must not touch the array
        self.assertEqual(t.sum().item(), sum(range(1000)))
        del t, junk
        settle()
        self.assertIsNone(ref())  # and lets it go with the last tensor

    def test_fed_to_every_mode_and_released(self):
        """A shared array used by each mode's steps (the runner may drop the last reference in
        co-execution): values equal eager's, and the array is released afterwards."""
        results = {}
        for mode in MODES:
            terra.manual_seed(1)
            m = nn.Linear(4, 3)
            opt = terra.optim.SGD(m.parameters(), lr=0.1)
            eng = terra.Engine(mode)
            refs, losses = [], []
            for s in range(6):
                a = np.cos(np.arange(20, dtype=np.float32) * (s + 1)).reshape(5, 4)  # a fresh batch per step
                refs.append(weakref.ref(a))
                x = terra.from_numpy(a)
                del a
                with eng.step():
                    loss = (m(x) * m(x)).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                losses.append(loss)
                del x
            eng.synchronize()
            results[mode] = [v.item() for v in losses]
            del eng, losses, loss, opt, m
            settle()
            self.assertEqual([r() for r in refs], [None] * 6, mode)
        self.assertEqual(results["lazy"], results["eager"])
        self.assertEqual(results["coexec"], results["eager"])

    def test_writes_after_synchronize_are_seen_in_every_mode(self):
        """Writing a shared array after engine.synchronize() (the old rule, no longer needed: see
        TestSharedBufferRefilled) still gives every mode eager's results."""
        results = {}
        for mode in MODES:
            terra.manual_seed(2)
            m = nn.Linear(4, 2)
            opt = terra.optim.SGD(m.parameters(), lr=0.1)
            eng = terra.Engine(mode)
            buf = np.zeros((6, 4), dtype=np.float32)
            x = terra.from_numpy(buf)
            out = []
            for s in range(8):
                eng.synchronize()
                buf[:] = np.sin(np.arange(24, dtype=np.float32) + s).reshape(6, 4)
                with eng.step():
                    loss = (m(x) * m(x)).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                out.append(loss)
            eng.synchronize()
            results[mode] = [v.item() for v in out]
        self.assertEqual(results["lazy"], results["eager"])
        self.assertEqual(results["coexec"], results["eager"])
        self.assertEqual(len(set(results["eager"])), 8)  # each step saw its own batch


class TestTensorNumpy(unittest.TestCase):
    def test_view_shares_both_ways(self):
        t = terra.arange(6).reshape(2, 3).to(terra.float32).contiguous()
        v = t.numpy()
        self.assertTrue(np.shares_memory(v, t.numpy()))
        v[0, 0] = 42.0
        self.assertEqual(t[0, 0].item(), 42.0)
        t.mul_(2.0)
        self.assertEqual(v.tolist(), [[84.0, 2.0, 4.0], [6.0, 8.0, 10.0]])

    def test_view_keeps_the_storage_alive(self):
        t = terra.full((256,), 3.5)
        v = t.numpy()
        del t
        gc.collect()
        junk = [terra.full((256,), -1.0) for _ in range(50)]  # would reuse a freed block
        self.assertTrue(np.all(v == 3.5))
        del junk

    def test_copies_when_not_contiguous_or_requires_grad(self):
        t = terra.arange(6).reshape(2, 3).to(terra.float32)
        tt = t.t()
        a = tt.numpy()
        np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3).T)
        a[0, 0] = 9.0
        self.assertEqual(t[0, 0].item(), 0.0)  # a copy
        w = terra.randn(3, requires_grad=True)
        c = w.numpy()
        c[0] = 1e6
        self.assertNotEqual(w[0].item(), 1e6)
        d = w.detach().numpy()  # torch's way to a shared view of a parameter
        d[0] = 5.0
        self.assertEqual(w[0].item(), 5.0)

    def test_pending_values_are_materialized_then_shared(self):
        for mode in MODES:
            eng = terra.Engine(mode)
            for s in range(4):  # coexec: traced first, then the values are the runner's
                with eng.step():
                    x = terra.arange(4).to(terra.float32) + float(s)
                    y = x * 2.0
                    v = y.numpy()  # a fetch point: waits for the value
                    self.assertEqual(v.tolist(), [2.0 * (i + s) for i in range(4)], mode)
                    y.add_(1.0)  # a write after the view: the view follows it
                    self.assertEqual(y.sum().item(), sum(2.0 * (i + s) + 1 for i in range(4)))
                    self.assertEqual(v.tolist(), [2.0 * (i + s) + 1 for i in range(4)], mode)
            eng.synchronize()

    def test_writes_through_a_view_do_not_reach_ops_called_before_it(self):
        # co-execution: a fetch waits only for the value's own op, but a writable view lets NumPy
        # change the bytes, so ops called before numpy() that read them must have run first.
        def run(mode):
            terra.manual_seed(4)
            w = terra.randn(96, 96) * 0.1
            eng = terra.Engine(mode)
            out = []
            for s in range(6):
                with eng.step():
                    y = terra.randn(96, 96)
                    h = w
                    for _ in range(8):  # the runner is still busy here when NumPy writes
                        h = terra.tanh(h @ w)
                    z = (h * y).sum()  # reads y, called before the view
                    a = y.numpy()
                    a[:] = 0.0
                    out.append(z.item())
                    out.append(y.sum().item())
            eng.synchronize()
            return out
        eager = run("eager")
        self.assertNotEqual(eager[0], 0.0)
        for mode in ("lazy", "coexec"):
            self.assertEqual(run(mode), eager, mode)

    def test_view_of_a_held_value_stays_put_in_every_mode(self):
        for mode in MODES:
            terra.manual_seed(3)
            m = nn.Linear(4, 2)
            opt = terra.optim.SGD(m.parameters(), lr=0.1)
            eng = terra.Engine(mode)
            x = terra.randn(8, 4)
            held = None
            for s in range(6):
                with eng.step():
                    loss = (m(x) * m(x)).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if s == 2:
                        held = loss.detach().numpy()
                        first = float(held)
            eng.synchronize()
            self.assertEqual(float(held), first, mode)  # later steps never reuse its memory


def refill(buf, s):
    buf[:] = np.sin(np.arange(buf.size, dtype=np.float32) * 0.7 + s).reshape(buf.shape)


def train_on_shared_buffer(mode, between=None, inside=None, end=None, steps=12, view_source=False):
    """Trains on one buffer NumPy refills before every step (a loader reusing its array); `between(x, s)`
    runs outside the steps, `inside(x, buf, s)` inside after the forward pass, `end(x, s)` at the end of
    the step (after the optimizer). Returns the losses, what
    NumPy reads in the buffer right after each step (no synchronize), and the engine's stats."""
    terra.manual_seed(5)
    m = nn.Linear(4, 3)
    opt = terra.optim.SGD(m.parameters(), lr=0.1)
    eng = terra.Engine(mode)
    if view_source:  # NumPy writes into a terra tensor's storage through Tensor.numpy()
        x = terra.zeros(6, 4)
        buf = x.numpy()
    else:
        buf = np.zeros((6, 4), dtype=np.float32)
        x = terra.from_numpy(buf)
    losses, seen = [], []
    for s in range(steps):
        refill(buf, s)
        if between:
            between(x, s)
        with eng.step():
            loss = (m(x) * m(x)).mean()
            if inside:
                inside(x, buf, s)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if end:
                end(x, s)
        losses.append(loss)
        seen.append(buf.copy())
    eng.synchronize()
    return [v.item() for v in losses], seen, eng.stats()


class TestSharedBufferRefilled(unittest.TestCase):
    """A shared array written from NumPy while earlier steps may not have run yet (co-execution runs
    up to two steps behind the host; lazy mode runs ops at a later barrier): every mode reads what
    eager reads at each op call, so the losses are identical (==), not merely close; and NumPy reads
    what eager would in the array after each step."""

    def assert_modes_equal(self, **kw):
        eager, eager_seen, _ = train_on_shared_buffer("eager", **kw)
        self.assertEqual(len(set(eager)), len(eager))  # each step saw its own batch
        for mode in ("lazy", "coexec"):
            got, seen, stats = train_on_shared_buffer(mode, **kw)
            self.assertEqual(got, eager, mode)
            for s, (a, b) in enumerate(zip(seen, eager_seen)):
                np.testing.assert_array_equal(a, b, f"{mode} step {s}")
            if mode == "coexec":  # really co-executed (the graph converged), not traced every step
                self.assertFalse(stats["coexec_disabled"])
                self.assertLessEqual(stats["traces"], 4, stats)
        return eager

    def test_refilled_every_step(self):
        self.assert_modes_equal()

    def test_tensor_numpy_view_refilled_every_step(self):
        self.assert_modes_equal(view_source=True)

    def test_refilled_between_ops_of_a_step(self):
        def inside(x, buf, s):
            buf *= -2.0  # the forward pass read the old values; backward and later ops these
            if s % 3 == 0:
                (x.sum() * 0.0).item()  # a fetch between them now and then, as a logging loop does
            loss2 = (x * x).mean()  # reads the new values at this call
            loss2.item() if s == 5 else None
        self.assert_modes_equal(inside=inside)

    def test_written_in_place_by_terra_between_steps(self):
        def between(x, s):
            x.mul_(0.5)  # terra's write into NumPy's memory, after NumPy's refill
            x.add_(float(s))
        eager = self.assert_modes_equal(between=between)
        plain, _, _ = train_on_shared_buffer("eager")
        self.assertNotEqual(eager, plain)  # the in-place writes did change what the steps read

    def test_written_in_place_by_terra_inside_steps(self):
        # The write reaches NumPy's memory when eager's does (read right after the step, before the
        # next refill overwrites it), and the ops after it read the written values.
        def end(x, s):
            with terra.no_grad():
                x.mul_(2.0)
                x[0].add_(float(s))  # through a view of the shared memory
                x.add_((x * x).sum() * 0.01)  # and with a value the graph computes
        eager = self.assert_modes_equal(end=end)
        _, seen, _ = train_on_shared_buffer("eager", end=end)
        buf = np.zeros((6, 4), dtype=np.float32)
        refill(buf, 11)
        self.assertFalse(np.array_equal(seen[-1], buf))  # the writes did reach NumPy's memory

    def test_batches_sliced_from_one_shared_array(self):
        # A loader holding its data set in one array, slicing a batch per step (views of shared
        # memory made inside the step), refilling the array now and then.
        def run(mode):
            terra.manual_seed(6)
            m = nn.Linear(4, 2)
            opt = terra.optim.SGD(m.parameters(), lr=0.05)
            eng = terra.Engine(mode)
            data = np.zeros((32, 4), dtype=np.float32)
            d = terra.from_numpy(data)
            out = []
            for s in range(12):
                if s % 4 == 0:
                    refill(data, s)
                with eng.step():
                    x = d[(s % 4) * 8:(s % 4 + 1) * 8]
                    loss = (m(x) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                out.append(loss)
            eng.synchronize()
            return [v.item() for v in out]
        eager = run("eager")
        self.assertEqual(run("lazy"), eager)
        self.assertEqual(run("coexec"), eager)

if __name__ == "__main__":
    unittest.main(verbosity=2)
