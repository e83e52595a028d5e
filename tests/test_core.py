"""trnlab.core: kernel API rules (errors that teach), recording, scheduler and metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trnlab import core
from trnlab.core import _program as P


def _run(kernel, chip="trn1", numerics=True, **args):
    return core.run(kernel, chip=chip, numerics=numerics, **args)


# --- costs come from the catalogue ------------------------------------------------------------


def test_params_come_from_the_catalogue_and_name_assumptions():
    from trnlab import catalog

    p = core.core_params("trn1")
    c = catalog.chip("trn1").core
    assert p.tensor_clock == c.tensor_clock
    assert p.psum_bank_bytes == c.psum_bank_bytes == 2048
    assert p.sbuf_usable_partition_bytes == c.sbuf_usable_partition_bytes
    assert p.peak_flops("bf16") == pytest.approx(c.peak_flops("bf16"))
    assert "dma_completion_latency" in p.assumptions  # a Trn2 reading used for Trn1
    assert "dma_queue_interval" in p.assumptions  # the Trn2 calibration used for Trn1
    assert "dma_static_queue_bandwidth" not in p.assumptions  # measured on Trn1
    assert "tensor_clock" not in p.assumptions
    assert "ASSUMPTION" in catalog.figure("v2.dma_completion_latency").note
    assert "dma_completion_latency" not in core.core_params("trn2").assumptions


def test_params_override_and_refuse_unknown_names():
    p = core.core_params("trn2", dma_bandwidth=1e12)
    assert p.dma_bandwidth == 1e12 and p.overrides == {"dma_bandwidth": 1e12}
    with pytest.raises(KeyError, match="unknown figure"):
        core.core_params("trn2", warp_speed=9)


def test_a_chip_without_neuroncore_is_refused():
    from trnlab.catalog import CatalogError

    with pytest.raises(CatalogError, match="NeuronCore"):
        core.core_params("h100")


# --- hardware rules: each error, triggered --------------------------------------------------


def test_tile_too_large_partitions():
    def k(ctx):
        ctx.sbuf((256, 64), "bf16")

    with pytest.raises(core.TileTooLargeError, match=r"256 partitions.*128"):
        _run(k)


def test_tile_too_large_moving_free():
    def k(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        b = ctx.sbuf((128, 1024), "bf16")
        ctx.load(a, x[:, :128])
        ctx.load(b, x)
        ps = ctx.psum((128, 512))
        ctx.matmul(ps, a, b)

    with pytest.raises(
        core.TileTooLargeError, match=r"moving tile free size 1024 exceeds 512.*NeuronCore-v2"
    ):
        _run(k, x=core.hbm(np.ones((128, 1024))))


def test_tile_too_large_stationary_free():
    def k(ctx, x):
        a = ctx.sbuf((128, 256), "bf16")
        ctx.load(a, x)
        b = ctx.sbuf((128, 64), "bf16")
        ctx.load(b, x[:, :64])
        ctx.matmul(ctx.psum((128, 64)), a, b)

    with pytest.raises(core.TileTooLargeError, match="stationary tile free size 256"):
        _run(k, x=core.hbm(np.ones((128, 256))))


def test_psum_bank_overflow_tile_and_all_banks():
    def too_wide(ctx):
        ctx.psum((128, 1024))

    with pytest.raises(core.PsumBankOverflowError, match=r"4096 B per partition.*2048 B"):
        _run(too_wide)

    def nine(ctx):
        for _ in range(9):
            ctx.psum((128, 512))

    with pytest.raises(core.PsumBankOverflowError, match="its 8 banks are taken"):
        _run(nine)


def test_neuroncore_v4_spans_psum_banks():
    def k(ctx, x, n):
        a = ctx.sbuf((128, 128), "bf16")
        b = ctx.sbuf((128, n), "bf16")
        ctx.load(a, x[:, :128])
        ctx.load(b, x[:, :n])
        ps = ctx.psum((128, n))
        ctx.matmul(ps, a, b)
        ctx.psum((128, 4096 - n))  # the banks left

    x = core.hbm(np.ones((128, 2048)))
    r = _run(k, chip="trn3", x=x, n=2048)
    np.testing.assert_array_equal(r.program.table["free"][2], 2048)
    with pytest.raises(core.PsumBankOverflowError, match="span several banks"):
        _run(k, chip="trn2", x=x, n=2048)


def test_psum_bank_is_reusable_after_free():
    def k(ctx):
        for _ in range(20):
            ctx.free(ctx.psum((128, 512)))

    _run(k)


def test_freed_memory_is_reused_only_after_its_last_reader():
    def k(ctx, x, y):
        a = ctx.sbuf((128, 4096), "bf16", "first")
        ctx.load(a, x)
        ctx.store(y, a)  # last reader of 'first'
        ctx.free(a)
        b = ctx.sbuf((128, 4096), "bf16", "second")  # same bytes
        ctx.load(b, x)

    r = _run(
        k,
        numerics=False,
        x=core.hbm((128, 4096), "bf16", is_input=True),
        y=core.hbm((128, 4096), "bf16"),
    )
    tiles = {t.name: t for t in r.program.tiles}
    assert tiles["first"].offset == tiles["second"].offset
    assert 1 in r.program.deps(2).tolist()
    assert r.start[2] >= r.end[1]


def test_sbuf_capacity_exceeded_says_requested_and_available():
    def k(ctx):
        ctx.sbuf((128, 60000), "bf16", "big")  # 120,000 B per partition
        ctx.sbuf((128, 40000), "bf16", "second")  # 80,000 more

    with pytest.raises(core.SbufCapacityError) as e:
        _run(k)
    msg = str(e.value)
    assert (
        "80000 B per partition" in msg and "180224 B usable" in msg and "60224 B available" in msg
    )


def test_sbuf_capacity_depends_on_generation():
    def k(ctx):
        ctx.sbuf((128, 100000), "bf16")  # 200,000 B: fits v3 (212,984), not v2 (180,224)

    _run(k, chip="trn2", numerics=False)
    with pytest.raises(core.SbufCapacityError):
        _run(k, chip="trn1", numerics=False)


def test_format_the_generation_lacks():
    def k(ctx, x):
        a = ctx.sbuf((128, 128), "mxfp8_e4m3")
        ctx.load(a, x)
        ctx.matmul(ctx.psum((128, 128)), a, a)

    x = core.hbm(np.ones((128, 128)))
    with pytest.raises(
        core.FormatNotSupportedError, match=r"NeuronCore-v2.*no mxfp8.*NeuronCore-v4"
    ):
        _run(k, x=x)
    _run(k, chip="trn3", x=x)  # NeuronCore-v4 has the MX path


def test_matmul_operands_must_be_in_sbuf():
    def k(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x)
        ps = ctx.psum((128, 128))
        ctx.matmul(ps, a, a)
        ctx.matmul(ctx.psum((128, 128)), ps, a)

    with pytest.raises(
        core.OperandPlacementError, match=r"stationary operand.*PSUM.*reads its inputs from SBUF"
    ):
        _run(k, x=core.hbm(np.ones((128, 128))))

    def hbm_operand(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x)
        ctx.matmul(ctx.psum((128, 128)), a, x)

    with pytest.raises(
        core.OperandPlacementError, match="HBM data reaches the engines only through a DMA"
    ):
        _run(hbm_operand, x=core.hbm(np.ones((128, 128))))

    def to_sbuf(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x)
        ctx.matmul(ctx.sbuf((128, 128), "fp32"), a, a)

    with pytest.raises(core.OperandPlacementError, match="writes PSUM"):
        _run(to_sbuf, x=core.hbm(np.ones((128, 128))))


def test_matmul_further_reads_are_checked_like_operands():
    """``reads`` (an MX matmul's scales) must be SBUF tiles that something has written."""

    def psum_read(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x)
        ps = ctx.psum((128, 128))
        ctx.matmul(ps, a, a)
        ctx.matmul(ctx.psum((128, 128)), a, a, reads=[ps])

    with pytest.raises(core.OperandPlacementError, match=r"scale operand.*PSUM.*from SBUF"):
        _run(psum_read, x=core.hbm(np.ones((128, 128))))

    def unwritten(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x)
        ctx.matmul(ctx.psum((128, 128)), a, a, reads=[ctx.sbuf((16, 128), "bf16")])

    with pytest.raises(core.UnwrittenReadError, match="nothing has written yet"):
        _run(unwritten, x=core.hbm(np.ones((128, 128))))


def test_reading_a_tile_never_written():
    def partial(ctx, x, y):
        t = ctx.sbuf((128, 64), "fp32", "scratch")
        ctx.load(t[:64, :], x)
        ctx.store(y, t)  # rows 64..127 were never written

    with pytest.raises(
        core.UnwrittenReadError, match=r"scratch.*\[0:128, 0:64\].*nothing has written"
    ):
        _run(partial, x=core.hbm(np.ones((64, 64))), y=core.hbm((128, 64)))

    def unwritten_hbm(ctx, y):
        t = ctx.sbuf((8, 8), "fp32")
        ctx.load(t, y)

    with pytest.raises(core.UnwrittenReadError, match="no instruction has stored"):
        _run(unwritten_hbm, y=core.hbm((8, 8)))


_REGION = st.tuples(st.integers(0, 11), st.integers(1, 12), st.integers(0, 7), st.integers(1, 8))


def _box(r):
    r0, n, c0, m = r
    return r0, min(12, r0 + n), c0, min(8, c0 + m)


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), _REGION), min_size=1, max_size=60),
    mask_limit=st.sampled_from([0, 2**27]),
    scan=st.sampled_from([0, 3, 16]),
    max_cells=st.sampled_from([1, 4, 2**22]),
)
# an element mask; a grid whose cells a store covers whole; one cell a store covers in part
@example([(True, (0, 4, 0, 4)), (False, (1, 1, 1, 1))], 2**27, 0, 2**22)
@example([(True, (0, 12, 0, 8)), (True, (0, 1, 0, 1)), (False, (5, 1, 3, 1))], 0, 0, 4)
@example([(True, (0, 3, 0, 3)), (False, (2, 1, 2, 1)), (False, (3, 1, 3, 1))], 0, 0, 1)
@example([(True, (0, 2, 0, 8)), (True, (3, 3, 0, 8)), (False, (2, 1, 0, 8))], 0, 0, 2**22)
def test_a_read_back_finds_any_overlapping_store_however_many_there_are(
    steps, mask_limit, scan, max_cells
):
    """The store index (a scan for the first ``scan`` stores, then an element mask, or for a
    tensor too big for one a grid of cells, ``max_cells`` at most, some covered in part)
    answers as a brute-force check over every store region does."""
    from trnlab.core import _stored, _tiles

    t = _tiles.HBMTensor(0, "y", (12, 8), "fp32", None, written=False)
    stores = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_tiles, "STORE_MASK_LIMIT", mask_limit)
        mp.setattr(_tiles, "_SCAN_STORES", scan)
        mp.setattr(_stored, "MAX_CELLS", max_cells)
        for is_store, r in steps:
            r0, r1, c0, c1 = _box(r)
            if is_store:
                t.note_store(r0, r1, c0, c1)
                stores.append((r0, r1, c0, c1))
            else:
                expected = any(a < r1 and r0 < b and c < c1 and c0 < d for a, b, c, d in stores)
                assert t.overlaps_store(r0, r1, c0, c1) is expected


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(_REGION, min_size=1, max_size=40))
def test_a_tile_is_fully_written_exactly_when_its_writes_cover_it(writes):
    """The written-element count (each write costs its own region) against the union of the
    writes, element by element; reads of a region are allowed exactly where it is covered."""
    from trnlab.core import _tiles

    t = _tiles.Tile(0, "t", "sbuf", (12, 8), "fp32", 0, 32, numerics=False)
    covered = np.zeros((12, 8), bool)
    for r in writes:
        r0, r1, c0, c1 = _box(r)
        t.mark_written((r0, r1, c0, c1))
        covered[r0:r1, c0:c1] = True
        assert t.fully_written == covered.all()
        assert t.is_written((0, 12, 0, 8)) == covered.all()
        assert t.is_written((r0, r1, 0, 8)) == covered[r0:r1].all()


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("alloc"), st.integers(1, 40)),
            st.tuples(st.just("free"), st.integers(0, 30)),
        ),
        max_size=80,
    )
)
def test_sbuf_placement_is_first_fit_over_the_live_tiles(steps):
    """Free runs kept in order and merged give the offsets a first fit over the sorted live
    tiles gives, the same largest free run, and refuse exactly when no gap holds the tile."""
    from trnlab.core import SbufCapacityError
    from trnlab.core._memory import Memory

    params = core.core_params("trn2", sbuf_usable_partition_bytes=100)
    mem = Memory(params, name_of=str)
    live: dict[int, tuple[int, int]] = {}
    tid = 0

    def first_fit(need):
        at = 0
        for off, size in sorted(live.values()):
            if off - at >= need:
                return at
            at = off + size
        return at if 100 - at >= need else None

    for kind, value in steps:
        if kind == "alloc":
            want = first_fit(value)
            if want is None:
                with pytest.raises(SbufCapacityError):
                    mem.place_sbuf(tid, f"t{tid}", value)
            else:
                assert mem.place_sbuf(tid, f"t{tid}", value) == want
                live[tid] = (want, value)
            tid += 1
        elif live:
            victim = sorted(live)[value % len(live)]
            mem.release(victim, "sbuf", live.pop(victim)[0])
        gaps, at = [], 0
        for off, size in sorted(live.values()):
            gaps.append(off - at)
            at = off + size
        assert mem.largest_free() == max([*gaps, 100 - at])
        assert mem.sbuf_in_use == sum(b for _, b in live.values())


