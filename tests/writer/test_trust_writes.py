"""Writes that keep their promises (issues 20 and 21): nothing lost to a racing save, no commit on a
detached HEAD, no agent escalation to critical, no file stored that memfile cannot read back, and
clear errors when the file system refuses a write."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import fails, git, in_vault, ok, run, write

import memfile.fileformat
from memfile import Vault
from memfile.errors import Refused
from memfile.swap import EditedMeanwhile, put


def _versions(root: Path, relpath: str) -> set[bytes]:
    """Every version of a file git holds, and the file on disk."""
    shas = git(root, "log", "--format=%H", "--full-history", "--", relpath).split()
    found = {subprocess.run(["git", "show", f"{sha}:{relpath}"], cwd=root, capture_output=True).stdout for sha in shas}
    path = root / relpath
    if path.exists():
        found.add(path.read_bytes())
    return found


# --- issue 20 item 7: a hand edit saved while a store of the same memory runs -----------------------


def _editor_save(path: Path, data: bytes) -> None:
    """Save as vim, VS Code and JetBrains do: a temp file renamed over the memory."""
    tmp = path.with_name(f".{path.name}.swp-save")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("style", ["rename", "in-place"])
def test_a_save_landing_while_a_store_rewrites_the_file_is_never_lost(
    vault: Vault, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    ok(in_vault(vault.root, "store", "fact", "same", "first text"))
    path = vault.root / "michael" / "fact" / "same.md"
    saved = path.read_bytes().replace(b"first text", b"the person's fix")
    real_rewrite = memfile.fileformat.rewrite
    calls = []

    def rewrite_while_a_person_saves(*args, **kwargs):  # the store has read the file and computes its new bytes
        calls.append(1)
        if len(calls) == 1:
            if style == "rename":
                _editor_save(path, saved)
            else:
                with open(path, "r+b") as handle:
                    handle.truncate(0)
                    handle.write(saved)
        return real_rewrite(*args, **kwargs)

    monkeypatch.setattr(memfile.fileformat, "rewrite", rewrite_while_a_person_saves)
    ok(in_vault(vault.root, "store", "fact", "same", "the store's text"))
    assert saved in _versions(vault.root, "michael/fact/same.md")  # the person's save is in history
    assert "the store's text" in path.read_text()  # and the store went through, on top of it
    assert git(vault.root, "status", "--porcelain").strip() == ""
    subjects = git(vault.root, "log", "--format=%s").splitlines()
    assert subjects[:2] == ["store fact/same (user)", "record hand edit of fact/same"]


def test_a_save_landing_while_a_person_verifies_keeps_the_save(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(in_vault(vault.root, "store", "fact", "claim", "agent text", env={"MEMFILE_SOURCE": "agent"}))
    path = vault.root / "michael" / "fact" / "claim.md"
    saved = path.read_bytes().replace(b"agent text", b"corrected by hand")
    real_rewrite = memfile.fileformat.rewrite

    def rewrite_while_a_person_saves(*args, **kwargs):
        _editor_save(path, saved)
        return real_rewrite(*args, **kwargs)

    monkeypatch.setattr(memfile.fileformat, "rewrite", rewrite_while_a_person_saves)
    result = fails(in_vault(vault.root, "verify", "fact/claim"), 4)
    assert "changed on disk while memfile was writing it" in result.stderr
    assert path.read_bytes() == saved  # kept on disk; the next write records it


_EDITOR = r"""
import os, sys, time
path, start, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
while time.time() < start:
    pass
data = open(path, "rb").read().replace(b"version", b"HANDSAVE")
if mode == "rename":
    tmp = path + ".tmp~"
    open(tmp, "wb").write(data)
    os.replace(tmp, path)
else:
    with open(path, "r+b") as f:
        f.truncate(0); f.write(data)
sys.stdout.buffer.write(data)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rename", "in-place"])
def test_saves_swept_around_real_store_processes_are_all_kept(vault: Vault, mode: str) -> None:
    """The reported sweep: editor saves at moments around a `memfile store` process; none is lost."""
    relpath = "michael/fact/same.md"
    ok(in_vault(vault.root, "store", "fact", "same", "version 0"))
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    for n in range(1, 25):
        start = time.time() + 0.35 + (n % 12) * 0.01  # spread over the store process's writing moment
        editor = subprocess.Popen(
            [sys.executable, "-c", _EDITOR, str(vault.root / relpath), str(start), mode],
            stdout=subprocess.PIPE,
            text=True,
        )
        subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(vault.root), "store", "fact", "same", f"version {n}"],
            env=env,
            capture_output=True,
            check=False,
        )
        saved = editor.communicate()[0].encode()
        if saved:  # the person's save: on disk or in history, whatever the timing
            assert saved in _versions(vault.root, relpath) or saved == (vault.root / relpath).read_bytes(), n


