"""Optimizers: each step updates parameters in place from their gradients.

MXNet Gluon 1.x's optimizers and names (`learning_rate`, `wd`, `momentum`,
`beta1`, ...; `lr` is accepted as an alias), also by name for a Trainer:

    sgd (momentum, nesterov)  nag  adam  adamw  rmsprop (centered)
    adagrad  adadelta  lamb

A step is one call of a multi-tensor update operator (_step_sgd,
_step_adam, ... in core/op/step_update.c) per group of parameters that fits
one call, not one call per parameter: the update of a whole model is one
loop over all its elements. Parameters with their own `lr_mult` / `wd_mult`
(attributes of nn.Parameter) are updated by calls of their own, with their
own hyper-parameters. The hyper-parameters travel as a small array
(step_math.h's order), made again only when a value changes, so a
learning-rate schedule costs no new parsing. deft.compile_step reads the
same values for its step graph.

Every optimizer computes the gradient as MXNet does: rescale_grad times the
gradient (step(batch_size) divides by the batch size), clipped to
[-clip_gradient, clip_gradient], plus wd times the weight (AdaGrad, AdaDelta,
AdamW and LAMB add the decay to the step instead, as theirs do).
"""
import json

import numpy as np

from . import serialize as _serialize
from .ndarray import array, invoke_text, zeros

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdamW", "RMSProp", "AdaGrad", "AdaDelta", "LAMB",
           "create", "register"]

# step_math.h's order: lr, wd, rescale_grad, clip_gradient, momentum (or beta1, rho, gamma1),
# beta2 (or gamma2), epsilon, then LAMB's bias corrections and bounds
HYPER_COUNT = 11
_MAX_INPUTS = 64  # DEFT_OP_MAX_INPUTS: groups and hyper share one call's inputs

# the optimizer states of each step kind, as the training-step graph names them
STATE_NAMES = {"sgd": (), "sgd_mom": ("mom",), "nag": ("mom",), "adam": ("mean", "var"),
               "adamw": ("mean", "var"), "rmsprop": ("n",), "rmsprop_centered": ("n", "g", "delta"),
               "adagrad": ("history",), "adadelta": ("accg", "accdelta"), "lamb": ("mean", "var")}

_REGISTRY = {}


def register(cls):
    """Make an Optimizer subclass creatable by its lower-case name (a decorator)."""
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


def create(name, params=None, **kwargs):
    """The optimizer called `name` ("sgd", "adam", ...) over `params`."""
    cls = _REGISTRY.get(str(name).lower())
    if cls is None:
        raise ValueError(f"optimizer '{name}' is not one deft has (expected one of "
                         f"{', '.join(sorted(_REGISTRY))})")
    return cls(params, **kwargs)


def _learning_rate(learning_rate, lr, default):
    if learning_rate is not None and lr is not None and learning_rate != lr:
        raise TypeError(f"learning_rate={learning_rate} and lr={lr} disagree: give one")
    value = learning_rate if learning_rate is not None else lr
    return default if value is None else float(value)


