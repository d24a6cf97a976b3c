"""Reading Synapse's memory JSON (an array, or `{"memories": [...]}`) into import records.

Synapse's fields are memfile's own names, passed on verbatim for the core to validate; ids are made
stable (docs/sync.md), so importing the same file twice changes nothing. Also the helpers the three
foreign readers share: `derived_id`, `slug`, `folds`, `clean_tag`, `iso_z` and `shown`.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidInput, masked
from ..model import CONFLICT_KEY, ID_PATTERN, KNOWN_FIELDS, MAX_TAG_LENGTH
from .exporting import SYNAPSE_FIELDS
from .records import ImportOptions, Incoming

FORMAT = "synapse"

#: Synapse's memory fields (seed 000, as `memfile export --format json` writes them), plus memfile's status.
READ_FIELDS = (*(name for name in SYNAPSE_FIELDS if name != "mind_id"), "status", "superseded_by")
#: Fields of memfile's export record that describe the file, not the memory: never front-matter keys.
FILE_FIELDS = frozenset(("mind", "path", "raw", "sha256", "has_front_matter", "id_derived", "expired", "type"))

#: How a person gets Thai words into import keys (`slug`).
THAI_EXTRA = "pip install 'memfile-vault[thai]'"
_THAI = re.compile("[\u0e01-\u0e5b]+")

SHAPE = 'a JSON array of memories, or an object {"memories": [...]}'


def read_synapse(data: Any, options: ImportOptions) -> Incoming:
    """Records from Synapse's memory JSON: an array of memories or `{"memories": [...]}`.

    Raises InvalidInput for a shape that is not one of those, or a memory that is not an object.
    """
    del options  # Synapse's fields map one to one: nothing to choose
    if isinstance(data, dict) and "memories" in data:
        memories, others = data["memories"], [name for name in data if name != "memories"]
    else:
        memories, others = data, []
    if not isinstance(memories, list):
        raise InvalidInput("Synapse import", shown(data), SHAPE)
    unmapped = [f"top-level field {name!r} of the Synapse file: not imported" for name in others]
    records: list[dict[str, Any]] = []
    kept_extra: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    for number, memory in enumerate(memories):
        place = f"memories[{number}]"
        if not isinstance(memory, dict):
            raise InvalidInput(place, shown(memory), "a JSON object with category, key and content")
        record, extra_names, ignored_names = _record(memory, place)
        records.append(record)
        kept_extra.update(extra_names)
        ignored.update(ignored_names)
    unmapped += [
        f"field {name!r} ({_count(n, 'memory', 'memories')}) is not a Synapse field: kept as a front-matter key"
        for name, n in kept_extra.items()
    ]
    unmapped += [
        f"field {name!r} ({_count(n, 'memory', 'memories')}) describes a file, not a memory: not imported"
        for name, n in ignored.items()
    ]
    return Incoming(format=FORMAT, records=records, unmapped=unmapped)


def _record(memory: dict[str, Any], place: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """One memory's record, the names of its fields kept in extra, and of those left out."""
    record: dict[str, Any] = {name: memory[name] for name in READ_FIELDS if name in memory}
    record.pop("id", None)
    extra: dict[str, Any] = {}
    given_extra = memory.get("extra")
    if isinstance(given_extra, dict):  # memfile's own --format json keeps unknown keys here
        extra.update(given_extra)
    elif given_extra is not None:
        raise InvalidInput(f"{place}.extra", shown(given_extra), "an object of front-matter keys")
    extra_names: list[str] = []
    ignored_names: list[str] = []
    for name, value in memory.items():
        if name in READ_FIELDS or name in ("extra", "mind_id"):
            continue
        if name in FILE_FIELDS or name in KNOWN_FIELDS or name == CONFLICT_KEY or not name.strip():
            ignored_names.append(name)
        else:
            extra[name] = value
            extra_names.append(name)
    mind = memory.get("mind_id", memory.get("mind"))
    if mind is not None:
        record["mind_id"] = mind
    foreign = memory.get("id")
    if foreign is None or foreign == "":
        category, key = memory.get("category"), memory.get("key")
        if isinstance(category, str) and isinstance(key, str):  # else the core names what is missing
            record["id"] = derived_id(FORMAT, f"{category.strip().lower()}/{key}")
    elif isinstance(foreign, str) and ID_PATTERN.fullmatch(foreign):
        record["id"] = foreign
    elif isinstance(foreign, str | int) and not isinstance(foreign, bool):
        record["id"] = derived_id(FORMAT, str(foreign))
        extra["synapse_id"] = foreign
    else:
        raise InvalidInput(f"{place}.id", shown(foreign), "a string such as mem_abc123")
    if extra:
        record["extra"] = extra
    label = foreign if foreign not in (None, "") else record.get("id")
    record["_where"] = f"{place} (id {masked(str(label))})" if label else place  # messages quote it
    return record, extra_names, ignored_names


# ---------------------------------------------------------------- shared by the foreign readers


