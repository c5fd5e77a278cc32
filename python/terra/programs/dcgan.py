"""DCGAN (Terra §5.1: DCGAN on MNIST): a ConvTranspose2d generator and a conv discriminator with two
optimizers; each engine step runs a discriminator update and then a generator update. The noise comes
from a generator used as a coroutine (the batch size is sent in, a noise tensor comes out). Generated
"digits": strokes (bars, crosses, boxes) in [-1, 1]. The reported loss is the discriminator's.
Mirrors programs/dcgan.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, loader, make_engine

FEATURE = "GAN: ConvTranspose2d generator, two optimizers, D then G update in one step; noise from a coroutine"

NOISE = 16


class Generator(nn.Module):
    def __init__(self, base, ch):
        """base: the first feature map's side (image side = 4 * base); ch: its channels."""
        super().__init__()
        self.base, self.ch = base, ch
        self.fc, self.bn0 = nn.Linear(NOISE, ch * base * base), nn.BatchNorm2d(ch)
        self.up1, self.bn1 = nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2)
        self.up2 = nn.ConvTranspose2d(ch // 2, 1, 4, 2, 1)

    def forward(self, z):
        h = F.relu(self.bn0(self.fc(z).reshape(z.shape[0], self.ch, self.base, self.base)))
        h = F.relu(self.bn1(self.up1(h)))
        return terra.tanh(self.up2(h))


class Discriminator(nn.Module):
    def __init__(self, side, ch):
        super().__init__()
        self.c1 = nn.Conv2d(1, ch // 2, 4, 2, 1)
        self.c2, self.bn2 = nn.Conv2d(ch // 2, ch, 4, 2, 1, bias=False), nn.BatchNorm2d(ch)
        self.fc = nn.Linear(ch * (side // 4) ** 2, 1)

    def forward(self, x):
        h = F.leaky_relu(self.c1(x), 0.2)
        h = F.leaky_relu(self.bn2(self.c2(h)), 0.2)
        return self.fc(h.flatten(1))


def strokes(rng, n, s):
    x = np.full((n, 1, s, s), -1.0, np.float32)
    for i in range(n):
        kind, a, b = int(rng.integers(0, 3)), int(rng.integers(1, s - 1)), int(rng.integers(1, s - 1))
        if kind == 0:  # bar
            x[i, 0, a:a + 2, :] = 1.0
        elif kind == 1:  # cross
            x[i, 0, a, :] = 1.0
            x[i, 0, :, b] = 1.0
        else:  # box
            x[i, 0, 1, 1:s - 1] = x[i, 0, s - 2, 1:s - 1] = 1.0
            x[i, 0, 1:s - 1, 1] = x[i, 0, 1:s - 1, s - 2] = 1.0
    return (x,)


def noise_source():
    """A coroutine: send a batch size, receive a [size, NOISE] standard normal batch."""
    z = None
    while True:
        size = yield z
        z = terra.randn(size, NOISE)


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, side, ch = (16, 8, 32) if quick else (16, 16, 64)
    data = loader([strokes(rng, n, side) for _ in range(8)])
    gen, disc = Generator(side // 4, ch), Discriminator(side, ch)
    opt_g = terra.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = terra.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.5, 0.999))
    noise = noise_source()
    next(noise)  # prime the coroutine
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            (real,) = next(data)
            fake = gen(noise.send(n))
            ones, zeros = terra.ones(n, 1), terra.zeros(n, 1)
            # Discriminator: real -> 1, fake (detached from the generator) -> 0.
            d_loss = (F.binary_cross_entropy_with_logits(disc(real), ones) +
                      F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros))
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            # Generator: make the (just updated) discriminator say 1.
            g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
            log.record(it, d_loss)
    return finish(engine, log, t0)