def test_reading_back_every_stored_row_is_refused_only_where_nothing_was_stored():
    """Past the few-store scan: 40 single-row stores, then reads of each row and of a row no
    store reached (the mask's answer, through the kernel API)."""

    def k(ctx, x, y):
        t = ctx.sbuf((1, 8), "fp32", bufs=2)
        for i in range(40):
            a = t.next()
            ctx.load(a, x[i : i + 1, :])
            ctx.store(y[i : i + 1, :], a)
        for i in range(40):
            ctx.load(t.next(), y[i : i + 1, :])
        ctx.load(t.next(), y[40:41, :])

    with pytest.raises(core.UnwrittenReadError, match=r"'y'\[40:41, 0:8\].*no instruction"):
        _run(k, numerics=False, x=core.hbm((41, 8), is_input=True), y=core.hbm((41, 8)))


def test_an_hbm_dimension_beyond_32_bits_is_refused_with_the_reason():
    """A DMA's row bounds are 32-bit in the instruction table: 2^31 rows is refused up front
    (it failed deep in the table build with an OverflowError), 2^31 - 1 rows still runs."""

    def k(ctx, x):
        ctx.load(ctx.sbuf((1, 1), "fp32"), x[x.shape[0] - 1 :, :])

    with pytest.raises(core.KernelArgumentError, match=r"2,147,483,648.*32-bit.*more columns"):
        _run(k, numerics=False, x=core.hbm((2**31, 1), is_input=True))
    run = _run(k, numerics=False, x=core.hbm((2**31 - 1, 1), is_input=True))
    assert run.program.table["hbm_region"][0].tolist() == [2**31 - 2, 2**31 - 1, 0, 1]


