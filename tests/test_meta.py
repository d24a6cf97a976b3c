"""Meta-tests: the public exit codes, the import layering, the pinned Whoosh, docs that match the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memfile import errors
from memfile.cli import main

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "memfile"
README = (REPO / "README.md").read_text(encoding="utf-8")

PINNED_EXIT_CODES = {0: "success", 1: "unexpected", 2: "bad input", 3: "not found", 4: "conflict",
                     5: "check found problems", 6: "git", 7: "not a vault", 8: "resolve"}


def test_exit_code_table_is_pinned() -> None:
    assert sorted(errors.EXIT_CODES) == list(range(9))
    for code, words in PINNED_EXIT_CODES.items():
        assert words in errors.EXIT_CODES[code]
    assert errors.InvalidInput.exit_code == 2
    assert errors.NotFound.exit_code == 3
    assert errors.Conflict.exit_code == errors.LockTimeout.exit_code == 4
    assert errors.GitError.exit_code == 6
    assert errors.NotAVault.exit_code == 7


def test_readme_documents_every_exit_code() -> None:
    table = README.split("## Exit codes", 1)[1]
    for code, words in PINNED_EXIT_CODES.items():
        assert re.search(rf"^\| {code} \| .*{words}", table, re.MULTILINE | re.IGNORECASE), code


# Which memfile modules each module may import: faces -> watch -> vault -> parts -> core.
CORE = {"errors", "model", "paths", "fileformat", "text"}
PARTS = {"files", "index", "gitstore", "recall", "config", "reports"}
LAYERS = {
    "errors": set(), "model": {"errors"}, "paths": {"errors", "model"}, "fileformat": {"errors", "model", "paths"},
    "text": set(),
    **{part: CORE for part in PARTS},
    # The index is a package (memfile/index/): its own layering test is in test_index_package.py.
    # Vault is split in two modules: writes.py holds its write methods (a mixin).
    "merge": CORE, "sync": CORE | PARTS | {"merge"},
    # The store queue sits on the file primitives; only the write half of Vault uses it.
    "batch": CORE | {"files"}, "swap": CORE | {"files"},
    "writes": CORE | PARTS | {"merge", "sync", "batch", "swap"}, "history": CORE | PARTS,
    "doctor": CORE | PARTS | {"batch"}, "recalling": CORE | PARTS | {"writes"},
    "vault": CORE | PARTS | {"writes", "history", "sync", "doctor", "recalling"}, "watch": CORE | PARTS | {"vault"},
    "cli": CORE | PARTS | {"vault", "watch", "cli_git", "mcp_server"}, "cli_git": {"cli", "sync", "errors"}, "mcp_server": CORE | PARTS | {"vault", "watch"},
    "__init__": CORE | PARTS | {"vault", "watch"}, "__main__": {"cli", "files"},
}
# Each third-party library lives in exactly one module.
THIRD_PARTY_HOME = {"click": {"cli", "cli_git"}, "whoosh": set(), "git": {"gitstore"},
                    "frontmatter": {"fileformat"}, "yaml": {"fileformat"}, "ruamel": {"fileformat"},
                    "watchdog": {"watch"}, "mcp": {"mcp_server"}}


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(memfile modules, top-level third-party packages) imported anywhere in a module."""
    internal, external = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            internal |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            external.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            external |= {a.name.split(".")[0] for a in node.names}
    return internal, external


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.stem)
def test_imports_point_down_and_libraries_stay_home(path: Path) -> None:
    internal, external = _imports(path)
    assert internal <= LAYERS[path.stem], f"{path.stem} imports upward: {internal - LAYERS[path.stem]}"
    for library, home in THIRD_PARTY_HOME.items():
        if library in external:
            assert path.stem in home, f"{library} is imported in {path.stem}, it belongs in {home}"


def test_modules_stay_small_and_documented() -> None:
    for path in PACKAGE.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert len(source.splitlines()) <= 800, path.name  # size follows cohesion (STYLE.md)
        assert ast.get_docstring(ast.parse(source)), f"{path.name} has no module docstring"


def test_whoosh_is_the_pinned_fork() -> None:
    import whoosh

    assert whoosh.versionstring() == "3.54.0"


def _commands() -> dict[str, click.Command]:
    return dict(main.commands)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_has_help_with_an_example_and_is_in_the_readme(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert f"memfile {name}" in README


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if "pytest" in line)
    assert command in README
    assert "sample_vault recall" in README.split("## ", 1)[0]
