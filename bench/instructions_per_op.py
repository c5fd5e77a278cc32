"""Instructions per op call of each thread, counted by callgrind: a measure of the runtime's per-op
work that load on the machine does not disturb (bench/op_costs' times move by 30 % and more with
the spell on a shared 2-vCPU machine; these counts move by a few instructions).

op_costs runs one program in one mode under `valgrind --tool=callgrind --separate-threads=yes`
twice, for S and 2S steps (one round each); the difference divided by S steps' op calls is the
steady-state cost of an op, without start-up, tracing and graph generation. The main thread is the
program's (co-execution's host); the busiest other thread is reported as the runner.
With --top N, the N functions whose own (exclusive) count changed most between the runs, per op,
on the main thread, or with --top-thread runner on the runner (needs callgrind_annotate; a build with -g names inlined callees' lines).
With --base DIR, the same counts from a second build, side by side (its op_costs may predate
--ops-per-step: the op counts come from --build).

  /usr/bin/python3 bench/instructions_per_op.py [--build build] [--base DIR] [--program add]
                                                [--mode coexec] [--steps 100] [--top 0]
Needs valgrind (Debian: apt-get install valgrind). A few seconds per program, mode and build.
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile


def thread_totals(prefix):
    """{thread number: instructions} from callgrind's per-thread files prefix-NN."""
    out = {}
    for path in glob.glob(prefix + "-*"):
        m = re.search(r"-(\d+)$", path)
        if not m:
            continue
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    out[int(m.group(1))] = int(line.split()[1])
                    break
    return out


def self_costs(path):
    """{function: exclusive instructions} of one callgrind file."""
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", path], capture_output=True,
                          text=True, check=True).stdout
    costs = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line or ":" not in m.group(2):
            continue
        name = m.group(2).split(":", 1)[1]
        name = re.sub(r" \[.*\]$", "", name)
        costs[name] += int(m.group(1).replace(",", ""))
    return costs


def ops_per_step(build, program):
    out = subprocess.run([os.path.join(build, "op_costs"), "--ops-per-step", "--program", program],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[1])


def measure(build, program, mode, ops, steps, top, workdir, top_thread="host"):
    binary = os.path.join(build, "op_costs")
    runs = {}
    for s in (steps, 2 * steps):
        prefix = os.path.join(workdir, "%s.%s.%s.%d" % (os.path.basename(os.path.abspath(build)), program, mode, s))
        subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", "--callgrind-out-file=" + prefix,
                        binary, "--program", program, "--mode", mode, "--rounds", "1", "--steps", str(s)],
                       capture_output=True, check=True)
        runs[s] = prefix
    a, b = thread_totals(runs[steps]), thread_totals(runs[2 * steps])
    n = float(steps * ops)
    per_thread = {t: (b.get(t, 0) - a.get(t, 0)) / n for t in set(a) | set(b)}
    host = per_thread.pop(1, 0.0)
    runner = max(per_thread.values(), default=0.0)
    runner_thread = max(per_thread, key=per_thread.get, default=1)
    result = {"ops": ops, "host": host, "runner": runner, "other": sum(per_thread.values()) - runner}
    if top:
        suffix = "-%02d" % (1 if top_thread == "host" else runner_thread)
        ca, cb = self_costs(runs[steps] + suffix), self_costs(runs[2 * steps] + suffix)
        diff = {k: (cb[k] - ca[k]) / n for k in set(ca) | set(cb)}
        result["top"] = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--base", default=None, help="a second build directory, measured the same way")
    ap.add_argument("--program", default="add", help="add, add_grad or linear (comma-separated)")
    ap.add_argument("--mode", default="coexec", help="eager, lazy or coexec (comma-separated)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--top-thread", default="host", choices=["host", "runner"],
                    help="whose functions --top lists: the main thread's or the runner's")
    args = ap.parse_args()
    builds = [args.build] + ([args.base] if args.base else [])
    print("instructions per op call (callgrind, %d minus %d steps)" % (2 * args.steps, args.steps))
    print("%-9s %-7s %-24s %5s %10s %10s %10s" % ("program", "mode", "build", "ops", "host", "runner", "others"))
    with tempfile.TemporaryDirectory() as workdir:
        for program in args.program.split(","):
            ops = ops_per_step(args.build, program)  # (a base build older than --ops-per-step runs the same programs)
            for mode in args.mode.split(","):
                for build in builds:
                    r = measure(build, program, mode, ops, args.steps, args.top, workdir, args.top_thread)
                    print("%-9s %-7s %-24s %5d %10.0f %10.0f %10.0f" % (program, mode, build[-24:], r["ops"], r["host"],
                                                                        r["runner"], r["other"]))
                    for name, v in r.get("top", []):
                        print("    %8.1f  %s" % (v, name[:110]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
