"""The review of captured memories over HTTP: GET /memory/proposals, POST /memory/{id}/accept and /reject, a
person's token only; and a Mind Key reads no proposal through any endpoint (a real `memfile serve`, proposals
from a real `Vault.capture`)."""

from __future__ import annotations

import json

import pytest
from helpers import commit_count, git
from helpers.review import ADDED, PROPOSED_WORDS, TARGET, UPDATE, propose
from helpers.serve import Server, Setup, make_setup

from memfile import Vault


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    setup = make_setup(tmp_path_factory.mktemp("serve-review"))
    with Vault.open(setup.root, "michael") as vault:
        setup.ids = setup.ids | propose(vault)
    return setup


def leaked(body: bytes) -> list[str]:
    return [word for word in PROPOSED_WORDS if word in body.decode("utf-8")]


def test_a_mind_key_reads_no_proposal_through_any_endpoint(server: Server, setup: Setup, agent: str) -> None:
    before = commit_count(setup.root)
    for ref in ("dog_name", "coffee_2", setup.ids[ADDED], setup.ids[UPDATE]):  # a path's REF has no slash
        for method, path, body in (
            ("GET", f"/memory/{ref}", None),
            ("GET", f"/memory/{ref}/history", None),
            ("PUT", f"/memory/{ref}", {"content": "changed by the agent"}),
            ("DELETE", f"/memory/{ref}", None),
        ):
            answer = server.request(method, path, agent, body)
            assert answer.status == 404 and not leaked(answer.body), (method, path, answer)
    for path in (
        "/memory/search?q=dog+Rex&include_proposed=true",
        "/memory/search?q=green+tea&include_proposed",
        "/memory/recall?q=my+dog",
        "/memory/recall?q=my+dog&include_proposed=true",
        "/memory/recall?include_proposed=true&format=json",
        "/memory/recall?q=what+do+I+drink&format=json",
        "/memory",
        "/memory/by-tag?tag=pets",
        "/memory/expiring?within=1000d",
        "/memory/export",
        "/memory/export?format=json",
    ):
        answer = server.request("GET", path, agent)
        assert answer.status == 200 and not leaked(answer.body), (path, answer)
    forget = server.request("DELETE", "/memory?unverified&dry_run", agent)
    assert forget.status == 200 and not leaked(forget.body)
    taken = server.request("POST", "/memory", agent, {"category": "fact", "key": "dog_name", "content": "Max."})
    assert taken.status == 409 and "waiting for the user's review" in taken.json()["message"]
    assert not leaked(taken.body)
    for method, path in (
        ("GET", "/memory/proposals"),
        ("POST", f"/memory/{setup.ids[ADDED]}/accept"),
        ("POST", f"/memory/{setup.ids[ADDED]}/reject"),
        ("POST", "/memory/nope/accept"),  # refused before it is looked up: no REF is confirmed to exist
    ):
        answer = server.request(method, path, agent)
        assert answer.status == 403 and answer.error == "Refused" and not leaked(answer.body), (path, answer)
    assert "a person" in server.request("GET", "/memory/proposals", agent).json()["message"]
    assert commit_count(setup.root) == before


def test_a_person_lists_the_proposals_and_searches_them_when_asked(server: Server, setup: Setup, person: str) -> None:
    listed = server.request("GET", "/memory/proposals", person).json()
    assert [(m["key"], m["mind_id"], m["status"]) for m in listed] == [
        ("dog_name", "michael", "proposed"),
        ("coffee_2", "michael", "proposed"),
    ]
    assert listed[1]["extra"] == {
        "captured_from": "s1",
        "captured_turns": [0],
        "captured_lines": ["[0] user: I switched: I drink green tea every morning now, no more coffee."],
        "proposed_supersedes": setup.ids[TARGET],
    }
    assert server.request("GET", "/memory/proposals?mind=anna", person).json() == []
    assert server.request("GET", "/memory/search?q=dog+Rex", person).json() == []
    [hit] = server.request("GET", "/memory/search?q=dog+Rex&include_proposed=true", person).json()
    assert (hit["key"], hit["status"]) == ("dog_name", "proposed")
    assert "called Rex" not in server.request("GET", "/memory/recall?q=dog+Rex", person).body.decode()
    recalled = server.request("GET", "/memory/recall?q=dog+Rex&include_proposed=true&format=json", person).json()
    assert [(m["key"], m["status"]) for m in recalled["memories"] if m["key"] == "dog_name"] == [
        ("dog_name", "proposed")
    ]
    assert server.request("GET", "/memory/dog_name", person).json()["status"] == "proposed"
    bad = server.request("GET", "/memory/proposals?status=all", person)
    assert bad.status == 400 and "status" in bad.json()["message"]


