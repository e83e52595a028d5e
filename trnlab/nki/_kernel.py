"""Kernels and their entry points: ``nki.jit``, ``nki.simulate``, ``nki.profile``.

A :class:`Kernel` wraps an NKI kernel function. Launching it traces the function once per SPMD
program (:mod:`trnlab.nki._trace`), with its numpy arguments as HBM tensors; ``simulate``
returns the kernel's outputs as numpy arrays (NKI's ``nki.simulate`` contract, plus the
hardware-rule checks and buffer allocation of the engine model), ``profile`` returns a
:class:`trnlab.core.Run` (timeline, latency, busy, occupancy, roofline).

Launch grids (see docs/nki.md):

- ``kernel[2]``: LNC=2, NKI's current meaning: two programs (``nl.program_id(0)`` 0 and 1),
  each on its own physical NeuronCore, running at the same time; ``profile`` returns the
  slower core's Run, with both in ``run.extra["cores"]``.
- ``kernel[4, 2]`` (or ``kernel[n]`` with n > 2): an SPMD grid of the older NKI editions; its
  programs run one after another on one NeuronCore (one Run, all programs in its timeline).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trnlab._checks import flag, short, whole
from trnlab._errors import TrnlabError
from trnlab._gc import paused_gc
from trnlab._threads import one_blas_thread
from trnlab.core import (
    CoreParams,
    HBMTensor,
    InstructionLimitError,
    KernelArgumentError,
    KernelContext,
    KernelSignatureError,
    Run,
)
from trnlab.core import simulate as _schedule
from trnlab.core._context import MAX_HBM_ELEMENTS
from trnlab.core._progress import instruction_limit

from ._alloc import replay
from ._dtypes import DTYPES, DType, dtype_info, from_numpy, to_numpy, values_of
from ._errors import option
from ._returns import traced_function
from ._spmd import is_placed, placement
from ._target import _chip, resolve
from ._tensor import MemoryRegion, NkiTensor
from ._trace import _STACK, Trace, location

__all__ = ["HBMArg", "Kernel", "hbm", "jit", "profile", "record_into", "simulate"]


@dataclass(frozen=True)
class HBMArg:
    """A kernel argument in HBM given by shape and dtype (``nki.hbm``): values, or none for a
    timing-only profile."""

    shape: tuple[int, ...]
    dtype: DType
    values: np.ndarray | None = None
    name: str | None = None


def hbm(x, dtype=None, name: str | None = None) -> HBMArg:
    """An HBM argument for :func:`profile`: ``nki.hbm((4096, 8192), nl.bfloat16)`` (no values:
    a timing-only run) or ``nki.hbm(array, nl.bfloat16)`` (values rounded to the dtype; how to
    pass bf16 or x4-packed MX data without ml_dtypes: an x4 array has a trailing axis of 4).
    ``name`` names the tensor in the profile (default: the kernel's parameter name)."""
    if name is not None and not isinstance(name, str):
        raise KernelArgumentError(f"nki.hbm(name=...) names the tensor: a string, not {name!r}")
    ints = isinstance(x, list) and x and all(isinstance(v, int | np.integer) for v in x)
    if isinstance(x, tuple) or ints:  # a shape: a timing-only placeholder
        if dtype is None:
            raise KernelArgumentError("nki.hbm(shape, dtype): a shape needs a dtype")
        return HBMArg(_shape(x), dtype_info(dtype), None, name)
    try:
        a = np.asarray(x)
    except ValueError:  # ragged nested lists
        a = np.asarray(None)
    if a.dtype.kind not in "fiub" or a.ndim == 0 or not a.size:
        raise KernelArgumentError(
            f"nki.hbm takes a shape (a tuple such as (128, 512)) or an array of real numbers "
            f"with at least one element; got {short(x)}"
            + (f" (an array of shape {a.shape})" if a.dtype.kind in "fiub" else "")
        )
    d = from_numpy(a, "nki.hbm") if dtype is None else dtype_info(dtype)
    shape = a.shape[:-1] if d.packed > 1 else a.shape
    if d.packed > 1 and a.shape[-1:] != (4,):
        raise KernelArgumentError(
            f"{d.name} values need a trailing axis of 4 (the packed values); got {a.shape}"
        )
    return HBMArg(tuple(shape), d, values_of(np.asarray(a, np.float32), d), name)


def _shape(x) -> tuple[int, ...]:
    """An HBM placeholder's shape: whole numbers >= 1, at most MAX_HBM_ELEMENTS elements."""
    if not x or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in x):
        raise KernelArgumentError(
            f"nki.hbm shape must be one or more whole numbers, such as (128, 512); got {short(x)}"
        )
    shape = tuple(int(v) for v in x)
    if min(shape) < 1:
        raise KernelArgumentError(
            f"nki.hbm shape {shape} has a size below 1; every axis needs >= 1"
        )
    if math.prod(shape) > MAX_HBM_ELEMENTS:
        raise KernelArgumentError(
            f"nki.hbm shape {shape} holds {math.prod(shape):,} elements, more than any chip's HBM "
            f"(the limit is {MAX_HBM_ELEMENTS:,}); use a smaller shape"
        )
    return shape


