"""One NeuronCore: a kernel API, the recorded program, the engine scheduler and its metrics.

A kernel is a Python function that receives a :class:`KernelContext` and HBM tensors,
allocates SBUF and PSUM tiles and issues instructions (DMA, Tensor Engine matmul and
transpose, Scalar activation, Vector and GpSimd ops). :func:`run` records it as one flat
instruction table with its dependencies, executes the numerics through ``trnlab.formats``
(fp32 PSUM), schedules it on the engines of one core of a chosen generation (a numba loop,
costs from the catalogue) and returns a :class:`Run`: outputs, timeline, latency, per-engine
busy fractions, FLOPs utilisation, HBM traffic and the roofline point.

>>> import numpy as np
>>> from trnlab import core
>>> def scale(ctx, x, y):
...     t = ctx.sbuf(x.shape, "bf16")
...     ctx.load(t, x)
...     ctx.activation(t, t, "relu", scale=2.0)
...     ctx.store(y, t)
>>> r = core.run(scale, x=core.hbm(np.arange(-4, 4).reshape(2, 4)), y=core.hbm((2, 4)))
>>> r.outputs["y"].tolist()
[[0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 4.0, 6.0]]

Importing this package compiles nothing; the scheduler compiles on first use (cached on disk).
"""

from ._context import KernelContext
from ._engines import ACTIVATIONS
from ._errors import (
    FormatNotSupportedError,
    HardwareRuleError,
    InstructionLimitError,
    KernelArgumentError,
    KernelSignatureError,
    OperandPlacementError,
    PsumBankOverflowError,
    SbufCapacityError,
    TileIndexError,
    TileTooLargeError,
    UnknownFigureError,
    UnwrittenReadError,
)
from ._params import CoreParams, core_params
from ._program import ENGINES, OPS, Program, engine_name
from ._progress import (
    MAX_INSTRUCTIONS,
    MAX_NKI_INSTRUCTIONS,
    MAX_NUMERICS_INSTRUCTIONS,
    max_instructions,
)
from ._run import HBM, Run, hbm, record, run, simulate
from ._schedule import Costs, costs, schedule
from ._tiles import HBMTensor, HBMView, Tile, TilePool, View, format_bits, format_name
from ._traffic import element_passes, hbm_traffic, time_breakdown, traffic

__all__ = [
    "ACTIVATIONS",
    "ENGINES",
    "HBM",
    "MAX_INSTRUCTIONS",
    "MAX_NKI_INSTRUCTIONS",
    "MAX_NUMERICS_INSTRUCTIONS",
    "OPS",
    "CoreParams",
    "Costs",
    "FormatNotSupportedError",
    "HBMTensor",
    "HBMView",
    "HardwareRuleError",
    "InstructionLimitError",
    "KernelArgumentError",
    "KernelContext",
    "KernelSignatureError",
    "OperandPlacementError",
    "Program",
    "PsumBankOverflowError",
    "Run",
    "SbufCapacityError",
    "Tile",
    "TileIndexError",
    "TilePool",
    "TileTooLargeError",
    "UnknownFigureError",
    "UnwrittenReadError",
    "View",
    "core_params",
    "costs",
    "element_passes",
    "engine_name",
    "format_bits",
    "format_name",
    "hbm",
    "hbm_traffic",
    "max_instructions",
    "record",
    "run",
    "schedule",
    "simulate",
    "time_breakdown",
    "traffic",
]
