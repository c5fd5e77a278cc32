"""Values of a step read on another Python thread while the step's thread goes on (a logging or
metrics thread): every mode gives eager's values, and nothing hangs. The reader's item() waits for
the runner (co-execution) or runs the engine's barrier (lazy) while the host keeps calling ops.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_values_on_threads.py
"""
import queue
import threading
import unittest

import terra
from terra import nn, optim
import terra.nn.functional as F


def train(mode, steps=30):
    """Every step hands its hidden activation and loss to a reader thread; the host reads the loss
    itself every fourth step. Returns {index: value read}."""
    terra.manual_seed(3)
    fc1, fc2 = nn.Linear(6, 12), nn.Linear(12, 3)
    opt = optim.SGD(list(fc1.parameters()) + list(fc2.parameters()), lr=0.05)
    x = terra.randn([5, 6])
    y = terra.tensor([0, 1, 2, 0, 1])
    out = {}
    handed = queue.Queue()

    def reader():
        while True:
            item = handed.get()
            if item is None:
                return
            i, t = item
            out[i] = t.sum().item()

    thread = threading.Thread(target=reader, daemon=True)  # a hung read fails the comparison, not the run
    thread.start()
    eng = terra.Engine(mode)
    try:
        for s in range(steps):
            with eng.step():
                h = fc1(x)
                h = F.relu(h) if s % 3 == 1 else F.tanh(h)  # the path changes: fallbacks, then merged
                loss = F.cross_entropy(fc2(h), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                handed.put((2 * s, h))
                handed.put((2 * s + 1, loss))
                if s % 4 == 0:
                    out[-1 - s] = loss.item()
    finally:
        handed.put(None)
        thread.join(timeout=60)
    eng.synchronize()
    return out


class TestValuesOnThreads(unittest.TestCase):
    def test_every_mode_reads_eagers_values(self):
        eager = train("eager")
        self.assertEqual(len(eager), 60 + 8)
        for mode in ("coexec", "lazy"):
            for run in range(2):
                got = train(mode)
                self.assertEqual(got, eager, "%s, run %d" % (mode, run))


if __name__ == "__main__":
    unittest.main()
