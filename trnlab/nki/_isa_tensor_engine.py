"""The Tensor Engine's instructions: ``nc_matmul`` (with its transpose mode and the
accumulation rules of PSUM), ``nc_matmul_mx`` and ``quantize_mx`` (NeuronCore-v4's MX
formats), and ``nc_transpose``.

Each checks the NKI 0.6 API reference's operand rules, computes its values on the trace's
arrays, and appends a ``("matmul", ...)`` or ``("transpose", ...)`` record (trnlab.nki._trace);
the core model charges them (trnlab.core._schedule).
"""

from __future__ import annotations

import math

import numpy as np

from trnlab.core import (
    FormatNotSupportedError,
    HardwareRuleError,
    KernelArgumentError,
    TileTooLargeError,
)

from ._errors import NotModelledError, option
from ._tensor import MemoryRegion, NkiTensor
from ._trace import current
from .isa import (
    _MATMUL_DTYPES,
    _ON_CHIP,
    _PSUM,
    _SBUF,
    _V4_MATMUL_DTYPES,
    _engine,
    _flat,
    _layout,
    _mark,
    _new,
    _psum_written,
    _put,
    _record,
    _ref,
    _tensor,
    _where,
    engine,
    matmul_perf_mode,
)

__all__ = ["nc_matmul", "nc_matmul_mx", "nc_transpose", "quantize_mx"]


def _check_matmul_dtypes(tr, st, mv, api):
    names = (st.dtype, mv.dtype)
    key = ("matmul dtypes", names)
    if key in tr.constants:  # checked before in this trace
        return
    _matmul_dtypes(tr, names, api)
    tr.constants[key] = True


def _matmul_dtypes(tr, names, api):
    allowed = _MATMUL_DTYPES + (_V4_MATMUL_DTYPES if tr.gen >= 4 else ())
    for what, d in zip(("stationary", "moving"), names, strict=True):
        if d not in allowed:
            v4 = f" ({d} arrives with NeuronCore-v4, trn3)" if d in _V4_MATMUL_DTYPES else ""
            p = tr.params
            raise FormatNotSupportedError(
                f"nisa.{api}: {what} is {d}, and the Tensor Engine of {p.name} ({p.chip}) has "
                f"no {d} path{v4}. It multiplies {', '.join(allowed)}: cast the tile "
                f"(nisa.tensor_copy into a tile of one of those) or pick a chip that has {d}."
            )
    wide = [d in ("float32", "tfloat32") for d in names]
    if any(wide) and not all(wide):
        raise FormatNotSupportedError(
            f"nisa.{api}: {names[0]} x {names[1]}: when one input is float32/tfloat32 the other "
            f"must be too (NKI's nc_matmul rule)"
        )
    if {"float8_e4m3", "float8_e4m3fn"} <= set(names):
        raise FormatNotSupportedError(
            f"nisa.{api}: legacy float8_e4m3 and OCP float8_e4m3fn cannot be mixed in one matmul"
        )


