"""Reading memory files and memfile.toml, and choosing the vault, on hostile input (issues 20 and 21).

A folder becomes a vault only through `memfile init`; front-matter exists only
at the start of a file; a key is never given twice; a YAML alias never makes a
command fail or eat memory; memfile.toml is written as valid TOML whatever the
names, and every bad memfile.toml is "invalid memfile.toml: ..." naming the key.
"""

from __future__ import annotations

import json
import math
import os
import string
import subprocess
import sys
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers import fails, in_vault, ok, run, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import Vault, fileformat
from memfile.config import Config, find_vault, load_config, mind_section, render_config
from memfile.errors import FileParseError, InvalidInput, NotAVault

MTIME = datetime(2026, 1, 1, tzinfo=timezone.utc)
FACT = "alice/fact/x.md"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A vault with mind `alice` and one stored memory, `fact/good`."""
    target = tmp_path / "vault"
    ok(run("init", target, "--mind", "alice"))
    ok(in_vault(target, "store", "fact", "good", "a good memory about gardening"))
    return target


def entries(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with the bytes of each file (None for a folder)."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def parse_error(data: bytes) -> FileParseError:
    with pytest.raises(FileParseError) as caught:
        fileformat.parse(data, FACT, MTIME)
    return caught.value


# --- issue 20.2: a folder becomes a vault only through `memfile init` -------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home folder that is not a vault: secrets and papers, a few folders that look like minds."""
    folder = tmp_path / "home"
    write(folder / ".ssh" / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    write(folder / "taxes.pdf", "%PDF-1.4 numbers")
    write(folder / "projects" / "plan.md", "# plan\n")
    (folder / "boot").mkdir()
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ("--mind", "projects", "store", "fact", "x", "typo"),
        ("list",),
        ("--mind", "projects", "recall"),
        ("--mind", "projects", "search", "plan"),
        ("--mind", "projects", "doctor", "--fix"),
    ],
)
def test_a_vault_option_at_a_folder_without_memfile_toml_is_refused_and_the_folder_left_alone(
    home: Path, command: tuple[str, ...]
) -> None:
    before = entries(home)
    result = fails(run("--vault", home, *command), 7)
    assert "memfile init" in result.stderr and str(home) in result.stderr
    assert "boot" not in result.stdout and "projects" not in result.stdout
    assert entries(home) == before  # no .git, no .memfile, nothing written
    assert not (home / ".git").exists() and not (home / ".memfile").exists()


def test_memfile_vault_at_a_folder_without_memfile_toml_is_refused_too(home: Path) -> None:
    before = entries(home)
    result = fails(run("--mind", "projects", "store", "fact", "x", "typo", env={"MEMFILE_VAULT": str(home)}), 7)
    assert "memfile init" in result.stderr
    assert entries(home) == before


def test_vault_open_of_a_folder_without_memfile_toml_raises_not_a_vault(home: Path, monkeypatch) -> None:
    before = entries(home)
    with pytest.raises(NotAVault, match="memfile init"):
        Vault.open(home, "projects")
    monkeypatch.setenv("MEMFILE_VAULT", str(home))
    with pytest.raises(NotAVault):
        Vault.open(mind="projects")
    assert entries(home) == before


def test_init_makes_the_folder_a_vault_and_always_writes_memfile_toml(tmp_path: Path) -> None:
    empty, existing = tmp_path / "empty", tmp_path / "existing"
    write(existing / "readme.txt", "already here\n")
    for folder in (empty, existing):
        ok(run("init", folder, "--mind", "alice"))
        assert (folder / "memfile.toml").is_file()
        assert tomllib.loads((folder / "memfile.toml").read_text(encoding="utf-8"))["default_mind"] == "alice"
        ok(in_vault(folder, "store", "fact", "k", "works now"))
        assert find_vault(folder) == folder.resolve()


# --- issue 21.2: front-matter only at the start of a file -----------------------------------------------

TRIP = "# Trip notes\nWe fly on Monday.\n\n---\n\nHotel: Grand Budapest\n\n---\n\nReturn on Friday.\n"
PLAIN = "Plain note\n---\nstatus: superseded\nexpires_at: 2000-01-01\n---\nlast line\n"


def test_a_markdown_file_with_two_horizontal_rules_is_all_content(root: Path) -> None:
    write(root / "alice" / "note" / "trip.md", TRIP)
    hits = json.loads(ok(in_vault(root, "search", "monday", "--json")).stdout)
    assert [hit["key"] for hit in hits] == ["trip"]
    shown = json.loads(ok(in_vault(root, "show", "note/trip", "--json")).stdout)
    assert shown["content"] == TRIP.strip() and shown["extra"] == {} and shown["has_front_matter"] is False
    assert "Hotel: Grand Budapest" in ok(in_vault(root, "recall")).stdout


