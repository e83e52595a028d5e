"""Exercises of lab 08 (NeuronLink and collectives). Expected answers come from trnlab.fabric."""

from __future__ import annotations

from trnlab import fabric

from . import _slips as slips
from ._checks import choice, close_to
from ._exercise import Exercise
from ._predict import Prediction

__all__ = ["ALPHA_BETA", "a2a_limit", "crossover", "ring_time", "torus_bisection"]

MiB, GiB = 1 << 20, 1 << 30
RING_BYTES = 64 * MiB
SYSTEM = "trn2.48xlarge"
#: The pure alpha-beta model the exercises work by hand: the sourced 1.5 us per step, links at
#: their stated bandwidth, no fixed cost per operation (the lab adds those afterwards).
ALPHA_BETA = fabric.FabricParams(op_overhead=0.0, efa_op_overhead=0.0, link_efficiency=1.0)


def _ring_time_us() -> float:
    # The closed form; the lab's chunk-level simulation of the same ring meets it exactly.
    return fabric.closed_form("all_reduce", RING_BYTES, SYSTEM, "ring", ALPHA_BETA).time * 1e6


def _step_us(nbytes: float = RING_BYTES, n: int = 16, b: float = 128e9) -> float:
    return 1.5 + nbytes / (n * b) * 1e6


def _explain_ring(predicted: float, model: float) -> str:
    per_step = _step_us()
    why = (
        f"the simulation moves every chunk over the snake-shaped ring of the 4x4 torus: 30 steps "
        f"(15 of reduce-scatter, 15 of all-gather) of alpha + S/(nB) = 1.5 + "
        f"{per_step - 1.5:.1f} us. Each step uses one link per chip in one direction and no two "
        "messages share a link, so nothing queues and the simulation meets the closed form; the "
        f"bytes are {(per_step - 1.5) / per_step:.0%} of each step: at 64 MiB the ring is "
        "bandwidth-bound."
    )
    ratio = predicted / model
    if abs(ratio - (per_step - 1.5) / per_step) < 0.01:
        why += " Without the 30 alphas (45 us) the bytes alone give about 983 us."
    elif abs(ratio - 0.5) < 0.05:
        why += " Half of it is n-1 steps: an all-reduce is a reduce-scatter and then an all-gather."
    elif ratio > 8:
        why += " Each step moves one chunk of S/n, not the whole buffer."
    return why


ring_time = Prediction(
    "lab08.ring_time",
    "Predict before the next cell simulates it: a ring all-reduce of 64 MiB on trn2.48xlarge "
    "in the alpha-beta model: n = 16 chips, B = 128 GB/s per link each way, alpha = 1.5 us per "
    "step (the Neuron runtime docs: 'about 1-2 us' per hop). Its time in microseconds, with "
    "t = 2(n-1) (alpha + S/(nB))?",
    _ring_time_us,
    what="the time",
    unit="us",
    explain=_explain_ring,
    within=0.0,
    slips=(*slips.si_prefixes("us", hi=6),),
    hints=(
        "S/(nB) = 67,108,864 B / (16 x 128e9 B/s) = 32.8 us per step.",
        "2(n-1) = 30 steps of (1.5 + 32.8) us.",
    ),
    solution_text="t_us = 2 * 15 * (1.5 + 2**26 / (16 * 128e9) * 1e6)   # 1,028 us",
)


def _crossover() -> float:
    # The size where the bandwidth term equals the latency term: t(S) = 2 t(1 byte). The
    # ring's closed form is a straight line in S, so S* = latency / per-byte cost.
    lat = fabric.closed_form("all_reduce", 1, SYSTEM, "ring", ALPHA_BETA).time
    big = 8 * GiB
    per_byte = (fabric.closed_form("all_reduce", big, SYSTEM, "ring", ALPHA_BETA).time - lat) / big
    return lat / per_byte


