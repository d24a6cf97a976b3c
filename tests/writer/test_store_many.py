"""`Vault.store_many`: stores that arrive together share a commit; each is checked and answered on its own."""

from __future__ import annotations

import pytest
from helpers import commit_count, git

from memfile import InvalidInput, Refused, Source, StoreResult, Vault


def test_stores_of_one_caller_share_one_commit_and_each_gets_its_result(vault: Vault) -> None:
    vault.store("fact", "before", "made first")
    commits = commit_count(vault.root)
    results = vault.store_many(
        [
            {"category": "fact", "key": "office", "content": "Office on floor 3", "tags": ["work"]},
            {"category": "preference", "key": "tea", "content": "Green tea, no sugar", "priority": "high"},
            {"category": "fact", "key": "before", "content": "made first, changed now"},
        ]
    )
    assert [r.memory.key for r in results if isinstance(r, StoreResult)] == ["office", "tea", "before"]
    assert [r.created for r in results if isinstance(r, StoreResult)] == [True, True, False]
    assert commit_count(vault.root) == commits + 1
    shas = {r.commit for r in results if isinstance(r, StoreResult)}
    assert len(shas) == 1 and None not in shas
    assert git(vault.root, "show", "--stat", "--format=%s", "HEAD").count(".md") == 3
    assert vault.get("tea").priority.value == "high"
    assert [h.memory.key for h in vault.search("floor")] == ["office"]


def test_one_refused_store_never_stops_the_others(vault: Vault) -> None:
    with vault.acting_as("agent", key="bot"):
        results = vault.store_many(
            [
                {"category": "fact", "key": "ok_one", "content": "fine"},
                {"category": "fact", "key": "boss", "content": "x", "priority": "critical"},  # agents: at most high
                {"category": "nonsense", "key": "k", "content": "x"},
                {"category": "fact", "key": "ok_two", "content": "fine too"},
            ]
        )
    assert isinstance(results[0], StoreResult) and isinstance(results[3], StoreResult)
    assert isinstance(results[1], Refused) and isinstance(results[2], InvalidInput)
    assert results[0].commit == results[3].commit
    assert results[0].memory.source is Source.AGENT
    assert "Memfile-Key: bot" in git(vault.root, "log", "-1", "--format=%B").splitlines()
    assert {m.key for m in vault.memories()} == {"ok_one", "ok_two"}


def test_stores_that_cannot_share_a_commit_get_one_each(vault: Vault) -> None:
    vault.store("fact", "old_office", "Office on floor 2")
    commits = commit_count(vault.root)
    results = vault.store_many(
        [
            {"category": "fact", "key": "same", "content": "first"},
            {"category": "fact", "key": "same", "content": "second"},  # the same memory: a commit of its own
            {"category": "fact", "key": "new_office", "content": "Office on floor 3", "supersedes": "old_office"},
        ]
    )
    assert all(isinstance(r, StoreResult) for r in results)
    assert commit_count(vault.root) == commits + 3
    assert vault.get("same").content == "second"
    assert vault.get("old_office").superseded


def test_arguments_store_does_not_take_are_refused_by_name_before_anything_is_written(vault: Vault) -> None:
    commits = commit_count(vault.root)
    with pytest.raises(InvalidInput, match="colour"):
        vault.store_many([{"category": "fact", "key": "a", "content": "x"}, {"category": "fact", "key": "b", "content": "x", "colour": "red"}])  # fmt: skip
    with pytest.raises(InvalidInput, match="content"):
        vault.store_many([{"category": "fact", "key": "a"}])
    with pytest.raises(InvalidInput, match=r"stores\[0\]"):
        vault.store_many(["fact a x"])  # type: ignore[list-item]
    assert commit_count(vault.root) == commits
    assert vault.store_many([]) == []


def test_stores_may_name_their_credentials_and_share_a_commit_with_a_trailer_each(vault: Vault) -> None:
    with vault.acting_as("agent"):
        results = vault.store_many(
            [
                {"category": "fact", "key": "one", "content": "first", "credential": "bot-1"},
                {"category": "fact", "key": "two", "content": "second", "credential": "bot-2"},
                {"category": "fact", "key": "three", "content": "third", "credential": "bot-1"},
            ]
        )
    assert len({r.commit for r in results if isinstance(r, StoreResult)}) == 1
    body = git(vault.root, "log", "-1", "--format=%B").strip().splitlines()
    assert body[-2:] == ["Memfile-Key: bot-1 fact/one fact/three", "Memfile-Key: bot-2 fact/two"]
    # one credential alone: the plain trailer, whichever store came first
    with vault.acting_as("agent", key="ignored"):
        vault.store_many([{"category": "fact", "key": "one", "content": "first"}])  # unchanged: no commit
        vault.store_many([{"category": "fact", "key": "four", "content": "fourth", "credential": "bot-3"}])
    assert git(vault.root, "log", "-1", "--format=%B").strip().splitlines()[-1] == "Memfile-Key: bot-3"


@pytest.mark.parametrize("credential", ["has space", "new\nline", "Memfile-Key: x", "", 7])
def test_a_credential_that_cannot_be_a_trailer_is_refused_by_name_before_anything_is_written(
    vault: Vault, credential: object
) -> None:
    commits = commit_count(vault.root)
    with pytest.raises(InvalidInput, match=r"stores\[1\]\.credential"):
        vault.store_many(
            [
                {"category": "fact", "key": "fine", "content": "x"},
                {"category": "fact", "key": "bad", "content": "x", "credential": credential},
            ]
        )
    assert commit_count(vault.root) == commits and vault.memories() == []
