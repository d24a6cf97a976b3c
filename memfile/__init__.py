"""memfile: long-term memory for LLM agents, kept as Markdown files in a git repository."""

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
from .recall import RecallItem, RecallReport, estimate_tokens
from .vault import Vault
from .watch import Watcher

__version__ = "0.1.0"

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
