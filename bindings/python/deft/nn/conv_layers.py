"""Convolution, transposed convolution and pooling layers (1-D to 3-D), as MXNet Gluon's."""
import numbers
from typing import Optional, Sequence, Union

from ..ndarray import invoke
from .block import HybridBlock, Parameter
from .init import InitLike

Size = Union[int, Sequence[int]]


def _tuple(value, n, what):
    """An int, or a tuple of n ints, as a tuple of n ints."""
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(f"{what} is {value}: expected an int or {n} ints")
    return value


class _Conv(HybridBlock):
    """Convolution or Deconvolution with a (deferred) weight and an optional bias.

    The weight is (channels, in_channels / groups, *kernel) for a convolution,
    (in_channels, channels / groups, *kernel) for a transposed one; in_channels
    0 takes it from the first input's channel axis.
    """

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels, activation, use_bias, weight_initializer, bias_initializer,
                 dims, op_name="Convolution", adj=None):
        super().__init__()
        kernel = _tuple(kernel_size, dims, "kernel_size")
        self._op_name, self._channels, self._groups, self._layout = (op_name, channels,
                                                                     groups, layout)
        self._kwargs = {"kernel": kernel, "stride": _tuple(strides, dims, "strides"),
                        "dilate": _tuple(dilation, dims, "dilation"),
                        "pad": _tuple(padding, dims, "padding"), "num_filter": channels,
                        "num_group": groups, "no_bias": not use_bias, "layout": layout}
        if adj is not None:
            self._kwargs["adj"] = _tuple(adj, dims, "output_padding")
        self.activation = activation
        self.weight = Parameter("weight", self._weight_shape(in_channels),
                                init=weight_initializer)
        if use_bias:
            self.bias = Parameter("bias", (channels,), init=bias_initializer)

    def _weight_shape(self, in_channels):
        kernel = self._kwargs["kernel"]
        if self._op_name == "Convolution":
            return (self._channels, in_channels // self._groups) + kernel
        return (in_channels, self._channels // self._groups) + kernel

    def infer_shape(self, x, *args):
        self.weight.shape = self._weight_shape(x.shape[self._layout.find("C")])

    def forward(self, x):
        inputs = (x, self.weight.data()) + ((self.bias.data(),) if "bias" in self._params
                                            else ())
        y = invoke(self._op_name, inputs, self._kwargs)
        return y if self.activation is None else invoke("Activation", (y,),
                                                        {"act_type": self.activation})

    def __repr__(self):
        in_channels = self.weight.shape[1 if self._op_name == "Convolution" else 0]
        return (f"{type(self).__name__}({in_channels or None} -> {self._channels}, "
                f"kernel_size={self._kwargs['kernel']}, stride={self._kwargs['stride']})")


class Conv1D(_Conv):
    """1-D convolution of (batch, in_channels, width) data."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = 1,
                 padding: Size = 0, dilation: Size = 1,
                 groups: int = 1, layout: str = "NCW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 1)


class Conv2D(_Conv):
    """2-D convolution of (batch, in_channels, height, width) data."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = (1, 1),
                 padding: Size = (0, 0), dilation: Size = (1, 1),
                 groups: int = 1, layout: str = "NCHW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 2)


class Conv3D(_Conv):
    """3-D convolution of (batch, in_channels, depth, height, width) data."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = (1, 1, 1),
                 padding: Size = (0, 0, 0), dilation: Size = (1, 1, 1),
                 groups: int = 1, layout: str = "NCDHW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 3)


class Conv1DTranspose(_Conv):
    """1-D transposed convolution; output_padding adds to the output's end."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = 1,
                 padding: Size = 0, output_padding: Size = 0, dilation: Size = 1,
                 groups: int = 1, layout: str = "NCW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 1, "Deconvolution", output_padding)


class Conv2DTranspose(_Conv):
    """2-D transposed convolution; output_padding adds to the output's end."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = (1, 1),
                 padding: Size = (0, 0), output_padding: Size = (0, 0), dilation: Size = (1, 1),
                 groups: int = 1, layout: str = "NCHW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 2, "Deconvolution", output_padding)


class Conv3DTranspose(_Conv):
    """3-D transposed convolution; output_padding adds to the output's end."""

    def __init__(self, channels: int, kernel_size: Size, strides: Size = (1, 1, 1),
                 padding: Size = (0, 0, 0), output_padding: Size = (0, 0, 0),
                 dilation: Size = (1, 1, 1), groups: int = 1, layout: str = "NCDHW",
                 activation: Optional[str] = None, use_bias: bool = True,
                 weight_initializer: InitLike = None, bias_initializer: InitLike = "zeros",
                 in_channels: int = 0) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, 3, "Deconvolution", output_padding)


class _Pooling(HybridBlock):
    """The Pooling operator with fixed parameters; strides default to the pool size."""

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type, layout,
                 dims, count_include_pad=None):
        super().__init__()
        kernel = _tuple(pool_size, dims, "pool_size")
        self._kwargs = {"kernel": kernel,
                        "stride": kernel if strides is None else _tuple(strides, dims, "strides"),
                        "pad": _tuple(padding, dims, "padding"), "global_pool": global_pool,
                        "pool_type": pool_type, "layout": layout,
                        "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def forward(self, x):
        return invoke("Pooling", (x,), self._kwargs)

    def __repr__(self):
        k = self._kwargs
        return (f"{type(self).__name__}(size={k['kernel']}, stride={k['stride']}, "
                f"padding={k['pad']}, ceil_mode={k['pooling_convention'] == 'full'}, "
                f"global_pool={k['global_pool']}, pool_type={k['pool_type']}, "
                f"layout={k['layout']})")


class MaxPool1D(_Pooling):
    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "max", layout, 1)


class MaxPool2D(_Pooling):
    def __init__(self, pool_size=(2, 2), strides=None, padding=0, layout="NCHW",
                 ceil_mode=False):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "max", layout, 2)


class MaxPool3D(_Pooling):
    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, layout="NCDHW",
                 ceil_mode=False):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "max", layout, 3)


class AvgPool1D(_Pooling):
    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False,
                 count_include_pad=True):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "avg", layout, 1,
                         count_include_pad)


class AvgPool2D(_Pooling):
    def __init__(self, pool_size=(2, 2), strides=None, padding=0, layout="NCHW",
                 ceil_mode=False, count_include_pad=True):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "avg", layout, 2,
                         count_include_pad)


class AvgPool3D(_Pooling):
    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, layout="NCDHW",
                 ceil_mode=False, count_include_pad=True):
        super().__init__(pool_size, strides, padding, ceil_mode, False, "avg", layout, 3,
                         count_include_pad)


class GlobalMaxPool1D(_Pooling):
    def __init__(self, layout="NCW"):
        super().__init__(1, None, 0, True, True, "max", layout, 1)


class GlobalMaxPool2D(_Pooling):
    def __init__(self, layout="NCHW"):
        super().__init__(1, None, 0, True, True, "max", layout, 2)


class GlobalMaxPool3D(_Pooling):
    def __init__(self, layout="NCDHW"):
        super().__init__(1, None, 0, True, True, "max", layout, 3)


class GlobalAvgPool1D(_Pooling):
    def __init__(self, layout="NCW"):
        super().__init__(1, None, 0, True, True, "avg", layout, 1)


class GlobalAvgPool2D(_Pooling):
    def __init__(self, layout="NCHW"):
        super().__init__(1, None, 0, True, True, "avg", layout, 2)


class GlobalAvgPool3D(_Pooling):
    def __init__(self, layout="NCDHW"):
        super().__init__(1, None, 0, True, True, "avg", layout, 3)
