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
from trnlab.core import HardwareRuleError, KernelArgumentError
from trnlab.nki.language import affine_range as _ar

RNG = np.random.default_rng(77)


def sim(fn, *args, chip="trn2"):
    return nki.simulate(fn, chip=chip)(*args)


def _op(name: str) -> int:
    from trnlab.core import _program

    return getattr(_program, name)


def rand(*shape):
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def _out(t):
    """Inside a kernel: a new float32 HBM output holding tile ``t`` (stored by one DMA)."""
    out = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


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


@pytest.mark.parametrize("guarded", [False, True])
def test_older_bn_stats_and_bn_aggr_give_mean_and_variance(guarded):
    """Also as the older layernorm tutorial guards bn_stats: with a mask on the free axis that
    holds on every element (the row length a multiple of bn_stats_fmax)."""
    x = rand(128, 512)

    def k(a):
        jf = nl.arange(512)[None, :]
        kw = {"mask": (jf < 512), "dtype": nl.float32} if guarded else {}
        stats = nisa.bn_stats(nl.load(a), **kw)
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
        return _out(s)

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
            lambda x: nl.load(x[nl.arange(129)[:, None], nl.arange(4)[None, :]]),
            KernelArgumentError,
            r"reaches 0\.\.128 on dimension 0.*masked nl.load",
        ),
        (
            lambda x: x[nl.arange(4)[:, None] * nl.arange(4)[:, None], 0],
            nki.NotModelledError,
            "not affine",
        ),
        (lambda x: nl.arange(4)[:, None] == 3, nki.NotModelledError, "== or !="),
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
        return _out(call(nl.load(x), nl.load(y)))

    np.testing.assert_allclose(sim(k, a, b), _scan_ref(a, b, 0.5), rtol=1e-5, atol=1e-5)


def test_older_memset_with_an_engine_keyword_and_nc_matmul_with_moving_by_keyword():
    a, b = rand(128, 32), rand(128, 48)

    def k(x, y):
        t = nisa.memset((128, 32), 1.0, nl.float32, engine=nisa.gpsimd_engine)
        return _out(nisa.nc_matmul(nl.load(x), moving=nl.load(y))), _out(t)

    got, ones = sim(k, a, b)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(ones, 1.0)
    with pytest.raises(KernelArgumentError, match="mask= takes a comparison"):
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


def test_a_matmul_assigned_to_a_psum_block_is_written_there_without_a_tile_or_copy():
    """``qk[t] = nisa.nc_matmul(q, k)`` (the v2.26 attention kernels): the compiler points the
    matmul at the block, so eight 2 KiB blocks fill PSUM's eight banks and nothing more; a
    temporary tile per matmul would need a ninth bank."""
    q, kk = rand(128, 128), rand(128, 8 * 512)

    def k(x, y):
        qs, ks = nl.load(x), nl.load(y)
        qk = nl.ndarray((8, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        for t in nl.affine_range(8):
            qk[t, :, :] = nisa.nc_matmul(stationary=qs, moving=ks[:, nl.ds(t * 512, 512)])
        out = nl.ndarray((128, 8 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for t in nl.affine_range(8):
            sb = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=qk[t])
            nl.store(out[:, nl.ds(t * 512, 512)], sb)
        return out

    # NeuronCore-v4 (trn3) takes a PSUM tensor of several blocks; one bank per block
    np.testing.assert_allclose(sim(k, q, kk, chip="trn3"), q.T @ kk, rtol=1e-5, atol=1e-4)
    run = nki.profile(k, chip="trn3")(
        nki.hbm((128, 128), nl.float32), nki.hbm((128, 8 * 512), nl.float32)
    )
    counts = run.program.counts()
    # eight matmuls, eight copies out of PSUM for the stores: no PSUM->PSUM copies
    assert counts["matmul"] == 8 and counts.get("copy", 0) == 8, counts
    assert [t.name for t in run.program.tiles if t.space == "psum"] == ["qk"]


def test_a_matmul_assigned_over_an_earlier_result_starts_a_new_accumulation():
    a, b = rand(128, 128), rand(128, 256)

    def k(x, y):
        ps = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.psum)
        xs, ys = nl.load(x), nl.load(y)
        ps[...] = nisa.nc_matmul(xs, ys)
        ps[...] = nisa.nc_matmul(xs, ys)  # overwrites: not twice the product
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        return out

    np.testing.assert_allclose(sim(k, a, b), a.T @ b, rtol=1e-5, atol=1e-4)


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
        (lambda t: t[t[0:8, 0:1], nl.arange(8)[None, :]], nki.NotModelledError, "indirect"),
    ],
    ids=[
        "unplaced-1d",
        "unplaced-sum",
        "cross-partition",
        "partitions-on-free",
        "mixed-slice",
        "out-of-range",
        "equality",
        "indirect",
    ],
)
def test_index_expressions_on_a_tile_refuse_what_the_engines_cannot_do(make, exc, pattern):
    def k(a):
        t = nl.load(a)  # a [16, 8] tile
        nl.copy(make(t))
        return a

    with pytest.raises(exc, match=pattern):
        sim(k, rand(16, 8))


