"""The console in a real browser: Debian's Chromium, headless, driven by Selenium, against a real `memfile serve`.

One server and one browser serve the whole module (a vault of michael's memories in three scripts, an agent's
unverified memories, a memory with history, a hostile memory and more than a page of notes: see
console_browser_helpers). Each test logs in and walks one flow a person would; after each, the browser's log
holds no error (JavaScript errors, CSP violations and failed loads are SEVERE entries) and no hostile payload
ran (`window.__pwned` is undefined). The tests skip without Chromium and its driver, and fail instead when
CI is set. `MEMFILE_SCREENSHOTS=1` also saves each page to docs/console/ (docs/console.md shows them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers import committed_on, git
from helpers.browser import (
    CHINESE,
    FILLERS,
    HISTORY,
    IMG,
    NARROW,
    SCRIPT,
    THAI,
    VIETNAMESE,
    browser_errors,
    console_setup,
    isolated_git,
    pwned,
    require_browser,
    screenshot,
    start_chromium,
    without_browser,
)
from helpers.serve import Server, Setup, make_setup, start_server

from memfile import Vault

WAIT = 30.0  # seconds; generous, the machine is shared (a wait ends as soon as its condition holds)
PAGE = 50  # memories a page


# --- no browser needed -----------------------------------------------------------------------------


def test_without_chromium_a_person_skips_and_ci_fails() -> None:
    assert without_browser([], None) is None
    assert without_browser([], "true") is None
    kind, why = without_browser(["chromium", "chromedriver"], None) or ("", "")
    assert kind == "skip" and "chromium and chromedriver not found" in why
    assert "apt-get install chromium chromium-driver" in why
    for ci in ("true", "1", "yes"):
        kind, why = without_browser(["chromedriver"], ci) or ("", "")
        assert kind == "fail" and "CI is set" in why and "chromium-driver" in why
    assert (without_browser(["chromium"], "") or ("",))[0] == "skip"  # CI= (empty) is not set


# --- the server, the browser, and the checks after each flow ------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Server]]:
    require_browser()
    setup = console_setup(tmp_path_factory.mktemp("console"))
    server = start_server(setup)
    try:
        yield setup, server
    finally:
        code, _, err = server.stop()
        assert code == 0 and "Traceback" not in err, err[-3000:]


@pytest.fixture(scope="module")
def driver(served: tuple[Setup, Server], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium = start_chromium(downloads=tmp_path_factory.mktemp("downloads"))
    try:
        yield chromium
    finally:
        chromium.quit()


class Browser:
    """The driver at the server's address, with the waits and finds the flows need."""

    def __init__(self, driver: Any, setup: Setup, server: Server) -> None:
        self.driver, self.setup, self.server = driver, setup, server
        self.base = server.url

    def go(self, path: str) -> None:
        self.driver.get(self.base + path)

    def path(self) -> str:
        return str(self.driver.current_url).removeprefix(self.base)

    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.driver.current_url).query)

    def wait(self, condition: Any, message: str = "") -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(lambda d: condition(), message)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self) -> str:
        return str(self.find("body").text)

    def login(self, token: str) -> None:
        """Type the token into the login form and press Enter, as a person does."""
        from selenium.webdriver.common.keys import Keys

        self.driver.delete_all_cookies()
        self.go("/console/login")
        self.find("input[type=password]").send_keys(token + Keys.ENTER)

    def logged_in(self) -> None:
        self.login(self.setup.tokens["person"])
        self.wait(lambda: not self.path().startswith("/console/login"), "the person's login did not leave the form")

    def mark(self) -> None:
        """A value on `window` that a full page load would lose and an htmx swap keeps."""
        self.driver.execute_script("window.__kept = 'kept'")

    def kept(self) -> bool:
        return self.driver.execute_script("return window.__kept") == "kept"

    def memory_links(self) -> list[str]:
        """The hrefs of the memories the list shows, in order (read at once: an htmx swap may be under way)."""
        return list(
            self.driver.execute_script("return [...document.querySelectorAll('#memories a.ref')].map(a => a.href)")
        )


@pytest.fixture
def browser(driver: Any, served: tuple[Setup, Server]) -> Iterator[Browser]:
    """The module's browser for one flow; afterwards no error in its log and no hostile payload ran."""
    setup, server = served
    browser_errors(driver)  # what an earlier flow left
    yield Browser(driver, setup, server)
    errors = browser_errors(driver)
    assert not errors, "the browser logged errors:\n" + "\n".join(errors)
    assert not pwned(driver), "a hostile payload ran"


