"""The recorded program: one flat instruction table, its dependencies, tiles and tensors.

Running a kernel under a :class:`KernelContext` appends one row per instruction. The table is a
numpy structured array (so the scheduler, a numba loop, reads flat columns), and the
dependencies are in CSR form: instruction ``i`` waits for ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``.
"""

from __future__ import annotations

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
        ("partitions", "i4"),  # partitions the instruction spans
        ("free", "i4"),  # free elements per partition it processes (matmul: moving N)
        ("k", "i4"),  # matmul: contraction rows (stationary partitions)
        ("m", "i4"),  # matmul: stationary free size
        ("n_inputs", "u1"),  # elementwise inputs read (Vector cost)
        ("bits", "f4"),  # bits per element of the data the engine streams
        ("rate", "f4"),  # matmul: Tensor Engine rate of the input type (x bf16)
        ("dtype", "i1"),  # matmul: index into catalog.DTYPES, else -1
        ("reload", "u1"),  # matmul: stationary tile loaded (not reused from the last matmul)
        ("bytes", "i8"),  # DMA: bytes moved to or from HBM
        ("flops", "f8"),
        ("out_region", "i4", (4,)),
        ("in0_region", "i4", (4,)),
        ("in1_region", "i4", (4,)),
        ("hbm_region", "i4", (4,)),
    ]
)


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
        CSR dependencies: RAW, WAR and WAW on tile regions, one entry per engine at most.
    tiles : tuple of TileRecord
    tensors : tuple of TensorRecord
    chip : str
        The chip the kernel was checked against.
    dma_queues : int
        DMA queues of the core (engines ``FIRST_DMA ...``).
    """

    table: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    tiles: tuple[TileRecord, ...]
    tensors: tuple[TensorRecord, ...]
    chip: str
    dma_queues: int

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
        names = {t.id: t.name for t in self.tiles}

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
