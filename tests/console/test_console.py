"""The memory console at /console: every page, filter, action and refusal, through Starlette's TestClient on
the real application `memfile serve` builds (its worker, its middlewares), and once through a real server.

One vault and one application serve the whole module; each test stores memories of its own (keys named
after the test), so none depends on another's. The browser's side (htmx, a real Chromium) is in
test_console_browser.py.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from helpers import git
from helpers.console import MIND, ORIGIN, SAME, Console, act, csrf_of, memory_url, page, post
from helpers.serve import make_setup, server_env, start_server
from starlette.testclient import TestClient

from memfile.keys import KeyStore
from memfile.model import Source
from memfile.worker import Caller, Minds

PAGES = ("profile", "memories", "log", "recall", "last-recall", "health", "transfer")
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "javascript:alert(1)")


def rows(html: str) -> list[str]:
    """The memory ids of a list page's rows, in order."""
    return re.findall(r'<tr id="row-(mem_[0-9a-z]+)"', html)


def flashes(html: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'<p class="flash" role="status">([^<]*)</p>', html)]


def subject(root: Path) -> str:
    return git(root, "log", "-1", "--format=%s").strip()


# --- logging in and out ------------------------------------------------------------------------------


def test_every_page_without_a_session_goes_to_the_login(console: Console) -> None:
    client = console.client()
    for path in ["/console", *(f"/console/m/{MIND}/{p}" for p in PAGES), memory_url("mem_0000000000")]:
        answer = client.get(path)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/login", path
    login = page(client, "/console/login")
    assert 'id="login"' in login and 'type="password"' in login and "csrf" not in login
    assert client.get("/console/static/console.css").status_code == 200  # no session needed


def test_login_sets_a_strict_httponly_cookie_never_the_token_and_logout_ends_it(console: Console) -> None:
    client = console.client()
    token = console.setup.tokens["person"]
    answer = client.post("/console/login", data={"token": token}, headers=SAME)
    assert answer.status_code == 303 and answer.headers["location"] == "/console"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # plain http: a Secure cookie would never come back (behind a TLS proxy it is)
    assert token not in cookie and token not in answer.headers["location"]
    home = page(client, "/console")
    assert token not in home and 'id="logout"' in home and "person-key" in home
    assert client.get("/console/login").headers["location"] == "/console"  # already logged in
    refused = post(client, "/console/logout", {"csrf": "wrong"})
    assert refused.status_code == 403
    out = post(client, "/console/logout", {"csrf": csrf_of(home)})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    assert "Max-Age=0" in out.headers["set-cookie"]
    old = console.client()
    old.cookies.set("memfile_console", cookie.split(";")[0].split("=", 1)[1], path="/console")
    assert old.get("/console").headers["location"] == "/console/login"  # the session is gone on the server


def test_a_wrong_token_or_a_foreign_origin_is_refused_at_the_login(console: Console) -> None:
    client = console.client()
    wrong = client.post("/console/login", data={"token": "mfp_abcdefgh_" + "x" * 43}, headers=SAME)
    assert wrong.status_code == 401 and "not accepted" in wrong.text and "set-cookie" not in wrong.headers
    empty = client.post("/console/login", data={}, headers=SAME)
    assert empty.status_code == 401
    foreign = client.post(
        "/console/login", data={"token": console.setup.tokens["person"]}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and "another site" in foreign.text and "set-cookie" not in foreign.headers


def test_a_mind_key_gets_403_on_every_console_page(console: Console) -> None:
    client = console.client()
    agent = console.setup.tokens["michael"]
    login = client.post("/console/login", data={"token": agent}, headers=SAME)
    assert login.status_code == 403 and "a Mind Key is an agent" in login.text
    assert "set-cookie" not in login.headers
    assert 'id="login"' in login.text and 'type="password"' in login.text  # the form again, to try a person's token
    bearer = {"Authorization": f"Bearer {agent}"}
    for path in ["/console", *(f"/console/m/{MIND}/{p}" for p in PAGES), f"/console/m/{MIND}/export"]:
        answer = client.get(path, headers=bearer)
        assert answer.status_code == 403, path
        assert "a Mind Key is an agent&#39;s credential" in answer.text, path
    memory = console.store("mind_key_refused")
    answer = client.post(memory_url(memory.id), data={"action": "verify"}, headers=bearer | SAME)
    assert answer.status_code == 403
    assert console.vault_call(lambda v: v.get(memory.id)).verified is True  # a person's memory, untouched


def test_a_persons_bearer_token_reads_pages_but_cannot_act(console: Console) -> None:
    client = console.client()
    bearer = {"Authorization": f"Bearer {console.setup.tokens['person']}"}
    assert client.get("/console", headers=bearer).status_code == 200
    memory = console.store("bearer_reads", agent=True)
    html = client.get(memory_url(memory.id), headers=bearer).text
    assert 'value="verify"' not in html  # no forms without a session
    refused = client.post(memory_url(memory.id), data={"action": "verify"}, headers=bearer | SAME)
    assert refused.status_code == 403 and "needs a console session" in refused.text
    revoked = client.get("/console", headers={"Authorization": "Bearer mfp_abcdefgh_" + "y" * 43})
    assert revoked.status_code == 401


def test_a_revoked_key_ends_its_sessions(tmp_path: Path) -> None:
    from memfile.keys import PERSON
    from memfile.server.app import build_app

    setup = make_setup(tmp_path)
    keys = KeyStore(setup.keys_path)
    key, token = keys.add(PERSON, "short-lived", setup.root)
    with Minds(setup.root, watch=False) as minds:
        client = TestClient(build_app(minds, keys, allowed_hosts=["localhost"], mcp=False), base_url=ORIGIN)
        client.follow_redirects = False
        assert client.post("/console/login", data={"token": token}, headers=SAME).status_code == 303
        assert client.get("/console").status_code == 200
        keys.revoke(key.id)
        assert client.get("/console").headers["location"] == "/console/login"


# --- every page ------------------------------------------------------------------------------------------


def test_every_page_renders_with_its_headers_and_ids(console: Console) -> None:
    client = console.person()
    console.store("page_marker", "Every page shows this")
    console.vault_call(lambda v: v.recall(query="every page"))
    expected = {
        "/console": 'id="minds"',
        f"/console/m/{MIND}/profile": 'id="profile"',
        f"/console/m/{MIND}/memories": 'id="memories"',
        f"/console/m/{MIND}/log": 'id="log"',
        f"/console/m/{MIND}/last-recall": 'id="recalled"',
        f"/console/m/{MIND}/health": 'id="status"',
        f"/console/m/{MIND}/transfer": 'id="import-form"',
    }
    for path, marker in expected.items():
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text[-800:])
        assert marker in answer.text, path
        assert answer.headers["content-security-policy"].startswith("default-src 'self'")
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "same-origin"
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["cache-control"] == "no-store"
        assert re.search(r"<title>[^<]+</title>", answer.text), path
        assert "<script>" not in answer.text and " style=" not in answer.text and "<style" not in answer.text
        assert re.findall(r"<script[^>]*>", answer.text) == ['<script src="/console/static/htmx.min.js" defer>']
    assert client.get(f"/console/m/{MIND}").headers["location"] == f"/console/m/{MIND}/memories"
    missing = client.get("/console/m/nobody/memories")
    assert missing.status_code == 404 and "no mind" in missing.text
    unknown = client.get("/console/no-such-page")
    assert unknown.status_code == 404 and unknown.headers["content-security-policy"].startswith("default-src")


