"""The memory file format (SPEC section 2): parse, serialize, and byte-stable rewrites.

Golden files: `tests/golden/<name>.md` is a file as a person or an older memfile
wrote it; `tests/golden/<name>.<change>.out.md` is that file after one change
made through `fileformat.rewrite`, compared byte for byte. `.gitattributes`
keeps git from touching their CRLF line endings and BOM.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import string
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers import GOLDEN, fails, in_vault, ok, run, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import (
    Category,
    Conflict,
    FileParseError,
    InvalidInput,
    Memory,
    Priority,
    Refused,
    Source,
    Vault,
    fileformat,
)
from memfile.config import Config, find_vault, load_config, mind_section, render_config
from memfile.errors import NotAVault
from memfile.model import ID_PATTERN, KEY_PATTERN, KNOWN_FIELDS, format_datetime
from memfile.paths import MIND_PATTERN

UTC = timezone.utc
MTIME = datetime(2026, 6, 28, 9, 30, tzinfo=UTC)
NOW = datetime(2026, 7, 1, 8, 15, tzinfo=UTC)
BOM = b"\xef\xbb\xbf"

STATUS = "michael/project/project_synapse_status.md"
RELPATHS = {
    "unknown_keys": STATUS,
    "crlf": STATUS,
    "bom": STATUS,
    "no_front_matter": "michael/note/reading-list.md",
    "block_tags": "michael/skill/postgres_backup.md",
    "block_tags_indented": "michael/skill/docker_compose_deploy.md",
}


def verify_and_tag(m: Memory) -> Memory:
    return dataclasses.replace(m, tags=m.tags + ("v1.6.0",), updated_at=NOW, verified=True)


def new_content(m: Memory) -> Memory:
    return dataclasses.replace(m, content="Synapse v1.6.0 deployed on vps1.\n\nDocs are done.", updated_at=NOW)


def raise_priority(m: Memory) -> Memory:
    return dataclasses.replace(m, priority=Priority.HIGH, updated_at=NOW)


def tag(m: Memory) -> Memory:
    return dataclasses.replace(m, tags=("books", "reading"), updated_at=NOW, id_derived=False)


#: change name -> (how the memory changes, the front-matter keys it rewrites)
CHANGES: dict[str, tuple[Callable[[Memory], Memory], set[str]]] = {
    "verify": (verify_and_tag, {"tags", "verified", "updated_at"}),
    "content": (new_content, {"updated_at"}),
    "priority": (raise_priority, {"priority", "updated_at"}),
    "tag": (tag, {"tags", "updated_at"}),
}

#: (input name, change name): each has `tests/golden/<name>.<change>.out.md`.
GOLDEN_CASES = [
    ("unknown_keys", "verify"),
    ("unknown_keys", "content"),
    ("crlf", "verify"),
    ("crlf", "content"),
    ("bom", "verify"),
    ("bom", "content"),
    ("no_front_matter", "tag"),
    ("no_front_matter", "content"),
    ("block_tags", "priority"),
    ("block_tags", "content"),
    ("block_tags_indented", "priority"),
]
FRONT_MATTER_INPUTS = ["unknown_keys", "crlf", "bom", "block_tags", "block_tags_indented"]


def golden_input(name: str) -> bytes:
    return (GOLDEN / f"{name}.md").read_bytes()


def golden_output(name: str, change: str) -> bytes:
    return (GOLDEN / f"{name}.{change}.out.md").read_bytes()


def parse_golden(name: str) -> Memory:
    return fileformat.parse(golden_input(name), RELPATHS[name], MTIME)


def apply(name: str, change: str) -> tuple[Memory, Memory, bytes]:
    """Parse a golden input, change it, rewrite it: (old, new, new bytes)."""
    old = parse_golden(name)
    new = CHANGES[change][0](old)
    return old, new, fileformat.rewrite(golden_input(name), RELPATHS[name], old, new)


def split_file(data: bytes) -> tuple[list[bytes], bytes]:
    """(front-matter lines with their endings, everything from the closing fence on)."""
    lines = data.removeprefix(BOM).splitlines(keepends=True)
    assert lines[0].rstrip() == b"---"
    closing = next(i for i in range(1, len(lines)) if lines[i].rstrip() == b"---")
    return lines[1:closing], b"".join(lines[closing:])


def without_keys(lines: list[bytes], keys: set[str]) -> list[bytes]:
    """Front-matter lines minus the lines of `keys` (a key's line and its indented continuation)."""
    kept, skipping = [], False
    for line in lines:
        top = re.match(rb"([A-Za-z_][\w-]*)\s*:", line)
        if top:
            skipping = top.group(1).decode() in keys
        elif not line[:1].isspace() and not line.startswith(b"-"):
            skipping = False
        if not skipping:
            kept.append(line)
    return kept


# --- golden rewrites ------------------------------------------------------------


@pytest.mark.parametrize(("name", "change"), GOLDEN_CASES)
def test_rewrite_matches_golden_output_byte_for_byte(name: str, change: str) -> None:
    _, _, out = apply(name, change)
    assert out == golden_output(name, change)


@pytest.mark.parametrize(("name", "change"), [c for c in GOLDEN_CASES if c[0] != "no_front_matter"])
def test_rewrite_leaves_untouched_front_matter_lines_byte_identical(name: str, change: str) -> None:
    _, _, out = apply(name, change)
    before, _ = split_file(golden_input(name))
    after, _ = split_file(out)
    touched = CHANGES[change][1]
    assert without_keys(after, touched) == without_keys(before, touched)


@pytest.mark.parametrize(
    ("name", "change"), [c for c in GOLDEN_CASES if c[1] != "content" and c[0] != "no_front_matter"]
)
def test_rewrite_without_content_change_keeps_the_body_bytes(name: str, change: str) -> None:
    _, _, out = apply(name, change)
    assert split_file(out)[1] == split_file(golden_input(name))[1]


@pytest.mark.parametrize(("name", "change"), GOLDEN_CASES)
def test_rewrite_output_parses_back_to_the_new_memory(name: str, change: str) -> None:
    _, new, out = apply(name, change)
    expected = dataclasses.replace(new, has_front_matter=True, id_derived=False)
    assert fileformat.parse(out, RELPATHS[name], MTIME) == expected


@pytest.mark.parametrize("change", ["verify", "content"])
def test_rewrite_keeps_crlf_line_endings(change: str) -> None:
    _, _, out = apply("crlf", change)
    assert out.count(b"\n") == out.count(b"\r\n") > 20


@pytest.mark.parametrize("change", ["verify", "content"])
def test_rewrite_keeps_the_bom_once(change: str) -> None:
    _, _, out = apply("bom", change)
    assert out.startswith(BOM + b"---\n")
    assert out.count(BOM) == 1


@pytest.mark.parametrize("name", ["crlf", "bom"])
@pytest.mark.parametrize("change", ["verify", "content"])
def test_crlf_and_bom_rewrites_equal_the_plain_rewrite_but_for_those_bytes(name: str, change: str) -> None:
    _, _, plain = apply("unknown_keys", change)
    _, _, out = apply(name, change)
    assert out.removeprefix(BOM).replace(b"\r\n", b"\n") == plain


def test_rewrite_keeps_unknown_keys_and_comments_in_order() -> None:
    _, _, out = apply("unknown_keys", "verify")
    text = out.decode()
    kept = [
        "# Synapse deploy status: edited by hand and by the agent\n",
        "priority: high  # bumped after the outage\n",
        "# the keys below belong to the user's editor\n",
        'aliases:\n  - Synapse status\n  - "synapse: prod"\n',
        "links: ['[[vps1_server]]', '[[synapse_architecture]]']\n",
        "version: 1.10\n",
        'owner: "Michael Schäfer"\n',
    ]
    positions = [text.index(snippet) for snippet in kept]
    assert positions == sorted(positions)


def test_rewrite_writes_a_changed_date_as_iso_z_and_leaves_the_others_as_written() -> None:
    _, _, out = apply("unknown_keys", "verify")
    assert b"\nupdated_at: 2026-07-01T08:15:00Z\n" in out
    assert b"\ncreated_at: 2026-06-27T10:00:00Z\n" in out
    assert b"\nexpires_at: null\n" in out


def test_rewrite_of_a_hand_made_file_puts_front_matter_above_the_untouched_body() -> None:
    _, new, out = apply("no_front_matter", "tag")
    assert out.startswith(b"---\nid: " + new.id.encode() + b"\n")
    assert out.endswith(b"---\n" + golden_input("no_front_matter"))


def test_rewrite_of_a_hand_made_file_writes_the_stable_derived_id() -> None:
    old, new, out = apply("no_front_matter", "tag")
    assert old.id_derived and new.id == old.id == fileformat.derived_id(RELPATHS["no_front_matter"])
    assert fileformat.parse(out, RELPATHS["no_front_matter"], MTIME).id == old.id


@pytest.mark.parametrize("name", ["block_tags", "block_tags_indented"])
def test_rewrite_keeps_block_style_tags_when_they_do_not_change(name: str) -> None:
    _, _, out = apply(name, "priority")
    before, _ = split_file(golden_input(name))
    tag_lines = [line for line in before if line.lstrip().startswith(b"- ")]
    assert len(tag_lines) >= 2
    assert all(line in out for line in tag_lines)


def test_rewrite_appends_a_key_the_file_did_not_have_at_the_end_of_the_front_matter() -> None:
    _, _, out = apply("block_tags_indented", "priority")
    assert b"\nsee_also: postgres_backup\npriority: high\n---\n" in out


@pytest.mark.parametrize("name", FRONT_MATTER_INPUTS)
def test_rewrite_of_an_unchanged_memory_returns_the_same_bytes(name: str) -> None:
    memory = parse_golden(name)
    assert fileformat.rewrite(golden_input(name), RELPATHS[name], memory, memory) == golden_input(name)


# --- parsing the golden inputs ----------------------------------------------------


def test_parse_reads_known_fields_of_the_unknown_keys_file() -> None:
    m = parse_golden("unknown_keys")
    assert (m.id, m.mind, m.category, m.key) == (
        "mem_01jf3k8q2w7x",
        "michael",
        Category.PROJECT,
        "project_synapse_status",
    )
    assert (m.priority, m.source, m.verified, m.confidence) == (Priority.HIGH, Source.AGENT, False, 0.85)
    assert m.tags == ("synapse", "deployment", "v1.5.0")
    assert m.created_at == m.updated_at == datetime(2026, 6, 27, 10, tzinfo=UTC)
    assert m.expires_at is None
    assert (m.has_front_matter, m.id_derived) == (True, False)


def test_parse_keeps_unknown_keys_in_file_order() -> None:
    m = parse_golden("unknown_keys")
    assert [name for name, _ in m.extra] == ["aliases", "links", "version", "owner"]
    assert dict(m.extra)["aliases"] == ["Synapse status", "synapse: prod"]
    assert dict(m.extra)["owner"] == "Michael Schäfer"
    assert dict(m.extra)["version"] == 1.1  # PyYAML reads 1.10 as a float: only a splice keeps "1.10"


def test_parse_returns_the_body_stripped_with_inner_bytes_kept() -> None:
    m = parse_golden("unknown_keys")
    assert m.content.startswith("Synapse v1.5.0 deployed on vps1. CI green.\n\n## Next\n")
    assert "- write the v1.6.0 docs   \n" in m.content
    assert m.content.endswith("- keep `---` out of the YAML")


@pytest.mark.parametrize("name", ["crlf", "bom"])
def test_parse_of_crlf_or_bom_file_equals_the_plain_file(name: str) -> None:
    assert parse_golden(name) == parse_golden("unknown_keys")


def test_parse_of_a_hand_made_file_derives_id_category_key_and_dates() -> None:
    m = parse_golden("no_front_matter")
    assert m.id == fileformat.derived_id("michael/note/reading-list.md") and m.id_derived
    assert ID_PATTERN.fullmatch(m.id)
    assert (m.category, m.key, m.source, m.verified, m.confidence) == (
        Category.NOTE,
        "reading_list",
        Source.USER,
        True,
        1.0,
    )
    assert m.created_at == m.updated_at == MTIME
    assert not m.has_front_matter
    assert m.content == golden_input("no_front_matter").decode().strip()


def test_derived_id_is_stable_for_a_path_and_differs_between_paths() -> None:
    assert fileformat.derived_id("michael/note/a.md") == fileformat.derived_id("michael/note/a.md")
    assert fileformat.derived_id("michael/note/a.md") != fileformat.derived_id("michael/note/b.md")


def test_parse_reads_block_style_tags() -> None:
    assert parse_golden("block_tags").tags == ("postgresql", "backup", "ops")
    assert parse_golden("block_tags_indented").tags == ("docker", "deploy")


def test_parse_defaults_missing_fields_from_source_and_folder() -> None:
    m = fileformat.parse(b"---\nsource: agent\n---\nx\n", "michael/skill/deploy.md", MTIME)
    assert (m.category, m.key, m.priority, m.verified, m.confidence) == (
        Category.SKILL,
        "deploy",
        Priority.NORMAL,
        False,
        0.7,
    )


def test_parse_takes_note_as_category_when_the_folder_is_not_a_category() -> None:
    assert fileformat.parse(b"x\n", "michael/inbox/deep/idea.md", MTIME).category == Category.NOTE
    assert fileformat.parse(b"x\n", "michael/idea.md", MTIME).category == Category.NOTE


def test_parse_lets_front_matter_category_win_over_the_folder() -> None:
    assert fileformat.parse(b"---\ncategory: fact\n---\nx\n", "michael/skill/a.md", MTIME).category == Category.FACT


def test_parse_of_an_empty_file_is_a_memory_with_empty_content() -> None:
    m = fileformat.parse(b"", "michael/fact/empty.md", MTIME)
    assert m.content == ""
    assert (m.category, m.key, m.id_derived, m.has_front_matter) == (Category.FACT, "empty", True, False)
    assert m.created_at == m.updated_at == MTIME


@pytest.mark.parametrize("data", [b"---\nid: mem_abcd\nkey: x\n---\n", b"---\nid: mem_abcd\nkey: x\n---"])
def test_parse_of_front_matter_only_is_a_memory_with_empty_content(data: bytes) -> None:
    m = fileformat.parse(data, "michael/fact/x.md", MTIME)
    assert (m.id, m.key, m.content, m.has_front_matter) == ("mem_abcd", "x", "", True)


def test_parse_of_empty_front_matter_uses_defaults() -> None:
    m = fileformat.parse(b"---\n---\nbody\n", "michael/fact/x.md", MTIME)
    assert (m.content, m.id_derived, m.has_front_matter) == ("body", True, True)


# --- malformed files ---------------------------------------------------------------

FACT = "michael/fact/x.md"


def parse_error(data: bytes, relpath: str = FACT) -> FileParseError:
    with pytest.raises(FileParseError) as info:
        fileformat.parse(data, relpath, MTIME)
    assert info.value.path == relpath
    return info.value


def test_broken_yaml_is_reported_at_the_line_where_the_parser_stops() -> None:
    err = parse_error(b"---\nid: mem_abcd\ncategory: fact\ntags: [a, b\npriority: high\n---\nbody\n")
    assert err.line == 5
    assert err.reason.startswith("front-matter is not valid YAML")


def test_broken_yaml_indentation_is_reported_at_its_line() -> None:
    err = parse_error(b"---\nid: mem_abcd\nkey: x\n  bad: indent\n---\nbody\n")
    assert err.line == 4
    assert "not valid YAML" in err.reason


@pytest.mark.parametrize(("prefix", "shift"), [(b"", 0), (BOM, 0)])
def test_broken_yaml_line_counts_bom_and_leading_blank_lines_right(prefix: bytes, shift: int) -> None:
    assert parse_error(prefix + b"---\nid: mem_abcd\nkey: x\n  bad: indent\n---\nbody\n").line == 4 + shift


def test_broken_yaml_line_is_right_with_crlf() -> None:
    assert parse_error(b"---\r\nid: mem_abcd\r\nkey: x\r\n  bad: indent\r\n---\r\nbody\r\n").line == 4


def test_tab_indentation_in_yaml_is_reported_at_its_line() -> None:
    err = parse_error(b"---\nid: mem_abcd\n\tkey: x\n---\nbody\n")
    assert err.line == 3
    assert "tab" in err.reason


def test_tab_before_a_list_item_is_reported_at_its_line() -> None:
    assert parse_error(b"---\nid: mem_abcd\ntags:\n\t- a\n---\nbody\n").line == 4


@pytest.mark.parametrize("fm", [b"- a\n- b\n", b"just some text\n", b"42\n"])
def test_front_matter_that_is_not_a_mapping_is_refused(fm: bytes) -> None:
    err = parse_error(b"---\n" + fm + b"---\nbody\n")
    assert err.line == 2
    assert err.reason == "front-matter is not a mapping of keys to values"


def test_unknown_category_is_reported_at_the_category_line() -> None:
    err = parse_error(b"---\nid: mem_abcd\nkey: x\ncategory: recipes\n---\nbody\n")
    assert err.line == 4
    assert "category 'recipes'" in err.reason
    assert "identity, preference, fact, project, skill, mistake, context, note" in err.reason


def test_unknown_category_line_is_right_with_crlf_and_bom() -> None:
    assert parse_error(BOM + b"---\r\nid: mem_abcd\r\ncategory: recipes\r\n---\r\nbody\r\n").line == 3


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"priority: 5", ["priority 5", "low, normal, high, critical"]),
        (b'confidence: "x"', ["confidence 'x'", "0.0 to 1.0"]),
        (b"confidence: 1.5", ["confidence 1.5", "0.0 to 1.0"]),
        (b"verified: maybe", ["verified 'maybe'", "true, false"]),
        (b"tags: {a: 1}", ["tags {'a': 1}", "a list of strings"]),
        (b"key: Bad Key", ["key 'Bad Key'", "snake_case"]),
        (b"source: robot", ["source 'robot'", "user, agent"]),
        (b"created_at: yesterday", ["created_at 'yesterday'", "ISO-8601"]),
        (b"expires_at: soon", ["expires_at 'soon'", "ISO-8601"]),
    ],
)
def test_a_wrong_value_type_is_reported_at_its_line_with_the_allowed_values(line: bytes, words: list[str]) -> None:
    err = parse_error(b"---\nid: mem_abcd\n" + line + b"\n---\nbody\n")
    assert err.line == 3
    for word in words:
        assert word in err.reason


