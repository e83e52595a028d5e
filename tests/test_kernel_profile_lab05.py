"""Lab 05's kernel checks, on NKI kernels: the references pass; correct alternatives (other
tile sizes, other loop orders) pass; adversarial kernels fail with the right diagnosis:
padded with useless matmuls, reloading an operand, a two-pass epilogue (on chip or through
HBM), wrong values, NaN from reading memory never written."""

from __future__ import annotations

import re

import numpy as np
import pytest

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core, exercises
from trnlab.exercises import lab05


@pytest.fixture(autouse=True)
def _lenient():
    before = exercises.settings()
    exercises.configure(strict=False, solutions=False)
    yield
    exercises.configure(**before)


def _message(ex, kernel) -> str:
    r = ex.check(kernel)
    assert r.status == exercises.FAILED, r
    return r.message


@pytest.mark.parametrize(
    ("ex", "ref"),
    [
        (lab05.correct_matmul, lab05.reference_tiled),
        (lab05.fits_sbuf, lab05.reference_streamed),
        (lab05.fast, lab05.reference_blocked),
        (lab05.epilogue, lab05.reference_epilogue),
    ],
)
def test_reference_kernels_pass_and_untouched_is_not_attempted(ex, ref):
    assert ex.check(ref).status == exercises.PASSED
    assert ex.check(None).status == exercises.NOT_ATTEMPTED
    assert ex.reference() is ref


