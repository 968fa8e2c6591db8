"""Layers: Dense, Sequential, activations and Dropout."""
from .. import autograd
from ..ndarray import invoke
from ..nd import random as _random
from .block import Block, HybridBlock, Parameter, fresh_input


class Dense(HybridBlock):
    """y = activation(x W^T + b); in_units may be left 0 to take it from the first input."""

    def __init__(self, units, activation=None, in_units=0, use_bias=True, dtype="float32"):
        super().__init__()
        self.units, self.activation, self.use_bias = units, activation, use_bias
        self.weight = Parameter("weight", (units, in_units), dtype)
        if use_bias:
            self.bias = Parameter("bias", (units,), dtype, init="zeros")

    def infer_shape(self, x, *args):
        self.weight.shape = (self.units, x.shape[-1] if len(x.shape) <= 2 else
                             int(_prod(x.shape[1:])))

    def forward(self, x):
        inputs = (x, self.weight.data(), self.bias.data()) if self.use_bias else (
            x, self.weight.data())
        y = invoke("FullyConnected", inputs, {"num_hidden": self.units,
                                              "no_bias": not self.use_bias})
        return y if self.activation is None else invoke("Activation", (y,),
                                                        {"act_type": self.activation})

    def __repr__(self):
        return f"Dense({self.weight.shape[1] or '?'} -> {self.units}, {self.activation})"


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


class Activation(HybridBlock):
    """relu, sigmoid, tanh or softrelu."""

    def __init__(self, act_type):
        super().__init__()
        self.act_type = act_type

    def forward(self, x):
        return invoke("Activation", (x,), {"act_type": self.act_type})


class Dropout(HybridBlock):
    """Zeroes each element with probability p while training (scaling the rest by 1/(1-p))."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"p is {p}, expected 0 <= p < 1")
        self.p = p

    def forward(self, x):
        if not autograd.is_training() or self.p == 0:
            return x
        shape, dtype, device, p = x.shape, x.dtype, x.device, self.p
        mask = fresh_input(
            lambda: (_random.uniform(0, 1, shape, dtype, device) >= p) * (1.0 / (1.0 - p)))
        return x * mask


class _Chain:
    """Children applied one after another (Sequential and HybridSequential)."""

    def __init__(self, *blocks):
        super().__init__()
        self.add(*blocks)

    def add(self, *blocks):
        for b in blocks:
            self.register_child(b)
        return self

    def forward(self, x):
        for child in self._children.values():
            x = child(x)
        return x

    def __getitem__(self, i):
        return list(self._children.values())[i]

    def __len__(self):
        return len(self._children)


class Sequential(_Chain, Block):
    """Children applied one after another."""


class HybridSequential(_Chain, HybridBlock):
    """A Sequential that hybridize() compiles as one graph."""
