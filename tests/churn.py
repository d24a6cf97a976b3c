"""Random churn of a long-lived Vault, for the tests of what is kept across Whoosh searchers
(tests/test_segment_postings.py, tests/test_segment_memories.py), and a way to call under a plain switch."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from helpers import write

from memfile import Vault
from memfile.errors import NotFound

VOCABULARY = "alpha bravo charlie delta echo foxtrot golf hotel".split()
TAGS = ["red", "blue"]


def body(r: random.Random) -> str:
    return " ".join(r.choice(VOCABULARY) for _ in range(r.randint(1, 25)))


def random_changes(vault: Vault, r: random.Random, count: int, keys: list[str], hand_edits: bool = False) -> None:
    """New keys, overwrites (a deletion in an old segment), forgets, supersedes and, with `hand_edits`,
    notes a person writes by hand (the next search indexes them)."""
    for _ in range(count):
        roll = r.random() * (1.0 if hand_edits else 0.85)
        if roll < 0.3 or not keys:
            key = f"m{len(keys) + r.randint(0, 10_000):05d}"
            vault.store("note", key, body(r), tags=r.sample(TAGS, r.randint(0, 2)))
            keys.append(key)
        elif roll < 0.55:
            vault.store("note", r.choice(keys), body(r))
        elif roll < 0.7:
            key = keys.pop(r.randrange(len(keys)))
            try:
                vault.forget(f"note/{key}")
            except NotFound:  # forgotten before under another draw
                pass
        elif roll < 0.85:
            key = f"s{r.randint(0, 10_000):05d}"
            vault.store("note", key, body(r), supersedes=f"note/{r.choice(keys)}")
            keys.append(key)
        else:
            key = f"h{r.randint(0, 10_000):05d}"
            write(vault.mind_dir / "note" / f"{key}.md", body(r) + "\n")
            keys.append(key)


def under_plain(monkeypatch: pytest.MonkeyPatch, tricks: str) -> Callable[..., Any]:
    """A caller of functions with MEMFILE_PLAIN=`tricks` set for the call only (those tricks' plain path)."""

    def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setenv("MEMFILE_PLAIN", tricks)
        try:
            return function(*args, **kwargs)
        finally:
            monkeypatch.delenv("MEMFILE_PLAIN")

    return call
