"""Nanoseconds per element of common elementwise ops on 1M floats (random inputs, random mask),
best of 3 rounds of 10 calls, one process. Finds loops that stay scalar.
Usage: PYTHONPATH=build/python /usr/bin/python3 bench/elementwise_ops.py"""
import time

import terra

F = terra.nn.functional
N = 1 << 20
x = terra.randn([N])
y = terra.randn([N])
m = x > 0
OPS = {
    'relu': lambda: F.relu(x), 'leaky_relu': lambda: F.leaky_relu(x, 0.1), 'gelu': lambda: F.gelu(x),
    'sigmoid': lambda: terra.sigmoid(x), 'tanh': lambda: terra.tanh(x), 'exp': lambda: terra.exp(x),
    'log': lambda: terra.log(x.abs()), 'sqrt': lambda: terra.sqrt(x.abs()), 'softplus': lambda: F.softplus(x),
    'abs': lambda: x.abs(), 'neg': lambda: -x, 'sign': lambda: terra.sign(x), 'clamp': lambda: terra.clamp(x, -0.5, 0.5),
    'pow2': lambda: x ** 2.0, 'square': lambda: x * x, 'add': lambda: x + y, 'mul_s': lambda: x * 2.5,
    'sub_s': lambda: x - 1.0, 'rsub': lambda: 1.0 - x, 'div': lambda: x / y, 'gt': lambda: x > y,
    'gt_s': lambda: x > 0.1, 'maximum': lambda: terra.maximum(x, y), 'minimum': lambda: terra.minimum(x, y),
    'where': lambda: terra.where(m, x, y), 'where_s': lambda: terra.where(m, x, 0.0),
    'masked_fill': lambda: x.masked_fill(m, 0.0), 'logical_and': lambda: terra.logical_and(m, m),
}
for name, f in OPS.items():
    f()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(10):
            f()
        best = min(best, (time.perf_counter() - t0) / 10)
    print(f"{name:12s} {best * 1e9 / N:7.2f} ns/elem")
