"""The index is a cache that always agrees with the files.

Hand edits, deletes, renames, copies and git checkouts are seen by the very
next command without any watcher; a missing, corrupt or older index is
rebuilt; a writer lock held by another process never makes readers wait, and
a lock left by a killed process is recovered. Real vaults, a real Whoosh
index, real subprocesses.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BROKEN,
    SAMPLE_VAULT,
    another_thread_running,
    commit_by_hand,
    commit_count,
    fails,
    git,
    in_private_mounts,
    in_vault,
    index_dir,
    index_of,
    memfile_command,
    mount_namespaces,
    ok,
    recorded,
    write,
)

from memfile import NotFound, Vault
from memfile.index import CATALOG_NAME, INDEX_NAME, SCHEMA_VERSION, SearchOptions
from memfile.index.snippet import snippet
from memfile.index.source import stat_walk
from memfile.model import utc_now

# --- helpers -----------------------------------------------------------------------------------


def search_keys(root: Path, *query: str) -> list[str]:
    return [hit["key"] for hit in json.loads(ok(in_vault(root, "search", "--json", *query)).stdout)]


def list_keys(root: Path) -> list[str]:
    return [m["key"] for m in json.loads(ok(in_vault(root, "list", "--json")).stdout)]


def found(vault: Vault, query: str) -> list[str]:
    return [hit.memory.key for hit in vault.search(query)]


def memfile(root: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`python -m memfile --vault ROOT ARGS` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), *args], capture_output=True, text=True, timeout=timeout
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def process_search_keys(root: Path, *query: str) -> list[str]:
    return [hit["key"] for hit in json.loads(succeeded(memfile(root, "search", "--json", *query)).stdout)]


def set_lock_timeout(root: Path, seconds: float) -> None:
    config = root / "memfile.toml"
    config.write_text(f"lock_timeout = {seconds}\n" + config.read_text(encoding="utf-8"), encoding="utf-8")


@pytest.fixture
def notes(vault: Vault) -> Vault:
    """A vault with three stored memories (and so a built index)."""
    vault.store("fact", "vps1_server", "Synapse is deployed on vps1 with docker compose.", tags=["docker"])
    vault.store("skill", "postgres_backup", "Back up postgres nightly with pg_dump.", tags=["postgres"])
    vault.store("preference", "favorite_food", "Michael likes pho.", tags=["food"])
    return vault


def memory_path(vault: Vault, ref: str) -> Path:
    return vault.root / vault.get(ref).path


# --- hand changes seen by the next command --------------------------------------------------------


def test_hand_edit_is_seen_by_next_search(notes: Vault) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "ramen and gyoza"), encoding="utf-8")
    assert found(notes, "ramen") == ["favorite_food"]
    assert found(notes, "pho") == []


def test_hand_edit_of_same_size_is_seen(notes: Vault) -> None:
    path = memory_path(notes, "favorite_food")
    before = path.stat().st_size
    path.write_text(path.read_text(encoding="utf-8").replace("pho.", "udon"), encoding="utf-8")
    assert path.stat().st_size == before
    assert found(notes, "udon") == ["favorite_food"]


def test_hand_edit_is_seen_by_next_show_and_list(notes: Vault) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(
        path.read_text(encoding="utf-8").replace("priority: normal", "priority: critical").replace("pho", "bun cha"),
        encoding="utf-8",
    )
    assert notes.get("favorite_food").content == "Michael likes bun cha."
    assert [m.key for m in notes.list(priority="critical")] == ["favorite_food"]


def test_hand_edit_is_seen_by_next_cli_commands(notes: Vault) -> None:
    root = notes.root
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "banh mi"), encoding="utf-8")
    assert search_keys(root, "banh") == ["favorite_food"]
    assert "banh mi" in ok(in_vault(root, "show", "favorite_food")).stdout
    shown = json.loads(ok(in_vault(root, "list", "--json")).stdout)
    assert [m["content"] for m in shown if m["key"] == "favorite_food"] == ["Michael likes banh mi."]


def test_hand_edit_of_tags_is_seen_by_tag_commands(notes: Vault) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("tags: [food]", "tags: [food, vietnam]"), encoding="utf-8")
    assert [m.key for m in notes.by_tag("vietnam")] == ["favorite_food"]
    assert ("vietnam", 1) in notes.tags()
    assert found(notes, "tag:vietnam") == ["favorite_food"]


def test_file_deleted_by_hand_disappears(notes: Vault) -> None:
    memory_path(notes, "postgres_backup").unlink()
    assert found(notes, "postgres") == []
    assert "postgres_backup" not in [m.key for m in notes.list()]
    with pytest.raises(NotFound):
        notes.get("postgres_backup")


def test_file_deleted_by_hand_disappears_from_cli(notes: Vault) -> None:
    memory_path(notes, "postgres_backup").unlink()
    assert search_keys(notes.root, "postgres") == []
    assert "postgres_backup" not in list_keys(notes.root)
    fails(in_vault(notes.root, "show", "postgres_backup"), 3)


def test_file_moved_to_another_category_folder_is_found_under_new_path(notes: Vault) -> None:
    old = memory_path(notes, "postgres_backup")
    new = notes.root / "michael" / "note" / "postgres_backup.md"
    new.parent.mkdir(parents=True, exist_ok=True)
    os.rename(old, new)  # same inode, same mtime: only the path tells
    hits = notes.search("postgres")
    assert [h.memory.path for h in hits] == ["michael/note/postgres_backup.md"]
    assert [m.path for m in notes.list() if m.key == "postgres_backup"] == ["michael/note/postgres_backup.md"]


def test_plain_file_moved_to_another_folder_takes_that_category(vault: Vault) -> None:
    old = vault.root / "michael" / "note" / "wifi.md"
    old.parent.mkdir(parents=True)
    old.write_text("The office wifi password is on the fridge.\n", encoding="utf-8")
    assert [(h.memory.category, h.memory.path) for h in vault.search("wifi")] == [("note", "michael/note/wifi.md")]
    new = vault.root / "michael" / "fact" / "wifi.md"
    new.parent.mkdir()
    os.rename(old, new)
    assert [(h.memory.category, h.memory.path) for h in vault.search("wifi")] == [("fact", "michael/fact/wifi.md")]
    assert search_keys(vault.root, "category:note") == []
    assert search_keys(vault.root, "category:fact") == ["wifi"]


def test_file_renamed_in_its_folder_is_found_under_new_path(notes: Vault) -> None:
    old = memory_path(notes, "favorite_food")
    os.rename(old, old.with_name("food_i_like.md"))
    assert [h.memory.path for h in notes.search("pho")] == ["michael/preference/food_i_like.md"]


def test_file_copied_in_from_outside_is_found(notes: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(
        "---\ncategory: fact\nkey: wifi_password\n---\nThe wifi password is hunter2.\n", encoding="utf-8"
    )
    os.utime(outside, (1_600_000_000, 1_600_000_000))
    shutil.copy2(outside, notes.root / "michael" / "fact" / "wifi_password.md")  # keeps the old mtime
    assert found(notes, "hunter2") == ["wifi_password"]
    assert "wifi_password" in list_keys(notes.root)


def test_folder_copied_in_is_found(notes: Vault, tmp_path: Path) -> None:
    source = tmp_path / "imported"
    source.mkdir()
    for n in range(3):
        (source / f"zebra_{n}.md").write_text(f"zebra fact number {n}\n", encoding="utf-8")
    shutil.copytree(source, notes.root / "michael" / "note" / "imported")
    assert sorted(found(notes, "zebra")) == ["zebra_0", "zebra_1", "zebra_2"]


def test_git_checkout_of_older_version_is_seen(notes: Vault) -> None:
    notes.store("fact", "release", "alpha build on staging")
    notes.store("fact", "release", "the beta build is on production now")
    assert found(notes, "beta") == ["release"]
    git(notes.root, "checkout", "HEAD~1", "--", "michael/fact/release.md")
    assert found(notes, "alpha") == ["release"]
    assert found(notes, "beta") == []
    assert notes.get("release").content == "alpha build on staging"


def test_git_checkout_of_branch_is_seen_by_cli(notes: Vault) -> None:
    root = notes.root
    git(root, "branch", "before")
    notes.store("fact", "release", "gamma release notes")
    notes.forget("favorite_food")
    assert search_keys(root, "gamma") == ["release"]
    git(root, "checkout", "-q", "before")
    assert search_keys(root, "gamma") == []
    assert search_keys(root, "pho") == ["favorite_food"]
    assert "release" not in list_keys(root)
    git(root, "checkout", "-q", "-")
    assert search_keys(root, "gamma") == ["release"]
    assert search_keys(root, "pho") == []


# --- writes update the index in the same call ---------------------------------------------------


def test_store_updates_the_index_in_the_same_call(notes: Vault) -> None:
    notes.store("fact", "wifi", "the password is hunter2")
    assert notes.refresh().changed == 0
    assert found(notes, "hunter2") == ["wifi"]


def test_store_over_existing_memory_replaces_its_indexed_content(notes: Vault) -> None:
    notes.store("preference", "favorite_food", "Michael likes laksa.")
    assert notes.refresh().changed == 0
    assert found(notes, "laksa") == ["favorite_food"]
    assert found(notes, "pho") == []


def test_forget_updates_the_index_in_the_same_call(notes: Vault) -> None:
    notes.forget("postgres_backup")
    assert notes.refresh().changed == 0
    assert found(notes, "postgres") == []


def test_verify_updates_the_index_in_the_same_call(notes: Vault) -> None:
    notes.store("fact", "rumor", "the office moves to Leipzig", source="agent")
    assert [h.memory.key for h in notes.search("leipzig", unverified=True)] == ["rumor"]
    notes.verify("rumor")
    assert notes.refresh().changed == 0
    assert notes.search("leipzig", unverified=True) == []
    assert notes.search("leipzig")[0].memory.verified is True


def test_cli_store_then_search_and_forget_then_search(notes: Vault) -> None:
    root = notes.root
    ok(in_vault(root, "store", "fact", "wifi", "the password is hunter2"))
    assert search_keys(root, "hunter2") == ["wifi"]
    ok(in_vault(root, "forget", "wifi"))
    assert search_keys(root, "hunter2") == []


# --- rebuilding --------------------------------------------------------------------------------


def answers(root: Path) -> dict[str, object]:
    """What a few read commands say, without scores (a rebuilt index may score a little differently)."""
    hits = json.loads(ok(in_vault(root, "search", "--json", "docker postgres pho deployed")).stdout)
    stats = json.loads(ok(in_vault(root, "stats", "--json")).stdout)
    return {
        "search": sorted((h["key"], h["snippet"]) for h in hits),
        "list": list_keys(root),
        "tags": json.loads(ok(in_vault(root, "tags", "--json")).stdout),
        "by_tag": [m["key"] for m in json.loads(ok(in_vault(root, "by-tag", "docker", "--json")).stdout)],
        "total": stats["total"],
    }


def test_deleted_state_folder_is_rebuilt_with_the_same_answers(notes: Vault) -> None:
    before = answers(notes.root)
    shutil.rmtree(notes.root / ".memfile")
    assert answers(notes.root) == before
    assert any(index_dir(notes.root).glob(f"_{INDEX_NAME}_*.toc"))


@pytest.mark.parametrize(
    "command",
    [
        ["search", "docker"],
        ["list"],
        ["show", "vps1_server"],
        ["recall"],
        ["by-tag", "docker"],
        ["tags"],
        ["stats"],
        ["expiring"],
    ],
)
def test_any_command_works_after_the_state_folder_is_deleted(notes: Vault, command: list[str]) -> None:
    shutil.rmtree(notes.root / ".memfile")
    result = ok(in_vault(notes.root, *command))
    assert "Traceback" not in result.stderr


def test_store_works_after_the_state_folder_is_deleted(notes: Vault) -> None:
    shutil.rmtree(notes.root / ".memfile")
    ok(in_vault(notes.root, "store", "fact", "wifi", "the password is hunter2"))
    assert search_keys(notes.root, "hunter2") == ["wifi"]
    assert search_keys(notes.root, "pho") == ["favorite_food"]


def test_deleted_state_folder_then_vault_search_in_same_process(notes: Vault) -> None:
    notes.close()
    shutil.rmtree(notes.root / ".memfile")
    fresh = Vault.open(notes.root)
    assert found(fresh, "docker") == ["vps1_server"]


def test_reindex_prints_counts(notes: Vault) -> None:
    result = ok(in_vault(notes.root, "reindex"))
    assert "indexed: 3 added, 0 updated, 0 removed, 0 skipped" in result.stdout


def test_reindex_json(notes: Vault) -> None:
    data = json.loads(ok(in_vault(notes.root, "reindex", "--json")).stdout)
    assert data == {"added": 3, "updated": 0, "removed": 0, "skipped": []}


def test_reindex_keeps_answers(notes: Vault) -> None:
    before = answers(notes.root)
    ok(in_vault(notes.root, "reindex"))
    assert answers(notes.root) == before


def test_reindex_through_vault_reports_counts(notes: Vault) -> None:
    report = notes.reindex()
    assert (report.added, report.updated, report.removed, report.skipped) == (3, 0, 0, [])
    assert found(notes, "docker") == ["vps1_server"]


def test_reindex_progress_callback_reaches_the_total(notes: Vault) -> None:
    calls: list[tuple[int, int]] = []
    notes.reindex(progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (3, 3)


def test_refresh_counts_added_updated_removed(notes: Vault) -> None:
    edited, deleted = memory_path(notes, "favorite_food"), memory_path(notes, "postgres_backup")
    (notes.root / "michael" / "note").mkdir()
    (notes.root / "michael" / "note" / "new.md").write_text("a new note\n", encoding="utf-8")
    edited.write_text(edited.read_text(encoding="utf-8").replace("pho", "pho and bun bo hue"), encoding="utf-8")
    deleted.unlink()
    report = notes.refresh()
    assert (report.added, report.updated, report.removed) == (1, 1, 1)
    assert notes.refresh().changed == 0


def test_malformed_file_is_in_reindex_skipped_list_with_reason(notes: Vault) -> None:
    (notes.root / "michael" / "fact" / "broken.md").write_text(BROKEN, encoding="utf-8")
    data = json.loads(ok(in_vault(notes.root, "reindex", "--json")).stdout)
    assert [(s["path"], s["line"]) for s in data["skipped"]] == [("michael/fact/broken.md", 4)]
    assert "YAML" in data["skipped"][0]["reason"]


def test_malformed_file_is_named_by_reindex_text_on_stderr(notes: Vault) -> None:
    (notes.root / "michael" / "fact" / "broken.md").write_text(BROKEN, encoding="utf-8")
    result = ok(in_vault(notes.root, "reindex"))
    assert "1 skipped" in result.stdout
    assert "skipped michael/fact/broken.md:4" in result.stderr


@pytest.mark.parametrize("command", [["search", "docker"], ["list"], ["by-tag", "docker"], ["stats"]])
def test_malformed_file_is_warned_about_on_stderr_of_commands(notes: Vault, command: list[str]) -> None:
    (notes.root / "michael" / "fact" / "broken.md").write_text(BROKEN, encoding="utf-8")
    for _ in range(2):  # on the command that indexes it, and on later ones that read the catalog
        result = ok(in_vault(notes.root, *command))
        assert "warning: michael/fact/broken.md:4" in result.stderr
        assert "michael/fact/broken.md" not in result.stdout


def test_malformed_file_does_not_hide_the_others(notes: Vault) -> None:
    (notes.root / "michael" / "fact" / "broken.md").write_text(BROKEN, encoding="utf-8")
    assert found(notes, "docker") == ["vps1_server"]
    assert [i.path for i in notes.issues] == ["michael/fact/broken.md"]


def test_fixed_malformed_file_is_indexed(notes: Vault) -> None:
    broken = notes.root / "michael" / "fact" / "broken.md"
    broken.write_text(BROKEN, encoding="utf-8")
    assert found(notes, "body") == []
    broken.write_text(BROKEN.replace("key: a: b", "key: mended").replace("body", "mended body text"), encoding="utf-8")
    assert found(notes, "mended") == ["mended"]
    assert notes.issues == []


def test_garbage_catalog_is_rebuilt(notes: Vault) -> None:
    before = answers(notes.root)
    catalog = index_dir(notes.root) / CATALOG_NAME
    for extra in ("-wal", "-shm"):
        Path(f"{catalog}{extra}").unlink(missing_ok=True)
    catalog.write_bytes(b"this is not a sqlite database at all" * 100)
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]
    assert answers(notes.root) == before


def segment_files(root: Path) -> list[Path]:
    """The files of the full-text index's segments (postings, terms, columns), not its TOC or lock."""
    return [p for p in index_dir(root).glob(f"{INDEX_NAME}_*") if not p.name.endswith("WRITELOCK")]


