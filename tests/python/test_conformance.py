"""Conformance of every terra op exposed in Python with PyTorch (Debian's torch 1.13, an oracle
only). For each case and each floating dtype (float32, float64): random inputs from a fixed seed,
terra's outputs vs torch's, and the gradients of every differentiable input of
sum_i(out_i * W_i) with random weights W_i. Random ops are checked by their statistics.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest -v tests/python/test_conformance.py
"""
import math
import unittest
import zlib

import numpy as np
import torch

import terra
import terra.nn.functional as TF
import torch.nn.functional as PF

TOL = {"float32": 1e-4, "float64": 1e-10}
# Gradients go through more ops (a backward pass) than the forward: a slightly wider band.
GRAD_TOL_FACTOR = 2


class NS:
    """The namespace a case's function is written against: terra or torch."""

    def __init__(self, lib, F, name):
        self.T, self.F, self.name = lib, F, name


TERRA = NS(terra, TF, "terra")
TORCH = NS(torch, PF, "torch")


class I:
    """One input. kind 'f': floating (the case's dtype) in [lo, hi); 'i': int64 in [lo, hi);
    'b': bool. layout 'T': built transposed (last two dims) then transposed back; 'S': built with
    the last dim doubled then sliced with step 2 (non-contiguous). values: fixed values."""

    def __init__(self, *shape, kind="f", lo=-2.0, hi=2.0, layout=None, grad=True, values=None, sign=False):
        self.shape, self.kind, self.lo, self.hi = tuple(shape), kind, lo, hi
        self.layout, self.grad, self.values, self.sign = layout, grad, values, sign


def _torch_dtype(name):
    return {"float32": torch.float32, "float64": torch.float64}[name]


def _np_dtype(name):
    return {"float32": np.float32, "float64": np.float64}[name]


def make_inputs(inputs, dtype, seed, want_grad):
    rng = np.random.default_rng(seed)
    tl, tin, pl, pin = [], [], [], []
    for spec in inputs:
        shape = spec.shape
        if spec.layout == "T":
            base_shape = shape[:-2] + (shape[-1], shape[-2])
        elif spec.layout == "S":
            base_shape = shape[:-1] + (shape[-1] * 2,)
        else:
            base_shape = shape
        if spec.values is not None:
            arr = np.asarray(spec.values).reshape(base_shape)
            if spec.kind == "f":
                arr = arr.astype(_np_dtype(dtype))
        elif spec.kind == "f":
            arr = rng.uniform(spec.lo, spec.hi, size=base_shape)
            if spec.sign:
                arr = arr * rng.choice([-1.0, 1.0], size=base_shape)
            arr = arr.astype(_np_dtype(dtype))
        elif spec.kind == "i":
            arr = rng.integers(int(spec.lo), int(spec.hi), size=base_shape).astype(np.int64)
        else:
            arr = rng.random(size=base_shape) < 0.5
        grad = want_grad and spec.kind == "f" and spec.grad
        t_leaf = terra.tensor(arr, dtype=getattr(terra, dtype) if spec.kind == "f" else None)
        p_leaf = torch.tensor(arr)
        if grad:
            t_leaf.requires_grad_(True)
            p_leaf.requires_grad_(True)
        t_in, p_in = t_leaf, p_leaf
        if spec.layout == "T":
            t_in, p_in = t_leaf.transpose(-1, -2), p_leaf.transpose(-1, -2)
        elif spec.layout == "S":
            t_in, p_in = t_leaf[..., ::2], p_leaf[..., ::2]
        tl.append(t_leaf), tin.append(t_in), pl.append(p_leaf), pin.append(p_in)
    return tl, tin, pl, pin


def as_list(out):
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def check_close(tc, got, want, tol, what):
    g = np.asarray(got.numpy() if isinstance(got, terra.Tensor) else got, dtype=np.float64)
    w = np.asarray(want.detach().numpy() if isinstance(want, torch.Tensor) else want, dtype=np.float64)
    tc.assertEqual(g.shape, w.shape, f"{what}: shape {g.shape} != torch's {w.shape}")
    scale = 1.0 + (np.nanmax(np.abs(w[np.isfinite(w)])) if np.isfinite(w).any() else 0.0)
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=what)


