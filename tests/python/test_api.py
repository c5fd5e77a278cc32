"""Every Python name of API.md (and the torch-style extras the binding adds), a small model trained
a few steps in Python, errors arriving as ValueError, and the Engine in every mode.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_api.py
"""
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F


class TestTensorAPI(unittest.TestCase):
    def test_factories_and_properties(self):
        terra.manual_seed(0)
        x = terra.tensor([[1.0, 2.0]])
        self.assertEqual(x.shape, (1, 2))
        self.assertIsInstance(x.shape, tuple)
        self.assertEqual(x.dtype, terra.float32)
        self.assertEqual(terra.randn(64, 784).shape, (64, 784))
        self.assertEqual(terra.randn((2, 3)).shape, (2, 3))
        self.assertEqual(terra.zeros(3, 4).tolist(), [[0.0] * 4] * 3)
        self.assertEqual(terra.ones(2).tolist(), [1.0, 1.0])
        self.assertEqual(terra.full((2,), 7.0).tolist(), [7.0, 7.0])
        self.assertEqual(terra.arange(10).tolist(), list(range(10)))
        self.assertEqual(terra.arange(10).dtype, terra.int64)
        r = terra.rand(1000).numpy()
        self.assertTrue(((r >= 0) & (r < 1)).all())
        self.assertEqual(terra.tensor([1, 2]).dtype, terra.int64)
        self.assertEqual(terra.tensor([True, False]).dtype, terra.bool)
        self.assertEqual(terra.tensor(np.zeros(3)).dtype, terra.float64)
        self.assertEqual(terra.tensor([1.0], dtype=terra.float64).dtype, terra.float64)
        self.assertEqual(terra.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).shape, (2, 3))
        self.assertEqual(terra.tensor(3.5).shape, ())

    def test_arithmetic_and_fetch(self):
        x = terra.tensor([[1.0, 2.0]])
        w = terra.tensor([[1.0], [2.0]])
        b = terra.tensor([0.5])
        y = x @ w + b
        self.assertEqual(y.item(), 5.5)
        self.assertEqual((2 * x - 1).tolist(), [[1.0, 3.0]])
        self.assertEqual((1 - x).tolist(), [[0.0, -1.0]])
        self.assertEqual((x / 2).tolist(), [[0.5, 1.0]])
        self.assertEqual((2 / x).tolist(), [[2.0, 1.0]])
        self.assertEqual((-x).tolist(), [[-1.0, -2.0]])
        self.assertEqual((x + 1).tolist(), [[2.0, 3.0]])
        self.assertEqual((x > 1.5).tolist(), [[False, True]])
        self.assertEqual((x == x).tolist(), [[True, True]])
        self.assertEqual((x <= 1.0).tolist(), [[True, False]])
        np.testing.assert_array_equal(x.numpy(), np.array([[1.0, 2.0]], dtype=np.float32))
        self.assertEqual(terra.relu(terra.tensor([-1.0, 2.0])).tolist(), [0.0, 2.0])
        for f in (terra.tanh, terra.sigmoid, terra.exp):
            self.assertEqual(f(x).shape, (1, 2))
        self.assertAlmostEqual(terra.log(terra.tensor([np.e])).item(), 1.0, places=6)
        self.assertAlmostEqual(terra.softmax(x, 1).sum().item(), 1.0, places=6)
        self.assertEqual(terra.log_softmax(x, -1).shape, (1, 2))
        self.assertEqual(terra.cat([x, x], 0).shape, (2, 2))
        self.assertEqual(terra.matmul(x, w).shape, (1, 1))
        self.assertEqual(x.sum().item(), 3.0)
        self.assertEqual(x.mean().item(), 1.5)
        self.assertEqual(x.reshape(2, 1).shape, (2, 1))
        self.assertEqual(x.reshape((2, 1)).shape, (2, 1))
        self.assertEqual(x.transpose(0, 1).shape, (2, 1))
        self.assertEqual(f"{x.sum():.1f}", "3.0")
        self.assertEqual(float(x.sum()), 3.0)
        self.assertEqual(len(terra.zeros(4, 2)), 4)
        self.assertEqual([t.tolist() for t in terra.tensor([[1, 2], [3, 4]])], [[1, 2], [3, 4]])

    def test_indexing(self):
        x = terra.arange(12).reshape(3, 4)
        self.assertEqual(x[0].tolist(), [0, 1, 2, 3])
        self.assertEqual(x[:, 1:3].tolist(), [[1, 2], [5, 6], [9, 10]])
        self.assertEqual(x[-1, ::2].tolist(), [8, 10])
        self.assertEqual(x[..., 0].tolist(), [0, 4, 8])
        self.assertEqual(x[None].shape, (1, 3, 4))
        self.assertEqual(x[1, 2].item(), 6)
        with self.assertRaises(IndexError):
            x[3]
        y = terra.zeros(2, 3)
        y[0] = 1.0
        y[1, 1:] = terra.tensor([2.0, 3.0])
        self.assertEqual(y.tolist(), [[1.0, 1.0, 1.0], [0.0, 2.0, 3.0]])

    def test_autograd(self):
        x = terra.tensor([1.0, 2.0, 3.0], requires_grad=True)
        self.assertTrue(x.requires_grad)
        self.assertIsNone(x.grad)
        (x * x).sum().backward()
        self.assertEqual(x.grad.tolist(), [2.0, 4.0, 6.0])
        z = terra.zeros(2)
        self.assertFalse(z.requires_grad)
        z.requires_grad_()
        self.assertTrue(z.requires_grad)
        d = (x * 2).detach()
        self.assertFalse(d.requires_grad)
        with terra.no_grad():
            self.assertFalse((x * 2).requires_grad)
        self.assertTrue((x * 2).requires_grad)

        @terra.no_grad()
        def f(t):
            return t * 2
        self.assertFalse(f(x).requires_grad)
        x.grad = None
        self.assertIsNone(x.grad)

    def test_constructor_and_subclass_share_the_tensor(self):
        # terra.Tensor(t) and a Python subclass's instances: made through terra's own init_instance.
        class Sub(terra.Tensor):
            pass

        a = terra.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = terra.Tensor(a)
        s = Sub(a)
        self.assertIsInstance(s, terra.Tensor)
        self.assertEqual(b.tolist(), [1.0, 2.0, 3.0])
        self.assertTrue(b.requires_grad)
        self.assertEqual((s * 2 + b).tolist(), [3.0, 6.0, 9.0])
        (s * b).sum().backward()  # one value and one autograd state: d(a*a)/da = 2a
        self.assertEqual(a.grad.tolist(), [2.0, 4.0, 6.0])

    def test_repr(self):
        self.assertEqual(repr(terra.tensor([1.0, 2.0])), "tensor([1., 2.])")
        self.assertIn("requires_grad=True", repr(terra.zeros(2, requires_grad=True)))
        self.assertIn("dtype=terra.float64", repr(terra.zeros(2, dtype=terra.float64)))
        self.assertEqual(repr(terra.float32), "terra.float32")


