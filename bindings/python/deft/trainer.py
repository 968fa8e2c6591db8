"""Trainer: MXNet Gluon 1.x's, over deft's fused optimizer steps.

    trainer = deft.Trainer(net.collect_params(), "sgd",
                           {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})
    with autograd.record():
        loss = loss_fn(net(x), y)        # per sample
    loss.backward()                      # their sum
    trainer.step(x.shape[0])             # the batch's mean gradient

Each step updates every trainable parameter in one call per device and
(lr_mult, wd_mult) group (see deft.optim). Parameters whose grad_req is
"null" at the time of the step are left alone (frozen), also when it was set
after initialize(). clip_global_norm=c scales the step's gradients (after
the 1 / batch_size) so that their global 2-norm is at most c.
"""
import math

from . import optim as _optim
from .utils import global_norm

__all__ = ["Trainer"]


class Trainer:
    """Applies an optimizer to a set of parameters (Gluon's Trainer).

    params: a dict of nn.Parameters (net.collect_params()) or a list of them.
    optimizer: a name ("sgd", "nag", "adam", "adamw", "rmsprop", "adagrad",
    "adadelta", "lamb") or a deft.optim.Optimizer instance (made without params).
    optimizer_params: the optimizer's keyword arguments (learning_rate, wd,
    momentum, lr_scheduler, ...), with a name only.
    """

    def __init__(self, params, optimizer, optimizer_params=None, clip_global_norm=None,
                 kvstore=None, update_on_kvstore=None):
        if hasattr(params, "values"):
            params = list(params.values())
        elif not isinstance(params, (list, tuple)):
            raise TypeError(f"Trainer: params must be a dict (collect_params()) or a list of "
                            f"parameters, got {type(params).__name__}")
        if kvstore not in (None, "device", "local") or update_on_kvstore:
            raise ValueError("Trainer: deft updates the parameters where they are; kvstore is "
                             "not supported")
        if isinstance(optimizer, _optim.Optimizer):
            if optimizer_params:
                raise ValueError("Trainer: optimizer_params go with an optimizer's name; an "
                                 "Optimizer instance has its own")
            optimizer.set_params(params)
            self._optimizer = optimizer
        else:
            self._optimizer = _optim.create(optimizer, params, **dict(optimizer_params or {}))
        if clip_global_norm is not None and not clip_global_norm > 0:
            raise ValueError(f"Trainer: clip_global_norm is {clip_global_norm}, expected > 0")
        self.clip_global_norm = clip_global_norm
        self.last_global_norm = None  # the last step's norm, when clipping

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def learning_rate(self):
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr):
        """Set the learning rate (an error when a scheduler sets it)."""
        self._optimizer.set_learning_rate(lr)

    @property
    def lr_scheduler(self):
        return self._optimizer.lr_scheduler

    def step(self, batch_size, ignore_stale_grad=False):
        """One update of every trainable parameter from its gradient divided by
        batch_size (the loss's backward summed the per-sample gradients)."""
        opt = self._optimizer
        opt.rescale_grad = opt.scale / batch_size
        if self.clip_global_norm is not None:
            grads = [arr.grad for _, arr in opt._trained(ignore_stale_grad)]
            norm = global_norm(grads) * abs(opt.rescale_grad)
            self.last_global_norm = norm
            if not math.isfinite(norm):
                raise ValueError(f"Trainer.step: the gradients' global norm is {norm} (NaN or "
                                 f"infinity in a gradient)")
            if norm > self.clip_global_norm:
                opt.rescale_grad *= self.clip_global_norm / (norm + 1e-8)
        opt._update(opt.next_hyper(), ignore_stale_grad)

    def update(self, batch_size, ignore_stale_grad=False):
        """The same as step (one device: there is nothing to all-reduce)."""
        self.step(batch_size, ignore_stale_grad)

    def allreduce_grads(self):
        """Nothing to do on one device (Gluon's API)."""

    def zero_grad(self):
        """Set every trained parameter's gradient to zero (for grad_req "add")."""
        for p in self._optimizer.params:
            arr = p.data() if callable(getattr(p, "data", None)) else p
            if arr.grad is not None:
                arr.grad[:] = 0

    def save_states(self, path):
        """Write the optimizer's states, update count and hyper-parameters to `path`."""
        self._optimizer.save_states(path)

    def load_states(self, path):
        """Read what save_states wrote."""
        self._optimizer.load_states(path)
