"""Physical buffers for a traced kernel, as the NKI compiler would lay them out, and the replay
of its instructions onto ``trnlab.core`` for the engine timeline.

The NKI compiler turns a tile declared inside a loop body into a few *rotating buffers*: each
iteration takes the next buffer, so iteration i + 1 can load its data while iteration i still
computes (the direct-allocation guide's double buffering). trnlab does the same from the trace:

1. Every SBUF/PSUM tensor belongs to the *site* in the source that declared it (one
   ``nl.ndarray`` line, or the line of an ``nl`` call that returns a new tile, and which NKI
   call on that line made it), and to its size: one line of expressions
   (``(x - mean) * rsqrt(var)``) makes full rows and one-column temporaries, and each size
   gets buffers of its own. A tensor is live from the first instruction touching it to the
   last.
2. A site whose tensors are never live together needs one buffer per tensor alive at once
   (``W``, its widest overlap) times the rotation depth ``r`` (the catalogue figure
   ``compiler_rotating_buffers``: 2 on Trn1, 3 on Trn2 and Trn3): ``min(count, W * r)``
   buffers. A site declared once (outside loops) gets one.
3. If the sites alive at the same time need more SBUF (or PSUM banks) than the core has, the
   pool taking the most gives up a rotation, as :func:`trnlab.kernels.plan_buffers` does; a
   site that still does not fit with ``r = 1`` is refused by the core with its teaching error.
4. The replay allocates each site's pool at its first use and frees it after its last, and
   hands each tensor the buffer released longest ago (so consecutive iterations alternate).
5. Only if that still does not fit: a site whose tensors leave gaps where none of them is
   alive (a tile a loop body fills and drains before the next step of the body) holds its
   space only while one is, with one buffer per tensor alive at once and no rotation, as the
   compiler lets tiles share space when their lives do not overlap; the other sites get
   their rotations back and rule 3 runs again. A kernel that fits by rule 3 keeps its plan
   (and times).

Only timing depends on this: values live in each tensor's own arrays, so a plan can never
corrupt a result.
"""

from __future__ import annotations

import heapq
import math

from trnlab._gc import paused_gc
from trnlab.core import (
    HardwareRuleError,
    HBMView,
    KernelArgumentError,
    KernelContext,
    PsumBankOverflowError,
    SbufCapacityError,
    View,
)

from ._reuse import drop_repeats, restore
from ._tensor import MemoryRegion, Storage
from ._trace import Trace, location

__all__ = ["Pool", "plan", "replay"]


