"""What a terminal is shown (memfile.terminal): control characters as visible escapes, memfile's own
bold and progress bar intact, pipes untouched. Real processes on a real pseudo-terminal; the
through-the-server half is in tests/test_cli_fast_path.py."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import click
import pytest
from helpers import read_terminal
from hypothesis import given
from hypothesis import strategies as st

from memfile import Vault
from memfile.terminal import Shown, shown, unshown, wrapped

#: Every character a terminal may be given as it is: not a control, or tab and newline.
ALLOWED_CONTROLS = {"\t", "\n"}


def controls(text: str) -> set[str]:
    """The control characters (C0, DEL, C1) left in `text`, but for memfile's own bold and CRLF."""
    text = text.replace("\x1b[1m", "").replace("\x1b[0m", "").replace("\r\n", "\n")
    return {c for c in text if (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F) and c not in ALLOWED_CONTROLS}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain text", "plain text"),
        ("tab\there\nand a line", "tab\there\nand a line"),
        ("CRLF line\r\nnext", "CRLF line\r\nnext"),
        ("over\rwritten", "over\\x0dwritten"),
        ("\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07"),
        ("\x1b[2J\x1b[8mhidden", "\\x1b[2J\\x1b[8mhidden"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\x1b[0m"),
        ("\x1b[1mbold\x1b[0m", "\x1b[1mbold\x1b[0m"),
        ("C1 \x9b31m and \x85", "C1 \\x9b31m and \\x85"),
        ("NUL \x00 DEL \x7f", "NUL \\x00 DEL \\x7f"),
        ("Nhà hàng ở Hà Nội, ร้านอาหาร, 北京", "Nhà hàng ở Hà Nội, ร้านอาหาร, 北京"),
    ],
)
def test_shown_escapes_controls_and_keeps_the_rest(text: str, expected: str) -> None:
    assert shown(text) == expected


@given(st.text(alphabet=st.characters(codec="utf-8")) | st.text(alphabet="\x1b[01m;]\r\n\x07\x9bab\\"))
def test_shown_leaves_no_control_and_only_adds_escapes(text: str) -> None:
    out = shown(text)
    assert not controls(out)
    assert out == text if not controls(text) else len(out) > len(text)


def test_text_and_bytes_written_through_shown_are_escaped() -> None:
    stream = io.StringIO()
    click.echo("title \x1b]0;x\x07", file=Shown(stream))  # type: ignore[arg-type]
    click.echo("bytes of Hà Nội \x1b]52;c;eA==\x07".encode(), file=Shown(stream))  # type: ignore[arg-type]
    assert stream.getvalue() == "title \\x1b]0;x\\x07\nbytes of Hà Nội \\x1b]52;c;eA==\\x07\n"


def test_only_a_terminal_is_wrapped_and_unshown_gives_it_back() -> None:
    pipe = io.StringIO()
    assert wrapped(pipe) is pipe and unshown(pipe) is pipe
    read, write = pty.openpty()
    try:
        with os.fdopen(write, "w", closefd=False) as tty:
            shown_tty = wrapped(tty)
            assert isinstance(shown_tty, Shown) and unshown(shown_tty) is tty and wrapped(shown_tty) is shown_tty
    finally:
        os.close(read)
        os.close(write)


def on_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """`python -m memfile ARGS` with stdout and stderr on a pseudo-terminal: what the terminal got."""
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "memfile", *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env
        )
    finally:
        os.close(slave)
    out = read_terminal(master)
    process.wait(60)
    return out


@pytest.fixture
def hostile(vault: Vault) -> Vault:
    """A vault whose mind's display name, a tag and a memory hold control characters."""
    config = vault.root / "memfile.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(f'name = "{vault.name}"', 'name = "Mind\\u001b]0;t\\u0007"')
    )
    vault.store("note", "hostile", "Paste \x1b]52;c;cHduZWQ=\x07 here", tags=["t\x1b[8mx"])
    return vault


def test_show_recall_and_list_on_a_terminal_escape_what_the_memory_holds(hostile: Vault) -> None:
    env = os.environ | {"MEMFILE_NO_SERVER": "1"}
    root = str(hostile.root)
    for args in (["show", "note/hostile"], ["recall"], ["list", "--tag", "t\x1b[8mx"], ["tags"]):
        out = on_terminal(["--vault", root, *args], env).decode()
        assert not controls(out), (args, out)
    recalled = on_terminal(["--vault", root, "recall"], env).decode()
    assert "Mind: Mind\\x1b]0;t\\x07" in recalled and "Paste \\x1b]52;c;cHduZWQ=\\x07 here" in recalled
    piped = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", root, "recall"], env=env, capture_output=True, check=True
    )
    assert b"Paste \x1b]52;c;cHduZWQ=\x07 here" in piped.stdout  # a pipe (an agent) gets it as stored
    shown_piped = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", root, "show", "note/hostile"], env=env, capture_output=True
    )
    assert b"tags: t\x1b[8mx\n" in shown_piped.stdout  # not stripped by click on its way to a pipe


def test_an_error_on_a_terminal_is_escaped_and_the_progress_bar_still_draws(hostile: Vault, tmp_path: Path) -> None:
    env = os.environ | {"MEMFILE_NO_SERVER": "1"}
    root = str(hostile.root)
    bad = hostile.mind_dir / "note" / "bad\x1b]0;t\x07.md"
    bad.write_text("---\npriority: [unclosed\n---\nbroken\n", encoding="utf-8")
    out = on_terminal(["--vault", root, "reindex"], env)
    assert b"\r\x1b[?25lindexing" in out and b"100%" in out  # click's bar: its carriage returns and cursor codes
    assert b"bad\\x1b]0;t\\x07.md" in out and b"bad\x1b]" not in out  # the file's name, in the warning


def test_import_and_doctor_draw_their_progress_on_a_terminal_as_reindex_does(vault: Vault, tmp_path: Path) -> None:
    """A 10,000-memory import (33 s) and doctor (6.6 s) said nothing while they worked: a bar per step now."""
    env = os.environ | {"MEMFILE_NO_SERVER": "1"}
    for n in range(5):
        vault.store("fact", f"f{n}", f"fact number {n}")
    vault.export(tmp_path / "export.jsonl")
    target = Vault.init(tmp_path / "target", "michael", "Michael's Mind")
    out = on_terminal(["--vault", str(target.root), "import", str(tmp_path / "export.jsonl")], env)
    for step in (b"checking", b"writing", b"indexing"):
        assert b"\r\x1b[?25l" + step in out, out
    assert b"100%" in out
    assert b"imported into mind michael" in out
    out = on_terminal(["--vault", str(target.root), "doctor", "--fix"], env)
    assert b"\r\x1b[?25lindexing" in out and b"\r\x1b[?25lchecking" in out and b"100%" in out, out
    assert b"no problems" in out