# --- the flows -----------------------------------------------------------------------------------


@pytest.mark.browser
def test_a_person_logs_in_with_the_token_and_sees_every_mind(browser: Browser) -> None:
    browser.driver.delete_all_cookies()
    browser.go("/console")
    browser.wait(lambda: browser.path().startswith("/console/login"), "/console did not lead to the login form")
    screenshot(browser.driver, "login")
    browser.logged_in()
    token = browser.setup.tokens["person"]
    assert token not in browser.driver.current_url and token not in browser.driver.page_source
    cookies = browser.driver.get_cookies()
    assert cookies and all(c["httpOnly"] for c in cookies), cookies
    assert {c.get("sameSite") for c in cookies} == {"Strict"}, cookies
    assert browser.driver.execute_script("return document.cookie") == ""  # HttpOnly: no script reads it
    text = browser.text()
    assert "Michael's Mind" in text and "anna" in text
    screenshot(browser.driver, "minds")
    browser.find("#logout button").click()
    browser.wait(lambda: browser.path().startswith("/console/login"), "logging out did not lead to the login form")
    browser.go("/console/m/michael/memories")
    assert browser.path().startswith("/console/login"), "the session outlived its logout"


@pytest.mark.browser
def test_a_mind_key_or_a_wrong_token_stays_at_the_login_form(browser: Browser) -> None:
    for token, said in (
        (browser.setup.tokens["michael"], "person's token"),
        ("mfp_nothing_" + "x" * 32, "not accepted"),
    ):
        browser.login(token)
        browser.wait(lambda: browser.find_all("#error"), "no message after a refused login")
        assert browser.path().startswith("/console/login"), browser.path()
        assert said in browser.find("#error").text
        assert browser.find_all("#login input[type=password]"), "the login form is not shown again"
        assert not browser.driver.get_cookies()
        assert token not in browser.driver.current_url and token not in browser.driver.page_source
        browser.go("/console/m/michael/memories")
        assert browser.path().startswith("/console/login"), "a refused login reached a page"
    browser.login(browser.setup.tokens["michael"])  # then the person's token, in the form the refusal shows
    browser.wait(lambda: browser.find_all("#error"), "no message after a Mind Key's login")
    from selenium.webdriver.common.keys import Keys

    browser.find("#login input[type=password]").send_keys(browser.setup.tokens["person"] + Keys.ENTER)
    browser.wait(lambda: not browser.path().startswith("/console/login"), "the person's login did not leave the form")
    assert browser.find_all("#logout")
    # A refused login answers 401 or 403, which the browser logs; that and nothing else is expected.
    unexpected = [e for e in browser_errors(browser.driver) if not re.search(r"status of 40[13]\b", e)]
    assert not unexpected, unexpected


@pytest.mark.browser
def test_a_form_on_another_site_changes_nothing(browser: Browser) -> None:
    """Cross-site request forgery: a page elsewhere posts the forget form; the session cookie (SameSite=Strict)
    stays home, and the console's CSRF and same-origin checks would refuse it anyway."""
    setup = browser.setup
    browser.logged_in()
    target = f"{browser.base}/console/m/michael/memory/{setup.ids['agent']}"
    head = git(setup.root, "rev-parse", "HEAD")
    browser.driver.get(
        "data:text/html,<form method=post action='" + target + "'><input name=action value=forget>"
        "<input name=csrf value=guess></form><script>document.forms[0].submit()</script>"
    )
    browser.wait(lambda: browser.driver.current_url.startswith(browser.base), "the forged form was not sent")
    browser.wait(lambda: browser.find_all("main"), "no answer to the forged form")
    assert git(setup.root, "rev-parse", "HEAD") == head, "a forged form made a commit"
    assert (setup.root / "michael" / "project" / "deploy_notes.md").exists()
    unexpected = [e for e in browser_errors(browser.driver) if not re.search(r"status of 40[13]\b", e)]
    assert not unexpected, unexpected
    browser.go(f"/console/m/michael/memory/{setup.ids['agent']}")  # still logged in: the session is intact
    assert browser.find_all("button[name=action][value=forget]")


