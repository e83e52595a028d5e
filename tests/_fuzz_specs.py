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
available_chip_arg = F.name([c.key for c in catalog.chips() if c.status == "available"], ("chip",))
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

sig_arg = F.whole(1, 12, ("sig", "significant digits"), bounded=True)
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

import trnlab.nki as nki  # noqa: E402
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


def ops(good: list[str], bad: list[str] = (), hbm: bool = False) -> Arg:
    """Operands: tile (or HBM, ``hbm``) expressions that must work, and ones that must not."""
    junk = [None, 5, "a", np.ones((4, 4), np.float32), Op("pool"), Op("gone")]
    junk += [Op("a")] if hbm else [Op("x")]
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
    dst=ops(["o", "o[0:32, :]", "o[:, 0:16]", "a"], [*VIEWS_BAD, "p"]),
    src=ops(
        ["x", "x[0:64, 0:64]", "x[0:32, :]", "x[:, 0:16]"],
        ["x[0:100, :]", "x[3:1, :]", "y"],
        hbm=True,
    ),
    queue=queue_arg,
    dge=dge_arg,
)
ctx_target(
    "trnlab.core.KernelContext.store",
    "store",
    dst=ops(["y", "y[0:32, :]", "x"], ["y[0:100, :]", "y[0:7, 0:3]"], hbm=True),
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
        number_arg.bad.filter(lambda v: v is not None),
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
        ("b", "operand", "tile", "psum"),
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
            st.sampled_from(
                [{"z": 1}, {"x": np.ones(5)}, {"y": np.ones(3)}, {"y": np.ones((0, 4))}]
            ),
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

run_arg = Arg(
    st.just(None).map(lambda _: _small_run()),
    st.sampled_from([None, 5, "run", [1, 2], np.zeros(3)]),
    ("run", "core.Run"),
)
for _fn in ("hbm_traffic", "traffic", "time_breakdown"):
    target(f"trnlab.core.{_fn}", getattr(core, _fn), run=run_arg)
target(
    "trnlab.core.element_passes",
    lambda run, name: core.element_passes(run, name),
    run=run_arg,
    name=F.name(["x", "y"], ("HBM tensor", "name")),
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
    out_dtype=Arg(
        st.sampled_from([None, "bf16", "fp32"]),
        fmt_arg.bad.filter(lambda v: v is not None),  # None: the default
        ("format", "out_dtype"),
    ),
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
    nan_ok=True,  # NaN in, NaN out: data, as nki.simulate passes it
    x=Arg(
        F.matrix(1, 200).good,
        st.sampled_from(
            [
                a
                for a in F.ARRAYS_BAD
                if not (isinstance(a, np.ndarray) and a.dtype.kind in "iub")
                and not (
                    isinstance(a, np.ndarray)
                    and a.dtype.kind == "f"
                    and a.size
                    and not np.isfinite(a).all()
                )
            ]
            + [None, "abc"]
        ),
        ("x", "shape", "matrix", "array", "elements", "real numbers"),
    ),
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


# --- trnlab.kernels: the NKI library's other kernels (issue 12 rewrote them in NKI) -------------


class Sized:
    """An operand built inside the call from the drawn sizes: ``kind`` "array" or "shape"
    (good), or "wrong" (one size off, a shape that cannot match; bad)."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind}>"

    def make(self, *shape: int):
        if self.kind == "wrong":
            shape = (*shape[:-1], shape[-1] + 1)
        if self.kind == "shape":
            return tuple(shape)
        n = int(np.prod(shape))
        return np.linspace(-1, 1, n, dtype=np.float32).reshape(shape)


def sized(value, *shape):
    return value.make(*shape) if isinstance(value, Sized) else value


sized_good = st.sampled_from([Sized("array"), Sized("array"), Sized("shape")])
#: Hostile operands whatever the other sizes: wrong-size, empty, ragged, text, junk, bad shapes.
sized_bad = st.sampled_from(
    [
        Sized("wrong"),
        np.zeros((0, 0), np.float32),
        np.zeros((0, 5), np.float32),
        np.array([["a", "b"]]),
        [[1.0, 2.0], [3.0]],
        np.float32(3.0),
        None,
        "abc",
        (),
        (0,),
        (0, 4),
        (-1, 4),
        (1.5, 2),
        ("a", 2),
        (True, 4),
        (NAN, 4),
        object(),
    ]
)
#: An operand whose axes count is wrong for a 2-D argument.
sized_bad_2d = sized_bad | st.sampled_from(
    # the huge shapes: refused before tracing by the instruction estimate (they used to trace
    # for minutes), or as needing values with numerics on
    [np.ones(7, np.float32), np.ones((2, 3, 4)), (5,), (10**6, 10**6), (2**40, 2**40)]
)
#: The same for an argument whose sizes nothing else fixes (any size is right).
alone_bad_2d = sized_bad_2d.filter(lambda v: not isinstance(v, Sized))
KDTYPES = ["fp32", "bf16", "FP32", " bf16 "]
kdtype_arg = Arg(F.name_variants(["fp32", "bf16"]), fmt_arg.bad, ("format", "dtype"))
numerics_arg = F.flag(("numerics",))


def _operand_words(name):
    return (name, "shape", "array", "elements", "real numbers", "numerics", "axes", "instructions")


target(
    "trnlab.kernels.rmsnorm",
    lambda n, d, x, gamma, eps, chip, dtype, numerics: kernels.rmsnorm(
        sized(x, n, d), sized(gamma, d), eps=eps, chip=chip, dtype=dtype, numerics=numerics
    ),
    nan_ok=True,
    n=never_bad(st.integers(1, 300)),
    d=never_bad(st.integers(1, 300)),
    x=Arg(sized_good, sized_bad_2d, _operand_words("x")),
    gamma=Arg(sized_good, sized_bad, _operand_words("gamma")),
    eps=F.choice([1e-6, 0.0, 1e-3], [NAN, F.INF, -1e-6, None, "1e-6", True], ("eps",)),
    chip=neuron_arg,
    dtype=kdtype_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.layernorm",
    lambda n, d, x, gamma, beta, chip, numerics: kernels.layernorm(
        sized(x, n, d), sized(gamma, d), sized(beta, d), chip=chip, numerics=numerics
    ),
    nan_ok=True,
    n=never_bad(st.integers(1, 300)),
    d=never_bad(st.integers(1, 700)),
    x=Arg(sized_good, sized_bad_2d, _operand_words("x")),
    gamma=Arg(sized_good, sized_bad, _operand_words("gamma")),
    beta=Arg(sized_good, sized_bad, _operand_words("beta")),
    chip=neuron_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.softmax",
    lambda n, d, x, chip, dtype, numerics: kernels.softmax(
        sized(x, n, d), chip=chip, dtype=dtype, numerics=numerics
    ),
    nan_ok=True,
    n=never_bad(st.integers(1, 300)),
    d=never_bad(st.integers(1, 700)),
    x=Arg(sized_good, alone_bad_2d, _operand_words("x")),
    chip=neuron_arg,
    dtype=kdtype_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.attention",
    lambda s, t, d, q, k, v, causal, chip, numerics: kernels.attention(
        sized(q, s, d),
        sized(k, t, d),
        sized(v, t, d),
        causal=causal,
        chip=chip,
        numerics=numerics,
    ),
    nan_ok=True,
    s=never_bad(st.integers(1, 300)),
    t=never_bad(st.integers(1, 700)),
    d=never_bad(st.integers(1, 128)),
    q=Arg(sized_good, sized_bad_2d | st.just((8, 129)), (*_operand_words("q"), "head")),
    k=Arg(sized_good, sized_bad_2d, _operand_words("k")),
    v=Arg(sized_good, sized_bad_2d, _operand_words("v")),
    causal=F.flag(("causal",)),
    chip=neuron_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.selective_scan",
    lambda ch, t, s, delta, u, a, b, c, version, chunk, hoist, numerics: kernels.selective_scan(
        sized(delta, ch, t),
        sized(u, ch, t),
        sized(a, ch, s),
        sized(b, s, t),
        sized(c, s, t),
        version=version,
        chunk=chunk,
        hoist=hoist,
        numerics=numerics,
    ),
    nan_ok=True,
    ch=never_bad(st.sampled_from([128, 256])),
    t=never_bad(st.integers(1, 100)),
    s=never_bad(st.integers(1, 4)),
    delta=Arg(sized_good, sized_bad_2d | st.just(np.ones((100, 8))), _operand_words("delta")),
    u=Arg(sized_good, sized_bad_2d, _operand_words("u")),
    a=Arg(sized_good, sized_bad_2d, _operand_words("a")),
    b=Arg(sized_good, sized_bad_2d, _operand_words("b")),
    c=Arg(sized_good, sized_bad_2d, _operand_words("c")),
    version=F.name(["v1", "v2", "v3"], ("version",)),
    chunk=F.whole(1, 600, ("chunk",)),  # any chunk >= 1 works (wider than T: one chunk)
    hoist=F.flag(("hoist",)),
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.avgpool2d",
    lambda c, h, w, x, pool_size, chip, numerics: kernels.avgpool2d(
        sized(x, c, h, w), pool_size, chip=chip, numerics=numerics
    ),
    nan_ok=True,
    c=never_bad(st.integers(1, 200)),
    h=never_bad(st.integers(4, 32)),
    w=never_bad(st.integers(4, 32)),
    x=Arg(
        sized_good,
        sized_bad.filter(lambda v: not isinstance(v, Sized))
        | st.sampled_from([np.ones((8, 8)), (8, 8), np.ones((1, 2, 3, 4)), (2**20, 64, 64)]),
        _operand_words("x"),
    ),
    pool_size=F.choice([1, 2, 3, 4], [0, -1, 1.5, None, "2", True, NAN, 33, 10**9], ("pool",)),
    chip=neuron_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.tensor_add",
    lambda m, n, a, b, chip, dtype, numerics: kernels.tensor_add(
        sized(a, m, n), sized(b, m, n), chip=chip, dtype=dtype, numerics=numerics
    ),
    nan_ok=True,
    m=never_bad(st.integers(1, 300)),
    n=never_bad(st.integers(1, 1100)),
    a=Arg(sized_good, sized_bad_2d, _operand_words("a")),
    b=Arg(sized_good, sized_bad_2d, _operand_words("b")),
    chip=neuron_arg,
    dtype=kdtype_arg,
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.transpose2d",
    lambda p, f1, f2, x, shape2d, numerics: kernels.transpose2d(
        sized(x, p, f1 * f2),
        (f1, f2) if shape2d == "match" else shape2d,
        numerics=numerics,
    ),
    nan_ok=True,
    p=never_bad(st.integers(1, 300)),
    f1=never_bad(st.integers(1, 16)),
    f2=never_bad(st.integers(1, 16)),
    x=Arg(sized_good, sized_bad_2d, _operand_words("x")),
    shape2d=Arg(
        st.just("match"),
        st.sampled_from([*F.SHAPES_BAD, (17, 17), (1, 1000)]),
        ("shape2d", "f1", "elements"),
    ),
    numerics=numerics_arg,
)
target(
    "trnlab.kernels.attention_reference",
    lambda s, t, d, q, k, v, causal: kernels.attention_reference(
        sized(q, s, d), sized(k, t, d), sized(v, t, d), causal=causal
    ),
    nan_ok=True,
    s=never_bad(st.integers(1, 60)),
    t=never_bad(st.integers(1, 60)),
    d=never_bad(st.integers(1, 60)),
    q=Arg(
        st.just(Sized("array")),
        sized_bad_2d.filter(lambda v: not isinstance(v, tuple)),
        _operand_words("q"),
    ),
    k=Arg(
        st.just(Sized("array")),
        sized_bad_2d.filter(lambda v: not isinstance(v, tuple)),
        _operand_words("k"),
    ),
    v=Arg(
        st.just(Sized("array")),
        sized_bad_2d.filter(lambda v: not isinstance(v, tuple)),
        _operand_words("v"),
    ),
    causal=F.flag(("causal",)),
)
target(
    "trnlab.kernels.selective_scan_reference",
    lambda ch, t, s, delta, u, a, b, c: kernels.selective_scan_reference(
        sized(delta, ch, t), sized(u, ch, t), sized(a, ch, s), sized(b, s, t), sized(c, s, t)
    ),
    nan_ok=True,
    ch=never_bad(st.integers(1, 20)),
    t=never_bad(st.integers(1, 20)),
    s=never_bad(st.integers(1, 4)),
    **{
        n: Arg(
            st.just(Sized("array")),
            sized_bad_2d.filter(lambda v: not isinstance(v, tuple)),
            _operand_words(n),
        )
        for n in ("delta", "u", "a", "b", "c")
    },
)


def _scan_kernel(ch, t, s, version):
    return core.run(
        kernels.selective_scan_kernel,
        numerics=False,
        delta=core.hbm((ch, t), "fp32", is_input=True),
        u=core.hbm((ch, t), "fp32", is_input=True),
        a=core.hbm((ch, s), "fp32", is_input=True),
        b=core.hbm((s, t), "fp32", is_input=True),
        c=core.hbm((s, t), "fp32", is_input=True),
        out=core.hbm((ch, t), "fp32"),
        version=version,
    )


target(
    "trnlab.kernels.selective_scan_kernel",
    _scan_kernel,
    ch=never_bad(st.sampled_from([128, 256])),
    t=never_bad(st.integers(1, 100)),
    s=never_bad(st.integers(1, 4)),
    version=F.name(["v1", "v2", "v3"], ("version",)),
)


def _max_instructions(n):
    with core.max_instructions(n):
        return kernels.matmul((256, 256), (256, 512), numerics=False)


target(
    "trnlab.core.max_instructions",
    _max_instructions,
    n=F.whole(1, 10**7, ("max_instructions", "instructions")),
)

# The NKI kernels themselves, through nki.simulate (NKI's own contract: numpy in, numpy out) and
# nki.profile: the kernel's own checks and the front end's refuse what does not fit.
_NKI_KERNELS = {
    "nki_matmul_tiled": (kernels.nki_matmul_tiled, lambda m, k, n: ((k, m), (k, n))),
    "nki_matmul_hoisted": (kernels.nki_matmul_hoisted, lambda m, k, n: ((k, m), (k, n))),
    "nki_matmul_blocked_mn": (kernels.nki_matmul_blocked_mn, lambda m, k, n: ((k, m), (k, n))),
    "nki_matmul_blocked_mnk": (kernels.nki_matmul_blocked_mnk, lambda m, k, n: ((k, m), (k, n))),
    "nki_matmul_bias_act": (kernels.nki_matmul_bias_act, lambda m, k, n: ((k, n), (k, m), (n, 1))),
    "nki_transpose": (kernels.nki_transpose, lambda m, k, n: ((m, k),)),
    "nki_softmax": (kernels.nki_softmax, lambda m, k, n: ((m, n),)),
    "nki_rmsnorm": (kernels.nki_rmsnorm, lambda m, k, n: ((m, n), (n,))),
    "nki_layernorm": (kernels.nki_layernorm, lambda m, k, n: ((m, n), (n,), (n,))),
    "nki_attention": (kernels.nki_attention, lambda m, k, n: ((k, m), (k, n), (n, k))),
    "nki_decode_attention": (
        kernels.nki_decode_attention,
        lambda m, k, n: ((k, min(m, 128)), (k, n), (n, k)),
    ),
    "nki_tensor_add": (kernels.nki_tensor_add[1, 1], lambda m, k, n: ((m, n), (m, n))),
    "nki_avgpool2d": (kernels.nki_avgpool2d, lambda m, k, n: ((m, 8, 8), 2)),
    "nki_transpose2d": (kernels.nki_transpose2d, lambda m, k, n: ((m, 12), (3, 4))),
    "nki_selective_scan": (
        kernels.nki_selective_scan,
        lambda m, k, n: ((128, n), (128, n), (128, 2), (2, n), (2, n)),
    ),
}


def _nki_target(key, kernel, shapes):
    def call(m, k, n, arg, swap, chip, profile):
        args = [
            s
            if not isinstance(s, tuple)
            else np.linspace(-1, 1, int(np.prod(s)), dtype=np.float32).reshape(s)
            for s in shapes(m, k, n)
        ]
        if swap is not None:
            args[arg % len(args)] = swap
        run = nki.profile if profile else nki.simulate
        return run(kernel, chip=chip)(*args)

    target(
        f"trnlab.kernels.{key}",
        call,
        nan_ok=True,
        examples=8,
        m=never_bad(st.integers(1, 200)),
        k=never_bad(st.integers(1, 128)),
        n=never_bad(st.integers(1, 600)),
        arg=never_bad(st.integers(0, 4)),
        swap=Arg(
            st.just(None),
            st.sampled_from(
                [
                    None,
                    "abc",
                    3.0,
                    np.ones(7, np.float32),
                    np.ones((2, 3, 4, 5), np.float32),
                    np.zeros((0, 4), np.float32),
                    object(),
                ]
            ).filter(lambda v: v is not None),
            ("kernel", "argument", "shape", "array", "dtype"),
        ),
        chip=Arg(
            F.name_variants(["trn1", "trn2", "trn3"]),
            F.near_misses(["trn1", "trn2"]),
            ("chip", "target"),
        ),
        profile=never_bad(st.booleans()),
    )


for _key, (_kernel, _shapes) in _NKI_KERNELS.items():
    _nki_target(_key, _kernel, _shapes)


# --- trnlab.nki: the NKI front end's own entry points ---------------------------------------------

SUBPACKAGES += ["trnlab.nki"]
CLASSES.update(
    {
        "trnlab.nki.HBMArg": "record returned by nki.hbm (fuzzed)",
        "trnlab.nki.Kernel": "what nki.jit returns (fuzzed through jit, simulate and profile)",
        "trnlab.nki.NkiTensor": "a kernel's view of a tensor, made only inside a trace",
    }
)
#: Shapes nki.hbm must refuse (a 1-D or 3-D shape is an N-D tensor's: fine).
NKI_SHAPES_BAD = [v for v in F.SHAPES_BAD[:-2] if v not in ((5,), (1, 2, 3))]
NKI_DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3", "fp32", "bf16"]
nki_dtype_arg = Arg(  # None is fine: the array's own dtype
    F.name_variants(NKI_DTYPES),
    F.name(NKI_DTYPES).bad.filter(lambda v: v is not None),
    ("dtype",),
)
nki_chip_arg = Arg(
    F.name_variants(["trn1", "trn2", "trn3"]),
    F.near_misses(["trn1", "trn2", "trn3"]) | st.sampled_from([5, 1.5, object(), "h100"]),
    ("chip",),
)
target(
    "trnlab.nki.hbm",
    lambda x, dtype, name: nki.hbm(x, dtype, name=name),
    nan_ok=True,
    x=Arg(
        st.sampled_from([(128, 512), (4, 8, 16), (1,), np.ones((4, 8), np.float32)]),
        st.sampled_from(
            [
                *NKI_SHAPES_BAD,
                (2**40, 2**40),
                None,
                "abc",
                [[1.0, 2.0], [3.0]],
                object(),
                np.zeros((0, 4), np.float32),
                np.float32(3.0),
                np.array([["a", "b"]]),
            ]
        ),
        ("shape", "array", "nki.hbm"),
    ),
    dtype=nki_dtype_arg,
    name=F.choice([None, "a", "weights"], [5, 1.5, object(), b"x"], ("name",)),
)
target(
    "trnlab.nki.jit",
    lambda fn, mode, platform_target: nki.jit(fn, mode=mode, platform_target=platform_target),
    fn=Arg(
        st.sampled_from([lambda a: a, kernels.nki_softmax.fn]),
        st.sampled_from([5, "abc", object(), np.ones(3)]),
        ("kernel", "function"),
    ),
    mode=F.choice([None, "simulation", "auto"], [5, 1.5, object(), ["simulation"]], ("mode",)),
    platform_target=F.choice(
        [None, "trn1", "TRN2", "gen3", " trn3 "],
        ["trn22", "gen9", "", 5, object(), "h100"],
        ("platform_target", "target"),
    ),
)

target(
    "trnlab.nki.trace",  # the older editions' decorator: nki.jit's arguments, checked alike
    lambda fn, mode: nki.trace(fn, mode=mode),
    fn=Arg(
        st.sampled_from([lambda a: a, kernels.nki_softmax.fn]),
        st.sampled_from([5, "abc", object(), np.ones(3)]),
        ("kernel", "function"),
    ),
    mode=F.choice([None, "simulation"], [5, 1.5, object(), ["simulation"]], ("mode",)),
)


def _nki_run(simulate: bool):
    def call(rows, cols, kernel, chip, numerics):
        x = np.linspace(-1, 1, rows * cols, dtype=np.float32).reshape(rows, cols)
        if simulate:
            return nki.simulate(kernel, chip=chip)(x)
        return nki.profile(kernel, chip=chip, numerics=numerics)(
            x if numerics is not False else nki.hbm((rows, cols), "float32")
        )

    return call


#: Kernels of one [rows, cols] input that run, and arguments that are not such a kernel.
nki_kernel_arg = Arg(
    st.sampled_from([kernels.nki_softmax, kernels.nki_transpose]),
    st.sampled_from([None, 5, "abc", object(), kernels.nki_rmsnorm, kernels.nki_attention]),
    ("kernel", "argument"),
)

for _simulate, _key in ((True, "simulate"), (False, "profile")):
    target(
        f"trnlab.nki.{_key}",
        _nki_run(_simulate),
        nan_ok=True,
        rows=never_bad(st.integers(1, 300)),
        cols=never_bad(st.integers(1, 600)),
        kernel=nki_kernel_arg,
        chip=nki_chip_arg,
        numerics=Arg(
            st.sampled_from([None, True, False]), st.sampled_from(F.FLAGS_BAD[:6]), ("numerics",)
        )
        if not _simulate
        else never_bad(st.just(None)),
    )


def _record(ctx_kind, buffers):
    def kern(ctx, x, y):
        c = ctx if ctx_kind == "ctx" else ctx_kind
        nki.record_into(c, kernels.nki_transpose, x, outputs=(y,), buffers=buffers)

    return core.run(
        kern,
        numerics=False,
        x=core.hbm((64, 96), "fp32", is_input=True),
        y=core.hbm((96, 64), "fp32"),
    )


target(
    "trnlab.nki.record_into",
    _record,
    ctx_kind=Arg(st.just("ctx"), st.sampled_from([None, 5, "ctx2", object()]), ("context",)),
    buffers=F.choice([None, 1, 2, 3], [0, -1, 1.5, "3", True, 10**6, NAN], ("buffers",)),
)


# --- trnlab.fabric -------------------------------------------------------------------------------

from trnlab import fabric, scale  # noqa: E402

SUBPACKAGES += ["trnlab.fabric", "trnlab.scale"]

MULTI = [s.key for s in catalog.systems() if s.chips > 1]
multi_arg = F.name(MULTI, ("system",))
op_arg = F.name(list(fabric.OPS), ("collective", "op"))
nbytes_arg = Arg(
    st.sampled_from([0, 1, 1024, 2**20, 2**30, 3 * 10**8]),
    st.sampled_from([-1, 1.5, NAN, np.inf, None, "1MiB", True]),
    ("nbytes", "bytes", "size"),
)
algorithm_arg = Arg(
    st.sampled_from(["auto", "ring", "fastest", "Auto", "RING", "direct", "hierarchical"]),
    F.near_misses(["auto", "ring", "fastest"]) | st.sampled_from([None, 5, []]),
    ("algorithm",),
)
params_good = st.sampled_from([None, {}, {"step_latency": 2e-6}, {"link_efficiency": 0.5}])
params_bad = st.sampled_from(
    [
        {"step_latency": -1.0},
        {"step_latency": NAN},
        {"link_efficiency": 0.0},
        {"link_efficiency": 2.0},
        {"step_latency": "fast"},
        {"link_efficiency": -0.5},
        {"runtime": "2099"},
        {"counts_both_directions": "yes"},
        {"message_overhead": np.inf},
        {"message_overhead": -1.0},
    ]
)


def _fp(value):
    return fabric.FabricParams(**value) if isinstance(value, dict) else value


fparams_arg = Arg(
    params_good,
    params_bad | st.sampled_from([5, "params"]),
    (
        "params",
        "FabricParams",
        "figure",
        "latency",
        "efficiency",
        "chunk",
        "runtime",
        "both",
        "overhead",
        "seconds",
    ),
)
target(
    "trnlab.fabric.FabricParams",
    lambda params: fabric.FabricParams(**params),
    params=Arg(
        st.sampled_from([{}, {"step_latency": 2e-6}]),
        params_bad,
        fparams_arg.words,
    ),
)
target(
    "trnlab.fabric.collective",
    lambda op, nbytes, system, algorithm, simulate, params: fabric.collective(
        op, nbytes, system, algorithm, simulate=simulate, params=_fp(params)
    ),
    op=op_arg,
    nbytes=nbytes_arg,
    system=multi_arg,
    algorithm=algorithm_arg,
    simulate=F.flag(("simulate",)),
    params=fparams_arg,
)
target(
    "trnlab.fabric.closed_form",
    lambda op, nbytes, system, algorithm: fabric.closed_form(op, nbytes, system, algorithm),
    op=op_arg,
    nbytes=nbytes_arg,
    system=Arg(
        multi_arg.good,
        multi_arg.bad,
        ("system", "chip"),
        multi_arg.canon,
    ),
    algorithm=algorithm_arg,
)
target(
    "trnlab.fabric.algorithms",
    lambda op, system, params: fabric.algorithms(op, system, _fp(params)),
    op=op_arg,
    system=multi_arg,
    params=fparams_arg,
)
target(
    "trnlab.fabric.runtime_choice",
    lambda op, nbytes, system: fabric.runtime_choice(op, nbytes, fabric.topology(system)),
    op=op_arg,
    nbytes=nbytes_arg,
    system=never_bad(st.sampled_from(MULTI)),
)
target(
    "trnlab.fabric.runtime_choice(topo)",
    lambda topo: fabric.runtime_choice("all_reduce", 2**20, topo),
    topo=Arg(
        st.just(None).map(lambda _: fabric.topology("trn2.48xlarge")),
        st.sampled_from([None, "trn2.48xlarge", 5]),
        ("topo", "Topology", "topology"),
    ),
)
target(
    "trnlab.fabric.bus_factor",
    fabric.bus_factor,
    op=op_arg,
    n=F.choice([1, 2, 64, 10**6], [0, -1, 1.5, None, "4", True], ("n", "chips")),
)
target(
    "trnlab.fabric.all_to_all_bound",
    lambda nbytes, system, params: fabric.all_to_all_bound(nbytes, system, _fp(params)),
    nbytes=Arg(
        nbytes_arg.good, st.sampled_from([-1, NAN, np.inf, None, "1MiB", True]), nbytes_arg.words
    ),
    system=multi_arg,
    params=fparams_arg,
)
target(
    "trnlab.fabric.bisection_bandwidth",
    lambda system, params: fabric.bisection_bandwidth(system, _fp(params)),
    system=multi_arg,
    params=fparams_arg,
)
target(
    "trnlab.fabric.group",
    lambda system, size, stride, params: fabric.group(system, size, stride, _fp(params)),
    system=multi_arg,
    size=F.whole(1, 64, ("size", "chips", "group")),
    stride=F.choice([1, 2, 8], [0, -1, 1.5, None, "2", True], ("stride",)),
    params=fparams_arg,
)
target(
    "trnlab.fabric.topology",
    lambda system, params: fabric.topology(system, _fp(params)),
    system=Arg(F.name_variants(SYSTEMS), system_arg.bad, ("system",), F.canonical_name),
    params=fparams_arg,
)
target(
    "trnlab.fabric.ring",
    fabric.ring,
    n=F.whole(2, 64, ("n", "chips")),
    bandwidth=F.real(0.0, 1e12, ("bandwidth",)),
    latency=F.real(0.0, 1e-3, ("latency",), lo_open=False),
    message_overhead=F.real(0.0, 1e-3, ("message_overhead",), lo_open=False),
    op_overhead=F.real(0.0, 1e-3, ("op_overhead",), lo_open=False),
)
target(
    "trnlab.fabric.torus",
    lambda shape, bandwidth, latency: fabric.torus(shape, bandwidth, latency),
    shape=Arg(
        st.sampled_from([(4,), (4, 4), (2, 4, 4)]),
        st.sampled_from([(), (1,), (0, 4), (-2, 4), (1.5, 4), ("a",), None, 5, (10**6, 10**6)]),
        ("shape", "torus", "axes", "chips"),
    ),
    bandwidth=F.real(0.0, 1e12, ("bandwidth",)),
    latency=F.real(0.0, 1e-3, ("latency",), lo_open=False),
)
target(
    "trnlab.fabric.calibrate",
    fabric.calibrate,
    examples=3,
    iterations=F.choice([1, 2], [0, -1, 1.5, None, "2", 10**9], ("iterations",)),
)
target(
    "trnlab.fabric.calibrate_link_efficiency",
    fabric.calibrate_link_efficiency,
    examples=4,
    op_overhead=Arg(
        st.sampled_from([None, 1e-5]),
        st.sampled_from([-1.0, NAN, "x", np.inf, True]),
        ("op_overhead",),
    ),
)
target(
    "trnlab.fabric.calibrate_op_overhead",
    fabric.calibrate_op_overhead,
    examples=4,
    link_efficiency=Arg(
        st.sampled_from([None, 0.4]),
        st.sampled_from([0.0, -1.0, 2.0, NAN, "x"]),
        ("link_efficiency", "efficiency"),
    ),
    runtime=F.name(["current", "2023"], ("runtime",)),
)


@cache
def _collective_result(simulate: bool):
    return fabric.collective("all_reduce", 2**20, "trn2.48xlarge", "ring", simulate=simulate)


target(
    "trnlab.fabric.CollectiveResult.schedule_at",
    lambda k: _collective_result(True).schedule.at_step(k),
    k=F.choice([0, 1, 5], [-1, 10**6, 1.5, None, "0"], ("step", "k")),
)
target(
    "trnlab.fabric.Topology.route",
    lambda a, b: fabric.topology("trn2.48xlarge").route(a, b),
    a=F.choice([0, 3, 15], [-1, 16, 1.5, None, "0"], ("a", "chip", "node")),
    b=F.choice([0, 7], [-1, 99, None], ("b", "chip", "node")),
)
target(
    "trnlab.fabric.Topology.hop",
    lambda a, b: fabric.topology("trn2-ultraserver").hop(a, b),
    a=F.choice([0, 3, 63], [-1, 64, 1.5, None, "0"], ("a", "chip", "node")),
    b=F.choice([1, 7], [-1, 999, None], ("b", "chip", "node")),
)
CLASSES.update(
    {
        "trnlab.fabric.CollectiveResult": "record returned by fabric.collective (fuzzed)",
        "trnlab.fabric.Estimate": "record returned by fabric.closed_form (fuzzed)",
        "trnlab.fabric.NccomRun": "record of published nccom-test runs (data)",
        "trnlab.fabric.Schedule": "record of a simulated collective (at_step fuzzed)",
        "trnlab.fabric.Topology": "built by topology/ring/torus/group (fuzzed; route and hop below)",
    }
)

# --- trnlab.scale --------------------------------------------------------------------------------

model_arg = F.name(scale.models(), ("model", "workload"))
_rc = F.name(["none", "selective", "full"], ("recompute",))
recompute_arg = Arg(
    _rc.good, _rc.bad.filter(lambda v: v is not None), _rc.words, _rc.canon
)  # None: "none"
scale_system_arg = Arg(
    F.name_variants(["trn2.48xlarge", "trn2-ultraserver", "trn1.32xlarge", "p5.48xlarge"]),
    system_arg.bad,
    ("system",),
    F.canonical_name,
)
train_dtype_arg = F.name(["bf16", "fp8"], ("dtype", "data type", "format"))
count_arg = lambda lo, hi, words: F.whole(lo, hi, words)  # noqa: E731
parallel_good = st.sampled_from(
    [None, dict(tp=8, pp=2), dict(tp=4, zero=3, recompute="full"), dict(tp=8, micro_batch=2)]
)
parallel_bad = st.sampled_from(
    [
        dict(tp=0),
        dict(pp=-1),
        dict(micro_batch=0),
        dict(dp=1.5),
        dict(zero=4),
        dict(recompute="some"),
        dict(tp=True),
        dict(virtual_stages=0),
        dict(layers_per_stage=(1, 2)),
        dict(flash_attention="yes"),
        5,
        "tp8",
    ]
)


def _parallel(value, system):
    if isinstance(value, dict):
        try:
            chips = catalog.system(system).chips if isinstance(system, str) else system.chips
        except Exception:  # a hostile system: the plan refuses it
            chips = 1
        kw = dict(value)
        if "dp" not in kw:
            rest = kw.get("tp", 1) * kw.get("pp", 1) * kw.get("cp", 1)
            ok = isinstance(rest, int) and not isinstance(rest, bool) and rest > 0
            kw["dp"] = max(1, chips // rest) if ok else 1
        return scale.Parallelism(**kw)
    return value


plan_common = dict(
    global_batch=Arg(
        st.sampled_from([64, 256, 1024]),
        st.sampled_from([0, -8, 1.5, NAN, None, "64", True]),
        ("global batch", "global_batch"),
    ),
    seq_len=Arg(
        st.sampled_from([None, 2048, 4096]),
        st.sampled_from([0, -1, 1.5, NAN, "4k", True]),
        ("sequence length", "seq_len"),
    ),
    dtype=train_dtype_arg,
    tokens=Arg(
        st.sampled_from([1e9, 1e12]),
        st.sampled_from([0, -1e9, NAN, np.inf, None, "1T", True]),
        ("token", "tokens"),
    ),
)
target(
    "trnlab.scale.plan",
    lambda model_spec, system, parallel, price, watts, usable_hbm, overlap_dp, **kw: scale.plan(
        model_spec,
        system,
        _parallel(parallel, system),
        price_per_chip_hour=price,
        watts_per_chip=watts,
        usable_hbm=usable_hbm,
        overlap_dp=overlap_dp,
        **kw,
    ),
    model_spec=model_arg,
    system=scale_system_arg,
    parallel=Arg(
        parallel_good,
        parallel_bad,
        (
            "parallel",
            "tp",
            "pp",
            "dp",
            "micro",
            "zero",
            "recompute",
            "virtual",
            "layers",
            "flash",
            "Parallelism",
            "whole number",
        ),
    ),
    price=Arg(
        st.sampled_from([None, 2.5]),
        st.sampled_from([-1.0, 0.0, NAN, np.inf, "2", True]),
        ("price",),
    ),
    watts=Arg(
        st.sampled_from([None, 500.0]),
        st.sampled_from([-500.0, 0.0, NAN, "500", True]),
        ("power", "watts", "W"),
    ),
    usable_hbm=Arg(
        st.sampled_from([0.95, 0.5, 1.0]),
        st.sampled_from([0.0, -0.1, 1.5, NAN, "0.9", True, None]),
        ("usable_hbm", "HBM"),
    ),
    overlap_dp=F.flag(("overlap_dp",)),
    **plan_common,
)
target(
    "trnlab.scale.search",
    lambda model_spec, system, rank_by, micro_batches, **kw: scale.search(
        model_spec, system, rank_by=rank_by, micro_batches=micro_batches, **kw
    ),
    examples=6,
    model_spec=Arg(st.sampled_from(["llama3-8b", "mixtral-8x7b"]), model_arg.bad, model_arg.words),
    system=Arg(st.sampled_from(["trn2.48xlarge", "trn1.32xlarge"]), system_arg.bad, ("system",)),
    rank_by=F.name(["time", "cost", "energy"], ("rank_by",)),
    micro_batches=Arg(
        st.sampled_from([(1, 2), (1,)]),
        st.sampled_from([(), (0,), (-1,), (1.5,), None, "12", tuple(range(1, 10**5))]),
        ("micro_batches", "micro-batch", "plans"),
    ),
    **plan_common,
)
target(
    "trnlab.scale.inference",
    scale.inference,
    model_spec=model_arg,
    system=scale_system_arg,
    tp=F.whole(1, 16, ("tp", "tensor")),
    batch=F.whole(1, 256, ("batch",)),
    prompt=F.whole(1, 8192, ("prompt",)),
    output=F.whole(1, 2048, ("output",)),
    weight_format=F.name(["bf16", "fp8"], ("weight_format", "format")),
    kv_format=F.name(["bf16", "fp8"], ("kv_format", "format")),
    watts_per_chip=Arg(
        st.sampled_from([None, 500.0]), st.sampled_from([-1.0, 0.0, NAN, "500"]), ("power", "watts")
    ),
    usable_hbm=Arg(
        st.sampled_from([0.95, 0.8]),
        st.sampled_from([0.0, 1.5, NAN, None, "x"]),
        ("usable_hbm", "HBM"),
    ),
    layer_overhead=Arg(
        st.sampled_from([None, 1e-5]),
        st.sampled_from([-1e-5, NAN, np.inf, "x", True]),
        ("layer_overhead", "overhead"),
    ),
    kv_sharding=Arg(
        st.sampled_from(["replicate_to_tp", "convert_to_mha"]),
        st.sampled_from(["mha", "", None, 3, "replicate"]),
        ("kv_sharding",),
    ),
)
target(
    "trnlab.scale.serving_curve",
    scale.serving_curve,
    examples=6,
    model_spec=Arg(st.sampled_from(["llama3-8b"]), model_arg.bad, model_arg.words),
    system=Arg(st.sampled_from(["trn2.48xlarge"]), system_arg.bad, ("system",)),
    tp=F.whole(1, 16, ("tp",)),
    batches=Arg(
        st.sampled_from([None, (1, 8, 64)]),
        st.sampled_from([(), (0,), (-1, 2), (1.5,), "8", 5, tuple(range(1, 10**5))]),
        ("batches", "batch"),
    ),
)
target(
    "trnlab.scale.tokens_per_megawatt_at",
    scale.tokens_per_megawatt_at,
    examples=6,
    model_spec=Arg(st.sampled_from(["llama3-8b"]), model_arg.bad, model_arg.words),
    system=Arg(st.sampled_from(["trn2.48xlarge"]), system_arg.bad, ("system",)),
    per_user=F.real(1.0, 200.0, ("per_user", "tokens per second")),
    tp=F.whole(1, 16, ("tp",)),
)
spec_arg = Arg(
    st.sampled_from(scale.models()).map(scale.model),
    st.sampled_from([None, "llama3-8b!", 5]),
    ("model", "ModelSpec"),
)
target(
    "trnlab.scale.training_memory",
    lambda model, tp, pp, dp, zero, micro_batch, seq_len, recompute: scale.training_memory(
        model,
        tp=tp,
        pp=pp,
        dp=dp,
        zero=zero,
        micro_batch=micro_batch,
        seq_len=seq_len,
        recompute=recompute,
    ),
    model=spec_arg,
    tp=F.whole(1, 8, ("tp",)),
    pp=F.whole(1, 8, ("pp",)),
    dp=F.whole(1, 64, ("dp",)),
    zero=F.choice([0, 1, 2, 3], [4, -1, 1.5, None, True], ("zero",)),
    micro_batch=F.whole(1, 8, ("micro_batch", "micro-batch")),
    seq_len=Arg(
        st.sampled_from([None, 2048]),
        st.sampled_from([0, -1, 1.5, NAN, "2k"]),
        ("seq_len", "sequence"),
    ),
    recompute=recompute_arg,
)
target(
    "trnlab.scale.inference_memory",
    lambda model, batch, context, tp, ranks_per_chip: scale.inference_memory(
        model, batch=batch, context=context, tp=tp, ranks_per_chip=ranks_per_chip
    ),
    model=spec_arg,
    batch=F.whole(1, 64, ("batch",)),
    context=F.choice([1, 8192, 10**6], [0, -1, 1.5, None, "8k", True], ("context",)),
    tp=F.whole(1, 8, ("tp",)),
    ranks_per_chip=F.choice([1, 2, 4], [0, -1, 1.5, None, "2", True], ("ranks_per_chip",)),
)
target(
    "trnlab.scale.params_per_chip",
    scale.params_per_chip,
    model=spec_arg,
    tp=F.choice([1, 2, 8], [0, -1, 1.5, None, "2", True], ("tp",)),
    pp=F.choice([1, 2, 8], [0, -1, 1.5, None, "2", True], ("pp",)),
    ep=F.choice([1, 2, 8], [0, -1, 1.5, None, "2", True], ("ep",)),
)
target(
    "trnlab.scale.stage_layers",
    scale.stage_layers,
    model=spec_arg,
    pp=F.whole(1, 8, ("pp", "stages")),
    layers=Arg(st.none(), st.sampled_from([(1, 2), (0,), (-1, 100), "4", 5]), ("layers", "stages")),
)
target(
    "trnlab.scale.recompute_mode",
    scale.recompute_mode,
    value=Arg(
        st.sampled_from(["none", "selective", "full", "FULL", True, False, None]),
        st.sampled_from(["some", 1, 0, 1.5, []]),
        ("recompute",),
    ),
)
target(
    "trnlab.scale.bytes_per_value",
    scale.bytes_per_value,
    fmt=Arg(
        F.name_variants(["bf16", "fp8", "fp32", "int8"]),
        F.near_misses(["bf16", "fp8"]) | st.sampled_from([None, 5]),
        ("format",),
        F.canonical_name,
    ),
)
target(
    "trnlab.scale.achieved_flops_per_chip",
    scale.achieved_flops_per_chip,
    chip_key=chip_arg,
    dtype=dtype_arg,
    shape=Arg(
        st.sampled_from([None, (64, 64, 64), (1, 8192, 8192)]),
        st.sampled_from([(0, 1, 1), (-1, 2, 2), (1, 2), (1.5, 2, 2), "64", [64, 64, 64]]),
        ("shape", "GEMM"),
    ),
)
_GEMM_SHAPES = Arg(
    st.sampled_from([(64, 64, 64), (1, 8192, 8192), (4096, 6144, 2048)]),
    st.sampled_from([(0, 1, 1), (-1, 2, 2), (1, 2), (1.5, 2, 2), "64", [64, 64, 64], None]),
    ("shape", "GEMM"),
)
target(
    "trnlab.scale.gemm_wave_efficiency",
    scale.gemm_wave_efficiency,
    chip=F.name(["h100", "a100"], ("chip", "SM count"), extra_bad=("trn2", "h200")),
    shape=_GEMM_SHAPES,
)
target(
    "trnlab.scale.flash_attention_rate",
    scale.flash_attention_rate,
    chip=F.name(["h100"], ("chip", "fused-attention"), extra_bad=("trn2", "a100")),
    seq_len=F.whole(1, 200_000, ("sequence length",)),
    head_dim=F.choice([128], [64, 0, -1, 1.5, None, "128"], ("head dimension", "head_dim")),
    direction=F.name(["forward", "backward"], ("direction",)),
    dtype=F.name(["bf16", "fp16"], ("dtype", "data type", "BF16/FP16"), extra_bad=("fp8",)),
)
target("trnlab.scale.decode_layer_overhead", scale.decode_layer_overhead, chip_key=chip_arg)
target(
    "trnlab.scale.collective_time",
    lambda op, nbytes, system, size, stride: scale.collective_time(
        op, nbytes, catalog.system(system) if isinstance(system, str) else system, size, stride
    ),
    op=op_arg,
    nbytes=Arg(
        st.sampled_from([0, 1e6, 2**30]),
        st.sampled_from([-1.0, NAN, np.inf, None, "1e6"]),
        ("nbytes", "bytes"),
    ),
    system=Arg(st.sampled_from(MULTI), st.sampled_from([None, 5]), ("system",)),
    size=F.whole(1, 16, ("size", "group", "chips")),
    stride=F.choice([1, 2, 4], [0, -1, 1.5, None, "2"], ("stride",)),
)
target("trnlab.scale.tiers", scale.tiers, system=scale_system_arg)
target("trnlab.scale.model", scale.model, name=model_arg)
target("trnlab.scale.models", scale.models)
target(
    "trnlab.scale.ModelSpec",
    lambda **kw: scale.ModelSpec("m", **kw),
    layers=F.choice([1, 96], [0, -1, 1.5, None, True], ("layers",)),
    hidden=F.choice([512, 4096], [0, -1, 1.5, None, True], ("hidden",)),
    heads=F.choice([8, 32], [0, 3, -8, None], ("heads",)),
    kv_heads=F.choice([8], [0, 5, None], ("kv_heads", "key/value")),
    ffn=F.choice([1, 14336], [0, -1, 1.5, None], ("ffn",)),
    vocab=F.choice([1, 128256], [0, -1, 1.5, None], ("vocab",)),
    seq_len=F.choice([1, 8192], [0, -1, 1.5, None], ("seq_len",)),
    gated_ffn=F.flag(("gated_ffn",)),
)
target(
    "trnlab.scale.ModelSpec.training_flops",
    lambda tokens, recompute: scale.model("llama3-8b").training_flops(tokens, recompute),
    tokens=plan_common["tokens"],
    recompute=recompute_arg,
)
target(
    "trnlab.scale.Parallelism",
    lambda kw: scale.Parallelism(**kw),
    kw=Arg(
        st.sampled_from([{}, dict(tp=8, pp=2, dp=4)]),
        parallel_bad.filter(lambda v: isinstance(v, dict)),
        (
            "tp",
            "pp",
            "dp",
            "micro",
            "zero",
            "recompute",
            "virtual",
            "layers",
            "flash",
            "whole number",
        ),
    ),
)
target(
    "trnlab.scale.PlanResult.read",
    lambda rank: [
        scale.plan("llama3-8b", "trn2.48xlarge", scale.Parallelism(tp=8, dp=2)).explain(),
        rank,
    ],
    rank=never_bad(st.just(0)),
)
# Published runs that need no search over unpublished settings (fast enough to fuzz).
VALIDATION_KEYS = ["megatron-22b full", "gpt3-175b seqsel", "llama2-13b trn1 32 nodes",
                   "llama3-8b trn1 int8 8k b8", "mistral-7b inf2 8192+8192 b8"]  # fmt: skip
target(
    "trnlab.scale.validation_case",
    scale.validation_case,
    key=F.name(VALIDATION_KEYS, ("published run",)),
)

CLASSES.update(
    {
        "trnlab.scale.ValidationRow": "record returned by scale.validation_case (fuzzed)",
        "trnlab.scale.InferenceResult": "record returned by scale.inference (fuzzed)",
        "trnlab.scale.MemoryBreakdown": "record returned by the memory functions (fuzzed)",
        "trnlab.scale.PlanResult": "record returned by scale.plan (fuzzed)",
        "trnlab.scale.SearchResult": "record returned by scale.search (fuzzed)",
        "trnlab.scale.ServingPoint": "record returned by scale.serving_curve (fuzzed)",
        "trnlab.scale.Tiers": "record returned by scale.tiers (fuzzed)",
    }
)


# --- trnlab.widgets: dashboard models and views -------------------------------------------------

import ipywidgets as W  # noqa: E402

from trnlab import TrnlabError, widgets  # noqa: E402
from trnlab.widgets.format_model import BLOCK_SIZES  # noqa: E402
from trnlab.widgets.stepper_model import FORMATS as STEPPER_FORMATS  # noqa: E402
from trnlab.widgets.stepper_model import MatmulStepperModel, RunCursor  # noqa: E402

SUBPACKAGES += ["trnlab.widgets"]


def state(model) -> tuple:
    """What a model holds, comparable: its attributes (objects by identity) and a cursor's
    position."""
    out = []
    for k, v in sorted(vars(model).items()):
        if isinstance(v, int | float | str | bool | tuple | type(None)):
            out.append((k, v))
        elif isinstance(v, dict):
            out.append((k, tuple(sorted((a, repr(b)) for a, b in v.items()))))
        else:
            out.append((k, id(v), getattr(v, "position", None)))
    return tuple(out)


def model_target(key, make, read, **args):
    """``model.set(**changes)`` on a fresh model: a refused set must leave the model exactly as
    it was; an accepted one must leave every result method working (``read``)."""

    def call(**changes):
        m = make()
        before = state(m)
        try:
            m.set(**changes)
        except TrnlabError:
            assert state(m) == before, f"a refused set changed the model: {before} -> {state(m)}"
            raise
        return read(m)

    TARGETS[key] = Target(key, call, args, examples=None)


PASSIVE = (W.HTML, W.Label, W.Play, W.FloatProgress)


def _controls(view) -> dict:
    """The dashboard's input controls by name: attributes, and entries of a ``controls`` dict."""
    found = {}
    for name, w in vars(view).items():
        if isinstance(w, W.ValueWidget) and not isinstance(w, PASSIVE):
            found[name] = w
        elif isinstance(w, dict):
            for key, c in w.items():
                if isinstance(c, W.ValueWidget) and not isinstance(c, PASSIVE):
                    found[f"{name}[{key}]"] = c
    return found


def _option(w, pick: int):
    """A value the control offers (an option, a tuple of options, a bool, a number in range)."""
    if isinstance(w, W.SelectMultiple):
        opts = [o[1] if isinstance(o, tuple) else o for o in w.options]
        value = tuple(opts[(pick + i * 7) % len(opts)] for i in range(1 + pick % 3))
        return tuple(dict.fromkeys(value))
    if isinstance(w, W.Checkbox):
        return bool(pick % 2)
    if hasattr(w, "options"):
        opts = [o[1] if isinstance(o, tuple) else o for o in w.options]
        return opts[pick % len(opts)]
    if not hasattr(w, "min"):  # an unbounded number box: whatever a learner may type
        typed = [1, 2, 16, 64, 128, 256, 384, 512, 1000, 4096, 0, -1, -512, 100_000, 10**9]
        return typed[pick % len(typed)]
    lo, hi = w.min, min(w.max, w.min + 4096)
    return lo + pick % (hi - lo + 1)


def view_targets(key, make, settings: dict[str, Arg]):
    """Two targets per dashboard, on one view kept across examples (as a learner clicks on):
    every option of every control must draw or show a message and keep the last good view;
    ``view.set`` with hostile settings must refuse and leave model and picture as they were."""
    view = cache(make)

    def controls(control, pick):
        v = view()
        w = _controls(v)[control]
        before = state(v.model)
        value = _option(w, pick)
        w.value = value  # runs the dashboard's callback: it must not raise
        job = getattr(v, "job", None)
        if job is not None:  # a search on a worker thread: it must end (the watchdog times it)
            job.wait()
        if w.value != value:  # refused: the control went back to what the picture shows
            assert v.message.value, f"{control}={value!r} was refused without a message"
            assert state(v.model) == before, f"refused {control}={value!r} changed the model"
        assert v.summary_text()
        return None

    TARGETS[f"{key}.controls"] = Target(
        f"{key}.controls",
        controls,
        {
            "control": never_bad(st.sampled_from(sorted(_controls(view())))),
            "pick": never_bad(st.integers(0, 10_000)),
        },
        budget_s=60.0,
    )

    def set_(**changes):
        v = view()
        job = getattr(v, "job", None)
        if job is not None:
            job.wait()
        before, text = state(v.model), v.summary_text()
        try:
            v.set(**changes)
        except TrnlabError:
            assert state(v.model) == before, "a refused view.set changed the model"
            assert v.summary_text() == text, "a refused view.set changed the picture"
            raise
        return None

    TARGETS[f"{key}.set"] = Target(f"{key}.set", set_, settings)


# FormatExplorer / FormatComparison
fmt_list = Arg(
    st.lists(
        F.name_variants(list(widgets.FormatComparison.available_formats())),
        min_size=1,
        max_size=4,
        unique_by=str.lower,
    ).map(tuple),
    st.sampled_from(
        [(), "bf16", None, 5, ("bf16", "BF16"), ("int8_mx",), ("nope",), tuple(FORMATS[:7]), [None]]
    ),
    ("formats", "format"),
)
format_settings = dict(
    formats=fmt_list,
    distribution=F.name(list(formats.DISTRIBUTIONS), ("distribution",)),
    rounding=F.name(["nearest", "stochastic"], ("rounding",)),
    block_size=F.choice(list(BLOCK_SIZES), [0, 33, -32, 32.0, True, None, "32"], ("block size",)),
    chip=Arg(
        available_chip_arg.good,
        available_chip_arg.bad | st.just("trn4"),
        ("chip",),
        available_chip_arg.canon,
    ),
    sparse=F.flag(("sparse",)),
    size=F.choice([32, 64, 128], [0, 33, -64, 4096, 64.0, True, None], ("size",)),
    seed=Arg(st.integers(0, 1000), st.sampled_from([-1, 1.5, "abc", None, 2**40, True]), ("seed",)),
)


def _read_formats(m):
    return [m.rows(), m.summary(), m.histogram(), [m.grid(f) for f in m.formats]]


model_target(
    "trnlab.widgets.FormatComparison", widgets.FormatComparison, _read_formats, **format_settings
)
view_targets(
    "trnlab.widgets.FormatExplorer", lambda: widgets.FormatExplorer(size=64), format_settings
)

# ChipExplorer / ChipComparison
metric_keys = list(widgets.METRICS)
chip_settings = dict(
    level=F.name(["chip", "system"], ("level",)),
    items=Arg(
        st.none()
        | st.lists(F.name_variants(CHIPS[:6]), min_size=1, max_size=3, unique_by=str.lower).map(
            tuple
        ),
        st.sampled_from(["trn2", ("trn2", "nope"), 5, ("trn2", "TRN2"), [None]]),
        ("items", "chip", "system"),
    ),
    # Overlapping names: the same figure on both axes of a scatter must be refused or moved.
    metric=F.name(["peak.bf16", "hbm_bandwidth", "hbm_bytes", "peak.mxfp8"], ("metric",)),
    x_metric=F.name(["hbm_bandwidth", "peak.fp8", "peak.mxfp8"], ("x_metric",)),
    chart=F.name(["bar", "scatter"], ("chart",)),
)


def _read_chips(m):
    assert m.chart != "scatter" or m.metric != m.x_metric, f"a scatter of {m.metric} on itself"
    return [m.rows(), m.summary(), m.sources_table(), m.rows(m.x_metric)]


model_target("trnlab.widgets.ChipComparison", widgets.ChipComparison, _read_chips, **chip_settings)
view_targets("trnlab.widgets.ChipExplorer", widgets.ChipExplorer, chip_settings)

# MatmulStepper / MatmulStepperModel / KernelProfile / RunCursor
stepper_settings = dict(
    chip=neuron_arg,
    m=F.whole(1, 600, ("M", "m"), bounded=True),
    k=F.whole(1, 600, ("K", "k"), bounded=True),
    n=F.whole(1, 1200, ("N", "n"), bounded=True),
    dtype=F.name(list(STEPPER_FORMATS), ("format", "dtype")),
    variant=variant_arg,
    tile_k=F.choice([128, 64], [0, -1, 1.5, None, "64", True], ("tile_k",)),
    tile_m=F.choice([128, 32], [0, -1, 1.5, None], ("tile_m",)),
    tile_n=F.choice([512, 256], [0, -1, 1.5, None], ("tile_n",)),
)


def _read_stepper(m):
    c = m.cursor
    return [m.summary(), m.matrices(), c.counters(), c.tiles("sbuf"), c.tiles("psum"),
            c.gantt(), c.trajectory(), c.describe(), c.roofline()]  # fmt: skip


@cache
def _stepper_model():
    return MatmulStepperModel(m=256, k=256, n=512)


model_target(
    "trnlab.widgets.MatmulStepperModel",
    lambda: MatmulStepperModel(m=256, k=256, n=512),
    _read_stepper,
    **stepper_settings,
)
view_targets(
    "trnlab.widgets.MatmulStepper",
    lambda: widgets.MatmulStepper(m=256, k=256, n=512),
    {**stepper_settings, "position": F.whole(0, 10, ("position",))},
)
cursor_moves = dict(
    position=Arg(
        st.integers(0, 3), st.sampled_from([-1, 10**6, 1.5, "0", None, True, NAN]), ("position",)
    ),
)


def _cursor():
    return RunCursor(_small_run())


model_target(
    "trnlab.widgets.RunCursor",
    _cursor,
    lambda c: [c.counters(), c.describe(), c.summary(), c.tiles("sbuf"), c.hbm("x"), c.gantt()],
    **cursor_moves,
)
target(
    "trnlab.widgets.RunCursor.set(time)",
    lambda t: _cursor().set(time=t).counters(),
    t=Arg(
        st.floats(0, 1e-3), st.sampled_from([NAN, -1.0, None, "0", np.inf, True, [0]]), ("time",)
    ),
)
target(
    "trnlab.widgets.RunCursor.queries",
    lambda k, op, space, name, cells, max_bars: [
        _cursor().step(k).counters(),
        _cursor().next_op(op).describe(),
        _cursor().tiles(space),
        _cursor().hbm(name, cells=cells),
        _cursor().gantt(max_bars),
    ],
    k=F.choice([1, 2, -1, 100], [1.5, "1", None, NAN, True], ("steps",)),
    op=F.name(list(core.OPS), ("operation",)),
    space=F.name(["sbuf", "psum"], ("space",)),
    name=F.choice(["x", "y"], ["z", None, 5, "X!"], ("tensor",)),
    cells=F.choice([1, 8, 64], [0, -1, 1.5, None, 10**9], ("cells",)),
    max_bars=F.choice([1, 10, 3000], [0, -5, 1.5, None], ("max_bars",)),
)
target(
    "trnlab.widgets.RunCursor.jump",
    lambda i: _cursor().jump(i).position,
    i=F.choice([0, 1, 2], [-1, 3, 10**6, 1.5, "0", None, True], ("instruction",)),
)
target(
    "trnlab.widgets.KernelProfile",
    lambda run, position: widgets.KernelProfile(run, position).summary_text(),
    examples=6,
    run=Arg(
        st.just(None).map(lambda _: _small_run()),
        st.sampled_from([None, 5, "run", np.ones(3)]),
        ("run", "Run"),
    ),
    position=Arg(
        st.sampled_from([None, 0, 2]), st.sampled_from([-1, 99, 1.5, "0", True]), ("position",)
    ),
)
view_targets(
    "trnlab.widgets.KernelProfile",
    lambda: widgets.KernelProfile(_small_run()),
    cursor_moves,
)
target(
    "trnlab.widgets.MemoryTraffic",
    lambda run, title, structure: widgets.MemoryTraffic(run, title, structure).summary_text(),
    examples=4,
    run=Arg(
        st.just(None).map(lambda _: _small_run()),
        st.sampled_from([None, 5, "run", np.ones(3)]),
        ("run", "Run"),
    ),
    title=Arg(
        st.sampled_from(["", "puzzle 1, your kernel"]), st.sampled_from([5, None, b"x"]), ("title",)
    ),
    structure=Arg(st.booleans(), st.sampled_from(["no", 0, None]), ("structure",)),
)
CLASSES.update(
    {
        "trnlab.widgets.SettingError": "error class",
    }
)

# ScaleExplorer / ScaleModel
scale_settings = dict(
    model=F.name(["llama3-8b", "llama3-70b", "mixtral-8x7b"], ("model",)),
    system=F.name(["trn2.48xlarge", "trn2-ultraserver", "trn1.32xlarge"], ("system",)),
    count=F.choice([1, 2, 4], [0, -1, 1.5, None, True, 10**9], ("count", "systems", "chips")),
    dtype=F.name(["bf16", "fp8"], ("format", "dtype")),
    tp=F.choice([1, 2, 4, 8], [0, -1, 1.5, None, True], ("tp",)),
    pp=F.choice([1, 2, 4], [0, -2, 1.5, None], ("pp",)),
    zero=F.choice([0, 1, 3], [4, -1, 1.5, None, True], ("zero",)),
    recompute=recompute_arg,
    micro_batch=F.choice([1, 2], [0, -1, 1.5, None], ("micro_batch",)),
    auto=F.flag(("auto",)),
    global_batch=F.choice([64, 256, 512], [0, -1, 1.5, None, "64"], ("global_batch",)),
    seq_len=F.choice([2048, 4096], [0, -1, 1.5, None], ("seq_len",)),
    tokens=Arg(
        st.sampled_from([1e9, 1e12]),
        st.sampled_from([0, -1.0, NAN, np.inf, None, "1T", True]),
        ("tokens", "token budget"),
    ),
)


def _scale_model():
    return widgets.ScaleModel(
        model="llama3-8b", system="trn2.48xlarge", tp=8, pp=1, global_batch=256
    )


model_target(
    "trnlab.widgets.ScaleModel",
    _scale_model,
    lambda m: [m.result, m.memory_stack(), m.step_breakdown(), m.compare_chips(), m.summary()],
    **scale_settings,
)
view_targets(
    "trnlab.widgets.ScaleExplorer",
    lambda: widgets.ScaleExplorer(
        model="llama3-8b", system="trn2.48xlarge", tp=8, pp=1, global_batch=256
    ),
    scale_settings,
)

# CollectiveExplorer / CollectiveModel

collective_settings = dict(
    system=F.name(MULTI, ("system",)),
    parts=F.choice([1, 2, 4], [0, 3, -1, 1.5, True, None], ("parts",)),
    op=op_arg,
    algorithm=Arg(
        st.sampled_from(["auto", "AUTO"]),
        st.sampled_from(["rign", None, 5, "warp"]),
        ("algorithm",),
        F.canonical_name,
    ),
    nbytes=F.choice(
        [2**10, 2**20, 2**30],
        [0, 1000, -1024, 2**20 + 0.5, float(2**20), True, None, 2**40],
        ("nbytes", "size"),
    ),
    ring_chips=F.choice([2, 4, 8], [1, 9, 0, 2.5, True, None], ("ring_chips", "chips")),
    step=F.choice([0, 1, 2], [-1, 99, 1.5, None, "1"], ("step",)),
)
model_target(
    "trnlab.widgets.CollectiveModel",
    widgets.CollectiveModel,
    lambda m: [
        m.sweep(),
        m.regimes(),
        m.result(),
        m.drawing(),
        m.ring_hop(),
        m.animation(),
        m.all_to_all(),
        m.summary(),
        m.animation_summary(),
        m.all_to_all_summary(),
    ],
    **collective_settings,
)
view_targets("trnlab.widgets.CollectiveExplorer", widgets.CollectiveExplorer, collective_settings)

# DashboardTabs (the classroom app): the tab list, and opening a tab by its title
_chips_view = cache(lambda: widgets.ChipExplorer(metric="peak.fp8"))
target(
    "trnlab.widgets.DashboardTabs",
    lambda pages: widgets.DashboardTabs(pages).attached(),
    examples=8,
    pages=Arg(
        st.just(None).map(lambda _: [("Chips", "One figure per generation.", _chips_view())]),
        st.sampled_from(
            [
                [],
                "Chips",
                None,
                [("Chips", "x")],
                [("", "x", None)],
                [("Chips", 3, None)],
                [("Chips", "x", "ChipExplorer")],
                [(None, "x", None)],
                5,
            ]
        )
        | st.just(None).map(
            lambda _: [("Chips", "a", _chips_view()), ("chips", "b", _chips_view())]
        ),
        ("pages", "tab", "tabs", "title", "dashboard"),
    ),
)


def _tabs():
    return widgets.DashboardTabs(
        [("Chips", "a", _chips_view()), ("More chips", "b", _chips_view())]
    )


target(
    "trnlab.widgets.DashboardTabs.open",
    lambda title: _tabs().open(title).model.metric,
    examples=8,
    title=F.name(["Chips", "More chips"], ("tab",)),
)


def _nki_simulate_kernel(rows, cols, kernel):
    x = np.linspace(-1, 1, rows * cols, dtype=np.float32).reshape(rows, cols)
    return nki.simulate_kernel(kernel, x)


target(
    "trnlab.nki.simulate_kernel",
    _nki_simulate_kernel,
    nan_ok=True,
    rows=never_bad(st.integers(1, 300)),
    cols=never_bad(st.integers(1, 600)),
    kernel=nki_kernel_arg,
)
