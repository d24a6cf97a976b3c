"""The MCP server (`memfile mcp`), driven as an agent drives it: the real stdio server, the official SDK client.

Every test starts `python -m memfile --vault V [--mind M] mcp` as a subprocess
(with the test's isolated HOME and git config) and talks to it through
`mcp.client.stdio.stdio_client` + `ClientSession`, one server per test. The
server's stderr goes to a file and must never hold a Traceback.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import string
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.client.stdio", reason="the MCP SDK is the optional extra memfile-vault[mcp]")

import anyio  # noqa: E402 - after the importorskip: anyio comes with the SDK
from helpers import commit_count, committed_on, fails, git, in_vault, ok, write  # noqa: E402
from helpers.mcp import CALL_TIMEOUT, Agent, serve, server_params  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from memfile import Vault, __version__  # noqa: E402
from memfile.config import DEFAULT_MCP_RECALL_BUDGET  # noqa: E402
from memfile.errors import InvalidInput  # noqa: E402
from memfile.files import lock_holder  # noqa: E402

TOOLS = {"recall", "search", "store", "show", "list", "forget", "expiring", "tags", "memory", "capture"}
READ_ONLY = {"recall", "search", "show", "list", "expiring", "tags"}

ALICE_SECRET = "aardvarkalicepin"
BOB_SECRET = "quokkabobpin"
BOB_SECRET_2 = "wombatbobwifi"
OUTSIDE_SECRET = "narwhaloutside"


# --- driving the real server --------------------------------------------------


def ref(memory: dict[str, Any]) -> str:
    """The `category/key` REF of a memory as the tools return it."""
    return f"{memory['category']}/{memory['key']}"


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file and symlink under the folders (not .git/ nor .memfile/): path -> bytes or link target."""
    found: dict[str, bytes] = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d not in (".git", ".memfile")]
            for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                path = os.path.join(dirpath, name)
                found[path] = (b"-> " + os.readlink(path).encode()) if os.path.islink(path) else Path(path).read_bytes()
    return found


# --- vaults ------------------------------------------------------------------------


@pytest.fixture
def two_minds(tmp_path: Path) -> Path:
    """A vault with minds alice and bob, each holding a secret; bob also has an alice-like key."""
    root = tmp_path / "shared"
    Vault.init(root, "alice", "Alice").close()
    Vault.init(root, "bob", "Bob").close()
    with Vault.open(root, "alice") as alice:
        alice.store("fact", "wifi_password", f"Alice's wifi password is {ALICE_SECRET}", tags=["alicetag"])
        alice.store("preference", "coffee", "Alice drinks flat white, no sugar", tags=["drinks"])
    with Vault.open(root, "bob") as bob:
        bob.store("fact", "secret", f"Bob's bank pin is {BOB_SECRET}", tags=["bobtag"], priority="critical")
        bob.store("fact", "wifi_password", f"Bob's wifi password is {BOB_SECRET_2}", tags=["bobtag"])
    return root


# --- the tools ---------------------------------------------------------------------


def test_tools_are_listed_with_descriptions_and_annotations(sample_copy: Path) -> None:
    async def script(agent: Agent) -> Any:
        return await agent.session.list_tools(), agent.session.initialize_result

    listing, init = serve(sample_copy, script)
    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == TOOLS
    assert init is not None and "recall" in (init.instructions or "") and "unverified" in init.instructions
    assert init.server_info.name == "memfile" and init.server_info.version == __version__
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 80, name  # when to use it, then the method's docstring
        assert tool.annotations is not None, name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.annotations.open_world_hint is False, name
        assert tool.input_schema["type"] == "object"
    assert tools["forget"].annotations.destructive_hint is True is tools["memory"].annotations.destructive_hint
    assert tools["store"].annotations.destructive_hint is False
    assert all(tools[name].annotations.destructive_hint is False for name in READ_ONLY)
    assert set(tools["store"].input_schema["required"]) == {"category", "key", "content"}
    assert "supersedes" in tools["store"].input_schema["properties"]
    assert tools["show"].input_schema["required"] == ["ref"] == tools["forget"].input_schema["required"]
    assert tools["search"].input_schema["required"] == ["query"]
    assert "source" not in tools["store"].input_schema["properties"]  # an agent cannot claim to be the user
    assert "Args:" in tools["search"].description and "supersedes" in tools["store"].description


