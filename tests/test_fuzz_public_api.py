"""Hostile input to every public function and dashboard model: a teaching error or a valid
result, never a raw error, a NaN, a negative time or cost, or a hang (issue 15, items 4-5).

The table below (``TARGETS``) lists every public callable with its arguments (``tests/_fuzz.py``
explains the machinery and the verdict). A name exported in a subpackage's ``__all__`` without a
line here fails :func:`test_every_public_name_has_a_fuzz_spec`: add a fuzz spec for it.

Budget: ``FUZZ_EXAMPLES`` examples per target (``TRNLAB_FUZZ_EXAMPLES`` overrides it), drawn
as the suite's hypothesis profile says (``tests/conftest.py``: the same examples every run;
``TRNLAB_FUZZ_RANDOM=1`` draws fresh ones for a longer local hunt).
"""

from __future__ import annotations

import importlib
import inspect
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab
from tests import _fuzz as F
from tests._fuzz_specs import CLASSES, SUBPACKAGES, TARGETS

FUZZ_EXAMPLES = int(os.environ.get("TRNLAB_FUZZ_EXAMPLES", "12"))
_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # the watchdog in _fuzz.run_with_budget is the per-call limit
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


def _exported(module_name: str):
    mod = importlib.import_module(module_name)
    for name in mod.__all__:
        yield name, getattr(mod, name)


def test_every_public_name_has_a_fuzz_spec():
    """Each public function has a row in TARGETS; each public class is fuzzed through its
    constructor/methods (TARGETS) or is a record with a reason (CLASSES); errors share a base."""
    missing, stray_errors = [], []
    for module_name in SUBPACKAGES:
        for name, obj in _exported(module_name):
            full = f"{module_name}.{name}"
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                if not issubclass(obj, trnlab.TrnlabError):
                    stray_errors.append(full)
                continue
            if inspect.isclass(obj):
                if full not in CLASSES and not any(t.startswith(full) for t in TARGETS):
                    missing.append(full)
            elif callable(obj) and full not in TARGETS:
                missing.append(full)
    assert not missing, f"add a fuzz spec (tests/_fuzz_specs.py) for: {', '.join(missing)}"
    assert not stray_errors, f"errors not derived from trnlab.TrnlabError: {stray_errors}"


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_fuzz(key):
    target = TARGETS[key]
    n = target.examples or FUZZ_EXAMPLES

    @settings(_SETTINGS, max_examples=min(n, FUZZ_EXAMPLES) if target.examples else n)
    @given(data=st.data())
    def check(data):
        problem = F.probe(target, *F.draw_call(data, target))
        assert problem is None, problem

    with np.errstate(all="ignore"):
        check()
