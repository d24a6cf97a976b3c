"""Recall follows links (docs/recall.md, "Links"): what the best matches of `recall --query` link to joins
them, marked linked, after every real match, inside the limit's extra room and the budget, `[recall]
link_hops` links away; through the Python API, the CLI, its record, MCP and a recall as of a commit."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import fails, in_vault, ok, write
from helpers.mcp import Agent, serve

from memfile import Vault
from memfile.recall import LINKED, RecallReport

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)


def put(root: Path, ref: str, text: str, day: int, *, extra: str = "", mind: str = "michael") -> None:
    """A memory written by hand, created `day` days after T0 (a day apart: no neighbours by time)."""
    when = (T0 + timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = f"created_at: {when}\nupdated_at: {when}\nsource: user\nverified: true\n{extra}"
    write(root / mind / f"{ref}.md", f"---\n{head}---\n{text}\n")


@pytest.fixture
def linked(vault: Vault) -> Vault:
    """A project that links to its owner (who links to her office), a tip that matches the same words,
    and a memory nothing links to."""
    root = vault.root
    put(
        root, "project/atlas_rollout", "Atlas rollout to Postgres 16, due in March.\n- owner [[dana_whitfield|Dana]]", 1
    )
    put(root, "fact/dana_whitfield", "Answers fastest on Signal; out on Fridays. Desk: [[note/office]]", 20)
    put(root, "note/office", "Third floor, door code 7304.", 40)
    put(root, "note/rollout_tips", "Any rollout: take a dump first.", 60)
    put(root, "fact/unrelated", "The cat eats at seven.", 80)
    vault.commit_hand_edits()
    return vault


def shown(report: RecallReport) -> list[tuple[str, str | None, bool]]:
    return [(i.memory.ref, i.neighbour_of, i.linked) for i in report.items]


def set_hops(root: Path, hops: object) -> None:
    """`[recall] link_hops = hops` at the end of memfile.toml (the table this test added before, replaced)."""
    config = (root / "memfile.toml").read_text(encoding="utf-8").split("\n[recall]\n")[0]
    write(root / "memfile.toml", config + f"\n[recall]\nlink_hops = {hops}\n")


def test_a_match_brings_what_it_links_to_after_every_real_match(linked: Vault) -> None:
    report = linked.recall(query="atlas rollout")
    assert shown(report) == [
        ("project/atlas_rollout", None, False),
        ("note/rollout_tips", None, False),
        ("fact/dana_whitfield", "project/atlas_rollout", True),  # one link away: the default link_hops 1
    ]
    scores = [i.score for i in report.items]
    assert scores[2] is not None and scores[2] <= min(s for s in scores[:2] if s is not None)  # never above a match
    assert "[linked from project/atlas_rollout]" in report.text
    assert "(2 matched; 0 pinned, 2 best shown, 1 linked)" in report.text
    data = report.to_dict()["memories"]
    assert [(m["key"], m["linked"], m["neighbour_of"]) for m in data][2] == (
        "dana_whitfield",
        True,
        "project/atlas_rollout",
    )


def test_link_hops_zero_and_two(linked: Vault) -> None:
    set_hops(linked.root, 0)
    assert [ref for ref, *_ in shown(Vault.open(linked.root).recall(query="atlas rollout"))] == [
        "project/atlas_rollout",
        "note/rollout_tips",
    ]
    set_hops(linked.root, 2)
    assert shown(Vault.open(linked.root).recall(query="atlas rollout"))[2:] == [
        ("fact/dana_whitfield", "project/atlas_rollout", True),
        ("note/office", "fact/dana_whitfield", True),  # two links away
    ]


@pytest.mark.parametrize("value", ["3", "-1", "1.5", "true", '"one"'])
def test_a_wrong_link_hops_is_named_with_the_allowed_values(linked: Vault, value: str) -> None:
    set_hops(linked.root, value)
    result = fails(in_vault(linked.root, "recall", "--query", "atlas"), 2)
    assert "link_hops" in result.output and "0 (links not followed) to 2" in result.output


def test_the_limit_keeps_its_matches_and_the_budget_cuts_the_linked_first(linked: Vault) -> None:
    report = linked.recall(query="atlas rollout", limit=1)
    assert shown(report) == [
        ("project/atlas_rollout", None, False),
        ("fact/dana_whitfield", "project/atlas_rollout", True),
    ]
    whole = linked.recall(query="atlas rollout")
    tight = linked.recall(whole.tokens - 5, query="atlas rollout")
    assert [ref for ref, *_ in shown(tight)] == ["project/atlas_rollout", "note/rollout_tips"]
    assert tight.left_out == 1


def test_a_real_match_stays_a_match_and_what_cannot_be_recalled_never_joins(linked: Vault) -> None:
    root = linked.root
    put(root, "project/boat", "Boat repair: see [[fact/unrelated]], [[rollout_tips]] and [[gone]].", 90)
    put(root, "fact/gone", "Expired long ago.", 91, extra="expires_at: 2025-02-01T00:00:00Z\n")
    linked.commit_hand_edits()
    report = linked.recall(query="boat repair cat")
    assert shown(report) == [
        ("project/boat", None, False),
        ("fact/unrelated", None, False),  # matched "cat" itself: a real match, not marked linked
        ("note/rollout_tips", "project/boat", True),
    ]


def test_a_link_to_a_superseded_memory_brings_its_successor(vault: Vault) -> None:
    vault.store("identity", "user_location", "Hamburg")
    vault.store("identity", "user_city", "Berlin", supersedes="identity/user_location")
    put(vault.root, "note/travel_plans", "Trains leave from home: [[user_location]].", 400)
    vault.commit_hand_edits()
    assert ("identity/user_city", "note/travel_plans", True) in shown(vault.recall(query="trains travel plans"))


def test_at_most_linked_memories_join(vault: Vault) -> None:
    targets = [f"fact/person_{n}" for n in range(LINKED + 3)]
    for n, ref in enumerate(targets):
        put(vault.root, ref, f"Someone numbered {n}.", 10 + n)
    put(vault.root, "project/hub", "Hub project team: " + ", ".join(f"[[{t}]]" for t in targets), 1)
    vault.commit_hand_edits()
    report = vault.recall(query="hub project")
    assert [ref for ref, _, is_linked in shown(report) if is_linked] == targets[:LINKED]


def test_links_cross_no_mind_in_a_recall_of_several(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "v", "michael", "Michael")
    put(vault.root, "project/garden", "Garden plan: [[raised_beds]] and [[compost]].", 1)
    put(vault.root, "note/compost", "Turn the heap every two weeks.", 30)
    (vault.root / "anna").mkdir()
    put(vault.root, "note/raised_beds", "Anna's cedar beds.", 60, mind="anna")
    vault.commit_hand_edits()
    across = vault.recall(query="garden plan", with_minds=["anna"])
    assert [(i.memory.mind, i.memory.ref, i.linked) for i in across.items] == [
        ("michael", "project/garden", False),
        ("michael", "note/compost", True),
    ]


def test_the_cli_and_its_record_say_linked(linked: Vault) -> None:
    text = ok(in_vault(linked.root, "recall", "--query", "atlas rollout")).output
    assert "[linked from project/atlas_rollout]" in text
    record = ok(in_vault(linked.root, "last-recall", "--json")).output
    assert json.loads(record)["memories"][2] | {"score": None} == {
        "ref": "fact/dana_whitfield",
        "id": linked.get("fact/dana_whitfield").id,
        "pinned": False,
        "shortened": False,
        "score": None,
        "neighbour_of": "project/atlas_rollout",
        "linked": True,
    }
    assert "fact/dana_whitfield  score" in ok(in_vault(linked.root, "last-recall")).output
    assert "linked from project/atlas_rollout" in ok(in_vault(linked.root, "last-recall")).output


def test_mcp_recall_brings_the_linked_memory(linked: Vault) -> None:
    async def script(agent: Agent) -> str:
        return json.dumps(await agent.ok("recall", query="atlas rollout"))

    text = serve(linked.root, script)
    assert "[linked from project/atlas_rollout]" in text and "Answers fastest on Signal" in text


def test_a_recall_as_of_a_commit_follows_the_links_of_then(linked: Vault) -> None:
    before = linked.recall(query="atlas rollout")
    first = before.items[0].memory
    put(linked.root, "project/atlas_rollout", "Atlas rollout to Postgres 16, due in March. Owner left.", 1)
    linked.commit_hand_edits()
    assert not any(i.linked for i in linked.recall(query="atlas rollout").items)
    sha = linked.history(first.ref)[-1].sha
    then = linked.recall(query="atlas rollout", at=sha)
    assert ("fact/dana_whitfield", "project/atlas_rollout", True) in shown(then)
