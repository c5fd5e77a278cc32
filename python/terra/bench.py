"""python3 -m terra.bench: Terra's ten programs in Python (terra.programs) in every execution mode, side
by side with their PyTorch versions; the Python counterpart of the C++ terra-bench (tools/terra_bench.cpp,
docs/terra-bench.md), with the same table, CSV columns and timing definition.

    python3 -m terra.bench --quick                      # all ten, quick sizes, eager/lazy/coexec + torch
    python3 -m terra.bench --programs gpt2,dcgan --steps 40 --warmup 10 --repeat 3 --csv out.csv --plots DIR

Each program x mode runs in a fresh child process (this module re-run with --child) under a timeout, so a
crash or deadlock fails that row only. In the child, as terra-bench: a prime run of max(W, 1) steps
(untimed: process warm-up), then a full run of N steps and a head run of W steps, each timed from run()
entry (Engine construction, model and data setup) to engine.synchronize(); steady-state steps/s =
(N - W) / (full - head). --repeat R runs R rounds, and each round runs every mode of a program once, one
child each, back to back: steps/s is the median over the rounds, and a mode's speedup is the median of
the rounds' paired ratios to eager, so a slow or fast stretch of a shared machine hits the modes it
compares alike (as terra-bench --repeat). The check column compares every step's loss with eager's exactly
(==, tolerance 0), and every later round's with the first's; exit status 1 if any differs or a run failed.

PyTorch rows: bench/torch_programs.py (the same ten in PyTorch; found next to the checkout this package
was built from, or --torch-script PATH), run with torch.set_num_threads(the same thread count) at torch's
best setting on this machine: OMP_WAIT_POLICY=PASSIVE and OpenBLAS with one BLAS thread (as
scripts/bench_programs.sh and docs/terra-bench.md), for torch's process only. torch is never imported by
terra itself: only that script, in its own process. --no-torch skips it; --torch FILE reads its CSV.

Defaults: 60 steps, 15 warm-up, 3 repetitions (--quick: 40 and 10), as scripts/bench_programs.sh.
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import terra
from terra import programs as _programs

MODES = ["eager", "lazy", "coexec"]
OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
CSV_COLUMNS = ["program", "mode", "steps_per_s", "speedup_vs_eager", "traces", "fallbacks", "final_loss",
               "loss_check", "first_loss", "total_s", "steps", "warmup", "graph_generations", "host_busy_s",
               "host_stall_s", "runner_busy_s", "runner_stall_s", "lazy_cache_hits", "lazy_cache_misses",
               "threads", "quick", "repeat", "steps_per_s_min", "steps_per_s_max", "error",
               "torch_eager_steps_per_s", "terra_over_torch_eager", "torch_final_loss"]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m terra.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default="all", help="all, or names separated by commas")
    ap.add_argument("--modes", default="eager,lazy,coexec", help="eager is always run (the reference)")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default 60; --quick: 40)")
    ap.add_argument("--warmup", type=int, default=None, help="steps not timed (default 15; --quick: 10; at "
                    "most steps/4 when --steps is given alone)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds, modes interleaved in each; steps/s and speedups are medians over them")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="the programs' quick sizes")
    ap.add_argument("--threads", type=int, default=0, help="terra.set_num_threads and torch's (default: "
                    "terra's own choice)")
    ap.add_argument("--csv", default=None, help="write the results as CSV (terra-bench's columns)")
    ap.add_argument("--plots", default=None, metavar="DIR", help="write speedup.png and breakdown.png")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per child run")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch baseline")
    ap.add_argument("--torch", default=None, metavar="FILE", help="read torch_programs.py's CSV instead of "
                    "running it")
    ap.add_argument("--torch-script", default=None, metavar="PATH", help="bench/torch_programs.py")
    ap.add_argument("--no-progress", action="store_true", help="no tqdm bar (plain lines)")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    # scripts/bench_programs.sh's defaults (the C++ table in docs/terra-bench.md): 60/15, --quick 40/10.
    default_steps, default_warmup = (40, 10) if args.quick else (60, 15)
    if args.steps is None:
        args.steps = default_steps
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    if args.warmup is None:
        args.warmup = min(default_warmup, args.steps // 4)
    if args.warmup >= args.steps:
        ap.error("--warmup must be smaller than --steps")
    args.repeat = max(1, args.repeat)
    names = _programs.NAMES if args.programs == "all" else [n for n in args.programs.split(",") if n]
    for n in names:
        if n not in _programs.NAMES:
            ap.error(f"unknown program {n!r}; known: {', '.join(_programs.NAMES)}")
    args.names = names
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error(f"bad --modes entry {m!r}; known: {', '.join(MODES)}")
    args.mode_list = ["eager"] + [m for m in MODES if m in modes and m != "eager"]
    return args


# ---------------------------------------------------------------- child: one program in one mode

def run_child(args):
    """Prints one line `TB_JSON {...}`: wall times, the full run's stats and losses, and the prefix runs'
    losses (which must reproduce the full run's first steps: the runs are deterministic)."""
    name, mode = args.child.split(":")
    if args.threads > 0:
        terra.set_num_threads(args.threads)
    prog = _programs.get(name)
    try:
        prime = prog.run(mode=mode, steps=max(args.warmup, 1), quick=args.quick, seed=args.seed)
        reps, full, head = [], None, None
        for r in range(args.repeat):
            f = prog.run(mode=mode, steps=args.steps, quick=args.quick, seed=args.seed)
            h = prog.run(mode=mode, steps=args.warmup, quick=args.quick, seed=args.seed) if args.warmup else None
            reps.append((f.wall_s, h.wall_s if h else 0.0))
            if r == 0:
                full, head = f, h
        out = dict(reps=reps, prime_s=prime.wall_s, stats={k: v for k, v in full.stats.items()},
                   losses=full.losses, prefix=prime.losses + (head.losses if head else []))
    except Exception as e:  # reported as this row's failure; the parent goes on
        out = dict(error=f"{type(e).__name__}: {e}".replace("\n", " "))
    print("TB_JSON " + json.dumps(out), flush=True)
    return 0 if "error" not in out else 3


# ---------------------------------------------------------------- parent

def child_env():
    """The child imports the same terra package as this process, whatever put it on sys.path."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(terra.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_one(args, name, mode, threads):
    row = dict(program=name, mode=mode, ok=False, error="", check="n/a", speedup=math.nan, torch_eager=math.nan,
               torch_final_loss=math.nan)
    cmd = [sys.executable, "-m", "terra.bench", "--child", f"{name}:{mode}", "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--seed", str(args.seed), "--repeat", "1",  # one round per child
           "--threads", str(threads)] + (["--quick"] if args.quick else [])
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(),
                           timeout=args.timeout)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {args.timeout} s (deadlock?)"
        return row
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    res = next((json.loads(ln[8:]) for ln in lines if ln.startswith("TB_JSON ")), None)
    if res is None or "error" in (res or {}):
        why = res["error"] if res else (f"child exited with status {p.returncode}: " +
                                        (lines[-1] if lines else "(no output)"))
        row["error"] = why
        return row
    row.update(ok=True, reps=res["reps"], prime_s=res["prime_s"], stats=res["stats"], losses=res["losses"],
               prefix=res["prefix"], full_s=res["reps"][0][0])
    if len(row["losses"]) != args.steps:
        row.update(ok=False, error=f"expected {args.steps} losses, got {len(row['losses'])}")
        return row
    steady = args.steps - args.warmup
    # One rate per (full, head) pair: this round's (add_round appends later rounds'). A pair whose head
    # run took as long as the full run (timer noise on tiny runs) gives no rate.
    row["rates"] = [steady / (f - h) if f > h else math.nan for f, h in row["reps"]]
    summarize_rates(row)
    check_prefix(row, args)
    return row


def summarize_rates(row):
    """steps/s: the median of the rounds' rates; their spread as min and max."""
    rates = sorted(v for v in row["rates"] if math.isfinite(v)) or [math.nan]
    row["steps_per_s"] = statistics.median(rates)
    row["sps_min"], row["sps_max"] = rates[0], rates[-1]


def add_round(row, later):
    """Folds a later round's run of the same program and mode into `row` (the first round's): its rate,
    or its failure; its losses must equal the first round's (the runs are deterministic)."""
    if not row["ok"]:
        return
    if not later["ok"]:
        row.update(ok=False, error=later["error"])
        return
    row["rates"].append(later["rates"][0])
    summarize_rates(row)
    if row["check"] != "DIFF" and later["check"] == "DIFF":  # its own prefix check failed
        row.update(check="DIFF", error=later["error"])
    elif row["check"] != "DIFF" and later["losses"] != row["losses"]:
        step = next(i for i, (a, b) in enumerate(zip(later["losses"], row["losses"])) if not a == b)
        row.update(check="DIFF", error=f"not deterministic: round {len(row['rates'])}'s step {step} loss "
                                       f"{later['losses'][step]!r} != the first round's {row['losses'][step]!r}")


def paired_speedup(row, eager):
    """The median over rounds of row's rate / eager's rate in the same round."""
    ratios = sorted(a / b for a, b in zip(row["rates"], eager["rates"])
                    if math.isfinite(a) and math.isfinite(b) and b > 0)
    return statistics.median(ratios) if ratios else math.nan


def check_prefix(row, args):
    """The W-step runs must reproduce the first W steps of the N-step run (determinism within a mode)."""
    prime = max(args.warmup, 1)
    for i, v in enumerate(row["prefix"]):
        step = i if i < prime else i - prime
        if step < len(row["losses"]) and v != row["losses"][step]:
            row["check"] = "DIFF"
            row["error"] = f"not deterministic: a repeated run's step {step} loss {v!r} != {row['losses'][step]!r}"
            return


def check_against(row, eager):
    """Every step's loss against eager's: exact equality (tolerance 0)."""
    if not row["ok"] or not eager["ok"] or row["check"] == "DIFF":
        return
    for i, (a, b) in enumerate(zip(row["losses"], eager["losses"])):
        if not a == b:
            row["check"] = "DIFF"
            row["error"] = f"step {i} loss {a!r} != eager {b!r} (diff {a - b:.3g})"
            return
    row["check"] = "exact"


def find_torch_script(args):
    cands = [args.torch_script] if args.torch_script else []
    if os.environ.get("TERRA_TORCH_PROGRAMS"):
        cands.append(os.environ["TERRA_TORCH_PROGRAMS"])
    # <checkout>/build/python/terra/bench.py -> <checkout>/bench; also the current directory's tree.
    for start in (os.path.dirname(os.path.abspath(__file__)), os.getcwd()):
        d = start
        for _ in range(5):
            cands.append(os.path.join(d, "bench", "torch_programs.py"))
            d = os.path.dirname(d)
    return next((c for c in cands if c and os.path.isfile(c)), None)


def run_torch(args, threads, say):
    """{program: (steps/s, final loss)} of PyTorch eager, or {} (with a note) when it cannot run."""
    path = args.torch
    if path is None:
        script = find_torch_script(args)
        if script is None:
            say("torch: bench/torch_programs.py not found (--torch-script PATH); no PyTorch column")
            return {}
        fd, path = tempfile.mkstemp(suffix=".csv", prefix="terra-bench-torch-")
        os.close(fd)
        env = dict(os.environ)
        # torch at its best thread setting (DESIGN.md §8): libgomp's workers wait passively (spinning ones
        # fight for the 2 cores), and OpenBLAS's pool, which spins next to torch's, runs one thread
        # (bench_programs.sh). Only torch's process gets these; terra reads no OMP_* variable.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        if os.path.isdir(OPENBLAS_DIR):
            env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH")
                                                     else "")
        cmd = [sys.executable, script, "--programs", ",".join(args.names), "--steps", str(args.steps), "--warmup",
               str(args.warmup), "--seed", str(args.seed), "--threads", str(threads), "--repeat", str(args.repeat),
               "--no-jit", "--csv", path] + (["--quick"] if args.quick else [])
        say(f"torch: {os.path.relpath(script)} ({threads} threads) ...")
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               timeout=args.timeout * max(1, len(args.names)))
        except subprocess.TimeoutExpired:
            say("torch: timed out; no PyTorch column")
            return {}
        for ln in p.stdout.splitlines():
            if ln.startswith("torch"):
                say("  " + ln)
        if p.returncode != 0:
            say(f"torch: torch_programs.py failed (status {p.returncode}); no PyTorch column:\n" + p.stdout[-2000:])
            return {}
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("framework") == "torch_eager" and r.get("steps_per_s"):
                out[r["program"]] = (float(r["steps_per_s"]), float(r["final_loss"]) if r.get("final_loss")
                                     else math.nan)
    return out


