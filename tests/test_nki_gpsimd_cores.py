"""The GpSimd engine's per-core instructions: local_gather (each core's 16 partitions gather
runs of elements by the indices those partitions hold) and nonzero_with_count (each core's
first partition lists its nonzero positions), against numpy references written from NKI's
examples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab.core import FormatNotSupportedError, HardwareRuleError

RNG = np.random.default_rng(3)


def _reference(src, index, k, n):
    """NKI's numpy semantics: per 16-partition group, the indices flattened column-major,
    the first n kept, k elements from each, in every partition of the group."""
    p = src.shape[0]
    flat_src = src.reshape(p, -1)
    out = np.empty((p, n, k), src.dtype)
    for c in range(0, p, 16):
        idx = index[c : c + 16].flatten(order="F")[:n].astype(np.int64)
        for j, i in enumerate(idx):
            out[c : c + 16, j, :] = flat_src[c : c + 16, i : i + k]
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.integers(1, 8),
    cols=st.integers(1, 6),
    k=st.sampled_from([1, 2, 4, 8, 16, 32]),
    free=st.integers(32, 300),
    valid=st.floats(0.01, 1.0),
    older=st.booleans(),
)
def test_matches_the_references_numpy_semantics(groups, cols, k, free, valid, older):
    p = 16 * groups
    src = RNG.uniform(-50, 50, (p, free)).astype(np.float32)
    index = RNG.integers(0, free - k + 1, (p, cols)).astype(np.uint16)
    n = max(1, int(valid * 16 * cols))

    def kern(s, i):
        st_, it = nl.load(s), nl.load(i)
        if older:
            t = nisa.local_gather(st_, it, k, n)
        else:
            t = nl.ndarray((p, n, k), dtype=s.dtype, buffer=nl.sbuf)
            nisa.local_gather(dst=t, src_buffer=st_, index=it, num_elem_per_idx=k,
                              num_valid_indices=n)  # fmt: skip
        out = nl.ndarray((p, n, k), dtype=s.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    got = nki.simulate(kern, chip="trn2")(src, index)
    np.testing.assert_array_equal(got, _reference(src, index, k, n))


@pytest.mark.parametrize(
    ("case", "error", "match"),
    [
        ("parts", HardwareRuleError, "multiple of 16"),
        ("dtype", FormatNotSupportedError, "must be uint16"),
        ("run", HardwareRuleError, "num_elem_per_idx=3"),
        ("valid", HardwareRuleError, "num_valid_indices=65"),
        ("oob", HardwareRuleError, "past the 64 of each partition"),
    ],
)
def test_rules_are_refused_with_the_limit(case, error, match):
    p = 8 if case == "parts" else 16
    src = np.ones((p, 64), np.float32)
    index = np.zeros((p, 4), np.int32 if case == "dtype" else np.uint16)
    if case == "oob":
        index[3, 2] = 62  # with 4 elements per index: 62..65, past 63

    def kern(s, i):
        st_, it = nl.load(s), nl.load(i)
        k = 3 if case == "run" else 4
        n = 65 if case == "valid" else None
        nisa.local_gather(st_, it, k, n)

    with pytest.raises(error, match=match):
        nki.simulate(kern, chip="trn2")(src, index)


def test_timed_as_one_gpsimd_pass_over_what_it_gathers():
    src = np.ones((128, 2048), np.float32)
    index = np.zeros((128, 4), np.uint16)

    def kern(k):
        def f(s, i):
            nisa.local_gather(nl.load(s), nl.load(i), k, 64)

        return f

    busy = {
        k: (lambda r: r.busy["GpSimd"] * r.latency)(nki.profile(kern(k), chip="trn2")(src, index))
        for k in (1, 32)
    }
    assert busy[32] > 4 * busy[1]  # 32 elements per index move 32x the data


def _nonzero_reference(src, held, offset, pad):
    out = held.copy()
    for p in range(0, src.shape[0], 16):
        found = np.flatnonzero(src[p] != 0)
        row = np.full(src.shape[1] + 1, pad, np.int64)
        row[: len(found)] = found + offset
        row[-1] = len(found)
        out[p] = row
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=st.integers(1, 128),
    n=st.integers(1, 200),
    density=st.floats(0.0, 1.0),
    offset=st.integers(-1000, 1000),
    pad=st.integers(-5, 5),
    ints=st.booleans(),
)
def test_nonzero_with_count_lists_each_cores_first_partition(p, n, density, offset, pad, ints):
    src = (RNG.uniform(0, 1, (p, n)) < density) * RNG.integers(-9, 9, (p, n))
    src = src.astype(np.int32 if ints else np.float32)

    def kern(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        o = nl.ndarray((p, n + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=o, value=77)  # what the other partitions keep
        nisa.nonzero_with_count(dst=o, src=t, index_offset=offset, padding_val=pad)
        out = nl.ndarray(o.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out

    got = nki.simulate(kern, chip="trn2")(src)
    want = _nonzero_reference(src, np.full((p, n + 1), 77), offset, pad)
    np.testing.assert_array_equal(got, want)


def test_nonzero_with_count_follows_the_references_example():
    row = np.array([[0, 1, 1, 0, 0, 1, 0, 0]], np.float32)

    def kern(a):
        t = nl.load(a)
        o = nl.ndarray((1, 9), dtype=nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=o, src=t, index_offset=16, padding_val=-1)
        out = nl.ndarray((1, 9), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    got = nki.simulate(kern, chip="trn3")(row)
    np.testing.assert_array_equal(got, [[17, 18, 21, -1, -1, -1, -1, -1, 3]])


@pytest.mark.parametrize(
    ("case", "error", "match"),
    [
        ("trn1", HardwareRuleError, "NeuronCore-v3"),
        ("width", HardwareRuleError, "one more element"),
        ("dtype", FormatNotSupportedError, "dst int32"),
    ],
)
def test_nonzero_with_count_refuses_what_nki_does(case, error, match):
    src = np.ones((16, 8), np.float32)

    def kern(a):
        t = nl.load(a)
        width = 8 if case == "width" else 9
        o = nl.ndarray((16, width), dtype=nl.float32 if case == "dtype" else nl.int32,
                       buffer=nl.sbuf)  # fmt: skip
        nisa.nonzero_with_count(dst=o, src=t)

    with pytest.raises(error, match=match):
        nki.simulate(kern, chip="trn1" if case == "trn1" else "trn2")(src)