def test_a_tag_with_a_leading_dash_is_refused() -> None:
    err = parse_error(b"---\nid: mem_abcd\ntags: ['-x']\n---\nbody\n")
    assert "'-x'" in err.reason


def test_a_yaml_1_1_boolean_key_is_refused_at_its_line() -> None:
    err = parse_error(b"---\nid: mem_abcd\nkey: yes\n---\nbody\n")
    assert err.line == 3 and "invalid key True" in err.reason


def test_invalid_utf8_is_reported_at_its_line() -> None:
    err = parse_error(b"---\nid: mem_abcd\n---\nline one\nline \xff two\n")
    assert err.line == 5
    assert err.reason == "not valid UTF-8 text"


def test_latin1_text_is_refused_as_not_utf8() -> None:
    assert parse_error("Café Schäfer\n".encode("latin-1")).line == 1


def test_a_binary_file_with_nul_bytes_is_refused() -> None:
    err = parse_error(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "binary" in err.reason and "NUL" in err.reason


def test_a_file_over_the_size_limit_is_refused() -> None:
    err = parse_error(b"x" * (fileformat.MAX_FILE_BYTES + 1))
    assert "larger than 10 MB" in err.reason


def test_git_conflict_markers_are_reported_at_the_first_marker() -> None:
    data = b"---\nid: mem_abcd\n---\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> origin/main\n"
    err = parse_error(data)
    assert err.line == 4
    assert err.reason == "contains git conflict markers"


def test_git_conflict_markers_inside_front_matter_are_reported() -> None:
    data = b"---\nid: mem_abcd\n<<<<<<< HEAD\npriority: high\n=======\npriority: low\n>>>>>>> theirs\n---\nbody\n"
    assert parse_error(data).line == 3


def test_python_object_tags_in_yaml_are_refused_not_executed() -> None:
    err = parse_error(b"---\nid: !!python/object/apply:os.system ['echo pwned']\n---\nbody\n")
    assert err.line == 2 and "not valid YAML" in err.reason


def _alias_bomb(width: int, depth: int) -> bytes:
    names = string.ascii_lowercase
    lines = ["---", "a: &a [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, depth):
        lines.append(f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * width) + "]")
    return "\n".join([*lines, "---", "body", ""]).encode()


def test_a_yaml_alias_bomb_is_refused_within_a_second() -> None:
    start = time.perf_counter()
    err = parse_error(_alias_bomb(width=12, depth=10))
    assert time.perf_counter() - start < 1.0
    assert "aliases" in err.reason


def test_a_few_yaml_aliases_are_fine() -> None:
    m = fileformat.parse(b"---\nbase: &b [x, y]\nmore: *b\n---\nbody\n", FACT, MTIME)
    assert dict(m.extra) == {"base": ["x", "y"], "more": ["x", "y"]}


#: QA's file: front-matter opened, never closed; python-frontmatter reads it all as body, with default fields.
UNCLOSED = b"---\ncategory: identity\nkey: user_name\npriority: critical\ntags: [person]\n\nMichael Schaefer\n"


@pytest.mark.parametrize(
    "data",
    [
        UNCLOSED,
        UNCLOSED.replace(b"\n", b"\r\n"),
        BOM + UNCLOSED,
        BOM + UNCLOSED.replace(b"\n", b"\r\n"),
        b"---\nkey: x\n",
        b"---  \nkey: x",
        b"-----\nkey: x\n",
        b"---\n",
        b"---",
    ],
)
def test_front_matter_that_is_never_closed_is_refused_at_its_opening_line(data: bytes) -> None:
    err = parse_error(data)
    assert err.line == 1
    assert err.reason.startswith("front-matter opened by the `---` on line 1 is never closed")
    assert "add a `---` line after its last key" in err.reason
    assert "`..." not in err.reason


def test_str_of_an_unclosed_front_matter_error_says_how_to_fix_it() -> None:
    assert str(parse_error(UNCLOSED)) == (
        "michael/fact/x.md:1: front-matter opened by the `---` on line 1 is never closed: add a `---` line after "
        "its last key; if line 1 is meant as a horizontal rule, write `***` instead; fix the file by hand "
        "(memfile never changes it)."
    )


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_a_yaml_document_end_does_not_close_front_matter_and_the_error_names_its_line(newline: bytes) -> None:
    """python-frontmatter, and so memfile, closes front-matter only with `---`."""
    err = parse_error(BOM + b"---\nkey: x\ntags: [a]\n...\nbody\n".replace(b"\n", newline))
    assert err.line == 1
    assert "does not end it at the `...` on line 4: write `---` there" in err.reason


def test_a_note_that_starts_with_a_dash_rule_and_has_no_front_matter_is_refused_with_the_stars_hint() -> None:
    """The rule: a first line `---` always opens front-matter (python-frontmatter's reading); with no closing
    `---` line the file is unreadable, so a person who meant a horizontal rule is told to write `***`."""
    err = parse_error(b"---\n\nA note that starts below a horizontal rule.\n", "michael/note/rule.md")
    assert "if line 1 is meant as a horizontal rule, write `***` instead" in err.reason


@pytest.mark.parametrize("rule", [b"***", b"___", b"* * *", b"- - -"])
def test_a_note_that_starts_with_another_rule_is_all_content(rule: bytes) -> None:
    m = fileformat.parse(rule + b"\n\nA note below a rule.\n", "michael/note/rule.md", MTIME)
    assert (m.content, m.has_front_matter, m.key) == (rule.decode() + "\n\nA note below a rule.", False, "rule")


@pytest.mark.parametrize(
    "data",
    [b"\n---\nkey: x\n", b"Title\n---\nkey: x\n", b"Intro\n\n---\n\nMore after a rule.\n", b" ---\nkey: x\n"],
)
def test_a_dash_line_below_the_first_line_is_body_even_with_no_second_one(data: bytes) -> None:
    m = fileformat.parse(data, "michael/note/x.md", MTIME)
    assert (m.content, m.has_front_matter) == (data.decode().strip(), False)


def test_an_unclosed_front_matter_in_a_vault_is_skipped_named_and_never_overwritten(vault: Vault) -> None:
    """QA's case: it was read as a `fact` of normal priority whose content was the YAML lines, with no warning."""
    path = vault.root / "michael" / "fact" / "unclosed2.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(UNCLOSED)
    named = "michael/fact/unclosed2.md:1: front-matter opened by the `---` on line 1 is never closed"
    for args in (["list"], ["recall"], ["show", "unclosed2"]):
        result = in_vault(vault.root, *args)
        assert named in result.stderr and "Michael Schaefer" not in result.stdout, args
    assert fails(in_vault(vault.root, "show", "unclosed2"), 3)
    assert named in ok(in_vault(vault.root, "status")).stdout
    assert named in fails(in_vault(vault.root, "doctor", "--fix"), 5).stdout
    with pytest.raises(Conflict, match="unreadable"):
        vault.store("fact", "unclosed2", "overwritten")
    with pytest.raises(Refused, match="cannot read"):
        vault.write_raw({"michael/fact/unclosed2.md": "fixed\n"}, subject="x")
    assert path.read_bytes() == UNCLOSED
    path.write_bytes(UNCLOSED.replace(b"\n\n", b"\n---\n"))  # the fix the message asks for
    assert vault.get("identity/user_name").content == "Michael Schaefer"


def test_an_unclosed_front_matter_is_never_written(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="never closed"):
        vault.write_raw({"michael/note/n.md": "---\nkey: n\nbody\n"}, subject="x")
    assert not (vault.root / "michael" / "note" / "n.md").exists()


def test_str_of_a_parse_error_names_file_line_and_what_to_do() -> None:
    err = parse_error(b"---\nid: mem_abcd\ncategory: recipes\n---\nbody\n")
    assert str(err).startswith("michael/fact/x.md:3: invalid category 'recipes'")
    assert str(err).endswith("fix the file by hand (memfile never changes it).")


# --- serialize ----------------------------------------------------------------------


def _sample() -> Memory:
    return Memory(
        id="mem_01jf3k8q2w7x",
        mind="michael",
        category=Category.PROJECT,
        key="project_synapse_status",
        content="Synapse v1.5.0 deployed on vps1. CI green.",
        path=STATUS,
        created_at=datetime(2026, 6, 27, 10, tzinfo=UTC),
        updated_at=datetime(2026, 6, 27, 10, tzinfo=UTC),
        priority=Priority.HIGH,
        tags=("synapse", "deployment", "v1.5.0"),
        source=Source.AGENT,
        verified=False,
        confidence=0.85,
    )


def test_serialize_writes_the_spec_example_exactly() -> None:
    assert fileformat.serialize(_sample()) == (
        "---\n"
        "id: mem_01jf3k8q2w7x\n"
        "category: project\n"
        "key: project_synapse_status\n"
        "priority: high\n"
        "tags: [synapse, deployment, v1.5.0]\n"
        "source: agent\n"
        "verified: false\n"
        "confidence: 0.85\n"
        "expires_at: null\n"
        "created_at: 2026-06-27T10:00:00Z\n"
        "updated_at: 2026-06-27T10:00:00Z\n"
        "---\n"
        "Synapse v1.5.0 deployed on vps1. CI green.\n"
    )


def test_serialize_writes_unknown_keys_after_the_known_ones() -> None:
    text = fileformat.serialize(dataclasses.replace(_sample(), extra=(("aliases", ["Synapse"]), ("z", 1))))
    assert "updated_at: 2026-06-27T10:00:00Z\naliases: [Synapse]\nz: 1\n---\n" in text


def test_serialize_writes_expires_at_as_iso_z() -> None:
    text = fileformat.serialize(dataclasses.replace(_sample(), expires_at=datetime(2026, 8, 1, tzinfo=UTC)))
    assert "\nexpires_at: 2026-08-01T00:00:00Z\n" in text


def test_serialize_writes_empty_tags_as_an_empty_list() -> None:
    assert "\ntags: []\n" in fileformat.serialize(dataclasses.replace(_sample(), tags=()))


@pytest.mark.parametrize("value", ["true", "null", "123", "1.10", "2026-06-27", "0x1f", "017"])
def test_serialize_quotes_tags_that_yaml_would_read_as_another_type(value: str) -> None:
    m = dataclasses.replace(_sample(), tags=(value,))
    assert fileformat.parse(fileformat.serialize(m).encode(), STATUS, MTIME).tags == (value,)


# --- update: small cases ------------------------------------------------------------


def _update(text: str, **changes: object) -> str:
    old = fileformat.parse(text.encode(), FACT, MTIME)
    return fileformat.update(text, old, dataclasses.replace(old, **changes))


def test_update_keeps_comment_lines_between_a_changed_key_and_the_next() -> None:
    text = "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\ntags: [a]\nnotes: |\n  line one\n  line two\n\n# mine\nupdated_at: 2026-06-27T10:00:00Z\n---\nbody\n"
    assert _update(text, tags=("a", "b"), updated_at=NOW) == text.replace("[a]", "[a, b]").replace(
        "2026-06-27T10:00:00Z", "2026-07-01T08:15:00Z"
    )


def test_update_adds_a_missing_key_at_the_end_of_the_front_matter() -> None:
    text = "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\nkey: x\n---\nbody\n"
    assert (
        _update(text, priority=Priority.CRITICAL)
        == "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\nkey: x\npriority: critical\n---\nbody\n"
    )


def test_update_sets_and_clears_expires_at() -> None:
    text = "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\nexpires_at: null\n---\nbody\n"
    later = _update(text, expires_at=NOW)
    assert later == "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\nexpires_at: 2026-07-01T08:15:00Z\n---\nbody\n"
    old = fileformat.parse(later.encode(), FACT, MTIME)
    assert fileformat.update(later, old, dataclasses.replace(old, expires_at=None)) == text


def test_update_writes_an_id_when_a_derived_one_becomes_real() -> None:
    text = "---\nkey: x\ncreated_at: 2026-01-01T00:00:00Z\n---\nbody\n"
    assert _update(text, id="mem_new12345", id_derived=False) == (
        "---\nkey: x\ncreated_at: 2026-01-01T00:00:00Z\nid: mem_new12345\n---\nbody\n"
    )


def test_a_rewrite_persists_the_derived_id_and_creation_time_so_they_stay_stable() -> None:
    old = fileformat.parse(b"---\nkey: x\n---\nbody\n", FACT, MTIME)
    out = fileformat.update("---\nkey: x\n---\nbody\n", old, dataclasses.replace(old, tags=("t",)))
    assert out == f"---\nkey: x\nid: {old.id}\ncreated_at: {format_datetime(MTIME)}\ntags: [t]\n---\nbody\n"
    later = fileformat.parse(out.encode(), FACT, MTIME.replace(year=2027))
    assert (later.id, later.created_at) == (old.id, old.created_at)


def test_update_of_flow_style_front_matter_stays_valid() -> None:
    out = _update("---\n{id: mem_abcd, tags: [a]}\n---\nbody\n", tags=("a", "b"))
    assert fileformat.parse(out.encode(), FACT, MTIME).tags == ("a", "b")


def test_update_of_content_without_a_final_newline_after_the_fence() -> None:
    assert (
        _update("---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\n---", content="new body")
        == "---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\n---\nnew body\n"
    )


def test_blank_lines_before_a_fence_make_it_content() -> None:
    """Front-matter opens only on the first line (issue 21): what follows blank lines is the body, kept whole."""
    text = "\n\n---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\n---\nbody\n"
    updated = _update(text, tags=("x",))
    assert updated.startswith("---\nid: mem_") and "tags: [x]" in updated
    assert updated.endswith("---\n" + text)


# --- properties ---------------------------------------------------------------------


def _normal_tag(tag: str) -> bool:
    """True when parse_tags keeps this tag exactly as it is."""
    return tag == " ".join(tag.split()).lower() and not tag.startswith("-") and "," not in tag


TAG_ALPHABET = st.characters(categories=["Ll", "Lo", "Nd"]) | st.sampled_from(list("._+#:/ -?!&*|>%@`'\"[]{}"))
YAML11_WORDS = st.sampled_from(
    ["yes", "no", "on", "off", "y", "n", "16:9", "10:30", ":)", "?help", "a:?", "null", "~", "1e3", "0x1f"]
)
tags_strategy = st.lists(
    (st.text(TAG_ALPHABET, min_size=1, max_size=20) | YAML11_WORDS).filter(_normal_tag),
    max_size=6,
    unique=True,
).map(tuple)

moments = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 12, 31)).map(
    lambda d: d.replace(microsecond=0, tzinfo=UTC)
)


