"""History of a vault, read from its git repository: versions of a memory, old versions, restore, undo, log.

The Vault's `History` collaborator: git is the record of every version, so history keeps nothing of its
own; restore and undo write through the Vault's `Writer`. Everything stays in the Vault's mind, and an
agent's restore writes only what an agent may write.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import fileformat
from .config import plain
from .errors import Conflict, FileParseError, InvalidInput, NotFound, Notice, Refused, echo
from .files import MAX_FILE_BYTES
from .model import (
    AGENT_PRIORITY_CAP,
    ID_PATTERN,
    Memory,
    ParseIssue,
    Source,
    StoreResult,
    parse_category,
    parse_duration,
    resolve_ref,
    utc_now,
    validate_key,
)
from .paths import is_walked, memory_relpath, safe_path

if TYPE_CHECKING:
    from .git.store import Commit, GitStore
    from .index import Index
    from .writer import Writer


@dataclass(frozen=True)
class Version:
    """One version of a memory: the commit that made it and what it changed. `memory` is None when the
    commit removed the file (`forget`) or it could not be read at that commit (`problem` says why)."""

    sha: str
    date: str
    author: str
    source: str | None
    message: str
    memory: Memory | None
    changed: tuple[str, ...] = ()  # front-matter fields (and `content`) that differ from the version before
    diff: str = ""  # a short unified diff of the body against the version before
    removed: bool = False
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.sha,
            "date": self.date,
            "author": self.author,
            "source": self.source,
            "message": self.message,
            "removed": self.removed,
            "changed": list(self.changed),
            "diff": self.diff,
            "problem": self.problem,
            "memory": self.memory.to_dict() if self.memory else None,
        }


@dataclass(frozen=True)
class LogEntry:
    """One commit of a mind's changelog: `paths` are the files of the mind it touched."""

    sha: str
    date: str
    author: str
    message: str
    paths: tuple[str, ...] = field(default=())
    keys: tuple[str, ...] = field(default=())  # the labels of the served credentials it was made with

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.sha,
            "date": self.date,
            "author": self.author,
            "message": self.message,
            "paths": list(self.paths),
            "keys": list(self.keys),
        }


#: The subjects of memfile's own commits (`store fact/x (agent)`, `record hand edit of fact/x`, ...).
MEMFILE_SUBJECT = re.compile(
    r"^(store|forget|verify|edit|reactivate|restore|resolve|undo|record hand edits?|init|ignore)\b"
)
_SOURCE = re.compile(r"\((user|agent)\)")
_REVERTS = re.compile(r"^reverts ([0-9a-f]{40})$", re.MULTILINE)
_MIND = re.compile(r"^mind: (\S+)$", re.MULTILINE)
_KEY = re.compile(r"^Memfile-Key: (\S+)", re.MULTILINE)  # a label, then the refs it stored in a shared commit
_DURATION = re.compile(r"\d+\s*[mhdw]", re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?")
_AT_RULE = "a commit (sha, HEAD~2, a branch), a date (2026-05-01), or a duration back (7d)"
_SINCE_RULE = "a duration (30m, 12h, 7d, 2w) or a date (2026-05-01)"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)  # git's dates start here: nothing in a repository is older


