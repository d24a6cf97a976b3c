"""`doctor`: one read-only look at everything that can be wrong in a vault, and the safe repairs (the Vault's `Doctor`).

`--fix` applies only repairs that cannot lose anything, and reports each one.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fileformat
from .config import CONFIG_NAME, STATE_DIR, unknown_settings
from .errors import GitError, MemfileError
from .files import TEMP_PREFIX
from .links import AMBIGUOUS, LinkTable
from .model import MAX_TAGS, Category, Memory, Progress, Source, key_fits_name, step, utc_now
from .paths import is_inside, is_utf8_name, memory_relpath, shown_path

if TYPE_CHECKING:
    from .git import GitStore
    from .index import Index
    from .writer import Writer


@dataclass(frozen=True)
class Finding:
    """One thing doctor found: `kind` (stable, for programs), the file if any, and what it means."""

    kind: str
    message: str
    path: str | None = None
    problem: bool = True  # False: worth knowing, not wrong (expired, superseded counts)
    line: int | None = None  # the file's line, where one line is the place (a broken link)

    def to_dict(self) -> dict[str, Any]:
        found = {"kind": self.kind, "path": self.path, "message": self.message, "problem": self.problem}
        return found | ({"line": self.line} if self.line is not None else {})


@dataclass
class DoctorReport:
    mind: str
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    def add(
        self, kind: str, message: str, path: str | None = None, problem: bool = True, line: int | None = None
    ) -> None:
        self.findings.append(Finding(kind, message, path, problem, line))

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mind": self.mind,
            "problems": len(self.problems),
            "findings": [f.to_dict() for f in self.findings],
            "fixed": self.fixed,
        }


#: Unverified agent memories older than this are worth a person's look.
REVIEW_AFTER = timedelta(days=30)
#: Where the running processes cannot be seen (not Linux), a git lock older than this belongs to none.
STALE_AFTER_S = 600


class Doctor:
    """`Vault.doctor`: checks of one mind over its index, its writer (and git store) and its status."""

    def __init__(
        self, writer: Writer, index: Index, status: Callable[[], Any], link_table: Callable[[], LinkTable]
    ) -> None:
        self.root, self.mind, self.mind_dir = writer.root, writer.mind, writer.root / writer.mind
        self._writer, self._index, self.status, self._link_table = writer, index, status, link_table

    @property
    def _git(self) -> GitStore:
        return self._writer.git

    def doctor(self, fix: bool = False, progress: Progress | None = None) -> DoctorReport:
        report = DoctorReport(self.mind)
        if fix:
            self._fix(report, progress)
        status = self.status()  # before reading: what is stale now
        if progress is not None:  # a cold index is most of the time: its files read, one by one
            self._index.refresh(step(progress, "indexing"))
        memories = self._index.memories()
        add = report.add
        for issue in self._index.issues:
            kind = "conflict_markers" if "conflict markers" in issue.reason else "unreadable"
            where = f"{issue.path}:{issue.line}" if issue.line else issue.path
            add(kind, f"{where}: {issue.reason}", issue.path)
        for (category, key), count in Counter((m.category, m.key) for m in memories).items():
            if count > 1:
                paths = sorted(m.path for m in memories if (m.category, m.key) == (category, key))
                add("duplicate", f"{category}/{key} is held by {count} files: {', '.join(paths)}", paths[0])
        for memory_id, count in Counter(m.id for m in memories).items():
            if count > 1:
                paths = sorted(m.path for m in memories if m.id == memory_id)
                add(
                    "duplicate_id",
                    f"{memory_id} is the id of {count} memories: {', '.join(paths)} (a copy?); remove the "
                    "id: line of all but one, and memfile gives it an id of its own",
                    paths[0],
                )
        for memory in memories:
            expected = memory_relpath(self.mind, memory.category, memory.key).as_posix()
            if self._misplaced(memory, expected):
                add("misplaced", f"{memory.path} holds {memory.ref}, whose place is {expected}", memory.path)
            if len(memory.tags) > MAX_TAGS:
                add(
                    "too_many_tags",
                    f"{memory.path} has {len(memory.tags)} tags, more than the {MAX_TAGS} a write may give; "
                    "keep the rest in the content",
                    memory.path,
                )
            if memory.conflict is not None:
                add(
                    "conflicted",
                    f"{memory.ref}: changed on both sides of a sync; "
                    f"run: memfile resolve {memory.ref} --ours|--theirs|--edit",
                    memory.path,
                )
        for path in map(shown_path, status["stale"]):
            add("stale_index", f"{path} changed since it was indexed (the next command reads it)", path, False)
        for path in map(shown_path, status["uncommitted"]):
            add("uncommitted", f"{path} has changes not committed to git", path)
        self._check_files(report)
        self._check_links(report)
        from .git import PURGE_JOURNAL

        if (self.root / ".git" / PURGE_JOURNAL).exists():
            add("interrupted_purge", "a purge was interrupted; the next write (or memfile doctor --fix) finishes it")
        self._check_secrets(report, memories, progress)
        now = utc_now()
        expired = sum(1 for m in memories if m.is_expired(now))
        superseded = sum(1 for m in memories if m.superseded)
        old = [m for m in memories if m.source is Source.AGENT and not m.verified and now - m.created_at > REVIEW_AFTER]
        add("expired", f"{expired} expired memories (out of recall, kept on disk)", None, False)
        add("superseded", f"{superseded} superseded memories (out of recall, kept on disk)", None, False)
        for memory in old:
            add(
                "unreviewed",
                f"{memory.ref}: stored by an agent {(now - memory.created_at).days} days ago, "
                f"never verified; run: memfile verify {memory.ref}",
                memory.path,
                False,
            )
        return report

    def _check_links(self, report: DoctorReport) -> None:
        """Each link that leads to one of several files (`ambiguous_link`, a problem) or to nothing
        (`broken_link`, as information: a link to a note not written yet is how Obsidian users work), at its
        file's line."""
        starts: dict[str, int] = {}
        for resolved in self._link_table().broken():
            path = resolved.source.path
            if path not in starts:
                try:
                    starts[path] = fileformat.content_line((self.root / path).read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    starts[path] = 1
            line = starts[path] + resolved.link.line - 1
            kind = "ambiguous_link" if resolved.status == AMBIGUOUS else "broken_link"
            report.add(kind, f"{path}:{line}: {resolved.note}", path, problem=kind == "ambiguous_link", line=line)

    def _check_secrets(self, report: DoctorReport, memories: list[Memory], progress: Progress | None) -> None:
        """A `secret` finding for each value shaped like a credential in a memory file (front-matter too),
        unless `[secrets] policy = "off"`; never fixed (the person removes it)."""
        from .secretscan import OFF, SecretPolicy, scan

        policy = self._writer.config.secrets or SecretPolicy()
        if policy.policy == OFF:
            return
        for done, memory in enumerate(memories, 1):
            if progress is not None:
                progress("checking", done, len(memories))
            try:
                text = (self.root / memory.path).read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError):
                continue  # changed meanwhile: the next doctor reads it
            for found in scan(text, policy.allow):
                where = f"{memory.path}:{found.line}"
                report.add(
                    "secret",
                    f"{where}: {found.what} ({found.masked}); remove it by hand, then from every version "
                    f"git keeps: memfile purge --text - {memory.ref} (the string on standard input; docs/forget.md)",
                    memory.path,
                )

    def _misplaced(self, memory: Memory, expected: str) -> bool:
        """Whether the file's front-matter names a category or key other than the ones its place gives (a
        file naming neither is where it belongs, at any depth: `journal/2026/trip.md`)."""
        if memory.path == expected or not memory.has_front_matter:
            return False
        category, key = _named(self.root, memory)
        return (category is not None and category != _placed_category(memory.path)) or (
            key is not None and not key_fits_name(key, memory.path.rsplit("/", 1)[-1][:-3])
        )

    def _check_files(self, report: DoctorReport) -> None:
        """What no memory read shows: temp files, symlinks out, files outside minds, a git lock left over."""
        from . import store_queue

        add = report.add
        for folder, dirs, files in os.walk(self.mind_dir, followlinks=False):
            if ".git" in dirs + files:  # git of the vault stages nothing in it (paths.safe_paths refuses to write)
                own = Path(folder).relative_to(self.root).as_posix()
                add(
                    "nested_repository",
                    f"{own}/ is a git repository of its own: the vault's git keeps no version of the "
                    f"memories in it, and memfile does not write there; move that folder out of the mind, "
                    f"or remove {own}/.git",
                    own,
                )
                dirs[:] = [name for name in dirs if name != ".git"]
            for name in dirs + files:
                path = Path(folder) / name
                relpath = path.relative_to(self.root).as_posix()
                if name.startswith(TEMP_PREFIX):
                    add("temp_file", f"{relpath}: a temp file left by an interrupted write", relpath)
                elif not is_utf8_name(name):
                    add(
                        "bad_name",
                        f"{shown_path(relpath)}: the file name is not UTF-8 (never read); rename it",
                        shown_path(relpath),
                    )
                elif path.is_symlink():
                    try:
                        outside = not is_inside(path.resolve(strict=True), self.root)
                    except (OSError, RuntimeError):
                        add("symlink_broken", f"{relpath} is a broken or looping symlink (never read)", relpath)
                        continue
                    if outside:
                        add("symlink_out", f"{relpath} is a symlink leading outside the vault (never read)", relpath)
        for setting in unknown_settings(self.root):
            add(
                "unknown_setting",
                f"{CONFIG_NAME}: {setting} is no setting memfile knows, so it is ignored: a typo? "
                "(the settings: docs/format.md; a newer memfile's setting is fine)",
                CONFIG_NAME,
            )
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.is_file() and entry.name.endswith(".md") and entry.name.lower() != "readme.md":
                add("outside_minds", f"{entry.name} is outside any mind folder (not a memory)", entry.name)
        stale, held = self._git_locks()
        for lock in stale:
            add(
                "stale_lock",
                f"{lock} is left over from a git command that was killed (git refuses to write while it is "
                "there; no git runs in the vault): doctor --fix removes it, and so does memfile's next write where it "
                "can see git's processes (Linux)",
                lock,
            )
        for lock, (pid, command) in held:
            add("git_lock", f"{lock} is held by a git command at work in the vault ({pid}: {command})", lock, False)
        queue = self.root / STATE_DIR / "queue" / self.mind
        for name, what in store_queue.leftovers(queue):
            relpath = (queue / name).relative_to(self.root).as_posix()
            add("queue_leftover", f"{relpath}: {what}", relpath)

    def _git_locks(self) -> tuple[list[str], list[tuple[str, tuple[int, str]]]]:
        """git's lock files (`GitStore.locks`): those a killed git left (no git runs in the vault; where that
        cannot be told, those older than STALE_AFTER_S), and those a running git holds, with that git."""
        from .git import git_locks, git_processes

        locks = git_locks(self.root)
        running = git_processes(self.root) if locks else []
        if running is None:
            now = time.time()
            return [lock for lock in locks if now - _mtime(self.root / lock) > STALE_AFTER_S], []
        return ([], [(lock, running[0]) for lock in locks]) if running else (locks, [])

    def _fix(self, report: DoctorReport, progress: Progress | None) -> None:
        from . import store_queue

        for folder, _, files in os.walk(self.mind_dir, followlinks=False):
            for name in files:
                path = Path(folder) / name
                if name.startswith(TEMP_PREFIX) and time.time() - path.stat().st_mtime > 60:
                    path.unlink(missing_ok=True)
                    report.fixed.append(f"removed the leftover temp file {path.relative_to(self.root).as_posix()}")
        stale = self._git_locks()[0]
        with self._writer.transaction():  # the queue and git's locks are cleared by lock holders only
            still = set(self._git_locks()[0])  # taking the writer lock removed those no running git holds
            for lock in stale:
                if lock in still or not (self.root / lock).exists():  # not one a git started since made
                    (self.root / lock).unlink(missing_ok=True)
                    report.fixed.append(f"removed {lock} left over from a git command that was killed")
            for name in store_queue.sweep(self.root / STATE_DIR / "queue" / self.mind):
                report.fixed.append(f"removed {STATE_DIR}/queue/{self.mind}/{name}, left over in the store queue")
        try:
            sha = self._writer.commit_hand_edits()
        except MemfileError as exc:
            report.fixed.append(f"could not commit hand edits: {exc}")
        else:
            if sha:
                report.fixed.append(f"committed hand edits ({sha[:8]})")
        memories = self._index.memories()
        taken = {m.path for m in memories}
        with self._writer.transaction():
            for memory in memories:
                expected = memory_relpath(self.mind, memory.category, memory.key).as_posix()
                if not self._misplaced(memory, expected) or expected in taken:
                    continue
                try:
                    (self.root / expected).parent.mkdir(parents=True, exist_ok=True)
                    self._git.move(
                        memory.path, expected, f"move {memory.ref} to its place ({memory.path} -> {expected})"
                    )
                except GitError as exc:
                    report.fixed.append(f"could not move {memory.path}: {exc}")
                    continue
                taken.add(expected)
                report.fixed.append(f"moved {memory.path} to {expected}")
        self._index.rebuild(step(progress, "indexing"))
        report.fixed.append("rebuilt the index from the files")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def _placed_category(relpath: str) -> Category:
    """The category a file without one in its front-matter takes from its folder (see fileformat)."""
    parts = relpath.split("/")
    folder = parts[-2] if len(parts) > 2 else ""
    return Category(folder) if folder in Category.__members__.values() else Category.NOTE


def _named(root: Path, memory: Memory) -> tuple[Category | None, str | None]:
    """(category, key) as the file's front-matter names them, None for one it leaves to its place.

    Parsed again at two other places: what is the same at both is named, not derived.
    """
    try:
        data = (root / memory.path).read_bytes()
        mind = memory.path.split("/", 1)[0]
        first = fileformat.parse(data, f"{mind}/fact/a.md", memory.updated_at)
        second = fileformat.parse(data, f"{mind}/skill/b.md", memory.updated_at)
    except (OSError, MemfileError):
        return memory.category, memory.key  # changed meanwhile: judged by what was read
    return (
        first.category if first.category == second.category else None,
        first.key if first.key == second.key else None,
    )
