"""Initializers, as MXNet's ``mx.init``: Xavier, MSRAPrelu, Uniform, Normal, Orthogonal,
Constant, Zero, One and Mixed (by name pattern).

An initializer is called with a parameter's name and an array to fill:
``init(name, arr)``. The base class picks the method by the name's ending, as
MXNet 1.x does: "weight" gets `_init_weight` (the one subclasses define),
"bias" and "beta" zeros, "gamma" ones, running/moving means zeros and
variances ones. A parameter's own initializer (``Dense(weight_initializer=...)``)
fills it whatever its name. Blocks take initializers as objects or by name:
``net.initialize("xavier")``, ``Dense(4, weight_initializer=Normal(0.02))``.
Values are drawn on the CPU (``deft.random.seed`` repeats them) and copied to
the parameter's device.
"""
import numbers
import re
from typing import Any, Callable, Dict, Sequence, Union

import numpy as _np

from ..ndarray import NDArray, full
from ..nd import random as _random

__all__ = ["Initializer", "Xavier", "MSRAPrelu", "Uniform", "Normal", "Orthogonal",
           "Constant", "Zero", "One", "Mixed", "create"]


class Initializer:
    """The base of initializers: subclasses define ``_init_weight(name, arr)``, filling
    `arr` in place (``arr[:] = values``)."""

    def __call__(self, name: str, arr: NDArray) -> None:
        if name.endswith("weight"):
            self._init_weight(name, arr)
        elif name.endswith(("bias", "beta", "running_mean", "moving_mean", "min")):
            self._init_zero(name, arr)
        elif name.endswith(("gamma", "running_var", "moving_var", "max")):
            self._init_one(name, arr)
        else:  # a parameter of another name (PReLU's alpha, an imported model's) is a weight
            self._init_weight(name, arr)

    def _init_weight(self, name: str, arr: NDArray) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _init_weight(name, arr)")

    @staticmethod
    def _init_zero(name: str, arr: NDArray) -> None:
        arr[:] = 0.0

    @staticmethod
    def _init_one(name: str, arr: NDArray) -> None:
        arr[:] = 1.0

    def _args(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in vars(self).items())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._args()})"


