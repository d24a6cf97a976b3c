"""`memfile export`: a mind's memories as JSON Lines (memfile's own format) or a JSON array (Synapse's shape).

The JSONL form opens with a header line (format, version, memfile version,
minds), has one line per memory with every field under Synapse's names, one
line per file memfile could not read (never dropped silently), and ends with
a trailer holding the count, so that a file cut short is refused on import.
Lines are made one at a time, so a large export never sits in memory as text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..model import Memory, ParseIssue, Report, format_datetime

#: The `format` of the header line, and the version of the format this memfile writes and reads.
FORMAT = "memfile-export"
VERSION = 1
#: What `--format` accepts.
EXPORT_FORMATS = ("jsonl", "json")
#: Synapse's memory object, the shape of `--format json` (seed 000).
SYNAPSE_FIELDS = (
    "id",
    "category",
    "key",
    "content",
    "tags",
    "priority",
    "source",
    "verified",
    "confidence",
    "expires_at",
    "mind_id",
    "created_at",
    "updated_at",
)


@dataclass(frozen=True)
class ExportReport(Report):
    """What `Vault.export` wrote: how many memories of which minds, and the files it could not read."""

    format: str
    count: int
    minds: list[str]
    raw: bool
    unreadable: list[str] = field(default_factory=list)  # "path:line: reason" of each file left out


@dataclass(frozen=True)
class MindExport:
    """One mind's part of an export: `load()` gives its memories (in path order) and unreadable files,
    called when the export reaches it, so one mind's memories are in memory at a time."""

    mind: str
    name: str
    root: Path
    load: Callable[[], tuple[list[Memory], list[ParseIssue]]]


@dataclass
class Tally:
    """What an export wrote, filled in as it goes (for the caller's report)."""

    count: int = 0
    unreadable: list[str] = field(default_factory=list)  # "path:line: reason" of each file left out


def record(memory: Memory, root: Path, raw: bool, now: datetime) -> dict[str, Any]:
    """The export record of one memory: Synapse's names, then memfile's own fields; with `raw`, the file's
    exact text and its sha256 (the bytes are read now: the fields come from the index, which a read
    brought in line with the files just before)."""
    out: dict[str, Any] = {"type": "memory", **synapse_object(memory)}
    out |= {
        "expired": memory.is_expired(now),
        "extra": out.pop("extra"),
        "path": memory.path,
        "id_derived": memory.id_derived,
        "has_front_matter": memory.has_front_matter,
    }
    if raw:
        data = (root / memory.path).read_bytes()
        out["raw"] = data.decode("utf-8")  # memfile reads only UTF-8 files: a memory's file always decodes
        out["sha256"] = hashlib.sha256(data).hexdigest()
    return out


#: What `--format json` adds to Synapse's fields, as the HTTP API's memories carry them: without them a
#: superseded memory imported back would come back into recall, and unknown keys would be lost.
SYNAPSE_EXTENSIONS = ("status", "superseded_by", "extra")


def synapse_object(memory: Memory) -> dict[str, Any]:
    """A memory as Synapse's API shows it (`--format json`), with memfile's status and unknown keys."""
    fields = memory.to_dict()
    shaped = {name: memory.mind if name == "mind_id" else fields[name] for name in SYNAPSE_FIELDS}
    return shaped | {name: fields[name] for name in SYNAPSE_EXTENSIONS}


def export_lines(
    minds: list[MindExport], *, fmt: str, raw: bool, now: datetime, version: str, tally: Tally | None = None
) -> Iterator[str]:
    """The export's text, a line (for `json`, an array element) at a time, each ending in a newline; each
    mind's memories are loaded when the export reaches it. `raw` (`jsonl` only): each file's exact text and
    sha256; `now` decides which memories count as expired; `tally` counts what was written."""
    tally = tally or Tally()
    jsonl = fmt == "jsonl"
    if jsonl:
        header = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "exported_at": format_datetime(now),
            "memfile_version": version,
            "minds": [{"mind": part.mind, "name": part.name} for part in minds],
            "raw": raw,
        }
        yield _line(header)
    else:
        yield "["
    for part in minds:
        memories, issues = part.load()
        for memory in memories:
            if jsonl:
                yield _line(record(memory, part.root, raw, now))
            else:
                yield ("\n" if tally.count == 0 else ",\n") + json.dumps(synapse_object(memory), ensure_ascii=False)
            tally.count += 1
        tally.unreadable += map(str, issues)
        for issue in issues if jsonl else ():
            yield _line({"type": "unreadable", "path": issue.path, "line": issue.line, "reason": issue.reason})
    yield _line({"type": "end", "count": tally.count, "unreadable": len(tally.unreadable)}) if jsonl else "\n]\n"


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False) + "\n"