def _matmul_operands(tr, dst, stationary, moving, api):
    dst = _tensor(dst, "dst", api)
    st = _tensor(stationary, "stationary", api)
    mv = _tensor(moving, "moving", api)
    rs = _where(st, _SBUF, "stationary", api)
    rm = _where(mv, _SBUF, "moving", api)
    rd = _where(dst, _PSUM, "dst", api)
    p = tr.limits
    k, m = rs[1] - rs[0], rs[4]
    k2, n = rm[1] - rm[0], rm[4]
    for x, r, what in ((st, rs, "stationary"), (mv, rm, "moving"), (dst, rd, "dst")):
        if r[3] - r[2] != r[4]:
            raise option(api, f"a strided {what} view {x}", "contiguous free ranges are")
    if k != k2:
        raise HardwareRuleError(
            f"nisa.{api}: stationary has K = {k} partitions and moving {k2}; the contraction "
            f"runs over partitions, so both must hold the same K rows"
        )
    if k > p.pe_rows:
        raise TileTooLargeError(
            f"nisa.{api}: K = {k} partitions; the {p.pe_rows}x{p.pe_cols} PE array of {p.name} "
            f"contracts at most {p.pe_rows} (nl.tile_size.pmax). Split K and accumulate in PSUM."
        )
    if m > p.stationary_free_max:
        raise TileTooLargeError(
            f"nisa.{api}: stationary free size {m} exceeds {p.stationary_free_max} "
            f"(nl.tile_size.gemm_stationary_fmax) on {p.name}; split M into tiles of "
            f"<= {p.stationary_free_max}"
            + (
                f", or swap the operands: nc_matmul computes stationary.T @ moving into [M, N] "
                f"and the moving operand's free size {n} would fit as M"
                if n <= p.stationary_free_max
                else ""
            )
            + "."
        )
    if n > p.psum_free_max:
        raise TileTooLargeError(
            f"nisa.{api}: moving free size {n} exceeds {p.psum_free_max} fp32 per PSUM bank on "
            f"{p.name} (nl.tile_size.gemm_moving_fmax); split N into tiles of "
            f"<= {p.psum_free_max}."
        )
    if rd[1] - rd[0] != m or rd[4] != n:
        raise HardwareRuleError(
            f"nisa.{api}: dst {dst.shape} must hold [M, N] = [{m}, {n}] (M from the stationary's "
            f"free size, N from the moving's)"
        )
    return dst, st, mv, rd, rs, rm


def nc_matmul(dst=None, stationary=None, moving=None, is_stationary_onezero=False,
              is_moving_onezero=False, is_transpose=False, accumulate=None, tile_position=(),
              tile_size=(), perf_mode=matmul_perf_mode.none, name=None):  # fmt: skip
    """``dst = stationary.T @ moving`` on the Tensor Engine into PSUM (fp32 accumulation).

    ``accumulate=None`` (NKI's default) overwrites where ``dst`` has not been written since it
    was allocated and adds where it has; ``True`` adds, ``False`` overwrites. Older form:
    ``nisa.nc_matmul(stationary, moving)`` (or by keyword) returns a new PSUM tile.
    """
    api = "nc_matmul"
    tr = current()
    if moving is None or dst is None or stationary is None:  # older: nc_matmul(stat, moving)
        if moving is None:
            stationary, moving = dst, stationary
        elif stationary is None:  # nc_matmul(a, moving=b)
            stationary = dst
        st0 = _tensor(stationary, "stationary", api)
        mv0 = _tensor(moving, "moving", api)
        m = math.prod(st0.shape[1:])
        dst = _new((m, math.prod(mv0.shape[1:])), "float32", MemoryRegion.psum)
        ret = dst
    else:
        ret = None
    if tile_position or tile_size:
        raise option(api, "Tensor Engine tiling (tile_position / tile_size)",
                     "every matmul uses the whole PE array")  # fmt: skip
    if perf_mode not in (matmul_perf_mode.none, None, "none"):
        raise option(api, "perf_mode double_row (FP8 double-row mode)", "perf_mode none is")
    if is_transpose and tr.gen >= 3:  # on NeuronCore-v2 the flag only labels the profile
        _transpose_mode(tr, dst, stationary, moving, accumulate, api)
        return ret
    dst, st, mv, rd, rs, rm = _matmul_operands(tr, dst, stationary, moving, api)
    _check_matmul_dtypes(tr, st, mv, api)
    if dst.dtype != "float32" and not (tr.gen >= 4 and dst.dtype == "bfloat16"):
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}; the Tensor Engine writes float32 PSUM tiles"
            + (" (bfloat16 too on NeuronCore-v4)" if tr.gen < 4 else " or bfloat16")
        )
    acc = _psum_written(dst._s, rd) if accumulate is None else bool(accumulate)
    if tr.numerics:
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and Inf spread, as on v2
            prod = _flat(st).T.astype(np.float32) @ _flat(mv).astype(np.float32)
        old = _flat(dst) if acc else 0.0
        _put(dst, old + prod)
    _mark(dst._s, rd)
    tr.add(("matmul", _ref(dst, rd), _ref(st, rs), _ref(mv, rm), acc, 1, ()), api,
           dst._s, st._s, mv._s, sig=None if acc else _layout(dst, st, mv))  # fmt: skip
    return ret


