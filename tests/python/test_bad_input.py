"""The bad-input table from Python: each bad call made inside the 4th step of a small training program
(3 good steps before it, 2 after), in eager, lazy and coexec. A bad call must raise exactly the Python
exception the C++ error maps to (terra.InvalidArgumentError, a ValueError and RuntimeError, for
std::invalid_argument; IndexError for a dim or a Python index out of range; OverflowError for Python ints
beyond int64; terra.OutOfMemoryError, a MemoryError, for impossible allocations) with a message
starting with "[op]", at the call; NaN/inf and empty inputs must give
eager's values. Afterwards the parameters must be bit-identical to eager's.

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_bad_input.py
"""
import os
import subprocess
import sys
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

MODES = ("eager", "lazy", "coexec")
NAN, INF = float("nan"), float("inf")
InvalidArg, OOM = terra.InvalidArgumentError, terra.OutOfMemoryError


def f32(*shape):
    n = int(np.prod(shape)) if shape else 1
    v = ((np.arange(n) * 37 % 11) - 5).astype(np.float32) * 0.25
    return terra.tensor(v.reshape(shape))


def i64(values):
    return terra.tensor(np.array(values, dtype=np.int64))


def nan_input():
    return terra.tensor(np.array([[NAN, 1.0, INF], [-INF, 0.0, -2.0]], dtype=np.float32))


