"""`Vault.acting_as`: one Vault answers several credentials (the served faces), each call as its own caller."""

from __future__ import annotations

import pytest
from helpers import git

from memfile import InvalidInput, Refused, Source, Vault


def test_calls_inside_acting_as_are_the_agents_and_the_actor_comes_back(vault: Vault) -> None:
    assert vault.actor is Source.USER
    with vault.acting_as("agent", key="claude-desktop"):
        assert vault.actor is Source.AGENT
        stored = vault.store("fact", "office", "Office on floor 3")
        with pytest.raises(Refused):
            vault.verify(stored.memory.ref)
        with pytest.raises(Refused):
            vault.store("fact", "boss", "x", priority="critical")
    assert vault.actor is Source.USER
    assert stored.memory.source is Source.AGENT
    assert vault.verify(stored.memory.ref).memory.verified


def test_each_commit_made_under_a_credential_names_its_key_in_a_trailer(vault: Vault) -> None:
    with vault.acting_as("agent", key="claude-desktop"):
        vault.store("fact", "office", "Office on floor 3")
    body = git(vault.root, "log", "-1", "--format=%B")
    assert "store fact/office (agent)" in body
    assert "Memfile-Key: claude-desktop" in body.splitlines()
    assert git(vault.root, "log", "-1", "--format=%(trailers:key=Memfile-Key,valueonly)").strip() == "claude-desktop"
    with vault.acting_as("user", key="laptop"):
        vault.forget("fact/office")
    assert "Memfile-Key: laptop" in git(vault.root, "log", "-1", "--format=%B").splitlines()
    vault.store("fact", "desk", "by the window")
    assert "Memfile-Key" not in git(vault.root, "log", "-1", "--format=%B")


def test_an_undo_under_a_credential_names_it_too(vault: Vault) -> None:
    with vault.acting_as("agent", key="bot-1"):
        vault.store("fact", "office", "Office on floor 3")
        vault.undo()
    assert "Memfile-Key: bot-1" in git(vault.root, "log", "-1", "--format=%B").splitlines()


def test_the_actor_is_put_back_when_the_call_fails(vault: Vault) -> None:
    with pytest.raises(Refused), vault.acting_as("agent"):
        vault.store("fact", "x", "y", priority="critical")
    assert vault.actor is Source.USER
    vault.store("fact", "x", "y", priority="critical")


def test_a_source_that_is_not_a_source_is_refused_by_name(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="source"), vault.acting_as("robot"):
        pass
    assert vault.actor is Source.USER
