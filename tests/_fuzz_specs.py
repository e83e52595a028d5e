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

# --- trnlab.core --------------------------------------------------------------------------------

from trnlab import core, kernels  # noqa: E402

SUBPACKAGES += ["trnlab.core", "trnlab.kernels"]


class Op:
    """An operand written as an expression over a fresh context's tiles (``"a[0:32, :]"``),
    evaluated inside the call, so an index error counts as the call's refusal."""

    def __init__(self, expr: str):
        self.expr = expr

    def __repr__(self) -> str:
        return f"<{self.expr}>"


def _context(numerics: bool = True, chip: str = "trn2"):
    """A context with HBM tensors, loaded SBUF tiles, an empty output tile and a PSUM tile."""
    ctx = core.KernelContext(core.core_params(chip), numerics=numerics)
    data = np.linspace(-2, 2, 64 * 64, dtype=np.float32).reshape(64, 64)
    x = ctx.hbm("x", (64, 64), "bf16", data=data if numerics else None, written=True)
    y = ctx.hbm("y", (64, 64), "bf16")
    a, b = ctx.sbuf((64, 64), "bf16", "a"), ctx.sbuf((64, 64), "bf16", "b")
    ctx.load(a, x)
    ctx.load(b, x)
    col = ctx.sbuf((64, 1), "fp32", "col")
    ctx.memset(col, 0.5)
    gone = ctx.sbuf((8, 8), "bf16", "gone")
    ctx.free(gone)
    tiles = dict(
        ctx=ctx, x=x, y=y, a=a, b=b, col=col, gone=gone,
        o=ctx.sbuf((64, 64), "bf16", "o"),
        p=ctx.psum((64, 64), "p"),
        pool=ctx.sbuf((16, 16), "fp32", "pool", bufs=2),
    )  # fmt: skip
    return ctx, tiles


def _resolve(value, tiles):
    return eval(value.expr, {"np": np}, tiles) if isinstance(value, Op) else value


def ctx_target(key: str, method: str, *, numerics: bool = True, **args: Arg):
    """A KernelContext method called on a fresh context with (resolved) arguments."""

    def call(**kw):
        ctx, tiles = _context(numerics)
        return getattr(ctx, method)(**{k: _resolve(v, tiles) for k, v in kw.items()})

    TARGETS[key] = Target(key, call, args)


def ops(good: list[str], bad: list[str] = ()) -> Arg:
    junk = [None, 5, "a", np.ones((4, 4), np.float32), Op("pool"), Op("gone"), Op("x")]
    return Arg(
        st.sampled_from([Op(e) for e in good]),
        st.sampled_from([Op(e) for e in bad] + junk),
        ("tile", "operand", "view", "shape", "region", "index", "slice", "psum", "sbuf", "hbm"),
    )


VIEWS_BAD = ["a[0:200, :]", "a[5:2, :]", "a[:, 70]", "a[0:1.5, :]", "a[::2, :]", "a[-70:, :]",
             "a['x']", "a[0, 0, 0]", "a[0:0, :]", "a[:, 64:65]", "a[True, :]"]  # fmt: skip
queue_arg = Arg(
    st.sampled_from([None, 0, 1]), st.sampled_from([-1, 99, 1.5, "0", True, NAN]), ("queue",)
)
dge_arg = Arg(
    st.sampled_from([None, "none", "sw"]),
    st.sampled_from(["hardware", 1, True, "", "Nonee"]),
    ("dge",),
)
number_arg = Arg(
    st.floats(-4, 4, allow_nan=False),
    st.sampled_from([NAN, np.inf, None, "2", True, [], 1j]),
    ("value", "scale", "bias", "number", "initial"),
)
binary_op = F.name(["add", "subtract", "multiply", "maximum", "minimum"], ("op",))

