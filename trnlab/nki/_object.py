"""``nl.NKIObject``: the base class of the user classes an NKI kernel may take and build.

The NKI language guide: a class used in a kernel inherits from NKIObject and from no other
class; with or without ``@dataclass`` it behaves as a data class, and where the class writes
no ``__init__`` / ``__post_init__`` the compiler makes them: ``__init__`` takes each annotated
field in order (default: the class attribute, else None), sets it and calls ``__post_init__``.
A Python instance passed to a kernel is rebuilt from its ``__dict__``; trnlab runs the kernel
in Python, so the instance itself arrives, with the same dictionary.

The made ``__init__`` is NKIObject's own, so ``@dataclass`` (which writes one only where the
class has none of its own) still makes its own, ``field(default_factory=...)`` and all.
"""

from __future__ import annotations

import inspect
from typing import Any

from trnlab.core import KernelArgumentError

__all__ = ["NKIObject"]


def _fields(cls) -> list[str]:
    """The annotated instance fields of ``cls`` and its NKI bases, in order (not ClassVars)."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, ann in inspect.get_annotations(klass).items():
            text = ann if isinstance(ann, str) else repr(ann)
            if text.startswith(("ClassVar", "typing.ClassVar")) or name in names:
                continue
            names.append(name)
    return names


class NKIObject:
    """Base class for the data classes and configuration objects of NKI kernels."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        others = [b.__name__ for b in cls.__bases__ if not issubclass(b, NKIObject)]
        if others:
            raise KernelArgumentError(
                f"class {cls.__name__} inherits from {', '.join(others)}: an NKI class inherits "
                f"from NKIObject (or another NKI class) and nothing else (NKI language guide)"
            )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The initializer NKI makes for a class that writes none: each annotated field in
        order, from the arguments, else the class attribute, else None; then __post_init__."""
        cls = type(self)
        fields = _fields(cls)
        name = cls.__name__
        if len(args) > len(fields):
            raise KernelArgumentError(
                f"{name}() takes at most {len(fields)} positional arguments "
                f"({', '.join(fields)}); got {len(args)}"
            )
        unknown = sorted(set(kwargs) - set(fields))
        if unknown:
            raise KernelArgumentError(f"{name}() has no field {unknown}; its fields are {fields}")
        given = dict(zip(fields, args, strict=False))
        twice = sorted(set(given) & set(kwargs))
        if twice:
            raise KernelArgumentError(f"{name}() got {twice} both by position and by name")
        for field in fields:
            setattr(self, field, given.get(field, kwargs.get(field, getattr(cls, field, None))))
        self.__post_init__()

    def __post_init__(self) -> None:
        """Nothing, unless the class writes its own (as NKI's default)."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"