# --- integer indexes and masks ------------------------------------------------------------------
def test_a_column_loaded_by_an_integer_index_lands_one_element_per_partition():
    """``nl.load(A[0:128, j])`` (the older Mamba tutorial's per-state scale): the integer drops
    the column from the HBM view, and the tile keeps it at size 1 on 128 partitions, so it can
    scale an activation row by row; a row ``x[i, 0:64]`` stays on one partition."""
    a, x = rand(128, 16), rand(128, 64)

    def k(a_t, x_t):
        col = nl.load(a_t[0:128, 5])
        row = nl.load(x_t[3, 0:64])
        assert a_t[0:128, 5].shape == (128,)  # HBM drops the indexed dimension
        assert col.shape == (128, 1) and row.shape == (1, 64)
        return _out(nisa.activation(op=nl.exp, data=nl.load(x_t), scale=col)), _out(row)

    got, row = sim(k, a, x)
    want = np.exp(x.astype(np.float64) * a[:, 5:6])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(row, x[3:4])


def _rmsnorm_tail(a_t, g_t):
    """RMSNorm as the older tutorial writes it: 128-row tiles, the last one masked."""
    rows, cols = a_t.shape
    ix = nl.arange(128)[:, None]
    iy = nl.arange(cols)[None, :]
    out = nl.ndarray(a_t.shape, dtype=a_t.dtype, buffer=nl.shared_hbm)
    g = nl.load(g_t.reshape((1, cols))[nl.arange(1)[:, None], iy])
    for i in nl.affine_range((rows + 127) // 128):
        t = nl.load(a_t[i * 128 + ix, iy], mask=(i * 128 + ix < rows))
        r = nl.rsqrt(nl.sum(nl.square(t), axis=[1]) / cols)
        y = nl.multiply(t, r)
        y[...] = nl.multiply(y, g.broadcast_to((128, cols)), mask=(i * 128 + ix < rows))
        nl.store(out[i * 128 + ix, iy], value=y, mask=(i * 128 + ix < rows))
    return out


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 300), cols=st.sampled_from([8, 64, 96]))
def test_a_masked_last_tile_touches_only_the_rows_that_exist(rows, cols):
    """The mask keeps rows below ``rows`` of each 128-row tile: the access past the tensor is
    never made and every output row matches numpy, whatever the remainder."""
    a, g = rand(rows, cols), rand(cols)
    got = sim(_rmsnorm_tail, a, g)
    a64 = a.astype(np.float64)
    want = a64 / np.sqrt((a64**2).mean(axis=1, keepdims=True)) * g
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5)


def test_a_masked_load_moves_only_the_rows_it_keeps():
    """250 rows: two loads and two stores of 128 and 122 rows, 250 x 512 x 4 bytes each way."""
    a, g = rand(250, 512), rand(512)
    run = nki.profile(_rmsnorm_tail, chip="trn2")(a, g)
    assert run.hbm_bytes == 2 * 250 * 512 * 4 + 512 * 4


def test_a_masked_instruction_leaves_the_rest_of_its_output_unwritten():
    """Rows the mask drops hold what they held: the NaN sentinels of a new tile (as
    nki.simulate shows them), or the values written before."""
    x = rand(128, 16)

    def k(x_t):
        ip, jf = nl.arange(128)[:, None], nl.arange(16)[None, :]
        t = nl.load(x_t[ip, jf], mask=(ip < 100))
        u = nl.exp(t, mask=(ip >= 28) & (ip < 100))
        return _out(u), _out(t)

    u, t = sim(k, x)
    np.testing.assert_allclose(u[28:100], np.exp(x[28:100]), rtol=1e-6)
    assert np.isnan(u[:28]).all() and np.isnan(u[100:]).all()
    np.testing.assert_array_equal(t[:100], x[:100])
    assert np.isnan(t[100:]).all()


def _ip():
    return nl.arange(128)[:, None]


