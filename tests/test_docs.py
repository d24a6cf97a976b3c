"""The documentation holds: a short README, links that lead somewhere, and a CLI reference generated from --help."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from helpers import REPO

from memfile.cli import main as cli

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
GENERATOR = REPO / "scripts" / "gen_cli_doc.py"
README_LIMIT = 12_000  # characters (issue 22): the rest lives in docs/


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_doc", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _strip_fences(text: str) -> str:
    """Markdown without its fenced code blocks (a `#` there is a comment, not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _prose(text: str) -> str:
    """Markdown without fenced code blocks and inline code, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", _strip_fences(text))


def _links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8")))


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings (lowercase, punctuation dropped, spaces to hyphens)."""
    seen: dict[str, int] = {}
    anchors = set()
    for title in re.findall(r"^#{1,6} +(.+?) *#*$", _strip_fences(page.read_text(encoding="utf-8")), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _command_paths(command: click.Command, path: str) -> list[str]:
    paths = [path]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            paths += _command_paths(sub, f"{path} {name}")
    return paths


def test_readme_is_short() -> None:
    length = len(README.read_text(encoding="utf-8"))
    assert length <= README_LIMIT, f"README.md has {length} characters; move detail to docs/ (limit {README_LIMIT})"


def test_the_docs_pages_exist_and_the_readme_links_each() -> None:
    pages = {p.name for p in DOCS.glob("*.md")}
    expected = {"format", "recall", "search", "sync", "agents", "internals", "benchmarks", "development", "cli"}
    assert {f"{name}.md" for name in expected} <= pages
    linked = {link.split("#")[0] for link in _links(README)}
    assert {f"docs/{name}" for name in pages} <= linked, "README.md should link every page of docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_anchor_that_exist(page: Path) -> None:
    broken = []
    for link in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # https:, mailto:: not ours to check
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading with anchor #{anchor} in {path.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


#: A path under tests/ as a page, a script or CI names it (up to `::test_name`, a glob's `*`, or punctuation).
TEST_PATH = re.compile(r"\btests/[\w./-]*\w")


def test_every_test_path_named_in_the_docs_ci_and_scripts_exists() -> None:
    """A test file moved or folded into another leaves no page, CI step, benchmark or script naming its old place."""
    places = [
        *PAGES,
        REPO / ".ci" / "run",
        *sorted((REPO / "benchmarks").glob("*.py")),
        *sorted(GENERATOR.parent.glob("*.py")),
    ]
    named = [(place, path) for place in places for path in TEST_PATH.findall(place.read_text(encoding="utf-8"))]
    assert any(path == "tests/index" for _, path in named), "the plain path's run in .ci/run names tests/index"
    missing = [f"{place.relative_to(REPO)}: {path}" for place, path in named if not (REPO / path).exists()]
    assert missing == [], missing


def test_the_link_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](#title) [c](#nowhere) `[d](skipped.md)`\n", encoding="utf-8")
    assert _links(page) == ["missing.md", "#title", "#nowhere"]
    assert "title" in _anchors(page) and "nowhere" not in _anchors(page)


def test_cli_reference_is_what_the_generator_writes_now() -> None:
    current = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert current == _generator().render(), "docs/cli.md is stale: run python scripts/gen_cli_doc.py"


def test_cli_reference_documents_every_command_with_its_help() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## (.+)$", text, re.MULTILINE))
    for path in _command_paths(cli, "memfile"):
        assert path in headings, f"docs/cli.md has no section for {path}"
        assert f"Usage: {path} [OPTIONS]" in text, path


def test_generator_check_fails_on_a_stale_page_and_ignores_the_terminal(tmp_path: Path) -> None:
    generator = _generator()
    generator.TARGET = tmp_path / "cli.md"
    assert generator.main(["--check"]) == 1  # missing
    generator.TARGET.write_text(generator.render().replace("Print one memory.", "Print a memory."), encoding="utf-8")
    assert generator.main(["--check"]) == 1  # stale
    assert generator.main([]) == 0 and generator.main(["--check"]) == 0
    # A narrow terminal and another vault in the environment change nothing.
    env = {"COLUMNS": "33", "LINES": "10", "MEMFILE_VAULT": str(tmp_path), "MEMFILE_MIND": "x", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_readme_python_example_runs_and_leaves_sample_vault_untouched(tmp_path: Path) -> None:
    """The example stores a memory: on a copy, never into sample_vault (no nested .git, no stray memory)."""
    code = README.read_text(encoding="utf-8").split("## Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    before = _tree(REPO / "sample_vault")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "project/synapse_status" in proc.stdout and "v1.6.0 docs in progress" in proc.stdout
    assert _tree(REPO / "sample_vault") == before


def test_the_servers_error_table_names_each_library_error_under_the_status_it_answers() -> None:
    """Issue 39 item 17: docs/server.md's table of error answers names every library error the HTTP API
    answers (SecretFound among them) in the row of the status `memfile.server.errors` gives it."""
    from memfile.config import AmbiguousMind
    from memfile.errors import (
        AmbiguousRef,
        Busy,
        Conflict,
        GitBusy,
        GitDiskFull,
        InvalidInput,
        LockTimeout,
        NotFound,
        Refused,
    )
    from memfile.secretscan import SecretFound
    from memfile.server.errors import KeysUnusable, status_of

    rows: dict[int, list[str]] = {}
    for line in (DOCS / "server.md").read_text(encoding="utf-8").splitlines():
        if row := re.match(r"\| (\d{3}) \| (.*?) \|", line):
            rows.setdefault(int(row.group(1)), []).extend(re.findall(r"`(\w+)`", row.group(2)))
    answered = (SecretFound, Refused, InvalidInput, AmbiguousRef, AmbiguousMind, NotFound, Conflict, GitDiskFull)
    for error in (*answered, Busy, GitBusy, LockTimeout, KeysUnusable):
        status = status_of(error.__new__(error))
        assert error.__name__ in rows.get(status, []), (error.__name__, status, rows)