def derived_id(format_name: str, foreign: str) -> str:
    """A memfile id made from a foreign one (or from what names a record): the same input, the same id."""
    return "mem_" + hashlib.sha1(f"{format_name}:{foreign}".encode()).hexdigest()[:16]


def slug(text: str, limit: int = 60) -> str:
    """A key fragment from any text: accents folded (`Thích cà phê` -> `thich_ca_phe`), Thai romanised
    with the thai extra (`เรียนภาษาไทย` -> `rian_phasathai`), at most `limit` characters.

    Letters with no ASCII form (Chinese; Thai without the extra) leave a short hash of the whole
    text behind, so two such texts never share a slug; text with nothing left is the hash alone.
    """
    words, dropped = _folded(_romanised(text))
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    room = limit - (len(digest) + 1 if dropped else 0)
    if len(words) > room:
        cut = words[:room]
        words = (cut.rsplit("_", 1)[0] if "_" in cut else cut).strip("_")
    if not words:
        return digest
    return f"{words}_{digest}" if dropped else words


def folds(text: str) -> bool:
    """Whether every letter and digit of `text` has an ASCII form once its accents are folded, so that its
    `slug` shows its words as written (a romanised Thai word does not)."""
    return not _folded(text)[1]


def hashes_thai(text: str) -> bool:
    """Whether `text` holds Thai letters that `slug` leaves as a hash because the thai extra is missing."""
    return _THAI.search(text) is not None and _thai_romaniser() is None


def thai_notice(counts: dict[str, int]) -> str:
    """The one sentence an import says of the Thai texts (by kind: heading, item...) whose keys are hashes."""
    told = " and ".join(f"{n} Thai {what}{'' if n == 1 else 's'}" for what, n in counts.items())
    return f"{told} got hash keys: {THAI_EXTRA} keeps their words (romanised) in the key"


def _romanised(text: str) -> str:
    """`text` with each run of Thai letters replaced by its romanised words (Royal Thai General System,
    split into words by pythainlp), or as it is without Thai or without the thai extra."""
    if _THAI.search(text) is None or (romaniser := _thai_romaniser()) is None:
        return text
    tokenize, romanize = romaniser
    return _THAI.sub(lambda run: " " + " ".join(romanize(w, engine="royin") for w in tokenize(run.group())) + " ", text)


def _thai_romaniser() -> tuple[Any, Any] | None:
    """pythainlp's word splitter and romaniser, imported when Thai is first met; None without the thai extra."""
    os.environ.setdefault("PYTHAINLP_READ_ONLY", "1")  # no ~/pythainlp-data made: its bundled words suffice
    try:
        import pythainlp
    except ImportError:
        return None
    return pythainlp.word_tokenize, pythainlp.romanize


def _folded(text: str) -> tuple[str, bool]:
    """`text`'s words folded to ASCII and joined by `_`, and whether a letter or digit with no ASCII form was dropped."""
    folded = unicodedata.normalize("NFKD", text.replace("đ", "d").replace("Đ", "D"))
    kept: list[str] = []
    dropped = False
    for char in folded:
        if unicodedata.combining(char):
            continue
        if char.isascii():
            kept.append(char.lower())
        else:
            dropped = dropped or char.isalnum()
            kept.append(" ")
    return re.sub(r"[^a-z0-9]+", "_", "".join(kept)).strip("_"), dropped


def unique_key(key: str, taken: set[str]) -> str:
    """`key`, or `key_2`, `key_3`... when another record of the same category already has it."""
    candidate, n = key, 2
    while candidate in taken:
        candidate, n = f"{key[: 100 - len(str(n)) - 1]}_{n}", n + 1
    taken.add(candidate)
    return candidate


def clean_tag(text: str) -> str | None:
    """A tag memfile accepts made from foreign text: no comma, one space between words, at most 100 characters."""
    tag = " ".join(text.replace(",", " ").split()).lower().lstrip("-").strip()
    return tag[:MAX_TAG_LENGTH].rstrip() or None


TIMESTAMP_RULE = "an ISO-8601 time such as 2026-03-14T00:00:00Z"


def iso_z(value: Any, field_name: str) -> str | None:
    """An ISO-8601 time normalised to UTC seconds with a `Z` (LangBot's own rule); None for an empty one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidInput(field_name, shown(value), TIMESTAMP_RULE)
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(field_name, shown(value), TIMESTAMP_RULE) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:
        raise InvalidInput(field_name, shown(value), TIMESTAMP_RULE, reason="out of range") from None


def shown(value: Any) -> Any:
    """A value short enough for a message: containers by their kind, long text cut."""
    if isinstance(value, dict):
        return f"a JSON object with {_count(len(value), 'field', 'fields')}"
    if isinstance(value, list | tuple):
        return f"a JSON array of {_count(len(value), 'item', 'items')}"
    if isinstance(value, str) and len(value) > 80:
        return value[:77] + "..."
    return value


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
