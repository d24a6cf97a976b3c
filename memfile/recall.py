"""Recall: choose and render memories for an agent's context window. Pure.

Without a query, recall order (`ORDER`); with one (`recall_query`), the pinned memories, then the
matches best first (`score`) with their neighbours. Under a budget the lowest-ranked entries are
shortened, then left out; a verified critical memory is never left out. docs/recall.md states the
order and the cuts; `estimate_tokens` is one token per 4 characters, rounded up.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from operator import attrgetter
from typing import Any

from .errors import InvalidInput
from .model import Category, Memory, Priority

CHARS_PER_TOKEN = 4
SHORT_CHARS = 80
_FULL, _SHORT, _OUT = "full", "short", "out"

#: The blend that ranks a query's matches: each part is in 0..1, the score is their weighted sum.
WEIGHTS = {"relevance": 0.70, "priority": 0.10, "recency": 0.10, "confidence": 0.05, "verified": 0.05}
PRIORITY_VALUE = {Priority.LOW: 0.0, Priority.NORMAL: 1 / 3, Priority.HIGH: 2 / 3, Priority.CRITICAL: 1.0}
#: Categories whose high memories are pinned like critical ones (the always-in-context profile).
PROFILE = (Category.IDENTITY, Category.PREFERENCE)
#: Neighbours: for each of the NEIGHBOUR_OF best matches, the NEIGHBOURS memories stored just before
#: and just after it (within NEIGHBOUR_WINDOW) count as matches with NEIGHBOUR_WEIGHT x its text score.
NEIGHBOUR_OF, NEIGHBOURS, NEIGHBOUR_WEIGHT = 3, 2, 0.7
NEIGHBOUR_WINDOW = timedelta(minutes=10)
#: The category of conversation turns: the only memories whose order of storing says they belong
#: together. A person's facts, notes and projects written in one sitting were stored together but
#: may be about anything: their neighbours come after every real match. A turn next to a matching
#: turn may pass weaker matching turns, never a match outside the conversation.
CONVERSATION = Category.CONTEXT
#: Links: the memories that the LINK_OF best real matches link to (`[[key]]`, memfile.links) count as
#: matches with LINK_WEIGHT x its text score, and the memories those link to with LINK_WEIGHT x theirs,
#: for `[recall] link_hops` hops. They are shown after the real matches the limit keeps (they take no
#: real match's place), at most LINKED of them, and are the first the budget leaves out.
LINK_OF, LINK_WEIGHT, LINKED = 3, 0.7, 3


#: A recall of several minds: each mind folder's display name (None: a recall of one mind, unlabelled).
Labels = dict[str, str] | None


def estimate_tokens(text: str) -> int:
    """The documented token estimate: ceil(characters / 4)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class RecallItem:
    """One chosen memory; with a query also whether it is pinned and its score with the parts."""

    memory: Memory
    shortened: bool = False
    pinned: bool = False
    score: float | None = None
    parts: tuple[tuple[str, float], ...] = ()
    neighbour_of: str | None = None  # the REF of the match this memory was stored next to, or is linked from
    linked: bool = False  # a memory a match links to (`neighbour_of` names the match)

    def to_dict(self) -> dict[str, Any]:
        data = self.memory.to_dict() | {"shortened": self.shortened, "conflicted": self.memory.conflict is not None}
        if self.score is not None or self.pinned:
            data |= {
                "pinned": self.pinned,
                "score": self.score,
                "score_parts": dict(self.parts),
                "neighbour_of": self.neighbour_of,
                "linked": self.linked,
            }
        return data


