"""``nl.NKIObject``: the base class of the user classes an NKI kernel may take and build.

The NKI language guide: a class used in a kernel inherits from NKIObject and from no other
class; with or without ``@dataclass`` it behaves as a data class, and where the class writes
no ``__init__`` / ``__post_init__`` the compiler makes them: ``__init__`` takes each annotated
field in order (default: the class attribute, else None), sets it and calls ``__post_init__``.
A Python instance passed to a kernel is rebuilt from its ``__dict__``; trnlab runs the kernel
in Python, so the instance itself arrives, with the same dictionary.
"""

from __future__ import annotations

import inspect
from typing import Any

from trnlab.core import KernelArgumentError

__all__ = ["NKIObject"]


def _fields(cls) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in inspect.get_annotations(klass):
            if name not in names:
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
        if "__init__" not in cls.__dict__:
            cls.__init__ = _default_init(cls)
        if not hasattr(cls, "__post_init__"):
            cls.__post_init__ = lambda self: None

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _default_init(cls):
    fields = _fields(cls)

    def __init__(self, *args, **kwargs):
        if len(args) > len(fields):
            raise KernelArgumentError(
                f"{cls.__name__}() takes at most {len(fields)} positional arguments "
                f"({', '.join(fields)}); got {len(args)}"
            )
        unknown = sorted(set(kwargs) - set(fields))
        if unknown:
            raise KernelArgumentError(
                f"{cls.__name__}() has no field {unknown}; its fields are {fields}"
            )
        values = dict(zip(fields, args, strict=False))
        for name in fields:
            if name in values and name in kwargs:
                raise KernelArgumentError(f"{cls.__name__}() got {name!r} twice")
            value = values.get(name, kwargs.get(name, getattr(cls, name, None)))
            setattr(self, name, value)
        self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__
