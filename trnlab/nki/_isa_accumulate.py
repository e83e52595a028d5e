"""The Vector engine's accumulating instructions: running operations and masked selects.

The Vector engine keeps one accumulator register per partition, shared by the instructions
that fold into it (NKI API reference): ``tensor_scalar_cumulative`` (a running sum, product,
max or min along the free axes), ``range_select`` and ``select_reduce`` (a select whose row
maxima accumulate), and ``tensor_scalar_reduce`` (a fold, in ``trnlab.nki.isa``).
``reduce_cmd`` resets the registers, carries them on, or (``load_reduce``) loads them.
Their costs are not published: each is timed as one Vector pass (assumptions, docs/nki.md).
"""

from __future__ import annotations

import numbers

import numpy as np

from trnlab.core import (
    FormatNotSupportedError,
    HardwareRuleError,
    KernelArgumentError,
)

from . import _numerics as N
from ._errors import option
from ._tensor import MemoryRegion
from ._trace import current
from .isa import (
    _LOAD_REDUCE,
    _ON_CHIP,
    _REDUCE,
    _RESET_REDUCE,
    _arithmetic,
    _flat,
    _new,
    _output_and_input,
    _put,
    _record,
    _reduce_res,
    _scalar_or_vector,
    _tensor,
    _two_inputs,
    _vals,
    _where,
    reduce_cmd,
)

__all__ = ["range_select", "select_reduce", "tensor_scalar_cumulative"]


#: The accumulator's start under reset_reduce, by the cumulative operation (API reference).
_CUMULATIVE_START = {
    "add": 0.0,
    "subtract": 0.0,
    "multiply": 1.0,
    "maximum": -np.inf,
    "minimum": np.inf,
}


def _vector_regs(tr) -> np.ndarray:
    """The Vector engine's accumulator registers, one per partition (shared by its
    accumulating instructions; the Scalar engine's are separate). NaN until an instruction
    sets them: what they hold at the start of a kernel is not defined."""
    return tr.constants.setdefault("vector_regs", np.full(tr.pmax, np.nan, np.float32))


def _regs_read(regs: np.ndarray, p0: int, p1: int, api: str, how: str) -> np.ndarray:
    """The accumulators of partitions ``p0:p1``, refused where nothing has set them yet."""
    held = regs[p0:p1]
    if np.isnan(held).any():
        raise KernelArgumentError(
            f"nisa.{api}: {how} reads the Vector engine's accumulators, but no instruction of "
            f"this kernel has set them on partitions {p0}..{p1 - 1} (what they hold at the start "
            f"is not defined): start with reduce_cmd=nisa.reduce_cmd.reset_reduce (or "
            f"load_reduce)"
        )
    return held.copy()


def tensor_scalar_cumulative(dst=None, src=None, op0=None, op1=None, imm0=None, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None):  # fmt: skip
    """Vector engine, along the free axes of each partition: ``reg = op1(op0(src[i], imm0),
    reg); dst[i] = reg`` (a running sum, product, max or min after one tensor_scalar stage),
    ``reg`` the engine's accumulator register: reset to op1's identity (``reset_reduce``),
    loaded from ``imm1`` (``load_reduce``), or carried on from the Vector instruction before
    (``reduce``). Charged as a one-input Vector instruction (N cycles): its cost is not
    published, an assumption."""
    api = "tensor_scalar_cumulative"
    tr = current()
    if dst is None or src is None or op0 is None or op1 is None or imm0 is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, src, op0, op1 and imm0")
    dst, src = _tensor(dst, "dst", api), _tensor(src, "src", api)
    rd, r = _output_and_input(dst, src, api, "src")
    for t, w in ((dst, "dst"), (src, "src")):
        if t.dtype in ("int32", "uint32"):
            raise FormatNotSupportedError(
                f"nisa.{api}: {w} is {t.dtype}; the instruction takes bf16, fp16, fp32, fp8, "
                f"uint8, uint16, int8 or int16 (no 32-bit integers: an ISA limit)"
            )
    n0 = _arithmetic(op0, "op0", api)
    n1 = N.name_of(op1, N.ALU, f"nisa.{api} op1")
    if n1 not in _CUMULATIVE_START:
        raise KernelArgumentError(
            f"nisa.{api}: op1 is the running operation: add, subtract, multiply, maximum or "
            f"minimum, not {n1}"
        )
    cmd = reduce_cmd
    if cmd not in (_RESET_REDUCE, _REDUCE, _LOAD_REDUCE):
        raise option(f"nisa.{api}", f"reduce_cmd={cmd}",
                     "reduce_cmd.reset_reduce, reduce and load_reduce are")  # fmt: skip
    v0, t0, r0 = _scalar_or_vector(imm0, r, "imm0", api)
    ins = [(src, r)] + ([(t0, r0)] if t0 is not None else [])
    v1 = t1 = None
    if cmd is _LOAD_REDUCE:
        if imm1 is None:
            raise KernelArgumentError(
                f"nisa.{api}: reduce_cmd=load_reduce starts the accumulator from imm1; give imm1"
            )
        v1, t1, r1 = _scalar_or_vector(imm1, r, "imm1", api)
        if t1 is not None:
            ins.append((t1, r1))
    elif imm1 is not None:  # read only by load_reduce (the API reference's own chained
        _scalar_or_vector(imm1, r, "imm1", api)  # example passes it to every call)
    regs = _vector_regs(tr)
    p0, p1 = r[0], r[1]
    if tr.numerics:
        x = _flat(src).astype(np.float32)
        if cmd is _RESET_REDUCE:
            reg = np.full(p1 - p0, _CUMULATIVE_START[n1], np.float32)
        elif cmd is _LOAD_REDUCE:
            reg = (
                np.full(p1 - p0, v1, np.float32)
                if t1 is None
                else _flat(t1)[:, 0].astype(np.float32)
            )
        else:
            reg = _regs_read(regs, p0, p1, api, "reduce_cmd=reduce")
        out = np.empty_like(x)
        f0, f1 = N.ALU[n0], N.ALU[n1]
        o = _vals(v0, t0, True)
        with np.errstate(all="ignore"):
            t = np.asarray(f0(x, o), np.float32)
            for j in range(x.shape[1]):
                reg = np.asarray(f1(t[:, j], reg), np.float32)
                out[:, j] = reg
        regs[p0:p1] = reg
        _put(dst, out)
    _record(tr, "reduce", "vector", dst, rd, ins, api)


