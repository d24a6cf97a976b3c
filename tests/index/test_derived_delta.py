"""A long-lived Vault brings what it derived from the catalog up to date after its own writes.

After a write by this process, `View._catalog_memories` reads only the rows written
(`Catalog.changes`) and recall's set of recallable memories is updated
(`Recallable.updated`) instead of made anew; after anything else (another process's
write, another Vault's) every row is read, as on the plain path. Each step of a random
mix of changes is checked against a fresh Vault: the same memories in the same order,
the same recallable set, the same recall texts.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers import BROKEN, in_vault, ok, write

from memfile import Vault
from memfile.config import plain
from memfile.errors import MemfileError
from memfile.model import Memory, format_datetime, utc_now
from memfile.recall import Recallable

MIND = "michael"
WORDS = ("apples", "berlin", "office", "tea", "garden", "python", "meeting", "cat", "river", "lamp")
QUERIES = ("apples", "office tea", "garden river lamp")
CATEGORIES = ("fact", "note", "identity", "preference", "context", "project")
PRIORITIES = ("low", "normal", "high", "critical")
RECALLABLE = ("recallable", False)  # recall's name for its set in `View.derived` (without superseded ones)

cached = pytest.mark.skipif(plain("catalog_cache"), reason="the catalog cache is turned off (MEMFILE_PLAIN)")


class Counted:
    """Reads of every row of the catalog, and values `View.derived` made anew from every memory (not
    kept, nor updated): spies on the real methods."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from memfile.index import View
        from memfile.index.catalog import Catalog

        self.full_reads = self.remakes = 0
        every_row, derived = Catalog.memories_at, View.derived

        def memories_at(catalog: Catalog) -> object:
            self.full_reads += 1
            return every_row(catalog)

        def counted_derived(view: View, name: object, now: datetime, make: Any, update: Any = None) -> object:
            def remake(memories: list[Memory]) -> object:
                self.remakes += 1
                return make(memories)

            return derived(view, name, now, remake, update)

        monkeypatch.setattr(Catalog, "memories_at", memories_at)
        monkeypatch.setattr(View, "derived", counted_derived)


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))


def hand_made(key: str, category: str, body: str, expires: str = "null") -> str:
    """A memory file as a person writes it (created long ago, so it sorts early in the timeline)."""
    return (
        f"---\ncategory: {category}\nkey: {key}\npriority: high\nsource: user\nverified: true\n"
        f"expires_at: {expires}\ncreated_at: 2020-01-0{len(key) % 9 + 1}T08:00:00Z\n"
        f"updated_at: 2021-01-01T08:00:00Z\n---\n{body}\n"
    )


def edited(path: Path, field: str, value: str) -> None:
    """`field: value` in a memory file's front-matter, by hand."""
    source = path.read_text(encoding="utf-8")
    path.write_text(re.sub(rf"(?m)^{field}: .*$", f"{field}: {value}", source, count=1), encoding="utf-8")


def recallable_now(memories: list[Memory], include_superseded: bool) -> Recallable:
    now = utc_now()
    return Recallable.of([m for m in memories if not m.is_expired(now) and (include_superseded or not m.superseded)])


def same_sets(got: Recallable, want: Recallable) -> None:
    assert got.memories == want.memories
    assert got.timeline == want.timeline
    assert got.position == want.position
    assert got.pinned == want.pinned
    assert got.verified == want.verified


