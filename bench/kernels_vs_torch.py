"""Single kernels, terra vs PyTorch 1.13 (Debian's python3-torch, a benchmark oracle only), one
thread each, 64x256 float32 unless named: microseconds per call from Python, same process.

  PYTHONPATH=build/python /usr/bin/python3 bench/kernels_vs_torch.py
"""
import time

import torch
import torch.nn.functional as PF

import terra
import terra.nn.functional as TF


def per_call_us(f, n=3000):
    for _ in range(50):
        f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


def main():
    torch.set_num_threads(1)
    terra.set_num_threads(1)
    xt, yt = torch.randn(64, 256), torch.rand(64, 256) + 0.5
    wt, bt = torch.randn(256), torch.randn(256)
    xa, ya, wa, ba = (terra.tensor(t.numpy()) for t in (xt, yt, wt, bt))
    cases = [
        ("tanh", lambda: torch.tanh(xt), lambda: terra.tanh(xa)),
        ("sigmoid", lambda: torch.sigmoid(xt), lambda: terra.sigmoid(xa)),
        ("exp", lambda: torch.exp(xt), lambda: terra.exp(xa)),
        ("log", lambda: torch.log(yt), lambda: terra.log(ya)),
        ("sqrt", lambda: torch.sqrt(yt), lambda: terra.sqrt(ya)),
        ("gelu", lambda: PF.gelu(xt), lambda: TF.gelu(xa)),
        ("relu", lambda: torch.relu(xt), lambda: terra.relu(xa)),
        ("add", lambda: xt + yt, lambda: xa + ya),
        ("add bias (row broadcast)", lambda: xt + bt, lambda: xa + ba),
        ("sum over dim 0", lambda: xt.sum(0), lambda: xa.sum(0)),
        ("sum over dim 1", lambda: xt.sum(1), lambda: xa.sum(1)),
        ("sum of all", lambda: xt.sum(), lambda: xa.sum()),
        ("softmax (dim 1)", lambda: torch.softmax(xt, 1), lambda: terra.softmax(xa, 1)),
        ("log_softmax (dim 1)", lambda: torch.log_softmax(xt, 1), lambda: terra.log_softmax(xa, 1)),
        ("layer_norm", lambda: PF.layer_norm(xt, (256,), wt, bt), lambda: TF.layer_norm(xa, [256], wa, ba)),
        ("transpose + contiguous", lambda: xt.t().contiguous(), lambda: xa.t().contiguous()),
    ]
    print("%-26s %10s %10s %12s" % ("kernel", "torch us", "terra us", "terra/torch"))
    for name, ft, fa in cases:
        a, b = per_call_us(ft), per_call_us(fa)
        print("%-26s %10.2f %10.2f %11.2fx" % (name, a, b, b / a))


if __name__ == "__main__":
    main()
