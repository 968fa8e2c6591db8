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
states (momentum, Adam's moments) are the optimizer's own, so eager steps
(optimizer.step()) and compiled ones can take turns on one training run.

The loss is per sample (deft.nn's losses): the step's backward sums it, and
the gradients are divided by the batch size, as Trainer.step(batch_size)
does. The optimizer may be a deft.Trainer: its schedule applies; global-norm
clipping and parameters of their own lr_mult / wd_mult need the eager
trainer.step() (the step graph has one set of hyper-parameters and no
norm of all gradients).
"""
from . import autograd
from ._lib import lib
from .ndarray import NDArray, array
from .nn.block import _reading_forbidden
from .optim import STATE_NAMES
from .symbol import CachedOp, Symbol, deferred_compute, export

class CompiledStep:
    """A net's training step as one graph per input signature (see the module)."""

    def __init__(self, net, loss_fn, optimizer, fuse=True):
        trainer = None
        if hasattr(optimizer, "optimizer") and hasattr(optimizer, "step"):  # a deft.Trainer
            trainer, optimizer = optimizer, optimizer.optimizer
            if trainer.clip_global_norm is not None:
                raise ValueError("compile_step: the trainer clips the gradients' global norm, "
                                 "which the step graph does not: use trainer.step()")
        if getattr(optimizer, "kind", None) not in STATE_NAMES:
            raise TypeError(f"compile_step: optimizer {type(optimizer).__name__} has no step "
                            f"graph (deft.optim's optimizers do)")
        self.net, self.loss_fn, self.optimizer, self.trainer = net, loss_fn, optimizer, trainer
        self.fuse = fuse
        self._graphs = {}  # (shapes, dtypes, kind) -> what _build returns

    def __call__(self, data, label, batch_size=None):
        """Run one step on a batch; returns the loss (per sample, as loss_fn gives it).
        Gradients are divided by batch_size (default: data's first dimension)."""
        if not isinstance(data, NDArray):
            data = array(data)
        if not isinstance(label, NDArray):
            label = array(label)
        opt = self.optimizer
        key = (data.shape, data.dtype, label.shape, label.dtype, opt.kind)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._build(data, label)
        op, inputs, named, params = graph
        opt.rescale_grad = opt.scale / (batch_size or key[0][0])
        arrays = list(inputs)  # the states in place; the rest filled in below
        given = (data, label, opt.hyper_array(opt.next_hyper(), data.device))
        for at, k in named:
            arrays[at] = given[k]
        for at, param in params:  # read at each call: set_data may have given one a new array
            arrays[at] = param.data()
        was_training = lib.DeftAutogradSetIsTraining(1)
        try:
            return op(*arrays)[0]
        finally:
            lib.DeftAutogradSetIsTraining(was_training)

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
        mults = {(getattr(params[k], "lr_mult", 1.0), getattr(params[k], "wd_mult", 1.0))
                 for k in trained}
        if mults - {(1.0, 1.0)}:
            raise ValueError("compile_step: parameters with lr_mult or wd_mult other than 1 "
                             "need hyper-parameters of their own: use the eager trainer.step()")
        step = Symbol(lib.DeftSymbolTrainStep(sym, len(trained), trained, self.optimizer.kind))
        if self.fuse:  # layers (conv + relu, pooling + relu gradients) and elementwise chains
            step = step.apply_passes("Fuse")
        # per input: a state's array in place; where data, label and step_hyper go
        # (0, 1, 2 in __call__'s `given`), and where each parameter's array goes
        inputs, named, trained = [], [], []
        for at, name in enumerate(step.list_inputs() + step.list_auxiliary_states()):
            state = None
            if name in ("data", "label", "step_hyper"):
                named.append((at, ("data", "label", "step_hyper").index(name)))
            elif name in params:
                trained.append((at, params[name]))
            else:  # an optimizer state of a parameter: "<param>_mom", "_mean", "_var", ...
                owner, which = name.rsplit("_", 1)
                state = self._state(owner, params[owner],
                                    STATE_NAMES[self.optimizer.kind].index(which))
            inputs.append(state)
        return CachedOp(step), inputs, named, trained

    def _state(self, name, param, k):
        """State k of `param`, the optimizer's (made now if its first step is this one)."""
        opt = self.optimizer
        i = next((i for i, p in enumerate(opt.params) if p is param), None)
        if i is None:
            raise ValueError(f"compile_step: parameter '{name}' of the net is not one the "
                             "optimizer trains: make the optimizer over net.collect_params()")
        if i not in opt.states:
            opt.states[i] = opt._new_state(param.data())
        return opt.states[i][k]


def compile_step(net, loss_fn, optimizer, fuse=True):
    """The training step of `net` under `loss_fn` with `optimizer` (a deft.optim
    optimizer or a deft.Trainer over net's parameters) as one graph:
    `step(data, label)` runs forward, loss, backward and update in one C call and
    returns the per-sample loss. With `fuse`, the graph goes through the Fuse pass
    first (a convolution and its relu as one node, max pooling's gradient and the
    relu gradient after it as one, elementwise chains as one): the same values,
    fewer passes over memory."""
    return CompiledStep(net, loss_fn, optimizer, fuse)
