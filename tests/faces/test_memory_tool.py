"""Claude's memory tool over a vault (memfile.memory_tool): the SDK reference backend's formats and errors,
the path guards, memfile's rules on top (Markdown only, front-matter kept whole, a person's memories left
alone, 64 KiB), and one git commit per command. Real vaults, real git, the SDK's own backend on a plain
folder as the reference for every output that must match."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import commit_count, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import Vault
from memfile.memory_tool import (
    COMMANDS,
    MAX_DEPTH,
    MAX_NAME_BYTES,
    MAX_WRITE_BYTES,
    MemoryToolBackend,
    MemoryToolError,
)
from memfile.model import Category, Source

BODY = "Line one\nLine two\nLine three\nLine four\nLine five\n"


@pytest.fixture
def tool(vault: Vault) -> MemoryToolBackend:
    return MemoryToolBackend(vault)


def mind(vault: Vault) -> Path:
    return vault.mind_dir


def run(tool: MemoryToolBackend, **command: Any) -> str:
    return tool.execute(command)


def refused(tool: MemoryToolBackend, **command: Any) -> str:
    """The command's error text; asserts `run` raises it (execute only returns it)."""
    with pytest.raises(MemoryToolError) as caught:
        tool.run(command)
    return str(caught.value)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def unchanged(vault: Vault, before: tuple[int, dict[str, bytes]]) -> None:
    assert (commit_count(vault.root), snapshot(vault.mind_dir)) == before


def state(vault: Vault) -> tuple[int, dict[str, bytes]]:
    return commit_count(vault.root), snapshot(vault.mind_dir)


# --- the SDK's reference backend, run on a plain folder holding the same files -------------------


class Reference:
    """`BetaLocalFilesystemMemoryTool` on `root/memories`, answering as the model would see it."""

    def __init__(self, root: Path) -> None:
        from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

        self.tool = BetaLocalFilesystemMemoryTool(str(root))
        self.memories = root / "memories"

    def __call__(self, **command: Any) -> str:
        from anthropic.lib.tools import ToolError

        try:
            return str(self.tool.call(command))
        except ToolError as exc:
            return str(exc)

    def mirror(self, vault: Vault) -> None:
        """The same visible files as the mind folder, byte for byte."""
        shutil.rmtree(self.memories)
        shutil.copytree(vault.mind_dir, self.memories, ignore=shutil.ignore_patterns(".*"))


@pytest.fixture
def sdk(tmp_path: Path) -> Reference:
    pytest.importorskip("anthropic")
    return Reference(tmp_path / "reference")


def same(tool: MemoryToolBackend, sdk: Reference, **command: Any) -> str:
    ours, theirs = tool.execute(command), sdk(**command)
    assert ours == theirs
    return ours


def without_updated_at(text: str) -> str:
    return re.sub(r"(?m)^updated_at: .*$", "updated_at: X", text)


@pytest.fixture
def filled(tool: MemoryToolBackend) -> MemoryToolBackend:
    """A mind with memories one, two and three levels deep."""
    for path, text in (
        ("/memories/note/alpha.md", BODY),
        ("/memories/fact/office.md", "The office is in Berlin.\n"),
        ("/memories/projects/apollo/plan.md", "# Plan\n\n- launch\n"),
        ("/memories/projects/apollo/deep/log.md", "deep\n"),
        ("/memories/top.md", "a top-level memory\n"),
    ):
        assert run(tool, command="create", path=path, file_text=text) == f"File created successfully at: {path}"
    return tool


# --- view ----------------------------------------------------------------------------------------


def test_view_of_the_mind_lists_two_levels_with_sizes_as_the_sdk_does(
    filled: MemoryToolBackend, sdk: Reference
) -> None:
    sdk.mirror(filled.vault)
    listing = same(filled, sdk, command="view", path="/memories")
    assert listing.splitlines()[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:"
    )
    assert "\t/memories/projects/apollo/\n" in listing + "\n" and "apollo/deep" not in listing  # two levels only
    assert ".gitkeep" not in listing
    assert re.search(r"(?m)^\d+(\.\d)?[BKMG]\t/memories/note/alpha\.md$", listing)
    same(filled, sdk, command="view", path="/memories/projects")
    same(filled, sdk, command="view", path="/memories/")


