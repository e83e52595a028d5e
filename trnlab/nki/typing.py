"""``nki.typing``: the names NKI kernels use in annotations (``x: tensor[128, 512] = ...``).

Annotations of local variables are never evaluated, so a kernel needs only the import to
succeed; ``tensor[...]`` also works where an annotation is evaluated (a module-level or
argument annotation), naming :class:`trnlab.nki.NkiTensor` whatever the shape written.

``tensor[[250, 512], nl.float32]`` (a shape list and a dtype) is also how NKI's profiling
examples pass an input without values to a profiled kernel; here it is the same timing-only
placeholder as ``nki.hbm((250, 512), nl.float32)``.
"""

from __future__ import annotations

from ._tensor import NkiTensor

__all__ = ["tensor"]


class _TensorType:
    """``tensor`` and ``tensor[shape...]`` in annotations: both stand for an NKI tensor."""

    def __getitem__(self, spec):
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], list):
            from ._kernel import hbm  # a shape list and a dtype: an argument without values

            return hbm(list(spec[0]), spec[1])
        return NkiTensor

    def __repr__(self) -> str:
        return "nki.typing.tensor"


tensor = _TensorType()