def _clean_content(text: str) -> str:
    return text.replace("\r", "").replace("\x00", "").strip()


def _valid_content(text: str) -> bool:
    if not text or text.splitlines()[0].strip() == "---":
        return False
    return not re.search(r"^(<{7}|>{7})( |$)|^={7}$", text, re.MULTILINE)


contents = (
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=300)
    .map(_clean_content)
    .filter(_valid_content)
)
keys = st.from_regex(KEY_PATTERN, fullmatch=True) | st.sampled_from(
    ["on", "off", "yes", "no", "null", "1e3", "0x1f", "1_000"]
)


extra_values = (
    st.integers(-(10**6), 10**6)
    | st.text(st.characters(categories=["Ll", "Lu", "Nd"]) | st.sampled_from(list(" .-_/")), max_size=20).map(str.strip)
    | st.lists(st.integers(0, 99), max_size=3)
)
extras = st.dictionaries(
    st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(lambda k: k not in KNOWN_FIELDS),
    extra_values,
    max_size=3,
).map(lambda d: tuple(d.items()))


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    mind = draw(st.from_regex(MIND_PATTERN, fullmatch=True))
    category = draw(st.sampled_from(Category))
    key = draw(keys)
    created = draw(moments)
    return Memory(
        id=draw(st.from_regex(ID_PATTERN, fullmatch=True)),
        mind=mind,
        category=category,
        key=key,
        content=draw(contents),
        path=f"{mind}/{category}/{key}.md",
        created_at=created,
        updated_at=draw(moments.filter(lambda d: d >= created)),
        priority=draw(st.sampled_from(Priority)),
        tags=draw(tags_strategy),
        source=draw(st.sampled_from(Source)),
        verified=draw(st.booleans()),
        confidence=draw(st.floats(min_value=0.0, max_value=1.0)),
        expires_at=draw(st.none() | moments),
        extra=draw(extras),
    )


