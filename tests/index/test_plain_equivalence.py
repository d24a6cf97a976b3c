"""Every speed trick gives the plain path's answers: the same operations, with and without MEMFILE_PLAIN=1.

Two copies of one vault: one is read with every trick on, the other with
MEMFILE_PLAIN=1 (the plain path: one Whoosh writer process, every file
parsed again after a write, no catalog caches, ...). Each operation must give the same result on both, in process (one
long-lived Vault per copy, so the caches of a resident process are used)
and as `memfile` processes (the quick exit and the output pipe included).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import BROKEN, HAND_MADE, another_thread_running, write

from memfile import Vault, fileformat
from memfile.index import BULK, source

NOTES = [
    ("fact", "vps1_server", "The VPS runs Docker and Postgres 16; backups go to the NAS nightly.", ["infra", "docker"]),
    ("fact", "postgres_backup", "Postgres is backed up with pg_dump at 02:00, kept for 30 days.", ["infra", "backup"]),
    ("preference", "favorite_food", "Phở bò from the nhà hàng on Lý Thường Kiệt street.", ["food"]),
    ("project", "apollo", "Apollo ships the billing sync; the deployment pipeline runs on Fridays.", ["work"]),
    ("mistake", "friday_deploy", "A Friday deploy broke billing: deploy on Tuesdays instead.", ["work", "deploy"]),
    ("note", "thai", "ร้านอาหารไทยอร่อยมาก ใกล้สถานีรถไฟ", ["food"]),
    ("context", "meeting", "The team decided to move the release process notes to the wiki.", ["work"]),
    ("skill", "vim", "Use :%s/old/new/g to replace everywhere in vim.", []),
]
QUERIES = [
    "docker postgres",
    "deploy",
    "billing deployment pipeline",
    "nhà hàng",
    "ร้านอาหาร",
    '"release process"',
    "deploy* NOT friday",
    "tag:work apollo",
    "category:fact backup",
    "What did the team decide about releases?",
]


def both(tricks: Callable[[], Any], plain: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(tricks(), plain()), the second under MEMFILE_PLAIN=1."""
    monkeypatch.delenv("MEMFILE_PLAIN", raising=False)
    first = tricks()
    monkeypatch.setenv("MEMFILE_PLAIN", "1")
    try:
        second = plain()
    finally:
        monkeypatch.delenv("MEMFILE_PLAIN", raising=False)
    return first, second


