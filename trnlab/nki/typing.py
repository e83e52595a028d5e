"""``nki.typing``: the names NKI kernels use in annotations (``x: tensor[128, 512] = ...``).

Annotations of local variables are never evaluated, so a kernel needs only the import to
succeed; ``tensor[...]`` also works where an annotation is evaluated (a module-level or
argument annotation), naming :class:`trnlab.nki.NkiTensor` whatever the shape written.
"""

from __future__ import annotations

from ._tensor import NkiTensor

__all__ = ["tensor"]


class _TensorType:
    """``tensor`` and ``tensor[shape...]`` in annotations: both stand for an NKI tensor."""

    def __getitem__(self, shape) -> type:
        return NkiTensor

    def __repr__(self) -> str:
        return "nki.typing.tensor"


tensor = _TensorType()
