"""The kernel API: a context that allocates tiles, checks the hardware rules, records
instructions (with their dependencies) and, unless timing only, executes their numerics.

A kernel is a plain Python function ``kernel(ctx, a, b, c, ...)`` receiving HBM tensors and a
:class:`KernelContext`. The names follow the hardware (and NKI's concepts, not its API):
SBUF and PSUM tiles ``[partition, free]``, DMA load/store, a Tensor Engine matmul of a
*stationary* tile ``[K, M]`` against a *moving* tile ``[K, N]`` into PSUM ``[M, N]``,
Scalar-engine activation ``f(x * scale + bias)``, Vector-engine elementwise ops and reductions,
GpSimd ops, and copies with a cast.

Buffers are explicit: a tile is one buffer; writing it again waits for every earlier reader
of the overlapped region (write-after-read), so a kernel double-buffers by allocating two tiles
and alternating. Dependencies are tracked on rectangular regions of tiles and HBM tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import _program as P
from ._errors import (
    FormatNotSupportedError,
    HardwareRuleError,
    OperandPlacementError,
    PsumBankOverflowError,
    SbufCapacityError,
    TileTooLargeError,
    UnwrittenReadError,
)
from ._params import CoreParams
from ._tiles import HBMTensor, HBMView, Tile, View

__all__ = ["ACTIVATIONS", "KernelContext"]


def _gelu(x):
    # tanh approximation (Hendrycks & Gimpel 2016), the form activation tables commonly use.
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


#: Scalar-engine activation functions f in f(x * scale + bias).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": _gelu,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "square": np.square,
}

_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "divide": np.divide,
}
_REDUCE = {"add": np.sum, "maximum": np.max, "minimum": np.min}
_COPY_ENGINES = {"vector": P.VECTOR, "scalar": P.SCALAR, "gpsimd": P.GPSIMD}


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _contains(outer, inner) -> bool:
    return (
        outer[0] <= inner[0]
        and inner[1] <= outer[1]
        and outer[2] <= inner[2]
        and inner[3] <= outer[3]
    )


def _quantize(x: np.ndarray, fmt: str, axis: int = -1) -> np.ndarray:
    """Values of ``x`` rounded to ``fmt`` (float32), through trnlab.formats."""
    if fmt == "fp32":
        return np.asarray(x, np.float32)
    from trnlab import formats  # lazy: keeps `import trnlab.core` light

    return formats.quantize(x, fmt, axis=axis)


def _catalog_dtype(fmt: str) -> str:
    try:
        from trnlab import formats

        return formats.catalog_dtype(fmt)
    except (ImportError, AttributeError):  # pragma: no cover - formats present
        from trnlab import catalog

        return catalog.dtype_name(fmt)


class KernelContext:
    """Records a kernel's instructions for one NeuronCore and runs their numerics.

    Made by :func:`trnlab.core.run`; a kernel receives it as its first argument.

    Parameters
    ----------
    params : CoreParams
        The core's figures (limits checked here, costs charged by the scheduler).
    numerics : bool
        Execute the values (False: timing only, tiles hold no data).
    """

    def __init__(self, params: CoreParams, numerics: bool = True):
        self.params = params
        self.numerics = bool(numerics)
        self._rows: list[tuple] = []
        self._deps: list[list[int]] = []
        self._engines: list[int] = []
        self._tiles: list[Tile] = []
        self._tile_alloc: dict[int, int] = {}
        self._tile_free: dict[int, int] = {}
        self._tensors: list[HBMTensor] = []
        self._hbm_access: dict[int, tuple[list, list]] = {}
        self._sbuf_live: dict[int, tuple[int, int]] = {}  # tile id -> (offset, bytes)
        self._psum_banks: list[int] = [-1] * int(params.psum_banks)
        self._dma_next = 0
        self._last_stationary: tuple | None = None
        self._versions: dict[int, int] = {}

    # ------------------------------------------------------------------------------------------
    # Memory
    # ------------------------------------------------------------------------------------------
    def hbm(
        self, name: str, shape, fmt: str = "fp32", data=None, written: bool | None = None
    ) -> HBMTensor:
        """An HBM tensor. ``data`` (if given) is rounded to ``fmt`` as a host-side cast would;
        ``written`` (default: data given) says whether it holds an input."""
        values = None
        written = data is not None if written is None else written
        if self.numerics:
            if written and data is None:
                raise ValueError(f"HBM input {name!r} needs values when numerics are on")
            if data is not None:
                values = _quantize(np.asarray(data, np.float32), fmt, axis=0)
            else:
                values = np.zeros(shape, np.float32)
        t = HBMTensor(len(self._tensors), name, shape, fmt, values, written=written)
        self._tensors.append(t)
        self._hbm_access[t.id] = ([], [])
        return t

    def sbuf(self, shape, fmt: str = "bf16", name: str | None = None) -> Tile:
        """Allocate an SBUF tile ``[partitions, free]`` of format ``fmt``.

        Raises
        ------
        TileTooLargeError
            More partitions than the core has (128).
        SbufCapacityError
            Not enough bytes left in each partition for ``free x bits / 8`` more.
        """
        p = self.params
        parts, free = int(shape[0]), int(shape[1])
        name = name or f"sbuf{len(self._tiles)}"
        if parts > p.sbuf_partitions:
            raise TileTooLargeError(
                f"SBUF tile {name!r} asks for {parts} partitions; {p.name} has "
                f"{p.sbuf_partitions}. Put the dimension you reduce over or work in parallel on "
                f"partitions in chunks of <= {p.sbuf_partitions}, and the rest on the free dimension."
            )
        probe = Tile(-1, name, "sbuf", (1, 1), fmt, 0, 0, False)
        need = math.ceil(free * probe.bits / 8)
        offset = self._fit_sbuf(name, need)
        tile = Tile(len(self._tiles), name, "sbuf", (parts, free), fmt, offset, need, self.numerics)
        self._sbuf_live[tile.id] = (offset, need)
        return self._register(tile)

    def psum(self, shape, name: str | None = None) -> Tile:
        """Allocate a PSUM tile ``[partitions, free]`` of fp32 accumulators in one bank.

        Raises
        ------
        PsumBankOverflowError
            More than one bank (2 KiB = 512 fp32 per partition) asked, or all 8 banks taken.
        """
        p = self.params
        parts, free = int(shape[0]), int(shape[1])
        name = name or f"psum{len(self._tiles)}"
        if parts > p.sbuf_partitions:
            raise TileTooLargeError(
                f"PSUM tile {name!r} asks for {parts} partitions; {p.name} has {p.sbuf_partitions}."
            )
        need = free * 4
        bank = p.psum_bank_bytes
        if need > bank:
            raise PsumBankOverflowError(
                f"PSUM tile {name!r} needs {need} B per partition ({free} fp32 accumulators) but a "
                f"PSUM bank of {p.name} holds {bank} B ({bank // 4} fp32) per partition. Split the "
                f"free dimension into tiles of <= {bank // 4} (one bank each)."
            )
        try:
            b = self._psum_banks.index(-1)
        except ValueError:
            owners = ", ".join(self._tiles[t].name for t in self._psum_banks)
            raise PsumBankOverflowError(
                f"PSUM tile {name!r}: all {p.psum_banks} PSUM banks of {p.name} are taken "
                f"({owners}). Free a PSUM tile (ctx.free) once its result is copied to SBUF, or "
                f"reuse one: at most {p.psum_banks} accumulation groups can be in flight."
            ) from None
        tile = Tile(len(self._tiles), name, "psum", (parts, free), "fp32", b, need, self.numerics)
        self._psum_banks[b] = tile.id
        return self._register(tile)

    def free(self, *tiles: Tile) -> None:
        """Release tiles; their SBUF bytes or PSUM bank can be allocated again."""
        for t in tiles:
            if t.freed:
                continue
            t.freed = True
            self._tile_free[t.id] = len(self._rows)
            if t.space == "sbuf":
                self._sbuf_live.pop(t.id, None)
            else:
                self._psum_banks[t.offset] = -1

    def _register(self, tile: Tile) -> Tile:
        self._tiles.append(tile)
        self._tile_alloc[tile.id] = len(self._rows)
        self._versions[tile.id] = 0
        return tile

    def _fit_sbuf(self, name: str, need: int) -> int:
        cap = int(self.params.sbuf_usable_partition_bytes)
        used = sorted(self._sbuf_live.values())
        in_use = sum(b for _, b in used)
        at = 0
        for off, size in used:  # first fit
            if off - at >= need:
                return at
            at = max(at, off + size)
        if cap - at >= need:
            return at
        biggest = sorted(self._sbuf_live.items(), key=lambda kv: -kv[1][1])[:3]
        who = ", ".join(f"{self._tiles[t].name} {b} B" for t, (_, b) in biggest)
        frag = (
            " (enough in total, but not in one piece: free tiles in a different order)"
            if cap - in_use >= need
            else ""
        )
        raise SbufCapacityError(
            f"SBUF tile {name!r} needs {need} B per partition, but {self.params.name} has "
            f"{cap} B usable per partition and {in_use} B are in use by {len(used)} tiles "
            f"(largest: {who}); {cap - in_use} B available{frag}. Use smaller blocks, fewer "
            f"buffers, or free tiles you no longer need."
        )

    # ------------------------------------------------------------------------------------------
    # Recording
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _view(x, what: str) -> View:
        if isinstance(x, Tile):
            x = x.full
        if not isinstance(x, View):
            raise OperandPlacementError(
                f"{what} must be an SBUF or PSUM tile (or a view of one), not {type(x).__name__}; "
                f"HBM data reaches the engines only through a DMA load into SBUF."
            )
        if x.tile.freed:
            raise HardwareRuleError(f"{what}: tile {x.tile.name!r} was freed; allocate a new one.")
        return x

    @staticmethod
    def _hview(x, what: str) -> HBMView:
        if isinstance(x, HBMTensor):
            x = x.full
        if not isinstance(x, HBMView):
            raise OperandPlacementError(f"{what} must be an HBM tensor or a slice of one")
        return x

    def _record(self, row: dict, engine: int, reads=(), writes=(), hreads=(), hwrites=()) -> int:
        i = len(self._rows)
        deps: set[int] = set()
        for v in reads:
            t, reg = v.tile, v.region
            if not t.fully_written and not t.written_mask[reg[0] : reg[1], reg[2] : reg[3]].all():
                raise UnwrittenReadError(
                    f"instruction #{i} ({P.OPS[row['op']]}) reads {t.space.upper()} tile "
                    f"{t.name!r}[{reg[0]}:{reg[1]}, {reg[2]}:{reg[3]}], part of which nothing has "
                    f"written yet. Load it (DMA), compute it, or memset it before reading."
                )
            deps.update(w[4] for w in t.writes if _overlap(w, reg))
        for v in writes:
            t, reg = v.tile, v.region
            deps.update(w[4] for w in t.writes if _overlap(w, reg))
            deps.update(r[4] for r in t.reads if _overlap(r, reg))
        for h in hreads:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, _ = self._hbm_access[h.tensor.id]
            if not h.tensor.written and not any(_overlap(w, reg) for w in w_list):
                raise UnwrittenReadError(
                    f"instruction #{i} loads HBM tensor {h.tensor.name!r}[{reg[0]}:{reg[1]}, "
                    f"{reg[2]}:{reg[3]}], which no instruction has stored yet."
                )
            deps.update(w[4] for w in w_list if _overlap(w, reg))
        for h in hwrites:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, r_list = self._hbm_access[h.tensor.id]
            deps.update(w[4] for w in w_list if _overlap(w, reg))
            deps.update(r[4] for r in r_list if _overlap(r, reg))
        # Bookkeeping: a later access on the same in-order engine subsumes an earlier one.
        for v in reads:
            t, reg = v.tile, v.region
            t.reads = [r for r in t.reads if not (r[5] == engine and _contains(reg, r))]
            t.reads.append((*reg, i, engine))
        for v in writes:
            t, reg = v.tile, v.region
            t.writes = [w for w in t.writes if not _contains(reg, w)]
            t.writes.append((*reg, i, engine))
            t.reads = [r for r in t.reads if not _contains(reg, r)]
            if not t.fully_written:
                t.written_mask[reg[0] : reg[1], reg[2] : reg[3]] = True
                t.fully_written = bool(t.written_mask.all())
            self._versions[t.id] += 1
        for h in hreads:  # appended only: HBM inputs are read often and rarely written
            self._hbm_access[h.tensor.id][1].append((h.r0, h.r1, h.c0, h.c1, i, engine))
        for h in hwrites:
            reg = (h.r0, h.r1, h.c0, h.c1)
            w_list, r_list = self._hbm_access[h.tensor.id]
            w_list[:] = [w for w in w_list if not _contains(reg, w)]
            w_list.append((*reg, i, engine))
            r_list[:] = [r for r in r_list if not _contains(reg, r)]
        # One dependency per engine is enough: engines (and DMA queues) run in order.
        last: dict[int, int] = {}
        for d in deps:
            e = self._engines[d]
            if d > last.get(e, -1):
                last[e] = d
        self._deps.append(sorted(last.values()))
        self._engines.append(engine)
        self._rows.append(
            (
                row["op"],
                engine,
                row.get("out", -1),
                row.get("in0", -1),
                row.get("in1", -1),
                row.get("hbm", -1),
                row.get("partitions", 0),
                row.get("free", 0),
                row.get("k", 0),
                row.get("m", 0),
                row.get("n_inputs", 0),
                row.get("bits", 0.0),
                row.get("rate", 0.0),
                row.get("dtype", -1),
                row.get("reload", 0),
                row.get("bytes", 0),
                row.get("flops", 0.0),
                row.get("out_region", (-1, -1, -1, -1)),
                row.get("in0_region", (-1, -1, -1, -1)),
                row.get("in1_region", (-1, -1, -1, -1)),
                row.get("hbm_region", (-1, -1, -1, -1)),
            )
        )
        return i

    def _dma_queue(self, queue: int | None, store: bool = False) -> int:
        """Default queues: loads round-robin over all queues but the last, stores on the last
        (queues run in order, so a store waiting for compute would hold up the loads behind it)."""
        n = int(self.params.dma_engines)
        if queue is None:
            if store:
                return P.FIRST_DMA + n - 1
            queue = self._dma_next
            self._dma_next = (self._dma_next + 1) % max(1, n - 1)
        elif not 0 <= queue < n:
            raise HardwareRuleError(
                f"DMA queue {queue} does not exist; {self.params.name} has 0..{n - 1}"
            )
        return P.FIRST_DMA + queue

    # ------------------------------------------------------------------------------------------
    # DMA
    # ------------------------------------------------------------------------------------------
    def load(self, dst, src, queue: int | None = None) -> int:
        """DMA ``src`` (HBM rows x cols) into SBUF ``dst`` (rows onto partitions).

        A format change on the way is a cast (the values are rounded to the tile's format).
        """
        d = self._view(dst, "load destination")
        s = self._hview(src, "load source")
        if d.tile.space != "sbuf":
            raise OperandPlacementError(
                f"load into {d.tile.space.upper()} tile {d.tile.name!r}: DMA writes SBUF; only the "
                f"Tensor Engine writes PSUM. Load into an SBUF tile."
            )
        if d.shape != s.shape:
            raise HardwareRuleError(
                f"load: SBUF region {d.shape} and HBM region {s.shape} differ in shape"
            )
        nbytes = math.ceil(s.shape[0] * s.shape[1] * s.tensor.bits / 8)
        row = dict(
            op=P.DMA_LOAD,
            out=d.tile.id,
            hbm=s.tensor.id,
            partitions=d.partitions,
            free=d.free,
            bits=s.tensor.bits,
            bytes=nbytes,
            out_region=d.region,
            hbm_region=(s.r0, s.r1, s.c0, s.c1),
        )
        i = self._record(row, self._dma_queue(queue), writes=(d,), hreads=(s,))
        if self.numerics:
            x = s.tensor.data[s.r0 : s.r1, s.c0 : s.c1]
            d.set(x if d.tile.fmt == s.tensor.fmt else _quantize(x, d.tile.fmt, axis=0))
        return i

    def store(self, dst, src, queue: int | None = None) -> int:
        """DMA SBUF ``src`` to HBM ``dst`` (rounded to the tensor's format if it differs)."""
        d = self._hview(dst, "store destination")
        s = self._view(src, "store source")
        if s.tile.space != "sbuf":
            raise OperandPlacementError(
                f"store from PSUM tile {s.tile.name!r}: copy it to SBUF first "
                f"(ctx.copy(sbuf_tile, psum_tile), a cast on the Vector or Scalar engine)."
            )
        if d.shape != s.shape:
            raise HardwareRuleError(
                f"store: HBM region {d.shape} and SBUF region {s.shape} differ in shape"
            )
        nbytes = math.ceil(d.shape[0] * d.shape[1] * d.tensor.bits / 8)
        row = dict(
            op=P.DMA_STORE,
            in0=s.tile.id,
            hbm=d.tensor.id,
            partitions=s.partitions,
            free=s.free,
            bits=d.tensor.bits,
            bytes=nbytes,
            in0_region=s.region,
            hbm_region=(d.r0, d.r1, d.c0, d.c1),
        )
        i = self._record(row, self._dma_queue(queue, store=True), reads=(s,), hwrites=(d,))
        if self.numerics:
            x = s.get()
            if s.tile.fmt != d.tensor.fmt:
                x = _quantize(x, d.tensor.fmt, axis=0)
            d.tensor.data[d.r0 : d.r1, d.c0 : d.c1] = x
        return i

    # ------------------------------------------------------------------------------------------
    # Tensor Engine
    # ------------------------------------------------------------------------------------------
    def _tensor_rate(self, fmt: str, what: str) -> tuple[float, int]:
        from trnlab.catalog import DTYPES

        p = self.params
        try:
            d = _catalog_dtype(fmt)
        except ValueError as e:
            raise FormatNotSupportedError(f"{what}: {e}") from None
        if d not in p.tensor_rate:
            have = ", ".join(p.tensor_rate)
            hint = (
                " OCP MX formats arrived with NeuronCore-v4 (Trainium3, trn3)."
                if d.startswith("mx")
                else ""
            )
            raise FormatNotSupportedError(
                f"{what}: the Tensor Engine of {p.name} ({p.chip}) has no {d} path ({fmt} tile)."
                f"{hint} It multiplies {have}; cast the tile (ctx.copy into a tile of one of "
                f"those formats) or pick a chip that has {d}."
            )
        return p.tensor_rate[d], DTYPES.index(d)

    def matmul(self, out, stationary, moving, accumulate: bool = False) -> int:
        """Tensor Engine: ``out[M, N] (+)= stationary[K, M].T @ moving[K, N]`` in fp32 PSUM.

        The contraction runs over partitions (K <= 128). ``accumulate=False`` starts an
        accumulation group (overwrites), ``True`` adds to what the PSUM region holds.

        Raises
        ------
        OperandPlacementError
            Inputs not in SBUF, or output not in PSUM.
        TileTooLargeError
            K > 128 partitions, stationary free M > 128, or moving free N > 512.
        FormatNotSupportedError
            The input format has no Tensor Engine path on this generation.
        """
        p = self.params
        o = self._view(out, "matmul output")
        st = self._view(stationary, "matmul stationary operand")
        mv = self._view(moving, "matmul moving operand")
        for v, what in ((st, "stationary"), (mv, "moving")):
            if v.tile.space != "sbuf":
                raise OperandPlacementError(
                    f"matmul {what} operand {v.tile.name!r} is in {v.tile.space.upper()}; the "
                    f"Tensor Engine reads its inputs from SBUF. Copy it to an SBUF tile first."
                )
        if o.tile.space != "psum":
            raise OperandPlacementError(
                f"matmul output {o.tile.name!r} is in SBUF; the Tensor Engine writes PSUM. "
                f"Allocate the output with ctx.psum(...) and copy it to SBUF afterwards."
            )
        k, m = st.shape
        k2, n = mv.shape
        if k > p.pe_rows or k2 > p.pe_rows:
            raise TileTooLargeError(
                f"matmul contracts over {max(k, k2)} partitions; the {p.pe_rows}x{p.pe_cols} PE "
                f"array of {p.name} takes K <= {p.pe_rows}. Split K and accumulate in PSUM."
            )
        if m > p.stationary_free_max:
            raise TileTooLargeError(
                f"stationary tile free size {m} exceeds {p.stationary_free_max} on {p.name} "
                f"(one column of PEs per output row); split M into tiles of <= {p.stationary_free_max}."
            )
        if n > p.moving_free_max:
            raise TileTooLargeError(
                f"moving tile free size {n} exceeds {p.moving_free_max} fp32 per PSUM bank on "
                f"{p.name}; split N into tiles of <= {p.moving_free_max}."
            )
        if k != k2:
            raise HardwareRuleError(
                f"matmul: stationary has K={k} partitions but moving has {k2}; both must hold the "
                f"same contraction rows on the same partitions."
            )
        if o.shape != (m, n):
            raise HardwareRuleError(
                f"matmul output region is {o.shape}; it must be [M, N] = {(m, n)}"
            )
        r1, d1 = self._tensor_rate(st.tile.fmt, "matmul stationary")
        r2, d2 = self._tensor_rate(mv.tile.fmt, "matmul moving")
        rate, dt = (r1, d1) if r1 <= r2 else (r2, d2)
        key = (st.tile.id, st.region, self._versions[st.tile.id])
        reload = int(key != self._last_stationary)
        self._last_stationary = key
        row = dict(
            op=P.MATMUL,
            out=o.tile.id,
            in0=st.tile.id,
            in1=mv.tile.id,
            partitions=k,
            free=n,
            k=k,
            m=m,
            bits=st.tile.bits,
            rate=rate,
            dtype=dt,
            reload=reload,
            flops=2.0 * k * m * n,
            out_region=o.region,
            in0_region=st.region,
            in1_region=mv.region,
        )
        reads = (st, mv, o) if accumulate else (st, mv)
        i = self._record(row, P.TENSOR, reads=reads, writes=(o,))
        if self.numerics:
            prod = st.get().T @ mv.get()  # float32 products, fp32 accumulation
            o.set(o.get() + prod if accumulate else prod)
        return i

    def transpose(self, out, src) -> int:
        """Tensor Engine transpose: ``out[F, P] = src[P, F].T`` into PSUM (a matmul against
        an identity matrix, so it costs a matmul with N = P)."""
        p = self.params
        o = self._view(out, "transpose output")
        s = self._view(src, "transpose input")
        if s.tile.space != "sbuf" or o.tile.space != "psum":
            raise OperandPlacementError(
                "transpose goes through the Tensor Engine: input in SBUF, output in PSUM "
                f"(got {s.tile.space.upper()} -> {o.tile.space.upper()})."
            )
        parts, free = s.shape
        if free > p.stationary_free_max:
            raise TileTooLargeError(
                f"transpose input free size {free} exceeds {p.stationary_free_max} on {p.name} "
                f"(it is the stationary operand); transpose blocks of <= {p.stationary_free_max}."
            )
        if o.shape != (free, parts):
            raise HardwareRuleError(
                f"transpose output region is {o.shape}; it must be {(free, parts)}"
            )
        rate, dt = self._tensor_rate(s.tile.fmt, "transpose input")
        self._last_stationary = None
        row = dict(
            op=P.TRANSPOSE,
            out=o.tile.id,
            in0=s.tile.id,
            partitions=parts,
            free=parts,
            k=parts,
            m=free,
            bits=s.tile.bits,
            rate=rate,
            dtype=dt,
            reload=1,
            flops=0.0,
            out_region=o.region,
            in0_region=s.region,
        )
        i = self._record(row, P.TENSOR, reads=(s,), writes=(o,))
        if self.numerics:
            o.set(s.get().T)
        return i

    # ------------------------------------------------------------------------------------------
    # Vector, Scalar and GpSimd engines
    # ------------------------------------------------------------------------------------------
    def _elementwise(self, op, engine, out, ins, fn, what) -> int:
        o = self._view(out, f"{what} output")
        views = [self._view(x, f"{what} input") for x in ins]
        if o.tile.space == "psum":
            raise OperandPlacementError(
                f"{what} writes PSUM tile {o.tile.name!r}; only the Tensor Engine writes PSUM. "
                f"Write an SBUF tile."
            )
        if engine == P.GPSIMD and any(v.tile.space == "psum" for v in views):
            raise OperandPlacementError(
                f"{what} on GpSimd reads PSUM; GpSimd has no PSUM port. Use the Vector or Scalar engine."
            )
        for v in views:
            if v.partitions != o.partitions or (op != P.REDUCE and v.free not in (o.free, 1)):
                raise HardwareRuleError(
                    f"{what}: input region {v.shape} does not match output {o.shape}"
                )
        row = dict(
            op=op,
            out=o.tile.id,
            partitions=o.partitions,
            free=max(v.free for v in views) if views else o.free,
            n_inputs=len(views),
            bits=max((v.tile.bits for v in views), default=o.tile.bits),
            out_region=o.region,
        )
        if views:
            row.update(in0=views[0].tile.id, in0_region=views[0].region)
        if len(views) > 1:
            row.update(in1=views[1].tile.id, in1_region=views[1].region)
        i = self._record(row, engine, reads=views, writes=(o,))
        if self.numerics:
            o.set(_quantize(np.asarray(fn(*[v.get() for v in views]), np.float32), o.tile.fmt))
        return i

    def activation(self, out, src, func: str = "identity", scale: float = 1.0, bias=None) -> int:
        """Scalar engine: ``out = func(src * scale + bias)``; ``bias`` is a number or a
        per-partition ``[P, 1]`` SBUF view. Reads SBUF or PSUM, writes SBUF (with a cast)."""
        if func not in ACTIVATIONS:
            raise ValueError(f"unknown activation {func!r}; known: {', '.join(ACTIVATIONS)}")
        f = ACTIVATIONS[func]
        ins = [src]
        if bias is not None and not isinstance(bias, int | float):
            ins.append(bias)

            def fn(x, b):
                return f(x * np.float32(scale) + b)

        else:
            b0 = np.float32(bias or 0.0)

            def fn(x):
                return f(x * np.float32(scale) + b0)

        return self._elementwise(P.ACTIVATION, P.SCALAR, out, ins, fn, f"activation {func}")

    def tensor_tensor(self, out, a, b, op: str = "add") -> int:
        """Vector engine: ``out = a <op> b`` elementwise (add, subtract, multiply, maximum, ...)."""
        if op not in _BINARY:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
        return self._elementwise(
            P.TENSOR_TENSOR, P.VECTOR, out, [a, b], _BINARY[op], f"tensor_tensor {op}"
        )

    def tensor_scalar(self, out, src, op: str = "multiply", value: float = 1.0) -> int:
        """Vector engine: ``out = src <op> value``."""
        if op not in _BINARY:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
        v = np.float32(value)
        return self._elementwise(
            P.TENSOR_SCALAR,
            P.VECTOR,
            out,
            [src],
            lambda x: _BINARY[op](x, v),
            f"tensor_scalar {op}",
        )

    def reduce(self, out, src, op: str = "add") -> int:
        """Vector engine: reduce ``src[P, F]`` along the free dimension into ``out[P, 1]``."""
        if op not in _REDUCE:
            raise ValueError(f"unknown reduction {op!r}; known: {', '.join(_REDUCE)}")
        o = self._view(out, "reduce output")
        if o.free != 1:
            raise HardwareRuleError(f"reduce output must be [P, 1], got {o.shape}")
        return self._elementwise(
            P.REDUCE,
            P.VECTOR,
            out,
            [src],
            lambda x: _REDUCE[op](x, axis=1, keepdims=True),
            f"reduce {op}",
        )

    def copy(self, out, src, engine: str = "vector") -> int:
        """Copy ``src`` to SBUF ``out`` with a cast to its format: the way out of PSUM.
        ``engine`` is ``"vector"``, ``"scalar"`` or ``"gpsimd"`` (GpSimd cannot read PSUM)."""
        if engine not in _COPY_ENGINES:
            raise ValueError(
                f"copy engine must be one of {', '.join(_COPY_ENGINES)}, not {engine!r}"
            )
        return self._elementwise(
            P.COPY, _COPY_ENGINES[engine], out, [src], lambda x: x, f"copy ({engine})"
        )

    def memset(self, out, value: float = 0.0, engine: str = "vector") -> int:
        """Fill an SBUF region with ``value`` (Vector or GpSimd engine)."""
        if engine not in ("vector", "gpsimd"):
            raise ValueError(f"memset runs on 'vector' or 'gpsimd', not {engine!r}")
        o = self._view(out, "memset output")
        v = np.float32(value)
        return self._elementwise(
            P.MEMSET,
            _COPY_ENGINES[engine],
            out,
            [],
            lambda: np.full(o.shape, v, np.float32),
            "memset",
        )

    def gpsimd(self, out, a, b=None, op: str = "add") -> int:
        """GpSimd engine (8 general-purpose SIMD cores): elementwise ``a <op> b`` (or ``op(a)``
        for ``op`` in the activation table) on SBUF data."""
        if b is not None:
            if op not in _BINARY:
                raise ValueError(f"unknown op {op!r}; known: {', '.join(_BINARY)}")
            return self._elementwise(
                P.GPSIMD_OP, P.GPSIMD, out, [a, b], _BINARY[op], f"gpsimd {op}"
            )
        if op not in ACTIVATIONS:
            raise ValueError(f"unknown unary op {op!r}; known: {', '.join(ACTIVATIONS)}")
        return self._elementwise(P.GPSIMD_OP, P.GPSIMD, out, [a], ACTIVATIONS[op], f"gpsimd {op}")

    # ------------------------------------------------------------------------------------------
    def program(self) -> P.Program:
        """The recorded program (flat table + CSR dependencies + tile and tensor records)."""
        table = (
            np.array(self._rows, dtype=P.INSTRUCTION_DTYPE)
            if self._rows
            else np.zeros(0, P.INSTRUCTION_DTYPE)
        )
        counts = np.fromiter((len(d) for d in self._deps), np.int64, len(self._deps))
        ptr = np.zeros(len(self._deps) + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        idx = np.fromiter((x for d in self._deps for x in d), np.int32, int(ptr[-1]))
        tiles = tuple(
            P.TileRecord(
                id=t.id,
                name=t.name,
                space=t.space,
                shape=t.shape,
                fmt=t.fmt,
                offset=t.offset,
                bytes_per_partition=t.bytes_per_partition,
                alloc_instr=self._tile_alloc[t.id],
                free_instr=self._tile_free.get(t.id, -1),
            )
            for t in self._tiles
        )
        tensors = tuple(P.TensorRecord(t.id, t.name, t.shape, t.fmt) for t in self._tensors)
        return P.Program(
            table=table,
            dep_ptr=ptr,
            dep_idx=idx,
            tiles=tiles,
            tensors=tensors,
            chip=self.params.chip,
            dma_queues=int(self.params.dma_engines),
        )
