"""python3 -m terra.bench (python/terra/bench.py) end to end on a small case: child processes per program and
mode, the exactness check against eager, the CSV (terra-bench's columns), and a failing run reported as
FAILED with exit status 1 instead of stopping the bench. PyTorch is skipped (--no-torch): its column is the
bench's business, not terra's.

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/test_bench.py   (~10 s)
"""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

import terra


def bench(*args):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(terra.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "terra.bench", "--no-torch", "--no-progress", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)


class BenchTest(unittest.TestCase):
    def test_quick_table_and_csv(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.csv")
            p = bench("--quick", "--programs", "gpt2,dropblock", "--steps", "8", "--warmup", "2", "--repeat", "2",
                      "--csv", out)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("every mode's losses equal eager's exactly", p.stdout)
            self.assertIn("geomean speedup vs terra eager:", p.stdout)
            self.assertIn("lazy vs co-execution", p.stdout)
            with open(out, newline="") as f:
                rows = list(csv.DictReader(f))
        self.assertEqual([(r["program"], r["mode"]) for r in rows],
                         [(p, m) for p in ("gpt2", "dropblock") for m in ("eager", "lazy", "coexec")])
        for r in rows:
            self.assertEqual(r["loss_check"], "ref" if r["mode"] == "eager" else "exact")
            self.assertGreater(float(r["steps_per_s"]), 0)
            self.assertEqual(r["steps"], "8")
        eager = {r["program"]: r["final_loss"] for r in rows if r["mode"] == "eager"}
        for r in rows:  # repr of the float: the same bits in every mode
            self.assertEqual(r["final_loss"], eager[r["program"]])
        self.assertEqual([r["traces"] for r in rows if r["mode"] == "eager"], ["0", "0"])
        self.assertGreaterEqual(int(next(r["traces"] for r in rows if r["program"] == "dropblock" and
                                         r["mode"] == "coexec")), 2)  # keep_prob changes at step 0, 3, 6

    def test_failed_child_is_a_failed_row(self):
        # A program that raises in its child (a negative seed: terra.manual_seed takes an unsigned int) fails
        # its rows with the exception's message; the bench goes on to the end and exits 1.
        p = bench("--quick", "--programs", "gpt2,dcgan", "--modes", "eager", "--steps", "4", "--warmup", "1",
                  "--repeat", "1", "--seed", "-1")
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("[2/2] dcgan eager ... FAILED", p.stdout)
        self.assertIn("terra.bench: 2 of 2 runs failed or differ from eager", p.stdout)

    def test_rounds_interleave_the_modes(self):
        # --repeat 3: three rounds, each running eager then coexec once; eager's speedup is exactly 1.
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.csv")
            p = bench("--quick", "--programs", "gpt2", "--modes", "coexec", "--steps", "6", "--warmup", "2",
                      "--repeat", "3", "--csv", out)
            self.assertEqual(p.returncode, 0, p.stdout)
            order = [ln.split(" ... ")[0] for ln in p.stdout.splitlines() if ln.startswith("[")]
            self.assertEqual(order, [f"[{2 * r + k + 1}/6] gpt2 {m} (round {r + 1}/3)"
                                     for r in range(3) for k, m in enumerate(("eager", "coexec"))])
            with open(out, newline="") as f:
                rows = {r["mode"]: r for r in csv.DictReader(f)}
        self.assertEqual(float(rows["eager"]["speedup_vs_eager"]), 1.0)
        self.assertEqual(rows["coexec"]["loss_check"], "exact")
        self.assertEqual(rows["coexec"]["repeat"], "3")

    def test_paired_speedup_and_rounds(self):
        from terra import bench as b
        eager = dict(ok=True, check="ref", error="", rates=[100.0, 50.0, 200.0], losses=[1.0, 2.0])
        mode = dict(ok=True, check="exact", error="", rates=[110.0, 60.0, 180.0], losses=[1.0, 2.0])
        # Ratios per round 1.1, 1.2, 0.9: their median, not the ratio of the medians (110 / 100).
        self.assertAlmostEqual(b.paired_speedup(mode, eager), 1.1)
        self.assertAlmostEqual(b.paired_speedup(dict(rates=[120.0, 60.0, 180.0]), eager), 1.2)
        row = dict(ok=True, check="exact", error="", rates=[10.0], losses=[1.0, 2.0])
        b.add_round(row, dict(ok=True, check="n/a", error="", rates=[30.0], losses=[1.0, 2.0]))
        b.add_round(row, dict(ok=True, check="n/a", error="", rates=[20.0], losses=[1.0, 2.0]))
        self.assertEqual((row["steps_per_s"], row["sps_min"], row["sps_max"], row["check"]), (20.0, 10.0, 30.0, "exact"))
        b.add_round(row, dict(ok=True, check="n/a", error="", rates=[20.0], losses=[1.0, 2.5]))
        self.assertEqual(row["check"], "DIFF")
        self.assertIn("round 4's step 1 loss 2.5", row["error"])
        b.add_round(row, dict(ok=False, error="child exited with status 3"))
        self.assertFalse(row["ok"])

    def test_bad_arguments(self):
        p = bench("--programs", "no_such_program")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown program", p.stdout)
        p = bench("--steps", "4", "--warmup", "4")
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=1)
