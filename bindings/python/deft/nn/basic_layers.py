"""Basic layers: Dense, Dropout, Embedding, Flatten, Lambda and the sequential containers."""
from typing import Any, Callable, Optional, Sequence, Union

from .. import nd
from ..ndarray import invoke
from .block import Block, HybridBlock, Parameter
from .init import InitLike


class Dense(HybridBlock):
    """y = activation(x W^T + b); in_units may be left 0 to take it from the first input.

    With flatten (the default) x is (batch, ...) taken as (batch, features);
    without, the layer applies to x's last axis.
    """

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 flatten: bool = True, dtype: Any = "float32",
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_units: int = 0) -> None:
        super().__init__()
        self.units, self.activation, self.use_bias, self.flatten = (units, activation,
                                                                    use_bias, flatten)
        self.weight = Parameter("weight", (units, in_units), dtype, weight_initializer)
        if use_bias:
            self.bias = Parameter("bias", (units,), dtype, bias_initializer)

    def infer_shape(self, x, *args):
        features = _prod(x.shape[1:]) if self.flatten else x.shape[-1]
        self.weight.shape = (self.units, features)

    def forward(self, x):
        inputs = (x, self.weight.data(), self.bias.data()) if self.use_bias else (
            x, self.weight.data())
        y = invoke("FullyConnected", inputs, {"num_hidden": self.units, "flatten": self.flatten,
                                              "no_bias": not self.use_bias})
        return y if self.activation is None else invoke("Activation", (y,),
                                                        {"act_type": self.activation})

    def __repr__(self):
        act = "linear" if self.activation is None else f"Activation({self.activation})"
        return f"Dense({self.weight.shape[1] or '?'} -> {self.units}, {act})"


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


class Dropout(HybridBlock):
    """Zeroes each element with probability `rate` in training mode, scaling the rest by
    1 / (1 - rate); the identity in predict mode. `axes` share one mask value along them."""

    def __init__(self, rate: float = 0.5, axes: Sequence[int] = ()) -> None:
        super().__init__()
        if not 0 <= rate < 1:
            raise ValueError(f"Dropout: rate is {rate}, expected 0 <= rate < 1")
        self.rate, self.axes = rate, tuple(axes)

    def forward(self, x):
        if self.rate == 0:
            return invoke("_copy", (x,))
        return invoke("Dropout", (x,), {"p": self.rate, "axes": self.axes})

    def __repr__(self):
        return f"Dropout(p = {self.rate}, axes={self.axes})"


class Embedding(HybridBlock):
    """Rows of an (input_dim, output_dim) table picked by integer indices:
    (...) -> (..., output_dim)."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: InitLike = None, sparse_grad: bool = False) -> None:
        super().__init__()
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": sparse_grad}
        self.weight = Parameter("weight", (input_dim, output_dim), dtype, weight_initializer)

    def forward(self, x):
        return invoke("Embedding", (x, self.weight.data()), self._kwargs)

    def __repr__(self):
        return "Embedding({input_dim} -> {output_dim}, {dtype})".format(**self._kwargs)


class Flatten(HybridBlock):
    """(batch, x1, x2, ...) to (batch, x1 * x2 * ...)."""

    def forward(self, x):
        return invoke("Flatten", (x,))

    def __repr__(self):
        return "Flatten"


def _operator(name):
    fn = getattr(nd, name, None)
    if fn is None or not callable(fn):
        raise ValueError(f"'{name}' is not an operator in deft.nd")
    return fn


class Lambda(Block):
    """A function as a block: the name of a deft.nd operator ("tanh") or any callable
    taking the inputs."""

    def __init__(self, function: Union[str, Callable]) -> None:
        super().__init__()
        if isinstance(function, str):
            function = _operator(function)
        elif not callable(function):
            raise ValueError(f"Lambda: {function!r} is neither an operator name nor callable")
        self._function = function

    def forward(self, *args):
        return self._function(*args)

    def __repr__(self):
        return f"Lambda({getattr(self._function, '__name__', self._function)})"


class HybridLambda(HybridBlock):
    """A function as a hybridizable block: the name of a deft.nd operator, or a callable
    taking (F, x, *args) as in Gluon, where F is deft.nd."""

    def __init__(self, function: Union[str, Callable]) -> None:
        super().__init__()
        if isinstance(function, str):
            op = _operator(function)
            self._function = lambda F, *args: op(*args)
            self._name = function
        elif callable(function):
            self._function, self._name = function, getattr(function, "__name__", "function")
        else:
            raise ValueError(f"HybridLambda: {function!r} is neither an operator name nor "
                             f"callable")

    def forward(self, x, *args):
        return self._function(nd, x, *args)

    def __repr__(self):
        return f"HybridLambda({self._name})"


class _Chain:
    """Children applied one after another (Sequential and HybridSequential)."""

    def __init__(self, *blocks: Block) -> None:
        super().__init__()
        self.add(*blocks)

    def add(self, *blocks: Block) -> "_Chain":
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
