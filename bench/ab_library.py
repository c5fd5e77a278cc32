#!/usr/bin/env python3
"""Two builds of libterra side by side on terra-bench's programs (quick sizes).

    python3 bench/ab_library.py --base DIR [--build build] [--rounds 4] [--programs a,b] [--modes eager,coexec]

DIR holds the other libterra.so* (copied from a build of the older commit); the binary is the
build's terra-bench, whose RUNPATH lets LD_LIBRARY_PATH=DIR pick the other library. Each round runs
every program's children (--child prog:mode, 100 steps after 20 of warm-up) for both libraries, in
alternating order from round to round. Printed per program: eager steps/s per library (medians),
their paired new/base ratio, and each library's co-execution/eager ratio (median of the rounds'
paired ratios). A child's losses must equal its library's eager losses, or the row says DIFF.
"""
import argparse
import math
import os
import statistics
import subprocess

PROGRAMS = "resnet,bert_qa,yolov3,dcgan,gpt2,bert_cls,dropblock,sdpoint,faster_rcnn,music_transformer"


def child(build, libdir, prog, mode, steps=100, warmup=20):
    env = dict(os.environ)
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir
    out = subprocess.run([f"{build}/terra-bench", "--child", f"{prog}:{mode}", "--steps", str(steps), "--warmup",
                          str(warmup), "--quick", "--repeat", "1"], capture_output=True, text=True, env=env).stdout
    rate, losses = None, None
    for line in out.splitlines():
        if line.startswith("TB_RESULT"):
            kv = dict(t.split("=", 1) for t in line.split()[1:])
            rate = (steps - warmup) / (float.fromhex(kv["full_s"]) - float.fromhex(kv["head_s"]))
        elif line.startswith("TB_LOSSES"):
            losses = line.split()[1:]
    if rate is None:
        raise SystemExit(f"{prog}:{mode} with {libdir or 'the build'} failed:\n{out}")
    return rate, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="directory with the other libterra.so*")
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--programs", default=PROGRAMS)
    ap.add_argument("--modes", default="eager,coexec")
    a = ap.parse_args()
    progs, modes = a.programs.split(","), a.modes.split(",")
    if modes[0] != "eager":
        raise SystemExit("--modes must start with eager (the reference)")
    sides = {"base": a.base, "new": ""}
    rate, exact = {}, {}
    for r in range(a.rounds):
        for p in progs:
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                ref = None
                for m in modes:
                    v, losses = child(a.build, sides[side], p, m)
                    rate.setdefault((side, p, m), []).append(v)
                    ref = losses if m == "eager" else ref
                    exact[(side, p, m)] = exact.get((side, p, m), True) and losses == ref
    geo = lambda v: math.exp(sum(map(math.log, v)) / len(v))
    head = f"{'program':18s} {'eager base':>10s} {'eager new':>10s} {'new/base':>8s}"
    for m in modes[1:]:
        head += f" | {m + '/eager base':>18s} {m + '/eager new':>17s}"
    print(head)
    cols = {}
    for p in progs:
        eb, en = rate[("base", p, "eager")], rate[("new", p, "eager")]
        ratio = statistics.median(n / b for b, n in zip(eb, en))
        row = f"{p:18s} {statistics.median(eb):10.0f} {statistics.median(en):10.0f} {ratio:8.2f}"
        cols.setdefault("eager", []).append(ratio)
        for m in modes[1:]:
            for side in ("base", "new"):
                v = statistics.median(x / e for x, e in zip(rate[(side, p, m)], rate[(side, p, "eager")]))
                cols.setdefault((m, side), []).append(v)
                cell = f"{v:.2f}" if exact[(side, p, m)] else "DIFF"
                row += f" | {cell:>18s}" if side == "base" else f" {cell:>17s}"
        print(row)
    row = f"{'geo-mean':18s} {'':10s} {'':10s} {geo(cols['eager']):8.2f}"
    for m in modes[1:]:
        row += f" | {geo(cols[(m, 'base')]):18.2f} {geo(cols[(m, 'new')]):17.2f}"
    print(row)


if __name__ == "__main__":
    main()
