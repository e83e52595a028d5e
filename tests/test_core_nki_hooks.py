"""The additive hooks trnlab.core offers trnlab.nki: instructions whose values the caller
computes, DMAs between regions of equal element counts or strided HBM accesses, packed matmuls."""

from __future__ import annotations

import numpy as np
import pytest

from trnlab import core


def test_flat_dmas_reshape_in_row_major_order():
    def k(ctx, x, y):
        t = ctx.sbuf((2, 8), "fp32")
        ctx.load(t, x[0:4, :], flat=True)  # [4, 4] rows -> [2, 8]
        ctx.store(y, t, flat=True)  # [2, 8] -> [4, 4]

    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    r = core.run(k, x=core.hbm(x), y=core.hbm((4, 4)))
    np.testing.assert_array_equal(r.outputs["y"], x)
    with pytest.raises(core.HardwareRuleError, match="differ in shape"):
        core.run(lambda ctx, x: ctx.load(ctx.sbuf((2, 8), "fp32"), x), x=core.hbm(x))
    with pytest.raises(core.HardwareRuleError, match="differ in element count"):
        core.run(lambda ctx, x: ctx.load(ctx.sbuf((2, 4), "fp32"), x, flat=True), x=core.hbm(x))


def test_strided_dmas_count_their_elements_and_record_timing_only():
    def k(ctx, x):
        t = ctx.sbuf((8, 16), "bf16")
        ctx.load(t, x[0:8, 0:64], elements=128)  # a strided access inside an [8, 64] box

    r = core.run(k, numerics=False, x=core.hbm((8, 64), "bf16", is_input=True))
    assert r.program.table["bytes"][0] == 128 * 2 and r.hbm_bytes == 256
    with pytest.raises(core.KernelArgumentError, match="timing only"):
        core.run(k, x=core.hbm(np.ones((8, 64))))

    def too_many(ctx, x):
        ctx.load(ctx.sbuf((8, 16), "bf16"), x[0:8, 0:8], elements=128)

    with pytest.raises(core.HardwareRuleError, match=r"HBM side \(64\)"):
        core.run(too_many, numerics=False, x=core.hbm((8, 64), "bf16", is_input=True))


def test_a_strided_sbuf_side_streams_its_elements_not_its_box():
    # every other column of an [8, 32] tile from a contiguous [8, 16] HBM block: the engines
    # stream 16 elements per partition, as a contiguous [8, 16] load does
    def strided(ctx, x):
        ctx.load(ctx.sbuf((8, 32), "fp32"), x[0:8, 0:16], elements=128)

    def contiguous(ctx, x):
        ctx.load(ctx.sbuf((8, 16), "fp32"), x[0:8, 0:16])

    x = core.hbm((8, 16), "fp32", is_input=True)
    a = core.run(strided, numerics=False, x=x)
    b = core.run(contiguous, numerics=False, x=x)
    assert a.program.table["bytes"][0] == b.program.table["bytes"][0] == 128 * 4
    assert a.latency == pytest.approx(b.latency)

    def too_many(ctx, x):
        ctx.load(ctx.sbuf((8, 8), "fp32"), x[0:8, 0:16], elements=128)

    with pytest.raises(core.HardwareRuleError, match=r"SBUF side \(64 cells\)"):
        core.run(too_many, numerics=False, x=x)