class Case:
    def __init__(self, name, covers, inputs, fn, torch_fn=None, grad=True, dtypes=("float32", "float64"),
                 tol=None, exact=False):
        self.name, self.covers, self.inputs = name, list(covers), inputs
        self.fn, self.torch_fn = fn, torch_fn or fn
        self.grad, self.dtypes, self.tol, self.exact = grad, dtypes, tol or {}, exact

    def run(self, tc):
        for dtype in self.dtypes:
            with tc.subTest(dtype=dtype):
                self.run_dtype(tc, dtype)

    def run_dtype(self, tc, dtype):
        tol = self.tol.get(dtype, TOL[dtype])
        seed = zlib.crc32(self.name.encode())
        tl, tin, pl, pin = make_inputs(self.inputs, dtype, seed, self.grad)
        outs_t = as_list(self.fn(TERRA, *tin))
        outs_p = as_list(self.torch_fn(TORCH, *pin))
        tc.assertEqual(len(outs_t), len(outs_p), "number of outputs")
        for k, (a, b) in enumerate(zip(outs_t, outs_p)):
            tc.assertEqual(a.dtype.name, str(b.dtype).replace("torch.", ""), f"output {k} dtype")
            if self.exact or a.dtype.name in ("int64", "bool"):
                np.testing.assert_array_equal(a.numpy(), b.detach().numpy(), err_msg=f"{self.name} output {k}")
            else:
                check_close(tc, a, b, tol, f"{self.name} [{dtype}] output {k}")
        if not self.grad:
            return
        rng = np.random.default_rng(seed + 1)
        loss_t, loss_p = None, None
        for a, b in zip(outs_t, outs_p):
            if not b.requires_grad:
                continue
            w = rng.uniform(-1, 1, size=tuple(b.shape)).astype(_np_dtype(dtype))
            lt = (a * terra.tensor(w)).sum()
            lp = (b * torch.tensor(w)).sum()
            loss_t = lt if loss_t is None else loss_t + lt
            loss_p = lp if loss_p is None else loss_p + lp
        tc.assertIsNotNone(loss_p, f"{self.name}: no differentiable output")
        loss_t.backward()
        loss_p.backward()
        for k, (a, b) in enumerate(zip(tl, pl)):
            if not b.requires_grad:
                continue
            if b.grad is None:
                tc.assertTrue(a.grad is None or not np.any(a.grad.numpy()), f"{self.name} grad {k}: torch has none")
                continue
            tc.assertIsNotNone(a.grad, f"{self.name} [{dtype}] input {k} got no gradient")
            check_close(tc, a.grad, b.grad, tol * GRAD_TOL_FACTOR, f"{self.name} [{dtype}] grad of input {k}")


CASES = []


def case(*args, **kwargs):
    CASES.append(Case(*args, **kwargs))


# ---- arithmetic, broadcasting, scalars -------------------------------------------------------
case("add/broadcast", ["add"], [I(3, 4), I(4)], lambda n, a, b: n.T.add(a, b))
case("add/operator_T", ["add"], [I(3, 4, layout="T"), I(3, 1)], lambda n, a, b: a + b)
case("add/scalar_both_sides", ["add"], [I(2, 3)], lambda n, a: [a + 2.5, 1.5 + a])
case("sub/broadcast_3d", ["sub"], [I(2, 1, 4), I(3, 1)], lambda n, a, b: n.T.sub(a, b))
case("sub/scalar_both_sides", ["sub"], [I(2, 3, layout="S")], lambda n, a: [a - 2.0, 3.0 - a])
case("mul/broadcast", ["mul"], [I(2, 3, 4), I(1, 3, 1)], lambda n, a, b: n.T.mul(a, b))
case("mul/scalar_and_same", ["mul"], [I(5)], lambda n, a: [a * a, 2.0 * a, a * -3.0])
case("div/broadcast", ["div"], [I(3, 4), I(4, lo=0.5, hi=2.0, sign=True)], lambda n, a, b: n.T.div(a, b))
case("div/scalar_both_sides", ["div"], [I(3, lo=0.5, hi=2.0)], lambda n, a: [a / 4.0, 2.0 / a])
case("neg", ["neg"], [I(2, 3, layout="T")], lambda n, a: [-a, n.T.neg(a)])
case("promote/int_plus_float", ["add", "mul", "cast"], [I(3, kind="i", lo=-5, hi=5), I(3)],
     lambda n, i, f: [i + f, f * i, i * 2, i + 0.5])
case("matmul/2d", ["matmul"], [I(3, 4), I(4, 5)], lambda n, a, b: n.T.matmul(a, b))
case("matmul/transposed_operands", ["matmul"], [I(3, 4, layout="T"), I(4, 5, layout="T")], lambda n, a, b: a @ b)
case("matmul/batched_broadcast", ["matmul"], [I(2, 3, 4), I(4, 2)], lambda n, a, b: a @ b)
case("matmul/vector", ["matmul"], [I(4), I(4, 3), I(3)], lambda n, v, m, w: [v @ m, m @ w, v @ v])
case("matmul/batch_both", ["matmul"], [I(2, 1, 3, 4), I(3, 4, 2)], lambda n, a, b: a @ b)

