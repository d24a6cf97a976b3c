"""The command line through a running server (issue 24): real `memfile` processes, a real `memfile serve`.

Every read command is run three ways and must give the same exit code, stdout and stderr to the byte:
through the server with a spy on cli_client.answer (helpers.fastpath.DRIVER: it proves the server
answered, since answer returned an int, and that only the standard library was imported), as the
plain `python -m memfile` (nothing watched), and in process (MEMFILE_NO_SERVER=1: the reference).
Nothing is normalised unless a test says so and why.

One server and its vault serve most of the module; a test that fakes a server, kills one, renames its
vault or edits its memfile.toml has a vault (and a server) of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import socket
import stat
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import DEADLINE, git, read_terminal, write
from helpers.fastpath import (
    DRIVER,
    FakeServer,
    Ran,
    assert_same,
    client_env,
    fill,
    frame,
    frames,
    memfile_run,
    receive_all,
    request,
    talk,
)
from helpers.serve import Server, Setup, make_setup, start_server

from memfile import Vault
from memfile.cli_client import ANSWERING, EXIT, REFUSED, SOCKET_NAME, STDERR, STDOUT
from memfile.cli_served import MAX_REQUEST

#: Modules the client path must never import (the point of the fast path), by top-level name or prefix.
HEAVY = ("click", "whoosh", "git", "yaml", "ruamel", "frontmatter", "watchdog", "starlette", "uvicorn")
#: memfile's own modules that would bring them (the client is memfile.cli_client and memfile/__init__).
HEAVY_MEMFILE = ("memfile.cli", "memfile.vault", "memfile.index", "memfile.git", "memfile.config")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    made = make_setup(tmp_path_factory.mktemp("fastpath"))
    fill(made)
    return made


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "answer.json"


def served(args: list[str], env: dict[str, str], record: Path, cwd: Path | None = None) -> Ran:
    """`memfile ARGS` answered by the server (AssertionError when it ran in process instead)."""
    ran = memfile_run(args, env, cwd=cwd, record=record)
    assert isinstance(ran.answer, int), f"not answered by the server: {ran}"
    assert ran.answer == ran.code
    return ran


def fell_back(args: list[str], env: dict[str, str], record: Path, cwd: Path | None = None) -> Ran:
    """`memfile ARGS` that the server did not answer: run in process, and identical to MEMFILE_NO_SERVER=1."""
    ran = memfile_run(args, env, cwd=cwd, record=record)
    assert ran.answer is None, f"answered by a server: {ran}"
    assert_same(ran, memfile_run(args, env, cwd=cwd, in_process=True))
    return ran


def three_ways(args: list[str], env: dict[str, str], record: Path, cwd: Path | None = None) -> Ran:
    """Through the server (proven), as the plain command, and in process: identical; the first returned."""
    through = served(args, env, record, cwd)
    plain = memfile_run(args, env, cwd=cwd)
    alone = memfile_run(args, env, cwd=cwd, in_process=True)
    assert_same(through, alone)
    assert_same(plain, alone)
    return through


# --- 1. every served command, its options and its errors: the same bytes both ways ----------------------

CASES: list[tuple[list[str], int]] = [
    # search
    (["search", "docker"], 0),
    (["search", "docker", "--json"], 0),
    (["search", "deploy", "vps1", "--limit", "1"], 0),
    (["search", "docker", "--tag", "synapse"], 0),
    (["search", "docker", "--tag", "docker", "--tag", "synapse", "--json"], 0),
    (["search", "docker", "--category", "note"], 0),
    (["search", "berlin", "--priority", "high"], 0),
    (["search", "docker", "--source", "agent"], 0),
    (["search", "docker", "--unverified"], 0),
    (["search", "porto", "--include-expired"], 0),
    (["search", "hamburg", "--include-superseded", "--json"], 0),
    (["search", '"compose, version"'], 0),
    (["search", "tag:travel"], 0),
    (["search", "dock*", "AND", "NOT", "synapse"], 0),
    (["search", "café", "zoë"], 0),
    (["search", "nothingmatcheszzz"], 0),  # "no memory matches" on stderr
    (["search"], 2),  # missing QUERY
    (["search", "docker", "--limit", "many"], 2),
    (["search", "docker", "--priority", "urgent"], 2),
    (["search", "docker", "--source", "robot"], 2),
    (["search", "docker", "--bogus-option"], 2),
    (["search", "--help"], 0),
    (["search", "-h"], 0),
    # recall
    (["recall"], 0),
    (["recall", "--budget", "60"], 0),
    (["recall", "--budget", "30"], 2),  # below the header and the verified critical memories
    (["recall", "--budget", "0"], 0),
    (["recall", "--format", "json"], 0),
    (["recall", "--query", "docker deploy"], 0),
    (["recall", "-q", "docker deploy", "--limit", "1", "--format", "json"], 0),
    (["recall", "--include-superseded", "--format", "json"], 0),
    (["recall", "--query", "nothingmatcheszzz"], 0),
    (["recall", "--format", "xml"], 2),
    (["recall", "--budget", "lots"], 2),
    (["recall", "--budget", "-5"], 2),
    # show
    (["show", "fact/office"], 0),
    (["show", "office", "--json"], 0),
    (["show", "note/cafe"], 0),
    (["show", "identity/location"], 0),  # superseded: status and superseded_by shown
    (["show", "project/synapse_status", "--at", "HEAD~1"], 0),
    (["show", "project/synapse_status", "--at", "HEAD~1", "--json"], 0),
    (["show", "project/synapse_status", "--at", "2020-01-01"], 2),
    (["show", "project/synapse_status", "--at", "1d"], 2),  # older than the memory
    (["show", "project/synapse_status", "--at", "no-such-revision"], 2),
    (["show", "nosuch"], 3),
    (["show", "fact/broken"], 3),  # the unreadable file is no memory
    (["show"], 2),  # missing REF
    (["show", "--at"], 2),
    # list
    (["list"], 0),
    (["list", "--json"], 0),
    (["list", "--category", "project"], 0),
    (["list", "--tag", "docker"], 0),
    (["list", "--tag", "docker", "--tag", "synapse"], 0),
    (["list", "--tag", "docker,synapse"], 0),
    (["list", "--priority", "critical"], 0),
    (["list", "--source", "agent", "--json"], 0),
    (["list", "--unverified"], 0),
    (["list", "--include-expired"], 0),
    (["list", "--status", "superseded"], 0),
    (["list", "--status", "all", "--json"], 0),
    (["list", "--category", "skill"], 0),  # none: "no memories match" on stderr
    (["list", "--status", "bogus"], 2),
    (["list", "--category", "recipes"], 2),
    (["list", "--priority", "urgent"], 2),
    # by-tag
    (["by-tag", "docker"], 0),
    (["by-tag", "DOCKER", "--json"], 0),
    (["by-tag", "travel", "--include-expired"], 0),
    (["by-tag", "nosuchtag"], 0),
    (["by-tag"], 2),
    # tags, stats
    (["tags"], 0),
    (["tags", "--json"], 0),
    (["stats"], 0),
    (["stats", "--json"], 0),
    # expiring
    (["expiring"], 0),
    (["expiring", "--within", "2w", "--json"], 0),
    (["expiring", "--within", "1h"], 0),
    (["expiring", "--within", "soon"], 2),
    # status, last-recall
    (["status"], 0),
    (["status", "--json"], 0),
    (["last-recall"], 0),
    (["last-recall", "--json"], 0),
    # history
    (["history", "project/synapse_status"], 0),
    (["history", "project/synapse_status", "--json"], 0),
    (["history", "identity/location"], 0),
    (["history", "nosuch"], 3),
    (["history"], 2),
    # log
    (["log"], 0),
    (["log", "--json"], 0),
    (["log", "--limit", "2"], 0),
    (["log", "--since", "7d", "--json"], 0),
    (["log", "--since", "2999-01-01"], 0),
    (["log", "--limit", "0"], 2),
    (["log", "--since", "whenever"], 2),
    # global options before the command
    (["--mind", "anna", "list"], 0),
    (["--mind=anna", "search", "tomatoes"], 0),
    (["--mind", "nosuch", "list"], 3),
    (["--mind", "../up", "list"], 2),
    (["--debug", "show", "nosuch"], 3),  # the traceback too
    (["--debug", "--mind", "anna", "recall", "--format", "json"], 0),
    # global options after the command
    (["list", "--mind", "anna"], 0),
    (["search", "tomatoes", "--mind=anna", "--json"], 0),
    (["tags", "--mind", "nosuch"], 3),
    (["show", "nosuch", "--debug"], 3),  # the traceback too
    (["recall", "--format", "json", "--mind", "anna", "--debug"], 0),
    (["--json", "list"], 0),
    (["--json", "recall"], 2),
]


#: A bug of the server half: a whole recall (no --query) that the server keeps (index.View.derived returns
#: the kept report without `take_issues`) does not warn about the unreadable file; a process of its own does.
#: The CASES run by default (every command, its JSON, a filter, its errors); the others are marked slow
#: (each case is three processes: together they take longer than the rest of the module).
QUICK = {
    "search docker",
    "search docker --json",
    "search docker --tag synapse",
    "search porto --include-expired",
    "search nothingmatcheszzz",
    "search",
    "search docker --limit many",
    "search --help",
    "recall",
    "recall --format json",
    "recall --query docker deploy",
    "recall -q docker deploy --limit 1 --format json",
    "recall --format xml",
    "show fact/office",
    "show office --json",
    "show note/cafe",
    "show project/synapse_status --at HEAD~1",
    "show nosuch",
    "show",
    "list",
    "list --json",
    "list --tag docker --tag synapse",
    "list --status superseded",
    "list --status bogus",
    "by-tag docker",
    "by-tag DOCKER --json",
    "by-tag",
    "tags --json",
    "stats",
    "expiring",
    "expiring --within soon",
    "status",
    "status --json",
    "last-recall",
    "last-recall --json",
    "history project/synapse_status",
    "history nosuch",
    "log",
    "log --json",
    "log --limit 0",
    "--mind anna list",
    "--mind nosuch list",
    "--debug show nosuch",
    "list --mind anna",
    "show nosuch --debug",
    "--json list",
    "--json recall",
}


def _case(args: list[str], code: int) -> object:
    name = " ".join(args)
    marks = [] if name in QUICK else [pytest.mark.slow]
    return pytest.param(args, code, id=name, marks=marks)


@pytest.mark.parametrize(("args", "code"), [_case(args, code) for args, code in CASES])
def test_each_read_command_is_answered_by_the_server_byte_for_byte(
    server: Server, setup: Setup, record: Path, args: list[str], code: int
) -> None:
    through = three_ways(["--vault", str(setup.root), *args], client_env(setup.home), record)
    assert through.code == code, through
    assert b"Traceback" not in through.err or "--debug" in args


def test_every_served_whole_recall_warns_about_an_unreadable_file(server: Server, setup: Setup, record: Path) -> None:
    args = ["--vault", str(setup.root), "recall", "--budget", "60"]
    env = client_env(setup.home)
    alone = memfile_run(args, env, in_process=True)
    assert alone.err.startswith(b"memfile: warning: michael/fact/broken.md:4: ")
    for _ in range(2):  # the first makes the report the server keeps, the second gets the kept one
        assert_same(served(args, env, record), alone)


@pytest.mark.parametrize(
    ("env", "args", "code"),
    [
        ({"MEMFILE_SOURCE": "bogus"}, ["list"], 2),
        ({"MEMFILE_SOURCE": "agent"}, ["list", "--json"], 0),
        ({"MEMFILE_SOURCE": "AGENT"}, ["status"], 0),
        ({"MEMFILE_MIND": "anna"}, ["list"], 0),
        ({"MEMFILE_MIND": "nosuch"}, ["tags"], 3),
        ({"NO_COLOR": "1"}, ["search", "docker"], 0),
        ({"COLUMNS": "50"}, ["list", "--help"], 0),
        ({"COLUMNS": "not-a-number"}, ["recall", "--help"], 0),
        ({"LINES": "5"}, ["stats"], 0),
    ],
    ids=["bad-source", "agent", "AGENT", "mind-env", "no-such-mind-env", "no-color", "columns", "bad-columns", "lines"],
)
def test_the_variables_that_change_an_answer_travel(
    server: Server, setup: Setup, record: Path, env: dict[str, str], args: list[str], code: int
) -> None:
    through = three_ways(["--vault", str(setup.root), *args], client_env(setup.home, **env), record)
    assert through.code == code, through


def test_the_vault_is_found_by_every_rule_of_the_command_line(server: Server, setup: Setup, record: Path) -> None:
    env = client_env(setup.home)
    three_ways([f"--vault={setup.root}", "tags"], env, record)
    three_ways(["--vault", setup.root.name, "tags"], env, record, cwd=setup.root.parent)  # relative
    three_ways(["--vault", str(setup.root) + "/", "tags"], env, record)
    three_ways(["tags"], env | {"MEMFILE_VAULT": str(setup.root)}, record, cwd=setup.home)
    three_ways(["search", "docker"], env, record, cwd=setup.root / "michael" / "project")  # the nearest memfile.toml
    three_ways(["tags", "--vault", str(setup.root)], env, record, cwd=setup.home)  # after the command
    three_ways(["search", "docker", "--json", f"--vault={setup.root}"], env, record, cwd=setup.home)
    three_ways(["--vault", str(setup.home), "list", "--vault", str(setup.root)], env, record)  # the last one counts
    link = setup.home / "vault-link"
    link.symlink_to(setup.root)
    try:
        three_ways(["--vault", str(link), "--mind", "nosuch", "list"], env, record)  # the path in the message
        three_ways(["show", "office"], env, record, cwd=link / "michael")
    finally:
        link.unlink()


def into_a_closed_pipe(args: list[str], env: dict[str, str], record: Path) -> tuple[Ran, Ran]:
    """`memfile ARGS` through the server and in process, each with stdout a pipe nobody reads (`| head`
    gone): their exit codes and stderr (stdout is lost by definition)."""
    ran = []
    for command, extra in (
        ([sys.executable, "-c", DRIVER, *args], {"FASTPATH_RECORD": str(record)}),
        ([sys.executable, "-m", "memfile", *args], {"MEMFILE_NO_SERVER": "1"}),
    ):
        reader, writer = os.pipe()
        os.close(reader)  # the first write breaks the pipe
        try:
            done = subprocess.run(command, stdout=writer, stderr=subprocess.PIPE, env=env | extra, timeout=DEADLINE)
        finally:
            os.close(writer)
        ran.append(Ran(done.returncode, b"", done.stderr))
    assert isinstance(json.loads(record.read_text())["answer"], int)
    return ran[0], ran[1]


def test_a_reader_gone_away_ends_both_ways_quietly_with_the_same_code(
    server: Server, setup: Setup, record: Path
) -> None:
    for args in (["list", "--json"], ["recall", "--format", "json"], ["log"]):
        through, alone = into_a_closed_pipe(
            ["--vault", str(setup.root), "--mind", "anna", *args], client_env(setup.home), record
        )
        assert_same(through, alone)
        assert through.code == 0 and through.err == b""


def test_a_reader_gone_away_still_gets_the_warnings_on_stderr(server: Server, setup: Setup, record: Path) -> None:
    through, alone = into_a_closed_pipe(["--vault", str(setup.root), "list", "--json"], client_env(setup.home), record)
    assert alone.err.startswith(b"memfile: warning: michael/fact/broken.md:4: ")
    assert_same(through, alone)


# --- 2. terminal effects: bold on a terminal, the terminal's width ----------------------------------------


def on_terminal(args: list[str], env: dict[str, str], record: Path | None, columns: int = 100) -> Ran:
    """`memfile ARGS` with stdout on a pseudo-terminal `columns` wide (stderr a pipe); what the terminal got."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    extra = {"FASTPATH_RECORD": str(record)} if record is not None else {"MEMFILE_NO_SERVER": "1"}
    command = [sys.executable, "-c", DRIVER, *args] if record is not None else [sys.executable, "-m", "memfile", *args]
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env | extra
        )
    finally:
        os.close(slave)
    out = read_terminal(master)
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    ran = Ran(process.wait(DEADLINE), out, err)
    if record is not None:
        ran.answer = json.loads(record.read_text())["answer"]
    return ran


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}], ids=["colour", "no-colour"])
def test_search_on_a_terminal_is_bold_both_ways(server: Server, setup: Setup, record: Path, env: dict) -> None:
    args = ["--vault", str(setup.root), "search", "docker"]
    through = on_terminal(args, client_env(setup.home, **env), record)
    alone = on_terminal(args, client_env(setup.home, **env), None)
    assert isinstance(through.answer, int)
    assert_same(through, alone)
    bold = b"\x1b[1mdocker\x1b[0m" in through.out  # the terminal was seen as one, and NO_COLOR too
    assert bold == ("NO_COLOR" not in env), through.out
    piped = memfile_run(args, client_env(setup.home, **env), record=record)
    assert b"\x1b[" not in piped.out and b"**docker**" in piped.out


