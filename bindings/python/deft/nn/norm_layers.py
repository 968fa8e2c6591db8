"""Normalization layers: BatchNorm, LayerNorm, InstanceNorm and GroupNorm, as MXNet Gluon's.

center=False keeps beta at zero and scale=False gamma at one (their gradients
are off), as in Gluon; in_channels 0 takes the size from the first input.
"""
from ..ndarray import invoke
from .block import HybridBlock, Parameter
from .init import InitLike


def _affine(block, shape, center, scale, beta_initializer, gamma_initializer):
    block.gamma = Parameter("gamma", shape, init=gamma_initializer,
                            grad_req="write" if scale else "null")
    block.beta = Parameter("beta", shape, init=beta_initializer,
                           grad_req="write" if center else "null")


class BatchNorm(HybridBlock):
    """Normalises each channel (along `axis`) by the batch's statistics in training mode,
    by the running ones otherwise.

    running_mean and running_var are parameters without gradient: the
    BatchNorm operator updates them in place in training mode
    (running = momentum * running + (1 - momentum) * batch); in a hybridized
    graph they are its auxiliary states.
    """

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5,
                 center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: InitLike = "zeros", gamma_initializer: InitLike = "ones",
                 running_mean_initializer: InitLike = "zeros",
                 running_variance_initializer: InitLike = "ones", in_channels: int = 0) -> None:
        super().__init__()
        self._axis = axis
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                        "fix_gamma": not scale, "use_global_stats": use_global_stats}
        _affine(self, (in_channels,), center, scale, beta_initializer, gamma_initializer)
        self.running_mean = Parameter("running_mean", (in_channels,),
                                      init=running_mean_initializer, grad_req="null")
        self.running_var = Parameter("running_var", (in_channels,),
                                     init=running_variance_initializer, grad_req="null")

    def infer_shape(self, x, *args):
        channels = (x.shape[self._axis],)
        for p in (self.gamma, self.beta, self.running_mean, self.running_var):
            p.shape = channels

    def forward(self, x):
        return invoke("BatchNorm", (x, self.gamma.data(), self.beta.data(),
                                    self.running_mean.data(), self.running_var.data()),
                      self._kwargs)

    def __repr__(self):
        return f"BatchNorm({self._kwargs}, in_channels={self.gamma.shape[0] or None})"


class LayerNorm(HybridBlock):
    """Normalises over `axis` (the last by default) of each sample, then scales by gamma and
    shifts by beta (both of that axis' size)."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: InitLike = "zeros",
                 gamma_initializer: InitLike = "ones", in_channels: int = 0) -> None:
        super().__init__()
        self._kwargs = {"axis": axis, "eps": epsilon}
        _affine(self, (in_channels,), center, scale, beta_initializer, gamma_initializer)

    def infer_shape(self, x, *args):
        self.gamma.shape = self.beta.shape = (x.shape[self._kwargs["axis"]],)

    def forward(self, x):
        return invoke("LayerNorm", (x, self.gamma.data(), self.beta.data()), self._kwargs)


class InstanceNorm(HybridBlock):
    """Normalises each sample's channel (along `axis`) over its remaining axes."""

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = False, beta_initializer: InitLike = "zeros",
                 gamma_initializer: InitLike = "ones", in_channels: int = 0) -> None:
        super().__init__()
        self._axis, self._epsilon = axis, epsilon
        _affine(self, (in_channels,), center, scale, beta_initializer, gamma_initializer)

    def infer_shape(self, x, *args):
        self.gamma.shape = self.beta.shape = (x.shape[self._axis],)

    def forward(self, x):
        # The operator normalises channels on axis 1: another axis is swapped there and back.
        swap = {"dim1": 1, "dim2": self._axis}
        if self._axis != 1:
            x = invoke("SwapAxis", (x,), swap)
        y = invoke("InstanceNorm", (x, self.gamma.data(), self.beta.data()),
                   {"eps": self._epsilon})
        return y if self._axis == 1 else invoke("SwapAxis", (y,), swap)


class GroupNorm(HybridBlock):
    """Normalises each sample's channels (axis 1) in num_groups groups; gamma and beta have
    one value per group, as in MXNet 1.x."""

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: InitLike = "zeros",
                 gamma_initializer: InitLike = "ones") -> None:
        super().__init__()
        self._kwargs = {"num_groups": num_groups, "eps": epsilon}
        _affine(self, (num_groups,), center, scale, beta_initializer, gamma_initializer)

    def forward(self, x):
        return invoke("GroupNorm", (x, self.gamma.data(), self.beta.data()), self._kwargs)
