"""Single kernels, terra vs PyTorch 1.13 (Debian's python3-torch, a benchmark oracle only), one
thread each, 64x256 float32 unless named: microseconds per call from Python, same process.
Conv rows: float32 conv2d forward, and forward + backward (input and weight gradients) on shapes
of terra's programs (N x C x HxW -> O, kernel k, stride s).

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


def conv_cases(name, n, c, hw, o, k, st, pd):
    xt, wt = torch.randn(n, c, hw, hw), torch.randn(o, c, k, k) * 0.1
    gt = torch.randn(PF.conv2d(xt, wt, None, st, pd).shape)
    xr, wr = xt.clone().requires_grad_(), wt.clone().requires_grad_()
    xa, wa, ga = (terra.tensor(t.numpy()) for t in (xt, wt, gt))
    xar, war = terra.tensor(xt.numpy()), terra.tensor(wt.numpy())
    xar.requires_grad_(True)
    war.requires_grad_(True)
    return [("conv " + name, lambda: PF.conv2d(xt, wt, None, st, pd), lambda: TF.conv2d(xa, wa, None, st, pd)),
            ("conv fwd+bwd " + name, lambda: PF.conv2d(xr, wr, None, st, pd).backward(gt),
             lambda: TF.conv2d(xar, war, None, st, pd).backward(ga))]


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
    # (name, N, C, HW, O, k, stride, pad) from programs/resnet.cpp, yolov3.cpp, dcgan.cpp (its
    # discriminator's second conv, whose shape the generator's transposed conv shares), full size
    # (not --quick) where named so.
    convs = [("resnet 16->16 8x8", 8, 16, 8, 16, 3, 1, 1), ("resnet stem 3->16", 8, 3, 8, 16, 3, 1, 1),
             ("yolo 16->32 s2 16x16", 8, 16, 16, 32, 3, 2, 1), ("dcgan 16->32 k4 s2", 16, 16, 4, 32, 4, 2, 1),
             ("full resnet 24->24 16x16", 16, 24, 16, 24, 3, 1, 1), ("resnet proj 1x1 s2", 8, 16, 8, 32, 1, 2, 0)]
    for c in convs:
        cases += conv_cases(*c)
    print("%-36s %10s %10s %12s" % ("kernel", "torch us", "terra us", "terra/torch"))
    for name, ft, fa in cases:
        n = 3000 if not name.startswith("conv") else 300
        a, b = per_call_us(ft, n), per_call_us(fa, n)
        print("%-36s %10.2f %10.2f %11.2fx" % (name, a, b, b / a))


if __name__ == "__main__":
    main()
