"""The search analyzer and schema: the Whoosh classes that are pickled into the index.

Whoosh stores the analyzer inside the index, so these classes keep this
import path (`memfile.analysis`); changing what they produce means bumping
`SCHEMA_VERSION` in index.py so old indexes are rebuilt. Only index.py
imports this module, and only when it needs Whoosh: `recall` and `--help`
never load Whoosh.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from whoosh import highlight
from whoosh.analysis import STOP_WORDS as WHOOSH_STOP_WORDS
from whoosh.analysis import Filter, StopFilter, Token, Tokenizer
from whoosh.fields import ID, KEYWORD, NUMERIC, STORED, TEXT, Schema
from whoosh.lang.porter import stem

from .text import fold, normalize, tokens


class MemfileTokenizer(Tokenizer):
    """Folded words and no-space-script bigrams (see memfile.text); pickled into the index, keep its path."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __call__(self, value: str, positions: bool = False, chars: bool = False, keeporiginal: bool = False,
                 removestops: bool = True, start_pos: int = 0, start_char: int = 0, tokenize: bool = True,
                 mode: str = "", **kwargs: Any):
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        # Untokenized text is a wildcard or prefix pattern: folded, but never stemmed.
        token.verbatim = not tokenize
        pieces = tokens(normalize(value)) if tokenize else [(fold(normalize(value)), 0, len(value))]
        for pos, (text, start, end) in enumerate(pieces):
            token.text = text
            token.boost = 1.0
            token.stopped = False
            if keeporiginal:
                token.original = text
            if positions:
                token.pos = start_pos + pos
            if chars:
                token.startchar, token.endchar = start_char + start, start_char + end
            yield token


class MemfileStemFilter(Filter):
    """English stemming (`deploying` finds `deployed`), except for wildcard patterns; pickled, keep its path."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __call__(self, stream: Any) -> Any:
        for token in stream:
            if not token.verbatim:
                token.text = stem_word(token.text)
            yield token


stem_word = lru_cache(maxsize=50_000)(stem)

#: Whoosh's English stop words plus the question and pronoun words people type into a search box.
STOP_WORDS = frozenset(WHOOSH_STOP_WORDS) | {
    "what", "when", "where", "which", "who", "whom", "whose", "why", "how", "did", "does", "do", "done",
    "i", "me", "my", "mine", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "hers",
    "they", "them", "their", "its", "was", "were", "been", "being", "am", "has", "had", "having",
    "about", "there", "here", "than", "then", "so", "some", "any", "all", "into", "over", "just", "also",
    "would", "should", "could", "s", "t", "don", "didn", "doesn",
}


def schema() -> Schema:
    analyzer = MemfileTokenizer() | StopFilter(stoplist=STOP_WORDS, minsize=1) | MemfileStemFilter()
    return Schema(
        path=ID(stored=True, unique=True),
        mind=ID, category=ID, priority=ID, source=ID, verified=ID,
        key=TEXT(analyzer=analyzer, field_boost=2.0, phrase=True, multitoken_query="phrase"),
        tagtext=TEXT(analyzer=analyzer, field_boost=1.5, phrase=True, multitoken_query="phrase"),
        tags=KEYWORD(commas=True, lowercase=True, scorable=True),
        content=TEXT(analyzer=analyzer, stored=True, phrase=True, multitoken_query="phrase"),
        expires=NUMERIC(float), updated=NUMERIC(float, sortable=True),
        doc=STORED,
    )


class Marks(highlight.Formatter):
    """Highlights matched words as **word**."""

    between = " … "

    def format_token(self, text: str, token: Any, replace: bool = False) -> str:
        return "**" + highlight.get_text(text, token, replace) + "**"


