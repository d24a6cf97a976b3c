"""The Vault's `Recaller`: recall for the context window, with or without a query, and its record; and
what every read (recall, search, show) served that holds a secret (`tells_secrets`). `memfile.recall`
is imported where it is used: a command that does not recall never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .config import STATE_DIR, Config, plain
from .errors import InvalidInput, NotFound, masked
from .files import atomic_write
from .index import Index, SearchOptions, View, check_query
from .model import UNSET, Memory, Report, SearchHit, Source, format_datetime, utc_now

if TYPE_CHECKING:
    from .links import Link
    from .recall import Recallable, RecallReport
    from .secretscan import ReadWarnings

T = TypeVar("T")

#: A recall by meaning too: (the read's view, query, text hits, what is recallable, how many) -> the fused hits.
Fuse = Callable[[View, str, Sequence[SearchHit], Callable[[Memory], bool], int], Sequence[SearchHit]]
#: Where the last recall served to a mind is recorded (in `.memfile/`): one record per mind, so that
#: no mind (nor an agent bound to it) ever reads another's query or memory ids.
LAST_RECALL = "last_recall-{mind}.json"
#: How many of a query's best text matches recall ranks by its blend.
CANDIDATES = 100

_NEVER = datetime.max.replace(tzinfo=timezone.utc)  # "until" of what no expiry ends


@dataclass(frozen=True)
class AsOf:
    """What a recall or search reads as of a moment (`Vault.recall(at=...)`): the mind's `index` then (an
    `Index` of a commit's files), and the commit (`sha`) and its time (`moment`), which is "now" for expiry,
    supersede rules and recency. A plain recall is the one of the mind's own index at the clock's time."""

    sha: str
    moment: datetime
    index: Index

    def to_dict(self) -> dict[str, str]:
        return {"commit": self.sha, "date": format_datetime(self.moment)}


@dataclass(frozen=True)
class RecallRecord(Report):
    """What the last recall of a mind served (`Vault.last_recall()`): when, by whom, the query and budget,
    the tokens used, and each memory chosen (`ref`, `id`, `pinned`, `shortened`, `score`, `neighbour_of`,
    `linked`)."""

    served_at: str
    source: str
    mind: str
    query: str | None
    matched: int | None
    budget: int | None
    tokens: int
    total: int
    left_out: int
    shortened: int
    memories: list[dict[str, Any]]
    as_of: dict[str, str] | None = None  # a recall as of a commit (`at`): its sha and date; None: of now


class Recaller:
    """Recall of one mind over its index, and the record of what it last served."""

    def __init__(
        self,
        root: Path,
        mind: str,
        config: Config,
        actor: Source,
        index: Index,
        notices: list[str],
        parsed_links: dict[str, tuple[str, list[Link]]],
    ) -> None:
        self.root = root
        self.mind = mind
        self.config = config
        self.actor = actor
        self.notices = notices
        self._index = index
        self._parsed_links = parsed_links  # each text's links, parsed once (shared with the Vault's LinkTable)
        self._kept_record: tuple[RecallReport, str] | None = None  # the last report served, as its record
        self._read_warnings: ReadWarnings | None = None  # what reads served that holds a secret, once per file

    @property
    def name(self) -> str:
        return self.config.display_name(self.mind)

    def recall(
        self,
        budget: int | None = UNSET,
        *,
        query: str | None = None,
        limit: int | None = 10,
        include_superseded: bool = False,
        include_proposed: bool = False,
        exclude: frozenset[str] = frozenset(),
        fuse: Fuse | None = None,
        as_of: AsOf | None = None,
        record: bool = True,
    ) -> RecallReport:
        """`fuse`: the text matches and the recallable memories -> the matches by meaning too (`semantic`).
        `as_of`: recall the mind as then (its index, at its moment), and record so; default: now.
        `record`: False: leave the record of the last recall as it is."""
        shown = (include_superseded, include_proposed)
        budget = self._checked(budget, limit)
        if query is not None:
            check_query(query)  # before any work: a 10 MB query is refused at once
        now = as_of.moment if as_of is not None else utc_now()

        def whole(view: View) -> RecallReport:
            return view.derived(
                ("whole", shown, budget, exclude),
                now,
                lambda every: self._whole(every, now, shown, budget, exclude),
            )

        def recallable_of(memories: list[Memory]) -> tuple[Recallable, datetime]:
            """The recallable memories at `now`, and until when that holds (the first expiry)."""
            from .recall import Recallable

            live = [m for m in memories if is_recallable(m)]
            return Recallable.of(live), min((m.expires_at for m in live if m.expires_at is not None), default=_NEVER)

        def is_recallable(memory: Memory) -> bool:
            return _recallable(memory, now, shown, exclude)

        def recallable_updated(
            kept: Recallable, until: datetime, changed: list[Memory], removed: set[str]
        ) -> tuple[Recallable, datetime]:
            """`recallable_of` after this process's writes changed the memories at some paths (`View.derived`).
            Every other memory is as recallable as when `kept` was made (its first expiry, `until`, has not
            come), so that `until` still bounds them; it may end before the new set's first expiry, and
            then the set is made anew."""
            live = [m for m in changed if is_recallable(m)]
            until = min([until, *(m.expires_at for m in live if m.expires_at is not None)])
            return kept.updated(live, removed.union(m.path for m in changed)), until

        def matching(view: View) -> RecallReport:
            from .recall import Match, recall_query, score, with_links, with_neighbours

            assert query is not None
            key = ("recallable", shown, exclude)
            recallable = view.derived(key, now, recallable_of, recallable_updated)
            options = SearchOptions(
                include_superseded=include_superseded,
                include_proposed=include_proposed,
                limit=max(CANDIDATES, limit or 0),
                snippets=False,
            )
            hits, matched = view.search(query, options, now, count=True)
            hits = [hit for hit in hits if not _named(hit.memory, exclude)]
            if fuse is not None:
                hits = list(fuse(view, query, hits, is_recallable, options.limit))
                matched = max(matched, len(hits))
            matches = with_neighbours([Match(hit.memory, hit.score) for hit in hits], recallable)
            if self.config.link_hops:
                matches = with_links(matches, recallable, self._links_of(view, now), self.config.link_hops)
            ranked = score(matches, now, self.config.half_life_days)
            return recall_query(recallable, ranked, query, self.mind, self.name, budget, limit, matched)

        index = as_of.index if as_of is not None else self._index
        report = index.read(whole if query is None else matching)
        return self._served(report, as_of) if record else report

    def recall_across(
        self,
        others: list[Recaller],
        budget: int | None = UNSET,
        *,
        query: str | None = None,
        limit: int | None = 10,
        include_superseded: bool = False,
        include_proposed: bool = False,
        record: bool = True,
    ) -> RecallReport:
        """`Vault.recall` with `with_minds`: this mind's recall and the `others`' in one text and one budget,
        each entry naming its mind. Each mind is read through its own index only (a mind not named is never
        read); the pinned memories of every mind come first, then the best matches of all, ranked together;
        a neighbour is one of the same mind."""
        from .recall import Match, Recallable, recall, recall_query, score, with_links, with_neighbours

        budget = self._checked(budget, limit)
        if query is not None:
            check_query(query)
        now = utc_now()
        parts = [self, *others]
        labels = {part.mind: part.name for part in parts}
        name = " + ".join(labels.values())

        def recallable(view: View) -> list[Memory]:
            return [m for m in view.memories() if _recallable(m, now, (include_superseded, include_proposed))]

        served = self._served if record else lambda report: report
        if query is None:
            every = [m for part in parts for m in part._index.read(recallable)]
            return served(recall(every, self.mind, name, budget, labels))
        options = SearchOptions(
            include_superseded=include_superseded,
            include_proposed=include_proposed,
            limit=max(CANDIDATES, limit or 0),
            snippets=False,
        )
        every, matches, matched = [], [], 0
        for part in parts:

            def found(view: View, part: Recaller = part) -> tuple[list[Memory], list[Match], int]:
                mine = recallable(view)
                hits, count = view.search(query, options, now, count=True)
                near = with_neighbours([Match(hit.memory, hit.score) for hit in hits], Recallable.of(mine))
                if self.config.link_hops:  # a link crosses no mind: each mind's own
                    near = with_links(near, Recallable.of(mine), part._links_of(view, now), self.config.link_hops)
                return mine, near, count

            mine, near, count = part._index.read(found)
            every += mine
            matches += near
            matched += count
        ranked = score(matches, now, self.config.half_life_days)
        return served(
            recall_query(Recallable.of(every), ranked, query, self.mind, name, budget, limit, matched, labels)
        )

    def _links_of(self, view: View, now: datetime) -> Callable[[Memory], list[Memory]]:
        """For `with_links`: the memories a memory's links lead to in this read. The mind's `LinkTable` is
        made (and kept while the mind is unchanged) only when a match holds a link."""
        from .links import LinkTable

        table: LinkTable | None = None

        def targets(memory: Memory) -> list[Memory]:
            nonlocal table
            if "[[" not in memory.content:
                return []
            if table is None:
                parsed = self._parsed_links
                table = view.derived(("links",), now, lambda every: (LinkTable(every, parsed=parsed), _NEVER))
            return [link.memory for link in table.links(memory) if link.memory is not None]

        return targets

    def _checked(self, budget: int | None | object, limit: int | None) -> int | None:
        """The budget asked for, or `[recall] budget` of memfile.toml; None for no limit (0 asks for none).

        Raises:
            InvalidInput: the budget is not a whole number of tokens, or the limit not one from 1 to 1000.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000):
            raise InvalidInput("limit", limit, "a whole number from 1 to 1000")
        if budget is UNSET:
            budget = self.config.recall_budget
        if budget == 0 and not isinstance(budget, bool):
            return None
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise InvalidInput("budget", budget, "a whole number of tokens (0 = no limit)")
        return budget

    def _whole(
        self,
        memories: list[Memory],
        now: datetime,
        shown: tuple[bool, bool],
        budget: int | None,
        exclude: frozenset[str] = frozenset(),
    ) -> tuple[RecallReport, datetime]:
        """The recall of every memory not expired at `now` (nor excluded), and until when it holds: the first
        expiry among them (nothing else in it depends on the time; `View.derived` keeps it that long)."""
        from .recall import recall

        live = [m for m in memories if _recallable(m, now, shown, exclude)]
        until = min((m.expires_at for m in live if m.expires_at is not None), default=_NEVER)
        return recall(live, self.mind, self.name, budget), until

    def _served(self, report: RecallReport, as_of: AsOf | None = None) -> RecallReport:
        """Record what recall gave (`.memfile/last_recall.json`): what did the agent see on its last turn?"""
        kept = self._kept_record
        if kept is None or kept[0] is not report or plain("catalog_cache"):
            # A report kept by the index (a whole recall of an unchanged mind) is recorded as last time.
            kept = self._kept_record = (report, json.dumps(_record_of(report), ensure_ascii=False))
        self._record(kept[1], as_of)
        return report

    def _record(self, served: str, as_of: AsOf | None = None) -> None:
        """Write the record: when, who and which mind, then `served` (the JSON object of `_record_of`), then
        as of when (`as_of`: the commit and its date; null for the mind as it is)."""
        record = {"served_at": format_datetime(utc_now()), "source": str(self.actor), "mind": self.mind}
        head = json.dumps(record, ensure_ascii=False)
        tail = json.dumps({"as_of": as_of.to_dict() if as_of is not None else None})
        name = LAST_RECALL.format(mind=self.mind)
        try:
            data = (head[:-1] + ", " + served[1:-1] + ", " + tail[1:]).encode("utf-8")  # one object
            atomic_write(self.root / STATE_DIR / name, data, durable=False)  # a record, not a memory
        except OSError as exc:  # a read-only vault still recalls
            self.notices.append(f"could not record the recall in {STATE_DIR}/{name}: {exc.strerror}")

    def tell_secrets(self, memories: list[Memory]) -> None:
        """Name in the notices each memory a read serves whose text holds a secret (a hand edit put it
        there), once per file: `secretscan.ReadWarnings`, made on the first memory served (a read that
        serves nothing never compiles the rules)."""
        if not memories:
            return
        if self._read_warnings is None:
            from .secretscan import ReadWarnings

            self._read_warnings = ReadWarnings()
        self.notices.extend(self._read_warnings.told(self.config.secrets, memories, self._edited_by))

    def _edited_by(self, memory: Memory) -> tuple[str, str]:
        """A served memory's REF as a notice names it, and the --mind option the command line edits it with."""
        if memory.mind == self.mind:
            return memory.ref, ""
        return f"{memory.mind}:{memory.ref}", f"--mind {memory.mind} "

    def last_recall(self) -> RecallRecord:
        path = self.root / STATE_DIR / LAST_RECALL.format(mind=self.mind)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        # A record copied from another mind, or damaged, is no record of this one.
        if (
            not isinstance(record, dict)
            or record.get("mind") != self.mind
            or not _RECORD_KEYS <= set(record)
            or not isinstance(record["memories"], list)
        ):
            raise NotFound(
                f"no recall of mind {self.mind} was recorded in {self.root} yet; run: memfile --mind {self.mind} recall"
            )
        keys = ("ref", "id", "pinned", "shortened", "score", "neighbour_of", "linked")
        memories = [dict(zip(keys, entry, strict=False)) for entry in record["memories"] if isinstance(entry, list)]
        optional = {"matched", "as_of"}
        return RecallRecord(**{name: record.get(name) for name in _RECORD_KEYS | optional} | {"memories": memories})


