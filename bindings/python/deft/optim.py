"""Optimizers: each step updates parameters in place from their gradients."""
from ._lib import param_text
from .ndarray import invoke_text, zeros


class Optimizer:
    def __init__(self, params, lr, wd=0.0, rescale_grad=1.0, clip_gradient=None):
        if hasattr(params, "values"):
            params = list(params.values())
        # NDArrays, or nn.Parameters read at each step; those with grad_req "null"
        # (BatchNorm's running statistics, frozen ones) are not trained, as in MXNet's Trainer
        self.params = [p for p in params if getattr(p, "grad_req", "write") != "null"]
        if not self.params:
            raise ValueError("no parameters to optimise")
        self.states = {}
        # rescale_grad scales the gradients on top of step()'s 1 / batch_size
        self.lr, self.wd, self.scale, self.rescale_grad = lr, wd, rescale_grad, rescale_grad
        self.clip_gradient = -1.0 if clip_gradient is None else clip_gradient

    def _hyper(self):
        """The update operator's parameters: names and their C API strings."""
        return {"lr": self.lr, "wd": self.wd, "rescale_grad": self.rescale_grad,
                "clip_gradient": self.clip_gradient}

    def step(self, batch_size=1):
        """Update every parameter; gradients are multiplied by rescale_grad / batch_size."""
        self.rescale_grad = self.scale / batch_size
        hyper = self._hyper()  # the same strings for every parameter of this step
        self._keys, self._vals = tuple(hyper), tuple(param_text(v) for v in hyper.values())
        for i, p in enumerate(self.params):
            arr = p.data() if callable(getattr(p, "data", None)) else p
            if arr.grad is None:
                raise ValueError(f"parameter {i} has no gradient: call attach_grad() "
                                 f"(or initialize the block) first")
            if i not in self.states:
                self.states[i] = self._new_state(arr)
            self._update(arr, arr.grad, self.states[i])


class SGD(Optimizer):
    """SGD, with momentum when momentum > 0."""

    def __init__(self, params, lr=0.01, momentum=0.0, **kwargs):
        super().__init__(params, lr, **kwargs)
        self.momentum = momentum

    def _new_state(self, p):
        return zeros(p.shape, p.dtype, p.device) if self.momentum else None

    def _hyper(self):
        hyper = super()._hyper()
        if self.momentum:
            hyper["momentum"] = self.momentum
        return hyper

    def _update(self, p, grad, mom):
        if self.momentum:
            invoke_text("sgd_mom_update", (p, grad, mom), self._keys, self._vals, out=p)
        else:
            invoke_text("sgd_update", (p, grad), self._keys, self._vals, out=p)


class Adam(Optimizer):
    """Adam (Kingma & Ba), bias correction folded into the step size as MXNet does."""

    def __init__(self, params, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(params, lr, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.t = 0

    def _new_state(self, p):
        return zeros(p.shape, p.dtype, p.device), zeros(p.shape, p.dtype, p.device)

    def step(self, batch_size=1):
        self.t += 1
        super().step(batch_size)

    def _hyper(self):
        corrected = self.lr * (1 - self.beta2 ** self.t) ** 0.5 / (1 - self.beta1 ** self.t)
        return dict(super()._hyper(), lr=corrected, beta1=self.beta1, beta2=self.beta2,
                    epsilon=self.epsilon)

    def _update(self, p, grad, state):
        invoke_text("adam_update", (p, grad, state[0], state[1]), self._keys, self._vals, out=p)
