"""What is pickled into every index: the analyzer and the schema.

Whoosh stores the schema, with these classes' import paths, inside the index's
TOC. So their paths are API: `PICKLED` lists them, a test pins their module
(`memfile.index.persisted`), and any change to what they produce or where they
live needs a new `SCHEMA_VERSION` (memfile.index.store), so old indexes are
rebuilt rather than unpickled (tests/test_index_package.py fingerprints both).
Imported only when Whoosh is needed: `recall` and `--help` never load Whoosh.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

from whoosh.analysis import STOP_WORDS as WHOOSH_STOP_WORDS
from whoosh.analysis import Token, Tokenizer
from whoosh.fields import ID, KEYWORD, NUMERIC, STORED, TEXT, Schema
from whoosh.lang.porter import stem

from ..text import fold, normalize, tokens


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
    text = TEXT(analyzer=cast(Any, MemfileAnalyzer()), phrase=True, multitoken_query="phrase")
    return Schema(
        path=ID(stored=True, unique=True),
        category=ID(),
        priority=ID(),
        source=ID(),
        verified=ID(),
        status=ID(),
        tags=KEYWORD(commas=True, lowercase=True, scorable=True),
        text=text,
        # Whoosh indexes a number as one term per `shift_step` bits (its range queries join them): 4 terms,
        # not 16, and the field has 70 % fewer distinct terms (each costs a block of postings)
        expires=NUMERIC(float, shift_step=16),
        doc=STORED,
    )


#: The classes an index's TOC names by import path (pickled with the schema): moving or renaming one
#: breaks every existing index unless SCHEMA_VERSION changes in the same commit.
PICKLED = (MemfileAnalyzer,)
