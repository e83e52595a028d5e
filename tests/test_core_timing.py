"""The NeuronCore timing rules, one test per rule, each built from the figure it rests on.

Expected times are computed here from the catalogue figures (the documented rule or the
measurement) with the rule's own formula, never read back from the scheduler's output; the
property tests check what must hold for any program (dependencies, engine occupancy, the
roofline bound). The whole-kernel comparison with published hardware times is
tests/test_fidelity.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trnlab import catalog, core
from trnlab.core import _program as P


def _run(kernel, chip="trn1", **args):
    return core.run(kernel, chip=chip, numerics=False, **args)


def _x(shape=(128, 512), fmt="bf16"):
    return core.hbm(shape, fmt, is_input=True)


# --- Tensor Engine -----------------------------------------------------------------------------


def _two_matmuls(fmt, n, same_stationary):
    def k(ctx, x):
        a = ctx.sbuf((128, 256), fmt)
        b = ctx.sbuf((128, n), fmt)
        ctx.load(a, x[:, :256])
        ctx.load(b, x[:, :n])
        p0 = ctx.psum((128, n))
        p1 = ctx.psum((128, n))
        ctx.matmul(p0, a[:, :128], b)
        ctx.matmul(p1, a[:, :128] if same_stationary else a[:, 128:], b)

    return k


@pytest.mark.parametrize(
    ("chip", "fmt", "n"),
    [
        ("trn1", "bf16", 512),
        ("trn1", "bf16", 16),
        ("trn1", "fp32", 512),
        ("trn2", "fp8_e4m3", 512),
        ("trn1", "fp8_e4m3", 512),
        ("trn3", "mxfp8_e4m3", 512),
    ],
)
def test_matmul_issue_interval_is_max_n_64_over_the_rate(chip, fmt, n):
    """ISA: a MultiplyMoving costs max(N, min(64, M)) cycles; fp32 x4, fp8 x1/2 on v3, MX x1/4."""
    p = core.core_params(chip)
    rate = p.tensor_rate[catalog.dtype_name(fmt) if not fmt.startswith("mx") else "mxfp8"]
    r = _run(_two_matmuls(fmt, n, True), chip=chip, x=_x((128, 512), fmt))
    mm = np.flatnonzero(r.program.table["op"] == P.MATMUL)
    busy = (r.issue_end - r.start)[mm] * p.tensor_clock
    expect = max(n, min(p.matmul_min_cycles, 128)) / rate
    assert busy == pytest.approx([expect, expect])
    # the second matmul issues right behind the first (no reload, same engine)
    assert r.start[mm[1]] == pytest.approx(r.issue_end[mm[0]])


def test_background_load_stationary_hides_behind_the_previous_matmul():
    """Arch guide: the next stationary loads while the current matmul streams; only the first
    LoadStationary (nothing to hide behind) is charged, M / fast_weight_load cycles."""
    p = core.core_params("trn1")
    r = _run(_two_matmuls("bf16", 512, False), x=_x())
    t = r.program.table
    mm = np.flatnonzero(t["op"] == P.MATMUL)
    assert t["reload"][mm].tolist() == [1, 1]
    ls = math.ceil(128 / p.fast_weight_load) / p.tensor_clock
    loads_done = r.end[: mm[0]].max()
    assert r.start[mm[0]] == pytest.approx(loads_done + ls)  # first: load, then multiply
    assert r.start[mm[1]] == pytest.approx(r.issue_end[mm[0]])  # second: loaded meanwhile


def test_matmul_result_latency_and_psum_accumulation():
    """MEAS (perf guide): a bf16 MultiplyMoving of N = 128 lasts 219 ns to its result; matmuls
    accumulating into one PSUM bank pipeline back to back; the copy out waits for the result."""
    p = core.core_params("trn1")

    def k(ctx, x):
        a = ctx.sbuf((128, 128), "bf16")
        b = ctx.sbuf((128, 128), "bf16")
        ctx.load(a, x[:, :128])
        ctx.load(b, x[:, :128])
        ps = ctx.psum((128, 128))
        ctx.matmul(ps, a, b)
        ctx.matmul(ps, a, b, accumulate=True)
        ctx.copy(ctx.sbuf((128, 128), "fp32"), ps)

    r = _run(k, x=_x())
    i0, i1, cp = 2, 3, 4
    assert r.end[i0] - r.start[i0] == pytest.approx(219e-9, rel=0.01)
    assert r.start[i1] == pytest.approx(r.issue_end[i0])
    assert r.start[cp] == pytest.approx(r.end[i1] + p.engine_sync_latency)


# --- Vector, Scalar, GpSimd ------------------------------------------------------------------


def _engine_pair(op, free, fmt="fp32", dependent=True, psum=False):
    def k(ctx, x):
        a = ctx.sbuf((128, free), fmt)
        ctx.load(a, x[:, :free])
        src = a
        if psum:
            st = ctx.sbuf((128, 128), fmt)
            ctx.load(st, x[:, :128])
            src = ctx.psum((128, free))
            ctx.matmul(src, st, a)
        o1 = ctx.sbuf((128, free), fmt)
        o2 = ctx.sbuf((128, free), fmt)
        if op == "tensor_tensor":
            ctx.tensor_tensor(o1, src, a, "multiply")
            ctx.tensor_tensor(o2, o1 if dependent else a, a, "multiply")
        elif op == "tensor_scalar":
            ctx.tensor_scalar(o1, src, "add", 1.0)
            ctx.tensor_scalar(o2, o1 if dependent else a, "add", 1.0)
        else:
            ctx.activation(o1, src, "identity")
            ctx.activation(o2, o1 if dependent else a, "identity")

    return k


def test_vector_tensor_tensor_duration_is_the_measured_one():
    """MEAS (perf guide fig. 10): fp32 tensor_tensor, 8192 elements per partition: 14,987 ns."""
    r = _run(_engine_pair("tensor_tensor", 8192, dependent=True), x=_x((128, 8192), "fp32"))
    assert r.end[1] - r.start[1] == pytest.approx(14_987e-9, rel=0.01)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_vector_issue_interval_and_dependent_latency(chip):
    """ISA: tensor_tensor 2N cycles (fp32, both in SBUF) plus the ~100-cycle static overhead to
    issue; a dependent instruction waits for the result, work + vector_latency_cycles later."""
    p = core.core_params(chip)
    n = 1024
    indep = _run(_engine_pair("tensor_tensor", n, dependent=False), chip, x=_x((128, n), "fp32"))
    dep = _run(_engine_pair("tensor_tensor", n, dependent=True), chip, x=_x((128, n), "fp32"))
    issue = (2 * n + p.vector_static_cycles) / p.vector_clock
    result = (2 * n + p.vector_latency_cycles) / p.vector_clock
    assert indep.start[2] - indep.start[1] == pytest.approx(issue)
    assert dep.start[2] - dep.start[1] == pytest.approx(result)


@pytest.mark.parametrize(
    ("op", "fmt", "psum", "speedup"),
    [
        ("tensor_scalar", "bf16", False, 4),  # 4x: SBUF in and out, 16-bit
        ("tensor_scalar", "bf16", True, 1),  # PSUM holds fp32 here: no 16-bit mode
        ("tensor_tensor", "bf16", False, 2),  # 2x: both SBUF, all 16-bit
        ("tensor_scalar", "fp32", False, 1),  # no mode for 32-bit data
    ],
)
def test_vector_performance_modes_on_neuroncore_v3(op, fmt, psum, speedup):
    """Trn2 arch guide: VectorE's performance mode for 16-bit data (4x or 2x by case)."""

    def work(chip):
        r = _run(
            _engine_pair(op, 512, fmt, dependent=False, psum=psum), chip, x=_x((128, 512), fmt)
        )
        vec = np.flatnonzero(r.program.table["engine"] == P.VECTOR)
        p = r.params
        return (r.issue_end - r.start)[vec[0]] * p.vector_clock - p.vector_static_cycles

    assert work("trn1") / work("trn2") == pytest.approx(speedup)


