"""memfile doctor: read-only findings, exit 5 on problems, and only safe repairs with --fix."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from helpers import BROKEN, REPO, commit_count, fails, git, in_vault, ok, write

from memfile import GitError, Vault


def kinds(vault: Vault) -> set[str]:
    return {f.kind for f in vault.doctor().problems}


def test_a_clean_vault_has_no_problems(vault: Vault) -> None:
    vault.store("fact", "office", "Berlin")
    assert kinds(vault) == set()
    out = ok(in_vault(vault.root, "doctor")).stdout
    assert "no problems" in out and "info: expired: 0 expired" in out


def test_problems_are_named_and_exit_5_and_nothing_changes(vault: Vault) -> None:
    vault.store("fact", "office", "Berlin")
    root, mind = vault.root, vault.root / "michael"
    write(mind / "fact" / "broken.md", BROKEN)
    write(mind / "note" / "misplaced.md", "---\ncategory: fact\nkey: wrong_place\n---\nhello\n")
    write(mind / "fact" / "copy.md", (mind / "fact" / "office.md").read_text(encoding="utf-8"))
    write(mind / "fact" / ".memfile-tmp-office.md.abc123", "half a write")
    write(root / "stray.md", "not in a mind")
    (mind / "fact" / "escape.md").symlink_to("/etc/hostname")
    before = {
        p: p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.parts and ".memfile" not in p.parts
    }
    found = kinds(vault)
    assert {"unreadable", "misplaced", "duplicate", "temp_file", "outside_minds", "symlink_out", "uncommitted"} <= found
    result = fails(in_vault(root, "doctor"), 5)
    assert "michael/fact/broken.md:4" in result.stdout
    data = json.loads(fails(in_vault(root, "doctor", "--json"), 5).stdout)
    assert data["problems"] >= 7 and data["fixed"] == []
    after = {p: p.read_bytes() for p in before}
    assert after == before  # read-only


def test_a_nested_repository_is_reported_and_never_written(vault: Vault) -> None:
    """A folder of the mind holding .git of its own: the vault's `git add` stages nothing in it, so a
    store there would be written and never committed (its versions lost)."""
    root = vault.root
    write(root / "michael" / "notes" / "fact" / "wifi.md", "---\ncategory: fact\nkey: wifi\n---\nv1\n")
    git(root / "michael" / "notes", "init", "-q")
    before, path = commit_count(root), root / "michael" / "notes" / "fact" / "wifi.md"
    with pytest.raises(GitError) as caught:
        vault.store("fact", "wifi", "v2")
    assert "michael/notes/ is a git repository of its own" in str(caught.value)
    assert path.read_text(encoding="utf-8").endswith("v1\n") and commit_count(root) == before
    assert "remove michael/notes/.git" in fails(in_vault(root, "store", "fact", "wifi", "v3"), 6).stderr
    vault.store("fact", "elsewhere", "a memory outside it is stored as ever")
    assert "nested_repository" in kinds(vault)
    assert "michael/notes/ is a git repository of its own" in fails(in_vault(root, "doctor"), 5).stdout
    git(root, "init", "-q", str(root / "michael"))  # the mind folder itself
    with pytest.raises(GitError):
        vault.store("fact", "elsewhere", "changed")


def test_an_id_held_by_two_files_is_reported(vault: Vault) -> None:
    vault.store("fact", "k5", "x")
    text = (vault.root / "michael" / "fact" / "k5.md").read_text(encoding="utf-8")
    write(vault.root / "michael" / "project" / "k5.md", text.replace("category: fact", "category: project"))
    found = [f for f in vault.doctor().findings if f.kind == "duplicate_id"]
    assert len(found) == 1 and "michael/fact/k5.md, michael/project/k5.md" in found[0].message


def test_a_hand_made_file_with_too_many_tags_is_read_and_named_by_doctor_and_no_write_adds_more(
    vault: Vault,
) -> None:
    # Files are the truth: a person's file is read whatever it holds (deduplicated in linear time, where
    # 10,000 tags took 4.9 s: test_model), doctor names it, and no face writes more than 100 tags.
    from memfile.memory_tool import MemoryToolBackend

    tags = [f"t{i}" for i in range(1_000)]
    write(vault.mind_dir / "note" / "many.md", f"---\ntags: [{', '.join(tags + tags[:5])}]\n---\nMany tags.\n")
    assert vault.get("note/many").tags == tuple(tags)
    result = fails(in_vault(vault.root, "doctor"), 5)
    assert "michael/note/many.md has 1000 tags, more than the 100 a write may give" in result.stdout
    with vault.acting_as("agent") as agent:
        tool = MemoryToolBackend(agent)
        answer = tool.execute(
            {
                "command": "create",
                "path": "/memories/note/more.md",
                "file_text": "---\nsource: agent\ntags: [" + ", ".join(tags[:101]) + "]\n---\nx\n",
            }
        )
        assert (
            "'101 tags'" in answer
            and "at most 100 tags" in answer
            and not (vault.mind_dir / "note" / "more.md").exists()
        )
    vault.store("note", "many", "Many tags, and a new body.")  # a store that does not give tags keeps them
    assert vault.get("note/many").tags == tuple(tags)


def test_a_key_an_earlier_memfile_derived_from_a_non_ascii_name_is_not_misplaced(vault: Vault) -> None:
    """`Café au lait.md` once derived `caf_au_lait` (now `cafe_au_lait`), which a rewrite wrote into the
    file: it is where it belongs, and `doctor --fix` must not move it."""
    write(vault.root / "michael" / "note" / "Café au lait.md", "---\nkey: caf_au_lait\n---\nWith oat milk\n")
    write(vault.root / "michael" / "note" / "日本語.md", "---\nkey: untitled\n---\nNihongo\n")
    assert "misplaced" not in kinds(vault)
    vault.doctor(fix=True)
    assert (vault.root / "michael" / "note" / "Café au lait.md").exists()


def test_an_unknown_setting_in_memfile_toml_is_named_and_every_documented_one_is_known(vault: Vault) -> None:
    import tomllib

    from memfile.config import unknown_settings

    documented = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    block = documented.split("## memfile.toml", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    config = vault.root / "memfile.toml"
    config.write_text(block.replace("# [", "[").replace("\n# ", "\n"), encoding="utf-8")
    tomllib.loads(config.read_text(encoding="utf-8"))  # the documented block, uncommented, is TOML
    assert unknown_settings(vault.root) == []
    config.write_text('lock_timout = 5\n[recal]\nbudget = 100\n[sync]\nintervall = 60\n[minds.michael]\nnmae = "M"\n')
    assert unknown_settings(vault.root) == ["lock_timout", "recal", "[sync] intervall", "[minds.michael] nmae"]
    found = [f.message for f in vault.doctor().findings if f.kind == "unknown_setting"]
    assert len(found) == 4 and "memfile.toml: lock_timout is no setting memfile knows" in found[0]
    assert "unknown_setting" in kinds(vault)


def test_fix_applies_only_safe_repairs(vault: Vault) -> None:
    vault.store("fact", "office", "Berlin")
    mind = vault.root / "michael"
    write(mind / "note" / "misplaced.md", "---\ncategory: fact\nkey: wrong_place\n---\nhello\n")
    temp = write(mind / "fact" / ".memfile-tmp-office.md.abc123", "half a write")
    old = time.time() - 3600
    os.utime(temp, (old, old))
    locks = [vault.root / ".git" / name for name in ("index.lock", "HEAD.lock", "refs/heads/main.lock")]
    for lock in locks:  # what a git killed mid-commit leaves: every later write fails until they go
        lock.touch()
        os.utime(lock, (old, old))
    assert {f.path for f in vault.doctor().findings if f.kind == "stale_lock"} == {
        ".git/index.lock",
        ".git/HEAD.lock",
        ".git/refs/heads/main.lock",
    }
    write(mind / "fact" / "broken.md", BROKEN)
    result = fails(in_vault(vault.root, "doctor", "--fix"), 5)  # the unreadable file stays a problem
    assert "moved michael/note/misplaced.md to michael/fact/wrong_place.md" in result.stdout
    assert "removed the leftover temp file" in result.stdout and "index.lock" in result.stdout
    assert not temp.exists() and not any(lock.exists() for lock in locks)
    assert "HEAD.lock" in result.stdout and "refs/heads/main.lock" in result.stdout
    assert (mind / "fact" / "wrong_place.md").read_text(encoding="utf-8").endswith("hello\n")
    assert (mind / "fact" / "broken.md").read_text(encoding="utf-8") == BROKEN  # never touched
    assert kinds(vault) == {"unreadable"}
    assert git(vault.root, "status", "--porcelain").strip() == ""


def test_conflicted_memory_is_a_problem(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    server.sync()
    assert "conflicted" in kinds(server)


def test_unreviewed_agent_memories_are_reported(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "v", "michael")
    path = write(
        vault.root / "michael" / "fact" / "old_guess.md",
        "---\ncategory: fact\nkey: old_guess\nsource: agent\nverified: false\n"
        "created_at: 2020-01-01T00:00:00Z\n---\nA guess\n",
    )
    assert path.exists()
    findings = vault.doctor().findings
    assert any(f.kind == "unreviewed" and "fact/old_guess" in f.message and not f.problem for f in findings)


def test_a_staged_removal_is_committed_as_a_hand_edit(vault: Vault) -> None:
    """What `git rm` (or a forget killed between its `git add` and its commit) leaves: gone from disk and index."""
    vault.store("fact", "office", "Berlin")
    git(vault.root, "rm", "-q", "michael/fact/office.md")
    assert "uncommitted" in kinds(vault)
    sha = vault.commit_hand_edits()
    assert sha and git(vault.root, "show", "--name-status", "--format=", sha).split() == ["D", "michael/fact/office.md"]
    assert git(vault.root, "status", "--porcelain").strip() == ""
    assert "uncommitted" not in kinds(vault)


def test_a_staged_removal_beside_a_staged_new_file_is_committed_by_fix(vault: Vault) -> None:
    """A forget killed after its `git add`, then a store of a new key killed inside its `git commit -- PATH`:
    git status shows the two as one rename (similar bytes) and names only the new file; `doctor --fix`
    commits both, the removal included (a crash run once found it left staged)."""
    vault.store("fact", "k_11", "fact k_11 version of worker 1 step 3: mark1x3z")
    root, fact = vault.root, vault.root / "michael" / "fact"
    text = (fact / "k_11.md").read_text(encoding="utf-8")
    (fact / "k_11.md").unlink()
    git(root, "add", "--all", "--", "michael/fact/k_11.md")
    other = re.sub(r"mem_\w+", "mem_0000k05", text).replace("k_11", "k_05").replace("1x3z", "2x0z")
    write(fact / "k_05.md", other)
    git(root, "add", "--", "michael/fact/k_05.md")
    old = time.time() - 3600
    for name in ("index.lock", "next-index-4242.lock"):  # the killed `git commit -- PATH` held both
        lock = root / ".git" / name
        lock.write_bytes((root / ".git" / "index").read_bytes())
        os.utime(lock, (old, old))
    assert git(root, "status", "--porcelain").startswith("R  michael/fact/k_11.md -> ")
    assert {f.path for f in vault.doctor().problems if f.kind == "uncommitted"} == {
        "michael/fact/k_05.md",
        "michael/fact/k_11.md",
    }
    assert "committed hand edits" in " ".join(vault.doctor(fix=True).fixed)
    assert git(root, "status", "--porcelain") == ""
    assert vault.doctor().problems == []
    assert git(root, "show", "--name-status", "--no-renames", "--format=", "HEAD").split() == [
        "A",
        "michael/fact/k_05.md",
        "D",
        "michael/fact/k_11.md",
    ]
    versions = {v.memory.content for v in vault.history("fact/k_11") if v.memory is not None}
    assert "fact k_11 version of worker 1 step 3: mark1x3z" in versions


def test_store_queue_leftovers_of_killed_processes_are_found_and_fixed(vault: Vault) -> None:
    """A store queued by a process that was killed before it heard back is never made (batch.py); its
    files, an unread result an hour old and a cut-off temp file are shown, and --fix removes them.
    A live process's request is left alone."""
    import subprocess
    import sys

    vault.store("fact", "office", "Berlin")
    queue = vault.root / ".memfile" / "queue" / "michael"
    queue.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    names = {
        f"{time.time_ns():020d}-{dead_pid}-aaaa.req": b"x",
        f"{time.time_ns():020d}-{dead_pid}-bbbb.claimed": b"x",
        f"{time.time_ns():020d}-{os.getpid()}-cccc.done": b"x",
        ".memfile-tmp-x.req.1234": b"half",
    }
    for name, data in names.items():
        (queue / name).write_bytes(data)
    old = time.time() - 7200
    os.utime(queue / next(n for n in names if n.endswith(".done")), (old, old))
    os.utime(queue / ".memfile-tmp-x.req.1234", (old, old))
    live = queue / f"{time.time_ns():020d}-{os.getpid()}-dddd.req"  # this process waits for it
    live.write_bytes(b"x")
    writing = queue / ".memfile-tmp-y.req.5678"  # a request being written right now
    writing.write_bytes(b"ha")
    found = {f.path for f in vault.doctor().problems if f.kind == "queue_leftover"}
    assert found == {f".memfile/queue/michael/{name}" for name in names}
    assert "never made" in fails(in_vault(vault.root, "doctor"), 5).stdout
    report = vault.doctor(fix=True)
    assert sum("left over in the store queue" in line for line in report.fixed) == 4
    assert sorted(p.name for p in queue.iterdir()) == sorted([live.name, writing.name])
    assert "queue_leftover" not in kinds(vault)


