"""The trace of one kernel on one NeuronCore: its tensors, and the instructions it issued.

A kernel runs once, as Python, under a :class:`Trace` (NKI's specialisation: loops unroll,
calls inline). Each ``nki.isa`` call checks its arguments, computes its values on the numpy
arrays of its tensors (when numerics are on) and appends one instruction to ``ops``, naming the
storages and regions it touches. Afterwards :mod:`trnlab.nki._alloc` gives every SBUF/PSUM
tensor a physical buffer, as the NKI compiler would, and replays ``ops`` onto a
``trnlab.core.KernelContext`` for the engine timeline.

Instruction records (``ops``):

- ``("dma", dst, src, dge, elements, packets)``: a tile ref and an HBM ref, two tile refs
  (SBUF to SBUF) or two HBM refs (HBM to HBM); a strided access is recorded as its bounding
  box, with the ``elements`` it moves (else None); ``packets`` are the contiguous runs it is
  made of.
- ``("dma_transpose", dst, src, dge, elements)``: a DMA transpose (``nisa.dma_transpose``),
  each side a tile ref or an HBM ref, ``elements`` as for ``"dma"``.
- ``("matmul", out, stationary, moving, accumulate, packed, reads)``: ``reads`` the further
  tiles the matmul reads (an MX matmul's two scale tiles), else ``()``.
- ``("transpose", out, src)``
- ``("op", name, engine, out, ins, elements, func)``: a Vector / Scalar / GpSimd instruction
  (``trnlab.core``'s ``nki_op``).

A tile ref is ``(storage, p0, p1, f0, f1)``, an HBM ref ``(storage, r0, r1, c0, c1)``.
"""

from __future__ import annotations

import linecache
import math
import os
import re
import sys
import threading

import numpy as np

from trnlab.core import (
    CoreParams,
    InstructionLimitError,
    KernelArgumentError,
    PsumBankOverflowError,
    TileTooLargeError,
)
from trnlab.core._progress import instruction_limit, limit_message

from ._dtypes import DType
from ._target import generation
from ._tensor import MemoryRegion, NkiTensor, Storage

__all__ = ["Site", "Trace", "current", "site_key", "site_of", "user_frame"]


class _Stack(threading.local):
    """The kernels being traced, innermost last, one stack per thread: a dashboard tracing a
    kernel on a worker thread while the notebook traces another must not share one (each
    thread's instructions went to whichever trace was pushed last)."""

    def __init__(self) -> None:
        self.items: list[Trace] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def append(self, trace: Trace) -> None:
        self.items.append(trace)

    def pop(self) -> Trace:
        return self.items.pop()


_STACK = _Stack()
_PACKAGE = __name__.rsplit(".", 1)[0]  # "trnlab.nki"
_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\])?\s*(?::[^=]*)?=[^=]")


def current() -> Trace:
    """The trace of the kernel being run, or a teaching error outside a kernel."""
    if not _STACK:
        raise KernelArgumentError(
            "NKI tensors and instructions exist only inside a kernel: run it with "
            "nki.simulate(kernel)(*arrays), nki.profile(kernel, chip=...)(*args), or call the "
            "@nki.jit kernel on numpy arrays"
        )
    return _STACK[-1]


def user_call(depth: int = 2):
    """The innermost frame outside trnlab.nki (the kernel's line that called the API) and the
    code of the NKI function that line called (below the API wrappers), or None."""
    f = sys._getframe(depth)
    api = None
    while f is not None and f.f_globals.get("__name__", "").startswith(_PACKAGE):
        if not f.f_code.co_filename.endswith("_observe.py"):  # not the API wrapper
            api = f.f_code
        f = f.f_back
    return f, api


def user_frame(depth: int = 2):
    """The innermost frame outside trnlab.nki (the kernel's line that called the API)."""
    return user_call(depth + 1)[0]


def location(func: str, filename: str, lineno: int) -> str:
    """Where in a kernel's source: ``nki_matmul_hoisted (_matmul.py, line 126)``; for code typed
    in a notebook (a temporary file), the function and the line in its cell only, so messages
    read the same on every machine."""
    base = os.path.basename(filename)
    if filename.startswith("<") or "ipykernel" in filename or not base.endswith(".py"):
        return f"{func}, line {lineno}"
    return f"{func} ({base}, line {lineno})"


class Site:
    """A place in the kernel's source that allocates tensors (one rotating-buffer pool)."""

    __slots__ = ("filename", "func", "label", "lineno")

    def __init__(self, filename: str, lineno: int, label: str, func: str = "?"):
        self.filename = filename
        self.lineno = lineno
        self.label = label
        self.func = func

    @property
    def where(self) -> str:
        return location(self.func, self.filename, self.lineno)


def site_key(f) -> tuple:
    """What identifies an allocation site: the kernel line and the line that called its
    function (code objects and line numbers)."""
    outer = f.f_back
    return (f.f_code, f.f_lineno, outer.f_code if outer else None, outer.f_lineno if outer else 0)