class History:
    """The history verbs of one mind, over its git store, its index (the memories now) and its writer."""

    def __init__(self, writer: Writer, index: Index) -> None:
        self.root, self.mind, self.notices = writer.root, writer.mind, writer.notices
        self._writer, self._index = writer, index

    @property
    def _git(self) -> GitStore:
        return self._writer.git

    def _history_path(self, ref: str) -> str:
        """The file of a REF, for a memory on disk or one that only git remembers (forgotten)."""
        direct = None
        if isinstance(ref, str) and ref.count("/") == 1 and ".." not in ref and "\\" not in ref:
            category, key = ref.split("/", 1)
            direct = memory_relpath(self.mind, parse_category(category, "REF category"), validate_key(key, "REF key"))
            if (self.root / direct).is_file():  # the usual place: no need to read every memory
                return direct.as_posix()
        try:
            return resolve_ref(ref, self._index.memories(), self.mind).path
        except NotFound:
            pass
        if direct is not None and self._git.log(direct.as_posix(), limit=1, names=False):
            return direct.as_posix()
        if ID_PATTERN.fullmatch(ref):
            found = self._git.paths_that_held(f"id: {ref}", self.mind)
            if found:
                return found[0]
        raise NotFound(f"no memory {echo(ref)} in mind {self.mind}, on disk or in its history", hint="log")

    def history(self, ref: str) -> list[Version]:
        relpath = self._history_path(ref)
        # Oldest first, to diff each against the one before.
        commits = list(reversed(self._git.log(relpath, names=False)))
        contents = self._git.read_all([(commit.sha, relpath) for commit in commits])
        versions: list[Version] = []
        for commit, data in zip(commits, contents, strict=True):
            previous = versions[-1].memory if versions else None
            memory, problem = None, None
            if data is not None:
                try:
                    memory = fileformat.parse(data, relpath, _commit_time(commit))
                except FileParseError as exc:
                    problem = f"line {exc.line}: {exc.reason}" if exc.line else exc.reason
            versions.append(
                Version(
                    commit.sha,
                    commit.date,
                    commit.author,
                    _source_of(commit),
                    commit.subject,
                    memory,
                    _changed(previous, memory),
                    _body_diff(previous, memory),
                    removed=data is None,
                    problem=problem,
                )
            )
        if self._writer.actor is Source.AGENT:  # a captured memory waits for a person: no agent reads it
            versions = [v for v in versions if v.memory is None or not v.memory.proposed]
            if all(v.memory is None for v in versions):
                raise NotFound(f"no memory {echo(ref)} in mind {self.mind}, on disk or in its history", hint="log")
        return list(reversed(versions))

    def show_at(self, ref: str, at: str | datetime) -> Memory:
        relpath = self._history_path(ref)
        sha = self._revision(at, relpath)
        data = self._version_bytes(sha, relpath)
        if data is None:
            raise NotFound(f"{ref} did not exist at {at} ({sha[:8]})", hint="history", hint_values=[ref])
        commit = self._git.log(relpath, limit=1, names=False)
        moment = _commit_time(commit[0]) if commit else utc_now()
        memory = fileformat.parse(data, relpath, moment)
        if memory.proposed and self._writer.actor is Source.AGENT:  # waiting for a person then: no agent's
            raise NotFound(f"{ref} did not exist at {at} ({sha[:8]})", hint="history", hint_values=[ref])
        return memory

    def commit_at(self, at: str | datetime) -> tuple[str, datetime]:
        """The commit `at` names and its time: a revision names its commit; a date or a duration back, the
        last commit of the branch at or before that moment (a moment to come: the latest).

        Raises:
            InvalidInput: `at` names no commit and no real date, or a moment before the first commit.
        """
        sha = self._revision(at, ".", "the vault")
        return sha, _commit_time(self._git.log(rev=sha, limit=1, names=False)[0])

    def mind_at(self, sha: str, moment: datetime) -> tuple[list[Memory], list[ParseIssue]]:
        """The mind as the commit `sha` (of time `moment`) held it, read from git alone (no checkout,
        nothing written): the memories of the files a walk of its checkout would read, and the files that
        could not be parsed. A file without dates takes the commit's time."""
        tree = {path: blob for path, blob in self._git.tree(sha, self.mind).items() if is_walked(path)}
        # A file the work tree holds as the commit did is not parsed again: the index's memory of it is
        # the one its bytes make, unless it took a date from the file's mtime (`dates_given`).
        live: dict[str, Memory] = {}
        if not plain("as_of"):
            changed = self._git.changed_since(sha, self.mind)
            live = {m.path: m for m in self._index.memories() if m.path in tree and m.path not in changed}
        memories, issues = [], []
        for path, data in zip(tree, self._git.read_objects(list(tree.values()), f"mind {self.mind} at {sha[:8]}")):
            known = live.get(path)
            if known is not None and data is not None and fileformat.dates_given(data, known):
                memories.append(known)
                continue
            try:
                if data is not None and len(data) > MAX_FILE_BYTES:  # what reading its checkout refuses
                    raise FileParseError(path, None, f"file is larger than {MAX_FILE_BYTES // 2**20} MB")
                memories.append(fileformat.parse(data or b"", path, moment))
            except FileParseError as exc:
                issues.append(ParseIssue(path, exc.line, exc.reason))
        return memories, issues

    def _revision(self, at: str | datetime, relpath: str, what: str = "the memory") -> str:
        """The commit `at` names: a revision, else the last commit of `relpath` at the moment `at` names."""
        sha = self._git.resolve(at) if isinstance(at, str) else None
        if sha is not None:
            return sha
        moment = _moment(at, "at", _AT_RULE)
        found = None
        if moment >= utc_now():  # the future: what is there now (also past a clock that ran ahead)
            latest = self._git.log(relpath, limit=1, names=False)
            found = latest[0].sha if latest else None
        elif moment >= _EPOCH:
            found = self._git.last_before(_git_date(moment), relpath)
        if found is None:
            raise InvalidInput("at", at, _AT_RULE, reason=f"no version of {what} is that old")
        return found

    def _version_bytes(self, sha: str, relpath: str) -> bytes | None:
        # read_all, not read: the git CLI wrapper behind `read` drops a file's last newline.
        return self._git.read_all([(sha, relpath)])[0]

    def restore(self, ref: str, at: str | datetime | None = None) -> StoreResult:
        with self._writer.transaction():
            relpath = self._history_path(ref)
            if at is None:  # the newest version git holds (before a forget, the last one)
                commits = self._git.log(relpath, names=False)
                contents = self._git.read_all([(c.sha, relpath) for c in commits])
                sha = next((c.sha for c, data in zip(commits, contents, strict=True) if data is not None), "")
                if not sha:
                    raise NotFound(f"git holds no version of {ref}")
            else:
                sha = self._revision(at, relpath)
            data = self._version_bytes(sha, relpath)
            if data is None:
                raise NotFound(
                    f"{ref} did not exist at {at} (commit {sha[:8]})", hint="restore_last", hint_values=[ref]
                )
            old = fileformat.parse(data, relpath, utc_now())
            current = next((m for m in self._index.memories() if m.path == relpath), None)
            if current is not None and current.id != old.id:  # the path holds a memory stored since
                raise Conflict(
                    f"{current.ref} is now another memory ({current.id}) than the one of commit {sha[:8]} "
                    f"({old.id}); restoring would replace it",
                    hint="forget_first",
                    hint_values=[current.ref, current.id],
                )
            if self._writer.actor is Source.AGENT:  # never what the file said: a person's version stays the person's
                data, mine = _agents_version(data, relpath, old)
                if mine != old:
                    self.notices.append(
                        Notice(
                            f"restored {old.ref} as the agent's memory (unverified, priority {mine.priority})",
                            "verify_by_person",
                            [old.ref],
                        )
                    )
                old = mine
            if current is None and safe_path(self.root, relpath, self.mind).exists():
                raise Conflict(f"{relpath} exists but cannot be read (see the warning above); fix or move it first")
            if current is not None:
                if self._writer.actor is Source.AGENT and current.verified:
                    raise Refused(f"{current.ref} was verified by a person, so an agent cannot change it; ask the user")
                self._writer.record_hand_edit(current)
            sha_new = self._writer.apply(relpath, data, "restore", f"{old.ref} from {sha[:8]}", self._writer.actor)
            return StoreResult(
                old, created=current is None, changed=sha_new is not None, commit=sha_new, notices=tuple(self.notices)
            )

    def undo(self) -> LogEntry:
        with self._writer.transaction():
            commits = self._git.log(first_parent=True)  # what a sync merged in was made on another machine
            undone = {found.group(1) for c in commits for found in [_REVERTS.search(c.body)] if found}
            settled = {c.sha for c in commits if c.sha in undone or _REVERTS.search(c.body)}
            last = next(
                (
                    c
                    for c in commits
                    if c.sha not in settled and MEMFILE_SUBJECT.match(c.subject) and _of_mind(c, self.mind)
                ),
                None,
            )
            if last is None or last.subject.startswith(("init", "ignore")) or last is commits[-1]:
                raise Refused(f"mind {self.mind} has no memfile change left to undo (only its creation)", hint="log")
            if self._writer.actor is Source.AGENT and "(agent)" not in last.subject:
                raise Refused(f"{last.subject!r} was a person's change; an agent can only undo its own changes")
            outside = [p for p in last.paths if not p.startswith(f"{self.mind}/")]
            if outside or not last.paths:
                raise Refused(
                    f"{last.subject!r} (commit {last.sha[:8]}) also changed "
                    f"{', '.join(outside) or 'no file'}, outside mind {self.mind}, so its undo would "
                    "reach beyond this mind; change the memory instead",
                    hint="log",
                )
            later = [c for c in commits[: commits.index(last)] if c.sha not in settled]
            clash = sorted({p for c in later for p in c.paths} & set(last.paths))
            if clash:
                raise Refused(
                    f"undoing {last.subject!r} would discard later changes to {', '.join(clash)} "
                    f"(commit {later[-1].sha[:8]} and after); change the memory instead",
                    hint="log",
                )
            dirty = sorted(set(self._git.changed_paths(".")) & set(last.paths))
            if dirty:
                raise Refused(f"{', '.join(dirty)} has changes not yet committed; commit or discard them first")
            subject = f"undo: {last.subject}"
            sha = self._git.revert(last.sha, f"{subject}\n\nreverts {last.sha}\n{self._writer.trailers()}")
            self._index.refresh(paths=list(last.paths), wait=True)
            return LogEntry(sha or "", utc_now().isoformat(), "", subject, last.paths)

    def log(self, since: str | datetime | None = None, limit: int | None = None) -> list[LogEntry]:
        after = None
        if since is not None:
            moment = _moment(since, "since", _SINCE_RULE)
            if moment > utc_now():
                return []
            after = _git_date(moment) if moment >= _EPOCH else None
        commits = self._git.log(self.mind, since=after, limit=limit)
        return [LogEntry(c.sha, c.date, c.author, c.subject, c.paths, tuple(_KEY.findall(c.body))) for c in commits]


