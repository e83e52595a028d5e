"""GPU kernel rates that depend on the problem's shape: measured GEMM tables, GEMM wave
quantization, FlashAttention.

**Measured GEMM rates** (OpenXLA's matmul performance tables). Where the catalogue has a GPU's
GEMM rate measured shape by shape (``gemm_rates`` names the table: H100 and B200, each measured
on its own chip; H200 and GB200 read their sibling's), a BF16 or FP16 GEMM runs at the table's
share of the measured chip's dense peak, times the chip's own peak. Between the grid's points
(M, N, K each a power of two from 256 to 4096; M up to 16,384 through the table's batch of 4,
read as a taller M) the rate is interpolated linearly in log2 of each dimension, on the log of
the rate. Above the grid it is held at the nearest edge (the H100's rate has levelled off
there: 780 TFLOPS at 4096^3, 792 for the best shape of a brute-force search). Below it the rate
is held too, but no GEMM takes less time than the table's quickest kernel (about 5 us on both
GPUs: the floor its smallest shapes sit on), so a tiny GEMM is not given a large one's speed.
Holding is optimistic for a K below 256 on large outputs (unfused attention's scores, K = the
head dimension, on a GPU without a fused-attention rate): a shorter K loop pays the same tile
prologue and epilogue, and no measurement says by how much.
The table holds what the kernel itself takes, measured alone (no launch gaps), so neither
mechanism below is applied on top of it: short-K GEMMs (the tile's prologue and epilogue
against a short K loop) and small ones run well below the ceiling, and libraries fill the SMs
of small outputs with smaller tiles or split K, which the wave model below does not know.

A GPU without a table keeps its matmul rate from the catalogue (``matmul_efficiency``: the best
of a shape search, MAMF, or a framework's measured GEMM), which holds for large, well-shaped
products. Two mechanisms make a training step's kernels run below it, each with its own sourced
figures:

**Wave and tile quantization** (NVIDIA, "Matrix Multiplication Background User's Guide"). A
GEMM's M x N output is cut into tiles of ``tm x tn`` elements, one thread block each; every SM
runs one tile at a time, so the tiles go in waves of ``SMs`` tiles. With
``tiles = ceil(M / tm) ceil(N / tn)`` and ``waves = ceil(tiles / SMs)`` the share of the SMs'
tile slots doing useful work is::

    q(M, N) = M N / (waves x SMs x tm x tn)

(tiles hanging over the matrix edge and a part-filled last wave both waste slots). The library
is taken to pick the tile of the catalogue's set (256 x 128 or 128 x 256) with the larger q.
The catalogue's ceiling was measured at some shape with its own q; a GEMM runs at
``ceiling x min(1, q / q_ceiling)``: never faster than the measured ceiling, slower by the
slots its own waves leave empty.

**FlashAttention at its own rate** (Shah et al. 2024, FlashAttention-3, forward and backward
speed against sequence length on H100). Fused attention never writes the s x s scores; its
speed is measured per kernel, not implied by the GEMM ceiling. With a causal mask the kernel
skips the masked half of the blocks (the figures count only the work done), and its backward
does 2.5x the forward's FLOPs (it recomputes the scores). The rate between two published
sequence lengths is interpolated linearly in log2(seq_len); outside the published range it is
held at the nearest end (the curves flatten above 8k).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

from trnlab import catalog
from trnlab._checks import short
from trnlab.catalog import CatalogError

from ._memory import _whole
from ._workloads import WorkloadError

__all__ = ["flash_attention_rate", "gemm_wave_efficiency"]

#: FLOPs of FlashAttention's backward per FLOP of its forward (it recomputes Q K^T):
#: 5 matmuls against 2 (Dao 2023, FlashAttention-2, section 4; the FA3 figures count so).
FA_BACKWARD_FLOPS = 2.5

_DIRECTIONS = ("forward", "backward")


def _chip(chip):
    try:
        return catalog.chip(chip) if isinstance(chip, str) else catalog.chip(chip.key)
    except (CatalogError, AttributeError):
        raise WorkloadError(
            f"chip must be a catalogue chip or its name (e.g. 'h100'), not {short(chip)}"
        ) from None


def _check_shape(shape) -> tuple[int, int, int]:
    if not isinstance(shape, tuple) or len(shape) != 3:
        raise WorkloadError(f"shape is a GEMM's (M, N, K), three whole numbers, not {short(shape)}")
    for x in shape:
        _whole("GEMM shape (M, N, K)", x)
    return tuple(int(x) for x in shape)


def _tiles() -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(v) for v in t) for t in catalog.table("gpu_gemm")["cta_tiles"].value)


def _wave_q(m: int, n: int, sms: int, tiles) -> float:
    best = 0.0
    for tm, tn in tiles:
        count = math.ceil(m / tm) * math.ceil(n / tn)
        waves = math.ceil(count / sms)
        best = max(best, m * n / (waves * sms * tm * tn))
    return best


@lru_cache(maxsize=4096)
def _quantization(chip_key: str, shape: tuple[int, int, int]) -> float | None:
    """q(shape) / q(ceiling's shape), at most 1; None for a chip without SMs and tiles."""
    chip = catalog.chip(chip_key)
    if chip.core is not None or "cores" not in chip.figures:
        return None
    sms = int(chip.figures["cores"].value)
    tiles = _tiles()
    q = _wave_q(shape[0], shape[1], sms, tiles)
    fig = chip.figures.get("stack_matmul_efficiency") or chip.figures.get("matmul_efficiency")
    ref = fig.extra.get("shape") if fig is not None else None
    q_ref = _wave_q(int(ref[0]), int(ref[1]), sms, tiles) if ref else 1.0
    return min(1.0, q / q_ref)


def gemm_wave_efficiency(chip, shape: tuple[int, int, int]) -> float:
    """Share of the chip's measured GEMM rate a GEMM of ``shape = (M, N, K)`` keeps after
    wave and tile quantization (NVIDIA's Matrix Multiplication Background guide).

    The planner applies it to GPUs without a measured GEMM table (the A100) and to formats a
    table does not cover (FP8); an H100's or B200's BF16 GEMMs run at their measured rates.

    ``q(M, N) = M N / (waves x SMs x tile area)`` for the catalogue tile (256 x 128 or
    128 x 256) that wastes least, divided by the same share at the shape where the chip's
    ceiling was measured, and held at 1 (no GEMM beats the measured ceiling). K does not
    enter: every tile loops over all of it.

    Parameters
    ----------
    chip : str or Chip
        A GPU of the catalogue with its SM count (``cores``), e.g. ``"h100"``, ``"a100"``.
    shape : tuple of int
        (M, N, K): the output is M x N.

    Returns
    -------
    float
        In (0, 1].

    Raises
    ------
    WorkloadError
        For a chip without an SM count in the catalogue (Neuron chips: their matmul rate
        comes from the NeuronCore model), or a shape that is not three whole numbers >= 1.
    """
    c = _chip(chip)
    shape = _check_shape(shape)
    q = _quantization(c.key, shape)
    if q is None:
        raise WorkloadError(
            f"{c.name} has no SM count and GEMM tile set in the catalogue, so its GEMMs are not "
            f"wave-quantized here"
            + (" (Neuron chips' matmul rate comes from the NeuronCore model)" if c.core else "")
            + "; GPUs with one: "
            + ", ".join(k.key for k in catalog.chips() if k.core is None and "cores" in k.figures)
        )
    return q


#: The measured tables' grid: M (with the batch of 2 and 4 read as M of 8,192 and 16,384), N, K.
_GRID_M = (256, 512, 1024, 2048, 4096, 8192, 16384)
_GRID_NK = (256, 512, 1024, 2048, 4096)


@lru_cache(maxsize=8)
def _rate_grid(table: str) -> tuple[dict[tuple[int, int, int], float], str, float]:
    """{(M, N, K): log of the share of peak} of one measured table, the chip it was measured
    on, and the FLOPs its peak does in the table's quickest kernel's time (a GEMM of fewer
    takes that long all the same)."""
    fig = catalog.table("gpu_gemm")[table]
    measured = catalog.chip(fig.extra["measured_on"])
    peak = measured.peak_flops("bf16")
    grid = {}
    for b, m, n, k, flops in fig.value:
        if b == 1 or m == 4096:  # batch 2 and 4 of M = 4096 stand for M = 8,192 and 16,384
            grid[(int(b) * int(m), int(n), int(k))] = math.log(float(flops) / peak)
    quickest = min(2 * b * m * n * k / flops for b, m, n, k, flops in fig.value)
    return grid, measured.key, quickest * peak


def _bracket(x: int, points: tuple[int, ...]) -> tuple[int, int, float]:
    """The two grid points around x and x's weight towards the upper one (log2), held at the
    ends."""
    x = min(max(x, points[0]), points[-1])
    for lo, hi in itertools.pairwise(points):
        if x <= hi:
            return lo, hi, (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    raise AssertionError("unreachable: x is held inside the grid")


@lru_cache(maxsize=4096)
def measured_gemm_share(chip_key: str, shape: tuple[int, int, int]) -> tuple[float, str] | None:
    """Share of the chip's dense BF16 peak a GEMM of ``shape = (M, N, K)`` runs at, read from
    the measured table the chip's ``gemm_rates`` figure names, and where it comes from; None
    for a chip without one. Log-linear in log2 of each dimension between the grid's points,
    held at its edges, and never quicker than the table's quickest kernel."""
    chip = catalog.chip(chip_key)
    fig = chip.figures.get("gemm_rates")
    if fig is None:
        return None
    grid, measured, floor_flops = _rate_grid(str(fig.value))
    (m0, m1, wm), (n0, n1, wn), (k0, k1, wk) = (
        _bracket(shape[0], _GRID_M),
        _bracket(shape[1], _GRID_NK),
        _bracket(shape[2], _GRID_NK),
    )
    log_share = 0.0
    for m, a in ((m0, 1 - wm), (m1, wm)):
        for n, b in ((n0, 1 - wn), (n1, wn)):
            for k, c in ((k0, 1 - wk), (k1, wk)):
                if a * b * c:
                    log_share += a * b * c * grid[(m, n, k)]
    # never quicker than the table's quickest kernel
    share = min(math.exp(log_share), 2 * shape[0] * shape[1] * shape[2] / floor_flops)
    whose = "" if measured == chip.key else f", the {catalog.chip(measured).name}'s"
    where = (
        f"{share:.1%} of peak at {shape[0]}x{shape[1]}x{shape[2]} (measured GEMM table"
        f"{whose}, {fig.sources[0].key})"
    )
    return share, where


def _interp(points, s: float) -> float:
    """Linear in log2(seq_len) between published points; the nearest end outside them."""
    pts = sorted((float(a), float(b)) for a, b in points)
    if s <= pts[0][0]:
        return pts[0][1]
    if s >= pts[-1][0]:
        return pts[-1][1]
    for (s0, r0), (s1, r1) in itertools.pairwise(pts):
        if s0 <= s <= s1:
            w = (math.log2(s) - math.log2(s0)) / (math.log2(s1) - math.log2(s0))
            return r0 + w * (r1 - r0)
    raise AssertionError("unreachable: the points cover s")


@lru_cache(maxsize=1024)
def _fa_rates(chip_key: str, dtype: str, seq_len: int, head_dim: int):
    """(forward, backward) FLOP/s of the chip's fused attention, or None without figures."""
    chip = catalog.chip(chip_key)
    fwd = chip.figures.get("flash_attention_forward")
    bwd = chip.figures.get("flash_attention_backward")
    if fwd is None or bwd is None or dtype not in ("bf16", "fp16"):
        return None
    if (
        int(fwd.extra.get("head_dim", 0)) != head_dim
        or int(bwd.extra.get("head_dim", 0)) != head_dim
    ):
        return None
    return _interp(fwd.value, seq_len), _interp(bwd.value, seq_len)


def flash_attention_rate(
    chip, seq_len: int, head_dim: int = 128, direction: str = "forward", dtype: str = "bf16"
) -> tuple[float, str]:
    """FLOP/s of the chip's fused (FlashAttention-style) attention kernel, and its source.

    The rate counts the FLOPs the kernel does: with a causal mask, half of 4 s^2 d per head
    forward, and 2.5x that backward (:data:`FA_BACKWARD_FLOPS`). Between published sequence
    lengths the rate is linear in log2(seq_len); outside them, the nearest published value.

    Parameters
    ----------
    chip : str or Chip
        A chip with measured fused-attention rates in the catalogue (``"h100"``).
    seq_len : int
        Keys each query attends to.
    head_dim : int
        Per-head width; only the published head dimension is accepted.
    direction : {"forward", "backward"}
    dtype : str
        Data type of the attention matmuls (the figures are BF16/FP16).

    Raises
    ------
    WorkloadError
        For a chip, head dimension or data type without published figures, a sequence
        length or head dimension that is not a whole number >= 1, an unknown direction.
    """
    c = _chip(chip)
    _whole("sequence length", seq_len)
    _whole("head dimension", head_dim)
    if not isinstance(direction, str) or direction.strip().lower() not in _DIRECTIONS:
        raise WorkloadError(f"direction is 'forward' or 'backward', not {short(direction)}")
    direction = direction.strip().lower()
    try:
        dt = catalog.dtype_name(dtype)
    except CatalogError as err:
        raise WorkloadError(str(err)) from None
    fig = c.figures.get(f"flash_attention_{direction}")
    if fig is None:
        have = [k.key for k in catalog.chips() if "flash_attention_forward" in k.figures]
        raise WorkloadError(
            f"{c.name} has no published fused-attention rate in the catalogue; chips with one: "
            f"{', '.join(have)}. The planner runs its attention at the GEMM rate instead"
        )
    if dt not in ("bf16", "fp16"):
        raise WorkloadError(
            f"the fused-attention rates of {c.name} are BF16/FP16 measurements, not {dt}"
        )
    hd = int(fig.extra.get("head_dim", 0))
    if int(head_dim) != hd:
        raise WorkloadError(
            f"the fused-attention rate of {c.name} is published for head dimension {hd}, not "
            f"{head_dim}; the planner runs other head dimensions at the GEMM rate"
        )
    rates = _fa_rates(c.key, dt, int(seq_len), hd)
    value = rates[_DIRECTIONS.index(direction)]
    where = f"{fig.extra.get('kernel', 'fused attention')}, head dim {hd} ({fig.sources[0].key})"
    return value, where