def test_scalar_dependent_chain_is_the_measured_264_cycles():
    """MEAS (perf guide): dependent one-element activations start every 189 ns on NeuronCore-v2."""
    r = _run(_engine_pair("activation", 1, dependent=True), x=_x((128, 128), "fp32"))
    assert r.start[2] - r.start[1] == pytest.approx(189e-9, rel=0.01)


def test_scalar_table_load_only_when_the_function_changes():
    """MEAS (profiling tutorial): ACT_TABLE_LOAD 368 ns, before a function the engine did not
    use last; identity needs no table."""
    p = core.core_params("trn1")

    def k(ctx, x):
        a = ctx.sbuf((128, 512), "fp32")
        ctx.load(a, x)
        for f in ("exp", "exp", "tanh", "identity", "tanh"):
            ctx.activation(ctx.sbuf((128, 512), "fp32"), a, f)

    r = _run(k, x=_x((128, 512), "fp32"))
    busy = (r.issue_end - r.start)[1:] * p.scalar_clock
    base = 512 + p.scalar_static_cycles
    loads = np.round((busy - base) / (p.act_table_load * p.scalar_clock)).tolist()
    assert loads == [1, 0, 1, 0, 0]


def test_gpsimd_start_plus_width():
    """ISA: GpSimd instructions cost GPSIMD_START (150) + the data over 8 x 512-bit cores."""
    p = core.core_params("trn1")

    def k(ctx, x):
        a = ctx.sbuf((128, 1024), "fp32")
        ctx.load(a, x)
        ctx.gpsimd(ctx.sbuf((128, 1024), "fp32"), a, op="relu")

    r = _run(k, x=_x((128, 1024), "fp32"))
    cycles = p.gpsimd_start_cycles + 128 * 1024 * 32 / (p.gpsimd_cores * p.gpsimd_core_bits)
    assert r.issue_end[1] - r.start[1] == pytest.approx(cycles / p.gpsimd_clock)


def test_v2_engines_share_ports_and_v3_does_not():
    """Arch guide: on NeuronCore-v2, Vector and GpSimd cannot access SBUF at once."""

    def k(ctx, x):
        a = ctx.sbuf((128, 2048), "fp32")
        ctx.load(a, x)
        ctx.tensor_scalar(ctx.sbuf((128, 2048), "fp32"), a, "add", 1.0)
        ctx.gpsimd(ctx.sbuf((128, 2048), "fp32"), a, op="relu")

    def overlapped(chip):
        r = _run(k, chip, x=_x((128, 2048), "fp32"))
        return r.start[2] < r.issue_end[1] and r.start[1] < r.issue_end[2]

    assert not overlapped("trn1")
    assert overlapped("trn2")


