"""`Vault.forget_many`: forget many memories at once by filters (or a selection of REFs), in one commit;
the same selection for a dry run and a real run; an agent forgets only its own unverified memories."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import commit_by_hand, commit_count, git, last_subject, write

from memfile import InvalidInput, NotFound, Refused, Vault

#: A memory a person wrote by hand two years ago (its updated_at is old), tagged `old`.
OLD = """---
id: mem_oldnote00001
category: note
key: old_note
tags: [old, synapse]
source: user
verified: true
created_at: 2024-01-01T00:00:00Z
updated_at: 2024-01-01T00:00:00Z
---
Synapse ran on the old VPS.
"""


@pytest.fixture
def filled(vault: Vault) -> Vault:
    """Memories of every kind: a person's, an agent's (unverified, one verified by a person, one of its own
    made critical by a person), an expired one, an old hand-written one."""
    vault.store("fact", "office", "The office is in Berlin", tags=["work"])
    vault.store("preference", "answer_style", "Short answers", tags=["style"], priority="critical")
    vault.store("project", "synapse_status", "v1.5 deployed", tags=["synapse", "work"])
    vault.store("fact", "old_trip", "Trip to Hanoi", expires="2020-01-01")
    with vault.acting_as("agent"):
        vault.store("fact", "standup_time", "Standup at 09:30", tags=["work"])
        vault.store("project", "deploy_notes", "Deploy with the pipeline", tags=["synapse"])
        vault.store("context", "checked", "Checked by a person later", tags=["synapse"])
        vault.store("context", "pinned", "Made critical by a person", tags=["synapse"])
        vault.store("context", "stale_guess", "A guess that expired", expires="2020-01-01")
    vault.verify("context/checked")
    vault.store("context", "pinned", "Made critical by a person", priority="critical", source="agent")
    write(vault.root / "michael" / "note" / "old_note.md", OLD)
    commit_by_hand(vault.root, "michael/note/old_note.md")
    return vault


def refs(memories: list) -> list[str]:
    return [m.ref for m in memories]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"tag": "SYNAPSE"}, ["context/checked", "context/pinned", "note/old_note", "project/deploy_notes", "project/synapse_status"]),
        ({"category": "fact"}, ["fact/office", "fact/old_trip", "fact/standup_time"]),
        ({"source": "agent"}, ["context/checked", "context/pinned", "context/stale_guess", "fact/standup_time", "project/deploy_notes"]),
        ({"unverified": True}, ["context/pinned", "context/stale_guess", "fact/standup_time", "project/deploy_notes"]),
        ({"older_than": "30d"}, ["note/old_note"]),
        ({"expired": True}, ["context/stale_guess", "fact/old_trip"]),
        ({"refs": ["fact/office", "answer_style", "fact/office"]}, ["fact/office", "preference/answer_style"]),
    ],
)  # fmt: skip
def test_each_filter_alone_selects_what_it_says(filled: Vault, filters: dict, expected: list[str]) -> None:
    report = filled.forget_many(**filters, dry_run=True)
    assert refs(report.forgotten) == expected
    assert report.left_out == [] and report.commit is None and report.dry_run


def test_filters_combine_and_a_ref_must_pass_them_too(filled: Vault) -> None:
    both = filled.forget_many(tag="synapse", source="agent", unverified=True, dry_run=True)
    assert refs(both.forgotten) == ["context/pinned", "project/deploy_notes"]
    assert refs(filled.forget_many(category="fact", expired=True, dry_run=True).forgotten) == ["fact/old_trip"]
    assert refs(filled.forget_many(refs=["fact/office", "fact/old_trip"], expired=True, dry_run=True).forgotten) == [
        "fact/old_trip"
    ]


def test_at_least_one_filter_is_required_and_bad_values_are_named(filled: Vault) -> None:
    head = git(filled.root, "rev-parse", "HEAD")
    for no_filter in ({}, {"refs": []}, {"unverified": False, "expired": False}):
        with pytest.raises(InvalidInput, match="no filter was given") as caught:
            filled.forget_many(**no_filter)
        assert "tag, category, source, unverified, older_than, expired" in str(caught.value)
    for bad, allowed in (
        ({"older_than": "soon"}, "30m, 12h, 7d or 2w"),
        ({"category": "nope"}, "fact"),
        ({"source": "robot"}, "agent"),
    ):
        with pytest.raises(InvalidInput, match=allowed):
            filled.forget_many(**bad)
    with pytest.raises(NotFound):
        filled.forget_many(refs=["fact/office", "fact/nowhere"])
    assert git(filled.root, "rev-parse", "HEAD") == head
    assert (filled.root / "michael" / "fact" / "office.md").exists()


def test_dry_run_and_real_run_list_the_same_memories_in_one_commit(filled: Vault) -> None:
    before = commit_count(filled.root)
    planned = filled.forget_many(tag="synapse", dry_run=True)
    assert commit_count(filled.root) == before, "the dry run wrote"
    assert all((filled.root / m.path).exists() for m in planned.forgotten)
    done = filled.forget_many(tag="synapse")
    assert refs(done.forgotten) == refs(planned.forgotten) and len(done.forgotten) == 5
    assert not done.dry_run and done.commit == git(filled.root, "rev-parse", "HEAD").strip()
    assert commit_count(filled.root) == before + 1
    assert last_subject(filled.root) == "forget 5 memories (user)"
    body = git(filled.root, "log", "-1", "--format=%B")
    assert body.splitlines()[2:7] == refs(done.forgotten) and "mind: michael" in body
    removed = git(filled.root, "show", "--name-status", "--format=", "HEAD").split("\n")
    assert sorted(line for line in removed if line) == sorted(f"D\t{m.path}" for m in done.forgotten)
    assert not any((filled.root / m.path).exists() for m in done.forgotten)
    assert {m.ref for m in filled.list(status="all", include_expired=True)}.isdisjoint(refs(done.forgotten))
    assert filled.history("project/deploy_notes")[1].memory.content == "Deploy with the pipeline"  # git keeps it
    assert done.to_dict()["forgotten"][0]["key"] == "checked" and done.to_dict()["commit"] == done.commit


def test_nothing_matched_writes_nothing_and_is_no_error(filled: Vault) -> None:
    before = commit_count(filled.root)
    report = filled.forget_many(tag="nothing_has_it")
    assert report.forgotten == [] and report.left_out == [] and report.commit is None
    assert commit_count(filled.root) == before


def test_an_agent_forgets_only_its_own_unverified_non_critical_memories(filled: Vault) -> None:
    with filled.acting_as("agent", key="bot"):
        planned = filled.forget_many(tag="synapse", dry_run=True)
        done = filled.forget_many(tag="synapse")
        everything = filled.forget_many(older_than="0m")
    assert refs(planned.forgotten) == refs(done.forgotten) == ["project/deploy_notes"]
    # a person's memory, one a person verified, one a person made critical: left out, never removed
    assert refs(done.left_out) == ["context/checked", "context/pinned", "note/old_note", "project/synapse_status"]
    for kept in done.left_out:
        assert (filled.root / kept.path).exists(), kept.ref
    assert last_subject(filled.root) == "forget 2 memories (agent)"  # `everything`: standup_time, stale_guess
    assert refs(everything.forgotten) == ["context/stale_guess", "fact/standup_time"]
    assert "Memfile-Key: bot" in git(filled.root, "log", "-1", "--format=%B").splitlines()
    survivors = {m.ref for m in filled.list(status="all", include_expired=True)}
    assert survivors == {
        "context/checked",
        "context/pinned",
        "fact/office",
        "fact/old_trip",
        "note/old_note",
        "preference/answer_style",
        "project/synapse_status",
    }


def test_an_agent_asking_for_a_persons_memories_is_refused(filled: Vault) -> None:
    head = git(filled.root, "rev-parse", "HEAD")
    with filled.acting_as("agent"), pytest.raises(Refused, match="only its own unverified memories"):
        filled.forget_many(source="user", dry_run=True)
    with filled.acting_as("agent"):
        selected = filled.forget_many(refs=["fact/office", "preference/answer_style"])
    assert selected.forgotten == [] and refs(selected.left_out) == ["fact/office", "preference/answer_style"]
    assert git(filled.root, "rev-parse", "HEAD") == head


def test_a_hand_edit_is_committed_before_the_forget(filled: Vault) -> None:
    path = filled.root / "michael" / "fact" / "standup_time.md"
    path.write_text(path.read_text(encoding="utf-8").replace("09:30", "10:00"), encoding="utf-8")
    filled.forget_many(refs=["fact/standup_time", "fact/office"])
    subjects = git(filled.root, "log", "-2", "--format=%s").splitlines()
    assert subjects == ["forget 2 memories (user)", "record hand edit of fact/standup_time"]
    assert "10:00" in git(filled.root, "show", "HEAD~1:michael/fact/standup_time.md")
    assert git(filled.root, "status", "--porcelain").strip() == ""


def test_superseded_memories_are_selected_too(vault: Vault) -> None:
    vault.store("fact", "user_location", "Lives in Berlin", tags=["home"])
    vault.store("fact", "user_city", "Lives in Hamburg", tags=["home"], supersedes="fact/user_location")
    assert refs(vault.forget_many(tag="home").forgotten) == ["fact/user_city", "fact/user_location"]
    assert not list(Path(vault.root, "michael", "fact").glob("*.md"))
