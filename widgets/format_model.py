"""The model behind FormatExplorer: formats side by side on one data set, error against speed.

Plain Python over :mod:`trnlab.formats` and :mod:`trnlab.catalog` (no ipywidgets, no plotly),
so it is tested without a browser. Every number the view draws comes from :meth:`rows`,
:meth:`histogram` and :meth:`grid`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from trnlab import catalog, formats
from trnlab._checks import choose, flag, short, whole
from trnlab._threads import blas_threads_for
from trnlab.catalog import CatalogError
from trnlab.units import si

from ._errors import SettingError

__all__ = ["FormatComparison", "FormatRow"]

MAX_FORMATS = 6
BLOCK_SIZES = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class FormatRow:
    """What one format does to the data, and what it buys on the chosen chip."""

    fmt: str
    bits_per_value: float
    rms_rel_error: float
    max_abs_error: float
    flushed_to_zero: float
    clipped: float
    non_finite: float
    matmul_rel_error: float
    matmul_snr_db: float
    throughput: float | None
    throughput_note: str


@lru_cache(maxsize=16)
def _data(distribution: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # Activations x (rows, K) and weights w (K, N): the matmul contracts over K.
    x = formats.sample(distribution, (size, size), seed)
    w = formats.sample("weights", (size, size), seed + 1)
    for arr in (x, w):
        arr.setflags(write=False)
    return x, w


def _standalone(fmt: str) -> bool:
    """False for an element type with no scale of its own (int8_mx: the MXINT8 element)."""
    s = formats.spec(fmt)
    return not (s.kind == "int" and not s.per_tensor_scale)


def _format_list(value) -> tuple[str, ...]:
    """1 to MAX_FORMATS distinct format names, canonical (``"BF16"`` -> ``"bf16"``)."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise SettingError(
            f"formats is a list of 1 to {MAX_FORMATS} names such as ['bf16', 'mxfp4'], "
            f"not {short(value)}"
        )
    if not 1 <= len(value) <= MAX_FORMATS:
        raise SettingError(f"compare 1 to {MAX_FORMATS} formats at once, not {len(value)}")
    names = []
    for f in value:
        try:
            name = formats.spec(f).name
        except formats.FormatError as err:
            raise SettingError(f"formats: {err}") from None
        if not _standalone(name):
            raise SettingError(
                f"{name} is the element type of MXINT8 (an implied scale of 2^-6 inside a "
                f"block), not a format of its own: compare 'mxint8' or 'int8' instead"
            )
        if name in names:
            raise SettingError(f"formats lists {name} twice; name each format once")
        names.append(name)
    return tuple(names)


def _spec(fmt: str, block_size: int):
    s = formats.spec(fmt)
    if s.kind == "mx" and block_size != s.block_size:
        s = dataclasses.replace(s, block_size=block_size)
    return s


def _clip_threshold(s, x: np.ndarray, rule: str) -> np.ndarray | float:
    """Magnitude above which a value was clipped: the top of the grid plus half its last gap
    (times the block scale for MX, set by ``rule``; times the per-tensor scale for int8)."""
    element = s.element if s.kind == "mx" else s
    if element.kind == "float":  # the last gap is one step of the top binade, 2**(emax - m)
        top = element.max + math.ldexp(1.0, element.emax - element.man_bits - 1)
    else:
        g = np.asarray(formats.grid(element), dtype=np.float64)
        g = np.unique(np.abs(g[np.isfinite(g)]))
        top = g[-1] + (g[-1] - g[-2]) / 2
    if s.kind == "mx":
        scales = formats.encode(x, s, scale_rule=rule).scales.astype(np.float64) - 127
        per_value = np.repeat(2.0**scales, s.block_size, axis=-1)[..., : x.shape[-1]]
        return top * per_value
    if s.kind == "int":
        return top * float(np.abs(x).max()) / 127
    return top


