"""Quantise-dequantise throughput of trnlab.formats beside ml_dtypes casts of the same array.

For 16M float32 standard-normal values: ``quantize(x, fmt)`` (one pass, float32 out) against
``x.astype(T).astype(np.float32)`` with the matching ml_dtypes type, timed in the same process.
MX formats have no ml_dtypes cast; they are reported against the ml_dtypes round trip of their
element type (``float8_e4m3fn`` for mxfp8_e4m3, ``float4_e2m1fn`` for mxfp4), which does less
work (no block scales). Each figure is the best of ``repeats`` runs after a warm-up call that
compiles the kernels. Targets (issue 3): bf16 and fp8_e4m3fn ratio >= 1; MX >= 0.5.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks import best_of

N = 1 << 24  # 16M values


def run(n: int = N, repeats: int = 5) -> dict:
    import ml_dtypes

    from trnlab.formats import quantize

    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32).reshape(-1, 4096)
    cases = {
        "bf16": ml_dtypes.bfloat16,
        "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "mxfp8_e4m3": ml_dtypes.float8_e4m3fn,
        "mxfp4": ml_dtypes.float4_e2m1fn,
    }
    figures: dict = {"n": n, "threads": _threads(), "cpu_count": os.cpu_count()}
    for fmt, mltype in cases.items():
        quantize(x[:2], fmt)  # warm-up: compile or load the cached kernel

        def ours(fmt=fmt):
            return quantize(x, fmt)

        def ml(mltype=mltype):
            return x.astype(mltype).astype(np.float32)

        t_ours, _ = best_of(ours, repeats)
        t_ml, _ = best_of(ml, repeats)
        figures[fmt] = {
            "trnlab_elements_per_s": round(n / t_ours),
            "ml_dtypes_elements_per_s": round(n / t_ml),
            "ml_dtypes_reference": mltype.__name__,
            "trnlab_s": round(t_ours, 5),
            "ml_dtypes_s": round(t_ml, 5),
            "ratio": round(t_ml / t_ours, 3),
        }
    return figures


def _threads() -> int:
    import numba

    return numba.get_num_threads()


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