class Launch:
    """What the programs and cores of one launch share: ``shared_hbm`` tensors."""

    def __init__(self, gridded: bool = False, bind=()):
        self.shared: list = []
        self.gridded = gridded
        self.bind = list(bind)


class Kernel:
    """An NKI kernel (what ``@nki.jit`` returns). ``kernel[grid]`` sets the launch grid;
    calling it on numpy arrays simulates it (inside another kernel it is inlined)."""

    def __init__(self, fn: Callable, grid: tuple[int, ...] | None = None, lnc: int = 1,
                 platform_target: str | None = None):  # fmt: skip
        if not callable(fn):
            raise KernelArgumentError(f"nki.jit wraps a kernel function, not {fn!r}")
        self.fn = fn
        self.grid = grid
        self.lnc = lnc
        self.platform_target = platform_target
        self.placement: list | None = None  # programs per core (nl.spmd_dim / nl.nc grids)
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__name__"):  # a callable object (the grader's kernel recorder)
            self.__name__ = type(fn).__name__

    def __getitem__(self, key) -> Kernel:
        dims = key if isinstance(key, tuple) else (key,)
        if dims and any(is_placed(d) for d in dims):  # kernel[nl.spmd_dim(4, nl.nc(2)), 2]
            grid, n, programs = placement(dims)
            k = Kernel(self.fn, grid, n, self.platform_target)
            k.placement = programs
            return k
        if not dims or not all(isinstance(d, int | np.integer) and d >= 1 for d in dims):
            raise option(
                "kernel[...]",
                f"launch grid {key!r}",
                "positive integers are (kernel[2] for LNC=2, kernel[4, 2] for an SPMD grid), "
                "and one axis placed on the cores with nl.spmd_dim / nl.nc",
            )
        dims = tuple(int(d) for d in dims)
        if len(dims) == 1 and dims[0] <= 2:
            return Kernel(self.fn, None, dims[0], self.platform_target)
        return Kernel(self.fn, dims, 1, self.platform_target)

    def __call__(self, *args, **kwargs):
        if _STACK:  # a kernel calling a kernel: NKI inlines it
            return traced_function(self.fn, self.__name__, stacklevel=3)(*args, **kwargs)
        return simulate(self)(*args, **kwargs)

    def __repr__(self) -> str:
        where = f"[{self.lnc}]" if self.lnc > 1 else (f"{list(self.grid)}" if self.grid else "")
        if self.placement is not None:
            where = f"{list(self.grid)} on {self.lnc} core{'s' if self.lnc > 1 else ''}"
        return f"<nki kernel {self.__name__}{where}>"


def jit(fn=None, *, mode: str | None = None, platform_target: str | None = None, **options):
    """Mark a function as an NKI kernel (``@nki.jit`` or ``@nki.jit(...)``).

    ``platform_target`` (older NKI editions) picks the target when no ``chip=`` is given;
    ``mode`` is accepted and ignored (trnlab always simulates). Other options raise
    :class:`NotModelledError`."""
    if options:
        raise option("nki.jit", f"options {sorted(options)}", "mode and platform_target are")
    if mode is not None and not isinstance(mode, str):
        raise KernelArgumentError(
            f"nki.jit(mode=...) is a string such as 'simulation', not {mode!r}"
        )
    if platform_target is not None:
        _chip(platform_target, "nki.jit(platform_target=...)")  # checked now, not at the launch
    if fn is None:
        return lambda f: jit(f, mode=mode, platform_target=platform_target)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, platform_target=platform_target)


