"""Issue 21: the index never serves what the files no longer say, and reads name what they cannot read.

Edits that keep a file's size, mtime and inode (a same-length edit with the
mtime put back, files re-created over reused inodes, 1-second timestamps) are
seen; an unreadable category folder is a warning and a doctor problem; a vault
whose index cannot be written is read from its files; snippets never repeat
text; doctor calls misplaced only what names another place. Real vaults, real
processes (a read-only bind mount and dropped capabilities where the test runs
as root, which ignores permissions).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    SAMPLE_VAULT,
    commit_by_hand,
    fails,
    git,
    in_private_mounts,
    in_vault,
    memfile_command,
    mount_namespaces,
    ok,
    write,
)

from memfile import Vault
from memfile.index.snippet import snippet
from memfile.index.source import stat_walk

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
    index = vault._index.store
    assert index is not None
    walk = stat_walk(vault.mind_dir, root)
    recorded = index.catalog.recorded()[path.relative_to(root).as_posix()]
    assert recorded != walk["michael/fact/door.md"]  # read within its racy window: recorded as unsure
    path.write_text(NOTE.replace("1234", "5678"), encoding="utf-8")
    # what a coarse file system would report: the very stat the walk saw before the edit
    report = index.sync(walk, vault._index.load)
    assert report.updated == 1
    assert vault._index.catalog.memories()[0].content.startswith("The door code is 5678")


def test_a_racy_file_that_did_not_change_is_confirmed_without_a_full_text_write(vault: Vault) -> None:
    from memfile.index.catalog import FINE_NS, UNSURE

    root = vault.root
    path = write(root / "michael" / "fact" / "door.md", NOTE)
    soon = time.time_ns() + 300_000_000  # changed "just now" for the read below (see the test above)
    os.utime(path, ns=(soon, soon))
    vault.list()
    index = vault._index
    assert index is not None and index.catalog.recorded()["michael/fact/door.md"][0] == UNSURE
    generation = sorted(p.name for p in index.folder.glob("_memories_v*.toc"))
    while time.time_ns() <= soon + FINE_NS:  # then safely older than any read from here on
        time.sleep(0.05)
    with Vault.open(root) as reader:
        assert reader.status()["stale"] == []  # read and compared, not written
        assert reader._index.catalog.recorded()["michael/fact/door.md"][0] == UNSURE
        assert reader.get("fact/door").content.startswith("The door code is 1234")
        assert reader._index.catalog.recorded() == stat_walk(reader.mind_dir, root)  # vouched for now
    assert sorted(p.name for p in index.folder.glob("_memories_v*.toc")) == generation  # Whoosh untouched


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
        assert all(len(stat) == 4 for stat in reader._index.catalog.recorded().values())
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
