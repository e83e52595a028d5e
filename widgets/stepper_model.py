"""The models behind MatmulStepper and KernelProfile: a cursor over a kernel run.

:class:`RunCursor` steps through any :class:`trnlab.core.Run` in the order its instructions
start: at each step it says which instruction starts, which are in flight, which SBUF and PSUM
tiles hold live data, which parts of the HBM tensors have been moved (and which the
instructions in flight are working on), and the running counters and roofline point.
:class:`MatmulStepperModel` adds the settings of a matmul (generation, M/K/N, format, tile
sizes, kernel variant) and re-runs :func:`trnlab.kernels.matmul` (timing only) when they
change.

Plain Python over :mod:`trnlab.core` and :mod:`trnlab.kernels` (no ipywidgets, no plotly),
so it is tested without a browser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trnlab import core, kernels
from trnlab._checks import choose, flag, number, short, whole
from trnlab._errors import TrnlabTypeError
from trnlab.core import _program as P
from trnlab.core._run import swdge_transfers
from trnlab.units import si

from ._errors import SettingError

__all__ = [
    "FORMATS",
    "TILE_K_OPTIONS",
    "TILE_M_OPTIONS",
    "TILE_N_OPTIONS",
    "HBMPicture",
    "MatmulStepperModel",
    "RunCursor",
    "TileBox",
]

#: Formats offered by the stepper (a generation without a Tensor Engine path for one refuses it).
FORMATS = ("bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp4")
TILE_K_OPTIONS = (32, 64, 128, 256)
TILE_M_OPTIONS = (32, 64, 128, 256)
TILE_N_OPTIONS = (64, 128, 256, 512, 1024)
#: Variants whose tile sizes can be changed (blocked_mnk and pipelined use 128 x 128 x 512).
TILE_VARIANTS = ("tiled", "hoisted", "blocked_mn")
DEFAULT_TILE = (128, 128, 512)  # K (partitions), M (stationary free), N (moving free)
#: Gantt bars drawn at most; longer programs are merged into runs of the same operation.
MAX_BARS = 3000
# Elementwise operations: an output region maps element for element onto the input region.
_ELEMENTWISE = {
    P.ACTIVATION,
    P.TENSOR_TENSOR,
    P.TENSOR_SCALAR,
    P.COPY,
    P.GPSIMD_OP,
    P.REDUCE,
}
#: What the HBM tracing passes through: elementwise ops and SBUF-to-SBUF copies.
_PASS_THROUGH = _ELEMENTWISE | {P.DMA_SBUF}


@dataclass(frozen=True)
class TileBox:
    """One SBUF or PSUM tile as the memory map draws it.

    ``start`` and ``size`` are bytes per partition (SBUF) or bank number and banks (PSUM).
    ``operand`` names the HBM tensor the tile is loaded from or stored to (``"work"`` when
    neither, ``"partial sums"`` for PSUM). ``live``: it holds data the kernel still needs at
    the cursor; ``active``: an instruction in flight reads or writes it.
    """

    id: int
    name: str
    space: str
    operand: str
    start: int
    size: int
    partitions: int
    fmt: str
    live: bool
    active: bool


@dataclass(frozen=True)
class HBMPicture:
    """What has happened to one HBM tensor by the cursor.

    ``counts[i, j]`` is how many finished transfers covered cell (i, j) of a grid of
    ``cell = (rows, cols)`` elements: loads for an input (more than 1 means re-loaded, i.e. not
    reused), stores for an output. ``moving`` are the regions DMA transfers in flight are
    moving; ``working`` those the compute instructions in flight read or produce (traced
    through SBUF and PSUM back to the loads, or on to the stores). Regions are
    ``(r0, r1, c0, c1)`` in elements, in the picture's orientation (transposed if asked).
    """

    name: str
    shape: tuple[int, int]
    cell: tuple[int, int]
    counts: np.ndarray
    moving: tuple[tuple[int, int, int, int], ...]
    working: tuple[tuple[int, int, int, int], ...]
    kind: str  # "loads" or "stores"


def _overlap(a, b):
    """Intersection of regions (p0, p1, f0, f1), or None."""
    p0, p1 = max(a[0], b[0]), min(a[1], b[1])
    f0, f1 = max(a[2], b[2]), min(a[3], b[3])
    return (p0, p1, f0, f1) if p0 < p1 and f0 < f1 else None


def _map(sub, src, dst):
    """Map ``sub`` (inside region ``src``) onto region ``dst`` of the same shape (a free size
    of 1 on either side broadcasts)."""
    p0 = dst[0] + (sub[0] - src[0])
    p1 = dst[0] + (sub[1] - src[0])
    if src[3] - src[2] == 1 or dst[3] - dst[2] == 1:
        f0, f1 = dst[2], dst[3]
    else:
        f0, f1 = dst[2] + (sub[2] - src[2]), dst[2] + (sub[3] - src[2])
    return (p0, min(p1, dst[1]), f0, min(f1, dst[3]))


class RunCursor:
    """A cursor over a kernel run: step through its instructions in the order they start.

    Position ``p`` (0 ... ``n_steps``) is "just as the p-th instruction to start starts"; the
    last position, ``n_steps``, is the end of the run. Counters count the instructions that
    have *finished* by the cursor's time.

    Parameters
    ----------
    run : trnlab.core.Run
        Any kernel run (:func:`trnlab.core.run`, :func:`trnlab.kernels.matmul`...).
    position : int
        Where the cursor starts.
    """

    def __init__(self, run: core.Run, position: int = 0) -> None:
        if not isinstance(run, core.Run):
            raise TrnlabTypeError(
                f"a cursor steps through a trnlab.core.Run (from core.run or kernels.matmul), "
                f"not {short(run)}"
            )
        self.run = run
        prog = run.program
        self.table = prog.table
        # Time order: by start, ties in program order (a stable sort of the start times).
        self.order = np.argsort(run.start, kind="stable")
        self.n_steps = len(prog)
        self._rank = np.empty(self.n_steps, np.int64)
        self._rank[self.order] = np.arange(self.n_steps)
        ends = run.end[np.argsort(run.end, kind="stable")]
        by_end = np.argsort(run.end, kind="stable")
        self._ends = ends
        self._cum_flops = np.concatenate([[0.0], np.cumsum(self.table["flops"][by_end])])
        hbm_bytes = run.program.hbm_bytes()  # as the run counts them (no SBUF-to-SBUF copy)
        self._cum_bytes = np.concatenate([[0.0], np.cumsum(hbm_bytes[by_end])])
        self._operands = self._tile_operands()
        self._lifetimes = self._tile_lifetimes()
        self._access: dict[tuple[str, int], np.ndarray] = {}
        self._trace: dict[int, tuple] = {}
        self.position = 0
        self.set(position=position)

    # Cursor -----------------------------------------------------------------------------------
    def set(self, **changes) -> RunCursor:
        """Move the cursor: ``position=`` (a step) or ``time=`` (seconds; the last step that
        has started by then).

        Raises
        ------
        SettingError
            A position outside 0 ... n_steps, a time that is not a number >= 0, or an unknown
            setting.
        """
        unknown = set(changes) - {"position", "time"}
        if unknown:
            raise SettingError(f"the cursor has no setting {sorted(unknown)}; use position or time")
        if "time" in changes and "position" in changes:
            raise SettingError("move the cursor by position or by time, not both at once")
        if "time" in changes:
            t = number(changes["time"], "time (s)", 0, None, error=SettingError)
            if t >= self.run.latency:
                changes["position"] = self.n_steps
            else:
                starts = self.run.start[self.order]
                changes["position"] = max(0, int(np.searchsorted(starts, t, side="right")) - 1)
        if "position" in changes:
            p = changes["position"]
            if isinstance(p, bool) or not isinstance(p, int | np.integer):
                raise SettingError(f"position must be a whole number, not {short(p)}")
            if not 0 <= p <= self.n_steps:
                raise SettingError(
                    f"position {p} is outside the run: 0 (first instruction) to "
                    f"{self.n_steps} (the end)"
                )
            self.position = int(p)
        return self

    def step(self, k: int = 1) -> RunCursor:
        """Forward ``k`` steps (stops at the end)."""
        k = whole(k, "steps", None, None, SettingError)
        return self.set(position=min(self.n_steps, max(0, self.position + k)))

    def back(self, k: int = 1) -> RunCursor:
        """Back ``k`` steps (stops at the first)."""
        return self.step(-whole(k, "steps", None, None, SettingError))

    def first(self) -> RunCursor:
        return self.set(position=0)

    def last(self) -> RunCursor:
        return self.set(position=self.n_steps)

    def jump(self, instruction: int) -> RunCursor:
        """To the step where instruction ``instruction`` (program order) starts."""
        instruction = whole(instruction, "instruction", 0, self.n_steps - 1, SettingError)
        return self.set(position=int(self._rank[instruction]))

    def next_op(self, op: str) -> RunCursor:
        """To the next step (after the cursor) whose instruction is ``op`` (``"matmul"``,
        ``"dma_load"``...); stays put if there is none."""
        op = choose(op, P.OPS, "operation", SettingError)
        ops = self.table["op"][self.order[self.position + 1 :]]
        hit = np.flatnonzero(ops == P.OPS.index(op))
        if len(hit):
            self.position += 1 + int(hit[0])
        return self

    @property
    def at_end(self) -> bool:
        return self.position >= self.n_steps

    @property
    def time(self) -> float:
        """The cursor's time (s): when the current instruction starts, or the latency at the end."""
        if self.at_end:
            return float(self.run.latency)
        return float(self.run.start[self.order[self.position]])

    @property
    def current(self) -> int | None:
        """The instruction (program order) starting at the cursor; None at the end."""
        return None if self.at_end else int(self.order[self.position])

    def in_flight(self) -> np.ndarray:
        """Instructions running at the cursor (the current one included)."""
        t = self.time
        running = (self.run.start <= t) & (t < self.run.end)
        if self.current is not None:
            running[self.current] = True
        return np.flatnonzero(running)

    def describe(self) -> str:
        """The step in words: which instruction starts, on which engine, when."""
        if self.at_end:
            return (
                f"End of the run: {self.n_steps} instructions in {self.run.latency * 1e6:,.2f} us."
            )
        i = self.current
        dur = self.run.end[i] - self.run.start[i]
        return (
            f"Step {self.position + 1} of {self.n_steps} at {self.time * 1e6:,.3f} us: "
            f"{self.run.program.describe(i)} ({dur * 1e9:,.0f} ns)."
        )

    # Counters ---------------------------------------------------------------------------------
    def _done(self, t: float) -> int:
        return int(np.searchsorted(self._ends, t, side="right"))

    def counters(self) -> dict[str, float]:
        """Running counters at the cursor: the work of the instructions finished by then."""
        r, t = self.run, self.time
        done = self._done(t)
        flops, nbytes = float(self._cum_flops[done]), float(self._cum_bytes[done])
        sbuf_t, sbuf_b = r.occupancy("sbuf")
        psum_t, psum_b = r.occupancy("psum")
        return {
            "time_s": t,
            "step": self.position,
            "steps": self.n_steps,
            "instructions_done": done,
            "in_flight": len(self.in_flight()) if not self.at_end else 0,
            "flops": flops,
            "hbm_bytes": nbytes,
            "achieved_flops": flops / t if t > 0 else 0.0,
            "intensity": flops / nbytes if nbytes else 0.0,
            # HFU so far: the time these FLOPs need at peak over the time taken.
            "utilisation": (flops / r.flops) * r.compute_bound_s / t if t > 0 and r.flops else 0.0,
            "sbuf_bytes_per_partition": float(_step_at(sbuf_t, sbuf_b, t)),
            "psum_bytes_per_partition": float(_step_at(psum_t, psum_b, t)),
            "total_flops": r.flops,
            "total_hbm_bytes": r.hbm_bytes,
            "latency_s": r.latency,
        }

    def trajectory(self) -> dict[str, np.ndarray]:
        """The roofline point at every step: intensity and achieved FLOP/s so far (steps with
        no bytes finished yet are left out)."""
        times = np.concatenate([self.run.start[self.order], [self.run.latency]])
        done = np.searchsorted(self._ends, times, side="right")
        flops, nbytes = self._cum_flops[done], self._cum_bytes[done]
        ok = (nbytes > 0) & (flops > 0) & (times > 0)
        return {
            "step": np.flatnonzero(ok),
            "intensity": flops[ok] / nbytes[ok],
            "achieved_flops": flops[ok] / times[ok],
        }

    def roofline(self) -> dict[str, float]:
        """The run's roofline (``Run.roofline()``) with the running point at the cursor."""
        c = self.counters()
        out = dict(self.run.roofline())
        out["running_intensity"] = c["intensity"]
        out["running_flops"] = c["achieved_flops"]
        return out

    def summary(self) -> str:
        """A sentence of numbers for the counters beside the charts."""
        c, r = self.counters(), self.run
        return (
            f"At {c['time_s'] * 1e6:,.2f} of {r.latency * 1e6:,.2f} us: "
            f"{c['instructions_done']} of {self.n_steps} instructions done, {c['in_flight']} in "
            f"flight; {si(c['hbm_bytes'], 'B')} of {si(r.hbm_bytes, 'B')} moved, "
            f"{si(c['flops'], 'FLOP')} of {si(r.flops, 'FLOP')} done; Tensor Engine at "
            f"{c['utilisation']:.1%} of peak so far ({r.utilisation:.1%} over the run); SBUF "
            f"{c['sbuf_bytes_per_partition'] / 1024:,.1f} KiB per partition in use, PSUM "
            f"{c['psum_bytes_per_partition'] / 1024:,.1f} KiB."
        )

    # Memories ---------------------------------------------------------------------------------
    def _tile_operands(self) -> dict[int, str]:
        t, prog = self.table, self.run.program
        names = {}
        for op, col in ((P.DMA_LOAD, "out"), (P.DMA_STORE, "in0")):
            sel = t["op"] == op
            for tid, h in zip(t[col][sel].tolist(), t["hbm"][sel].tolist(), strict=True):
                names.setdefault(tid, prog.tensors[h].name)
        return {
            r.id: names.get(r.id, "partial sums" if r.space == "psum" else "work")
            for r in prog.tiles
        }

    def _tile_lifetimes(self) -> tuple[np.ndarray, np.ndarray]:
        # As Run.occupancy counts: first access start to last access end.
        n = len(self.run.program.tiles)
        first, last = np.full(n, np.inf), np.full(n, -np.inf)
        for col in ("out", "in0", "in1"):
            ids = self.table[col]
            ok = ids >= 0
            np.minimum.at(first, ids[ok], self.run.start[ok])
            np.maximum.at(last, ids[ok], self.run.end[ok])
        return first, last

    def operands(self) -> list[str]:
        """Operand names in the order the maps colour them: HBM tensors, then the rest."""
        names = [t.name for t in self.run.program.tensors]
        rest = sorted(set(self._operands.values()) - set(names))
        return names + rest

    def tiles(self, space: str = "sbuf") -> list[TileBox]:
        """The tiles of ``space`` ("sbuf" or "psum") holding data at the cursor."""
        space = choose(space, ("sbuf", "psum"), "memory space", SettingError)
        t = self.time
        first, last = self._lifetimes
        flight = self.in_flight() if not self.at_end else np.zeros(0, np.int64)
        active = set()
        for col in ("out", "in0", "in1"):
            active.update(int(x) for x in self.table[col][flight] if x >= 0)
        bank = self.run.params.psum_bank_bytes
        out = []
        for r in self.run.program.tiles:
            if r.space != space:
                continue
            live = bool(first[r.id] <= t < last[r.id]) or r.id in active
            size = (
                r.bytes_per_partition
                if space == "sbuf"
                else max(1, -(-r.bytes_per_partition // bank))
            )
            out.append(
                TileBox(
                    r.id,
                    r.name,
                    space,
                    self._operands[r.id],
                    int(r.offset),
                    int(size),
                    int(r.shape[0]),
                    r.fmt,
                    live,
                    r.id in active,
                )
            )
        return out

    # Where the data behind an instruction lives in HBM ------------------------------------------
    def _accesses(self, col: str, tile: int) -> np.ndarray:
        key = (col, tile)
        if key not in self._access:
            self._access[key] = np.flatnonzero(self.table[col] == tile)
        return self._access[key]

    def _back(self, tile, region, before, depth=0):
        """HBM regions (tensor, r0, r1, c0, c1) that ``region`` of ``tile`` was loaded from,
        as read by instruction ``before``: back through the latest writers (elementwise ops
        included, Tensor Engine ops not)."""
        out = []
        writers = self._accesses("out", tile)
        writers = writers[writers < before][::-1]
        left = region
        for w in writers[:16]:
            row = self.table[w]
            sub = _overlap(left, tuple(row["out_region"]))
            if sub is None:
                continue
            if row["op"] == P.DMA_LOAD:
                h = _map(sub, tuple(row["out_region"]), tuple(row["hbm_region"]))
                out.append((int(row["hbm"]), *h))
            elif row["op"] in _PASS_THROUGH and depth < 4:
                src = _map(sub, tuple(row["out_region"]), tuple(row["in0_region"]))
                out += self._back(int(row["in0"]), src, w, depth + 1)
            if sub == left:  # the latest writer covers it: older ones were overwritten
                break
        return out

    def _forward(self, tile, region, after, depth=0):
        """HBM regions that ``region`` of ``tile`` (written by ``after``) ends up in: on
        through the first reader of each step, to the store."""
        for col in ("in0", "in1"):
            readers = self._accesses(col, tile)
            readers = readers[readers > after]
            for rd in readers[:64]:
                row = self.table[rd]
                sub = _overlap(region, tuple(row[f"{col}_region"]))
                if sub is None:
                    continue
                if row["op"] == P.DMA_STORE:
                    h = _map(sub, tuple(row["in0_region"]), tuple(row["hbm_region"]))
                    return [(int(row["hbm"]), *h)]
                if row["op"] in _PASS_THROUGH and depth < 64:
                    dst = _map(sub, tuple(row[f"{col}_region"]), tuple(row["out_region"]))
                    return self._forward(int(row["out"]), dst, rd, depth + 1)
                return []
        return []

    def hbm_regions(self, i: int) -> tuple:
        """HBM regions behind instruction ``i``: what a DMA moves, or what a compute
        instruction's inputs were loaded from and where its output will be stored.

        Returns tuples ``(tensor id, r0, r1, c0, c1)`` in the tensor's own coordinates.
        """
        if i not in self._trace:
            row = self.table[i]
            if row["hbm"] >= 0:  # a DMA with an HBM side: what it moves
                found = [(int(row["hbm"]), *(int(x) for x in row["hbm_region"]))]
                if i in self.run.program.hbm_reads:  # an HBM -> HBM copy: its source too
                    h, region = self.run.program.hbm_reads[i]
                    found.append((h, *region))
            else:
                found = []
                for col in ("in0", "in1"):
                    if row[col] >= 0:
                        found += self._back(int(row[col]), tuple(row[f"{col}_region"]), i)
                if row["out"] >= 0:
                    found += self._forward(int(row["out"]), tuple(row["out_region"]), i)
            self._trace[i] = tuple(tuple(int(x) for x in f) for f in found)
        return self._trace[i]

    def hbm(self, name: str, transpose: bool = False, cells: int = 64) -> HBMPicture:
        """What has happened to HBM tensor ``name`` by the cursor (see :class:`HBMPicture`).

        ``transpose`` draws it as its transpose (A for the ``a_t`` a matmul kernel reads);
        ``cells`` is the most grid cells along a side.
        """
        tensors = {t.name: t for t in self.run.program.tensors}
        if not isinstance(name, str) or name not in tensors:
            raise SettingError(f"no HBM tensor {short(name)}; the kernel has {', '.join(tensors)}")
        flag(transpose, "transpose", SettingError)
        cells = whole(cells, "cells (grid cells along a side)", 1, 1024, SettingError)
        rec = tensors[name]
        rows, cols = rec.shape
        cr, cc = max(1, math.ceil(rows / cells)), max(1, math.ceil(cols / cells))
        tab = self.table
        sel = tab["hbm"] == rec.id
        kind = "stores" if np.isin(tab["op"][sel], P.HBM_WRITES).any() else "loads"
        done = sel & (self.run.end <= self.time)
        reg = tab["hbm_region"][done]
        reads = [  # the sources of finished HBM -> HBM copies
            region
            for i, (h, region) in self.run.program.hbm_reads.items()
            if h == rec.id and self.run.end[i] <= self.time
        ]
        if reads:
            reg = np.concatenate([reg, np.array(reads, reg.dtype).reshape(-1, 4)])
        grid = np.zeros((math.ceil(rows / cr) + 1, math.ceil(cols / cc) + 1), np.int64)
        if len(reg):
            i0, i1 = reg[:, 0] // cr, -(-reg[:, 1] // cr)
            j0, j1 = reg[:, 2] // cc, -(-reg[:, 3] // cc)
            # 2-D difference array: +1 at the top-left, -1 past each edge, then cumulative sums.
            np.add.at(grid, (i0, j0), 1)
            np.add.at(grid, (i1, j0), -1)
            np.add.at(grid, (i0, j1), -1)
            np.add.at(grid, (i1, j1), 1)
        counts = grid.cumsum(0).cumsum(1)[:-1, :-1]
        moving, working = [], []
        if not self.at_end:
            for i in self.in_flight():
                is_dma = tab["op"][i] in P.DMA_OPS
                for h, r0, r1, c0, c1 in self.hbm_regions(int(i)):
                    if h == rec.id:
                        (moving if is_dma else working).append((r0, r1, c0, c1))
        shape, cell = (rows, cols), (cr, cc)
        if transpose:
            counts = counts.T
            shape, cell = (cols, rows), (cc, cr)
            moving = [(c0, c1, r0, r1) for r0, r1, c0, c1 in moving]
            working = [(c0, c1, r0, r1) for r0, r1, c0, c1 in working]
        return HBMPicture(
            name,
            shape,
            cell,
            counts,
            tuple(sorted(set(moving))),
            tuple(sorted(set(working))),
            kind,
        )

    # Timeline ---------------------------------------------------------------------------------
    def engines(self) -> list[tuple[int, str]]:
        """(engine id, name) of the engines the run uses, compute engines first (GpSimd too
        when it only writes the descriptors of software-DGE transfers)."""
        used = set(np.unique(self.table["engine"]).tolist())
        if len(self._descriptors()):
            used.add(P.GPSIMD)
        return [(int(e), P.engine_name(int(e))) for e in sorted(used)]

    def gantt(self, max_bars: int = MAX_BARS) -> dict[str, np.ndarray]:
        """Bars of the engine timeline: engine, op, start, end, first instruction, count.

        Up to ``max_bars`` instructions are one bar each; beyond, consecutive instructions of
        one operation on one engine separated by less than a small gap merge into one bar
        (``count`` says how many), so a long run still draws quickly.
        """
        max_bars = whole(max_bars, "max_bars", 1, None, SettingError)
        tab, r = self.table, self.run
        return _bars(tab["engine"], tab["op"], r.start, r.end, r.latency, max_bars)

    def descriptor_bars(self, max_bars: int = MAX_BARS) -> dict[str, np.ndarray]:
        """GpSimd writing the descriptors of each software-DGE transfer (``swdge_gpsimd_time``
        from the transfer's start, before its queue sets it up): the GpSimd work that
        ``Run.busy["GpSimd"]`` counts and no instruction of the program shows. The bars are
        on the GpSimd engine; ``index`` is the transfer's; merged beyond ``max_bars``."""
        max_bars = whole(max_bars, "max_bars", 1, None, SettingError)
        sel = self._descriptors()
        s = self.run.start[sel]
        e = s + float(self.run.params.swdge_gpsimd_time)
        eng = np.full(len(sel), P.GPSIMD, np.int64)
        op = self.table["op"][sel]
        bars = _bars(eng, op, s, e, self.run.latency, max_bars)
        bars["index"] = sel[bars["index"]]
        return bars

    def _descriptors(self) -> np.ndarray:
        return swdge_transfers(self.table)


def _bars(engine, op, start, end, latency: float, max_bars: int) -> dict[str, np.ndarray]:
    """One bar per interval, or, beyond ``max_bars``, consecutive intervals of one operation
    on one engine less than a small gap apart merged into one (``count`` says how many)."""
    n = len(engine)
    if n <= max_bars:
        return {
            "engine": engine.astype(np.int64),
            "op": op.astype(np.int64),
            "start": start.copy(),
            "end": end.copy(),
            "index": np.arange(n),
            "count": np.ones(n, np.int64),
        }
    o = np.lexsort((start, op, engine))
    eng, opo, s, e = engine[o], op[o], start[o], end[o]
    gap = latency * 4 / max_bars
    new = np.ones(n, bool)
    new[1:] = (eng[1:] != eng[:-1]) | (opo[1:] != opo[:-1]) | (s[1:] > e[:-1] + gap)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], n]
    return {
        "engine": eng[starts].astype(np.int64),
        "op": opo[starts].astype(np.int64),
        "start": s[starts],
        "end": np.maximum.reduceat(e, starts),
        "index": o[starts],
        "count": ends - starts,
    }