class Pool:
    """The buffers of one allocation site for one tile size and format."""

    __slots__ = (
        "buffer",
        "count",
        "episodes",
        "first",
        "fmt",
        "free",
        "heap",
        "label",
        "last",
        "n",
        "parts",
        "r",
        "split",
        "storages",
        "tiles",
        "unit",
        "where",
        "width",
    )

    def __init__(self, label, buffer, fmt, where: str):
        self.label = label
        self.buffer = buffer
        self.fmt = fmt
        self.where = where
        self.storages: list[Storage] = []
        self.parts = 0
        self.free = 0
        self.tiles: list = []
        self.heap: list = []
        self.split = False  # hold space only while a tensor is alive (rule 5)

    def finish(self, bits: float, bank_bytes: int) -> None:
        st = sorted(self.storages, key=lambda s: s.first)
        self.storages = st
        self.count = len(st)
        self.first = st[0].first
        self.last = max(s.last for s in st)
        live: list[int] = []
        w = 0
        for s in st:  # widest overlap of the [first, last] intervals
            while live and live[0] < s.first:
                heapq.heappop(live)
            heapq.heappush(live, s.last)
            w = max(w, len(live))
        self.width = w
        # the stretches where some tensor of the site is alive
        eps: list[list[int]] = []
        for s in st:
            if eps and s.first <= eps[-1][1]:
                eps[-1][1] = max(eps[-1][1], s.last)
            else:
                eps.append([s.first, s.last])
        self.episodes = [tuple(e) for e in eps]
        if self.buffer is MemoryRegion.sbuf:
            self.unit = math.ceil(self.free * bits / 8)
        else:
            self.unit = -(-self.free * 4 // bank_bytes)  # PSUM entries are 32-bit

    def buffers(self, r: int) -> int:
        return min(self.count, self.width * r)

    def spans(self) -> list[tuple[int, int]]:
        """The instruction intervals the pool holds its space over."""
        return self.episodes if self.split else [(self.first, self.last)]


def _pools(trace: Trace) -> list[Pool]:
    from trnlab.core import format_bits

    pools: dict = {}
    for s in trace.on_chip:
        if s.first < 0:
            continue  # never used: the compiler drops it
        key, site = s.site
        fmt = "fp32" if s.buffer is MemoryRegion.psum else s.dtype.fmt
        k = (key, s.buffer, fmt, s.free)
        p = pools.get(k)
        if p is None:
            p = pools[k] = Pool(s.name, s.buffer, fmt, site.where)
        p.storages.append(s)
        p.parts = max(p.parts, s.shape[0])
        p.free = max(p.free, s.free)
    out = list(pools.values())
    bank = int(trace.params.psum_bank_bytes)
    for p in out:
        p.finish(format_bits(p.fmt), bank)
    labels: dict[str, int] = {}
    for p in sorted(out, key=lambda p: p.first):  # unique labels, in order of first use
        n = labels.get(p.label, 0)
        labels[p.label] = n + 1
        if n:
            p.label = f"{p.label}_{n}"
    return out


def _peak(pools: list[Pool]) -> tuple[int, int | None]:
    """The most the pools take at once (bytes per partition, or PSUM banks) and when."""
    events = sorted(
        [(a, 0, p) for p in pools for a, _ in p.spans()]
        + [(b + 1, -1, p) for p in pools for _, b in p.spans()],
        key=lambda e: (e[0], e[1]),
    )
    used = peak = 0
    at = None
    for t, kind, p in events:
        used += p.unit * p.buffers(p.r) if kind == 0 else -p.unit * p.buffers(p.r)
        if used > peak:
            peak, at = used, t
    return peak, at


def _fit(pools: list[Pool], capacity: int) -> None:
    """Lower rotations until the pools alive together fit ``capacity`` (bytes per partition of
    SBUF, or PSUM banks): the pool taking the most gives up one rotation, repeatedly."""
    while pools:
        peak, at = _peak(pools)
        if peak <= capacity:
            return
        live = [p for p in pools if p.r > 1 and any(a <= at <= b for a, b in p.spans())]
        if not live:
            return  # even single buffers do not fit: the core refuses with its error
        big = max(live, key=lambda p: p.unit * p.buffers(p.r))
        big.r -= 1


def plan(trace: Trace, ctx: KernelContext) -> list[Pool]:
    """The pools of a trace with their buffer counts (see the module docstring)."""
    pools = _pools(trace)
    want = int(trace.params.compiler_rotating_buffers)
    for p in pools:
        p.r = want if p.count > p.width else 1
    for space, capacity in (
        (MemoryRegion.sbuf, ctx.sbuf_available()),
        (MemoryRegion.psum, int(trace.params.psum_banks)),
    ):
        group = [p for p in pools if p.buffer is space]
        _fit(group, capacity)
        if _peak(group)[0] > capacity:  # rule 5: sites with gaps hold space only in use
            for p in group:
                p.split = len(p.episodes) > 1
                p.r = want if p.count > p.width and not p.split else 1
            _fit(group, capacity)
    for p in pools:
        p.n = p.width if p.split else p.buffers(p.r)
    return pools


def _fits(trace: Trace, pools: list[Pool], ctx: KernelContext) -> bool:
    """Whether the buffer plan ``pools`` fits SBUF and PSUM (rotations lowered as needed)."""
    sbuf = [p for p in pools if p.buffer is MemoryRegion.sbuf]
    psum = [p for p in pools if p.buffer is MemoryRegion.psum]
    return _peak(sbuf)[0] <= ctx.sbuf_available() and _peak(psum)[0] <= int(trace.params.psum_banks)


def _drop_repeats(trace: Trace, ctx: KernelContext) -> list[Pool] | None:
    """Drop repeated instructions (:mod:`trnlab.nki._reuse`) if the results they reuse, which
    now live longer, still fit SBUF and PSUM (returns the buffer plan that shows it); otherwise
    the compiler recomputes them (every instruction stays), so a kernel that fits is never
    refused because of this."""
    dropped, saved = drop_repeats(trace)
    if not dropped:
        return None
    pools = plan(trace, ctx)
    if _fits(trace, pools, ctx):
        trace.repeats += dropped
        return pools
    restore(trace, saved)
    return None


def _where(trace: Trace, i: int) -> str:
    f, line, func = trace.where[i]
    return f"{location(func, f, line)}, nisa.{trace.apis[i]}"


def replay(trace: Trace, ctx: KernelContext) -> list[Pool]:
    """Allocate the buffers and record every instruction of ``trace`` on ``ctx``.

    First, where the core's ``compiler_cse`` holds, drops the instructions that repeat an
    earlier one (:mod:`trnlab.nki._reuse`). Raises the core's teaching errors (a tile that does
    not fit SBUF, a matmul beyond the PE array...), each prefixed with the kernel's file and
    line.
    """
    pools = _drop_repeats(trace, ctx) if trace.params.compiler_cse else None
    numerics = ctx.numerics
    ctx.numerics = False  # the values are the trace's; the context records timing only
    try:
        with paused_gc():  # a View per operand: as core.record, no collector walks
            return _replay(trace, ctx, pools)
    finally:
        ctx.numerics = numerics


def _refuse(ctx: KernelContext, p: Pool) -> None:
    """The teaching error for a pool that does not fit what is left of SBUF or PSUM."""
    params = ctx.params
    what = f"{p.width} tile(s) alive at once" + (f" x {p.r} rotating buffers" if p.r > 1 else "")
    if p.buffer is MemoryRegion.sbuf:
        cap = int(params.sbuf_usable_partition_bytes)
        free = ctx.sbuf_available()
        raise SbufCapacityError(
            f"{p.where}: {p.label!r} needs {p.n} SBUF buffer(s) of {p.unit} B per partition "
            f"({what}) = {p.n * p.unit} B, but {params.name} has {cap} B usable per partition "
            f"and the kernel's other tiles leave {free} B. Use smaller tiles or blocks, or keep "
            f"fewer of them alive at once. (The compiler would spill tiles to HBM and load them "
            f"back, paying in DMA time; where it spills is not published, so trnlab stops here.)"
        )
    free = sum(1 for t in ctx._memory.psum_banks if t == -1)
    raise PsumBankOverflowError(
        f"{p.where}: {p.label!r} needs {p.n * p.unit} PSUM bank(s) ({what}), but "
        f"{params.name} has {params.psum_banks} and {free} are free: keep fewer PSUM tiles "
        f"alive at once (copy each result to SBUF when its accumulation is done)."
    )


def _alloc(ctx: KernelContext, p: Pool) -> None:
    p.tiles.clear()  # a pool that holds its space in stretches takes it anew each time
    p.heap.clear()
    if p.buffer is MemoryRegion.sbuf:
        if p.n * p.unit > ctx.sbuf_available():
            _refuse(ctx, p)
    elif p.n * p.unit > sum(1 for t in ctx._memory.psum_banks if t == -1):
        _refuse(ctx, p)
    for b in range(p.n):
        name = p.label if p.n == 1 else f"{p.label}[{b}]"
        if p.buffer is MemoryRegion.sbuf:
            t = ctx.sbuf((p.parts, p.free), p.fmt, name)
        else:
            t = ctx.psum((p.parts, p.free), name)
        if p.n > 1:
            t.pool, t.buffer = p.label, b
        t.fully_written = True  # values are checked by the trace (NaN sentinels), not here
        p.tiles.append(t)
        p.heap.append((-1, b))


def _replay(trace: Trace, ctx: KernelContext, pools: list[Pool] | None) -> list[Pool]:
    if pools is None:
        pools = plan(trace, ctx)
    starts: dict[int, list[Pool]] = {}
    ends: dict[int, list[Pool]] = {}
    for p in pools:
        for a, b in p.spans():
            starts.setdefault(a, []).append(p)
            ends.setdefault(b, []).append(p)
    phys: dict[int, object] = {}  # storage id -> core Tile
    pool_of = {s.id: p for p in pools for s in p.storages}
    for s in trace.hbm:
        if s.core is None:
            rows, cols = s.rows, s.cols
            s.core = ctx.hbm(s.name, (rows, cols), s.dtype.fmt, None, written=True)

    def tile(ref) -> View:
        s = ref[0]
        t = phys.get(s.id)
        if t is None:
            p = pool_of[s.id]
            _release, b = heapq.heappop(p.heap)
            heapq.heappush(p.heap, (s.last, b))
            t = phys[s.id] = p.tiles[b]
        return View(t, ref[1], ref[2], ref[3], ref[4])

    def hbm(ref) -> HBMView:
        return HBMView(ref[0].core, ref[1], ref[2], ref[3], ref[4])

    rows = [0] * (len(trace.ops) + 1)  # the core's instruction rows of each trace op
    for i, op in enumerate(trace.ops):
        rows[i] = ctx.recorded
        for p in starts.get(i, ()):
            try:
                _alloc(ctx, p)
            except (SbufCapacityError, PsumBankOverflowError):
                raise
            except (HardwareRuleError, KernelArgumentError) as e:
                raise type(e)(f"{p.where} ({p.label!r}): {e}") from None
        try:
            kind = op[0]
            if kind == "op":
                _, name, engine, out, ins, elements, func = op
                ctx.nki_op(name, engine, tile(out), [tile(x) for x in ins], elements, func)
            elif kind == "dma":
                _, dst, src, dge, n, pk = op
                how = {"dge": dge, "flat": True, "elements": n, "packets": pk}
                if dst[0].on_chip and src[0].on_chip:
                    ctx.dma_sbuf(tile(dst), tile(src), **how)
                elif not (dst[0].on_chip or src[0].on_chip):
                    ctx.dma_hbm(hbm(dst), hbm(src), **how)
                elif dst[0].on_chip:
                    ctx.load(tile(dst), hbm(src), **how)
                else:
                    ctx.store(hbm(dst), tile(src), **how)
            elif kind == "dma_transpose":
                _, dst, src, dge, n = op
                sides = [tile(x) if x[0].on_chip else hbm(x) for x in (dst, src)]
                ctx.dma_transpose(sides[0], sides[1], dge=dge, elements=n)
            elif kind == "matmul":
                _, out, st, mv, acc, packed, reads = op
                ctx.matmul(
                    tile(out), tile(st), tile(mv), accumulate=acc, packed=packed,
                    reads=[tile(x) for x in reads],
                )  # fmt: skip
            else:  # transpose
                _, out, src = op
                ctx.transpose(tile(out), tile(src))
        except (HardwareRuleError, KernelArgumentError) as e:
            raise type(e)(f"{_where(trace, i)}: {e}") from None
        for p in ends.get(i, ()):
            ctx.free(*p.tiles)
    rows[-1] = ctx.recorded
    for c, q in trace.deps:  # NkiInstruction.depends_on
        for row in range(rows[c], rows[c + 1]):
            for before in range(rows[q], rows[q + 1]):
                ctx.wait_for(row, before)
    return pools
