"""What every import reader produces, and the options that steer the readers.

A record is a plain dict of JSON values describing one memory under Synapse's field names (memfile's
export record); `_where` names where it came from for messages, and `_dates_guessed` says its dates
are a guess (a file's mtime), so a memory already in the mind keeps its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import InvalidInput

#: The formats `memfile import --from` accepts.
FORMATS = ("memfile", "synapse", "langbot", "openclaw")
#: What `--on-conflict` accepts: what to do with a record whose id is in the mind with other content.
ON_CONFLICT = ("skip", "newer", "overwrite")
#: What `--split` accepts (OpenClaw's MEMORY.md).
SPLITS = ("sections", "bullets", "file")


@dataclass(frozen=True)
class ImportOptions:
    """How the readers map foreign shapes (see `Vault.import_`)."""

    now: datetime
    split: str = "sections"  # OpenClaw MEMORY.md: sections | bullets | file
    category: str | None = None  # OpenClaw: overrides the category guessed from a heading
    include_dreams: bool = False  # OpenClaw: DREAMS.md is skipped unless set
    max_priority: str = "high"  # LangBot importance 5 is high unless "critical"
    source: str | None = None  # LangBot: the source of its memories (default agent); a person may say user


@dataclass
class Incoming:
    """What a reader made of an import file: the records, and what it could not map (never dropped silently)."""

    format: str
    records: list[dict[str, Any]]
    unmapped: list[str] = field(default_factory=list)
    minds: list[str] = field(default_factory=list)  # memfile's own export: the minds its header names
    notices: list[str] = field(default_factory=list)  # what the import should say of how it read the file


def reader_source(options: ImportOptions) -> str:
    """Who wrote a foreign tool's memories: its agent, unless the person importing says they did."""
    if options.source not in (None, "user", "agent"):
        raise InvalidInput("source", options.source, "user, agent")
    return options.source or "agent"
