"""Shared by the benchmark scripts."""

from __future__ import annotations

import compileall
import importlib.util
import math
import statistics
from collections.abc import Sequence
from pathlib import Path


def compile_memfile() -> None:
    """Write memfile's bytecode before timing whole processes, as `pip install` does.

    With PYTHONDONTWRITEBYTECODE=1 (set on some machines) or a fresh editable
    checkout, every `python -m memfile` would otherwise compile the package from
    source first (~40 ms), which no installed copy pays.
    """
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
