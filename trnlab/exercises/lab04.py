"""Exercises of the kernel-puzzle lab: ten small NKI kernels in rising difficulty, each under
a stated constraint (HBM bytes, instructions, latency) derived from its reference solution and
the hardware rule it teaches. See :mod:`trnlab.exercises._puzzle` for how a puzzle is judged.

Every answer is an ``@nki.jit`` kernel written as on a Trainium instance (``import
trnlab.nki as nki``, ``trnlab.nki.language as nl``, ``trnlab.nki.isa as nisa``). The
references below are the solutions (hidden in the learner edition; the instructor edition
shows their source).

The byte limits are the minimum: every input byte read from HBM once, every output byte
written once (a kernel that keeps what it loaded in SBUF needs no more). The instruction
limits are the reference's count: each puzzle has a way to do its work with that many. The
latency limits are the reference's time on the model, plus a margin of about 20%, rounded up
to the half microsecond.
"""

from __future__ import annotations

import numpy as np

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

from ._predict import Prediction
from ._puzzle import Constraint, Puzzle, Slip, Spec

__all__ = [
    "PUZZLES",
    "attention",
    "bias",
    "buffer_runs",
    "buffer_speedup",
    "column_sums",
    "double_buffer",
    "linear_silu",
    "one_buffer_matmul",
    "reference_attention",
    "reference_bias",
    "reference_column_sums",
    "reference_double_buffer",
    "reference_linear_silu",
    "reference_rmsnorm",
    "reference_row_sums",
    "reference_softmax",
    "reference_transpose",
    "reference_vector_add",
    "rmsnorm",
    "row_sums",
    "softmax",
    "transpose",
    "vector_add",
]

F32, BF16 = 4, 2  # bytes per element


def _gauss(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# 1. Vector add over partitions
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_vector_add(a, b):
    """Rows on partitions, 128 at a time: two loads, one Vector add, one store per block."""
    R, C = a.shape
    out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        ta = nl.ndarray((128, C), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, C), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[r0 : r0 + 128])
        nisa.dma_copy(dst=tb, src=b[r0 : r0 + 128])
        total = nl.ndarray((128, C), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=total)
    return out


ADD_SHAPE = (256, 512)
vector_add = Puzzle(
    "lab04.vector_add",
    f"Puzzle 1, vector add over partitions: out = a + b for a, b [{ADD_SHAPE[0]} x "
    f"{ADD_SHAPE[1]}] fp32 in HBM.",
    Spec(
        inputs=lambda rng: [(n, _gauss(rng, ADD_SHAPE), "float32") for n in ("a", "b")],
        expected=lambda v: v["a"] + v["b"],
        constraint=Constraint(
            hbm_bytes=3 * ADD_SHAPE[0] * ADD_SHAPE[1] * F32,
            instructions=8,
            why="a, b and out cross HBM once each",
            recipe="per 128-row block two loads, an add, a store",
        ),
        tolerance=1e-6,
        slips=(Slip(lambda v: 2 * v["a"], "it is 2a: add a to b, not to itself"),),
        advice={
            "TileTooLargeError": "A tile has at most 128 partitions: loop over the rows in "
            "blocks of 128 (nl.affine_range(0, R, 128)).",
            "instructions": "One DMA can carry a whole [128 x 512] block: do not split a "
            "block's rows or columns into several transfers or adds.",
        },
    ),
    reference_vector_add,
    hints=(
        "256 rows do not fit on 128 partitions: two blocks of 128 rows, each with every column.",
        "Per block: nisa.dma_copy a's and b's rows into two SBUF tiles (128, 512), "
        "nisa.tensor_tensor(dst=..., data1=ta, data2=tb, op=nl.add), then nisa.dma_copy the "
        "sum to out[r0:r0 + 128].",
    ),
    solution_text="Two 128-row blocks; per block two loads, one tensor_tensor add, one store.",
)


# ----------------------------------------------------------------------------------------------
# 2. Broadcast a bias (a row added to every row)
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_bias(x, bias):
    """The bias row is loaded once onto one partition and copied to all 128 partitions once
    (``nl.broadcast_to``: a matmul of a row of ones by the row); every block then adds it."""
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.ndarray((1, C), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=bias)
    every_partition = nl.broadcast_to(row, (128, C))
    for r0 in nl.affine_range(0, R, 128):
        block = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block, src=x[r0 : r0 + 128])
        shifted = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=shifted, data1=block, data2=every_partition, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=shifted)
    return out


