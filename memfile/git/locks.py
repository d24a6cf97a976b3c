"""git's lock files: which are there, which git processes run in the vault, and removing those a killed
git left.

git makes `index.lock` (or `HEAD.lock`, `refs/heads/main.lock`, ...) while it changes that file and
removes it after; a git killed meanwhile leaves it, and every git that would change the file fails while
it is there. memfile runs its own git only while it holds the writer lock, and its git dies with it
(`files.dying_with_parent`): so a lock found under the writer lock while no git runs in the vault was
left by a killed git, and goes (`clear_stale_locks`). A git that runs (a person's `git commit` with its
editor open, or one a killed server started) is waited for, then named (`Busy`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import Busy


def git_locks(root: Path) -> list[str]:
    """git's lock files in the vault's .git, relative to the vault (`objects/maintenance.lock` of a killed
    auto-gc among them; the loose objects' fan-out folders, hooks and logs hold none and are not walked)."""
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
