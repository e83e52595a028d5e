"""The kernel API: a context that allocates tiles, checks the hardware rules, records
instructions and, unless timing only, executes their numerics.

A kernel is a plain Python function ``kernel(ctx, a, b, c, ...)`` receiving HBM tensors and a
:class:`KernelContext`. The names follow the hardware (and NKI's concepts): SBUF and PSUM tiles
``[partition, free]``, DMA load/store, a Tensor Engine matmul of a *stationary* tile ``[K, M]``
against a *moving* tile ``[K, N]`` into PSUM ``[M, N]``, Scalar-engine activation
``f(x * scale + bias)``, Vector-engine elementwise ops and reductions, GpSimd ops, and copies
with a cast.

Buffers: a tile is one buffer; writing it again waits for every earlier reader of the
overlapped bytes (write-after-read). ``ctx.sbuf(shape, fmt, bufs=3)`` gives a
:class:`TilePool` of rotating buffers (``pool.next()`` each iteration), which is what the NKI
compiler gives a tile declared inside an ``affine_range`` loop.

Recording is the hot path of a large timing-only run: every instruction method checks its
rules and appends one flat tuple of integers; dependencies are found afterwards, in one numba
pass over physical memory (:mod:`trnlab.core._deps`).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from trnlab._checks import flag, shape2, short

from . import _program as P
from ._engines import EngineOps, quantize
from ._engines_nki import NkiOps
from ._errors import (
    FormatNotSupportedError,
    HardwareRuleError,
    KernelArgumentError,
    OperandPlacementError,
    TileTooLargeError,
    UnwrittenReadError,
)
from ._memory import Memory
from ._params import CoreParams
from ._progress import EVERY, Progress
from ._tiles import (
    STORAGE_TYPES,
    HBMTensor,
    HBMView,
    Tile,
    TilePool,
    View,
    format_bits,
    format_name,
)

__all__ = ["KernelContext"]

_FIELDS = P.N_FIELDS
_FLAGS = P.ROW_FIELDS.index("flags")


def _with_waits(ptr: np.ndarray, idx: np.ndarray, waits: np.ndarray):
    """CSR dependencies ``ptr``/``idx`` with the (consumer, producer) rows of ``waits`` added
    to their consumers' lists (vectorised: a recording may hold millions of instructions), and
    which entries are such waits (``Program.dep_strict``)."""
    n = len(ptr) - 1
    counts = np.diff(ptr)
    add = np.bincount(waits[:, 0], minlength=n)
    new_ptr = np.zeros(n + 1, ptr.dtype)
    np.cumsum(counts + add, out=new_ptr[1:])
    new_idx = np.empty(int(new_ptr[-1]), idx.dtype)
    rows = np.repeat(np.arange(n), counts)
    offset = np.arange(len(idx)) - np.repeat(ptr[:-1], counts)
    new_idx[new_ptr[rows] + offset] = idx
    w = waits[np.argsort(waits[:, 0], kind="stable")]
    rank = np.arange(len(w)) - np.searchsorted(w[:, 0], w[:, 0])
    at = new_ptr[w[:, 0]] + counts[w[:, 0]] + rank
    new_idx[at] = w[:, 1]
    strict = np.zeros(len(new_idx), np.bool_)
    strict[at] = True
    return new_ptr, new_idx, strict


def _catalog_dtype(fmt: str) -> str:
    packed = STORAGE_TYPES.get(fmt)
    if packed is not None:
        if packed[1] is None:
            raise ValueError(f"{fmt} is an integer type; the Tensor Engine multiplies floats")
        return packed[1]
    from trnlab import formats

    return formats.catalog_dtype(fmt)


#: Elements an HBM tensor may hold: 2**40 is more than any chip's HBM (at one byte each).
MAX_HBM_ELEMENTS = 2**40
#: Rows (or columns) of an HBM tensor: the instruction table keeps a DMA's row and column
#: bounds as 32-bit integers.
MAX_HBM_DIM = 2**31 - 1
#: Elements of an HBM tensor a run with numerics keeps (as float32, 4 bytes each: 1 GiB).
MAX_NUMERICS_ELEMENTS = 2**28


def _shape2(shape, what: str, max_size: int | None = None) -> tuple[int, int]:
    """``shape`` as two positive integers, or a teaching error."""
    return shape2(shape, f"{what} shape", KernelArgumentError, ("partitions", "free"), max_size)


def _bufs(bufs) -> int:
    if isinstance(bufs, bool) or not isinstance(bufs, numbers.Integral) or not 1 <= bufs <= 64:
        raise KernelArgumentError(
            f"bufs (rotating buffers of a tile) must be a whole number from 1 to 64; got {bufs!r}"
        )
    return int(bufs)


def _tile_name(name) -> str:
    if not isinstance(name, str):
        raise KernelArgumentError(f"a tile name must be a string, not {short(name)}")
    return name


def _values(data, what: str) -> np.ndarray:
    """Kernel input values as a float32 array, or a teaching error (text, None, objects)."""
    try:
        arr = np.asarray(data)
    except ValueError:  # a ragged list
        arr = np.asarray(None)
    if arr.dtype.kind not in "fiub":
        raise KernelArgumentError(
            f"{what}: data must be an array of real numbers, not {short(data)} ({arr.dtype})"
        )
    return arr.astype(np.float32, copy=False)


class KernelContext(EngineOps, NkiOps):
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
        self._rows: list[int] = []  # N_FIELDS ints per instruction (_program.build_table)
        self._tiles: list[Tile] = []
        self._tile_alloc: list[int] = []
        self._tile_free: dict[int, int] = {}
        self._tensors: list[HBMTensor] = []
        self._memory = Memory(params, lambda tid: self._tiles[tid].name)
        self._last_stationary: tuple | None = None
        self._formats: list[str] = []
        self._fmt_ids: dict[str, int] = {}
        self._rates: dict[str, tuple[float, int]] = {}
        self._n_queues = int(params.dma_engines)
        self._store_queue = P.FIRST_DMA + self._n_queues - 1
        # The compiler's spread of loads over queues (compiler_load_queues: one on Trn1, as
        # its profiles show), never onto the store queue.
        self._load_queues = max(1, min(self._n_queues - 1, int(params.compiler_load_queues)))
        self._default_dge: int | None = None
        self.progress = Progress()  # a progress line in notebooks once a run passes ~2 s
        self._tick = EVERY - 1
        self._dma_elements: dict[int, int] = {}  # strided DMAs: instruction -> elements moved
        self._dma_packets: dict[int, int] = {}  # strided DMAs: instruction -> contiguous runs
        # Further tiles an instruction reads beyond its row's operands (an MX matmul's scales):
        # instruction -> ((tile id, region), ...), for the dependencies.
        self._extra_reads: dict[int, tuple] = {}
        # HBM -> HBM copies: instruction -> (source tensor id, (r0, r1, c0, c1)).
        self._hbm_reads: dict[int, tuple] = {}
        # Dependencies a kernel asks for besides those on memory: (consumer, producer) pairs.
        self._waits: list[tuple[int, int]] = []

    @property
    def recorded(self) -> int:
        """Instructions recorded so far."""
        return len(self._rows) // _FIELDS

    def wait_for(self, consumer: int, producer: int) -> None:
        """Make instruction ``consumer`` wait until instruction ``producer`` completes, besides
        what their memory accesses already order (NKI 0.6's ``NkiInstruction.depends_on``: a
        semaphore wait the compiler adds). Both are indices of recorded instructions, the
        producer the earlier one (instructions are scheduled as they were recorded)."""
        n = self.recorded
        for name, v in (("consumer", consumer), ("producer", producer)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < n:
                raise KernelArgumentError(
                    f"wait_for: {name} must be the index of a recorded instruction (0 to "
                    f"{n - 1}), not {v!r}"
                )
        if producer >= consumer:
            raise KernelArgumentError(
                f"wait_for: instruction {consumer} cannot wait for instruction {producer}, "
                f"recorded at or after it; a dependency points back in program order"
            )
        self._waits.append((int(consumer), int(producer)))

    def _fmt(self, fmt: str) -> int:
        i = self._fmt_ids.get(fmt)
        if i is None:
            format_bits(fmt)  # unknown names raise here, with trnlab.formats' hints
            i = self._fmt_ids[fmt] = len(self._formats)
            self._formats.append(fmt)
        return i

    # ------------------------------------------------------------------------------------------
    # Memory
    # ------------------------------------------------------------------------------------------
    def hbm(
        self, name: str, shape, fmt: str = "fp32", data=None, written: bool | None = None
    ) -> HBMTensor:
        """An HBM tensor. ``data`` (if given) is rounded to ``fmt`` as a host-side cast would;
        ``written`` (default: data given) says whether it holds an input."""
        if not isinstance(name, str):
            raise KernelArgumentError(f"an HBM tensor's name is a string, not {short(name)}")
        shape = _shape2(shape, f"HBM tensor {name!r}", MAX_HBM_ELEMENTS)
        if max(shape) > MAX_HBM_DIM:
            raise KernelArgumentError(
                f"HBM tensor {name!r} of shape {shape} has a dimension of {max(shape):,}; the "
                f"instruction table keeps a DMA's row and column bounds as 32-bit integers, so "
                f"each dimension is at most {MAX_HBM_DIM:,}. Give it fewer rows and more "
                f"columns (the same elements)."
            )
        if self.numerics and shape[0] * shape[1] > MAX_NUMERICS_ELEMENTS:
            raise KernelArgumentError(
                f"HBM tensor {name!r} of shape {shape} holds {shape[0] * shape[1]:,} values; a "
                f"run with numerics keeps at most {MAX_NUMERICS_ELEMENTS:,} per tensor (float32 "
                f"copies, 1 GiB). Use a smaller shape, or numerics=False for a timing-only run."
            )
        fmt = format_name(fmt)
        self._fmt(fmt)
        values = None
        written = (
            data is not None if written is None else flag(written, "written", KernelArgumentError)
        )
        if data is not None:
            data = _values(data, f"HBM tensor {name!r}")
            if data.shape != shape:
                raise KernelArgumentError(
                    f"HBM tensor {name!r} has shape {shape} but its data has shape {data.shape}"
                )
        if self.numerics:
            if written and data is None:
                raise KernelArgumentError(
                    f"HBM input {name!r} needs values when numerics are on (or run with "
                    f"numerics=False for a timing-only run)"
                )
            if data is not None:
                values = quantize(data, fmt, axis=0)
                if values is data or np.shares_memory(values, data):
                    values = values.copy()  # a store into an input never writes the caller's array
            else:
                values = np.full(shape, np.nan, np.float32)
        t = HBMTensor(len(self._tensors), name, shape, fmt, values, written=written)
        t.fmt_id = self._fmt_ids[fmt]
        self._tensors.append(t)
        return t

    def _tile(self, space: str, shape, fmt: str, name: str | None) -> Tile:
        parts, free = _shape2(shape, f"{space.upper()} tile")
        fmt = format_name(fmt)
        tid = len(self._tiles)
        if name is None:
            name = f"{space}{tid}"
        _tile_name(name)
        self._memory.check_partitions(space.upper(), name, parts)
        if space == "sbuf":
            fid = self._fmt(fmt)
            need = math.ceil(free * format_bits(fmt) / 8)
            offset = self._memory.place_sbuf(tid, name, need)
            lo, hi = offset, offset + need
        else:
            fid = self._fmt("fp32")
            need = free * 4
            offset = self._memory.take_bank(tid, name, free)
            lo, hi = offset, offset + -(-need // self.params.psum_bank_bytes)
        tile = Tile(tid, name, space, (parts, free), fmt, offset, need, self.numerics, fid)
        tile.span = (lo, hi)
        self._tiles.append(tile)
        self._tile_alloc.append(self.recorded)
        return tile

    def _pool(self, space, shape, fmt, name, bufs) -> TilePool:
        n = _bufs(bufs)
        name = f"{space}{len(self._tiles)}" if name is None else _tile_name(name)
        return TilePool(name, [self._tile(space, shape, fmt, f"{name}[{i}]") for i in range(n)])

    def sbuf(self, shape, fmt: str = "bf16", name: str | None = None, bufs: int | None = None):
        """Allocate an SBUF tile ``[partitions, free]`` of format ``fmt``; with ``bufs=N`` a
        :class:`TilePool` of N rotating buffers (take one per iteration with ``pool.next()``).

        Raises
        ------
        TileTooLargeError
            More partitions than the core has (128).
        SbufCapacityError
            Not enough bytes left in each partition for ``free x bits / 8`` more (per buffer).
        KernelArgumentError
            A shape that is not two positive integers, a buffer count outside 1..64.
        """
        if bufs is not None:
            return self._pool("sbuf", shape, fmt, name, bufs)
        return self._tile("sbuf", shape, fmt, name)

    def psum(self, shape, name: str | None = None, bufs: int | None = None):
        """Allocate a PSUM tile ``[partitions, free]`` of fp32 accumulators (one bank, or
        several where the generation allows); ``bufs=N`` gives N rotating tiles.

        Raises
        ------
        PsumBankOverflowError
            More than one bank (2 KiB = 512 fp32 per partition) asked, or all 8 banks taken.
        """
        if bufs is not None:
            return self._pool("psum", shape, "fp32", name, bufs)
        return self._tile("psum", shape, "fp32", name)

    def sbuf_available(self) -> int:
        """Bytes per partition of the largest free run of SBUF now (usable capacity less the
        live tiles): the most a new tile, or all the buffers of a pool together, can take."""
        return self._memory.largest_free()

    def free(self, *tiles) -> None:
        """Release tiles (or every buffer of a pool); their SBUF bytes or PSUM banks can be
        allocated again (a new tile there waits for the old one's last readers and writers)."""
        for x in tiles:
            for t in x.buffers if isinstance(x, TilePool) else (x,):
                if not isinstance(t, Tile):
                    raise KernelArgumentError(f"ctx.free takes tiles or pools, not {t!r}")
                if t.freed:
                    continue
                t.freed = True
                self._tile_free[t.id] = self.recorded
                self._memory.release(t.id, t.space, t.offset)

    # ------------------------------------------------------------------------------------------
    # Recording
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _view(x, what: str) -> View:
        if type(x) is View:
            v = x
        elif type(x) is Tile:
            v = x.full
        elif isinstance(x, TilePool):
            raise OperandPlacementError(
                f"{what} is a pool of {x.bufs} rotating buffers ({x.name!r}); take one buffer "
                f"with pool.next() (once per iteration) and use that tile"
            )
        else:
            raise OperandPlacementError(
                f"{what} must be an SBUF or PSUM tile (or a view of one), not {type(x).__name__}; "
                f"HBM data reaches the engines only through a DMA load into SBUF."
            )
        if v.tile.freed:
            raise HardwareRuleError(f"{what}: tile {v.tile.name!r} was freed; allocate a new one.")
        return v

    @staticmethod
    def _hview(x, what: str) -> HBMView:
        if type(x) is HBMView:
            return x
        if type(x) is HBMTensor:
            return x.full
        raise OperandPlacementError(
            f"{what} must be an HBM tensor or a slice of one, not {type(x).__name__}"
        )

    def _check_read(self, v: View, what: str) -> None:
        t = v.tile
        if not t.fully_written and not t.is_written(v.region):
            p0, p1, f0, f1 = v.region
            raise UnwrittenReadError(
                f"instruction #{self.recorded} ({what}) reads {t.space.upper()} tile "
                f"{t.name!r}[{p0}:{p1}, {f0}:{f1}], part of which nothing has written yet. "
                f"Load it (DMA), compute it, or memset it before reading."
            )

    def _wrote(self, v: View) -> None:
        t = v.tile
        t.version += 1
        if not t.fully_written:
            t.mark_written(v.region)

    def _dma_queue(self, queue: int | None, store: bool = False, tensor: int = 0) -> int:
        """Default queues, the model's stand-in for the compiler's choice: loads of HBM tensor
        i on queue ``i mod compiler_load_queues`` (all on queue 0 on Trn1, as its profiles
        show; a queue per tensor where no source says, an assumption), stores on the last
        queue, so a store waiting for compute never holds up the loads behind it. A queue sets
        up one transfer at a time, in order."""
        if queue is None:
            if store:
                return self._store_queue
            return P.FIRST_DMA + tensor % self._load_queues
        if isinstance(queue, bool) or not isinstance(queue, numbers.Integral):
            raise KernelArgumentError(f"a DMA queue is a whole number, not {queue!r}")
        if not 0 <= queue < self._n_queues:
            raise HardwareRuleError(
                f"DMA queue {queue} does not exist; {self.params.name} has 0..{self._n_queues - 1}"
            )
        return P.FIRST_DMA + int(queue)

    # ------------------------------------------------------------------------------------------
    # DMA
    # ------------------------------------------------------------------------------------------
    def _dge(self, dge: str | None) -> int:
        """The flags of a DMA's descriptor generation mode (None: the generation's default)."""
        if dge is None:
            if self._default_dge is None:
                self._default_dge = self._dge(self.params.dma_default_dge)
            return self._default_dge
        flag = P.DGE_MODES.get(dge) if isinstance(dge, str) else None
        if flag is None:
            raise KernelArgumentError(
                f"dge must be one of {', '.join(map(repr, P.DGE_MODES))} (None: the "
                f"generation's default); got {dge!r}"
            )
        if flag == P.FLAG_DGE_HW and not self.params.dge_instances:
            raise HardwareRuleError(
                f"{self.params.name} ({self.params.chip}) has no hardware DGE (it arrived with "
                f"NeuronCore-v3); use dge='none' (descriptors prepared in HBM) or 'sw' (GpSimd)."
            )
        return flag

    def load(
        self,
        dst,
        src,
        queue: int | None = None,
        dge: str | None = None,
        flat: bool = False,
        elements: int | None = None,
        packets: int | None = None,
    ) -> int:
        """DMA ``src`` (HBM rows x cols) into SBUF ``dst`` (rows onto partitions).

        A format change on the way is a cast (the values are rounded to the tile's format).
        ``dge`` picks how the descriptors are made: ``"none"`` (prepared in HBM before the
        run), ``"hw"`` (the hardware DGE of NeuronCore-v3+, ~600 ns per DMA) or ``"sw"`` (GpSimd
        writes them); None takes the generation's default. ``flat=True`` lets the two regions
        differ in shape if they hold as many elements (the DMA streams them in row-major
        order, as an NKI ``dma_copy`` between views of different shapes does). ``elements``
        (timing only) says a side is the bounding box of a strided access (the HBM rows, or the
        SBUF free range within each partition) and the DMA moves that many elements:
        dependencies take the boxes, the bytes counted and streamed are the elements'.
        ``packets`` says how many contiguous runs of bytes the access is made of (default: one
        per partition row); each run beyond that costs its engine ``dma_packet_time``.
        """
        d = dst.full if type(dst) is Tile else dst
        if type(d) is not View or d.tile.freed:
            d = self._view(dst, "load destination")
        s = src if type(src) is HBMView else self._hview(src, "load source")
        dt = d.tile
        if dt.space != "sbuf":
            raise OperandPlacementError(
                f"load into {dt.space.upper()} tile {dt.name!r}: DMA writes SBUF; only the "
                f"Tensor Engine writes PSUM. Load into an SBUF tile."
            )
        p0, p1, f0, f1 = d.region
        r0, r1, c0, c1 = s.r0, s.r1, s.c0, s.c1
        if elements is not None or p1 - p0 != r1 - r0 or f1 - f0 != c1 - c0:
            self._dma_extent("load", elements, flat, d.shape, s.shape)
        tensor = s.tensor
        if not tensor.written:
            self._check_stored(tensor, s, "load")
        if queue is None:
            eng = P.FIRST_DMA + tensor.id % self._load_queues
        else:
            eng = self._dma_queue(queue, tensor=tensor.id)
        dge_flag = (
            self._default_dge if dge is None and self._default_dge is not None else self._dge(dge)
        )
        if packets is not None:  # checked before anything is recorded
            packets = self._packets("load", packets, p1 - p0, elements or (p1 - p0) * (f1 - f0))
        i = len(self._rows) // _FIELDS
        self._rows.extend(
            (P.DMA_LOAD, eng, dt.id, -1, -1, tensor.id, p1 - p0, f1 - f0, 0, 0, 0,
             tensor.fmt_id, -1, 0, dge_flag, d.key, -1, -1, r0 | r1 << 32, c0 | c1 << 32, -1, -1)
        )  # fmt: skip
        if not i & self._tick:
            self.progress.tick(i)
        if elements is not None:
            self._dma_elements[i] = int(elements)
        if packets is not None:
            self._dma_packets[i] = packets
        dt.version += 1
        if not dt.fully_written:
            dt.mark_written(d.region)
        if self.numerics:
            x = tensor.data[r0:r1, c0:c1].reshape(p1 - p0, f1 - f0)
            d.set(x if dt.fmt == tensor.fmt else quantize(x, dt.fmt, axis=0))
        return i

    def _dma_extent(
        self, what: str, elements, flat: bool, dst: tuple, src: tuple, names=("SBUF", "HBM")
    ) -> None:
        """The rule a DMA's two regions (shapes ``dst`` and ``src``) obey: the same shape, as
        many elements with ``flat=True``, or (``elements``, timing only) a strided access whose
        bounding boxes hold the elements it moves. ``names`` say what dst and src are."""
        d_cells, s_cells = dst[0] * dst[1], src[0] * src[1]
        if elements is None:
            if dst != src and not (flat and d_cells == s_cells):
                raise HardwareRuleError(
                    f"{what}: {names[0]} region {dst} and {names[1]} region {src} differ in "
                    f"{'element count' if flat else 'shape'}"
                )
            return
        if isinstance(elements, bool) or not isinstance(elements, numbers.Integral):
            raise KernelArgumentError(f"{what}: elements must be a whole number, not {elements!r}")
        if self.numerics:
            raise KernelArgumentError(
                f"{what}(elements=...) records timing only; a strided access's values are the "
                f"caller's (trnlab.nki)"
            )
        if not 0 < elements <= min(d_cells, s_cells):
            raise HardwareRuleError(
                f"{what}: a strided DMA of {elements} elements must fit both the bounding box of "
                f"its {names[0]} side ({d_cells} cells) and that of its {names[1]} side "
                f"({s_cells})"
            )

    def _note_dma(self, i: int, elements, packets) -> None:
        """What a DMA leaves beside its row once recorded: the progress tick, a strided
        access's elements and packets (load and store do the same inline: the hot path)."""
        if not i & self._tick:
            self.progress.tick(i)
        if elements is not None:
            self._dma_elements[i] = int(elements)
        if packets is not None:
            self._dma_packets[i] = packets

    @staticmethod
    def _packets(what: str, packets, rows: int, moved: int) -> int:
        """``packets`` (the contiguous runs a strided DMA moves) checked: at least one per
        partition row, at most one per element."""
        if isinstance(packets, bool) or not isinstance(packets, numbers.Integral):
            raise KernelArgumentError(f"{what}: packets must be a whole number, not {packets!r}")
        if not rows <= packets <= moved:
            raise HardwareRuleError(
                f"{what}: a DMA moving {moved} elements over {rows} partition "
                f"row{'s' if rows != 1 else ''} is made of {rows} to {moved} contiguous runs "
                f"(packets: at least one per row, at most one per element), not {packets}"
            )
        return int(packets)

    def _check_stored(self, tensor: HBMTensor, s: HBMView, what: str) -> None:
        """An output tensor counts as written where any store overlapped (not exact cover)."""
        if tensor.overlaps_store(s.r0, s.r1, s.c0, s.c1):
            return
        raise UnwrittenReadError(
            f"instruction #{self.recorded} {what}s HBM tensor {tensor.name!r}"
            f"[{s.r0}:{s.r1}, {s.c0}:{s.c1}], which no instruction has stored yet."
        )

    def store(
        self,
        dst,
        src,
        queue: int | None = None,
        dge: str | None = None,
        flat: bool = False,
        elements: int | None = None,
        packets: int | None = None,
    ) -> int:
        """DMA SBUF ``src`` to HBM ``dst`` (rounded to the tensor's format if it differs);
        ``dge``, ``flat``, ``elements`` and ``packets`` as for :meth:`load`."""
        d = dst if type(dst) is HBMView else self._hview(dst, "store destination")
        s = src.full if type(src) is Tile else src
        if type(s) is not View or s.tile.freed:
            s = self._view(src, "store source")
        st = s.tile
        if st.space != "sbuf":
            raise OperandPlacementError(
                f"store from PSUM tile {st.name!r}: copy it to SBUF first "
                f"(ctx.copy(sbuf_tile, psum_tile), a cast on the Vector or Scalar engine)."
            )
        p0, p1, f0, f1 = s.region
        r0, r1, c0, c1 = d.r0, d.r1, d.c0, d.c1
        if elements is not None or p1 - p0 != r1 - r0 or f1 - f0 != c1 - c0:
            self._dma_extent("store", elements, flat, d.shape, s.shape, ("HBM", "SBUF"))
        if not st.fully_written:
            self._check_read(s, "dma_store")
        q = self._store_queue if queue is None else self._dma_queue(queue, store=True)
        dge_flag = (
            self._default_dge if dge is None and self._default_dge is not None else self._dge(dge)
        )
        if packets is not None:  # checked before anything is recorded
            packets = self._packets("store", packets, p1 - p0, elements or (p1 - p0) * (f1 - f0))
        tensor = d.tensor
        if not tensor.written:  # tensor.note_store, inline: the hot path
            tensor.pending_stores.append((r0, r1, c0, c1))
        i = len(self._rows) // _FIELDS
        if elements is not None:
            self._dma_elements[i] = int(elements)
        if packets is not None:
            self._dma_packets[i] = packets
        self._rows.extend(
            (P.DMA_STORE, q, -1, st.id, -1, tensor.id, p1 - p0, f1 - f0, 0, 0, 0,
             tensor.fmt_id, -1, 0, dge_flag, -1, s.key, -1, r0 | r1 << 32, c0 | c1 << 32, -1, -1)
        )  # fmt: skip
        if not i & self._tick:
            self.progress.tick(i)
        if self.numerics:
            x = s.get()
            if st.fmt != tensor.fmt:
                x = quantize(x, tensor.fmt, axis=0)
            tensor.data[r0:r1, c0:c1] = x.reshape(r1 - r0, c1 - c0)
        return i

    def dma_sbuf(
        self,
        dst,
        src,
        queue: int | None = None,
        dge: str | None = None,
        flat: bool = False,
        elements: int | None = None,
        packets: int | None = None,
    ) -> int:
        """DMA SBUF ``src`` to SBUF ``dst`` (rounded to ``dst``'s format if it differs): a way to
        move data across partitions, which the Vector and Scalar engines cannot (they work
        partition by partition; the Tensor Engine's transpose is the other common way).
        Charged as a load of the destination's partitions is (an assumption: no SBUF-to-SBUF
        figure is published); ``queue``, ``dge``, ``flat``, ``elements`` and ``packets`` as
        for :meth:`load`. Within one partition an engine copy (:meth:`copy`) is the cheaper tool."""
        d = self._view(dst, "SBUF-to-SBUF DMA destination")
        s = self._view(src, "SBUF-to-SBUF DMA source")
        dt, st = d.tile, s.tile
        if dt.space != "sbuf" or st.space != "sbuf":
            bad = dt if dt.space != "sbuf" else st
            raise OperandPlacementError(
                f"SBUF-to-SBUF DMA touches PSUM tile {bad.name!r}: the DMA engines reach HBM and "
                f"SBUF, not PSUM. Copy PSUM to SBUF on an engine first (ctx.copy)."
            )
        p0, p1, f0, f1 = d.region
        self._dma_extent("dma_sbuf", elements, flat, d.shape, s.shape, ("destination", "source"))
        if not st.fully_written:
            self._check_read(s, "dma_sbuf")
        q = P.FIRST_DMA if queue is None else self._dma_queue(queue)
        dge_flag = self._dge(dge)
        if packets is not None:  # checked before anything is recorded
            packets = self._packets("dma_sbuf", packets, p1 - p0, elements or (p1 - p0) * (f1 - f0))
        i = len(self._rows) // _FIELDS
        self._rows.extend(
            (P.DMA_SBUF, q, dt.id, st.id, -1, -1, p1 - p0, f1 - f0, 0, 0, 1, st.fmt_id, -1, 0,
             dge_flag, d.key, s.key, -1, -1, -1, -1, -1)
        )  # fmt: skip
        self._note_dma(i, elements, packets)
        self._wrote(d)
        if self.numerics:
            x = s.get().reshape(p1 - p0, f1 - f0)
            d.set(x if dt.fmt == st.fmt else quantize(x, dt.fmt, axis=0))
        return i

    def dma_transpose(
        self,
        dst,
        src,
        queue: int | None = None,
        dge: str | None = None,
        elements: int | None = None,
    ) -> int:
        """DMA ``src`` into ``dst`` transposed: the source's columns (an SBUF tile's free
        elements, an HBM region's columns) become the destination's rows (partitions), as
        ``nisa.dma_transpose`` does. HBM -> SBUF and SBUF -> SBUF are the Trainium2 guide's two
        flows; SBUF or HBM -> HBM is taken too, as NKI's migration guide writes one.

        Recorded as the copy of the same elements (a load, an SBUF-to-SBUF copy, a store or an
        HBM-to-HBM copy; ``queue``, ``dge`` and ``elements`` as for :meth:`load`, except that
        ``dge=None`` takes static descriptors, an assumption), flagged as a
        transpose: the 16 DMA engines cooperate on it, so the scheduler spreads it over all of
        them at ``dma_transpose_hbm_share`` (an HBM source) or ``dma_transpose_sbuf_share`` (an
        SBUF source) of their rate, an SBUF destination's free size per partition rounded up
        to ``dma_transpose_granule`` elements (the [128, 16] blocks the engines write). A
        format change on the way is a cast, as for a copy. With numerics, the destination
        region is the source region's transpose; any shapes of as many elements are taken
        timing-only (trnlab.nki computes N-D transposes itself)."""
        p = self.params
        if p.dma_transpose_hbm_share <= 0:
            raise HardwareRuleError(
                f"{p.name} ({p.chip}) has no DMA transpose in trnlab's catalogue: the Trainium2 "
                f"guide introduces it, the Trainium/Inferentia2 guide describes none. Transpose "
                f"on the Tensor Engine (transpose into PSUM, then copy to SBUF)."
            )
        s, s_hbm = self._side(src, "transpose source")
        d, d_hbm = self._side(dst, "transpose destination")
        # Which descriptors the compiler picks for a direct transpose is not published; the
        # DGE guide allows static ones, hardware DGE or its choice (software DGE makes the
        # indirect form's): static descriptors unless the caller says otherwise (assumption).
        dge = "none" if dge is None else dge
        d_fmt = d.tensor.fmt if d_hbm else d.tile.fmt
        if self.numerics and s.shape[::-1] != d.shape:
            raise HardwareRuleError(
                f"dma_transpose: destination region {d.shape} is not the source region "
                f"{s.shape} transposed ({s.shape[::-1]})"
            )
        numerics = self.numerics
        self.numerics = False  # the values are put below, transposed
        try:
            if s_hbm and d_hbm:
                i = self.dma_hbm(d, s, queue=queue, dge=dge, flat=True, elements=elements)
            elif s_hbm:
                i = self.load(d, s, queue=queue, dge=dge, flat=True, elements=elements)
            elif d_hbm:
                i = self.store(d, s, queue=queue, dge=dge, flat=True, elements=elements)
            else:
                i = self.dma_sbuf(d, s, queue=queue, dge=dge, flat=True, elements=elements)
        finally:
            self.numerics = numerics
        self._rows[i * _FIELDS + _FLAGS] |= P.FLAG_TRANSPOSE
        if numerics:
            x = (s.tensor.data[s.r0 : s.r1, s.c0 : s.c1] if s_hbm else s.get()).T
            s_fmt = s.tensor.fmt if s_hbm else s.tile.fmt
            x = x if d_fmt == s_fmt else quantize(x, d_fmt, axis=0)
            if d_hbm:
                d.tensor.data[d.r0 : d.r1, d.c0 : d.c1] = x
            else:
                d.set(x)
        return i

    def _side(self, x, what: str) -> tuple:
        """One side of a DMA as a view, and whether it is in HBM."""
        if type(x) is HBMView:
            return x, True
        if isinstance(x, HBMTensor):
            return self._hview(x, what), True
        return self._view(x, what), False

    def dma_hbm(
        self,
        dst,
        src,
        queue: int | None = None,
        dge: str | None = None,
        flat: bool = False,
        elements: int | None = None,
        packets: int | None = None,
    ) -> int:
        """DMA HBM ``src`` to HBM ``dst`` (rounded to ``dst``'s format if it differs), never
        through SBUF. Charged as a load of 128 partitions is, whatever the two shapes (an
        assumption: no HBM-to-HBM figure is published; its elements spread evenly over the DMA
        engines); the run counts its bytes once, as the DMA moves them
        (:func:`trnlab.core.hbm_traffic` shows the read and the write). ``queue``, ``dge``,
        ``flat``, ``elements`` and ``packets`` as for :meth:`load`."""
        d = dst if type(dst) is HBMView else self._hview(dst, "HBM-to-HBM DMA destination")
        s = src if type(src) is HBMView else self._hview(src, "HBM-to-HBM DMA source")
        r0, r1, c0, c1 = d.r0, d.r1, d.c0, d.c1
        self._dma_extent("dma_hbm", elements, flat, d.shape, s.shape, ("destination", "source"))
        cells = (r1 - r0) * (c1 - c0)
        source, target = s.tensor, d.tensor
        if not source.written:
            self._check_stored(source, s, "read")
        q = P.FIRST_DMA + source.id % self._load_queues if queue is None else self._dma_queue(queue)
        dge_flag = self._dge(dge)
        # Spread over the engines as a load of 128 partitions is, whatever the two shapes.
        rows = min(elements or cells, int(self.params.sbuf_partitions))
        if packets is not None:  # checked before anything is recorded
            packets = self._packets("dma_hbm", packets, 1, elements or cells)
        if not target.written:
            target.note_store(r0, r1, c0, c1)
        i = len(self._rows) // _FIELDS
        self._rows.extend(
            (P.DMA_HBM, q, -1, -1, -1, target.id, rows, -(-cells // rows), 0, 0, 1,
             source.fmt_id, -1, 0, dge_flag, -1, -1, -1, r0 | r1 << 32, c0 | c1 << 32, -1, -1)
        )  # fmt: skip
        self._hbm_reads[i] = (source.id, (s.r0, s.r1, s.c0, s.c1))
        self._note_dma(i, elements, packets)
        if self.numerics:
            x = source.data[s.r0 : s.r1, s.c0 : s.c1].reshape(r1 - r0, c1 - c0)
            target.data[r0:r1, c0:c1] = (
                x if target.fmt == source.fmt else quantize(x, target.fmt, axis=0)
            )
        return i

    # ------------------------------------------------------------------------------------------
    # Tensor Engine
    # ------------------------------------------------------------------------------------------
    def _tensor_rate(self, fmt: str, what: str) -> tuple[float, int]:
        got = self._rates.get(fmt)
        if got is not None:
            return got
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
        got = self._rates[fmt] = (p.tensor_rate[d], DTYPES.index(d))
        return got

    def matmul(
        self, out, stationary, moving, accumulate: bool = False, packed: int = 1, reads=()
    ) -> int:
        """Tensor Engine: ``out[M, N] (+)= stationary[K, M].T @ moving[K, N]`` in fp32 PSUM.

        The contraction runs over partitions (K <= 128). ``accumulate=False`` starts an
        accumulation group (overwrites), ``True`` adds to what the PSUM region holds.
        ``packed`` is the values each element of the inputs packs along the contraction
        (4 for NKI's ``_x4`` MX types, whose matmul contracts 4 x K): the instruction is
        charged and counted as that many times the work of an unpacked one. ``reads`` are
        further SBUF tiles the instruction reads (an MX matmul's scales): it waits for their
        writes, and a later write to them waits for it.

        Raises
        ------
        OperandPlacementError
            Inputs not in SBUF, or output not in PSUM.
        TileTooLargeError
            K > 128 partitions, stationary free M > 128, or moving free N > 512.
        FormatNotSupportedError
            The input format has no Tensor Engine path on this generation.
        """
        if packed != 1:
            if isinstance(packed, bool) or not isinstance(packed, numbers.Integral) or packed < 1:
                raise KernelArgumentError(f"packed must be a whole number >= 1; got {packed!r}")
            if self.numerics:
                raise KernelArgumentError(
                    "a packed matmul records timing only; its values are the caller's (trnlab.nki)"
                )
        p = self.params
        o = self._view(out, "matmul output")
        st = self._view(stationary, "matmul stationary operand")
        mv = self._view(moving, "matmul moving operand")
        stt, mvt, ot = st.tile, mv.tile, o.tile
        if stt.space != "sbuf" or mvt.space != "sbuf":
            v, what = (st, "stationary") if stt.space != "sbuf" else (mv, "moving")
            raise OperandPlacementError(
                f"matmul {what} operand {v.tile.name!r} is in {v.tile.space.upper()}; the "
                f"Tensor Engine reads its inputs from SBUF. Copy it to an SBUF tile first."
            )
        if ot.space != "psum":
            raise OperandPlacementError(
                f"matmul output {ot.name!r} is in SBUF; the Tensor Engine writes PSUM. "
                f"Allocate the output with ctx.psum(...) and copy it to SBUF afterwards."
            )
        sp0, sp1, sf0, sf1 = st.region
        mp0, mp1, mf0, mf1 = mv.region
        k, m = sp1 - sp0, sf1 - sf0
        k2, n = mp1 - mp0, mf1 - mf0
        if accumulate is not False and accumulate is not True:
            accumulate = flag(accumulate, "matmul accumulate", KernelArgumentError)
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
        op0, op1, of0, of1 = o.region
        if op1 - op0 != m or of1 - of0 != n:
            raise HardwareRuleError(
                f"matmul output region is {o.shape}; it must be [M, N] = {(m, n)}"
            )
        r1, d1 = self._tensor_rate(stt.fmt, "matmul stationary")
        r2, d2 = self._tensor_rate(mvt.fmt, "matmul moving")
        fmt, dt = (stt.fmt, d1) if r1 <= r2 else (mvt.fmt, d2)
        self._check_read(st, "matmul")
        self._check_read(mv, "matmul")
        extra = []
        for x in reads:
            v = self._view(x, "matmul scale operand")
            if v.tile.space != "sbuf":
                raise OperandPlacementError(
                    f"matmul scale operand {v.tile.name!r} is in {v.tile.space.upper()}; the "
                    f"Tensor Engine reads it from SBUF."
                )
            self._check_read(v, "matmul")
            extra.append((v.tile.id, v.region))
        if accumulate:
            self._check_read(o, "matmul (accumulate)")
        key = (stt.id, sp0, sp1, sf0, sf1, stt.version)
        reload = int(key != self._last_stationary)
        self._last_stationary = key
        i = len(self._rows) // _FIELDS
        self._rows.extend(
            (P.MATMUL, P.TENSOR, ot.id, stt.id, mvt.id, -1, k, n * packed, k, m, 0, self._fmt_ids[fmt],
             dt, reload, P.FLAG_OUT_READ if accumulate else 0, o.key, st.key, mv.key,
             -1, -1, -1, -1)
        )  # fmt: skip
        if extra:
            self._extra_reads[i] = tuple(extra)
        if not i & self._tick:
            self.progress.tick(i)
        self._wrote(o)
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
        _, dt = self._tensor_rate(s.tile.fmt, "transpose input")
        self._check_read(s, "transpose")
        self._last_stationary = None
        i = len(self._rows) // _FIELDS
        self._rows.extend(
            (P.TRANSPOSE, P.TENSOR, o.tile.id, s.tile.id, -1, -1, parts, parts, parts, free, 0,
             s.tile.fmt_id, dt, 1, 0, o.key, s.key, -1, -1, -1, -1, -1)
        )  # fmt: skip
        if not i & self._tick:
            self.progress.tick(i)
        self._wrote(o)
        if self.numerics:
            o.set(s.get().T)
        return i

    # ------------------------------------------------------------------------------------------
    def program(self) -> P.Program:
        """The recorded program (flat table + CSR dependencies + tile and tensor records)."""
        from ._deps import dependencies

        rates = {dt: r for (r, dt) in self._rates.values()}
        table = P.build_table(self._rows, tuple(self._formats), rates)
        for i, n in self._dma_elements.items():  # strided DMAs move their elements, not the box
            table["bytes"][i] = math.ceil(n * float(table["bits"][i]) / 8)
        for i, n in self._dma_packets.items():  # ... in as many contiguous runs
            table["packets"][i] = n
        n_engines = P.FIRST_DMA + self._n_queues
        ptr, idx, join_ptr, join_idx = dependencies(
            table,
            self._tiles,
            self._tensors,
            self.params,
            n_engines,
            self._extra_reads,
            self._hbm_reads,
        )
        strict = None
        if self._waits:
            ptr, idx, strict = _with_waits(ptr, idx, np.array(self._waits, np.int64))
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
                pool=t.pool,
                buffer=t.buffer,
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
            dma_queues=self._n_queues,
            formats=tuple(self._formats),
            hbm_reads=dict(self._hbm_reads),
            join_ptr=join_ptr,
            join_idx=join_idx,
            dep_strict=strict,
        )
