#!/usr/bin/python3
"""Reads the JSON results scripts/bench.sh collected in one directory and prints the summary table.

Inputs (all optional; missing ones are reported as n/a):
  dispatch_bench_t1.json, kernels_bench_t{1,2}.json, mlp_bench_t{1,2}.json   (Google Benchmark JSON)
  torch_mlp_t{1,2}.json                                                      (bench/torch_mlp.py)
Every number is the median over the repetitions of one invocation.
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def medians(gb):
    """run_name -> median aggregate row (or the single iteration row without repetitions)."""
    out = {}
    if not gb:
        return out
    for b in gb.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                out[name] = b
        elif name not in out:
            out[name] = b
    return out


def find(rows, key):
    """The row named `key` or `key/...` (Google Benchmark appends /iterations:N, /real_time, ...)."""
    key = key.rstrip("/")
    for name, r in rows.items():
        if name == key or name.startswith(key + "/"):
            return r
    return None


def get(rows, prefix, key, scale=1.0):
    r = find(rows, prefix)
    if r is None or key not in r:
        return None
    return r[key] * scale


def f(v, fmt="{:.1f}"):
    return "n/a" if v is None else fmt.format(v)


def ratio(a, b, fmt="{:.2f}x"):
    return "n/a" if a is None or b is None or b == 0 else fmt.format(a / b)


def pct(a, b):
    return "n/a" if a is None or b is None or b == 0 else "{:.0f}%".format(100.0 * a / b)


def main(d):
    disp = medians(load(os.path.join(d, "dispatch_bench_t1.json")))
    kern = {t: medians(load(os.path.join(d, f"kernels_bench_t{t}.json"))) for t in (1, 2)}
    mlp = {t: medians(load(os.path.join(d, f"mlp_bench_t{t}.json"))) for t in (1, 2)}
    mlp_ctx = {t: (load(os.path.join(d, f"mlp_bench_t{t}.json")) or {}).get("context", {}) for t in (1, 2)}
    torch = {t: load(os.path.join(d, f"torch_mlp_t{t}.json")) for t in (1, 2)}
    reps = sys.argv[2] if len(sys.argv) > 2 else "?"
    us = 1e6
    mb = 1.0 / (1 << 20)

    print("=" * 100)
    print("terra benchmark summary  (medians over repetitions; t = OMP_NUM_THREADS = terra's thread count,")
    print("torch uses torch.set_num_threads(t) with the same env)")
    print("=" * 100)

    print("\n[dispatch]  eager C++, t=1  (target: 1-element add <= 1 us)")
    t1 = torch[1] or {}
    tdisp = t1.get("dispatch", {})
    print(f"  add, 1 element                  {f(get(disp, 'BM_Add1', 's_per_op', us), '{:.3f}')} us"
          f"      torch.add from Python: {f(tdisp.get('add1_s') and tdisp['add1_s'] * us, '{:.2f}')} us")
    print(f"  add, 1 element, input needs grad {f(get(disp, 'BM_Add1Grad', 's_per_op', us), '{:.3f}')} us")
    print(f"  add_ in place, 1 element        {f(get(disp, 'BM_AddInplace1', 's_per_op', us), '{:.3f}')} us")
    print(f"  forward+backward per op (chain) {f(get(disp, 'BM_FwdBwdChain', 's_per_op', us), '{:.3f}')} us"
          f"      torch from Python: {f(tdisp.get('fwdbwd_s_per_op') and tdisp['fwdbwd_s_per_op'] * us, '{:.2f}')} us")

    print("\n[matmul]  n x n float32, GFLOP/s: terra::matmul vs dnnl_sgemm in the same binary (target >= 70%)")
    print("  n      t=1: terra   sgemm   ratio    t=2: terra   sgemm   ratio")
    for n in (256, 512, 1024):
        cells = []
        for t in (1, 2):
            a = get(kern[t], f"BM_MatmulTerra/{n}/", "FLOPS", 1e-9)
            b = get(kern[t], f"BM_MatmulSgemm/{n}/", "FLOPS", 1e-9)
            cells.append(f"{f(a):>10} {f(b):>7} {pct(a, b):>7}")
        print(f"  {n:<5}" + "   ".join(cells))

    print("\n[conv2d]  forward, float32, GFLOP/s (batch 4). dnnl-plain = same NCHW primitive terra uses;")
    print("          dnnl-any = oneDNN's preferred blocked layout, reorders not counted; %peak = terra / sgemm n=1024")
    for t in (1, 2):
        peak = get(kern[t], "BM_MatmulSgemm/1024/", "FLOPS", 1e-9)
        print(f"  t={t}  {'shape':<22} {'terra':>7} {'plain':>7} {'%':>5} {'any':>7} {'%':>5} {'%peak':>6}")
        for i in range(5):
            r = find(kern[t], f"BM_ConvTerra/{i}/")
            label = r.get("label", str(i)) if r else str(i)
            a = get(kern[t], f"BM_ConvTerra/{i}/", "FLOPS", 1e-9)
            p = get(kern[t], f"BM_ConvDnnlPlain/{i}/", "FLOPS", 1e-9)
            y = get(kern[t], f"BM_ConvDnnlAny/{i}/", "FLOPS", 1e-9)
            print(f"       {label:<22} {f(a):>7} {f(p):>7} {pct(a, p):>5} {f(y):>7} {pct(a, y):>5} {pct(a, peak):>6}")

    def mlp_row(t, mode, batch, fetch, key, scale=1.0):
        return get(mlp[t], f"BM_MlpStep/{mode}/{batch}/{fetch}/", key, scale)

    def torch_mlp(t, batch, key):
        for r in (torch[t] or {}).get("mlp", []):
            if r["batch"] == batch:
                return r.get(key)
        return None

    print("\n[mlp]  784-256-256-256-10, ReLU, cross-entropy, SGD(lr 0.01, momentum 0.9); steps/s, loss.item() every step")
    print(f"  {'t':>2} {'batch':>5} {'eager':>8} {'lazy':>8} {'coexec':>8} {'torch':>8}   {'lazy/eag':>8} {'coex/eag':>8}"
          f" {'eag/torch':>9} {'coex/torch':>10}")
    for t in (1, 2):
        for b in (16, 64):
            e, l, c = (mlp_row(t, m, b, 1, "steps_per_s") for m in (0, 1, 2))
            tt = torch_mlp(t, b, "steps_per_s")
            print(f"  {t:>2} {b:>5} {f(e):>8} {f(l):>8} {f(c):>8} {f(tt):>8}   {ratio(l, e):>8} {ratio(c, e):>8}"
                  f" {ratio(e, tt):>9} {ratio(c, tt):>10}")
    print("  same, no fetch inside the step (synchronize every 10 steps):")
    for t in (1, 2):
        for b in (16, 64):
            e, l, c = (mlp_row(t, m, b, 0, "steps_per_s") for m in (0, 1, 2))
            print(f"  {t:>2} {b:>5} {f(e):>8} {f(l):>8} {f(c):>8} {'':>8}   {ratio(l, e):>8} {ratio(c, e):>8}")

    print("\n[memory]  MiB. tensor = terra allocator peak_bytes_in_use above what was in use before setup;")
    print("          rss = peak RSS (VmHWM reset via clear_refs) minus RSS before setup (same measure for torch)")
    print(f"  {'t':>2} {'batch':>5}   {'eager tensor/rss':>17} {'lazy tensor/rss':>17} {'coexec tensor/rss':>18} {'torch rss':>10}")
    for t in (1, 2):
        for b in (16, 64):
            cells = []
            for m in (0, 1, 2):
                tb = mlp_row(t, m, b, 1, "peak_tensor_B", mb)
                rb = mlp_row(t, m, b, 1, "rss_delta_B", mb)
                cells.append(f"{f(tb):>8}/{f(rb):<8}")
            tr = torch_mlp(t, b, "rss_delta_B")
            print(f"  {t:>2} {b:>5}   {cells[0]:>17} {cells[1]:>17} {cells[2]:>18} {f(tr and tr * mb):>10}")

    print("\n[co-execution costs]  (target: skeleton <= 1 us per op)")
    for t in (1, 2):
        skel = get(mlp[t], "BM_SkeletonTiny/2/", "host_s_per_op", us)
        run = get(mlp[t], "BM_SkeletonTiny/2/", "runner_s_per_op", us)
        eag = get(mlp[t], "BM_SkeletonTiny/0/", "s_per_op", us)
        ops = get(mlp[t], "BM_SkeletonTiny/0/", "ops_per_step")
        mlp_skel = [mlp_row(t, 2, b, 0, "host_s_per_op", us) for b in (16, 64)]
        mlp_ops = mlp_row(t, 2, 64, 0, "ops_per_step")
        print(f"  t={t}: tiny chain ({f(ops, '{:.0f}')} ops/step): skeleton host {f(skel, '{:.2f}')} us/op,"
              f" runner {f(run, '{:.2f}')} us/op, eager {f(eag, '{:.2f}')} us/op")
        print(f"       MLP ({f(mlp_ops, '{:.0f}')} ops/step, no fetch): skeleton host {f(mlp_skel[0], '{:.2f}')} us/op (b16),"
              f" {f(mlp_skel[1], '{:.2f}')} us/op (b64)")
        e1 = get(mlp[t], "BM_FirstSteps/0/1/", "real_time")
        unit = (find(mlp[t], "BM_FirstSteps/0/1/") or {}).get("time_unit", "ms")
        c1 = get(mlp[t], "BM_FirstSteps/2/1/", "real_time")
        c2 = get(mlp[t], "BM_FirstSteps/2/2/", "real_time")
        c3 = get(mlp[t], "BM_FirstSteps/2/3/", "real_time")
        l1 = get(mlp[t], "BM_FirstSteps/1/1/", "real_time")
        print(f"       first steps at b64 ({unit}): eager {f(e1, '{:.2f}')}; coexec tracing step 1 {f(c1, '{:.2f}')}"
              f" ({ratio(c1, e1)} eager), step 2 {f(c2, '{:.2f}')} ({ratio(c2, e1)}), step 3 {f(c3, '{:.2f}')}"
              f" ({ratio(c3, e1)}); lazy step 1 {f(l1, '{:.2f}')} ({ratio(l1, e1)})")
        tr = [mlp_row(t, 2, b, fe, "timed_traces") for b in (16, 64) for fe in (0, 1)]
        fb = [mlp_row(t, 2, b, fe, "timed_fallbacks") for b in (16, 64) for fe in (0, 1)]
        if any(v for v in tr + fb if v):
            print(f"       WARNING: co-execution traced/fell back during timed steps: traces {tr} fallbacks {fb}")

    print("\n[checks]  lazy / co-execution losses vs eager (12 steps, mlp_bench start-up)")
    for t in (1, 2):
        c = mlp_ctx[t]
        items = [f"{k}: {v}" for k, v in sorted(c.items()) if k.startswith("check_")]
        print(f"  t={t}: " + ("; ".join(items) if items else "n/a"))
    bad = sorted({k for t in (1, 2) for k, v in mlp_ctx[t].items()
                  if k.startswith("check_") and not str(v).startswith("ok")})
    if bad:
        print(f"  WARNING: {', '.join(bad)} failed: those modes' steps/s are NOT valid measurements of a correct")
        print("           run (see tests/runtime/repro_bench_twolayer_test.cpp)")
    for t in (1, 2):
        if torch[t]:
            bl = torch[t].get("blas", {})
            print(f"  torch {torch[t].get('torch')} threads={torch[t].get('threads')}, memory method "
                  f"{(torch[t].get('mlp') or [{}])[0].get('rss_method')}; BLAS {bl.get('blas_libs')} "
                  f"torch.mm n=512 {f(bl.get('mm512_gflops'))} GFLOP/s")
            if bl.get("mm512_gflops") is not None and bl["mm512_gflops"] < 20:
                print("           (reference netlib BLAS: torch's Linear is far below normal; terra/torch ratios for"
                      " the MLP overstate terra)")
    print(f"  repetitions per benchmark: {reps}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/bench-results")
