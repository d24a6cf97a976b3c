"""Issue 5: recall with a query (pinned memories, scored matches, neighbours, budgets) and superseding.

The ranking and budget rules are checked on the pure functions of memfile.recall with fixed
datetimes; the vault and the CLI are checked on real git repositories in tmp_path.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import HAND_MADE, commit_by_hand, commit_count, fails, git, in_vault, ok, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import EXIT_CODES, InvalidInput, Memory, RecallItem, Refused, Vault, estimate_tokens
from memfile.model import Category, Priority, Source, Status, utc_now
from memfile.recall import (
    NEIGHBOUR_WEIGHT,
    PRIORITY_VALUE,
    WEIGHTS,
    Match,
    Scored,
    recall_query,
    score,
    with_neighbours,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=30)
AGENT = {"MEMFILE_SOURCE": "agent"}
QUERY_LINE = re.compile(
    r"^Query: (?P<query>.*) \((?P<matched>\d+) matched; (?P<pinned>\d+) pinned, (?P<best>\d+) best shown"
    r"(?:, (?P<out>\d+) left out by the budget)?\)$"
)


# --- helpers ------------------------------------------------------------------------------------


def mem(
    key: str,
    priority: str = "normal",
    category: str = "fact",
    content: str | None = None,
    created: datetime = T0,
    updated: datetime | None = None,
    verified: bool = True,
    confidence: float = 1.0,
    tags: tuple[str, ...] = (),
) -> Memory:
    """A Memory value for the pure functions (no file behind it)."""
    return Memory(
        id="mem_" + (key.replace("_", "") + "0000")[:40],
        mind="m",
        category=Category(category),
        key=key,
        content=content if content is not None else f"about {key}",
        path=f"m/{category}/{key}.md",
        created_at=created,
        updated_at=updated or created,
        priority=Priority(priority),
        tags=tags,
        source=Source.USER if verified else Source.AGENT,
        verified=verified,
        confidence=confidence,
    )


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def put(
    root: Path,
    key: str,
    content: str,
    *,
    category: str = "fact",
    priority: str = "normal",
    created: datetime = T0,
    updated: datetime | None = None,
    tags: tuple[str, ...] = (),
    expires: str = "null",
    extra: str = "",
    mind: str = "michael",
) -> Path:
    """A memory file written by hand (not committed), with fixed dates."""
    ident = "mem_" + (re.sub("[^a-z0-9]", "", key) + "0000")[:40]
    return write(
        root / mind / category / f"{key}.md",
        (
            "---\n"
            f"id: {ident}\n"
            f"category: {category}\n"
            f"key: {key}\n"
            f"priority: {priority}\n"
            f"tags: [{', '.join(tags)}]\n"
            "source: user\n"
            "verified: true\n"
            "confidence: 1.0\n"
            f"expires_at: {expires}\n"
            f"created_at: {iso(created)}\n"
            f"updated_at: {iso(updated or created)}\n"
            f"{extra}"
            "---\n"
            f"{content}\n"
        ),
    )


def keys(items: list[RecallItem] | tuple[RecallItem, ...]) -> list[str]:
    return [item.memory.key for item in items]


def query_line(text: str) -> re.Match[str]:
    line = text.splitlines()[2]
    found = QUERY_LINE.match(line)
    assert found, line
    return found


def named_budget(error: InvalidInput) -> int:
    found = re.search(r"(\d+) tokens or more", str(error))
    assert found, str(error)
    return int(found.group(1))


def ranked_for(
    memories: list[Memory], text_scores: dict[str, float], now: datetime = NOW, neighbours: bool = False
) -> list[Scored]:
    """What Vault.recall does after the index search: (neighbours, then) the blend."""
    matches = sorted(
        (Match(m, text_scores[m.key]) for m in memories if m.key in text_scores), key=lambda m: -m.text_score
    )
    return score(with_neighbours(matches, memories) if neighbours else matches, now, 30.0)


def expected_total(parts: dict[str, float]) -> float:
    return sum(WEIGHTS[name] * value for name, value in parts.items())


# --- the score --------------------------------------------------------------------------------


def test_weights_are_the_documented_blend() -> None:
    assert WEIGHTS == {"relevance": 0.70, "priority": 0.10, "recency": 0.10, "confidence": 0.05, "verified": 0.05}
    assert math.isclose(sum(WEIGHTS.values()), 1.0)
    assert PRIORITY_VALUE == {Priority.LOW: 0.0, Priority.NORMAL: 1 / 3, Priority.HIGH: 2 / 3, Priority.CRITICAL: 1.0}


def test_score_parts_and_total_follow_the_formula() -> None:
    best = mem("best", "high", updated=T0, confidence=0.8)  # 30 days old at NOW: recency 0.5
    half = mem("half", "low", updated=NOW, verified=False, confidence=0.7)  # fresh, text score half the best
    ranked = score([Match(best, 4.0), Match(half, 2.0)], NOW, 30.0)
    assert [s.memory.key for s in ranked] == ["best", "half"]
    first, second = (dict(s.parts) for s in ranked)
    assert [name for name, _ in ranked[0].parts] == list(WEIGHTS)
    assert first == pytest.approx(
        {"relevance": 1.0, "priority": 2 / 3, "recency": 0.5, "confidence": 0.8, "verified": 1.0}, abs=1e-6
    )
    assert second == pytest.approx(
        {"relevance": 0.5, "priority": 0.0, "recency": 1.0, "confidence": 0.7, "verified": 0.0}, abs=1e-6
    )
    assert ranked[0].score == pytest.approx(0.7 + 0.1 * 2 / 3 + 0.1 * 0.5 + 0.05 * 0.8 + 0.05, abs=1e-6)
    assert ranked[1].score == pytest.approx(0.7 * 0.5 + 0.1 * 1.0 + 0.05 * 0.7, abs=1e-6)
    for scored in ranked:
        assert scored.score == pytest.approx(expected_total(dict(scored.parts)), abs=1e-5)
        assert scored.neighbour_of is None


@pytest.mark.parametrize("priority, value", [("low", 0.0), ("normal", 1 / 3), ("high", 2 / 3), ("critical", 1.0)])
def test_priority_part(priority: str, value: float) -> None:
    (scored,) = score([Match(mem("k", priority), 1.0)], NOW, 30.0)
    assert dict(scored.parts)["priority"] == pytest.approx(value, abs=1e-6)


@pytest.mark.parametrize(
    "age_days, half_life, recency",
    [
        (0, 30, 1.0),
        (30, 30, 0.5),
        (60, 30, 0.25),
        (90, 30, 0.125),
        (60, 60, 0.5),
        (15, 30, 0.5**0.5),
        (-5, 30, 1.0),
    ],
)
def test_recency_halves_every_half_life_from_updated_at(age_days: int, half_life: float, recency: float) -> None:
    memory = mem("k", created=NOW - timedelta(days=400), updated=NOW - timedelta(days=age_days))
    (scored,) = score([Match(memory, 3.0)], NOW, half_life)
    assert dict(scored.parts)["recency"] == pytest.approx(recency, abs=1e-6)


def test_relevance_is_relative_to_the_best_text_score() -> None:
    memories = [mem("a"), mem("b"), mem("c")]
    ranked = score([Match(memories[0], 8.0), Match(memories[1], 2.0), Match(memories[2], 6.0)], NOW, 30.0)
    assert {s.memory.key: dict(s.parts)["relevance"] for s in ranked} == pytest.approx({"a": 1.0, "b": 0.25, "c": 0.75})
    assert [s.memory.key for s in ranked] == ["a", "c", "b"]


def test_decay_changes_the_ranking_but_never_drops_a_match() -> None:
    fresh = mem("fresh_note", updated=NOW - timedelta(days=1))
    ancient = mem("ancient_note", updated=NOW - timedelta(days=3650))
    ranked = score([Match(ancient, 5.0), Match(fresh, 5.0)], NOW, 30.0)
    assert [s.memory.key for s in ranked] == ["fresh_note", "ancient_note"]
    assert dict(ranked[1].parts)["recency"] == pytest.approx(0.0, abs=1e-6)
    report = recall_query([fresh, ancient], ranked, "note", "m", "M")
    assert keys(report.items) == ["fresh_note", "ancient_note"]
    # A clearly better text match wins however old it is: relevance outweighs recency.
    ranked = score([Match(ancient, 5.0), Match(fresh, 2.0)], NOW, 30.0)
    assert [s.memory.key for s in ranked] == ["ancient_note", "fresh_note"]
    # A longer half-life makes the old one count as (almost) new.
    ranked = score([Match(ancient, 5.0)], NOW, 1_000_000.0)
    assert dict(ranked[0].parts)["recency"] > 0.99


# --- neighbours ---------------------------------------------------------------------------------


def test_neighbours_are_the_two_before_and_after_the_match() -> None:
    timeline = [mem(f"turn{i}", created=T0 + timedelta(minutes=i)) for i in range(10)]
    result = with_neighbours([Match(timeline[5], 10.0)], timeline)
    got = {m.memory.key: (m.text_score, m.via.key if m.via else None) for m in result}
    assert got == {
        "turn5": (10.0, None),
        "turn3": (pytest.approx(7.0), "turn5"),
        "turn4": (pytest.approx(7.0), "turn5"),
        "turn6": (pytest.approx(7.0), "turn5"),
        "turn7": (pytest.approx(7.0), "turn5"),
    }
    assert result[0].memory.key == "turn5"
    assert [m.text_score for m in result] == sorted((m.text_score for m in result), reverse=True)


def test_neighbours_are_found_by_created_at_not_by_list_order() -> None:
    timeline = [mem(f"turn{i}", created=T0 + timedelta(seconds=i)) for i in range(6)]
    shuffled = [timeline[i] for i in (4, 0, 5, 2, 1, 3)]
    result = with_neighbours([Match(timeline[0], 1.0)], shuffled)
    assert sorted(m.memory.key for m in result) == ["turn0", "turn1", "turn2"]


def test_neighbours_must_be_within_ten_minutes() -> None:
    match = mem("match", created=T0)
    inside = mem("inside", created=T0 - timedelta(minutes=10))
    outside = mem("outside", created=T0 + timedelta(minutes=10, seconds=1))
    result = with_neighbours([Match(match, 2.0)], [inside, match, outside])
    assert sorted(m.memory.key for m in result) == ["inside", "match"]


def test_a_neighbour_keeps_its_own_better_score() -> None:
    timeline = [mem(f"turn{i}", created=T0 + timedelta(seconds=i)) for i in range(5)]
    matches = [Match(timeline[2], 10.0), Match(timeline[3], 9.0), Match(timeline[1], 1.0)]
    result = {m.memory.key: m for m in with_neighbours(matches, timeline)}
    assert result["turn3"].text_score == 9.0 and result["turn3"].via is None  # matched better itself
    assert result["turn1"].text_score == pytest.approx(7.0) and result["turn1"].via.key == "turn2"  # raised
    assert result["turn4"].text_score == pytest.approx(max(7.0, 0.7 * 9.0)) and result["turn4"].via.key == "turn2"
    assert result["turn0"].text_score == pytest.approx(7.0)


def test_only_the_three_best_matches_bring_neighbours() -> None:
    memories, matches = [], []
    for n, text_score in enumerate([4.0, 3.0, 2.0, 1.0]):
        start = T0 + timedelta(hours=n)
        match = mem(f"match{n}", created=start)
        after = mem(f"after{n}", created=start + timedelta(seconds=1))
        memories += [match, after]
        matches.append(Match(match, text_score))
    result = {m.memory.key: m for m in with_neighbours(matches, memories)}
    assert set(result) == {"match0", "match1", "match2", "match3", "after0", "after1", "after2"}
    assert result["after2"].text_score == pytest.approx(NEIGHBOUR_WEIGHT * 2.0)
    # Neighbours do not bring their own neighbours.
    chain = [mem(f"c{i}", created=T0 + timedelta(minutes=i)) for i in range(8)]
    assert sorted(m.memory.key for m in with_neighbours([Match(chain[0], 1.0)], chain)) == ["c0", "c1", "c2"]


def test_score_names_the_match_a_neighbour_belongs_to() -> None:
    match = mem("lisbon_flights", category="context", created=T0)
    near = mem("hotel", category="context", created=T0 + timedelta(seconds=1))
    ranked = score(with_neighbours([Match(match, 5.0)], [match, near]), NOW, 30.0)
    assert [(s.memory.key, s.neighbour_of) for s in ranked] == [
        ("lisbon_flights", None),
        ("hotel", "context/lisbon_flights"),
    ]
    assert dict(ranked[1].parts)["relevance"] == pytest.approx(NEIGHBOUR_WEIGHT)


# --- recall_query: pinned, matches, header, limit ----------------------------------------------------


def pinned_mix() -> list[Memory]:
    return [
        mem("old_critical", "critical", "project", created=T0, updated=T0),
        mem("new_critical", "critical", "fact", created=T0, updated=T0 + timedelta(days=2)),
        mem("user_city", "high", "identity", updated=T0 + timedelta(days=1)),
        mem("answer_style", "high", "preference", updated=T0 + timedelta(days=3)),
        mem("server_os", "high", "fact", updated=T0 + timedelta(days=5)),  # high but not a profile category
        mem("user_role", "normal", "identity"),
        mem("coffee", "low", "preference"),
    ]


def test_pinned_memories_come_first_in_priority_then_newest_order() -> None:
    memories = pinned_mix()
    report = recall_query(memories, [], "anything at all", "m", "Mind M")
    assert keys(report.items) == ["new_critical", "old_critical", "answer_style", "user_city"]
    assert all(item.pinned and item.score is None and item.neighbour_of is None for item in report.items)
    assert report.text.splitlines()[:3] == [
        "Mind: Mind M",
        "Memories: 7 total (7 verified, 0 unverified)",
        "Query: anything at all (0 matched; 4 pinned, 0 best shown)",
    ]


def test_matches_follow_the_pinned_best_score_first_and_nothing_else_is_recalled() -> None:
    memories = pinned_mix() + [
        mem("deploy", content="deploy synapse"),
        mem("backup", content="back up synapse"),
        mem("unrelated", content="cats"),
    ]
    ranked = ranked_for(memories, {"backup": 1.0, "deploy": 3.0, "user_city": 0.5})
    report = recall_query(memories, ranked, "  synapse\n deploy ", "m", "M")
    assert keys(report.items) == ["new_critical", "old_critical", "answer_style", "user_city", "deploy", "backup"]
    assert [i.pinned for i in report.items] == [True] * 4 + [False] * 2
    assert report.items[4].score > report.items[5].score
    assert "unrelated" not in report.text and "server_os" not in report.text and "user_role" not in report.text
    assert report.text.splitlines()[2] == "Query: synapse deploy (3 matched; 4 pinned, 2 best shown)"
    assert (report.query, report.matched, report.total) == ("  synapse\n deploy ", 3, 10)
    assert keys(report.items).count("user_city") == 1  # a pinned match is shown once, as pinned


def test_limit_caps_the_matches_but_not_the_pinned() -> None:
    memories = pinned_mix() + [mem(f"match{i}") for i in range(6)]
    ranked = ranked_for(memories, {f"match{i}": 10.0 - i for i in range(6)})
    report = recall_query(memories, ranked, "q", "m", "M", limit=2, matched=40)
    assert keys(report.items)[4:] == ["match0", "match1"]
    assert len(report.items) == 6
    assert report.text.splitlines()[2] == "Query: q (40 matched; 4 pinned, 2 best shown)"
    assert keys(recall_query(memories, ranked, "q", "m", "M", limit=None).items)[4:] == [f"match{i}" for i in range(6)]


def test_report_dict_with_a_query_has_scores_and_weights() -> None:
    memories = pinned_mix()[:1] + [mem("deploy"), mem("next", created=T0 + timedelta(seconds=1))]
    ranked = ranked_for(memories, {"deploy": 2.0}, neighbours=True)
    data = recall_query(memories, ranked, "deploy", "m", "M").to_dict()
    assert {"query", "matched", "weights", "memories"} <= set(data)
    assert data["weights"] == WEIGHTS
    by_key = {m["key"]: m for m in data["memories"]}
    assert by_key["old_critical"]["pinned"] is True and by_key["old_critical"]["score"] is None
    assert by_key["old_critical"]["score_parts"] == {}
    assert set(by_key["deploy"]["score_parts"]) == set(WEIGHTS) and by_key["deploy"]["neighbour_of"] is None
    assert by_key["next"]["neighbour_of"] == "fact/deploy"
    json.dumps(data)


# --- recall_query: budgets ---------------------------------------------------------------------


def budget_case() -> tuple[list[Memory], list[Scored]]:
    memories = [
        mem("crit", "critical", "identity", content="Michael Schäfer\nborn in Kiel, lives in Hamburg since 2019"),
        mem("style", "high", "preference", content="short answers\nno emojis, no bullet lists unless asked"),
    ]
    for n in range(4):
        memories.append(
            mem(f"match{n}", content=f"match number {n} line one\n" + "more words here " * 8 + "\nlast line")
        )
    ranked = ranked_for(memories, {f"match{n}": 4.0 - n for n in range(4)})
    return memories, ranked


#: The documented order of cuts for budget_case: lowest-scored match first, then pinned high, critical only shortened.
CUTS = [
    ("match3", "short"),
    ("match3", "out"),
    ("match2", "short"),
    ("match2", "out"),
    ("match1", "short"),
    ("match1", "out"),
    ("match0", "short"),
    ("match0", "out"),
    ("style", "short"),
    ("style", "out"),
    ("crit", "short"),
]


def states_along_cuts() -> list[dict[str, str]]:
    state = dict.fromkeys(["crit", "style", "match0", "match1", "match2", "match3"], "full")
    states = [dict(state)]
    for key, mode in CUTS:
        state[key] = mode
        states.append(dict(state))
    return states


def test_budget_cuts_the_lowest_scored_match_first_and_never_drops_critical() -> None:
    memories, ranked = budget_case()
    full = recall_query(memories, ranked, "match", "m", "M")
    assert full.left_out == full.shortened == 0
    allowed = states_along_cuts()
    seen = set()
    for budget in range(full.tokens, 0, -1):
        try:
            report = recall_query(memories, ranked, "match", "m", "M", budget=budget)
        except InvalidInput as error:
            assert error.field == "budget"
            break
        assert estimate_tokens(report.text) <= budget and report.tokens == estimate_tokens(report.text)
        state = dict.fromkeys(["crit", "style", "match0", "match1", "match2", "match3"], "out")
        state |= {item.memory.key: "short" if item.shortened else "full" for item in report.items}
        assert state in allowed, (budget, state)
        seen.add(allowed.index(state))
        assert report.items[0].memory.key == "crit"
        found = query_line(report.text)
        assert int(found["best"]) == sum(1 for item in report.items if not item.pinned)
        assert int(found["out"] or 0) == report.left_out
        if report.left_out or report.shortened:
            cut = ", ".join(
                part
                for part in (
                    f"{report.left_out} left out" if report.left_out else "",
                    f"{report.shortened} shortened" if report.shortened else "",
                )
                if part
            )
            hint = "see all: memfile list" if report.left_out else "read one whole: memfile show REF"
            assert report.text.splitlines()[-1] == f"({cut} to fit {budget} tokens; {hint})"
        else:
            assert report.text == full.text
    else:
        pytest.fail("no budget was too small")
    assert max(seen) == len(CUTS)  # the last state (critical shortened) was reached before the error
    assert {2, 4, 8, 10} <= seen  # matches left out one by one, then the pinned high one


def test_a_budget_too_small_names_a_budget_that_works() -> None:
    memories, ranked = budget_case()
    with pytest.raises(InvalidInput) as caught:
        recall_query(memories, ranked, "match", "m", "M", budget=10)
    assert caught.value.field == "budget"
    need = named_budget(caught.value)
    report = recall_query(memories, ranked, "match", "m", "M", budget=need)
    assert report.tokens <= need
    assert keys(report.items) == ["crit"] and report.items[0].shortened


def test_a_budget_too_small_names_the_smallest_budget_that_works() -> None:
    memories = [mem("crit", "critical", content="first line\nsecond line that is long enough to matter here ok")]
    full = recall_query(memories, [], "q", "m", "M")
    with pytest.raises(InvalidInput) as caught:
        recall_query(memories, [], "q", "m", "M", budget=full.tokens - 1)
    need = named_budget(caught.value)
    assert recall_query(memories, [], "q", "m", "M", budget=need).tokens <= need
    with pytest.raises(InvalidInput):  # fails: budget full.tokens (< need) works
        recall_query(memories, [], "q", "m", "M", budget=need - 1)


# --- recall_query: the budget is never exceeded (hypothesis) -----------------------------------------

_line = st.text(alphabet="abcdefghij klmnopqrstuvwxyzäé…-", min_size=0, max_size=90)


@st.composite
def recall_cases(draw: st.DrawFn) -> tuple[list[Memory], list[Scored], int, int | None]:
    count = draw(st.integers(0, 12))
    memories, scores = [], {}
    for n in range(count):
        lines = draw(st.lists(_line, min_size=1, max_size=4))
        content = "\n".join(lines) if any(line.strip() for line in lines) else "x"
        memories.append(
            mem(
                f"k{n}",
                draw(st.sampled_from(["low", "normal", "high", "critical"])),
                draw(st.sampled_from([c.value for c in Category])),
                content=content,
                created=T0 + timedelta(minutes=draw(st.integers(0, 40))),
                updated=T0 + timedelta(days=draw(st.integers(0, 60))),
                verified=draw(st.booleans()),
                confidence=draw(st.sampled_from([0.3, 0.7, 1.0])),
                tags=tuple(draw(st.lists(st.sampled_from(["ops", "home", "long-tag-name"]), max_size=2, unique=True))),
            )
        )
        if draw(st.booleans()):
            scores[f"k{n}"] = draw(st.floats(0.1, 20.0))
    budget = draw(st.integers(1, 700))
    limit = draw(st.one_of(st.none(), st.integers(1, 12)))
    return memories, ranked_for(memories, scores, NOW + timedelta(days=30), neighbours=True), budget, limit


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recall_cases())
def test_recall_query_never_exceeds_the_budget(case: tuple[list[Memory], list[Scored], int, int | None]) -> None:
    memories, ranked, budget, limit = case
    try:
        report = recall_query(memories, ranked, "what next", "m", "M", budget=budget, limit=limit)
    except InvalidInput as error:
        assert error.field == "budget"
        need = named_budget(error)
        assert need > budget
        report = recall_query(memories, ranked, "what next", "m", "M", budget=need, limit=limit)
        budget = need
    assert estimate_tokens(report.text) <= budget
    assert report.tokens == estimate_tokens(report.text)
    critical = {m.key for m in memories if m.priority is Priority.CRITICAL and m.verified}
    assert critical <= set(keys(report.items))
    pinned_flags = [item.pinned for item in report.items]
    assert pinned_flags == sorted(pinned_flags, reverse=True)  # pinned first
    scores = [item.score for item in report.items if not item.pinned]
    assert scores == sorted(scores, reverse=True)
    assert len(scores) <= (limit or len(ranked))
    if report.left_out or report.shortened:
        assert report.text.rstrip("\n").splitlines()[-1].startswith(f"({report.left_out or report.shortened} ")


# --- the vault: recall with a query ------------------------------------------------------------------


@pytest.fixture
def mixed(vault: Vault) -> Vault:
    """Hand-written memories created days apart (no neighbours), all updated at T0."""
    root = vault.root
    put(root, "user_name", "Michael Schäfer", category="identity", priority="critical", created=T0 - timedelta(days=9))
    put(
        root,
        "answer_style",
        "Short answers without emojis",
        category="preference",
        priority="high",
        created=T0 - timedelta(days=8),
    )
    put(root, "server_os", "vps1 runs Ubuntu 24.04", priority="high", created=T0 - timedelta(days=7))
    put(
        root,
        "synapse_deploy",
        "Deploy synapse with docker compose on vps1",
        category="skill",
        created=T0 - timedelta(days=6),
        tags=("synapse",),
    )
    put(
        root, "synapse_backup", "Back up the synapse postgres nightly", category="skill", created=T0 - timedelta(days=5)
    )
    put(root, "favourite_food", "Pad krapao with a fried egg", category="preference", created=T0 - timedelta(days=4))
    put(
        root,
        "old_trip",
        "Trip to the synapse conference in Rome",
        category="context",
        created=T0 - timedelta(days=3),
        expires="2020-01-01T00:00:00Z",
    )
    return Vault.open(root)


def test_vault_recall_with_a_query_pins_then_ranks_and_leaves_the_rest_out(mixed: Vault) -> None:
    items = mixed.recall(query="how do I deploy synapse?").items
    assert keys(items) == ["user_name", "answer_style", "synapse_deploy", "synapse_backup"]
    assert [i.pinned for i in items] == [True, True, False, False]
    deploy = items[2]
    assert deploy.score == pytest.approx(expected_total(dict(deploy.parts)), abs=1e-5)
    assert isinstance(deploy.parts, tuple) and all(isinstance(part, tuple) and len(part) == 2 for part in deploy.parts)
    assert [name for name, _ in deploy.parts] == list(WEIGHTS)
    assert dict(deploy.parts)["relevance"] == 1.0 and deploy.neighbour_of is None and not deploy.shortened
    assert 0 < dict(items[3].parts)["relevance"] < 1.0
    text = mixed.recall(query="how do I deploy synapse?")
    assert text.splitlines()[2] == "Query: how do I deploy synapse? (2 matched; 2 pinned, 2 best shown)"
    assert "server_os" not in text and "favourite_food" not in text
    assert "old_trip" not in text  # expired, although it matches
    report = mixed.recall(query="how do I deploy synapse?")
    assert report.total == 6 and report.matched == 2 and report.budget is None


def test_vault_recall_with_a_query_matching_nothing_shows_the_pinned(mixed: Vault) -> None:
    report = mixed.recall(query="quantum chromodynamics")
    assert keys(report.items) == ["user_name", "answer_style"]
    assert report.text.splitlines()[2] == "Query: quantum chromodynamics (0 matched; 2 pinned, 0 best shown)"


def test_vault_recall_without_a_query_still_shows_everything(mixed: Vault) -> None:
    items = mixed.recall().items
    assert set(keys(items)) == {
        "user_name",
        "answer_style",
        "server_os",
        "synapse_deploy",
        "synapse_backup",
        "favourite_food",
    }
    assert all(i.score is None and not i.pinned for i in items)
    assert "Query:" not in mixed.recall()


def test_half_life_comes_from_memfile_toml(mixed: Vault) -> None:
    """Updated in 2001: with the default 30 days it has decayed to nothing; with a huge half-life it has not."""
    put(
        mixed.root,
        "ancient_almanac",
        "An almanac of zeppelin timetables",
        created=datetime(2001, 1, 1, tzinfo=timezone.utc),
    )

    def recency(vault: Vault) -> float:
        (item,) = [i for i in vault.recall(query="zeppelin almanac").items if not i.pinned]
        assert item.memory.key == "ancient_almanac"
        return dict(item.parts)["recency"]

    assert mixed.config.half_life_days == 30.0
    assert recency(mixed) < 1e-6
    config = mixed.root / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[recall]\nhalf_life_days = 100000000\n", encoding="utf-8")
    reopened = Vault.open(mixed.root)
    assert reopened.config.half_life_days == 100_000_000.0
    assert recency(reopened) > 0.999


@pytest.mark.parametrize("limit", [0, 1001, -1, True, 2.5, "3"])
def test_limit_must_be_1_to_1000(mixed: Vault, limit: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        mixed.recall(query="synapse", limit=limit)  # type: ignore[arg-type]
    assert caught.value.field == "limit"
    assert "1 to 1000" in str(caught.value)


def test_limit_bounds_are_allowed(mixed: Vault) -> None:
    assert keys(mixed.recall(query="synapse", limit=1).items) == ["user_name", "answer_style", "synapse_deploy"]
    assert len(mixed.recall(query="synapse", limit=1000).items) == 4


def test_vault_budget_too_small_is_invalid_input_naming_a_budget_that_works(mixed: Vault) -> None:
    with pytest.raises(InvalidInput) as caught:
        mixed.recall(query="synapse", budget=5)
    assert caught.value.field == "budget"
    need = named_budget(caught.value)
    text = mixed.recall(query="synapse", budget=need)
    assert estimate_tokens(text) <= need


def test_vault_budget_leaves_out_the_weakest_match_first(mixed: Vault) -> None:
    full = mixed.recall(query="deploy synapse")
    assert keys(full.items) == ["user_name", "answer_style", "synapse_deploy", "synapse_backup"]
    budget = full.tokens
    while True:
        budget -= 1
        report = mixed.recall(query="deploy synapse", budget=budget)
        assert report.tokens <= budget
        kept = {item.memory.key: item.shortened for item in report.items}
        assert {"user_name", "answer_style"} <= set(kept)  # pinned ones go last
        if kept.get("synapse_deploy", True):  # the better match is cut only once the weaker one is gone
            assert "synapse_backup" not in kept, (budget, kept)
        if report.left_out:
            break
    assert keys(report.items) == ["user_name", "answer_style", "synapse_deploy"]
    assert query_line(report.text)["out"] == "1" and query_line(report.text)["best"] == "1"
    assert report.text.endswith(f"to fit {budget} tokens; see all: memfile list)\n")


def test_vault_neighbours_skip_superseded_and_expired_turns(vault: Vault) -> None:
    root = vault.root
    put(
        root,
        "turn_before",
        "We talked about the weather",
        created=T0 - timedelta(seconds=2),
        expires="2020-01-01T00:00:00Z",
    )
    put(root, "turn_prior", "Someone mentioned penguins", created=T0 - timedelta(seconds=1))
    put(root, "turn_match", "The quarterly invoice goes to accounting", created=T0)
    put(
        root,
        "turn_after",
        "Then lunch was ordered",
        created=T0 + timedelta(seconds=1),
        extra="status: superseded\nsuperseded_by: mem_somethingnewer\n",
    )
    put(root, "turn_later", "Nothing else happened", created=T0 + timedelta(seconds=2))
    put(root, "far_away", "Unrelated and stored an hour later", created=T0 + timedelta(hours=1))
    items = {i.memory.key: i.neighbour_of for i in vault.recall(query="quarterly invoice").items}
    assert items == {"turn_match": None, "turn_prior": "fact/turn_match", "turn_later": "fact/turn_match"}
    items = {
        i.memory.key: i.neighbour_of for i in vault.recall(query="quarterly invoice", include_superseded=True).items
    }
    assert items == {
        "turn_match": None,
        "turn_prior": "fact/turn_match",
        "turn_after": "fact/turn_match",
        "turn_later": "fact/turn_match",
    }


# --- the CLI: recall --query ------------------------------------------------------------------------


def test_cli_recall_query_text_is_the_vault_text(mixed: Vault) -> None:
    result = ok(in_vault(mixed.root, "recall", "--query", "deploy synapse", "--limit", "5"))
    assert result.stdout == mixed.recall(query="deploy synapse", limit=5)
    short = ok(in_vault(mixed.root, "recall", "-q", "deploy synapse", "--limit", "1"))
    assert "synapse_backup" not in short.stdout and "synapse_deploy" in short.stdout


def test_cli_recall_query_json(mixed: Vault) -> None:
    data = json.loads(ok(in_vault(mixed.root, "recall", "--query", "deploy synapse", "--format", "json")).stdout)
    assert set(data) == {
        "mind",
        "name",
        "total",
        "verified",
        "unverified",
        "budget",
        "tokens",
        "left_out",
        "shortened",
        "query",
        "matched",
        "weights",
        "memories",
    }
    assert (data["mind"], data["query"], data["matched"], data["total"], data["budget"]) == (
        "michael",
        "deploy synapse",
        2,
        6,
        None,
    )
    assert data["weights"] == WEIGHTS
    assert [m["key"] for m in data["memories"]] == ["user_name", "answer_style", "synapse_deploy", "synapse_backup"]
    for entry in data["memories"]:
        assert {
            "id",
            "category",
            "key",
            "content",
            "status",
            "shortened",
            "pinned",
            "score",
            "score_parts",
            "neighbour_of",
        } <= set(entry)
    pinned, match = data["memories"][0], data["memories"][2]
    assert (pinned["pinned"], pinned["score"], pinned["score_parts"]) == (True, None, {})
    assert match["pinned"] is False and set(match["score_parts"]) == set(WEIGHTS)
    assert match["score"] == pytest.approx(expected_total(match["score_parts"]), abs=1e-5)
    budgeted = json.loads(
        ok(in_vault(mixed.root, "recall", "-q", "deploy synapse", "--budget", "500", "--format", "json")).stdout
    )
    assert budgeted["budget"] == 500 and budgeted["tokens"] <= 500


@pytest.mark.parametrize("query", ["", "   ", "?"])
def test_cli_recall_with_an_empty_query_exits_2(mixed: Vault, query: str) -> None:
    result = fails(in_vault(mixed.root, "recall", "--query", query), 2)
    assert "query" in result.stderr


@pytest.mark.parametrize("limit", ["0", "1001"])
def test_cli_recall_bad_limit_exits_2(mixed: Vault, limit: str) -> None:
    result = fails(in_vault(mixed.root, "recall", "--query", "synapse", "--limit", limit), 2)
    assert "limit" in result.stderr and "1 to 1000" in result.stderr


def test_cli_recall_budget_too_small_exits_2_naming_the_budget(mixed: Vault) -> None:
    result = fails(in_vault(mixed.root, "recall", "--query", "synapse", "--budget", "5"), 2)
    assert "budget" in result.stderr
    need = int(re.search(r"(\d+) tokens or more", result.stderr).group(1))
    out = ok(in_vault(mixed.root, "recall", "--query", "synapse", "--budget", need)).stdout
    assert estimate_tokens(out) <= need


# --- supersede -----------------------------------------------------------------------------------


def test_store_supersedes_marks_the_old_memory_in_the_same_commit(vault: Vault) -> None:
    root = vault.root
    write(root / "michael" / "fact" / "office_hours.md", HAND_MADE)
    commit_by_hand(root, "michael/fact/office_hours.md")
    before, head = commit_count(root), git(root, "rev-parse", "HEAD").strip()
    result = ok(
        in_vault(root, "store", "fact", "opening_times", "Open 8-16 on weekdays", "--supersedes", "office_hours")
    )
    assert "superseded mem_handmade0001 michael/fact/office_hours.md" in result.stdout
    assert commit_count(root) == before + 1
    assert "superseding fact/office_hours" in git(root, "log", "-1", "--format=%s")
    touched = {
        line.split("\t")[2]: line.split("\t")[:2] for line in git(root, "diff", "--numstat", head, "HEAD").splitlines()
    }
    assert set(touched) == {"michael/fact/opening_times.md", "michael/fact/office_hours.md"}
    assert touched["michael/fact/office_hours.md"] == ["2", "0"]  # two lines added, none changed
    assert touched["michael/fact/opening_times.md"][1] == "0"
    new_id = vault.get("fact/opening_times").id
    expected = HAND_MADE.replace(
        '  - "https://example.com/hours"\n---\n',
        f'  - "https://example.com/hours"\nstatus: superseded\nsuperseded_by: {new_id}\n---\n',
    )
    assert (root / "michael" / "fact" / "office_hours.md").read_text(encoding="utf-8") == expected
    assert git(root, "status", "--porcelain").strip() == ""
    old = vault.list(status="superseded")
    assert [(m.ref, m.status, m.superseded_by) for m in old] == [("fact/office_hours", Status.SUPERSEDED, new_id)]


def test_store_supersedes_through_the_api_returns_the_superseded_memory(vault: Vault) -> None:
    vault.store("identity", "user_location", "Lives in Berlin", priority="high")
    before = commit_count(vault.root)
    result = vault.store(
        "identity", "user_city", "Lives in Hamburg", priority="high", supersedes="identity/user_location"
    )
    assert result.created and result.changed and commit_count(vault.root) == before + 1
    assert result.superseded is not None and result.superseded.ref == "identity/user_location"
    assert result.superseded.superseded and result.superseded.superseded_by == result.memory.id
    assert vault.get("identity/user_location").status is Status.SUPERSEDED
    # Superseding by id works too, and updating an existing memory can supersede another one.
    vault.store("fact", "a", "one")
    vault.store("fact", "b", "two")
    before = commit_count(vault.root)
    result = vault.store("fact", "b", "two, updated", supersedes=vault.get("fact/a").id)
    assert not result.created and commit_count(vault.root) == before + 1
    assert vault.get("fact/a").superseded_by == vault.get("fact/b").id


@pytest.fixture
def superseded(vault: Vault) -> Vault:
    """identity/user_location (high, tag `home`) superseded by identity/user_city."""
    vault.store("identity", "user_location", "Lives in Berlin near the river", priority="high", tags=["home"])
    vault.store("fact", "berlin_office", "The Berlin office is on Torstrasse", tags=["home"])
    vault.store("identity", "user_city", "Lives in Hamburg", priority="high", supersedes="user_location")
    return vault


def test_superseded_memories_are_left_out_everywhere(superseded: Vault) -> None:
    vault = superseded
    assert "user_location" not in keys(vault.recall().items)
    assert "user_location" not in keys(vault.recall(query="where does he live in Berlin").items)
    assert "user_location" not in vault.recall(query="Berlin river")
    assert "user_city" in keys(vault.recall(query="Berlin river").items)  # pinned: high identity
    assert [h.memory.key for h in vault.search("Berlin")] == ["berlin_office"]
    assert [m.key for m in vault.by_tag("home")] == ["berlin_office"]
    assert [m.key for m in vault.list()] == ["berlin_office", "user_city"]
    assert [m.key for m in vault.list(status="active")] == ["berlin_office", "user_city"]
    assert [m.key for m in vault.list(status="superseded")] == ["user_location"]
    assert [m.key for m in vault.list(status="all")] == ["berlin_office", "user_city", "user_location"]
    assert vault.recall().total == 2


def test_include_superseded_brings_them_back(superseded: Vault) -> None:
    vault = superseded
    assert "user_location" in keys(vault.recall(include_superseded=True).items)
    items = vault.recall(query="Berlin river", include_superseded=True).items
    assert "user_location" in keys(items)
    assert {h.memory.key for h in vault.search("Berlin", include_superseded=True)} == {"berlin_office", "user_location"}


def test_cli_superseded_in_recall_search_list(superseded: Vault) -> None:
    root = superseded.root
    assert "user_location" not in ok(in_vault(root, "recall")).stdout
    assert "user_location" not in ok(in_vault(root, "recall", "--query", "Berlin river")).stdout
    assert "user_location" in ok(in_vault(root, "recall", "--query", "Berlin river", "--include-superseded")).stdout
    assert "user_location" in ok(in_vault(root, "recall", "--include-superseded")).stdout
    assert "user_location" not in ok(in_vault(root, "search", "Berlin")).stdout
    assert "user_location" in ok(in_vault(root, "search", "Berlin", "--include-superseded")).stdout
    assert "user_location" not in ok(in_vault(root, "by-tag", "home")).stdout
    assert "user_location" not in ok(in_vault(root, "list")).stdout
    listed = ok(in_vault(root, "list", "--status", "superseded")).stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["identity/user_location"]
    listed = ok(in_vault(root, "list", "--status", "all")).stdout.splitlines()
    assert [line.split()[0] for line in listed] == [
        "fact/berlin_office",
        "identity/user_city",
        "identity/user_location",
    ]
    data = json.loads(ok(in_vault(root, "list", "--status", "superseded", "--json")).stdout)
    assert data[0]["status"] == "superseded" and data[0]["superseded_by"] == superseded.get("user_city").id


def test_list_with_a_bad_status_exits_2_naming_the_allowed_values(superseded: Vault) -> None:
    result = fails(in_vault(superseded.root, "list", "--status", "retired"), 2)
    assert "status" in result.stderr and "active, superseded, proposed, all" in result.stderr
    with pytest.raises(InvalidInput) as caught:
        superseded.list(status="retired")
    assert caught.value.field == "status"


def test_reactivate_brings_a_memory_back_in_one_commit(superseded: Vault) -> None:
    vault, root = superseded, superseded.root
    path = root / "michael" / "identity" / "user_location.md"
    before = commit_count(root)
    result = ok(in_vault(root, "reactivate", "identity/user_location"))
    assert result.stdout.startswith("reactivated ")
    assert commit_count(root) == before + 1
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["michael/identity/user_location.md"]
    text = path.read_text(encoding="utf-8")
    assert "status: active\n" in text and "superseded_by: null\n" in text
    memory = vault.get("identity/user_location")
    assert memory.status is Status.ACTIVE and memory.superseded_by is None
    assert {h.memory.key for h in vault.search("Berlin")} == {"berlin_office", "user_location"}
    assert "user_location" in keys(vault.recall().items)
    assert "user_location" in keys(vault.recall(query="Berlin river").items)
    assert "user_location" in [m.key for m in vault.list()]
    # Reactivating an active memory changes nothing.
    data = path.read_bytes()
    again = vault.reactivate("identity/user_location")
    assert not again.changed and again.commit is None
    result = ok(in_vault(root, "reactivate", "user_location"))
    assert "not superseded, unchanged" in result.stdout
    assert commit_count(root) == before + 1 and path.read_bytes() == data
    assert not vault.reactivate("berlin_office").changed and commit_count(root) == before + 1


def test_a_superseded_memory_stored_as_superseding_its_successor_is_the_one_in_force(superseded: Vault) -> None:
    """user_city superseded user_location; storing user_location again, superseding user_city, makes it
    the active one (not a cycle that hides both)."""
    before = commit_count(superseded.root)
    result = superseded.store("identity", "user_location", "Lives in Munich", supersedes="identity/user_city")
    assert result.memory.status is Status.ACTIVE and result.memory.superseded_by is None
    assert result.superseded is not None and result.superseded.ref == "identity/user_city"
    assert commit_count(superseded.root) == before + 1
    assert superseded.get("identity/user_city").superseded_by == result.memory.id
    assert [m.ref for m in superseded.list(category="identity")] == ["identity/user_location"]
    assert "Lives in Munich" in superseded.recall() and "Lives in Hamburg" not in superseded.recall()
    assert [h.memory.ref for h in superseded.search("munich")] == ["identity/user_location"]


def test_an_update_to_a_superseded_memory_is_kept_and_says_it_stays_superseded(superseded: Vault) -> None:
    result = superseded.store("identity", "user_location", "Lives in Berlin, by the canal")
    told = (
        "identity/user_location is superseded by identity/user_city: the update is kept, out of recall and "
        "search; memfile reactivate identity/user_location brings it back"
    )
    assert result.changed and result.memory.status is Status.SUPERSEDED and told in result.notices
    assert "by the canal" not in superseded.recall()
    again = superseded.store("identity", "user_location", "Lives in Berlin, by the canal")
    assert not again.changed and not again.notices  # nothing changed, nothing to say
    cli = ok(in_vault(superseded.root, "store", "identity", "user_location", "Lives in Berlin, Mitte"))
    assert told in cli.stderr


def test_a_memory_cannot_supersede_itself(vault: Vault) -> None:
    vault.store("fact", "a", "one")
    path = vault.root / "michael" / "fact" / "a.md"
    data, before = path.read_bytes(), commit_count(vault.root)
    for ref in ("fact/a", "a", vault.get("fact/a").id):
        with pytest.raises(InvalidInput) as caught:
            vault.store("fact", "a", "two", supersedes=ref)
        assert caught.value.field == "supersedes"
    result = fails(in_vault(vault.root, "store", "fact", "a", "two", "--supersedes", "fact/a"), 2)
    assert "supersedes" in result.stderr
    assert path.read_bytes() == data and commit_count(vault.root) == before


def test_superseding_an_unknown_memory_writes_nothing(vault: Vault) -> None:
    vault.store("fact", "a", "one")
    before = commit_count(vault.root)
    fails(in_vault(vault.root, "store", "fact", "b", "two", "--supersedes", "fact/nothing_here"), 3)
    assert not (vault.root / "michael" / "fact" / "b.md").exists() and commit_count(vault.root) == before


def test_an_agent_cannot_supersede_a_verified_memory(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "office", "Torstrasse 1")
    old = root / "michael" / "fact" / "office.md"
    data, before = old.read_bytes(), commit_count(root)
    result = fails(
        in_vault(root, "store", "fact", "new_office", "Hafenstrasse 3", "--supersedes", "fact/office", env=AGENT),
        Refused.exit_code,
    )
    assert Refused.exit_code in EXIT_CODES and Refused.exit_code != 0
    assert "verified by a person" in result.stderr
    agent = Vault.open(root, source="agent")
    with pytest.raises(Refused):
        agent.store("fact", "new_office", "Hafenstrasse 3", supersedes="fact/office")
    assert old.read_bytes() == data and commit_count(root) == before
    assert not (root / "michael" / "fact" / "new_office.md").exists()
    assert git(root, "status", "--porcelain").strip() == ""
    # An agent may supersede what an agent stored (unverified).
    agent.store("fact", "guess", "maybe Torstrasse")
    result = agent.store("fact", "better_guess", "surely Torstrasse", supersedes="fact/guess")
    assert result.superseded is not None and vault.get("fact/guess").superseded


def test_an_agent_cannot_reactivate_a_verified_memory(superseded: Vault) -> None:
    root = superseded.root
    path = root / "michael" / "identity" / "user_location.md"
    data, before = path.read_bytes(), commit_count(root)
    fails(in_vault(root, "reactivate", "identity/user_location", env=AGENT), Refused.exit_code)
    with pytest.raises(Refused):
        Vault.open(root, source="agent").reactivate("identity/user_location")
    assert path.read_bytes() == data and commit_count(root) == before
    assert superseded.get("identity/user_location").superseded


def test_a_bogus_status_is_a_parse_issue_and_the_file_is_left_alone(vault: Vault) -> None:
    root = vault.root
    path = put(root, "bogus_status", "about status", extra="status: bogus\n")
    data = path.read_bytes()
    assert "bogus_status" not in [m.key for m in vault.list(status="all")]
    (issue,) = vault.issues
    assert issue.path == "michael/fact/bogus_status.md" and "status" in issue.reason and issue.line == 13
    assert "active, superseded" in issue.reason
    vault.store("fact", "other", "about status too")
    assert "bogus_status" not in keys(vault.recall(query="status").items)
    result = ok(in_vault(root, "list", "--status", "all"))
    assert "bogus_status.md:13" in result.stderr and "status" in result.stderr
    assert path.read_bytes() == data


@pytest.mark.parametrize("value", ["not-an-id", "12345", "[mem_abcd1234]", "mem_AB"])
def test_superseded_by_that_is_not_a_memory_id_is_a_parse_issue(vault: Vault, value: str) -> None:
    path = put(vault.root, "bad_link", "about links", extra=f"status: superseded\nsuperseded_by: {value}\n")
    data = path.read_bytes()
    assert vault.list(status="all") == []
    (issue,) = vault.issues
    assert issue.path == "michael/fact/bad_link.md" and "superseded_by" in issue.reason and issue.line == 14
    assert path.read_bytes() == data


@pytest.mark.parametrize("value", ["0", "false"])
def test_a_falsy_superseded_by_is_a_parse_issue_too(vault: Vault, value: str) -> None:
    put(vault.root, "falsy_link", "about links", extra=f"status: superseded\nsuperseded_by: {value}\n")
    assert vault.list(status="all") == []
    assert [i.path for i in vault.issues] == ["michael/fact/falsy_link.md"]


def test_superseded_state_survives_deleting_the_index(superseded: Vault) -> None:
    root = superseded.root
    superseded.close()
    shutil.rmtree(root / ".memfile")
    vault = Vault.open(root)
    assert [h.memory.key for h in vault.search("Berlin")] == ["berlin_office"]
    assert "user_location" not in keys(vault.recall(query="Berlin river").items)
    assert "user_location" not in keys(vault.recall().items)
    assert [m.key for m in vault.list(status="superseded")] == ["user_location"]
    shutil.rmtree(root / ".memfile")
    assert "user_location" not in ok(in_vault(root, "search", "Berlin")).stdout
    assert "user_location" in ok(in_vault(root, "list", "--status", "superseded")).stdout


def test_a_hand_written_superseded_memory_is_honoured(vault: Vault) -> None:
    put(
        vault.root,
        "old_plan",
        "The plan was to move to Lisbon",
        extra="status: superseded\nsuperseded_by: mem_newplan0001\n",
    )
    put(vault.root, "new_plan", "The plan is to move to Porto", created=T0 + timedelta(days=1))
    assert [h.memory.key for h in vault.search("plan move")] == ["new_plan"]
    assert keys(vault.recall(query="plan to move").items) == ["new_plan"]
    assert [m.key for m in vault.list(status="superseded")] == ["old_plan"]
    assert vault.get("old_plan").superseded_by == "mem_newplan0001"


# --- a small retrieval regression --------------------------------------------------------------------

TOPICS = {
    "vps1_server": ("fact", "vps1 is a Hetzner CX31 in Falkenstein running Ubuntu 24.04; log in over ssh as deploy."),
    "coffee_order": ("preference", "Drinks an oat milk flat white, never with sugar."),
    "synapse_release": ("project", "Synapse v1.5.0 was released on 12 May; the next release is planned for June."),
    "postgres_backup": ("skill", "Back up the postgres database with pg_dump every night to the S3 bucket backups-eu."),
    "dentist": ("context", "Dentist appointment with Dr. Weber on Tuesday at 9:30."),
    "thai_thanks": ("note", "Khob khun krap means thank you in Thai."),
    "sister_birthday": ("fact", "His sister Anna has her birthday on 14 August; she likes orchids."),
    "editor_setup": ("preference", "Uses neovim with the gruvbox colour scheme."),
    "marathon": ("context", "Training for the Berlin marathon in September, running 40 km a week."),
    "alembic_order": ("mistake", "Run alembic migrations before restarting the api container, not after."),
    "car_service": ("context", "The Golf needs its yearly inspection at the garage in March."),
}
#: One conversation, a few seconds per turn.
CONVERSATION = [
    ("offsite_dates", "The team offsite takes place from 3 to 5 October."),
    ("offsite_flights", "Flights to Lisbon for the offsite are booked: TAP 553 leaving Hamburg at 07:10."),
    ("hotel_booking", "Hotel Casa Azul near the Alfama district, rooms paid ahead."),
    ("offsite_budget", "The budget for the team offsite is 4000 euros."),
    ("offsite_agenda", "The offsite agenda starts with a roadmap review."),
]


@pytest.fixture
def topics(vault: Vault) -> Vault:
    root = vault.root
    put(
        root,
        "user_name",
        "Michael",
        category="identity",
        priority="critical",
        created=T0 - timedelta(days=40),
        updated=T0,
    )
    for n, (key, (category, content)) in enumerate(TOPICS.items()):
        put(root, key, content, category=category, created=T0 - timedelta(days=30 - 2 * n), updated=T0)
    start = T0 - timedelta(days=1)
    for n, (key, content) in enumerate(CONVERSATION):
        put(root, key, content, category="context", created=start + timedelta(seconds=n), updated=T0)
    return Vault.open(root)


@pytest.mark.parametrize(
    "question, expected",
    [
        ("Which Ubuntu version runs on vps1?", "vps1_server"),
        ("How do I back up the postgres database?", "postgres_backup"),
        ("When is my sister's birthday?", "sister_birthday"),
        ("What coffee does he drink?", "coffee_order"),
        ("When do we fly to Lisbon?", "offsite_flights"),
        ("What did we get wrong with the alembic migrations?", "alembic_order"),
    ],
)
def test_the_expected_memory_is_the_best_match(topics: Vault, question: str, expected: str) -> None:
    items = topics.recall(query=question).items
    assert items[0].memory.key == "user_name" and items[0].pinned
    matches = [item for item in items if not item.pinned]
    assert matches and matches[0].memory.key == expected, [(i.memory.key, i.score) for i in matches]
    assert matches[0].neighbour_of is None


def test_the_turn_after_the_best_match_is_recalled_as_its_neighbour(topics: Vault) -> None:
    question = "When do we fly to Lisbon?"
    assert "hotel_booking" not in [h.memory.key for h in topics.search(question, limit=50)]  # shares no word
    items = {item.memory.key: item for item in topics.recall(query=question).items}
    stay = items["hotel_booking"]
    assert stay.neighbour_of == "context/offsite_flights" and not stay.pinned
    assert dict(stay.parts)["relevance"] == pytest.approx(NEIGHBOUR_WEIGHT, abs=1e-6)
    assert "offsite_dates" in items and items["offsite_dates"].neighbour_of in (None, "context/offsite_flights")
    assert "marathon" not in items and "car_service" not in items


def test_a_long_lived_vault_recalls_what_changed_and_drops_what_expired(vault: Vault) -> None:
    """Recall keeps its sorted view of the mind between calls: it must follow stores, hand edits and the clock."""
    vault.store("fact", "boat_name", "The boat is called Aurora")
    soon = datetime.now(timezone.utc) + timedelta(seconds=1.5)
    vault.store("fact", "boat_slip", "The boat is in slip 14 this week", expires=soon)

    def recalled() -> set[str]:
        return {item.memory.key for item in vault.recall(query="where is the boat", budget=None).items}

    assert recalled() == {"boat_name", "boat_slip"}
    assert [h.memory.key for h in vault.search("slip")] == ["boat_slip"]
    vault.store("fact", "boat_engine", "The boat engine is a Yanmar")
    assert "boat_engine" in recalled()
    path = vault.root / "michael" / "fact" / "boat_name.md"
    path.write_text(path.read_text(encoding="utf-8").replace("Aurora", "Borealis"), encoding="utf-8")
    assert vault.get("fact/boat_name").content == "The boat is called Borealis"
    assert {i.memory.content for i in vault.recall(query="boat called", budget=None).items} >= {
        "The boat is called Borealis"
    }
    assert [h.memory.key for h in vault.search("slip")] == ["boat_slip"]  # searcher and its mask are kept now
    while utc_now() <= soon:  # memfile's clock, which counts whole seconds
        time.sleep(0.05)
    assert recalled() == {"boat_name", "boat_engine"}
    assert vault.search("slip") == [] and [h.memory.key for h in vault.search("slip", include_expired=True)] == [
        "boat_slip"
    ]


def test_exclude_leaves_memories_out_as_if_they_were_not_there(vault: Vault) -> None:
    kept = vault.store("fact", "deploy_day", "Deploys go out on Thursdays.", priority="critical").memory
    gone = vault.store("note", "deploy_summary", "Earlier: we talked about deploys on Thursdays.").memory
    for query in (None, "deploys Thursdays"):
        every = [item.memory.ref for item in vault.recall(query=query, budget=0).items]
        assert gone.ref in every and kept.ref in every
        for named in ([gone.ref], [gone.id], gone.ref):
            left = [item.memory.ref for item in vault.recall(query=query, budget=0, exclude=named).items]
            assert left == [ref for ref in every if ref != gone.ref]
    with pytest.raises(InvalidInput, match="exclude"):
        vault.recall(exclude=[gone.ref], with_minds=["other"])
