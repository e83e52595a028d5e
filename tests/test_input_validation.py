"""Bad input is refused with a trnlab error that teaches (issue 15, item 4): one test per bug
the fuzz test (test_fuzz_public_api.py) found, each failing before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import trnlab
from trnlab import catalog, formats, units
from trnlab.catalog import CatalogError
from trnlab.formats import FormatError


def test_every_subpackage_error_is_a_trnlab_error_and_still_a_value_error():
    from trnlab import core, fabric, scale

    for cls in (
        CatalogError,
        FormatError,
        formats.FormatTypeError,
        core.HardwareRuleError,
        core.KernelArgumentError,
        core.TileIndexError,
        core.UnknownFigureError,
        fabric.FabricError,
        scale.WorkloadError,
    ):
        assert issubclass(cls, trnlab.TrnlabError) and issubclass(cls, ValueError), cls
    # the old contracts hold: a type mistake is still a TypeError, a bad index an IndexError,
    # an unknown figure a KeyError (with a readable message, not KeyError's quoted repr)
    assert issubclass(formats.FormatTypeError, TypeError)
    assert issubclass(core.TileIndexError, IndexError)
    err = core.UnknownFigureError("unknown figure(s) ['x']")
    assert isinstance(err, KeyError) and str(err) == "unknown figure(s) ['x']"


# --- catalog ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: catalog.cluster(None, 2), "cluster base"),
        (lambda: catalog.cluster(print, 2), "cluster base"),
        (lambda: catalog.cluster("trn2.48xlarge", 1.5), "whole number"),
        (lambda: catalog.cluster("trn2.48xlarge", True), "whole number"),
        (lambda: catalog.figure(b"trn2.hbm_bandwidth"), "dotted string"),
        (lambda: catalog.figure(()), "dotted string"),
        (lambda: catalog.figure("   "), "figure path"),
        (lambda: catalog.figure("trn2.48xlarge.peak.fp88"), "peak.fp88.*Did you mean 'fp8'"),
        (lambda: catalog.chip("trn2").figure(()), "named by a string"),
        (lambda: catalog.core("v3").figure(None), "named by a string"),
        (lambda: catalog.system("trn2.48xlarge").figure([]), "named by a string"),
        (lambda: catalog.measurements([]), "file name"),
        (lambda: catalog.table([]), "figure group"),
        (lambda: catalog.table("colectives"), "Did you mean 'collectives'"),
        (lambda: catalog.core("vv3"), "Did you mean .v3."),
        (lambda: catalog.stated_tolerance(float("nan")), "stated figure"),
        (lambda: catalog.stated_tolerance("0 PFLOPS"), "zero"),
        (lambda: catalog.chip("trn2").peak_flops("fp8", sparse="yes"), "sparse"),
        (lambda: catalog.chip("trn2").peak_figure("fp16", sparse=0), "sparse"),
        (lambda: catalog.system("trn1.2xlarge").peak_flops("fp16", sparse=0), "sparse"),
        (lambda: catalog.chip("trn2").sparse_speedup(5), "N:M"),
    ],
)
def test_catalog_refuses_with_a_catalog_error(call, match):
    with pytest.raises(CatalogError, match=match):
        call()


def test_catalog_names_are_case_insensitive():
    assert [c.key for c in catalog.chips("GPU")] == [c.key for c in catalog.chips("gpu")]
    assert catalog.core("NeuronCore-V3").key == "v3"
    assert catalog.table(" Collectives ") == catalog.table("collectives")
    assert catalog.figure("TRN2.HBM_Bandwidth").value == catalog.figure("trn2.hbm_bandwidth").value
    assert catalog.measurements("NeuronCore") == catalog.measurements("neuroncore")


# --- units ------------------------------------------------------------------------------------


def test_units_refuse_bad_digits_and_non_numbers_without_hanging():
    with pytest.raises(trnlab.TrnlabError, match="sig"):
        units.si(1e123, "W", sig=2**62)  # used to compute 10**sig: a hang
    for bad in ("4", 2.0, 0, None):
        with pytest.raises(trnlab.TrnlabError, match="sig"):
            units.binary(2**30, sig=bad)
    for bad in (None, "96 GiB", 1j):
        with pytest.raises(trnlab.TrnlabError, match="byte count"):
            units.binary(bad)
    with pytest.raises(trnlab.TrnlabError, match="unit"):
        units.si(1.0, unit=None)
    with pytest.raises(trnlab.TrnlabError, match="binary_bytes"):
        units.si(1.0, "B", binary_bytes="no")
    assert units.si(None) == "n/a" and units.si("NeuronLink-v3") == "NeuronLink-v3"


# --- formats ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [None, [None, 1.0], np.array(["1.5", "2"]), {"a": 1}, b"xy", [[1.0, 2.0], [3.0]]],
    ids=["None", "None-in-list", "strings", "dict", "bytes", "ragged"],
)
@pytest.mark.parametrize("fn", [formats.quantize, formats.encode])
def test_values_that_are_not_numbers_are_refused(fn, x):
    # quantize(None) used to return NaN; string arrays were parsed as numbers
    with pytest.raises(FormatError):
        fn(x, "fp32")


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(saturate="yes"), "saturate"),
        (dict(seed=-1), "seed"),
        (dict(seed=1.5), "seed"),
        (dict(axis="0"), "axis"),
        (dict(rounding="nearst"), "Did you mean 'nearest'"),
        (dict(scale_rule="ocpp"), "Did you mean 'ocp'"),
    ],
)
def test_quantize_checks_every_option_even_where_it_is_unused(options, match):
    # a bad seed with nearest rounding, or a bad axis for a non-MX format, used to pass unseen
    with pytest.raises(FormatError, match=match):
        formats.quantize([1.0], "bf16", **options)


def test_int8_scale_must_be_a_positive_number():
    for bad in (True, "x", float("nan"), -1.0):
        with pytest.raises(FormatError, match="scale"):
            formats.quantize([1.0], "int8", scale=bad)


def test_names_of_options_are_case_insensitive():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    np.testing.assert_array_equal(
        formats.quantize(x, "MXFP4", rounding="Nearest", scale_rule="OCP"),
        formats.quantize(x, "mxfp4"),
    )
    np.testing.assert_array_equal(
        formats.sample("Gaussian", (4, 4)), formats.sample("gaussian", (4, 4))
    )


def test_decode_refuses_arguments_it_would_ignore():
    enc = formats.encode(np.ones((2, 32), np.float32), "mxfp4")
    with pytest.raises(FormatError, match="carries its own scales"):
        formats.decode(enc, scales=enc.scales)
    with pytest.raises(FormatError, match="block scales of MX"):
        formats.decode(np.zeros(4, np.uint8), "fp8_e4m3fn", scales=np.zeros(1, np.uint8))
    with pytest.raises(FormatError, match="per-tensor scale"):
        formats.decode(np.zeros(4, np.uint8), "fp6_e3m2", scale=2.0)
    with pytest.raises(FormatError, match="axis"):
        formats.decode(np.zeros(4, np.uint8), "fp8_e4m3fn", axis=True)
    with pytest.raises(FormatError, match=r"0\.\.255"):
        formats.decode(enc.codes, "mxfp4", scales=enc.scales.astype(np.int64) + 300)


def test_matmul_checks_its_options():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(FormatError, match="saturate"):
        formats.matmul(a, a.T, "fp32", saturate="yes")
    with pytest.raises(FormatError, match="scale_rule"):
        formats.matmul(a, a.T, "fp32", scale_rule="ocpp")
    with pytest.raises(FormatError, match="seed"):
        formats.matmul(a, a.T, "bf16", seed="abc")


def test_prune_and_sample_refuse_bad_sizes():
    with pytest.raises(FormatError, match="axis"):
        formats.prune([[0.1, -3.0, 0.5, 2.0]], 2, 4, axis="0")
    with pytest.raises(FormatError, match="whole number"):
        formats.prune([[0.1, -3.0, 0.5, 2.0]], True, 4)  # (True, 4) == (1, 4) used to pass
    for shape in [(), (4,), (float("nan"), 4), (0, 4), (2**40, 2**40)]:
        with pytest.raises(FormatError, match="shape"):
            formats.sample("gaussian", shape)
    with pytest.raises(FormatError, match="seed"):
        formats.sample("gaussian", (4, 4), seed=-1)


# --- core -------------------------------------------------------------------------------------

from trnlab import core, kernels  # noqa: E402
from trnlab.core import KernelArgumentError  # noqa: E402


def _copy(ctx, x, y):
    t = ctx.sbuf(x.shape, "bf16")
    ctx.load(t, x)
    ctx.store(y, t)


def _args():
    return dict(x=core.hbm(np.ones((4, 8), np.float32)), y=core.hbm((4, 8)))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: core.run(None, **_args()), "kernel must be a function"),
        (lambda: core.run(lambda ctx: None, **_args()), "cannot take the arguments"),
        (lambda: core.run(_copy, numerics=[], **_args()), "numerics"),
        (lambda: core.run(_copy, max_instructions=0, **_args()), "max_instructions"),
        (lambda: core.hbm(()), "two whole numbers"),
        (lambda: core.hbm((True, 4)), "two whole numbers"),
        (lambda: core.hbm((0, 4)), "at least 1"),
        (lambda: core.hbm(np.zeros((0, 5))), "at least one element"),
        (lambda: core.hbm(np.ones(7)), "2-D"),
        (lambda: core.hbm(None), "real numbers"),
        (lambda: core.hbm(np.array([["a"]])), "real numbers"),
        (lambda: core.hbm((4, 8), "fp16!"), "fp16"),
        (lambda: core.hbm((4, 8), is_input="yes"), "is_input"),
        (lambda: core.simulate(None, core.core_params("trn2")), "Program"),
        (lambda: core.schedule(5, core.core_params("trn2")), "Program"),
        (lambda: core.costs(np.zeros(3), core.core_params("trn2")), "instruction table"),
        (lambda: core.engine_name(-1), "engine"),
        (lambda: core.engine_name("0"), "engine"),
        (lambda: core.core_params("trn2", sbuf_partitions=10**6), "beyond what the model"),
        (lambda: core.core_params("trn2").peak_flops("fp3"), "fp32"),
        (lambda: core.core_params("trn1").peak_flops([]), "data type"),
        (lambda: core.format_bits([]), "format"),
    ],
)
def test_core_refuses_with_a_trnlab_error(call, match):
    with pytest.raises(trnlab.TrnlabError, match=match):
        call()


def test_unknown_figure_stays_a_key_error():
    with pytest.raises(KeyError, match="unknown figure"):
        core.core_params("trn2", warp_speed=9)


def _ctx():
    ctx = core.KernelContext(core.core_params("trn2"))
    a = ctx.sbuf((64, 64), "bf16", "a")
    ctx.memset(a, 1.0)
    return ctx, a


@pytest.mark.parametrize(
    "do, error, match",
    [
        (lambda c, a: c.sbuf((8, 8), "bf16", name=b"t"), KernelArgumentError, "name"),
        (lambda c, a: c.psum((8, 8), name=5, bufs=2), KernelArgumentError, "name"),
        (lambda c, a: c.hbm(None, (4, 4)), KernelArgumentError, "name"),
        (lambda c, a: c.hbm("z", (4, 4), written=0), KernelArgumentError, "written"),
        (lambda c, a: c.hbm("z", (4, 4), data="abc"), KernelArgumentError, "real numbers"),
        (lambda c, a: c.hbm("z", (4, 4), data=np.ones((3, 3))), KernelArgumentError, "shape"),
        (lambda c, a: a[0:1.5, :], core.TileIndexError, "whole number"),
        (lambda c, a: c.sbuf((8, 8), "bf16", bufs=2)[2], core.TileIndexError, "buffers 0..1"),
        (lambda c, a: c.sbuf((8, 8), "bf16", bufs=2)["0"], core.TileIndexError, "buffers"),
        (lambda c, a: c.memset(a, 0.0, engine=[]), KernelArgumentError, "memset engine"),
        (lambda c, a: c.tensor_scalar(a, a, "mult", 2.0), KernelArgumentError, "Did you mean"),
    ],
)
def test_kernel_api_refuses_bad_arguments(do, error, match):
    ctx, a = _ctx()
    with pytest.raises(error, match=match):
        do(ctx, a)


def test_matmul_accumulate_must_be_a_boolean():
    ctx, a = _ctx()
    p = ctx.psum((64, 64))
    with pytest.raises(KernelArgumentError, match="accumulate"):
        ctx.matmul(p, a, a, accumulate=0)  # 0 used to mean False silently


def test_kernel_api_names_are_case_insensitive_and_formats_canonical():
    ctx, a = _ctx()
    o = ctx.sbuf((64, 64), "BF16", "o")
    assert o.fmt == "bf16"
    ctx.activation(o, a, "ReLU")
    ctx.tensor_scalar(o, o, "Multiply", 2.0)
    ctx.memset(o, 1.0, engine="GpSimd")


def test_run_queries_check_their_arguments():
    r = core.run(_copy, numerics=False, x=core.hbm((4, 8), is_input=True), y=core.hbm((4, 8)))
    for bad in (float("nan"), -1.0, None, "0"):
        with pytest.raises(KernelArgumentError, match="seconds"):
            r.in_flight(bad)
        with pytest.raises(KernelArgumentError, match="seconds"):
            r.counters_at(bad)
    with pytest.raises(KernelArgumentError, match="Did you mean 'sbuf'"):
        r.occupancy("sbu")  # used to return an empty picture
    for bad in (-1, 10**6, 1.5, "0", True):
        with pytest.raises(KernelArgumentError, match="instruction"):
            r.program.describe(bad)
        with pytest.raises(KernelArgumentError, match="instruction"):
            r.program.deps(bad)


# --- no hangs: the instruction limit ----------------------------------------------------------


def test_a_huge_timing_only_matmul_is_refused_at_once_with_the_estimate():
    import time

    t0 = time.perf_counter()
    with pytest.raises(core.InstructionLimitError) as err:
        kernels.matmul((65536, 65536), (65536, 65536), variant="tiled", numerics=False)
    assert time.perf_counter() - t0 < 5  # refused before recording (it used to run for hours)
    msg = str(err.value)
    assert "100,794,368" in msg and "250,000" in msg and "max_instructions" in msg


_SCAN = ((256, 300), (256, 300), (256, 3), (3, 300), (3, 300))
_ESTIMATED = [
    ("transpose", lambda: kernels.transpose((300, 700), numerics=False), (300, 700)),
    ("transpose2d", lambda: kernels.transpose2d((300, 12), (3, 4), numerics=False), (300, 12)),
    ("tensor_add", lambda: kernels.tensor_add((300, 1100), (300, 1100), numerics=False),
     (300, 1100)),
    ("avgpool2d", lambda: kernels.avgpool2d((300, 8, 8), 2, numerics=False), (300, 8, 8)),
    ("softmax", lambda: kernels.softmax((1000, 300), numerics=False), (1000, 300)),
    ("rmsnorm", lambda: kernels.rmsnorm((1000, 300), (300,), numerics=False), (1000, 300)),
    ("layernorm", lambda: kernels.layernorm((1000, 1300), (1300,), (1300,), numerics=False),
     (1000, 1300)),
    ("attention", lambda: kernels.attention((1000, 64), (1500, 64), (1500, 64), numerics=False),
     (1000, 1500, 64, False)),
    ("attention", lambda: kernels.attention((900, 32), (900, 32), (900, 32), causal=True,
                                            numerics=False), (900, 900, 32, True)),
    ("selective_scan", lambda: kernels.selective_scan(*_SCAN, version="v1", numerics=False),
     (256, 300, 3, "v1", 512, False)),
    ("selective_scan", lambda: kernels.selective_scan(*_SCAN, version="v2", numerics=False),
     (256, 300, 3, "v2", 512, False)),
    ("selective_scan", lambda: kernels.selective_scan(*_SCAN, chunk=64, hoist=True,
                                                      numerics=False), (256, 300, 3, "v3", 64, True)),
    ("matmul_bias_act", lambda: kernels.matmul_bias_act((300, 700), (700, 200), (200,),
                                                        numerics=False), (300, 700, 200)),
]  # fmt: skip


@pytest.mark.parametrize("name, run, sizes", _ESTIMATED)
def test_each_library_estimate_is_close_to_the_recorded_count(name, run, sizes):
    """The estimate that refuses a huge run before tracing is within 30% of what the kernel
    records (exact for the simple kernels; attention and the scan round their inner loops)."""
    from trnlab.kernels._estimates import ESTIMATES

    recorded = len(run().program)
    assert 0.77 * recorded <= ESTIMATES[name](*sizes) <= 1.3 * recorded


@pytest.mark.parametrize(
    "call",
    [
        lambda: kernels.attention((65536, 128), (65536, 128), (65536, 128), numerics=False),
        lambda: kernels.tensor_add((10**5, 10**5), (10**5, 10**5), numerics=False),
        lambda: kernels.transpose((10**5, 10**5), numerics=False),
        lambda: kernels.softmax((10**8, 64), numerics=False),
        lambda: kernels.matmul_bias_act((65536, 65536), (65536, 65536), (65536,), numerics=False),
        lambda: kernels.selective_scan(
            (2**16, 2**16), (2**16, 2**16), (2**16, 16), (16, 2**16), (16, 2**16), numerics=False
        ),
    ],
)
def test_huge_timing_only_library_runs_are_refused_before_tracing(call):
    """Each used to trace for minutes (attention over 65,536 tokens: 5 min on this machine)."""
    import time

    t0 = time.perf_counter()
    with pytest.raises(core.InstructionLimitError, match=r"would record about [\d,]+ .*250,000"):
        call()
    assert time.perf_counter() - t0 < 5


def test_an_nki_trace_stops_at_the_limit_and_a_block_can_raise_it():
    import trnlab.nki as nki
    import trnlab.nki.isa as nisa
    import trnlab.nki.language as nl

    @nki.jit
    def many(x):
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        for _ in range(40_000):
            nisa.memset(dst=t, value=0.0)
        return x

    x = nki.hbm((1, 8), nl.float32)
    with pytest.raises(core.InstructionLimitError, match=r"has recorded 32,768.*NKI kernel"):
        with core.max_instructions(20_000):
            nki.profile(many, chip="trn2")(x)
    assert core.MAX_NKI_INSTRUCTIONS == 250_000


@pytest.mark.parametrize("variant", list(kernels.VARIANTS))
def test_the_estimate_is_the_instruction_count_of_the_kernel(variant):
    from trnlab.kernels._matmul import estimate_instructions

    for m, k, n in [(256, 512, 1024), (1000, 300, 700), (130, 129, 513)]:
        r = kernels.matmul((m, k), (k, n), variant=variant, numerics=False)
        assert estimate_instructions(variant, m, k, n) == len(r.program)


def test_raising_the_limit_lets_a_run_through_and_the_recording_stops_at_it():
    def many(ctx, x):
        t = ctx.sbuf((1, 8), "fp32")
        for _ in range(40_000):
            ctx.memset(t, 0.0)

    x = core.hbm((1, 8), is_input=True)
    with pytest.raises(core.InstructionLimitError, match="has recorded 32,768"):
        core.run(many, numerics=False, max_instructions=20_000, x=x)
    assert len(core.run(many, numerics=False, max_instructions=50_000, x=x).program) == 40_000
    with pytest.raises(core.InstructionLimitError, match="run with numerics"):
        kernels.matmul(
            np.ones((2, 1)), np.ones((1, 300_000)), variant="tiled", max_instructions=100
        )


# --- kernels ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, match",
    [
        ({"tile_k": 0}, "tile_k"),  # range() step 0 used to escape
        ({"tile_m": -1}, "tile_m"),
        ({"tile_n": 1.5}, "tile_n"),
        ({"bufs": 0}, "bufs"),
        ({"bufs": True}, "bufs"),
        ({"foo": 1}, "no option foo"),
        ({"a_width": 1}, "option"),
    ],
)
def test_kernel_options_are_checked(options, match):
    with pytest.raises(KernelArgumentError, match=match):
        kernels.matmul((256, 256), (256, 256), variant="tiled", numerics=False, **options)


def test_reference_kernels_check_their_block_sizes_when_run_directly():
    args = dict(
        a_t=core.hbm((256, 256), is_input=True),
        b=core.hbm((256, 256), is_input=True),
        c=core.hbm((256, 256)),
    )
    with pytest.raises(KernelArgumentError, match="tile_k"):
        core.run(kernels.hoisted, numerics=False, tile_k=0, **args)
    with pytest.raises(KernelArgumentError, match="bufs"):
        core.run(kernels.pipelined, numerics=False, bufs=True, **args)
    with pytest.raises(KernelArgumentError, match="tiles_m"):
        core.run(kernels.blocked_mnk, numerics=False, tiles_m=0, **args)


def test_kernel_entry_points_check_shapes_names_and_flags():
    a = np.ones((8, 4), np.float32)
    with pytest.raises(KernelArgumentError, match="same K"):
        kernels.matmul(a, np.ones((5, 3), np.float32))
    with pytest.raises(KernelArgumentError, match="two whole numbers"):
        kernels.matmul((), (4, 3), numerics=False)
    with pytest.raises(KernelArgumentError, match="numerics"):
        kernels.matmul(a, a.T, numerics="no")
    assert kernels.matmul(a, a.T, variant="TILED").output.shape == (8, 8)
    with pytest.raises(KernelArgumentError, match="bias"):
        kernels.matmul_bias_act(a, a.T, np.ones(3))
    assert kernels.matmul_bias_act(a, a.T, np.ones(8), activation="ReLU").output.shape == (8, 8)
    with pytest.raises(KernelArgumentError, match="at least one element"):
        kernels.transpose(np.zeros((0, 4)))


_X = np.ones((100, 64), np.float32)
_Q = np.ones((8, 16), np.float32)
_S1 = np.ones((128, 8), np.float32)
_C, _B = np.ones((100, 8), np.float32), np.ones((4, 8), np.float32)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: kernels.rmsnorm(np.ones(64), np.ones(64)), r"x must have 2 axes"),
        (lambda: kernels.rmsnorm(_X, np.ones(5)), r"gamma must hold one weight per feature"),
        (lambda: kernels.layernorm(_X, np.ones(64), np.ones(3)), r"beta must hold one weight"),
        (lambda: kernels.softmax(np.ones((2, 3, 4))), r"x must have 2 axes"),
        (lambda: kernels.attention(_Q, np.ones((8, 32)), _Q), r"k must have shape \(8, 16\)"),
        (lambda: kernels.attention(_Q, _Q, np.ones((9, 16))), r"v must have shape \(8, 16\)"),
        (lambda: kernels.attention(*[np.ones((8, 200))] * 3), r"head dimension d = 200"),
        (
            lambda: kernels.selective_scan(_C, _C, np.ones((100, 4)), _B, _B),
            r"100 channels.*multiple of 128",
        ),
        (lambda: kernels.selective_scan(_S1, np.ones((128, 9)), _S1, _Q, _Q), r"u must have"),
        (lambda: kernels.avgpool2d(np.ones((4, 8, 8)), 16), r"pool_size = 16 is larger"),
        (lambda: kernels.avgpool2d(np.ones((8, 8)), 2), r"x must have 3 axes"),
        (lambda: kernels.tensor_add(np.ones((4, 8)), np.ones((4, 9))), r"b must have shape"),
        (lambda: kernels.transpose2d(np.ones((4, 12)), (5, 2)), r"f1 \* f2 must equal"),
        (lambda: kernels.attention_reference(_Q, np.ones((8, 32)), _Q), r"k has 32 along d"),
        (lambda: kernels.selective_scan_reference(np.ones(3), 1, 2, 3, 4), r"delta must be"),
        (lambda: kernels.selective_scan_kernel(None, *[None] * 6, version="v4"), "version"),
    ],
)
def test_nki_library_entry_points_check_shapes_before_tracing(call, match):
    """Shapes that do not fit together are refused by name (these used to reach the kernel and
    fail as a raw ValueError, or, for tensor_add, to be accepted with b's extra column)."""
    with pytest.raises(KernelArgumentError, match=match):
        call()


# --- fabric -----------------------------------------------------------------------------------

from trnlab import catalog as _catalog  # noqa: E402
from trnlab import fabric, scale  # noqa: E402
from trnlab.fabric import FabricError  # noqa: E402
from trnlab.scale import WorkloadError  # noqa: E402


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fabric.collective("all_reduce", 1024, None), "system must be"),
        (lambda: fabric.collective("all_reduce", 1024, 5), "system must be"),
        (lambda: fabric.collective("all_reduce", 1024, params=5), "FabricParams"),
        (lambda: fabric.collective("all_reduce", 1024, simulate="no"), "simulate"),
        (lambda: fabric.collective(None, 1024), "collective is named"),
        (lambda: fabric.FabricParams(counts_both_directions="yes"), "counts_both_directions"),
        (lambda: fabric.topology("trn2.48xlarge").route(-1, 3), "chip"),
        (lambda: fabric.topology("trn2.48xlarge").route(0, 99), "chip"),
        (lambda: fabric.topology("trn2-ultraserver").hop(1.5, 2), "chip"),
        (lambda: fabric.bus_factor("all_reduce", None), "chips"),
        (
            lambda: fabric.runtime_choice("Broadcast", "1MiB", fabric.topology("trn2.48xlarge")),
            "nbytes",
        ),
        (lambda: fabric.runtime_choice("all_reduce", 1024, None), "Topology"),
        (lambda: fabric.calibrate("2"), "iterations"),
        (lambda: fabric.calibrate(10**9), "iterations"),  # used to run for hours
        (lambda: fabric.calibrate_op_overhead(runtime="unknown"), "runtime"),  # used to give NaN
        (lambda: fabric.ring("4", 1e9), "whole number"),  # int('4') used to pass
        (lambda: fabric.torus((4, 4), "1.0"), "bandwidth"),  # float('1.0') used to pass
        (lambda: fabric.torus(None, 1e9), "tuple of whole numbers"),
        (lambda: fabric.all_to_all_bound("1MiB", "trn2.48xlarge"), "nbytes"),
    ],
)
def test_fabric_refuses_with_a_fabric_error(call, match):
    with pytest.raises(FabricError, match=match):
        call()


