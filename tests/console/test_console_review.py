"""Editing a memory on its page, and the Review page of captured memories, through Starlette's TestClient on
the application `memfile serve` builds (the `console` fixture: one vault for the module, each test with
memories and sessions of its own). The browser's side is in test_console_browser.py.

Proposals are made by a real capture with a fixed answer (`Vault.capture(messages, lambda system, user:
'{"memories": [...]}', session=...)`), as an app whose model answered so would make them.
"""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

from helpers import git
from helpers.console import MIND, SAME, Console, csrf_of, memory_url, page, post

from memfile.model import Status

REVIEW = f"/console/m/{MIND}/review"
#: The keys of the proposals ticked together (no word in common: a capture adds each).
MANY = ("ticked_camera", "ticked_language", "ticked_records", "ticked_game")
HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(1)>'
#: What a capture reads: the conversation its candidates' turns point into.
MESSAGES = [
    {"role": "user", "content": "Hi, a few things about me."},
    {"role": "assistant", "content": "Go ahead."},
    {"role": "user", "content": "Details follow."},
    {"role": "assistant", "content": "Noted."},
]


def capture(console: Console, session: str, *memories: dict[str, Any], messages: Any = MESSAGES) -> Any:
    """A capture of `messages` whose extractor answers `memories` (each: category, key, content, ...)."""
    answer = json.dumps({"memories": list(memories)})
    return console.vault_call(lambda vault: vault.capture(messages, lambda system, user: answer, session=session))


def proposed(console: Console, key: str) -> Any:
    """The proposal at `key` (any category), from the vault."""
    [memory] = [m for m in console.vault_call(lambda vault: vault.proposals()) if m.key == key]
    return memory


def head(console: Console) -> str:
    return git(console.setup.root, "rev-parse", "HEAD").strip()


def subjects(console: Console, count: int) -> list[str]:
    return git(console.setup.root, "log", f"-{count}", "--format=%s").splitlines()


def flashes(html: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'<p class="flash" role="status">([^<]*)</p>', html)]


def error_of(html: str) -> str:
    found = re.search(r'<p class="error" role="alert" id="error">([^<]*)</p>', html)
    assert found, html[-3000:]
    return unescape(found.group(1))


def by_id(html: str, element: str, ident: str) -> str:
    """The text inside the element `<element ... id="ident">`, unescaped."""
    found = re.search(rf'<{element}[^>]* id="{re.escape(ident)}"[^>]*>(.*?)</{element}>', html, re.S)
    assert found, (ident, html[-3000:])
    return unescape(found.group(1))


def version_of(html: str) -> str:
    found = re.search(r'name="version" value="([0-9a-f]*)"', html)
    assert found, html[-3000:]
    return found.group(1)


def opened(console: Console, key: str, content: str) -> tuple[Any, Any, str]:
    """A person's memory at `key` and a person's client that loaded its page: (client, memory, the page)."""
    client = console.person()
    memory = console.store(key, content)
    return client, memory, page(client, memory_url(memory.id))


def edit(client: Any, memory_id: str, html: str, **fields: str) -> Any:
    """Send the memory page's edit form (from `html`) with `fields` changed."""
    form = {
        "csrf": csrf_of(html),
        "action": "edit",
        "version": version_of(html),
        "content": by_id(html, "textarea", "edit-content"),
        "tags": re.search(r'id="edit-tags" name="tags" value="([^"]*)"', html).group(1),  # type: ignore[union-attr]
        "priority": re.search(r'<option value="(\w+)" selected>', html).group(1),  # type: ignore[union-attr]
        "expires": re.search(r'id="edit-expires" name="expires" value="([^"]*)"', html).group(1),  # type: ignore[union-attr]
    }
    return post(client, memory_url(memory_id), {**{k: unescape(v) for k, v in form.items()}, **fields})


# --- editing a memory on its page ----------------------------------------------------------------------------


