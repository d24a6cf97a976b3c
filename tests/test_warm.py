"""ScoreCache searches: cached word scores give exactly Whoosh's ranking, and a long-lived Vault never serves stale hits."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from memfile import Vault
from memfile.config import plain
from memfile.index.persisted import MemfileAnalyzer, schema
from memfile.index.query import parse_query
from memfile.index.score_cache import WARM_FROM, ScoreCache, plain_terms
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


def whoosh_and_warm(vault: Vault) -> tuple[object, ScoreCache]:
    index = vault._index.store
    assert index is not None
    vault.search("alpha")  # opens the searcher
    return index._searcher, ScoreCache(index._searcher)


def assert_same(expected: list[tuple[float, int]], got: list[tuple[float, int]]) -> None:
    """Same documents in the same order and the same scores (sums may differ in the last bits)."""
    assert len(got) == len(expected)
    for (score, docnum), (want_score, want_docnum) in zip(got, expected):
        assert score == pytest.approx(want_score, rel=1e-9)
        if docnum != want_docnum:  # only a tie (to the last bits) may come in another order
            assert abs(score - want_score) < 1e-9 * max(1.0, abs(score))


def test_warm_scores_equal_whoosh_for_random_plain_queries_filters_and_masks(words_vault: Vault) -> None:
    compare_random_queries(words_vault, seed=11)


def test_warm_scores_equal_whoosh_over_several_segments_with_deletions(words_vault: Vault) -> None:
    r = random.Random(5)
    for round_ in range(3):  # each refresh writes a segment and deletes the old versions in earlier ones
        for n in r.sample(range(300), 20):
            path = next((words_vault.root / "michael").glob(f"*/m{n:03d}.md"), None)
            if path is not None and r.random() < 0.2:
                path.unlink()
            elif path is not None:
                body = " ".join(r.choice(WORDS) for _ in range(r.randint(1, 60)))
                write_memory(words_vault.root, path.parent.name, path.stem, body, ["red"])
        words_vault.refresh()
        searcher, _ = whoosh_and_warm(words_vault)
        assert len(searcher.leaf_searchers()) == round_ + 2
        assert any(sub.reader().has_deletions() for sub, _ in searcher.leaf_searchers())
        compare_random_queries(words_vault, seed=round_)


def compare_random_queries(vault: Vault, seed: int, warm: ScoreCache | None = None) -> None:
    from whoosh import query

    searcher, fresh = whoosh_and_warm(vault)
    warm = warm or fresh
    r = random.Random(seed)
    filters = [
        None,
        query.Term("category", "project"),
        query.Term("tags", "red"),
        query.And([query.Term("tags", "red"), query.Term("category", "fact")]),
    ]
    for _ in range(300):
        text = " ".join(
            [r.choice(WORDS)] + [r.choice(WORDS + ["the", "what?", "zulu"]) for _ in range(r.randint(0, 5))]
        )
        parsed = parse_query(text, searcher.schema)
        allow = r.choice(filters)
        hidden = set(r.sample(range(300), r.choice([0, 5, 50])))
        limit = r.choice([1, 3, 10, 100, 1000])
        results = searcher.search(parsed, filter=allow, mask=hidden or None, limit=limit, optimize=False)
        top = warm.top(parsed, allow, hidden, limit)
        assert top is not None, text
        assert_same([(hit.score, hit.docnum) for hit in results], top[0])
        matched = {d for d in searcher.docs_for_query(parsed) if d not in hidden}
        assert top[1] == len(matched & set(searcher.docs_for_query(allow)) if allow else matched), text


def test_a_repeated_word_counts_twice_as_in_whoosh(words_vault: Vault) -> None:
    from whoosh import query

    searcher, warm = whoosh_and_warm(words_vault)
    parsed = query.Or([query.Term("text", "alpha"), query.Term("text", "alpha"), query.Term("text", "bravo")])
    results = searcher.search(parsed, limit=20, optimize=False)
    top = warm.top(parsed, None, set(), 20)
    assert top is not None
    assert_same([(hit.score, hit.docnum) for hit in results], top[0])


@pytest.mark.parametrize(
    "text", ['"alpha bravo"', "alpha AND bravo", "alpha NOT bravo", "alph*", "alpha^2", "tag:red OR alpha AND bravo"]
)
def test_queries_other_than_plain_words_go_to_whoosh(words_vault: Vault, text: str) -> None:
    searcher, warm = whoosh_and_warm(words_vault)
    parsed = parse_query(text, searcher.schema)
    assert plain_terms(parsed) is None
    assert warm.top(parsed, None, set(), 10) is None


def test_search_results_are_the_same_with_power_syntax_and_plain_words(words_vault: Vault) -> None:
    """Through Vault.search: one query is answered warm, the other by Whoosh; both rank alike."""
    plain = [h.memory.key for h in words_vault.search("alpha", limit=50)]
    assert plain == [
        h.memory.key for h in words_vault.search("alpha*", limit=50) if "alpha" in h.memory.content.split()
    ]


def test_a_searchers_first_uncounted_query_goes_to_whoosh_and_later_ones_are_warm(words_vault: Vault) -> None:
    """A one-shot process asks one query: Whoosh's block skipping beats a walk of every posting."""
    searcher, warm = whoosh_and_warm(words_vault)
    parsed = parse_query("alpha bravo", searcher.schema)
    assert warm.top(parsed, None, set(), 10, count=False) is None
    assert warm.top(parsed, None, set(), 10, count=False) is not None
    assert (
        ScoreCache(searcher).top(parsed, None, set(), 10, count=True) is not None
    )  # counting walks every posting anyway


