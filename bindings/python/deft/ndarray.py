"""NDArray: a handle on a deft array, with NumPy-like operators.

Every NDArray owns one C handle (its ``this``); when Python drops the object
the handle is freed, and deft releases the memory as soon as nothing inside
the library still needs it. Operators run asynchronously: reading values
(``asnumpy``, ``item``, printing) waits for them.
"""
import numbers
import threading

import numpy as _np

from ._lib import (DTYPE_NAMES, NUMPY_OF, Device, as_device, cpu, dtype_code, gpu, lib,
                   param_text)

_invoke = lib.DeftImperativeInvoke
_get_op = lib.DeftGetOperator
_ONE_OUTPUT = (None,)
_SCALAR_KEY = ("scalar",)
_ops = {}


def op_handle(name):
    """The operator handle for a registered name (cached)."""
    h = _ops.get(name)
    if h is None:
        h = _ops[name] = _get_op(name)
    return h


class DataDependentError(RuntimeError):
    """A value was read where a recorded graph would freeze it (see deft.nn.HybridBlock)."""


_reads = threading.local()


def forbid_reads(reason):
    """Make reading lazy arrays on this thread an error giving `reason` (None allows
    it again); returns the previous reason."""
    prev = getattr(_reads, "reason", None)
    _reads.reason = reason
    return prev


def _check_readable(x, what):
    reason = getattr(_reads, "reason", None)
    if reason is not None and x.is_lazy:
        raise DataDependentError(f"NDArray.{what}() reads a value not computed yet {reason}")


def _wrap(handle):
    arr = _new(NDArray)
    arr.this = handle
    arr._grad = None
    return arr


_new = object.__new__


def invoke(name, inputs, params=None, out=None):
    """Run operator `name` on `inputs` (NDArrays) with parameters given as a dict.

    Returns one NDArray, or a list when the operator makes several. `out` (an
    NDArray or a list of them) receives the results instead of new arrays.
    """
    if params:
        keys, vals = tuple(params), tuple([param_text(v) for v in params.values()])
    else:
        keys = vals = ()
    return invoke_text(name, inputs, keys, vals, out)


_NO_OUTPUTS = None  # as many new outputs as the operator makes (up to DEFT_MAX_OUTPUTS)


def invoke_text(name, inputs, keys, vals, out=None):
    """invoke() with the parameters already as the C API's strings (for hot loops)."""
    if out is None:
        made = _invoke(op_handle(name), len(inputs), inputs, _NO_OUTPUTS, len(keys), keys, vals)
        return _wrap(made[0]) if len(made) == 1 else [_wrap(h) for h in made]
    given = [out] if isinstance(out, NDArray) else list(out)
    made = _invoke(op_handle(name), len(inputs), inputs, given, len(keys), keys, vals)
    results = [g if h is None else _wrap(h) for h, g in zip(made, given)]
    return results[0] if len(results) == 1 else results


def _scalar_text(value):
    """A scalar operand as the C API's text (a bool counts as 0 or 1, as in NumPy)."""
    return param_text(int(value) if isinstance(value, (bool, _np.bool_)) else value)


def _scalar_op(name, x, value):
    handle = _invoke(op_handle(name), 1, (x,), _ONE_OUTPUT, 1, _SCALAR_KEY, (_scalar_text(value),))
    return _wrap(handle[0])


def _numpy_method(name):
    """An NDArray method calling deft.np's function `name` on the array."""
    def method(self, *args, **kwargs):
        from . import np as deft_np
        return getattr(deft_np, name)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"deft.np.{name}(self, ...)."
    return method


