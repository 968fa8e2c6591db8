"""Optimizers: each step updates parameters in place from their gradients.

A step is one call of a multi-tensor update operator (_step_sgd, _step_sgd_mom,
_step_adam) per group of parameters that fits one call (20 with momentum), not
one call per parameter: the update of a whole model is one loop over all its
elements. The hyper-parameters travel as a small array (step_math.h's order),
made again only when a value changes, so a learning-rate schedule costs no
new parsing. deft.compile_step reads the same values for its step graph.
"""
import numpy as np

from .ndarray import array, invoke_text, zeros

# step_math.h's order: lr, wd, rescale_grad, clip_gradient, momentum or beta1, beta2, epsilon
HYPER_COUNT = 7
_MAX_INPUTS = 64  # DEFT_OP_MAX_INPUTS: groups and hyper share one call's inputs


class Optimizer:
    kind = None  # the step operator's kind: "sgd", "sgd_mom", "adam"

    def __init__(self, params, lr, wd=0.0, rescale_grad=1.0, clip_gradient=None):
        if hasattr(params, "values"):
            params = list(params.values())
        # NDArrays, or nn.Parameters read at each step; those with grad_req "null"
        # (BatchNorm's running statistics, frozen ones) are not trained, as in MXNet's Trainer
        self.params = [p for p in params if getattr(p, "grad_req", "write") != "null"]
        if not self.params:
            raise ValueError("no parameters to optimise")
        self.states = {}
        # rescale_grad scales the gradients on top of step()'s 1 / batch_size
        self.lr, self.wd, self.scale, self.rescale_grad = lr, wd, rescale_grad, rescale_grad
        self.clip_gradient = -1.0 if clip_gradient is None else clip_gradient
        self._hyper = {}  # device -> (values, their array)
        self._arrays, self._devices = [], []  # as _lay_out made them

    def next_hyper(self):
        """The next step's hyper-parameters, in step_math.h's order (Adam counts the step)."""
        return (self.lr, self.wd, self.rescale_grad, self.clip_gradient, 0.0, 0.0, 0.0)

    def hyper_array(self, values, device):
        """`values` as a float64 array on `device`, the one made last time if they are equal."""
        values = tuple(float(v) for v in values)
        kept = self._hyper.get(device)
        if kept is None or kept[0] != values:
            kept = self._hyper[device] = (values, array(np.array(values, np.float64),
                                                        device=device))
        return kept[1]

    def step(self, batch_size=1):
        """Update every parameter; gradients are multiplied by rescale_grad / batch_size."""
        self.rescale_grad = self.scale / batch_size
        values = self.next_hyper()
        arrays = [p.data() if callable(getattr(p, "data", None)) else p for p in self.params]
        if len(arrays) != len(self._arrays) or any(a is not b for a, b in zip(arrays,
                                                                              self._arrays)):
            self._lay_out(arrays)  # first step, or set_data gave a parameter a new array
        name, size = "_step_" + self.kind, 2 + self._num_states()
        per_call = (_MAX_INPUTS - 1) // size * size
        for device, indices in self._devices:
            inputs = []
            for i in indices:
                arr = arrays[i]
                if arr.grad is None:
                    raise ValueError(f"parameter {i} has no gradient: call attach_grad() "
                                     f"(or initialize the block) first")
                inputs.extend((arr, arr.grad) + self.states[i])
            hyper = self.hyper_array(values, device)
            for at in range(0, len(inputs), per_call):
                invoke_text(name, inputs[at:at + per_call] + [hyper], (), ())

    def _lay_out(self, arrays):
        """The parameters' arrays by device (one call per device), with their states."""
        devices = {}
        for i, arr in enumerate(arrays):
            if i not in self.states:
                self.states[i] = self._new_state(arr)
            devices.setdefault(arr.device, []).append(i)
        self._arrays, self._devices = arrays, list(devices.items())

    def _num_states(self):
        return 0

    def _new_state(self, p):
        return ()


class SGD(Optimizer):
    """SGD, with momentum when momentum > 0."""

    def __init__(self, params, lr=0.01, momentum=0.0, **kwargs):
        super().__init__(params, lr, **kwargs)
        self.momentum = momentum

    @property
    def kind(self):
        return "sgd_mom" if self.momentum else "sgd"

    def next_hyper(self):
        return super().next_hyper()[:4] + (self.momentum, 0.0, 0.0)

    def _num_states(self):
        return 1 if self.momentum else 0

    def _new_state(self, p):
        return (zeros(p.shape, p.dtype, p.device),) if self.momentum else ()


class Adam(Optimizer):
    """Adam (Kingma & Ba), bias correction folded into the step size as MXNet does."""

    kind = "adam"

    def __init__(self, params, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(params, lr, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.t = 0

    def next_hyper(self):
        self.t += 1
        t, b1, b2 = self.t, self.beta1, self.beta2
        corrected = self.lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
        return (corrected, self.wd, self.rescale_grad, self.clip_gradient, b1, b2, self.epsilon)

    def _num_states(self):
        return 2

    def _new_state(self, p):
        return zeros(p.shape, p.dtype, p.device), zeros(p.shape, p.dtype, p.device)
