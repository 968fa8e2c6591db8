"""Does MXNet read what deft writes? Two halves, one per environment:

    build/venv/bin/python tests/mxnet/check_writer.py write DIR   # deft writes
    $DEFT_MXNET_VENV/bin/python tests/mxnet/check_writer.py check DIR  # MXNet reads

`write` saves arrays of every dtype both have (bfloat16 aside: MXNet's
Python has no NumPy type for it), a list without names, a zero-size array
and a 0-d one (read with npx.load), plus the values as JSON; `check` loads
them with mx.nd.load / npx.load and compares. scripts/mxnet-oracle.sh runs both.
"""
import json
import os
import sys

import numpy as np

DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]


def values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-100, 100, size=shape)
    return (x % 2 == 0) if dtype == "bool" else (x / 8).astype(dtype)


def cases():
    named = {f"arg:{dt}": values((2, 3, 4), dt, i) for i, dt in enumerate(DTYPES)}
    named["aux:empty"] = np.zeros((3, 0), "float32")
    unnamed = [values((5,), "float32", 10), values((1, 1, 2, 1, 3), "int32", 11)]
    return {"named.params": named, "list.params": unnamed,
            "scalar.params": {"s": np.array(2.5, "float32")}}


def write(out):
    import deft
    os.makedirs(out, exist_ok=True)
    for fname, data in cases().items():
        arrays = (data.items() if isinstance(data, dict) else enumerate(data))
        conv = {k: deft.array(v, dtype=v.dtype) for k, v in arrays}
        deft.nd.save(os.path.join(out, fname),
                     conv if isinstance(data, dict) else [conv[i] for i in range(len(data))])


def check(out):
    import mxnet as mx
    bad = 0
    for fname, data in cases().items():
        path = os.path.join(out, fname)
        if fname == "scalar.params":
            with mx.util.np_shape(True):
                got = mx.nd.load(path)
        else:
            got = mx.nd.load(path)
        want = data if isinstance(data, dict) else dict(enumerate(data))
        got = got if isinstance(got, dict) else dict(enumerate(got))
        for k, w in want.items():
            g = got.get(k)
            ok = (g is not None and g.shape == w.shape and np.dtype(g.dtype) == w.dtype
                  and np.array_equal(g.asnumpy(), w))
            print(f"{fname} {k}: {'ok' if ok else 'MISMATCH'} {w.dtype} {w.shape}")
            bad += not ok
    print(json.dumps({"mismatches": bad}))
    return bad


if __name__ == "__main__":
    mode, folder = sys.argv[1], sys.argv[2]
    sys.exit(write(folder) if mode == "write" else 1 if check(folder) else 0)