def test_dma_cannot_write_psum_and_gpsimd_cannot_read_psum():
    def k(ctx, x):
        ctx.load(ctx.psum((8, 8)), x)

    with pytest.raises(core.OperandPlacementError, match="only the Tensor Engine writes PSUM"):
        _run(k, x=core.hbm(np.ones((8, 8))))

    def g(ctx, x):
        a = ctx.sbuf((8, 8), "fp32")
        ctx.load(a, x)
        ps = ctx.psum((8, 8))
        ctx.matmul(ps, a, a)
        ctx.copy(ctx.sbuf((8, 8), "fp32"), ps, engine="gpsimd")

    with pytest.raises(core.OperandPlacementError, match="GpSimd has no PSUM port"):
        _run(g, x=core.hbm(np.ones((8, 8))))


def test_a_dma_between_sbuf_tiles_crosses_partitions():
    """ctx.dma_sbuf: the halves of a tile swapped across partitions, cast on the way; the
    rules that teach (PSUM, shapes); the SBUF arrow and no HBM bytes; a copy is no pass."""

    def k(ctx, x, y):
        a, b = ctx.sbuf((8, 4), "fp32"), ctx.sbuf((8, 4), "bf16")
        ctx.load(a, x)
        ctx.dma_sbuf(b[0:4, :], a[4:8, :])
        ctx.dma_sbuf(b[4:8, :], a[0:4, :])
        ctx.store(y, b)

    x = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
    r = _run(k, x=core.hbm(x), y=core.hbm((8, 4)))
    want = np.concatenate([x[4:], x[:4]]).astype(np.float32)
    from trnlab import formats

    np.testing.assert_array_equal(r.outputs["y"], formats.quantize(want, "bf16"))
    assert r.hbm_bytes == 2 * 8 * 4 * 4  # the load and the store, not the two copies
    assert core.traffic(r)[("SBUF", "SBUF")] == 8 * 4 * 4
    assert core.element_passes(r, "y")["passes"].max() == 1000  # copied, never computed
    t = r.program.table
    on_chip = np.flatnonzero(t["op"] == P.DMA_SBUF)
    assert [int(t["engine"][i]) for i in on_chip] == [P.FIRST_DMA] * 2
    load = int(np.flatnonzero(t["op"] == P.DMA_LOAD)[0])
    for i in on_chip:  # read after write through the load
        assert load in r.program.dep_idx[r.program.dep_ptr[i] : r.program.dep_ptr[i + 1]]

    def psum(ctx, x):
        a = ctx.sbuf((8, 8), "fp32")
        ctx.load(a, x)
        ctx.dma_sbuf(ctx.psum((8, 8)), a)

    with pytest.raises(core.OperandPlacementError, match="DMA engines reach HBM and SBUF"):
        _run(psum, x=core.hbm(np.ones((8, 8))))

    def shapes(ctx, x):
        a = ctx.sbuf((8, 8), "fp32")
        ctx.load(a, x)
        ctx.dma_sbuf(ctx.sbuf((4, 16), "fp32"), a)

    with pytest.raises(
        core.HardwareRuleError,
        match=r"destination region \(4, 16\) and source region \(8, 8\) differ in shape",
    ):
        _run(shapes, x=core.hbm(np.ones((8, 8))))

    def flat(ctx, x, y):
        a, b = ctx.sbuf((8, 8), "fp32"), ctx.sbuf((4, 16), "fp32")
        ctx.load(a, x)
        ctx.dma_sbuf(b, a, flat=True)  # row-major order, as a DMA streams elements
        ctx.store(y, b)

    v = np.arange(64, dtype=np.float32).reshape(8, 8)
    got = _run(flat, x=core.hbm(v), y=core.hbm((4, 16))).outputs["y"]
    np.testing.assert_array_equal(got, v.reshape(4, 16))


