"""PNG charts for python3 -m terra.bench --plots DIR (matplotlib, Debian python3-matplotlib; imported only
here, only when plots are asked for): speedup.png, steady-state steps/s relative to terra eager per
program and mode (plus PyTorch eager), and breakdown.png, the co-execution runs' host busy/stall and
runner busy/stall as % of the run's wall time (Terra Fig. 6). The same two charts bench/plot_bench.py
draws for the C++ terra-bench."""
import math
import os
import sys

COLORS = {"eager": "#9e9e9e", "lazy": "#4285f4", "coexec": "#e6551e", "torch_eager": "#34a853",
          "host_busy_s": "#1f77b4", "host_stall_s": "#aec7e8", "runner_busy_s": "#d62728",
          "runner_stall_s": "#ff9896"}


def _finite(v):
    return isinstance(v, float) and math.isfinite(v)


def write(rows, modes, with_torch, out_dir):
    """Returns 0, or 1 (with a note on stderr) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("terra.bench: matplotlib not importable (Debian: apt-get install python3-matplotlib); no plots",
              file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    programs = list(dict.fromkeys(r["program"] for r in rows))
    series = list(modes) + (["torch_eager"] if with_torch else [])

    def value(p, s):
        if s == "torch_eager":
            e = next((r for r in rows if r["program"] == p and r["mode"] == "eager" and r["ok"]), None)
            return e["torch_eager"] / e["steps_per_s"] if e and _finite(e["torch_eager"]) else math.nan
        r = next((r for r in rows if r["program"] == p and r["mode"] == s and r["ok"]), None)
        return r["speedup"] if r else math.nan

    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(programs)), 4.5))
    width = 0.8 / len(series)
    top = 1.0
    for i, s in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * width for k in range(len(programs))]
        vals = [v if _finite(v) else 0 for v in (value(p, s) for p in programs)]
        top = max([top] + vals)
        ax.bar(xs, vals, width, label=s.replace("_", " "), color=COLORS.get(s))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylim(0, top * 1.25)  # room for the legend above the bars
    ax.set_xticks(range(len(programs)))
    ax.set_xticklabels(programs, rotation=30, ha="right")
    ax.set_ylabel("steps/s relative to terra eager")
    ax.set_title("Python programs: steady-state speed per mode (higher is better)")
    ax.legend(ncol=len(series), loc="upper left")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "speedup.png"), dpi=110)
    plt.close(fig)

    co = [r for r in rows if r["mode"] == "coexec" and r["ok"]]
    if co:
        fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(co)), 4.5))
        keys = ["host_busy_s", "host_stall_s", "runner_busy_s", "runner_stall_s"]
        width = 0.8 / len(keys)
        for i, k in enumerate(keys):
            xs = [j + (i - 1.5) * width for j in range(len(co))]
            ax.bar(xs, [100 * r["stats"][k] / r["full_s"] for r in co], width, label=k[:-2].replace("_", " "),
                   color=COLORS[k])
        ax.set_xticks(range(len(co)))
        ax.set_xticklabels([r["program"] for r in co], rotation=30, ha="right")
        ax.set_ylabel("% of the N-step run's wall time")
        ax.set_title("Python co-execution: host and runner busy / stall (Terra Fig. 6)")
        ax.set_ylim(0, 125)
        ax.legend(ncol=len(keys), loc="upper left")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "breakdown.png"), dpi=110)
        plt.close(fig)
    print(f"plots: {os.path.join(out_dir, 'speedup.png')}" + (f", {os.path.join(out_dir, 'breakdown.png')}"
                                                              if co else ""))
    return 0