class TestErrors(unittest.TestCase):
    def test_value_errors_with_op_message(self):
        a, b = terra.zeros(2, 3), terra.zeros(4, 5)
        with self.assertRaisesRegex(ValueError, r"^\[matmul\]"):
            a @ b
        with self.assertRaisesRegex(ValueError, r"^\[add\]"):
            a + b
        with self.assertRaisesRegex(ValueError, r"^\[reshape\]"):
            a.reshape(7)
        with self.assertRaisesRegex(ValueError, r"\[cross_entropy\]|\[nll_loss\]"):
            F.cross_entropy(terra.zeros(3, 4), terra.tensor([0, 1]))
        with self.assertRaisesRegex(ValueError, r"^\[item\]"):
            a.item()
        with self.assertRaises(ValueError):
            terra.Engine("warp-speed")
        with self.assertRaisesRegex(ValueError, r"^\[tensor\]"):
            terra.tensor(["a", "b"])
        with self.assertRaisesRegex(ValueError, r"^\[mul_\]"):
            terra.ones(2, requires_grad=True).mul_(2.0)
        # the interpreter is still fine
        self.assertEqual((terra.ones(2) + 1).tolist(), [2.0, 2.0])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(4 * 4 * 4, 16)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(16, 3)
        self.scale = nn.Parameter(terra.ones(1))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        x = self.drop(F.relu(self.fc1(x.reshape(x.shape[0], -1))))
        return self.fc2(x) * self.scale