@pytest.mark.browser
def test_the_memories_filter_swaps_the_list_in_place_and_pushes_the_url(browser: Browser) -> None:
    from selenium.webdriver.support.ui import Select

    browser.logged_in()
    browser.go("/console/m/michael/memories")
    first = browser.memory_links()
    assert len(first) == PAGE, len(first)
    text = browser.text()
    assert "unverified" in text.lower()  # the agent's memories are marked
    screenshot(browser.driver, "memories")
    screenshot(browser.driver, "memories-360", NARROW)
    browser.mark()
    Select(browser.find("#f-source")).select_by_value("agent")
    browser.wait(lambda: browser.query().get("source") == ["agent"], "the filter did not change the URL")
    browser.wait(lambda: len(browser.memory_links()) == 3, "the list did not show the agent's three memories")
    assert browser.kept(), "the filter reloaded the whole page (htmx should swap <main>)"
    assert browser.path() == "/console/m/michael/memories?source=agent"  # no empty fields in the address
    listed = browser.find("main").text
    assert "deploy_notes" in listed and "standup_time" in listed and "filler_" not in listed
    browser.driver.back()  # the pushed URL is history: back shows every memory again
    browser.wait(lambda: "source" not in browser.query(), "back did not return to the unfiltered list")
    browser.wait(lambda: len(browser.memory_links()) == PAGE, "back did not show the whole first page")


@pytest.mark.browser
def test_the_search_box_finds_as_the_person_types(browser: Browser) -> None:
    browser.logged_in()
    browser.go("/console/m/michael/memories")
    browser.mark()
    box = browser.find("#q")
    box.send_keys("pipeline")
    browser.wait(lambda: browser.query().get("q") == ["pipeline"], "typing did not change the URL")
    browser.wait(lambda: len(browser.memory_links()) == 1, "the search did not narrow the list to one memory")
    assert browser.kept(), "the search reloaded the whole page"
    assert "deploy_notes" in browser.find("main").text
    assert browser.find_all("#memories mark"), "no highlighted snippet"


@pytest.mark.browser
def test_paging_goes_to_the_next_page_and_back(browser: Browser) -> None:
    browser.logged_in()
    browser.go("/console/m/michael/memories?tag=filler")
    assert len(browser.memory_links()) == PAGE
    assert not browser.find_all("a[rel=prev]")
    page_one = set(browser.memory_links())
    browser.mark()
    browser.find("a[rel=next]").click()
    browser.wait(lambda: browser.query().get("page") == ["2"], "next did not change the URL")
    browser.wait(lambda: len(browser.memory_links()) == FILLERS - PAGE, "page 2 did not show the rest")
    assert not page_one & set(browser.memory_links())
    assert browser.query().get("tag") == ["filler"], "paging dropped the filter"
    assert not browser.find_all("a[rel=next]")
    assert browser.kept(), "paging reloaded the whole page"
    browser.find("a[rel=prev]").click()
    browser.wait(lambda: set(browser.memory_links()) == page_one, "prev did not come back to page 1")


@pytest.mark.browser
def test_verify_an_agents_memory_and_the_audit_log_grows(browser: Browser) -> None:
    setup = browser.setup
    browser.logged_in()
    browser.go("/console/m/michael/log")
    before = browser.find_all("#log tbody tr")
    assert "verify fact/standup_time" not in browser.find("#log").text
    screenshot(browser.driver, "log")
    browser.go("/console/m/michael/memories?source=agent")
    [link] = [a for a in browser.find_all("#memories a.ref") if "standup_time" in a.text]
    link.click()
    browser.wait(lambda: setup.ids["to_verify"] in browser.path(), "the memory's page did not open")
    assert "09:30 Berlin" in browser.find("#body").text
    screenshot(browser.driver, "memory")
    browser.find("button[name=action][value=verify]").click()
    browser.wait(lambda: not browser.find_all("button[name=action][value=verify]"), "verify left its button")
    assert "unverified" not in browser.find("h1").text
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "verify fact/standup_time (user)"
    browser.go("/console/m/michael/log")
    assert len(browser.find_all("#log tbody tr")) == len(before) + 1
    newest = browser.find("#log tbody tr").text
    assert "verify fact/standup_time" in newest and "person-key" in newest


