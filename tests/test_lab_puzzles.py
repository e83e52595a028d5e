"""The kernel-puzzle lab's checks: every reference solution passes and meets its stated
constraint, the constraint is what the reference and the hardware rule give (bytes: the
minimum; instructions: the reference's count; time: the reference's plus about 20%), an
untouched template is "not attempted", and plausible wrong kernels (at least two per puzzle)
get the diagnosis of their slip.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core, exercises
from trnlab.exercises import lab04 as pz
from trnlab.exercises._puzzle import _inputs, _output, run_kernel

#: An activation's own row sums (the default, idle, leaves the engine's registers as they were).
RESET = nisa.reduce_cmd.reset_reduce

IDS = [p.key for p in pz.PUZZLES]


@pytest.fixture(autouse=True)
def _lenient():
    before = exercises.settings()
    exercises.configure(strict=False, solutions=False)
    yield
    exercises.configure(**before)


def _says(puzzle, kernel) -> str:
    result = puzzle.check(kernel)
    assert result.status == exercises.FAILED, f"{puzzle.key}: a wrong kernel passed"
    return result.message


@pytest.mark.parametrize("puzzle", pz.PUZZLES, ids=IDS)
def test_reference_passes_and_untouched_is_not_attempted(puzzle):
    assert puzzle.check(puzzle.kernel).status == exercises.PASSED
    assert puzzle.check(None).status == exercises.NOT_ATTEMPTED
    assert "Constraint: at most" in puzzle.question


@pytest.mark.parametrize("puzzle", pz.PUZZLES, ids=IDS)
def test_constraints_come_from_the_reference_and_the_rule(puzzle):
    c = puzzle.spec.constraint
    run = puzzle.reference_run()
    traffic = core.hbm_traffic(run)
    # bytes: each input and the output cross HBM exactly once (their sizes), no more
    minimum = sum(t["size"] for t in traffic.values())
    assert c.hbm_bytes == minimum
    assert sum(t["loaded"] + t["stored"] for t in traffic.values()) == minimum
    if c.instructions is not None:
        assert c.instructions == len(run.program)
    if c.latency_us is not None:  # the reference's time plus ~20%, up to the half us
        assert c.latency_us == math.ceil(run.latency * 1e6 * 1.2 * 2) / 2
    assert c.instructions is not None or c.latency_us is not None


@pytest.mark.parametrize("puzzle", pz.PUZZLES, ids=IDS)
def test_the_statement_keeps_the_references_recipe_for_the_feedback(puzzle):
    # How the reference spends its budget (a memset of the ones, a copy out of PSUM...) would
    # answer the puzzle's own question: the statement gives the limits and where the bytes come
    # from, and only a kernel over a limit is told the recipe.
    recipe = puzzle.spec.constraint.recipe
    assert recipe and recipe not in puzzle.question
    assert puzzle.spec.constraint.why in puzzle.question


def test_a_kernel_that_is_not_a_kernel_is_told():
    assert "decorated with @nki.jit" in _says(pz.vector_add, lambda a, b: a + b)


# 1. vector add ---------------------------------------------------------------------------------
@nki.jit
def add_256_partitions(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    return out


@nki.jit
def add_in_column_halves(a, b):
    R, C = a.shape
    out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        for c0 in nl.affine_range(0, C, C // 2):
            ta = nl.ndarray((128, C // 2), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, C // 2), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[r0 : r0 + 128, c0 : c0 + C // 2])
            nisa.dma_copy(dst=tb, src=b[r0 : r0 + 128, c0 : c0 + C // 2])
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[r0 : r0 + 128, c0 : c0 + C // 2], src=ta)
    return out


@nki.jit
def add_a_twice(a, b):
    R, C = a.shape
    out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        ta = nl.ndarray((128, C), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[r0 : r0 + 128])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=ta, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=ta)
    return out


@nki.jit
def add_first_block_only(a, b):
    R, C = a.shape
    out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray((128, C), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, C), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[0:128])
    nisa.dma_copy(dst=tb, src=b[0:128])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[0:128], src=ta)
    return out


def test_vector_add_slips():
    m = _says(pz.vector_add, add_256_partitions)
    assert "256 partitions" in m and "blocks of 128" in m
    m = _says(pz.vector_add, add_in_column_halves)
    assert "issues 16 instructions" in m and "the limit is 8" in m
    assert "The reference spends its budget as per 128-row block two loads, an add" in m
    assert "it is 2a" in _says(pz.vector_add, add_a_twice)
    assert "NaN" in _says(pz.vector_add, add_first_block_only)


# 2. bias ---------------------------------------------------------------------------------------
@nki.jit
def bias_as_scalar_operand(x, bias):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.ndarray((1, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=bias)
    for r0 in nl.affine_range(0, R, 128):
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=row)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=t)
    return out


@nki.jit
def bias_per_block(x, bias):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        row = nl.ndarray((1, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=bias)
        full = nl.broadcast_to(row, (128, C))
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        nisa.tensor_tensor(dst=t, data1=t, data2=full, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=t)
    return out


@nki.jit
def bias_per_partition(x, bias):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    full = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
    for p in range(128):  # one DMA of the bias row per partition
        nisa.dma_copy(dst=full[p : p + 1], src=bias)
    for r0 in nl.affine_range(0, R, 128):
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        nisa.tensor_tensor(dst=t, data1=t, data2=full, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=t)
    return out


def test_a_pass_says_when_the_compiler_computed_a_repeat_once():
    # The broadcast written inside the loop: the compiler (as trnlab models it) computes the
    # second one once, so the kernel meets the budget; the pass message says why.
    @nki.jit
    def in_loop(x, bias):
        R, C = x.shape
        out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
        row = nl.ndarray((1, C), dtype=bias.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=bias)
        for r0 in nl.affine_range(0, R, 128):
            every = nl.broadcast_to(row, (128, C))
            block = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=block, src=x[r0 : r0 + 128])
            total = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=total, data1=block, data2=every, op=nl.add)
            nisa.dma_copy(dst=out[r0 : r0 + 128], src=total)
        return out

    result = pz.bias.check(in_loop)
    assert result.status == exercises.PASSED
    assert "repeats an earlier one on unchanged inputs" in result.message
    assert "repeat" not in pz.bias.check(pz.bias.kernel).message  # the reference has none


def test_bias_slips():
    m = _says(pz.bias, bias_as_scalar_operand)
    assert "[128, 1]" in m and "nl.broadcast_to" in m
    m = _says(pz.bias, bias_per_block)
    assert "bias crossed HBM 2.0 times over" in m and "once, before the loop" in m
    assert "bias crossed HBM 128.0 times over" in _says(pz.bias, bias_per_partition)


# 3. row sums -----------------------------------------------------------------------------------
@nki.jit
def sums_by_halves(x):
    R, C = x.shape
    out = nl.ndarray((R, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        h = nl.ndarray((128, C // 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=h, data1=t[:, : C // 2], data2=t[:, C // 2 :], op=nl.add)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=h, axis=1)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=s)
    return out


@nki.jit
def row_means(x):
    R, C = x.shape
    out = nl.ndarray((R, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
        nisa.tensor_scalar(dst=s, data=s, op0=nl.multiply, operand0=1.0 / C)
        nisa.dma_copy(dst=out[r0 : r0 + 128], src=s)
    return out


def test_row_sums_slips():
    m = _says(pz.row_sums, sums_by_halves)
    assert "issues 8 instructions" in m and "tensor_reduce(op=nl.add, axis=1)" in m
    assert "each row's mean" in _says(pz.row_sums, row_means)


# 4. column sums --------------------------------------------------------------------------------
@nki.jit
def column_sums_one_matmul(x):
    P, C = x.shape
    out = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ones = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    acc = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=ones, moving=t)
    return out


@nki.jit
def column_sums_store_psum(x):
    P, C = x.shape
    out = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ones = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    for c0 in nl.affine_range(0, C, 512):
        acc = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=ones, moving=t[:, c0 : c0 + 512])
        nisa.dma_copy(dst=out[:, c0 : c0 + 512], src=acc)
    return out


@nki.jit
def column_sums_gpsimd(x):
    P, C = x.shape
    out = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((1, C), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=s, op=nl.add, data=t)
    nisa.dma_copy(dst=out, src=s)
    return out


def test_column_sums_slips():
    m = _says(pz.column_sums, column_sums_one_matmul)
    assert "PSUM bank" in m and "two matmuls of 512" in m
    m = _says(pz.column_sums, column_sums_store_psum)
    assert "in PSUM" in m and "nisa.tensor_copy" in m
    m = _says(pz.column_sums, column_sums_gpsimd)
    assert "1 gpsimd instruction" in m and "column of ones" in m


# 5. transpose ----------------------------------------------------------------------------------
@nki.jit
def transpose_store_psum(x):
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
        p = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=p, data=t)
        nisa.dma_copy(dst=y[:, r0 : r0 + 128], src=p)
    return y


@nki.jit
def transpose_whole(x):
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return y


@nki.jit
def transpose_reloading(x):
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, R, 128):
        for half in nl.affine_range(2):  # each 128-row block loaded twice, once per half of y
            t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
            p = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=p, data=t)
            o = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=p)
            h0 = half * (C // 2)
            nisa.dma_copy(dst=y[h0 : h0 + C // 2, r0 : r0 + 128], src=o[h0 : h0 + C // 2])
    return y


@nki.jit
def transpose_zeros(x):
    """y of the right shape, stored, but all zeros: no known slip, so the first wrong value."""
    R, C = x.shape
    y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=y, src=t)
    return y


def test_the_picture_shows_the_reference_as_a_target_until_the_learners_kernel_runs():
    """A kernel the check refuses (256 partitions) still shows the reference, flagged as not
    the learner's, so its picture leaves out how it is built."""
    assert pz.transpose.shown_run(transpose_whole)[1:] == ("the reference solution", False)
    assert pz.transpose.shown_run(None)[1:] == ("the reference solution", False)
    assert pz.transpose.shown_run(pz.transpose.kernel)[1:] == ("your kernel", True)