def test_read_tools_on_the_sample_vault(sample_copy: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["recall"] = await agent.ok("recall")
        out["recall_query"] = await agent.ok("recall", query="how do I back up the postgres database?", budget=800)
        out["recall_small"] = await agent.ok("recall", query="deploy", budget=200, limit=1)
        out["search"] = await agent.ok("search", query="postgres backup")
        out["search_filtered"] = await agent.ok("search", query="synapse", category="project", limit=2)
        out["search_tags"] = await agent.ok("search", query="synapse", tags=["deployment"])
        out["search_none"] = await agent.ok("search", query="xylophonezzz")
        out["show_key"] = await agent.ok("show", ref="user_name")
        out["show_ref"] = await agent.ok("show", ref="identity/user_name")
        out["show_id"] = await agent.ok("show", ref=out["show_key"]["id"])
        out["list"] = await agent.ok("list")
        out["list_identity"] = await agent.ok("list", category="identity")
        out["list_unverified"] = await agent.ok("list", unverified=True)
        out["list_critical"] = await agent.ok("list", priority="critical")
        out["tags"] = await agent.ok("tags")
        out["expiring"] = await agent.ok("expiring", within="3650d")
        out["expiring_none"] = await agent.ok("expiring", within="1m")
        return out

    out = serve(sample_copy, script)
    assert out["recall"].startswith("Mind: Michael's Mind")
    assert "never_delete_db_volume" in out["recall"]  # critical memories are pinned
    assert "Query: how do I back up the postgres database?" in out["recall_query"]
    assert "postgres_backup" in out["recall_query"]
    assert len(out["recall_small"]) <= 200 * 4 + 400  # roughly within the budget (characters / 4)
    assert ref(out["search"][0]) == "skill/postgres_backup"
    assert {"score", "snippet", "rank"} <= set(out["search"][0])
    assert out["search_filtered"] and len(out["search_filtered"]) <= 2
    assert all(hit["category"] == "project" for hit in out["search_filtered"])
    assert all("deployment" in hit["tags"] for hit in out["search_tags"])
    assert out["search_none"] == []
    assert out["show_key"] == out["show_ref"] == out["show_id"]
    assert out["show_key"]["content"] == "Michael Schäfer" or "Michael" in out["show_key"]["content"]
    assert out["show_key"]["mind"] == "michael" and out["show_key"]["verified"] is True
    assert len(out["list"]) >= 15 and all(m["mind"] == "michael" for m in out["list"])
    assert {m["key"] for m in out["list_identity"]} == {"user_name", "user_role", "user_location"}
    assert out["list_unverified"] and all(m["verified"] is False for m in out["list_unverified"])
    assert {m["key"] for m in out["list_critical"]} == {"user_name", "never_delete_db_volume"}
    assert out["tags"][0] == {"tag": "synapse", "count": 6}
    assert [t["count"] for t in out["tags"]] == sorted((t["count"] for t in out["tags"]), reverse=True)
    assert out["expiring_none"] == []
    assert all(m["expires_at"] for m in out["expiring"])
    assert not (sample_copy / ".git").exists()  # reads never create a repository


def test_store_show_forget_and_the_agent_rules(sample_copy: Path) -> None:
    user_name = (sample_copy / "michael" / "identity" / "user_name.md").read_bytes()
    favorite_food = (sample_copy / "michael" / "preference" / "favorite_food.md").read_bytes()

    async def script(agent: Agent) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["stored"] = await agent.ok(
            "store",
            category="fact",
            key="office_wifi",
            content="Office wifi is 'okapi-5'",
            tags=["Office", "wifi"],
            expires="2d",
        )
        out["shown"] = await agent.ok("show", ref="fact/office_wifi")
        out["found"] = await agent.ok("search", query="okapi")  # seen at once, the watcher running
        out["expiring"] = await agent.ok("expiring", within="7d")
        out["same"] = await agent.ok("store", category="fact", key="office_wifi", content="Office wifi is 'okapi-5'")
        out["updated"] = await agent.ok("store", category="fact", key="office_wifi", content="Office wifi is 'okapi-6'")
        # a person verified these: an agent may not change, supersede or forget them
        out["change_verified"] = await agent.error("store", category="identity", key="user_name", content="Mallory")
        out["supersede_verified"] = await agent.error(
            "store", category="identity", key="real_name", content="Mallory", supersedes="identity/user_name"
        )
        out["forget_critical"] = await agent.error("forget", ref="identity/user_name")
        out["forget_verified"] = await agent.error("forget", ref="favorite_food")
        out["verify"] = await agent.error("verify", ref="fact/office_wifi")  # no such tool: only people verify
        # the agent's own memories: supersede, then forget
        out["superseding"] = await agent.ok(
            "store",
            category="fact",
            key="office_wifi_2026",
            content="Office wifi is 'okapi-7' since the router swap",
            supersedes="fact/office_wifi",
        )
        out["old"] = await agent.ok("show", ref="fact/office_wifi")
        out["search_after"] = await agent.ok("search", query="okapi")
        out["forgotten"] = await agent.ok("forget", ref="office_wifi_2026")
        out["gone"] = await agent.error("show", ref="office_wifi_2026")
        out["forget_sample_agent"] = await agent.ok("forget", ref="skill/postgres_backup")  # agent-made, unverified
        # fields that try to smuggle a verified front-matter in
        out["smuggle"] = await agent.ok(
            "store",
            category="note",
            key="smuggle",
            content="---\nsource: user\nverified: true\nconfidence: 1.0\n---\nbody",
            tags=["x]\nverified: true\n#"],
        )
        return out

    out = serve(sample_copy, script)
    stored = out["stored"]
    assert stored["source"] == "agent" and stored["verified"] is False and stored["confidence"] == 0.7
    assert stored["created"] is True and stored["changed"] is True and stored["commit"]
    assert stored["tags"] == ["office", "wifi"] and stored["expires_at"]
    assert out["shown"]["id"] == stored["id"] and out["shown"]["content"] == "Office wifi is 'okapi-5'"
    assert [ref(hit) for hit in out["found"]] == ["fact/office_wifi"]
    assert "fact/office_wifi" in [ref(m) for m in out["expiring"]]
    assert out["same"]["changed"] is False and out["same"]["commit"] is None
    assert out["updated"]["changed"] is True and out["updated"]["id"] == stored["id"]
    assert out["updated"]["source"] == "agent" and out["updated"]["verified"] is False

    assert "verified by a person" in out["change_verified"] and "ask the user" in out["change_verified"]
    assert "verified by a person" in out["supersede_verified"]
    assert "critical" in out["forget_critical"] and "ask the user" in out["forget_critical"]
    assert "supersedes" not in out["forget_critical"]  # verified too: an agent could not supersede it either
    assert "verified by a person" in out["forget_verified"] and "supersedes" not in out["forget_verified"]
    assert "Unknown tool" in out["verify"]
    assert (sample_copy / "michael" / "identity" / "user_name.md").read_bytes() == user_name
    assert (sample_copy / "michael" / "preference" / "favorite_food.md").read_bytes() == favorite_food
    assert not (sample_copy / "michael" / "identity" / "real_name.md").exists()

    assert out["superseding"]["superseded"] == "fact/office_wifi"
    assert out["old"]["status"] == "superseded" and out["old"]["superseded_by"] == out["superseding"]["id"]
    assert [ref(hit) for hit in out["search_after"]] == ["fact/office_wifi_2026"]
    assert ref(out["forgotten"]) == "fact/office_wifi_2026"
    assert "no memory" in out["gone"]
    assert not (sample_copy / "michael" / "fact" / "office_wifi_2026.md").exists()
    assert not (sample_copy / "michael" / "skill" / "postgres_backup.md").exists()

    smuggled = out["smuggle"]
    assert smuggled["source"] == "agent" and smuggled["verified"] is False and smuggled["confidence"] == 0.7
    with Vault.open(sample_copy) as vault:  # read back from the file, as a person's tools would
        again = vault.get("note/smuggle")
        assert again.source == "agent" and again.verified is False and again.confidence == 0.7

    log = git(sample_copy, "log", "--format=%s").splitlines()
    assert log[-1].startswith("init")  # the first write made the repository
    assert "store fact/office_wifi (agent)" in log
    assert "store fact/office_wifi_2026 (agent), superseding fact/office_wifi" in log
    assert "forget fact/office_wifi_2026 (agent)" in log and "forget skill/postgres_backup (agent)" in log
    assert not any("user_name" in subject or "favorite_food" in subject for subject in log)


def test_the_advice_of_a_refused_forget_can_be_followed(sample_copy: Path) -> None:
    async def script(agent: Agent) -> tuple[str, Any]:
        message = await agent.error("forget", ref="preference/favorite_food")  # verified by a person, not critical
        followed = await agent.call(
            "store",
            category="preference",
            key="favorite_food_now",
            content="Now prefers pho over everything",
            supersedes="preference/favorite_food",
        )
        return message, followed

    message, followed = serve(sample_copy, script)
    if "supersedes" in message:  # the refusal advises a supersede: doing so must then work
        assert not followed.is_error, (message, followed.content[0].text)


def test_concurrent_calls_are_served_one_at_a_time(vault: Vault) -> None:
    root = vault.root
    vault.close()
    before = commit_count(root)

    async def script(agent: Agent) -> list[Any]:
        results: list[Any] = [None] * 20

        async def one(i: int) -> None:
            if i % 2:
                results[i] = await agent.ok("store", category="note", key=f"parallel_{i}", content=f"parallel note {i}")
            else:
                results[i] = await agent.ok("search", query="parallel note")

        async with anyio.create_task_group() as group:
            for i in range(20):
                group.start_soon(one, i)
        results.append(await agent.ok("list", category="note"))
        return results

    results = serve(root, script)
    assert all(results[i]["created"] for i in range(1, 20, 2))
    assert len(results[-1]) == 10
    assert commit_count(root) == before + 10


def test_the_server_warms_its_index_between_calls_and_answers_the_same(vault: Vault) -> None:
    """In process (the SDK's server object over Minds and its worker thread): after a call, the idle server
    opens a searcher of its index with what a search hides worked out; a call that comes in meanwhile is
    served, and nothing changes an answer."""
    import asyncio

    from memfile.mcp_server import build_server
    from memfile.model import Source
    from memfile.worker import Caller, Minds

    words = "alpha bravo charlie delta echo foxtrot".split()
    for n in range(200):  # each word in two thirds of them
        path = vault.mind_dir / "note" / f"n{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(word for i, word in enumerate(words) if i not in (n % 6, (n + 1) % 6))
        path.write_text(f"{body} note {n}\n", encoding="utf-8")
    vault.close()
    minds = Minds(vault.root, watch=False)  # its Vaults are used by the worker thread alone, as in `serve`
    caller = Caller("michael", Source.AGENT)

    def warmed() -> bool:
        served = minds._vaults.get("michael")
        store = served._index.store if served is not None else None
        return store is not None and store._searcher is not None and (False, False, False) in store._hidden

    async def scenario() -> tuple[Any, Any, Any, bool]:
        server = build_server(minds, lambda ctx: caller)
        first = await server.call_tool("search", {"query": "alpha bravo", "limit": 50})
        meanwhile = await server.call_tool("search", {"query": "charlie note", "limit": 50})
        for _ in range(400):  # the warm work runs while this test waits
            await asyncio.sleep(0.025)
            if warmed():
                break
        seen = warmed()
        again = await server.call_tool("search", {"query": "alpha bravo", "limit": 50})
        return first, meanwhile, again, seen

    try:
        first, meanwhile, again, seen = asyncio.run(scenario())
    finally:
        minds.close()
    assert seen
    assert first.structured_content == again.structured_content
    assert len(first.structured_content["result"]) == 50
    assert all("charlie" in hit["content"] for hit in meanwhile.structured_content["result"][:10])


def test_the_index_follows_hand_edits_while_the_server_runs(vault: Vault) -> None:
    root = vault.root
    vault.close()

    async def script(agent: Agent) -> list[str]:
        await agent.ok("search", query="anything")  # the index is built, the watcher is up
        (root / "michael" / "fact").mkdir(parents=True, exist_ok=True)
        (root / "michael" / "fact" / "hand_made.md").write_text("The heating code is pelican42\n", encoding="utf-8")
        with Vault.open(root, "michael") as person:  # a person's store, from another Vault, while the server runs
            person.store("fact", "gate_code", "The gate code is heron77")
        found: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(found) < 2:
            found = [ref(hit) for hit in await agent.ok("search", query="pelican42 heron77")]
            await anyio.sleep(0.1)
        return found

    assert sorted(serve(root, script)) == ["fact/gate_code", "fact/hand_made"]


def test_two_agents_on_one_mind_see_each_others_stores(vault: Vault) -> None:
    """A second server on the same mind runs without a watcher (one per mind) and shares the index."""
    root = vault.root
    vault.close()

    async def main() -> list[list[str]]:
        seen: list[list[str]] = []
        with open(root.parent / "a.err", "w") as err_a, open(root.parent / "b.err", "w") as err_b:
            async with (
                stdio_client(server_params(root), errlog=err_a) as (ra, wa),
                ClientSession(ra, wa, read_timeout_seconds=CALL_TIMEOUT) as session_a,
            ):
                await session_a.initialize()
                a = Agent(session_a)
                await a.ok("search", query="warm")  # a's watcher is up
                async with (
                    stdio_client(server_params(root), errlog=err_b) as (rb, wb),
                    ClientSession(rb, wb, read_timeout_seconds=CALL_TIMEOUT) as session_b,
                ):
                    await session_b.initialize()
                    b = Agent(session_b)
                    for i in range(3):
                        await a.ok("store", category="note", key=f"from_a_{i}", content=f"capybara note {i} from a")
                        seen.append([ref(h) for h in await b.ok("search", query="capybara", limit=20)])
                        await b.ok("store", category="note", key=f"from_b_{i}", content=f"capybara note {i} from b")
                        seen.append([ref(h) for h in await a.ok("search", query="capybara", limit=20)])
                    assert a.unexpected == b.unexpected == []
        return seen

    seen = anyio.run(main)
    for i in range(3):
        assert f"note/from_a_{i}" in seen[2 * i]
        assert f"note/from_b_{i}" in seen[2 * i + 1] and len(seen[2 * i + 1]) == 2 * i + 2
    for name in ("a.err", "b.err"):
        assert "Traceback" not in (root.parent / name).read_text()


def test_a_recall_through_mcp_is_recorded_as_the_agents(sample_copy: Path) -> None:
    async def script(agent: Agent) -> str:
        return await agent.ok("recall", query="postgres backup", budget=800)

    text = serve(sample_copy, script)
    with Vault.open(sample_copy) as vault:
        record = vault.last_recall()
    assert record["source"] == "agent" and record["mind"] == "michael"
    assert record["query"] == "postgres backup" and record["budget"] == 800
    assert record["memories"] and all(item["ref"].split("/")[1] in text for item in record["memories"])
    assert "skill/postgres_backup" in [item["ref"] for item in record["memories"]]


def test_a_token_in_an_argument_is_masked_in_the_error_and_in_the_recall_record(vault: Vault) -> None:
    token = "gh" + "p_" + "".join(random.Random(39).choices(string.ascii_letters + string.digits, k=36))

    async def script(agent: Agent) -> list[str]:
        store = {"category": "fact", "key": "k", "content": "x"}
        errors = [
            await agent.error("store", **store | {name: token})
            for name in ("priority", "expires", "supersedes", "confidence", "category", "key")
        ]
        errors.append(await agent.error("show", ref=token))
        errors.append(await agent.error("store", **store | {token: 1}))
        errors.append(await agent.error("store", **store | {"tags": ["t"] * 40_000}))
        await agent.ok("recall", query=f"deploy {token}")
        return errors

    errors = serve(vault.root, script)
    for error in errors[:-1]:
        assert "ghp_…" in error and token[6:-6] not in error, error
    assert "40000 tags" in errors[-1] and "at most 100 tags" in errors[-1]
    assert vault.last_recall()["query"] == "deploy ghp_…" + token[-4:]
    assert token[6:-6] not in (vault.root / ".memfile" / "last_recall-michael.json").read_text(encoding="utf-8")


def test_recall_and_search_as_of_a_date_are_not_an_agents(vault: Vault) -> None:
    """An agent reads its mind as it is now: neither tool takes `at` (over HTTP a Mind Key's `at` is 403), so
    what the user forgot since never comes back into its context; one tried says why and what to do."""
    with committed_on("2026-03-01"):
        vault.store("fact", "door_code", "The door code is 4711")
    vault.forget("fact/door_code")

    async def script(agent: Agent) -> Any:
        listing = await agent.session.list_tools()
        schemas = {tool.name: (set(tool.input_schema["properties"]), tool.description) for tool in listing.tools}
        errors = [await agent.error(name, query="door code", at="2026-03-15") for name in ("recall", "search")]
        return schemas, errors, await agent.ok("recall", query="door code"), await agent.ok("search", query="door")

    schemas, errors, recalled, found = serve(vault.root, script)
    for name in ("recall", "search"):
        arguments, description = schemas[name]
        assert "at" not in arguments and "as it was then" not in description and "\n    at: " not in description, name
    assert "query: what the agent is working on" in schemas["recall"][1] and "record:" not in schemas["recall"][1]
    for error in errors:
        assert "has no argument 'at' (an agent recalls and searches the mind as it is now" in error, error
        assert "to see it as of a date, ask the user); nothing was done" in error, error
    assert "4711" not in recalled and found == []
    assert "4711" in vault.recall(0, at="2026-03-15").text  # the user can look back (CLI, HTTP, console)


# --- isolation -------------------------------------------------------------------------


def test_a_server_bound_to_alice_never_shows_bob(two_minds: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["search"] = await agent.ok("search", query=f"{BOB_SECRET} {BOB_SECRET_2} bank pin wifi password")
        out["search_field"] = await agent.ok("search", query="bobtag tag:bobtag mind:bob")
        out["recall"] = await agent.ok("recall", query=f"what is Bob's bank pin {BOB_SECRET}?", budget=0, limit=50)
        out["recall_plain"] = await agent.ok("recall")
        out["list"] = await agent.ok("list")
        out["list_bobtag"] = await agent.ok("list", tags=["bobtag"])
        out["tags"] = await agent.ok("tags")
        out["expiring"] = await agent.ok("expiring", within="520w")
        out["show_wifi"] = await agent.ok("show", ref="wifi_password")
        out["stored"] = await agent.ok("store", category="fact", key="secret", content="Alice's own secret: none")
        return out

    with Vault.open(two_minds, "bob") as bob:
        bob_ids = [m.id for m in bob.memories()]
        bob_files = snapshot(two_minds / "bob")
    out = serve(two_minds, script, mind="alice")
    assert [ref(hit) for hit in out["search"]] == ["fact/wifi_password"]
    assert out["search"][0]["mind"] == "alice"
    assert out["search_field"] == [] and out["list_bobtag"] == []
    assert {ref(m) for m in out["list"]} == {"fact/wifi_password", "preference/coffee"}
    assert {t["tag"] for t in out["tags"]} == {"alicetag", "drinks"}
    assert out["show_wifi"]["mind"] == "alice" and ALICE_SECRET in out["show_wifi"]["content"]
    assert out["stored"]["path"] == "alice/fact/secret.md"  # the same key as bob's: alice's own file
    out["recall"] = out["recall"].replace(f"Query: what is Bob's bank pin {BOB_SECRET}?", "")  # the query, echoed
    for name in ("search", "recall", "recall_plain", "list", "tags", "expiring", "show_wifi", "stored"):
        text = json.dumps(out[name])
        assert BOB_SECRET not in text and BOB_SECRET_2 not in text and "bob" not in text.lower(), name
        assert not any(bob_id in text for bob_id in bob_ids), name
    assert snapshot(two_minds / "bob") == bob_files


def hostile_refs(bob_id: str) -> list[str]:
    """REFs that try to leave alice's mind, reach bob's memories or break the parser."""
    return [
        "../bob/fact/secret",
        "../bob/fact/secret.md",
        "bob/fact/secret",
        "bob/secret",
        "bob\\fact\\secret",
        "../../etc/passwd",
        "/etc/passwd",
        "/",
        "//etc/passwd",
        "fact/../../bob/fact/secret",
        "fact/../secret",
        "fact\\..\\..\\bob\\fact\\secret",
        "..\\bob",
        "%2e%2e/bob/fact/secret",
        "..%2fbob%2ffact%2fsecret",
        "%2e%2e%2fbob%2ffact%2fsecret",
        "%252e%252e%252fbob",
        "fact%2f..%2f..%2fbob",
        "%2Fetc%2Fpasswd",
        "fact/secret\x00",
        "fact/x\x00/../../bob",
        "%00",
        "~/x",
        "~bob/fact/secret",
        "fact/x/y",
        "fact//secret",
        ".",
        "..",
        "./fact/secret",
        "fact/.",
        "fact/..",
        "secret",
        "fact/secret",
        "bank_pin",
        bob_id,
        bob_id.upper(),
        f"../bob/{bob_id}",
        "ｆact/secret",
        "fact／secret",
        "．．/bob/fact/secret",
        "fact/secrеt",
        "\u202efact/terces",
        "fact/secret.md",
        "secret.md",
        "file:///etc/passwd",
        "http://x/../bob/fact/secret",
        "x" * 5000,
        "a/" * 2000,
        "",
        " ",
        "\n",
        "\t",
        "fact/leak",
        "leak",
        "fact/outside",
        "outside",
        "bobdir/fact/secret",
        "stolen/secret",
    ]


def hostile_stores() -> list[dict[str, Any]]:
    """store arguments whose category, key or supersedes try to leave alice's mind."""
    keys = [
        "../bob/fact/secret",
        "../../etc/evil",
        "secret/../x",
        "x/y",
        "x.md",
        "..",
        ".",
        "",
        " ",
        "X",
        "a" * 101,
        "x\x00",
        "x\\y",
        "%2e%2e",
        "%2e%2e%2fbob",
        "ｘ",
        "~x",
        "-x",
        "_x",
        "x-y",
        "leak",
        "outside",
    ]
    categories = [
        "../fact",
        "bob",
        "bob/fact",
        "fact/..",
        "/etc",
        "fact/",
        "",
        "notacategory",
        "note",
        "context",
        "../bob/fact",
    ]
    supersedes = ["../bob/fact/secret", "bob/fact/secret", "fact/leak", "/etc/passwd", "%2e%2e/bob", "secret"]
    calls: list[dict[str, Any]] = [{"category": "fact", "key": key, "content": "evil"} for key in keys]
    calls += [{"category": category, "key": "evil", "content": "evil"} for category in categories]
    calls += [{"category": "fact", "key": "evil", "content": "evil", "supersedes": ref} for ref in supersedes]
    return calls


def test_hostile_refs_paths_and_symlinks_stay_inside_alices_mind(two_minds: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"---\ncategory: fact\nkey: outside\n---\nOutside: {OUTSIDE_SECRET}\n")
    alice = two_minds / "alice"
    os.symlink(two_minds / "bob" / "fact" / "secret.md", alice / "fact" / "leak.md")  # a file into bob
    os.symlink(outside / "secret.md", alice / "fact" / "outside.md")  # a file outside the vault
    os.symlink("../bob", alice / "bobdir")  # a folder into bob (relative)
    os.symlink(two_minds / "bob" / "fact", alice / "stolen")
    os.symlink(two_minds / "bob" / "fact", alice / "note")  # a category folder that is bob's
    os.symlink(outside, alice / "context")  # a category folder outside the vault
    with Vault.open(two_minds, "bob") as bob:
        bob_id = bob.get("fact/secret").id
    before = snapshot(two_minds, outside)
    commits = commit_count(two_minds)
    refs = hostile_refs(bob_id)
    stores = hostile_stores()
    assert len(refs) >= 20 and len(stores) >= 20

    new_files = {  # written while the server watches: reachable only through alice's symlinks
        str(two_minds / "bob" / "fact" / "new_secret.md"): f"Bob's new pin is {BOB_SECRET} again\n".encode(),
        str(outside / "new.md"): f"Outside again: {OUTSIDE_SECRET}\n".encode(),
    }

    async def script(agent: Agent) -> dict[str, Any]:
        failures: list[str] = []
        await agent.ok("search", query="pin")  # the index is built and the watcher is up
        for path, data in new_files.items():
            Path(path).write_bytes(data)
        (two_minds / "bob" / "fact" / "secret.md").write_text(f"Bob's bank pin is {BOB_SECRET}, changed\n")
        new_files[str(two_minds / "bob" / "fact" / "secret.md")] = (
            two_minds / "bob" / "fact" / "secret.md"
        ).read_bytes()
        started = time.monotonic()
        for ref in refs:
            for tool in ("show", "forget"):
                result = await agent.call(tool, ref=ref)
                if not result.is_error:
                    failures.append(f"{tool}({ref!r}) succeeded")
        for args in stores:
            result = await agent.call("store", **args)
            if not result.is_error:
                failures.append(f"store({args!r}) succeeded")
        for category in ("../bob", "bob", "../bob/fact", "/etc"):
            for tool, args in (("list", {"category": category}), ("search", {"query": "pin", "category": category})):
                if not (await agent.call(tool, **args)).is_error:
                    failures.append(f"{tool}({args!r}) succeeded")
        # and the server still answers, with alice's data only (once the watcher had time for those events)
        await anyio.sleep(max(0.0, 1.5 - (time.monotonic() - started)))
        after = {
            "search": await agent.ok("search", query=f"{ALICE_SECRET} {BOB_SECRET} {OUTSIDE_SECRET} pin outside"),
            "list": await agent.ok("list"),
            "recall": await agent.ok("recall", query="bank pin outside secret", budget=0, limit=50),
        }
        return {"failures": failures, "after": after, "texts": agent.texts}

    out = serve(two_minds, script, mind="alice")
    assert out["failures"] == []
    assert [ref(hit) for hit in out["after"]["search"]] == ["fact/wifi_password"]
    assert {ref(m) for m in out["after"]["list"]} == {"fact/wifi_password", "preference/coffee"}
    for text in out["texts"]:
        assert BOB_SECRET not in text and BOB_SECRET_2 not in text and OUTSIDE_SECRET not in text, text[:300]
        assert "root:x:0:0" not in text
    assert snapshot(two_minds, outside) == before | new_files  # nothing written, removed or replaced anywhere
    assert commit_count(two_minds) == commits


# --- robustness ------------------------------------------------------------------------


def test_malformed_arguments_are_tool_errors_and_the_server_survives(sample_copy: Path) -> None:
    bad_calls: list[tuple[str, dict[str, Any]]] = [
        ("search", {"query": "postgres", "limit": "ten"}),
        ("search", {"query": "postgres", "limit": 0}),
        ("search", {"query": "postgres", "limit": 10**6}),
        ("search", {"query": "postgres", "tags": 5}),
        ("search", {"query": 42}),
        ("search", {"query": ["a", "b"]}),
        ("search", {}),
        ("search", {"query": ""}),
        ("search", {"query": "postgres", "category": "nope"}),
        ("search", {"query": "postgres", "priority": "urgent"}),
        ("recall", {"budget": "lots"}),
        ("recall", {"budget": -5}),
        ("recall", {"limit": 0}),
        ("recall", {"query": {"nested": True}}),
        ("store", {"category": "fact", "key": "k"}),
        ("store", {"category": "fact", "content": "c"}),
        ("store", {"key": "k", "content": "c"}),
        ("store", {"category": "fact", "key": "k", "content": ""}),
        ("store", {"category": "fact", "key": "k", "content": "   \n"}),
        ("store", {"category": "fact", "key": "k", "content": "c", "tags": 7}),
        ("store", {"category": "fact", "key": "k", "content": "c", "confidence": "sure"}),
        ("store", {"category": "fact", "key": "k", "content": "c", "confidence": 1.5}),
        ("store", {"category": "fact", "key": "k", "content": "c", "priority": "urgent"}),
        ("store", {"category": "fact", "key": "k", "content": "c", "expires": "someday"}),
        ("store", {"category": "fact", "key": 5, "content": "c"}),
        ("store", {"category": None, "key": "k", "content": "c"}),
        ("show", {}),
        ("show", {"ref": None}),
        ("show", {"ref": 5}),
        ("show", {"ref": ["user_name"]}),
        ("forget", {}),
        ("forget", {"ref": 3.5}),
        ("list", {"category": "nope"}),
        ("list", {"tags": 5}),
        ("list", {"priority": 1}),
        ("expiring", {"within": "soon"}),
        ("expiring", {"within": "-5d"}),
        ("expiring", {"within": "99999999999d"}),
        ("expiring", {"within": 7}),
        ("no_such_tool", {}),
        ("verify", {"ref": "user_name"}),
        ("edit", {"ref": "user_name"}),
        ("", {}),
    ]

    async def script(agent: Agent) -> dict[str, Any]:
        wrong, said = [], {}
        for name, args in bad_calls:
            result = await agent.call(name, **args)
            if not result.is_error:
                wrong.append((name, args))
            elif not result.content or not getattr(result.content[0], "text", ""):
                wrong.append((name, args, "an error without a message"))
            else:
                said[f"{name} {args}"] = result.content[0].text
        # odd but valid queries: answered, not crashed
        odd = [
            await agent.call("search", query=q)
            for q in ('"unclosed', "AND OR NOT (((", "*", "tag:", "x" * 20000, "🦜 emoji ∑ ünïcödé", "\x00nul")
        ]
        return {
            "wrong": wrong,
            "said": said,
            "odd": odd,
            "after": await agent.ok("show", ref="user_name"),
            "tags": await agent.ok("tags"),
        }

    out = serve(sample_copy, script)
    assert out["wrong"] == []
    pydantics = [text for text in out["said"].values() if "pydantic" in text or "validation error" in text]
    assert pydantics == [], pydantics  # memfile's words, not the SDK's validation report
    said = out["said"]
    assert (
        "'confidence' must be a number, not \"sure\"; nothing was done"
        in said["store {'category': 'fact', 'key': 'k', 'content': 'c', 'confidence': 'sure'}"]
    )
    assert "'tags' must be a list of text, not 5" in said["list {'tags': 5}"]
    assert "the argument 'query' is missing" in said["search {}"]
    assert all(result.content is not None for result in out["odd"])
    assert out["after"]["key"] == "user_name" and out["tags"]
    assert not (sample_copy / "michael" / "fact" / "k.md").exists()


def _server_pids(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "memfile" in cmdline and int(entry) != os.getpid():
                pids.append(int(entry))
    return pids


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the server's pid through /proc")
def test_the_server_exits_by_itself_when_the_client_disconnects(vault: Vault) -> None:
    root = vault.root
    vault.close()
    found: dict[str, Any] = {}

    async def script(agent: Agent) -> None:
        await agent.ok("store", category="fact", key="bye", content="stored just before the client leaves")
        await agent.ok("search", query="client leaves")
        found["pids"] = _server_pids(str(root))
        found["watcher"] = lock_holder(root / ".memfile" / "watch-michael.lock")
        found["left_at"] = time.monotonic()

    serve(root, script)
    took = time.monotonic() - found["left_at"]
    assert len(found["pids"]) == 1 and found["watcher"] == found["pids"][0]
    # the SDK closes stdin, waits 2 s, then kills: a server that exits by itself is back well before that
    assert took < 1.8, f"the server took {took:.1f} s to stop (killed by the client?)"
    with pytest.raises(ProcessLookupError):
        os.kill(found["pids"][0], 0)
    assert _server_pids(str(root)) == []
    assert lock_holder(root / ".memfile" / "watch-michael.lock") is None  # the watcher let go
    assert not (root / ".memfile" / "watch-michael.clean").exists()


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def test_the_server_exit_code_on_eof_and_on_sigterm(vault: Vault) -> None:
    """A raw JSON-RPC client: EOF on stdin ends the server with exit code 0; SIGTERM ends it too."""
    root = vault.root
    vault.close()
    import mcp_types

    argv = [sys.executable, "-m", "memfile", "--vault", str(root), "mcp"]
    for how in ("eof", "sigterm"):
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ)
        )
        try:
            _rpc(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION
                        if hasattr(mcp_types, "LATEST_PROTOCOL_VERSION")
                        else "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "0"},
                    },
                },
            )
            assert proc.stdout is not None
            reply = json.loads(proc.stdout.readline())
            assert reply["id"] == 1 and "result" in reply, reply
            _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _rpc(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "search", "arguments": {"query": "anything"}},
                },
            )
            reply = json.loads(proc.stdout.readline())
            assert reply["id"] == 2 and reply["result"].get("isError") in (None, False), reply
            if how == "eof":
                proc.stdin.close()  # type: ignore[union-attr]
            else:
                proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = proc.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
        if how == "eof":
            assert code == 0, stderr
            assert "Traceback" not in stderr, stderr
        else:
            assert code in (0, -signal.SIGTERM, 128 + signal.SIGTERM), (code, stderr)
        assert lock_holder(root / ".memfile" / "watch-michael.lock") is None, how


