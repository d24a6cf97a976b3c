"""What a person types into search, as a Whoosh query, and how matches are scored (whoosh is imported on first use).

`parse_query` is the one way from typed text to a query: every search and
every recall with a query passes through it (Vault.search, Vault.recall and
friends, in the index's `ScoreCache.parsed`), so its size cap holds on every face.
"""

from __future__ import annotations

import functools
from typing import Any

from ..config import plain
from ..errors import InvalidInput

#: The longest query, in characters. A question or a task description fits many times over; a pasted
#: document does not, and Whoosh's parser and the phrase of a long no-space run grow with its length.
MAX_QUERY_CHARS = 4096


def check_query(text: object) -> str:
    """`text` if it can be a query: a string of whole characters, at most `MAX_QUERY_CHARS` long.

    Cheap (no Whoosh), so a face or a Vault method may call it before any
    other work; `parse_query` calls it first too.

    Raises:
        InvalidInput: not a string, too long, or holding a lone surrogate (half of a character).
    """
    if not isinstance(text, str):
        raise InvalidInput("query", text, "text: the words to search for")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(
            "query",
            _shown(text),
            f"at most {MAX_QUERY_CHARS:,} characters: the words that matter, not a whole text",
            reason=f"{len(text):,} characters",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            "query",
            _shown(text),
            "whole characters (send both halves of a surrogate pair together)",
            reason=f"a lone surrogate {text[exc.start]!r} at character {exc.start}",
        ) from None
    return text


def _shown(text: str) -> str:
    """The start of a long query, to name it in a message without repeating all of it."""
    return text if len(text) <= 60 else text[:60] + "…"


def parse_query(text: str, schema: Any) -> Any:
    """The Whoosh query for what a person typed.

    Words are OR-grouped (more matching words rank higher) and stop words
    dropped; `"phrases"`, AND/OR/NOT, `prefix*`, `tag:x` and `category:x`
    work; `?` is punctuation, never a wildcard.

    Raises:
        InvalidInput: the query is empty, too long (`check_query`) or cannot be parsed.
    """
    check_query(text)
    from whoosh import qparser, query

    cleaned = text.replace("?", " ").strip()
    if not cleaned:
        raise InvalidInput("query", text, "words to search for")
    parser = qparser.QueryParser("text", schema, group=qparser.OrGroup.factory(0.9))
    # Whoosh tries its taggers at every character of a word; its `field:` pattern then reads on to the
    # word's end each time, which made a long word cost the square of its length (20 s for 80,000
    # characters). Tried only where no word character comes before, it finds the same fields in linear
    # time: in a run of word characters, `\w+:` matches at the run's start or nowhere in it. (The one
    # difference: after a phrase's slop, `"a b"~2tag:x`, `tag:x` is read as words.)
    parser.replace_plugin(qparser.FieldsPlugin(expr=r"(?P<text>(?<!\w)\w+|[*]):"))
    # Ranges (`[a TO b]`) are no syntax memfile offers, and Whoosh's pattern for them backtracks: 15 s
    # for 4,096 characters of `[ TO `. Without it, brackets are punctuation.
    parser.remove_plugin_class(qparser.RangePlugin)
    parser.add_plugin(qparser.FieldAliasPlugin({"tags": ["tag"]}))
    syntax = 'words, "phrases", AND/OR/NOT, prefix*, tag:NAME, category:NAME'
    try:
        parsed = parser.parse(cleaned).accept(_prefix_or_stem).accept(_require_filters_and_nots)
    except Exception as exc:  # noqa: BLE001 - the parser's own failure is the user's bad query
        raise InvalidInput("query", text, syntax, reason=str(exc)) from None
    parsed = parsed.accept(_filter_value)
    errors = [q for q in parsed.leaves() if type(q).__name__ == "ErrorQuery"]
    if errors:
        raise InvalidInput("query", text, syntax, reason=str(getattr(errors[0], "message", "cannot be parsed")))
    if parsed is query.NullQuery or not list(parsed.leaves()):
        raise InvalidInput("query", text, "words to search for (stop words such as the, a, is and what are ignored)")
    return parsed


#: Fields a person uses as filters: `apollo category:fact` means apollo, in the fact category.
_FILTER_FIELDS = {"category", "tags", "priority", "source", "verified"}


