"""The recorded program: one flat instruction table, its dependencies, tiles and tensors.

Recording appends one flat tuple of integers per instruction (:data:`ROW_FIELDS`; the cheapest
thing Python can do per instruction); :func:`build_table` turns the list into a numpy structured
array (so the dependency pass and the scheduler, numba loops, read flat columns) and derives
the rest (bits, bytes, FLOPs). The dependencies are in CSR form: instruction ``i`` waits for
``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["ENGINES", "INSTRUCTION_DTYPE", "OPS", "Program", "engine_name"]

# Engines of a NeuronCore. DMA queues follow GPSIMD: engine id FIRST_DMA + q is queue q.
TENSOR, VECTOR, SCALAR, GPSIMD, FIRST_DMA = 0, 1, 2, 3, 4
ENGINES = ("Tensor", "Vector", "Scalar", "GpSimd")

# Operations (the op column).
DMA_LOAD, DMA_STORE, MATMUL, TRANSPOSE, ACTIVATION, TENSOR_TENSOR, TENSOR_SCALAR = range(7)
REDUCE, COPY, GPSIMD_OP, MEMSET = 7, 8, 9, 10
OPS = (
    "dma_load",
    "dma_store",
    "matmul",
    "transpose",
    "activation",
    "tensor_tensor",
    "tensor_scalar",
    "reduce",
    "copy",
    "gpsimd",
    "memset",
)

# Flags (the flags column).
FLAG_OUT_READ = 1  # the output region is also read (PSUM accumulation)
FLAG_PSUM_IN = 2  # an input is in PSUM (engines read PSUM slower on some generations)

#: The integers recorded per instruction, in order (a flat tuple; regions are p0, p1, f0, f1
#: of the tile or r0, r1, c0, c1 of the HBM tensor, -1 where the operand is absent).
ROW_FIELDS = (
    "op",
    "engine",
    "out",
    "in0",
    "in1",
    "hbm",
    "partitions",  # partitions the instruction spans
    "free",  # free elements per partition it processes (matmul: moving N)
    "k",  # matmul: contraction rows (stationary partitions)
    "m",  # matmul: stationary free size
    "n_inputs",  # elementwise inputs read (Vector cost)
    "fmt",  # index into Program.formats: format of the data the engine streams
    "dtype",  # matmul: index into catalog.DTYPES, else -1
    "reload",  # matmul: stationary tile loaded (not reused from the last matmul)
    "flags",
    *(f"out_region{i}" for i in range(4)),
    *(f"in0_region{i}" for i in range(4)),
    *(f"in1_region{i}" for i in range(4)),
    *(f"hbm_region{i}" for i in range(4)),
)
N_FIELDS = len(ROW_FIELDS)
NO_REGION = (-1, -1, -1, -1)

#: One row per instruction. Regions are [p0, p1) x [f0, f1) of the tile (or rows x cols of
#: the HBM tensor); -1 where an operand is absent.
INSTRUCTION_DTYPE = np.dtype(
    [
        ("op", "u1"),
        ("engine", "i2"),
        ("out", "i4"),
        ("in0", "i4"),
        ("in1", "i4"),
        ("hbm", "i4"),
        ("partitions", "i4"),
        ("free", "i4"),
        ("k", "i4"),
        ("m", "i4"),
        ("n_inputs", "u1"),
        ("fmt", "i2"),
        ("bits", "f4"),  # bits per element of the data the engine streams
        ("rate", "f4"),  # matmul: Tensor Engine rate of the input type (x bf16)
        ("dtype", "i1"),
        ("reload", "u1"),
        ("flags", "u1"),
        ("bytes", "i8"),  # DMA: bytes moved to or from HBM
        ("flops", "f8"),
        ("out_region", "i4", (4,)),
        ("in0_region", "i4", (4,)),
        ("in1_region", "i4", (4,)),
        ("hbm_region", "i4", (4,)),
    ]
)


def build_table(rows: list[tuple], formats: tuple[str, ...], rates: dict[int, float]):
    """The structured instruction table of a recording (vectorised; no per-row Python).

    Parameters
    ----------
    rows : list of tuple
        Flat rows of :data:`ROW_FIELDS` integers.
    formats : tuple of str
        Format names by index (the ``fmt`` column).
    rates : dict
        catalog.DTYPES index -> Tensor Engine rate (x bf16) of the generation.
    """
    n = len(rows)
    table = np.zeros(n, INSTRUCTION_DTYPE)
    if not n:
        return table
    if sum(map(len, rows)) != n * N_FIELDS:  # a recording bug, never a user error
        bad = next(i for i, r in enumerate(rows) if len(r) != N_FIELDS)
        raise RuntimeError(f"instruction {bad} was recorded with {len(rows[bad])} fields")
    flat = np.fromiter(itertools.chain.from_iterable(rows), np.int64, n * N_FIELDS)
    a = flat.reshape(n, N_FIELDS)
    for j, name in enumerate(ROW_FIELDS[:15]):
        table[name] = a[:, j]
    table["out_region"] = a[:, 15:19]
    table["in0_region"] = a[:, 19:23]
    table["in1_region"] = a[:, 23:27]
    table["hbm_region"] = a[:, 27:31]
    from ._tiles import format_bits

    bits = np.array([format_bits(f) for f in formats] or [32.0])
    table["bits"] = bits[table["fmt"]]
    dt = table["dtype"]
    if rates:
        lut = np.zeros(max(rates) + 1)
        for d, r in rates.items():
            lut[d] = r
        table["rate"] = np.where(dt >= 0, lut[np.maximum(dt, 0)], 0.0)
    op = table["op"]
    dma = (op == DMA_LOAD) | (op == DMA_STORE)
    h = a[:, 27:31]
    cells = (h[:, 1] - h[:, 0]) * (h[:, 3] - h[:, 2])
    table["bytes"] = np.where(dma, np.ceil(cells * table["bits"] / 8), 0).astype(np.int64)
    mm = op == MATMUL
    table["flops"] = np.where(
        mm, 2.0 * table["k"].astype(np.float64) * table["m"] * table["free"], 0.0
    )
    return table


def engine_name(engine: int) -> str:
    """``"Tensor"``, ``"Vector"``, ``"Scalar"``, ``"GpSimd"`` or ``"DMA q3"``."""
    return ENGINES[engine] if engine < FIRST_DMA else f"DMA q{engine - FIRST_DMA}"


@dataclass(frozen=True)
class TileRecord:
    """What the program remembers of a tile (for occupancy and the SBUF/PSUM maps)."""

    id: int
    name: str
    space: str
    shape: tuple[int, int]
    fmt: str
    offset: int
    bytes_per_partition: int
    alloc_instr: int  # instructions recorded before it was allocated
    free_instr: int  # instructions recorded before it was freed (-1: alive at the end)
    pool: str | None = None  # the rotating-buffer pool it belongs to
    buffer: int = 0  # its buffer number in that pool

    @property
    def label(self) -> str:
        """``"b tile[1]"`` for buffer 1 of pool ``"b tile"``, else the tile's name."""
        return f"{self.pool}[{self.buffer}]" if self.pool is not None else self.name