def test_fabric_names_are_case_insensitive_and_results_have_no_nan():
    t = fabric.topology("trn2.48xlarge")
    assert fabric.runtime_choice(" Broadcast ", 1024, t) == fabric.runtime_choice(
        "broadcast", 1024, t
    )
    assert np.isfinite(fabric.calibrate_op_overhead(runtime="CURRENT"))
    r = fabric.collective("all_gather", 2**20, "trn3-ultraserver-gen2-tiered", simulate=True)
    assert np.isfinite(r.load_bound) and r.load_bound > 0  # 0/0 on unused links used to be NaN
    with pytest.raises(FabricError, match="step"):
        r.schedule.at_step(-1)  # used to return an empty step


# --- scale ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: scale.training_memory(None), "ModelSpec"),
        (lambda: scale.inference_memory(None, batch=1, context=1), "ModelSpec"),
        (lambda: scale.params_per_chip(5), "ModelSpec"),
        (lambda: scale.params_per_chip(scale.model("llama3-8b"), pp=-1), "whole number"),
        (lambda: scale.stage_layers("llama3-8b!", 2), "Did you mean"),
        (lambda: scale.training_memory(scale.model("llama3-8b"), flash_attention="yes"), "flash"),
        (lambda: scale.Parallelism(flash_attention="yes"), "flash_attention"),
        (lambda: scale.Parallelism(overlap_param_gather=1), "overlap_param_gather"),
        (lambda: scale.Parallelism(fused_loss="no"), "fused_loss"),
        (lambda: scale.Parallelism(zero=1.0), "ZeRO"),
        (lambda: scale.Parallelism(pp=2, layers_per_stage=(1, 2, 3)), "layers_per_stage"),
        (lambda: scale.ModelSpec("m", 2, 64, 8, 8, 128, 100, 64, gated_ffn="yes"), "gated_ffn"),
        (lambda: scale.model("llama3-8b").training_flops(True), "token budget"),
        (lambda: scale.plan("llama3-8b", "trn2.48xlarge", overlap_dp="false"), "overlap_dp"),
        (lambda: scale.plan("llama3-8b", None), "system must be"),
        (lambda: scale.achieved_flops_per_chip("trn2", "bf16", [64, 64, 64]), "GEMM"),
        (lambda: scale.achieved_flops_per_chip("trn2", "bf16", (1, 2)), "GEMM"),
        (
            lambda: scale.collective_time("all_reduc", 1e6, _catalog.system("trn2.48xlarge"), 2),
            "Did you mean",
        ),
        (
            lambda: scale.collective_time(
                "all_reduce", float("nan"), _catalog.system("trn2.48xlarge"), 2
            ),
            "nbytes",
        ),
        (lambda: scale.collective_time("all_reduce", 1e6, "trn2.48xlarge", 2), "System"),
        (
            lambda: scale.collective_time(
                "all_reduce", 1e6, _catalog.system("trn2.48xlarge"), True
            ),
            "group size",
        ),
        (lambda: scale.serving_curve("llama3-8b", "trn2.48xlarge", batches=5), "batches"),
        (
            lambda: scale.serving_curve("llama3-8b", "trn2.48xlarge", batches=range(1, 10**5)),
            "too many",
        ),
        (lambda: scale.search("llama3-8b", "trn2.48xlarge", micro_batches=(-1,)), "micro_batches"),
        (
            lambda: scale.search(
                "llama3-8b", "trn2.48xlarge", micro_batches=tuple(range(1, 10**4))
            ),
            "limit",
        ),
        (lambda: scale.search("llama3-8b", "trn2.48xlarge", cancel=5), "cancel"),
    ],
)
def test_scale_refuses_with_a_workload_error(call, match):
    with pytest.raises(WorkloadError, match=match):
        call()


