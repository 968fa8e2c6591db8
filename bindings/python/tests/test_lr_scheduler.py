"""Learning-rate schedules against MXNet 1.9's formulas, update by update."""
import math

import numpy as np
import pytest

import deft
from deft import lr_scheduler as ls, optim


def _warmup(t, steps, begin, final, mode):
    return begin if mode == "constant" else begin + (final - begin) * t / steps


def test_factor_scheduler():
    s = ls.FactorScheduler(step=3, factor=0.5, stop_factor_lr=0.1, base_lr=1.0)
    got = [s(t) for t in range(1, 14)]
    # MXNet: lr halves once num_update passes count + step (4, 7, 10, ...), not below 0.1
    want = [1.0] * 3 + [0.5] * 3 + [0.25] * 3 + [0.125] * 3 + [0.1]
    assert got == pytest.approx(want)


def test_factor_scheduler_resumed_at_a_later_update():
    """A schedule first called at update 10 (resuming) catches up, as MXNet's while loop."""
    assert ls.FactorScheduler(step=3, factor=0.5, base_lr=1.0)(10) == pytest.approx(0.125)


def test_multi_factor_scheduler():
    s = ls.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0)
    got = [s(t) for t in range(1, 8)]
    assert got == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01])


@pytest.mark.parametrize("mode", ["linear", "constant"])
def test_poly_scheduler_with_warmup(mode):
    s = ls.PolyScheduler(max_update=10, base_lr=0.5, pwr=2, final_lr=0.01, warmup_steps=4,
                         warmup_begin_lr=0.1, warmup_mode=mode)
    for t in range(0, 14):
        if t < 4:
            want = _warmup(t, 4, 0.1, 0.5, mode)
        else:
            want = 0.01 + (0.5 - 0.01) * (1 - (min(t, 10) - 4) / 6) ** 2
        assert s(t) == pytest.approx(want), t


def test_cosine_scheduler_with_warmup():
    s = ls.CosineScheduler(max_update=20, base_lr=0.3, final_lr=0.02, warmup_steps=5,
                           warmup_begin_lr=0.05)
    for t in range(0, 25):
        if t < 5:
            want = _warmup(t, 5, 0.05, 0.3, "linear")
        else:
            want = 0.02 + (0.3 - 0.02) * (1 + math.cos(math.pi * (min(t, 20) - 5) / 15)) / 2
        assert s(t) == pytest.approx(want), t


def test_an_optimizers_learning_rate_becomes_the_base():
    a = deft.array(np.ones(2, np.float32))
    a.attach_grad()
    s = ls.CosineScheduler(max_update=10, base_lr=1.0, warmup_steps=2, warmup_begin_lr=0.0)
    opt = optim.SGD([a], learning_rate=0.5, lr_scheduler=s)
    assert opt.lr == 0.5
    assert s.base_lr == 0.5 and s.warmup_final_lr == 0.5
    assert s(1) == pytest.approx(0.25) and s(2) == pytest.approx(0.5)
    opt2 = optim.SGD([a], lr_scheduler=ls.FactorScheduler(step=1, base_lr=0.3))
    assert opt2.lr == 0.3


def test_bad_schedules_are_errors():
    with pytest.raises(ValueError, match="step is 0"):
        ls.FactorScheduler(step=0)
    with pytest.raises(ValueError, match="factor is 2"):
        ls.FactorScheduler(step=1, factor=2)
    with pytest.raises(ValueError, match="increasing list"):
        ls.MultiFactorScheduler(step=[3, 2])
    with pytest.raises(ValueError, match="max_update is 0"):
        ls.PolyScheduler(max_update=0)
    with pytest.raises(ValueError, match="warmup_mode"):
        ls.CosineScheduler(max_update=5, warmup_mode="cubic")
    with pytest.raises(ValueError, match="below warmup_begin_lr"):
        ls.CosineScheduler(max_update=5, base_lr=0.1, warmup_steps=2, warmup_begin_lr=0.5)
