"""Two instructions NeuronCore-v4 (Trainium3) adds for attention's softmax: ``exponential``
on the Vector engine and ``activate2`` on the Scalar engine.

``exponential`` computes ``exp(src - max_value)`` and can sum the results into the Vector
engine's accumulator registers (shared with ``range_select``, ``tensor_scalar_cumulative``...),
so a softmax's shift, exponential and row sum take one instruction. ``activate2`` runs a
two-stage tensor-scalar pipeline (``(data op0 imm0) op1 imm1``, six pairs of operators), an
activation function, and an optional fold (add, max, min, abs-max, abs-min) into the Scalar
engine's accumulators (shared with ``activation``). Semantics follow the NKI 0.6 API reference;
neither cost is published: ``exponential`` is timed as one one-input Vector pass, ``activate2``
as one activation (whose scale and bias stage costs nothing extra), and reading the
accumulators out as one short instruction more (assumptions, docs/nki.md).
"""

from __future__ import annotations

import numbers

import numpy as np

from trnlab.core import HardwareRuleError, KernelArgumentError

from . import _numerics as N
from ._errors import option
from ._isa_accumulate import _regs_read, _vector_regs
from ._trace import current
from .isa import (
    _LOAD_REDUCE,
    _REDUCE,
    _RESET_REDUCE,
    _flat,
    _output_and_input,
    _put,
    _record,
    _reduce_res,
    _scalar_or_vector,
    _tensor,
    _vals,
    reduce_cmd,
)

__all__ = ["activate2", "exponential"]

#: activate2's tensor-scalar stage: the (op0, op1) pairs the API reference lists.
ACTIVATE2_PAIRS = (
    ("multiply", "add"),
    ("multiply", "subtract"),
    ("multiply", "bypass"),
    ("add", "bypass"),
    ("subtract", "bypass"),
    ("bypass", "bypass"),
)
#: activate2's folds and the value reset_reduce starts each from.
ACTIVATE2_FOLDS = {
    "add": (np.sum, 0.0),
    "maximum": (np.max, -np.inf),
    "minimum": (np.min, np.inf),
    "abs_max": (lambda x, axis: np.max(np.abs(x), axis=axis), 0.0),
    "abs_min": (lambda x, axis: np.min(np.abs(x), axis=axis), np.inf),
}
_IDLE = reduce_cmd.idle
_RESET = reduce_cmd.reset


def _v4_only(tr, api: str, instead: str) -> None:
    if tr.gen < 4:
        raise HardwareRuleError(
            f"nisa.{api} exists on NeuronCore-v4 (trn3) and later, not on {tr.params.name} "
            f"({tr.params.chip}): write {instead}, or trace the kernel for trn3"
        )


def _pair(dst, data, api: str, what: str = "data") -> tuple:
    """``dst`` and ``data`` as tensors, with their regions (same rows and sizes)."""
    dst, data = _tensor(dst, "dst", api), _tensor(data, what, api)
    rd, r = _output_and_input(dst, data, api, what)
    return dst, data, rd, r


def exponential(dst=None, src=None, max_value=0.0, reduce_res=None, reduce_cmd=_IDLE,
                reduce_init=0.0, name=None):  # fmt: skip
    """Vector engine (NeuronCore-v4+): ``dst = exp(src - max_value)``, ``max_value`` a number
    or a ``[P, 1]`` tile; with ``reduce_cmd`` the sums of each partition's results go to the
    accumulators: ``reset_reduce`` starts them at 0, ``load_reduce`` at ``reduce_init``,
    ``reduce`` carries them on; ``idle`` (the default) leaves them undefined, as the reference
    warns. ``reduce_res`` (``[P, 1]``) reads them out."""
    api = "exponential"
    tr = current()
    _v4_only(
        tr,
        api,
        "nisa.activation(op=nl.exp, data=src, bias=-max_value) with its reduce_res for the sums",
    )
    if dst is None or src is None:
        raise KernelArgumentError(f"nisa.{api} needs dst and src")
    dst, src, rd, r = _pair(dst, src, api, "src")
    cmd = reduce_cmd
    if cmd not in (_IDLE, _RESET_REDUCE, _REDUCE, _LOAD_REDUCE):
        raise option(f"nisa.{api}", f"reduce_cmd={cmd}",
                     "idle, reset_reduce, reduce and load_reduce are")  # fmt: skip
    mv, mt, mr = _scalar_or_vector(max_value, r, "max_value", api)
    iv, it, ir = _scalar_or_vector(reduce_init, r, "reduce_init", api)
    if cmd is not _LOAD_REDUCE and (it is not None or iv != 0.0):
        raise KernelArgumentError(
            f"nisa.{api}: reduce_init is read only with reduce_cmd=load_reduce; leave it unset "
            f"(0.0) with reduce_cmd={cmd}"
        )
    ins = [(src, r)] + [(t, rr) for t, rr in ((mt, mr), (it, ir)) if t is not None]
    regs = _vector_regs(tr)
    p0, p1 = r[0], r[1]
    if tr.numerics:
        with np.errstate(all="ignore"):
            _put(dst, np.exp(_flat(src).astype(np.float32) - _vals(mv, mt, True)))
        total = _flat(dst).astype(np.float32).sum(axis=1, dtype=np.float32)
        if cmd is _RESET_REDUCE:
            regs[p0:p1] = total
        elif cmd is _REDUCE:
            regs[p0:p1] = _regs_read(regs, p0, p1, api, "reduce_cmd=reduce") + total
        elif cmd is _LOAD_REDUCE:
            start = np.float32(iv) if it is None else _flat(it)[:, 0].astype(np.float32)
            regs[p0:p1] = start + total
        else:  # idle: "accumulator state unknown"
            regs[p0:p1] = np.nan
    _record(tr, "tensor_scalar", "vector", dst, rd, ins, api)
    if reduce_res is not None:
        res, rr = _reduce_res(reduce_res, p1 - p0, api)
        if tr.numerics:
            _put(res, _regs_read(regs, p0, p1, api, "reduce_res"))
        _record(tr, "copy", "vector", res, rr, [(dst, rd)], api, elements=1)


