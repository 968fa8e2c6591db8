"""Deferred compute, symbols and cached executors.

    with deft.deferred_compute():
        y = (x + 5) * (x + 5)           # recorded, not computed
    sym = deft.export(inputs={"x": x}, outputs={"y": y})
    run = deft.CachedOp(sym)            # memory-planned, run again and again
    run(x2)
"""
import contextlib

from ._lib import lib
from .ndarray import NDArray, _wrap


@contextlib.contextmanager
def deferred_compute():
    """Scope in which operator calls record a graph and return lazy arrays."""
    prev = lib.DeftSetIsDeferredCompute(1)
    try:
        yield
    finally:
        lib.DeftSetIsDeferredCompute(prev)


def is_deferred_compute():
    return bool(lib.DeftIsDeferredCompute())


def compute(*arrays):
    """Compute lazy arrays now (reading them does it too)."""
    lib.DeftNDArrayTriggerDeferredCompute(list(arrays), len(arrays))


def _named(mapping, what):
    if not isinstance(mapping, dict):
        raise TypeError(f"{what} is {type(mapping).__name__}, expected a dict of name: NDArray")
    names, arrays = list(mapping), list(mapping.values())
    for name, arr in zip(names, arrays):
        if not isinstance(name, str):
            raise TypeError(f"{what} has key {name!r}, expected str names")
        if not isinstance(arr, NDArray):
            raise TypeError(f"{what}[{name!r}] is {type(arr).__name__}, expected an NDArray")
    return names, arrays


def load_lib(path, verbose=False):
    """Load an extension library (lib_api.h) and register its graph passes."""
    lib.DeftLoadLib(str(path), int(verbose))


def list_lib_passes():
    """Names of the passes that loaded libraries registered."""
    return lib.DeftLibListPasses()


def export(inputs, outputs):
    """The recorded graph from `inputs` to `outputs` (dicts of name: array) as a Symbol.

    Its arguments are the input names in order, its outputs the output names.
    Arrays made outside the deferred scope (parameters) become arguments by
    being listed among the inputs.
    """
    in_names, in_arrays = _named(inputs, "inputs")
    out_names, out_arrays = _named(outputs, "outputs")
    return Symbol(lib.DeftNDArrayGetDeferredComputeSymbol(
        in_arrays, out_arrays, in_names, out_names, len(in_arrays), len(out_arrays)))


class Symbol:
    """A symbolic graph: export it, save it, run it with a CachedOp."""

    __slots__ = ("this",)

    def __init__(self, handle):
        self.this = handle

    @classmethod
    def fromjson(cls, text):
        return cls(lib.DeftSymbolCreateFromJSON(text))

    @classmethod
    def load(cls, path):
        return cls(lib.DeftSymbolCreateFromFile(str(path)))

    @classmethod
    def var(cls, name):
        return cls(lib.DeftSymbolCreateVariable(name))

    def tojson(self):
        return lib.DeftSymbolSaveToJSON(self)

    def save(self, path):
        lib.DeftSymbolSaveToFile(self, str(path))

    def list_inputs(self):
        return lib.DeftSymbolListArguments(self)

    list_arguments = list_inputs

    def list_auxiliary_states(self):
        """Variables operators update in place (BatchNorm's moving statistics); a CachedOp
        takes them after the arguments."""
        return lib.DeftSymbolListAuxiliaryStates(self)

    def list_outputs(self):
        return lib.DeftSymbolListOutputs(self)

    def todot(self):
        """The graph in Graphviz DOT (deft.viz.plot_network draws it in MXNet's style)."""
        return lib.DeftSymbolToDot(self)

    def get_internals(self):
        """A symbol whose outputs are every node's outputs, in graph order (variables too)."""
        return Symbol(lib.DeftSymbolGetInternals(self))

    def infer_shape(self, **shapes):
        """Shapes of the arguments, outputs and auxiliary states from some arguments'
        shapes (name=shape), as MXNet's: three lists, or three Nones when the shapes
        given do not determine them all. Shapes that do not fit an operator raise."""
        names = list(shapes)
        dims = [int(d) for n in names for d in shapes[n]]
        complete = lib.DeftSymbolInferShape(self, len(names), names,
                                            [len(shapes[n]) for n in names], dims, None)
        if not complete:
            return None, None, None
        counts = (len(self.list_inputs()), len(self.list_outputs()),
                  len(self.list_auxiliary_states()))
        return tuple([tuple(lib.DeftSymbolGetInferredShape(self, group, i)[0])
                      for i in range(count)] for group, count in enumerate(counts))

    def gradient(self, wrt):
        """The graph of this symbol's gradient with respect to the named arguments."""
        return Symbol(lib.DeftSymbolGradient(self, len(wrt), list(wrt)))

    def apply_passes(self, passes):
        """A new symbol after the named graph passes ("CSE,Fuse", ...)."""
        return Symbol(lib.DeftSymbolApplyPasses(self, passes))

    def optimize_for(self, backend, **options):
        """A new symbol rewritten by a pass: built in, or from a library (deft.load_lib)."""
        keys = tuple(options)
        vals = tuple(str(v) for v in options.values())
        return Symbol(lib.DeftSymbolOptimizeFor(self, backend, len(keys), keys, vals))

    def bind(self, **flags):
        return CachedOp(self, **flags)

    def __repr__(self):
        return f"<Symbol {self.list_inputs()} -> {self.list_outputs()}>"


class CachedOp:
    """A symbol compiled to a memory-planned executor; call it with the arguments in order."""

    __slots__ = ("this", "num_outputs")

    def __init__(self, symbol, fuse=False, backward=False, memory_plan=True):
        flags = (4 if fuse else 0) | (2 if backward else 0) | (0 if memory_plan else 1)
        self.this = lib.DeftCachedOpCreate(symbol, flags)
        outputs = len(symbol.list_outputs())
        self.num_outputs = outputs + (len(symbol.list_inputs()) if backward else 0)

    _PLAN_STATS = {"arena": 0, "naive": 1, "inplace_only": 2, "sharing_only": 3}

    def plan_bytes(self, stat="arena"):
        """A figure of the memory plan of the last call, in bytes: "arena" (what this
        executor allocated), "naive" (one buffer per intermediate), "inplace_only" or
        "sharing_only" (the plan with one of its two savings)."""
        if stat not in self._PLAN_STATS:
            raise ValueError(f"stat is {stat!r}, expected one of {sorted(self._PLAN_STATS)}")
        return lib.DeftCachedOpGetPlanStat(self, self._PLAN_STATS[stat])

    def __call__(self, *inputs, out=None):
        given = list(out) if out is not None else [None] * self.num_outputs
        made = lib.DeftCachedOpInvoke(self, len(inputs), list(inputs), given)
        results = [g if h is None else _wrap(h) for h, g in zip(made, given)]
        return results[0] if len(results) == 1 else results
