"""nisa.scalar_tensor_tensor: (data <op0> operand0) <op1> operand1 on the Vector engine, checked
against numpy, its operand rules, and its cost (NKI's reference: about one tensor_tensor)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab.core import KernelArgumentError, OperandPlacementError

RNG = np.random.default_rng(7)
OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def _stt(p, f, op0, op1, rev0, rev1, tile_scalar):
    def k(x, y, col):
        tx, ty = nl.load(x), nl.load(y)
        o = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        operand0 = nl.load(col) if tile_scalar else 0.75
        nisa.scalar_tensor_tensor(
            dst=o, data=tx, op0=getattr(nl, op0), operand0=operand0, op1=getattr(nl, op1),
            operand1=ty, reverse0=rev0, reverse1=rev1,
        )  # fmt: skip
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    return k


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=st.integers(1, 128),
    f=st.integers(1, 200),
    op0=st.sampled_from(sorted(OPS)),
    op1=st.sampled_from(sorted(OPS)),
    rev0=st.booleans(),
    rev1=st.booleans(),
    tile_scalar=st.booleans(),
    chip=st.sampled_from(["trn1", "trn2", "trn3"]),
)
def test_matches_numpy_for_every_operator_order_and_operand_kind(
    p, f, op0, op1, rev0, rev1, tile_scalar, chip
):
    a = RNG.uniform(-4, 4, (p, f)).astype(np.float32)
    b = RNG.uniform(-4, 4, (p, f)).astype(np.float32)
    s = RNG.uniform(0.5, 2, (p, 1)).astype(np.float32)
    got = nki.simulate(_stt(p, f, op0, op1, rev0, rev1, tile_scalar), chip=chip)(a, b, s)
    o = s if tile_scalar else np.float32(0.75)
    t = OPS[op0](o, a) if rev0 else OPS[op0](a, o)
    want = OPS[op1](b, t) if rev1 else OPS[op1](t, b)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_older_keyword_form_returns_a_tile_of_the_requested_dtype():
    a = RNG.uniform(-2, 2, (64, 96)).astype(np.float32)
    b = RNG.uniform(-2, 2, (64, 96)).astype(np.float32)

    def k(x, y):
        t = nisa.scalar_tensor_tensor(
            data=nl.load(x), op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=nl.load(y),
            dtype=nl.bfloat16,
        )  # fmt: skip
        assert t.dtype == "bfloat16"
        out = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    got = nki.simulate(k, chip="trn1")(a, b)
    np.testing.assert_allclose(got, 2 * a + b, rtol=2**-7)  # rounded to bfloat16
    assert not np.array_equal(got, 2 * a + b)  # ... and the rounding happened


def test_costs_one_tensor_tensor_not_a_tensor_scalar_and_a_tensor_tensor():
    """NKI: the broadcast stage is free, so the instruction lasts about one tensor_tensor."""
    a = RNG.uniform(-2, 2, (128, 2048)).astype(np.float32)
    b = RNG.uniform(-2, 2, (128, 2048)).astype(np.float32)

    def fused(x, y):
        tx, ty = nl.load(x), nl.load(y)
        o = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o, data=tx, op0=nl.multiply, operand0=3.0, op1=nl.add,
                                  operand1=ty)  # fmt: skip
        out = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    def plain(x, y):
        tx, ty = nl.load(x), nl.load(y)
        o = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=tx, data2=ty, op=nl.add)
        out = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    def two_step(x, y):
        tx, ty = nl.load(x), nl.load(y)
        t = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=t, data=tx, op0=nl.multiply, operand0=3.0)
        o = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=t, data2=ty, op=nl.add)
        out = nl.ndarray(tx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    runs = {f.__name__: nki.profile(f, chip="trn2")(a, b) for f in (fused, plain, two_step)}
    busy = {k: r.busy["Vector"] for k, r in runs.items()}
    assert busy["fused"] == pytest.approx(busy["plain"])
    assert busy["fused"] < 0.8 * busy["two_step"]


def test_operand_rules_are_refused_with_the_rule():
    a = np.ones((32, 16), np.float32)

    def both_psum(x):
        ps1 = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.psum)
        ps2 = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=ps1, value=1.0)
        nisa.memset(dst=ps2, value=2.0)
        o = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o, data=ps1, op0=nl.add, operand0=1.0, op1=nl.add,
                                  operand1=ps2)  # fmt: skip

    with pytest.raises(OperandPlacementError, match="both in PSUM"):
        nki.simulate(both_psum, chip="trn2")(a)

    def bitvec(x):
        t = nl.load(x)
        o = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o, data=t, op0=nl.bitwise_and, operand0=1.0, op1=nl.add,
                                  operand1=t)  # fmt: skip

    with pytest.raises(KernelArgumentError, match="op0 must be an arithmetic operator"):
        nki.simulate(bitvec, chip="trn2")(a)

    def wide_scalar(x):
        t = nl.load(x)
        o = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o, data=t, op0=nl.add, operand0=t[:, 0:2], op1=nl.add,
                                  operand1=t)  # fmt: skip

    with pytest.raises(Exception, match=r"\[32, 1\] tile"):
        nki.simulate(wide_scalar, chip="trn2")(a)

    def missing(x):
        t = nl.load(x)
        nisa.scalar_tensor_tensor(data=t, op0=nl.add, operand0=1.0, op1=nl.add)

    with pytest.raises(KernelArgumentError, match="needs data, op0, operand0, op1 and operand1"):
        nki.simulate(missing, chip="trn2")(a)


def test_neuroncore_v2_takes_its_own_cost_table():
    """SDK 2.26's ISA reference: N Vector cycles for bf16 data and operand1 with subtract then
    multiply (N even), 2N otherwise (a tensor_tensor of bf16 SBUF tiles costs N)."""
    a = np.ones((128, 1024), np.float32)

    def k(op0, op1, dtype):
        def f(x, y):
            tx = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
            ty = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tx, src=x)
            nisa.dma_copy(dst=ty, src=y)
            o = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=o, data=tx, op0=op0, operand0=1.0, op1=op1,
                                      operand1=ty)  # fmt: skip

        return f

    def vector(f):
        run = nki.profile(f, chip="trn1")(a, a)
        return run.busy["Vector"] * run.latency

    fast = vector(k(nl.subtract, nl.multiply, nl.bfloat16))
    slow = vector(k(nl.multiply, nl.add, nl.bfloat16))
    also_slow = vector(k(nl.subtract, nl.multiply, nl.float32))
    assert slow == pytest.approx(also_slow)
    assert 1.8 < slow / fast < 2.0  # 2N against N cycles, the fixed cost aside


def test_logical_operators_are_arithmetic_in_nkis_table():
    a = np.array([[0.0, 1.0, 2.0, 0.0]], np.float32)
    b = np.array([[1.0, 1.0, 0.0, 0.0]], np.float32)

    def k(x, y):
        tx, ty = nl.load(x), nl.load(y)
        o = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o, data=tx, op0=nl.multiply, operand0=1.0,
                                  op1=nl.logical_and, operand1=ty)  # fmt: skip
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    np.testing.assert_array_equal(nki.simulate(k, chip="trn2")(a, b), [[0.0, 1.0, 0.0, 0.0]])
