"""The credentials of `memfile serve`: the keys file (memfile/keys.py) and `memfile key add|list|revoke`."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, fails, in_vault, ok, plain_vault, run

from memfile import keys as keys_module
from memfile.errors import Conflict, InvalidInput, NotFound, Refused
from memfile.keys import AGENT, PERSON, InvalidKeysFile, Key, KeyStore, default_keys_path, validate_label


@pytest.fixture(autouse=True)
def _no_keys_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's keys file is never touched: no XDG_CONFIG_HOME or MEMFILE_KEYS from outside."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("MEMFILE_KEYS", raising=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A vault (made by hand: the key commands need no index nor git) with the minds michael and carol."""
    return plain_vault(tmp_path / "vault", "", michael={}, carol={})


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "memfile" / "keys.toml"


def add(root: Path, keys_file: Path, *args: str) -> tuple[dict, str]:
    """`memfile key add ARGS --json`: (the key as JSON, the token)."""
    result = ok(in_vault(root, "key", "add", *args, "--keys", keys_file, "--json"))
    data = json.loads(result.stdout)
    return data, data.pop("token")


# The round trip.


def test_add_list_revoke_round_trip(root: Path, keys_file: Path) -> None:
    result = ok(in_vault(root, "key", "add", "--mind", "michael", "--name", "claude-desktop", "--keys", keys_file))
    token = result.stdout.strip()
    assert token.startswith("mfk_") and len(token.splitlines()) == 1  # alone on stdout: TOKEN=$(...) works
    assert "shown only now" in result.stderr and "Authorization: Bearer" in result.stderr
    assert "memfile serve" in result.stderr
    person, person_token = add(root, keys_file, "--person", "--name", "michael-laptop")
    assert person_token.startswith(f"mfp_{person['id']}_")
    assert person["kind"] == PERSON and person["mind"] is None and person["vault"] == str(root.resolve())

    listed = ok(in_vault(root, "key", "list", "--keys", keys_file)).stdout.splitlines()
    assert len(listed) == 2
    agent_line = next(line for line in listed if "claude-desktop" in line)
    agent_id = agent_line.split()[0]
    assert agent_line.split()[1:4] == ["claude-desktop", AGENT, "michael"]
    assert token.startswith(f"mfk_{agent_id}_")

    store = KeyStore(keys_file)
    assert store.authenticate(token, root) == Key(
        agent_id, "claude-desktop", AGENT, str(root.resolve()), "michael", store.list(root)[0].created_at
    )
    assert store.authenticate(person_token, root).label == "michael-laptop"  # type: ignore[union-attr]
    assert store.has_keys(root)

    revoked = json.loads(ok(in_vault(root, "key", "revoke", agent_id, "--keys", keys_file, "--json")).stdout)
    assert revoked["id"] == agent_id and "sha256" not in revoked
    assert store.authenticate(token, root) is None  # the same long-lived store sees the revoke at once
    assert store.authenticate(person_token, root) is not None
    assert [k["id"] for k in json.loads(ok(in_vault(root, "key", "list", "--keys", keys_file, "--json")).stdout)] == [
        person["id"]
    ]
    fails(in_vault(root, "key", "revoke", agent_id, "--keys", keys_file), NotFound.exit_code)


def test_key_list_json_never_shows_a_hash_or_token(root: Path, keys_file: Path) -> None:
    _, token = add(root, keys_file, "--mind", "carol", "--name", "c")
    result = ok(in_vault(root, "key", "list", "--keys", keys_file, "--json"))
    (entry,) = json.loads(result.stdout)
    assert set(entry) == {"id", "label", "kind", "vault", "mind", "created_at"}
    digest = hashlib.sha256(token.encode()).hexdigest()
    for shown in (result.stdout, ok(in_vault(root, "key", "list", "--keys", keys_file)).stdout):
        assert digest not in shown and token not in shown and token.split("_", 2)[2] not in shown


def test_list_shows_only_this_vaults_keys_unless_all(root: Path, keys_file: Path, tmp_path: Path) -> None:
    other = plain_vault(tmp_path / "other", "", dana={})
    add(root, keys_file, "--mind", "michael", "--name", "here")
    add(other, keys_file, "--mind", "dana", "--name", "there")
    mine = json.loads(ok(in_vault(root, "key", "list", "--keys", keys_file, "--json")).stdout)
    assert [k["label"] for k in mine] == ["here"]
    every = ok(in_vault(root, "key", "list", "--all", "--keys", keys_file)).stdout
    assert "here" in every and "there" in every and str(other.resolve()) in every
    empty = ok(in_vault(plain_vault(tmp_path / "empty", "", x={}), "key", "list", "--keys", keys_file))
    assert empty.stdout == "" and "no keys for this vault" in empty.stderr