def activate2(dst=None, op=None, data=None, imm0=None, imm1=None, op0=None, op1=None,
              relu_param=0.0, reverse0=False, reverse1=False, reduce_op=None, reduce_res=None,
              reduce_cmd=_IDLE, name=None):  # fmt: skip
    """Scalar engine (NeuronCore-v4+): ``dst = op((data <op0> imm0) <op1> imm1)`` with one of
    the six operator pairs of the API reference (``nl.bypass`` skips a stage), ``imm0`` and
    ``imm1`` numbers or ``[P, 1]`` tiles, ``reverse0/1`` swapping a stage's operands; with
    ``reduce_op`` (add, maximum, minimum, abs_max, abs_min) and ``reduce_cmd`` the activated
    values fold into the Scalar engine's accumulators (shared with ``activation``), which
    ``reduce_res`` reads out."""
    api = "activate2"
    tr = current()
    _v4_only(tr, api, "a nisa.tensor_scalar for the operators, then nisa.activation")
    if dst is None or data is None or op is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, op and data")
    dst, data, rd, r = _pair(dst, data, api)
    fname = N.name_of(op, N.ACT, f"nisa.{api} op")
    n0 = "bypass" if op0 is None else N.name_of(op0, N.ALU, f"nisa.{api} op0")
    n1 = "bypass" if op1 is None else N.name_of(op1, N.ALU, f"nisa.{api} op1")
    if (n0, n1) not in ACTIVATE2_PAIRS:
        pairs = ", ".join(f"({a}, {b})" for a, b in ACTIVATE2_PAIRS)
        raise HardwareRuleError(
            f"nisa.{api}: the tensor-scalar stage takes (op0, op1) = {pairs}; not ({n0}, {n1}). "
            f"Other pairs: a nisa.tensor_scalar before the activation"
        )
    for flag, stage, what in ((reverse0, n0, "reverse0"), (reverse1, n1, "reverse1")):
        if flag and stage == "bypass":
            raise KernelArgumentError(f"nisa.{api}: {what} needs its operator set (not bypass)")
    stages, ins = [], [(data, r)]
    for name_, imm, flag, what in ((n0, imm0, reverse0, "imm0"), (n1, imm1, reverse1, "imm1")):
        if name_ == "bypass":
            continue
        if imm is None:
            raise KernelArgumentError(f"nisa.{api}: {what} is needed by its operator {name_}")
        v, t, rr = _scalar_or_vector(imm, r, what, api)
        stages.append((N.ALU[name_], v, t, bool(flag)))
        if t is not None:
            ins.append((t, rr))
    if not (isinstance(relu_param, numbers.Real) and relu_param == 0.0):
        raise option(f"nisa.{api}", "relu_param (the parametric activations' slope)",
                     "activation functions without a parameter are")  # fmt: skip
    cmd = reduce_cmd
    if cmd not in (_IDLE, _RESET, _RESET_REDUCE, _REDUCE):
        raise option(f"nisa.{api}", f"reduce_cmd={cmd}",
                     "idle, reset, reset_reduce and reduce are")  # fmt: skip
    fold = None
    if reduce_op is not None:
        fold = N.name_of(reduce_op, ACTIVATE2_FOLDS, f"nisa.{api} reduce_op")
    elif cmd in (_RESET, _RESET_REDUCE, _REDUCE):
        raise KernelArgumentError(f"nisa.{api}: reduce_cmd={cmd} needs a reduce_op")
    regs = tr.constants.setdefault("act_regs", np.zeros(tr.pmax, np.float32))
    p0, p1 = r[0], r[1]
    if tr.numerics:
        x = _flat(data).astype(np.float32)
        with np.errstate(all="ignore"):
            for f, v, t, flag in stages:
                o = _vals(v, t, True)
                x = np.asarray(f(o, x) if flag else f(x, o), np.float32)
            _put(dst, N.ACT[fname](x).astype(np.float32))
        if fold is not None and cmd is not _IDLE:
            fn, start = ACTIVATE2_FOLDS[fold]
            if cmd in (_RESET, _RESET_REDUCE):
                regs[p0:p1] = start
            if cmd in (_RESET_REDUCE, _REDUCE):
                part = fn(_flat(dst).astype(np.float32), axis=1)
                both = np.stack([regs[p0:p1], part.astype(np.float32)])
                regs[p0:p1] = fn(both, axis=0)
    _record(tr, "activation", "scalar", dst, rd, ins, api, func=N.act_id(fname))
    if reduce_res is not None:
        res, rr = _reduce_res(reduce_res, p1 - p0, api)
        if tr.numerics:
            _put(res, regs[p0:p1])
        _record(tr, "copy", "scalar", res, rr, [(dst, rd)], api, elements=1)
