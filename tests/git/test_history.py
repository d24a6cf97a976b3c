"""History from git: versions of a memory, show --at, restore, undo, log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BROKEN, commit_by_hand, commit_count, fails, git, in_vault, last_subject, ok, write

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


# ==============================================================================================================
# Trust in history (issues 20 and 21): undo, history and log stay in their mind; an agent's restore is the agent's;
# `--at` and `--since` take only real moments.
# ==============================================================================================================


AGENT = {"MEMFILE_SOURCE": "agent"}


def as_(mind: str, root: Path, *args: object, agent: bool = False, code: int = 0):
    """`memfile --mind MIND ARGS` in the vault, as a person or (agent=True) as an agent."""
    result = in_vault(root, "--mind", mind, *args, env=AGENT if agent else None)
    return ok(result) if code == 0 else fails(result, code)


@pytest.fixture
def minds(tmp_path: Path) -> Path:
    """A vault with two minds, alice and bob, made through the CLI."""
    root = tmp_path / "vault"
    ok(in_vault(tmp_path, "init", root, "--mind", "alice"))
    ok(in_vault(tmp_path, "init", root, "--mind", "bob"))
    return root


def memory(root: Path, mind: str, ref: str) -> dict:
    return json.loads(as_(mind, root, "show", ref, "--json").stdout)


# --- issue 20 item 3: undo, history and log of a mind ------------------------------------------------------------


@pytest.mark.parametrize("agent", [False, True], ids=["person", "agent"])
def test_undo_of_a_mind_never_reverts_another_minds_change(minds: Path, agent: bool) -> None:
    as_("alice", minds, "store", "fact", "mine", "Alice's own note", agent=agent)
    as_("bob", minds, "store", "fact", "note", "Bob's note", agent=agent)
    result = as_("alice", minds, "undo", agent=agent)
    assert "fact/mine" in result.stdout and "bob" not in result.stdout
    assert (minds / "bob" / "fact" / "note.md").is_file()
    assert not (minds / "alice" / "fact" / "mine.md").exists()
    assert "mind: alice" in git(minds, "log", "-1", "--format=%b")


@pytest.mark.parametrize("agent", [False, True], ids=["person", "agent"])
def test_undo_of_a_mind_with_no_change_of_its_own_touches_nothing(minds: Path, agent: bool) -> None:
    as_("bob", minds, "store", "fact", "note", "Bob's note", agent=agent)
    before = commit_count(minds)
    result = as_("alice", minds, "undo", agent=agent, code=2)
    assert "alice" in result.stderr and "Traceback" not in result.stderr
    assert (minds / "bob" / "fact" / "note.md").is_file() and commit_count(minds) == before


def test_undo_walks_back_through_its_own_mind_only(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "one", "first of alice")
    as_("bob", minds, "store", "fact", "one", "first of bob")
    as_("alice", minds, "store", "fact", "two", "second of alice")
    as_("bob", minds, "store", "fact", "two", "second of bob")
    as_("alice", minds, "undo")
    as_("alice", minds, "undo")
    assert not list((minds / "alice" / "fact").glob("*.md"))
    assert sorted(p.name for p in (minds / "bob" / "fact").glob("*.md")) == ["one.md", "two.md"]
    as_("alice", minds, "undo", code=2)  # nothing of alice's left: bob's are never next
    assert sorted(p.name for p in (minds / "bob" / "fact").glob("*.md")) == ["one.md", "two.md"]


def test_undo_refuses_a_hand_commit_that_touched_another_mind(minds: Path) -> None:
    """A commit that looks like memfile's but also changed bob's files is not alice's to revert."""
    as_("bob", minds, "store", "fact", "note", "Bob's note")
    write(minds / "alice" / "fact" / "x.md", "alice by hand\n")
    write(minds / "bob" / "fact" / "note.md", "bob rewritten by hand\n")
    commit_by_hand(minds, "alice/fact/x.md", "bob/fact/note.md", message="store fact/x (agent)\n\nmind: alice")
    for agent in (False, True):
        result = as_("alice", minds, "undo", agent=agent, code=2)
        assert "bob/fact/note.md" in result.stderr
    assert (minds / "bob" / "fact" / "note.md").read_text(encoding="utf-8") == "bob rewritten by hand\n"


def test_log_of_a_mind_lists_only_its_commits(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "a", "alice's fact")
    as_("bob", minds, "store", "fact", "b", "bob's fact")
    write(minds / "bob" / "note" / "hand.md", "bob's hand note\n")
    commit_by_hand(minds, "bob/note/hand.md", message="a note by hand")
    write(minds / "alice" / "note" / "hand.md", "alice's hand note\n")
    commit_by_hand(minds, "alice/note/hand.md", message="alice's note by hand")
    entries = json.loads(as_("alice", minds, "log", "--json").stdout)
    messages = [e["message"] for e in entries]
    assert messages[:2] == ["alice's note by hand", "store fact/a (user)"]
    assert all(not p.startswith("bob/") for e in entries for p in e["paths"])
    assert "a note by hand" not in messages and "store fact/b (user)" not in messages
    text = as_("bob", minds, "log", "--limit", "2").stdout
    assert "a note by hand" in text and "store fact/b (user)" in text and "alice" not in text
    assert len(json.loads(as_("bob", minds, "log", "--limit", "1", "--json").stdout)) == 1


