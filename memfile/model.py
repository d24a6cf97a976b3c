"""Values of memfile: the `Memory` dataclass, its enums, and validation.

Untrusted input (CLI arguments, API arguments, YAML read from disk) goes
through exactly one validation function per kind, here; each raises
`InvalidInput` naming the field, the bad value and the allowed values.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime, timedelta, timezone
from enum import StrEnum
from functools import partial
from typing import Any
from urllib.parse import unquote

from .errors import AmbiguousRef, InvalidInput, NotFound, echo
from .text import head


class Category(StrEnum):
    IDENTITY = "identity"
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT = "project"
    SKILL = "skill"
    MISTAKE = "mistake"
    CONTEXT = "context"
    NOTE = "note"


class Priority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for critical up to 3 for low: sorts critical first."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


class Source(StrEnum):
    USER = "user"
    AGENT = "agent"


class Status(StrEnum):
    """`superseded`: replaced by a newer memory (`superseded_by`), kept on disk but out of recall and search.
    `proposed`: captured from a conversation (`Vault.capture`), waiting for a person's review: out of recall,
    search and every agent's read until accepted."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    PROPOSED = "proposed"


#: The front-matter key a sync writes when both sides changed a body: the other side's body, kept until resolved.
CONFLICT_KEY = "conflict_theirs"
#: A captured memory's front-matter keys (`Vault.capture`, docs/capture.md): the session and the message
#: numbers it came from; a proposal's quote of those messages, and the id of the memory it would supersede.
CAPTURED_FROM, CAPTURED_TURNS = "captured_from", "captured_turns"
CAPTURED_LINES, PROPOSED_SUPERSEDES = "captured_lines", "proposed_supersedes"
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_]{0,99}")
KEY_RULE = "snake_case: lowercase letters, digits and _, starting with a letter or digit, at most 100 characters"
MAX_TAG_LENGTH = 100
#: The most tags a write may give a memory (refused before any work).
MAX_TAGS = 100
#: The highest priority an agent may write (a person raises it): critical memories are pinned into every recall.
AGENT_PRIORITY_CAP = Priority.HIGH

#: A served credential's label goes into a commit trailer (`Memfile-Key: LABEL`): no space, colon or line
#: break can get in (memfile.keys checks it when a key is made; `Vault.store_many` when a store names one).
LABEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LABEL_RULE = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit (say claude-desktop)"

#: An argument that was not given (where None means "none": `expires=None` is "never").
UNSET: Any = object()
DEFAULT_CONFIDENCE = {Source.USER: 1.0, Source.AGENT: 0.7}


