"""nisa.dma_transpose: values against numpy's transpose for every rank and flow, NKI's shape,
dtype and DGE rules, and its cost against the Trainium2 guide (90% of a copy's throughput from
HBM, 50% from SBUF, all 16 engines cooperating, [128, 16] blocks)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core
from trnlab.core import HardwareRuleError, core_params
from trnlab.nki._isa_dma_transpose import PERMUTATIONS

RNG = np.random.default_rng(11)
BF16 = ml_dtypes.bfloat16


def _hbm_to_sbuf(rank_perm):
    def k(a):
        shape = tuple(a.shape[i] for i in rank_perm)
        t = nl.ndarray(shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a, axes=rank_perm)
        out = nl.ndarray(shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return k


def _sbuf_to_sbuf(a):
    s = nl.load(a)
    t = nisa.dma_transpose(s)  # the older form: a new SBUF tile comes back
    out = nl.ndarray(t.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.one_of(
        st.tuples(st.integers(1, 300), st.integers(1, 128)),
        st.tuples(st.integers(1, 6), st.integers(1, 5), st.integers(1, 128)),
        st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.integers(1, 128)),
    ),
    dtype=st.sampled_from([np.float32, np.float16, BF16, np.int32]),
    chip=st.sampled_from(["trn2", "trn3"]),
)
def test_hbm_to_sbuf_matches_numpys_transpose_for_every_rank(shape, dtype, chip):
    a = (RNG.uniform(-100, 100, shape)).astype(dtype)
    perm = PERMUTATIONS[len(shape)]
    got = nki.simulate(_hbm_to_sbuf(perm), chip=chip)(a)
    np.testing.assert_array_equal(np.asarray(got), np.transpose(a, perm))  # bit for bit


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(1, 128), f=st.integers(1, 128), dtype=st.sampled_from([np.float32, BF16]))
def test_sbuf_to_sbuf_swaps_partitions_and_free_elements(p, f, dtype):
    a = RNG.uniform(-8, 8, (p, f)).astype(dtype)
    got = nki.simulate(_sbuf_to_sbuf, chip="trn2")(a)
    np.testing.assert_array_equal(np.asarray(got), a.T)


def _profile(kernel, *shapes, chip="trn2", dtype=BF16):
    return nki.profile(kernel, chip=chip)(*[nki.hbm(s, dtype) for s in shapes])


def _dma_busy(run):
    return run.busy["DMA"] * run.latency


def test_charged_over_every_engine_at_the_guides_shares():
    """From HBM a transpose's data takes 1/0.9 of a copy's (of the same bytes, over every
    engine); from SBUF 1/0.5. Measured on the DMA engines' busy time, large enough that the
    data, not the fixed costs, dominates."""
    rows, cols = 4096, 128

    def copy(a):
        t = nl.ndarray((128, rows * cols // 128), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.reshape((128, rows * cols // 128)))
        return t

    def transpose(a):
        t = nl.ndarray((cols, rows), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a)
        return t

    params = core_params("trn2")
    for name, kernel, share in (
        ("hbm", transpose, params.dma_transpose_hbm_share),
        ("copy", copy, 1.0),
    ):
        run = _profile(kernel, (rows, cols))
        # the transfer's data time on one engine (8 partitions' rows), the queue's set-up aside
        data = rows * cols * 2 / params.dma_engines / params.dma_engine_bandwidth / share
        assert run.latency > data, name
        assert run.latency < data + 3e-6, name  # set-up, DGE and completion: a few us
    t = _profile(transpose, (rows, cols)).latency
    c = _profile(copy, (rows, cols)).latency
    assert t > c  # the copy is the faster way to move the same bytes


def _transpose_time(kernel, shape):
    """The DMA transpose's own duration in the profile of ``kernel`` on a bf16 ``shape``."""
    run = _profile(kernel, shape)
    table = run.program.table
    i = int(np.flatnonzero(table["flags"] & core._program.FLAG_TRANSPOSE)[0])
    return float(run.end[i] - run.start[i])


def _from_sbuf(a):
    s = nl.load(a)
    t = nl.ndarray(tuple(reversed(a.shape)), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=s)
    return t


def _from_hbm(a):
    t = nl.ndarray(tuple(reversed(a.shape)), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=a)
    return t


@pytest.mark.parametrize("depth", [8, 32])
def test_an_sbuf_source_streams_at_half_a_copys_rate_an_hbm_source_at_ninety_percent(depth):
    """The same [128, depth, 128] bf16 transpose from SBUF and from HBM: each engine moves its 8
    destination partitions' bytes at 0.5 and at 0.9 of its rate, and nothing else differs."""
    p = core_params("trn2")
    shape = (128, depth, 128)
    gap = _transpose_time(_from_sbuf, shape) - _transpose_time(_from_hbm, shape)
    per_engine = p.dma_partitions_per_engine * depth * 128 * 2  # bytes
    want = per_engine / p.dma_engine_bandwidth * (1 / 0.5 - 1 / 0.9)
    assert gap == pytest.approx(want, rel=1e-6)


def test_partial_blocks_cost_whole_ones():
    """A destination 17 elements wide pays two 16-element blocks, as 32 does."""
    w16, w17, w32 = (_transpose_time(_from_hbm, (n, 128)) for n in (16, 17, 32))
    assert w17 == pytest.approx(w32)
    assert w16 < w17


def test_a_destination_of_few_partitions_pays_whole_blocks_on_every_engine():
    """The engines write [128, 16] blocks together: 16 destination partitions take as long as
    128 with the same width (the assumption the catalogue marks), not an eighth."""
    few = _transpose_time(_from_hbm, (2048, 16))
    full = _transpose_time(_from_hbm, (2048, 128))
    assert few == pytest.approx(full)


