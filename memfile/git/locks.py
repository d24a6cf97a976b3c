"""What a killed git or a killed sync left: git's lock files and a sync's half-done merge.

memfile runs its own git only while it holds the writer lock, and its git dies with it, so a lock found
under the writer lock while no git runs in the vault was left by a killed git and goes
(`clear_stale_locks`). A git that runs (a person's, with its editor open) is waited for, then named.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Busy, GitError, Notice

if TYPE_CHECKING:
    from .store import GitStore

#: The subject of every merge commit sync makes (how its interrupted merge is told from a person's).
MERGE_SUBJECT = "sync: merge "
#: How long a write waits for the git processes of a killed sync to end.
RECOVERY_WAIT_S = 10.0


def git_locks(root: Path) -> list[str]:
    """git's lock files in the vault's .git, relative to the vault (a killed auto-gc's
    `objects/maintenance.lock` too; the fan-out folders, hooks and logs hold none and are not walked)."""
    git_dir, found = root / ".git", []
    for folder, dirs, files in os.walk(git_dir):
        inside_objects = folder == str(git_dir / "objects")
        dirs[:] = [d for d in dirs if d not in ("hooks", "logs") and not (inside_objects and len(d) == 2)]
        found += [os.path.relpath(os.path.join(folder, n), root) for n in files if n.endswith(".lock")]
    return sorted(found)


def git_processes(root: Path) -> list[tuple[int, str]] | None:
    """The git processes running in the vault (their working folder in it, or one this user may not read),
    as (pid, command line); None where the system does not show them (no /proc: not Linux)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    top = os.path.realpath(root)
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
                if not comm.read().startswith("git"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read(200).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:  # ended meanwhile
            continue
        try:
            folder = os.readlink(f"/proc/{pid}/cwd")
        except PermissionError:  # another user's git: it may be at work in this vault, so it counts
            folder = top
        except OSError:
            continue
        if folder == top or folder.startswith(top + os.sep):
            found.append((int(pid), command))
    return found


def clear_stale_locks(root: Path, wait: float) -> list[str]:
    """For a caller holding the writer lock: remove git's lock files when no git process runs in the
    vault; wait up to `wait` s for a git that runs to finish. A notice of the locks it removed.

    Raises:
        Busy: a git process still runs in the vault after `wait` s while a lock is there.
    """
    deadline = time.monotonic() + wait
    while locks := git_locks(root):
        running = git_processes(root)
        if running is None:  # no way to tell here: git names the lock when it meets it
            return []
        if not running:
            for lock in locks:
                (root / lock).unlink(missing_ok=True)
            return [f"removed {', '.join(locks)}, left by a git command that was killed (no git runs now)"]
        if time.monotonic() > deadline:
            pid, command = running[0]
            raise Busy(
                f"a git command is at work in {root} (process {pid}: {command}) and holds {locks[0]}; "
                "memfile writes once it is done: try again in a moment"
            )
        time.sleep(0.05)
    return []


def recover_interrupted_sync(git: GitStore, wait: float = RECOVERY_WAIT_S) -> list[str]:
    """For a caller holding the writer lock: finish or undo what a killed `memfile sync` left behind
    (its half-done merge, git's lock, the merge driver's temporary files); notices of what was done.
    A merge a person started is never touched.

    Raises:
        Busy: git processes a killed sync started are still at work after `wait` seconds.
    """
    notices: list[str] = []
    if git.sync_mark_left():
        if not git.sync_processes_gone(wait):
            raise Busy(
                f"git processes started by a memfile sync that was stopped are still at work in {git.root}; "
                "try again in a moment"
            )
        lock = git.index_lock()
        deadline = time.monotonic() + 0.5  # a person's own quick git command (git status) lets go at once
        while lock is not None and time.monotonic() < deadline:
            time.sleep(0.02)
            lock = git.index_lock()
        if lock is not None:  # nothing the sync started runs any more: its git was killed holding the lock
            lock.unlink(missing_ok=True)
            notices.append("removed .git/index.lock, left by a memfile sync that was killed")
    subject = git.merge_subject()
    if subject is not None and subject.startswith(MERGE_SUBJECT) and git.index_lock() is None:
        notices.append(_finish_interrupted_merge(git, subject))
    if git.index_lock() is None:  # no git is at work: a merge driver's files are leftovers
        debris = git.merge_debris()
        for path in debris:
            path.unlink(missing_ok=True)
        if debris:
            notices.append(
                f"removed {len(debris)} temporary files of a merge that was killed "
                f"({', '.join(sorted(p.name for p in debris))})"
            )
    return notices


def _finish_interrupted_merge(git: GitStore, subject: str) -> str:
    """Finish the merge a killed sync left as that sync would have; undo it when it cannot. A notice."""
    name = subject.removeprefix(MERGE_SUBJECT).split(",", 1)[0].strip()
    message = git.merge_message()
    mind = re.search(r"^mind: (\S+)$", message, re.MULTILINE)
    try:
        unmerged = git.unmerged_paths()
        if unmerged:
            kept = settle(git, unmerged, name, mind.group(1) if mind else "")
            return f"finished the merge of {name} a killed memfile sync left (kept {', '.join(kept)})"
        git.finish_merge(message)
        return f"finished the merge of {name} a killed memfile sync left"
    except GitError:
        git.abort_merge()
        return Notice(f"undid the merge of {name} a killed memfile sync left", "sync_again")


def settle(git: GitStore, unmerged: list[str], name: str, mind: str) -> list[str]:
    """Finish a merge git left with `unmerged` memory files: keep the side that still has each file
    (ours when both do: the driver could not read one). Returns what was kept.

    Raises:
        GitError: a file that is not a memory is unmerged (nothing is decided for it).
    """
    if any(not p.endswith(".md") for p in unmerged):
        raise GitError(
            f"the merge of {name} conflicts outside memory files ({', '.join(unmerged)}); "
            "nothing was changed: merge it with git, then run memfile sync again"
        )
    kept = []
    for path in unmerged:
        # A side that deleted the file loses to the side that changed it; otherwise ours stays
        # (the driver could not read one side). Either way the other version is in the merged commit.
        side = "theirs" if 2 not in git.unmerged_sides(path) else "ours"
        git.take_side(path, side)
        kept.append(f"{path} ({side})")
    git.finish_merge(
        f"{MERGE_SUBJECT}{name}, keeping {', '.join(kept)}; the other version is in the "
        f"merged commit (memfile history shows it)\n\nmind: {mind}"
    )
    return kept