# ---- views and shape ops ---------------------------------------------------------------------
case("reshape/view", ["view", "reshape"], [I(2, 6)], lambda n, a: [a.reshape(3, 4), a.reshape((4, -1)), a.view(12)])
case("reshape/non_contiguous_copy", ["reshape", "copy"], [I(3, 4, layout="T")], lambda n, a: a.reshape(12))
case("transpose_permute", ["permute", "transpose"], [I(2, 3, 4)],
     lambda n, a: [a.transpose(0, 2), a.permute(1, 2, 0), n.T.transpose(a, -1, 0)])
case("slice_select/getitem", ["slice", "select"], [I(4, 5, 3)],
     lambda n, a: [a[1], a[:, 1:4], a[..., ::2], a[1:3, -1], a[None, 2, :, 1], a[-1, 1:5:2, 0]])
case("slice_select/explicit", ["slice", "select", "slice_backward"], [I(6, 4)],
     lambda n, a: [n.T.select(a, 1, 2), a.narrow(0, 1, 3) if n.name == "torch" else n.T.slice(a, 0, 1, 4)],
     torch_fn=lambda n, a: [torch.select(a, 1, 2), a.narrow(0, 1, 3)])
case("expand", ["expand"], [I(3, 1)], lambda n, a: [a.expand(3, 4), a.expand(2, 3, 5)])
case("squeeze_unsqueeze_flatten", ["view", "squeeze", "unsqueeze", "flatten"], [I(2, 1, 3)],
     lambda n, a: [a.squeeze(1), a.unsqueeze(0), a.flatten(), a.flatten(1), a.squeeze()])
case("contiguous_clone", ["copy", "contiguous", "clone"], [I(3, 4, layout="T")], lambda n, a: [a.contiguous(), a.clone()])
case("cast/to_float64_and_back", ["cast"], [I(3, 4)],
     lambda n, a: [a.double() * 1.5, a.float()], dtypes=("float32",))
case("cast/to_int_exact", ["cast"], [I(5, lo=-4, hi=4)], lambda n, a: [a.long(), a.bool()], grad=False)

# ---- reductions --------------------------------------------------------------------------------
case("sum/all_dims_keepdim", ["sum"], [I(2, 3, 4)],
     lambda n, a: [a.sum(), a.sum(1), a.sum((0, 2)), a.sum(-1, keepdim=True), n.T.sum(a, dim=0)])
case("sum/non_contiguous", ["sum"], [I(3, 5, layout="T"), I(2, 4, layout="S")],
     lambda n, a, b: [a.sum(0), b.sum(1), a.sum()])
case("mean", ["mean", "sum", "div", "mul"], [I(2, 3, 4)],
     lambda n, a: [a.mean(), a.mean(1), a.mean((0, 2), keepdim=True), n.T.mean(a, dim=-1)])
case("max_min/all", ["max_all", "min_all", "max", "min"], [I(3, 4)], lambda n, a: [a.max(), a.min(), n.T.max(a)])
case("max_min/dim", ["max_dim", "min_dim", "argmax", "argmin", "max", "min"], [I(3, 4, 2)],
     lambda n, a: [a.max(1).values, a.max(1).indices, a.min(0, keepdim=True).values, n.T.min(a, -1).indices])
case("argmax_argmin", ["argmax", "argmin"], [I(4, 5)],
     lambda n, a: [a.argmax(), a.argmin(), a.argmax(1), a.argmin(0, keepdim=True)], grad=False)
case("var_std", ["var", "std", "sqrt"], [I(3, 5)],
     lambda n, a: [a.var(), a.var(1), a.var(0, unbiased=False), a.std(1, keepdim=True), n.T.std(a)])

# ---- elementwise math --------------------------------------------------------------------------
case("exp_log", ["exp", "log"], [I(3, 4, lo=0.1, hi=3.0)], lambda n, a: [n.T.exp(a), n.T.log(a), a.exp(), a.log()])
case("sqrt_rsqrt", ["sqrt", "rsqrt"], [I(3, 4, lo=0.2, hi=3.0, layout="T")], lambda n, a: [n.T.sqrt(a), n.T.rsqrt(a)])
case("abs_sign", ["abs", "sign"], [I(3, 4)], lambda n, a: [n.T.abs(a), abs(a), n.T.sign(a) * a])
case("pow", ["pow", "pow_scalar"], [I(3, 4, lo=0.5, hi=2.0), I(3, 4, lo=-1.5, hi=1.5)],
     lambda n, a, b: [n.T.pow(a, b), a ** 2, a ** 0.5, 2.0 ** b, a.pow(3)])