# --- kernels a learner might write --------------------------------------------------------------
def _tiled(a_t, b, tile_n=512, accumulate=None, full_stationary=False, order="mnk"):
    """A tiled matmul with knobs for the mistakes the checks must diagnose."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    outer, inner = (
        ((0, M, 128), (0, N, tile_n)) if order == "mnk" else ((0, N, tile_n), (0, M, 128))
    )
    for o0 in range(*outer):
        for i0 in range(*inner):
            m0, n0 = (o0, i0) if order == "mnk" else (i0, o0)
            ms, ns = min(128, M - m0), min(tile_n, N - n0)
            acc = nl.ndarray((128, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, K, 128):
                ks = min(128, K - k0)
                a_tile = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((128, tile_n), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0 : k0 + ks, m0 : m0 + ms])
                nisa.dma_copy(dst=b_tile[:ks, :ns], src=b[k0 : k0 + ks, n0 : n0 + ns])
                rows = 128 if full_stationary else ks
                nisa.nc_matmul(
                    dst=acc[:ms, :ns],
                    stationary=a_tile[:rows, :ms],
                    moving=b_tile[:rows, :ns],
                    accumulate=accumulate if accumulate is not None else None,
                )
            c_tile = nl.ndarray((128, tile_n), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


@nki.jit
def n_outer(a_t, b):
    return _tiled(a_t, b, order="nmk")


@nki.jit
def overwrites_psum(a_t, b):
    return _tiled(a_t, b, accumulate=False)


@nki.jit
def accumulates_from_the_start(a_t, b):
    return _tiled(a_t, b, accumulate=True)


@nki.jit
def reads_unloaded_rows(a_t, b):
    return _tiled(a_t, b, full_stationary=True)


@nki.jit
def small_n_tiles(a_t, b):
    return _tiled(a_t, b, tile_n=64)


@nki.jit
def forgets_to_return(a_t, b):
    _tiled(a_t, b)


@nki.jit
def returns_another_tensor(a_t, b):
    M = a_t.shape[1]
    c = nl.ndarray((M, b.shape[1]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    _tiled(a_t, b)  # computes and stores its own tensor
    return c


def test_correct_alternatives_pass():
    assert lab05.correct_matmul.check(n_outer).status == exercises.PASSED


def test_wrong_matmuls_are_told_what_is_wrong():
    assert "only the last K tile" in _message(lab05.correct_matmul, overwrites_psum)
    msg = _message(lab05.correct_matmul, accumulates_from_the_start)
    assert "NaN" in msg and "never written" in msg and "accumulate=True" in msg
    msg = _message(lab05.correct_matmul, reads_unloaded_rows)
    assert "NaN" in msg and "[:ks, :ms]" in msg
    assert "returned no HBM tensor" in _message(lab05.correct_matmul, forgets_to_return)
    assert "never stored" in _message(lab05.correct_matmul, returns_another_tensor)
    assert "NKI kernel" in _message(lab05.correct_matmul, 42)
    assert "raised ZeroDivisionError" in _message(lab05.correct_matmul, lambda a_t, b: 1 / 0)
    old_style = _message(lab05.correct_matmul, lambda ctx, a_t, b, c: None)
    assert "TypeError" in old_style and "def my_kernel(a_t, b)" in old_style


def test_a_slow_kernel_is_told_where_its_time_goes():
    msg = _message(lab05.correct_matmul, small_n_tiles)
    assert "slow" in msg and "reference tiled kernel" in msg
    assert "a_t" in msg and "times over" in msg  # 64-wide N tiles reload A 16 times
    assert "Where the time goes: DMA q" in msg and "The set-up per transfer bounds" in msg
    # 24 KiB transfers: one queue's 102 GB/s moves them in a third of the set-up
    assert "fewer, larger transfers" in msg


def test_the_diagnosis_weighs_one_queues_rate_not_the_cores():
    # The reference tiled kernel's 80 KiB transfers (32 and 128 KiB alternating): the set-up
    # (0.84 us) and one queue's bytes (0.80 us) are close; the core's full DMA bandwidth,
    # 0.30 us, is out of one queue's reach and must not be offered as the bound.
    text = lab05.diagnose(lab05.profile(lab05.reference_tiled, (512, 512, 1024)), (512, 512, 1024))
    assert "The two bounds are close" in text and "load each byte of A and B once" in text
    assert "which one queue does not reach" in text and "bounds the kernel" not in text


# --- SBUF fit -------------------------------------------------------------------------------------
@nki.jit
def hoisted(a_t, b):
    """All of K's tiles of an A strip and a B strip at once: overflows SBUF for a long K."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for m0 in range(0, M, 128):
        ms = min(128, M - m0)
        a_tiles = []
        for k0 in range(0, K, 128):
            ks = min(128, K - k0)
            a_tile = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0 : k0 + ks, m0 : m0 + ms])
            a_tiles.append(a_tile)
        for n0 in range(0, N, 512):
            ns = min(512, N - n0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            b_tiles = []
            for k0 in range(0, K, 128):
                ks = min(128, K - k0)
                b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_tile[:ks, :ns], src=b[k0 : k0 + ks, n0 : n0 + ns])
                b_tiles.append(b_tile)
            for j, k0 in enumerate(range(0, K, 128)):
                ks = min(128, K - k0)
                nisa.nc_matmul(
                    dst=acc[:ms, :ns], stationary=a_tiles[j][:ks, :ms], moving=b_tiles[j][:ks, :ns]
                )
            c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


