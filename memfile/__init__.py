"""memfile: long-term memory for LLM agents, kept as Markdown files in a git repository."""

from __future__ import annotations

from importlib import import_module

from ._version import __version__

TYPE_CHECKING = False  # typing itself is not imported: `import memfile` must stay light (see _HOMES)
if TYPE_CHECKING:
    from typing import Any

    from .errors import (
        EXIT_CODES,
        AmbiguousRef,
        Busy,
        Conflict,
        ExtractorFailed,
        ExtractorNotConfigured,
        FileParseError,
        GitBusy,
        GitDiskFull,
        GitError,
        InvalidInput,
        LockTimeout,
        MemfileError,
        NotAVault,
        NotFound,
        Refused,
    )
    from .model import Category, Memory, ParseIssue, Priority, Source, Status, StoreResult
    from .recall import RecallItem, RecallReport, estimate_tokens
    from .vault import Vault
    from .watch import Watcher


#: Where each public name lives; each module is imported on first use, so that `import memfile` costs
#: nothing: the command line's client (cli_client.py) runs inside this package and must stay light.
_HOMES = {
    **dict.fromkeys(
        (
            "EXIT_CODES",
            "AmbiguousRef",
            "Busy",
            "Conflict",
            "ExtractorFailed",
            "ExtractorNotConfigured",
            "FileParseError",
            "GitBusy",
            "GitDiskFull",
            "GitError",
            "InvalidInput",
            "LockTimeout",
            "MemfileError",
            "NotAVault",
            "NotFound",
            "Refused",
        ),
        "errors",
    ),
    **dict.fromkeys(("Category", "Memory", "ParseIssue", "Priority", "Source", "Status", "StoreResult"), "model"),
    **dict.fromkeys(("RecallItem", "RecallReport", "estimate_tokens"), "recall"),
    "Vault": "vault",
    "Watcher": "watch",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memfile' has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "EXIT_CODES",
    "AmbiguousRef",
    "Busy",
    "Category",
    "Conflict",
    "ExtractorFailed",
    "ExtractorNotConfigured",
    "FileParseError",
    "GitBusy",
    "GitDiskFull",
    "GitError",
    "InvalidInput",
    "LockTimeout",
    "Memory",
    "MemfileError",
    "NotAVault",
    "NotFound",
    "ParseIssue",
    "Priority",
    "RecallItem",
    "RecallReport",
    "Refused",
    "Source",
    "Status",
    "StoreResult",
    "Vault",
    "Watcher",
    "__version__",
    "estimate_tokens",
]