def test_static_files_carry_the_headers_and_htmx_names_its_version(console: Console) -> None:
    client = console.client()
    css = client.get("/console/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert css.headers["x-content-type-options"] == "nosniff" and "cache-control" not in css.headers
    htmx = client.get("/console/static/htmx.min.js")
    first, _, rest = htmx.content.partition(b"\n")
    assert b"htmx.org 2.0.11" in first and b"registry.npmjs.org/htmx.org/-/htmx.org-2.0.11.tgz" in first
    assert hashlib.sha256(rest).hexdigest().encode() in first
    assert client.get("/console/static/../app.py").status_code == 404


def test_minds_page_counts(console: Console) -> None:
    client = console.person()
    console.store("anna_counts", "in anna", agent=True, mind="anna", expires="2d")
    console.store("anna_old", "in anna, old", mind="anna", category="note")
    new = console.store("anna_new", "in anna, new", mind="anna", category="note", supersedes="note/anna_old")
    assert new.mind == "anna"
    html = page(client, "/console")
    row = re.search(r'<tr id="mind-anna">(.*?)</tr>', html, re.DOTALL)
    assert row, html
    counts = dict(re.findall(r'data-count="(\w+)">(?:<a [^>]*>)?(\d+)', row.group(1)))
    summary = console.vault_call(lambda v: (len(v.memories()), sum(not m.verified for m in v.memories())), "anna")
    assert counts["memories"] == str(summary[0]) and counts["unverified"] == str(summary[1])
    assert int(counts["expiring"]) >= 1 and int(counts["superseded"]) >= 1
    assert counts["conflicts"] == "0" and counts["unreadable"] == "0"
    assert "Michael&#39;s Mind" in html  # the display name


def test_profile_shows_the_pinned_set_only(console: Console) -> None:
    client = console.person()
    critical = console.store("profile_critical", "Never deploy on Fridays", priority="critical")
    identity = console.store("profile_name", "Michael, in Berlin", category="identity", priority="high")
    agents = console.store(
        "profile_agent", "The agent thinks this is who he is", category="identity", priority="high", agent=True
    )
    normal = console.store("profile_normal", "Just a fact")
    before = console.vault_call(lambda v: v.last_recall().to_dict() if _has_recall(v) else None)
    html = page(client, f"/console/m/{MIND}/profile")
    assert f'id="pinned-{critical.id}"' in html and f'id="pinned-{identity.id}"' in html
    assert f'id="pinned-{agents.id}"' not in html and f'id="pinned-{normal.id}"' not in html
    after = console.vault_call(lambda v: v.last_recall().to_dict() if _has_recall(v) else None)
    assert after == before  # the profile serves no recall: the last recall record is the agent's


def _has_recall(vault: Any) -> bool:
    from memfile.errors import NotFound

    try:
        vault.last_recall()
    except NotFound:
        return False
    return True


# --- the memories page ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def filtered(console: Console) -> dict[str, str]:
    """Memories of the category project in the mind anna (no other test stores one), by what they are."""
    made = {
        "plain": console.store("f_plain", "plain user fact", mind="anna", category="project", tags=["alpha"]),
        "agent": console.store("f_agent", "the agent's guess", mind="anna", category="project", agent=True),
        "high": console.store("f_high", "important", mind="anna", category="project", priority="high", tags=["beta"]),
        "gone": console.store("f_expired", "old news", mind="anna", category="project", expires="2000-01-01T00:00:00Z"),
    }
    console.store("f_newer", "replaces plain", mind="anna", category="skill", supersedes="project/f_plain")
    return {name: memory.id for name, memory in made.items()}


def test_each_filter_of_the_memories_page(console: Console, filtered: dict[str, str]) -> None:
    client = console.person()
    base = "/console/m/anna/memories?"

    def shown(**query: str) -> set[str]:
        return set(rows(page(client, base + urlencode(query)))) & set(filtered.values())

    assert shown(category="project") == {filtered["agent"], filtered["high"]}  # plain is superseded, gone expired
    assert shown(category="project", status="all") == {filtered["agent"], filtered["high"], filtered["plain"]}
    assert shown(category="project", status="superseded") == {filtered["plain"]}
    assert shown(category="project", expired="1") == {filtered["agent"], filtered["high"], filtered["gone"]}
    assert shown(tag="beta") == {filtered["high"]}
    assert shown(priority="high") == {filtered["high"]}
    assert shown(source="agent") == {filtered["agent"]}
    assert shown(category="project", unverified="1") == {filtered["agent"]}
    html = page(client, base + "category=project&expired=1")
    agent_row = re.search(rf'<tr id="row-{filtered["agent"]}" class="([^"]*)"', html)
    assert agent_row and "is-unverified" in agent_row.group(1) and "is-agent" in agent_row.group(1)
    assert 'class="badge unverified"' in html and 'class="badge agent"' in html and 'class="badge expired"' in html
    assert 'id="filters"' in html and 'id="q"' in html and 'hx-push-url="true"' in html
    bad = client.get(base + "category=nonsense")
    assert bad.status_code == 400 and "nonsense" in bad.text and 'id="filters"' in bad.text
    assert client.get(base + "page=0").status_code == 400
    assert client.get(base + "status=everything").status_code == 400


def test_the_address_htmx_shows_holds_only_the_filters_in_use(console: Console) -> None:
    """A filter form sends every field, empty or not; the address pushed is the page's clean one."""
    client = console.person()
    base = "/console/m/anna/memories"
    htmx = {"HX-Request": "true"}
    sent = "q=&category=&priority=&source=agent&tag=&status=active"
    assert client.get(f"{base}?{sent}", headers=htmx).headers["HX-Push-Url"] == f"{base}?source=agent"
    assert client.get(f"{base}?q=&category=&status=active", headers=htmx).headers["HX-Push-Url"] == base
    both = client.get(f"{base}?q=caf%C3%A9+tea&unverified=on&page=1", headers=htmx).headers["HX-Push-Url"]
    assert both == f"{base}?q=caf%C3%A9+tea&unverified=1"
    assert "HX-Push-Url" not in client.get(f"{base}?{sent}").headers  # a page load keeps its own address
    assert "HX-Push-Url" not in client.get(f"{base}?status=everything", headers=htmx).headers  # the error's own


def test_pagination_links_keep_the_filters(console: Console) -> None:
    client = console.person()
    made = [
        console.store(f"paged_{n:03}", f"paged memory {n}", mind="anna", category="context", tags=["paged"])
        for n in range(120)
    ]
    base = "/console/m/anna/memories?category=context&tag=paged"
    first = page(client, base)
    assert rows(first) == [m.id for m in reversed(made[-50:])]  # newest first
    assert 'rel="prev"' not in first
    next_link = unescape(re.search(r'href="([^"]+)" hx-get="[^"]+"[^>]*rel="next"', first).group(1))
    assert "category=context" in next_link and "tag=paged" in next_link and "page=2" in next_link
    second = page(client, next_link)
    assert rows(second) == [m.id for m in reversed(made[20:70])]
    third = page(client, base + "&page=3")
    assert len(rows(third)) == 20 and 'rel="next"' not in third and 'rel="prev"' in third
    assert "101–120 of 120" in third


def test_search_highlights_snippets_as_escaped_text(console: Console) -> None:
    client = console.person()
    memory = console.store("search_walrus", "The walrus <b>sleeps</b> on the ice", tags=["arctic"])
    html = page(client, f"/console/m/{MIND}/memories?q=walrus")
    assert rows(html)[0] == memory.id
    snippet = re.search(r'<span class="snippet">(.*?)</span>', html).group(1)
    assert "<mark>walrus</mark>" in snippet and "&lt;b&gt;sleeps&lt;/b&gt;" in snippet and "<b>" not in snippet
    assert "best match first" in html
    none = page(client, f"/console/m/{MIND}/memories?q=zzzznothing")
    assert "No memory matches." in none
    broken = client.get(f"/console/m/{MIND}/memories?q=" + "x" * 5000)
    assert broken.status_code == 400 and 'id="error"' in broken.text


def test_a_hostile_memory_renders_inert_everywhere(console: Console) -> None:
    client = console.person()
    body = "\n".join(HOSTILE) + "\n[click](javascript:alert(1))"
    memory = console.store("hostile_xss", body, agent=True, tags=["<script>alert(1)</script>", "javascript:alert(1)"])
    pages = [
        page(client, f"/console/m/{MIND}/memories"),
        page(client, f"/console/m/{MIND}/memories?q=alert"),
        page(client, memory_url(memory.id)),
        page(client, f"/console/m/{MIND}/log"),
    ]
    for html in pages:
        assert "<script>alert" not in html and "<img" not in html
        tags = re.findall(r"<[^>]*>", html)  # memory text is escaped, so every tag is the console's own
        # url-encoded, the search box's value, the list's query, the edit form's tags (escaped: the value is quoted)
        own = ("%28", 'id="q"', 'id="selection-query"', 'id="edit-tags"')
        risky = [tag for tag in tags if "alert" in tag and not any(mark in tag for mark in own)]
        assert not risky, risky
        assert not re.search(r'(href|src|action|formaction)="\s*javascript:', html, re.IGNORECASE)
    shown = pages[2]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in shown
    assert '<pre class="body" id="body">' in shown
    tag_link = re.search(r'<a class="tag" href="([^"]+)">&lt;script', pages[0])
    assert (
        tag_link
        and tag_link.group(1).startswith("/console/m/michael/memories?")
        and "%3Cscript%3E" in tag_link.group(1)
    )


# --- one memory and its actions ----------------------------------------------------------------------------------


def test_memory_page_shows_every_field_the_body_and_the_history(console: Console) -> None:
    client = console.person()
    console.store("history_page", "first text", tags=["one"])
    memory = console.store("history_page", "second text", tags=["one", "two"], priority="high")
    html = page(client, memory_url(memory.id))
    for field in (
        "id",
        "category",
        "key",
        "priority",
        "tags",
        "source",
        "verified",
        "confidence",
        "expires_at",
        "status",
        "created_at",
        "updated_at",
        "path",
    ):
        assert f"<dt>{field}</dt>" in html, field
    assert '<pre class="body" id="body">second text</pre>' in html
    versions = re.findall(r'<li class="version" id="v-([0-9a-f]{12})"', html)
    assert len(versions) == 2
    assert "changed: " in html and '<span class="field-name">priority</span>' in html
    assert '<span class="del">-first text</span>' in html and '<span class="add">+second text</span>' in html
    assert page(client, memory_url("fact/history_page")).count('class="version"') == 2  # a REF works too
    missing = client.get(memory_url("mem_zzzzzzzzzzzz"))
    assert missing.status_code == 404 and "mem_zzzzzzzzzzzz" in missing.text and "Traceback" not in missing.text


def test_verify_is_one_commit_with_a_flash_message(console: Console) -> None:
    client = console.person()
    memory = console.store("verify_me", "an agent wrote this", agent=True)
    answer = act(client, memory.id, "verify")
    assert answer.status_code == 303 and answer.headers["location"] == memory_url(memory.id)
    assert subject(console.setup.root) == "verify fact/verify_me (user)"
    body = git(console.setup.root, "log", "-1", "--format=%b")
    assert "Memfile-Key: person-key" in body
    html = page(client, answer.headers["location"])
    assert flashes(html)[0].startswith("Verified fact/verify_me (commit ")
    assert console.vault_call(lambda v: v.get(memory.id)).verified is True
    assert flashes(page(client, memory_url(memory.id))) == []  # shown once
    again = act(client, memory.id, "verify")  # the button is gone, but a stale form changes nothing
    assert again.status_code == 303
    assert "Nothing to change" in flashes(page(client, memory_url(memory.id)))[0]


def test_reactivate_forget_and_restore_are_commits(console: Console) -> None:
    client = console.person()
    root = console.setup.root
    old = console.store("lifecycle_old", "old text")
    console.store("lifecycle_new", "new text", supersedes="fact/lifecycle_old")
    assert 'value="reactivate"' in page(client, memory_url(old.id))
    assert act(client, old.id, "reactivate").status_code == 303
    assert subject(root) == "reactivate fact/lifecycle_old (user)"
    assert flashes(page(client, memory_url(old.id)))[0].startswith("Reactivated fact/lifecycle_old")

    assert act(client, old.id, "forget").status_code == 303
    assert subject(root) == "forget fact/lifecycle_old (user)"
    html = page(client, memory_url(old.id))
    assert 'id="forgotten"' in html and flashes(html)[0].startswith("Forgot fact/lifecycle_old")
    assert 'value="restore"' in html

    versions = re.findall(r'<li class="version" id="v-[0-9a-f]+">.*?name="at" value="([0-9a-f]{40})"', html, re.DOTALL)
    assert versions
    answer = post(client, memory_url(old.id), {"csrf": csrf_of(html), "action": "restore", "at": versions[-1]})
    assert answer.status_code == 303
    assert subject(root).startswith("restore fact/lifecycle_old from ")
    restored = page(client, memory_url(old.id))
    assert 'id="forgotten"' not in restored and flashes(restored)[0].startswith("Restored the version of")
    assert console.vault_call(lambda v: v.get(old.id)).content == "old text"


def test_verify_and_forget_the_memories_ticked_on_the_list(console: Console) -> None:
    client = console.person()
    root, listed = console.setup.root, f"/console/m/{MIND}/memories"
    ticked = [console.store(f"ticked_{n}", "an agent's guess", agent=True, tags=["ticked"]) for n in range(3)]
    kept = console.store("ticked_not", "left alone", agent=True, tags=["ticked"])
    html = page(client, f"{listed}?tag=ticked")
    assert all(f'name="ref" value="{m.id}" form="selection"' in html for m in [*ticked, kept])
    assert 'id="verify-selected"' in html and 'id="forget-selected"' in html
    form = {"csrf": csrf_of(html), "query": "tag=ticked", "ref": [m.id for m in ticked[:2]]}
    verified = post(client, listed, form | {"action": "verify"})
    assert verified.status_code == 303 and verified.headers["location"] == f"{listed}?tag=ticked"
    shown = page(client, verified.headers["location"])
    assert flashes(shown) == ["Verified 2 memories: fact/ticked_0, fact/ticked_1."]
    assert [console.vault_call(lambda v, m=m: v.get(m.id)).verified for m in [*ticked, kept]] == [1, 1, 0, 0]
    before = int(git(root, "rev-list", "--count", "HEAD"))
    form["ref"] = [m.id for m in ticked]
    forgot = post(client, listed, form | {"action": "forget"})
    assert forgot.status_code == 303
    assert int(git(root, "rev-list", "--count", "HEAD")) == before + 1  # one commit for the three
    assert subject(root) == "forget 3 memories (user)"
    assert "Memfile-Key: person-key" in git(root, "log", "-1", "--format=%b")
    message = flashes(page(client, forgot.headers["location"]))[0]
    assert message.startswith("Forgot 3 memories in one commit (") and "fact/ticked_2" in message
    assert rows(page(client, f"{listed}?tag=ticked")) == [kept.id]


def test_the_lists_buttons_refuse_without_csrf_a_selection_or_a_session(console: Console) -> None:
    client = console.person()
    listed = f"/console/m/{MIND}/memories"
    memory = console.store("ticked_refused", "an agent's guess", agent=True, tags=["ticked_refused"])
    html = page(client, f"{listed}?tag=ticked_refused")
    head = git(console.setup.root, "rev-parse", "HEAD")
    no_token = post(client, listed, {"action": "forget", "ref": memory.id})
    assert no_token.status_code == 403 and "no CSRF token" in unescape(no_token.text)
    wrong = post(client, listed, {"action": "forget", "ref": memory.id, "csrf": other_token(csrf_of(html))})
    assert wrong.status_code == 403
    foreign = client.post(
        listed, data={"action": "forget", "ref": memory.id, "csrf": csrf_of(html)}, headers={"Origin": "http://x.y"}
    )
    assert foreign.status_code == 403
    nothing = post(client, listed, {"action": "forget", "csrf": csrf_of(html), "query": "tag=ticked_refused"})
    assert nothing.status_code == 400 and "tick the box" in unescape(nothing.text)
    assert rows(nothing.text) == [memory.id]  # the list again, with the error
    unknown = post(client, listed, {"action": "explode", "ref": memory.id, "csrf": csrf_of(html)})
    assert unknown.status_code == 400 and "verify, forget" in unknown.text
    missing = post(client, listed, {"action": "forget", "ref": "mem_0000000000", "csrf": csrf_of(html)})
    assert missing.status_code == 404
    bearer = {"Authorization": f"Bearer {console.setup.tokens['person']}"}
    assert 'id="forget-selected"' not in client.get(f"{listed}?tag=ticked_refused", headers=bearer).text
    by_bearer = client.post(listed, data={"action": "forget", "ref": memory.id}, headers=bearer | SAME)
    assert by_bearer.status_code == 403
    agent = {"Authorization": f"Bearer {console.setup.tokens['michael']}"}
    assert client.post(listed, data={"action": "forget", "ref": memory.id}, headers=agent | SAME).status_code == 403
    assert git(console.setup.root, "rev-parse", "HEAD") == head
    assert console.vault_call(lambda v: v.get(memory.id)).verified is False


def test_resolve_a_conflict_ours_or_theirs(console: Console) -> None:
    client = console.person()
    root = console.setup.root
    for key, take, kept in (("conflict_ours", "ours", "Berlin here"), ("conflict_theirs", "theirs", "Bonn there")):
        path = root / MIND / "fact" / f"{key}.md"
        path.write_text(
            f"---\nid: mem_{key.replace('_', '')}01\ncategory: fact\nkey: {key}\nsource: user\n"
            "created_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-02T00:00:00Z\n"
            "conflict_theirs: Bonn there\n---\nBerlin here\n",
            encoding="utf-8",
        )
        git(root, "add", "--", str(path.relative_to(root)))
        git(
            root,
            "-c",
            "user.name=Hand",
            "-c",
            "user.email=hand@example.com",
            "commit",
            "-q",
            "-m",
            "conflicted by hand",
        )
        memory_id = f"mem_{key.replace('_', '')}01"
        html = page(client, memory_url(memory_id))
        assert 'id="theirs"' in html and 'id="resolve-ours"' in html and 'class="badge conflict"' in html
        answer = act(client, memory_id, "resolve", take=take)
        assert answer.status_code == 303, answer.text[-500:]
        assert subject(root) == f"resolve fact/{key} with {take} (user)"
        after = console.vault_call(lambda v, i=memory_id: v.get(i))
        assert after.content == kept and after.conflict is None
        assert flashes(page(client, memory_url(memory_id)))[0].startswith(f"Resolved the conflict ({take})")


def test_a_library_error_is_shown_on_the_page_with_its_status(console: Console) -> None:
    client = console.person()
    memory = console.store("error_shown", "nothing to resolve")
    before = subject(console.setup.root)
    refused = act(client, memory.id, "resolve", take="ours")
    assert refused.status_code == 403 and "has no conflict to resolve" in refused.text
    assert 'id="error"' in refused.text and 'id="history"' in refused.text and "Traceback" not in refused.text
    bad = act(client, memory.id, "resolve", take="both")
    assert bad.status_code == 400 and "take" in bad.text
    unknown = act(client, memory.id, "explode")
    assert unknown.status_code == 400 and "verify, forget, reactivate, restore, resolve" in unknown.text
    not_a_sha = act(client, memory.id, "restore", at="HEAD~1")
    assert not_a_sha.status_code == 400 and "the commit of a version" in not_a_sha.text
    no_version = act(client, memory.id, "restore", at="0" * 40)
    assert no_version.status_code in (400, 404) and 'id="error"' in no_version.text
    assert subject(console.setup.root) == before  # nothing was committed


def other_token(token: str) -> str:
    """The token with its first character changed: one this session was never given (a fixed "x" was
    the same token whenever the real one began with "x", one run in 64)."""
    return ("y" if token.startswith("x") else "x") + token[1:]


def test_csrf_and_origin_refusals_change_nothing(console: Console) -> None:
    client = console.person()
    memory = console.store("csrf_target", "unverified", agent=True)
    html = page(client, memory_url(memory.id))
    token = csrf_of(html)
    url = memory_url(memory.id)
    cases = [
        ({"action": "verify"}, SAME, "no CSRF token"),
        ({"action": "verify", "csrf": other_token(token)}, SAME, "not this session"),
        ({"action": "verify", "csrf": token}, {"Origin": "http://evil.example"}, "another site"),
        ({"action": "verify", "csrf": token}, {"Origin": "null"}, "another site"),
        ({"action": "verify", "csrf": token}, {}, "neither Origin nor Referer"),
        ({"action": "verify", "csrf": token}, {"Referer": "http://evil.example/page"}, "another page"),
    ]
    for form, headers, reason in cases:
        answer = client.post(url, data=form, headers=headers)
        assert answer.status_code == 403, (form, headers)
        assert reason in unescape(answer.text), (reason, answer.text[-600:])
        assert answer.headers["content-security-policy"].startswith("default-src 'self'")
    assert console.vault_call(lambda v: v.get(memory.id)).verified is False
    other = console.person()  # another session's token is not this one's
    assert post(other, url, {"action": "verify", "csrf": token}).status_code == 403
    by_referer = client.post(url, data={"action": "verify", "csrf": token}, headers={"Referer": ORIGIN + url})
    assert by_referer.status_code == 303
    assert console.vault_call(lambda v: v.get(memory.id)).verified is True


# --- the other pages ------------------------------------------------------------------------------------------


def test_the_audit_log_pages_and_names_who(console: Console) -> None:
    client = console.person()
    for n in range(55):
        console.store("log_churn", f"version {n}", mind="anna", category="note")
    first = page(client, "/console/m/anna/log")
    entries = re.findall(r'<tr id="commit-([0-9a-f]{12})"', first)
    assert len(entries) == 50 and 'rel="next"' in first and 'rel="prev"' not in first
    assert "store note/log_churn (user)" in first and '<span class="badge user">user</span>' in first
    second = page(client, "/console/m/anna/log?page=2")
    more = re.findall(r'<tr id="commit-([0-9a-f]{12})"', second)
    assert more and not set(more) & set(entries) and 'rel="prev"' in second
    newest = git(console.setup.root, "log", "-1", "--format=%H", "--", "anna").strip()
    assert entries[0] == newest[:12]


def test_last_recall_shows_query_budget_and_why(console: Console) -> None:
    client = console.person()
    console.store("recall_pinned", "Always in context", priority="critical", mind="anna", category="identity")
    console.store("recall_match", "The lighthouse keeper", mind="anna")
    console.vault_call(lambda v: v.recall(query="lighthouse", budget=900), "anna")
    html = page(client, "/console/m/anna/last-recall")
    assert '<q id="recall-query">lighthouse</q>' in html and "900 tokens" in html
    assert "identity/recall_pinned" in html and "always shown" in html
    assert "fact/recall_match" in html and "matched the query" in html


def test_last_recall_before_any_recall_says_so(tmp_path: Path) -> None:
    from memfile.server.app import build_app

    setup = make_setup(tmp_path)
    with Minds(setup.root, watch=False) as minds:
        app = build_app(minds, KeyStore(setup.keys_path), allowed_hosts=["localhost"], mcp=False)
        client = Console(setup, minds, app).person()
        html = page(client, "/console/m/anna/last-recall")
        assert 'id="no-recall"' in html


def test_health_shows_status_and_runs_doctor(console: Console) -> None:
    client = console.person()
    html = page(client, f"/console/m/{MIND}/health")
    on_disk = int(re.search(r'id="on-disk">(\d+)', html).group(1))
    assert on_disk == len(console.vault_call(lambda v: v.memories()))
    assert 'value="doctor"' in html and 'id="findings"' not in html
    ran = post(client, f"/console/m/{MIND}/health", {"csrf": csrf_of(html), "action": "doctor"})
    assert ran.status_code == 200 and 'id="findings"' in ran.text and 'id="doctor-summary"' in ran.text
    refused = post(client, f"/console/m/{MIND}/health", {"action": "doctor"})
    assert refused.status_code == 403


def test_export_downloads_the_minds_export(console: Console) -> None:
    client = console.person()
    console.store("exported_one", "to be exported", mind="anna")
    answer = client.get("/console/m/anna/export")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    assert 'filename="memfile-export-anna-' in answer.headers["content-disposition"]
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")
    assert '"key": "exported_one"' in answer.text or '"key":"exported_one"' in answer.text
    synapse = client.get("/console/m/anna/export?format=json")
    assert synapse.status_code == 200 and synapse.json()
    assert client.get("/console/m/anna/export?format=xml").status_code == 400


def test_import_shows_the_plan_then_applies_it_as_one_commit(console: Console) -> None:
    client = console.person()
    root = console.setup.root
    html = page(client, f"/console/m/{MIND}/transfer")
    token = csrf_of(html)
    records = (
        '[{"category": "fact", "key": "imported_vi", "content": "Tiếng Việt: nhà hàng ở Hà Nội"},'
        ' {"category": "fact", "key": "imported_th", "content": "ภาษาไทย ร้านอาหาร"}]'
    )
    before = subject(root)
    (root / ".merge_file_Cn5tQ1").write_text("left by a killed merge\n")  # removed by the write, which says so
    planned = client.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": token, "action": "plan", "format": "synapse"},
        files={"file": ("../../etc/memories.json", records.encode(), "application/json")},
        headers=SAME,
    )
    assert planned.status_code == 200, planned.text[-800:]
    assert 'id="plan"' in planned.text and 'id="plan-created">2<' in planned.text
    assert subject(root) == before  # a dry run writes nothing
    upload = re.search(r'name="upload" value="([^"]+)"', planned.text).group(1)
    assert records not in planned.text  # the file stays on the server, not in a hidden field
    applied = post(client, f"/console/m/{MIND}/transfer", {"csrf": token, "action": "apply", "upload": upload})
    assert applied.status_code == 303
    assert subject(root) == "import 2 memories from memories.json (user)"
    shown = flashes(page(client, f"/console/m/{MIND}/transfer"))
    assert shown[0].startswith("Imported memories.json (synapse): 2 created")
    assert shown[1:] == ["removed 1 temporary files of a merge that was killed (.merge_file_Cn5tQ1)"]
    again = post(client, f"/console/m/{MIND}/transfer", {"csrf": token, "action": "apply", "upload": upload})
    assert again.status_code == 404 and "no longer kept" in again.text  # applied once, then gone
    empty = client.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": token, "action": "plan"},
        files={"file": ("empty.json", b"  ", "application/json")},
        headers=SAME,
    )
    assert empty.status_code == 400 and "it is empty" in empty.text
    broken = client.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": token, "action": "plan"},
        files={"file": ("broken.json", b"{not json", "application/json")},
        headers=SAME,
    )
    assert broken.status_code == 400 and 'id="error"' in broken.text and "Traceback" not in broken.text


