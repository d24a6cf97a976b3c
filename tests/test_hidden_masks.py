"""What a search hides, found one segment at a time (score_cache.SegmentMasks), is what the plain path finds.

The plain path (`hidden_docs`) asks Whoosh for the superseded and expired
documents of the whole index; `SegmentMasks` keeps what each segment hides
across searchers and looks up the time. Both must give the same set and the
same "holds until" for any index (segments added, documents deleted,
segments merged), any time and any include flags: many generated indexes
check it, searchers old and new sharing one `SegmentMasks` as a long-lived
process does. Then a real long-lived Vault: a search right after a store
hides what that store superseded and what just expired.
"""

from __future__ import annotations

import marshal
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import Vault
from memfile.config import plain
from memfile.index import score_cache
from memfile.index import store as index_store
from memfile.index.persisted import schema
from memfile.index.score_cache import SegmentMasks, hidden_docs
from memfile.model import Category, Memory, Status, memory_to_row

BASE = datetime(2026, 6, 27, 10, 0, tzinfo=timezone.utc)
FLAGS = [(False, False), (False, True), (True, False), (True, True)]

# --- generated indexes --------------------------------------------------------

# an expiry: None (never), or seconds from BASE with microseconds (past, soon, within a day, later)
expiry = st.none() | st.builds(
    lambda s, us: timedelta(seconds=s, microseconds=us),
    st.sampled_from([-86_400 * 400, -3600, -1, 0, 1, 59, 3600, 86_399, 86_400, 86_401, 86_400 * 3]),
    st.sampled_from([0, 1, 500_000, 999_999]),
)
# one step: put a memory at a path (replacing the one there: a deletion), delete a path's memory
put = st.tuples(st.just("put"), st.integers(0, 11), st.booleans(), expiry)
delete = st.tuples(st.just("delete"), st.integers(0, 11), st.just(False), st.none())
# a commit: "segment" (a new segment, never merged), "merge" (Whoosh's merge of small ones), "optimize" (one)
batch = st.tuples(st.lists(put | delete, min_size=1, max_size=6), st.sampled_from(["segment", "merge", "optimize"]))


def memory(n: int, superseded: bool, expires: timedelta | None, version: int) -> Memory:
    return Memory(
        id=f"mem_{n:04d}{version:04d}",
        mind="m",
        category=Category.NOTE,
        key=f"k{n}",
        content=f"memory {n} version {version}",
        path=f"m/note/k{n}.md",
        created_at=BASE,
        updated_at=BASE,
        expires_at=None if expires is None else BASE + expires,
        status=Status.SUPERSEDED if superseded else None,
    )


def document(mem: Memory) -> dict[str, Any]:
    """The Whoosh document memfile indexes for `mem`."""
    return index_store._document(mem, marshal.dumps(memory_to_row(mem)))


def build(batches: list[tuple[list[tuple[str, int, bool, timedelta | None]], str]]) -> tuple[list[Any], set[datetime]]:
    """A RAM index made by `batches`, a searcher after each commit, and the expiry times it holds."""
    from whoosh.filedb.filestore import RamStorage
    from whoosh.writing import NO_MERGE

    ix = RamStorage().create_index(schema())
    searchers, times = [], set()
    for version, (steps, commit) in enumerate(batches):
        writer = ix.writer()
        for action, n, superseded, expires in steps:
            if action == "put":
                writer.update_document(**document(memory(n, superseded, expires, version)))
                if expires is not None:
                    times.add(BASE + expires)
            else:
                writer.delete_by_term("path", f"m/note/k{n}.md")
        if commit == "segment":
            writer.commit(mergetype=NO_MERGE)
        elif commit == "merge":
            writer.commit()
        else:
            writer.commit(optimize=True)
        searchers.append(ix.searcher())
    return searchers, times


def moments(times: set[datetime]) -> list[datetime]:
    """BASE and every expiry, a microsecond either side, and a day later: every edge of the sets."""
    edges = {BASE, BASE + timedelta(days=1, seconds=1), BASE - timedelta(days=2)}
    for at in times:
        edges |= {at - timedelta(microseconds=1), at, at + timedelta(microseconds=1), at - timedelta(days=1)}
    return sorted(edges)


def assert_same(searcher: Any, masks: SegmentMasks, at: list[datetime]) -> None:
    for now in at:
        for flags in FLAGS:
            assert masks.hidden(searcher, *flags, now) == hidden_docs(searcher, *flags, now), (now, flags)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=5))
def test_segment_masks_give_exactly_the_plain_hidden_set_and_until(batches: list[Any]) -> None:
    check_history(batches)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=8))
def test_segment_masks_give_exactly_the_plain_hidden_set_in_longer_histories(batches: list[Any]) -> None:
    check_history(batches)


def check_history(batches: list[Any]) -> None:
    """Each searcher of the history, with masks shared as a long-lived process shares them, in both orders."""
    searchers, times = build(batches)
    at = moments(times)
    shared = SegmentMasks()  # as a long-lived process: each searcher after a commit, then the old ones again
    for searcher in searchers:
        assert_same(searcher, shared, at)
    for searcher in reversed(searchers[:-1]):  # an older searcher (fewer deletions) after a newer one
        assert_same(searcher, shared, at[::3])
    newest_first = SegmentMasks()  # afresh, and a segment met with more deletions before fewer
    for searcher in reversed(searchers):
        assert_same(searcher, newest_first, at[1::3])