def test_history_of_a_mind_shows_only_its_own_memory(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "same", "alice's version")
    as_("bob", minds, "store", "fact", "same", "bob's version")
    as_("bob", minds, "forget", "fact/same")
    versions = json.loads(as_("alice", minds, "history", "fact/same", "--json").stdout)
    assert len(versions) == 1 and versions[0]["memory"]["content"] == "alice's version"


# --- issue 20 item 5: an agent's restore is the agent's ----------------------------------------------------------


def assert_agents(data: dict, priority: str = "normal") -> None:
    assert (data["source"], data["verified"], data["priority"]) == ("agent", False, priority), data


def test_agent_restore_of_a_forgotten_person_memory_is_the_agents(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "The door code is 4711", "--priority", "critical")
    as_("alice", minds, "forget", "fact/pin")
    result = json.loads(as_("alice", minds, "restore", "fact/pin", "--json", agent=True).stdout)
    assert_agents(result, "high")
    assert_agents(memory(minds, "alice", "fact/pin"), "high")
    text = (minds / "alice" / "fact" / "pin.md").read_text(encoding="utf-8")
    assert "source: agent" in text and "verified: false" in text and "critical" not in text
    assert "The door code is 4711" in text
    assert last_subject(minds).endswith("(agent)")


def test_agent_restore_at_a_sha_over_its_own_memory_stays_unverified(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "The door code is 4711")
    person_version = git(minds, "rev-parse", "HEAD").strip()
    as_("alice", minds, "forget", "fact/pin")
    as_("alice", minds, "store", "fact", "pin", "The door code is 0000", agent=True)
    as_(
        "alice", minds, "restore", "fact/pin", "--at", person_version, agent=True, code=4
    )  # another memory holds fact/pin
    as_("alice", minds, "forget", "fact/pin", agent=True)  # its own, as the refusal says
    as_("alice", minds, "restore", "fact/pin", "--at", person_version, agent=True)
    data = memory(minds, "alice", "fact/pin")
    assert_agents(data)
    assert data["content"] == "The door code is 4711"


def test_agent_restore_at_a_date_over_its_own_memory_stays_unverified(minds: Path, monkeypatch) -> None:
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2021-03-01T12:00:00Z")
    as_("alice", minds, "store", "fact", "pin", "The door code is 4711", "--priority", "critical")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2022-03-01T12:00:00Z")
    as_("alice", minds, "forget", "fact/pin")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    as_("alice", minds, "store", "fact", "pin", "The door code is 0000", agent=True)
    as_(
        "alice", minds, "restore", "fact/pin", "--at", "2021-06-01", agent=True, code=4
    )  # another memory holds fact/pin
    as_("alice", minds, "forget", "fact/pin", agent=True)  # its own, as the refusal says
    as_("alice", minds, "restore", "fact/pin", "--at", "2021-06-01", agent=True)
    data = memory(minds, "alice", "fact/pin")
    assert_agents(data, "high")
    assert data["content"] == "The door code is 4711"


def test_agent_restore_of_the_last_version_under_an_uncommitted_unverify(minds: Path) -> None:
    """The file says unverified (a hand edit not yet committed), git's last version is the person's."""
    as_("alice", minds, "store", "fact", "pin", "The door code is 4711")
    path = minds / "alice" / "fact" / "pin.md"
    path.write_text(path.read_text(encoding="utf-8").replace("verified: true", "verified: false"), encoding="utf-8")
    as_("alice", minds, "restore", "fact/pin", agent=True)
    assert_agents(memory(minds, "alice", "fact/pin"))


def test_agent_restore_of_its_own_unchanged_memory_changes_nothing(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "mine", "an agent's note", agent=True)
    before = commit_count(minds)
    result = as_("alice", minds, "restore", "fact/mine", agent=True)
    assert "unchanged" in result.stdout and commit_count(minds) == before