def _transpose_mode(tr, dst, stationary, moving, accumulate, api: str) -> None:
    """``nc_matmul(..., is_transpose=True)`` on NeuronCore-v3+: the Tensor Engine's transpose
    mode passes ``stationary`` through to ``dst`` transposed, bit for bit (NaN and Inf kept),
    ``moving`` the identity that selects it (Trainium2 architecture guide): the same
    instruction as ``nc_transpose(engine=tensor)``, with its timing."""
    st = _tensor(stationary, "stationary", api)
    mv = _tensor(moving, "moving", api)
    rs = _where(st, _SBUF, "stationary", api)
    rm = _where(mv, _SBUF, "moving", api)
    k = rs[1] - rs[0]
    if rm[1] - rm[0] != k or rm[4] != k:
        raise HardwareRuleError(
            f"nisa.{api}(is_transpose=True): moving {mv.shape} must be the [{k}, {k}] identity "
            f"that transposes a stationary tile of {k} partitions"
        )
    if tr.numerics and not np.array_equal(_flat(mv), np.eye(k)):
        raise KernelArgumentError(
            f"nisa.{api}(is_transpose=True): moving is not an identity matrix; transpose mode "
            f"passes stationary through, so use nl.shared_identity_matrix({k}) (or a plain "
            f"matmul, is_transpose=False)"
        )
    if accumulate:
        raise KernelArgumentError(
            f"nisa.{api}(is_transpose=True) writes the transpose; it does not accumulate"
        )
    dst = _tensor(dst, "dst", api)
    if st._s.dtype.bits == 8 and st._s.dtype.kind == "float":
        raise NotModelledError(
            f"nisa.{api}(is_transpose=True) of an FP8 tile: NeuronCore-v3 writes 16-bit PSUM "
            f"elements with the upper 8 bits zero (Trainium2 guide), a layout trnlab does not "
            f"model; transpose a 16-bit copy"
        )
    if dst.dtype != st.dtype:
        raise FormatNotSupportedError(
            f"nisa.{api}(is_transpose=True): dst is {dst.dtype}, stationary {st.dtype}; "
            f"transpose mode writes the stationary tile's own dtype (a bf16 transpose gives "
            f"bf16 PSUM, the Trainium2 architecture guide): make dst {st.dtype}"
        )
    nc_transpose(dst=dst, data=st, engine=engine.tensor)


def _retargets(dst: NkiTensor, out) -> bool:
    """Whether PSUM view ``dst`` can take the last matmul's output region ``out`` in place:
    as many partitions, as many elements per partition, and contiguous."""
    rd = dst._region()
    return rd[1] - rd[0] == out[2] - out[1] and rd[4] == out[4] - out[3] and rd[3] - rd[2] == rd[4]


def _retarget_matmul(tr, dst: NkiTensor, fresh: NkiTensor, accumulate: bool = True) -> None:
    """Make the last recorded matmul (into ``fresh``, a new PSUM tile no one has read) write
    into ``dst`` instead, as the compiler does with the older NKI editions' forms:
    ``dst += nisa.nc_matmul(a, b)`` accumulates there, ``dst[...] = nisa.nc_matmul(a, b)``
    (``accumulate=False``) starts a new accumulation there, with no tile and copy between."""
    _, out, st, mv, _, packed, reads = tr.ops[-1]
    rd = dst._region()
    if not _retargets(dst, out):
        raise HardwareRuleError(
            f"{dst} += a matmul result of shape {fresh.shape}: the shapes differ"
        )
    acc = _psum_written(dst._s, rd) if accumulate else False
    if tr.numerics:
        _put(dst, (_flat(dst) if acc else 0.0) + _flat(fresh))
    _mark(dst._s, rd)
    fresh._s.first = fresh._s.last = -1  # never allocated: the compiler drops it
    dst._s.last = len(tr.ops) - 1
    if dst._s.first < 0:
        dst._s.first = dst._s.last
    tr.ops[-1] = ("matmul", _ref(dst, rd), st, mv, acc, packed, reads)
    tr.sigs[-1] = None  # it now writes into dst: never dropped as a repeat


