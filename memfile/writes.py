"""The write half of the Vault: store, forget, verify, edit, init.

Every write takes the vault's writer lock, writes one file atomically, makes
one git commit (after committing any hand edit of that file, so every version
memfile saw is in history) and updates the index in the same call. `Vault`
inherits these methods; faces call them through `Vault`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fileformat
from .config import CONFIG_NAME, STATE_DIR, Config, caller_source, load_config, mind_section, render_config
from .errors import AmbiguousRef, Conflict, GitError, InvalidInput, LockTimeout, MemfileError, NotFound, Refused
from .files import atomic_write, remove, writer_lock
from .index import Index, SyncReport
from .model import (
    DEFAULT_CONFIDENCE,
    Category,
    Memory,
    Priority,
    Source,
    Status,
    StoreResult,
    new_id,
    parse_category,
    parse_confidence,
    parse_expires,
    parse_priority,
    parse_source,
    parse_tags,
    utc_now,
    validate_key,
)
from .paths import memory_relpath, safe_path, validate_mind
from .sync import configure_merge_driver, write_attributes

if TYPE_CHECKING:
    from . import batch
    from .gitstore import GitStore

UNSET: Any = object()


class Writes:
    """Mixin of `Vault`: the methods that change a vault."""

    root: Path
    mind: str
    config: Config
    actor: Source
    notices: list[str]
    _index: Index | None

    @cached_property
    def _git(self) -> GitStore:
        """The vault's repository, made on first use: the git half of memfile (gitstore, the store
        queue, history's and doctor's reports) is imported by what uses it, never by a read."""
        from .gitstore import GitStore

        return GitStore(self.root, self.config.author_name, self.config.author_email)

    def memories(self) -> list[Memory]: ...  # provided by Vault
    def _find(self, ref: str) -> Memory: ...  # provided by Vault
    def _memories_named(self, ref: str, place: str) -> list[Memory]: ...  # provided by Vault
    def _load(self, relpath: str) -> tuple[Any, Memory]: ...  # provided by Vault
    def _sync(self, paths: list[str] | None, wait: bool) -> SyncReport: ...  # provided by Vault
    _autosync: Callable[[], None]  # provided by Sync

    @classmethod
    def init(cls, path: str | os.PathLike[str], mind: str = "default", name: str | None = None) -> Any:
        """Create a vault (or add a mind to one): memfile.toml, the mind folder, .gitignore, a git repository.

        Args:
            path: the vault folder (created if missing).
            mind: the first mind's folder name.
            name: the mind's display name, shown by recall.

        Returns:
            The new vault, bound to `mind`.

        Raises:
            Conflict: the mind already exists in that vault.
        """
        validate_mind(mind)
        root = Path(path).expanduser().resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput("PATH", str(path), "a folder memfile can create", reason=exc.strerror) from None
        if (root / mind).exists() or (root / mind).is_symlink():
            raise Conflict(f"mind {mind!r} already exists in {root}; open it with: memfile --vault {root} --mind {mind} recall")
        vault = cls(root, mind, load_config(root), caller_source(Source.USER))
        if not any(root.iterdir()):
            # A new, empty folder: the whole vault is born in one commit, "init mind NAME".
            vault._ensure_gitignore()
            vault._git.init()
        with vault._writing():  # an existing folder without a repository is first committed as found
            config_path = root / CONFIG_NAME
            if not config_path.exists():
                atomic_write(config_path, render_config(mind, name).encode("utf-8"))
            elif name:
                with open(config_path, "a", encoding="utf-8") as handle:
                    handle.write(mind_section(mind, name))
            keep = root / mind / ".gitkeep"
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.touch()
            from .merge import ATTRIBUTES

            write_attributes(root)  # memory files merge field by field when vaults sync
            configure_merge_driver(vault._git)
            vault._git.commit([CONFIG_NAME, ".gitignore", ATTRIBUTES, f"{mind}/.gitkeep"], f"init mind {mind}")
        vault.config = load_config(root)
        return vault


    # --- writing ---------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the writer lock; make sure the vault is its own git repository."""
        with writer_lock(self.root / STATE_DIR / "lock", self.config.lock_timeout), self._ready_to_write():
            yield

    @contextmanager
    def _ready_to_write(self) -> Iterator[None]:
        """For a caller holding the writer lock: make sure the vault is its own git repository, no git
        operation is half done and no other process writes the index."""
        ignore_added = self._ensure_gitignore()
        if not self._git.exists():
            self._git.init()
            self._git.commit(["."], "init: record the vault as found")
            self.notices.append(
                f"initialized a git repository in {self.root}: the vault had none of its own"
            )
        elif ignore_added:
            self._git.commit([".gitignore"], f"ignore {STATE_DIR}/ (memfile's local state)")
        if self._index is not None:
            self._index.wait_for_writer()  # fail (exit 4) before writing anything, not after
        operation = self._git.unfinished_operation()
        if operation:
            raise GitError(
                f"the vault's git repository is in the middle of a {operation}; finish it "
                f"(git {operation} --continue) or abort it (git {operation} --abort), then try again"
            )
        yield

    def _ensure_gitignore(self) -> bool:
        """Make sure .gitignore lists .memfile/; True when it had to be added."""
        path = self.root / ".gitignore"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if f"{STATE_DIR}/" in (line.strip() for line in text.splitlines()):
            return False
        atomic_write(path, (text + ("\n" if text and not text.endswith("\n") else "") + f"{STATE_DIR}/\n").encode("utf-8"))
        return True

    def _record_hand_edit(self, memory: Memory) -> None:
        """Commit the file as it is on disk when it differs from git, so that version stays in history."""
        if self._git.is_changed(memory.path):
            self._git.commit([memory.path], f"record hand edit of {memory.ref}\n\nmind: {self.mind}")

    def _commit(self, relpath: str, verb: str, ref: str, source: Source) -> str | None:
        return self._git.commit([relpath], f"{verb} {ref} ({source})\n\nmind: {self.mind}")

    def _apply(self, relpath: str, data: bytes | None, verb: str, ref: str, source: Source) -> str | None:
        """Write (or, with None, remove) one memory file and commit it (see `_apply_all`)."""
        return self._apply_all([(relpath, data)], f"{verb} {ref} ({source})")

    def _apply_all(self, changes: list[tuple[str, bytes | None]], subject: str) -> str | None:
        """Write (or, with None, remove) memory files and commit them together.

        When the commit fails every file is put back as it was, so a change is
        either on disk and in git, or in neither.
        """
        paths = [(relpath, safe_path(self.root, relpath, self.mind)) for relpath, _ in changes]
        before = [path.read_bytes() if path.exists() else None for _, path in paths]
        for (_, path), (_, data) in zip(paths, changes, strict=True):
            if data is None:
                remove(path)
            else:
                atomic_write(path, data)
        relpaths = [relpath for relpath, _ in paths]
        # git commits in its own process while this one updates the index: the two overlap on two cores.
        from concurrent.futures import ThreadPoolExecutor  # only a write needs a thread

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfile-commit") as pool:
            commit = pool.submit(self._git.commit, relpaths, f"{subject}\n\nmind: {self.mind}")
            try:
                self._sync(relpaths, wait=True)
            except LockTimeout:
                # The change is on disk and in git; the index catches up at the next command.
                self.notices.append("the index was busy; it will include this change at the next command")
            try:
                sha = commit.result()
            except GitError:
                for (relpath, path), old in zip(paths, before, strict=True):
                    if old is None:
                        path.unlink(missing_ok=True)
                    else:
                        atomic_write(path, old)
                    self._git.unstage(relpath)
                self._resync(relpaths)
                raise
        self._autosync()
        return sha

    def _resync(self, relpaths: list[str]) -> None:
        """Best effort: the index back in line with files just put back (else the next command does it)."""
        try:
            self._sync(relpaths, wait=False)
        except MemfileError:
            pass

    def commit_hand_edits(self, relpaths: list[str] | None = None) -> str | None:
        """Commit memory files changed by hand (all of the mind's, or these) in one commit.

        Returns:
            The commit's sha, or None when nothing differed from git.
        """
        with self._writing():
            return self._commit_changed(relpaths)

    def _commit_changed(self, relpaths: list[str] | None) -> str | None:
        """`commit_hand_edits` for a caller holding the writer lock."""
        changed = self._git.changed_paths(self.mind)
        if relpaths is not None:
            wanted = set(relpaths)
            changed = [p for p in changed if p in wanted or not (self.root / p).exists() and p in wanted]
        changed = sorted(p for p in changed if p.endswith(".md"))
        if not changed:
            return None
        refs = ", ".join(p.split("/", 1)[1][:-3] for p in changed[:20]) + (", ..." if len(changed) > 20 else "")
        return self._git.commit(changed, f"record hand edits ({len(changed)}): {refs}\n\nmind: {self.mind}")

    def store(
        self,
        category: str | Category,
        key: str,
        content: str,
        *,
        priority: str | Priority | None = None,
        tags: str | list[str] | tuple[str, ...] | None = None,
        confidence: float | str | None = None,
        expires: str | datetime | None = UNSET,
        source: str | Source | None = None,
        supersedes: str | None = None,
    ) -> StoreResult:
        """Store a memory: create it, or update the one with the same (category, key) in place.

        An update keeps `id`, `created_at`, unknown front-matter keys and the
        formatting of what did not change; storing identical content changes
        nothing and makes no commit. Each change is one git commit.

        Args:
            category: one of identity, preference, fact, project, skill, mistake, context, note.
            key: snake_case, unique in the category.
            content: the memory's text (Markdown).
            priority: low, normal (default for new memories), high or critical.
            tags: a list, or a comma-separated string; stored lowercase.
            confidence: 0.0 to 1.0; default 1.0 for user memories, 0.7 for agent ones.
            expires: a duration (`7d`), an ISO-8601 moment, or `never`; omitted keeps the current value.
            source: `user` or `agent`; default the caller. An agent cannot store as `user`.
            supersedes: REF of an older memory this one replaces: in the same commit it is
                marked `status: superseded` with `superseded_by: <this id>`, which keeps it on
                disk but out of recall and search (`reactivate` brings it back).

        Returns:
            A StoreResult with the memory as written, whether anything changed, and the superseded memory.

        Raises:
            InvalidInput: a field is not allowed (the message names it and the allowed values).
            Refused: an agent tried to store as a user, or to supersede a memory a person verified.
            Conflict: another file holds the memory's path, or the lock timed out.
        """
        now = utc_now()
        category = parse_category(category)
        validate_key(key)
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content", content, "non-empty text")
        if "\x00" in content:
            raise InvalidInput("content", "text with a NUL character", "text without NUL characters")
        content = content.replace("\r\n", "\n").strip()
        if len(content.encode("utf-8")) > fileformat.MAX_FILE_BYTES - 64 * 1024:
            raise InvalidInput("content", f"{len(content.encode('utf-8'))} bytes", "text of at most 10 MB")
        new_priority = parse_priority(priority) if priority is not None else None
        new_tags = parse_tags(tags) if tags is not None else None
        new_confidence = parse_confidence(confidence) if confidence is not None else None
        new_expires = parse_expires(expires, now, "expires") if expires is not UNSET else UNSET
        effective = parse_source(source) if source is not None else self.actor
        if self.actor is Source.AGENT and effective is Source.USER:
            raise Refused("an agent cannot store a memory as source user; store it as source agent")
        request = {
            "category": category.value, "key": key, "content": content, "now": now.isoformat(),
            "priority": new_priority.value if new_priority else None, "tags": new_tags,
            "confidence": new_confidence, "source": effective.value, "actor": self.actor.value,
            "expires": "unset" if new_expires is UNSET else new_expires.isoformat() if new_expires else None,
            "supersedes": supersedes,
        }
        from . import batch  # here, like the git half's modules: reads never need it

        state = self.root / STATE_DIR
        return batch.submit(state / "lock", state / "queue" / self.mind, self.config.lock_timeout, request,
                            self._store_holding_lock)

    def _store_holding_lock(self, own: dict[str, Any] | None, ticket: batch.Ticket | None) -> StoreResult:
        """Store `own` (or this process's queued `ticket`) and the stores queued by other processes,
        up to batch.LIMIT of them in one commit; hand each queued one its result."""
        from . import batch

        with self._ready_to_write():
            for _ in range(batch.LIMIT + 1):
                first = [own] if own is not None else []
                taken = batch.claim(self.root / STATE_DIR / "queue" / self.mind,
                                    lambda r, t: batch.joins(r, first + t), batch.LIMIT - len(first))
                results = self._store_batch(first + [request for _, request in taken])
                mine = results[0] if own is not None else None
                for (queued, _), result in zip(taken, results[len(first):], strict=True):
                    if queued == ticket:
                        mine = result
                        queued.file("claimed").unlink(missing_ok=True)
                    else:
                        batch.settle(queued, batch.encode(result))
                if mine is None and ticket is not None and (done := batch.take_result(ticket)) is not None:
                    return batch.decode(done)
                if mine is not None:
                    if isinstance(mine, Exception):
                        raise mine
                    return mine
                own = None
            raise Conflict(f"the store queue in {self.root / STATE_DIR / 'queue'} lost this store's request; try again")

    def _store_batch(self, requests: list[dict[str, Any]]) -> list[StoreResult | Exception]:
        """Store several requests (see batch.joins) in one commit; each one's result or failure."""
        results: list[StoreResult | Exception | None] = [None] * len(requests)
        prepared = []
        for n, request in enumerate(requests):
            try:
                prepared.append((n, *self._prepare_store(request)))
            except Exception as exc:  # noqa: BLE001 - given to the process that asked; the others go on
                results[n] = exc
        changes = [change for *_, changed, _ in prepared for change in changed]
        sha = None
        if changes:
            refs = [memory.ref for _, memory, _, changed, _ in prepared if changed]
            subject = f"store {', '.join(refs)} ({requests[0]['source']})"
            superseded = [old.ref for _, _, _, changed, old in prepared
                          if old is not None and old.path in dict(changed)]
            subject += f", superseding {superseded[0]}" if superseded else ""
            try:
                sha = self._apply_all(changes, subject)
            except Exception as exc:  # noqa: BLE001 - every store of the commit failed with it
                for n, *_ in prepared:
                    results[n] = exc
                prepared = []
        for n, memory, created, changed, superseded in prepared:
            results[n] = StoreResult(memory, created=created, changed=bool(changed), commit=sha if changed else None,
                                     notices=tuple(self.notices), superseded=superseded)
        return [r for r in results if r is not None]

    def _prepare_store(self, request: dict[str, Any]) -> tuple[Memory, bool, list[tuple[str, bytes]], Memory | None]:
        """What a store changes: (the memory as it will be, created, [(path, new bytes)], the superseded memory).

        Raises:
            AmbiguousRef, InvalidInput, Refused, Conflict, NotFound: see `store`.
        """
        category, key, actor = Category(request["category"]), request["key"], Source(request["actor"])
        effective, content, now = Source(request["source"]), request["content"], datetime.fromisoformat(request["now"])
        expires = request["expires"]
        expires = UNSET if expires == "unset" else datetime.fromisoformat(expires) if expires else None
        priority = Priority(request["priority"]) if request["priority"] else None
        tags = tuple(request["tags"]) if request["tags"] is not None else None
        confidence, supersedes = request["confidence"], request["supersedes"]
        existing = self._memories_named(f"{category}/{key}", memory_relpath(self.mind, category, key).as_posix())
        if len(existing) > 1:
            raise AmbiguousRef(
                f"{category}/{key}", sorted(m.path for m in existing),
                "these files hold the same memory (a copy?): remove or rename all but one",
            )
        old = self._find(supersedes) if supersedes is not None else None
        if old is not None and old.category is category and old.key == key:
            raise InvalidInput("supersedes", supersedes, f"another memory than {category}/{key}, the one being stored")
        if old is not None and actor is Source.AGENT and old.verified:
            raise Refused(
                f"{old.ref} was verified by a person, so an agent cannot mark it superseded; "
                "store the new memory without supersedes and ask the user to supersede the old one"
            )
        if existing:
            memory = self._updated(existing[0], content, priority, tags, confidence, expires, effective, now, actor)
            created = False
            changes = [] if memory == existing[0] else [(memory.path, self._rewritten(existing[0], memory))]
        else:
            relpath = memory_relpath(self.mind, category, key).as_posix()
            full = safe_path(self.root, relpath, self.mind)
            if full.exists() or full.is_symlink():
                raise Conflict(
                    f"{relpath} already exists but does not hold {category}/{key} "
                    "(it is unreadable or its front-matter names another memory); fix or move that file first"
                )
            memory = Memory(
                id=new_id(), mind=self.mind, category=category, key=key, content=content, path=relpath,
                created_at=now, updated_at=now, priority=priority or Priority.NORMAL, tags=tags or (),
                source=effective, verified=effective is Source.USER,
                confidence=confidence if confidence is not None else DEFAULT_CONFIDENCE[effective],
                expires_at=None if expires is UNSET else expires,
            )
            created = True
            changes = [(relpath, fileformat.serialize(memory).encode("utf-8"))]
        superseded = None
        if old is not None:
            superseded = replace(old, status=Status.SUPERSEDED, superseded_by=memory.id, id_derived=False)
            if superseded != old:
                changes.append((old.path, self._rewritten(old, superseded)))
        if not changes and self._git.is_changed(memory.path):
            # A store that wrote this very file but died before its commit: commit it now.
            changes = [(memory.path, safe_path(self.root, memory.path, self.mind).read_bytes())]
        return memory, created, changes, superseded

    def _updated(
        self, old: Memory, content: str, priority: Priority | None, tags: tuple[str, ...] | None,
        confidence: float | None, expires: Any, effective: Source, now: datetime, actor: Source,
    ) -> Memory:
        """`old` with a store's changes (the same object when nothing changes).

        Raises:
            Refused: an agent tried to change a memory a person verified.
        """
        by_user = effective is Source.USER
        new = replace(
            old,
            content=content,
            priority=priority or old.priority,
            tags=old.tags if tags is None else tags,
            expires_at=old.expires_at if expires is UNSET else expires,
            source=Source.USER if by_user else old.source,
            verified=True if by_user else old.verified,
            confidence=confidence if confidence is not None else (
                DEFAULT_CONFIDENCE[Source.USER] if by_user and old.source is Source.AGENT else old.confidence
            ),
        )
        if new == old:
            return old
        if actor is Source.AGENT and old.verified:
            raise Refused(
                f"{old.ref} was verified by a person, so an agent cannot change it; store the new "
                "information under another key, or ask the user to update it"
            )
        return replace(new, updated_at=now, id_derived=False)

    def _rewritten(self, old: Memory, new: Memory) -> bytes:
        """The bytes of `old`'s file holding `new` (any hand edit of it committed first)."""
        self._record_hand_edit(old)
        return fileformat.rewrite(safe_path(self.root, old.path, self.mind).read_bytes(), old.path, old, new)

    def reactivate(self, ref: str) -> StoreResult:
        """Bring a superseded memory back into recall and search (`status: active`).

        Args:
            ref: an id, `category/key`, or a key unique in the mind.

        Returns:
            A StoreResult; `changed` is false when it was not superseded.

        Raises:
            Refused: an agent tried to change a memory a person verified.
            NotFound, InvalidInput, AmbiguousRef: the REF does not name one memory.
        """
        with self._writing():
            memory = self._find(ref)
            if not memory.superseded:
                return StoreResult(memory, created=False, changed=False, notices=tuple(self.notices))
            if self.actor is Source.AGENT and memory.verified:
                raise Refused(f"{memory.ref} was verified by a person, so an agent cannot change it; ask the user")
            new = replace(memory, status=Status.ACTIVE, superseded_by=None, id_derived=False)
            sha = self._rewrite(memory, new, "reactivate", self.actor)
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def _rewrite(self, old: Memory, new: Memory, verb: str, source: Source, what: str | None = None) -> str | None:
        """Write `new` over `old`'s file (after committing any hand edit), then commit `verb what (source)`."""
        return self._apply(old.path, self._rewritten(old, new), verb, what or new.ref, source)

    def forget(self, ref: str) -> Memory:
        """Remove a memory's file in one commit; `git log` keeps every version of it.

        Args:
            ref: an id, `category/key`, or a key unique in the mind.

        Returns:
            The memory as it was before it was removed.

        Raises:
            Refused: an agent tried to forget a critical memory or one a person verified.
            NotFound, InvalidInput, AmbiguousRef: the REF does not name one memory.
        """
        with self._writing():
            memory = self._find(ref)
            if self.actor is Source.AGENT and (memory.verified or memory.priority is Priority.CRITICAL):
                why = " and ".join(w for w, on in (("critical", memory.priority is Priority.CRITICAL),
                                                    ("verified by a person", memory.verified)) if on)
                instead = "" if memory.verified else f", or store the correction with supersedes={memory.ref!r}"
                raise Refused(
                    f"{memory.ref} is {why}, so an agent cannot forget it; ask the user to forget it "
                    f"(memfile forget {memory.ref}){instead}"
                )
            self._record_hand_edit(memory)
            self._apply(memory.path, None, "forget", memory.ref, self.actor)
            return memory

    def verify(self, ref: str) -> StoreResult:
        """Mark a memory as checked by a person (`verified: true`).

        Args:
            ref: an id, `category/key`, or a key unique in the mind.

        Returns:
            A StoreResult; `changed` is false when it was already verified.

        Raises:
            Refused: the caller is an agent (only a person can verify).
            NotFound, InvalidInput, AmbiguousRef: the REF does not name one memory.
        """
        if self.actor is Source.AGENT:
            raise Refused(
                "agents cannot verify memories: only a person can; ask the user to run: memfile verify " + str(ref)
            )
        with self._writing():
            memory = self._find(ref)
            if memory.verified:
                return StoreResult(memory, created=False, changed=False, notices=tuple(self.notices))
            new = replace(memory, verified=True, id_derived=False)
            sha = self._rewrite(memory, new, "verify", Source.USER)
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def begin_edit(self, ref: str) -> tuple[Memory, Path]:
        """Prepare a memory for editing by hand: commit any pending hand edit, return its file.

        Returns:
            The memory before the edit and the absolute path to open in an editor.
        """
        if self.actor is Source.AGENT:
            raise Refused("memfile edit is for people; an agent changes memories with memfile store")
        with self._writing():
            memory = self._find(ref)
            self._record_hand_edit(memory)
            return memory, safe_path(self.root, memory.path, self.mind)

    def finish_edit(self, before: Memory) -> StoreResult:
        """Validate and commit a memory after it was edited by hand (see `begin_edit`).

        When the content changed and the edit left `updated_at` alone, it is
        moved to now. A file that no longer parses is left exactly as it is.

        Raises:
            FileParseError: the edited file cannot be read (file, line and reason); nothing is discarded.
            NotFound: the file is gone.
        """
        with self._writing():
            path = safe_path(self.root, before.path, self.mind)
            if not path.exists():
                raise NotFound(f"{before.path} no longer exists after the edit")
            after = self._load(before.path)[1]
            for name, old_value, new_value in (
                ("category", before.category, after.category), ("key", before.key, after.key),
                ("id", before.id, after.id if not before.id_derived else before.id),
            ):
                if old_value != new_value:
                    raise Refused(
                        f"the edit changed the {name} from {old_value} to {new_value}, but a memory's {name} "
                        f"never changes; the edit is kept, uncommitted, in {path}: change it back there "
                        f"(or store the content as a new memory and forget this one)"
                    )
            if after == before:
                return StoreResult(after, created=False, changed=False, notices=tuple(self.notices))
            if after.updated_at == before.updated_at and after.has_front_matter:
                stamped = replace(after, updated_at=utc_now())
                atomic_write(path, fileformat.rewrite(path.read_bytes(), before.path, after, stamped))
                after = stamped
            sha = self._commit(before.path, "edit", after.ref, Source.USER)
            return StoreResult(after, created=False, changed=True, commit=sha, notices=tuple(self.notices))
