"""NKI 0.6 instruction handles: what nki.isa calls return, and NkiInstruction.depends_on's
edges on the timeline (and through the grader's record and replay)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trnlab.nki as nki
import trnlab.nki.isa as nisa
import trnlab.nki.language as nl
from trnlab import core
from trnlab.core import KernelArgumentError
from trnlab.course import answers as A
from trnlab.exercises import lab05
from trnlab.nki._trace import current

A_ = np.ones((128, 2048), np.float32)


def _two_loads_and_add(chain: str):
    """Two independent loads on separate queues, then an add; ``chain`` says which edges."""

    def k(a, b):
        ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=ta, src=a)
        second = nisa.dma_copy(dst=tb, src=b)
        o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        add = nisa.tensor_tensor(dst=o, data1=ta, data2=tb, op=nl.add)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        store = nisa.dma_copy(dst=out, src=o)
        if chain == "loads":
            assert second.depends_on(first) is second
        elif chain == "both":
            store.depends_on(add, first)
        elif chain == "chained":
            store.depends_on(add).depends_on(first)
        return out

    return k


def _profile(chain):
    return nki.profile(_two_loads_and_add(chain), chip="trn2")(A_, A_)


def test_isa_calls_return_handles_and_older_forms_still_return_tiles():
    seen = {}

    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        seen["copy"] = nisa.dma_copy(dst=t, src=a)
        seen["older"] = nisa.tensor_scalar(t, op0=nl.multiply, operand0=2.0)
        o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        seen["reduce"] = nisa.tensor_scalar_reduce(  # calls tensor_scalar inside
            dst=o, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add,
            reduce_res=nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf),
        )  # fmt: skip
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    got = nki.simulate(k, chip="trn2")(np.full((4, 8), 3.0, np.float32))
    np.testing.assert_array_equal(got, np.full((4, 8), 4.0))
    assert isinstance(seen["copy"], nisa.NkiInstruction)
    assert "dma_copy" in repr(seen["copy"])
    assert type(seen["older"]).__name__ == "NkiTensor"
    assert isinstance(seen["reduce"], nisa.NkiInstruction)


def test_an_edge_holds_the_consumer_until_the_producer_completes():
    free, held = _profile("none"), _profile("loads")
    # without the edge the second load starts at once on its own queue
    assert free.start[1] < free.end[0]
    # with it, it starts when the first has completed, and the kernel takes longer
    assert held.start[1] >= held.end[0]
    assert held.latency > free.latency
    np.testing.assert_allclose(held.end[0], free.end[0])  # the producer is not moved


def test_an_edge_between_two_matmuls_waits_for_the_first_to_complete():
    """Memory order lets a matmul follow the one before it as soon as that one has issued (the
    Tensor Engine's pipeline); a semaphore the kernel asks for fires only when it completes."""

    def k(a, edge):
        t = nl.load(a[:, 0:128])
        m1, m2 = nl.load(a[:, 0:512]), nl.load(a[:, 512:1024])
        p1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        p2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        first = nisa.nc_matmul(dst=p1, stationary=t, moving=m1)
        second = nisa.nc_matmul(dst=p2, stationary=t, moving=m2)
        if edge:
            second.depends_on(first)
        return _store_pair(p1, p2)

    x = np.ones((128, 1024), np.float32)
    free = nki.profile(lambda a: k(a, False), chip="trn2")(x)
    held = nki.profile(lambda a: k(a, True), chip="trn2")(x)
    mm = np.flatnonzero(free.program.table["op"] == core._program.MATMUL)
    assert free.start[mm[1]] < free.end[mm[0]]  # pipelined: before the first completes
    assert held.start[mm[1]] >= held.end[mm[0]]


def _store_pair(p1, p2):
    outs = []
    for p in (p1, p2):
        s = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        o = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o, s)
        outs.append(o)
    return tuple(outs)


def test_one_call_with_two_producers_equals_two_chained_calls():
    both, chained = _profile("both"), _profile("chained")
    assert both.latency == chained.latency
    np.testing.assert_array_equal(both.start, chained.start)


