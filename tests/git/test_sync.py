"""Sync through a real bare remote and two clones: field-by-field merges, conflicts, never a lost commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import commit_count, fails, git, in_vault, ok

from memfile import GitError, Refused, Vault
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
    import time

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
