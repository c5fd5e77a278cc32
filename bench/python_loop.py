"""The Python training loop of issue #9, written as a PyTorch user writes it, run in eager, lazy and
co-execution in ONE process with the modes interleaved round by round (machine noise hits them alike).

Model: 6 residual blocks x = x + tanh(Linear(LayerNorm(x))) of width W, a final Linear to 10 classes,
cross_entropy, Adam(lr 1e-3), batch 32, loss.item() every step; 8 pre-generated batches cycled.

Prints per width and mode: steps/s (median over rounds), ratio vs eager (median of the rounds'
paired ratios), Engine.stats() traces and fallbacks, host and runner busy time per step, and
whether every step's loss equals eager's exactly.
Then a per-op micro-measure: one terra call (a + b on 1x8 tensors; a Linear forward on 32x128) in eager
and inside a co-execution step, in us per call. No environment variable is read or set.

  /usr/bin/python3 bench/python_loop.py [--widths 64,128,256] [--batch 32] [--steps 100] [--rounds 5]
                                        [--modes eager,lazy,coexec] [--no-micro] [--only-micro]
(with PYTHONPATH=<build>/python, as scripts/test_python.sh sets it)
"""
import argparse
import statistics
import sys
import time

import terra
import terra.nn as nn
import terra.nn.functional as F


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return terra.tanh(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self, width, depth=6, classes=10):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


class Run:
    def __init__(self, mode, width, batch):
        self.mode = mode
        self.engine = terra.Engine(mode)
        terra.manual_seed(1)
        with terra.no_grad():
            self.xs = [terra.randn(batch, width) for _ in range(8)]
            self.ys = [terra.randint(0, 10, (batch,)) for _ in range(8)]
        terra.manual_seed(0)
        self.model = Net(width)
        self.opt = terra.optim.Adam(self.model.parameters(), lr=1e-3)
        self.next = 0
        self.losses = []
        self.rates = []

    def step(self):
        with self.engine.step():
            x, y = self.xs[self.next % 8], self.ys[self.next % 8]
            self.next += 1
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.losses.append(loss.item())

    def timed(self, steps):
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.engine.synchronize()
        self.rates.append(steps / (time.perf_counter() - t0))


def bench_width(width, args, modes):
    runs = [Run(m, width, args.batch) for m in modes]
    for r in runs:  # warm-up: tracing, graph generation, caches
        for _ in range(20):
            r.step()
    for _ in range(args.rounds):
        for r in runs:
            r.timed(args.steps)
    exact = True
    for r in runs:
        s = r.engine.stats()
        rate = statistics.median(r.rates)
        # The median of the rounds' paired ratios (as terra-bench): a round of each mode runs back to
        # back, so a slow spell of the machine hits both sides of a ratio, not one mode's median.
        ratio = statistics.median(m / e for m, e in zip(r.rates, runs[0].rates))
        same = r.losses == runs[0].losses
        exact &= same
        n = max(s["steps"], 1)
        print(f"{width:>5} {r.mode:<7} {rate:9.1f} {ratio:8.2f}x {s['traces']:>6} {s['fallbacks']:>6} "
              f"{1e6 * s['host_busy_s'] / n:13.1f} {1e6 * s['runner_busy_s'] / n:15.1f}  "
              f"{'ref' if r is runs[0] else 'exact' if same else 'DIFFER'}", flush=True)
    return exact


def per_call_us(fn, calls):
    t0 = time.perf_counter()
    fn(calls)
    return 1e6 * (time.perf_counter() - t0) / calls


def micro(args):
    """us per terra call: eager vs inside a co-execution step (the skeleton), and the runner's share."""
    print(f"\nper-op cost, us per call (median of {args.rounds} rounds, 64 calls per step from one call site, "
          "no_grad): wall time and the calling thread's CPU time (time.thread_time: the host's own cost, what "
          "load on the machine disturbs least); co-execution also the runner's busy time (Engine stats)")
    print(f"{'op':<30} {'eager wall':>10} {'eager cpu':>10} {'coexec wall':>12} {'coexec host':>12} "
          f"{'coexec runner':>14}")
    terra.manual_seed(0)
    a, b = terra.randn(1, 8), terra.randn(1, 8)
    lin = nn.Linear(128, 128)
    x = terra.randn(32, 128)
    k = 64  # calls per step (one call site: a loop)

    def adds(n):
        for _ in range(n):
            a + b

    def linears(n):
        for _ in range(n):
            lin(x)

    def run_steps(eng, body, steps):  # one call site for warm-up and timing: the same trace
        for _ in range(steps):
            with eng.step():
                body(k)

    for name, body in (("a + b (1x8)", adds), ("Linear fwd (32x128 @ 128x128)", linears)):
        with terra.no_grad():
            res = {}
            for mode in ("eager", "coexec"):
                eng = terra.Engine(mode)
                run_steps(eng, body, 5)  # warm-up (traces)
                eng.synchronize()
                res[mode] = (eng, [])
            steps = max(1, 2000 // k)
            for _ in range(args.rounds):
                for mode, (eng, times) in res.items():
                    s0 = eng.stats()
                    t0, c0 = time.perf_counter(), time.thread_time()
                    run_steps(eng, body, steps)
                    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
                    eng.synchronize()
                    s1 = eng.stats()
                    n = steps * k
                    times.append((1e6 * dt / n, 1e6 * dc / n,
                                  1e6 * (s1["runner_busy_s"] - s0["runner_busy_s"]) / n))
            ew = statistics.median(t[0] for t in res["eager"][1])
            e = statistics.median(t[1] for t in res["eager"][1])
            c = statistics.median(t[0] for t in res["coexec"][1])
            h = statistics.median(t[1] for t in res["coexec"][1])
            r = statistics.median(t[2] for t in res["coexec"][1])
            print(f"{name:<30} {ew:10.2f} {e:10.2f} {c:12.2f} {h:12.2f} {r:14.2f}   (coexec host/eager {h / e:.2f}x, "
                  "traces "
                  f"{res['coexec'][0].stats()['traces']}, fallbacks {res['coexec'][0].stats()['fallbacks']})",
                  flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--widths", default="64,128,256")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--modes", default="eager,lazy,coexec")
    p.add_argument("--no-micro", action="store_true")
    p.add_argument("--only-micro", action="store_true")
    p.add_argument("--threads", type=int, default=0, help="terra.set_num_threads (default: terra's own choice)")
    p.add_argument("--ieee-denormals", action="store_true",
                   help="terra.set_flush_denormal(False): denormals as IEEE and torch have them")
    args = p.parse_args()
    if args.threads > 0:
        terra.set_num_threads(args.threads)
    if args.ieee_denormals:
        terra.set_flush_denormal(False)
    modes = args.modes.split(",")
    if "eager" in modes:  # the reference comes first (without it, ratios are vs the first mode)
        modes = ["eager"] + [m for m in modes if m != "eager"]
    exact = True
    if not args.only_micro:
        print(f"6 x (x = x + tanh(Linear(LayerNorm(x)))) + Linear(W, 10), cross_entropy, Adam, batch {args.batch}, "
              f"loss.item() every step, {args.rounds} rounds x {args.steps} steps, modes interleaved")
        print(f"{'width':>5} {'mode':<7} {'steps/s':>9} {'vs eager':>9} {'traces':>6} {'fallbk':>6} "
              f"{'host us/step':>13} {'runner us/step':>15}  losses")
        for w in [int(v) for v in args.widths.split(",")]:
            exact &= bench_width(w, args, modes)
    if not args.no_micro:
        micro(args)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