@pytest.mark.parametrize("chip", ["trn1", "trn2", "trn3"])
def test_each_packet_beyond_one_per_row_costs_its_engine_the_packet_time(chip):
    """The same bytes in 8 rows: as 8 contiguous runs, or as 128 (every other element of a
    strided SBUF side, 16 runs a row): the engine serving the rows pays 15 packet times a row
    more; a packet count outside one-per-row .. one-per-element is refused."""

    def k(packets):
        def kernel(ctx, x):
            ctx.load(ctx.sbuf((8, 32), "fp32"), x[0:8, 0:16], elements=128, packets=packets)

        return kernel

    x = core.hbm((8, 16), "fp32", is_input=True)
    runs = {n: core.run(k(n), chip=chip, numerics=False, x=x) for n in (8, 128)}
    p = runs[8].params
    extra = runs[128].issue_end[0] - runs[8].issue_end[0]
    assert runs[128].program.table["packets"][0] == 128
    # a row's 16 packets take longer than its 64 bytes stream: the packets set its time
    assert extra == pytest.approx(8 * (15 * p.dma_packet_time - 64 / p.dma_engine_bandwidth))
    assert runs[8].latency == pytest.approx(
        core.run(k(None), chip=chip, numerics=False, x=x).latency
    )  # one packet per row is the default

    # runs of 4 KiB (2 a row) stream at full rate: the packets hide under the bytes
    def big(packets):
        def kernel(ctx, y):
            ctx.load(ctx.sbuf((8, 2048), "fp32"), y, packets=packets)

        return kernel

    y = core.hbm((8, 2048), "fp32", is_input=True)
    two = core.run(big(16), chip=chip, numerics=False, y=y)
    assert two.latency == pytest.approx(core.run(big(None), chip=chip, numerics=False, y=y).latency)
    for bad, err in ((7, core.HardwareRuleError), (129, core.HardwareRuleError),
                     (8.5, core.KernelArgumentError), (True, core.KernelArgumentError)):  # fmt: skip
        with pytest.raises(err, match="packets"):
            core.run(k(bad), chip=chip, numerics=False, x=x)

    def refused_then_stored(ctx, x, out):
        t = ctx.sbuf((8, 16), "fp32")
        ctx.load(t, x)
        with pytest.raises(core.HardwareRuleError, match="packets"):
            ctx.store(out, t, packets=200)
        ctx.store(out, t)  # the refused store left nothing behind

    r = core.run(refused_then_stored, chip=chip, numerics=False, x=x, out=core.hbm((8, 16)))
    assert len(r.program) == 2 and list(r.program.table["bytes"]) == [512, 512]


def test_nki_op_records_without_computing_and_lets_vector_write_psum():
    def k(ctx, x):
        a = ctx.sbuf((4, 8), "fp32")
        ctx.load(a, x)
        ps = ctx.psum((4, 8))
        ctx.nki_op("tensor_scalar", "vector", ps.full, [a.full], elements=8)
        ctx.nki_op("reduce", "vector", ctx.sbuf((4, 6), "fp32").full, [a.full], elements=8)
        ctx.nki_op("gpsimd", "gpsimd", ctx.sbuf((1, 8), "fp32").full, [a.full])

    r = core.run(k, numerics=False, x=core.hbm((4, 8), "fp32", is_input=True))
    assert r.program.counts() == {"dma_load": 1, "tensor_scalar": 1, "reduce": 1, "gpsimd": 1}
    with pytest.raises(core.OperandPlacementError, match="GpSimd has no PSUM port"):
        core.run(
            lambda ctx: ctx.nki_op("gpsimd", "gpsimd", ctx.psum((4, 8)).full, []), numerics=False
        )
    with pytest.raises(core.KernelArgumentError, match="records one of"):
        core.run(lambda ctx: ctx.nki_op("fft", "vector", ctx.sbuf((4, 8)).full), numerics=False)


def test_packed_matmul_counts_the_packed_contraction():
    def k(ctx, x, y):
        a = ctx.sbuf((128, 64), "mxfp8_e4m3_x4")
        b = ctx.sbuf((128, 256), "mxfp8_e4m3_x4")
        ctx.load(a, x)
        ctx.load(b, y)
        ctx.matmul(ctx.psum((64, 256)), a, b, packed=4)

    args = dict(
        x=core.hbm((128, 64), "mxfp8_e4m3_x4", is_input=True),
        y=core.hbm((128, 256), "mxfp8_e4m3_x4", is_input=True),
    )
    r = core.run(k, chip="trn3", numerics=False, **args)
    assert r.flops == 2 * (4 * 128) * 64 * 256
    assert r.program.table["bytes"][0] == 128 * 64 * 4  # four fp8 values per element
    with pytest.raises(core.FormatNotSupportedError, match="mxfp8"):
        core.run(k, chip="trn2", numerics=False, **args)


def test_an_hbm_to_hbm_copy_costs_the_same_whatever_the_shapes_of_its_sides():
    """The same 1,024 runs of 64 fp32 into a [1024, 64] tensor or onto one [1, 65536] row:
    the copy spreads over the DMA engines as a load of 128 partitions does, either way."""

    def k(shape):
        def kernel(ctx, a, y):
            ctx.dma_hbm(y, a[0:1024, 0:64], flat=True, elements=65536, packets=1024)

        return kernel, core.hbm(shape, "fp32")

    a = core.hbm((1024, 128), "fp32", is_input=True)
    times = []
    for shape in ((1024, 64), (1, 65536)):
        kernel, y = k(shape)
        r = core.run(kernel, chip="trn2", numerics=False, a=a, y=y)
        times.append(r.issue_end[0] - r.start[0])
    assert times[0] == pytest.approx(times[1])
