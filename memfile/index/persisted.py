"""What is pickled into every index: the analyzer, the field formats and the schema.

Whoosh stores the schema, with these classes' import paths, inside the index's
TOC. So their paths are API: `PICKLED` lists them, a test pins their module
(`memfile.index.persisted`), and any change to what they produce or where they
live needs a new `SCHEMA_VERSION` (memfile.index.store), so old indexes are
rebuilt rather than unpickled (tests/index/test_index_package.py fingerprints both).
Imported only when Whoosh is needed: `recall` and `--help` never load Whoosh.
"""

from __future__ import annotations

from functools import lru_cache
from math import inf
from typing import Any, cast

from whoosh.analysis import STOP_WORDS as WHOOSH_STOP_WORDS
from whoosh.analysis import IDTokenizer, Token, Tokenizer
from whoosh.columns import NumericColumn
from whoosh.fields import COLUMN, ID, KEYWORD, STORED, TEXT, Schema
from whoosh.formats import Existence, Positions
from whoosh.lang.porter import stem

from ..config import plain
from ..text import fold, normalize, token_texts, tokens


class MemfileAnalyzer(Tokenizer):
    """Words, stop words dropped, English stems: the whole analyzer in one pass (a chain of
    tokenizer and filters costs a generator per stage and token). Pickled into the index, keep its path.

    Tokens are folded words and no-space-script bigrams (memfile.text). Untokenized
    text is a wildcard or prefix pattern: folded, never stemmed. Positions count
    only the words kept, like Whoosh's StopFilter; with `removestops=False` stop
    words come through marked `stopped`.
    """

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ):
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        token.verbatim = not tokenize  # type: ignore[attr-defined]  # Whoosh's Token takes any attribute
        pieces = tokens(normalize(value)) if tokenize else [(fold(normalize(value)), 0, len(value))]
        pos = None
        for index, (text, start, end) in enumerate(pieces):
            stopped = text in STOP_WORDS
            if stopped and removestops:
                continue
            if keeporiginal:
                token.original = text  # type: ignore[attr-defined]
            token.text = text if stopped or not tokenize else stem_word(text)
            token.boost = 1.0
            token.stopped = stopped
            if positions:
                if stopped:
                    token.pos = start_pos + index
                else:
                    pos = start_pos + index if pos is None else pos + 1
                    token.pos = pos
            if chars:
                token.startchar, token.endchar = start_char + start, start_char + end
            yield token


class IndexPositions(Positions):
    """Whoosh's Positions format, with `MemfileAnalyzer` run inline when a text is indexed.

    Whoosh's way sends every word through a Token object and two generators; this
    one counts the same terms at the same positions from plain strings (the same
    postings, byte for byte, tested), about a seventh less CPU for a bulk load.
    Anything else (a list of words, other options, another analyzer) goes
    Whoosh's way. Pickled into the index, keep its path.
    """

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        if (
            type(value) is not str
            or type(analyzer) is not MemfileAnalyzer
            or kwargs.keys() - {"mode"}
            or plain("formats")
        ):
            return super().word_values(value, analyzer, **kwargs)
        places: dict[str, list[int]] = {}
        known = _INDEX_TERMS
        pos = None
        for index, word in enumerate(token_texts(normalize(value))):
            term = known.get(word)
            if term is None:
                term = _index_term(word)
            if not isinstance(term, str):  # False: a stop word
                continue
            pos = index if pos is None else pos + 1  # as MemfileAnalyzer numbers them
            found = places.get(term)
            if found is None:
                places[term] = [pos]
            else:
                found.append(pos)
        boost, one = self.field_boost, _one_place  # a term found once (most of them): its encoding made once per place
        return [
            (term, 1, boost, one(found[0]))
            if len(found) == 1
            else (term, len(found), len(found) * boost, self.encode(found))
            for term, found in places.items()
        ]


#: word -> its term in the index (False for a stop word), for the first 50,000 words seen.
_INDEX_TERMS: dict[str, str | bool] = {}


def _index_term(word: str) -> str | bool:
    term = False if word in STOP_WORDS else stem_word(word)
    if len(_INDEX_TERMS) < 50_000:
        _INDEX_TERMS[word] = term
    return term


class IndexExistence(Existence):
    """Whoosh's Existence format for the ID fields, with a plain ID's one term (the value itself) made
    without a Token and two generators (the same postings, tested). Pickled into the index, keep its path."""

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        if type(value) is not str or type(analyzer) is not IDTokenizer or kwargs.keys() - {"mode"} or plain("formats"):
            return super().word_values(value, analyzer, **kwargs)
        return [(value, 1, self.field_boost, b"")]


@lru_cache(maxsize=20_000)
def _one_place(pos: int) -> bytes:
    return Positions().encode([pos])


stem_word = lru_cache(maxsize=50_000)(stem)

#: Whoosh's English stop words plus the question and pronoun words people type into a search box.
STOP_WORDS = frozenset(WHOOSH_STOP_WORDS) | {
    "what",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "why",
    "how",
    "did",
    "does",
    "do",
    "done",
    "i",
    "me",
    "my",
    "mine",
    "we",
    "us",
    "our",
    "you",
    "your",
    "he",
    "him",
    "his",
    "she",
    "her",
    "hers",
    "they",
    "them",
    "their",
    "its",
    "was",
    "were",
    "been",
    "being",
    "am",
    "has",
    "had",
    "having",
    "about",
    "there",
    "here",
    "than",
    "then",
    "so",
    "some",
    "any",
    "all",
    "into",
    "over",
    "just",
    "also",
    "would",
    "should",
    "could",
    "s",
    "t",
    "don",
    "didn",
    "doesn",
}


def schema() -> Schema:
    """One full-text field, `text`: content, then the key twice and the tags twice (see index._document).

    Repeating a field's words is the classic way to weight it in BM25F (term
    frequencies are summed before saturation, Robertson et al. 2004), and one
    field costs a query half the posting lists that three would.
    """
    analyzer = MemfileAnalyzer()
    text = TEXT(analyzer=cast(Any, analyzer), phrase=True, multitoken_query="phrase")
    text.format = IndexPositions(field_boost=_boost(text))
    return Schema(
        path=_id(stored=True, unique=True),
        category=_id(),
        priority=_id(),
        source=_id(),
        verified=_id(),
        status=_id(),
        tags=KEYWORD(commas=True, lowercase=True, scorable=True),
        text=text,
        # Whoosh indexes a number as one term per `shift_step` bits (its range queries join them): 4 terms,
        # not 16, and the field has 70 % fewer distinct terms (each costs a block of postings)
        # every memory's expiry as a column (inf: never), read whole to find the expired: no postings
        expires=COLUMN(NumericColumn("d", default=inf)),
        doc=STORED,
    )


def _id(**options: Any) -> ID:
    field = ID(**options)
    field.format = IndexExistence(field_boost=_boost(field))
    return field


def _boost(field: Any) -> float:
    """The field boost of the format Whoosh gave `field` (kept when memfile's own format replaces it)."""
    return float(field.format.field_boost)


#: The classes an index's TOC names by import path (pickled with the schema): moving or renaming one
#: breaks every existing index unless SCHEMA_VERSION changes in the same commit.
PICKLED = (MemfileAnalyzer, IndexPositions, IndexExistence)