@pytest.mark.parametrize(
    ("fn", "exc", "pattern"),
    [
        (
            lambda x: nisa.bn_stats(nl.load(x), mask=(_ip() < 100)),
            nki.NotModelledError,
            r"nisa.bn_stats: a mask that cuts the grid.*nl.load, nl.store",
        ),
        (
            lambda x: nisa.activation(op=nl.exp, data=nl.load(x), mask=(_ip() < 0)),
            nki.NotModelledError,
            "keeps no element",
        ),
        (
            lambda x: nl.sum(nl.load(x), axis=1, mask=(_ip() < 100)),
            nki.NotModelledError,
            r"nl.sum: a mask that cuts the grid",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(nl.mgrid[0:128, 0:16, 0:4][2] < 2)),
            KernelArgumentError,
            "cuts grid axis 2",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(_ip() < 9) & (nl.arange(64)[:, None] < 9)),
            KernelArgumentError,
            "disagree on the size of grid axis 0",
        ),
        (
            lambda x: nl.load(x[nl.arange(200)[:, None], nl.arange(16)[None, :]]).reshape((1, 1)),
            KernelArgumentError,
            "reaches 0..199",
        ),
        (
            lambda x: x[nl.arange(200)[:, None], nl.arange(16)[None, :]].reshape((200 * 16,)),
            KernelArgumentError,
            "reaches 0..199",
        ),
        (
            lambda x: nl.load(
                x[nl.arange(200)[:, None], nl.arange(16)[None, :]],
                mask=(nl.arange(16)[None, :] < 8),
            ),
            KernelArgumentError,
            "reaches 0..199",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(0 <= _ip() < 9)),
            KernelArgumentError,
            r"chained comparison",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(_ip() < 9) and (_ip() > 2)),
            KernelArgumentError,
            "not 'and'",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(_ip() < 9) | (_ip() > 20)),
            nki.NotModelledError,
            r"\| \(a union\)",
        ),
        (lambda x: nl.exp(nl.load(x), mask="rows"), KernelArgumentError, "mask= takes"),
        (lambda x: nl.exp(nl.load(x), mask=(_ip() < x)), KernelArgumentError, "with a finite"),
        (
            lambda x: nl.exp(nl.load(x), mask=(_ip() < float("nan"))),
            KernelArgumentError,
            "finite number",
        ),
        (
            lambda x: nisa.affine_select(
                nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf),
                [[1, 16]],
                None,
                nl.load(x),
                0.0,
            ),
            KernelArgumentError,
            "channel_multiplier",
        ),
        (
            lambda x: nl.exp(nl.load(x), mask=(nl.arange(64)[:, None] < 9)),
            KernelArgumentError,
            r"cuts grid axis 0 \(64 values\), along which no operand",
        ),
        (
            lambda x: nl.store(x[nl.arange(200)[:, None], nl.arange(16)[None, :]], nl.load(x)),
            KernelArgumentError,
            "reaches 0..199",
        ),
    ],
    ids=[
        "cut-on-nisa",
        "keeps-nothing-on-nisa",
        "cut-on-nl-sum",
        "axis-no-operand-has",
        "two-sizes",
        "overhang-used-unmasked",
        "overhang-attribute",
        "overhang-still-past",
        "chained",
        "and",
        "or",
        "not-a-mask",
        "tensor-bound",
        "nan-bound",
        "current-select-without-multiplier",
        "other-grid",
        "overhang-unmasked",
    ],
)
def test_mask_errors_teach(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        sim(fn, rand(128, 16))


# --- nl reductions over free axes that are not the last ----------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    axes=st.sets(st.integers(1, 3), min_size=1).map(sorted),
    fn=st.sampled_from(["sum", "max", "mean"]),
    keepdims=st.booleans(),
)
def test_an_nl_reduction_folds_any_free_axes_as_numpy(axes, fn, keepdims):
    """``nl.sum(t, axis=[1, 3])`` of a [P, a, b, c] tile: the access pattern puts the folded
    axes innermost (no data moves), the result keeps the other axes in order, as numpy's."""
    x = np.random.default_rng(7).uniform(-4, 4, (16, 3, 4, 5)).astype(np.float32)  # fixed data

    def k(x_t):
        t = nl.load(x_t)
        r = getattr(nl, fn)(t, axis=axes, keepdims=keepdims)
        out = nl.ndarray(r.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    want = {"sum": np.sum, "max": np.max, "mean": np.mean}[fn](
        x.astype(np.float64), axis=tuple(axes), keepdims=keepdims
    )
    if want.ndim < 2:
        want = want.reshape(16, 1)
    got = sim(k, x)
    assert got.shape == want.shape
    # fp32 sums of up to 60 terms: a few ulps of the terms' magnitudes, not of a result that
    # nearly cancels (0.04 from terms of 4)
    terms = np.abs(x.astype(np.float64)).sum(axis=tuple(axes)).max()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7 * terms)