@st.composite
def changed(draw: st.DrawFn, memory: Memory) -> Memory:
    """`memory` with some of the fields a store, verify or edit may change."""
    fields = {
        "content": contents,
        "priority": st.sampled_from(Priority),
        "tags": tags_strategy,
        "source": st.sampled_from(Source),
        "verified": st.booleans(),
        "confidence": st.floats(min_value=0.0, max_value=1.0),
        "expires_at": st.none() | moments,
        "updated_at": moments,
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, unique=True))
    return dataclasses.replace(memory, **{name: draw(fields[name]) for name in chosen})


_settings = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@_settings
@given(memories())
def test_parse_of_serialize_gives_the_memory_back(memory: Memory) -> None:
    data = fileformat.serialize(memory).encode("utf-8")
    assert fileformat.parse(data, memory.path, MTIME) == memory


@_settings
@given(memories())
def test_update_of_an_unchanged_memory_returns_the_same_text(memory: Memory) -> None:
    text = fileformat.serialize(memory)
    assert fileformat.update(text, memory, memory) == text


@_settings
@given(st.data())
def test_update_with_a_change_then_parse_gives_the_changed_memory(data: st.DataObject) -> None:
    memory = data.draw(memories())
    new = data.draw(changed(memory))
    text = fileformat.serialize(memory)
    out = fileformat.update(text, memory, new)
    assert fileformat.parse(out.encode("utf-8"), memory.path, MTIME) == new


