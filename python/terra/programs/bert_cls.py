"""BERT-CLS (Terra §5.1: BERT sentence classification): a tiny BERT encoder over padded sentences (key
padding mask) with a classifier on the [CLS] token. Every few steps the host fetches the predictions
(tolist) inside the step and scores them with scikit-learn's f1_score: a third-party library on fetched
values that influences nothing in the graph (inside try/except: a metric must never stop training).
Generated task: a sentence's class is the keyword it contains. Mirrors programs/bert_cls.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, TransformerBlock, finish, loader, make_engine, scale_embeddings

FEATURE = "host fetches predictions every few steps for scikit-learn's f1_score (third-party library)"

PAD, CLS, KEYWORD0, CLASSES, WORD0, VOCAB = 0, 1, 2, 3, 8, 40
EVAL_EVERY = 3


def f1_macro():
    """sklearn.metrics.f1_score(average="macro"), imported only when the program runs (sklearn is not a
    terra dependency). Without sklearn: the same formula by hand, and a note on stderr saying so."""
    try:
        from sklearn.metrics import f1_score
    except ImportError:
        import sys
        print("bert_cls: scikit-learn not importable (Debian: apt-get install python3-sklearn); "
              "using a hand-written macro F1 instead", file=sys.stderr)

        def f1_score(truth, pred, labels, average, zero_division):
            total = 0.0
            for c in labels:
                tp = sum(1 for t, p in zip(truth, pred) if t == c and p == c)
                fp = sum(1 for t, p in zip(truth, pred) if t != c and p == c)
                fn = sum(1 for t, p in zip(truth, pred) if t == c and p != c)
                total += 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)
            return total / len(labels)
    return lambda truth, pred: float(f1_score(truth, pred, labels=list(range(CLASSES)), average="macro",
                                              zero_division=0))


class BertCls(nn.Module):
    def __init__(self, seq, d, heads, layers):
        super().__init__()
        self.tok, self.pos, self.ln = nn.Embedding(VOCAB, d), nn.Embedding(seq, d), nn.LayerNorm(d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 2 * d, pre_norm=False) for _ in range(layers)])
        self.cls = nn.Linear(d, CLASSES)
        scale_embeddings(0.1, self.tok, self.pos)

    def forward(self, tokens, padding):
        """tokens [B, S], padding bool [B, S] (True = pad) -> logits [B, classes] from the [CLS] position."""
        h = self.ln(self.tok(tokens) + self.pos(terra.arange(tokens.shape[1])))
        for b in self.blocks:
            h = b(h, None, padding)
        return self.cls(terra.tanh(h[:, 0]))


def cls_batch(rng, n, seq):
    toks = np.zeros((n, seq), np.int64)
    pad = np.zeros((n, seq), bool)
    labels = rng.integers(0, CLASSES, n).astype(np.int64)
    for i in range(n):
        length = int(rng.integers(seq // 2, seq + 1))
        at = int(rng.integers(1, length))
        toks[i, 0] = CLS
        toks[i, 1:length] = rng.integers(WORD0, VOCAB, length - 1)
        toks[i, at] = KEYWORD0 + labels[i]
        pad[i, length:] = True
    return toks, pad, labels


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    f1_score = f1_macro()
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, seq, d, heads, layers = (16, 12, 32, 2, 1) if quick else (16, 32, 64, 2, 2)
    raw = [cls_batch(rng, n, seq) for _ in range(16)]
    data = loader(raw)
    model = BertCls(seq, d, heads, layers)
    opt = terra.optim.AdamW(model.parameters(), lr=3e-3)
    log = LossLog(on_step)
    f1_history = []  # host-side metric: read by nobody in the graph
    for it in range(steps):
        with engine.step():
            tokens, padding, labels = next(data)
            logits = model(tokens, padding)
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if it % EVAL_EVERY == EVAL_EVERY - 1:
                pred = terra.argmax(logits, -1).tolist()  # fetch point
                try:
                    f1_history.append(f1_score(raw[it % len(raw)][2].tolist(), pred))
                except ValueError as e:  # a metric failure is logged, never fatal
                    f1_history.append(float("nan"))
                    print(f"bert_cls: f1_score failed: {e}")
            log.record(it, loss)
    return finish(engine, log, t0, f1_history=f1_history)
