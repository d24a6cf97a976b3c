"""What each console page shows, read from one mind's Vault on the worker thread.

Each function takes the Vault and returns plain values for a template; nothing renders HTML except
`highlight`, which escapes a snippet before marking its matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from markupsafe import Markup, escape

from ..errors import InvalidInput, NotFound
from ..model import (
    CAPTURED_FROM,
    CAPTURED_LINES,
    CAPTURED_TURNS,
    PROPOSED_SUPERSEDES,
    Category,
    Memory,
    Priority,
    Source,
    format_datetime,
    utc_now,
)
from ..recall import is_pinned, order
from ..vault import memory_version

if TYPE_CHECKING:
    from starlette.datastructures import QueryParams

    from ..links import Linked, ResolvedLink
    from ..recall import RecallReport
    from ..vault import LogEntry, Vault, Version

PAGE_SIZE = 50
LOG_PAGE_SIZE = 50
#: The most search hits the console reads (`Vault.search`'s limit).
MAX_HITS = 1000
STATUSES = ("active", "superseded", "all")
#: The memories a "expiring soon" count looks ahead for.
EXPIRING_WITHIN = "7d"
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)
_SOURCE = re.compile(r"\((user|agent)\)")
_PAGE_RULE = "a page number from 1"


def highlight(snippet: str) -> Markup:
    """A search snippet as HTML: escaped first, then each **match** made a <mark> (memory text never
    becomes markup: only the <mark> tags added here are)."""
    return Markup(_BOLD.sub(r"<mark>\1</mark>", str(escape(snippet))))


def page_number(value: str | None) -> int:
    """The `page` query parameter: a whole number from 1 (absent: 1)."""
    if value is None or value == "":
        return 1
    if not value.isdigit() or len(value) > 9 or int(value) < 1:
        raise InvalidInput("page", value, _PAGE_RULE)
    return int(value)


@dataclass(frozen=True)
class Filters:
    """The memories page's filters and search, as its query string gives them ('' = not filtered)."""

    q: str = ""
    category: str = ""
    tag: str = ""
    priority: str = ""
    source: str = ""
    unverified: bool = False
    status: str = "active"
    expired: bool = False  # show expired memories too
    at: str = ""  # search the mind as it was then (`Vault.search`'s `at`): a date, a duration back or a commit
    page: int = 1

    @classmethod
    def of(cls, query: QueryParams) -> Filters:
        """The filters of a query string (unknown parameters are ignored: a page, not an API); `page` and
        `status` are checked here, the others by the Vault."""
        status = query.get("status") or "active"
        if status not in STATUSES:
            raise InvalidInput("status", status, STATUSES)
        return cls(
            q=(query.get("q") or "").strip(),
            category=query.get("category") or "",
            tag=(query.get("tag") or "").strip(),
            priority=query.get("priority") or "",
            source=query.get("source") or "",
            unverified=query.get("unverified") in ("1", "true", "on"),
            status=status,
            expired=query.get("expired") in ("1", "true", "on", "show"),
            at=(query.get("at") or "").strip(),
            page=page_number(query.get("page")),
        )

    def query(self, **changes: Any) -> str:
        """The query string of these filters (with `changes`), only what differs from the defaults."""
        chosen = replace(self, **changes)
        default = Filters()
        pairs = []
        for f in fields(self):
            value = getattr(chosen, f.name)
            if value == getattr(default, f.name):
                continue
            pairs.append((f.name, "1" if value is True else str(value)))
        return urlencode(pairs)

    @property
    def active(self) -> bool:
        """True when anything but the page narrows the list."""
        return replace(self, page=1) != Filters()


@dataclass(frozen=True)
class Row:
    """One memory of a list; `snippet` is set for a search hit (already HTML, see `highlight`)."""

    memory: Memory
    expired: bool
    snippet: Markup | None = None
    rank: int | None = None


@dataclass(frozen=True)
class MemoriesView:
    rows: list[Row]
    total: int | None  # None for a search: only whether more pages follow is known
    has_next: bool
    first: int  # the number of the page's first row (1-based)
    empty_mind: bool = False  # the mind holds no memory at all: not a filter's doing
    as_of: AsOf | None = None  # a search as of a date: the commit it read


@dataclass(frozen=True)
class AsOf:
    """What a page as of a date read: the `at` asked, the commit it names and that commit's time."""

    at: str
    commit: str
    date: datetime


def as_of(vault: Vault, at: str) -> AsOf | None:
    """The commit `at` names (`Vault.commit_at`; None for no `at`: the mind as it is now)."""
    if not at:
        return None
    commit, date = vault.commit_at(at)
    return AsOf(at, commit, date)


