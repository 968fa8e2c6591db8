"""Block.summary: each layer's output shape and parameter count, as Gluon prints them."""
import collections
from typing import Any, List, Sequence, Tuple

from .. import autograd

_WIDTH = 80


def print_summary(block: Any, inputs: Sequence[Any]) -> None:
    print(summary_text(block, inputs))


def summary_text(block: Any, inputs: Sequence[Any]) -> str:
    """The table for one eager, predict-mode forward of `block` on `inputs`."""
    rows = _layer_rows(block, inputs)
    lines = ["-" * _WIDTH, f"{'Layer (type)':>20}{'Output Shape':>42}{'Param #':>16}",
             "=" * _WIDTH, f"{'Input':>20}{_shapes(inputs):>42}{0:>16}"]
    lines += [f"{name:>20}{shape:>42}{count:>16}" for name, shape, count in rows]
    uses = collections.Counter(id(p) for _, p in block._named_params())
    unique = block.collect_params()
    total = sum(_size(p) for p in unique.values())
    trainable = sum(_size(p) for p in unique.values() if p.grad_req != "null")
    shared = sum(_size(p) for p in unique.values() if uses[id(p)] > 1)
    lines += ["=" * _WIDTH,
              f"Parameters in the model: {total}",
              f"Trainable params: {trainable}",
              f"Non-trainable params: {total - trainable}",
              f"Shared params in this model: {shared}",
              f"Unique params in this model: {total}",
              "-" * _WIDTH]
    return "\n".join(lines)


def _layer_rows(block: Any, inputs: Sequence[Any]) -> List[Tuple[str, str, int]]:
    """(layer name, output shapes, own parameters) per layer in the order layers finish;
    containers (blocks whose forward only chains children) and the block itself are
    not rows."""
    rows, handles, counts = [], [], collections.Counter()

    def hook(layer, _inputs, outputs):
        name = type(layer).__name__
        counts[name] += 1
        own = sum(_size(p) for p in layer._params.values())
        rows.append((f"{name}-{counts[name]}", _shapes(outputs), own))

    blocks = list(block._blocks())
    for b in blocks:
        if b is not block and (not b._children or b._params):
            handles.append(b.register_forward_hook(hook))
    hybrid = [b for b in blocks if getattr(b, "_hybrid", False)]
    for b in hybrid:  # every layer's forward runs eagerly, so that its hook sees it
        object.__setattr__(b, "_hybrid", False)
    try:
        with autograd.pause(train_mode=False):
            block(*inputs)
    finally:
        for b in hybrid:
            object.__setattr__(b, "_hybrid", True)
        for h in handles:
            h.detach()
    return rows


def _shapes(values: Any) -> str:
    if hasattr(values, "shape"):
        return str(tuple(values.shape))
    if isinstance(values, (list, tuple)):
        shapes = [_shapes(v) for v in values]
        return shapes[0] if len(shapes) == 1 else ", ".join(shapes)
    return type(values).__name__


def _size(p: Any) -> int:
    n = 1
    for d in p.shape or ():
        n *= d
    return n
