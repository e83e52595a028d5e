"""Cost parameters of one NeuronCore, read from the catalogue (one figure, one place).

:func:`core_params` gathers every figure the scheduler needs into a frozen record. Nothing
here is a constant: the figures come from ``trnlab/catalog/data/hardware.toml`` and
``neuroncore.toml``; those marked ``assumption = true`` there are model parameters no source
gives as a number for that generation, and any figure can be overridden per run
(``core_params("trn1", dma_queue_interval=0.5e-6)``) to ask "what if". An override is checked:
a count must be a whole number >= 1, a time or rate a finite number in its range, a rule a
boolean; anything else is refused with the figure's name and its valid range.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from ._errors import KernelArgumentError, UnknownFigureError

__all__ = ["CoreParams", "core_params"]

# Figures of the core read by the model (name in the catalogue = field name), each with the
# kind of value it takes: "count" (whole number >= 1), "positive" (finite > 0), "nonneg"
# (finite >= 0), "share" (a fraction in [0, 1]; 0: the generation lacks it), "bool".
_CORE_FIGURES: dict[str, str] = {
    "sbuf_partitions": "count",
    "sbuf_usable_partition_bytes": "count",
    "psum_partition_bytes": "count",
    "psum_banks": "count",
    "pe_rows": "count",
    "pe_cols": "count",
    "tensor_clock": "positive",
    "stationary_free_max": "count",
    "moving_free_max": "count",
    "matmul_min_cycles": "nonneg",
    "fast_weight_load": "positive",
    "tensor_latency_cycles": "nonneg",
    "vector_clock": "positive",
    "vector_lanes": "count",
    "vector_min_cycles": "nonneg",
    "vector_latency_cycles": "nonneg",
    "scalar_clock": "positive",
    "scalar_lanes": "count",
    "scalar_min_cycles": "nonneg",
    "scalar_latency_cycles": "nonneg",
    "gpsimd_clock": "positive",
    "gpsimd_cores": "count",
    "gpsimd_core_bits": "count",
    "gpsimd_start_cycles": "nonneg",
    "vector_gpsimd_share_sbuf": "bool",
    "vector_scalar_share_psum": "bool",
    "dma_engines": "count",
    "dma_bandwidth": "positive",
    "dma_partitions_per_engine": "count",
    "dma_static_queue_bandwidth": "positive",
    "compiler_load_queues": "count",
    "dma_queue_interval": "nonneg",
    "dma_packet_time": "nonneg",
    "dma_completion_latency": "nonneg",
    "engine_sync_latency": "nonneg",
    "launch_preamble": "nonneg",
    "launch_postamble": "nonneg",
    "compiler_rotating_buffers": "count",
    "dge_instances": "countable",
    "dma_default_dge": "dge",
    "compiled_graph_dge": "dge",
    "dge_instruction_time": "nonneg",
    "swdge_gpsimd_time": "nonneg",
    "act_table_load": "nonneg",
    "compiler_schedule_window": "count",
    "compiler_cse": "bool",
    "vector_static_cycles": "nonneg",
    "scalar_static_cycles": "nonneg",
    "dma_transpose_hbm_share": "share",
    "dma_transpose_sbuf_share": "share",
    "dma_transpose_granule": "count",
}
_DERIVED_KINDS = {"psum_free_max": "count"}
# Upper limits of counts the model can represent (a recorded region packs partition indices in
# 8 bits and engine ids in 16); other counts stop at 2**20, far beyond any NeuronCore.
_MAX_COUNT = {"sbuf_partitions": 255, "pe_rows": 255, "dma_engines": 4096}
_RANGES = {
    "countable": "a whole number >= 0",
    "dge": "one of 'none', 'hw', 'sw'",
    "count": "a whole number >= 1",
    "positive": "a finite number > 0",
    "nonneg": "a finite number >= 0",
    "share": "a fraction from 0 to 1",
    "bool": "True or False",
}


def _check(name: str, value: Any) -> Any:
    """``value`` if it is a valid value of figure ``name``, else a teaching error."""
    kind = _CORE_FIGURES.get(name) or _DERIVED_KINDS[name]
    ok = False
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "dge":
        ok = value in ("none", "hw", "sw")
    elif kind == "countable":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if kind == "count":
            top = _MAX_COUNT.get(name, 2**20)
            ok = isinstance(value, numbers.Integral) and 1 <= value <= top
            if not ok and isinstance(value, numbers.Integral) and value > top:
                raise KernelArgumentError(
                    f"figure {name!r} = {value:,} is beyond what the model represents "
                    f"(at most {top:,}); a NeuronCore has far fewer."
                )
        elif kind == "positive":
            ok = math.isfinite(v) and v > 0
        elif kind == "share":
            ok = math.isfinite(v) and 0 <= v <= 1
        else:
            ok = math.isfinite(v) and v >= 0
    if not ok:
        raise KernelArgumentError(
            f"figure {name!r} must be {_RANGES[kind]}; got {value!r}. "
            f"(core_params(chip, {name}=...) overrides a catalogue figure for 'what if' runs.)"
        )
    return value


@dataclass(frozen=True)
class CoreParams:
    """Everything the kernel API checks and the scheduler charges, for one NeuronCore.

    Attributes
    ----------
    chip : str
        Catalogue key of the chip (``"trn1"``).
    core : str
        NeuronCore generation key (``"v2"``).
    name : str
        ``"NeuronCore-v2"``.
    values : dict
        Figure name -> value (see ``_CORE_FIGURES``; overrides applied).
    tensor_rate : dict
        Data type -> Tensor Engine rate as a multiple of bf16.
    hbm_bandwidth : float
        HBM bandwidth of the whole chip in B/s (shown with the roofline).
    assumptions : tuple of str
        Figures in use that are model assumptions, not sourced numbers.
    overrides : dict
        Figures replaced by the caller.
    """

    chip: str
    core: str
    name: str
    values: dict[str, Any]
    tensor_rate: dict[str, float]
    hbm_bandwidth: float
    cores_per_chip: int
    assumptions: tuple[str, ...] = ()
    overrides: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"CoreParams has no figure {name!r}; figures: {sorted(values)}")

    # Derived figures (each formula names its source) ------------------------------------------
    @property
    def psum_bank_bytes(self) -> int:
        """Bytes per PSUM bank per partition: 16 KiB / 8 banks = 2 KiB (NDOC NKI arch guides)."""
        return int(self.psum_partition_bytes // self.psum_banks)

    @property
    def dma_engine_bandwidth(self) -> float:
        """Streaming rate of one DMA engine: the core's figure over its engines (17, 23 and
        33 B/ns on v2, v3, v4: the NKI DMA guides' table)."""
        return self.dma_bandwidth / self.dma_engines

    @property
    def launch_overhead(self) -> float:
        """Pre-amble plus post-amble of a kernel launch (s), outside the kernel's own timeline."""
        return self.launch_preamble + self.launch_postamble

    def compiled_graph(self) -> CoreParams:
        """These figures as a compiled framework graph meets them: its loads get descriptors
        as ``compiled_graph_dge`` says (software DGE on every generation, where Trn1's NKI
        kernels use static descriptors), so a static queue's rate does not pace them; they
        keep the kernel's queues (on Trn1 one load queue, whose set-ups stay serial). The
        scale-out planner's kernels (large GEMM, decode attention) stand for compiled graphs
        and run with these."""
        graph = self.compiled_graph_dge
        return self if graph == self.dma_default_dge else self.replace(dma_default_dge=graph)

    def peak_flops(self, dtype: str) -> float:
        """Tensor-engine peak of the core for ``dtype``: rows x cols x 2 x clock x rate."""
        if not isinstance(dtype, str) or dtype not in self.tensor_rate:
            from trnlab.catalog import dtype_name

            d = dtype_name(dtype)
            if d not in self.tensor_rate:
                from ._errors import FormatNotSupportedError

                raise FormatNotSupportedError(
                    f"the Tensor Engine of {self.name} ({self.chip}) has no {d} rate; it has "
                    f"{', '.join(self.tensor_rate)}"
                )
            dtype = d
        return self.pe_rows * self.pe_cols * 2 * self.tensor_clock * self.tensor_rate[dtype]

    def describe(self) -> str:
        """A short account of where the figures come from, assumptions and overrides named."""
        lines = [f"{self.name} on {self.chip}: figures from trnlab.catalog"]
        if self.assumptions:
            lines.append(
                "  model assumptions (no source gives the number for this generation): "
                + ", ".join(self.assumptions)
            )
        if self.overrides:
            lines.append(
                "  overridden: " + ", ".join(f"{k}={v!r}" for k, v in self.overrides.items())
            )
        return "\n".join(lines)

    def replace(self, **overrides: Any) -> CoreParams:
        """A copy with some figures replaced (``params.replace(dma_bandwidth=400e9)``).

        Raises
        ------
        UnknownFigureError
            An unknown figure name (the message lists the figures; also a KeyError).
        KernelArgumentError
            A value outside the figure's range (a count below 1, a negative or NaN time, a
            string...).
        """
        unknown = sorted(set(overrides) - set(self.values))
        if unknown:
            raise UnknownFigureError(f"unknown figure(s) {unknown}; figures: {sorted(self.values)}")
        for k, v in overrides.items():
            _check(k, v)
        return dataclasses.replace(
            self,
            values={**self.values, **overrides},
            overrides={**self.overrides, **overrides},
        )


