"""MusicTransformer (Terra §5.1: Music Transformer on e-Piano MIDI): a decoder-only transformer over note
events, written in the trainer-object style of the original. train_step stores the per-token loss on
the object (self.loss_value = ...) inside the step; train_on_batch reads it after the step has ended
and reduces it there, outside any step (tf.reduce_mean(self.loss_value)). Mirrors
programs/music_transformer.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, TransformerBlock, finish, make_engine, scale_embeddings

FEATURE = "trainer object stores the loss inside the step; it is reduced and read after the step"

PITCHES = 48


class MusicTransformerDecoder(nn.Module):
    def __init__(self, seq, d, heads, layers):
        super().__init__()
        self.emb, self.pos = nn.Embedding(PITCHES, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 2 * d, pre_norm=True) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, PITCHES)
        scale_embeddings(0.05, self.emb, self.pos)
        self.opt = terra.optim.Adam(self.parameters(), lr=3e-3)
        self.loss_value = None

    def call(self, inp, lookup_mask):
        h = self.emb(inp) + self.pos(terra.arange(inp.shape[1]))
        for b in self.blocks:
            h = b(h, lookup_mask)
        return self.head(self.ln_f(h))

    def train_step(self, inp_tar, out_tar, lookup_mask):
        """One training step; the per-token loss stays on the object."""
        predictions = self.call(inp_tar, lookup_mask)
        tokens = inp_tar.numel()
        self.loss_value = F.cross_entropy(predictions.reshape(tokens, PITCHES), out_tar.reshape(tokens),
                                          reduction="none")
        self.opt.zero_grad()
        self.loss_value.mean().backward()
        self.opt.step()

    def train_on_batch(self, engine, events, seq):
        """Not a conversion scope: the step ends, then the host reduces and reads self.loss_value."""
        with engine.step():
            x = terra.from_numpy(events)
            self.train_step(x[:, :seq], x[:, 1:], self.lookup_mask(seq))
        return self.loss_value.mean().item()

    @staticmethod
    def lookup_mask(seq):
        """The look-ahead mask, built on the host as the original does (True = may not attend)."""
        return terra.from_numpy(np.fromfunction(lambda i, j: j > i, (seq, seq)))


def music_events(rng, n, seq):
    """Arpeggios and scales: a start pitch and an interval pattern, cycled and wrapped into range."""
    patterns = [[4, 3, 5], [3, 4, 5], [2, 2, 1, 2, 2, 2, 1], [7, -5]]
    t = np.empty((n, seq + 1), np.int64)
    for i in range(n):
        pat, p = patterns[int(rng.integers(0, len(patterns)))], int(rng.integers(0, PITCHES))
        for k in range(seq + 1):
            t[i, k] = p
            p = (p + pat[k % len(pat)]) % PITCHES
    return t


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, seq, d, heads, layers = (4, 16, 32, 4, 1) if quick else (8, 64, 64, 4, 2)
    data = [music_events(rng, n, seq) for _ in range(16)]
    trainer = MusicTransformerDecoder(seq, d, heads, layers)
    log = LossLog(on_step)
    for it in range(steps):
        log.record_value(it, trainer.train_on_batch(engine, data[it % len(data)], seq))
    return finish(engine, log, t0)
