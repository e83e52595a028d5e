"""Forms of older NKI editions (SDK 2.20-2.26 tutorials and API examples) that run unchanged:
``nl.par_dim`` after block dimensions, ``nl.arange`` / ``nl.mgrid`` index expressions, the
value-returning ``nisa`` calls, ``nl.matmul`` of a PSUM operand, ``nl.shared_constant(dtype=)``,
``if hbm_arg:``, and the errors that say what to write instead where a form is not modelled.
Each result is checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import formats
from trnlab.core import KernelArgumentError

RNG = np.random.default_rng(77)


def sim(fn, *args, chip="trn2"):
    return nki.simulate(fn, chip=chip)(*args)


def _op(name: str) -> int:
    from trnlab.core import _program

    return getattr(_program, name)


def rand(*shape):
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def _scan_ref(a, b, initial):
    """The recurrence ``s[:, j] = a[:, j] * s[:, j-1] + b[:, j]`` from ``initial``, in fp32."""
    out = np.empty_like(a)
    prev = np.full(a.shape[0], initial, np.float32)
    for j in range(a.shape[1]):
        prev = (a[:, j] * prev + b[:, j]).astype(np.float32)
        out[:, j] = prev
    return out


# --- par_dim after block dimensions ------------------------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=st.integers(1, 4), free=st.sampled_from([32, 64, 128]))
def test_par_dim_after_blocks_makes_side_by_side_tiles(blocks, free):
    """(blocks, par_dim(128), free): block i is the tile t[i] of shape [128, free]; each is used
    as a matmul's stationary operand (M = free <= 128), which needs the partitions on K."""
    a = rand(128, blocks * free)  # a_t: K = 128 rows, blocks of M = free columns
    b = rand(128, 256)

    def k(a_t, rhs):
        t = nl.ndarray((blocks, nl.par_dim(128), free), dtype=nl.float32, buffer=nl.sbuf)
        assert t[0].shape == (128, free)
        rt = nl.load(rhs)
        out = nl.ndarray((blocks * free, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(blocks):
            t[i] = nl.load(a_t[:, i * free : (i + 1) * free])
        for i in nl.affine_range(blocks):
            ps = nisa.nc_matmul(t[i], rt)
            nl.store(out[i * free : (i + 1) * free, :], ps)
        return out

    got = sim(k, a, b)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-5, atol=1e-4)


def test_par_dim_blocks_of_zeros_and_of_psum_within_a_bank():
    def k(x):
        z = nl.zeros((3, nl.par_dim(128), 16), dtype=nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((2, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.psum)
        xt = nl.load(x)
        ps[1] = nisa.nc_matmul(xt[:, 0:128], xt)  # [128 x 128].T @ [128 x 256]
        out = nl.ndarray((128, 16 + 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:16], z[2])
        nl.store(out[:, 16:], ps[1])
        return out

    x = rand(128, 256)
    got = sim(k, x)
    np.testing.assert_array_equal(got[:, :16], 0.0)
    np.testing.assert_allclose(got[:, 16:], x[:, :128].T @ x, rtol=1e-5, atol=1e-4)


def test_par_dim_psum_blocks_beyond_one_bank_are_refused_with_the_rewrite():
    def k(x):
        nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        return x

    with pytest.raises(nki.NotModelledError, match="one PSUM tile per block"):
        sim(k, rand(4, 4))


# --- value-returning nisa calls of older editions ---------------------------------------------
def test_older_nc_matmul_by_keyword_returns_a_psum_tile():
    a, b = rand(128, 64), rand(128, 96)

    def k(x, y):
        ps = nisa.nc_matmul(stationary=nl.load(x), moving=nl.load(y))
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        return out

    np.testing.assert_allclose(sim(k, a, b), a.T @ b, rtol=1e-5, atol=1e-4)


def test_older_bn_stats_and_bn_aggr_give_mean_and_variance():
    x = rand(128, 512)

    def k(a):
        stats = nisa.bn_stats(nl.load(a))
        mv = nisa.bn_aggr(stats)
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, mv)
        return out

    got = sim(k, x)
    np.testing.assert_allclose(got[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 1], x.var(axis=1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("form", ["keywords", "positional"])
def test_older_memset_makes_a_filled_tile(form):
    def k(a):
        if form == "keywords":
            t = nisa.memset(shape=(128, 64), value=2.5, dtype=nl.bfloat16)
        else:
            t = nisa.memset((128, 64), 2.5, nl.bfloat16)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(sim(k, rand(2, 2)), np.full((128, 64), 2.5, np.float32))


@pytest.mark.parametrize("form", ["keywords", "positional"])
def test_older_tensor_tensor_scan_returns_the_recurrence(form):
    a, b = rand(128, 64), rand(128, 64)

    def k(x, y):
        xt, yt = nl.load(x), nl.load(y)
        if form == "keywords":
            s = nisa.tensor_tensor_scan(xt, yt, initial=0.5, op0=nl.multiply, op1=nl.add)
        else:
            s = nisa.tensor_tensor_scan(xt, yt, 0.5, nl.multiply, nl.add)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, s)
        return out

    np.testing.assert_allclose(sim(k, a, b), _scan_ref(a, b, 0.5), rtol=1e-5, atol=1e-5)


# --- nl helpers ------------------------------------------------------------------------------
def test_nl_matmul_copies_a_psum_operand_to_sbuf_first():
    x, y = rand(64, 128), rand(96, 128)

    def k(a, b):
        bt = nl.transpose(nl.load(b))  # [128 x 96] in PSUM
        ps = nl.matmul(nl.load(a), bt)
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        return out

    np.testing.assert_allclose(sim(k, x, y), x @ y.T, rtol=1e-5, atol=1e-4)


def test_shared_constant_rounds_to_its_dtype():
    c = rand(4, 8)

    def k(a):
        h = nl.shared_constant(c, dtype=nl.bfloat16)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(h))
        return out

    np.testing.assert_array_equal(sim(k, rand(2, 2)), formats.quantize(c, "bf16"))


def test_an_hbm_argument_is_truthy_and_a_tile_has_no_truth_value():
    def k(a, bias):
        t = nl.load(a)
        if bias:  # an optional input was given
            t = nl.add(t, nl.load(bias))
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    x, b = rand(8, 16), rand(8, 16)
    np.testing.assert_allclose(sim(k, x, b), x + b, rtol=1e-6)

    def tile_test(a):
        if nl.load(a):
            pass
        return a

    with pytest.raises(TypeError, match="no truth value"):
        sim(tile_test, x)


# --- nl.arange / nl.mgrid index expressions -------------------------------------------------
def test_mgrid_and_arange_address_tiles_as_the_older_matmul_tutorial_does():
    """i_p, i_f = nl.mgrid[...] and nl.arange(n)[:, None] / [None, :], offset by the loop
    indices as the SDK 2.26 matmul tutorial writes them, address the same tiles as slices."""
    a = rand(256, 96)

    def k(x):
        out = nl.ndarray((256, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        grid = nl.mgrid[0:128, 0:48]
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(48)[None, :]
        for m in nl.affine_range(2):
            for n in nl.affine_range(2):
                t = nl.load(x[m * 128 + grid.p, n * 48 + grid.x])
                nl.store(out[m * 128 + i_p, 48 * n + i_f], value=nl.multiply(t, 2.0))
        return out

    np.testing.assert_array_equal(sim(k, a), 2.0 * a)


def test_index_expressions_transpose_the_free_axes_as_the_older_transpose_tutorial_does():
    f1, f2 = 4, 6
    a = rand(128, f1 * f2)

    def k(x):
        i_p0 = nl.arange(128)[:, None, None]
        i_f1 = nl.arange(f1)[None, :, None]
        i_f2 = nl.arange(f2)[None, None, :]
        t = nl.load(x)
        out_tile = nl.ndarray((128, f1 * f2), dtype=nl.float32, buffer=nl.sbuf)
        out_tile[i_p0, i_f2 * f1 + i_f1] = nl.copy(t[i_p0, i_f1 * f2 + i_f2])
        out = nl.ndarray((128, f1 * f2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, out_tile)
        return out

    want = a.reshape(128, f1, f2).transpose(0, 2, 1).reshape(128, f1 * f2)
    np.testing.assert_array_equal(sim(k, a), want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p0=st.integers(0, 64),
    rows=st.integers(1, 64),
    c0=st.integers(0, 40),
    cols=st.integers(1, 40),
    step=st.integers(1, 3),
)
def test_an_mgrid_view_equals_the_numpy_slice(p0, rows, c0, cols, step):
    a = rand(128, 160)

    def k(x):
        i_p, i_f = nl.mgrid[0:rows, 0 : cols * step : step]
        t = nl.load(x[p0 + i_p, c0 + i_f])
        out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(sim(k, a), a[p0 : p0 + rows, c0 : c0 + cols * step : step])


@pytest.mark.parametrize(
    ("fn", "exc", "pattern"),
    [
        (
            lambda x: x[nl.arange(129)[:, None], nl.arange(4)[None, :]],
            KernelArgumentError,
            r"reaches 0\.\.128 on dimension 0",
        ),
        (
            lambda x: x[nl.arange(4)[:, None] * nl.arange(4)[:, None], 0],
            nki.NotModelledError,
            "not affine",
        ),
        (lambda x: nl.arange(4)[:, None] < 3, nki.NotModelledError, "make masks"),
        (
            lambda x: x[nl.arange(4)[:, None], nl.arange(4)[None, None, :]],
            KernelArgumentError,
            "grids of",
        ),
        (lambda x: x[nl.arange(4)], KernelArgumentError, "one index expression"),
    ],
    ids=["out-of-range", "product", "mask", "mixed-grids", "too-few"],
)
def test_index_expression_errors_teach(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        sim(fn, rand(128, 16))


def test_nki_compiler_imports_and_each_directive_says_it_is_not_modelled():
    import trnlab.nki.compiler as ncc

    for name in ("skip_middle_end_transformations", "multi_buffer", "sbuf"):
        with pytest.raises(nki.NotModelledError, match=rf"nki\.compiler\.{name} \(one of its"):
            getattr(ncc, name)
    with pytest.raises(nki.NotModelledError, match="Remove the directive"):
        nki.compiler.enable_stack_allocator  # noqa: B018 - the attribute access raises
    with pytest.raises(nki.NotModelledError, match="a name NKI's compiler module lacks"):
        ncc.frobnicate  # noqa: B018


# --- review fixes: blocks used whole, older-form dtypes and argument shapes --------------------
def test_a_single_block_used_whole_is_its_tile_and_several_are_refused():
    def one(a, big):
        t = nl.ndarray((1, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(t, 3.0)  # the one block: [128, 64]
        u = nl.load(big)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t[0])
        keep = nl.ndarray(big.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(keep, u)
        return out, keep

    got, _ = sim(one, rand(2, 2), rand(128, 512))
    np.testing.assert_array_equal(got, 3.0)
    run = nki.profile(one, chip="trn2")(
        nki.hbm((2, 2), nl.float32), nki.hbm((128, 512), nl.float32)
    )
    t = run.program.table
    memset = int(np.flatnonzero(t["op"] == _op("MEMSET"))[0])
    assert t["partitions"][memset] == 128 and t["free"][memset] == 64
    load = int(np.flatnonzero(t["op"] == _op("DMA_LOAD"))[0])
    assert memset not in run.program.deps(load)  # the unrelated load does not wait for it

    def several(a):
        t = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(t, 0.0)
        return a

    with pytest.raises(nki.NotModelledError, match=r"holds 2 blocks .*use t\[i\]"):
        sim(several, rand(2, 2))


def test_zeros_like_keeps_the_blocks_of_a_block_tensor():
    def k(a):
        t = nl.ndarray((2, nl.par_dim(128), 16), dtype=nl.float32, buffer=nl.sbuf)
        z = nl.zeros_like(t)
        assert z.shape == (2, 128, 16) and z[1].shape == (128, 16)
        out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, z[1])
        return out

    np.testing.assert_array_equal(sim(k, rand(2, 2)), 0.0)


def test_a_stepped_partition_slice_keeps_its_partitions_when_indexed():
    def k(a):
        t = nl.load(a)  # [128, 16]
        v = t[0:128:2][3]
        assert v.shape == (1, 16)
        out = nl.ndarray((1, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, v)
        return out

    x = rand(128, 16)
    np.testing.assert_array_equal(sim(k, x), x[6:7])


def test_older_forms_default_to_the_input_dtype_and_take_data_by_keyword():
    def k(a):
        t = nl.load(a, dtype=nl.bfloat16)
        s = nisa.bn_stats(data=t)
        m = nisa.bn_aggr(s)
        assert s.dtype == m.dtype == "bfloat16"
        x32, y16 = nl.load(a), nl.load(a, dtype=nl.bfloat16)
        assert nisa.tensor_tensor_scan(y16, x32, 0.0, nl.multiply, nl.add).dtype == "float32"
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, m)
        return out

    x = rand(128, 64)
    got = sim(k, x)
    xb = formats.quantize(x, "bf16").astype(np.float64)
    # bf16 statistics, then their bf16 aggregate: within a few bf16 steps of the bf16 mean
    np.testing.assert_allclose(got[:, 0], xb.mean(axis=1), rtol=2e-2, atol=2e-3)


def test_shared_constant_saturates_and_rounds_an_integer_dtype():
    def k(a):
        h = nl.shared_constant(np.array([[1.7, 300.0, -2.5, 2.5]], np.float32), dtype=nl.int8)
        out = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(h))
        return out

    np.testing.assert_array_equal(sim(k, rand(2, 2)), [[2.0, 127.0, -2.0, 2.0]])


def test_nl_matmul_copies_a_psum_x_before_transposing_it_in_the_other_operands_dtype():
    a, b = rand(128, 64), rand(128, 96)

    def k(x, y):
        xt = nl.transpose(nl.load(x))  # [M = 64, K = 128], fp32 in PSUM
        ps = nl.matmul(xt, nl.load(y, dtype=nl.bfloat16))  # y: [K = 128, N = 96] in bf16
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        return out

    want = formats.quantize(a.T, "bf16").astype(np.float64) @ formats.quantize(b, "bf16")
    np.testing.assert_allclose(sim(k, a, b), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y: nisa.tensor_tensor_scan(x, y, 0.5, op0=nl.multiply, op1=nl.add),
        lambda x, y: nisa.tensor_tensor_scan(x, y, 0.5, nl.multiply, op1=nl.add),
        lambda x, y: nisa.tensor_tensor_scan(x, y, 0.5, nl.multiply, nl.add, False),
    ],
    ids=["ops-by-keyword", "op1-by-keyword", "reverse0-positional"],
)
def test_older_tensor_tensor_scan_in_mixed_forms(call):
    a, b = rand(128, 32), rand(128, 32)

    def k(x, y):
        s = call(nl.load(x), nl.load(y))
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, s)
        return out

    np.testing.assert_allclose(sim(k, a, b), _scan_ref(a, b, 0.5), rtol=1e-5, atol=1e-5)


def test_older_memset_with_an_engine_keyword_and_nc_matmul_with_moving_by_keyword():
    a, b = rand(128, 32), rand(128, 48)

    def k(x, y):
        t = nisa.memset((128, 32), 1.0, nl.float32, engine=nisa.gpsimd_engine)
        ps = nisa.nc_matmul(nl.load(x), moving=nl.load(y))
        out = nl.ndarray((32, 48), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        o2 = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o2, t)
        return out, o2

    got, ones = sim(k, a, b)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(ones, 1.0)
    with pytest.raises(nki.NotModelledError, match="mask="):
        sim(lambda x: nisa.bn_stats(nl.load(x), mask=1), rand(8, 8))


def test_a_psum_block_accumulated_with_plus_equals_records_no_extra_copy():
    a, b = rand(128, 128), rand(128, 256)

    def k(x, y):
        ps = nl.zeros((2, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(2):
            ps[i] += nisa.nc_matmul(nl.load(x), nl.load(y))
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps[1])
        return out

    np.testing.assert_allclose(sim(k, a, b), a.T @ b, rtol=1e-5, atol=1e-4)
    run = nki.profile(k, chip="trn2")(
        nki.hbm((128, 128), nl.float32), nki.hbm((128, 256), nl.float32)
    )
    counts = run.program.counts()
    # two memsets (zeros), two matmuls, one copy out of PSUM for the store: no PSUM->PSUM copies
    assert counts["matmul"] == 2 and counts.get("copy", 0) == 1, counts


@pytest.mark.parametrize(
    ("op", "ref"),
    [(nl.max, np.max), (nl.min, np.min), (nl.sum, np.sum), (np.max, np.max), (np.sum, np.sum)],
    ids=["nl.max", "nl.min", "nl.sum", "np.max", "np.sum"],
)
def test_tensor_reduce_takes_a_reduction_function_as_its_op(op, ref):
    """Older editions' attention kernels write nisa.tensor_reduce(op=nl.max, data=qk, axis=1):
    the reduction names the ALU operation that folds the elements (maximum)."""
    x = rand(128, 64)

    def k(a):
        r = nisa.tensor_reduce(op=op, data=nl.load(a), axis=1)
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    np.testing.assert_allclose(sim(k, x)[:, 0], ref(x, axis=1), rtol=1e-5, atol=1e-5)


# --- index expressions: the review's cases -----------------------------------------------------
def _expr_view(make, x):
    """Load the view ``make(x)`` of HBM tensor ``x`` and return it (numerics)."""

    def k(a):
        t = nl.load(make(a))
        out = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    return sim(k, x)


def test_size_one_ranges_broadcast_as_numpy_and_never_reach_outside_the_tensor():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = _expr_view(lambda a: a[3 + nl.arange(1)[:, None], nl.arange(8)[:, None]], x)
    np.testing.assert_array_equal(got, x[3 + np.arange(1)[:, None], np.arange(8)[:, None]])
    got = _expr_view(lambda a: a[nl.arange(4)[:, None], nl.arange(1)[:, None]], x)
    np.testing.assert_array_equal(got, x[np.arange(4)[:, None], np.arange(1)[:, None]])


def test_mgrid_is_dense_as_numpys_and_negative_integers_count_from_the_end():
    x = rand(16, 8)
    got = _expr_view(lambda a: a[nl.mgrid[0:16, 0:8].p, -1], x)
    i_p, _ = np.mgrid[0:16, 0:8]
    np.testing.assert_array_equal(got, x[i_p, -1])


@pytest.mark.parametrize(
    ("make", "exc", "pattern"),
    [
        (lambda t: t[nl.arange(8)[:, None], nl.arange(8)], KernelArgumentError, "must be placed"),
        (lambda t: t[nl.arange(8)[:, None] + nl.arange(8), 0], KernelArgumentError, "placed"),
        (
            lambda t: t[nl.arange(8)[:, None] + nl.arange(2)[None, :], 0],
            KernelArgumentError,
            "cannot move data across partitions",
        ),
        (lambda t: t[nl.arange(16)[None, :], 0], KernelArgumentError, "across partitions"),
        (lambda t: t[nl.arange(4)[:, None], 0:4], KernelArgumentError, "NKI refuses too"),
        (lambda t: t[nl.arange(17)[:, None], nl.arange(2)[None, :]], IndexError, "reaches"),
        (lambda t: t[nl.arange(4)[:, None] == 3, 0], nki.NotModelledError, "affine_select"),
    ],
    ids=[
        "unplaced-1d",
        "unplaced-sum",
        "cross-partition",
        "partitions-on-free",
        "mixed-slice",
        "out-of-range",
        "equality",
    ],
)
def test_index_expressions_on_a_tile_refuse_what_the_engines_cannot_do(make, exc, pattern):
    def k(a):
        t = nl.load(a)  # a [16, 8] tile
        nl.copy(make(t))
        return a

    with pytest.raises(exc, match=pattern):
        sim(k, rand(16, 8))