def test_transpose_slips():
    m = _says(pz.transpose, transpose_zeros)
    assert m.startswith("y[0, 0] is 0, expected")  # the output named as the kernel names it
    m = _says(pz.transpose, transpose_store_psum)
    assert "in PSUM" in m and "tensor_copy" in m
    m = _says(pz.transpose, transpose_whole)
    assert "256 partitions" in m and "blocks of 128 rows" in m
    assert "x crossed HBM 2.0 times over" in _says(pz.transpose, transpose_reloading)


# 6. softmax ------------------------------------------------------------------------------------
@nki.jit
def softmax_no_max(x):
    P, C = x.shape
    out = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    e = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s, reduce_cmd=RESET)
    nisa.reciprocal(dst=s, data=s)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=s)
    nisa.dma_copy(dst=out, src=e)
    return out


@nki.jit
def softmax_two_pass(x):
    P, C = x.shape
    out = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.shared_hbm)
    first = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=first, src=x)
    m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=first, axis=1, negate=True)
    again = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=again, src=x)  # the second pass reads x from HBM again
    e = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=again, bias=m, reduce_op=nl.add, reduce_res=s,
                    reduce_cmd=RESET)  # fmt: skip
    nisa.reciprocal(dst=s, data=s)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=s)
    nisa.dma_copy(dst=out, src=e)
    return out


