"""Sync through a real bare remote and two clones: field-by-field merges, conflicts, never a lost commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import commit_by_hand, commit_count, fails, git, in_vault, ok, wait_until, write

from memfile import GitError, Refused, Vault, errors
from memfile.git import merge_memory


def test_disjoint_changes_meet_on_both_sides(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "editor", "Uses neovim")
    laptop.sync()
    server.store("project", "roadmap", "Sync lands in v2")
    report = server.sync()
    assert report.came_in == 1 and report.went_out >= 1 and report.conflicts == []
    assert laptop.sync().came_in >= 1
    for vault in (laptop, server):
        assert {m.ref for m in vault.list()} == {"fact/office", "fact/editor", "project/roadmap"}
        assert vault.search("neovim")[0].memory.key == "editor"  # the index saw what came in


def test_same_memory_edited_in_different_fields_merges_field_by_field(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "The office is in Berlin", tags=["work", "city"])
    server.store("fact", "office", "The office is in Berlin", priority="high", tags=["work", "berlin"])
    laptop.sync()
    server.sync()
    laptop.sync()
    for vault in (laptop, server):
        office = vault.get("fact/office")
        assert office.priority == "high" and set(office.tags) == {"work", "city", "berlin"}
        assert office.conflict is None
        assert "<<<<<<<" not in (vault.root / office.path).read_text(encoding="utf-8")


def test_body_changed_on_both_sides_keeps_both_until_resolved(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "The office moved to Hamburg")
    server.store("fact", "office", "The office moved to Munich")
    laptop.sync()
    report = server.sync()
    assert report.conflicts == ["fact/office"]
    office = server.get("fact/office")
    assert office.content == "The office moved to Munich" and office.conflict == "The office moved to Hamburg"
    assert "<<<<<<<" not in server.recall() and "Munich" in server.recall()
    server.resolve("fact/office", "ours")
    assert (
        server.get("fact/office").content == "The office moved to Munich" and server.get("fact/office").conflict is None
    )
    with pytest.raises(Refused):
        server.resolve("fact/office", "ours")
    server.sync()
    laptop.sync()
    assert laptop.get("fact/office").content == "The office moved to Munich"  # the resolution travels


def test_resolve_theirs_and_cli(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    out = fails(in_vault(server.root, "sync"), 8).stdout
    assert "conflict: fact/office" in out
    ok(in_vault(server.root, "resolve", "fact/office", "--theirs"))
    assert server.get("fact/office").content == "Hamburg" and server.get("fact/office").conflict is None
    assert "resolve fact/office with theirs" in git(server.root, "log", "-1", "--format=%s")
    fails(in_vault(server.root, "resolve", "fact/office", "--ours"), 2)  # nothing left to resolve


def test_same_key_created_on_both_sides_becomes_one_memory(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("preference", "coffee", "Flat white", tags=["drinks"])
    server.store("preference", "coffee", "Flat white", tags=["morning"])
    laptop.sync()
    server.sync()
    coffee = [m for m in server.list() if m.key == "coffee"]
    assert len(coffee) == 1 and set(coffee[0].tags) == {"drinks", "morning"}
    assert coffee[0].id == laptop.get("preference/coffee").id  # the older id is kept


def test_hand_edit_never_committed_is_committed_then_synced(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    path = server.root / server.get("fact/office").path
    path.write_text(path.read_text(encoding="utf-8").replace("Berlin", "Berlin-Mitte"), encoding="utf-8")
    report = server.sync()
    assert report.hand_edits is not None and report.went_out >= 1
    laptop.sync()
    assert "Berlin-Mitte" in laptop.get("fact/office").content


def test_offline_remote_is_a_clear_error_and_nothing_is_lost(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    git(laptop.root, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    laptop.store("fact", "editor", "Uses neovim")
    before = commit_count(laptop.root)
    with pytest.raises(GitError, match="could not fetch"):
        laptop.sync()
    assert commit_count(laptop.root) == before and laptop.get("fact/editor").content == "Uses neovim"
    assert "could not fetch" in fails(in_vault(laptop.root, "sync"), 6).stderr


def test_sync_never_loses_a_commit_of_either_side(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "a", "one")
    server.store("fact", "b", "two")
    laptop_head = git(laptop.root, "rev-parse", "HEAD").strip()
    laptop.sync()
    server.sync()
    server_log = git(server.root, "log", "--format=%H")
    assert laptop_head in server_log
    assert "forced" not in git(server.root, "reflog").lower()


def test_merge_driver_is_set_up_by_init_and_sync(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    for vault in (laptop, server):
        vault.sync()
        assert "*.md merge=memfile" in (vault.root / ".gitattributes").read_text(encoding="utf-8")
        assert "merge-file" in git(vault.root, "config", "--local", "merge.memfile.driver")


def test_merge_memory_pure_rules() -> None:
    def file(body: str, **fields: str) -> bytes:
        head = {
            "id": "mem_base00000001",
            "category": "fact",
            "key": "x",
            "priority": "normal",
            "tags": "[a]",
            "source": "user",
            "verified": "true",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        } | fields
        return ("---\n" + "".join(f"{k}: {v}\n" for k, v in head.items()) + "---\n" + body + "\n").encode()

    base = file("body")
    ours = file("body", tags="[a, ours]", updated_at="2026-02-01T00:00:00Z")
    theirs = file("new body", tags="[theirs]", priority="high", updated_at="2026-03-01T00:00:00Z")
    merged = merge_memory(base, ours, theirs, "m/fact/x.md")
    text = merged.data.decode()
    assert not merged.conflicted and "new body" in text and "priority: high" in text
    assert "tags: [ours, theirs]" in text  # a removed on theirs, ours added: set merge
    assert "updated_at: 2026-03-01T00:00:00Z" in text
    both = merge_memory(base, file("mine"), file("yours"), "m/fact/x.md")
    assert both.conflicted and "conflict_theirs: yours" in both.data.decode() and "\nmine\n" in both.data.decode()


def test_status_shows_conflicts(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    server.sync()
    assert server.status()["conflicts"] == ["fact/office"]
    assert "fact/office" in ok(in_vault(server.root, "status")).stdout


def autosync_on(vault: Vault, interval: int = 10) -> Vault:
    config = vault.root / "memfile.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + f"\n[sync]\nautosync = true\ninterval = {interval}\n", encoding="utf-8"
    )
    return Vault.open(vault.root, vault.mind)


def test_autosync_pushes_writes_rate_limited(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop = autosync_on(laptop, interval=3600)
    (laptop.root / ".memfile" / "synced-michael").unlink(missing_ok=True)
    laptop.store("fact", "editor", "Uses neovim")  # due: pushed at once
    server.sync()
    assert server.get("fact/editor").content == "Uses neovim"
    laptop.store("fact", "shell", "Uses fish")  # within the interval: committed, not pushed
    server.sync()
    assert all(m.key != "shell" for m in server.list())


def test_autosync_failure_never_fails_the_write(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    git(laptop.root, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    laptop = autosync_on(laptop)
    (laptop.root / ".memfile" / "synced-michael").unlink(missing_ok=True)
    result = laptop.store("fact", "editor", "Uses neovim")
    assert result.changed and any("autosync" in n for n in result.notices)
    assert laptop.get("fact/editor").content == "Uses neovim"


def test_bad_sync_settings_name_the_field(two: tuple[Vault, Vault]) -> None:
    laptop, _ = two
    config = laptop.root / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[sync]\ninterval = 1\n", encoding="utf-8")
    assert "sync.interval" in fails(in_vault(laptop.root, "list"), 2).stderr


def test_resolve_by_editing_both_bodies(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    server.sync()
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "Hamburg and Munich\\n" > "$1"\n', encoding="utf-8")
    editor.chmod(0o755)
    ok(in_vault(server.root, "resolve", "fact/office", "--edit", env={"EDITOR": str(editor)}))
    assert server.get("fact/office").content == "Hamburg and Munich" and server.get("fact/office").conflict is None


@pytest.mark.slow
def test_watcher_with_autosync_pulls_while_idle(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    server = autosync_on(server, interval=10)
    laptop.store("fact", "editor", "Uses neovim")
    laptop.sync()
    with Vault.open(server.root, server.mind, watch=True) as watched:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and all(m.key != "editor" for m in watched.list()):
            time.sleep(0.5)
        assert watched.get("fact/editor").content == "Uses neovim"


def test_sync_counts_in_words_that_agree_with_the_numbers(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "desk", "A standing desk")
    assert "1 commit out" in ok(in_vault(laptop.root, "sync")).stdout
    out = ok(in_vault(server.root, "sync")).stdout
    assert "1 commit in (1 memory file changed), 0 commits out" in out


# ==============================================================================================================
# Trust holes of sync (issues 20 and 21): no value reaches git as an option or a command, a killed sync
# is recovered, `resolve --ours` means this machine's text everywhere, and sync's errors and exit codes.
# ==============================================================================================================


EXIT_SYNC_CONFLICTS = getattr(errors, "EXIT_SYNC_CONFLICTS", 8)


def autosync_with(vault: Vault, remote: str) -> None:
    config = vault.root / "memfile.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + f"\n[sync]\nautosync = true\ninterval = 10\nremote = '{remote}'\n",
        encoding="utf-8",
    )
    (vault.root / ".memfile" / f"synced-{vault.mind}").unlink(missing_ok=True)


def hostile(pwned: Path) -> str:
    return f"--upload-pack=touch {pwned}; git-upload-pack"


# --- issue 20 item 1: no value reaches git as an option ---------------------------------------


def test_sync_remote_option_never_runs_a_command(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    pwned = tmp_path / "PWNED"
    result = fails(in_vault(laptop.root, "sync", "--remote", hostile(pwned)), 2)
    assert not pwned.exists()
    assert "--remote" in result.stderr and "origin" in result.stderr  # names the remotes that exist


def test_sync_branch_option_never_reaches_git_as_an_option(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    pwned = tmp_path / "PWNED"
    for branch in (f"--exec=touch {pwned}", "main:refs/heads/other", "a..b", "HEAD"):
        result = fails(in_vault(laptop.root, "sync", "--branch", branch), 2)
        assert "--branch" in result.stderr
    assert not pwned.exists()
    assert git(laptop.root, "ls-remote", "--heads", "origin").count("refs/heads/") == 1


def test_hostile_config_remote_in_memfile_toml_runs_nothing_through_autosync(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    laptop, _ = two
    pwned = tmp_path / "PWNED"
    autosync_with(laptop, hostile(pwned))
    # The write succeeds with a notice, or memfile.toml is refused when read: either way, nothing ran.
    result = in_vault(laptop.root, "store", "fact", "editor", "Uses neovim")
    assert result.exit_code in (0, 2) and "Traceback" not in result.stderr
    assert not pwned.exists()
    assert "remote" in result.stderr and "memfile.toml" in result.stderr
    result = fails(in_vault(laptop.root, "sync"), 2)
    assert not pwned.exists()
    assert "remote" in result.stderr and "memfile.toml" in result.stderr


def test_config_remote_that_is_a_path_to_a_repository_with_hooks_is_refused(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    """A path (or URL) in `[sync] remote` would run that repository's hooks on push: only remote names."""
    laptop, _ = two
    pwned = tmp_path / "PWNED"
    hooked = tmp_path / "hooked.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hooked)], check=True)
    hook = hooked / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ntouch {pwned}\n", encoding="utf-8")
    hook.chmod(0o755)
    autosync_with(laptop, str(hooked))
    ok(in_vault(laptop.root, "store", "fact", "editor", "Uses neovim"))
    fails(in_vault(laptop.root, "sync"), 2)
    fails(in_vault(laptop.root, "sync", "--remote", str(hooked)), 2)
    assert not pwned.exists()


