"""Recall across minds: a group chat's mind with its speaker's (`with_minds`, `--with-mind`, `mcp --read-mind`).

The first mind is where stores go; the others are read through their own index, read-only; a mind not
named is never read, whatever the query or the refs say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import in_vault, ok

from memfile import InvalidInput, NotFound, Vault

BOB_SECRET = "ZX-" + "4417"


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    """group_a (a group chat), alice (a speaker's profile) and bob (never named)."""
    root = tmp_path / "chat"
    for mind, name in (("group_a", "Group A"), ("alice", "Alice"), ("bob", "Bob")):
        Vault.init(root, mind, name).close()
    with Vault.open(root, "group_a") as group:
        group.store("fact", "channel_rules", "The channel plans the tea release; deploys go out on Thursdays.")
        group.store("project", "release", "The tea release ships in May.", tags="release")
    with Vault.open(root, "alice") as alice:
        alice.store("identity", "role", "Alice is the QA lead.", priority="critical")
        alice.store("preference", "tea", "Alice likes green tea, no sugar.", priority="high", tags="drinks")
        alice.store("fact", "timezone", "Alice works from Hanoi (UTC+7).")
    with Vault.open(root, "bob") as bob:
        bob.store("fact", "pin", f"Bob's tea locker code is {BOB_SECRET}.", priority="critical", tags="tea")
        bob.store("preference", "tea", f"Bob likes black tea; code {BOB_SECRET}.", priority="high")
    return root


def _no_bob(text: str, root: Path) -> None:
    with Vault.open(root, "bob") as bob:
        ids = [m.id for m in bob.memories()]
    assert BOB_SECRET not in text and "Bob" not in text and not any(i in text for i in ids)


def test_a_whole_recall_of_two_minds(chat: Path) -> None:
    with Vault.open(chat, "group_a") as group:
        report = group.recall(with_minds=["alice"], budget=0)
    text = report.text
    assert text.startswith("Mind: Group A + Alice\nMemories: 5 total")
    assert "[001] identity (CRITICAL) [verified] [mind: Alice]\n  role" in text  # critical first, whoever's
    assert "fact (NORMAL) [verified] [mind: Group A]\n  channel_rules" in text
    assert {item.memory.mind for item in report.items} == {"group_a", "alice"}
    assert report.mind == "group_a" and report.to_dict()["name"] == "Group A + Alice"
    _no_bob(text, chat)


def test_a_query_recall_pins_every_minds_profile_first_and_ranks_all_matches(chat: Path) -> None:
    with Vault.open(chat, "group_a") as group:
        report = group.recall(query="tea release", with_minds=["alice"], budget=0)
        record = group.last_recall()
    pinned = [item.memory.ref for item in report.items if item.pinned]
    assert pinned == ["identity/role", "preference/tea"]  # alice's pinned profile (group_a has none)
    shown = [(item.memory.mind, item.memory.ref) for item in report.items if not item.pinned]
    assert ("group_a", "project/release") in shown and ("group_a", "fact/channel_rules") in shown
    assert report.text.startswith("Mind: Group A + Alice\n")
    _no_bob(report.text, chat)
    refs = [entry["ref"] for entry in record.memories]
    assert "alice:identity/role" in refs and "project/release" in refs  # another mind's refs name it
    assert record.mind == "group_a"


def test_the_budget_covers_every_mind(chat: Path) -> None:
    with Vault.open(chat, "group_a") as group:
        whole = group.recall(with_minds=["alice"], budget=0)
        small = group.recall(with_minds=["alice"], budget=60)
        asked = group.recall(query="tea", with_minds=["alice"], budget=70)
    assert small.tokens <= 60 < whole.tokens and small.left_out + small.shortened > 0
    assert asked.tokens <= 70
    assert small.items[0].memory.ref == "identity/role"  # the critical memory is never cut first


@pytest.mark.parametrize(
    "minds",
    [["group_a"], ["alice", "alice"], ["../bob"], ["bob/.."], ["ALICE"], [""], ["alice/../bob"], ["%2e%2e"], [".git"]],
)
def test_bad_mind_names_are_refused_and_nothing_is_read(chat: Path, minds: list[str]) -> None:
    with Vault.open(chat, "group_a") as group, pytest.raises(InvalidInput) as caught:
        group.recall(with_minds=minds)
    assert caught.value.field == "with_minds"


def test_a_mind_that_does_not_exist(chat: Path) -> None:
    with Vault.open(chat, "group_a") as group, pytest.raises(NotFound, match="nobody"):
        group.recall(with_minds=["nobody"])


@pytest.mark.parametrize(
    "query",
    [f"Bob {BOB_SECRET} locker code", "mind:bob tea", "path:bob/fact/pin", "tag:tea bob", "../bob/fact/pin", "pin"],
)
def test_a_mind_not_named_is_never_read(chat: Path, query: str) -> None:
    with Vault.open(chat, "group_a") as group:
        text = group.recall(query=query, with_minds=["alice"], budget=0, limit=100).text
    _no_bob(text.replace(f"Query: {' '.join(query.split())}", ""), chat)


def test_the_read_mind_is_not_written(chat: Path) -> None:
    before = {p: p.read_bytes() for p in (chat / "alice").rglob("*.md")}
    with Vault.open(chat, "group_a", source="agent") as group:
        group.recall(query="tea", with_minds=["alice"])
        stored = group.store("preference", "tea", "The group orders oolong.")
    assert stored.memory.path == "group_a/preference/tea.md"
    assert {p: p.read_bytes() for p in (chat / "alice").rglob("*.md")} == before


def test_the_command_line(chat: Path) -> None:
    text = ok(in_vault(chat, "--mind", "group_a", "recall", "--with-mind", "alice", "--query", "tea")).stdout
    assert text.startswith("Mind: Group A + Alice") and "[mind: Alice]" in text
    data = json.loads(
        ok(in_vault(chat, "--mind", "group_a", "recall", "--with-mind", "alice", "--format", "json")).stdout
    )
    assert {m["mind"] for m in data["memories"]} == {"group_a", "alice"}
    bad = in_vault(chat, "--mind", "group_a", "recall", "--with-mind", "../bob")
    assert bad.exit_code == 2 and "with_minds" in bad.output and "Traceback" not in bad.output


def test_mcp_read_mind(chat: Path) -> None:
    pytest.importorskip("mcp")
    from helpers.mcp import Agent, server_params
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    params = server_params(chat, "group_a")
    params.args += ["--read-mind", "alice"]

    async def main() -> dict[str, Any]:
        with open(chat.parent / "mcp.err", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                agent = Agent(session)
                out = {
                    "recall": await agent.ok("recall", query="tea locker code", budget=0, limit=50),
                    "search": await agent.ok("search", query="tea"),
                    "stored": await agent.ok("store", category="fact", key="role", content="The group's bot."),
                    "show": await agent.error("show", ref="identity/role"),
                }
                assert agent.unexpected == []
                return out

    out = anyio.run(main)
    assert out["recall"].startswith("Mind: Group A + Alice") and "Alice is the QA lead." in out["recall"]
    _no_bob(out["recall"].replace("Query: tea locker code", ""), chat)
    assert {hit["mind"] for hit in out["search"]} == {"group_a"}  # only recall reads the other mind
    assert out["stored"]["path"] == "group_a/fact/role.md"
    assert "Traceback" not in (chat.parent / "mcp.err").read_text()


def test_mcp_refuses_a_bad_read_mind(chat: Path) -> None:
    for bad, code in (("nobody", 3), ("group_a", 2)):
        result = in_vault(chat, "--mind", "group_a", "mcp", "--read-mind", bad)
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
