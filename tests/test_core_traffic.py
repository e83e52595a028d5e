"""Where bytes and time go (trnlab.core._traffic), against counts worked out by hand for the
tiled matmul, and the per-element pass count of fused and unfused epilogues."""

from __future__ import annotations

import numpy as np
import pytest

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core, kernels

M, K, N = 256, 384, 1024


@pytest.fixture(scope="module")
def tiled():
    return kernels.matmul((M, K), (K, N), variant="tiled", numerics=False)


def test_hbm_traffic_of_the_tiled_matmul(tiled):
    t = core.hbm_traffic(tiled)
    # bf16: A is loaded once per N tile (N / 512 = 2 times), B once per M tile (M / 128 = 2)
    assert t["a_t"] == {
        "size": M * K * 2,
        "loaded": 2 * M * K * 2,
        "stored": 0,
        "loads": 2 * 2 * 3,
        "stores": 0,
    }
    assert t["b"]["loaded"] == 2 * K * N * 2 and t["b"]["loads"] == 12
    assert t["c"]["stored"] == M * N * 2 and t["c"]["stores"] == 4 and t["c"]["loaded"] == 0


def test_traffic_arrows_of_the_tiled_matmul(tiled):
    f = core.traffic(tiled)
    matmuls = (M // 128) * (N // 512) * (K // 128)
    assert f["HBM", "SBUF"] == 2 * M * K * 2 + 2 * K * N * 2
    # each matmul streams a [128, 128] and a [128, 512] bf16 tile and writes 128 x 512 fp32
    assert f["SBUF", "Tensor"] == matmuls * (128 * 128 + 128 * 512) * 2
    assert f["Tensor", "PSUM"] == matmuls * 128 * 512 * 4
    # one copy per output tile: fp32 out of PSUM, bf16 into SBUF, then stored
    assert f["PSUM", "Vector"] == M * N * 4 and f["Vector", "SBUF"] == M * N * 2
    assert f["SBUF", "HBM"] == M * N * 2
    order = list(f)
    assert order[0] == ("HBM", "SBUF") and order[-1] == ("SBUF", "HBM")


def test_time_breakdown_names_the_busiest_queue_and_its_tensors(tiled):
    rows = core.time_breakdown(tiled)
    assert rows == sorted(rows, key=lambda r: -r["busy_s"])
    top = rows[0]
    # on trn1 every load of a kernel goes on one static queue (compiler_load_queues = 1)
    assert top["resource"] == "DMA q0" and sorted(top["tensors"]) == ["a_t", "b"]
    assert 0.8 < top["fraction"] <= 1.0 + 1e-9
    tensor = next(r for r in rows if r["resource"] == "Tensor")
    assert tensor["instructions"] == (M // 128) * (N // 512) * (K // 128)
    assert sum(r["instructions"] for r in rows) == len(tiled.program)


@nki.jit
def _layer(w, x_t, bias, two_pass=False):
    N = w.shape[1]
    M = x_t.shape[1]
    y_t = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nl.load(bias)
    wt = nl.load(w)
    for m0 in range(0, M, 128):
        x = nl.load(x_t[:, m0 : m0 + 128])
        acc = nl.ndarray((N, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=wt, moving=x)
        y = nl.ndarray((N, 128), dtype=nl.float32, buffer=nl.sbuf)
        if two_pass and m0 == 0:
            nisa.activation(dst=y, op=nl.identity, data=acc, bias=b)
            nisa.activation(dst=y, op=nl.relu, data=y)
        else:
            nisa.activation(dst=y, op=nl.relu, data=acc, bias=b)
        nl.store(y_t[:, m0 : m0 + 128], y)
    return y_t


def test_element_passes_per_element():
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (64, 384), (32, 1))]
    fused = nki.profile(_layer, chip="trn1")(*args)
    e = core.element_passes(fused, "y_t")
    assert (e["passes"] == 1).all() and (e["stores"] == 1).all() and (e["loads"] == 0).all()
    mixed = nki.profile(_layer, chip="trn1")(*args, two_pass=True)
    p = core.element_passes(mixed, "y_t")["passes"]
    assert (p[:, :128] == 2).all() and (p[:, 128:] == 1).all()
    with pytest.raises(KeyError, match="Choose from: w, x_t, bias, y_t"):
        core.element_passes(mixed, "nope")
