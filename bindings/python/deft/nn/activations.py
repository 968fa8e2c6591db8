"""Activation layers: Activation, LeakyReLU, PReLU, ELU, SELU, GELU and Swish."""
from ..ndarray import invoke
from .block import HybridBlock, Parameter


class Activation(HybridBlock):
    """An elementwise activation: relu, sigmoid, tanh, softrelu or softsign."""

    def __init__(self, activation):
        super().__init__()
        self.act_type = activation

    def forward(self, x):
        return invoke("Activation", (x,), {"act_type": self.act_type})

    def __repr__(self):
        return f"Activation({self.act_type})"


class _LeakyReLU(HybridBlock):
    """A LeakyReLU operator of a fixed act_type (and slope)."""

    def __init__(self, act_type, **params):
        super().__init__()
        self._kwargs = {"act_type": act_type, **params}

    def forward(self, x):
        return invoke("LeakyReLU", (x,), self._kwargs)

    def __repr__(self):
        return f"{type(self).__name__}({self._kwargs})"


class LeakyReLU(_LeakyReLU):
    """x for x > 0, alpha * x otherwise."""

    def __init__(self, alpha):
        if alpha < 0:
            raise ValueError(f"LeakyReLU: alpha is {alpha}, the slope must be no less than 0")
        super().__init__("leaky", slope=alpha)


class ELU(_LeakyReLU):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0):
        super().__init__("elu", slope=alpha)


class SELU(_LeakyReLU):
    """Scaled ELU (Klambauer et al.): self-normalising."""

    def __init__(self):
        super().__init__("selu")


class GELU(_LeakyReLU):
    """x * Phi(x), Phi the standard normal's distribution function."""

    def __init__(self):
        super().__init__("gelu")


class PReLU(HybridBlock):
    """LeakyReLU with a learnt slope per channel (axis 1), or one shared (in_channels=1)."""

    def __init__(self, alpha_initializer=0.25, in_channels=1):
        super().__init__()
        self.alpha = Parameter("alpha", (in_channels,), init=alpha_initializer)

    def forward(self, x):
        return invoke("LeakyReLU", (x, self.alpha.data()), {"act_type": "prelu"})


class Swish(HybridBlock):
    """x * sigmoid(beta * x) (Ramachandran et al.)."""

    def __init__(self, beta=1.0):
        super().__init__()
        self.beta = beta

    def forward(self, x):
        return x * invoke("sigmoid", (x * self.beta,))
