"""The NKI kernel library (trnlab.kernels) against numpy, shapes drawn by hypothesis; the
kernels are written in NKI only (the same source runs on a Trainium instance)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
from trnlab import core, kernels

SOME = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CHIPS = st.sampled_from(["trn1", "trn2", "trn3"])


def _rng(seed):
    return np.random.default_rng(seed)


@SOME
@given(n=st.integers(1, 300), d=st.integers(1, 1100), chip=CHIPS, seed=st.integers(0, 999))
def test_rmsnorm(n, d, chip, seed):
    rng = _rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    g = rng.standard_normal(d).astype(np.float32)
    got = kernels.rmsnorm(x, g, chip=chip).output
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@SOME
@given(n=st.integers(1, 300), d=st.integers(2, 1100), chip=CHIPS, seed=st.integers(0, 999))
def test_layernorm_with_bn_stats_and_bn_aggr(n, d, chip, seed):
    rng = _rng(seed)
    x = (rng.standard_normal((n, d)) * 2 + 3).astype(np.float32)
    g, b = rng.standard_normal(d).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    run = kernels.layernorm(x, g, b, chip=chip)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(run.output, want, rtol=1e-4, atol=2e-4)
    apis = run.extra["nki"]["instructions"]
    assert apis.count("bn_stats") == -(-n // 128) * -(-d // 512) and "bn_aggr" in apis


@SOME
@given(n=st.integers(1, 300), d=st.integers(1, 1500), chip=CHIPS, seed=st.integers(0, 999))
def test_softmax(n, d, chip, seed):
    x = (_rng(seed).standard_normal((n, d)) * 5).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(
        kernels.softmax(x, chip=chip).output, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7
    )


@SOME
@given(
    s=st.integers(1, 700),
    d=st.integers(1, 128),
    kv=st.integers(1, 700),
    causal=st.booleans(),
    seed=st.integers(0, 999),
)
def test_fused_attention_matches_softmax_qk_v(s, d, kv, causal, seed):
    if causal:
        kv = s
    rng = _rng(seed)
    q = rng.standard_normal((s, d)).astype(np.float32)
    k = rng.standard_normal((kv, d)).astype(np.float32)
    v = rng.standard_normal((kv, d)).astype(np.float32)
    got = kernels.attention(q, k, v, causal=causal, dtype="fp32").output
    want = kernels.attention_reference(q, k, v, causal)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@SOME
@given(
    h=st.integers(1, 16),
    d=st.integers(1, 128),
    context=st.integers(1, 9000),
    seed=st.integers(0, 999),
)
def test_decode_attention_matches_softmax_qk_v(h, d, context, seed):
    """One token's query heads against a cache that may span several 4,096-key blocks (the
    running maximum and sum are corrected between blocks)."""
    rng = _rng(seed)
    q = rng.standard_normal((h, d)).astype(np.float32)
    k = rng.standard_normal((context, d)).astype(np.float32)
    v = rng.standard_normal((context, d)).astype(np.float32)
    got = nki.simulate(kernels.nki_decode_attention)(
        np.ascontiguousarray(q.T), np.ascontiguousarray(k.T), v
    )
    np.testing.assert_allclose(got, kernels.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)


def test_decode_attention_time_grows_by_the_same_amount_per_block_of_keys():
    def latency(context):
        args = (nki.hbm((128, 1), "bfloat16"), nki.hbm((128, context), "bfloat16"),
                nki.hbm((context, 128), "bfloat16"))  # fmt: skip
        return nki.profile(kernels.nki_decode_attention, chip="trn1")(*args).latency

    b = kernels.BLOCK_DECODE
    one, two, three = latency(b), latency(2 * b), latency(3 * b)
    assert two - one == pytest.approx(three - two, rel=0.02)  # each block the same work
    assert two - one > 0


def test_attention_in_bf16_and_its_profile():
    rng = _rng(1)
    q, k, v = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(3))
    run = kernels.attention(q, k, v, causal=True, chip="trn2", dtype="bf16")
    want = kernels.attention_reference(q, k, v, causal=True)
    assert np.abs(run.output - want).max() < 0.05  # bf16 scores and probabilities
    apis = run.extra["nki"]["instructions"]
    assert "affine_select" in apis and "nc_transpose" in apis and run.busy["Tensor"] > 0


@SOME
@given(
    tiles=st.integers(1, 3),
    t=st.sampled_from([64, 128, 512]),
    states=st.integers(1, 4),
    version=st.sampled_from(["v1", "v2", "v3"]),
    hoist=st.booleans(),
    seed=st.integers(0, 999),
)
def test_selective_scan(tiles, t, states, version, hoist, seed):
    rng = _rng(seed)
    c = 128 * tiles
    delta = (rng.random((c, t)) * 0.2).astype(np.float32)
    u = rng.standard_normal((c, t)).astype(np.float32)
    a = -rng.random((c, states)).astype(np.float32)
    b, cc = (rng.standard_normal((states, t)).astype(np.float32) for _ in range(2))
    chunk = 64 if version == "v3" else 512
    got = kernels.selective_scan(
        delta, u, a, b, cc, version=version, chunk=chunk, hoist=hoist
    ).output
    want = kernels.selective_scan_reference(delta, u, a, b, cc)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("t, chunk", [(100, 64), (70, 16), (513, 512)])
def test_selective_scan_v3_takes_a_short_last_chunk(t, chunk):
    """T need not be a multiple of the chunk (the last chunk used to index past the tile)."""
    rng = _rng(t)
    delta = (rng.random((128, t)) * 0.2).astype(np.float32)
    u = rng.standard_normal((128, t)).astype(np.float32)
    a = -rng.random((128, 2)).astype(np.float32)
    b, cc = (rng.standard_normal((2, t)).astype(np.float32) for _ in range(2))
    got = kernels.selective_scan(delta, u, a, b, cc, version="v3", chunk=chunk).output
    want = kernels.selective_scan_reference(delta, u, a, b, cc)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@SOME
@given(
    c=st.integers(1, 260),
    h=st.integers(2, 20),
    w=st.integers(2, 20),
    pool=st.integers(1, 3),
    seed=st.integers(0, 999),
)
def test_average_pool(c, h, w, pool, seed):
    pool = min(pool, h, w)
    x = _rng(seed).standard_normal((c, h, w)).astype(np.float32)
    ho, wo = h // pool, w // pool
    want = x[:, : ho * pool, : wo * pool].reshape(c, ho, pool, wo, pool).mean(axis=(2, 4))
    np.testing.assert_allclose(kernels.avgpool2d(x, pool).output, want, rtol=1e-5, atol=1e-6)


@SOME
@given(m=st.integers(1, 400), n=st.integers(1, 1200), seed=st.integers(0, 999))
def test_spmd_tensor_add(m, n, seed):
    rng = _rng(seed)
    a, b = (
        rng.standard_normal((m, n)).astype(np.float32),
        rng.standard_normal((m, n)).astype(np.float32),
    )
    run = kernels.tensor_add(a, b)
    np.testing.assert_array_equal(run.output, a + b)
    assert run.program.counts()["dma_store"] == -(-m // 128) * -(-n // 512)  # one per program


@SOME
@given(p=st.integers(1, 300), f1=st.integers(1, 12), f2=st.integers(1, 12), seed=st.integers(0, 9))
def test_transpose2d(p, f1, f2, seed):
    x = _rng(seed).standard_normal((p, f1 * f2)).astype(np.float32)
    got = kernels.transpose2d(x, (f1, f2)).output
    np.testing.assert_array_equal(got, x.reshape(p, f1, f2).transpose(0, 2, 1).reshape(p, -1))


def test_ctx_kernels_are_the_nki_kernels_traced_onto_a_context():
    """``kernels.tiled(ctx, a_t, b, c)`` runs the NKI kernel inside core.run: same values,
    same instructions as nki.profile of the kernel."""
    rng = _rng(3)
    a = rng.standard_normal((200, 300)).astype(np.float32)
    b = rng.standard_normal((300, 600)).astype(np.float32)
    for name in kernels.VARIANTS:
        via_ctx = core.run(
            getattr(kernels, name),
            chip="trn2",
            a_t=core.hbm(np.ascontiguousarray(a.T), "bf16"),
            b=core.hbm(b, "bf16"),
            c=core.hbm((200, 600), "bf16"),
        )
        direct = kernels.matmul(a, b, variant=name, chip="trn2")
        np.testing.assert_array_equal(via_ctx.outputs["c"], direct.output)
        assert via_ctx.latency == direct.latency and len(via_ctx.program) == len(direct.program)


def test_library_kernels_are_written_in_nki_only():
    """Every kernel module imports only NKI (as trnlab.nki), numpy, math and its siblings, so
    a kernel's source runs on a Trainium instance after changing the imports back."""
    folder = Path(kernels.__file__).parent
    allowed = {"trnlab.nki", "trnlab.nki.isa", "trnlab.nki.language", "numpy", "math", "__future__"}
    helpers = {"trnlab.core", "trnlab.nki._dtypes"}  # host-side helpers (sizes), not kernel code
    for name in (
        "_matmul",
        "_epilogue",
        "_transpose",
        "_elementwise",
        "_norms",
        "_attention",
        "_decode",
        "_mamba",
    ):
        tree = ast.parse((folder / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module in allowed | helpers, (name, node.module)
            elif isinstance(node, ast.Import):
                assert all(a.name in allowed for a in node.names), (name, ast.dump(node))
    for fn in (kernels.nki_matmul_tiled, kernels.nki_attention, kernels.nki_layernorm):
        assert isinstance(fn, nki.Kernel) and "@nki.jit" in inspect.getsource(fn.fn)


def test_matmul_progression_is_the_nki_kernels():
    assert all(isinstance(k, nki.Kernel) for k in kernels.VARIANTS.values())
    shapes = (1024, 4096), (4096, 4096)
    run = kernels.matmul(*shapes, variant="pipelined", chip="trn1", numerics=False)
    assert run.extra["nki"]["buffers"]["rhs_block"] == 3  # pipelined: three rotating buffers
    run = kernels.matmul(*shapes, variant="blocked_mnk", chip="trn1", numerics=False)
    assert run.extra["nki"]["buffers"]["rhs_block"] == 2


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_matmul_bias_activation_is_fused_on_the_scalar_engine(chip):
    rng = _rng(7)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 150)).astype(np.float32)
    bias = rng.standard_normal(150).astype(np.float32)
    r = kernels.matmul_bias_act(a, b, bias, activation="relu", chip=chip, dtype="fp32")
    np.testing.assert_allclose(r.outputs["y"], np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)
    # one activation per output tile: ceil(150 / 128) x ceil(300 / 512)
    assert r.busy["Vector"] == 0 and r.program.counts()["activation"] == 2 * 1