def test_the_older_average_pool_reduces_axes_two_and_four_of_its_window_view():
    """The older tutorial's pooling: a 5-D mgrid view of [C, H, W] whose axes 2 and 4 run inside
    a pool window; their sum over the window's area is the average pool."""
    c, h, w, k_ = 8, 12, 8, 4
    x = rand(c, h, w)

    def k(x_t):
        i0, i1, i2, i3, i4 = nl.mgrid[0:c, 0 : h // k_, 0:k_, 0 : w // k_, 0:k_]
        t = nl.load(x_t)
        r = nl.sum(t[i0, k_ * i1 + i2, k_ * i3 + i4], axis=[2, 4]) / (k_ * k_)
        out = nl.ndarray((c, h // k_, w // k_), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    want = x.reshape(c, h // k_, k_, w // k_, k_).mean(axis=(2, 4))
    np.testing.assert_allclose(sim(k, x), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(HardwareRuleError, match="last free axes"):  # the ISA instruction keeps it
        sim(lambda x_t: nisa.tensor_reduce(op=nl.add, data=nl.load(x_t), axis=[1]), x)


# --- tensor_scalar_reduce ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fold", "ref"),
    [(nl.add, np.sum), (nl.max, np.max), (nl.minimum, np.min), (np.multiply, np.prod)],
    ids=["add", "max", "min", "multiply"],
)
def test_tensor_scalar_reduce_writes_the_stage_and_its_fold(fold, ref):
    """Both forms: the current one (dst given, negated read-out) and the older value-returning
    one the attention tutorial's v8 uses to evict a PSUM row and take its maximum at once."""
    x = RNG.uniform(0.5, 1.5, (64, 32)).astype(np.float32)

    def k(x_t):
        t = nl.load(x_t)
        d = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=0.5,
                                  reduce_op=fold, reduce_res=r1, reduce_res_negate=True)  # fmt: skip
        r2 = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nisa.tensor_scalar_reduce(data=t, op0=nl.add, operand0=1.0, reduce_op=fold,
                                      reduce_res=r2)  # fmt: skip
        outs = []
        for v in (d, r1, e, r2):
            o = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(o, v)
            outs.append(o)
        return tuple(outs)

    d, r1, e, r2 = sim(k, x)
    np.testing.assert_allclose(d, x * 0.5, rtol=1e-6)
    np.testing.assert_allclose(r1[:, 0], -ref(x * 0.5, axis=1), rtol=1e-5)
    np.testing.assert_allclose(e, x + 1.0, rtol=1e-6)
    np.testing.assert_allclose(r2[:, 0], ref(x + 1.0, axis=1), rtol=1e-5)


def test_tensor_scalar_reduce_costs_a_tensor_scalar_and_a_short_read_out():
    """The ISA's max(MIN_II, N) + MIN_II: one more short Vector instruction than the
    tensor_scalar alone, so the Vector engine is busy longer, by less than the stage itself."""

    def k(x_t, with_reduce):
        t = nl.load(x_t)
        d = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        if with_reduce:
            nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=2.0,
                                      reduce_op=nl.add, reduce_res=r)  # fmt: skip
        else:
            nisa.tensor_scalar(dst=d, data=t, op0=nl.multiply, operand0=2.0)
        o = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o, d)
        return o

    x = nki.hbm((128, 2048), nl.float32)
    runs = [nki.profile(lambda x_t, r=r: k(x_t, r), chip="trn2")(x) for r in (False, True)]
    plain, fused = (r.busy["Vector"] * r.latency for r in runs)
    assert plain < fused < 1.5 * plain


@pytest.mark.parametrize(
    ("kw", "exc", "pattern"),
    [
        ({"reduce_cmd": nisa.reduce_cmd.reduce}, nki.NotModelledError, "reset_reduce is"),
        ({"reduce_op": nl.subtract}, nki.NotModelledError, "subtract"),
        ({"reduce_op": nl.exp}, KernelArgumentError, "not one of its operators"),
        ({"reduce_res": None}, nki.NotModelledError, "no reduce_res"),
        ({"reduce_res": "wide"}, HardwareRuleError, r"reduce_res must be \[128, 1\]"),
    ],
    ids=["accumulate", "subtract", "not-a-fold", "no-result", "wide-result"],
)
def test_tensor_scalar_reduce_errors_teach(kw, exc, pattern):
    def k(x_t):
        t = nl.load(x_t)
        args = {"data": t, "op0": nl.multiply, "operand0": 2.0, "reduce_op": nl.add,
                "reduce_res": nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)}  # fmt: skip
        args.update(kw)
        if args["reduce_res"] == "wide":
            args["reduce_res"] = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(**args)
        return x_t

    with pytest.raises(exc, match=pattern):
        sim(k, rand(128, 16))


# --- nl.spmd_dim / nl.nc: an SPMD grid axis split over the cores of LNC=2 -----------------------
def _copy_grid(a):
    """The API example's kernel: program (i, j) copies a[i, j]."""
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    nl.store(b[i, j], nl.load(a[i, j]))
    return b


