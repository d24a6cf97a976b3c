"""The command line's own warm process (issue 40 item 1): a read command that finds no server for its vault
answers in process, then leaves a resident reader behind (`memfile serve --resident`), which answers the
next ones byte for byte as the process would; it ends by itself. Real `memfile` processes throughout.

The rest of the suite runs with MEMFILE_NO_RESIDENT=1 (conftest); these tests drop it, and each stops the
resident reader of its vault at its end (conftest fails the run if one is left).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import DEADLINE, wait_until
from helpers.fastpath import Ran, assert_same, client_env, memfile_run
from helpers.serve import make_setup, start_server

from memfile import Vault
from memfile.cli_client import SOCKET_NAME
from memfile.cli_served import resident_pid, stop_resident


@pytest.fixture
def small(vault: Vault) -> Iterator[Path]:
    """A vault of its own with a few memories; its resident reader, if any, stopped at the end."""
    vault.store("fact", "office", "The office is in Berlin", tags=["work"])
    vault.store("project", "synapse", "Synapse deploys to vps1 with docker", tags=["docker"], priority="high")
    vault.store("note", "agent_note", "Docker images are rebuilt weekly", tags=["docker"], source="agent")
    vault.close()
    yield vault.root
    stop_resident(vault.root)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "answer.json"


def resident_env(**extra: str) -> dict[str, str]:
    """A command line's environment in which a read leaves a resident reader behind."""
    env = client_env(Path(os.environ["HOME"]))
    env.pop("MEMFILE_NO_RESIDENT", None)
    return env | extra