def test_view_of_a_file_numbers_every_line_front_matter_included(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    shown = same(filled, sdk, command="view", path="/memories/note/alpha.md")
    lines = shown.splitlines()
    assert lines[0] == "Here's the content of /memories/note/alpha.md with line numbers:"
    assert lines[1] == "     1\t---" and "\tsource: agent" in shown and "\tLine three" in shown
    for view_range in ([1, 3], [2, -1], [0, 2], [5, 100], [3, 3], [1]):
        same(filled, sdk, command="view", path="/memories/note/alpha.md", view_range=view_range)


def test_missing_paths_give_the_sdk_errors(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    assert (
        same(filled, sdk, command="view", path="/memories/note/nope.md")
        == "The path /memories/note/nope.md does not exist. Please provide a valid path."
    )
    same(filled, sdk, command="str_replace", path="/memories/note/nope.md", old_str="a", new_str="b")
    same(filled, sdk, command="insert", path="/memories/note/nope.md", insert_line=0, insert_text="a")
    same(filled, sdk, command="delete", path="/memories/note/nope.md")
    same(filled, sdk, command="rename", old_path="/memories/note/nope.md", new_path="/memories/note/new.md")
    same(filled, sdk, command="view", path="/other/place")
    same(filled, sdk, command="str_replace", path="/memories/note", old_str="a", new_str="b")  # a folder
    same(filled, sdk, command="delete", path="/memories")
    same(filled, sdk, command="rename", old_path="/memories", new_path="/memories/x")


# --- create --------------------------------------------------------------------------------------


def test_create_at_category_key_stores_an_agent_memory_in_one_commit(tool: MemoryToolBackend) -> None:
    vault = tool.vault
    before = commit_count(vault.root)
    assert run(tool, command="create", path="/memories/preference/coffee.md", file_text="Black, no sugar.\n") == (
        "File created successfully at: /memories/preference/coffee.md"
    )
    assert commit_count(vault.root) == before + 1
    memory = vault.get("preference/coffee")
    assert (memory.content, memory.source, memory.verified) == ("Black, no sugar.", Source.AGENT, False)
    assert vault.actor is Source.USER  # the caller's Vault is put back as it was


def test_create_elsewhere_writes_the_text_with_an_agents_front_matter(tool: MemoryToolBackend) -> None:
    vault = tool.vault
    before = commit_count(vault.root)
    run(tool, command="create", path="/memories/journal/2026/trip.md", file_text="# Trip\n\nLisbon in May.\n")
    assert commit_count(vault.root) == before + 1
    assert git(vault.root, "log", "-1", "--format=%s").strip() == "store note/trip (agent)"
    text = (mind(vault) / "journal/2026/trip.md").read_text()
    assert (
        text.startswith("---\nid: mem_") and "\nsource: agent\n" in text and text.endswith("# Trip\n\nLisbon in May.\n")
    )
    memory = vault.get("trip")
    assert (memory.category, memory.source, memory.verified) == (Category.NOTE, Source.AGENT, False)
    assert not [f for f in vault.doctor().findings if f.kind in ("misplaced", "duplicate", "uncommitted")]


def test_create_keeps_a_given_front_matter_and_adds_what_is_missing(tool: MemoryToolBackend) -> None:
    text = "---\npriority: high\ntags: [coffee]\n---\nEspresso after lunch.\n"
    run(tool, command="create", path="/memories/preference/espresso.md", file_text=text)
    memory = tool.vault.get("preference/espresso")
    assert (memory.priority.value, memory.tags, memory.source) == ("high", ("coffee",), Source.AGENT)
    on_disk = (mind(tool.vault) / "preference/espresso.md").read_text()
    assert on_disk.endswith("priority: high\ntags: [coffee]\n---\nEspresso after lunch.\n")


@pytest.mark.parametrize(
    ("front", "words"),
    [
        ("verified: true", "verify"),
        ("source: user", "source: agent"),
        ("priority: critical", "critical"),
        ("category: fact", "/memories/fact/espresso.md"),
        ("key: other", "leave `category` and `key` out"),
        ("tags: [unclosed", "YAML"),
    ],
)
def test_create_refuses_a_front_matter_an_agent_may_not_write(tool: MemoryToolBackend, front: str, words: str) -> None:
    before = state(tool.vault)
    message = refused(
        tool, command="create", path="/memories/preference/espresso.md", file_text=f"---\n{front}\n---\nx\n"
    )
    assert words in message
    unchanged(tool.vault, before)


def test_create_never_overwrites_a_file_or_a_memory_held_elsewhere(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    before = state(filled.vault)
    assert same(filled, sdk, command="create", path="/memories/note/alpha.md", file_text="new") == (
        "File /memories/note/alpha.md already exists"
    )
    # projects/apollo/plan.md holds note/plan: a store at note/plan.md would update it in place
    message = refused(filled, command="create", path="/memories/note/plan.md", file_text="other")
    assert "A memory note/plan already exists at /memories/projects/apollo/plan.md" in message
    message = refused(filled, command="create", path="/memories/other/plan.md", file_text="---\nsource: agent\n---\nx")
    assert "already exists at /memories/projects/apollo/plan.md" in message
    unchanged(filled.vault, before)


@pytest.mark.parametrize(
    "path",
    ["/memories/notes.txt", "/memories/note/coffee", "/memories/note/.hidden.md", "/memories/.cache/a.md"],
)
def test_only_markdown_files_and_the_error_names_the_layout(tool: MemoryToolBackend, path: str) -> None:
    before = state(tool.vault)
    message = refused(tool, command="create", path=path, file_text="hello")
    assert "/memories/<category>/<key>.md" in message
    assert ", ".join(c.value for c in Category) in message
    unchanged(tool.vault, before)


def test_writes_are_capped_at_64_kib(tool: MemoryToolBackend) -> None:
    before = state(tool.vault)
    message = refused(tool, command="create", path="/memories/note/big.md", file_text="x" * (MAX_WRITE_BYTES + 1))
    assert "at most 65,536 bytes" in message
    unchanged(tool.vault, before)
    run(tool, command="create", path="/memories/note/big.md", file_text="x" * (MAX_WRITE_BYTES - 1000))
    before = state(tool.vault)
    message = refused(tool, command="insert", path="/memories/note/big.md", insert_line=0, insert_text="y" * 2000)
    assert "at most 65,536 bytes" in message
    unchanged(tool.vault, before)


# --- str_replace and insert ------------------------------------------------------------------------


def test_str_replace_gives_the_sdk_snippet_and_errors(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    path = "/memories/note/alpha.md"
    before = commit_count(filled.vault.root)
    snippet = same(filled, sdk, command="str_replace", path=path, old_str="Line three", new_str="Line 3")
    assert snippet.startswith("The memory file has been edited. Here is the snippet showing the change")
    assert "\tLine 3" in snippet
    assert commit_count(filled.vault.root) == before + 1
    subject = git(filled.vault.root, "log", "-1", "--format=%s").strip()
    assert subject == "edit note/alpha (agent)"
    ours = (mind(filled.vault) / "note/alpha.md").read_text()
    assert without_updated_at(ours) == without_updated_at((sdk.memories / "note/alpha.md").read_text())
    assert same(filled, sdk, command="str_replace", path=path, old_str="Line nine", new_str="x").startswith(
        "No replacement was performed, old_str `Line nine` did not appear verbatim"
    )
    assert "in lines: " in same(filled, sdk, command="str_replace", path=path, old_str="Line", new_str="x")
    assert commit_count(filled.vault.root) == before + 1


def test_str_replace_moves_updated_at(tool: MemoryToolBackend) -> None:
    text = "---\nsource: agent\ncreated_at: 2020-01-01T00:00:00Z\nupdated_at: 2020-01-01T00:00:00Z\n---\nold\n"
    run(tool, command="create", path="/memories/note/dated.md", file_text=text)
    run(tool, command="str_replace", path="/memories/note/dated.md", old_str="old", new_str="new")
    memory = tool.vault.get("note/dated")
    assert memory.content == "new" and memory.updated_at.year > 2020 and memory.created_at.year == 2020


def test_insert_gives_the_sdk_results_and_bounds(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    path = "/memories/note/alpha.md"
    n = len((mind(filled.vault) / "note/alpha.md").read_text().splitlines())
    for line in (-1, n + 1):
        message = same(filled, sdk, command="insert", path=path, insert_line=line, insert_text="x")
        assert message == f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {n}]."
    before = commit_count(filled.vault.root)
    assert same(filled, sdk, command="insert", path=path, insert_line=n, insert_text="Line six\n") == (
        f"The file {path} has been edited."
    )
    assert commit_count(filled.vault.root) == before + 1
    ours = (mind(filled.vault) / "note/alpha.md").read_text()
    assert without_updated_at(ours) == without_updated_at((sdk.memories / "note/alpha.md").read_text())
    assert ours.endswith("Line five\nLine six\n")


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("source: agent", "source: [", "would not be a memory file memfile can read"),
        ("---\nid:", "id:", None),  # the opening fence gone: the front-matter becomes body, the id changes
        ("source: agent", "source: user", "source"),
        ("verified: false", "verified: true", "verify"),
        ("source: agent", "source: agent\nkey: renamed", "key"),
        ("source: agent", "source: agent\ncategory: fact", "category"),
        ("priority: normal", "priority: critical", "critical"),
    ],
)
def test_an_edit_that_breaks_or_changes_what_never_changes_writes_nothing(
    filled: MemoryToolBackend, old: str, new: str, words: str | None
) -> None:
    text = (mind(filled.vault) / "note/alpha.md").read_text()
    memory = filled.vault.get("note/alpha")
    created = f"created_at: {text.split('created_at: ', 1)[1].splitlines()[0]}"
    assert created in text and memory.id in text
    before = state(filled.vault)
    message = refused(filled, command="str_replace", path="/memories/note/alpha.md", old_str=old, new_str=new)
    assert message.startswith("No change was made") or "agent" in message
    if words:
        assert words in message
    unchanged(filled.vault, before)
    message = refused(
        filled,
        command="str_replace",
        path="/memories/note/alpha.md",
        old_str=created,
        new_str="created_at: 2000-01-01T00:00:00Z",
    )
    assert "created_at" in message
    unchanged(filled.vault, before)


def test_a_memory_a_person_verified_or_made_critical_is_theirs(tool: MemoryToolBackend) -> None:
    vault = tool.vault
    vault.store("fact", "home", "Lives in Berlin.\n")  # a person's store: verified
    vault.store("fact", "allergy", "Allergic to nuts.", priority="critical", source="agent")  # unverified, critical
    before = state(vault)
    for path in ("/memories/fact/home.md", "/memories/fact/allergy.md"):
        message = refused(tool, command="str_replace", path=path, old_str="Allergic", new_str="x")
        if "home" in path:
            message = refused(tool, command="str_replace", path=path, old_str="Berlin", new_str="Paris")
        assert (
            "only a person can change it" in message and "who can mark fact/" in message and "memfile " not in message
        )
        assert "only a person" in refused(tool, command="insert", path=path, insert_line=0, insert_text="x")
        assert "only a person can delete it" in refused(tool, command="delete", path=path)
        renamed = refused(tool, command="rename", old_path=path, new_path="/memories/fact/z.md")
        assert "only a person can rename it" in renamed and "supersedes=" not in renamed
    assert "verified or made critical" in refused(tool, command="delete", path="/memories/fact")
    unchanged(vault, before)


# --- delete and rename ---------------------------------------------------------------------------


def test_delete_of_a_file_forgets_it_in_one_commit(filled: MemoryToolBackend, sdk: Reference) -> None:
    sdk.mirror(filled.vault)
    before = commit_count(filled.vault.root)
    assert same(filled, sdk, command="delete", path="/memories/note/alpha.md") == (
        "Successfully deleted /memories/note/alpha.md"
    )
    assert commit_count(filled.vault.root) == before + 1
    assert not (mind(filled.vault) / "note/alpha.md").exists()
    assert "alpha" not in [m.key for m in filled.vault.memories()]


def test_delete_of_a_folder_is_one_commit_all_or_nothing(filled: MemoryToolBackend) -> None:
    vault = filled.vault
    (mind(vault) / "projects/apollo/deep/notes.txt").write_text("not a memory")
    before = state(vault)
    message = refused(filled, command="delete", path="/memories/projects")
    assert "projects/apollo/deep/notes.txt" in message and "nothing was changed" in message
    unchanged(vault, before)
    (mind(vault) / "projects/apollo/deep/notes.txt").unlink()
    vault.store("note", "keeper", "a person's note")  # verified
    git(vault.root, "mv", "michael/note/keeper.md", "michael/projects/apollo/keeper.md")
    git(vault.root, "-c", "user.name=H", "-c", "user.email=h@x", "commit", "-qm", "move by hand")
    before = state(vault)
    assert "keeper.md" in refused(filled, command="delete", path="/memories/projects")
    unchanged(vault, before)
    git(vault.root, "rm", "-q", "michael/projects/apollo/keeper.md")
    git(vault.root, "-c", "user.name=H", "-c", "user.email=h@x", "commit", "-qm", "rm by hand")
    count = commit_count(vault.root)
    assert run(filled, command="delete", path="/memories/projects") == "Successfully deleted /memories/projects"
    assert commit_count(vault.root) == count + 1
    assert git(vault.root, "log", "-1", "--format=%s").strip() == "forget note/log, note/plan (agent)"
    removed = git(vault.root, "show", "--no-renames", "--name-status", "--format=", "HEAD").split()
    assert removed == ["D", "michael/projects/apollo/deep/log.md", "D", "michael/projects/apollo/plan.md"]
    assert not (mind(vault) / "projects").exists()


def test_rename_is_store_new_and_forget_old_in_one_commit(filled: MemoryToolBackend, sdk: Reference) -> None:
    vault = filled.vault
    old = vault.get("note/alpha")
    count = commit_count(vault.root)
    assert run(filled, command="rename", old_path="/memories/note/alpha.md", new_path="/memories/fact/alpha.md") == (
        "Successfully renamed /memories/note/alpha.md to /memories/fact/alpha.md"
    )
    assert commit_count(vault.root) == count + 1
    changed = git(vault.root, "show", "--no-renames", "--name-status", "--format=", "HEAD").split()
    assert changed == ["A", "michael/fact/alpha.md", "D", "michael/note/alpha.md"]
    assert git(vault.root, "log", "-1", "--format=%s").strip() == "store fact/alpha, forget note/alpha (agent)"
    new = vault.get("fact/alpha")
    assert new.id != old.id and dict(new.extra)["renamed_from"] == old.id
    assert (new.content, new.created_at, new.source) == (old.content, old.created_at, old.source)
    assert not (mind(vault) / "note/alpha.md").exists()
    sdk.mirror(vault)
    assert same(filled, sdk, command="rename", old_path="/memories/fact/alpha.md", new_path="/memories/top.md") == (
        "The destination /memories/top.md already exists"
    )


def test_rename_of_a_folder_moves_every_memory_in_one_commit(filled: MemoryToolBackend) -> None:
    vault = filled.vault
    count = commit_count(vault.root)
    run(filled, command="rename", old_path="/memories/projects", new_path="/memories/archive")
    assert commit_count(vault.root) == count + 1
    assert sorted(p.relative_to(mind(vault)).as_posix() for p in (mind(vault) / "archive").rglob("*.md")) == [
        "archive/apollo/deep/log.md",
        "archive/apollo/plan.md",
    ]
    assert not (mind(vault) / "projects").exists()


def test_rename_refuses_other_files_and_places(filled: MemoryToolBackend) -> None:
    before = state(filled.vault)
    assert "/memories/<category>/<key>.md" in refused(
        filled, command="rename", old_path="/memories/top.md", new_path="/memories/top.txt"
    )
    assert "into itself" in refused(
        filled, command="rename", old_path="/memories/projects", new_path="/memories/projects/x"
    )
    assert "already holds" in refused(
        filled, command="rename", old_path="/memories/top.md", new_path="/memories/x/plan.md"
    )
    unchanged(filled.vault, before)


# --- path guards ---------------------------------------------------------------------------------


TRAVERSALS = [
    "/memories/../x.md",
    "/memories/note/../../x.md",
    "/memories/%2e%2e/x.md",
    "/memories/%252e%252e/x.md",
    "/memories/..%2fx.md",
    "/memories/a\\b.md",
    "/memories/..\\x.md",
    "/memories/a\x00.md",
    "/memories/%00.md",
    "/etc/passwd",
    "/memories//etc/passwd",
    "/memoriesx/a.md",
    "memories/a.md",
]


def every_command(path: str) -> list[dict[str, Any]]:
    """Each command of the tool on `path` (a rename from it, and one to it)."""
    return [
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "root", "new_str": "x"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/note/z.md"},
        {"command": "rename", "old_path": "/memories/top.md", "new_path": path},
    ]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_paths_that_leave_memories_are_refused_for_every_command(filled: MemoryToolBackend, path: str) -> None:
    vault = filled.vault
    before = state(vault)
    outside = snapshot(vault.root.parent)
    for command in every_command(path):
        message = refused(filled, **command)
        assert "/memories" in message and "root:" not in message
    unchanged(vault, before)
    assert snapshot(vault.root.parent) == outside


def test_symlinks_out_of_the_mind_are_refused_and_not_listed(filled: MemoryToolBackend, tmp_path: Path) -> None:
    vault = filled.vault
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.md").write_text("top secret\n")
    os.symlink(secret, mind(vault) / "escape")
    os.symlink(secret / "secret.md", mind(vault) / "note" / "link.md")
    before = commit_count(vault.root)
    for command in (
        {"command": "view", "path": "/memories/escape/secret.md"},
        {"command": "view", "path": "/memories/note/link.md"},
        {"command": "create", "path": "/memories/escape/new.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/note/link.md", "old_str": "top", "new_str": "x"},
        {"command": "delete", "path": "/memories/escape/secret.md"},
    ):
        assert "would escape /memories" in refused(filled, **command)
    listing = run(filled, command="view", path="/memories")
    assert "escape" not in listing and "link.md" not in listing and "secret" not in listing
    assert (secret / "secret.md").read_text() == "top secret\n" and sorted(os.listdir(secret)) == ["secret.md"]
    assert commit_count(vault.root) == before


@pytest.mark.parametrize(
    "command",
    [
        None,
        "view",
        {},
        {"command": "launch"},
        {"command": "view"},
        {"command": "view", "path": 7},
        {"command": "view", "path": "/memories/note/alpha.md", "view_range": "1-2"},
        {"command": "create", "path": "/memories/note/x.md"},
        {"command": "insert", "path": "/memories/note/alpha.md", "insert_line": "1", "insert_text": "x"},
        {"command": "insert", "path": "/memories/note/alpha.md", "insert_line": True, "insert_text": "x"},
        {"command": "rename", "old_path": "/memories/note/alpha.md"},
    ],
)
def test_malformed_commands_are_answered_never_raised(filled: MemoryToolBackend, command: Any) -> None:
    before = state(filled.vault)
    answer = filled.execute(command)
    assert isinstance(answer, str) and answer
    unchanged(filled.vault, before)


#: Values a model could put anywhere in a command: any JSON, text with lone surrogates, paths near the guards.
_ODD_TEXT = st.sampled_from(["\ud800", "a\udfff.md", "/memories/\udc80", "/memories/" + "x" * 300, "/memories/.."])
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | _ODD_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_ARGUMENTS = (
    "path",
    "view_range",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "old_path",
    "new_path",
)
_COMMANDS = _VALUES | st.fixed_dictionaries(
    {"command": st.sampled_from(COMMANDS) | _VALUES},
    optional={name: _VALUES | st.sampled_from(["/memories", "/memories/note/alpha.md"]) for name in _ARGUMENTS},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_COMMANDS)
def test_any_malformed_command_is_a_sentence_never_an_exception(filled: MemoryToolBackend, command: Any) -> None:
    try:
        answer = filled.run(command)
    except MemoryToolError as exc:
        answer = str(exc)
    assert isinstance(answer, str) and answer
    answer.encode("utf-8")  # sendable: no lone surrogate comes back


def test_a_symlink_loop_in_the_mind_is_a_sentence_for_every_command(filled: MemoryToolBackend) -> None:
    vault = filled.vault
    os.symlink("loop_b", mind(vault) / "loop_a")
    os.symlink("loop_a", mind(vault) / "loop_b")
    os.symlink("circle.md", mind(vault) / "note" / "circle.md")
    before = state(vault)
    listing = run(filled, command="view", path="/memories")  # the loops are left out, the rest listed
    assert "/memories/note/alpha.md" in listing and "loop_a" not in listing and "circle" not in listing
    for command in (
        {"command": "view", "path": "/memories/loop_a"},
        {"command": "view", "path": "/memories/note/circle.md"},
        {"command": "create", "path": "/memories/loop_a/x.md", "file_text": "x"},
        {"command": "create", "path": "/memories/note/circle.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/note/circle.md", "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": "/memories/loop_b/y.md", "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": "/memories/loop_a"},
        {"command": "rename", "old_path": "/memories/note/alpha.md", "new_path": "/memories/loop_a/alpha.md"},
    ):
        message = refused(filled, **command)
        assert "symbolic link that leads in a circle" in message and "tell the user" in message, command
    unchanged(vault, before)


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/memories/note/" + "a" * 252 + ".md", "a name of 255 bytes"),
        ("/memories/note/" + "b" * 300 + ".md", "a name of 303 bytes"),
        ("/memories/" + "\u00e9" * 128 + "/x.md", "a name of 256 bytes"),
        ("/memories/" + "a/" * 2000 + "x.md", "goes 2000 folders down"),
    ],
)
def test_a_name_too_long_or_a_path_too_deep_is_a_sentence(filled: MemoryToolBackend, path: str, said: str) -> None:
    before = state(filled.vault)
    for command in every_command(path):
        message = refused(filled, **command)
        assert said in message and "for example /memories/preference/coffee.md" in message, message
        assert len(message) < 800
    unchanged(filled.vault, before)