def test_a_new_file_staged_then_deleted_beside_a_staged_file_is_no_commit_error(vault: Vault) -> None:
    """A file staged as new and deleted before its commit (git's `AD`), while a person keeps another file
    staged: the commit of the hand edits names only paths git can commit, and the person's stays staged."""
    root, fact = vault.root, vault.root / "michael" / "fact"
    write(fact / "brief.md", "A new note, staged and then deleted.\n")
    git(root, "add", "--", "michael/fact/brief.md")
    (fact / "brief.md").unlink()
    write(root / "notes.txt", "a person's own staged file\n")
    git(root, "add", "--", "notes.txt")
    write(fact / "office.md", "The office is in Hanoi.\n")
    assert vault.commit_hand_edits(["michael/fact/brief.md", "michael/fact/office.md"])
    assert git(root, "show", "--name-status", "--format=", "HEAD").split() == ["A", "michael/fact/office.md"]
    assert git(root, "status", "--porcelain").splitlines() == ["A  notes.txt"]


def test_doctor_tells_its_progress_indexing_then_checking(vault: Vault) -> None:
    """Like reindex: doctor at 10,000 memories took 6.6 s without a word. `--fix` rebuilds the index: its
    files are read one by one (`indexing`), then each memory file is checked (`checking`)."""
    for n in range(12):
        vault.store("fact", f"f{n}", f"fact number {n}")
    seen: list[tuple[str, int, int]] = []
    vault.doctor(fix=True, progress=lambda step, done, total: seen.append((step, done, total)))
    steps = [step for step, _, _ in seen]
    assert steps == sorted(steps, key=["indexing", "checking"].index)  # one step after the other
    for step in ("indexing", "checking"):
        counts = [(done, total) for name, done, total in seen if name == step]
        assert counts[-1] == (12, 12) and all(total == 12 for _, total in counts), (step, counts)
        assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    seen.clear()
    vault.doctor(progress=lambda step, done, total: seen.append((step, done, total)))
    assert {step for step, _, _ in seen} == {"checking"}  # the index is up to date: nothing to read


def test_doctor_draws_no_progress_into_a_pipe(vault: Vault) -> None:
    """The bars are drawn on a terminal only (tests/test_terminal.py): a script reading stderr gets none."""
    vault.store("fact", "office", "Berlin")
    result = ok(in_vault(vault.root, "doctor", "--fix", "--json"))
    assert result.stderr == "" and json.loads(result.stdout)["problems"] == 0
