"""Helpers of training loops (MXNet's gluon.utils)."""
import math

from . import nd
from .ndarray import invoke

__all__ = ["clip_global_norm", "global_norm"]


def global_norm(arrays):
    """The 2-norm of all the arrays' elements together, as a Python float (one read)."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("global_norm: no arrays")
    squares = [nd.sum(nd.square(a.astype("float64") if a.dtype != "float64" else a))
               for a in arrays]
    total = squares[0] if len(squares) == 1 else invoke("add_n", squares)
    return math.sqrt(total.item())


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale the arrays in place so that their global 2-norm is at most max_norm
    (unchanged when it is already); returns the norm before scaling. A norm that
    is NaN or infinite is an error when check_isfinite (the arrays are left)."""
    arrays = list(arrays)
    if max_norm <= 0:
        raise ValueError(f"clip_global_norm: max_norm is {max_norm}, expected > 0")
    total = global_norm(arrays)
    if not math.isfinite(total):
        if check_isfinite:
            raise ValueError(f"clip_global_norm: the global norm is {total} (a gradient holds "
                             f"NaN or infinity)")
        return total
    scale = max_norm / (total + 1e-8)
    if scale < 1.0:
        for a in arrays:
            a *= scale
    return total
