"""The Vault: the one facade over files, git, config and recall.

Every face calls these methods and nothing below them. Each public verb is here, a few lines with its
docstring (the MCP tool descriptions come from them), delegating to the collaborators the Vault is made
with: the index (`memfile.index`), the writer (`memfile.writer`), the recaller (`memfile.recalling`),
and, made on first git use, history, remote sync and the doctor. Reads go to the files every time;
writes take the writer lock, write atomically and become one git commit each.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import cached_property, partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, TypeVar

from ._version import __version__
from .config import (
    STATE_DIR,
    AmbiguousMind,
    Config,
    caller_source,
    find_vault,
    is_vault,
    load_config,
    new_vault_root,
    select_mind,
    validate_display_name,
)
from .errors import Conflict, InvalidInput, MemfileError, NotFound, Refused
from .files import lock_holder, lock_text
from .index import Index, RefreshReport, SearchOptions, check_query
from .links import Link, Linked, LinkTable, ResolvedLink
from .model import (
    LABEL_PATTERN,
    LABEL_RULE,
    UNSET,
    Category,
    ForgetReport,
    Memory,
    ParseIssue,
    Priority,
    Progress,
    SearchHit,
    Source,
    StatsReport,
    Status,
    StatusReport,
    StoreResult,
    add_duration,
    format_datetime,
    parse_category,
    parse_duration,
    parse_priority,
    parse_source,
    parse_tags,
    resolve_ref,
    utc_now,
)
from .paths import MIND_PATTERN, memory_relpath, mind_dirs, shown_path, validate_mind
from .recalling import AsOf, Recaller, tells_secrets
from .writer import Writer

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .capture import Capturer, CaptureReport, Extract
    from .doctor import Doctor, DoctorReport
    from .git import GitStore
    from .history import History, LogEntry, Version
    from .purge import Purger, PurgeReport
    from .recall import RecallReport
    from .recalling import RecallRecord
    from .remote import Remote, RemoteReport
    from .semantic.mind import MindVectors
    from .transfer import ExportReport, ImportReport, MindExport


# --- for the faces, which import only vault, model, errors and config: what they show from below the
# facade (RefreshReport, imported above; LogEntry and Version, for annotations: history loads on first
# use) and git's jobs they run without a Vault, the git adapter imported only when one runs.
def run_merge_driver(base: str, ours: str, theirs: str, relpath: str) -> int:
    """git's merge driver for memory files (`memfile merge-file`): 0 when merged, 1 when git must decide."""
    from .git import run_merge_driver as run

    return run(base, ours, theirs, relpath)


def pack_loose_objects(root: Path) -> bool:
    """Pack the loose objects of the vault's git repository when they are many; True when it did."""
    from .git import pack_loose_objects as pack

    return pack(root)


T = TypeVar("T")

#: The arguments of `Vault.store`, which `store_many` takes by name.
_STORE_ARGUMENTS = frozenset(
    {"category", "key", "content", "priority", "tags", "confidence", "expires", "source", "supersedes", "allow_secret"}
)
#: What an entry of `store_many` may hold: store's arguments and the credential it is made for.
_STORE_MANY_FIELDS = _STORE_ARGUMENTS | {"credential"}

#: What `list --status` accepts.
STATUS_FILTERS = ("active", "superseded", "proposed", "all")


_CALLS = threading.local()  # how deep this thread is in the Vault's verbs (a verb may call another)


def _verb(method: Callable[..., T]) -> Callable[..., T]:
    """A public verb of the Vault: `notices` (and `issues`) tell about one call, the outermost one of this
    thread, never pile up over a process's life; a StoreResult carries the notices of its own call."""

    @wraps(method)
    def verb(self: Vault, *args: Any, **kwargs: Any) -> T:
        depth = getattr(_CALLS, "depth", 0)
        if depth == 0:
            self.notices.clear()
        _CALLS.depth = depth + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _CALLS.depth = depth

    return verb