def test_a_dma_between_hbm_tensors():
    """ctx.dma_hbm: the copy's values and cast, the reads after it that wait (RAW), a write
    of its source that waits for it (WAR), its bytes on both HBM sides, and its refusals."""

    def k(ctx, x, y, z):
        ctx.dma_hbm(y, x)  # 0: fp32 -> bf16
        a = ctx.sbuf((8, 4), "fp32")
        ctx.load(a, y)  # 1: reads what 0 wrote
        ctx.memset(a, 1.0)  # 2
        ctx.store(x, a)  # 3: overwrites 0's source
        ctx.store(z, a)  # 4

    v = np.random.default_rng(4).standard_normal((8, 4)).astype(np.float32)
    kept = v.copy()
    r = _run(k, x=core.hbm(v), y=core.hbm((8, 4), "bf16"), z=core.hbm((8, 4)))
    np.testing.assert_array_equal(v, kept)  # the store into input x wrote the run's copy
    from trnlab import formats

    np.testing.assert_array_equal(r.outputs["y"], formats.quantize(v, "bf16"))
    assert 0 in r.program.deps(1) and 0 in r.program.deps(3)
    assert r.start[1] >= r.end[0] and r.start[3] >= r.end[0]
    assert r.program.describe(0) == "#0 dma_hbm on DMA q0: y[0:8,0:4] <- x[0:8,0:4]"
    # the copy's 128 B of fp32 (once, as the DMA moves them), the load's 64 B of bf16 and
    # the stores' 128 B each
    assert r.hbm_bytes == 128 + 64 + 2 * 128
    assert r.memory_bound_s == pytest.approx(r.hbm_bytes / r.params.dma_bandwidth)
    assert r.latency >= r.roofline_bound
    traffic = core.hbm_traffic(r)  # per tensor: x read in fp32, y written once in bf16
    assert traffic["x"]["loaded"] == 128 and traffic["y"]["stored"] == traffic["y"]["size"] == 64
    queues = {row["resource"]: row["tensors"] for row in core.time_breakdown(r)}
    assert {"x", "y"} <= set(queues[P.engine_name(int(r.program.table["engine"][0]))])
    assert core.traffic(r)[("HBM", "HBM")] == 128

    def unstored(ctx, x, y):
        ctx.dma_hbm(y, x)

    with pytest.raises(core.UnwrittenReadError, match=r"reads HBM tensor 'x'.*no instruction has"):
        _run(unstored, x=core.hbm((8, 4)), y=core.hbm((8, 4)))

    def shapes(ctx, x, y):
        ctx.dma_hbm(y, x)

    with pytest.raises(
        core.HardwareRuleError,
        match=r"destination region \(4, 8\) and source region \(8, 4\) differ in shape",
    ):
        _run(shapes, x=core.hbm(np.ones((8, 4))), y=core.hbm((4, 8)))
    got = _run(
        lambda ctx, x, y: ctx.dma_hbm(y, x, flat=True), x=core.hbm(v), y=core.hbm((4, 8))
    ).outputs["y"]
    np.testing.assert_array_equal(got, v.reshape(4, 8))


