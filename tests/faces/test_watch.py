"""The watcher: the index follows edits from any editor, in process and as `memfile watch`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BROKEN, fails, git, in_vault, recorded, wait_until, watcher_vouches, write

from memfile import Conflict, Vault, Watcher
from memfile.files import lock_holder
from memfile.index import RefreshReport
from memfile.watch import MindsWatcher


def indexed(root: Path) -> set[str]:
    """What the index has recorded, read without bringing it in line (status does not sync)."""
    with Vault.open(root) as vault:
        state = vault.status()
        return set(recorded(vault.root, vault.mind)) if not state["stale"] else {"(stale)"}


@pytest.fixture
def watched(vault: Vault) -> Iterator[Vault]:
    vault.close()
    with Vault.open(vault.root, watch=True) as watching:
        assert watching._watcher.wait_idle(5)
        yield watching


def test_a_new_file_is_indexed_within_a_second(watched: Vault) -> None:
    path = write(watched.root / "michael" / "fact" / "wifi.md", "The wifi password is zebra42\n")
    started = time.monotonic()
    assert wait_until(lambda: "michael/fact/wifi.md" in indexed(watched.root), 3)
    assert time.monotonic() - started < 1.5
    assert path.exists()


def test_atomic_replace_and_editor_temp_files(watched: Vault) -> None:
    folder = watched.root / "michael" / "note"
    write(folder / "todo.md", "first version\n")
    assert wait_until(lambda: "michael/note/todo.md" in indexed(watched.root), 5)
    write(folder / ".todo.md.swp", "swap")
    write(folder / "4913", "")
    write(folder / "todo.md~", "backup")
    write(folder / "todo.md___jb_tmp___", "second version with okapi\n")
    os.replace(folder / "todo.md___jb_tmp___", folder / "todo.md")
    assert wait_until(lambda: [h.memory.key for h in Vault.open(watched.root).search("okapi")] == ["todo"], 5)
    assert indexed(watched.root) == {"michael/note/todo.md"}


def test_delete_and_move_between_category_folders(watched: Vault) -> None:
    path = write(watched.root / "michael" / "note" / "wifi.md", "zebra42\n")
    assert wait_until(lambda: "michael/note/wifi.md" in indexed(watched.root), 5)
    (watched.root / "michael" / "fact").mkdir()
    os.rename(path, watched.root / "michael" / "fact" / "wifi.md")
    assert wait_until(lambda: indexed(watched.root) == {"michael/fact/wifi.md"}, 5)
    os.remove(watched.root / "michael" / "fact" / "wifi.md")
    assert wait_until(lambda: indexed(watched.root) == set(), 5)


def test_a_folder_moved_in_is_indexed(watched: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "skill"
    for i in range(5):
        write(outside / f"s{i}.md", f"skill number {i}\n")
    os.rename(outside, watched.root / "michael" / "skill")
    assert wait_until(lambda: len(indexed(watched.root)) == 5, 5)


def test_a_burst_lands_in_a_few_batches(watched: Vault) -> None:
    before = watched._watcher.batches
    for i in range(300):
        write(watched.root / "michael" / "fact" / f"burst_{i}.md", f"fact {i}\n")
    assert wait_until(lambda: len(indexed(watched.root)) == 300, 10)
    assert watched._watcher.batches - before <= 6


def test_a_malformed_file_is_reported_and_the_watcher_goes_on(vault: Vault) -> None:
    seen: list[str] = []
    watcher = Watcher(vault, on_batch=lambda report, paths: seen.extend(str(i) for i in report.skipped)).start()
    try:
        assert watcher.wait_idle(5)
        write(vault.root / "michael" / "fact" / "broken.md", BROKEN)
        assert wait_until(lambda: any("broken.md:4" in s for s in seen), 5)
        write(vault.root / "michael" / "fact" / "fine.md", "still indexed\n")
        assert wait_until(lambda: "michael/fact/fine.md" in indexed(vault.root), 5)
    finally:
        watcher.stop()


@pytest.mark.parametrize("line", ["from memfile import Vault", "from memfile.vault import Vault"])
def test_either_import_of_vault_opens_with_a_watcher(vault: Vault, line: str) -> None:
    """No wiring by import side effect: a fresh process that never imported memfile.watch gets a watcher too."""
    vault.close()
    code = f"""{line}
import sys
with Vault.open(sys.argv[1], watch=True) as v:
    assert type(v._watcher).__name__ == "Watcher" and v._watcher.wait_idle(5), v._watcher