def test_agent_still_cannot_restore_over_a_verified_memory(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    as_("alice", minds, "store", "fact", "pin", "v2")
    before = (minds / "alice" / "fact" / "pin.md").read_bytes()
    result = as_("alice", minds, "restore", "fact/pin", "--at", "HEAD~1", agent=True, code=2)
    assert "ask" in result.stderr
    assert (minds / "alice" / "fact" / "pin.md").read_bytes() == before


def test_person_restore_brings_back_the_persons_memory_as_it_was(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "The door code is 4711", "--priority", "critical")
    as_("alice", minds, "forget", "fact/pin")
    as_("alice", minds, "restore", "fact/pin")
    data = memory(minds, "alice", "fact/pin")
    assert (data["source"], data["verified"], data["priority"]) == ("user", True, "critical")


def test_agent_restore_through_the_python_api(minds: Path) -> None:
    from memfile import Vault

    Vault.open(minds, "alice").store("preference", "tea", "Green tea, no sugar")
    Vault.open(minds, "alice").forget("preference/tea")
    result = Vault.open(minds, "alice", source="agent").restore("preference/tea")
    assert result.memory.source == "agent" and not result.memory.verified
    assert not Vault.open(minds, "alice").get("preference/tea").verified


# --- issue 21 item 6 and item 16: --at and --since take only real moments ----------------------------------------


@pytest.mark.parametrize("at", ["0000-00-00", "2026-02-30", "2026-13-01", "0000-01-01"])
def test_restore_at_a_date_that_is_not_a_date_is_refused(minds: Path, at: str) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    as_("alice", minds, "store", "fact", "pin", "v2")
    before = commit_count(minds)
    result = as_("alice", minds, "restore", "fact/pin", "--at", at, code=2)
    assert "at" in result.stderr and at in result.stderr
    assert commit_count(minds) == before and memory(minds, "alice", "fact/pin")["content"] == "v2"
    as_("alice", minds, "show", "fact/pin", "--at", at, code=2)


def test_restore_at_a_future_date_means_the_latest_version(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    as_("alice", minds, "store", "fact", "pin", "v2")
    assert as_("alice", minds, "show", "fact/pin", "--at", "9999-12-31").stdout.rstrip().endswith("v2")
    before = commit_count(minds)
    assert "unchanged" in as_("alice", minds, "restore", "fact/pin", "--at", "9999-12-31").stdout
    assert commit_count(minds) == before


@pytest.mark.parametrize("since", ["99999999d", "9999999999w", "0000-00-00", "2026-02-30"])
def test_log_since_out_of_range_is_a_clear_error(minds: Path, since: str) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    result = as_("alice", minds, "log", "--since", since, code=2)
    assert "since" in result.stderr and "7d" in result.stderr and "unexpected" not in result.stderr


@pytest.mark.parametrize("at", ["99999999d", "9999999999w"])
def test_at_duration_out_of_range_is_a_clear_error(minds: Path, at: str) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    for command in ("show", "restore"):
        result = as_("alice", minds, command, "fact/pin", "--at", at, code=2)
        assert "at" in result.stderr and "7d" in result.stderr and "unexpected" not in result.stderr


def test_log_since_a_future_date_is_empty_and_an_old_date_is_everything(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    assert json.loads(as_("alice", minds, "log", "--since", "9999-12-31", "--json").stdout) == []
    assert (
        json.loads(as_("alice", minds, "log", "--since", "1900-01-01", "--json").stdout)[0]["message"]
        == "store fact/pin (user)"
    )


def test_agent_restore_of_a_plain_markdown_file_a_person_wrote_is_the_agents(minds: Path) -> None:
    """A file without front-matter reads as a person's, verified: the agent's restore writes front-matter saying not."""
    write(minds / "alice" / "note" / "plain.md", "# Plain\n\nWritten by hand, no front-matter.\n")
    commit_by_hand(minds, "alice/note/plain.md", message="a plain note")
    as_("alice", minds, "forget", "note/plain")
    as_("alice", minds, "restore", "note/plain", agent=True)
    data = memory(minds, "alice", "note/plain")
    assert_agents(data)
    assert "Written by hand, no front-matter." in data["content"]


def test_restore_at_a_future_date_of_a_forgotten_memory_says_how_to_bring_it_back(minds: Path) -> None:
    as_("alice", minds, "store", "fact", "pin", "v1")
    as_("alice", minds, "forget", "fact/pin")
    result = as_("alice", minds, "restore", "fact/pin", "--at", "9999-12-31", code=3)
    assert "memfile restore fact/pin" in result.stderr
    assert not (minds / "alice" / "fact" / "pin.md").exists()


def test_api_takes_datetimes_and_refuses_what_is_no_moment(minds: Path) -> None:
    from datetime import datetime, timezone

    from memfile import InvalidInput, Vault

    alice = Vault.open(minds, "alice")
    alice.store("fact", "pin", "v1")
    alice.store("fact", "pin", "v2")
    assert alice.show_at("fact/pin", datetime(9999, 12, 31, tzinfo=timezone.utc)).content == "v2"
    assert alice.log(since=datetime(2000, 1, 1))[0].message == "store fact/pin (user)"
    for bad in (None, 7, "0000-00-00", "99999999d"):
        with pytest.raises(InvalidInput, match="since"):
            alice.log(since=bad) if bad is not None else alice.log(since=[])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="at"):
            alice.show_at("fact/pin", bad if bad is not None else [])  # type: ignore[arg-type]
