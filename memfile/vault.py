"""The Vault: the one facade over files, git, config and recall.

Every face (CLI, watcher, MCP server) calls these methods and nothing below
them. Reads go to the files every time (the files are the truth); writes
take the writer lock, write atomically and become one git commit each.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import STATE_DIR, Config, caller_source, find_vault, load_config, select_mind
from .errors import InvalidInput
from .files import Stat, lock_holder
from .index import Index, RefreshReport, SearchOptions
from .index.query import check_query
from .model import (
    Category,
    Memory,
    ParseIssue,
    Priority,
    SearchHit,
    Source,
    add_duration,
    parse_category,
    parse_duration,
    parse_priority,
    parse_source,
    parse_tags,
    resolve_ref,
    utc_now,
)
from .doctor import Doctor
from .history import History
from .paths import shown_path
from .recalling import Recalling
from .sync import Sync
from .writes import Writes

if TYPE_CHECKING:
    from .recall import Recallable




#: What `list --status` accepts.
STATUS_FILTERS = ("active", "superseded", "all")


class Vault(Writes, History, Sync, Doctor, Recalling):
    """A vault folder bound to one mind.

    Attributes:
        root: the vault folder.
        mind: the mind folder name this Vault reads and writes.
        actor: who is calling (`user` or `agent`); agents cannot verify.
        issues: files skipped by the last read, with file, line and reason.
        notices: things a write did that the caller should be told.
    """

    def __init__(self, root: Path, mind: str, config: Config, actor: Source) -> None:
        self.root = root
        self.mind = mind
        self.config = config
        self.actor = actor
        self.notices: list[str] = []
        self._watcher: Any = None
        self._recall_cache: tuple[tuple[float, bool], datetime, Recallable] | None = None  # see _recallable
        self._index = Index(root, mind, config.lock_timeout, self.notices.append)

    @property
    def issues(self) -> list[ParseIssue]:
        """The files the last read skipped, with file, line and reason."""
        return self._index.issues

    @issues.setter
    def issues(self, issues: list[ParseIssue]) -> None:
        self._index.issues = list(issues)

    # --- opening ---------------------------------------------------------

    #: Set by memfile.watch (which sits above this module): starts a Watcher over a Vault.
    watcher_factory: Callable[..., Any] | None = None

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, mind: str | None = None, *,
        source: str | Source | None = None, watch: bool = False,
    ) -> Vault:
        """Open a vault and choose its mind.

        Args:
            path: the vault folder; default `MEMFILE_VAULT`, else the nearest parent holding memfile.toml.
            mind: the mind; default `MEMFILE_MIND`, else `default_mind`, else the only mind folder.
            source: who is calling, `user` or `agent`; default `MEMFILE_SOURCE`, else `user`.
            watch: keep the index in line with the files from a background thread
                until `close()` (or the end of a `with` block).

        Raises:
            NotAVault, NotFound, InvalidInput: the vault or mind cannot be chosen (the message says how to fix it).
        """
        root = find_vault(path)
        config = load_config(root)
        vault = cls(root, select_mind(root, config, mind), config, caller_source(source))
        if watch and cls.watcher_factory is not None:
            vault._watcher = cls.watcher_factory(vault)
        return vault

    @property
    def name(self) -> str:
        """The mind's display name (memfile.toml `[minds.NAME] name`), else its folder name."""
        return self.config.display_name(self.mind)

    @property
    def mind_dir(self) -> Path:
        return self.root / self.mind

    # --- reading ---------------------------------------------------------

    def memories(self) -> list[Memory]:
        """Every memory of the mind as it is on disk now (unreadable files go to `issues`): the index is
        brought in line with the files first (see `refresh`) and read, so not every file is parsed."""
        return self._index.memories()

    def _memories_named(self, ref: str, place: str) -> list[Memory]:
        """The memories holding `category/key` on disk now: a store's lookup (`Index.named`)."""
        return self._index.named(ref, place)

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> RefreshReport:
        """Bring the index in line with the mind's files: a stat-only diff, then re-read only what changed.

        Every read calls this first, so hand edits, `git pull`, checkouts and
        copied-in files are seen by the very next call. If another process is
        writing the index right now, nothing waits: what changed is read and
        overlaid (the report's `pending`). While a watcher runs and has nothing
        pending, it vouches for the index and the diff is skipped.

        Args:
            progress: called with (files read, files to read).

        Returns:
            A RefreshReport: counts of added, updated and removed files, and the files skipped with reasons.
        """
        return self._index.refresh(progress, trust_watcher=True)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> RefreshReport:
        """Throw the index away and rebuild it from the files.

        Raises:
            LockTimeout: another process kept the index's writer lock past the timeout.
        """
        return self._index.rebuild(progress)

    def _sync(self, paths: list[str] | None, wait: bool) -> RefreshReport:
        """The index in line with these files (all of the mind's with None), after a write."""
        return self._index.refresh(paths=paths, wait=wait)

    def _load(self, relpath: str) -> tuple[Stat, Memory]:
        """One file's stat and memory (`Index.load`).

        Raises:
            FileParseError: the file cannot be read or parsed.
        """
        return self._index.load(relpath)

    def _find(self, ref: str) -> Memory:
        return resolve_ref(ref, self.memories(), self.mind)

    def get(self, ref: str) -> Memory:
        """One memory by REF.

        Args:
            ref: an id (`mem_...`), `category/key`, or a key unique in the mind.

        Returns:
            The memory as on disk now.

        Raises:
            InvalidInput: the REF is malformed or tries to leave the mind.
            NotFound: no memory matches.
            AmbiguousRef: the key is used in several categories.
        """
        return self._find(ref)

    show = get

    def list(
        self,
        category: str | Category | None = None,
        tags: str | list[str] | tuple[str, ...] | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        status: str = "active",
    ) -> list[Memory]:
        """The mind's memories that pass every filter given, by category then key.

        Args:
            category, priority, source: keep only this value.
            tags: keep memories carrying all of these tags (case-insensitive).
            unverified: keep only unverified memories.
            include_expired: also keep memories whose `expires_at` has passed.
            status: `active` (default), `superseded`, or `all`.

        Raises:
            InvalidInput: a filter value is not allowed.
        """
        if status not in STATUS_FILTERS:
            raise InvalidInput("status", status, list(STATUS_FILTERS))
        want_superseded = {"active": False, "superseded": True}.get(status)
        want_category = parse_category(category) if category else None
        want_priority = parse_priority(priority) if priority else None
        want_source = parse_source(source) if source else None
        want_tags = set(parse_tags(tags))
        now = utc_now()
        return sorted(
            (
                m for m in self.memories()
                if (want_category is None or m.category is want_category)
                and (want_priority is None or m.priority is want_priority)
                and (want_source is None or m.source is want_source)
                and want_tags <= set(m.tags)
                and (not unverified or not m.verified)
                and (include_expired or not m.is_expired(now))
                and (want_superseded is None or m.superseded is want_superseded)
            ),
            key=lambda m: (str(m.category), m.key, m.path),
        )

    def expiring(self, within: str | timedelta = "7d") -> list[Memory]:
        """Memories that expire within the given time from now, soonest first.

        Args:
            within: a duration such as `30m`, `12h`, `7d`, `2w`.

        Raises:
            InvalidInput: `within` is not a duration.
        """
        now = utc_now()
        horizon = add_duration(now, parse_duration(within, "within"), "within")
        soon = [m for m in self.memories() if m.expires_at is not None and now < m.expires_at <= horizon]
        return sorted(soon, key=lambda m: (m.expires_at, m.ref))

    # --- search -------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        tags: str | list[str] | tuple[str, ...] | None = None,
        category: str | Category | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        include_superseded: bool = False,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search of the mind, best first (BM25F over content, key and tags).

        Use it to find what is known about a topic before answering or storing.
        Plain words are OR-grouped (more shared words rank higher; stop words and
        `?` are ignored); `"exact phrase"`, AND/OR/NOT, `prefix*`, `tag:docker`
        and `category:project` work too. Accents are ignored (`nha hang` finds
        `nhà hàng`), English words are stemmed, and Thai, Chinese and Japanese
        text is found by any substring of two or more characters.

        Args:
            query: what to look for (at most 4,096 characters).
            tags: only memories with all of these tags.
            category, priority, source: only this value.
            unverified: only unverified memories.
            include_expired: also memories whose `expires_at` has passed.
            include_superseded: also memories marked superseded by a newer one.
            limit: the most hits to return (1 to 1000).

        Returns:
            SearchHit values (memory, score, snippet with **matches**, rank). Where the vault's index
            cannot be written (read-only media, a full disk), the files are searched through a
            temporary index, or, when none can be made, in memory.

        Raises:
            InvalidInput: the query cannot be parsed or a filter is not allowed.
        """
        check_query(query)  # before any work: a 10 MB query is refused at once
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput("limit", limit, "a whole number from 1 to 1000")
        options = SearchOptions(
            tags=parse_tags(tags),
            category=str(parse_category(category)) if category else None,
            priority=str(parse_priority(priority)) if priority else None,
            source=str(parse_source(source)) if source else None,
            unverified=unverified, include_expired=include_expired, include_superseded=include_superseded, limit=limit,
        )

        return self._index.read(lambda view: view.search(query, options)[0])

    def warm(self, seconds: float = 0.005, stop: Callable[[], bool] | None = None) -> bool:
        """Spend about `seconds` on work that makes the searches to come faster; True while there is more.

        For a process that stays open: the MCP server calls it while no request
        waits. It works out the scores of the index's most frequent words ahead of
        the searches that need them, and starts over after any change to the
        index. The work pauses about every 0.4 ms, and stops there when `stop()`
        is true (a request came in). It reads no file and changes nothing; a
        damaged index is left to the next search to rebuild.
        """
        return self._index.warm(seconds, stop)

    def by_tag(self, tag: str, include_expired: bool = False) -> list[Memory]:
        """The memories carrying a tag (case-insensitive), newest first.

        Raises:
            InvalidInput: the tag is empty or not allowed.
        """
        wanted = parse_tags([tag])
        if len(wanted) != 1:
            raise InvalidInput("tag", tag, "one tag")
        memories = self.list(tags=wanted, include_expired=include_expired)
        return sorted(memories, key=lambda m: (m.updated_at, m.ref), reverse=True)

    def tags(self) -> list[tuple[str, int]]:
        """Every tag of the mind's unexpired memories with how many carry it, most used first."""
        counts = Counter(tag for memory in self.list() for tag in memory.tags)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def stats(self) -> dict[str, Any]:
        """Counts of the mind's memories (per category, priority, source; verified; expired; superseded) and index facts."""
        memories = self.memories()
        now = utc_now()
        size = self._index.size()
        return {
            "mind": self.mind,
            "name": self.name,
            "total": len(memories),
            "by_category": {str(c): sum(1 for m in memories if m.category is c) for c in Category},
            "by_priority": {str(p): sum(1 for m in memories if m.priority is p) for p in Priority},
            "by_source": {str(s): sum(1 for m in memories if m.source is s) for s in Source},
            "verified": sum(1 for m in memories if m.verified),
            "unverified": sum(1 for m in memories if not m.verified),
            "expired": sum(1 for m in memories if m.is_expired(now)),
            "superseded": sum(1 for m in memories if m.superseded),
            "unreadable_files": len(self.issues),
            "index_bytes": size,
            "last_index_update": self._last_index_update(),
        }

    def _last_index_update(self) -> str | None:
        last = self._index.last_update()
        return datetime.fromtimestamp(last, timezone.utc).isoformat() if last else None

    def status(self) -> dict[str, Any]:
        """How the mind's files, index, watcher and git repository stand, without changing anything.

        Returns:
            on_disk and indexed file counts, stale paths (changed on disk since indexed: a file whose
            stat cannot prove it unchanged is read and compared), `unreadable`: the files (and folders,
            `<folder>/`) that cannot be read, as last read, each a dict of `path`, `line` (or None) and
            `reason`; last index update, the watcher's pid (or None), uncommitted hand edits,
            conflicted memories (as last indexed: a sync found their body changed on both sides),
            and the git upstream with ahead/behind counts (None without a repository).
        """
        index = self._index.status()
        return {
            "mind": self.mind,
            "on_disk": index.on_disk,
            "indexed": index.indexed,
            "stale": index.stale,
            "unreadable": [{"path": i.path, "line": i.line, "reason": i.reason} for i in index.unreadable],
            "last_index_update": self._last_index_update(),
            "watcher_pid": lock_holder(self.root / STATE_DIR / f"watch-{self.mind}.lock"),
            "uncommitted": [shown_path(p) for p in self._git.changed_paths(self.mind) if p.endswith(".md")]
            if self._git.exists() else [],
            "conflicts": index.conflicts,
            "git": self._git.remote_status(),
        }

    def close(self) -> None:
        """Stop the watcher, if any, and release the index's files (the Vault may not be used afterwards)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._index.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
