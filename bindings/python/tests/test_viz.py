"""deft.viz.plot_network: a symbol drawn in MXNet's style through Graphviz's dot."""
import os
import shutil

import pytest

import deft
from deft import nn

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")


def _symbol(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=1, activation="relu"), nn.BatchNorm(), nn.Flatten(),
            nn.Dense(10, in_units=64))
    net.initialize()
    net.hybridize()
    net(deft.ones((2, 1, 6, 6)))
    sym_file, _ = net.export(str(tmp_path / "net"))
    return deft.Symbol.load(sym_file)


@needs_dot
def test_plot_network_renders_an_svg_with_shapes(tmp_path):
    sym = _symbol(tmp_path)
    path = deft.viz.plot_network(sym, title="convnet", shape={"data": (2, 1, 6, 6)},
                                 directory=str(tmp_path))
    assert path == os.path.join(str(tmp_path), "convnet.svg") and os.path.exists(path)
    svg = open(path).read()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for text in ("Convolution", "BatchNorm", "FullyConnected", "4x4x4", "64"):
        assert text in svg, text
    assert "0.weight" not in svg  # hidden, as MXNet hides weights
    assert "#fb8072" in svg  # MXNet's color for convolutions and dense layers


def test_plot_network_as_dot_text_needs_no_graphviz(tmp_path):
    sym = _symbol(tmp_path)
    path = deft.viz.plot_network(sym, title="g", save_format="dot", directory=str(tmp_path),
                                 hide_weights=False, node_attrs={"width": "2"})
    text = open(path).read()
    assert text.startswith('digraph "g" {') and 'width="2"' in text
    assert 'label="0.weight"' in text and "->" in text
    with pytest.raises(ValueError, match="do not go through the graph"):
        deft.viz.plot_network(sym, shape={"data": (2, 36)}, save_format="dot",
                              directory=str(tmp_path))
    with pytest.raises(TypeError, match="expected a deft.Symbol"):
        deft.viz.plot_network("net.json")


def test_a_missing_dot_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        deft.viz.plot_network(_symbol(tmp_path), directory=str(tmp_path))


@needs_dot
def test_a_format_dot_rejects_is_its_error(tmp_path):
    with pytest.raises(RuntimeError, match="dot -Tnonsense failed"):
        deft.viz.plot_network(_symbol(tmp_path), save_format="nonsense",
                              directory=str(tmp_path))


def test_symbol_infer_shape_and_internals(tmp_path):
    sym = _symbol(tmp_path)
    args, outs, aux = sym.infer_shape(data=(2, 1, 6, 6))
    assert dict(zip(sym.list_inputs(), args))["0.weight"] == (4, 1, 3, 3)
    assert outs == [(2, 10)]
    assert aux == [(4,), (4,)]  # BatchNorm's running mean and variance
    assert sym.infer_shape(**{"3.bias": (10,)}) == (None, None, None)  # data unknown
    internals = sym.get_internals()
    assert internals.list_outputs()[0] == "data" and len(internals.list_outputs()) > 5
