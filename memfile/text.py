"""Text normalisation for search: NFC, accent folding, and words vs. bigrams. Pure, standard library only.

Latin, Greek and Cyrillic words are lowercased and folded (`Nhà Hàng` and `nha hang` give the same
tokens, NFC or NFD); scripts written without spaces (Thai, Lao, Khmer, Myanmar, Chinese, Japanese kana)
become overlapping character bigrams, so any substring of two or more characters can be found.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterator


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(words, runs of no-space scripts), compiled on first use."""
    # Word characters plus the combining marks of the scripts below (Python's \w misses Thai vowel signs).
    words = re.compile(r"(?:[^\W_]|[\u0300-\u036f\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3099-\u309c])+")
    no_space = re.compile(
        r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
        r"\U00020000-\U0002fa1f]+"
    )
    return words, no_space


#: The words of ASCII text: what `_patterns()`'s words are there.
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+")

_SPECIAL_FOLDS = str.maketrans(
    {"đ": "d", "ø": "o", "ł": "l", "æ": "ae", "œ": "oe", "ß": "ss", "þ": "th", "ð": "d", "ı": "i", "ħ": "h"}
)


def normalize(text: str) -> str:
    """NFC, the form tokens' character offsets refer to."""
    return unicodedata.normalize("NFC", text)


def fold(word: str) -> str:
    """Lowercase and strip accents: `Phở` -> `pho`, `Đà` -> `da`, `Straße` -> `strasse`."""
    decomposed = unicodedata.normalize("NFD", word.lower().translate(_SPECIAL_FOLDS))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokens(text: str) -> Iterator[tuple[str, int, int]]:
    """(token, start, end) over NFC `text`: folded words, and bigrams of no-space scripts."""
    words, no_space = _patterns()
    if no_space.search(text) is None:  # the common case: no Thai/CJK, one token per word
        for word in words.finditer(text):
            value = word.group()
            folded = value.lower() if value.isascii() else fold(value)
            if folded:
                yield folded, word.start(), word.end()
        return
    for word in words.finditer(text):
        start, value = word.start(), word.group()
        position = 0
        for run in no_space.finditer(value):
            if run.start() > position:
                yield from _latin(value[position : run.start()], start + position)
            chars = run.group()
            offset = start + run.start()
            if len(chars) == 1:
                yield chars, offset, offset + 1
            for i in range(len(chars) - 1):
                yield chars[i : i + 2], offset + i, offset + i + 2
            position = run.end()
        if position < len(value):
            yield from _latin(value[position:], start + position)


def token_texts(text: str) -> list[str]:
    """The texts of `tokens(text)`, in order, without their places: what indexing needs."""
    if text.isascii():  # the common case: lowercasing folds every word and moves no boundary
        return _ASCII_WORDS.findall(text.lower())
    words, no_space = _patterns()
    if no_space.search(text) is None:
        folded = (word.lower() if word.isascii() else fold(word) for word in words.findall(text))
        return [word for word in folded if word]
    return [token for token, _, _ in tokens(text)]


def matching(text: str, keep: Callable[[str], bool]) -> list[tuple[str, int, int]]:
    """The `tokens` of NFC `text` that `keep` accepts, in order.

    ASCII text (the common case) takes a shortcut: each distinct word is judged
    once and its places found with `str.find`, instead of a token object per word.
    """
    if not text.isascii():
        return [place for place in tokens(text) if keep(place[0])]
    places = []
    for word in set(_ASCII_WORDS.findall(text)):
        token = word.lower()
        if not keep(token):
            continue
        at = text.find(word)
        while at >= 0:  # a whole word only: no letter or digit right before or after
            end = at + len(word)
            if (at == 0 or not text[at - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
                places.append((token, at, end))
            at = text.find(word, end)
    return sorted(places, key=lambda place: place[1])


def _latin(word: str, start: int) -> Iterator[tuple[str, int, int]]:
    folded = fold(word)
    if folded:
        yield folded, start, start + len(word)


def head(text: str, limit: int) -> str:
    """The start of `text`, at most `limit` characters, cut at a space or line break when one lies in
    its second half (no word cut in two); `text` itself when it is that short."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space] if space > limit // 2 else cut