ctx_target(
    "trnlab.core.KernelContext.sbuf",
    "sbuf",
    shape=F.shape2(1, 128, ("shape", "partitions", "free")),
    fmt=Arg(F.name_variants(["bf16", "fp32", "fp8_e4m3", "fp16"]), fmt_arg.bad, ("format",)),
    name=Arg(
        st.sampled_from([None, "t", "my tile"]), st.sampled_from([5, object(), b"t", []]), ("name",)
    ),
    bufs=Arg(
        st.sampled_from([None, 1, 2, 3]),
        st.sampled_from([0, -1, 65, 1.5, True, "2", NAN]),
        ("bufs",),
    ),
)
ctx_target(
    "trnlab.core.KernelContext.psum",
    "psum",
    shape=F.shape2(1, 128, ("shape", "partitions", "free")),
    name=Arg(st.sampled_from([None, "acc"]), st.sampled_from([5, object()]), ("name",)),
    bufs=Arg(
        st.sampled_from([None, 1, 2]), st.sampled_from([0, -1, 65, 1.5, True, "2"]), ("bufs",)
    ),
)
ctx_target(
    "trnlab.core.KernelContext.hbm",
    "hbm",
    name=Arg(st.sampled_from(["z", "out"]), st.sampled_from([None, 5, object()]), ("name",)),
    shape=F.shape2(1, 4096),
    fmt=Arg(F.name_variants(["bf16", "fp32"]), fmt_arg.bad, ("format",)),
    data=Arg(
        st.none(), st.sampled_from(["abc", object(), np.ones((3, 3), complex)]), ("data", "values")
    ),
    written=Arg(st.sampled_from([None, False]), st.sampled_from(["yes", 0, 1, NAN]), ("written",)),
)
ctx_target(
    "trnlab.core.KernelContext.load",
    "load",
    dst=ops(["o", "o[0:32, :]", "o[:, 0:16]", "a"], [*VIEWS_BAD, "p", "o[0:32, :]"]),
    src=ops(
        ["x", "x[0:64, 0:64]", "x[0:32, :]", "x[:, 0:16]"], ["x[0:100, :]", "x[3:1, :]", "a", "y"]
    ),
    queue=queue_arg,
    dge=dge_arg,
)
ctx_target(
    "trnlab.core.KernelContext.store",
    "store",
    dst=ops(["y", "y[0:32, :]"], ["y[0:100, :]", "a", "y[0:7, 0:3]"]),
    src=ops(["a", "a[0:32, :]"], [*VIEWS_BAD, "p", "o"]),
    queue=queue_arg,
    dge=dge_arg,
)
ctx_target(
    "trnlab.core.KernelContext.matmul",
    "matmul",
    out=ops(["p", "p[0:32, 0:64]"], ["o", "p[0:70, :]", "p[0:32, 0:16]"]),
    stationary=ops(["a", "a[:, 0:32]"], [*VIEWS_BAD, "p", "o"]),
    moving=ops(["b", "b[0:64, 0:32]"], ["b[0:32, :]", "o", "p"]),
    accumulate=F.flag(("accumulate",)),
)
ctx_target(
    "trnlab.core.KernelContext.transpose",
    "transpose",
    out=ops(["p", "p[0:32, 0:64]"], ["o", "p[0:7, 0:3]"]),
    src=ops(["a", "a[0:64, 0:32]"], [*VIEWS_BAD, "o", "p"]),
)
ctx_target(
    "trnlab.core.KernelContext.activation",
    "activation",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    src=ops(["a", "a[0:32, :]", "p"], [*VIEWS_BAD, "o[0:3, 0:3]"]),
    func=F.name(list(core.ACTIVATIONS), ("activation", "function", "func")),
    scale=Arg(st.floats(-4, 4, allow_nan=False) | st.just(Op("col")), number_arg.bad, ("scale",)),
    bias=Arg(
        st.none() | st.floats(-4, 4, allow_nan=False) | st.just(Op("col")),
        number_arg.bad,
        ("bias",),
    ),
)
ctx_target(
    "trnlab.core.KernelContext.tensor_tensor",
    "tensor_tensor",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    a=ops(["a", "a[0:32, :]"], [*VIEWS_BAD, "o"]),
    b=ops(["b", "b[0:32, :]", "col"], ["b[0:7, :]", "o"]),
    op=binary_op,
)
ctx_target(
    "trnlab.core.KernelContext.tensor_scalar",
    "tensor_scalar",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    src=ops(["a", "a[0:32, :]"], [*VIEWS_BAD, "o"]),
    op=binary_op,
    value=number_arg,
)
ctx_target(
    "trnlab.core.KernelContext.reduce",
    "reduce",
    out=ops(["col", "o[:, 0:1]"], ["o", "col[0:3, :]", "p"]),
    src=ops(["a", "a[:, 0:32]"], [*VIEWS_BAD, "o"]),
    op=F.name(["add", "maximum", "minimum"], ("reduction", "op")),
)
ctx_target(
    "trnlab.core.KernelContext.copy",
    "copy",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    src=ops(["a", "p", "a[0:32, :]"], [*VIEWS_BAD, "o"]),
    engine=F.name(["vector", "scalar", "gpsimd"], ("engine",)),
)
ctx_target(
    "trnlab.core.KernelContext.memset",
    "memset",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    value=number_arg,
    engine=F.name(["vector", "gpsimd"], ("engine",)),
)
ctx_target(
    "trnlab.core.KernelContext.gpsimd",
    "gpsimd",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    a=ops(["a", "a[0:32, :]"], [*VIEWS_BAD, "p", "o"]),
    b=Arg(
        st.sampled_from([None, Op("b")]),
        st.sampled_from([Op("b[0:7, :]"), Op("p"), 5, "b"]),
        ("b", "operand", "tile"),
    ),
    op=F.name(["add", "multiply", "relu", "exp", "maximum"], ("op",)),
)
ctx_target(
    "trnlab.core.KernelContext.tensor_tensor_scan",
    "tensor_tensor_scan",
    out=ops(["o", "o[0:32, :]"], [*VIEWS_BAD, "p"]),
    a=ops(["a", "a[0:32, :]"], [*VIEWS_BAD, "o"]),
    b=ops(["b", "b[0:32, :]"], ["b[0:7, :]", "o"]),
    initial=Arg(
        st.floats(-2, 2, allow_nan=False) | st.just(Op("col")), number_arg.bad, ("initial",)
    ),
    op0=binary_op,
    op1=binary_op,
)
ctx_target(
    "trnlab.core.KernelContext.free",
    "free",
    tiles=Arg(
        st.sampled_from([Op("[a]"), Op("[pool]"), Op("[a, b]")]),
        st.sampled_from([[None], [5], [Op("x")], ["a"]]),
        ("tiles", "pools"),
    ),
)
TARGETS["trnlab.core.KernelContext.free"] = Target(
    "trnlab.core.KernelContext.free",
    lambda tiles: (
        lambda c, t: c.free(
            *[_resolve(v, t) for v in (_resolve(tiles, t) if isinstance(tiles, Op) else tiles)]
        )
    )(*_context()),
    {"tiles": TARGETS["trnlab.core.KernelContext.free"].args["tiles"]},
)
ctx_target("trnlab.core.KernelContext.sbuf_available", "sbuf_available")
target(
    "trnlab.core.TilePool.next_and_index",
    lambda i: (lambda c, t: t["pool"][i])(*_context()),
    i=F.choice([0, 1, -1], [2, 5, -3, 1.5, "0", None, True]),
)
CLASSES.update(
    {
        "trnlab.core.HBMTensor": "made by ctx.hbm (fuzzed); indexed through the ctx targets' operands",
        "trnlab.core.HBMView": "made by indexing an HBM tensor (fuzzed through load/store operands)",
        "trnlab.core.Tile": "made by ctx.sbuf/psum (fuzzed); indexed through the operands",
        "trnlab.core.View": "made by indexing a tile (fuzzed through the operands, out-of-range views included)",
        "trnlab.core.HBM": "record made by core.hbm (fuzzed)",
        "trnlab.core.Costs": "record made by core.costs (fuzzed)",
        "trnlab.core.Program": "record made by recording (its methods fuzzed below)",
    }
)