def _kernel(k) -> Kernel:
    if isinstance(k, Kernel):
        return k
    if not callable(k):  # jit(None) would be the decorator form
        raise KernelArgumentError(f"expected an NKI kernel (an @nki.jit function), not {short(k)}")
    return jit(k)


def _bind(k: Kernel, args, kwargs) -> None:
    """The kernel's parameters take these arguments, or a teaching error naming them."""
    try:
        inspect.signature(k.fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise KernelSignatureError(
            f"kernel {k.__name__}{inspect.signature(k.fn)} cannot take {len(args)} "
            f"positional argument(s) and {sorted(kwargs) or 'no'} keyword(s): {exc}"
        ) from None
    except ValueError:  # no signature to read (a builtin): the call itself will say
        pass


# --- launching ----------------------------------------------------------------------------------
_FMT_TO_DTYPE = {}
for _d in DTYPES.values():
    _FMT_TO_DTYPE.setdefault(_d.fmt, _d)


def _names(fn, args, kwargs) -> list[str]:
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
        names = list(bound.arguments)
    except (TypeError, ValueError):
        names = []
    return names[: len(args)] + [f"arg{i}" for i in range(len(names), len(args))]


def _wrap(tr: Trace, name: str, a, cache: dict):
    """A kernel argument as this trace sees it: arrays become HBM tensors (values shared by
    every trace of the launch), anything else passes through."""
    if isinstance(a, HBMArg):
        return tr.input(a.name or name, a.shape, a.dtype, a.values)
    if isinstance(a, np.ndarray):
        if a.ndim == 0 or not a.size:
            raise KernelArgumentError(
                f"argument {name!r} is an array of shape {a.shape}; an HBM tensor needs at "
                f"least one axis and one element"
            )
        got = cache.get(id(a))
        if got is None:
            d = from_numpy(a, f"argument {name!r}")
            got = cache[id(a)] = (d, values_of(a, d))
        d, data = got
        return tr.input(name, a.shape, d, data, raw=a)
    if isinstance(a, HBMTensor):  # a trnlab.core kernel's argument (record_into)
        d = _FMT_TO_DTYPE.get(a.fmt)
        if d is None:
            raise KernelArgumentError(f"HBM tensor {a.name!r} of format {a.fmt} has no NKI dtype")
        return tr.input(a.name, a.shape, d, a.data, core=a)
    if type(a).__module__.startswith("torch"):
        raise option("nki.simulate", "torch tensors", "numpy arrays are (t.numpy())")
    return a


def _launch(kernel: Kernel, args, kwargs, params: CoreParams, numerics: bool, bind=()):
    """Trace every program of the launch; returns (traces, first program's return)."""
    _bind(kernel, args, kwargs)
    names = _names(kernel.fn, args, kwargs)
    fn = traced_function(kernel.fn, kernel.__name__)
    launch = Launch(gridded=kernel.grid is not None, bind=bind)
    programs = math.prod(kernel.grid or (1,))
    limit = instruction_limit(None, numerics, nki=True)
    if programs > limit:  # every program records at least one instruction
        raise InstructionLimitError(
            f"a launch grid {list(kernel.grid)} runs {programs:,} programs, each recording at "
            f"least one instruction: beyond the limit of {limit:,} (trnlab.core.max_instructions"
            f"(N) raises it). Launch a smaller grid with more work per program."
        )
    if kernel.placement is not None:
        grid, cores = kernel.grid, kernel.placement
    elif kernel.lnc == 2:
        grid = (2,)
        cores = [[(0,)], [(1,)]]
    else:
        grid = kernel.grid or (1,)
        cores = [list(itertools.product(*(range(g) for g in grid)))]
    traces = []
    result = None
    cache: dict = {}
    for programs in cores:
        tr = Trace(params, numerics, launch)
        tr.grid = grid
        # a tile matmul is at most 128 x 128 x 512: too small for BLAS threads to pay
        with tr, paused_gc(), one_blas_thread() if numerics else contextlib.nullcontext():
            wargs = [_wrap(tr, n, a, cache) for n, a in zip(names, args, strict=True)]
            wkw = {k: _wrap(tr, k, v, cache) for k, v in kwargs.items()}
            for pid in programs:
                tr.program_id = pid
                tr.shared_index = 0
                try:
                    ret = fn(*wargs, **wkw)
                except _KERNEL_ERRORS as exc:
                    raise _refused(kernel, exc, names, args, kwargs) from exc
                if not traces and pid == programs[0]:
                    result = ret
        traces.append(tr)
    if sum(len(p) for p in cores) > 1:
        _shared_results(kernel, result)
    elif _private_results(result):
        warnings.warn(
            f"kernel {kernel.__name__} returns {', '.join(_private_results(result))}, made "
            f"with buffer=nl.hbm: NKI 0.3 and later refuse that at compile time (outputs are "
            f"nl.shared_hbm); older editions, and trnlab for one program, accept it",
            stacklevel=3,
        )
    return traces, result


def _private_results(result) -> list[str]:
    """Names of the nl.hbm (private_hbm) tensors a kernel made and returns."""
    return [
        repr(t._s.name)
        for t in (result if isinstance(result, tuple | list) else (result,))
        if type(t) is NkiTensor and t._s.buffer is MemoryRegion.private_hbm and not t._s.input
    ]


def _shared_results(kernel: Kernel, result) -> None:
    """A launch of several programs returns tensors they share: a ``private_hbm`` (``nl.hbm``)
    tensor the kernel made exists once per program, so it cannot be the launch's result."""
    for t in result if isinstance(result, tuple | list) else (result,):
        if type(t) is NkiTensor and t._s.buffer is MemoryRegion.private_hbm and not t._s.input:
            raise KernelArgumentError(
                f"kernel {kernel.__name__} returns {t._s.name!r}, an nl.hbm (private_hbm) "
                f"tensor: each program of this launch has its own, so none is the result. "
                f"Make outputs nl.shared_hbm (kernel arguments read nl.hbm, as on hardware, but "
                f"every program shares them: buffer=nl.shared_hbm, not buffer=a.buffer)."
            )


#: Errors a kernel's own Python raises on arguments it cannot take (``N, D = x.shape`` of a 1-D
#: tensor, ``raise ValueError(...)`` of a shape rule, ``None.shape``).
_KERNEL_ERRORS = (ValueError, TypeError, IndexError, AttributeError, KeyError, ZeroDivisionError)
_OWN = ("trnlab.nki", "trnlab.core", "numpy")


def _brief(a) -> str:
    if isinstance(a, HBMArg):
        return f"hbm{a.shape} {a.dtype.name}"
    if isinstance(a, np.ndarray):
        return f"array{a.shape} {a.dtype}"
    text = repr(a)
    return text if len(text) <= 40 else text[:37] + "..."


def _refused(kernel: Kernel, exc: Exception, names, args, kwargs) -> Exception:
    """A kernel's own code raised on its arguments: a teaching error saying where (the
    kernel's line) and with which arguments. trnlab's own errors pass through, and so does an
    error raised inside trnlab.nki itself (a front-end bug must not pass as the kernel's)."""
    if isinstance(exc, TrnlabError):
        return exc
    tb, frame = exc.__traceback__, None
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
    if frame is None or frame.f_globals.get("__name__", "").startswith(_OWN[:2]):
        return exc
    user = frame
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of the kernel's (or its helpers') own code
        if not tb.tb_frame.f_globals.get("__name__", "").startswith(_OWN):
            user = tb.tb_frame
        tb = tb.tb_next
    where = location(user.f_code.co_name, user.f_code.co_filename, user.f_lineno)
    given = ", ".join(
        [f"{n}={_brief(a)}" for n, a in zip(names, args, strict=False)]
        + [f"{k}={_brief(v)}" for k, v in kwargs.items()]
    )
    return KernelArgumentError(
        f"kernel {kernel.__name__} stopped at {where}: {type(exc).__name__}: {exc}. Its "
        f"code could not take the arguments it was given ({given}); check their shapes, "
        f"dtypes and values against the kernel's docstring."
    )


