#!/usr/bin/python3
"""How fast co-execution could be at best on this machine, from where eager's CPU time goes.

Runs each program in eager mode under `perf record` twice (N and 2N steps; the difference is N
steady-state steps, without start-up, imports or model set-up), sorts the samples by thread and
by what ran, and prints upper bounds on co-execution's speedup over eager that hold for any
implementation keeping the correctness contract (the same kernels, so the same bits):

  G  oneDNN's convolutions and GEMMs (its JIT code, libdnnl, libgomp)
  E  terra's own kernels (backend/cpu loops, fused and optimizer kernels, libm)
  H  everything else: the host program, dispatch, autograd, allocation, the kernel (page faults)
  pool waits (a thread spinning for a chunk) count as nothing.

  bound       = eager's wall / max(all work / cores, the main thread's H)
                co-execution must still run every kernel and the host program on `cores` CPUs;
                this assumes a free GraphRunner, perfect packing and a skeleton no dearer than
                eager's own dispatch, so the real figure is lower.
  bound_E0    = the same with every E sample removed from co-execution alone (as if fusion made
                terra's elementwise, norm, softmax, reduction and optimizer kernels free while
                eager still paid for them): what fusion could reach at the very most.

Eager's wall is the main thread's samples (it runs every step and spins while a worker has a
chunk; where it sleeps instead, the bound comes out higher, never lower).

  bench/two_core_bound.py [--python] [--programs a,b|all] [--steps N] [--quick] [--threads T]
  (C++: <build>/terra-bench --child P:eager; --python: terra.programs.run(P, "eager", N) in a child, with
   PYTHONPATH=<build>/python). Needs perf (Debian's linux-perf).
  Two more programs, never in "all": `mlp`, issue #9's 4-layer MLP (<build>/mlp_modes --modes eager),
  and `pyloop`, issue #9's Python loop at width 128 (bench/python_loop.py --modes eager).
"""
import argparse
import collections
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROGRAMS = ["resnet", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint",
            "faster_rcnn", "music_transformer"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = re.compile(r"pool_help|await_change|pool_run|spin_until|ThreadPool|futex")


def category(dso, kernel_space, sym):
    if kernel_space:
        return "H"
    if dso.startswith("[JIT]") or "libdnnl" in dso or "libgomp" in dso:
        return "G"
    if WAIT.search(sym):
        return "W"
    if ("libterra" in dso and re.search(r"terra::(kernels|cpu|compile)::", sym)) or "libm.so" in dso:
        return "E"
    return "H"


def profile(cmd, env):
    """Samples per (thread rank, category): rank 0 is the process's main thread."""
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        subprocess.run(["perf", "record", "-q", "-F", "2000", "-o", data, "--"] + cmd, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "pid,dso,sym", "-g", "none",
                              "--stdio", "-F", "sample,pid,dso,sym"], capture_output=True, text=True, check=True).stdout
    per = collections.defaultdict(collections.Counter)
    for line in rep.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+):\S*\s+(\S+(?: tid \d+)?)\s+\[(.)\]\s+(.*)", line)
        if m:
            per[int(m.group(2))][category(m.group(3), m.group(4) == "k", m.group(5))] += int(m.group(1))
    tids = sorted(per)
    return {(i, c): v for i, t in enumerate(tids) for c, v in per[t].items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", action="store_true", help="the Python programs (python3 -m terra.programs)")
    ap.add_argument("--programs", default="all")
    ap.add_argument("--steps", type=int, default=40, help="N: the profiles run N and 2N steps")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="terra's thread count (default: terra's own)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("two_core_bound.py needs perf: apt-get install linux-perf")
    progs = PROGRAMS if args.programs == "all" else args.programs.split(",")
    env = dict(os.environ)
    cores = args.threads or len(os.sched_getaffinity(0))
    if args.python:
        env["PYTHONPATH"] = os.path.join(args.build, "python") + os.pathsep + env.get("PYTHONPATH", "")
    print(f"eager profiles, {'Python' if args.python else 'C++'} programs, {'quick' if args.quick else 'default'} "
          f"sizes, {args.steps} steady steps (a {2 * args.steps}-step run less a {args.steps}-step one), {cores} cores")
    print(f"{'program':18} {'G':>6} {'E':>6} {'H':>6} {'H main':>7}  {'bound':>6} {'bound_E0':>9}")
    b0s, b1s = [], []
    for p in progs:
        counts = []
        for n in (args.steps, 2 * args.steps):
            if p == "mlp":
                cmd = [os.path.join(args.build, "mlp_modes"), "--modes", "eager", "--rounds", "1", "--steps", str(n)] + \
                      (["--threads", str(args.threads)] if args.threads else [])
            elif p == "pyloop":
                env["PYTHONPATH"] = os.path.join(args.build, "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
                cmd = [sys.executable, os.path.join(ROOT, "bench", "python_loop.py"), "--widths", "128", "--modes", "eager",
                       "--rounds", "1", "--steps", str(n), "--no-micro"] + \
                      (["--threads", str(args.threads)] if args.threads else [])
            elif args.python:
                cmd = [sys.executable, "-c", "import sys, terra; terra.set_num_threads(int(sys.argv[4])) "
                       "if int(sys.argv[4]) else None; from terra.programs import run; "
                       "run(sys.argv[1], 'eager', int(sys.argv[2]), sys.argv[3] == '1', 0)",
                       p, str(n), "1" if args.quick else "0", str(args.threads)]
            else:
                cmd = [os.path.join(args.build, "terra-bench"), "--child", f"{p}:eager", "--steps", str(n),
                       "--warmup", "0"] + (["--quick"] if args.quick else []) + \
                      (["--threads", str(args.threads)] if args.threads else [])
            counts.append(profile(cmd, env))
        d = collections.Counter()
        for k in set(counts[0]) | set(counts[1]):
            d[k] = max(counts[1].get(k, 0) - counts[0].get(k, 0), 0)
        tot = collections.Counter()
        for (rank, c), v in d.items():
            tot[c] += v
        wall = sum(v for (rank, c), v in d.items() if rank == 0)
        host_main = d[(0, "H")]
        work = tot["G"] + tot["E"] + tot["H"]
        if wall == 0 or work == 0:
            print(f"{p:18} (no samples)")
            continue
        b0 = wall / max(work / cores, host_main)
        b1 = wall / max((tot["G"] + tot["H"]) / cores, host_main)
        b0s.append(b0)
        b1s.append(b1)
        pct = lambda v: 100.0 * v / work
        print(f"{p:18} {pct(tot['G']):5.1f}% {pct(tot['E']):5.1f}% {pct(tot['H']):5.1f}% {100.0 * host_main / wall:6.1f}%"
              f"  {b0:5.2f}x {b1:8.2f}x", flush=True)
    if b0s:
        gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))
        print(f"{'geo-mean':18} {'':>6} {'':>6} {'':>6} {'':>7}  {gm(b0s):5.2f}x {gm(b1s):8.2f}x")
    print("G/E/H: shares of all CPU work; H main: the main thread's own host work, as a share of eager's wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
