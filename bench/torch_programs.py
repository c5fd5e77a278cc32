#!/usr/bin/python3
"""PyTorch baseline for terra-bench (oracle/baseline only): Terra's ten evaluation programs,
mirroring programs/*.cpp -- same model structure and sizes (default and --quick), batch size,
optimizer and hyper-parameters, and step structure (including the host fetches: bert_cls's F1
metric every 3 steps, faster_rcnn's proposal count, music_transformer's loss read after the step).
Data is generated with numpy in the same shapes and of the same kind (not the same numbers: terra
uses std::mt19937), so final losses are comparable in magnitude only, not equal.

Measures, per program:
  torch_eager: the program as written, eager PyTorch.
  torch_jit:   the model's forward replaced by torch.jit.trace(model) (backward through autograd as
               usual), only where tracing is sound -- the static-path programs. Not for dropblock
               (keep_prob is a Python attribute read in forward: a trace freezes one schedule value
               and the keep_prob == 1 branch), sdpoint (the downsampling point is chosen per step on
               the host: a trace freezes one path), faster_rcnn (a fetched value decides a shape used
               later in the same step).
steps/s = steady state over the steps after --warmup: (N - W) / (time of steps W..N-1), the same
definition as terra-bench (torch on CPU is synchronous, so step boundaries are exact); with
--repeat R the median over R fresh runs (fresh model, same seed), as terra-bench --repeat.

Threads: torch.set_num_threads(--threads), as terra-bench --threads (scripts/bench_programs.sh passes
both the same count; no OMP_* variables). BLAS: Debian's torch calls the system
libblas.so.3; scripts/bench_programs.sh runs this with
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread so OpenBLAS is loaded instead of the
netlib reference BLAS. The BLAS actually loaded (from /proc/self/maps) is printed and written to the
CSV.

Writes CSV: program,framework,steps_per_s,final_loss,first_loss,total_s,steps,warmup,threads,blas,note
"""
import argparse
import csv
import math
import os
import random
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PROGRAMS = ["resnet", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint",
            "faster_rcnn", "music_transformer"]
NO_JIT = {
    "dropblock": "no torch_jit: keep_prob is read in forward; a trace freezes one schedule value",
    "sdpoint": "no torch_jit: per-step downsampling point chosen on the host; a trace freezes one path",
    "faster_rcnn": "no torch_jit: a fetched value decides a shape later in the same step",
}


def maybe_trace(model, example, jit):
    """torch.jit.trace of model.forward on the example inputs (parameters stay shared)."""
    if not jit:
        return model
    return torch.jit.trace(model, example, check_trace=False)


# ------------------------------------------------------------------ shared building blocks

class TransformerBlock(nn.Module):
    """programs/common.h TransformerBlock: MHA + GELU MLP, post-norm (BERT) or pre-norm (GPT-2)."""

    def __init__(self, d, heads, ff, pre_norm):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.pre_norm = pre_norm

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.pre_norm:
            h = self.ln1(x)
            y = x + self.attn(h, h, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
            return y + self.fc2(F.gelu(self.fc1(self.ln2(y))))
        y = self.ln1(x + self.attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                   need_weights=False)[0])
        return self.ln2(y + self.fc2(F.gelu(self.fc1(y))))


def conv(i, o, k, s=1, p=0, bias=True):
    return nn.Conv2d(i, o, k, s, p, bias=bias)


# ------------------------------------------------------------------ resnet

class BasicBlock(nn.Module):
    def __init__(self, i, o, stride):
        super().__init__()
        self.conv1, self.bn1 = conv(i, o, 3, stride, 1, False), nn.BatchNorm2d(o)
        self.conv2, self.bn2 = conv(o, o, 3, 1, 1, False), nn.BatchNorm2d(o)
        self.proj = None
        if stride != 1 or i != o:
            self.proj, self.proj_bn = conv(i, o, 1, stride, 0, False), nn.BatchNorm2d(o)

    def forward(self, x):
        h = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        s = self.proj_bn(self.proj(x)) if self.proj is not None else x
        return F.relu(h + s)


class ResNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem, self.stem_bn = conv(3, width, 3, 1, 1, False), nn.BatchNorm2d(width)
        self.blocks = nn.ModuleList([BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2),
                                     BasicBlock(2 * width, 2 * width, 1)])
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        h = F.relu(self.stem_bn(self.stem(x)))
        for b in self.blocks:
            h = b(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def stripe_images(rng, n, hw, classes):
    ks = rng.integers(0, classes, n)
    r, q = np.meshgrid(np.arange(hw), np.arange(hw), indexing="ij")
    x = np.empty((n, 3, hw, hw), np.float32)
    for i, k in enumerate(ks):
        a = math.pi * k / classes
        shift = rng.uniform(-0.5, 0.5)
        for c in range(3):
            x[i, c] = np.sin(1.3 * (math.cos(a) * q + math.sin(a) * r) + c) + shift + rng.normal(0, 0.3, (hw, hw))
    return torch.from_numpy(x), torch.from_numpy(ks.astype(np.int64))


def setup_resnet(quick, rng, jit):
    n, hw, width, classes = (8, 8, 16, 4) if quick else (16, 16, 24, 4)
    data = [stripe_images(rng, n, hw, classes) for _ in range(8)]
    model = ResNet(width, classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    fwd = maybe_trace(model, (data[0][0],), jit)

    def step(it):
        x, y = data[it % len(data)]
        loss = F.cross_entropy(fwd(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ------------------------------------------------------------------ bert_qa

class BertQA(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers):
        super().__init__()
        self.tok, self.pos, self.ln = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.LayerNorm(d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 2 * d, False) for _ in range(layers)])
        self.qa = nn.Linear(d, 2)
        with torch.no_grad():
            self.tok.weight.mul_(0.1)
            self.pos.weight.mul_(0.1)

    def forward(self, tokens):
        h = self.ln(self.tok(tokens) + self.pos(torch.arange(tokens.size(1))))
        for b in self.blocks:
            h = b(h)
        logits = self.qa(h)
        return logits.select(2, 0), logits.select(2, 1)


def qa_batch(rng, n, seq, entities, max_words):
    CLS, SEP, END, E0, W0, V = 1, 2, 3, 4, 12, 48
    toks, st, en = [], [], []
    for _ in range(n):
        q = int(rng.integers(0, entities))
        segs = []
        for k in range(entities):
            segs.append([E0 + k] + list(rng.integers(W0, V, int(rng.integers(1, max_words + 1)))) + [END])
        rng.shuffle(segs)
        filler = seq - 3 - sum(len(s) for s in segs)
        gaps = np.bincount(rng.integers(0, entities + 1, filler), minlength=entities + 1)
        t, s0, e0 = [CLS, E0 + q, SEP], 0, 0
        for k in range(entities + 1):
            t += list(rng.integers(W0, V, gaps[k]))
            if k == entities:
                break
            if segs[k][0] == E0 + q:
                s0, e0 = len(t), len(t) + len(segs[k]) - 2
            t += segs[k]
        toks += t
        st.append(s0)
        en.append(e0)
    return (torch.tensor(toks, dtype=torch.int64).reshape(n, seq), torch.tensor(st), torch.tensor(en))


def setup_bert_qa(quick, rng, jit):
    n, seq, d, heads, layers = (8, 16, 32, 2, 1) if quick else (8, 48, 64, 2, 2)
    entities, max_words = (2, 2) if quick else (4, 3)
    data = [qa_batch(rng, n, seq, entities, max_words) for _ in range(16)]
    model = BertQA(48, seq, d, heads, layers)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    fwd = maybe_trace(model, (data[0][0],), jit)

    def step(it):
        tokens, s, e = data[it % len(data)]
        sl, el = fwd(tokens)
        loss = (F.cross_entropy(sl, s) + F.cross_entropy(el, e)) * 0.5
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ------------------------------------------------------------------ yolov3

YOLO_CLASSES = 2
YOLO_OUT = 5 + YOLO_CLASSES


class ConvBN(nn.Module):
    def __init__(self, i, o, k, s):
        super().__init__()
        self.conv, self.bn = conv(i, o, k, s, k // 2, False), nn.BatchNorm2d(o)

    def forward(self, x):
        return F.leaky_relu(self.bn(self.conv(x)), 0.1)


class Yolo(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3, self.c4 = ConvBN(3, 16, 3, 1), ConvBN(16, 32, 3, 2), ConvBN(32, 32, 3, 2), ConvBN(32, 64, 3, 2)
        self.head1, self.out1 = ConvBN(64, 64, 3, 1), conv(64, YOLO_OUT, 1)
        self.lateral, self.head2, self.out2 = ConvBN(64, 32, 1, 1), ConvBN(64, 32, 3, 1), conv(32, YOLO_OUT, 1)

    def forward(self, x):
        route = self.c3(self.c2(self.c1(x)))
        deep = self.c4(route)
        coarse = self.out1(self.head1(deep))
        up = F.interpolate(self.lateral(deep), scale_factor=2.0, mode="nearest")
        fine = self.out2(self.head2(torch.cat([up, route], 1)))
        return coarse, fine


def yolo_batch(rng, n, s, grids):
    img = rng.normal(0, 0.1, (n, 3, s, s)).astype(np.float32)
    scales = []
    for g in grids:
        scales.append(dict(obj=np.zeros((n, 1, g, g), np.float32), box=np.zeros((n, 4, g, g), np.float32),
                           mask=np.zeros((n, 4, g, g), bool), cls=np.full((n * g * g,), -100, np.int64)))
    for i in range(n):
        for _ in range(int(rng.integers(1, 3))):
            c = int(rng.integers(0, YOLO_CLASSES))
            w, h = int(rng.integers(s // 8 + 1, s // 3 + 1)), int(rng.integers(s // 8 + 1, s // 3 + 1))
            x0, y0 = int(rng.integers(0, s - w + 1)), int(rng.integers(0, s - h + 1))
            img[i, c, y0:y0 + h, x0:x0 + w] += 1.0
            img[i, 2, y0:y0 + h, x0:x0 + w] += 0.5
            cx, cy = (x0 + w / 2) / s, (y0 + h / 2) / s
            for g, t in zip(grids, scales):
                gx, gy = min(g - 1, int(cx * g)), min(g - 1, int(cy * g))
                t["obj"][i, 0, gy, gx] = 1.0
                t["cls"][(i * g + gy) * g + gx] = c
                t["box"][i, :, gy, gx] = [cx * g - gx, cy * g - gy, w / s, h / s]
                t["mask"][i, :, gy, gx] = True
    out = []
    for t in scales:
        out.append(dict(obj=torch.from_numpy(t["obj"]), box=torch.from_numpy(t["box"]),
                        mask=torch.from_numpy(t["mask"]), cls=torch.from_numpy(t["cls"]),
                        cells=int((t["obj"] > 0.5).sum())))
    return torch.from_numpy(img), out


def yolo_scale_loss(pred, t):
    n, g = pred.size(0), pred.size(2)
    obj, box, cls = pred[:, 0:1], pred[:, 1:5], pred[:, 5:YOLO_OUT]
    obj_loss = F.binary_cross_entropy_with_logits(obj, t["obj"])
    diff = torch.sigmoid(box) - t["box"]
    box_loss = torch.where(t["mask"], diff * diff, torch.zeros((), dtype=diff.dtype)).sum() / float(max(1, t["cells"]))
    cls_loss = F.cross_entropy(cls.permute(0, 2, 3, 1).reshape(n * g * g, YOLO_CLASSES), t["cls"])
    return obj_loss * 4.0 + box_loss + cls_loss


def setup_yolov3(quick, rng, jit):
    n, s = (8, 16) if quick else (16, 32)
    data = [yolo_batch(rng, n, s, [s // 8, s // 4]) for _ in range(8)]
    model = Yolo()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    fwd = maybe_trace(model, (data[0][0],), jit)

    def step(it):
        x, scales = data[it % len(data)]
        coarse, fine = fwd(x)
        loss = yolo_scale_loss(coarse, scales[0]) + yolo_scale_loss(fine, scales[1])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ------------------------------------------------------------------ dcgan

NOISE = 16


class Generator(nn.Module):
    def __init__(self, base, ch):
        super().__init__()
        self.base, self.ch = base, ch
        self.fc, self.bn0 = nn.Linear(NOISE, ch * base * base), nn.BatchNorm2d(ch)
        self.up1, self.bn1 = nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2)
        self.up2 = nn.ConvTranspose2d(ch // 2, 1, 4, 2, 1)

    def forward(self, z):
        h = F.relu(self.bn0(self.fc(z).reshape(z.size(0), self.ch, self.base, self.base)))
        h = F.relu(self.bn1(self.up1(h)))
        return torch.tanh(self.up2(h))


class Discriminator(nn.Module):
    def __init__(self, side, ch):
        super().__init__()
        self.c1 = conv(1, ch // 2, 4, 2, 1)
        self.c2, self.bn2 = conv(ch // 2, ch, 4, 2, 1, False), nn.BatchNorm2d(ch)
        self.fc = nn.Linear(ch * (side // 4) ** 2, 1)

    def forward(self, x):
        h = F.leaky_relu(self.c1(x), 0.2)
        h = F.leaky_relu(self.bn2(self.c2(h)), 0.2)
        return self.fc(h.flatten(1))


def strokes(rng, n, s):
    x = np.full((n, 1, s, s), -1.0, np.float32)
    for i in range(n):
        kind, a, b = int(rng.integers(0, 3)), int(rng.integers(1, s - 1)), int(rng.integers(1, s - 1))
        if kind == 0:
            x[i, 0, a:a + 2, :] = 1.0
        elif kind == 1:
            x[i, 0, a, :] = 1.0
            x[i, 0, :, b] = 1.0
        else:
            x[i, 0, 1, 1:s - 1] = x[i, 0, s - 2, 1:s - 1] = 1.0
            x[i, 0, 1:s - 1, 1] = x[i, 0, 1:s - 1, s - 2] = 1.0
    return torch.from_numpy(x)


def setup_dcgan(quick, rng, jit):
    n, side, ch = (16, 8, 32) if quick else (16, 16, 64)
    data = [strokes(rng, n, side) for _ in range(8)]
    gen, disc = Generator(side // 4, ch), Discriminator(side, ch)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.5, 0.999))
    G = maybe_trace(gen, (torch.randn(n, NOISE),), jit)
    D = maybe_trace(disc, (data[0],), jit)
    ones_t, zeros_t = torch.ones(n, 1), torch.zeros(n, 1)

    def step(it):
        real = data[it % len(data)]
        fake = G(torch.randn(n, NOISE))
        d_loss = (F.binary_cross_entropy_with_logits(D(real), ones_t) +
                  F.binary_cross_entropy_with_logits(D(fake.detach()), zeros_t))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(D(fake), ones_t)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return d_loss.detach()
    return step


# ------------------------------------------------------------------ gpt2 / music_transformer

class GPT(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers, ff_mult, emb_scale):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, ff_mult * d, True) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        with torch.no_grad():
            self.tok.weight.mul_(emb_scale)
            self.pos.weight.mul_(emb_scale)

    def forward(self, tokens, mask):
        h = self.tok(tokens) + self.pos(torch.arange(tokens.size(1)))
        for b in self.blocks:
            h = b(h, mask)
        return self.head(self.ln_f(h))


def causal_mask(s):
    return torch.triu(torch.ones(s, s, dtype=torch.bool), 1)


def arith_text(rng, n, seq, vocab=32):
    t = np.empty((n, seq + 1), np.int64)
    for i in range(n):
        a, b, x = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(0, vocab))
        for p in range(seq + 1):
            t[i, p] = x
            x = (x + (b if p % 2 else a)) % vocab
    return torch.from_numpy(t)


def setup_gpt2(quick, rng, jit):
    n, seq, d, heads, layers, V = (8, 16, 32, 4, 1, 32) if quick else (8, 64, 64, 4, 2, 32)
    data = [arith_text(rng, n, seq, V) for _ in range(16)]
    model = GPT(V, seq, d, heads, layers, 4, 0.05)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    fwd = maybe_trace(model, (data[0][:, :seq], causal_mask(seq)), jit)

    def step(it):
        text = data[it % len(data)]
        inputs, targets = text[:, :seq], text[:, 1:]
        mask = causal_mask(seq)
        logits = fwd(inputs, mask)
        loss = F.cross_entropy(logits.reshape(n * seq, V), targets.reshape(n * seq))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def music_events(rng, n, seq, pitches=48):
    patterns = [[4, 3, 5], [3, 4, 5], [2, 2, 1, 2, 2, 2, 1], [7, -5]]
    t = np.empty((n, seq + 1), np.int64)
    for i in range(n):
        pat, p = patterns[int(rng.integers(0, len(patterns)))], int(rng.integers(0, pitches))
        for k in range(seq + 1):
            t[i, k] = p
            p = (p + pat[k % len(pat)]) % pitches
    return torch.from_numpy(t)


def setup_music_transformer(quick, rng, jit):
    n, seq, d, heads, layers, P = (4, 16, 32, 4, 1, 48) if quick else (8, 64, 64, 4, 2, 48)
    data = [music_events(rng, n, seq, P) for _ in range(16)]
    model = GPT(P, seq, d, heads, layers, 2, 0.05)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    fwd = maybe_trace(model, (data[0][:, :seq], causal_mask(seq)), jit)
    state = {}

    def lookup_mask(s):  # built on the host each step, as the original
        m = np.fromfunction(lambda i, j: j > i, (s, s))
        return torch.from_numpy(m)

    def train_step(inp, tar, mask):
        pred = fwd(inp, mask)
        state["loss_value"] = F.cross_entropy(pred.reshape(inp.numel(), P), tar.reshape(inp.numel()), reduction="none")
        opt.zero_grad()
        state["loss_value"].mean().backward()
        opt.step()

    def step(it):
        x = data[it % len(data)]
        train_step(x[:, :seq], x[:, 1:], lookup_mask(seq))
        return state["loss_value"].mean().item()  # read after the step, outside it
    return step


# ------------------------------------------------------------------ bert_cls

class BertCls(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers, classes):
        super().__init__()
        self.tok, self.pos, self.ln = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.LayerNorm(d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads, 2 * d, False) for _ in range(layers)])
        self.cls = nn.Linear(d, classes)
        with torch.no_grad():
            self.tok.weight.mul_(0.1)
            self.pos.weight.mul_(0.1)

    def forward(self, tokens, padding):
        h = self.ln(self.tok(tokens) + self.pos(torch.arange(tokens.size(1))))
        for b in self.blocks:
            h = b(h, None, padding)
        return self.cls(torch.tanh(h.select(1, 0)))


def f1_score_macro(truth, pred, classes):
    total = 0.0
    for c in range(classes):
        tp = sum(1 for t, p in zip(truth, pred) if t == c and p == c)
        fp = sum(1 for t, p in zip(truth, pred) if t != c and p == c)
        fn = sum(1 for t, p in zip(truth, pred) if t == c and p != c)
        total += 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)
    return total / classes


def cls_batch(rng, n, seq, classes=3, vocab=40):
    PAD, CLS, K0, W0 = 0, 1, 2, 8
    toks = np.zeros((n, seq), np.int64)
    pad = np.zeros((n, seq), bool)
    labels = rng.integers(0, classes, n)
    for i in range(n):
        ln = int(rng.integers(seq // 2, seq + 1))
        at = int(rng.integers(1, ln))
        toks[i, 0] = CLS
        toks[i, 1:ln] = rng.integers(W0, vocab, ln - 1)
        toks[i, at] = K0 + labels[i]
        toks[i, ln:] = PAD
        pad[i, ln:] = True
    return torch.from_numpy(toks), torch.from_numpy(pad), torch.from_numpy(labels.astype(np.int64))


def setup_bert_cls(quick, rng, jit):
    n, seq, d, heads, layers, classes = (16, 12, 32, 2, 1, 3) if quick else (16, 32, 64, 2, 2, 3)
    data = [cls_batch(rng, n, seq, classes) for _ in range(16)]
    model = BertCls(40, seq, d, heads, layers, classes)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    fwd = maybe_trace(model, (data[0][0], data[0][1]), jit)
    f1_history = []

    def step(it):
        tokens, padding, labels = data[it % len(data)]
        logits = fwd(tokens, padding)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 3 == 2:
            pred = torch.argmax(logits, -1).tolist()
            f1_history.append(f1_score_macro(labels.tolist(), pred, classes))
        return loss.detach()
    return step


# ------------------------------------------------------------------ dropblock

class DropBlock2D(nn.Module):
    def __init__(self, block_size, keep_prob):
        super().__init__()
        self.block_size, self.keep_prob = block_size, keep_prob

    def set_keep_prob(self, kp=None):
        if kp is not None:
            self.keep_prob = kp

    def forward(self, x):
        if not self.training or self.keep_prob >= 1.0:
            return x
        h, w, bs = x.size(2), x.size(3), self.block_size
        gamma = (1.0 - self.keep_prob) / (bs * bs) * (h * w) / ((h - bs + 1) * (w - bs + 1))
        seeds = torch.bernoulli(torch.full(x.shape, gamma))
        block = F.max_pool2d(seeds, bs, 1, bs // 2)
        keep = 1.0 - block
        return x * keep * (keep.numel() / (keep.sum() + 1e-6))


class DropNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem, self.bn0 = conv(3, width, 3, 1, 1, False), nn.BatchNorm2d(width)
        self.c1, self.bn1 = conv(width, 2 * width, 3, 2, 1, False), nn.BatchNorm2d(2 * width)
        self.c2, self.bn2 = conv(2 * width, 2 * width, 3, 1, 1, False), nn.BatchNorm2d(2 * width)
        self.drop1, self.drop2 = DropBlock2D(3, 1.0), DropBlock2D(3, 1.0)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        h = F.relu(self.bn0(self.stem(x)))
        h = self.drop1(F.relu(self.bn1(self.c1(h))))
        h = self.drop2(F.relu(self.bn2(self.c2(h)) + h))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def quadrant_batch(rng, n, s):
    ks = rng.integers(0, 4, n)
    x = rng.normal(0, 0.3, (n, 3, s, s)).astype(np.float32)
    for i, k in enumerate(ks):
        r0, c0 = (k // 2) * s // 2 + int(rng.integers(0, s // 8 + 1)), (k % 2) * s // 2 + int(rng.integers(0, s // 8 + 1))
        x[i, :, r0:r0 + 3 * s // 8, c0:c0 + 3 * s // 8] += 1.5
    return torch.from_numpy(x), torch.from_numpy(ks.astype(np.int64))


def setup_dropblock(quick, rng, jit):
    n, s, width = (8, 8, 16) if quick else (16, 16, 32)
    data = [quadrant_batch(rng, n, s) for _ in range(8)]
    model = DropNet(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(it):
        if it % 3 == 0:
            kp = max(0.85, 1.0 - 0.05 * (it // 3))
            model.drop1.set_keep_prob(kp)
            model.drop2.set_keep_prob(kp)
        x, y = data[it % len(data)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ------------------------------------------------------------------ sdpoint

class ConvBlock(nn.Module):
    def __init__(self, block_id, i, o, stride):
        super().__init__()
        self.block_id, self.downsampling_ratio = block_id, 1.0
        self.conv1, self.bn1 = conv(i, o, 3, stride, 1, False), nn.BatchNorm2d(o)
        self.conv2, self.bn2 = conv(o, o, 3, 1, 1, False), nn.BatchNorm2d(o)
        self.proj = None
        if stride != 1 or i != o:
            self.proj, self.proj_bn = conv(i, o, 1, stride, 0, False), nn.BatchNorm2d(o)

    def forward(self, x):
        if self.downsampling_ratio < 1.0:
            h = max(1, int(x.size(2) * self.downsampling_ratio))
            w = max(1, int(x.size(3) * self.downsampling_ratio))
            x = F.adaptive_avg_pool2d(x, (h, w))
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.proj_bn(self.proj(x)) if self.proj is not None else x))


class SDResNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem, self.bn = conv(3, width, 3, 1, 1, False), nn.BatchNorm2d(width)
        self.blocks = nn.ModuleList([ConvBlock(0, width, width, 1), ConvBlock(1, width, 2 * width, 2),
                                     ConvBlock(2, 2 * width, 2 * width, 1)])
        self.fc = nn.Linear(2 * width, classes)

    def stochastic_downsampling(self, block_id, ratio):
        for b in self.blocks:
            b.downsampling_ratio = ratio if b.block_id == block_id else 1.0

    def forward(self, x):
        h = F.relu(self.bn(self.stem(x)))
        for b in self.blocks:
            h = b(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def wave_batch(rng, n, s):
    ks = rng.integers(0, 4, n)
    r, q = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    x = np.empty((n, 3, s, s), np.float32)
    for i, k in enumerate(ks):
        freq, phase = (1.6 if k % 2 else 0.7), rng.uniform(0, 6.28)
        t = (r + q) if k // 2 else r
        x[i] = np.sin(freq * t + phase)[None] + rng.normal(0, 0.3, (3, s, s))
    return torch.from_numpy(x), torch.from_numpy(ks.astype(np.int64))


def setup_sdpoint(quick, rng, jit, seed=0):
    n, s, width = (8, 8, 16) if quick else (16, 16, 24)
    data = [wave_batch(rng, n, s) for _ in range(8)]
    model = SDResNet(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    choice = random.Random(seed)
    points = len(model.blocks) + 1

    def step(it):
        model.stochastic_downsampling(choice.randint(0, points - 1), 0.5)
        x, y = data[it % len(data)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ------------------------------------------------------------------ faster_rcnn

class FasterRCNN(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.c1, self.c2, self.c3 = conv(3, width, 3, 1, 1), conv(width, 2 * width, 3, 2, 1), conv(2 * width, 2 * width, 3, 2, 1)
        self.rpn_conv, self.rpn_obj = conv(2 * width, 2 * width, 3, 1, 1), conv(2 * width, 1, 1)
        self.roi_fc, self.roi_cls = nn.Linear(2 * width, 32), nn.Linear(32, classes)

    def backbone(self, x):
        return F.relu(self.c3(F.relu(self.c2(F.relu(self.c1(x))))))


def rcnn_batch(rng, n, s, g, classes):
    img = rng.normal(0, 0.2, (n, 3, s, s)).astype(np.float32)
    obj = np.zeros((n, 1, g, g), np.float32)
    cc = np.zeros((n * g * g,), np.int64)
    cell = s // g
    for i in range(n):
        for _ in range(int(rng.integers(1, 4))):
            c = int(rng.integers(0, classes - 1))
            w = int(rng.integers(cell, 2 * cell + 1))
            x0, y0 = int(rng.integers(0, s - w + 1)), int(rng.integers(0, s - w + 1))
            img[i, c, y0:y0 + w, x0:x0 + w] += 1.0
            for y in range(y0, y0 + w):
                for x in range(x0, x0 + w):
                    if y % cell == cell // 2 and x % cell == cell // 2:
                        obj[i, 0, y // cell, x // cell] = 1.0
                        cc[(i * g + y // cell) * g + x // cell] = 1 + c
    return torch.from_numpy(img), torch.from_numpy(obj), cc


def setup_faster_rcnn(quick, rng, jit):
    classes = 3
    n, s, width, max_props = (2, 16, 16, 16) if quick else (4, 32, 32, 48)
    g, min_props = s // 4, 4
    data = [rcnn_batch(rng, n, s, g, classes) for _ in range(8)]
    model = FasterRCNN(width, classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

    def step(it):
        x, objectness, cell_class = data[it % len(data)]
        feat = model.backbone(x)
        scores = model.rpn_obj(F.relu(model.rpn_conv(feat)))
        rpn_loss = F.binary_cross_entropy_with_logits(scores, objectness)
        probs = torch.sigmoid(scores).flatten()
        k = min(max(int(probs.sum().item()), min_props), max_props)
        p = probs.tolist()
        order = sorted(range(len(p)), key=lambda a: -p[a])[:k]  # stable, descending
        labels = torch.tensor([int(cell_class[c]) for c in order], dtype=torch.int64)
        cells = feat.permute(0, 2, 3, 1).reshape(n * g * g, feat.size(1))
        rois = torch.index_select(cells, 0, torch.tensor(order, dtype=torch.int64))
        roi_logits = model.roi_cls(F.relu(model.roi_fc(rois)))
        loss = rpn_loss + F.cross_entropy(roi_logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return step


SETUP = {"resnet": setup_resnet, "bert_qa": setup_bert_qa, "yolov3": setup_yolov3, "dcgan": setup_dcgan,
         "gpt2": setup_gpt2, "bert_cls": setup_bert_cls, "dropblock": setup_dropblock, "sdpoint": setup_sdpoint,
         "faster_rcnn": setup_faster_rcnn, "music_transformer": setup_music_transformer}


# ------------------------------------------------------------------ driver

def blas_libs():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            path = parts[-1] if len(parts) >= 6 else ""
            if "blas" in path or "mkl" in path or "lapack" in path:
                libs.add(os.path.realpath(path))
    return sorted(libs)


def run(name, quick, steps, warmup, seed, jit):
    """Builds the program (fresh model, same seed) and runs `steps` steps; returns timings and losses."""
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    step = SETUP[name](quick, rng, jit, seed) if name == "sdpoint" else SETUP[name](quick, rng, jit)
    losses, marks = [], []
    for it in range(steps):
        losses.append(step(it))
        marks.append(time.perf_counter())
    losses = [float(v) if isinstance(v, float) else float(v.item()) for v in losses]  # fetched at the end
    t1 = time.perf_counter()
    head = marks[warmup - 1] if warmup > 0 else t0
    steady = (steps - warmup) / (marks[-1] - head) if steps > warmup and marks[-1] > head else float("nan")
    return steady, t1 - t0, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default="all")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count())
    ap.add_argument("--no-jit", action="store_true", help="only torch_eager")
    ap.add_argument("--repeat", type=int, default=1, help="runs per program/framework; steps/s is their median")
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()
    if args.warmup >= args.steps:
        ap.error("--warmup must be smaller than --steps")
    names = PROGRAMS if args.programs == "all" else args.programs.split(",")
    for n in names:
        if n not in SETUP:
            ap.error(f"unknown program {n!r}; known: {', '.join(PROGRAMS)}")
    torch.set_num_threads(args.threads)
    torch.nn.Linear(8, 8)(torch.randn(4, 8))  # loads the BLAS
    blas = blas_libs()
    impl = [b for b in blas if "libopenblas" in os.path.basename(b)] or [b for b in blas if "libblas" in b]
    blas_str = os.path.basename(os.path.dirname(impl[0])) + "/" + os.path.basename(impl[0]) if impl else "none loaded"
    print(f"torch {torch.__version__}: {torch.get_num_threads()} threads (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})",
          file=sys.stderr)
    print(f"torch BLAS: {blas_str} (loaded: {', '.join(blas)})" + ("" if any("openblas" in b for b in blas) else
                                        "  (WARNING: not OpenBLAS -- slow reference BLAS?)"), file=sys.stderr)
    rows = []
    total = len(names) * (1 if args.no_jit else 2)
    k = 0
    for name in names:
        for fw in ("torch_eager", "torch_jit"):
            if fw == "torch_jit" and args.no_jit:
                continue
            k += 1
            if fw == "torch_jit" and name in NO_JIT:
                rows.append(dict(program=name, framework=fw, steps_per_s="", final_loss="", first_loss="", total_s="",
                                 steps=args.steps, warmup=args.warmup, threads=args.threads, blas=blas_str,
                                 note=NO_JIT[name]))
                print(f"[{k}/{total}] {name} {fw}: n/a ({NO_JIT[name]})", file=sys.stderr, flush=True)
                continue
            print(f"[{k}/{total}] {name} {fw} ... ", end="", file=sys.stderr, flush=True)
            runs = [run(name, args.quick, args.steps, args.warmup, args.seed, fw == "torch_jit")
                    for _ in range(max(1, args.repeat))]
            rates = sorted(r[0] for r in runs)
            sps = statistics.median(rates)
            _, total_s, losses = runs[0]
            spread = f" [{rates[0]:.2f}..{rates[-1]:.2f}]" if len(rates) > 1 else ""
            print(f"{sps:.2f} steps/s{spread} (total {total_s:.2f} s, loss {losses[0]:.4g} -> {losses[-1]:.4g})",
                  file=sys.stderr, flush=True)
            rows.append(dict(program=name, framework=fw, steps_per_s=f"{sps:.6g}", final_loss=repr(losses[-1]),
                             first_loss=repr(losses[0]), total_s=f"{total_s:.6g}", steps=args.steps,
                             warmup=args.warmup, threads=args.threads, blas=blas_str, note=""))
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["program", "framework", "steps_per_s", "final_loss", "first_loss", "total_s",
                                          "steps", "warmup", "threads", "blas", "note"])
        w.writeheader()
        w.writerows(rows)
    print(f"torch CSV: {args.csv}", file=sys.stderr)


if __name__ == "__main__":
    main()
