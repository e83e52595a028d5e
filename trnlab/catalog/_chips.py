"""NeuronCore generations and chips: typed views over the catalogue's figures.

The model's rule for a chip's dense peak: the vendor's published chip rating where there is one
(vendor system totals are multiples of it), otherwise cores x per-core peak; both values are
always on record in :meth:`Chip.peak_figure`, so a learner can see where they differ.
Sparse peak = dense peak x the core's structured-sparsity speed-up (4:16 gives 4x on
NeuronCore-v3/v4, 2:4 gives 2x on GPUs), for the data types the vendor lists as sparse-capable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trnlab._checks import flag, short

from ._dtypes import DTYPES, dtype_name
from ._figures import Alternative, CatalogError, Figure

__all__ = ["PRICE_BASES", "Chip", "NeuronCoreSpec"]

#: The kinds of chip-hour price the catalogue holds (each price says which it is).
PRICE_BASES = ("on-demand", "market estimate")


def _need(owner: str, figures: Mapping[str, Figure], name: str, what_to_do: str = "") -> Any:
    try:
        return figures[name].value
    except KeyError:
        known = ", ".join(sorted(figures))
        raise CatalogError(
            f"{owner}: the catalogue has no figure {name!r}. {what_to_do}"
            f"Figures on record: {known}."
        ) from None


def figure_name(name: Any, owner: Any) -> str:
    """A figure's name as the catalogue spells it (lower case), or a teaching error."""
    if not isinstance(name, str) or not name.strip():
        raise CatalogError(
            f"{owner}: a figure is named by a string such as 'hbm_bandwidth' or 'peak.fp8', "
            f"not {short(name)}"
        )
    return name.strip().lower()