def test_command_running_transports_are_off_for_memfiles_git(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    pwned = tmp_path / "PWNED"
    url = f"ext::sh -c touch% {pwned}"
    fails(in_vault(laptop.root, "remote", "add", url, "--name", "evil"), 2)
    # Added by hand, with the person's config allowing it: memfile's own git calls still refuse it.
    git(laptop.root, "remote", "add", "evil", url)
    git(laptop.root, "config", "protocol.allow", "always")
    fails(in_vault(laptop.root, "sync", "--remote", "evil"), 6)
    assert not pwned.exists()


def test_remote_add_values_never_reach_git_as_options(vault: Vault, tmp_path: Path) -> None:
    pwned = tmp_path / "PWNED"
    fails(in_vault(vault.root, "remote", "add", hostile(pwned)), 2)
    fails(in_vault(vault.root, "remote", "add", str(tmp_path / "r.git"), "--name", "--mirror=fetch"), 2)
    assert not pwned.exists() and git(vault.root, "remote").strip() == ""


def test_at_revision_never_reaches_git_as_an_option(vault: Vault, tmp_path: Path) -> None:
    vault.store("fact", "x", "one")
    out = tmp_path / "PWNED"
    for face in ("restore", "show"):
        fails(in_vault(vault.root, face, "fact/x", "--at", f"--output={out}"), 2)
    assert not out.exists()


# --- issue 20 item 9: a killed sync is recovered ---------------------------------------------


def blocking_sync(laptop: Vault, server: Vault, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A `memfile sync` on the server stopped inside git's merge (a merge driver that waits for `release`)."""
    laptop.store("fact", "slow", "Laptop's text")
    laptop.sync()
    server.store("fact", "slow", "Server's text")
    script = tmp_path / "driver.sh"
    script.write_text(
        f"#!/bin/sh\ntouch {tmp_path}/started\nwhile [ ! -e {tmp_path}/release ]; do sleep 0.02; done\nexit 1\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    (server.root / ".git" / "info").mkdir(exist_ok=True)
    (server.root / ".git" / "info" / "attributes").write_text("michael/fact/slow.md merge=slow\n", encoding="utf-8")
    git(server.root, "config", "merge.slow.driver", f"{script} %O %A %B")
    sync = subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(server.root), "sync"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert wait_until(lambda: (tmp_path / "started").exists(), 30)
    return sync, tmp_path / "release"


def left_behind(root: Path) -> list[str]:
    git_dir = root / ".git"
    return sorted(
        [p.name for p in root.iterdir() if p.name.startswith((".merge_file_", ".memfile-tmp-"))]
        + [n for n in ("index.lock", "MERGE_HEAD") if (git_dir / n).exists()]
    )


def test_sync_killed_with_its_git_inside_the_merge_is_cleaned_up_by_the_next_write(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    laptop, server = two
    sync, _ = blocking_sync(laptop, server, tmp_path)
    os.killpg(sync.pid, signal.SIGKILL)  # memfile, git and the merge driver
    sync.wait()
    assert "index.lock" in left_behind(server.root)  # the state the issue found
    head = git(server.root, "rev-parse", "HEAD")
    result = ok(in_vault(server.root, "store", "fact", "other", "written after the kill"))
    assert left_behind(server.root) == []
    assert "sync" in result.stderr  # a notice says what was cleaned up
    assert git(server.root, "rev-parse", "HEAD~1") == head  # the interrupted merge changed nothing
    (server.root / ".git" / "info" / "attributes").unlink()
    fails(in_vault(server.root, "sync"), EXIT_SYNC_CONFLICTS)  # the next sync merges as usual
    assert left_behind(server.root) == [] and git(server.root, "status", "--porcelain").strip() == ""


def test_sync_killed_while_its_git_goes_on_is_waited_for_by_the_next_write(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    laptop, server = two
    sync, release = blocking_sync(laptop, server, tmp_path)
    os.kill(sync.pid, signal.SIGKILL)  # memfile only: its git goes on until it finds nobody listening
    sync.wait()
    release.touch()
    ok(in_vault(server.root, "store", "fact", "other", "written after the kill"))  # waits for that git
    assert left_behind(server.root) == [] and not (server.root / ".git" / "MEMFILE_SYNC").exists()
    assert git(server.root, "status", "--porcelain").strip() == ""
    (server.root / ".git" / "info" / "attributes").unlink()
    fails(in_vault(server.root, "sync"), EXIT_SYNC_CONFLICTS)
    assert server.get("fact/slow").content == "Server's text" and server.get("fact/slow").conflict == "Laptop's text"


def merge_stopped_by_git(laptop: Vault, server: Vault, message: str, other: str = "michael/fact/slow.md") -> None:
    """The state a sync killed after its `git merge` stopped leaves: MERGE_HEAD, MERGE_MSG, unmerged files."""
    write(laptop.root / other, "laptop\n")
    commit_by_hand(laptop.root, other)
    laptop.store("fact", "slow", "Laptop's text")
    laptop.sync()
    write(server.root / other, "server\n")
    commit_by_hand(server.root, other)
    server.store("fact", "slow", "Server's text")
    git(server.root, "fetch", "-q", "origin")
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=H",
            "-c",
            "user.email=h@e",
            "-c",
            "merge.memfile.driver=false",
            "merge",
            "-q",
            "-m",
            message,
            "origin/main",
        ],
        cwd=server.root,
        capture_output=True,
    )
    assert (server.root / ".git" / "MERGE_HEAD").exists() and git(server.root, "ls-files", "-u")


def test_a_sync_merge_left_half_done_is_finished_by_the_next_write(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    merge_stopped_by_git(laptop, server, "sync: merge origin/main\n\nmind: michael")
    result = ok(in_vault(server.root, "store", "fact", "other", "written after the kill"))
    assert "finished the merge of origin/main" in result.stderr
    assert left_behind(server.root) == [] and git(server.root, "status", "--porcelain").strip() == ""
    parents, subject = git(server.root, "log", "-1", "--format=%P%n%s", "HEAD~1").splitlines()
    assert len(parents.split()) == 2 and subject.startswith("sync: merge origin/main, keeping michael/fact/slow.md")
    assert server.get("fact/slow").content == "Server's text"  # ours kept; the laptop's is in the merge


def test_a_sync_merge_left_half_done_outside_memories_is_undone_by_the_next_write(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    head = None
    merge_stopped_by_git(laptop, server, "sync: merge origin/main\n\nmind: michael", other="notes.txt")
    head = git(server.root, "rev-parse", "HEAD")
    result = ok(in_vault(server.root, "store", "fact", "other", "written after the kill"))
    assert "undid the merge of origin/main" in result.stderr and "memfile sync" in result.stderr
    assert left_behind(server.root) == [] and git(server.root, "rev-parse", "HEAD~1") == head


def test_a_persons_own_merge_in_progress_is_never_aborted(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    laptop.sync()
    server.store("fact", "office", "Munich")
    git(server.root, "fetch", "-q", "origin")
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=H",
            "-c",
            "user.email=h@e",
            "-c",
            "merge.memfile.driver=false",
            "merge",
            "-q",
            "origin/main",
        ],
        cwd=server.root,
        capture_output=True,
    )
    assert (server.root / ".git" / "MERGE_HEAD").exists()
    (server.root / ".git" / "MEMFILE_SYNC").touch()  # even beside what a killed sync left
    fails(in_vault(server.root, "store", "fact", "other", "x"), 6)
    assert (server.root / ".git" / "MERGE_HEAD").exists() and git(server.root, "ls-files", "-u")


# --- issue 20 item 10: --ours is this machine's text on both machines ------------------------


def conflicted(two: tuple[Vault, Vault]) -> tuple[Vault, Vault]:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg (laptop)")
    server.store("fact", "office", "Munich (server)")
    laptop.sync()
    assert server.sync().conflicts == ["fact/office"]  # merged on the server, pushed as is
    assert laptop.sync().conflicts == ["fact/office"]  # the laptop gets the server's merged file
    return laptop, server


def test_resolve_ours_is_this_machines_text_on_the_machine_that_pulled_the_conflict(two: tuple[Vault, Vault]) -> None:
    laptop, server = conflicted(two)
    ok(in_vault(laptop.root, "resolve", "fact/office", "--ours"))
    assert laptop.get("fact/office").content == "Hamburg (laptop)"
    ok(in_vault(server.root, "resolve", "fact/office", "--ours"))
    assert server.get("fact/office").content == "Munich (server)"


def test_resolve_theirs_and_edit_on_the_machine_that_pulled_the_conflict(
    two: tuple[Vault, Vault], tmp_path: Path
) -> None:
    laptop, server = conflicted(two)
    seen = tmp_path / "seen.md"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" {seen}\nprintf "\\n" >> "$1"\n', encoding="utf-8")  # saves it as shown
    editor.chmod(0o755)
    ok(in_vault(laptop.root, "resolve", "fact/office", "--edit", env={"EDITOR": str(editor)}))
    shown = seen.read_text(encoding="utf-8")
    assert shown.index("Hamburg (laptop)") < shown.index("Munich (server)")  # this machine's text first
    body = laptop.get("fact/office").content
    assert "Hamburg (laptop)" in body and "Munich (server)" in body and "----" not in body  # guides stripped
    ok(in_vault(server.root, "resolve", "fact/office", "--theirs"))
    assert server.get("fact/office").content == "Hamburg (laptop)"


def test_resolve_ours_after_a_conflict_made_by_a_plain_git_pull(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    server.sync()  # sets up the merge driver on the clone
    laptop.store("fact", "office", "Hamburg (laptop)")
    server.store("fact", "office", "Munich (server)")
    laptop.sync()
    git(server.root, "-c", "user.name=H", "-c", "user.email=h@e", "pull", "-q", "--no-rebase", "origin", "main")
    git(server.root, "push", "-q", "origin", "HEAD:main")
    laptop.sync()
    ok(in_vault(laptop.root, "resolve", "fact/office", "--ours"))
    assert laptop.get("fact/office").content == "Hamburg (laptop)"


# --- issue 21 item 10: sync sets the upstream -------------------------------------------------


def test_status_shows_ahead_and_behind_after_remote_add_and_sync(vault: Vault, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    vault.store("fact", "x", "one")
    ok(in_vault(vault.root, "remote", "add", str(bare)))
    ok(in_vault(vault.root, "sync"))
    vault.store("fact", "y", "two")
    git_status = vault.status()["git"]
    assert git_status["upstream"] == "origin/main" and git_status["ahead"] == 1 and git_status["behind"] == 0


# --- issue 21 item 22 and 19: sync's and resolve's answers ------------------------------------


def test_sync_that_leaves_conflicts_exits_with_its_own_code(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    result = fails(in_vault(server.root, "sync"), EXIT_SYNC_CONFLICTS)
    assert "conflict: fact/office" in result.stdout
    fails(in_vault(server.root, "sync", "--json"), EXIT_SYNC_CONFLICTS)
    ok(in_vault(server.root, "resolve", "fact/office", "--ours"))
    ok(in_vault(server.root, "sync"))


def test_autosync_that_leaves_conflicts_says_so(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    laptop.sync()
    autosync_with(server, "origin")
    server = Vault.open(server.root, server.mind)
    result = server.store("fact", "office", "Munich")
    assert any("conflict" in n and "fact/office" in n and "resolve" in n for n in result.notices), result.notices


def test_remote_add_of_an_existing_name_says_use_name(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    result = fails(in_vault(laptop.root, "remote", "add", str(tmp_path / "other.git")), 4)
    assert "--name" in result.stderr and "origin" in result.stderr


def test_sync_with_an_unknown_remote_names_those_that_exist(two: tuple[Vault, Vault]) -> None:
    laptop, _ = two
    result = fails(in_vault(laptop.root, "sync", "--remote", "nope"), 2)
    assert "nope" in result.stderr and "origin" in result.stderr and "does not appear" not in result.stderr
    git(laptop.root, "remote", "remove", "origin")
    result = fails(in_vault(laptop.root, "sync"), 2)
    assert "memfile remote add" in result.stderr


def test_sync_to_a_branch_that_exists_nowhere_is_refused_unless_asked(two: tuple[Vault, Vault]) -> None:
    laptop, _ = two
    result = fails(in_vault(laptop.root, "sync", "--branch", "develop"), 2)
    assert "develop" in result.stderr and "--new-branch" in result.stderr
    assert "develop" not in git(laptop.root, "ls-remote", "--heads", "origin")
    ok(in_vault(laptop.root, "sync", "--branch", "develop", "--new-branch"))
    assert "refs/heads/develop" in git(laptop.root, "ls-remote", "--heads", "origin")
    ok(in_vault(laptop.root, "sync", "--branch", "develop"))  # exists there now


def test_resolve_edit_strips_its_guide_lines_left_in(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    server.sync()
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "\\n" >> "$1"\n', encoding="utf-8")  # saves the text as shown
    editor.chmod(0o755)
    ok(in_vault(server.root, "resolve", "fact/office", "--edit", env={"EDITOR": str(editor)}))
    body = server.get("fact/office").content
    assert body.splitlines()[0] == "Munich" and "Hamburg" in body
    assert not any(line.startswith("# ----") for line in body.splitlines())


def test_resolve_without_a_choice_says_what_to_pass(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "Hamburg")
    server.store("fact", "office", "Munich")
    laptop.sync()
    server.sync()
    result = fails(in_vault(server.root, "resolve", "fact/office"), 2)
    assert "None" not in result.stderr and "--ours" in result.stderr and "--theirs" in result.stderr
    result = fails(in_vault(server.root, "resolve", "fact/office", "--ours", "--theirs"), 2)
    assert "--ours" in result.stderr and "--theirs" in result.stderr
    assert server.get("fact/office").conflict is not None  # nothing was picked
