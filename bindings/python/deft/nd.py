"""Array creation and one Python function per registered deft operator.

The operator functions are generated at import from the operator registry:
inputs are positional (or by their names), parameters are keyword arguments
taking Python values (numbers, bools, tuples, None, dtype names), and the
docstring lists what the registry says of each. Operators whose names start
with an underscore are in ``deft.nd._internal``.
"""
# Imports are underscored: the module's public names are its operators and
# the creation functions, as dir(deft.nd) shows them.
import inspect as _inspect
import numbers as _numbers
import sys as _sys
import types as _types

from ._lib import DTYPE_NAMES as _DTYPE_NAMES, cpu as _cpu, dtype_code as _dtype_code, lib as _lib
from .ndarray import (NDArray, arange, array, empty, from_dlpack, full, ones,  # noqa: F401
                      ones_like, waitall, zeros, zeros_like)
from ._lib import param_text as _param_text
from .ndarray import _wrap, invoke as _invoke, op_handle as _op_handle

_c_invoke = _lib.DeftImperativeInvoke
from .serialize import load, load_frombuffer, save  # noqa: F401

_internal = _types.ModuleType(__name__ + "._internal", "Operators named with a leading underscore.")
random = _types.ModuleType(__name__ + ".random", "Random arrays (seed with deft.random.seed).")


def _describe(name):
    op = _op_handle(name)
    _, description = _lib.DeftOpGetInfo(op)
    low, high, input_names = _lib.DeftOpGetInputs(op)
    params = [_lib.DeftOpGetParam(op, i) for i in range(_lib.DeftOpGetNumParams(op))]
    return description, low, high, input_names, params


def _make_function(name):
    description, low, high, input_names, params = _describe(name)
    param_names = {p[0] for p in params}
    variadic = high > len(input_names)
    kinds = _inspect.Parameter
    # an input named like the `out` keyword (a backward operator's "out") is positional only
    positional = variadic or "out" in input_names
    keyword = [p for p in params if p[0] not in input_names and p[0] != "out"]
    # After a fixed list of inputs, positional values are parameters in the
    # registry's order (nd.clip(x, -1, 1)), as far as a signature allows:
    # a required parameter cannot follow one with a default.
    by_position = [] if positional else _positional_prefix(keyword)
    handle = _op_handle(name)
    most = len(input_names) if not variadic else high

    def call(*inputs, out=None, **kwargs):
        # The fast path, as cheap as the operators' own (x + 1): arrays for
        # inputs, parameters by keyword, straight to the C call.
        if out is None and len(inputs) <= most and (
                type(inputs[0]) is NDArray if len(inputs) == 1 else _all_arrays(inputs)):
            if not kwargs:
                made = _c_invoke(handle, len(inputs), inputs, None, 0, (), ())
            elif len(kwargs) == 1:  # one parameter (scalar=1, axis=0): no loops
                (key, value), = kwargs.items()
                if key not in param_names:
                    return slow(inputs, out, kwargs)
                kind = type(value)
                text = repr(value) if kind is float else str(value) if kind is int else (
                    _param_text(value))
                made = _c_invoke(handle, len(inputs), inputs, None, 1, (key,), (text,))
            elif param_names.issuperset(kwargs):
                made = _c_invoke(handle, len(inputs), inputs, None, len(kwargs), tuple(kwargs),
                                 tuple(map(_param_text, kwargs.values())))
            else:
                return slow(inputs, out, kwargs)
            return _wrap(made[0]) if len(made) == 1 else [_wrap(h) for h in made]
        return slow(inputs, out, kwargs)

    def slow(inputs, out, kwargs):
        inputs = list(inputs)
        if variadic and len(inputs) == 1 and _is_array_list(inputs[0]):
            inputs = list(inputs[0])  # nd.stack([x, y]): a list of arrays is the inputs
        extra = inputs[len(input_names):] if not positional else []
        if len(extra) > len(by_position):
            raise TypeError(f"{name}() takes {len(input_names)} inputs and "
                            f"{len(by_position)} positional parameters, got {len(inputs)} "
                            f"positional arguments")
        del inputs[len(inputs) - len(extra):]
        for (pname, *_), value in zip(by_position, extra):
            if pname in kwargs:
                raise TypeError(f"{name}() got parameter '{pname}' twice")
            kwargs[pname] = value
        for i, input_name in enumerate(input_names):
            if input_name in kwargs and input_name not in param_names:
                if i < len(inputs):
                    raise TypeError(f"{name}() got input '{input_name}' twice")
                if i > len(inputs):
                    raise TypeError(f"{name}() got input '{input_name}' without the ones before it")
                inputs.append(kwargs.pop(input_name))
        unknown = [k for k in kwargs if k not in param_names]
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument '{unknown[0]}' "
                            f"(parameters: {', '.join(sorted(param_names)) or 'none'})")
        for i, x in enumerate(inputs):
            if not isinstance(x, NDArray):
                inputs[i] = array(x)
        return _invoke(name, inputs, kwargs, out)

    # The common call runs in C (typemaps.i, OpFunction); `call` does the rest.
    fn = _lib.OpFunction(handle, set(param_names), most, call, NDArray)
    fn.__name__ = fn.__qualname__ = call.__name__ = call.__qualname__ = name
    fn.__module__ = __name__
    lines = [description, ""]
    if input_names:
        lines.append("Inputs: " + (", ".join(input_names) + (", ..." if variadic else "")))
    for pname, ptype, default, doc, in params:
        text = f"    {pname} ({ptype}" + (f", default {default})" if default else ", required)")
        lines.append(text + f": {doc}")
    fn.__doc__ = "\n".join(lines)
    sig = [kinds("inputs", kinds.VAR_POSITIONAL)] if positional else [
        kinds(n, kinds.POSITIONAL_OR_KEYWORD) for n in input_names]
    sig += [kinds(p[0], kinds.POSITIONAL_OR_KEYWORD if p in by_position else kinds.KEYWORD_ONLY,
                  default=_default_value(p[1], p[2]) if p[2] else kinds.empty)
            for p in keyword]
    sig.append(kinds("out", kinds.KEYWORD_ONLY, default=None))
    fn.__signature__ = _inspect.Signature(sig)
    return fn