class Vault:
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
        self.notices: list[str] = []
        self._watcher: Any = None
        self._index = Index(root, mind, config.lock_timeout, self.notices.append)
        self._writer = Writer(root, mind, config, actor, self._index, self.notices)
        self._writer.after_write = self._autosync
        self._writer.finish_purge = lambda: self._purger.finish_interrupted()
        self._parsed_links: dict[str, tuple[str, list[Link]]] = {}  # each text's links, parsed once (LinkTable)
        self._recaller = Recaller(root, mind, config, actor, self._index, self.notices, self._parsed_links)
        self._readers: dict[str, Vault] = {}  # other minds read by `recall(with_minds=...)`
        self._moments: OrderedDict[str, AsOf] = OrderedDict()  # `recall(at=...)`: by commit sha, newest used last
        self._mind_vectors: MindVectors | None = None  # `search(semantic=True)`: made on first use
        #: Set by a long-lived process (memfile.worker), which embeds between requests where `[search] semantic`
        #: is on: a search by meaning then says so instead of naming `memfile reindex --semantic`.
        self.resident = False

    @property
    def while_committing(self) -> Callable[[Future[str | None]], None] | None:
        """Called on this Vault's thread, with git's commit still being made (a Future), by each write
        once its files are written and indexed; the write goes on when it returns and the commit is done.
        A resident process (memfile.worker) answers reads of its minds meanwhile; whatever it runs must
        not write to the vault (that would wait for this write's lock), and a read made meanwhile may
        already see the memories of the commit being made (taken back if git fails to make it). None
        (the default): the write just waits."""
        return self._writer.while_committing

    @while_committing.setter
    def while_committing(self, fn: Callable[[Future[str | None]], None] | None) -> None:
        self._writer.while_committing = fn

    @property
    def actor(self) -> Source:
        """Who is calling: `user` or `agent` (agents are bound by the agent rules: no verify, at most high...)."""
        return self._writer.actor

    @actor.setter
    def actor(self, actor: str | Source) -> None:
        self._writer.actor = self._recaller.actor = parse_source(actor, "source")

    @contextmanager
    def acting_as(self, source: str | Source, key: str | None = None) -> Iterator[Vault]:
        """Calls inside the block are made as `source` (`user` or `agent`), and each commit they make names
        `key` in a `Memfile-Key:` trailer (a served credential's label); both are put back after the block.

        A server that answers many credentials with one Vault switches with this before each call.
        """
        before, before_key = self.actor, self._writer.key_label
        self.actor = source
        self._writer.key_label = key
        try:
            yield self
        finally:
            self._writer.actor = self._recaller.actor = before
            self._writer.key_label = before_key

    # --- collaborators made on first git use: reads never import memfile.git -----------------

    @property
    def _git(self) -> GitStore:
        return self._writer.git

    @cached_property
    def _history(self) -> History:
        from .history import History

        return History(self._writer, self._index)

    @cached_property
    def _remote(self) -> Remote:
        from .remote import Remote

        return Remote(self._writer, self._index)

    @cached_property
    def _purger(self) -> Purger:
        from .purge import Purger

        return Purger(self._writer, self._index, self._history)

    @cached_property
    def _capturer(self) -> Capturer:
        from .capture import Capturer

        def similar(text: str, limit: int) -> builtins.list[Memory]:
            options = SearchOptions(include_proposed=True, include_superseded=False, limit=limit, snippets=False)
            return [hit.memory for hit in self._searched(text, options, None)]

        return Capturer(self._writer, self._index, similar, review=self.config.capture_review)

    @cached_property
    def _doctor(self) -> Doctor:
        from .doctor import Doctor

        return Doctor(self._writer, self._index, self.status, self.link_table)

    def _autosync(self) -> None:
        """After each write's commit, inside its transaction: `[sync] autosync` (see `Remote.autosync`)."""
        if self.config.autosync:
            self._remote.autosync()

    @property
    def issues(self) -> list[ParseIssue]:
        """The files the last read skipped, with file, line and reason."""
        return self._index.issues

    @issues.setter
    def issues(self, issues: list[ParseIssue]) -> None:
        self._index.issues = list(issues)

    # --- opening ---------------------------------------------------------

    @classmethod
    def init(cls, path: str | os.PathLike[str], mind: str = "default", name: str | None = None) -> Vault:
        """Create a vault (or add a mind to one): memfile.toml, the mind folder, .gitignore, a git repository.

        Args:
            path: the vault folder (created if missing). A folder that is not a vault yet may hold a
                folder named `mind`: its notes become the mind's memories (a notice says how to commit them).
            mind: the first mind's folder name.
            name: the mind's display name, shown by recall.

        Returns:
            The new vault, bound to `mind`.

        Raises:
            Conflict: the mind already exists in that vault.
            InvalidInput: `path` is empty, or inside another vault.
        """
        validate_mind(mind)
        validate_display_name(name)  # before anything is made: a bad name leaves no folder, repository or index
        root = new_vault_root(path)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput(
                "PATH", str(path), "a folder memfile can create", reason=exc.strerror or str(exc)
            ) from None
        mind_dir = root / mind
        if mind_dir.is_symlink() or (mind_dir.exists() and is_vault(root)):
            raise Conflict(
                f"mind {mind!r} already exists in {root}; open it with: memfile --vault {root} --mind {mind} recall"
            )
        adopted = mind_dir.is_dir() and any(mind_dir.iterdir())  # a folder of notes becomes the mind
        maker = cls(root, mind, load_config(root), caller_source(Source.USER))
        try:
            maker._writer.create_mind(name)
        finally:
            maker.close()
        vault = cls(root, mind, load_config(root), maker.actor)
        vault.notices += maker.notices
        if adopted:
            vault.notices.append(
                f"the files already in {mind}/ are its memories, read as they are and not yet committed; "
                "commit them now with: memfile doctor --fix (else each is committed when memfile first changes it)"
            )
        return vault

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        mind: str | None = None,
        *,
        source: str | Source | None = None,
        watch: bool = False,
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
        if watch:
            from .watch import Watcher  # a face: imported only by the vault that asks for one

            vault._watcher = Watcher(vault).start()
        return vault

    @property
    def name(self) -> str:
        """The mind's display name (memfile.toml `[minds.NAME] name`), else its folder name."""
        return self.config.display_name(self.mind)

    @property
    def mind_dir(self) -> Path:
        return self.root / self.mind

    # --- reading ---------------------------------------------------------

    @_verb
    def memories(self) -> list[Memory]:
        """Every memory of the mind as it is on disk now (unreadable files go to `issues`): the index is
        brought in line with the files first (see `refresh`) and read, so not every file is parsed."""
        return self._index.memories()

    @_verb
    def refresh(
        self, progress: Callable[[int, int], None] | None = None, *, paths: list[str] | None = None, wait: bool = False
    ) -> RefreshReport:
        """Bring the index in line with the mind's files: a stat-only diff, then re-read only what changed.

        Every read calls this first, so hand edits, `git pull`, checkouts and
        copied-in files are seen by the very next call. If another process is
        writing the index right now, nothing waits: what changed is read and
        overlaid (the report's `pending`). While a watcher runs and has nothing
        pending, it vouches for the index and the diff is skipped.

        Args:
            progress: called with (files read, files to read).
            paths: only these files (vault-relative); by default every file of the mind, by the stat-only diff.
            wait: wait for another process writing the index and apply the changes now, instead of
                overlaying them (the watcher's batches); a watcher's word is then not taken either.

        Returns:
            A RefreshReport: counts of added, updated and removed files, and the files skipped with reasons.
        """
        if paths is not None or wait:
            return self._index.refresh(progress, paths=paths, wait=wait)
        return self._index.refresh(progress, trust_watcher=True)

    @_verb
    def reindex(self, progress: Callable[[int, int], None] | None = None) -> RefreshReport:
        """Throw the index away and rebuild it from the files.

        Raises:
            LockTimeout: another process kept the index's writer lock past the timeout.
        """
        return self._index.rebuild(progress)

    @_verb
    @tells_secrets(lambda memory: [memory])
    def get(self, ref: str) -> Memory:
        """One memory by REF.

        Args:
            ref: an id (`mem_...`), `category/key`, or a key unique in the mind.

        Returns:
            The memory as on disk now.

        Raises:
            InvalidInput: the REF is malformed or tries to leave the mind.
            NotFound: no memory matches (an agent finds no proposed memory: `capture`).
            AmbiguousRef: the key is used in several categories.
        """
        return resolve_ref(ref, self._writer.readable(), self.mind, self.issues)

    show = get

    @_verb
    def links(self, ref: str) -> builtins.list[ResolvedLink]:
        """The links a memory's text makes (`[[key]]`, `[[category/key|shown]]`, `- relation [[key]]`), resolved.

        Args:
            ref: the memory, as `get` takes it.

        Returns:
            One ResolvedLink per link, in the text's order: its relation, line, status (resolved, superseded
            to a successor, ambiguous, missing, other_mind, invalid) and the memory it leads to, if any.

        Raises:
            InvalidInput, NotFound, AmbiguousRef: as `get`.
        """
        table = self.link_table()
        return table.links(resolve_ref(ref, table.memories, self.mind, self.issues))

    @_verb
    def backlinks(self, ref: str) -> builtins.list[ResolvedLink]:
        """The links of the mind's memories that lead to this one (after following supersedes).

        Args:
            ref: the memory, as `get` takes it.

        Returns:
            One ResolvedLink per link, by the linking memory's path and line (`source` is that memory).

        Raises:
            InvalidInput, NotFound, AmbiguousRef: as `get`.
        """
        return self.linked(ref).backlinks

    @_verb
    @tells_secrets(lambda linked: [linked.memory])
    def linked(self, ref: str) -> Linked:
        """One memory with its links and backlinks (what `show` gives).

        Raises:
            InvalidInput, NotFound, AmbiguousRef: as `get`.
        """
        table = self.link_table()
        memory = resolve_ref(ref, table.memories, self.mind, self.issues)
        return Linked(memory, table.links(memory), table.backlinks(memory))

    @_verb
    def link_table(self) -> LinkTable:
        """Every link of the mind, resolved over the memories on disk now; a text is parsed again only
        when it changed. `LinkTable.links(memory)` gives one memory's links cheaply (recall's neighbours)."""
        others = [mind for mind in mind_dirs(self.root) if mind != self.mind]

        def elsewhere(category: Category | None, key: str) -> str | None:
            """Another mind holding the file `category/key.md` (in any category when None)."""
            folders = [category] if category else list(Category)
            return next(
                (m for m in others if any((self.root / memory_relpath(m, c, key)).is_file() for c in folders)), None
            )

        return LinkTable(self._writer.readable(), elsewhere if others else None, self._parsed_links)

    @_verb
    def list(
        self,
        category: str | Category | None = None,
        tags: str | list[str] | tuple[str, ...] | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        status: str = "active",
    ) -> builtins.list[Memory]:
        """The mind's memories that pass every filter given, by category then key.

        Args:
            category, priority, source: keep only this value.
            tags: keep memories carrying all of these tags (case-insensitive).
            unverified: keep only unverified memories.
            include_expired: also keep memories whose `expires_at` has passed.
            status: `active` (default), `superseded`, `proposed` (captured, waiting for review; none for an
                agent), or `all` (an agent's without the proposed).

        Raises:
            InvalidInput: a filter value is not allowed.
        """
        if status not in STATUS_FILTERS:
            raise InvalidInput("status", status, list(STATUS_FILTERS))
        want_status = None if status == "all" else Status(status)
        agent = self.actor is Source.AGENT
        want_category = parse_category(category) if category else None
        want_priority = parse_priority(priority) if priority else None
        want_source = parse_source(source) if source else None
        want_tags = set(parse_tags(tags))
        now = utc_now()
        return sorted(
            (
                m
                for m in self.memories()
                if (want_category is None or m.category is want_category)
                and (want_priority is None or m.priority is want_priority)
                and (want_source is None or m.source is want_source)
                and want_tags <= set(m.tags)
                and (not unverified or not m.verified)
                and (include_expired or not m.is_expired(now))
                and (want_status is None or (m.status or Status.ACTIVE) is want_status)
                and not (agent and m.proposed)
            ),
            key=lambda m: (str(m.category), m.key, m.path),
        )

    @_verb
    def expiring(self, within: str | timedelta = "7d") -> builtins.list[Memory]:
        """Memories that expire within the given time from now, soonest first.

        Args:
            within: a duration such as `30m`, `12h`, `7d`, `2w`.

        Raises:
            InvalidInput: `within` is not a duration.
        """
        now = utc_now()
        horizon = add_duration(now, parse_duration(within, "within"), "within")
        soon = [m for m in self._writer.readable() if m.expires_at is not None and now < m.expires_at <= horizon]
        return sorted(soon, key=lambda m: (m.expires_at, m.ref))

    # --- search -------------------------------------------------------------

    @_verb
    @tells_secrets(lambda hits: [hit.memory for hit in hits])
    def search(
        self,
        query: str,
        *,
        tags: str | builtins.list[str] | tuple[str, ...] | None = None,
        category: str | Category | None = None,
        priority: str | Priority | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        include_expired: bool = False,
        include_superseded: bool = False,
        include_proposed: bool = False,
        limit: int = 10,
        semantic: bool | None = None,
        at: str | datetime | None = None,
    ) -> builtins.list[SearchHit]:
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
            include_proposed: also captured memories waiting for review (`capture`, `review`); never for an
                agent, which reads no proposal until a person accepts it.
            limit: the most hits to return (1 to 1000).
            semantic: also by meaning (default `[search] semantic`; the `semantic` extra): the lexical
                hits fused with the memories nearest the question by a multilingual model, under the
                same filters; each hit says its parts (docs/semantic.md). Memories not embedded yet
                (`embed`) are found by their words only, and a notice says how many are embedded.
            at: search the mind as it was then, read from git (as `recall`'s `at`); by words only.

        Returns:
            SearchHit values (memory, score, snippet with **matches**, rank); `to_dict()` holds the
            content's first 1,000 characters only (`content_cut`, `content_chars`: read the whole
            memory with memfile show). Where the vault's index cannot be written (read-only media, a
            full disk), the files are searched through an index made in memory.

        Raises:
            InvalidInput: the query cannot be parsed, a filter is not allowed, or `at` names no commit.
        """
        check_query(query)  # before any work: a 10 MB query is refused at once
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput("limit", limit, "a whole number from 1 to 1000")
        options = SearchOptions(
            tags=parse_tags(tags),
            category=str(parse_category(category)) if category else None,
            priority=str(parse_priority(priority)) if priority else None,
            source=str(parse_source(source)) if source else None,
            unverified=unverified,
            include_expired=include_expired,
            include_superseded=include_superseded,
            include_proposed=include_proposed and self.actor is not Source.AGENT,
            limit=limit,
        )
        if at is not None:
            as_of = self._moment(at, semantic)
            found = as_of.index.read(lambda view: view.search(query, options, as_of.moment)[0])
            self.issues = as_of.index.issues  # the files of that commit that could not be parsed
            return found
        return self._searched(query, options, semantic)

    def _searched(self, query: str, options: SearchOptions, semantic: bool | None) -> builtins.list[SearchHit]:
        """`search`'s hits of the mind now, by words, or fused with those by meaning (`semantic`)."""
        if not (self.config.semantic if semantic is None else semantic):
            return self._index.read(lambda view: view.search(query, options)[0])
        from .semantic.mind import admission

        admit = admission(**{name: getattr(options, name) for name in _FILTERS})
        vectors = self._vectors()
        vectors.queries.get(query)  # the model runs first: the read's stat walk (no watcher) fills both cores
        hits, (embedded, total) = self._index.read(lambda view: vectors.search(view, query, options, admit))
        if embedded < total:
            self.notices.append(self._not_embedded(embedded, total))
        return builtins.list(hits)

    def _not_embedded(self, embedded: int, total: int) -> str:
        """The notice of a search by meaning over a mind whose memories are not all embedded yet."""
        counted = f"{embedded:,} of {total:,} memories embedded for search by meaning"
        if self.resident and self.config.semantic:
            return f"{counted} so far; the others are found by their words only until the server embeds them"
        return f"{counted}; the others are found by their words only: run memfile reindex --semantic"

    def _vectors(self) -> MindVectors:
        """The mind's vectors under `[search] model` (the model is loaded on first use)."""
        if self._mind_vectors is None:
            from .index import STOP_WORDS
            from .semantic.mind import MindVectors

            self._mind_vectors = MindVectors(
                self.root, self.mind, self.config.semantic_model, STOP_WORDS, self.config.dense_floor
            )
        return self._mind_vectors

    @_verb
    def embed(
        self,
        progress: Callable[[int, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        batch: int = 32,
    ) -> int:
        """Embed the memories of the mind that have no vector yet, for `search(..., semantic=True)`.

        Vectors are a cache, like the index: in `.memfile/`, keyed by the content's hash (a rename or a
        change of tags re-embeds nothing), never committed. A resident process calls it between requests.

        Args:
            progress: called with (embedded, to embed) after each batch.
            stop: asked before each batch; True stops (what is embedded so far is kept).
            batch: memories embedded at once.

        Returns:
            How many memories were embedded.

        Raises:
            InvalidInput: the `semantic` extra is not installed, or `[search] model` names no model.
        """
        return self._vectors().embed_all(self._index.memories(), progress=progress, stop=stop, batch=batch)

    def warm(self, seconds: float = 0.005, stop: Callable[[], bool] | None = None) -> bool:
        """Spend about `seconds` on work that makes the searches to come faster; True while there is more.

        For a process that stays open, while no request waits; `stop()` (a request came in) is asked
        between steps. It reads no file and changes nothing; a damaged index is left to the next search.
        """
        return self._index.warm(seconds, stop)

    @_verb
    def by_tag(self, tag: str, include_expired: bool = False) -> builtins.list[Memory]:
        """The memories carrying a tag (case-insensitive), newest first.

        Raises:
            InvalidInput: the tag is empty or not allowed.
        """
        wanted = parse_tags([tag])
        if len(wanted) != 1:
            raise InvalidInput("tag", tag, "one tag")
        memories = self.list(tags=wanted, include_expired=include_expired)
        return sorted(memories, key=lambda m: (m.updated_at, m.ref), reverse=True)

    @_verb
    def tags(self) -> builtins.list[tuple[str, int]]:
        """Every tag of the mind's unexpired memories with how many carry it, most used first."""
        counts = Counter(tag for memory in self.list() for tag in memory.tags)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    @_verb
    def stats(self) -> StatsReport:
        """Counts of the mind's memories (per category, priority, source; verified; expired; superseded) and index
        facts. Captured memories waiting for review are counted apart (`proposed`; none for an agent)."""
        every = self.memories()
        memories = [m for m in every if not m.proposed]
        now = utc_now()
        return StatsReport(
            mind=self.mind,
            name=self.name,
            total=len(memories),
            by_category={str(c): sum(1 for m in memories if m.category is c) for c in Category},
            by_priority={str(p): sum(1 for m in memories if m.priority is p) for p in Priority},
            by_source={str(s): sum(1 for m in memories if m.source is s) for s in Source},
            verified=sum(1 for m in memories if m.verified),
            unverified=sum(1 for m in memories if not m.verified),
            expired=sum(1 for m in memories if m.is_expired(now)),
            superseded=sum(1 for m in memories if m.superseded),
            proposed=0 if self.actor is Source.AGENT else len(every) - len(memories),
            unreadable_files=len(self.issues),
            index_bytes=self._index.size(),
            last_index_update=self._last_index_update(),
        )

    def _last_index_update(self) -> str | None:
        last = self._index.last_update()
        return format_datetime(datetime.fromtimestamp(int(last), timezone.utc)) if last else None

    @_verb
    def status(self) -> StatusReport:
        """How the mind's files, index, watcher and git repository stand, without changing anything.

        Returns:
            on_disk and indexed file counts, stale paths (changed on disk since indexed: a file whose
            stat cannot prove it unchanged is read and compared), `unreadable`: the files (and folders,
            `<folder>/`) that cannot be read, as last read, each a dict of `path`, `line` (or None) and
            `reason`; last index update, the watcher's pid (or None), the vault's server (`memfile serve`
            holding .memfile/serve.lock: its pid and address; None), uncommitted hand edits,
            conflicted memories (as last indexed: a sync found their body changed on both sides),
            and the git upstream with ahead/behind counts (None without a repository); `semantic`:
            how many memories have vectors (`embed`), where `[search] semantic` is on or vectors exist.
        """
        index = self._index.status()
        semantic = None
        if self.config.semantic or any((self.root / STATE_DIR).glob(f"vectors-{self.mind}-*.sqlite")):
            embedded, total = self._vectors().counts(self._index.memories())
            semantic = {"model": self._vectors().embedder.model_id, "embedded": embedded, "total": total}
        return StatusReport(
            mind=self.mind,
            on_disk=index.on_disk,
            indexed=index.indexed,
            stale=index.stale,
            unreadable=[{"path": i.path, "line": i.line, "reason": i.reason} for i in index.unreadable],
            last_index_update=self._last_index_update(),
            watcher_pid=lock_holder(self.root / STATE_DIR / f"watch-{self.mind}.lock"),
            server=_server(self.root),
            uncommitted=[shown_path(p) for p in self._git.changed_paths(self.mind) if p.endswith(".md")]
            if self._git.exists()
            else [],
            conflicts=index.conflicts,
            git=self._git.remote_status(),
            semantic=semantic,
        )

    # --- writing (memfile.writer) ----------------------------------------------------------

    @_verb
    def commit_hand_edits(self, relpaths: builtins.list[str] | None = None) -> str | None:
        """Commit memory files changed by hand (all of the mind's, or these) in one commit.

        Returns:
            The commit's sha, or None when nothing differed from git.
        """
        return self._writer.commit_hand_edits(relpaths)

    @_verb
    def store(
        self,
        category: str | Category,
        key: str,
        content: str,
        *,
        priority: str | Priority | None = None,
        tags: str | builtins.list[str] | tuple[str, ...] | None = None,
        confidence: float | str | None = None,
        expires: str | datetime | None = UNSET,
        source: str | Source | None = None,
        supersedes: str | None = None,
        allow_secret: bool = False,
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
            tags: a list, or a comma-separated string; stored lowercase; at most 100 (`model.MAX_TAGS`).
            confidence: 0.0 to 1.0; default 1.0 for user memories, 0.7 for agent ones.
            expires: a duration (`7d`), an ISO-8601 moment, or `never`; omitted keeps the current value.
            source: `user` or `agent`; default the caller. An agent cannot store as `user`.
            supersedes: REF of an older memory this one replaces: in the same commit it is
                marked `status: superseded` with `superseded_by: <this id>`, which keeps it on
                disk but out of recall and search (`reactivate` brings it back).
            allow_secret: a person stores content that looks like a secret (a token, a key, a
                password) all the same, with a warning; never an agent (`[secrets]`, docs/secrets.md).

        Returns:
            A StoreResult with the memory as written, whether anything changed, and the superseded memory.

        Raises:
            InvalidInput: a field is not allowed (the message names it and the allowed values).
            Refused: an agent tried to store as a user, or to supersede a memory a person verified;
                the content looks like a secret (SecretFound: the rule, line and a masked value).
            Conflict: another file holds the memory's path, or the lock timed out.
        """
        result = self._writer.store(
            category,
            key,
            content,
            priority=priority,
            tags=tags,
            confidence=confidence,
            expires=expires,
            source=source,
            supersedes=supersedes,
            allow_secret=allow_secret,
        )
        if self.config.semantic and result.changed:  # `[search] semantic`: a store embeds its own memory
            try:
                self._vectors().embed_some([result.memory])
            except MemfileError as exc:
                self.notices.append(f"the memory was stored but not embedded for semantic search: {exc}")
        return result

    @_verb
    def store_many(self, stores: Iterable[Mapping[str, Any]]) -> builtins.list[StoreResult | MemfileError]:
        """Store several memories, each given as `store`'s arguments by name (`{"category": "fact", "key":
        "office", "content": "...", "tags": [...]}`), in as few commits as they can share: stores by one
        caller of different memories, superseding nothing, go into one commit (a server groups the stores
        that arrive together this way). Each store is checked on its own: one refused never stops another.

        An entry may also name the `credential` it is made for (a served credential's label, as
        `acting_as(key=)` gives it to every store): stores of several credentials then share a commit
        with one `Memfile-Key: LABEL REF...` trailer each, naming the memories that credential stored.

        Returns:
            For each store, in order, its StoreResult or the MemfileError that refused it.

        Raises:
            InvalidInput: an entry is not a mapping, or names an argument `store` does not take.
        """
        calls = builtins.list(stores)
        for n, arguments in enumerate(calls):
            if not isinstance(arguments, Mapping):
                raise InvalidInput(f"stores[{n}]", arguments, "a mapping of store's arguments by name")
            unknown = sorted(set(arguments) - _STORE_MANY_FIELDS)
            if unknown:
                raise InvalidInput(f"stores[{n}]", ", ".join(map(str, unknown)), ", ".join(sorted(_STORE_MANY_FIELDS)))
            credential = arguments.get("credential")
            if credential is not None and not (isinstance(credential, str) and LABEL_PATTERN.fullmatch(credential)):
                raise InvalidInput(f"stores[{n}].credential", credential, LABEL_RULE)
            missing = [name for name in ("category", "key", "content") if name not in arguments]
            if missing:
                raise InvalidInput(f"stores[{n}]", "no " + ", ".join(missing), "category, key and content at least")
        return self._writer.store_many([dict(arguments) for arguments in calls])

    @_verb
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
        return self._writer.reactivate(ref)

    @_verb
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
        return self._writer.forget(ref)

    @_verb
    def capture(
        self,
        messages: Sequence[dict[str, Any]],
        extract: Extract,
        session: str | None = None,
        *,
        review: bool | None = None,
        dry_run: bool = False,
    ) -> CaptureReport:
        """Memories proposed from a conversation: the app's model picks them, memfile checks and decides them.

        `extract(PROMPT, transcript)` is the app's own model call (`memfile.capture.PROMPT`, versioned:
        `PROMPT_VERSION`); its answer, JSON `{"memories": [{category, key, content, tags, priority,
        confidence, turns}]}`, is checked whole before anything is written. Each candidate is then decided,
        in order, against the mind's memories most like it (by words, and by meaning where `[search]
        semantic` is on) and the batch's earlier ones: add, update (it supersedes the memory it restates) or
        skip (the mind already says it). One commit holds them all, each decision and its reason in its
        message. Captured memories are the agent's: unverified, at most high, with `captured_from` (the
        session) and `captured_turns`. docs/capture.md.

        Args:
            messages: the conversation: chat messages `{"role": ..., "content": text or content blocks}`.
            extract: (system prompt, transcript) -> the model's answer (JSON text, or its parsed object).
            session: the conversation's name, recorded as `captured_from` (default `capture-<time>`).
            review: the memories wait as `status: proposed` for a person (`accept`, `reject`) before any
                recall, search or agent sees them (default `[capture] review`, true). Without review an
                update of a person's memory still waits.
            dry_run: decide and report, write nothing.

        Returns:
            A CaptureReport: each candidate's decision (`add`, `update`, `skip`), its reason and target, the
            memories written, and the commit.

        Raises:
            InvalidInput: the messages are not chat messages, or the answer is not the documented JSON, or a
                candidate is wrong: each named (its number, REF and field, with the allowed values).
            SecretFound: a candidate holds what looks like a secret (`[secrets]`).
        """
        return self._capturer.capture(messages, extract, session, review, dry_run)

    @_verb
    def proposals(self) -> builtins.list[Memory]:
        """The captured memories waiting for a person's review, oldest first (none for an agent)."""
        return [] if self.actor is Source.AGENT else self._capturer.proposals()

    @_verb
    def accept(self, ref: str, **changes: Any) -> Memory:
        """Accept a proposed memory (a person only): it becomes a verified memory, in recall and search, and
        supersedes the memory it would update; `changes` (content, tags, priority, expires) edit it first.
        One commit.

        Raises:
            Refused: an agent asked. NotFound: the REF names no proposed memory.
            InvalidInput: a change is not allowed (as `store` checks it).
        """
        return self._capturer.accept(ref, _editable(changes))

    @_verb
    def reject(self, ref: str) -> Memory:
        """Reject a proposed memory (a person only): it is forgotten (git keeps it). One commit.

        Raises:
            Refused: an agent asked. NotFound: the REF names no proposed memory.
        """
        return self._capturer.reject(ref)

    @_verb
    def edit(self, ref: str, version: str | None = None, **changes: Any) -> StoreResult:
        """A person's change of a memory's content, tags, priority or expires (`changes`), checked as `store`
        checks them (a secret refused per `[secrets]`), written only while the memory is still the `version`
        the person changed (`memory_version` of the memory they read; None: whatever it is now): the check and
        the write hold the writer's lock. As a person's store, the memory becomes theirs (source user,
        verified). One commit (`edit REF (user)`); none when nothing differs.

        Raises:
            Refused: an agent asked, or the memory waits for review (`accept` edits it); SecretFound.
            InvalidInput: a change is not allowed (named, with the allowed values).
            Conflict: the memory changed since `version`; nothing was written.
            NotFound, AmbiguousRef: the REF does not name one memory.
        """
        _editable(changes)
        if self.actor is Source.AGENT:
            raise Refused("editing a memory is for people; an agent changes its memories with store")
        writer = self._writer
        with writer.transaction():
            memory = writer.find(ref)
            if memory.proposed:
                raise Refused(f"{memory.ref} waits for review: accept it with your changes, or reject it")
            if version is not None and memory_version(memory) != version:
                raise Conflict(f"{memory.ref} changed since the version you edited; nothing was written")
            content = changes.pop("content", memory.content)
            new = writer.updated(memory, writer.checked(memory.category, memory.key, content, **changes))
            fields = ("content", "tags", "priority", "expires_at")
            if all(getattr(new, name) == getattr(memory, name) for name in fields):
                return StoreResult(memory, created=False, changed=False, notices=tuple(self.notices))
            sha = writer.rewrite(memory, new, "edit", Source.USER)
            return StoreResult(new, created=False, changed=True, commit=sha, notices=tuple(self.notices))

    @_verb
    def forget_many(
        self,
        *,
        refs: Sequence[str] | None = None,
        tag: str | None = None,
        category: str | Category | None = None,
        source: str | Source | None = None,
        unverified: bool = False,
        older_than: str | timedelta | None = None,
        expired: bool = False,
        dry_run: bool = False,
    ) -> ForgetReport:
        """Forget every memory the filters select, in one commit listing them; `git log` keeps every version.

        The filters combine (a memory must pass each one given); at least one filter, or `refs`, is required.
        Superseded memories are selected too. An agent forgets only its own unverified, non-critical
        memories: anything else the filters match is left out (`left_out`), never removed. A hand edit of a
        selected file is committed first. Nothing selected: nothing is written, no commit.

        Args:
            refs: the memories to forget, each an id, `category/key` or a key unique in the mind (a
                selection); with filters, only those of them that pass every filter.
            tag: only memories carrying this tag (any case).
            category: only this category.
            source: only `user` or only `agent` memories (an agent may not ask for `user`).
            unverified: only unverified memories.
            older_than: only memories last updated longer ago than this duration (`30d`, `12h`, `2w`).
            expired: only memories whose `expires_at` has passed.
            dry_run: select and report, write nothing.

        Returns:
            A ForgetReport: `forgotten` (with dry_run: what would be), `left_out`, and the `commit`
            (None with dry_run or when nothing was forgotten).

        Raises:
            InvalidInput: no filter and no refs, or a filter value that is not allowed.
            Refused: an agent asked to forget a person's memories (`source` user).
            NotFound, AmbiguousRef: a REF of `refs` does not name one memory.
        """
        filters = {"tag": tag, "category": category, "source": source, "unverified": unverified}
        return self._writer.forget_many(
            list(refs or ()), filters | {"older_than": older_than, "expired": expired}, dry_run
        )

    @_verb
    def purge(
        self,
        ref: str,
        *,
        text: str | None = None,
        dry_run: bool = False,
        push: bool = False,
        progress: Progress | None = None,
    ) -> PurgeReport:
        """Remove a memory from every version of the vault's history (a person only; `forget` keeps history).

        Every branch, tag and remote-tracking branch is rewritten without the memory's versions, the
        old objects are pruned from .git (nothing `git cat-file` can show), and memfile's index, vectors,
        last-recall records and queued results are cleared of it. The purge is recorded in
        `.memfile-purged` (id, mind, REF, when, by whom: never the text), committed; every other memory
        and every other byte of history is kept. Another clone's sync is refused until it runs
        `memfile sync --accept-purge`. docs/forget.md.

        Args:
            ref: an id, `category/key`, or a key unique in the mind; a forgotten memory too.
            text: remove only this string (a leaked token) from every version, keeping every other byte.
            dry_run: only say what would go: versions, commits rewritten, refs moved.
            push: then replace the history of every remote branch that still holds the purged versions
                (`push_purge`).
            progress: called with (step, done, total): `rewriting history`, then `indexing` (the mind's
                index rebuilt: most of a purge's time in a big vault).

        Returns:
            A PurgeReport: the versions, commits and refs, the commit recording the purge, and the remotes
            that still hold the purged versions.

        Raises:
            Refused: the caller is an agent, or tracked files have uncommitted changes (named).
            NotFound: no memory (or no version holding `text`) by that REF, on disk or in history.
            InvalidInput: `text` is shorter than 4 characters.
            GitError: git-filter-repo or git failed (the message says which and how far it got; the next
                write finishes an interrupted purge).
        """
        report = self._purger.purge(ref, text, dry_run, progress)
        if push and not dry_run:
            report.pushed = self.push_purge()
            report.remotes = []
        return report

    @_verb
    def push_purge(self, remote: str | None = None, dry_run: bool = False) -> builtins.list[str]:
        """Replace the history of the remote branches that still hold purged versions with this clone's
        (`git push --force-with-lease`: only while each is still where the purge found it).

        Args:
            remote: only this remote (default: every one that holds purged versions).
            dry_run: only name the branches it would replace.

        Returns:
            The remote branches replaced (`origin/main`); empty when none held purged versions.

        Raises:
            Refused: the caller is an agent.
            GitError: a remote moved on since the purge (`memfile sync --accept-purge` fetches its
                changes and purges them the same way), or cannot be reached.
        """
        return self._remote.push_purge(remote, dry_run)

    @_verb
    def write_raw(
        self,
        changes: Mapping[str, str | None],
        *,
        subject: str,
        based_on: Mapping[str, bytes | None] | None = None,
        allow_secret: bool = False,
    ) -> str | None:
        """Write memory files with the exact text given (None removes one), all in one commit.

        The primitive of text-editing faces (Claude's memory tool): what a store takes as
        arguments comes here as a whole file, front-matter included, and is checked as such.

        Args:
            changes: vault-relative path (`<mind>/.../<name>.md`) to its new text, or None.
            subject: the commit's subject; `(user)` or `(agent)` is appended.
            based_on: the bytes each path held when the caller read it (None: it did not exist);
                a file that changed since is left as it is and nothing is written.
            allow_secret: as `store`'s (a person's only).

        Returns:
            The commit's sha, or None when every file already held its text.

        Raises:
            InvalidInput: a path outside this mind or not ending in .md, or a text memfile cannot read.
            Conflict: a file changed since `based_on`, or a text takes another file's (category, key) or id.
            Refused: a file memfile cannot read would be overwritten; an agent's text is verified,
                critical, or claims `source: user` (unless the file already was), or it changes or
                removes a memory a person verified or made critical.
        """
        from .rawwrite import write_raw

        return write_raw(self._writer, changes, subject, based_on or {}, allow_secret)

    @_verb
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
        return self._writer.verify(ref)

    @_verb
    def begin_edit(self, ref: str) -> tuple[Memory, Path]:
        """Prepare a memory for editing by hand: commit any pending hand edit, return its file.

        Returns:
            The memory before the edit and the absolute path to open in an editor.
        """
        return self._writer.begin_edit(ref)

    @_verb
    def finish_edit(self, before: Memory) -> StoreResult:
        """Validate and commit a memory after it was edited by hand (see `begin_edit`).

        When the content changed and the edit left `updated_at` alone, it is
        moved to now. A file that no longer parses is left exactly as it is.

        Raises:
            FileParseError: the edited file cannot be read (file, line and reason); nothing is discarded.
            NotFound: the file is gone.
        """
        return self._writer.finish_edit(before)

    @_verb
    def history(self, ref: str) -> builtins.list[Version]:
        """Every version of one memory, newest first, also of a forgotten one (`category/key` or id).

        Raises:
            NotFound: neither the files nor git history know the REF.
        """
        return self._history.history(ref)

    @_verb
    def show_at(self, ref: str, at: str | datetime) -> Memory:
        """A memory as it was at a revision (sha, `HEAD~3`, a branch), a date (`2026-05-01`) or a duration back (`7d`).

        A date in the future means the latest version.

        Raises:
            InvalidInput: `at` names no commit and no real date, or a moment before the memory's first version.
            NotFound: the memory did not exist then.
        """
        return self._history.show_at(ref, at)

    @_verb
    def commit_at(self, at: str | datetime) -> tuple[str, datetime]:
        """The commit `at` names, as `recall`'s and `search`'s `at` read it, and its time (UTC): what a recall
        or search as of `at` answers from. Pass the sha on to them to read that very commit.

        Raises:
            InvalidInput: `at` names no commit and no real date, or a moment before the first commit.
        """
        return self._history.commit_at(at)

    @_verb
    def restore(self, ref: str, at: str | datetime | None = None) -> StoreResult:
        """Bring back a forgotten memory (its last version) or an old version (`at`), as a new commit.

        A person gets the version as it was. An agent gets it as an agent may
        write it: `source: agent`, `verified: false`, priority at most high; a
        person verifies it or raises its priority afterwards.

        Raises:
            NotFound: nothing to restore (the memory never existed, or not at `at`).
            InvalidInput: `at` names no commit and no real date.
            Refused: an agent would overwrite a memory a person verified.
            Conflict: the memory's file now holds another memory (another id), stored since that version.
        """
        return self._history.restore(ref, at)

    @_verb
    def undo(self) -> LogEntry:
        """Revert the mind's last change made by memfile, as a new commit `undo: <its message>`.

        Only this mind's commits made on this branch here count (git's first-parent
        history): another mind's changes, and the other side of a sync's merge,
        are never undone from here. Undo again to walk further back: a change
        already undone (and the undo itself) is skipped. Refused when it would
        discard later work: a later commit (a person's, or a sync's) touched the
        same files, or they have uncommitted changes; and when that change also
        touched files outside the mind.

        Raises:
            Refused: nothing of the mind is left to undo, or undoing would discard or reach beyond it.
        """
        return self._history.undo()

    @_verb
    def log(self, since: str | datetime | None = None, limit: int | None = None) -> builtins.list[LogEntry]:
        """The mind's changelog, newest first: the commits that changed its files (`since`: a duration such as
        `7d`, or a date), each with the mind's files it touched.

        Raises:
            InvalidInput: `since` is neither a duration nor a real date, or reaches back before the year 1.
        """
        return self._history.log(since, limit)

    @_verb
    def ensure_merge_driver(self) -> bool:
        """Set up the merge driver for memory files (.gitattributes, committed, and the repository's config).

        Returns:
            True when anything had to be set up.
        """
        return self._remote.ensure_merge_driver()

    @_verb
    def add_remote(self, url: str, name: str = "origin") -> None:
        """Add a git remote to sync with (plain `git remote add` works too).

        Raises:
            InvalidInput: the name or URL is not usable (a URL that runs a command, `ext::`, is refused).
            Conflict: a remote of that name exists already.
        """
        return self._remote.add_remote(url, name)

    @_verb
    def sync(
        self,
        remote: str | None = None,
        branch: str | None = None,
        new_branch: bool = False,
        accept_purge: bool = False,
    ) -> RemoteReport:
        """Commit hand edits, fetch, merge the remote's changes, push, and bring the index in line.

        A remote that purged memories this clone still holds is refused (nothing merged) unless
        `accept_purge`; so is a remote that still holds what this clone purged (nothing fetched), until
        `push_purge` or `accept_purge`.

        Args:
            remote: the name of a git remote; default `[sync] remote` of memfile.toml (`origin`).
            branch: the remote branch; default the current branch's name.
            new_branch: create `branch` on the remote even when it exists on neither side.
            accept_purge: rewrite this clone's history without every purged memory (the remote's record
                and this clone's), then merge, and replace the remote's branch (force-with-lease) where
                it still held purged versions.

        Returns:
            What came in and went out; `conflicts` lists the memories left to `resolve`.

        Raises:
            InvalidInput: the remote is not one of the repository's remotes (the message names them),
                the branch is not a branch name, or it exists on neither side (without `new_branch`).
            Refused: a purge stands between the two sides (the message says what to run).
            GitError: the remote cannot be reached or refuses the push (nothing is lost:
                local commits stay, and the message says what to do).
        """
        return self._remote.sync(remote, branch, new_branch, accept_purge)

    @_verb
    def resolve(self, ref: str, take: str | None = None, content: str | None = None) -> StoreResult:
        """Finish a conflicted memory in one commit: keep `ours` (this machine's text, on every machine),
        take `theirs` (the other side's), or give the new `content` (guide lines of `resolve_draft` left
        in it are removed).

        Raises:
            InvalidInput: neither or both of take and content, or take is not ours/theirs.
            Refused: the memory is not conflicted.
        """
        return self._remote.resolve(ref, take, content)

    @_verb
    def resolve_draft(self, ref: str) -> str:
        """The text `resolve --edit` opens: this machine's text, then the other side's, each under a guide line.

        Raises:
            Refused: the memory is not conflicted.
        """
        return self._remote.resolve_draft(ref)

    @_verb
    def doctor(self, fix: bool = False, progress: Progress | None = None) -> DoctorReport:
        """Check the mind's files, index and git state; with `fix`, apply the safe repairs.

        Args:
            fix: apply the safe repairs first (the index rebuilt among them).
            progress: called with (step, done, total): `indexing` (files read into the index, when it
                was not up to date or `fix` rebuilt it), then `checking` (memory files checked).

        Returns:
            A DoctorReport: findings (problems and counts), and what `fix` did.
        """
        return self._doctor.doctor(fix, progress)

    @_verb
    def last_recall(self) -> RecallRecord:
        """What the last recall of this mind served (any caller, CLI or MCP): query, budget, tokens, and
        each memory chosen with whether it was pinned or shortened, its score and what it was a neighbour of.
        Each mind has its own record: another mind's recalls are never shown.

        Raises:
            NotFound: no recall of this mind was recorded yet.
        """
        return self._recaller.last_recall()

    @_verb
    @tells_secrets(lambda report: [item.memory for item in report.items])
    def recall(
        self,
        budget: int | None = UNSET,
        *,
        query: str | None = None,
        limit: int | None = 10,
        include_superseded: bool = False,
        include_proposed: bool = False,
        with_minds: Sequence[str] = (),
        exclude: Iterable[str] = (),
        semantic: bool | None = None,
        at: str | datetime | None = None,
        record: bool = True,
    ) -> RecallReport:
        """The recall an agent puts in its context window: a `RecallReport`, which is the text itself (a str;
        `.encode()` gives the UTF-8 bytes `memfile recall` writes) and tells what was chosen and cut
        (`.items`, each with `pinned`, `score` and its parts; `.to_dict()`).

        Without a query: every memory, by priority then recency. With one (at most
        4,096 characters): the pinned memories (verified critical ones; verified
        high ones of identity and preference), then the best matches by the blend
        in `memfile.recall.score` (text relevance, priority, recency with a
        half-life of `[recall] half_life_days`, confidence, verified), then their
        neighbours (marked; see `memfile.recall.with_neighbours`), then what the best matches link to
        (`[[key]]`, `[recall] link_hops` links away; marked linked: `memfile.recall.with_links`). An unverified
        critical memory is ranked and cut as a high one: it never makes a budget
        impossible. A conflicted memory is marked.

        Args:
            budget: the most tokens the text may take (estimate: characters / 4, rounded up); default
                `[recall] budget` of memfile.toml; None or 0 = no limit.
            query: what the agent is working on; None = the whole mind.
            limit: with a query, the most matches shown besides the pinned memories (1 to 1000; None = all).
            include_superseded: also memories marked superseded.
            include_proposed: also captured memories waiting for review (`capture`, `review`), marked
                `[proposed]` (one that would update a memory is shown beside it): a person's look, never
                recorded as the agent's last recall; never for an agent (its recall leaves them out
                whatever this says).
            with_minds: other minds of the vault read too, read-only (a group chat's mind with its
                speaker's): one text and one budget, the header naming every mind (`Mind: Group A +
                Alice`) and each entry its own; the pinned memories of every mind come first.
            exclude: memories (ids or `category/key`) left out, as if they were not there: what the
                caller shows on its own (`memfile.context`'s rolling summary).
            semantic: with a query, its matches by meaning too, as `search`'s (default `[search] semantic`).
            at: recall the mind as it was then: a revision (sha, `HEAD~3`, a branch), a date (`2026-05-01`:
                the last commit at or before it on this branch; a date to come: the latest) or a duration
                back (`30d`). The files are read from git (no checkout; nothing is written but the record)
                and recalled as the commit's checkout would be at the commit's time: budget, priorities,
                expiry and supersede rules as then. By words only, one mind; kept per commit (the last
                few), so a second recall at the same moment is fast. The record says `as_of`.
            record: False: write no record (`last_recall` still tells what the agent was last shown); for a
                person looking at what recall gives (the console's Recall page), not for an agent's turn.

        Raises:
            InvalidInput: the budget or limit is not allowed, the query cannot be parsed, a mind of
                `with_minds` is this one or named twice, or `at` names no commit and no real date (or a
                moment before the first commit), or comes with `with_minds` or `semantic`.
            NotFound: a mind of `with_minds` does not exist.
        """
        include_proposed = include_proposed and self.actor is not Source.AGENT  # an agent's recall holds none
        record = record and not include_proposed  # a person's look: the record tells what the agent saw
        if at is not None:
            if with_minds:
                raise InvalidInput(
                    "with_minds", list(with_minds), "none with at (a recall as of a date reads one mind)"
                )
            as_of = self._moment(at, semantic)
            report = self._recaller.recall(
                budget,
                query=query,
                limit=limit,
                include_superseded=include_superseded,
                include_proposed=include_proposed,
                exclude=frozenset([exclude] if isinstance(exclude, str) else exclude),
                as_of=as_of,
                record=record,
            )
            self.issues = as_of.index.issues  # the files of that commit that could not be parsed
            return report
        by_meaning = query is not None and (self.config.semantic if semantic is None else semantic)
        if by_meaning and query is not None:
            check_query(query)
            self._vectors().queries.get(query)  # before the read, as `search` does
        if not with_minds:
            return self._recaller.recall(
                budget,
                query=query,
                limit=limit,
                include_superseded=include_superseded,
                include_proposed=include_proposed,
                exclude=frozenset([exclude] if isinstance(exclude, str) else exclude),
                fuse=self._vectors().fuse if by_meaning else None,
                record=record,
            )
        if exclude:
            raise InvalidInput("exclude", list(exclude), "nothing with with_minds (a recall of one mind only)")
        others = [self._reader(mind)._recaller for mind in other_minds(self.mind, with_minds)]
        return self._recaller.recall_across(
            others,
            budget,
            query=query,
            limit=limit,
            include_superseded=include_superseded,
            include_proposed=include_proposed,
            record=record,
        )

    def _moment(self, at: str | datetime, semantic: bool | None) -> AsOf:
        """The mind as `at` names it (`recall`'s `at`), read from git once per commit (the last `MOMENTS` kept);
        `issues` are the files of that commit that could not be parsed.

        Raises:
            InvalidInput: `at` names no commit and no real date, or `semantic` is asked for.
        """
        if semantic:
            raise InvalidInput("semantic", semantic, "false with at (a recall or search as of a date is by words)")
        sha, moment = self._history.commit_at(at)
        as_of = self._moments.pop(sha, None)
        if as_of is None:
            memories, issues = self._history.mind_at(sha, moment)
            as_of = AsOf(sha, moment, Index(self.root, self.mind, 0.0, lambda _: None, [*memories, *issues]))
        self._moments[sha] = as_of
        while len(self._moments) > MOMENTS:
            self._moments.popitem(last=False)
        return as_of

    def _reader(self, mind: str) -> Vault:
        """Another mind of this vault, opened once to be read (`recall`'s `with_minds`), acting as this Vault."""
        reader = self._readers.get(mind)
        if reader is None:
            reader = self._readers[mind] = Vault(
                self.root, select_mind(self.root, self.config, mind), self.config, self.actor
            )
        return reader

    # --- in and out ------------------------------------------------------

    def _export_parts(self, all_minds: bool) -> builtins.list[MindExport]:
        from .transfer import MindExport

        config = load_config(self.root) if all_minds else self.config  # a mind added since this Vault opened

        def load(mind: str) -> tuple[builtins.list[Memory], builtins.list[ParseIssue]]:
            vault = self if mind == self.mind else Vault(self.root, mind, config, self.actor)
            try:
                return sorted(vault._writer.readable(), key=lambda m: m.path), builtins.list(vault.issues)
            finally:
                if vault is not self:
                    vault.close()

        minds = mind_dirs(self.root) if all_minds else [self.mind]
        return [MindExport(m, config.display_name(m), self.root, partial(load, m)) for m in minds]

    def export_lines(self, *, all_minds: bool = False, format: str = "jsonl", raw: bool = False) -> Iterator[str]:
        """The export's text a line at a time (see `export`); each ends in a newline."""
        from .transfer import check_export, export_lines

        check_export(format, raw)
        parts = self._export_parts(all_minds)
        return export_lines(parts, fmt=format, raw=raw, now=utc_now(), version=__version__)

    @_verb
    def export(
        self, out: str | os.PathLike[str] | TextIO, *, all_minds: bool = False, format: str = "jsonl", raw: bool = False
    ) -> ExportReport:
        """Export the mind's memories (every one: expired and superseded ones are marked, not left out).

        Args:
            out: a file (written whole, then renamed into place) or a text stream.
            all_minds: every mind of the vault, not only this one.
            format: `jsonl`, memfile's export (a header, one line per memory with every field under
                Synapse's names, one per unreadable file, an end line with the count), or `json`, a plain
                array of Synapse-shaped memories.
            raw: each file's exact text and its sha256 too (`jsonl`): an import then writes the same bytes.

        Returns:
            An ExportReport: the count, the minds, and the files that could not be read (not in the export).
        """
        from .transfer import export_to

        return export_to(out, self._export_parts(all_minds), format, raw, __version__)

    @_verb
    def import_(
        self,
        source: str | os.PathLike[str] | bytes | BinaryIO,
        *,
        format: str | None = None,
        on_conflict: str = "newer",
        dry_run: bool = False,
        from_mind: str | None = None,
        split: str = "sections",
        category: str | None = None,
        include_dreams: bool = False,
        max_priority: str = "high",
        source_as: str | None = None,
        name: str | None = None,
        allow_secret: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Import memories into this mind as one commit, or nothing when any record is refused.

        Args:
            source: a file (or an OpenClaw folder), the file's bytes, or a binary stream (standard input).
            format: `memfile`, `synapse`, `langbot` or `openclaw`; default: told from the file.
            on_conflict: a memory already here with the same id and other content: `skip` it, take the
                `newer` by updated_at, or `overwrite` it. The same category/key under another id is
                always a conflict, reported and never merged.
            dry_run: decide and report, write nothing.
            from_mind: the mind to take from a memfile export holding several.
            split, category, include_dreams: OpenClaw's MEMORY.md: split by `sections`, `bullets` or
                not at all (`file`); the category instead of the one guessed from a heading; DREAMS.md too.
            max_priority: LangBot's importance 5 becomes `high`, or `critical` when a person asks.
            source_as: LangBot: `user` when a person vouches for the profiles (default agent).
            name: what to call the file in messages and the commit (default: its name).
            allow_secret: as `store`'s: a person imports contents that look like secrets, with a warning.
            progress: called with (step, done, total): `checking` (records checked), then `writing`
                (memory files checked and written) and `indexing` (files read into the index while git commits).

        Returns:
            An ImportReport: created, updated, unchanged, skipped, conflicts, what could not be mapped, the commit.
            Ids, dates, verified and unknown keys are kept as given; an agent's import lands unverified.

        Raises:
            InvalidInput: the file cannot be read, or a record is refused (its number and the reason).
            Refused: a record's content looks like a secret (SecretFound names the record).
        """
        from .transfer import import_file

        options = {
            "split": split,
            "category": category,
            "include_dreams": include_dreams,
            "max_priority": max_priority,
            "source": source_as,
        }
        return import_file(
            source,
            writer=self._writer,
            index=self._index,
            actor=self.actor,
            fmt=format,
            on_conflict=on_conflict,
            dry_run=dry_run,
            from_mind=from_mind,
            options=options,
            name=name,
            allow_secret=allow_secret,
            progress=progress,
        )

    @classmethod
    def clone(cls, url: str, path: str | os.PathLike[str], mind: str | None = None) -> Vault:
        """Clone a vault from its remote onto this machine, ready to use: whatever branch the remote's HEAD
        names, the branch memfile pushed is checked out tracking the remote, the merge driver is set up
        and the index built.

        Raises:
            Conflict: `path` exists and is not an empty folder. GitError: the clone failed.
            NotAVault: the repository holds no memfile vault. NotFound: it holds no mind `mind` (the
                clone is made and kept; the message says where).
        """
        from .git import clone_vault

        root = Path(path).expanduser().resolve()
        clone_vault(url, root)
        try:
            vault = cls.open(root, mind)
        except AmbiguousMind:  # several minds, none named the default: the clone is still good
            vault = cls.open(root, mind_dirs(root)[0])
        except NotFound as exc:  # no such mind: the clone is made all the same, and kept
            raise NotFound(f"cloned {url} into {root}, but {exc}") from None
        vault.reindex()
        return vault

    def close(self) -> None:
        """Stop the watcher, if any, and release the index's files (the Vault may not be used afterwards)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        for reader in self._readers.values():
            reader.close()
        if self._mind_vectors is not None:
            self._mind_vectors.close()
        self._index.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: How many commits a Vault keeps read for `recall(at=...)` and `search(at=...)` (`Vault._moment`).
MOMENTS = 4

#: The filters of a search a hybrid search applies to its candidates (`SearchOptions`' names).
_FILTERS = (
    "tags",
    "category",
    "priority",
    "source",
    "unverified",
    "include_expired",
    "include_superseded",
    "include_proposed",
)


def other_minds(mind: str, with_minds: Sequence[str], field: str = "with_minds") -> builtins.list[str]:
    """`recall`'s `with_minds` (and `memfile mcp --read-mind`, named `field`), checked: mind folder names,
    none of them `mind`, none twice (whether each exists is found when it is opened: NotFound)."""
    if isinstance(with_minds, str):
        with_minds = [with_minds]
    names = builtins.list(with_minds)
    for name in names:
        if not isinstance(name, str) or not MIND_PATTERN.fullmatch(name) or name == mind or names.count(name) > 1:
            raise InvalidInput(
                field,
                name,
                f"the names of other mind folders of the vault, each once (not {mind}, which is read anyway)",
            )
    return names


def _editable(changes: dict[str, Any]) -> dict[str, Any]:
    """`edit`'s and `accept`'s changes: content, tags, priority, expires (each checked when written); InvalidInput."""
    unknown = sorted(set(changes) - {"content", "tags", "priority", "expires"})
    if unknown:
        raise InvalidInput(unknown[0], changes[unknown[0]], "content, tags, priority, expires")
    return changes


def memory_version(memory: Memory) -> str:
    """A memory as it was read, for `Vault.edit`: a digest of every field, so any change to it is seen."""
    fields = json.dumps(memory.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(fields.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _server(root: Path) -> dict[str, Any] | None:
    """The vault's running server (`memfile serve`: cli_served.SERVER_LOCK holds "PID ADDRESS"), else None.
    A resident reader ("PID resident SINCE IDLE_EXIT", its last request the lock file's mtime) has no
    address; `since` and `idle_left` (seconds until it ends unless a command line comes) say more."""
    path = root / STATE_DIR / "serve.lock"
    text = lock_text(path)
    if not text:
        return None
    pid, _, address = text.partition(" ")
    server = {"pid": int(pid) if pid.isdigit() else None, "address": address or None}
    word, since, idle_exit = ([*address.split(" "), "", ""])[:3]
    if word == "resident" and since.isdigit():
        try:
            idle = datetime.now(timezone.utc).timestamp() - path.stat().st_mtime
            left = max(0, round(float(idle_exit) - idle))
        except (OSError, ValueError):
            left = None
        started = format_datetime(datetime.fromtimestamp(int(since), timezone.utc))
        server |= {"address": None, "resident": True, "since": started, "idle_left": left}
    return server