def test_rules_after_a_first_line_are_not_front_matter_that_hides_a_memory(root: Path) -> None:
    write(root / "alice" / "note" / "plain.md", PLAIN)
    listed = json.loads(ok(in_vault(root, "list", "--json")).stdout)
    plain = next(m for m in listed if m["key"] == "plain")
    assert plain["status"] == "active" and plain["expires_at"] is None and plain["content"] == PLAIN.strip()
    recalled = ok(in_vault(root, "recall")).stdout
    assert "Plain note" in recalled and "last line" in recalled
    assert "plain" in ok(in_vault(root, "search", "plain", "--json")).stdout


@pytest.mark.parametrize("prefix", ["\n", " ", "text\n", "\t\n"])
def test_a_fence_that_is_not_the_first_line_opens_no_front_matter(prefix: str) -> None:
    data = (prefix + "---\npriority: critical\nverified: false\n---\nbody\n").encode()
    memory = fileformat.parse(data, FACT, MTIME)
    assert memory.priority == "normal" and memory.has_front_matter is False
    assert memory.content == data.decode().strip()


def test_a_fence_after_a_bom_opens_front_matter() -> None:
    memory = fileformat.parse(b"\xef\xbb\xbf---\npriority: high\n---\nbody\n", FACT, MTIME)
    assert memory.priority == "high" and memory.content == "body" and memory.has_front_matter


def test_a_store_over_a_file_without_front_matter_keeps_its_rules(root: Path) -> None:
    write(root / "alice" / "note" / "trip.md", TRIP)
    ok(in_vault(root, "store", "note", "trip", TRIP.replace("Friday", "Saturday")))
    shown = json.loads(ok(in_vault(root, "show", "note/trip", "--json")).stdout)
    assert "Hotel: Grand Budapest" in shown["content"] and "Saturday" in shown["content"]


# --- issue 21.5: a key given twice, in any spelling, is refused -----------------------------------------

DUPLICATES = {
    "double quotes": 'priority: low\n"priority": critical\n',
    "single quotes": "verified: false\n'verified': true\n",
    "explicit key": "priority: low\n? priority\n: critical\n",
    "escaped": 'priority: low\n"pri\\x6frity": critical\n',
    "unicode escape": 'priority: low\n"pri\\u006frity": critical\n',
    "flow mapping": '{id: mem_abcd, priority: low, "priority": critical}\n',
    "tag": "priority: low\n!!str priority: critical\n",
    "plain": "priority: low\npriority: critical\n",
}