def test_an_import_planned_for_one_mind_is_not_applied_to_another(console: Console) -> None:
    client = console.person()
    root = console.setup.root
    token = csrf_of(page(client, f"/console/m/{MIND}/transfer"))
    records = b'[{"category": "fact", "key": "planned_for_michael", "content": "Shown to michael only"}]'
    planned = client.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": token, "action": "plan", "format": "synapse"},
        files={"file": ("michael.json", records, "application/json")},
        headers=SAME,
    )
    assert planned.status_code == 200 and 'id="plan-created">1<' in planned.text, planned.text[-800:]
    upload = re.search(r'name="upload" value="([^"]+)"', planned.text).group(1)
    before = subject(root)
    for action in ("apply", "discard"):
        elsewhere = post(client, "/console/m/anna/transfer", {"csrf": token, "action": action, "upload": upload})
        assert elsewhere.status_code == 400, (action, elsewhere.status_code)
        assert "planned for the mind &#39;michael&#39;" in elsewhere.text and "nothing was imported" in elsewhere.text
    assert subject(root) == before
    assert (
        console.vault_call(lambda vault: [m.key for m in vault.list()], mind="anna").count("planned_for_michael") == 0
    )
    applied = post(client, f"/console/m/{MIND}/transfer", {"csrf": token, "action": "apply", "upload": upload})
    assert applied.status_code == 303  # still kept for the mind it was planned for
    assert console.vault_call(lambda vault: vault.get("planned_for_michael").content) == "Shown to michael only"


