"""Published collective benchmark runs: Neuron's nccom-test examples, point by point.

Each :class:`NccomRun` is one table of the NCCOM-TEST user guide (source ``ndoc-nccom-test``),
copied as printed (size in bytes, time in microseconds) with the SDK release that added it. The
guide names neither the instance nor the chips; ``system`` and ``chips`` are trnlab's reading
of the rank count (NeuronCores: 2 per Trainium chip, 4 logical per Trainium2 chip at the
default LNC=2), stated in ``reading``. ``role`` says what trnlab does with each point:
``"fixed cost"`` and ``"bandwidth"`` points calibrate one physical figure each; every other
point is a validation case the model was not fitted to. ``runtime`` is the Neuron runtime
generation that ran it (:data:`trnlab.fabric.RUNTIMES`): the SDK 2.10 tables (April 2023)
predate the mesh algorithm, and their fixed cost is fitted apart, on one of them.

The guide says its examples "should not be considered up-to-date"; it names no instance. Left
out: the 2-rank runs (two NeuronCores of one chip: trnlab's fabric starts at the chip), the
permute example (its pairs stay inside a chip at LNC=2), the all-gatherv and multi-stream
examples (variable sizes; two streams sharing the links) and the 2-instance all-to-allv (a
variable-size operation with per-rank metadata).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NCCOM_RUNS", "NccomRun"]


@dataclass(frozen=True)
class NccomRun:
    """One published nccom-test table."""

    key: str
    sdk: str
    command: str
    op: str
    ranks: int
    system: str
    chips: int
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]
    roles: tuple[str, ...]
    reading: str
    commit: str
    runtime: str = "current"

    def points(self):
        """(size, time in seconds, role) for each row."""
        return [
            (s, t * 1e-6, r) for s, t, r in zip(self.sizes, self.times_us, self.roles, strict=True)
        ]


V, F, BW = "validation", "fixed cost", "bandwidth"

NCCOM_RUNS: tuple[NccomRun, ...] = (
    NccomRun(
        key="sdk2.24-allg-r32",
        sdk="2.24 (June 2025)",
        command="nccom-test -r 32 --minbytes 1kb --maxbytes 1mb --stepfactor 8 --datatype fp32 "
        "--check allg --show-input-output-size",
        op="all_gather",
        ranks=32,
        system="trn1.32xlarge",
        chips=16,
        sizes=(1024, 8192, 65536, 524288),
        times_us=(6.16, 6.48, 8.17, 23.16),
        roles=(F, F, F, V),
        reading="32 ranks: one trn1.32xlarge (32 NeuronCores on 16 chips), as the same command "
        "in the SDK 2.10 guide; the guide does not name the instance (assumption)",
        commit="6b6ad292",
    ),
    NccomRun(
        key="sdk2.28-allg-r8",
        sdk="2.28 (February 2026)",
        command="nccom-test -r 8 --minbytes 1kb --maxbytes 1mb --stepfactor 8 --datatype fp32 "
        "--stats avg p25 p50 p90 p99 --iters 1000 allg",
        op="all_gather",
        ranks=8,
        system="trn2.48xlarge",
        chips=2,
        sizes=(1024, 8192, 65536, 524288),
        times_us=(10.0, 10.22, 11.31, 14.83),
        roles=(F, F, F, V),
        reading="8 ranks at the default LNC=2 of Trn2: 2 neighbouring Trainium2 chips "
        "(assumption: the guide does not name the instance)",
        commit="86a92868",
    ),
    NccomRun(
        key="sdk2.28-allr-r16",
        sdk="2.28 (February 2026)",
        command="nccom-test -r 16 allr -b 4 -e 1gb -f 16 -d fp32 --show-algorithm",
        op="all_reduce",
        ranks=16,
        system="trn2.48xlarge",
        chips=4,
        sizes=(4, 32, 512, 8192, 131072, 2097152, 33554432, 536870912),
        times_us=(299.91, 299.69, 299.82, 299.74, 574.15, 686.32, 2754.15, 9689.51),
        roles=(V, V, V, V, V, V, V, BW),
        reading="KangaRing, which the run reports, exists only for LNC=2 ranks: Trainium2; "
        "16 ranks = 4 chips, one ring of the 4x4 torus (assumption)",
        commit="86a92868",
    ),
    NccomRun(
        key="sdk2.10-allg-r32",
        sdk="2.10 (April 2023)",
        command="nccom-test -r 32 --minbytes 1kb --maxbytes 1mb --stepfactor 8 --datatype fp32 "
        "--check allg",
        op="all_gather",
        ranks=32,
        system="trn1.32xlarge",
        chips=16,
        sizes=(1024, 8192, 65536, 524288),
        times_us=(151, 149, 150, 179),
        roles=(F, F, F, V),
        reading="32 ranks: one trn1.32xlarge, the only Trainium instance in April 2023",
        commit="4f641e78",
        runtime="2023",
    ),
    NccomRun(
        key="sdk2.10-allr-r64-n2",
        sdk="2.10 (April 2023)",
        command="nccom-test -r 64 -N 2 -b 8 -e 1GB -f 2 -n 50 -w 5 -d fp32 allr",
        op="all_reduce",
        ranks=64,
        system="2x trn1.32xlarge",
        chips=32,
        sizes=tuple(8 << k for k in range(0, 28, 3)),
        times_us=(520, 525, 782, 916, 1174, 1311, 1329, 2138, 6279, 41806),
        roles=(V,) * 10,
        reading="two trn1.32xlarge over EFA, 32 ranks on each host (the guide says so)",
        commit="4f641e78",
        runtime="2023",
    ),
)