case("clamp", ["clamp"], [I(4, 5)], lambda n, a: [n.T.clamp(a, -0.5, 0.7), a.clamp(min=0.1), a.clamp(max=-0.2)])
case("maximum_minimum", ["maximum", "minimum"], [I(3, 4), I(4)],
     lambda n, a, b: [n.T.maximum(a, b), n.T.minimum(a, b)])
case("compare", ["eq", "ne", "lt", "le", "gt", "ge"], [I(3, 4), I(4)],
     lambda n, a, b: [a == b, a != b, a < b, a <= b, a > b, a >= b, a > 0.5, a == a, 0.0 < a, a.ge(0.1)], grad=False)
case("logical", ["logical_not", "logical_and", "logical_or"], [I(3, 4, kind="b"), I(4, kind="b")],
     lambda n, a, b: [n.T.logical_not(a), n.T.logical_and(a, b), n.T.logical_or(a, b), ~a, a & b, a | b],
     grad=False, dtypes=("float32",))
case("where", ["where", "gt"], [I(3, 4), I(3, 4), I(4)],
     lambda n, c, a, b: [n.T.where(c > 0, a, b), n.T.where(c > 0, a, 0.5), n.T.where(c < 0, -1.0, b)])
case("masked_fill", ["masked_fill", "lt"], [I(3, 4), I(4)], lambda n, a, m: [a.masked_fill(m < 0, -2.5)])

# ---- activations -----------------------------------------------------------------------------
case("relu", ["relu"], [I(3, 4, layout="T")], lambda n, a: [n.T.relu(a), n.F.relu(a), a.relu()])
case("sigmoid_tanh", ["sigmoid", "tanh"], [I(3, 4, lo=-4, hi=4)],
     lambda n, a: [n.T.sigmoid(a), n.T.tanh(a), a.sigmoid(), a.tanh()])
case("leaky_relu", ["leaky_relu"], [I(3, 4)], lambda n, a: [n.F.leaky_relu(a), n.F.leaky_relu(a, 0.2)])
case("gelu", ["gelu", "gelu_backward"], [I(3, 4, lo=-3, hi=3)],
     lambda n, a: [n.F.gelu(a), n.F.gelu(a, approximate="tanh")])
case("softplus", ["softplus"], [I(3, 4, lo=-5, hi=5)],
     lambda n, a: [n.F.softplus(a), n.F.softplus(a, beta=2.0, threshold=3.0)])

# ---- softmax and losses ----------------------------------------------------------------------
case("softmax", ["softmax", "softmax_backward"], [I(3, 5, layout="T")],
     lambda n, a: [n.T.softmax(a, 1), n.F.softmax(a, 0), a.softmax(-1)])
case("log_softmax", ["log_softmax", "log_softmax_backward"], [I(2, 3, 4)],
     lambda n, a: [n.T.log_softmax(a, 1), n.F.log_softmax(a, -1)])
case("cross_entropy/basic", ["cross_entropy", "cross_entropy_backward"],
     [I(6, 5), I(6, kind="i", lo=0, hi=5)], lambda n, x, t: n.F.cross_entropy(x, t))
case("cross_entropy/ignore_index_and_reductions", ["cross_entropy"],
     [I(7, 4), I(7, kind="i", values=[0, 3, -100, 2, 1, -100, 3]), I(7, kind="i", values=[0, 1, 1, 2, 1, 3, 1])],
     lambda n, x, t, u: [n.F.cross_entropy(x, t), n.F.cross_entropy(x, t, reduction="sum"),
                         n.F.cross_entropy(x, t, reduction="none"), n.F.cross_entropy(x, u, ignore_index=1)])
case("cross_entropy/spatial", ["cross_entropy"], [I(2, 3, 4, 5), I(2, 4, 5, kind="i", lo=0, hi=3)],
     lambda n, x, t: n.F.cross_entropy(x, t))
case("nll_loss", ["nll_loss", "nll_loss_backward"], [I(5, 4), I(5, kind="i", lo=0, hi=4)],
     lambda n, x, t: [n.F.nll_loss(x, t), n.F.nll_loss(x, t, reduction="none")])
case("mse_loss", ["mse_loss"], [I(3, 4), I(3, 4, layout="T")],
     lambda n, a, b: [n.F.mse_loss(a, b), n.F.mse_loss(a, b, reduction="sum"), n.F.mse_loss(a, b, reduction="none")])
