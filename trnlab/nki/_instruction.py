"""``nisa.NkiInstruction``: what an ``nki.isa`` call returns in NKI 0.6, and its one method,
``depends_on``.

A kernel writes ``c.depends_on(b, a)`` to make instruction ``c`` wait until ``a`` and ``b``
have completed, besides what their reads and writes of memory already order: NKI lowers each
edge to a semaphore wait the device executes. trnlab records the edges on the trace
(``Trace.deps``, pairs of instruction indices) and the core's scheduler makes every
instruction of the consumer's call wait for every instruction of the producer's
(:meth:`trnlab.core.KernelContext.wait_for`). An edge points back in program order: a kernel
traces its producers first (NKI's handles exist only once their call has run), and trnlab
schedules instructions in the order they were traced.
"""

from __future__ import annotations

from trnlab.core import KernelArgumentError

from ._trace import current

__all__ = ["NkiInstruction", "add_dependencies"]


class NkiInstruction:
    """The handle of one traced ``nki.isa`` call: the instructions it recorded."""

    __slots__ = ("api", "first", "stop", "trace")

    def __init__(self, trace, first: int, stop: int, api: str):
        self.trace = trace
        self.first = first  # index of its first instruction in the trace
        self.stop = stop  # one past its last
        self.api = api

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        """This instruction runs after each of ``producers`` completes; returns itself, so
        ``c.depends_on(b).depends_on(a)`` is ``c.depends_on(b, a)``."""
        from . import isa  # the observed entry point, so the grader records the edges

        return isa._depends_on(self, *producers)

    def __repr__(self) -> str:
        return f"NkiInstruction({self.api}, instructions {self.first}..{self.stop - 1})"


def add_dependencies(consumer: NkiInstruction, *producers: NkiInstruction) -> NkiInstruction:
    """Record that ``consumer``'s instructions wait for each producer's (see the module)."""
    tr = current()
    for x, what in ((consumer, "the consumer"), *((p, "a producer") for p in producers)):
        if not isinstance(x, NkiInstruction):
            raise KernelArgumentError(
                f"depends_on: {what} must be an instruction handle (what an nki.isa call "
                f"returns), not {type(x).__name__}"
            )
        if x.trace is not tr:
            raise KernelArgumentError(
                f"depends_on: {x!r} was made by another kernel run, or by another program or "
                f"core of this launch; a handle is valid only where its instruction runs"
            )
        if not 0 <= x.first <= x.stop <= len(tr.ops):
            raise KernelArgumentError(
                f"depends_on: {x!r} names no instructions this kernel traced; use the handles "
                f"nki.isa calls return"
            )
    for p in producers:  # every edge checked before any is recorded
        if p.first >= consumer.first and p.stop > p.first:
            raise KernelArgumentError(
                f"depends_on: {consumer.api} cannot wait for {p.api}, traced after it. An edge "
                f"points back in program order: write the producer's call first"
            )
    for p in producers:
        for c in range(consumer.first, consumer.stop):
            for q in range(p.first, p.stop):
                tr.deps.append((c, q))
    return consumer
