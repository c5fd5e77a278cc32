"""Python-side helpers of the terra package: terra.tensor(), grad-mode context managers, Tensor
printing and protocols. Kept apart from __init__.py because terra exports dtype names (terra.bool,
terra.float) that would shadow the builtins here."""
import functools

import numpy as np

from . import _repr, _terra
from ._terra import Tensor


def _default_dtype(arr, data):
    kind = arr.dtype.kind
    if kind == "f":
        # Python floats make float32 (torch's default); numpy data keeps its precision.
        if arr.dtype == np.float64 and isinstance(data, (np.ndarray, np.generic)):
            return _terra.float64
        if arr.dtype == np.float64:
            return _terra.float32
        return _terra.float32 if arr.dtype.itemsize <= 4 else _terra.float64
    if kind in "iu":
        return _terra.int64
    if kind == "b":
        return _terra.bool
    raise ValueError(f"[tensor] cannot make a tensor from data of numpy kind {arr.dtype} "
                     "(expected numbers, bools, or nested lists of them)")


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays or a Tensor)."""
    if isinstance(data, Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
            data = [x._numpy_read() if isinstance(x, Tensor) else x for x in data]
        arr = np.asarray(data)
        t = _terra._from_numpy(arr, _default_dtype(arr, data) if dtype is None else dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_numpy(array):
    """A tensor sharing `array`'s memory, as torch.from_numpy: writes through either side are seen
    by the other, and the tensor keeps the array alive. It shares when the array is a C-contiguous,
    aligned, writable ndarray of float32, float64, int64 or bool in native byte order; anything
    else is copied (float16 becomes float32, other integer types int64, as terra.tensor does)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"[from_numpy] expected a numpy.ndarray, got {type(array).__name__}")
    t = _terra._share_numpy(array)
    return t if t is not None else tensor(array)


def as_tensor(data, dtype=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtype):
        return data
    return tensor(data, dtype=dtype)


class _GradMode:
    _enabled = None

    def __init__(self):
        self._prev = []

    def __enter__(self):
        self._prev.append(_terra.is_grad_enabled())
        _terra.set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _terra.set_grad_enabled(self._prev.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Context manager / decorator: ops inside record no autograd history."""
    _enabled = False


class enable_grad(_GradMode):
    _enabled = True


# ---- Tensor protocols implemented in Python ----------------------------------------------------

class _GradFn:
    """What made a tensor (torch's grad_fn), by name: repr shows `grad_fn=<MulBackward0>`."""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object>"


def _grad_fn(self):
    name = self._grad_fn_name
    return None if name is None else _GradFn(name)


def _tensor_iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


def _tensor_format(self, spec):
    if self.ndim == 0 or self.numel() == 1:
        return format(self.item(), spec)
    return format(repr(self), spec)


_terra.dtype.__repr__ = lambda self: "terra." + self.name
_terra.dtype.__str__ = lambda self: "terra." + self.name
Tensor.__repr__ = _repr.tensor_repr
Tensor.__str__ = _repr.tensor_repr
Tensor.grad_fn = property(_grad_fn)
Tensor.__iter__ = _tensor_iter
Tensor.__format__ = _tensor_format
Tensor.__array_ufunc__ = None  # numpy defers to Tensor's reflected operators
Tensor.__array_priority__ = 1000


# ---- max / min: torch's forms (all elements; (values, indices) along a dim; elementwise pair) ----
import collections as _collections

MaxMinResult = _collections.namedtuple("MaxMinResult", ["values", "indices"])


def _extreme(reduce_all, reduce_dim, arg, pairwise):
    def fn(input, dim=None, keepdim=False):
        if dim is None:
            return reduce_all(input)
        if isinstance(dim, Tensor):
            return pairwise(input, dim)
        return MaxMinResult(reduce_dim(input, dim, keepdim), arg(input, dim, keepdim))
    return fn


max_ = _extreme(lambda x: _terra._max(x), lambda x, d, k: _terra._max_dim(x, d, k),
                lambda x, d, k: _terra.argmax(x, d, k), lambda a, b: _terra.maximum(a, b))
min_ = _extreme(lambda x: _terra._min(x), lambda x, d, k: _terra._min_dim(x, d, k),
                lambda x, d, k: _terra.argmin(x, d, k), lambda a, b: _terra.minimum(a, b))
max_.__name__, min_.__name__ = "max", "min"
if hasattr(_terra, "_max"):
    Tensor.max = max_
    Tensor.min = min_