@dataclass(frozen=True)
class NeuronCoreSpec:
    """One NeuronCore generation (v2, v3, v4): memories, engines, DMA and tensor-engine rates.

    Per-core peak FLOP/s = ``pe_rows * pe_cols * 2 * tensor_clock * rate[dtype]``
    (2 FLOP per processing element per cycle: one multiply-accumulate).
    """

    key: str
    name: str
    figures: Mapping[str, Figure]
    tensor_rate: Mapping[str, Figure]
    published_peak: Mapping[str, Figure] = field(default_factory=dict)

    def _v(self, name: str) -> Any:
        return _need(self.name, self.figures, name)

    # Memories -------------------------------------------------------------------------------
    @property
    def sbuf_partitions(self) -> int:
        return int(self._v("sbuf_partitions"))

    @property
    def sbuf_partition_bytes(self) -> int:
        return int(self._v("sbuf_partition_bytes"))

    @property
    def sbuf_usable_partition_bytes(self) -> int:
        return int(self._v("sbuf_usable_partition_bytes"))

    @property
    def sbuf_bytes(self) -> int:
        """SBUF capacity of the core: partitions x bytes per partition."""
        return self.sbuf_partitions * self.sbuf_partition_bytes

    @property
    def psum_partition_bytes(self) -> int:
        return int(self._v("psum_partition_bytes"))

    @property
    def psum_banks(self) -> int:
        return int(self._v("psum_banks"))

    @property
    def psum_bank_bytes(self) -> int:
        """Bytes per PSUM bank per partition (2 KiB = 512 fp32 accumulators)."""
        return self.psum_partition_bytes // self.psum_banks

    @property
    def psum_bytes(self) -> int:
        return self.sbuf_partitions * self.psum_partition_bytes

    # Engines --------------------------------------------------------------------------------
    @property
    def pe_rows(self) -> int:
        return int(self._v("pe_rows"))

    @property
    def pe_cols(self) -> int:
        return int(self._v("pe_cols"))

    @property
    def tensor_clock(self) -> float:
        return float(self._v("tensor_clock"))

    @property
    def dma_bandwidth(self) -> float:
        return float(self._v("dma_bandwidth"))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Data types the tensor engine has a rate for, in catalogue order."""
        return tuple(d for d in DTYPES if d in self.tensor_rate)

    def peak_flops(self, dtype: str) -> float:
        """Dense tensor-engine peak of one core in FLOP/s (OP/s for int8).

        Raises
        ------
        CatalogError
            If this generation has no tensor-engine rate for ``dtype``.
        """
        d = dtype_name(dtype)
        if d not in self.tensor_rate:
            raise CatalogError(
                f"{self.name} has no tensor-engine rate for {d}; it has {', '.join(self.dtypes)}."
            )
        # 2 FLOP (multiply + add) per processing element per cycle (NDOC NKI architecture guides).
        return self.pe_rows * self.pe_cols * 2 * self.tensor_clock * self.tensor_rate[d].value

    def figure(self, name: str) -> Figure:
        """Any figure of this core by name (``"tensor_clock"``, ``"tensor_rate.fp8"``...)."""
        name = figure_name(name, self.name)
        group, _, sub = name.partition(".")
        tables = {"tensor_rate": self.tensor_rate, "published_peak": self.published_peak}
        if sub and group in tables:
            if sub in tables[group]:
                return tables[group][sub]
            raise CatalogError(
                f"{self.name}: no {group} figure for {sub!r}; on record: {sorted(tables[group])}"
            )
        if name in self.figures:
            return self.figures[name]
        _need(self.name, self.figures, name)
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Chip:
    """An accelerator chip: Trainium generations, Inferentia2, and comparison GPUs.

    Attributes
    ----------
    key : str
        Catalogue key (``"trn2"``).
    name : str
        Human name (``"Trainium2"``).
    kind : str
        ``"neuron"`` or ``"gpu"``.
    status : str
        ``"available"`` or ``"announced"`` (announced chips carry targets, not specs).
    core : NeuronCoreSpec or None
        The NeuronCore generation (None for GPUs and announced chips).
    """

    key: str
    name: str
    vendor: str
    kind: str
    status: str
    generation: int
    core: NeuronCoreSpec | None
    figures: Mapping[str, Figure]
    peaks: Mapping[str, Figure]
    published_sparse: tuple[tuple[tuple[str, ...], Figure], ...] = ()
    claims: Mapping[str, Figure] = field(default_factory=dict)
    targets: Mapping[str, Figure] = field(default_factory=dict)
    reference: Chip | None = None
    note: str = ""

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"

    def _v(self, name: str, what_to_do: str = "") -> Any:
        if self.status == "announced" and name not in self.figures:
            raise CatalogError(
                f"{self}: announced, not specified; AWS has published no {name!r}. "
                f"The catalogue holds only its targets relative to {self.reference}: "
                f"{', '.join(sorted(self.targets))}."
            )
        return _need(str(self), self.figures, name, what_to_do)

    def _optional(self, name: str) -> Any:
        fig = self.figures.get(name)
        return None if fig is None else fig.value

    # Memory ---------------------------------------------------------------------------------
    @property
    def hbm_bytes(self) -> int:
        """HBM capacity in bytes."""
        return int(self._v("hbm_bytes"))

    @property
    def hbm_bandwidth(self) -> float:
        """HBM bandwidth in bytes/s (an announced chip: its target, relative to its reference)."""
        if "hbm_bandwidth" in self.targets and self.reference is not None:
            return self.targets["hbm_bandwidth"].value * self.reference.hbm_bandwidth
        return float(self._v("hbm_bandwidth"))

    @property
    def cores(self) -> int | None:
        """NeuronCores per chip (SMs for a GPU); None where no source gives a count."""
        v = self._optional("cores")
        return None if v is None else int(v)

    @property
    def lnc(self) -> int:
        """Physical NeuronCores per logical NeuronCore in the default configuration (LNC=2 on
        Trainium2); 1 where a chip has no such setting (Trainium, Inferentia2, GPUs)."""
        v = self._optional("lnc")
        return 1 if v is None else int(v)

    @property
    def tp_ranks(self) -> int:
        """Tensor-parallel ranks a framework runs on one chip: each logical NeuronCore is a rank
        (a trn1.32xlarge serves at TP=32 over 16 chips, a trn2.48xlarge at TP=64 with LNC=2);
        a GPU is one rank."""
        if self.kind != "neuron" or not self.cores:
            return 1
        return self.cores // self.lnc

    @property
    def sbuf_bytes(self) -> int:
        """On-chip SBUF of all NeuronCores (computed: cores x SBUF per core)."""
        if self.core is None:
            raise CatalogError(f"{self} has no NeuronCore, so no SBUF; only Neuron chips do.")
        return self.cores * self.core.sbuf_bytes

    @property
    def power(self) -> float | None:
        """Power per chip in W where a source gives one, else None (scale models take a default)."""
        return self._optional("power")

    @property
    def price_per_chip_hour(self) -> float | None:
        """USD per chip-hour where a source gives one (of the kind :attr:`price_basis` names),
        else None."""
        return self._optional("price_per_chip_hour")

    @property
    def price_basis(self) -> str | None:
        """What :attr:`price_per_chip_hour` is: ``"on-demand"`` (an instance's list price over
        its chips) or ``"market estimate"`` (what providers charge, from an analyst); None
        without a price.

        Raises
        ------
        CatalogError
            For a price whose catalogue entry does not say which it is.
        """
        fig = self.figures.get("price_per_chip_hour")
        if fig is None:
            return None
        basis = fig.extra.get("basis")
        if basis not in PRICE_BASES:
            raise CatalogError(
                f"{self}: its price_per_chip_hour gives basis {basis!r}; the catalogue must say "
                f"which of {PRICE_BASES} it is, so that prices of different kinds are never "
                f"compared unmarked"
            )
        return basis

    @property
    def formats(self) -> tuple[str, ...]:
        """Data types the chip supports (as listed by its sources)."""
        return tuple(self._optional("formats") or ())

    @property
    def fp8_encodings(self) -> tuple[str, ...] | None:
        """The FP8 encodings the chip's matmul takes (trnlab.formats names) where a source lists
        them, else None (every FP8 encoding then counts at the chip's fp8 rate)."""
        value = self._optional("fp8_encodings")
        return tuple(value) if value else None

    def mx_gain_over_fp8(self) -> float | None:
        """How many times the chip's dense MXFP8 rate exceeds its plain FP8 rate, where it
        does (Trainium3: plain FP8 runs at the BF16 rate, the 4x is for the MX formats), else
        None (no MX or no FP8 rate, or MX no faster)."""
        try:
            fp8, mx = self.peak_flops("fp8"), self.peak_flops("mxfp8")
        except CatalogError:
            return None
        return mx / fp8 if mx > fp8 else None

    def mx_scale_rule(self, fmt: str) -> str:
        """The block-scale rule ``fmt``'s MX blocks get on this chip (a trnlab.formats
        ``scale_rule``): ``"trainium3"`` where the chip's own quantiser makes that format with a
        scale twice OCP's (catalogue figure ``mx_quantizer``), else ``"ocp"``, the MX v1.0
        sample conversion a host-side quantiser follows."""
        made = self._optional("mx_quantizer") or ()
        return "trainium3" if fmt in made else "ocp"

    def matmul_dtype(self, dtype: str) -> str:
        """The catalogue's rate name for ``dtype`` on this chip (``"fp8_e4m3fn"`` -> ``"fp8"``).

        Raises
        ------
        CatalogError
            For an unknown name, or an FP8 encoding this chip's matmul does not take where the
            catalogue lists its encodings (Trainium2 has no OCP E4M3FN; GPUs no IEEE-like
            E4M3): an encoding runs at the fp8 rate only where the generation has it.
        """
        d = dtype_name(dtype)
        key = dtype.strip().lower().replace("-", "_")
        why = self.fp8_refusal(key) if d == "fp8" and key.startswith("fp8_") else None
        if why:
            raise CatalogError(why)
        return d

    def fp8_refusal(self, encoding: str) -> str | None:
        """Why this chip's matmul cannot take the FP8 ``encoding`` (a trnlab.formats name), or
        None when it can (or when the catalogue lists no encodings for the chip)."""
        have = self.fp8_encodings
        if have is None or encoding in have:
            return None
        return (
            f"{self.name} has no {encoding} matmul: its matrix units take FP8 as "
            f"{', '.join(have)} ({self.figures['fp8_encodings'].note}). Choose one of those, "
            f"or a chip that has {encoding} (trnlab's fp8_e4m3 is the IEEE-like E4M3, max 240; "
            f"fp8_e4m3fn is OCP's, max 448)."
        )

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Data types with a dense peak on record, in catalogue order."""
        if self.status == "announced":
            return tuple(d for d in DTYPES if d in self.targets)
        return tuple(d for d in DTYPES if d in self.peaks)

    # Compute --------------------------------------------------------------------------------
    def peak_flops(self, dtype: str, sparse: bool = False, pattern: str | None = None) -> float:
        """Peak tensor throughput of the chip in FLOP/s (OP/s for int8).

        Parameters
        ----------
        dtype : str
            One of fp32, tf32, bf16, fp16, fp8, mxfp8, mxfp4, int8 (common spellings accepted).
        sparse : bool
            With N:M structured sparsity at its best pattern (4:16 on Trainium2/3, 2:4 on GPUs).
        pattern : str, optional
            A specific N:M pattern such as ``"4:8"``: the speed-up is M/N, capped at the best
            pattern's (AWS: 4:16 up to 4x, 4:12 3x, 4:8 2x). Implies ``sparse=True``.

        Raises
        ------
        CatalogError
            If the chip lacks the data type, has no published rate for it, or has no
            structured sparsity for it; the message names what it does have.
        """
        flag(sparse, "sparse", CatalogError)
        if pattern is None:
            return float(self.peak_figure(dtype, sparse=sparse).value)
        try:
            self.peak_figure(dtype, sparse=True)  # raises if the chip or type has no sparsity
        except CatalogError as err:
            raise CatalogError(f"sparsity pattern {pattern!r}: {err}") from None
        return self.peak_flops(dtype) * self.sparse_speedup(pattern)

    @property
    def sparsity_patterns(self) -> tuple[str, ...]:
        """N:M patterns the chip's tensor engine accelerates (empty if none)."""
        owner = self.core.figures if self.core is not None else self.figures
        fig = owner.get("sparsity_patterns")
        return tuple(fig.value) if fig is not None else ()

    def sparse_speedup(self, pattern: str) -> float:
        """Speed-up of an N:M pattern over dense: M/N, capped at the chip's best (4x on v3/v4)."""
        if not isinstance(pattern, str):
            raise CatalogError(
                f"a sparsity pattern is a string 'N:M' such as '4:16', not {short(pattern)}"
            )
        pattern = pattern.strip()
        if pattern not in self.sparsity_patterns:
            have = ", ".join(self.sparsity_patterns) or "none"
            raise CatalogError(
                f"{self} does not accelerate {pattern!r} sparsity; patterns: {have}."
            )
        n, m = (int(v) for v in pattern.split(":"))
        return min(m / n, float(self._sparsity()[0].value))

    def peak_figure(self, dtype: str, sparse: bool = False) -> Figure:
        """The peak as a :class:`Figure`: value in use, sources, and every alternative on record."""
        flag(sparse, "sparse", CatalogError)
        d = dtype_name(dtype)
        if self.status == "announced":
            return self._target_peak(d, sparse)
        if d not in self.peaks:
            raise CatalogError(self._missing_dtype_message(d))
        dense = self.peaks[d]
        if not sparse:
            return dense
        return self._sparse_peak(d, dense)

    def figure(self, name: str) -> Figure:
        """Any figure of this chip by name: ``"hbm_bandwidth"``, ``"peak.fp8"``,
        ``"peak_sparse.bf16"``, ``"sbuf_bytes"``, or a claim such as ``"claims.cores"``."""
        name = figure_name(name, self)
        group, _, sub = name.partition(".")
        if group in ("peak", "peak_sparse") and sub:
            try:
                return self.peak_figure(sub, sparse=group == "peak_sparse")
            except CatalogError as err:
                raise CatalogError(f"{self}: figure {name!r}: {err}") from None
        if group == "claims" and sub in self.claims:
            return self.claims[sub]
        if group == "targets" and sub in self.targets:
            return self.targets[sub]
        if name == "sbuf_bytes" and self.core is not None:
            core_fig = self.core.figures["sbuf_partition_bytes"]
            return Figure(
                name=f"{self.key}.sbuf_bytes",
                value=self.sbuf_bytes,
                unit="B",
                sources=self.figures["cores"].sources + core_fig.sources,
                why=f"{self.cores} cores x {self.core.sbuf_partitions} partitions x "
                f"{self.core.sbuf_partition_bytes} B",
                computed=True,
            )
        if name == "hbm_bandwidth" and "hbm_bandwidth" in self.targets:
            t = self.targets["hbm_bandwidth"]
            return Figure(
                name=f"{self.key}.hbm_bandwidth",
                value=self.hbm_bandwidth,
                unit="B/s",
                sources=t.sources,
                why=f"announced target: {t.value:g} x {self.reference} ({t.note})",
                computed=True,
            )
        if name in self.figures:
            return self.figures[name]
        self._v(name)
        raise AssertionError("unreachable")

    def all_figures(self) -> dict[str, Figure]:
        """Every figure of the chip on record, computed ones included, by name."""
        out = dict(self.figures)
        for d in self.dtypes:
            out[f"peak.{d}"] = self.peak_figure(d)
        for name in ("sbuf_bytes",):
            if self.core is not None:
                out[name] = self.figure(name)
        out.update({f"claims.{k}": v for k, v in self.claims.items()})
        out.update({f"targets.{k}": v for k, v in self.targets.items()})
        return out

    # Internals ------------------------------------------------------------------------------
    def _sparsity(self) -> tuple[Figure | None, tuple[str, ...]]:
        owner = self.core.figures if self.core is not None else self.figures
        speedup = owner.get("sparse_speedup")
        kinds = owner.get("sparse_dtypes")
        return speedup, tuple(kinds.value) if kinds is not None else ()

    def _sparse_peak(self, d: str, dense: Figure) -> Figure:
        speedup, sparse_dtypes = self._sparsity()
        if speedup is None:
            what = (
                f"{self} has no structured sparsity: N:M sparsity arrived with NeuronCore-v3 "
                f"(Trainium2)"
                if self.kind == "neuron"
                else f"{self}: the catalogue holds no published structured-sparsity rate for it"
            )
            raise CatalogError(
                f"{what}. Ask for sparse=False, or pick a chip that has one (trn2, trn3, h100, "
                f"b200)."
            )
        if d not in sparse_dtypes:
            raise CatalogError(
                f"{self}: structured sparsity applies to {', '.join(sparse_dtypes)} inputs, "
                f"not {d}. Ask for sparse=False or one of those types."
            )
        value = dense.value * speedup.value
        ours = Alternative(
            label=f"{speedup.value:g} x dense (trnlab)",
            value=value,
            sources=dense.sources + speedup.sources,
            note=speedup.note,
            used=True,
        )
        published = tuple(
            Alternative(label=f.sources[0].key, value=f.value, sources=f.sources, note=f.note)
            for dtypes, f in self.published_sparse
            if d in dtypes
        )
        return Figure(
            name=f"{self.key}.peak_sparse.{d}",
            value=value,
            unit=dense.unit,
            sources=ours.sources,
            alternatives=(ours, *published) if published else (),
            why=f"dense {d} peak x {speedup.value:g} (the best N:M pattern's speed-up)",
            computed=True,
        )

    def _target_peak(self, d: str, sparse: bool) -> Figure:
        if sparse or d not in self.targets or self.reference is None:
            raise CatalogError(
                f"{self} is announced, not specified: AWS has given targets only for "
                f"{', '.join(self.dtypes)} (dense), relative to {self.reference}."
            )
        t = self.targets[d]
        value = t.value * self.reference.peak_flops(d)
        return Figure(
            name=f"{self.key}.peak.{d}",
            value=value,
            unit="FLOP/s",
            sources=t.sources,
            why=f"announced target: {t.value:g} x {self.reference} {d} ({t.note})",
            computed=True,
        )

    def _missing_dtype_message(self, d: str) -> str:
        have = ", ".join(self.dtypes)
        if d in self.formats:
            return (
                f"{self} supports {d} but no source publishes a tensor-engine rate for it, "
                f"and trnlab does not invent one. Types with a published peak: {have}."
            )
        if d.startswith("mx") and self.kind == "neuron":
            return (
                f"{self} has no {d}: OCP MX formats arrived with NeuronCore-v4 (Trainium3). "
                f"Types it has: {have}."
            )
        return f"{self} has no {d} tensor path. Types it has: {have}."


def core_derived(chip_key: str, cores: Figure, core: NeuronCoreSpec, d: str) -> Alternative:
    """The 'cores x per-core peak' value of a chip's peak, as an alternative on record."""
    per_core = core.peak_flops(d)
    return Alternative(
        label="cores x per-core (trnlab)",
        value=cores.value * per_core,
        sources=cores.sources + core.figures["tensor_clock"].sources + core.tensor_rate[d].sources,
        note=f"{cores.value} x {core.pe_rows}x{core.pe_cols} PEs x 2 x "
        f"{core.tensor_clock / 1e9:g} GHz x {core.tensor_rate[d].value:g}",
    )
