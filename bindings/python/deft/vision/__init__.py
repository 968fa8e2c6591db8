"""A model zoo: MXNet Gluon's ResNet V1/V2, MobileNet V1/V2 and VGG, built from code.

Models start from random values on initialize(): deft downloads nothing, so
pretrained=True is an error. Architectures, layer order and attribute names
are Gluon's (mxnet.gluon.model_zoo.vision, 1.9.1): a model's parameters have
the names MXNet's save_parameters gives them, and a hybridized model exports
graphs MXNet loads.

    net = deft.vision.get_model("resnet18_v1", classes=10)
    net.initialize()
"""
from .resnet import (BasicBlockV1, BasicBlockV2, BottleneckV1, BottleneckV2,  # noqa: F401
                     ResNetV1, ResNetV2, get_resnet, resnet18_v1, resnet18_v2, resnet34_v1,
                     resnet34_v2, resnet50_v1, resnet50_v2, resnet101_v1, resnet101_v2,
                     resnet152_v1, resnet152_v2)
from .mobilenet import (MobileNet, MobileNetV2, get_mobilenet, get_mobilenet_v2,  # noqa: F401
                        mobilenet0_5, mobilenet0_25, mobilenet0_75, mobilenet1_0,
                        mobilenet_v2_0_5, mobilenet_v2_0_25, mobilenet_v2_0_75,
                        mobilenet_v2_1_0)
from .vgg import (VGG, get_vgg, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn,  # noqa: F401
                  vgg19, vgg19_bn)

# The names mxnet.gluon.model_zoo.vision.get_model takes, for the models deft has.
_models = {
    "resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1, "resnet50_v1": resnet50_v1,
    "resnet101_v1": resnet101_v1, "resnet152_v1": resnet152_v1,
    "resnet18_v2": resnet18_v2, "resnet34_v2": resnet34_v2, "resnet50_v2": resnet50_v2,
    "resnet101_v2": resnet101_v2, "resnet152_v2": resnet152_v2,
    "vgg11": vgg11, "vgg13": vgg13, "vgg16": vgg16, "vgg19": vgg19,
    "vgg11_bn": vgg11_bn, "vgg13_bn": vgg13_bn, "vgg16_bn": vgg16_bn, "vgg19_bn": vgg19_bn,
    "mobilenet1.0": mobilenet1_0, "mobilenet0.75": mobilenet0_75,
    "mobilenet0.5": mobilenet0_5, "mobilenet0.25": mobilenet0_25,
    "mobilenetv2_1.0": mobilenet_v2_1_0, "mobilenetv2_0.75": mobilenet_v2_0_75,
    "mobilenetv2_0.5": mobilenet_v2_0_5, "mobilenetv2_0.25": mobilenet_v2_0_25,
}


def get_model(name, **kwargs):
    """The model called `name` as in MXNet's get_model ("resnet18_v1", "mobilenet0.25",
    "mobilenetv2_1.0", "vgg11_bn", ...; any case); kwargs go to its constructor
    (classes=1000, pretrained=False, ...)."""
    model = _models.get(name.lower())
    if model is None:
        raise ValueError(f"get_model: model '{name}' is not in deft.vision; the models are: "
                         f"{', '.join(sorted(_models))}")
    return model(**kwargs)