@nki.jit
def softmax_separate_sum(x):
    P, C = x.shape
    out = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1, negate=True)
    e = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, bias=m)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=e, axis=1)
    nisa.reciprocal(dst=s, data=s)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=s)
    nisa.dma_copy(dst=out, src=e)
    return out


@nki.jit
def softmax_plus_max(x):
    """The maximum added as the bias (no negate): exp(x + max) overflows."""
    P, C = x.shape
    out = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1)
    e = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, bias=m, reduce_op=nl.add, reduce_res=s,
                    reduce_cmd=RESET)  # fmt: skip
    nisa.tensor_scalar(dst=e, data=e, op0=nl.divide, operand0=s)
    nisa.dma_copy(dst=out, src=e)
    return out


def test_softmax_slips():
    assert "subtract each row's maximum" in _says(pz.softmax, softmax_no_max)
    m = _says(pz.softmax, softmax_plus_max)
    assert "added each row's maximum instead of subtracting it" in m and "negate=True" in m
    m = _says(pz.softmax, softmax_two_pass)
    assert "x crossed HBM 2.0 times over" in m and "Two passes over x" in m
    m = _says(pz.softmax, softmax_separate_sum)
    assert "the limit is 6" in m and "reduce_op=nl.add" in m and "op0=nl.divide" in m