def largest_segment(root: Path) -> Path:
    return max(segment_files(root), key=lambda p: p.stat().st_size)


def test_truncated_segment_is_rebuilt_by_next_search(notes: Vault) -> None:
    segment = largest_segment(notes.root)
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size // 2])
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]
    assert process_search_keys(notes.root, "pho") == ["favorite_food"]


@pytest.mark.parametrize("command", [["search", "docker"], ["store", "fact", "wifi", "hunter2"]])
def test_a_command_that_finds_the_index_damaged_says_so_once(notes: Vault, command: list[str]) -> None:
    segment = largest_segment(notes.root)
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size // 2])
    result = succeeded(memfile(notes.root, *command))
    assert result.stderr.count("the index was damaged") == 1, result.stderr
    assert "the index was damaged" not in succeeded(memfile(notes.root, "search", "docker")).stderr
    assert process_search_keys(notes.root, "pho") == ["favorite_food"]


def test_emptied_segment_files_are_rebuilt_by_next_search(notes: Vault) -> None:
    for segment in segment_files(notes.root):
        segment.write_bytes(b"")
    assert process_search_keys(notes.root, "postgres") == ["postgres_backup"]


def test_garbage_toc_is_rebuilt_by_next_search(notes: Vault) -> None:
    for toc in index_dir(notes.root).glob(f"_{INDEX_NAME}_*.toc"):
        toc.write_bytes(b"garbage" * 50)
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]


