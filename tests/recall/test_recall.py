"""Recall: the SPEC section 3 text, ordering, expiry and budgets."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import GOLDEN

from memfile import InvalidInput, Memory, Vault, estimate_tokens
from memfile.model import Category, Priority, Source
from memfile.recall import recall

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)


def make(key: str, priority: str = "normal", days: int = 0, content: str = "text", tags=(), verified=True) -> Memory:
    return Memory(
        id=f"mem_{key[:20]}",
        mind="m",
        category=Category.FACT,
        key=key,
        content=content,
        path=f"m/fact/{key}.md",
        created_at=T0,
        updated_at=T0 + timedelta(days=days),
        priority=Priority(priority),
        tags=tuple(tags),
        source=Source.USER,
        verified=verified,
    )


def test_sample_vault_recall_matches_golden(sample_copy: Path) -> None:
    text = Vault.open(sample_copy).recall()
    assert text == (GOLDEN / "sample_recall.txt").read_text(encoding="utf-8")


def test_sample_vault_recall_with_budget_matches_golden(sample_copy: Path) -> None:
    text = Vault.open(sample_copy).recall(budget=300)
    assert text == (GOLDEN / "sample_recall_budget300.txt").read_text(encoding="utf-8")
    assert estimate_tokens(text) <= 300


def test_expired_memories_are_left_out(sample_copy: Path) -> None:
    report = Vault.open(sample_copy).recall()
    assert "conference_trip_march" not in report.text
    assert all(item.memory.key != "conference_trip_march" for item in report.items)


def test_order_is_priority_then_newest_first() -> None:
    report = recall(
        [make("old_high", "high", 1), make("crit", "critical", 0), make("new_high", "high", 5), make("low", "low", 9)],
        "m",
        "M",
    )
    assert [i.memory.key for i in report.items] == ["crit", "new_high", "old_high", "low"]


def test_layout_of_one_entry() -> None:
    text = recall(
        [make("user_name", "critical", content="Michael\n\nSchäfer", tags=("person", "identity"))], "m", "Mind M"
    ).text
    assert text == (
        "Mind: Mind M\nMemories: 1 total (1 verified, 0 unverified)\n\n"
        "[001] fact (CRITICAL) [verified]\n  user_name\n  Michael\n  Schäfer\n  Tags: person, identity\n"
    )


def test_tags_line_is_omitted_without_tags_and_unverified_is_shown() -> None:
    text = recall([make("k", verified=False)], "m", "M").text
    assert "Tags:" not in text
    assert "[unverified]" in text and "(0 verified, 1 unverified)" in text


@pytest.mark.parametrize("budget", [60, 80, 120, 200, 400, 1000])
def test_budget_is_never_exceeded_and_critical_stays(budget: int) -> None:
    memories = [make(f"m{i}", ["low", "normal", "high"][i % 3], i, "word " * 30) for i in range(30)]
    memories.append(make("crit", "critical", 0, "must stay"))
    report = recall(memories, "m", "M", budget)
    assert estimate_tokens(report.text) <= budget
    assert report.tokens == estimate_tokens(report.text)
    assert any(i.memory.key == "crit" for i in report.items)
    if report.left_out:
        assert f"({report.left_out} left out" in report.text


def test_low_memories_are_shortened_before_any_is_dropped() -> None:
    memories = [
        make("n", "normal", 0, "keep me"),
        make("l", "low", 0, "first line\n" + "second line " * 30 + "\nthird line"),
    ]
    full = recall(memories, "m", "M").tokens
    report = recall(memories, "m", "M", full - 1)
    assert report.left_out == 0 and report.shortened == 1
    assert "first line …" in report.text and "second line" not in report.text
    assert "(1 shortened to fit" in report.text


def test_tiers_are_cut_in_order_low_normal_high() -> None:
    memories = [make(f"{p}{i}", p, i, f"{p} words " * 25) for p in ("low", "normal", "high") for i in range(3)]
    full = recall(memories, "m", "M").tokens
    for budget in range(60, full + 1, 7):
        report = recall(memories, "m", "M", budget)
        kept = {i.memory.key: i.shortened for i in report.items}
        for lower, higher in (("low", "normal"), ("normal", "high")):
            higher_cut = any(kept.get(f"{higher}{i}", True) for i in range(3))
            if higher_cut:
                assert not any(f"{lower}{i}" in kept for i in range(3)), (budget, kept)


def test_budget_too_small_for_critical_memories_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        recall([make("crit", "critical", 0, "x" * 400)], "m", "M", 5)
    assert caught.value.field == "budget"


def test_json_report_has_parts(sample_copy: Path) -> None:
    data = Vault.open(sample_copy).recall(budget=300).to_dict()
    assert data["total"] == 19 and data["budget"] == 300
    assert data["left_out"] + len(data["memories"]) == 19
    assert {"id", "key", "category", "priority", "shortened"} <= set(data["memories"][0])


def served(vault: Vault) -> dict:
    record = vault.last_recall().to_dict()
    record.pop("served_at")
    return record


def test_a_whole_recall_read_from_the_catalog_is_the_recall_of_the_memories(vault: Vault) -> None:
    """A whole recall (once rendered from the catalog's entries) is the recall of the Memory objects."""
    import random

    rng = random.Random(7)
    categories = ["fact", "identity", "preference", "project", "skill", "mistake", "note", "context"]
    times = ["2026-01-01T00:00:00Z", "2026-03-05T10:00:00Z", "2026-03-05T10:00:00.5Z", "2030-01-01T00:00:00Z"]
    for i in range(80):  # ties in priority and time, keys that sort apart from their paths, many lines, tags
        category = rng.choice(categories)
        folder = vault.mind_dir / category
        folder.mkdir(exist_ok=True)
        key = rng.choice(["a", "b", "z", "éclair", "Zed", "a_b", "a-b"]) + str(i % 7)
        expires = rng.choice(["null", "2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z"])
        status = rng.choice(["", "", "status: superseded\n"])
        body = rng.choice(
            [
                "One line.",
                "Two\n\nparagraphs  \n",
                "  indented\n\tand tabbed\n",
                "ünïcode — ✓",
                "🧠 ไทย Tiếng Việt 𝔘 漢字",
            ]
        )  # 1- to 4-byte UTF-8: the token estimate counts characters
        (folder / f"{key}_{i}.md").write_text(
            f"---\ncategory: {category}\nkey: {key}_{i}\npriority: {rng.choice(['low', 'normal', 'high', 'critical'])}\n"
            f"tags: {rng.choice(['[]', '[x]', '[y, z]'])}\nverified: {rng.choice(['true', 'false'])}\n"
            f"expires_at: {expires}\nupdated_at: {rng.choice(times)}\n{status}---\n{body}\n",
            encoding="utf-8",
        )
    for include_superseded in (False, True):
        fast = vault.recall(0, include_superseded=include_superseded)
        fast_record = served(vault)
        report = vault.recall(0, include_superseded=include_superseded)
        assert fast == report.text
        assert fast_record == served(vault)
        assert vault.recall(0, include_superseded=include_superseded).encode() == fast.encode("utf-8")
        assert served(vault) == fast_record
    assert vault.recall(0).total < vault.recall(0, include_superseded=True).total < 80


def test_a_whole_recall_counts_the_tokens_of_its_utf8_text(tmp_path: Path) -> None:
    """Its token estimate comes from the entries' character counts; the text is never decoded."""
    mind = Vault.init(tmp_path / "v", "m", "Míchaël 🧠")
    for i, content in enumerate(["ASCII only.", "ünïcode — ✓", "🧠 𝔘 four-byte", "ไทย Tiếng Việt 漢字"] * 30):
        mind.store("fact", f"k{i}", content, tags=["näme"] if i % 2 else [])
    data = mind.recall().encode()
    record = served(mind)
    text = mind.recall(0).text
    assert data == text.encode("utf-8") and record == served(mind)
    assert record["tokens"] == estimate_tokens(text) == -(-len(text) // 4)


def test_a_memory_whose_sort_keys_change_is_recalled_once_in_its_new_place(vault: Vault) -> None:
    """The catalog keeps entries keyed by their recall order: a new priority moves the row, never copies it."""
    vault.store("fact", "alpha", "Alpha text.")
    vault.store("fact", "bravo", "Bravo text.", priority="high")
    assert vault.recall().index("Bravo") < vault.recall().index("Alpha")
    path = vault.mind_dir / "fact" / "alpha.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("priority: normal", "priority: critical"), encoding="utf-8"
    )
    text = Vault.open(vault.root).recall()
    assert text.count("Alpha text.") == 1 and text.index("Alpha") < text.index("Bravo")
    assert "Memories: 2 total" in text


def test_a_whole_recall_overlays_files_another_process_is_about_to_index(vault: Vault) -> None:
    vault.store("fact", "alpha", "Alpha was indexed.")
    index = vault._index.store
    assert index is not None
    held = index._open().writer(timeout=1.0)  # another writer holds the index while a file changes
    try:
        (vault.mind_dir / "fact" / "bravo.md").write_text("Bravo is not indexed yet.\n", encoding="utf-8")
        text = Vault.open(vault.root).recall(0)
    finally:
        held.cancel()
    assert "Alpha was indexed." in text and "Bravo is not indexed yet." in text
