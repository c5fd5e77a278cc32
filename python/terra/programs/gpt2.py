"""GPT-2 (Terra §5.1: GPT-2 on OpenWebText): a causal-attention language model (pre-norm blocks with
nn.MultiheadAttention and a causal mask) trained with next-token cross-entropy. The loss function is a
closure over the vocabulary size. Generated text: arithmetic sequences with per-sequence steps, so the
next token is predictable from the context. Mirrors programs/gpt2.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, TransformerBlock, finish, loader, make_engine, scale_embeddings

FEATURE = "causal-attention LM: MultiheadAttention with a causal mask, next-token loss (a closure)"

VOCAB = 32


class GPT(nn.Module):
    def __init__(self, seq, d, heads, layers):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 4 * d, pre_norm=True) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB)
        scale_embeddings(0.05, self.tok, self.pos)

    def forward(self, tokens):
        """tokens [B, S] -> logits [B, S, V]; position i attends to positions <= i."""
        s = tokens.shape[1]
        mask = nn.MultiheadAttention.causal_mask(s)
        h = self.tok(tokens) + self.pos(terra.arange(s))
        for b in self.blocks:
            h = b(h, mask)
        return self.head(self.ln_f(h))


def arith_text(rng, n, seq):
    """Sequences of length seq + 1 climbing by two alternating per-sequence steps (mod the vocabulary)."""
    t = np.empty((n, seq + 1), np.int64)
    for i in range(n):
        a, b, x = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(0, VOCAB))
        for p in range(seq + 1):
            t[i, p] = x
            x = (x + (b if p % 2 else a)) % VOCAB
    return (t,)


def next_token_loss(vocab):
    """The loss as a closure, as training scripts build it from the config."""
    def loss_fn(logits, targets):
        b, s = targets.shape
        return F.cross_entropy(logits.reshape(b * s, vocab), targets.reshape(b * s))
    return loss_fn


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, seq, d, heads, layers = (8, 16, 32, 4, 1) if quick else (8, 64, 64, 4, 2)
    data = loader([arith_text(rng, n, seq) for _ in range(16)])
    model = GPT(seq, d, heads, layers)
    opt = terra.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = next_token_loss(VOCAB)
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            (text,) = next(data)
            inputs, targets = text[:, :seq], text[:, 1:]
            loss = loss_fn(model(inputs), targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
