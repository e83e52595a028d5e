"""OCP MX v1.0 blocks: hand-worked blocks, an independent reference built from ml_dtypes element
casts, special values, axes and partial blocks."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trnlab import formats as F

MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8"]
# Element type and emax_elem from MX v1.0 table 1 (written out, not read from trnlab).
ELEMENT = {
    "mxfp8_e4m3": (ml_dtypes.float8_e4m3fn, 8, 448.0),
    "mxfp8_e5m2": (ml_dtypes.float8_e5m2, 15, 57344.0),
    "mxfp6_e2m3": (ml_dtypes.float6_e2m3fn, 2, 7.5),
    "mxfp6_e3m2": (ml_dtypes.float6_e3m2fn, 4, 28.0),
    "mxfp4": (ml_dtypes.float4_e2m1fn, 2, 6.0),
    "mxint8": (None, 0, 127 / 64),
}


def _block(values, fill=0.0, n=32) -> np.ndarray:
    b = np.full(n, fill, np.float32)
    b[: len(values)] = values
    return b


# --- hand-worked blocks (values worked out on paper from MX v1.0 section 6.3) ------------------


def test_mxfp8_e4m3_hand_block():
    # amax 1.0: floor(log2 1) = 0, shared_exp = 0 - 8 = -8, scale code 127 - 8 = 119, X = 2^-8.
    x = _block([1.0, 0.5, -0.75, 0.001])
    enc = F.encode(x, "mxfp8_e4m3")
    assert enc.scales.tolist() == [119]
    # 1.0/X = 256 = 2^8: E = 8 + 7 = 15, M = 0 -> 0 1111 000 = 0x78
    # 0.5/X = 128: E = 14 -> 0x70;  -0.75/X = -192 = -1.5 * 2^7: 1 1110 100 = 0xF4
    # 0.001/X = 0.256 = 1.024 * 2^-2: mantissa rounds to 1.0 -> E = 5, 0 0101 000 = 0x28
    assert enc.codes[:4].tolist() == [0x78, 0x70, 0xF4, 0x28]
    assert (enc.codes[4:] == 0).all()
    q = F.quantize(x, "mxfp8_e4m3")
    assert q[:4].tolist() == [1.0, 0.5, -0.75, 0.25 / 256]


def test_block_max_just_below_power_of_two():
    # amax = 2^20 - 2^-4, the float32 just below 2^20. floor(log2 amax) = 19 (a float32 log2
    # returns 20.0 here). shared_exp = 19 - 8 = 11, scale code 138, X = 2048.
    amax = np.nextafter(np.float32(2.0**20), np.float32(0))
    assert float(amax) == 2.0**20 - 2.0**-4
    assert math.floor(np.log2(amax)) == 20  # the trap the bits avoid
    x = _block([amax, 2048.0, -amax])
    enc = F.encode(x, "mxfp8_e4m3")
    assert enc.scales.tolist() == [138]
    # amax / X = 511.99997 > 448: clamped to the element max 448 = 0 1111 110 (0x7E), sign kept
    # 2048 / X = 1.0 -> 0 0111 000 = 0x38
    assert enc.codes[:3].tolist() == [0x7E, 0x38, 0xFE]
    assert F.quantize(x, "mxfp8_e4m3")[:3].tolist() == [448.0 * 2048, 2048.0, -448.0 * 2048]


def test_trainium3_scale_rule_on_the_same_block():
    # Trainium3: shared = floor(log2 amax) - (emax_elem - 1) = 19 - 7 = 12, code 139, X = 4096.
    amax = np.nextafter(np.float32(2.0**20), np.float32(0))
    x = _block([amax, 2048.0])
    enc = F.encode(x, "mxfp8_e4m3", scale_rule="trainium3")
    assert enc.scales.tolist() == [139]
    # amax / X = 255.99998: e4m3 step in [128, 256) is 16, nearest is 256 -> 0 1111 000 = 0x78
    # 2048 / X = 0.5 -> 0 0110 000 = 0x30
    assert enc.codes[:2].tolist() == [0x78, 0x30]
    assert F.quantize(x, "mxfp8_e4m3", scale_rule="trainium3")[:2].tolist() == [2.0**20, 2048.0]


def test_mxfp4_hand_block_ties_and_saturation():
    # amax 6: floor(log2 6) = 2, shared = 2 - 2 = 0, X = 1, code 127.
    x = _block([6.0, 3.0, 1.0, 0.4, -2.5, 5.0, 0.25, 0.26, -0.0])
    enc = F.encode(x, "mxfp4")
    assert enc.scales.tolist() == [127]
    # E2M1 codes s.ee.m: 6 = 0111, 3 = 0101, 1 = 0010, 0.4 -> 0.5 = 0001,
    # -2.5 ties to even -> -2 = 1100, 5 ties to even -> 4 = 0110, 0.25 ties to 0 = 0000,
    # 0.26 -> 0.5 = 0001, -0 = 1000
    assert enc.codes[:9].tolist() == [7, 5, 2, 1, 12, 6, 0, 1, 8]
    # amax 3.5: floor(log2 3.5) = 1, shared = -1, X = 0.5: 3.5 / X = 7 > 6 clamps to 6 -> 3.0
    y = F.quantize(_block([3.5, -3.5, 1.75]), "mxfp4")
    assert y[:3].tolist() == [3.0, -3.0, 2.0]  # 1.75 / 0.5 = 3.5 ties to 4 (even) -> 2.0


def test_mxint8_hand_block():
    # amax 1.0: emax_elem 0, shared 0, X = 1; elements are k / 64, |k| <= 127.
    x = _block([1.0, -0.3, 1.99, 0.5078125, -1.999])
    enc = F.encode(x, "mxint8")
    assert enc.scales.tolist() == [127]
    # 64, -0.3*64 = -19.2 -> -19, 1.99*64 = 127.36 -> 127, 32.5 ties to 32, -127.9 clamps to -127
    assert enc.codes[:5].tolist() == [64, -19, 127, 32, -127]
    assert enc.codes.dtype == np.int8
    assert F.quantize(x, "mxint8")[:5].tolist() == [1.0, -19 / 64, 127 / 64, 0.5, -127 / 64]


def test_all_zero_block_gets_smallest_scale_and_keeps_signed_zeros():
    x = np.zeros(64, np.float32)
    x[1] = -0.0
    x[40] = 1.0
    enc = F.encode(x, "mxfp8_e4m3")
    assert enc.scales.tolist() == [0, 119]  # 2^-127 for the zero block
    assert enc.codes[0] == 0x00 and enc.codes[1] == 0x80
    q = F.quantize(x, "mxfp8_e4m3")
    assert q[:32].tolist() == [0.0] * 32 and np.signbit(q[1]) and not np.signbit(q[0])


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("fmt", MX)
def test_nan_or_inf_makes_its_block_nan(fmt, special):
    x = np.ones(96, np.float32)
    x[40] = special
    enc = F.encode(x, fmt)
    assert enc.scales[1] == 0xFF and enc.scales[0] != 0xFF and enc.scales[2] != 0xFF
    q = F.quantize(x, fmt)
    assert np.isnan(q[32:64]).all()
    assert (q[:32] == 1.0).all() and (q[64:] == 1.0).all()
    np.testing.assert_array_equal(F.decode(enc), q)


def test_float32_subnormal_block_is_exact():
    # amax = 2^-140 (subnormal): floor(log2) = -140, shared = -148 clamps to -127 (E8M0 min).
    x = _block([2.0**-140, 3 * 2.0**-145], n=32)
    enc = F.encode(x, "mxfp8_e4m3")
    assert enc.scales.tolist() == [0]
    # 2^-140 / 2^-127 = 2^-13, below e4m3's smallest subnormal 2^-9: rounds to 0
    assert F.quantize(x, "mxfp8_e4m3")[:2].tolist() == [0.0, 0.0]
    y = _block([2.0**-130, 2.0**-131 * 1.5])  # / 2^-127 = 2^-3 and 1.5 * 2^-4: exact in e4m3
    assert F.quantize(y, "mxfp8_e4m3")[:2].tolist() == [2.0**-130, 1.5 * 2.0**-131]


# --- against an independent reference ------------------------------------------------------------


def _reference(x: np.ndarray, fmt: str, axis: int, trainium3: bool = False) -> np.ndarray:
    """MX v1.0 6.3 in float64 numpy with ml_dtypes element casts, block by block."""
    elem, emax, emax_val = ELEMENT[fmt]
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty_like(moved)
    n = moved.shape[-1]
    for idx in np.ndindex(moved.shape[:-1]):
        for lo in range(0, n, 32):
            v = moved[idx][lo : lo + 32]
            if not np.isfinite(v).all():
                out[idx][lo : lo + 32] = np.nan
                continue
            amax = np.abs(v).max()
            shared = -127 if amax == 0 else np.frexp(amax)[1] - 1 - emax + int(trainium3)
            shared = min(max(shared, -127), 127)
            p = np.clip(np.ldexp(v, -shared), -emax_val, emax_val)
            if elem is None:
                p = np.clip(np.rint(p * 64), -127, 127) / 64
            else:
                p = p.astype(elem).astype(np.float64)
            out[idx][lo : lo + 32] = np.ldexp(p, shared)
    return np.moveaxis(out, -1, axis).astype(np.float32)


def _spread(rng, shape) -> np.ndarray:
    """Values over many binades, with zeros and exact ties sprinkled in."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, size=shape))
    x[rng.random(shape) < 0.05] = 0.0
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("rule", ["ocp", "trainium3"])
def test_against_reference(fmt, rule):
    rng = np.random.default_rng(7)
    x = _spread(rng, (3, 5, 100))  # 100 = 3 full blocks and a partial one
    for axis in (2, 0, 1):
        ours = F.quantize(x, fmt, axis=axis, scale_rule=rule)
        ref = _reference(x, fmt, axis, trainium3=rule == "trainium3")
        np.testing.assert_array_equal(ours, ref, err_msg=f"{fmt} axis {axis} {rule}")
        enc = F.encode(x, fmt, axis=axis, scale_rule=rule)
        np.testing.assert_array_equal(F.decode(enc), ours)


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=70),
        elements=st.floats(width=32, allow_nan=False, allow_infinity=False),
    ),
    fmt=st.sampled_from(MX),
    data=st.data(),
)
def test_property_reference_and_roundtrip(x, fmt, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    ours = F.quantize(x, fmt, axis=axis)
    np.testing.assert_array_equal(ours, _reference(x, fmt, axis % x.ndim))
    enc = F.encode(x, fmt, axis=axis)
    np.testing.assert_array_equal(F.decode(enc.codes, fmt, scales=enc.scales, axis=axis), ours)
    # quantised values are a fixed point
    np.testing.assert_array_equal(F.quantize(ours, fmt, axis=axis), ours)


def test_partial_block_equals_zero_padding():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 45)).astype(np.float32)
    padded = np.concatenate([x, np.zeros((4, 19), np.float32)], axis=1)
    np.testing.assert_array_equal(F.quantize(x, "mxfp4"), F.quantize(padded, "mxfp4")[:, :45])
    enc = F.encode(x, "mxfp4")
    assert enc.scales.shape == (4, 2)