class Optimizer:
    """The base: `params` (nn.Parameters or NDArrays with gradients; None when a
    Trainer gives them), learning_rate (alias lr), wd, rescale_grad,
    clip_gradient, lr_scheduler (called with the update count at each step)."""

    kind = None  # the step operator's kind: "sgd", "sgd_mom", "adam", ...
    default_lr = 0.01

    def __init__(self, params=None, learning_rate=None, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None, lr_scheduler=None, lr=None, begin_num_update=0):
        given = _learning_rate(learning_rate, lr, None)
        if lr_scheduler is not None:  # the scheduler's base_lr, unless one is given here
            if given is not None:
                lr_scheduler.base_lr = given
            given = lr_scheduler.base_lr
        self.lr = self.default_lr if given is None else float(given)
        self.wd, self.scale, self.rescale_grad = float(wd), rescale_grad, rescale_grad
        # rescale_grad scales the gradients on top of step()'s 1 / batch_size
        self.clip_gradient = -1.0 if clip_gradient is None else float(clip_gradient)
        self.lr_scheduler = lr_scheduler
        self.num_update = begin_num_update
        self.states = {}  # parameter index -> its state arrays
        self._hyper = {}  # (device, lr_mult, wd_mult) -> (values, their array)
        self._arrays, self._groups = [], []  # as _lay_out made them
        self.params = []
        if params is not None:
            self.set_params(params)

    # -- the parameters --------------------------------------------------------------------

    def set_params(self, params):
        """The parameters to train: nn.Parameters (read at each step, those with
        grad_req "null" then skipped) or NDArrays with gradients."""
        if hasattr(params, "values"):
            params = list(params.values())
        params = list(params)
        if not params:
            raise ValueError("no parameters to optimise")
        unique = []
        for p in params:  # a shared parameter is listed once
            if not any(p is q for q in unique):
                unique.append(p)
        self.params = unique
        self.states, self._arrays, self._groups = {}, [], []

    @property
    def learning_rate(self):
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("the optimizer has an lr_scheduler, which sets the learning rate")
        self.lr = float(lr)

    # -- the hyper-parameters --------------------------------------------------------------

    def _hyper_values(self):
        """This step's values in step_math.h's order (the kinds override the tail)."""
        values = [0.0] * HYPER_COUNT
        values[:4] = [self.lr, self.wd, self.rescale_grad, self.clip_gradient]
        values[7:] = [1.0, 1.0, -1.0, -1.0]  # LAMB's: no bias correction, no bounds
        return values

    def _scaled(self, values, lr_mult, wd_mult):
        """`values` for parameters of these multipliers."""
        values = list(values)
        values[0] *= lr_mult
        values[1] *= wd_mult
        return values

    def next_hyper(self):
        """Count the step (the schedule and Adam's bias correction read the count)
        and give its hyper-parameters."""
        self.num_update += 1
        if self.lr_scheduler is not None:
            self.lr = float(self.lr_scheduler(self.num_update))
        return tuple(self._hyper_values())

    def hyper_array(self, values, device, key=None):
        """`values` as a float64 array on `device`, the one made last time if they are equal."""
        values = tuple(float(v) for v in values)
        key = (device, None) if key is None else (device, key)
        kept = self._hyper.get(key)
        if kept is None or kept[0] != values:
            kept = self._hyper[key] = (values, array(np.array(values, np.float64), device=device))
        return kept[1]

    # -- the step --------------------------------------------------------------------------

    def step(self, batch_size=1, ignore_stale_grad=False):
        """Update every trainable parameter; gradients are multiplied by
        rescale_grad / batch_size. A parameter without a gradient is an error,
        unless ignore_stale_grad, which skips it."""
        self.rescale_grad = self.scale / batch_size
        self._update(self.next_hyper(), ignore_stale_grad)

    def _update(self, values, ignore_stale_grad=False):
        trained = self._trained(ignore_stale_grad)
        arrays = [a for _, a in trained]
        if len(arrays) != len(self._arrays) or any(a is not b for a, b in zip(arrays,
                                                                              self._arrays)):
            self._lay_out(trained)  # first step, a parameter frozen, or set_data's new array
        name, size = "_step_" + self.kind, 2 + self._num_states()
        per_call = (_MAX_INPUTS - 1) // size * size
        for (device, lr_mult, wd_mult), members in self._groups:
            inputs = []
            for i, arr in members:
                inputs.extend((arr, arr.grad) + self.states[i])
            hyper = self.hyper_array(self._scaled(values, lr_mult, wd_mult), device,
                                     (lr_mult, wd_mult))
            for at in range(0, len(inputs), per_call):
                invoke_text(name, inputs[at:at + per_call] + [hyper], (), ())

    def _trained(self, ignore_stale_grad=False):
        """(index, array) of the parameters trained now: grad_req not "null"."""
        trained = []
        for i, p in enumerate(self.params):
            if getattr(p, "grad_req", "write") == "null":
                continue
            arr = p.data() if callable(getattr(p, "data", None)) else p
            if arr.grad is None:
                if ignore_stale_grad:
                    continue
                name = getattr(p, "name", f"parameter {i}")
                raise ValueError(f"'{name}' has no gradient: call attach_grad() (or initialize "
                                 f"the block) first, or step(ignore_stale_grad=True) to skip it")
            trained.append((i, arr))
        return trained

    def _lay_out(self, trained):
        """The trained arrays by device and multipliers (one call each), with their states."""
        groups = {}
        for i, arr in trained:
            if i not in self.states:
                self.states[i] = self._new_state(arr)
            p = self.params[i]
            key = (arr.device, float(getattr(p, "lr_mult", 1.0)),
                   float(getattr(p, "wd_mult", 1.0)))
            groups.setdefault(key, []).append((i, arr))
        self._arrays = [a for _, a in trained]
        self._groups = list(groups.items())

    def _num_states(self):
        return len(STATE_NAMES[self.kind])

    def _new_state(self, p):
        return tuple(zeros(p.shape, p.dtype, p.device) for _ in range(self._num_states()))

    # -- checkpoints -----------------------------------------------------------------------

    def _settings(self):
        """The hyper-parameters a checkpoint keeps (JSON values)."""
        return {"lr": self.lr, "wd": self.wd, "scale": self.scale,
                "clip_gradient": self.clip_gradient, "num_update": self.num_update}

    def save_states(self, path):
        """Write the states, the update count and the hyper-parameters to `path` (exactly)."""
        arrays = {f"state:{i}:{k}": s for i, states in self.states.items()
                  for k, s in enumerate(states)}
        meta = json.dumps({"optimizer": type(self).__name__, "settings": self._settings()})
        arrays["meta"] = array(np.frombuffer(meta.encode(), np.uint8))
        _serialize.save(path, arrays)

    def load_states(self, path):
        """Read what save_states wrote: the states (copied into the parameters'
        devices), the update count and the hyper-parameters."""
        loaded = _serialize.load(path)
        if not isinstance(loaded, dict) or "meta" not in loaded:
            raise ValueError(f"load_states: '{path}' is not a file of save_states")
        meta = json.loads(bytes(loaded.pop("meta").asnumpy()).decode())
        if meta["optimizer"] != type(self).__name__:
            raise ValueError(f"load_states: '{path}' holds the states of {meta['optimizer']}, "
                             f"not {type(self).__name__}")
        for name, value in meta["settings"].items():
            setattr(self, name, value)
        states = {}
        for key, value in loaded.items():
            _, i, k = key.split(":")
            states.setdefault(int(i), {})[int(k)] = value
        for i, by_k in states.items():
            if i >= len(self.params):
                raise ValueError(f"load_states: '{path}' has states of parameter {i}, this "
                                 f"optimizer trains {len(self.params)}")
            p = self.params[i]
            arr = p.data() if callable(getattr(p, "data", None)) else p
            self.states[i] = tuple(by_k[k].astype(arr.dtype).to(arr.device)
                                   for k in sorted(by_k))
        self._arrays, self._groups = [], []


