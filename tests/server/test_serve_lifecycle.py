"""`memfile serve`'s life: where it may listen, how it starts, how it stops (real processes, real signals)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import DEADLINE, wait_until, write
from helpers.serve import Setup, make_setup, read_answer, refuses_connections, server_env, start_server

from memfile.files import lock_holder
from memfile.keys import KeyStore


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return make_setup(tmp_path)


def serve(setup: Setup, *args: str, keys: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`memfile serve ARGS` that is expected to end by itself (a refusal)."""
    command = [sys.executable, "-m", "memfile", "--vault", str(setup.root), "serve"]
    command += ["--keys", str(keys or setup.keys_path), *args]
    return subprocess.run(command, capture_output=True, text=True, env=server_env(setup.home), timeout=DEADLINE)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", "8.8.8.8"])
def test_an_address_beyond_loopback_is_refused_without_allow_remote(setup: Setup, host: str) -> None:
    result = serve(setup, "--host", host, "--port", "0")
    assert result.returncode == 2, result
    assert "--allow-remote" in result.stderr and "Traceback" not in result.stderr
    assert "serving" not in result.stdout


def test_allow_remote_needs_a_key(setup: Setup, tmp_path: Path) -> None:
    result = serve(setup, "--host", "0.0.0.0", "--port", "0", "--allow-remote", keys=tmp_path / "none.toml")
    assert result.returncode == 2, result
    assert "key" in result.stderr and "memfile key add" in result.stderr


def test_allow_remote_warns_about_plain_http(setup: Setup) -> None:
    server = start_server(setup, "--host", "0.0.0.0", "--allow-remote")
    try:
        port = int(server.url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        code, _, err = server.stop()
    assert code == 0
    assert "TLS" in err and "plain HTTP" in err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_addresses_are_served(setup: Setup, host: str) -> None:
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        server = start_server(setup, "--host", host)
    except AssertionError as exc:
        if host == "::1" and "Cannot assign" in str(exc):
            pytest.skip("IPv6 loopback is not configured here")
        raise
    try:
        answer = server.request("GET", "/memory/recall", setup.tokens["michael"])
        assert answer.status == 200
    finally:
        code, _, _ = server.stop()
    assert code == 0


def test_sigterm_lets_requests_in_flight_finish_and_exits_0_within_2_s(setup: Setup) -> None:
    server = start_server(setup)
    token = setup.tokens["michael"]
    assert server.request("GET", "/memory/recall", token).status == 200  # the mind is open
    body = b'{"category": "fact", "key": "in_flight", "content": "Sent across the shutdown"}'
    sock = socket.create_connection((server.host, server.port), timeout=DEADLINE)
    try:
        sock.sendall(
            b"POST /memory HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:20]
        )
        assert wait_until(lambda: server.request("GET", "/health").status == 200)  # the request is being read
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert wait_until(lambda: refuses_connections(server.host, server.port), timeout=5)  # shutting down
        sock.sendall(body[20:])
        answer = read_answer(sock)
    finally:
        sock.close()
    code, _, err = server.stop()
    took = time.monotonic() - signalled
    assert answer.startswith(b"HTTP/1.1 201"), (answer, err)
    assert code == 0, err
    assert took < 2.5, took  # 2 s promised; a little room for a loaded machine
    assert "Traceback" not in err
    assert (setup.root / "michael" / "fact" / "in_flight.md").exists()


def test_sigint_exits_0(setup: Setup) -> None:
    server = start_server(setup)
    assert server.request("GET", "/health").status == 200
    code, _, err = server.stop(signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err


def test_a_unix_socket_is_0600_serves_and_is_removed(setup: Setup, tmp_path: Path) -> None:
    path = tmp_path / "memfile.sock"
    server = start_server(setup, "--uds", str(path))
    try:
        assert server.url == f"unix:{path}"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(DEADLINE)
            sock.connect(str(path))
            sock.sendall(
                b"GET /memory/recall HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                + setup.tokens["person"].encode()
                + b"\r\nConnection: close\r\n\r\n"
            )
            assert read_answer(sock).startswith(b"HTTP/1.1 200")
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    assert not path.exists()


def test_a_stale_socket_is_replaced_but_a_file_is_not(setup: Setup, tmp_path: Path) -> None:
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(stale))  # left behind: nothing listens
    server = start_server(setup, "--uds", str(stale))
    assert server.stop()[0] == 0
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    result = serve(setup, "--uds", str(a_file))
    assert result.returncode == 2 and a_file.read_text() == "mine"


def test_a_port_in_use_exits_4(setup: Setup) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = serve(setup, "--port", str(taken.getsockname()[1]))
    assert result.returncode == 4, result
    assert "--port" in result.stderr


def test_without_keys_it_serves_health_and_says_how_to_make_one(setup: Setup, tmp_path: Path) -> None:
    setup.keys_path = tmp_path / "empty" / "keys.toml"
    server = start_server(setup)
    try:
        assert server.request("GET", "/health").status == 200
        assert server.request("GET", "/memory/recall").status == 401
    finally:
        code, _, err = server.stop()
    assert code == 0
    assert "memfile key add" in err


def test_a_keys_file_inside_the_vault_is_refused_before_anything_is_served(setup: Setup) -> None:
    """--keys, MEMFILE_KEYS or XDG_CONFIG_HOME naming a file in the vault: exit 2 and why, before listening
    (the file's hashes and labels would go into git with the next commit of the working tree)."""
    inside = setup.root / "keys.toml"
    inside.write_bytes(setup.keys_path.read_bytes())
    os.chmod(inside, 0o600)
    command = [sys.executable, "-m", "memfile", "--vault", str(setup.root), "serve", "--port", "0"]
    for extra, env in (
        (["--keys", str(inside)], {}),
        (["--keys", str(setup.root / "michael" / "new.toml")], {}),  # not made yet: refused all the same
        ([], {"MEMFILE_KEYS": str(inside)}),
        ([], {"XDG_CONFIG_HOME": str(setup.root / ".memfile")}),
    ):
        result = subprocess.run(
            [*command, *extra], capture_output=True, text=True, env=server_env(setup.home) | env, timeout=DEADLINE
        )
        assert result.returncode == 2, (extra, env, result)
        assert result.stdout == "" and "Traceback" not in result.stderr
        assert f"is inside the vault {setup.root}" in result.stderr and "--keys FILE" in result.stderr, result.stderr


def test_a_key_made_while_it_runs_is_taken(setup: Setup, tmp_path: Path) -> None:
    setup.keys_path = tmp_path / "later" / "keys.toml"
    server = start_server(setup)
    try:
        _, token = KeyStore(setup.keys_path).add("person", "late", setup.root)
        assert server.request("GET", "/memory/recall", token).status == 200
    finally:
        assert server.stop()[0] == 0


def test_without_the_serve_packages_it_says_what_to_install(setup: Setup) -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from memfile.__main__ import run\n"
        f"sys.argv = ['memfile', '--vault', {str(setup.root)!r}, 'serve', '--port', '0']\n"
        "run()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, env=server_env(setup.home), timeout=DEADLINE
    )
    assert result.returncode == 2, result
    assert "pip install 'memfile-vault[serve]'" in result.stderr and "Traceback" not in result.stderr


