"""``nki.compiler``: compiler directives and manual allocation, not modelled yet.

A kernel may import it (``import trnlab.nki.compiler as ncc``); every name in it raises a
:class:`~trnlab.nki.NotModelledError` that says what to do, so the error points at the
directive the kernel uses rather than failing the import.
"""

from __future__ import annotations

from ._errors import NotModelledError

#: The directives and allocators of NKI's compiler module (SDK 2.20-2.26 API reference).
KNOWN = (
    "allocation_scope",
    "enable_stack_allocator",
    "force_auto_alloc",
    "multi_buffer",
    "no_reorder",
    "psum",
    "sbuf",
    "skip_middle_end_transformations",
)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    what = "one of its directives" if name in KNOWN else "a name NKI's compiler module lacks"
    raise NotModelledError(
        f"nki.compiler.{name} ({what}) is not modelled yet in trnlab.nki. Compiler directives "
        f"and manual allocation ({', '.join(KNOWN)}) change how the compiler schedules a kernel "
        f"or places its buffers; trnlab models the compiler's default choices (docs/nki.md, "
        f"'Rotating buffers'). Remove the directive, and declare tiles with nl.ndarray, to run "
        f"the kernel here."
    )