def test_garbage_toc_and_catalog_are_rebuilt_by_next_search(notes: Vault) -> None:
    before = answers(notes.root)
    for toc in index_dir(notes.root).glob(f"_{INDEX_NAME}_*.toc"):
        toc.write_bytes(b"garbage" * 50)
    segment = largest_segment(notes.root)
    segment.write_bytes(segment.read_bytes()[:100])
    (index_dir(notes.root) / CATALOG_NAME).write_bytes(b"garbage" * 500)
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]
    assert answers(notes.root) == before


def test_damaged_index_is_rebuilt_for_vault_search_in_process(notes: Vault) -> None:
    notes.close()
    segment = largest_segment(notes.root)
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size // 3])
    assert found(Vault.open(notes.root), "docker") == ["vps1_server"]


@pytest.mark.parametrize("command", [["list", "--json"], ["tags", "--json"], ["store", "fact", "wifi", "hunter2"]])
def test_damaged_index_does_not_break_other_commands(notes: Vault, command: list[str]) -> None:
    segment = largest_segment(notes.root)
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size // 2])
    for toc in index_dir(notes.root).glob(f"_{INDEX_NAME}_*.toc"):
        toc.write_bytes(b"garbage" * 50)
    succeeded(memfile(notes.root, *command))
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]
    assert process_search_keys(notes.root, "pho") == ["favorite_food"]


def test_older_schema_index_is_replaced_by_current_one(notes: Vault) -> None:
    folder = index_dir(notes.root)
    for path in folder.iterdir():
        if INDEX_NAME in path.name:
            path.rename(folder / path.name.replace(f"_v{SCHEMA_VERSION}", "_v0"))
    assert not any(folder.glob(f"_{INDEX_NAME}_*.toc"))
    assert found(Vault.open(notes.root), "docker") == ["vps1_server"]
    assert any(folder.glob(f"_{INDEX_NAME}_*.toc"))
    assert search_keys(notes.root, "pho") == ["favorite_food"]


def test_dummy_older_schema_toc_does_not_count_as_an_index(notes: Vault) -> None:
    shutil.rmtree(notes.root / ".memfile")
    index_dir(notes.root).mkdir(parents=True)
    (index_dir(notes.root) / "_memories_v0_1.toc").write_bytes(b"old schema")
    assert process_search_keys(notes.root, "docker") == ["vps1_server"]
    assert any(index_dir(notes.root).glob(f"_{INDEX_NAME}_*.toc"))


# --- the writer lock held by another process -------------------------------------------------------

HOLD_WHOOSH_LOCK = textwrap.dedent(
    """\
    import sys, time
    from whoosh import index
    ix = index.open_dir(sys.argv[1], indexname=sys.argv[2])
    w = ix.writer()
    print('locked', flush=True)
    time.sleep(30)
    """
)

HOLD_VAULT_LOCK = textwrap.dedent(
    """\
    import fcntl, sys, time
    handle = open(sys.argv[1], 'a')
    fcntl.flock(handle, fcntl.LOCK_EX)
    print('locked', flush=True)
    time.sleep(30)
    """
)


