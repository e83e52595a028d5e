"""Format facts, input handling and errors, int8, matmul, N:M pruning, throughput."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from trnlab import formats as F

ML_FINFO = {
    "bf16": ml_dtypes.bfloat16,
    "fp16": np.float16,
    "fp32": np.float32,
    "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e4m3": ml_dtypes.float8_e4m3,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
    "fp8_e3m4": ml_dtypes.float8_e3m4,
    "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn,
    "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn,
}


# --- facts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ML_FINFO))
def test_facts_match_finfo(name):
    f, fi = F.spec(name), ml_dtypes.finfo(ML_FINFO[name])
    assert f.bits == fi.bits
    assert (f.exp_bits, f.man_bits) == (fi.nexp, fi.nmant)
    assert f.max == float(fi.max)
    assert f.min_normal == float(fi.smallest_normal)
    assert f.min_subnormal == float(fi.smallest_subnormal)
    assert f.epsilon == float(fi.eps)


def test_facts_from_the_reference_sheet():
    # shared/reference/hardware-facts.md, "Numeric formats"
    assert F.spec("bf16").bias == 127 and F.spec("fp16").bias == 15
    assert F.spec("fp16").max == 65504
    assert F.spec("fp8_e4m3fn").max == 448 and not F.spec("fp8_e4m3fn").has_inf
    assert F.spec("fp8_e5m2").max == 57344 and F.spec("fp8_e5m2").has_inf
    assert F.spec("fp8_e4m3").max == 240 and F.spec("fp8_e4m3").has_inf
    assert F.spec("fp8_e3m4").max == 15.5
    assert F.spec("fp8_e4m3fnuz").max == 240 and not F.spec("fp8_e4m3fnuz").has_negative_zero
    assert (F.spec("tf32").exp_bits, F.spec("tf32").man_bits, F.spec("tf32").bits) == (8, 10, 19)
    emax = {"mxfp8_e4m3": 8, "mxfp8_e5m2": 15, "mxfp6_e2m3": 2, "mxfp6_e3m2": 4, "mxfp4": 2}
    for name, e in emax.items():
        assert F.spec(name).emax_elem == e and F.spec(name).block_size == 32
    assert F.spec("mxint8").emax_elem == 0 and F.spec("mxint8").element.max == 127 / 64


def test_grid():
    g = F.grid("fp4_e2m1")
    assert g.tolist() == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert F.grid("fp8_e4m3fn").size == 253  # 256 codes - 2 NaN - one of the two zeros
    assert F.grid("fp8_e4m3fnuz").size == 255  # 256 - NaN (no -0)
    assert F.grid("fp8_e5m2").size == 256 - 6 - 2 - 1  # 6 NaN, 2 Inf, two zeros
    assert np.array_equal(F.grid("mxfp4"), g)
    assert F.grid("int8").size == 255
    assert F.grid("tf32").size == 2 * (255 * 1024) - 1  # exponents 0..254, 1024 mantissas
    with pytest.raises(ValueError, match="grid"):
        F.grid("fp32")


def test_unknown_format_lists_what_exists():
    with pytest.raises(ValueError, match="unknown format 'fp8'") as err:
        F.quantize([1.0], "fp8")
    msg = str(err.value)
    for name in ("fp8_e4m3fn", "fp8_e5m2", "mxfp4", "bf16", "int8"):
        assert name in msg
    with pytest.raises(ValueError, match="Did you mean mxfp4"):
        F.spec("mxpf4")
    assert F.spec("bfloat16").name == "bf16" and F.spec("float8_e4m3fn").name == "fp8_e4m3fn"


# --- input handling -------------------------------------------------------------------------------


ALL = F.formats()
ENCODABLE = [n for n in ALL if n != "int8_mx"]


@pytest.mark.parametrize("fmt", ENCODABLE)
def test_empty_arrays(fmt):
    for shape in [(0,), (3, 0), (0, 64)]:
        x = np.zeros(shape, np.float32)
        q = F.quantize(x, fmt)
        assert q.shape == shape and q.dtype == np.float32
        enc = F.encode(x, fmt)
        assert enc.codes.shape == shape
        assert F.decode(enc).shape == shape


def test_integer_input_is_refused_with_a_pointer_to_decode():
    with pytest.raises(TypeError, match="decode"):
        F.quantize(np.arange(4), "bf16")
    with pytest.raises(TypeError, match="floating-point"):
        F.encode(np.ones(4, bool), "fp8_e4m3fn")
    with pytest.raises(TypeError, match="real"):
        F.quantize(np.ones(2, complex), "bf16")


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3fn", "mxfp4", "int8"])
def test_float64_is_rounded_to_float32_first(fmt):
    x = np.random.default_rng(1).standard_normal(256)
    np.testing.assert_array_equal(F.quantize(x, fmt), F.quantize(x.astype(np.float32), fmt))
    assert F.quantize(x.tolist(), fmt).dtype == np.float32  # lists too


def test_zero_dimensional_values():
    assert F.quantize(np.float64(1.1), "bf16").shape == ()
    assert float(F.quantize(1.1, "fp8_e4m3fn")) == 1.125
    with pytest.raises(ValueError, match="atleast_1d"):
        F.quantize(1.0, "mxfp4")


def test_nan_into_a_format_without_nan_is_refused():
    for fmt in ("fp4_e2m1", "fp6_e2m3", "int8"):
        with pytest.raises(ValueError, match="no NaN"):
            F.quantize([1.0, np.nan], fmt)
    assert np.isnan(F.quantize([np.nan] * 32, "mxfp4")).all()  # MX carries it in the scale


def test_option_errors():
    with pytest.raises(ValueError, match="rounding"):
        F.quantize([1.0], "bf16", rounding="up")
    with pytest.raises(ValueError, match="MX block formats only"):
        F.quantize([1.0], "bf16", scale_rule="trainium3")
    with pytest.raises(ValueError, match="scale_rule"):
        F.quantize(np.ones(32), "mxfp4", scale_rule="nvidia")
    with pytest.raises(ValueError, match="per-tensor scale"):
        F.quantize([1.0], "fp8_e5m2", scale=0.5)
    with pytest.raises(ValueError, match="out of range"):
        F.quantize(np.ones((2, 32)), "mxfp4", axis=2)
    with pytest.raises(TypeError, match="seed"):
        F.quantize([1.0], "bf16", rounding="stochastic", seed="abc")


def test_decode_errors():
    with pytest.raises(ValueError, match=r"0\.\.15"):
        F.decode(np.array([16], np.uint8), "fp4_e2m1")
    with pytest.raises(ValueError, match="scales"):
        F.decode(np.zeros(32, np.uint8), "mxfp4")
    with pytest.raises(ValueError, match="scale"):
        F.decode(np.zeros(3, np.int8), "int8")
    with pytest.raises(ValueError, match="format"):
        F.decode(np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="integers"):
        F.decode(np.zeros(3, np.float32), "fp8_e5m2")


def test_specials_per_format():
    x = np.array([np.inf, -np.inf, 1e6, -0.0], np.float32)
    assert F.quantize(x, "fp8_e5m2").tolist() == [np.inf, -np.inf, np.inf, -0.0]
    assert np.isnan(F.quantize(x, "fp8_e4m3fn")[:3]).all()
    assert F.quantize(x, "fp8_e4m3fn", saturate=True).tolist() == [448, -448, 448, -0.0]
    fnuz = F.quantize(x, "fp8_e4m3fnuz")
    assert np.isnan(fnuz[:3]).all() and not np.signbit(fnuz[3])  # no -0 in fnuz
    assert F.encode(x, "fp8_e4m3fnuz").codes.tolist() == [0x80, 0x80, 0x80, 0x00]
    assert F.quantize(x, "fp4_e2m1").tolist() == [6, -6, 6, -0.0]  # no Inf: always saturates
    # the IEEE-like E4M3 of Trn1/Trn2 overflows to Inf beyond 240 + half a step (248)
    assert F.quantize([247.9, 248.0], "fp8_e4m3").tolist() == [240.0, np.inf]


# --- int8 ------------------------------------------------------------------------------------------


def test_int8_hand_worked():
    x = np.array([1.27, -0.5, 0.004, 0.005, -1.27, 0.015], np.float32)
    enc = F.encode(x, "int8")
    assert float(enc.scales) == np.float32(1.27 / 127)  # amax / 127 = 0.01
    # x / 0.01: 127, -50, 0.4 -> 0, 0.5 -> 0 (tie to even), -127, 1.5 -> 2 (tie to even)
    # (values are float32, so 0.005/0.01 and 0.015/0.01 are only near ties; check directly)
    k = np.rint(x.astype(np.float64) / np.float64(np.float32(0.01)))
    assert enc.codes.tolist() == k.astype(int).tolist()
    assert enc.codes[[0, 1, 4]].tolist() == [127, -50, -127]
    q = F.quantize(x, "int8")
    np.testing.assert_array_equal(q, enc.codes.astype(np.float32) * np.float32(0.01))


def test_int8_given_scale_clamps_and_inf():
    x = np.array([3.0, -300.0, np.inf, -np.inf, 0.49], np.float32)
    enc = F.encode(x, "int8", scale=1.0)
    assert enc.codes.tolist() == [3, -127, 127, -127, 0]
    assert F.encode(x, "int8").scales == np.float32(300 / 127)  # Inf ignored by amax
    with pytest.raises(ValueError, match="positive"):
        F.encode(x, "int8", scale=0.0)


# --- matmul ---------------------------------------------------------------------------------------


def test_matmul_quantises_along_contraction_axis():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 96)).astype(np.float32)
    b = rng.standard_normal((96, 8)).astype(np.float32)
    r = F.matmul(a, b, "mxfp8_e4m3")
    aq = F.quantize(a, "mxfp8_e4m3", axis=1)
    bq = F.quantize(b, "mxfp8_e4m3", axis=0)
    expected = (aq.astype(np.float64) @ bq.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(r.out, expected, rtol=1e-5, atol=1e-5)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(r.reference, ref)
    err = r.out - ref
    assert r.max_abs_error == pytest.approx(np.abs(err).max())
    assert r.rel_error == pytest.approx(np.linalg.norm(err) / np.linalg.norm(ref))
    assert r.snr_db == pytest.approx(-20 * np.log10(r.rel_error))


def test_matmul_error_orders_formats():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 256))
    b = rng.standard_normal((256, 64))
    errs = {f: F.matmul(a, b, f).rel_error for f in ("fp32", "bf16", "mxfp8_e4m3", "mxfp4")}
    assert errs["fp32"] < 1e-6 < errs["bf16"] < errs["mxfp8_e4m3"] < errs["mxfp4"] < 0.3
    mixed = F.matmul(a, b, "fp8_e4m3fn", fmt_b="fp8_e5m2")
    assert (mixed.fmt_a, mixed.fmt_b) == ("fp8_e4m3fn", "fp8_e5m2")
    with pytest.raises(ValueError, match=r"\(M, K\)"):
        F.matmul(a, a, "bf16")


def test_matmul_stochastic_is_seeded():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((8, 64)), rng.standard_normal((64, 8))
    r1 = F.matmul(a, b, "fp8_e5m2", rounding="stochastic", seed=1)
    r2 = F.matmul(a, b, "fp8_e5m2", rounding="stochastic", seed=1)
    np.testing.assert_array_equal(r1.out, r2.out)


# --- N:M pruning ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "m"), F.SPARSITY_PATTERNS)
def test_prune_keeps_n_largest_in_every_group(n, m):
    rng = np.random.default_rng(n * 100 + m)
    w = rng.standard_normal((5, 3 * m)).astype(np.float32)
    r = F.prune(w, n, m, axis=-1)
    groups = np.abs(w).reshape(5, 3, m)
    kept = r.mask.reshape(5, 3, m)
    assert (kept.sum(-1) == n).all()
    # every kept magnitude >= every dropped one in its group
    min_kept = np.where(kept, groups, np.inf).min(-1)
    max_dropped = np.where(~kept, groups, -np.inf).max(-1)
    assert (min_kept >= max_dropped).all()
    np.testing.assert_array_equal(r.weights, np.where(r.mask, w, 0))
    assert r.compression == m / n and r.kept_fraction == n / m
    removed = np.linalg.norm(np.where(r.mask, 0, w)) / np.linalg.norm(w)
    assert r.rel_error == pytest.approx(removed)
    assert r.energy_kept == pytest.approx(1 - removed**2)


def test_prune_axis_ties_and_partial_group():
    w = np.array([[1.0, 1.0, 1.0, 1.0, 5.0, -7.0]]).T  # along axis 0; group of 4 + partial 2
    r = F.prune(w, 2, 4, axis=0)
    assert r.mask[:, 0].tolist() == [True, True, False, False, True, True]  # ties: first wins
    assert r.weights.dtype == np.float64
    assert F.prune([[0.1, -3.0, 0.5, 2.0]], 2, 4).weights.tolist() == [[0, -3, 0, 2]]


def test_prune_errors():
    with pytest.raises(ValueError, match="4:16, 4:12"):
        F.prune(np.ones((4, 8)), 3, 8)
    with pytest.raises(TypeError, match="floating"):
        F.prune(np.ones((4, 8), int), 2, 4)


# --- throughput from the catalogue ----------------------------------------------------------------


def test_throughput_reads_the_catalogue():
    from trnlab import catalog

    assert F.throughput("fp8_e5m2", "trn2") == catalog.chip("trn2").peak_flops("fp8")
    assert F.throughput("mxfp4", "trn3") == catalog.chip("trn3").peak_flops("mxfp4")
    assert F.throughput("bf16", "trn2", sparse=True) == catalog.chip("trn2").peak_flops(
        "bf16", sparse=True
    )
    assert F.catalog_dtype("mxfp8_e5m2") == "mxfp8"
    with pytest.raises(ValueError, match="no Tensor Engine rate"):
        F.throughput("mxfp6_e2m3", "trn3")
    with pytest.raises(ValueError):
        F.throughput("mxfp4", "trn1")  # the catalogue says why


def test_ocp_e4m3fn_has_a_rate_only_from_neuroncore_v4():
    # nki.isa.nc_matmul: float8_e4m3 / float8_e5m2, and float8_e4m3fn "starting NeuronCore-v4"
    from trnlab import catalog

    for chip in ("trn1", "inf2", "trn2"):
        with pytest.raises(F.FormatError, match=r"no fp8_e4m3fn matmul.*fp8_e4m3"):
            F.throughput("fp8_e4m3fn", chip)
        assert F.throughput("fp8_e4m3", chip) == catalog.chip(chip).peak_flops("fp8")
    assert F.throughput("fp8_e4m3fn", "trn3") == catalog.chip("trn3").peak_flops("fp8")
    # NVIDIA's FP8 is OCP's E4M3 (CUDA's __nv_fp8_e4m3: no infinities) and E5M2
    for chip in ("h100", "b200"):
        assert F.throughput("fp8_e4m3fn", chip) == catalog.chip(chip).peak_flops("fp8")
        with pytest.raises(F.FormatError, match=r"no fp8_e4m3 matmul.*fp8_e4m3fn, fp8_e5m2"):
            F.throughput("fp8_e4m3", chip)


@pytest.mark.parametrize("chip", ["trn1", "inf2", "trn2", "trn3", "h100", "h200", "b200", "gb200"])
def test_every_fp8_encoding_runs_at_the_fp8_rate_or_is_refused_by_name(chip):
    from trnlab import catalog

    c = catalog.chip(chip)

    def rated_as(f):
        try:
            return F.catalog_dtype(f)
        except F.FormatError:
            return None

    fp8 = [f for f in F.formats() if rated_as(f) == "fp8"]
    assert {"fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"} <= set(fp8)
    for f in fp8:
        if f in c.fp8_encodings:
            assert F.throughput(f, chip) == c.peak_flops("fp8")
        else:
            with pytest.raises(F.FormatError, match=", ".join(c.fp8_encodings)):
                F.throughput(f, chip)


def test_import_is_light():
    code = "import sys, trnlab.formats; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_docstring_examples():
    import doctest
    import importlib

    for mod in ("", "._specs", "._quantize", "._matmul", "._sparsity", "._throughput"):
        module = importlib.import_module(f"trnlab.formats{mod}")
        result = doctest.testmod(module, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, f"doctest failures in trnlab.formats{mod}"
