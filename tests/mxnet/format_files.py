"""MXNet-written NDArray files for deft's reader tests (tests/test_ndarray_file.c).

Run with the MXNet 1.9.1 oracle (scripts/mxnet-oracle.sh). Every array holds
its element indices (0, 1, 2, ... cast to its dtype; bool: index % 2), so a
reader test knows each value without a table.
"""
import os
import sys

import mxnet as mx
import numpy as np

DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]


def indices(shape, dtype):
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return mx.nd.array(x % 2 if dtype == "bool" else x, dtype=dtype)


def main(out):
    os.makedirs(out, exist_ok=True)
    # one array of each dtype deft has, named, as mx.nd.save writes a dict
    mx.nd.save(os.path.join(out, "dtypes.params"),
               {dt: indices((2, 3), dt) for dt in DTYPES})
    # a list: no names; a 4-d array and a zero-size one
    mx.nd.save(os.path.join(out, "list.params"),
               [indices((1, 2, 1, 3), "float32"), indices((2, 0), "float32"),
                indices((5,), "int64")])
    # 0-d arrays exist only under NumPy shape semantics (V3 records)
    with mx.util.np_shape(True):
        mx.nd.save(os.path.join(out, "scalar_np.params"), {"s": indices((), "float32")})
    # sparse storage, which deft refuses
    mx.nd.save(os.path.join(out, "csr.params"),
               {"c": mx.nd.sparse.csr_matrix(np.eye(3, dtype="float32"))})
    mx.nd.save(os.path.join(out, "row_sparse.params"),
               [mx.nd.sparse.row_sparse_array(np.eye(3, dtype="float32"))])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "format"))