class RecallReport(str):
    """`Vault.recall`'s answer: the text it rendered (this string itself, also `.text`; `.encode()` gives
    the UTF-8 bytes `memfile recall` writes) and what recall chose and cut (`items`, `to_dict()`)."""

    mind: str
    mind_name: str
    items: tuple[RecallItem, ...]
    total: int
    verified: int
    left_out: int
    shortened: int
    budget: int | None
    tokens: int
    query: str | None
    matched: int | None

    def __new__(
        cls,
        mind: str,
        mind_name: str,
        text: str,
        items: tuple[RecallItem, ...],
        total: int,
        verified: int,
        left_out: int,
        shortened: int,
        budget: int | None,
        tokens: int,
        query: str | None = None,
        matched: int | None = None,
    ) -> RecallReport:
        report = super().__new__(cls, text)
        report.mind, report.mind_name, report.items, report.total = mind, mind_name, items, total
        report.verified, report.left_out, report.shortened = verified, left_out, shortened
        report.budget, report.tokens, report.query, report.matched = budget, tokens, query, matched
        return report

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle: the text, then every field as it is
        return _report_again, (self.text, dict(self.__dict__))

    @property
    def text(self) -> str:
        """The recall text as a plain str."""
        return str.__str__(self)

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        """The text's UTF-8 bytes, made once (a long-lived Vault serves a kept recall again and again)."""
        if (encoding, errors) != ("utf-8", "strict"):
            return str.encode(self, encoding, errors)
        utf8: bytes | None = self.__dict__.get("_utf8")
        if utf8 is None:
            utf8 = self.__dict__["_utf8"] = str.encode(self)
        return utf8

    def to_dict(self) -> dict[str, Any]:
        data = {
            "mind": self.mind,
            "name": self.mind_name,
            "total": self.total,
            "verified": self.verified,
            "unverified": self.total - self.verified,
            "budget": self.budget,
            "tokens": self.tokens,
            "left_out": self.left_out,
            "shortened": self.shortened,
        }
        if self.query is not None:
            data |= {"query": self.query, "matched": self.matched, "weights": WEIGHTS}
        return data | {"memories": [item.to_dict() for item in self.items]}


def _report_again(text: str, fields: dict[str, Any]) -> RecallReport:
    report = str.__new__(RecallReport, text)
    report.__dict__.update(fields)
    return report


@dataclass(frozen=True)
class Scored:
    """A memory that matched the query, with its score and the parts it is made of."""

    memory: Memory
    score: float
    parts: tuple[tuple[str, float], ...] = field(default=())
    neighbour_of: str | None = None
    linked: bool = False


@dataclass(frozen=True)
class Match:
    """A memory's text score for a query; `via` is the match it is a neighbour of (`linked`: that links
    to it), if that is why."""

    memory: Memory
    text_score: float
    via: Memory | None = None
    linked: bool = False


@dataclass(frozen=True)
class Recallable:
    """What a recall for a query needs of a mind's recallable memories, worked out once
    (a long-lived Vault keeps it while the catalog and the set of expired memories stay the same)."""

    memories: list[Memory]  # no expired or superseded ones
    timeline: list[Memory]  # by created_at, then path
    position: dict[str, int]  # path -> index in timeline
    pinned: list[Memory]  # in recall order
    verified: int
    texts: dict[tuple[str, str], str] = field(default_factory=dict)  # (path, mode) -> a pinned entry, rendered

    @classmethod
    def of(cls, memories: list[Memory]) -> Recallable:
        timeline = sorted(memories, key=_time_key)
        return cls(
            memories,
            timeline,
            {m.path: i for i, m in enumerate(timeline)},
            order([m for m in memories if is_pinned(m)]),
            sum(1 for m in memories if m.verified),
        )

    def updated(self, live: list[Memory], gone: set[str]) -> Recallable:
        """This set after the files at the paths `gone` changed: their memories leave it, and `live` (the
        recallable memories now at those paths, in the order of the memories `of` was given) join it.
        Equal to `of` on the new set, at the cost of the paths changed (not of the whole mind)."""
        leaving = sorted(self.position[path] for path in gone if path in self.position)
        left = {self.timeline[i].path for i in leaving}
        memories = [m for m in self.memories if m.path not in left] if left else list(self.memories)
        memories += live
        timeline, position = list(self.timeline), dict(self.position)
        for i in reversed(leaving):
            del position[timeline.pop(i).path]
        first = leaving[0] if leaving else len(timeline)  # positions from here on moved
        for memory in live:
            i = bisect_left(timeline, _time_key(memory), key=_time_key)
            timeline.insert(i, memory)
            first = min(first, i)
        for i in range(first, len(timeline)):
            position[timeline[i].path] = i
        pinned = self.pinned
        if any(m.path in left for m in pinned) or any(is_pinned(m) for m in live):
            pinned = order([m for m in pinned if m.path not in left] + [m for m in live if is_pinned(m)])
        verified = self.verified - sum(1 for i in leaving if self.timeline[i].verified)
        texts = {place: text for place, text in self.texts.items() if place[0] not in gone}
        return Recallable(memories, timeline, position, list(pinned), verified + sum(m.verified for m in live), texts)


