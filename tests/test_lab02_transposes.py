"""Lab 02's section on moving values across partitions: the three ways it compares and the
streaming-time exercise, against the catalogue's figures."""

from __future__ import annotations

import pytest

from trnlab.core import core_params
from trnlab.exercises import lab02


def test_the_dma_transpose_streams_the_block_at_the_guides_share():
    seq, d = lab02.TRANSPOSE
    p = core_params("trn2")
    stream_us = seq * d * 2 / (0.9 * 368e9) * 1e6  # the question's own figures
    assert lab02.transpose_us.reference() == pytest.approx(stream_us, rel=1e-3)
    assert p.dma_bandwidth == pytest.approx(368e9)  # the figure the question quotes
    ways = {w["way"]: w for w in lab02.transpose_ways()}
    dma = ways["trn2, DMA transpose"]
    assert dma["instructions"] == 1
    # the model's time is that streaming plus one transfer's fixed costs (a couple of us)
    assert stream_us < dma["latency_us"] < stream_us + 2.0


def test_the_tensor_engine_path_moves_128_rows_at_a_time_and_loses_to_the_dma():
    ways = {w["way"]: w for w in lab02.transpose_ways()}
    blocks = lab02.TRANSPOSE[0] // 128
    for chip in ("trn1", "trn2"):
        te = ways[f"{chip}, Tensor Engine"]
        assert te["instructions"] == 3 * blocks  # a load, a transpose, a copy per block
        assert te["busy"]["DMA"] > 0.8  # its small loads, not the transpose, set its time
    assert (
        ways["trn2, DMA transpose"]["latency_us"] < 0.3 * ways["trn2, Tensor Engine"]["latency_us"]
    )


@pytest.mark.parametrize("shape", [(2000, 128), (2048, 256), (2048, 0)])
def test_a_block_the_comparison_cannot_move_is_refused_with_why(shape):
    with pytest.raises(ValueError, match=r"multiple of 128.*at most 128"):
        lab02.transpose_ways(shape)
