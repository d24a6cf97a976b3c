"""History from git: versions of a memory, show --at, restore, undo, log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BROKEN, commit_by_hand, commit_count, fails, in_vault, last_subject, ok, write

from memfile import Conflict, NotFound, Refused, Vault


def three_versions(vault: Vault) -> None:
    vault.store("project", "roadmap", "v1: search", tags=["plan"])
    vault.store("project", "roadmap", "v2: search and recall", tags=["plan"])
    vault.store("project", "roadmap", "v2: search and recall", tags=["plan", "q4"], priority="high")


def test_history_lists_every_version_newest_first_with_what_changed(vault: Vault) -> None:
    three_versions(vault)
    versions = vault.history("project/roadmap")
    assert [v.message for v in versions] == ["store project/roadmap (user)"] * 3
    newest, middle, oldest = versions
    assert newest.changed == ("priority", "tags") and newest.diff == ""
    assert middle.changed == ("content",) and "-v1: search" in middle.diff and "+v2: search and recall" in middle.diff
    assert oldest.changed == () and oldest.memory.content == "v1: search"
    assert all(v.source == "user" and v.author == "memfile" for v in versions)


def test_history_cli_text_and_json(vault: Vault) -> None:
    three_versions(vault)
    text = ok(in_vault(vault.root, "history", "roadmap")).stdout
    assert text.count("store project/roadmap (user)") == 3 and "changed priority, tags" in text
    data = json.loads(ok(in_vault(vault.root, "history", "project/roadmap", "--json")).stdout)
    assert [d["changed"] for d in data] == [["priority", "tags"], ["content"], []]
    assert data[2]["memory"]["content"] == "v1: search"


def test_forgotten_memory_has_history_and_can_be_restored(vault: Vault) -> None:
    three_versions(vault)
    memory_id = vault.get("project/roadmap").id
    vault.forget("project/roadmap")
    versions = vault.history("project/roadmap")
    assert versions[0].removed and versions[0].memory is None
    assert vault.history(memory_id)[0].removed  # by id too, through git's history
    result = vault.restore("project/roadmap")
    assert result.changed and result.created
    assert vault.get("project/roadmap").priority == "high" and "q4" in vault.get("project/roadmap").tags
    assert last_subject(vault.root).startswith("restore project/roadmap from ")
    assert vault.search("recall")[0].memory.key == "roadmap"  # the index knows it again


def test_restore_an_old_version_and_show_at(vault: Vault) -> None:
    three_versions(vault)
    assert vault.show_at("roadmap", "HEAD~2").content == "v1: search"
    assert ok(in_vault(vault.root, "show", "roadmap", "--at", "HEAD~2")).stdout.rstrip().endswith("v1: search")
    before = commit_count(vault.root)
    ok(in_vault(vault.root, "restore", "project/roadmap", "--at", "HEAD~2"))
    assert vault.get("roadmap").content == "v1: search" and commit_count(vault.root) == before + 1
    assert "content" in vault.history("roadmap")[0].changed


def test_restore_never_replaces_another_memory_stored_since_under_the_same_key(vault: Vault) -> None:
    vault.store("fact", "office", "Office in Berlin")
    vault.forget("fact/office")
    newer = vault.store("fact", "office", "Office in Hamburg (a new memory)").memory
    path = vault.root / "michael" / "fact" / "office.md"
    data, before = path.read_bytes(), commit_count(vault.root)
    with pytest.raises(Conflict) as caught:
        vault.restore("fact/office", at="HEAD~2")
    assert newer.id in str(caught.value) and "memfile forget fact/office" in str(caught.value)
    assert path.read_bytes() == data and commit_count(vault.root) == before
    result = fails(in_vault(vault.root, "restore", "fact/office", "--at", "HEAD~2"), 4)
    assert "is now another memory" in result.stderr
    vault.forget("fact/office")  # as the message says: then the old one comes back, with its own id
    restored = vault.restore("fact/office", at="HEAD~3").memory
    assert restored.content == "Office in Berlin" and restored.id != newer.id


def test_bad_at_and_unknown_ref_are_clear_errors(vault: Vault) -> None:
    three_versions(vault)
    assert "at" in fails(in_vault(vault.root, "show", "roadmap", "--at", "no-such-rev;rm"), 2).stderr
    assert "no version" in fails(in_vault(vault.root, "show", "roadmap", "--at", "1990-01-01"), 2).stderr
    fails(in_vault(vault.root, "history", "project/never_was"), 3)
    with pytest.raises(NotFound):
        vault.restore("project/never_was")


def test_undo_reverts_the_last_change_and_walks_back(vault: Vault) -> None:
    three_versions(vault)
    vault.forget("project/roadmap")
    ok(in_vault(vault.root, "undo"))
    assert last_subject(vault.root) == "undo: forget project/roadmap (user)"
    assert vault.get("roadmap").priority == "high"
    vault.undo()  # the last store (priority, tags) is undone next
    assert vault.get("roadmap").priority == "normal" and vault.get("roadmap").tags == ("plan",)
    vault.undo()  # v2 -> v1
    assert vault.get("roadmap").content == "v1: search"
    vault.undo()  # the creation
    assert all(m.key != "roadmap" for m in vault.list())
    with pytest.raises(Refused, match="no memfile change left"):
        vault.undo()


def test_undo_refuses_to_discard_later_work(vault: Vault) -> None:
    vault.store("fact", "office", "Office opens at 9")
    path = vault.root / vault.get("office").path
    path.write_text(path.read_text(encoding="utf-8").replace("at 9", "at 8"), encoding="utf-8")
    before = commit_count(vault.root)
    result = fails(in_vault(vault.root, "undo"), 2)  # an uncommitted hand edit of the same file
    assert "not yet committed" in result.stderr and commit_count(vault.root) == before
    commit_by_hand(vault.root, vault.get("office").path, message="person fixes the time")
    assert "later changes" in fails(in_vault(vault.root, "undo"), 2).stderr
    assert "at 8" in path.read_text(encoding="utf-8")


def test_log_is_a_readable_changelog(vault: Vault) -> None:
    three_versions(vault)
    vault.forget("roadmap")
    lines = ok(in_vault(vault.root, "log", "--since", "1d")).stdout.splitlines()
    assert "forget project/roadmap (user)" in lines[0] and len(lines) >= 4
    data = json.loads(ok(in_vault(vault.root, "log", "--limit", "2", "--json")).stdout)
    assert len(data) == 2 and data[0]["paths"] == [vault.mind + "/project/roadmap.md"]
    assert "since" in fails(in_vault(vault.root, "log", "--since", "yesterday-ish"), 2).stderr


def test_history_reports_an_unreadable_version_and_restore_never_overwrites_an_unreadable_file(vault: Vault) -> None:
    vault.store("fact", "office", "Office opens at 9")
    relpath = vault.get("office").path
    write(vault.root / relpath, BROKEN)
    commit_by_hand(vault.root, relpath, message="broken by hand")
    versions = vault.history("fact/office")
    assert versions[0].problem and versions[0].memory is None and versions[0].message == "broken by hand"
    before = (vault.root / relpath).read_bytes()
    fails(in_vault(vault.root, "restore", "fact/office", "--at", "HEAD~1"), 4)
    assert (vault.root / relpath).read_bytes() == before


def test_agent_cannot_restore_over_a_verified_memory(vault: Vault, tmp_path: Path) -> None:
    three_versions(vault)
    agent = Vault.open(vault.root, source="agent")
    with pytest.raises(Refused):
        agent.restore("roadmap", "HEAD~2")
