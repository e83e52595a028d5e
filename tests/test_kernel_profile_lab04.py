"""Lab 04's kernel checks: reference kernels pass; each kind of wrong kernel gets a message
that says what is wrong (correctness, SBUF fit, speed, fusion)."""

from __future__ import annotations

import pytest

from trnlab import exercises, kernels
from trnlab.exercises import lab04


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
        (lab04.correct_matmul, lab04.reference_tiled),
        (lab04.fits_sbuf, lab04.reference_streamed),
        (lab04.fast, lab04.reference_blocked),
        (lab04.epilogue, lab04.reference_epilogue),
    ],
)
def test_reference_kernels_pass_and_untouched_is_not_attempted(ex, ref):
    assert ex.check(ref).status == exercises.PASSED
    assert ex.check(None).status == exercises.NOT_ATTEMPTED
    assert ex.reference() is ref


def _no_accumulate(ctx, a_t, b, c):
    (K, M), N = a_t.shape, b.shape[1]
    st, mv = ctx.sbuf((128, 128), "bf16"), ctx.sbuf((128, 512), "bf16")
    acc, out = ctx.psum((128, 512)), ctx.sbuf((128, 512), c.fmt)
    for m0 in range(0, M, 128):
        ms = min(128, M - m0)
        for n0 in range(0, N, 512):
            ns = min(512, N - n0)
            for k0 in range(0, K, 128):
                ks = min(128, K - k0)
                ctx.load(st[:ks, :ms], a_t[k0 : k0 + ks, m0 : m0 + ms])
                ctx.load(mv[:ks, :ns], b[k0 : k0 + ks, n0 : n0 + ns])
                ctx.matmul(acc[:ms, :ns], st[:ks, :ms], mv[:ks, :ns])  # forgets accumulate
            ctx.copy(out[:ms, :ns], acc[:ms, :ns])
            ctx.store(c[m0 : m0 + ms, n0 : n0 + ns], out[:ms, :ns])


def test_wrong_matmuls_are_told_what_is_wrong():
    assert "accumulate" in _message(lab04.correct_matmul, _no_accumulate)
    assert "never stored" in _message(lab04.correct_matmul, lambda ctx, a_t, b, c: None)
    assert "kernel function" in _message(lab04.correct_matmul, 42)
    assert "raised ZeroDivisionError" in _message(
        lab04.correct_matmul, lambda ctx, a_t, b, c: 1 / 0
    )
    small_tiles = lambda ctx, a_t, b, c: kernels.tiled(ctx, a_t, b, c, tile_n=64)  # noqa: E731
    assert "slow" in _message(lab04.correct_matmul, small_tiles)


def test_sbuf_fit_and_speed_targets():
    msg = _message(lab04.fits_sbuf, kernels.hoisted)
    assert "refused" in msg and "SBUF" in msg and "180224" in msg
    assert "target" in _message(lab04.fits_sbuf, lab04.reference_tiled)
    msg = _message(lab04.fast, lab04.reference_tiled)
    assert "55%" in msg and "memory-bound" in msg
    assert lab04.fast.check(kernels.pipelined).status == exercises.PASSED


def test_epilogue_must_be_correct_and_fused():
    def unfused(ctx, w, x_t, bias, y_t):
        # activation in a second pass over each output tile
        def copy_then_relu(ctx, w, x_t, bias, y_t):
            kernels.matmul_bias_act_kernel(ctx, w, x_t, bias, y_t, activation="identity")

        copy_then_relu(ctx, w, x_t, bias, y_t)
        t = ctx.sbuf((128, 512), "fp32")
        for n0 in range(0, y_t.shape[0], 128):
            for m0 in range(0, y_t.shape[1], 512):
                ctx.load(t, y_t[n0 : n0 + 128, m0 : m0 + 512])
                ctx.activation(t, t, "relu")
                ctx.store(y_t[n0 : n0 + 128, m0 : m0 + 512], t)

    assert "not fused" in _message(lab04.epilogue, unfused)
    identity = lambda ctx, w, x_t, bias, y_t: kernels.matmul_bias_act_kernel(  # noqa: E731
        ctx, w, x_t, bias, y_t, activation="identity"
    )
    assert "apply relu" in _message(lab04.epilogue, identity)
