"""Syncing a vault through a git remote, and finishing the conflicts a sync can leave (the Vault's `Remote`).

`sync` commits pending hand edits, fetches, merges the remote's work with a
merge commit (git's merge driver for memory files merges them field by
field: memfile.git.merge), pushes (never forced), and brings the index in line.
A body changed on both sides is kept on both: ours in the body, theirs in
`conflict_theirs`, until `resolve`. Nothing is ever lost: every commit of
either side stays in history.

Only remotes the repository knows by name are synced with (never a URL or
a path from memfile.toml, which travels with the vault), and the branch is
checked before git sees it. A sync marks itself while it runs git
(`GitStore.syncing`): whatever a killed sync leaves, the next write finishes
or undoes it (`recover_interrupted_sync`).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import CONFIG_NAME, STATE_DIR
from ..errors import (
    Busy,
    Conflict,
    FileParseError,
    GitError,
    InvalidInput,
    MemfileError,
    Notice,
    Refused,
)
from ..files import atomic_write
from ..model import CONFLICT_KEY, Memory, Source, StoreResult, resolve_ref, utc_now

if TYPE_CHECKING:
    from ..index import Index
    from ..writer import Writer
    from .store import GitStore


@dataclass
class RemoteReport:
    """What `sync` did: commits and files that came in and went out, conflicts left to resolve."""

    remote: str
    branch: str
    came_in: int = 0  # commits
    went_out: int = 0  # commits
    files_in: list[str] = field(default_factory=list)
    hand_edits: str | None = None  # the commit of pending hand edits made first
    conflicts: list[str] = field(default_factory=list)  # REFs whose body changed on both sides
    kept_ours: list[str] = field(default_factory=list)  # files git could not merge: ours kept, theirs in history
    #: Set when this sync created the branch on the remote: how another machine gets the vault.
    clone_command: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


PUSH_ATTEMPTS = 3
#: The subject of every merge commit sync makes (how its interrupted merge is told from a person's).
MERGE_SUBJECT = "sync: merge "
#: Local git config: this clone's name, recorded in the conflicts its merges make.
MACHINE_CONFIG = "memfile.machine"
#: How long a write waits for the git processes of a killed sync to end.
RECOVERY_WAIT_S = 10.0
#: The lines `resolve_draft` puts around the two sides; `resolve` removes them when they are left in.
GUIDE_OURS = "# ---- this machine's text (keep, change or delete; memfile removes these guide lines) ----"
GUIDE_THEIRS = "# ---- the other side's text (delete what you do not keep) ----"


def run_merge_driver(base: str, ours: str, theirs: str, relpath: str) -> int:
    """The merge driver: write the merge of three versions into `ours`; 0 when merged, 1 when git must decide.

    A memory merges field by field; a file without front-matter merges line by
    line (`git merge-file`). When neither works, `ours` is left as it was and
    git reports the path unmerged: sync keeps ours, and theirs stays in the merge.
    """
    from .merge import merge_memory
    from .store import merge_text

    base_data = Path(base).read_bytes()
    try:
        result = merge_memory(
            base_data or None, Path(ours).read_bytes(), Path(theirs).read_bytes(), relpath, machine=_driver_machine()
        )
    except FileParseError:
        merged = merge_text(ours, base, theirs)
        if merged is None:
            return 1
        atomic_write(Path(ours), merged)
        return 0
    except OSError:
        return 1
    atomic_write(Path(ours), result.data)
    return 0


def _driver_machine() -> str | None:
    """The machine merging: given by sync, else (a plain `git merge`) from the repository's config."""
    from .store import config_here

    return os.environ.get("MEMFILE_MACHINE") or config_here(MACHINE_CONFIG)


def machine_name(git: GitStore, create: bool = False) -> str | None:
    """This clone's name in the conflicts it makes (local git config, never synced); made when asked."""
    name = git.get_config(MACHINE_CONFIG)
    if name or not create:
        return name
    import socket

    host = re.sub(r"[^A-Za-z0-9.-]", "", socket.gethostname())[:40] or "machine"
    name = f"{host}-{os.urandom(3).hex()}"
    git.set_config(MACHINE_CONFIG, name)
    return name


def configure_merge_driver(git: GitStore) -> bool:
    """Point the repository's config at memfile's merge driver; True when it had to."""
    from .merge import merge_driver_command

    machine_name(git, create=True)  # the driver records it in the conflicts it makes
    if git.get_config("merge.memfile.driver") == merge_driver_command():
        return False
    git.set_config("merge.memfile.name", "memfile: merge memories field by field")
    git.set_config("merge.memfile.driver", merge_driver_command())
    return True