@_settings
@given(st.data(), st.sampled_from(["unknown_keys", "crlf", "bom", "block_tags"]))
def test_update_of_a_hand_edited_file_keeps_its_extras_and_line_endings(data: st.DataObject, name: str) -> None:
    raw = golden_input(name)
    old = parse_golden(name)
    new = data.draw(changed(old))
    out = fileformat.rewrite(raw, RELPATHS[name], old, new)
    assert fileformat.parse(out, RELPATHS[name], MTIME) == new
    assert out.startswith(BOM) == raw.startswith(BOM)
    if b"\r\n" in raw:
        assert out.count(b"\n") == out.count(b"\r\n")
    touched = {"priority", "tags", "source", "verified", "confidence", "expires_at", "updated_at"}
    assert without_keys(split_file(out)[0], touched) == without_keys(split_file(raw)[0], touched)


# --- regressions found by review ------------------------------------------------


def _memory_with(**fields: object) -> Memory:
    base = fileformat.parse(b"---\nid: mem_abcd\n---\nbody\n", "michael/fact/x.md", MTIME)
    return dataclasses.replace(base, **fields)


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "null", "1e3"])
def test_keys_that_yaml_1_1_reads_as_other_types_round_trip(word: str) -> None:
    memory = _memory_with(key=word, tags=(word,))
    assert fileformat.parse(fileformat.serialize(memory).encode(), memory.path, MTIME) == memory


@pytest.mark.parametrize("tag", ["yes", "16:9", "1:30:00", ":)", ":0", "a:?", "?help", "[x]", "#hash", "a, b"])
def test_tricky_tags_round_trip_in_flow_and_block_lists(tag: str) -> None:
    tag = tag.replace(",", "")
    flow = _memory_with(tags=("plain", tag))
    assert fileformat.parse(fileformat.serialize(flow).encode(), flow.path, MTIME) == flow
    block = b"---\nid: mem_abcd\ntags:\n- plain\n---\nbody\n"
    old = fileformat.parse(block, "michael/fact/x.md", MTIME)
    new = dataclasses.replace(old, tags=("plain", tag))
    assert fileformat.parse(fileformat.rewrite(block, old.path, old, new), old.path, MTIME) == new


def test_changed_block_style_tags_stay_block_style_with_their_indent() -> None:
    for indent in ("", "    "):
        raw = f"---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\ntags:\n{indent}- docker\n{indent}- deploy\nkey: x\n---\nbody\n".encode()
        old = fileformat.parse(raw, "michael/fact/x.md", MTIME)
        out = fileformat.rewrite(raw, old.path, old, dataclasses.replace(old, tags=("docker", "deploy", "v1.6.0")))
        assert out == raw.replace(b"deploy\n", f"deploy\n{indent}- v1.6.0\n".encode())


def test_a_comment_at_the_end_of_a_changed_line_is_kept() -> None:
    raw = b"---\nid: mem_abcd\ncreated_at: 2026-01-01T00:00:00Z\nsource: agent\nverified: false  # agent wrote this\n# note\n---\nbody\n"
    old = fileformat.parse(raw, "michael/fact/x.md", MTIME)
    out = fileformat.rewrite(raw, old.path, old, dataclasses.replace(old, verified=True))
    assert out == raw.replace(b"verified: false", b"verified: true")


def test_the_classic_billion_laughs_is_refused_fast() -> None:
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    raw = ("---\n" + "\n".join(levels) + "\n---\nbody\n").encode()
    with pytest.raises(FileParseError) as caught:
        fileformat.parse(raw, "michael/fact/bomb.md", MTIME)
    assert "aliases" in caught.value.reason


def test_a_duplicate_front_matter_key_is_refused_at_its_line() -> None:
    with pytest.raises(FileParseError) as caught:
        fileformat.parse(b"---\nid: mem_abcd\nkey: a\nkey: b\n---\nbody\n", "michael/fact/x.md", MTIME)
    assert caught.value.line == 4 and "twice" in caught.value.reason


def test_a_bad_tag_is_reported_at_the_tags_line() -> None:
    with pytest.raises(FileParseError) as caught:
        fileformat.parse(b"---\nid: mem_abcd\ntags: ['-x']\n---\nbody\n", "michael/fact/x.md", MTIME)
    assert caught.value.line == 3


def test_update_of_an_unchanged_hand_made_file_returns_the_same_text() -> None:
    memory = fileformat.parse(b"# Title\ntext\n", "michael/note/t.md", MTIME)
    assert fileformat.update("# Title\ntext\n", memory, memory) == "# Title\ntext\n"


def test_a_setext_heading_underline_is_not_a_conflict_marker() -> None:
    memory = fileformat.parse(b"Summary\n=======\ntext\n", "michael/note/t.md", MTIME)
    assert memory.content.startswith("Summary\n=======")


def test_years_before_1000_are_written_with_four_digits() -> None:
    from memfile.model import format_datetime

    assert format_datetime(datetime(999, 1, 1, tzinfo=timezone.utc)) == "0999-01-01T00:00:00Z"