def test_search_accepts_names_in_any_case_and_divisors_are_right():
    from trnlab.scale._search import _divisors

    for n in (1, 2, 12, 64, 97, 144, 1_000_000):
        assert _divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    r = scale.search("llama3-8b", "trn2.48xlarge", rank_by=" Time ", micro_batches=(1,))
    assert r.rank_by == "time" and r.best is not None


def test_more_found_by_longer_hunts():
    # an overflowing format: the matmul error is unbounded (inf), not NaN
    x = np.full((4, 8), 100.0, np.float32)
    r = formats.matmul(x, x.T, "fp8_e3m4")
    assert r.rel_error == float("inf") and r.snr_db == float("-inf")
    # out_dtype=[] used to mean "the default"
    with pytest.raises(trnlab.TrnlabError, match="format"):
        kernels.matmul((64, 64), (64, 64), numerics=False, out_dtype=[])
    # HBM tensors beyond any chip, and numerics copies beyond 1 GiB, are refused up front
    with pytest.raises(KernelArgumentError, match="limit"):
        core.hbm((2**40, 2**40))
    ctx = core.KernelContext(core.core_params("trn2"))
    with pytest.raises(KernelArgumentError, match="numerics=False"):
        ctx.hbm("c", (2**16, 2**16))  # used to allocate 16 GiB of NaN
    # a sparsity pattern on a chip without sparsity: the message names the pattern
    with pytest.raises(CatalogError, match="pattern '4:8'"):
        catalog.chip("trn1").peak_flops("bf16", pattern="4:8")