def _time_key(memory: Memory) -> tuple[datetime, str]:
    """A memory's place in a Recallable's timeline."""
    return memory.created_at, memory.path


def with_neighbours(matches: list[Match], memories: list[Memory] | Recallable) -> list[Match]:
    """`matches` (best first) plus the neighbours of the best ones (see NEIGHBOURS).

    A memory keeps the better of its own text score and its score as a neighbour.
    """
    mind = memories if isinstance(memories, Recallable) else Recallable.of(memories)
    timeline, position = mind.timeline, mind.position
    best = {m.memory.path: m for m in matches}
    for match in matches[:NEIGHBOUR_OF]:
        i = position.get(match.memory.path)
        if i is None:
            continue
        for j in range(max(0, i - NEIGHBOURS), min(len(timeline), i + NEIGHBOURS + 1)):
            near = timeline[j]
            if j == i or abs(near.created_at - match.memory.created_at) > NEIGHBOUR_WINDOW:
                continue
            value = NEIGHBOUR_WEIGHT * match.text_score
            if near.path not in best or best[near.path].text_score < value:
                best[near.path] = Match(near, value, match.memory)
    return sorted(best.values(), key=lambda m: -m.text_score)


def with_links(
    matches: list[Match], recallable: Recallable, links_of: Callable[[Memory], list[Memory]], hops: int
) -> list[Match]:
    """`matches` (best first) plus the recallable memories the best real ones link to, `hops` links away
    (see LINK_OF; `links_of(memory)` gives the memories a memory's links lead to). A real match stays
    one; a memory reached as a neighbour too keeps the better of the two scores."""
    best = {m.memory.path: m for m in matches}
    reached = [m for m in matches if m.via is None][:LINK_OF]
    for _ in range(hops):
        sources, reached = reached, []
        for match in sources:
            value = LINK_WEIGHT * match.text_score
            for target in links_of(match.memory):
                known = best.get(target.path)
                if target.path in recallable.position and (known is None or known.via and known.text_score <= value):
                    best[target.path] = Match(target, value, match.memory, linked=True)
                    reached.append(best[target.path])
    return sorted(best.values(), key=lambda m: -m.text_score)


def recall_priority(memory: Memory) -> Priority:
    """The priority recall ranks and cuts a memory by: its own, but `high` for an unverified critical
    one. Only what a person verified is kept beyond a budget: an agent's critical memories are shown
    when they fit, never at the cost of the person's, and never make a budget impossible."""
    if memory.priority is Priority.CRITICAL and not memory.verified:
        return Priority.HIGH
    return memory.priority


def is_pinned(memory: Memory) -> bool:
    """Verified critical memories, and verified high ones of the profile categories, are always recalled."""
    return memory.verified and (
        memory.priority is Priority.CRITICAL or (memory.priority is Priority.HIGH and memory.category in PROFILE)
    )


