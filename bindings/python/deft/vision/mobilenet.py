"""MobileNet V1 (Howard et al., 2017) and V2 (Sandler et al., 2018), as MXNet Gluon's model
zoo builds them, with a width multiplier.

Both are built from depthwise separable convolutions: a 3x3 convolution with one
group per channel, then a 1x1 convolution mixing channels. Layer order and
attribute names are Gluon's, so parameter names match its save_parameters files.
"""
from .. import nn
from ..ndarray import invoke
from ._zoo import constructor, no_pretrained


class RELU6(nn.HybridBlock):
    """min(max(x, 0), 6): the clip operator, as Gluon's RELU6."""

    def forward(self, x):
        return invoke("clip", (x,), {"a_min": 0.0, "a_max": 6.0})

    def __repr__(self):
        return "RELU6"


def _add_conv(out, channels=1, kernel=1, stride=1, pad=0, num_group=1, active=True,
              relu6=False):
    """Convolution without bias, BatchNorm and (when `active`) ReLU or ReLU6."""
    out.add(nn.Conv2D(channels, kernel, stride, pad, groups=num_group, use_bias=False),
            nn.BatchNorm(scale=True))
    if active:
        out.add(RELU6() if relu6 else nn.Activation("relu"))


def _add_conv_dw(out, dw_channels, channels, stride, relu6=False):
    """A depthwise separable convolution: 3x3 depthwise (one group per channel), 1x1 out."""
    _add_conv(out, channels=dw_channels, kernel=3, stride=stride, pad=1,
              num_group=dw_channels, relu6=relu6)
    _add_conv(out, channels=channels, relu6=relu6)


class LinearBottleneck(nn.HybridBlock):
    """MobileNet V2's inverted residual: expand t times (1x1), depthwise 3x3 (stride here),
    project linearly (1x1, no activation); the input is added when the shape is kept."""

    def __init__(self, in_channels, channels, t, stride):
        super().__init__()
        self.use_shortcut = stride == 1 and in_channels == channels
        self.out = nn.HybridSequential()
        _add_conv(self.out, in_channels * t, relu6=True)
        _add_conv(self.out, in_channels * t, kernel=3, stride=stride, pad=1,
                  num_group=in_channels * t, relu6=True)
        _add_conv(self.out, channels, active=False, relu6=True)

    def forward(self, x):
        out = self.out(x)
        return out + x if self.use_shortcut else out


def _scaled(widths, multiplier):
    return [int(w * multiplier) for w in widths]


class MobileNet(nn.HybridBlock):
    """MobileNet V1: a stride-2 3x3 convolution, 13 depthwise separable convolutions
    (channel widths scaled by `multiplier`), global average pooling and a Dense output."""

    def __init__(self, multiplier=1.0, classes=1000):
        super().__init__()
        self.features = nn.HybridSequential()
        _add_conv(self.features, channels=int(32 * multiplier), kernel=3, pad=1, stride=2)
        dw_channels = _scaled([32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024], multiplier)
        channels = _scaled([64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2, multiplier)
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        for dwc, c, s in zip(dw_channels, channels, strides):
            _add_conv_dw(self.features, dw_channels=dwc, channels=c, stride=s)
        self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.Dense(classes)

    def forward(self, x):
        return self.output(self.features(x))


class MobileNetV2(nn.HybridBlock):
    """MobileNet V2: a stride-2 3x3 convolution, 17 linear bottlenecks, a 1x1 convolution
    to 1280 channels (more when multiplier > 1), global average pooling, and a 1x1
    convolution to `classes` (no bias) as the output."""

    def __init__(self, multiplier=1.0, classes=1000):
        super().__init__()
        self.features = nn.HybridSequential()
        _add_conv(self.features, int(32 * multiplier), kernel=3, stride=2, pad=1, relu6=True)
        in_channels = _scaled([32] + [16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3
                              + [160] * 3, multiplier)
        channels = _scaled([16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3
                           + [320], multiplier)
        expansions = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        for in_c, c, t, s in zip(in_channels, channels, expansions, strides):
            self.features.add(LinearBottleneck(in_channels=in_c, channels=c, t=t, stride=s))
        last_channels = int(1280 * multiplier) if multiplier > 1.0 else 1280
        _add_conv(self.features, last_channels, relu6=True)
        self.features.add(nn.GlobalAvgPool2D())
        self.output = nn.HybridSequential(nn.Conv2D(classes, 1, use_bias=False), nn.Flatten())

    def forward(self, x):
        return self.output(self.features(x))


def get_mobilenet(multiplier, pretrained=False, ctx=None, root=None, **kwargs):
    """MobileNet V1 of width `multiplier`, randomly initialised on initialize(); kwargs go
    to MobileNet (classes). ctx and root, MXNet's places for pretrained weights, are
    accepted so calls port unchanged."""
    no_pretrained(f"mobilenet{multiplier}", pretrained)
    return MobileNet(multiplier, **kwargs)


def get_mobilenet_v2(multiplier, pretrained=False, ctx=None, root=None, **kwargs):
    """MobileNet V2 of width `multiplier` (see get_mobilenet)."""
    no_pretrained(f"mobilenetv2_{multiplier}", pretrained)
    return MobileNetV2(multiplier, **kwargs)


def _mobilenet(name, get, multiplier):
    kind = "MobileNet V2" if get is get_mobilenet_v2 else "MobileNet"
    return constructor(name, f"{kind} of width multiplier {multiplier}: pretrained=False, "
                             f"classes=1000.", get, multiplier)


mobilenet1_0 = _mobilenet("mobilenet1_0", get_mobilenet, 1.0)
mobilenet0_75 = _mobilenet("mobilenet0_75", get_mobilenet, 0.75)
mobilenet0_5 = _mobilenet("mobilenet0_5", get_mobilenet, 0.5)
mobilenet0_25 = _mobilenet("mobilenet0_25", get_mobilenet, 0.25)
mobilenet_v2_1_0 = _mobilenet("mobilenet_v2_1_0", get_mobilenet_v2, 1.0)
mobilenet_v2_0_75 = _mobilenet("mobilenet_v2_0_75", get_mobilenet_v2, 0.75)
mobilenet_v2_0_5 = _mobilenet("mobilenet_v2_0_5", get_mobilenet_v2, 0.5)
mobilenet_v2_0_25 = _mobilenet("mobilenet_v2_0_25", get_mobilenet_v2, 0.25)