# --- DMA ---------------------------------------------------------------------------------------


def _loads(chip, shapes, queues=None, dge="none", fmt="bf16"):
    def k(ctx, x):
        for i, (p0, parts, free) in enumerate(shapes):
            t = ctx.sbuf((128, free), fmt)
            q = None if queues is None else queues[i]
            ctx.load(t[p0 : p0 + parts, :], x[p0 : p0 + parts, :free], queue=q, dge=dge)

    return _run(k, chip, x=_x((128, max(s[2] for s in shapes)), fmt))


@pytest.mark.parametrize(("chip", "parts", "free", "measured"), [("trn2", 4, 4096, 1416e-9)])
def test_one_engine_moves_a_small_transfer_at_its_streaming_rate(chip, parts, free, measured):
    """MEAS (DMA overview): A[4, 4096] bf16 is one engine's 32 KiB, 1,416 ns on Trn2; the
    engine streams at dma_bandwidth / dma_engines (23 B/ns)."""
    p = core.core_params(chip)
    r = _loads(chip, [(0, parts, free)])
    data = r.issue_end[0] - r.start[0] - p.dma_queue_interval
    assert data == pytest.approx(parts * free * 2 / p.dma_engine_bandwidth)
    assert data == pytest.approx(measured, rel=0.05)


def test_partitions_decide_the_engines():
    """DMA overview: each engine serves 8 partitions; transfers on different partitions run on
    different engines in parallel, on the same partitions they queue behind each other."""
    p = core.core_params("trn1")
    row = 4096 * 2 / p.dma_engine_bandwidth
    apart = _loads("trn1", [(0, 8, 4096), (8, 8, 4096)], queues=[0, 1])
    same = _loads("trn1", [(0, 8, 4096), (0, 8, 4096)], queues=[0, 1])
    setup = p.dma_queue_interval
    assert apart.issue_end.max() == pytest.approx(setup + 8 * row)
    assert same.issue_end.max() == pytest.approx(setup + 16 * row)


def test_a_queue_sets_up_one_transfer_at_a_time_and_completes_in_order():
    """A queue's set-up (dma_queue_interval) is serial; set-ups on two queues overlap; the
    consumer sees a transfer dma_completion_latency after its last byte."""
    p = core.core_params("trn2")
    one = _loads("trn2", [(0, 128, 64), (0, 128, 64)], queues=[0, 0])
    two = _loads("trn2", [(0, 128, 64), (0, 128, 64)], queues=[0, 1])
    s = p.dma_queue_interval
    assert one.start[1] == pytest.approx(one.start[0] + s)
    assert two.start[1] == pytest.approx(two.start[0])
    assert one.end[0] == pytest.approx(one.issue_end[0] + p.dma_completion_latency)
    assert (np.diff(one.end) >= 0).all()


def test_hardware_dge_costs_600_ns_per_dma_and_trn1_has_none():
    """DGE reference: ~600 ns per hardware-DGE DMA instruction on NeuronCore-v3; v2 has none."""
    p = core.core_params("trn2")
    r = _loads("trn2", [(0, 128, 64), (0, 128, 64)], queues=[0, 1], dge="hw")
    assert r.start[1] == pytest.approx(r.start[0] + p.dge_instruction_time)
    with pytest.raises(core.HardwareRuleError, match="no hardware DGE"):
        _loads("trn1", [(0, 128, 64)], dge="hw")
    with pytest.raises(core.KernelArgumentError, match="dge must be one of"):
        _loads("trn2", [(0, 128, 64)], dge="fast")


def test_software_dge_descriptors_keep_gpsimd_busy_and_show_in_the_summary():
    """Software DGE: GpSimd writes each transfer's descriptors (swdge_gpsimd_time) before
    the queue sets it up; that work is GpSimd's, in its busy share and the summary."""
    p = core.core_params("trn2")
    shapes = [(0, 128, 64)] * 3
    sw = _loads("trn2", shapes, queues=[0, 1, 0], dge="sw")
    static = _loads("trn2", shapes, queues=[0, 1, 0], dge="none")
    assert static.busy["GpSimd"] == 0.0
    assert sw.busy["GpSimd"] * sw.latency == pytest.approx(3 * p.swdge_gpsimd_time)
    assert sw.start[1] >= sw.start[0] + p.swdge_gpsimd_time  # one GpSimd writes them in turn
    assert "with the descriptors of 3 software-DGE transfers" in sw.summary()
    assert "software-DGE" not in static.summary()


def test_a_static_queue_streams_at_its_own_rate_on_trn1():
    """FIG (profiling tutorial, Trn1): a [128, 512] fp32 load on a static queue lasts 2.57 us
    (102 GB/s) where its 16 engines alone would take under 1 us. Two such loads on one queue
    stream one after the other; on two queues they stream side by side; software-DGE loads are
    not held to the static queue's rate."""
    p = core.core_params("trn1")
    stream = 128 * 512 * 4 / p.dma_static_queue_bandwidth
    engines = 8 * 512 * 4 / p.dma_engine_bandwidth
    assert stream == pytest.approx(2.57e-6, rel=0.02) and engines < 1e-6
    one = _loads("trn1", [(0, 128, 512)], fmt="fp32")
    assert one.issue_end[0] - one.start[0] == pytest.approx(p.dma_queue_interval + stream)
    same = _loads("trn1", [(0, 128, 512), (0, 128, 512)], queues=[0, 0], fmt="fp32")
    apart = _loads("trn1", [(0, 128, 512), (0, 128, 512)], queues=[0, 1], fmt="fp32")
    assert same.issue_end.max() == pytest.approx(p.dma_queue_interval + 2 * stream)
    assert apart.issue_end.max() == pytest.approx(p.dma_queue_interval + stream)
    sw = _loads("trn1", [(0, 128, 512)], dge="sw", fmt="fp32")
    assert sw.issue_end[0] - sw.start[0] < p.swdge_gpsimd_time + p.dma_queue_interval + stream


