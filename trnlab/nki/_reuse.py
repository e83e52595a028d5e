"""The compiler computes a repeated instruction once (common-subexpression elimination).

The Neuron compiler unrolls a kernel's loops and then drops an instruction that recomputes a
value it already has: the same operation, with the same parameters, on the same input data
(no write to any input in between). Its result is kept in its buffer and later readers take it
from there; a value that does not change inside a loop is so in effect computed once, before
the loop ("loop-invariant code motion"). The NKI Fused-Mamba tutorial's Trn1 profiles show it
(catalogue figure ``compiler_cse``): ``mamba_v2``'s Vector engine is active 3.07 us per
(channel tile, state) step, less than its five instructions as written stream by the ISA
formulas (3.66 us at 1.12 GHz): ``delta * u``, the same for every state, is computed once per
channel tile; and ``mamba_v1``'s TensorMatrix row shows about 16 marks over its 4,096-channel
run, where the kernel as written broadcasts B and C rows 512 times each (once per channel
tile and state), i.e. about once per state.

What this pass drops (catalogue figure ``compiler_cse``; ``False`` keeps every instruction):

- compute instructions only (Vector, Scalar, GpSimd, Tensor Engine). Loads are not dropped:
  the NKI matmul tutorial gains 17-29% on hardware by hoisting its repeated loads by hand, so
  there the compiler reloads. (``mamba_v1``'s one broadcast per state means that it did drop
  the repeated loads of the B and C rows, which repeat inside the innermost loop; the model
  keeps them, off that kernel's critical path.)
- the instruction writes a whole tile of its own (a new ``nl.ndarray`` or a returned tile),
  written by nothing else, and reads data only (a ``memset`` or ``iota`` is not a candidate);
- it matches an earlier candidate in operation, parameters, engine, output shape and type, and
  every input (the same tile, region and writes so far).

Readers of the dropped instruction's tile read the earlier one's instead, which therefore
stays alive (and in SBUF or PSUM) until the last of them. Values are unaffected: the trace
computed every instruction already; only the timeline and the buffers change.
"""

from __future__ import annotations

from ._trace import Trace

__all__ = ["drop_repeats"]


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
    if kind == "dma":
        return (op[2],)
    if kind == "matmul":
        return (op[2], op[3]) + ((op[1],) if op[4] else ())
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
    if kind == "dma":
        return ("dma", r(op[1]), r(op[2]), op[3], op[4])
    if kind == "matmul":
        return ("matmul", r(op[1]), r(op[2]), r(op[3]), op[4], op[5])
    return ("transpose", r(op[1]), r(op[2]))


def _whole(ref) -> bool:
    s = ref[0]
    return ref[1] == 0 and ref[2] == s.shape[0] and ref[3] == 0 and ref[4] == s.free


def drop_repeats(trace: Trace) -> int:
    """Drop the instructions of ``trace`` that repeat an earlier one (see the module
    docstring), in place; returns how many were dropped."""
    ops = trace.ops
    n_writes: dict[int, int] = {}
    for op in ops:
        w = _writes(op)[0].id
        n_writes[w] = n_writes.get(w, 0) + 1
    version: dict[int, int] = {}
    seen: dict[tuple, object] = {}
    alias: dict[int, object] = {}
    keep: list[int] = []
    for i, op in enumerate(ops):
        op = _rename(op, alias) if alias else op
        sig = trace.sigs[i]
        out = _writes(op)
        s = out[0]
        if sig is not None and op[0] != "dma" and s.on_chip and n_writes[s.id] == 1:
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
        ops[i] = op
        keep.append(i)
    dropped = len(ops) - len(keep)
    if not dropped:
        return 0
    trace.ops = [ops[i] for i in keep]
    trace.apis = [trace.apis[i] for i in keep]
    trace.where = [trace.where[i] for i in keep]
    trace.sigs = [trace.sigs[i] for i in keep]
    for s in trace.on_chip:
        s.first = s.last = -1
    for j, op in enumerate(trace.ops):
        for ref in (_writes(op), *_reads(op)):
            st = ref[0]
            if st.on_chip:
                if st.first < 0:
                    st.first = j
                st.last = j
    return dropped
