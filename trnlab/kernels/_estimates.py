"""How many instructions each kernel of the library records, estimated from its shapes before
it is traced: the count of each loop body's NKI instructions times its trip count, read off the
kernel's source (``_matmul.estimate_instructions`` does the same for the matmul progression).

A timing-only run of a kernel too large to trace in seconds is refused with this estimate
(:func:`trnlab.kernels._api._check_size`); ``tests/test_input_validation.py`` checks each
estimate against the recorded count. The counts are about right (within a factor of two), not
exact: a broadcast's few instructions or a causal mask's skipped tiles are rounded.
"""

from __future__ import annotations

__all__ = ["ESTIMATES"]

P = 128  # partitions: rows, channels and queries go 128 at a time


def _up(n: int, d: int) -> int:
    return -(-n // d)


def transpose(R: int, C: int) -> int:
    """A load, a Tensor Engine transpose, a copy out of PSUM and a store per 128 x 128 block."""
    return 4 * _up(R, P) * _up(C, P)


def transpose2d(rows: int, F: int) -> int:
    """A load, one strided copy and a store per 128 rows."""
    return 3 * _up(rows, P)


def tensor_add(M: int, N: int) -> int:
    """Two loads, an add and a store per program of the 128 x 512 grid."""
    return 4 * _up(M, 128) * _up(N, 512)


def avgpool2d(C: int, H: int, W: int) -> int:
    """A load, one reduction, a scale and a store per 128 channels."""
    return 4 * _up(C, P)


def softmax(N: int, D: int) -> int:
    """Load, row max, exp with its sum, reciprocal, scale, store (and a copy) per 128 rows."""
    return 7 * _up(N, P)


def rmsnorm(N: int, D: int) -> int:
    """gamma on every partition (a DMA and a broadcast), then eight per 128 rows."""
    return 3 + 8 * _up(N, P)


def layernorm(N: int, D: int) -> int:
    """gamma and beta broadcast; per 128 rows a bn_stats per 512 features and eight more."""
    return 7 + _up(N, P) * (9 + _up(D, 512))


def attention(S: int, S_kv: int, d: int, causal: bool) -> int:
    """Per query tile: its load, three memsets and the output's three; per (query tile, key
    tile of 512): about fourteen instructions plus a transpose, a copy and a matmul per 128
    keys (K and V loads when they are not resident). A causal mask visits about half."""
    q_tiles = _up(S, 128)
    per_kv = 14 + 3 * 4 + 2
    kv_tiles = _up(S_kv, 512)
    visits = q_tiles * kv_tiles if not causal else _up(q_tiles * kv_tiles + q_tiles, 2)
    return 2 + 7 * q_tiles + per_kv * visits


def selective_scan(channels: int, T: int, S: int, version: str, chunk: int, hoist: bool) -> int:
    """Per (channel tile, state, time chunk): about eleven instructions (the scan, its
    operands, two broadcast rows); the loads of delta and u once per channel tile (v2, v3) or
    once per state (v1)."""
    tiles = _up(channels, P)
    step = 10  # with the two broadcast rows (through the Tensor Engine)
    if version == "v1":
        return 1 + S * tiles * (3 + step) + tiles
    chunks = 1 if version == "v2" else _up(T, min(chunk, T))
    per_state = 1 + (step + 1) * chunks + (0 if version == "v2" else 1)
    return tiles * (4 + int(hoist) + S * per_state)


def matmul_bias_act(M: int, K: int, N: int) -> int:
    """Per 128 output rows of C^T: the bias and W's strip; per 512 columns, X's strip, the
    matmuls over K, the fused activation and a store."""
    nt, kt, mt = _up(N, 128), _up(K, 128), _up(M, 512)
    return nt * (1 + kt + mt * (2 * kt + 2))


#: kernel name -> estimate(*sizes)
ESTIMATES = {
    "transpose": transpose,
    "transpose2d": transpose2d,
    "tensor_add": tensor_add,
    "avgpool2d": avgpool2d,
    "softmax": softmax,
    "rmsnorm": rmsnorm,
    "layernorm": layernorm,
    "attention": attention,
    "selective_scan": selective_scan,
    "matmul_bias_act": matmul_bias_act,
}
