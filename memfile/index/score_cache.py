"""What a Whoosh searcher keeps warm between queries: word scores, decoded hits, parsed queries.

A process that stays open (the MCP server, a watcher's Vault, any long-lived
`Vault`) asks many queries of one searcher. Whoosh scores a query by
walking every posting of its words through a tree of matchers and a
collector, several microseconds a posting in Python, and the walk is most of
a search. Yet one word's score in one document never changes while the
searcher stays the same. So each word's scores are worked out once, from
Whoosh's own matcher with its BM25F formula and figures, and kept; a query of plain words (one
term, or an OR of terms: what `parse_query` makes of words and questions) is
then the sum of its words' scores, the same numbers Whoosh gives, added up in
one dict. Any other query (a phrase, AND, NOT, a prefix, a boost) returns
None and goes to Whoosh. The memories that hits decode to, the parsed
queries and the superseded and expired documents (until the next expiry)
are kept the same way.

A `ScoreCache` belongs to one searcher: a new searcher, after any change to the
index, starts with a new, empty one. It keeps at most `POSTINGS` scores,
dropping the least recently used words first, and at most `KEPT` memories
and queries.

What is hidden outlives a searcher, one Whoosh segment at a time
(`SegmentMasks`, the trick `segment_masks`): a segment never changes once
written (a store adds a new one and marks the old document deleted in its
own; a merge writes new ones), so which of its documents are superseded, and
when each expires, is found once per segment; the set hidden at a time is
then a few look-ups (a bisect) per segment, less its deleted documents. A
search right after a store finds out only about the store's new segment,
not the whole index again (about 100 ms at 10,000 memories).

Each word's postings outlive a searcher the same way (`SegmentPostings`, the
trick `segment_postings`, carried by the same `SegmentMasks`): a walk decodes
a segment's postings of a word (document, weight, field length) once per
process; a new searcher works the word's scores out again from them with its
own BM25F figures (idf and average length change with every commit), less
the documents deleted since, and decodes only the segments no searcher met.
Its first query of kept words is then answered here too, not by Whoosh.

The memories hits decode to outlive a searcher the same way (`SegmentMemories`, the
trick `segment_memories`): a segment's document never changes, so its Memory is
decoded once per process, by (segment, local document number); a search or a
recall right after a store decodes only the new segment's hits. A segment is
named by its random id, its document count and the stored rows of its first and
last documents (read once per searcher): Whoosh draws segment ids from the global
`random`, which a process may seed again (Hypothesis does, per example), and two
indexes' segments of one id then hold other memories, whose rows (with their
`os.urandom` ids) differ. Parsed queries outlive a searcher too (`ParsedQueries`,
the trick `shared_queries`): a query depends on its text and the schema alone, so
it is kept by text and the schema's pickle (every index of a `SCHEMA_VERSION` is
made by `persisted.schema()`; each searcher unpickles it afresh from the TOC).
Whoosh never changes a query object while searching with it (its classes assign
their attributes only in `__init__`; `normalize`, `with_boost` and the like work on
copies), so one parsed query serves every searcher.
"""

from __future__ import annotations

import heapq
import marshal
import pickle
import threading
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import compress
from typing import Any

from ..config import plain
from ..model import Memory
from .damage import decoding
from .fastpath import row_decoder
from .query import parse_query

#: The most (document, score) pairs kept: 12 bytes each, so about 50 MB.
POSTINGS = 4_000_000
#: The most filter queries (tags, category, ...) whose documents are kept.
FILTERS = 64
#: The most decoded memories, and parsed queries, kept.
KEPT = 20_000
#: A walk pauses every STRIDE postings (a pause of `warm_some` lasts about 0.4 ms).
STRIDE = 256
#: `warm_some` works out words with at least this many postings (a walk of fewer costs a search little).
WARM_FROM = 100
#: The full-text field of plain words (see persisted.schema).
TEXT_FIELD = "text"
#: How much `SegmentMasks` keeps, in all segments: a superseded document counts 1, an expiring one 2 (its
#: number and its term, about 60 bytes together), so at most about 30 MB.
SEGMENT_DOCS = 1_000_000
#: How much `SegmentPostings` keeps, in all segments: a posting counts 1 (12 bytes: its local document
#: number and the code of its weight and length), a document's field length 1 (8 bytes), a word of a
#: segment `WORD_ENTRY` (its arrays and key), so at most about 50 MB.
SEGMENT_POSTINGS = 4_000_000
WORD_ENTRY = 32
#: The most decoded memories `SegmentMemories` keeps, in all segments (about 1.8 KB each at 10k: about 40 MB).
SEGMENT_MEMORIES = 20_000
#: The most parsed queries `ParsedQueries` keeps, of all searchers.
SHARED_QUERIES = 2_000
#: A first query of a searcher goes to the score cache when its words' postings are kept in every
#: segment of at least FEW_DOCS documents (Whoosh's MERGE_SMALL merges the smaller ones).
FEW_DOCS = 1000


