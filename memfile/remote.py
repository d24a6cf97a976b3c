"""Syncing a vault through a git remote, and finishing the conflicts a sync can leave (the Vault's `Remote`).

`sync` commits pending hand edits, fetches, merges (the memory merge driver), pushes (never forced)
and brings the index in line. Only remotes the repository knows by name are synced with (never a URL
or a path from memfile.toml, which travels with the vault). A sync marks itself while it runs git, so
the next write finishes or undoes what a killed sync left (`recover_interrupted_sync`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import CONFIG_NAME, STATE_DIR
from .errors import Conflict, GitError, InvalidInput, MemfileError, Notice, Refused
from .files import read_or_none
from .git import (
    ATTRIBUTES,
    CONFLICT_FROM,
    MERGE_SUBJECT,
    REMOTE_NAME_RULE,
    check_url,
    clone_command,
    configure_merge_driver,
    conflict_sides,
    expire_old_objects,
    ids_coming_in,
    local_path,
    machine_name,
    point_bare_head,
    settle,
    valid_remote_name,
    write_attributes,
)
from .model import CONFLICT_KEY, Source, StoreResult, resolve_ref, utc_now
from .purge import TOMBSTONE, entry_key, pending, purge_everywhere, read_tombstone, set_pending

if TYPE_CHECKING:
    from .git import GitStore
    from .index import Index
    from .writer import Writer


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
#: The lines `resolve_draft` puts around the two sides; `resolve` removes them when they are left in.
GUIDE_OURS = "# ---- this machine's text (keep, change or delete; memfile removes these guide lines) ----"
GUIDE_THEIRS = "# ---- the other side's text (delete what you do not keep) ----"


class Remote:
    """The remote verbs of one mind (sync, resolve), over its git store, its index and its writer."""

    def __init__(self, writer: Writer, index: Index) -> None:
        self.root, self.mind, self.config, self.notices = writer.root, writer.mind, writer.config, writer.notices
        self._writer, self._index = writer, index

    @property
    def _git(self) -> GitStore:
        return self._writer.git

    def ensure_merge_driver(self) -> bool:
        changed = configure_merge_driver(self._git)
        if write_attributes(self.root):
            self._git.commit([ATTRIBUTES], "merge memory files field by field (memfile merge driver)")
            changed = True
        return changed

    def add_remote(self, url: str, name: str = "origin") -> None:
        if not valid_remote_name(name):
            raise InvalidInput("--name", name, REMOTE_NAME_RULE)
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

    def sync(
        self, remote: str | None = None, branch: str | None = None, new_branch: bool = False, accept_purge: bool = False
    ) -> RemoteReport:
        with self._writer.transaction():
            return self._sync_locked(remote, branch, new_branch, accept_purge)

    def _sync_locked(
        self, remote: str | None, branch: str | None, new_branch: bool = False, accept_purge: bool = False
    ) -> RemoteReport:
        remote = self._known_remote(remote)
        branch = self._branch_name(branch)
        held = pending(self._git).get(remote)
        seen = self._git.resolve(f"refs/remotes/{remote}/{branch}")  # before the fetch
        if held and not accept_purge:  # a fetch would bring the purged versions back into .git
            raise Refused(
                f"{remote} still holds the versions this clone purged ({', '.join(f'{remote}/{b}' for b in held)}), "
                "so nothing was fetched: run memfile purge --push to replace its history (it shows what "
                "changes first), or memfile sync --accept-purge to fetch its changes, purge them too and push"
            )
        with self._git.syncing():
            self.ensure_merge_driver()
            machine = machine_name(self._git, create=True)
            self._git.fetch(remote)
            upstream = f"refs/remotes/{remote}/{branch}"
            if not (new_branch or self._git.has_ref(upstream) or self._git.has_ref(f"refs/heads/{branch}")):
                raise InvalidInput(
                    "--branch",
                    branch,
                    f"a branch that exists here or on {remote}",
                    reason=f"it exists neither here nor on {remote}; to create it on {remote}, pass --new-branch",
                )
            report = RemoteReport(remote, branch, hand_edits=self._writer.commit_changed(None))
            lease = self._purged_as_theirs(remote, upstream, accept_purge, seen)
            created = not self._git.has_ref(upstream)
            before = self._git.resolve("HEAD")
            for attempt in range(PUSH_ATTEMPTS):
                if attempt:
                    self._git.fetch(remote)
                    lease = self._purged_as_theirs(remote, upstream, accept_purge, seen)
                if self._git.has_ref(upstream) and self._git.count(f"HEAD..{upstream}"):
                    self._merge(upstream, report, machine)
                ahead = self._git.count(f"{upstream}..HEAD") if self._git.has_ref(upstream) else self._git.count("HEAD")
                if not ahead and lease is None or self._git.push(remote, branch, lease):
                    report.went_out = ahead
                    break
            else:
                raise GitError(
                    f"{remote} kept moving while syncing; your commits are kept here; run memfile sync again"
                )
            if held:
                set_pending(self._git, {name: b for name, b in pending(self._git).items() if name != remote})
            if self._git.has_ref(upstream):
                self._git.set_upstream(remote, branch)  # `memfile status` and `git status` show ahead/behind
                if created:  # the first push of the vault: say how another machine gets it
                    url = self._git.remote_url(remote)
                    report.clone_command = clone_command(url, self.root) if url else None
                    notice = point_bare_head(self._git, remote, branch)
                    self.notices += [notice] if notice else []
        after = self._git.resolve("HEAD")
        if before and after and before != after and self._git.resolve(before):  # (a retry's purge rewrote it)
            report.files_in = [p for p in self._git.changed_between(before, after) if p.startswith(f"{self.mind}/")]
        self._index.refresh(wait=True)
        report.conflicts = sorted(m.ref for m in self._index.memories() if m.conflict is not None)
        (self.root / STATE_DIR / f"synced-{self.mind}").touch()
        return report

    def _purged_as_theirs(self, remote: str, upstream: str, accept_purge: bool, seen: str | None) -> str | None:
        """After a fetch: refuse a remote whose record names purges this clone has not made (its history
        still holds those memories), or that brings back versions of a memory this clone purged (`seen`:
        where its branch was before the fetch, put back, and what came in pruned); with `accept_purge`,
        rewrite this clone's history without both instead. Returns the lease to push with: the fetched
        commit, when the rewrite changed the remote's branch here (it held purged versions), else None."""
        ours = read_tombstone(read_or_none(self.root / TOMBSTONE))
        theirs = read_tombstone(self._git.read_all([(upstream, TOMBSTONE)])[0]) if self._git.has_ref(upstream) else []
        known = {entry_key(e) for e in ours}
        new = [e for e in theirs if entry_key(e) not in known]
        named = ", ".join(f"{e['ref']} ({e.get('by', '?')}, {e.get('purged_at', '?')})" for e in new)
        if new and not accept_purge:
            raise Refused(
                f"{remote} purged {named} from its history, and this clone still holds it: a sync would bring "
                "it back, so nothing was merged. Run memfile sync --accept-purge to rewrite this clone's "
                "history the same way (docs/forget.md)"
            )
        purged = {e["id"]: e["ref"] for e in ours if e.get("what", "memory") == "memory"}
        if purged and not accept_purge and self._git.has_ref(upstream):
            if back := ids_coming_in(self._git, f"HEAD..{upstream}", set(purged)):
                self._git.set_ref(upstream, seen)
                expire_old_objects(self._git)
                raise Refused(
                    f"{remote} still holds versions of {', '.join(sorted(purged[i] for i in back))}, which this "
                    "clone purged: a sync would bring them back, so nothing was merged. Run memfile sync "
                    f"--accept-purge to purge them there too (it replaces {upstream.removeprefix('refs/remotes/')} "
                    "with force-with-lease)"
                )
        if not accept_purge:
            return None
        if texts := [e for e in new if e.get("what") == "text"]:
            raise Refused(
                f"{remote} removed a string from {', '.join(e['ref'] for e in texts)}, and memfile does not keep "
                "it: run memfile purge --text STRING REF here with the same string (ask who purged it), "
                "then memfile sync --accept-purge"
            )
        fetched = self._git.resolve(upstream)
        purge_everywhere(self._writer, self._index, [e for e in ours + new if e.get("what", "memory") == "memory"])
        return fetched if fetched and self._git.resolve(upstream) != fetched else None

    def push_purge(self, remote: str | None = None, dry_run: bool = False) -> list[str]:
        if self._writer.actor is Source.AGENT:
            raise Refused("only a person can push a purge: it replaces the remote's history")
        with self._writer.transaction():
            held = pending(self._git)
            names = [self._known_remote(remote)] if remote is not None else sorted(held)
            if dry_run:
                return [f"{name}/{branch}" for name in names for branch in sorted(held.get(name, {}))]
            pushed = []
            for name in names:
                for branch, lease in sorted(held.get(name, {}).items()):
                    local = f"refs/heads/{branch}"
                    source = local if self._git.has_ref(local) else f"refs/remotes/{name}/{branch}"
                    if not self._git.push(name, branch, lease, source):
                        set_pending(self._git, held)
                        raise GitError(
                            f"{name}/{branch} changed since the purge (another machine pushed to it), so its "
                            "history was not replaced: run memfile sync --accept-purge, which fetches those "
                            "changes, purges them the same way and pushes"
                        )
                    pushed.append(f"{name}/{branch}")
                    del held[name][branch]
                held = {n: b for n, b in held.items() if b}
            set_pending(self._git, held)
            return pushed

    def _known_remote(self, remote: str | None) -> str:
        """`remote` (else `[sync] remote`) when it names one of the repository's remotes.

        memfile.toml travels with the vault, so what it names must never reach git as an option, a
        URL or a path (a repository's hooks run on push): only a remote set up on this machine.
        """
        field = "--remote" if remote is not None else f"[sync] remote in {CONFIG_NAME}"
        name = remote if remote is not None else self.config.sync_remote
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
        """After a write: with `[sync] autosync`, sync when the last sync is `interval` seconds old. A failed
        autosync never fails the write (a notice says so)."""
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
            report.kept_ours += settle(self._git, unmerged, name, self.mind)
        except BaseException:
            self._git.abort_merge()
            raise

    def resolve(self, ref: str, take: str | None = None, content: str | None = None) -> StoreResult:
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
        with self._writer.transaction():
            memory = resolve_ref(ref, self._index.memories(), self.mind)
            if memory.conflict is None:
                raise Refused(f"{memory.ref} has no conflict to resolve")
            if self._writer.actor is Source.AGENT and memory.verified:
                raise Refused(f"{memory.ref} was verified by a person, so an agent cannot resolve it; ask the user")
            ours, theirs = conflict_sides(memory, machine_name(self._git))
            body = ours if take == "ours" else theirs if take == "theirs" else content
            extra = tuple((k, v) for k, v in memory.extra if k not in (CONFLICT_KEY, CONFLICT_FROM))
            new = replace(memory, content=str(body).strip(), extra=extra, updated_at=utc_now(), id_derived=False)
            sha = self._writer.rewrite(
                memory, new, "resolve", self._writer.actor, f"{new.ref} with {take or 'an edit'}"
            )
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def resolve_draft(self, ref: str) -> str:
        memory = resolve_ref(ref, self._index.memories(), self.mind)
        if memory.conflict is None:
            raise Refused(f"{memory.ref} has no conflict to resolve")
        ours, theirs = conflict_sides(memory, machine_name(self._git) if self._git.exists() else None)
        return f"{GUIDE_OURS}\n\n{ours}\n\n{GUIDE_THEIRS}\n\n{theirs}\n"
