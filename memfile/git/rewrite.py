"""Rewriting the vault's whole history for `memfile purge`: the only home of git-filter-repo.

git-filter-repo (the tool git's own documentation recommends over `filter-branch`) runs in a child
process, `python -m memfile.git.rewrite`, through its library API: a `RepoFilter` whose blob callback
drops every version of one memory (or removes one string from them), over every ref: branches, tags,
remote-tracking branches. It runs with `--partial`, so memfile, not filter-repo, decides the rest: the
`origin` remote and the remote-tracking branches stay where they are (rewritten, not moved), and
`expire_old_objects` then expires the reflog and prunes every object nothing reaches any more, which
is what makes the old versions unreadable (`git cat-file` finds nothing). The plan reaches the child
on its standard input, never on a command line another user could read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import GitError
from ..files import dying_with_parent

if TYPE_CHECKING:
    from .store import GitStore

#: In .git/: a purge's plan, from before its first change until it is done (memfile.purge); a write that
#: finds it finishes the purge first.
PURGE_JOURNAL = "MEMFILE_PURGE"
#: Where filter-repo keeps what it ran (its maps of old commits); removed before and after each rewrite,
#: so a rewrite never counts as the continuation of another (filter-repo would ask on a terminal).
FILTER_DIR = "filter-repo"
_FRONT_MATTER = re.compile(rb"\A(?:\xef\xbb\xbf)?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*\r?$", re.DOTALL | re.MULTILINE)
_NO_BLOB = "0" * 40


@dataclass(frozen=True)
class Versions:
    """The versions of one memory in every ref's history, and what rewriting them away touches."""

    blobs: frozenset[str]  # the blob of each version
    commits: frozenset[str]  # the commits that change: each that added a version, and every one after it
    refs: tuple[str, ...]  # the refs whose tip is among those commits (refs/heads/main, refs/remotes/origin/main)


def holds_id(data: bytes, memory_id: str) -> bool:
    """Whether a file's front-matter names `memory_id` as its id."""
    found = _FRONT_MATTER.match(data)
    line = re.compile(rb"(?m)^id:[ \t]*[\"']?" + re.escape(memory_id.encode()) + rb"[\"']?[ \t]*\r?$")
    return bool(found and line.search(found.group(1)))


def versions(git: GitStore, folder: str, memory_id: str, text: bytes | None = None) -> Versions:
    """Every version of the memory `memory_id` under `folder` in the history of every ref (with `text`: only
    the versions that hold it), found by the id in their front-matter wherever the file was."""
    _, out = git._run("log", "--all", "--format=", "--name-only", "--no-renames", f"-S{memory_id}", "--", folder)
    paths = sorted({p for p in out.splitlines() if p})
    if not paths:
        return Versions(frozenset(), frozenset(), ())
    _, out = git._run(
        "log", "--all", "--format=\x1e%H", "--raw", "--no-abbrev", "--no-renames", "-m", "--full-history", "--", *paths
    )
    added: dict[str, set[str]] = defaultdict(set)  # blob -> the commits that put it somewhere
    for record in out.split("\x1e")[1:]:
        sha, *lines = record.strip().split("\n")
        for line in lines:
            if line.startswith(":"):
                blob = line.split("\t", 1)[0].split()[3]
                if blob != _NO_BLOB:
                    added[blob].add(sha)
    candidates = sorted(added)
    contents = git.read_objects(candidates, "the memory's versions")
    blobs = {
        blob
        for blob, data in zip(candidates, contents, strict=True)
        if data is not None and holds_id(data, memory_id) and (text is None or text in data)
    }
    commits = _with_descendants(git, {sha for blob in blobs for sha in added[blob]})
    _, out = git._run("for-each-ref", "--format=%(refname)\t%(objectname)\t%(*objectname)")
    refs = tuple(
        ref
        for ref, tip, peeled in (line.split("\t") for line in out.splitlines() if line)
        if (peeled or tip) in commits
    )
    return Versions(frozenset(blobs), frozenset(commits), refs)


def _with_descendants(git: GitStore, commits: set[str]) -> set[str]:
    """`commits` and every commit of any ref that has one of them as an ancestor."""
    if not commits:
        return set()
    _, out = git._run("rev-list", "--all", "--parents")
    children: dict[str, list[str]] = defaultdict(list)
    for line in out.splitlines():
        sha, *parents = line.split()
        for parent in parents:
            children[parent].append(sha)
    found, todo = set(commits), list(commits)
    while todo:
        for child in children[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def rewrite(
    git: GitStore, strip: frozenset[str], text: bytes | None = None, text_in: frozenset[str] = frozenset()
) -> None:
    """Rewrite every ref's history without the blobs `strip`, and with `text` removed from the blobs
    `text_in`; the work tree follows (filter-repo's `reset --hard`: the caller has committed everything).
    The same plan on the same history makes the same commits, so running it again changes nothing more.

    Raises:
        GitError: filter-repo failed (its words); the refs are as they were unless it got to move them.
    """
    plan = {
        "strip": sorted(strip),
        "text_in": sorted(text_in),
        "text": (text or b"").decode("utf-8", "surrogateescape"),
    }
    shutil.rmtree(git.root / ".git" / FILTER_DIR, ignore_errors=True)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memfile.git.rewrite"],
            cwd=git.root,
            env={**os.environ, **git._env},
            input=json.dumps(plan).encode("utf-8"),
            capture_output=True,
            check=False,
            **dying_with_parent(),
        )
    except OSError as exc:
        raise GitError(f"git filter-repo could not be run: {exc}") from None
    if done.returncode != 0:
        words = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()[-5:]
        raise GitError(f"git filter-repo failed in {git.root}: {' '.join(words) or done.returncode}")


def expire_old_objects(git: GitStore) -> None:
    """Make the history a rewrite replaced unreadable: expire every reflog, prune every object nothing
    reaches now (`git gc --prune=now`), and remove what still names old commits (ORIG_HEAD, FETCH_HEAD,
    filter-repo's maps)."""
    shutil.rmtree(git.root / ".git" / FILTER_DIR, ignore_errors=True)
    for name in ("ORIG_HEAD", "FETCH_HEAD"):
        (git.root / ".git" / name).unlink(missing_ok=True)
    git._run("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    # --force: a gc.pid a killed purge's gc left must not stop the next one (the writer lock keeps memfile's
    # own gcs apart, and the lock holder waited for every git still running in the vault).
    git._run("gc", "--prune=now", "--quiet", "--force")


def _filter() -> None:
    """The child: run filter-repo over the repository in the working folder with the plan on stdin."""
    import git_filter_repo as fr

    plan = json.load(sys.stdin)
    strip = {sha.encode() for sha in plan["strip"]}
    text_in = {sha.encode() for sha in plan["text_in"]}
    text = plan["text"].encode("utf-8", "surrogateescape")

    def blob_callback(blob: fr.Blob, _metadata: object) -> None:
        if blob.original_id in strip:
            blob.skip()
        elif text and blob.original_id in text_in:
            blob.data = blob.data.replace(text, b"")

    args = fr.FilteringOptions.parse_args(["--force", "--partial", "--quiet", "--replace-refs", "delete-no-add"])
    fr.RepoFilter(args, blob_callback=blob_callback).run()


if __name__ == "__main__":
    _filter()
