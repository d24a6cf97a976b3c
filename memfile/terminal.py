"""What a terminal is shown: the command line's output with every control character written as a visible
escape, so that what an agent stored can neither drive the terminal nor hide text from its reader.

Only a terminal gets this (`Shown` wraps the streams): a pipe or a file gets the text as stored.
"""

from __future__ import annotations

import re
from typing import Any

#: The controls shown as escapes: C0 but tab and newline, a carriage return not ending a line, DEL and
#: C1. memfile's own bold (click.style: ESC[1m ... ESC[0m, in `search`) is let through whole.
_CONTROL = re.compile(r"\x1b\[[01]m|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
#: What memfile itself writes to a terminal: bold on, and everything off.
_OWN = frozenset({"\x1b[1m", "\x1b[0m"})


def _escaped(found: re.Match[str]) -> str:
    text = found.group()
    return text if text in _OWN else f"\\x{ord(text):02x}"


def shown(text: str) -> str:
    """`text` as a terminal may be given it: each control character as `\\xNN` (ESC is `\\x1b`), bold kept."""
    return _CONTROL.sub(_escaped, text)


class Shown:
    """A terminal's text stream that writes `shown(text)`: every other attribute is the stream's own.
    Bytes written through `buffer` (click.echo of bytes) are taken as UTF-8 and shown the same way."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = _ShownBytes(self)

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click asks whether the stream takes bytes: it does not, its buffer does
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.stream.write(shown(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _ShownBytes:
    """`Shown.buffer`: UTF-8 bytes, shown as text."""

    def __init__(self, text: Shown) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        self._text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self._text.flush()


def unshown(stream: Any) -> Any:
    """The terminal's own stream under `Shown`, for what memfile draws itself (a progress bar's
    carriage returns and cursor codes); any other stream as it is."""
    return stream.stream if isinstance(stream, Shown) else stream


def wrapped(stream: Any) -> Any:
    """`stream` as `Shown` when it is a terminal; else as it is."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        tty = False
    return Shown(stream) if tty and not isinstance(stream, Shown) else stream