crossover = Exercise(
    "lab08.crossover",
    "For the same ring all-reduce on trn2.48xlarge, at what message size S (in bytes) does "
    "the bandwidth term 2(n-1) S/(nB) equal the latency term 2(n-1) alpha? Below it the "
    "collective is latency-bound.",
    close_to(
        _crossover,
        what="the size",
        unit="B",
        slips=(
            *slips.si_prefixes("B", hi=9),
            *slips.binary_prefixes("B"),
            slips.Slip(1 / 16, "the bandwidth term has S/(nB): S* = n alpha B, multiply by n"),
            slips.Slip(15 / 16, "n - 1 cancels between the terms; S* = n alpha B", 0.01),
            slips.Slip(2.0, "that counts both directions of the link; the ring sends one way"),
        ),
    ),
    hints=(
        "2(n-1) cancels: alpha = S/(nB).",
        "S* = n alpha B = 16 x 1.5e-6 s x 128e9 B/s.",
    ),
    solution=_crossover,
    solution_text="S_star = 16 * 1.5e-6 * 128e9   # 3.07e6 bytes, about 2.9 MiB",
)


def _bisection_ms() -> float:
    return fabric.all_to_all_bound(GiB, "trn2-ultraserver", ALPHA_BETA) * 1e3


torus_bisection = Exercise(
    "lab08.torus_bisection",
    "The Trn2 UltraServer is a 4x4x4 torus of 64 chips: 128 GB/s links (each way) inside an "
    "instance, 64 GB/s links on the rings of 4 across instances. In an all-to-all every chip "
    "sends S/n to every other chip, with S = 1 GiB per chip. Cut the torus in half across the "
    "slowest axis: what is the lower bound on the time, in milliseconds, for the bytes that "
    "must cross the cut?",
    close_to(
        _bisection_ms,
        what="the bound",
        unit="ms",
        slips=(
            *slips.si_prefixes("ms", hi=6),
            slips.Slip(
                2.0,
                "cutting a ring of 4 in half crosses it twice (in the middle and at the "
                "wrap-around): count 32 links, not 16",
            ),
            slips.Slip(4.0, "n/2 chips each send half their buffer across: nS/4 bytes, not nS"),
            slips.Slip(0.5, "the cut crosses the slowest axis, whose links carry 64 GB/s each way"),
            slips.Slip(
                2**30 / 1e9, "that mixes GiB (2^30 bytes) and GB (10^9 bytes)", 0.004, "unit"
            ),
        ),
    ),
    hints=(
        "Bytes crossing each way: (n/2 chips) x (n/2 peers) x S/n = nS/4 = 16 GiB.",
        "The cut crosses 16 rings of 4, each twice: 32 links of 64 GB/s = 2.048 TB/s each way.",
    ),
    solution=_bisection_ms,
    solution_text="t_ms = 64 * 2**30 / 4 / (2 * 16 * 64e9) * 1e3   # 8.39 ms = S / 128 GB/s",
)


def _switch_limit() -> str:
    # Trn3 Gen1: which bound is larger for a big all-to-all, each chip's port or the cut?
    t = fabric.topology("trn3-ultraserver-gen1", ALPHA_BETA)
    S, n = float(GiB), t.chips
    port = (n - 1) / n * S / t.axis_bandwidth[0]
    cut = fabric.all_to_all_bound(S, t)
    return "port" if port > cut else "bisection"


a2a_limit = Exercise(
    "lab08.a2a_limit",
    "On the Trn3 Gen1 UltraServer (64 chips, each with 1.28 TB/s each way into a NeuronSwitch "
    "assumed non-blocking), what limits a 1 GiB all-to-all: 'latency', 'port' (each chip's "
    "own link to the switch) or 'bisection'?",
    choice(
        _switch_limit(),
        ["latency", "port", "bisection"],
        explain={
            "latency": "at 1 GiB the fixed cost (a few microseconds) is tiny next to the bytes",
            "bisection": "a non-blocking switch's cut is half the chips' ports, n/2 x 1.28 TB/s: "
            "compare nS/4 over it with (n-1)/n x S over one port",
            "port": "",
        },
    ),
    hints=(
        "Port: each chip sends (n-1)/n x S through 1.28 TB/s.",
        "Cut: nS/4 bytes through n/2 x 1.28 TB/s = S/(2 x 1.28 TB/s): half the port time.",
    ),
    # The all-to-all table shows the switch's time against its bisection bound.
    giveaways=("own port",),
    solution=_switch_limit,
    solution_text="'port': (63/64) S / 1.28 TB/s = 0.82 ms beats the cut's S / 2.56 TB/s = 0.42 ms",
)