def test_help_has_an_example(setup: Setup) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memfile", "serve", "--help"],
        capture_output=True,
        text=True,
        env=server_env(setup.home),
        timeout=DEADLINE,
    )
    assert result.returncode == 0 and "Example:" in result.stdout
    for option in ("--host", "--port", "--uds", "--allow-remote", "--keys"):
        assert option in result.stdout


@pytest.mark.slow
def test_with_a_thousand_opened_minds_sigterm_still_exits_0_within_2_s(setup: Setup) -> None:
    """LangBot keeps a mind per chat: one watch over the vault (a handful of threads), and an exit that
    does not close a thousand Vaults one by one, yet takes every watcher marker away."""
    names = ["michael", "anna"] + [f"chat{n:04d}" for n in range(998)]
    for name in names[2:]:
        write(setup.root / name / "fact" / "topic.md", f"chat {name} talks of okapis\n")
    server = start_server(setup)
    token = setup.tokens["person"]
    try:
        conn = server.connection()
        for name in names:  # opens each mind (and builds its index: every catalog was just written)
            conn.request("GET", f"/memory/recall?mind={name}", headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            assert (response.status, name) == (200, name), response.read()[:300]
            response.read()
        conn.close()
        markers = [setup.root / ".memfile" / f"watch-{name}.clean" for name in names]
        assert wait_until(
            lambda: all(marker.exists() for marker in markers), timeout=180
        )  # every mind watched, settled
        threads = int(Path(f"/proc/{server.process.pid}/status").read_text().split("Threads:")[1].split()[0])
        assert threads < 20
        signalled = time.monotonic()
        code, _, err = server.stop()
        took = time.monotonic() - signalled
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert code == 0, err
    assert took < 2.5, took  # 2 s promised; a little room for a loaded machine
    assert "Traceback" not in err
    assert not any(marker.exists() for marker in markers)  # no command trusts a watcher that is gone
    assert all(lock_holder(setup.root / ".memfile" / f"watch-{name}.lock") is None for name in names)


def _low_open_files_limit() -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))


def _open_files_limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files line")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_serve_raises_its_open_files_limit_to_the_hard_limit(setup: Setup) -> None:
    """An opened mind keeps a few files open: a soft limit of 256 would run out near 50 minds."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")
    command = [sys.executable, "-m", "memfile", "--vault", str(setup.root), "serve", "--port", "0"]
    command += ["--keys", str(setup.keys_path)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(setup.home),
        preexec_fn=_low_open_files_limit,  # the child's own limit, set before it runs
    )
    try:
        assert process.stdout is not None and "serving" in process.stdout.readline()
        assert _open_files_limits(process.pid) == (hard, hard)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE) == 0
