"""The search analyzer and schema (the Whoosh classes pickled into the index), and snippets.

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
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3Codec, W3PerDocReader, _lenfield
from whoosh.analysis import STOP_WORDS as WHOOSH_STOP_WORDS
from whoosh.analysis import IDTokenizer, Token, Tokenizer
from whoosh.fields import ID, KEYWORD, NUMERIC, STORED, TEXT, Schema
from whoosh.formats import Existence, Positions
from whoosh.lang.porter import stem
from whoosh.util.numeric import byte_to_length

from .text import fold, matching, normalize, token_texts, tokens


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

    def __call__(self, value: str, positions: bool = False, chars: bool = False, keeporiginal: bool = False,
                 removestops: bool = True, start_pos: int = 0, start_char: int = 0, tokenize: bool = True,
                 mode: str = "", **kwargs: Any):
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        token.verbatim = not tokenize
        pieces = tokens(normalize(value)) if tokenize else [(fold(normalize(value)), 0, len(value))]
        pos = None
        for index, (text, start, end) in enumerate(pieces):
            stopped = text in STOP_WORDS
            if stopped and removestops:
                continue
            if keeporiginal:
                token.original = text
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
        if type(value) is not str or type(analyzer) is not MemfileAnalyzer or kwargs.keys() - {"mode"}:
            return super().word_values(value, analyzer, **kwargs)
        places: dict[str, list[int]] = {}
        known = _INDEX_TERMS
        pos = None
        for index, word in enumerate(token_texts(normalize(value))):
            term = known.get(word)
            if term is None:
                term = _index_term(word)
            if term is False:  # a stop word
                continue
            pos = index if pos is None else pos + 1  # as MemfileAnalyzer numbers them
            found = places.get(term)
            if found is None:
                places[term] = [pos]
            else:
                found.append(pos)
        boost, one = self.field_boost, _one_place  # a term found once (most of them): its encoding made once per place
        return [(term, 1, boost, one(found[0])) if len(found) == 1
                else (term, len(found), len(found) * boost, self.encode(found)) for term, found in places.items()]


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
        if type(value) is not str or type(analyzer) is not IDTokenizer or kwargs.keys() - {"mode"}:
            return super().word_values(value, analyzer, **kwargs)
        return [(value, 1, self.field_boost, b"")]


@lru_cache(maxsize=20_000)
def _one_place(pos: int) -> bytes:
    return Positions().encode([pos])


class WriteCodec(W3Codec):
    """Whoosh's codec for writing segments: a new segment's postings look up each field's
    lengths in a list read once, not on disk once per posting (a tenth of the indexing processes' CPU).

    Whoosh reads the length of every posting's document as it writes the postings
    (for the blocks' length bounds), through a seek and a read each. The files
    written are the same, byte for byte (tested), and a segment names Whoosh's own
    codec, so an index never refers to this class.
    """

    def new_segment(self, storage: Any, indexname: str) -> Any:
        return W3Codec(self._blocklimit, self._compression, self._inlinelimit).new_segment(storage, indexname)

    def per_document_reader(self, storage: Any, segment: Any) -> Any:
        return _LengthsAtOnce(storage, segment)


class _LengthsAtOnce(W3PerDocReader):
    def doc_field_length_reader(self, fieldname: str, default: int = 0) -> Any:
        reader = self._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN)
        if reader is None:
            return super().doc_field_length_reader(fieldname, default)
        lengths = [None] + [byte_to_length(code) for code in range(1, 256)]  # a zero byte reads as None, as in Whoosh
        return [lengths[code] for code in reader.load()].__getitem__


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
    """One full-text field, `text`: content, then the key twice and the tags twice (see index._document).

    Repeating a field's words is the classic way to weight it in BM25F (term
    frequencies are summed before saturation, Robertson et al. 2004), and one
    field costs a query half the posting lists that three would.
    """
    analyzer = MemfileAnalyzer()
    text = TEXT(analyzer=analyzer, phrase=True, multitoken_query="phrase")
    text.format = IndexPositions(field_boost=text.format.field_boost)
    return Schema(
        path=_id(stored=True, unique=True),
        category=_id(), priority=_id(), source=_id(), verified=_id(), status=_id(),
        tags=KEYWORD(commas=True, lowercase=True, scorable=True),
        text=text,
        # Whoosh indexes a number as one term per `shift_step` bits (its range queries join them): 4 terms,
        # not 16, and the field has 70 % fewer distinct terms (each costs a block of postings)
        expires=NUMERIC(float, shift_step=16),
        doc=STORED,
    )


def _id(**options: Any) -> ID:
    field = ID(**options)
    field.format = IndexExistence(field_boost=field.format.field_boost)
    return field


class Marks(highlight.Formatter):
    """Highlights matched words as **word**."""

    between = " … "

    def format_token(self, text: str, token: Any, replace: bool = False) -> str:
        return "**" + highlight.get_text(text, token, replace) + "**"


class Passages(highlight.PinpointFragmenter):
    """Whoosh's PinpointFragmenter, trimming only a word a passage cuts in two.

    Whoosh trims to the first and last space of every passage, and so drops a
    whole word at the start or end of the text ("We **deploy** on Monday"
    became "**deploy** on").
    """

    @staticmethod
    def _autotrim(fragment: highlight.Fragment) -> None:
        text, start, end = fragment.text, fragment.startchar, fragment.endchar
        if start > 0 and not text[start - 1].isspace() and (space := text.find(" ", start, end)) > 0:
            start = space + 1
        if end < len(text) and not text[end].isspace() and (space := text.rfind(" ", start, end)) > 0:
            end = space
        if fragment.matches:
            start, end = min(start, fragment.matches[0].startchar), max(end, fragment.matches[-1].endchar)
        fragment.startchar, fragment.endchar = start, end


_FRAGMENTER = Passages(maxchars=160, surround=40, autotrim=True)
_SCORER = highlight.BasicFragmentScorer()


def snippet(text: str, words: frozenset[str]) -> str:
    """Up to two passages of NFC `text` around the `words` searched for (index terms), matches
    in **bold**; "" when none is there.

    Passages are cut around the matched words alone (Whoosh's PinpointFragmenter), so
    only those become Token objects. Running the whole text through the analyzer and a
    context fragmenter instead cost more than scoring the search itself.
    """
    def term(word: str) -> str:
        return word if word in STOP_WORDS else stem_word(word)

    matched: list[Token] = []
    for word, start, end in matching(text, lambda word: term(word) in words):
        if matched and start <= matched[-1].endchar:  # overlapping bigrams: one highlight
            matched[-1].endchar = max(matched[-1].endchar, end)
        else:
            matched.append(Token(text=term(word), startchar=start, endchar=end, boost=1.0, matched=True))
    if not matched:
        return ""
    fragments = _FRAGMENTER.fragment_matches(text, matched)
    return Marks().format(_merged(highlight.top_fragments(fragments, 2, _SCORER, highlight.FIRST)))


def _merged(fragments: list[highlight.Fragment]) -> list[highlight.Fragment]:
    """Passages in text order, those that overlap or touch joined into one: two passages around
    nearby matches share text, which would otherwise be shown twice."""
    joined: list[highlight.Fragment] = []
    for fragment in sorted(fragments, key=lambda f: f.startchar):
        last = joined[-1] if joined else None
        if last is not None and fragment.startchar <= last.endchar:
            seen = {token.startchar for token in last.matches}
            matches = last.matches + [token for token in fragment.matches if token.startchar not in seen]
            joined[-1] = highlight.Fragment(last.text, matches, last.startchar, max(last.endchar, fragment.endchar))
        else:
            joined.append(fragment)
    return joined


