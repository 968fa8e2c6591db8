"""Neural-network blocks: write ``forward(self, x)``; ``hybridize()`` compiles it.

A HybridBlock's forward runs eagerly until hybridize() is called. After that,
the first call with given input shapes runs forward under deferred compute,
exports the recorded graph (inputs and parameters as its arguments), and
builds a CachedOp; later calls with the same shapes run only the CachedOp,
and new shapes record and compile again. Autograd records the CachedOp as
one node that keeps the values its gradient reads (Dropout's mask, the
activations), so hybridized blocks train like eager ones and backward
recomputes nothing.

The layers are MXNet Gluon 1.x's, with its parameters and defaults; models
move between the two as MXNet files (save_parameters / load_parameters,
export / SymbolBlock.imports).
"""
from .block import Block, HybridBlock, Parameter, ParameterDict, SymbolBlock  # noqa: F401
from . import init  # noqa: F401
from .basic_layers import (Dense, Dropout, Embedding, Flatten, HybridLambda,  # noqa: F401
                           HybridSequential, Lambda, Sequential)
from .activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, Swish  # noqa: F401
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D, Conv1DTranspose,  # noqa: F401
                          Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose, GlobalAvgPool1D,
                          GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D,
                          GlobalMaxPool3D, MaxPool1D, MaxPool2D, MaxPool3D)
from .norm_layers import BatchNorm, GroupNorm, InstanceNorm, LayerNorm  # noqa: F401
from .loss import (CTCLoss, CosineEmbeddingLoss, HingeLoss, HuberLoss,  # noqa: F401
                   KLDivLoss, L1Loss, L2Loss, Loss, PoissonNLLLoss, SigmoidBCELoss,
                   SigmoidBinaryCrossEntropyLoss, SoftmaxCELoss, SoftmaxCrossEntropyLoss,
                   TripletLoss)
