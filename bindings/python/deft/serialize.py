"""NDArray files in MXNet's format (``.params``): ``deft.nd.load`` / ``deft.nd.save``.

As ``mx.nd.load`` and ``mx.nd.save``: a file saved from a dict loads as a
dict of name: array ("arg:fc1_weight", "aux:bn0_moving_mean", ...), one saved
from a list as a list. Arrays load onto the CPU.
"""
import os

from ._lib import lib
from .ndarray import NDArray, _wrap


def _result(handles, names):
    arrays = [_wrap(h) for h in handles]
    return arrays if names is None else dict(zip(names, arrays))


def load(fname):
    """The arrays of an NDArray file: a dict when the file names them, else a list."""
    return _result(*lib.DeftNDArrayLoad(os.fspath(fname)))


def load_frombuffer(buf):
    """As `load`, from the bytes of a file (bytes, bytearray or any buffer)."""
    return _result(*lib.DeftNDArrayLoadFromBuffer(buf))


def save(fname, data):
    """Write an NDArray, a list of them or a dict of name: NDArray to `fname`."""
    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        names, arrays = list(data), list(data.values())
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"save: key {name!r} is {type(name).__name__}, expected str")
    elif isinstance(data, (list, tuple)):
        names, arrays = None, list(data)
    else:
        raise TypeError(f"save: data is {type(data).__name__}, expected an NDArray, "
                        f"a list of them or a dict of str: NDArray")
    for i, arr in enumerate(arrays):
        if not isinstance(arr, NDArray):
            raise TypeError(f"save: item {names[i] if names else i!r} is "
                            f"{type(arr).__name__}, expected an NDArray")
    lib.DeftNDArraySave(os.fspath(fname), len(arrays), arrays, names)
