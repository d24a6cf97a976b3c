"""Search in a long-lived Vault (one searcher kept while the index does not change) and snippets: each
search sees the files as they are, and a snippet shows the matched words in their passages."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from memfile import Vault
from memfile.index.snippet import snippet
from memfile.text import matching, token_texts, tokens

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "deploy deploying database servers cache queue"
).split()
CATEGORIES = ("fact", "project", "note", "skill")


def write_memory(root: Path, category: str, key: str, body: str, tags: list[str], priority: str = "normal") -> None:
    path = root / "michael" / category / f"{key}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\ncategory: {category}\nkey: {key}\npriority: {priority}\ntags: [{', '.join(tags)}]\n"
        f"source: user\nverified: true\ncreated_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\n---\n{body}\n",
        encoding="utf-8",
    )


@pytest.fixture
def words_vault(vault: Vault) -> Vault:
    """300 memories of random words (some repeated, so scores differ), a few tags, four categories."""
    r = random.Random(7)
    for n in range(300):
        body = " ".join(r.choice(WORDS) for _ in range(r.randint(3, 40)))
        write_memory(
            vault.root, r.choice(CATEGORIES), f"m{n:03d}", body, r.sample(["red", "blue", "green"], r.randint(0, 2))
        )
    vault.refresh()
    return vault


def test_a_long_lived_vault_never_answers_from_a_stale_searcher(words_vault: Vault) -> None:
    """Hand edits, a store and a delete between searches of one open Vault: each search sees the files."""
    before = {h.memory.key for h in words_vault.search("zebra")}
    assert before == set()
    write_memory(words_vault.root, "fact", "m000", "zebra crossing", [])
    assert [h.memory.key for h in words_vault.search("zebra")] == ["m000"]
    words_vault.store("note", "stripes", "a zebra zebra zebra has stripes")
    assert [h.memory.key for h in words_vault.search("zebra")] == ["stripes", "m000"]
    (words_vault.root / "michael" / "fact" / "m000.md").unlink()
    assert [h.memory.key for h in words_vault.search("zebra")] == ["stripes"]
    assert "zebra (1 matched;" in words_vault.recall(query="zebra")


def test_vault_warm_opens_the_searcher_and_never_changes_an_answer(words_vault: Vault) -> None:
    with Vault.open(words_vault.root, words_vault.mind) as fresh:
        assert fresh.warm(10.0) is False  # no search opened the index: nothing to warm
        before = [(h.memory.key, h.score) for h in fresh.search("alpha bravo", limit=30)]
        assert fresh.warm(0.0) is False
        assert [(h.memory.key, h.score) for h in fresh.search("alpha bravo", limit=30)] == before
        fresh.store("note", "news", "zulu alpha news")
        fresh.warm(0.0)
        assert [h.memory.key for h in fresh.search("zulu")] == ["news"]


def test_hits_decoded_once_are_the_current_versions(words_vault: Vault) -> None:
    words_vault.store("note", "colour", "the colour is mauve")
    assert words_vault.search("mauve")[0].memory.content == "the colour is mauve"
    words_vault.store("note", "colour", "the colour is mauve, no, teal")
    assert words_vault.search("mauve")[0].memory.content == "the colour is mauve, no, teal"


# --- snippets -------------------------------------------------------------------


def test_snippet_shows_two_passages_around_far_apart_matches() -> None:
    text = "alpha " + "filler " * 60 + "bravo " + "filler " * 60 + "alpha bravo here"
    shown = snippet(text, frozenset({"alpha", "bravo"}))
    assert shown.count(" … ") == 1
    assert "**alpha** **bravo**" in shown
    assert len(shown) < len(text) // 2


def test_snippet_marks_stemmed_forms_and_is_empty_without_a_match() -> None:
    assert "**Deploying**" in snippet("Deploying servers on Monday", frozenset({"deploi"}))
    assert snippet("nothing to see", frozenset({"deploi"})) == ""


def test_snippet_keeps_the_texts_first_and_last_words_and_cuts_no_word_in_two() -> None:
    assert snippet("We deploy on Monday", frozenset({"deploi"})) == "We **deploy** on Monday"
    r = random.Random(2)
    for _ in range(300):
        text = " ".join(r.choice(WORDS + ["a", "of", "supercalifragilistic"]) for _ in range(r.randint(1, 80)))
        shown = snippet(text, frozenset({"deploi", "cach"}))
        for passage in filter(None, shown.replace("**", "").split(" … ")):  # whole words of the text
            assert re.search(rf"(?:^| ){re.escape(passage)}(?= |$)", text), (passage, text)


def test_snippet_joins_overlapping_bigrams_into_one_mark() -> None:
    assert snippet("ภาษาไทย", frozenset({"ภา", "าษ", "ษา"})) == "**ภาษา**ไทย"


def test_matching_finds_exactly_the_tokens_the_tokenizer_gives() -> None:
    """The ASCII shortcut (distinct words and str.find) against the tokenizer, on random texts."""
    r = random.Random(3)
    pieces = ["ab", "Ab", "AB", "cd", "x", "_", "-", " ", "9", "é", ".", "aab", "ab9", "\n", "ภา"]
    wanted = {"ab", "cd", "9", "ab9", "ภา"}
    for _ in range(5000):
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 20)))
        assert matching(text, wanted.__contains__) == [t for t in tokens(text) if t[0] in wanted], text


def test_token_texts_are_the_tokenizers_tokens_without_places() -> None:
    r = random.Random(5)
    pieces = [
        "ab",
        "Ab",
        "cd",
        "x",
        "_",
        "-",
        " ",
        "9",
        "é",
        "e\u0301",
        "\u0301",
        "Đà",
        "Straße",
        ".",
        "ภาษา",
        "中文字",
        "ﬁ",
        "\n",
    ]
    for _ in range(5000):
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 20)))
        assert token_texts(text) == [t for t, _, _ in tokens(text)], text


def test_a_search_of_an_empty_mind_finds_nothing_and_a_first_memory_then(vault: Vault) -> None:
    """An index with no document has no `expires` column yet (`hidden_docs` reads it)."""
    assert vault.search("anything") == []
    vault.store("fact", "first", "anything at all", expires="2099-01-01T00:00:00Z")
    assert [h.memory.key for h in vault.search("anything")] == ["first"]
