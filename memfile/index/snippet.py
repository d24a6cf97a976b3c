"""Search snippets: up to two passages around the matched words, matches in **bold** (Whoosh's highlighter)."""

from __future__ import annotations

from typing import Any

from whoosh import highlight
from whoosh.analysis import Token

from ..text import matching
from .persisted import STOP_WORDS, stem_word


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
            matches = list(last.matches) + [token for token in fragment.matches if token.startchar not in seen]
            joined[-1] = highlight.Fragment(last.text, matches, last.startchar, max(last.endchar, fragment.endchar))
        else:
            joined.append(fragment)
    return joined
