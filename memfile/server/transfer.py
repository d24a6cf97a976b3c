"""Export and import over HTTP (the API's and the console's): the export written on the worker thread into a
spooled temporary file (in memory up to `EXPORT_SPOOL_BYTES`, on disk beyond) that the response streams
from a thread of Starlette's pool, the library's option names said as the API's, and the server's log line.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Awaitable, Iterator
from datetime import datetime
from tempfile import SpooledTemporaryFile
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

from starlette.responses import StreamingResponse

from ..errors import InvalidInput
from ..model import Source

if TYPE_CHECKING:
    from ..vault import Vault
    from ..worker import Caller

T = TypeVar("T")

EXPORT_FORMATS = {"jsonl": ("application/x-ndjson", "jsonl"), "json": ("application/json", "json")}
#: The library's names for the options of an export or import (the command line's) -> this API's names.
TRANSFER_NAMES = {
    "--format": "format",
    "--raw": "raw",
    "--from": "from",
    "--on-conflict": "on_conflict",
    "--split": "split",
    "--max-priority": "max_priority",
    "--source": "source",
    "--from-mind": "from_mind",
    "FILE": "body",
}
#: Bytes of an export kept in memory before its spooled file moves to disk.
EXPORT_SPOOL_BYTES = 8 * 1024 * 1024
EXPORT_CHUNK_BYTES = 256 * 1024


class Exported(NamedTuple):
    """An export made on the worker thread, for the response to stream."""

    file: IO[bytes]  # rewound; the response closes it
    size: int  # bytes
    memories: int  # how many memories it holds
    unreadable: int  # files left out because they could not be read (listed in the export)


def export_file(vault: Vault, *, all_minds: bool, format: str, raw: bool) -> Exported:
    """On the worker thread: `vault`'s export written into a spooled temporary file (in memory up to
    EXPORT_SPOOL_BYTES, then on disk), rewound for reading."""
    spool: IO[bytes] = SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)  # noqa: SIM115 - the response closes it
    try:
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
        report = vault.export(text, all_minds=all_minds, format=format, raw=raw)
        text.flush()
        text.detach()  # the spool stays open for the response
        size = spool.tell()
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return Exported(spool, size, report.count, len(report.unreadable))


async def transfer_named(call: Awaitable[T]) -> T:
    """`await call`, with the library's names of export and import options (the command line's) in its
    error given as this API's query parameters (`--on-conflict` is `on_conflict`, the file is the body),
    also where its reason or allowed values name one (`name it with --from X` -> `?from=X`)."""
    try:
        return await call
    except InvalidInput as exc:
        if type(exc) is not InvalidInput:  # a subclass says its message its own way
            raise
        field = TRANSFER_NAMES.get(exc.field, exc.field)
        allowed, reason = _as_parameters(exc.allowed), _as_parameters(exc.reason)
        if (field, allowed, reason) == (exc.field, exc.allowed, exc.reason):
            raise
        raise InvalidInput(field, exc.value, allowed, reason=reason) from None


def _as_parameters(text: str) -> str:
    """`text` with the command line's options of an export or import as this API's query parameters: a
    choice (`--from A|B`, `--from=A`) as `?from=A|B`, and an option alone (`--raw`) by its name (`raw`)."""

    def parameter(match: re.Match[str]) -> str:
        name = TRANSFER_NAMES.get(match.group(1))
        if name is None:
            return match.group(0)
        value = match.group(2) or match.group(3)
        return f"?{name}={value}" if value else name

    return re.sub(r"(--[a-z][a-z-]*)(?:=(\S+)| ([\w-]+(?:\|[\w-]+)+))?", parameter, text)


def file_chunks(file: IO[bytes]) -> Iterator[bytes]:
    """The file's bytes in chunks, then the file closed (Starlette runs each step in its thread pool)."""
    with file:
        while chunk := file.read(EXPORT_CHUNK_BYTES):
            yield chunk


def export_response(exported: Exported, scope: str, format: str, now: datetime) -> StreamingResponse:
    """The export as an attachment a client saves as memfile-export-SCOPE-YYYYMMDD.jsonl (SCOPE: the mind,
    or `all-minds`), streamed from its spooled file, which is closed after."""
    filename = f"memfile-export-{scope}-{now:%Y%m%d}.{EXPORT_FORMATS[format][1]}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Content-Length": str(exported.size)}
    return StreamingResponse(file_chunks(exported.file), media_type=EXPORT_FORMATS[format][0], headers=headers)


def import_summary(report: dict[str, Any]) -> str:
    """An ImportReport's counts in one line, for the server's log."""

    counts = [f"{len(report[name])} {name}" for name in ("created", "updated", "skipped", "conflicts")]
    counts.insert(2, f"{report['unchanged']} unchanged")
    done = "a dry run, nothing written" if report["dry_run"] else f"commit {report['commit'] or 'none'}"
    return f"{', '.join(counts)} ({report['format']}; {done})"


def log(message: str) -> None:
    """A line on the server's stderr (`memfile serve: ...`), where its other messages go."""
    print(f"memfile serve: {message}", file=sys.stderr, flush=True)


def acting(caller: Caller) -> str:
    """Who a logged request acted as: its key's label and kind."""
    kind = "Mind Key" if caller.source is Source.AGENT else "person's token"
    return f"{kind} {caller.key!r}"
