"""Gluon's Block API: initializers, initialize(), collect_params, repr, summary, cast,
devices, and the shared-parameter, grad_req and input-conversion bugs (issue 28)."""
import os
import re
import warnings

import numpy as np
import pytest

import deft
from deft import autograd, nn
from deft.nn import init


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(3, in_units=8))
    return net


def _filled(initializer, shape, name="weight"):
    arr = deft.zeros(shape)
    initializer(name, arr)
    return arr.asnumpy()


# ---- initializers ----

@pytest.mark.parametrize("rnd_type,factor_type,magnitude", [
    ("uniform", "avg", 3), ("gaussian", "in", 2), ("uniform", "out", 1)])
def test_xavier_follows_mxnets_formula(rnd_type, factor_type, magnitude):
    deft.random.seed(1)
    shape = (64, 32, 3, 3)
    w = _filled(init.Xavier(rnd_type, factor_type, magnitude), shape)
    fan_in, fan_out = 32 * 9, 64 * 9
    factor = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[factor_type]
    scale = np.sqrt(magnitude / factor)
    if rnd_type == "uniform":
        assert np.abs(w).max() <= scale
        assert np.abs(w).max() > 0.95 * scale
        np.testing.assert_allclose(w.std(), scale / np.sqrt(3), rtol=0.05)
    else:
        np.testing.assert_allclose(w.std(), scale, rtol=0.05)


def test_msraprelu_uniform_normal_constant_zero_one():
    deft.random.seed(2)
    w = _filled(init.MSRAPrelu(slope=0.0), (256, 128))
    np.testing.assert_allclose(w.std(), np.sqrt(2.0 / 192), rtol=0.05)
    u = _filled(init.Uniform(0.5), (200, 100))
    assert np.abs(u).max() <= 0.5 and np.abs(u).max() > 0.49
    n = _filled(init.Normal(0.2), (200, 100))
    np.testing.assert_allclose(n.std(), 0.2, rtol=0.05)
    np.testing.assert_array_equal(_filled(init.Constant(0.3), (2, 2)), np.full((2, 2), 0.3,
                                                                                np.float32))
    np.testing.assert_array_equal(_filled(init.Zero(), (3,), "weight"), np.zeros(3))
    np.testing.assert_array_equal(_filled(init.One(), (3,), "weight"), np.ones(3))
    # block-wide, by name as in MXNet: a gamma is one and a bias zero whatever the init
    np.testing.assert_array_equal(_filled(init.Zero(), (3,), "bn.gamma"), np.ones(3))
    np.testing.assert_array_equal(_filled(init.Constant(2.0), (3,), "fc.bias"), np.zeros(3))


def test_the_base_class_picks_by_name_as_mxnet():
    x = init.Xavier()
    np.testing.assert_array_equal(_filled(x, (4,), "0.bias"), np.zeros(4))
    np.testing.assert_array_equal(_filled(x, (4,), "bn.gamma"), np.ones(4))
    np.testing.assert_array_equal(_filled(x, (4,), "bn.running_var"), np.ones(4))
    np.testing.assert_array_equal(_filled(x, (4,), "bn.beta"), np.zeros(4))
    assert np.abs(_filled(x, (4, 4), "0.weight")).max() > 0


@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
def test_orthogonal_gives_orthonormal_rows_times_scale(rand_type):
    w = _filled(init.Orthogonal(scale=2.0, rand_type=rand_type), (6, 3, 2, 2))
    flat = w.reshape(6, 12)
    np.testing.assert_allclose(flat @ flat.T, 4.0 * np.eye(6), atol=1e-4)


def test_mixed_picks_the_first_matching_pattern():
    mixed = init.Mixed([".*bias", ".*"], [init.Constant(7.0), "zeros"])
    np.testing.assert_array_equal(_filled(mixed, (2,), "fc.bias"), [7.0, 7.0])
    np.testing.assert_array_equal(_filled(mixed, (2, 2), "fc.weight"), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="matches none of the patterns"):
        _filled(init.Mixed(["^conv"], [init.One()]), (2,), "fc.weight")


def test_bad_initializer_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="rnd_type is 'cauchy'"):
        init.Xavier(rnd_type="cauchy")
    with pytest.raises(ValueError, match="init 'glorot' is not an initializer"):
        nn.Dense(3).initialize("glorot")
    with pytest.raises(TypeError, match="is not an initializer"):
        nn.Dense(3).initialize(True)  # the old signature's force flag


