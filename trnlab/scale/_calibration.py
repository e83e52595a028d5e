"""Fit the decode step cost per layer on one published decode run per chip generation.

The fitted figure is ``decode_layer_overhead`` (seconds per layer per forward step: kernel
boundaries and synchronisation that neither the weight streaming, the decode-attention kernel
nor the collectives account for; whatever else the model leaves out of a step falls in it too,
such as a GPU's GEMV kernels streaming weights below the HBM roofline the model assumes).
It is the measured time per output token less the model's time without it, divided by the
layers, on the one case per generation marked ``"calibration"`` in
:data:`trnlab.scale._published.DECODE_CASES`; every other decode case validates it.
"""

from __future__ import annotations

from trnlab import catalog

from ._inference import inference
from ._published import DECODE_CASES, DecodeCase
from ._workloads import model

__all__ = ["calibrate_decode_overhead", "predict_decode"]


def predict_decode(case: DecodeCase, layer_overhead: float | None = None):
    """The model's serving result for one published decode case."""
    return inference(
        case.model,
        case.system,
        tp=case.tp,
        batch=case.batch,
        prompt=case.prompt,
        output=case.output,
        weight_format=case.weight_format,
        layer_overhead=layer_overhead,
        compiled_length=case.compiled,
        kv_sharding=case.kv_sharding,
    )


def calibrate_decode_overhead(chip_key: str) -> float:
    """Seconds per layer per step that make the generation's calibration case come out right."""
    chip = catalog.chip(chip_key).key
    cases = [
        c for c in DECODE_CASES
        if c.role == "calibration" and catalog.system(c.system).chip.key == chip
    ]  # fmt: skip
    if not cases:
        raise ValueError(f"no published decode case calibrates {chip}")
    case = cases[0]
    bare = predict_decode(case, layer_overhead=0.0).tpot
    return (case.tpot_ms * 1e-3 - bare) / model(case.model).layers
