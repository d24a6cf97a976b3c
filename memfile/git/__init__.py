"""The git half of memfile: the only home of GitPython and the git command line.

`store` runs git (every change one readable commit), `merge` merges two
versions of a memory field by field, `history` reads and restores versions,
`remote` syncs with a remote, `locks` finds git's lock files a killed git left, `clone` makes a second machine's vault from it.
The package is imported as one unit on the first git use (a write, history,
sync, clone, doctor's git checks); reads never import it.
"""

from __future__ import annotations

from .clone import clone_vault
from .history import History, LogEntry, Version
from .locks import clear_stale_locks, git_locks, git_processes
from .merge import ATTRIBUTES, merge_memory
from .remote import (
    Remote,
    RemoteReport,
    configure_merge_driver,
    recover_interrupted_sync,
    run_merge_driver,
    write_attributes,
)
from .store import LOOSE_MOST, Commit, GitStore, pack_loose_objects

__all__ = [
    "ATTRIBUTES",
    "Commit",
    "GitStore",
    "LOOSE_MOST",
    "History",
    "LogEntry",
    "Remote",
    "RemoteReport",
    "Version",
    "clear_stale_locks",
    "clone_vault",
    "configure_merge_driver",
    "git_locks",
    "git_processes",
    "merge_memory",
    "pack_loose_objects",
    "recover_interrupted_sync",
    "run_merge_driver",
    "write_attributes",
]