def _all_arrays(values):
    for x in values:
        if type(x) is not NDArray:
            return False
    return True


def _positional_prefix(params):
    """The leading parameters that may be given by position: up to the first
    required one that follows one with a default."""
    prefix, defaulted = [], False
    for p in params:
        if defaulted and not p[2]:
            break
        defaulted |= bool(p[2])
        prefix.append(p)
    return prefix


def _is_array_list(value):
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, NDArray) for v in value)


def _default_value(kind, text):
    """A registry default ("1", "0.5", "true", "(0,1)", "None") as the Python value it
    stands for, so that signatures show numbers as numbers; other kinds stay text."""
    try:
        if text == "None" and kind.endswith("or None"):
            return None
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
        if kind == "boolean":
            return {"true": True, "false": False, "1": True, "0": False}[text.lower()]
        if kind.startswith("tuple"):
            inner = text.strip("()[] ")
            return tuple(None if v.strip() == "None" else int(v)
                         for v in inner.split(",") if v.strip())
    except (ValueError, KeyError):
        pass
    return text


def _add_operator(name):
    """The function for operator `name`, in this module or in _internal."""
    module = _sys.modules[__name__]
    fn = _make_function(name)
    if name.startswith("_"):
        setattr(_internal, name, fn)
    elif not hasattr(module, name):  # array(), zeros(), ... stay the creation functions
        setattr(module, name, fn)


def _generate():
    for name in _lib.DeftListOperators():
        _add_operator(name)


_generate()


def _uniform(low=0.0, high=1.0, shape=(1,), dtype=None, device=None):
    """Samples from [low, high), uniformly (on `device`, the CPU by default)."""
    return _invoke("_random_uniform", (), {"low": low, "high": high, "shape": _shape(shape),
                                          "dtype": _dtype_name(dtype), "ctx": repr(device or _cpu())})


def _normal(loc=0.0, scale=1.0, shape=(1,), dtype=None, device=None):
    """Samples from a normal distribution of mean `loc` and deviation `scale`."""
    return _invoke("_random_normal", (), {"loc": loc, "scale": scale, "shape": _shape(shape),
                                         "dtype": _dtype_name(dtype), "ctx": repr(device or _cpu())})


def _seed(value):
    """Seed deft's random number generator (results repeat for the same seed)."""
    _lib.DeftRandomSeed(int(value))


def _shape(shape):
    return (shape,) if isinstance(shape, _numbers.Integral) else tuple(shape)


def _dtype_name(dtype):
    return _DTYPE_NAMES[_dtype_code(dtype)]


random.uniform, random.normal, random.seed = _uniform, _normal, _seed
