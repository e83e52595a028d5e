"""Transpose through the Tensor Engine: each 128 x 128 block is a matmul against the identity."""

from __future__ import annotations

from ._matmul import _spans

__all__ = ["transpose_kernel"]

BLOCK = 128


def transpose_kernel(ctx, x, y):
    """``y[C, R] = x[R, C].T`` block by block: load x[r, c] (rows on partitions), transpose
    into PSUM (the Tensor Engine), copy out with a cast, store to y[c, r]."""
    R, C = x.shape
    ins = [ctx.sbuf((BLOCK, BLOCK), x.fmt, f"x tile{j}") for j in range(2)]
    psums = [ctx.psum((BLOCK, BLOCK), f"t{j}") for j in range(2)]
    outs = [ctx.sbuf((BLOCK, BLOCK), y.fmt, f"y tile{j}") for j in range(2)]
    step = 0
    for r0, rs in _spans(R, BLOCK):
        for c0, cs in _spans(C, BLOCK):
            s = step % 2
            ctx.load(ins[s][:rs, :cs], x[r0 : r0 + rs, c0 : c0 + cs])
            ctx.transpose(psums[s][:cs, :rs], ins[s][:rs, :cs])
            ctx.copy(outs[s][:cs, :rs], psums[s][:cs, :rs], engine=("vector", "scalar")[s])
            ctx.store(y[c0 : c0 + cs, r0 : r0 + rs], outs[s][:cs, :rs])
            step += 1