@dataclass(frozen=True)
class Memory:
    """One memory: a Markdown file with front-matter, as memfile understands it.

    `path` is relative to the vault root (POSIX separators). `extra` holds the
    unknown front-matter keys in file order; `id_derived` is true when the
    file carries no id and `id` was derived from its path.
    """

    id: str
    mind: str
    category: Category
    key: str
    content: str
    path: str
    created_at: datetime
    updated_at: datetime
    priority: Priority = Priority.NORMAL
    tags: tuple[str, ...] = ()
    source: Source = Source.USER
    verified: bool = True
    confidence: float = 1.0
    expires_at: datetime | None = None
    status: Status | None = None  # None: the file has no `status` key (= active)
    superseded_by: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()
    has_front_matter: bool = True
    id_derived: bool = False

    @property
    def ref(self) -> str:
        """The `category/key` form of this memory's REF."""
        return f"{self.category}/{self.key}"

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    @property
    def superseded(self) -> bool:
        return self.status is Status.SUPERSEDED

    @property
    def proposed(self) -> bool:
        """Captured and waiting for a person's review (`memfile review`)."""
        return self.status is Status.PROPOSED

    @property
    def conflict(self) -> str | None:
        """The other side's body when a sync found both sides had changed it (`conflict_theirs`), else None."""
        return next((str(v) for k, v in self.extra if k == CONFLICT_KEY), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (dates as ISO-8601 UTC strings)."""
        return {
            "id": self.id,
            "mind": self.mind,
            "category": str(self.category),
            "key": self.key,
            "priority": str(self.priority),
            "tags": list(self.tags),
            "source": str(self.source),
            "verified": self.verified,
            "confidence": self.confidence,
            "expires_at": format_datetime(self.expires_at) if self.expires_at else None,
            "created_at": format_datetime(self.created_at),
            "updated_at": format_datetime(self.updated_at),
            "status": str(self.status or Status.ACTIVE),
            "superseded_by": self.superseded_by,
            "path": self.path,
            "content": self.content,
            "extra": {k: _jsonable(v) for k, v in self.extra},
            "has_front_matter": self.has_front_matter,
            "id_derived": self.id_derived,
        }


#: Front-matter keys memfile owns: every field of a Memory but those its file's place and body give.
KNOWN_FIELDS = frozenset(
    {f.name for f in fields(Memory)} - {"mind", "content", "path", "extra", "has_front_matter", "id_derived"}
)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


# --- validation: one function per kind -------------------------------------


def _choice(enum: type[StrEnum], value: object, field_name: str) -> Any:
    if isinstance(value, enum):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else value
    try:
        return enum(text)  # type: ignore[arg-type]  # a non-str is caught below
    except (ValueError, TypeError):  # TypeError: a value that cannot be a key (a list, a mapping)
        raise InvalidInput(field_name, value, [m.value for m in enum]) from None


def parse_category(value: object, field_name: str = "category") -> Category:
    return _choice(Category, value, field_name)


def parse_priority(value: object, field_name: str = "priority") -> Priority:
    return _choice(Priority, value, field_name)


def parse_source(value: object, field_name: str = "source") -> Source:
    return _choice(Source, value, field_name)


def parse_status(value: object, field_name: str = "status") -> Status:
    return _choice(Status, value, field_name)


def parse_memory_id(value: object, field_name: str) -> str:
    """A memory id as written by memfile (`mem_` + 4 to 40 lowercase letters or digits)."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidInput(field_name, value, "a memory id such as mem_01jf3k8q2w7x")
    return value


def validate_key(value: object, field_name: str = "key") -> str:
    if not isinstance(value, str) or not KEY_PATTERN.fullmatch(value):
        raise InvalidInput(field_name, value, KEY_RULE)
    return value


#: Hex digits of a file name's SHA-256 in a key derived from a name whose letters do not fold to ASCII.
NAME_HASH_LENGTH = 10


def derive_key(stem: str) -> str:
    """A valid key made from a file name (docs/format.md): `Reading-List` -> `reading_list`, `Ghi chú` ->
    `ghi_chu`; a name with letters that do not fold to ASCII gets a hash of the name, so two such names
    never share a key: `Café 日本` -> `cafe_` + 10 hex digits, `日本語` -> `file_` + 10 hex digits.

    The same on every machine and run, whatever the name's Unicode normal form (macOS writes NFD names).
    """
    if stem.isascii():  # what every ASCII name always gave: keys of existing files must not move
        return _snake(stem) or "untitled"
    import hashlib
    import unicodedata

    from .text import fold

    name = unicodedata.normalize("NFC", stem)
    folded = fold(unicodedata.normalize("NFKC", name))  # NFKC first: fullwidth `Ｍｅｍｏ` and `²` have ASCII forms
    # Punctuation, spaces and controls separate words, as ASCII punctuation does; a letter, digit, mark or
    # symbol (an emoji) left over is part of the name that the ASCII key would lose.
    if all(ch.isascii() or unicodedata.category(ch)[0] in "PZC" for ch in folded):
        return _snake(folded) or "untitled"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:NAME_HASH_LENGTH]
    return (_snake(folded)[: 99 - NAME_HASH_LENGTH].rstrip("_") or "file") + "_" + digest


def key_fits_name(key: str, stem: str) -> bool:
    """Whether `key` is one the file name `stem` gives: `derive_key(stem)`, or what memfile derived
    before non-ASCII names were folded and hashed (`Café au lait` -> `caf_au_lait`, `日本語` -> `untitled`),
    which a rewrite of such a hand-made file wrote into its front-matter: that file is where it belongs."""
    return key in (derive_key(stem), _snake(stem) or "untitled")


def _snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:100].rstrip("_")


def parse_confidence(value: object, field_name: str = "confidence") -> float:
    allowed = "a number from 0.0 to 1.0"
    if isinstance(value, bool):
        raise InvalidInput(field_name, value, allowed)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidInput(field_name, value, allowed) from None
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(field_name, value, allowed)
    return number + 0.0  # -0.0 is 0.0 (a file would say `confidence: -0.0`)


