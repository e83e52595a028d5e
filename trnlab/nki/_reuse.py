"""The compiler computes a repeated instruction once (common-subexpression elimination).

The Neuron compiler unrolls a kernel's loops and avoids recomputing a value it already has: an
instruction with the same operation and parameters, on the same input data (read through the
same views, with no write to them in between), is dropped and its readers take the earlier
result, which stays in its buffer until the last of them. A value that does not change inside a
loop is so in effect computed once, before the loop ("loop-invariant code motion").

No document states this; it is inferred (catalogue figure ``compiler_cse``, an assumption) from
the NKI Fused-Mamba tutorial's Trn1 profiles: ``mamba_v2``'s Vector engine is active 3.07 us per
(channel tile, state) step, less than its five Vector instructions as written stream by the ISA
cost formulas (3.66 us at 1.12 GHz), while ``mamba_v1``, with the same five and nothing to
repeat, is active 4.14 us per step as the formulas give: ``delta * u``, the same for every
state, is computed once per channel tile. The catalogue note gives the reading against it.

What this pass drops (``compiler_cse = False`` keeps every instruction):

- compute instructions only (Vector, Scalar, GpSimd, Tensor Engine). Loads are not dropped:
  the NKI matmul tutorial gains 17-29% on hardware by hoisting its repeated loads by hand, so
  there the compiler reloaded.
- the instruction writes a whole tile of its own (a new ``nl.ndarray`` or a returned tile),
  written by nothing else, and reads data (a ``memset`` or ``iota`` is not a candidate);
- it matches an earlier candidate in operation, parameters, engine, the layout of every
  operand view, output shape and type, and every input (the same tile, region and writes so
  far).

The caller (``trnlab.nki._alloc``) keeps the drop only if the longer-lived results still fit
SBUF and PSUM; otherwise the compiler recomputes and the trace is restored. Values are
unaffected: the trace computed every instruction already; only the timeline and the buffers
change.
"""

from __future__ import annotations

from ._trace import Trace

__all__ = ["drop_repeats", "restore"]


def _writes(op: tuple):
    """The tile or HBM ref an instruction writes."""
    kind = op[0]
    if kind == "op":
        return op[3]
    return op[1]  # dma dst, matmul out, transpose out


def _reads(op: tuple) -> tuple:
    kind = op[0]
    if kind == "op":
        return tuple(op[4])
    if kind in ("dma", "dma_transpose"):
        return (op[2],)
    if kind == "matmul":
        return (op[2], op[3], *op[6]) + ((op[1],) if op[4] else ())
    return (op[2],)  # transpose


def _params(op: tuple) -> tuple:
    """What an instruction records besides its operands."""
    kind = op[0]
    if kind == "op":
        return ("op", op[1], op[2], op[5], op[6])  # name, engine, elements, function
    if kind == "matmul":
        return ("matmul", op[4], op[5])  # accumulate, packed
    return (kind,)


def _rename(op: tuple, alias: dict) -> tuple:
    """``op`` with every ref to a dropped tile pointing at the tile that kept its value."""

    def r(ref):
        s = alias.get(ref[0].id)
        return ref if s is None else (s, *ref[1:])

    kind = op[0]
    if kind == "op":
        _, name, engine, out, ins, elements, func = op
        return ("op", name, engine, r(out), tuple(r(x) for x in ins), elements, func)
    if kind in ("dma", "dma_transpose"):
        return (kind, r(op[1]), r(op[2]), *op[3:])
    if kind == "matmul":
        return ("matmul", r(op[1]), r(op[2]), r(op[3]), op[4], op[5], tuple(map(r, op[6])))
    return ("transpose", r(op[1]), r(op[2]))


def _whole(ref) -> bool:
    s = ref[0]
    return ref[1] == 0 and ref[2] == s.shape[0] and ref[3] == 0 and ref[4] == s.free


def _snapshot(trace: Trace) -> tuple:
    """What :func:`drop_repeats` changes, to put back with :func:`restore`."""
    storages = trace.on_chip + trace.hbm
    return (trace.ops, trace.apis, trace.where, trace.sigs, trace.deps,
            [(s, s.first, s.last) for s in storages])  # fmt: skip


def restore(trace: Trace, saved: tuple) -> None:
    """Put back the trace as it was before :func:`drop_repeats` (every instruction)."""
    trace.ops, trace.apis, trace.where, trace.sigs, trace.deps, spans = saved
    for s, first, last in spans:
        s.first, s.last = first, last


def drop_repeats(trace: Trace) -> tuple[int, tuple | None]:
    """Drop the instructions of ``trace`` that repeat an earlier one (see the module
    docstring). Returns how many were dropped and, if any, what :func:`restore` needs to put
    the trace back."""
    ops = trace.ops
    n_writes: dict[int, int] = {}
    for op in ops:
        w = _writes(op)[0].id
        n_writes[w] = n_writes.get(w, 0) + 1
    pinned = {i for edge in trace.deps for i in edge}  # depends_on names them: kept
    version: dict[int, int] = {}
    seen: dict[tuple, object] = {}
    alias: dict[int, object] = {}
    kept_ops: list[tuple] = []
    keep: list[int] = []
    for i, op in enumerate(ops):
        op = _rename(op, alias) if alias else op
        sig = trace.sigs[i]
        out = _writes(op)
        s = out[0]
        if (
            sig is not None
            and i not in pinned
            and op[0] not in ("dma", "dma_transpose")
            and s.on_chip
            and n_writes[s.id] == 1
        ):
            ins = _reads(op)
            if ins and _whole(out) and all(x[0] is not s for x in ins):
                key = (
                    _params(op), sig, s.buffer, s.shape, s.dtype.name,
                    tuple((x[0].id, x[1:], version.get(x[0].id, 0)) for x in ins),
                )  # fmt: skip
                first = seen.get(key)
                if first is not None:
                    alias[s.id] = first
                    continue
                seen[key] = s
        version[s.id] = version.get(s.id, 0) + 1
        kept_ops.append(op)
        keep.append(i)
    dropped = len(ops) - len(keep)
    if not dropped:
        return 0, None
    saved = _snapshot(trace)
    trace.ops = kept_ops
    trace.apis = [trace.apis[i] for i in keep]
    trace.where = [trace.where[i] for i in keep]
    trace.sigs = [trace.sigs[i] for i in keep]
    if trace.deps:
        new = {old: j for j, old in enumerate(keep)}
        trace.deps = [(new[c], new[p]) for c, p in trace.deps]
    _shift_lifetimes(trace, keep, len(ops), alias)
    return dropped, saved


def _shift_lifetimes(trace: Trace, keep: list[int], n_old: int, alias: dict) -> None:
    """Renumber every tensor's first and last instruction after the drop (every tensor an
    instruction touches keeps its span, including those outside its operand refs, such as MX
    scales); a dropped tile's readers now read the kept one, which lives until the last."""
    before = [0] * (n_old + 1)  # kept instructions with an old index below k
    j = 0
    for k in range(n_old):
        before[k] = j
        if j < len(keep) and keep[j] == k:
            j += 1
    before[n_old] = j
    extend: list[tuple] = []
    for s in trace.on_chip + trace.hbm:
        if s.first < 0:
            continue
        first, last = before[s.first], before[s.last + 1] - 1
        kept = alias.get(s.id)
        if kept is not None:
            s.first = s.last = -1  # never allocated: its readers read ``kept``
            if last >= first:
                extend.append((kept, last))
        elif last < first:
            s.first = s.last = -1
        else:
            s.first, s.last = first, last
    for kept, last in extend:
        kept.last = max(kept.last, last)