@pytest.mark.parametrize(
    ("kernel_body", "match"),
    [
        ("dst_shape", r"must be src \(64, 32\) transposed \(1, 0\): \(32, 64\)"),
        ("axes", r"NKI supports only \(1, 0\)"),
        ("fp8", "the DMA engines transpose 2- and 4-byte elements"),
        ("hwdge_cast", "moves raw bytes"),
        ("swdge", "swdge makes the indirect form's"),
        ("hwdge_rows", "exactly 16 rows"),
        ("hwdge_3d", "first dimension must be 1, 2, 4, 8 or 16"),
        ("hwdge_wide", "last dimension at most 128"),
        ("oob", "valid only when src uses indirect indexing"),
        ("psum", "not PSUM"),
    ],
)
def test_rules_are_refused_with_what_to_do(kernel_body, match):
    def k(a):
        if kernel_body == "dst_shape":
            t = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a)
        elif kernel_body == "axes":
            t = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a, axes=(0, 1))
        elif kernel_body == "fp8":
            s = nl.ndarray((64, 32), dtype=nl.float8_e4m3, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=a)
            t = nl.ndarray((32, 64), dtype=nl.float8_e4m3, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=s)
        elif kernel_body == "hwdge_cast":
            src = nl.ndarray((16, 32), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=a[0:16, :])
            t = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=src, dge_mode=nisa.dge_mode.hwdge)
        elif kernel_body == "hwdge_3d":  # a first dimension of 3
            w = nl.ndarray((3, 16, 32), dtype=a.dtype, buffer=nl.sbuf)
            nisa.memset(dst=w, value=1.0)
            t = nl.ndarray((32, 16, 3), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=w, dge_mode=nisa.dge_mode.hwdge)
        elif kernel_body == "hwdge_wide":  # 16 rows of 256: into HBM (256 partitions won't do)
            w = nl.ndarray((16, 256), dtype=a.dtype, buffer=nl.sbuf)
            nisa.memset(dst=w, value=1.0)
            t = nl.ndarray((256, 16), dtype=a.dtype, buffer=nl.shared_hbm)
            nisa.dma_transpose(dst=t, src=w, dge_mode=nisa.dge_mode.hwdge)
        elif kernel_body == "oob":
            t = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a, oob_mode=nisa.oob_mode.skip)
        elif kernel_body == "swdge":
            t = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a, dge_mode=nisa.dge_mode.swdge)
        elif kernel_body == "hwdge_rows":
            t = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge)
        else:
            ps = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=ps, value=0.0)
            t = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=ps)

    with pytest.raises(HardwareRuleError, match=match):
        nki.simulate(k, chip="trn2")(np.ones((64, 32), BF16))


def test_hwdge_takes_its_documented_shape_and_trn1_has_no_dma_transpose():
    a = RNG.uniform(-4, 4, (16, 128)).astype(np.float16)

    def k(x):
        t = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
        out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(nki.simulate(k, chip="trn2")(a), a.T)
    with pytest.raises(HardwareRuleError, match=r"trn1.*no DMA transpose.*nc_transpose"):
        nki.simulate(k, chip="trn1")(a)


def test_core_level_transpose_values_and_region_rule():
    a = RNG.uniform(-1, 1, (96, 40)).astype(np.float32)

    def k(ctx, x):
        t = ctx.sbuf((40, 96), "fp32", "t")
        ctx.dma_transpose(t, x)
        o = ctx.hbm("o", (40, 96), "fp32")
        ctx.store(o, t)

    run = core.run(k, chip="trn2", x=core.hbm(a))
    np.testing.assert_array_equal(run.outputs["o"], a.T)

    def wrong(ctx, x):
        t = ctx.sbuf((96, 40), "fp32", "t")
        ctx.dma_transpose(t, x)

    with pytest.raises(HardwareRuleError, match="not the source region"):
        core.run(wrong, chip="trn2", x=core.hbm(a))


def test_a_cast_on_the_way_rounds_to_the_destination_dtype():
    a = RNG.uniform(-3, 3, (64, 32)).astype(np.float32)

    def k(x):
        t = nl.ndarray((32, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
        older = nisa.dma_transpose(x, dtype=nl.bfloat16)
        outs = []
        for tile in (t, older):
            o = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(o, tile)
            outs.append(o)
        return tuple(outs)

    got, older = nki.simulate(k, chip="trn2")(a)
    want = a.T.astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(older, want)
    assert not np.array_equal(got, a.T)  # rounded, not bit for bit


def test_priority_is_refused_as_not_modelled():
    def k(a):
        t = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a, priority=1)

    with pytest.raises(nki.NotModelledError, match="priority"):
        nki.simulate(k, chip="trn2")(np.ones((64, 32), BF16))


def _into_hbm(source):
    def k(a):
        src = a
        if source == "sbuf":
            src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=a)
        out = nl.ndarray(tuple(reversed(a.shape)), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_transpose(dst=out, src=src)
        return out

    return k


def test_a_transpose_into_hbm_streams_at_its_sources_share():
    """HBM -> HBM at the HBM share, SBUF -> HBM at the SBUF share (assumptions: the guide gives
    the shares for SBUF destinations only); the gap is the data time at 0.5 against 0.9."""
    p = core_params("trn2")
    shape = (128, 2048)
    gap = _transpose_time(_into_hbm("sbuf"), shape) - _transpose_time(_into_hbm("hbm"), shape)
    per_engine = p.dma_partitions_per_engine * 2048 * 2  # bytes over 128 partitions' engines
    want = per_engine / p.dma_engine_bandwidth * (1 / 0.5 - 1 / 0.9)
    assert gap == pytest.approx(want, rel=1e-6)