BIAS_SHAPE = (256, 512)
bias = Puzzle(
    "lab04.bias",
    f"Puzzle 2, broadcast a bias: out = x + bias for x [{BIAS_SHAPE[0]} x {BIAS_SHAPE[1]}] "
    f"and bias [1 x {BIAS_SHAPE[1]}] (one value per column), fp32. An engine reads a per-"
    "partition value ([128, 1]) for free; a row must first be on every partition.",
    Spec(
        inputs=lambda rng: [
            ("x", _gauss(rng, BIAS_SHAPE), "float32"),
            ("bias", _gauss(rng, (1, BIAS_SHAPE[1])), "float32"),
        ],
        expected=lambda v: v["x"] + v["bias"],
        constraint=Constraint(
            hbm_bytes=(2 * BIAS_SHAPE[0] + 1) * BIAS_SHAPE[1] * F32,
            instructions=9,
            why="x, out and the bias cross HBM once; the bias reaches the 128 partitions once",
            recipe="the bias loaded once and broadcast once (a memset of ones and a matmul); "
            "per block a load, an add that reads the bias where the matmul left it, a store",
        ),
        tolerance=1e-5,
        slips=(
            Slip(
                lambda v: v["x"] + v["bias"][0, 0],
                "every column got bias[0]: the bias is one value per column, not a single number",
            ),
        ),
        advice={
            "HardwareRuleError": "tensor_scalar and activation take a per-partition operand "
            "([128, 1]); a bias along the free axis must be a full [128, C] tile: load the row "
            "once and nl.broadcast_to it to (128, C).",
            "bytes": "Load the bias row once, before the loop, and broadcast it on chip "
            "(nl.broadcast_to(row, (128, C))) instead of reading it from HBM for every block "
            "or every partition.",
        },
    ),
    reference_bias,
    hints=(
        "nisa.tensor_scalar(..., operand0=t) wants t of shape [128, 1]: one value per "
        "partition. Your bias is one value per column, so it must be a [128, 512] tile.",
        "Load bias into a (1, 512) SBUF tile once, before the row loop; "
        "nl.broadcast_to(row, (128, 512)) makes it a 128-partition tile on chip (one matmul "
        "with a row of ones as the stationary operand; trnlab charges that matmul, an "
        "assumption, docs/nki.md). Then one tensor_tensor add per block, reading the "
        "broadcast where it lies.",
    ),
    solution_text="Bias row loaded once, broadcast to 128 partitions once, one add per block.",
)


# ----------------------------------------------------------------------------------------------
# 3. Free-axis reduction
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_row_sums(x):
    """One Vector-engine reduce along the free axis per 128-row block."""
    R, C = x.shape
    out = nl.ndarray((R, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        block = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block, src=x[r0 : r0 + 128])
        sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sums, op=nl.add, data=block, axis=1)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=sums)
    return out


ROWS_SHAPE = (256, 512)
row_sums = Puzzle(
    "lab04.row_sums",
    f"Puzzle 3, free-axis reduction: out[r, 0] = the sum of row r of x [{ROWS_SHAPE[0]} x "
    f"{ROWS_SHAPE[1]}] fp32; out is [{ROWS_SHAPE[0]} x 1] fp32.",
    Spec(
        inputs=lambda rng: [("x", _gauss(rng, ROWS_SHAPE), "float32")],
        expected=lambda v: v["x"].sum(axis=1, keepdims=True),
        scale=lambda v: np.abs(v["x"]).sum(axis=1, keepdims=True),
        constraint=Constraint(
            hbm_bytes=(ROWS_SHAPE[0] * ROWS_SHAPE[1] + ROWS_SHAPE[0]) * F32,
            instructions=6,
            why="x read once, the sums written once",
            recipe="per block a load, one reduce, a store",
        ),
        tolerance=1e-5,
        slips=(
            Slip(
                lambda v: v["x"].mean(axis=1, keepdims=True),
                "that is each row's mean: the puzzle asks for the sum",
            ),
        ),
        advice={
            "instructions": "One nisa.tensor_reduce(op=nl.add, axis=1) sums a whole block's "
            "rows along the free axis in one instruction: no adds column by column or half "
            "by half.",
        },
    ),
    reference_row_sums,
    hints=(
        "Rows on partitions: each partition holds one row, so a row's sum runs along the free "
        "axis, inside one partition.",
        "nisa.tensor_reduce(dst=sums, op=nl.add, data=block, axis=1) with sums a (128, 1) "
        "fp32 tile.",
    ),
    solution_text="Per 128-row block: load, one tensor_reduce(op=nl.add, axis=1), store.",
)


# ----------------------------------------------------------------------------------------------
# 4. Cross-partition reduction by a matmul with ones
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_column_sums(x):
    """The Tensor Engine sums over the partitions it contracts: ones[128, 1] as the stationary
    operand gives one row of column sums in PSUM, 512 columns (one PSUM bank) per matmul."""
    P, C = x.shape
    out = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.shared_hbm)
    block = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=block, src=x)
    ones = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    sums = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.sbuf)
    for c0 in nl.affine_range(0, C, 512):
        acc = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=ones, moving=block[:, c0 : c0 + 512])
        nisa.tensor_copy(dst=sums[:, c0 : c0 + 512], src=acc)
    nisa.dma_copy(dst=out, src=sums)
    return out


