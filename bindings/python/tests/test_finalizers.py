"""Dropping Python objects frees the native handles and memory behind them."""
import gc

import deft
from deft import autograd


def counters():
    gc.collect()
    deft.waitall()
    return deft.live_arrays(), deft.memory_stat("live_bytes")


def test_100k_arrays_created_and_dropped():
    before = counters()
    x = deft.ones((4,))
    for _ in range(100_000):
        y = x + 1
        del y
    del x
    assert counters() == before


def test_arrays_inside_deferred_scopes_and_autograd_records():
    def loop(n):
        w = deft.ones((3,)).attach_grad()
        for i in range(n):
            with deft.deferred_compute():
                lazy = (w * 2 + 1).sum()
            if i % 1000 == 0:
                lazy.asnumpy()
            with autograd.record():
                loss = (w * w).sum()
            if i % 1000 == 0:
                loss.backward()

    loop(1)  # backward plans are cached (a bounded cache): warm it first
    before = counters()
    loop(20_000)
    assert counters() == before


def test_symbols_and_cached_ops_are_freed():
    before_symbols = deft._lib.DeftGetLiveSymbolCount()
    before = counters()
    x = deft.ones((2,))
    for _ in range(200):
        with deft.deferred_compute():
            y = x * 3
        op = deft.CachedOp(deft.export({"x": x}, {"y": y}))
        op(x)
    del x, y, op
    assert counters() == before
    assert deft._lib.DeftGetLiveSymbolCount() == before_symbols


def test_reference_cycles_are_collected():
    before = counters()

    class Holder:
        pass

    for _ in range(1000):
        a, b = Holder(), Holder()
        a.other, b.other = b, a
        a.array = deft.zeros((16,))
    del a, b
    assert counters() == before