class TestNN(unittest.TestCase):
    def test_module_registration_and_modes(self):
        m = Net()
        names = [n for n, _ in m.named_parameters()]
        self.assertEqual(names, ["scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc1.weight",
                                 "fc1.bias", "fc2.weight", "fc2.bias"])
        self.assertEqual(len(list(m.parameters())), 9)
        self.assertEqual([n for n, _ in m.named_buffers()], ["bn.running_mean", "bn.running_var"])
        # the C++ layer's parameters are the Python Parameters
        self.assertTrue(m.fc1._cpp.parameters()[0]._same(m.fc1.weight))
        self.assertTrue(m.training and m.bn.training)
        m.eval()
        self.assertFalse(m.training or m.fc1.training or m.drop.training)
        self.assertFalse(m.bn._cpp.is_training())
        m.train()
        self.assertTrue(m.drop.training)
        self.assertIn("Linear(in_features=64, out_features=16, bias=True)", repr(m))

    def test_layers(self):
        terra.manual_seed(0)
        self.assertEqual(nn.Linear(5, 2)(terra.randn(3, 5)).shape, (3, 2))
        self.assertEqual(len(list(nn.Linear(5, 2, bias=False).parameters())), 1)
        self.assertEqual(nn.Conv2d(2, 3, 3, stride=2, padding=1)(terra.randn(1, 2, 8, 8)).shape, (1, 3, 4, 4))
        self.assertEqual(nn.ReLU()(terra.tensor([-1.0])).tolist(), [0.0])
        seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.assertEqual(seq(terra.randn(5, 4)).shape, (5, 2))
        self.assertEqual(len(list(seq.parameters())), 4)
        self.assertIsInstance(seq[1], nn.ReLU)
        self.assertEqual(nn.BatchNorm2d(3)(terra.randn(2, 3, 4, 4)).shape, (2, 3, 4, 4))
        ln = nn.LayerNorm(6)
        y = ln(terra.randn(2, 6))
        self.assertAlmostEqual(float(np.abs(y.mean(-1).numpy()).max()), 0.0, places=5)
        emb = nn.Embedding(10, 3)
        self.assertEqual(emb(terra.tensor([[1, 2], [3, 9]])).shape, (2, 2, 3))
        d = nn.Dropout(0.5)
        d.eval()
        self.assertEqual(d(terra.ones(4)).tolist(), [1.0] * 4)
        self.assertEqual(F.dropout(terra.ones(4), 0.5, False).tolist(), [1.0] * 4)
        mha = nn.MultiheadAttention(8, 2)
        self.assertEqual(mha(terra.randn(2, 5, 8)).shape, (2, 5, 8))
        self.assertEqual(len(list(mha.parameters())), 4)

    def test_state_dict_roundtrip(self):
        a, b = Net(), Net()
        b.load_state_dict(a.state_dict())
        for (n1, p1), (n2, p2) in zip(a.named_parameters(), b.named_parameters()):
            np.testing.assert_array_equal(p1.numpy(), p2.numpy())

    def _train(self, opt_factory, steps=12):
        terra.manual_seed(0)
        m = Net()
        opt = opt_factory(m.parameters())
        x = terra.randn(16, 1, 8, 8)
        y = terra.randint(0, 3, (16,))
        losses = []
        for _ in range(steps):
            loss = F.cross_entropy(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    def test_training_sgd_and_adam(self):
        for name, fac in [("sgd", lambda p: terra.optim.SGD(p, lr=0.1, momentum=0.9)),
                          ("adam", lambda p: terra.optim.Adam(p, lr=1e-2))]:
            losses = self._train(fac)
            self.assertLess(losses[-1], losses[0] * 0.8, f"{name}: {losses}")

    def test_mse_and_functional(self):
        terra.manual_seed(1)
        lin = nn.Linear(3, 1)
        opt = terra.optim.SGD(lin.parameters(), lr=0.1)
        x = terra.randn(32, 3)
        t = x @ terra.tensor([[1.0], [-2.0], [0.5]]) + 0.3
        first = None
        for _ in range(50):
            loss = F.mse_loss(lin(x), t)
            first = first if first is not None else loss.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.assertLess(loss.item(), first * 0.05)
        self.assertEqual(F.relu(terra.tensor([-1.0, 1.0])).tolist(), [0.0, 1.0])
        self.assertEqual(F.linear(terra.ones(1, 2), terra.ones(3, 2)).shape, (1, 3))
        self.assertEqual(F.conv2d(terra.ones(1, 1, 3, 3), terra.ones(1, 1, 2, 2)).shape, (1, 1, 2, 2))


class TestEngine(unittest.TestCase):
    def _program(self, mode, steps=6):
        terra.manual_seed(0)
        w = terra.randn(4, 3, requires_grad=True)
        x = terra.randn(2, 4)
        opt = terra.optim.SGD([w], lr=0.1)
        eng = terra.Engine(mode)
        out = []
        for _ in range(steps):
            with eng.step():
                loss = F.relu(x @ w).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        return out, eng.stats()

    def test_modes_agree_and_stats(self):
        ref, st = self._program("eager")
        self.assertEqual(st["steps"], 6)
        for key in ("steps", "traces", "fallbacks", "graph_generations", "host_busy_s", "host_stall_s",
                    "runner_busy_s", "runner_stall_s"):
            self.assertIn(key, st)
        for mode in ("coexec", "lazy"):
            got, st = self._program(mode)
            np.testing.assert_allclose(got, ref, rtol=1e-6, err_msg=mode)
            self.assertEqual(st["steps"], 6)
        self.assertGreater(self._program("coexec")[1]["graph_generations"], 0)

    def _mlp_program(self, mode, steps=14):
        # A Python-defined module, Adam, host control flow on fetched values, a Python loop.
        terra.manual_seed(0)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(8, 16)
                self.fc2 = nn.Linear(16, 4)

            def forward(self, x):
                h = F.relu(self.fc1(x))
                for _ in range(2):
                    h = h * 0.5 + F.relu(h)
                return self.fc2(h)

        model = Net()
        opt = terra.optim.Adam(model.parameters(), lr=1e-2)
        eng = terra.Engine(mode)
        losses = []
        for i in range(steps):
            x = terra.tensor(np.sin(np.arange(32, dtype=np.float32) * (i % 3 + 1)).reshape(4, 8))
            y = terra.tensor(np.array([i % 4, (i + 1) % 4, (i + 2) % 4, 0], dtype=np.int64))
            with eng.step():
                out = model(x)
                if out.sum().item() > 0:      # a branch on a fetched value
                    out = out * 1.5
                loss = F.cross_entropy(out, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses, eng.stats(), [p.numpy().copy() for p in model.parameters()]

    def test_python_module_bit_identical_across_modes(self):
        ref, _, ref_params = self._mlp_program("eager")
        for mode in ("coexec", "lazy"):
            got, st, params = self._mlp_program(mode)
            self.assertEqual(got, ref, mode)  # bit-identical: the same kernels in the same order
            for a, b in zip(ref_params, params):
                np.testing.assert_array_equal(a, b, err_msg=mode)
            if mode == "coexec":
                self.assertGreater(st["steps"] - st["traces"], 4)  # most steps co-executed

    def test_exception_inside_step_leaves_engine_usable(self):
        eng = terra.Engine("coexec")
        with self.assertRaises(ValueError):
            with eng.step():
                terra.zeros(2, 3) @ terra.zeros(2, 3)
        with eng.step():
            self.assertEqual((terra.ones(2) * 2).tolist(), [2.0, 2.0])

    def test_location_differs_by_call_site(self):
        a = terra._terra._location()
        b = terra._terra._location()
        self.assertEqual(len(a) % 2, 0)
        self.assertNotEqual(a, b)          # different instruction offsets
        self.assertEqual(a[2:], b[2:])     # same callers
        locs = [terra._terra._location() for _ in range(2)]
        self.assertEqual(locs[0], locs[1])  # a loop repeats its location


if __name__ == "__main__":
    unittest.main(verbosity=1)