def start_holder(script: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline().strip()  # type: ignore[union-attr]
    if line != "locked":
        proc.kill()
        raise AssertionError(f"lock holder did not start: {line!r} {proc.communicate()[1]}")
    return proc


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=10)
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]


@pytest.fixture
def whoosh_holder(notes: Vault) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the Whoosh index's writer lock of `notes`."""
    notes.refresh()
    notes.close()
    proc = start_holder(HOLD_WHOOSH_LOCK, str(index_dir(notes.root)), INDEX_NAME)
    try:
        yield proc
    finally:
        stop(proc)


def test_search_after_hand_edit_does_not_wait_for_a_held_lock(notes: Vault, whoosh_holder) -> None:
    set_lock_timeout(notes.root, 30)
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "okonomiyaki"), encoding="utf-8")
    started = time.monotonic()
    result = memfile(notes.root, "search", "--json", "okonomiyaki")
    assert time.monotonic() - started < 8  # far below lock_timeout: it did not wait
    assert result.returncode == 0, result.stderr
    assert [h["key"] for h in json.loads(result.stdout)] == ["favorite_food"]
    assert "**okonomiyaki**" in json.loads(result.stdout)[0]["snippet"]


def test_search_overlay_hides_the_old_content_of_a_hand_edited_file(notes: Vault, whoosh_holder) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "okonomiyaki"), encoding="utf-8")
    result = memfile(notes.root, "search", "--json", "pho")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_search_overlay_hides_a_file_deleted_by_hand(notes: Vault, whoosh_holder) -> None:
    memory_path(notes, "postgres_backup").unlink()
    result = memfile(notes.root, "search", "--json", "postgres")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_list_and_show_after_hand_edit_do_not_wait_for_a_held_lock(notes: Vault, whoosh_holder) -> None:
    set_lock_timeout(notes.root, 30)
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "okonomiyaki"), encoding="utf-8")
    (notes.root / "michael" / "note").mkdir()
    (notes.root / "michael" / "note" / "added.md").write_text("added while locked\n", encoding="utf-8")
    started = time.monotonic()
    listed = memfile(notes.root, "list", "--json")
    shown = memfile(notes.root, "show", "favorite_food")
    assert time.monotonic() - started < 10  # two processes, far below lock_timeout
    assert listed.returncode == 0, listed.stderr
    assert sorted(m["key"] for m in json.loads(listed.stdout)) == [
        "added",
        "favorite_food",
        "postgres_backup",
        "vps1_server",
    ]
    assert shown.returncode == 0, shown.stderr
    assert "okonomiyaki" in shown.stdout


def test_vault_search_in_process_uses_overlay_while_locked(notes: Vault, whoosh_holder) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "okonomiyaki"), encoding="utf-8")
    reader = Vault.open(notes.root)
    report = reader.refresh()
    assert report.changed == 0 and list(report.pending) == ["michael/preference/favorite_food.md"]
    assert found(reader, "okonomiyaki") == ["favorite_food"]
    assert found(reader, "pho") == []
    assert found(reader, "docker") == ["vps1_server"]


def test_store_exits_4_when_another_process_holds_the_index_lock(notes: Vault, whoosh_holder) -> None:
    set_lock_timeout(notes.root, 1)
    started = time.monotonic()
    result = memfile(notes.root, "store", "fact", "wifi", "the password is hunter2")
    elapsed = time.monotonic() - started
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert 1 <= elapsed < 5
    assert "busy" in result.stderr and "lock" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (notes.root / "michael" / "fact" / "wifi.md").exists()  # nothing written, nothing committed
    assert "wifi" not in git(notes.root, "log", "--format=%s")


def test_everything_works_again_once_the_holder_is_gone(notes: Vault) -> None:
    set_lock_timeout(notes.root, 1)
    notes.refresh()
    holder = start_holder(HOLD_WHOOSH_LOCK, str(index_dir(notes.root)), INDEX_NAME)
    try:
        path = memory_path(notes, "favorite_food")
        path.write_text(path.read_text(encoding="utf-8").replace("pho", "okonomiyaki"), encoding="utf-8")
        assert memfile(notes.root, "store", "fact", "wifi", "the password is hunter2").returncode == 4
    finally:
        stop(holder)
    stored = memfile(notes.root, "store", "fact", "router", "the router sits in the hallway")
    assert stored.returncode == 0, stored.stderr
    assert search_keys(notes.root, "hallway") == ["router"]
    assert search_keys(notes.root, "okonomiyaki") == ["favorite_food"]
    assert notes.refresh().changed == 0  # the hand edit was written to the index too


def test_store_works_at_once_after_the_lock_holder_is_killed(notes: Vault) -> None:
    set_lock_timeout(notes.root, 30)
    notes.refresh()
    holder = start_holder(HOLD_WHOOSH_LOCK, str(index_dir(notes.root)), INDEX_NAME)
    stop(holder, signal.SIGKILL)
    assert (index_dir(notes.root) / f"{INDEX_NAME}_WRITELOCK").exists()  # the lock file stays behind
    started = time.monotonic()
    result = memfile(notes.root, "store", "fact", "wifi", "the password is hunter2")
    assert time.monotonic() - started < 8  # far below lock_timeout: the lock was free at once
    assert result.returncode == 0, result.stderr
    assert search_keys(notes.root, "hunter2") == ["wifi"]


