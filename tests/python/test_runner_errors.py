"""Issue #7's Python snippets: errors are never lost and never corrupt state, engines can be made and
dropped in any order, and a late error surfaces as the original exception in every mode.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_runner_errors.py
"""
import unittest

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F


def bad_class_program(mode, running_loss=False, fed=True):
    """The sweep's defect 1: an out-of-range class index at step 5, loss fetched every 4th step."""
    terra.manual_seed(0)
    fc = nn.Linear(8, 4)
    opt = terra.optim.SGD(fc.parameters(), lr=0.1)
    eng = terra.Engine(mode)
    errors, fetched = [], []
    running = terra.zeros(())
    for s in range(10):
        x = terra.tensor(np.sin(np.arange(48, dtype=np.float32) + s).reshape(6, 8))
        y = terra.tensor([0, 1, 2, 3, 0, 9 if s == 5 else 1])
        try:
            with eng.step():
                target = y if fed else y + terra.tensor([0, 0, 0, 0, 0, 0])  # computed in the graph
                loss = F.cross_entropy(fc(x), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if running_loss:
                    running = running + loss.detach()
                    if s % 4 == 0:
                        fetched.append(running.item())
                elif s % 4 == 0:
                    fetched.append(loss.item())
        except (ValueError, IndexError) as e:
            errors.append((s, type(e), str(e)))
    try:
        eng.synchronize()
    except (ValueError, IndexError) as e:
        errors.append((99, type(e), str(e)))
    params = [p.numpy().copy() for p in fc.parameters()]
    return errors, fetched, params


class TestRunnerErrors(unittest.TestCase):
    def test_fed_bad_class_raises_at_the_call_as_in_eager(self):
        e_err, e_fetch, e_par = bad_class_program("eager")
        self.assertEqual([s for s, _, _ in e_err], [5])
        for mode in ("coexec", "lazy"):
            err, fetch, par = bad_class_program(mode)
            self.assertEqual(err, e_err, mode)  # same step, type and message: raised at the call site
            self.assertEqual(fetch, e_fetch, mode)
            for a, b in zip(par, e_par):
                np.testing.assert_array_equal(a, b)

    def test_running_loss_pattern_after_fed_error(self):
        e_err, e_fetch, e_par = bad_class_program("eager", running_loss=True)
        for mode in ("coexec", "lazy"):
            err, fetch, par = bad_class_program(mode, running_loss=True)
            self.assertEqual(err, e_err, mode)
            self.assertEqual(fetch, e_fetch, mode)
            for a, b in zip(par, e_par):
                np.testing.assert_array_equal(a, b)

    def test_in_graph_bad_class_is_raised_later_with_the_same_error(self):
        e_err, _, e_par = bad_class_program("eager", fed=False)
        self.assertEqual(len(e_err), 1)
        for mode in ("coexec", "lazy"):
            err, _, par = bad_class_program(mode, fed=False)
            self.assertGreaterEqual(len(err), 1, mode)
            for _, typ, msg in err:
                self.assertIs(typ, e_err[0][1], mode)
                self.assertTrue(msg.startswith(e_err[0][2]), (mode, msg))
            for a, b in zip(par, e_par):
                np.testing.assert_array_equal(a, b)

    def test_engines_replaced_in_a_loop(self):
        for mode in ("coexec", "lazy", "eager"):
            for _ in range(4):
                eng = terra.Engine(mode)  # the previous engine dies after this one was made
                self.assertEqual((terra.ones(2) * 2).tolist(), [2.0, 2.0])
            del eng

    def test_engine_as_context_manager_raises_unseen_errors(self):
        fc = nn.Linear(4, 3)
        raised = 0
        try:
            with terra.Engine("coexec") as eng:
                for s in range(6):
                    try:
                        with eng.step():
                            y = terra.tensor([0, 1]) + terra.tensor([0, 7 if s == 5 else 0])
                            F.cross_entropy(fc(terra.ones(2, 4)), y).backward()
                    except ValueError:
                        raised += 1  # a step's end raises it when the runner already got there
        except ValueError:
            raised += 1  # otherwise the engine's end does
        self.assertEqual(raised, 1)

    def test_stats_say_whether_coexec_was_given_up(self):
        eng = terra.Engine("coexec")
        with eng.step():
            terra.ones(2).sum()
        self.assertIn("coexec_disabled", eng.stats())
        self.assertFalse(eng.stats()["coexec_disabled"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
