"""Captured memories waiting for review never reach an agent over MCP: no tool shows, finds, changes or
removes one (the memory tool, which reads the mind's files itself, included), and no tool offers to see or
review them. `memfile mcp` as a real process, the official SDK client over its stdio; the proposals come from
a real `Vault.capture`."""

from __future__ import annotations

from typing import Any

from helpers import commit_count
from helpers.mcp import Agent, serve
from helpers.review import ADDED, PROPOSED_WORDS, TARGET, UPDATE, propose

from memfile import Vault

#: The memory tool's paths of the proposals, and of the person's memory one would supersede.
DOG, TEA, COFFEE = "/memories/fact/dog_name.md", "/memories/preference/coffee_2.md", "/memories/preference/coffee.md"


def proposal_files(vault: Vault) -> dict[str, bytes]:
    return {ref: (vault.root / vault.get(ref).path).read_bytes() for ref in (ADDED, UPDATE)}


def test_no_tool_offers_to_see_or_review_proposals(vault: Vault) -> None:
    async def script(agent: Agent) -> Any:
        return (await agent.session.list_tools()).tools

    tools = {tool.name: tool for tool in serve(vault.root, script)}
    assert not {"accept", "reject", "review", "proposals"} & set(tools)  # capture hands an exchange over: it reads none
    for name, tool in tools.items():
        assert "include_proposed" not in tool.input_schema.get("properties", {}), name
        assert "include_proposed" not in (tool.description or ""), name
        assert "accept" not in (tool.description or "").lower(), name
    assert "status" not in tools["list"].input_schema["properties"]
    assert "`proposed`" not in (tools["list"].description or "")  # Vault.list's `status` entry is left out
    assert "include_superseded" in (tools["search"].description or "")  # the docstring's other entries stay


def test_proposals_reach_no_tool_until_a_person_accepts_them(vault: Vault) -> None:
    ids = propose(vault)
    files, commits = proposal_files(vault), commit_count(vault.root)

    async def script(agent: Agent) -> dict[str, Any]:
        seen: dict[str, Any] = {
            "recall": await agent.ok("recall", query="my dog and what I drink in the morning"),
            "recall_all": await agent.ok("recall"),
            "search": await agent.ok("search", query="dog", limit=50),
            "search_tea": await agent.ok("search", query="tea morning"),
            "list": await agent.ok("list"),
            "list_pets": await agent.ok("list", tags=["pets"]),
            "list_unverified": await agent.ok("list", unverified=True),
            "tags": await agent.ok("tags"),
            "expiring": await agent.ok("expiring", within="1000d"),
            "listing": await agent.ok("memory", command="view", path="/memories"),
            "folder": await agent.ok("memory", command="view", path="/memories/fact"),
        }
        for tool in ("search", "recall"):
            unknown = await agent.error(tool, query="dog", include_proposed=True)
            assert "no argument 'include_proposed'" in unknown, tool
        for ref in (ADDED, UPDATE, ids[ADDED], ids[UPDATE], "dog_name"):
            assert "no memory" in await agent.error("show", ref=ref)
            assert "no memory" in await agent.error("forget", ref=ref)
        taken = await agent.error("store", category="fact", key="dog_name", content="Has a cat.")
        assert "waiting for the user's review" in taken
        superseding = await agent.error("store", category="fact", key="cat", content="A cat.", supersedes=ADDED)
        assert "no memory" in superseding
        for arguments in (
            {"command": "view", "path": DOG},
            {"command": "view", "path": TEA, "view_range": [1, 3]},
            {"command": "str_replace", "path": DOG, "old_str": "dog", "new_str": "cat"},
            {"command": "insert", "path": DOG, "insert_line": 0, "insert_text": "more"},
            {"command": "delete", "path": DOG},
            {"command": "rename", "old_path": TEA, "new_path": "/memories/preference/tea.md"},
        ):
            assert "does not exist" in await agent.error("memory", **arguments), arguments
        created = await agent.error("memory", command="create", path=DOG, file_text="Has a cat.")
        assert "waiting for the user's review" in created
        for command in (
            {"command": "delete", "path": "/memories/fact"},
            {"command": "rename", "old_path": "/memories/fact", "new_path": "/memories/facts"},
        ):
            assert "waiting for the user's review" in await agent.error("memory", **command), command
        seen["texts"] = agent.texts
        return seen

    seen = serve(vault.root, script)
    for name, answer in seen.items():
        text = str(answer)
        assert not [word for word in PROPOSED_WORDS if word in text], (name, text[:500])
        assert "captured_from" not in text, (name, text[:500])
        if name != "texts":  # every text the server sent, its errors' echoes of the REFs asked for included
            assert "dog_name" not in text and "coffee_2" not in text, (name, text[:500])
    assert [m["key"] for m in seen["list"]] == ["coffee"] and seen["list_pets"] == seen["list_unverified"] == []
    assert [t["tag"] for t in seen["tags"]] == ["drinks"]
    assert seen["listing"]["result"].endswith(f"\t{COFFEE}")  # the person's memory; no proposal
    assert proposal_files(vault) == files and commit_count(vault.root) == commits

    vault.accept(ADDED)
    vault.reject(UPDATE)

    async def after(agent: Agent) -> tuple[str, Any, str]:
        return (
            await agent.ok("recall", query="my dog"),
            await agent.ok("search", query="dog"),
            await agent.ok("memory", command="view", path=DOG),
        )

    recalled, hits, viewed = serve(vault.root, after)
    assert "Has a dog called Rex." in recalled and [h["key"] for h in hits] == ["dog_name"]
    assert "Has a dog called Rex." in viewed["result"]
    assert not vault.get(TARGET).superseded