def test_the_server_refuses_to_start_without_one_clear_mind(two_minds: Path) -> None:
    """No default mind, an unknown mind, a mind name that climbs, a mind that is a symlink to another: exit, say why."""
    config = two_minds / "memfile.toml"
    config.write_text(config.read_text().replace('default_mind = "alice"', ""))
    os.symlink(two_minds / "bob", two_minds / "evil")
    cases = {
        None: ["--mind", "alice", "bob"],
        "carol": ["carol", "does not exist"],
        "../bob": ["mind"],
        "evil": ["symlink"],
        "ALICE": ["mind"],
    }
    for mind, expected in cases.items():
        argv = (
            [sys.executable, "-m", "memfile", "--vault", str(two_minds)] + (["--mind", mind] if mind else []) + ["mcp"]
        )
        proc = subprocess.run(argv, input=b"", capture_output=True, env=dict(os.environ), timeout=30)
        stderr = proc.stderr.decode(errors="replace")
        assert proc.returncode not in (0, None) and "Traceback" not in stderr, (mind, proc.returncode, stderr)
        assert all(word in stderr for word in expected), (mind, stderr)
        assert proc.stdout == b"", mind  # nothing on stdout, the protocol channel


def test_the_memory_tool_answers_loops_long_names_deep_paths_and_secrets_in_its_words(vault: Vault) -> None:
    (vault.mind_dir / "loop").symlink_to("loop")
    token = "ghp_" + "Zq8Wm2Kx7Lp4" * 3
    before = snapshot(vault.mind_dir)

    async def script(agent: Agent) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["loop"] = await agent.error("memory", command="view", path="/memories/loop/x.md")
        out["listed"] = (await agent.ok("memory", command="view", path="/memories"))["result"]
        long_name = "/memories/note/" + "a" * 300 + ".md"
        out["long"] = await agent.error("memory", command="create", path=long_name, file_text="x")
        deep = "/memories/" + "a/" * 2000 + "x.md"
        out["deep"] = await agent.error("memory", command="create", path=deep, file_text="x")
        out["secret"] = await agent.error(
            "memory", command="create", path="/memories/note/ci.md", file_text=f"CI token {token}"
        )
        return out

    out = serve(vault.root, script)  # `serve` fails on any "failed unexpectedly" answer and any traceback
    assert "symbolic link that leads in a circle" in out["loop"] and "loop" not in out["listed"]
    assert "a name of 303 bytes" in out["long"] and "2000 folders down" in out["deep"]
    assert "/memories/note/ci.md looks like it holds a secret: line 1 looks like a GitHub token" in out["secret"]
    assert "ask the user" in out["secret"] and "--allow-secret" not in out["secret"]
    assert snapshot(vault.mind_dir) == before