def memories_page(vault: Vault, filters: Filters) -> MemoriesView:
    """A page of the mind's memories: newest first (updated_at), or best first for a search; a search as of
    a date (`filters.at`) reads the mind as that commit held it."""
    if filters.at and not filters.q:
        raise InvalidInput("search", None, "words to search for with As of (the list without a search is of now)")
    start = (filters.page - 1) * PAGE_SIZE
    common: dict[str, Any] = {
        "category": filters.category or None,
        "priority": filters.priority or None,
        "source": filters.source or None,
        "unverified": filters.unverified,
        "include_expired": filters.expired,
    }
    tags = [filters.tag] if filters.tag else None
    then = as_of(vault, filters.at)
    now = then.date if then is not None else utc_now()
    if filters.q:
        # As many hits as this page needs and one more (whether a next page exists): snippets cost.
        limit = min(MAX_HITS, start + PAGE_SIZE + 1)
        superseded = filters.status != "active"
        at = then.commit if then is not None else None
        hits = vault.search(filters.q, tags=tags, include_superseded=superseded, limit=limit, at=at, **common)
        if filters.status == "superseded":
            hits = [hit for hit in hits if hit.memory.superseded]
        chosen = hits[start : start + PAGE_SIZE]
        rows = [Row(h.memory, h.memory.is_expired(now), highlight(h.snippet), h.rank) for h in chosen]
        view = MemoriesView(rows, None, len(hits) > start + PAGE_SIZE, start + 1, as_of=then)
    else:
        memories = vault.list(tags=tags, status=filters.status, **common)
        memories.sort(key=lambda m: (m.updated_at, m.path), reverse=True)
        rows = [Row(m, m.is_expired(now)) for m in memories[start : start + PAGE_SIZE]]
        view = MemoriesView(rows, len(memories), len(memories) > start + PAGE_SIZE, start + 1)
    return replace(view, empty_mind=not rows and not vault.memories())


@dataclass(frozen=True)
class MindSummary:
    """A mind's line on the minds page."""

    mind: str
    name: str
    memories: int
    unverified: int
    expiring: int
    superseded: int
    conflicts: int
    unreadable: int


def mind_summary(vault: Vault) -> MindSummary:
    memories = vault.memories()
    unreadable = len(vault.issues)
    return MindSummary(
        mind=vault.mind,
        name=vault.name,
        memories=len(memories),
        unverified=sum(1 for m in memories if not m.verified),
        expiring=len(vault.expiring(EXPIRING_WITHIN)),
        superseded=sum(1 for m in memories if m.superseded),
        conflicts=sum(1 for m in memories if m.conflict is not None),
        unreadable=unreadable,
    )


def profile(vault: Vault) -> list[Memory]:
    """The pinned set every recall with a query shows first (recall's own `is_pinned` and `order`):
    verified critical memories, and verified high ones of identity and preference; expired and
    superseded ones are never recalled. No recall is served for it (that would replace the record
    of what the agent was last shown)."""
    return order([m for m in vault.list() if is_pinned(m)])


@dataclass(frozen=True)
class MemoryView:
    """One memory's page: the memory as on disk (None when forgotten), its versions, newest first."""

    ref: str
    memory: Memory | None
    versions: list[Version]
    last: Memory | None  # the newest readable version git holds (what a restore brings back)
    links: list[ResolvedLink] = field(default_factory=list)  # its wiki links, resolved (none when forgotten)
    backlinks: list[ResolvedLink] = field(default_factory=list)  # the links of other memories that lead to it

    @property
    def version(self) -> str:
        """What the edit form was rendered from (`Vault.edit` refuses a save over any other version)."""
        return memory_version(self.memory) if self.memory is not None else ""


def memory_page(vault: Vault, ref: str) -> MemoryView:
    """One memory and every version of it; a forgotten one by its history (NotFound: git does not know it
    either)."""
    try:
        linked: Linked | None = vault.linked(ref)
    except NotFound:
        linked = None
    memory = linked.memory if linked is not None else None
    # Its REF finds the file at once where it is in its usual place; an id is looked for among every memory.
    if memory is None:
        versions = vault.history(ref)
    else:
        usual = memory.path == f"{memory.mind}/{memory.category}/{memory.key}.md"
        versions = vault.history(memory.ref if usual else memory.id)
    last = next((v.memory for v in versions if v.memory is not None), None)
    shown = memory.id if memory is not None else (last.id if last is not None else ref)
    if linked is None:
        return MemoryView(shown, memory, versions, last)
    return MemoryView(shown, memory, versions, last, linked.links, linked.backlinks)


@dataclass(frozen=True)
class LogLine:
    """One commit of the audit log, as the console shows it."""

    entry: LogEntry
    source: str | None  # user or agent, from memfile's subject
    keys: tuple[str, ...]  # the credentials' labels (Memfile-Key trailers), when LogEntry carries them


def log_page(vault: Vault, page: int) -> tuple[list[LogLine], bool]:
    """A page of the mind's changelog, newest first, and whether an older page exists."""
    start = (page - 1) * LOG_PAGE_SIZE
    entries = vault.log(limit=start + LOG_PAGE_SIZE + 1)
    lines = [
        LogLine(e, found.group(1) if (found := _SOURCE.search(e.message)) else None, tuple(getattr(e, "keys", ())))
        for e in entries[start : start + LOG_PAGE_SIZE]
    ]
    return lines, len(entries) > start + LOG_PAGE_SIZE


