"""The index package owns its cache: what it pickles, its recovery, and the line between damage and bugs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import index_dir, run

from memfile import Vault
from memfile.config import plain
from memfile.index import CATALOG_NAME, INDEX_NAME
from memfile.index.persisted import MemfileAnalyzer, schema


def test_the_pickled_classes_live_where_every_index_names_them(vault: Vault) -> None:
    """An index's TOC names its analyzer and formats by import path: they are read back from there."""
    from whoosh import index

    from memfile.index.persisted import PICKLED

    assert {cls.__module__ for cls in PICKLED} == {"memfile.index.persisted"}
    vault.store("fact", "door", "The door code is 1234")
    assert [hit.memory.key for hit in vault.search("door code")] == ["door"]
    ix = index.open_dir(str(index_dir(vault.root, vault.mind)), indexname=INDEX_NAME)  # unpickles the stored schema
    text = ix.schema["text"]
    assert (type(text.analyzer).__module__, type(text.analyzer).__name__) == (
        "memfile.index.persisted",
        "MemfileAnalyzer",
    )
    assert {type(ix.schema[name].format) for name in ("text", "path")} <= set(PICKLED)
    ix.close()


# --- the error net: damage is rebuilt, a bug in memfile is not taken for damage ----------------------


def index_files(vault: Vault) -> dict[str, bytes]:
    folder = index_dir(vault.root, vault.mind)
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.endswith("WRITELOCK")}


@pytest.fixture
def stored(vault: Vault) -> Vault:
    vault.store("fact", "door", "The door code is 1234")
    vault.store("fact", "wifi", "The wifi password is hunter2")
    assert [hit.memory.key for hit in vault.search("door")] == ["door"]
    (vault.mind_dir / "fact" / "door.md").write_text("The door code is 5678, changed by hand.\n", encoding="utf-8")
    vault.close()
    return vault


def broken_document(*args: object, **kwargs: object) -> dict[str, object]:
    raise AttributeError("'Memory' object has no attribute 'headline' (a bug in memfile)")


def broken_analyzer(self: object, *args: object, **kwargs: object) -> object:
    raise AttributeError("a bug in memfile's analyzer, called from inside Whoosh")


@pytest.mark.parametrize(
    "command", [["search", "door"], ["list"], ["recall"], ["store", "fact", "mail", "Mail at noon"]]
)
@pytest.mark.parametrize("bug", ["document", "analyzer"])
def test_a_bug_in_indexing_code_reaches_the_user_and_leaves_the_index_alone(
    stored: Vault, monkeypatch: pytest.MonkeyPatch, command: list[str], bug: str
) -> None:
    from memfile.index import persisted, store

    before = index_files(stored)
    if bug == "document":
        monkeypatch.setattr(store, "_document", broken_document)
    else:
        monkeypatch.setattr(persisted.IndexPositions, "word_values", broken_analyzer)
    result = run("--debug", "--vault", stored.root, *command)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "Traceback (most recent call last)" in result.stderr and "AttributeError" in result.stderr
    assert "damaged" not in result.stderr and "cannot be used" not in result.stderr
    plain = run("--vault", stored.root, *command)
    assert plain.exit_code == 1 and "unexpected error" in plain.stderr and "Traceback" not in plain.stderr
    assert index_dir(stored.root, stored.mind).is_dir()
    after = index_files(stored)
    assert {name for name in before if not name.endswith(("-wal", "-shm"))} <= set(after)  # nothing deleted
    monkeypatch.undo()
    assert [hit.memory.key for hit in Vault.open(stored.root).search("door")] == ["door"]  # the hand edit, now