class ScoreCache:
    """Cached word scores, decoded hits and parsed queries of one Whoosh searcher."""

    def __init__(
        self, searcher: Any, budget: int = POSTINGS, masks: Any = None, segments: SegmentMasks | None = None
    ) -> None:
        self.searcher = searcher
        self.budget = budget
        # Where other processes' masks of this searcher's generation are kept: get(key, now) -> (since,
        # until, docs) or None, and put(key, since, until, docs) (the index's catalog; None: nowhere)
        self.masks = masks
        # What each segment hides, kept for the next searchers (None: the process's `SEGMENTS`)
        self.segments = segments if segments is not None else SEGMENTS
        self._words: OrderedDict[tuple[str, Any], tuple[array, array]] = OrderedDict()
        self._held = 0
        self._asked = 0  # queries this searcher was asked
        self._filters: dict[Any, frozenset[int]] = {}
        self._memories: dict[int, Memory] = {}
        self._queries: dict[str, Any] = {}
        self._hidden: dict[tuple[bool, bool], tuple[datetime, datetime, set[int]]] = {}
        self._lengths: dict[tuple[str, int], dict[int, int]] = {}  # (field, segment offset) -> docnum -> length
        self._warming: Iterator[None] | None = None  # `warm_some`'s work, paused
        self._offsets: list[int] | None = None  # where each leaf's documents start (`_leaf_of`)
        self._readers: list[Any] = []  # each leaf's reader
        self._names: dict[int, SegmentName | None] = {}  # id(leaf reader) -> its segment's `segment_name`, once asked
        self._schema: int | None = None  # `ParsedQueries.schema` of the searcher's schema

    def parsed(self, text: str) -> Any:
        """`parse_query(text)` for this searcher's schema, once per text.

        Raises:
            InvalidInput: the query cannot be parsed (never kept).
        """
        return _kept(self._queries, text, lambda: self._parse(text))

    def _parse(self, text: str) -> Any:
        if plain("shared_queries"):
            return parse_query(text, self.searcher.schema)
        kept = self.segments.queries
        if self._schema is None:
            self._schema = kept.schema(self.searcher.schema)
        return kept.get(self._schema, text, lambda: parse_query(text, self.searcher.schema))

    def hidden(self, include_superseded: bool, include_expired: bool, now: datetime) -> set[int]:
        """The documents a search leaves out at `now` (superseded, expired), found once until the
        next memory expires: finding them costs a pass over Whoosh's numeric terms, which every
        query would otherwise pay (a mask given as a set of numbers costs nothing). With `masks`, a
        one-shot process takes the set another process found for the same version of the index, and
        a process that stays open finds out only about the segments its earlier searchers did not have
        (`SegmentMasks`)."""
        key = (include_superseded, include_expired)
        found = self._hidden.get(key)
        if found is None or not found[0] <= now < found[1]:
            found = self.masks.get(key, now) if self.masks is not None else None
            if found is None:
                if plain("segment_masks"):
                    docs, until = hidden_docs(self.searcher, include_superseded, include_expired, now)
                else:
                    docs, until = self.segments.hidden(
                        self.searcher, include_superseded, include_expired, now, self._name_of
                    )
                found = (now, until, docs)
                if self.masks is not None:
                    self.masks.put(key, *found)
            self._hidden[key] = found
        return found[2]

    def memory(self, docnum: int) -> Memory:
        """The memory document `docnum` stores, decoded once."""
        return _kept(self._memories, docnum, lambda: self._decode_memory(docnum))

    def _decode_memory(self, docnum: int) -> Memory:
        """The memory of document `docnum`, from `SegmentMemories` when its segment's is kept."""
        if plain("segment_memories"):
            return stored_memory(self.searcher, docnum)
        reader, segment, local = self._leaf_of(docnum)
        if segment is None:  # not a segment of a Whoosh index: decoded as the plain path
            return stored_memory(self.searcher, docnum)
        return self.segments.memories.memory(segment, local, lambda: _memory_of(reader, local))

    def _leaf_of(self, docnum: int) -> tuple[Any, SegmentName | None, int]:
        """The reader of the segment holding document `docnum`, the segment's name in `SegmentMemories`
        (None: not a Whoosh segment), and the document's number in it."""
        if self._offsets is None:
            leaves = self.searcher.leaf_searchers()
            self._offsets = [offset for _, offset in leaves]
            self._readers = [subsearcher.reader() for subsearcher, _ in leaves]
        n = bisect_right(self._offsets, docnum) - 1
        reader = self._readers[n]
        return reader, self._name_of(reader), docnum - self._offsets[n]

    def _name_of(self, reader: Any) -> SegmentName | None:
        """`segment_name(reader)`, read once per leaf reader of this searcher (they live as long as it)."""
        key = id(reader)
        if key not in self._names:
            self._names[key] = segment_name(reader)
        return self._names[key]

    def top(
        self, parsed: Any, allow: Any, hidden: set[int], limit: int, count: bool = True
    ) -> tuple[list[tuple[float, int]], int] | None:
        """The `limit` best `(score, docnum)` of a plain-words query, best first, and how many match.

        Matches are the documents holding any of the words, within the `allow`
        filter query (None: all) and not in `hidden`. Ties go to the lower
        document number, as in Whoosh. None when the query is not plain words,
        and for the searcher's first query unless its matches are to be `count`ed:
        a one-shot process asks one query, and Whoosh answers it faster than a
        walk of every posting (it skips blocks that cannot reach the top `limit`).
        A process that stays open answers it too when the words' postings are kept
        for all but the small segments (`SegmentPostings`): a search right after a store.
        """
        self._asked += 1
        terms = plain_terms(parsed)
        if terms is None or (self._asked == 1 and not count and not self._postings_kept(terms)):
            return None
        total: dict[int, float] = {}
        for term in terms:
            docnums, scores = self._scores(term)
            if not total:
                total = dict(zip(docnums, scores))
                continue
            get = total.get
            for docnum, score in zip(docnums, scores):
                total[docnum] = get(docnum, 0.0) + score
        keys: Any = total.keys()
        if hidden:
            keys = keys - hidden
        if allow is not None:
            keys = keys & self._allowed(allow)
        best = heapq.nlargest(limit, ((total[docnum], -docnum) for docnum in keys))
        return [(score, -negated) for score, negated in best], len(keys)

    def _postings_kept(self, terms: list[Any]) -> bool:
        """Whether every term's postings are kept (`SegmentPostings`) in each segment of at least
        `FEW_DOCS` documents and in one segment at least (this process met the index before): working
        out its scores then decodes only small segments."""
        if plain("segment_postings"):
            return False
        kept = self.segments.postings
        for term in terms:
            if (term.fieldname, term.text) in self._words:
                continue
            met = False
            for subsearcher, _ in self.searcher.leaf_searchers():
                reader = subsearcher.reader()
                name, deleted = self._name_of(reader), getattr(reader, "deleted_docs_set", None)
                if name is None or deleted is None:
                    return False
                key = (name, term.fieldname, term.text)
                if kept.get(key, len(deleted)) is not None:
                    met = True
                elif reader.doc_count_all() >= FEW_DOCS:
                    return False
            if not met:
                return False
        return True

    def _scores(self, term: Any) -> tuple[array, array]:
        """Every (docnum, score) of one term, from Whoosh's matcher, as two arrays."""
        key = (term.fieldname, term.text)
        found = self._words.get(key)
        if found is not None:
            self._words.move_to_end(key)
            return found
        walk = self._walk(term)
        for _ in walk:
            pass
        return self._words[key]

    def _walk(self, term: Any) -> Iterator[None]:
        """Work out one term's scores and keep them, pausing (yielding) every `STRIDE` postings."""
        docnums, scores = array("q"), array("d")
        if plain("segment_postings"):  # every segment's postings decoded again
            context = self.searcher.context()
            for subsearcher, offset in self.searcher.leaf_searchers():
                yield from self._decode(term, subsearcher, offset, context, docnums, scores)
        else:
            yield from self._from_segments(term, docnums, scores)
        key = (term.fieldname, term.text)
        if key in self._words:  # a search needed it while this walk was paused
            return
        self._words[key] = (docnums, scores)
        self._held += len(docnums)
        while self._held > self.budget and len(self._words) > 1:
            dropped, _ = self._words.popitem(last=False)[1]
            self._held -= len(dropped)

    def _decode(
        self, term: Any, subsearcher: Any, offset: int, context: Any, docnums: array, scores: array, matcher: Any = None
    ) -> Iterator[None]:
        """Append one segment's (docnum, score) pairs of `term`, from Whoosh's matcher (made now unless given)."""
        from whoosh.scoring import bm25

        if matcher is None:
            matcher = term.matcher(subsearcher, context)
        scorer = _bm25f(matcher)
        if scorer is None:  # not a BM25F field (an ID or KEYWORD term): Whoosh scores each posting
            while matcher.is_active():
                docnums.append(matcher.id() + offset)
                scores.append(matcher.score())
                matcher.next()
            return
        # BM25F's own formula and figures, with each document's length looked up once per searcher
        # (Whoosh reads it from a column for every posting: most of the time of a walk)
        lengths = self._lengths.setdefault((term.fieldname, offset), {})
        idf, avgfl, b, k1, length_of = scorer.idf, scorer.avgfl, scorer.B, scorer.K1, scorer.dfl
        while matcher.is_active():
            for _ in range(STRIDE):
                docnum, weight = matcher.id(), matcher.weight()
                length = lengths.get(docnum)
                if length is None:
                    length = lengths[docnum] = length_of(docnum)
                docnums.append(docnum + offset)
                scores.append(bm25(idf, weight, length, avgfl, b, k1))
                matcher.next()
                if not matcher.is_active():
                    break
            yield

    def _from_segments(self, term: Any, docnums: array, scores: array) -> Iterator[None]:
        """Append every (docnum, score) pair of `term`, each segment's postings decoded once per process
        (`SegmentPostings`) and scored with this searcher's BM25F figures, less the documents deleted now."""
        from whoosh.matching import NullMatcherClass

        kept = self.segments.postings
        context = self.searcher.context()
        figures: tuple[float, float, float, float] | None = None  # the term's idf, avgfl, B, K1 (all segments')
        for subsearcher, offset in self.searcher.leaf_searchers():
            reader = subsearcher.reader()
            name = self._name_of(reader)
            deleted = getattr(reader, "deleted_docs_set", None)  # what the matcher leaves out (whoosh3)
            if name is None or deleted is None:  # not a segment of a Whoosh index, or empty: as the plain path
                yield from self._decode(term, subsearcher, offset, context, docnums, scores)
                continue
            key = (name, term.fieldname, term.text)
            found = kept.get(key, len(deleted))
            if found is not None and not found.docs:  # the word is in none of the segment's live documents
                continue
            if found is None or figures is None:
                matcher = term.matcher(subsearcher, context)
                if isinstance(matcher, NullMatcherClass):  # not in the segment, ever: kept as no postings
                    kept.put(key, WordPostings(array("q"), array("I"), [], 0))
                    continue
                scorer = _bm25f(matcher)
                if scorer is None:  # not BM25F: scored by Whoosh, as the plain path
                    yield from self._decode(term, subsearcher, offset, context, docnums, scores, matcher)
                    continue
                figures = (scorer.idf, scorer.avgfl, scorer.B, scorer.K1)
                if found is None:
                    lengths = kept.lengths((name, term.fieldname), reader.doc_count_all())
                    found = yield from segment_postings(matcher, scorer.dfl, lengths, len(deleted))
                    kept.put(key, found)
            found.scored(figures, offset, deleted, docnums, scores)
            yield

    def warm_some(self, seconds: float, stop: Callable[[], bool] | None = None) -> bool:
        """Work out the scores of the searcher's most frequent words for about `seconds`, ahead of the
        searches that will need them; True while there is more to do.

        The words are those with at least `WARM_FROM` postings, most frequent first (the ones a
        search pays most for), up to half the budget. The work pauses every `STRIDE` postings
        (about 0.4 ms) and stops there once `seconds` have passed or `stop()` is true.
        """
        deadline = time.perf_counter() + seconds
        if self._warming is None:
            self._warming = self._warm_steps()
        for _ in self._warming:
            if time.perf_counter() >= deadline or (stop is not None and stop()):
                return True
        return False

    def _warm_steps(self) -> Iterator[None]:
        from whoosh import query

        counts: dict[bytes, int] = {}
        for subsearcher, _ in self.searcher.leaf_searchers():
            for n, (text, info) in enumerate(subsearcher.reader().iter_field(TEXT_FIELD), 1):
                counts[text] = counts.get(text, 0) + info.doc_frequency()
                if n % (STRIDE // 4) == 0:  # a word's entry costs a few postings' walk
                    yield
        share = self.budget // 2
        for text, count in sorted(counts.items(), key=lambda item: -item[1]):
            if count < WARM_FROM or self._held + count > share:
                return
            word = text.decode("utf-8")  # as a parsed query holds it (the lexicon gives bytes)
            if (TEXT_FIELD, word) not in self._words:
                yield from self._walk(query.Term(TEXT_FIELD, word))

    def _allowed(self, allow: Any) -> frozenset[int]:
        return _kept(self._filters, allow, lambda: frozenset(self.searcher.docs_for_query(allow)), FILTERS)


def hidden_docs(
    searcher: Any, include_superseded: bool, include_expired: bool, now: datetime
) -> tuple[set[int], datetime]:
    """The superseded and expired documents at `now` (unless included), and until when that holds."""
    from whoosh import query

    parts: list[Any] = [] if include_superseded else [query.Term("status", "superseded")]
    until = now + timedelta(days=1)
    if not include_expired:
        parts.append(query.NumericRange("expires", None, now.timestamp()))
        soon = query.NumericRange("expires", now.timestamp(), until.timestamp(), startexcl=True)
        for docnum in searcher.docs_for_query(soon):
            expires = stored_memory(searcher, docnum).expires_at
            if expires is not None and expires > now:
                until = min(until, expires)
    return set(searcher.docs_for_query(query.Or(parts)) if parts else ()), until


@dataclass(frozen=True)
class SegmentHides:
    """What one segment's documents hide, whatever the time: the superseded ones, and the expiring
    ones in order of their `expires` term (Whoosh's sortable bytes of the number, so that comparing
    terms is exactly its NumericRange). Found with the deletions of `deleted` documents (a segment's
    deletions only grow): it holds for a reader of the segment with at least as many."""

    superseded: frozenset[int]
    expiry_terms: list[bytes]  # sorted, one per (term, document)
    expiring: array  # the local document number of each of `expiry_terms`
    deleted: int

    @property
    def size(self) -> int:
        return len(self.superseded) + 2 * len(self.expiring)


class SegmentMasks:
    """The `SegmentHides` of the segments searchers met, by segment id, kept across searchers (the
    least recently used dropped first past `most` document numbers), and their words' `postings`.
    Thread-safe."""

    def __init__(self, most: int = SEGMENT_DOCS, postings: int = SEGMENT_POSTINGS) -> None:
        self.most = most
        self.postings = SegmentPostings(postings)  # the words' postings of the same segments
        self.memories = SegmentMemories()  # the memories of their documents
        self.queries = ParsedQueries()  # and the queries parsed for searchers of any of them
        self._kept: OrderedDict[SegmentName, SegmentHides] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def hidden(
        self,
        searcher: Any,
        include_superseded: bool,
        include_expired: bool,
        now: datetime,
        name_of: Callable[[Any], SegmentName | None] | None = None,
    ) -> tuple[set[int], datetime]:
        """What `hidden_docs` gives (the same set, and until when it holds), from each segment's kept
        `SegmentHides` (found now for the segments never met). `name_of`: `segment_name`, or a
        searcher's own copy of it that reads each segment's name once."""
        until = now + timedelta(days=1)
        if include_superseded and include_expired:
            return set(), until
        field = searcher.schema["expires"]
        cut, last = field.to_bytes(now.timestamp()), field.to_bytes(until.timestamp())
        docs: set[int] = set()
        soonest: tuple[bytes, Any, int] | None = None  # (term, reader, local docnum) of the next to expire
        for subsearcher, offset in searcher.leaf_searchers():
            reader = subsearcher.reader()
            segment = reader.segment()
            if segment is None:  # not a segment of a Whoosh index: found as the plain path does
                return hidden_docs(searcher, include_superseded, include_expired, now)
            name = (name_of or segment_name)(reader)
            if name is None:  # an empty segment: nothing to hide in it
                continue
            hides = self._of(subsearcher, name, segment.deleted_count())
            local: set[int] = set() if include_superseded else set(hides.superseded)
            if not include_expired:
                end = bisect_right(hides.expiry_terms, cut)
                local.update(hides.expiring[:end])
                for n in range(end, len(hides.expiring)):
                    term = hides.expiry_terms[n]
                    if term > last or (soonest is not None and term >= soonest[0]):
                        break
                    if not reader.is_deleted(hides.expiring[n]):
                        soonest = (term, reader, hides.expiring[n])
                        break
            if segment.deleted_count():
                local.difference_update(segment.deleted_docs())
            docs.update(docnum + offset for docnum in local)
        if soonest is not None:  # the memory's own date, as hidden_docs takes it
            expires = _memory_of(soonest[1], soonest[2]).expires_at
            if expires is not None and expires > now:
                until = min(until, expires)
        return docs, until

    def _of(self, subsearcher: Any, key: SegmentName, deleted: int) -> SegmentHides:
        """The kept `SegmentHides` of a segment, found now if none holds for its `deleted` count."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found.deleted <= deleted:
                self._kept.move_to_end(key)
                return found
        found = segment_hides(subsearcher, deleted)
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is not None:
                self._held -= kept.size
            self._kept[key] = found
            self._held += found.size
            while self._held > self.most and len(self._kept) > 1:
                self._held -= self._kept.popitem(last=False)[1].size
        return found


@dataclass(frozen=True)
class WordPostings:
    """One word's postings in one segment, as a walk decoded them from Whoosh's matcher: each live
    document's local number and the code of its (weight, field length) pair, an index into `pairs`
    (a word has few distinct ones: weights are counts, lengths one of 256 byte-coded values). Decoded
    with `deleted` documents deleted (the matcher leaves them out): holds for a reader of the segment
    with at least as many (a segment's deletions only grow)."""

    docs: array  # "q": local document numbers, ascending
    codes: array  # "I": the index in `pairs` of each document's (weight, length)
    pairs: list[tuple[float, int]]
    deleted: int

    @property
    def size(self) -> int:
        return len(self.docs) + len(self.pairs) + WORD_ENTRY

    def scored(
        self,
        figures: tuple[float, float, float, float],
        offset: int,
        deleted: frozenset[int],
        docnums: array,
        scores: array,
    ) -> None:
        """Append the (docnum, score) pairs of these postings with a searcher's BM25F `figures` (idf,
        avgfl, B, K1), the segment at `offset`, less the `deleted` documents: `bm25` of each document's
        own weight and length, the very call and arguments of Whoosh's BM25FScorer, so the same floats."""
        from whoosh.scoring import bm25

        idf, avgfl, b, k1 = figures
        table = [bm25(idf, weight, length, avgfl, b, k1) for weight, length in self.pairs]
        docs: Any = self.docs
        codes: Any = self.codes
        if len(deleted) > self.deleted:  # deleted since they were decoded
            live = [docnum not in deleted for docnum in docs]
            docs, codes = compress(docs, live), compress(codes, live)
        docnums.extend(map(offset.__add__, docs) if offset else docs)
        scores.extend(map(table.__getitem__, codes))


class SegmentPostings:
    """The `WordPostings` of the words walked in each segment, and the field lengths of its documents,
    kept across searchers by segment (`segment_name`: a segment never changes once written; a merge,
    an optimize or a new index writes new segments). The least
    recently used are dropped first past `most` (a posting or a length counts 1, a word of a segment
    `WORD_ENTRY`). Thread-safe; `decoded` counts the (segment, word) postings decoded (or found
    absent) from the index."""

    def __init__(self, most: int = SEGMENT_POSTINGS) -> None:
        self.most = most
        self._kept: OrderedDict[tuple[Any, ...], WordPostings | array] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.decoded = 0

    def get(self, key: tuple[SegmentName, str, str], deleted: int) -> WordPostings | None:
        """The kept postings of (segment (`segment_name`), field, word), if they hold for a reader of
        the segment with `deleted` documents deleted."""
        with self._lock:
            found = self._kept.get(key)
            if isinstance(found, WordPostings) and found.deleted <= deleted:
                self._kept.move_to_end(key)
                return found
        return None

    def put(self, key: tuple[SegmentName, str, str], found: WordPostings) -> None:
        """Keep a word's postings just decoded (in place of any kept for the segment)."""
        with self._lock:
            self.decoded += 1
            self._keep(key, found, found.size)

    def lengths(self, key: tuple[SegmentName, str], count: int) -> array:
        """The field lengths of a segment's `count` documents found so far (-1: not yet), by (segment
        (`segment_name`), field): the array is filled in as walks look lengths up."""
        with self._lock:
            found = self._kept.get(key)
            if isinstance(found, array):
                self._kept.move_to_end(key)
                return found
            made = array("q", [-1]) * count
            self._keep(key, made, count)
            return made

    def _keep(self, key: tuple[Any, ...], value: WordPostings | array, size: int) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._held -= _size(old)
        self._kept[key] = value
        self._held += size
        while self._held > self.most and len(self._kept) > 1:
            self._held -= _size(self._kept.popitem(last=False)[1])


def _size(value: WordPostings | array) -> int:
    return value.size if isinstance(value, WordPostings) else len(value)


def segment_postings(
    matcher: Any, length_of: Callable[[int], Any], lengths: array, deleted: int
) -> Generator[None, None, WordPostings]:
    """Decode a word's postings in one segment from its BM25F `matcher`, pausing (yielding) every
    `STRIDE` postings: each document's weight, and its field length (`length_of`, Whoosh's scorer's
    own, read once per document into the segment's `lengths`)."""
    docs, codes = array("q"), array("I")
    pairs: list[tuple[float, int]] = []
    coded: dict[tuple[float, int], int] = {}
    while matcher.is_active():
        for _ in range(STRIDE):
            docnum, weight = matcher.id(), matcher.weight()
            length = lengths[docnum]
            if length < 0:
                length = length_of(docnum)
                if type(length) is int and length >= 0:
                    lengths[docnum] = length
            pair = (weight, length)
            code = coded.get(pair)
            if code is None:
                code = coded[pair] = len(pairs)
                pairs.append(pair)
            docs.append(docnum)
            codes.append(code)
            matcher.next()
            if not matcher.is_active():
                break
        yield
    return WordPostings(docs, codes, pairs, deleted)


#: A segment as everything kept across searchers names it (`SegmentMasks`, `SegmentPostings`,
#: `SegmentMemories`): its id, its document count, and the stored rows of its first and last documents.
SegmentName = tuple[str, int, bytes, bytes]


def segment_name(reader: Any) -> SegmentName | None:
    """The name of the one segment `reader` reads (None: not a segment of a Whoosh index, or empty).

    Its random id alone would do, but Whoosh draws it from the global `random`: a process that seeds
    it again (Hypothesis does, for each example) makes segments of the same ids in other indexes.
    Their first or last documents' rows then differ: each row holds its memory's id, from `os.urandom`.
    Read once per searcher and segment (two stored documents, about 20 microseconds)."""
    segment = reader.segment() if hasattr(reader, "segment") else None
    count = reader.doc_count_all()
    if segment is None or count == 0:
        return None
    first, last = reader.stored_fields(0).get("doc"), reader.stored_fields(count - 1).get("doc")
    if not isinstance(first, bytes) or not isinstance(last, bytes):
        return None
    return (segment.segment_id(), count, first, last)


class _Kept:
    """Values made once by key and kept, the least recently used dropped first past `most`; a `make`
    that raises keeps nothing. Thread-safe; `made` counts the values made."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._kept: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.made = 0

    def _take(self, key: Any, make: Callable[[], Any]) -> Any:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        found = make()
        with self._lock:
            self.made += 1
            self._kept[key] = found
            while len(self._kept) > self.most:
                self._kept.popitem(last=False)
        return found


class SegmentMemories(_Kept):
    """The memories of segments' documents, decoded once per process, by segment (`segment_name`) and
    local document number: a segment's documents never change (an update deletes a document in its
    segment and adds one to a new segment; a merge, an optimize or a new index writes new segments).
    The least recently used are dropped first past `most`. Thread-safe; `decoded` counts the memories
    decoded from the index."""

    def __init__(self, most: int = SEGMENT_MEMORIES) -> None:
        super().__init__(most)

    @property
    def decoded(self) -> int:
        return self.made

    def memory(self, segment: SegmentName, docnum: int, decode: Callable[[], Memory]) -> Memory:
        """The memory of the segment's document `docnum`, `decode()`d unless kept."""
        found: Memory = self._take((segment, docnum), decode)
        return found


class ParsedQueries(_Kept):
    """Parsed queries kept across searchers, by schema and text (the least recently used dropped first
    past `most`); a query that cannot be parsed is never kept. Thread-safe; `parsed` counts the parses."""

    def __init__(self, most: int = SHARED_QUERIES) -> None:
        super().__init__(most)
        self._schemas: dict[bytes, int] = {}

    @property
    def parsed(self) -> int:
        return self.made

    def schema(self, schema: Any) -> int:
        """A number for the schema, the same for every schema of the same pickle: what the query
        parser reads of a schema (its fields' names, types, analyzers and options) is all in it."""
        pickled = pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            return self._schemas.setdefault(pickled, len(self._schemas))

    def get(self, schema: int, text: str, parse: Callable[[], Any]) -> Any:
        """The query `parse()` makes of `text` for the schema numbered `schema`, parsed once.

        Raises:
            InvalidInput: the query cannot be parsed (never kept).
        """
        return self._take((schema, text), parse)


#: The `SegmentMasks` of the process, for every index it opens: a segment's documents never change, so
#: a segment's name (`segment_name`) names the same documents in any folder.
SEGMENTS = SegmentMasks()


def segment_hides(subsearcher: Any, deleted: int) -> SegmentHides:
    """The `SegmentHides` of the one segment `subsearcher` reads, which has `deleted` deleted documents."""
    from whoosh import query

    reader = subsearcher.reader()
    superseded = frozenset(query.Term("status", "superseded").docs(subsearcher))
    pairs: list[tuple[bytes, int]] = []
    for term in subsearcher.schema["expires"].sortable_terms(reader, "expires"):
        pairs.extend((term, docnum) for docnum in reader.postings("expires", term).all_ids())
    pairs.sort()
    return SegmentHides(superseded, [term for term, _ in pairs], array("q", [d for _, d in pairs]), deleted)


def _memory_of(reader: Any, docnum: int) -> Memory:
    stored = reader.stored_fields(docnum)["doc"]
    with decoding("a memory stored in the full-text index"):
        return row_decoder()(marshal.loads(stored))


def stored_memory(searcher: Any, docnum: int) -> Memory:
    """The memory a Whoosh document stores (its `doc` blob)."""
    stored = searcher.stored_fields(docnum)["doc"]
    with decoding("a memory stored in the full-text index"):
        return row_decoder()(marshal.loads(stored))


def _kept(kept: dict[Any, Any], key: Any, make: Callable[[], Any], most: int = KEPT) -> Any:
    """`kept[key]`, made once; a full dict starts afresh."""
    found = kept.get(key)
    if found is None:
        if len(kept) >= most:
            kept.clear()
        found = kept[key] = make()
    return found


def _bm25f(matcher: Any) -> Any:
    """The BM25F scorer of a term's matcher (wrapped when its segment has deletions), else None."""
    from whoosh.scoring import BM25FScorer

    scorer = getattr(matcher, "scorer", None) or getattr(getattr(matcher, "child", None), "scorer", None)
    return scorer if type(scorer) is BM25FScorer else None


def plain_terms(parsed: Any) -> list[Any] | None:
    """The terms of a query that is one term or a plain OR of terms (no boost, scale or minimum), else None."""
    from whoosh import query

    subs = [parsed]
    if type(parsed) is query.Or:
        if parsed.boost != 1.0 or parsed.scale or parsed.minmatch:
            return None
        subs = list(parsed.subqueries)
    if all(type(sub) is query.Term and sub.boost == 1.0 and not sub.minquality for sub in subs):
        return subs
    return None
