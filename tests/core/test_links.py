"""Wiki links (memfile/links.py): the parser, resolution by Obsidian's file-name rule, and `Vault.links` /
`Vault.backlinks` over a real vault, an Obsidian-style fixture vault among them (docs/format.md, "Links")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfile import Vault
from memfile.errors import NotFound
from memfile.links import AMBIGUOUS, INVALID, MISSING, OTHER_MIND, RESOLVED, SUPERSEDED, Link, parse_links
from memfile.model import KEY_PATTERN, derive_key

# --- the parser ----------------------------------------------------------------------------------


def test_the_four_forms_of_a_link_and_their_lines() -> None:
    text = "Owner: [[alice]].\nSee [[project/synapse|the Synapse project]]\n[[bob|Bob B.]] and [[fact/office]]"
    assert parse_links(text) == [
        Link("alice", None, None, 1),
        Link("project/synapse", "the Synapse project", None, 2),
        Link("bob", "Bob B.", None, 3),
        Link("fact/office", None, None, 3),
    ]


def test_a_list_line_gives_the_first_link_a_typed_relation() -> None:
    text = "- works at [[acme]]\n* Implements [[search_design]] and [[other]]\n- [[plain]]\n1. owned-by [[bob]]"
    assert [(link.target, link.relation) for link in parse_links(text)] == [
        ("acme", "works_at"),
        ("search_design", "implements"),
        ("other", None),
        ("plain", None),
        ("bob", "owned_by"),
    ]


def test_links_in_code_are_text() -> None:
    text = "\n".join(
        [
            "real [[one]] and `[[inline]]` and ``x [[double]] ` y``",
            "```python",
            "[[fenced]]",
            "~~~",
            "[[still_fenced]]",
            "```",
            "~~~",
            "[[tilde_fenced]]",
            "~~~",
            "after [[two]]",
        ]
    )
    assert [link.target for link in parse_links(text)] == ["one", "two"]


def test_a_heading_a_block_and_a_md_suffix_are_not_part_of_the_name() -> None:
    text = "[[alice#Contact]] [[fact/office.md]] [[bob^abc|B]] [[ ]] [[|x]]"
    assert [(link.target, link.shown) for link in parse_links(text)] == [
        ("alice", None),
        ("fact/office", None),
        ("bob", "B"),
    ]


def test_hostile_text_parses_to_links_as_written() -> None:
    assert [link.target for link in parse_links("[[a[[b]]]] [[[c]]] [[d]")] == ["b", "c"]
    assert parse_links("[[../../etc/passwd]]")[0].target == "../../etc/passwd"
    html = parse_links("[[alice|<script>alert(1)</script>]]")[0]
    assert html.shown == "<script>alert(1)</script>"  # kept as written: every face escapes it
    huge = ("word [[x]] " * 100_000) + "[" * 200_000 + "`" * 50_000
    started = time.perf_counter()
    assert len(parse_links(huge)) == 100_000
    assert time.perf_counter() - started < 5


@given(st.text(alphabet="[]|`#^-*\n ab/c.", max_size=200))
def test_the_parser_never_fails_and_never_gives_an_empty_name(text: str) -> None:
    for link in parse_links(text):
        assert link.target.strip() and "\n" not in link.target and "]" not in link.target


# --- Obsidian's rule holds for memfile's names -----------------------------------------------------

#: What Obsidian refuses in a file name, or reads as link syntax (`#` heading, `^` block, `|` alias, brackets).
OBSIDIAN_FORBIDDEN = set('*"\\/<>:|?#^[]')


@given(st.from_regex(KEY_PATTERN, fullmatch=True) | st.text(max_size=80).map(derive_key))
def test_every_key_memfile_makes_is_a_file_name_obsidian_links_to(key: str) -> None:
    assert KEY_PATTERN.fullmatch(key)
    assert not OBSIDIAN_FORBIDDEN & set(key) and not key.startswith(".")
    assert parse_links(f"[[{key}]]") == [Link(key, None, None, 1)]  # the link names exactly that file


# --- resolution over a vault ------------------------------------------------------------------------


def _write(root: Path, relpath: str, body: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


@pytest.fixture
def obsidian(tmp_path: Path) -> Vault:
    """An Obsidian-style vault written by hand: aliases, typed relations, links into folders, a key two
    folders hold, a hand-named file, a link to another mind and links to nothing."""
    vault = Vault.init(tmp_path / "vault", "michael", "Michael's Mind")
    root = vault.root
    (root / "anna").mkdir()
    _write(root, "anna/fact/anna_only.md", "Anna's.\n")
    _write(
        root,
        "michael/project/synapse.md",
        "# Synapse\n\n- owned by [[alice|Alice]]\n- implements [[fact/search_design]]\n"
        "- depends_on [[Reading-List]]\n\nSee [[office]] and [[Synapse]] and [[note/office]].\n"
        "Also [[anna_only]], [[anna/fact/anna_only]], [[nobody]] and [[../../etc/passwd]].\n",
    )
    _write(root, "michael/identity/alice.md", "Alice runs [[project/synapse|Synapse]].\n")
    _write(root, "michael/fact/search_design.md", "Whoosh first.\n")
    _write(root, "michael/fact/office.md", "Berlin.\n")
    _write(root, "michael/note/office.md", "The old office.\n")
    _write(root, "michael/note/Reading-List.md", "Books. Back to [[michael/project/synapse]].\n")
    vault.commit_hand_edits()
    return vault


def _where(resolved: list) -> list[tuple[str, str, str | None, str | None]]:
    return [(r.link.target, r.status, r.memory.path if r.memory else None, r.link.relation) for r in resolved]


def test_the_obsidian_vault_resolves_by_file_name_as_obsidian_does(obsidian: Vault) -> None:
    assert _where(obsidian.links("project/synapse")) == [
        ("alice", RESOLVED, "michael/identity/alice.md", "owned_by"),
        ("fact/search_design", RESOLVED, "michael/fact/search_design.md", "implements"),
        ("Reading-List", RESOLVED, "michael/note/Reading-List.md", "depends_on"),  # the file name, not its key
        ("office", AMBIGUOUS, None, None),  # two folders hold office.md: said, not guessed
        ("Synapse", RESOLVED, "michael/project/synapse.md", None),  # Obsidian matches names case-insensitively
        ("note/office", RESOLVED, "michael/note/office.md", None),
        ("anna_only", OTHER_MIND, None, None),
        ("anna/fact/anna_only", OTHER_MIND, None, None),
        ("nobody", MISSING, None, None),
        ("../../etc/passwd", INVALID, None, None),
    ]
    ambiguous = obsidian.links("project/synapse")[3]
    assert {m.path for m in ambiguous.candidates} == {"michael/fact/office.md", "michael/note/office.md"}
    assert "ambiguous" in ambiguous.note and "anna" in obsidian.links("project/synapse")[6].note


def test_backlinks_are_the_links_that_lead_to_a_memory(obsidian: Vault) -> None:
    backlinks = obsidian.backlinks("project/synapse")
    assert [(r.source.path, r.link.line, r.link.shown) for r in backlinks] == [
        ("michael/identity/alice.md", 1, "Synapse"),
        ("michael/note/Reading-List.md", 1, None),
        ("michael/project/synapse.md", 7, None),  # its own [[Synapse]]
    ]
    assert [(r.source.ref, r.link.relation) for r in obsidian.backlinks("identity/alice")] == [
        ("project/synapse", "owned_by")
    ]
    assert obsidian.backlinks("fact/office") == []  # [[office]] is ambiguous: no backlink to either


def test_a_link_to_a_superseded_memory_resolves_to_its_successor_and_says_so(vault: Vault) -> None:
    vault.store("identity", "user_location", "Hamburg")
    vault.store("identity", "user_city", "Berlin", supersedes="identity/user_location")
    vault.store("note", "travel", "Home is [[user_location]].")
    [link] = vault.links("note/travel")
    assert link.status == SUPERSEDED and link.memory and link.memory.ref == "identity/user_city"
    assert link.named and link.named.ref == "identity/user_location"
    assert link.note == "[[user_location]] names identity/user_location, superseded by identity/user_city"
    assert [r.source.ref for r in vault.backlinks("identity/user_city")] == ["note/travel"]
    data = vault.linked("note/travel").to_dict()
    assert data["links"][0]["status"] == "superseded" and data["links"][0]["ref"] == "identity/user_city"


def test_links_are_never_rewritten_and_an_unknown_ref_is_not_found(vault: Vault) -> None:
    text = "- works at [[acme|ACME <b>Inc</b>]]\n"
    vault.store("note", "job", text)
    assert vault.links("note/job")[0].status == MISSING
    assert vault.get("note/job").content.rstrip("\n") == text.rstrip("\n")
    with pytest.raises(NotFound):
        vault.backlinks("note/nothing")


@pytest.mark.slow
def test_backlinks_at_ten_thousand_memories(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "vault", "michael")
    for n in range(10_000):
        _write(vault.root, f"michael/note/n{n}.md", f"Note {n} links [[n{(n + 1) % 10_000}]] and [[fact/f{n % 50}]].\n")
    vault.reindex()
    vault.backlinks("note/n1")  # the texts parsed once
    started = time.perf_counter()
    assert [r.source.ref for r in vault.backlinks("note/n1")] == ["note/n0"]
    elapsed = time.perf_counter() - started
    print(f"backlinks at 10,000 memories: {elapsed * 1000:.0f} ms")
    assert elapsed < 2