# ---- initialize() ----

def test_initialize_takes_init_by_name_or_object_not_as_force():
    net = _mlp()
    net.initialize("zeros")
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), np.zeros((8, 4)))
    # a second initialize keeps the values (it used to redraw them: "xavier" was force=True)
    with pytest.warns(UserWarning, match="force_reinit=True"):
        net.initialize("xavier")
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), np.zeros((8, 4)))
    net.initialize(init.Constant(0.5), force_reinit=True)
    np.testing.assert_array_equal(net[1].weight.data().asnumpy(), np.full((3, 8), 0.5))
    np.testing.assert_array_equal(net[1].bias.data().asnumpy(), np.zeros(3))  # its own: zeros


def test_layers_take_their_own_initializers():
    dense = nn.Dense(4, in_units=3, weight_initializer=init.Constant(2.0),
                     bias_initializer="ones")
    conv = nn.Conv2D(2, 3, in_channels=1, weight_initializer="zeros",
                     bias_initializer=init.Constant(0.25))
    bn = nn.BatchNorm(in_channels=2, gamma_initializer=init.Constant(3.0),
                      beta_initializer="ones", running_variance_initializer=init.Constant(4.0))
    for block in (dense, conv, bn):
        block.initialize(init.Normal(1.0))  # the block-wide one yields to the layer's own
    np.testing.assert_array_equal(dense.weight.data().asnumpy(), np.full((4, 3), 2.0))
    np.testing.assert_array_equal(dense.bias.data().asnumpy(), np.ones(4))
    np.testing.assert_array_equal(conv.weight.data().asnumpy(), np.zeros((2, 1, 3, 3)))
    np.testing.assert_array_equal(conv.bias.data().asnumpy(), [0.25, 0.25])
    np.testing.assert_array_equal(bn.gamma.data().asnumpy(), [3.0, 3.0])
    np.testing.assert_array_equal(bn.beta.data().asnumpy(), [1.0, 1.0])
    np.testing.assert_array_equal(bn.running_var.data().asnumpy(), [4.0, 4.0])


def test_deferred_initialization_uses_the_initializer_given():
    net = nn.Dense(5)  # in_units unknown until the first call
    net.initialize(init.Constant(0.125))
    y = net(deft.ones((2, 7)))
    np.testing.assert_allclose(y.asnumpy(), np.full((2, 5), 7 * 0.125))


def test_mixed_sees_dotted_names():
    net = _mlp()
    net.initialize(init.Mixed(["^1\\.", ".*"], [init.One(), init.Zero()]))
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), np.zeros((8, 4)))
    np.testing.assert_array_equal(net[1].weight.data().asnumpy(), np.ones((3, 8)))


# ---- collect_params, repr, summary ----

def test_collect_params_is_a_regex_search():
    net = _mlp()
    assert list(net.collect_params("weight")) == ["0.weight", "1.weight"]
    assert list(net.collect_params(".*bias")) == ["0.bias", "1.bias"]
    assert list(net.collect_params("^1\\.")) == ["1.weight", "1.bias"]
    net.initialize()
    net.collect_params("bias").setattr("grad_req", "null")
    assert net[0].bias.grad_req == "null" and net[0].weight.grad_req == "write"


def test_repr_shows_the_layer_tree():
    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = _mlp()
            self.out = nn.Dense(2)

        def forward(self, x):
            return self.out(self.body(x))

    text = repr(Net())
    assert text == ("Net(\n"
                    "  (body): HybridSequential(\n"
                    "    (0): Dense(4 -> 8, Activation(relu))\n"
                    "    (1): Dense(8 -> 3, linear)\n"
                    "  )\n"
                    "  (out): Dense(? -> 2, linear)\n"
                    ")")


def test_summary_lists_shapes_and_parameter_counts(capsys):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=1), nn.BatchNorm(), nn.Flatten(), nn.Dense(10))
    net.initialize()
    net.hybridize()
    net.summary(deft.ones((2, 1, 6, 6)))
    out = capsys.readouterr().out
    rows = {m.group(1): (m.group(2), int(m.group(3))) for m in re.finditer(
        r"^\s*(\w+-\d)\s+(\(.*?\))\s+(\d+)$", out, re.M)}
    assert rows["Conv2D-1"] == ("(2, 4, 4, 4)", 4 * 9 + 4)
    assert rows["BatchNorm-1"] == ("(2, 4, 4, 4)", 16)
    assert rows["Flatten-1"] == ("(2, 64)", 0)
    assert rows["Dense-1"] == ("(2, 10)", 650)
    total = 40 + 16 + 650
    assert f"Parameters in the model: {total}" in out
    assert "Non-trainable params: 8" in out  # the running mean and variance
    assert net._hybrid  # summary runs eagerly and leaves the block hybridized