def tells_secrets(served: Callable[[Any], list[Memory]]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A Vault's read verb whose answer serves the memories `served` lists: one whose text holds a secret
    is named in the Vault's notices (`Recaller.tell_secrets`)."""

    def decorate(method: Callable[..., T]) -> Callable[..., T]:
        @wraps(method)
        def verb(vault: Any, *args: Any, **kwargs: Any) -> T:
            answer = method(vault, *args, **kwargs)
            vault._recaller.tell_secrets(served(answer))  # noqa: SLF001 - the Vault's own collaborator
            return answer

        return verb

    return decorate


#: What every record holds (`_record` and `_record_of`; `matched` and `as_of` may be missing).
_RECORD_KEYS = {f.name for f in fields(RecallRecord)} - {"matched", "as_of"}


def _record_of(report: RecallReport) -> dict[str, Any]:
    """What the mind's record (`LAST_RECALL`) keeps of a recall (besides when, who and which mind): a query
    that looks like it holds a secret is kept masked (`errors.masked`)."""
    return {
        "query": masked(report.query) if report.query is not None else None,
        "matched": report.matched,
        "budget": report.budget,
        "tokens": report.tokens,
        "total": report.total,
        "left_out": report.left_out,
        "shortened": report.shortened,
        "memories": [
            [
                _ref(item.memory, report.mind),
                item.memory.id,
                item.pinned,
                item.shortened,
                item.score,
                item.neighbour_of,
                item.linked,
            ]
            for item in report.items
        ],
    }


def _ref(memory: Memory, mind: str) -> str:
    """A recalled memory's REF in the record of `mind`'s recall: `MIND:category/key` for another mind's."""
    return memory.ref if memory.mind == mind else f"{memory.mind}:{memory.ref}"


def _recallable(
    memory: Memory, now: datetime, shown: tuple[bool, bool] = (False, False), exclude: frozenset[str] = frozenset()
) -> bool:
    """Whether a recall at `now` may show the memory: not expired, not excluded, not superseded and not
    proposed (a captured memory waiting for a person's review: `memfile review`) unless `shown` (whether
    superseded, and proposed, memories are) says so."""
    superseded, proposed = shown
    return (
        not memory.is_expired(now)
        and (superseded or not memory.superseded)
        and (proposed or not memory.proposed)
        and not _named(memory, exclude)
    )


def _named(memory: Memory, refs: frozenset[str]) -> bool:
    """Whether `refs` (`recall`'s `exclude`) names the memory, by id or `category/key`."""
    return bool(refs) and (memory.id in refs or memory.ref in refs)
