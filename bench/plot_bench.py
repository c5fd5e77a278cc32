#!/usr/bin/python3
"""Charts for terra-bench's CSV (called by `terra-bench --plots DIR`, or by hand):

    /usr/bin/python3 bench/plot_bench.py RESULTS.csv OUTDIR

Writes OUTDIR/speedup.png (steady-state steps/s relative to terra eager, per program and mode, plus
PyTorch eager / torch.jit.trace when the CSV has the --torch columns) and OUTDIR/breakdown.png (the
co-execution runs' host busy/stall and runner busy/stall as % of the run's wall time, Terra Fig. 6).
Uses matplotlib when it is installed (Debian: python3-matplotlib); otherwise draws the same bars
with a minimal built-in PNG writer (zlib), without text -- the legend is then printed here.
"""
import csv
import math
import os
import struct
import sys
import zlib

MODE_ORDER = ["eager", "lazy", "coexec"]
COLORS = {"eager": (0x9e, 0x9e, 0x9e), "lazy": (0x42, 0x85, 0xf4), "coexec": (0xe6, 0x55, 0x1e),
          "torch_eager": (0x34, 0xa8, 0x53), "torch_jit": (0x8e, 0x44, 0xad),
          "host_busy": (0x1f, 0x77, 0xb4), "host_stall": (0xae, 0xc7, 0xe8),
          "runner_busy": (0xd6, 0x27, 0x28), "runner_stall": (0xff, 0x98, 0x96)}


def fnum(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    programs = []
    for r in rows:
        if r["program"] not in programs:
            programs.append(r["program"])
    modes = [m for m in MODE_ORDER if any(r["mode"] == m for r in rows)]
    sp = {}  # (program, series) -> speedup vs terra eager
    for r in rows:
        sp[(r["program"], r["mode"])] = fnum(r.get("speedup_vs_eager"))
    series = list(modes)
    if "torch_eager_steps_per_s" in rows[0]:
        for fw in ("torch_eager", "torch_jit"):
            any_val = False
            for r in rows:
                if r["mode"] != "eager":
                    continue
                t, e = fnum(r.get(fw + "_steps_per_s")), fnum(r.get("steps_per_s"))
                sp[(r["program"], fw)] = t / e if t and e else None
                any_val = any_val or sp[(r["program"], fw)] is not None
            if any_val:
                series.append(fw)
    breakdown = []
    for r in rows:
        if r["mode"] != "coexec" or fnum(r.get("total_s")) is None:
            continue
        tot = fnum(r["total_s"])
        breakdown.append((r["program"], {k: 100.0 * (fnum(r.get(k + "_s")) or 0.0) / tot
                                         for k in ("host_busy", "host_stall", "runner_busy", "runner_stall")}))
    return programs, series, sp, breakdown


# ---------------------------------------------------------------- matplotlib

def plot_mpl(programs, series, sp, breakdown, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hexc = {k: "#%02x%02x%02x" % v for k, v in COLORS.items()}
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(programs) + 2), 4.5))
    w = 0.8 / max(1, len(series))
    for j, s in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * w for i in range(len(programs))]
        ys = [sp.get((p, s)) or 0.0 for p in programs]
        bars = ax.bar(xs, ys, w, label=s, color=hexc.get(s))
        for b, y in zip(bars, ys):
            if y:
                ax.text(b.get_x() + b.get_width() / 2, y, f"{y:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylim(0, max([v for v in sp.values() if v] + [1.0]) * 1.3)  # room for the legend
    ax.set_xticks(range(len(programs)))
    ax.set_xticklabels(programs, rotation=30, ha="right")
    ax.set_ylabel("steps/s relative to terra eager")
    ax.set_title("terra-bench: steady-state throughput per program (higher is better)")
    ax.legend(fontsize=8, ncol=len(series))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speedup.png"), dpi=120)
    plt.close(fig)

    if breakdown:
        fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(breakdown) + 2), 4.5))
        w = 0.38
        for i, (p, d) in enumerate(breakdown):
            for x, keys in ((i - w / 2 - 0.01, ("host_busy", "host_stall")), (i + w / 2 + 0.01, ("runner_busy", "runner_stall"))):
                bottom = 0.0
                for k in keys:
                    ax.bar(x, d[k], w, bottom=bottom, color=hexc[k], label=k if i == 0 else None)
                    bottom += d[k]
        ax.set_xticks(range(len(breakdown)))
        ax.set_xticklabels([p for p, _ in breakdown], rotation=30, ha="right")
        ax.set_ylim(0, 125)
        ax.set_ylabel("% of the co-execution run's wall time")
        ax.set_title("co-execution: host (left) and GraphRunner (right) busy / stall (Terra Fig. 6)")
        ax.legend(fontsize=8, ncol=4)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "breakdown.png"), dpi=120)
        plt.close(fig)