def _k_copy(ctx, x, y):
    t = ctx.sbuf(x.shape, "bf16")
    ctx.load(t, x)
    ctx.activation(t, t, "relu", scale=2.0)
    ctx.store(y, t)


def _k_mm(ctx, a_t, b, c):
    kernels.tiled(ctx, a_t, b, c)


KERNELS = [_k_copy]
kernel_arg = Arg(
    st.sampled_from(KERNELS),
    st.sampled_from([None, 5, "kernel", lambda: None, lambda ctx: None, np.ones(2)]),
    ("kernel",),
)
neuron_arg = Arg(
    F.name_variants([*NEURON, "h100", "trn4"]),
    F.near_misses(NEURON) | st.sampled_from(JUNK[:4]),
    ("chip",),
)


def _hbm_args(numerics):
    data = np.linspace(-1, 1, 32 * 48, dtype=np.float32).reshape(32, 48)
    x = core.hbm(data) if numerics else core.hbm((32, 48), "bf16", is_input=True)
    return {"x": x, "y": core.hbm((32, 48), "bf16")}


for _fn in ("run", "record"):
    target(
        f"trnlab.core.{_fn}",
        lambda kernel, chip, numerics, extra, _fn=_fn: getattr(core, _fn)(
            kernel, chip=chip, numerics=numerics, **{**_hbm_args(numerics is True), **extra}
        ),
        kernel=kernel_arg,
        chip=neuron_arg,
        numerics=F.flag(("numerics",)),
        extra=Arg(
            st.just({}),
            st.sampled_from([{"z": 1}, {"x": None}, {"y": np.ones(3)}, {"y": np.ones((0, 4))}]),
            ("argument", "kernel", "takes", "shape"),
        ),
    )