#: What an agent might store to drive a person's terminal: OSC 52 (write the clipboard), the title's OSC,
#: clear the screen, conceal text, a carriage return that writes over the line, C1's one-byte CSI.
HOSTILE = (
    "The clipboard note \x1b]52;c;cHduZWQ=\x07 and \x1b]0;title\x1b\\ \x1b[2J\x1b[8mhidden\x1b[0m\rover\x9b31m end"
)


@pytest.mark.parametrize(
    "args", [["show", "note/terminal_hostile"], ["search", "clipboard"], ["recall", "--query", "clipboard"]]
)
def test_a_terminal_is_shown_control_characters_as_escapes_both_ways(
    server: Server, setup: Setup, record: Path, args: list[str]
) -> None:
    """A memory's control characters reach a terminal as visible escapes (through the server and in
    process alike), search's own bold still works, and a pipe gets the memory as stored."""
    store = ["--vault", str(setup.root), "store", "note", "terminal_hostile", HOSTILE]
    assert memfile_run(store, client_env(setup.home)).code == 0
    args = ["--vault", str(setup.root), *args]
    through = on_terminal(args, client_env(setup.home), record)
    alone = on_terminal(args, client_env(setup.home, MEMFILE_NO_SERVER="1"), None)
    assert isinstance(through.answer, int)
    assert_same(through, alone)
    out = through.out.decode()
    for control in ("\x1b]", "\x07", "\x1b[2J", "\x1b[8m", "\x9b"):
        assert control not in out, (control, out)
    assert "\r" not in out.replace("\r\n", "")  # the terminal's own line ends (onlcr) only
    assert r"note \x1b]52;c;cHduZWQ=\x07 and \x1b]0;title\x1b" in out  # search shows a snippet
    if args[2] == "show":
        assert r"\x1b]0;title\x1b\ \x1b[2J\x1b[8mhidden" + "\x1b[0m" + r"\x0dover\x9b31m end" in out
    if args[2] == "search":
        assert "\x1b[1mclipboard\x1b[0m" in out  # memfile's own bold is not escaped
    piped = memfile_run(args, client_env(setup.home), record=record)
    assert "note \x1b]52;c;cHduZWQ=\x07 and" in piped.out.decode()  # a pipe gets the text as stored
    if args[2] == "show":
        assert HOSTILE in piped.out.decode()  # every escape sequence kept (click strips them from a pipe)