# 7. RMSNorm ------------------------------------------------------------------------------------
def _rms_kernel(gamma_in_loop=False, use_gamma=True, mean=True, rsqrt=True, eps=pz.RMS_EPS):
    @nki.jit
    def rms(x, gamma):
        R, C = x.shape
        out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)

        def weights():
            row = nl.ndarray((1, C), dtype=gamma.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=row, src=gamma)
            return nl.broadcast_to(row, (128, C))

        g = None if gamma_in_loop else weights()
        for r0 in nl.affine_range(0, R, 128):
            gg = weights() if gamma_in_loop else g
            t = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r0 : r0 + 128])
            sq = nl.ndarray((128, C), dtype=nl.float32, buffer=nl.sbuf)
            ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss,
                            reduce_cmd=RESET)  # fmt: skip
            nisa.tensor_scalar(dst=ss, data=ss, op0=nl.multiply, operand0=1.0 / C if mean else 1.0,
                               op1=nl.add, operand1=eps)  # fmt: skip
            if rsqrt:
                nisa.activation(dst=ss, op=nl.rsqrt, data=ss)
            else:  # the same value in two instructions
                nisa.activation(dst=ss, op=nl.sqrt, data=ss)
                nisa.reciprocal(dst=ss, data=ss)
            y = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=ss)
            if use_gamma:
                nisa.tensor_tensor(dst=y, data1=y, data2=gg, op=nl.multiply)
            nisa.dma_copy(dst=out[r0 : r0 + 128], src=y)
        return out

    return rms


def test_rmsnorm_slips():
    assert "gamma is missing" in _says(pz.rmsnorm, _rms_kernel(use_gamma=False))
    assert "uses their mean" in _says(pz.rmsnorm, _rms_kernel(mean=False))
    m = _says(pz.rmsnorm, _rms_kernel(gamma_in_loop=True))
    assert "gamma crossed HBM 2.0 times over" in m and "Load gamma once" in m
    m = _says(pz.rmsnorm, _rms_kernel(rsqrt=False))
    assert "the limit is 19" in m and "op=nl.rsqrt" in m
    # an all-zero row in the inputs: without eps it is 0 / sqrt(0)
    assert "Add eps inside the square root" in _says(pz.rmsnorm, _rms_kernel(eps=0.0))


# 8. linear + silu ------------------------------------------------------------------------------
def _linear_kernel(fused=True, op=nl.silu, with_bias=True, swapped=False):
    @nki.jit
    def layer(w, x_t, bias):
        K, N = w.shape
        M = x_t.shape[1]
        y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
        wt = nl.ndarray((K, N), dtype=w.dtype, buffer=nl.sbuf)
        xt = nl.ndarray((K, M), dtype=x_t.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((N, 1), dtype=bias.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w)
        nisa.dma_copy(dst=xt, src=x_t)
        nisa.dma_copy(dst=bt, src=bias)
        acc = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.psum)
        if swapped:
            nisa.nc_matmul(dst=acc, stationary=xt, moving=wt)
        else:
            nisa.nc_matmul(dst=acc, stationary=wt, moving=xt)
        y = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.sbuf)
        if fused:
            nisa.activation(dst=y, op=op, data=acc, bias=bt if with_bias else None)
        else:
            nisa.tensor_copy(dst=y, src=acc)
            nisa.activation(dst=y, op=op, data=y, bias=bt)
        nisa.dma_copy(dst=y_t, src=y)
        return y_t

    return layer


def test_linear_silu_slips():
    m = _says(pz.linear_silu, _linear_kernel(fused=False))
    assert "issues 7 instructions" in m and "Fuse" in m
    assert "that is relu" in _says(pz.linear_silu, _linear_kernel(op=nl.relu))
    assert "the bias is missing" in _says(pz.linear_silu, _linear_kernel(with_bias=False))
    m = _says(pz.linear_silu, _linear_kernel(swapped=True))
    assert "swap the operands" in m and "stationary.T @ moving" in m


# 9. double-buffered matmul ---------------------------------------------------------------------
@nki.jit
def matmul_one_buffer(a_t, b):
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
    ct = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=ct, src=acc)
    nisa.dma_copy(dst=c, src=ct)
    return c