@pytest.mark.browser
def test_a_memory_shows_its_fields_and_every_version(browser: Browser) -> None:
    browser.logged_in()
    browser.go(f"/console/m/michael/memory/{browser.setup.ids['history']}")
    assert browser.find("#body").text == HISTORY[-1]
    assert len(browser.find_all("#history li.version")) == len(HISTORY)
    history = browser.find("#history").text
    for content in HISTORY:
        assert content in history, content
    assert "synapse" in browser.find("#fields").text
    browser.driver.execute_script("document.getElementById('history').scrollIntoView()")
    screenshot(browser.driver, "memory-history")


@pytest.mark.browser
def test_a_hostile_memory_renders_as_inert_text(browser: Browser) -> None:
    browser.logged_in()
    browser.go("/console/m/michael/memories?source=agent")  # the list: a shortened text, tags as links
    row = browser.find(f"#row-{browser.setup.ids['hostile']}").text
    assert "hostile_payload" in row and "<script>" in row
    browser.go("/console/m/michael/memories?q=pwned")  # a search snippet: escaped, then its matches marked
    row = browser.find(f"#row-{browser.setup.ids['hostile']}")
    assert row.find_elements("css selector", "mark") and "<script>" in row.text
    assert not browser.find_all("main img") and not browser.find_all("main script")
    browser.go(f"/console/m/michael/memory/{browser.setup.ids['hostile']}")
    body = browser.find("#body").text
    assert SCRIPT in body and IMG in body and "javascript:window.__pwned=1" in body
    tags = browser.find("#fields").text
    assert SCRIPT in tags and IMG in tags
    assert not browser.find_all("main img"), "an <img> from the memory's text reached the page"
    assert not browser.find_all("a[href^='javascript:' i]"), "a javascript: link is clickable"
    for script in browser.find_all("script"):  # only the server's own files
        assert (script.get_attribute("src") or "").startswith(browser.base + "/"), script.get_attribute("outerHTML")


@pytest.mark.browser
def test_the_scripts_render_on_profile_memories_and_last_recall(browser: Browser) -> None:
    browser.logged_in()
    browser.go("/console/m/michael/profile")
    profile = browser.find("main").text
    assert "Allergic to penicillin." in profile and VIETNAMESE in profile and THAI in profile
    screenshot(browser.driver, "profile")
    browser.go("/console/m/michael/memories?tag=" + "办公室")
    assert CHINESE in browser.find("#memories").text
    browser.go("/console/m/michael/memories?tag=" + "tiếng việt")
    assert len(browser.memory_links()) == 1
    browser.go("/console/m/michael/last-recall")
    assert browser.find("#recall-query").text.strip('“”"') == "deploy pipeline"
    assert "deploy_notes" in browser.find("#recalled").text
    screenshot(browser.driver, "last-recall")


@pytest.mark.browser
def test_health_runs_doctor_on_the_button(browser: Browser) -> None:
    browser.logged_in()
    browser.go("/console/m/michael/health")
    assert not browser.find_all("#doctor-summary")
    browser.find("button[name=action][value=doctor]").click()
    browser.wait(lambda: browser.find_all("#doctor-summary"), "doctor showed nothing")
    assert browser.find_all("#findings li")
    screenshot(browser.driver, "health")


@pytest.mark.browser
def test_import_shows_a_dry_run_then_applies_it_in_one_commit(browser: Browser, tmp_path: Path) -> None:
    setup = browser.setup
    with isolated_git(setup.home):
        other = Vault.init(tmp_path / "other", "michael")
        try:
            other.store("fact", "imported_city", "Imported: the team meets in Huế.")
            exported = tmp_path / "michael.jsonl"
            other.export(exported)
        finally:
            other.close()
    assert json.loads(exported.read_text(encoding="utf-8").splitlines()[0])
    commits = git(setup.root, "rev-list", "--count", "HEAD")
    browser.logged_in()
    browser.go("/console/m/michael/transfer")
    assert browser.find_all("#export-jsonl"), "no export link"
    screenshot(browser.driver, "transfer")
    browser.find("#import-file").send_keys(str(exported))
    browser.find("#import-form button[name=action][value=plan]").click()
    browser.wait(lambda: browser.find_all("#plan"), "the dry run showed no plan")
    assert browser.find("#plan-created").text == "1"
    assert git(setup.root, "rev-list", "--count", "HEAD") == commits, "the dry run wrote"
    screenshot(browser.driver, "transfer-plan")
    browser.find("#apply-import").click()
    browser.wait(
        lambda: int(git(setup.root, "rev-list", "--count", "HEAD")) == int(commits) + 1, "apply made no commit"
    )
    assert (setup.root / "michael" / "fact" / "imported_city.md").exists()


