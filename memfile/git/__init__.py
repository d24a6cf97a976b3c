"""The git adapter of memfile: the only home of GitPython and the git command line.

`store` runs git (every change one readable commit) and holds the merge driver's setup, `merge` merges
two versions of a memory (pure), `locks` finds what a killed git or sync left, `clone` makes a second
machine's vault. Imported on the first git use; reads never import it.
"""

from __future__ import annotations

from .clone import check_url, clone_command, clone_vault, local_path, point_bare_head
from .locks import MERGE_SUBJECT, clear_stale_locks, git_locks, git_processes, recover_interrupted_sync, settle
from .merge import ATTRIBUTES, CONFLICT_FROM, conflict_sides, merge_memory
from .rewrite import PURGE_JOURNAL, expire_old_objects, holds_id, ids_coming_in
from .rewrite import rewrite as rewrite_history
from .rewrite import versions as memory_versions
from .store import (
    LOOSE_MOST,
    REMOTE_NAME_RULE,
    Commit,
    GitStore,
    configure_merge_driver,
    machine_name,
    pack_loose_objects,
    run_merge_driver,
    valid_remote_name,
    write_attributes,
)

__all__ = [
    "ATTRIBUTES",
    "CONFLICT_FROM",
    "Commit",
    "GitStore",
    "LOOSE_MOST",
    "MERGE_SUBJECT",
    "PURGE_JOURNAL",
    "REMOTE_NAME_RULE",
    "check_url",
    "clear_stale_locks",
    "clone_command",
    "clone_vault",
    "configure_merge_driver",
    "conflict_sides",
    "git_locks",
    "expire_old_objects",
    "git_processes",
    "holds_id",
    "ids_coming_in",
    "local_path",
    "machine_name",
    "memory_versions",
    "merge_memory",
    "pack_loose_objects",
    "point_bare_head",
    "recover_interrupted_sync",
    "rewrite_history",
    "run_merge_driver",
    "settle",
    "valid_remote_name",
    "write_attributes",
]
