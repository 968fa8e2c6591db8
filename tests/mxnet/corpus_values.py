"""The values of the MXNet conformance corpus, shared by its generator
(make_corpus.py, with MXNet) and its runner (test_corpus.py, with deft).

Every value is a multiple of 2**-10 in float32 (exact in any format, and the
files compress). A parameter's values depend only on the case's seed, its
name and its shape, so the runner can rebuild the large parameter files that
are not committed (the model-zoo nets) with NumPy alone.
"""
import zlib

import numpy as np

QUANTUM = 2.0 ** -10


def quantize(x):
    return (np.round(np.asarray(x, np.float64) / QUANTUM) * QUANTUM).astype(np.float32)


def rng_for(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def param_values(seed, name, shape):
    """A parameter or auxiliary state, by what its name says it is."""
    rng = rng_for(seed, name)
    shape = tuple(shape)
    normal = rng.standard_normal(shape)
    if name.endswith(("moving_var", "running_var")):
        return quantize(rng.uniform(0.5, 1.5, shape))
    if name.endswith("gamma"):
        return quantize(1 + 0.25 * normal)
    if name.endswith(("beta", "bias", "moving_mean", "running_mean")):
        return quantize(0.1 * normal)
    if name.endswith("alpha"):
        return quantize(0.25 + 0.05 * normal)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 16
    return quantize(normal / np.sqrt(max(fan_in, 1)))


def data_values(seed, name, shape, low=None, high=None):
    """An input: normal values, or uniform in [low, high) when given."""
    rng = rng_for(seed, name)
    if low is not None:
        return quantize(rng.uniform(low, high, tuple(shape)))
    return quantize(rng.standard_normal(tuple(shape)))
