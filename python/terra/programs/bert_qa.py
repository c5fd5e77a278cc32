"""BERT-Q&A (Terra §5.1: BERT on SQuAD 1.1): a tiny BERT encoder with span start/end heads and a
cross-entropy on each. Generated task: the question names one of several entity markers in the context;
the answer is the span from that marker to the word before its END token. Mirrors programs/bert_qa.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, TransformerBlock, finish, loader, make_engine, scale_embeddings

FEATURE = "transformer encoder with two span heads (start/end cross-entropy)"

CLS, SEP, END, ENTITY0, WORD0, VOCAB = 1, 2, 3, 4, 12, 48


class BertQA(nn.Module):
    def __init__(self, seq, d, heads, layers):
        super().__init__()
        self.tok, self.pos, self.ln = nn.Embedding(VOCAB, d), nn.Embedding(seq, d), nn.LayerNorm(d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 2 * d, pre_norm=False) for _ in range(layers)])
        self.qa = nn.Linear(d, 2)
        scale_embeddings(0.1, self.tok, self.pos)

    def forward(self, tokens):
        """tokens [B, S] -> start and end logits, each [B, S]."""
        h = self.ln(self.tok(tokens) + self.pos(terra.arange(tokens.shape[1])))
        for b in self.blocks:
            h = b(h)
        logits = self.qa(h)  # [B, S, 2]
        return logits[:, :, 0], logits[:, :, 1]


def qa_batch(rng, n, seq, entities, max_words):
    """[CLS] q [SEP] context: one segment [E_k, word.., END] per entity k between filler words."""
    toks, starts, ends = [], [], []
    for _ in range(n):
        q = int(rng.integers(0, entities))
        segs = [[ENTITY0 + k] + [int(w) for w in rng.integers(WORD0, VOCAB, int(rng.integers(1, max_words + 1)))]
                + [END] for k in range(entities)]
        rng.shuffle(segs)
        filler = seq - 3 - sum(len(s) for s in segs)
        gaps = np.bincount(rng.integers(0, entities + 1, filler), minlength=entities + 1)
        t, st, en = [CLS, ENTITY0 + q, SEP], 0, 0
        for k in range(entities + 1):
            t += [int(w) for w in rng.integers(WORD0, VOCAB, gaps[k])]
            if k == entities:
                break
            if segs[k][0] == ENTITY0 + q:
                st, en = len(t), len(t) + len(segs[k]) - 2
            t += segs[k]
        toks += t
        starts.append(st)
        ends.append(en)
    return (np.array(toks, np.int64).reshape(n, seq), np.array(starts, np.int64), np.array(ends, np.int64))


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, seq, d, heads, layers = (8, 16, 32, 2, 1) if quick else (8, 48, 64, 2, 2)
    entities, max_words = (2, 2) if quick else (4, 3)
    data = loader([qa_batch(rng, n, seq, entities, max_words) for _ in range(16)])
    model = BertQA(seq, d, heads, layers)
    opt = terra.optim.AdamW(model.parameters(), lr=3e-3)
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            tokens, start, end = next(data)
            start_logits, end_logits = model(tokens)
            loss = (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) * 0.5
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