@lru_cache(maxsize=256)
def _errors(
    fmt: str, block_size: int, distribution: str, size: int, seed: int, rounding: str, rule: str
) -> dict:
    """Error metrics of one format on one data set, MX blocks scaled by ``rule`` (cached: a
    chip change that keeps the rule reuses them)."""
    x, w = _data(distribution, size, seed)
    s = _spec(fmt, block_size)
    mx = {"scale_rule": rule} if s.kind == "mx" else {}
    q = formats.quantize(x, s, rounding=rounding, seed=seed, axis=-1, **mx)
    finite = np.isfinite(q)
    err = np.where(finite, q - x, 0.0).astype(np.float64)
    with blas_threads_for(x.size):
        norm = float(np.linalg.norm(x.astype(np.float64)))
        err_norm = float(np.linalg.norm(err))
    mm = formats.matmul(x, w, s, rounding=rounding, seed=seed, **mx)
    return {
        "bits_per_value": float(s.bits_per_value),
        "rms_rel_error": err_norm / norm if norm else 0.0,
        "max_abs_error": float(np.abs(err).max()),
        "flushed_to_zero": float(np.mean((q == 0) & (x != 0))),
        "clipped": float(
            np.mean(finite & (np.abs(x.astype(np.float64)) > _clip_threshold(s, x, rule)))
        ),
        "non_finite": float(np.mean(~finite)),
        "matmul_rel_error": float(mm.rel_error),
        "matmul_snr_db": float(mm.snr_db),
    }