def test_scales_shape_follows_axis():
    x = np.ones((64, 3, 5), np.float32)
    enc = F.encode(x, "mxfp8_e5m2", axis=0)
    assert enc.codes.shape == (64, 3, 5) and enc.scales.shape == (2, 3, 5) and enc.axis == 0
    with pytest.raises(ValueError, match="scales"):
        F.decode(enc.codes, "mxfp8_e5m2", scales=enc.scales, axis=1)


def test_bits_per_value():
    assert F.spec("mxfp8_e4m3").bits_per_value == 8.25
    assert F.spec("mxfp4").bits_per_value == 4.25
    enc = F.encode(np.ones(64, np.float32), "mxfp4")
    assert enc.bits == 64 * 4 + 2 * 8


def test_per_block_scale_rescues_fp4():
    """A tensor spanning many binades: plain fp4 flushes the small rows, MXFP4 does not."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 32)) * np.exp2(np.arange(8) * -3.0)[:, None]).astype(np.float32)
    x /= np.abs(x).max() / 6.0  # whole tensor scaled so its max fits fp4
    plain = F.quantize(x, "fp4_e2m1")
    mx = F.quantize(x, "mxfp4")
    rel = lambda q: np.linalg.norm(q[4:] - x[4:]) / np.linalg.norm(x[4:])  # noqa: E731
    assert rel(plain) > 0.9  # small rows vanish
    assert rel(mx) < 0.3
