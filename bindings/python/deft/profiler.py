"""The profiler: a Chrome trace (chrome://tracing, Perfetto) and aggregate statistics.

    deft.profiler.set_config(profile_all=True, aggregate_stats=True, filename="trace.json")
    deft.profiler.set_state("run")
    ...                                   # operators, engine waits, memory, user objects
    deft.profiler.set_state("stop")
    deft.profiler.dump()                  # write trace.json
    print(deft.profiler.dumps())          # count, total, min, max, mean per operator
"""
import json as _json

from ._lib import lib, param_text

_KINDS = {"task": 0, "frame": 1, "event": 2, "counter": 3}


def set_config(**options):
    """Set options: profile_all, profile_imperative, profile_symbolic, profile_memory,
    profile_api, aggregate_stats, continuous_dump (bools) and filename."""
    keys = tuple(options)
    vals = tuple(param_text(v) for v in options.values())
    lib.DeftProfilerSetConfig(len(keys), keys, vals)


def set_state(state="stop"):
    """'run' starts recording, 'stop' stops it."""
    if state not in ("run", "stop"):
        raise ValueError(f"state is {state!r}, expected 'run' or 'stop'")
    lib.DeftProfilerSetState(int(state == "run"))


def pause():
    lib.DeftProfilerPause(1)


def resume():
    lib.DeftProfilerPause(0)


def dump(finished=True):
    """Write the events recorded since the last dump to the trace file."""
    lib.DeftProfilerDump(int(finished))


def dumps(reset=False, format="table"):
    """The aggregate statistics as a text table, or (format='json') a dict."""
    if format not in ("table", "json"):
        raise ValueError(f"format is {format!r}, expected 'table' or 'json'")
    text = lib.DeftProfilerDumps(int(reset), int(format == "json"))
    return _json.loads(text) if format == "json" else text


def reset():
    """Drop recorded events and statistics."""
    lib.DeftProfilerReset()


class Domain:
    """A category for user objects."""

    __slots__ = ("this", "name")

    def __init__(self, name):
        self.name = name
        self.this = lib.DeftProfileCreateDomain(name)

    def new_task(self, name):
        return _Span(self, "task", name)

    def new_frame(self, name):
        return _Span(self, "frame", name)

    def new_event(self, name):
        return _Span(self, "event", name)

    def new_counter(self, name, value=None):
        counter = Counter(self, name)
        if value is not None:
            counter.set_value(value)
        return counter

    def new_marker(self, name):
        return Marker(self, name)


class _Span:
    """A task, frame or event: start() and stop(), or use it as a context manager."""

    __slots__ = ("this", "name")

    def __init__(self, domain, kind, name):
        self.name = name
        self.this = lib.DeftProfileCreateObject(domain, _KINDS[kind], name)

    def start(self):
        lib.DeftProfileDurationStart(self)

    def stop(self):
        lib.DeftProfileDurationStop(self)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Counter:
    """A value over time."""

    __slots__ = ("this", "name")

    def __init__(self, domain, name):
        self.name = name
        self.this = lib.DeftProfileCreateObject(domain, _KINDS["counter"], name)

    def set_value(self, value):
        lib.DeftProfileSetCounter(self, int(value), 0)

    def increment(self, delta=1):
        lib.DeftProfileSetCounter(self, int(delta), 1)

    def decrement(self, delta=1):
        lib.DeftProfileSetCounter(self, -int(delta), 1)


class Marker:
    """An instant, marked with mark(scope)."""

    __slots__ = ("domain", "name")

    def __init__(self, domain, name):
        self.domain, self.name = domain, name

    def mark(self, scope="process"):
        lib.DeftProfileSetMarker(self.domain, self.name, scope)