def test_a_file_of_unknown_format_is_told_to_choose_the_format_not_a_flag(console: Console) -> None:
    client = console.person()
    token = csrf_of(page(client, f"/console/m/{MIND}/transfer"))
    planned = client.post(
        f"/console/m/{MIND}/transfer",
        data={"csrf": token, "action": "plan"},
        files={"file": ("notes.txt", b"hello, no format memfile knows", "text/plain")},
        headers=SAME,
    )
    assert planned.status_code == 400 and "the Format choice: memfile|synapse" in planned.text, planned.text[-800:]
    assert "--from" not in planned.text


def test_a_ref_with_a_control_character_is_said_to_hold_one(console: Console) -> None:
    client = console.person()
    html = page(client, memory_url("office%00"), status=400)
    assert "control character" in html and "outside the mind" not in html


def test_vietnamese_thai_and_chinese_text_round_trips(console: Console) -> None:
    client = console.person()
    texts = {
        "text_vi": "Nhà hàng phở ngon nhất ở Hà Nội",
        "text_th": "ร้านอาหารไทยที่ดีที่สุด",
        "text_zh": "北京最好的饭馆在王府井",
    }
    made = {key: console.store(key, text, tags=["ngôn-ngữ"]) for key, text in texts.items()}
    listing = page(client, f"/console/m/{MIND}/memories?tag=ngôn-ngữ")
    assert set(rows(listing)) == {m.id for m in made.values()}
    for key, memory in made.items():
        html = page(client, memory_url(memory.id))
        assert f'<pre class="body" id="body">{texts[key]}</pre>' in html
    assert made["text_vi"].id in rows(page(client, f"/console/m/{MIND}/memories?q=nha+hang"))
    assert made["text_th"].id in rows(page(client, f"/console/m/{MIND}/memories?q=ร้านอาหาร"))
    assert made["text_zh"].id in rows(page(client, f"/console/m/{MIND}/memories?q=饭馆"))
    assert '<meta charset="utf-8">' in listing