_FP32_MIN = float(np.finfo(np.float32).min)
_RANGE_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")


def _max_accumulate(tr, api, rows, values, cmd, reduce_res, reduce_op, idle_ok: bool):
    """The running max of a select, kept in the Vector engine's accumulator registers
    (``reset_reduce`` starts them at -inf, ``reduce`` carries them on, ``idle`` leaves them)
    and read out to ``reduce_res`` when one is given: a short Vector instruction."""
    if reduce_op is not None:
        N.name_of(reduce_op, {"maximum": None}, f"nisa.{api} reduce_op (only max)")
    allowed = (_RESET_REDUCE, _REDUCE) + ((reduce_cmd.idle,) if idle_ok else ())
    if cmd not in allowed:
        raise option(f"nisa.{api}", f"reduce_cmd={cmd}",
                     " and ".join(str(c).split(".")[-1] for c in allowed) + " are")  # fmt: skip
    regs = _vector_regs(tr)
    p0, p1 = rows
    if values is not None and cmd is not reduce_cmd.idle:
        m = values.max(axis=1)
        if cmd is _RESET_REDUCE:
            regs[p0:p1] = m
        else:
            regs[p0:p1] = np.maximum(_regs_read(regs, p0, p1, api, "reduce_cmd=reduce"), m)
    if reduce_res is None:
        return None
    res, rr = _reduce_res(reduce_res, p1 - p0, api)
    if not res._s.dtype.is_float:
        raise FormatNotSupportedError(f"nisa.{api}: reduce_res is {res.dtype}; it must be a float")
    if tr.numerics:
        _put(res, _regs_read(regs, p0, p1, api, "reduce_res"))
    return res, rr


