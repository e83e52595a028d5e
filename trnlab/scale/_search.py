"""Search the plans of a model on a system: enumerate valid splits, rank them, explain the rest.

The search tries every tensor-parallel degree that fits the NeuronLink domain, every pipeline
depth that divides the layers, expert parallelism for mixture-of-experts models, ZeRO stages,
recomputation and micro-batch sizes; each is evaluated by :func:`trnlab.scale.plan`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

from trnlab._checks import choose, short, whole
from trnlab.catalog import System

from ._memory import recompute_mode
from ._plan import Parallelism, PlanResult, _system_of, plan, tiers
from ._workloads import ModelSpec, WorkloadError, model

__all__ = ["SearchCancelled", "SearchResult", "search"]


class SearchCancelled(WorkloadError):
    """A search stopped by its ``cancel`` signal before it finished."""


#: The most plans one search evaluates (each takes about 2 ms once its collectives are cached):
#: the default choices give at most a few thousand, even on a million-chip cluster.
MAX_PLANS = 20_000


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in order, by trial division up to sqrt(n) (n up to a million chips)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _family(problem: str) -> str:
    """A problem with its numbers stripped, so the same kind of failure counts once."""
    return re.sub(r"[0-9][0-9,.]*", "#", problem)


def _reason_kind(problem: str) -> str:
    if "GiB per chip" in problem:
        return "out of memory"
    if "does not fit the" in problem:
        return "group does not fit the NeuronLink domain"
    return "indivisible dimensions"


@dataclass(frozen=True)
class SearchResult:
    """Every plan tried: the feasible ones ranked, the others with their reasons."""

    model: ModelSpec
    system: System
    ranked: tuple[PlanResult, ...]
    rejected: tuple[PlanResult, ...]
    rank_by: str

    @property
    def best(self) -> PlanResult | None:
        return self.ranked[0] if self.ranked else None

    def rejection_counts(self) -> dict[str, int]:
        """How many plans failed for each kind of reason (a plan may fail for several)."""
        counts: Counter[str] = Counter()
        for r in self.rejected:
            for kind in {_reason_kind(p) for p in r.problems}:
                counts[kind] += 1
        return dict(counts)

    def summary(self) -> str:
        """What was found, and why the rest failed, in sentences of numbers."""
        n = len(self.ranked) + len(self.rejected)
        head = f"{self.model.name} on {self.system.name} ({self.system.chips:,} chips): {n} plans tried, {len(self.ranked)} possible."
        why = "; ".join(
            f"{v} {k}" for k, v in sorted(self.rejection_counts().items(), key=lambda kv: -kv[1])
        )
        lines = [head]
        if self.best is not None:
            lines.append(f"Best by {self.rank_by}: {self.best.explain()}")
        else:
            lines.append(self.why_nothing_fits())
        if why:
            lines.append(f"Rejected: {why}.")
        return " ".join(lines)

    def why_nothing_fits(self) -> str:
        """Why no plan is possible: the memory arithmetic when memory is what stops every
        split, otherwise the commonest other reason with an example."""
        sized = [r for r in self.rejected if r.memory.total > 0]
        fitting = [r for r in sized if r.memory.total <= r.capacity]
        if fitting or not sized:
            # Count problem families (numbers stripped) among the splits memory allows: the
            # family they all share is what blocks every one of them.
            pool = fitting or list(self.rejected)
            shared: Counter[str] = Counter()
            for r in pool:
                shared.update({_family(p) for p in r.problems})
            if not shared:
                return "No plan is possible."
            family, count = shared.most_common(1)[0]
            plan_, problem = next((r, p) for r in pool for p in r.problems if _family(p) == family)
            return (
                f"No plan is possible, and memory is not what stops them: {count} of the "
                f"{len(pool)} splits that fit in memory fail because {problem} (e.g. "
                f"{plan_.parallel}). On {self.system.chips:,} chips the data-parallel degree is "
                f"chips / (tp x pp), and it must divide the global batch."
            )
        lean = min(sized, key=lambda r: r.memory.total)
        m, gib = self.model, 2**30
        state = 16 * m.params
        total_hbm = self.system.hbm_bytes
        return (
            f"No plan fits. Mixed-precision Adam keeps 16 bytes per parameter: 16 x "
            f"{m.params / 1e9:,.1f}B = {state / 1e12:,.2f} TB of weights, gradients and optimizer "
            f"state, against {total_hbm / 1e12:,.2f} TB of HBM on all {self.system.chips} chips "
            f"together. The leanest split ({lean.parallel}) still needs "
            f"{lean.memory.total / gib:,.1f} GiB per chip (state {(lean.memory.total - lean.memory.activations) / gib:,.1f} "
            f"+ activations {lean.memory.activations / gib:,.1f}) of {lean.capacity / gib:,.1f} GiB usable. "
            f"Use more chips, or a system with more HBM per chip."
        )


def search(
    model_spec: str | ModelSpec,
    system: str | System,
    *,
    global_batch: int = 1024,
    seq_len: int | None = None,
    dtype: str = "bf16",
    tokens: float = 1e12,
    rank_by: str = "time",
    zero_stages: tuple[int, ...] = (1, 3),
    recompute: tuple[str, ...] = ("none", "full"),
    micro_batches: tuple[int, ...] = (1, 2, 4),
    context_parallel: tuple[int, ...] = (1, 2),
    progress=None,
    cancel=None,
    **plan_options,
) -> SearchResult:
    """Enumerate and evaluate the plans of ``model_spec`` on ``system``.

    Parameters
    ----------
    rank_by : {"time", "cost", "energy"}
        What "best" means (cost and energy need a price or power figure).
    zero_stages, recompute, micro_batches, context_parallel : tuples
        The choices tried for each of these settings.
    progress : callable, optional
        Called with the share of plans evaluated (0 to 1) as the search runs, so a
        dashboard can show a progress bar while the search runs on another thread.
    cancel : threading.Event or callable, optional
        Checked between plans; when set (or returning True) the search stops and raises
        :class:`SearchCancelled`.
    global_batch, seq_len, dtype, tokens, **plan_options
        As in :func:`trnlab.scale.plan`.

    Raises
    ------
    WorkloadError
        For an unknown ranking or impossible sizes; :class:`SearchCancelled` when cancelled.
    """
    rank_by = choose(rank_by, ("time", "cost", "energy"), "rank_by", WorkloadError)
    for name, options in (("zero_stages", zero_stages), ("recompute", recompute),
                          ("micro_batches", micro_batches),
                          ("context_parallel", context_parallel)):  # fmt: skip
        if isinstance(options, str) or not isinstance(options, tuple | list) or not options:
            raise WorkloadError(
                f"{name} must be a tuple offering at least one choice, not {short(options)}"
            )
    for name, options in (("micro_batches", micro_batches), ("context_parallel", context_parallel)):
        for v in options:
            whole(v, f"{name} choice", 1, None, WorkloadError)
    for v in zero_stages:
        if isinstance(v, bool) or v not in (0, 1, 2, 3):
            raise WorkloadError(f"zero_stages choice {v!r}: ZeRO stages are 0, 1, 2 or 3")
    recompute = tuple(recompute_mode(v) for v in recompute)
    m = model(model_spec)
    sysobj = _system_of(system)
    chips, domain = sysobj.chips, tiers(sysobj).domain
    splits = []  # (tp, cp, pp, dp, expert-parallel degrees)
    for tp, cp in itertools.product(_divisors(chips), context_parallel):
        if tp > domain or m.heads % tp or chips % (tp * cp):
            continue  # not a candidate: cannot split the heads, or leaves the domain
        for pp in [d for d in _divisors(chips // (tp * cp)) if d <= m.layers]:
            dp = chips // (tp * cp * pp)
            eps = [e for e in _divisors(dp) if m.experts % e == 0] if m.is_moe else [1]
            splits.append((tp, cp, pp, dp, eps))
    # Counted before any plan is built, so an oversized search is refused at once.
    total = sum(len(eps) for *_, eps in splits)
    total *= len(zero_stages) * len(recompute) * len(micro_batches)
    if total > MAX_PLANS:
        raise WorkloadError(
            f"this search would evaluate {total:,} plans (about "
            f"{total * 2e-3:,.0f} s at ~2 ms a plan); the limit is {MAX_PLANS:,}. Offer "
            f"fewer choices (micro_batches, zero_stages, recompute, context_parallel), or plan "
            f"the splits you want with scale.plan."
        )
    candidates = [
        Parallelism(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, zero=zero, recompute=rc, micro_batch=mb)
        for tp, cp, pp, dp, eps in splits
        for ep, zero, rc, mb in itertools.product(eps, zero_stages, recompute, micro_batches)
    ]
    stop = cancel.is_set if hasattr(cancel, "is_set") else cancel
    if stop is not None and not callable(stop):
        raise WorkloadError(
            f"cancel is a threading.Event or a function returning True to stop, not {short(cancel)}"
        )
    if progress is not None and not callable(progress):
        raise WorkloadError(
            f"progress is a function called with a share 0..1, not {short(progress)}"
        )
    ranked, rejected = [], []
    for i, p in enumerate(candidates):
        if stop is not None and stop():
            raise SearchCancelled(f"search cancelled after {i:,} of {total:,} plans")
        if progress is not None and i % 16 == 0:
            progress(i / total)
        r = plan(
            m,
            sysobj,
            p,
            global_batch=global_batch,
            seq_len=seq_len,
            dtype=dtype,
            tokens=tokens,
            **plan_options,
        )
        (ranked if r.feasible else rejected).append(r)
    if progress is not None:
        progress(1.0)

    def key(r: PlanResult) -> float:
        value = {"time": r.step_time, "cost": r.cost, "energy": r.energy}[rank_by]
        if value is None:
            raise WorkloadError(
                f"cannot rank by {rank_by}: {sysobj.chip.name} has no "
                f"{'price' if rank_by == 'cost' else 'power'} figure; pass "
                f"{'price_per_chip_hour' if rank_by == 'cost' else 'watts_per_chip'}=..."
            )
        return value

    ranked.sort(key=lambda r: (key(r), r.memory.total))  # ties: the plan with headroom first
    return SearchResult(m, sysobj, tuple(ranked), tuple(rejected), rank_by)