def test_edit_a_memory_on_its_page_is_one_commit(console: Console) -> None:
    client = console.person()
    memory = console.store("edited_on_page", "The boiler is serviced in May.", agent=True, tags=["house"])
    html = page(client, memory_url(memory.id))
    assert by_id(html, "textarea", "edit-content") == "The boiler is serviced in May."
    assert 'id="edit-tags" name="tags" value="house"' in html and 'id="edit-expires" name="expires" value=""' in html
    before = int(git(console.setup.root, "rev-list", "--count", "HEAD"))
    answer = edit(
        client, memory.id, html, content="The boiler is serviced in June.", tags="house, heating", priority="high"
    )
    assert answer.status_code == 303 and answer.headers["location"] == memory_url(memory.id)
    assert int(git(console.setup.root, "rev-list", "--count", "HEAD")) == before + 1
    assert subjects(console, 1) == ["edit fact/edited_on_page (user)"]
    saved = console.vault_call(lambda vault: vault.get(memory.id))
    assert (saved.content, saved.tags, str(saved.priority)) == (
        "The boiler is serviced in June.",
        ("house", "heating"),
        "high",
    )
    assert saved.verified and str(saved.source) == "user" and saved.expires_at is None
    shown = page(client, memory_url(memory.id))
    assert any(f.startswith("Saved fact/edited_on_page (commit ") for f in flashes(shown)), flashes(shown)
    assert by_id(shown, "pre", "body") == "The boiler is serviced in June."
    again = edit(client, memory.id, shown, expires="30d")  # expiry: a duration from now
    assert again.status_code == 303
    assert console.vault_call(lambda vault: vault.get(memory.id)).expires_at is not None
    same = page(client, memory_url(memory.id))
    assert edit(client, memory.id, same).status_code == 303  # nothing changed: no commit
    assert int(git(console.setup.root, "rev-list", "--count", "HEAD")) == before + 2
    assert "Nothing to change: fact/edited_on_page already says that." in flashes(page(client, memory_url(memory.id)))


def test_an_edit_without_csrf_a_session_or_a_persons_key_changes_nothing(console: Console) -> None:
    client, memory, html = opened(console, "edit_refused", "Keys are under the mat.")
    commit = head(console)
    assert edit(client, memory.id, html, csrf="wrong", content="Changed").status_code == 403
    form = {"csrf": csrf_of(html), "action": "edit", "content": "Changed", "version": version_of(html)}
    assert post(client, memory_url(memory.id), form, {"Origin": "http://evil.example"}).status_code == 403
    for token in ("person", "michael"):  # a person's Bearer token only reads; a Mind Key not even that
        bearer = {"Authorization": f"Bearer {console.setup.tokens[token]}"}
        assert console.client().post(memory_url(memory.id), data=form, headers=bearer | SAME).status_code == 403
    read = console.client().get(
        memory_url(memory.id), headers={"Authorization": f"Bearer {console.setup.tokens['person']}"}
    )
    assert read.status_code == 200 and 'id="edit-form"' not in read.text
    assert console.client().post(memory_url(memory.id), data=form, headers=SAME).headers["location"] == "/console/login"
    assert head(console) == commit
    assert console.vault_call(lambda vault: vault.get(memory.id)).content == "Keys are under the mat."


def test_bad_values_are_named_on_the_page_and_the_text_typed_is_kept(console: Console) -> None:
    client, memory, html = opened(console, "edit_bad_values", "The car is blue.")
    commit = head(console)
    token = "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for fields, status, said in (
        ({"priority": "urgent"}, 400, ["priority", "'urgent'", "low", "critical"]),
        ({"expires": "soonish"}, 400, ["expires", "'soonish'", "never"]),
        ({"content": "   "}, 400, ["content", "non-empty text"]),
        ({"tags": "-minus"}, 400, ["tag", "not starting with '-'"]),
        ({"content": f"The car is blue. Token {token}"}, 403, ["secret", "[secrets]"]),
    ):
        typed = {"content": f"The car is red, typed {HOSTILE}", **fields}
        answer = edit(client, memory.id, html, **typed)
        assert answer.status_code == status, (fields, answer.status_code)
        message = error_of(answer.text)
        for word in said:
            assert word in message, (fields, message)
        assert token not in message  # a message masks a secret (the form keeps what the person typed)
        if "content" not in fields:
            assert by_id(answer.text, "textarea", "edit-content") == typed["content"]  # nothing typed is lost
            assert "<script>alert" not in answer.text and "<img" not in answer.text
        assert 'id="edit" open' in answer.text and 'id="edit-conflict"' not in answer.text
        assert version_of(answer.text) == version_of(html)
    assert head(console) == commit
    assert console.vault_call(lambda vault: vault.get(memory.id)).content == "The car is blue."


