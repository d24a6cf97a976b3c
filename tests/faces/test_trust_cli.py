"""The command line on hostile or unusual input (issue 21): bytes that are not UTF-8, a terminal that
cannot show every character, no content at a terminal, no editor, the install hints, and one line
about unreadable files instead of one per file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BROKEN, REPO, fails, in_vault, ok, run, write

from memfile import Vault

LATIN1 = b"caf\xe9"  # "café" as a Latin-1 terminal sends it
ESCAPED = LATIN1.decode("utf-8", "surrogateescape")  # how Python hands such an argument to click


def memfile(
    *args: str | bytes, stdin: bytes | int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`memfile ARGS` as a process of its own (arguments may be raw bytes)."""
    return subprocess.run(
        [sys.executable, "-m", "memfile", *args],
        input=stdin if isinstance(stdin, bytes) else None,
        stdin=stdin if isinstance(stdin, int) else None,
        capture_output=True,
        env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})},
        check=False,
    )


def refused(done: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, (done.returncode, err)
    assert "Traceback" not in err and "unexpected error" not in err
    return err


# --- issue 21 item 13: bytes that are not UTF-8 ------------------------------------------------------


def test_arguments_that_are_not_utf8_are_refused_by_name(vault: Vault) -> None:
    root = str(vault.root)
    assert "not valid UTF-8" in refused(memfile("--vault", root, "store", "fact", "k", LATIN1))
    assert "not valid UTF-8" in refused(memfile("--vault", root, "store", "fact", "k", "x", "--tag", LATIN1))
    assert "not valid UTF-8" in refused(memfile("--vault", root, "recall", "--query", LATIN1))
    assert not (vault.root / "michael" / "fact" / "k.md").exists()


def test_stdin_that_is_not_utf8_is_refused(vault: Vault) -> None:
    err = refused(memfile("--vault", str(vault.root), "store", "fact", "k", stdin=b"menu: " + LATIN1 + b"\n"))
    assert "stdin" in err and "UTF-8" in err
    assert not (vault.root / "michael" / "fact" / "k.md").exists()


def test_init_with_a_name_that_is_not_utf8_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "v"
    refused(memfile("init", str(target), "--mind", "carol", "--name", LATIN1))
    assert not target.exists()


def test_the_api_refuses_lone_surrogates_in_content_and_tags(vault: Vault) -> None:
    from memfile.errors import InvalidInput

    with pytest.raises(InvalidInput, match="content"):
        vault.store("fact", "k", "bad \ud800 text")
    with pytest.raises(InvalidInput):
        vault.store("fact", "k", "fine", tags=["bad\udce9"])
    fails(in_vault(vault.root, "store", "fact", "k", ESCAPED), 2)


def test_a_latin1_terminal_gets_escapes_instead_of_an_error(vault: Vault) -> None:
    vault.store("fact", "pho", "Nhà hàng phở, ăn ngon", tags=["food"])
    for args in (["show", "fact/pho"], ["search", "pho"], ["recall"], ["list"]):
        done = memfile("--vault", str(vault.root), *args, env={"PYTHONIOENCODING": "latin-1"})
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)
        if args[0] != "list":  # list shows no content
            assert b"ph\\u1edf" in done.stdout or "phở".encode() in done.stdout, args  # escaped, or UTF-8 bytes


# --- issue 21 item 19: what to pass instead of `None` -------------------------------------------------


def test_store_at_a_terminal_without_content_says_what_to_pass(vault: Vault) -> None:
    leader, follower = os.openpty()
    try:
        err = refused(memfile("--vault", str(vault.root), "store", "note", "k", stdin=follower))
    finally:
        os.close(leader)
        os.close(follower)
    assert "None" not in err and "CONTENT" in err and "stdin" in err


def test_edit_without_an_editor_says_to_set_editor(vault: Vault, tmp_path: Path) -> None:
    vault.store("fact", "k", "text")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git",):
        os.symlink(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip(), bare / tool)
    result = fails(
        run("--vault", vault.root, "edit", "fact/k", env={"PATH": str(bare), "EDITOR": None, "VISUAL": None}), 2
    )
    assert "None" not in result.stderr and "EDITOR=" in result.stderr


# --- issue 21 item 20: the distribution name ----------------------------------------------------------


def test_install_hints_name_a_distribution_that_is_memfiles() -> None:
    import tomllib

    from memfile import cli, cli_serve

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == cli.DISTRIBUTION == "memfile-vault"
    assert "pip install 'memfile-vault[mcp]'" in (cli_serve.mcp.help or "")
    wrong = re.compile(r"(?<![-\w])memfile\[|install[ ]memfile(?![-\w])")  # `memfile` on PyPI: another project
    places = [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("memfile/**/*.py"), *REPO.glob("tests/**/*.py")]
    found = [f"{p.relative_to(REPO)}: {m[0]}" for p in places for m in wrong.finditer(p.read_text(encoding="utf-8"))]
    assert found == [], "docs, docstrings and messages name the distribution memfile-vault"
    assert ok(run("--version")).stdout.startswith("memfile, version")


# --- issue 21 item 23: one line about unreadable files ------------------------------------------------


def test_reads_print_one_line_about_several_unreadable_files(vault: Vault) -> None:
    vault.store("fact", "good", "a good memory about deploys")
    write(vault.root / "michael" / "fact" / "broken1.md", BROKEN)
    write(vault.root / "michael" / "fact" / "broken2.md", BROKEN)
    for args in (["search", "deploys"], ["list"], ["recall"]):
        result = ok(in_vault(vault.root, *args))
        warnings = [line for line in result.stderr.splitlines() if "warning" in line]
        assert warnings == ["memfile: warning: 2 files cannot be read and are skipped; see: memfile doctor"], args
    doctor = in_vault(vault.root, "doctor")
    assert "broken1.md" in doctor.stdout + doctor.stderr and "broken2.md" in doctor.stdout + doctor.stderr


def test_status_lists_every_unreadable_file_with_its_reason(vault: Vault) -> None:
    write(vault.root / "michael" / "fact" / "broken1.md", BROKEN)
    write(vault.root / "michael" / "fact" / "broken2.md", BROKEN)
    assert "2 files cannot be read" in ok(in_vault(vault.root, "list")).stderr  # the read that finds them
    result = ok(in_vault(vault.root, "status"))
    assert "Unreadable (skipped; memfile never changes them): 2" in result.stdout
    assert "michael/fact/broken1.md:4:" in result.stdout and "michael/fact/broken2.md:4:" in result.stdout
    assert "warning" not in result.stderr  # listed once, on stdout
