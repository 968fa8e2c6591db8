"""deft.vision: every model builds, runs, has MXNet Gluon's parameters, and moves to MXNet.

Parameter counts are hard-coded from MXNet 1.9.1 (the /work/venv-mxnet oracle):
    net = mx.gluon.model_zoo.vision.get_model(name); net.initialize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    sum(p.data().size for p in net.collect_params().values()), len(net.collect_params())
(BatchNorm's running statistics included). Only VGG's counts depend on the input
size (its first Dense takes 512 * (H / 32) * (W / 32) features): these are 32x32's.
"""

import numpy as np
import pytest

import deft
from deft import nn, vision

from mxnet_peer import needs_mxnet, run_mxnet

INPUT = (1, 3, 32, 32)  # every model's downsampling leaves 1x1 at the end

# name: (number of parameter values, number of parameter arrays), from MXNet (see above)
MXNET_SIZES = {
    "resnet18_v1": (11699112, 102),
    "resnet34_v1": (21814696, 182),
    "resnet50_v1": (25629032, 299),
    "resnet18_v2": (11695796, 98),
    "resnet34_v2": (21811380, 178),
    "resnet50_v2": (25595060, 259),
    "mobilenet1.0": (4253864, 137),
    "mobilenet0.25": (475544, 137),
    "mobilenetv2_1.0": (3539136, 266),
    "mobilenetv2_0.25": (1526856, 266),
    "vgg11": (32200040, 22),
    "vgg11_bn": (32211048, 54),
}