target(
    "trnlab.core.hbm",
    core.hbm,
    x=Arg(
        st.sampled_from([(4, 8), (128, 512), np.ones((3, 5)), [[1.0, 2.0]]]),
        st.sampled_from(
            F.SHAPES_BAD + F.ARRAYS_BAD[:5] + (None, "abc", object(), np.array([["a"]]))
        ),
        ("shape", "array", "tensor", "x"),
    ),
    fmt=Arg(F.name_variants(["bf16", "fp32", "fp8_e4m3"]), fmt_arg.bad, ("format",)),
    is_input=Arg(
        st.sampled_from([None, True, False]), st.sampled_from(["yes", 0, 1, NAN]), ("is_input",)
    ),
)
overrides_good = st.sampled_from(
    [{}, {"dma_bandwidth": 1e12}, {"psum_banks": 4}, {"dma_default_dge": "sw"}]
)
overrides_bad = st.sampled_from(
    [
        {"dma_bandwidth": -1},
        {"dma_bandwidth": NAN},
        {"psum_banks": 0},
        {"psum_banks": 2.5},
        {"warp_speed": 9},
        {"tensor_clock": "fast"},
        {"vector_gpsimd_share_sbuf": 1},
        {"dma_default_dge": "hardware"},
        {"dma_engines": 10**9},
        {"sbuf_partitions": 10**6},
    ]
)
target(
    "trnlab.core.core_params",
    lambda chip, overrides: core.core_params(chip, **overrides),
    chip=neuron_arg,
    overrides=Arg(overrides_good, overrides_bad, ("figure", "override")),
)
target(
    "trnlab.core.CoreParams.replace",
    lambda overrides: core.core_params("trn2").replace(**overrides),
    overrides=Arg(overrides_good, overrides_bad, ("figure", "override")),
)
target(
    "trnlab.core.CoreParams.peak_flops",
    lambda chip, dtype: core.core_params(chip).peak_flops(dtype),
    chip=never_bad(st.sampled_from(NEURON)),
    dtype=dtype_arg,
)
target(
    "trnlab.core.engine_name",
    core.engine_name,
    engine=F.choice([0, 1, 2, 3, 4, 9], [-1, -5, 1.5, None, "0", True, NAN], ("engine",)),
)
target("trnlab.core.format_bits", core.format_bits, fmt=fmt_arg)
target("trnlab.core.format_name", core.format_name, fmt=fmt_arg)


@cache
def _small_run(numerics: bool = False):
    args = _hbm_args(numerics)
    return core.run(_k_copy, chip="trn2", numerics=numerics, **args)


