"""A purge while `memfile serve` runs: afterwards neither the HTTP API nor the MCP face finds the memory's
text, and an agent has no way to purge (no MCP tool, no memory-tool command; the CLI refuses it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import fails, in_vault, ok
from helpers.serve import Server, Setup, make_setup

from memfile import Vault
from memfile.memory_tool import COMMANDS

SECRET = "Bob's badge PIN is 4417 for the side door"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    setup = make_setup(tmp_path_factory.mktemp("purge-served"))
    with Vault.open(setup.root, "michael") as vault:
        vault.store("fact", "bob_badge", "Bob's badge opens the front door")
        vault.store("fact", "bob_badge", SECRET)
        vault.store("fact", "office", "The office is in Berlin")
    return setup


def test_after_a_purge_the_served_faces_find_nothing(server: Server, setup: Setup, agent: str, person: str) -> None:
    found = server.request("GET", "/memory/search?q=badge+PIN", agent).json()
    memory_id = found[0]["id"]
    assert SECRET in server.request("GET", f"/memory/{memory_id}", agent).body.decode()

    fails(in_vault(setup.root, "purge", "fact/bob_badge", "--yes", env={"MEMFILE_SOURCE": "agent"}), 2)
    ok(in_vault(setup.root, "purge", "fact/bob_badge", "--yes"))

    for token in (agent, person):
        for path in ("/memory/search?q=badge+PIN", "/memory/recall?q=badge+PIN", "/memory/recall", "/memory/export"):
            answer = server.request("GET", path + ("&" if "?" in path else "?") + "mind=michael", token)
            assert answer.status == 200, (path, answer)
            assert "PIN is 4417" not in answer.body.decode() and "side door" not in answer.body.decode(), path
        assert server.request("GET", f"/memory/{memory_id}?mind=michael", token).status == 404
    assert "Berlin" in server.request("GET", "/memory/search?q=Berlin", agent).body.decode()


def test_the_mcp_face_finds_nothing_and_has_no_purge(setup: Setup) -> None:
    mcp = pytest.importorskip("helpers.mcp")
    with Vault.open(setup.root, "michael") as vault:
        vault.store("fact", "carol_phone", "Carol's private number is 0170 5551234")
        vault.purge("fact/carol_phone")

    async def script(agent: mcp.Agent) -> set[str]:
        await agent.ok("search", query="Carol private number")
        await agent.ok("recall", query="Carol private number")
        await agent.ok("recall")
        await agent.error("show", ref="fact/carol_phone")
        return {tool.name for tool in (await agent.session.list_tools()).tools}

    agent_texts: list[str] = []

    async def run(agent: mcp.Agent) -> set[str]:
        tools = await script(agent)
        agent_texts.extend(agent.texts)
        return tools

    tools = mcp.serve(Path(setup.root), run, "michael")
    assert not any(name.startswith("purge") for name in tools) and "purge" not in COMMANDS
    assert not any("number is 0170 5551234" in text for text in agent_texts)


def test_post_purge_is_a_persons_only(server: Server, setup: Setup, agent: str, person: str) -> None:
    stored = server.request("POST", "/memory", agent, {"category": "fact", "key": "erin", "content": "Erin: 0151 2233"})
    memory_id = stored.json()["id"]
    refused = server.request("POST", f"/memory/{memory_id}/purge", agent, {})
    assert refused.status == 403 and "only a person" in refused.json()["message"]
    assert server.request("POST", f"/memory/{memory_id}/purge", person, {"nope": 1}).status == 400
    short = server.request("POST", f"/memory/{memory_id}/purge?mind=michael", person, {"text": "015"})
    assert short.status == 400 and short.error == "InvalidInput" and "text" in short.json()["message"]
    plan = server.request("POST", f"/memory/{memory_id}/purge?mind=michael", person, {"dry_run": True}).json()
    assert plan["dry_run"] and plan["versions"] == 1 and plan["ref"] == "fact/erin" and plan["commit"] is None
    text = server.request("POST", f"/memory/{memory_id}/purge?mind=michael", person, {"text": "0151 2233"}).json()
    assert text["text"] and text["commit"]
    assert server.request("GET", f"/memory/{memory_id}", agent).json()["content"] == "Erin:"
    done = server.request("POST", f"/memory/{memory_id}/purge?mind=michael", person, {}).json()
    assert done["ref"] == "fact/erin" and not done["dry_run"]
    assert server.request("GET", f"/memory/{memory_id}", agent).status == 404