"""
    subprocess.run([sys.executable, "-c", code, str(vault.root)], check=True, timeout=60)


def test_one_watcher_per_mind(watched: Vault) -> None:
    with pytest.raises(Conflict) as caught:
        Watcher(Vault.open(watched.root)).start()
    assert f"pid {os.getpid()}" in str(caught.value)
    assert "already watches" in fails(in_vault(watched.root, "watch"), 4).stderr


def test_status_names_the_running_watcher(watched: Vault) -> None:
    assert Vault.open(watched.root).status()["watcher_pid"] == os.getpid()
    watched.close()
    assert Vault.open(watched.root).status()["watcher_pid"] is None


def test_autocommit_records_hand_edits_in_one_commit(vault: Vault) -> None:
    vault.store("fact", "wifi", "zebra42")
    watcher = Watcher(vault, autocommit=True).start()
    try:
        assert watcher.wait_idle(5)
        path = vault.root / "michael" / "fact" / "wifi.md"
        path.write_text(path.read_text(encoding="utf-8").replace("zebra42", "lion77"), encoding="utf-8")
        write(vault.root / "michael" / "note" / "new.md", "a note\n")
        assert wait_until(lambda: git(vault.root, "log", "-1", "--format=%s").startswith("record hand edits (2)"), 5)
        assert git(vault.root, "status", "--porcelain").strip() == ""
    finally:
        watcher.stop()


@pytest.mark.slow
def test_memfile_watch_process_follows_edits_and_stops_on_sigterm(vault: Vault) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(vault.root), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: Vault.open(vault.root).status()["watcher_pid"] == process.pid, 10)
        write(vault.root / "michael" / "fact" / "wifi.md", "zebra42\n")
        assert wait_until(lambda: "michael/fact/wifi.md" in indexed(vault.root), 5)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(5) == 0
        assert time.monotonic() - started < 2.5
        assert "stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_an_idle_watcher_vouches_for_the_index_and_stops_when_a_change_is_pending(watched: Vault) -> None:
    assert wait_until(lambda: watcher_vouches(watched.root), 5)
    watched._watcher._set_clean(False)  # what the event callback does first
    assert not watcher_vouches(watched.root)
    write(watched.root / "michael" / "fact" / "wifi.md", "zebra42\n")
    assert wait_until(lambda: watcher_vouches(watched.root), 5)
    assert [h.memory.key for h in Vault.open(watched.root).search("zebra42")] == ["wifi"]


def test_a_marker_without_a_live_watcher_vouches_for_nothing(vault: Vault) -> None:
    write(vault.root / ".memfile" / "watch-michael.clean", "12345\n")
    write(vault.root / "michael" / "fact" / "wifi.md", "zebra42\n")
    assert not watcher_vouches(vault.root, vault.mind)
    assert [h.memory.key for h in vault.search("zebra42")] == ["wifi"]


def test_a_queue_overflow_falls_back_to_the_full_diff(vault: Vault) -> None:
    import logging

    batches: list[list[str]] = []
    watcher = Watcher(vault, on_batch=lambda report, paths: batches.append(paths)).start()
    try:
        assert watcher.wait_idle(5)
        batches.clear()
        logging.getLogger("watchdog.observers.inotify_c").warning(
            "Inotify queue overflowed; filesystem events were lost"
        )
        assert wait_until(lambda: ["(all files)"] in batches, 5)
    finally:
        watcher.stop()


def test_commands_keep_working_beside_a_watcher(watched: Vault) -> None:
    before = int(git(watched.root, "rev-list", "--count", "HEAD"))
    watched.store("fact", "router", "the router sits in the hallway")
    assert [h.memory.key for h in Vault.open(watched.root).search("hallway")] == ["router"]
    assert int(git(watched.root, "rev-list", "--count", "HEAD")) == before + 1
    assert watched._watcher.wait_idle(5)


def test_status_counts_ahead_and_behind_the_upstream(vault: Vault, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(vault.root, "remote", "add", "origin", str(bare))
    git(vault.root, "push", "-q", "-u", "origin", "main")
    vault.store("fact", "wifi", "zebra42")
    remote = vault.status()["git"]
    assert (remote["upstream"], remote["ahead"], remote["behind"]) == ("origin/main", 1, 0)
    assert vault.status()["uncommitted"] == []
    write(vault.root / "michael" / "note" / "hand.md", "by hand\n")
    assert vault.status()["uncommitted"] == ["michael/note/hand.md"]


@pytest.mark.slow
def test_a_checkout_of_a_thousand_files_lands_in_a_few_batches_and_no_commit(vault: Vault) -> None:
    import threading

    git(vault.root, "checkout", "-q", "-b", "many")
    for i in range(1000):
        write(vault.root / "michael" / "fact" / f"f{i}.md", f"fact number {i}\n")
    git(vault.root, "add", "-A")
    git(vault.root, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", "many")
    git(vault.root, "checkout", "-q", "main")
    commits = git(vault.root, "rev-list", "--count", "--all")
    threads = threading.active_count()
    watcher = Watcher(vault, autocommit=True).start()
    try:
        assert watcher.wait_idle(10)
        before = watcher.batches
        git(vault.root, "checkout", "-q", "many")
        assert wait_until(lambda: len(indexed(vault.root)) == 1000, 30)
        assert watcher.wait_idle(10)
        assert watcher.batches - before <= 5
        assert git(vault.root, "rev-list", "--count", "--all") == commits  # checked-out files are not hand edits
    finally:
        watcher.stop()
    assert wait_until(lambda: threading.active_count() <= threads, 3)  # no thread left behind


def test_stop_with_a_pending_batch_applies_it_at_once_and_leaves_no_thread(vault: Vault) -> None:
    import threading

    threads = threading.active_count()
    watcher = Watcher(vault, debounce=0.5).start()
    assert watcher.wait_idle(5)
    write(vault.root / "michael" / "fact" / "late.md", "written just before stop\n")
    time.sleep(0.05)  # inside the debounce
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 1.5
    assert "michael/fact/late.md" in indexed(vault.root)
    assert wait_until(lambda: threading.active_count() <= threads, 2)
    assert not (vault.root / ".memfile" / "watch-michael.clean").exists()


def test_a_touch_is_heard_and_editor_junk_keeps_the_watcher_vouching(vault: Vault) -> None:
    """Found by the storm test: watchdog reports touch/chmod as FileAttribEvent (was not listened to),
    and a swap file's event took the vouching marker away for good (no batch ever put it back)."""
    root = vault.root
    path = write(root / "michael" / "fact" / "wifi.md", "zebra42\n")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    watcher = Watcher(Vault.open(root, "michael")).start()
    try:
        assert watcher.wait_idle(10)
        before = watcher.batches
        os.utime(path)  # `touch wifi.md`: a metadata-only change
        assert wait_until(lambda: watcher.batches > before and watcher.wait_idle(0.1), 10)
        reader = Vault.open(root, "michael")
        assert watcher_vouches(reader.root, reader.mind) and reader.status()["stale"] == []
        assert reader.get("fact/wifi").updated_at.year >= 2026  # the catalog followed the new mtime
        batches = watcher.batches
        (root / "michael" / "fact" / ".wifi.md.swp").write_text("vim swap", encoding="utf-8")
        (root / "michael" / "fact" / "wifi.md~").write_text("backup", encoding="utf-8")
        time.sleep(1.0)  # well past the debounce: had they counted, a batch would have run by now
        assert watcher.wait_idle(0.1) and watcher_vouches(reader.root, reader.mind) and watcher.batches == batches
    finally:
        watcher.stop()


