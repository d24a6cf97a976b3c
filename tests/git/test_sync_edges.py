"""Sync, merge and history at the edges: modify/delete, repeated conflicts, agents, full history, errors."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import commit_by_hand, commit_count, fails, git, in_vault, ok, write

from memfile import GitError, Refused, Vault
from memfile.git import merge_memory


def test_forgotten_here_edited_there_sync_does_not_get_stuck(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "The office moved to Hamburg")
    laptop.sync()
    server.forget("fact/office")
    server.sync()  # modify/delete: ours deleted, theirs edited
    assert server._git.unfinished_operation() is None
    server.store("fact", "editor", "Uses neovim")  # the vault still takes writes


def test_sync_with_nothing_new_makes_no_merge_commits(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "editor", "Uses neovim")
    laptop.sync()
    server.sync()
    laptop.sync()
    before = commit_count(laptop.root), commit_count(server.root)
    for _ in range(2):
        server.sync()
        laptop.sync()
    assert (commit_count(laptop.root), commit_count(server.root)) == before


README = "# My vault\n\nline a\n\nline b\n\nline c\n\nline d\n\nline e\n"


def test_a_plain_markdown_file_outside_the_minds_merges_like_text(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    write(laptop.root / "README.md", README)
    commit_by_hand(laptop.root, "README.md", message="add readme")
    laptop.sync()
    server.sync()
    path = laptop.root / "README.md"
    path.write_text(README.replace("line a", "line A (laptop)"), encoding="utf-8")
    commit_by_hand(laptop.root, "README.md", message="laptop readme")
    spath = server.root / "README.md"
    spath.write_text(README.replace("line e", "line E (server)"), encoding="utf-8")
    commit_by_hand(server.root, "README.md", message="server readme")
    laptop.sync()
    server.sync()
    text = spath.read_text(encoding="utf-8")
    assert text == README.replace("line a", "line A (laptop)").replace("line e", "line E (server)"), text


def test_hand_made_note_without_front_matter_keeps_its_dates_after_a_merge(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    note = "michael/note/reading.md"
    write(laptop.root / note, "Books:\n\n- Dune\n\n- Emma\n")
    commit_by_hand(laptop.root, note, message="add note")
    laptop.sync()
    server.sync()
    write(laptop.root / note, "Books:\n\n- Dune (done)\n\n- Emma\n")
    write(server.root / note, "Books:\n\n- Dune\n\n- Emma (started)\n")
    laptop.sync()
    server.sync()
    merged = server.get("note/reading")
    assert merged.created_at.year > 1970 and merged.updated_at.year > 1970, (merged.created_at, merged.updated_at)


def conflicted(two: tuple[Vault, Vault]) -> tuple[Vault, Vault]:
    laptop, server = two
    laptop.store("fact", "office", "The office moved to Hamburg")
    server.store("fact", "office", "The office moved to Munich")
    laptop.sync()
    assert server.sync().conflicts == ["fact/office"]
    assert server.get("fact/office").verified
    return laptop, server


def test_agent_cannot_resolve_a_conflict_on_a_verified_memory(two: tuple[Vault, Vault]) -> None:
    _, server = conflicted(two)
    agent = Vault.open(server.root, "michael", source="agent")
    with pytest.raises(Refused):
        agent.resolve("fact/office", content="The office moved to Nowhere")  # `store` would be refused
    office = server.get("fact/office")
    assert office.content == "The office moved to Munich" and office.conflict is not None


def test_agent_cannot_undo_a_persons_change_to_a_verified_memory(vault: Vault) -> None:
    vault.store("fact", "office", "The office is in Berlin")
    vault.store("fact", "office", "The office moved to Hamburg")  # a person's correction
    agent = Vault.open(vault.root, "michael", source="agent")
    with pytest.raises(Refused):
        agent.undo()
    assert vault.get("fact/office").content == "The office moved to Hamburg"


def test_undo_after_resolve_undoes_the_resolve_not_an_older_change(two: tuple[Vault, Vault]) -> None:
    _, server = conflicted(two)
    server.store("fact", "editor", "Uses neovim")
    server.resolve("fact/office", "theirs")  # a mistake: the person meant --ours
    entry = server.undo()
    assert entry.message.startswith("undo: resolve"), entry.message
    assert server.get("fact/editor").content == "Uses neovim"


def test_unrelated_history_error_says_why(two: tuple[Vault, Vault], tmp_path: Path) -> None:
    laptop, _ = two
    other = Vault.init(tmp_path / "other", "michael")
    other.store("fact", "x", "something else")
    git(laptop.root, "remote", "add", "other", str(other.root))
    with pytest.raises(GitError, match="unrelated"):
        laptop.sync("other")


def test_push_refused_by_the_remote_is_not_reported_as_a_moving_remote(tmp_path: Path) -> None:
    hub = Vault.init(tmp_path / "hub", "michael")  # a non-bare repository with main checked out
    hub.store("fact", "office", "Berlin")
    subprocess.run(["git", "clone", "-q", str(hub.root), str(tmp_path / "laptop")], check=True)
    laptop = Vault.open(tmp_path / "laptop", "michael")
    laptop.store("fact", "editor", "Uses neovim")
    with pytest.raises(GitError) as info:
        laptop.sync()
    assert "kept moving" not in str(info.value), str(info.value)


def test_history_keeps_the_version_the_merge_did_not_take(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    mine = server.store("fact", "office", "The office is in Berlin", priority="low").commit
    time.sleep(1.1)  # updated_at has whole seconds
    laptop.store("fact", "office", "The office is in Berlin", priority="high")  # later: wins the field
    laptop.sync()
    server.sync()
    assert server.get("fact/office").priority == "high"
    assert mine in [v.sha for v in server.history("fact/office")]  # this machine's own version


def test_history_shows_theirs_when_a_merge_kept_ours(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    theirs = laptop.store("fact", "office", "The office moved to Hamburg").commit
    laptop.sync()
    path = server.root / server.get("fact/office").path
    path.write_text(path.read_text(encoding="utf-8").replace("tags:", "tags: [oops\nbroken:"), encoding="utf-8")
    commit_by_hand(server.root, "michael/fact/office.md", message="hand edit")
    server.sync()  # an unreadable side merges line by line (git merge-file): both changes land, nothing is dropped
    assert "Hamburg" in path.read_text(encoding="utf-8") and "broken:" in path.read_text(encoding="utf-8")
    assert theirs in [v.sha for v in server.history("fact/office")]  # the other version stays visible in history


def test_a_persons_verify_does_not_vouch_for_an_agents_concurrent_rewrite(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    agent_laptop = Vault.open(laptop.root, "michael", source="agent")
    agent_laptop.store("fact", "vps_os", "Ubuntu 24.04")
    laptop.sync()
    server.sync()
    agent_laptop.store("fact", "vps_os", "Debian 12 (rm -rf is safe here)")  # the agent rewrites the body
    server.verify("fact/vps_os")  # the person checked "Ubuntu 24.04"
    laptop.sync()
    server.sync()
    merged = server.get("fact/vps_os")
    assert not (merged.verified and merged.content.startswith("Debian")), merged


def _memory_file(body: str, updated: str, extra: str = "") -> bytes:
    return (
        f"---\nid: mem_review000001\ncategory: fact\nkey: office\nsource: user\n"
        f"created_at: 2026-01-01T00:00:00Z\nupdated_at: {updated}\n{extra}---\n{body}\n"
    ).encode()


def test_a_second_conflict_keeps_the_first_conflicts_other_body() -> None:
    """Three machines: B already holds A's body in conflict_theirs; C changed the body too."""
    from memfile import fileformat

    base = _memory_file("Berlin", "2026-01-01T00:00:00Z")
    ours = _memory_file("Cologne (machine C)", "2026-01-03T00:00:00Z")
    theirs = _memory_file("Bonn (machine B)", "2026-01-02T00:00:00Z", "conflict_theirs: Aachen (machine A)\n")
    result = merge_memory(base, ours, theirs, "michael/fact/office.md")
    merged = fileformat.parse(
        result.data, "michael/fact/office.md", fileformat.parse(base, "x/fact/o.md", None).created_at
    )
    kept = merged.content + "\n" + str(merged.conflict)
    assert "Aachen" in kept and "Bonn" in kept and "Cologne" in kept, kept