def test_a_writer_that_fails_to_open_lets_go_of_the_index_lock(notes: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer failing to open once it held Whoosh's lock (its index removed meanwhile: `rm -rf .memfile`
    under a server) kept the lock as long as its error lived (a server's worker keeps it in a Future):
    every later write of the process waited lock_timeout for it (a served status took 20 s)."""
    import fcntl

    from whoosh.index import FileIndex

    index = index_of(notes.root)
    store = index.store
    read_toc = FileIndex._read_toc

    def removed_meanwhile(self: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", str(index_dir(notes.root)))

    monkeypatch.setattr(FileIndex, "_read_toc", removed_meanwhile)
    with pytest.raises(FileNotFoundError) as failed:  # every file gone: a write it must make (the lock taken)
        store.sync({}, index.load, None, wait=True, present=lambda path: False)
    kept = failed.value  # as a worker's Future keeps it, traceback and all
    monkeypatch.setattr(FileIndex, "_read_toc", read_toc)
    fd = os.open(index_dir(notes.root) / f"{INDEX_NAME}_WRITELOCK", os.O_WRONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while anything holds it
    finally:
        os.close(fd)
    assert kept.__traceback__ is not None


def test_store_exits_4_without_writing_when_the_vault_lock_is_held(notes: Vault) -> None:
    set_lock_timeout(notes.root, 1)
    commits = commit_count(notes.root)
    holder = start_holder(HOLD_VAULT_LOCK, str(notes.root / ".memfile" / "lock"))
    try:
        started = time.monotonic()
        result = memfile(notes.root, "store", "fact", "wifi", "the password is hunter2")
        assert time.monotonic() - started < 5
    finally:
        stop(holder)
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert "busy" in result.stderr
    assert not (notes.root / "michael" / "fact" / "wifi.md").exists()
    assert commit_count(notes.root) == commits


def test_store_works_at_once_after_the_vault_lock_holder_is_killed(notes: Vault) -> None:
    set_lock_timeout(notes.root, 30)
    holder = start_holder(HOLD_VAULT_LOCK, str(notes.root / ".memfile" / "lock"))
    stop(holder, signal.SIGKILL)
    started = time.monotonic()
    result = memfile(notes.root, "store", "fact", "wifi", "the password is hunter2")
    assert time.monotonic() - started < 8  # far below lock_timeout: the lock was free at once
    assert result.returncode == 0, result.stderr


# --- lazy imports ------------------------------------------------------------------------------------

SHOW_MODULES = textwrap.dedent(
    """\
    import json, sys
    from memfile.cli import main
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
    names = {name.split('.')[0] for name in sys.modules} | set(sys.modules)
    loaded = sorted(names & {'git', 'watchdog', 'whoosh', 'mcp', 'memfile.recall', 'memfile.git', 'memfile.store_queue',
                             'memfile.git.merge', 'memfile.doctor'})
    print('MODULES ' + json.dumps(loaded))
    """
)


def loaded_modules(*args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", SHOW_MODULES, *args], capture_output=True, text=True, timeout=30)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("MODULES "), (result.stdout, result.stderr)
    return set(json.loads(last.removeprefix("MODULES ")))


@pytest.mark.parametrize(
    "command",
    [
        ["search", "docker"],
        ["list"],
        ["recall"],
        ["show", "vps1_server"],
        ["by-tag", "docker"],
        ["tags"],
        ["stats"],
        ["expiring"],
    ],
)
def test_read_commands_never_import_git_or_watchdog(notes: Vault, command: list[str]) -> None:
    assert loaded_modules("--vault", str(notes.root), *command) & {"git", "watchdog", "mcp"} == set()


def test_search_after_hand_edit_does_not_import_git(notes: Vault) -> None:
    path = memory_path(notes, "favorite_food")
    path.write_text(path.read_text(encoding="utf-8").replace("pho", "ramen"), encoding="utf-8")
    assert loaded_modules("--vault", str(notes.root), "search", "ramen") & {"git", "watchdog", "mcp"} == set()


@pytest.mark.parametrize("command", [["--help"], ["search", "--help"], ["list"], ["recall"]])
def test_help_list_and_recall_never_import_whoosh(notes: Vault, command: list[str]) -> None:
    notes.refresh()
    assert "whoosh" not in loaded_modules("--vault", str(notes.root), *command)


@pytest.mark.parametrize("command", [["search", "docker"], ["list"], ["show", "vps1_server"], ["--help"], ["tags"]])
def test_commands_that_do_not_recall_never_import_memfile_recall(notes: Vault, command: list[str]) -> None:
    assert "memfile.recall" not in loaded_modules("--vault", str(notes.root), *command)


GIT_HALF = {"memfile.git", "memfile.store_queue", "memfile.git.merge", "memfile.doctor"}


@pytest.mark.parametrize(
    "command", [["search", "docker"], ["list"], ["recall"], ["show", "vps1_server"], ["--help"], ["stats"]]
)
def test_reads_never_import_the_git_half(notes: Vault, command: list[str]) -> None:
    assert loaded_modules("--vault", str(notes.root), *command) & GIT_HALF == set()


def test_the_git_half_loads_when_used(notes: Vault) -> None:
    assert {"memfile.git", "memfile.store_queue"} <= loaded_modules(
        "--vault", str(notes.root), "store", "fact", "x", "y"
    )
    assert {"memfile.git", "memfile.doctor"} <= loaded_modules("--vault", str(notes.root), "doctor")
    assert "memfile.git" in loaded_modules("--vault", str(notes.root), "log")


def test_recall_and_the_package_names_load_memfile_recall_when_used(notes: Vault) -> None:
    assert "memfile.recall" in loaded_modules("--vault", str(notes.root), "recall")
    assert "memfile.recall" in loaded_modules("--vault", str(notes.root), "recall", "--query", "docker")
    script = (
        "import sys, memfile; assert 'memfile.recall' not in sys.modules; "
        "from memfile import RecallItem, RecallReport, estimate_tokens; import memfile.recall as r; "
        "assert (RecallItem, RecallReport, estimate_tokens) == (r.RecallItem, r.RecallReport, r.estimate_tokens); "
        "assert 'RecallItem' in memfile.__all__; print(memfile.estimate_tokens('abcdefgh'))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.strip() == "2", result.stderr
    result = subprocess.run(
        [sys.executable, "-c", "import memfile; memfile.nothing_here"], capture_output=True, text=True, timeout=30
    )
    assert "AttributeError: module 'memfile' has no attribute 'nothing_here'" in result.stderr


def test_reindex_does_not_count_skipped_files_as_added(vault: Vault) -> None:
    vault.store("fact", "one", "first")
    vault.store("fact", "two", "second")
    (vault.root / "michael" / "fact" / "broken.md").write_text("---\nkey: [\n---\nx\n", encoding="utf-8")
    report = vault.reindex()
    assert (report.added, report.updated, len(report.skipped)) == (2, 0, 1)


def test_a_full_diff_listed_before_another_writer_stored_never_drops_that_memory(tmp_path: Path) -> None:
    """The race behind a stale `list` in the MCP server: the watcher's full diff listed the files, then a
    store created and indexed one, then the watcher got the lock and took the new file for a removed one."""
    from memfile.index.source import stat_walk

    watcher = Vault.init(tmp_path / "v", "michael")
    watcher.store("fact", "old", "An older memory")
    listed = stat_walk(watcher.mind_dir, watcher.root)  # the watcher's snapshot, before the store
    writer = Vault.open(watcher.root, "michael")
    writer.store("fact", "new", "Stored while the watcher was listing")
    index = index_of(watcher.root)
    store = index.store
    store.sync(listed, index.load, None, wait=True, present=lambda path: (watcher.root / path).exists())
    # what a vouching watcher lets every command read without a diff: the catalog itself
    assert {m.key for m in store.catalog.memories()} == {"old", "new"}
    assert [h.memory.key for h in store.search_counted("stored while listing", SearchOptions(), utc_now())[0]] == [
        "new"
    ]


def _big_mind(tmp_path: Path, files: int) -> Vault:
    vault = Vault.init(tmp_path / "v", "m", "M")
    folder = vault.mind_dir / "fact"
    folder.mkdir()
    for i in range(files):
        (folder / f"k{i}.md").write_text(
            f"---\ncategory: fact\nkey: k{i}\n---\nLighthouse number {i}.\n", encoding="utf-8"
        )
    return vault


@pytest.mark.slow
def test_a_process_running_threads_builds_a_big_index_itself_when_no_fresh_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memfile.index import BULK

    vault = _big_mind(tmp_path, BULK)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))  # an embedded Python, say
    with another_thread_running():
        reader = Vault.open(vault.root, "m")
        report = reader.refresh()
        hits = reader.search("lighthouse 77")
    assert report.added == BULK and hits[0].memory.key == "k77"
    reader.close()


def test_a_writer_holds_an_eighth_of_the_machines_memory_from_256_mb_to_1_gb(monkeypatch: pytest.MonkeyPatch) -> None:
    from memfile.index import store as index

    page = 4096
    for total_mb, expected in ((1024, 256), (2048, 256), (4096, 512), (6000, 750), (24 * 1024, 1024), (10**6, 1024)):
        monkeypatch.setattr(
            index.os, "sysconf", lambda name, mb=total_mb: mb * 2**20 // page if name == "SC_PHYS_PAGES" else page
        )
        assert index.pool_mb() == expected, total_mb

    def unknown(name: str) -> int:
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(index.os, "sysconf", unknown)
    assert index.pool_mb() == 256


# ==============================================================================================================
# Issue 21: the index never serves what the files no longer say, and reads name what they cannot read.
#
# Edits that keep a file's size, mtime and inode (a same-length edit with the
# mtime put back, files re-created over reused inodes, 1-second timestamps) are
# seen; an unreadable category folder is a warning and a doctor problem; a vault
# whose index cannot be written is read from its files; snippets never repeat
# text; doctor calls misplaced only what names another place. Real vaults, real
# processes (a read-only bind mount and dropped capabilities where the test runs
# as root, which ignores permissions).
# ==============================================================================================================


NOTE = "---\ncategory: fact\nkey: door\n---\nThe door code is 1234.\n"


def same_length_edit(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` (same length) in place, and put the mtime back as it was."""
    assert len(old) == len(new)
    info = path.stat()
    data = path.read_bytes().replace(old.encode(), new.encode())
    assert len(data) == info.st_size
    with open(path, "r+b") as handle:  # in place: the inode stays
        handle.write(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


# --- item 1: edits that keep size, mtime and inode ----------------------------------------------


def test_a_same_length_edit_with_the_mtime_put_back_is_seen_by_show_search_and_status(vault: Vault) -> None:
    vault.store("fact", "door", "The door code is 1234.")
    root = vault.root
    path = root / "michael" / "fact" / "door.md"
    time.sleep(0.05)  # the store's own read is then safely older than the edit (the racy case is tested below)
    ok(in_vault(root, "search", "door"))  # indexed, and the walk vouched for
    before = path.stat()
    same_length_edit(path, "1234", "9876")
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert "9876" in ok(in_vault(root, "show", "fact/door")).stdout
    assert "fact/door" in ok(in_vault(root, "search", "9876")).stdout
    with Vault.open(root) as reader:
        assert reader.get("fact/door").content.startswith("The door code is 9876")


def test_status_counts_a_same_length_edit_as_stale(vault: Vault) -> None:
    vault.store("fact", "door", "The door code is 1234.")
    time.sleep(0.05)
    vault.list()
    same_length_edit(vault.root / "michael" / "fact" / "door.md", "1234", "9876")
    with Vault.open(vault.root) as reader:
        assert reader.status()["stale"] == ["michael/fact/door.md"]
        assert reader.get("fact/door").content.startswith("The door code is 9876")
        assert reader.status()["stale"] == []


def test_two_files_recreated_with_swapped_same_length_contents_are_seen(vault: Vault) -> None:
    vault.store("fact", "alpha", "Alpha is red.")
    vault.store("fact", "bravo", "Bravo is tan.")
    root = vault.root
    alpha, bravo = root / "michael" / "fact" / "alpha.md", root / "michael" / "fact" / "bravo.md"
    time.sleep(0.05)
    vault.list()
    stats = {p: p.stat() for p in (alpha, bravo)}
    texts = {p: p.read_text(encoding="utf-8") for p in (alpha, bravo)}
    swapped = {alpha: texts[alpha].replace("red", "tan"), bravo: texts[bravo].replace("tan", "red")}
    for order in ((alpha, bravo), (bravo, alpha)):  # try to get each path its old inode back, as the kernel often gives
        for p in (alpha, bravo):
            p.unlink()
        for p in order:
            p.write_text(swapped[p], encoding="utf-8")
        if all(p.stat().st_ino == stats[p].st_ino for p in (alpha, bravo)):
            break
    for p in (alpha, bravo):
        os.utime(p, ns=(stats[p].st_atime_ns, stats[p].st_mtime_ns))
    with Vault.open(root) as reader:
        assert reader.get("fact/alpha").content.strip() == "Alpha is tan."
        assert reader.get("fact/bravo").content.strip() == "Bravo is red."
        assert [h.memory.ref for h in reader.search("tan")] == ["fact/alpha"]


def test_whole_second_timestamps_an_edit_in_the_same_second_is_seen(vault: Vault) -> None:
    """A file system with 1-second timestamps: the store's file gets a whole-second mtime, then a
    one-digit fix saved within that second keeps size, mtime and inode."""
    root = vault.root
    path = root / "michael" / "fact" / "door.md"
    vault.store("fact", "door", "The door code is 1234.")
    second = path.stat().st_mtime_ns // 1_000_000_000
    os.utime(path, (second, second))  # what such a file system stores
    assert "1234" in ok(in_vault(root, "show", "fact/door")).stdout
    same_length_edit(path, "1234", "1235")
    assert path.stat().st_mtime_ns == second * 1_000_000_000
    assert "1235" in ok(in_vault(root, "show", "fact/door")).stdout
    assert "fact/door" in ok(in_vault(root, "search", "1235")).stdout
    assert "1235" in ok(in_vault(root, "recall")).stdout


def test_a_file_read_within_its_racy_window_is_read_again_even_when_its_whole_stat_is_unchanged(vault: Vault) -> None:
    """The racy-clean rule alone (git's): on a coarse file system an edit in the same tick as the
    read leaves every stat field, ctime included, as the index recorded it. The index records such a
    file as not yet vouched for, so the next look reads it again whatever its stat says."""
    root = vault.root
    path = write(root / "michael" / "fact" / "door.md", NOTE)
    # changed "just now" as the reading process sees it: a clock a little ahead (a network share's),
    # or a read within the second of the change on a 1-second file system
    soon = (time.time_ns() // 1_000_000_000 + 3) * 1_000_000_000
    os.utime(path, ns=(soon, soon))
    vault.list()
    index = index_of(root)
    walk = stat_walk(vault.mind_dir, root)
    recorded = index.store.catalog.recorded()[path.relative_to(root).as_posix()]
    assert recorded != walk["michael/fact/door.md"]  # read within its racy window: recorded as unsure
    path.write_text(NOTE.replace("1234", "5678"), encoding="utf-8")
    # what a coarse file system would report: the very stat the walk saw before the edit
    report = index.store.sync(walk, index.load)
    assert report.updated == 1
    assert index.store.catalog.memories()[0].content.startswith("The door code is 5678")


def test_a_racy_file_that_did_not_change_is_confirmed_without_a_full_text_write(vault: Vault) -> None:
    from memfile.index.catalog import FINE_NS, UNSURE

    root = vault.root
    path = write(root / "michael" / "fact" / "door.md", NOTE)
    soon = time.time_ns() + 300_000_000  # changed "just now" for the read below (see the test above)
    os.utime(path, ns=(soon, soon))
    vault.list()
    assert recorded(root)["michael/fact/door.md"][0] == UNSURE
    generation = sorted(p.name for p in index_dir(root).glob("_memories_v*.toc"))
    while time.time_ns() <= soon + FINE_NS:  # then safely older than any read from here on
        time.sleep(0.05)
    with Vault.open(root) as reader:
        assert reader.status()["stale"] == []  # read and compared, not written
        assert recorded(root)["michael/fact/door.md"][0] == UNSURE
        assert reader.get("fact/door").content.startswith("The door code is 1234")
        assert recorded(root) == stat_walk(reader.mind_dir, root)  # vouched for now
    assert sorted(p.name for p in index_dir(root).glob("_memories_v*.toc")) == generation  # Whoosh untouched


def test_an_index_of_the_former_stat_format_is_rebuilt_not_read(vault: Vault) -> None:
    """The catalog's stat gained the ctime: the schema version moved on, so the index an older memfile
    made (three-field stats, which would never equal a walk's again) is deleted and rebuilt."""
    from memfile.index import CATALOG_NAME, INDEX_NAME, SCHEMA_VERSION

    assert SCHEMA_VERSION >= 13 and INDEX_NAME.endswith(str(SCHEMA_VERSION))
    vault.store("fact", "door", "The door code is 1234.")
    vault.close()
    folder = vault.root / ".memfile" / "index" / "michael"
    for path in folder.iterdir():  # what memfile 12 left: its files under its own version's names
        path.rename(folder / path.name.replace(f"_v{SCHEMA_VERSION}", "_v12"))
    with Vault.open(vault.root) as reader:
        assert reader.get("fact/door").content.startswith("The door code is 1234")
        assert all(len(stat) == 4 for stat in recorded(reader.root).values())
    assert (folder / CATALOG_NAME).exists() and not list(folder.glob("*_v12*"))


# --- item 4: an unreadable category folder ---------------------------------------------------------


def _without_root_powers() -> None:
    """For a child process run as root: drop the capabilities that let root read any folder
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding set; the exec'd program then lacks them."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2):
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def memfile_process(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`memfile --vault ROOT ARGS` in a process that permissions bind (root's powers dropped)."""
    return subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), *args],
        capture_output=True,
        text=True,
        preexec_fn=_without_root_powers,
        timeout=120,
    )