class NDArray:
    """An n-dimensional array on a device, computed asynchronously."""

    __slots__ = ("this", "_grad", "__weakref__")
    __array_priority__ = 100.0  # NumPy defers `ndarray + NDArray` to us

    def __init__(self, *args, **kwargs):
        raise TypeError("make arrays with deft.array, deft.zeros, deft.ones, ... "
                        "or the operator functions in deft.nd")

    # ---- metadata ----

    @property
    def shape(self):
        return lib.DeftNDArrayGetShape(self)

    @property
    def dtype(self):
        """The element type's NumPy dtype (bfloat16, which NumPy lacks, as a name)."""
        code = lib.DeftNDArrayGetDType(self)
        return NUMPY_OF.get(code, DTYPE_NAMES[code])

    @property
    def device(self):
        return Device(*lib.DeftNDArrayGetDevice(self))

    @property
    def size(self):
        return lib.DeftNDArrayGetSize(self)

    @property
    def ndim(self):
        return lib.DeftNDArrayGetNDim(self)

    def pin_memory(self):
        """A copy in page-locked host memory, which GPUs copy from and to at full speed
        (PyTorch's pin_memory()); a DeftNotImplementedError without a GPU."""
        return _wrap(lib.DeftNDArrayPinMemory(self))

    def is_pinned(self):
        """Whether the array's memory is page-locked (pin_memory())."""
        return bool(lib.DeftNDArrayIsPinned(self))

    @property
    def _is_strided_view(self):
        """Whether the array is a strided view (x[:, 1:3]): see deft.indexing."""
        return bool(lib.DeftNDArrayGetLayout(self)[2])

    @property
    def is_lazy(self):
        """True while the array waits for deferred compute."""
        return lib.DeftNDArrayGetIsDeferredCompute((self,), 1, 1)[0]

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d array")
        return shape[0]

    # ---- values ----

    def asnumpy(self):
        """A NumPy copy of the values (waits for pending work)."""
        _check_readable(self, "asnumpy")
        code = lib.DeftNDArrayGetDType(self)
        if code not in NUMPY_OF:
            return self.astype("float32").asnumpy()
        out = _np.empty(self.shape, NUMPY_OF[code])
        lib.DeftNDArrayCopyToHost(self, out)
        return out

    def __array__(self, dtype=None, copy=None):
        values = self.asnumpy()
        return values if dtype is None else values.astype(dtype, copy=False)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions on deft arrays (numpy.sum(x)): deft.np's function of
        the same name when it has one, a deft array then; otherwise NumPy's own
        on the arrays read back, which returns what NumPy returns."""
        from . import np as deft_np
        where = deft_np.linalg if func.__module__ == "numpy.linalg" else deft_np
        own = getattr(where, func.__name__, None)
        if callable(own) and func.__name__ in where.__dict__:
            return own(*args, **kwargs)
        return func(*_as_numpy(args), **_as_numpy(kwargs))

    def item(self):
        if self.size != 1:
            raise ValueError(f"item() needs an array of one element, this one has {self.size}")
        return self.asnumpy().reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()" if self.size else
                             "The truth value of an empty array is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer arrays are indices, this one is {self.dtype}")
        return int(self.item())

    def tolist(self):
        return self.asnumpy().tolist()

    def __repr__(self):
        if self.is_lazy:
            return f"<NDArray {self.shape} {self.dtype} @{self.device}, lazy (deferred compute)>"
        return f"{self.asnumpy()!r}\n<NDArray {self.shape} {self.dtype} @{self.device}>"

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this array's memory (NumPy, PyTorch, ... read it)."""
        _check_readable(self, "__dlpack__")
        if copy:
            return self.copy().__dlpack__()
        return lib.DeftNDArrayToDLPack(self)

    def __dlpack_device__(self):
        dev = self.device
        return (dev.type, dev.id)

    def wait_to_read(self):
        _check_readable(self, "wait_to_read")
        lib.DeftNDArrayWaitToRead(self)
        return self

    def wait_to_write(self):
        lib.DeftNDArrayWaitToWrite(self)
        return self

    # ---- arithmetic and comparisons: see _OPERATORS below ----

    def __neg__(self):
        return invoke("negative", (self,))

    def __pos__(self):
        return self

    def __abs__(self):
        return invoke("abs", (self,))

    def __matmul__(self, o):
        if not isinstance(o, NDArray):
            o = array(o, dtype=self.dtype)
        if self.ndim == 3 and o.ndim == 3:
            return invoke("batch_dot", (self, o))
        return invoke("dot", (self, o))

    def __rmatmul__(self, o):
        return array(o, dtype=self.dtype).__matmul__(self)

    __hash__ = object.__hash__  # arrays are keys by identity, as in PyTorch

    # ---- shape ----

    def reshape(self, *shape):
        """The same elements in `shape`, as NumPy's reshape (one -1 is inferred; 0 is a
        size, unlike in the MXNet operator Reshape, where it copies a dimension)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return invoke("_np_reshape", (self,), {"newshape": shape})

    @property
    def T(self):
        return invoke("transpose", (self,))

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return invoke("transpose", (self,), {"axes": axes})

    def flatten(self):
        """(batch, features): every axis after the first collapsed into one, as
        MXNet's flatten; a 1-D array stays as it is, a scalar becomes (1,)."""
        if self.ndim < 2:
            return self.reshape(self.size)
        return invoke("Flatten", (self,))

    def expand_dims(self, axis):
        return invoke("expand_dims", (self,), {"axis": axis})

    def squeeze(self, axis=None):
        return invoke("squeeze", (self,), {"axis": axis})

    # ---- reductions ----

    def sum(self, axis=None, keepdims=False):
        """The sum (along `axis`); of a bool array, the count of true as int64 (NumPy)."""
        return invoke("sum", (self,), _axis_params(axis, keepdims))

    def mean(self, axis=None, keepdims=False):
        """The mean (along `axis`); of integers or bools, in float32 (deft's float)."""
        x = self if _KIND[_get_dtype(self)] != 1 else self.astype("float32")  # bool's is
        return invoke("mean", (x,), _axis_params(axis, keepdims))  # float32 in the operator

    def max(self, axis=None, keepdims=False):
        return invoke("max", (self,), _axis_params(axis, keepdims))

    def min(self, axis=None, keepdims=False):
        return invoke("min", (self,), _axis_params(axis, keepdims))

    def any(self, axis=None, keepdims=False):
        """Whether any element (along `axis`) is nonzero, as a bool array."""
        return self._truth("max", axis, keepdims)

    def all(self, axis=None, keepdims=False):
        """Whether every element (along `axis`) is nonzero, as a bool array."""
        return self._truth("min", axis, keepdims)

    def _truth(self, reduce, axis, keepdims):
        nonzero = self if _get_dtype(self) == _BOOL else self != 0
        return invoke(reduce, (nonzero,), _axis_params(axis, keepdims))

    def argmax(self, axis=None, keepdims=False):
        return invoke("argmax", (self,), {"axis": axis, "keepdims": keepdims})

    # ---- NumPy's methods, as deft.np's functions (sort returns a sorted copy, as MXNet's) ----

    (argmin, prod, var, std, cumsum, cumprod, sort, argsort, round, clip, diagonal, trace,
     nonzero) = map(_numpy_method, ("argmin", "prod", "var", "std", "cumsum", "cumprod", "sort",
                                    "argsort", "round", "clip", "diagonal", "trace", "nonzero"))

    def ravel(self):
        """The elements as one dimension (a copy)."""
        return self.reshape(self.size)

    # ---- conversion and copies ----

    def astype(self, dtype):
        return invoke("Cast", (self,), {"dtype": DTYPE_NAMES[dtype_code(dtype)]})

    def copy(self):
        return invoke("_copyto", (self,))

    def to(self, device):
        """This array on `device` (deft.gpu(0), "gpu:0", "cpu"): itself when it is
        there already, as PyTorch's .to and MXNet's as_in_context; else a copy."""
        device = as_device(device)
        if device == self.device:
            return self
        return invoke("_copy_to_device", (self,), {"device": repr(device)})

    as_in_context = to

    def copyto(self, other):
        """Copy the values into `other` (an NDArray of the same shape) and return it;
        given a device instead, a copy on that device (MXNet's copyto(ctx))."""
        if not isinstance(other, NDArray):
            if isinstance(other, (Device, str)):
                return invoke("_copy_to_device", (self,), {"device": repr(as_device(other))})
            raise TypeError(f"copyto needs an NDArray to write or a device, got "
                            f"{type(other).__name__}")
        return invoke("_copyto", (self,), out=other)

    # ---- indexing ----

    def __getitem__(self, key):
        return _indexing.read(self, key)

    def __setitem__(self, key, value):
        _indexing.assign(self, key, value)

    # ---- autograd ----

    def attach_grad(self, grad_req="write"):
        """Make this array a variable: backward() fills `.grad` (zeros until then)."""
        from . import autograd
        grad = zeros(self.shape, dtype=self.dtype, device=self.device)
        lib.DeftAutogradMarkVariables(1, (self,), (autograd.GRAD_REQS[grad_req],), (grad,))
        self._grad = grad
        return self

    @property
    def grad(self):
        return self._grad

    def backward(self, out_grad=None, retain_graph=False, create_graph=False):
        from . import autograd
        autograd.backward([self], None if out_grad is None else [out_grad], retain_graph,
                          create_graph)

    def detach(self):
        """The same values, cut from the recorded graph: no gradient flows back through it."""
        return invoke("BlockGrad", (self,))


