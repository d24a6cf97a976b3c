"""memfile: long-term memory for LLM agents, kept as Markdown files in a git repository."""

from typing import TYPE_CHECKING, Any

from .errors import (
    EXIT_CODES,
    AmbiguousRef,
    Conflict,
    FileParseError,
    GitError,
    InvalidInput,
    LockTimeout,
    MemfileError,
    NotAVault,
    NotFound,
    Refused,
)
from .model import Category, Memory, ParseIssue, Priority, Source, Status, StoreResult
from .vault import Vault
from .watch import Watcher

if TYPE_CHECKING:
    from .recall import RecallItem, RecallReport, estimate_tokens

__version__ = "0.1.0"

#: Names of `memfile.recall`, imported on first use (see recalling.py).
_FROM_RECALL = frozenset({"RecallItem", "RecallReport", "estimate_tokens"})


def __getattr__(name: str) -> Any:
    if name in _FROM_RECALL:
        from . import recall

        return getattr(recall, name)
    raise AttributeError(f"module 'memfile' has no attribute {name!r}")


__all__ = [
    "EXIT_CODES",
    "AmbiguousRef",
    "Category",
    "Conflict",
    "FileParseError",
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