def _numerics_of(args, kwargs) -> bool:
    vals = list(args) + list(kwargs.values())
    return not any(isinstance(a, HBMArg) and a.values is None for a in vals)


def _to_numpy(ret):
    if ret is None:
        return None
    if type(ret) is NkiTensor:
        return to_numpy(ret._arr(), ret._s.dtype)
    if isinstance(ret, tuple | list):
        return type(ret)(_to_numpy(r) for r in ret)
    if isinstance(ret, dict):
        return {k: _to_numpy(v) for k, v in ret.items()}
    return ret


def _returned_names(ret) -> tuple[str, ...]:
    """Names of the HBM tensors a kernel returned, in order (``run.outputs`` keys)."""
    if type(ret) is NkiTensor:
        return (ret._s.name,) if not ret._s.on_chip else ()
    if isinstance(ret, tuple | list):
        return tuple(n for r in ret for n in _returned_names(r))
    return ()


def _write_back(traces, arrays: dict) -> None:
    """Inputs the kernel stored to are updated in place, as nki.simulate does."""
    for tr in traces:
        for s in tr.hbm:
            a = arrays.get(s.name)
            if s.input and s.stored and a is not None and s.data is not None:
                if a.flags.writeable:
                    a[...] = to_numpy(s.data, s.dtype).astype(a.dtype)