@pytest.mark.parametrize("columns", [40, 60, 100, 200])
def test_help_wraps_to_the_terminal_both_ways(server: Server, setup: Setup, record: Path, columns: int) -> None:
    args = ["--vault", str(setup.root), "recall", "--help"]
    through = on_terminal(args, client_env(setup.home), record, columns)
    alone = on_terminal(args, client_env(setup.home), None, columns)
    assert isinstance(through.answer, int)
    assert_same(through, alone)
    widest = max(len(line) for line in through.out.decode().splitlines())
    assert widest <= max(min(columns, 80) - 2, 50), (widest, through.out.decode())


def test_columns_wraps_help_both_ways_and_makes_a_difference(server: Server, setup: Setup, record: Path) -> None:
    args = ["--vault", str(setup.root), "search", "--help"]
    narrow = three_ways(args, client_env(setup.home, COLUMNS="52"), record)
    wide = three_ways(args, client_env(setup.home, COLUMNS="120"), record)
    assert narrow.out != wide.out


# --- 3. fallbacks: the right answer in process, nothing else printed --------------------------------------


@pytest.fixture
def small(vault: Vault) -> Path:
    """A vault of its own (no server) with a few memories."""
    vault.store("fact", "office", "The office is in Berlin", tags=["work"])
    vault.store("project", "synapse", "Synapse deploys to vps1 with docker", tags=["docker"], priority="high")
    vault.store("note", "agent_note", "Docker images are rebuilt weekly", tags=["docker"], source="agent")
    vault.close()
    return vault.root


