"""terra: a deep-learning runtime with imperative-symbolic co-execution.

The C++ core is terra._terra; this package re-exports it with the PyTorch-style names of API.md.
"""
from . import _terra
from ._terra import Tensor, dtype, float32, float64, int64, manual_seed, is_grad_enabled, set_grad_enabled
from ._api import tensor, from_numpy, as_tensor, no_grad, enable_grad

# Every public name of the extension (ops, factories, Engine, ...) is a terra.* name.
for _name in dir(_terra):
    if not _name.startswith("_"):
        globals()[_name] = getattr(_terra, _name)
del _name
if hasattr(_terra, "_max"):
    from ._api import max_ as max, min_ as min  # noqa: A001

from . import nn, optim  # noqa: E402

__all__ = [n for n in dir() if not n.startswith("_")]
