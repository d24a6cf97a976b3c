"""Shared by the benchmark scripts."""

from __future__ import annotations

import compileall
import importlib.util
import math
import os
import statistics
from collections.abc import Sequence
from pathlib import Path


def installed_memfile() -> None:
    """Make every `python -m memfile` a benchmark starts run the memfile this Python imports, compiled.

    - `python -m` puts the current folder first on `sys.path`. Run from the
      project root, it would import the source folder `memfile/` instead of
      the installed copy, and with PYTHONDONTWRITEBYTECODE=1 (set on some
      machines) compile it from source in every process: 80 to 130 ms of each
      process figure at 10,000 memories, measured 2026-12-01. PYTHONSAFEPATH=1
      (Python 3.11) keeps the current folder off `sys.path` in every process
      started from here on.
    - The bytecode is written first, as `pip install` does: a fresh editable
      checkout would otherwise compile the package in every process as well.
    """
    os.environ["PYTHONSAFEPATH"] = "1"
    spec = importlib.util.find_spec("memfile")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("memfile is not importable by this Python; run with the project's venv")
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(Path(folder), quiet=1)


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def fmt_ms(v: float | None, fine: bool = False) -> str:
    """Milliseconds for a table: no decimals from 100, one below (two below 10 with `fine`)."""
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}" if fine and v < 10 else f"{v:,.1f}"


def print_columns(head: Sequence[str], lines: Sequence[Sequence[str]], right: set[int], notes: list[str]) -> None:
    """A plain-text table (columns in `right` right-aligned), then the notes."""
    widths = [max(len(head[i]), *(len(line[i]) for line in lines)) for i in range(len(head))]

    def fmt(cols: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))

    print()
    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line))
    if notes:
        print("\nnotes:")
        print("\n".join(notes))