def _commit_time(commit: Commit) -> datetime:
    return datetime.fromisoformat(commit.date).astimezone(timezone.utc)


def _source_of(commit: Commit) -> str | None:
    found = _SOURCE.search(commit.subject)
    return found.group(1) if found else None


def _changed(before: Memory | None, after: Memory | None) -> tuple[str, ...]:
    if before is None or after is None:
        return ()
    old, new = fileformat.front_matter_fields(before), fileformat.front_matter_fields(after)
    fields = [name for name in new.keys() | old.keys() if name != "updated_at" and old.get(name) != new.get(name)]
    fields.sort(key=lambda name: list(new).index(name) if name in new else len(new))
    return tuple(fields + (["content"] if before.content != after.content else []))


def _body_diff(before: Memory | None, after: Memory | None, lines: int = 12) -> str:
    if before is None or after is None or before.content == after.content:
        return ""
    diff = difflib.unified_diff(before.content.splitlines(), after.content.splitlines(), lineterm="", n=1)
    body = [line for line in diff if not line.startswith(("---", "+++"))]
    return "\n".join(body[:lines] + (["…"] if len(body) > lines else []))


def _of_mind(commit: Commit, mind: str) -> bool:
    """True when `commit` changed `mind`: memfile's own commits name their mind (`mind: NAME`); any other
    commit (a person's, a sync's merge) by the paths it touched."""
    named = _MIND.findall(commit.body)
    if named and MEMFILE_SUBJECT.match(commit.subject):
        return named[-1] == mind
    return any(path.startswith(f"{mind}/") for path in commit.paths)