def home_env() -> dict[str, str]:
    return client_env(Path(os.environ["HOME"]))


SEARCH = ["search", "docker"]


def test_without_a_server_every_command_runs_in_process(small: Path, record: Path) -> None:
    for args, code in ((SEARCH, 0), (["recall"], 0), (["show", "nosuch"], 3), (["list", "--priority", "urgent"], 2)):
        assert fell_back(["--vault", str(small), *args], home_env(), record).code == code
    assert "Server: not running" in fell_back(["--vault", str(small), "status"], home_env(), record).out.decode()


def test_a_listener_that_never_answers_is_given_up_on(small: Path, record: Path) -> None:
    with FakeServer(small, lambda conn, line: fake.stopping.wait(DEADLINE)) as fake:
        ran = fell_back(["--vault", str(small), *SEARCH], home_env(), record)
        assert len(fake.requests) == 1 and json.loads(fake.requests[0])["argv"][-2:] == SEARCH
    assert ran.code == 0 and b"synapse" in ran.out


def test_a_listener_that_never_accepts_is_given_up_on(small: Path, record: Path) -> None:
    with FakeServer(small, None):
        ran = fell_back(["--vault", str(small), *SEARCH], home_env(), record)
    assert ran.code == 0 and b"synapse" in ran.out


HALF = b"HALF AN ANSWER"


def _answers_then(rest: bytes) -> Callable:
    def reply(conn: socket.socket, line: bytes) -> None:
        conn.sendall(frame(ANSWERING, b"") + rest)

    return reply


