"""Shared by the benchmark scripts."""

from __future__ import annotations

import compileall
import importlib.util
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
