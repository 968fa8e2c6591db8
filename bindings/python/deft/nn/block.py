"""Blocks, parameters and hybridization through deferred compute."""
import collections
import re

import numpy as _np

from .. import autograd, serialize as _serialize
from .._lib import DTYPE_NAMES, cpu, dtype_code, lib as _lib
from .. import ndarray as _ndarray
from ..ndarray import DataDependentError, NDArray, array, full, zeros  # noqa: F401
from ..nd import random as _random
from ..symbol import CachedOp, Symbol, deferred_compute, export, is_deferred_compute


class Parameter:
    """A trainable array. Dimensions of 0 are unknown until the first forward (infer_shape).

    `init` is a number, "zeros", "ones", "xavier" (or "uniform", the same:
    Glorot's uniform bound, over the receptive field for convolution kernels)
    or "normal"; None takes the block's default, Xavier. A parameter with
    grad_req "null" gets no gradient (BatchNorm's running statistics).
    """

    def __init__(self, name, shape, dtype="float32", init=None, grad_req="write"):
        self.name, self.dtype = name, DTYPE_NAMES[dtype_code(dtype)]
        self.shape = None if shape is None else tuple(shape)  # None: not even the rank known
        self.init, self.grad_req = "xavier" if init is None else init, grad_req
        self.lr_mult = self.wd_mult = 1.0  # scale the learning rate and weight decay (Trainer)
        self.device = cpu()
        self._data = None

    @property
    def shape_known(self):
        return self.shape is not None and all(d > 0 for d in self.shape)

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
        """Copy `value` in (it gives the parameter its shape while that is unknown)."""
        value = value if isinstance(value, NDArray) else array(value, dtype=self.dtype)
        if self.shape is not None and (len(value.shape) != len(self.shape) or any(
                d and d != v for d, v in zip(self.shape, value.shape))):
            raise ValueError(f"parameter '{self.name}' has shape {self.shape} (0: unknown), "
                             f"the value given has {value.shape}")
        if value.dtype != self.dtype:
            value = value.astype(self.dtype)
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
        return full(shape, init, dtype)
    if init == "zeros":
        return zeros(shape, dtype)
    if init == "ones":
        return full(shape, 1.0, dtype)
    if init in ("xavier", "uniform"):  # Glorot: keeps activations' scale across layers
        receptive = int(_np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in = (shape[1] if len(shape) > 1 else shape[0]) * receptive
        fan_out = shape[0] * receptive
        bound = float(_np.sqrt(6.0 / (fan_in + fan_out)))
        return _random.uniform(-bound, bound, shape, dtype)
    if init == "normal":
        return _random.normal(0.0, 0.01, shape, dtype)
    raise ValueError(f"init {init!r} is not 'xavier', 'uniform', 'normal', 'zeros', 'ones' "
                     f"or a number")


class Block:
    """A piece of a model: parameters, child blocks and forward(self, *inputs).

    Parameters are named by their path of attribute names ("0.weight",
    "features.1.running_mean"), as MXNet 1.x's save_parameters names them.
    """

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

    def collect_params(self, select=None, prefix=""):
        """Every parameter of the block and its children, by dotted name; `select`, a
        regular expression, keeps the names it matches (".*weight|.*bias")."""
        params = collections.OrderedDict()
        for name, p in self._params.items():
            params[prefix + name] = p
        for name, child in self._children.items():
            params.update(child.collect_params(prefix=prefix + name + "."))
        if select is not None:
            pattern = re.compile(select)
            params = collections.OrderedDict(
                (k, p) for k, p in params.items() if pattern.match(k))
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

    def hybridize(self, active=True, **kwargs):
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def save_parameters(self, path):
        """Write the parameters to an MXNet .params file, by dotted name (as MXNet's
        Block.save_parameters; mx.gluon's load_parameters reads it)."""
        _serialize.save(path, {k: p.data() for k, p in self.collect_params().items()})

    def load_parameters(self, path, allow_missing=False, ignore_extra=False):
        """Read parameters from an MXNet .params file: one written by save_parameters
        (dotted names) or by export ("arg:" and "aux:" names)."""
        loaded = _serialize.load(path) or {}  # a file of no arrays loads as []
        if not isinstance(loaded, dict):
            raise ValueError(f"load_parameters: '{path}' holds unnamed arrays, not parameters")
        loaded = {_strip_kind(k): v for k, v in loaded.items()}
        params = self.collect_params()
        missing = [k for k in params if k not in loaded]
        if missing and not allow_missing:
            raise ValueError(f"load_parameters: parameter '{missing[0]}' is missing in "
                             f"'{path}' (allow_missing=True skips it)")
        extra = [k for k in loaded if k not in params]
        if extra and not ignore_extra:
            raise ValueError(f"load_parameters: '{path}' holds '{extra[0]}', which is not a "
                             f"parameter of this block (ignore_extra=True skips it)")
        for k, value in loaded.items():
            if k in params:
                params[k].set_data(value)


def _strip_kind(name):
    """An exported parameter's name without its "arg:" / "aux:" kind."""
    return name[4:] if name.startswith(("arg:", "aux:")) else name


class HybridBlock(Block):
    """A Block whose forward can be compiled to a graph by hybridize()."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_hybrid", False)
        # (input shapes and dtypes, training) -> (CachedOp, its inputs' sources)
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
        op, sources = entry
        return op(*[inputs[s] if isinstance(s, int) else s.data() for s in sources])

    def _ensure_all_params(self, inputs):
        """Parameters of unknown shape get theirs by running forward eagerly once (in
        predict mode: running statistics are not updated by it)."""
        if all(p._data is not None for p in self.collect_params().values()):
            return
        with autograd.pause(train_mode=False):
            super().__call__(*inputs)

    def _build(self, inputs):
        params = self.collect_params()
        in_names = _input_names(len(inputs))
        clash = [k for k in params if k in in_names]
        if clash:
            raise ValueError(f"parameter '{clash[0]}' has the name of a graph input: rename it")
        names = dict(zip(in_names, inputs))
        names.update({k: p.data() for k, p in params.items()})
        with _reading_forbidden(), deferred_compute(), autograd.pause(autograd.is_training()):
            outputs = self.forward(*inputs)
        outs = [outputs] if isinstance(outputs, NDArray) else list(outputs)
        sym = export(names, {f"output{i}": y for i, y in enumerate(outs)})
        backend, options = getattr(self, "_backend", (None, {}))
        if backend:
            sym = sym.optimize_for(backend, **options)
        self._last_symbol = sym
        # The executor takes the arguments, then the auxiliary states (updated in place).
        index = {name: i for i, name in enumerate(in_names)}
        order = sym.list_inputs() + sym.list_auxiliary_states()
        sources = [index[n] if n in index else params[n] for n in order]
        return CachedOp(sym), sources  # one output: CachedOp returns it alone

    def optimize_for(self, *inputs, backend, **backend_opts):
        """Hybridize with a graph pass and run once on `inputs` (MXNet's optimize_for)."""
        self.hybridize(True, backend=backend, backend_opts=backend_opts)
        return self(*inputs)

    def export(self, path, epoch=0):
        """Write the last compiled graph and its parameters as MXNet's HybridBlock.export
        does: path-symbol.json, and path-%04d.params (epoch) naming each array
        "arg:<name>" or "aux:<name>" (auxiliary states: BatchNorm's running statistics).
        mx.gluon.SymbolBlock.imports and deft.nn.SymbolBlock.imports load them.
        Returns the two file names."""
        if not self._graphs:
            raise RuntimeError("export() needs a hybridized block that has run at least once")
        sym = self._last_symbol
        sym_file, params_file = f"{path}-symbol.json", f"{path}-{epoch:04d}.params"
        sym.save(sym_file)
        args, aux = set(sym.list_inputs()), set(sym.list_auxiliary_states())
        arrays = {}
        for name, p in self.collect_params().items():
            if name in args or name in aux:  # a parameter no output depends on is left out
                arrays[("aux:" if name in aux else "arg:") + name] = p.data()
        _serialize.save(params_file, arrays)
        return sym_file, params_file


def _input_names(n):
    """MXNet's names for a hybridized block's inputs: data, or data0, data1, ..."""
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]


class SymbolBlock(HybridBlock):
    """A block running a symbol's graph: an exported model (deft's or MXNet's).

    Arguments of the symbol other than the inputs are parameters (named as in
    the symbol), auxiliary states parameters without gradient.
    """

    def __init__(self, outputs, inputs):
        super().__init__()
        names = [inputs] if isinstance(inputs, str) else list(inputs)
        args, aux = outputs.list_inputs(), outputs.list_auxiliary_states()
        unknown = [n for n in names if n not in args]
        if unknown:
            raise ValueError(f"SymbolBlock: input '{unknown[0]}' is not an argument of the "
                             f"symbol (arguments: {', '.join(args)})")
        self._symbol, self._input_names = outputs, names
        for name in args:
            if name not in names:
                self._params[name] = Parameter(name, None)
        for name in aux:
            self._params[name] = Parameter(name, None, grad_req="null")
        index = {n: i for i, n in enumerate(names)}
        self._sources = [index[n] if n in index else self._params[n] for n in args + aux]
        self._op = None

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, allow_missing=False,
                ignore_extra=False):
        """The model of an exported symbol file and (optionally) parameter file, as
        mx.gluon.SymbolBlock.imports: `input_names` names the symbol's data inputs."""
        block = SymbolBlock(Symbol.load(symbol_file), input_names)
        if param_file is not None:
            block.load_parameters(param_file, allow_missing, ignore_extra)
        return block

    def hybridize(self, active=True, **kwargs):
        """A SymbolBlock is a graph already."""

    def __call__(self, *inputs):
        return self.forward(*inputs)

    def forward(self, *inputs):
        if len(inputs) != len(self._input_names):
            raise TypeError(f"SymbolBlock takes {len(self._input_names)} inputs "
                            f"({', '.join(self._input_names)}), got {len(inputs)}")
        if self._op is None:
            self._op = CachedOp(self._symbol)
        return self._op(*[inputs[s] if isinstance(s, int) else s.data() for s in self._sources])


_shape, _dtype = _lib.DeftNDArrayGetShape, _lib.DeftNDArrayGetDType
_is_training = _lib.DeftAutogradIsTraining


class _reading_forbidden:
    """While recording a hybridized forward, reading a value is an error (apache/mxnet#16932)."""

    def __enter__(self):
        self._prev = _ndarray.forbid_reads(
            "inside a hybridized forward, which records a graph: a compiled graph would freeze "
            "the branch taken now for every later input. Keep data-dependent Python control "
            "flow out of hybridized blocks (or do not hybridize this one)")

    def __exit__(self, *exc):
        _ndarray.forbid_reads(self._prev)