@pytest.fixture
def twins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two copies of one vault (same files, same ids), indexed each its own way."""
    monkeypatch.delenv("MEMFILE_PLAIN", raising=False)
    vault = Vault.init(tmp_path / "tricks", "michael", "Michael's Mind")
    for category, key, content, tags in NOTES:
        vault.store(category, key, content, tags=tags)
    vault.store("fact", "old_office", "The office was in Hamburg.", tags=["work"])
    vault.store("fact", "office", "The office is in Berlin.", tags=["work"], supersedes="fact/old_office")
    vault.store("note", "ticket", "The zeppelin ticket expired.", expires="2020-01-01T00:00:00Z")
    vault.store("identity", "name", "My name is Michael.", priority="critical")
    vault.store("fact", "agent_claim", "The agent says the backup is critical.", priority="critical", source="agent")
    write(vault.mind_dir / "fact" / "office_hours.md", HAND_MADE)
    write(vault.mind_dir / "fact" / "broken.md", BROKEN)
    vault.close()
    plain = tmp_path / "plain"
    shutil.copytree(vault.root, plain, symlinks=True, ignore=shutil.ignore_patterns(".memfile"))
    shutil.rmtree(vault.root / ".memfile" / "index", ignore_errors=True)  # both copies build their index anew
    return vault.root, plain


def outcome(vault: Vault) -> dict[str, Any]:
    """What a representative set of reads gives (one long-lived Vault: its caches are used)."""
    found: dict[str, Any] = {"refresh": _counts(vault.refresh())}
    for query in QUERIES:
        for _ in range(2):  # the second time from a warm searcher
            found[f"search {query}"] = [_hit(hit) for hit in vault.search(query, limit=5)]
    found["search filtered"] = [_hit(h) for h in vault.search("office", tags=["work"], include_superseded=True)]
    found["search expired"] = [_hit(h) for h in vault.search("zeppelin", include_expired=True)]
    found["search unverified"] = [_hit(h) for h in vault.search("backup", unverified=True)]
    for _ in range(2):
        found["recall"] = vault.recall()
        found["recall bytes"] = vault.recall().encode()
        found["recall budget"] = vault.recall(300)
        found["recall superseded"] = vault.recall(include_superseded=True)
        found["recall query"] = vault.recall(query="deploy billing", limit=3)
        found["recall items"] = [
            (i.memory.ref, i.pinned, i.shortened, i.neighbour_of) for i in vault.recall(query="postgres docker").items
        ]
        found["list"] = [m.to_dict() for m in vault.list(status="all", include_expired=True)]
        found["memories"] = sorted(m.path for m in vault.memories())
        found["issues"] = [(i.path, i.line) for i in vault.issues]
    found["tags"] = vault.tags()
    found["get"] = vault.get("office_hours").to_dict()
    status = vault.status()
    found["status"] = {key: status[key] for key in ("on_disk", "indexed", "stale", "unreadable", "conflicts")}
    return found


def _hit(hit: Any) -> tuple[str, float, str, int]:
    return hit.memory.ref, round(hit.score, 6), hit.snippet, hit.rank


def _counts(report: Any) -> tuple[int, int, int, list[str]]:
    return report.added, report.updated, report.removed, sorted(i.path for i in report.skipped)


def test_reads_give_the_same_answers_with_and_without_tricks(
    twins: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tricks, plain = both(lambda: outcome(Vault.open(twins[0])), lambda: outcome(Vault.open(twins[1])), monkeypatch)
    assert tricks.keys() == plain.keys()
    for key in tricks:
        assert tricks[key] == plain[key], key


def test_reads_after_hand_edits_give_the_same_answers(
    twins: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def edit(root: Path) -> None:
        edited = write(root / "michael" / "fact" / "vps1_server.md", "The VPS now runs Podman.\n")
        (root / "michael" / "skill" / "vim.md").unlink()
        new = write(root / "michael" / "note" / "new.md", "A new note about Podman and docker.\n")
        for path in (edited, new):  # their dates come from the mtime: the same in both copies
            os.utime(path, (1_780_000_000, 1_780_000_000))

    def run(root: Path) -> dict[str, Any]:
        vault = Vault.open(root)
        before = outcome(vault)
        edit(root)
        return {"before": before, "after": outcome(vault), "fresh": outcome(Vault.open(root))}

    tricks, plain = both(lambda: run(twins[0]), lambda: run(twins[1]), monkeypatch)
    for stage in tricks:
        for key in tricks[stage]:
            assert tricks[stage][key] == plain[stage][key], (stage, key)


def test_kept_field_lengths_score_as_whoosh_does_across_new_merged_and_deleted_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `lengths` trick: one long-lived Vault keeps each segment's field lengths while stores add
    segments, forgets delete documents and Whoosh merges segments away; every search scores exactly as
    Whoosh's own `doc_field_length` makes it (scores compared unrounded)."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]

    def run(root: Path) -> list[list[tuple[str, float]]]:
        vault = Vault.init(root, "michael")
        got = []
        for i in range(36):
            vault.store("note", f"n{i}", " ".join(words[(i * j) % len(words)] for j in range(1 + i % 9)))
            if i % 6 == 5:
                vault.forget(f"note/n{i - 3}")
            for query in ("alpha beta", "gamma", "zeta OR eta delta"):
                got.append([(h.memory.ref, h.score) for h in vault.search(query, limit=50)])
        return got

    tricks, plain = both(lambda: run(tmp_path / "tricks"), lambda: run(tmp_path / "plain"), monkeypatch)
    assert tricks == plain
    assert len(tricks[-1]) > 10


def test_writes_give_the_same_index(twins: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def run(root: Path) -> dict[str, Any]:
        vault = Vault.open(root)
        vault.search("docker")
        vault.store("fact", "vps1_server", "The VPS runs Podman now.", tags=["infra"])
        vault.forget("fact/postgres_backup")
        vault.verify("fact/agent_claim")
        return (
            timeless(outcome(vault))
            | {"reindex": _counts(vault.reindex())}
            | {f"rebuilt {key}": value for key, value in timeless(outcome(Vault.open(root))).items()}
        )

    tricks, plain = both(lambda: run(twins[0]), lambda: run(twins[1]), monkeypatch)
    for key in tricks:
        assert tricks[key] == plain[key], key


def timeless(found: dict[str, Any]) -> dict[str, Any]:
    """`outcome` without what depends on when the writes ran (their `updated_at` orders recall)."""
    kept = {key: value for key, value in found.items() if not key.startswith("recall")}
    kept["list"] = [{k: v for k, v in m.items() if k not in ("created_at", "updated_at")} for m in found["list"]]
    kept["get"] = {k: v for k, v in found["get"].items() if k not in ("created_at", "updated_at")}
    return kept


def _bulk_vault(root: Path, count: int) -> Path:
    Vault.init(root, "m").close()
    for i in range(count):
        path = write(
            root / "m" / "note" / f"n{i:05d}.md",
            f"Note {i} about {'docker' if i % 3 else 'postgres'} and the {('alpha', 'beta', 'gamma')[i % 3]} rollout.\n",
        )
        os.utime(path, (1_780_000_000 + i, 1_780_000_000 + i))
    return root


@pytest.mark.parametrize("threads", [False, True], ids=["forking", "threads-running"])
def test_a_bulk_build_gives_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: bool) -> None:
    """A build of BULK files and more: two writer processes, no garbage collection pauses, the fast codec
    and formats, and (while threads run) a fresh process building it; the plain path: one writer, in process."""

    def run(root: Path) -> dict[str, Any]:
        if threads:
            with another_thread_running():
                report = Vault.open(root).refresh()
        else:
            report = Vault.open(root).refresh()
        vault = Vault.open(root)
        # Equal scores are ordered by document number, which two writer processes number differently
        # from one: hits are compared in full and by score (all of them: a `limit` could cut a tie).
        return {
            "refresh": _counts(report),
            "memories": sorted(m.path for m in vault.memories()),
            "search": sorted((-h.score, h.memory.ref, h.snippet) for h in vault.search("postgres", limit=1000)),
            "count": len(vault.search("docker", limit=1000)),
            "recall": vault.recall().encode(),
        }

    first, second = _bulk_vault(tmp_path / "a", BULK + 5), None
    second = tmp_path / "b"
    shutil.copytree(first, second, symlinks=True)
    tricks, plain = both(lambda: run(first), lambda: run(second), monkeypatch)
    for key in tricks:
        assert tricks[key] == plain[key], key


@pytest.mark.parametrize(
    "command",
    [
        ["search", "--json", "deploy billing"],
        ["recall"],
        ["recall", "--budget", "200"],
        ["recall", "deploy"],
        ["list", "--json"],
        ["status"],
    ],
)
def test_commands_as_processes_give_the_same_output(twins: tuple[Path, Path], command: list[str]) -> None:
    def memfile(root: Path, plain: bool) -> tuple[int, bytes, bytes]:
        env = {k: v for k, v in os.environ.items() if k != "MEMFILE_PLAIN"} | ({"MEMFILE_PLAIN": "1"} if plain else {})
        done = subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(root), *command], env=env, capture_output=True, timeout=60
        )
        return (
            done.returncode,
            done.stdout.replace(str(root).encode(), b"ROOT"),
            done.stderr.replace(str(root).encode(), b"ROOT"),
        )

    for _ in range(2):  # the index built, then read
        assert memfile(twins[0], False) == memfile(twins[1], True)


@pytest.mark.parametrize("count", [40, pytest.param(BULK + 5, marks=pytest.mark.slow)])
def test_a_bulk_write_indexes_what_its_files_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """A write of many files hands the index the memories it read back from them (`parsed`): they are
    what the files give read afresh, dates taken from a file's mtime included (hand-made files without
    front-matter, imported byte for byte), and each file is parsed once less than on the plain path."""
    source_vault = Vault.init(tmp_path / "source", "m")
    for i in range(count // 2):
        path = write(source_vault.mind_dir / "note" / f"hand_{i}.md", f"A hand-made note {i} about docker.\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    stores = [{"category": "fact", "key": f"k{i}", "content": f"Stored {i}: postgres."} for i in range(count // 2)]
    source_vault.store_many(stores)
    export = tmp_path / "export.jsonl"
    source_vault.export(export, raw=True)
    parses: list[int] = []
    real_parse = fileformat.parse

    def counted(*args: Any) -> Any:
        parses[-1] += 1
        return real_parse(*args)

    for plain in ("", "parsed"):
        monkeypatch.setenv("MEMFILE_PLAIN", plain)
        vault = Vault.init(tmp_path / f"import-{plain}", "m")
        parses.append(0)
        monkeypatch.setattr(fileformat, "parse", counted)  # during the import only: a later read may read
        assert len(vault.import_(export).created) == count - count % 2  # a file again to confirm its stat
        monkeypatch.setattr(fileformat, "parse", real_parse)
        indexed = sorted((m.path, m.to_dict()) for m in vault.memories())
        parsed = [
            source.load(vault.root, vault.mind_dir, path)[1] for path in source.stat_walk(vault.mind_dir, vault.root)
        ]
        assert indexed == sorted((m.path, m.to_dict()) for m in parsed)
        assert vault.status()["stale"] == []
    assert parses[1] - parses[0] == count - count % 2  # the index read each file the write had read back


def test_what_a_writer_read_back_is_taken_only_for_the_same_bytes_and_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`source.load`'s `known`: taken when the file holds its bytes with an mtime of its second; otherwise
    (the file changed since, or its mtime moved to another second: its dates may come from it) parsed;
    never taken on the plain path."""
    monkeypatch.delenv("MEMFILE_PLAIN", raising=False)
    root = tmp_path / "v"
    path = write(root / "m" / "note" / "a.md", "A note without front-matter.\n")
    os.utime(path, ns=(1_780_000_000_400_000_000, 1_780_000_000_400_000_000))
    data = path.read_bytes()
    marker = source.parse_as_read(b"Another memory.\n", "m/note/a.md", 0)
    for known, taken in [
        ((data, 1_780_000_000_900_000_000, marker), True),  # the same second
        ((data, 1_780_000_001_000_000_000, marker), False),  # another second
        ((b"Other bytes.\n", 1_780_000_000_400_000_000, marker), False),
    ]:
        _, memory = source.load(root, root / "m", "m/note/a.md", known)
        assert (memory == marker) is taken
        if not taken:
            assert memory == source.parse_as_read(data, "m/note/a.md", 1_780_000_000_400_000_000)
    monkeypatch.setenv("MEMFILE_PLAIN", "parsed")
    _, memory = source.load(root, root / "m", "m/note/a.md", (data, 1_780_000_000_400_000_000, marker))
    assert memory != marker