def test_a_label_is_unique_within_a_vault(root: Path, keys_file: Path, tmp_path: Path) -> None:
    first, _ = add(root, keys_file, "--mind", "michael", "--name", "claude")
    before = keys_file.read_bytes()
    result = fails(
        in_vault(root, "key", "add", "--mind", "carol", "--name", "claude", "--keys", keys_file), Conflict.exit_code
    )
    assert first["id"] in result.stderr and "memfile key revoke" in result.stderr
    assert keys_file.read_bytes() == before
    add(plain_vault(tmp_path / "other", "", michael={}), keys_file, "--mind", "michael", "--name", "claude")


# Authentication.


def test_a_token_authenticates_only_for_its_vault(root: Path, keys_file: Path, tmp_path: Path) -> None:
    other = plain_vault(tmp_path / "other", "", michael={})
    store = KeyStore(keys_file)
    key, token = store.add(AGENT, "a", root, "michael")
    person, person_token = store.add(PERSON, "p", root)
    assert store.authenticate(token, root) == key and store.authenticate(person_token, root) == person
    (tmp_path / "link").symlink_to(root)
    assert store.authenticate(token, tmp_path / "link") == key  # the same vault by another path
    assert store.authenticate(token, other) is None
    assert store.authenticate(person_token, other) is None
    assert not store.has_keys(other) and store.has_keys(root)


def _malformed(token: str, other_token: str) -> list[object]:
    prefix, key_id, secret = token.split("_", 2)
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    return [
        None,
        "",
        "Bearer " + token,
        token + "x",
        token[:-1],
        " " + token,
        token.upper(),
        f"{prefix}_{key_id}_{flipped}",  # wrong secret
        f"mfp_{key_id}_{secret}",  # the other kind's prefix
        f"{prefix}_zzzzzzzz_{secret}",  # unknown id
        f"{prefix}_{other_token.split('_', 2)[1]}_{secret}",  # another key's id with this secret
        f"{prefix}_{key_id}_{secret[:20]}\n{secret[20:]}",
        token.encode(),
        "x" * 100_000,
        42,
    ]


def test_wrong_malformed_and_revoked_tokens_are_refused(root: Path, keys_file: Path) -> None:
    store = KeyStore(keys_file)
    key, token = store.add(AGENT, "a", root, "michael")
    _, other_token = store.add(AGENT, "b", root, "carol")
    for bad in _malformed(token, other_token):
        assert store.authenticate(bad, root) is None, bad  # type: ignore[arg-type]
    assert store.authenticate(token, root) == key
    store.revoke(key.id)
    assert store.authenticate(token, root) is None
    assert store.authenticate(other_token, root) is not None


def test_no_keys_file_means_no_key(tmp_path: Path, root: Path) -> None:
    store = KeyStore(tmp_path / "absent" / "keys.toml")
    assert store.list() == [] and not store.has_keys(root)
    assert store.authenticate("mfk_abcdefgh_" + "a" * 43, root) is None
    assert not (tmp_path / "absent").exists()  # reading makes nothing


def test_hashes_are_compared_in_constant_time(root: Path, keys_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = KeyStore(keys_file)
    key, token = store.add(AGENT, "a", root, "michael")
    compared: list[tuple[object, object]] = []
    real = keys_module.hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys_module.hmac, "compare_digest", spy)
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert store.authenticate(token, root) == key
    assert compared == [(digest, digest)]
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert store.authenticate(flipped, root) is None
    assert compared[-1] == (digest, hashlib.sha256(flipped.encode()).hexdigest())


def test_a_long_lived_store_sees_keys_added_by_another_process(root: Path, keys_file: Path) -> None:
    store = KeyStore(keys_file)
    assert store.authenticate("mfk_abcdefgh_" + "a" * 43, root) is None
    _, token = add(root, keys_file, "--mind", "michael", "--name", "later")
    assert store.authenticate(token, root) is not None


# The file on disk.


