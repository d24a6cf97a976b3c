"""Purge: a memory gone from every version of history and from everything memfile keeps, through the faces a
person uses (the command line, the Python API), with everything else kept byte for byte; two clones that
sync after a purge; agents refused; `--text`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import commit_by_hand, fails, git, in_vault, leaks, ok, write

from memfile import Vault
from memfile.purge import TOMBSTONE

SECRET = "Alice lives at 12 Quiet Lane, flat 3"
SECRET_2 = "Alice moved to 40 Harbour Road"


def other_blobs(root: Path, memory_path: str) -> dict[str, str]:
    """Every blob in every ref's history outside `memory_path`, by path and blob id."""
    out = git(root, "log", "--all", "--format=", "--raw", "--no-abbrev", "--no-renames")
    return {
        line.split()[3] + " " + line.split("\t")[1]: line.split("\t")[1]
        for line in out.splitlines()
        if line.startswith(":") and line.split()[3] != "0" * 40 and line.split("\t")[1] != memory_path
    }


def tree_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.glob("*/**/*.md")}


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    vault.store("fact", "office", "The office is in Berlin", tags=["work"])
    vault.store("identity", "alice_address", SECRET, tags=["alice"])
    git(vault.root, "branch", "before-move")  # a branch and a tag that hold the first version
    git(vault.root, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "tag", "-a", "v1", "-m", "tagged")
    vault.store("identity", "alice_address", SECRET_2, tags=["alice"])
    vault.store("fact", "editor", "Uses neovim")
    vault.recall(query="Alice Harbour")  # the last-recall record names it
    Vault.init(vault.root, "anna").store("fact", "anna_office", "Anna works from Lisbon")  # another mind
    return vault


def test_purge_leaves_no_trace_and_keeps_everything_else(vault: Vault) -> None:
    root = vault.root
    kept_blobs = other_blobs(root, "michael/identity/alice_address.md")
    kept_files = {k: v for k, v in tree_files(root).items() if "alice" not in k}
    kept_subjects = sorted(git(root, "log", "--all", "--format=%s", "--", "michael/fact").splitlines())
    assert leaks(root, SECRET) and leaks(root, SECRET_2)
    memory_id = vault.get("identity/alice_address").id
    queued = write(root / ".memfile/queue/michael/left.done", f"a result nobody picked up: {memory_id}")

    shown = ok(in_vault(root, "purge", "identity/alice_address", "--dry-run"))
    assert "2 versions" in shown.stdout and "refs/heads/before-move" in shown.stdout and "refs/tags/v1" in shown.stdout
    done = ok(in_vault(root, "purge", "identity/alice_address", "--yes", "--json"))
    [report] = json.loads(done.stdout)
    assert report["versions"] == 2 and report["on_disk"] and report["text"] is False

    assert leaks(root, SECRET) == [] and leaks(root, SECRET_2) == []
    assert not queued.exists()
    assert [p for p in (root / ".memfile").rglob("*") if p.is_file() and memory_id.encode() in p.read_bytes()] == []
    assert tree_files(root) == kept_files  # every other memory byte for byte
    for blob_and_path in kept_blobs:  # and every version of every other file
        subprocess.run(["git", "cat-file", "-e", blob_and_path.split()[0]], cwd=root, check=True)
    assert sorted(git(root, "log", "--all", "--format=%s", "--", "michael/fact").splitlines()) == kept_subjects
    assert subprocess.run(["git", "fsck", "--full", "--strict"], cwd=root, capture_output=True).returncode == 0
    record = [json.loads(line) for line in (root / TOMBSTONE).read_text().splitlines()]
    assert [(r["ref"], r["what"], r["mind"]) for r in record] == [("identity/alice_address", "memory", "michael")]
    assert SECRET not in (root / TOMBSTONE).read_text() and "alice" in git(root, "log", "-1", "--format=%s")
    assert git(root, "status", "--porcelain") == ""
    fails(in_vault(root, "history", "identity/alice_address"), 3)
    reopened = Vault.open(root, "michael")
    assert reopened.search("Harbour") == [] and "Harbour Road" not in reopened.recall(query="Alice Harbour")


def test_several_refs_at_once_and_no_terminal_without_yes(vault: Vault) -> None:
    root = vault.root
    asked = fails(in_vault(root, "purge", "identity/alice_address", "fact/editor"), 2)  # CliRunner: no terminal
    assert "pass --yes" in asked.stderr and "identity/alice_address, fact/editor" in asked.stderr
    assert not (root / TOMBSTONE).exists()
    ok(in_vault(root, "purge", "identity/alice_address", "fact/editor", "--yes"))
    record = [json.loads(line)["ref"] for line in (root / TOMBSTONE).read_text().splitlines()]
    assert record == ["identity/alice_address", "fact/editor"]
    assert leaks(root, SECRET_2) == [] and "neovim" not in git(root, "log", "--all", "-p")
    assert vault.get("fact/office").content == "The office is in Berlin"


