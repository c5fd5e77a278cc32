"""SDPoint (Terra §5.1: stochastic downsampling on a ResNet): every step the host draws a random
downsampling point (a block, or none) with Python's `random` seeded from the run's seed and writes the
downsampling ratio onto the block objects (SDResNet.stochastic_downsampling); the chosen block shrinks
its input before running. Several paths through one network, chosen on the host. Mirrors
programs/sdpoint.cpp."""
import random
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, loader, make_engine

FEATURE = "per-step random downsampling point drawn with Python's random: several paths"


class ConvBlock(nn.Module):
    def __init__(self, block_id, cin, cout, stride):
        super().__init__()
        self.block_id, self.downsampling_ratio = block_id, 1.0
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj, self.proj_bn = nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout)

    def forward(self, x):
        if self.downsampling_ratio < 1.0:  # the stochastic downsampling point
            h = max(1, int(x.shape[2] * self.downsampling_ratio))
            w = max(1, int(x.shape[3] * self.downsampling_ratio))
            x = F.adaptive_avg_pool2d(x, (h, w))
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.proj_bn(self.proj(x)) if self.proj is not None else x))


class SDResNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.blocks = nn.ModuleList([ConvBlock(0, width, width, 1), ConvBlock(1, width, 2 * width, 2),
                                     ConvBlock(2, 2 * width, 2 * width, 1)])
        self.fc = nn.Linear(2 * width, classes)

    def stochastic_downsampling(self, block_id, ratio):
        """As the original: walk the layers and set each block's ratio (object mutation)."""
        for b in self.blocks:
            b.downsampling_ratio = ratio if b.block_id == block_id else 1.0

    def forward(self, x):
        h = F.relu(self.bn(self.stem(x)))
        for b in self.blocks:
            h = b(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def wave_batch(rng, n, s):
    """Class k: diagonal or straight stripes of one of two frequencies."""
    ks = rng.integers(0, 4, n)
    r, q = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    x = np.empty((n, 3, s, s), np.float32)
    for i, k in enumerate(ks):
        freq, phase = (1.6 if k % 2 else 0.7), rng.uniform(0, 6.28)
        t = (r + q) if k // 2 else r
        x[i] = np.sin(freq * t + phase)[None] + rng.normal(0, 0.3, (3, s, s))
    return x, ks.astype(np.int64)


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    choice = random.Random(seed)  # the per-step downsampling point
    n, s, width = (8, 8, 16) if quick else (16, 16, 24)
    data = loader([wave_batch(rng, n, s) for _ in range(8)])
    model = SDResNet(width, 4)
    opt = terra.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    num_points = len(model.blocks) + 1  # one per block, and "no downsampling"
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            model.stochastic_downsampling(choice.randint(0, num_points - 1), 0.5)
            x, y = next(data)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
