"""Blocks, parameters and hybridization through deferred compute."""
import collections
import numbers
import os
import re
import warnings
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import numpy as _np

from .. import autograd, serialize as _serialize
from .._lib import DTYPE_NAMES, Device, as_device, cpu, dtype_code, lib as _lib
from .. import ndarray as _ndarray
from ..ndarray import DataDependentError, NDArray, array, zeros  # noqa: F401
from ..symbol import CachedOp, Symbol, deferred_compute, export, is_deferred_compute
from . import init as _init, _summary
from .init import InitLike

DeviceLike = Union[Device, str, Sequence[Device], None]
PathLike = Union[str, "os.PathLike[str]"]


GRAD_REQS = ("write", "add", "null")


class Parameter:
    """A trainable array. Dimensions of 0 are unknown until the first forward (infer_shape).

    `init` is the parameter's own initializer (an object of deft.init, a name
    such as "xavier", "zeros", "normal", or a number); None takes the one the
    block's initialize() gives. A parameter with grad_req "null" gets no
    gradient (BatchNorm's running statistics, a frozen weight); setting
    grad_req after initialization attaches or drops the gradient. lr_mult and
    wd_mult scale the optimizer's learning rate and weight decay for it.
    """

    def __init__(self, name: str, shape: Optional[Sequence[int]], dtype: Any = "float32",
                 init: InitLike = None, grad_req: str = "write", lr_mult: float = 1.0,
                 wd_mult: float = 1.0) -> None:
        self.name, self.dtype = name, DTYPE_NAMES[dtype_code(dtype)]
        self.shape = None if shape is None else tuple(shape)  # None: not even the rank known
        self.init = _init.create(init)
        self._grad_req = _check_grad_req(grad_req, name)
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self.device = cpu()
        self._data: Optional[NDArray] = None
        self._deferred = None  # initialize()'s initializers, while the shape is unknown
        self._path = name  # the dotted name initialize() gives it: what initializers see

    @property
    def shape_known(self) -> bool:
        return self.shape is not None and all(d > 0 for d in self.shape)

    @property
    def grad_req(self) -> str:
        """"write", "add" or "null"; "null" after initialization drops the gradient (no
        gradient reaches it; optimizers skip it), "write" or "add" attaches one."""
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        req = _check_grad_req(req, self.name)
        if req == self._grad_req:
            return
        self._grad_req = req
        if self._data is not None:
            self._attach()

    def _attach(self) -> None:
        """Mark the array as a variable of grad_req (or as none, for "null")."""
        if self._grad_req == "null":
            if self._data.grad is not None:  # unmark it: no gradient, no recording
                _lib.DeftAutogradMarkVariables(1, (self._data,), (0,), (None,))
                self._data._grad = None
        else:
            self._data.attach_grad(self._grad_req)

    def initialize(self, init: InitLike = None, device: DeviceLike = None,
                   default_init: InitLike = None, force_reinit: bool = False) -> None:
        """Give the parameter its first value on `device`, from `init`, else its own
        initializer, else `default_init` (Xavier unless given), as Gluon's. While the
        shape is unknown the initializer is kept for the first forward."""
        if device is not None:
            self.device = _device(device)
        if self._data is not None and not force_reinit:
            return
        if not self.shape_known:
            self._deferred = (init, default_init)  # for the first forward's infer_shape
            return
        own = _init.create(init) or self.init
        chosen = own or _init.create(default_init) or _init.Xavier()
        # The CPU's numbers on any device: a seed gives the same model everywhere. The
        # parameter's own initializer fills it whatever its name; a block-wide one
        # picks by the name (zeros for a bias, ...).
        value = _init.initial_value(chosen, self._path, self.shape, self.dtype,
                                    own=chosen is own)
        self._data = value if self.device == cpu() else value.to(self.device)
        self._deferred = None
        self._data._grad = None
        self._attach()

    def _finish_deferred(self) -> None:
        if self._data is None and self.shape_known:
            init, default_init = self._deferred or (None, None)
            self.initialize(init, default_init=default_init)

    def data(self, device: DeviceLike = None) -> NDArray:
        if self._data is None:
            raise RuntimeError(f"parameter '{self.name}' has no value yet: call initialize() "
                               f"(shape {self.shape}, unknown dimensions are 0)")
        if device is not None and _device(device) != self._data.device:
            raise ValueError(f"parameter '{self.name}' is on {self._data.device}, not "
                             f"{_device(device)}: move the block with to(device)")
        return self._data

    def set_data(self, value: Any) -> None:
        """Copy `value` in (it gives the parameter its shape while that is unknown)."""
        value = value if isinstance(value, NDArray) else array(value, dtype=self.dtype)
        if self.shape is not None and (len(value.shape) != len(self.shape) or any(
                d and d != v for d, v in zip(self.shape, value.shape))):
            raise ValueError(f"parameter '{self.name}' has shape {self.shape} (0: unknown), "
                             f"the value given has {value.shape}")
        if value.dtype != self.dtype:
            value = value.astype(self.dtype)
        if self._data is None or self._data.shape != value.shape:
            self.shape = value.shape
            self._data = value.to(self.device) if value.device != self.device else value.copy()
            self._attach()
        else:
            value.copyto(self._data)

    def grad(self) -> Optional[NDArray]:
        return self.data().grad

    def list_data(self) -> List[NDArray]:
        """[data()]: Gluon lists a value per device; deft keeps one."""
        return [self.data()]

    def list_grad(self) -> List[Optional[NDArray]]:
        return [self.grad()]

    def list_device(self) -> List[Device]:
        return [self.device]

    list_ctx = list_device

    def zero_grad(self) -> None:
        """Set the gradient to zeros (for grad_req "add")."""
        grad = self.data().grad
        if grad is not None:
            grad[:] = 0

    def cast(self, dtype: Any) -> None:
        """Change the dtype, converting the value (and dropping the gradient's)."""
        self.dtype = DTYPE_NAMES[dtype_code(dtype)]
        if self._data is not None and self._data.dtype != self.dtype:
            self._data = self._data.astype(self.dtype)
            self._attach()

    def reset_device(self, device: DeviceLike) -> None:
        """Move the value (and the gradient, zeroed) to `device`."""
        self.device = _device(device)
        if self._data is not None and self._data.device != self.device:
            self._data = self._data.to(self.device)
            self._attach()

    reset_ctx = reset_device

    def __repr__(self) -> str:
        return f"Parameter({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def _check_grad_req(req: str, name: str) -> str:
    if req not in GRAD_REQS:
        raise ValueError(f"parameter '{name}': grad_req is {req!r}, expected one of "
                         f"{', '.join(GRAD_REQS)}")
    return req