# ---- cast, devices ----

def test_cast_changes_parameters_and_outputs():
    net = _mlp()
    net.initialize()
    net.hybridize()
    net(deft.ones((2, 4)))
    net.cast("float64")
    assert net[0].weight.data().dtype == np.float64
    assert net[0].weight.grad().dtype == np.float64
    assert net(deft.ones((2, 4), dtype="float64")).dtype == np.float64


def test_devices_parse_from_text_everywhere():
    assert deft.as_device("cpu") == deft.cpu(0)
    assert deft.as_device("gpu:1") == deft.gpu(1)
    assert deft.as_device("gpu(2)") == deft.gpu(2)
    assert deft.as_device("cuda:0") == deft.gpu(0)
    assert deft.as_device(deft.gpu(3)) == deft.gpu(3)
    assert deft.cpu() == "cpu(0)" and deft.cpu() != "tpu"
    assert deft.gpu(1).device_type == "gpu" and deft.gpu(1).device_id == 1
    with pytest.raises(ValueError, match="device 'tpu:0' is not one deft knows"):
        deft.as_device("tpu:0")
    net = _mlp()
    net.initialize(device="cpu")
    assert net[0].weight.data().device == deft.cpu()
    assert net.to("cpu:0") is net and net.as_in_context(deft.cpu()) is net
    with pytest.raises(ValueError, match="one device"):
        net.initialize(device=[deft.cpu(), deft.gpu(0)], force_reinit=True)


@pytest.mark.skipif(deft.num_gpus() == 0, reason="no GPU: to('gpu:0') needs one")
def test_to_gpu_moves_parameters_and_gradients():
    net = _mlp()
    net.initialize()
    net.to("gpu:0")
    assert net[0].weight.data().device == deft.gpu(0)
    assert net[0].weight.grad().device == deft.gpu(0)
    y = net(deft.ones((2, 4), device=deft.gpu(0)))
    assert y.device == deft.gpu(0)


def test_the_package_carries_a_py_typed_marker():
    assert os.path.exists(os.path.join(os.path.dirname(deft.__file__), "py.typed"))


# ---- bug 2: shared parameters ----

class _Shared(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.a = nn.Dense(4, in_units=4, use_bias=False)
        self.b = self.a  # the same layer twice

    def forward(self, x):
        return self.b(self.a(x))


def test_shared_parameters_are_listed_once_and_stepped_once():
    net = _Shared()
    net.initialize()
    assert list(net.collect_params()) == ["a.weight"]
    w0 = net.a.weight.data().asnumpy().copy()
    x = deft.ones((1, 4))
    with autograd.record():
        y = net(x).sum()
    y.backward()
    g = net.a.weight.grad().asnumpy()
    opt = deft.optim.SGD(net.collect_params(), lr=0.1)
    opt.step()
    np.testing.assert_allclose(net.a.weight.data().asnumpy(), w0 - 0.1 * g, rtol=1e-5)


def test_a_hybridized_block_with_shared_parameters_runs():
    net = _Shared()
    net.initialize()
    x = deft.array(np.arange(8, dtype=np.float32).reshape(2, 4))
    eager = net(x).asnumpy()
    net.hybridize()
    with autograd.record():
        y = net(x)
    y.backward()
    np.testing.assert_allclose(y.asnumpy(), eager, rtol=1e-5)
    assert net.a.weight.grad().asnumpy().any()


def test_a_shared_parameter_object_is_one_parameter():
    class Tied(nn.Block):
        def __init__(self):
            super().__init__()
            self.enc = nn.Dense(3, in_units=3)
            self.dec = nn.Dense(3, in_units=3)
            self.dec.weight = self.enc.weight

        def forward(self, x):
            return self.dec(self.enc(x))

    net = Tied()
    net.initialize()
    assert list(net.collect_params()) == ["enc.weight", "enc.bias", "dec.bias"]


# ---- bug 3: grad_req after initialize ----

def test_grad_req_null_after_initialize_drops_the_gradient():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.weight.grad_req = "null"
    assert net.weight.grad() is None
    w0 = net.weight.data().asnumpy().copy()
    with autograd.record():
        y = net(deft.ones((1, 3))).sum()
    y.backward()
    assert net.bias.grad().asnumpy().any()  # the bias still trains
    np.testing.assert_array_equal(net.weight.data().asnumpy(), w0)
    net.weight.grad_req = "write"  # and back: a gradient again
    with autograd.record():
        y = net(deft.ones((1, 3))).sum()
    y.backward()
    np.testing.assert_allclose(net.weight.grad().asnumpy(), np.ones((2, 3)))
    with pytest.raises(ValueError, match="grad_req is 'sometimes'"):
        net.weight.grad_req = "sometimes"


# ---- bug 5: NumPy arrays and scalars as inputs ----

class _Scaled(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, in_units=3)

    def forward(self, x, scale):
        return self.fc(x) * scale


def test_blocks_take_numpy_arrays_and_scalars():
    net = _Scaled()
    net.initialize()
    x = np.ones((2, 3), np.float32)
    eager = net(x, 2.0).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x, 2.0).asnumpy(), eager, rtol=1e-6)
    np.testing.assert_allclose(net(x, 3).asnumpy(), eager * 1.5, rtol=1e-6)  # a new graph
    assert len(net._graphs) == 2
    with pytest.raises(TypeError, match="input 1 of a hybridized block is list"):
        net(x, [1.0])


