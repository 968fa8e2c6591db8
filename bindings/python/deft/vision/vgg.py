"""VGG (Simonyan and Zisserman, 2014), with or without batch norm, as MXNet Gluon's model
zoo builds it.

The classifier's two Dense(4096) layers sit in `features` (after the last
pooling), the Dense of `classes` units is `output`, as in Gluon, so parameter
names match its save_parameters files. The Dense layers start from N(0, 0.01)
as Gluon's; the convolutions from deft's default (Xavier, uniform), where
Gluon draws them from Xavier(gaussian, out, magnitude 2): the architecture is
the same, only the random start differs.
"""
from .. import nn
from ._zoo import constructor, no_pretrained


class VGG(nn.HybridBlock):
    """`layers[i]` 3x3 convolutions of `filters[i]` channels (each followed by BatchNorm
    when `batch_norm`, and ReLU), then 2x2 max pooling, per stage; then two Dense(4096)
    with ReLU and Dropout(0.5), and a Dense of `classes` units."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False):
        super().__init__()
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers {list(layers)} and filters {list(filters)} must "
                             f"have the same length (one entry per stage)")
        self.features = _make_features(layers, filters, batch_norm)
        self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal"),
                          nn.Dropout(rate=0.5),
                          nn.Dense(4096, activation="relu", weight_initializer="normal"),
                          nn.Dropout(rate=0.5))
        self.output = nn.Dense(classes, weight_initializer="normal")

    def forward(self, x):
        return self.output(self.features(x))


def _make_features(layers, filters, batch_norm):
    features = nn.HybridSequential()
    for num, channels in zip(layers, filters):
        for _ in range(num):
            features.add(nn.Conv2D(channels, 3, padding=1))
            if batch_norm:
                features.add(nn.BatchNorm())
            features.add(nn.Activation("relu"))
        features.add(nn.MaxPool2D(strides=2))
    return features


# depth: (convolutions per stage, channels per stage)
vgg_spec = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
            13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
            16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
            19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_vgg(num_layers, pretrained=False, ctx=None, root=None, **kwargs):
    """VGG of `num_layers` (11, 13, 16 or 19), randomly initialised on initialize(); kwargs
    go to VGG (classes, batch_norm). ctx and root, MXNet's places for pretrained weights,
    are accepted so calls port unchanged."""
    if num_layers not in vgg_spec:
        raise ValueError(f"get_vgg: num_layers is {num_layers}; options are {sorted(vgg_spec)}")
    no_pretrained(f"vgg{num_layers}{'_bn' if kwargs.get('batch_norm') else ''}", pretrained)
    layers, filters = vgg_spec[num_layers]
    return VGG(layers, filters, **kwargs)


def _vgg(num_layers, batch_norm):
    name = f"vgg{num_layers}{'_bn' if batch_norm else ''}"
    doc = (f"VGG-{num_layers}{' with batch norm' if batch_norm else ''} (see get_vgg): "
           f"pretrained=False, classes=1000.")
    return constructor(name, doc, get_vgg, num_layers, **({"batch_norm": True} if batch_norm
                                                          else {}))


vgg11, vgg13, vgg16, vgg19 = (_vgg(n, False) for n in (11, 13, 16, 19))
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (_vgg(n, True) for n in (11, 13, 16, 19))