def test_a_trn2_queue_streams_as_fast_as_its_engines():
    """FIG (DMA overview): one Trn2 queue reaches the engines' 368 GB/s; its static queues
    add no limit of their own."""
    p = core.core_params("trn2")
    assert p.dma_static_queue_bandwidth == pytest.approx(p.dma_bandwidth)
    r = _loads("trn2", [(0, 128, 4096)])
    data = r.issue_end[0] - r.start[0] - p.dma_queue_interval
    assert data == pytest.approx(8 * 4096 * 2 / p.dma_engine_bandwidth)


def test_trn1_kernels_load_on_one_queue_and_trn2_kernels_on_a_queue_per_tensor():
    """FIG (Trn1 profiles: the Fused Mamba tutorial's u and delta loads, the performance
    guide's semaphore): every load of a Trn1 kernel on qSyncIO0; stores on the last queue.
    Trn2 keeps a queue per HBM tensor (an assumption)."""

    def k(ctx, a, b, c):
        ta, tb = ctx.sbuf((128, 64), "bf16"), ctx.sbuf((128, 64), "bf16")
        ctx.load(ta, a)
        ctx.load(tb, b)
        ctx.store(c, ta)

    def engines(chip):
        r = _run(k, chip, a=_x((128, 64)), b=_x((128, 64)), c=core.hbm((128, 64), "bf16"))
        return [int(e) - P.FIRST_DMA for e in r.program.table["engine"]]

    last = core.core_params("trn1").dma_engines - 1
    assert core.core_params("trn1").compiler_load_queues == 1
    assert engines("trn1") == [0, 0, last]
    a, b, store = engines("trn2")
    assert a != b and last not in (a, b) and store == last


def test_compiled_graphs_get_software_descriptors():
    """The planner's kernels stand for compiled graphs: software DGE on every generation
    (an assumption on Trn1, where NKI kernels' loads keep static descriptors)."""
    trn1 = core.core_params("trn1")
    graph = trn1.compiled_graph()
    assert trn1.dma_default_dge == "none" and graph.dma_default_dge == "sw"
    assert "compiled_graph_dge" in trn1.assumptions
    trn2 = core.core_params("trn2")
    assert trn2.compiled_graph() is trn2


def test_the_dma_curve_knee_comes_from_the_queue_interval():
    """FIG (DMA overview): throughput of [128, b] transfers on one queue doubles with b up to
    the knee; the model's knee is where a transfer's data time equals the set-up interval."""
    from trnlab.kernels import fidelity

    curve = catalog.measurements()["calibration"]["dma_curve"]
    sizes = curve["bytes_per_partition"]
    model = fidelity._dma_curve("trn2", sizes)
    for b, pub, m in zip(sizes, curve["relative_throughput"], model, strict=True):
        if b >= curve["compare_from"]:
            assert m == pytest.approx(pub, rel=0.10), b


# --- launch, sync, overrides -----------------------------------------------------------------


def test_launch_overhead_is_reported_apart():
    p = core.core_params("trn1")
    r = _loads("trn1", [(0, 128, 64)])
    assert r.total_latency == pytest.approx(r.latency + p.launch_preamble + p.launch_postamble)
    assert "launch overhead" in r.summary()
    assert "compiler_rotating_buffers" in r.describe()


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("dma_queue_interval", -1e-6),
        ("dma_queue_interval", float("nan")),
        ("dma_queue_interval", "fast"),
        ("tensor_clock", 0),
        ("dma_engines", 0),
        ("dma_engines", 2.5),
        ("compiler_rotating_buffers", 0),
        ("compiler_schedule_window", -3),
        ("vector_gpsimd_share_sbuf", 1),
        ("dma_default_dge", "quick"),
        ("dge_instances", -1),
        ("dma_static_queue_bandwidth", 0),
        ("dma_static_queue_bandwidth", float("nan")),
        ("dma_static_queue_bandwidth", "fast"),
        ("compiler_load_queues", 0),
        ("compiled_graph_dge", "static"),
    ],
)
def test_bad_overrides_are_refused_with_the_figure_and_its_range(name, bad):
    with pytest.raises(core.KernelArgumentError, match=rf"figure '{name}' must be"):
        core.core_params("trn2", **{name: bad})


def test_program_order_is_a_what_if():
    """compiler_schedule_window = 1 runs every engine in program order (never faster here)."""
    from trnlab import kernels

    args = dict(m=256, k=512, n=1024)
    shapes = (args["m"], args["k"]), (args["k"], args["n"])
    free = kernels.matmul(*shapes, variant="tiled", chip="trn2", numerics=False)
    strict = kernels.matmul(
        *shapes,
        variant="tiled",
        chip=core.core_params("trn2", compiler_schedule_window=1),
        numerics=False,
    )
    assert strict.latency >= free.latency
    t = strict.program.table
    for e in range(4):
        sel = np.flatnonzero(t["engine"] == e)
        assert (np.diff(strict.start[sel]) >= 0).all()


