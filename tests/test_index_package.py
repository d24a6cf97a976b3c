"""The index package owns its cache: what it pickles, its recovery, and the line between damage and bugs."""

from __future__ import annotations

from pathlib import Path

from memfile import Vault
from memfile.index import INDEX_NAME


def index_dir(vault: Vault) -> Path:
    return vault.root / ".memfile" / "index" / vault.mind


def test_the_pickled_classes_live_where_every_index_names_them(vault: Vault) -> None:
    """An index's TOC names its analyzer and formats by import path: they are read back from there."""
    from whoosh import index

    from memfile.index.persisted import PICKLED

    assert {cls.__module__ for cls in PICKLED} == {"memfile.index.persisted"}
    vault.store("fact", "door", "The door code is 1234")
    assert [hit.memory.key for hit in vault.search("door code")] == ["door"]
    ix = index.open_dir(str(index_dir(vault)), indexname=INDEX_NAME)  # unpickles the stored schema
    text = ix.schema["text"]
    assert (type(text.analyzer).__module__, type(text.analyzer).__name__) == ("memfile.index.persisted", "MemfileAnalyzer")
    assert {type(ix.schema[name].format) for name in ("text", "path")} <= set(PICKLED)
    ix.close()