def test_superseded_expired_and_soon_across_segments_deletions_and_merges() -> None:
    """One hand-made history with every case, so a failing property has a plain example next to it."""
    day = timedelta(days=1)
    batches: list[Any] = [
        ([("put", 0, True, None), ("put", 1, False, -day), ("put", 2, False, timedelta(hours=2))], "segment"),
        ([("put", 3, False, timedelta(seconds=1)), ("put", 4, True, day * 3)], "segment"),
        ([("put", 1, False, None), ("delete", 0, False, None)], "segment"),  # 1 replaced, 0 deleted
        ([("put", 5, True, -day)], "segment"),
        ([("put", 2, False, timedelta(microseconds=1))], "optimize"),
        ([("put", 6, False, timedelta(0))], "segment"),
    ]
    searchers, times = build(batches)
    shared = SegmentMasks()
    for searcher in searchers:
        assert_same(searcher, shared, moments(times))
    last = searchers[-1]
    assert len(last.leaf_searchers()) == 2  # the optimized segment, and the last one
    docs, until = shared.hidden(last, False, False, BASE)
    paths = {last.stored_fields(d)["path"] for d in docs}
    assert paths == {"m/note/k4.md", "m/note/k5.md", "m/note/k6.md"}  # k6 expires at BASE: expired at BASE
    assert until == BASE + timedelta(microseconds=1)  # k2's new expiry
    assert shared.hidden(last, True, True, BASE) == (set(), BASE + day)


def test_a_small_budget_drops_old_segments_and_still_answers_the_same() -> None:
    batches: list[Any] = [([("put", n, n % 2 == 0, timedelta(hours=n - 5))], "segment") for n in range(10)]
    searchers, times = build(batches)
    masks = SegmentMasks(most=3)
    assert_same(searchers[-1], masks, moments(times))
    assert masks._held <= 3 or len(masks._kept) == 1


# --- a long-lived Vault ---------------------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The segment ids `SegmentMasks` works out from the index (a spy around the real function)."""
    seen: list[str] = []
    real = score_cache.segment_hides

    def spy(subsearcher: Any, deleted: int) -> Any:
        seen.append(subsearcher.reader().segment().segment_id())
        return real(subsearcher, deleted)

    monkeypatch.setattr(score_cache, "segment_hides", spy)
    return seen


def test_a_search_right_after_a_store_hides_what_it_superseded_and_what_just_expired(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_now = datetime.now(timezone.utc).replace(microsecond=0)
    clock = [real_now]
    monkeypatch.setattr("memfile.index.utc_now", lambda: clock[0])  # the time searches hide by
    vault.store("note", "old_plan", "billing sync runs nightly")
    vault.store("note", "short_lived", "billing sync paused today", expires=real_now + timedelta(hours=1))
    for n in range(3):
        vault.store("note", f"other_{n}", f"billing notes {n}")
    keys = lambda **kw: sorted(h.memory.key for h in vault.search("billing sync", **kw))  # noqa: E731
    assert {"old_plan", "short_lived"} <= set(keys())

    vault.store("note", "new_plan", "billing sync runs hourly", supersedes="note/old_plan")
    assert "old_plan" not in keys() and "new_plan" in keys()
    assert "old_plan" in keys(include_superseded=True)

    vault.store("note", "another", "billing sync owner is Ana")
    clock[0] = real_now + timedelta(hours=1)  # the moment it expires
    assert "short_lived" not in keys() and "another" in keys()
    assert "short_lived" in keys(include_expired=True)
    clock[0] = real_now + timedelta(hours=1) - timedelta(seconds=1)
    assert "short_lived" in keys()

    for flags in ({}, {"include_expired": True}, {"include_superseded": True}):
        monkeypatch.setenv("MEMFILE_PLAIN", "1")
        expected = keys(**flags)
        monkeypatch.delenv("MEMFILE_PLAIN")
        assert keys(**flags) == expected


@pytest.mark.skipif(plain("segment_masks"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_after_a_store_only_the_new_segments_are_worked_out(vault: Vault, counted: list[str]) -> None:
    for n in range(4):
        vault.store("note", f"note_{n}", f"deploy notes {n}", expires="30d")
    vault.search("deploy")
    known = set(counted)
    assert known
    for n in range(3):
        vault.store("note", f"late_{n}", f"deploy late {n}", supersedes=f"note/note_{n}")
        counted.clear()
        found = {h.memory.key for h in vault.search("deploy")}
        assert found == {f"late_{m}" for m in range(n + 1)} | {f"note_{m}" for m in range(n + 1, 4)}
        assert counted and not set(counted) & known  # only segments no searcher met before
        known |= set(counted)


def test_plain_segment_masks_finds_the_whole_index_again(
    vault: Vault, counted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMFILE_PLAIN", "segment_masks")
    vault.store("note", "one", "deploy notes")
    vault.store("note", "two", "deploy notes again", supersedes="note/one")
    assert [h.memory.key for h in vault.search("deploy")] == ["two"]
    assert counted == []