# --- properties of every schedule --------------------------------------------------------------

_OPS = ["load_a", "load_b", "matmul", "evacuate", "store", "act", "gpsimd", "scan", "piece"]
_OPS += ["slow_read", "read"]  # reads into rotating outputs: a later one can overtake


def _random_kernel(steps):
    def k(ctx, x, y):
        a = [ctx.sbuf((128, 128), "bf16", f"a{i}") for i in range(2)]
        b = [ctx.sbuf((128, 512), "bf16", f"b{i}") for i in range(2)]
        ps = [ctx.psum((128, 512), f"p{i}") for i in range(2)]
        o = [ctx.sbuf((128, 512), "bf16", f"o{i}") for i in range(2)]
        for t in (*a, *b):
            ctx.load(t, x[:, : t.shape[1]])
        ctx.matmul(ps[0], a[0], b[0])
        ctx.matmul(ps[1], a[1], b[1])
        ctx.copy(o[0], ps[0])
        ctx.copy(o[1], ps[1])
        rot = ctx.sbuf((128, 512), "bf16", "rot", bufs=4)
        z = ctx.sbuf((128, 512), "bf16", "z")
        for op, i, q in steps:
            if op == "load_a":
                ctx.load(a[i], x[:, :128], queue=q)
            elif op == "load_b":
                ctx.load(b[i], x, queue=q)
            elif op == "matmul":
                ctx.matmul(ps[i], a[i], b[1 - i], accumulate=bool(q % 2))
            elif op == "evacuate":
                ctx.copy(o[i], ps[i], engine=("vector", "scalar")[q % 2])
            elif op == "store":
                ctx.store(y, o[i], queue=q)
            elif op == "act":
                ctx.activation(o[i], o[1 - i], ("relu", "exp")[q % 2])
            elif op == "scan":
                ctx.tensor_tensor_scan(o[i], o[1 - i], o[i])
            elif op == "slow_read":  # waits for a slow load first (many small packets)
                ctx.load(z, x, queue=q, packets=8192)
                ctx.tensor_tensor(rot.next(), o[i], z)
            elif op == "read":
                ctx.copy(rot.next(), o[i], engine=("vector", "scalar", "gpsimd")[q % 3])
            elif op == "piece":  # a column piece (pieces then whole reads: joins)
                ctx.memset(
                    o[i][:, 32 * q : 32 * (q + 1)], float(q), engine=("vector", "gpsimd")[q % 2]
                )
            else:
                ctx.gpsimd(o[i], o[1 - i], op="relu")

    return k


def _accesses(run):
    """Per instruction, its accesses of physical memory: (object, rows, columns, write?), SBUF
    and PSUM as partitions x bytes, an HBM tensor as rows x columns (from the table, not the
    dependency pass)."""
    from trnlab.core._tiles import format_bits

    t, tiles, bank = run.program.table, run.program.tiles, int(run.params.psum_bank_bytes)
    out = []
    for i in range(len(t)):
        acc = []
        for col in ("out", "in0", "in1", "in2"):
            tid = int(t[col][i])
            if tid < 0:
                continue
            p0, p1, f0, f1 = (int(v) for v in t[col + "_region"][i])
            tile = tiles[tid]
            if tile.space == "sbuf":
                bits = format_bits(tile.fmt)
                lo, hi = (
                    tile.offset + math.floor(f0 * bits / 8),
                    tile.offset + math.ceil(f1 * bits / 8),
                )
            else:
                lo, hi = tile.offset * bank + 4 * f0, tile.offset * bank + 4 * f1
            acc.append((tile.space, (p0, p1), (lo, hi), col == "out"))
        if t["hbm"][i] >= 0:
            r0, r1, c0, c1 = (int(v) for v in t["hbm_region"][i])
            acc.append((int(t["hbm"][i]), (r0, r1), (c0, c1), t["op"][i] == P.DMA_STORE))
        out.append(acc)
    return out