# --- numerics of the engines ------------------------------------------------------------------


def test_engine_numerics():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((96, 40)).astype(np.float32)
    bias = rng.standard_normal((96, 1)).astype(np.float32)

    def k(ctx, x, bias, relu, total, prod, gp):
        a = ctx.sbuf(x.shape, "fp32")
        b = ctx.sbuf((96, 1), "fp32")
        ctx.load(a, x)
        ctx.load(b, bias)
        o = ctx.sbuf(x.shape, "fp32")
        ctx.activation(o, a, "relu", scale=2.0, bias=b)
        ctx.store(relu, o)
        s = ctx.sbuf((96, 1), "fp32")
        ctx.reduce(s, a, "add")
        ctx.store(total, s)
        p = ctx.sbuf(x.shape, "fp32")
        ctx.tensor_tensor(p, a, a, "multiply")
        ctx.tensor_scalar(p, p, "add", 1.0)
        ctx.store(prod, p)
        g = ctx.sbuf(x.shape, "fp32")
        ctx.gpsimd(g, a, a, "maximum")
        ctx.store(gp, g)

    r = _run(
        k,
        x=core.hbm(x),
        bias=core.hbm(bias),
        relu=core.hbm(x.shape),
        total=core.hbm((96, 1)),
        prod=core.hbm(x.shape),
        gp=core.hbm(x.shape),
    )
    np.testing.assert_allclose(r.outputs["relu"], np.maximum(2 * x + bias, 0), rtol=1e-6)
    np.testing.assert_allclose(r.outputs["total"], x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.outputs["prod"], x * x + 1, rtol=1e-6)
    np.testing.assert_array_equal(r.outputs["gp"], x)