def test_a_bug_in_indexing_code_reaches_the_python_api_as_itself(
    stored: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memfile.index import store

    monkeypatch.setattr(store, "_document", broken_document)
    vault = Vault.open(stored.root)
    with pytest.raises(AttributeError, match="a bug in memfile"):
        vault.search("door")
    with pytest.raises(AttributeError, match="a bug in memfile"):
        vault.list()
    assert vault.notices == []


def test_a_segment_garbled_in_place_is_rebuilt_with_a_notice(stored: Vault) -> None:
    """Same size, other bytes: only Whoosh decoding them finds the damage."""
    vault = Vault.open(stored.root)
    vault.refresh()
    vault.close()
    segments = [
        p for p in index_dir(stored.root, stored.mind).glob(f"{INDEX_NAME}_*") if not p.name.endswith("WRITELOCK")
    ]
    for segment in segments:
        segment.write_bytes(
            bytes(range(256)) * (segment.stat().st_size // 256) + b"\xff" * (segment.stat().st_size % 256)
        )
    result = run("--vault", stored.root, "search", "--json", "door")
    assert result.exit_code == 0, result.stderr
    assert "the index was damaged" in result.stderr
    assert '"door"' in result.stdout and "5678" in result.stdout


def test_a_garbled_catalog_is_rebuilt_through_the_python_api(stored: Vault) -> None:
    vault = Vault.open(stored.root)
    vault.refresh()
    vault.close()
    catalog = index_dir(stored.root, stored.mind) / CATALOG_NAME
    for extra in ("-wal", "-shm"):
        Path(f"{catalog}{extra}").unlink(missing_ok=True)
    data = bytearray(catalog.read_bytes())
    data[100:4096] = b"\x5a" * (4096 - 100)  # the header's tail and the first page: SQLite reads it as damage
    catalog.write_bytes(bytes(data))
    vault = Vault.open(stored.root)
    assert sorted(m.key for m in vault.memories()) == ["door", "wifi"]
    assert [hit.memory.key for hit in vault.search("hunter2")] == ["wifi"]


def test_a_memory_row_garbled_in_the_catalog_is_damage_not_a_bug(stored: Vault) -> None:
    import sqlite3

    vault = Vault.open(stored.root)
    vault.refresh()
    vault.close()
    with sqlite3.connect(index_dir(stored.root, stored.mind) / CATALOG_NAME) as db:
        db.execute("UPDATE files SET memory = ?", (b"\x00not marshal",))
    db.close()
    vault = Vault.open(stored.root)
    assert sorted(m.key for m in vault.memories()) == ["door", "wifi"]
    assert any("damaged" in notice for notice in vault.notices), vault.notices


# --- the schema version follows what the index persists ---------------------------------------------

#: The fingerprint of what an index persists (`persisted_fingerprint`), by the SCHEMA_VERSION it belongs to.
#: When this test fails, something an existing index holds would now be made differently: bump
#: SCHEMA_VERSION in memfile/index/store.py (old indexes are then rebuilt, never misread) and record the
#: new fingerprint here under the new version.
FINGERPRINTS = {
    15: "5380e8adf5f7503c06e8b3a9835d303ac202e6ecd0e0223b504ad2a0becd4ff5",
    # 16: the same for the sample's short memory; a content past INDEXED_CHARS is indexed only that far.
    16: "5380e8adf5f7503c06e8b3a9835d303ac202e6ecd0e0223b504ad2a0becd4ff5",
    # 17: the same index; the catalog keeps no digest, masks or state_more (an old one is rebuilt, not misread).
    17: "5380e8adf5f7503c06e8b3a9835d303ac202e6ecd0e0223b504ad2a0becd4ff5",
    # 18: `expires` a column only (read whole for the expired), infinite for a memory that never expires.
    18: "3d013cea5dac5be3080b15fc49ae2310393b822e28b25796fe8f8b13de5435ea",
}

#: Text that runs the analyzer through every path: stop words, a question, stems, accents, no-space scripts.
SAMPLE = (
    "What did we deploy? Deploying the servers' databases, nhà hàng phở, ภาษาไทยง่าย, 東京の天気, "
    "e-mail x_y 42 the THE running"
)


def persisted_fingerprint(tmp_path: Path) -> str:
    """A digest of what an index persists: a golden memory's catalog row and its Whoosh document (with
    the memory's marshalled row), the analyzer's terms and positions, the pickled schema, the catalog's tables."""
    import hashlib
    import marshal
    import pickle
    import sqlite3
    from datetime import datetime, timezone

    from helpers import HAND_MADE

    from memfile import fileformat
    from memfile.index import store
    from memfile.index.catalog import Catalog, memory_row
    from memfile.index.persisted import STOP_WORDS, IndexPositions, MemfileAnalyzer, schema
    from memfile.model import memory_to_row

    memory = fileformat.parse(
        HAND_MADE.encode("utf-8"), "michael/fact/office_hours.md", datetime(2020, 1, 3, tzinfo=timezone.utc)
    )
    row = marshal.dumps(memory_to_row(memory))
    catalog = Catalog(tmp_path / "fingerprint.sqlite")
    catalog.open()
    with sqlite3.connect(catalog.path) as db:
        tables = sorted(sql for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))
    db.close()
    catalog.close()
    analyzer = MemfileAnalyzer()
    parts = [
        repr(memory_row(memory.path, row, memory.ref)),
        repr(sorted(store._document(memory, row).items())),
        repr([(t.text, t.pos, t.startchar, t.endchar) for t in analyzer(SAMPLE, positions=True, chars=True)]),
        repr(sorted(IndexPositions().word_values(SAMPLE, analyzer))),
        repr(sorted(STOP_WORDS)),
        pickle.dumps(schema(), protocol=2).hex(),
        repr(tables),
        str(marshal.version),
    ]
    return hashlib.sha256("\n\0".join(parts).encode("utf-8")).hexdigest()


def test_the_schema_version_changes_with_what_the_index_persists(tmp_path: Path) -> None:
    from memfile.index import SCHEMA_VERSION

    found = persisted_fingerprint(tmp_path)
    assert persisted_fingerprint(tmp_path / "again") == found  # deterministic
    assert FINGERPRINTS.get(SCHEMA_VERSION) == found, (
        f"what an index persists changed (fingerprint {found}) but SCHEMA_VERSION is still {SCHEMA_VERSION}: "
        "bump it in memfile/index/store.py and record the fingerprint in FINGERPRINTS under the new version"
    )


# --- the field formats (`formats`): Whoosh's postings, made faster ------------------------------------


@pytest.mark.skipif(plain("formats"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_the_index_format_gives_whooshs_postings_byte_for_byte() -> None:
    """The text field's format runs the analyzer inline; Whoosh's own Positions format is the reference."""
    from whoosh.formats import Positions

    field = schema()["text"]
    reference = Positions(field_boost=field.format.field_boost)
    r = random.Random(11)
    pieces = [
        *"alpha bravo deploy deploying database servers cache queue".split(),
        "the",
        "What",
        "is",
        "a",
        "Deploying",
        "Nhà",
        "hàng",
        "nha\u0300",
        "café",
        "ภาษาไทย",
        "東京都",
        "it's",
        "e-mail",
        "x",
        "9",
        "_",
        " ",
        " ",
        ", ",
        ".\n",
        "?",
        "\u0301",
    ]
    for _ in range(3000):
        text = "".join(r.choice(pieces) + r.choice(["", " "]) for _ in range(r.randint(0, 40)))
        ours = field.format.word_values(text, field.analyzer, mode="index")
        assert ours == list(reference.word_values(text, field.analyzer, mode="index")), text
    # anything but one string through this analyzer goes Whoosh's way
    assert list(field.format.word_values(["deploy", "deploy"], field.analyzer)) == list(
        reference.word_values(["deploy", "deploy"], field.analyzer)
    )
    assert type(field.analyzer) is MemfileAnalyzer


@pytest.mark.skipif(plain("formats"), reason="tests the trick itself: MEMFILE_PLAIN turns it off")
def test_the_id_fields_format_gives_whooshs_postings() -> None:
    """A plain ID is its own one term; anything else (a list, other options) goes Whoosh's way."""
    from whoosh.formats import Existence

    fields = schema()
    for name in ("path", "category", "priority", "source", "verified", "status"):
        field = fields[name]
        reference = Existence(field_boost=field.format.field_boost)
        for value in ("", "fact", " padded ", "m/Nhà hàng/ภาษา.md", "a,b"):
            assert field.format.word_values(value, field.analyzer, mode="index") == list(
                reference.word_values(value, field.analyzer, mode="index")
            ), value
        assert sorted(field.format.word_values(["a", "b", "a"], field.analyzer)) == sorted(
            reference.word_values(["a", "b", "a"], field.analyzer)
        )
        assert sorted(field.format.word_values("x", field.analyzer, positions=True)) == sorted(
            reference.word_values("x", field.analyzer, positions=True)
        )