def test_names_up_to_the_limit_and_paths_sixteen_folders_deep_are_written(tool: MemoryToolBackend) -> None:
    long_name = "/memories/note/" + "n" * (MAX_NAME_BYTES - 3) + ".md"
    deep = "/memories/" + "d/" * MAX_DEPTH + "deep.md"
    for path in (long_name, deep):
        assert run(tool, command="create", path=path, file_text="kept") == f"File created successfully at: {path}"
        assert "kept" in run(tool, command="view", path=path)


def test_insert_at_line_0_goes_to_the_top_of_the_memorys_text(filled: MemoryToolBackend) -> None:
    vault, path = filled.vault, "/memories/note/alpha.md"
    top = (mind(vault) / "note/alpha.md").read_text().split("\n")[1:].index("---") + 2  # the front-matter's lines
    answer = run(filled, command="insert", path=path, insert_line=0, insert_text="Line zero")
    assert answer == (
        f"The file {path} has been edited. Line 0 is the top of the memory's text, below its front-matter "
        f"(lines 1-{top}): the text starts at line {top + 1}."
    )
    assert vault.get("note/alpha").content.startswith("Line zero\nLine one\n")
    shown = run(filled, command="view", path=path, view_range=[top + 1, top + 1])
    assert shown.endswith(f"{top + 1}\tLine zero")
    assert git(vault.root, "log", "-1", "--format=%s").strip() == "edit note/alpha (agent)"