def site_of(f) -> Site:
    """The :class:`Site` of a kernel frame, labelled by the variable its line assigns."""
    line = linecache.getline(f.f_code.co_filename, f.f_lineno)
    m = _ASSIGN.match(line)
    label = m.group(1) if m else f"{f.f_code.co_name}:{f.f_lineno}"
    return Site(f.f_code.co_filename, f.f_lineno, label, f.f_code.co_name)


class _Limits:
    """The core figures the instructions check, read once per trace (CoreParams looks each
    figure up by name)."""

    __slots__ = ("name", "pe_cols", "pe_rows", "psum_free_max", "stationary_free_max")

    def __init__(self, params: CoreParams):
        self.name = params.name
        self.pe_rows = int(params.pe_rows)
        self.pe_cols = int(params.pe_cols)
        self.stationary_free_max = int(params.stationary_free_max)
        self.psum_free_max = int(params.psum_free_max)


class Trace:
    """What one NeuronCore's kernel did, in program order.

    Parameters
    ----------
    params : CoreParams
        The target core (limits, ``nl.tile_size``).
    numerics : bool
        Compute values (False: shapes and timing only).
    launch : object
        The launch this trace belongs to (shared HBM outputs across programs and cores).
    """

    def __init__(self, params: CoreParams, numerics: bool, launch):
        self.params = params
        self.numerics = numerics
        self.launch = launch
        self.gen = generation(params)
        self.ops: list[tuple] = []
        self.apis: list[str] = []
        # What identifies each instruction's operation besides its operands (ALU op, scalars),
        # None where the compiler may not drop it as a repeat (trnlab.nki._reuse).
        self.sigs: list = []
        self.repeats = 0  # instructions dropped as repeats of an earlier one (_reuse)
        self.where: list[tuple[str, int, str]] = []  # (file, line, function) per instruction
        self.on_chip: list[Storage] = []
        self.hbm: list[Storage] = []
        self.sites: dict = {}
        self.names: dict[str, int] = {}
        self.program_id: tuple[int, ...] = (0,)
        self.grid: tuple[int, ...] = (1,)
        self.shared_index = 0
        self.shared: dict[int, Storage] = {}
        self.constants: dict = {}
        self.pmax = int(params.sbuf_partitions)
        self.limits = _Limits(params)
        # An observer of the kernel's nki.language / nki.isa calls (trnlab.nki._observe), and
        # the (site key, Site, where) a replay imposes on the call it makes (None: the caller's).
        self.observer = None
        self.in_api = False  # inside an observed NKI call (the calls it makes are not the kernel's)
        # Dependencies the kernel asked for (NkiInstruction.depends_on): (consumer, producer)
        # instruction indices, the producer the earlier.
        self.deps: list[tuple[int, int]] = []
        self.forced: tuple | None = None
        self.max_ops = instruction_limit(None, numerics, nki=True)  # stops here, not hangs

    def __enter__(self) -> Trace:
        _STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _STACK.pop()

    # --- tensors ------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        n = self.names.get(name, 0)
        self.names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def site(self, depth: int = 3) -> tuple[tuple, Site]:
        """The allocation site of the caller's caller: the innermost kernel line and the line
        that called it (so a helper function called from two places gives two pools)."""
        if self.forced is not None:  # a replayed call (trnlab.course.answers): its recorded site
            return self.forced[0], self.forced[1]
        f, api = user_call(depth + 1)
        if f is None:
            return ("?",), Site("?", 0, "tile")
        # one pool per line and per NKI call on it: nl.store(y, nl.transpose(nl.load(x))) makes
        # a load tile and a transpose's copy-out, which the compiler keeps apart
        key = (*site_key(f), api)
        s = self.sites.get(key)
        if s is None:
            s = self.sites[key] = site_of(f)
        return key, s

    def tensor(self, shape, dtype: DType, buffer: MemoryRegion, name: str = "", depth: int = 3):
        """A new tensor (``nl.ndarray``): on-chip tiles get a site and NaN-sentinel values."""
        shape = tuple(int(x) for x in shape)
        if not shape or any(x < 1 for x in shape):
            raise KernelArgumentError(f"a tensor shape needs positive sizes; got {shape}")
        if dtype.since > self.gen:
            raise KernelArgumentError(
                f"{dtype.name} exists on NeuronCore-v{dtype.since} (trn3) and later; this kernel "
                f"is traced for {self.params.name} ({self.params.chip})"
            )
        on_chip = buffer is MemoryRegion.sbuf or buffer is MemoryRegion.psum
        if on_chip:
            if len(shape) < 2:
                raise KernelArgumentError(
                    f"an {buffer.name.upper()} tensor is at least 2-D (partition, free...); "
                    f"got shape {shape}"
                )
            if shape[0] > self.pmax:
                raise TileTooLargeError(
                    f"{buffer.name.upper()} tensor of shape {shape} has {shape[0]} partitions; "
                    f"{self.params.name} has {self.pmax} (nl.tile_size.pmax). Put at most "
                    f"{self.pmax} rows on partitions and the rest on the free dimensions."
                )
            if buffer is MemoryRegion.psum:
                free = math.prod(shape[1:])
                fmax = int(self.params.psum_free_max)
                if free > fmax:
                    bank = int(self.params.psum_bank_bytes)
                    raise PsumBankOverflowError(
                        f"PSUM tensor of shape {shape} needs {free * 4} B per partition ({free} "
                        f"32-bit accumulators); a PSUM bank of {self.params.name} holds {bank} B "
                        f"({bank // 4}) and a PSUM tile may take at most {fmax}. Split the free "
                        f"dimension into tiles of <= {fmax} (nl.tile_size.psum_bank_fmax)."
                    )
            key, site = self.site(depth)
            label = name or site.label
        else:
            key, site = None, None
            label = name or self.site(depth)[1].label
        if buffer is MemoryRegion.shared_hbm:
            return NkiTensor(self._shared(shape, dtype, label))
        s = self._storage(shape, dtype, buffer, label)
        if on_chip:
            s.site = (key, site)
            self.on_chip.append(s)
        else:
            self.hbm.append(s)
        return NkiTensor(s)

    def _storage(self, shape, dtype: DType, buffer: MemoryRegion, name: str, data=None):
        if data is None and self.numerics:
            data = np.full(shape + ((4,) if dtype.packed > 1 else ()), dtype.sentinel, np.float32)
        on_chip = buffer is MemoryRegion.sbuf or buffer is MemoryRegion.psum
        return Storage(
            len(self.on_chip) + len(self.hbm),
            buffer,
            shape,
            dtype,
            name if on_chip else self._unique(name),
            data,
        )

    def _shared(self, shape, dtype: DType, name: str) -> Storage:
        """A ``shared_hbm`` tensor: the i-th one a program creates is the same tensor in every
        program and core of the launch (its values are shared; each core has its own record)."""
        i = self.shared_index
        self.shared_index += 1
        mine = self.shared.get(i)
        entry = self.launch.shared[i] if i < len(self.launch.shared) else None
        if entry is not None:
            shape0, dtype0, data = entry
            if (shape0, dtype0) != (shape, dtype):
                raise KernelArgumentError(
                    f"shared_hbm tensor #{i} is {shape} {dtype.name} in program "
                    f"{self.program_id} but {shape0} {dtype0.name} in the first program; every "
                    f"program of a launch creates the same shared tensors"
                )
            if mine is not None:
                return mine
        else:
            data = None
            bound = self.launch.bind[i] if i < len(self.launch.bind) else None
            if bound is not None:
                if bound.shape != (math.prod(shape[:-1]) if len(shape) > 1 else 1, shape[-1]):
                    raise KernelArgumentError(
                        f"the kernel's output #{i} {shape} does not match the tensor it is "
                        f"bound to, {bound.name!r} {bound.shape}"
                    )
                data = None if bound.data is None else bound.data.reshape(shape)
        s = self._storage(shape, dtype, MemoryRegion.shared_hbm, name, data)
        if entry is None:
            if i < len(self.launch.bind) and self.launch.bind[i] is not None:
                s.core = self.launch.bind[i]
            self.launch.shared.append((shape, dtype, s.data))
        elif data is not None:
            s.data = data
        self.shared[i] = s
        self.hbm.append(s)
        return s

    def input(self, name: str, shape, dtype: DType, data, core=None, raw=None) -> NkiTensor:
        """An HBM input of the kernel (a numpy argument, ``raw``, or a core tensor). Its
        buffer reads ``nl.hbm``, as a kernel argument's does on hardware (the MX deep dive
        asserts it)."""
        s = self._storage(tuple(shape), dtype, MemoryRegion.private_hbm, name, data)
        if not self.numerics:
            s.data = None
        s.input = True
        s.raw = raw
        s.core = core
        self.hbm.append(s)
        return NkiTensor(s)

    # --- instructions -------------------------------------------------------------------------
    def add(self, op: tuple, api: str, *storages: Storage, sig=None) -> None:
        """Append one instruction touching ``storages``; ``sig``: its parameters besides the
        operands when the compiler may compute a repeat of it once (``_reuse``)."""
        i = len(self.ops)
        if not i & 0x3FFF and i >= self.max_ops:
            raise InstructionLimitError(limit_message(i, self.max_ops, self.numerics, nki=True))
        for s in storages:
            if s.first < 0:
                s.first = i
            s.last = i
        self.ops.append(op)
        self.apis.append(api)
        self.sigs.append(sig)
        if self.forced is not None:
            self.where.append(self.forced[2])
            return
        f = user_frame(3)
        if f is None:
            self.where.append(("?", 0, "?"))
        else:
            self.where.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