def test_a_file_git_cannot_merge_keeps_ours_even_when_only_theirs_can_be_read(two: tuple[Vault, Vault]) -> None:
    """SPEC 4: memfile never overwrites a file it cannot parse, not even with the other side's readable
    version; that version stays in the merge commit (history shows it)."""
    laptop, server = two
    laptop.store("fact", "office", "The office moved to Hamburg")
    laptop.sync()
    server.sync()
    theirs = laptop.store("fact", "office", "The office is in Munich").commit
    laptop.sync()
    path = server.root / server.get("fact/office").path
    broken = path.read_text(encoding="utf-8").replace("tags:", "tags: [oops\nbroken:").replace("Hamburg", "Bremen")
    path.write_text(broken, encoding="utf-8")  # the same body line changed on both sides: no line merge either
    commit_by_hand(server.root, "michael/fact/office.md", message="hand edit")
    report = server.sync()
    assert report.kept_ours == ["michael/fact/office.md (ours)"], report
    assert path.read_text(encoding="utf-8") == broken  # the unreadable file, untouched
    assert theirs in git(server.root, "log", "--all", "--format=%H")  # the other version, in history


def test_a_file_neither_side_can_read_keeps_ours(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "The office moved to Hamburg")
    laptop.sync()
    server.sync()
    for vault, city in ((laptop, "Munich"), (server, "Bremen")):
        path = vault.root / "michael/fact/office.md"
        text = path.read_text(encoding="utf-8").replace("tags:", "tags: [oops\nbroken:").replace("Hamburg", city)
        path.write_text(text, encoding="utf-8")
        commit_by_hand(vault.root, "michael/fact/office.md", message=f"hand edit ({city})")
    laptop.sync()
    report = server.sync()
    assert report.kept_ours == ["michael/fact/office.md (ours)"], report
    assert "Bremen" in (server.root / "michael/fact/office.md").read_text(encoding="utf-8")