def _device(device: DeviceLike) -> Device:
    """A device from what the user gave (a Device, "cpu", "gpu:0"; one of a list)."""
    if isinstance(device, (list, tuple)):
        if len(device) != 1:
            raise ValueError(f"device {device!r}: deft runs a block on one device; give one")
        device = device[0]
    return as_device(device)


class ParameterDict(collections.OrderedDict):
    """Parameters by dotted name (collect_params' result), with Gluon's helpers."""

    def initialize(self, init: InitLike = None, device: DeviceLike = None,
                   verbose: bool = False, force_reinit: bool = False) -> None:
        for name, p in self.items():
            p._path = name
            p.initialize(None, device, init, force_reinit)

    def setattr(self, name: str, value: Any) -> None:
        """Set an attribute of every parameter (grad_req, lr_mult, wd_mult)."""
        for p in self.values():
            setattr(p, name, value)

    def zero_grad(self) -> None:
        for p in self.values():
            p.zero_grad()

    def reset_device(self, device: DeviceLike) -> None:
        for p in self.values():
            p.reset_device(device)

    reset_ctx = reset_device


class Block:
    """A piece of a model: parameters, child blocks and forward(self, *inputs).

    Parameters are named by their path of attribute names ("0.weight",
    "features.1.running_mean"), as MXNet 1.x's save_parameters names them. A
    parameter or block reached by two paths (``self.b = self.a``) is one
    parameter: collect_params lists it once, under its first path.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_children", collections.OrderedDict())
        object.__setattr__(self, "_params", collections.OrderedDict())
        object.__setattr__(self, "_forward_hooks", collections.OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", collections.OrderedDict())

    def __setattr__(self, name: str, value: Any) -> None:
        self._children.pop(name, None)  # an attribute given something else is no child
        self._params.pop(name, None)
        if isinstance(value, Block):
            self._children[name] = value
        elif isinstance(value, Parameter):
            self._params[name] = value
        object.__setattr__(self, name, value)

    def register_child(self, block: "Block", name: Optional[str] = None) -> "Block":
        self._children[name or str(len(self._children))] = block
        return block

    # ---- parameters ----

    def _named_params(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """(dotted name, parameter) for every path to a parameter, shared ones on each."""
        for name, p in self._params.items():
            yield prefix + name, p
        for name, child in self._children.items():
            yield from child._named_params(prefix + name + ".")

    def collect_params(self, select: Optional[str] = None) -> ParameterDict:
        """Every parameter of the block and its children, by dotted name, each once;
        `select`, a regular expression searched in each name, keeps those it finds
        ("weight", ".*weight|.*bias", "^0\\." for the first child's)."""
        params, seen = ParameterDict(), set()
        pattern = re.compile(select) if select is not None else None
        for name, p in self._named_params():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if pattern is None or pattern.search(name):
                params[name] = p
        return params

    def _blocks(self) -> Iterator["Block"]:
        """This block and every descendant, each once."""
        seen, stack = set(), [self]
        while stack:
            block = stack.pop(0)
            if id(block) not in seen:
                seen.add(id(block))
                yield block
                stack.extend(block._children.values())

    def initialize(self, init: InitLike = None, device: DeviceLike = None,
                   verbose: bool = False, force_reinit: bool = False) -> "Block":
        """Initialize every parameter on `device` (deft.gpu(0), "gpu:0", ...; the CPU by
        default) with `init` (deft.init.Xavier() unless given; an initializer, its
        name or a number), except those with an initializer of their own. A parameter
        that has a value keeps it unless force_reinit; one of unknown shape gets its
        value on the first forward."""
        params = self.collect_params()
        kept = [k for k, p in params.items() if p._data is not None]
        if kept and not force_reinit:
            warnings.warn(f"initialize: {len(kept)} parameters ('{kept[0]}', ...) are "
                          f"initialized already and keep their values (force_reinit=True "
                          f"draws new ones)", stacklevel=2)
        params.initialize(_init.create(init), device, verbose, force_reinit)
        return self

    def infer_shape(self, *inputs: Any) -> None:
        """Set the unknown dimensions of this block's parameters from its inputs' shapes."""

    def _ensure_params(self, inputs: Sequence[Any]) -> None:
        if any(p._data is None for p in self._params.values()):
            self.infer_shape(*inputs)
            for p in self._params.values():
                p._finish_deferred()

    def cast(self, dtype: Any) -> "Block":
        """Convert every parameter to `dtype` ("float16", np.float64, ...)."""
        for p in self.collect_params().values():
            p.cast(dtype)
        self._forget_graphs()
        return self

    def reset_device(self, device: DeviceLike) -> "Block":
        """Move every parameter to `device` (deft.gpu(0), "gpu:0", "cpu")."""
        self.collect_params().reset_device(_device(device))
        self._forget_graphs()
        return self

    to = as_in_context = reset_ctx = reset_device

    def _forget_graphs(self) -> None:
        for block in self._blocks():
            graphs = block.__dict__.get("_graphs")
            if graphs:
                graphs.clear()

    def zero_grad(self) -> None:
        self.collect_params().zero_grad()

    def apply(self, fn: Callable[["Block"], Any]) -> "Block":
        """Call fn on every child block (depth first), then on this one."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    # ---- calling ----

    def register_forward_pre_hook(self, hook: Callable) -> "HookHandle":
        """Call hook(block, inputs) before each forward."""
        return HookHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Callable) -> "HookHandle":
        """Call hook(block, inputs, outputs) after each forward."""
        return HookHandle(self._forward_hooks, hook)

    def __call__(self, *inputs: Any) -> Any:
        inputs = self._convert_inputs(inputs)
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_hooked(inputs)
        return self._run(inputs)

    def _call_hooked(self, inputs: Tuple[Any, ...]) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, inputs)
        outputs = self._run(inputs)
        for hook in list(self._forward_hooks.values()):
            hook(self, inputs, outputs)
        return outputs

    def _run(self, inputs: Sequence[Any]) -> Any:
        self._ensure_params(inputs)
        return self.forward(*inputs)

    def _convert_inputs(self, inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """NumPy arrays as NDArrays, on the device of the block's parameters."""
        for x in inputs:
            if isinstance(x, _np.ndarray):
                break
        else:  # the common case: nothing to convert
            return inputs
        device = next((p.device for p in self.collect_params().values()), None)
        return tuple(array(x, device=device) if isinstance(x, _np.ndarray) else x
                     for x in inputs)

    def forward(self, *inputs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward(self, ...)")

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    # ---- showing ----

    def __repr__(self) -> str:
        if not self._children:
            return f"{type(self).__name__}()"
        lines = [f"  ({name}): {_indent(repr(child), 2)}" for name, child in
                 self._children.items()]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def summary(self, *inputs: Any) -> None:
        """Print each layer's output shape and parameter count for `inputs` (run once,
        eagerly and in predict mode), then the totals, as Gluon's summary."""
        _summary.print_summary(self, inputs)

    # ---- checkpoints ----

    def save_parameters(self, path: PathLike, deduplicate: bool = True) -> None:
        """Write the parameters to `path` (exactly that name) in MXNet's .params format,
        by dotted name (mx.gluon's load_parameters reads it). A shared parameter is
        written once, under its first name; deduplicate=False writes it under each."""
        pairs = (self.collect_params().items() if deduplicate
                 else collections.OrderedDict(self._named_params()).items())
        _serialize.save(os.fspath(path), {k: p.data() for k, p in pairs})

    def load_parameters(self, path: PathLike, device: DeviceLike = None,
                        allow_missing: bool = False, ignore_extra: bool = False,
                        cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Read parameters from an MXNet .params file at `path`: one written by
        save_parameters (dotted names) or by export ("arg:" and "aux:" names). `device`
        moves the parameters there; cast_dtype converts a value of another dtype, to
        the parameter's (dtype_source "current") or the parameter to the file's
        ("saved"); without it a dtype that differs is an error."""
        loaded = _serialize.load(os.fspath(path)) or {}  # a file of no arrays loads as []
        if not isinstance(loaded, dict):
            raise ValueError(f"load_parameters: '{path}' holds unnamed arrays, not parameters")
        self._load_dict({_strip_kind(k): v for k, v in loaded.items()}, f"'{path}'",
                        allow_missing, ignore_extra, cast_dtype, dtype_source)
        if device is not None:
            self.reset_device(device)

    def state_dict(self) -> "collections.OrderedDict[str, NDArray]":
        """The parameters' arrays by dotted name (the arrays themselves, not copies)."""
        return collections.OrderedDict((k, p.data()) for k, p in self.collect_params().items())

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Copy values (NDArrays or NumPy arrays) in by dotted name, converted to each
        parameter's dtype; strict: every parameter given, and nothing else."""
        self._load_dict(dict(state), "the state dict", not strict, not strict, True, "current")

    def _load_dict(self, loaded: Dict[str, Any], source: str, allow_missing: bool,
                   ignore_extra: bool, cast_dtype: bool, dtype_source: str) -> None:
        if dtype_source not in ("current", "saved"):
            raise ValueError(f"dtype_source is {dtype_source!r}, expected 'current' or 'saved'")
        by_path = collections.OrderedDict(self._named_params())  # shared ones by each path
        found = {id(by_path[k]) for k in loaded if k in by_path}
        missing = [k for k, p in self.collect_params().items() if id(p) not in found]
        if missing and not allow_missing:
            raise ValueError(f"load_parameters: parameter '{missing[0]}' is missing in "
                             f"{source} (allow_missing=True skips it)")
        extra = [k for k in loaded if k not in by_path]
        if extra and not ignore_extra:
            raise ValueError(f"load_parameters: {source} holds '{extra[0]}', which is not a "
                             f"parameter of this block (ignore_extra=True skips it)")
        for k, value in loaded.items():
            if k in by_path:
                _load_one(by_path[k], k, value, cast_dtype, dtype_source, source)


def _load_one(p: Parameter, name: str, value: Any, cast_dtype: bool, dtype_source: str,
              source: str) -> None:
    value = value if isinstance(value, NDArray) else array(_np.asarray(value))
    saved = DTYPE_NAMES[_dtype(value)]
    if saved != p.dtype:
        if not cast_dtype:
            raise ValueError(f"load_parameters: parameter '{name}' is {p.dtype}, {source} "
                             f"holds {saved} (cast_dtype=True converts it)")
        if dtype_source == "saved":
            p.cast(saved)
    p.set_data(value)


class HookHandle:
    """What register_forward_hook returns: detach() removes the hook."""

    _next = 0

    def __init__(self, hooks: Dict[int, Callable], hook: Callable) -> None:
        HookHandle._next += 1
        self._hooks, self._id = hooks, HookHandle._next
        hooks[self._id] = hook

    def detach(self) -> None:
        self._hooks.pop(self._id, None)

    def __enter__(self) -> "HookHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()


def _indent(text: str, spaces: int) -> str:
    """Every line but the first indented (a child's repr inside its parent's)."""
    return text.replace("\n", "\n" + " " * spaces)


def _strip_kind(name: str) -> str:
    """An exported parameter's name without its "arg:" / "aux:" kind."""
    return name[4:] if name.startswith(("arg:", "aux:")) else name


class HybridBlock(Block):
    """A Block whose forward can be compiled to a graph by hybridize().

    A compiled graph is kept per input signature: the arrays' shapes, dtypes and
    devices, the values of Python scalar arguments (constants of the graph),
    and the training flag."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_hybrid", False)
        # (signature, training) -> (CachedOp, its inputs' sources, the Symbol)
        object.__setattr__(self, "_graphs", {})
        object.__setattr__(self, "_last_signature", None)

    def hybridize(self, active: bool = True, backend: Optional[str] = None,
                  backend_opts: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        """Compile forward to a graph on the next call; `backend` names a graph pass
        (built in, or from deft.load_lib) applied to it with `backend_opts`."""
        object.__setattr__(self, "_hybrid", active)
        object.__setattr__(self, "_backend", (backend, dict(backend_opts or {})))
        self._graphs.clear()
        # Children run inside this block's graph: they stay eager themselves.
        for child in self._children.values():
            child.hybridize(False)

    def _run(self, inputs: Sequence[Any]) -> Any:
        if not self._hybrid or is_deferred_compute():
            return super()._run(inputs)
        signature = _signature(inputs)
        key = (signature, _is_training())
        entry = self._graphs.get(key)
        if entry is None:
            self._ensure_all_params(inputs)
            entry = self._graphs[key] = self._build(inputs)
        object.__setattr__(self, "_last_signature", signature)
        op, sources, _ = entry
        return op(*[inputs[s] if isinstance(s, int) else s.data() for s in sources])

    def _ensure_all_params(self, inputs: Sequence[Any]) -> None:
        """Parameters of unknown shape get theirs by running forward eagerly once (in
        predict mode: running statistics are not updated by it)."""
        if all(p._data is not None for p in self.collect_params().values()):
            return
        with autograd.pause(train_mode=False):
            Block._run(self, inputs)

    def _build(self, inputs: Sequence[Any]):
        params = self.collect_params()
        arrays = [i for i, x in enumerate(inputs) if isinstance(x, NDArray)]
        in_names = _input_names(len(arrays))
        clash = [k for k in params if k in in_names]
        if clash:
            raise ValueError(f"parameter '{clash[0]}' has the name of a graph input: rename it")
        names = {n: inputs[i] for n, i in zip(in_names, arrays)}
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
        index = dict(zip(in_names, arrays))
        order = sym.list_inputs() + sym.list_auxiliary_states()
        sources = [index[n] if n in index else params[n] for n in order]
        return CachedOp(sym), sources, sym  # one output: CachedOp returns it alone

    def optimize_for(self, *inputs: Any, backend: str, **backend_opts: Any) -> Any:
        """Hybridize with a graph pass and run once on `inputs` (MXNet's optimize_for)."""
        self.hybridize(True, backend=backend, backend_opts=backend_opts)
        return self(*inputs)

    def export(self, path: PathLike, epoch: int = 0) -> Tuple[str, str]:
        """Write the inference graph of the last inputs' signature and the parameters as
        MXNet's HybridBlock.export does: path-symbol.json, and path-%04d.params (epoch)
        naming each array "arg:<name>" or "aux:<name>" (auxiliary states: BatchNorm's
        running statistics). The graph is recorded in predict mode whatever the mode
        of the last call (Dropout is the identity, BatchNorm uses its running
        statistics). mx.gluon.SymbolBlock.imports and deft.nn.SymbolBlock.imports load
        them. Returns the two file names."""
        signature = self._last_signature
        if not self._hybrid or signature is None:
            raise RuntimeError("export() needs a hybridized block that has run at least once")
        key = (signature, False)
        if key not in self._graphs:
            with autograd.pause(train_mode=False):
                self._graphs[key] = self._build(_placeholders(signature))
        sym = self._graphs[key][2]
        path = os.fspath(path)
        sym_file, params_file = f"{path}-symbol.json", f"{path}-{epoch:04d}.params"
        sym.save(sym_file)
        args, aux = set(sym.list_inputs()), set(sym.list_auxiliary_states())
        arrays = {}
        for name, p in self.collect_params().items():
            if name in args or name in aux:  # a parameter no output depends on is left out
                arrays[("aux:" if name in aux else "arg:") + name] = p.data()
        _serialize.save(params_file, arrays)
        return sym_file, params_file


def _signature(inputs: Sequence[Any]) -> Tuple:
    """What a compiled graph depends on in its inputs: arrays' shapes, dtypes and
    devices; the values of scalars (constants in the graph)."""
    sig = []
    for i, x in enumerate(inputs):
        if isinstance(x, NDArray):
            sig.append((tuple(_shape(x)), _dtype(x), tuple(_device_of(x))))
        elif x is None or isinstance(x, (numbers.Number, _np.generic, str)):
            sig.append(("scalar", type(x), x))
        else:
            raise TypeError(f"input {i} of a hybridized block is {type(x).__name__}: expected "
                            f"an NDArray, a NumPy array or a Python scalar")
    return tuple(sig)


def _placeholders(signature: Tuple) -> List[Any]:
    """Inputs of a signature: zeros for the arrays, the scalars themselves."""
    made = []
    for entry in signature:
        if entry[0] == "scalar":
            made.append(entry[2])
        else:
            shape, code, (dev_type, dev_id) = entry
            made.append(zeros(shape, DTYPE_NAMES[code], Device(dev_type, dev_id)))
    return made


def _input_names(n: int) -> List[str]:
    """MXNet's names for a hybridized block's inputs: data, or data0, data1, ..."""
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]


class SymbolBlock(HybridBlock):
    """A block running a symbol's graph: an exported model (deft's or MXNet's).

    Arguments of the symbol other than the inputs are parameters (named as in
    the symbol), auxiliary states parameters without gradient.
    """

    def __init__(self, outputs: Symbol, inputs: Union[str, Sequence[str]]) -> None:
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
    def imports(symbol_file: PathLike, input_names: Union[str, Sequence[str]],
                param_file: Optional[PathLike] = None, device: DeviceLike = None,
                allow_missing: bool = False, ignore_extra: bool = False) -> "SymbolBlock":
        """The model of an exported symbol file and (optionally) parameter file, as
        mx.gluon.SymbolBlock.imports: `input_names` names the symbol's data inputs;
        the files may be deft's (export) or MXNet's."""
        block = SymbolBlock(Symbol.load(os.fspath(symbol_file)), input_names)
        if param_file is not None:  # the parameters take the file's dtypes, as in Gluon
            block.load_parameters(param_file, device, allow_missing, ignore_extra,
                                  cast_dtype=True, dtype_source="saved")
        elif device is not None:
            block.reset_device(device)
        return block

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """A SymbolBlock is a graph already."""

    def _run(self, inputs: Sequence[Any]) -> Any:
        return self.forward(*inputs)

    def forward(self, *inputs: Any) -> Any:
        if len(inputs) != len(self._input_names):
            raise TypeError(f"SymbolBlock takes {len(self._input_names)} inputs "
                            f"({', '.join(self._input_names)}), got {len(inputs)}")
        for name, x in zip(self._input_names, inputs):
            if not isinstance(x, NDArray):
                raise TypeError(f"SymbolBlock input '{name}' is {type(x).__name__}, expected "
                                f"an NDArray or a NumPy array")
        if self._op is None:
            self._op = CachedOp(self._symbol)
        return self._op(*[inputs[s] if isinstance(s, int) else s.data() for s in self._sources])

    def __repr__(self) -> str:
        return (f"SymbolBlock({', '.join(self._input_names)} -> "
                f"{', '.join(self._symbol.list_outputs())})")


_shape, _dtype, _device_of = (_lib.DeftNDArrayGetShape, _lib.DeftNDArrayGetDType,
                              _lib.DeftNDArrayGetDevice)
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