@pytest.mark.parametrize(
    "reply",
    [
        _answers_then(frame(STDOUT, HALF)),  # gone after part of stdout
        _answers_then(frame(STDOUT, HALF) + frame(STDERR, HALF)),  # all output, no exit code
        _answers_then(frame(STDOUT, HALF)[:-4]),  # a frame cut short
        _answers_then(frame(STDOUT, HALF)[:3]),  # a frame's header cut short
        _answers_then(b""),  # answering, then nothing
        lambda conn, line: conn.sendall(frame(REFUSED, b"this server is of another memfile")),
        lambda conn, line: conn.sendall(frame(STDOUT, HALF) + frame(EXIT, b"0")),  # output before its word
        lambda conn, line: conn.sendall(frame(b"?", b"") + frame(EXIT, b"0")),  # a word it does not know
        lambda conn, line: None,  # closes without a word
    ],
    ids=[
        "partial-stdout",
        "no-exit-frame",
        "short-frame",
        "short-header",
        "answering-only",
        "refused",
        "no-answering-frame",
        "unknown-first-frame",
        "closes",
    ],
)
def test_a_server_that_fails_mid_answer_leaves_no_half_output(small: Path, record: Path, reply: Callable) -> None:
    with FakeServer(small, reply) as fake:
        ran = fell_back(["--vault", str(small), *SEARCH], home_env(), record)
        assert len(fake.requests) == 1
    assert HALF not in ran.out and HALF not in ran.err
    assert ran.code == 0 and b"synapse" in ran.out


@pytest.mark.parametrize("code", [b"zero", b""], ids=["word", "empty"])
def test_an_exit_frame_that_is_no_number_is_no_answer(small: Path, record: Path, code: bytes) -> None:
    with FakeServer(small, _answers_then(frame(STDOUT, HALF) + frame(EXIT, code))):
        ran = memfile_run(["--vault", str(small), *SEARCH], home_env(), record=record)
    assert b"Traceback" not in ran.err, ran.err.decode()
    assert_same(ran, memfile_run(["--vault", str(small), *SEARCH], home_env(), in_process=True))