program_arg = Arg(
    st.just(None).map(lambda _: _small_run().program),
    st.sampled_from([None, 5, "program", np.zeros(3)]) | st.just(None).map(lambda _: _small_run()),
    ("program",),
)
params_arg = Arg(
    st.sampled_from(NEURON).map(core.core_params),
    st.sampled_from([None, "trn2", 5, {"dma_bandwidth": 1}]),
    ("params", "CoreParams", "core_params"),
)
target(
    "trnlab.core.simulate",
    core.simulate,
    program=program_arg,
    params=params_arg,
    outputs=Arg(st.sampled_from([None, {}]), st.sampled_from([5, "out", [1]]), ("outputs",)),
    numerics=F.flag(("numerics",)),
)
target(
    "trnlab.core.schedule",
    lambda program, params: core.schedule(program, params),
    program=program_arg,
    params=params_arg,
)
target(
    "trnlab.core.costs",
    core.costs,
    table=Arg(
        st.just(None).map(lambda _: _small_run().program.table),
        st.sampled_from([None, np.zeros(3), "table", [1, 2]]),
        ("table", "instruction"),
    ),
    params=params_arg,
    tile_bits=Arg(st.none(), st.sampled_from(["x", 5, np.array(["a"])]), ("tile_bits",)),
)
run_time = Arg(
    st.floats(0, 1e-3), st.sampled_from([NAN, -1.0, None, "0", np.inf, True]), ("t", "time")
)
target(
    "trnlab.core.Run.occupancy",
    lambda space: _small_run().occupancy(space),
    space=F.name(["sbuf", "psum"], ("space",)),
)
target("trnlab.core.Run.in_flight", lambda t: _small_run().in_flight(t), t=run_time)
target("trnlab.core.Run.counters_at", lambda t: _small_run().counters_at(t), t=run_time)
target(
    "trnlab.core.Run.report",
    lambda numerics: [
        getattr(_small_run(numerics), m)()
        for m in ("roofline", "summary", "describe", "counters", "timeline")
    ],
    numerics=never_bad(st.booleans()),
)
target(
    "trnlab.core.Program.describe",
    lambda i: _small_run().program.describe(i),
    i=F.choice([0, 1, 2], [-1, 10**6, 1.5, None, "0", True], ("instruction", "i")),
)
target(
    "trnlab.core.Program.deps",
    lambda i: _small_run().program.deps(i),
    i=F.choice([0, 1, 2], [-1, 10**6, 1.5, None, "0", True], ("instruction", "i")),
)

# --- trnlab.kernels -----------------------------------------------------------------------------