def check_same(long: Vault, root: Path, long_first: bool = True) -> list[Memory]:
    """The long-lived Vault answers as a fresh one does; returns the memories. Whichever reads first
    brings the index in line with a hand edit: `long` itself (a write of its own), or the fresh one."""
    fresh = Vault.open(root, MIND)
    got = long.memories() if long_first else None
    want = fresh.memories()
    assert (got if got is not None else long.memories()) == want  # in the same order: the catalog's
    assert long.issues == fresh.issues
    for query in QUERIES:
        for superseded in (False, True):
            got = long.recall(0, query=query, include_superseded=superseded)
            expected = fresh.recall(0, query=query, include_superseded=superseded)
            assert got.text == expected.text
            assert [(i.memory, i.pinned, i.neighbour_of) for i in got.items] == [
                (i.memory, i.pinned, i.neighbour_of) for i in expected.items
            ]
            kept = long._index._derived.get(("recallable", superseded))
            if kept is not None:
                same_sets(kept[3], recallable_now(want, superseded))  # type: ignore[arg-type]
    assert long.recall(0).text == fresh.recall(0).text
    for budget in (150, 400):  # cut, or refused with the budget that would do
        assert answer(long, budget, QUERIES[0]) == answer(fresh, budget, QUERIES[0])
        assert answer(long, budget, None) == answer(fresh, budget, None)
    return want


def answer(vault: Vault, budget: int, query: str | None) -> str:
    try:
        return vault.recall(budget, query=query).text
    except MemfileError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    vault = Vault.init(tmp_path / "vault", MIND, "Michael's Mind")
    rng = random.Random(7)
    for n in range(12):
        vault.store(
            CATEGORIES[n % len(CATEGORIES)],
            f"seed_{n}",
            text(rng),
            priority=PRIORITIES[n % 4],
            tags=[rng.choice(WORDS)],
            source="user" if n % 3 else "agent",
        )
    return vault.root


def change(rng: random.Random, n: int, long: Vault, other: Vault, root: Path, memories: list[Memory]) -> str:
    """One random change of the vault (most of them by `long`); returns what it did."""
    active = [m for m in memories if not m.superseded]
    pick = rng.choice(memories) if memories else None
    kind = rng.choice(
        ["new", "new", "over", "over", "supersede", "reactivate", "forget", "verify", "expiry", "hand", "hand_expiry"]
        + ["cli", "other", "broken", "repair"]
    )
    try:
        if kind == "new" or pick is None:
            expires = rng.choice([None, "never", "1d", "2000-01-01T00:00:00Z"])
            extra = {"expires": expires} if expires else {}
            long.store(
                rng.choice(CATEGORIES),
                f"new_{n}",
                text(rng),
                priority=rng.choice(PRIORITIES),
                tags=[rng.choice(WORDS)],
                source=rng.choice(["user", "agent"]),
                **extra,  # type: ignore[arg-type]
            )
        elif kind == "over":
            long.store(pick.category, pick.key, text(rng), priority=rng.choice(PRIORITIES), source="user")
        elif kind == "supersede" and active:
            old = rng.choice(active)
            long.store(old.category, f"instead_{n}", text(rng), supersedes=old.ref, source="user")
        elif kind == "reactivate":
            long.reactivate(pick.ref)
        elif kind == "forget":
            long.forget(pick.ref)
        elif kind == "verify":
            long.verify(pick.ref)
        elif kind == "expiry":  # through store: in the past, or soon, or never
            when = rng.choice(["2001-01-01T00:00:00Z", "7d", "never"])
            long.store(pick.category, pick.key, pick.content, expires=when, source="user")
        elif kind == "hand":
            path = root / pick.path
            edited(path, "priority", rng.choice(PRIORITIES))
            path.write_text(path.read_text(encoding="utf-8") + text(rng) + "\n", encoding="utf-8")
        elif kind == "hand_expiry":  # by hand: expired, or no longer, or later
            when = rng.choice(["2001-01-01T00:00:00Z", "null", "2099-01-01T00:00:00Z"])
            edited(root / pick.path, "expires_at", when)
        elif kind == "cli":  # another Vault, made by the CLI
            ok(in_vault(root, "store", rng.choice(CATEGORIES), f"cli_{n}", text(rng), "--priority", "critical"))
        elif kind == "other":  # another Vault object of this process
            if rng.random() < 0.5:
                other.store(pick.category, pick.key, text(rng), source="user")
            else:
                other.forget(pick.ref)
        elif kind == "broken":  # a new file, or a memory's, that cannot be parsed
            target = root / MIND / "fact" / f"broken_{n}.md" if rng.random() < 0.5 else root / pick.path
            write(target, BROKEN)
        elif kind == "repair":
            broken = sorted((root / MIND / "fact").glob("broken_*.md"))
            if broken:
                path = rng.choice(broken)
                write(path, hand_made(path.stem, "fact", text(rng)))
    except MemfileError as exc:  # refused or not found (a broken file's path, an agent's rule): no change
        return f"{kind} refused: {type(exc).__name__}"
    return kind


