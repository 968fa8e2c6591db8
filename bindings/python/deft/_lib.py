"""The native module and the small tables every part of the package shares."""
import numbers
import re

import numpy as _np

from . import _deft as lib  # noqa: F401  (re-exported to the other modules)

# deft dtype codes (MXNet's type flags) and their NumPy equivalents.
DTYPES = {
    "float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4,
    "int8": 5, "int64": 6, "bool": 7, "bfloat16": 12,
}
DTYPE_NAMES = {code: name for name, code in DTYPES.items()}
NUMPY_OF = {code: _np.dtype(name) for name, code in DTYPES.items() if name != "bfloat16"}


_CODE_OF_NUMPY = {dt: code for code, dt in NUMPY_OF.items()}


def dtype_code(dtype):
    """The deft code of a dtype given by name, NumPy dtype or Python type."""
    if dtype is None:
        return DTYPES["float32"]
    code = _CODE_OF_NUMPY.get(dtype) if isinstance(dtype, _np.dtype) else DTYPES.get(dtype)
    if code is not None:
        return code
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype in DTYPE_NAMES:
        return dtype
    name = dtype if isinstance(dtype, str) else _np.dtype(dtype).name
    try:
        return DTYPES[name]
    except KeyError:
        raise TypeError(f"dtype {dtype!r} is not one deft has "
                        f"(expected one of {', '.join(DTYPES)})") from None


def param_text(value):
    """An operator parameter as the C API's string: 1, 0.5, True, None, (2, 3).

    NumPy scalars write as the Python numbers they hold, at full precision
    (np.float32(0.1) as 0.10000000149011612, its exact value)."""
    kind = type(value)
    if kind is float:
        return repr(value)
    if kind is str:
        return value
    if kind is int or kind is bool or value is None:
        return str(value)
    if isinstance(value, str):  # np.str_
        return str(value)
    if isinstance(value, (_np.generic, numbers.Number)):
        return _number_text(value)
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(param_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, _np.dtype) or (isinstance(value, type) and issubclass(value, _np.generic)):
        return _np.dtype(value).name
    return str(value)


def _number_text(value):
    """A NumPy scalar or other number (a float or int subclass) as the C API's text."""
    if isinstance(value, (bool, _np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    raise TypeError(f"{type(value).__name__} {value!r} is not a parameter deft takes "
                    f"(expected a real number)")


class Device:
    """Where an array lives: ``deft.cpu()`` or ``deft.gpu(n)``.

    Anything that takes a device also takes its text: "cpu", "gpu:0", "gpu(1)",
    "cuda:0" (see `as_device`)."""

    __slots__ = ("type", "id")
    _NAMES = {1: "cpu", 2: "gpu"}

    def __init__(self, dev_type: int = 1, dev_id: int = 0) -> None:
        self.type, self.id = dev_type, dev_id

    @property
    def device_type(self) -> str:
        """"cpu" or "gpu", as MXNet's Context.device_type."""
        return self._NAMES.get(self.type, str(self.type))

    device_id = property(lambda self: self.id, doc="The device's number, as MXNet's.")

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = as_device(other)
            except ValueError:
                return False
        return isinstance(other, Device) and (self.type, self.id) == (other.type, other.id)

    def __hash__(self):
        return hash((self.type, self.id))

    def __repr__(self):
        return f"{self._NAMES.get(self.type, self.type)}({self.id})"


def cpu(dev_id: int = 0) -> Device:
    return Device(1, dev_id)


def gpu(dev_id: int = 0) -> Device:
    return Device(2, dev_id)


_DEVICE_TEXT = re.compile(r"\s*(cpu|gpu|cuda)\s*(?:[:(]\s*(\d+)\s*\)?)?\s*$", re.IGNORECASE)
_DEVICE_TYPES = {"cpu": 1, "gpu": 2, "cuda": 2}


def as_device(device, default=None):
    """A Device from a Device, its text ("cpu", "gpu", "gpu:1", "gpu(1)", "cuda:0") or
    a PyTorch device (its str); None gives `default`."""
    if device is None:
        return default
    if isinstance(device, Device):
        return device
    text = device if isinstance(device, str) else None
    if text is None and type(device).__name__ == "device":  # torch.device
        text = str(device)
    match = _DEVICE_TEXT.match(text) if text is not None else None
    if match is None:
        raise ValueError(f"device {device!r} is not one deft knows: expected deft.cpu(), "
                         f"deft.gpu(n), or text such as 'cpu', 'gpu:0', 'gpu(1)'")
    return Device(_DEVICE_TYPES[match.group(1).lower()], int(match.group(2) or 0))