def score(matches: list[Match], now: datetime, half_life_days: float) -> list[Scored]:
    """Rank a query's matches, best first, by the documented blend (`WEIGHTS`, docs/recall.md).

    A neighbour never outranks a real match, but a turn of a conversation next to a matching turn may
    outrank weaker matching turns (its score is at most the lowest of theirs; on a tie it comes after).
    """
    best = max((m.text_score for m in matches), default=0.0) or 1.0
    names, weights = tuple(WEIGHTS), tuple(WEIGHTS.values())
    ranked: list[Scored] = []
    turns: set[str] = set()  # the paths of neighbours that are turns of a conversation next to a matching turn
    for match in matches:  # a recall ranks a hundred or more: plain tuples, no dict per match
        memory = match.memory
        age_days = max(0.0, (now - memory.updated_at).total_seconds() / 86400)
        values = (
            match.text_score / best,
            PRIORITY_VALUE[recall_priority(memory)],
            math.pow(0.5, age_days / half_life_days),
            memory.confidence,
            1.0 if memory.verified else 0.0,
        )  # in the order of WEIGHTS
        total = sum(weight * value for weight, value in zip(weights, values))
        ranked.append(
            Scored(
                memory,
                round(total, 6),
                tuple(zip(names, (round(v, 6) for v in values))),
                match.via.ref if match.via else None,
                match.linked,
            )
        )
        if (
            match.via is not None
            and not match.linked
            and memory.category is CONVERSATION
            and match.via.category is CONVERSATION
        ):
            turns.add(memory.path)
    real = [s for s in ranked if s.neighbour_of is None and not is_pinned(s.memory)]
    below = min((s.score for s in real), default=None)  # every real match's
    below_outside = min((s.score for s in real if s.memory.category is not CONVERSATION), default=None)

    def capped(s: Scored) -> Scored:
        floor = below_outside if s.memory.path in turns else below
        return replace(s, score=floor) if floor is not None and s.score > floor else s

    ranked = [capped(s) if s.neighbour_of is not None else s for s in ranked]
    return sorted(ranked, key=lambda s: (-s.score, s.neighbour_of is not None, s.memory.ref, s.memory.path))


#: Recall order, defined here once: the keys a whole recall lists memories by, first to last, each
#: with whether it runs descending (`order` sorts by it; the index's catalog keeps its rows in it).
#: The keys: `rank` (of `recall_priority`: critical first), `updated` (`updated_at`), `ref` (category,
#: then key: no category holds `/`), `path`.
ORDER: tuple[tuple[str, bool], ...] = (("rank", False), ("updated", True), ("ref", False), ("path", False))


def order(memories: list[Memory]) -> list[Memory]:
    """The memories in recall order (`ORDER`): priority first (critical on top, by `recall_priority`),
    then newest first, then by REF and path for stability."""
    for name, descending in reversed(ORDER):  # stable sorts, the last key first
        memories = sorted(memories, key=_ORDER_KEYS[name], reverse=descending)
    return memories


_RANK = {priority: priority.rank for priority in Priority}
#: How `order` reads each key of `ORDER` from a memory (categories are strings: they sort by their names).
_ORDER_KEYS: dict[str, Callable[[Memory], Any]] = {
    "rank": lambda memory: _RANK[recall_priority(memory)],
    "updated": attrgetter("updated_at"),
    "ref": attrgetter("category", "key"),
    "path": attrgetter("path"),
}


def _short(content: str) -> str:
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    cut = len(first) > SHORT_CHARS or len([ln for ln in content.splitlines() if ln.strip()]) > 1
    return (first[: SHORT_CHARS - 1].rstrip() + "…") if len(first) > SHORT_CHARS else first + (" …" if cut else "")


