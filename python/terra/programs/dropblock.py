"""DropBlock (Terra §5.1: tf-dropblock on a ResNet): a DropBlock2D layer whose keep probability is
mutated on the layer object mid-training by a linear schedule (set_keep_prob every few steps, as the
original). keep_prob becomes a constant in the Bernoulli draw, so each schedule value is a different
op, and keep_prob == 1 skips the layer: several traces from one object mutation. Mirrors
programs/dropblock.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, loader, make_engine

FEATURE = "layer object's keep_prob mutated by a schedule: changes the Bernoulli draw's constant"


class DropBlock2D(nn.Module):
    def __init__(self, block_size, keep_prob):
        super().__init__()
        self.block_size, self.keep_prob = block_size, keep_prob

    def set_keep_prob(self, keep_prob=None):
        """As the original: the schedule writes the new value onto the layer object."""
        if keep_prob is not None:
            self.keep_prob = keep_prob

    def forward(self, x):
        if not self.training or self.keep_prob >= 1.0:
            return x
        h, w, bs = x.shape[2], x.shape[3], self.block_size
        # Seed rate so that about (1 - keep_prob) of the units end up dropped.
        gamma = (1.0 - self.keep_prob) / (bs * bs) * (h * w) / ((h - bs + 1) * (w - bs + 1))
        seeds = terra.bernoulli(terra.full(x.shape, gamma))
        block = F.max_pool2d(seeds, bs, 1, bs // 2)  # grows each seed into a bs x bs block
        keep = 1.0 - block
        return x * keep * (keep.numel() / (keep.sum() + 1e-6))

    def extra_repr(self):
        return f"block_size={self.block_size}, keep_prob={self.keep_prob}"


class Net(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.c1, self.bn1 = nn.Conv2d(width, 2 * width, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * width)
        self.c2, self.bn2 = nn.Conv2d(2 * width, 2 * width, 3, 1, 1, bias=False), nn.BatchNorm2d(2 * width)
        self.drop1, self.drop2 = DropBlock2D(3, 1.0), DropBlock2D(3, 1.0)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        h = F.relu(self.bn0(self.stem(x)))
        h = self.drop1(F.relu(self.bn1(self.c1(h))))
        h = self.drop2(F.relu(self.bn2(self.c2(h)) + h))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def quadrant_batch(rng, n, s):
    """Class k: a bright blob in quadrant k on a noisy background."""
    ks = rng.integers(0, 4, n)
    x = rng.normal(0, 0.3, (n, 3, s, s)).astype(np.float32)
    for i, k in enumerate(ks):
        r0 = (k // 2) * s // 2 + int(rng.integers(0, s // 8 + 1))
        c0 = (k % 2) * s // 2 + int(rng.integers(0, s // 8 + 1))
        x[i, :, r0:r0 + 3 * s // 8, c0:c0 + 3 * s // 8] += 1.5
    return x, ks.astype(np.int64)


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, s, width = (8, 8, 16) if quick else (16, 16, 32)
    data = loader([quadrant_batch(rng, n, s) for _ in range(8)])
    model = Net(width, 4)
    opt = terra.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    log = LossLog(on_step)
    update_every = 3
    for it in range(steps):
        with engine.step():
            # Linear keep-probability schedule 1.0 -> 0.85, written onto the layer objects mid-step.
            if it % update_every == 0:
                kp = max(0.85, 1.0 - 0.05 * (it // update_every))
                model.drop1.set_keep_prob(kp)
                model.drop2.set_keep_prob(kp)
            x, y = next(data)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
