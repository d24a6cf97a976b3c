"""The memory file format (SPEC section 2): parse, serialize, and byte-stable rewrites.

Golden files: `tests/golden/<name>.md` is a file as a person or an older memfile
wrote it; `tests/golden/<name>.<change>.out.md` is that file after one change
made through `fileformat.rewrite`, compared byte for byte. `.gitattributes`
keeps git from touching their CRLF line endings and BOM.
"""

from __future__ import annotations

import dataclasses
import re
import string
import time
from collections.abc import Callable
from datetime import datetime, timezone

import pytest
from helpers import GOLDEN, fails, in_vault, ok
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