def test_the_fence_is_the_one_python_frontmatter_splits_on() -> None:
    from frontmatter.default_handlers import YAMLHandler

    assert fileformat._FENCE.pattern == YAMLHandler.FM_BOUNDARY.pattern
    assert fileformat._FENCE.flags == YAMLHandler.FM_BOUNDARY.flags


def test_a_timestamp_in_memfiles_form_reads_as_pyyaml_reads_it() -> None:
    """The loader reads `YYYY-MM-DDTHH:MM:SSZ` with datetime.fromisoformat: the same value (and time zone), or
    the same error, as PyYAML's own constructor; any other timestamp goes PyYAML's way."""
    import random

    import yaml

    r = random.Random(4)
    texts = [
        f"{r.randint(0, 9999):04d}-{r.randint(0, 13):02d}-{r.randint(0, 32):02d}T"
        f"{r.randint(0, 25):02d}:{r.randint(0, 61):02d}:{r.randint(0, 61):02d}Z"
        for _ in range(3000)
    ]
    texts += [
        "2025-10-26",
        "2025-1-5T1:02:03.Z",
        "2025-10-26 23:32:59.5 +05:30",
        "2025-10-26t23:32:59z",
        "2025-10-26T23:32:59.123456Z",
        "2025-10-26T23:32:59+02:00",
        "2024-02-29T00:00:00Z",
        "2023-02-29T00:00:00Z",
    ]

    def outcome(load: Callable[[str], object], text: str) -> object:
        try:
            value = load(f"t: {text}")["t"]  # type: ignore[index]
        except (ValueError, yaml.YAMLError) as exc:
            return type(exc)
        return type(value), value, getattr(value, "tzinfo", None)

    for text in texts:
        assert outcome(fileformat._safe_load, text) == outcome(
            lambda fm: yaml.load(fm, Loader=yaml.SafeLoader), text
        ), text
    assert sum(isinstance(outcome(fileformat._safe_load, t), tuple) for t in texts) > 300  # valid ones too


# ==============================================================================================================
# Reading memory files and memfile.toml, and choosing the vault, on hostile input (issues 20 and 21).
#
# A folder becomes a vault only through `memfile init`; front-matter exists only
# at the start of a file; a key is never given twice; a YAML alias never makes a
# command fail or eat memory; memfile.toml is written as valid TOML whatever the
# names, and every bad memfile.toml is "invalid memfile.toml: ..." naming the key.
# ==============================================================================================================


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A vault with mind `alice` and one stored memory, `fact/good`."""
    target = tmp_path / "vault"
    ok(run("init", target, "--mind", "alice"))
    ok(in_vault(target, "store", "fact", "good", "a good memory about gardening"))
    return target


def entries(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with the bytes of each file (None for a folder)."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


# --- issue 20.2: a folder becomes a vault only through `memfile init` -------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home folder that is not a vault: secrets and papers, a few folders that look like minds."""
    folder = tmp_path / "home"
    write(folder / ".ssh" / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    write(folder / "taxes.pdf", "%PDF-1.4 numbers")
    write(folder / "projects" / "plan.md", "# plan\n")
    (folder / "boot").mkdir()
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ("--mind", "projects", "store", "fact", "x", "typo"),
        ("list",),
        ("--mind", "projects", "recall"),
        ("--mind", "projects", "search", "plan"),
        ("--mind", "projects", "doctor", "--fix"),
    ],
)
def test_a_vault_option_at_a_folder_without_memfile_toml_is_refused_and_the_folder_left_alone(
    home: Path, command: tuple[str, ...]
) -> None:
    before = entries(home)
    result = fails(run("--vault", home, *command), 7)
    assert "memfile init" in result.stderr and str(home) in result.stderr
    assert "boot" not in result.stdout and "projects" not in result.stdout
    assert entries(home) == before  # no .git, no .memfile, nothing written
    assert not (home / ".git").exists() and not (home / ".memfile").exists()


def test_memfile_vault_at_a_folder_without_memfile_toml_is_refused_too(home: Path) -> None:
    before = entries(home)
    result = fails(run("--mind", "projects", "store", "fact", "x", "typo", env={"MEMFILE_VAULT": str(home)}), 7)
    assert "memfile init" in result.stderr
    assert entries(home) == before


def test_vault_open_of_a_folder_without_memfile_toml_raises_not_a_vault(home: Path, monkeypatch) -> None:
    before = entries(home)
    with pytest.raises(NotAVault, match="memfile init"):
        Vault.open(home, "projects")
    monkeypatch.setenv("MEMFILE_VAULT", str(home))
    with pytest.raises(NotAVault):
        Vault.open(mind="projects")
    assert entries(home) == before


def test_init_makes_the_folder_a_vault_and_always_writes_memfile_toml(tmp_path: Path) -> None:
    empty, existing = tmp_path / "empty", tmp_path / "existing"
    write(existing / "readme.txt", "already here\n")
    for folder in (empty, existing):
        ok(run("init", folder, "--mind", "alice"))
        assert (folder / "memfile.toml").is_file()
        assert tomllib.loads((folder / "memfile.toml").read_text(encoding="utf-8"))["default_mind"] == "alice"
        ok(in_vault(folder, "store", "fact", "k", "works now"))
        assert find_vault(folder) == folder.resolve()


# --- issue 21.2: front-matter only at the start of a file -----------------------------------------------

TRIP = "# Trip notes\nWe fly on Monday.\n\n---\n\nHotel: Grand Budapest\n\n---\n\nReturn on Friday.\n"
PLAIN = "Plain note\n---\nstatus: superseded\nexpires_at: 2000-01-01\n---\nlast line\n"


def test_a_markdown_file_with_two_horizontal_rules_is_all_content(root: Path) -> None:
    write(root / "alice" / "note" / "trip.md", TRIP)
    hits = json.loads(ok(in_vault(root, "search", "monday", "--json")).stdout)
    assert [hit["key"] for hit in hits] == ["trip"]
    shown = json.loads(ok(in_vault(root, "show", "note/trip", "--json")).stdout)
    assert shown["content"] == TRIP.strip() and shown["extra"] == {} and shown["has_front_matter"] is False
    assert "Hotel: Grand Budapest" in ok(in_vault(root, "recall")).stdout


def test_rules_after_a_first_line_are_not_front_matter_that_hides_a_memory(root: Path) -> None:
    write(root / "alice" / "note" / "plain.md", PLAIN)
    listed = json.loads(ok(in_vault(root, "list", "--json")).stdout)
    plain = next(m for m in listed if m["key"] == "plain")
    assert plain["status"] == "active" and plain["expires_at"] is None and plain["content"] == PLAIN.strip()
    recalled = ok(in_vault(root, "recall")).stdout
    assert "Plain note" in recalled and "last line" in recalled
    assert "plain" in ok(in_vault(root, "search", "plain", "--json")).stdout


@pytest.mark.parametrize("prefix", ["\n", " ", "text\n", "\t\n"])
def test_a_fence_that_is_not_the_first_line_opens_no_front_matter(prefix: str) -> None:
    data = (prefix + "---\npriority: critical\nverified: false\n---\nbody\n").encode()
    memory = fileformat.parse(data, FACT, MTIME)
    assert memory.priority == "normal" and memory.has_front_matter is False
    assert memory.content == data.decode().strip()


def test_a_fence_after_a_bom_opens_front_matter() -> None:
    memory = fileformat.parse(b"\xef\xbb\xbf---\npriority: high\n---\nbody\n", FACT, MTIME)
    assert memory.priority == "high" and memory.content == "body" and memory.has_front_matter


def test_a_store_over_a_file_without_front_matter_keeps_its_rules(root: Path) -> None:
    write(root / "alice" / "note" / "trip.md", TRIP)
    ok(in_vault(root, "store", "note", "trip", TRIP.replace("Friday", "Saturday")))
    shown = json.loads(ok(in_vault(root, "show", "note/trip", "--json")).stdout)
    assert "Hotel: Grand Budapest" in shown["content"] and "Saturday" in shown["content"]


# --- issue 21.5: a key given twice, in any spelling, is refused -----------------------------------------