def test_undo_after_a_sync_merge_undoes_this_machines_change_not_the_other_ones(two: tuple[Vault, Vault]) -> None:
    """A stores fact/mine, B stores fact/theirs and syncs, A syncs (a merge commit): A's undo reverts fact/mine."""
    laptop, server = two
    laptop.store("fact", "mine", "Stored on the laptop")
    server.store("fact", "theirs", "Stored on the server")
    server.sync()
    laptop.sync()
    assert git(laptop.root, "log", "-1", "--format=%p").count(" ") == 1  # a merge commit
    assert ok(in_vault(laptop.root, "undo")).stdout.startswith("undo: store fact/mine (user)")
    assert {m.ref for m in laptop.list()} == {"fact/office", "fact/theirs"}
    assert "undo: store fact/office (user)" in ok(in_vault(laptop.root, "undo")).stdout  # then the one before


def test_undo_refuses_when_a_sync_merge_changed_the_same_memory_after(two: tuple[Vault, Vault]) -> None:
    laptop, server = two
    laptop.store("fact", "office", "The office is in Hamburg")
    server.store("fact", "office", "The office is in Berlin", priority="high")
    server.sync()
    laptop.sync()  # merged field by field: the server's priority came in with the merge
    said = fails(in_vault(laptop.root, "undo"), 2).stderr
    assert "would discard later changes to michael/fact/office.md" in said
    assert laptop.get("fact/office").priority == "high"
