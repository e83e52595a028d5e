"""The collector pause around a recording (trnlab._gc.paused_gc)."""

from __future__ import annotations

import gc

import pytest

from trnlab._gc import paused_gc


@pytest.fixture
def collector_on():
    """The collector on for the test, and as it was after it (whatever the test did)."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def _young(obj) -> bool:
    return any(o is obj for o in gc.get_objects(generation=0))


def test_paused_inside_and_restored_after(collector_on):
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: stays paused, and the outer block restores
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_when_the_block_raises(collector_on):
    with pytest.raises(ZeroDivisionError), paused_gc():
        1 / 0  # noqa: B018
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled_and_uncollected(collector_on):
    gc.disable()
    rows: list[int] = []
    seen: list[int] = []

    def note(phase, info):
        seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        with paused_gc():
            assert _young(rows)  # not collected: the caller chose no collections
        assert not gc.isenabled()
    finally:
        gc.callbacks.remove(note)
    assert seen == []


def test_what_exists_as_the_pause_begins_leaves_the_young_generation(collector_on):
    """The recording's row list, made with its context just before the block, must not be
    walked item by item by the collection that catches up when the block ends."""
    gc.disable()  # no collection may move it before the pause does
    rows = [0]
    assert _young(rows)
    gc.enable()
    with paused_gc():
        assert not _young(rows)
        made_inside = [1]
        assert _young(made_inside)  # only what the block makes stays young
    assert gc.isenabled()


def test_the_pause_collects_the_youngest_generation_only(collector_on):
    """Collecting the middle generation too counts towards a full collection, which walks
    everything alive: a dashboard's control change then took up to three times as long."""
    seen: list[int] = []

    def note(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.collect(0)  # an empty youngest generation: no automatic collection before the pause's
    gc.callbacks.append(note)
    try:
        with paused_gc():
            assert seen == [0]
            kept = [[] for _ in range(5000)]  # more than a young generation's threshold
            assert seen == [0]  # and still no collection while paused
        assert len(kept) == 5000
    finally:
        gc.callbacks.remove(note)