@pytest.mark.parametrize("front", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_a_front_matter_key_given_twice_is_refused_whatever_its_spelling(front: str) -> None:
    err = parse_error(f"---\n{front}---\nbody\n".encode())
    assert "twice" in err.reason and err.line is not None and err.line >= 2


def test_equal_keys_of_other_types_are_refused_too() -> None:
    assert "twice" in parse_error(b"---\n1: a\n1.0: b\n---\nbody\n").reason


def test_a_merge_key_overridden_by_its_mapping_is_no_duplicate() -> None:
    data = b"---\nbase: &b {x: 1, y: 2}\nmore:\n  <<: *b\n  x: 3\n---\nbody\n"
    assert dict(fileformat.parse(data, FACT, MTIME).extra)["more"] == {"x": 3, "y": 2}


def test_a_quoted_duplicate_never_raises_a_memory_through_the_cli(root: Path) -> None:
    write(root / "alice" / "fact" / "pin.md", 'priority: low\n"priority": critical\n'.join(["---\n", "---\npinned\n"]))
    write(
        root / "alice" / "fact" / "trusted.md", "---\nsource: agent\nverified: false\n'verified': true\n---\ntrusted\n"
    )
    listed = json.loads(ok(in_vault(root, "list", "--json")).stdout)
    assert [m["key"] for m in listed] == ["good"]
    assert "pinned" not in ok(in_vault(root, "recall")).stdout
    doctor = fails(in_vault(root, "doctor"), 5).stdout
    assert "alice/fact/pin.md" in doctor and "alice/fact/trusted.md" in doctor and "twice" in doctor


# --- issue 21.11: recursive and exploding YAML aliases ---------------------------------------------------

RECURSIVE = {
    "list": "x: &x [*x]\n",
    "mapping": "m: &m {self: *m}\n",
    "deeper": "a: &a\n  b:\n    c: [1, *a]\n",
    "block list": "x: &x\n  - *x\n",
    "merge": "m: &m\n  <<: *m\n",
}


@pytest.mark.parametrize("front", RECURSIVE.values(), ids=RECURSIVE.keys())
def test_a_recursive_yaml_alias_is_a_parse_error_not_a_recursion_error(front: str) -> None:
    err = parse_error(f"---\nid: mem_abcd\n{front}---\nbody\n".encode())
    assert "alias" in err.reason


def test_a_file_with_a_recursive_alias_is_skipped_and_every_command_works(root: Path) -> None:
    write(root / "alice" / "fact" / "loop.md", "---\nx: &x [*x]\n---\nbody\n")
    write(root / "alice" / "fact" / "self.md", "---\nm: &m {self: *m}\n---\nbody\n")
    for command in (
        ("list",),
        ("recall",),
        ("recall", "--query", "gardening"),
        ("search", "gardening"),
        ("show", "fact/good"),
        ("status",),
        ("tags",),
    ):
        result = ok(in_vault(root, *command))
        assert "good" in result.stdout or "gardening" in result.stdout or command in (("status",), ("tags",)), command
        assert "Recursion" not in result.stderr and "unexpected" not in result.stderr, command
    doctor = fails(in_vault(root, "doctor"), 5).stdout
    assert "alice/fact/loop.md" in doctor and "alice/fact/self.md" in doctor
    ok(in_vault(root, "store", "fact", "more", "another memory"))
    vault = Vault.open(root, "alice")
    assert {m.key for m in vault.memories()} == {"good", "more"}
    assert {i.path for i in vault.issues} == {"alice/fact/loop.md", "alice/fact/self.md"}
    assert all("alias" in i.reason for i in vault.issues)


def test_a_recursive_alias_through_mcp_is_skipped(root: Path) -> None:
    test_mcp = pytest.importorskip("test_mcp")
    write(root / "alice" / "fact" / "loop.md", "---\nx: &x [*x]\n---\nbody\n")

    async def script(agent) -> dict:
        return {
            "recall": await agent.ok("recall"),
            "list": await agent.ok("list"),
            "search": await agent.ok("search", query="gardening"),
        }

    out = test_mcp.serve(root, script)
    assert "gardening" in out["recall"] and [m["key"] for m in out["list"]] == ["good"] and out["search"]


def _laughs(width: int, depth: int, leaf: str = '"lol"') -> bytes:
    names = string.ascii_lowercase
    lines = ["---", "a: &a [" + ", ".join([leaf] * width) + "]"]
    for i in range(1, depth):
        lines.append(f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * width) + "]")
    return "\n".join([*lines, "---", "body", ""]).encode()


@pytest.mark.parametrize(
    "data",
    [
        _laughs(10, 10),  # a billion values
        _laughs(2, 25),  # 33 million values, a few bytes each
        b"---\na: &a "
        + b'"'
        + b"x" * 1_000_000
        + b'"\nb: ['
        + b", ".join([b"*a"] * 100)
        + b"]\n---\nbody\n",  # 100 MB of text
        b"---\nb: &b {k: "
        + b"v" * 100_000
        + b"}\nc: {"
        + b", ".join(b"k%d: *b" % i for i in range(500))
        + b"}\n---\nx\n",
    ],
    ids=["billion laughs", "deep laughs", "long string", "mapping"],
)
def test_an_alias_expansion_bomb_is_refused_fast(data: bytes) -> None:
    start = time.perf_counter()
    err = parse_error(data)
    assert time.perf_counter() - start < 2.0
    assert "alias" in err.reason


def test_deep_nesting_is_a_parse_error() -> None:
    for data in (
        b"---\nx: " + b"[" * 100_000 + b"]" * 100_000 + b"\n---\nbody\n",
        ("---\n" + "".join(" " * i + "a:\n" for i in range(2000)) + "---\nbody\n").encode(),
        b"---\nx: " + b"[" * 200 + b"]" * 200 + b"\n---\nbody\n",
    ):
        assert parse_error(data).reason


# --- issue 21.14: memfile.toml is valid TOML whatever the names ---------------------------------------------


def test_init_with_a_control_character_in_the_name_writes_valid_toml(tmp_path: Path) -> None:
    target = tmp_path / "v"
    ok(run("init", target, "--mind", "alice"))
    ok(run("init", target, "--mind", "carol", "--name", "evil\x7fname"))
    ok(run("init", target, "--mind", "dave", "--name", 'quote " back \\ tab\t nl\n bell\x07 c1\x85 ls\u2028'))
    tomllib.loads((target / "memfile.toml").read_text(encoding="utf-8"))
    assert ok(in_vault(target, "--mind", "alice", "list")).exit_code == 0
    assert Vault.open(target, "carol").name == "evil\x7fname"
    assert Vault.open(target, "dave").name == 'quote " back \\ tab\t nl\n bell\x07 c1\x85 ls\u2028'.strip()
    fresh = tmp_path / "w"
    ok(run("init", fresh, "--mind", "carol", "--name", "evil\x7fname\x00\x1b[31m"))
    assert Vault.open(fresh).name == "evil\x7fname\x00\x1b[31m"