def test_a_mind_added_while_the_server_runs_shows_its_name_and_says_it_is_empty(tmp_path: Path) -> None:
    """A mind made after the server started is named by memfile.toml as it is now (not the folder's name
    until a restart); its empty memories page says so and how to add one, not "No memory matches."."""
    from memfile import Vault
    from memfile.server.app import build_app

    setup = make_setup(tmp_path)
    minds = Minds(setup.root, watch=False)
    try:
        app = build_app(minds, KeyStore(setup.keys_path), allowed_hosts=["localhost"], mcp=False)
        client = Console(setup, minds, app).person()
        page(client, "/console")
        Vault.init(setup.root, "lan", "Lan's Mind").close()
        assert 'Lan&#39;s Mind <span class="muted">(lan)</span>' in page(client, "/console")  # the Mind menu
        empty = unescape(page(client, "/console/m/lan/memories"))
        assert "Memories of Lan's Mind" in empty
        assert "Lan's Mind holds no memories yet" in empty and "memfile --mind lan store" in empty
        assert "No memory matches." not in empty
        filtered = unescape(page(client, "/console/m/lan/memories?q=anything&source=agent"))
        assert "holds no memories yet" in filtered  # a filter on an empty mind: still the mind's emptiness
        minds.call_sync(Caller("lan", Source.USER, "test"), lambda v: v.store("fact", "first", "A first memory"))
        none = unescape(page(client, "/console/m/lan/memories?q=zzzznothing"))
        assert "No memory matches." in none and "holds no memories yet" not in none
    finally:
        minds.close()


