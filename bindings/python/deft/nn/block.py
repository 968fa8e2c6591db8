"""Blocks, parameters and hybridization through deferred compute."""
import collections
import threading

import numpy as _np

from .. import autograd
from .._lib import DTYPE_NAMES, cpu, dtype_code, lib as _lib
from .. import ndarray as _ndarray
from ..ndarray import DataDependentError, NDArray, array, zeros  # noqa: F401
from ..nd import random as _random
from ..symbol import CachedOp, deferred_compute, export, is_deferred_compute


class Parameter:
    """A trainable array. Dimensions of 0 are unknown until the first forward (infer_shape)."""

    def __init__(self, name, shape, dtype="float32", init="uniform", grad_req="write"):
        self.name, self.shape, self.dtype = name, tuple(shape), DTYPE_NAMES[dtype_code(dtype)]
        self.init, self.grad_req = init, grad_req
        self.device = cpu()
        self._data = None

    @property
    def shape_known(self):
        return all(d > 0 for d in self.shape)

    def initialize(self, force=False, device=None):
        """Give the parameter its first value, on `device` (kept for a later
        initialization when the shape is still unknown)."""
        if device is not None:
            self.device = device
        if self._data is not None and not force:
            return
        if not self.shape_known:
            return  # waits for infer_shape on the first forward
        value = _initial_value(self.init, self.shape, self.dtype)  # the CPU's numbers anywhere
        self._data = value if self.device == cpu() else value.to(self.device)
        if self.grad_req != "null":
            self._data.attach_grad(self.grad_req)

    def data(self):
        if self._data is None:
            raise RuntimeError(f"parameter '{self.name}' has no value yet: call initialize() "
                               f"(shape {self.shape}, unknown dimensions are 0)")
        return self._data

    def set_data(self, value):
        value = value if isinstance(value, NDArray) else array(value, dtype=self.dtype)
        if self._data is None:
            self.shape = value.shape
            self._data = value.to(self.device)
            if self.grad_req != "null":
                self._data.attach_grad(self.grad_req)
        else:
            value.copyto(self._data)

    def grad(self):
        return self.data().grad

    def __repr__(self):
        return f"Parameter({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def _initial_value(init, shape, dtype):
    if isinstance(init, (int, float)):
        from ..ndarray import full
        return full(shape, init, dtype)
    if init == "zeros":
        return zeros(shape, dtype)
    if init == "uniform":  # Xavier/Glorot: keeps activations' scale across layers
        fan_in = shape[1] if len(shape) > 1 else shape[0]
        fan_out = shape[0]
        bound = float(_np.sqrt(6.0 / (fan_in + fan_out)))
        return _random.uniform(-bound, bound, shape, dtype)
    if init == "normal":
        return _random.normal(0.0, 0.01, shape, dtype)
    raise ValueError(f"init {init!r} is not 'uniform', 'normal', 'zeros' or a number")


class Block:
    """A piece of a model: parameters, child blocks and forward(self, *inputs)."""

    def __init__(self):
        object.__setattr__(self, "_children", collections.OrderedDict())
        object.__setattr__(self, "_params", collections.OrderedDict())

    def __setattr__(self, name, value):
        if isinstance(value, Block):
            self._children[name] = value
        elif isinstance(value, Parameter):
            self._params[name] = value
        object.__setattr__(self, name, value)

    def register_child(self, block, name=None):
        self._children[name or str(len(self._children))] = block
        return block

    def collect_params(self, prefix=""):
        """Every parameter of the block and its children, by dotted name."""
        params = collections.OrderedDict()
        for name, p in self._params.items():
            params[prefix + name] = p
        for name, child in self._children.items():
            params.update(child.collect_params(prefix + name + "."))
        return params

    def initialize(self, force=False, device=None):
        """Initialize every parameter, on `device` (deft.gpu(0), ...; the CPU by default)."""
        for p in self.collect_params().values():
            p.initialize(force, device)
        return self

    def infer_shape(self, *inputs):
        """Set the unknown dimensions of this block's parameters from its inputs' shapes."""

    def _ensure_params(self, inputs):
        if any(p._data is None for p in self._params.values()):
            self.infer_shape(*inputs)
            for p in self._params.values():
                p.initialize()

    def __call__(self, *inputs):
        self._ensure_params(inputs)
        return self.forward(*inputs)

    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define forward(self, ...)")

    def hybridize(self, active=True):
        for child in self._children.values():
            child.hybridize(active)

    def save_parameters(self, path):
        _np.savez(path, **{k: p.data().asnumpy() for k, p in self.collect_params().items()})

    def load_parameters(self, path):
        values = _np.load(path)
        for k, p in self.collect_params().items():
            p.set_data(values[k])