def simulate(kernel, chip=None):
    """``nki.simulate(kernel)(*arrays)``: run the kernel's numerics and return its outputs as
    numpy arrays (NaN where it never wrote; inputs it stored to are updated in place).

    Hardware rules are checked as the kernel runs and when its tiles are placed in SBUF and
    PSUM. ``chip`` (trnlab's) picks the target; otherwise ``NEURON_PLATFORM_TARGET_OVERRIDE``,
    else trn3 (see :mod:`trnlab.nki._target`)."""
    k = _kernel(kernel)
    if chip is not None and not isinstance(chip, CoreParams):
        resolve(chip)  # an unknown chip is refused here, with the nearest names

    def run(*args, **kwargs):
        if not _numerics_of(args, kwargs):
            raise KernelArgumentError(
                "nki.simulate computes values: pass numpy arrays (nki.hbm(shape, dtype) "
                "placeholders are for timing-only nki.profile runs)"
            )
        params = resolve(chip, k.platform_target)
        names = _names(k.fn, args, kwargs)
        arrays = {n: a for n, a in zip(names, args, strict=True) if isinstance(a, np.ndarray)}
        arrays.update({n: a for n, a in kwargs.items() if isinstance(a, np.ndarray)})
        traces, result = _launch(k, args, kwargs, params, True)
        for tr in traces:
            replay(tr, KernelContext(params, numerics=False))
        _write_back(traces, arrays)
        return _to_numpy(result)

    return run


def _run_of(tr: Trace, params: CoreParams, numerics: bool, extra: dict) -> Run:
    ctx = KernelContext(params, numerics=False)
    pools = replay(tr, ctx)
    program = ctx.program()
    outputs = {}
    if numerics:
        for s in tr.hbm:
            if s.stored and s.data is not None:
                outputs[s.name] = to_numpy(s.data, s.dtype)
    run = _schedule(program, params, outputs, numerics)
    run.extra["nki"] = {
        "instructions": tuple(tr.apis),
        "lines": tuple((f, line) for f, line, _ in tr.where),
        "buffers": {p.label: p.n for p in pools},
        "repeats_dropped": tr.repeats,
        "program_ids": tr.grid,
        **extra,
    }
    return run


#: The options of NKI's own ``nki.profile`` (a decorator that profiles on a NeuronDevice and
#: writes the NEFF and NTFF files neuron-profile opens).
DEVICE_PROFILE_OPTIONS = (
    "working_directory", "save_neff_name", "save_trace_name", "additional_compile_opt",
    "overwrite", "profile_nth",
)  # fmt: skip