# --- a real server ------------------------------------------------------------------------------------------


def test_a_real_server_prints_the_console_url_and_serves_it(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    server = start_server(setup)
    try:
        assert server.process.stdout is not None
        line = server.process.stdout.readline()  # printed right after the first (maybe read into its buffer)
        assert line.startswith("memfile: the memory console: ") and f"{server.url}/console" in line
        conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
        origin = f"http://{server.host}:{server.port}"
        conn.request("GET", "/console")
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 303 and answer.getheader("Location") == "/console/login"
        body = urlencode({"token": setup.tokens["person"]})
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin}
        conn.request("POST", "/console/login", body=body, headers=headers)
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 303
        cookie = answer.getheader("Set-Cookie").split(";")[0]
        conn.request("GET", "/console", headers={"Cookie": cookie})
        answer = conn.getresponse()
        html = answer.read().decode()
        assert answer.status == 200 and 'id="minds"' in html
        assert answer.getheader("Content-Security-Policy").startswith("default-src 'self'")
        conn.request("GET", "/memory/recall", headers={"Cookie": cookie})  # the cookie is no API credential
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 401
        conn.close()
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err


def test_behind_a_named_tls_proxy_the_login_works_over_https_with_a_secure_cookie(tmp_path: Path) -> None:
    """The documented remote setup: `--allow-remote --allow-host memory.example.com` behind a TLS proxy at
    127.0.0.1, named with --forwarded-allow-ips. Its X-Forwarded-Proto makes the request https (uvicorn's
    ProxyHeadersMiddleware): the browser's https Origin is this server's own, and the cookie is Secure. The
    same headers from an address not named (127.0.0.2) are not believed."""
    setup = make_setup(tmp_path)
    public = "memory.example.com"
    server = start_server(setup, "--allow-remote", "--allow-host", public, "--forwarded-allow-ips", "127.0.0.1")
    proxied = {
        "Host": public,
        "Origin": f"https://{public}",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-For": "203.0.113.7",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    login = urlencode({"token": setup.tokens["person"]})
    try:
        answer = server.request("POST", "/console/login", body=login, headers=proxied)
        assert answer.status == 303 and answer.headers["location"] == "/console", answer.body[-600:]
        cookie = answer.headers["set-cookie"]
        assert "; Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        session = {"Host": public, "X-Forwarded-Proto": "https", "Cookie": cookie.split(";")[0]}
        home = server.request("GET", "/console", headers=session)
        assert home.status == 200 and 'id="logout"' in home.body.decode()
        logout = urlencode({"csrf": csrf_of(home.body.decode())})
        out = server.request("POST", "/console/logout", body=logout, headers=proxied | session)
        assert (
            out.status == 303 and "Max-Age=0" in out.headers["set-cookie"] and "; Secure" in out.headers["set-cookie"]
        )

        spoofed = server.request("POST", "/console/login", body=login, headers=proxied, source="127.0.0.2")
        text = unescape(spoofed.body.decode())
        assert spoofed.status == 403 and "set-cookie" not in spoofed.headers
        assert f"another site (https://{public}), not from http://{public}" in text
        assert "--forwarded-allow-ips" in text
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err


def test_forwarded_allow_ips_takes_addresses_and_networks_only(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    for given in ("proxy.example.com", "127.0.0.1,nginx", "10.0.0.0/33"):
        result = subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(setup.root), "serve", "--port", "0"]
            + ["--keys", str(setup.keys_path), "--forwarded-allow-ips", given],
            capture_output=True,
            text=True,
            env=server_env(setup.home),
            timeout=60,
        )
        assert result.returncode == 2 and result.stdout == "", result
        assert "--forwarded-allow-ips" in result.stderr and "IP addresses or networks" in result.stderr


