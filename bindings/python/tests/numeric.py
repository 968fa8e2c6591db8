"""Gradients by central differences, the reference the gradient tests share."""
import numpy as np


def central_differences(f, x, eps=1e-6):
    """The gradient at x (a NumPy array) of the sum of f's result, each element
    moved by eps both ways, in float64."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (np.sum(f(up)) - np.sum(f(down))) / (2 * eps)
    return g