def _e8m0(codes) -> np.ndarray:
    """The scales E8M0 codes stand for: 2^(code - 127), and NaN for code 255."""
    c = np.asarray(codes, np.float64)
    return np.where(c == 255, np.nan, np.exp2(c - 127.0))


def _mx_scale_rows(k: int, scale: NkiTensor, what: str, api: str) -> np.ndarray:
    """The row of ``scale`` holding the E8M0 scale of each of ``k`` partitions: one scale per
    8 partitions, in the 32-partition quadrant its group comes from (partition p's at row
    32*(p//32) + (p%32)//8 of the scale view: rows 0-3, 32-35, ...; for K <= 32, the compact
    [K/8, F] tile). A view that starts further in (``tile[4:, :]``) puts them at its offset,
    as the MX deep dive packs two tensors' scales in one tile."""
    p = np.arange(k)
    rows = 32 * (p // 32) + (p % 32) // 8
    need = int(rows[-1]) + 1
    if scale.shape[0] < need:
        raise HardwareRuleError(
            f"nisa.{api}: {what} {scale.shape} spans {scale.shape[0]} partitions; the scales of "
            f"K = {k} partitions go in their quadrants (rows 0-3, 32-35, ... of the view), so "
            f"it needs {need}"
            + (f" (or [{k // 8}, F] for K <= 32)" if k <= 32 else f": allocate [{k}, F]")
        )
    return rows


def _unpack_mx(x: NkiTensor, scale: NkiTensor, rows: np.ndarray) -> np.ndarray:
    """The logical [4K, F] matrix of an x4 tile [K, F] and its E8M0 scales at ``rows`` (see
    docs/nki.md: packed value j of partition p is contraction row j*K + p)."""
    k = x.shape[0]
    v = x._arr().reshape(k, -1, 4).astype(np.float64)  # [K, F, 4]
    codes = _flat(scale)
    sc = _e8m0(codes[rows])  # [K, F]
    v = v * sc[:, :, None]
    return np.concatenate([v[:, :, j] for j in range(4)], axis=0)  # [4K, F]


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):  # fmt: skip
    """MX matmul of NeuronCore-v4: x4-packed FP8/FP4 ``stationary`` and ``moving`` with their
    E8M0 scales, dequantised and multiplied in one Tensor Engine instruction (4x the
    contraction of a bf16 matmul per PE row)."""
    api = "nc_matmul_mx"
    tr = current()
    if tr.gen < 4:
        raise FormatNotSupportedError(
            f"nisa.{api}: MX matmul arrives with NeuronCore-v4 (trn3); this kernel is traced "
            f"for {tr.params.name} ({tr.params.chip})"
        )
    if tile_position or tile_size:
        raise option(api, "row tiling (tile_position / tile_size)", "the whole PE array is")
    dst, st, mv, rd, rs, rm = _matmul_operands(tr, dst, stationary, moving, api)
    for what, x in (("stationary", st), ("moving", mv)):
        if x._s.dtype.packed != 4:
            raise FormatNotSupportedError(
                f"nisa.{api}: {what} is {x.dtype}; it takes float8_e5m2_x4, float8_e4m3fn_x4 or "
                f"float4_e2m1fn_x4"
            )
    k = rs[1] - rs[0]
    if k % 32:
        raise HardwareRuleError(f"nisa.{api}: K = {k} partitions must be a multiple of 32")
    if rs[4] % 2:
        raise HardwareRuleError(f"nisa.{api}: the stationary free size {rs[4]} must be even")
    scales = []
    for what, sc, x in (("stationary_scale", stationary_scale, st),
                        ("moving_scale", moving_scale, mv)):  # fmt: skip
        sc = _tensor(sc, what, api)
        r = _where(sc, _SBUF, what, api)
        if sc.dtype not in ("uint8", "float8_e8m0fnu"):
            raise FormatNotSupportedError(f"nisa.{api}: {what} must be float8_e8m0fnu or uint8")
        if r[4] != math.prod(x.shape[1:]):
            raise HardwareRuleError(
                f"nisa.{api}: {what} {sc.shape} must hold F = {math.prod(x.shape[1:])} scales "
                f"per partition, one per packed element of {what.split('_')[0]}"
            )
        scales.append((sc, r, _mx_scale_rows(k, sc, what, api)))
    if dst.dtype not in ("float32", "bfloat16"):
        raise FormatNotSupportedError(f"nisa.{api}: dst must be float32 or bfloat16")
    acc = _psum_written(dst._s, rd) if accumulate is None else bool(accumulate)
    if tr.numerics:
        a = _unpack_mx(st, scales[0][0], scales[0][2])
        b = _unpack_mx(mv, scales[1][0], scales[1][2])
        prod = (a.T @ b).astype(np.float32)
        _put(dst, (_flat(dst) if acc else 0.0) + prod)
    _mark(dst._s, rd)
    reads = tuple(_ref(sc, r) for sc, r, _ in scales)  # the scales: read like the operands
    tr.add(("matmul", _ref(dst, rd), _ref(st, rs), _ref(mv, rm), acc, 4, reads), api,
           dst._s, st._s, mv._s, *(sc._s for sc, _, _ in scales))  # fmt: skip


