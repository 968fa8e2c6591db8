"""Dynamic loss scaling for float16 training (MXNet's amp loss scaler,
PyTorch's GradScaler).

float16 gradients underflow: values below 6e-8 become 0. Scaling the loss by
a large factor scales every gradient with it, into float16's range; the step
divides it out again. When the scale is too large, a gradient overflows to
infinity or NaN: that step is skipped and the scale halves. After
growth_interval steps without overflow it doubles again.

    scaler = deft.amp.LossScaler()
    for x, y in loader:
        with autograd.record():
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(trainer, x.shape[0])   # skipped when a gradient overflowed
        scaler.update()

The division is folded into the Trainer's rescale (step(batch_size * scale)),
so it costs no pass over the gradients; the overflow check is one read of
the gradients' global norm.
"""
import math

from . import autograd
from .utils import global_norm

__all__ = ["LossScaler", "GradScaler"]


def _positive(name, value):
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"LossScaler: {name} is {value}, expected a finite number > 0")
    return value


class LossScaler:
    """Scales the loss, skips steps whose gradients overflowed, and adapts the scale.

    init_scale: the first scale (2**16). growth_factor (> 1) multiplies it after
    growth_interval steps in a row without overflow; backoff_factor (in (0, 1))
    after a step with one. enabled=False makes every method a pass-through, so
    one training loop serves float32 and float16.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._scale = _positive("init_scale", init_scale)
        self.growth_factor = _positive("growth_factor", growth_factor)
        if self.growth_factor <= 1:
            raise ValueError(f"LossScaler: growth_factor is {growth_factor}, expected > 1")
        self.backoff_factor = _positive("backoff_factor", backoff_factor)
        if self.backoff_factor >= 1:
            raise ValueError(f"LossScaler: backoff_factor is {backoff_factor}, expected < 1")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(f"LossScaler: growth_interval is {growth_interval}, expected an "
                             f"integer >= 1")
        self.growth_interval = int(growth_interval)
        self.enabled = bool(enabled)
        self._good_steps = 0     # steps without overflow since the scale last changed
        self._found_inf = None   # the last step's finding, until update()

    def get_scale(self):
        """The current scale (1.0 when disabled)."""
        return self._scale if self.enabled else 1.0

    @property
    def loss_scale(self):
        """MXNet's name for get_scale()."""
        return self.get_scale()

    def scale(self, loss):
        """loss times the scale (an array, or a list of arrays), recorded for
        backward also when called after the autograd.record() block."""
        if not self.enabled:
            return loss
        with autograd.record(train_mode=autograd.is_training()):
            if isinstance(loss, (list, tuple)):
                return type(loss)(item * self._scale for item in loss)
            return loss * self._scale

    def step(self, trainer, batch_size, ignore_stale_grad=False):
        """trainer.step with the scale divided out, unless a gradient is NaN or
        infinite: then nothing changes (parameters and optimizer states alike).
        Returns whether the step ran."""
        if not self.enabled:
            trainer.step(batch_size, ignore_stale_grad)
            return True
        grads = [arr.grad for _, arr in trainer.optimizer._trained(ignore_stale_grad)]
        self._found_inf = bool(grads) and not math.isfinite(global_norm(grads))
        if self._found_inf:
            return False
        trainer.step(batch_size * self._scale, ignore_stale_grad)
        return True

    def update(self, new_scale=None):
        """Adapt the scale to the last step (or set it to new_scale)."""
        if new_scale is not None:
            self._scale = _positive("new_scale", new_scale)
            self._good_steps, self._found_inf = 0, None
            return
        if not self.enabled or self._found_inf is None:
            return
        if self._found_inf:
            self._scale *= self.backoff_factor
            self._good_steps = 0
        else:
            self._good_steps += 1
            if self._good_steps == self.growth_interval:
                self._scale *= self.growth_factor
                self._good_steps = 0
        self._found_inf = None

    def state_dict(self):
        """The scale and its counters, for a checkpoint."""
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "good_steps": self._good_steps}

    def load_state_dict(self, state):
        """Restore what state_dict() returned."""
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "good_steps"} - set(state)
        if missing:
            raise KeyError(f"LossScaler.load_state_dict: missing {sorted(missing)}")
        restored = LossScaler(state["scale"], state["growth_factor"], state["backoff_factor"],
                              state["growth_interval"], self.enabled)
        restored._good_steps = int(state["good_steps"])
        self.__dict__.update(restored.__dict__)


GradScaler = LossScaler  # PyTorch's name
