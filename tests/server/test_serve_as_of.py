"""`GET /memory/search?at=` and `GET /memory/recall?at=` on a real `memfile serve`: a person's token reads the
mind as it was then; a Mind Key gets 403 whatever `at` says (an agent reads its mind as it is now); a bad
`at` is 400 naming it."""

from __future__ import annotations

import pytest
from helpers import committed_on
from helpers.serve import Answer, Server, Setup, make_setup

from memfile import Vault

MIND = "mind=michael"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """fact/deploys stored on 2026-03-01 (vps1), changed on 2026-04-01 (vps2), forgotten on 2026-05-01."""
    setup = make_setup(tmp_path_factory.mktemp("serve-as-of"))
    with Vault.open(setup.root, "michael") as vault:
        for day, text in (("2026-03-01", "Deploys go to vps1"), ("2026-04-01", "Deploys go to vps2")):
            with committed_on(day):
                vault.store("fact", "deploys", text)
        with committed_on("2026-05-01"):
            vault.forget("fact/deploys")
    return setup


def contents(answer: Answer) -> list[str]:
    return [hit["content"] for hit in answer.json()]


def test_a_person_searches_and_recalls_as_of_a_date(server: Server, person: str) -> None:
    march = server.request("GET", f"/memory/search?q=deploys&at=2026-03-15&{MIND}", person)
    assert march.status == 200 and contents(march) == ["Deploys go to vps1"]
    assert contents(server.request("GET", f"/memory/search?q=deploys&at=2026-04-15&{MIND}", person)) == [
        "Deploys go to vps2"
    ]
    assert server.request("GET", f"/memory/search?q=deploys&{MIND}", person).json() == []  # forgotten since
    assert server.request("GET", f"/memory/search?q=deploys&at=&{MIND}", person).json() == []  # empty: now
    assert contents(server.request("GET", f"/memory/search?q=deploys&at=HEAD~1&{MIND}", person)) == [
        "Deploys go to vps2"
    ]
    recalled = server.request("GET", f"/memory/recall?q=deploys&at=2026-03-15&{MIND}", person)
    assert recalled.status == 200 and "Deploys go to vps1" in recalled.body.decode()


def test_a_mind_key_gets_403_for_any_at(server: Server, agent: str) -> None:
    for path, verb in (
        ("/memory/search?q=deploys&at=2026-03-15", "search"),
        ("/memory/search?q=deploys&at=2001-01-01", "search"),  # refused before it is read: nothing is told
        ("/memory/recall?q=deploys&at=2026-03-15", "recall"),
        ("/memory?at=HEAD~1", "recall"),
    ):
        answer = server.request("GET", path, agent)
        assert answer.status == 403 and answer.error == "Refused", (path, answer)
        message = answer.json()["message"]
        assert f"{verb}s the mind as it is now; leave out at, or {verb} as of a date with a person's token" in message
        assert "vps" not in answer.body.decode()
    assert server.request("GET", "/memory/search?q=deploys", agent).json() == []  # without at: now


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("2026-02-30", "no calendar has that day"),
        ("2001-01-01", "no version of the vault is that old"),
        ("nowhere", "a date (2026-05-01)"),
    ],
)
def test_a_bad_at_is_400_naming_it(server: Server, person: str, at: str, says: str) -> None:
    for path in (f"/memory/search?q=deploys&at={at}&{MIND}", f"/memory/recall?at={at}&{MIND}"):
        answer = server.request("GET", path, person)
        assert answer.status == 400 and answer.error == "InvalidInput", (path, answer)
        assert answer.json()["message"].startswith("invalid at ") and says in answer.json()["message"], path


def test_search_takes_at_in_the_openapi_document() -> None:
    from memfile.server.app import openapi_document

    parameters = openapi_document(mcp=False)["paths"]["/memory/search"]["get"]["parameters"]
    assert any(p.get("name") == "at" and "Mind Key gets 403" in p["description"] for p in parameters)
