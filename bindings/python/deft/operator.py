"""Custom operators in Python, as MXNet users write them.

    class Sqr(deft.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])

    @deft.operator.register("sqr")
    class SqrProp(deft.operator.CustomOpProp):
        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return Sqr()

    y = deft.nd.sqr(x)      # imperative, deferred, exported, differentiable

The callbacks run on deft's callback threads (holding the GIL while they
run), never on an engine thread; an exception in one becomes an error on
the operator's output. Custom operators have one output.
"""
from . import nd as _nd
from ._lib import DTYPE_NAMES, NUMPY_OF, cpu, dtype_code, lib
from .ndarray import _wrap as _borrow  # an NDArray over a handle deft lends for one callback


class CustomOp:
    """The computation: forward and (optionally) backward."""

    def forward(self, is_train, req, in_data, out_data, aux):
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise NotImplementedError(f"{type(self).__name__} must define backward")

    def assign(self, dst, req, src):
        """Write src into dst as req says ('write', 'inplace', 'add', or 'null')."""
        if req == "null":
            return
        if req == "add":
            src = dst + src
        src.copyto(dst)


class CustomOpProp:
    """What the operator looks like: arguments, outputs, shapes, types. Set
    has_backward = False on a Prop whose operators have no backward."""

    has_backward = True

    def __init__(self, need_top_grad=True):
        self.need_top_grad = need_top_grad

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        """(input shapes, [output shape], aux shapes); default: the output is like input 0."""
        return in_shape, [in_shape[0]], []

    def infer_type(self, in_type):
        """(input dtypes, [output dtype], aux dtypes); default: input 0's."""
        return in_type, [in_type[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        raise NotImplementedError(f"{type(self).__name__} must define create_operator")


class _Handler:
    """What the C callbacks call: the Prop's answers and the Op's computation."""

    def __init__(self, prop):
        self.prop = prop
        self.ops = {}

    def infer(self, shapes, dtypes):
        _, out_shapes, _ = self.prop.infer_shape([tuple(s) for s in shapes])
        names = [NUMPY_OF.get(d, DTYPE_NAMES[d]) for d in dtypes]
        _, out_types, _ = self.prop.infer_type(names)
        return tuple(int(d) for d in out_shapes[0]), dtype_code(out_types[0])

    def _op(self, inputs):
        key = tuple((x.shape, str(x.dtype)) for x in inputs)
        op = self.ops.get(key)
        if op is None:
            op = self.ops[key] = self.prop.create_operator(
                cpu(), [x.shape for x in inputs], [x.dtype for x in inputs])
        return op

    def forward(self, inputs, output, is_train):
        in_data = [_borrow(h) for h in inputs]
        self._op(in_data).forward(bool(is_train), ["write"], in_data, [_borrow(output)], [])

    def backward(self, out_grad, inputs, output, in_grads):
        in_data = [_borrow(h) for h in inputs]
        grads = [_borrow(h) for h in in_grads]
        self._op(in_data).backward(["write"] * len(grads), [_borrow(out_grad)], in_data,
                                   [_borrow(output)], grads, [])


def register(name):
    """Class decorator: register a CustomOpProp subclass as operator `name`."""
    def wrap(prop_cls):
        prop = prop_cls()
        if len(prop.list_outputs()) != 1:
            raise ValueError(f"custom operator '{name}' lists {len(prop.list_outputs())} "
                             f"outputs; deft's custom operators have one")
        lib.DeftPyCustomOpRegister(name, len(prop.list_arguments()), _Handler(prop),
                                   int(bool(prop.has_backward)))
        _nd._add_operator(name)
        if prop.has_backward:
            _nd._add_operator("_backward_" + name)
        return prop_cls
    return wrap
