"""ResNet V1 (He et al., 2015) and V2 (He et al., 2016, pre-activation), as MXNet Gluon's
model zoo builds them.

The blocks, their attribute names and the order of their layers are Gluon's,
so parameters carry the same dotted names ("features.5.0.body.0.weight") and
files written by either side's save_parameters load into the other's model.
"""
from .. import nn
from ..ndarray import invoke
from ._zoo import constructor, no_pretrained


def _relu(x):
    return invoke("Activation", (x,), {"act_type": "relu"})


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, 3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _conv1x1(channels, stride, in_channels=0):
    """The projection of a shortcut that changes the number of channels or the size."""
    return nn.Conv2D(channels, 1, strides=stride, use_bias=False, in_channels=in_channels)


class BasicBlockV1(nn.HybridBlock):
    """Two 3x3 convolutions with batch norm, added to the input (or its projection when
    `downsample`), then ReLU. ResNet-18 and -34, V1."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.body = nn.HybridSequential(
            _conv3x3(channels, stride, in_channels), nn.BatchNorm(), nn.Activation("relu"),
            _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = nn.HybridSequential(
            _conv1x1(channels, stride, in_channels), nn.BatchNorm()) if downsample else None

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        return _relu(self.body(x) + residual)


class BottleneckV1(nn.HybridBlock):
    """1x1 (stride here, with bias as in Gluon), 3x3 and 1x1 convolutions with batch norm,
    channels // 4 wide inside, added to the input, then ReLU. ResNet-50 and deeper, V1."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.body = nn.HybridSequential(
            nn.Conv2D(channels // 4, 1, strides=stride), nn.BatchNorm(), nn.Activation("relu"),
            _conv3x3(channels // 4, 1, channels // 4), nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(channels, 1, strides=1), nn.BatchNorm())
        self.downsample = nn.HybridSequential(
            _conv1x1(channels, stride, in_channels), nn.BatchNorm()) if downsample else None

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        return _relu(self.body(x) + residual)


class BasicBlockV2(nn.HybridBlock):
    """Pre-activation basic block: BN, ReLU, 3x3 conv, twice; the input is added unchanged,
    or its pre-activated form projected when `downsample`. ResNet-18 and -34, V2."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = _conv1x1(channels, stride, in_channels) if downsample else None

    def forward(self, x):
        residual = x
        x = _relu(self.bn1(x))
        if self.downsample is not None:
            residual = self.downsample(x)
        x = self.conv2(_relu(self.bn2(self.conv1(x))))
        return x + residual


class BottleneckV2(nn.HybridBlock):
    """Pre-activation bottleneck: BN-ReLU-conv 1x1, 3x3 (stride here), 1x1, all without
    bias, channels // 4 wide inside. ResNet-50 and deeper, V2."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv1x1(channels // 4, 1)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels // 4, stride, channels // 4)
        self.bn3 = nn.BatchNorm()
        self.conv3 = _conv1x1(channels, 1)
        self.downsample = _conv1x1(channels, stride, in_channels) if downsample else None

    def forward(self, x):
        residual = x
        x = _relu(self.bn1(x))
        if self.downsample is not None:
            residual = self.downsample(x)
        x = self.conv1(x)
        x = self.conv2(_relu(self.bn2(x)))
        x = self.conv3(_relu(self.bn3(x)))
        return x + residual


def _stem(channels, thumbnail):
    """The first layers: a 3x3 convolution for small (CIFAR-sized) images, else the
    7x7 stride-2 convolution, BN, ReLU and 3x3 stride-2 max pooling."""
    if thumbnail:
        return [_conv3x3(channels, 1, 0)]
    return [nn.Conv2D(channels, 7, 2, 3, use_bias=False), nn.BatchNorm(),
            nn.Activation("relu"), nn.MaxPool2D(3, 2, 1)]


def _stages(block, layers, channels):
    """One HybridSequential per stage: the first block of stage i > 0 halves the size
    with stride 2; a block whose channels change projects its shortcut."""
    stages = []
    for i, num_blocks in enumerate(layers):
        stride, in_channels, out_channels = (1 if i == 0 else 2), channels[i], channels[i + 1]
        stage = nn.HybridSequential(
            block(out_channels, stride, out_channels != in_channels, in_channels=in_channels))
        for _ in range(num_blocks - 1):
            stage.add(block(out_channels, 1, False, in_channels=out_channels))
        stages.append(stage)
    return stages


class _ResNet(nn.HybridBlock):
    """features then output (a Dense of `classes` units), as Gluon's ResNets."""

    def forward(self, x):
        return self.output(self.features(x))


class ResNetV1(_ResNet):
    """ResNet V1: `block` is BasicBlockV1 or BottleneckV1, `layers` the blocks per stage,
    `channels` the stem's width then each stage's (one longer than layers)."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False):
        super().__init__()
        _check_spec(layers, channels)
        self.features = nn.HybridSequential(*_stem(channels[0], thumbnail),
                                            *_stages(block, layers, channels),
                                            nn.GlobalAvgPool2D())
        self.output = nn.Dense(classes, in_units=channels[-1])


class ResNetV2(_ResNet):
    """ResNet V2 (pre-activation): the input is normalised by a BatchNorm without scale and
    shift, and the last stage is followed by BN and ReLU before pooling."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False):
        super().__init__()
        _check_spec(layers, channels)
        self.features = nn.HybridSequential(nn.BatchNorm(scale=False, center=False),
                                            *_stem(channels[0], thumbnail),
                                            *_stages(block, layers, channels),
                                            nn.BatchNorm(), nn.Activation("relu"),
                                            nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.Dense(classes, in_units=channels[-1])


def _check_spec(layers, channels):
    if len(layers) != len(channels) - 1:
        raise ValueError(f"ResNet: channels {list(channels)} must be one longer than "
                         f"layers {list(layers)} (the stem's width, then each stage's)")


# depth: (block kind, blocks per stage, channels: the stem's then each stage's)
resnet_spec = {18: ("basic_block", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
               34: ("basic_block", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
               50: ("bottle_neck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
               101: ("bottle_neck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
               152: ("bottle_neck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}
_versions = {1: (ResNetV1, {"basic_block": BasicBlockV1, "bottle_neck": BottleneckV1}),
             2: (ResNetV2, {"basic_block": BasicBlockV2, "bottle_neck": BottleneckV2})}


def get_resnet(version, num_layers, pretrained=False, ctx=None, root=None, **kwargs):
    """ResNet `version` (1 or 2) of `num_layers` (18, 34, 50, 101 or 152), randomly
    initialised on initialize(); kwargs go to ResNetV1/V2 (classes, thumbnail). ctx and
    root, MXNet's places for pretrained weights, are accepted so calls port unchanged."""
    if num_layers not in resnet_spec:
        raise ValueError(f"get_resnet: num_layers is {num_layers}; options are "
                         f"{sorted(resnet_spec)}")
    if version not in _versions:
        raise ValueError(f"get_resnet: version is {version}; options are 1 and 2")
    no_pretrained(f"resnet{num_layers}_v{version}", pretrained)
    kind, layers, channels = resnet_spec[num_layers]
    net_class, blocks = _versions[version]
    return net_class(blocks[kind], layers, channels, **kwargs)


def _resnet(version, num_layers):
    return constructor(f"resnet{num_layers}_v{version}",
                       f"ResNet-{num_layers} V{version} (see get_resnet): pretrained=False, "
                       f"classes=1000, thumbnail=False.", get_resnet, version, num_layers)


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (
    _resnet(1, n) for n in (18, 34, 50, 101, 152))
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (
    _resnet(2, n) for n in (18, 34, 50, 101, 152))