# ---- operators and dtype promotion (the rules: result_type's docstring) ----

_F32, _F64, _F16, _U8, _I32, _I8, _I64, _BOOL, _BF16 = 0, 1, 2, 3, 4, 5, 6, 7, 12
_KIND = {_BOOL: 0, _U8: 1, _I8: 1, _I32: 1, _I64: 1, _F16: 2, _BF16: 2, _F32: 2, _F64: 2}
_get_dtype = lib.DeftNDArrayGetDType
_get_device, _GPU = lib.DeftNDArrayGetDevice, gpu().type


def _promote_pair(a, b):
    ka, kb = _KIND[a], _KIND[b]
    if ka != kb:
        return a if ka > kb else b
    if {a, b} == {_F16, _BF16}:
        return _F32
    if _BF16 in (a, b):  # bfloat16 with float32 / float64: the wider
        return a if b == _BF16 else b
    promoted = _np.promote_types(NUMPY_OF[a], NUMPY_OF[b])
    return dtype_code(_np.int32 if promoted == _np.int16 else promoted)


_PROMOTE = {(a, b): _promote_pair(a, b) for a in _KIND for b in _KIND}


def result_type(a, b):
    """The dtype (a deft code) of an operator on arrays of dtype codes a and b.

    Python's operators follow NumPy, with deft's float32 default (as PyTorch):

    * Arrays of one kind (bool < integer < floating) promote as NumPy's
      promote_types (int32 + int64 -> int64, uint8 + int8 -> int32 as deft has no
      int16, float16 + bfloat16 -> float32).
    * Across kinds the result takes the higher kind's dtype, as PyTorch
      (int32 + float32 -> float32, not float64; bool + int32 -> int32).
    * A Python scalar keeps the array's dtype when its kind is not higher (int32
      array + 1 -> int32, float16 + 0.5 -> float16); otherwise an int gives
      int64 and a float float32 (int array + 0.5 -> float32, bool array + 1 -> int64).
    * True division of integers or bools gives float32; // and % are Python's
      (floor division, remainder with the divisor's sign).
    * & | ^ ~ are bitwise on integers and logical on bools; << >> take integers
      (bools shift as int64); on floats they raise TypeError, as NumPy.
    * bool + bool is or, bool * bool is and, bool - bool raises, as NumPy; bool
      // % ** compute in int64 (NumPy: int8).
    * Comparisons give bool arrays; against a scalar they compare exactly (an
      int64 array > 2.5 is not truncated).
    * In-place operators keep the array's dtype: x += y computes the promoted
      result and writes it back when its kind is not higher than x's (int32 +=
      int64 is allowed, as NumPy's same_kind casting), else raises TypeError
      naming both dtypes (int32 += 0.5).

    MXNet's operators called by name (broadcast_greater, _plus_scalar, ...) keep
    MXNet's semantics: same dtypes in and out, comparisons as 0/1.
    """
    return _PROMOTE[a, b]


