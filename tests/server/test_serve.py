"""`memfile serve`'s HTTP API, through a real server process on a loopback port and a real HTTP client.

One server serves the whole module (starting one per test would be most of the time spent); each test
uses memories of its own (keys named after the test), so none depends on another's. The life cycle
(signals, bind rules, sockets) is in test_serve_lifecycle.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from helpers import DEADLINE, GOLDEN, SYNAPSE_FIELDS, git, wait_until
from helpers.serve import Server, Setup, make_setup, read_answer, server_env, start_server

from memfile.keys import KeyStore

MEMFILE_FIELDS = {"status", "superseded_by", "path", "extra", "has_front_matter", "id_derived"}


def store(server: Server, token: str, key: str, content: str = "some text", **fields: object) -> dict:
    answer = server.request("POST", "/memory", token, {"category": "fact", "key": key, "content": content, **fields})
    assert answer.status in (200, 201), answer
    return answer.json()


# --- Synapse's endpoints ---------------------------------------------------------------------------


def test_post_memory_creates_201_then_updates_200_with_synapse_fields(server: Server, agent: str) -> None:
    first = server.request(
        "POST",
        "/memory",
        agent,
        {"category": "fact", "key": "post_twice", "content": "The office is in Berlin", "tags": ["Work", "office"]},
    )
    assert first.status == 201
    memory = first.json()
    assert {*SYNAPSE_FIELDS, *MEMFILE_FIELDS} <= set(memory)
    assert "mind" not in memory
    assert memory["mind_id"] == "michael"
    assert memory["source"] == "agent" and memory["verified"] is False and memory["confidence"] == 0.7
    assert memory["tags"] == ["work", "office"] and memory["created"] is True
    second = server.request(
        "POST", "/memory", agent, {"category": "fact", "key": "post_twice", "content": "The office is in Hamburg"}
    )
    assert second.status == 200
    assert second.json()["id"] == memory["id"] and second.json()["content"] == "The office is in Hamburg"
    assert second.json()["created"] is False and second.json()["changed"] is True


def test_post_memory_takes_every_synapse_field(server: Server, person: str) -> None:
    memory = store(
        server,
        person,
        "all_fields",
        "Every field",
        priority="high",
        confidence=0.5,
        expires_at="2099-01-01T00:00:00Z",
        source="agent",
        tags="a, b",
    )
    assert memory["priority"] == "high" and memory["confidence"] == 0.5 and memory["source"] == "agent"
    assert memory["expires_at"] == "2099-01-01T00:00:00Z" and memory["tags"] == ["a", "b"]


def test_put_updates_and_refuses_a_new_category_or_key(server: Server, agent: str) -> None:
    memory = store(server, agent, "put_me", "before")
    answer = server.request("PUT", f"/memory/{memory['id']}", agent, {"content": "after", "tags": ["x"]})
    assert answer.status == 200
    assert answer.json()["content"] == "after" and answer.json()["tags"] == ["x"]
    assert answer.json()["id"] == memory["id"]
    same = server.request("PUT", f"/memory/{memory['id']}", agent, {"category": "fact", "key": "put_me"})
    assert same.status == 200 and same.json()["changed"] is False
    for change in ({"category": "note"}, {"key": "another_key"}):
        refused = server.request("PUT", f"/memory/{memory['id']}", agent, {**change, "content": "lost?"})
        assert refused.status == 400, refused
        assert refused.error == "InvalidInput" and next(iter(change)) in refused.json()["message"]
    assert server.request("GET", f"/memory/{memory['id']}", agent).json()["content"] == "after"


def test_put_expires_at_null_means_never(server: Server, agent: str) -> None:
    memory = store(server, agent, "put_expiry", "soon gone", expires_at="3d")
    assert memory["expires_at"] is not None
    answer = server.request("PUT", f"/memory/{memory['id']}", agent, {"expires_at": None})
    assert answer.status == 200 and answer.json()["expires_at"] is None


def test_recall_is_plain_text_by_default_and_json_on_request(server: Server, agent: str) -> None:
    store(server, agent, "recall_marker", "The zebra crossing is on Elm Street")
    text = server.request("GET", "/memory/recall", agent)
    assert text.status == 200 and text.headers["content-type"] == "text/plain; charset=utf-8"
    assert "zebra crossing" in text.body.decode() and "[unverified]" in text.body.decode()
    start = server.request("GET", "/memory", agent)
    assert start.status == 200 and start.headers["content-type"].startswith("text/plain")
    assert "zebra crossing" in start.body.decode()
    queried = server.request("GET", "/memory/recall?q=zebra&budget=500&limit=3", agent)
    assert "zebra crossing" in queried.body.decode()
    report = server.request("GET", "/memory/recall?q=zebra&format=json", agent).json()
    assert report["mind_id"] == "michael" and report["query"] == "zebra"
    assert any(m["key"] == "recall_marker" and m["mind_id"] == "michael" for m in report["memories"])


def test_search_with_repeated_tags_and_the_cli_filters(server: Server, agent: str) -> None:
    store(server, agent, "search_both", "Deploy the walrus service on vps1", tags=["walrus", "deploy"])
    store(server, agent, "search_one", "Deploy the walrus docs", tags=["walrus"])
    hits = server.request("GET", "/memory/search?q=walrus+deploy&tag=walrus&tag=deploy", agent).json()
    assert [h["key"] for h in hits] == ["search_both"]
    assert {"score", "snippet", "rank", "mind_id"} <= set(hits[0])
    loose = server.request("GET", "/memory/search?q=walrus&category=fact&unverified=true&limit=1", agent).json()
    assert len(loose) == 1 and loose[0]["key"] in ("search_both", "search_one")
    none = server.request("GET", "/memory/search?q=walrus&category=identity", agent).json()
    assert none == []
    missing = server.request("GET", "/memory/search?tag=walrus", agent)
    assert missing.status == 400 and "q" in missing.json()["message"]


def test_by_tag_is_case_insensitive(server: Server, agent: str) -> None:
    store(server, agent, "tagged_lynx", "A lynx", tags=["Lynx"])
    found = server.request("GET", "/memory/by-tag?tag=LYNX", agent).json()
    assert [m["key"] for m in found] == ["tagged_lynx"]
    assert server.request("GET", "/memory/by-tag", agent).status == 400


def test_expiring_within(server: Server, agent: str) -> None:
    store(server, agent, "expires_soon", "Gone in two days", expires_at="2d")
    store(server, agent, "expires_later", "Gone in a month", expires_at="30d")
    soon = {m["key"] for m in server.request("GET", "/memory/expiring?within=7d", agent).json()}
    assert "expires_soon" in soon and "expires_later" not in soon
    default = {m["key"] for m in server.request("GET", "/memory/expiring", agent).json()}
    assert default == soon
    bad = server.request("GET", "/memory/expiring?within=soon", agent)
    assert bad.status == 400 and bad.error == "InvalidInput" and "within" in bad.json()["message"]


def test_verify_needs_a_persons_token(server: Server, agent: str, person: str) -> None:
    memory = store(server, agent, "verify_me", "Needs a person")
    refused = server.request("POST", f"/memory/{memory['id']}/verify", agent)
    assert refused.status == 403 and refused.error == "Refused"
    assert server.request("GET", f"/memory/{memory['id']}", agent).json()["verified"] is False
    done = server.request("POST", f"/memory/{memory['id']}/verify", person)
    assert done.status == 200 and done.json()["verified"] is True and done.json()["changed"] is True


# --- extensions --------------------------------------------------------------------------------------


def test_get_delete_and_history_of_one_memory(server: Server, agent: str) -> None:
    memory = store(server, agent, "short_lived", "first")
    store(server, agent, "short_lived", "second")
    by_id = server.request("GET", f"/memory/{memory['id']}", agent)
    by_key = server.request("GET", "/memory/short_lived", agent)
    assert by_id.status == by_key.status == 200 and by_id.json() == by_key.json()
    assert by_id.json()["content"] == "second" and by_id.json()["mind_id"] == "michael"
    history = server.request("GET", f"/memory/{memory['id']}/history", agent).json()
    assert [v["memory"]["content"] for v in history[:2]] == ["second", "first"]
    assert history[0]["memory"]["mind_id"] == "michael" and history[0]["source"] == "agent"
    gone = server.request("DELETE", f"/memory/{memory['id']}", agent)
    assert gone.status == 200 and gone.json()["content"] == "second"
    assert server.request("GET", f"/memory/{memory['id']}", agent).status == 404
    assert server.request("GET", f"/memory/{memory['id']}/history", agent).json()[0]["removed"] is True


def test_delete_memory_by_filters_dry_run_then_one_commit(server: Server, setup: Setup, person: str) -> None:
    for key in ("bulk_one", "bulk_two"):
        store(server, person, key, tags=["bulk_http"])
    store(server, person, "bulk_other", tags=["bulk_http"], category="note")
    head = git(setup.root, "rev-parse", "HEAD").strip()
    planned = server.request("DELETE", "/memory?tag=bulk_http&category=fact&dry_run=true", person)
    assert planned.status == 200, planned
    assert planned.json()["dry_run"] is True and planned.json()["commit"] is None
    assert [m["key"] for m in planned.json()["forgotten"]] == ["bulk_one", "bulk_two"]
    assert planned.json()["forgotten"][0]["mind_id"] == "michael"
    assert git(setup.root, "rev-parse", "HEAD").strip() == head
    done = server.request("DELETE", "/memory?tag=bulk_http&category=fact", person)
    assert done.status == 200, done
    assert [m["key"] for m in done.json()["forgotten"]] == ["bulk_one", "bulk_two"]
    assert done.json()["commit"] == git(setup.root, "rev-parse", "HEAD").strip()
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "forget 2 memories (user)"
    assert git(setup.root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"
    assert server.request("GET", "/memory/bulk_one", person).status == 404
    assert server.request("GET", "/memory/bulk_other", person).status == 200
    none = server.request("DELETE", "/memory", person)
    assert none.status == 400 and "?tag=" in none.json()["message"] and "?older_than=" in none.json()["message"]
    bad = server.request("DELETE", "/memory?older_than=soon", person)
    assert bad.status == 400 and "older_than" in bad.json()["message"]
    unknown = server.request("DELETE", "/memory?everything=true", person)
    assert unknown.status == 400 and "everything" in unknown.json()["message"]


def test_a_mind_keys_delete_by_filters_forgets_only_its_own_unverified_memories(
    server: Server, setup: Setup, agent: str, person: str
) -> None:
    mine = store(server, agent, "bulk_agent_guess", tags=["bulk_agent"])
    checked = store(server, agent, "bulk_agent_checked", tags=["bulk_agent"])
    assert server.request("POST", f"/memory/{checked['id']}/verify", person).status == 200
    persons = store(server, person, "bulk_agent_persons", tags=["bulk_agent"])
    critical = store(server, person, "bulk_agent_critical", tags=["bulk_agent"], priority="critical", source="agent")
    done = server.request("DELETE", "/memory?tag=bulk_agent", agent)
    assert done.status == 200, done
    assert [m["id"] for m in done.json()["forgotten"]] == [mine["id"]]
    assert {m["id"] for m in done.json()["left_out"]} == {checked["id"], persons["id"], critical["id"]}
    for kept in (checked, persons, critical):
        assert server.request("GET", f"/memory/{kept['id']}", person).status == 200
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "forget 1 memory (agent)"
    refused = server.request("DELETE", "/memory?tag=bulk_agent&source=user", agent)
    assert refused.status == 403 and refused.error == "Refused"
    assert server.request("GET", f"/memory/{persons['id']}", person).status == 200


def test_health_needs_no_credential_and_says_nothing(server: Server) -> None:
    answer = server.request("GET", "/health")
    assert answer.status == 200 and answer.json() == {"status": "ok"}


def test_openapi_document_is_valid_and_marks_memfiles_extensions(server: Server) -> None:
    spec = server.request("GET", "/openapi.json").json()
    check_openapi(spec)
    extensions = {
        (path, method)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if op.get("x-memfile-extension")
    }
    synapse = {(p, m) for p, item in spec["paths"].items() for m in item} - extensions
    assert synapse == {
        ("/memory", "post"),
        ("/memory/{id}", "put"),
        ("/memory/recall", "get"),
        ("/memory/search", "get"),
        ("/memory/by-tag", "get"),
        ("/memory/expiring", "get"),
        ("/memory/{id}/verify", "post"),
    }


def test_the_openapi_document_is_the_golden_one(server: Server) -> None:
    """GET /openapi.json is tests/golden/openapi.json to the byte (keys in order), /mcp left out without the
    MCP SDK: no endpoint, parameter, status or description changes unnoticed."""
    from memfile.server.app import openapi_document

    golden = (GOLDEN / "openapi.json").read_text(encoding="utf-8")
    assert json.dumps(openapi_document(mcp=True), indent=2, ensure_ascii=False) + "\n" == golden
    without_mcp = json.loads(golden)
    del without_mcp["paths"]["/mcp"]
    assert json.dumps(openapi_document(mcp=False), indent=2) == json.dumps(without_mcp, indent=2)
    assert server.request("GET", "/openapi.json").json() == json.loads(golden)


def check_openapi(spec: dict) -> None:
    """The structure of an OpenAPI 3.1 document, as far as it can be checked without a validator package."""
    assert spec["openapi"].startswith("3.1.") and {"title", "version"} <= set(spec["info"])
    operation_ids = []
    for path, item in spec["paths"].items():
        assert path.startswith("/")
        templated = {part[1:-1] for part in path.split("/") if part.startswith("{")}
        for method, operation in item.items():
            assert method in {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
            operation_ids.append(operation["operationId"])
            assert operation["responses"], (path, method)
            for status in operation["responses"]:
                assert status == "default" or (len(status) == 3 and status[0] in "12345"), status
            params = [resolve(spec, p) for p in operation.get("parameters", [])]
            assert {p["name"] for p in params if p["in"] == "path"} == templated, (path, method)
            for param in params:
                assert param["in"] in {"query", "header", "path", "cookie"}
                assert "schema" in param and (param["in"] != "path" or param["required"] is True)
    assert len(operation_ids) == len(set(operation_ids)), "operationIds must be unique"
    for ref in refs(spec):
        resolve(spec, {"$ref": ref})
    schemas = [s for s in spec["components"]["schemas"].values()]
    try:
        from jsonschema import Draft202012Validator
    except ImportError:  # pragma: no cover - jsonschema comes with the mcp extra
        return
    for schema in schemas:
        Draft202012Validator.check_schema(schema)


def refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def resolve(spec: dict, node: dict) -> dict:
    if "$ref" not in node:
        return node
    assert node["$ref"].startswith("#/"), node
    found: object = spec
    for part in node["$ref"][2:].split("/"):
        assert isinstance(found, dict) and part in found, node["$ref"]
        found = found[part]
    assert isinstance(found, dict)
    return found


# --- credentials ---------------------------------------------------------------------------------


def test_no_credential_is_401_and_changes_nothing(server: Server, setup: Setup) -> None:
    before = git(setup.root, "rev-list", "--count", "HEAD")
    for token in (None, "", "mfk_abcdefgh_" + "x" * 43, setup.tokens["person"] + "x", "Basic dXNlcjpwYXNz"):
        headers = {"Authorization": token} if token and token.startswith("Basic") else None
        answer = server.request(
            "POST",
            "/memory",
            None if headers else token,
            {"category": "fact", "key": "never_stored", "content": "no"},
            headers=headers,
        )
        assert answer.status == 401, (token, answer)
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert answer.error == "Unauthorized"
    for path in ("/memory", "/memory/recall", "/memory/search?q=x", "/mcp", "/nowhere"):
        assert server.request("GET", path).status == 401, path
    assert not (setup.root / "michael" / "fact" / "never_stored.md").exists()
    assert git(setup.root, "rev-list", "--count", "HEAD") == before


def test_a_revoked_key_is_refused_at_the_next_request(server: Server, setup: Setup) -> None:
    token = setup.tokens["revoked"]
    assert server.request("GET", "/memory/recall", token).status == 200
    KeyStore(setup.keys_path).revoke(setup.ids["revoked"])
    answer = server.request("GET", "/memory/recall", token)
    assert answer.status == 401 and answer.headers["www-authenticate"].startswith("Bearer")


def test_a_mind_key_reaches_only_its_mind(server: Server, setup: Setup, agent: str) -> None:
    anna = setup.tokens["anna"]
    theirs = store(server, anna, "annas_secret", "Only Anna's")
    assert theirs["mind_id"] == "anna"
    refused = server.request("GET", "/memory/recall?mind=anna", agent)
    assert refused.status == 403 and refused.error == "Refused"
    refused = server.request("POST", "/memory?mind=anna", agent, {"category": "fact", "key": "x", "content": "y"})
    assert refused.status == 403
    assert server.request("GET", "/memory/recall?mind=michael", agent).status == 200
    assert server.request("GET", f"/memory/{theirs['id']}", agent).status == 404
    assert server.request("GET", "/memory/annas_secret", agent).status == 404
    assert server.request("DELETE", f"/memory/{theirs['id']}", agent).status == 404
    assert server.request("GET", f"/memory/{theirs['id']}", anna).status == 200


def test_a_mind_key_never_learns_the_other_minds_names_nor_whether_one_exists(
    server: Server, setup: Setup, agent: str, person: str
) -> None:
    answers = [
        server.request("GET", "/memory/recall?mind=zzz", agent),
        server.request("GET", "/memory/recall?mind=anna", agent),
        server.request("GET", f"/memory/recall?mind={quote('../anna', safe='')}", agent),
        server.request("POST", "/memory?mind=zzz", agent, {"category": "fact", "key": "never", "content": "no"}),
    ]
    for answer in answers:
        assert answer.status == 403 and answer.error == "Refused", answer
        message = answer.json()["message"]
        assert "michael" in message and "anna" not in message and "minds:" not in message, message
    assert len({answer.json()["message"] for answer in answers}) == 1  # an existing mind is told apart from none
    helpful = server.request("GET", "/memory/recall?mind=zzz", person)  # a person's token keeps the list
    assert helpful.status == 404 and "anna, michael" in helpful.json()["message"]


def test_a_persons_token_names_the_mind_or_gets_the_default(server: Server, setup: Setup, person: str) -> None:
    in_anna = server.request("POST", "/memory?mind=anna", person, {"category": "fact", "key": "p", "content": "P"})
    assert in_anna.status in (200, 201) and in_anna.json()["mind_id"] == "anna"
    assert in_anna.json()["source"] == "user" and in_anna.json()["verified"] is True
    default = store(server, person, "person_default", "In the default mind")
    assert default["mind_id"] == "michael"
    unknown = server.request("GET", "/memory/recall?mind=nobody", person)
    assert unknown.status == 404 and "nobody" in unknown.json()["message"]
    for hostile in ("../anna", "..", "%2e%2e", ".memfile", ".git", "/etc"):
        answer = server.request("GET", f"/memory/recall?mind={quote(hostile, safe='')}", person)
        assert answer.status == 404, (hostile, answer)
    twice = server.request("GET", "/memory/recall?mind=anna&mind=michael", person)
    assert twice.status == 400


def test_agent_cannot_overwrite_or_forget_what_a_person_verified_or_made_critical(
    server: Server, agent: str, person: str
) -> None:
    verified = store(server, agent, "verified_fact", "Checked by a person")
    assert server.request("POST", f"/memory/{verified['id']}/verify", person).status == 200
    critical = store(server, person, "critical_fact", "Allergic to peanuts", priority="critical")
    for memory in (verified, critical):
        put = server.request("PUT", f"/memory/{memory['id']}", agent, {"content": "overwritten"})
        assert put.status == 403 and put.error == "Refused", put
        post = server.request(
            "POST", "/memory", agent, {"category": "fact", "key": memory["key"], "content": "overwritten"}
        )
        assert post.status == 403, post
        gone = server.request("DELETE", f"/memory/{memory['id']}", agent)
        assert gone.status == 403 and gone.error == "Refused", gone
        assert server.request("GET", f"/memory/{memory['id']}", agent).json()["content"] != "overwritten"
    as_user = server.request(
        "POST", "/memory", agent, {"category": "fact", "key": "as_user", "content": "x", "source": "user"}
    )
    assert as_user.status == 403


def test_an_agents_commit_names_its_key(server: Server, setup: Setup, agent: str) -> None:
    memory = store(server, agent, "trailer_check", "Who wrote this?")
    body = git(setup.root, "log", "-1", "--format=%s%n%b", memory["commit"])
    assert body.startswith("store fact/trailer_check (agent)")
    assert "Memfile-Key: michael-key" in body


# --- hostile input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/memory/..%2f..%2fmemfile.toml",
        "/memory/%2e%2e%2f%2e%2e%2fmemfile.toml",
        "/memory/%2e%2e",
        "/memory/..",
        "/memory/../memfile.toml",
        "/memory/%252e%252e%252fmemfile.toml",
        "/memory/fact%2f..%2f..%2fanna%2ffact%2fannas_secret",
        "/memory/%00",
        "/memory/mem_doesnotexist",
        "/memory/.git",
        "/memory/..%5c..%5cmemfile.toml",
        "/../../etc/passwd",
        "/memory/%2e%2e/history",
        "/memory/%2e%2e/verify",
    ],
)
def test_hostile_paths_never_read_outside_the_mind(server: Server, person: str, path: str) -> None:
    for method in ("GET", "DELETE", "PUT", "POST"):
        answer = server.request(method, path, person, {"content": "x"} if method in ("PUT", "POST") else None)
        assert answer.status in (400, 404, 405), (method, path, answer)
        assert b"default_mind" not in answer.body and b"Only Anna" not in answer.body
        assert answer.json()["error"]


def test_unknown_and_wrong_fields_are_named(server: Server, agent: str) -> None:
    base = {"category": "fact", "key": "typed", "content": "text"}
    unknown = server.request("POST", "/memory", agent, {**base, "tagz": ["x"], "colour": "red"})
    assert unknown.status == 400
    message = unknown.json()["message"]
    assert "tagz" in message and "colour" in message and "tags" in message and "expires_at" in message
    verified = server.request("POST", "/memory", agent, {**base, "verified": True})
    assert verified.status == 400 and "verify" in verified.json()["message"]
    for field, value in (
        ("confidence", "high"),
        ("confidence", True),
        ("tags", 5),
        ("tags", [1, 2]),
        ("content", 3),
        ("priority", ["high"]),
        ("expires_at", 7),
        ("category", None),
    ):
        answer = server.request("POST", "/memory", agent, {**base, field: value})
        assert answer.status == 400 and answer.error == "InvalidInput", (field, value, answer)
        assert field in answer.json()["message"], (field, answer.json())
    for missing in ("category", "key", "content"):
        answer = server.request("POST", "/memory", agent, {k: v for k, v in base.items() if k != missing})
        assert answer.status == 400 and missing in answer.json()["message"]
    bad_value = server.request("POST", "/memory", agent, {**base, "expires_at": "someday"})
    assert bad_value.status == 400 and "expires_at" in bad_value.json()["message"]
    bad_query = server.request("GET", "/memory/search?q=x&tags=y", agent)
    assert bad_query.status == 400 and "tags" in bad_query.json()["message"] and "tag" in bad_query.json()["message"]
    bad_budget = server.request("GET", "/memory/recall?budget=lots", agent)
    assert bad_budget.status == 400 and "budget" in bad_budget.json()["message"]
    assert server.request("GET", "/memory/recall?format=xml", agent).status == 400
    assert server.request("GET", "/memory/typed", agent).status == 404


def test_an_endpoint_without_a_body_refuses_one_and_does_nothing(
    server: Server, setup: Setup, agent: str, person: str
) -> None:
    doomed = store(server, agent, "body_on_delete", "Still here")
    checked = store(server, agent, "body_on_verify", "Not checked yet")
    before = git(setup.root, "rev-list", "--count", "HEAD")
    gone = server.request("DELETE", f"/memory/{doomed['id']}", agent, {"dry_run": True})
    assert gone.status == 400 and gone.error == "InvalidInput", gone
    assert "dry_run" in gone.json()["message"] and "takes no body" in gone.json()["message"]
    verified = server.request("POST", f"/memory/{checked['id']}/verify", person, {"verified": False, "junk": 1})
    assert verified.status == 400 and "verified, junk" in verified.json()["message"], verified
    for method, path in (
        ("GET", "/memory/recall"),
        ("GET", "/memory/search?q=x"),
        ("GET", "/memory/by-tag?tag=x"),
        ("GET", "/memory/expiring"),
        ("GET", f"/memory/{doomed['id']}"),
        ("GET", f"/memory/{doomed['id']}/history"),
        ("GET", "/memory/export"),
    ):
        answer = server.request(method, path, agent, {"q": "x"})
        assert answer.status == 400 and "'q'" in answer.json()["message"], (path, answer)
    not_json = server.request("DELETE", f"/memory/{doomed['id']}", agent, b"dry_run=true")
    assert not_json.status == 400 and "takes no body" in not_json.json()["message"]
    assert git(setup.root, "rev-list", "--count", "HEAD") == before  # nothing was done
    assert server.request("GET", f"/memory/{doomed['id']}", agent).json()["content"] == "Still here"
    assert server.request("GET", f"/memory/{checked['id']}", agent).json()["verified"] is False
    assert server.request("POST", f"/memory/{checked['id']}/verify", person, b"").status == 200  # empty: fine
    assert server.request("DELETE", f"/memory/{doomed['id']}", agent, {}).status == 200  # {}: fine


def test_errors_say_plainly_what_is_wrong_in_this_apis_terms(server: Server, agent: str) -> None:
    unknown = server.request("POST", "/memory/import", agent, b"hello, this is no format memfile knows")
    assert unknown.status == 400 and "?from=memfile|synapse" in unknown.json()["message"], unknown
    assert "--from" not in unknown.json()["message"]
    null = server.request("POST", "/memory", agent, b"null")
    assert null.status == 400 and "a JSON object, not null" in null.json()["message"], null
    assert "NoneType" not in null.json()["message"]
    nul = server.request("GET", "/memory/office%00", agent)
    assert nul.status == 400 and "NUL" in nul.json()["message"] and "outside" not in nul.json()["message"], nul
    assert server.request("GET", "/memory/recall?include_superseded=yes", agent).status == 400
    for word in ("true", "false", "TRUE", ""):
        assert server.request("GET", f"/memory/recall?include_superseded={word}", agent).status == 200, word


def test_two_authorization_headers_are_refused_whichever_comes_first(server: Server, agent: str) -> None:
    for first, second in ((agent, "nonsense"), ("nonsense", agent), (agent, agent)):
        conn = server.connection()
        try:
            conn.putrequest("GET", "/memory/recall")
            conn.putheader("Authorization", f"Bearer {first}")
            conn.putheader("Authorization", f"Bearer {second}")
            conn.endheaders()
            response = conn.getresponse()
            body = json.loads(response.read())
        finally:
            conn.close()
        assert response.status == 400 and body["error"] == "InvalidInput", (first == agent, body)
        assert "Authorization" in body["message"]
        assert agent not in body["message"]


def test_a_long_value_is_not_echoed_back_whole(server: Server, agent: str) -> None:
    long = "a" * 10_000
    for method, path, body in (
        ("GET", f"/memory/{long}", None),
        ("GET", f"/memory/{'a%20' * 3000}", None),
        ("GET", f"/memory/fact/{long}", None),
        ("GET", f"/memory/recall?{long}=1", None),
        ("GET", f"/memory/expiring?within={long}", None),
        ("POST", "/memory", {"category": "fact", "key": long, "content": "x"}),
        ("POST", "/memory", {"category": long, "key": "x", "content": "x"}),
        ("POST", "/memory", {"category": "fact", "key": "x", "content": "x", "tags": [{"k": "v" * 5000}]}),
    ):
        answer = server.request(method, path, agent, body)
        assert answer.status in (400, 404), (path[:60], answer.status)
        message = answer.json()["message"]
        assert len(message) < 600 and "\u2026" in message, (path[:60], message)


def test_forty_thousand_tags_are_refused_by_their_count_before_any_work(server: Server, agent: str) -> None:
    # A 379 KB body, far under the limit, took 75 s to deduplicate while every other agent waited.
    tags = [f"tag{i}" for i in range(40_000)]
    refusal = "invalid tags '40000 tags'; allowed: at most 100 tags per memory (keep the rest in the content)."
    body = {"category": "fact", "key": "forty_thousand_tags", "content": "x"}
    answer = server.request("POST", "/memory", agent, body | {"tags": tags})
    assert answer.status == 400 and answer.json()["message"] == refusal
    memory = store(server, agent, "forty_thousand_tags", "x", tags=tags[:100])
    assert memory["tags"] == tags[:100]
    answer = server.request("PUT", f"/memory/{memory['id']}", agent, {"tags": ",".join(tags)})
    assert answer.status == 400 and answer.json()["message"] == refusal
    assert server.request("GET", f"/memory/{memory['id']}", agent).json()["tags"] == tags[:100]


def test_the_mcp_endpoint_refuses_a_query_parameter_it_does_not_have(server: Server, agent: str) -> None:
    pytest.importorskip("mcp")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    refused = server.request("POST", "/mcp?bogus=1", agent, call, headers=headers)
    assert refused.status == 400 and "bogus" in refused.json()["message"], refused
    assert server.request("POST", "/mcp?mind=michael", agent, call, headers=headers).status == 200


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"   ",
        b"[1, 2]",
        b'"text"',
        b"null",
        b"\xff\xfe\x00garbage",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"category": "fact", "key": "k", "content": "\\ud800"}',
        b'{"category": "fact", "key": "../../x", "content": "y"}',
        b'{"category": "fact", "key": "k", "content": "' + b"x" * (10 * 1024 * 1024) + b'"}',
    ],
    ids=lambda b: repr(b[:20]),
)
def test_malformed_bodies_are_400(server: Server, agent: str, body: bytes) -> None:
    answer = server.request("POST", "/memory", agent, body, headers={"Content-Type": "application/json"})
    assert answer.status == 400, answer
    assert answer.error == "InvalidInput" and "Traceback" not in answer.json()["message"]


def test_errors_of_starlette_itself_are_json(server: Server, agent: str) -> None:
    missing = server.request("GET", "/nowhere", agent)
    assert missing.status == 404 and missing.error == "NotFound"
    assert server.request("GET", "/memory/", agent).status == 404
    wrong = server.request("PATCH", "/memory/recall", agent)
    assert wrong.status == 405 and wrong.error == "MethodNotAllowed" and "GET" in wrong.headers["allow"]


def test_no_cors_headers(server: Server, agent: str) -> None:
    answer = server.request(
        "OPTIONS", "/memory", agent, headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert not any(name.startswith("access-control-") for name in answer.headers)
    answer = server.request("GET", "/memory/recall", agent, headers={"Origin": "http://evil.example"})
    assert not any(name.startswith("access-control-") for name in answer.headers)


def test_another_host_name_is_refused(server: Server, agent: str) -> None:
    for host in ("evil.example", f"evil.example:{server.port}", "localhost.evil.example", "user@localhost", ""):
        answer = server.request("GET", "/health", headers={"Host": host})
        assert answer.status in (400, 421), (host, answer)
    refused = server.request(
        "POST",
        "/memory",
        agent,
        {"category": "fact", "key": "rebound", "content": "x"},
        headers={"Host": "evil.example"},
    )
    assert refused.status == 421 and refused.error == "MisdirectedRequest"
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "LOCALHOST", f"[::1]:{server.port}"):
        assert server.request("GET", "/health", headers={"Host": host}).status == 200, host


def test_a_body_over_11_mb_is_refused_before_it_is_read(server: Server, agent: str) -> None:
    with socket.create_connection((server.host, server.port), timeout=DEADLINE) as sock:
        sock.sendall(
            b"POST /memory HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + agent.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 12000000\r\n\r\n" + b'{"content": "'
        )
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"ContentTooLarge"' in answer
    without_auth = server.request("POST", "/memory", None, b"x", headers={"Content-Length": "99999999999"})
    assert without_auth.status == 413


def test_a_chunked_body_over_11_mb_is_refused(server: Server, agent: str) -> None:
    chunk = b"x" * (1024 * 1024)
    with socket.create_connection((server.host, server.port), timeout=DEADLINE) as sock:
        sock.sendall(
            b"POST /memory HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + agent.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        try:
            for _ in range(12):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed before the end
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"ContentTooLarge"' in answer


def test_a_slow_client_does_not_hold_up_others(server: Server, agent: str) -> None:
    slow_headers = socket.create_connection((server.host, server.port), timeout=DEADLINE)
    slow_body = socket.create_connection((server.host, server.port), timeout=DEADLINE)
    try:
        slow_headers.sendall(b"GET /memory/recall HTTP/1.1\r\nHost: local")
        slow_body.sendall(
            b"POST /memory HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + agent.encode() + b"\r\n"
            b"Content-Length: 80\r\n\r\n" + b'{"category": "fact",'
        )
        started = time.monotonic()
        for _ in range(5):
            assert server.request("GET", "/memory/recall", agent).status == 200
            assert server.request("GET", "/health").status == 200
        assert time.monotonic() - started < DEADLINE
        rest = b' "key": "slow_body", "content": "arrived at last"}'
        body = b'{"category": "fact",' + rest
        assert len(body) <= 80
        slow_body.sendall(rest + b" " * (80 - len(body)))
        assert read_answer(slow_body).startswith(b"HTTP/1.1 201")
    finally:
        slow_headers.close()
        slow_body.close()


# --- the files and the other faces ---------------------------------------------------------------------


def test_hand_edits_and_cli_stores_are_seen_by_the_next_request(server: Server, setup: Setup, agent: str) -> None:
    store(server, agent, "seen_by_hand", "before the edit")
    path = setup.root / "michael" / "fact" / "seen_by_hand.md"
    path.write_text(path.read_text().replace("before the edit", "after a hand edit"))
    assert server.request("GET", "/memory/seen_by_hand", agent).json()["content"] == "after a hand edit"
    hits = server.request("GET", "/memory/search?q=hand+edit", agent).json()
    assert "seen_by_hand" in [h["key"] for h in hits]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memfile",
            "--vault",
            str(setup.root),
            "--mind",
            "michael",
            "store",
            "fact",
            "from_cli",
            "The heron nests by the canal",
        ],
        capture_output=True,
        text=True,
        env=_cli_env(setup),
        timeout=DEADLINE,
    )
    assert result.returncode == 0, result.stderr
    assert server.request("GET", "/memory/from_cli", agent).json()["source"] == "user"
    assert "heron" in server.request("GET", "/memory/recall?q=heron", agent).body.decode()
    new = setup.root / "michael" / "note" / "by_hand.md"
    new.parent.mkdir(exist_ok=True)
    new.write_text("A note written by hand about the osprey\n")
    found = wait_until(lambda: server.request("GET", "/memory/search?q=osprey", agent).json())
    assert found[0]["key"] == "by_hand"


def _cli_env(setup: Setup) -> dict[str, str]:
    return server_env(setup.home)


def test_the_mcp_mount_answers_the_sdks_streamable_http_client(server: Server, setup: Setup, agent: str) -> None:
    pytest.importorskip("mcp")
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def use() -> tuple[list[str], str, str]:
        headers = {"Authorization": f"Bearer {agent}"}
        async with httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http:
            async with streamable_http_client(server.url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    stored = await session.call_tool(
                        "store", {"category": "fact", "key": "via_mcp", "content": "Stored over MCP"}
                    )
                    shown = await session.call_tool("show", {"ref": "via_mcp"})
        return (
            [t.name for t in tools.tools],
            json.dumps(stored.model_dump(mode="json")),
            json.dumps(shown.model_dump(mode="json")),
        )

    async def as_person_in_anna() -> str:
        headers = {"Authorization": f"Bearer {setup.tokens['person']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http:
            async with streamable_http_client(server.url + "/mcp?mind=anna", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool(
                        "store", {"category": "fact", "key": "person_via_mcp", "content": "A person, over MCP"}
                    )
        return json.dumps(result.model_dump(mode="json"))

    names, stored, shown = anyio.run(use)
    assert '"mind": "anna"' in anyio.run(as_person_in_anna)
    in_anna = server.request("GET", "/memory/person_via_mcp?mind=anna", setup.tokens["person"]).json()
    assert in_anna["source"] == "user" and in_anna["mind_id"] == "anna"
    assert server.request("GET", "/memory/person_via_mcp", agent).status == 404
    assert {"recall", "search", "store", "show", "forget"} <= set(names)
    assert "Stored over MCP" in shown and '"is_error": false' in stored.replace("isError", "is_error")
    memory = server.request("GET", "/memory/via_mcp", agent).json()
    assert memory["source"] == "agent" and memory["mind_id"] == "michael"
    log = git(setup.root, "log", "-1", "--format=%b", "--", "michael/fact/via_mcp.md")
    assert "Memfile-Key: michael-key" in log


def test_mcp_requests_leave_no_line_in_the_log_and_the_server_names_memfiles_version(tmp_path: Path) -> None:
    """docs/server.md: "It logs no line per request", /mcp included (the SDK's INFO lines, such as
    "Terminating session: None" for each stateless POST, stay out); the initialize answer names memfile."""
    pytest.importorskip("mcp")
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from memfile import __version__

    setup = make_setup(tmp_path)
    server = start_server(setup)

    async def use() -> Any:
        headers = {"Authorization": f"Bearer {setup.tokens['michael']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http:
            async with streamable_http_client(server.url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    initialized = await session.initialize()
                    await session.list_tools()
                    for _ in range(3):
                        await session.call_tool("recall", {"query": "anything"})
        return initialized

    try:
        initialized = anyio.run(use)
    finally:
        code, _, err = server.stop()
    assert initialized.server_info.name == "memfile" and initialized.server_info.version == __version__
    assert code == 0 and "Terminating session" not in err and "Traceback" not in err, err
    assert [line for line in err.splitlines() if not line.startswith("memfile")] == [], err


def test_a_thousand_hostile_requests_get_no_500_and_leave_the_server_answering(
    server: Server, setup: Setup, agent: str, person: str
) -> None:
    import random

    rng = random.Random(23)
    outside = setup.root.parent / "outside.txt"
    outside.write_text("secret outside the vault")
    pieces = [
        "..",
        "%2e%2e",
        "%2f",
        "%5c",
        "%00",
        "memfile.toml",
        ".git",
        "anna",
        "mem_",
        "~",
        "%252e",
        "outside.txt",
        "recall",
        "search",
        "by-tag",
        "history",
        "verify",
        "%ff",
        "%c0%ae",
        "a" * 300,
        "{id}",
        ";",
        "?",
        "#",
    ]
    bodies = [
        b"",
        b"{",
        b"[]",
        b"null",
        b'{"content": 1}',
        b'{"category": "fact"}',
        b"\xff" * 10,
        b'{"category": "fact", "key": "..", "content": "x"}',
        b'{"tags": {"a": 1}}',
        b"1e999999",
        json.dumps({"category": "fact", "key": "k" * 500, "content": "x"}).encode(),
    ]
    statuses = []
    for _ in range(1000):
        path = "/" + "/".join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))
        if rng.random() < 0.6:
            path = "/memory" + path
        if rng.random() < 0.3:
            path += "?" + "&".join(
                f"{rng.choice(['q', 'tag', 'mind', 'limit', 'budget', 'x'])}={rng.choice(pieces)}"
                for _ in range(rng.randint(1, 3))
            )
        method = rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
        token = rng.choice([agent, person, None, "mfk_" + "a" * 60])
        answer = server.request(method, path, token, rng.choice(bodies) if method in ("POST", "PUT") else None)
        statuses.append(answer.status)
        assert answer.status != 500, (method, path, answer)
        assert b"secret outside" not in answer.body and b"default_mind" not in answer.body
    assert server.request("GET", "/health").status == 200
    assert outside.read_text() == "secret outside the vault"
    assert {400, 401, 404} <= set(statuses)


def test_a_client_that_leaves_halfway_through_its_body_leaves_no_traceback(server: Server, agent: str) -> None:
    """The module's server is stopped at the end and its stderr checked for tracebacks (the fixture)."""
    for _ in range(3):
        sock = socket.create_connection((server.host, server.port), timeout=DEADLINE)
        sock.sendall(
            b"POST /memory HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + agent.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b'{"category": "fact",'
        )
        sock.shutdown(socket.SHUT_WR)
        sock.close()
    assert wait_until(lambda: server.request("GET", "/health").status == 200)
    assert server.request("GET", "/memory/recall", agent).status == 200


def test_the_listening_socket_is_tcp_so_asyncio_turns_nagles_delay_off() -> None:
    """asyncio sets TCP_NODELAY on accepted connections only when the listening socket says IPPROTO_TCP;
    without it every keep-alive request after the first waited about 40 ms for the client's delayed ACK."""
    from memfile.server import _listening

    with _listening("127.0.0.1", 0, None) as (sock, url):
        assert sock.proto == socket.IPPROTO_TCP
        assert url.startswith("http://127.0.0.1:")