case("bce_with_logits", ["binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_backward"],
     [I(3, 4, lo=-30, hi=30), I(3, 4, lo=0, hi=1)],
     lambda n, x, t: [n.F.binary_cross_entropy_with_logits(x, t),
                      n.F.binary_cross_entropy_with_logits(x, t, reduction="none")])

# ---- linear, conv, pool, norm ----------------------------------------------------------------
case("linear", ["linear", "matmul", "add"], [I(4, 3), I(5, 3), I(5)],
     lambda n, x, w, b: [n.F.linear(x, w, b), n.F.linear(x, w)])
case("linear_relu", ["linear_relu"], [I(2, 4, 3), I(5, 3), I(5)],
     lambda n, x, w, b: terra._terra.linear_relu(x, w, b), torch_fn=lambda n, x, w, b: n.F.relu(n.F.linear(x, w, b)))
case("linear/3d_input", ["linear"], [I(2, 4, 3), I(5, 3, layout="T"), I(5)], lambda n, x, w, b: n.F.linear(x, w, b))
case("conv2d/basic", ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"],
     [I(2, 3, 7, 6), I(4, 3, 3, 3), I(4)], lambda n, x, w, b: n.F.conv2d(x, w, b))
case("conv2d/stride_padding_nobias", ["conv2d"], [I(2, 3, 8, 8), I(5, 3, 3, 3)],
     lambda n, x, w: [n.F.conv2d(x, w, None, 2, 1), n.F.conv2d(x, w, stride=(1, 2), padding=(2, 0))])
case("conv2d/dilation_groups", ["conv2d"], [I(1, 4, 9, 9), I(6, 2, 3, 3), I(6)],
     lambda n, x, w, b: [n.F.conv2d(x, w, b, dilation=2, groups=2), n.F.conv2d(x, w, b, 1, 1, 1, 2)])
case("conv2d/non_contiguous_input", ["conv2d"], [I(2, 2, 5, 6, layout="T"), I(3, 2, 2, 2)],
     lambda n, x, w: n.F.conv2d(x, w, padding=1))
case("conv_transpose2d", ["conv_transpose2d"], [I(2, 4, 5, 5), I(4, 3, 3, 3), I(3)],
     lambda n, x, w, b: [n.F.conv_transpose2d(x, w, b), n.F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                                              output_padding=1)])
case("conv_transpose2d/groups_dilation", ["conv_transpose2d"], [I(1, 4, 4, 4), I(4, 2, 2, 2)],
     lambda n, x, w: n.F.conv_transpose2d(x, w, None, stride=2, groups=2, dilation=2))
case("max_pool2d", ["max_pool2d", "max_pool2d_backward"], [I(2, 3, 8, 8)],
     lambda n, x: [n.F.max_pool2d(x, 2), n.F.max_pool2d(x, 3, 2, 1), n.F.max_pool2d(x, (2, 3), (1, 2))])
case("avg_pool2d", ["avg_pool2d", "avg_pool2d_backward"], [I(2, 3, 7, 7)],
     lambda n, x: [n.F.avg_pool2d(x, 2), n.F.avg_pool2d(x, 3, 2, 1),
                   n.F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)])
case("adaptive_avg_pool2d", ["adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"], [I(2, 3, 7, 5)],
     lambda n, x: [n.F.adaptive_avg_pool2d(x, 1), n.F.adaptive_avg_pool2d(x, (3, 2))])
case("upsample_nearest2d", ["upsample_nearest2d", "upsample_nearest2d_backward"], [I(1, 2, 3, 4)],
     lambda n, x: [n.F.interpolate(x, scale_factor=2), n.F.interpolate(x, size=(5, 7))],
     torch_fn=lambda n, x: [PF.interpolate(x, scale_factor=2.0, mode="nearest"),
                            PF.interpolate(x, size=(5, 7), mode="nearest")])
case("batch_norm/training", ["batch_norm", "batch_norm_backward"], [I(4, 3, 5, 5), I(3), I(3)],
     lambda n, x, w, b: n.F.batch_norm(x, None, None, w, b, True))
case("batch_norm/eval_running_stats", ["batch_norm"],
     [I(4, 3, 5, 5), I(3), I(3), I(3, grad=False), I(3, lo=0.5, hi=2.0, grad=False)],
     lambda n, x, w, b, rm, rv: n.F.batch_norm(x, rm, rv, w, b, False))