def _conflicts(run):
    """Every pair (earlier, later) of instructions that touch the same bytes, one writing."""
    acc = _accesses(run)
    for x in range(len(acc)):
        for w in range(x):
            if any(
                o == o2
                and (wa or wb)
                and a[0] < b[1]
                and b[0] < a[1]
                and c[0] < d[1]
                and d[0] < c[1]
                for o, a, c, wa in acc[w]
                for o2, b, d, wb in acc[x]
            ):
                yield w, x


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(_OPS), st.integers(0, 1), st.integers(0, 15)), max_size=40
    ),
    chip=st.sampled_from(["trn1", "trn2", "trn3"]),
    window=st.sampled_from([1, 4, 16]),
    join_min=st.sampled_from([2, 3, 32]),
)
@example(  # pieces; whole reads (the store makes a join, the activation waits on it alone)
    steps=[("piece", 0, 0), ("piece", 0, 1), ("piece", 0, 2), ("store", 0, 0), ("act", 1, 0),
           ("piece", 0, 3), ("piece", 0, 5), ("gpsimd", 1, 1), ("store", 0, 1), ("act", 1, 1)],
    chip="trn2", window=4, join_min=2,
)  # fmt: skip
@example(  # a read waits for a load; a later read of the same tile overtakes; a write follows
    steps=[("slow_read", 0, 0), ("read", 0, 0), ("piece", 0, 3)], chip="trn2", window=16,
    join_min=32,
)  # fmt: skip
def test_schedule_properties_on_random_programs(steps, chip, window, join_min):
    from trnlab.core import _deps

    params = core.core_params(chip, compiler_schedule_window=window)
    kept = _deps.JOIN_MIN, _deps.READ_JOIN_MIN
    _deps.JOIN_MIN = _deps.READ_JOIN_MIN = join_min  # small: joins in most programs
    try:
        r = core.run(
            _random_kernel(steps),
            chip=params,
            numerics=False,
            x=core.hbm((128, 512), "bf16", is_input=True),
            y=core.hbm((128, 512), "bf16"),
        )
    finally:
        _deps.JOIN_MIN, _deps.READ_JOIN_MIN = kept
    prog, s, ie, e = r.program, r.start, r.issue_end, r.end
    t = prog.table
    flat, _ = _without_joins(r)
    for i in range(len(prog)):  # joins never drop a dependency (a DMA queue's later one implies it)
        got = prog.deps(i).tolist()
        for d in flat.deps(i).tolist():
            q = t["engine"][d]
            assert d in got or (
                q >= P.FIRST_DMA and any(t["engine"][g] == q and g > d for g in got)
            )
    assert np.isfinite(s).all() and (s >= 0).all()
    assert (ie >= s - 1e-15).all() and (e >= ie - 1e-15).all()
    for w, x in _conflicts(r):  # no access overtakes an earlier one to the same bytes
        same_te = t["engine"][w] == t["engine"][x] == P.TENSOR
        assert s[x] >= (ie[w] if same_te else e[w]) - 1e-15, (w, x)
    c = core.costs(t, r.params)
    comp = t["engine"] < P.FIRST_DMA
    assert np.allclose((ie - s)[comp], c.busy[comp])  # each compute instruction gets its cost
    for i in range(len(prog)):
        for d in prog.deps(i):
            assert d < i  # dependencies point backwards
            same_te = t["engine"][d] == t["engine"][i] == P.TENSOR
            assert s[i] >= (ie[d] if same_te else e[d]) - 1e-15
    for eng in range(P.FIRST_DMA):
        sel = np.flatnonzero(t["engine"] == eng)
        order = sel[np.argsort(s[sel], kind="stable")]
        assert (s[order][1:] >= ie[order][:-1] - 1e-15).all()  # one at a time on an engine
        assert c.busy[sel].sum() <= r.latency * (1 + 1e-9)
    assert r.latency >= r.roofline_bound * (1 - 1e-9)
    assert r.latency >= r.hbm_bytes / r.params.dma_bandwidth * (1 - 1e-9)


