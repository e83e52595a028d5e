"""A matmul with a fused epilogue: bias + activation on the Scalar engine, straight from PSUM."""

from __future__ import annotations

from ._matmul import TILE_K, TILE_M, TILE_N, _spans

__all__ = ["matmul_bias_act_kernel"]


def matmul_bias_act_kernel(ctx, w, x_t, bias, y_t, activation: str = "relu"):
    """``y_t[N, M] = act(w[K, N].T @ x_t[K, M] + bias[N])``: N (output features) on partitions,
    so the bias is one value per partition and the Scalar engine applies
    ``act(psum * 1 + bias)`` while it moves the result out of PSUM (no extra pass)."""
    K, N = w.shape
    M = x_t.shape[1]
    ks_ = _spans(K, TILE_K)
    w_tiles = [ctx.sbuf((TILE_K, TILE_M), w.fmt, f"w k{j}") for j in range(len(ks_))]
    x_tiles = [
        [ctx.sbuf((TILE_K, TILE_N), x_t.fmt, f"x{s} k{j}") for j in range(len(ks_))]
        for s in range(2)
    ]
    b_tile = ctx.sbuf((TILE_M, 1), "fp32", "bias")
    psums = [ctx.psum((TILE_M, TILE_N), f"acc{j}") for j in range(2)]
    outs = [ctx.sbuf((TILE_M, TILE_N), y_t.fmt, f"y tile{j}") for j in range(2)]
    step = 0
    for n0, ns in _spans(N, TILE_M):
        ctx.load(b_tile[:ns, :], bias[n0 : n0 + ns, :])
        for j, (k0, ks) in enumerate(ks_):
            ctx.load(w_tiles[j][:ks, :ns], w[k0 : k0 + ks, n0 : n0 + ns])
        for m0, ms in _spans(M, TILE_N):
            s = step % 2
            for j, (k0, ks) in enumerate(ks_):
                ctx.load(x_tiles[s][j][:ks, :ms], x_t[k0 : k0 + ks, m0 : m0 + ms])
            ps, out = psums[s], outs[s]
            for j, (_, ks) in enumerate(ks_):
                ctx.matmul(
                    ps[:ns, :ms], w_tiles[j][:ks, :ns], x_tiles[s][j][:ks, :ms], accumulate=j > 0
                )
            ctx.activation(out[:ns, :ms], ps[:ns, :ms], activation, bias=b_tile[:ns, :])
            ctx.store(y_t[n0 : n0 + ns, m0 : m0 + ms], out[:ns, :ms])
            step += 1
