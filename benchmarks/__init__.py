"""Speed figures for trnlab, printed as JSON (run ``python -m benchmarks``).

Each ``benchmarks/bench_*.py`` module defines ``run() -> dict`` returning named figures
(seconds, rates, ratios against a reference measured in the same process). Nothing here asserts
a time: the figures are reported, and targets are checked by reading them.
"""