def test_dry_run_changes_nothing(vault: Vault) -> None:
    root = vault.root
    refs = git(root, "for-each-ref")
    objects = git(root, "cat-file", "--batch-all-objects", "--batch-check")
    report = vault.purge("identity/alice_address", dry_run=True)
    assert report.dry_run and report.versions == 2 and report.commit is None
    assert (
        git(root, "for-each-ref") == refs and git(root, "cat-file", "--batch-all-objects", "--batch-check") == objects
    )
    assert not (root / TOMBSTONE).exists()


def test_a_forgotten_memory_is_purged_by_its_id(vault: Vault) -> None:
    memory = vault.forget("identity/alice_address")
    report = vault.purge(memory.id)
    assert report.ref == "identity/alice_address" and not report.on_disk
    assert leaks(vault.root, SECRET_2) == []


def test_a_hand_edit_is_a_version_too_and_other_changes_stop_the_purge(vault: Vault) -> None:
    root = vault.root
    path = root / "michael/identity/alice_address.md"
    path.write_text(path.read_text().replace("Harbour Road", "Harbour Road, by the lighthouse"))
    config = root / "memfile.toml"
    config.write_text(config.read_text() + "\n# a note\n")
    refused = fails(in_vault(root, "purge", "identity/alice_address", "--yes"), 2)
    assert "memfile.toml" in refused.stderr and "commit them" in refused.stderr
    assert "lighthouse" in path.read_text()  # nothing was discarded
    commit_by_hand(root, "memfile.toml")
    write(root / "notes.txt", "a person's draft\n")
    commit_by_hand(root, "notes.txt")
    write(root / "notes.txt", "a person's draft, stashed\n")
    git(root, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "stash", "-q")
    stashed = fails(in_vault(root, "purge", "identity/alice_address", "--yes"), 2)
    assert "1 stash entries" in stashed.stderr and "git stash pop" in stashed.stderr
    git(root, "stash", "pop", "-q")
    commit_by_hand(root, "notes.txt")
    ok(in_vault(root, "purge", "identity/alice_address", "--yes"))
    assert leaks(root, "Harbour Road, by the lighthouse") == [] and "# a note" in config.read_text()


def test_an_agent_cannot_purge_on_any_face(vault: Vault, tmp_path: Path) -> None:
    root = vault.root
    refs = git(root, "for-each-ref")
    refused = fails(in_vault(root, "purge", "identity/alice_address", "--yes", env={"MEMFILE_SOURCE": "agent"}), 2)
    assert "only a person" in refused.stderr
    fails(in_vault(root, "purge", "--push", "--yes", env={"MEMFILE_SOURCE": "agent"}), 2)
    with vault.acting_as("agent"):
        with pytest.raises(Exception, match="only a person"):
            vault.purge("identity/alice_address")
        with pytest.raises(Exception, match="only a person"):
            vault.push_purge()
    assert git(root, "for-each-ref") == refs and not (root / TOMBSTONE).exists()


def test_text_removes_only_that_string_from_every_version(vault: Vault) -> None:
    root = vault.root
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    vault.store("project", "deploy", f"Deploy with the token {token} from the CI box.", allow_secret=True)
    vault.store("project", "deploy", f"Deploy with {token}; the CI box moved to rack 4.", allow_secret=True)
    vault.store("fact", "other_token", f"Not this memory: {token}", allow_secret=True)
    before = [v.memory for v in vault.history("project/deploy")]
    raw_before = [
        subprocess.run(["git", "show", f"{v.sha}:michael/project/deploy.md"], cwd=root, capture_output=True).stdout
        for v in vault.history("project/deploy")
    ]
    fails(in_vault(root, "purge", "--text", "ghp", "project/deploy", "--yes"), 2)  # too short to be a token
    ok(in_vault(root, "purge", "--text", "-", "project/deploy", "--yes", input=token + "\n"))
    after = vault.history("project/deploy")
    raw_after = [
        subprocess.run(["git", "show", f"{v.sha}:michael/project/deploy.md"], cwd=root, capture_output=True).stdout
        for v in after
    ]
    assert raw_after == [data.replace(token.encode(), b"") for data in raw_before]  # every other byte kept
    assert len(after) == len(before)
    assert token not in (root / "michael/project/deploy.md").read_text()
    assert token in (root / "michael/fact/other_token.md").read_text()  # another memory is not touched
    record = json.loads((root / TOMBSTONE).read_text().splitlines()[-1])
    assert record["what"] == "text" and token not in (root / TOMBSTONE).read_text()


