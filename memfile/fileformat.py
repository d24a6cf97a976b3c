"""Parse and serialize one memory file.

Front-matter exists only when the file's first line (after a BOM) is a `---`
fence; otherwise the whole file is the content. A first-line fence that no
`---` line closes makes the file unreadable, never body text. Reading uses
PyYAML's safe loader (python-frontmatter's choice), with every node checked
before a value is built: no key twice, no recursive alias, no alias bomb.
Rewriting uses ruamel.yaml round-trip, and only for the keys that change:
their lines are spliced into the original front-matter, so every other byte
(unknown keys, comments, quoting, indentation, CRLF, a BOM, the body) stays as
it was.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

from .config import plain
from .errors import FileParseError, InvalidInput
from .model import (
    DEFAULT_CONFIDENCE,
    KNOWN_FIELDS,
    Category,
    Memory,
    Priority,
    Source,
    derive_key,
    format_datetime,
    parse_bool,
    parse_category,
    parse_confidence,
    parse_memory_id,
    parse_optional_datetime,
    parse_priority,
    parse_source,
    parse_status,
    parse_tags,
    validate_key,
)

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_YAML_NODES = 10_000
MAX_YAML_DEPTH = 100
BOM = "\ufeff"

# python-frontmatter's YAML fence (YAMLHandler.FM_BOUNDARY, pinned by a test); frontmatter and
# PyYAML are imported on first parse, so commands that only read the index never load them.
_FENCE = re.compile(r"^-{3,}\s*$", re.MULTILINE)
_CONFLICT_START = re.compile(r"^<{7}( |$)", re.MULTILINE)
_CONFLICT_END = re.compile(r"^>{7}( |$)", re.MULTILINE)
#: YAML's end-of-document line, which python-frontmatter (and so memfile) does not take as a closing fence.
_DOCUMENT_END = re.compile(r"^\.{3}\s*$", re.MULTILINE)


# --- reading ----------------------------------------------------------------


def decode(data: bytes, path: str) -> str:
    """File bytes -> text without BOM; binary, huge or non-UTF-8 files are refused."""
    if len(data) > MAX_FILE_BYTES:
        raise FileParseError(path, None, f"file is larger than {MAX_FILE_BYTES // 2**20} MB")
    if b"\x00" in data:
        raise FileParseError(path, None, "binary file (contains NUL bytes), not Markdown")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileParseError(path, line, "not valid UTF-8 text") from None


def _locate(text: str) -> tuple[re.Match[str], re.Match[str]] | None:
    """The opening and closing fence of the front-matter: the opening one is the file's first line (after
    a BOM, which `decode` took off), or there is no front-matter and the whole file is the content;
    a `---` rule further down is Markdown's horizontal rule. None for an opening fence without a closing
    one too: `parse` refuses that file."""
    opening = _FENCE.match(text)
    closing = _FENCE.search(text, opening.end()) if opening else None
    return (opening, closing) if opening and closing else None


def front_matter_lines(text: str) -> int:
    """How many lines the front-matter of `text` takes, its two --- lines included (0: it has none)."""
    fences = _locate(text)
    return 0 if fences is None else text.count("\n", 0, fences[1].start()) + 1


def content_line(text: str) -> int:
    """The line of `text` (a file's) where its content begins, as `parse` strips it: a line of the
    content is this plus its own line, less one (doctor's place of a link)."""
    fences = _locate(text)
    start = 0 if fences is None else fences[1].end()
    body = text[start:]
    return text.count("\n", 0, start + len(body) - len(body.lstrip())) + 1


def _key_line(text: str, fences: tuple[re.Match[str], re.Match[str]] | None, key: str) -> int | None:
    if fences is None:
        return None
    fm_start = fences[0].end()
    found = re.compile(rf"^{re.escape(key)}\s*:", re.MULTILINE).search(text, fm_start, fences[1].start())
    return text.count("\n", 0, found.start()) + 1 if found else None


def body_problem(content: str) -> str | None:
    """Why a body cannot be written into a file memfile reads back (None: it can): an import checks each
    record with it before anything is written."""
    if "\x00" in content:
        return "it holds NUL bytes"
    start = _CONFLICT_START.search(content)
    if start and _CONFLICT_END.search(content, start.end()):
        return "it holds git conflict-marker lines (<<<<<<< ... >>>>>>>)"
    if len(content) > MAX_FILE_BYTES // 4 and len(content.encode("utf-8")) > MAX_FILE_BYTES:
        return f"it is larger than {MAX_FILE_BYTES // 2**20} MB"
    return None


def parse(data: bytes, relpath: str, mtime: datetime) -> Memory:
    """One memory from a file's bytes at `relpath` (vault-relative, POSIX); `mtime` dates a hand-made file
    that gives none.

    Raises:
        FileParseError: with the line and reason when the file cannot be read.
    """
    text = decode(data, relpath)
    conflict = _CONFLICT_START.search(text)
    if conflict and _CONFLICT_END.search(text, conflict.end()):
        raise FileParseError(relpath, text.count("\n", 0, conflict.start()) + 1, "contains git conflict markers")
    fences = _locate(text)
    if fences is None and _FENCE.match(text):
        raise FileParseError(relpath, 1, _unclosed(text))
    if fences is None:
        meta: dict[str, Any] = {}
        content = text.strip()
    else:
        fm_text = text[fences[0].end() : fences[1].start()]
        content = text[fences[1].end() :].strip()
        meta = _front_matter(fm_text, relpath, text.count("\n", 0, fences[0].end()))
    try:
        return _memory(meta, content, relpath, mtime, has_front_matter=fences is not None)
    except (OverflowError, ValueError) as exc:
        raise FileParseError(relpath, None, f"front-matter holds a value memfile cannot use: {exc}") from None
    except InvalidInput as exc:
        field_name = "tags" if exc.field == "tag" else exc.field
        raise FileParseError(relpath, _key_line(text, fences, field_name), str(exc).rstrip(".")) from None


def dates_given(data: bytes, memory: Memory) -> bool:
    """Whether `data`, the bytes `memory` was parsed from, gives both its dates in its front-matter as memfile
    writes them: then `parse` makes the same memory of those bytes whatever `mtime` it is given."""
    if not data.startswith(b"---\n"):
        return False
    end = data.find(b"\n---", 3)
    head = data[3 : end + 1] if end > 0 else b""
    return (
        f"\ncreated_at: {format_datetime(memory.created_at)}\n".encode() in head
        and f"\nupdated_at: {format_datetime(memory.updated_at)}\n".encode() in head
    )


def _unclosed(text: str) -> str:
    """Why a file whose first line opens front-matter that no `---` line closes cannot be read.

    python-frontmatter reads such a file as all body, so its YAML lines would become the content and
    its category, key and priority would silently be the defaults: memfile refuses it instead.
    """
    reason = "front-matter opened by the `---` on line 1 is never closed: add a `---` line after its last key"
    dots = _DOCUMENT_END.search(text)
    if dots:
        line = text.count("\n", 0, dots.start()) + 1
        reason += f" (memfile does not end it at the `...` on line {line}: write `---` there)"
    return reason + "; if line 1 is meant as a horizontal rule, write `***` instead"


def _front_matter(fm_text: str, relpath: str, offset: int) -> dict[str, Any]:
    """The front-matter's mapping (FileParseError: not YAML, not a mapping, or refused by `_check_nodes`);
    `offset` is the number of lines before `fm_text` in the file."""
    import yaml

    try:
        meta = _safe_load(fm_text)
    except _Refused as exc:
        raise FileParseError(relpath, offset + exc.line + 1 if exc.line is not None else None, exc.reason) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = offset + mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FileParseError(relpath, line, f"front-matter is not valid YAML: {problem}") from None
    except RecursionError:  # PyYAML's pure-Python parser, where libyaml is missing, recurses per level
        raise FileParseError(relpath, None, f"front-matter is nested more than {MAX_YAML_DEPTH} levels deep") from None
    except (TypeError, ValueError) as exc:
        raise FileParseError(relpath, None, f"front-matter cannot be read: {exc}") from None
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise FileParseError(relpath, offset + 2, "front-matter is not a mapping of keys to values")
    return meta


class _Refused(Exception):
    """Front-matter YAML refused before any value is built (line: 0-based within the front-matter)."""

    def __init__(self, reason: str, line: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def _check_nodes(root: Any, construct_key: Callable[[Any], Any]) -> None:
    """Refuse a YAML node graph memfile cannot hold, before a value is built (an iterative walk: no recursion).

    A mapping may not give one key twice, in whatever spelling (`priority`, `"priority"`,
    `? priority`, `"pri\\x6frity"`): the keys are compared as the values they construct to, as the
    dict would (merge keys `<<` are YAML's own overrides and are not counted). A node may not contain
    itself (a recursive alias). With every alias expanded the front-matter may hold at most
    `MAX_YAML_NODES` values and `MAX_FILE_BYTES` of text (the "billion laughs"), at most
    `MAX_YAML_DEPTH` levels deep.

    Raises:
        _Refused: with the reason and the 0-based line of the node.
    """
    done: dict[int, tuple[int, int, int]] = {}  # id -> (values, characters, depth) with aliases expanded
    active: set[int] = set()  # the collections on the current path
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key, kind = id(node), node.id  # "scalar", "sequence" or "mapping"
        if kind == "scalar":
            continue
        children = [n for pair in node.value for n in pair] if kind == "mapping" else node.value
        if finished:
            active.discard(key)
            values, chars, depth = 1, 0, 1
            for child in children:
                if child.id == "scalar":
                    values, chars = values + 1, chars + len(child.value)
                else:
                    inner = done[id(child)]
                    values, chars, depth = values + inner[0], chars + inner[1], max(depth, inner[2] + 1)
            if values > MAX_YAML_NODES or chars > MAX_FILE_BYTES:
                raise _Refused(
                    f"front-matter expands to more than {MAX_YAML_NODES} values or "
                    f"{MAX_FILE_BYTES // 2**20} MB of text (YAML aliases)",
                    node.start_mark.line,
                )
            if depth > MAX_YAML_DEPTH:
                raise _Refused(f"front-matter is nested more than {MAX_YAML_DEPTH} levels deep", node.start_mark.line)
            done[key] = (values, chars, depth)
            continue
        if key in done:
            continue
        if key in active:
            raise _Refused(
                "front-matter holds a recursive YAML alias (a value that contains itself)", node.start_mark.line
            )
        if kind == "mapping":
            _check_keys(node, construct_key)
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children) if child.id != "scalar")


_STR_TAG = "tag:yaml.org,2002:str"


def _check_keys(node: Any, construct_key: Callable[[Any], Any]) -> None:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.id != "scalar" or key_node.tag == "tag:yaml.org,2002:merge":
            continue  # a merge is YAML's own override; a mapping or list key is refused by PyYAML (unhashable)
        value = key_node.value if key_node.tag == _STR_TAG else construct_key(key_node)
        try:
            twice = value in seen
        except TypeError:
            continue
        if twice:
            raise _Refused(f"front-matter key {str(value)!r} appears twice", key_node.start_mark.line)
        seen.add(value)


@cache
def _loader() -> Any:
    """The YAML loader every read uses: PyYAML's safe loader (the C one where built, as python-frontmatter
    picks it), refusing a key given twice."""
    from frontmatter.default_handlers import SafeLoader

    class Loader(SafeLoader):  # type: ignore[misc,valid-type]  # frontmatter hands PyYAML's loader on untyped
        def get_single_data(self) -> Any:
            node = self.get_single_node()
            if node is None:
                return None
            _check_nodes(node, self.construct_object)
            return self.construct_document(node)

    return Loader


def _safe_load(fm_text: str) -> Any:
    import yaml

    return yaml.load(fm_text, Loader=_loader())


def _memory(meta: dict[str, Any], content: str, relpath: str, mtime: datetime, has_front_matter: bool) -> Memory:
    parts = relpath.split("/")
    mind, folder, stem = parts[0], parts[-2] if len(parts) > 2 else "", parts[-1][:-3]
    extra = () if meta.keys() <= KNOWN_FIELDS else tuple((str(k), v) for k, v in meta.items() if k not in KNOWN_FIELDS)

    def given(name: str, parse: Callable[[Any], Any], default: Any = None) -> Any:
        return default if meta.get(name) is None else parse(meta[name])

    in_folder = Category(folder) if folder in Category.__members__.values() else Category.NOTE
    category = given("category", parse_category, in_folder)
    key = given("key", validate_key) or derive_key(stem)
    source = given("source", parse_source, Source.USER)
    created = parse_optional_datetime(meta.get("created_at"), "created_at") or mtime
    updated = parse_optional_datetime(meta.get("updated_at"), "updated_at") or max(created, mtime)
    raw_id = meta.get("id")
    if raw_id is not None and not isinstance(raw_id, str | int):
        raise InvalidInput("id", raw_id, "text such as mem_01jf3k8q2w7x")
    return Memory(
        id=str(raw_id) if raw_id not in (None, "") else derived_id(relpath),
        id_derived=raw_id in (None, ""),
        mind=mind,
        category=category,
        key=key,
        content=content.replace("\r\n", "\n"),
        path=relpath,
        created_at=created,
        updated_at=updated,
        priority=given("priority", parse_priority, Priority.NORMAL),
        tags=parse_tags(meta.get("tags"), bounded=False),  # files are the truth: doctor names too many
        source=source,
        verified=given("verified", lambda v: parse_bool(v, "verified"), source is Source.USER),
        confidence=given("confidence", parse_confidence, DEFAULT_CONFIDENCE[source]),
        expires_at=parse_optional_datetime(meta.get("expires_at"), "expires_at"),
        status=given("status", parse_status),
        superseded_by=given("superseded_by", lambda v: parse_memory_id(v, "superseded_by")),
        extra=extra,
        has_front_matter=has_front_matter,
    )


def derived_id(relpath: str) -> str:
    """A stable id for a file that has none: derived from its path, the file is not rewritten."""
    import hashlib

    return "mem_h" + hashlib.sha1(relpath.encode("utf-8")).hexdigest()[:15]


# --- writing ----------------------------------------------------------------


@cache
def _yaml(sequence_offset: int | None = None) -> Any:
    """A ruamel round-trip YAML (imported only when writing); `null` spelled out."""
    from ruamel.yaml import YAML

    rt = YAML()
    rt.width = 4096
    rt.preserve_quotes = True
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    rt.representer.add_representer(str, _represent_str)
    if sequence_offset is not None:
        rt.indent(mapping=2, sequence=sequence_offset + 2, offset=sequence_offset)
    return rt


def _represent_str(representer: Any, value: str) -> Any:
    """Quote a string unless PyYAML (YAML 1.1, the reader) reads it back plain as the same string.

    ruamel writes YAML 1.2, where `on`, `yes` and `16:9` are plain strings;
    PyYAML would read them as a bool or a number.
    """
    if any(ch in value for ch in _LINE_BREAKS):  # raw in single quotes, a reader folds them into spaces
        return representer.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return representer.represent_scalar("tag:yaml.org,2002:str", value, style=None if _plain_ok(value) else "'")


#: A word PyYAML (YAML 1.1) reads back plain as itself, unless it is one of `_YAML_WORDS` (a bool or null):
#: no other implicit type starts with a letter, no indicator is in it. Ids and keys are such words.
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_YAML_WORDS = frozenset(
    "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL".split()
)


def _plain_ok(value: str) -> bool:
    """Whether PyYAML reads `value` back, written plain, as the same string (in a mapping and in a list):
    a plain word is told by its letters, the rest by reading it (`_read_plain`)."""
    return bool(_PLAIN_WORD.fullmatch(value)) and value not in _YAML_WORDS or _read_plain(value)


@lru_cache(maxsize=4096)
def _read_plain(value: str) -> bool:
    """`_plain_ok` by PyYAML itself. Kept per value: a store writes the same categories, sources and tags
    over and over."""
    import yaml

    try:
        return bool(_safe_load(f"v: {value}\nw: [{value}]") == {"v": value, "w": [value]})
    except (yaml.YAMLError, _Refused, RecursionError):
        return False


#: Characters YAML (and str.splitlines) take as line breaks besides \n and \r.
_LINE_BREAKS = "\x85\u2028\u2029"


def _lines(text: str) -> list[str]:
    """Lines split at \n only, ends kept: the line numbers ruamel reports (str.splitlines also splits at U+2028)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def front_matter_fields(memory: Memory) -> dict[str, Any]:
    """The front-matter of a memory as plain values, known keys first, then `extra`."""
    fields: dict[str, Any] = {
        "id": memory.id,
        "category": str(memory.category),
        "key": memory.key,
        "priority": str(memory.priority),
        "tags": list(memory.tags),
        "source": str(memory.source),
        "verified": memory.verified,
        "confidence": memory.confidence,
        "expires_at": memory.expires_at,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }
    if memory.status is not None:  # written once a memory has been superseded (and kept when restored)
        fields |= {"status": str(memory.status), "superseded_by": memory.superseded_by}
    fields.update(memory.extra)
    return fields


def _yaml_value(value: Any, original: Any = None) -> Any:
    from ruamel.yaml.comments import CommentedSeq

    if isinstance(value, datetime):
        # A loaded TimeStamp dumps back exactly as written: 2026-06-27T10:00:00Z. A fresh copy each time
        # (TimeStamp.replace keeps its zone, microseconds and format): one object used twice in a
        # document would be written as a YAML alias.
        return _timestamp(format_datetime(value)).replace()
    if isinstance(value, CommentedSeq):
        return value
    if isinstance(value, list | tuple):
        seq = CommentedSeq(value)
        if not (isinstance(original, CommentedSeq) and not original.fa.flow_style()):
            seq.fa.set_flow_style()
        return seq
    return value


@lru_cache(maxsize=4096)
def _timestamp(text: str) -> Any:
    """ruamel's TimeStamp for an ISO-8601 text, kept per text (an import writes thousands)."""
    return _yaml().load(f"v: {text}")["v"]


def _dump(entries: dict[str, Any], sequence_offset: int | None = None) -> str:
    from ruamel.yaml.comments import CommentedMap

    out = io.StringIO()
    _yaml(sequence_offset).dump(CommentedMap((k, _yaml_value(v)) for k, v in entries.items()), out)
    return out.getvalue()


def _body(content: str, newline: str) -> str:
    text = content.replace("\r\n", "\n").strip()
    return (text + "\n").replace("\n", newline) if text else ""


def serialize(memory: Memory) -> str:
    """The full text of a new memory file."""
    fields = front_matter_fields(memory)
    front = None if plain("emit") else _emitted(fields)
    return "---\n" + (front if front is not None else _dump(fields)) + "---\n" + _body(memory.content, "\n")


# --- the front-matter of a new file, written directly ---------------------------
# A speed trick (docs/internals.md): `_emitted` writes what ruamel writes for the values a new file
# usually holds (plain or single-quoted one-line strings, numbers, booleans, null, dates, flat lists
# of strings) and gives up (None: ruamel writes it) on anything else; tests/reliability proves it equal.

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
#: Characters ruamel writes in a plain or single-quoted scalar (YAML's printable set, no line break, no BOM).
_QUOTABLE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffe]*")


