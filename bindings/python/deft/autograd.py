"""Autograd: record operations on arrays, then differentiate them.

Recording builds the same reference-counted graph deferred compute uses (no
tape): dropping the arrays drops what was recorded for them.

    x = deft.array([1., 2.]).attach_grad()
    with deft.autograd.record():
        y = (x * x).sum()
    y.backward()          # x.grad == 2 * x
"""
import contextlib

from ._lib import lib
from .ndarray import NDArray, _wrap

GRAD_REQS = {"null": 0, "write": 1, "add": 2}


@contextlib.contextmanager
def _mode(recording, training):
    prev_rec = lib.DeftAutogradSetIsRecording(int(recording)) if recording is not None else None
    prev_train = lib.DeftAutogradSetIsTraining(int(training)) if training is not None else None
    try:
        yield
    finally:
        if prev_rec is not None:
            lib.DeftAutogradSetIsRecording(prev_rec)
        if prev_train is not None:
            lib.DeftAutogradSetIsTraining(prev_train)


def record(train_mode=True):
    """Scope in which operations on arrays that need gradients are recorded."""
    return _mode(True, train_mode)


def pause(train_mode=False):
    """Scope inside record() in which nothing is recorded (no grad)."""
    return _mode(False, train_mode)


def train_mode():
    """Scope with the training flag on (Dropout drops), recording unchanged."""
    return _mode(None, True)


def predict_mode():
    """Scope with the training flag off, recording unchanged."""
    return _mode(None, False)


def is_recording():
    return bool(lib.DeftAutogradIsRecording())


def is_training():
    return bool(lib.DeftAutogradIsTraining())


def _arrays(xs, what):
    xs = [xs] if isinstance(xs, NDArray) else list(xs)
    for i, x in enumerate(xs):
        if not isinstance(x, NDArray) and x is not None:
            raise TypeError(f"{what}[{i}] is {type(x).__name__}, expected an NDArray")
    return xs


def mark_variables(variables, gradients, grad_reqs="write"):
    """Make arrays variables whose gradients go to `gradients` (as attach_grad does)."""
    variables, gradients = _arrays(variables, "variables"), _arrays(gradients, "gradients")
    if len(variables) != len(gradients):
        raise ValueError(f"{len(variables)} variables but {len(gradients)} gradients")
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    try:
        codes = [GRAD_REQS[r] for r in reqs]
    except KeyError as e:
        raise ValueError(f"grad_req {e.args[0]!r} is not one of {', '.join(GRAD_REQS)}") from None
    lib.DeftAutogradMarkVariables(len(variables), variables, codes, gradients)
    for v, g in zip(variables, gradients):
        v._grad = g


def backward(heads, head_grads=None, retain_graph=False, create_graph=False):
    """Gradients of `heads` into the `.grad` of every variable they depend on."""
    heads = _arrays(heads, "heads")
    if head_grads is not None:
        head_grads = _arrays(head_grads, "head_grads")
        if len(head_grads) != len(heads):
            raise ValueError(f"{len(heads)} heads but {len(head_grads)} head_grads")
    lib.DeftAutogradBackward(len(heads), heads, head_grads, int(retain_graph), int(create_graph))


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False):
    """Gradients of `heads` with respect to `variables`, as new arrays; `.grad` is untouched.

    With create_graph=True the gradients are themselves recorded, so they can be
    differentiated again. retain_graph defaults to create_graph.
    """
    single = isinstance(variables, NDArray)
    heads, variables = _arrays(heads, "heads"), _arrays(variables, "variables")
    if head_grads is not None:
        head_grads = _arrays(head_grads, "head_grads")
    retain = create_graph if retain_graph is None else retain_graph
    handles = lib.DeftAutogradComputeGradient(len(heads), heads, head_grads, len(variables),
                                              variables, int(retain), int(create_graph),
                                              len(variables))
    grads = [None if h is None else _wrap(h) for h in handles]
    return grads[0] if single else grads
