"""Transforms of samples, as Gluon's ``data.vision.transforms``: Compose, Cast,
ToTensor and Normalize. Each takes a NumPy array or an NDArray and gives the
same kind back, so they run in DataLoader worker threads on NumPy samples or
on deft arrays alike; use them with ``dataset.transform_first(...)``."""
from typing import Any, Callable, Sequence, Union

import numpy as _np

from .._lib import DTYPE_NAMES, NUMPY_OF, dtype_code
from ..ndarray import NDArray, array, invoke

Number = Union[float, Sequence[float]]


class Compose:
    """The transforms one after another."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self) -> str:
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


class Cast:
    """The values converted to `dtype`."""

    def __init__(self, dtype: Any = "float32") -> None:
        self.dtype = DTYPE_NAMES[dtype_code(dtype)]

    def __call__(self, x: Any) -> Any:
        if isinstance(x, NDArray):
            return x.astype(self.dtype)
        return _np.asarray(x).astype(NUMPY_OF[dtype_code(self.dtype)])

    def __repr__(self) -> str:
        return f"Cast({self.dtype})"


class ToTensor:
    """An image of (H, W, C) (or a batch of (N, H, W, C)) values in [0, 255] to
    float32 (C, H, W) (or (N, C, H, W)) in [0, 1]; a 2-D (H, W) image gets C = 1."""

    def __call__(self, x: Any) -> Any:
        ndim = x.ndim
        if ndim not in (2, 3, 4):
            raise ValueError(f"ToTensor: an image is (H, W, C) or (N, H, W, C), this one is "
                             f"{tuple(x.shape)}")
        axes = (2, 0, 1) if ndim == 3 else (0, 3, 1, 2)
        if isinstance(x, NDArray):
            x = x.astype("float32") if ndim != 2 else x.expand_dims(2).astype("float32")
            return invoke("transpose", (x,), {"axes": axes if ndim != 2 else (2, 0, 1)}) / 255.0
        x = _np.asarray(x, dtype=_np.float32)
        if ndim == 2:
            x, axes = x[:, :, None], (2, 0, 1)
        return _np.ascontiguousarray(x.transpose(axes)) / _np.float32(255.0)

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """(x - mean) / std per channel of a (C, H, W) or (N, C, H, W) array; a number
    applies to every channel."""

    def __init__(self, mean: Number = 0.0, std: Number = 1.0) -> None:
        self.mean = _np.atleast_1d(_np.asarray(mean, dtype=_np.float32))
        self.std = _np.atleast_1d(_np.asarray(std, dtype=_np.float32))
        if (self.std == 0).any():
            raise ValueError(f"Normalize: std {std} has a zero")

    def __call__(self, x: Any) -> Any:
        ndim = x.ndim
        if ndim not in (3, 4):
            raise ValueError(f"Normalize: expected (C, H, W) or (N, C, H, W), got "
                             f"{tuple(x.shape)}")
        channels = x.shape[ndim - 3]
        for name, v in (("mean", self.mean), ("std", self.std)):
            if v.size not in (1, channels):
                raise ValueError(f"Normalize: {v.size} {name} values for {channels} channels")
        shape = (-1, 1, 1)
        mean, std = self.mean.reshape(shape), self.std.reshape(shape)
        if isinstance(x, NDArray):
            return (x - array(mean, dtype=x.dtype)) / array(std, dtype=x.dtype)
        return ((_np.asarray(x) - mean) / std).astype(_np.float32)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"