DUPLICATES = {
    "double quotes": 'priority: low\n"priority": critical\n',
    "single quotes": "verified: false\n'verified': true\n",
    "explicit key": "priority: low\n? priority\n: critical\n",
    "escaped": 'priority: low\n"pri\\x6frity": critical\n',
    "unicode escape": 'priority: low\n"pri\\u006frity": critical\n',
    "flow mapping": '{id: mem_abcd, priority: low, "priority": critical}\n',
    "tag": "priority: low\n!!str priority: critical\n",
    "plain": "priority: low\npriority: critical\n",
}


@pytest.mark.parametrize("front", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_a_front_matter_key_given_twice_is_refused_whatever_its_spelling(front: str) -> None:
    err = parse_error(f"---\n{front}---\nbody\n".encode())
    assert "twice" in err.reason and err.line is not None and err.line >= 2


def test_equal_keys_of_other_types_are_refused_too() -> None:
    assert "twice" in parse_error(b"---\n1: a\n1.0: b\n---\nbody\n").reason


def test_a_merge_key_overridden_by_its_mapping_is_no_duplicate() -> None:
    data = b"---\nbase: &b {x: 1, y: 2}\nmore:\n  <<: *b\n  x: 3\n---\nbody\n"
    assert dict(fileformat.parse(data, FACT, MTIME).extra)["more"] == {"x": 3, "y": 2}


def test_a_quoted_duplicate_never_raises_a_memory_through_the_cli(root: Path) -> None:
    write(root / "alice" / "fact" / "pin.md", 'priority: low\n"priority": critical\n'.join(["---\n", "---\npinned\n"]))
    write(
        root / "alice" / "fact" / "trusted.md", "---\nsource: agent\nverified: false\n'verified': true\n---\ntrusted\n"
    )
    listed = json.loads(ok(in_vault(root, "list", "--json")).stdout)
    assert [m["key"] for m in listed] == ["good"]
    assert "pinned" not in ok(in_vault(root, "recall")).stdout
    doctor = fails(in_vault(root, "doctor"), 5).stdout
    assert "alice/fact/pin.md" in doctor and "alice/fact/trusted.md" in doctor and "twice" in doctor


# --- issue 21.11: recursive and exploding YAML aliases ---------------------------------------------------

RECURSIVE = {
    "list": "x: &x [*x]\n",
    "mapping": "m: &m {self: *m}\n",
    "deeper": "a: &a\n  b:\n    c: [1, *a]\n",
    "block list": "x: &x\n  - *x\n",
    "merge": "m: &m\n  <<: *m\n",
}


@pytest.mark.parametrize("front", RECURSIVE.values(), ids=RECURSIVE.keys())
def test_a_recursive_yaml_alias_is_a_parse_error_not_a_recursion_error(front: str) -> None:
    err = parse_error(f"---\nid: mem_abcd\n{front}---\nbody\n".encode())
    assert "alias" in err.reason


def test_a_file_with_a_recursive_alias_is_skipped_and_every_command_works(root: Path) -> None:
    write(root / "alice" / "fact" / "loop.md", "---\nx: &x [*x]\n---\nbody\n")
    write(root / "alice" / "fact" / "self.md", "---\nm: &m {self: *m}\n---\nbody\n")
    for command in (
        ("list",),
        ("recall",),
        ("recall", "--query", "gardening"),
        ("search", "gardening"),
        ("show", "fact/good"),
        ("status",),
        ("tags",),
    ):
        result = ok(in_vault(root, *command))
        assert "good" in result.stdout or "gardening" in result.stdout or command in (("status",), ("tags",)), command
        assert "Recursion" not in result.stderr and "unexpected" not in result.stderr, command
    doctor = fails(in_vault(root, "doctor"), 5).stdout
    assert "alice/fact/loop.md" in doctor and "alice/fact/self.md" in doctor
    ok(in_vault(root, "store", "fact", "more", "another memory"))
    vault = Vault.open(root, "alice")
    assert {m.key for m in vault.memories()} == {"good", "more"}
    assert {i.path for i in vault.issues} == {"alice/fact/loop.md", "alice/fact/self.md"}
    assert all("alias" in i.reason for i in vault.issues)


def test_a_recursive_alias_through_mcp_is_skipped(root: Path) -> None:
    mcp = pytest.importorskip("helpers.mcp")
    write(root / "alice" / "fact" / "loop.md", "---\nx: &x [*x]\n---\nbody\n")

    async def script(agent) -> dict:
        return {
            "recall": await agent.ok("recall"),
            "list": await agent.ok("list"),
            "search": await agent.ok("search", query="gardening"),
        }

    out = mcp.serve(root, script)
    assert "gardening" in out["recall"] and [m["key"] for m in out["list"]] == ["good"] and out["search"]


def _laughs(width: int, depth: int, leaf: str = '"lol"') -> bytes:
    names = string.ascii_lowercase
    lines = ["---", "a: &a [" + ", ".join([leaf] * width) + "]"]
    for i in range(1, depth):
        lines.append(f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * width) + "]")
    return "\n".join([*lines, "---", "body", ""]).encode()


@pytest.mark.parametrize(
    "data",
    [
        _laughs(10, 10),  # a billion values
        _laughs(2, 25),  # 33 million values, a few bytes each
        b"---\na: &a "
        + b'"'
        + b"x" * 1_000_000
        + b'"\nb: ['
        + b", ".join([b"*a"] * 100)
        + b"]\n---\nbody\n",  # 100 MB of text
        b"---\nb: &b {k: "
        + b"v" * 100_000
        + b"}\nc: {"
        + b", ".join(b"k%d: *b" % i for i in range(500))
        + b"}\n---\nx\n",
    ],
    ids=["billion laughs", "deep laughs", "long string", "mapping"],
)
def test_an_alias_expansion_bomb_is_refused_fast(data: bytes) -> None:
    start = time.perf_counter()
    err = parse_error(data)
    assert time.perf_counter() - start < 2.0
    assert "alias" in err.reason


def test_deep_nesting_is_a_parse_error() -> None:
    for data in (
        b"---\nx: " + b"[" * 100_000 + b"]" * 100_000 + b"\n---\nbody\n",
        ("---\n" + "".join(" " * i + "a:\n" for i in range(2000)) + "---\nbody\n").encode(),
        b"---\nx: " + b"[" * 200 + b"]" * 200 + b"\n---\nbody\n",
    ):
        assert parse_error(data).reason


# --- issue 21.14: memfile.toml is valid TOML whatever the names ---------------------------------------------


def test_init_with_a_control_character_in_the_name_writes_valid_toml(tmp_path: Path) -> None:
    target = tmp_path / "v"
    ok(run("init", target, "--mind", "alice"))
    ok(run("init", target, "--mind", "carol", "--name", "evil\x7fname"))
    ok(run("init", target, "--mind", "dave", "--name", 'quote " back \\ tab\t nl\n bell\x07 c1\x85 ls\u2028'))
    tomllib.loads((target / "memfile.toml").read_text(encoding="utf-8"))
    assert ok(in_vault(target, "--mind", "alice", "list")).exit_code == 0
    assert Vault.open(target, "carol").name == "evil\x7fname"
    assert Vault.open(target, "dave").name == 'quote " back \\ tab\t nl\n bell\x07 c1\x85 ls\u2028'.strip()
    fresh = tmp_path / "w"
    ok(run("init", fresh, "--mind", "carol", "--name", "evil\x7fname\x00\x1b[31m"))
    assert Vault.open(fresh).name == "evil\x7fname\x00\x1b[31m"


def test_a_name_that_is_not_unicode_text_is_refused() -> None:
    with pytest.raises(InvalidInput, match="name"):
        render_config("carol", "bad \udcff bytes")
    with pytest.raises(InvalidInput, match="name"):
        mind_section("carol", "\ud800")


def test_a_mind_declared_before_its_folder_gets_no_second_table() -> None:
    from memfile.config import config_with_mind
    from memfile.errors import Conflict

    text = render_config("alice", None) + '\n[minds.carol]\nname = "Carol"\n'
    with pytest.raises(Conflict, match="already declares"):
        config_with_mind(text, "carol", "Caroline")
    assert config_with_mind(text, "carol", None) == text
    added = config_with_mind(text.rstrip("\n"), "dave", "evil\x7f")
    assert tomllib.loads(added)["minds"]["dave"]["name"] == "evil\x7f"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_every_name_round_trips_through_memfile_toml(tmp_path: Path, name: str) -> None:
    for text in (render_config("carol", name), render_config("alice", None) + mind_section("carol", name)):
        data = tomllib.loads(text)
        assert data["minds"]["carol"].get("name", "") == (name if name else "")
        (tmp_path / "memfile.toml").write_text(text, encoding="utf-8")
        assert load_config(tmp_path).display_name("carol") == (name.strip() or "carol")