@pytest.fixture
def locked_folder(vault: Vault) -> Iterator[Path]:
    vault.store("fact", "door", "The door code is 1234.")
    vault.store("skill", "origami", "Folds cranes.")
    vault.list()
    folder = vault.root / "michael" / "fact"
    folder.chmod(0)
    probe = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])", str(folder)],
        preexec_fn=_without_root_powers,
        capture_output=True,
    )
    if probe.returncode == 0:  # pragma: no cover - a system where the folder stays listable
        folder.chmod(0o755)
        pytest.skip("cannot make a folder unreadable here")
    yield vault.root
    folder.chmod(0o755)


def test_an_unreadable_category_folder_is_named_on_reads_and_the_rest_is_served(locked_folder: Path) -> None:
    root = locked_folder
    listed = memfile_process(root, "list")
    assert listed.returncode == 0, listed.stderr
    assert "skill/origami" in listed.stdout
    assert "michael/fact" in listed.stderr and "cannot be read" in listed.stderr
    searched = memfile_process(root, "search", "cranes")
    assert searched.returncode == 0 and "skill/origami" in searched.stdout, searched.stderr
    assert "michael/fact" in searched.stderr
    status = memfile_process(root, "status", "--json")
    assert status.returncode == 0, status.stderr
    unreadable = json.loads(status.stdout)["unreadable"]
    assert [u["path"] for u in unreadable] == ["michael/fact/"] and "cannot be read" in unreadable[0]["reason"]


