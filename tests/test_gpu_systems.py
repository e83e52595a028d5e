"""GPU systems in the catalogue, through the same fabric and planner as Trainium systems."""

from __future__ import annotations

import pytest

from trnlab import catalog, fabric, scale

GPU_SYSTEMS = [
    # (key, chips, chip, NVLink figure per GPU both ways, what NCCL achieves per direction,
    #  scale-out bit/s). NCCL's maintainer: ~230 GB/s on A100 (nccl-tests #149), 370 of
    #  450 GB/s on H100 (#212); NVLink 5 is read with NVLink 4's share (an assumption).
    ("dgx-a100", 8, "a100", 600e9, 230e9, 1.6e12),
    ("p5.48xlarge", 8, "h100", 900e9, 370e9, 3.2e12),
    ("p5en.48xlarge", 8, "h200", 900e9, 370e9, 3.2e12),
    ("p6-b200.48xlarge", 8, "b200", 1.8e12, 900e9 * 370 / 450, 3.2e12),
    ("gb200-nvl72", 72, "gb200", 1.8e12, 900e9 * 370 / 450, None),
]


@pytest.mark.parametrize(("key", "chips", "chip", "nvlink", "achieved", "net"), GPU_SYSTEMS)
def test_gpu_systems_are_switched_domains_with_sourced_figures(
    key, chips, chip, nvlink, achieved, net
):
    s = catalog.system(key)
    assert s.chips == chips and s.chip.key == chip and s.chip.kind == "gpu"
    t = fabric.topology(s)
    assert t.kind == "switch" and t.chips == chips
    # one port, each way, at the share of the line rate NCCL reaches
    assert t.axis_bandwidth[0] == pytest.approx(achieved, rel=2e-3)
    assert achieved < nvlink / 2
    assert s.network_bandwidth == net
    for fig in (s.figures["chips"], s.chip.figures["hbm_bandwidth"]):
        assert fig.sources  # every figure names its source
    assert any("assumed for NCCL" in n for n in t.notes)


def test_gb200_rack_totals_follow_from_the_per_gpu_figures():
    rows = {c.figure: c for c in catalog.system("gb200-nvl72").compare()}
    assert rows["fp8_sparse_flops"].agrees and rows["hbm_bandwidth"].agrees
    # NVIDIA's 720 PFLOPS is a sparse figure: 72 GPUs x 5 PF dense x 2 (2:4), and is compared
    # as one (a dense total printed as "720 PFLOPS" would not agree with 360 PF)
    assert rows["fp8_sparse_flops"].published == rows["fp8_sparse_flops"].computed == 720e15
    assert catalog.system("gb200-nvl72").peak_flops("fp8") == 360e15
    # the per-GPU peak is disputed: NVIDIA's rack figure halved, or a per-GPU table
    assert catalog.chip("gb200").peak_figure("bf16").disputed


def test_gpu_matmul_rate_is_the_measured_ceiling_or_the_memory_roofline():
    peak = catalog.chip("h100").peak_flops("bf16")
    big, where = scale.achieved_flops_per_chip("h100", "bf16")
    assert big == pytest.approx(0.801 * peak) and "MAMF" in where
    # a decode GEMM (one token): 2 M N K / (2 (MK + KN + MN)) FLOP per byte at 3.35 TB/s
    M, N, K = 1, 28672, 8192
    thin, _ = scale.achieved_flops_per_chip("h100", "bf16", (M, N, K))
    assert thin == pytest.approx(2 * M * N * K / (2 * (M * K + K * N + M * N)) * 3.35e12)
    # the A100 runs at the GEMM rate measured on the 2022 stack of its Megatron-era runs
    # (230 TFLOPS, mli/transformers-benchmarks); the 2024 MAMF stays as its ceiling
    a100, where = scale.achieved_flops_per_chip("a100", "bf16")
    assert a100 == pytest.approx(230e12, rel=2e-3) and "measured GEMM" in where
    mamf = catalog.chip("a100").figures["matmul_efficiency"].value
    assert a100 < mamf * catalog.chip("a100").peak_flops("bf16")


def test_the_planner_runs_gpu_clusters_like_any_system():
    c = catalog.cluster("p5.48xlarge", 8)
    r = scale.plan("llama3-8b", c, scale.Parallelism(tp=8, dp=8, zero=1), global_batch=64,
                   seq_len=4096)  # fmt: skip
    assert r.feasible and 0 < r.mfu < 1
    assert r.price_per_chip_hour == pytest.approx(55.04 / 8)
    found = scale.search("llama3-8b", catalog.cluster("p5en.48xlarge", 2), global_batch=64,
                         seq_len=4096)  # fmt: skip
    assert found.best is not None
    with pytest.raises(fabric.FabricError, match="no EFA bandwidth"):
        fabric.topology(catalog.cluster("gb200-nvl72", 2))


@pytest.mark.parametrize(
    ("system", "encoding", "has"),
    [
        ("trn2.48xlarge", "fp8_e4m3fn", False),  # OCP E4M3FN arrives with NeuronCore-v4
        ("trn2.48xlarge", "fp8_e4m3", True),  # the IEEE-like E4M3 (max 240)
        ("trn3-ultraserver-gen1", "fp8_e4m3fn", True),
        ("p5.48xlarge", "fp8_e4m3", False),  # CUDA's E4M3 is OCP's
        ("p5.48xlarge", "fp8_e4m3fn", True),
    ],
)
def test_an_fp8_encoding_runs_at_the_fp8_rate_only_where_the_chip_has_it(system, encoding, has):
    sysobj = catalog.system(system)
    n = sysobj.chips

    def run():
        return scale.plan("llama3-8b", system, scale.Parallelism(dp=n), global_batch=4 * n,
                          seq_len=2048, dtype=encoding)  # fmt: skip

    def serve():
        return scale.inference("llama3-8b", system, batch=1, prompt=128, output=16,
                               weight_format=encoding)  # fmt: skip

    if has:
        assert run().step_time > 0 and serve().tpot > 0
        assert sysobj.chip.matmul_dtype(encoding) == "fp8"
    else:
        for call in (run, serve, lambda: sysobj.chip.matmul_dtype(encoding)):
            with pytest.raises(ValueError, match=f"no {encoding} matmul: its matrix units take"):
                call()
