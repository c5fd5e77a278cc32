"""Python op locations (python/src/location.cpp): co-execution matches an op call to the traced graph by
its call site. The same site must compare equal on every step and in every loop iteration; two different
sites (or the same function reached from two sites) must never compare equal. Each (code object,
instruction offset) is a cached call site whose text names the user's line: in _describe_location, in
errors the GraphRunner computes, in errors raised at the call. Also: fetches inside a step release the
GIL (another Python thread runs while the host waits)."""
import inspect
import sys
import threading
import time
import unittest

import terra


def loc():
    return terra._terra._full_location()


def helper():
    return loc()


def loc_at(expected):
    return terra._terra._full_location(expected)


def helper_at(expected):
    return loc_at(expected)


def sgd_steps(eng, w, steps, depth, layer, loss_of, lr):
    # `steps` steps of: x = ones, `depth` layers, loss, backward, an SGD update of w; the losses.
    losses = []
    for _ in range(steps):
        with eng.step():
            x = terra.ones(2, w.shape[0])
            for _ in range(depth):
                x = layer(x)
            loss = loss_of(x)
            loss.backward()
            with terra.no_grad():
                w -= lr * w.grad
            w.grad = None
            losses.append(loss.item())
    return losses


class LocationTest(unittest.TestCase):
    def collect(self, eng, steps=3):
        out = []
        for _ in range(steps):
            with eng.step():
                a = loc()
                b = loc()
                c = [loc() for _ in range(3)]
                d = helper()
                e = helper()
                out.append((a, b, c, d, e))
        return out

    def test_same_site_equal_across_steps(self):
        eng = terra.Engine("coexec")
        runs = self.collect(eng)
        for r in runs[1:]:
            self.assertEqual(r, runs[0])

    def test_different_sites_differ(self):
        eng = terra.Engine("coexec")
        a, b, c, d, e = self.collect(eng, 1)[0]
        self.assertNotEqual(a, b)
        self.assertNotEqual(d, e)  # same function, called from two sites
        self.assertNotIn(a, c)
        self.assertEqual(c[0], c[1])  # a loop repeats its location
        self.assertEqual(c[1], c[2])
        frames = {tuple(x[1]) for x in (a, b, d, e, c[0])}
        self.assertEqual(len(frames), 5)

    def test_describe(self):
        eng = terra.Engine("coexec")
        with eng.step():
            full = loc()
            here = terra._terra._location()
        text = terra._terra._describe_location(full)
        self.assertIn("test_location.py", text[0])
        self.assertIn("in loc", text[0])
        self.assertIn("test_describe", text[1])
        self.assertEqual(len(text), 2)  # stops at the frame that entered the step
        self.assertIn("test_describe", terra._terra._describe_location(here)[0])

    def test_no_retrace_in_loop_with_fetch(self):
        eng = terra.Engine("coexec")
        w = terra.randn(4, 4, requires_grad=True)
        sgd_steps(eng, w, 8, 3, lambda x: terra.tanh(x @ w), lambda x: x.sum(), 0.1)
        st = eng.stats()
        self.assertEqual(st["fallbacks"], 0)
        self.assertLessEqual(st["traces"], 3)

    def test_loop_site_is_one_cached_location(self):
        # Many iterations of one line: one location, described as that line, on every step.
        eng = terra.Engine("coexec")
        seen = set()
        line = None
        for _ in range(3):
            with eng.step():
                for _ in range(50):
                    seen.add(tuple(loc()[1])); line = inspect.currentframe().f_lineno  # noqa: E702
        self.assertEqual(len(seen), 1)
        text = terra._terra._describe_location((0, list(next(iter(seen)))))
        self.assertIn(f"test_location.py:{line} in LocationTest.test_loop_site_is_one_cached_location", text[1])

    def test_compared_in_place_equals_captured(self):
        # The co-executing host compares a predicted call's location in place (_full_location(expected)
        # does it from the capture's frame): equal exactly where the capture would be equal.
        eng = terra.Engine("coexec")
        with eng.step():
            got = []
            for _ in range(3):  # one call site: captures first, then compares
                got.append(loc_at(got[0] if got else None))
            self.assertEqual(got[1:], [True, True])
            self.assertFalse(loc_at(got[0]))  # another line of this function
            self.assertFalse(helper_at(got[0]))  # one Python frame deeper
            other = helper_at(None)
            self.assertFalse(loc_at(other))
        self.assertFalse(loc_at(got[0]))  # outside the step: the C++ walk alone

    def test_known_path_calls_are_predicted(self):
        # In a steady loop nearly every call is the one the graph predicts, found without capturing
        # its location; the losses stay eager's.
        def run(mode):
            eng = terra.Engine(mode)
            terra.manual_seed(3)
            w = terra.randn(8, 8, requires_grad=True)
            losses = sgd_steps(eng, w, 6, 4, lambda x: terra.tanh(x @ w) + x, lambda x: (x * x).sum(), 0.05)
            return eng.stats(), losses

        st, co = run("coexec")
        _, eager = run("eager")
        self.assertEqual(co, eager)
        self.assertEqual(st["fallbacks"], 0)
        steady = st["steps"] - st["traces"]
        self.assertGreater(steady, 0)
        # A step runs ~55 ops (forward, backward, update); all but the few after a loop's exit or
        # at a branch are predicted (265 of them in 5 co-executed steps when written).
        self.assertGreater(st["predicted_calls"], steady * 40)

    def test_same_line_two_offsets_differ(self):
        # Two calls on one line are two instructions: two sites.
        eng = terra.Engine("coexec")
        with eng.step():
            a, b = loc(), loc()
        self.assertNotEqual(a, b)
        ta, tb = terra._terra._describe_location(a), terra._terra._describe_location(b)
        self.assertEqual(ta, tb)  # the same text (file:line in function), still two sites

    def test_error_at_the_call_names_the_users_line(self):
        # A shape error in a co-executed step (past tracing) is raised at the call, on its line.
        eng = terra.Engine("coexec")
        x = terra.ones(2, 3)
        for s in range(5):
            y = terra.ones(3, 2) if s < 4 else terra.ones(4, 2)
            try:
                with eng.step():
                    z = (x @ y).sum()  # the failing call
                    z.item()
            except ValueError as e:
                tb = [f for f in __import__("traceback").extract_tb(e.__traceback__) if f.filename == __file__]
                self.assertEqual(s, 4)
                self.assertIn("the failing call", tb[-1].line)
                break
        else:
            self.fail("no error")
        self.assertGreater(eng.stats()["steps"], 3)

    def test_runner_error_names_the_users_line(self):
        # An error only the graph finds (a class index computed in the graph) names the Python line of
        # the op that failed, made from the cached site text (the runner thread has no GIL).
        import terra.nn.functional as F
        eng = terra.Engine("coexec")
        logits = terra.zeros(2, 4)
        msgs = []
        line = None
        for s in range(8):
            try:
                with eng.step():
                    t = terra.tensor([0, 1]) + terra.tensor([0, 9 if s == 6 else 0])
                    line = inspect.currentframe().f_lineno + 1
                    F.cross_entropy(logits, t).item()
            except (ValueError, IndexError) as e:
                msgs.append(str(e))
        eng.synchronize()
        self.assertEqual(len(msgs), 1, msgs)
        if "computed by the GraphRunner" in msgs[0]:  # (raised at the call if the host was first)
            self.assertIn(f"test_location.py:{line} in LocationTest.test_runner_error_names_the_users_line", msgs[0])

    def test_fetch_releases_gil(self):
        # While the host waits in item() for the runner, another Python thread runs. The switch
        # interval is raised so that the waiting thread is never preempted by the interpreter itself:
        # the other thread can only run in the window if item() released the GIL.
        eng = terra.Engine("coexec")
        w = terra.randn(384, 384) * 0.05

        def step():
            with eng.step():
                y = w
                for _ in range(24):
                    y = terra.tanh(y @ w)
                window.set()
                v = y.sum().item()
                window.clear()
            return v

        window = threading.Event()
        for _ in range(3):
            step()
        eng.synchronize()
        ticks = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                if window.is_set():
                    ticks[0] += 1
                time.sleep(0.0002)  # releases the GIL: the stepping thread gets it back at once

        old = sys.getswitchinterval()
        t = threading.Thread(target=spin)
        t.start()
        sys.setswitchinterval(5.0)
        try:
            for _ in range(3):
                step()
            eng.synchronize()
        finally:
            sys.setswitchinterval(old)
            stop.set()
            t.join()
        self.assertGreater(ticks[0], 0)

if __name__ == "__main__":
    unittest.main(verbosity=1)