# (name, expected exception type or None for "same values as eager", accepted [op] prefixes, call)
CASES = [
    # wrong shapes
    ("matmul/inner_dims", InvalidArg, ["matmul"], lambda: f32(2, 3) @ f32(4, 5)),
    ("add/broadcast", InvalidArg, ["add"], lambda: f32(2, 3) + f32(4)),
    ("mul/broadcast", InvalidArg, ["mul"], lambda: f32(3, 1, 2) * f32(4, 3)),
    ("conv2d/channels", InvalidArg, ["conv2d"], lambda: F.conv2d(f32(1, 3, 5, 5), f32(2, 4, 3, 3))),
    ("conv2d/rank", InvalidArg, ["conv2d"], lambda: F.conv2d(f32(5, 5), f32(2, 3, 3, 3))),
    ("linear/in_features", InvalidArg, ["linear", "matmul"], lambda: F.linear(f32(2, 3), f32(4, 5))),
    ("reshape/numel", InvalidArg, ["reshape", "view"], lambda: f32(2, 3).reshape(7)),
    ("cat/shapes", InvalidArg, ["cat"], lambda: terra.cat([f32(2, 3), f32(2, 4)], 0)),
    ("softmax/dim", IndexError, ["softmax"], lambda: terra.softmax(f32(2, 3), 2)),  # as torch
    ("sum/dim", IndexError, ["sum"], lambda: f32(2, 3).sum(5)),
    ("mse_loss/shapes", InvalidArg, ["mse_loss"], lambda: F.mse_loss(f32(3), f32(4))),
    ("cross_entropy/batch", InvalidArg, ["cross_entropy", "nll_loss"],
     lambda: F.cross_entropy(f32(3, 4), i64([0, 1]))),
    ("layer_norm/shape", InvalidArg, ["layer_norm"], lambda: terra.layer_norm(f32(2, 3), [4])),
    ("max_pool2d/rank", InvalidArg, ["max_pool2d"], lambda: F.max_pool2d(f32(4), 2)),
    ("expand/incompatible", InvalidArg, ["expand"], lambda: f32(3).expand(2, 4)),
    # wrong dtypes
    ("softmax/int64", InvalidArg, ["softmax"], lambda: terra.softmax(i64([1, 2]), 0)),
    ("cross_entropy/float_targets", InvalidArg, ["cross_entropy"], lambda: F.cross_entropy(f32(3, 4), f32(3))),
    ("embedding/float_index", InvalidArg, ["embedding"], lambda: terra.embedding(f32(4, 2), f32(2))),
    ("where/float_cond", InvalidArg, ["where"], lambda: terra.where(f32(2, 3), f32(2, 3), f32(2, 3))),
    # out-of-range indices
    ("embedding/too_big", InvalidArg, ["embedding"], lambda: terra.embedding(f32(4, 2), i64([1, 4]))),
    ("embedding/negative", InvalidArg, ["embedding"], lambda: terra.embedding(f32(4, 2), i64([-1]))),
    ("cross_entropy/class_too_big", InvalidArg, ["cross_entropy", "nll_loss"],
     lambda: F.cross_entropy(f32(2, 3), i64([0, 3]))),
    ("cross_entropy/class_negative", InvalidArg, ["cross_entropy", "nll_loss"],
     lambda: F.cross_entropy(f32(2, 3), i64([0, -5]))),
    ("select/too_big", InvalidArg, ["select"], lambda: terra.select(f32(3), 0, 3)),
    ("index/too_big", IndexError, ["index"], lambda: f32(3, 2)[3]),
    ("index/negative", IndexError, ["index"], lambda: f32(3, 2)[:, -3]),
    # overflowing sizes
    ("zeros/beyond_int64", OverflowError, [], lambda: terra.zeros(2 ** 70)),
    ("reshape/beyond_int64", OverflowError, [], lambda: f32(2).reshape(2 ** 64, 1)),
    ("select/beyond_int64", OverflowError, [], lambda: terra.select(f32(3), 0, 2 ** 65)),
    ("zeros/product_overflow", InvalidArg, ["zeros", "full"], lambda: terra.zeros(2 ** 32, 2 ** 32)),
    ("reshape/product_overflow", InvalidArg, ["reshape", "view"], lambda: f32(2).reshape(2 ** 62, 4)),
    ("expand/product_overflow", InvalidArg, ["expand"], lambda: f32(1).expand(2 ** 32, 2 ** 32, 2) * 1.0),
    ("zeros/impossible_allocation", OOM, ["zeros", "full"], lambda: terra.zeros(2 ** 60)),
    ("randn/impossible_allocation", OOM, ["randn"], lambda: terra.randn(2 ** 59)),  # 2^61 bytes
    ("randn/bytes_overflow", InvalidArg, ["randn"], lambda: terra.randn(2 ** 61)),  # 2^63 bytes: past int64
    # mixed dtypes eager promotes: every mode does the same
    ("matmul/f32_f64", None, [], lambda: f32(2, 3) @ terra.tensor(np.ones((3, 2), dtype=np.float64))),
    ("add/int64_f32", None, [], lambda: i64([1, 2]) + f32(2)),
    # NaN/inf: no error, eager's values
    ("relu/nan", None, [], lambda: terra.relu(nan_input())),
    ("softmax/inf_row", None, [], lambda: terra.softmax(nan_input(), 1)),
    ("max/nan", None, [], lambda: terra.max(nan_input())),
    ("log/negative", None, [], lambda: terra.log(terra.tensor([-1.0, 0.0, 1.0]))),
    ("div/by_zero", None, [], lambda: terra.tensor([1.0, 0.0, -1.0]) / terra.zeros(3)),
    ("matmul/inf_times_zero", None, [], lambda: nan_input() @ (f32(3, 2) * 0.0)),
    ("cross_entropy/inf_logits", None, [], lambda: F.cross_entropy(nan_input(), i64([0, 2]))),
    ("layer_norm/inf", None, [], lambda: terra.layer_norm(nan_input(), [3])),
    # empty tensors: eager's values (or eager's error)
    ("sum/empty", None, [], lambda: terra.zeros(0, 3).sum(1)),
    ("mean/empty", None, [], lambda: terra.zeros(0).mean()),
    ("matmul/empty_rows", None, [], lambda: terra.zeros(0, 3) @ f32(3, 4)),
    ("matmul/empty_inner", None, [], lambda: terra.zeros(2, 0) @ terra.zeros(0, 4)),
    ("cat/with_empty", None, [], lambda: terra.cat([terra.zeros(0, 3), f32(2, 3)], 0)),
    ("softmax/empty", None, [], lambda: terra.softmax(terra.zeros(0, 3), 1)),
    ("conv2d/empty_batch", None, [], lambda: F.conv2d(terra.zeros(0, 3, 5, 5), f32(2, 3, 3, 3))),
    ("max/empty", None, [], lambda: terra.max(terra.zeros(0))),
]