COLS_SHAPE = (128, 1024)
column_sums = Puzzle(
    "lab04.column_sums",
    f"Puzzle 4, cross-partition reduction: out[0, c] = the sum of column c of x "
    f"[{COLS_SHAPE[0]} x {COLS_SHAPE[1]}] bf16, i.e. over the 128 partitions; out is "
    f"[1 x {COLS_SHAPE[1]}] fp32. The Vector and Scalar engines work inside each partition; "
    "do it on the Tensor Engine, with no GpSimd instruction (its partition reduce is not "
    "the puzzle).",
    Spec(
        inputs=lambda rng: [("x", _gauss(rng, COLS_SHAPE), "bfloat16")],
        expected=lambda v: v["x"].sum(axis=0, keepdims=True),
        scale=lambda v: np.abs(v["x"]).sum(axis=0, keepdims=True),
        constraint=Constraint(
            hbm_bytes=COLS_SHAPE[0] * COLS_SHAPE[1] * BF16 + COLS_SHAPE[1] * F32,
            instructions=7,
            why="x read once, the sums written once",
            recipe="a load, a memset of the ones, one matmul and one copy per PSUM bank of "
            "512 columns, a store",
        ),
        tolerance=1e-4,
        forbidden=("gpsimd",),
        advice={
            "PsumBankOverflowError": "A matmul's result lives in one PSUM bank: at most 512 "
            "fp32 columns. Do the 1024 columns as two matmuls of 512.",
            "OperandPlacementError": "DMA moves data between HBM and SBUF only: copy the PSUM "
            "result to SBUF (nisa.tensor_copy) and store from there.",
            "gpsimd": "The puzzle rules out GpSimd: sum over partitions with nisa.nc_matmul, a column of ones as "
            "the stationary operand and x as the moving one.",
        },
    ),
    reference_column_sums,
    hints=(
        "nc_matmul contracts over the partition axis: dst[m, n] = sum over k of "
        "stationary[k, m] * moving[k, n]. With stationary = ones [128, 1], m is 1 and dst is "
        "the column sums.",
        "nisa.memset(dst=ones, value=1.0) fills the ones; a PSUM tile holds 512 fp32 per "
        "partition, so two matmuls of 512 columns; copy each to SBUF (nisa.tensor_copy) "
        "before the one store.",
    ),
    solution_text="ones[128, 1] stationary, x moving in two 512-column halves into PSUM; copy "
    "both to one SBUF row; one store.",
)


# ----------------------------------------------------------------------------------------------
# 5. Transpose
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_transpose(x):
    """Each [128 x C] block goes through the Tensor Engine (a transpose is a matmul by the
    identity) into PSUM, is copied to SBUF and stored as columns of y."""
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        block = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block, src=x[r0 : r0 + 128])
        flipped = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=flipped, data=block)
        col = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=col, src=flipped)
        nisa.dma_copy(dst=y[:, r0 : r0 + 128], src=col)
    return y


T_SHAPE = (256, 128)
transpose = Puzzle(
    "lab04.transpose",
    f"Puzzle 5, transpose: y = x.T for x [{T_SHAPE[0]} x {T_SHAPE[1]}] fp32; y is "
    f"[{T_SHAPE[1]} x {T_SHAPE[0]}]. Moving a value from one partition to another is what "
    "the Vector and Scalar engines' elementwise instructions cannot do.",
    Spec(
        inputs=lambda rng: [("x", _gauss(rng, T_SHAPE), "float32")],
        expected=lambda v: v["x"].T,
        constraint=Constraint(
            hbm_bytes=2 * T_SHAPE[0] * T_SHAPE[1] * F32,
            instructions=8,
            latency_us=6.5,
            why="x read once and y written once; the time is the reference's 5.3 us plus "
            "about 20%; a DMA that transposes on the way moves every element as a packet of "
            "its own, over 200 us",
            recipe="per 128-row block a load, a transpose, a copy out of PSUM and a store",
        ),
        tolerance=1e-6,
        slips=(
            Slip(
                lambda v: v["x"].reshape(T_SHAPE[1], T_SHAPE[0]),
                "it is x reshaped, not transposed: the values must change partitions",
            ),
        ),
        advice={
            "OperandPlacementError": "nc_transpose writes PSUM, and DMA reads SBUF only: copy "
            "the transposed block to SBUF with nisa.tensor_copy before storing it.",
            "TileTooLargeError": "A tile has at most 128 partitions: transpose x in blocks of "
            "128 rows.",
            "latency": "A DMA whose access pattern transposes (x read column by column) moves "
            "each 4-byte element as a DMA packet of its own, and packets, not bytes, then set "
            "the time. Move whole rows by DMA and transpose on the Tensor Engine "
            "(nisa.nc_transpose). (Trainium2's DMA engines can transpose whole blocks on the "
            "way, nisa.dma_transpose; this puzzle runs on Trainium, whose DMA cannot.)",
            "HardwareRuleError": "(The puzzles are set on Trainium, trn1.)",
        },
    ),
    reference_transpose,
    hints=(
        "nisa.nc_transpose(dst=psum_tile, data=sbuf_tile) flips a block on the Tensor "
        "Engine: a [128 x 128] block of x becomes a [128 x 128] block of y in PSUM.",
        "Per 128-row block r0 of x: load it, nc_transpose into a (128, 128) PSUM tile, "
        "tensor_copy to SBUF, dma_copy to y[:, r0:r0 + 128].",
    ),
    solution_text="Per block: load, nc_transpose into PSUM, tensor_copy to SBUF, store as "
    "y's columns.",
)


# ----------------------------------------------------------------------------------------------
# 6. Row softmax
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_softmax(x):
    """One pass: the negated row maximum (Vector reduce); exp(x - max) and its row sum in one
    Scalar activation; one Vector divide by the per-partition sum."""
    P, C = x.shape
    out = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=x)
    shift = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=shift, op=nl.maximum, data=rows, axis=1, negate=True)
    e = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=rows, bias=shift, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
    probs = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=probs, data=e, op0=nl.divide, operand0=total)
    nisa.dma_copy(dst=out, src=probs)
    return out


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _naive_softmax(v):
    e = np.exp(v["x"].astype(np.float32))  # fp32, as the engine computes it: overflows
    return e / e.sum(axis=1, keepdims=True)


