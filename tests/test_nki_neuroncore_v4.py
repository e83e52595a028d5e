"""NeuronCore-v4's exponential (Vector) and activate2 (Scalar): values against numpy, their
accumulators across calls, their rules, and what they are charged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from tests.nki_helpers import store_all
from trnlab.core import HardwareRuleError, KernelArgumentError
from trnlab.nki._isa_neuroncore_v4 import ACTIVATE2_PAIRS

RNG = np.random.default_rng(5)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CMD = nisa.reduce_cmd
NP_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}
ACTS = {
    "exp": np.exp,
    "tanh": np.tanh,
    "gelu": np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))),
    "identity": lambda x: x,
}


def _col(p):
    return nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 200), tile_max=st.booleans())
def test_exponential_shifts_exponentiates_and_sums(p, f, tile_max):
    x = RNG.uniform(-6, 6, (p, f)).astype(np.float32)
    m = RNG.uniform(-2, 2, (p, 1)).astype(np.float32)

    def k(a, b):
        src = nl.load(a)
        e = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        s = _col(p)
        nisa.exponential(dst=e, src=src, max_value=nl.load(b) if tile_max else 1.5,
                         reduce_res=s, reduce_cmd=CMD.reset_reduce)  # fmt: skip
        return store_all(e, s)

    e, s = nki.simulate(k, chip="trn3")(x, m)
    want = np.exp(x - (m if tile_max else np.float32(1.5)))
    np.testing.assert_allclose(e, want, rtol=1e-6)
    np.testing.assert_allclose(s[:, 0], want.sum(axis=1), rtol=1e-5)


def test_exponential_carries_loads_and_forgets_its_accumulators():
    x = RNG.uniform(-3, 3, (16, 64)).astype(np.float32)
    init = RNG.uniform(0, 5, (16, 1)).astype(np.float32)

    def chained(a, b):
        src = nl.load(a)
        e1 = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        e2 = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        s = _col(16)
        nisa.exponential(dst=e1, src=src[:, 0:32], reduce_cmd=CMD.load_reduce,
                         reduce_init=nl.load(b))  # fmt: skip
        nisa.exponential(dst=e2, src=src[:, 32:64], reduce_cmd=CMD.reduce, reduce_res=s)
        return store_all(s)

    (s,) = nki.simulate(chained, chip="trn3")(x, init)
    np.testing.assert_allclose(s[:, 0], init[:, 0] + np.exp(x).sum(axis=1), rtol=1e-5)

    def after_idle(a):
        src = nl.load(a)
        e = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=e, src=src, reduce_cmd=CMD.reset_reduce)
        nisa.exponential(dst=e, src=src)  # idle: "accumulator state unknown"
        nisa.exponential(dst=e, src=src, reduce_cmd=CMD.reduce, reduce_res=_col(16))

    with pytest.raises(KernelArgumentError, match="no instruction of this kernel has set them"):
        nki.simulate(after_idle, chip="trn3")(x)

    def stray_init(a):
        src = nl.load(a)
        e = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=e, src=src, reduce_cmd=CMD.reset_reduce, reduce_init=2.0)

    with pytest.raises(KernelArgumentError, match="reduce_init is read only with"):
        nki.simulate(stray_init, chip="trn3")(x)


@FAST
@given(
    pair=st.sampled_from(ACTIVATE2_PAIRS),
    rev0=st.booleans(),
    rev1=st.booleans(),
    act=st.sampled_from(sorted(ACTS)),
    tiles=st.booleans(),
)
def test_activate2_runs_every_operator_pair_then_the_function(pair, rev0, rev1, act, tiles):
    n0, n1 = pair
    rev0, rev1 = rev0 and n0 != "bypass", rev1 and n1 != "bypass"
    x = RNG.uniform(-2, 2, (32, 48)).astype(np.float32)
    i0 = RNG.uniform(0.5, 1.5, (32, 1)).astype(np.float32)
    i1 = RNG.uniform(-1, 1, (32, 1)).astype(np.float32)

    def k(a, b, c):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(
            dst=o, op=getattr(nl, act), data=d,
            imm0=nl.load(b) if tiles else 1.25, imm1=nl.load(c) if tiles else -0.5,
            op0=getattr(nl, n0), op1=getattr(nl, n1), reverse0=rev0, reverse1=rev1,
        )  # fmt: skip
        return store_all(o)

    (got,) = nki.simulate(k, chip="trn3")(x, i0, i1)
    v = x
    for name, imm, rev in ((n0, i0 if tiles else 1.25, rev0), (n1, i1 if tiles else -0.5, rev1)):
        if name != "bypass":
            v = NP_OPS[name](imm, v) if rev else NP_OPS[name](v, imm)
    np.testing.assert_allclose(got, ACTS[act](v.astype(np.float32)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    ("fold", "ref"),
    [
        ("add", np.sum),
        ("maximum", np.max),
        ("minimum", np.min),
        ("abs_max", lambda x, axis: np.abs(x).max(axis=axis)),
        ("abs_min", lambda x, axis: np.abs(x).min(axis=axis)),
    ],
)
def test_activate2_folds_into_the_scalar_accumulators_across_calls(fold, ref):
    x = np.random.default_rng(11).uniform(-3, 3, (8, 40)).astype(np.float32)

    def k(a):
        d = nl.load(a)
        o1 = nl.ndarray((8, 20), dtype=nl.float32, buffer=nl.sbuf)
        o2 = nl.ndarray((8, 20), dtype=nl.float32, buffer=nl.sbuf)
        res = _col(8)
        nisa.activate2(dst=o1, op=nl.identity, data=d[:, 0:20], imm0=None, imm1=None,
                       op0=nl.bypass, op1=nl.bypass, reduce_op=getattr(nl, fold),
                       reduce_cmd=CMD.reset_reduce)  # fmt: skip
        nisa.activate2(dst=o2, op=nl.identity, data=d[:, 20:40], imm0=None, imm1=None,
                       op0=nl.bypass, op1=nl.bypass, reduce_op=getattr(nl, fold),
                       reduce_cmd=CMD.reduce, reduce_res=res)  # fmt: skip
        return store_all(res)

    (res,) = nki.simulate(k, chip="trn3")(x)
    # a sum of 40 fp32 values (in two calls) may land near 0, where a relative tolerance alone
    # fails: allow fp32's worst-case rounding of the sum too
    slack = 40 * float(np.finfo(np.float32).eps) * float(np.abs(x).sum(axis=1).max())
    np.testing.assert_allclose(res[:, 0], ref(x, axis=1), rtol=1e-5, atol=slack)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"op0": "add", "op1": "add"}, HardwareRuleError, r"\(add, add\)"),
        ({"op0": "bypass", "op1": "bypass", "reverse0": True}, KernelArgumentError,
         "reverse0 needs its operator set"),
        ({"op0": "multiply", "op1": "bypass", "imm0": None}, KernelArgumentError,
         "imm0 is needed by its operator multiply"),
        ({"op0": "bypass", "op1": "bypass", "relu_param": 0.1}, Exception, "relu_param"),
        ({"op0": "bypass", "op1": "bypass", "reduce_cmd": CMD.reset_reduce}, KernelArgumentError,
         "needs a reduce_op"),
    ],
)  # fmt: skip
def test_activate2_refuses_what_its_reference_rules_out(kwargs, error, match):
    x = np.ones((4, 8), np.float32)
    kw = {"imm0": 2.0, "imm1": 1.0, **kwargs}
    kw["op0"], kw["op1"] = getattr(nl, kw["op0"]), getattr(nl, kw["op1"])

    def k(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=o, op=nl.exp, data=d, **kw)

    with pytest.raises(error, match=match):
        nki.simulate(k, chip="trn3")(x)


def test_both_are_neuroncore_v4_instructions_and_say_what_to_write_instead():
    x = np.ones((4, 8), np.float32)

    def exp_kernel(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=o, src=d)

    def act_kernel(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=o, op=nl.exp, data=d, imm0=2.0, imm1=None, op0=nl.multiply,
                       op1=nl.bypass)  # fmt: skip

    with pytest.raises(HardwareRuleError, match=r"NeuronCore-v4.*nisa.activation\(op=nl.exp"):
        nki.simulate(exp_kernel, chip="trn2")(x)
    with pytest.raises(HardwareRuleError, match=r"nisa\.tensor_scalar for the operators"):
        nki.simulate(act_kernel, chip="trn1")(x)


def test_each_is_charged_as_the_one_instruction_it_replaces():
    """exponential costs one one-input Vector pass (a tensor_scalar's), activate2 one
    activation: the fused stages cost nothing extra (assumptions: no cost is published)."""
    x = np.ones((128, 4096), np.float32)

    def exp_fused(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=o, src=d, max_value=1.0)

    def exp_plain(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=d, op0=nl.subtract, operand0=1.0)

    def act_fused(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=o, op=nl.tanh, data=d, imm0=2.0, imm1=1.0, op0=nl.multiply,
                       op1=nl.add)  # fmt: skip

    def act_plain(a):
        d = nl.load(a)
        o = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=o, op=nl.tanh, data=d, scale=2.0)

    def busy(k, engine):
        run = nki.profile(k, chip="trn3")(x)
        return run.busy[engine] * run.latency

    assert busy(exp_fused, "Vector") == pytest.approx(busy(exp_plain, "Vector"))
    assert busy(act_fused, "Scalar") == pytest.approx(busy(act_plain, "Scalar"))
