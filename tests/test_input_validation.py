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
