"""The writer of one mind: every change to a vault is one write transaction here.

A transaction (`transaction()`) holds the vault's writer lock, makes sure the vault is its own git
repository on a branch with no git operation half done, records any hand edit of a file before it is
changed (so every version memfile saw is in history), writes files so that a save landing meanwhile is
kept (memfile.swap), commits them while the index takes them in, and puts them back when the commit
fails. Every write verb goes through it (its methods here are the Vault's verbs of the same name).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fileformat, journal
from .config import CONFIG_NAME, STATE_DIR, Config, config_with_mind, render_config
from .errors import (
    AmbiguousRef,
    Conflict,
    FileParseError,
    GitError,
    InvalidInput,
    LockTimeout,
    MemfileError,
    NotFound,
    Notice,
    Refused,
)
from .files import (
    atomic_write,
    cannot_write,
    fsync_dir,
    may_fork,
    os_reason,
    read_or_none,
    try_writer_lock,
    writer_lock,
)
from .index import Index, Known, parse_as_read
from .model import (
    AGENT_PRIORITY_CAP,
    DEFAULT_CONFIDENCE,
    UNSET,
    Category,
    ForgetReport,
    Memory,
    Priority,
    Source,
    Status,
    StoreRequest,
    StoreResult,
    new_id,
    parse_category,
    parse_confidence,
    parse_duration,
    parse_expires,
    parse_priority,
    parse_source,
    parse_tags,
    resolve_ref,
    step,
    utc_now,
    validate_key,
)
from .paths import memory_relpath, safe_path, safe_paths

if TYPE_CHECKING:
    from concurrent.futures import Future

    from . import store_queue
    from .git import GitStore


#: Why an agent's write of a critical memory is refused (critical memories are pinned into every recall).
AGENT_CAP_REFUSAL = (
    "an agent can store memories up to priority high, not critical (critical memories are pinned into "
    "every recall and an agent cannot forget them); store it as high"
)


#: What `Vault.forget_many` selects by, at least one of them (`refs`: the memories named).
FORGET_FILTERS = ("refs", "tag", "category", "source", "unverified", "older_than", "expired")


class Writer:
    """The write transactions of one mind. `after_write`: called inside the transaction after each commit
    (the remote's autosync)."""

    def __init__(self, root: Path, mind: str, config: Config, actor: Source, index: Index, notices: list[str]) -> None:
        self.root, self.mind, self.config, self.actor, self.notices = root, mind, config, actor, notices
        self._index = index
        self._bases: dict[str, bytes | None] = {}  # see record_hand_edit
        self.after_write: Callable[[], None] | None = None
        self.while_committing: Callable[[Future[str | None]], None] | None = None  # see Vault.while_committing
        self.key_label: str | None = None  # the credential's label, a `Memfile-Key:` trailer (Vault.acting_as)
        self.progress: Callable[[str, int, int], None] | None = None  # apply_all's steps: writing, indexing (import)
        #: Finishes a purge a killed process left half done (memfile.purge, set by the Vault): its notices.
        self.finish_purge: Callable[[], list[str]] | None = None

    @cached_property
    def git(self) -> GitStore:
        """The vault's repository, made on first use: memfile.git is imported by what uses it, never by a read."""
        from .git import GitStore

        return GitStore(self.root, self.config.author_name, self.config.author_email)

    def find(self, ref: str) -> Memory:
        """The memory REF names; an agent finds no proposed one (a captured memory waits for a person)."""
        return resolve_ref(ref, self.readable(), self.mind, self._index.issues)

    def readable(self) -> list[Memory]:
        """The mind's memories the actor may read: an agent's without the proposed ones (`Status.PROPOSED`)."""
        memories = self._index.memories()
        return [m for m in memories if not m.proposed] if self.actor is Source.AGENT else memories

    def create_mind(self, name: str | None) -> None:
        """`Vault.init`'s work: memfile.toml, the mind folder, .gitignore, the merge driver, in one commit
        ("init mind NAME"); a folder with no repository gets one holding memfile's files only."""
        from .git import ATTRIBUTES, configure_merge_driver, write_attributes

        root, mind = self.root, self.mind
        if not self.git.exists():
            found = any(root.iterdir())
            with cannot_write(root):
                self.ensure_gitignore()
            self.git.init()
            if found:
                self.notices.append(
                    f"initialized a git repository in {root}; the files already in the folder "
                    "were not committed (git add those that belong in the vault)"
                )
        with self.transaction():  # an existing folder without a repository is first committed as found
            config_path = root / CONFIG_NAME
            if not config_path.exists():
                atomic_write(config_path, render_config(mind, name).encode("utf-8"))
            elif name:  # checked to parse before it is written: never a second [minds.MIND] table
                atomic_write(
                    config_path,
                    config_with_mind(config_path.read_text(encoding="utf-8-sig"), mind, name).encode("utf-8"),
                )
            keep = root / mind / ".gitkeep"
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.touch()
            write_attributes(root)  # memory files merge field by field when vaults sync
            configure_merge_driver(self.git)
            self.git.commit([CONFIG_NAME, ".gitignore", ATTRIBUTES, f"{mind}/.gitkeep"], f"init mind {mind}")

    # --- writing ---------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the writer lock; make sure the vault is its own git repository."""
        with (
            cannot_write(self.root),
            writer_lock(self.root / STATE_DIR / "lock", self.config.lock_timeout),
            self.holding_lock(),
        ):
            yield

    @contextmanager
    def holding_lock(self) -> Iterator[None]:
        """For a caller holding the writer lock: make sure the vault is its own git repository, no git
        operation is half done, HEAD is on a branch and no other process writes the index."""
        self._bases = {}  # see record_hand_edit
        with cannot_write(self.root):
            ignore_added = self.ensure_gitignore()
        if not self.git.exists():
            self.git.init()
            self.git.commit(["."], "init: record the vault as found")
            self.notices.append(f"initialized a git repository in {self.root}: the vault had none of its own")
        elif ignore_added:
            self.git.commit([".gitignore"], f"ignore {STATE_DIR}/ (memfile's local state)")
        self._index.wait_for_writer()  # fail (exit 4) before writing anything, not after
        from .git import PURGE_JOURNAL, clear_stale_locks, recover_interrupted_sync

        self.notices += recover_interrupted_sync(self.git)  # a killed sync's merge, lock or debris
        self.notices += clear_stale_locks(self.root, self.config.lock_timeout)  # locks a killed git left
        if undone := journal.undo_killed_write(self.root, self.git):
            self.notices.append(undone[0])
            self._resync([relpath for relpath in undone[1] if relpath.startswith(f"{self.mind}/")])  # this mind's
        if (self.root / ".git" / PURGE_JOURNAL).exists() and self.finish_purge is not None:
            self.notices += self.finish_purge()  # a purge killed midway, finished before anything else
        operation = self.git.unfinished_operation()
        if operation:
            raise GitError(
                f"the vault's git repository is in the middle of a {operation}; finish it "
                f"(git {operation} --continue) or abort it (git {operation} --abort), then try again"
            )
        if self.git.detached():
            raise GitError(
                f"the vault's git repository in {self.root} has a detached HEAD (a commit is checked out, "
                "not a branch), so a new commit would belong to no branch; nothing was written: get back on "
                "a branch first (git switch main), then try again"
            )
        with cannot_write(self.root):
            yield

    def ensure_gitignore(self) -> bool:
        """Make sure .gitignore lists .memfile/; True when it had to be added."""
        path = self.root / ".gitignore"
        if path.is_dir() or path.exists() and not path.is_file():
            raise Conflict(
                f"{path} is in the way: it should be git's ignore file (a text file listing "
                f"{STATE_DIR}/), but it is a folder or a special file; move it away, then try again"
            )
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
        except UnicodeDecodeError:
            raise Conflict(
                f"{path} is not UTF-8 text; memfile must add {STATE_DIR}/ to it: fix its encoding, then try again"
            ) from None
        if f"{STATE_DIR}/" in (line.strip() for line in text.splitlines()):
            return False
        atomic_write(
            path, (text + ("\n" if text and not text.endswith("\n") else "") + f"{STATE_DIR}/\n").encode("utf-8")
        )
        return True

    def record_hand_edit(self, memory: Memory) -> bytes | None:
        """Commit the file as it is on disk when it differs from git, so that version stays in history.

        Returns:
            The file's bytes as committed (None: it is gone), which the write to come is based on:
            `apply_all` replaces the file only while it still holds them (see memfile.swap).
        """
        path = safe_path(self.root, memory.path, self.mind)
        for _ in range(3):
            data = read_or_none(path)
            if self.git.is_changed(memory.path):
                self.git.commit([memory.path], f"record hand edit of {memory.ref}\n\n{self.trailers()}")
            if read_or_none(path) == data:  # no save between the read and the commit: these bytes are in git
                break
        else:
            raise Conflict(f"{memory.path} keeps changing on disk; wait until it is saved, then try again")
        self._bases[memory.path] = data
        return data

    def trailers(self, keys: dict[str, list[str]] | None = None) -> str:
        """The lines that end every commit message of this mind: `mind:`, and `Memfile-Key:` under a credential.

        Args:
            keys: for a commit shared by the stores of several credentials, each one's label with the
                refs it stored: one `Memfile-Key: LABEL REF REF...` line each (a label holds no space).
        """
        if keys and len(keys) > 1:
            return "\n".join(
                [f"mind: {self.mind}", *(f"Memfile-Key: {k} {' '.join(refs)}" for k, refs in keys.items())]
            )
        key = f"\nMemfile-Key: {self.key_label}" if self.key_label else ""
        return f"mind: {self.mind}{key}"

    def apply(self, relpath: str, data: bytes | None, verb: str, ref: str, source: Source) -> str | None:
        """Write (or, with None, remove) one memory file and commit it (see `apply_all`)."""
        return self.apply_all([(relpath, data)], f"{verb} {ref} ({source})")

    def apply_all(
        self, changes: list[tuple[str, bytes | None]], subject: str, keys: dict[str, list[str]] | None = None
    ) -> str | None:
        """Write (or, with None, remove) memory files and commit them together.

        Each file is replaced only while it holds the bytes the change was based on (`record_hand_edit`;
        a file never read must not exist): a save landing meanwhile is kept and `EditedMeanwhile` raised.
        When the commit fails every file is put back, so a change is on disk and in git, or in neither.
        `keys`: see `trailers`.
        """
        from .swap import put_all, undo

        relpaths = [relpath for relpath, _ in changes]
        paths = safe_paths(self.root, relpaths, self.mind)
        writes = [(relpath, path, data) for (relpath, data), path in zip(changes, paths, strict=True)]
        message = f"{subject}\n\n{self.trailers(keys)}"
        with journal.journaled(self.root, self.mind, writes, message, self.git):
            before, known = put_all(writes, self._bases, _readable, step(self.progress, "writing"))
            for folder in {path.parent for path in paths} if known else ():
                fsync_dir(folder)
            try:
                if known and self.while_committing is None and may_fork():
                    # No other thread: git stages the files while this process indexes them on both cores.
                    sha = self.git.commit(relpaths, message, meanwhile=lambda: self._index_written(relpaths, known))
                else:
                    sha = self._commit_beside_index(relpaths, message, known)
            except GitError as exc:
                try:
                    undo(writes, before)
                except OSError as failed:  # a full disk: what was removed cannot be written back
                    raise Conflict(
                        f"{exc}; and {relpaths[0]} could not be put back ({os_reason(failed)}): the change is on "
                        "disk, not committed: free some space; the next write puts the files back"
                    ) from None
                self.git.unstage(*relpaths)
                self._resync(relpaths)
                raise
        if self.after_write is not None:
            self.after_write()
        return sha

    def _commit_beside_index(self, relpaths: list[str], message: str, known: Mapping[str, Known]) -> str | None:
        """Git commits in its own thread while this one updates the index (and a resident process answers
        reads meanwhile, `while_committing`)."""
        from concurrent.futures import ThreadPoolExecutor  # only a write needs a thread

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfile-commit") as pool:
            commit = pool.submit(self.git.commit, relpaths, message)
            self._index_written(relpaths, known)
            if self.while_committing is not None:
                self.while_committing(commit)
            return commit.result()

    def _index_written(self, relpaths: list[str], known: Mapping[str, Known]) -> None:
        """The index brought in line with files just written (`known`: what was read back from them); an index
        that is busy or cannot be written is a notice (the files are the truth, committed whatever it does)."""
        try:
            self._index.refresh(step(self.progress, "indexing"), paths=relpaths, wait=True, known=known)
        except (LockTimeout, OSError) as exc:
            why = "was busy" if isinstance(exc, LockTimeout) else f"could not be written: {os_reason(exc)}"
            self.notices.append(f"the index {why}; it will include this change at the next command")

    def _resync(self, relpaths: list[str]) -> None:
        """Best effort: the index back in line with files just put back (else the next command does it)."""
        try:
            self._index.refresh(paths=relpaths, wait=False)
        except MemfileError:
            pass

    def commit_hand_edits(self, relpaths: list[str] | None = None) -> str | None:
        with self.transaction():
            return self.commit_changed(relpaths)

    def commit_changed(self, relpaths: list[str] | None) -> str | None:
        """`commit_hand_edits` for a caller holding the writer lock."""
        changed = self.git.changed_paths(self.mind)
        if relpaths is not None:
            wanted = set(relpaths)
            changed = [p for p in changed if p in wanted or not (self.root / p).exists() and p in wanted]
        changed = sorted(p for p in changed if p.endswith(".md"))
        if not changed:
            return None
        refs = ", ".join(p.split("/", 1)[1][:-3] for p in changed[:20]) + (", ..." if len(changed) > 20 else "")
        return self.git.commit(changed, f"record hand edits ({len(changed)}): {refs}\n\n{self.trailers()}")

    def store(self, *args: Any, **kwargs: Any) -> StoreResult:
        """A store of `Vault.store`'s arguments (checked by `checked`)."""
        request = self.checked(*args, **kwargs)
        lock = self.root / STATE_DIR / "lock"
        with cannot_write(self.root):
            with try_writer_lock(lock) as held:
                if held:
                    return self._store_holding_lock(request, None)
            from . import store_queue  # another writer holds the lock: wait in the queue for it

            queue = self.root / STATE_DIR / "queue" / self.mind
            return store_queue.submit(lock, queue, self.config.lock_timeout, request, self._store_holding_lock)

    def store_many(self, stores: list[dict[str, Any]]) -> list[StoreResult | MemfileError]:
        from . import store_queue

        results: list[StoreResult | MemfileError | None] = [None] * len(stores)
        groups: list[list[tuple[int, StoreRequest]]] = []  # stores that can share a commit (store_queue.joins)
        for n, arguments in enumerate(stores):
            arguments = dict(arguments)
            credential = arguments.pop("credential", self.key_label)
            try:
                request = replace(self.checked(**arguments), credential=credential)
            except MemfileError as exc:
                results[n] = exc
                continue
            for group in groups:
                if len(group) < store_queue.LIMIT and store_queue.joins(request, [r for _, r in group]):
                    group.append((n, request))
                    break
            else:
                groups.append([(n, request)])
        for group in groups:
            try:
                with self.transaction():
                    done = self._store_batch([request for _, request in group])
            except MemfileError as exc:  # the lock timed out, the vault cannot be written: every store of it
                done = [exc] * len(group)
            for (n, _), result in zip(group, done, strict=True):
                if not isinstance(result, StoreResult | MemfileError):
                    raise result  # a bug in memfile, not a refused store: it ends the call
                results[n] = result
        return [result for result in results if result is not None]

    def checked(
        self,
        category: str | Category,
        key: str,
        content: str,
        priority: str | Priority | None = None,
        tags: str | list[str] | tuple[str, ...] | None = None,
        confidence: float | str | None = None,
        expires: str | datetime | None = UNSET,
        source: str | Source | None = None,
        supersedes: str | None = None,
        allow_secret: bool = False,
    ) -> StoreRequest:
        """A store checked: every field, the agent rules, secrets. Raises InvalidInput, Refused: as
        `Vault.store` says."""
        now = utc_now()
        category = parse_category(category)
        validate_key(key)
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content", content, "non-empty text")
        if "\x00" in content:
            raise InvalidInput("content", "text with a NUL character", "text without NUL characters")
        for name, text in (
            ("content", content),
            *(("tag", tag) for tag in tags or () if isinstance(tags, list | tuple)),
        ):
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise InvalidInput(
                        name,
                        text.encode("utf-8", "backslashreplace").decode("ascii", "replace")[:80],
                        "UTF-8 text",
                        reason=f"character {exc.start} is a lone surrogate, which is not valid UTF-8",
                    ) from None
        content = content.replace("\r\n", "\n").strip()
        if len(content.encode("utf-8")) > fileformat.MAX_FILE_BYTES - 64 * 1024:
            raise InvalidInput("content", f"{len(content.encode('utf-8'))} bytes", "text of at most 10 MB")
        from .secretscan import guard

        agent, ref = self.actor is Source.AGENT, f"{category.value}/{key}"
        new_tags = parse_tags(tags) if tags is not None else None
        named = ((f"the key of this {category} memory (its file's name)", key), (f"the content of {ref}", content))
        for what, text in (*named, (f"a tag of {ref}", "\n".join(new_tags or ()))):
            if warned := guard(self.config.secrets, text, what=what, allow_secret=allow_secret, agent=agent):
                self.notices.append(warned)
        new_priority = parse_priority(priority) if priority is not None else None
        new_confidence = parse_confidence(confidence) if confidence is not None else None
        new_expires: Any = parse_expires(expires, now, "expires") if expires is not UNSET else UNSET
        if isinstance(new_expires, datetime) and new_expires <= now:
            past = f"{category}/{key} expires {new_expires:%Y-%m-%d %H:%M}Z, already past"
            self.notices.append(Notice(f"{past}: it is stored, and out of recall and search", "include_expired"))
        effective = parse_source(source) if source is not None else self.actor
        if self.actor is Source.AGENT and effective is Source.USER:
            raise Refused("an agent cannot store a memory as source user; store it as source agent")
        if self.actor is Source.AGENT and new_priority is not None and new_priority.rank < AGENT_PRIORITY_CAP.rank:
            raise Refused(AGENT_CAP_REFUSAL, hint="raise_critical")
        return StoreRequest(
            category,
            key,
            content,
            now,
            new_priority,
            new_tags,
            new_confidence,
            new_expires,
            effective,
            self.actor,
            self.key_label,
            supersedes,
        )

    def _store_holding_lock(self, own: StoreRequest | None, ticket: store_queue.Ticket | None) -> StoreResult:
        """Store `own` (or this process's queued `ticket`) and the stores queued by other processes, up to
        store_queue.LIMIT in one commit; hand each queued one its result."""
        from . import store_queue

        with self.holding_lock():
            for _ in range(store_queue.LIMIT + 1):
                first = [own] if own is not None else []
                taken = store_queue.claim(
                    self.root / STATE_DIR / "queue" / self.mind,
                    lambda r, t: store_queue.joins(r, first + t),  # noqa: B023 - called within claim, this turn
                    store_queue.LIMIT - len(first),
                )
                results = self._store_batch(first + [request for _, request in taken])
                mine = results[0] if own is not None else None
                for (queued, _), result in zip(taken, results[len(first) :], strict=True):
                    if queued == ticket:
                        mine = result
                        queued.file("claimed").unlink(missing_ok=True)
                    else:
                        store_queue.settle(queued, store_queue.encode(result))
                if mine is None and ticket is not None and (done := store_queue.take_result(ticket)) is not None:
                    return store_queue.decode(done)
                if mine is not None:
                    if isinstance(mine, Exception):
                        raise mine
                    return mine
                own = None
            raise Conflict(f"the store queue in {self.root / STATE_DIR / 'queue'} lost this store's request; try again")

    def _store_batch(self, requests: list[StoreRequest]) -> list[StoreResult | Exception]:
        """Store several requests (see store_queue.joins) in one commit; each one's result or failure. A file
        saved by hand while they were prepared is kept, and they are prepared again from it (twice at most)."""
        from .swap import EditedMeanwhile

        for _ in range(2):
            try:
                return self._store_batch_once(requests)
            except EditedMeanwhile:
                continue
        try:
            return self._store_batch_once(requests)
        except EditedMeanwhile as exc:
            return [exc for _ in requests]

    def _store_batch_once(self, requests: list[StoreRequest]) -> list[StoreResult | Exception]:
        """`_store_batch`, once; raises EditedMeanwhile when a file changed under the commit's writes."""
        from .swap import EditedMeanwhile

        self._bases = {}
        results: list[StoreResult | Exception | None] = [None] * len(requests)
        prepared = []
        for n, request in enumerate(requests):
            try:
                prepared.append((n, *self._prepare_store(request)))
            except Exception as exc:  # noqa: BLE001 - given to the process that asked; the others go on
                results[n] = exc
        changes: list[tuple[str, bytes | None]] = [change for _, _, _, changed, _ in prepared for change in changed]
        sha = None
        if changes:
            refs = [memory.ref for _, memory, _, changed, _ in prepared if changed]
            subject = f"store {', '.join(refs)} ({requests[0].source})"
            replaced = [old.ref for _, _, _, changed, old in prepared if old is not None and old.path in dict(changed)]
            subject += f", superseding {replaced[0]}" if replaced else ""
            keys: dict[str, list[str]] = {}  # each credential's label with the refs it stored (a shared commit)
            for n, memory, _, changed, _ in prepared:
                if changed and (credential := requests[n].credential):
                    keys.setdefault(credential, []).append(memory.ref)
            own_key = self.key_label
            self.key_label = next(iter(keys)) if len(keys) == 1 else requests[0].credential
            try:
                sha = self.apply_all(changes, subject, keys)
            except EditedMeanwhile:
                raise
            except Exception as exc:  # noqa: BLE001 - every store of the commit failed with it
                for n, *_ in prepared:
                    results[n] = exc
                prepared = []
            finally:
                self.key_label = own_key
        for n, memory, created, changed, superseded in prepared:
            results[n] = StoreResult(
                memory,
                created=created,
                changed=bool(changed),
                commit=sha if changed else None,
                notices=tuple(self.notices),
                superseded=superseded,
            )
        return [r for r in results if r is not None]

    def _prepare_store(self, request: StoreRequest) -> tuple[Memory, bool, list[tuple[str, bytes]], Memory | None]:
        """What a store changes: (the memory as it will be, created, [(path, new bytes)], the superseded memory).

        Raises:
            AmbiguousRef, InvalidInput, Refused, Conflict, NotFound: see `store`.
        """
        category, key, actor, effective = request.category, request.key, request.actor, request.source
        supersedes = request.supersedes
        existing = self._index.named(f"{category}/{key}", memory_relpath(self.mind, category, key).as_posix())
        if len(existing) > 1:
            raise AmbiguousRef(
                f"{category}/{key}",
                sorted(m.path for m in existing),
                "these files hold the same memory (a copy?): remove or rename all but one",
            )
        old = self.find(supersedes) if supersedes is not None else None
        if old is not None and old.category is category and old.key == key:
            raise InvalidInput("supersedes", supersedes, f"another memory than {category}/{key}, the one being stored")
        if old is not None and actor is Source.AGENT and old.verified:
            raise Refused(
                f"{old.ref} was verified by a person, so an agent cannot mark it superseded; "
                "store the new memory without supersedes and ask the user to supersede the old one"
            )
        if existing and existing[0].proposed:
            raise Conflict(
                f"{category}/{key} is taken by a captured memory waiting for the user's review; "
                + (
                    "store this one under another key"
                    if actor is Source.AGENT
                    else f"memfile review edit {category}/{key}"
                )
            )
        if existing:
            memory = self.updated(existing[0], request)
            if memory.superseded and old is not None:  # it replaces `old`: it is the one in force now
                memory = replace(memory, status=Status.ACTIVE, superseded_by=None, id_derived=False)
            elif memory.superseded and memory != existing[0]:
                self.notices.append(self._still_superseded(memory))
            created = False
            changes = [] if memory == existing[0] else [(memory.path, self.rewritten(existing[0], memory))]
        else:
            relpath = memory_relpath(self.mind, category, key).as_posix()
            full = safe_path(self.root, relpath, self.mind)
            if full.exists() or full.is_symlink():
                raise Conflict(
                    f"{relpath} already exists but does not hold {category}/{key} "
                    "(it is unreadable or its front-matter names another memory); fix or move that file first"
                )
            memory = Memory(
                id=new_id(),
                mind=self.mind,
                category=category,
                key=key,
                content=request.content,
                path=relpath,
                created_at=request.now,
                updated_at=request.now,
                priority=request.priority or Priority.NORMAL,
                tags=request.tags or (),
                source=effective,
                verified=effective is Source.USER,
                confidence=DEFAULT_CONFIDENCE[effective] if request.confidence is None else request.confidence,
                expires_at=None if request.expires is UNSET else request.expires,
            )
            created = True
            changes = [(relpath, fileformat.serialize(memory).encode("utf-8"))]
        for relpath, data in changes:
            _readable(data, relpath, field="content")
        superseded = None
        if old is not None:
            superseded = replace(old, status=Status.SUPERSEDED, superseded_by=memory.id, id_derived=False)
            if superseded != old:
                changes.append((old.path, self.rewritten(old, superseded)))
        if not changes and self.git.is_changed(memory.path):
            # A store that wrote this very file but died before its commit: commit it now.
            data = safe_path(self.root, memory.path, self.mind).read_bytes()
            self._bases[memory.path] = data
            changes = [(memory.path, data)]
        return memory, created, changes, superseded

    def _still_superseded(self, memory: Memory) -> Notice:
        """The notice of an update to a superseded memory, which stays out of recall and search."""
        by = next((m.ref for m in self._index.memories() if m.id == memory.superseded_by), memory.superseded_by)
        kept = f"{memory.ref} is superseded by {by}: the update is kept, out of recall and search"
        return Notice(kept, "reactivate", [memory.ref])

    def updated(self, old: Memory, request: StoreRequest) -> Memory:
        """`old` with a store's changes (the same object when nothing changes).

        Raises:
            Refused: an agent tried to change a memory a person verified.
        """
        by_user, confidence = request.source is Source.USER, request.confidence
        new = replace(
            old,
            content=request.content,
            priority=request.priority or old.priority,
            tags=old.tags if request.tags is None else request.tags,
            expires_at=old.expires_at if request.expires is UNSET else request.expires,
            source=Source.USER if by_user else old.source,
            verified=True if by_user else old.verified,
            confidence=confidence
            if confidence is not None
            else (DEFAULT_CONFIDENCE[Source.USER] if by_user and old.source is Source.AGENT else old.confidence),
        )
        if new == old:
            return old
        if request.actor is Source.AGENT and old.verified:
            raise Refused(
                f"{old.ref} was verified by a person, so an agent cannot change it; store the new "
                "information under another key, or ask the user to update it"
            )
        return replace(new, updated_at=request.now, id_derived=False)

    def rewritten(self, old: Memory, new: Memory) -> bytes:
        """The bytes of `old`'s file holding `new` (any hand edit of it committed first)."""
        self.record_hand_edit(old)
        return fileformat.rewrite(safe_path(self.root, old.path, self.mind).read_bytes(), old.path, old, new)

    def reactivate(self, ref: str) -> StoreResult:
        with self.transaction():
            memory = self.find(ref)
            if not memory.superseded:
                return StoreResult(memory, created=False, changed=False, notices=tuple(self.notices))
            if self.actor is Source.AGENT and memory.verified:
                raise Refused(f"{memory.ref} was verified by a person, so an agent cannot change it; ask the user")
            if self.actor is Source.AGENT and memory.priority is Priority.CRITICAL:
                raise Refused(
                    f"{memory.ref} is critical, so only a person can bring it back into recall; ask the user "
                    f"(memfile reactivate {memory.ref})"
                )
            new = replace(memory, status=Status.ACTIVE, superseded_by=None, id_derived=False)
            sha = self.rewrite(memory, new, "reactivate", self.actor)
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def rewrite(self, old: Memory, new: Memory, verb: str, source: Source, what: str | None = None) -> str | None:
        """Write `new` over `old`'s file (after committing any hand edit), then commit `verb what (source)`."""
        return self.apply(old.path, self.rewritten(old, new), verb, what or new.ref, source)

    def forget(self, ref: str) -> Memory:
        with self.transaction():
            memory = self.find(ref)
            if self.actor is Source.AGENT and (memory.verified or memory.priority is Priority.CRITICAL):
                marks = (("critical", memory.priority is Priority.CRITICAL), ("verified by a person", memory.verified))
                why = " and ".join(w for w, on in marks if on)
                instead = "" if memory.verified else f" (store the correction with supersedes={memory.ref!r})"
                raise Refused(
                    f"{memory.ref} is {why}, so an agent cannot forget it{instead}",
                    hint="forget_by_person",
                    hint_values=[memory.ref, memory.id],
                )
            self.record_hand_edit(memory)
            self.apply(memory.path, None, "forget", memory.ref, self.actor)
            return memory

    def forget_many(self, refs: list[str], filters: Mapping[str, Any], dry_run: bool) -> ForgetReport:
        """`Vault.forget_many` (`filters`: its arguments by name): the same selection for a dry run and a real
        run, then one commit."""
        if dry_run:
            return ForgetReport(*self._forgettable(refs, filters), dry_run=True)
        with self.transaction():
            chosen, left_out = self._forgettable(refs, filters)
            if not chosen:
                return ForgetReport(chosen, left_out)
            for memory in chosen:
                self.record_hand_edit(memory)
            listed = "\n".join(memory.ref for memory in chosen)
            subject = f"forget {len(chosen)} {'memory' if len(chosen) == 1 else 'memories'} ({self.actor})\n\n{listed}"
            return ForgetReport(chosen, left_out, self.apply_all([(memory.path, None) for memory in chosen], subject))

    def _forgettable(self, refs: list[str], filters: Mapping[str, Any]) -> tuple[list[Memory], list[Memory]]:
        """The memories the filters (and REFs) name, by category then key: those the caller may forget, and
        those it may not (an agent: anything but its own unverified, non-critical memories).

        Raises:
            InvalidInput: no filter, or a filter value that is not allowed.
            Refused: an agent asked for a person's memories (source user).
        """
        if not refs and not any(filters.values()):
            raise InvalidInput("filter", None, f"at least one of {', '.join(FORGET_FILTERS)}")
        given, now = filters.get, utc_now()
        want_tags = set(parse_tags(given("tag"), "tag"))
        want_category = parse_category(given("category")) if given("category") else None
        want_source = parse_source(given("source")) if given("source") else None
        before = now - parse_duration(given("older_than"), "older_than") if given("older_than") else None
        unverified, expired = given("unverified"), given("expired")
        if self.actor is Source.AGENT and want_source is Source.USER:
            raise Refused(
                "an agent may forget only its own unverified memories, never a person's; leave out source user"
            )
        named = {m.path: m for m in (self.find(ref) for ref in refs)} if refs else None
        matched = sorted(
            (
                m
                for m in (named.values() if named is not None else self.readable())
                if want_tags <= set(m.tags)
                and (want_category is None or m.category is want_category)
                and (want_source is None or m.source is want_source)
                and (not unverified or not m.verified)
                and (before is None or m.updated_at <= before)
                and (not expired or m.is_expired(now))
            ),
            key=lambda m: (str(m.category), m.key, m.path),
        )
        agent = self.actor is Source.AGENT
        return [m for m in matched if not agent or _agents_own(m)], [m for m in matched if agent and not _agents_own(m)]

    def verify(self, ref: str) -> StoreResult:
        if self.actor is Source.AGENT:
            raise Refused(
                "agents cannot verify memories: only a person can", hint="verify_by_person", hint_values=[ref]
            )
        with self.transaction():
            memory = self.find(ref)
            if memory.verified:
                return StoreResult(memory, created=False, changed=False, notices=tuple(self.notices))
            new = replace(memory, verified=True, id_derived=False)
            sha = self.rewrite(memory, new, "verify", Source.USER)
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    def begin_edit(self, ref: str) -> tuple[Memory, Path]:
        if self.actor is Source.AGENT:
            raise Refused("memfile edit is for people; an agent changes memories with memfile store")
        with self.transaction():
            memory = self.find(ref)
            self.record_hand_edit(memory)
            return memory, safe_path(self.root, memory.path, self.mind)

    def finish_edit(self, before: Memory) -> StoreResult:
        with self.transaction():
            path = safe_path(self.root, before.path, self.mind)
            if not path.exists():
                raise NotFound(f"{before.path} no longer exists after the edit")
            after = self._index.load(before.path)[1]
            from .secretscan import warning  # a person's edit is never refused: they are told

            if warned := warning(self.config.secrets, after.content, f"the edit of {after.ref}"):
                self.notices.append(warned)
            for name, old_value, new_value in (
                ("category", before.category, after.category),
                ("key", before.key, after.key),
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
            sha = self.git.commit([before.path], f"edit {after.ref} ({Source.USER})\n\n{self.trailers()}")
            return StoreResult(after, created=False, changed=True, commit=sha, notices=tuple(self.notices))


def _agents_own(memory: Memory) -> bool:
    """A memory an agent may forget: its own (source agent), unverified and not critical."""
    return memory.source is Source.AGENT and not memory.verified and memory.priority is not Priority.CRITICAL


def _readable(data: bytes, relpath: str, mtime_ns: int | None = None, field: str | None = None) -> Memory:
    """Refuse to write a file memfile could not read back; the memory the index will read, for a file of
    this mtime (default: now).

    Raises:
        InvalidInput: naming `field` when given (what the caller passed), else the file.
    """
    try:
        return parse_as_read(data, relpath, time.time_ns() if mtime_ns is None else mtime_ns)
    except FileParseError as exc:
        line = f" on line {exc.line}" if exc.line else ""
        raise InvalidInput(
            field or "memory file",
            relpath,
            "text memfile can read back: no git conflict-marker lines (<<<<<<< ... >>>>>>>), "
            f"at most {fileformat.MAX_FILE_BYTES // 2**20} MB with its tags and front-matter",
            reason=f"the file would be unreadable{line}: {exc.reason}",
        ) from None
