"""Syncing a vault through a git remote, and finishing the conflicts a sync can leave (a `Vault` mixin).

`sync` commits pending hand edits, fetches, merges the remote's work with a
merge commit (git's merge driver for memory files merges them field by
field: memfile.merge), pushes (never forced), and brings the index in line.
A body changed on both sides is kept on both: ours in the body, theirs in
`conflict_theirs`, until `resolve`. Nothing is ever lost: every commit of
either side stays in history.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import STATE_DIR, Config
from .errors import FileParseError, GitError, InvalidInput, MemfileError, Refused
from .files import atomic_write
from .model import CONFLICT_KEY, Memory, Source, StoreResult, resolve_ref, utc_now

if TYPE_CHECKING:
    from .gitstore import GitStore
    from .reports import SyncReport

PUSH_ATTEMPTS = 3


def run_merge_driver(base: str, ours: str, theirs: str, relpath: str) -> int:
    """The merge driver: write the merge of three versions into `ours`; 0 when merged, 1 when git must decide.

    A memory merges field by field; a file without front-matter merges line by
    line (`git merge-file`). When neither works, `ours` is left as it was and
    git reports the path unmerged: sync keeps ours, and theirs stays in the merge.
    """
    from .gitstore import merge_text
    from .merge import merge_memory

    base_data = Path(base).read_bytes()
    try:
        result = merge_memory(base_data or None, Path(ours).read_bytes(), Path(theirs).read_bytes(), relpath)
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


def configure_merge_driver(git: GitStore) -> bool:
    """Point the repository's config at memfile's merge driver; True when it had to."""
    from .merge import merge_driver_command

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


class Sync:
    """Vault methods for remotes (mixed into `Vault`)."""

    root: Path
    mind: str
    actor: Source
    config: Config
    notices: list[str]
    _git: GitStore

    def memories(self) -> list[Memory]: ...  # noqa: D102 - provided by Vault
    def _writing(self) -> Any: ...  # noqa: D102 - provided by Writes
    def _commit_changed(self, relpaths: list[str] | None) -> str | None: ...  # noqa: D102 - provided by Writes
    def _rewrite(self, old: Memory, new: Memory, verb: str, source: Source) -> str | None: ...  # noqa: D102

    def ensure_merge_driver(self) -> bool:
        """Set up the merge driver for memory files (.gitattributes, committed, and the repository's config).

        Returns:
            True when anything had to be set up.
        """
        from .merge import ATTRIBUTES

        changed = configure_merge_driver(self._git)
        if write_attributes(self.root):
            self._git.commit([ATTRIBUTES], "merge memory files field by field (memfile merge driver)")
            changed = True
        return changed

    def add_remote(self, url: str, name: str = "origin") -> None:
        """Add a git remote to sync with (plain `git remote add` works too).

        Raises:
            InvalidInput: the name or URL is not usable.
            GitError: git refused (a remote of that name exists, say).
        """
        if not url or url.startswith("-") or not name or name.startswith("-") or any(c.isspace() for c in name):
            raise InvalidInput("remote", f"{name} {url}", "a remote name (origin) and a URL or path")
        self._git.add_remote(name, url)

    def sync(self, remote: str | None = None, branch: str | None = None) -> SyncReport:
        """Commit hand edits, fetch, merge the remote's changes, push, and bring the index in line.

        Args:
            remote: the git remote; default `[sync] remote` of memfile.toml (`origin`).
            branch: the remote branch; default the current branch's name.

        Raises:
            GitError: the remote cannot be reached or refuses the push (nothing is lost:
                local commits stay, and the message says what to do).
        """
        with self._writing():
            return self._sync_locked(remote or self.config.sync_remote, branch)

    def _sync_locked(self, remote: str, branch: str | None) -> SyncReport:
        from .reports import SyncReport

        self.ensure_merge_driver()
        branch = branch or self._git.branch()
        report = SyncReport(remote, branch, hand_edits=self._commit_changed(None))
        before = self._git.resolve("HEAD")
        for _ in range(PUSH_ATTEMPTS):
            self._git.fetch(remote)
            upstream = f"refs/remotes/{remote}/{branch}"
            if self._git.has_ref(upstream) and self._git.count(f"HEAD..{upstream}"):
                self._merge(upstream, report)
            ahead = self._git.count(f"{upstream}..HEAD") if self._git.has_ref(upstream) else self._git.count("HEAD")
            if not ahead or self._git.push(remote, branch):
                report.went_out = ahead
                break
        else:
            raise GitError(f"{remote} kept moving while syncing; your commits are kept here; run memfile sync again")
        after = self._git.resolve("HEAD")
        if before and after and before != after:
            report.files_in = [p for p in self._git.changed_between(before, after) if p.startswith(f"{self.mind}/")]
        self._sync(None, wait=True)
        report.conflicts = sorted(m.ref for m in self.memories() if m.conflict is not None)
        (self.root / STATE_DIR / f"synced-{self.mind}").touch()
        return report

    def _autosync(self) -> None:
        """After a write: with `[sync] autosync`, sync when the last sync is `interval` seconds old.

        A failed autosync never fails the write: the change is committed here
        and goes out with the next sync; a notice says so.
        """
        if not self.config.autosync:
            return
        marker = self.root / STATE_DIR / f"synced-{self.mind}"
        if marker.exists() and time.time() - marker.stat().st_mtime < self.config.sync_interval:
            return
        try:
            self._sync_locked(self.config.sync_remote, None)
        except MemfileError as exc:
            marker.touch()  # rate-limited like a success: an offline laptop must not retry on every write
            self.notices.append(f"autosync: {exc} (the change is committed here; it goes out with the next sync)")

    def _merge(self, upstream: str, report: SyncReport) -> None:
        report.came_in += self._git.count(f"HEAD..{upstream}")
        name = upstream.removeprefix("refs/remotes/")
        unmerged = self._git.merge(upstream, f"sync: merge {name}\n\nmind: {self.mind}")
        if not unmerged:
            return
        try:
            if any(not p.endswith(".md") for p in unmerged):
                raise GitError(f"the merge of {name} conflicts outside memory files ({', '.join(unmerged)}); "
                               "nothing was changed: merge it with git, then run memfile sync again")
            kept = []
            for path in unmerged:
                # A side that deleted the file loses to the side that changed it; otherwise ours stays
                # (the driver could not read one side). Either way the other version is in the merged commit.
                sides = self._git.unmerged_sides(path)
                side = "theirs" if 2 not in sides else "ours"
                self._git.take_side(path, side)
                kept.append(f"{path} ({side})")
            report.kept_ours += kept
            self._git.finish_merge(f"sync: merge {name}, keeping {', '.join(kept)}; the other version is in the "
                                   f"merged commit (memfile history shows it)\n\nmind: {self.mind}")
        except BaseException:
            self._git.abort_merge()
            raise

    def resolve(self, ref: str, take: str | None = None, content: str | None = None) -> StoreResult:
        """Finish a conflicted memory in one commit: keep `ours`, take `theirs`, or give the new `content`.

        Raises:
            InvalidInput: `take` is not ours/theirs, or neither take nor content was given.
            Refused: the memory is not conflicted.
        """
        if (take is None) == (content is None) or take not in (None, "ours", "theirs"):
            raise InvalidInput("resolve", take, ["ours", "theirs", "an edited body"])
        if content is not None and not content.strip():
            raise InvalidInput("content", content, "non-empty text")
        with self._writing():
            memory = resolve_ref(ref, self.memories(), self.mind)
            if memory.conflict is None:
                raise Refused(f"{memory.ref} has no conflict to resolve")
            if self.actor is Source.AGENT and memory.verified:
                raise Refused(f"{memory.ref} was verified by a person, so an agent cannot resolve it; ask the user")
            body = memory.content if take == "ours" else memory.conflict if take == "theirs" else content
            extra = tuple((k, v) for k, v in memory.extra if k != CONFLICT_KEY)
            new = replace(memory, content=str(body).strip(), extra=extra, updated_at=utc_now(), id_derived=False)
            sha = self._rewrite(memory, new, "resolve", self.actor, f"{new.ref} with {take or 'an edit'}")
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def _sync(self, paths: list[str] | None, wait: bool) -> Any: ...  # noqa: D102 - provided by Vault