class Progress:
    """tqdm's bar on stderr when tqdm is importable (Debian: python3-tqdm) and stderr is a terminal;
    otherwise (or with --no-progress) terra-bench's plain `[k/total] program mode ... result` lines."""

    def __init__(self, total, plain):
        self.k, self.total, self.bar = 0, total, None
        if not plain and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                pass

    def start(self, what):
        self.k += 1
        if self.bar is not None:
            self.bar.set_description(what)
        else:
            print(f"[{self.k}/{self.total}] {what} ... ", end="", flush=True)

    def done(self, what, line):
        if self.bar is not None:
            self.bar.write(f"[{self.k}/{self.total}] {what}: {line}")
            self.bar.update(1)
        else:
            print(line, flush=True)

    def say(self, line):
        (self.bar.write if self.bar is not None else print)(line)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def fmt(f, v):
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f % v


def print_table(head, rows, left_cols=2):
    """A plain text table as terra-bench prints it: first columns left-aligned, the rest right-aligned."""
    w = [max([len(h)] + [len(r[c]) for r in rows]) for c, h in enumerate(head)]

    def line(r):
        return "  ".join(v.ljust(w[c]) if c < left_cols else v.rjust(w[c]) for c, v in enumerate(r)).rstrip()
    print(line(head))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(line(r))