@pytest.mark.parametrize(
    ("grid", "core0"),
    [
        (lambda: (nl.spmd_dim(nl.nc(2), 2), 2), [(0, 0), (0, 1), (1, 0), (1, 1)]),
        (lambda: (nl.nc(2) * 2, 2), [(0, 0), (0, 1), (1, 0), (1, 1)]),
        (lambda: (nl.spmd_dim(2, nl.nc(2)), 2), [(0, 0), (0, 1), (2, 0), (2, 1)]),
        (lambda: (2 * nl.nc(2), 2), [(0, 0), (0, 1), (2, 0), (2, 1)]),
    ],
    ids=["nc-major", "nc-major-sugar", "nc-minor", "nc-minor-sugar"],
)
def test_spmd_dim_places_the_programs_of_a_grid_axis_on_the_two_cores(grid, core0):
    """The placements the older API example spells out: with nc(2) first, core 0 runs rows 0
    and 1 of the 4 x 2 grid; with nc(2) last, the even rows. The copy is exact either way."""
    from trnlab.nki._spmd import placement

    g, n, programs = placement(grid())
    assert (g, n) == ((4, 2), 2)
    assert programs[0] == core0
    assert sorted(programs[0] + programs[1]) == [(i, j) for i in range(4) for j in range(2)]
    src = rand(4, 2, 1, 1)
    np.testing.assert_array_equal(sim(nki.jit(_copy_grid)[grid()], src), src)

    def uneven(a):  # program (i, j) records i + 3 instructions: each core's count names its rows
        b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        t = nl.load(a[i, j])
        for _ in range(i + 1):
            t = nl.exp(t)
        nl.store(b[i, j], t)
        return b

    run = nki.profile(nki.jit(uneven)[grid()], chip="trn2")(src)
    counts = [len(r.extra["nki"]["instructions"]) for r in run.extra["cores"]]
    assert counts[0] == sum(i + 3 for i, _ in core0)
    assert sum(counts) == sum(i + 3 for i in range(4) for _ in range(2))


def test_a_grid_split_over_two_cores_takes_about_half_the_time_of_one_core():
    """Each core runs its half of the programs, the two at the same time: the profile is the
    slower core's, with both in run.extra["cores"]."""

    def k(a):
        b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t = nl.load(a[i * 128 : (i + 1) * 128, :])
        nl.store(b[i * 128 : (i + 1) * 128, :], nl.exp(t))
        return b

    x = nki.hbm((8 * 128, 2048), nl.float32)
    one = nki.profile(nki.jit(k)[8], chip="trn2")(x)
    two = nki.profile(nki.jit(k)[nl.spmd_dim(4, nl.nc(2))], chip="trn2")(x)
    assert len(two.extra["cores"]) == 2
    assert 0.4 * one.latency < two.latency < 0.6 * one.latency


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: nl.nc(4), "at most 2 physical cores"),
        (lambda: nl.spmd_dim(2, 3), "exactly one nl.nc"),
        (lambda: nl.spmd_dim(nl.nc(2), nl.nc(2)), "exactly one nl.nc"),
        (lambda: nl.spmd_dim(0, nl.nc(2)), "positive whole number"),
        (lambda: nki.jit(_copy_grid)[nl.nc(2), nl.nc(2)], "one nl.nc / nl.spmd_dim axis"),
    ],
    ids=["nc4", "no-nc", "two-nc", "zero", "two-placed-axes"],
)
def test_spmd_placement_errors_teach(make, pattern):
    with pytest.raises(KernelArgumentError, match=pattern):
        make()


