"""The compiler computes an instruction that repeats an earlier one once (trnlab.nki._reuse):
what it drops and what it must keep, values unchanged, and the Mamba kernel whose Trn1 profile
shows it (delta x u, the same for every state, computed once per channel tile)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core
from trnlab.kernels import nki_selective_scan, selective_scan_reference

RNG = np.random.default_rng(7)
P, F = 128, 256


def _params(chip="trn1", cse=True):
    return core.core_params(chip, compiler_cse=cse)


def _profile(kernel, *arrays, cse=True, chip="trn1", **kw):
    return nki.profile(kernel, chip=_params(chip, cse))(*arrays, **kw)


def _vector_count(run) -> int:
    return int(np.sum(run.program.table["engine"] == 1))


@nki.jit
def _repeat_in_loop(a, b, n=4, op="multiply", change=False, load_again=False):
    """``n`` iterations each computing ``a <op> b`` into a new tile and adding it to an
    accumulator; ``change``: ``a`` is updated in place between iterations; ``load_again``: ``b``
    is loaded again in every iteration."""
    out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    acc = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    alu = nl.multiply if op == "multiply" else nl.add
    for _ in nl.affine_range(n):
        if load_again:
            tb = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tb, src=b)
        prod = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=ta, data2=tb, op=alu)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=prod, op=nl.add)
        if change:
            nisa.tensor_scalar(dst=ta, data=ta, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=acc)
    return out


def _ab():
    return RNG.uniform(-2, 2, (P, F)).astype(np.float32), RNG.uniform(-2, 2, (P, F)).astype(
        np.float32
    )


def test_a_repeated_instruction_is_computed_once_and_its_readers_wait_for_it():
    a, b = _ab()
    on = _profile(_repeat_in_loop, a, b)
    off = _profile(_repeat_in_loop, a, b, cse=False)
    assert on.extra["nki"]["repeats_dropped"] == 3
    assert off.extra["nki"]["repeats_dropped"] == 0
    assert _vector_count(off) - _vector_count(on) == 3
    assert on.latency < off.latency
    # values: the trace computes every instruction; dropping a repeat changes only the timeline
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])
    np.testing.assert_allclose(on.outputs["out"], 4 * a * b, rtol=1e-6)
    assert "3 of the kernel's instructions repeat an earlier one" in on.summary()
    assert "repeat an earlier one" not in off.summary()
    # every accumulation still reads the one product (a dependency on its instruction)
    prods = [i for i, api in enumerate(on.extra["nki"]["instructions"]) if api == "tensor_tensor"]
    first = prods[0]
    for i in prods[1:]:
        assert on.start[i] >= on.end[first]


def test_nothing_is_dropped_when_an_input_changes_between_the_repeats():
    a, b = _ab()
    run = _profile(_repeat_in_loop, a, b, change=True)
    assert run.extra["nki"]["repeats_dropped"] == 0
    expect = sum((a + k) * b for k in range(4))
    np.testing.assert_allclose(run.outputs["out"], expect, rtol=1e-5, atol=1e-5)


def test_loads_are_never_dropped_and_a_reloaded_input_is_a_new_input():
    a, b = _ab()
    run = _profile(_repeat_in_loop, a, b, load_again=True)
    assert run.extra["nki"]["repeats_dropped"] == 0  # each product reads a different load
    loads = run.extra["nki"]["instructions"].count("dma_copy")
    assert loads == 2 + 4 + 1  # a, b, b again per iteration, the store


def test_different_operations_on_the_same_inputs_are_both_kept():
    @nki.jit
    def two_ops(a, b):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        ta = nl.load(a)
        tb = nl.load(b)
        m = nisa.tensor_tensor(ta, tb, op=nl.multiply)
        s = nisa.tensor_tensor(ta, tb, op=nl.add)
        s2 = nisa.tensor_scalar(ta, op0=nl.multiply, operand0=2.0)
        s3 = nisa.tensor_scalar(ta, op0=nl.multiply, operand0=3.0)
        e1 = nisa.activation(op=nl.exp, data=ta, scale=0.5)
        e2 = nisa.activation(op=nl.exp, data=ta, scale=0.25)
        r = nisa.tensor_tensor(m, s, op=nl.add)
        r = nisa.tensor_tensor(r, s2, op=nl.add)
        r = nisa.tensor_tensor(r, s3, op=nl.add)
        r = nisa.tensor_tensor(r, e1, op=nl.add)
        r = nisa.tensor_tensor(r, e2, op=nl.add)
        nl.store(out, r)
        return out

    a, b = _ab()
    run = _profile(two_ops, a, b)
    assert run.extra["nki"]["repeats_dropped"] == 0
    expect = a * b + (a + b) + 5 * a + np.exp(0.5 * a) + np.exp(0.25 * a)
    np.testing.assert_allclose(run.outputs["out"], expect, rtol=1e-5, atol=1e-5)


def test_memsets_and_accumulating_matmuls_are_not_repeats():
    @nki.jit
    def acc_twice(x):
        out = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        ps = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=False)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=True)
        z1 = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z1, value=1.0)
        z2 = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z2, value=1.0)
        r = nisa.tensor_copy(ps)
        r = nisa.tensor_tensor(r, z1, op=nl.add)
        r = nisa.tensor_tensor(r, z2, op=nl.add)
        nl.store(out, r)
        return out

    x = RNG.uniform(-1, 1, (P, P)).astype(np.float32)
    run = _profile(acc_twice, x, chip="trn2")
    assert run.extra["nki"]["repeats_dropped"] == 0
    np.testing.assert_allclose(run.outputs["out"], 2 * (x.T @ x) + 2, rtol=1e-4, atol=1e-4)


def test_repeated_matmuls_into_new_psum_tiles_are_computed_once():
    @nki.jit
    def gram_twice(x):
        out = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        p1 = nisa.nc_matmul(t, t)
        p2 = nisa.nc_matmul(t, t)
        r = nisa.tensor_tensor(p1, nisa.tensor_copy(p2), op=nl.add)
        nl.store(out, r)
        return out

    x = RNG.uniform(-1, 1, (P, P)).astype(np.float32)
    run = _profile(gram_twice, x, chip="trn2")
    assert run.extra["nki"]["repeats_dropped"] == 1
    assert run.extra["nki"]["instructions"].count("nc_matmul") == 1
    np.testing.assert_allclose(run.outputs["out"], 2 * (x.T @ x), rtol=1e-4, atol=1e-4)


# A program is a list of steps over two SBUF tiles a and b: a product or sum of them into a new
# tile, a scaled copy of a into a new tile, or an in-place update of a. The rule: a step that
# creates a tile repeats an earlier one when its operation and both inputs (with the writes
# made to them so far) are the same.
STEPS = st.lists(st.sampled_from(["mul", "add", "scale2", "scale3", "bump_a"]), min_size=1,
                 max_size=12)  # fmt: skip


def _expected_repeats(steps) -> int:
    seen, version, n = set(), 0, 0
    for s in steps:
        if s == "bump_a":
            version += 1
            continue
        key = (s, version)
        n += key in seen
        seen.add(key)
    return n


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_the_repeats_dropped_are_exactly_those_of_the_rule_and_values_never_change(steps):
    @nki.jit
    def prog(a, b):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        acc = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for s in steps:
            if s == "bump_a":
                nisa.tensor_scalar(dst=ta, data=ta, op0=nl.add, operand0=0.5)
                continue
            if s in ("mul", "add"):
                r = nisa.tensor_tensor(ta, tb, op=nl.multiply if s == "mul" else nl.add)
            else:
                r = nisa.tensor_scalar(ta, op0=nl.multiply, operand0=2.0 if s == "scale2" else 3.0)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=r, op=nl.add)
        nl.store(out, acc)
        return out

    a, b = _ab()
    on = _profile(prog, a, b, chip="trn2")
    off = _profile(prog, a, b, chip="trn2", cse=False)
    assert on.extra["nki"]["repeats_dropped"] == _expected_repeats(steps)
    assert len(off.program) - len(on.program) == _expected_repeats(steps)
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])


def test_mamba_v2_the_compiler_hoists_delta_times_u_as_a_kernel_engineer_would():
    """The Trn1 profile's reading: with the repeat dropped, mamba_v2 takes what the hand-hoisted
    kernel takes; without it, one more Vector instruction per (channel tile, state)."""
    c, t, s = 256, 512, 16
    args = [nki.hbm((c, t), nl.float32), nki.hbm((c, t), nl.float32),
            nki.hbm((c, s), nl.float32), nki.hbm((s, t), nl.float32),
            nki.hbm((s, t), nl.float32)]  # fmt: skip
    on = _profile(nki_selective_scan, *args, version="v2")
    off = _profile(nki_selective_scan, *args, version="v2", cse=False)
    hoisted = _profile(nki_selective_scan, *args, version="v2", hoist=True, cse=False)
    assert on.extra["nki"]["repeats_dropped"] == (c // 128) * (s - 1)
    assert _vector_count(off) - _vector_count(on) == (c // 128) * (s - 1)
    assert on.latency == pytest.approx(hoisted.latency, rel=0.02)
    assert on.latency < 0.85 * off.latency


def test_mamba_values_are_the_reference_with_the_repeats_dropped():
    c, t, s = 128, 64, 4
    delta = RNG.uniform(0.01, 0.2, (c, t)).astype(np.float32)
    u = RNG.uniform(-1, 1, (c, t)).astype(np.float32)
    a = -RNG.uniform(0.5, 2, (c, s)).astype(np.float32)
    b = RNG.uniform(-1, 1, (s, t)).astype(np.float32)
    cc = RNG.uniform(-1, 1, (s, t)).astype(np.float32)
    for version in ("v2", "v3"):
        run = _profile(nki_selective_scan, delta, u, a, b, cc, version=version, chunk=32)
        assert run.extra["nki"]["repeats_dropped"] > 0
        got = next(iter(run.outputs.values()))
        np.testing.assert_allclose(got, selective_scan_reference(delta, u, a, b, cc), rtol=2e-4,
                                   atol=2e-4)  # fmt: skip


@pytest.mark.parametrize("bad", ["yes", 1, 0, None, float("nan")])
def test_compiler_cse_override_must_be_a_boolean(bad):
    with pytest.raises(core.KernelArgumentError, match=r"compiler_cse.*True or False"):
        core.core_params("trn1", compiler_cse=bad)