def _entry(
    memory: Memory, shortened: bool, neighbour_of: str | None = None, labels: Labels = None, linked: bool = False
) -> str:
    """An entry without its `[NNN] ` number (numbers are added once the selection is final); its first
    line says when the memory is conflicted, what it is a neighbour of or linked from, and (a recall of
    several minds, `labels`) whose it is."""
    state = "verified" if memory.verified else "proposed" if memory.proposed else "unverified"
    text = f"{str(memory.category)} ({memory.priority.upper()}) [{state}]"  # str(): no enum lookup
    if labels is not None:
        text += f" [mind: {labels.get(memory.mind, memory.mind)}]"
    if memory.conflict is not None:
        text += f" [conflicted: memfile resolve {memory.ref}]"
    if neighbour_of is not None:
        text += f" [linked from {neighbour_of}]" if linked else f" [neighbour of {neighbour_of}]"
    text += f"\n  {memory.key}"
    body = _short(memory.content) if shortened else memory.content
    lines = [line.rstrip() for line in body.splitlines() if line and not line.isspace()]  # no blank lines
    if lines:
        text += "\n  " + "\n  ".join(lines)
    if memory.tags:
        text += "\n  Tags: " + ", ".join(memory.tags)
    return text


def _mind_header(mind_name: str, total: int, verified: int) -> str:
    return f"Mind: {mind_name}\nMemories: {total} total ({verified} verified, {total - verified} unverified)"


def _width(count: int) -> int:
    """Digits of the `[NNN] ` numbers of a recall of `count` candidates."""
    return max(3, len(str(count)))


def _text(header: str, entries: list[str], width: int, closing: str) -> str:
    """The recall text: the header, the entries numbered from 1, the closing line if any."""
    numbered = [f"[{str(n).zfill(width)}] {entry}" for n, entry in enumerate(entries, 1)]
    return "\n\n".join([header, *numbered, *([closing] if closing else [])]) + "\n"


def _closing(left_out: int, shortened: int, budget: int | None) -> str:
    if not left_out and not shortened:
        return ""
    cut = ", ".join(
        part
        for part in (f"{left_out} left out" if left_out else "", f"{shortened} shortened" if shortened else "")
        if part
    )
    hint = "see all: memfile list" if left_out else "read one whole: memfile show REF"
    return f"({cut} to fit {budget} tokens; {hint})"


def _tier_steps(chosen: list[Memory], indexes: list[int]) -> list[tuple[int, str]]:
    """Cuts by priority tier (`recall_priority`), low first: shorten the tier oldest first, then leave it
    out; critical only shortened."""
    steps = []
    for tier in (Priority.LOW, Priority.NORMAL, Priority.HIGH, Priority.CRITICAL):
        oldest_first = [i for i in reversed(indexes) if recall_priority(chosen[i]) is tier]
        steps += [(i, _SHORT) for i in oldest_first]
        if tier is not Priority.CRITICAL:
            steps += [(i, _OUT) for i in oldest_first]
    return steps


def recall(
    memories: list[Memory], mind: str, mind_name: str, budget: int | None = None, labels: Labels = None
) -> RecallReport:
    """Choose and render the recall of `memories` (already filtered: no expired ones) under `budget` tokens
    (None: no limit); `mind_name` heads it, and `labels` (a recall of several minds) names each entry's mind."""
    chosen = order(memories)
    verified = sum(1 for m in chosen if m.verified)
    header = _mind_header(mind_name, len(chosen), verified)
    items = [RecallItem(m) for m in chosen]
    return _render(
        items,
        lambda: _tier_steps(chosen, list(range(len(chosen)))),
        lambda _out: header,
        budget,
        partial(RecallReport, mind, mind_name, total=len(chosen), verified=verified, budget=budget),
        labels=labels,
    )


