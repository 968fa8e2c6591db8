import json

import pytest

import deft
from deft import profiler


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.json"
    profiler.reset()
    profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(path),
                        continuous_dump=False)
    yield path
    profiler.set_state("stop")


def test_trace_and_statistics(trace):
    x = deft.ones((4,))
    profiler.set_state("run")
    for _ in range(50):
        y = x + 1
    y.wait_to_read()
    domain = profiler.Domain("python")
    with domain.new_event("loop"):
        (x * 2).wait_to_read()
    counter = domain.new_counter("seen", 3)
    counter.increment(2)
    domain.new_marker("done").mark()
    profiler.set_state("stop")
    profiler.dump()
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X" and e["name"] == "_plus_scalar"]
    assert len(spans) == 50 and all(e["cat"] == "operator" for e in spans)
    assert any(e["name"] == "loop" and e["cat"] == "python" for e in events)
    assert [e["args"]["value"] for e in events if e["name"] == "seen"] == [3, 5]
    stats = profiler.dumps(format="json")
    assert stats["operator"]["_plus_scalar"]["count"] == 50
    assert "_plus_scalar" in profiler.dumps(reset=True)
    assert profiler.dumps(format="json") == {}


def test_pause_resume_and_errors(trace):
    x = deft.ones((2,))
    profiler.set_state("run")
    profiler.pause()
    (x + 1).wait_to_read()
    profiler.resume()
    (x + 2).wait_to_read()
    profiler.set_state("stop")
    profiler.dump()
    events = json.loads(trace.read_text())["traceEvents"]
    assert len([e for e in events if e.get("name") == "_plus_scalar"]) == 1
    with pytest.raises(ValueError, match="unknown option 'colour'"):
        profiler.set_config(colour="red")
    with pytest.raises(ValueError, match="expected 'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(ValueError, match="already started"):
        event = profiler.Domain("d").new_event("e")
        event.start()
        event.start()
