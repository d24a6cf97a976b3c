"""The words of a question, for a hybrid search: Vietnamese function words, Vietnamese typed without
accents, and the content words a memory must share with a question for its lexical hit to count.

The index has English stop words only, so "cô ấy" (she) or "co ay" match every Vietnamese memory: a
hybrid search leaves such words out of its lexical half (`lexical_query`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

from ..text import fold, token_texts
from .cache import script_of

#: Vietnamese function words, with their accents: personal pronouns and the kinship terms used as
#: pronouns, demonstratives, question words, classifiers, prepositions and conjunctions, tense and
#: aspect markers, negation, modal and light verbs (làm "do", có "have", được "get/can", bị
#: passive), degree words and sentence-final particles. Chosen from the grammar and checked
#: against the general stopwords-iso Vietnamese list (whose content nouns, "nhà", "năm", "người",
#: are left out); never from a question set.
VIETNAMESE_STOP = frozenset(
    """
    tôi tao tớ mình ta chúng ban bạn anh chị em ông bà cô chú bác cậu dì mợ thím cháu nó họ hắn
    ấy này kia đó đấy đây nọ
    gì nào đâu sao ai bao nhiêu mấy thế vậy tại
    cái chiếc con những các mọi mỗi từng một
    của là và với hay hoặc nhưng mà thì nếu vì nên để cho bằng từ đến tới vào ra lên xuống ở trong
    ngoài trên dưới giữa về theo sau trước khi lúc
    đã đang sẽ sắp vừa mới rồi chưa còn vẫn cũng đều cứ lại
    không chẳng chả đừng chớ
    có được bị phải cần muốn làm
    rất quá lắm hơn nhất khá
    à ạ ư nhé nhỉ nha hả hử chứ đi thôi
    """.split()
)
#: The same words typed without accents (several fold to one: "toi" is tôi, tới and tối).
VIETNAMESE_STOP_FOLDED = frozenset(fold(word) for word in VIETNAMESE_STOP)

#: One Vietnamese syllable without accents: an optional initial, a vowel nucleus, an optional final.
_SYLLABLE = re.compile(
    r"(?:ngh|ng|gh|gi|kh|nh|ph|qu|th|tr|ch|[bcdghklmnprstvx])?"
    r"(?:uyu|uya|uye|uoi|uou|ieu|yeu|oai|oay|oeo|uay|ai|ao|au|ay|eo|eu|ia|ie|iu|oa|oe|oi|oo|ua|ue|ui|uo|uu|uy|ye"
    r"|[aeiouy])"
    r"(?:ch|ng|nh|[cmnpt])?"
)
#: English function words that also spell a Vietnamese syllable: no evidence of Vietnamese.
_ENGLISH_LOOKALIKES = frozenset("a an the to do no so he me be go in on it at as or by up us my may can not".split())
_LETTERS = re.compile(r"[^\W\d_]+")
_EDGE = "?!.,;:\"'()"
#: A light English stemmer: it only has to treat a question and a memory alike.
_SUFFIX = re.compile(r"(?:ies|es|s|ing|ed)$")


def is_plain_vietnamese(text: str) -> bool:
    """Whether ASCII `text` reads as Vietnamese typed without accents ("co ay an chay khong?"): every word
    (two at least) spells a Vietnamese syllable, and one is a Vietnamese function word that is not English."""
    if not text.isascii():
        return False
    words = [word.lower() for word in _LETTERS.findall(text)]
    if len(words) < 2 or not all(_SYLLABLE.fullmatch(word) for word in words):
        return False
    return any(word in VIETNAMESE_STOP_FOLDED and word not in _ENGLISH_LOOKALIKES for word in words)


def is_foreign(question: str) -> bool:
    """Thai or Vietnamese, with or without accents: where the dense half ranks by centred cosines."""
    return script_of(question) != "other" or is_plain_vietnamese(question)


def lexical_query(query: str) -> str:
    """The question for the lexical half of a hybrid search: a Vietnamese one without its function words.

    A question with Vietnamese letters loses the words of VIETNAMESE_STOP (compared with their
    accents: "bàn" (table) stays though "bạn" (you) goes); one typed without accents
    (`is_plain_vietnamese`) loses their folded forms. Anything else is returned as is. An empty
    result means "skip the lexical half".
    """
    script = script_of(query)
    if script == "vi":
        words = [(word, unicodedata.normalize("NFC", word.strip(_EDGE).lower())) for word in query.split()]
        return " ".join(word for word, key in words if key not in VIETNAMESE_STOP)
    if script == "other" and is_plain_vietnamese(query):
        return " ".join(word for word in query.split() if word.strip(_EDGE).lower() not in VIETNAMESE_STOP_FOLDED)
    return query


def content_terms(text: str, stop: Collection[str]) -> frozenset[str]:
    """The folded words of `text` (bigrams for Thai and CJK) less the `stop` words, lightly stemmed
    (plural, -ing, -ed on ASCII words over four letters, so "checks" meets "check")."""
    out = set()
    for token in token_texts(text):
        if token in stop:
            continue
        if len(token) > 4 and token.isascii():
            stem = _SUFFIX.sub("", token)
            token = stem if len(stem) >= 3 else token
        out.add(token)
    return frozenset(out)