@dataclass(frozen=True)
class RecallAsked:
    """The Recall page's form, as its query string gives it ('' = not given: the whole mind, the mind's
    budget, now)."""

    q: str = ""
    budget: str = ""
    at: str = ""

    @classmethod
    def of(cls, query: QueryParams) -> RecallAsked:
        return cls(*((query.get(name) or "").strip() for name in ("q", "budget", "at")))


@dataclass(frozen=True)
class RecallView:
    report: RecallReport
    as_of: AsOf | None  # None: the mind as it is now


def recall_page(vault: Vault, asked: RecallAsked) -> RecallView:
    """What recall gives for `asked` (now, or as of a date), without recording it: the Last recall page
    keeps telling what the agent was last shown."""
    options: dict[str, Any] = {"query": asked.q or None, "record": False}
    if asked.budget:
        if not asked.budget.isdigit() or len(asked.budget) > 9:
            raise InvalidInput("budget", asked.budget, "a whole number of tokens from 0 (0: no limit)")
        options["budget"] = int(asked.budget)
    then = as_of(vault, asked.at)
    return RecallView(vault.recall(at=then.commit if then is not None else None, **options), then)


def recall_memories(vault: Vault, refs: list[str]) -> dict[str, Memory]:
    """The memories a recall record names, by id, as on disk now (those gone are left out)."""
    wanted = set(refs)
    return {m.id: m for m in vault.memories() if m.id in wanted}


@dataclass(frozen=True)
class Draft:
    """What a person typed into a memory's edit form (or a proposal's), as sent: kept when a save is refused."""

    content: str
    tags: str
    priority: str
    expires: str

    @classmethod
    def of(cls, memory: Memory) -> Draft:
        """The form as rendered from `memory` (empty expires: never)."""
        expires = format_datetime(memory.expires_at) if memory.expires_at else ""
        return cls(memory.content, ", ".join(memory.tags), str(memory.priority), expires)

    @classmethod
    def sent(cls, form: Any) -> Draft:
        """The form as sent (a missing field: empty)."""
        return cls(*(str(form.get(name) or "") for name in ("content", "tags", "priority", "expires")))

    def changes(self) -> dict[str, Any]:
        """The changes for `Vault.edit` or `Vault.accept` (an empty expires: never)."""
        return {
            "content": self.content,
            "tags": self.tags,
            "priority": self.priority,
            "expires": self.expires or "never",
        }


#: How many of the newest commits the Review page looks through for the capture that proposed each memory.
CAPTURE_LOOKBACK = 200


@dataclass(frozen=True)
class Proposal:
    """A memory waiting for review, with the memory it would supersede and the commit that captured it (None:
    not among the CAPTURE_LOOKBACK newest)."""

    memory: Memory
    supersedes: Memory | None
    capture: LogEntry | None

    @property
    def session(self) -> str:
        return str(dict(self.memory.extra).get(CAPTURED_FROM) or "")

    @property
    def turns(self) -> list[Any]:
        turns = dict(self.memory.extra).get(CAPTURED_TURNS)
        return list(turns) if isinstance(turns, list | tuple) else []

    @property
    def lines(self) -> list[str]:
        """The conversation lines it came from (`[N] role: text`, secrets masked), as the capture quoted them."""
        lines = dict(self.memory.extra).get(CAPTURED_LINES)
        return [str(line) for line in lines] if isinstance(lines, list | tuple) else []


@dataclass(frozen=True)
class ReviewView:
    proposals: list[Proposal]
    total: int
    has_next: bool
    first: int


def review_page(vault: Vault, page: int) -> ReviewView:
    """A page of the memories waiting for review, oldest first, each with what it would supersede and its capture."""
    waiting = vault.proposals()
    start = (page - 1) * PAGE_SIZE
    shown = waiting[start : start + PAGE_SIZE]
    wanted = {dict(m.extra).get(PROPOSED_SUPERSEDES) for m in shown} - {None}
    targets = {m.id: m for m in vault.memories() if m.id in wanted} if wanted else {}
    captures = [e for e in vault.log(limit=CAPTURE_LOOKBACK) if e.message.startswith("capture ")] if shown else []
    proposals = [
        Proposal(
            m,
            targets.get(str(dict(m.extra).get(PROPOSED_SUPERSEDES))),
            next((e for e in captures if m.path in e.paths), None),
        )
        for m in shown
    ]
    return ReviewView(proposals, len(waiting), len(waiting) > start + PAGE_SIZE, start + 1)


CHOICES = {
    "category": [str(c) for c in Category],
    "priority": [str(p) for p in Priority],
    "source": [str(s) for s in Source],
    "status": list(STATUSES),
}