def program(mode, call):
    """Runs the training program with `call` in step 3; returns (outcome, params).
    outcome: ("raised", type, message) or ("values", array) or ("late", type, message)."""
    terra.manual_seed(11)
    engine = terra.Engine(mode)
    model = nn.Linear(4, 3)
    opt = terra.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = np.array([(i % 7 - 3) * 0.3 for i in range(20)], dtype=np.float32).reshape(5, 4)
    y = np.array([(i % 5 - 2) * 0.2 for i in range(15)], dtype=np.float32).reshape(5, 3)
    outcome, state_error = None, None
    for s in range(6):
        phase = "call"
        try:
            with engine.step():
                opt.zero_grad()
                loss = F.mse_loss(model(terra.tensor(x)), terra.tensor(y))
                loss.backward()
                if s == 3:
                    r = call()
                    phase = "fetch"
                    outcome = ("values", np.asarray(r.numpy()).copy(), str(r.dtype))
                    phase = "step-end"
                opt.step()
        except Exception as e:  # noqa: BLE001 - every exception is an outcome to judge
            if s == 3 and (outcome is None or outcome[0] == "values"):
                outcome = ("raised" if phase == "call" else "late:" + phase, type(e), str(e))
            elif state_error is None:
                state_error = "step %d raised %s: %s" % (s, type(e).__name__, e)
    try:
        params = [p.numpy().copy() for p in model.parameters()]
    except Exception as e:  # noqa: BLE001
        params, state_error = None, state_error or "reading the parameters raised %r" % e
    return outcome, params, state_error


def same_array(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def judge(case, mode, eager, got):
    name, exc, ops, _ = case
    outcome, params, state_error = got
    problems = []
    e_outcome = eager[0]
    want_error = exc is not None or e_outcome[0] != "values"
    if want_error:
        want_type = exc if exc is not None else e_outcome[1]
        if outcome[0] != "raised":
            problems.append("no exception at the call (%s)" % (outcome[0] if outcome[0] != "values" else
                                                              "returned values"))
        elif outcome[1] is not want_type:
            problems.append("raised %s, want %s: %s" % (outcome[1].__name__, want_type.__name__, outcome[2]))
        elif ops and not any(outcome[2].startswith("[%s]" % op) for op in ops):
            problems.append("message does not start with [op]: %s" % outcome[2])
    else:
        if outcome[0] != "values":
            problems.append("raised %s where eager returns values: %s" % (outcome[1].__name__, outcome[2]))
        elif not same_array(outcome[1], e_outcome[1]):
            problems.append("values differ from eager's: %r vs %r" % (outcome[1], e_outcome[1]))
    if state_error:
        problems.append("STATE " + state_error)
    elif eager[1] is not None and not all(same_array(a, b) for a, b in zip(params, eager[1])):
        problems.append("STATE parameters differ from eager's")
    return problems


class TestBadInputTable(unittest.TestCase):
    def test_every_case_every_mode(self):
        runs = ok = states = wrong = 0
        failures = []
        for case in CASES:
            eager = None
            for mode in MODES:
                got = program(mode, case[3])
                if mode == "eager":
                    eager = got
                runs += 1
                problems = judge(case, mode, eager, got)
                if not problems:
                    ok += 1
                    continue
                states += any(p.startswith("STATE") for p in problems)
                wrong += any(not p.startswith("STATE") for p in problems)
                failures.append("%s %s: %s" % (mode, case[0], "; ".join(problems)))
        for f in failures:
            print("  FAIL " + f)
        print("[python bad-input table] %d cases x 3 modes: %d runs, %d clear errors/same values, "
              "%d state mismatches, %d wrong errors/values" % (len(CASES), runs, ok, states, wrong))
        # The interpreter and a fresh engine still work.
        with terra.Engine("coexec").step():
            self.assertEqual((terra.ones(2) * 2).tolist(), [2.0, 2.0])
        self.assertEqual(failures, [])


    def test_engines_replaced_in_a_loop(self):
        # `e = terra.Engine(...)` builds the next engine before the last one dies; eager ops between
        # them must work (a child interpreter, so a crash fails this test instead of the suite).
        code = ("import terra\n"
                "for mode in ('coexec', 'lazy', 'eager'):\n"
                "    for i in range(4):\n"
                "        e = terra.Engine(mode)\n"
                "        assert (terra.ones(2) * 2).tolist() == [2.0, 2.0]\n"
                "    del e\n"
                "    assert (terra.ones(2) * 3).tolist() == [3.0, 3.0]\n"
                "print('ok')\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, GLIBC_TUNABLES="glibc.malloc.perturb=165:"
                                                                             "glibc.malloc.tcache_count=0"))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr[-2000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