@nki.jit
def matmul_overwrites(a_t, b):
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    ct = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    for k0 in nl.sequential_range(0, K, 128):
        acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)  # a fresh tile per K tile
        a_tile = nl.ndarray((128, M), dtype=a_t.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_t[k0 : k0 + 128])
        nisa.dma_copy(dst=b_tile, src=b[k0 : k0 + 128])
        nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
        nisa.tensor_copy(dst=ct, src=acc)
    nisa.dma_copy(dst=c, src=ct)
    return c


@nki.jit
def matmul_stores_every_step(a_t, b):
    """Right values, but c is stored after every K tile, not once at the end."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k0 in nl.sequential_range(0, K, 128):
        a_tile = nl.ndarray((128, M), dtype=a_t.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_t[k0 : k0 + 128])
        nisa.dma_copy(dst=b_tile, src=b[k0 : k0 + 128])
        nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
        ct = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ct, src=acc)
        nisa.dma_copy(dst=c, src=ct)
    return c


def test_double_buffer_slips():
    m = _says(pz.double_buffer, matmul_one_buffer)
    assert (
        f"the limit is {pz.double_buffer.spec.constraint.latency_us:g} us" in m
        and "inside the nl.affine_range body" in m
        and "makes each load wait for the matmul before it: about 34 us" in m
    )
    # the gap is named against the reference, engine by engine
    assert "Where yours spends more than the reference: DMA q0" in m and "(the reference:" in m
    assert "only the last K tile" in _says(pz.double_buffer, matmul_overwrites)
    m = _says(pz.double_buffer, matmul_stores_every_step)
    assert "c crossed HBM 8.0 times over" in m and "Store c once" in m
    assert "load it once" not in m  # the inputs crossed once: no advice about them


def test_a_passing_kernel_is_told_what_it_spent_against_each_limit():
    result = pz.double_buffer.check(pz.double_buffer.kernel)
    run = pz.double_buffer.reference_run()
    assert result.status == exercises.PASSED
    assert (
        f"{run.latency * 1e6:,.2f} us on trn1 (limit {pz.double_buffer.spec.constraint.latency_us:g})"
        in result.message
    )
    assert "bytes over HBM (limit 1,572,864)" in result.message


# 10. attention ---------------------------------------------------------------------------------
def _attention_kernel(scaled=True, spill=False, copy=False, normalised=True):
    @nki.jit
    def attn(q_t, k_t, v):
        d, S = q_t.shape
        T = k_t.shape[1]
        out = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.shared_hbm)
        qt = nl.ndarray((d, S), dtype=q_t.dtype, buffer=nl.sbuf)
        kt = nl.ndarray((d, T), dtype=k_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qt, src=q_t)
        nisa.dma_copy(dst=kt, src=k_t)
        sc = nl.ndarray((S, T), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=sc, stationary=qt, moving=kt)
        s_sb = sc  # the max and the exp read the scores in PSUM
        if copy or spill:  # an extra pass: the scores copied to SBUF first
            s_sb = nl.ndarray((S, T), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s_sb, src=sc)
        if spill:  # the scores through HBM and back
            tmp = nl.ndarray((S, T), dtype=nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=tmp, src=s_sb)
            s_sb = nl.ndarray((S, T), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s_sb, src=tmp)
        scale = 1.0 / float(np.sqrt(d)) if scaled else 1.0
        m = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m, op=nl.maximum, data=s_sb, axis=1, negate=True)
        nisa.tensor_scalar(dst=m, data=m, op0=nl.multiply, operand0=scale)
        p = nl.ndarray((S, T), dtype=nl.bfloat16, buffer=nl.sbuf)
        tot = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=p, op=nl.exp, data=s_sb, bias=m, scale=scale, reduce_op=nl.add,
                        reduce_res=tot, reduce_cmd=RESET)  # fmt: skip
        acc = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.psum)
        for j0 in nl.affine_range(0, T, 128):
            vt = nl.ndarray((128, d), dtype=v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=vt, src=v[j0 : j0 + 128])
            pp = nl.ndarray((128, S), dtype=nl.bfloat16, buffer=nl.psum)
            nisa.nc_transpose(dst=pp, data=p[:, j0 : j0 + 128])
            pt = nl.ndarray((128, S), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pt, src=pp)
            nisa.nc_matmul(dst=acc, stationary=pt, moving=vt)
        inv = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.sbuf)
        if normalised:
            nisa.reciprocal(dst=inv, data=tot)
        else:  # forgets the division by the row sums
            nisa.memset(dst=inv, value=1.0)
        o = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out, src=o)
        return out

    return attn


def test_attention_slips():
    assert "not scaled by 1/sqrt(d)" in _says(pz.attention, _attention_kernel(scaled=False))
    m = _says(pz.attention, _attention_kernel(normalised=False))
    assert "not yet divided by each row's sum of exp" in m
    m = _says(pz.attention, _attention_kernel(spill=True))
    assert "crossed HBM" in m and "never store them to HBM" in m
    # a kernel written differently from the reference passes ...
    assert pz.attention.check(_attention_kernel()).status == exercises.PASSED
    # ... and one that spends a pass copying the scores to SBUF first sits at the limit (about
    # 20% above the reference): its values are right, and it is judged on time alone
    copied = pz.attention.check(_attention_kernel(copy=True))
    if copied.status != exercises.PASSED:
        limit = f"the limit is {pz.attention.spec.constraint.latency_us:g} us"
        assert copied.message.startswith("correct, but it takes") and limit in copied.message


def test_inputs_are_rounded_to_the_arguments_dtype():
    vals, args = _inputs(pz.attention.spec)
    assert [a.name for a in args] == ["q_t", "k_t", "v"]
    q = vals["q_t"]
    assert np.array_equal(q, q.astype(np.float32).astype(np.float64))


# --- The prediction before puzzle 9: what rotating buffers buy ---------------------------------
def test_the_one_buffer_kernel_computes_the_same_product_more_slowly():
    run, vals, problem = run_kernel(pz.one_buffer_matmul, pz.double_buffer.spec)
    assert problem is None
    _, out, problem = _output(run)
    assert problem is None
    np.testing.assert_allclose(
        np.asarray(out, np.float64), vals["a_t"].T @ vals["b"], rtol=1e-3, atol=1e-2
    )
    one, rotating = pz.buffer_runs()
    assert one.latency > rotating.latency
    assert pz.buffer_speedup.reference() == pytest.approx(one.latency / rotating.latency)


def test_buffer_speedup_prediction_feedback():
    p = pz.buffer_speedup
    model = p.reference()
    one, rotating = pz.buffer_runs()
    assert p.check(None).status == exercises.NOT_ATTEMPTED
    assert p.check(model).status == exercises.PASSED
    assert p.check(round(model, 1)).status == exercises.PASSED  # rounded: 1.6
    assert p.check(f"{model:.2f}x").status == exercises.PASSED  # with its unit
    # "the matmul is all one buffer loses": a speed-up near 1, told what it left out
    near_one = p.check(1.1)
    assert near_one.status == exercises.FAILED
    assert "whole latency and the waits between engines" in near_one.message
    # double buffering's rule of thumb, 2x, is not the answer here: told why
    thumb = p.check(2.0)
    assert thumb.status == exercises.FAILED
    assert "rule of thumb" in thumb.message and "not the loads" in thumb.message
    # too high: told how far, with both times
    high = p.check(3 * model)
    assert high.status == exercises.FAILED and "3x too high" in high.message
    assert f"{one.latency * 1e6:.1f} us" in high.message
    assert f"{rotating.latency * 1e6:.1f} us" in high.message
    for answer in (0.011, 1.1, 3 * model, 1e9, "1e-9"):
        message = p.check(answer).message
        assert not re.search(r"(?<![\d.])0%|\d{5,},?\d*%|\d{11,}", message), message


def test_a_dma_transpose_in_puzzle_5_is_told_the_puzzle_is_set_on_trainium():
    """Trainium2's DMA engines transpose (nisa.dma_transpose); the puzzles run on trn1, whose
    do not: the learner is told both."""

    @nki.jit
    def by_dma(x):
        R, C = x.shape
        y = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
        for r0 in nl.affine_range(0, R, 128):
            t = nl.ndarray((C, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=x[r0 : r0 + 128, :])
            nisa.dma_copy(dst=y[:, r0 : r0 + 128], src=t)
        return y

    result = pz.transpose.check(by_dma)
    assert result.status == exercises.FAILED
    assert "no DMA transpose" in result.message and "set on Trainium" in result.message
