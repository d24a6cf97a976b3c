"""The direct front-matter writer (fileformat._emitted) writes exactly what ruamel writes, or gives up.

A speed trick (docs/internals.md): `serialize` takes its text when it has one. These tests prove it
equal to ruamel (`fileformat._dump`, the plain path) on generated values, tricky strings included,
and that it does take the values a store or an import writes.
"""

from __future__ import annotations

import string
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from memfile import fileformat
from memfile.model import Memory, Priority, Source, Status, new_id

#: Strings YAML reads as something else, or must quote: each must come out as ruamel writes it.
TRICKY = [
    "",
    " ",
    " lead",
    "trail ",
    "yes",
    "no",
    "on",
    "off",
    "null",
    "~",
    "true",
    "1",
    "1.0",
    "0x1f",
    "1e5",
    ".inf",
    "2026-01-01",
    "2026-01-01T00:00:00Z",
    "12:30",
    "16:9",
    "a: b",
    "a:b",
    "#x",
    "a #b",
    "- x",
    "[x]",
    "{x}",
    "x, y",
    "'q'",
    '"q"',
    "it's",
    "@x",
    "`x`",
    "!x",
    "&x",
    "*x",
    "|",
    ">",
    "%x",
    "?",
    "? x",
    "a\tb",
    "tab\t",
    "Tiếng Việt",
    "ภาษาไทย",
    "中文",
    "😀",
    "\u200b",
    "\ufeff",
    "\x85",
    "a\u2028b",
    "\x7f",
    "\xa0",
    "=",
    "<<",
    "---",
    "...",
]

text = st.one_of(st.sampled_from(TRICKY), st.text(max_size=30), st.text(string.printable, max_size=30))
moment = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)
).map(lambda d: d.replace(microsecond=d.microsecond if d.microsecond % 2 else 0))
value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    moment,
    text,
    st.lists(text, max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)
name = st.one_of(st.sampled_from(["id", "tags", "aliases", "x-y", "_z", "2x", "a b", "é"]), st.text(max_size=8))


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(name, value, min_size=1, max_size=6))
def test_the_direct_writer_writes_what_ruamel_writes_or_gives_up(fields: dict[str, object]) -> None:
    emitted = fileformat._emitted(fields)
    if emitted is not None:
        assert emitted == fileformat._dump(fields)


def test_every_tricky_string_as_a_value_and_in_a_list() -> None:
    for item in TRICKY:
        for fields in ({"v": item}, {"v": [item, "plain"]}):
            emitted = fileformat._emitted(fields)
            assert emitted is None or emitted == fileformat._dump(fields), repr(item)


def test_it_takes_what_a_store_and_an_import_write() -> None:
    """The trick pays: a memory as a store writes it, and one with unknown keys, need no ruamel."""
    now = datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone.utc)
    memory = Memory(
        id=new_id(),
        mind="michael",
        category=fileformat.Category.PROJECT,
        key="synapse_status",
        content="v1.5.0 deployed on vps1: it's green",
        path="michael/project/synapse_status.md",
        created_at=now,
        updated_at=now.replace(microsecond=123456),
        priority=Priority.HIGH,
        tags=("synapse", "v1.5.0", "16:9", "tiếng việt"),
        source=Source.AGENT,
        verified=False,
        confidence=0.85,
        status=Status.SUPERSEDED,
        superseded_by=new_id(),
        extra=(("aliases", ["synapse", "yes"]), ("note", "on hold"), ("count", 3)),
    )
    fields = fileformat.front_matter_fields(memory)
    assert fileformat._emitted(fields) is not None
    assert fileformat._emitted(fields) == fileformat._dump(fields)
    assert fileformat.parse(fileformat.serialize(memory).encode("utf-8"), memory.path, now) == memory


def test_the_plain_path_writes_through_ruamel(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    memory = Memory(
        id=new_id(),
        mind="m",
        category=fileformat.Category.NOTE,
        key="k",
        content="x",
        path="m/note/k.md",
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        updated_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    fast = fileformat.serialize(memory)
    monkeypatch.setenv("MEMFILE_PLAIN", "emit")
    assert fileformat.serialize(memory) == fast


@given(
    st.one_of(
        st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True),
        st.sampled_from(sorted(fileformat._YAML_WORDS) + ["y", "n", "Y", "N", "Yes_", "nil", "None", "NaN", "inf"]),
        st.text(alphabet="yesnotrufalNULnF0123456789_.:-+ ", min_size=0, max_size=8),
    )
)
@settings(max_examples=2000, deadline=None)
def test_a_plain_word_is_told_by_its_letters_as_pyyaml_reads_it(value: str) -> None:
    """`_plain_ok` tells a word (ids, keys) without reading it: the same answer as PyYAML's own reading."""
    assert fileformat._plain_ok(value) == fileformat._read_plain(value), value