@pytest.mark.parametrize("seed", [1, 2])
def test_a_long_lived_vault_answers_as_a_fresh_one_after_every_change(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    long, other = Vault.open(root, MIND), Vault.open(root, MIND)
    memories = check_same(long, root)
    done = []
    for n in range(28):
        done.append(change(rng, n, long, other, root, memories))
        memories = check_same(long, root, long_first=rng.random() < 0.7)
    assert {"new", "over", "cli", "other"} <= {kind.split()[0] for kind in done}


def test_another_process_writing_is_read_in_full(root: Path) -> None:
    long = Vault.open(root, MIND)
    check_same(long, root)
    long.store("fact", "mine", "apples from this process")
    code = "import sys\nfrom memfile import Vault\nVault.open(sys.argv[1], 'michael').store('fact', 'theirs', 'apples')"
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, capture_output=True)
    long.store("fact", "mine_again", "apples again")  # a delta from the other process's version
    memories = check_same(long, root)
    assert {"fact/mine", "fact/theirs", "fact/mine_again"} <= {m.ref for m in memories}


@cached
def test_a_store_of_this_process_reads_only_the_rows_it_wrote(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = Vault.open(root, MIND)
    long.recall(0, query="apples")
    long.memories()
    index = Counted(monkeypatch)
    reads, remakes = index.full_reads, index.remakes
    for n in range(3):
        long.store("fact", f"delta_{n}", "apples and tea", priority="critical")
        long.recall(0, query="apples")
        assert "delta_" + str(n) in long.recall(0, query="apples and tea").text
        long.memories()
    long.store("note", "one", "lamp")
    long.store("note", "two", "lamp")  # two writes in a row: caught up with at once
    assert {"note/one", "note/two"} <= {m.ref for m in long.memories()}
    long.forget("note/one")
    assert "note/one" not in {m.ref for m in long.memories()}
    long.recall(0, query="lamp")
    assert (index.full_reads, index.remakes) == (reads, remakes)
    check_same(long, root)
    reads, remakes = index.full_reads, index.remakes

    ok(in_vault(root, "store", "fact", "from_cli", "apples"))  # another Vault's write: every row again
    long.memories()
    long.recall(0, query="apples")
    assert (index.full_reads, index.remakes) == (reads + 1, remakes + 1)


@cached
def test_a_kept_set_is_made_anew_once_a_memory_in_it_expires(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = Vault.open(root, MIND)
    long.recall(0, query="apples")  # kept: nothing in it expires
    counted = Counted(monkeypatch)
    remakes = counted.remakes
    soon = utc_now().replace(microsecond=0) + timedelta(seconds=2)
    path = root / long.store("fact", "brief", "apples for a moment", priority="critical").memory.path
    edited(path, "expires_at", format_datetime(soon))
    assert "apples for a moment" in long.recall(0, query="apples").text  # updated: now until `soon`
    long.store("fact", "later", "apples later")  # updated, and still holds until `soon`
    assert "apples for a moment" in long.recall(0, query="apples").text
    assert counted.remakes == remakes
    deadline = time.monotonic() + 30
    while utc_now() < soon and time.monotonic() < deadline:
        time.sleep(0.05)
    long.store("fact", "after", "apples after")
    answer = long.recall(0, query="apples")
    assert "apples for a moment" not in answer.text and "apples after" in answer.text
    assert counted.remakes == remakes + 1
    check_same(long, root)


def test_memories_changing_to_superseded_and_expired_and_back(root: Path) -> None:
    long = Vault.open(root, MIND)
    check_same(long, root)
    long.store("fact", "flip", "apples flip", priority="critical")
    check_same(long, root)
    long.store("fact", "flip", "apples flip, said anew", priority="critical")  # pinned, and rendered again
    assert "said anew" in check_same(long, root)[-1].content
    long.store("fact", "flop", "apples flop", supersedes="fact/flip")
    check_same(long, root)
    long.reactivate("fact/flip")
    check_same(long, root)
    long.store("fact", "flip", "apples flip", expires="2001-01-01T00:00:00Z")
    check_same(long, root)
    long.store("fact", "flip", "apples flip", expires="never")
    check_same(long, root)
    long.verify("fact/flop")
    edited(root / MIND / "fact" / "flop.md", "expires_at", "2001-01-01T00:00:00Z")
    check_same(long, root)
    write(root / MIND / "fact" / "flop.md", BROKEN)
    check_same(long, root)
    write(root / MIND / "fact" / "flop.md", hand_made("flop", "fact", "apples again"))
    memories = check_same(long, root)
    assert "fact/flop" in {m.ref for m in memories}


def test_updated_is_of_on_the_new_set() -> None:
    """`Recallable.updated` equals `Recallable.of`, whatever leaves and joins (pure, no vault)."""
    from memfile.model import Category, Priority, Source

    rng = random.Random(3)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def memory(n: int) -> Memory:
        made = start + timedelta(minutes=rng.choice([0, 1, 2, 3]))  # equal moments: the path decides
        return Memory(
            id=f"mem_{n:016d}",
            mind=MIND,
            category=rng.choice(list(Category)),
            key=f"k{n}",
            content=f"content {n}",
            priority=rng.choice(list(Priority)),
            source=Source.USER,
            verified=rng.random() < 0.5,
            created_at=made,
            updated_at=made + timedelta(minutes=rng.choice([0, 5])),
            path=f"{MIND}/note/k{rng.randint(0, 40)}.md",
        )

    for _ in range(200):
        current = {m.path: m for m in (memory(n) for n in range(rng.randint(0, 30)))}
        kept = Recallable.of(list(current.values()))
        gone = {f"{MIND}/note/k{rng.randint(0, 40)}.md" for _ in range(rng.randint(0, 6))}
        live = [m for m in (memory(100 + n) for n in range(rng.randint(0, 4))) if m.path in gone]
        live = list({m.path: m for m in live}.values())
        rest = [m for m in current.values() if m.path not in gone]
        same_sets(kept.updated(live, gone), Recallable.of(rest + live))


@cached
def test_a_whole_recall_is_kept_until_its_first_expiry_and_recorded_at_each_call(root: Path) -> None:
    long = Vault.open(root, MIND)
    soon = utc_now().replace(microsecond=0) + timedelta(seconds=2)
    path = root / long.store("fact", "brief", "gone soon", priority="critical").memory.path
    edited(path, "expires_at", format_datetime(soon))
    first = long.recall(0)
    assert "gone soon" in first.text
    assert long.recall(0) is first  # kept: the mind did not change and nothing in it expired yet
    with long.acting_as("agent"):
        assert long.recall(0) is first
    record = long.last_recall()
    assert record.source == "agent" and record.tokens == first.tokens
    assert [m["ref"] for m in record.memories] == [item.memory.ref for item in first.items]
    raw = json.loads((root / ".memfile" / f"last_recall-{MIND}.json").read_text(encoding="utf-8"))
    assert list(raw)[:4] == ["served_at", "source", "mind", "query"] and raw["mind"] == MIND
    deadline = time.monotonic() + 30
    while utc_now() < soon and time.monotonic() < deadline:
        time.sleep(0.05)
    after = long.recall(0)
    assert after is not first and "gone soon" not in after.text
    assert after.text == Vault.open(root, MIND).recall(0).text
    assert long.last_recall().memories == Vault.open(root, MIND).last_recall().memories
