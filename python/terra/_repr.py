"""repr(tensor) the way PyTorch prints tensors, so a torch user reads terra output without a second
look: `tensor([[1., 2.],\n        [3., 4.]])`, the dtype only when it is not one torch leaves out
(float32, int64, bool), `requires_grad=True` or `grad_fn=<...>`, and large tensors summarized with
`...` (more than 1000 elements: the first and last 3 along each dim).

Printing is a fetch point: the value is read through Tensor.numpy() (in lazy and co-execution the
pending value is materialized first). The layout rules (widths, fixed/int/scientific number style,
line wrapping at 80 columns, suffix wrapping) follow torch 1.13's printed output; tests/python/
test_repr.py compares the two."""
import math

import numpy as np

THRESHOLD = 1000   # more elements than this: summarize
EDGEITEMS = 3      # elements kept at each end of a summarized dim
LINEWIDTH = 80
PRECISION = 4
_PREFIX = "tensor("
_DEFAULT_DTYPES = ("float32", "int64", "bool")  # torch prints no dtype= for these (non-empty)


def _edges(a):
    """The elements a summarized print shows, as a flat array (they alone choose the format)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    if a.ndim == 1:
        return a
    return np.concatenate([_edges(row) for row in a]) if len(a) else a.reshape(-1)


class _Format:
    """One number style and width for every element of a print, as torch chooses them: floats are
    'int' style (`1.`) when every nonzero finite value is whole, scientific when the nonzero
    finite magnitudes span more than 1000x, exceed 1e8 or (non-whole values) go below 1e-4, fixed
    with 4 decimals otherwise; zeros, nan and inf take no part in the choice."""

    def __init__(self, flat, floating):
        self.floating = floating
        self.int_mode, self.sci_mode, self.width = True, False, 1
        if not floating:
            for v in flat.tolist():
                self.width = max(self.width, len(str(v)))
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        mags = np.abs(vals).astype(np.float64)
        lo, hi = float(mags.min()), float(mags.max())
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        wide = hi / lo > 1000.0 or hi > 1.0e8
        self.sci_mode = wide if self.int_mode else (wide or lo < 1.0e-4)
        for v in vals.tolist():
            if self.sci_mode:
                n = len(f"{v:.{PRECISION}e}")
            elif self.int_mode:
                n = len(f"{v:.0f}") + 1  # the trailing "."
            else:
                n = len(f"{v:.{PRECISION}f}")
            self.width = max(self.width, n)

    def __call__(self, v):
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{PRECISION}f}"
        return s.rjust(self.width)


def _vector(a, indent, summarize, fmt):
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        items = [fmt(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] + \
                [fmt(v) for v in a[-EDGEITEMS:].tolist()]
    else:
        items = [fmt(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _body(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_body(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + ["..."] + \
               [_body(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)]
    else:
        rows = [_body(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _with_suffixes(text, suffixes, indent):
    """Appends ", suffix" items, each on a new line when it would pass the line width."""
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > LINEWIDTH:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            out.append(", " + s)
            last += len(s) + 2
    return "".join(out) + ")"


def grad_fn_suffix(t):
    name = t._grad_fn_name
    if name is not None:
        return f"grad_fn=<{name}>"
    return "requires_grad=True" if t.requires_grad else None


def tensor_repr(t):
    a = np.asarray(t._numpy_read())  # the fetch point (a read-only view: printing shares nothing)
    dtype = t.dtype.name
    suffixes = []
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if dtype != "float32":
            suffixes.append(f"dtype=terra.{dtype}")
        text = _PREFIX + "[]"
    else:
        if dtype not in _DEFAULT_DTYPES:
            suffixes.append(f"dtype=terra.{dtype}")
        summarize = a.size > THRESHOLD
        floating = a.dtype.kind == "f"
        fmt = _Format(_edges(a) if summarize else a.reshape(-1), floating)
        text = _PREFIX + _body(a, len(_PREFIX), summarize, fmt)
    g = grad_fn_suffix(t)
    if g:
        suffixes.append(g)
    return _with_suffixes(text, suffixes, len(_PREFIX))
