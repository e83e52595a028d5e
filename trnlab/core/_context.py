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

import numpy as np

from . import _program as P
from ._deps import Tracker
from ._engines import EngineOps, quantize
from ._errors import (
    FormatNotSupportedError,
    HardwareRuleError,
    OperandPlacementError,
    TileTooLargeError,
)
from ._memory import Memory
from ._params import CoreParams
from ._tiles import HBMTensor, HBMView, Tile, View, format_bits

__all__ = ["KernelContext"]


def _catalog_dtype(fmt: str) -> str:
    try:
        from trnlab import formats

        return formats.catalog_dtype(fmt)
    except (ImportError, AttributeError):  # pragma: no cover - formats present
        from trnlab import catalog

        return catalog.dtype_name(fmt)


class KernelContext(EngineOps):
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
        self._tiles: list[Tile] = []
        self._tile_alloc: dict[int, int] = {}
        self._tile_free: dict[int, int] = {}
        self._tensors: list[HBMTensor] = []
        self._memory = Memory(params, lambda tid: self._tiles[tid].name)
        self._tracker = Tracker()
        self._dma_next = 0
        self._last_stationary: tuple | None = None
        self._freed: list[Tile] = []

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
                values = quantize(np.asarray(data, np.float32), fmt, axis=0)
            else:
                values = np.zeros(shape, np.float32)
        t = HBMTensor(len(self._tensors), name, shape, fmt, values, written=written)
        self._tensors.append(t)
        self._tracker.add_tensor(t)
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
        parts, free = int(shape[0]), int(shape[1])
        tid = len(self._tiles)
        name = name or f"sbuf{tid}"
        self._memory.check_partitions("SBUF", name, parts)
        need = math.ceil(free * format_bits(fmt) / 8)
        offset = self._memory.place_sbuf(tid, name, need)
        tile = Tile(tid, name, "sbuf", (parts, free), fmt, offset, need, self.numerics)
        return self._register(tile, offset, offset + need)

    def psum(self, shape, name: str | None = None) -> Tile:
        """Allocate a PSUM tile ``[partitions, free]`` of fp32 accumulators in one bank.

        Raises
        ------
        PsumBankOverflowError
            More than one bank (2 KiB = 512 fp32 per partition) asked, or all 8 banks taken.
        """
        parts, free = int(shape[0]), int(shape[1])
        tid = len(self._tiles)
        name = name or f"psum{tid}"
        self._memory.check_partitions("PSUM", name, parts)
        bank = self._memory.take_bank(tid, name, free)
        tile = Tile(tid, name, "psum", (parts, free), "fp32", bank, free * 4, self.numerics)
        banks = -(-free * 4 // self.params.psum_bank_bytes)
        return self._register(tile, bank, bank + banks)

    def free(self, *tiles: Tile) -> None:
        """Release tiles; their SBUF bytes or PSUM bank can be allocated again."""
        for t in tiles:
            if t.freed:
                continue
            t.freed = True
            self._tile_free[t.id] = len(self._rows)
            self._memory.release(t.id, t.space, t.offset)
            self._freed.append(t)

    def _register(self, tile: Tile, lo: int, hi: int) -> Tile:
        # Memory reuse: the first access to the new tile waits for the last accesses of freed
        # tiles whose bytes (or banks) it takes over.
        tile.span = (lo, hi)
        keep = []
        for old in self._freed:
            o_lo, o_hi = old.span
            if old.space != tile.space or o_hi <= lo or hi <= o_lo:
                keep.append(old)
                continue
            tile.inherited.extend(a[4] for a in (*old.writes, *old.reads))
            if not (lo <= o_lo and o_hi <= hi):
                keep.append(old)  # partly covered: a later tile may take the rest
        self._freed = keep
        self._tiles.append(tile)
        self._tile_alloc[tile.id] = len(self._rows)
        self._tracker.add_tile(tile.id)
        return tile

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
        self._deps.append(
            self._tracker.access(i, P.OPS[row["op"]], engine, reads, writes, hreads, hwrites)
        )
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
            d.set(x if d.tile.fmt == s.tensor.fmt else quantize(x, d.tile.fmt, axis=0))
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
                x = quantize(x, d.tensor.fmt, axis=0)
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
        if n > p.psum_free_max:
            one_bank = p.psum_free_max == p.psum_bank_bytes // 4
            raise TileTooLargeError(
                f"moving tile free size {n} exceeds {p.psum_free_max} fp32 per PSUM "
                f"{'bank' if one_bank else 'tile'} on {p.name}; split N into tiles of "
                f"<= {p.psum_free_max}."
                + (" (NeuronCore-v4 lets one matmul span several banks.)" if one_bank else "")
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
        key = (st.tile.id, st.region, self._tracker.versions[st.tile.id])
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
