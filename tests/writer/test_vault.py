"""The Python API (`from memfile import Vault`) on real vaults with real git repositories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import (
    BROKEN,
    HAND_MADE,
    SAMPLE_VAULT,
    commit_by_hand,
    commit_count,
    fails,
    files_outside_git,
    git,
    in_vault,
    last_subject,
    ok,
    plain_vault,
    run,
    wait_until,
    write,
)

import memfile.fileformat
import memfile.swap
from memfile import (
    AmbiguousRef,
    Category,
    Conflict,
    InvalidInput,
    MemfileError,
    NotAVault,
    NotFound,
    Priority,
    Refused,
    Source,
    Vault,
)
from memfile.files import TEMP_PREFIX
from memfile.swap import EditedMeanwhile, put

# --- init --------------------------------------------------------------------------------------


def test_init_creates_config_mind_gitignore_and_repository(vault: Vault) -> None:
    root = vault.root
    assert (root / "memfile.toml").is_file()
    assert (root / "michael").is_dir()
    assert ".memfile/" in (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert (root / ".git").is_dir()
    assert git(root, "log", "--format=%s").splitlines() == ["init mind michael"]
    assert git(root, "ls-files").split() == [".gitattributes", ".gitignore", "memfile.toml", "michael/.gitkeep"]
    assert git(root, "status", "--porcelain").strip() == ""
    assert vault.mind == "michael"
    assert vault.name == "Michael's Mind"


def test_init_same_mind_twice_is_a_conflict(vault: Vault) -> None:
    before = commit_count(vault.root)
    with pytest.raises(Conflict) as info:
        Vault.init(vault.root, "michael")
    assert info.value.exit_code == 4
    assert commit_count(vault.root) == before


def test_init_second_mind_into_existing_vault(vault: Vault) -> None:
    before = commit_count(vault.root)
    bot = Vault.init(vault.root, "bot", "Helper Bot")
    assert (vault.root / "bot").is_dir()
    assert (vault.root / "michael").is_dir()
    assert commit_count(vault.root) == before + 1
    assert last_subject(vault.root) == "init mind bot"
    assert Vault.open(vault.root, mind="bot").name == "Helper Bot"
    assert Vault.open(vault.root).mind == "michael"  # default_mind is kept
    assert bot.mind == "bot"


# --- vault and mind selection -----------------------------------------------------------------


def test_open_explicit_path(vault: Vault) -> None:
    assert Vault.open(vault.root).root == vault.root


def test_open_from_memfile_vault_env(vault: Vault, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMFILE_VAULT", str(vault.root))
    assert Vault.open().root == vault.root


def test_open_finds_nearest_parent_with_memfile_toml(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = vault.root / "michael" / "fact"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert Vault.open().root == vault.root


def test_open_without_vault_says_memfile_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    with pytest.raises(NotAVault) as info:
        Vault.open()
    assert info.value.exit_code == 7
    assert "memfile init" in str(info.value)


def test_open_explicit_mind(vault: Vault) -> None:
    Vault.init(vault.root, "bot")
    assert Vault.open(vault.root, mind="bot").mind == "bot"


def test_open_mind_from_memfile_mind_env(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    Vault.init(vault.root, "bot")
    monkeypatch.setenv("MEMFILE_MIND", "bot")
    assert Vault.open(vault.root).mind == "bot"


def test_open_explicit_mind_beats_env(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    Vault.init(vault.root, "bot")
    monkeypatch.setenv("MEMFILE_MIND", "bot")
    assert Vault.open(vault.root, mind="michael").mind == "michael"


def test_open_uses_default_mind(tmp_path: Path) -> None:
    root = plain_vault(tmp_path / "v", 'default_mind = "beta"\n', alpha={}, beta={})
    assert Vault.open(root).mind == "beta"


def test_open_uses_the_only_mind_folder(tmp_path: Path) -> None:
    root = plain_vault(tmp_path / "v", "", solo={"fact/x": "a fact"})
    vault = Vault.open(root)
    assert vault.mind == "solo"
    assert vault.name == "solo"


def test_open_unknown_mind_is_not_found(vault: Vault) -> None:
    with pytest.raises(NotFound) as info:
        Vault.open(vault.root, mind="ghost")
    assert info.value.exit_code == 3
    assert "ghost" in str(info.value)


def test_open_several_minds_without_default_is_ambiguous(tmp_path: Path) -> None:
    root = plain_vault(tmp_path / "v", "", alpha={}, beta={})
    with pytest.raises(MemfileError) as info:
        Vault.open(root)
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "alpha" in message and "beta" in message and "--mind" in message


# --- store ------------------------------------------------------------------------------------


def test_store_creates_mind_category_key_file(vault: Vault) -> None:
    result = vault.store("fact", "office_city", "The office is in Berlin.")
    assert result.created and result.changed
    assert result.memory.path == "michael/fact/office_city.md"
    assert result.memory.id.startswith("mem_")
    text = (vault.root / "michael" / "fact" / "office_city.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    assert f"id: {result.memory.id}" in text
    assert text.endswith("The office is in Berlin.\n")
    assert vault.get("fact/office_city").content == "The office is in Berlin."


def test_store_defaults_for_a_user(vault: Vault) -> None:
    memory = vault.store("fact", "a", "text").memory
    assert memory.priority is Priority.NORMAL
    assert memory.source is Source.USER
    assert memory.verified is True
    assert memory.confidence == 1.0
    assert memory.expires_at is None
    assert memory.tags == ()


def test_store_tags_are_comma_split_lowercased_and_deduplicated(vault: Vault) -> None:
    memory = vault.store("fact", "a", "text", tags=["Alpha,BETA", "gamma", "alpha"]).memory
    assert memory.tags == ("alpha", "beta", "gamma")
    assert vault.get("fact/a").tags == ("alpha", "beta", "gamma")


def test_store_tags_from_a_comma_string(vault: Vault) -> None:
    assert vault.store("fact", "a", "text", tags="One, TWO").memory.tags == ("one", "two")


def test_store_priority_confidence_and_source(vault: Vault) -> None:
    memory = vault.store("project", "p", "text", priority="critical", confidence=0.42, source="agent").memory
    on_disk = vault.get("project/p")
    for m in (memory, on_disk):
        assert m.priority is Priority.CRITICAL
        assert m.confidence == pytest.approx(0.42)
        assert m.source is Source.AGENT
        assert m.verified is False


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
    ],
)
def test_store_expires_duration(vault: Vault, text: str, delta: timedelta) -> None:
    before = datetime.now(timezone.utc)
    expires = vault.store("context", "trip", "away", expires=text).memory.expires_at
    after = datetime.now(timezone.utc)
    assert expires is not None
    assert before + delta - timedelta(seconds=2) <= expires <= after + delta + timedelta(seconds=2)
    assert vault.get("context/trip").expires_at == expires


def test_store_expires_iso(vault: Vault) -> None:
    memory = vault.store("context", "trip", "away", expires="2031-05-06T07:08:09Z").memory
    assert memory.expires_at == datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    assert "expires_at: 2031-05-06T07:08:09Z" in (vault.root / memory.path).read_text(encoding="utf-8")


def test_store_expires_never_clears_it(vault: Vault) -> None:
    vault.store("context", "trip", "away", expires="7d")
    memory = vault.store("context", "trip", "away", expires="never").memory
    assert memory.expires_at is None
    assert vault.get("context/trip").expires_at is None


def test_store_same_category_key_updates_in_place(vault: Vault) -> None:
    path = vault.root / "michael" / "fact" / "office_hours.md"
    write(path, HAND_MADE)
    commit_by_hand(vault.root, "michael/fact/office_hours.md")
    result = vault.store("fact", "office_hours", "Office hours: 10-18.", priority="high")
    assert not result.created and result.changed
    memory = vault.get("fact/office_hours")
    assert memory.id == "mem_handmade0001"
    assert memory.created_at == datetime(2020, 1, 1, 8, 0, tzinfo=timezone.utc)
    assert memory.updated_at > datetime(2020, 1, 2, 8, 0, tzinfo=timezone.utc)
    assert memory.content == "Office hours: 10-18."
    assert memory.priority is Priority.HIGH
    assert [p.name for p in path.parent.iterdir()] == ["office_hours.md"]
    text = path.read_text(encoding="utf-8")
    assert "created_at: 2020-01-01T08:00:00Z" in text
    assert "aliases: [hours, opening]   # an inline comment\n" in text
    assert "# a comment kept by memfile\n" in text
    assert 'links:\n  - "https://example.com/hours"\n' in text
    assert text.index("aliases:") < text.index("# a comment") < text.index("links:")
    assert dict(memory.extra)["aliases"] == ["hours", "opening"]


def test_store_update_keeps_body_bytes_when_content_is_unchanged(vault: Vault) -> None:
    path = vault.root / "michael" / "fact" / "office_hours.md"
    write(path, HAND_MADE)
    commit_by_hand(vault.root, "michael/fact/office_hours.md")
    content = vault.get("fact/office_hours").content
    vault.store("fact", "office_hours", content, tags=["office", "work"])
    text = path.read_text(encoding="utf-8")
    body = HAND_MADE.split("---\n", 2)[2]
    assert text.endswith("---\n" + body)
    assert vault.get("fact/office_hours").tags == ("office", "work")
    lines_before = HAND_MADE.splitlines()
    lines_after = text.splitlines()
    changed = [line for line in lines_after if line not in lines_before]
    assert all(line.startswith(("tags", "updated_at", "  -")) for line in changed), changed


def test_store_makes_exactly_one_commit_with_message(vault: Vault) -> None:
    before = commit_count(vault.root)
    vault.store("project", "synapse_status", "v1.5.0 deployed")
    assert commit_count(vault.root) == before + 1
    assert last_subject(vault.root) == "store project/synapse_status (user)"
    vault.store("project", "synapse_status", "v1.6.0 deployed")
    assert commit_count(vault.root) == before + 2
    assert last_subject(vault.root) == "store project/synapse_status (user)"
    assert git(vault.root, "status", "--porcelain", "--", "michael").strip() == ""


def test_store_commit_message_names_agent(vault: Vault) -> None:
    vault.store("project", "synapse_status", "v1.5.0 deployed", source="agent")
    assert last_subject(vault.root) == "store project/synapse_status (agent)"


def test_store_identical_content_makes_no_commit(vault: Vault) -> None:
    first = vault.store("fact", "a", "same text", tags=["x"], priority="high")
    data = (vault.root / first.memory.path).read_bytes()
    before = commit_count(vault.root)
    again = vault.store("fact", "a", "same text", tags=["x"], priority="high")
    assert not again.changed and not again.created
    assert again.commit is None
    assert commit_count(vault.root) == before
    assert (vault.root / first.memory.path).read_bytes() == data


def test_agent_from_env_stores_unverified_with_confidence_07(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFILE_SOURCE", "agent")
    agent = Vault.open(vault.root)
    assert agent.actor is Source.AGENT
    memory = agent.store("project", "p", "observed").memory
    assert memory.source is Source.AGENT
    assert memory.verified is False
    assert memory.confidence == pytest.approx(0.7)
    assert last_subject(vault.root) == "store project/p (agent)"


def test_agent_may_not_store_as_user(vault: Vault) -> None:
    agent = Vault.open(vault.root, source="agent")
    before = commit_count(vault.root)
    with pytest.raises(Refused) as info:
        agent.store("fact", "a", "text", source="user")
    assert info.value.exit_code == 2
    assert commit_count(vault.root) == before
    assert not (vault.root / "michael" / "fact" / "a.md").exists()


# --- hand edits -------------------------------------------------------------------------------


def _hand_edit(vault: Vault, relpath: str, marker: str) -> None:
    path = vault.root / relpath
    path.write_text(path.read_text(encoding="utf-8") + marker + "\n", encoding="utf-8")


def test_store_commits_hand_edit_first(vault: Vault) -> None:
    path = vault.store("fact", "a", "original").memory.path
    _hand_edit(vault, path, "HAND EDITED LINE")
    before = commit_count(vault.root)
    vault.store("fact", "a", "replaced by store")
    assert commit_count(vault.root) == before + 2
    history = git(vault.root, "log", "-p", "--", path)
    assert "+HAND EDITED LINE" in history
    assert git(vault.root, "status", "--porcelain").strip() == ""


def test_forget_commits_hand_edit_first(vault: Vault) -> None:
    path = vault.store("fact", "a", "original").memory.path
    _hand_edit(vault, path, "HAND EDITED LINE")
    before = commit_count(vault.root)
    vault.forget("fact/a")
    assert commit_count(vault.root) == before + 2
    assert "+HAND EDITED LINE" in git(vault.root, "log", "-p", "--all", "--", path)


def test_verify_commits_hand_edit_first(vault: Vault) -> None:
    path = vault.store("fact", "a", "original", source="agent").memory.path
    _hand_edit(vault, path, "HAND EDITED LINE")
    before = commit_count(vault.root)
    vault.verify("fact/a")
    assert commit_count(vault.root) == before + 2
    assert "+HAND EDITED LINE" in git(vault.root, "log", "-p", "--", path)
    assert vault.get("fact/a").verified is True


def test_untracked_hand_made_file_is_committed_before_overwrite(vault: Vault) -> None:
    path = write(vault.root / "michael" / "fact" / "handmade.md", "A hand-made fact, never committed.\n")
    before = commit_count(vault.root)
    vault.store("fact", "handmade", "Now stored by memfile.")
    assert commit_count(vault.root) == before + 2
    history = git(vault.root, "log", "-p", "--", "michael/fact/handmade.md")
    assert "+A hand-made fact, never committed." in history
    assert path.read_text(encoding="utf-8").endswith("Now stored by memfile.\n")


# --- show -------------------------------------------------------------------------------------


def test_show_by_id_category_key_and_unique_key(vault: Vault) -> None:
    stored = vault.store("preference", "answer_style", "concise").memory
    for ref in (stored.id, "preference/answer_style", "answer_style"):
        assert vault.show(ref).id == stored.id
        assert vault.get(ref).content == "concise"


def test_show_ambiguous_key_lists_both(vault: Vault) -> None:
    vault.store("fact", "berlin", "a city")
    vault.store("note", "berlin", "a note about the city")
    with pytest.raises(AmbiguousRef) as info:
        vault.show("berlin")
    assert info.value.exit_code == 2
    assert "fact/berlin" in str(info.value) and "note/berlin" in str(info.value)


def test_show_not_found(vault: Vault) -> None:
    vault.store("fact", "a", "text")
    for ref in ("nothing", "fact/nothing", "mem_0000000000zzzz"):
        with pytest.raises(NotFound) as info:
            vault.show(ref)
        assert info.value.exit_code == 3


# --- list -------------------------------------------------------------------------------------


@pytest.fixture
def filled(vault: Vault) -> Vault:
    vault.store("fact", "f1", "fact one", tags=["a", "b"], priority="high")
    vault.store("fact", "f2", "fact two", tags=["a"], source="agent")
    vault.store("project", "p1", "project one", tags=["b"], priority="low")
    vault.store("note", "old", "expired note", tags=["a", "b"], expires="2020-01-01T00:00:00Z")
    return vault


def refs(memories: list) -> list[str]:
    return [m.ref for m in memories]


def test_list_all_hides_expired(filled: Vault) -> None:
    assert refs(filled.list()) == ["fact/f1", "fact/f2", "project/p1"]


def test_list_include_expired(filled: Vault) -> None:
    assert refs(filled.list(include_expired=True)) == ["fact/f1", "fact/f2", "note/old", "project/p1"]


def test_list_by_category(filled: Vault) -> None:
    assert refs(filled.list(category="fact")) == ["fact/f1", "fact/f2"]
    assert refs(filled.list(category=Category.PROJECT)) == ["project/p1"]


def test_list_by_tags_means_all_of_them(filled: Vault) -> None:
    assert refs(filled.list(tags=["a"])) == ["fact/f1", "fact/f2"]
    assert refs(filled.list(tags=["A", "b"])) == ["fact/f1"]
    assert refs(filled.list(tags=["a", "b"], include_expired=True)) == ["fact/f1", "note/old"]


def test_list_by_priority(filled: Vault) -> None:
    assert refs(filled.list(priority="high")) == ["fact/f1"]
    assert refs(filled.list(priority="normal")) == ["fact/f2"]


def test_list_by_source(filled: Vault) -> None:
    assert refs(filled.list(source="agent")) == ["fact/f2"]
    assert refs(filled.list(source="user")) == ["fact/f1", "project/p1"]


def test_list_unverified(filled: Vault) -> None:
    assert refs(filled.list(unverified=True)) == ["fact/f2"]


def test_list_bad_filter_is_invalid_input(filled: Vault) -> None:
    with pytest.raises(InvalidInput):
        filled.list(priority="urgent")


# --- forget and verify ------------------------------------------------------------------------


def test_forget_removes_file_in_one_commit_history_keeps_it(vault: Vault) -> None:
    path = vault.store("fact", "a", "to be forgotten").memory.path
    before = commit_count(vault.root)
    forgotten = vault.forget("fact/a")
    assert forgotten.content == "to be forgotten"
    assert not (vault.root / path).exists()
    assert commit_count(vault.root) == before + 1
    assert last_subject(vault.root) == "forget fact/a (user)"
    log = git(vault.root, "log", "--all", "--format=%s", "--", path).splitlines()
    assert log == ["forget fact/a (user)", "store fact/a (user)"]
    assert "to be forgotten" in git(vault.root, "show", f"HEAD~1:{path}")
    with pytest.raises(NotFound):
        vault.get("fact/a")


def test_verify_sets_verified_in_one_commit(vault: Vault) -> None:
    vault.store("project", "p", "observed", source="agent")
    before = commit_count(vault.root)
    result = vault.verify("project/p")
    assert result.changed and result.memory.verified
    assert vault.get("project/p").verified is True
    assert "verified: true" in (vault.root / "michael" / "project" / "p.md").read_text(encoding="utf-8")
    assert commit_count(vault.root) == before + 1
    assert last_subject(vault.root) == "verify project/p (user)"


def test_agent_cannot_verify(vault: Vault) -> None:
    vault.store("project", "p", "observed", source="agent")
    agent = Vault.open(vault.root, source="agent")
    before = commit_count(vault.root)
    with pytest.raises(Refused) as info:
        agent.verify("project/p")
    assert info.value.exit_code == 2
    assert commit_count(vault.root) == before
    assert vault.get("project/p").verified is False


def test_verify_already_verified_makes_no_commit(vault: Vault) -> None:
    vault.store("fact", "a", "text")
    before = commit_count(vault.root)
    result = vault.verify("fact/a")
    assert not result.changed
    assert commit_count(vault.root) == before


# --- expiring ---------------------------------------------------------------------------------


def test_expiring_within_window_only(vault: Vault) -> None:
    vault.store("context", "in_3d", "soon", expires="3d")
    vault.store("context", "in_1d", "sooner", expires="1d")
    vault.store("context", "in_10d", "later", expires="10d")
    vault.store("context", "never", "forever")
    vault.store("context", "past", "gone", expires="2020-01-01T00:00:00Z")
    assert refs(vault.expiring("7d")) == ["context/in_1d", "context/in_3d"]
    assert refs(vault.expiring("2w")) == ["context/in_1d", "context/in_3d", "context/in_10d"]
    assert refs(vault.expiring("12h")) == []


def test_expiring_bad_duration(vault: Vault) -> None:
    with pytest.raises(InvalidInput) as info:
        vault.expiring("7 days please")
    assert info.value.field == "within"


# --- recall -----------------------------------------------------------------------------------


def test_recall_on_sample_vault(sample_copy: Path) -> None:
    text = Vault.open(sample_copy).recall(budget=None)
    assert text.startswith("Mind: Michael's Mind\n")
    assert "conference_trip_march" not in text
    assert "user_name" in text


def test_recall_budget_keeps_critical(sample_copy: Path) -> None:
    report = Vault.open(sample_copy).recall(budget=300)
    assert report.tokens <= 300
    assert report.left_out > 0
    keys = [item.memory.key for item in report.items]
    assert "user_name" in keys and "never_delete_db_volume" in keys


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"category": "hobby"}, "category"),
        ({"priority": "urgent"}, "priority"),
        ({"key": "../x"}, "key"),
        ({"key": "a/b"}, "key"),
        ({"key": "/etc/passwd"}, "key"),
        ({"key": "Key With Space"}, "key"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": "high"}, "confidence"),
        ({"expires": "next tuesday"}, "expires"),
        ({"expires": "2026-13-45"}, "expires"),
    ],
)
def test_store_bad_input_names_the_field(vault: Vault, tmp_path: Path, kwargs: dict, field: str) -> None:
    args = {"category": "fact", "key": "good_key", "content": "text"} | kwargs
    category, key, content = args.pop("category"), args.pop("key"), args.pop("content")
    before = files_outside_git(tmp_path)
    commits = commit_count(vault.root)
    with pytest.raises(InvalidInput) as info:
        vault.store(category, key, content, **args)
    assert info.value.exit_code == 2
    assert info.value.field == field
    assert "allowed" in str(info.value)
    assert files_outside_git(tmp_path) == before
    assert commit_count(vault.root) == commits


@pytest.mark.parametrize("ref", ["../../etc/passwd", "%2e%2e/x", "/abs", "a/b/c", "..", "fact/../x"])
@pytest.mark.parametrize("verb", ["get", "forget", "verify"])
def test_ref_leaving_the_mind_is_refused(vault: Vault, ref: str, verb: str) -> None:
    vault.store("fact", "x", "text", source="agent")
    before = commit_count(vault.root)
    with pytest.raises(InvalidInput) as info:
        getattr(vault, verb)(ref)
    assert info.value.field.startswith("REF")
    assert commit_count(vault.root) == before
    assert (vault.root / "michael" / "fact" / "x.md").exists()


def test_symlinked_category_folder_leading_outside_is_refused(vault: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / "michael" / "fact").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidInput):
        vault.store("fact", "leak", "should not leave the mind")
    assert list(outside.iterdir()) == []


# --- malformed files --------------------------------------------------------------------------


def test_malformed_file_is_reported_and_skipped(vault: Vault) -> None:
    vault.store("fact", "good", "fine")
    broken = write(vault.root / "michael" / "fact" / "broken.md", BROKEN)
    assert refs(vault.list()) == ["fact/good"]
    assert [(i.path, i.line) for i in vault.issues] == [("michael/fact/broken.md", 4)]
    vault.store("fact", "another", "still works")
    vault.recall()
    assert broken.read_bytes() == BROKEN.encode("utf-8")


# --- git: nested repository, identity ---------------------------------------------------------


def test_vault_inside_another_repo_gets_its_own_repository(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    write(outer / "README.md", "outer project\n")
    commit_by_hand(outer, "README.md")
    root = outer / "notes" / "vault"
    shutil.copytree(SAMPLE_VAULT, root)
    vault = Vault.open(root)
    result = vault.store("fact", "nested", "inside another repo")
    assert (root / ".git").exists()
    assert any("initialized a git repository" in n for n in result.notices)
    assert commit_count(outer) == 1
    assert commit_count(root) == 2
    assert last_subject(root) == "store fact/nested (user)"


def test_commit_author_defaults_to_memfile(vault: Vault) -> None:
    vault.store("fact", "a", "text")
    assert git(vault.root, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        "memfile <memfile@localhost>|memfile <memfile@localhost>"
    )


def test_commit_author_from_memfile_toml(vault: Vault) -> None:
    with open(vault.root / "memfile.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[git]\nauthor_name = "Memory Keeper"\nauthor_email = "keeper@example.com"\n')
    Vault.open(vault.root).store("fact", "a", "text")
    assert git(vault.root, "log", "-1", "--format=%an <%ae>").strip() == "Memory Keeper <keeper@example.com>"


# --- concurrency ------------------------------------------------------------------------------


WRITER = """
import os, sys, time
from memfile import Vault
root, prefix, go = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 30
while not os.path.exists(go) and time.monotonic() < deadline:  # start both writers together
    time.sleep(0.002)