@pytest.mark.parametrize("category", ["Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs", "Mn", "Lo", "So"])
def test_each_code_point_class_round_trips(category: str) -> None:
    import unicodedata

    chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == category and not 0xD800 <= c <= 0xDFFF][
        :3000
    ]
    name = "x" + "".join(chars) + "x"
    assert tomllib.loads(render_config("carol", name))["minds"]["carol"]["name"] == name


# --- issue 21.15: every bad memfile.toml is "invalid memfile.toml: ..." ----------------------------------

BAD_SETTINGS = {
    "lock nan": ("lock_timeout = nan\n", "lock_timeout"),
    "lock inf": ("lock_timeout = inf\n", "lock_timeout"),
    "lock negative": ("lock_timeout = -1\n", "lock_timeout"),
    "lock zero": ("lock_timeout = 0\n", "lock_timeout"),
    "lock huge int": ("lock_timeout = " + "9" * 400 + "\n", "lock_timeout"),
    "lock text": ('lock_timeout = "10"\n', "lock_timeout"),
    "half-life negative": ("[recall]\nhalf_life_days = -1\n", "half_life_days"),
    "half-life zero": ("[recall]\nhalf_life_days = 0\n", "half_life_days"),
    "half-life huge int": ("[recall]\nhalf_life_days = " + "9" * 400 + "\n", "half_life_days"),
    "half-life inf": ("[recall]\nhalf_life_days = inf\n", "half_life_days"),
    "half-life nan": ("[recall]\nhalf_life_days = nan\n", "half_life_days"),
    "budget negative": ("[recall]\nbudget = -5\n", "budget"),
    "budget float": ("[recall]\nbudget = 2.5\n", "budget"),
    "interval nan": ("[sync]\ninterval = nan\n", "interval"),
    "interval inf": ("[sync]\ninterval = inf\n", "interval"),
    "interval huge int": ("[sync]\ninterval = " + "9" * 400 + "\n", "interval"),
    "interval short": ("[sync]\ninterval = 5\n", "interval"),
    "remote option": ('[sync]\nremote = "--upload-pack=touch PWNED; git-upload-pack"\n', "remote"),
    "remote dash": ('[sync]\nremote = "-x"\n', "remote"),
    "remote control": ('[sync]\nremote = "origin\\u0000x"\n', "remote"),
    "remote newline": ('[sync]\nremote = "origin\\nx"\n', "remote"),
    "remote empty": ('[sync]\nremote = ""\n', "remote"),
    "remote number": ("[sync]\nremote = 5\n", "remote"),
    "autosync text": ('[sync]\nautosync = "yes"\n', "autosync"),
    "sync not a table": ("sync = 5\n", "sync"),
    "recall not a table": ('recall = "fast"\n', "recall"),
    "mcp budget negative": ("[mcp]\nrecall_budget = -1\n", "recall_budget"),
    "mcp budget text": ('[mcp]\nrecall_budget = "none"\n', "recall_budget"),
    "mcp budget float": ("[mcp]\nrecall_budget = 2.5\n", "recall_budget"),
    "mcp budget bool": ("[mcp]\nrecall_budget = true\n", "recall_budget"),
    "idle exit zero": ("[serve]\nidle_exit = 0\n", "idle_exit"),
    "idle exit negative": ("[serve]\nidle_exit = -5\n", "idle_exit"),
    "idle exit huge": ("[serve]\nidle_exit = 1e9\n", "idle_exit"),
    "idle exit nan": ("[serve]\nidle_exit = nan\n", "idle_exit"),
    "idle exit text": ('[serve]\nidle_exit = "10m"\n', "idle_exit"),
    "serve not a table": ("serve = 600\n", "serve"),
    "resident text": ('[cli]\nresident = "no"\n', "resident"),
    "resident number": ("[cli]\nresident = 0\n", "resident"),
    "default mind bad": ('default_mind = "../bob"\n', "default_mind"),
    "author newline": ('[git]\nauthor_name = "a\\nb"\n', "author_name"),
    "deep nesting": ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
    "deep tables": ("x = " + "{a=" * 100_000 + "1" + "}" * 100_000 + "\n", "nested"),
    "huge int": ("x = 1" + "0" * 5000 + "\n", "memfile.toml"),
    "not toml": ("this is = = not toml\n", "TOML"),
}


@pytest.mark.parametrize(("text", "key"), BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_a_bad_memfile_toml_names_the_key_and_the_allowed_values(root: Path, text: str, key: str) -> None:
    (root / "memfile.toml").write_text(
        text if key == "default_mind" else 'default_mind = "alice"\n' + text, encoding="utf-8"
    )
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and key in result.stderr, result.stderr
    assert "allowed" in result.stderr or "TOML" in result.stderr
    with pytest.raises(InvalidInput, match="invalid memfile.toml"):
        Vault.open(root, "alice")


def test_memfile_toml_that_is_not_utf8_names_the_line(root: Path) -> None:
    (root / "memfile.toml").write_bytes(b'default_mind = "alice"\n[minds.alice]\nname = "Caf\xe9"\n')
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and "UTF-8" in result.stderr and ":3" in result.stderr


def test_memfile_toml_that_is_a_folder_is_named(root: Path) -> None:
    (root / "memfile.toml").unlink()
    (root / "memfile.toml").mkdir()
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and "folder" in result.stderr
    code, stderr = _run_in(root / "alice", "list")  # found upwards, then named
    assert code == 2 and "invalid memfile.toml" in stderr and "folder" in stderr, stderr


def _run_in(cwd: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "memfile", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    return proc.returncode, proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")
def test_memfile_toml_that_is_a_fifo_never_blocks(root: Path) -> None:
    (root / "memfile.toml").unlink()
    os.mkfifo(root / "memfile.toml")
    for args in (("--vault", str(root), "list"), ("list",)):
        code, stderr = _run_in(root, *args)
        assert code in (2, 7) and "invalid memfile.toml" in stderr and "Traceback" not in stderr, (args, code, stderr)


def test_memfile_toml_that_cannot_be_read_is_named(root: Path) -> None:
    (root / "memfile.toml").unlink()
    (root / "memfile.toml").symlink_to(root / "nowhere.toml")
    result = run("--vault", root, "list")
    assert result.exit_code in (2, 7) and "memfile.toml" in result.stderr, result.stderr


# --- good settings, and the MCP recall budget -------------------------------------------------------------


def config_of(tmp_path: Path, text: str) -> Config:
    (tmp_path / "memfile.toml").write_text(text, encoding="utf-8")
    return load_config(tmp_path)


def test_good_settings_are_read(tmp_path: Path) -> None:
    config = config_of(
        tmp_path,
        "lock_timeout = 2.5\n[recall]\nhalf_life_days = 100000000\nbudget = 0\n"
        '[sync]\nremote = "git@example.com:me/vault.git"\ninterval = 10\n',
    )
    assert config.lock_timeout == 2.5 and config.half_life_days == 1e8 and config.recall_budget is None
    assert config.sync_remote == "git@example.com:me/vault.git" and config.sync_interval == 10.0
    assert config_of(tmp_path, '[sync]\nremote = "/srv/my vault.git"\n').sync_remote == "/srv/my vault.git"
    assert math.isfinite(config_of(tmp_path, "").lock_timeout)


def test_the_mcp_recall_budget(tmp_path: Path) -> None:
    assert config_of(tmp_path, "").mcp_recall_budget == 2000
    assert Config().mcp_recall_budget == 2000
    assert config_of(tmp_path, "[mcp]\nrecall_budget = 500\n").mcp_recall_budget == 500
    assert config_of(tmp_path, "[mcp]\nrecall_budget = 0\n").mcp_recall_budget is None
    assert config_of(tmp_path, "[mcp]\n").mcp_recall_budget == 2000
    with pytest.raises(InvalidInput, match=r"mcp\.recall_budget"):
        config_of(tmp_path, "[mcp]\nrecall_budget = -3\n")