def test_an_edit_over_a_file_changed_meanwhile_is_refused_with_both_versions(console: Console) -> None:
    client, memory, html = opened(console, "edit_conflict", "The spare key is with Ana.")
    path = console.setup.root / memory.path
    changed = path.read_text(encoding="utf-8").replace("with Ana.", "with Bảo now, since Monday.")
    path.write_text(changed, encoding="utf-8")  # a hand edit (or another writer) lands after the page was loaded
    commit = head(console)
    mine = f"The spare key is with Chloé {HOSTILE}"
    answer = edit(client, memory.id, html, content=mine, tags="keys")
    assert answer.status_code == 409
    assert "changed since the version you edited; nothing was written" in error_of(answer.text)
    assert by_id(answer.text, "pre", "edit-theirs") == "The spare key is with Bảo now, since Monday."
    assert by_id(answer.text, "pre", "edit-yours") == mine
    assert "tags: keys" in by_id(answer.text, "p", "edit-yours-fields")
    assert by_id(answer.text, "textarea", "edit-content") == mine  # the form keeps the person's text
    assert "<script>alert" not in answer.text and "<img" not in answer.text
    assert path.read_text(encoding="utf-8") == changed and head(console) == commit  # nothing overwritten
    newer = version_of(answer.text)
    assert newer != version_of(html)  # the form now carries what is on disk: saving again is deliberate
    again = edit(client, memory.id, answer.text, content=mine)
    assert again.status_code == 303
    assert console.vault_call(lambda vault: vault.get(memory.id)).content == mine
    assert subjects(console, 2) == ["edit fact/edit_conflict (user)", "record hand edit of fact/edit_conflict"]


def test_a_proposed_memory_is_edited_on_the_review_page_not_its_own(console: Console) -> None:
    client = console.person()
    capture(console, "s-proposed-page", {"category": "fact", "key": "kayak_colour", "content": "The kayak is teal."})
    memory = proposed(console, "kayak_colour")
    html = page(client, memory_url(memory.id))
    assert 'id="proposed"' in html and f'href="{REVIEW}"' in html
    assert 'id="edit-form"' not in html and 'value="verify"' not in html
    form = {"csrf": csrf_of(html), "action": "edit", "content": "The kayak is red.", "version": "x", "priority": "low"}
    answer = post(client, memory_url(memory.id), form)
    assert answer.status_code == 403 and "waits for review" in error_of(answer.text)
    assert console.vault_call(lambda vault: vault.get(memory.id)).content == "The kayak is teal."


# --- the review queue --------------------------------------------------------------------------------------


def test_the_review_page_shows_each_proposal_with_its_session_turns_capture_and_what_it_supersedes(
    console: Console,
) -> None:
    client = console.person()
    old = console.store("review_city", "Lives in Lisbon, near the river.", category="identity")
    before = page(client, REVIEW)
    waiting = int(re.search(r'id="review-count"[^>]*>(\d+)<', before).group(1)) if 'id="review-count"' in before else 0  # type: ignore[union-attr]
    report = capture(
        console,
        "s-review-page",
        {"category": "identity", "key": "review_city", "content": "Moved to Porto in March.", "turns": [2]},
        {
            "category": "preference",
            "key": "review_tea",
            "content": "Drinks oolong tea.",
            "tags": ["drinks"],
            "turns": [0, 2],
        },
    )
    assert [d.action for d in report.decisions] == ["update", "add"], [d.reason for d in report.decisions]
    city, tea = proposed(console, "review_city_2"), proposed(console, "review_tea")
    html = page(client, REVIEW)
    assert int(re.search(r'id="review-count"[^>]*>(\d+)<', html).group(1)) == waiting + 2  # type: ignore[union-attr]
    assert f'<a id="nav-review" href="{REVIEW}" aria-current="page">' in html
    card = html[html.index(f'id="p-{tea.id}"') :]
    card = card[: card.index("</article>")]
    assert "preference/review_tea" in card and "Drinks oolong tea." in card and ">drinks<" in card
    assert '<dd class="session">s-review-page</dd>' in card and "0, 2" in card
    said = card[card.index(f'<ul class="said" id="said-{tea.id}">') :]  # the conversation lines it came from
    assert re.findall(r"<li>([^<]*)</li>", said[: said.index("</ul>")]) == [
        "[0] user: Hi, a few things about me.",
        "[2] user: Details follow.",
    ]
    assert "capture s-review-page (user): 1 added, 1 updated, 0 skipped" in card  # the capture commit's subject
    compare = html[html.index(f'id="compare-{city.id}"') :]
    compare = compare[: compare.index("</article>")]
    assert "identity/review_city" in compare and "Lives in Lisbon, near the river." in compare
    assert "Moved to Porto in March." in compare
    assert f'id="accept-{city.id}">Accept (supersedes identity/review_city)' in html
    assert f'form="review-selection" id="select-{tea.id}"' in html and 'id="accept-selected"' in html
    # everywhere else, the queue's count is in the navigation too
    assert f'id="review-count" title="{waiting + 2} waiting for review"' in page(client, f"/console/m/{MIND}/profile")
    assert old.id in console.vault_call(lambda vault: [m.id for m in vault.list()])  # still in force until accepted


