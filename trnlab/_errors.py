"""The root of trnlab's errors: every refusal of bad input is a :class:`TrnlabError`.

Each subpackage raises its own kind (``catalog.CatalogError``, ``core.KernelArgumentError``,
``formats.FormatError``, ``fabric.FabricError``, ``scale.WorkloadError``, the dashboards'
``SettingError``); all of them derive from :class:`TrnlabError`, which is a ``ValueError``,
so code written against ``ValueError`` keeps working and one ``except TrnlabError`` catches
every teaching error and nothing else (a raw ``IndexError`` from a bug still shows as a bug).

A message names what was wrong (the argument, its value), the rule or range, and what to do.
"""

from __future__ import annotations

__all__ = ["TrnlabError", "TrnlabTypeError"]


class TrnlabError(ValueError):
    """Bad input refused by trnlab, with a message that says what to do instead."""


class TrnlabTypeError(TrnlabError, TypeError):
    """An argument of the wrong kind (a string where a number belongs, None for a name...).

    Also a ``TypeError``, for code that catches that."""
