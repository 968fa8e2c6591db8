"""Whole-step capture: a training step (forward, loss, backward and the
optimizer's update of every parameter) as one graph, run by one C call.

    step = deft.compile_step(net, loss_fn, optimizer)
    for data, label in batches:
        loss = step(data, label)          # per-sample losses; the weights are updated

The step graph is DeftSymbolTrainStep's: the forward values the backward
reads are planned with the run (nothing is recomputed or kept past the
step), Dropout draws its masks inside the graph, BatchNorm updates its
running statistics, and the update runs as soon as each gradient is ready.
The optimizer's hyper-parameters are read at every call, so changing
`optimizer.lr` (a schedule) changes numbers, not the graph. The optimizer
states (momentum, Adam's moments) belong to the step: `step.states`.
"""
import numpy as np

from . import autograd
from ._lib import lib
from .ndarray import NDArray, array, zeros
from .nn.block import _reading_forbidden
from .symbol import CachedOp, Symbol, deferred_compute, export

# step_math.h's order: lr, wd, rescale_grad, clip_gradient, momentum or beta1, beta2, epsilon
_HYPER_COUNT = 7


def _optimizer_kind(optimizer):
    """The step optimizer's name and a function giving its hyper-parameters now."""
    from .optim import SGD, Adam

    def common(lr):
        return [lr, optimizer.wd, optimizer.rescale_grad, optimizer.clip_gradient]

    if isinstance(optimizer, SGD):
        kind = "sgd_mom" if optimizer.momentum else "sgd"
        return kind, lambda: common(optimizer.lr) + [optimizer.momentum, 0.0, 0.0]
    if isinstance(optimizer, Adam):
        def adam():
            optimizer.t += 1  # bias correction folded into lr, as adam_update's callers do
            t, b1, b2 = optimizer.t, optimizer.beta1, optimizer.beta2
            lr = optimizer.lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
            return common(lr) + [b1, b2, optimizer.epsilon]
        return "adam", adam
    raise TypeError(f"compile_step: optimizer {type(optimizer).__name__} has no step graph "
                    "(SGD and Adam do)")


class CompiledStep:
    """A net's training step as one graph per input signature (see the module)."""

    def __init__(self, net, loss_fn, optimizer):
        self.net, self.loss_fn, self.optimizer = net, loss_fn, optimizer
        self.kind, self._hyper_values = _optimizer_kind(optimizer)
        self.states = {}   # "<param>_mom", "<param>_mean", "<param>_var" -> NDArray
        self._graphs = {}  # (shapes, dtypes) -> what _build returns
        self._hyper = (None, None)

    def __call__(self, data, label, batch_size=None):
        """Run one step on a batch; returns the loss (per sample, as loss_fn gives it).
        Gradients are divided by batch_size (default: data's first dimension)."""
        if not isinstance(data, NDArray):
            data = array(data)
        if not isinstance(label, NDArray):
            label = array(label)
        key = (data.shape, data.dtype, label.shape, label.dtype)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._build(data, label)
        op, inputs, named, params = graph
        self.optimizer.rescale_grad = self.optimizer.scale / (batch_size or key[0][0])
        arrays = list(inputs)  # the states in place; the rest filled in below
        given = (data, label, self._hyper_array(data.device))
        for at, k in named:
            arrays[at] = given[k]
        for at, param in params:  # read at each call: set_data may have given one a new array
            arrays[at] = param.data()
        was_training = lib.DeftAutogradSetIsTraining(1)
        try:
            return op(*arrays)[0]
        finally:
            lib.DeftAutogradSetIsTraining(was_training)

    def _hyper_array(self, device):
        values = tuple(float(v) for v in self._hyper_values())
        if values != self._hyper[0]:
            self._hyper = (values, array(np.array(values, np.float64), device=device))
        return self._hyper[1]

    def _build(self, data, label):
        net, params = self.net, self.net.collect_params()
        ensure = getattr(net, "_ensure_all_params", None)
        if ensure:
            ensure((data,))
        clash = [k for k in params if k in ("data", "label", "step_hyper")]
        if clash:
            raise ValueError(f"parameter '{clash[0]}' has the name of a step input: rename it")
        hybrid = getattr(net, "_hybrid", False)
        if hybrid:  # record the forward itself, not a call of its compiled graph
            object.__setattr__(net, "_hybrid", False)
        try:
            with _reading_forbidden(), deferred_compute(), autograd.pause(train_mode=True):
                loss = self.loss_fn(net(data), label)
        finally:
            if hybrid:
                object.__setattr__(net, "_hybrid", True)
        names = {"data": data, "label": label}
        names.update({k: p.data() for k, p in params.items()})
        sym = export(names, {"loss": loss})
        inputs = set(sym.list_inputs())
        trained = [k for k, p in params.items() if p.grad_req != "null" and k in inputs]
        step = Symbol(lib.DeftSymbolTrainStep(sym, len(trained), trained, self.kind))
        # per input: a state's array in place; where data, label and step_hyper go
        # (0, 1, 2 in __call__'s `given`), and where each parameter's array goes
        inputs, named, trained = [], [], []
        for at, name in enumerate(step.list_inputs() + step.list_auxiliary_states()):
            state = None
            if name in ("data", "label", "step_hyper"):
                named.append((at, ("data", "label", "step_hyper").index(name)))
            elif name in params:
                trained.append((at, params[name]))
            else:  # an optimizer state of a parameter: "<param>_mom", ...
                if name not in self.states:
                    owner = params[name.rsplit("_", 1)[0]].data()
                    self.states[name] = zeros(owner.shape, owner.dtype, owner.device)
                state = self.states[name]
            inputs.append(state)
        return CachedOp(step), inputs, named, trained


def compile_step(net, loss_fn, optimizer):
    """The training step of `net` under `loss_fn` with `optimizer` (deft.optim.SGD or
    Adam over net's parameters) as one graph: `step(data, label)` runs forward, loss,
    backward and update in one C call and returns the loss."""
    return CompiledStep(net, loss_fn, optimizer)
