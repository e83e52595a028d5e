"""The dashboards' own error: a setting a model refuses (the view shows it as a message)."""

from __future__ import annotations

from trnlab._errors import TrnlabError

__all__ = ["SettingError"]


class SettingError(TrnlabError):
    """A dashboard setting out of range, unknown or inconsistent; the model is left as it was
    and the message says what the setting accepts."""
