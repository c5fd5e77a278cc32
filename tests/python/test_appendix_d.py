"""The host-language features of the Terra supplement (Appendix D; DESIGN.md §6) inside
training steps, in eager, lazy and coexec: try/except inside a step (a Python exception and a terra
error, both caught), closures (a loss factory capturing a tensor and a mutable counter), list/dict
mutation of model state (a history list, a dict of settings that changes an op's input, a tensor kept
in a dict across steps), recursion (blocks applied by a recursive function whose depth depends on the
step) and a generator used as a coroutine (send() gets each step's fetched loss and decides the next
batch). Every step's loss and the final parameters must equal eager's exactly (==, not close).

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_appendix_d.py
"""
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

MODES = ("eager", "lazy", "coexec")
STEPS = 14


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.out = nn.Linear(8, 3)
        self.settings = {"scale": 1.0, "skip": True}  # plain dict state, mutated during training
        self.history = []                              # plain list state, appended inside steps


def apply_blocks(blocks, x, depth, skip):
    """Recursion: block 0 on x, then the rest recursively, `depth` levels deep."""
    if depth == 0 or not blocks:
        return x
    y = terra.tanh(blocks[0](x))
    if skip:
        y = y + x
    return apply_blocks(blocks[1:], y, depth - 1, skip)


def make_loss(class_weights):
    """A closure: captures a tensor and a counter it mutates (nonlocal)."""
    calls = 0

    def loss_fn(logits, target):
        nonlocal calls
        calls += 1
        per_class = F.cross_entropy(logits, target)
        return per_class * class_weights[calls % 2] + 0.0 * calls

    def count():
        return calls

    return loss_fn, count


def batches():
    """A coroutine: each send() delivers the previous step's loss; a loss above 1.05 makes it serve
    the 'hard' batch next, so the data a step sees depends on values fetched in earlier steps."""
    rng = np.random.RandomState(3)
    easy = [(rng.randn(5, 6).astype(np.float32), rng.randint(0, 3, size=5)) for _ in range(3)]
    hard = [(rng.randn(5, 6).astype(np.float32) * 2.0, rng.randint(0, 3, size=5)) for _ in range(2)]
    i = 0
    loss = yield None
    while True:
        pool = hard if loss is not None and loss > 1.05 else easy
        x, y = pool[i % len(pool)]
        i += 1
        loss = yield terra.tensor(x), terra.tensor(y)


def check_finite(v):
    if v != v:
        raise FloatingPointError("loss is NaN")  # a Python exception a step catches
    return v


def program(mode):
    terra.manual_seed(7)
    model = Net()
    opt = terra.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    loss_fn, count = make_loss([terra.tensor(1.0), terra.tensor(0.5)])
    engine = terra.Engine(mode)
    feed = batches()
    next(feed)
    state = {"ema": terra.zeros(())}  # a tensor kept in a dict across steps (fed back next step)
    losses, caught, prev = [], [], None
    for step in range(STEPS):
        x, y = feed.send(prev)
        with engine.step():
            if step == 6:
                model.settings["scale"] = 0.5  # dict mutation changes an op's scalar input
            if step == 9:
                model.settings["skip"] = False  # ... and the path the recursion takes
            h = terra.relu(model.inp(x)) * model.settings["scale"]
            # try/except inside the step: a terra shape error raised by an op, caught, and the step
            # goes on with the right op (the error must come at the call, in every mode).
            try:
                h = h @ terra.ones(7, 8)
            except ValueError as e:
                caught.append(str(e).split("]")[0] + "]")
            depth = 2 + step % 2  # recursion depth varies per step: two paths
            h = apply_blocks(list(model.blocks), h, depth, model.settings["skip"])
            loss = loss_fn(model.out(h), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state["ema"] = state["ema"] * 0.9 + loss.detach() * 0.1
            model.history.append(loss.detach())  # list mutation: the tensor outlives its step
            v = loss.item()
            try:  # a Python exception raised and caught inside the step
                check_finite(v if step != 4 else float("nan"))
            except FloatingPointError:
                caught.append(f"nan@{step}")
            losses.append(v)
            prev = v
    params = [p.detach().numpy().copy() for p in model.parameters()]
    hist = [t.item() for t in model.history]  # read after the steps ended
    return {"losses": losses, "params": params, "caught": caught, "history": hist,
            "ema": state["ema"].item(), "calls": count(), "stats": engine.stats()}


class TestAppendixD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {m: program(m) for m in MODES}

    def test_eager_program_is_meaningful(self):
        e = self.runs["eager"]
        self.assertEqual(len(e["losses"]), STEPS)
        self.assertEqual(e["calls"], STEPS)
        self.assertEqual(e["caught"].count("[matmul]"), STEPS)
        self.assertIn("nan@4", e["caught"])
        self.assertEqual(e["history"], e["losses"])
        # the coroutine took both pools (the data depends on fetched losses), and training moved
        self.assertNotEqual(len(set(e["losses"])), 1)
        self.assertTrue(any(v > 1.05 for v in e["losses"]) and any(v <= 1.05 for v in e["losses"]))

    def test_every_step_equals_eager(self):
        e = self.runs["eager"]
        for mode in ("lazy", "coexec"):
            r = self.runs[mode]
            with self.subTest(mode=mode):
                self.assertEqual(r["losses"], e["losses"])  # exact, every step
                self.assertEqual(r["history"], e["history"])
                self.assertEqual(r["ema"], e["ema"])
                self.assertEqual(r["caught"], e["caught"])
                self.assertEqual(r["calls"], e["calls"])
                for a, b in zip(r["params"], e["params"]):
                    np.testing.assert_array_equal(a, b)

    def test_coexec_ran_steps_as_a_graph(self):
        s = self.runs["coexec"]["stats"]
        self.assertEqual(s["steps"], STEPS)
        # Some steps must have run co-executed (not all traced), or this test checks nothing.
        self.assertLess(s["traces"], STEPS, s)


if __name__ == "__main__":
    unittest.main(verbosity=2)