def test_an_unreadable_category_folder_is_a_doctor_problem(locked_folder: Path) -> None:
    doctor = memfile_process(locked_folder, "doctor")
    assert doctor.returncode == 5, (doctor.stdout, doctor.stderr)
    assert "michael/fact" in doctor.stdout and "cannot be read" in doctor.stdout


def test_a_folder_readable_again_is_served_again_and_its_warning_goes(locked_folder: Path) -> None:
    assert "michael/fact/" in memfile_process(locked_folder, "list").stderr  # indexed as unreadable
    (locked_folder / "michael" / "fact").chmod(0o755)
    listed = memfile_process(locked_folder, "list")
    assert listed.returncode == 0 and "fact/door" in listed.stdout and "cannot be read" not in listed.stderr
    assert ok(in_vault(locked_folder, "doctor")).stdout.count("cannot be read") == 0


# --- item 8: snippets ---------------------------------------------------------------------------


def test_a_snippet_never_repeats_text_when_its_passages_overlap(sample_copy: Path) -> None:
    out = ok(in_vault(sample_copy, "search", "pho")).stdout
    assert out.count("bò tái. Go-to place in Berlin") == 1
    assert "**phở**" in out.lower() or "**pho" in out.lower()


def test_snippet_merges_overlapping_passages_and_keeps_apart_ones() -> None:
    text = "Loves phở bò tái. Go-to place in Berlin: Nhà hàng Phở Hà Nội, Kantstraße. Suggest it."
    merged = snippet(text, frozenset({"pho"}))
    assert merged.count("Go-to place") == 1 and merged.count("**") == 4 and " … " not in merged
    far = "zebra " + "filler words here " * 30 + "zebra at the end"
    apart = snippet(far, frozenset({"zebra"}))
    assert apart.count("**zebra**") == 2 and " … " in apart


# --- item 9: doctor and memories outside category folders ---------------------------------------------


def test_a_memory_in_the_users_own_folder_is_not_misplaced_and_fix_leaves_it(vault: Vault) -> None:
    root = vault.root
    write(root / "michael" / "journal" / "2026" / "trip.md", "---\ntags: [travel]\n---\nBudapest in May.\n")
    write(root / "michael" / "journal" / "plain.md", "Just a note.\n")
    commit_by_hand(root, "michael")
    result = ok(in_vault(root, "doctor"))
    assert "misplaced" not in result.stdout
    ok(in_vault(root, "doctor", "--fix"))
    assert (root / "michael" / "journal" / "2026" / "trip.md").exists()
    assert not (root / "michael" / "note" / "trip.md").exists()


@pytest.mark.parametrize(
    "front_matter, place",
    [
        ("category: fact", "michael/fact/trip.md"),
        ("key: voyage", "michael/note/voyage.md"),
        ("category: skill\nkey: trip", "michael/skill/trip.md"),
    ],
)
def test_a_file_naming_another_category_or_key_is_misplaced(vault: Vault, front_matter: str, place: str) -> None:
    root = vault.root
    write(root / "michael" / "journal" / "2026" / "trip.md", f"---\n{front_matter}\n---\nBudapest in May.\n")
    commit_by_hand(root, "michael")
    result = fails(in_vault(root, "doctor"), 5)
    assert "misplaced" in result.stdout and place in result.stdout


def test_a_file_naming_the_category_and_key_it_sits_at_is_not_misplaced(vault: Vault) -> None:
    root = vault.root
    write(root / "michael" / "journal" / "trip.md", "---\ncategory: note\nkey: trip\n---\nBudapest.\n")
    write(root / "michael" / "fact" / "deep" / "x.md", "---\nkey: x\n---\nDeep.\n")
    commit_by_hand(root, "michael")
    assert {f.kind for f in vault.doctor().problems} == set()


# --- item 12: a vault whose index cannot be written -----------------------------------------------