def _scalar_kind(value):
    """0, 1 or 2 for a bool, integer or floating scalar; None for anything else."""
    if isinstance(value, (bool, _np.bool_)):
        return 0
    if isinstance(value, (numbers.Integral, _np.integer)):
        return 1
    if isinstance(value, (numbers.Real, _np.floating)):
        return 2
    return None


def _with_scalar(code, kind):
    """The dtype of an array of dtype `code` combined with a scalar of `kind`."""
    if kind <= _KIND[code]:
        return code
    return _I64 if kind == 1 else _F32


class _Op:
    """One Python operator: its NumPy ufunc name (for errors), the deft operators
    on two arrays, with a scalar on the right and on the left, and its kind."""

    __slots__ = ("ufunc", "array_op", "scalar_op", "rscalar_op", "kind", "fast_int", "fast_float",
                 "fast_same")

    def __init__(self, ufunc, array_op, scalar_op, rscalar_op, kind):
        self.ufunc, self.array_op, self.scalar_op, self.rscalar_op = (ufunc, array_op, scalar_op,
                                                                      rscalar_op)
        self.kind = kind
        # the array dtypes an int / float scalar leaves as they are (the fast path)
        self.fast_int = frozenset(c for c in _KIND if self.dtype_of(_with_scalar(c, 1)) == c
                                  and _KIND[c] > 0)
        self.fast_float = frozenset(c for c in _KIND if self.dtype_of(_with_scalar(c, 2)) == c)
        # the dtypes two arrays of that same dtype compute in as they are
        self.fast_same = frozenset(c for c in _KIND if self.dtype_of(c) == c and not (
            c == _BOOL and kind == "bool_logic"))

    def dtype_of(self, code):
        """The dtype the operator computes in for promoted operands of `code`
        (None: the operand dtype is not allowed)."""
        kind = self.kind
        if kind == "truediv":
            return _F32 if _KIND[code] < 2 else code
        if kind == "bitwise":
            return None if _KIND[code] == 2 else code
        if kind == "shift":
            return None if _KIND[code] == 2 else _I64 if code == _BOOL else code
        if kind == "arith" and code == _BOOL:
            return _I64
        return code

    def unsupported(self, a, b):
        return TypeError(f"ufunc '{self.ufunc}' not supported for the input types "
                         f"{DTYPE_NAMES[a]} and {DTYPE_NAMES[b]} (deft follows NumPy: bitwise "
                         f"operators and shifts take integers and bools)")