def test_copy_casts_through_formats():
    from trnlab import formats

    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8) * 1.01

    def k(ctx, x, y):
        a = ctx.sbuf((8, 8), "fp32")
        ctx.load(a, x)
        b = ctx.sbuf((8, 8), "bf16")
        ctx.copy(b, a, engine="scalar")
        ctx.store(y, b)

    r = _run(k, x=core.hbm(x), y=core.hbm((8, 8)))
    np.testing.assert_array_equal(r.outputs["y"], formats.quantize(x, "bf16"))


# --- recording and dependencies ---------------------------------------------------------------


def _double_buffer_kernel(buffers):
    def k(ctx, x, y):
        tiles = [ctx.sbuf((128, 2048), "bf16", f"buf{j}") for j in range(buffers)]
        for i in range(8):
            t = tiles[i % buffers]
            ctx.load(t, x[:, i * 2048 : (i + 1) * 2048])
            ctx.activation(t, t, "relu")
            ctx.store(y[:, i * 2048 : (i + 1) * 2048], t)

    return k


def test_dependencies_raw_and_war():
    r = _run(
        _double_buffer_kernel(1),
        numerics=False,
        x=core.hbm((128, 16384), "bf16", is_input=True),
        y=core.hbm((128, 16384), "bf16"),
    )
    prog = r.program
    # second load (#3) waits for the first store (#2) to read the buffer: write-after-read
    assert 2 in prog.deps(3).tolist()
    # the activation (#1) waits for the load (#0): read-after-write
    assert prog.deps(1).tolist() == [0]
    assert "dma_load" in prog.describe(0) and "x[0:128,0:2048]" in prog.describe(0)