def _plus_max_softmax(v):
    x = v["x"].astype(np.float32)
    e = np.exp(x + x.max(axis=1, keepdims=True))  # fp32, as the engine computes it: overflows
    return e / e.sum(axis=1, keepdims=True)


SOFTMAX_SHAPE = (128, 512)
softmax = Puzzle(
    "lab04.softmax",
    f"Puzzle 6, row softmax: out[r] = exp(x[r]) / sum(exp(x[r])) for x [{SOFTMAX_SHAPE[0]} "
    f"x {SOFTMAX_SHAPE[1]}] fp32 whose logits reach about +-190 (exp(89) already overflows fp32).",
    Spec(
        inputs=lambda rng: [("x", _gauss(rng, SOFTMAX_SHAPE, 40.0), "float32")],
        expected=lambda v: _softmax(v["x"]),
        scale=lambda v: np.ones_like(v["x"]),
        constraint=Constraint(
            hbm_bytes=2 * SOFTMAX_SHAPE[0] * SOFTMAX_SHAPE[1] * F32,
            instructions=6,
            why="one pass: x read once, out written once",
            recipe="a load, a max, an exp that also sums (the model counts its row sum as a "
            "second Scalar instruction, listed as a copy), a divide by the per-row sum, a "
            "store",
        ),
        tolerance=1e-5,
        slips=(
            Slip(
                _naive_softmax,
                "exp(x) overflows fp32 for logits above about 88 "
                "(inf / inf is NaN): subtract each row's maximum first (softmax is unchanged "
                "by it)",
            ),
            Slip(
                _plus_max_softmax,
                "the bias added each row's maximum instead of subtracting it: exp(x + max) "
                "overflows fp32 (inf / inf is NaN). Pass -max: tensor_reduce(..., "
                "negate=True), or multiply the maximum by -1",
            ),
        ),
        advice={
            "bytes": "Two passes over x: keep the rows in SBUF and compute the max, the exp "
            "and the scaling from the one tile you loaded.",
            "instructions": "nisa.activation can sum what it writes along the free axis "
            "(reduce_op=nl.add, reduce_res=..., reduce_cmd=nisa.reduce_cmd.reset_reduce), and "
            "one tensor_scalar divides a block by a "
            "per-partition value (op0=nl.divide): no reciprocal first.",
        },
    ),
    reference_softmax,
    hints=(
        "Rows on partitions. A row maximum is nisa.tensor_reduce(op=nl.maximum, axis=1); "
        "negate=True gives -max, ready to use as a bias.",
        "nisa.activation(dst=e, op=nl.exp, data=rows, bias=neg_max, reduce_op=nl.add, "
        "reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce) computes exp(x - max) and "
        "its row sum in one instruction (reset_reduce: this activation's sum; the default, "
        "idle, leaves the engine's sum registers as they were).",
        "nisa.tensor_scalar(dst=probs, data=e, op0=nl.divide, operand0=total): one value "
        "per partition divides its whole row.",
    ),
    solution_text="Load; -max by a negated reduce; exp with bias -max and a fused row sum; "
    "one divide by the sum; store.",
)


# ----------------------------------------------------------------------------------------------
# 7. RMSNorm
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_rmsnorm(x, gamma):
    """gamma loaded and broadcast to 128 partitions once; per block: squares summed by the
    Scalar engine as it squares, mean + eps, rsqrt, then scale by it and by gamma."""
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    g_row = nl.ndarray((1, C), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_row, src=gamma)
    g = nl.broadcast_to(g_row, (128, C))
    for r0 in nl.affine_range(0, R, 128):
        block = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block, src=x[r0 : r0 + 128])
        squares = nl.ndarray((128, C), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=block, reduce_op=nl.add, reduce_res=ms,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
        nisa.tensor_scalar(
            dst=ms, data=ms, op0=nl.multiply, operand0=1.0 / C, op1=nl.add, operand1=RMS_EPS
        )
        nisa.activation(dst=ms, op=nl.rsqrt, data=ms)
        y = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=block, op0=nl.multiply, operand0=ms)
        nisa.tensor_tensor(dst=y, data1=y, data2=g, op=nl.multiply)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=y)
    return out


RMS_SHAPE, RMS_EPS = (256, 512), 1e-6


def _with_zero_row(x: np.ndarray) -> np.ndarray:
    """The inputs with row 7 all zeros: an RMSNorm without eps divides it by 0."""
    x[7] = 0.0
    return x


def _rms(v, mean=True, gamma=True, eps=True):
    x = v["x"]
    ms = (x * x).mean(axis=1, keepdims=True) if mean else (x * x).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = x / np.sqrt(ms + (RMS_EPS if eps else 0.0))
    return y * v["gamma"] if gamma else y


