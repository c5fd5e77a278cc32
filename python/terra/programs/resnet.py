"""ResNet (Terra §5.1: ResNet50 on ImageNet): a small residual CNN with BatchNorm2d classifying generated
images. The plain CNN case: one path, every op in the graph. Mirrors programs/resnet.cpp."""
import math
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, loader, make_engine

FEATURE = "plain residual CNN with BatchNorm2d (running stats updated in place)"


class BasicBlock(nn.Module):
    """conv-bn-relu-conv-bn plus the shortcut (a 1x1 projection when the shape changes), then relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
            self.proj_bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        s = self.proj_bn(self.proj(x)) if self.proj is not None else x
        return F.relu(h + s)


class ResNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(width)
        self.blocks = nn.ModuleList([BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2),
                                     BasicBlock(2 * width, 2 * width, 1)])
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        h = F.relu(self.stem_bn(self.stem(x)))
        for b in self.blocks:
            h = b(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def stripe_images(rng, n, hw, classes):
    """Class k: a class-specific oriented stripe pattern plus noise and a random brightness offset."""
    ks = rng.integers(0, classes, n)
    r, q = np.meshgrid(np.arange(hw), np.arange(hw), indexing="ij")
    x = np.empty((n, 3, hw, hw), np.float32)
    for i, k in enumerate(ks):
        a = math.pi * k / classes
        shift = rng.uniform(-0.5, 0.5)
        for c in range(3):
            x[i, c] = np.sin(1.3 * (math.cos(a) * q + math.sin(a) * r) + c) + shift + rng.normal(0, 0.3, (hw, hw))
    return x, ks.astype(np.int64)


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, hw, width, classes = (8, 8, 16, 4) if quick else (16, 16, 24, 4)
    data = loader([stripe_images(rng, n, hw, classes) for _ in range(8)])
    model = ResNet(width, classes)
    opt = terra.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            x, y = next(data)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