def geomean(values):
    v = [x for x in values if isinstance(x, float) and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan


def report(args, rows, torch, threads):
    with_torch = bool(torch)
    print("\n== steps/s per program and mode (steady state; speedup = vs terra eager's, paired by round)")
    head = ["program", "mode", "steps/s", "speedup", "total_s", "traces", "fallbacks", "graphs", "final_loss",
            "check"] + (["torch_eager", "terra/torch", "torch_loss"] if with_torch else [])
    table = []
    for r in rows:
        t = [r["program"], r["mode"]]
        if not r["ok"]:
            t += ["-"] * 7 + ["FAILED"]
        else:
            s = r["stats"]
            t += [fmt("%.2f", r["steps_per_s"]), fmt("%.2fx", r["speedup"]), fmt("%.2f", r["full_s"]),
                  str(s["traces"]), str(s["fallbacks"]), str(s["graph_generations"]), "%.6g" % r["losses"][-1],
                  r["check"]]
        if with_torch:
            t += [fmt("%.2f", r["torch_eager"]), fmt("%.2fx", r.get("steps_per_s", math.nan) / r["torch_eager"]),
                  fmt("%.6g", r["torch_final_loss"]) if r["mode"] == "eager" else ""]
        table.append(t)
    print_table(head, table)
    print("geomean speedup vs terra eager:" + "".join(
        f"  {m} {fmt('%.2fx', geomean([r['speedup'] for r in rows if r['mode'] == m]))}" for m in args.mode_list))
    if with_torch:
        print("geomean terra/torch_eager:" + "".join(
            f"  {m} {fmt('%.2fx', geomean([r.get('steps_per_s', math.nan) / r['torch_eager'] for r in rows if r['mode'] == m]))}"
            for m in args.mode_list))

    co = [r for r in rows if r["mode"] == "coexec" and r["ok"]]
    if co:
        print("\n== co-execution breakdown over the whole N-step run (Terra Fig. 6): seconds and % of total_s")
        t = []
        for r in co:
            s = r["stats"]
            pct = [f"{s[k]:.2f} ({100 * s[k] / r['full_s']:.0f}%)" for k in ("host_busy_s", "host_stall_s",
                                                                             "runner_busy_s", "runner_stall_s")]
            t.append([r["program"]] + pct + [f"{r['full_s']:.2f}", str(s["traces"]), str(s["graph_generations"])])
        print_table(["program", "host_busy", "host_stall", "runner_busy", "runner_stall", "total_s", "traces",
                     "graphs"], t, 1)

    if "lazy" in args.mode_list and "coexec" in args.mode_list:
        print("\n== lazy vs co-execution (Terra Table 2): steady-state steps/s")
        t, ratios = [], []
        for name in args.names:
            lz = next((r for r in rows if r["program"] == name and r["mode"] == "lazy" and r["ok"]), None)
            c = next((r for r in rows if r["program"] == name and r["mode"] == "coexec" and r["ok"]), None)
            lv, cv = lz["steps_per_s"] if lz else math.nan, c["steps_per_s"] if c else math.nan
            ratios.append(paired_speedup(c, lz) if lz and c else math.nan)
            compiles = (f"{lz['stats']['lazy_cache_misses']}/"
                        f"{lz['stats']['lazy_cache_hits'] + lz['stats']['lazy_cache_misses']}") if lz else "-"
            t.append([name, fmt("%.2f", lv), fmt("%.2f", cv), fmt("%.2fx", ratios[-1]), compiles])
        t.append(["geomean", "", "", fmt("%.2fx", geomean(ratios)), ""])
        print_table(["program", "lazy", "coexec", "coexec/lazy", "lazy_compiles"], t, 1)


def csv_rows(args, rows, threads):
    def num(v):
        return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else repr(v)
    out = []
    for r in rows:
        s = r.get("stats", {}) if r["ok"] else {}
        te = r["torch_eager"]
        out.append(dict(
            program=r["program"], mode=r["mode"], steps_per_s=num(r.get("steps_per_s")),
            speedup_vs_eager=num(r["speedup"]), traces=s.get("traces", ""), fallbacks=s.get("fallbacks", ""),
            final_loss=num(r["losses"][-1]) if r["ok"] else "", loss_check=r["check"] if r["ok"] else "FAILED",
            first_loss=num(r["losses"][0]) if r["ok"] else "", total_s=num(r.get("full_s")) if r["ok"] else "",
            steps=args.steps, warmup=args.warmup, graph_generations=s.get("graph_generations", ""),
            host_busy_s=num(s.get("host_busy_s")), host_stall_s=num(s.get("host_stall_s")),
            runner_busy_s=num(s.get("runner_busy_s")), runner_stall_s=num(s.get("runner_stall_s")),
            lazy_cache_hits=s.get("lazy_cache_hits", ""), lazy_cache_misses=s.get("lazy_cache_misses", ""),
            threads=threads, quick=int(args.quick), repeat=args.repeat, steps_per_s_min=num(r.get("sps_min")),
            steps_per_s_max=num(r.get("sps_max")), error=r["error"].replace(",", ";").replace("\n", " "),
            torch_eager_steps_per_s=num(te), terra_over_torch_eager=num(r.get("steps_per_s", math.nan) / te),
            torch_final_loss=num(r["torch_final_loss"])))
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for n, f in _programs.features().items():
            print(f"{n:<18} {f}")
        return 0
    if args.child:
        return run_child(args)
    if args.threads > 0:
        terra.set_num_threads(args.threads)
    threads = terra.get_num_threads()
    print(f"python3 -m terra.bench: {len(args.names)} programs x {len(args.mode_list)} modes, {args.steps} steps "
          f"({args.warmup} warm-up), seed {args.seed}{', quick sizes' if args.quick else ''}, {args.repeat} "
          f"round{'' if args.repeat == 1 else 's, modes interleaved (steps/s and speedup = medians over rounds)'}")
    print(f"  python {sys.version.split()[0]} ({sys.executable}); threads: {threads} (terra.get_num_threads(), "
          f"PyTorch the same; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"{os.cpu_count()} CPUs)")
    print(f"  steps/s = steady state over the {args.steps - args.warmup} steps after warm-up: (N-W) / (wall of the "
          "N-step run - wall of\n            the W-step run), fresh Engine per run, each program x mode in its own "
          "process;\n  speedup = the median over rounds of steps/s / terra eager's steps/s in the same round;\n"
          "  total_s = wall of the whole N-step run, including model/data setup and all tracing.\n"
          "  check   = every step's loss equals eager's exactly (tolerance 0, bit-identical).", flush=True)
    t_start = time.perf_counter()
    prog = Progress(len(args.names) * len(args.mode_list) * args.repeat, args.no_progress)
    torch = {} if args.no_torch else run_torch(args, threads, prog.say)
    rows = []
    for name in args.names:
        first = len(rows)
        for rnd in range(args.repeat):
            for k, mode in enumerate(args.mode_list):
                what = f"{name} {mode}" + (f" (round {rnd + 1}/{args.repeat})" if args.repeat > 1 else "")
                prog.start(what)
                r = run_one(args, name, mode, threads)
                if rnd > 0:
                    add_round(rows[first + k], r)
                elif mode == "eager":
                    if r["ok"] and r["check"] != "DIFF":
                        r["check"] = "ref"
                else:
                    check_against(r, rows[first])
                if rnd == 0:
                    rows.append(r)
                row = rows[first + k]  # the program x mode row this round went into
                if r["ok"]:
                    line = (f"{r['steps_per_s']:.2f} steps/s (total {r['full_s']:.2f} s, {r['stats']['traces']} "
                            f"traces, {r['stats']['fallbacks']} fallbacks) {row['check']}"
                            + (f": {row['error']}" if row["check"] == "DIFF" else ""))
                else:
                    line = "FAILED: " + r["error"]
                prog.done(what, line)
        eager = rows[first]
        for r in rows[first:]:
            if eager["ok"] and r["ok"]:
                r["speedup"] = paired_speedup(r, eager)
            if name in torch:
                r["torch_eager"], r["torch_final_loss"] = torch[name]
    prog.close()
    report(args, rows, torch, threads)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            w.writeheader()
            w.writerows(csv_rows(args, rows, threads))
        print(f"\nCSV: {args.csv}")
    status = 0
    if args.plots:
        from . import _bench_plots
        status = _bench_plots.write(rows, args.mode_list, bool(torch), args.plots)
    bad = [r for r in rows if not r["ok"] or r["check"] == "DIFF"]
    if bad:
        print("\nFAILURES:")
        for r in bad:
            print(f"  {r['program']} {r['mode']}: {'loss check: ' if r['ok'] else ''}{r['error']}")
        print(f"terra.bench: {len(bad)} of {len(rows)} runs failed or differ from eager")
        return 1
    print(f"terra.bench: all {len(rows)} runs finished in {time.perf_counter() - t_start:.0f} s; every mode's "
          "losses equal eager's exactly")
    return status


if __name__ == "__main__":
    sys.exit(main())