#: Strings ruamel's emitter surely writes plain (when they read back as strings): no indicator anywhere.
_SURELY_PLAIN = re.compile(r"[^\W_][\w .+/()~^=$;<>@-]*(?<! )")


def _emitted(fields: dict[str, Any]) -> str | None:
    lines = []
    for name, value in fields.items():
        text = _scalar(value) if not isinstance(value, list | tuple) else _flow(value)
        if text is None or not (_NAME.fullmatch(name) and _plain_ok(name)):
            return None
        lines.append(f"{name}: {text}\n")
    return "".join(lines)


def _flow(items: list[Any] | tuple[Any, ...]) -> str | None:
    texts = [_scalar(item) if isinstance(item, str) else None for item in items]
    return None if None in texts else "[" + ", ".join(texts) + "]"  # type: ignore[arg-type]


def _scalar(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if "e" not in text and "n" not in text else None  # ruamel writes 1e-05 as 1.0e-05
    if isinstance(value, datetime):
        return format_datetime(value)  # what a TimeStamp of that text dumps (fileformat._yaml_value)
    if not isinstance(value, str) or len(value) > 1000 or not _QUOTABLE.fullmatch(value):
        return None
    if not (_plain_ok(value) and _plain_for_ruamel(value)):
        return "'" + value.replace("'", "''") + "'"  # asked single-quoted, as _represent_str asks
    return value if _SURELY_PLAIN.fullmatch(value) else None  # ruamel's emitter may still quote it: ask ruamel


@lru_cache(maxsize=4096)
def _plain_for_ruamel(value: str) -> bool:
    """Whether ruamel (YAML 1.2) reads `value` written plain as a string too (`1e5` is a number there)."""
    from ruamel.yaml.nodes import ScalarNode

    return bool(_yaml().resolver.resolve(ScalarNode, value, (True, False)) == "tag:yaml.org,2002:str")


def _sequence_offset(lines: list[str]) -> int | None:
    for line in lines:
        dash = re.match(r"(\s*)- ", line)
        if dash:
            return len(dash.group(1))
    return None


def _splice(
    fm_text: str, changes: dict[str, Any], newline: str, ensure: dict[str, Any], removed: tuple[str, ...] = ()
) -> str:
    """Front-matter text with the lines of `changes` replaced (or appended), of `removed` deleted, the rest untouched.

    Keys in `ensure` are appended when the file lacks them (an id or a
    creation time derived from the path or mtime must not drift).
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(fm_text) or CommentedMap()
    except YAMLError:
        # ruamel's scanner refuses a TAB before a comment (`priority: low\t# why`), which PyYAML reads: it
        # sees spaces there instead (same lines, same keys); the lines spliced below keep their TABs.
        data = _yaml().load(re.sub(r"\t(?=[\t ]*#)", " ", fm_text)) or CommentedMap()
        if data.fa.flow_style():
            raise  # re-dumped whole below, from values that are not quite the file's
    if data.fa.flow_style():
        for name, value in changes.items():
            data[name] = _yaml_value(value, data.get(name))
        for name in removed:
            data.pop(name, None)
        out = io.StringIO()
        _yaml().dump(data, out)
        return "\n" + out.getvalue().replace("\n", newline)
    lines = _lines(fm_text)
    starts = sorted((data.lc.key(name)[0], name) for name in data)
    bounds = {
        name: (line, starts[i + 1][0] if i + 1 < len(starts) else len(lines)) for i, (line, name) in enumerate(starts)
    }
    for name in sorted((n for n in [*changes, *removed] if n in bounds), key=lambda n: -bounds[n][0]):
        start, end = bounds[name]
        multiline = isinstance(data[name], str) and "\n" in data[name]  # its own lines may start with #
        while (
            not multiline
            and end > start + 1
            and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#"))
        ):
            end -= 1
        if name not in changes:
            del lines[start:end]
            continue
        block = isinstance(data[name], CommentedSeq) and len(data[name]) > 0 and not data[name].fa.flow_style()
        offset = _sequence_offset(lines[start + 1 : end]) if block else None
        value = changes[name] if not block else CommentedSeq(changes[name])
        dumped = _dump({name: value}, offset)
        comment = _eol_comment(data, name, lines[start])
        if comment and end == start + 1 and dumped.count("\n") == 1:
            dumped = dumped[:-1] + comment + "\n"
        lines[start:end] = [dumped.replace("\n", newline)]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    added = {n: v for n, v in (ensure | changes).items() if n not in bounds}
    if added:
        lines.append(_dump(added).replace("\n", newline))
    return "".join(lines)


def _eol_comment(data: Any, name: str, line: str) -> str:
    """The `  # comment` at the end of a scalar key's line, with its spacing, as written."""
    entry = data.ca.items.get(name)
    token = entry[2] if entry and len(entry) > 2 else None
    first = token.value.split("\n", 1)[0].strip() if token is not None else ""
    found = re.search(r"\s+" + re.escape(first) + r"\s*$", line) if first.startswith("#") else None
    return found.group().rstrip("\r\n") if found else ""


def update(text: str, old: Memory, new: Memory) -> str:
    """The text of `old`'s file (`text`, as parsed into `old`) rewritten to hold `new`, changing only what
    differs (a leading BOM is kept)."""
    if new == old:
        return text
    bom = BOM if text.startswith(BOM) else ""
    text = text.removeprefix(BOM)
    newline = "\r\n" if "\r\n" in text else "\n"
    fences = _locate(text)
    new_fields = front_matter_fields(new)
    if fences is None:
        body = text if new.content == old.content else _body(new.content, newline)
        return bom + ("---\n" + _dump(new_fields) + "---\n").replace("\n", newline) + body
    old_fields = front_matter_fields(old)
    changes = {k: v for k, v in new_fields.items() if old_fields.get(k, object()) != v}
    removed = tuple(k for k in old_fields if k not in new_fields)
    ensure = {"id": new.id, "created_at": new.created_at}
    opening, closing = fences
    head = text[: opening.end()] + _splice(text[opening.end() : closing.start()], changes, newline, ensure, removed)
    if new.content == old.content:
        return bom + head + text[closing.start() :]
    line_end = text.find("\n", closing.start())
    fence = text[closing.start() :] + newline if line_end < 0 else text[closing.start() : line_end + 1]
    return bom + head + fence + _body(new.content, newline)


def rewrite(data: bytes, relpath: str, old: Memory, new: Memory) -> bytes:
    """`update` over a file's bytes: decoded and encoded here, a BOM kept."""
    bom = BOM if data.startswith(BOM.encode("utf-8")) else ""
    try:
        return update(bom + decode(data, relpath), old, new).encode("utf-8")
    except FileParseError:
        raise
    except Exception as exc:  # noqa: BLE001 - ruamel refusing what PyYAML read: leave the file alone
        raise FileParseError(relpath, None, f"front-matter cannot be rewritten safely ({exc})") from None