def test_put_never_replaces_a_file_that_changed_since_it_was_read(tmp_path: Path) -> None:
    path = write(tmp_path / "m.md", "read\n")
    path.write_text("saved by a person\n")
    with pytest.raises(EditedMeanwhile):
        put(path, "m.md", b"new\n", b"read\n")
    assert path.read_text() == "saved by a person\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.md"]  # no temp file left
    assert put(path, "m.md", b"new\n", b"saved by a person\n") == b"saved by a person\n"
    assert path.read_text() == "new\n"
    with pytest.raises(EditedMeanwhile):  # a file that appeared is never overwritten by a create
        put(path, "m.md", b"created\n", None)
    with pytest.raises(EditedMeanwhile):  # nor removed when it is not what was read
        put(path, "m.md", None, b"something else\n")
    assert path.read_text() == "new\n"
    assert put(path, "m.md", None, b"new\n") == b"new\n"
    assert not path.exists() and list(tmp_path.iterdir()) == []


# --- issue 20 item 8: a detached HEAD ---------------------------------------------------------------


def test_store_on_a_detached_head_is_refused_and_writes_nothing(vault: Vault) -> None:
    ok(in_vault(vault.root, "store", "fact", "a", "x"))
    git(vault.root, "checkout", "-q", "--detach")
    result = fails(in_vault(vault.root, "store", "fact", "b", "y"), 6)
    assert "detached HEAD" in result.stderr and "git switch main" in result.stderr
    assert not (vault.root / "michael" / "fact" / "b.md").exists()
    for verb in (["forget", "fact/a"], ["verify", "fact/a"], ["undo"]):
        fails(in_vault(vault.root, *verb), 6)
    assert (vault.root / "michael" / "fact" / "a.md").exists()
    git(vault.root, "checkout", "-q", "main")
    ok(in_vault(vault.root, "store", "fact", "b", "y"))
    assert "michael/fact/b.md" in git(vault.root, "ls-tree", "-r", "--name-only", "main")


# --- issue 20 item 6: agents write at most `high` ---------------------------------------------------


def test_an_agent_cannot_store_a_critical_memory_through_the_cli(vault: Vault) -> None:
    agent = {"MEMFILE_SOURCE": "agent"}
    result = fails(in_vault(vault.root, "store", "fact", "pin", "x", "--priority", "critical", env=agent), 2)
    assert "up to priority high" in result.stderr and "--priority critical" in result.stderr
    assert not (vault.root / "michael" / "fact" / "pin.md").exists()
    ok(in_vault(vault.root, "store", "fact", "pin", "x", "--priority", "high", env=agent))
    fails(in_vault(vault.root, "store", "fact", "pin", "x", "--priority", "critical", env=agent), 2)
    ok(in_vault(vault.root, "store", "fact", "pin", "x", "--priority", "critical"))  # a person can raise it
    assert "priority: critical" in (vault.root / "michael" / "fact" / "pin.md").read_text()


def test_an_agent_cannot_store_critical_through_the_api_or_bring_a_critical_memory_back(vault: Vault) -> None:
    agent = Vault.open(vault.root, "michael", source="agent")
    with pytest.raises(Refused, match="up to priority high"):
        agent.store("fact", "pin", "x", priority="critical")
    vault.store("fact", "old", "old text", priority="critical", source="agent")  # an agent's, from before the cap
    vault.store("fact", "new", "new text", supersedes="fact/old")
    with pytest.raises(Refused, match="only a person"):
        agent.reactivate("fact/old")
    assert vault.reactivate("fact/old").changed


# --- issue 21 item 3: nothing is stored that memfile cannot read back ------------------------------


def test_content_with_conflict_markers_is_refused_and_nothing_is_written(vault: Vault) -> None:
    content = "before\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\nafter"
    result = fails(in_vault(vault.root, "store", "fact", "k0", content), 2)
    assert "conflict markers" in result.stderr and "invalid content" in result.stderr
    assert not (vault.root / "michael" / "fact" / "k0.md").exists()
    ok(in_vault(vault.root, "store", "fact", "k0", "plain text"))  # the key is free and usable
    fails(in_vault(vault.root, "store", "fact", "k0", content), 2)  # an update is refused the same way
    assert "plain text" in ok(in_vault(vault.root, "show", "fact/k0")).stdout