@dataclass(frozen=True)
class TensorRecord:
    """What the program remembers of an HBM tensor."""

    id: int
    name: str
    shape: tuple[int, int]
    fmt: str


@dataclass(frozen=True)
class Program:
    """A recorded kernel: instruction table, dependencies, tiles and HBM tensors.

    Attributes
    ----------
    table : numpy.ndarray
        Structured array of :data:`INSTRUCTION_DTYPE`, in program (issue) order.
    dep_ptr, dep_idx : numpy.ndarray
        CSR dependencies: RAW, WAR and WAW on physical memory (SBUF and PSUM byte ranges per
        partition, HBM tensor regions), the latest one per engine or DMA queue.
    tiles : tuple of TileRecord
    tensors : tuple of TensorRecord
    chip : str
        The chip the kernel was checked against.
    dma_queues : int
        DMA queues of the core (engines ``FIRST_DMA ...``).
    formats : tuple of str
        Format names by index (the table's ``fmt`` column).
    """

    table: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    tiles: tuple[TileRecord, ...]
    tensors: tuple[TensorRecord, ...]
    chip: str
    dma_queues: int
    formats: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.table)

    @property
    def n_engines(self) -> int:
        return FIRST_DMA + self.dma_queues

    def deps(self, i: int) -> np.ndarray:
        """Instructions that instruction ``i`` waits for."""
        return self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]]

    def counts(self) -> dict[str, int]:
        """Instructions per operation."""
        ops, n = np.unique(self.table["op"], return_counts=True)
        return {OPS[o]: int(c) for o, c in zip(ops, n, strict=True)}

    def describe(self, i: int) -> str:
        """One instruction in words: ``"#12 matmul on Tensor: psum0[0:128,0:512] <- ..."``."""
        r = self.table[i]
        names = {t.id: t.label for t in self.tiles}

        def reg(tid, region):
            if tid < 0:
                return ""
            p0, p1, f0, f1 = (int(x) for x in region)
            return f"{names[int(tid)]}[{p0}:{p1},{f0}:{f1}]"

        parts = [reg(r["out"], r["out_region"]), reg(r["in0"], r["in0_region"])]
        if r["in1"] >= 0:
            parts.append(reg(r["in1"], r["in1_region"]))
        if r["hbm"] >= 0:
            t = self.tensors[int(r["hbm"])]
            a, b, c, d = (int(x) for x in r["hbm_region"])
            parts.insert(1 if r["op"] == DMA_LOAD else 0, f"{t.name}[{a}:{b},{c}:{d}]")
        parts = [p for p in parts if p]
        return (
            f"#{i} {OPS[r['op']]} on {engine_name(int(r['engine']))}: {parts[0]} <- "
            + ", ".join(parts[1:])
        )
