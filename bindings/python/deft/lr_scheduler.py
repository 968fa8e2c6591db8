"""Learning-rate schedules, as MXNet 1.9's mx.lr_scheduler defines them.

A scheduler is called with the number of updates so far (1 at the first
step) and returns the learning rate. Give one to an optimizer or a Trainer:

    sched = deft.lr_scheduler.CosineScheduler(max_update=1000, base_lr=0.1,
                                              warmup_steps=100)
    trainer = deft.Trainer(net.collect_params(), "sgd", {"lr_scheduler": sched})

Every scheduler warms up first when warmup_steps > 0: from warmup_begin_lr
to base_lr linearly (warmup_mode "linear") or at warmup_begin_lr
("constant"). An optimizer given both a learning_rate and a scheduler makes
the learning_rate the scheduler's base_lr (MXNet 1.9 does too, but leaves
Poly's and Cosine's starting point and the warmup's end at the old one).
"""
import math

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


class LRScheduler:
    """The base: base_lr and the warmup."""

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps is {warmup_steps!r}, expected an int >= 0")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"warmup_mode is {warmup_mode!r}, expected 'linear' or 'constant'")
        self.warmup_steps, self.warmup_begin_lr, self.warmup_mode = (
            warmup_steps, warmup_begin_lr, warmup_mode)
        self._base_lr = None
        self.base_lr = base_lr

    @property
    def base_lr(self):
        return self._base_lr

    @base_lr.setter
    def base_lr(self, value):
        if self.warmup_steps and self.warmup_begin_lr > value:
            raise ValueError(f"base_lr {value} is below warmup_begin_lr {self.warmup_begin_lr}")
        self._base_lr = value
        self.warmup_final_lr = value
        self._set_start(value)

    def _set_start(self, value):
        """Where the schedule after the warmup starts (Poly and Cosine keep it)."""

    def get_warmup_lr(self, num_update):
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        increase = (self.warmup_final_lr - self.warmup_begin_lr) * num_update / self.warmup_steps
        return self.warmup_begin_lr + increase

    def __call__(self, num_update):
        raise NotImplementedError(f"{type(self).__name__} must define __call__(num_update)")


class FactorScheduler(LRScheduler):
    """base_lr * factor^(floor((num_update - 1) / step)), not below stop_factor_lr."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        if step < 1:
            raise ValueError(f"step is {step}, expected 1 or more updates")
        if factor > 1.0:
            raise ValueError(f"factor is {factor}, expected 1 or less (a decreasing rate)")
        self.step, self.factor, self.stop_factor_lr, self.count = step, factor, stop_factor_lr, 0
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self._lr = self.base_lr

    def _set_start(self, value):
        self._lr, self.count = value, 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:  # while: resuming at a later update
            self.count += self.step
            self._lr = max(self._lr * self.factor, self.stop_factor_lr)
        return self._lr


class MultiFactorScheduler(LRScheduler):
    """base_lr times factor once for every step in `step` (increasing) that
    num_update has passed."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        step = list(step)
        if not step or any(s < 1 for s in step) or any(b <= a for a, b in zip(step, step[1:])):
            raise ValueError(f"step is {step}, expected an increasing list of updates >= 1")
        if factor > 1.0:
            raise ValueError(f"factor is {factor}, expected 1 or less (a decreasing rate)")
        self.step, self.factor = step, factor
        self.cur_step_ind, self.count = 0, 0
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _set_start(self, value):
        self._lr, self.cur_step_ind, self.count = value, 0, 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self._lr *= self.factor
        return self._lr


class PolyScheduler(LRScheduler):
    """final_lr + (base_lr - final_lr) (1 - (num_update - warmup_steps) /
    (max_update - warmup_steps))^pwr, then final_lr after max_update."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        if not isinstance(max_update, int) or max_update < 1:
            raise ValueError(f"max_update is {max_update!r}, expected an int >= 1")
        self.power, self.max_update, self.final_lr = pwr, max_update, final_lr
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_steps = max_update - warmup_steps

    def _set_start(self, value):
        self.base_lr_orig = self._lr = value

    def _shape(self, progress):
        return (1 - progress) ** self.power

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            progress = (num_update - self.warmup_steps) / self.max_steps
            self._lr = self.final_lr + (self.base_lr_orig - self.final_lr) * self._shape(progress)
        return self._lr


class CosineScheduler(PolyScheduler):
    """final_lr + (base_lr - final_lr) (1 + cos(pi (num_update - warmup_steps) /
    (max_update - warmup_steps))) / 2, then final_lr after max_update."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(max_update, base_lr, 1, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)

    def _shape(self, progress):
        return (1 + math.cos(math.pi * progress)) / 2
