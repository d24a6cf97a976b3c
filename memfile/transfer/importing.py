"""`memfile import`: records from a file (memfile's export, Synapse, LangBot, OpenClaw) into one mind, as
one commit or nothing.

Every record is checked before anything is written; the first that fails stops the import with its
number and reason. Ids, dates and unknown keys are written verbatim, so importing twice changes
nothing. docs/sync.md gives the rules for conflicts, agents and secrets.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from .. import fileformat
from ..errors import FileParseError, InvalidInput
from ..model import (
    AGENT_PRIORITY_CAP,
    DEFAULT_CONFIDENCE,
    KNOWN_FIELDS,
    Memory,
    ParseIssue,
    Priority,
    Progress,
    Report,
    Source,
    Status,
    format_datetime,
    new_id,
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
from ..paths import is_ignored_name, is_memory_name, memory_relpath, safe_path
from ..secretscan import SecretPolicy, guard
from .langbot import read_langbot
from .memfile_format import is_memfile_export, read_memfile
from .openclaw import read_openclaw
from .records import FORMATS, ON_CONFLICT, ImportOptions, Incoming
from .synapse import read_synapse

if TYPE_CHECKING:
    from ..writer import Writer

#: The largest import file read (a JSON file is read whole).
MAX_IMPORT_BYTES = 512 * 2**20
#: An id an import writes: memfile's own (mem_...) or a hand-made one as memfile reads it, nothing path-like.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:-]{0,99}")
#: The fields that say what a memory is; the rest (where it lies, how its file was written) can differ.
_SAME_FIELDS_IGNORE = ("path", "mind", "has_front_matter", "id_derived")
#: How far in the future an imported `created_at` or `updated_at` may lie (another machine's clock): a later
#: date would win every `newer` conflict and every sync merge until then, so it is refused.
MAX_CLOCK_SKEW = timedelta(days=1)


@dataclass(frozen=True)
class ImportReport(Report):
    """What `Vault.import_` did (or, with `dry_run`, would do).

    `created` and `updated` list refs (`category/key`); `skipped` and `conflicts` hold
    {record, ref, reason}; `unmapped` says what a reader could not map; `notices` what the
    import changed on its way in (an agent's priority capped, say), then what the write told
    (the index could not be written, a killed sync's leftovers removed: `Vault.notices` of the call).
    """

    format: str
    mind: str
    file: str
    dry_run: bool
    commit: str | None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


# --- reading the file ----------------------------------------------------------


def read_import(source: Path | bytes, name: str, fmt: str | None, options: ImportOptions) -> Incoming:
    """The records of an import file, its format detected when `fmt` is None.

    Raises:
        InvalidInput: the file cannot be read, is not UTF-8, its format cannot be told, or a reader refuses it.
    """
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInput("--from", fmt, FORMATS)
    if isinstance(source, Path) and source.is_dir():
        if fmt not in (None, "openclaw"):
            raise InvalidInput("FILE", name, f"a {fmt} file, not a folder")
        return read_openclaw(source, options)
    data = read_bounded(source, name) if isinstance(source, Path) else source
    if len(data) > MAX_IMPORT_BYTES:
        raise InvalidInput("FILE", name, f"a file of at most {MAX_IMPORT_BYTES // 2**20} MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput("FILE", name, "a UTF-8 text file", reason=f"byte {exc.start} is not UTF-8") from None
    if "\x00" in text:
        raise InvalidInput("FILE", name, "a text file (JSON, JSON Lines or Markdown)", reason="it holds NUL bytes")
    fmt = fmt or detect(text, name)
    if fmt == "openclaw":
        if isinstance(source, Path) and source.is_file():
            return read_openclaw(source, options)
        with tempfile.TemporaryDirectory(prefix="memfile-import-") as folder:  # sent over HTTP, or through a pipe
            base = PurePosixPath(name).name
            path = Path(folder) / (base if base.endswith(".md") else "MEMORY.md")
            path.write_text(text, encoding="utf-8")
            return read_openclaw(path, options)
    if fmt == "memfile":
        return read_memfile(text.split("\n"), name)  # JSON text may hold U+2028, which splitlines splits at
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput("FILE", name, f"a {fmt} JSON file", reason=f"it is not JSON: {exc}") from None
    if fmt == "synapse":
        return read_synapse(value, options)
    if not isinstance(value, dict):
        raise InvalidInput("FILE", name, "a LangBot export envelope (a JSON object with profiles or episodes)")
    return read_langbot(value, options)


def read_bounded(source: Path | BinaryIO, name: str) -> bytes:
    """A file's bytes (or a stream's: standard input), read up to one byte past MAX_IMPORT_BYTES: a device,
    a pipe or a FIFO has no size to check first (`/dev/zero` never ends).

    Raises:
        InvalidInput: no such file, it cannot be read, or it is larger than MAX_IMPORT_BYTES.
    """
    try:
        if isinstance(source, Path):
            with source.open("rb") as handle:
                data = handle.read(MAX_IMPORT_BYTES + 1)
        else:
            data = source.read(MAX_IMPORT_BYTES + 1)
    except FileNotFoundError:
        raise InvalidInput("FILE", name, "an existing file or folder", reason="there is none") from None
    except OSError as exc:
        raise InvalidInput("FILE", name, "a file memfile can read", reason=exc.strerror or str(exc)) from None
    if len(data) > MAX_IMPORT_BYTES:
        most = f"{MAX_IMPORT_BYTES // 2**20} MB"
        raise InvalidInput("FILE", name, f"a file of at most {most}", reason=f"more than {most} were read")
    return data


def detect(text: str, name: str) -> str:
    """Which format a file's text is in: memfile's export, Synapse's JSON, a LangBot envelope or Markdown.

    Raises:
        InvalidInput: none of these (the message says to pass --from).
    """
    stripped = text.lstrip()
    if stripped.startswith("{") and is_memfile_export(stripped.split("\n", 1)[0]):
        return "memfile"
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, list):
            return "synapse"
        if isinstance(value, dict):
            if "profiles" in value or "episodes" in value:
                return "langbot"
            if "memories" in value:
                return "synapse"
    elif name.endswith(".md") or stripped.startswith("#") or not stripped:
        return "openclaw"
    raise InvalidInput(
        "FILE",
        name,
        'memfile\'s export, a Synapse JSON array or {"memories": [...]}, a LangBot envelope, or OpenClaw Markdown',
        reason="its format could not be told; name it with --from " + "|".join(FORMATS),
    )


# --- one record --------------------------------------------------------------


@dataclass
class _Change:
    """One record's memory as it will be written."""

    number: int
    where: str
    memory: Memory
    data: bytes | None  # the exact bytes (raw records, new files); None: made from the old file (`rewritten`)
    old: Memory | None = None


def _memory(record: dict[str, Any], mind: str, relpath: str, now: datetime, latest: datetime) -> Memory:
    """The memory a record describes, defaults filled as a store fills them (verbatim otherwise); a date
    after `latest` (now and MAX_CLOCK_SKEW) is refused."""
    for name in ("category", "key", "content"):
        if record.get(name) is None:
            raise InvalidInput(name, None, "a value: every memory has a category, a key and a content")
    if not isinstance(record["content"], str):
        raise InvalidInput("content", record["content"], "text")
    problem = fileformat.body_problem(record["content"])
    if problem:
        raise InvalidInput("content", _short(record["content"]), "text memfile can write and read back", reason=problem)
    given_id = record.get("id")
    if given_id not in (None, "") and not (
        isinstance(given_id, str) and _ID.fullmatch(given_id) and ".." not in given_id
    ):
        raise InvalidInput("id", given_id, "an id such as mem_01jf3k8q2w7x: letters, digits, space, _ . : -")
    source = parse_source(record["source"]) if record.get("source") is not None else Source.USER
    created = parse_optional_datetime(record.get("created_at"), "created_at")
    updated = parse_optional_datetime(record.get("updated_at"), "updated_at")
    for name, moment in (("created_at", created), ("updated_at", updated)):
        if moment is not None and moment > latest:
            raise InvalidInput(
                name,
                format_datetime(moment),
                f"a time no later than a day from now ({format_datetime(latest - MAX_CLOCK_SKEW)})",
                reason="it lies in the future, and a memory from the future would win every later change",
            )
    created = created or now
    status = parse_status(record["status"]) if record.get("status") is not None else None
    superseded_by = record.get("superseded_by")
    extra = record.get("extra") or {}
    if not isinstance(extra, dict):
        raise InvalidInput("extra", extra, "an object of the front-matter keys memfile does not know")
    clash = [k for k in extra if k in KNOWN_FIELDS]
    if clash:
        raise InvalidInput("extra", clash[0], f"keys other than memfile's own ({', '.join(sorted(KNOWN_FIELDS))})")
    return Memory(
        id=given_id if given_id not in (None, "") else new_id(),  # as memfile reads ids: any text
        mind=mind,
        category=parse_category(record["category"]),
        key=validate_key(record["key"]),
        content=record["content"].replace("\r\n", "\n").strip(),
        path=relpath,
        created_at=created,
        updated_at=updated or created,
        priority=parse_priority(record["priority"]) if record.get("priority") is not None else Priority.NORMAL,
        tags=parse_tags(record.get("tags")),
        source=source,
        verified=parse_bool(record["verified"], "verified")
        if record.get("verified") is not None
        else source is Source.USER,
        confidence=parse_confidence(record["confidence"])
        if record.get("confidence") is not None
        else DEFAULT_CONFIDENCE[source],
        expires_at=parse_optional_datetime(record.get("expires_at"), "expires_at"),
        status=None if status is Status.ACTIVE and superseded_by is None else status,
        superseded_by=parse_memory_id(superseded_by, "superseded_by") if superseded_by is not None else None,
        extra=tuple(extra.items()),
        id_derived=bool(record.get("id_derived")) and given_id == fileformat.derived_id(str(record.get("path"))),
    )


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _target(record: dict[str, Any], mind: str, category: str, key: str, exported: frozenset[str]) -> str:
    """Where a record's file goes: its exported path moved into `mind`, else `mind/category/key.md`.

    An exported path starts with the mind it was exported from: the record's `mind_id`, or, when it gives
    none, this `mind` or one of the minds the file's header names (`exported`). Any other path is refused,
    as is one that would leave that mind (`..`, absolute, `.git`, not a memory file's name).
    """
    path = record.get("path")
    if path is None:
        return memory_relpath(mind, parse_category(category), validate_key(key)).as_posix()
    allowed = "a path inside its mind folder, such as MIND/project/name.md"
    if not isinstance(path, str) or "\\" in path or "\x00" in path:
        raise InvalidInput("path", path, allowed)
    pure = PurePosixPath(path)
    parts = pure.parts
    from_mind = record.get("mind_id")
    if (
        pure.is_absolute()
        or ".." in parts
        or len(parts) < 2
        or (parts[0] != from_mind if from_mind is not None else parts[0] != mind and parts[0] not in exported)
        or not is_memory_name(parts[-1])
    ):
        raise InvalidInput("path", path, allowed, reason="it would leave the mind or is not a memory file's name")
    hidden = next((part for part in parts[1:-1] if is_ignored_name(part)), None)
    if hidden is not None:  # `.git`, memfile's own `.memfile/`, an editor's backup folder: never read, never committed
        raise InvalidInput(
            "path", path, allowed, reason=f"memfile never reads a file in {hidden}/, a hidden or backup folder"
        )
    return "/".join((mind, *parts[1:]))  # parts, as pathlib cut them, hold no "/" and no "."


def _kept(record: dict[str, Any], memory: Memory, old: Memory) -> Memory:
    """`memory` with what its record does not say taken from the mind's `old`, as a rewrite keeps it.

    The file's unknown keys stay, in their order: a key the record gives takes the record's value, a new
    one comes after them (an import never removes one). A record that gives neither `status` nor
    `superseded_by` (a Synapse memory) leaves a superseded memory superseded. Then `_dates_kept`.
    """
    kept: dict[str, Any] = {}
    if old.extra:
        kept["extra"] = _merged_extra(old.extra, memory.extra)
    if record.get("status") is None and record.get("superseded_by") is None:
        kept["status"], kept["superseded_by"] = old.status, old.superseded_by
    return _dates_kept(record, replace(memory, **kept) if kept else memory, old)


def _merged_extra(old: tuple[tuple[str, Any], ...], given: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """The file's unknown keys in file order with the record's values (an equal one keeps the file's, a
    YAML date say), then the record's new keys in its order."""
    if not given:
        return old
    new, held = dict(given), dict(old)
    merged = [(name, value if name not in new or _plain(value) == new[name] else new[name]) for name, value in old]
    return (*merged, *((name, value) for name, value in given if name not in held))


def _dates_kept(record: dict[str, Any], memory: Memory, old: Memory) -> Memory:
    """`memory` with the dates its record does not give (or only guesses) taken from the mind's `old`.

    A Synapse memory without dates, or a MEMORY.md section dated by the file's mtime, says nothing
    of when it was made: imported again it is unchanged, not updated to now. If it says something
    new, it keeps `old`'s created_at and its own updated_at (now, or the guess).
    """
    guessed = bool(record.get("_dates_guessed"))
    if guessed or record.get("created_at") is None:
        memory = replace(memory, created_at=old.created_at)
    if guessed or record.get("updated_at") is None:
        kept = replace(memory, updated_at=old.updated_at)
        if not _differ(old, kept):
            return kept
    return memory


def _differ(a: Memory, b: Memory) -> list[str]:
    """The fields in which two memories say different things (where their files lie and how they are
    written aside): [] when they say the same."""
    left, right = a.to_dict(), b.to_dict()
    return [k for k in left if k not in _SAME_FIELDS_IGNORE and left[k] != right[k]]


def _from_raw(record: dict[str, Any], memory: Memory) -> tuple[bytes, Memory]:
    """A raw record's bytes and the memory they hold, checked: its sha256, and that they say what its
    fields say.

    Raises:
        InvalidInput: the text is not a string, its sha256 differs, it cannot be read, or its front-matter
            disagrees with the record's fields.
    """
    raw = record["raw"]
    if not isinstance(raw, str):
        raise InvalidInput("raw", type(raw).__name__, "the file's text")
    data = raw.encode("utf-8", "surrogatepass")
    if record.get("sha256") != hashlib.sha256(data).hexdigest():
        raise InvalidInput("sha256", record.get("sha256"), "the sha256 of raw", reason="the text was changed or cut")
    origin = str(record.get("path") or memory.path)
    for mtime in (memory.updated_at, memory.created_at):  # dates the file lacks came from its mtime
        try:
            parsed = fileformat.parse(data, origin, mtime)
        except FileParseError as exc:
            raise InvalidInput("raw", origin, "a memory file memfile can read", reason=str(exc)) from None
        differ = _differ(parsed, memory)
        if not differ:
            return data, replace(parsed, mind=memory.mind, path=memory.path)
    raise InvalidInput(
        "raw",
        origin,
        "a file whose front-matter says what the record's fields say",
        reason=f"they differ in {', '.join(differ)}",
    )


def _reads_back(memory: Memory) -> None:
    """Refuse a memory whose file memfile could not read back (unknown keys nested too deep, say)."""
    try:
        fileformat.parse(fileformat.serialize(memory).encode("utf-8"), memory.path, memory.updated_at)
    except FileParseError as exc:
        raise InvalidInput(
            "extra", _short(str(dict(memory.extra))), "front-matter memfile can read back", reason=exc.reason
        ) from None


def _as_agent(memory: Memory, record: dict[str, Any]) -> Memory:
    """An agent's import: unverified, `source: agent`, at most high (critical memories are pinned)."""
    return replace(
        memory,
        source=Source.AGENT,
        verified=False,
        priority=AGENT_PRIORITY_CAP if memory.priority is Priority.CRITICAL else memory.priority,
        confidence=memory.confidence if record.get("confidence") is not None else DEFAULT_CONFIDENCE[Source.AGENT],
    )


# --- the plan ------------------------------------------------------------------


def _at(where: str, exc: InvalidInput) -> InvalidInput:
    return InvalidInput(f"{exc.field} of {where}", exc.value, exc.allowed, reason=exc.reason)


def plan(
    incoming: Incoming,
    *,
    name: str,
    root: Path,
    mind: str,
    memories: list[Memory],
    issues: list[ParseIssue],
    actor: Source,
    on_conflict: str,
    from_mind: str | None,
    now: datetime,
    secrets: SecretPolicy | None = None,
    allow_secret: bool = False,
    ignored: Callable[[list[str]], set[str]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """Check every record and decide what each does to the mind; nothing is written.

    `secrets`, `allow_secret`: the vault's `[secrets]` and a person's --allow-secret (`secretscan.guard`).
    `ignored`: the paths among those given that git ignores (`GitStore.ignored`): a new file there is refused.
    `progress`: called with (records checked, records).

    Raises:
        InvalidInput: the first record that fails, with its number and reason (a new file git would ignore too).
        SecretFound: the first record whose content, tags, unknown keys, raw text, or (for a new memory) id
            or path hold what looks like a secret (the policy refuses it).
    """
    if on_conflict not in ON_CONFLICT:
        raise InvalidInput("--on-conflict", on_conflict, ON_CONFLICT)
    result = Plan(incoming, name, root, mind, actor, on_conflict, now, memories, issues)
    records = _of_mind(incoming, from_mind)
    for number, record in enumerate(records, start=1):
        if progress is not None:
            progress(number - 1, len(records))
        where, relpath, memory, data, given = result.read(number, record)
        result.claim(where, memory.id, memory.ref, relpath)
        result.came_from(record)
        old = result.by_id.get(memory.id) or (result.by_path.get(relpath) if memory.id_derived else None)
        on_disk = _bytes(root / old.path) if old is not None and data is not None else None
        for what, text in _written_texts(number, where, record, memory, data, old, on_disk):
            warned = guard(secrets, text, what=what, allow_secret=allow_secret, agent=actor is Source.AGENT)
            if warned:
                result.notices.append(warned)
        result.decide(_Change(number, where, memory, data, old), record, relpath, given, on_disk)
    _refuse_ignored(result.created, ignored)
    if progress is not None:
        progress(len(records), len(records))
    result.notices.extend(result.said())
    return result


class Plan:
    """What an import does to the mind, decided before anything is written (the changes, and what its
    report tells), and what `plan` knows of the mind while it walks the records: one method per step of a
    record."""

    def __init__(
        self,
        incoming: Incoming,
        name: str,
        root: Path,
        mind: str,
        actor: Source,
        on_conflict: str,
        now: datetime,
        memories: list[Memory],
        issues: list[ParseIssue],
    ) -> None:
        self.format, self.file = incoming.format, name
        self.unmapped, self.notices = list(incoming.unmapped), list(incoming.notices)
        self.created: list[_Change] = []
        self.updated: list[_Change] = []
        self.unchanged = 0
        self.skipped: list[dict[str, Any]] = []
        self.conflicts: list[dict[str, Any]] = []
        self.root, self.mind, self.actor, self.on_conflict = root, mind, actor, on_conflict
        self.now, self.latest, self.exported = now, now + MAX_CLOCK_SKEW, frozenset(incoming.minds)
        self.by_id = {m.id: m for m in memories}
        self.by_ref: dict[str, list[Memory]] = {}
        for m in memories:
            self.by_ref.setdefault(m.ref, []).append(m)
        self.by_path = {m.path: m for m in memories}
        self.unreadable = {i.path for i in issues}
        self.seen: dict[str, str] = {}  # id, ref and path -> the record that claimed them
        self.checked: set[str] = set()  # folders known to stay inside the mind
        self.capped = 0  # critical memories an agent's import planned as high
        self.elsewhere: dict[str, int] = {}  # the other minds the records say they come from (mind_id): how many

    def read(
        self, number: int, record: Any
    ) -> tuple[str, str, Memory, bytes | None, tuple[Memory, bytes | None] | None]:
        """One record checked and read: (where, its path, its memory, its raw bytes, what the record said
        when an agent's import changed it).

        Raises:
            InvalidInput: the record is not an object, not UTF-8, or a field (or its raw text) is refused.
        """
        if not isinstance(record, dict):
            raise InvalidInput(f"record {number}", type(record).__name__, "a JSON object describing one memory")
        where = str(record.get("_where") or f"record {number}")
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                where, "text", "UTF-8 text", reason="it holds an unpaired surrogate (\\ud800...)"
            ) from None
        mind = self.mind
        try:
            relpath = _target(record, mind, record.get("category") or "", record.get("key") or "", self.exported)
            folder = relpath.rpartition("/")[0]
            if folder not in self.checked:  # no symlinked folder leads out of the mind (one check a folder)
                safe_path(self.root, relpath, mind)
                self.checked.add(folder)
            memory = _memory(record, mind, relpath, self.now, self.latest)
            data, memory = _from_raw(record, memory) if record.get("raw") is not None else (None, memory)
            if data is None and memory.extra:  # unknown keys of any shape: the file must read back
                _reads_back(memory)
        except InvalidInput as exc:
            raise _at(where, exc) from None
        given: tuple[Memory, bytes | None] | None = None
        if self.actor is Source.AGENT and (agent := _as_agent(memory, record)) != memory:
            given = memory, data
            data = fileformat.rewrite(data, relpath, memory, agent) if data is not None else None
            memory = agent
        return where, relpath, memory, data, given

    def claim(self, where: str, *claims: str) -> None:
        """Raises InvalidInput: an earlier record names the same id, category/key or path."""
        for claim in claims:
            if claim in self.seen:
                raise InvalidInput(
                    where,
                    claim,
                    "one record per memory",
                    reason=f"{self.seen[claim]} names the same id, category/key or path",
                )
            self.seen[claim] = where

    def came_from(self, record: dict[str, Any]) -> None:
        """Count a record another mind exported (its `mind_id`)."""
        other = record.get("mind_id")
        if other is not None and other != self.mind:
            self.elsewhere[str(other)] = self.elsewhere.get(str(other), 0) + 1

    def decide(
        self,
        change: _Change,
        record: dict[str, Any],
        relpath: str,
        given: tuple[Memory, bytes | None] | None,
        on_disk: bytes | None,
    ) -> None:
        """Put a record in the plan: created, updated, unchanged, skipped or a conflict.

        Raises:
            InvalidInput: an earlier record changes the same memory of the mind.
        """
        memory, old, where = change.memory, change.old, change.where
        lowered = given is not None and given[0].priority is not memory.priority
        entry: dict[str, Any] = {"record": change.number, "ref": memory.ref}
        if old is None:
            if conflict := self._in_the_way(memory, relpath):
                self.conflicts.append(entry | {"reason": conflict})
            else:
                self.created.append(change)
                self.capped += lowered
            return
        if old.ref != memory.ref:  # keys never change (SPEC 2), an import's neither
            self.conflicts.append(
                entry
                | {
                    "reason": f"the same id ({memory.id}) is {old.ref} here: an import does not move a memory "
                    "to another category/key; store it under the new name instead"
                }
            )
            return
        if old.path in self.seen and self.seen[old.path] != where:
            raise InvalidInput(where, old.path, "one record per memory", reason=f"{self.seen[old.path]} changes it too")
        self.seen[old.path] = where
        memory, data = _placed(record, memory, change.data, old, relpath)
        if _unchanged(memory, data, old, on_disk) or (
            given is not None and _unchanged(*_placed(record, *given, old, relpath), old, on_disk)
        ):  # an agent's record saying what the mind holds changes nothing, even where it may change nothing
            self.unchanged += 1
        elif self.actor is Source.AGENT and (old.verified or old.priority is Priority.CRITICAL):
            self.conflicts.append(
                entry | {"reason": f"{old.ref} was verified by a person or is critical: an agent cannot change it"}
            )
        elif self.on_conflict == "skip":
            self.skipped.append(entry | {"reason": "differs from the mind's; kept the mind's (--on-conflict skip)"})
        elif self.on_conflict == "newer" and memory.updated_at <= old.updated_at:
            self.skipped.append(entry | {"reason": "the mind's is as new or newer (updated_at); kept the mind's"})
        else:
            self.updated.append(replace(change, memory=memory, data=data))
            self.capped += lowered

    def _in_the_way(self, memory: Memory, relpath: str) -> str | None:
        """Why a new memory cannot be created (another memory or file holds its name or path), or None."""
        if self.by_ref.get(memory.ref):
            return (
                f"{memory.ref} is already in mind {self.mind} as another memory ({self.by_ref[memory.ref][0].id}); "
                "not merged: forget or rename one of them, then import again"
            )
        if relpath in self.by_path or relpath in self.unreadable or os.path.lexists(self.root / relpath):
            return f"{relpath} already holds another file; move it away, then import again"
        return None

    def said(self) -> list[str]:
        """What the plan tells besides its counts: critical memories lowered, records of other minds."""
        capped = f"{self.capped} critical memories were imported as high: an agent cannot write critical"
        said = [capped] if self.capped else []
        for other, count in sorted(self.elsewhere.items()):
            said.append(
                f"{count} {'memory' if count == 1 else 'memories'} of mind {other} (their mind_id) went into mind "
                f"{self.mind}: a record's mind_id and path say where it was exported from, the import writes only "
                "into its own mind"
            )
        return said

    def report(self, dry_run: bool, commit: str | None) -> ImportReport:
        told: dict[str, Any] = {f.name: getattr(self, f.name, None) for f in fields(ImportReport)}
        told |= {"created": [c.memory.ref for c in self.created], "updated": [c.memory.ref for c in self.updated]}
        return ImportReport(**(told | {"dry_run": dry_run, "commit": commit}))


def _placed(
    record: dict[str, Any], memory: Memory, data: bytes | None, old: Memory, relpath: str
) -> tuple[Memory, bytes | None]:
    """A record's memory (and raw text) as it would replace the mind's `old`: at old's path, with what the
    record does not say kept from old (`_kept`); a raw text that would say another memory at that path is
    dropped (the fields are rewritten instead)."""
    memory = replace(memory, path=old.path)
    if data is None:
        return _kept(record, memory, old), None
    if old.path != relpath and _differ(fileformat.parse(data, old.path, old.updated_at), memory):
        return memory, None
    return memory, data


def _unchanged(memory: Memory, data: bytes | None, old: Memory, on_disk: bytes | None) -> bool:
    """Whether writing `memory` (or its raw `data`) over the mind's `old` would change nothing."""
    return data == on_disk if data is not None else not _differ(old, memory)


def _refuse_ignored(created: list[_Change], ignored: Callable[[list[str]], set[str]] | None) -> None:
    """Refuse the first new file the vault's .gitignore keeps out of git: git would refuse to commit it."""
    hidden = ignored([change.memory.path for change in created]) if ignored is not None and created else set()
    for change in created:
        if change.memory.path in hidden:
            raise InvalidInput(
                f"path of {change.where}",
                change.memory.path,
                "a path git keeps versions of",
                reason="the vault's .gitignore ignores it, so git would not commit the file",
            )


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _of_mind(incoming: Incoming, from_mind: str | None) -> list[Any]:
    """The records to import: those of `from_mind`; a file of several minds (their `mind_id`, in memfile's
    export or Synapse's JSON) needs it named."""
    minds = sorted({str(r.get("mind_id")) for r in incoming.records if isinstance(r, dict) and r.get("mind_id")})
    if from_mind is not None:
        if (incoming.format == "memfile" or minds) and from_mind not in minds:
            raise InvalidInput("--from-mind", from_mind, minds or ["(the file holds no memory)"])
        return [r for r in incoming.records if not isinstance(r, dict) or r.get("mind_id") in (from_mind, None)]
    if len(minds) > 1:
        raise InvalidInput(
            "--from-mind",
            None,
            minds,
            reason=f"the file holds the memories of {len(minds)} minds: import one at a time",
        )
    return incoming.records


def _written_texts(
    number: int,
    where: str,
    record: dict[str, Any],
    memory: Memory,
    data: bytes | None,
    old: Memory | None,
    on_disk: bytes | None,
) -> list[tuple[str, str]]:
    """The texts record `number` (`where`) writes into the mind, each with how a secret's refusal names it,
    to pass `secretscan.guard`: not what stays as it is there (a person's hand edit is theirs). A new
    memory's id and path (git keeps both); a raw record's whole text (unless the file holds it already);
    else its content, its tags, and each unknown key it gives whose value the mind's memory does not hold."""
    # how messages name the record: "record 2, memories[1] (id ...) (fact/s2): the content"
    named = f"{where} ({memory.ref})" if where == f"record {number}" else f"record {number}, {where} ({memory.ref})"
    texts = [(f"{named}: the id", memory.id), (f"{named}: the path", memory.path)] if old is None else []
    if data is not None:
        if old is None or data != on_disk:
            texts.append((f"{named}: the file's text (raw)", record["raw"]))
        return texts
    if old is None or old.content != memory.content:
        texts.append((f"{named}: the content", memory.content))
    if memory.tags and (old is None or old.tags != memory.tags):
        texts.append((f"{named}: a tag", "\n".join(memory.tags)))
    held = dict(old.extra) if old is not None else {}
    for name, value in memory.extra:
        if name not in held or _plain(held[name]) != value:
            texts.append((f"{named}: the front-matter key {name!r}", "\n".join(_scanned_lines(str(name), value))))
    return texts


def _scanned_lines(name: str, value: Any) -> Iterator[str]:
    """An unknown key as the scan for secrets reads it: a `name: value` line per value, nested ones too (the
    keyword rule finds `password: ...`; a value-shaped rule finds a token anywhere)."""
    if isinstance(value, dict):
        yield f"{name}:"
        for inner, item in value.items():
            yield from _scanned_lines(str(inner), item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _scanned_lines(name, item)
    else:
        yield f"{name}: {value}"


def _plain(value: Any) -> Any:
    """A front-matter value as an export record gives it (`Memory.to_dict`'s `extra`: a YAML date as ISO text)."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


# --- writing -------------------------------------------------------------------


def apply(result: Plan, writer: Writer, actor: Source, progress: Progress | None = None) -> str | None:
    """Write the plan as one commit (`import N memories from FILE (actor)`), for a caller holding the lock;
    `progress`: the writer's steps, `writing` and `indexing` (`Writer.progress`)."""
    changes: list[tuple[str, bytes | None]] = []
    for change in result.created:
        data = change.data if change.data is not None else fileformat.serialize(change.memory).encode("utf-8")
        changes.append((change.memory.path, data))
    for change in result.updated:
        assert change.old is not None
        if change.data is not None:
            writer.record_hand_edit(change.old)
            changes.append((change.old.path, change.data))
        else:
            changes.append((change.old.path, writer.rewritten(change.old, change.memory)))
    if not changes:
        return None
    count = len(changes)
    subject = f"import {count} {'memory' if count == 1 else 'memories'} from {result.file} ({actor})"
    writer.progress = progress
    try:
        return writer.apply_all(changes, subject)
    finally:
        writer.progress = None