def core_params(chip: str | CoreParams = "trn1", **overrides: Any) -> CoreParams:
    """The cost parameters of one NeuronCore of ``chip``, from the catalogue.

    Parameters
    ----------
    chip : str or CoreParams
        A Neuron chip of the catalogue (``"trn1"``, ``"trn2"``, ``"trn3"``, ``"inf2"``); a
        CoreParams is passed through (with the overrides applied).
    **overrides
        Replace any figure by name, e.g. ``dma_queue_interval=0.5e-6``.

    Raises
    ------
    trnlab.catalog.CatalogError
        For a chip without a NeuronCore (a GPU, an announced chip); the message says which have one.
    """
    if isinstance(chip, CoreParams):
        return chip.replace(**overrides) if overrides else chip
    from trnlab import catalog

    c = catalog.chip(chip)
    if c.core is None:
        have = ", ".join(x.key for x in catalog.chips("neuron") if x.core is not None)
        raise catalog.CatalogError(
            f"{c} has no NeuronCore specified, so trnlab.core cannot simulate it. "
            f"Chips with a NeuronCore: {have}."
        )
    core = c.core
    values = {}
    assumed = []
    for name in _CORE_FIGURES:
        fig = core.figure(name)
        if fig.extra.get("assumption"):
            assumed.append(name)
        values[name] = fig.value
    # Free size of one PSUM tile / one matmul output: a bank, or more where the generation
    # lets a matmul span banks (NeuronCore-v4).
    if "psum_free_max" in core.figures:
        values["psum_free_max"] = int(core.figures["psum_free_max"].value)
    else:
        values["psum_free_max"] = int(values["psum_partition_bytes"] // values["psum_banks"] // 4)
    params = CoreParams(
        chip=c.key,
        core=core.key,
        name=core.name,
        values=values,
        tensor_rate={d: float(f.value) for d, f in core.tensor_rate.items()},
        hbm_bandwidth=float(c.hbm_bandwidth),
        cores_per_chip=int(c.cores or 1),
        assumptions=tuple(assumed),
    )
    return params.replace(**overrides) if overrides else params