def ready(root: Path) -> int:
    """The pid of the vault's resident reader once it listens (AssertionError when none comes)."""
    pid = wait_until(lambda: (root / ".memfile" / SOCKET_NAME).exists() and resident_pid(root))
    assert pid, f"no resident reader listens for {root}"
    return pid


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def residents_for(root: Path) -> list[int]:
    """Processes that are resident readers of `root`, started or starting (by their command line)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        if b"--resident" in argv and os.fsencode(root) in argv:
            found.append(int(entry))
    return found


def answered(args: list[str], env: dict[str, str], record: Path) -> Ran:
    """`memfile ARGS` answered by a resident reader, identical to the in-process answer."""
    ran = memfile_run(args, env, record=record)
    assert isinstance(ran.answer, int), f"ran in process: {ran}"
    assert not any(m == "click" or m.startswith("whoosh") for m in ran.modules), ran.modules
    assert_same(ran, memfile_run(args, env, in_process=True))
    return ran


def test_a_first_read_leaves_a_resident_reader_and_the_next_are_answered_by_it(small: Path, record: Path) -> None:
    env = resident_env()
    first = memfile_run(["--vault", str(small), "search", "docker"], env, record=record)
    assert first.answer is None
    assert_same(first, memfile_run(["--vault", str(small), "search", "docker"], env, in_process=True))
    pid = ready(small)
    assert os.getsid(pid) == pid  # detached: a session of its own, no terminal
    for args in (["search", "docker"], ["recall", "--query", "docker images"], ["list", "--json"], ["show", "nosuch"]):
        answered(["--vault", str(small), *args], env, record)
    assert resident_pid(small) == pid and residents_for(small) == [pid]  # one, the same, for every read


def test_a_read_that_fails_leaves_one_too_and_its_answer_is_unchanged(small: Path, record: Path) -> None:
    args = ["--vault", str(small), "show", "nosuch"]
    first = memfile_run(args, resident_env(), record=record)
    assert first.answer is None and first.code == 3
    assert_same(first, memfile_run(args, resident_env(), in_process=True))
    ready(small)


STATUS_LINE = re.compile(
    r"^Server: resident reader, pid (\d+), since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ); ends after (\d+) s without "
    r"a read command \(it answers them; stop it: memfile serve --stop\)$",
    re.M,
)


def test_status_shows_the_resident_reader_both_ways(small: Path, record: Path) -> None:
    env = resident_env()
    memfile_run(["--vault", str(small), "tags"], env)
    pid = ready(small)
    ran = memfile_run(["--vault", str(small), "status"], env, record=record)
    assert isinstance(ran.answer, int)  # the idle time left moves on: not compared with an in-process run
    text = ran.out.decode()
    assert [(int(p), left) for p, _, left in STATUS_LINE.findall(text)] == [(pid, "600")], text
    data = json.loads(memfile_run(["--vault", str(small), "status", "--json"], env, in_process=True).out)
    server = data["server"]
    assert server.keys() == {"pid", "address", "resident", "since", "idle_left"}
    assert (server["pid"], server["address"], server["resident"]) == (pid, None, True)
    assert 590 <= server["idle_left"] <= 600 and re.fullmatch(r"\d{4}-.*Z", server["since"])


def test_it_ends_after_idle_exit_without_a_request(small: Path) -> None:
    config = small / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[serve]\nidle_exit = 1.5\n", encoding="utf-8")
    memfile_run(["--vault", str(small), "list"], resident_env())
    pid = ready(small)
    assert wait_until(lambda: not alive(pid), timeout=20)
    assert resident_pid(small) is None and not (small / ".memfile" / SOCKET_NAME).exists()


def test_it_ends_when_memfile_toml_changes(small: Path, record: Path) -> None:
    memfile_run(["--vault", str(small), "list"], resident_env())
    pid = ready(small)
    with (small / "memfile.toml").open("a", encoding="utf-8") as config:
        config.write("\n[recall]\nbudget = 50\n")
    ran = memfile_run(["--vault", str(small), "recall"], resident_env(MEMFILE_NO_RESIDENT="1"), record=record)
    assert ran.answer is None  # refused at once: the new budget is this answer's
    assert_same(ran, memfile_run(["--vault", str(small), "recall"], resident_env(), in_process=True))
    assert wait_until(lambda: not alive(pid), timeout=20)


def test_it_ends_when_the_vault_folder_moves(small: Path) -> None:
    memfile_run(["--vault", str(small), "list"], resident_env())
    pid = ready(small)
    moved = small.with_name("moved")
    small.rename(moved)
    try:
        assert wait_until(lambda: not alive(pid), timeout=20)
        assert not small.exists()  # nothing (its watcher, its warm work) made an index at the old path again
    finally:
        moved.rename(small)


def test_serve_stop_stops_it_or_says_none_runs(small: Path) -> None:
    env = resident_env()
    root = str(small)
    memfile_run(["--vault", root, "list"], env)
    pid = ready(small)
    stopped = memfile_run(["--vault", root, "serve", "--stop"], env)
    assert stopped.output == (0, f"stopped the resident reader of {small} (pid {pid})\n".encode(), b"")
    assert resident_pid(small) is None
    assert wait_until(lambda: not alive(pid))
    none = memfile_run(["--vault", root, "serve", "--stop"], env)
    assert none.output == (0, f"no resident reader runs for {small}\n".encode(), b"")
    assert json.loads(memfile_run(["--vault", root, "serve", "--stop", "--json"], env).out) == {
        "stopped": False,
        "pid": None,
    }
    memfile_run(["--vault", root, "list"], env)
    pid = ready(small)
    assert json.loads(memfile_run(["--vault", root, "--json", "serve", "--stop"], env).out) == {
        "stopped": True,
        "pid": pid,
    }


def test_one_per_vault(small: Path) -> None:
    memfile_run(["--vault", str(small), "list"], resident_env())
    pid = ready(small)
    second = memfile_run(["--vault", str(small), "serve", "--resident"], resident_env())
    assert second.code == 0 and b"another server or resident reader answers" in second.err
    assert resident_pid(small) == pid


@pytest.mark.parametrize(
    ("switch", "setting"),
    [({"MEMFILE_NO_SERVER": "1"}, ""), ({"MEMFILE_NO_RESIDENT": "1"}, ""), ({}, "\n[cli]\nresident = false\n")],
    ids=["MEMFILE_NO_SERVER", "MEMFILE_NO_RESIDENT", "cli-resident-false"],
)
def test_the_switches_turn_it_off(small: Path, record: Path, switch: dict[str, str], setting: str) -> None:
    config = small / "memfile.toml"
    config.write_text(config.read_text(encoding="utf-8") + setting, encoding="utf-8")
    for _ in range(2):
        assert (
            memfile_run(["--vault", str(small), "search", "docker"], resident_env(**switch), record=record).answer
            is None
        )
        assert residents_for(small) == [] and resident_pid(small) is None  # spawned before the read ends: none


def test_a_full_server_takes_its_place(tmp_path: Path, record: Path) -> None:
    setup = make_setup(tmp_path)
    env = resident_env()
    env["HOME"] = str(setup.home)
    memfile_run(["--vault", str(setup.root), "list"], env)
    pid = ready(setup.root)
    server = start_server(setup)
    try:
        assert wait_until(lambda: not alive(pid))
        status = json.loads(answered(["--vault", str(setup.root), "status", "--json"], env, record).out)
        assert status["server"] == {"pid": server.process.pid, "address": server.url}
    finally:
        code, _, err = server.stop()
    assert code == 0 and f"stopped the vault's resident reader (pid {pid})" in err, err


def test_memfile_watch_takes_its_place(small: Path) -> None:
    env = resident_env()
    memfile_run(["--vault", str(small), "list"], env)
    pid = ready(small)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "memfile", "--vault", str(small), "watch"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        lock = small / ".memfile" / "watch-michael.lock"
        assert wait_until(lambda: not alive(pid) and lock.read_text().strip() == str(watcher.pid))
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=DEADLINE)
    assert f"stopped the vault's resident reader (pid {pid})".encode() in err, err
