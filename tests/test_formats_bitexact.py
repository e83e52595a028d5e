"""Element formats bit-exact against ml_dtypes (and numpy's float16), plus an independent tf32
reference: every code, every grid point, every midpoint +- 1 float32 ulp, 10M random float32
bit patterns with the specials, in round-to-nearest-even and saturating modes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trnlab import formats as F

# Formats ml_dtypes (or numpy) also has: our name -> reference type.
REFERENCE = {
    "bf16": ml_dtypes.bfloat16,
    "fp16": np.float16,
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
NAMES = list(REFERENCE)
_F32 = np.finfo(np.float32)
_SUB = _F32.smallest_subnormal
SPECIALS = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        -np.nan,
        1.0,
        -1.0,
        _F32.max,
        -_F32.max,
        _F32.tiny,
        _SUB,
        -_SUB,
    ],
    dtype=np.float32,
)
N_RANDOM = 10_000_000


def _code_view(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)


def _ref_values(x: np.ndarray, name: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(REFERENCE[name]).astype(np.float32)


def _ref_codes(x: np.ndarray, name: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return _code_view(x.astype(REFERENCE[name]))


def _same_values(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Equal float32 bits, or both NaN with the same sign (NaN payloads are not compared)."""
    ob, rb = ours.view(np.uint32), ref.view(np.uint32)
    both_nan = np.isnan(ours) & np.isnan(ref) & (np.signbit(ours) == np.signbit(ref))
    return (ob == rb) | both_nan


def _assert_same(x, ours, ref, what):
    ok = _same_values(ours, ref)
    if not ok.all():
        i = np.flatnonzero(~ok)[:5]
        bits = [hex(int(b)) for b in x.view(np.uint32)[i]]
        raise AssertionError(
            f"{what}: {(~ok).sum()} mismatches, x bits {bits}, ours {ours[i]}, ref {ref[i]}"
        )


def _inputs_for(name: str, x: np.ndarray) -> np.ndarray:
    # fp6/fp4 have no NaN code: trnlab refuses NaN for them (tested in test_formats_api)
    return x[~np.isnan(x)] if F.spec(name).specials == "finite" else x


@pytest.fixture(scope="module")
def random_bits() -> np.ndarray:
    rng = np.random.default_rng(20250301)
    u = rng.integers(0, 2**32, size=N_RANDOM, dtype=np.uint32)
    return np.concatenate([u.view(np.float32), SPECIALS])


def _codes(name: str) -> np.ndarray:
    bits = F.spec(name).bits
    return np.arange(1 << bits, dtype=np.uint8 if bits <= 8 else np.uint16)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_decodes_like_reference(name):
    codes = _codes(name)
    ours = F.decode(codes, name)
    ref = codes.view(REFERENCE[name]).astype(np.float32)
    _assert_same(ours, ours, ref, f"{name} decode")


@pytest.mark.parametrize("name", NAMES)
def test_every_code_reencodes_to_itself(name):
    codes = _codes(name)
    values = F.decode(codes, name)
    finite_or_inf = ~np.isnan(values)
    back = F.encode(values[finite_or_inf], name).codes
    np.testing.assert_array_equal(back, codes[finite_or_inf])
    # NaN codes re-encode to the quiet NaN the reference writes for the same value
    if (~finite_or_inf).any():
        nan_vals = values[~finite_or_inf]
        np.testing.assert_array_equal(F.encode(nan_vals, name).codes, _ref_codes(nan_vals, name))


def _grid_and_midpoints(name: str) -> np.ndarray:
    g = F.grid(name)
    f = F.spec(name)
    # the value one step past max: where rounding to nearest would overflow
    top = g[-1] + (g[-1] - g[-2])
    pos = np.concatenate([g[g >= 0], [top]])
    mids = (pos[:-1] + pos[1:]) / 2
    everything = np.concatenate([pos, mids, -pos, -mids])
    everything = everything[np.abs(everything) <= np.finfo(np.float32).max]  # bf16: 2**128
    as32 = everything.astype(np.float32)
    assert np.array_equal(as32.astype(np.float64), everything), "midpoints must be float32"
    up = np.nextafter(as32, np.float32(np.inf))
    down = np.nextafter(as32, np.float32(-np.inf))
    assert f.max == g[-1]
    return np.concatenate([as32, up, down])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("saturate", [False, True])
def test_grid_midpoints_and_neighbours(name, saturate):
    x = _grid_and_midpoints(name)
    ours = F.quantize(x, name, saturate=saturate)
    xr = np.clip(x, -F.spec(name).max, F.spec(name).max) if saturate else x
    _assert_same(x, ours, _ref_values(xr, name), f"{name} saturate={saturate}")
    np.testing.assert_array_equal(F.encode(x, name, saturate=saturate).codes, _ref_codes(xr, name))