rmsnorm = Puzzle(
    "lab04.rmsnorm",
    f"Puzzle 7, RMSNorm: out[r] = x[r] / sqrt(mean(x[r]^2) + {RMS_EPS:g}) * gamma for x "
    f"[{RMS_SHAPE[0]} x {RMS_SHAPE[1]}] and gamma [1 x {RMS_SHAPE[1]}] (one weight per "
    "column), fp32.",
    Spec(
        inputs=lambda rng: [
            ("x", _with_zero_row(_gauss(rng, RMS_SHAPE)), "float32"),
            ("gamma", _gauss(rng, (1, RMS_SHAPE[1]), 0.5) + 1.0, "float32"),
        ],
        expected=_rms,
        constraint=Constraint(
            hbm_bytes=(2 * RMS_SHAPE[0] + 1) * RMS_SHAPE[1] * F32,
            instructions=19,
            why="x, out and gamma cross HBM once; gamma reaches the 128 partitions once",
            recipe="gamma loaded and broadcast once (a load, a memset of ones, a matmul); per "
            "block a load, a square-and-sum (two Scalar instructions), a mean + eps, an "
            "rsqrt, two multiplies and a store",
        ),
        tolerance=1e-4,
        slips=(
            Slip(
                lambda v: _rms(v, gamma=False),
                "gamma is missing: multiply each column by its weight",
            ),
            Slip(
                lambda v: _rms(v, mean=False),
                "you divided by the root of the sum of squares; "
                "RMSNorm uses their mean (divide the sum by the number of columns)",
            ),
            Slip(
                lambda v: _rms(v, eps=False),
                "row 7 (all zeros) came out NaN: 0 / sqrt(0). Add eps inside the square "
                "root, as the statement does; it is what keeps an all-zero row finite",
            ),
        ),
        advice={
            "bytes": "Load gamma once, before the loop over blocks, and broadcast it on chip once.",
            "instructions": "nisa.activation(op=nl.square, reduce_op=nl.add, reduce_res=..., "
            "reduce_cmd=nisa.reduce_cmd.reset_reduce) "
            "squares and sums in one instruction; nisa.tensor_scalar takes two operators "
            "(multiply by 1/C, then add eps) in one; nisa.activation(op=nl.rsqrt) is "
            "1 / sqrt in one instruction (no sqrt followed by a reciprocal).",
        },
    ),
    reference_rmsnorm,
    hints=(
        "Rows on partitions. The per-row statistic is a [128, 1] tile: it multiplies a block "
        "with one tensor_scalar. gamma is per column: like the bias of puzzle 2, broadcast it "
        "to (128, C) once.",
        "nisa.activation(dst=sq, op=nl.square, data=block, reduce_op=nl.add, reduce_res=ss, "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce); "
        "nisa.tensor_scalar(dst=ss, data=ss, op0=nl.multiply, operand0=1.0 / C, op1=nl.add, "
        "operand1=eps); nisa.activation(dst=ss, op=nl.rsqrt, data=ss).",
    ),
    solution_text="gamma broadcast once; per block: square-and-sum, mean + eps, rsqrt, "
    "multiply by it, multiply by gamma, store.",
)


# ----------------------------------------------------------------------------------------------
# 8. Fused linear + activation
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_linear_silu(w, x_t, bias):
    """y_t = silu(w.T @ x_t + bias): output features on partitions, so the bias is one value
    per partition and one Scalar activation applies it and silu as it empties PSUM."""
    K, N = w.shape
    M = x_t.shape[1]
    y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
    w_tile = nl.ndarray((K, N), dtype=w.dtype, buffer=nl.sbuf)
    x_tile = nl.ndarray((K, M), dtype=x_t.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((N, 1), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=w)
    nisa.dma_copy(dst=x_tile, src=x_t)
    nisa.dma_copy(dst=b_tile, src=bias)
    acc = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=w_tile, moving=x_tile)
    y = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.silu, data=acc, bias=b_tile)
    nisa.dma_copy(dst=y_t, src=y)
    return y_t


LIN_K, LIN_N, LIN_M = 128, 128, 512


def _silu(z):
    return z / (1.0 + np.exp(-z))


def _linear(v, bias=True):
    return v["w"].T @ v["x_t"] + (v["bias"] if bias else 0.0)


linear_silu = Puzzle(
    "lab04.linear_silu",
    f"Puzzle 8, fused linear + activation: y_t = silu(w.T @ x_t + bias) for w [{LIN_K} x "
    f"{LIN_N}] and x_t [{LIN_K} x {LIN_M}] (bf16) and bias [{LIN_N} x 1] (fp32); y_t is "
    f"[{LIN_N} x {LIN_M}] fp32. silu(z) = z * sigmoid(z).",
    Spec(
        inputs=lambda rng: [
            ("w", _gauss(rng, (LIN_K, LIN_N), LIN_K**-0.5), "bfloat16"),
            ("x_t", _gauss(rng, (LIN_K, LIN_M)), "bfloat16"),
            ("bias", _gauss(rng, (LIN_N, 1)), "float32"),
        ],
        expected=lambda v: _silu(_linear(v)),
        scale=lambda v: np.abs(v["w"]).T @ np.abs(v["x_t"]) + np.abs(v["bias"]),
        constraint=Constraint(
            hbm_bytes=(LIN_K * LIN_N + LIN_K * LIN_M) * BF16 + LIN_N * F32 + LIN_N * LIN_M * F32,
            instructions=6,
            why="each operand read once, y_t written once",
            recipe="three loads, one matmul, one instruction out of PSUM, one store",
        ),
        tolerance=2e-3,
        slips=(
            Slip(
                lambda v: _silu(_linear(v, bias=False)),
                "the bias is missing: pass it to "
                "the activation (bias=b_tile, one value per partition)",
            ),
            Slip(
                lambda v: np.maximum(_linear(v), 0),
                "that is relu; the puzzle asks for silu (op=nl.silu)",
            ),
            Slip(lambda v: _linear(v), "no activation was applied: op=nl.silu"),
        ),
        advice={
            "instructions": "Fuse: nisa.activation reads PSUM, adds the bias and applies silu "
            "in the one instruction that empties PSUM; a tensor_copy first, or a separate "
            "add, is a second pass over every element.",
        },
    ),
    reference_linear_silu,
    hints=(
        "With w as the stationary operand, nisa.nc_matmul(dst=acc, stationary=w_tile, "
        "moving=x_tile) gives w.T @ x_t in PSUM: output features on partitions.",
        "nisa.activation(dst=y, op=nl.silu, data=acc, bias=b_tile) with b_tile a (128, 1) "
        "fp32 tile: bias and silu in the instruction that reads PSUM.",
    ),
    solution_text="Three loads, one matmul into PSUM, one activation (silu, bias) out of "
    "PSUM, one store.",
)


