"""Pictures of graphs: ``plot_network`` draws a Symbol as MXNet's mx.viz.plot_network
does (colored operators, hidden weights, shapes on the edges), from the graph's
``Symbol.todot()``, rendered by Graphviz's ``dot`` (Debian package graphviz)."""
import json
import os
import re
import shutil
import subprocess
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .symbol import Symbol

__all__ = ["plot_network", "render_dot"]

# MXNet's palette and which operators take which color.
_COLORS = ("#8dd3c7", "#fb8072", "#ffffb3", "#bebada", "#80b1d3", "#fdb462", "#b3de69",
           "#fccde5")
_OP_COLOR = {
    "Convolution": 1, "Deconvolution": 1, "FullyConnected": 1,
    "BatchNorm": 3, "LayerNorm": 3, "InstanceNorm": 3, "GroupNorm": 3,
    "Activation": 2, "LeakyReLU": 2, "relu": 2, "sigmoid": 2, "tanh": 2,
    "Pooling": 4, "Concat": 5, "Flatten": 5, "Reshape": 5, "_np_reshape": 5,
    "SoftmaxOutput": 6, "softmax": 6, "log_softmax": 6,
}
_PARAM_SUFFIXES = ("weight", "bias", "gamma", "beta", "running_mean", "running_var",
                   "moving_mean", "moving_var", "alpha")
_NODE = re.compile(r'^\s*n(\d+) \[label="((?:[^"\\]|\\.)*)", shape=(\w+)\];$')
_EDGE = re.compile(r"^\s*n(\d+) -> n(\d+);$")


def plot_network(symbol: Symbol, title: str = "plot", save_format: str = "svg",
                 shape: Optional[Mapping[str, Sequence[int]]] = None,
                 node_attrs: Optional[Mapping[str, str]] = None, hide_weights: bool = True,
                 directory: Optional[str] = None, filename: Optional[str] = None) -> str:
    """Draw `symbol` to `directory`/`filename`.`save_format` (default: ./title.svg) and
    return the file's path. `shape` (input name: shape) labels each edge with the
    shape flowing along it; node_attrs override Graphviz node attributes (MXNet's
    defaults: filled boxes of at least 1.3 by 0.8 inches); hide_weights leaves parameters
    (names ending in weight, bias, gamma, ...) out. save_format "dot" writes the
    DOT text itself (no Graphviz needed); others are dot's -T formats (svg, png,
    pdf)."""
    if not isinstance(symbol, Symbol):
        raise TypeError(f"plot_network: symbol is {type(symbol).__name__}, expected a "
                        f"deft.Symbol")
    nodes, edges = _parse_dot(symbol.todot())
    shapes = _node_shapes(symbol, shape) if shape else {}
    text = _styled_dot(title, nodes, edges, shapes, dict(node_attrs or {}), hide_weights,
                       set(shape or ()))
    path = os.path.join(directory or ".", f"{filename or title}.{save_format}")
    return render_dot(text, path, save_format)


def render_dot(text: str, path: str, save_format: str = "svg") -> str:
    """Write DOT `text` to `path`, rendered by Graphviz's dot in `save_format` (or as
    the text itself for "dot"); returns the path."""
    if save_format == "dot":
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        return path
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("plot_network needs Graphviz's 'dot' program to render "
                           f"{save_format}: install Graphviz (Debian/Ubuntu: apt-get install "
                           "graphviz), or use save_format='dot' for the DOT text")
    done = subprocess.run([dot, f"-T{save_format}", "-o", path], input=text.encode(),
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{save_format} failed: {done.stderr.decode().strip()}")
    return path


def _parse_dot(text: str) -> Tuple[Dict[int, Tuple[str, bool]], List[Tuple[int, int]]]:
    """todot's nodes (id: (label, is an operator)) and edges (from, to)."""
    nodes, edges = {}, []
    for line in text.splitlines():
        node = _NODE.match(line)
        if node:
            nodes[int(node.group(1))] = (node.group(2), node.group(3) == "box")
            continue
        edge = _EDGE.match(line)
        if edge:
            edges.append((int(edge.group(1)), int(edge.group(2))))
    return nodes, edges


def _node_shapes(symbol: Symbol, shape: Mapping[str, Sequence[int]]) -> Dict[int, tuple]:
    """The shape of each node's first output, from shape inference on the graph's
    internal outputs (in node order, as todot numbers the nodes)."""
    internals = symbol.get_internals()
    try:
        _, outputs, _ = internals.infer_shape(**shape)
    except Exception as err:
        raise ValueError(f"plot_network: the shapes {dict(shape)} do not go through the "
                         f"graph: {err}") from None
    if outputs is None:
        raise ValueError(f"plot_network: the shapes {dict(shape)} do not go through the "
                         f"graph: some shapes stay unknown (give every input's shape)")
    row_ptr = json.loads(symbol.tojson())["node_row_ptr"]
    return {node: outputs[row_ptr[node]] for node in range(len(row_ptr) - 1)}


def _styled_dot(title: str, nodes: Dict[int, Tuple[str, bool]], edges: List[Tuple[int, int]],
                shapes: Dict[int, tuple], node_attrs: Dict[str, str], hide_weights: bool,
                inputs: set) -> str:
    attrs = {"shape": "box", "fixedsize": "false", "width": "1.3", "height": "0.8034",
             "style": "filled"}
    attrs.update(node_attrs)
    lines = [f"digraph {_quote(title)} {{", f"  label={_quote(title)};", "  rankdir=BT;",
             "  node [" + ", ".join(f"{k}={_quote(v)}" for k, v in attrs.items()) + "];"]
    hidden = set()
    for i, (label, is_op) in sorted(nodes.items()):
        if not is_op:
            if hide_weights and label not in inputs and label.endswith(_PARAM_SUFFIXES):
                hidden.add(i)
                continue
            lines.append(f'  n{i} [label="{label}", shape=oval, fillcolor="{_COLORS[0]}"];')
            continue
        color = _COLORS[_OP_COLOR.get(label.split("\\n")[0], 7)]
        lines.append(f'  n{i} [label="{label}", fillcolor="{color}"];')
    for src, dst in edges:
        if src in hidden:
            continue
        label = "x".join(str(d) for d in shapes[src][1:]) if src in shapes else ""
        lines.append(f'  n{src} -> n{dst}' + (f' [label="{label}"]' if label else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