def test_the_memory_tool_inserts_at_line_0_below_the_front_matter(vault: Vault) -> None:
    async def script(agent: Agent) -> str:
        await agent.ok("memory", command="create", path="/memories/note/todo.md", file_text="- milk\n")
        answer = await agent.ok(
            "memory", command="insert", path="/memories/note/todo.md", insert_line=0, insert_text="# Todo"
        )
        return str(answer["result"])

    assert "Line 0 is the top of the memory's text, below its front-matter" in serve(vault.root, script)
    assert vault.get("note/todo").content == "# Todo\n- milk"


# ==============================================================================================================
# The MCP face on hostile and careless input (issue 21, items 17, 18 and 21), and the query size cap on every face.
#
# Requests the SDK client cannot even send (a lone surrogate, JSON nested 100,000
# deep, a line that is not JSON) go through a raw JSON-RPC client over the real
# server's stdin and stdout; everything else goes through the official SDK client
# (`serve`, above). Time bounds are generous (a tenth of what the broken code
# took at least), so they never depend on the machine's load.
# ==============================================================================================================


#: The documented query size limit (characters), public like the exit codes.
MAX_QUERY_CHARS = 4096
#: Longest wait for one answer of the raw client (the broken server never answered in 60 s).
ANSWER_TIMEOUT = 20.0
#: Longest a refused or cheap long query may take (20 to 44 s before the cap).
QUICK = 10.0

