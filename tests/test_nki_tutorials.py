"""Kernels written the way NKI's tutorials, guides and API examples write them run on trnlab.nki
after changing only their imports (``import nki`` -> ``import trnlab.nki as nki`` ...), and
their results match numpy.

The kernels are re-typed here in the style of the aws-neuron-sdk sources they follow (named in
each docstring): the current ``nisa.dma_copy(dst=, src=)`` style, the ``nl.load`` /
``nl.store`` style of the getting-started guide and the simulator page, and the older
value-returning ``nisa`` forms of the API examples.
"""

from __future__ import annotations

import numpy as np
import pytest

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl

RNG = np.random.default_rng(12)


# --- getting started / simulator quick start (nl.load / nl.store style) -----------------------
@nki.jit
def add_two(a_input, b_input):
    """Getting-started guide: load both inputs, add, store into a new shared_hbm output."""
    assert a_input.shape == b_input.shape
    assert a_input.shape[0] <= nl.tile_size.pmax
    a_tile = nl.load(a_input)
    b_tile = nl.load(b_input)
    c_tile = nl.add(a_tile, b_tile)
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=c_tile)
    return c_output


def test_getting_started_add_runs_called_directly_and_through_simulate():
    a = np.ones((4, 3), dtype=np.float16)
    b = np.ones((4, 3), dtype=np.float16)
    c = add_two(a, b)  # calling the jit kernel on numpy arrays simulates it
    assert c.dtype == np.float16 and np.all(c == 2)
    x = RNG.random((128, 512)).astype(np.float32)
    y = RNG.random((128, 512)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(add_two)(x, y), x + y, rtol=1e-6)


