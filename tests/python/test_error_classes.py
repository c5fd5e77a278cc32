"""Every C++ error class reaches Python as the exception README.md's "Errors" table documents, in
eager, lazy and coexec, raised at the user's call (the traceback's innermost frame of this file is the
line that made the bad call), and the engine keeps training afterwards with eager's values.

Two parts: (1) each C++ class, thrown by the binding's test hook terra._throw_cpp inside step 3 of a
small training program, checks the translation table for classes no user input can reach; (2) real
bad calls for the classes user input does reach (shapes, dtypes, indices, sizes, argument types,
allocations, a bad value computed inside the graph).

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_error_classes.py
"""
import traceback
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

MODES = ("eager", "lazy", "coexec")

# README.md's table: C++ class -> the exact Python class raised.
TABLE = {
    "invalid_argument": terra.InvalidArgumentError,
    "domain_error": ValueError,
    "length_error": ValueError,
    "range_error": ValueError,
    "out_of_range": IndexError,
    "overflow_error": OverflowError,
    "underflow_error": RuntimeError,
    "logic_error": RuntimeError,
    "runtime_error": RuntimeError,
    "OutOfMemory": terra.OutOfMemoryError,
    "bad_alloc": MemoryError,
    "exception": RuntimeError,
}


def f32(*shape):
    n = int(np.prod(shape))
    return terra.tensor((np.arange(n, dtype=np.float32) % 5 - 2).reshape(shape) * 0.5)


def train(mode, bad_call, bad_step=3, steps=6):
    """Trains a Linear layer; at `bad_step` calls bad_call() inside the step (after the forward
    pass). Returns (exception or None, traceback frames, losses of the good steps, final weight)."""
    terra.manual_seed(5)
    model = nn.Linear(4, 3)
    opt = terra.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    engine = terra.Engine(mode)
    x, y = f32(6, 4), terra.tensor(np.arange(6) % 3)
    caught, frames, losses = None, None, []
    for s in range(steps):
        try:
            with engine.step():
                loss = F.cross_entropy(model(x), y)
                if s == bad_step:
                    bad_call()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        except Exception as e:  # noqa: BLE001 - the test inspects whatever arrives
            caught, frames = e, traceback.extract_tb(e.__traceback__)
    engine.synchronize()
    return caught, frames, losses, model.weight.detach().numpy().copy()


def innermost_here(frames):
    """The innermost traceback frame in this file: where the user's code made the failing call."""
    mine = [f for f in frames if f.filename == __file__]
    return mine[-1] if mine else None