def test_purge_asks_on_a_page_that_names_what_goes_then_purges(console: Console) -> None:
    client = console.person()
    root = console.setup.root
    secret = console.store("purged_secret", "The vault door code is 8812-4471")
    console.store("purged_secret", "The vault door code is now 9931-0042")
    kept = console.store("purged_neighbour", "The door is painted green")
    html = page(client, memory_url(secret.id))
    assert 'id="purge-link"' in html and f"/console/m/{MIND}/purge/" in html
    purge_url = f"/console/m/{MIND}/purge/{secret.id}"
    asked = page(client, purge_url)
    assert 'id="goes"' in asked and 'id="stays"' in asked and "2 versions" in asked
    assert "fact/purged_secret" in asked and "cannot be undone" in asked
    assert post(client, purge_url, {"confirm": "yes"}).status_code == 403  # no CSRF token: nothing done
    unticked = post(client, purge_url, {"csrf": csrf_of(asked)})
    assert unticked.status_code == 400 and console.vault_call(lambda v: v.get(secret.id)).key == "purged_secret"
    done = post(client, purge_url, {"csrf": csrf_of(asked), "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"] == f"/console/m/{MIND}/memories"
    assert flashes(page(client, done.headers["location"]))[0].startswith("Purged fact/purged_secret: 2 versions")
    history = git(root, "log", "--all", "-p")  # (digits alone could be part of a sha)
    assert "code is 8812-4471" not in history and "code is now 9931-0042" not in history
    assert console.vault_call(lambda v: v.get(kept.id)).content == "The door is painted green"
    assert subject(root) == "purge fact/purged_secret (user)"