# ---- bug 6 (part): set_data's message ----

def test_set_data_names_the_parameters_shape_first():
    p = nn.Parameter("w", (2, 3))
    p.initialize()
    with pytest.raises(ValueError, match=r"'w' has shape \(2, 3\) .*the value given has "
                                         r"\(3, 2\)"):
        p.set_data(np.zeros((3, 2)))


def test_initialize_warns_once_for_initialized_parameters():
    net = _mlp()
    net.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net.initialize()
    assert len(caught) == 1


def test_grad_req_add_accumulates_until_zero_grad():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize()
    net.collect_params().setattr("grad_req", "add")
    for _ in range(2):
        with autograd.record():
            y = net(deft.ones((1, 2))).sum()
        y.backward()
    np.testing.assert_allclose(net.weight.grad().asnumpy(), [[2.0, 2.0]])
    net.zero_grad()
    np.testing.assert_array_equal(net.weight.grad().asnumpy(), [[0.0, 0.0]])
    assert net.weight.list_data() == [net.weight.data()]
    assert net.weight.list_grad() == [net.weight.grad()]
    assert net.weight.list_ctx() == [deft.cpu()]


def test_forward_hooks_and_apply():
    net = _mlp()
    net.initialize()
    seen = []
    handle = net[0].register_forward_hook(lambda b, i, o: seen.append(o.shape))
    pre = net.register_forward_pre_hook(lambda b, i: seen.append("pre"))
    net(deft.ones((2, 4)))
    assert seen == ["pre", (2, 8)]
    handle.detach()
    pre.detach()
    net(deft.ones((2, 4)))
    assert len(seen) == 2
    names = []
    net.apply(lambda b: names.append(type(b).__name__))
    assert names == ["Dense", "Dense", "HybridSequential"]


def test_parameter_initialize_init_wins_over_its_own():
    p = nn.Parameter("bias", (3,), init="ones")
    p.initialize(init=init.Constant(5.0))  # explicit, as Gluon: fills whatever the name
    np.testing.assert_array_equal(p.data().asnumpy(), [5.0] * 3)
    q = nn.Parameter("bias", (3,))
    q.initialize(default_init=init.Constant(5.0))  # block-wide: a bias gets zeros
    np.testing.assert_array_equal(q.data().asnumpy(), [0.0] * 3)


def test_a_deferred_parameter_keeps_how_it_was_initialized():
    bn = nn.BatchNorm()  # in_channels unknown: its parameters wait for the first call
    bn.beta.initialize(init=init.Constant(5.0))  # explicit: fills beta whatever its name
    bn.gamma.initialize(default_init=init.Constant(5.0))  # block-wide: a gamma gets ones
    bn(deft.ones((1, 2, 3)))
    np.testing.assert_array_equal(bn.beta.data().asnumpy(), [5.0, 5.0])
    np.testing.assert_array_equal(bn.gamma.data().asnumpy(), [1.0, 1.0])