def test_a_secret_refusal_counts_the_lines_the_model_wrote(tool: MemoryToolBackend) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    before = state(tool.vault)
    plain = refused(tool, command="create", path="/memories/note/ci.md", file_text=f"CI token {token}")
    assert "/memories/note/ci.md looks like it holds a secret: line 1 looks like a GitHub token" in plain
    fronted = "---\ntags: [ci]\n---\n\nThe CI token:\n" + token + "\n"
    assert "line 6 looks like a GitHub token" in refused(
        tool, command="create", path="/memories/note/ci.md", file_text=fronted
    )
    blank_lines = refused(tool, command="create", path="/memories/note/ci.md", file_text=f"\n\nCI\n{token}\n")
    assert "line 4 looks like a GitHub token" in blank_lines
    for message in (plain, blank_lines):  # in the memory tool's words: no command line, no other face's option
        assert "michael/" not in message and "memfile " not in message and "--" not in message
        assert "ask the user" in message
    unchanged(tool.vault, before)
    run(tool, command="create", path="/memories/note/ci.md", file_text="The CI token is in the vault of 1Password.")
    edited = refused(tool, command="str_replace", path="/memories/note/ci.md", old_str="is in", new_str=token)
    numbered = run(tool, command="view", path="/memories/note/ci.md")
    line = next(n for n, text in enumerate(numbered.splitlines()) if "1Password" in text)  # as `view` numbers it
    assert f"line {line} looks like a GitHub token" in edited and "/memories/note/ci.md" in edited