class Auto:
    """A good operand built inside the call from the drawn sizes (an array or a shape)."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind}>"

    def make(self, rows: int, cols: int):
        if self.kind == "shape":
            return (rows, cols)
        return np.linspace(-1, 1, rows * cols, dtype=np.float32).reshape(rows, cols)


def operand(value, rows, cols):
    return value.make(rows, cols) if isinstance(value, Auto) else value


auto_operand = st.sampled_from([Auto("array"), Auto("shape")])
operand_bad = st.sampled_from(
    F.SHAPES_BAD + F.ARRAYS_BAD + (None, "abc", (65536, 65536), (10**6, 10**6), (2**31, 8))
)
options_good = st.sampled_from([{}, {"bufs": 2}])
tile_options_good = st.sampled_from(
    [{}, {"tile_k": 64}, {"tile_m": 32, "tile_n": 128}, {"bufs": 1}]
)
options_bad = st.sampled_from(
    [
        {"tile_k": 0},
        {"tile_m": -1},
        {"tile_n": 1.5},
        {"bufs": 0},
        {"bufs": True},
        {"tiles_m": 0},
        {"tiles_k": -2},
        {"foo": 1},
        {"tile_k": None},
        {"a_width": 1},
        {"tile_n": 10**9},
        {"fmt": "nope"},
    ]
)
variant_arg = F.name(list(kernels.VARIANTS), ("variant",))
dtype_fmt_arg = Arg(
    F.name_variants(["bf16", "fp32", "fp8_e4m3", "mxfp8_e4m3"]), fmt_arg.bad, ("format", "dtype")
)
target(
    "trnlab.kernels.matmul",
    lambda m, k, n, a, b, variant, chip, dtype, numerics, out_dtype, options: kernels.matmul(
        operand(a, m, k),
        operand(b, k, n),
        variant=variant,
        chip=chip,
        dtype=dtype,
        numerics=numerics,
        out_dtype=out_dtype,
        **options,
    ),
    m=never_bad(st.integers(1, 300)),
    k=never_bad(st.integers(1, 300)),
    n=never_bad(st.integers(1, 600)),
    a=Arg(auto_operand, operand_bad, ("a", "A", "shape", "matrix", "instructions")),
    b=Arg(auto_operand, operand_bad, ("b", "B", "shape", "matrix", "instructions")),
    variant=variant_arg,
    chip=neuron_arg,
    dtype=dtype_fmt_arg,
    numerics=F.flag(("numerics",)),
    out_dtype=Arg(st.sampled_from([None, "bf16", "fp32"]), fmt_arg.bad, ("format", "out_dtype")),
    options=Arg(
        options_good, options_bad, ("tile", "bufs", "option", "tiles", "a_width", "foo", "format")
    ),
)
target(
    "trnlab.kernels.matmul_bias_act",
    lambda m, k, n, a, b, bias, activation, chip, dtype, numerics: kernels.matmul_bias_act(
        operand(a, m, k),
        operand(b, k, n),
        operand(bias, 1, n)[0] if isinstance(bias, Auto) else bias,
        activation=activation,
        chip=chip,
        dtype=dtype,
        numerics=numerics,
    ),
    m=never_bad(st.integers(1, 200)),
    k=never_bad(st.integers(1, 200)),
    n=never_bad(st.integers(1, 200)),
    a=Arg(st.just(Auto("array")), operand_bad, ("a", "A", "shape", "matrix")),
    b=Arg(st.just(Auto("array")), operand_bad, ("b", "B", "shape", "matrix")),
    bias=Arg(
        st.just(Auto("array")),
        st.sampled_from([None, "x", np.ones((2, 2, 2)), np.ones(1000)]),
        ("bias", "shape"),
    ),
    activation=F.name(list(core.ACTIVATIONS), ("activation",)),
    chip=neuron_arg,
    dtype=dtype_fmt_arg,
    numerics=F.flag(("numerics",)),
)
target(
    "trnlab.kernels.transpose",
    kernels.transpose,
    x=F.matrix(1, 200, ("x", "shape", "matrix")),
    chip=neuron_arg,
    dtype=dtype_fmt_arg,
    numerics=F.flag(("numerics",)),
)


def _kernel_target(name, kernel, opts_good, numerics=False):
    def call(m, k, n, options):
        return core.run(
            kernel,
            numerics=False,
            chip="trn2",
            a_t=core.hbm((k, m), "bf16", is_input=True),
            b=core.hbm((k, n), "bf16", is_input=True),
            c=core.hbm((m, n), "bf16"),
            **options,
        )

    target(
        f"trnlab.kernels.{name}",
        call,
        m=never_bad(st.integers(1, 300)),
        k=never_bad(st.integers(1, 300)),
        n=never_bad(st.integers(1, 700)),
        options=Arg(
            opts_good,
            options_bad,
            ("tile", "bufs", "option", "tiles", "a_width", "foo", "format", "argument"),
        ),
    )


for _name in ("tiled", "hoisted", "blocked_mn"):
    _kernel_target(_name, getattr(kernels, _name), tile_options_good)
for _name in ("blocked_mnk", "pipelined"):
    _kernel_target(
        _name, getattr(kernels, _name), st.sampled_from([{}, {"tiles_m": 2}, {"bufs": 2}])
    )
target(
    "trnlab.kernels.transpose_kernel",
    lambda r, c: core.run(
        kernels.transpose_kernel,
        numerics=False,
        x=core.hbm((r, c), "fp32", is_input=True),
        y=core.hbm((c, r), "fp32"),
    ),
    r=never_bad(st.integers(1, 300)),
    c=never_bad(st.integers(1, 300)),
)
target(
    "trnlab.kernels.matmul_bias_act_kernel",
    lambda m, k, n, activation: core.run(
        kernels.matmul_bias_act_kernel,
        numerics=False,
        w=core.hbm((k, n), "bf16", is_input=True),
        x_t=core.hbm((k, m), "bf16", is_input=True),
        bias=core.hbm((n, 1), "fp32", is_input=True),
        y_t=core.hbm((n, m), "fp32"),
        activation=activation,
    ),
    m=never_bad(st.integers(1, 300)),
    k=never_bad(st.integers(1, 300)),
    n=never_bad(st.integers(1, 300)),
    activation=F.name(list(core.ACTIVATIONS), ("activation",)),
)