def recall_query(
    memories: list[Memory] | Recallable,
    ranked: list[Scored],
    query: str,
    mind: str,
    mind_name: str,
    budget: int | None = None,
    limit: int | None = 10,
    matched: int | None = None,
    labels: Labels = None,
) -> RecallReport:
    """The recall for a query: the pinned memories of `memories` (every recallable one of the mind), then the
    best of `ranked` (best first, `score`), at most `limit` of them (None: all), under `budget` tokens.
    `matched`: how many memories match in all (default: len(ranked)); `labels`: see `recall`."""
    matched = len(ranked) if matched is None else matched
    recallable = memories if isinstance(memories, Recallable) else Recallable.of(memories)
    pinned, total, verified = recallable.pinned, len(recallable.memories), recallable.verified
    pinned_ids = {m.path for m in pinned}
    matches = [s for s in ranked if s.memory.path not in pinned_ids and not s.linked]
    shown = matches[:limit] + _linked(ranked, matches[:limit], pinned_ids)
    items = [RecallItem(m, pinned=True) for m in pinned]
    items += [
        RecallItem(s.memory, score=s.score, parts=s.parts, neighbour_of=s.neighbour_of, linked=s.linked) for s in shown
    ]
    chosen = [item.memory for item in items]
    first_line = _mind_header(mind_name, total, verified)

    def steps() -> list[tuple[int, str]]:
        lowest_first = reversed(range(len(pinned), len(items)))
        return [step for i in lowest_first for step in ((i, _SHORT), (i, _OUT))] + _tier_steps(
            chosen, list(range(len(pinned)))
        )

    near_before, linked_before = [0], [0]  # [k]: the neighbours / linked among the first k entries after the pinned
    for item in items[len(pinned) :]:
        near_before.append(near_before[-1] + (item.neighbour_of is not None and not item.linked))
        linked_before.append(linked_before[-1] + item.linked)
    words = " ".join(query.split())

    def header(left_out: int) -> str:
        """Counts of what is shown, which add up to its entries: the budget leaves out the lowest-ranked
        entry after the pinned ones first, then pinned high memories (`steps`)."""
        kept = max(0, len(shown) - left_out)
        near, linked = near_before[kept], linked_before[kept]
        counts = f"{len(pinned) - max(0, left_out - len(shown))} pinned, {kept - near - linked} best shown"
        counts += f", {near} neighbour{'s' if near != 1 else ''}" if near else ""
        counts += f", {linked} linked" if linked else ""
        counts += f", {left_out} left out by the budget" if left_out else ""
        return f"{first_line}\nQuery: {words} ({matched} matched; {counts})"

    return _render(
        items,
        steps,
        header,
        budget,
        partial(
            RecallReport, mind, mind_name, total=total, verified=verified, budget=budget, query=query, matched=matched
        ),
        pinned=(len(pinned), recallable.texts),
        labels=labels,
    )


def _linked(ranked: list[Scored], shown: list[Scored], pinned: set[str]) -> list[Scored]:
    """The linked memories (best first, at most LINKED) that a memory `shown` links to, or one of them."""
    sources = {(s.memory.mind, s.memory.ref) for s in shown}
    waiting = [s for s in ranked if s.linked and s.memory.path not in pinned]
    chosen: list[Scored] = []
    while waiting and len(chosen) < LINKED:
        found = next((s for s in waiting if (s.memory.mind, s.neighbour_of) in sources), None)
        if found is None:
            break
        waiting.remove(found)
        chosen.append(found)
        sources.add((found.memory.mind, found.memory.ref))  # its own links may follow (hop 2)
    return chosen