def _assembled_kernel(pieces: int, reads: int, partial: bool = False):
    """A tile written in ``pieces`` column pieces (Vector and GpSimd memsets, loads on two
    queues), read whole ``reads`` times on Vector and Scalar, then (``partial``) one piece read
    alone and the tile stored."""

    def k(ctx, x, y):
        big = ctx.sbuf((128, 16 * pieces), "bf16")
        for j in range(pieces):
            piece = big[:, 16 * j : 16 * (j + 1)]
            if j % 4 == 0:
                ctx.load(piece, x[:, 16 * j : 16 * (j + 1)], queue=j % 8 // 4)
            else:
                ctx.memset(piece, float(j), engine=("vector", "gpsimd")[j % 2])
        out = ctx.sbuf((128, 1), "fp32", bufs=2)
        act = ctx.sbuf((128, 16 * pieces), "bf16", bufs=2)
        for i in range(reads):
            if i % 2:
                ctx.activation(act.next(), big, "exp")
            else:
                ctx.reduce(out.next(), big, "add")
        if partial:
            ctx.copy(out.next(), big[:, 16:17])
        ctx.store(y[:, : 16 * pieces], big)

    return k


def _without_joins(run):
    """``run``'s program with every dependency listed (no joins) and its schedule."""
    import dataclasses

    from trnlab.core import _deps

    prog = run.program
    ptr, idx, jp, ji = _deps.dependencies(
        prog.table, prog.tiles, prog.tensors, run.params, prog.n_engines, None,
        prog.hbm_reads, join_min=10**9, read_join_min=10**9,
    )  # fmt: skip
    assert len(jp) == 1 and len(ji) == 0
    flat = dataclasses.replace(prog, dep_ptr=ptr, dep_idx=idx, join_ptr=jp, join_idx=ji)
    return flat, core.schedule(flat, run.params)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_a_tile_read_whole_after_many_pieces_waits_on_one_join(chip):
    """A tile written in 40 pieces and read whole 30 times: the first read merges the pieces
    into one join that later reads wait for, so the dependencies number about P + R, not
    P x R; each read still waits for every piece (through the join) and the schedule is the
    one every dependency listed gives."""
    pieces, reads = 40, 30
    r = _run(
        _assembled_kernel(pieces, reads),
        chip=chip,
        x=_x((128, 16 * pieces)),
        y=core.hbm((128, 16 * pieces), "bf16"),
    )
    prog, t = r.program, r.program.table
    flat, (s, ie, e) = _without_joins(r)
    n_joined = len(prog.dep_idx) + len(prog.join_idx)
    assert len(flat.dep_idx) > pieces * reads // 2  # every read lists the pieces ...
    assert n_joined < 3 * (pieces + reads)  # ... which the join lists once
    writers = np.flatnonzero(np.isin(t["op"], (P.MEMSET, P.DMA_LOAD)))
    assert len(writers) == pieces
    readers = np.flatnonzero(np.isin(t["op"], (P.REDUCE, P.ACTIVATION)))
    last_load = {q: max(w for w in writers if t["engine"][w] == q) for q in set(t["engine"][writers]) if q >= P.FIRST_DMA}  # fmt: skip
    compute = {w for w in writers if t["engine"][w] < P.FIRST_DMA}
    first_join = set(prog.join_idx[prog.join_ptr[0] : prog.join_ptr[1]].tolist())
    assert first_join == compute | set(last_load.values())  # the pieces (latest per queue)
    later = prog.join_idx[prog.join_ptr[1] :]  # then the reads, every READ_JOIN_MIN of them
    assert set(later.tolist()) <= set(readers.tolist()) | set(range(len(t), len(t) + 8))
    for i in readers:
        deps = set(prog.deps(i).tolist())
        assert deps == set(flat.deps(i).tolist())  # through the join: the same instructions
        assert compute <= deps and set(last_load.values()) <= deps
    for i in readers[1:]:  # later reads list the join, not the pieces
        direct = set(prog.dep_idx[prog.dep_ptr[i] : prog.dep_ptr[i + 1]].tolist())
        assert len(t) in direct and not direct & set(writers.tolist())
    np.testing.assert_array_equal(r.start, s)
    np.testing.assert_array_equal(r.issue_end, ie)
    np.testing.assert_array_equal(r.end, e)


def test_a_piece_read_after_the_join_waits_for_the_whole_tile():
    """The join's price, kept on purpose: a read of one piece after a whole read waits for
    every piece (its bytes lie under the join), where listing each write would let it wait
    for its own piece only. It is still correct: never earlier than its own writer."""
    pieces = 40
    r = _run(
        _assembled_kernel(pieces, 2, partial=True),
        x=_x((128, 16 * pieces)),
        y=core.hbm((128, 16 * pieces), "bf16"),
    )
    t = r.program.table
    part = np.flatnonzero(t["op"] == P.COPY)[-1]
    writers = np.flatnonzero(np.isin(t["op"], (P.MEMSET, P.DMA_LOAD)))
    flat, _ = _without_joins(r)
    assert flat.deps(part).tolist() == [writers[1]]  # its own piece only
    assert {w for w in writers if t["engine"][w] < P.FIRST_DMA} <= set(
        r.program.deps(part).tolist()
    )


@pytest.mark.parametrize("window", [1, 16])
def test_a_write_waits_for_a_read_that_a_later_read_overtook(window):
    """Vector reads b twice: first with a slow load's data (so it waits), then alone (ready at
    once: with a window it starts first). A later write of b waits for both reads, however
    they were reordered: the later read does not stand for the earlier one, and a program
    recorded with one window holds when scheduled with another."""
    ids = {}

    def k(ctx, x):
        a = ctx.sbuf((128, 4096), "bf16")
        ctx.load(a, x)  # slow
        b = ctx.sbuf((128, 512), "bf16")
        ctx.memset(b, 1.0)
        first = ctx.tensor_tensor(ctx.sbuf((128, 512), "bf16"), b, a[:, :512])
        second = ctx.copy(ctx.sbuf((128, 512), "bf16"), b)
        ids.update(first=first, second=second, write=ctx.memset(b, 2.0, engine="gpsimd"))

    recorded = core.core_params("trn2", compiler_schedule_window=1 if window > 1 else 16)
    ctx, _ = core.record(k, chip=recorded, numerics=False, x=_x((128, 4096)))
    r = core.simulate(ctx.program(), core.core_params("trn2", compiler_schedule_window=window))
    first, second, write = ids["first"], ids["second"], ids["write"]
    assert {first, second} <= set(r.program.deps(write).tolist())
    assert r.start[write] >= max(r.end[first], r.end[second]) - 1e-15
    if window > 1:  # the reorder that made the case
        assert r.start[second] < r.start[first]


def test_many_reads_of_one_tile_stay_linear_and_joins_grow_as_needed():
    """A tile read 200 times by Vector, then written in part: its reads merge into joins (the
    write waits for a handful of nodes, not 200 reads); and a tensor read by row panels, then
    by column panels, makes more joins than one per 31 instructions (each column panel joins
    the row panels' joins) without running out of room."""
    ids = {}

    def reads(ctx, x):
        w = ctx.sbuf((128, 512), "bf16")
        ctx.load(w, x)
        out = ctx.sbuf((128, 512), "bf16", bufs=2)
        for _ in range(200):
            ctx.copy(out.next(), w)
        ids["write"] = ctx.memset(w[:, 0:16], 0.0, engine="gpsimd")

    r = _run(reads, chip="trn2", x=_x())
    direct = r.program.dep_idx[
        r.program.dep_ptr[ids["write"]] : r.program.dep_ptr[ids["write"] + 1]
    ]
    copies = np.flatnonzero(r.program.table["op"] == P.COPY)
    assert len(direct) < 40 and set(copies.tolist()) <= set(r.program.deps(ids["write"]).tolist())
    assert r.start[ids["write"]] >= r.end[copies].max() - 1e-15

    def panels(ctx, y):  # 32 x 32 blocks stored, read back by rows, then by columns
        src = ctx.sbuf((8, 32), "bf16")
        ctx.memset(src, 1.0)
        for i in range(32):
            for j in range(32):
                ctx.store(y[8 * i : 8 * (i + 1), 32 * j : 32 * (j + 1)], src)
        panel = ctx.sbuf((8, 32 * 32), "bf16")
        for i in range(32):
            ctx.load(panel, y[8 * i : 8 * (i + 1), :])
        for j in range(32):
            ctx.load(panel, y[:, 32 * j : 32 * (j + 1)], flat=True)
        ctx.load(panel, y[0:8, :])

    from trnlab.core import _deps

    kernel = _deps._kernel
    _deps._kernel = lambda: _deps._deps_py  # uncompiled: running out of room raises
    try:
        r = _run(panels, chip="trn2", y=core.hbm((8 * 32, 32 * 32), "bf16"))
    finally:
        _deps._kernel = kernel
    n, joins = len(r.program), len(r.program.join_ptr) - 1
    assert joins > n // (_deps.JOIN_MIN - 1) + 1  # joins of joins: more than one per 31
    stores = np.flatnonzero(r.program.table["op"] == P.DMA_STORE)
    last = len(r.program) - 1
    assert set(r.program.deps(last).tolist()) >= {stores.max()}
    assert r.start[last] >= r.end[stores].max() - 1e-15


def test_join_thresholds_below_two_are_refused():
    from trnlab.core import _deps

    r = _run(lambda ctx, x: ctx.load(ctx.sbuf((128, 512), "bf16"), x), x=_x())
    p = r.program
    for name in ("join_min", "read_join_min"):
        for bad in (1, 0, -3, 2.5, True, "32"):
            with pytest.raises(core.KernelArgumentError, match=name):
                _deps.dependencies(
                    p.table, p.tiles, p.tensors, r.params, p.n_engines, **{name: bad}
                )
        got = _deps.dependencies(
            p.table, p.tiles, p.tensors, r.params, p.n_engines, **{name: np.int64(4)}
        )
        assert np.array_equal(got[1], p.dep_idx)  # a NumPy whole number is a whole number


def test_long_runs_show_progress_in_notebooks_only(monkeypatch):
    from IPython import display as ipd

    from trnlab.core import _progress

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(obj.data)

    def fake_display(obj, display_id=False):
        shown.append(obj.data)
        return Handle()

    monkeypatch.setattr(ipd, "display", fake_display)
    quiet = _progress.Progress()  # not in a notebook here: silent whatever the time
    quiet.t0 -= 10
    quiet.tick(100_000)
    assert shown == []
    monkeypatch.setattr(_progress, "_in_notebook", lambda: True)
    monkeypatch.setenv("TRNLAB_PROGRESS", "0")  # executed labs (tests, committed) keep no line
    off = _progress.Progress()
    off.t0 -= 10
    off.tick(100_000)
    assert shown == []
    monkeypatch.setenv("TRNLAB_PROGRESS", "1")
    assert _progress.Progress().enabled, "in a notebook, shown unless turned off"
    p = _progress.Progress(enabled=True)
    p.tick(16_384)  # a fresh run: under 2 s, nothing shown
    assert shown == []
    p.t0 -= 3  # the run has now taken over 2 s
    p.tick(32_768)
    p.phase("scheduling 40,000 instructions")
    p.done("40,000 instructions")
    assert len(shown) == 3
    assert "32,768 instructions" in shown[0] and "scheduling" in shown[1] and "done" in shown[2]


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_work_behind_a_blocked_engine_head_runs_once_each_in_its_window(chip):
    """The first Vector and GpSimd instructions wait for the last of many loads; the
    independent memsets behind them start out of order within the compiler's window, each
    exactly once: no two instructions overlap on an engine, none starts before what it depends
    on ends (the scheduler's list of unstarted instructions skips the started ones)."""
    n = 40

    def k(ctx, x):
        w = ctx.sbuf((1, 64), "fp32")
        for i in range(n):
            ctx.load(w, x[i : i + 1, :])
        for engine in ("vector", "gpsimd"):  # both wait for the last load
            ctx.copy(ctx.sbuf((1, 64), "fp32"), w, engine=engine)
        t = ctx.sbuf((1, 64), "fp32", bufs=4)
        for i in range(n):
            ctx.memset(t.next(), float(i), engine=("vector", "gpsimd")[i % 2])

    r = _run(k, chip=chip, x=core.hbm((n, 64), "fp32", is_input=True))
    prog, t = r.program, r.program.table
    for i in range(len(t)):  # after its dependencies (none here share the Tensor Engine)
        for d in prog.deps(i):
            assert r.start[i] >= r.end[d] - 1e-15
    for e in range(P.FIRST_DMA):  # one instruction at a time on a compute engine
        sel = np.flatnonzero(t["engine"] == e)
        order = sel[np.argsort(r.start[sel], kind="stable")]
        assert np.all(r.start[order][1:] >= r.issue_end[order][:-1] - 1e-15)
    for e in (P.VECTOR, P.GPSIMD):  # out of order: work went ahead of the blocked copy
        copy = np.flatnonzero((t["op"] == P.COPY) & (t["engine"] == e))[0]
        memsets = np.flatnonzero((t["op"] == P.MEMSET) & (t["engine"] == e))
        assert (r.start[memsets] < r.start[copy]).any()
