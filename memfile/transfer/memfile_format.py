"""Reading memfile's own export (JSON Lines): the header, the memory records, the trailer that proves the
file whole."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInput
from ..model import KNOWN_FIELDS
from .exporting import FORMAT, SYNAPSE_FIELDS, VERSION
from .records import Incoming

#: The fields a memory record may hold besides the memory's own (`records.py`): not reported as unmapped.
RECORD_FIELDS = frozenset(
    {
        "type",
        *SYNAPSE_FIELDS,
        *KNOWN_FIELDS,
        "expired",
        "extra",
        "path",
        "id_derived",
        "has_front_matter",
        "raw",
        "sha256",
    }
)


def is_memfile_export(first_line: str) -> bool:
    """Whether a file's first line is memfile's export header."""
    try:
        value = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and value.get("type") == "header" and value.get("format") == FORMAT


def read_memfile(lines: Iterable[str], name: str) -> Incoming:
    """The records of a memfile export.

    Raises:
        InvalidInput: a line that is not JSON, a missing or foreign header, a newer format version, a record
            after the trailer, or a file cut short (no trailer, or a count that does not match).
    """
    incoming = Incoming(format="memfile", records=[])
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(
                "FILE", name, "memfile's export: one JSON object per line", reason=f"line {number} is not JSON ({exc})"
            ) from None
        kind = value.get("type") if isinstance(value, dict) else None
        if header is None:
            if kind != "header" or value.get("format") != FORMAT:
                raise InvalidInput("FILE", name, f"a memfile export (its first line names format {FORMAT!r})")
            if not isinstance(value.get("version"), int) or value["version"] > VERSION:
                raise InvalidInput(
                    "version",
                    value.get("version"),
                    f"{VERSION} or lower",
                    reason=f"{name} was made by a newer memfile ({value.get('memfile_version')}); upgrade memfile",
                )
            header = value
            minds = value.get("minds")
            if isinstance(minds, list):
                incoming.minds = [str(m.get("mind")) for m in minds if isinstance(m, dict)]
            continue
        if end is not None:
            raise InvalidInput("FILE", name, "nothing after the end line", reason=f"line {number} follows it")
        if kind == "memory":
            unknown = [k for k in value if k not in RECORD_FIELDS]
            if unknown:
                incoming.unmapped.append(
                    f"line {number}: fields {', '.join(map(repr, unknown))} are not memfile's (left out)"
                )
            value["_where"] = f"record {len(incoming.records) + 1} (line {number})"
            incoming.records.append(value)
        elif kind == "unreadable":
            incoming.unmapped.append(
                f"line {number}: {value.get('path')} was unreadable where it was exported ({value.get('reason')}): "
                "not in the export"
            )
        elif kind == "end":
            end = value
        else:
            raise InvalidInput(
                "type", kind, "header, memory, unreadable, end", reason=f"line {number} of {name} is not a record"
            )
    if header is None:
        raise InvalidInput("FILE", name, f"a memfile export (its first line names format {FORMAT!r})")
    if end is None:
        raise InvalidInput(
            "FILE",
            name,
            "a whole export, ending in its end line",
            reason=f"it has no end line: the file was cut short after {len(incoming.records)} memories",
        )
    if end.get("count") != len(incoming.records):
        raise InvalidInput(
            "FILE",
            name,
            "a whole export",
            reason=f"its end line counts {end.get('count')} memories but it holds {len(incoming.records)}",
        )
    return incoming
