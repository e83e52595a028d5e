"""The model behind ScaleExplorer: one training job, its plan on a system, and other chips.

Plain Python over :mod:`trnlab.scale` and :mod:`trnlab.catalog` (no ipywidgets, no plotly).
The job (model, batch, tokens, format) is placed on a system (an instance, an UltraServer, or
an UltraCluster of them) with a chosen split, or the best split the search finds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from trnlab import catalog, scale
from trnlab._checks import choose, flag, number, whole
from trnlab.catalog import CatalogError, System
from trnlab.scale import Parallelism, PlanResult, WorkloadError
from trnlab.units import si

from ._errors import SettingError

__all__ = ["ChipComparisonRow", "ScaleModel", "SearchJob"]

DTYPES = ("bf16", "fp8", "mxfp8")


@dataclass(frozen=True)
class ChipComparisonRow:
    """The same job on another chip at the same chip count: compute and memory only."""

    chip: str
    name: str
    days: float | None
    fits: bool | None
    cost: float | None
    energy_mwh: float | None
    note: str


@dataclass(eq=False)
class SearchJob:
    """A plan search running on a worker thread (so a dashboard's kernel stays responsive).

    ``progress`` goes from 0 to 1; :meth:`cancel` stops the search between plans (the model
    keeps its last plan); :meth:`wait` blocks until it ends. On success the model's state and
    plan are replaced together; ``error`` holds the refusal otherwise.
    """

    progress: float = 0.0
    error: Exception | None = None
    cancelled: bool = False
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the search has ended (finished, refused or cancelled)."""
        return self._done.wait(timeout)


#: The largest token budget taken: 1e16, about 600 times Llama 3's 15.6 trillion.
MAX_TOKENS = 1e16


def _tokens_text(tokens: float) -> str:
    """A token count as people say it: 15.6T, 300B, 40M, 1,000 tokens."""
    for unit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if tokens >= unit:
            return f"{tokens / unit:,.3g}{suffix} tokens"
    return f"{tokens:,.0f} tokens"


def _duration_text(seconds: float) -> str:
    """A training time in the unit that reads best: days, hours, minutes or seconds."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:,.1f} hours"
    if seconds >= 120:
        return f"{seconds / 60:,.1f} minutes"
    return f"{seconds:,.3g} s"


def _energy_text(joules: float) -> str:
    """Energy in MWh, or kWh below one MWh."""
    mwh = joules / 3.6e9
    return (
        f"{mwh:,.0f} MWh"
        if mwh >= 10
        else f"{mwh:,.2g} MWh"
        if mwh >= 1
        else f"{mwh * 1e3:,.3g} kWh"
    )


def _faster_format(chip, dtype: str) -> list[str]:
    """A note where the chosen format misses the chip's faster one: plain FP8 on a chip whose
    MXFP8 rate is higher (Trainium3, whose plain FP8 runs at its BF16 rate)."""
    gain = chip.mx_gain_over_fp8() if catalog.dtype_name(dtype) == "fp8" else None
    return [f"plain FP8 runs at its BF16 rate: mxfp8 gets its {gain:.2g}x"] if gain else []


def _split_advice(st: dict, chips: int, name: str) -> str:
    """Why a hand-picked split does not fit the system, and splits that would."""
    tp, cp, pp = st["tp"], st["cp"], st["pp"]
    divisors = [d for d in range(1, min(chips, 64) + 1) if chips % d == 0]
    head = (
        f"tp x cp x pp = {tp * cp * pp} does not divide the {chips:,} chips of {name}; data "
        f"parallelism takes the rest, so tp x cp x pp must be one of {', '.join(map(str, divisors))}"
        f"{'...' if chips > 64 else ''}"
    )
    if chips % (tp * cp) == 0:
        fits = [d for d in divisors if (chips // (tp * cp)) % d == 0 and d > 1][:6]
        if fits:
            head += f": keep tp {tp} and cp {cp} with pp {', '.join(map(str, fits))}"
    return head + ", or tick 'best split (search)'"


class ScaleModel:
    """A training job and its plan.

    Parameters
    ----------
    model : str
        A preset of :data:`trnlab.scale.PRESETS`.
    system : str
        A catalogue system key; with ``count > 1``, an UltraCluster of that many.
    count : int
    dtype : {"bf16", "fp8", "mxfp8"}
    tp, cp, pp, ep, zero, recompute, micro_batch
        The split; ``dp`` is what is left (chips / (tp x cp x pp)).
    auto : bool
        Ignore the split and use the search's best plan.
    global_batch, seq_len : int
    tokens : float
        Training budget in tokens.
    """

    SETTINGS = (
        "model",
        "system",
        "count",
        "dtype",
        "tp",
        "cp",
        "pp",
        "ep",
        "zero",
        "recompute",
        "micro_batch",
        "auto",
        "global_batch",
        "seq_len",
        "tokens",
    )

    def __init__(
        self,
        model: str = "llama3-70b",
        system: str = "trn2-ultraserver",
        count: int = 1,
        dtype: str = "bf16",
        tp: int = 8,
        cp: int = 1,
        pp: int = 4,
        ep: int = 1,
        zero: int = 1,
        recompute: str = "full",
        micro_batch: int = 1,
        auto: bool = False,
        global_batch: int = 512,
        seq_len: int = 4096,
        tokens: float = 1e12,
    ) -> None:
        self._state: dict = {}
        self._result: PlanResult | None = None
        self._lock = threading.Lock()
        self.set(
            model=model,
            system=system,
            count=count,
            dtype=dtype,
            tp=tp,
            cp=cp,
            pp=pp,
            ep=ep,
            zero=zero,
            recompute=recompute,
            micro_batch=micro_batch,
            auto=auto,
            global_batch=global_batch,
            seq_len=seq_len,
            tokens=tokens,
        )

    def __getattr__(self, name: str):
        state = self.__dict__.get("_state", {})
        if name in state:
            return state[name]
        raise AttributeError(name)

    # State ------------------------------------------------------------------------------------
    @staticmethod
    def models() -> list[str]:
        return scale.models()

    @staticmethod
    def systems() -> list[tuple[str, str]]:
        return [(s.name, s.key) for s in catalog.systems()]

    def system_obj(self, state: dict | None = None) -> System:
        st = state or self._state
        base = catalog.system(st["system"])
        return base if st["count"] == 1 else catalog.cluster(base, st["count"])

    def set(self, **changes) -> ScaleModel:
        """Change settings and re-plan; all-or-nothing.

        Raises
        ------
        SettingError
            For an unknown model, system, format or setting, a split that does not divide the
            chips, or sizes out of range; the state and the last plan are kept.
        """
        st, sysobj = self._validated(changes)
        result = self._plan(st, sysobj)
        self._state, self._result = st, result
        return self

    def set_async(self, on_progress=None, on_done=None, **changes) -> SearchJob:
        """Like :meth:`set`, but plan (or search) on a worker thread.

        Settings are checked at once (a SettingError as :meth:`set`); the plan runs on a thread
        that reports ``on_progress(share)`` and calls ``on_done(job)`` when it ends.
        """
        st, sysobj = self._validated(changes)
        job = SearchJob()

        def report(share: float) -> None:
            job.progress = share
            if on_progress is not None:
                on_progress(share)

        def run() -> None:
            try:
                result = self._plan(st, sysobj, progress=report, cancel=job._stop)
                with self._lock:
                    self._state, self._result = st, result
            except scale.SearchCancelled:
                job.cancelled = True
            except ValueError as err:
                job.error = err
            finally:
                job._done.set()
                if on_done is not None:
                    on_done(job)

        job.thread = threading.Thread(target=run, name="trnlab-search", daemon=True)
        job.thread.start()
        return job

    def _validated(self, changes: dict):
        """Every setting checked and spelled canonically before any is applied."""
        unknown = set(changes) - set(self.SETTINGS)
        if unknown:
            raise SettingError(
                f"ScaleModel has no setting {sorted(unknown)}; use {list(self.SETTINGS)}"
            )
        st = {**self._state, **changes}
        for name in ("tp", "cp", "pp", "ep", "micro_batch", "global_batch", "seq_len", "count"):
            st[name] = whole(st[name], name, 1, None, SettingError)
        st["tokens"] = number(
            st["tokens"], "tokens (the token budget)", 0, MAX_TOKENS, lo_open=True,
            error=SettingError,
        )  # fmt: skip
        st["auto"] = flag(st["auto"], "auto (search every split)", SettingError)
        st["dtype"] = choose(st["dtype"], DTYPES, "format (dtype)", SettingError)
        if isinstance(st["zero"], bool) or st["zero"] not in (0, 1, 2, 3):
            raise SettingError(f"zero (the ZeRO stage) must be 0, 1, 2 or 3, not {st['zero']!r}")
        try:
            spec = scale.model(st["model"])
            st["model"] = spec.name if isinstance(st["model"], str) else spec
            st["system"] = catalog.system(st["system"]).key
            sysobj = self.system_obj(st)
            st["recompute"] = scale.recompute_mode(st["recompute"])
        except (WorkloadError, CatalogError) as err:
            raise SettingError(str(err)) from None
        try:
            sysobj.chip.peak_flops(st["dtype"])
        except CatalogError as err:
            raise SettingError(str(err)) from None
        if not st["auto"] and sysobj.chips % (st["tp"] * st["cp"] * st["pp"]):
            raise SettingError(_split_advice(st, sysobj.chips, sysobj.name))
        return st, sysobj

    def _plan(self, st: dict, sysobj: System, progress=None, cancel=None) -> PlanResult:
        common = dict(
            global_batch=st["global_batch"],
            seq_len=st["seq_len"],
            dtype=st["dtype"],
            tokens=st["tokens"],
        )
        try:
            if st["auto"]:
                found = scale.search(
                    st["model"], sysobj, progress=progress, cancel=cancel, **common
                )
                if found.best is not None:
                    return found.best
                raise SettingError(found.why_nothing_fits())
            p = Parallelism(
                tp=st["tp"],
                pp=st["pp"],
                dp=sysobj.chips // (st["tp"] * st["cp"] * st["pp"]),
                cp=st["cp"],
                ep=st["ep"],
                zero=st["zero"],
                recompute=st["recompute"],
                micro_batch=st["micro_batch"],
            )
            return scale.plan(st["model"], sysobj, p, **common)
        except scale.SearchCancelled:
            raise
        except WorkloadError as err:
            raise SettingError(str(err)) from None

    # Results ----------------------------------------------------------------------------------
    @property
    def result(self) -> PlanResult:
        return self._result

    def memory_stack(self) -> dict[str, float]:
        """Bytes per chip by kind, and the usable capacity. ZeRO-3's gathered weights count
        as weights, the last stage's logits as activations."""
        m = self._result.memory
        return {
            "weights": m.weights + m.buffers,
            "gradients": m.gradients,
            "optimizer": m.optimizer,
            "activations": m.activations + m.logits,
            "capacity": self._result.capacity,
        }

    def step_breakdown(self) -> dict[str, float]:
        return dict(self._result.step)

    def compare_chips(
        self, chips: tuple[str, ...] = ("trn1", "trn2", "trn3", "h100", "h200", "b200")
    ) -> list[ChipComparisonRow]:
        """The same job at the same chip count on other chips: compute time at each chip's
        achieved matmul rate, whether this split's memory fits its HBM, cost and energy.

        A quick side-by-side of chips: communication and the pipeline bubble are left out for
        every chip alike. For a full plan with its fabric, pick the GPU system itself
        (p5.48xlarge, p5en.48xlarge, p6-b200.48xlarge, gb200-nvl72, dgx-a100) as the system.
        """
        r = self._result
        n = r.system.chips
        job_flops = r.tokens * r.model.training_flops_per_token(
            recompute=r.parallel.recompute, seq_len=r.seq_len
        )
        rows = []
        for key in chips:
            chip = catalog.chip(key)
            try:
                flops, _ = scale.achieved_flops_per_chip(key, catalog.dtype_name(r.dtype))
            except CatalogError as err:
                rows.append(ChipComparisonRow(key, chip.name, None, None, None, None, str(err)))
                continue
            seconds = job_flops / (n * flops)
            fits = r.memory.total <= chip.hbm_bytes * scale._plan.USABLE_HBM
            price = chip.price_per_chip_hour
            cost = seconds / 3600 * n * price if price is not None else None
            energy = seconds * n * chip.power / 3.6e9 if chip.power is not None else None
            notes = _faster_format(chip, r.dtype)
            if price is None:
                notes.append("no price on record")
            else:  # prices differ in kind: say which this one is
                notes.append(f"${price:.2f} per chip-hour, {chip.price_basis}")
            if chip.power is None:
                notes.append("no power figure on record")
            rows.append(
                ChipComparisonRow(
                    key, chip.name, seconds / 86400, fits, cost, energy, "; ".join(notes)
                )
            )
        return rows

    def summary(self) -> str:
        r = self._result
        gib = 2**30
        head = (
            f"{r.model.name} ({r.model.params / 1e9:,.0f}B parameters) on {r.system.name} "
            f"({r.system.chips:,} x {r.system.chip.name}), {r.dtype}, {r.global_batch} x "
            f"{r.seq_len} tokens per step, split {r.parallel}."
        )
        if not r.feasible:
            return head + " Not possible: " + "; ".join(r.problems) + "."
        parts = sorted(r.step.items(), key=lambda kv: -kv[1])
        biggest = ", ".join(f"{k} {v / r.step_time:.0%}" for k, v in parts if v > 0)
        money = (
            " (no price on record)"
            if r.cost is None
            else f", about ${r.cost:,.0f}"
            if r.cost >= 100
            else f", about ${r.cost:,.2f}"
        )
        energy = f" and {_energy_text(r.energy)}" if r.energy is not None else ""
        return (
            f"{head} Memory {r.memory.total / gib:,.1f} of {r.capacity / gib:,.1f} GiB per chip. "
            f"Step {r.step_time:,.2f} s ({biggest}); MFU {r.mfu:.1%}; "
            f"{si(r.tokens_per_second, 'tokens/s')}; {_tokens_text(r.tokens)} take "
            f"{_duration_text(r.time_to_train)}{money}{energy}."
        )