LONG_WORD = "a" * 80_000
BIG_QUERY = "ordinary words of a pasted document " * 300_000  # about 10 MB


# --- a raw JSON-RPC client --------------------------------------------------------------


class RawServer:
    """`memfile mcp` driven line by line: what an agent's client writes, byte for byte."""

    def __init__(self, root: Path) -> None:
        argv = [sys.executable, "-m", "memfile", "--vault", str(root), "mcp", "--no-watch"]
        self.errlog = root.parent / f"raw-mcp-{time.monotonic_ns()}.err"
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog.open("wb"), env=dict(os.environ)
        )
        self.replies: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(line)

    def send(self, line: str) -> None:
        """Write one line; a lone surrogate in `line` goes out as the `\\ud800` escape a JSON encoder makes."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            return json.loads(self.replies.get(timeout=ANSWER_TIMEOUT))
        except queue.Empty:
            raise AssertionError(f"no answer within {ANSWER_TIMEOUT} s") from None

    def start(self) -> None:
        self.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )
        )
        assert self.answer()["id"] == 1
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def call(self, id_: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
            )
        )
        return self.answer()

    def stop(self) -> str:
        """Close stdin, wait for the server to exit; its stderr."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.errlog.read_text(encoding="utf-8", errors="replace")


def _message(reply: dict[str, Any]) -> str:
    """The text of a tool error or a JSON-RPC error; fails on a success."""
    if "error" in reply:
        return reply["error"]["message"]
    result = reply["result"]
    assert result.get("isError") is True, reply
    return " ".join(block.get("text", "") for block in result["content"])


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- item 17: every request gets an answer ---------------------------------------------