#: Largest unbiased exponent of each MXFP8 element type (quantize_mx's E_max).
_MX_EMAX = {"fp8_e4m3fn": 8, "fp8_e5m2": 15}


def quantize_mx(dst, src, dst_scale, name=None):
    """Vector engine of NeuronCore-v4: quantize a bf16/fp16 tile to x4-packed MXFP8 with one
    E8M0 scale per 8 partitions x 4 elements, laid out for ``nc_matmul_mx`` (docs/nki.md).
    The scale is NKI's documented one, twice OCP's sample: 2^(floor(log2 amax) - (E_max - 1)),
    2^-127 for an all-zero group."""
    api = "quantize_mx"
    tr = current()
    if tr.gen < 4:
        raise FormatNotSupportedError(
            f"nisa.{api}: MX quantization arrives with NeuronCore-v4 (trn3); this kernel is "
            f"traced for {tr.params.name} ({tr.params.chip})"
        )
    dst, src, sc = (
        _tensor(dst, "dst", api),
        _tensor(src, "src", api),
        _tensor(dst_scale, "dst_scale", api),
    )
    rd, rs, rc = (
        _where(t, _SBUF, w, api) for t, w in ((dst, "dst"), (src, "src"), (sc, "dst_scale"))
    )
    for t, r, w in ((dst, rd, "dst"), (src, rs, "src"), (sc, rc, "dst_scale")):
        if r[3] - r[2] != r[4]:
            raise option(api, f"a strided {w} view {t}", "contiguous free ranges are")
    if src.dtype not in ("bfloat16", "float16"):
        raise FormatNotSupportedError(
            f"nisa.{api}: src is {src.dtype}; it must be bfloat16 or float16"
        )
    if dst._s.dtype.packed != 4 or dst._s.dtype.element not in _MX_EMAX:
        raise FormatNotSupportedError(
            f"nisa.{api}: dst is {dst.dtype}; it must be float8_e5m2_x4 or float8_e4m3fn_x4 "
            f"(quantize_mx makes MXFP8 only; FP4 data comes quantized from the host)"
        )
    if sc.dtype not in ("uint8", "float8_e8m0fnu"):
        raise FormatNotSupportedError(f"nisa.{api}: dst_scale must be float8_e8m0fnu or uint8")
    p, f = rs[1] - rs[0], rs[4]
    if p % 32 or p > tr.pmax:
        raise HardwareRuleError(
            f"nisa.{api}: src spans {p} partitions; it must be a multiple of 32, at most {tr.pmax}"
        )
    if f % 4:
        raise HardwareRuleError(f"nisa.{api}: src free size {f} must be a multiple of 4")
    if rd[1] - rd[0] != p or rd[4] != f // 4:
        raise HardwareRuleError(
            f"nisa.{api}: dst {dst.shape} must be [{p}, {f // 4}] (four values per element)"
        )
    if rc[4] != f // 4:
        raise HardwareRuleError(
            f"nisa.{api}: dst_scale {sc.shape} must hold {f // 4} scales per partition (one per "
            f"element of dst)"
        )
    rows = _mx_scale_rows(p, sc, "dst_scale", api)[::8]  # one row per group of 8 partitions
    if tr.numerics:
        v = _flat(src).astype(np.float64)  # [P, F]
        groups = np.abs(v).reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3))  # [P/8, F/4]
        finite = np.isfinite(groups)
        _, e = np.frexp(np.where(finite, groups, 1.0))  # m * 2^e, m in [0.5, 1): log2 -> e - 1
        # an assumption below code 0 (a group under 2^-(127 - E_max + 1)): the scale saturates;
        # a group holding a NaN or an infinity gets the NaN scale (code 255), as OCP's does
        code = np.where(
            groups > 0, np.maximum(e - 1 - (_MX_EMAX[dst._s.dtype.element] - 1) + 127, 0), 0
        )
        code = np.where(finite, code, 255)
        scale = _e8m0(code)
        q = v / np.repeat(np.repeat(scale, 8, axis=0), 4, axis=1)
        _put(dst, q.reshape(p, f // 4, 4))
        codes = _flat(sc).copy()
        codes[rows] = code
        _put(sc, codes)
    _record(tr, "tensor_scalar", "vector", dst, rd, [(src, rs)], api, elements=f)
    # the scales come out of the same instruction: recorded as a short read-out after it
    _record(tr, "copy", "vector", sc, rc, [(dst, rd)], api, elements=1)


def nc_transpose(dst=None, data=None, engine=engine.unknown, name=None):
    """Transpose partitions and free elements: on the Tensor Engine (SBUF -> PSUM, up to
    128 x 128) or the Vector engine (up to 32 x 32). With no engine, tiles up to 32 x 32 go
    to the Vector engine, larger ones to the Tensor Engine. Older form: ``nc_transpose(data)``
    returns a new PSUM tile."""
    api = "nc_transpose"
    tr = current()
    ret = None
    if data is None:
        data, dst = dst, None
    if dst is None:
        data = _tensor(data, "data", api)
        dst = ret = _new((math.prod(data.shape[1:]), data.shape[0]), data.dtype, MemoryRegion.psum)
    dst = _tensor(dst, "dst", api)
    data = _tensor(data, "data", api)
    rd = _where(dst, _ON_CHIP, "dst", api)
    r = _where(data, _ON_CHIP, "data", api)
    parts, free = r[1] - r[0], r[4]
    small = parts <= 32 and free <= 32
    eng = _engine(engine, ("tensor", "vector"), "vector" if small else "tensor", api)
    if dst.dtype != data.dtype:
        raise KernelArgumentError(
            f"nisa.{api}: dst is {dst.dtype} and data {data.dtype}; a transpose keeps the dtype"
        )
    if rd[1] - rd[0] != free or rd[4] != parts:
        raise HardwareRuleError(f"nisa.{api}: dst {dst.shape} must be [{free}, {parts}]")
    if eng == "tensor":
        _where(data, _SBUF, "data (Tensor Engine)", api)
        _where(dst, _PSUM, "dst (Tensor Engine)", api)
        if free > tr.params.stationary_free_max:
            raise TileTooLargeError(
                f"nisa.{api}: data free size {free} exceeds {tr.params.stationary_free_max} "
                f"(the Tensor Engine transposes up to 128 x 128)"
            )
    elif parts > 32 or free > 32:
        raise TileTooLargeError(
            f"nisa.{api}: the Vector engine transposes up to 32 x 32; data is {parts} x {free}"
        )
    if tr.numerics:
        _put(dst, _flat(data).T, data._s.dtype)
    if eng == "tensor":
        tr.add(("transpose", _ref(dst, rd), _ref(data, r)), api, dst._s, data._s,
               sig=_layout(dst, data))  # fmt: skip
    else:
        _record(tr, "copy", "vector", dst, rd, [(data, r)], api, sig=("transpose",))
    return ret