def test_a_socket_of_another_user_is_never_asked(small: Path, record: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the socket to another user")
    with FakeServer(small, _answers_then(frame(STDOUT, HALF) + frame(EXIT, b"0"))) as fake:
        os.chown(fake.path, 65534, 65534)
        ran = fell_back(["--vault", str(small), *SEARCH], home_env(), record)
        assert fake.requests == []
    assert HALF not in ran.out


def test_a_stale_socket_of_a_killed_server_is_ignored(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    fill(own)
    server = start_server(own)
    env = client_env(own.home)
    args = ["--vault", str(own.root), "search", "docker"]
    try:
        before = served(args, env, record)
    finally:
        server.stop(signal.SIGKILL)
    sock = own.root / ".memfile" / SOCKET_NAME
    assert stat.S_ISSOCK(sock.lstat().st_mode)  # left behind
    after = fell_back(args, env, record)
    assert_same(after, before)
    status = fell_back(["--vault", str(own.root), "status"], env, record)
    assert "Server: not running" in status.out.decode()


@pytest.mark.slow
def test_a_new_server_replaces_the_stale_socket_and_answers(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    fill(own)
    start_server(own).stop(signal.SIGKILL)
    assert (own.root / ".memfile" / SOCKET_NAME).exists()
    again = start_server(own)
    try:
        three_ways(["--vault", str(own.root), "search", "docker"], client_env(own.home), record)
    finally:
        assert again.stop()[0] == 0


def test_a_vault_renamed_under_its_server_is_not_answered_by_it(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    fill(own)
    server = start_server(own)
    env = client_env(own.home)
    moved = own.root.with_name("moved")
    try:
        served(["--vault", str(own.root), "tags"], env, record)
        own.root.rename(moved)
        assert (moved / ".memfile" / SOCKET_NAME).exists()  # went along, and its server still listens
        for args in (["search", "docker"], ["status"], ["show", "fact/office", "--json"], ["recall"]):
            fell_back(["--vault", str(moved), *args], env, record)
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err
    for left in (own.root / ".memfile" / "serve.lock", cli_socket(own)):
        assert not left.exists(), left  # the server never made its lock or socket again where the vault was
    fell_back(["--vault", str(moved), "tags"], env, record)  # its socket, left where it went: stale


def test_settings_changed_since_the_server_started_are_not_answered_by_it(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    fill(own)
    server = start_server(own)
    env = client_env(own.home)
    args = ["--vault", str(own.root), "--mind", "anna", "recall", "--format", "json"]
    try:
        assert json.loads(served(args, env, record).out)["budget"] is None
        config = own.root / "memfile.toml"
        config.write_text(config.read_text().replace("[recall]\n", "[recall]\nbudget = 40\n"), "utf-8")
        assert json.loads(fell_back(args, env, record).out)["budget"] == 40  # the new settings, read in process
        args = ["--vault", str(own.root), "status"]
        fell_back(args, env, record)
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err


def test_memfile_no_server_runs_in_process(server: Server, setup: Setup, record: Path) -> None:
    args = ["--vault", str(setup.root), "search", "docker"]
    for value in ("1", "yes", "true"):
        fell_back(args, client_env(setup.home, MEMFILE_NO_SERVER=value), record)
    for value in ("", "0"):
        served(args, client_env(setup.home, MEMFILE_NO_SERVER=value), record)


def test_another_time_zone_or_an_output_not_utf8_runs_in_process(server: Server, setup: Setup, record: Path) -> None:
    root = str(setup.root)
    tokyo = client_env(setup.home, TZ="Asia/Tokyo")
    fell_back(["--vault", root, "show", "project/synapse_status", "--at", "1d"], tokyo, record)
    fell_back(["--vault", root, "log", "--json"], tokyo, record)
    latin = client_env(setup.home, PYTHONIOENCODING="latin-1")
    shown = fell_back(["--vault", root, "show", "note/cafe"], latin, record)
    assert "Zoë".encode("latin-1") in shown.out and b"\\u65e5" in shown.out  # escaped where latin-1 cannot
    three_ways(["--vault", root, "show", "note/cafe"], client_env(setup.home, PYTHONIOENCODING="utf-8"), record)


def test_commands_that_are_not_served_run_in_process(server: Server, setup: Setup, record: Path) -> None:
    root = str(setup.root)
    env = client_env(setup.home)
    for args in (["--help"], ["--version"], ["--vault", root, "--help"], []):
        fell_back(args, env, record)
    fell_back(["--vault", root, "--mind", "anna", "stor"], env, record)  # a typo: click suggests, in process
    # --vault after an option that may take it as its value: only click knows which vault is meant
    fell_back(["search", "--limit", "--vault", root], env, record, cwd=setup.root)
    fell_back(["search", "--tag", "--vault", root, "docker"], env, record, cwd=setup.home)


# --- 4. the agent's identity travels ------------------------------------------------------------------------


def test_an_agents_recall_through_the_server_is_recorded_as_the_agents(
    server: Server, setup: Setup, record: Path
) -> None:
    root = str(setup.root)
    agent = client_env(setup.home, MEMFILE_SOURCE="agent")
    user = client_env(setup.home)
    recall = ["--vault", root, "--mind", "anna", "recall", "--query", "tomatoes", "--budget", "50"]
    last = ["--vault", root, "--mind", "anna", "last-recall", "--json"]

    served(recall, agent, record)
    through = three_ways(last, user, record)
    by_server = json.loads(through.out)
    assert by_server["source"] == "agent" and by_server["query"] == "tomatoes"

    memfile_run(recall, agent, in_process=True)
    in_process = json.loads(three_ways(last, user, record).out)
    # The one difference between the two records: when each recall was served (a second apart or so).
    assert by_server.pop("served_at") != "" and in_process.pop("served_at") != ""
    assert by_server == in_process

    served(recall, user, record)
    assert json.loads(three_ways(last, agent, record).out)["source"] == "user"


# --- 5. writes stay in process, and the server sees them at once --------------------------------------------


def test_a_store_by_the_cli_is_found_through_the_server_at_once(server: Server, setup: Setup, record: Path) -> None:
    root = str(setup.root)
    env = client_env(setup.home)
    anna = ["--vault", root, "--mind", "anna"]
    stored = memfile_run([*anna, "store", "fact", "heron", "The heron nests by the canal"], env, record=record)
    assert stored.code == 0 and stored.answer is None, stored  # a write: in process
    found = three_ways([*anna, "search", "heron"], env, record)
    assert b"fact/heron" in found.out
    assert b"fact/heron" in three_ways([*anna, "list"], env, record).out

    forgot = memfile_run([*anna, "forget", "fact/heron"], env, record=record)
    assert forgot.code == 0 and forgot.answer is None, forgot
    assert three_ways([*anna, "search", "heron"], env, record).err == b"no memory matches\n"
    assert three_ways([*anna, "show", "fact/heron"], env, record).code == 3


def test_hand_edits_are_seen_through_the_server_at_once(server: Server, setup: Setup, record: Path) -> None:
    root = str(setup.root)
    env = client_env(setup.home)
    anna = ["--vault", root, "--mind", "anna"]
    by_hand = write(setup.root / "anna" / "note" / "osprey.md", "A note written by hand about the osprey\n")
    try:
        assert b"note/osprey" in three_ways([*anna, "search", "osprey"], env, record).out
        by_hand.write_text("Now about the kestrel instead\n")
        assert b"note/osprey" in three_ways([*anna, "search", "kestrel"], env, record).out
        three_ways([*anna, "status"], env, record)
    finally:
        by_hand.unlink()
    assert three_ways([*anna, "search", "kestrel"], env, record).err == b"no memory matches\n"


def test_a_large_answer_arrives_whole(server: Server, setup: Setup, record: Path) -> None:
    """Frames far larger than a socket's buffers (and several of them, both streams) arrive whole and in order."""
    anna = ["--vault", str(setup.root), "--mind", "anna"]
    big = write(
        setup.root / "anna" / "note" / "big.md", "".join(f"line {i} of the albatross log ✓\n" for i in range(15_000))
    )
    try:
        shown = three_ways([*anna, "show", "note/big"], client_env(setup.home), record)
        assert len(shown.out) > 400_000 and shown.out.endswith("line 14999 of the albatross log ✓\n".encode())
        three_ways([*anna, "list", "--json"], client_env(setup.home), record)
    finally:
        big.unlink()


# --- 6. the client imports only the standard library -------------------------------------------------------


def test_the_client_path_imports_no_heavy_module(server: Server, setup: Setup, record: Path) -> None:
    for args in (["search", "docker"], ["recall", "--format", "json"], ["show", "nosuch"]):
        ran = served(["--vault", str(setup.root), *args], client_env(setup.home), record)
        heavy = [
            m
            for m in ran.modules
            if m.split(".")[0] in HEAVY or any(m == h or m.startswith(h + ".") for h in HEAVY_MEMFILE)
        ]
        assert heavy == [], heavy
        assert "memfile.cli_client" in ran.modules  # the list is the client's, taken after its answer


# --- 7. the socket speaks only read commands, only to its owner ----------------------------------------------


def vault_state(root: Path) -> tuple[str, str, list[str]]:
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".git" not in p.parts)
    return git(root, "rev-parse", "HEAD"), git(root, "status", "--porcelain"), files


def cli_socket(setup: Setup) -> Path:
    return setup.root / ".memfile" / SOCKET_NAME


@pytest.mark.parametrize(
    "argv",
    [
        ["store", "fact", "office", "Moved to Paris"],
        ["forget", "fact/office"],
        ["verify", "note/agent_guess"],
        ["reactivate", "identity/location"],
        ["restore", "identity/location", "--at", "HEAD~3"],
        ["undo"],
        ["edit", "fact/office"],
        ["reindex"],
        ["sync"],
        ["doctor", "--fix"],
        ["watch"],
        ["init", "/tmp/elsewhere"],
        ["serve"],
        ["mcp"],
        ["--mind", "search", "forget", "fact/office"],  # "search" is --mind's value here
        ["--vault", "--mind", "forget", "fact/office"],
        ["--", "forget", "fact/office"],
        ["--debug", "forget", "fact/office"],
        ["--vault=x", "forget", "fact/office"],
        ["--version"],
        ["--help"],
        [],
    ],
)
def test_the_socket_refuses_every_command_but_the_reads(server: Server, setup: Setup, argv: list[str]) -> None:
    before = vault_state(setup.root)
    for env in ({}, {"MEMFILE_SOURCE": "agent"}):
        asked = request(setup.root, argv, env=env)
        answer = frames(talk(cli_socket(setup), json.dumps(asked).encode() + b"\n"))
        assert [kind for kind, _ in answer] == [REFUSED], answer
    assert vault_state(setup.root) == before


@pytest.mark.parametrize(
    "changed",
    [
        {"version": "0.0.0-other"},
        {"protocol": 99},
        {"vault": "/tmp/another-vault"},
        {"env": {"TZ": "Pacific/Auckland"}},
        {"streams": [{"tty": False, "encoding": "latin-1", "errors": "strict"}] * 2},
        {"streams": [{"tty": False, "encoding": "no-such-codec", "errors": "strict"}] * 2},
    ],
    ids=["version", "protocol", "vault", "tz", "latin-1", "no-codec"],
)
def test_the_socket_refuses_what_it_cannot_answer_as_the_client_would(
    server: Server, setup: Setup, changed: dict
) -> None:
    asked = request(setup.root, ["search", "docker"], **changed)
    answer = frames(talk(cli_socket(setup), json.dumps(asked).encode() + b"\n"))
    assert [kind for kind, _ in answer] == [REFUSED], answer


def test_a_read_by_hand_on_the_socket_is_answered_in_frames(server: Server, setup: Setup) -> None:
    asked = request(setup.root, ["--vault", str(setup.root), "show", "nosuch"])
    answer = frames(talk(cli_socket(setup), json.dumps(asked).encode() + b"\n"))
    assert [kind for kind, _ in answer] == [ANSWERING, STDERR, EXIT], answer
    assert answer[1][1].startswith(b"memfile: error: no memory 'nosuch'") and answer[2][1] == b"3"


def test_the_socket_is_0600_and_owned_by_the_servers_user(server: Server, setup: Setup) -> None:
    info = cli_socket(setup).lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid()


NOBODY = 65534


def as_another_user(folder: Path, data: bytes) -> bytes:
    """In a child that becomes user 65534: connect to ./cli.sock in `folder` and send `data`; b"denied"
    when it may not connect, else what the server sent back."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        said = b"error"
        try:
            os.close(reader)
            os.chdir(folder)  # as root; then a relative path needs no search right on the folders above
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(DEADLINE)
                try:
                    sock.connect(SOCKET_NAME)
                except PermissionError:
                    said = b"denied"
                else:
                    try:
                        sock.sendall(data)
                        said = b"answered:" + receive_all(sock)
                    except (BrokenPipeError, ConnectionResetError):  # closed on it before the request was read
                        said = b"answered:"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            said = b"error:" + repr(exc).encode()
        finally:
            os.write(writer, said)
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        said = pipe.read()
    os.waitpid(pid, 0)
    return said


def test_a_peer_of_another_user_is_refused(server: Server, setup: Setup) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    data = json.dumps(request(setup.root, ["search", "docker"])).encode() + b"\n"
    path = cli_socket(setup)
    assert as_another_user(path.parent, data) == b"denied"  # mode 0600
    os.chmod(path, 0o666)  # as if the mode were lost: the server's own check of the peer's uid remains
    try:
        assert as_another_user(path.parent, data) == b"answered:"
    finally:
        os.chmod(path, 0o600)
    assert talk(path, data).startswith(frame(ANSWERING, b""))  # its owner still is answered


def test_garbage_on_the_socket_is_dropped_and_the_next_client_answered(
    server: Server, setup: Setup, record: Path
) -> None:
    path = cli_socket(setup)
    good = request(setup.root, ["search", "docker"])
    garbage = [
        b"garbage\n",
        b"\xff\xfe\x00\n",
        b"[1]\n",
        b'"a string"\n',
        b"null\n",
        b"{}\n",
        b"[" * 100_000 + b"\n",  # nested deeper than the JSON decoder's recursion
        json.dumps(good | {"argv": "search docker"}).encode() + b"\n",
        json.dumps(good | {"argv": ["search", 1]}).encode() + b"\n",
        json.dumps(good | {"env": {"PATH": "/tmp", "EDITOR": "rm -rf"}}).encode() + b"\n",
        json.dumps(good | {"env": {"MEMFILE_SOURCE": 1}}).encode() + b"\n",
        json.dumps(good | {"streams": []}).encode() + b"\n",
        json.dumps(good | {"columns": "80"}).encode() + b"\n",
        json.dumps({k: v for k, v in good.items() if k != "protocol"}).encode() + b"\n",
        json.dumps({k: v for k, v in good.items() if k != "vault"}).encode() + b"\n",
        json.dumps(good | {"version": None}).encode() + b"\n",
        b"x" * (MAX_REQUEST + 100),  # too long, with no end of line
        b"x" * 1000 + b"\n" + b"y" * (MAX_REQUEST + 100),
    ]
    for data in garbage:
        assert talk(path, data) == b"", data[:80]
    assert server.process.poll() is None
    three_ways(["--vault", str(setup.root), "search", "docker"], client_env(setup.home), record)


def test_a_silent_connection_does_not_hold_up_the_next_client(server: Server, setup: Setup, record: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(str(cli_socket(setup)))
        idle.sendall(b'{"protocol": 1, ')  # and no more
        three_ways(["--vault", str(setup.root), "tags"], client_env(setup.home), record)
        idle.settimeout(DEADLINE)
        assert receive_all(idle) == b""  # dropped once its time was up


def test_odd_but_valid_streams_are_answered_or_refused_never_crash(server: Server, setup: Setup) -> None:
    path = cli_socket(setup)
    for streams in (
        [{"encoding": "UTF8"}, {"encoding": "utf_8", "errors": "surrogateescape"}],
        [{"encoding": "utf-8", "errors": "no-such-handler", "tty": True}] * 2,
        [{"encoding": "utf-8", "errors": None, "tty": "yes"}] * 2,
    ):
        for columns in (-5, 0, 10**30):
            asked = request(setup.root, ["--vault", str(setup.root), "search", "zoë", "--help"])
            asked |= {"streams": streams, "columns": columns}
            answer = frames(talk(path, json.dumps(asked).encode() + b"\n"))
            assert answer == [] or answer[0][0] in (ANSWERING, REFUSED), answer
    assert server.process.poll() is None


# --- 8. memfile status names the server, and no longer once it stopped ----------------------------------------

SERVER_LINE = re.compile(r"^Server: running, pid (\d+), (\S+) \(it answers memfile's read commands\)$", re.M)


def test_status_names_the_server_both_ways_and_not_once_it_stopped(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    server = start_server(own)
    env = client_env(own.home)
    root = str(own.root)
    try:
        text = three_ways(["--vault", root, "status"], env, record).out.decode()
        assert SERVER_LINE.findall(text) == [(str(server.process.pid), server.url)], text
        data = json.loads(three_ways(["--vault", root, "status", "--json"], env, record).out)
        assert data["server"] == {"pid": server.process.pid, "address": server.url}
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    assert not (own.root / ".memfile" / SOCKET_NAME).exists()
    text = fell_back(["--vault", root, "status"], env, record).out.decode()
    assert "Server: not running (each command reads the vault itself)" in text.splitlines()
    assert json.loads(fell_back(["--vault", root, "status", "--json"], env, record).out)["server"] is None


def test_status_of_a_server_on_a_unix_socket_names_it(tmp_path: Path, record: Path) -> None:
    own = make_setup(tmp_path)
    http_socket = tmp_path / "http.sock"
    server = start_server(own, "--uds", str(http_socket))
    try:
        data = json.loads(three_ways(["--vault", str(own.root), "status", "--json"], client_env(own.home), record).out)
        assert data["server"] == {"pid": server.process.pid, "address": f"unix:{http_socket}"}
    finally:
        assert server.stop()[0] == 0


def test_a_second_server_of_the_vault_answers_http_only(server: Server, setup: Setup, record: Path) -> None:
    second = start_server(setup)
    try:
        status = json.loads(
            three_ways(["--vault", str(setup.root), "status", "--json"], client_env(setup.home), record).out
        )
        assert status["server"]["pid"] == server.process.pid
    finally:
        code, _, err = second.stop()
    assert code == 0, err
    assert "another server of this vault answers the command line" in err, err
    assert cli_socket(setup).exists()  # the first one's, untouched
    served(["--vault", str(setup.root), "tags"], client_env(setup.home), record)


def test_a_server_makes_its_lock_and_socket_again_after_rm_rf_state(tmp_path: Path, record: Path) -> None:
    """QA: `rm -rf .memfile` (the way to rebuild the index) under a running server took its serve.lock and
    cli.sock: status said "not running", every command ran in process, and a second server took both."""
    import shutil
    import time

    own = make_setup(tmp_path)
    server = start_server(own)
    env, root = client_env(own.home), str(own.root)
    try:
        Vault.open(own.root, "michael").store("fact", "editor", "Uses neovim with the lazy.nvim plugins")
        assert "neovim" in served(["--vault", root, "search", "neovim"], env, record).out.decode()
        # `rm -rf` as one step: moved away first, so the server writing its index meanwhile cannot make rmtree
        # meet a folder that filled again ("Directory not empty"); for the server the folder is gone either way
        (own.root / ".memfile").rename(tmp_path / "removed")
        shutil.rmtree(tmp_path / "removed")
        deadline = time.monotonic() + DEADLINE  # the server looks every KEEP_EVERY (1 s); a loaded machine is slow
        while not (cli_socket(own).exists() and (own.root / ".memfile" / "serve.lock").exists()):
            assert time.monotonic() < deadline and server.process.poll() is None, "not made again"
            time.sleep(0.1)
        # status through the server, not three ways: it tells how stale the index is at that moment, and the
        # index is being rebuilt (the worker's warm work refreshes it between calls)
        data = json.loads(served(["--vault", root, "status", "--json"], env, record).out)
        assert data["server"] == {"pid": server.process.pid, "address": server.url}
        assert "neovim" in three_ways(["--vault", root, "search", "neovim"], env, record).out.decode()
        second = start_server(own)  # the command line stays with the first server
        assert second.stop()[0] == 0
        served(["--vault", root, "tags"], env, record)
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    assert "was removed while the server ran: made its lock and socket again" in err, err
    assert not cli_socket(own).exists()


def test_a_current_folder_that_no_longer_exists_is_no_vault_and_no_traceback(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m memfile search anything'
    ran = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 7, ran.stderr
    assert (
        ran.stderr.startswith("memfile: error: the current folder no longer exists") and "Traceback" not in ran.stderr
    )