def test_a_small_budget_drops_old_words_and_still_answers_right(words_vault: Vault) -> None:
    searcher, _ = whoosh_and_warm(words_vault)
    warm = ScoreCache(searcher, budget=150)
    for word in WORDS:
        parsed = parse_query(word, searcher.schema)
        top = warm.top(parsed, None, set(), 10)
        assert top is not None
        assert_same([(h.score, h.docnum) for h in searcher.search(parsed, limit=10, optimize=False)], top[0])
        assert warm._held <= 150 or len(warm._words) == 1


def test_a_long_lived_vault_never_answers_from_stale_word_scores(words_vault: Vault) -> None:
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


def frequent_words(searcher: object) -> set[str]:
    reader = searcher.reader()  # type: ignore[attr-defined]
    return {text.decode() for text, info in reader.iter_field("text") if info.doc_frequency() >= WARM_FROM}


def warm_up(warm: ScoreCache) -> int:
    """ScoreCache pause by pause (a zero time budget stops at the first pause); how many pauses it took."""
    pauses = 0
    while warm.warm_some(0.0):
        pauses += 1
    return pauses


def test_warming_works_out_every_frequent_word_and_answers_stay_exact(words_vault: Vault) -> None:
    searcher, warm = whoosh_and_warm(words_vault)
    assert len(frequent_words(searcher)) > 10
    assert warm_up(warm) >= len(frequent_words(searcher))
    assert {word for field, word in warm._words} == frequent_words(searcher)
    assert warm._held == sum(len(docnums) for docnums, _ in warm._words.values())
    assert not warm.warm_some(10.0)  # nothing left
    compare_random_queries(words_vault, seed=3, warm=warm)


def test_a_search_while_a_words_walk_is_paused_is_exact_and_the_word_is_kept_once(words_vault: Vault) -> None:
    searcher, warm = whoosh_and_warm(words_vault)
    assert warm.warm_some(0.0)  # paused at the end of its first word's walk, before keeping it
    for word in WORDS:  # every word, so the paused one is asked for before its walk ends
        parsed = parse_query(word, searcher.schema)
        top = warm.top(parsed, None, set(), 10)
        assert top is not None
        assert_same([(h.score, h.docnum) for h in searcher.search(parsed, limit=10, optimize=False)], top[0])
    warm_up(warm)
    assert warm._held == sum(len(docnums) for docnums, _ in warm._words.values())
    compare_random_queries(words_vault, seed=4, warm=warm)