# ---------------------------------------------------------------- fallback: bars only, raw PNG

class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def rect(self, x0, y0, x1, y1, c):
        x0, x1 = max(0, int(min(x0, x1))), min(self.w, int(max(x0, x1)))
        y0, y1 = max(0, int(min(y0, y1))), min(self.h, int(max(y0, y1)))
        row = bytes(c) * (x1 - x0)
        for y in range(y0, y1):
            o = (y * self.w + x0) * 3
            self.px[o:o + len(row)] = row

    def save(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(t, d):
            return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot_raw(programs, series, sp, breakdown, out):
    W, H, M = 1000, 420, 30
    c = Canvas(W, H)
    vals = [v for v in sp.values() if v]
    top = max(vals + [1.0]) * 1.1
    group = (W - 2 * M) / max(1, len(programs))
    bw = group * 0.8 / max(1, len(series))
    y = lambda v: H - M - (H - 2 * M) * v / top
    for i, p in enumerate(programs):
        for j, s in enumerate(series):
            v = sp.get((p, s)) or 0.0
            x0 = M + i * group + group * 0.1 + j * bw
            c.rect(x0, y(v), x0 + bw - 1, y(0), COLORS.get(s, (0, 0, 0)))
    c.rect(M, y(1.0), W - M, y(1.0) + 1, (0, 0, 0))  # speedup 1
    c.rect(M, y(0), W - M, y(0) + 1, (0, 0, 0))
    c.save(os.path.join(out, "speedup.png"))
    print(f"plot_bench: matplotlib missing; bars without text. speedup.png: groups = {programs}, "
          f"bars per group = {series}, black line = 1.0, top = {top:.2f}")
    if breakdown:
        c = Canvas(W, H)
        group = (W - 2 * M) / len(breakdown)
        y = lambda v: H - M - (H - 2 * M) * v / 110.0
        for i, (p, d) in enumerate(breakdown):
            for k2, keys in enumerate((("host_busy", "host_stall"), ("runner_busy", "runner_stall"))):
                x0, bottom = M + i * group + group * 0.1 + k2 * group * 0.4, 0.0
                for k in keys:
                    c.rect(x0, y(bottom + d[k]), x0 + group * 0.38, y(bottom), COLORS[k])
                    bottom += d[k]
        c.rect(M, y(100), W - M, y(100) + 1, (0, 0, 0))
        c.save(os.path.join(out, "breakdown.png"))
        print(f"plot_bench: breakdown.png: groups = {[p for p, _ in breakdown]}, left bar host busy (dark blue) + "
              "stall (light blue), right bar runner busy (red) + stall (pink), black line = 100%")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_bench.py RESULTS.csv OUTDIR")
    programs, series, sp, breakdown = load(sys.argv[1])
    os.makedirs(sys.argv[2], exist_ok=True)
    try:
        import matplotlib  # noqa: F401
        have_mpl = True
    except ImportError:
        have_mpl = False
    if have_mpl and not os.environ.get("TERRA_PLOT_NO_MPL"):
        plot_mpl(programs, series, sp, breakdown, sys.argv[2])
    else:
        plot_raw(programs, series, sp, breakdown, sys.argv[2])
    names = ["speedup.png"] + (["breakdown.png"] if breakdown else [])
    print("plots: " + ", ".join(os.path.join(sys.argv[2], n) for n in names))


if __name__ == "__main__":
    main()