def test_a_lone_surrogate_deep_nesting_or_a_broken_line_is_answered_and_the_server_goes_on(sample_copy: Path) -> None:
    server = RawServer(sample_copy)
    try:
        server.start()
        call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
        cases: list[tuple[str, int | None, list[str]]] = [
            # a model that split an emoji: valid JSON, not a whole character
            (call % (2, "search", '{"query":"bad \\ud800 x"}'), 2, ["surrogate", "query"]),
            (
                call % (3, "store", '{"category":"fact","key":"k","content":"half \\udc00 an emoji"}'),
                3,
                ["surrogate", "content"],
            ),
            (call % (4, "search", '{"qu\\ud83dery":"x"}'), 4, ["surrogate"]),
            (call % (5, "search", '{"query":%s}' % _deep(100_000)), 5, ["nested"]),
            (call % (6, "store", '{"category":"fact","key":"k","content":"c","tags":%s}' % _deep(300)), 6, []),
            (call % (7, "search", '{"query":%s}' % _deep(150)), 7, []),  # deep, within what the parser reads
            # the id after a deep member: still found
            (
                '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search","arguments":{"query":%s}},"id":8}'
                % _deep(100_000),
                8,
                ["nested"],
            ),
            ('{"jsonrpc":"2.0","id":"nine","method":5}', "nine", []),  # JSON, but not a JSON-RPC request
            ("this is not JSON", None, ["JSON"]),
            (
                '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}',
                10,
                [],
            ),  # cut short
        ]
        for line, expected_id, words in cases:
            started = time.monotonic()
            server.send(line)
            reply = server.answer()
            assert reply.get("id") == expected_id, (line[:120], reply)
            text = _message(reply)
            assert text and all(word in text for word in words), (line[:120], text)
            assert time.monotonic() - started < ANSWER_TIMEOUT
        after = server.call(11, "search", {"query": "postgres backup"})
        assert after["id"] == 11 and not after["result"].get("isError"), after
        assert "postgres_backup" in json.dumps(after)
    finally:
        stderr = server.stop()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not (sample_copy / "michael" / "fact" / "k.md").exists()


