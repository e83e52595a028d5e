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
def _repeat_in_loop(a, b, n=4, change=False, load_again=False):
    """``n`` iterations each computing ``a * b`` into a new tile and adding it to an
    accumulator; ``change``: ``a`` is updated in place between iterations; ``load_again``: ``b``
    is loaded again in every iteration."""
    out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    acc = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.affine_range(n):
        if load_again:
            tb = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tb, src=b)
        prod = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=ta, data2=tb, op=nl.multiply)
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


# --- what the review found: memory, views, lifetimes, forgotten operands -----------------------
W = 4096


@nki.jit
def _kept_results_overflow_sbuf(x):
    """16 activations repeated in a second pass: keeping all 16 results (16 KiB per partition
    each) would overflow SBUF, where recomputing needs two rotating buffers."""
    out = nl.ndarray((P, W), dtype=nl.float32, buffer=nl.shared_hbm)
    tx = nl.ndarray((P, W), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tx, src=x)
    acc = nl.ndarray((P, W), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.affine_range(2):
        for j in nl.affine_range(16):
            e = nl.ndarray((P, W), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=e, op=nl.exp, data=tx, scale=j / 16)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=e, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def _repeated_matmuls(x, y, n=9):
    """``n`` matmuls into new PSUM tiles, repeated in a second pass: keeping their ``n`` banks
    for the second pass overflows PSUM (8 banks) with ``n`` = 9, not with 4."""
    out = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    tx = nl.load(x)
    ty = nl.ndarray((P, n * 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=ty, src=y)
    acc = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.affine_range(2):
        for j in nl.affine_range(n):
            p = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=tx, moving=ty[:, j * 512 : (j + 1) * 512])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=p, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_results_that_would_not_fit_are_recomputed_and_the_kernel_still_runs():
    x = RNG.uniform(-1, 1, (P, W)).astype(np.float32)
    on = _profile(_kept_results_overflow_sbuf, x)
    off = _profile(_kept_results_overflow_sbuf, x, cse=False)
    assert on.extra["nki"]["repeats_dropped"] == 0
    assert on.latency == off.latency
    expect = 2 * sum(np.exp(x * (j / 16)) for j in range(16))
    np.testing.assert_allclose(on.outputs["out"], expect, rtol=1e-4)
    np.testing.assert_allclose(nki.simulate(_kept_results_overflow_sbuf, chip="trn1")(x), expect,
                               rtol=1e-4)  # fmt: skip
    for n, dropped in ((9, 0), (4, 4)):  # 4 kept banks fit: the second pass is dropped
        args = (nki.hbm((P, P), nl.bfloat16), nki.hbm((P, n * 512), nl.bfloat16))
        assert _profile(_repeated_matmuls, *args, n=n).extra["nki"]["repeats_dropped"] == dropped


def test_views_of_the_same_region_in_another_order_are_not_repeats():
    @nki.jit
    def permuted(a, b):
        out = nl.ndarray((P, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        ta = nl.ndarray((P, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        tb = nl.ndarray((P, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tb, src=b)
        o1 = nl.ndarray((P, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o1, data1=ta, data2=tb, op=nl.multiply)
        o2 = nl.ndarray((P, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o2, data1=ta.permute((0, 2, 1)), data2=tb, op=nl.multiply)
        r = nisa.tensor_tensor(o1, o2, op=nl.subtract)
        nl.store(out, r)
        return out

    a = RNG.uniform(0, 1, (P, 4, 8)).astype(np.float32)
    b = RNG.uniform(0, 1, (P, 4, 8)).astype(np.float32)
    run = _profile(permuted, a, b)
    assert run.extra["nki"]["repeats_dropped"] == 0
    expect = (a * b).reshape(P, 32) - (a.transpose(0, 2, 1).reshape(P, 4, 8) * b).reshape(P, 32)
    np.testing.assert_allclose(run.outputs["out"], expect, rtol=1e-6, atol=1e-6)


def test_a_drop_keeps_the_span_of_tiles_outside_the_operands(monkeypatch):
    """An MX matmul reads its scale tiles without naming them among its operands; after a drop
    elsewhere in the kernel they must still live until the matmul."""
    import trnlab.nki._alloc as alloc

    spans = {}
    real = alloc.drop_repeats

    def spy(trace):
        n = real(trace)
        assert n[0] == 1  # (dropped, what restores the trace)
        mm = max(i for i, op in enumerate(trace.ops) if op[0] == "matmul")
        spans.update({s.name: (s.first, s.last, mm) for s in trace.on_chip})
        return n

    monkeypatch.setattr(alloc, "drop_repeats", spy)
    k, m, n = 32, 16, 64

    @nki.jit
    def mx(s, mv, ss, ms, x):
        ts = nl.ndarray((k, m), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=ts, src=s)
        tm = nl.ndarray((k, n), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=tm, src=mv)
        sscale = nl.ndarray((k // 8, m), dtype=nl.uint8, buffer=nl.sbuf, name="sscale")
        nisa.dma_copy(dst=sscale, src=ss)
        mscale = nl.ndarray((k // 8, n), dtype=nl.uint8, buffer=nl.sbuf, name="mscale")
        nisa.dma_copy(dst=mscale, src=ms)
        tx = nl.load(x)
        y1 = nisa.tensor_scalar(tx, op0=nl.multiply, operand0=2.0)
        y2 = nisa.tensor_scalar(tx, op0=nl.multiply, operand0=2.0)  # a repeat of y1
        y3 = nisa.tensor_tensor(y1, y2, op=nl.add)
        ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=ps, stationary=ts, moving=tm, stationary_scale=sscale,
                          moving_scale=mscale)  # fmt: skip
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, ps)
        o2 = nl.ndarray((k, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o2, y3)
        return out, o2

    run = nki.profile(mx, chip="trn3")(
        nki.hbm((k, m), nl.float8_e4m3fn_x4), nki.hbm((k, n), nl.float8_e4m3fn_x4),
        nki.hbm((k // 8, m), nl.uint8), nki.hbm((k // 8, n), nl.uint8),
        nki.hbm((k, 64), nl.float32),
    )  # fmt: skip
    assert run.extra["nki"]["repeats_dropped"] == 1
    for name in ("sscale", "mscale"):
        first, last, matmul = spans[name]
        assert first < matmul <= last


@pytest.mark.parametrize("call", ["tensor_tensor", "tensor_scalar"])
def test_an_older_form_call_that_forgot_its_input_is_told_so(call):
    def k(a):
        ta = nl.load(a)
        o = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
        if call == "tensor_tensor":
            nisa.tensor_tensor(dst=o, data1=ta, op=nl.add)  # data2 forgotten
        else:
            nisa.tensor_scalar(dst=o, op0=nl.add, operand0=1.0)  # data forgotten
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    missing = "data2" if call == "tensor_tensor" else "data"
    with pytest.raises(core.KernelArgumentError, match=rf"{call}: {missing} is missing"):
        nki.simulate(k, chip="trn2")(_ab()[0])
