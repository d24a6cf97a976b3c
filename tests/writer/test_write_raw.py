"""Vault.write_raw: exact file texts in one commit, checked as a store's arguments would be."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import last_subject, write

from memfile import Conflict, InvalidInput, Refused, Vault

AGENT_NOTE = "---\nsource: agent\n---\nThe user's cat is called Miso.\n"


def _log(root: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_an_edit_and_a_new_file_in_one_commit(vault: Vault) -> None:
    stored = vault.store("fact", "office", "Works from the Hanoi office.")
    relpath = stored.memory.path
    before = (vault.root / relpath).read_bytes()
    edited = before.decode().replace("Hanoi", "Da Nang")
    commits = len(_log(vault.root))
    sha = vault.write_raw(
        {relpath: edited, "michael/note/extra.md": "A person's note.\n"},
        subject="memory-tool edit fact/office",
        based_on={relpath: before, "michael/note/extra.md": None},
    )
    assert sha is not None and len(_log(vault.root)) == commits + 1
    assert last_subject(vault.root) == "memory-tool edit fact/office (user)"
    assert (vault.root / relpath).read_text() == edited
    assert vault.get("fact/office").content.strip() == "Works from the Da Nang office."
    assert vault.get("note/extra").content.strip() == "A person's note."


def test_the_same_text_makes_no_commit(vault: Vault) -> None:
    relpath = vault.store("fact", "office", "Hanoi").memory.path
    commits = len(_log(vault.root))
    assert vault.write_raw({relpath: (vault.root / relpath).read_text()}, subject="noop") is None
    assert len(_log(vault.root)) == commits


def test_removing_files_in_one_commit(vault: Vault) -> None:
    a = vault.store("note", "a", "one").memory.path
    b = vault.store("note", "b", "two").memory.path
    vault.write_raw({a: None, b: None}, subject="memory-tool delete note")
    assert not (vault.root / a).exists() and not (vault.root / b).exists()
    assert vault.list() == []
    assert _log(vault.root)[0] == "memory-tool delete note (user)"


def test_a_file_changed_since_it_was_read_is_kept(vault: Vault) -> None:
    relpath = vault.store("fact", "office", "Hanoi").memory.path
    read = (vault.root / relpath).read_bytes()
    write(vault.root / relpath, read.decode().replace("Hanoi", "Hue"))  # a person saves meanwhile
    with pytest.raises(Conflict, match="changed on disk"):
        vault.write_raw({relpath: read.decode().replace("Hanoi", "Vinh")}, subject="edit", based_on={relpath: read})
    assert "Hue" in (vault.root / relpath).read_text()
    assert _log(vault.root)[0].startswith("record hand edit")  # the person's save is in history


def test_a_file_that_must_not_exist_yet(vault: Vault) -> None:
    relpath = vault.store("note", "x", "there").memory.path
    with pytest.raises(Conflict):
        vault.write_raw({relpath: AGENT_NOTE}, subject="create", based_on={relpath: None})


@pytest.mark.parametrize(
    ("relpath", "field"),
    [("other/note/x.md", "path"), ("michael/../x.md", "path"), ("/etc/x.md", "path"), ("michael/note/x.txt", "path")],
)
def test_paths_outside_the_mind_or_not_memory_files(vault: Vault, relpath: str, field: str) -> None:
    commits = len(_log(vault.root))
    with pytest.raises(InvalidInput) as caught:
        vault.write_raw({relpath: "text\n"}, subject="x")
    assert caught.value.field == field
    assert len(_log(vault.root)) == commits


def test_a_symlink_out_of_the_mind_is_refused(vault: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / "michael" / "link").symlink_to(outside)
    with pytest.raises(InvalidInput, match="symlink"):
        vault.write_raw({"michael/link/x.md": "text\n"}, subject="x")
    assert list(outside.iterdir()) == []


def test_unreadable_text_is_refused_and_nothing_written(vault: Vault) -> None:
    relpath = vault.store("fact", "office", "Hanoi").memory.path
    before = (vault.root / relpath).read_bytes()
    with pytest.raises(InvalidInput, match="not valid YAML"):
        vault.write_raw({relpath: "---\nid: [\n---\nbody\n", "michael/note/n.md": "fine\n"}, subject="x")
    assert (vault.root / relpath).read_bytes() == before
    assert not (vault.root / "michael/note/n.md").exists()


def test_a_file_memfile_cannot_read_is_never_overwritten(vault: Vault) -> None:
    write(vault.root / "michael/note/broken.md", "---\nkey: [\n---\nmine\n")
    with pytest.raises(Refused, match="cannot read"):
        vault.write_raw({"michael/note/broken.md": "fixed\n"}, subject="x")
    assert "mine" in (vault.root / "michael/note/broken.md").read_text()


def test_another_files_category_key_or_id_is_a_conflict(vault: Vault) -> None:
    stored = vault.store("fact", "office", "Hanoi").memory
    text = (vault.root / stored.path).read_text()
    with pytest.raises(Conflict, match="fact/office"):
        vault.write_raw({"michael/note/copy.md": text.replace(stored.id, "mem_other")}, subject="x")
    with pytest.raises(Conflict, match=stored.id):
        vault.write_raw({"michael/note/copy.md": text.replace("key: office", "key: other")}, subject="x")
    with pytest.raises(Conflict):  # two new files claiming one (category, key)
        vault.write_raw(
            {"michael/note/a.md": "---\nkey: k\n---\n1\n", "michael/note/b.md": "---\nkey: k\n---\n2\n"}, subject="x"
        )
    assert [m.ref for m in vault.list()] == ["fact/office"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("The user's cat.\n", "source: agent"),  # no front-matter: a person's file
        ("---\nsource: user\n---\nx\n", "source: agent"),
        ("---\nsource: agent\nverified: true\n---\nx\n", "only a person"),
        ("---\nsource: agent\npriority: critical\n---\nx\n", "critical"),
    ],
)
def test_an_agent_cannot_write_what_it_could_not_store(vault: Vault, text: str, match: str) -> None:
    with vault.acting_as("agent") as agent, pytest.raises(Refused, match=match):
        agent.write_raw({"michael/note/x.md": text}, subject="memory-tool create note/x")
    assert not (vault.root / "michael/note/x.md").exists()


def test_an_agent_writes_its_own_file(vault: Vault) -> None:
    with vault.acting_as("agent") as agent:
        agent.write_raw({"michael/deep/folder/cat.md": AGENT_NOTE}, subject="memory-tool create deep/folder/cat")
        memory = agent.get("note/cat")
    assert memory.source.value == "agent" and not memory.verified
    assert last_subject(vault.root) == "memory-tool create deep/folder/cat (agent)"


@pytest.mark.parametrize("fields", [{"priority": "critical"}, {}])
def test_an_agent_cannot_change_a_verified_or_critical_memory(vault: Vault, fields: dict[str, str]) -> None:
    stored = vault.store("fact", "office", "Hanoi", **fields).memory  # a person's store: verified
    text = (vault.root / stored.path).read_text()
    with vault.acting_as("agent") as agent:
        for change in (text.replace("Hanoi", "Hue"), None):
            with pytest.raises(Refused, match="supersedes"):
                agent.write_raw({stored.path: change}, subject="memory-tool edit fact/office")
    assert (vault.root / stored.path).read_text() == text


def test_an_agent_edits_its_own_memory(vault: Vault) -> None:
    with vault.acting_as("agent") as agent:
        stored = agent.store("fact", "office", "Hanoi").memory
        text = (vault.root / stored.path).read_text()
        agent.write_raw({stored.path: text.replace("Hanoi", "Hue")}, subject="memory-tool edit fact/office")
        assert agent.get("fact/office").content.strip() == "Hue"
