"""The fuzz test's table: every public callable of trnlab, with its arguments (see _fuzz.py).

One entry per public function (``"trnlab.catalog.chip"``) and per method of a public class
worth probing (``"trnlab.catalog.Chip.peak_flops"``); public classes that are records built by
the library (results, specs) are listed in ``CLASSES`` with what covers them instead.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import strategies as st

from tests import _fuzz as F
from tests._fuzz import JUNK, NAN, Arg, Target
from trnlab import catalog, formats, units

#: Subpackages whose ``__all__`` the fuzz test covers.
SUBPACKAGES = [
    "trnlab.catalog",
    "trnlab.units",
    "trnlab.formats",
]

TARGETS: dict[str, Target] = {}
CLASSES: dict[str, str] = {}


def target(key: str, call, /, *, nan_ok: bool = False, examples: int | None = None, **args: Arg):
    TARGETS[key] = Target(key, call, args, nan_ok=nan_ok, examples=examples)


def never_bad(good: st.SearchStrategy) -> Arg:
    """An argument the target must accept whatever it holds (no hostile values for it)."""
    return Arg(good, None)


# --- names --------------------------------------------------------------------------------------

CHIPS = [c.key for c in catalog.chips()]
NEURON = [c.key for c in catalog.chips("neuron") if c.core is not None]
SYSTEMS = [s.key for s in catalog.systems()]
FORMATS = list(formats.formats())
DTYPES = list(catalog.DTYPES)

chip_arg = F.name(CHIPS, ("chip",))
system_arg = F.name(SYSTEMS, ("system",))
dtype_arg = F.name(DTYPES, ("data type", "dtype"))
fmt_arg = F.name(FORMATS, ("format",))


# --- trnlab.catalog -----------------------------------------------------------------------------

target("trnlab.catalog.chip", catalog.chip, name=chip_arg)
target(
    "trnlab.catalog.chips",
    catalog.chips,
    kind=Arg(
        st.sampled_from([None, "neuron", "gpu", "GPU", " Neuron "]),
        F.near_misses(["neuron", "gpu"]) | st.sampled_from([5, 1.5, [], object()]),
        ("kind",),
    ),
)
target(
    "trnlab.catalog.cluster",
    catalog.cluster,
    base=system_arg,
    count=F.choice([1, 2, 16, 100], [0, -1, -(2**40), 1.5, NAN, True, "4", None, 10**9, 2**70]),
)
target(
    "trnlab.catalog.core",
    catalog.core,
    name=F.name(["v2", "v3", "v4", "NeuronCore-v2", "NeuronCore-v4"], ("generation", "core")),
)
target("trnlab.catalog.cores", catalog.cores)
target("trnlab.catalog.dtype_name", catalog.dtype_name, dtype=dtype_arg)
FIGURE_PATHS = [
    "trn2.hbm_bandwidth",
    "trn2.peak.fp8",
    "trn3.peak_sparse.bf16",
    "v3.tensor_clock",
    "trn2.48xlarge.peak.fp8",
    "trn1.sbuf_bytes",
    "TRN2.HBM_BANDWIDTH",
]
target(
    "trnlab.catalog.figure",
    catalog.figure,
    path=Arg(
        st.sampled_from(FIGURE_PATHS),
        F.near_misses(FIGURE_PATHS)
        | st.sampled_from((*JUNK, "trn2.", ".hbm", "trn2.peak.", "trn2.peak.nope", "v9.x")),
        ("figure", "path"),
    ),
)
target(
    "trnlab.catalog.measurements",
    catalog.measurements,
    name=F.name(["neuroncore"], ("measurements",)),
)
target("trnlab.catalog.sources", catalog.sources)
target(
    "trnlab.catalog.stated_tolerance",
    catalog.stated_tolerance,
    stated=F.choice(
        ["20.8 PFLOPS", "~185 TB/s", "1,536 GB", "0.5 TB", "96 GiB"],
        ["", "abc", "0 PFLOPS", "~0", "0.000", "-3 TB", None, 5, 2.5, NAN, [], "nan"],
        ("stated", "figure"),
    ),
)
target("trnlab.catalog.system", catalog.system, name=system_arg)
target("trnlab.catalog.systems", catalog.systems)
target("trnlab.catalog.table", catalog.table, name=F.name(["collectives"], ("figure group",)))

peak_patterns = F.choice(
    [None, "4:16", "2:4", "4:8"], ["4:0", "0:4", "x", "4:16:2", 5, 1.5, "", "4/16"]
)
target(
    "trnlab.catalog.Chip.peak_flops",
    lambda chip, dtype, sparse, pattern: catalog.chip(chip).peak_flops(
        dtype, sparse=sparse, pattern=pattern
    ),
    chip=never_bad(st.sampled_from(CHIPS)),
    dtype=dtype_arg,
    sparse=F.flag(("sparse",)),
    pattern=peak_patterns,
)
target(
    "trnlab.catalog.Chip.peak_figure",
    lambda chip, dtype, sparse: catalog.chip(chip).peak_figure(dtype, sparse=sparse),
    chip=never_bad(st.sampled_from(CHIPS)),
    dtype=dtype_arg,
    sparse=F.flag(("sparse",)),
)
target(
    "trnlab.catalog.Chip.figure",
    lambda chip, name: catalog.chip(chip).figure(name),
    chip=never_bad(st.sampled_from(CHIPS)),
    name=F.name(
        ["hbm_bandwidth", "hbm_bytes", "peak.fp8", "peak_sparse.bf16", "sbuf_bytes"], ("figure",)
    ),
)
target(
    "trnlab.catalog.Chip.sparse_speedup",
    lambda chip, pattern: catalog.chip(chip).sparse_speedup(pattern),
    chip=never_bad(st.sampled_from(CHIPS)),
    pattern=F.choice(
        ["4:16", "2:4", "4:8", "1:2"],
        ["4:0", "0:4", "x", 5, None, "", "16:4"],
        ("pattern", "sparsity"),
    ),
)
target(
    "trnlab.catalog.NeuronCoreSpec.peak_flops",
    lambda core, dtype: catalog.core(core).peak_flops(dtype),
    core=never_bad(st.sampled_from(["v2", "v3", "v4"])),
    dtype=dtype_arg,
)
target(
    "trnlab.catalog.NeuronCoreSpec.figure",
    lambda core, name: catalog.core(core).figure(name),
    core=never_bad(st.sampled_from(["v2", "v3", "v4"])),
    name=F.name(["tensor_clock", "tensor_rate.fp8", "pe_rows", "dma_bandwidth"], ("figure",)),
)
target(
    "trnlab.catalog.System.peak_flops",
    lambda system, dtype, sparse: catalog.system(system).peak_flops(dtype, sparse=sparse),
    system=never_bad(st.sampled_from(SYSTEMS)),
    dtype=dtype_arg,
    sparse=F.flag(("sparse",)),
)
target(
    "trnlab.catalog.System.figure",
    lambda system, name: catalog.system(system).figure(name),
    system=never_bad(st.sampled_from(SYSTEMS)),
    name=F.name(["hbm_bytes", "peak.fp8", "chips", "hbm_bandwidth"], ("figure",)),
)
target(
    "trnlab.catalog.System.compare",
    lambda system: catalog.system(system).compare(),
    system=never_bad(st.sampled_from(SYSTEMS)),
)
CLASSES.update(
    {
        "trnlab.catalog.Alternative": "record of a Figure (built by the loader)",
        "trnlab.catalog.Comparison": "record returned by System.compare (fuzzed)",
        "trnlab.catalog.Figure": "record built by the loader; read through catalog.figure (fuzzed)",
        "trnlab.catalog.Source": "record built by the loader",
    }
)

# --- trnlab.units -------------------------------------------------------------------------------

sig_arg = F.whole(1, 12, ("sig", "significant digits"))
target(
    "trnlab.units.si",
    units.si,
    value=never_bad(st.floats() | st.integers() | st.none() | st.just("NeuronLink")),
    unit=Arg(
        st.sampled_from(["", "B", "B/s", "FLOP/s", "W"]),
        st.sampled_from([None, 5, b"B"]),
        ("unit",),
    ),
    sig=sig_arg,
    binary_bytes=F.flag(("binary_bytes",)),
)
target(
    "trnlab.units.binary",
    units.binary,
    nbytes=Arg(
        st.floats(0, 1e20) | st.integers(0, 2**70),
        st.sampled_from([None, "96 GiB", [], object(), 1j]),
        ("nbytes", "byte count"),
    ),
    sig=sig_arg,
)

# --- trnlab.formats -----------------------------------------------------------------------------


def _arrays():
    shapes = st.sampled_from([(0,), (7,), (3, 32), (2, 40), (4, 0), ()])
    fills = st.sampled_from(["normal", "big", "tiny", "specials"])

    def make(shape, fill):
        rng = np.random.default_rng(len(shape) * 31 + sum(shape))
        x = rng.standard_normal(shape)
        if fill == "big":
            x = x * 1e6
        elif fill == "tiny":
            x = x * 1e-30
        elif fill == "specials" and x.size:
            x.flat[0] = np.inf
        return x.astype(np.float32) if x.ndim else np.float32(x)

    return st.builds(make, shapes, fills) | st.sampled_from([[1.0, -2.5], 0.1, [[0.5]]])


values_bad = st.sampled_from(
    [
        None,
        "abc",
        object(),
        np.arange(4),
        np.ones(3, bool),
        np.ones(2, complex),
        ["a", "b"],
        [None, 1.0],
        {"a": 1},
        np.array(["1.5", "2"]),
        b"xy",
    ]
)
values_arg = Arg(_arrays(), values_bad, ("values", "input", "array", "x"))
seed_arg = Arg(
    st.none() | st.integers(0, 2**40),
    st.sampled_from([-1, 1.5, "abc", NAN, True, [], object()]),
    ("seed",),
)
axis_arg = Arg(
    st.sampled_from([-1, 0, 1]), st.sampled_from([1.5, "0", None, NAN, True, []]), ("axis",)
)
rounding_arg = F.name(["nearest", "stochastic"], ("rounding",))
scale_rule_arg = F.name(["ocp", "trainium3"], ("scale_rule",))
scale_arg = Arg(
    st.none() | st.floats(1e-6, 10.0),
    st.sampled_from([0, -1.0, NAN, np.inf, True, "x", [], 0.0]),
    ("scale",),
)
quantize_args = dict(
    x=values_arg,
    fmt=fmt_arg,
    rounding=rounding_arg,
    seed=seed_arg,
    axis=axis_arg,
    saturate=F.flag(("saturate",)),
    scale_rule=scale_rule_arg,
    scale=scale_arg,
)
target("trnlab.formats.quantize", formats.quantize, nan_ok=True, **quantize_args)
target("trnlab.formats.encode", formats.encode, nan_ok=True, **quantize_args)


@cache
def _encoded():
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    return [formats.encode(x, f) for f in ("bf16", "mxfp4", "int8", "fp8_e5m2", "tf32")]


target(
    "trnlab.formats.decode(Encoded)",
    lambda data, fmt: formats.decode(data, fmt),
    nan_ok=True,
    data=Arg(
        st.integers(0, 4).map(lambda i: _encoded()[i]),
        st.sampled_from([None, "abc", np.ones(3, np.float32), np.array([300], np.int64), object()]),
        ("codes", "data"),
    ),
    fmt=Arg(st.none(), F.near_misses(FORMATS) | st.sampled_from([5, "fp32"]), ("format", "codes")),
)
target(
    "trnlab.formats.decode",
    formats.decode,
    nan_ok=True,
    data=Arg(
        st.sampled_from(
            [np.arange(16, dtype=np.uint8), np.zeros((2, 32), np.uint8), np.array([1, 2])]
        ),
        st.sampled_from(
            [None, "abc", np.ones(3, np.float32), np.array([-5, 70000]), [1.5], object()]
        ),
        ("codes", "data"),
    ),
    fmt=fmt_arg,
    scales=Arg(
        st.none() | st.just(np.full((2, 1), 127, np.uint8)),
        st.sampled_from([np.zeros((7, 7), np.uint8), "s", np.ones(1, np.float32), 5]),
        ("scales",),
    ),
    axis=axis_arg,
    scale=scale_arg,
)
target("trnlab.formats.catalog_dtype", formats.catalog_dtype, fmt=fmt_arg)
target("trnlab.formats.decode_table", formats.decode_table, nan_ok=True, fmt=fmt_arg)
target("trnlab.formats.facts", formats.facts, fmt=fmt_arg)
target(
    "trnlab.formats.formats",
    formats.formats,
    kind=Arg(
        st.sampled_from([None, "float", "int", "mx", "MX"]),
        F.near_misses(["float", "int", "mx"]),
        ("kind",),
    ),
)
target("trnlab.formats.grid", formats.grid, fmt=fmt_arg)
matrix_arg = F.matrix(1, 40, ("a", "b", "matrix", "shape"))
target(
    "trnlab.formats.matmul",
    formats.matmul,
    a=matrix_arg,
    b=Arg(
        st.integers(1, 40).map(lambda n: np.ones((n, 5), np.float32)),
        F.matrix().bad,
        ("b", "matrix", "shape"),
    ),
    fmt=fmt_arg,
    fmt_b=Arg(st.none() | F.name_variants(FORMATS), F.near_misses(FORMATS), ("format", "fmt_b")),
    rounding=rounding_arg,
    seed=Arg(st.none() | st.integers(0, 2**40), seed_arg.bad, ("seed",)),
    saturate=F.flag(("saturate",)),
    scale_rule=scale_rule_arg,
)
target(
    "trnlab.formats.prune",
    formats.prune,
    w=Arg(
        st.sampled_from([np.ones((4, 16), np.float32), np.arange(8.0), [[0.1, -3.0, 0.5, 2.0]]]),
        values_bad,
        ("weights", "w"),
    ),
    n=F.choice([4, 2, 1], [0, -4, 3, 1.5, NAN, None, "4", True]),
    m=F.choice([16, 8, 4], [0, -16, 5, 2.0, NAN, None, "8"]),
    axis=axis_arg,
)
target(
    "trnlab.formats.sample",
    formats.sample,
    distribution=F.name(list(formats.DISTRIBUTIONS), ("distribution",)),
    shape=F.shape2(1, 64),
    seed=Arg(st.integers(0, 2**31), st.sampled_from([-1, 1.5, "a", None, NAN, True]), ("seed",)),
)
target("trnlab.formats.spec", formats.spec, fmt=fmt_arg)
target(
    "trnlab.formats.throughput",
    formats.throughput,
    fmt=fmt_arg,
    chip=chip_arg,
    sparse=F.flag(("sparse",)),
    pattern=peak_patterns,
)
CLASSES.update(
    {
        "trnlab.formats.Encoded": "record returned by encode (fuzzed through decode(Encoded))",
        "trnlab.formats.FloatFormat": "format record from formats.spec (fuzzed)",
        "trnlab.formats.IntFormat": "format record from formats.spec (fuzzed)",
        "trnlab.formats.MXFormat": "format record from formats.spec (fuzzed)",
        "trnlab.formats.MatmulResult": "record returned by formats.matmul (fuzzed)",
        "trnlab.formats.PruneResult": "record returned by formats.prune (fuzzed)",
    }
)