def test_doctor_names_the_purge_for_a_secret_in_a_memory(vault: Vault) -> None:
    write(vault.root / "michael/fact/key.md", "AWS key AKIAIOSFODNN7EXAMPLQ for the bucket\n")
    report = vault.doctor()
    assert any("memfile purge --text - fact/key" in f.message for f in report.findings if f.kind == "secret")


# --- two clones --------------------------------------------------------------------------------------------


def test_a_clone_that_syncs_after_a_purge_is_told_and_accepts_it(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("identity", "alice_address", SECRET)
    laptop.sync()
    server.sync()
    server.store("fact", "editor", "Uses neovim")  # a commit of the server's own, made before it hears
    report = laptop.purge("identity/alice_address")
    assert report.remotes == ["origin"]
    refused = fails(in_vault(laptop.root, "sync"), 2)
    assert "memfile purge --push" in refused.stderr
    preview = ok(in_vault(laptop.root, "purge", "--push", "--dry-run", "--json"))
    assert json.loads(preview.stdout) == {"pushed": [], "held": ["origin/main"]}
    assert "replace the history of origin/main" in preview.stderr
    shown = ok(in_vault(laptop.root, "purge", "--push", "--yes"))
    assert "replaced the history of origin/main" in shown.stdout
    bare = laptop.root.parent / "remote.git"
    assert SECRET not in git(bare, "log", "--all", "-p")
    ok(in_vault(laptop.root, "sync"))

    told = fails(in_vault(server.root, "sync"), 2)
    assert "identity/alice_address" in told.stderr and "memfile sync --accept-purge" in told.stderr
    ok(in_vault(server.root, "sync", "--accept-purge"))
    assert leaks(server.root, SECRET) == []
    assert server.get("fact/editor").content == "Uses neovim"  # its own commit kept
    ok(in_vault(laptop.root, "sync"))
    assert laptop.get("fact/editor").content == "Uses neovim" and leaks(laptop.root, SECRET) == []
    assert SECRET not in git(bare, "log", "--all", "-p")


def test_a_remote_that_moved_since_the_purge_is_purged_on_accept(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("identity", "alice_address", SECRET)
    laptop.sync()
    server.sync()
    laptop.purge("identity/alice_address")
    server.store("fact", "editor", "Uses neovim")
    server.sync()  # the remote moves on, still holding the old history
    moved = fails(in_vault(laptop.root, "purge", "--push", "--yes"), 6)
    assert "memfile sync --accept-purge" in moved.stderr
    ok(in_vault(laptop.root, "sync", "--accept-purge"))
    bare = laptop.root.parent / "remote.git"
    assert SECRET not in git(bare, "log", "--all", "-p") and leaks(laptop.root, SECRET) == []
    assert laptop.get("fact/editor").content == "Uses neovim"
    fails(in_vault(server.root, "sync"), 2)
    ok(in_vault(server.root, "sync", "--accept-purge"))
    assert leaks(server.root, SECRET) == []


def test_a_plain_git_merge_that_brings_a_purged_memory_back_is_refused(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    laptop, _ = two
    bare = laptop.root.parent / "remote.git"
    laptop.store("identity", "alice_address", SECRET)
    laptop.sync()
    old = tmp_path / "old-clone"  # a copy made before the purge, kept by someone with plain git
    subprocess.run(["git", "clone", "-q", str(bare), str(old)], check=True)
    laptop.purge("identity/alice_address", push=True)
    assert SECRET not in git(bare, "log", "--all", "-p")
    write(old / "notes.txt", "plain git at work\n")
    commit_by_hand(old, "notes.txt")
    git(old, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "pull", "-q", "--no-rebase", "--no-edit")
    git(old, "push", "-q")  # the merge brings the old versions back to the remote
    assert SECRET in git(bare, "log", "--all", "-p")

    refused = fails(in_vault(laptop.root, "sync"), 2)
    assert "identity/alice_address, which this clone purged" in refused.stderr
    assert "--accept-purge" in refused.stderr and leaks(laptop.root, SECRET) == []  # what it fetched is pruned
    ok(in_vault(laptop.root, "sync", "--accept-purge"))
    assert SECRET not in git(bare, "log", "--all", "-p") and leaks(laptop.root, SECRET) == []
    assert (laptop.root / "notes.txt").read_text() == "plain git at work\n"