_BOOL_ARITH = {"add": ("_npi_bitwise_or", "_npi_bitwise_or_scalar"),
               "multiply": ("_npi_bitwise_and", "_npi_bitwise_and_scalar")}

_OPERATORS = {
    "add": _Op("add", "broadcast_add", "_plus_scalar", "_plus_scalar", "bool_logic"),
    "sub": _Op("subtract", "broadcast_sub", "_minus_scalar", "_rminus_scalar", "bool_logic"),
    "mul": _Op("multiply", "broadcast_mul", "_mul_scalar", "_mul_scalar", "bool_logic"),
    "truediv": _Op("divide", "broadcast_div", "_div_scalar", "_rdiv_scalar", "truediv"),
    "floordiv": _Op("floor_divide", "_npi_floor_divide", "_npi_floor_divide_scalar",
                    "_npi_rfloor_divide_scalar", "arith"),
    "mod": _Op("remainder", "_npi_mod", "_npi_mod_scalar", "_npi_rmod_scalar", "arith"),
    "pow": _Op("power", "broadcast_power", "_power_scalar", "_rpower_scalar", "arith"),
    "and": _Op("bitwise_and", "_npi_bitwise_and", "_npi_bitwise_and_scalar",
               "_npi_bitwise_and_scalar", "bitwise"),
    "or": _Op("bitwise_or", "_npi_bitwise_or", "_npi_bitwise_or_scalar",
              "_npi_bitwise_or_scalar", "bitwise"),
    "xor": _Op("bitwise_xor", "_npi_bitwise_xor", "_npi_bitwise_xor_scalar",
               "_npi_bitwise_xor_scalar", "bitwise"),
    "lshift": _Op("left_shift", "_npi_bitwise_left_shift", "_npi_bitwise_left_shift_scalar",
                  "_npi_rbitwise_left_shift_scalar", "shift"),
    "rshift": _Op("right_shift", "_npi_bitwise_right_shift", "_npi_bitwise_right_shift_scalar",
                  "_npi_rbitwise_right_shift_scalar", "shift"),
}