def test_edges_that_cannot_be_are_refused():
    def backwards(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        later = nisa.tensor_copy(dst=u, src=t)
        first.depends_on(later)

    with pytest.raises(KernelArgumentError, match=r"traced after it.*producer's call first"):
        nki.simulate(backwards, chip="trn2")(A_)

    def partly_backwards(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        middle = nisa.tensor_copy(dst=u, src=t)
        v = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        later = nisa.tensor_copy(dst=v, src=t)
        with pytest.raises(KernelArgumentError, match="traced after it"):
            middle.depends_on(first, later)  # the good edge must not stay behind either
        assert current().deps == []

    nki.simulate(partly_backwards, chip="trn2")(A_)

    def itself(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        i = nisa.dma_copy(dst=t, src=a)
        i.depends_on(i)

    with pytest.raises(KernelArgumentError, match="traced after it"):
        nki.simulate(itself, chip="trn2")(A_)

    def not_a_handle(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        i = nisa.dma_copy(dst=t, src=a)
        i.depends_on(t)

    with pytest.raises(KernelArgumentError, match=r"instruction handle.*not NkiTensor"):
        nki.simulate(not_a_handle, chip="trn2")(A_)

    kept = {}

    def first_run(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        kept["i"] = nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    def second_run(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a).depends_on(kept["i"])

    nki.simulate(first_run, chip="trn2")(A_)
    with pytest.raises(KernelArgumentError, match="another kernel run"):
        nki.simulate(second_run, chip="trn2")(A_)

    def forged(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        real = nisa.dma_copy(dst=t, src=a)
        fake = nisa.NkiInstruction(current(), 50, 60, "nisa.made_up")
        fake.depends_on(real)

    with pytest.raises(KernelArgumentError, match="names no instructions this kernel traced"):
        nki.simulate(forged, chip="trn2")(A_)


def test_an_instruction_named_by_an_edge_is_not_computed_once_as_a_repeat():
    """The compiler model drops an exact repeat of an instruction; one that an edge names
    stays (its semaphore must fire)."""

    def k(a, pin):
        t = nl.load(a)
        one = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        two = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=one, data=t, op0=nl.multiply, operand0=2.0)
        again = nisa.tensor_scalar(dst=two, data=t, op0=nl.multiply, operand0=2.0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        store = nisa.dma_copy(dst=out, src=two)
        if pin:
            store.depends_on(again)
        return out

    plain = nki.profile(lambda a: k(a, False), chip="trn2")(A_)
    pinned = nki.profile(lambda a: k(a, True), chip="trn2")(A_)
    assert len(pinned.program.table) == len(plain.program.table) + 1


def test_an_edge_after_a_dropped_repeat_still_joins_its_own_instructions():
    """The compiler model drops a repeat before the edge; the edge is renumbered with it, so
    the second load still waits for the first and nothing else."""

    def k(a, b):
        t = nl.load(a)
        one = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        two = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=one, data=t, op0=nl.multiply, operand0=2.0)
        nisa.tensor_scalar(dst=two, data=t, op0=nl.multiply, operand0=2.0)  # dropped
        ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        la = nisa.dma_copy(dst=ta, src=a)
        lb = nisa.dma_copy(dst=tb, src=b)
        lb.depends_on(la)
        o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=ta, data2=tb, op=nl.add)
        nisa.tensor_tensor(dst=o, data1=o, data2=two, op=nl.add)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, o)
        return out

    run = nki.profile(k, chip="trn2")(A_, A_)
    assert run.extra["nki"]["repeats_dropped"] == 1
    loads = np.flatnonzero(run.program.table["op"] == core._program.DMA_LOAD)
    first, second = loads[1], loads[2]  # after the load of t
    assert run.start[second] >= run.end[first]
    # and the edge is the only thing holding it: without it the loads overlap
    free = nki.profile(_without_edges_of(k), chip="trn2")(A_, A_)
    assert free.start[second] < free.end[first]


def _without_edges_of(kernel):
    def k(*args):
        real = nisa.NkiInstruction.depends_on
        nisa.NkiInstruction.depends_on = lambda self, *producers: self
        try:
            return kernel(*args)
        finally:
            nisa.NkiInstruction.depends_on = real

    return k


def _edged_matmul(a_t, b):
    """lab05's blocked reference with an edge: every load of B waits for the load of A."""
    M, N = a_t.shape[1], b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(a_t.shape[0] // 128):
                ta = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                tb = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                la = nisa.dma_copy(
                    dst=ta, src=a_t[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128]
                )
                lb = nisa.dma_copy(dst=tb, src=b[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                lb.depends_on(la)
                nisa.nc_matmul(dst=acc, stationary=ta, moving=tb, accumulate=k > 0)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=c[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return c


def test_the_grader_replays_the_same_edges():
    recorder = A.KernelRecorder(_edged_matmul)
    mine = lab05.profile(recorder, lab05.FAST_SHAPE)
    calls = [c[0] for t in recorder.traces() for c in t["calls"]]
    assert "nisa.NkiInstruction.depends_on" in calls
    replay = A.decode(json.loads(json.dumps(A.encode(_edged_matmul, recorder))))
    replayed = lab05.profile(replay, lab05.FAST_SHAPE)
    assert replayed.latency == mine.latency
    np.testing.assert_array_equal(replayed.start, mine.start)
    # ... and the edges are what makes it so: without them the loads overlap
    assert lab05.profile(_without_edges, lab05.FAST_SHAPE).latency < mine.latency


def _without_edges(a_t, b):
    real = nisa.NkiInstruction.depends_on
    nisa.NkiInstruction.depends_on = lambda self, *producers: self
    try:
        return _edged_matmul(a_t, b)
    finally:
        nisa.NkiInstruction.depends_on = real


@settings(max_examples=60, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 40), max_size=4), min_size=1, max_size=30),
    waits=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=20),
)
def test_waits_merge_into_the_csr_dependencies_row_by_row(lists, waits):
    """Every instruction keeps its dependencies, in order, and gains its waits after them."""
    from trnlab.core._context import _with_waits

    n = len(lists)
    waits = [(c % n, p % n) for c, p in waits]
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.array([v for x in lists for v in x], np.int64)
    new_ptr, new_idx, strict = _with_waits(ptr, idx, np.array(waits, np.int64).reshape(-1, 2))
    for r in range(n):
        want = lists[r] + [p for c, p in waits if c == r]
        assert new_idx[new_ptr[r] : new_ptr[r + 1]].tolist() == want
        flags = [False] * len(lists[r]) + [True] * (len(want) - len(lists[r]))
        assert strict[new_ptr[r] : new_ptr[r + 1]].tolist() == flags