for i in range(5):
    Vault.open(root).store("fact", f"{prefix}_{i}", f"{prefix} number {i}")
"""


def test_two_processes_storing_at_once_both_succeed(vault: Vault, tmp_path: Path) -> None:
    go = tmp_path / "go"
    before = commit_count(vault.root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(vault.root), prefix, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("left", "right")
    ]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    keys = {m.key for m in vault.list()}
    assert keys == {f"{p}_{i}" for p in ("left", "right") for i in range(5)}
    # Stores that waited for the lock may share a commit (the lock holder commits the queue together),
    # but each one is in exactly one commit, and the commits name what they stored.
    subjects = git(vault.root, "log", "--format=%s", f"-{commit_count(vault.root) - before}").splitlines()
    assert before + 2 <= commit_count(vault.root) <= before + 10
    stored = [ref for subject in subjects for ref in subject.removeprefix("store ").removesuffix(" (user)").split(", ")]
    assert sorted(stored) == sorted(f"fact/{p}_{i}" for p in ("left", "right") for i in range(5))
    assert git(vault.root, "status", "--porcelain").strip() == ""
    assert not list((vault.root / ".memfile" / "queue").rglob("*.*"))  # every request and result picked up


def test_a_store_leaves_what_a_person_staged_staged_and_out_of_its_commit(vault: Vault) -> None:
    root = vault.root
    (root / "README.txt").write_text("my notes about this vault\n", encoding="utf-8")
    git(root, "add", "README.txt")
    result = vault.store("fact", "staged_aside", "stored while README.txt waits in the index")
    assert git(root, "show", "--name-only", "--format=", result.commit).split() == ["michael/fact/staged_aside.md"]
    assert git(root, "diff", "--cached", "--name-only").split() == ["README.txt"]
    assert vault.store("fact", "staged_aside", "stored while README.txt waits in the index").commit is None
    assert git(root, "diff", "--cached", "--name-only").split() == ["README.txt"]


def test_a_store_sees_files_renamed_copied_or_edited_by_hand_just_before(vault: Vault) -> None:
    """A store reads no more than it must (names, not every file's stat), yet misses no hand change to its memory."""
    mind = vault.root / "michael"
    vault.store("fact", "boat", "The boat is called Aurora")
    vault.store("fact", "car", "The car is blue")
    os.rename(mind / "fact" / "boat.md", mind / "fact" / "my-boat.md")  # renamed by hand: still fact/boat
    result = vault.store("fact", "boat", "The boat is called Borealis")
    assert result.memory.path == "michael/fact/my-boat.md" and not result.created
    assert not (mind / "fact" / "boat.md").exists()
    car = mind / "fact" / "car.md"
    car.write_text(car.read_text(encoding="utf-8").replace("blue", "red"), encoding="utf-8")  # edited in place
    assert vault.store("fact", "car", "The car is red, and fast").memory.content == "The car is red, and fast"
    assert [v.memory.content for v in vault.history("fact/car") if v.memory][:3] == [
        "The car is red, and fast",
        "The car is red",
        "The car is blue",
    ]  # the hand edit kept in history
    shutil.copy(mind / "fact" / "car.md", mind / "fact" / "car-copy.md")  # copied by hand
    with pytest.raises(AmbiguousRef):
        vault.store("fact", "car", "third version")


def test_a_file_is_read_with_its_stat_before_and_after_from_one_descriptor(tmp_path: Path) -> None:
    """files.read_file: the bytes, and (size, mtime_ns, inode) as os.stat gives them; a symlink only when
    `follow` allows it; a FIFO refused without blocking; a missing file a parse error, not an OSError."""
    from memfile.errors import FileParseError
    from memfile.files import read_file

    note = tmp_path / "note.md"
    note.write_bytes(b"---\nkey: x\n---\nbody\n")
    info = os.stat(note)
    data, before, after = read_file(str(note), "m/note.md", lambda path: False)
    assert data == note.read_bytes() and before == after == (
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_ino,
    )

    link = tmp_path / "link.md"
    link.symlink_to(note)
    followed: list[str] = []
    assert read_file(str(link), "m/link.md", lambda path: followed.append(path) or True)[0] == data
    assert followed == [str(link)]
    with pytest.raises(FileParseError, match="symlink leads outside"):
        read_file(str(link), "m/link.md", lambda path: False)

    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(FileParseError, match="not a regular file"):
        read_file(str(tmp_path / "pipe.md"), "m/pipe.md", lambda path: True)
    with pytest.raises(FileParseError, match="cannot be read"):
        read_file(str(tmp_path / "gone.md"), "m/gone.md", lambda path: True)


@pytest.mark.parametrize(
    ("failures", "rebuilt"),
    [
        ([FileNotFoundError], False),
        ([FileNotFoundError, FileNotFoundError], False),  # merged away, again
        ([FileNotFoundError] * 3, True),
        ([ValueError, ValueError], True),
        ([ValueError, FileNotFoundError], False),
    ],
)
def test_a_search_looks_again_at_an_index_a_busy_writer_merged_under_it(
    vault: Vault, failures: list[type[Exception]], rebuilt: bool
) -> None:
    """A file of the index gone is most likely merged away by another process's commit: a search
    looks afresh twice for it before it rebuilds (once for any other failure)."""
    from memfile.index import IndexDamaged, SearchOptions

    vault.store("fact", "alpha", "The alpha note talks about zeppelins.")
    calls: list[int] = []

    def search_counted(*args: object, **kwargs: object) -> tuple[list[object], int]:
        calls.append(len(calls))
        if len(calls) <= len(failures):
            try:
                raise failures[len(calls) - 1]("a segment file")
            except Exception as exc:  # as the index's net gives it: damage, with what Whoosh raised
                raise IndexDamaged(type(exc).__name__) from exc
        return [], 7

    store = vault._index.store
    assert store is not None
    store.search_counted = search_counted  # type: ignore[method-assign]
    assert vault._index.read(lambda view: view.search("zeppelins", SearchOptions())) == ([], 7)
    assert any("damaged" in notice for notice in vault.notices) is rebuilt
    assert len(calls) == min(len(failures), 3 if failures[-1] is FileNotFoundError else 2) + 1


def test_notices_tell_about_one_call_and_never_pile_up(tmp_path: Path) -> None:
    """Issue 22: a third store no longer reports the repository the first one made."""
    from helpers import plain_vault

    root = plain_vault(tmp_path / "v", michael={})
    vault = Vault.open(root, "michael")
    first = vault.store("fact", "a", "one")
    assert any("initialized a git repository" in n for n in first.notices)
    second = vault.store("fact", "b", "two")
    third = vault.store("fact", "c", "three")
    assert second.notices == third.notices == () and vault.notices == []


def test_status_stats_and_last_recall_are_typed_and_read_like_their_dicts(vault: Vault) -> None:
    from memfile.recalling import RecallRecord
    from memfile.vault import StatsReport, StatusReport

    vault.store("fact", "a", "one")
    vault.recall()
    status, stats, record = vault.status(), vault.stats(), vault.last_recall()
    assert isinstance(status, StatusReport) and isinstance(stats, StatsReport) and isinstance(record, RecallRecord)
    assert status.on_disk == status["on_disk"] == status.to_dict()["on_disk"] == 1
    assert stats.total == 1 and record.total == 1 and record.memories[0]["ref"] == "fact/a"
    with pytest.raises(KeyError):
        status["to_dict"]


# ==============================================================================================================
# Writes that keep their promises (issues 20 and 21): nothing lost to a racing save, no commit on a
# detached HEAD, no agent escalation to critical, no file stored that memfile cannot read back, and
# clear errors when the file system refuses a write.
# ==============================================================================================================


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
path, done, mode, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
folder, temp = os.path.dirname(path), sys.argv[5] + os.path.basename(path)
while not any(name.startswith(temp) for name in os.listdir(folder)):  # the store is about to swap it in
    if os.path.exists(done):
        sys.exit(0)
    time.sleep(0.0005)
data = open(path, "rb").read().replace(b"version", b"HANDSAVE")
if mode == "rename":
    tmp = path + ".tmp~"
    open(tmp, "wb").write(data)
    time.sleep(pause)
    os.replace(tmp, path)
else:
    with open(path, "r+b") as f:
        time.sleep(pause)
        f.truncate(0); f.write(data)
sys.stdout.buffer.write(data)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rename", "in-place"])
def test_saves_swept_around_real_store_processes_are_all_kept(vault: Vault, mode: str) -> None:
    """The reported sweep: an editor saves the moment a `memfile store` process makes its new file, having
    opened (or written) it up to 22 ms before its save lands; none is lost. (Timed by the temp file, not by
    the clock: a store process's start takes 0.3 s on one machine and 2 s on a busy one.)"""
    relpath = "michael/fact/same.md"
    ok(in_vault(vault.root, "store", "fact", "same", "version 0"))
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    for n in range(1, 25):
        done = vault.root.parent / f"store-{n}-done"
        pause = str((n % 12) * 0.002)
        editor = subprocess.Popen(
            [sys.executable, "-c", _EDITOR, str(vault.root / relpath), str(done), mode, pause, TEMP_PREFIX],
            stdout=subprocess.PIPE,
        )
        store = [sys.executable, "-m", "memfile", "--vault", str(vault.root), "store", "fact", "same", f"version {n}"]
        subprocess.run(store, env=env, capture_output=True, check=False)
        done.touch()
        saved = editor.communicate()[0]
        if saved:  # the person's save: on disk or in history, whatever the timing
            assert saved in _versions(vault.root, relpath), n


_HOLDING_EDITOR = r"""
import sys
path = sys.argv[1]
with open(path, "r+b") as f:  # read-modify-write through one handle: open now, write when told
    data = f.read().replace(b"version", b"HANDSAVE")
    print("open", flush=True)
    sys.stdin.readline()
    f.seek(0); f.truncate(); f.write(data)
sys.stdout.buffer.write(data)
"""


linux_leases = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file leases are Linux's")


@linux_leases
@pytest.mark.parametrize("verb", [["store", "fact", "same", "version 1"], ["forget", "fact/same"]])
def test_a_file_open_for_writing_in_another_process_is_never_replaced(vault: Vault, verb: list[str]) -> None:
    """The in-place sweep's lost save, held still: an editor opened the file for writing, a store (or forget)
    process ran, then the editor wrote. A file replaced under it would take the save along (unlinked)."""
    relpath = "michael/fact/same.md"
    ok(in_vault(vault.root, "store", "fact", "same", "version 0"))
    editor = subprocess.Popen(
        [sys.executable, "-c", _HOLDING_EDITOR, str(vault.root / relpath)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert editor.stdout is not None and editor.stdout.readline() == b"open\n"
    memfile_verb = [sys.executable, "-m", "memfile", "--vault", str(vault.root), *verb]
    result = subprocess.run(memfile_verb, env={**os.environ, "PYTHONSAFEPATH": "1"}, capture_output=True, text=True)
    saved = editor.communicate(b"\n")[0].removeprefix(b"open\n")
    assert b"HANDSAVE 0" in saved and saved in _versions(vault.root, relpath), (result.returncode, result.stderr)
    assert result.returncode == 4 and "is open for writing in another program" in result.stderr
    ok(in_vault(vault.root, *verb))  # once it is closed, the save is recorded first
    assert git(vault.root, "log", "--format=%s", "-2").splitlines()[1] == "record hand edit of fact/same"
    assert saved in _versions(vault.root, relpath)


@linux_leases
def test_a_file_opened_for_writing_while_a_store_swaps_it_goes_back_in_place(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor that looked the file up before the swap opens it for writing just after: the open waits
    for memfile's lease, memfile sees it and puts the file back, and the save lands in place."""
    ok(in_vault(vault.root, "store", "fact", "same", "version 0"))
    path = vault.root / "michael" / "fact" / "same.md"
    real_exchange = memfile.swap.exchange
    editors = []

    def exchange_while_an_editor_opens(one: Path, other: Path) -> bool | None:
        swapped = real_exchange(one, other)
        if not editors:  # `one` is the file the editor looked up: it opens that one for writing
            editor = f"import sys; f = open(sys.argv[1], 'r+b'); f.truncate(); f.write({b'HANDSAVE'!r})"
            editors.append(subprocess.Popen([sys.executable, "-c", editor, str(one)]))
            ino = f":{one.stat().st_ino} "
            locks = Path("/proc/locks")
            assert wait_until(
                lambda: any("BREAKING" in line and ino in line for line in locks.read_text().splitlines())
            )
        return swapped

    monkeypatch.setattr(memfile.swap, "exchange", exchange_while_an_editor_opens)
    in_vault(vault.root, "store", "fact", "same", "version 1")  # made again on top of the save, or exit 4
    assert editors[0].wait() == 0
    assert b"HANDSAVE" in _versions(vault.root, "michael/fact/same.md")
    assert path.exists() and not [p for p in path.parent.iterdir() if p.name.startswith(TEMP_PREFIX)]


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
    from helpers.mcp import serve

    async def script(agent):  # type: ignore[no-untyped-def]
        refused = await agent.error("store", category="fact", key="pin", content="pinned", priority="critical")
        stored = await agent.ok("store", category="fact", key="pin", content="pinned", priority="high")
        return refused, stored

    refused, stored = serve(vault.root, script)
    assert "up to priority high" in refused
    assert stored["priority"] == "high" and stored["source"] == "agent" and stored["verified"] is False