def write_attributes(root: Path) -> bool:
    """Make .gitattributes send memory files to the merge driver; True when it had to be changed."""
    from .merge import ATTRIBUTES, MERGE_RULE

    path = root / ATTRIBUTES
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if MERGE_RULE in text.splitlines():
        return False
    atomic_write(path, (text + ("\n" if text and not text.endswith("\n") else "") + MERGE_RULE + "\n").encode())
    return True


URL_RULE = "a git URL or a path (not starting with -; ext:: and fd:: run commands)"


def check_url(url: str) -> str:
    """`url`, when memfile may hand it to git: never an option, never a transport that runs a command.

    Raises:
        InvalidInput: it starts with -, holds a control character, or is an ext:: or fd:: URL.
    """
    if not url or url.startswith("-") or any(ord(c) < 32 for c in url) or url.lower().startswith(("ext::", "fd::")):
        raise InvalidInput("URL", url, URL_RULE)
    return url


def recover_interrupted_sync(git: GitStore, wait: float = RECOVERY_WAIT_S) -> list[str]:
    """For a caller holding the writer lock: finish or undo what a killed `memfile sync` left behind
    (its half-done merge, git's lock, the merge driver's temporary files); notices of what was done.

    A few stats when nothing is wrong. A merge a person started is never touched; a lock that no
    killed sync left is named by the git command that meets it.

    Raises:
        Busy: git processes a killed sync started are still at work after `wait` seconds.
    """
    notices: list[str] = []
    if git.sync_mark_left():
        if not git.sync_processes_gone(wait):
            raise Busy(
                f"git processes started by a memfile sync that was stopped are still at work in {git.root}; "
                "try again in a moment"
            )
        lock = git.index_lock()
        deadline = time.monotonic() + 0.5  # a person's own quick git command (git status) lets go at once
        while lock is not None and time.monotonic() < deadline:
            time.sleep(0.02)
            lock = git.index_lock()
        if lock is not None:  # nothing the sync started runs any more: its git was killed holding the lock
            lock.unlink(missing_ok=True)
            notices.append("removed .git/index.lock, left by a memfile sync that was killed")
    subject = git.merge_subject()
    if subject is not None and subject.startswith(MERGE_SUBJECT) and git.index_lock() is None:
        notices.append(_finish_interrupted_merge(git, subject))
    if git.index_lock() is None:  # no git is at work: a merge driver's files are leftovers
        debris = git.merge_debris()
        for path in debris:
            path.unlink(missing_ok=True)
        if debris:
            notices.append(
                f"removed {len(debris)} temporary files of a merge that was killed "
                f"({', '.join(sorted(p.name for p in debris))})"
            )
    return notices


def _finish_interrupted_merge(git: GitStore, subject: str) -> str:
    """Finish the merge a killed sync left as that sync would have; undo it when it cannot. A notice."""
    name = subject.removeprefix(MERGE_SUBJECT).split(",", 1)[0].strip()
    message = git.merge_message()
    mind = re.search(r"^mind: (\S+)$", message, re.MULTILINE)
    try:
        unmerged = git.unmerged_paths()
        if unmerged:
            kept = _settle(git, unmerged, name, mind.group(1) if mind else "")
            return f"finished the merge of {name} a killed memfile sync left (kept {', '.join(kept)})"
        git.finish_merge(message)
        return f"finished the merge of {name} a killed memfile sync left"
    except GitError:
        git.abort_merge()
        return Notice(f"undid the merge of {name} a killed memfile sync left", "sync_again")


def _settle(git: GitStore, unmerged: list[str], name: str, mind: str) -> list[str]:
    """Finish a merge git left with `unmerged` memory files: keep the side that still has each file
    (ours when both do: the driver could not read one). Returns what was kept.

    Raises:
        GitError: a file that is not a memory is unmerged (nothing is decided for it).
    """
    if any(not p.endswith(".md") for p in unmerged):
        raise GitError(
            f"the merge of {name} conflicts outside memory files ({', '.join(unmerged)}); "
            "nothing was changed: merge it with git, then run memfile sync again"
        )
    kept = []
    for path in unmerged:
        # A side that deleted the file loses to the side that changed it; otherwise ours stays
        # (the driver could not read one side). Either way the other version is in the merged commit.
        side = "theirs" if 2 not in git.unmerged_sides(path) else "ours"
        git.take_side(path, side)
        kept.append(f"{path} ({side})")
    git.finish_merge(
        f"{MERGE_SUBJECT}{name}, keeping {', '.join(kept)}; the other version is in the "
        f"merged commit (memfile history shows it)\n\nmind: {mind}"
    )
    return kept