def _moment(value: str | datetime, field: str, rule: str) -> datetime:
    """The moment `value` names: a duration back from now (`7d`) or a date (local time unless it says so).

    Raises:
        InvalidInput: `value` is neither, names a day no calendar has, or reaches back before the year 1.
    """
    if isinstance(value, datetime):  # from the Python API
        return value if value.tzinfo is not None else value.astimezone()
    text = value.strip() if isinstance(value, str) else ""
    if _DURATION.fullmatch(text):
        try:
            return utc_now() - parse_duration(text, field)
        except (InvalidInput, OverflowError):
            raise InvalidInput(field, value, rule, reason="that reaches back before the year 1") from None
    if not _DATE.fullmatch(text):
        raise InvalidInput(field, value, rule)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(field, value, rule, reason="no calendar has that day or time") from None
    if moment.tzinfo is not None:
        return moment
    try:
        return moment.astimezone()  # as git reads a date without an offset: this machine's time
    except (OverflowError, OSError, ValueError):  # the first or last days of the calendar
        return moment.replace(tzinfo=timezone.utc)


def _git_date(moment: datetime) -> str:
    """`moment` as git reads it without guessing (seconds since 1970)."""
    return f"@{int(moment.timestamp())} +0000"


def _agents_version(data: bytes, relpath: str, memory: Memory) -> tuple[bytes, Memory]:
    """A version of a memory as an agent may write it: its own (`source: agent`), unverified, priority at most high.

    Raises:
        Refused: the file cannot be rewritten so that it reads back that way.
    """
    priority = AGENT_PRIORITY_CAP if memory.priority.rank < AGENT_PRIORITY_CAP.rank else memory.priority
    mine = replace(memory, source=Source.AGENT, verified=False, priority=priority, id_derived=False)
    if mine == memory:
        return data, memory
    refusal = Refused(
        f"{memory.ref} cannot be restored as an agent's memory (its file would still read as a person's)",
        hint="restore_by_person",
        hint_values=[memory.ref],
    )
    try:
        rewritten = fileformat.rewrite(data, relpath, memory, mine)
        check = fileformat.parse(rewritten, relpath, memory.updated_at)
    except FileParseError:
        raise refusal from None
    if check.source is not Source.AGENT or check.verified or check.priority.rank < AGENT_PRIORITY_CAP.rank:
        raise refusal
    return rewritten, check