@pytest.mark.parametrize("name", NAMES)
def test_ten_million_random_bit_patterns(name, random_bits):
    x = _inputs_for(name, random_bits)
    f = F.spec(name)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(REFERENCE[name])  # one reference cast gives codes and values
    ref_values = ref.astype(np.float32)
    _assert_same(x, F.quantize(x, name), ref_values, f"{name} nearest")
    codes, ref_codes = F.encode(x, name).codes, _code_view(ref)
    if name == "fp16":  # numpy keeps NaN payload bits; trnlab writes the canonical quiet NaN
        keep = ~np.isnan(x)
        codes, ref_codes = codes[keep], ref_codes[keep]
    np.testing.assert_array_equal(codes, ref_codes)
    # saturating: the reference is a cast of the input clamped to +-max (NaN stays NaN);
    # below max it is the plain cast already computed
    sat = F.quantize(x, name, saturate=True)
    over = np.abs(x) > f.max
    _assert_same(x[~over], sat[~over], ref_values[~over], f"{name} saturate, in range")
    xo = np.clip(x[over], -f.max, f.max)
    _assert_same(x[over], sat[over], _ref_values(xo, name), f"{name} saturate, overflow")
    assert over.sum() > 1000 or f.max > 1e38


def test_random_patterns_reach_every_region(random_bits):
    """The sample covers subnormals, overflow and NaN, so the comparisons above mean something."""
    a = np.abs(random_bits[np.isfinite(random_bits)])
    assert (a < np.finfo(np.float32).tiny).sum() > 1000
    assert (a > 1e5).sum() > 1_000_000
    assert np.isnan(random_bits).sum() > 10_000
    near_one = (a > 0.5) & (a < 2)  # around 1/128 of all patterns
    assert near_one.sum() > 50_000


# --- tf32 against an independent float64 reference ----------------------------------------------


def _reference_round(x: np.ndarray, man_bits: int, emin: int, maxval: float) -> np.ndarray:
    """IEEE-style RNE to man_bits with min normal exponent emin, in float64 arithmetic."""
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    out = np.array(x64)
    fin = np.isfinite(x64) & (x64 != 0)
    _, e = np.frexp(x64[fin])  # |x| = m * 2**e, m in [0.5, 1): floor(log2|x|) = e - 1
    step = np.maximum(e - 1, emin) - man_bits
    y = np.ldexp(np.rint(np.ldexp(x64[fin], -step)), step)  # np.rint rounds half to even
    y = np.where(np.abs(y) > maxval, np.copysign(np.inf, y), y)
    out[fin] = y
    return out.astype(np.float32)


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_reference_round_agrees_with_ml_dtypes(name, random_bits):
    """Validates the float64 reference on formats ml_dtypes has, before trusting it for tf32."""
    x = random_bits[:2_000_000]
    f = F.spec(name)
    _assert_same(x, _reference_round(x, f.man_bits, f.emin, f.max), _ref_values(x, name), name)


def test_tf32_against_reference(random_bits):
    f = F.spec("tf32")
    for x in (random_bits, _tf32_edges()):
        ref = _reference_round(x, 10, -126, f.max)
        _assert_same(x, F.quantize(x, "tf32"), ref, "tf32")
        codes = F.encode(x, "tf32").codes
        assert codes.dtype == np.uint32
        assert not (codes & np.uint32(0x1FFF)).any(), "tf32 codes keep 13 zero low bits"
        _assert_same(x, codes.view(np.float32), ref, "tf32 codes")
    big = np.finfo(np.float32).max  # beyond tf32 max + half a step
    sat = F.quantize(np.array([np.inf, big, -np.inf], np.float32), "tf32", saturate=True)
    np.testing.assert_array_equal(sat, np.float32([f.max, f.max, -f.max]))


def _tf32_edges() -> np.ndarray:
    g = F.grid("tf32")
    g = g[(g > 0)]
    pick = np.concatenate([g[:2000], g[-2000:], g[:: max(1, g.size // 5000)]])
    mids = (pick[:-1] + pick[1:]) / 2
    x = np.concatenate([pick, mids, [g[-1] + (g[-1] - g[-2]) / 2]]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))])
    return np.concatenate([x, -x])


def test_fp32_is_identity(random_bits):
    x = random_bits[:100_000]
    np.testing.assert_array_equal(F.quantize(x, "fp32").view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(F.encode(x, "fp32").codes, x.view(np.uint32))