# --- tensor addition tutorial (dma_copy style, tiled over a 2-D loop) --------------------------
@nki.jit
def tiled_add(a_input, b_input):
    """Tensor addition tutorial: [128, 512] tiles over both dimensions."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    M, N = a_input.shape
    TILE_M, TILE_N = 128, 512
    assert M % TILE_M == 0 and N % TILE_N == 0
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            a_tile = nl.ndarray(shape=(TILE_M, TILE_N), dtype=a_input.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray(shape=(TILE_M, TILE_N), dtype=b_input.dtype, buffer=nl.sbuf)
            rows = slice(m * TILE_M, (m + 1) * TILE_M)
            cols = slice(n * TILE_N, (n + 1) * TILE_N)
            nisa.dma_copy(dst=a_tile, src=a_input[rows, cols])
            nisa.dma_copy(dst=b_tile, src=b_input[rows, cols])
            c_tile = nl.ndarray(shape=(TILE_M, TILE_N), dtype=a_input.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(dst=c_output[rows, cols], src=c_tile)
    return c_output


def test_tensor_addition_tutorial_and_its_rotating_buffers():
    a = RNG.random((256, 1024)).astype(np.float32)
    b = RNG.random((256, 1024)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(tiled_add)(a, b), a + b)
    run = nki.profile(tiled_add, chip="trn2")(a, b)
    # tiles declared in the loop body rotate over the compiler's buffers (catalogue: 3 on trn2)
    n = int(run.params.compiler_rotating_buffers)
    assert n > 1
    assert run.extra["nki"]["buffers"] == {"a_tile": n, "b_tile": n, "c_tile": n}
    np.testing.assert_array_equal(run.output, a + b)


# --- matmul tutorial ---------------------------------------------------------------------------
@nki.jit
def matmul_basic(lhsT, rhs):
    """Matmul tutorial, basic kernel: one [128, 64] x [128, 512] matmul (positional dst)."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_ == 128 and M == 64 and N == 512
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhs_tile = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tile = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=lhs_tile, src=lhsT)
    nisa.dma_copy(dst=rhs_tile, src=rhs)
    result_psum = nl.ndarray(result.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(result_psum, lhs_tile, rhs_tile)
    result_sbuf = nl.ndarray(result_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result_sbuf, src=result_psum)
    nisa.dma_copy(dst=result, src=result_sbuf)
    return result


@nki.jit
def matmul_tiled(lhsT, rhs):
    """Matmul tutorial, tiled kernel: accumulation over K left to nc_matmul's default."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=lhsT_tile,
                    src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M],
                )
                nisa.dma_copy(
                    dst=rhs_tile,
                    src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N],
                )
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], src=res_sb
            )
    return result


@nki.jit
def matmul_fully_optimized(lhsT, rhs, TILES_IN_BLOCK_M=16, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=8):
    """Matmul tutorial, fully optimized kernel (current edition): 3-D SBUF blocks, result M
    tiles cleared by memset, partial sums added by tensor_tensor, a reshape for the store."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    BLOCK_M, BLOCK_N = TILE_M * TILES_IN_BLOCK_M, TILE_N * TILES_IN_BLOCK_N
    BLOCK_K = TILE_K * TILES_IN_BLOCK_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // BLOCK_N):
        n_start = n * BLOCK_N
        result_tiles = []
        for _ in nl.affine_range(M // BLOCK_M):
            for _ in nl.affine_range(TILES_IN_BLOCK_M):
                r_tile = nl.ndarray(
                    (TILE_M, TILES_IN_BLOCK_N, TILE_N), dtype=result.dtype, buffer=nl.sbuf
                )
                nisa.memset(dst=r_tile, value=0.0)
                result_tiles.append(r_tile)
        for k in nl.sequential_range(K // BLOCK_K):
            rhs_tiles = nl.ndarray(
                (TILE_K, TILES_IN_BLOCK_K, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf
            )
            for kt in range(TILES_IN_BLOCK_K):
                k0 = (k * TILES_IN_BLOCK_K + kt) * TILE_K
                nisa.dma_copy(
                    dst=rhs_tiles[0:TILE_K, kt, 0:BLOCK_N],
                    src=rhs[k0 : k0 + TILE_K, n_start : n_start + BLOCK_N],
                )
            for m in nl.affine_range(M // BLOCK_M):
                lhsT_tiles = nl.ndarray(
                    (TILE_K, TILES_IN_BLOCK_K, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf
                )
                for kt in nl.affine_range(TILES_IN_BLOCK_K):
                    k0 = (k * TILES_IN_BLOCK_K + kt) * TILE_K
                    nisa.dma_copy(
                        dst=lhsT_tiles[0:TILE_K, kt, 0:BLOCK_M],
                        src=lhsT[k0 : k0 + TILE_K, m * BLOCK_M : (m + 1) * BLOCK_M],
                    )
                for nt in nl.affine_range(TILES_IN_BLOCK_N):
                    for mt in nl.affine_range(TILES_IN_BLOCK_M):
                        psum_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for kt in nl.affine_range(TILES_IN_BLOCK_K):
                            nisa.nc_matmul(
                                dst=psum_tile,
                                stationary=lhsT_tiles[
                                    0:TILE_K, kt, mt * TILE_M : (mt + 1) * TILE_M
                                ],
                                moving=rhs_tiles[0:TILE_K, kt, nt * TILE_N : (nt + 1) * TILE_N],
                            )
                        r_tile = result_tiles[m * TILES_IN_BLOCK_M + mt]
                        nisa.tensor_tensor(
                            dst=r_tile[0:TILE_M, nt, 0:TILE_N],
                            data1=r_tile[0:TILE_M, nt, 0:TILE_N],
                            data2=psum_tile,
                            op=nl.add,
                        )
        for i, r_tile in enumerate(result_tiles):
            flat = r_tile.reshape((TILE_M, BLOCK_N))
            nisa.dma_copy(
                dst=result[i * TILE_M : (i + 1) * TILE_M, n_start : n_start + BLOCK_N],
                src=flat[0:TILE_M, 0:BLOCK_N],
            )
    return result


def _ab(m, k, n):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    return a, b, np.ascontiguousarray(a.T)


def test_matmul_tutorial_kernels_compute_a_at_b():
    a, b, a_t = _ab(64, 128, 512)
    np.testing.assert_allclose(nki.simulate(matmul_basic)(a_t, b), a @ b, rtol=2e-5, atol=2e-4)
    a, b, a_t = _ab(256, 384, 1024)
    np.testing.assert_allclose(nki.simulate(matmul_tiled)(a_t, b), a @ b, rtol=2e-5, atol=5e-4)
    got = nki.simulate(matmul_fully_optimized)(
        a_t, b, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=1, TILES_IN_BLOCK_K=1
    )
    np.testing.assert_allclose(got, a @ b, rtol=2e-5, atol=5e-4)


def test_fully_optimized_tutorial_at_its_size_is_compute_bound_on_trn1():
    """At the tutorial's 4096 x 8192 x 8192 bf16 the fully optimized kernel keeps the Tensor
    Engine above 85% busy in the model (the tutorial reports 85% hardware FLOPs use)."""
    bf16 = nl.bfloat16
    run = nki.profile(matmul_fully_optimized, chip="trn1")(
        nki.hbm((8192, 4096), bf16), nki.hbm((8192, 8192), bf16)
    )
    assert run.bound == "compute" and run.utilisation > 0.85
    assert run.extra["nki"]["buffers"]["rhs_tiles"] == 2  # a block per K step, double-buffered


# --- average pool tutorial (a 5-D access pattern over a tile) ---------------------------------
@nki.jit
def avgpool(in_tensor, pool_size):
    """Average-pool tutorial: a strided .ap() window view reduced by nl.sum over two axes."""
    c, h, w = in_tensor.shape
    out = nl.ndarray(
        (c, h // pool_size, w // pool_size), dtype=in_tensor.dtype, buffer=nl.shared_hbm
    )
    tile = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=in_tensor)
    windows = tile.ap(
        [
            [h * w, c],
            [pool_size * w, h // pool_size],
            [pool_size, w // pool_size],
            [w, pool_size],
            [1, pool_size],
        ]
    )
    sums = nl.sum(windows, axis=[3, 4])
    means = nl.ndarray(sums.shape, dtype=sums.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(
        dst=means, data=sums, op0=nl.multiply, operand0=1.0 / (pool_size * pool_size)
    )
    nisa.dma_copy(dst=out, src=means)
    return out


def test_average_pool_tutorial():
    x = np.arange(2 * 6 * 6, dtype=np.float16).reshape(2, 6, 6)
    want = x.astype(np.float32).reshape(2, 3, 2, 3, 2).mean(axis=(2, 4))
    got = avgpool(x, 2)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.astype(np.float16))


# --- transpose2d tutorial (one-element copies with nl.ds) ---------------------------------------
@nki.jit
def transpose_rows(in_tensor, shape2D):
    """Transpose2d tutorial: each row is an f1 x f2 matrix; element copies with nl.ds."""
    out = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    sz_p, _ = in_tensor.shape
    in_tile = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=in_tile, src=in_tensor)
    f1, f2 = shape2D
    out_tile = nl.ndarray(shape=(sz_p, f2 * f1), dtype=in_tensor.dtype, buffer=nl.sbuf)
    for i1 in nl.affine_range(f1):
        for i2 in nl.affine_range(f2):
            nisa.tensor_copy(
                dst=out_tile[:, nl.ds(i2 * f1 + i1, 1)], src=in_tile[:, nl.ds(i1 * f2 + i2, 1)]
            )
    nisa.dma_copy(dst=out, src=out_tile)
    return out


def test_transpose2d_tutorial_on_int8():
    p, x, y = 5, 3, 4
    a = np.arange(p * x * y, dtype=np.int8).reshape((p, x * y))
    got = transpose_rows(a, (x, y))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(
        got, np.transpose(a.reshape(p, x, y), (0, 2, 1)).reshape(p, x * y)
    )


# --- API examples of older editions: value-returning nisa calls ---------------------------------
@nki.jit
def activation_examples(a_tensor, b_tensor, c_tensor):
    """nki.isa.activation examples: exp of a tile; np.square(b * 2 + c) cast to bfloat16."""
    a_out = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    b_out = nl.ndarray(b_tensor.shape, dtype=b_tensor.dtype, buffer=nl.shared_hbm)
    a = nl.load(a_tensor)
    nl.store(a_out, nisa.activation(op=nl.exp, data=a))
    b = nl.load(b_tensor)
    c = nl.load(c_tensor)
    nl.store(b_out, nisa.activation(op=np.square, data=b, bias=c, scale=2.0, dtype=nl.bfloat16))
    return a_out, b_out


def test_activation_examples():
    a = RNG.random((128, 1024)).astype(np.float32) * 10
    b = RNG.random((128, 512)).astype(np.float32) * 100
    c = RNG.random((128, 1)).astype(np.float32) * 100
    got_a, got_b = nki.simulate(activation_examples, chip="trn1")(a, b, c)
    np.testing.assert_allclose(got_a, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(got_b, np.square(b * 2 + c), rtol=2**-8)  # rounded to bf16


@nki.jit
def psum_accumulation(d_tensor, e_tensor):
    """nki.isa.nc_matmul example 2: ``psum += nisa.nc_matmul(d, e)`` over two K tiles."""
    f_out = nl.ndarray([128, 512], dtype=nl.float32, buffer=nl.shared_hbm)
    f_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(2):
        d = nl.load(d_tensor[i * 128 : (i + 1) * 128, 0:128])
        e = nl.load(e_tensor[i * 128 : (i + 1) * 128, 0:512])
        f_psum += nisa.nc_matmul(d, e)
    nl.store(f_out, f_psum)  # stored straight from PSUM: the compiler copies it to SBUF first
    return f_out


def test_psum_accumulation_example_accumulates_on_the_tensor_engine():
    d = RNG.standard_normal((256, 128)).astype(np.float32)
    e = RNG.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(psum_accumulation)(d, e), d.T @ e, rtol=1e-5, atol=1e-4)
    run = nki.profile(psum_accumulation, chip="trn2")(d, e)
    counts = run.program.counts()
    assert counts["matmul"] == 2 and "tensor_tensor" not in counts  # no Vector add per step


# --- SPMD grid example -------------------------------------------------------------------------
@nki.jit
def spmd_copy(a):
    """SPMD grid example: program (i, j) copies element (i, j) of a [4, 2, 1, 1] tensor."""
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    nl.store(b[i, j], nl.load(a[i, j]))
    return b


def test_spmd_grid_example():
    src = RNG.random((4, 2, 1, 1)).astype(np.float32) * 100
    np.testing.assert_array_equal(spmd_copy[4, 2](src), src)
    run = nki.profile(spmd_copy[4, 2], chip="trn2")(src)
    assert run.program.counts() == {"dma_load": 8, "dma_store": 8}  # all 8 programs, one core


# --- fused Mamba tutorial, v1 (broadcast_to across partitions) ----------------------------------
@nki.jit
def mamba_tutorial_v1(delta, u, A, B, C):
    """Fused-Mamba tutorial v1 (batch, channels, seq): per channel tile and state, exp of
    delta * A, a scan, and the B and C rows broadcast to every partition."""
    batch, channels, seq = delta.shape
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    _, states = A.shape
    P = nl.tile_size.pmax
    for ib in nl.affine_range(batch):
        for ic in nl.affine_range(channels // P):
            c0 = ic * P
            acc = nl.zeros((P, seq), dtype=delta.dtype)
            for s in nl.affine_range(states):
                d_i = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=d_i, src=delta[ib, c0 : c0 + P, 0:seq])
                a_i = nl.ndarray((P, 1), dtype=A.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_i, src=A[c0 : c0 + P, s : s + 1])
                dA = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.activation(dst=dA, op=nl.exp, data=d_i, scale=a_i)
                u_i = nl.ndarray((P, seq), dtype=u.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=u_i, src=u[ib, c0 : c0 + P, 0:seq])
                b_i = nl.ndarray((1, seq), dtype=B.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_i, src=B[ib, s : s + 1, 0:seq])
                dU = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=dU, data1=d_i, data2=u_i, op=nl.multiply)
                dBu = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.tensor_tensor(
                    dst=dBu, data1=dU, data2=nl.broadcast_to(b_i, (P, seq)), op=nl.multiply
                )
                scan = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.tensor_tensor_scan(
                    dst=scan, data0=dA, data1=dBu, initial=0.0, op0=nl.multiply, op1=nl.add
                )
                c_i = nl.ndarray((1, seq), dtype=C.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=c_i, src=C[ib, s : s + 1, 0:seq])
                sc = nl.ndarray((P, seq), dtype=delta.dtype, buffer=nl.sbuf)
                nisa.tensor_tensor(
                    dst=sc, data1=scan, data2=nl.broadcast_to(c_i, (P, seq)), op=nl.multiply
                )
                nisa.tensor_tensor(dst=acc, data1=acc, data2=sc, op=nl.add)
            nisa.dma_copy(dst=out[ib, c0 : c0 + P, 0:seq], src=acc)
    return out


def test_mamba_tutorial_v1_matches_the_reference():
    from trnlab.kernels._mamba import selective_scan_reference

    batch, channels, seq, states = 2, 256, 64, 3
    delta = RNG.random((batch, channels, seq)).astype(np.float32) * 0.2
    u = RNG.standard_normal((batch, channels, seq)).astype(np.float32)
    A = -RNG.random((channels, states)).astype(np.float32)
    B = RNG.standard_normal((batch, states, seq)).astype(np.float32)
    C = RNG.standard_normal((batch, states, seq)).astype(np.float32)
    got = nki.simulate(mamba_tutorial_v1, chip="trn1")(delta, u, A, B, C)
    for i in range(batch):
        want = selective_scan_reference(delta[i], u[i], A, B[i], C[i])
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel", [add_two, tiled_add])
def test_a_kernel_outside_a_launch_is_inlined_by_another_kernel(kernel):
    @nki.jit
    def twice(a, b):
        first = kernel(a, b)  # a jit kernel called from a kernel is inlined, as NKI does
        return kernel(first, b)

    a = RNG.random((128, 512)).astype(np.float32)
    b = RNG.random((128, 512)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(twice)(a, b), a + 2 * b, rtol=1e-6)