# ----------------------------------------------------------------------------------------------
# 9. Double-buffered tiled matmul
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_double_buffer(a_t, b):
    """K tiles declared inside the loop body: the compiler (and the model) give them rotating
    buffers, so the next tile's loads run while this tile's matmul does; the partial sums stay
    in one PSUM tile (NKI adds into a PSUM tile already written)."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k0 in nl.affine_range(0, K, 128):
        a_tile = nl.ndarray((128, M), dtype=a_t.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_t[k0 : k0 + 128])
        nisa.dma_copy(dst=b_tile, src=b[k0 : k0 + 128])
        nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
    c_tile = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c_tile, src=acc)
    nisa.dma_copy(dst=c, src=c_tile)
    return c


MM_K, MM_M, MM_N = 1024, 128, 512
double_buffer = Puzzle(
    "lab04.double_buffer",
    f"Puzzle 9, a double-buffered tiled matmul: c = a_t.T @ b for a_t [{MM_K} x {MM_M}] and "
    f"b [{MM_K} x {MM_N}] (bf16); c is [{MM_M} x {MM_N}] fp32. K is {MM_K // 128} tiles of "
    "128: the loads of the next K tile must overlap the matmul of this one.",
    Spec(
        inputs=lambda rng: [
            ("a_t", _gauss(rng, (MM_K, MM_M)), "bfloat16"),
            ("b", _gauss(rng, (MM_K, MM_N)), "bfloat16"),
        ],
        expected=lambda v: v["a_t"].T @ v["b"],
        scale=lambda v: np.abs(v["a_t"]).T @ np.abs(v["b"]),
        constraint=Constraint(
            hbm_bytes=(MM_K * MM_M + MM_K * MM_N) * BF16 + MM_M * MM_N * F32,
            latency_us=25.0,
            why="a_t, b and c cross HBM once; the time is the reference's 20.8 us plus about 20%",
            recipe="tiles declared inside the K loop, which rotate between buffers so the "
            "loads run ahead of the matmuls (one buffer per operand makes each load wait for "
            "the matmul before it: about 34 us)",
        ),
        tolerance=1e-3,
        slips=(
            Slip(
                lambda v: v["a_t"][-128:].T @ v["b"][-128:],
                "c holds only the last K "
                "tile's product: each matmul overwrote PSUM. Keep one PSUM tile for all of K "
                "(declared before the loop) and let nc_matmul add into it",
            ),
        ),
        advice={
            "latency": "If a_tile and b_tile are declared once, before the K loop, each load "
            "must wait until the matmul has read the previous tile (one buffer). Declare them "
            "inside the nl.affine_range body: each iteration gets its own rotating buffer, so "
            "loads run ahead of the matmuls.",
            "bytes": "Each K tile of a_t and b is needed by one matmul: load it once.",
        },
    ),
    reference_double_buffer,
    hints=(
        "One PSUM tile acc (128, 512) fp32, declared before the K loop, receives all eight "
        "matmuls: NKI adds into a PSUM tile already written since it was created.",
        "Declare the a and b tiles inside the nl.affine_range(0, K, 128) body (not before it): "
        "the model, like the NKI compiler, gives them rotating buffers, so iteration k + 1's "
        "DMAs overlap iteration k's matmul.",
    ),
    solution_text="PSUM accumulator before the loop; a and b tiles declared inside the "
    "affine_range body (rotating buffers); one copy out of PSUM and one store.",
)


# Predict, then run: what rotating buffers buy puzzle 9's matmul
@nki.jit
def one_buffer_matmul(a_t, b):
    """Puzzle 9's matmul with one buffer per operand: the a and b tiles are declared once,
    before the K loop, so the load of K tile k + 1 must wait until matmul k has read tile k."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    a_tile = nl.ndarray((128, M), dtype=a_t.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
    for k0 in nl.affine_range(0, K, 128):
        nisa.dma_copy(dst=a_tile, src=a_t[k0 : k0 + 128])
        nisa.dma_copy(dst=b_tile, src=b[k0 : k0 + 128])
        nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
    c_tile = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c_tile, src=acc)
    nisa.dma_copy(dst=c, src=c_tile)
    return c