# Comparisons: the bool operators on two arrays and with a scalar, and MXNet's 0/1
# forms for arrays on a GPU (where the bool ones have no kernel yet), cast to bool.
_COMPARISONS = {
    "eq": ("_npi_equal", "_npi_equal_scalar", "broadcast_equal", "_equal_scalar"),
    "ne": ("_npi_not_equal", "_npi_not_equal_scalar", "broadcast_not_equal",
           "_not_equal_scalar"),
    "lt": ("_npi_less", "_npi_less_scalar", "broadcast_lesser", "_lesser_scalar"),
    "le": ("_npi_less_equal", "_npi_less_equal_scalar", "broadcast_lesser_equal",
           "_lesser_equal_scalar"),
    "gt": ("_npi_greater", "_npi_greater_scalar", "broadcast_greater", "_greater_scalar"),
    "ge": ("_npi_greater_equal", "_npi_greater_equal_scalar", "broadcast_greater_equal",
           "_greater_equal_scalar"),
}


def _cast(x, code):
    return x if _get_dtype(x) == code else invoke("Cast", (x,), {"dtype": DTYPE_NAMES[code]})


def _as_operand(other):
    """A NumPy array or list as an NDArray (its own dtype), an NDArray or a scalar as it
    is; None for anything else."""
    if isinstance(other, NDArray) or _scalar_kind(other) is not None:
        return other
    if isinstance(other, (_np.ndarray, list, tuple)):
        return array(other)
    return None


def _plan(op, x, other):
    """(compute dtype, operator, scalar operator, reflected scalar operator) for x op other."""
    a = _get_dtype(x)
    if isinstance(other, NDArray):
        b = _get_dtype(other)
        promoted = _PROMOTE[a, b]
    else:
        b = promoted = _with_scalar(a, _scalar_kind(other))
    if promoted == _BOOL and op.kind == "bool_logic":
        if op.ufunc == "subtract":
            raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the "
                            "bitwise_xor, the `^` operator, or the logical_xor function instead.")
        array_op, scalar_op = _BOOL_ARITH[op.ufunc]
        return _BOOL, array_op, scalar_op, scalar_op
    code = op.dtype_of(promoted)
    if code is None:
        raise op.unsupported(a, b)
    return code, op.array_op, op.scalar_op, op.rscalar_op


def _apply(op, x, other, reverse=False):
    """x op other (other op x when reverse), promoted; NotImplemented for foreign types."""
    other = _as_operand(other)
    if other is None:
        return NotImplemented
    code, array_op, scalar_op, rscalar_op = _plan(op, x, other)
    x = _cast(x, code)
    if isinstance(other, NDArray):
        other = _cast(other, code)
        inputs = (other, x) if reverse else (x, other)
        return _wrap(_invoke(op_handle(array_op), 2, inputs, _ONE_OUTPUT, 0, (), ())[0])
    return _scalar_op(rscalar_op if reverse else scalar_op, x, other)


def _apply_in_place(op, x, other):
    other = _as_operand(other)
    if other is None:
        return NotImplemented
    code, array_op, scalar_op, _ = _plan(op, x, other)
    own = _get_dtype(x)
    if _KIND[code] > _KIND[own]:
        raise TypeError(f"Cannot cast ufunc '{op.ufunc}' output from dtype('{DTYPE_NAMES[code]}') "
                        f"to dtype('{DTYPE_NAMES[own]}') with casting rule 'same_kind'")
    if code != own:  # computed in a wider dtype of the same kind, written back
        return invoke("Cast", (_apply(op, x, other),), {"dtype": DTYPE_NAMES[own]}, out=x)
    if isinstance(other, NDArray):
        invoke(array_op, (x, _cast(other, code)), out=x)
    else:
        invoke_text(scalar_op, (x,), _SCALAR_KEY, (_scalar_text(other),), out=x)
    return x