class Remote:
    """The remote verbs of one mind (sync, resolve), over its git store, its index and its writer."""

    def __init__(self, writer: Writer, index: Index) -> None:
        self.root = writer.root
        self.mind = writer.mind
        self.config = writer.config
        self.notices = writer.notices
        self._writer = writer
        self._index = index

    @property
    def actor(self) -> Source:
        """Who is calling: the writer's actor (`Vault.acting_as` may change it between calls)."""
        return self._writer.actor

    @property
    def _git(self) -> GitStore:
        return self._writer.git

    def memories(self) -> list[Memory]:
        return self._index.memories()

    def ensure_merge_driver(self) -> bool:
        """`Vault.ensure_merge_driver` (its docstring says what it does)."""
        from .merge import ATTRIBUTES

        changed = configure_merge_driver(self._git)
        if write_attributes(self.root):
            self._git.commit([ATTRIBUTES], "merge memory files field by field (memfile merge driver)")
            changed = True
        return changed

    def add_remote(self, url: str, name: str = "origin") -> None:
        """`Vault.add_remote` (its docstring says what it does)."""
        from .store import REMOTE_NAME_RULE, valid_remote_name

        if not valid_remote_name(name):
            raise InvalidInput("--name", name, REMOTE_NAME_RULE)
        from .clone import clone_command, local_path

        check_url(url)
        path = local_path(url, Path.cwd())
        if path is not None and not url.startswith("file://"):  # git reads a path from the vault's folder:
            url = str(path)  # keep the folder meant here, as git clone does
        if name in self._git.remotes():
            raise Conflict(
                f"this vault already has a remote named {name!r} ({self._git.remote_url(name)}); "
                f"add this one under another name: memfile remote add {url} --name NAME "
                f"(or change it: git remote set-url {name} URL)"
            )
        self._git.add_remote(name, url)
        self.notices.append(
            f"once a memfile sync has pushed the vault, set up another machine with: {clone_command(url, self.root)}"
        )

    def sync(self, remote: str | None = None, branch: str | None = None, new_branch: bool = False) -> RemoteReport:
        """`Vault.sync` (its docstring says what it does)."""
        with self._writer.transaction():
            return self._sync_locked(remote, branch, new_branch)

    def _sync_locked(self, remote: str | None, branch: str | None, new_branch: bool = False) -> RemoteReport:

        remote = self._known_remote(remote)
        branch = self._branch_name(branch)
        with self._git.syncing():
            self.ensure_merge_driver()
            machine = machine_name(self._git, create=True)
            self._git.fetch(remote)
            upstream = f"refs/remotes/{remote}/{branch}"
            if not (new_branch or self._git.has_ref(upstream) or self._git.has_branch(branch)):
                raise InvalidInput(
                    "--branch",
                    branch,
                    f"a branch that exists here or on {remote}",
                    reason=f"it exists neither here nor on {remote}; to create it on {remote}, pass --new-branch",
                )
            report = RemoteReport(remote, branch, hand_edits=self._writer.commit_changed(None))
            created = not self._git.has_ref(upstream)
            before = self._git.resolve("HEAD")
            for attempt in range(PUSH_ATTEMPTS):
                if attempt:
                    self._git.fetch(remote)
                if self._git.has_ref(upstream) and self._git.count(f"HEAD..{upstream}"):
                    self._merge(upstream, report, machine)
                ahead = self._git.count(f"{upstream}..HEAD") if self._git.has_ref(upstream) else self._git.count("HEAD")
                if not ahead or self._git.push(remote, branch):
                    report.went_out = ahead
                    break
            else:
                raise GitError(
                    f"{remote} kept moving while syncing; your commits are kept here; run memfile sync again"
                )
            if self._git.has_ref(upstream):
                self._git.set_upstream(remote, branch)  # `memfile status` and `git status` show ahead/behind
                if created:  # the first push of the vault: say how another machine gets it
                    from .clone import clone_command, point_bare_head

                    url = self._git.remote_url(remote)
                    report.clone_command = clone_command(url, self.root) if url else None
                    notice = point_bare_head(self._git, remote, branch)
                    self.notices += [notice] if notice else []
        after = self._git.resolve("HEAD")
        if before and after and before != after:
            report.files_in = [p for p in self._git.changed_between(before, after) if p.startswith(f"{self.mind}/")]
        self._index.refresh(wait=True)
        report.conflicts = sorted(m.ref for m in self.memories() if m.conflict is not None)
        (self.root / STATE_DIR / f"synced-{self.mind}").touch()
        return report

    def _known_remote(self, remote: str | None) -> str:
        """`remote` (else `[sync] remote`) when it names one of the repository's remotes.

        memfile.toml travels with the vault, so what it names must never reach git as an option, a
        URL or a path (a repository's hooks run on push): only a remote set up on this machine.
        """
        field = "--remote" if remote is not None else f"[sync] remote in {CONFIG_NAME}"
        name = remote if remote is not None else self.config.sync_remote
        from .store import valid_remote_name

        remotes = self._git.remotes()
        if valid_remote_name(name) and name in remotes:
            return name
        if not remotes:
            raise Refused(
                f"this vault has no git remote to sync with yet ({field} is {name!r}); "
                "add one with: memfile remote add URL, then run memfile sync"
            )
        raise InvalidInput(
            field,
            name,
            ", ".join(remotes),
            reason="not a remote of this vault; to sync with "
            "another URL or path, add it first: memfile remote add URL --name NAME",
        )

    def _branch_name(self, branch: str | None) -> str:
        name = branch if branch is not None else self._git.branch()
        if not self._git.valid_branch(name):
            raise InvalidInput(
                "--branch", name, "a branch name such as main (not starting with -, no spaces, no .., no :, not HEAD)"
            )
        return name

    def autosync(self) -> None:
        """After a write: with `[sync] autosync`, sync when the last sync is `interval` seconds old.

        A failed autosync never fails the write: the change is committed here
        and goes out with the next sync; a notice says so, as it says which
        memories the sync left to resolve.
        """
        if not self.config.autosync:
            return
        marker = self.root / STATE_DIR / f"synced-{self.mind}"
        if marker.exists() and time.time() - marker.stat().st_mtime < self.config.sync_interval:
            return
        try:
            report = self._sync_locked(None, None)
        except MemfileError as exc:
            marker.touch()  # rate-limited like a success: an offline laptop must not retry on every write
            self.notices.append(f"autosync: {exc} (the change is committed here; it goes out with the next sync)")
            return
        for ref in report.conflicts:
            self.notices.append(Notice(f"autosync left a conflict: {ref} changed on both sides", "resolve", [ref]))

    def _merge(self, upstream: str, report: RemoteReport, machine: str | None = None) -> None:
        report.came_in += self._git.count(f"HEAD..{upstream}")
        name = upstream.removeprefix("refs/remotes/")
        unmerged = self._git.merge(
            upstream,
            f"{MERGE_SUBJECT}{name}\n\n{self._writer.trailers()}",
            env={"MEMFILE_MACHINE": machine} if machine else None,
        )
        if not unmerged:
            return
        try:
            report.kept_ours += _settle(self._git, unmerged, name, self.mind)
        except BaseException:
            self._git.abort_merge()
            raise

    def resolve(self, ref: str, take: str | None = None, content: str | None = None) -> StoreResult:
        """`Vault.resolve` (its docstring says what it does)."""
        if take is None and content is None:
            raise InvalidInput(
                "way to resolve",
                None,
                "--ours (this machine's text), --theirs (the other side's) "
                "or --edit (in Python: take='ours' or 'theirs', or content=...)",
            )
        if take is not None and content is not None:
            raise InvalidInput("way to resolve", f"{take} and an edited body", "one of ours, theirs, an edited body")
        if take not in (None, "ours", "theirs"):
            raise InvalidInput("take", take, ["ours", "theirs"])
        if content is not None:
            guides = (GUIDE_OURS, GUIDE_THEIRS)
            content = "\n".join(line for line in content.splitlines() if line.rstrip() not in guides)
            if not content.strip():
                raise InvalidInput("content", content, "non-empty text")
        from .merge import CONFLICT_FROM, conflict_sides

        with self._writer.transaction():
            memory = resolve_ref(ref, self.memories(), self.mind)
            if memory.conflict is None:
                raise Refused(f"{memory.ref} has no conflict to resolve")
            if self.actor is Source.AGENT and memory.verified:
                raise Refused(f"{memory.ref} was verified by a person, so an agent cannot resolve it; ask the user")
            ours, theirs = conflict_sides(memory, machine_name(self._git))
            body = ours if take == "ours" else theirs if take == "theirs" else content
            extra = tuple((k, v) for k, v in memory.extra if k not in (CONFLICT_KEY, CONFLICT_FROM))
            new = replace(memory, content=str(body).strip(), extra=extra, updated_at=utc_now(), id_derived=False)
            sha = self._writer.rewrite(memory, new, "resolve", self.actor, f"{new.ref} with {take or 'an edit'}")
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def resolve_draft(self, ref: str) -> str:
        """`Vault.resolve_draft` (its docstring says what it does)."""
        from .merge import conflict_sides

        memory = resolve_ref(ref, self.memories(), self.mind)
        if memory.conflict is None:
            raise Refused(f"{memory.ref} has no conflict to resolve")
        ours, theirs = conflict_sides(memory, machine_name(self._git) if self._git.exists() else None)
        return f"{GUIDE_OURS}\n\n{ours}\n\n{GUIDE_THEIRS}\n\n{theirs}\n"
