"""Other Python threads run while a deft call waits for the engine."""
import os
import subprocess
import sys
import textwrap

# Run in a child: the engine reads DEFT_ENGINE_MAX_PENDING once per process.
# The custom operator waits at a gate that only the ticker thread opens, and
# the ticker starts counting only once the main thread is inside the call that
# must wait for room in the queue (queue bound: 1 operation). If that call kept
# the GIL while it waits, the ticker (and the operator's own Python callback)
# could never run, and the child would hang.
BACK_PRESSURE = textwrap.dedent("""
    import threading, time
    import deft
    from deft import operator

    gate = threading.Event()
    state = {"blocking": False, "ticks": 0}

    class Gate(operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            gate.wait()
            self.assign(out_data[0], req[0], in_data[0] + 1)

    @operator.register("gated_plus_one")
    class GateProp(operator.CustomOpProp):
        has_backward = False

        def create_operator(self, ctx, shapes, dtypes):
            return Gate()

    def ticker():
        while not state["blocking"]:
            time.sleep(0.001)
        time.sleep(0.05)  # let the main thread get into its wait
        for _ in range(1000):
            state["ticks"] += 1
        gate.set()

    x = deft.nd.ones((4,))
    y = deft.nd.gated_plus_one(x)  # queued: the one pending operation
    threading.Thread(target=ticker).start()
    state["blocking"] = True
    z = y * 3  # reads y, so it is queued too, and waits for room
    assert state["ticks"] == 1000, state["ticks"]
    print(z.asnumpy().tolist())
""")


def test_back_pressure_releases_the_gil():
    env = dict(os.environ, DEFT_ENGINE_MAX_PENDING="1")
    env.pop("DEFT_ENGINE", None)  # the naive engine never queues
    try:
        done = subprocess.run([sys.executable, "-c", BACK_PRESSURE], env=env, timeout=60,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        raise AssertionError("a call waiting for room in the engine's queue kept the GIL")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[6.0, 6.0, 6.0, 6.0]"