def test_the_file_holds_no_token_and_is_private(root: Path, keys_file: Path) -> None:
    _, token = add(root, keys_file, "--mind", "michael", "--name", "claude-desktop")
    _, person_token = add(root, keys_file, "--person", "--name", "me")
    text = keys_file.read_text(encoding="utf-8")
    for secret in (token.split("_", 2)[2], person_token.split("_", 2)[2]):
        assert secret not in text and secret[:16] not in text
    assert hashlib.sha256(token.encode()).hexdigest() in text
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((keys_file.parent / "keys.toml.lock").stat().st_mode) == 0o600
    assert sorted(p.name for p in keys_file.parent.iterdir()) == ["keys.toml", "keys.toml.lock"]  # no temp file left
    assert not list(root.rglob("*keys*"))  # nothing in the vault


def test_a_keys_file_inside_the_vault_is_refused(root: Path) -> None:
    for inside in (root / "keys.toml", root / "michael" / "keys.toml", root / ".memfile" / "keys.toml"):
        result = fails(in_vault(root, "key", "add", "--person", "--name", "p", "--keys", inside), Refused.exit_code)
        assert "inside the vault" in result.stderr and "--keys FILE" in result.stderr
        assert not inside.exists()


def test_a_keys_file_moved_into_the_vault_is_refused_by_every_reader(
    root: Path, keys_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only `key add`: list (of this vault, or --all), revoke and authenticate refuse a keys file inside the
    vault asked about or inside a vault its keys belong to, whether it is named by --keys, MEMFILE_KEYS or
    XDG_CONFIG_HOME: its hashes and labels sit in the working tree, where the next commit takes them."""
    key, token = add(root, keys_file, "--mind", "michael", "--name", "claude-desktop")
    inside = root / "config" / "memfile" / "keys.toml"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(keys_file.read_bytes())
    os.chmod(inside, 0o600)
    other = plain_vault(tmp_path / "other", "", carol={})

    def refused(*args: object) -> None:
        result = fails(in_vault(root, *args), Refused.exit_code)
        assert f"the keys file {inside} is inside the vault {root}" in result.stderr, result.stderr
        assert "move it outside the vault" in result.stderr and "--keys FILE" in result.stderr

    for args in (("key", "list"), ("key", "list", "--all"), ("key", "revoke", key["id"])):
        refused(*args, "--keys", inside)
    fails(run("--vault", other, "key", "list", "--all", "--keys", inside), Refused.exit_code)  # root's keys are in it
    monkeypatch.setenv("MEMFILE_KEYS", str(inside))
    refused("key", "list")
    monkeypatch.delenv("MEMFILE_KEYS")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    refused("key", "list", "--json")
    store = KeyStore(inside)
    with pytest.raises(Refused):
        store.authenticate(token, root)
    with pytest.raises(Refused):
        store.has_keys(other)
    assert KeyStore(keys_file).authenticate(token, root) is not None  # the file outside still works


def test_an_existing_folder_keeps_its_mode(root: Path, tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    KeyStore(folder / "keys.toml").add(PERSON, "me", root)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "keys.toml").stat().st_mode) == 0o600


def test_concurrent_key_add_processes_all_land(root: Path, keys_file: Path) -> None:
    """Four `memfile key add` processes queue on the lock at once (held by the test until all wait)."""
    import fcntl

    keys_file.parent.mkdir(parents=True)
    lock = os.open(keys_file.parent / "keys.toml.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memfile", "--vault", str(root), "key", "add", "--mind", "michael"]
            + ["--name", f"agent-{i}", "--keys", str(keys_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    try:
        _wait_for_lock_waiters(os.fstat(lock).st_ino, len(procs))
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, outs
    store = KeyStore(keys_file)
    assert sorted(k.label for k in store.list(root)) == [f"agent-{i}" for i in range(4)]
    for stdout, _ in outs:
        assert store.authenticate(stdout.strip(), root) is not None


def _wait_for_lock_waiters(inode: int, count: int, deadline: float = 60.0) -> None:
    """Poll /proc/locks until `count` processes wait for the flock of `inode` (Linux; elsewhere: go on)."""
    locks = Path("/proc/locks")
    if not locks.exists():
        return
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        waiting = [line for line in locks.read_text().splitlines() if "->" in line and f":{inode} " in line]
        if len(waiting) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the key add processes never waited for the lock: {locks.read_text()}")


# Bad input.


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("two\nlines", "line break"),
        ("a:b", "colon"),
        ("", "empty"),
        ("x" * 65, "65 characters"),
        ("a b", "space"),
        ("-dash", "starts with '-'"),
        ("Memfile-Key: x", "colon"),
    ],
)
def test_bad_labels_are_refused_by_name(root: Path, keys_file: Path, label: str, reason: str) -> None:
    result = fails(
        in_vault(root, "key", "add", "--mind", "michael", "--name", label, "--keys", keys_file), InvalidInput.exit_code
    )
    assert "invalid key name" in result.stderr and reason in result.stderr
    assert not keys_file.exists()
    with pytest.raises(InvalidInput, match=reason):
        validate_label(label)


def test_the_longest_label_is_taken(root: Path, keys_file: Path) -> None:
    data, _ = add(root, keys_file, "--mind", "michael", "--name", "A" + "b.-_9" * 12 + "xyz")
    assert len(data["label"]) == 64


def test_a_mind_that_does_not_exist_exits_3_naming_the_minds(root: Path, keys_file: Path) -> None:
    result = fails(
        in_vault(root, "key", "add", "--mind", "nobody", "--name", "a", "--keys", keys_file), NotFound.exit_code
    )
    assert "'nobody'" in result.stderr and "carol, michael" in result.stderr
    fails(in_vault(root, "key", "add", "--mind", "../etc", "--name", "a", "--keys", keys_file), 2)
    assert not keys_file.exists()


@pytest.mark.parametrize(
    "args", [("--name", "a"), ("--mind", "michael", "--person", "--name", "a")], ids=["neither", "both"]
)
def test_exactly_one_of_mind_or_person(root: Path, keys_file: Path, args: tuple[str, ...]) -> None:
    result = fails(in_vault(root, "key", "add", *args, "--keys", keys_file), InvalidInput.exit_code)
    assert "--mind NAME" in result.stderr and "--person" in result.stderr


def test_outside_a_vault_key_add_exits_7(tmp_path: Path, keys_file: Path) -> None:
    fails(in_vault(tmp_path / "nothing", "key", "add", "--person", "--name", "a", "--keys", keys_file), 7)
    with pytest.raises(InvalidInput):
        KeyStore(keys_file).add(PERSON, "a", plain_vault(tmp_path / "v", "", m={}), mind="m")
    with pytest.raises(InvalidInput):
        KeyStore(keys_file).add("robot", "a", tmp_path / "v")


def test_revoke_takes_an_id_and_never_echoes_a_token(root: Path, keys_file: Path) -> None:
    _, token = add(root, keys_file, "--mind", "michael", "--name", "a")
    result = fails(run("key", "revoke", token, "--keys", keys_file), InvalidInput.exit_code)
    assert token not in result.stderr and token.split("_", 2)[2] not in result.stderr
    assert "that is a token" in result.stderr
    fails(run("key", "revoke", "NOT-AN-ID", "--keys", keys_file), InvalidInput.exit_code)
    fails(run("key", "revoke", "zzzzzzzz", "--keys", keys_file), NotFound.exit_code)
    assert KeyStore(keys_file).authenticate(token, root) is not None


# A keys file that cannot be trusted.

GOOD_ENTRY = """[keys.abcd1234]
label = "a"
kind = "agent"
vault = "/v"
mind = "michael"
created_at = "2026-01-01T00:00:00Z"
sha256 = "{}"
""".format("0" * 64)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[keys\nlabel = 'x'", "not valid TOML"),
        ("keys = 3\n", "not a table"),
        ("version = 2\n", "unknown top-level"),
        (GOOD_ENTRY.replace('label = "a"', "label = 3"), "not text"),
        (GOOD_ENTRY.replace('label = "a"', 'label = "a b"'), "label"),
        (GOOD_ENTRY.replace('kind = "agent"', 'kind = "root"'), "kind"),
        (GOOD_ENTRY.replace('mind = "michael"\n', ""), "without a valid mind"),
        (GOOD_ENTRY.replace('kind = "agent"', 'kind = "person"'), "with a mind"),
        (GOOD_ENTRY.replace("0" * 64, "secret"), "sha256"),
        (GOOD_ENTRY.replace('vault = "/v"', 'vault = "v"'), "absolute"),
        (GOOD_ENTRY.replace("2026-01-01T00:00:00Z", "yesterday"), "created_at"),
        (GOOD_ENTRY + 'token = "mfk_x"\n', "unknown fields: token"),
        (GOOD_ENTRY.replace("abcd1234", "ABCD"), "id"),
        (GOOD_ENTRY.replace('vault = "/v"\n', ""), "lacks vault"),
        ("[keys.abcd1234]\n[keys.abcd1234]\n", "not valid TOML"),
    ],
)
def test_a_corrupt_keys_file_is_a_clear_error(root: Path, keys_file: Path, text: str, says: str) -> None:
    keys_file.parent.mkdir(parents=True)
    keys_file.write_text(text, encoding="utf-8")
    os.chmod(keys_file, 0o600)
    for args in (("list",), ("add", "--person", "--name", "p")):
        result = fails(in_vault(root, "key", *args, "--keys", keys_file), InvalidInput.exit_code)
        assert f"invalid keys file {keys_file}" in result.stderr and says in result.stderr, result.stderr
    assert keys_file.read_text(encoding="utf-8") == text  # add changed nothing
    with pytest.raises(InvalidKeysFile, match=says):
        KeyStore(keys_file).authenticate("mfk_abcd1234_" + "a" * 43, root)


def test_a_good_hand_written_entry_is_read(root: Path, keys_file: Path) -> None:
    keys_file.parent.mkdir(parents=True)
    keys_file.write_text(GOOD_ENTRY.replace('"/v"', json.dumps(str(root.resolve()))), encoding="utf-8")
    os.chmod(keys_file, 0o600)
    assert [k.id for k in KeyStore(keys_file).list(root)] == ["abcd1234"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660])
def test_a_keys_file_others_may_read_or_write_is_refused(root: Path, keys_file: Path, mode: int) -> None:
    store = KeyStore(keys_file)
    key, token = store.add(AGENT, "a", root, "michael")
    os.chmod(keys_file, mode)
    before = keys_file.read_bytes()
    for args in (("list",), ("add", "--person", "--name", "p")):
        result = fails(in_vault(root, "key", *args, "--keys", keys_file), Refused.exit_code)
        assert f"chmod 600 {keys_file}" in result.stderr and f"{mode:04o}" in result.stderr
    fails(run("key", "revoke", key.id, "--keys", keys_file), Refused.exit_code)
    assert keys_file.read_bytes() == before and stat.S_IMODE(keys_file.stat().st_mode) == mode  # nothing fixed silently
    with pytest.raises(Refused):
        store.authenticate(token, root)  # the same store had read it while it was private: it looks again
    os.chmod(keys_file, 0o600)
    assert store.authenticate(token, root) == key


def test_a_keys_file_that_is_a_folder_or_a_fifo(root: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    result = fails(in_vault(root, "key", "list", "--keys", folder), 2)  # click refuses a folder for --keys
    assert "Traceback" not in result.output
    with pytest.raises(InvalidKeysFile, match="folder"):
        KeyStore(folder).list()
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo, 0o600)
    result = fails(in_vault(root, "key", "list", "--keys", fifo), InvalidInput.exit_code)  # no hang
    assert "not a regular file" in result.stderr


def test_a_corrupt_keys_file_in_a_real_process_prints_no_traceback(root: Path, keys_file: Path) -> None:
    keys_file.parent.mkdir(parents=True)
    keys_file.write_text("[[[", encoding="utf-8")
    os.chmod(keys_file, 0o600)
    done = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), "key", "list", "--keys", str(keys_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == InvalidInput.exit_code
    assert "Traceback" not in done.stderr and f"invalid keys file {keys_file}" in done.stderr


# Where the file is.


def test_the_default_path_follows_xdg_config_home(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_keys_path() == Path.home() / ".config" / "memfile" / "keys.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")  # the XDG specification: ignored
    assert default_keys_path() == Path.home() / ".config" / "memfile" / "keys.toml"
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    assert default_keys_path() == xdg / "memfile" / "keys.toml"
    assert KeyStore().path == xdg / "memfile" / "keys.toml"
    _, token = add(root, xdg / "memfile" / "keys.toml", "--person", "--name", "me")
    ok(in_vault(root, "key", "add", "--mind", "michael", "--name", "agent"))  # no --keys: the XDG file
    assert {k.label for k in KeyStore().list(root)} == {"me", "agent"}
    assert not (Path.home() / ".config").exists()
    monkeypatch.setenv("MEMFILE_KEYS", str(tmp_path / "elsewhere.toml"))
    assert default_keys_path() == tmp_path / "elsewhere.toml"
    assert ok(in_vault(root, "key", "list", "--json")).stdout.strip() == "[]"


def test_every_key_command_has_help_with_an_example() -> None:
    for args in (("key",), ("key", "add"), ("key", "list"), ("key", "revoke")):
        assert "Example:" in ok(run(*args, "--help")).stdout