def profile(kernel=None, chip=None, numerics: bool | None = None, **device):
    """``nki.profile(kernel, chip="trn2")(*args)``: the kernel on one NeuronCore of ``chip``
    as a :class:`trnlab.core.Run` (timeline, latency, busy, occupancy, roofline).

    NKI's device form, ``@nki.profile(working_directory=..., save_neff_name=..., ...)`` on a
    kernel, runs here too: its options are accepted (:data:`DEVICE_PROFILE_OPTIONS`) but no
    NEFF or NTFF file is written (trnlab has no device and no compiler); calling the
    decorated kernel returns the model's ``Run``, whose timeline stands for the trace.

    Each argument is a numpy array or an :func:`hbm` placeholder; with any placeholder
    without values the run is timing only (no numerics). ``run.extra["nki"]`` names the NKI
    instruction and source line of every recorded instruction, the rotating buffers each
    tile got and (``"returns"``) the names of the HBM tensors the kernel returned. ``chip`` may be a :class:`trnlab.core.CoreParams` for "what if" figures, e.g.
    ``core.core_params("trn2", compiler_rotating_buffers=2)``."""
    unknown = sorted(set(device) - set(DEVICE_PROFILE_OPTIONS))
    if unknown:
        raise KernelArgumentError(
            f"nki.profile got {', '.join(unknown)}: trnlab's form is nki.profile(kernel, "
            f"chip=..., numerics=...)(*args), and NKI's device decorator takes "
            f"{', '.join(DEVICE_PROFILE_OPTIONS)}"
        )
    if kernel is None:
        if not device:
            raise KernelArgumentError(
                "nki.profile needs a kernel: nki.profile(kernel, chip='trn2')(*args), or as "
                "NKI's decorator, @nki.profile(working_directory=...) above the kernel"
            )
        return lambda fn: profile(fn, chip=chip, numerics=numerics)  # the decorator form
    k = _kernel(kernel)
    if numerics is not None:
        flag(numerics, "nki.profile(numerics=...)", KernelArgumentError)
    if chip is not None and not isinstance(chip, CoreParams):
        resolve(chip)  # an unknown chip is refused here, with the nearest names

    def run(*args, **kwargs) -> Run:
        params = resolve(chip, k.platform_target)
        num = _numerics_of(args, kwargs) if numerics is None else numerics
        if num and not _numerics_of(args, kwargs):
            raise KernelArgumentError("numerics=True needs values for every HBM argument")
        traces, result = _launch(k, args, kwargs, params, num)
        returns = _returned_names(result)
        runs = [
            _run_of(tr, params, num, {"core": i, "lnc": k.lnc, "returns": returns})
            for i, tr in enumerate(traces)
        ]
        if len(runs) == 1:
            return runs[0]
        slow = max(runs, key=lambda r: r.latency)
        slow.extra["cores"] = tuple(runs)
        return slow

    return run


def record_into(ctx: KernelContext, kernel, *args, outputs=(), buffers: int | None = None,
                **kwargs) -> Any:  # fmt: skip
    """Trace an NKI kernel onto an existing :class:`~trnlab.core.KernelContext` (the bridge
    that lets ``trnlab.core`` kernels and their callers use the NKI kernel library).

    ``args`` may be the context's HBM tensors (``core.HBMTensor``); the kernel's ``shared_hbm``
    outputs, in the order it creates them, are bound to ``outputs`` (HBM tensors of the
    context). Values are computed by the NKI front end and written into those tensors.
    ``buffers`` overrides the rotating buffers per tile declared in a loop (the compiler's
    count, ``compiler_rotating_buffers``) for this kernel's allocation only."""
    if not isinstance(ctx, KernelContext):
        raise KernelArgumentError(
            f"record_into traces onto a trnlab.core KernelContext (a core kernel's ctx), not "
            f"{short(ctx)}"
        )
    k = _kernel(kernel)
    params = ctx.params
    if buffers is not None:
        n = whole(buffers, "buffers (rotating buffers per tile)", 1, 64, KernelArgumentError)
        params = params.replace(compiler_rotating_buffers=n)
    traces, result = _launch(k, args, kwargs, params, ctx.numerics, bind=outputs)
    if len(traces) != 1:
        raise KernelArgumentError("record_into traces one NeuronCore: launch without LNC=2")
    replay(traces[0], ctx)
    return result
