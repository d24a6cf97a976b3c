"""The git adapter: every change to a vault becomes one readable commit.

Every git command runs through GitPython's `Git.execute` (`execute`), with an explicit author and
committer so commits work on machines with no git identity. No value from outside (a remote, a branch,
a revision, a path, memfile.toml) reaches git as an option: each is checked (`_plain`) or passed after
`--`, and the transports that run a command named in a URL (`ext::`, `fd::`) are off. git's merge
driver for memory files (`run_merge_driver`) and its setup in a repository are here too.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FileParseError, GitBusy, GitDiskFull, GitError, InvalidInput
from ..files import atomic_write, dying_with_parent
from .merge import ATTRIBUTES, MERGE_RULE, merge_driver_command, merge_memory

#: From this many files, `commit`'s `git add` writes them into one pack file instead of one file each
#: (a blob above `core.bigFileThreshold` is streamed into the command's pack: the same objects).
PACKED_ADD = 1000
# Signing prompts would hang a headless agent; quoted paths would not match ours; a URL must never run a command.
_OPTIONS = (
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.quotepath=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "protocol.fd.allow=never",
)

#: In .git/: exists while a sync runs git; its flock is held by that sync and every git process it started,
#: so a killed sync's git still at work is told from one that is gone (memfile.git.remote.recover_interrupted_sync).
SYNC_MARK = "MEMFILE_SYNC"
#: The temporary files git gives a merge driver, in the work tree's top folder.
MERGE_DEBRIS = ".merge_file_"
#: A remote's name as memfile accepts it (git allows more; none of it may look like an option or a path).
_REMOTE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
REMOTE_NAME_RULE = "a remote name: letters, digits, _ . / -, not starting with - . or /"


@dataclass(frozen=True)
class Commit:
    """One commit as history shows it."""

    sha: str
    date: str  # ISO-8601 with the committer's offset, as git gives it
    author: str
    subject: str
    body: str = ""
    paths: tuple[str, ...] = ()


_FIELD, _RECORD = "\x1f", "\x1e"
_FORMAT = f"--format={_RECORD}%H{_FIELD}%aI{_FIELD}%an{_FIELD}%s{_FIELD}%b{_FIELD}"


class GitStore:
    """The vault's own git repository (never an enclosing one)."""

    def __init__(self, root: Path, author_name: str, author_email: str) -> None:
        self.root = root
        self._env = {
            "GIT_AUTHOR_NAME": author_name,
            "GIT_AUTHOR_EMAIL": author_email,
            "GIT_COMMITTER_NAME": author_name,
            "GIT_COMMITTER_EMAIL": author_email,
            # Never let git discover a repository above the vault.
            "GIT_CEILING_DIRECTORIES": str(root.parent),
        }
        self._clean_index: tuple[int, int, int] | None = None  # .git/index's stat when nothing was staged
        self._inherit: tuple[int, ...] = ()  # file descriptors every git process gets (the sync mark's flock)

    def exists(self) -> bool:
        """True when the vault folder is the top of its own repository."""
        return (self.root / ".git").exists()

    def init(self) -> None:
        import git

        try:
            git.Repo.init(self.root, initial_branch="main").close()
        except (git.GitCommandError, git.GitCommandNotFound, OSError) as exc:
            raise GitError(f"could not create a git repository in {self.root}: {_reason(exc)}") from None

    def _run(
        self, *args: str, check: bool = True, errors: bool = False, config: tuple[str, ...] = ()
    ) -> tuple[int, str]:
        """Run git: (status, stdout; on failure with `errors`, stdout and stderr); `config`: `-c` options."""
        if not self.exists():
            raise GitError(f"{self.root} is not a git repository ({self.root}); run: memfile init {self.root}")
        inherit = {"pass_fds": self._inherit} if self._inherit else {}
        status, out, err = execute(self.root, [*config, *args], self._env, **inherit)
        if check and status != 0:
            raise _failed(f"git {args[0]}", self.root, err or out)
        return status, (f"{out}\n{err}".strip() if errors and status != 0 else out)

    def _run_beside(self, meanwhile: Callable[[], None], *args: str, config: tuple[str, ...] = ()) -> tuple[int, str]:
        """`_run(*args, check=False, errors=True)` with `meanwhile()` run while git works (and git waited for
        when it raises). The output goes to a temp file: a pipe nobody reads could fill up."""
        with tempfile.TemporaryFile() as output:
            try:
                process = subprocess.Popen(
                    _command([*config, *args]),
                    cwd=self.root,
                    env={**os.environ, **self._env},
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=self._inherit,
                    **dying_with_parent(),
                )
            except OSError as exc:
                raise GitError(f"git could not be run: {_reason(exc)}; install git and try again") from None
            try:
                meanwhile()
            finally:
                status = process.wait()
            output.seek(0)
            return status, output.read().decode("utf-8", "replace").strip()

    def unfinished_operation(self) -> str | None:
        """The git operation left half done in the repository (merge, rebase, ...), if any."""
        git_dir = self.root / ".git"
        for marker, name in (
            ("MERGE_HEAD", "merge"),
            ("rebase-merge", "rebase"),
            ("rebase-apply", "rebase"),
            ("CHERRY_PICK_HEAD", "cherry-pick"),
            ("REVERT_HEAD", "revert"),
        ):
            if (git_dir / marker).exists():
                return name
        return None

    def unstage(self, *relpaths: str) -> None:
        """Best effort: drop what `commit` staged for paths whose commit failed."""
        self._run("reset", "--quiet", "--", *relpaths, check=False)

    def is_changed(self, relpath: str) -> bool:
        """True when the file differs from its last committed version (or was never committed)."""
        return bool(self.changed_paths(relpath))

    def changed_paths(self, folder: str) -> list[str]:
        """Files under `folder` that differ from the last commit or were never committed (`--no-renames`:
        else a staged removal and a similar new file show as one rename, naming only the new path)."""
        _, out = self._run("status", "--porcelain", "-z", "--no-renames", "--untracked-files=all", "--", folder)
        return [entry[3:] for entry in out.split("\0") if entry]  # each "XY path" (no renames: one path each)

    def uncommitted(self) -> list[str]:
        """Tracked files anywhere in the vault whose changes are not committed (staged or not)."""
        _, out = self._run("status", "--porcelain", "-z", "--no-renames", "--untracked-files=no")
        return sorted(entry[3:] for entry in out.split("\0") if entry)

    def stashes(self) -> int:
        """How many stash entries the repository holds (`git stash list`)."""
        _, out = self._run("stash", "list", check=False)
        return len(out.splitlines())

    def remote_status(self) -> dict[str, object] | None:
        """The upstream of the current branch and how far HEAD is ahead of / behind it (no fetch)."""
        if not self.exists():
            return None
        status, upstream = self._run("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}", check=False)
        if status != 0:
            _, remotes = self._run("remote", check=False)
            return {"upstream": None, "remotes": remotes.split(), "ahead": None, "behind": None}
        _, counts = self._run("rev-list", "--left-right", "--count", "HEAD...@{u}")
        ahead, behind = (int(n) for n in counts.split())
        return {"upstream": upstream.strip(), "remotes": self.remotes(), "ahead": ahead, "behind": behind}

    def commit(self, relpaths: list[str], message: str, meanwhile: Callable[[], None] | None = None) -> str | None:
        """Commit exactly these paths (adds, changes, removals) in one commit. `meanwhile`: run in this
        process while `git add` stages the files (a bulk write builds the index meanwhile).

        Returns:
            The new commit's sha, or None when nothing changed (no empty commits).
        """
        on_disk = [p for p in relpaths if (self.root / p).exists()]
        kept = set(on_disk)
        gone = [p for p in relpaths if p not in kept]
        in_index = self._listed("ls-files", "--", *gone) if gone else set()  # a removal to stage
        # not in the index either: a removal already staged (a `git rm`, a forget killed before its commit)
        in_head = self._listed("ls-tree", "--name-only", "HEAD", "--", *gone) if gone else set()
        present = on_disk + [p for p in gone if p in in_index or p in in_head]
        if not present and meanwhile is None:  # (else it runs in _stage, with nothing to stage)
            return None
        others = self._staged_by_hand(present)
        self._clean_index = None
        on_disk = self._stage(on_disk, in_index, in_head, meanwhile)
        # Staged now: what is on disk, and the removal of what HEAD has (a file staged as new and then
        # deleted, git's `AD`, left the index with the add and is nothing to commit).
        kept = set(on_disk)
        present = on_disk + [p for p in relpaths if p not in kept and p in in_head]
        return self._commit_staged(present, message, others) if present else None

    def _staged_by_hand(self, present: list[str]) -> set[str]:
        """What a person staged by hand besides `present`: it stays staged and out of this commit, which
        then names its paths (costing git a second index); usually nothing is."""
        if self._clean_index is not None and self._clean_index == _stat_of(self.root / ".git" / "index"):
            return set()  # the index is as this object's last commit left it: nothing staged
        _, staged = self._run("diff", "--cached", "--name-only", "-z", "--no-renames")
        return set(staged.split("\0")) - {""} - set(present)

    def _stage(
        self, on_disk: list[str], in_index: set[str], in_head: set[str], meanwhile: Callable[[], None] | None
    ) -> list[str]:
        """`git add` the files on disk and the removals of those in the index, `meanwhile` run beside it (or
        after, with nothing to stage); a file removed before git reads it has its removal staged instead.
        Returns the files on disk that were staged."""
        for _ in range(3):  # a file removed between the look in `commit` and `git add` fails its pathspec
            if not (on_disk or in_index):
                break
            many = ("-c", "core.bigFileThreshold=1") if len(on_disk) >= PACKED_ADD else ()  # see PACKED_ADD
            adding = ("add", "--all", "--", *on_disk, *in_index)
            if meanwhile is not None:
                status, out = self._run_beside(meanwhile, *adding, config=many)
                meanwhile = None
            else:
                status, out = self._run(*adding, check=False, errors=True, config=many)
            if status == 0:
                break
            gone_now = [p for p in on_disk if not (self.root / p).exists()]
            if not gone_now:
                raise _failed("git add", self.root, out)
            on_disk = [p for p in on_disk if p not in gone_now]
            in_index |= self._listed("ls-files", "--", *gone_now)  # tracked: its removal is staged instead
            in_head |= self._listed("ls-tree", "--name-only", "HEAD", "--", *gone_now)
        if meanwhile is not None:  # nothing to stage
            meanwhile()
        return on_disk

    def _commit_staged(self, present: list[str], message: str, others: set[str]) -> str | None:
        """Commit what is staged of `present` (only those paths when `others` are staged too); the sha."""
        status, out = self._run(
            "commit", "--quiet", "-m", message, *(["--", *present] if others else []), check=False, errors=True
        )
        if status != 0:
            if self._run("diff", "--cached", "--quiet", "--", *present, check=False)[0] == 0:
                return None  # nothing to commit: the files already were as committed
            raise _failed("git commit", self.root, out)
        if not others:  # everything staged went into this commit; any later `git add` rewrites the index
            self._clean_index = _stat_of(self.root / ".git" / "index")
        return self.head()

    def head(self) -> str:
        """The sha of HEAD (GitPython reads it from the repository's files: no git process)."""
        import git

        try:
            with git.Repo(self.root) as repo:
                return git.SymbolicReference.dereference_recursive(repo, "HEAD")
        except (ValueError, git.GitError, OSError):
            return self._run("rev-parse", "HEAD")[1].strip()  # git's own words for what is wrong

    # --- history --------------------------------------------------------------

    def log(
        self,
        *paths: str,
        since: str | None = None,
        limit: int | None = None,
        names: bool = True,
        first_parent: bool = False,
        rev: str = "HEAD",
    ) -> list[Commit]:
        """Commits touching `paths` (all when none), newest first from `rev`, each with the paths it touched.

        `names=False` leaves `Commit.paths` empty (sparing git a diff of every commit). `first_parent`: only
        the commits made on this branch (a merge's paths are what it brought in).
        """
        if not self.exists():
            return []
        args = ["log", _FORMAT, *(["--name-only"] if names else []), "--no-renames"]
        args += ["--first-parent", "-m"] if first_parent else []
        args += ["--full-history"] if paths else []
        if since:
            args.append(f"--since={since}")
        if limit:
            args.append(f"-n{limit}")
        status, out = self._run(*args, _plain(rev, "revision"), "--", *paths, check=False, errors=True)
        if status != 0:
            if self._run("rev-parse", "--verify", "--quiet", "HEAD", check=False)[0] != 0:
                return []  # a repository without commits yet
            raise GitError(f"git log failed in {self.root}: {out.strip()}")
        commits = []
        for record in out.split(_RECORD)[1:]:
            sha, date, author, subject, body, touched = record.split(_FIELD, 5)
            commits.append(Commit(sha, date, author, subject, body.strip(), tuple(n for n in touched.split("\n") if n)))
        return commits

    def read_all(self, wanted: list[tuple[str, str]]) -> list[bytes | None]:
        """Many reads in one git process (`cat-file --batch`): the bytes of each (rev, path), None when absent."""
        if not wanted:
            return []
        return self.read_objects([f"{rev}:{path}" for rev, path in wanted], f"the history of {wanted[0][1]}")

    def read_objects(self, names: list[str], what: str = "objects") -> list[bytes | None]:
        """The bytes of each blob `names` names (a sha, or `rev:path`), in one git process; None when absent."""
        with tempfile.TemporaryFile() as request:
            request.write("".join(f"{name}\n" for name in names).encode("utf-8"))
            request.seek(0)
            status, out, err = execute(
                self.root,
                ["cat-file", "--batch"],
                self._env,
                istream=request,
                stdout_as_string=False,
                strip_newline_in_stdout=False,  # each file's bytes exactly, the last one's newline included
            )
        if status != 0:
            raise GitError(f"git could not read {what}: {err.strip()}")
        at = 0
        found: list[Any] = []
        for _ in names:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            at = end + 1
            if header[-1] == b"missing" or len(header) < 3:
                found.append(None)
                continue
            size = int(header[2])
            found.append(out[at : at + size] if header[1] == b"blob" else None)
            at += size + 1
        return found

    def tree(self, rev: str, folder: str) -> dict[str, str]:
        """The files under `folder` at the commit `rev`: path -> the sha of its blob (symlinks and
        submodules left out: neither is a file a checkout reads as it is)."""
        out = self._run("ls-tree", "-r", "-z", "--full-tree", _plain(rev, "revision"), "--", folder)[1]
        found = {}
        for entry in out.split("\0"):
            info, _, path = entry.partition("\t")
            mode, kind, sha = (info.split() + ["", "", ""])[:3]
            if kind == "blob" and mode != "120000":
                found[path] = sha
        return found

    def changed_since(self, rev: str, folder: str) -> set[str]:
        """The files under `folder` whose bytes in the work tree differ from the commit `rev`'s (changed,
        added or removed; untracked files left out). Reads only: git's index is not refreshed."""
        args = ("--no-optional-locks", "diff", "--name-only", "--no-renames", "-z", _plain(rev, "revision"))
        return {path for path in self._run(*args, "--", folder)[1].split("\0") if path}

    def paths_that_held(self, text: str, folder: str) -> list[str]:
        """Files under `folder` whose history added or removed `text`, most recent first (git's pickaxe)."""
        if not text:
            return []
        _, out = self._run("log", "--format=", "--name-only", f"-S{text}", "--", folder, check=False)
        return list(dict.fromkeys(p for p in out.splitlines() if p))

    def resolve(self, rev: str) -> str | None:
        """The full sha of a revision (sha, branch, HEAD~2, ...), or None when it names no commit."""
        if rev.startswith("-"):
            return None
        status, out = self._run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        return out.strip() if status == 0 else None

    def last_before(self, moment: str, relpath: str) -> str | None:
        """The last commit touching `relpath` at or before `moment` (any date git understands)."""
        _, out = self._run("rev-list", "-1", "--full-history", f"--before={moment}", "HEAD", "--", relpath, check=False)
        return out.strip() or None

    def revert(self, sha: str, message: str) -> str | None:
        """Commit the inverse of `sha` with `message`; on a conflict nothing is left changed.

        Raises:
            GitError: the revert does not apply cleanly (it was aborted).
        """
        status, out = self._run("revert", "--no-commit", "--no-edit", _plain(sha, "commit"), check=False)
        if status != 0:
            self._run("revert", "--abort", check=False)
            raise GitError(f"git could not undo {sha[:8]} cleanly: {out.strip() or 'conflict'}; nothing was changed")
        self._run("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    # --- sync ---------------------------------------------------------------------

    def branch(self) -> str:
        """The current branch's name.

        Raises:
            GitError: HEAD is detached (on no branch).
        """
        _, out = self._run("symbolic-ref", "--short", "-q", "HEAD", check=False)
        if not out.strip():
            raise GitError(
                "HEAD is detached (the vault is on no branch); get back on one with: git switch main "
                "(or git switch -c NAME to keep commits made since), then try again"
            )
        return out.strip()

    def detached(self) -> bool:
        """Whether HEAD names a commit rather than a branch."""
        import git

        try:
            with git.Repo(self.root) as repo:
                return repo.head.is_detached
        except (git.GitError, OSError):  # no repository to tell: the write that follows says why
            return True

    def valid_branch(self, name: str) -> bool:
        """True when `name` can be a branch (git's rules), never one that looks like an option or HEAD."""
        if not name or name.startswith("-") or name == "HEAD" or _CONTROL.search(name):
            return False
        return self._run("check-ref-format", f"refs/heads/{name}", check=False)[0] == 0

    def set_config(self, name: str, value: str) -> None:
        self._run("config", "--local", "--", name, value)

    def get_config(self, name: str) -> str | None:
        status, out = self._run("config", "--local", "--get", "--", name, check=False)
        return out.strip() if status == 0 else None

    def remotes(self) -> list[str]:
        """The names of the repository's remotes (`git remote`)."""
        return self._run("remote")[1].split()

    def remote_url(self, name: str) -> str | None:
        return self.get_config(f"remote.{_remote(name)}.url")

    def add_remote(self, name: str, url: str) -> None:
        self._run("remote", "add", "--", _remote(name), _plain(url, "URL"))

    def set_upstream(self, remote: str, branch: str) -> bool:
        """Make `remote`/`branch` the current branch's upstream when it has none (for `git status` and
        `memfile status`); True when it was set."""
        local = self.branch()
        if self.get_config(f"branch.{local}.remote") or self.get_config(f"branch.{local}.merge"):
            return False
        self.set_config(f"branch.{local}.remote", _remote(remote))
        self.set_config(f"branch.{local}.merge", f"refs/heads/{_plain(branch, 'branch')}")
        return True

    def fetch(self, remote: str) -> None:
        status, out = self._run(
            "fetch", "--quiet", "--no-recurse-submodules", "--", _remote(remote), check=False, errors=True
        )
        if status != 0:
            raise GitError(f"could not fetch from {remote!r} ({out.strip() or 'no answer'}); nothing was changed here")

    def has_ref(self, ref: str) -> bool:
        return self._run("rev-parse", "--verify", "--quiet", _plain(ref, "revision"), check=False)[0] == 0

    def set_ref(self, ref: str, sha: str | None) -> None:
        """Point `ref` at the commit `sha`; None deletes it."""
        if sha is None:
            self._run("update-ref", "-d", _plain(ref, "ref"))
        else:
            self._run("update-ref", _plain(ref, "ref"), _plain(sha, "sha"))

    def count(self, revisions: str) -> int:
        return int(self._run("rev-list", "--count", _plain(revisions, "revision"), "--")[1].strip() or 0)

    def changed_between(self, old: str, new: str) -> list[str]:
        out = self._run("diff", "--name-only", "--no-renames", _plain(old, "commit"), _plain(new, "commit"), "--")[1]
        return [p for p in out.splitlines() if p]

    @contextmanager
    def syncing(self) -> Iterator[None]:
        """Mark a sync at work: .git/MEMFILE_SYNC, whose flock every git process it starts inherits, so a
        killed sync is recognised and its git still at work waited for (`sync_processes_gone`)."""
        path = self.root / ".git" / SYNC_MARK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.set_inheritable(fd, True)
            self._inherit = (fd,)
            yield
        finally:  # every git this sync started has ended (a killed sync never gets here: its mark stays)
            self._inherit = ()
            path.unlink(missing_ok=True)
            os.close(fd)

    def sync_mark_left(self) -> bool:
        """True when a sync that was killed left its mark (one stat)."""
        return (self.root / ".git" / SYNC_MARK).exists()

    def sync_processes_gone(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the git processes a killed sync started to end; True when none is left
        (then the mark is removed: what they left behind is theirs to clean up)."""
        path = self.root / ".git" / SYNC_MARK
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.02)
            path.unlink(missing_ok=True)
            return True
        finally:
            os.close(fd)

    def merge_subject(self) -> str | None:
        """The first line of the message of the merge in progress (MERGE_HEAD), or None when none is."""
        git_dir = self.root / ".git"
        if not (git_dir / "MERGE_HEAD").exists():
            return None
        try:
            return (git_dir / "MERGE_MSG").read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        except OSError:
            return ""

    def merge_message(self) -> str:
        """The message of the merge in progress, without git's comment lines."""
        text = (self.root / ".git" / "MERGE_MSG").read_text(encoding="utf-8", errors="replace")
        return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip()

    def index_lock(self) -> Path | None:
        path = self.root / ".git" / "index.lock"
        return path if path.exists() else None

    def merge_debris(self) -> list[Path]:
        """Temporary files of a merge driver whose git was killed (`.merge_file_XXXXXX`, and memfile's
        temp files of them), in the vault's top folder."""
        try:
            with os.scandir(self.root) as entries:
                names = (MERGE_DEBRIS, f".memfile-tmp-{MERGE_DEBRIS}")
                return [Path(e.path) for e in entries if e.name.startswith(names) and e.is_file(follow_symlinks=False)]
        except OSError:
            return []

    def merge(self, ref: str, message: str, env: dict[str, str] | None = None) -> list[str]:
        """Merge `ref` into HEAD (a fast-forward when HEAD has nothing of its own); the paths left unmerged.
        `env`: more environment for git and the merge driver it runs."""
        saved = self._env
        self._env = {**saved, **(env or {})}
        try:
            status, merged = self._run(
                "merge", "--no-edit", "-m", message, "--", _plain(ref, "revision"), check=False, errors=True
            )
        finally:
            self._env = saved
        if status == 0:
            return []
        unmerged = self.unmerged_paths()
        if not unmerged:
            self._run("merge", "--abort", check=False)
            raise GitError(f"git could not merge {ref} ({merged.strip() or 'no reason given'}); nothing was changed")
        return unmerged

    def unmerged_paths(self) -> list[str]:
        _, out = self._run("diff", "--name-only", "--diff-filter=U", check=False)
        return [p for p in out.splitlines() if p]

    def unmerged_sides(self, relpath: str) -> set[int]:
        """Which versions an unmerged path has: 1 base, 2 ours, 3 theirs (absent: that side deleted it)."""
        _, out = self._run("ls-files", "-u", "--", relpath)
        return {int(line.split()[2]) for line in out.splitlines() if line.strip()}

    def take_side(self, relpath: str, side: str) -> None:
        """Resolve an unmerged path with one side's version (`ours` or `theirs`), or as deleted when it has none."""
        if side not in ("ours", "theirs"):
            raise ValueError(side)
        if (2 if side == "ours" else 3) in self.unmerged_sides(relpath):
            self._run("checkout", f"--{side}", "--", relpath)
            self._run("add", "--", relpath)
        else:
            self._run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", relpath)
            (self.root / relpath).unlink(missing_ok=True)

    def finish_merge(self, message: str) -> str:
        self._run("commit", "--quiet", "--no-edit", "-m", message)
        return self.head()

    def abort_merge(self) -> None:
        self._run("merge", "--abort", check=False)

    def push(self, remote: str, branch: str, lease: str | None = None, source: str = "HEAD") -> bool:
        """Push `source` (HEAD, or a ref) to the remote branch; False when the remote moved on meanwhile.

        Never forced, but with `lease` (a sha): replace the remote branch while it still is that commit
        (`--force-with-lease`, a purge's rewritten history); False when it is not.
        """
        target = f"refs/heads/{_plain(branch, 'branch')}"
        status, out = self._run(
            "push",
            "--quiet",
            "--recurse-submodules=no",
            *([f"--force-with-lease={target}:{_plain(lease, 'lease')}"] if lease else []),
            "--",
            _remote(remote),
            f"{_plain(source, 'ref')}:{target}",
            check=False,
            errors=True,
        )
        if status == 0:
            return True
        moved = ("fetch first", "non-fast-forward", "stale info")
        if any(word in out for word in moved) and "remote rejected" not in out:
            return False
        raise GitError(f"could not push to {remote!r}: {out.strip()}; your commits are kept here")

    def move(self, old: str, new: str, message: str) -> str | None:
        """`git mv` one file and commit the move."""
        self._run("mv", "--", old, new)
        self._run("commit", "--quiet", "-m", message, "--", old, new)
        return self.head()

    def ignored(self, relpaths: list[str]) -> set[str]:
        """The paths among `relpaths` that the vault's ignore rules keep out of git (`git add` refuses them)."""
        if not self.exists():
            return set()  # no git to ask: the commit that follows says why
        with tempfile.TemporaryFile() as paths:
            paths.write("\0".join(relpaths).encode("utf-8", "surrogateescape"))
            paths.seek(0)
            try:
                status, out, _ = execute(self.root, ["check-ignore", "--stdin", "-z"], self._env, istream=paths)
            except GitError:
                return set()
        return {path for path in out.split("\0") if path} if status == 0 else set()

    def in_head(self, relpaths: list[str]) -> list[str]:
        """Those of `relpaths` that HEAD has."""
        return sorted(self._listed("ls-tree", "--name-only", "HEAD", "--", *relpaths)) if relpaths else []

    def _listed(self, *args: str) -> set[str]:
        """The paths a listing command (`ls-files`, `ls-tree`) prints; none when it fails (no HEAD yet)."""
        status, out = self._run(*args, check=False)
        return set(out.splitlines()) if status == 0 else set()


#: Loose objects a resident process lets git keep before it packs them (`pack_loose_objects`).
LOOSE_MOST = 256


def loose_objects(root: Path) -> int:
    """How many loose objects the vault's repository holds (each commit adds its new files and folders)."""
    objects = root / ".git" / "objects"
    count = 0
    for fanout in range(256):
        try:
            count += len(os.listdir(objects / f"{fanout:02x}"))
        except (FileNotFoundError, NotADirectoryError):
            pass
    return count


def pack_loose_objects(root: Path, most: int = LOOSE_MOST) -> bool:
    """Pack the repository's loose objects when there are more than `most` (git waits for 6,700); True when
    it packed. `git repack -d` is safe beside commits being made (it deletes only what it packed)."""
    if loose_objects(root) <= most:
        return False
    execute(root, ["repack", "-d", "-l", "-q"], {})
    return True


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _plain(value: str, what: str) -> str:
    """`value`, which git must never read as an option (it does not start with `-`)."""
    if not value or value.startswith("-") or "\0" in value or "\n" in value:
        raise InvalidInput(what, value, f"a {what} that does not start with '-'")
    return value


def valid_remote_name(name: str) -> bool:
    """True for a remote's name memfile passes to git: never an option, a URL or a path."""
    return bool(_REMOTE_NAME.fullmatch(name or "")) and ".." not in name and not name.endswith("/")


def _remote(name: str) -> str:
    """A remote's name, checked (URLs and paths reach git only through `remote add`)."""
    if not valid_remote_name(name):
        raise InvalidInput("remote", name, REMOTE_NAME_RULE)
    return name


def config_here(name: str) -> str | None:
    """A config value of the repository git runs this process in (a merge driver's), or None."""
    try:
        status, out, _ = execute(None, ["config", "--get", "--", name], {})
    except GitError:
        return None
    return out.strip() or None if status == 0 else None


def _stat_of(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


#: What git says when the disk is full (its own words, and the system's).
_NO_SPACE = ("No space left on device", "Out of diskspace", "Disk quota exceeded")


def _failed(command: str, root: Path, output: str) -> GitError:
    """The error of a git command that failed with `output`: GitDiskFull, GitBusy (a lock file of a git
    started meanwhile was in its way), else GitError."""
    if any(words in output for words in _NO_SPACE):
        return GitDiskFull(f"{command} failed in {root}: the disk is full (free some space, then try again)")
    if ".lock': File exists" in output:
        return GitBusy(
            f"{command} failed in {root}: a git command at work in the vault holds a lock git needs "
            f"({output.strip()[:300]}); nothing was written: try again in a moment"
        )
    return GitError(f"{command} failed in {root}: {output.strip()}")


def merge_text(ours: str, base: str, theirs: str) -> bytes | None:
    """`git merge-file` of three files, line by line: the merged bytes, or None when lines conflict."""
    status, out, _ = execute(None, ["merge-file", "-p", "--", ours, base, theirs], {}, stdout_as_string=False)
    return out if status == 0 else None


def _command(args: list[str]) -> list[str]:
    """The command line of git with memfile's options (`_OPTIONS`) and `args`."""
    import git  # imported on first use: read-only commands (recall) never pay for it

    return [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *_OPTIONS, *args]


def execute(cwd: Path | None, args: list[str], env: dict[str, str], **options: Any) -> tuple[int, Any, str]:
    """Run git in `cwd` (a repository, or None) through GitPython: (status, stdout, stderr). `options`: more
    of `git.Git.execute`'s or subprocess's.

    Raises:
        GitError: git could not be run.
    """
    import git

    try:
        return git.Git(cwd).execute(
            _command(args),
            with_extended_output=True,
            with_exceptions=False,
            env=env,
            **dying_with_parent(),
            **options,
        )
    except (git.GitCommandNotFound, OSError) as exc:
        raise GitError(f"git could not be run: {_reason(exc)}; install git and try again") from None


def _reason(exc: BaseException) -> str:
    return getattr(exc, "stderr", None) and str(exc.stderr).strip() or str(exc)  # type: ignore[attr-defined]


# --- git's merge driver for memory files: what git runs, and its setup in a repository ---

#: Local git config: this clone's name, recorded in the conflicts its merges make.
MACHINE_CONFIG = "memfile.machine"


def run_merge_driver(base: str, ours: str, theirs: str, relpath: str) -> int:
    """The merge driver: write the merge of three versions into `ours`; 0 when merged, 1 when git must decide.

    A memory merges field by field, a file without front-matter line by line (`git merge-file`). When
    neither works, `ours` is left and git reports the path unmerged (sync keeps ours; theirs is in the merge).
    """
    base_data = Path(base).read_bytes()
    try:
        result = merge_memory(
            base_data or None, Path(ours).read_bytes(), Path(theirs).read_bytes(), relpath, machine=_driver_machine()
        )
    except FileParseError:
        merged = merge_text(ours, base, theirs)
        if merged is None:
            return 1
        atomic_write(Path(ours), merged)
        return 0
    except OSError:
        return 1
    atomic_write(Path(ours), result.data)
    return 0


def _driver_machine() -> str | None:
    """The machine merging: given by sync, else (a plain `git merge`) from the repository's config."""
    return os.environ.get("MEMFILE_MACHINE") or config_here(MACHINE_CONFIG)


def machine_name(git: GitStore, create: bool = False) -> str | None:
    """This clone's name in the conflicts it makes (local git config, never synced); made when asked."""
    name = git.get_config(MACHINE_CONFIG)
    if name or not create:
        return name

    host = re.sub(r"[^A-Za-z0-9.-]", "", socket.gethostname())[:40] or "machine"
    name = f"{host}-{os.urandom(3).hex()}"
    git.set_config(MACHINE_CONFIG, name)
    return name


def configure_merge_driver(git: GitStore) -> bool:
    """Point the repository's config at memfile's merge driver; True when it had to."""
    machine_name(git, create=True)  # the driver records it in the conflicts it makes
    if git.get_config("merge.memfile.driver") == merge_driver_command():
        return False
    git.set_config("merge.memfile.name", "memfile: merge memories field by field")
    git.set_config("merge.memfile.driver", merge_driver_command())
    return True


def write_attributes(root: Path, rule: str = MERGE_RULE) -> bool:
    """Make .gitattributes hold `rule` (by default: memory files go to the merge driver); True when it had
    to be changed."""
    path = root / ATTRIBUTES
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if rule in text.splitlines():
        return False
    atomic_write(path, (text + ("\n" if text and not text.endswith("\n") else "") + rule + "\n").encode())
    return True