def parse_bool(value: object, field_name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    raise InvalidInput(field_name, value, "true, false (or yes, no)")


def parse_tags(value: object, field_name: str = "tags", *, bounded: bool = True) -> tuple[str, ...]:
    """Tags from a list or a comma-separated string: lowercased, deduplicated, in order.

    `bounded`: more than MAX_TAGS tags given (duplicates count) are refused before a tag is looked at;
    False for a file on disk, which is read whatever it holds (doctor names one over MAX_TAGS).
    """
    if value is None:
        return ()
    items: list[object] = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else None  # type: ignore[assignment]
    if items is None:
        raise InvalidInput(field_name, value, "a list of strings or a comma-separated string")
    if bounded and len(items) > MAX_TAGS:
        raise too_many_tags(field_name, len(items))
    for item in items:
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise InvalidInput(field_name, item, "strings")
    words = [" ".join(part.split()).lower() for item in items for part in str(item).split(",")]
    tags = [tag for tag in words if tag]
    if bounded and len(tags) > MAX_TAGS:
        raise too_many_tags(field_name, len(tags))
    for tag in tags:
        if len(tag) > MAX_TAG_LENGTH or tag.startswith("-"):
            raise InvalidInput("tag", tag, f"text of 1 to {MAX_TAG_LENGTH} characters, not starting with '-'")
    return tuple(dict.fromkeys(tags))


def too_many_tags(field_name: str, count: int) -> InvalidInput:
    """The refusal of `count` tags given to one memory, more than MAX_TAGS."""
    return InvalidInput(
        field_name, f"{count} tags", f"at most {MAX_TAGS} tags per memory (keep the rest in the content)"
    )


DATETIME_RULE = "an ISO-8601 date or time such as 2026-06-27 or 2026-06-27T10:00:00Z"


def parse_datetime(value: object, field_name: str) -> datetime:
    """An aware UTC datetime from a datetime, a date or an ISO-8601 string."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInput(field_name, value, DATETIME_RULE) from None
    else:
        raise InvalidInput(field_name, value, DATETIME_RULE)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise InvalidInput(field_name, value, DATETIME_RULE, reason="out of the supported range") from None


def add_duration(moment: datetime, span: timedelta, field_name: str) -> datetime:
    """`moment + span`, refused with InvalidInput past the year 9999."""
    try:
        return moment + span
    except OverflowError:
        raise InvalidInput(field_name, f"{span.days}d", "a duration that ends before the year 10000") from None


def parse_optional_datetime(value: object, field_name: str) -> datetime | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none", "~")):
        return None
    return parse_datetime(value, field_name)


_DURATION = re.compile(r"(\d+)\s*([mhdw])")
_DURATION_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
DURATION_RULE = "a duration such as 30m, 12h, 7d or 2w"


def parse_duration(value: object, field_name: str = "duration") -> timedelta:
    match = _DURATION.fullmatch(str(value).strip().lower()) if isinstance(value, str) else None
    if match is None:
        if isinstance(value, timedelta):
            return value
        raise InvalidInput(field_name, value, DURATION_RULE)
    try:
        return timedelta(**{_DURATION_UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        raise InvalidInput(field_name, value, DURATION_RULE, reason="too long") from None


def parse_expires(value: object, now: datetime, field_name: str = "expires") -> datetime | None:
    """`--expires`: a duration from now, an ISO-8601 moment, or never/none."""
    if value is None or isinstance(value, datetime):
        return parse_optional_datetime(value, field_name)
    text = str(value).strip().lower()
    if text in ("never", "none", "null"):
        return None
    if _DURATION.fullmatch(text):
        return add_duration(now, parse_duration(text, field_name), field_name)
    try:
        return parse_datetime(value, field_name)
    except InvalidInput:
        raise InvalidInput(field_name, value, f"{DURATION_RULE}, {DATETIME_RULE}, or never") from None


def format_datetime(moment: datetime) -> str:
    """ISO-8601 UTC with a `Z`, seconds precision unless the time has more."""
    moment = moment.astimezone(timezone.utc)
    fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}{fraction}Z"


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def new_id() -> str:
    """`mem_` + 10 time characters (sortable) + 6 random characters."""
    millis = int(time.time() * 1000)
    stamp = "".join(_CROCKFORD[(millis >> shift) & 31] for shift in range(45, -1, -5))
    return "mem_" + stamp + "".join(_CROCKFORD[byte & 31] for byte in os.urandom(6))  # 256 = 8 x 32: uniform


ID_PATTERN = re.compile(r"mem_[0-9a-z]{4,40}")


def memory_to_row(memory: Memory) -> tuple[Any, ...]:
    """A Memory as a tuple of plain values (for the index's catalog; `memory_from_row` reverses it)."""
    return (
        memory.id,
        memory.mind,
        memory.category.value,
        memory.key,
        memory.content,
        memory.path,
        memory.created_at.isoformat(),
        memory.updated_at.isoformat(),
        memory.priority.value,
        memory.tags,
        memory.source.value,
        memory.verified,
        memory.confidence,
        memory.expires_at.isoformat() if memory.expires_at else None,
        json.dumps([[k, _jsonable(v)] for k, v in memory.extra], ensure_ascii=False) if memory.extra else "",
        memory.has_front_matter,
        memory.id_derived,
        memory.status.value if memory.status else None,
        memory.superseded_by,
    )


def memory_from_row(row: tuple[Any, ...]) -> Memory:
    """The Memory of a `memory_to_row` tuple (`tests/core/test_model.py` checks every field comes back)."""
    id_, mind, category, key, content, path, created, updated, priority, tags, source, verified = row[:12]
    confidence, expires, extra, has_front_matter, id_derived, status, superseded_by = row[12:]
    return Memory(
        id=id_,
        mind=mind,
        category=Category(category),
        key=key,
        content=content,
        path=path,
        created_at=datetime.fromisoformat(created),
        updated_at=datetime.fromisoformat(updated),
        priority=Priority(priority),
        tags=tuple(tags),
        source=Source(source),
        verified=verified,
        confidence=confidence,
        expires_at=datetime.fromisoformat(expires) if expires else None,
        status=Status(status) if status else None,
        superseded_by=superseded_by,
        extra=tuple((k, v) for k, v in json.loads(extra)) if extra else (),
        has_front_matter=has_front_matter,
        id_derived=id_derived,
    )


#: The characters of a memory's content a search hit answers (cut between words); `show` gives it whole.
EXCERPT_CHARS = 1000


@dataclass(frozen=True)
class SearchHit:
    """One search result: the memory (whole), its BM25F score, a snippet with **matches**, its rank (1 = best).

    `to_dict()`, what every face answers, carries the content's first `EXCERPT_CHARS` characters only:
    `content_cut` says whether it was cut, `content_chars` is the whole content's length.
    """

    memory: Memory
    score: float
    snippet: str
    rank: int

    def to_dict(self) -> dict[str, Any]:
        content = self.memory.content
        excerpt = head(content, EXCERPT_CHARS)
        return self.memory.to_dict() | {
            "content": excerpt,
            "content_cut": len(excerpt) < len(content),
            "content_chars": len(content),
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "rank": self.rank,
        }


@dataclass(frozen=True)
class ParseIssue:
    """A file that was skipped: where and why."""

    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason} (skipped; memfile leaves the file as it is)"


#: A long verb's progress (`import_`, `doctor`): called with (step, done, total), the step a word the
#: command line shows beside its bar ("checking", "writing", "indexing"); each step counts from 0 again.
Progress = Callable[[str, int, int], None]


def step(progress: Progress | None, name: str) -> Callable[[int, int], None] | None:
    """One step of `progress`, called with (done, total) as the index calls its own (`Index.refresh`)."""
    return None if progress is None else partial(progress, name)


class Report:
    """A typed result that also reads like a dict (`report["total"]`, `report.get("x")`), with `to_dict()`
    for JSON. Subclasses are dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    def __getitem__(self, name: str) -> Any:
        if name not in getattr(self, "__dataclass_fields__", {}):
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in getattr(self, "__dataclass_fields__", {}) else default


@dataclass(frozen=True)
class StatsReport(Report):
    """`Vault.stats()`: counts of the mind's memories and facts about its index."""

    mind: str
    name: str
    total: int
    by_category: dict[str, int]
    by_priority: dict[str, int]
    by_source: dict[str, int]
    verified: int
    unverified: int
    expired: int
    superseded: int
    proposed: int  # captured, waiting for a person's review (not in the counts above)
    unreadable_files: int
    index_bytes: int
    last_index_update: str | None


@dataclass(frozen=True)
class StatusReport(Report):
    """`Vault.status()`: how the mind's files, index, watcher and git repository stand."""

    mind: str
    on_disk: int
    indexed: int
    stale: list[str]
    unreadable: list[dict[str, Any]]  # path, line (or None), reason
    last_index_update: str | None
    watcher_pid: int | None
    server: dict[str, Any] | None  # pid, address: the vault's `memfile serve`, which answers the command line
    uncommitted: list[str]
    conflicts: list[str]
    git: dict[str, Any] | None  # upstream, remotes, ahead, behind; None without a repository
    semantic: dict[str, Any] | None = None  # model, embedded, total: where semantic search is on or was used


@dataclass(frozen=True)
class StoreRequest:
    """One store, its every field checked once (`Writer.store`): what a write transaction stores, or the
    store queue hands to the process holding the writer lock."""

    category: Category
    key: str
    content: str
    now: datetime  # the moment of the call: created_at and updated_at
    priority: Priority | None  # None: the memory's own (normal for a new one)
    tags: tuple[str, ...] | None  # None: the memory's own
    confidence: float | None
    expires: Any  # a datetime, None (never), or UNSET: the memory's own
    source: Source  # whose memory it is
    actor: Source  # who stores it
    credential: str | None  # the label of the key it was made under (`Memfile-Key:`)
    supersedes: str | None  # the REF of the memory it replaces


@dataclass(frozen=True)
class StoreResult:
    """What `Vault.store` did: the memory as now on disk and what changed."""

    memory: Memory
    created: bool
    changed: bool
    commit: str | None = None
    notices: tuple[str, ...] = field(default=())
    superseded: Memory | None = None  # the memory this store marked superseded, as now on disk


@dataclass(frozen=True)
class ForgetReport(Report):
    """What `Vault.forget_many` did (with `dry_run`: would do): the memories forgotten, by category then key;
    those the filters matched that the caller may not forget (`left_out`: an agent's, a person's, verified
    or critical memory); the one commit (None: a dry run, or nothing to forget)."""

    forgotten: list[Memory]
    left_out: list[Memory]
    commit: str | None = None
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "commit": self.commit,
            "forgotten": [m.to_dict() for m in self.forgotten],
            "left_out": [m.to_dict() for m in self.left_out],
        }