def _render(
    items: list[RecallItem],
    steps: Callable[[], list[tuple[int, str]]],
    header: Callable[[int], str],
    budget: int | None,
    report: Callable[..., RecallReport],
    pinned: tuple[int, dict[tuple[str, str], str]] | None = None,
    labels: Labels = None,
) -> RecallReport:
    """Apply the cuts `steps()` gives (entry, mode), in order, until the text fits the budget; render it
    into `report(text=, items=, left_out=, shortened=, tokens=)`.

    `pinned`: how many entries come first whose renderings are kept between recalls,
    and where they are kept, by (path, mode).
    """
    width = _width(len(items))
    modes = [_FULL] * len(items)
    rendered: dict[str, list[str | None]] = {_FULL: [None] * len(items), _SHORT: [None] * len(items)}
    pinned_count, pinned_texts = pinned or (0, {})

    def entry(i: int, mode: str) -> str:
        if i < pinned_count:  # kept between recalls, by (path, mode)
            place = (items[i].memory.path, mode)
            if place not in pinned_texts:
                pinned_texts[place] = _entry(items[i].memory, mode == _SHORT, labels=labels)
            return pinned_texts[place]
        text = rendered[mode][i]
        if text is None:
            item = items[i]
            text = rendered[mode][i] = _entry(item.memory, mode == _SHORT, item.neighbour_of, labels, item.linked)
        return text

    costs: dict[str, list[int]] = {_FULL: [-1] * len(items), _SHORT: [-1] * len(items), _OUT: [0] * len(items)}

    def cost(i: int, mode: str) -> int:
        """Characters entry i takes in this mode: `[NNN] `, the entry, the blank line before it."""
        found = costs[mode][i]
        if found < 0:
            found = costs[mode][i] = width + 3 + len(entry(i, mode)) + 2
        return found

    body = sum(cost(i, _FULL) for i in range(len(items))) if budget is not None else 0  # no budget: no cut
    counts = {_FULL: len(items), _SHORT: 0, _OUT: 0}
    least = len(header(0)) + 1  # what the text takes besides its entries, at the least

    def size(limit_for_closing: int | None = budget) -> int:
        closing = _closing(counts[_OUT], counts[_SHORT], limit_for_closing)
        return len(header(counts[_OUT])) + body + (len(closing) + 2 if closing else 0) + 1

    def smallest_budget() -> int:
        """The smallest budget this cut state fits (the closing line names the budget, so it moves with it)."""
        need = -(-size(0) // CHARS_PER_TOKEN)
        while size(need) > need * CHARS_PER_TOKEN:
            need += 1
        return need

    def cut(cuts: list[tuple[int, str]], limit: int, watch: bool) -> int | None:
        """Apply cuts until the text fits `limit` characters; with `watch`, the smallest budget
        some state along the way fits (only asked for when none fits: it costs a pass per cut)."""
        nonlocal body
        fits = smallest_budget() if watch else None
        for i, mode in cuts:
            if body + least <= limit and size() <= limit:  # the first test spares most renders of the header
                break
            if mode == _SHORT and cost(i, _SHORT) >= cost(i, _FULL):
                continue
            body += cost(i, mode) - cost(i, modes[i])
            counts[modes[i]] -= 1
            counts[mode] += 1
            modes[i] = mode
            if watch:
                fits = min(fits, smallest_budget())  # type: ignore[type-var]
        return fits

    if budget is not None:
        cuts, uncut = steps(), body
        cut(cuts, budget * CHARS_PER_TOKEN, watch=False)
        if size() > budget * CHARS_PER_TOKEN:
            modes, body = [_FULL] * len(items), uncut  # again from the start, to name the budget that works
            counts.update({_FULL: len(items), _SHORT: 0, _OUT: 0})
            fits = cut(cuts, budget * CHARS_PER_TOKEN, watch=True)
            raise InvalidInput(
                "budget",
                budget,
                f"{fits} tokens or more for this mind (the header and its verified critical memories, shortened, need that)",
            )

    kept = [(i, mode) for i, mode in enumerate(modes) if mode != _OUT]
    chosen = tuple(items[i] if mode == _FULL else replace(items[i], shortened=True) for i, mode in kept)
    closing = _closing(counts[_OUT], counts[_SHORT], budget)
    text = _text(header(counts[_OUT]), [entry(i, mode) for i, mode in kept], width, closing)
    return report(
        text=text, items=chosen, left_out=counts[_OUT], shortened=counts[_SHORT], tokens=estimate_tokens(text)
    )