def buffer_runs():
    """(one-buffer run, rotating-buffer run) of puzzle 9's matmul, timing only."""
    from ._puzzle import run_kernel

    one, _, problem = run_kernel(one_buffer_matmul, double_buffer.spec, numerics=False)
    if problem:  # pragma: no cover - the kernel above runs
        raise RuntimeError(f"lab04.buffer_speedup: the one-buffer kernel failed: {problem}")
    return one, double_buffer.reference_run()


def _buffer_speedup() -> float:
    one, rotating = buffer_runs()
    return one.latency / rotating.latency


def _buffer_steps() -> dict[str, float]:
    """Per K step (us): one buffer's whole step, its load, matmul and hand-offs; the rotating
    kernel's busiest DMA queue."""
    from trnlab import core

    one, rotating = buffer_runs()
    steps = MM_K // 128

    def per_step(run, prefix):
        rows = core.time_breakdown(run)
        return max(r["busy_s"] for r in rows if r["resource"].startswith(prefix)) / steps * 1e6

    f = {
        "steps": steps,
        "one_us": one.latency * 1e6,
        "rotating_us": rotating.latency * 1e6,
        "one_step": one.latency / steps * 1e6,
        "one_load": per_step(one, "DMA"),
        "matmul": per_step(one, "Tensor"),
        "rotating_load": per_step(rotating, "DMA"),
    }
    f["handoff"] = f["one_step"] - f["one_load"] - f["matmul"]
    return f


def _explain_buffers(predicted: float, model: float) -> str:
    f = _buffer_steps()
    why = (
        f"with one buffer per operand the kernel takes {f['one_us']:.1f} us, with rotating "
        f"buffers {f['rotating_us']:.1f} us. With one buffer each of the {f['steps']} K steps "
        f"takes about {f['one_step']:.1f} us, one part after the other: the a and b tiles' "
        f"loads on the one load queue, about {f['one_load']:.2f} us with nothing to share "
        f"their fixed costs with; the matmul, "
        f"{f['matmul']:.2f} us; and about {f['handoff']:.2f} us of hand-offs (the matmul waits "
        "until the load has completed, the next load until the matmul has read the tile it "
        f"would overwrite). With rotating buffers a step costs about {f['rotating_load']:.2f} us, "
        "the load queue's time for a step's two transfers: transfers follow each other with "
        "several in flight, so their fixed costs overlap, and the matmuls and hand-offs hide "
        "under the next loads; the first loads, the copy out of PSUM and the store add the "
        "rest."
    )
    if predicted < 1.2:
        why += (
            " Counting only the matmul as the time saved gives a speed-up near 1: what one "
            "buffer exposes is each load's whole latency and the waits between engines."
        )
    elif predicted >= 1.9:
        why += (
            " A speed-up of 2 is the rule of thumb for double buffering when a step's load and "
            "its compute take equal time and one hides the other whole. Here they are far from "
            "equal, and the rotating kernel still pays its load queue's time for every step: "
            "it hides the matmuls and the hand-offs, not the loads."
        )
    return why


buffer_speedup = Prediction(
    "lab04.buffer_speedup",
    f"Predict before puzzle 9: its matmul ({MM_K // 128} K steps, each loading an a tile "
    f"[128 x {MM_M}] and a b tile [128 x {MM_N}] (bf16) on one DMA queue, then one matmul into "
    "PSUM) written with one buffer per operand (the a and b tiles declared once, before the K "
    "loop), against the same kernel with rotating buffers (the tiles declared inside the loop "
    "body). How many times faster is the rotating one (one-buffer time / rotating time)?",
    _buffer_speedup,
    what="the speed-up",
    unit="x",
    explain=_explain_buffers,
    within=0.15,  # 2x, double buffering's rule of thumb, is 24% off and must not pass
    hints=(
        "One buffer: every step is load, then matmul, one after the other, and each engine "
        "waits for the other to finish with the tile. Rotating buffers: the loads go back to "
        "back on their queue and the matmuls hide under them.",
        "A [128 x 512] bf16 tile is a small transfer: most of its time is fixed cost (set-up and "
        "completion), which transfers in flight together share but a lone transfer pays whole. "
        "The matmul itself is short (about 0.2 us).",
    ),
    solution_text="speedup = one-buffer time / rotating time = (lone loads + matmul + hand-offs) "
    "/ (the load queue's time for two transfers) per K step; run the next cell for both times",
)


