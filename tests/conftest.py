"""Shared fixtures: real vaults in tmp_path, a real `memfile serve`, the console's application, and no trace of
the machine's git identity; no resident reader left behind (a read command leaves none while
MEMFILE_NO_RESIDENT=1, set for the whole run, and the run fails if one it started is still alive at its end).
(Shared functions are in the `helpers` package.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import SAMPLE_VAULT
from helpers.serve import Server, Setup, make_setup, serving
from helpers.vaults import BLANKED

from memfile import Vault

if TYPE_CHECKING:  # the console's helpers import Starlette: only the modules that use them pay for it
    from helpers.console import Console


#: Every process the tests start carries this mark (helpers.serve.server_env keeps it too).
RUN_MARK = "MEMFILE_TEST_RUN"


def pytest_configure(config: pytest.Config) -> None:
    """For the whole run (xdist's workers inherit it): read commands leave no resident reader behind, and
    every process carries the run's mark (the first process's; a worker keeps the one it inherited)."""
    os.environ["MEMFILE_NO_RESIDENT"] = "1"
    os.environ.setdefault(RUN_MARK, uuid.uuid4().hex)


def residents_of_this_run() -> list[int]:
    """The pids of resident readers (`memfile serve --resident`) that carry this run's mark."""
    mark = f"{RUN_MARK}={os.environ[RUN_MARK]}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            if b"--resident" not in argv:
                continue
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if mark in environ.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue  # ended meanwhile, or another user's
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a resident reader one of its tests started is still alive (then end it). Checked
    once, by the process that ran the session (under xdist the controller, after every worker ended)."""
    if hasattr(session.config, "workerinput"):
        return
    deadline = time.monotonic() + 10  # one that is stopping has time to end
    while (left := residents_of_this_run()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not left:
        return
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"resident readers left behind by the tests (killed now): pids {left}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank global git config and memfile variables: CI has no git identity, so neither do tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in BLANKED:  # MEMFILE_KEYS: never the machine's own; MEMFILE_NO_SERVER: the fast path is tested
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A copy of sample_vault/ (no git repository yet), with a fixed mtime for the hand-made file."""
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE_VAULT, target)
    import os

    os.utime(target / "michael" / "note" / "reading-list.md", (1_780_000_000, 1_780_000_000))  # 2026-05-28
    return target


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    """A fresh vault with one mind, `michael`, created by `Vault.init`."""
    return Vault.init(tmp_path / "vault", "michael", "Michael's Mind")


@pytest.fixture
def root(vault: Vault) -> Path:
    """The `vault` fixture's folder (a module with a vault of its own defines its own `root`)."""
    return vault.root


@pytest.fixture
def two(tmp_path: Path) -> tuple[Vault, Vault]:
    """Laptop and server: two clones of one vault, synced through a bare remote."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    laptop = Vault.init(tmp_path / "laptop", "michael", "Michael's Mind")
    laptop.store("fact", "office", "The office is in Berlin", tags=["work"])
    laptop.add_remote(str(bare))
    laptop.sync()
    subprocess.run(["git", "clone", "-q", str(bare), str(tmp_path / "server")], check=True, capture_output=True)
    server = Vault.open(tmp_path / "server", "michael")
    return laptop, server


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """helpers.serve's vault (minds michael and anna, a key of each kind) for a module; a module that needs
    other memories in it defines its own `setup`, which `server` then serves."""
    return make_setup(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(setup: Setup) -> Iterator[Server]:
    """A real `memfile serve` of the module's `setup`, for its tests; it must stop cleanly after them (exit 0,
    no traceback: no request of any test, garbage included, made it trip)."""
    with serving(setup) as served:
        yield served


@pytest.fixture
def agent(setup: Setup) -> str:
    """The Mind Key of `setup`'s mind michael."""
    return setup.tokens["michael"]


@pytest.fixture
def person(setup: Setup) -> str:
    """`setup`'s person token (every mind)."""
    return setup.tokens["person"]


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The console's application (as `memfile serve` builds it) over helpers.serve's vault, for a module."""
    from helpers.console import Console

    from memfile.keys import KeyStore
    from memfile.server.app import build_app
    from memfile.worker import Minds

    setup = make_setup(tmp_path_factory.mktemp("console"))
    minds = Minds(setup.root, watch=False)
    app = build_app(minds, KeyStore(setup.keys_path), allowed_hosts=["localhost"], mcp=False)
    yield Console(setup, minds, app)
    minds.close()