# --- older iota / affine_select over index expressions, nl.fp32, partition broadcast -----------
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=st.integers(1, 128), f=st.integers(1, 64), cp=st.integers(-3, 3), cf=st.integers(-3, 3),
    c0=st.integers(-50, 50),
)  # fmt: skip
def test_older_iota_of_an_index_expression_holds_its_values(p, f, cp, cf, c0):
    """``nisa.iota(c0 + cp * i_p + cf * i_f, dtype)``: a new [p, f] tile of the expression's
    values, as numpy evaluates it on the grid."""

    def k(_):
        i_p, i_f = nl.mgrid[0:p, 0:f]
        t = nisa.iota(c0 + cp * i_p + cf * i_f, dtype=nl.int32)
        out = nl.ndarray((p, f), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    ii, jj = np.mgrid[0:p, 0:f]
    np.testing.assert_array_equal(sim(k, rand(1, 1)), c0 + cp * ii + cf * jj)


@pytest.mark.parametrize(
    ("pred", "ref"),
    [
        (lambda ix, iy: iy < ix, lambda i, j: j < i),
        (lambda ix, iy: ix + 3 <= iy, lambda i, j: i + 3 <= j),
        (lambda ix, iy: 2 * iy > ix, lambda i, j: 2 * j > i),
        (lambda ix, iy: iy >= 10, lambda i, j: j >= 10),
    ],
    ids=["causal", "shifted", "steep", "free-only"],
)
def test_older_affine_select_takes_a_comparison_of_the_grid(pred, ref):
    """``affine_select(pred=(iy < ix), on_true_tile=a[ix, iy], on_false_value=nl.fp32.min)``
    (the older API example and the SD attention tutorial): one GpSimd instruction."""
    a = rand(128, 64)

    def k(a_t):
        ix, iy = nl.mgrid[0:128, 0:64]
        t = nl.load(a_t)
        r = nisa.affine_select(pred=pred(ix, iy), on_true_tile=t[ix, iy],
                               on_false_value=nl.fp32.min)  # fmt: skip
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    ii, jj = np.mgrid[0:128, 0:64]
    want = np.where(ref(ii, jj), a, np.finfo(np.float32).min)
    np.testing.assert_array_equal(sim(k, a), want)


def test_older_iota_and_affine_select_errors_teach():
    ip = lambda: nl.arange(128)[:, None]  # noqa: E731
    cases = [
        (lambda t: nisa.iota(ip()), KernelArgumentError, "give the dtype"),
        (lambda t: nisa.iota(nl.arange(8), nl.int32), KernelArgumentError, "placed on a grid"),
        (lambda t: nisa.iota(), KernelArgumentError, "give dst= and pattern="),
        (
            lambda t: nisa.affine_select(pred=(ip() < 3) & (ip() > 1), on_true_tile=t,
                                         on_false_value=0.0),
            KernelArgumentError,
            "NKI refuses masks joined",
        ),
        (
            lambda t: nisa.affine_select(pred=(nl.arange(64)[:, None] < 3), on_true_tile=t,
                                         on_false_value=0.0),
            KernelArgumentError,
            "64 values on grid axis 0, the tile 128",
        ),
        (lambda t: nisa.affine_select(pred=(ip() < 2.5), on_true_tile=t, on_false_value=0.0),
         KernelArgumentError, "whole number"),
    ]  # fmt: skip
    for fn, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            sim(lambda x, fn=fn: fn(nl.load(x)), rand(128, 16))


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((128, 64), (1, 64)), ((1, 64), (128, 64)), ((128, 1), (1, 64)), ((128, 64), (1, 1))],
    ids=["row", "row-first", "both-axes", "one-value"],
)
def test_nl_elementwise_broadcasts_a_one_partition_tile_across_partitions(sa, sb):
    """The API examples' nl.add of a [1, 512] row to a [128, 512] tile (and a [128, 1] column
    to a [1, 512] row): numpy's broadcast; the result keeps the inputs' dtype."""
    a, b = rand(*sa), rand(*sb)

    def k(a_t, b_t):
        c = nl.add(nl.load(a_t, dtype=nl.bfloat16), nl.load(b_t, dtype=nl.bfloat16))
        assert c.dtype == "bfloat16"  # the inputs' dtype, not the float32 of the broadcast
        out = nl.ndarray(c.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, c)
        return out

    def bf16(v):
        return formats.quantize(v, "bf16")

    np.testing.assert_allclose(sim(k, a, b), bf16(bf16(a) + bf16(b)), rtol=1e-6)
    with pytest.raises(KernelArgumentError, match="only a one-partition tile broadcasts"):
        sim(k, rand(128, 64), rand(64, 64))
    with pytest.raises(KernelArgumentError, match=r"nl.add: the one-partition int32 tile"):
        sim(lambda a_t, b_t: nl.add(nl.load(a_t), nl.load(b_t)),
            np.ones((128, 8), np.int32), np.ones((1, 8), np.int32))  # fmt: skip


def test_a_mask_that_keeps_nothing_skips_the_instruction_as_nki_does():
    """A loop with one tile too many (4 x 128 rows over 300): the last iteration's load, exp
    and store keep nothing, so nothing past the tensor is touched and the result is exact."""
    x = rand(300, 16)

    def k(x_t):
        ip, jf = nl.arange(128)[:, None], nl.arange(16)[None, :]
        out = nl.ndarray((300, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            keep = i * 128 + ip < 300
            t = nl.load(x_t[i * 128 + ip, jf], mask=keep)
            nl.store(out[i * 128 + ip, jf], value=nl.exp(t, mask=keep), mask=keep)
        return out

    np.testing.assert_allclose(sim(k, x), np.exp(x), rtol=1e-6)


def test_a_mask_that_holds_everywhere_is_accepted_by_every_instruction():
    """Older kernels pass mask= to any API; one that holds on the whole grid changes nothing."""
    x = rand(128, 16)

    def k(x_t):
        ip = nl.arange(128)[:, None]
        t = nl.load(x_t)
        s = nl.sum(t, axis=1, mask=(ip < 128))
        a = nisa.activation(op=nl.exp, data=t, mask=(ip >= 0))
        c = nl.copy(a, mask=(ip < 1000))
        return _out(s), _out(c)

    s, c = sim(k, x)
    np.testing.assert_allclose(s[:, 0], x.sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, np.exp(x), rtol=1e-6)


def test_a_column_keeps_its_partitions_through_a_further_slice_and_a_masked_load():
    """``x[0:128, 2][0:64]`` is still a column (64 partitions); a masked load of a row
    ``x[3, 0:64]`` cuts its free axis."""
    x = rand(128, 64)

    def k(x_t):
        col = nl.load(x_t[0:128, 2][0:64])
        jf = nl.arange(64)[None, :]
        row = nl.load(x_t[3, 0:64], mask=(jf < 32))
        assert col.shape == (64, 1) and row.shape == (1, 64)
        o1 = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, col)
        o2 = nl.ndarray((1, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o2, row[:, 0:32])
        return o1, o2

    col, row = sim(k, x)
    np.testing.assert_array_equal(col[:, 0], x[0:64, 2])
    np.testing.assert_array_equal(row[0], x[3, 0:32])


def test_spmd_dim_factors_chain_and_name_their_cores():
    from trnlab.nki._spmd import placement

    g, n, programs = placement((nl.nc(2) * 2 * 2,))
    assert (g, n) == ((8,), 2) and programs[0] == [(0,), (1,), (2,), (3,)]
    assert "on 2 cores" in repr(nki.jit(_copy_grid)[nl.nc(2) * 2, 2])
    assert "on 1 core" in repr(nki.jit(_copy_grid)[nl.spmd_dim(4, nl.nc(1)), 2])


def test_tensor_scalar_reduce_refuses_a_bit_vector_stage():
    def k(x_t):
        t = nl.load(x_t)
        r = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(data=t, op0=nl.bitwise_and, operand0=3, reduce_op=nl.add,
                                  reduce_res=r)  # fmt: skip
        return x_t

    with pytest.raises(KernelArgumentError, match="arithmetic operator"):
        sim(k, np.ones((128, 16), np.int32))


def test_simulate_kernel_is_the_older_name_of_simulate():
    x = rand(128, 16)

    @nki.jit
    def k(x_t):
        out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x_t)))
        return out

    np.testing.assert_allclose(nki.simulate_kernel(k, x), np.exp(x), rtol=1e-6)