def test_content_plus_tags_over_the_size_limit_is_refused(vault: Vault) -> None:
    room = memfile.fileformat.MAX_FILE_BYTES - 64 * 1024 - 100
    tags = ",".join(f"t{n:05d}" + "x" * 90 for n in range(800))  # about 77 KB of tags
    fails(in_vault(vault.root, "store", "fact", "big", "-", "--tag", tags, input="a" * room), 2)
    assert not (vault.root / "michael" / "fact" / "big.md").exists()
    ok(in_vault(vault.root, "store", "fact", "big", "small"))


# --- issue 20 item 2: init commits only what memfile made ------------------------------------------


def test_init_of_a_folder_with_other_files_commits_only_memfiles_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".ssh" / "id_rsa", "PRIVATE KEY")
    write(home / "taxes.txt", "numbers")
    ok(run("init", home, "--mind", "projects"))
    assert git(home, "ls-files").split() == [".gitattributes", ".gitignore", "memfile.toml", "projects/.gitkeep"]
    ok(in_vault(home, "--mind", "projects", "store", "fact", "x", "typo"))
    tracked = git(home, "ls-files").split()
    assert ".ssh/id_rsa" not in tracked and "taxes.txt" not in tracked


# --- issue 21 items 12 and 16: the file system refusing a write is a clear error --------------------


def test_a_file_where_a_category_folder_should_be_is_named(vault: Vault) -> None:
    write(vault.root / "michael" / "fact", "not a folder")
    result = fails(in_vault(vault.root, "store", "fact", "x", "y"), 4)
    assert "a file is in the way" in result.stderr and "michael/fact" in result.stderr
    assert "unexpected" not in result.stderr


def test_gitignore_being_a_folder_is_named(vault: Vault) -> None:
    git(vault.root, "rm", "-q", ".gitignore")
    (vault.root / ".gitignore").mkdir()
    result = fails(in_vault(vault.root, "store", "fact", "x", "y"), 4)
    assert ".gitignore" in result.stderr and "folder" in result.stderr


def test_a_state_folder_that_is_a_file_makes_writes_fail_clearly(vault: Vault) -> None:
    import shutil

    shutil.rmtree(vault.root / ".memfile")
    write(vault.root / ".memfile", "in the way")
    result = fails(in_vault(vault.root, "store", "fact", "x", "y"), 4)
    assert "cannot write" in result.stderr and ".memfile" in result.stderr
    assert not (vault.root / "michael" / "fact" / "x.md").exists()


def _read_only(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`memfile ARGS` with the vault mounted read-only (a private mount namespace; needs root)."""
    command = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
        f"exec {sys.executable} -m memfile --vault {root} " + " ".join(f"'{a}'" for a in args)
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    )


def test_writes_to_a_read_only_vault_fail_clearly_and_leave_nothing(vault: Vault) -> None:
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("needs a private mount namespace (root) to mount the vault read-only")
    vault.store("fact", "a", "before")
    head = git(vault.root, "rev-parse", "HEAD")
    for args in (
        ["store", "fact", "b", "new"],
        ["store", "fact", "a", "changed"],
        ["forget", "fact/a"],
        ["verify", "fact/a"],
    ):
        done = _read_only(vault.root, *args)
        assert done.returncode == 4, (args, done.returncode, done.stderr)
        assert "read-only" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert git(vault.root, "rev-parse", "HEAD") == head
    assert git(vault.root, "status", "--porcelain").strip() == ""
    assert "before" in (vault.root / "michael" / "fact" / "a.md").read_text()


def test_an_agent_over_mcp_cannot_store_a_critical_memory(vault: Vault) -> None:
    pytest.importorskip("mcp.client.stdio", reason="the MCP SDK is the optional extra mcp")
    from test_mcp import serve

    async def script(agent):  # type: ignore[no-untyped-def]
        refused = await agent.error("store", category="fact", key="pin", content="pinned", priority="critical")
        stored = await agent.ok("store", category="fact", key="pin", content="pinned", priority="high")
        return refused, stored

    refused, stored = serve(vault.root, script)
    assert "up to priority high" in refused
    assert stored["priority"] == "high" and stored["source"] == "agent" and stored["verified"] is False