def _operator_methods(op):
    fast_int, fast_float, fast_same = op.fast_int, op.fast_float, op.fast_same
    get_dtype, call, wrap, one, key = _get_dtype, _invoke, _wrap, _ONE_OUTPUT, _SCALAR_KEY
    handle, array_handle = op_handle(op.scalar_op), op_handle(op.array_op)

    def fast_text(self, o):
        """o as the scalar operator's text when x op o keeps x's dtype, else None."""
        kind = type(o)
        if kind is int:
            return str(o) if get_dtype(self) in fast_int else None
        if kind is float:
            return repr(o) if get_dtype(self) in fast_float else None
        return None

    # The common cases go straight to C: a Python number, or an array of the same
    # dtype, that leaves the dtype as it is.
    def forward(self, o):
        kind = type(o)
        if kind is int:
            if get_dtype(self) in fast_int:
                return wrap(call(handle, 1, (self,), one, 1, key, (str(o),))[0])
        elif kind is float:
            if get_dtype(self) in fast_float:
                return wrap(call(handle, 1, (self,), one, 1, key, (repr(o),))[0])
        elif kind is NDArray:
            code = get_dtype(self)
            if code == get_dtype(o) and code in fast_same:
                return wrap(call(array_handle, 2, (self, o), one, 0, (), ())[0])
        return _apply(op, self, o)

    def reflected(self, o):
        if isinstance(o, NDArray):
            return _apply(op, o, self)
        return _apply(op, self, o, reverse=True)

    def in_place(self, o):
        mine = (self,)
        if type(o) is NDArray:
            code = get_dtype(self)
            if code == get_dtype(o) and code in fast_same:
                call(array_handle, 2, (self, o), mine, 0, (), ())
                return self
        else:
            text = fast_text(self, o)
            if text is not None:
                call(handle, 1, mine, mine, 1, key, (text,))
                return self
        return _apply_in_place(op, self, o)

    return forward, reflected, in_place


def _on_gpu(x):
    return _get_device(x)[0] == _GPU


def _comparison_method(array_op, scalar_op, gpu_array_op, gpu_scalar_op):
    get_dtype, call, wrap, one, key = _get_dtype, _invoke, _wrap, _ONE_OUTPUT, _SCALAR_KEY
    handle, array_handle = op_handle(scalar_op), op_handle(array_op)

    def compare(self, o):
        kind = type(o)
        try:  # the common cases straight to C: a Python number, an array of the same dtype
            if kind is int or kind is float:
                return wrap(call(handle, 1, (self,), one, 1, key,
                                 (str(o) if kind is int else repr(o),))[0])
            if kind is NDArray and get_dtype(self) == get_dtype(o):
                return wrap(call(array_handle, 2, (self, o), one, 0, (), ())[0])
        except NotImplementedError:
            if not _on_gpu(self):
                raise
        o = _as_operand(o)
        if o is None:
            return NotImplemented
        if isinstance(o, NDArray):
            code = _PROMOTE[get_dtype(self), get_dtype(o)]
            operands = (_cast(self, code), _cast(o, code))
        try:
            if isinstance(o, NDArray):
                return invoke(array_op, operands)
            return _scalar_op(scalar_op, self, o)
        except NotImplementedError:
            if not _on_gpu(self):
                raise
        # on a GPU: MXNet's 0/1 form, cast (it converts a scalar to x's dtype: promote first)
        if isinstance(o, NDArray):
            return invoke(gpu_array_op, operands).astype("bool")
        x = self if _scalar_kind(o) <= _KIND[get_dtype(self)] else _cast(self, _F64)
        return _scalar_op(gpu_scalar_op, x, o).astype("bool")

    return compare


def _invert(self):
    """~x: bitwise not of integers, logical not of bools (NumPy's invert)."""
    code = _get_dtype(self)
    if _KIND[code] == 2:
        raise TypeError(f"ufunc 'invert' not supported for the input type {DTYPE_NAMES[code]} "
                        f"(deft follows NumPy: ~ takes integers and bools)")
    return _wrap(_invoke(op_handle("_npi_bitwise_not"), 1, (self,), _ONE_OUTPUT, 0, (), ())[0])


