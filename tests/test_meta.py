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
    # The index is a package (memfile/index/), checked by prefix below.
    # Vault is split in two modules: writes.py holds its write methods (a mixin).
    "merge": CORE, "sync": CORE | PARTS | {"merge"},
    # The store queue sits on the file primitives; only the write half of Vault uses it.
    "batch": CORE | {"files"}, "swap": CORE | {"files"},
    "writes": CORE | PARTS | {"merge", "sync", "batch", "swap"}, "history": CORE | PARTS,
    "doctor": CORE | PARTS | {"batch"}, "recalling": CORE | PARTS | {"writes"},
    "vault": CORE | PARTS | {"writes", "history", "sync", "doctor", "recalling"}, "watch": CORE | PARTS | {"vault"},
    "cli": CORE | PARTS | {"vault", "watch", "cli_git", "mcp_server"}, "cli_git": {"cli", "sync", "errors"}, "mcp_server": CORE | PARTS | {"vault", "watch"},
    "__init__": CORE | PARTS | {"vault", "watch"}, "__main__": {"cli", "config"},
}
# Each third-party library lives in exactly one module.
THIRD_PARTY_HOME = {"click": {"cli", "cli_git"}, "whoosh": set(), "sqlite3": set(), "git": {"gitstore"},
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


def _absolute_imports(path: Path, root: Path = REPO) -> tuple[set[str], set[str]]:
    """(memfile modules by absolute name, top-level third-party packages) imported anywhere in a module."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])  # memfile, memfile.index, ...
    internal, external = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
            if node.module:
                internal.add(f"{base}.{node.module}")
            else:
                internal |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            (internal if node.module.split(".")[0] == "memfile" else external).add(
                node.module if node.module.startswith("memfile") else node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                (internal if alias.name.split(".")[0] == "memfile" else external).add(
                    alias.name if alias.name.startswith("memfile") else alias.name.split(".")[0])
    return internal, external


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


#: The core: what every part may import (memfile.index sits on these alone).
CORE_MODULES = {f"memfile.{name}" for name in ("errors", "model", "paths", "fileformat", "config", "text", "files")}
ALL_MODULES = sorted(PACKAGE.rglob("*.py"))


def _beyond_the_core(internal: set[str]) -> set[str]:
    """What an index module imports besides its own package and the core (`from ..x import name` counts as x)."""
    return {name for name in internal if not name.startswith("memfile.index.") and name != "memfile.index"
            and name not in CORE_MODULES and name.rsplit(".", 1)[0] not in CORE_MODULES}


@pytest.mark.parametrize("path", sorted((PACKAGE / "index").glob("*.py")), ids=lambda p: p.stem)
def test_the_index_package_imports_only_the_core_and_itself(path: Path) -> None:
    outside = _beyond_the_core(_absolute_imports(path)[0])
    assert not outside, f"{_module_name(path)} imports {outside}: the index sits on the core alone (STYLE.md)"


@pytest.mark.parametrize("path", ALL_MODULES, ids=_module_name)
def test_whoosh_and_sqlite3_are_imported_only_in_the_index_package(path: Path) -> None:
    _, external = _absolute_imports(path)
    if external & {"whoosh", "sqlite3"}:
        assert _module_name(path).startswith("memfile.index"), \
            f"{_module_name(path)} imports {external & {'whoosh', 'sqlite3'}}: they belong in memfile/index/"


def test_the_layering_rules_can_fail(tmp_path: Path) -> None:
    """The rules above catch imports that break them (they state a design, not today's imports)."""
    probe = tmp_path / "memfile" / "index" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..recall import ORDER\nfrom .. import vault\nfrom ..errors import NotFound\n"
                     "from .store import Store\nimport memfile.git\nimport sqlite3\n", encoding="utf-8")
    internal, external = _absolute_imports(probe, tmp_path)
    assert _beyond_the_core(internal) == {"memfile.recall", "memfile.vault", "memfile.git"}
    assert "sqlite3" in external


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
