"""The 8-op elementwise chain of bench/fusion_bench.cpp on large tensors, eager: terra beside
PyTorch (the oracle, Debian's python3-torch). Outputs above 8 MiB used to go back to the system at
every free, so each op page-faulted its output in again. Median of 10 chains after 3 warm-up ones;
each library in its own process (PyTorch's OpenMP workers spin after each op and would slow the
other library's threads in a shared one), no environment variables.
Usage: PYTHONPATH=build/python /usr/bin/python3 bench/large_chain.py [--n N] [--lib terra|torch]"""
import argparse
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument('--n', type=int, default=1 << 22)
ap.add_argument('--lib', choices=['terra', 'torch'], help='one library in this process (default: both, one process each)')
args = ap.parse_args()


def chain(x, y, s1, s2):
    t = x * s1 + y
    t = t * t - x
    t = t / s2 + y
    return t * s1 - t


def run(name):
    import terra
    if name == 'torch':
        import torch as lib
        lib.set_num_threads(terra.get_num_threads())  # the same thread count as terra's default
    else:
        lib = terra
    a = (lib.rand([args.n]), lib.rand([args.n]), lib.full([], 1.5), lib.full([], 2.5))
    times = []
    for rnd in range(13):
        t0 = time.perf_counter()
        out = chain(*a)
        float(out[0])  # the value, so nothing stays pending
        if rnd >= 3:
            times.append(time.perf_counter() - t0)
    print(f"{name:6s} chain over {args.n} floats: median {sorted(times)[len(times) // 2] * 1e3:.1f} ms", flush=True)


if args.lib:
    run(args.lib)
else:
    for name in ('terra', 'torch'):
        r = subprocess.run([sys.executable, __file__, '--n', str(args.n), '--lib', name])
        if r.returncode and name == 'terra':
            sys.exit(r.returncode)