def test_bad_acceptances_are_refused_by_name_and_change_nothing(server: Server, setup: Setup, person: str) -> None:
    before = commit_count(setup.root)
    for ref, body, status, named in (
        ("dog_name", {"verified": True}, 400, "verified"),
        ("dog_name", {"content": "x", "category": "note"}, 400, "category"),
        ("dog_name", {"priority": "urgent"}, 400, "priority"),
        ("dog_name", {"tags": 5}, 400, "tags"),
        ("dog_name", {"expires_at": "someday"}, 400, "expires_at"),
        ("dog_name", {"content": ""}, 400, "content"),
        ("dog_name", "[]", 400, "body"),
        ("nope", {}, 404, "nope"),
        ("coffee", {}, 404, "not waiting for review"),
        (setup.ids[TARGET], {}, 404, "not waiting for review"),
        ("..%2F..%2Fetc", None, 404, ""),
    ):
        answer = server.request("POST", f"/memory/{ref}/accept", person, body)
        assert answer.status == status and named in answer.json()["message"], (ref, body, answer)
    for ref, status in (("nope", 404), ("coffee", 404), (setup.ids[TARGET], 404)):
        assert server.request("POST", f"/memory/{ref}/reject", person).status == status
    extra_body = server.request("POST", "/memory/dog_name/reject", person, {"content": "x"})
    assert extra_body.status == 400 and "takes no body" in extra_body.json()["message"]
    assert commit_count(setup.root) == before
    assert [m["key"] for m in server.request("GET", "/memory/proposals", person).json()] == ["dog_name", "coffee_2"]


def test_accept_with_changes_makes_a_verified_memory_an_agent_finds(
    server: Server, setup: Setup, person: str, agent: str
) -> None:
    before = commit_count(setup.root)
    change = {"content": "Has a beagle called Rex.", "tags": ["pets", "rex"], "priority": "high", "expires_at": "30d"}
    answer = server.request("POST", f"/memory/{setup.ids[ADDED]}/accept", person, change)
    assert answer.status == 200, answer
    memory = answer.json()
    assert (memory["content"], memory["tags"], memory["priority"], memory["verified"], memory["status"]) == (
        "Has a beagle called Rex.",
        ["pets", "rex"],
        "high",
        True,
        "active",
    )
    assert memory["expires_at"] is not None and memory["extra"] == {"captured_from": "s1", "captured_turns": [2]}
    assert commit_count(setup.root) == before + 1
    assert git(setup.root, "log", "-1", "--format=%s").strip() == f"accept {ADDED} (user)"
    assert [h["key"] for h in server.request("GET", "/memory/search?q=beagle", agent).json()] == ["dog_name"]
    again = server.request("POST", f"/memory/{setup.ids[ADDED]}/accept", person)
    assert again.status == 404 and "not waiting for review" in again.json()["message"]
    accepted_plain = server.request("POST", "/memory/coffee_2/accept", person, b"")  # no body: as it is
    assert accepted_plain.status == 200 and accepted_plain.json()["content"].startswith("Drinks green tea")
    target = server.request("GET", f"/memory/{setup.ids[TARGET]}", agent).json()
    assert (target["status"], target["superseded_by"]) == ("superseded", setup.ids[UPDATE])


def test_reject_forgets_a_proposal(server: Server, setup: Setup, person: str) -> None:
    with Vault.open(setup.root, "anna") as anna:
        anna.capture(
            [{"role": "user", "content": "I am learning Portuguese."}],
            lambda system, user: json.dumps(
                {
                    "memories": [
                        {"category": "skill", "key": "portuguese", "content": "Learns Portuguese.", "turns": [0]}
                    ]
                }
            ),
            session="anna-1",
        )
    before = commit_count(setup.root)
    answer = server.request("POST", "/memory/portuguese/reject?mind=anna", person)
    assert answer.status == 200 and answer.json()["content"] == "Learns Portuguese."
    assert commit_count(setup.root) == before + 1
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "reject skill/portuguese (user)"
    assert server.request("GET", "/memory/portuguese?mind=anna", person).status == 404
    assert server.request("GET", "/memory/proposals?mind=anna", person).json() == []
