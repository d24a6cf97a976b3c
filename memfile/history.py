"""History of a vault, read from its git repository: versions of a memory, old versions, restore, undo, log.

A mixin of `Vault` (like `Writes`): git is the record of every version memfile
wrote or saw, so history needs nothing of its own. Old versions are parsed
with the same reader as the files on disk.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fileformat
from .errors import Conflict, FileParseError, InvalidInput, NotFound, Refused
from .model import ID_PATTERN, Memory, Source, StoreResult, parse_category, parse_duration, resolve_ref, utc_now, validate_key
from .paths import memory_relpath, safe_path

if TYPE_CHECKING:
    from .gitstore import Commit, GitStore
    from .reports import LogEntry, Version

#: The subjects of memfile's own commits (`store fact/x (agent)`, `record hand edit of fact/x`, ...).
MEMFILE_SUBJECT = re.compile(
    r"^(store|forget|verify|edit|reactivate|restore|resolve|undo|record hand edits?|init|ignore)\b"
)
_SOURCE = re.compile(r"\((user|agent)\)")
_REVERTS = re.compile(r"^reverts ([0-9a-f]{40})$", re.MULTILINE)


class History:
    """Vault methods over git history (mixed into `Vault`)."""

    root: Path
    mind: str
    actor: Source
    notices: list[str]
    _git: GitStore

    # provided by Vault / Writes
    def memories(self) -> list[Memory]: ...  # noqa: D102
    def _writing(self) -> Any: ...  # noqa: D102
    def _apply(self, relpath: str, data: bytes | None, verb: str, ref: str, source: Source) -> str | None: ...  # noqa: D102
    def _record_hand_edit(self, memory: Memory) -> None: ...  # noqa: D102

    def _history_path(self, ref: str) -> str:
        """The file of a REF, for a memory on disk or one that only git remembers (forgotten)."""
        direct = None
        if isinstance(ref, str) and ref.count("/") == 1 and ".." not in ref and "\\" not in ref:
            category, key = ref.split("/", 1)
            direct = memory_relpath(self.mind, parse_category(category, "REF category"), validate_key(key, "REF key"))
            if (self.root / direct).is_file():  # the usual place: no need to read every memory
                return direct.as_posix()
        try:
            return resolve_ref(ref, self.memories(), self.mind).path
        except NotFound:
            pass
        if direct is not None and self._git.log(direct.as_posix(), limit=1):
            return direct.as_posix()
        if ID_PATTERN.fullmatch(ref):
            found = self._git.paths_that_held(f"id: {ref}", self.mind)
            if found:
                return found[0]
        raise NotFound(f"no memory {ref!r} in mind {self.mind}, on disk or in its history; see: memfile log")

    def history(self, ref: str) -> list[Version]:
        """Every version of one memory, newest first, also of a forgotten one (`category/key` or id).

        Raises:
            NotFound: neither the files nor git history know the REF.
        """
        from .reports import Version

        relpath = self._history_path(ref)
        commits = list(reversed(self._git.log(relpath)))  # oldest first, to diff each against the one before
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
            versions.append(Version(
                commit.sha, commit.date, commit.author, _source_of(commit), commit.subject, memory,
                _changed(previous, memory), _body_diff(previous, memory), removed=data is None, problem=problem,
            ))
        return list(reversed(versions))

    def show_at(self, ref: str, at: str) -> Memory:
        """A memory as it was at a revision (sha, `HEAD~3`, a branch), a date (`2026-05-01`) or a duration back (`7d`).

        Raises:
            InvalidInput: `at` names no commit and no date.
            NotFound: the memory did not exist then.
        """
        relpath = self._history_path(ref)
        sha = self._revision(at, relpath)
        data = self._git.read(sha, relpath)
        if data is None:
            raise NotFound(f"{ref} did not exist at {at} ({sha[:8]}); see: memfile history {ref}")
        commit = self._git.log(relpath, limit=1)
        moment = _commit_time(commit[0]) if commit else utc_now()
        return fileformat.parse(data, relpath, moment)

    def _revision(self, at: str, relpath: str) -> str:
        sha = self._git.resolve(at)
        if sha is not None:
            return sha
        try:  # a duration back from now: 7d, 12h
            moment = (utc_now() - parse_duration(at, "at")).isoformat()
        except InvalidInput:
            moment = at
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?", moment.strip()):
            raise InvalidInput("at", at, "a commit (sha, HEAD~2, a branch), a date (2026-05-01), or a duration back (7d)")
        found = self._git.last_before(moment, relpath)
        if found is None:
            raise InvalidInput("at", at, "a commit (sha, HEAD~2, a branch), a date (2026-05-01), or a duration back (7d)",
                               reason="no version of the memory is that old (or git cannot read that date)")
        return found

    def restore(self, ref: str, at: str | None = None) -> StoreResult:
        """Bring back a forgotten memory (its last version) or an old version (`at`), as a new commit.

        Raises:
            NotFound: nothing to restore (the memory never existed, or not at `at`).
            Refused: an agent would overwrite a memory a person verified.
        """
        with self._writing():
            relpath = self._history_path(ref)
            if at is None:  # the newest version git holds (before a forget, the last one)
                sha = next((c.sha for c in self._git.log(relpath) if self._git.read(c.sha, relpath) is not None), "")
                if not sha:
                    raise NotFound(f"git holds no version of {ref}")
            else:
                sha = self._revision(at, relpath)
            data = self._git.read(sha, relpath)
            if data is None:
                raise NotFound(f"{ref} did not exist at {at or sha[:8]}; see: memfile history {ref}")
            old = fileformat.parse(data, relpath, utc_now())
            current = next((m for m in self.memories() if m.path == relpath), None)
            if current is None and safe_path(self.root, relpath, self.mind).exists():
                raise Conflict(f"{relpath} exists but cannot be read (see the warning above); fix or move it first")
            if current is not None:
                if self.actor is Source.AGENT and current.verified:
                    raise Refused(f"{current.ref} was verified by a person, so an agent cannot change it; ask the user")
                self._record_hand_edit(current)
            sha_new = self._apply(relpath, data, "restore", f"{old.ref} from {sha[:8]}", self.actor)
            return StoreResult(old, created=current is None, changed=sha_new is not None, commit=sha_new,
                               notices=tuple(self.notices))

    def undo(self) -> LogEntry:
        """Revert the last change memfile made, as a new commit `undo: <its message>`.

        Undo again to walk further back: a change already undone (and the undo
        itself) is skipped. Refused when it would discard later work: a later
        commit (a person's, or a sync's) touched the same files, or they have
        uncommitted changes.
        """
        from .reports import LogEntry

        with self._writing():
            commits = self._git.log()
            undone = {found.group(1) for c in commits for found in [_REVERTS.search(c.body)] if found}
            settled = {c.sha for c in commits if c.sha in undone or _REVERTS.search(c.body)}
            last = next((c for c in commits if c.sha not in settled and MEMFILE_SUBJECT.match(c.subject)), None)
            if last is None or last.subject.startswith(("init", "ignore")) or last is commits[-1]:
                raise Refused("there is no memfile change left to undo (only the vault's creation)")
            if self.actor is Source.AGENT and "(agent)" not in last.subject:
                raise Refused(f"{last.subject!r} was a person's change; an agent can only undo its own changes")
            later = [c for c in commits[: commits.index(last)] if c.sha not in settled]
            clash = sorted({p for c in later for p in c.paths} & set(last.paths))
            if clash:
                raise Refused(f"undoing {last.subject!r} would discard later changes to {', '.join(clash)} "
                              f"(commit {later[-1].sha[:8]} and after); change the memory instead, or see: memfile history")
            dirty = sorted(set(self._git.changed_paths(".")) & set(last.paths))
            if dirty:
                raise Refused(f"{', '.join(dirty)} has changes not yet committed; commit or discard them first")
            subject = f"undo: {last.subject}"
            sha = self._git.revert(last.sha, f"{subject}\n\nreverts {last.sha}\nmind: {self.mind}")
            self._sync([p for p in last.paths if p.startswith(f"{self.mind}/")], wait=True)
            return LogEntry(sha or "", utc_now().isoformat(), "", subject, last.paths)

    def log(self, since: str | None = None, limit: int | None = None) -> list[LogEntry]:
        """The vault's changelog, newest first (`since`: a duration such as `7d`, or a date).

        Raises:
            InvalidInput: `since` is neither a duration nor a date.
        """
        from .reports import LogEntry

        moment = None
        if since is not None:
            try:
                moment = (utc_now() - parse_duration(since, "since")).isoformat()
            except InvalidInput:
                if not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ][\d:]+)?(Z|[+-]\d{2}:?\d{2})?", since.strip()):
                    raise InvalidInput("since", since, "a duration (30m, 12h, 7d, 2w) or a date (2026-05-01)") from None
                moment = since.strip()
        return [LogEntry(c.sha, c.date, c.author, c.subject, c.paths) for c in self._git.log(since=moment, limit=limit)]

    def _sync(self, paths: list[str] | None, wait: bool) -> Any: ...  # provided by Vault


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
    import difflib  # only history needs it; every command imports this module

    diff = difflib.unified_diff(before.content.splitlines(), after.content.splitlines(), lineterm="", n=1)
    body = [line for line in diff if not line.startswith(("---", "+++"))]
    return "\n".join(body[:lines] + (["…"] if len(body) > lines else []))
