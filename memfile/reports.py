"""What the git half of the Vault returns: versions and changelog (memfile.git.history), doctor's findings, a sync's report.

They live here, imported on first use by the methods that make them, rather than
beside those methods: every command makes the Vault, and Python 3.11 takes about
a millisecond to make each dataclass, which a search, a recall or a list never needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Memory


@dataclass(frozen=True)
class Version:
    """One version of a memory: the commit that made it and what it changed.

    `memory` is None when the commit removed the file (`forget`) or the file
    could not be read at that commit (`problem` says why).
    """

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
            "commit": self.sha, "date": self.date, "author": self.author, "source": self.source,
            "message": self.message, "removed": self.removed, "changed": list(self.changed), "diff": self.diff,
            "problem": self.problem, "memory": self.memory.to_dict() if self.memory else None,
        }


@dataclass(frozen=True)
class LogEntry:
    """One commit of a mind's changelog: `paths` are the files of the mind it touched."""

    sha: str
    date: str
    author: str
    message: str
    paths: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.sha, "date": self.date, "author": self.author, "message": self.message,
                "paths": list(self.paths)}


@dataclass(frozen=True)
class Finding:
    """One thing doctor found: `kind` (stable, for programs), the file if any, and what it means."""

    kind: str
    message: str
    path: str | None = None
    problem: bool = True  # False: worth knowing, not wrong (expired, superseded counts)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "message": self.message, "problem": self.problem}


@dataclass
class DoctorReport:
    mind: str
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    def to_dict(self) -> dict[str, Any]:
        return {"mind": self.mind, "problems": len(self.problems), "findings": [f.to_dict() for f in self.findings],
                "fixed": self.fixed}


@dataclass
class SyncReport:
    """What `sync` did: commits and files that came in and went out, conflicts left to resolve."""

    remote: str
    branch: str
    came_in: int = 0  # commits
    went_out: int = 0  # commits
    files_in: list[str] = field(default_factory=list)
    hand_edits: str | None = None  # the commit of pending hand edits made first
    conflicts: list[str] = field(default_factory=list)  # REFs whose body changed on both sides
    kept_ours: list[str] = field(default_factory=list)  # files git could not merge: ours kept, theirs in history

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