@pytest.mark.browser
def test_the_memories_controls_are_reached_with_the_keyboard(browser: Browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.logged_in()
    browser.go("/console/m/michael/memories")
    wanted = {"q", "f-category", "f-priority", "f-source", "f-tag", "f-status", "f-unverified", "f-expired"}
    reached = []
    for _ in range(40):
        ActionChains(browser.driver).send_keys(Keys.TAB).perform()
        reached.append(browser.driver.execute_script("return document.activeElement.id"))
        if wanted <= set(reached):
            break
    assert wanted <= set(reached), reached
    browser.mark()
    browser.find("#f-source").send_keys(Keys.DOWN)  # any -> user: the change applies it
    browser.wait(lambda: browser.query().get("source") == ["user"], "the keyboard did not apply the filter")
    # The address changes before htmx has swapped and settled the new list in: a key pressed meanwhile
    # lands on the control about to be replaced. Wait for the swap to end, the new control focused.
    settled = (
        "const e = document.activeElement; return e.id === 'f-source' && e.isConnected && e.value === 'user'"
        " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )
    browser.wait(lambda: browser.driver.execute_script(settled), "the swap lost the focus")
    ActionChains(browser.driver).send_keys(Keys.DOWN).perform()  # the focused control: user -> agent
    browser.wait(lambda: browser.query().get("source") == ["agent"], "the keyboard did not apply the filter")
    browser.wait(lambda: len(browser.memory_links()) == 3, "the list did not show the agent's three memories")
    assert browser.kept()


def said(browser: Browser) -> str:
    """The page's text, read at once (a page being replaced has none yet, and no stale element either)."""
    return str(browser.driver.execute_script("return document.body ? document.body.innerText : ''"))


@pytest.mark.browser
def test_tick_memories_on_the_list_then_verify_them_and_forget_them_in_one_commit(browser: Browser) -> None:
    setup, server = browser.setup, browser.server
    ids = []
    for n in range(3):  # an agent's guesses; all forgotten at the end, so the other flows see the vault as it was
        body = {
            "category": "context",
            "key": f"ticked_{n}",
            "content": f"Guess {n} about the office.",
            "tags": ["ticked"],
        }
        answer = server.request("POST", "/memory", setup.tokens["michael"], body)
        assert answer.status == 201, answer
        ids.append(answer.json()["id"])
    browser.logged_in()
    browser.go("/console/m/michael/memories?tag=ticked")
    assert len(browser.memory_links()) == 3
    for memory_id in ids[:2]:
        browser.find(f"#select-{memory_id}").click()
    screenshot(browser.driver, "memories-selected")
    browser.find("#verify-selected").click()
    browser.wait(lambda: "Verified 2 memories" in said(browser), "no message after Verify selected")
    assert browser.query().get("tag") == ["ticked"], "the list lost its filter"
    subjects = set(git(setup.root, "log", "-2", "--format=%s").splitlines())
    assert subjects == {"verify context/ticked_0 (user)", "verify context/ticked_1 (user)"}
    unverified = [row for row in browser.find_all("#memories tbody tr") if "unverified" in row.text]
    assert len(unverified) == 1 and "ticked_2" in unverified[0].text
    commits = int(git(setup.root, "rev-list", "--count", "HEAD"))
    for memory_id in ids:
        browser.find(f"#select-{memory_id}").click()
    browser.find("#forget-selected").click()
    browser.wait(lambda: "Forgot 3 memories in one commit" in said(browser), "no message after Forget selected")
    assert int(git(setup.root, "rev-list", "--count", "HEAD")) == commits + 1
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "forget 3 memories (user)"
    assert browser.memory_links() == [] and "No memory matches" in browser.find("#count").text
    assert not list((setup.root / "michael" / "context").glob("ticked_*.md"))


@pytest.mark.browser
def test_purge_from_a_memorys_page_after_the_page_that_names_what_goes(browser: Browser) -> None:
    setup, server = browser.setup, browser.server
    versions = ["Dana's bank PIN is 5522", "Dana's bank PIN changed to 7781"]
    for content in versions:
        body = {"category": "context", "key": "dana_pin", "content": content}
        answer = server.request("POST", "/memory?mind=michael", setup.tokens["person"], body)
        assert answer.status in (200, 201), answer
    memory_id = answer.json()["id"]
    browser.logged_in()
    browser.go(f"/console/m/michael/memory/{memory_id}")
    browser.find("#purge-link").click()
    browser.wait(lambda: "/purge/" in browser.path(), "the purge page did not open")
    assert "2 versions" in browser.find("#goes").text and "every other memory" in browser.find("#stays").text
    screenshot(browser.driver, "purge")
    browser.find("#purge-confirm").click()
    browser.find("#purge-button").click()
    browser.wait(lambda: "Purged context/dana_pin" in said(browser), "no message after the purge")
    assert browser.path() == "/console/m/michael/memories"
    history = git(setup.root, "log", "--all", "-p")
    assert "PIN is 5522" not in history and "PIN changed to 7781" not in history  # (digits alone: maybe a sha)
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "purge context/dana_pin (user)"


@pytest.mark.browser
def test_click_a_link_and_see_the_backlink_with_hostile_link_text_inert(browser: Browser) -> None:
    setup, server = browser.setup, browser.server
    stored = {}
    for category, key, content in (
        ("identity", "link_owner", "Frank owns the link project."),
        ("project", "link_project", f"- owned by [[link_owner|{SCRIPT} {IMG}]]\nAlso [[link_nowhere]]."),
    ):
        body = {"category": category, "key": key, "content": content}
        answer = server.request("POST", "/memory?mind=michael", setup.tokens["person"], body)
        assert answer.status in (200, 201), answer
        stored[key] = answer.json()["id"]
    browser.logged_in()
    browser.go(f"/console/m/michael/memory/{stored['link_project']}")
    links = browser.find("#links").text
    assert "owned_by" in links and SCRIPT in links and "[[link_nowhere]]" in links
    assert not browser.find_all("main img"), "an <img> from a link's text reached the page"
    screenshot(browser.driver, "memory-links")
    browser.find("#links a").click()
    browser.wait(lambda: stored["link_owner"] in browser.path(), "the link did not open the memory it names")
    assert "identity/link_owner" in browser.find("h1").text
    backlinks = browser.find("#backlinks")
    assert "project/link_project" in backlinks.text and "owned_by" in backlinks.text
    backlinks.find_element("css selector", "a").click()
    browser.wait(lambda: stored["link_project"] in browser.path(), "the backlink did not open the linking memory")


def stored_by_person(browser: Browser, category: str, key: str, content: str, **fields: Any) -> str:
    """A person's memory, stored through the server's API; its id."""
    body = {"category": category, "key": key, "content": content, **fields}
    answer = browser.server.request("POST", "/memory?mind=michael", browser.setup.tokens["person"], body)
    assert answer.status in (200, 201), answer
    return str(answer.json()["id"])


def forget_all(browser: Browser, *ids: str) -> None:
    """Forget what a flow made, so the other flows see the vault as it was."""
    for memory_id in ids:
        answer = browser.server.request("DELETE", f"/memory/{memory_id}?mind=michael", browser.setup.tokens["person"])
        assert answer.status in (200, 204), answer


def open_edit(browser: Browser, memory_id: str) -> None:
    browser.go(f"/console/m/michael/memory/{memory_id}")
    browser.find("#edit summary").click()
    browser.wait(lambda: browser.find("#edit-content").is_displayed(), "the edit form did not open")


@pytest.mark.browser
def test_edit_a_memorys_text_tags_and_priority_on_its_page(browser: Browser) -> None:
    from selenium.webdriver.support.ui import Select

    setup = browser.setup
    memory_id = stored_by_person(browser, "context", "boiler_service", "The boiler is serviced in May.", tags=["house"])
    browser.logged_in()
    open_edit(browser, memory_id)
    text = browser.find("#edit-content")
    text.clear()
    text.send_keys("The boiler is serviced in June.\nBy Hanh, the plumber.")
    browser.find("#edit-tags").clear()
    browser.find("#edit-tags").send_keys("house, heating")
    Select(browser.find("#edit-priority")).select_by_value("high")
    browser.driver.execute_script("document.getElementById('body-h').scrollIntoView()")
    screenshot(browser.driver, "memory-edit")
    browser.find("#edit-save").click()
    browser.wait(lambda: "Saved context/boiler_service" in said(browser), "no message after Save")
    assert browser.find("#body").text == "The boiler is serviced in June.\nBy Hanh, the plumber."
    fields = browser.find("#fields").text
    assert "heating" in fields and "high" in fields
    assert git(setup.root, "log", "-1", "--format=%s").strip() == "edit context/boiler_service (user)"
    forget_all(browser, memory_id)


@pytest.mark.browser
def test_a_save_over_a_file_changed_meanwhile_is_refused_with_both_versions(browser: Browser) -> None:
    setup = browser.setup
    memory_id = stored_by_person(browser, "context", "spare_key", "The spare key is with Ana.")
    browser.logged_in()
    open_edit(browser, memory_id)
    text = browser.find("#edit-content")
    text.clear()
    text.send_keys(f"The spare key is with Chloé. {SCRIPT}")
    path = setup.root / "michael" / "context" / "spare_key.md"
    theirs = path.read_text(encoding="utf-8").replace("with Ana.", "with Bảo since Monday.")
    path.write_text(theirs, encoding="utf-8")  # someone else's save, after the page was loaded
    head = git(setup.root, "rev-parse", "HEAD")
    browser.find("#edit-save").click()
    browser.wait(lambda: browser.find_all("#edit-conflict"), "the refused save did not show both versions")
    assert "nothing was saved" in browser.find("#edit-conflict").text
    assert browser.find("#edit-theirs").text == "The spare key is with Bảo since Monday."
    assert browser.find("#edit-yours").text == f"The spare key is with Chloé. {SCRIPT}"
    assert browser.find("#edit-content").get_attribute("value") == f"The spare key is with Chloé. {SCRIPT}"
    screenshot(browser.driver, "memory-edit-conflict")
    assert path.read_text(encoding="utf-8") == theirs and git(setup.root, "rev-parse", "HEAD") == head
    browser.find("#edit-save").click()  # saved again, knowingly: the form now carries the version on disk
    browser.wait(lambda: "Saved context/spare_key" in said(browser), "the second save did not go through")
    assert browser.find("#body").text == f"The spare key is with Chloé. {SCRIPT}"
    unexpected = [e for e in browser_errors(browser.driver) if not re.search(r"status of 409\b", e)]
    assert not unexpected, unexpected
    forget_all(browser, memory_id)


@pytest.mark.browser
def test_review_queue_accept_reject_and_several_at_once(browser: Browser) -> None:
    setup = browser.setup
    old_id = stored_by_person(browser, "preference", "bike_kind", "Rides a red road bike.")
    answer = json.dumps(
        {
            "memories": [
                {
                    "category": "preference",
                    "key": "bike_kind",
                    "content": "Rides a green gravel bike now.",
                    "turns": [2],
                },
                {
                    "category": "fact",
                    "key": "balcony_tree",
                    "content": "A fig tree grows on the balcony.",
                    "turns": [0],
                },
                {"category": "skill", "key": "language_finnish", "content": "Speaks basic Finnish.", "tags": [SCRIPT]},
                {"category": "note", "key": "camera_owned", "content": "Owns a Leica.", "turns": [2]},
            ]
        }
    )
    messages = [
        {"role": "user", "content": "About me."},
        {"role": "assistant", "content": "Yes?"},
        {"role": "user", "content": "..."},
    ]
    with isolated_git(setup.home), Vault.open(setup.root, "michael") as vault:
        report = vault.capture(messages, lambda system, user: answer, session=f"chat 7 {IMG}")
    assert [d.action for d in report.decisions] == ["update", "add", "add", "add"], report.decisions
    ids = {d.candidate.key: d.memory.id for d in report.decisions if d.memory is not None}
    browser.logged_in()
    browser.go("/console/m/michael/memories")
    assert browser.find("#review-count").text == "4"
    browser.find("#nav-review").click()
    browser.wait(lambda: browser.find_all("#review-selection"), "the Review page did not open")
    card = browser.find(f"#p-{ids['bike_kind']}").text
    assert "Rides a red road bike." in card and "Rides a green gravel bike now." in card and "chat 7" in card
    assert IMG in card and not browser.find_all("main img")
    assert browser.find(f"#said-{ids['balcony_tree']}").text == "[0] user: About me."  # the line it came from
    screenshot(browser.driver, "review")
    commits = int(git(setup.root, "rev-list", "--count", "HEAD"))
    browser.find(f"#accept-{ids['bike_kind']}").click()
    browser.wait(lambda: "Accepted 1 memory" in said(browser), "no message after Accept")
    assert "superseding preference/bike_kind" in git(setup.root, "log", "-1", "--format=%s")
    browser.find(f"#reject-{ids['balcony_tree']}").click()
    browser.wait(lambda: "Rejected 1 memory" in said(browser), "no message after Reject")
    assert browser.find("#review-count").text == "2"
    for key in ("language_finnish", "camera_owned"):
        browser.find(f"#select-{ids[key]}").click()
    browser.find("#accept-selected").click()
    browser.wait(lambda: "Accepted 2 memories" in said(browser), "no message after Accept selected")
    assert "Nothing waits for review." in browser.find("#count").text and not browser.find_all("#review-count")
    assert int(git(setup.root, "rev-list", "--count", "HEAD")) == commits + 4
    assert not (setup.root / "michael" / "fact" / "balcony_tree.md").exists()
    forget_all(browser, old_id, ids["bike_kind"], ids["language_finnish"], ids["camera_owned"])


@pytest.fixture(scope="module")
def dated(driver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Server, list[str]]]:
    """A server of its own over a mind with a past: fact/deploys stored on 2026-03-01 (vps1), changed on
    2026-04-01 (vps2); and the two commits."""
    setup = make_setup(tmp_path_factory.mktemp("console-as-of"))
    shas = []
    with isolated_git(setup.home), Vault.open(setup.root, "michael") as vault:
        for day, text in (("2026-03-01", "Deploys go to vps1"), ("2026-04-01", "Deploys go to vps2")):
            with committed_on(day):
                vault.store("fact", "deploys", text)
            shas.append(git(setup.root, "rev-parse", "HEAD").strip())
    server = start_server(setup)
    try:
        yield setup, server, shas
    finally:
        code, _, err = server.stop()
        assert code == 0 and "Traceback" not in err, err[-3000:]


@pytest.mark.browser
def test_recall_and_search_as_of_an_earlier_date_show_the_old_text(
    driver: Any, dated: tuple[Setup, Server, list[str]]
) -> None:
    from selenium.webdriver.common.keys import Keys

    setup, server, (march, _) = dated
    browser = Browser(driver, setup, server)
    browser_errors(driver)
    browser.logged_in()
    browser.go("/console/m/michael/recall")
    browser.find("#r-q").send_keys("deploys")
    browser.find("#r-at").send_keys("2026-03-15" + Keys.ENTER)
    browser.wait(lambda: browser.find_all("#recall-text"), "the recall as of a date did not come")
    assert "Deploys go to vps1" in browser.find("#recall-text").text and "vps2" not in browser.text()
    assert browser.find("#recall-as-of").text.startswith(f"As of 2026-03-01 12:00 UTC (commit {march[:8]})")
    screenshot(driver, "recall-as-of")

    browser.go("/console/m/michael/memories?q=deploys")
    assert "vps2" in browser.find("#memories").text  # now
    browser.mark()
    browser.find("#f-at").send_keys("2026-03-15" + Keys.ENTER)
    browser.wait(lambda: browser.find_all("#as-of"), "the search as of a date did not come")
    assert "Deploys go to vps1" in browser.find("#memories").text and "vps2" not in browser.find("#memories").text
    assert browser.find("#as-of").text.startswith(f"As of 2026-03-01 12:00 UTC (commit {march[:8]})")
    assert browser.kept() and browser.query()["at"] == ["2026-03-15"]  # swapped in place, the address follows

    browser.go("/console/m/michael/recall")
    browser.find("#r-at").send_keys(IMG + Keys.ENTER)
    browser.wait(lambda: browser.find_all("#error"), "a bad date did not say so on the page")
    assert "invalid at" in browser.find("#error").text and IMG in browser.find("#error").text
    assert not browser.find_all("main img") and not browser.find_all("#recall-text")
    unexpected = [e for e in browser_errors(driver) if not re.search(r"status of 400\b", e)]
    assert not unexpected, unexpected
    assert not pwned(driver), "a hostile payload ran"