def test_a_name_that_is_not_unicode_text_is_refused() -> None:
    with pytest.raises(InvalidInput, match="name"):
        render_config("carol", "bad \udcff bytes")
    with pytest.raises(InvalidInput, match="name"):
        mind_section("carol", "\ud800")


def test_a_mind_declared_before_its_folder_gets_no_second_table() -> None:
    from memfile.config import config_with_mind
    from memfile.errors import Conflict

    text = render_config("alice", None) + '\n[minds.carol]\nname = "Carol"\n'
    with pytest.raises(Conflict, match="already declares"):
        config_with_mind(text, "carol", "Caroline")
    assert config_with_mind(text, "carol", None) == text
    added = config_with_mind(text.rstrip("\n"), "dave", "evil\x7f")
    assert tomllib.loads(added)["minds"]["dave"]["name"] == "evil\x7f"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_every_name_round_trips_through_memfile_toml(tmp_path: Path, name: str) -> None:
    for text in (render_config("carol", name), render_config("alice", None) + mind_section("carol", name)):
        data = tomllib.loads(text)
        assert data["minds"]["carol"].get("name", "") == (name if name else "")
        (tmp_path / "memfile.toml").write_text(text, encoding="utf-8")
        assert load_config(tmp_path).display_name("carol") == (name.strip() or "carol")


@pytest.mark.parametrize("category", ["Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs", "Mn", "Lo", "So"])
def test_each_code_point_class_round_trips(category: str) -> None:
    import unicodedata

    chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == category and not 0xD800 <= c <= 0xDFFF][
        :3000
    ]
    name = "x" + "".join(chars) + "x"
    assert tomllib.loads(render_config("carol", name))["minds"]["carol"]["name"] == name


# --- issue 21.15: every bad memfile.toml is "invalid memfile.toml: ..." ----------------------------------

BAD_SETTINGS = {
    "lock nan": ("lock_timeout = nan\n", "lock_timeout"),
    "lock inf": ("lock_timeout = inf\n", "lock_timeout"),
    "lock negative": ("lock_timeout = -1\n", "lock_timeout"),
    "lock zero": ("lock_timeout = 0\n", "lock_timeout"),
    "lock huge int": ("lock_timeout = " + "9" * 400 + "\n", "lock_timeout"),
    "lock text": ('lock_timeout = "10"\n', "lock_timeout"),
    "half-life negative": ("[recall]\nhalf_life_days = -1\n", "half_life_days"),
    "half-life zero": ("[recall]\nhalf_life_days = 0\n", "half_life_days"),
    "half-life huge int": ("[recall]\nhalf_life_days = " + "9" * 400 + "\n", "half_life_days"),
    "half-life inf": ("[recall]\nhalf_life_days = inf\n", "half_life_days"),
    "half-life nan": ("[recall]\nhalf_life_days = nan\n", "half_life_days"),
    "budget negative": ("[recall]\nbudget = -5\n", "budget"),
    "budget float": ("[recall]\nbudget = 2.5\n", "budget"),
    "interval nan": ("[sync]\ninterval = nan\n", "interval"),
    "interval inf": ("[sync]\ninterval = inf\n", "interval"),
    "interval huge int": ("[sync]\ninterval = " + "9" * 400 + "\n", "interval"),
    "interval short": ("[sync]\ninterval = 5\n", "interval"),
    "remote option": ('[sync]\nremote = "--upload-pack=touch PWNED; git-upload-pack"\n', "remote"),
    "remote dash": ('[sync]\nremote = "-x"\n', "remote"),
    "remote control": ('[sync]\nremote = "origin\\u0000x"\n', "remote"),
    "remote newline": ('[sync]\nremote = "origin\\nx"\n', "remote"),
    "remote empty": ('[sync]\nremote = ""\n', "remote"),
    "remote number": ("[sync]\nremote = 5\n", "remote"),
    "autosync text": ('[sync]\nautosync = "yes"\n', "autosync"),
    "sync not a table": ("sync = 5\n", "sync"),
    "recall not a table": ('recall = "fast"\n', "recall"),
    "mcp budget negative": ("[mcp]\nrecall_budget = -1\n", "recall_budget"),
    "mcp budget text": ('[mcp]\nrecall_budget = "none"\n', "recall_budget"),
    "mcp budget float": ("[mcp]\nrecall_budget = 2.5\n", "recall_budget"),
    "mcp budget bool": ("[mcp]\nrecall_budget = true\n", "recall_budget"),
    "default mind bad": ('default_mind = "../bob"\n', "default_mind"),
    "author newline": ('[git]\nauthor_name = "a\\nb"\n', "author_name"),
    "deep nesting": ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
    "deep tables": ("x = " + "{a=" * 100_000 + "1" + "}" * 100_000 + "\n", "nested"),
    "huge int": ("x = 1" + "0" * 5000 + "\n", "memfile.toml"),
    "not toml": ("this is = = not toml\n", "TOML"),
}


