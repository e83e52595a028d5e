"""Errors of trnlab.nki: the hardware rules raise trnlab.core's teaching errors (so a lab that
catches ``core.HardwareRuleError`` catches an NKI kernel's too); an NKI API trnlab does not
model yet raises :class:`NotModelledError`, naming the API and listing what is modelled."""

from __future__ import annotations

import difflib

from trnlab._errors import TrnlabError

__all__ = ["NotModelledError", "missing"]


class NotModelledError(TrnlabError, NotImplementedError):
    """An NKI API (or an option of one) that trnlab.nki does not model yet (a trnlab error,
    and a ``NotImplementedError`` as before)."""


def missing(namespace: str, name: str, modelled, known) -> AttributeError:
    """The error for ``namespace.name`` that the module does not define.

    ``known`` are the NKI API's names in that namespace (from the NKI API reference): one of
    them gives :class:`NotModelledError`; anything else is not NKI at all (AttributeError with
    the nearest names).
    """
    have = ", ".join(sorted(modelled))
    if name in known:
        return NotModelledError(
            f"{namespace}.{name} is not modelled yet in trnlab.nki (it exists in NKI). "
            f"See docs/nki.md for what each API covers. Modelled in {namespace} "
            f"({len(modelled)} names): {have}."
        )
    near = difflib.get_close_matches(name, list(modelled) + list(known), n=3)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    return AttributeError(f"{namespace} has no attribute {name!r}.{hint} Modelled: {have}.")


def option(api: str, what: str, modelled: str) -> NotModelledError:
    """The error for an option of a modelled API that trnlab does not model."""
    return NotModelledError(f"{api}: {what} is not modelled yet in trnlab.nki; {modelled}.")