def input_array(shape=INPUT, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def size_of(net):
    params = net.collect_params().values()
    return sum(int(np.prod(p.shape)) for p in params), len(params)


@pytest.mark.parametrize("name", sorted(MXNET_SIZES))
def test_model_runs_and_has_mxnets_parameters(name):
    net = vision.get_model(name)
    net.initialize()
    y = net(deft.array(input_array()))
    assert y.shape == (1, 1000)
    assert np.isfinite(y.asnumpy()).all()
    assert size_of(net) == MXNET_SIZES[name]


@pytest.mark.parametrize("name", ["resnet18_v2", "mobilenet0.25", "mobilenetv2_0.25"])
def test_classes_and_batch(name):
    net = vision.get_model(name, classes=7)
    net.initialize()
    assert net(deft.array(input_array((3, 3, 64, 64)))).shape == (3, 7)


def test_thumbnail_resnet_starts_with_one_3x3_convolution():
    net = vision.resnet18_v1(thumbnail=True, classes=10)
    net.initialize()
    assert net(deft.array(input_array((2, 3, 8, 8)))).shape == (2, 10)
    assert net.features[0].weight.shape == (64, 3, 3, 3)
    assert len(net.features) == 1 + 4 + 1  # the convolution, the stages, the pooling
    assert len(vision.resnet18_v1().features) == 4 + 4 + 1  # 7x7 conv, BN, ReLU, max pool


def test_parameters_have_gluons_names():
    # MXNet's save_parameters names, as MXNet 1.9.1's model zoo gives them
    names = list(vision.resnet18_v1().collect_params())
    assert names[:3] == ["features.0.weight", "features.1.gamma", "features.1.beta"]
    assert names[-2:] == ["output.weight", "output.bias"]
    assert "features.5.0.downsample.0.weight" in names
    assert "features.5.0.downsample.weight" in vision.resnet50_v2().collect_params()
    assert list(vision.mobilenet_v2_0_25().collect_params())[-1] == "output.0.weight"
    assert list(vision.vgg11_bn().collect_params())[-3] == "features.31.bias"


def test_architecture_details():
    net = vision.resnet50_v1()
    first = net.features[4][0]  # stage 1's first bottleneck projects 64 -> 256 channels
    assert first.body[0].weight.shape == (64, 0, 1, 1) and "bias" in first.body[0]._params
    assert first.downsample[0].weight.shape == (256, 64, 1, 1)
    assert net.features[5][0].body[0]._kwargs["stride"] == (2, 2)  # V1 strides in the 1x1
    v2 = vision.resnet50_v2()
    assert v2.features[6][0].conv2._kwargs["stride"] == (2, 2)  # V2 in the 3x3
    mobile = vision.mobilenet1_0()
    depthwise = mobile.features[3]
    assert depthwise._kwargs["num_group"] == 32 and depthwise.weight.shape == (32, 0, 3, 3)
    assert vision.mobilenet_v2_1_0().features[3].use_shortcut is False
    assert vision.mobilenet_v2_1_0().features[5].use_shortcut is True


def test_pretrained_and_unknown_names_are_refused():
    with pytest.raises(ValueError, match="resnet18_v1: pretrained weights are not available"):
        vision.resnet18_v1(pretrained=True)
    with pytest.raises(ValueError, match="mobilenetv2_1.0: pretrained weights"):
        vision.get_model("mobilenetv2_1.0", pretrained=True)
    with pytest.raises(ValueError, match="vgg11_bn: pretrained weights"):
        vision.vgg11_bn(pretrained=True)
    with pytest.raises(ValueError, match="model 'resnet19_v1' is not in deft.vision.*resnet18_v1"):
        vision.get_model("resnet19_v1")
    with pytest.raises(ValueError, match="num_layers is 20; options are \\[18, 34, 50, 101"):
        vision.get_resnet(1, 20)
    with pytest.raises(ValueError, match="version is 3"):
        vision.get_resnet(3, 18)
    assert isinstance(vision.get_model("ResNet18_V1"), vision.ResNetV1)


EXPORTED = ["resnet18_v1", "mobilenet0.25"]


def exported(name, tmp_path):
    """The model run eagerly and hybridized on one input, exported: (x, y, symbol, params)."""
    x = input_array((2, 3, 32, 32))
    net = vision.get_model(name, classes=10)
    net.initialize()
    eager = net(deft.array(x)).asnumpy()
    net.hybridize()
    y = net(deft.array(x)).asnumpy()
    np.testing.assert_allclose(y, eager, rtol=1e-4, atol=1e-5)
    assert y.std() > 0  # the comparisons below see distinct values
    return (x, y) + net.export(str(tmp_path / name))


@pytest.mark.parametrize("name", EXPORTED)
def test_hybridized_export_reloads_in_deft(name, tmp_path):
    x, y, sym_file, params_file = exported(name, tmp_path)
    block = nn.SymbolBlock.imports(sym_file, ["data"], params_file)
    np.testing.assert_allclose(block(deft.array(x)).asnumpy(), y, rtol=1e-4, atol=1e-5)


@needs_mxnet
def test_mxnet_imports_the_exports(tmp_path):
    runs = {name: exported(name, tmp_path) for name in EXPORTED}
    np.save(tmp_path / "x.npy", runs[EXPORTED[0]][0])  # one input for all: one seed
    files = {name: run[2:] for name, run in runs.items()}
    run_mxnet("import mxnet as mx, numpy as np\n"
              "x = mx.nd.array(np.load('x.npy'))\n"
              f"for name, (sym_file, params_file) in {files!r}.items():\n"
              "    net = mx.gluon.SymbolBlock.imports(sym_file, ['data'], params_file)\n"
              "    np.save(name + '.npy', net(x).asnumpy())\n", tmp_path)
    for name, (_, y, _, _) in runs.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), y, rtol=1e-4, atol=1e-4,
                                   err_msg=name)


ONE_PER_BLOCK_KIND = ["resnet18_v1", "resnet50_v1", "resnet18_v2", "resnet50_v2",
                      "mobilenet0.25", "mobilenetv2_0.25", "vgg11_bn"]


@needs_mxnet
def test_mxnet_model_zoo_runs_deft_parameters_alike(tmp_path):
    """MXNet's own model of each name loads deft's save_parameters file (every name and
    shape agrees) and computes what deft computes: the architectures are the same."""
    x = input_array((2, 3, 32, 32))
    np.save(tmp_path / "x.npy", x)
    want = {}
    for name in ONE_PER_BLOCK_KIND:
        net = vision.get_model(name, classes=10)
        net.initialize()
        want[name] = net(deft.array(x)).asnumpy()
        net.save_parameters(str(tmp_path / f"{name}.params"))
    run_mxnet("import mxnet as mx, numpy as np\n"
              "x = mx.nd.array(np.load('x.npy'))\n"
              f"for name in {ONE_PER_BLOCK_KIND!r}:\n"
              "    net = mx.gluon.model_zoo.vision.get_model(name, classes=10)\n"
              "    net.load_parameters(name + '.params')\n"
              "    np.save(name + '.npy', net(x).asnumpy())\n", tmp_path)
    for name in ONE_PER_BLOCK_KIND:
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), want[name], rtol=1e-4,
                                   atol=1e-4, err_msg=name)