class HybridBlock(Block):
    """A Block whose forward can be compiled to a graph by hybridize()."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_hybrid", False)
        # (input shapes and dtypes, training) -> (CachedOp, parameters, fresh-input makers)
        object.__setattr__(self, "_graphs", {})

    def hybridize(self, active=True, backend=None, backend_opts=None):
        """Compile forward to a graph on the next call; `backend` names a graph pass
        (built in, or from deft.load_lib) applied to it with `backend_opts`."""
        object.__setattr__(self, "_hybrid", active)
        object.__setattr__(self, "_backend", (backend, dict(backend_opts or {})))
        self._graphs.clear()
        # Children run inside this block's graph: they stay eager themselves.
        for child in self._children.values():
            child.hybridize(False)

    def __call__(self, *inputs):
        if not self._hybrid or is_deferred_compute():
            return super().__call__(*inputs)
        key = (tuple((_shape(x), _dtype(x)) for x in inputs), _is_training())
        entry = self._graphs.get(key)
        if entry is None:
            self._ensure_all_params(inputs)
            entry = self._graphs[key] = self._build(inputs)
        op, params, fresh = entry
        return op(*inputs, *[p.data() for p in params], *[make() for make in fresh])

    def _ensure_all_params(self, inputs):
        """Parameters of unknown shape get theirs by running forward eagerly once."""
        if all(p._data is not None for p in self.collect_params().values()):
            return
        with autograd.pause(autograd.is_training()):
            super().__call__(*inputs)

    def _build(self, inputs):
        params = [p for p in self.collect_params().values()]
        names = {f"data{i}": x for i, x in enumerate(inputs)}
        names.update({f"param:{k}": p.data() for k, p in self.collect_params().items()})
        _building.fresh = []
        try:
            with _reading_forbidden(), deferred_compute(), autograd.pause(autograd.is_training()):
                outputs = self.forward(*inputs)
            fresh = _building.fresh
        finally:
            _building.fresh = None
        names.update({f"fresh{i}": value for i, (value, _) in enumerate(fresh)})
        outs = [outputs] if isinstance(outputs, NDArray) else list(outputs)
        sym = export(names, {f"output{i}": y for i, y in enumerate(outs)})
        backend, options = getattr(self, "_backend", (None, {}))
        if backend:
            sym = sym.optimize_for(backend, **options)
        self._last_symbol = sym
        op = CachedOp(sym)
        return op, params, [make for _, make in fresh]  # one output: CachedOp returns it alone

    def optimize_for(self, *inputs, backend, **backend_opts):
        """Hybridize with a graph pass and run once on `inputs` (MXNet's optimize_for)."""
        self.hybridize(True, backend=backend, backend_opts=backend_opts)
        return self(*inputs)

    def export(self, path):
        """Write the last compiled graph (path-symbol.json) and parameters (path-params.npz)."""
        if not self._graphs:
            raise RuntimeError("export() needs a hybridized block that has run at least once")
        self._last_symbol.save(f"{path}-symbol.json")
        self.save_parameters(f"{path}-params.npz")


_shape, _dtype = _lib.DeftNDArrayGetShape, _lib.DeftNDArrayGetDType
_is_training = _lib.DeftAutogradIsTraining
_building = threading.local()  # .fresh: values a graph being built takes as inputs


def fresh_input(make):
    """An array made by make() on every run of the graph being built (random masks).

    Outside a hybridized forward this is just make(). Inside one, the value
    becomes an input of the graph instead of a recorded random operator, so
    each run draws new values and backward sees the values forward used.
    """
    fresh = getattr(_building, "fresh", None)
    if fresh is None:
        return make()
    from .._lib import lib
    prev = lib.DeftSetIsDeferredCompute(0)
    try:
        value = make()
    finally:
        lib.DeftSetIsDeferredCompute(prev)
    fresh.append((value, make))
    return value




class _reading_forbidden:
    """While recording a hybridized forward, reading a value is an error (apache/mxnet#16932)."""

    def __enter__(self):
        self._prev = _ndarray.forbid_reads(
            "inside a hybridized forward, which records a graph: a compiled graph would freeze "
            "the branch taken now for every later input. Keep data-dependent Python control "
            "flow out of hybridized blocks (or do not hybridize this one)")

    def __exit__(self, *exc):
        _ndarray.forbid_reads(self._prev)
