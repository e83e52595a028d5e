"""The dependency pass on physical memory, against a brute-force reference, and rotating buffers.

The reference compares every pair of instructions (quadratic): two accesses conflict when their
physical rectangles overlap (SBUF/PSUM: partitions x bytes; HBM: rows x cols of one tensor) and
at least one writes. The numba pass keeps only the latest dependency per engine, so the test
checks what matters: every conflicting earlier instruction is ordered before the later one by
the dependency edges plus the in-order execution of each engine and DMA queue.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trnlab import core
from trnlab.core import _program as P


def _rects(prog: P.Program, i: int):
    """(object, rect, write) of every access of instruction ``i`` (the reference's view)."""
    t = prog.table[i]
    tiles = {r.id: r for r in prog.tiles}
    out = []
    for slot, col in (
        ("out", "out_region"),
        ("in0", "in0_region"),
        ("in1", "in1_region"),
        ("in2", "in2_region"),
    ):
        tid = int(t[slot])
        if tid < 0:
            continue
        rec = tiles[tid]
        p0, p1, f0, f1 = (int(x) for x in t[col])
        if rec.space == "sbuf":
            bits = core.format_bits(rec.fmt)
            lo = rec.offset + math.floor(f0 * bits / 8)
            hi = rec.offset + math.ceil(f1 * bits / 8)
            obj = "sbuf"
        else:
            lo, hi, obj = rec.offset * 2048 + 4 * f0, rec.offset * 2048 + 4 * f1, "psum"
        out.append((obj, (p0, p1, lo, hi), slot == "out"))
    if t["hbm"] >= 0:
        out.append(
            (
                f"hbm{int(t['hbm'])}",
                tuple(int(x) for x in t["hbm_region"]),
                int(t["op"]) == P.DMA_STORE,
            )
        )
    return out


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _check_ordered(prog: P.Program):
    n = len(prog)
    eng = prog.table["engine"]
    # reach[i] = set of instructions known to finish before i starts
    before = [set() for _ in range(n)]
    last_on = {}
    for i in range(n):
        preds = set(int(d) for d in prog.deps(i))
        if int(eng[i]) in last_on:
            preds.add(last_on[int(eng[i])])
        for d in preds:
            assert d < i, f"instruction {i} depends on a later one ({d})"
            before[i] |= before[d] | {d}
        last_on[int(eng[i])] = i
    acc = [_rects(prog, i) for i in range(n)]
    for i in range(n):
        for j in range(i):
            conflict = any(
                oa == ob and (wa or wb) and _overlap(ra, rb)
                for oa, ra, wa in acc[i]
                for ob, rb, wb in acc[j]
            )
            if conflict:
                assert j in before[i], (
                    f"#{i} {prog.describe(i)} conflicts with #{j} {prog.describe(j)} "
                    f"but is not ordered after it"
                )


_ops = st.lists(
    st.tuples(
        st.sampled_from(["load", "store", "act", "tt", "mm", "free_alloc"]),
        st.integers(0, 3),  # which tile
        st.integers(0, 3),  # which tile (second operand)
        st.integers(0, 96),  # partition start
        st.integers(1, 32),  # partitions
        st.integers(0, 200),  # free start
        st.integers(1, 56),  # free size
        st.integers(0, 40),  # hbm row
        st.booleans(),  # accumulate
    ),
    min_size=1,
    max_size=28,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops)
def test_dependencies_order_every_conflict(ops):
    def kernel(ctx, x, y):
        fmts = ["bf16", "fp32", "bf16", "fp8_e4m3"]
        tiles = [ctx.sbuf((128, 256), fmts[j], f"t{j}") for j in range(4)]
        ps = [ctx.psum((128, 64), f"p{j}") for j in range(2)]
        for t in tiles:  # every tile holds values, so any read is legal
            ctx.memset(t, 1.0)
        for kind, a, b, p0, np_, f0, nf, row, acc in ops:
            np_ = min(np_, 128 - p0)
            nf = min(nf, 256 - f0)
            if nf <= 0 or np_ <= 0:
                continue
            ta, tb = tiles[a], tiles[b]
            if kind == "load":
                ctx.load(ta[p0 : p0 + np_, f0 : f0 + nf], x[row : row + np_, f0 : f0 + nf])
            elif kind == "store":
                ctx.store(y[row : row + np_, f0 : f0 + nf], ta[p0 : p0 + np_, f0 : f0 + nf])
            elif kind == "act":
                ctx.activation(ta[p0 : p0 + np_, f0 : f0 + nf], tb[p0 : p0 + np_, f0 : f0 + nf])
            elif kind == "tt":
                ctx.tensor_tensor(
                    ta[p0 : p0 + np_, f0 : f0 + nf],
                    tb[p0 : p0 + np_, f0 : f0 + nf],
                    ta[p0 : p0 + np_, f0 : f0 + nf],
                )
            elif kind == "mm":
                m, n = min(nf, 64), min(nf, 64)
                dst = ps[a % 2][:m, :n]
                if acc and ps[a % 2].fully_written:
                    ctx.matmul(dst, ta[:np_, :m], tb[:np_, :n], accumulate=True)
                else:
                    ctx.matmul(dst, ta[:np_, :m], tb[:np_, :n])
            else:  # free a tile and put a new one on its bytes
                ctx.free(tiles[a])
                tiles[a] = ctx.sbuf((128, 256), "fp32", f"t{a}'")
                ctx.memset(tiles[a], 0.0)

    r = core.run(
        kernel,
        numerics=False,
        x=core.hbm((256, 512), "bf16", is_input=True),
        y=core.hbm((256, 512), "bf16"),
    )
    _check_ordered(r.program)


def test_memory_reuse_waits_for_the_old_tiles_readers():
    def kernel(ctx, x, y):
        a = ctx.sbuf((128, 512), "bf16", "a")
        ctx.load(a, x)
        ctx.store(y, a)
        ctx.free(a)
        b = ctx.sbuf((128, 512), "bf16", "b")  # the same bytes
        ctx.memset(b, 0.0)

    r = core.run(
        kernel,
        numerics=False,
        x=core.hbm((128, 512), "bf16", is_input=True),
        y=core.hbm((128, 512), "bf16"),
    )
    assert r.program.tiles[0].offset == r.program.tiles[1].offset
    assert 1 in r.program.deps(2)  # memset of b waits for the store that read a
    assert r.start[2] >= r.end[1]


# --- rotating buffers --------------------------------------------------------------------------


def _stream(bufs):
    def kernel(ctx, x, y):
        R = x.shape[0] // 128
        pool = ctx.sbuf((128, 512), "bf16", "x tile", bufs=bufs)
        out = ctx.sbuf((128, 512), "bf16", "y tile", bufs=bufs)
        for i in range(R):
            t, u = pool.next(), out.next()
            ctx.load(t, x[i * 128 : (i + 1) * 128, :])
            ctx.activation(u, t, "exp")
            ctx.store(y[i * 128 : (i + 1) * 128, :], u)

    return kernel


def _run_stream(bufs, numerics=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    xarg = core.hbm(x, "bf16") if numerics else core.hbm(x.shape, "bf16", is_input=True)
    return core.run(_stream(bufs), numerics=numerics, x=xarg, y=core.hbm(x.shape, "bf16")), x


def test_rotating_buffers_overlap_iterations_and_count_in_sbuf():
    one, _ = _run_stream(1)
    three, _ = _run_stream(3)
    # same instructions, more overlap: loads of iteration i+1 no longer wait for the store of i
    assert len(one.program) == len(three.program)
    assert three.latency < 0.8 * one.latency
    # every buffer occupies SBUF: 2 pools x 3 buffers x 1 KiB per partition
    assert three.counters()["peak_sbuf_bytes_per_partition"] == 6 * 1024
    labels = {t.label for t in three.program.tiles}
    assert labels == {f"{p}[{i}]" for p in ("x tile", "y tile") for i in range(3)}
    offsets = {t.offset for t in three.program.tiles}
    assert len(offsets) == 6, "each buffer has its own bytes"


def test_rotating_buffers_keep_numerics():
    r, x = _run_stream(3, numerics=True)
    from trnlab import formats

    want = formats.quantize(np.exp(formats.quantize(x, "bf16")), "bf16")
    np.testing.assert_allclose(r.outputs["y"], want, rtol=1e-6)


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, 3.0, "3", True])
def test_bad_buffer_counts_are_refused(bad):
    def kernel(ctx):
        ctx.sbuf((128, 64), "bf16", "t", bufs=bad)

    with pytest.raises(core.KernelArgumentError, match=r"bufs .* 1 to 64"):
        core.run(kernel, numerics=False)


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (-1, 4), (4,), (1, 2, 3), ("a", 2), (2.0, 3)])
def test_bad_tile_shapes_are_refused(shape):
    def kernel(ctx):
        ctx.sbuf(shape, "bf16")

    with pytest.raises(core.KernelArgumentError, match="shape"):
        core.run(kernel, numerics=False)


def test_a_pool_is_not_an_operand():
    def kernel(ctx, x):
        pool = ctx.sbuf((128, 64), "bf16", "p", bufs=2)
        ctx.load(pool, x)

    with pytest.raises(core.OperandPlacementError, match=r"pool\.next\(\)"):
        core.run(kernel, numerics=False, x=core.hbm((128, 64), "bf16", is_input=True))


def test_slices_outside_a_tile_are_refused_not_clipped():
    def kernel(ctx, x):
        t = ctx.sbuf((128, 64), "bf16")
        ctx.load(t[:, 0:65], x)

    with pytest.raises(IndexError, match="does not clip"):
        core.run(kernel, numerics=False, x=core.hbm((128, 65), "bf16", is_input=True))