REF_RULE = "an id (mem_...), category/key, a key that is unique in the mind, or the file's path (mind/category/key.md)"


def resolve_ref(ref: object, memories: list[Memory], mind: str, issues: Sequence[ParseIssue] = ()) -> Memory:
    """The one memory a REF names: an id, `category/key`, a key unique in the mind, or the path of its
    file as `list` shows it (`mind/category/key.md`).

    Raises:
        InvalidInput: the REF is malformed or tries to leave the mind (`..`, `/abs`, URL-encoded forms).
        NotFound: no memory matches (naming the file that cannot be read, among `issues`, that may hold it).
        AmbiguousRef: several memories (or copies of one file) match.
    """
    ref = _checked_ref(ref)
    path = ref.endswith(".md")
    matches = _named_by(ref, path, memories, mind)
    if not matches:
        raise _not_found(ref, path, mind, issues)
    if len(matches) > 1:
        copies = len({(m.category, m.key) for m in matches}) == 1 or len({m.id for m in matches}) == 1
        raise AmbiguousRef(
            ref,
            sorted(f"{m.ref} ({m.path})" for m in matches),
            "these files hold the same memory (a copy?): remove or rename all but one"
            if copies
            else "use one of these category/key forms or an id",
        )
    return matches[0]


def _checked_ref(ref: object) -> str:
    """`ref` when it is a REF's shape and stays inside the mind (URL-decoded too). Raises InvalidInput."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput("REF", ref, REF_RULE)
    for text in {ref, unquote(ref)}:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            raise InvalidInput("REF", ref, REF_RULE, reason="it holds a NUL or another control character")
        if "\\" in text or text.startswith("/") or ".." in text:
            raise InvalidInput("REF", ref, REF_RULE, reason="it must not point outside the mind")
        if text.count("/") > 1 and not ref.endswith(".md"):
            raise InvalidInput("REF", ref, REF_RULE, reason="category/key holds one /; a file's path ends in .md")
    return ref


def _named_by(ref: str, path: bool, memories: list[Memory], mind: str) -> list[Memory]:
    """The memories a checked REF names: by path (`path`), id, category/key or key. Raises InvalidInput."""
    if path:
        return [m for m in memories if m.path in (ref, f"{mind}/{ref}")]
    if ID_PATTERN.fullmatch(ref):
        return [m for m in memories if m.id == ref]
    if "/" in ref:
        category_text, key = ref.split("/", 1)
        category = parse_category(category_text, "REF category")
        validate_key(key, "REF key")
        return [m for m in memories if m.category is category and m.key == key]
    validate_key(ref, "REF")
    return [m for m in memories if m.key == ref]


def _not_found(ref: str, path: bool, mind: str, issues: Sequence[ParseIssue]) -> NotFound:
    """No memory named `ref`: naming the unreadable file, among `issues`, that may hold it."""
    name = ref if path else f"{ref.rsplit('/', 1)[-1]}.md"
    unreadable = next((i for i in issues if i.path in (ref, f"{mind}/{ref}") or i.path.endswith(f"/{name}")), None)
    if unreadable is not None:
        where = f"{unreadable.path}:{unreadable.line}" if unreadable.line else unreadable.path
        return NotFound(
            f"no memory {echo(ref)} in mind {mind}: {where} may hold it, but cannot be read ({unreadable.reason})",
            hint="mend_by_hand",
        )
    return NotFound(f"no memory {echo(ref)} in mind {mind}", hint="list")