def _filter_value(node: Any) -> Any:
    """`category:FACT` as `category:fact` (the values are stored lowercase), and a value no memory can
    have refused by name (`category:bogus` found nothing, silently)."""
    from whoosh import query

    from ..model import Category, Priority, Source

    allowed = {
        "category": [str(c) for c in Category],
        "priority": [str(p) for p in Priority],
        "source": [str(s) for s in Source],
        "verified": ["true", "false"],
    }
    if isinstance(node, query.Term) and node.fieldname in allowed:
        value = str(node.text).lower()
        if value not in allowed[node.fieldname]:
            raise InvalidInput(f"query filter {node.fieldname}:", node.text, allowed[node.fieldname])
        return query.Term(node.fieldname, value, boost=node.boost)
    return node


def _require_filters_and_nots(node: Any) -> Any:
    """In an OR group, make `field:value` filters required and `NOT x` exclude: `a b NOT c` = (a OR b) AND NOT c."""
    from whoosh import query

    if not isinstance(node, query.Or):
        return node
    nots = [child.query for child in node.subqueries if isinstance(child, query.Not)]
    filters = [
        child for child in node.subqueries if isinstance(child, query.Term) and child.fieldname in _FILTER_FIELDS
    ]
    words = [child for child in node.subqueries if not isinstance(child, query.Not) and child not in filters]
    if not nots and not filters:
        return node
    if not words and not filters:
        return node  # only negations: nothing positive to keep, let Whoosh say what NOT alone means
    required: list[Any] = [query.Or(words, boost=node.boost, scale=getattr(node, "scale", None))] if words else []
    positive = query.And(required + filters) if len(required + filters) > 1 else (required + filters)[0]
    return query.AndNot(positive, query.Or(nots)) if nots else positive


def _prefix_or_stem(node: Any) -> Any:
    """`deploy*` also as `deploi*`: the index holds stems, a prefix must reach them too."""
    from whoosh import query

    from .persisted import stem_word

    if isinstance(node, query.Prefix) and stem_word(node.text) != node.text:
        return query.Or([node, query.Prefix(node.fieldname, stem_word(node.text), boost=node.boost)])
    return node


#: BM25 parameters. Memories are short notes, so a long one is rarely long for nothing: less length
#: normalisation than the textbook b = 0.75 (tuned on LoCoMo conversations 0-4 only: b 0.75 -> 0.3
#: moved recall@10 from 0.633 to 0.645 and MRR from 0.486 to 0.504; k1 0.8-1.6 changed little).
BM25_B, BM25_K1 = 0.3, 1.2


def weighting(lengths: dict[str, dict[str, Any]] | None = None) -> Any:
    """BM25F with the parameters above (Whoosh builds a fresh scorer per searcher); with `lengths` (segment
    id -> field -> lengths, kept while the index lives) a scorer asks Whoosh a document's field length once:
    a segment never changes once written (the `lengths` trick, docs/internals.md)."""
    from whoosh import scoring

    if lengths is None or plain("lengths"):
        return scoring.BM25F(B=BM25_B, K1=BM25_K1)
    return _kept_lengths_model()(lengths, B=BM25_B, K1=BM25_K1)


@functools.cache
def _kept_lengths_model() -> type:
    """BM25F whose scorers keep the field lengths they read (`weighting`): Whoosh's documented `WeightingModel`
    API, its scorer's `dfl` (a document's field length) wrapped."""
    from array import array

    from whoosh import scoring

    class KeptLengths(scoring.BM25F):
        def __init__(self, lengths: dict[str, dict[str, Any]], **params: float) -> None:
            super().__init__(**params)
            self.lengths = lengths

        def scorer(self, searcher: Any, fieldname: str, text: str, qf: int = 1) -> Any:
            scorer = super().scorer(searcher, fieldname, text, qf)
            reader = searcher.reader()
            segment = reader.segment()
            if not isinstance(scorer, scoring.WeightLengthScorer) or segment is None:
                return scorer
            fields = self.lengths.setdefault(segment.segment_id(), {})
            known = fields.get(fieldname)
            if known is None:
                known = fields[fieldname] = array("l", [-1]) * reader.doc_count_all()
            read = reader.doc_field_length

            def dfl(docnum: int) -> int:
                length = known[docnum]
                if length < 0:
                    length = known[docnum] = read(docnum, fieldname, 1)
                return length

            scorer.dfl = dfl
            return scorer

    return KeptLengths