def test_commit_subjects_say_memfiles_verbs_so_log_and_undo_know_them(filled: MemoryToolBackend) -> None:
    vault = filled.vault
    run(filled, command="create", path="/memories/note/trip.md", file_text="Lisbon.")
    run(filled, command="str_replace", path="/memories/note/trip.md", old_str="Lisbon.", new_str="Lisbon in May.")
    run(filled, command="delete", path="/memories/fact/office.md")
    assert git(vault.root, "log", "-3", "--format=%s").splitlines() == [
        "forget fact/office (agent)",
        "edit note/trip (agent)",
        "store note/trip (agent)",
    ]
    with vault.acting_as(Source.AGENT):  # an agent undoes its own last change, as after a `forget`
        assert vault.undo().message == "undo: forget fact/office (agent)"
    assert vault.get("fact/office").content.strip() == "The office is in Berlin."


def test_a_person_vault_handed_over_acts_as_agent_and_is_put_back(vault: Vault) -> None:
    tool = MemoryToolBackend(vault)
    run(tool, command="create", path="/memories/note/x.md", file_text="hello")
    assert vault.get("note/x").source is Source.AGENT and vault.actor is Source.USER
    with vault.acting_as("agent", key="claude-app"):
        run(tool, command="create", path="/memories/note/y.md", file_text="hi")
    assert "Memfile-Key: claude-app" in git(vault.root, "log", "-1", "--format=%B")