def test_ops_passed_first_with_data_by_keyword_as_the_older_sd_attention_does():
    def k(x):
        a = nl.load(x)
        neg_max = nisa.tensor_reduce(np.max, data=a, axis=(1,), negate=True)
        e = nisa.activation(np.exp, data=a, bias=neg_max, scale=1.0)
        return _out(e), _out(nisa.tensor_reduce(np.add, data=e, axis=(1,)))

    x = rand(64, 40)
    e, s = sim(k, x)
    want = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e, want, rtol=1e-5)
    np.testing.assert_allclose(s, want.sum(axis=1, keepdims=True), rtol=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 300), cols=st.integers(1, 128))
def test_load_transpose2d_lands_hbm_columns_on_partitions(rows, cols):
    def k(a):
        return _out(nl.load_transpose2d(a, dtype=nl.float32))

    x = RNG.uniform(-2, 2, (rows, cols)).astype(np.float32)
    np.testing.assert_array_equal(sim(k, x), x.T)


def test_load_transpose2d_moves_its_bytes_and_refuses_what_it_cannot_do():
    def k(a):
        return _out(nl.load_transpose2d(a))

    run = nki.profile(k, chip="trn2")(np.ones((512, 128), np.float32))
    assert run.program.table["bytes"][0] == 512 * 128 * 4
    with pytest.raises(HardwareRuleError, match="partitions"):  # 512 HBM columns > 128
        sim(k, np.ones((128, 512), np.float32))
    with pytest.raises(KernelArgumentError, match="nc_transpose"):
        sim(lambda a: _out(nl.load_transpose2d(nl.load(a))), np.ones((8, 8), np.float32))
    with pytest.raises(KernelArgumentError, match=r"2-D view; .* has 3"):
        sim(lambda a: _out(nl.load_transpose2d(a)), np.ones((2, 8, 8), np.float32))