case("batch_norm/no_affine_2d", ["batch_norm"], [I(6, 4)], lambda n, x: n.F.batch_norm(x, None, None, training=True))
case("layer_norm", ["layer_norm", "layer_norm_backward"], [I(3, 4, 5), I(4, 5), I(4, 5)],
     lambda n, x, w, b: [n.F.layer_norm(x, (4, 5), w, b), n.F.layer_norm(x, (5,), eps=1e-3)])

# torch 1.13 has no F.scaled_dot_product_attention: the oracle is the explicit composition.
def _torch_attention(q, k, v, mask=None, causal=False, scale=None):
    s = (q * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        s = s.masked_fill(mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


_KEEP = [[0, 1, 1, 0, 1, 0], [1, 0, 0, 1, 0, 1], [0, 0, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]]  # no full row
case("scaled_dot_product_attention", ["scaled_dot_product_attention", "scaled_dot_product_attention_backward"],
     [I(2, 3, 4, 8), I(2, 3, 6, 8, layout="T"), I(2, 3, 6, 5), I(3, 4, 6, lo=-1, hi=1),
      I(4, 6, kind="b", values=np.array(_KEEP, dtype=bool))],
     lambda n, q, k, v, m, b: [n.F.scaled_dot_product_attention(q, k, v),
                               n.F.scaled_dot_product_attention(q, k, v, m, is_causal=True),
                               n.F.scaled_dot_product_attention(q, k, v, b, scale=0.3)],
     torch_fn=lambda n, q, k, v, m, b: [_torch_attention(q, k, v), _torch_attention(q, k, v, m, causal=True),
                                        _torch_attention(q, k, v, b, scale=0.3)])

# ---- joining, splitting, indexing, embedding -------------------------------------------------
case("cat", ["cat"], [I(2, 3), I(4, 3, layout="T"), I(1, 3)],
     lambda n, a, b, c: [n.T.cat([a, b, c], 0), n.T.cat([a, a], 1), n.T.cat([a, c], dim=0)])
case("stack", ["stack", "cat"], [I(2, 3), I(2, 3, layout="S")],
     lambda n, a, b: [n.T.stack([a, b]), n.T.stack([a, b], 1), n.T.stack([a, b], dim=-1)])
case("split", ["split", "slice"], [I(7, 4)],
     lambda n, a: list(n.T.split(a, 3)) + list(a.split([1, 3], 1)) + list(n.T.split(a, [2, 5], dim=0)))
case("chunk", ["chunk", "slice"], [I(5, 6)], lambda n, a: list(a.chunk(3, 1)) + list(n.T.chunk(a, 2)))
case("index_select", ["index_select", "index_select_backward"],
     [I(5, 4), I(6, kind="i", values=[4, 0, 2, 2, 1, 4]), I(3, kind="i", values=[3, 0, 3])],
     lambda n, a, i, j: [n.T.index_select(a, 0, i), a.index_select(1, j)])
case("gather", ["gather", "gather_backward"], [I(3, 5), I(3, 4, kind="i", lo=0, hi=5), I(2, 5, kind="i", lo=0, hi=3)],
     lambda n, a, i, j: [n.T.gather(a, 1, i), a.gather(0, j)])
case("embedding", ["embedding", "embedding_backward"], [I(2, 3, kind="i", values=[1, 4, 1, 0, 3, 4]), I(5, 3)],
     lambda n, i, w: [n.F.embedding(i, w), n.F.embedding(i, w, padding_idx=4)])

# ---- creation ---------------------------------------------------------------------------------
case("creation", ["full", "arange", "eye", "zeros", "ones", "full_like", "zeros_like", "ones_like", "scalar_tensor"],
     [I(2, 3)],
     lambda n, a: [n.T.zeros(2, 3), n.T.ones((3,)), n.T.full((2, 2), 1.5), n.T.arange(5), n.T.arange(2, 9, 3),
                   n.T.eye(3), n.T.eye(2, 4), n.T.zeros_like(a), n.T.ones_like(a), n.T.full_like(a, -2.0),
                   n.T.zeros(2, dtype=n.T.float64), n.T.scalar_tensor(3.0)],
     grad=False, dtypes=("float32",))

# ---- in place ----------------------------------------------------------------------------------
def _inplace_arith(n, a, b):
    # On a non-leaf: autograd goes through add_/sub_ (gradients of a and b are checked).
    y = a * 1.0
    y.add_(b)
    y.sub_(a * 0.5)
    y += 1.0
    y -= b
    y.add_(2.5)
    return y


def _inplace_mul_div(n, a, b):
    # mul_/div_ have no gradient in terra (the binding refuses them on tensors that require grad,
    # see test_api): forward only.
    y = a.clone()
    y.mul_(b)
    y.div_(b * 2.0)
    y *= 3.0
    y /= b
    y.mul_(-1.5)
    return y


def _inplace_write(n, a, b):
    # Writes into views (x[idx] = ..., copy_, fill_) without autograd: terra rejects in-place
    # writes into views of tensors that require grad (a documented limitation).
    z = a.clone()
    z[0] = b
    z[1:, 1] = 3.0
    z[-1, ::2] = b[:2]
    w = a.clone()
    w.copy_(b.expand(3, 4))
    v = a.clone()
    v.fill_(0.5)
    v[1].fill_(-1.0)
    return [z, w, v]


case("inplace/add_sub", ["add_", "sub_"], [I(3, 4), I(4, lo=0.5, hi=1.5)], _inplace_arith)
case("inplace/mul_div", ["mul_", "div_"], [I(3, 4), I(4, lo=0.5, hi=1.5)], _inplace_mul_div, grad=False)
case("inplace/write_views", ["copy_", "fill_", "slice", "select"], [I(3, 4), I(4)], _inplace_write, grad=False)


class TestConformance(unittest.TestCase):
    pass


def _make_test(c):
    def test(self):
        c.run(self)
    test.__doc__ = c.name
    return test


for _c in CASES:
    setattr(TestConformance, "test_" + _c.name.replace("/", "__"), _make_test(_c))


# ---- random ops: statistics only (the streams differ from torch's) ---------------------------
class TestRandom(unittest.TestCase):
    def test_rand_randn_statistics_and_seed(self):
        terra.manual_seed(123)
        a = terra.rand(200000).numpy().astype(np.float64)
        self.assertTrue((a >= 0).all() and (a < 1).all())
        self.assertAlmostEqual(a.mean(), 0.5, delta=0.005)
        self.assertAlmostEqual(a.var(), 1 / 12, delta=0.003)
        n = terra.randn(200000, dtype=terra.float64).numpy()
        self.assertAlmostEqual(n.mean(), 0.0, delta=0.01)
        self.assertAlmostEqual(n.std(), 1.0, delta=0.01)
        self.assertAlmostEqual(float(((n - n.mean()) ** 3).mean()), 0.0, delta=0.03)
        terra.manual_seed(7)
        x1 = terra.randn(100).numpy()
        terra.manual_seed(7)
        x2 = terra.randn(100).numpy()
        np.testing.assert_array_equal(x1, x2)
        self.assertFalse(np.array_equal(x1, terra.randn(100).numpy()))

    def test_randint_bernoulli(self):
        terra.manual_seed(1)
        r = terra.randint(-3, 4, (100000,)).numpy()
        self.assertEqual(r.dtype, np.int64)
        self.assertEqual(set(np.unique(r)), set(range(-3, 4)))
        self.assertAlmostEqual(r.mean(), 0.0, delta=0.05)
        p = terra.full((100000,), 0.3)
        b = terra.bernoulli(p).numpy()
        self.assertEqual(set(np.unique(b)), {0.0, 1.0})
        self.assertAlmostEqual(b.mean(), 0.3, delta=0.01)
        self.assertIn("bernoulli_p", terra._terra._registered_ops())

    def test_dropout_statistics_and_gradient(self):
        terra.manual_seed(3)
        for dtype in ("float32", "float64"):
            x = terra.ones(400, 500, dtype=getattr(terra, dtype), requires_grad=True)
            y = TF.dropout(x, 0.25, True)
            a = y.numpy()
            frac0 = (a == 0).mean()
            self.assertAlmostEqual(frac0, 0.25, delta=0.005)
            np.testing.assert_allclose(a[a != 0], 1 / 0.75, rtol=TOL[dtype])
            self.assertAlmostEqual(a.mean(), 1.0, delta=0.01)
            y.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), a, rtol=TOL[dtype])  # grad = mask / (1 - p)
            # eval mode and p = 0: identity; p = 1: zeros
            np.testing.assert_array_equal(TF.dropout(x, 0.25, False).numpy(), x.numpy())
            np.testing.assert_array_equal(TF.dropout(x, 0.0, True).numpy(), x.numpy())
            self.assertFalse(TF.dropout(x, 1.0, True).numpy().any())
        m = terra.nn.Dropout(0.5)
        m.eval()
        z = terra.randn(10)
        np.testing.assert_array_equal(m(z).numpy(), z.numpy())

    def test_batch_norm_running_stats_match_torch(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(6, 3, 4, 4))
        for dtype in ("float32", "float64"):
            tx = terra.tensor(x, dtype=getattr(terra, dtype))
            px = torch.tensor(x, dtype=_torch_dtype(dtype))
            trm, trv = terra.zeros(3, dtype=tx.dtype), terra.ones(3, dtype=tx.dtype)
            prm, prv = torch.zeros(3, dtype=px.dtype), torch.ones(3, dtype=px.dtype)
            for _ in range(3):
                TF.batch_norm(tx, trm, trv, None, None, True, 0.2, 1e-5)
                PF.batch_norm(px, prm, prv, None, None, True, 0.2, 1e-5)
            check_close(self, trm, prm, TOL[dtype], "running_mean")
            check_close(self, trv, prv, TOL[dtype], "running_var")