def test_accept_reject_and_edit_then_accept_each_make_one_commit(console: Console) -> None:
    client = console.person()
    old = console.store("review_bike", "Rides a red road bike.", category="preference")
    capture(
        console,
        "s-accept",
        {"category": "preference", "key": "review_bike", "content": "Rides a green gravel bike now."},
        {"category": "fact", "key": "review_plant", "content": "A fig tree grows on the balcony."},
        {"category": "fact", "key": "review_drawer", "content": "Batteries live in the hall drawer."},
    )
    bike, plant, drawer = (proposed(console, k) for k in ("review_bike_2", "review_plant", "review_drawer"))
    html = page(client, REVIEW)
    commits = int(git(console.setup.root, "rev-list", "--count", "HEAD"))

    answer = post(client, REVIEW, {"csrf": csrf_of(html), "action": "accept", "ref": bike.id})
    assert answer.status_code == 303 and answer.headers["location"] == REVIEW
    assert subjects(console, 1) == ["accept preference/review_bike_2 (user), superseding preference/review_bike"]
    accepted = console.vault_call(lambda vault: vault.get(bike.id))
    assert accepted.verified and accepted.status is None and "proposed_supersedes" not in dict(accepted.extra)
    assert console.vault_call(lambda vault: vault.get(old.id)).superseded

    answer = post(client, REVIEW, {"csrf": csrf_of(html), "action": "reject", "ref": plant.id})
    assert answer.status_code == 303 and subjects(console, 1) == ["reject fact/review_plant (user)"]
    assert not (console.setup.root / plant.path).exists()

    typed = {"content": "Batteries live in the kitchen drawer.", "tags": "home", "priority": "low", "expires": "90d"}
    answer = post(client, REVIEW, {"csrf": csrf_of(html), "action": "edit", "ref": drawer.id, **typed})
    assert answer.status_code == 303 and subjects(console, 1) == ["accept fact/review_drawer (user)"]
    changed = console.vault_call(lambda vault: vault.get(drawer.id))
    assert (changed.content, changed.tags, str(changed.priority)) == (typed["content"], ("home",), "low")
    assert changed.expires_at is not None and changed.verified and not changed.proposed
    assert int(git(console.setup.root, "rev-list", "--count", "HEAD")) == commits + 3
    shown = flashes(page(client, REVIEW))
    assert any(f.startswith("Accepted 1 memory (a commit each): fact/review_drawer.") for f in shown), shown
    assert f'id="p-{drawer.id}"' not in page(client, REVIEW)


def test_tick_several_proposals_then_accept_or_reject_them_all(console: Console) -> None:
    client = console.person()
    capture(
        console,
        "s-many",
        *(  # nothing in common (their keys neither): each one is added
            {"category": "note", "key": key, "content": text}
            for key, text in zip(MANY, ("Owns a Leica.", "Speaks basic Finnish.", "Collects vinyl.", "Plays chess."))
        ),
    )
    ids = [proposed(console, key).id for key in MANY]
    html = page(client, REVIEW)
    commits = int(git(console.setup.root, "rev-list", "--count", "HEAD"))
    accept = client.post(REVIEW, data={"csrf": csrf_of(html), "action": "accept", "ref": ids[:2]}, headers=SAME)
    assert accept.status_code == 303
    assert sorted(subjects(console, 2)) == [f"accept note/{key} (user)" for key in sorted(MANY[:2])]
    reject = client.post(REVIEW, data={"csrf": csrf_of(html), "action": "reject", "ref": ids[2:]}, headers=SAME)
    assert reject.status_code == 303
    assert int(git(console.setup.root, "rev-list", "--count", "HEAD")) == commits + 4
    assert f"Rejected 2 memories (a commit each): note/{MANY[2]}, note/{MANY[3]}." in " ".join(
        flashes(page(client, REVIEW))
    )
    memories = console.vault_call(lambda vault: {m.id: m for m in vault.memories()})
    assert all(memories[i].verified and not memories[i].proposed for i in ids[:2])
    assert not set(ids[2:]) & set(memories)