def test_the_same_commands_as_an_mcp_tool(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from helpers.mcp import serve

    root = Vault.init(tmp_path / "v", "alice").root

    async def script(agent: Any) -> dict[str, str]:
        async def ok(name: str, **args: Any) -> str:
            return str((await agent.ok(name, **args))["result"])

        out = {"create": await ok("memory", command="create", path="/memories/note/plan.md", file_text="Ship.")}
        out["edit"] = await ok(
            "memory", command="str_replace", path="/memories/note/plan.md", old_str="Ship.", new_str="Ship in May."
        )
        out["view"] = await ok("memory", command="view", path="/memories")
        out["escape"] = await agent.error("memory", command="view", path="/memories/../../etc/passwd")
        out["missing"] = await agent.error("memory", command="delete", path="/memories/note/none.md")
        return out

    out = serve(root, script, mind="alice")
    assert out["create"] == "File created successfully at: /memories/note/plan.md"
    assert "Ship in May." in out["edit"] and "/memories/note/plan.md" in out["view"]
    assert "does not exist" in out["missing"] and "failed unexpectedly" not in out["escape"]
    with Vault.open(root, "alice") as vault:
        memory = vault.get("note/plan")
    assert memory.content.strip() == "Ship in May." and memory.source.value == "agent" and not memory.verified
    assert git(root, "log", "-2", "--format=%s").split("\n")[:2] == [
        "edit note/plan (agent)",
        "store note/plan (agent)",
    ]


def test_a_token_in_a_path_or_an_old_str_is_masked_in_the_answer(filled: MemoryToolBackend) -> None:
    """Issue 39 item 13: no answer repeats a value that looks like a secret (a path, an old_str)."""
    token = "ghp_" + "Zq8vR2mK7tX4wB9nL3pY6sD1fH5jC0gA2eU8"
    for command in (
        {"command": "view", "path": f"/memories/fact/{token}.md"},
        {"command": "delete", "path": f"/memories/{token}"},
        {"command": "view", "path": f"/{token}"},
        {"command": "str_replace", "path": "/memories/fact/office.md", "old_str": token, "new_str": "x"},
    ):
        said = refused(filled, **command)
        assert "ghp_\u2026" + token[-4:] in said and token[8:-8] not in said, (command, said)