# ---- optimizers: terra.optim vs torch.optim (they own the ops adam_step_scalars, sgd_dampening_factor and
# the fused updates)
class TestOptim(unittest.TestCase):
    # The optimizers run fused_adam_ / fused_sgd_ (the whole update in one op); the per-parameter
    # ops remain public and are checked bit for bit against them in tests/ops/optim_fused_test.cpp.
    OPS = ("adam_step_scalars", "sgd_dampening_factor", "adam_exp_avg_", "adam_exp_avg_sq_", "adam_param_",
           "sgd_momentum_", "sgd_param_", "fused_adam_", "fused_sgd_")

    def _run(self, lib, make, dtype, steps=6):
        """f(p) = sum(c * (p - t)^2) on two parameters; the second has no gradient on step 2."""
        rng = np.random.default_rng(5)
        vals = [rng.uniform(-2, 2, size=s).astype(_np_dtype(dtype)) for s in ((3, 4), (5,))]
        cs = [rng.uniform(0.5, 2, size=v.shape).astype(v.dtype) for v in vals]
        if lib is terra:
            ps = [terra.tensor(v, dtype=getattr(terra, dtype)).requires_grad_() for v in vals]
            cs = [terra.tensor(c, dtype=getattr(terra, dtype)) for c in cs]
        else:
            ps = [torch.tensor(v).requires_grad_() for v in vals]
            cs = [torch.tensor(c) for c in cs]
        opt = make(lib, ps)
        for s in range(steps):
            opt.zero_grad(set_to_none=True)  # torch 1.13's default keeps zero gradients: it would step
            for k, (p, c) in enumerate(zip(ps, cs)):
                if k == 1 and s == 2:
                    continue
                (c * (p - 0.25) * (p - 0.25)).sum().backward()
            opt.step()
        return ps

    def test_adam_adamw_sgd_dampening_match_torch(self):
        makers = {
            "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), weight_decay=0.02),
            "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.05, weight_decay=0.1),
            "sgd_dampening": lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3,
                                                           weight_decay=0.01),
            "sgd_nesterov": lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                          weight_decay=0.01),
            "sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.1),
        }
        for name, make in makers.items():
            for dtype in ("float32", "float64"):
                got, want = self._run(terra, make, dtype), self._run(torch, make, dtype)
                for k, (g, w) in enumerate(zip(got, want)):
                    check_close(self, g, w.detach(), TOL[dtype], f"{name} {dtype} parameter {k}")

    def test_step_counts_are_tensors(self):
        p = terra.tensor(np.ones(3, dtype=np.float32)).requires_grad_()
        opt = terra.optim.Adam([p], lr=0.1)
        for _ in range(4):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        self.assertEqual(opt._cpp.step_count, 4)
        counts = [t.item() for t in opt.state_tensors()[:2]]  # step count, the parameter's count
        self.assertEqual(counts, [4.0, 4.0])


class TestCoverage(unittest.TestCase):
    def test_every_registered_and_exposed_op_has_a_case(self):
        covered = set()
        for c in CASES:
            covered.update(c.covers)
        covered.update({"rand", "randn", "randint", "bernoulli", "bernoulli_p", "dropout", "dropout_mask",
                        "rand_like", "randn_like", "batch_norm"})  # TestRandom
        # Exposed helpers that are not ops of their own: checked where they are used.
        covered.update({"sum_to"})
        covered.update(TestOptim.OPS)
        missing_registered = sorted(set(terra._terra._registered_ops()) - covered)
        missing_exposed = sorted(set(terra._terra._exposed_ops()) - covered)
        self.assertEqual(missing_registered, [], "registered ops without a conformance case")
        self.assertEqual(missing_exposed, [], "Python ops without a conformance case")


class TestSumTo(unittest.TestCase):
    def test_sum_to(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 4))
        got = terra.sum_to(terra.tensor(x), (3, 1)).numpy()
        np.testing.assert_allclose(got, x.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-6)


if __name__ == "__main__":
    unittest.main(verbosity=1)