class Constant(Initializer):
    """Weights of `value` (as a parameter's own initializer: every element, whatever
    its name; block-wide, biases still get zeros and gammas ones, as in MXNet)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def _init_weight(self, name: str, arr: NDArray) -> None:
        arr[:] = self.value


class Zero(Constant):
    """Zeros."""

    def __init__(self) -> None:
        super().__init__(0.0)


class One(Constant):
    """Ones."""

    def __init__(self) -> None:
        super().__init__(1.0)


class Uniform(Initializer):
    """Weights from U(-scale, scale) (MXNet's default initializer, scale 0.07)."""

    def __init__(self, scale: float = 0.07) -> None:
        self.scale = scale

    def _init_weight(self, name: str, arr: NDArray) -> None:
        arr[:] = _random.uniform(-self.scale, self.scale, arr.shape, _float_dtype(arr))


class Normal(Initializer):
    """Weights from N(0, sigma^2)."""

    def __init__(self, sigma: float = 0.01) -> None:
        self.sigma = sigma

    def _init_weight(self, name: str, arr: NDArray) -> None:
        arr[:] = _random.normal(0.0, self.sigma, arr.shape, _float_dtype(arr))


class Xavier(Initializer):
    """Glorot's initialization, as MXNet's Xavier: weights uniform in [-s, s]
    (rnd_type "uniform") or normal of deviation s ("gaussian"), where
    s = sqrt(magnitude / factor) and factor is the mean of fan-in and fan-out
    ("avg"), fan-in ("in") or fan-out ("out"); a convolution kernel's fans
    count its receptive field. A 1-D weight takes its length as both fans."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3) -> None:
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier: rnd_type is {rnd_type!r}, expected 'uniform' or "
                             f"'gaussian'")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier: factor_type is {factor_type!r}, expected 'avg', 'in' "
                             f"or 'out'")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, magnitude

    def _init_weight(self, name: str, arr: NDArray) -> None:
        shape = arr.shape
        if not shape:
            raise ValueError(f"Xavier cannot initialize '{name}', a 0-d array: it needs fans")
        receptive = float(_np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in = (shape[1] if len(shape) > 1 else shape[0]) * receptive
        fan_out = shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[
            self.factor_type]
        scale = float(_np.sqrt(self.magnitude / factor))
        dtype = _float_dtype(arr)
        if self.rnd_type == "uniform":
            arr[:] = _random.uniform(-scale, scale, shape, dtype)
        else:
            arr[:] = _random.normal(0.0, scale, shape, dtype)


class MSRAPrelu(Xavier):
    """He et al.'s initialization for (P)ReLU nets: Xavier, gaussian, of magnitude
    2 / (1 + slope^2)."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self.slope = slope

    def _args(self) -> str:
        return f"factor_type={self.factor_type!r}, slope={self.slope!r}"


class Orthogonal(Initializer):
    """An orthogonal matrix (Saxe et al.) of the weight's rows by the rest of its
    elements, times `scale`; drawn from a uniform ("uniform") or normal ("normal")
    matrix's singular vectors."""

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        if rand_type not in ("uniform", "normal"):
            raise ValueError(f"Orthogonal: rand_type is {rand_type!r}, expected 'uniform' or "
                             f"'normal'")
        self.scale, self.rand_type = scale, rand_type

    def _init_weight(self, name: str, arr: NDArray) -> None:
        if len(arr.shape) < 2:
            raise ValueError(f"Orthogonal cannot initialize '{name}' of shape {arr.shape}: "
                             f"it needs at least 2 dimensions")
        rows, cols = arr.shape[0], int(_np.prod(arr.shape[1:]))
        draw = (_random.uniform(-1.0, 1.0, (rows, cols)) if self.rand_type == "uniform"
                else _random.normal(0.0, 1.0, (rows, cols)))
        tmp = draw.asnumpy().astype(_np.float64)
        u, _, v = _np.linalg.svd(tmp, full_matrices=False)
        q = u if u.shape == tmp.shape else v
        arr[:] = (self.scale * q).reshape(arr.shape).astype(_np.float32)


class Mixed:
    """The initializer of the first pattern (a regular expression, matched at the
    start of the name) a parameter's name matches: ``Mixed([".*bias", ".*"],
    [Constant(0.1), Xavier()])``. The one picked fills the parameter whatever its
    name (MXNet's would still give a bias zeros: the pattern says what is meant)."""

    def __init__(self, patterns: Sequence[str], initializers: Sequence[Any]) -> None:
        if len(patterns) != len(initializers):
            raise ValueError(f"Mixed: {len(patterns)} patterns for {len(initializers)} "
                             f"initializers")
        self.map = [(re.compile(p), create(i)) for p, i in zip(patterns, initializers)]

    def __call__(self, name: str, arr: NDArray) -> None:
        for pattern, init in self.map:
            if pattern.match(name):
                if isinstance(init, Initializer):
                    init._init_weight(name, arr)
                else:
                    init(name, arr)
                return
        raise ValueError(f"Mixed: parameter '{name}' matches none of the patterns "
                         f"{[p.pattern for p, _ in self.map]} (add '.*' last for a default)")

    def __repr__(self) -> str:
        return f"Mixed({[(p.pattern, i) for p, i in self.map]})"


_NAMED: Dict[str, Callable[[], Initializer]] = {
    "xavier": Xavier, "msraprelu": MSRAPrelu, "uniform": Uniform, "normal": Normal,
    "orthogonal": Orthogonal, "zero": Zero, "zeros": Zero, "one": One, "ones": One,
}

InitLike = Union[Initializer, Mixed, str, float, Callable[[str, NDArray], None], None]


def create(init: InitLike) -> Any:
    """An initializer from an object, a name ("xavier", "zeros", "normal", ...) or a
    number (a Constant); None stays None."""
    if init is None or isinstance(init, (Initializer, Mixed)):
        return init
    if isinstance(init, numbers.Real) and not isinstance(init, bool):
        return Constant(float(init))
    if isinstance(init, str):
        maker = _NAMED.get(init.lower())
        if maker is None:
            raise ValueError(f"init {init!r} is not an initializer deft knows (names: "
                             f"{', '.join(sorted(_NAMED))}; or an Initializer or a number)")
        return maker()
    if callable(init):  # any callable(name, arr) filling arr
        return init
    raise TypeError(f"init {init!r} ({type(init).__name__}) is not an initializer, a name "
                    f"or a number")


def initial_value(init: Any, name: str, shape, dtype: str, own: bool = False) -> NDArray:
    """A new array of `shape` and `dtype` filled by initializer `init` for parameter
    `name`. A parameter's `own` initializer fills it whatever its name (as MXNet's
    ``create(init)._init_weight``); a block-wide one picks by the name's ending."""
    arr = full(shape, 0.0, dtype)
    if own and isinstance(init, Initializer):
        init._init_weight(name, arr)
    else:
        init(name, arr)
    return arr


def _float_dtype(arr: NDArray):
    """The dtype to draw random numbers in: the array's if a float, else float32."""
    dtype = arr.dtype
    return dtype if isinstance(dtype, str) or dtype.kind == "f" else "float32"
