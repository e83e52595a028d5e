"""Which NeuronCore a kernel is traced for: NKI's target names and how they are chosen.

NKI compiles for the target in ``NEURON_PLATFORM_TARGET_OVERRIDE`` (``trn1|inf2|gen2``,
``trn2|gen3``, ``trn3|gen4``); with none set, ``nki.simulate`` uses the chip it runs on, or
``trn3``. trnlab has no chip to detect, so it takes, in order: the ``chip=`` of the call
(:func:`trnlab.nki.profile`, :func:`trnlab.nki.simulate`), the ``platform_target=`` of
``nki.jit`` (older NKI editions), the environment variable, then ``trn3``.
"""

from __future__ import annotations

import os

from trnlab.core import CoreParams, KernelArgumentError, core_params

__all__ = ["DEFAULT_TARGET", "ENV", "generation", "resolve"]

ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
DEFAULT_TARGET = "trn3"
#: NKI's target names -> trnlab chips.
TARGETS = {
    "trn1": "trn1",
    "inf2": "inf2",
    "gen2": "trn1",
    "trn2": "trn2",
    "gen3": "trn2",
    "trn3": "trn3",
    "gen4": "trn3",
}


def _chip(name: str, where: str) -> str:
    key = str(name).strip().lower()
    if key not in TARGETS:
        raise KernelArgumentError(
            f"{where} is {name!r}; NKI's targets are trn1|inf2|gen2 (NeuronCore-v2), "
            f"trn2|gen3 (NeuronCore-v3) and trn3|gen4 (NeuronCore-v4)"
        )
    return TARGETS[key]


def resolve(chip=None, platform_target: str | None = None) -> CoreParams:
    """The core parameters of the target (see the module docstring for the order)."""
    if isinstance(chip, CoreParams):
        return chip
    if chip is not None:
        return core_params(chip)
    if platform_target is not None:
        return core_params(_chip(platform_target, "nki.jit(platform_target=...)"))
    env = os.environ.get(ENV)
    if env:
        return core_params(_chip(env, ENV))
    return core_params(DEFAULT_TARGET)


def generation(params: CoreParams) -> int:
    """2, 3 or 4: the NeuronCore generation (``nisa.nc_version``)."""
    return int(params.core.lstrip("v"))