@lru_cache(maxsize=16)
def _histogram(distribution: str, size: int, seed: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    x = _data(distribution, size, seed)[0]
    logs = np.log2(np.abs(x[x != 0]).astype(np.float64))
    counts, edges = np.histogram(logs, bins=bins)
    return edges, counts


@lru_cache(maxsize=128)
def _grid(
    fmt: str, block_size: int, distribution: str, size: int, seed: int, rule: str
) -> np.ndarray:
    x = _data(distribution, size, seed)[0]
    s = _spec(fmt, block_size)
    if s.kind == "mx":
        scales = formats.encode(x, s, scale_rule=rule).scales.astype(np.int64) - 127
        values = formats.grid(s.element) * 2.0 ** float(np.median(scales))
    elif s.kind == "int":
        values = np.arange(1, 128) * (float(np.abs(x).max()) / 127)
    elif s.bits > 20:  # fp32: 2**32 values, denser than any plot; tick each power of two
        values = 2.0 ** np.arange(s.emin - s.man_bits, s.emax + 1, dtype=np.float64)
    else:
        values = formats.grid(s)
    values = np.asarray(values, dtype=np.float64)
    logs = np.log2(values[np.isfinite(values) & (values > 0)])
    edges, _ = _histogram(distribution, size, seed, 60)
    return logs[(logs >= edges[0] - 2) & (logs <= edges[-1] + 2)]


class FormatComparison:
    """Formats compared on one seeded data set.

    Parameters
    ----------
    formats : sequence of str
        Up to six names from :func:`trnlab.formats.formats`.
    distribution : str
        One of :data:`trnlab.formats.DISTRIBUTIONS`.
    rounding : {"nearest", "stochastic"}
    block_size : int
        MX block size (32 is the OCP standard; others show the trade-off).
    chip : str
        Catalogue chip whose peak for each format is shown.
    sparse : bool
        Throughput with the chip's best N:M sparsity.
    size : int
        The data are ``size x size`` (and the matmul ``size^3``).
    seed : int
    """

    ROUNDINGS = ("nearest", "stochastic")

    def __init__(
        self,
        formats: tuple[str, ...] | list[str] = (
            "bf16",
            "fp8_e4m3",
            "fp8_e4m3fn",
            "mxfp8_e4m3",
            "mxfp4",
        ),
        distribution: str = "outlier_channels",
        rounding: str = "nearest",
        block_size: int = 32,
        chip: str = "trn3",
        sparse: bool = False,
        size: int = 128,
        seed: int = 0,
    ) -> None:
        self.formats: tuple[str, ...] = ()
        self.distribution, self.rounding, self.block_size = "gaussian", "nearest", 32
        self.chip, self.sparse, self.size, self.seed = "trn3", False, 256, 0
        self.set(
            formats=formats,
            distribution=distribution,
            rounding=rounding,
            block_size=block_size,
            chip=chip,
            sparse=sparse,
            size=size,
            seed=seed,
        )

    # State ------------------------------------------------------------------------------------
    @staticmethod
    def available_formats() -> tuple[str, ...]:
        """Every format that quantises values on its own (not MXINT8's bare element type)."""
        return tuple(f for f in formats.formats() if _standalone(f))

    @staticmethod
    def available_chips() -> list[tuple[str, str]]:
        return [(c.name, c.key) for c in catalog.chips() if c.status == "available"]

    def set(self, **changes) -> FormatComparison:
        """Change any setting; all-or-nothing: every value is checked before any is applied.

        Raises
        ------
        SettingError
            For an unknown format, distribution, rounding, chip or block size, a flag that is
            not a boolean, or a size or seed out of range; the state is left as it was.
        """
        allowed = (
            "formats",
            "distribution",
            "rounding",
            "block_size",
            "chip",
            "sparse",
            "size",
            "seed",
        )
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise SettingError(f"FormatComparison has no setting {unknown}; use {list(allowed)}")
        new = {k: changes.get(k, getattr(self, k)) for k in allowed}
        fmts = _format_list(new["formats"])
        distribution = choose(
            new["distribution"], formats.DISTRIBUTIONS, "distribution", SettingError
        )
        rounding = choose(new["rounding"], self.ROUNDINGS, "rounding", SettingError)
        block_size = new["block_size"]
        if (
            isinstance(block_size, bool)
            or not isinstance(block_size, numbers.Integral)
            or block_size not in BLOCK_SIZES
        ):
            raise SettingError(
                f"MX block size {block_size!r} is not offered; choose from {BLOCK_SIZES} "
                f"(OCP MX v1.0 fixes 32)"
            )
        try:
            chip = catalog.chip(new["chip"])
        except CatalogError as err:
            raise SettingError(str(err)) from None
        if chip.status != "available":
            have = ", ".join(k for _, k in self.available_chips())
            raise SettingError(
                f"{chip} is {chip.status}, with targets but no published peak per format; "
                f"compare on one of {have}"
            )
        sparse = flag(new["sparse"], "sparse", SettingError)
        size = new["size"]
        if (
            isinstance(size, bool)
            or not isinstance(size, numbers.Integral)
            or not 32 <= size <= 2048
            or size % 32
        ):
            raise SettingError(f"size must be a multiple of 32 between 32 and 2048, not {size!r}")
        seed = whole(new["seed"], "seed", 0, 2**32 - 1, SettingError)
        self.formats, self.distribution, self.rounding = fmts, distribution, rounding
        self.block_size, self.chip, self.sparse = int(block_size), chip.key, sparse
        self.size, self.seed = int(size), seed
        return self

    # Results ----------------------------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        return _data(self.distribution, self.size, self.seed)[0]

    def _spec(self, fmt: str):
        return _spec(fmt, self.block_size)

    def scale_rule(self, fmt: str) -> str:
        """How ``fmt``'s MX blocks are scaled on the chosen chip: ``"trainium3"`` where the
        chip's own quantiser makes the format (its scale twice OCP's), else ``"ocp"`` (the
        MX v1.0 sample conversion); ``"ocp"`` for a format without blocks."""
        fmt = _format_list([fmt])[0]
        return catalog.chip(self.chip).mx_scale_rule(fmt) if self._spec(fmt).kind == "mx" else "ocp"

    def row(self, fmt: str) -> FormatRow:
        """Error and throughput of one format on the current data."""
        fmt = _format_list([fmt])[0]
        errors = _errors(
            fmt,
            self.block_size,
            self.distribution,
            self.size,
            self.seed,
            self.rounding,
            self.scale_rule(fmt),
        )
        try:
            peak = formats.throughput(fmt, self.chip, sparse=self.sparse)
            note = ""
        except (CatalogError, ValueError) as exc:
            peak, note = None, str(exc)
        return FormatRow(fmt=fmt, **errors, throughput=peak, throughput_note=note)

    def rows(self) -> list[FormatRow]:
        return [self.row(f) for f in self.formats]

    def histogram(self, bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
        """Counts of log2|x| over the non-zero data: (bin edges, counts)."""
        bins = whole(bins, "bins", 1, 1000, SettingError)
        return _histogram(self.distribution, self.size, self.seed, bins)

    def grid(self, fmt: str) -> np.ndarray:
        """Positive representable magnitudes of ``fmt`` as log2 values, over the data's range.

        For MX formats the element grid is shown at the median block scale of the data (by
        :meth:`scale_rule`); for
        int8 at its per-tensor scale; for fp32, whose 2^32 values no plot can show, at each
        power of two.
        """
        fmt = _format_list([fmt])[0]
        return _grid(
            fmt, self.block_size, self.distribution, self.size, self.seed, self.scale_rule(fmt)
        )

    def _mx_rule_sentence(self, chip_name: str) -> str:
        """', MX blocks of 32: ... .' naming the scale rule each MX format gets, or '.'."""
        mx = [f for f in self.formats if self._spec(f).kind == "mx"]
        if not mx:
            return "."
        own = [f for f in mx if self.scale_rule(f) == "trainium3"]
        ocp = [f for f in mx if f not in own]
        said = []
        if own:
            said.append(
                f"{', '.join(own)} scaled as {chip_name}'s quantiser does (nisa.quantize_mx: "
                f"a scale twice OCP's, so a block's largest value never clips)"
            )
        if ocp:
            why = (
                f"{chip_name}'s quantiser does not make {'them' if len(ocp) > 1 else 'it'}: "
                f"such data come quantized from the host"
                if own
                else f"the catalogue holds no quantiser rule for {chip_name}"
            )
            said.append(f"{', '.join(ocp)} by OCP MX v1.0's sample rule ({why})")
        return f", MX blocks of {self.block_size}: {'; '.join(said)}."

    def summary(self) -> str:
        """Sentences of numbers saying what the charts show."""
        rows = self.rows()
        x = self.data
        chip = catalog.chip(self.chip)
        head = (
            f"{self.distribution.replace('_', ' ')} data ({x.size:,} values, |x| up to "
            f"{float(np.abs(x).max()):.3g}), {self.rounding} rounding"
        )
        parts = [head + self._mx_rule_sentence(chip.name)]
        for r in rows:
            speed = (
                f"{si(r.throughput, 'FLOP/s')} on {chip.name}{' (sparse)' if self.sparse else ''}"
                if r.throughput
                else f"no rate on {chip.name}"
            )
            extra = ""
            if r.clipped > 0.001:
                extra += f", {r.clipped:.1%} clipped"
            if r.non_finite > 0:
                extra += f", {r.non_finite:.1%} became Inf/NaN"
            if r.flushed_to_zero > 0.01:
                extra += f", {r.flushed_to_zero:.1%} flushed to zero"
            rms = f"{r.rms_rel_error:.2%} RMS error" + (
                " on the values that stayed finite" if r.non_finite > 0 else ""
            )
            snr = (
                f"matmul SNR {r.matmul_snr_db:.1f} dB"
                if np.isfinite(r.matmul_snr_db)
                else "the matmul overflowed (SNR -inf)"
            )
            parts.append(f"{r.fmt}: {r.bits_per_value:g} bits/value, {rms}{extra}, {snr}, {speed}.")
        ok = [r for r in rows if np.isfinite(r.matmul_snr_db) and r.non_finite == 0]
        if ok:
            best = max(ok, key=lambda r: r.matmul_snr_db)
            parts.append(f"Most accurate matmul: {best.fmt}.")
        fast = [r for r in rows if r.throughput]
        if fast:
            top = max(r.throughput for r in fast)
            tied = [r.fmt for r in fast if r.throughput == top]
            if len(tied) == 1:
                parts.append(f"Fastest on {chip.name}: {tied[0]}.")
            elif len(tied) == len(rows):
                parts.append(f"On {chip.name} every format runs at {si(top, 'FLOP/s')}.")
            else:
                names = f"{', '.join(tied[:-1])} and {tied[-1]}"
                parts.append(f"Fastest on {chip.name}: {names} ({si(top, 'FLOP/s')} each).")
        return " ".join(parts)