@nki.jit
def streamed_reloading_a(a_t, b, chunk=16):
    """Streams K like the reference, but loads A's chunk again for every N tile: it fits,
    and A crosses HBM twice."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for m0 in range(0, M, 128):
        ms = min(128, M - m0)
        for n0 in range(0, N, 512):
            ns = min(512, N - n0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for c0 in range(0, K, chunk * 128):
                a_tiles, b_tiles = [], []
                for k0 in range(c0, min(K, c0 + chunk * 128), 128):
                    ks = min(128, K - k0)
                    a_tile = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                    b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a_tile[:ks, :ms], src=a_t[k0 : k0 + ks, m0 : m0 + ms])
                    nisa.dma_copy(dst=b_tile[:ks, :ns], src=b[k0 : k0 + ks, n0 : n0 + ns])
                    a_tiles.append((a_tile, ks))
                    b_tiles.append(b_tile)
                for (a_tile, ks), b_tile in zip(a_tiles, b_tiles, strict=True):
                    nisa.nc_matmul(
                        dst=acc[:ms, :ns], stationary=a_tile[:ks, :ms], moving=b_tile[:ks, :ns]
                    )
            c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


@nki.jit
def streamed_in_chunks_of_8(a_t, b):
    return lab05.reference_streamed(a_t, b, chunk=8)


def test_sbuf_fit_diagnoses_the_overflow_and_the_operand_that_reloads():
    msg = _message(lab05.fits_sbuf, hoisted)
    assert "refused" in msg and "SBUF" in msg and "180224" in msg and "chunks" in msg
    msg = _message(lab05.fits_sbuf, streamed_reloading_a)
    assert "it fits, but" in msg
    # every N tile (2 of them) loads A again; every M tile (4) loads B again
    assert "a_t 2.0 times over" in msg and "b 4.0 times over" in msg
    assert "Where the time goes: DMA q" in msg
    msg = _message(lab05.fits_sbuf, lab05.reference_tiled)
    assert "target" in msg and "times over" in msg
    assert lab05.fits_sbuf.check(streamed_in_chunks_of_8).status == exercises.PASSED


# --- useful utilisation ---------------------------------------------------------------------------
@nki.jit
def padded(a_t, b):
    """The blocked kernel, with every matmul repeated into a scratch PSUM tile: the Tensor
    Engine is busier, and C takes longer."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    k_spans = [(k0, min(128, K - k0)) for k0 in range(0, K, 128)]
    for g0 in range(0, M, 512):
        gs = min(512, M - g0)
        a_tiles = []
        for k0, ks in k_spans:
            a_tile = nl.ndarray((128, 512), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile[:ks, :gs], src=a_t[k0 : k0 + ks, g0 : g0 + gs])
            a_tiles.append(a_tile)
        for h0 in range(0, N, 1024):
            hs = min(1024, N - h0)
            b_tiles = []
            for k0, ks in k_spans:
                b_tile = nl.ndarray((128, 1024), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_tile[:ks, :hs], src=b[k0 : k0 + ks, h0 : h0 + hs])
                b_tiles.append(b_tile)
            for m0 in range(0, gs, 128):
                ms = min(128, gs - m0)
                for n0 in range(0, hs, 512):
                    ns = min(512, hs - n0)
                    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                    waste = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                    for j, (_, ks) in enumerate(k_spans):
                        st, mv = a_tiles[j][:ks, m0 : m0 + ms], b_tiles[j][:ks, n0 : n0 + ns]
                        nisa.nc_matmul(dst=acc[:ms, :ns], stationary=st, moving=mv)
                        for _ in range(2):
                            nisa.nc_matmul(dst=waste[:ms, :ns], stationary=st, moving=mv)
                    c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
                    nisa.dma_copy(
                        dst=c[g0 + m0 : g0 + m0 + ms, h0 + n0 : h0 + n0 + ns], src=c_tile[:ms, :ns]
                    )
    return c


