"""terra.optim: SGD, Adam, AdamW (the C++ optimizers of libterra; they update the parameters in
place, so they work on any Module's parameters())."""
from . import _terra

_o = _terra._optim


def _param_list(params):
    params = list(params)
    if params and isinstance(params[0], dict):
        raise ValueError("[optim] parameter groups are not supported; pass an iterable of tensors")
    if not params:
        raise ValueError("[optim] got an empty parameter list")
    return params


class Optimizer:
    def __init__(self, cpp):
        self._cpp = cpp

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        self._cpp.step()
        return loss

    def zero_grad(self, set_to_none=True):
        self._cpp.zero_grad()

    @property
    def lr(self):
        return self._cpp.lr

    @lr.setter
    def lr(self, value):
        self._cpp.lr = value

    @property
    def param_groups(self):
        """torch-style view for learning-rate schedules: [{"params": [...], "lr": lr}] (writes to lr apply)."""
        return [_ParamGroup(self)]

    def state_tensors(self):
        return self._cpp.state()


class _ParamGroup(dict):
    def __init__(self, opt):
        super().__init__(params=opt._cpp.params(), lr=opt._cpp.lr)
        self._opt = opt

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        if k == "lr":
            self._opt._cpp.lr = v


class SGD(Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(_o.SGD(_param_list(params), lr, momentum, dampening, weight_decay, nesterov))


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(_o.Adam(_param_list(params), lr, tuple(betas), eps, weight_decay))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(_o.AdamW(_param_list(params), lr, tuple(betas), eps, weight_decay))