def _exp_returning_inside_its_loop(a):
    """The older profiling tutorial's slip: the return indented into the loop body."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range((a.shape[0] + 127) // 128):
        rows = nl.ds(p * 128, min(128, a.shape[0] - p * 128))
        nl.store(out[rows, :], nl.exp(nl.load(a[rows, :])))
        return out


def _doubled_in_place(a):
    """The same slip in a kernel that writes its input: traced once, so doubled once."""
    for p in nl.affine_range(a.shape[0] // 128):
        nl.store(
            a[p * 128 : p * 128 + 128, :], nl.multiply(nl.load(a[p * 128 : p * 128 + 128, :]), 2.0)
        )
        return a


class _Holder:
    def kernel(self, a):  # a method: trnlab does not rewrite it
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for _i in nl.affine_range(2):
            nl.store(out, nl.load(a))
            return out


def test_a_return_ending_an_affine_loop_body_runs_the_whole_loop_as_nki_traces_it():
    x = rand(250, 64)
    with pytest.warns(UserWarning, match=r"ends an nl.affine_range loop body.*whole loop runs"):
        got = sim(_exp_returning_inside_its_loop, x)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)
    with pytest.warns(UserWarning):
        run = nki.profile(_exp_returning_inside_its_loop, chip="trn1")(x)
    assert run.program.counts()["dma_load"] == 2
    y = rand(256, 8)
    with pytest.warns(UserWarning):
        got = nki.simulate(_doubled_in_place)(y.copy())
    np.testing.assert_allclose(got, 2 * y, rtol=1e-6)


def test_affine_ranges_stay_ranges_a_kernel_may_reuse_measure_and_zip():
    def k(a):
        r = nl.affine_range(a.shape[0] // 8)
        assert len(r) == 2 and r[1] == 1
        tiles = [nl.load(a[i * 8 : i * 8 + 8, :]) for i in r]
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i, j in zip(r, nl.affine_range(5), strict=False):  # the longer range is cut short
            nl.store(out[i * 8 : i * 8 + 8, :], nl.add(tiles[i], float(j)))
        return out

    x = rand(16, 8)
    np.testing.assert_allclose(sim(k, x), x + np.repeat([0.0, 1.0], 8)[:, None], rtol=1e-6)


def test_a_return_that_cannot_be_moved_is_a_teaching_error():
    scale = 2.0  # a closure variable: trnlab does not rewrite the kernel

    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(a.shape[0] // 8):
            nl.store(
                out[i * 8 : i * 8 + 8, :], nl.multiply(nl.load(a[i * 8 : i * 8 + 8, :]), scale)
            )
            return out

    with pytest.raises(KernelArgumentError, match=r"ends an nl.sequential_range loop body.*dedent"):
        sim(k, rand(32, 8))
    with pytest.raises(KernelArgumentError, match=r"ends an nl.affine_range loop body"):
        sim(_Holder().kernel, rand(8, 8))

    def mid(a):  # a return in the middle of the body is not the indentation slip
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if i == 0:
                return out
            nl.store(out, nl.load(a))
        return out

    with pytest.raises(
        KernelArgumentError, match=r"inside an nl.affine_range loop body.*after the loop"
    ):
        sim(mid, rand(8, 8))


def test_the_return_slip_is_read_through_aliases_partials_and_decorators():
    import functools

    x = rand(16, 8)
    with pytest.warns(UserWarning, match=r"ends an nl\.affine_range loop body"):
        got = sim(_copy_through_an_alias, x)  # `from ... import affine_range as _ar`
    np.testing.assert_array_equal(got, x)
    with pytest.warns(UserWarning, match=r"ends an nl\.affine_range loop body"):
        got = sim(functools.partial(_scaled_returning_inside_its_loop, scale=3.0), x)
    np.testing.assert_allclose(got, 3.0 * x, rtol=1e-6)

    def logged(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs)

        return wrapper

    with pytest.raises(KernelArgumentError, match=r"line \d+\).*Move the return after the loop"):
        sim(logged(_scaled_returning_inside_its_loop), x)  # the wrapper cannot be rewritten


def _copy_through_an_alias(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for p in _ar(a.shape[0] // 8):
        nl.store(out[p * 8 : p * 8 + 8, :], nl.load(a[p * 8 : p * 8 + 8, :]))
        return out


def _scaled_returning_inside_its_loop(a, scale=2.0):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(a.shape[0] // 8):
        nl.store(out[p * 8 : p * 8 + 8, :], nl.multiply(nl.load(a[p * 8 : p * 8 + 8, :]), scale))
        return out


def test_a_launched_kernel_is_not_kept_alive_by_the_analysis():
    import gc
    import weakref

    def make():
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a))
            return out

        return k

    k = make()
    sim(k, rand(4, 4))
    ref = weakref.ref(k)
    del k
    gc.collect()
    assert ref() is None


def test_the_grader_runs_a_plain_function_answer_as_nki_reads_it():
    from trnlab.course.answers import KernelRecorder

    x = rand(16, 8)
    with pytest.warns(UserWarning, match="ends an nl.affine_range loop body"):
        got = nki.simulate(KernelRecorder(_scaled_returning_inside_its_loop))(x)
    np.testing.assert_allclose(got, 2.0 * x, rtol=1e-6)


def _exp_rows(in_tensor):
    """The profiling examples' kernel (v2.26.1): exp of any 2-D input, 128 rows at a time."""
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    sz_p, sz_f = in_tensor.shape
    i_f = nl.arange(sz_f)[None, :]
    for p in nl.affine_range((sz_p + 127) // 128):
        i_p = p * 128 + nl.arange(128)[:, None]
        tile = nl.load(in_tensor[i_p, i_f], mask=(i_p < sz_p))
        nl.store(out_tensor[i_p, i_f], value=nl.exp(tile), mask=(i_p < sz_p))
    return out_tensor


def test_nki_profile_as_the_device_decorator_runs_the_kernel_on_the_model():
    # NKI's form: @nki.profile(working_directory=..., save_neff_name=..., ...) above a kernel,
    # called with arrays or with nki.typing.tensor[[shape], dtype] placeholders.
    from trnlab.nki.typing import tensor

    deco = nki.profile(working_directory="/tmp/profiles", save_neff_name="file.neff",
                       save_trace_name="profile.ntff", profile_nth=2)  # fmt: skip
    kernel = deco(_exp_rows)
    x = np.random.default_rng(3).random((250, 512), dtype=np.float32)
    run = kernel(x)
    np.testing.assert_allclose(run.outputs["out_tensor"], np.exp(x), rtol=1e-5)
    timing = kernel(tensor[[250, 512], nl.float32])
    assert not timing.numerics and timing.latency == pytest.approx(run.latency)
    with pytest.raises(KernelArgumentError, match="device decorator takes working_directory"):
        nki.profile(working_dir="/tmp")
    with pytest.raises(KernelArgumentError, match="needs a kernel"):
        nki.profile()