def _install_operators():
    for name, op in _OPERATORS.items():
        forward, reflected, in_place = _operator_methods(op)
        setattr(NDArray, f"__{name}__", forward)
        setattr(NDArray, f"__r{name}__", reflected)
        setattr(NDArray, f"__i{name}__", in_place)
    for name, ops in _COMPARISONS.items():
        setattr(NDArray, f"__{name}__", _comparison_method(*ops))
    NDArray.__invert__ = _invert


_install_operators()


def _as_numpy(value):
    """value with every NDArray in it (in tuples, lists and dicts) read as a NumPy array."""
    if isinstance(value, NDArray):
        return value.asnumpy()
    if isinstance(value, (tuple, list)):
        return type(value)(_as_numpy(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_numpy(v) for k, v in value.items()}
    return value


def _axis_params(axis, keepdims):
    if isinstance(axis, numbers.Integral):
        axis = (axis,)
    return {"axis": axis, "keepdims": keepdims}


# ---- making arrays ----

def _default_dtype(values):
    """float32 for Python floats (as PyTorch); NumPy arrays keep theirs."""
    if isinstance(values, _np.ndarray):
        return values.dtype
    inferred = _np.asarray(values).dtype
    return _np.float32 if inferred == _np.float64 else inferred


def array(values, dtype=None, device=None):
    """An array holding a copy of `values` (a list, scalar, NumPy array or NDArray)."""
    if isinstance(values, NDArray):
        return values.copy() if dtype is None else values.astype(dtype)
    if hasattr(values, "__dlpack__") and not isinstance(values, _np.ndarray) and dtype is None:
        return from_dlpack(values).copy()
    code = dtype_code(dtype if dtype is not None else _default_dtype(values))
    if code not in NUMPY_OF:
        return array(values, "float32", device).astype(DTYPE_NAMES[code])
    data = _np.asarray(values, dtype=NUMPY_OF[code])
    if not data.flags.c_contiguous:  # (ascontiguousarray would make 0-d arrays 1-d)
        data = data.copy(order="C")
    result = _wrap(lib.DeftNDArrayCreateFromData(data.shape, data.ndim, code, 1, 0, data))
    return result if device is None else result.to(device)


def empty(shape, dtype=None, device=None):
    """An array of zeros (deft never hands out uninitialised memory)."""
    return zeros(shape, dtype, device)


def zeros(shape, dtype=None, device=None):
    """An array of zeros (float32 unless dtype says otherwise)."""
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    dev = as_device(device, cpu())
    return _wrap(lib.DeftNDArrayCreate(shape, len(shape), dtype_code(dtype), dev.type, dev.id))


def ones(shape, dtype=None, device=None):
    """An array of ones."""
    return full(shape, 1, dtype, device)


def full(shape, value, dtype=None, device=None):
    """An array with every element `value`."""
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    params = {"shape": shape, "value": value, "dtype": DTYPE_NAMES[dtype_code(dtype)]}
    result = invoke("_full", (), params)
    return result if device is None else result.to(device)


def arange(start, stop=None, step=1, dtype=None):
    """Evenly spaced values in [start, stop) (arange(n): 0 .. n-1)."""
    if stop is None:
        start, stop = 0, start
    return invoke("_arange", (), {"start": start, "stop": stop, "step": step,
                                  "dtype": DTYPE_NAMES[dtype_code(dtype)]})


def zeros_like(x):
    """Zeros of x's shape and dtype."""
    return invoke("zeros_like", (x,))


def ones_like(x):
    """Ones of x's shape and dtype."""
    return invoke("ones_like", (x,))


def from_dlpack(obj):
    """An NDArray sharing the memory of a DLPack producer (a NumPy array, ...), no copy."""
    capsule = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    return _wrap(lib.DeftNDArrayFromDLPack(capsule))


def waitall():
    """Block until every pending operation is done."""
    lib.DeftWaitAll()


from . import indexing as _indexing  # noqa: E402 (it builds on the names above)
