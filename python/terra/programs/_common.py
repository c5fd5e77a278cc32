"""Shared pieces of the ten Python programs: the run() skeleton every program follows (engine from a
mode name, per-step loss log, stats), the transformer block the BERT/GPT-style programs share, and the
data loader generator. Only host code and layers live here; each program's training step stays in its
own file, written the way a PyTorch user writes it."""
import time
from typing import List, NamedTuple

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F


class Result(NamedTuple):
    """What run() returns: per-step losses (Python floats, fetched from terra) and engine.stats()."""
    losses: List[float]
    stats: dict
    wall_s: float  # run() entry (Engine construction) to synchronize(), setup included
    extra: dict    # program-specific host results (e.g. bert_cls's F1 history)


def make_engine(mode):
    """A terra.Engine for a mode name ("eager", "lazy", "coexec"), or the Engine given."""
    return mode if isinstance(mode, terra.Engine) else terra.Engine(mode)


class LossLog:
    """Keeps each step's loss as a detached tensor and fetches them all at the end, so the host runs
    ahead of the graph (a fetch every step would make co-execution wait on the runner every step).
    on_step(step, value) fetches right away instead, for progress display."""

    def __init__(self, on_step=None):
        self.on_step = on_step
        self.pending = []  # detached tensors, or floats already fetched

    def record(self, step, loss):
        if self.on_step is not None:
            v = loss.item()
            self.pending.append(v)
            self.on_step(step, v)
        else:
            self.pending.append(loss.detach())  # detached: the step's autograd graph is not kept alive

    def record_value(self, step, value):
        """For programs that read the loss on the host themselves."""
        self.pending.append(float(value))
        if self.on_step is not None:
            self.on_step(step, float(value))

    def values(self):
        return [v if isinstance(v, float) else v.item() for v in self.pending]


def finish(engine, log, t0, **extra):
    """Fetches the losses, waits for queued work, returns the Result."""
    losses = log.values()
    engine.synchronize()
    return Result(losses, engine.stats(), time.perf_counter() - t0, extra)


def loader(batches):
    """The training data as a Python generator (a DataLoader stand-in): cycles through pre-generated
    numpy batches forever and hands out terra tensors, converted when the step asks for them."""
    i = 0
    while True:
        yield tuple(terra.from_numpy(a) if isinstance(a, np.ndarray) else a for a in batches[i % len(batches)])
        i += 1


class TransformerBlock(nn.Module):
    """programs/common.h TransformerBlock: self-attention and a GELU MLP with residuals and LayerNorm;
    post-norm (BERT) or pre-norm (GPT-2, MusicTransformer)."""

    def __init__(self, d, heads, ff, pre_norm):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.pre_norm = pre_norm

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.pre_norm:
            h = self.ln1(x)
            y = x + self.attn(h, h, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
            return y + self.fc2(F.gelu(self.fc1(self.ln2(y))))
        y = self.ln1(x + self.attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask))
        return self.ln2(y + self.fc2(F.gelu(self.fc1(y))))


def scale_embeddings(scale, *embeddings):
    """BERT/GPT-style small initial embeddings: weight *= scale, outside autograd."""
    with terra.no_grad():
        for e in embeddings:
            e.weight.mul_(scale)