def test_double_buffering_overlaps_and_is_faster():
    args = dict(x=core.hbm((128, 16384), "bf16", is_input=True), y=core.hbm((128, 16384), "bf16"))
    one = _run(_double_buffer_kernel(1), numerics=False, **args)
    two = _run(_double_buffer_kernel(2), numerics=False, **args)
    assert two.latency < 0.8 * one.latency


def test_program_table_is_flat_structured_array():
    r = _run(
        _double_buffer_kernel(2),
        numerics=False,
        x=core.hbm((128, 16384), "bf16", is_input=True),
        y=core.hbm((128, 16384), "bf16"),
    )
    t = r.program.table
    assert t.dtype == P.INSTRUCTION_DTYPE and len(t) == 24
    assert r.program.counts() == {"dma_load": 8, "dma_store": 8, "activation": 8}
    assert (t["bytes"][t["op"] == P.DMA_LOAD] == 128 * 2048 * 2).all()
    assert len(r.program.dep_ptr) == len(t) + 1


# --- scheduler and metrics --------------------------------------------------------------------


def test_occupancy_and_counters():
    from trnlab import kernels

    r = kernels.matmul((256, 256), (256, 512), variant="hoisted", numerics=False)
    _, used = r.occupancy("sbuf")
    assert used.min() >= 0 and used[-1] == 0 and used.max() > 0
    assert used.max() <= r.params.sbuf_usable_partition_bytes
    c = r.counters()
    assert c["peak_psum_bytes_per_partition"] <= r.params.psum_partition_bytes
    assert c["hbm_bytes"] == r.hbm_bytes > 0 and c["flops"] == 2 * 256 * 256 * 512
    assert set(r.busy) == {"Tensor", "Vector", "Scalar", "GpSimd", "DMA"}
    assert 0 < r.roofline()["attainable_flops"] <= r.roofline()["peak_flops"]


