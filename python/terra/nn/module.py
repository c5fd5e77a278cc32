"""terra.nn.Module: subclassable in Python like torch.nn.Module, and Parameter."""
from collections import OrderedDict

from .. import _terra
from .._terra import Tensor


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter when assigned as an attribute. It is the
    same tensor as `data` (same value and autograd state) when `data` is a leaf."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _terra.zeros(0)
        Tensor.__init__(self, data if data.is_leaf else data.detach())
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)


class Module:
    """Base of every layer. Assigning a Parameter / Module / buffer attribute registers it;
    parameters() yields own parameters, then each child's, in registration order."""

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_modules"] = OrderedDict()
        d["training"] = True

    # ---- registration ------------------------------------------------------------------------
    def _registries(self):
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise AttributeError(f"cannot assign to {type(self).__name__} before Module.__init__() "
                                 "was called") from None

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            params, buffers, modules = self._registries()
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params, buffers, modules = self._registries()
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif "_parameters" in self.__dict__:
            params, buffers, modules = self._registries()
            if name in params:
                if value is not None:
                    raise TypeError(f"cannot assign {type(value).__name__} as parameter '{name}' "
                                    "(a terra.nn.Parameter or None is required)")
                params[name] = None
            elif name in buffers:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"cannot assign {type(value).__name__} as buffer '{name}'")
                buffers[name] = value
            elif name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign {type(value).__name__} as child module '{name}'")
                modules[name] = None
        # Also a plain attribute: attribute reads stay as fast as for any Python object.
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for reg in self._registries():
            reg.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            param = Parameter(param)
        params, buffers, modules = self._registries()
        params[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor):
        params, buffers, modules = self._registries()
        buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def register_module(self, name, module):
        setattr(self, name, module)

    add_module = register_module

    # ---- traversal ---------------------------------------------------------------------------
    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, p in m._parameters.items():
                if p is None or p._id in seen:
                    continue
                seen.add(p._id)
                yield (mprefix + "." + name if mprefix else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (mprefix + "." + name if mprefix else name), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix=""):
        # Iterative (deep models must not overflow the stack); pre-order, registration order.
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            p, m = stack.pop()
            if id(m) in memo:
                continue
            memo.add(id(m))
            yield p, m
            kids = [(p + "." + n if p else n, c) for n, c in m._modules.items() if c is not None]
            stack.extend(reversed(kids))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def apply(self, fn):
        for m in list(self.modules())[::-1]:
            fn(m)
        return self

    # ---- modes and state ---------------------------------------------------------------------
    def train(self, mode=True):
        self.__dict__["training"] = bool(mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def is_training(self):
        return self.training

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def state_dict(self):
        out = OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b.detach()
        return out

    def load_state_dict(self, state, strict=True):
        own = OrderedDict(list(self.named_parameters()) + list(self.named_buffers()))
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise ValueError(f"[load_state_dict] missing keys {missing}, unexpected keys {unexpected}")
        with _no_grad():
            for k, t in own.items():
                if k in state:
                    src = state[k]
                    if not isinstance(src, Tensor):
                        from .._api import tensor
                        src = tensor(src, dtype=t.dtype)
                    if tuple(src.shape) != tuple(t.shape):
                        raise ValueError(f"[load_state_dict] {k}: shape {tuple(src.shape)} does not match "
                                         f"{tuple(t.shape)}")
                    t.copy_(src)
        return missing, unexpected

    # ---- calling and printing ----------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, m in self.named_children():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        head = type(self).__name__ + "(" + self.extra_repr()
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _no_grad():
    from .._api import no_grad
    return no_grad()