@pytest.fixture
def no_state_folder(vault: Vault) -> Path:
    """A vault whose `.memfile` is a regular file: no index can be made (as on read-only media)."""
    vault.store("fact", "door", "The door code is 1234.", tags=["home"])
    vault.store("skill", "origami", "Folds cranes.")
    vault.close()
    root = vault.root
    shutil.rmtree(root / ".memfile")
    (root / ".memfile").write_text("in the way", encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "args, expected",
    [
        (("list",), "fact/door"),
        (("show", "fact/door"), "1234"),
        (("search", "cranes"), "skill/origami"),
        (("search", "door", "--tag", "home"), "fact/door"),
        (("recall",), "1234"),
        (("recall", "--query", "cranes"), "Folds cranes"),
        (("status",), "michael"),
        (("stats",), "michael"),
        (("tags",), "home"),
    ],
)
def test_reads_answer_from_the_files_when_no_index_can_be_made(
    no_state_folder: Path, args: tuple[str, ...], expected: str
) -> None:
    result = ok(in_vault(no_state_folder, *args))
    assert expected in result.stdout
    assert "unexpected error" not in result.stderr
    assert (no_state_folder / ".memfile").read_text(encoding="utf-8") == "in the way"


def test_the_python_api_searches_without_an_index(no_state_folder: Path) -> None:
    with Vault.open(no_state_folder) as reader:
        hits = reader.search("cranes OR door")
        assert {h.memory.ref for h in hits} == {"skill/origami", "fact/door"}
        assert reader.notices and "reading the files" in reader.notices[0]  # the notices of that call
        assert reader.search("door", category="skill") == []


def test_a_write_where_no_index_can_be_made_fails_clearly_and_leaves_nothing(no_state_folder: Path) -> None:
    before = git(no_state_folder, "rev-parse", "HEAD")
    result = fails(in_vault(no_state_folder, "store", "fact", "new", "Something new."), 4)
    assert "cannot write" in result.stderr and "unexpected" not in result.stderr
    assert not (no_state_folder / "michael" / "fact" / "new.md").exists()
    assert git(no_state_folder, "rev-parse", "HEAD") == before


@pytest.mark.skipif(not mount_namespaces(), reason="needs root and mount namespaces (unshare -m)")
@pytest.mark.parametrize("indexed", [True, False], ids=["with-index", "without-index"])
def test_a_read_only_vault_answers_reads_and_refuses_writes(vault: Vault, indexed: bool) -> None:
    """The vault on a read-only bind mount (a clone on read-only media), with its index or none."""
    vault.store("fact", "door", "The door code is 1234.")
    vault.store("skill", "origami", "Folds cranes.")
    vault.close()
    root = vault.root
    if not indexed:
        shutil.rmtree(root / ".memfile")
    else:
        time.sleep(0.05)
        # In a process of its own: an in-process read could leave the catalog open, to be written when collected.
        listed = subprocess.run(memfile_command(root, "list"), shell=True, capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, listed.stderr
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    out = root.parent / "out"
    out.mkdir()
    script = f"mount --bind '{root}' '{root}' && mount -o remount,bind,ro '{root}' || exit 99\n"
    for n, args in enumerate(
        [
            ("list",),
            ("search", "cranes"),
            ("recall",),
            ("show", "fact/door"),
            ("status",),
            ("store", "fact", "new", "Something new."),
        ]
    ):
        script += f"{memfile_command(root, *args)} >'{out}/{n}.out' 2>'{out}/{n}.err'; echo $? >'{out}/{n}.rc'\n"
    done = in_private_mounts(script)
    if done.returncode == 99:
        pytest.skip("a read-only bind mount is not allowed here")
    codes = [int((out / f"{n}.rc").read_text()) for n in range(6)]
    outs = [(out / f"{n}.out").read_text() for n in range(6)]
    errs = [(out / f"{n}.err").read_text() for n in range(6)]
    assert codes == [0, 0, 0, 0, 0, 4], errs
    assert "fact/door" in outs[0] and "skill/origami" in outs[1] and "1234" in outs[2] and "1234" in outs[3]
    assert "read-only" in errs[5] and "unexpected" not in "".join(errs)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(not mount_namespaces(), reason="needs root and mount namespaces (unshare -m)")
def test_a_full_disk_reads_from_the_files_and_a_write_fails_clearly(tmp_path: Path) -> None:
    """The vault on a tiny tmpfs filled to the last byte: the index cannot grow, reads still answer."""
    source = tmp_path / "source"
    shutil.copytree(SAMPLE_VAULT, source)
    mount = tmp_path / "disk"
    mount.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    root = mount / "vault"
    script = (
        f"mount -t tmpfs -o size=2m tmpfs '{mount}' || exit 99\n"
        f"cp -r '{source}' '{root}' && git -C '{root}' init -q && "
        f"git -C '{root}' -c user.name=a -c user.email=a@b add -A && "
        f"git -C '{root}' -c user.name=a -c user.email=a@b commit -qm init || exit 98\n"
        f"dd if=/dev/zero of='{mount}/filler' bs=4k 2>/dev/null; true\n"
    )
    for n, args in enumerate([("list",), ("search", "pho"), ("recall",), ("store", "fact", "new", "Something new.")]):
        script += f"{memfile_command(root, *args)} >'{out}/{n}.out' 2>'{out}/{n}.err'; echo $? >'{out}/{n}.rc'\n"
    script += f"git -C '{root}' status --porcelain >'{out}/git'; ls -a '{root}/michael/fact' >'{out}/ls'\n"
    done = in_private_mounts(script)
    if done.returncode == 99:
        pytest.skip("cannot mount a tmpfs here")
    assert done.returncode == 0, done.stderr
    codes = [int((out / f"{n}.rc").read_text()) for n in range(4)]
    errs = [(out / f"{n}.err").read_text() for n in range(4)]
    assert codes == [0, 0, 0, 4], errs
    assert "preference/favorite_food" in (out / "1.out").read_text()
    assert "disk is full" in errs[3] and "unexpected" not in "".join(errs)
    assert (out / "git").read_text() == ""  # nothing half-written: no stray file, no uncommitted change
    assert ".memfile-tmp" not in (out / "ls").read_text() and "new.md" not in (out / "ls").read_text()


# --- item 23: status lists the unreadable files -------------------------------------------------------


def test_status_lists_the_unreadable_files(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "door", "The door code is 1234.")
    write(root / "michael" / "fact" / "broken.md", "---\nid: mem_broken0001\ncategory: fact\nkey: a: b\n---\nbody\n")
    write(root / "michael" / "fact" / "binary.md", "")
    (root / "michael" / "fact" / "binary.md").write_bytes(b"\xff\xfe not utf-8")
    with Vault.open(root) as reader:
        reader.list()  # status tells what the last read found
        unreadable = reader.status()["unreadable"]
    assert [u["path"] for u in unreadable] == ["michael/fact/binary.md", "michael/fact/broken.md"]
    assert unreadable[1]["line"] == 4
    assert all(u["reason"] for u in unreadable)
    data = json.loads(ok(in_vault(root, "status", "--json")).stdout)
    assert [u["path"] for u in data["unreadable"]] == ["michael/fact/binary.md", "michael/fact/broken.md"]
