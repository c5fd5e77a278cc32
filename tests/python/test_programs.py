"""Terra's ten programs in Python (terra.programs, issue #10): each runs a few steps at quick sizes in eager,
lazy and co-execution, and every step's loss must equal eager's exactly (==, bit-identical); co-execution
must settle within 4 traces on the programs whose path does not depend on data or host randomness. Also
the host features the programs keep: bert_cls's scikit-learn F1 on fetched predictions, music_transformer's
loss read after the step, and the engine counters of each mode.

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_programs.py   (~10-30 s on 2 cores)
"""
import math
import unittest

import terra
from terra import programs

# 9 steps: dropblock's schedule writes keep_prob at steps 0, 3, 6 (1.0, 0.95, 0.90: three different
# Bernoulli constants); bert_cls fetches predictions for its F1 at steps 2, 5, 8.
STEPS = 9
MAX_STATIC_TRACES = 4


class ProgramsTest(unittest.TestCase):
    results = {}  # (program, mode) -> Result, filled once for all tests

    @classmethod
    def setUpClass(cls):
        for name in programs.NAMES:
            for mode in ("eager", "lazy", "coexec"):
                try:
                    cls.results[(name, mode)] = programs.run(name, mode, steps=STEPS, quick=True, seed=0)
                except Exception as e:  # reported per program by the tests below
                    cls.results[(name, mode)] = e

    def result(self, name, mode):
        r = self.results[(name, mode)]
        if isinstance(r, Exception):
            self.fail(f"{name} in {mode} raised {type(r).__name__}: {r}")
        return r

    def test_registry(self):
        self.assertEqual(len(programs.NAMES), 10)
        feats = programs.features()
        self.assertEqual(list(feats), programs.NAMES)
        self.assertTrue(all(isinstance(f, str) and f for f in feats.values()))
        with self.assertRaises(ValueError):
            programs.get("no_such_program")

    def test_eager_losses_are_real(self):
        for name in programs.NAMES:
            with self.subTest(program=name):
                r = self.result(name, "eager")
                self.assertEqual(len(r.losses), STEPS)
                self.assertTrue(all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in r.losses),
                                r.losses)
                self.assertEqual(r.stats["steps"], STEPS)
                self.assertEqual(r.stats["traces"], 0)

    def test_every_mode_equals_eager_exactly(self):
        for name in programs.NAMES:
            eager = self.result(name, "eager").losses
            for mode in ("lazy", "coexec"):
                with self.subTest(program=name, mode=mode):
                    got = self.result(name, mode).losses
                    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(got, eager)) if a != b]
                    self.assertEqual(len(got), len(eager))
                    self.assertEqual(diffs, [], f"{name} {mode}: (step, loss, eager's loss) that differ")

    def test_coexec_traces(self):
        for name in programs.NAMES:
            with self.subTest(program=name):
                s = self.result(name, "coexec").stats
                self.assertEqual(s["steps"], STEPS)
                self.assertGreaterEqual(s["traces"], 1)  # it did trace, then ran the graph
                self.assertFalse(s["coexec_disabled"], f"{name}: co-execution switched itself off: {s}")
                if name not in programs.DATA_DEPENDENT_PATHS:
                    self.assertLessEqual(s["traces"], MAX_STATIC_TRACES, f"{name}: {s}")

    def test_same_run_twice_is_deterministic(self):
        # The reference itself must be reproducible, or "equals eager" would mean little.
        for name in ("dropblock", "sdpoint", "faster_rcnn"):
            with self.subTest(program=name):
                again = programs.run(name, "eager", steps=STEPS, quick=True, seed=0)
                self.assertEqual(again.losses, self.result(name, "eager").losses)

    def test_fetch_every_step(self):
        # on_step fetches each loss inside its step (a new fetch point): co-execution must still match eager.
        for name in ("gpt2", "dropblock", "sdpoint"):
            with self.subTest(program=name):
                seen = []
                r = programs.run(name, "coexec", steps=STEPS, quick=True, seed=0,
                                 on_step=lambda i, v: seen.append((i, v)))
                self.assertEqual(r.losses, self.result(name, "eager").losses)
                self.assertEqual(seen, list(enumerate(r.losses)))

    def test_bert_cls_f1_on_fetched_predictions(self):
        for mode in ("eager", "lazy", "coexec"):
            with self.subTest(mode=mode):
                f1 = self.result("bert_cls", mode).extra["f1_history"]
                self.assertEqual(len(f1), STEPS // 3)
                self.assertTrue(all(0.0 <= v <= 1.0 for v in f1), f1)
                self.assertEqual(f1, self.result("bert_cls", "eager").extra["f1_history"])

    def test_sklearn_is_the_metric_when_installed(self):
        from terra.programs import bert_cls
        try:
            from sklearn.metrics import f1_score
        except ImportError:
            self.skipTest("scikit-learn not installed (Debian: python3-sklearn)")
        truth, pred = [0, 1, 2, 2, 1, 0], [0, 2, 2, 2, 1, 1]
        self.assertEqual(bert_cls.f1_macro()(truth, pred),
                         f1_score(truth, pred, labels=[0, 1, 2], average="macro", zero_division=0))

    def test_hand_written_f1_without_sklearn(self):
        # sklearn missing -> the hand-written macro F1 (with a note on stderr); it must agree with sklearn's.
        import contextlib
        import io
        import sys
        from terra.programs import bert_cls
        truth, pred = [0, 1, 2, 2, 1, 0, 1], [0, 2, 2, 2, 1, 1, 1]
        saved = sys.modules.get("sklearn.metrics")
        sys.modules["sklearn.metrics"] = None  # makes `from sklearn.metrics import ...` raise ImportError
        try:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                hand = bert_cls.f1_macro()(truth, pred)
        finally:
            if saved is None:
                del sys.modules["sklearn.metrics"]
            else:
                sys.modules["sklearn.metrics"] = saved
        self.assertIn("hand-written", err.getvalue())
        try:
            from sklearn.metrics import f1_score
        except ImportError:
            self.assertAlmostEqual(hand, (2 / 3 + 2 * 2 / (2 * 2 + 1 + 1) + 2 * 2 / (2 * 2 + 1 + 0)) / 3)
        else:
            self.assertAlmostEqual(hand, f1_score(truth, pred, labels=[0, 1, 2], average="macro", zero_division=0),
                                   places=12)

    def test_music_transformer_loss_read_after_the_step(self):
        # The loss stays on the trainer object and is reduced outside the step: in co-execution that read
        # must see the step's value, not a placeholder.
        m = programs.get("music_transformer")
        eng = terra.Engine("coexec")
        terra.manual_seed(0)
        import numpy as np
        events = m.music_events(np.random.default_rng(0), 2, 8)
        trainer = m.MusicTransformerDecoder(8, 16, 2, 1)
        first = trainer.train_on_batch(eng, events, 8)
        self.assertIsInstance(trainer.loss_value, terra.Tensor)
        self.assertEqual(trainer.loss_value.shape, (16,))
        self.assertEqual(first, trainer.loss_value.mean().item())
        self.assertTrue(math.isfinite(first))


if __name__ == "__main__":
    unittest.main(verbosity=1)