def test_warming_stops_at_the_first_pause_when_asked_to(words_vault: Vault) -> None:
    searcher, warm = whoosh_and_warm(words_vault)
    asked = []
    assert warm.warm_some(60.0, stop=lambda: asked.append(1) or True)
    assert asked == [1]
    assert warm._words == {}  # the first word's walk is paused, not kept yet


def test_warming_keeps_to_half_the_budget(words_vault: Vault) -> None:
    searcher, _ = whoosh_and_warm(words_vault)
    warm = ScoreCache(searcher, budget=1000)
    warm_up(warm)
    assert 0 < warm._held <= 500
    parsed = parse_query("alpha bravo zulu", searcher.schema)
    top = warm.top(parsed, None, set(), 10)
    assert top is not None
    assert_same([(h.score, h.docnum) for h in searcher.search(parsed, limit=10, optimize=False)], top[0])


def test_vault_warm_starts_over_after_a_change_and_never_changes_an_answer(words_vault: Vault) -> None:
    fresh = Vault.open(words_vault.root, words_vault.mind)
    assert fresh.warm(10.0) is False  # no search opened the index: nothing to warm
    before = [(h.memory.key, h.score) for h in fresh.search("alpha bravo", limit=30)]
    assert fresh.warm(0.0) is True
    while fresh.warm(10.0):
        pass
    assert [(h.memory.key, h.score) for h in fresh.search("alpha bravo", limit=30)] == before
    fresh.store("note", "news", "zulu alpha news")
    assert [h.memory.key for h in fresh.search("zulu")] == ["news"]
    assert fresh.warm(0.0) is True  # a new searcher: the work starts over
    fresh.close()


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


@pytest.mark.skipif(plain("formats"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_the_index_format_gives_whooshs_postings_byte_for_byte() -> None:
    """The text field's format runs the analyzer inline; Whoosh's own Positions format is the reference."""
    from whoosh.formats import Positions

    field = schema()["text"]
    reference = Positions(field_boost=field.format.field_boost)
    r = random.Random(11)
    pieces = [
        *WORDS,
        "the",
        "What",
        "is",
        "a",
        "Deploying",
        "Nhà",
        "hàng",
        "nha\u0300",
        "café",
        "ภาษาไทย",
        "東京都",
        "it's",
        "e-mail",
        "x",
        "9",
        "_",
        " ",
        " ",
        ", ",
        ".\n",
        "?",
        "\u0301",
    ]
    for _ in range(3000):
        text = "".join(r.choice(pieces) + r.choice(["", " "]) for _ in range(r.randint(0, 40)))
        ours = field.format.word_values(text, field.analyzer, mode="index")
        assert ours == list(reference.word_values(text, field.analyzer, mode="index")), text
    # anything but one string through this analyzer goes Whoosh's way
    assert list(field.format.word_values(["deploy", "deploy"], field.analyzer)) == list(
        reference.word_values(["deploy", "deploy"], field.analyzer)
    )
    assert type(field.analyzer) is MemfileAnalyzer


@pytest.mark.skipif(plain("formats"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_the_id_fields_format_gives_whooshs_postings() -> None:
    """A plain ID is its own one term; anything else (a list, other options) goes Whoosh's way."""
    from whoosh.formats import Existence

    fields = schema()
    for name in ("path", "category", "priority", "source", "verified", "status"):
        field = fields[name]
        reference = Existence(field_boost=field.format.field_boost)
        for value in ("", "fact", " padded ", "m/Nhà hàng/ภาษา.md", "a,b"):
            assert field.format.word_values(value, field.analyzer, mode="index") == list(
                reference.word_values(value, field.analyzer, mode="index")
            ), value
        assert sorted(field.format.word_values(["a", "b", "a"], field.analyzer)) == sorted(
            reference.word_values(["a", "b", "a"], field.analyzer)
        )
        assert sorted(field.format.word_values("x", field.analyzer, positions=True)) == sorted(
            reference.word_values("x", field.analyzer, positions=True)
        )