# --- item 18: the query size cap, on every face ------------------------------------------


def test_the_python_api_refuses_a_long_query_quickly_and_names_the_limit(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    for text in (LONG_WORD, BIG_QUERY, "x" * (MAX_QUERY_CHARS + 1)):
        for name, call in (
            ("search", lambda: vault.search(text)),
            ("recall", lambda: vault.recall(query=text)),
            ("recall_items", lambda: vault.recall(query=text).items),
        ):
            started = time.monotonic()
            with pytest.raises(InvalidInput) as caught:
                call()
            assert time.monotonic() - started < QUICK, (name, len(text))
            message = str(caught.value)
            assert f"{MAX_QUERY_CHARS:,}" in message and "characters" in message, message
            assert len(message) < 600, (name, len(message))  # the query is not echoed whole
            assert caught.value.field == "query"
    for text in ("bad \ud800 x", 42):  # half a character (a Python caller's), or not text at all
        with pytest.raises(InvalidInput, match="query"):
            vault.search(text)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="query"):
            vault.recall(query=text)  # type: ignore[arg-type]
    # at the limit: answered, and quickly even as one long word
    assert [hit.memory.key for hit in vault.search("alpha " + "b" * (MAX_QUERY_CHARS - 6))] == ["alpha"]
    started = time.monotonic()
    assert vault.search("q" * MAX_QUERY_CHARS) == []
    assert vault.search("ก" * MAX_QUERY_CHARS) == []  # Thai: bigrams
    assert time.monotonic() - started < QUICK