def _step_at(times: np.ndarray, values: np.ndarray, t: float) -> float:
    """Value of the step function (times, values) at ``t`` (the last change at or before t)."""
    return float(values[max(0, int(np.searchsorted(times, t, side="right")) - 1)])


class MatmulStepperModel:
    """State of the matmul stepper: the settings of C = A @ B and a cursor over its run.

    Parameters
    ----------
    chip : str
        A Neuron chip with a NeuronCore (``"trn1"``, ``"inf2"``, ``"trn2"``, ``"trn3"``).
    m, k, n : int
        A is [m, k], B is [k, n].
    dtype : str
        Format of A and B (one of :data:`FORMATS`).
    variant : str
        A kernel of :data:`trnlab.kernels.VARIANTS`.
    tile_k, tile_m, tile_n : int
        Tile of one matmul (partitions x stationary free x moving free); tiled, hoisted and
        blocked_mn only.
    max_matmuls : int
        The largest problem the stepper runs (in matmul instructions of the chosen tiles).
        The default, 2,048, keeps one change of a dashboard control under about a second on a
        two-core machine (benchmarks/bench_stepper.py times it); 8,192 took two, 4,096 1.2.
    """

    SETTINGS = ("chip", "m", "k", "n", "dtype", "variant", "tile_k", "tile_m", "tile_n")

    def __init__(
        self,
        chip: str = "trn1",
        m: int = 256,
        k: int = 512,
        n: int = 1024,
        dtype: str = "bf16",
        variant: str = "tiled",
        tile_k: int = 128,
        tile_m: int = 128,
        tile_n: int = 512,
        max_matmuls: int = 2048,
    ) -> None:
        self.max_matmuls = whole(max_matmuls, "max_matmuls", 1, 1 << 20, SettingError)
        self.settings: dict = {}
        self.cursor: RunCursor
        self.revision = 0  # bumped on every new run (views redraw the run-wide parts then)
        self.set(
            chip=chip,
            m=m,
            k=k,
            n=n,
            dtype=dtype,
            variant=variant,
            tile_k=tile_k,
            tile_m=tile_m,
            tile_n=tile_n,
        )

    # Options ----------------------------------------------------------------------------------
    @staticmethod
    def chips() -> list[tuple[str, str]]:
        """(name, key) of the chips with a NeuronCore."""
        from trnlab import catalog

        return [(c.name, c.key) for c in catalog.chips("neuron") if c.core is not None]

    variants = tuple(kernels.VARIANTS)
    formats = FORMATS

    # State ------------------------------------------------------------------------------------
    def __getattr__(self, name: str):
        settings = self.__dict__.get("settings", {})
        if name in settings:
            return settings[name]
        raise AttributeError(name)

    @property
    def run(self) -> core.Run:
        return self.cursor.run

    @property
    def position(self) -> int:
        return self.cursor.position

    def set(self, **changes) -> MatmulStepperModel:
        """Change any settings (and/or ``position`` / ``time``); all-or-nothing.

        A change of the matmul re-runs it (timing only) and keeps the cursor at the same
        fraction of the run.

        Raises
        ------
        SettingError
            An unknown setting or value, a problem too large to step.
        trnlab.core.HardwareRuleError
            A rule of the hardware the kernel breaks (the core's message names the limit).
        """
        cursor_keys = {"position", "time"}
        unknown = set(changes) - set(self.SETTINGS) - cursor_keys
        if unknown:
            raise SettingError(
                f"MatmulStepper has no setting {sorted(unknown)}; settings: "
                f"{', '.join(self.SETTINGS)}, position, time"
            )
        new = {**self.settings, **{k: v for k, v in changes.items() if k in self.SETTINGS}}
        cursor = None
        new = self._validate(new)
        if new != self.settings:
            options = {}
            if new["variant"] in TILE_VARIANTS:
                options = {
                    "tile_k": new["tile_k"],
                    "tile_m": new["tile_m"],
                    "tile_n": new["tile_n"],
                }
            run = kernels.matmul(
                (new["m"], new["k"]),
                (new["k"], new["n"]),
                variant=new["variant"],
                chip=new["chip"],
                dtype=new["dtype"],
                numerics=False,
                **options,
            )
            cursor = RunCursor(run)
            if self.settings and self.cursor.n_steps:
                frac = self.cursor.position / self.cursor.n_steps
                cursor.set(position=round(frac * cursor.n_steps))
        target = cursor or self.cursor
        moves = {k: v for k, v in changes.items() if k in cursor_keys}
        if moves:
            target.set(**moves)  # raises before moving if the move is bad
        if cursor is not None:
            self.settings, self.cursor = new, cursor
            self.revision += 1
        return self

    def _validate(self, s: dict) -> dict:
        """The settings checked and spelled canonically (names in any case), or an error."""
        s = dict(s)
        for dim in ("m", "k", "n"):
            s[dim] = whole(s[dim], dim.upper(), 1, 65536, SettingError)
        s["variant"] = choose(s["variant"], kernels.VARIANTS, "kernel variant", SettingError)
        s["dtype"] = choose(s["dtype"], FORMATS, "format (dtype)", SettingError)
        chips = [k for _, k in self.chips()]
        names = {label.lower(): k for label, k in self.chips()}
        try:
            s["chip"] = choose(
                s["chip"], chips, "chip with a NeuronCore model", SettingError, names
            )
        except SettingError:
            from trnlab import catalog

            if (
                isinstance(s["chip"], str)
                and s["chip"].strip().lower() in catalog.load().chip_aliases
            ):
                s["chip"] = catalog.chip(s["chip"]).key  # an alias ("Trainium2")
            if s["chip"] not in chips:
                raise
        for name in ("tile_k", "tile_m", "tile_n"):
            s[name] = whole(s[name], name, 1, 65536, SettingError)
        tile = (s["tile_k"], s["tile_m"], s["tile_n"])
        if s["variant"] not in TILE_VARIANTS and tile != DEFAULT_TILE:
            raise SettingError(
                f"{s['variant']} uses 128 x 128 x 512 tiles (its blocks are built from them); "
                f"tile sizes are a choice of {', '.join(TILE_VARIANTS)}"
            )
        tk, tm, tn = tile if s["variant"] in TILE_VARIANTS else DEFAULT_TILE
        matmuls = math.ceil(s["m"] / tm) * math.ceil(s["n"] / tn) * math.ceil(s["k"] / tk)
        if matmuls > self.max_matmuls:
            raise SettingError(
                f"{s['m']} x {s['k']} x {s['n']} in {tk} x {tm} x {tn} tiles is {matmuls:,} "
                f"matmuls; the stepper steps at most {self.max_matmuls:,}. Use smaller sizes here, "
                f"or kernels.matmul(..., numerics=False) with KernelProfile for large ones."
            )
        return s

    # Stepping (the cursor's) ------------------------------------------------------------------
    def step(self, k: int = 1) -> MatmulStepperModel:
        """Forward ``k`` steps (stops at the end)."""
        self.cursor.step(k)
        return self

    def back(self, k: int = 1) -> MatmulStepperModel:
        self.cursor.back(k)
        return self

    def first(self) -> MatmulStepperModel:
        self.cursor.first()
        return self

    def last(self) -> MatmulStepperModel:
        self.cursor.last()
        return self

    def next_op(self, op: str) -> MatmulStepperModel:
        self.cursor.next_op(op)
        return self

    # Pictures ---------------------------------------------------------------------------------
    def matrices(self) -> dict[str, HBMPicture]:
        """A [M, K] (stored transposed as a_t [K, M]), B [K, N] and C [M, N] in HBM."""
        c = self.cursor
        return {"A": c.hbm("a_t", transpose=True), "B": c.hbm("b"), "C": c.hbm("c")}

    def summary(self) -> str:
        """The run in a sentence, then the cursor's counters."""
        r = self.run
        s = self.settings
        tile = (
            f"{s['tile_k']} x {s['tile_m']} x {s['tile_n']}"
            if s["variant"] in TILE_VARIANTS
            else "128 x 128 x 512"
        )
        return (
            f"{s['variant']} on {r.params.name} ({s['chip']}), A[{s['m']} x {s['k']}] @ "
            f"B[{s['k']} x {s['n']}] in {s['dtype']}, tiles K x M x N = {tile}: "
            f"{self.cursor.n_steps} instructions, {r.latency * 1e6:,.2f} us, Tensor Engine at "
            f"{r.utilisation:.1%} of peak, {r.bound}-bound (intensity "
            f"{r.arithmetic_intensity:,.0f} FLOP/B; ridge {r.roofline()['ridge_intensity']:,.0f})."
        )