def test_roofline_is_a_lower_bound_on_random_programs():
    from trnlab import kernels

    rng = np.random.default_rng(0)
    for _ in range(6):
        m, k, n = (int(x) for x in rng.integers(1, 700, 3))
        for v in kernels.VARIANTS:
            r = kernels.matmul(
                (m, k),
                (k, n),
                variant=v,
                chip=str(rng.choice(["trn1", "trn2", "trn3"])),
                numerics=False,
            )
            assert r.latency >= r.roofline_bound * (1 - 1e-9)


def test_import_core_and_kernels_compiles_nothing():
    import subprocess
    import sys

    probe = "import sys, trnlab.core, trnlab.kernels; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert not set(out.stdout.split()) & {"numba", "llvmlite", "plotly", "ipywidgets"}


def test_summary_and_in_flight():
    from trnlab import kernels

    r = kernels.matmul((512, 512), (512, 1024), variant="tiled", numerics=False)
    text = r.summary()
    assert "memory-bound" in text and "Tensor" in text and "DMA" in text
    mid = r.latency / 2
    running = r.in_flight(mid)
    assert len(running) >= 1 and all(r.start[i] <= mid < r.end[i] for i in running)
    half, full = r.counters_at(mid), r.counters_at(r.latency)
    assert 0 < half["flops"] < full["flops"] == r.flops
    assert full["hbm_bytes"] == r.hbm_bytes
    assert full["utilisation"] == pytest.approx(r.utilisation)


def test_docstring_examples_run():
    import doctest

    import trnlab.core
    import trnlab.core._run
    import trnlab.kernels

    for mod in (trnlab.core, trnlab.core._run, trnlab.kernels):
        result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, mod.__name__


_EDGES = st.sampled_from([-17, -16, -13, -12, -1, 0, 1, 11, 12, 13, 15, 16, 17])  # of 16 x 12
_BOUNDS = st.one_of(
    st.none(),
    _EDGES,
    st.integers(-20, 20),
    st.booleans(),
    st.sampled_from([1.0, 2.5]),
    st.integers(-20, 20).map(np.int64),
)
_INDEX = st.one_of(
    st.builds(slice, _BOUNDS, _BOUNDS, st.sampled_from([None, 1, 2])),
    st.integers(-20, 20),
    st.booleans(),
    st.integers(-20, 20).map(np.int64),
)


@settings(max_examples=400, deadline=None)
@given(
    key=st.one_of(
        _INDEX, st.tuples(_INDEX, _INDEX), st.tuples(_INDEX), st.tuples(_INDEX, _INDEX, _INDEX)
    ),
    hbm=st.booleans(),
)
@example(key=(slice(3, 4), slice(None)), hbm=True)  # the fast path
@example(key=(slice(0, 16), slice(2, 9)), hbm=False)
@example(key=(slice(10, 17), slice(None)), hbm=True)  # one past the end: refused by both
@example(key=(slice(None), slice(0, 13)), hbm=False)
@example(key=(slice(True, 4), slice(None)), hbm=False)  # a bool bound: refused by both
@example(key=(slice(np.int64(1), 4), slice(None)), hbm=True)  # a NumPy bound: the slow path
def test_slicing_fast_path_agrees_with_the_checked_path(key, hbm):
    """Indexing a tile or HBM tensor gives the region the full check (``_bad_index``) gives,
    or the same refusal: the inline fast path for plain slices changes nothing but speed."""
    from trnlab.core import _tiles

    got = {}

    def k(ctx, x):
        got["owner"] = x if hbm else ctx.sbuf((16, 12), "bf16")

    core.record(k, numerics=False, x=core.hbm((16, 12), "bf16", is_input=True))
    owner = got["owner"]
    try:
        want = _tiles._bad_index(key, owner.shape, "it")
    except core.TileIndexError:
        with pytest.raises(core.TileIndexError):
            owner[key]
        return
    v = owner[key]
    region = (v.r0, v.r1, v.c0, v.c1) if hbm else v.region
    assert region == tuple(want) and all(type(b) is int for b in region)