# ----------------------------------------------------------------------------------------------
# 10. An attention block
# ----------------------------------------------------------------------------------------------
@nki.jit
def reference_attention(q_t, k_t, v):
    """out = softmax(q k^T / sqrt(d)) v for one head. Scores [S x T] in one PSUM bank (queries
    on partitions); the softmax's max, exp and row sum straight from PSUM; P^T per 128 keys by
    the Tensor Engine, then P V accumulated in PSUM; the 1/sum applied once at the end."""
    d, S = q_t.shape
    T = k_t.shape[1]
    out = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.shared_hbm)
    q_tile = nl.ndarray((d, S), dtype=q_t.dtype, buffer=nl.sbuf)
    k_tile = nl.ndarray((d, T), dtype=k_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_tile, src=q_t)
    nisa.dma_copy(dst=k_tile, src=k_t)
    scores = nl.ndarray((S, T), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=scores, stationary=q_tile, moving=k_tile)
    scale = 1.0 / float(np.sqrt(d))
    shift = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=shift, op=nl.maximum, data=scores, axis=1, negate=True)
    nisa.tensor_scalar(dst=shift, data=shift, op0=nl.multiply, operand0=scale)
    p = nl.ndarray((S, T), dtype=nl.bfloat16, buffer=nl.sbuf)
    total = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=p,
        op=nl.exp,
        data=scores,
        bias=shift,
        scale=scale,
        reduce_op=nl.add,
        reduce_res=total,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    acc = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.psum)
    for j0 in nl.affine_range(0, T, 128):
        v_tile = nl.ndarray((128, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=v_tile, src=v[j0 : j0 + 128])
        p_t_psum = nl.ndarray((128, S), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_transpose(dst=p_t_psum, data=p[:, j0 : j0 + 128])
        p_t = nl.ndarray((128, S), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=p_t, src=p_t_psum)
        nisa.nc_matmul(dst=acc, stationary=p_t, moving=v_tile)
    inv = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=total)
    o = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
    nisa.dma_copy(dst=out, src=o)
    return out


ATT_D, ATT_S, ATT_T = 64, 128, 512


def _attention(v, scaled=True, normalised=True):
    s = v["q_t"].T @ v["k_t"]
    if scaled:
        s = s / np.sqrt(ATT_D)
    if not normalised:  # exp(s - max) V, never divided by the row sums
        return np.exp(s - s.max(axis=1, keepdims=True)) @ v["v"]
    return _softmax(s) @ v["v"]


attention = Puzzle(
    "lab04.attention",
    f"Puzzle 10, an attention block: out = softmax(q k^T / sqrt({ATT_D})) v for one head, "
    f"{ATT_S} queries and {ATT_T} keys, from q_t [{ATT_D} x {ATT_S}], k_t [{ATT_D} x "
    f"{ATT_T}] (q and k transposed, d on partitions) and v [{ATT_T} x {ATT_D}], bf16; out is "
    f"[{ATT_S} x {ATT_D}] fp32. The scores never leave the chip.",
    Spec(
        inputs=lambda rng: [
            ("q_t", _gauss(rng, (ATT_D, ATT_S)), "bfloat16"),
            ("k_t", _gauss(rng, (ATT_D, ATT_T)), "bfloat16"),
            ("v", _gauss(rng, (ATT_T, ATT_D)), "bfloat16"),
        ],
        expected=_attention,
        scale=lambda v: np.ones((ATT_S, 1)) * np.abs(v["v"]).max(),
        constraint=Constraint(
            hbm_bytes=(ATT_D * ATT_S + ATT_D * ATT_T + ATT_T * ATT_D) * BF16 + ATT_S * ATT_D * F32,
            latency_us=12.5,
            why="q, k and v read once and out written once, no score in HBM; the time is the "
            "reference's 10.4 us plus about 20%",
            recipe="one matmul for the scores into one PSUM bank; the max and the exp (which "
            "also sums the rows) read PSUM directly; per 128 keys a load of v, a transpose of "
            "P, its copy out of PSUM and a matmul accumulating P V; the reciprocal of the row "
            "sums and one multiply at the end",
        ),
        tolerance=1e-2,
        slips=(
            Slip(
                lambda v: _attention(v, scaled=False),
                "the scores are not scaled by "
                "1/sqrt(d): pass scale= to the exp (and scale the max the same way)",
            ),
            Slip(
                lambda v: _attention(v, normalised=False),
                "the output is exp(s - max) V, not yet divided by each row's sum of exp: "
                "divide the [S x d] result by the row sums once at the end (cheaper than "
                "dividing P)",
            ),
        ),
        advice={
            "bytes": "The score matrix [S x T] fits one PSUM bank and P fits SBUF: never store "
            "them to HBM and load them back.",
            "PsumBankOverflowError": "A PSUM tile holds at most 512 fp32 per partition: the "
            "scores of 128 queries by 512 keys fit exactly; keep the keys at 512 per tile.",
        },
    ),
    reference_attention,
    hints=(
        "Scores: nisa.nc_matmul(dst=scores, stationary=q_tile [d, S], moving=k_tile [d, T]) "
        "gives q k^T [S, T] in PSUM, queries on partitions: softmax runs along the free axis, "
        "as in puzzle 6, reading PSUM directly.",
        "P V contracts over the keys, so the keys must be on partitions: transpose P in blocks "
        "of 128 keys (nc_transpose into PSUM, tensor_copy to SBUF) and accumulate "
        "nc_matmul(dst=acc [S, d], stationary=p_t [128, S], moving=v_tile [128, d]).",
        "Divide by the row sums once, at the end, on the way out of PSUM: a reciprocal of the "
        "[S, 1] sums, then one tensor_scalar multiply (as the reference does), or op0=nl.divide "
        "with the sums as its operand, one instruction fewer.",
    ),
    solution_text="Scores in one PSUM bank; max, exp (scaled, fused row sum) from PSUM; P^T "
    "per 128 keys by nc_transpose; P V accumulated in PSUM; 1/sum on the way out.",
)

PUZZLES = (
    vector_add,
    bias,
    row_sums,
    column_sums,
    transpose,
    softmax,
    rmsnorm,
    linear_silu,
    double_buffer,
    attention,
)
