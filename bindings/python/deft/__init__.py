"""deft: a deep-learning runtime (C11) — Python binding.

Arrays (`deft.array`, `deft.nd.*`), autograd (`deft.autograd`), deferred
compute and export (`deft.deferred_compute`, `deft.export`, `deft.Symbol`,
`deft.CachedOp`), Gluon-style layers (`deft.nn`) and a model zoo (`deft.vision`),
DLPack exchange (`deft.from_dlpack`), and errors raised as
`deft.DeftError` subclasses that are also the matching Python exceptions
(`except ValueError` catches a `deft.DeftValueError`).
"""
from ._lib import Device, as_device, cpu, gpu, lib as _lib  # noqa: F401
from ._deft import (DeftError, DeftIndexError, DeftMemoryError,  # noqa: F401
                    DeftNotImplementedError, DeftParseError, DeftTypeError, DeftValueError)
from .ndarray import (NDArray, arange, array, empty, from_dlpack, full, ones, ones_like,  # noqa: F401
                      waitall, zeros, zeros_like)
from .symbol import (CachedOp, Symbol, compute, deferred_compute, export,  # noqa: F401
                     is_deferred_compute, list_lib_passes, load_lib)
from . import autograd, nd, nn, operator, optim, profiler, vision  # noqa: F401
from . import amp, lr_scheduler, metric, utils  # noqa: F401
from .step import compile_step  # noqa: F401
from .trainer import Trainer  # noqa: F401
from .nd import random  # noqa: F401
from .nn import init  # noqa: F401
from . import data, viz  # noqa: F401
from .progress import TrainingLog, progress  # noqa: F401

__version__ = "0.1.0"


def live_arrays():
    """NDArray handles alive in this process (for leak checks)."""
    return _lib.DeftGetLiveNDArrayCount()


def memory_stat(stat="live_bytes", device=None):
    """A memory counter of a device: live_bytes, live_buffers, peak_bytes, cached_bytes."""
    codes = {"live_bytes": 0, "live_buffers": 1, "peak_bytes": 2, "cached_bytes": 3,
             "system_allocs": 4}
    dev = device or cpu()
    return _lib.DeftGetMemoryStat(dev.type, dev.id, codes[stat])


def num_gpus():
    """GPUs deft can use: 0 without CUDA, a driver or a GPU."""
    return _lib.DeftGetGPUCount()


def gpu_name(device_id=0):
    """The name of GPU `device_id`, such as "NVIDIA H100 80GB HBM3"."""
    return _lib.DeftGetGPUName(device_id)


def gpu_memory_info(device_id=0):
    """(free, total) bytes of GPU `device_id`, as the CUDA driver reports them."""
    return _lib.DeftGetGPUMemoryInfo(device_id)