def test_the_review_buttons_refuse_bad_requests_and_change_nothing(console: Console) -> None:
    client = console.person()
    capture(
        console, "s-refused", {"category": "fact", "key": "review_refused", "content": "The piano is tuned yearly."}
    )
    memory = proposed(console, "review_refused")
    accepted = console.store("review_not_proposed", "An accepted memory.")
    html = page(client, REVIEW)
    commit = head(console)
    csrf = csrf_of(html)
    for form, status, said in (
        ({"csrf": "wrong", "action": "accept", "ref": memory.id}, 403, None),
        ({"csrf": csrf, "action": "accept"}, 400, "selection"),
        ({"csrf": csrf, "action": "promote", "ref": memory.id}, 400, "accept, edit, reject"),
        ({"csrf": csrf, "action": "accept", "ref": "fact/no_such_proposal"}, 404, "fact/no_such_proposal"),
        (
            {"csrf": csrf, "action": "edit", "ref": memory.id, "content": "Tuned twice a year.", "priority": "urgent"},
            400,
            "'urgent'",
        ),
    ):
        answer = post(client, REVIEW, form)
        assert answer.status_code == status, (form, answer.status_code, answer.text[-2000:])
        if said is not None:
            assert said in error_of(answer.text), (form, error_of(answer.text))
    kept = post(client, REVIEW, {"csrf": csrf, "action": "edit", "ref": memory.id, "content": HOSTILE, "priority": "x"})
    assert kept.status_code == 400 and by_id(kept.text, "textarea", f"e-{memory.id}-content") == HOSTILE
    assert f'id="edit-{memory.id}" open' in kept.text and "<script>alert" not in kept.text
    answer = post(client, REVIEW, {"csrf": csrf, "action": "reject", "ref": accepted.id})
    assert answer.status_code == 404 and "not waiting for review" in error_of(answer.text)
    foreign = post(
        client, REVIEW, {"csrf": csrf, "action": "accept", "ref": memory.id}, {"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert head(console) == commit
    assert console.vault_call(lambda vault: vault.get(memory.id)).status is Status.PROPOSED


def test_a_mind_key_sees_no_review_page_and_a_persons_bearer_token_cannot_act(console: Console) -> None:
    capture(console, "s-keys", {"category": "fact", "key": "review_keys", "content": "The router is in the attic."})
    memory = proposed(console, "review_keys")
    client = console.client()
    agent = {"Authorization": f"Bearer {console.setup.tokens['michael']}"}
    assert client.get(REVIEW, headers=agent).status_code == 403
    assert client.post(REVIEW, data={"action": "accept", "ref": memory.id}, headers=agent | SAME).status_code == 403
    person = {"Authorization": f"Bearer {console.setup.tokens['person']}"}
    shown = client.get(REVIEW, headers=person)
    assert (
        shown.status_code == 200
        and "The router is in the attic." in shown.text
        and 'id="accept-selected"' not in shown.text
    )
    assert client.post(REVIEW, data={"action": "accept", "ref": memory.id}, headers=person | SAME).status_code == 403
    assert client.get(REVIEW).headers["location"] == "/console/login"
    assert console.vault_call(lambda vault: vault.get(memory.id)).proposed


def test_hostile_text_tags_and_session_names_are_escaped_on_the_review_page(console: Console) -> None:
    client = console.person()
    capture(
        console,
        f"s-hostile {HOSTILE}",
        {
            "category": "note",
            "key": "review_hostile",
            "content": f"Said {HOSTILE} [x](javascript:alert(1))",
            "tags": [HOSTILE],
            "turns": [0],
        },
        messages=[{"role": "user", "content": f"Quoted {HOSTILE}"}],
    )
    html = page(client, REVIEW)
    assert "<li>[0] user: Quoted &lt;script&gt;alert(1)&lt;/script&gt;" in html  # the quoted line, escaped
    assert "<script>alert" not in html and "<img" not in html
    assert not re.search(r'(href|src|action|formaction)="\s*javascript:', html, re.IGNORECASE)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert (
        f'<dd class="session">s-hostile {HOSTILE.replace("<", "&lt;").replace(">", "&gt;").replace(chr(34), "&#34;")}</dd>'
        in html
    )
