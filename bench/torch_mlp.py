#!/usr/bin/python3
"""PyTorch eager reference for bench/mlp_bench.cpp and bench/dispatch_bench.cpp (oracle only).

The same step as terra's BM_MlpStep: MLP 784-256-256-256-10, ReLU, cross-entropy, SGD lr 0.01
momentum 0.9, 8 pre-generated batches cycled, loss.item() every step, batch 16 and 64.
Threads: torch.set_num_threads(--threads); run it with OMP_NUM_THREADS set to the same value and
OMP_WAIT_POLICY=PASSIVE (scripts/bench.sh does).

Memory (CPU torch has no allocator statistics): rss_delta_B = peak RSS (VmHWM, reset through
/proc/self/clear_refs after gc + malloc_trim) during setup + warm-up + timed steps minus RSS before
setup -- the same measure as terra's rss_delta_B. Falls back to resource.getrusage ru_maxrss
deltas if clear_refs is not writable (then it only shows growth beyond the earlier peak).

Also reports which BLAS torch loaded and torch.mm's GFLOP/s at n=512: Debian's torch runs Linear on
the system libblas.so.3, which is the slow netlib reference BLAS unless OpenBLAS is installed.

Also measures torch.add on 1-element tensors and a forward+backward chain per op, from Python
(Python interpreter cost included, unlike terra's C++ numbers).

Prints one JSON object on stdout.
"""
import argparse
import ctypes
import gc
import json
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

IN, HIDDEN, CLASSES, NBATCH = 784, 256, 10, 8


def status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return -1


_libc = ctypes.CDLL("libc.so.6")


def reset_rss_peak():
    gc.collect()
    _libc.malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status_kb("VmRSS:") * 1024, True
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, False


def rss_peak(clear_refs_ok):
    if clear_refs_ok:
        return status_kb("VmHWM:") * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_model():
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def train_step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def mlp(batch, chunk, reps, warm):
    rss0, ok = reset_rss_peak()
    torch.manual_seed(1)
    xs = [torch.randn(batch, IN) for _ in range(NBATCH)]
    ys = [torch.randint(0, CLASSES, (batch,)) for _ in range(NBATCH)]
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    i = 0
    for _ in range(warm):
        train_step(model, opt, xs[i % NBATCH], ys[i % NBATCH])
        i += 1
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(chunk):
            train_step(model, opt, xs[i % NBATCH], ys[i % NBATCH])
            i += 1
        rates.append(chunk / (time.perf_counter() - t0))
    peak = rss_peak(ok)
    tensor_bytes = sum(p.numel() * 4 for p in model.parameters()) * 3  # params + grads + momentum
    tensor_bytes += sum(t.numel() * t.element_size() for t in xs + ys)
    return {"batch": batch, "steps_per_s": statistics.median(rates), "steps_per_s_all": rates,
            "rss_delta_B": peak - rss0, "rss_peak_B": peak, "rss_method": "VmHWM/clear_refs" if ok else "ru_maxrss",
            "persistent_tensor_B": tensor_bytes}


def blas_info(reps):
    """Which BLAS torch loaded (Debian's torch calls the system libblas.so.3 for Linear) and its speed."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in path or "mkl" in path:
                libs.add(os.path.realpath(path))
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    torch.mm(a, b)
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * 512 ** 3 / (time.perf_counter() - t0) / 1e9)
    return {"blas_libs": sorted(libs), "mm512_gflops": statistics.median(rates)}


def dispatch(reps):
    a, b = torch.ones(1), torch.ones(1)
    out = {}
    n = 20000
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(a, b)
        best.append((time.perf_counter() - t0) / n)
    out["add1_s"] = statistics.median(best)
    x = torch.full((1,), 0.5, requires_grad=True)
    c = torch.full((1,), 1.0001)
    chain, iters, per = 64, 300, []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            h = x
            for j in range(chain):
                h = h * c if j % 2 else h + c
            h.backward()
            x.grad = None
        per.append((time.perf_counter() - t0) / (iters * chain))
    out["fwdbwd_s_per_op"] = statistics.median(per)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batches", default="16,64")
    ap.add_argument("--no-dispatch", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    # Prime: one throwaway step per batch size so one-time costs (thread pools, oneDNN/MKL) are
    # not charged to the first measured configuration.
    for b in (int(s) for s in args.batches.split(",")):
        m = make_model()
        train_step(m, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), torch.randn(b, IN),
                   torch.randint(0, CLASSES, (b,)))
    res = {"torch": torch.__version__, "threads": torch.get_num_threads(), "mlp": []}
    for b in (int(s) for s in args.batches.split(",")):
        chunk = 80 if b == 16 else 40
        res["mlp"].append(mlp(b, chunk, args.reps, warm=10))
    res["blas"] = blas_info(args.reps)
    if not args.no_dispatch:
        res["dispatch"] = dispatch(args.reps)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
