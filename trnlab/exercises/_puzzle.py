"""A kernel puzzle: a small NKI kernel to write under the hardware's own rules.

A :class:`Puzzle` is an :class:`~trnlab.exercises.Exercise` whose answer is an ``@nki.jit``
kernel. Its check profiles the kernel on the NeuronCore model with fixed random inputs and
judges, in this order, saying the first thing that is wrong:

1. it runs: a hardware rule the kernel breaks (more than 128 partitions, a PSUM tile wider
   than a bank, a DMA into PSUM...) is the model's teaching error, with the puzzle's advice;
2. its output matches numpy within the output dtype's tolerance; a wrong output that matches
   a known slip (only the last K tile, no max subtracted, a missing scale...) is named;
3. its HBM traffic is at most the stated bytes (the minimum: each input byte read once, each
   output byte written once), naming the tensor that crossed HBM again and how many times;
4. it issues at most the stated number of instructions, naming the kinds it has too many of;
5. its latency on the stated chip is at most the stated time, naming where the time goes.

The constraints are numbers in the statement, derived from the reference solution and the
hardware rule they teach; ``tests/test_lab_puzzles.py`` checks the references meet them and
that plausible wrong kernels get the right diagnosis.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._exercise import PASSED, Exercise

__all__ = ["Constraint", "Puzzle", "Slip"]


@dataclass(frozen=True)
class Constraint:
    """What a passing kernel may spend: HBM bytes moved, instructions, latency (us) on a chip.

    ``None`` leaves a limit out. ``why`` says where the numbers come from (the statement
    quotes it); ``recipe`` how the reference spends its instructions and time, which would
    give the puzzle away in the statement, so only a kernel over the limit is told it.
    """

    hbm_bytes: int | None = None
    instructions: int | None = None
    latency_us: float | None = None
    chip: str = "trn1"
    why: str = ""
    recipe: str = ""

    def text(self) -> str:
        parts = []
        if self.hbm_bytes is not None:
            parts.append(f"at most {self.hbm_bytes:,} bytes of HBM traffic")
        if self.instructions is not None:
            parts.append(f"at most {self.instructions} instructions")
        if self.latency_us is not None:
            parts.append(f"at most {self.latency_us:g} us on {self.chip}")
        return ", ".join(parts) + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True)
class Slip:
    """A known wrong answer: ``values(inputs)`` is what the slip computes; ``says`` names it."""

    values: Callable[[dict], np.ndarray]
    says: str


@dataclass(frozen=True)
class Spec:
    """Everything a puzzle's check needs besides the learner's kernel."""

    inputs: Callable[[np.random.Generator], list[tuple[str, np.ndarray, str]]]
    expected: Callable[[dict], np.ndarray]
    constraint: Constraint
    tolerance: float = 1e-3  # relative to the scale of the expected values
    scale: Callable[[dict], np.ndarray] | None = None
    slips: tuple[Slip, ...] = ()
    forbidden: tuple[str, ...] = ()  # instruction kinds (Program.counts keys) not allowed
    advice: dict[str, str] = field(default_factory=dict)  # error class / stage / kind -> advice
    seed: int = 0


def _inputs(spec: Spec, numerics: bool = True):
    """(values by name, the kernel's HBM arguments): values as the kernel sees them (rounded
    to the argument's dtype)."""
    import trnlab.nki as nki

    rng = np.random.default_rng(spec.seed)
    args, vals = [], {}
    for name, array, dtype in spec.inputs(rng):
        arg = nki.hbm(array, dtype, name) if numerics else nki.hbm(array.shape, dtype, name)
        args.append(arg)
        vals[name] = np.asarray(arg.values, np.float64) if numerics else None
    return vals, args


def run_kernel(kernel, spec: Spec, numerics: bool = True):
    """Profile ``kernel`` on the puzzle's inputs: ``(run, inputs, None)`` or ``(None, inputs,
    what went wrong)``; the learner's own errors are said, never raised."""
    import trnlab.nki as nki
    from trnlab import core

    vals, args = _inputs(spec, numerics)
    if not callable(kernel) or inspect.isfunction(kernel):  # a plain function: no @nki.jit
        return (
            None,
            vals,
            (
                "the answer should be an NKI kernel: a function decorated with @nki.jit, "
                f"not {type(kernel).__name__}"
            ),
        )
    try:
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # the check says what is off
                return nki.profile(kernel, chip=spec.constraint.chip)(*args), vals, None
        except core.KernelArgumentError as err:
            if err.__cause__ is None:
                raise
            raise err.__cause__ from None
    except core.HardwareRuleError as err:
        extra = next((v for k, v in spec.advice.items() if k == type(err).__name__), "")
        return (
            None,
            vals,
            f"the NeuronCore refused your kernel: {err}" + (f" {extra}" if extra else ""),
        )
    except nki.NotModelledError as err:
        return None, vals, f"your kernel uses NKI that trnlab does not model: {err}"
    except Exception as err:  # the learner's code: say what it raised, never crash the lab
        return None, vals, f"your kernel raised {type(err).__name__}: {err}"


def _output(run) -> tuple[str | None, np.ndarray | None, str | None]:
    names = run.extra.get("nki", {}).get("returns", ())
    if not names:
        return (
            None,
            None,
            (
                "your kernel returned no HBM tensor: create the output with nl.ndarray(..., "
                "buffer=nl.shared_hbm), store into it with nisa.dma_copy and return it"
            ),
        )
    if names[0] not in run.outputs:
        return (
            names[0],
            None,
            (
                f"the output {names[0]!r} was never stored: copy each result tile into it with "
                f"nisa.dma_copy(dst={names[0]}[...], src=sbuf_tile)"
            ),
        )
    return names[0], np.asarray(run.outputs[names[0]], np.float64), None


def _close(out, exact, scale, tol) -> np.ndarray:
    """Where ``out`` is off (NaN counts as off)."""
    return ~(np.abs(out - exact) <= tol * scale + 1e-6)


def _values_problem(spec: Spec, out: np.ndarray, vals: dict, name: str = "out") -> str | None:
    exact = np.asarray(spec.expected(vals), np.float64)
    if out.shape != exact.shape:
        return f"the output has shape {out.shape}; expected {exact.shape}"
    scale = np.abs(spec.scale(vals)) if spec.scale else np.abs(exact).max() * np.ones_like(exact)
    bad = _close(out, exact, scale, spec.tolerance)
    if not bad.any():
        return None
    for slip in spec.slips:
        with np.errstate(all="ignore"):
            wrong = np.asarray(slip.values(vals), np.float64)
        both_nan = np.isnan(out) & np.isnan(wrong)
        if wrong.shape == out.shape and not (_close(out, wrong, scale, spec.tolerance)
                                             & ~both_nan).any():  # fmt: skip
            return f"the output is off: {slip.says}"
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    if np.isnan(out).any():
        nan = int(np.isnan(out).sum())
        return (
            f"{nan:,} of {out.size:,} output values are NaN ({name}{list(idx)} among them): NaN is "
            f"what trnlab, like nki.simulate, gives memory never written, and what "
            f"inf - inf or inf / inf gives after a value overflowed. Check that every element "
            f"of the output is stored and computed only from tiles you filled, and that no "
            f"intermediate overflows its format."
        )
    return (
        f"{name}{list(idx)} is {out[idx]:.5g}, expected {exact[idx]:.5g}; {int(bad.sum()):,} of "
        f"{out.size:,} values are off (tolerance {spec.tolerance:g} of the values' scale)"
    )


def _forbidden_problem(spec: Spec, run) -> str | None:
    counts = run.program.counts()
    for op in spec.forbidden:
        if counts.get(op):
            return (
                f"correct, but your kernel issues {counts[op]} {op} instruction(s), which this "
                f"puzzle rules out. " + spec.advice.get(op, "")
            ).rstrip()
    return None


def _bytes_problem(spec: Spec, run) -> str | None:
    from trnlab import core

    limit = spec.constraint.hbm_bytes
    traffic = core.hbm_traffic(run)
    moved = sum(t["loaded"] + t["stored"] for t in traffic.values())
    if limit is None or moved <= limit:
        return None
    again = sorted(
        (((t["loaded"] + t["stored"]) / t["size"], name, t["loads"] + t["stores"])
         for name, t in traffic.items() if t["size"] and t["loaded"] + t["stored"] > t["size"]),
        reverse=True,
    )  # fmt: skip
    said = "; ".join(f"{n} crossed HBM {x:.1f} times over ({c} transfers)" for x, n, c in again)
    stored = [n for n, t in traffic.items() if t["size"] and t["stored"] > t["size"]]
    loaded = [n for n, t in traffic.items() if t["size"] and t["loaded"] > t["size"]]
    advice = ""
    if stored:
        advice = (
            f"Store {' and '.join(stored)} once, when the values are final (after the loop "
            f"that accumulates them), not at every step. "
        )
    if loaded or not stored:
        advice += spec.advice.get(
            "bytes", "Load each tile once and keep it in SBUF while it is needed."
        )
    return (
        f"correct, but your kernel moves {moved:,.0f} bytes over HBM; the limit is "
        f"{limit:,} (each input byte read once, each output byte written once). {said}. " + advice
    ).rstrip()


def _instructions_problem(spec: Spec, run, reference_counts: dict) -> str | None:
    limit = spec.constraint.instructions
    n = len(run.program)
    if limit is None or n <= limit:
        return None
    counts = run.program.counts()
    more = [
        f"{c} {op} (the reference: {reference_counts.get(op, 0)})"
        for op, c in counts.items()
        if c > reference_counts.get(op, 0)
    ]
    return (
        f"correct, but your kernel issues {n} instructions ({', '.join(f'{c} {op}' for op, c in counts.items())}); "
        f"the limit is {limit}. More than the reference: {', '.join(more) or 'none of one kind'}. "
        + _reference_spends(spec)
        + spec.advice.get("instructions", "")
    ).rstrip()


def _reference_spends(spec: Spec) -> str:
    recipe = spec.constraint.recipe
    return f"The reference spends its budget as {recipe}. " if recipe else ""


def _spent(limit: Constraint, run) -> str:
    """What a passing kernel spent against each of the puzzle's limits."""
    from trnlab import core

    parts = []
    if limit.hbm_bytes is not None:
        moved = sum(t["loaded"] + t["stored"] for t in core.hbm_traffic(run).values())
        parts.append(f"{moved:,.0f} bytes over HBM (limit {limit.hbm_bytes:,})")
    if limit.instructions is not None:
        parts.append(f"{len(run.program)} instructions (limit {limit.instructions})")
    if limit.latency_us is not None:
        parts.append(f"{run.latency * 1e6:,.2f} us on {limit.chip} (limit {limit.latency_us:g})")
    return ", ".join(parts)


def _latency_problem(spec: Spec, run, reference=None) -> str | None:
    """Over the time limit: the engines or queues where the kernel spends more than the
    reference does (the gap to close), else its busiest one."""
    from trnlab import core

    limit = spec.constraint.latency_us
    us = run.latency * 1e6
    if limit is None or us <= limit:
        return None
    mine = core.time_breakdown(run)
    theirs = {r["resource"]: r for r in core.time_breakdown(reference)} if reference else {}
    more = sorted(
        (
            (r["busy_s"] - theirs.get(r["resource"], {}).get("busy_s", 0.0), r)
            for r in mine
            if r["busy_s"] - theirs.get(r["resource"], {}).get("busy_s", 0.0) > 0.05 * run.latency
        ),
        key=lambda x: -x[0],
    )
    if more:
        where = "Where yours spends more than the reference: " + "; ".join(
            f"{r['resource']} {r['busy_s'] * 1e6:,.2f} us over {r['instructions']} "
            f"instructions (the reference: "
            f"{theirs.get(r['resource'], {}).get('busy_s', 0.0) * 1e6:,.2f} us over "
            f"{theirs.get(r['resource'], {}).get('instructions', 0)})"
            for _, r in more[:2]
        )
    else:
        top = mine[0]
        where = (
            f"The busiest is {top['resource']}, {top['busy_s'] * 1e6:,.2f} us over "
            f"{top['instructions']} instructions, no busier than in the reference: the time "
            f"goes in waits between engines"
        )
    return (
        f"correct, but it takes {us:,.2f} us on {spec.constraint.chip}; the limit is "
        f"{limit:g} us. {where}. " + _reference_spends(spec) + spec.advice.get("latency", "")
    ).rstrip()


class Puzzle(Exercise):
    """An exercise whose answer is an NKI kernel, checked as the module docstring says.

    Parameters
    ----------
    key, question, hints, solution_text
        As for :class:`~trnlab.exercises.Exercise`; the question ends with the constraint.
    spec : Spec
        Inputs, numpy reference, constraint, tolerance, known slips and advice.
    reference : Kernel
        The reference solution (an ``@nki.jit`` kernel); it must meet the constraint.
    """

    def __init__(self, key, question, spec: Spec, reference, *, hints=(), solution_text=""):
        self.spec = spec
        self.kernel = reference
        super().__init__(
            key,
            f"{question} Constraint: {spec.constraint.text()}.",
            self._judge,
            hints=hints,
            solution=lambda: reference,
            solution_text=solution_text,
        )
        self._reference_run = None
        self._judged = None  # the run of the kernel checked last

    def reference_run(self):
        """The reference solution's run (cached): what the constraint is derived from."""
        if self._reference_run is None:
            run, _, problem = run_kernel(self.kernel, self.spec)
            if problem:  # pragma: no cover - the references run
                raise RuntimeError(f"{self.key}: the reference failed: {problem}")
            self._reference_run = run
        return self._reference_run

    def run(self, kernel=None):
        """Profile ``kernel`` (default: the reference) on the puzzle's inputs: a Run for
        :class:`~trnlab.widgets.KernelProfile` and the traffic picture. Raises ValueError
        with the check's words if the kernel does not run."""
        if kernel is None:
            return self.reference_run()
        run, _, problem = run_kernel(kernel, self.spec)
        if problem:
            raise ValueError(problem)
        return run

    def shown_run(self, kernel=None):
        """The run to draw, whose it is, and whether it is yours: your kernel's when it runs,
        else the reference's (an untouched template, or a kernel the check refuses, shows what
        to aim for; a picture of it should show only the target, not how it is built)."""
        if kernel is not None:
            run, _, problem = run_kernel(kernel, self.spec)
            if problem is None:
                return run, "your kernel", True
        return self.reference_run(), "the reference solution", False

    def _verdict(self, answer) -> tuple[str, str]:
        status, message = super()._verdict(answer)
        if status == PASSED and self._judged is not None:
            spent = _spent(self.spec.constraint, self._judged)
            message = f"correct: {spent}" if spent else "correct"
            repeats = self._judged.extra.get("nki", {}).get("repeats_dropped", 0)
            if repeats:
                one = repeats == 1
                message += (
                    f". {repeats} of your instructions repeat{'s' if one else ''} "
                    f"{'an earlier one' if one else 'earlier ones'} on unchanged inputs (work "
                    f"inside a loop that does not depend on the loop, say): the compiler "
                    f"computes {'it' if one else 'them'} once, as trnlab models it, so "
                    f"{'it is' if one else 'they are'} not counted; moving "
                    f"{'it' if one else 'them'} out of the loop says so in the code itself"
                )
        return status, message

    def _judge(self, kernel) -> str | None:
        self._judged = None
        run, vals, problem = run_kernel(kernel, self.spec)
        if problem:
            return problem
        self._judged = run
        name, out, problem = _output(run)
        if problem:
            return problem
        return (
            _values_problem(self.spec, out, vals, name)
            or _forbidden_problem(self.spec, run)
            or _bytes_problem(self.spec, run)
            or _instructions_problem(self.spec, run, self.reference_run().program.counts())
            or _latency_problem(self.spec, run, self.reference_run())
        )
