"""Neural-network blocks: write ``forward(self, x)``; ``hybridize()`` compiles it.

A HybridBlock's forward runs eagerly until hybridize() is called. After that,
the first call with given input shapes runs forward under deferred compute,
exports the recorded graph (inputs and parameters as its arguments), and
builds a CachedOp; later calls with the same shapes run only the CachedOp,
and new shapes record and compile again. Autograd records the CachedOp as
one node, so hybridized blocks train like eager ones.
"""
from .block import Block, HybridBlock, Parameter  # noqa: F401
from .layers import Activation, Dense, Dropout, Sequential, HybridSequential  # noqa: F401
from .loss import SoftmaxCrossEntropyLoss  # noqa: F401
