"""Cost parameters of one NeuronCore, read from the catalogue (one figure, one place).

:func:`core_params` gathers every figure the scheduler needs into a frozen record. Nothing
here is a constant: the figures come from ``trnlab/catalog/data/hardware.toml`` and
``neuroncore.toml``; those marked ``assumption = true`` there are model parameters no source
gives as a number, and any figure can be overridden per run (``core_params("trn1",
dma_efficiency_at_overhead=0.5)``) to ask "what if".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CoreParams", "core_params"]

#: Figures of the core read by the model (name in the catalogue = field name).
_CORE_FIGURES = (
    "sbuf_partitions",
    "sbuf_usable_partition_bytes",
    "psum_partition_bytes",
    "psum_banks",
    "pe_rows",
    "pe_cols",
    "tensor_clock",
    "stationary_free_max",
    "moving_free_max",
    "matmul_min_cycles",
    "fast_weight_load",
    "vector_clock",
    "vector_lanes",
    "vector_lanes_32bit",
    "vector_fixed_cycles",
    "vector_min_cycles",
    "scalar_clock",
    "scalar_lanes",
    "scalar_min_cycles",
    "sbuf_access_cycles",
    "gpsimd_clock",
    "gpsimd_cores",
    "gpsimd_core_bits",
    "gpsimd_start_cycles",
    "vector_gpsimd_share_sbuf",
    "dma_engines",
    "dma_bandwidth",
    "dma_setup",
    "dma_partitions_per_engine",
    "dma_overhead_bytes",
    "dma_efficient_bytes",
    "dma_saturating_bytes",
    "dma_efficiency_at_efficient",
    "dma_efficiency_at_overhead",
)


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
        """Sustained bandwidth of one DMA engine: the per-core figure shared by the engines."""
        return self.dma_bandwidth / self.dma_engines

    def peak_flops(self, dtype: str) -> float:
        """Tensor-engine peak of the core for ``dtype``: rows x cols x 2 x clock x rate."""
        return self.pe_rows * self.pe_cols * 2 * self.tensor_clock * self.tensor_rate[dtype]

    def describe(self) -> str:
        """A short account of where the figures come from, assumptions and overrides named."""
        lines = [f"{self.name} on {self.chip}: figures from trnlab.catalog"]
        if self.assumptions:
            lines.append(
                "  model assumptions (no source gives a number): " + ", ".join(self.assumptions)
            )
        if self.overrides:
            lines.append(
                "  overridden: " + ", ".join(f"{k}={v!r}" for k, v in self.overrides.items())
            )
        return "\n".join(lines)

    def replace(self, **overrides: Any) -> CoreParams:
        """A copy with some figures replaced (``params.replace(dma_bandwidth=400e9)``)."""
        unknown = sorted(set(overrides) - set(self.values))
        if unknown:
            raise KeyError(f"unknown figure(s) {unknown}; figures: {sorted(self.values)}")
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
        Replace any figure by name, e.g. ``dma_efficiency_at_overhead=0.5``.

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
        values[name] = fig.value
        if fig.extra.get("assumption"):
            assumed.append(name)
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