def test_the_cli_refuses_a_long_query_quickly(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    root = vault.root
    vault.close()
    word = "a" * 100_000
    words = "hello world " * 8_000  # 96 KB: about the most one argument may hold
    for args in (("search", word), ("search", words), ("recall", "--query", word), ("recall", "--query", words)):
        started = time.monotonic()
        result = fails(in_vault(root, *args), 2)
        assert time.monotonic() - started < QUICK, args[:-1]
        assert f"{MAX_QUERY_CHARS:,}" in result.stderr and len(result.stderr) < 800, result.stderr[:800]
    assert "alpha" in ok(in_vault(root, "search", "alpha")).stdout


def test_mcp_refuses_a_long_query_quickly_and_keeps_answering(vault: Vault) -> None:
    vault.store("fact", "alpha", "alpha bravo charlie")
    root = vault.root
    vault.close()

    async def script(agent: Agent) -> list[Any]:
        out = []
        for tool, args in (
            ("search", {"query": LONG_WORD}),
            ("recall", {"query": LONG_WORD}),
            ("search", {"query": BIG_QUERY}),
            ("recall", {"query": BIG_QUERY}),
        ):
            started = time.monotonic()
            message = await agent.error(tool, **args)
            out.append((tool, len(args["query"]), time.monotonic() - started, message))
        out.append(await agent.ok("search", query="alpha"))
        return out

    *refused, after = serve(root, script, watch=False)
    for tool, size, took, message in refused:
        assert took < QUICK, (tool, size, took)
        assert f"{MAX_QUERY_CHARS:,}" in message and len(message) < 600, (tool, message[:600])
    assert [hit["key"] for hit in after] == ["alpha"]


# --- item 21: errors for agents, unknown arguments, recall's budget ---------------------------

#: What an agent cannot act on: a command line, an exit code, a file that does not ship.
CLI_TALK = re.compile(
    r"memfile (?:init|recall|search|store|show|list|forget|verify|edit|reactivate|doctor|sync"
    r"|resolve|history|log|restore|undo|remote|mcp|watch|expiring|tags)\b"
    r"|exit code|SPEC|--[a-z]|memfile error"
)


def test_tool_errors_and_descriptions_speak_to_an_agent(sample_copy: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        listing = await agent.session.list_tools()
        return {
            "descriptions": {tool.name: tool.description for tool in listing.tools},
            "not_found": await agent.error("show", ref="no_such_memory"),
            "forget_missing": await agent.error("forget", ref="fact/no_such_memory"),
            "forget_verified": await agent.error("forget", ref="preference/favorite_food"),
            "forget_critical": await agent.error("forget", ref="identity/user_name"),
            "critical": await agent.error("store", category="fact", key="k", content="c", priority="critical"),
            "bad_category": await agent.error("list", category="nope"),
            "bad_query": await agent.error("search", query="the a is"),
        }

    out = serve(sample_copy, script)
    for name, text in out.pop("descriptions").items():
        assert not CLI_TALK.search(text or ""), (name, CLI_TALK.search(text or ""))
    for name, text in out.items():
        assert not CLI_TALK.search(text), (name, text)
    assert "`list`" in out["not_found"] or "`search`" in out["not_found"], out["not_found"]
    assert "`search`" in out["forget_missing"] or "`list`" in out["forget_missing"], out["forget_missing"]
    assert "ask the user" in out["forget_verified"] and "ask the user" in out["forget_critical"]
    assert "high" in out["critical"] and "ask the user" in out["critical"]


def test_unknown_arguments_are_refused_by_name(sample_copy: Path) -> None:
    async def script(agent: Agent) -> dict[str, Any]:
        return {
            "verified": await agent.error("store", category="fact", key="claimed", content="c", verified=True),
            "source": await agent.error("store", category="fact", key="claimed", content="c", source="user"),
            "typo": await agent.error("search", querry="postgres"),
            "two": await agent.error("list", catgory="fact", unverifed=True),
            "recall": await agent.error("recall", quer="postgres", budget=100),
            "tags": await agent.error("tags", all=True),
            "fine": await agent.ok("search", query="postgres"),
        }

    out = serve(sample_copy, script)
    assert "verified" in out["verified"] and "category" in out["verified"]  # the bad name and the good ones
    assert "source" in out["source"]
    assert "querry" in out["typo"] and "query" in out["typo"]
    assert "catgory" in out["two"] and "unverifed" in out["two"]
    assert "quer" in out["recall"] and "'quer'" in out["recall"]
    assert "'all'" in out["tags"]
    assert out["fine"]
    assert not (sample_copy / "michael" / "fact" / "claimed.md").exists()


def test_recall_over_mcp_has_a_default_budget(vault: Vault) -> None:
    root = vault.root
    vault.store("fact", "short", "a short fact to recall")
    vault.close()
    paste = "A pasted log line that goes on and on. " * 52_000  # about 2 MB
    write(root / "michael" / "note" / "paste.md", "---\ncategory: note\nkey: paste\n---\n" + paste)

    async def script(agent: Agent) -> tuple[str, ...]:
        return (
            await agent.ok("recall"),
            await agent.ok("recall", query="pasted log"),
            await agent.ok("recall", limit=3),
            await agent.ok("recall", budget=0),
        )

    *bounded, unlimited = serve(root, script, watch=False)
    budget = DEFAULT_MCP_RECALL_BUDGET  # `[mcp] recall_budget` when memfile.toml does not set it
    assert budget == 2000
    for text in bounded:
        assert len(text) <= budget * 4 + 2000, len(text)
        assert "short" in text and "paste" in text
        assert not CLI_TALK.search(text), CLI_TALK.search(text)  # the closing line names the `show` tool
    assert len(unlimited) > 2_000_000  # no limit, when the agent asks for none (budget 0)
    with Vault.open(root) as again:  # the library and the CLI keep their own default: the whole mind
        assert len(again.recall()) > 1_000_000


def test_recall_over_mcp_follows_the_budget_of_memfile_toml(vault: Vault) -> None:
    root = vault.root
    for n in range(40):
        vault.store("fact", f"fact_{n}", f"fact number {n} with a few words to fill the recall " * 3)
    vault.close()
    config = root / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[mcp]\nrecall_budget = 300\n", encoding="utf-8")

    async def script(agent: Agent) -> tuple[str, str]:
        listing = await agent.session.list_tools()
        description = next(tool.description for tool in listing.tools if tool.name == "recall")
        return await agent.ok("recall"), description or ""

    text, description = serve(root, script, watch=False)
    assert len(text) <= 300 * 4 + 400, len(text)
    assert "300 tokens" in description
