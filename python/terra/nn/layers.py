"""Layers. Layers with parameters or state wrap a C++ layer of libterra (terra::nn): the C++ layer
initializes them (same init as the C++ API) and its tensors are this module's Parameters and
buffers (the same tensors, not copies). forward is the functional op on those attributes, so a
reassigned `layer.weight = Parameter(...)` takes effect as in torch. Containers and parameter-free
layers are plain Python."""
from collections import OrderedDict

from .. import _terra
from . import functional as F
from .module import Module, Parameter

__all__ = ["Linear", "Conv2d", "ConvTranspose2d", "BatchNorm2d", "LayerNorm", "Embedding", "MultiheadAttention",
           "Dropout", "ReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU", "Identity", "Flatten",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Sequential", "ModuleList", "ModuleDict",
           "CrossEntropyLoss", "MSELoss"]


class _CppLayer(Module):
    """Holds a C++ layer (self._cpp) and registers its parameters and buffers under their names."""

    def _adopt(self, cpp):
        self.__dict__["_cpp"] = cpp
        for name, t in cpp.named_parameters():
            if "." not in name:
                self.register_parameter(name, Parameter(t))
        for name, t in cpp.named_buffers():
            if "." not in name:
                self.register_buffer(name, t)
        for attr in ("weight", "bias"):
            if attr not in self._parameters:
                object.__setattr__(self, attr, None)
        cpp.train(self.training)

    def train(self, mode=True):
        super().train(mode)
        self._cpp.train(mode)
        return self


class Linear(_CppLayer):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._adopt(_terra._nn.Linear(in_features, out_features, bias))

    @classmethod
    def _from_cpp(cls, cpp):
        self = cls.__new__(cls)
        Module.__init__(self)
        self.in_features, self.out_features = cpp.in_features, cpp.out_features
        self._adopt(cpp)
        return self

    def forward(self, x):
        return _terra.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(_CppLayer):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
        super().__init__()
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self._adopt(_terra._nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias))

    def forward(self, x):
        return _terra.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class ConvTranspose2d(_CppLayer):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1):
        super().__init__()
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.groups, self.dilation = groups, dilation
        self._adopt(_terra._nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
                                               output_padding, groups, bias, dilation))

    def forward(self, x):
        return _terra.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                       self.groups, self.dilation)


class BatchNorm2d(_CppLayer):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self._adopt(_terra._nn.BatchNorm2d(num_features, eps, momentum, affine))

    def forward(self, x):
        return _terra.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                                 self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class LayerNorm(_CppLayer):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self._adopt(_terra._nn.LayerNorm(list(shape), eps, elementwise_affine))

    def forward(self, x):
        return _terra.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(_CppLayer):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self._adopt(_terra._nn.Embedding(num_embeddings, embedding_dim))
        if padding_idx is not None:
            with _terra_no_grad():
                self.weight[padding_idx] = 0.0

    def forward(self, indices):
        return _terra.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class MultiheadAttention(_CppLayer):
    """batch_first=True layout ([B, S, E]); forward returns the output only (no weights)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        cpp = _terra._nn.MultiheadAttention(embed_dim, num_heads, dropout, bias)
        self._adopt(cpp)
        self.out_proj = Linear._from_cpp(cpp.out_proj)

    def forward(self, query, key=None, value=None, attn_mask=None, key_padding_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        return self._cpp.forward(query, key, value, attn_mask, key_padding_mask)

    @staticmethod
    def causal_mask(size):
        return _terra._nn.MultiheadAttention.causal_mask(size)


def _terra_no_grad():
    from .._api import no_grad
    return no_grad()


# ---- parameter-free layers -------------------------------------------------------------------
class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"[nn.Dropout] p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return _terra.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class ReLU(Module):
    def forward(self, x):
        return _terra.relu(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return _terra.leaky_relu(x, self.negative_slope)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return _terra.gelu(x, self.approximate)


class Tanh(Module):
    def forward(self, x):
        return _terra.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return _terra.sigmoid(x)


class Softmax(Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _terra.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return _terra.log_softmax(x, self.dim)


class Identity(Module):
    def forward(self, x):
        return x


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return _terra.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(MaxPool2d):
    def forward(self, x):
        return _terra.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return _terra.adaptive_avg_pool2d(x, self.output_size)


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input, target):
        return _terra.cross_entropy(input, target, self.ignore_index, self.reduction)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return _terra.mse_loss(input, target, self.reduction)


# ---- containers ------------------------------------------------------------------------------
class Sequential(Module):
    """Sequential(m0, m1, ...) or Sequential(OrderedDict(name=module, ...)); children "0", "1", ..."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*mods[i])
        return mods[i]


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return ModuleList(mods[i]) if isinstance(i, slice) else mods[i]


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k):
        return self._modules[k]

    def __setitem__(self, k, m):
        self.add_module(k, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()