class TestTranslationTable(unittest.TestCase):
    def test_every_cpp_class_in_every_mode(self):
        ref = train("eager", lambda: None)[2]
        for kind, want in TABLE.items():
            runs = {}
            for mode in MODES:
                with self.subTest(kind=kind, mode=mode):
                    def bad():
                        terra._terra._throw_cpp(kind, f"[op] {kind} for shape [2, 3]")  # the bad call
                    runs[mode] = e, frames, losses, w = train(mode, bad)
                    self.assertIs(type(e), want, repr(e))
                    if kind not in ("bad_alloc", "exception"):  # these carry no message of ours
                        self.assertEqual(str(e), f"[op] {kind} for shape [2, 3]")
                    f = innermost_here(frames)
                    self.assertEqual(f.name, "bad")
                    self.assertIn("_throw_cpp", f.line)
                    # steps 0-2 as without the error; step 3 abandoned; steps 4-5 trained on
                    self.assertEqual(losses[:3], ref[:3])
                    self.assertEqual(len(losses), 5)
            with self.subTest(kind=kind, check="same as eager"):
                for mode in ("lazy", "coexec"):
                    self.assertEqual(runs[mode][2], runs["eager"][2], mode)
                    np.testing.assert_array_equal(runs[mode][3], runs["eager"][3])
        # Both of terra's own classes are caught by Python's and by torch's habit.
        self.assertTrue(issubclass(terra.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(terra.InvalidArgumentError, RuntimeError))
        self.assertTrue(issubclass(terra.OutOfMemoryError, MemoryError))
        self.assertTrue(issubclass(terra.OutOfMemoryError, RuntimeError))

    def test_the_same_program_gives_the_same_losses_after_an_error(self):
        runs = {m: train(m, lambda: terra._terra._throw_cpp("runtime_error", "[op] x")) for m in MODES}
        for mode in ("lazy", "coexec"):
            self.assertEqual(runs[mode][2], runs["eager"][2], mode)
            np.testing.assert_array_equal(runs[mode][3], runs["eager"][3])


# (name, bad call, exact class, words the message must contain: op name, shapes)
USER_ERRORS = [
    ("matmul shapes", lambda: f32(2, 3) @ f32(4, 5), terra.InvalidArgumentError, ["[matmul]", "[2, 3]", "[4, 5]"]),
    ("add broadcast", lambda: f32(2, 3) + f32(4), terra.InvalidArgumentError, ["[add]", "[2, 3]", "[4]"]),
    ("softmax int64", lambda: terra.softmax(terra.tensor([1, 2]), 0), terra.InvalidArgumentError, ["[softmax]"]),
    ("reshape numel", lambda: f32(2, 3).reshape(7), terra.InvalidArgumentError, ["[reshape]", "[2, 3]", "[7]"]),
    ("fed class index", lambda: F.cross_entropy(f32(2, 3), terra.tensor([0, 3])), terra.InvalidArgumentError,
     ["[nll_loss]", "3"]),
    ("index out of range", lambda: f32(3, 2)[3], IndexError, ["[index]", "[3, 2]"]),
    ("dim out of range", lambda: terra.softmax(f32(3, 2), 2), IndexError, ["[softmax]", "dim 2", "rank 2", "[-2, 1]"]),
    ("int beyond int64", lambda: terra.zeros(2 ** 70), OverflowError, []),
    ("impossible allocation", lambda: terra.zeros(2 ** 60), terra.OutOfMemoryError, ["[", "bytes", "shape"]),
    ("float where an int goes", lambda: f32(2, 3).transpose(0.5, 1), TypeError, ["transpose"]),
    ("not a tensor", lambda: terra.relu("x"), TypeError, ["relu"]),
]


class TestUserErrors(unittest.TestCase):
    def test_user_errors_at_the_call_in_every_mode(self):
        for name, call, want, words in USER_ERRORS:
            for mode in MODES:
                with self.subTest(name=name, mode=mode):
                    def bad():
                        call()  # the user's line
                    e, frames, losses, _ = train(mode, bad)
                    self.assertIs(type(e), want, repr(e))
                    for w in words:
                        self.assertIn(w, str(e))
                    f = innermost_here(frames)
                    # raised inside the call, not at a later fetch: the lambda of the table row
                    # (or bad() itself), never train()'s loss.item() or the end of the step
                    self.assertIn(f.name, ("<lambda>", "bad"), f)
                    self.assertEqual(len(losses), 5)

    def test_module_call_traceback_reaches_the_users_line(self):
        for mode in MODES:
            def bad():
                nn.Linear(5, 2)(f32(2, 4))  # wrong in_features: the user's line
            e, frames, _, _ = train(mode, bad)
            self.assertIs(type(e), terra.InvalidArgumentError, mode)
            self.assertIn("[2, 4]", str(e))
            f = innermost_here(frames)
            self.assertEqual((f.name, "nn.Linear(5, 2)" in f.line), ("bad", True), mode)

    def test_value_error_computed_in_the_graph_keeps_its_class(self):
        """A class index computed inside the graph: lazy and coexec may only find it when the graph
        runs (README: raised at the next synchronization point), but with eager's class and message."""
        def bad_target():
            t = terra.tensor([0, 1, 2, 0, 1, 2]) + terra.tensor([0, 0, 0, 0, 0, 7])  # class 9 of 3
            return F.cross_entropy(f32(6, 3), t).item()
        seen = {}
        for mode in MODES:
            e, _, _, _ = train(mode, bad_target)
            seen[mode] = (type(e), str(e).split(" (computed by")[0])
        self.assertIs(seen["eager"][0], terra.InvalidArgumentError)
        self.assertIn("[nll_loss]", seen["eager"][1])
        self.assertEqual(seen["lazy"], seen["eager"])
        self.assertEqual(seen["coexec"], seen["eager"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
