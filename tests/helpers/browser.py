"""What the console's browser tests share: whether to skip or fail without Chromium, a vault worth looking
at (three scripts, an agent's unverified memories, a memory with history, a hostile memory, more than a page
of notes), a headless Chromium driven by Selenium, and the checks run after every flow.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO
from helpers.serve import Setup, make_setup
from memfile import Vault

#: Where `MEMFILE_SCREENSHOTS=1` writes each page's picture (docs/console.md shows them).
SCREENSHOTS = REPO / "docs" / "console"
#: What a machine without the browser needs (Debian's names; .ci/run installs them).
APT_PACKAGES = "chromium chromium-driver"
EXECUTABLES = ("chromium", "chromedriver")
WIDE = (1280, 800)
NARROW = (360, 800)

#: The hostile payloads: each would set window.__pwned if the console rendered it as HTML or followed it.
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '"><img src=x onerror="window.__pwned=1">'
JS_LINK = "[click me](javascript:window.__pwned=1)"

VIETNAMESE = "Tên tôi là Michael; tôi sống ở Hà Nội và thích phở bò."
THAI = "ชอบอาหารไทยรสเผ็ด โดยเฉพาะต้มยำกุ้ง"
CHINESE = "办公室在上海浦东，周一到周五上午九点开门。"
FILLERS = 60  # more than one page of 50
HISTORY = ("v1.2 deployed", "v1.3 deployed", "v1.4 deployed", "v1.5.0 deployed to production")


def missing_executables() -> list[str]:
    """The browser's executables not on PATH."""
    return [name for name in EXECUTABLES if shutil.which(name) is None]


def without_browser(missing: list[str], ci: str | None) -> tuple[str, str] | None:
    """What a browser test does when `missing` executables are not installed: None (run it), else
    ("skip", why) on a person's machine, or ("fail", why) when `ci` (the CI variable) is set and not
    empty, so a CI run that lost its install step goes red instead of green."""
    if not missing:
        return None
    why = f"{' and '.join(missing)} not found: install them with `apt-get install {APT_PACKAGES}`"
    if ci:
        return "fail", f"{why} (CI is set, so the browser tests must run; .ci/run installs them)"
    return "skip", why


def require_browser() -> None:
    """Skip (or, with CI set, fail) the calling test when Chromium or its driver is missing."""
    decided = without_browser(missing_executables(), os.environ.get("CI"))
    if decided is None:
        return
    kind, why = decided
    if kind == "fail":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


@contextmanager
def isolated_git(home: Path) -> Iterator[None]:
    """No git identity and no memfile variables of the machine, as conftest gives each test (module-scoped
    fixtures run before it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("GIT_CONFIG_GLOBAL", str(home / "no-gitconfig"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for name in list(os.environ):
            if name.startswith(("MEMFILE_", "GIT_AUTHOR_", "GIT_COMMITTER_")):
                patch.delenv(name)
        yield


def console_setup(base: Path) -> Setup:
    """helpers.serve's vault (minds michael, the default, and anna; an agent key each, a person's
    token) with michael's memories: see the module docstring. `ids` gains each memory's id by name."""
    setup = make_setup(base)
    with isolated_git(setup.home):
        vault = Vault.open(setup.root, "michael")
        try:
            stored = {
                "vietnamese": vault.store("identity", "name_vi", VIETNAMESE, priority="high", tags=["tiếng việt"]),
                "thai": vault.store("preference", "food_th", THAI, priority="high", tags=["ภาษาไทย"]),
                "chinese": vault.store("fact", "office_zh", CHINESE, tags=["办公室", "上海"]),
                "critical": vault.store("identity", "allergy", "Allergic to penicillin.", priority="critical"),
                "agent": vault.store(
                    "project", "deploy_notes", "Deployments go through the blue-green pipeline.", source="agent"
                ),
                "to_verify": vault.store(
                    "fact", "standup_time", "The team's standup is at 09:30 Berlin time.", source="agent"
                ),
                "hostile": vault.store(
                    "note",
                    "hostile_payload",
                    f"Agent notes {SCRIPT} then {IMG} and {JS_LINK}.",
                    tags=[SCRIPT, IMG, "javascript:window.__pwned=1"],
                    source="agent",
                ),
            }
            for content in HISTORY:
                stored["history"] = vault.store("project", "synapse_status", content, tags=["synapse"])
            vault.store_many(
                {
                    "category": "note",
                    "key": f"filler_{n:03d}",
                    "content": f"Filler note {n} about the weekly planning meeting.",
                    "tags": ["filler"],
                    "priority": "low",
                }
                for n in range(FILLERS)
            )
            with vault.acting_as("agent"):
                vault.recall(800, query="deploy pipeline")  # what the Last recall page shows
        finally:
            vault.close()
        anna = Vault.open(setup.root, "anna")
        try:
            anna.store("fact", "city", "Anna lives in Đà Nẵng.")
        finally:
            anna.close()
    setup.ids |= {name: result.memory.id for name, result in stored.items()}
    return setup


def start_chromium(downloads: Path | None = None) -> Any:
    """A headless Chromium (Debian's, with its own chromedriver: no Selenium Manager, no network) at 1280x800,
    keeping the browser's console log for `browser_errors`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(shutil.which("chromium"))
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--lang=en-US",
        f"--window-size={WIDE[0]},{WIDE[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if downloads is not None:
        options.add_experimental_option(
            "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
        )
    driver = webdriver.Chrome(options=options, service=Service(str(shutil.which("chromedriver"))))
    driver.set_page_load_timeout(60)
    driver.set_window_size(*WIDE)
    return driver


def browser_errors(driver: Any) -> list[str]:
    """The SEVERE entries of the browser's console log since the last call (JavaScript errors, CSP violations,
    failed loads); reading the log empties it."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def pwned(driver: Any) -> bool:
    """Whether a hostile payload ran (it sets window.__pwned)."""
    return bool(driver.execute_script("return typeof window.__pwned !== 'undefined'"))


def screenshot(driver: Any, name: str, size: tuple[int, int] = WIDE) -> None:
    """With MEMFILE_SCREENSHOTS=1, save the page as docs/console/NAME.png at `size`; otherwise nothing:
    screenshots change on purpose, not on every run."""
    if os.environ.get("MEMFILE_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width, height = size  # the page's own size: a window's size would include the browser's frame
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    try:
        driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