@nki.jit
def a_in_one_tensor(a_t, b):
    """Written differently from the reference: all of A in one SBUF tensor (its K tiles side
    by side along the free axis), B streamed one N tile at a time; each byte crosses HBM
    once, as in the reference."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    kt = -(-K // 128)
    a_all = nl.ndarray((128, kt * M), dtype=a_t.dtype, buffer=nl.sbuf)
    for j in range(kt):
        ks = min(128, K - 128 * j)
        nisa.dma_copy(dst=a_all[:ks, j * M : (j + 1) * M], src=a_t[128 * j : 128 * j + ks, :])
    for n0 in nl.affine_range(0, N, 512):
        ns = min(512, N - n0)
        strip = nl.ndarray((128, kt * 512), dtype=b.dtype, buffer=nl.sbuf)
        for j in range(kt):
            ks = min(128, K - 128 * j)
            nisa.dma_copy(
                dst=strip[:ks, 512 * j : 512 * j + ns], src=b[128 * j : 128 * j + ks, n0 : n0 + ns]
            )
        for m0 in range(0, M, 128):
            ms = min(128, M - m0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for j in range(kt):
                ks = min(128, K - 128 * j)
                nisa.nc_matmul(
                    dst=acc[:ms, :ns],
                    stationary=a_all[:ks, j * M + m0 : j * M + m0 + ms],
                    moving=strip[:ks, 512 * j : 512 * j + ns],
                )
            c_tile = nl.ndarray((128, 512), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile[:ms, :ns], src=acc[:ms, :ns])
            nisa.dma_copy(dst=c[m0 : m0 + ms, n0 : n0 + ns], src=c_tile[:ms, :ns])
    return c


def test_useful_utilisation_never_counts_padding():
    shape = lab05.FAST_SHAPE
    run = lab05.profile(padded, shape)
    ref = lab05.profile(lab05.reference_blocked, shape)
    # the Tensor Engine is busier than the target, so counting executed matmuls would pass it
    assert run.utilisation > lab05.UTILISATION_TARGET
    assert run.latency > ref.latency
    m, k, n = shape
    assert lab05.useful_utilisation(run, shape) == pytest.approx(
        2 * m * n * k / run.latency / core.core_params("trn1").peak_flops("bf16")
    )
    msg = _message(lab05.fast, padded)
    assert "3.0x the FLOPs the product needs" in msg and "never count" in msg
    assert "reference blocked kernel" in msg
    msg = _message(lab05.fast, lab05.reference_tiled)
    assert "50%" in msg and "times over" in msg and "DMA q" in msg
    assert lab05.fast.check(a_in_one_tensor).status == exercises.PASSED


# --- the fused epilogue ---------------------------------------------------------------------------
def _layer(w, x_t, bias, tile_m=512, tile_n=128, passes="fused"):
    K, N = w.shape
    M = x_t.shape[1]
    y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
    for n0 in range(0, N, tile_n):
        ns = min(tile_n, N - n0)
        b_tile = nl.ndarray((tile_n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile[:ns, :], src=bias[n0 : n0 + ns, :])
        for m0 in range(0, M, tile_m):
            ms = min(tile_m, M - m0)
            acc = nl.ndarray((tile_n, tile_m), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, K, 128):
                ks = min(128, K - k0)
                w_tile = nl.ndarray((128, tile_n), dtype=w.dtype, buffer=nl.sbuf)
                x_tile = nl.ndarray((128, tile_m), dtype=x_t.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=w_tile[:ks, :ns], src=w[k0 : k0 + ks, n0 : n0 + ns])
                nisa.dma_copy(dst=x_tile[:ks, :ms], src=x_t[k0 : k0 + ks, m0 : m0 + ms])
                nisa.nc_matmul(
                    dst=acc[:ns, :ms], stationary=w_tile[:ks, :ns], moving=x_tile[:ks, :ms]
                )
            y_tile = nl.ndarray((tile_n, tile_m), dtype=nl.float32, buffer=nl.sbuf)
            if passes == "fused":
                nisa.activation(
                    dst=y_tile[:ns, :ms], op=nl.relu, data=acc[:ns, :ms], bias=b_tile[:ns, :]
                )
            elif passes == "no bias":
                nisa.activation(dst=y_tile[:ns, :ms], op=nl.relu, data=acc[:ns, :ms])
            elif passes in ("two on chip", "two through HBM"):
                nisa.tensor_copy(dst=y_tile[:ns, :ms], src=acc[:ns, :ms])
                if passes == "two on chip":
                    nisa.activation(
                        dst=y_tile[:ns, :ms], op=nl.relu, data=y_tile[:ns, :ms], bias=b_tile[:ns, :]
                    )
                else:
                    nisa.tensor_scalar(
                        dst=y_tile[:ns, :ms],
                        data=y_tile[:ns, :ms],
                        op0=nl.add,
                        operand0=b_tile[:ns, :],
                    )
            nisa.dma_copy(dst=y_t[n0 : n0 + ns, m0 : m0 + ms], src=y_tile[:ns, :ms])
    if passes == "two through HBM":  # relu in a second pass over y_t, through HBM
        for n0 in range(0, N, 128):
            for m0 in range(0, M, 512):
                t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=y_t[n0 : n0 + 128, m0 : m0 + 512])
                nisa.activation(dst=t, op=nl.relu, data=t)
                nisa.dma_copy(dst=y_t[n0 : n0 + 128, m0 : m0 + 512], src=t)
    return y_t


@nki.jit
def fused_small_tiles(w, x_t, bias):
    return _layer(w, x_t, bias, tile_m=256, tile_n=64)


@nki.jit
def two_pass_on_chip(w, x_t, bias):
    return _layer(w, x_t, bias, passes="two on chip")


@nki.jit
def two_pass_through_hbm(w, x_t, bias):
    return _layer(w, x_t, bias, passes="two through HBM")


@nki.jit
def no_bias(w, x_t, bias):
    return _layer(w, x_t, bias, passes="no bias")


def test_epilogue_is_judged_per_output_element_with_any_tiles():
    assert lab05.epilogue.check(fused_small_tiles).status == exercises.PASSED
    msg = _message(lab05.epilogue, two_pass_on_chip)
    assert "not fused" in msg and "262,144 of the 262,144 elements" in msg
    assert "went through 2 engine instructions" in msg
    msg = _message(lab05.epilogue, two_pass_through_hbm)
    assert "not fused" in msg and "back from HBM" in msg
    assert "values are wrong" in _message(lab05.epilogue, no_bias)


def test_element_passes_counts_each_element_of_a_mixed_kernel():
    """Half the output tiles fused, half in two passes: exactly those elements are counted."""

    @nki.jit
    def half_fused(w, x_t, bias):
        K, N = w.shape
        M = x_t.shape[1]
        y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
        b_tile = nl.ndarray((N, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile, src=bias)
        w_tile = nl.ndarray((K, N), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_tile, src=w)
        for m0 in range(0, M, 64):
            x_tile = nl.ndarray((K, 64), dtype=x_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_tile, src=x_t[:, m0 : m0 + 64])
            acc = nl.ndarray((N, 64), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=w_tile, moving=x_tile)
            y = nl.ndarray((N, 64), dtype=nl.float32, buffer=nl.sbuf)
            if m0 < M // 2:
                nisa.activation(dst=y, op=nl.relu, data=acc, bias=b_tile)
            else:
                nisa.tensor_copy(dst=y, src=acc)
                nisa.activation(dst=y, op=nl.relu, data=y, bias=b_tile)
            nisa.dma_copy(dst=y_t[:, m0 : m0 + 64], src=y)
        return y_t

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (64, 256), (32, 1))]
    run = nki.profile(half_fused, chip="trn1")(*args)
    e = core.element_passes(run, run.extra["nki"]["returns"][0])
    assert (e["passes"][:, :128] == 1).all() and (e["passes"][:, 128:] == 2).all()
    assert (e["stores"] == 1).all() and (e["loads"] == 0).all()


# --- predict, then run ----------------------------------------------------------------------------
def test_the_prediction_names_the_slip_and_explains_the_gap():
    model = lab05.predict_tiled.reference()
    run = lab05.profile(lab05.reference_tiled, lab05.TILED_SHAPE)
    assert model == pytest.approx(run.latency * 1e6)
    assert lab05.predict_tiled.check(round(model)).status == exercises.PASSED
    assert lab05.predict_tiled.check(f"{model * 1.2:.1f}").status == exercises.PASSED
    assert lab05.predict_tiled.check(None).status == exercises.NOT_ATTEMPTED
    # the roofline figure: bytes over the DMA bandwidth
    msg = _message(lab05.predict_tiled, run.memory_bound_s * 1e6)
    assert "roofline" in msg and "too low" in msg
    assert "microseconds" in _message(lab05.predict_tiled, model * 1e-6)
    # splitting the transfers over two queues (as if A and B loaded side by side)
    two = lab05._prediction_parts()["two_queues"]
    assert "two queues" in _message(lab05.predict_tiled, two) and "one queue" in _message(
        lab05.predict_tiled, two
    )
    far = _message(lab05.predict_tiled, 10 * model)
    assert "about 10x too high" in far
    for m in (far, _message(lab05.predict_tiled, model / 3)):
        assert "%" not in m
    text = lab05.explain_prediction(30)
    assert "You predicted 30 us" in text and f"{model:.1f} us" in text


# --- issue 14 acceptance 2, lab 05: each exercise's right answer, its right answer rounded
# (the numeric one), at least two plausible wrong answers with their diagnosis, an untouched
# answer; no message with 0%, a percentage of 10,000% or more, or a 10-digit number ----------
@nki.jit
def transposed_c(a_t, b):
    """C's transpose, B.T @ A.T = (A @ B).T (B as the stationary operand): right values,
    wrong shape."""
    return _tiled(b, a_t)


_PERCENT = re.compile(r"(?<![\d.,])(\d[\d,]*(?:\.\d+)?)\s*%")


def _reasonable(message: str) -> None:
    for pct in _PERCENT.findall(message):
        assert 0 < float(pct.replace(",", "")) < 10_000, message
    assert not re.search(r"\d{10,}", message.replace(",", "")), message


# exercise -> plausible wrong kernels with a piece of the diagnosis each must get
WRONG_KERNELS = {
    "correct_matmul": [
        (overwrites_psum, "only the last K tile"),
        (accumulates_from_the_start, "never written"),
        (reads_unloaded_rows, "[:ks, :ms]"),
        (transposed_c, "C has shape (700, 200), expected (200, 700)"),
        (small_n_tiles, "times over"),
    ],
    "fits_sbuf": [
        (hoisted, "chunks"),
        (streamed_reloading_a, "a_t 2.0 times over"),
        (lab05.reference_tiled, "times over"),
    ],
    "fast": [
        (padded, "3.0x the FLOPs the product needs"),
        (lab05.reference_tiled, "50%"),
        (lab05.reference_streamed, "b 4.0 times over"),  # fits SBUF, but B is re-read per M group
    ],
    "epilogue": [
        (two_pass_on_chip, "went through 2 engine instructions"),
        (two_pass_through_hbm, "back from HBM"),
        (no_bias, "values are wrong"),
    ],
}


def test_every_lab05_exercise_is_audited():
    found = {v.key for v in vars(lab05).values() if isinstance(v, exercises.Exercise)}
    assert found == {f"lab05.{k}" for k in WRONG_KERNELS} | {"lab05.predict_tiled"}
    assert all(len(cases) >= 2 for cases in WRONG_KERNELS.values())


@pytest.mark.parametrize("name", sorted(WRONG_KERNELS))
def test_each_kernel_exercise_diagnoses_its_plausible_wrong_kernels(name):
    ex = getattr(lab05, name)
    for answer in (None, ...):  # the template's placeholder, and an Ellipsis left in
        assert ex.check(answer).status == exercises.NOT_ATTEMPTED
    for kernel, says in WRONG_KERNELS[name]:
        msg = _message(ex, kernel)
        assert says in msg, (kernel.__name__, msg)
        _reasonable(msg)


def test_the_prediction_passes_rounded_and_with_its_unit_and_reads_as_a_person_says():
    ex = lab05.predict_tiled
    model = ex.reference()
    for answer in (model, float(f"{model:.3g}"), f"{model:.3g} us", f"{model / 1e3:.3g} ms"):
        assert ex.check(answer).status == exercises.PASSED, answer
    assert ex.check(...).status == exercises.NOT_ATTEMPTED
    assert "time" in _message(ex, f"{model:.3g} GB")  # a size is not a latency
    # an exact prediction: no "0%" in the explanation (was "slightly too low (0%)")
    for p in (model, model * (1 + 1e-9), f"{model:.3g} us"):
        text = lab05.explain_prediction(p)
        assert text.startswith("You predicted"), text
        _reasonable(text)


def test_a_queue_bound_kernel_is_told_to_load_once_only_when_it_reloads():
    # Both references are bound by trn1's one load queue; only the streamed one reads A and B
    # again, so only it is told to load each byte once; the blocked one is told what is left.
    streamed = lab05.profile(lab05.reference_streamed, lab05.FAST_SHAPE)
    blocked = lab05.profile(lab05.reference_blocked, lab05.FAST_SHAPE)
    said = {k: lab05.diagnose(r, lab05.FAST_SHAPE) for k, r in (("s", streamed), ("b", blocked))}
    assert "times over" in said["s"] and "load each byte of A and B once" in said["s"]
    assert "times over" not in said["b"] and "load each byte" not in said["b"]
    assert "already loaded once, so start the matmuls while the loads stream" in said["b"]