def range_select(dst=None, on_true_tile=None, comp_op0=None, comp_op1=None, bound0=None,
                 bound1=None, reduce_cmd=reduce_cmd.reset_reduce, reduce_res=None,
                 reduce_op=None, range_start=0, on_false_value=_FP32_MIN, name=None,
                 dtype=None):  # fmt: skip
    """Vector engine, NeuronCore-v3+: keep ``on_true_tile[p, i]`` where
    ``comp_op0(range_start + i, bound0[p]) & comp_op1(range_start + i, bound1[p])`` (in fp32),
    ``on_false_value`` (which must be fp32's most negative finite value) elsewhere, and the
    row maxima in the accumulators (``reduce_res`` reads them out): a causal or windowed mask
    and the softmax's max in one pass. Older form: no ``dst``, returns a new tile. Timed as a
    one-input Vector pass and a short read-out (its cost is not published: an assumption)."""
    api = "range_select"
    tr = current()
    if tr.gen < 3:
        raise HardwareRuleError(
            f"nisa.{api} arrives with NeuronCore-v3 (trn2); this kernel is traced for "
            f"{tr.params.chip}"
        )
    if on_true_tile is None or bound0 is None or bound1 is None:
        raise KernelArgumentError(f"nisa.{api} needs on_true_tile, bound0 and bound1")
    src = _tensor(on_true_tile, "on_true_tile", api)
    ret = None
    if dst is None:
        dst = ret = _new(src.shape, dtype or src.dtype, MemoryRegion.sbuf, depth=5)
    dst = _tensor(dst, "dst", api)
    if not src._s.dtype.is_float:
        raise FormatNotSupportedError(
            f"nisa.{api}: on_true_tile is {src.dtype}; it must be a float"
        )
    if float(on_false_value) != _FP32_MIN:
        raise HardwareRuleError(
            f"nisa.{api}: on_false_value must be fp32's most negative value (nl.fp32.min, "
            f"{_FP32_MIN:.7g}), a hardware constraint; got {on_false_value!r}"
        )
    if not isinstance(range_start, numbers.Integral) or isinstance(range_start, bool):
        raise KernelArgumentError(
            f"nisa.{api}: range_start must be an integer, not {range_start!r}"
        )
    ops = [
        N.name_of(o, N.ALU, f"nisa.{api} {w}")
        for o, w in ((comp_op0, "comp_op0"), (comp_op1, "comp_op1"))
    ]
    for o in ops:
        if o not in _RANGE_COMPARISONS:
            raise KernelArgumentError(
                f"nisa.{api}: a comparison must be one of {', '.join(_RANGE_COMPARISONS)}, not {o}"
            )
    rd, r = _output_and_input(dst, src, api, "on_true_tile")
    (_, b0, r0), (_, b1, r1) = (
        _scalar_or_vector(b, r, w, api) for b, w in ((bound0, "bound0"), (bound1, "bound1"))
    )
    if b0 is None or b1 is None:
        raise KernelArgumentError(f"nisa.{api}: bound0 and bound1 are [P, 1] tiles")
    for t, w in ((b0, "bound0"), (b1, "bound1")):
        if t.dtype != "float32":
            raise FormatNotSupportedError(f"nisa.{api}: {w} is {t.dtype}; bounds are float32")
    if not (-(2**24) <= range_start and range_start + r[4] <= 2**24):
        raise HardwareRuleError(
            f"nisa.{api}: range_start {range_start} + {r[4]} columns passes 2^24; the index is "
            f"compared in fp32, which counts whole numbers exactly only that far"
        )
    values = None
    if tr.numerics:
        x = _flat(src).astype(np.float32)
        i = np.float32(range_start) + np.arange(x.shape[1], dtype=np.float32)[None, :]
        keep = (N.ALU[ops[0]](i, _flat(b0)) != 0) & (N.ALU[ops[1]](i, _flat(b1)) != 0)
        values = np.where(keep, x, np.float32(_FP32_MIN)).astype(np.float32)
        _put(dst, values)
    ins = [(src, r), (b0, r0), (b1, r1)]
    _record(tr, "reduce", "vector", dst, rd, ins, api)
    out = _max_accumulate(tr, api, (r[0], r[1]), values, reduce_cmd, reduce_res, reduce_op, False)
    if out is not None:
        _record(tr, "copy", "vector", out[0], out[1], [(dst, rd)], api, elements=1)
    return ret


def select_reduce(dst=None, predicate=None, on_true=None, on_false=None, reduce_res=None,
                  reduce_cmd=reduce_cmd.idle, reduce_op=None, reverse_pred=False, name=None):  # fmt: skip
    """Vector engine: ``dst = where(predicate (inverted by reverse_pred), on_true, on_false)``,
    ``on_false`` a number or a ``[P, 1]`` tile, ``predicate`` an 8- or 16-bit integer tile;
    with ``reduce_cmd`` reset_reduce / reduce the row maxima go to the accumulators
    (``reduce_res`` reads them out). Timed as a two-input Vector instruction (tensor_tensor's
    cost) and a short read-out (an assumption)."""
    api = "select_reduce"
    tr = current()
    if dst is None or predicate is None or on_true is None or on_false is None:
        raise KernelArgumentError(f"nisa.{api} needs dst, predicate, on_true and on_false")
    dst, pred, src = (
        _tensor(dst, "dst", api),
        _tensor(predicate, "predicate", api),
        _tensor(on_true, "on_true", api),
    )
    if pred.dtype not in ("bool_", "int8", "uint8", "int16", "uint16"):
        raise FormatNotSupportedError(
            f"nisa.{api}: predicate is {pred.dtype}; it must be an 8- or 16-bit integer (bool_, "
            f"int8, uint8, int16 or uint16)"
        )
    if src.dtype in ("tfloat32", "int32", "uint32"):
        raise FormatNotSupportedError(f"nisa.{api}: on_true cannot be {src.dtype}")
    rd = _where(dst, _ON_CHIP, "dst", api)
    rp = _where(pred, _ON_CHIP, "predicate", api)
    r = _where(src, _ON_CHIP, "on_true", api)
    _two_inputs(dst, rd, (pred, rp, "predicate"), (src, r, "on_true"), api)
    fv, ft, fr = _scalar_or_vector(on_false, r, "on_false", api)
    values = None
    if tr.numerics:
        keep = _flat(pred) != 0
        keep = ~keep if reverse_pred else keep
        values = np.where(keep, _flat(src).astype(np.float32), _vals(fv, ft, True)).astype(
            np.float32
        )
        _put(dst, values)
    ins = [(pred, rp), (src, r)] + ([(ft, fr)] if ft is not None else [])
    _record(tr, "tensor_tensor", "vector", dst, rd, ins, api)
    out = _max_accumulate(tr, api, (r[0], r[1]), values, reduce_cmd, reduce_res, reduce_op, True)
    if out is not None:
        _record(tr, "copy", "vector", out[0], out[1], [(dst, rd)], api, elements=1)