@pytest.mark.parametrize(("text", "key"), BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_a_bad_memfile_toml_names_the_key_and_the_allowed_values(root: Path, text: str, key: str) -> None:
    (root / "memfile.toml").write_text(
        text if key == "default_mind" else 'default_mind = "alice"\n' + text, encoding="utf-8"
    )
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and key in result.stderr, result.stderr
    assert "allowed" in result.stderr or "TOML" in result.stderr
    with pytest.raises(InvalidInput, match="invalid memfile.toml"):
        Vault.open(root, "alice")


def test_memfile_toml_that_is_not_utf8_names_the_line(root: Path) -> None:
    (root / "memfile.toml").write_bytes(b'default_mind = "alice"\n[minds.alice]\nname = "Caf\xe9"\n')
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and "UTF-8" in result.stderr and ":3" in result.stderr


def test_memfile_toml_that_is_a_folder_is_named(root: Path) -> None:
    (root / "memfile.toml").unlink()
    (root / "memfile.toml").mkdir()
    result = fails(in_vault(root, "list"), 2)
    assert "invalid memfile.toml" in result.stderr and "folder" in result.stderr
    code, stderr = _run_in(root / "alice", "list")  # found upwards, then named
    assert code == 2 and "invalid memfile.toml" in stderr and "folder" in stderr, stderr


def _run_in(cwd: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "memfile", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    return proc.returncode, proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")
def test_memfile_toml_that_is_a_fifo_never_blocks(root: Path) -> None:
    (root / "memfile.toml").unlink()
    os.mkfifo(root / "memfile.toml")
    for args in (("--vault", str(root), "list"), ("list",)):
        code, stderr = _run_in(root, *args)
        assert code in (2, 7) and "invalid memfile.toml" in stderr and "Traceback" not in stderr, (args, code, stderr)


def test_memfile_toml_that_cannot_be_read_is_named(root: Path) -> None:
    (root / "memfile.toml").unlink()
    (root / "memfile.toml").symlink_to(root / "nowhere.toml")
    result = run("--vault", root, "list")
    assert result.exit_code in (2, 7) and "memfile.toml" in result.stderr, result.stderr


# --- good settings, and the MCP recall budget -------------------------------------------------------------


def config_of(tmp_path: Path, text: str) -> Config:
    (tmp_path / "memfile.toml").write_text(text, encoding="utf-8")
    return load_config(tmp_path)


def test_good_settings_are_read(tmp_path: Path) -> None:
    config = config_of(
        tmp_path,
        "lock_timeout = 2.5\n[recall]\nhalf_life_days = 100000000\nbudget = 0\n"
        '[sync]\nremote = "git@example.com:me/vault.git"\ninterval = 10\n',
    )
    assert config.lock_timeout == 2.5 and config.half_life_days == 1e8 and config.recall_budget is None
    assert config.sync_remote == "git@example.com:me/vault.git" and config.sync_interval == 10.0
    assert config_of(tmp_path, '[sync]\nremote = "/srv/my vault.git"\n').sync_remote == "/srv/my vault.git"
    assert math.isfinite(config_of(tmp_path, "").lock_timeout)


def test_the_mcp_recall_budget(tmp_path: Path) -> None:
    assert config_of(tmp_path, "").mcp_recall_budget == 2000
    assert Config().mcp_recall_budget == 2000
    assert config_of(tmp_path, "[mcp]\nrecall_budget = 500\n").mcp_recall_budget == 500
    assert config_of(tmp_path, "[mcp]\nrecall_budget = 0\n").mcp_recall_budget is None
    assert config_of(tmp_path, "[mcp]\n").mcp_recall_budget == 2000
    with pytest.raises(InvalidInput, match=r"mcp\.recall_budget"):
        config_of(tmp_path, "[mcp]\nrecall_budget = -3\n")
