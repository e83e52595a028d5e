"""Errors that teach: each names the rule, the limit, the value, the generation and the fix."""

from __future__ import annotations

from trnlab._errors import TrnlabError

__all__ = [
    "FormatNotSupportedError",
    "HardwareRuleError",
    "InstructionLimitError",
    "KernelArgumentError",
    "OperandPlacementError",
    "PsumBankOverflowError",
    "SbufCapacityError",
    "TileIndexError",
    "TileTooLargeError",
    "UnknownFigureError",
    "UnwrittenReadError",
]


class HardwareRuleError(TrnlabError):
    """A kernel asked a NeuronCore for something the hardware cannot do."""


class TileTooLargeError(HardwareRuleError):
    """A tile or matmul operand exceeds a partition or free-dimension limit."""


class PsumBankOverflowError(HardwareRuleError):
    """A PSUM tile does not fit one 2 KiB bank per partition, or all banks are taken."""


class SbufCapacityError(HardwareRuleError):
    """The SBUF tiles alive at once need more bytes per partition than the core has."""


class FormatNotSupportedError(HardwareRuleError):
    """The Tensor Engine of this generation has no path for the data type."""


class OperandPlacementError(HardwareRuleError):
    """An operand is in the wrong memory (matmul inputs must be SBUF, its output PSUM...)."""


class UnwrittenReadError(HardwareRuleError):
    """An instruction reads part of a tile that nothing has written yet."""


class KernelArgumentError(TrnlabError):
    """A kernel-API call got an argument of the wrong kind or out of range (a shape that is not
    two positive integers, a buffer count of zero, a figure that is not a positive number...)."""


class TileIndexError(KernelArgumentError, IndexError):
    """A tile or HBM tensor indexed outside its shape, with a step, or with something that is
    not an integer or a slice (trnlab never clips a slice; also an ``IndexError``)."""


class KernelSignatureError(KernelArgumentError, TypeError):
    """A kernel called with arguments its parameters cannot take (also a ``TypeError``, as
    calling the function itself would raise)."""


class UnknownFigureError(KernelArgumentError, KeyError):
    """A core figure asked for by a name the core does not have (also a ``KeyError``)."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's quoted repr


class InstructionLimitError(TrnlabError):
    """A run would record more instructions than its limit (a hang for a learner); the message
    gives the count, the limit and what to do (smaller shape, bigger tiles, a higher limit)."""