@register
class SGD(Optimizer):
    """SGD, with momentum when momentum > 0, Nesterov's when nesterov=True
    (MXNet's NAG). Momentum: mom = momentum mom - lr g; w += mom. Nesterov:
    mom = momentum mom + g; w -= lr (g + momentum mom)."""

    def __init__(self, params=None, learning_rate=None, momentum=0.0, nesterov=False, **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)
        if self.nesterov and not self.momentum:
            raise ValueError("nesterov=True needs a momentum")

    @property
    def kind(self):
        return "nag" if self.nesterov else "sgd_mom" if self.momentum else "sgd"

    def _hyper_values(self):
        values = super()._hyper_values()
        values[4] = self.momentum
        return values

    def _settings(self):
        return dict(super()._settings(), momentum=self.momentum)


@register
class NAG(SGD):
    """SGD with Nesterov momentum (MXNet's NAG)."""

    def __init__(self, params=None, learning_rate=None, momentum=0.9, **kwargs):
        super().__init__(params, learning_rate, momentum=momentum, nesterov=True, **kwargs)


@register
class Adam(Optimizer):
    """Adam (Kingma & Ba), bias correction folded into the step size as MXNet does:
    lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t); w -= lr_t mean / (sqrt(var) + epsilon)."""

    kind = "adam"
    default_lr = 0.001

    def __init__(self, params=None, learning_rate=None, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    @property
    def t(self):
        return self.num_update

    def _corrections(self):
        t = max(self.num_update, 1)
        return 1 - self.beta1 ** t, 1 - self.beta2 ** t

    def _hyper_values(self):
        c1, c2 = self._corrections()
        values = super()._hyper_values()
        values[0] = self.lr * c2 ** 0.5 / c1
        values[4:7] = [self.beta1, self.beta2, self.epsilon]
        return values

    def _settings(self):
        return dict(super()._settings(), beta1=self.beta1, beta2=self.beta2,
                    epsilon=self.epsilon)


@register
class AdamW(Adam):
    """AdamW (Loshchilov & Hutter) as PyTorch's: w -= lr wd w, then Adam's step
    with bias-corrected moments, epsilon added to sqrt(var^)."""

    kind = "adamw"

    def __init__(self, params=None, learning_rate=None, wd=0.01, **kwargs):
        super().__init__(params, learning_rate, wd=wd, **kwargs)

    def _hyper_values(self):
        c1, c2 = self._corrections()
        values = super()._hyper_values()  # lr_t = lr sqrt(c2) / c1
        # lr_t wd' = lr wd (and lr_mult, wd_mult scale both sides alike)
        values[1] = self.wd * self.lr / values[0] if values[0] else 0.0
        values[6] = self.epsilon * c2 ** 0.5  # mean^ / (sqrt(var^) + eps), folded
        return values


@register
class RMSProp(Optimizer):
    """RMSProp as MXNet's: n = gamma1 n + (1 - gamma1) g^2; w -= lr g / sqrt(n + epsilon).
    centered=True: Graves' version, with the mean gradient and momentum gamma2."""

    default_lr = 0.001

    def __init__(self, params=None, learning_rate=None, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = float(gamma1), float(gamma2), float(epsilon)
        self.centered = bool(centered)

    @property
    def kind(self):
        return "rmsprop_centered" if self.centered else "rmsprop"

    def _hyper_values(self):
        values = super()._hyper_values()
        values[4:7] = [self.gamma1, self.gamma2, self.epsilon]
        return values

    def _settings(self):
        return dict(super()._settings(), gamma1=self.gamma1, gamma2=self.gamma2,
                    epsilon=self.epsilon)


@register
class AdaGrad(Optimizer):
    """AdaGrad as MXNet's: history += g^2; w -= lr (g / sqrt(history + epsilon) + wd w)."""

    kind = "adagrad"

    def __init__(self, params=None, learning_rate=None, epsilon=1e-7, **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.epsilon = float(epsilon)

    def _hyper_values(self):
        values = super()._hyper_values()
        values[6] = self.epsilon
        return values

    def _settings(self):
        return dict(super()._settings(), epsilon=self.epsilon)


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler) as MXNet 1.x's, times learning_rate (1 by default, where
    MXNet 1.x's has none): acc_g = rho acc_g + (1 - rho) g^2;
    d = sqrt(acc_d + eps) / sqrt(acc_g + eps) g; acc_d = rho acc_d + (1 - rho) d^2;
    w -= lr (d + wd w)."""

    kind = "adadelta"
    default_lr = 1.0

    def __init__(self, params=None, learning_rate=None, rho=0.9, epsilon=1e-5, **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.rho, self.epsilon = float(rho), float(epsilon)

    def _hyper_values(self):
        values = super()._hyper_values()
        values[4], values[6] = self.rho, self.epsilon
        return values

    def _settings(self):
        return dict(super()._settings(), rho=self.rho, epsilon=self.epsilon)


@register
class LAMB(Optimizer):
    """LAMB (You et al.) as MXNet's: Adam's direction u = mean^ / (sqrt(var^) +
    epsilon) + wd w, and w -= lr r u with the trust ratio r = |w| / |u| per
    parameter (|w| clamped to [lower_bound, upper_bound] when given; r = 1
    where either norm is 0). CPU only."""

    kind = "lamb"
    default_lr = 0.001

    def __init__(self, params=None, learning_rate=None, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(params, learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bool(bias_correction)

    def _hyper_values(self):
        t = max(self.num_update, 1)
        values = super()._hyper_values()
        values[4:7] = [self.beta1, self.beta2, self.epsilon]
        if self.bias_correction:
            values[7:9] = [1 - self.beta1 ** t, 1 - self.beta2 ** t]
        values[9] = -1.0 if self.lower_bound is None else float(self.lower_bound)
        values[10] = -1.0 if self.upper_bound is None else float(self.upper_bound)
        return values

    def _settings(self):
        return dict(super()._settings(), beta1=self.beta1, beta2=self.beta2,
                    epsilon=self.epsilon)
