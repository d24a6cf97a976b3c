"""The console as of a date: the Recall page (what recall gives, now or as of a date, recording nothing) and
the memories page's search with As of, through Starlette's TestClient on the application `memfile serve`
builds. Each answer as of a date names the commit it read; a bad or hostile value is said on the page,
escaped, never a traceback. The browser's side is in test_console_browser.py."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from helpers import committed_on, git
from helpers.console import MIND, Console, page

from memfile import NotFound

RECALL = f"/console/m/{MIND}/recall"
MEMORIES = f"/console/m/{MIND}/memories"
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')


@pytest.fixture(scope="module")
def dated(console: Console) -> list[str]:
    """fact/deploys stored on 2026-03-01 (vps1), then changed on 2026-04-01 (vps2): the commits."""
    shas = []
    for day, text in (("2026-03-01", "Deploys go to vps1"), ("2026-04-01", "Deploys go to vps2")):
        with committed_on(day):
            console.store("deploys", text)
        shas.append(git(console.setup.root, "rev-parse", "HEAD").strip())
    return shas


def last_record(console: Console) -> Any:
    try:
        return console.vault_call(lambda vault: vault.last_recall())
    except NotFound:
        return None


def test_the_recall_page_as_of_a_date_shows_the_text_then_and_names_the_commit(
    console: Console, dated: list[str]
) -> None:
    client = console.person()
    before = last_record(console)
    then = unescape(page(client, f"{RECALL}?q=deploys&budget=0&at=2026-03-15"))
    assert "Deploys go to vps1" in then and "vps2" not in then
    assert said(then, "recall-as-of").startswith(f"As of 2026-03-01 12:00 UTC (commit {dated[0][:8]}): ")
    now = unescape(page(client, f"{RECALL}?q=deploys&at="))
    assert "Deploys go to vps2" in now and said(now, "recall-as-of") == "The mind as it is now."
    form = page(client, RECALL)  # the form alone: nothing recalled until it is sent
    assert 'id="recall-form"' in form and 'id="recall-text"' not in form
    assert last_record(console) == before  # a person's look is not what the agent was last shown
    assert 'id="nav-recall"' in form and 'aria-current="page"' in form


def test_the_memories_search_as_of_a_date_finds_the_text_then(console: Console, dated: list[str]) -> None:
    client = console.person()
    then = page(client, f"{MEMORIES}?q=deploys&at={dated[0]}")
    assert "<mark>Deploys</mark> go to vps1" in then and "vps2" not in then
    assert said(then, "as-of").startswith(f"As of 2026-03-01 12:00 UTC (commit {dated[0][:8]}): ")
    assert 'id="forget-selected"' not in then  # a view of the past: nothing on it to verify or forget
    assert 'value="' + dated[0] + '"' in then  # the field keeps what was asked, and every link too
    now = page(client, f"{MEMORIES}?q=deploys")
    assert "<mark>Deploys</mark> go to vps2" in now and 'id="as-of"' not in now


@pytest.mark.parametrize(
    ("at", "status", "says"),
    [
        ("2026-02-30", 400, "no calendar has that day"),
        ("2001-01-01", 400, "no version of the vault is that old"),
        ("no-such-branch", 400, "allowed: a commit (sha, HEAD~2, a branch), a date (2026-05-01)"),
    ],
)
def test_a_bad_as_of_is_said_on_both_pages(console: Console, dated: list[str], at: str, status: int, says: str) -> None:
    client = console.person()
    for path in (f"{RECALL}?at={at}", f"{MEMORIES}?q=deploys&at={at}"):
        html = page(client, path, status)
        assert says in unescape(html) and 'id="error"' in html and "Traceback" not in html, path
        assert f'value="{at}"' in html, path  # the form comes back as it was sent, to be corrected


def test_as_of_without_a_search_or_with_a_bad_budget_is_said(console: Console, dated: list[str]) -> None:
    client = console.person()
    assert "no search was given" in page(client, f"{MEMORIES}?at=2026-03-15", 400)
    assert "invalid budget" in page(client, f"{RECALL}?budget=lots&at=2026-03-15", 400)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_as_of_comes_back_escaped(console: Console, dated: list[str], hostile: str) -> None:
    client = console.person()
    for path, params in ((RECALL, {"at": hostile, "q": hostile}), (MEMORIES, {"q": "deploys", "at": hostile})):
        answer = client.get(path, params=params)
        assert answer.status_code == 400 and "invalid at" in answer.text, (path, answer.text[-800:])
        assert hostile not in answer.text and "<img" not in answer.text and "<script>" not in answer.text


def test_a_mind_key_gets_no_recall_page(console: Console, dated: list[str]) -> None:
    answer = console.client().get(
        f"{RECALL}?at=2026-03-15", headers={"Authorization": f"Bearer {console.setup.tokens['michael']}"}
    )
    assert answer.status_code == 403 and "vps1" not in answer.text


def said(html: str, element: str) -> str:
    """The words of the element with the id `element`, without their markup, spaces as one."""
    found = re.search(rf'id="{element}"[^>]*>(.*?)</p>', html, re.DOTALL)
    assert found, html[-2000:]
    return " ".join(unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())