# --- the served vault's watcher: one watch over the whole vault ----------------------------------------


class Refreshes:
    """The `refresh` of a MindsWatcher, recording each batch: (mind, paths or None for a full diff)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str] | None]] = []

    def __call__(self, mind: str, paths: list[str] | None) -> RefreshReport:
        self.batches.append((mind, paths))
        return RefreshReport()

    def of(self, mind: str) -> list[list[str] | None]:
        return [paths for m, paths in self.batches if m == mind]


@pytest.fixture
def three_minds(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for mind in ("alice", "bob", "carol"):
        for category in ("fact", "note"):
            (root / mind / category).mkdir(parents=True)
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".memfile").mkdir()
    return root


def test_one_watch_over_the_vault_hands_each_event_to_its_own_mind_only(three_minds: Path) -> None:
    root, refreshes = three_minds, Refreshes()
    before = inotify_instances()  # another file's test in this worker process may keep a watch still open
    watcher = MindsWatcher(root, refreshes, debounce=0.05, max_wait=0.2)
    try:
        assert watcher.add("alice") and watcher.add("bob")  # carol: never opened, never watched
        assert watcher.wait_idle("alice", 10) and watcher.wait_idle("bob", 10)
        assert refreshes.of("alice") == [None] and refreshes.of("bob") == [None]  # the first: a full diff
        assert inotify_instances() - before <= 1

        write(root / "alice" / "fact" / "wifi.md", "zebra42\n")
        assert wait_until(lambda: len(refreshes.of("alice")) == 2, 10)
        assert refreshes.of("alice")[1] == ["alice/fact/wifi.md"]

        # the server's own churn and everything no opened mind owns: never a batch
        write(root / ".git" / "objects" / "ab" / "cdef", "a git object")
        os.rename(root / ".git" / "objects" / "ab" / "cdef", root / ".git" / "objects" / "ab" / "cdeg")
        write(root / ".git" / "index.lock", "")
        os.remove(root / ".git" / "index.lock")
        write(root / ".memfile" / "index" / "alice" / "catalog.sqlite", "an index write")
        write(root / ".obsidian" / "workspace.md", "an app's dot folder")
        write(root / "carol" / "fact" / "door.md", "a mind nobody opened\n")
        write(root / "memfile.toml", "")
        # the events of one watch come in order: once this edit of bob's is applied, all of the above was heard
        write(root / "bob" / "note" / "sentinel.md", "okapi\n")
        assert wait_until(lambda: len(refreshes.of("bob")) == 2, 10) and watcher.wait_idle("bob", 10)
        assert refreshes.of("bob")[1] == ["bob/note/sentinel.md"]
        assert len(refreshes.of("alice")) == 2 and refreshes.of("carol") == []
        assert (root / ".memfile" / "watch-alice.clean").exists()  # alice was vouched for throughout

        os.rename(root / "alice" / "fact" / "wifi.md", root / "bob" / "fact" / "wifi.md")  # a move between minds
        assert wait_until(lambda: len(refreshes.of("alice")) == 3 and len(refreshes.of("bob")) == 3, 10)
        assert refreshes.of("alice")[2] == ["alice/fact/wifi.md"] and refreshes.of("bob")[2] == ["bob/fact/wifi.md"]
    finally:
        watcher.stop()
    for mind in ("alice", "bob"):
        assert lock_holder(root / ".memfile" / f"watch-{mind}.lock") is None
        assert not (root / ".memfile" / f"watch-{mind}.clean").exists()


def test_a_mind_made_after_the_watch_started_is_watched_once_added(three_minds: Path) -> None:
    root, refreshes = three_minds, Refreshes()
    watcher = MindsWatcher(root, refreshes, debounce=0.05, max_wait=0.2)
    try:
        assert watcher.add("alice") and watcher.wait_idle("alice", 10)
        write(root / "dave" / "fact" / "early.md", "made with the folder\n")  # `memfile init --mind dave`, then a note
        assert watcher.add("dave") and watcher.wait_idle("dave", 10)
        assert refreshes.of("dave") == [None]  # what it had before it was added: its first full diff
        write(root / "dave" / "note" / "later.md", "okapi\n")  # a folder made: a full diff
        assert wait_until(lambda: len(refreshes.of("dave")) == 2, 10) and watcher.wait_idle("dave", 10)
        write(root / "dave" / "note" / "again.md", "okapi\n")  # in a folder made after the watch started
        assert wait_until(lambda: refreshes.of("dave")[2:] == [["dave/note/again.md"]], 10)
    finally:
        watcher.stop()


def test_a_minds_watcher_skips_a_mind_another_watcher_has(vault: Vault) -> None:
    watcher = Watcher(vault).start()  # `memfile watch` of michael
    minds = MindsWatcher(vault.root, Refreshes())
    try:
        assert not minds.add("michael") and not minds.watching("michael")
    finally:
        minds.stop()
        watcher.stop()
    assert not (vault.root / ".memfile" / "watch-michael.clean").exists()


def test_stop_without_finishing_drops_pending_batches_and_still_takes_every_marker_away(three_minds: Path) -> None:
    root, refreshes = three_minds, Refreshes()
    watcher = MindsWatcher(root, refreshes, debounce=30, max_wait=30)  # nothing pending is due for 30 s
    assert watcher.add("alice") and watcher.add("bob")
    marker = root / ".memfile" / "watch-alice.clean"
    assert not marker.exists()  # its first batch is pending: nothing is vouched for
    watcher.stop(finish=False)
    assert refreshes.batches == []
    for mind in ("alice", "bob"):
        assert lock_holder(root / ".memfile" / f"watch-{mind}.lock") is None
        assert not (root / ".memfile" / f"watch-{mind}.clean").exists()
    assert not watcher.add("carol")  # stopped: nothing more is watched


def inotify_instances() -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass  # closed meanwhile
    return found
