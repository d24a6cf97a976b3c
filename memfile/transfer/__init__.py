"""Memories in and out of a mind: `memfile export` and `memfile import` (a collaborator of the Vault).

`exporting` writes the export; `importing` reads an import file in any known format (one reader module
each) and writes it into one mind as one commit. The Vault hands in its writer and index; this package
writes only through the writer.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from ..errors import InvalidInput
from ..model import Progress, Source, step, utc_now
from ..secretscan import guard
from .exporting import EXPORT_FORMATS, ExportReport, MindExport, Tally, export_lines
from .importing import ImportReport, apply, plan, read_bounded, read_import
from .records import FORMATS, ON_CONFLICT, SPLITS, ImportOptions, Incoming

if TYPE_CHECKING:
    from ..index import Index
    from ..writer import Writer

__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "ON_CONFLICT",
    "SPLITS",
    "ExportReport",
    "ImportOptions",
    "ImportReport",
    "Incoming",
    "MindExport",
    "check_export",
    "export_lines",
    "export_to",
    "import_file",
]


def check_export(fmt: str, raw: bool) -> None:
    """Refuse an export's options before anything is read.

    Raises:
        InvalidInput: an unknown format, or `raw` with Synapse's JSON (which has no place for a file's text).
    """
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput("--format", fmt, EXPORT_FORMATS)
    if raw and fmt != "jsonl":
        raise InvalidInput("--raw", "with --format json", "--raw with --format jsonl (Synapse's JSON has no file text)")


def export_to(
    out: str | os.PathLike[str] | TextIO, minds: list[MindExport], fmt: str, raw: bool, version: str
) -> ExportReport:
    """Write an export to a file (replaced only once whole) or a text stream; see `exporting.export_lines`."""
    check_export(fmt, raw)
    tally = Tally()
    lines = export_lines(minds, fmt=fmt, raw=raw, now=utc_now(), version=version, tally=tally)
    if isinstance(out, str | os.PathLike):
        _write_whole(Path(out), lines)
    else:
        for line in lines:
            out.write(line)
        out.flush()
    return ExportReport(fmt, tally.count, [part.mind for part in minds], raw, tally.unreadable)


def _write_whole(path: Path, lines: Iterable[str]) -> None:
    """Write lines to a temporary file beside `path`, then rename it into place: never half an export."""
    try:
        handle = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", newline="\n", dir=path.parent, prefix=f".{path.name}.", delete=False
        )
    except OSError as exc:
        raise InvalidInput(
            "-o", str(path), "a file in a folder memfile can write", reason=exc.strerror or str(exc)
        ) from None
    try:
        with handle:
            for line in lines:
                handle.write(line)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def import_file(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    writer: Writer,
    index: Index,
    actor: Source,
    fmt: str | None,
    on_conflict: str,
    dry_run: bool,
    from_mind: str | None,
    options: dict[str, Any],
    name: str | None = None,
    allow_secret: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """`Vault.import_`'s work: read, plan, and (unless `dry_run`) write the plan as one commit under the
    writer lock (the plan is made again under the lock, on the mind as it then is). The report's notices
    end with the writer's and the index's of this import (a full disk while the index was written, a
    killed sync's debris removed), so a face that answers with the report alone loses none."""
    already = len(writer.notices)
    if allow_secret and actor is Source.AGENT:
        guard(None, "", what="the import", allow_secret=True, agent=True)  # refused: only a person may
    if options["split"] not in SPLITS:
        raise InvalidInput("--split", options["split"], SPLITS)
    if options["max_priority"] not in ("high", "critical"):
        raise InvalidInput("--max-priority", options["max_priority"], ("high", "critical"))
    if options["source"] not in (None, "user", "agent"):
        raise InvalidInput("--source", options["source"], ("user", "agent"))
    if not isinstance(source, str | os.PathLike):  # bytes, or a stream (standard input) read with a bound
        name = name or ("the request body" if isinstance(source, bytes) else "standard input")
        data = source if isinstance(source, bytes) else read_bounded(source, name)
        incoming = read_import(data, name, fmt, ImportOptions(now=utc_now(), **options))
    else:
        path = Path(source).expanduser()
        incoming = read_import(path, str(source), fmt, ImportOptions(now=utc_now(), **options))
        name = name or path.name or str(path)

    def decide() -> Any:
        return plan(
            incoming,
            name=name,
            root=writer.root,
            mind=writer.mind,
            memories=index.memories(),
            issues=index.issues,
            actor=actor,
            on_conflict=on_conflict,
            from_mind=from_mind,
            now=utc_now(),
            secrets=writer.config.secrets,
            allow_secret=allow_secret,
            ignored=writer.git.ignored,
            progress=step(progress, "checking"),
        )

    if dry_run:
        result = decide()
        commit: str | None = None
    else:
        with writer.transaction():
            result = decide()
            commit = apply(result, writer, actor, progress)
    result.notices += [n for n in writer.notices[already:] if n not in result.notices]
    return result.report(dry_run, commit)
