"""A second machine in one command: clone a vault from its remote (`Vault.clone`'s git half).

`clone_vault` runs `git clone` under the GitStore's rules (no value as an option, no command-running
transport), checks out the branch memfile pushed as a tracking branch and configures the merge driver;
a failed clone leaves nothing behind. `point_bare_head` lets a plain `git clone` of a bare repository
on this machine work too.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from ..config import CONFIG_NAME, DEFAULT_AUTHOR
from ..errors import Conflict, GitError, InvalidInput, NotAVault
from .store import GitStore, configure_merge_driver, execute

#: The name the clone gives its remote (what `memfile sync` syncs with by default).
ORIGIN = "origin"
#: The branch memfile's own vaults are made on (`GitStore.init`).
MAIN = "main"


URL_RULE = "a git URL or a path (not starting with -; ext:: and fd:: run commands)"


def check_url(url: str) -> str:
    """`url`, when memfile may hand it to git: never an option, never a transport that runs a command.

    Raises:
        InvalidInput: it starts with -, holds a control character, or is an ext:: or fd:: URL.
    """
    if not url or url.startswith("-") or any(ord(c) < 32 for c in url) or url.lower().startswith(("ext::", "fd::")):
        raise InvalidInput("URL", url, URL_RULE)
    return url


def clone_vault(url: str, root: Path) -> None:
    """Clone the vault at `url` into the folder `root` (absolute; made, with missing parents, when absent).

    Raises:
        InvalidInput: `url` could reach git as an option or run a command (`ext::`, `fd::`), or several
            branches hold a vault and neither the remote's HEAD nor `main` tells which (they are named).
        Conflict: `root` exists and is not an empty folder (nothing is touched).
        NotAVault: `url` holds an empty repository, or one with no memfile.toml on any branch.
        GitError: git could not clone (a bad URL, no network: git's message).
    """
    check_url(url)
    if root.exists() or root.is_symlink():
        if not root.is_dir() or root.is_symlink() or any(root.iterdir()):
            raise Conflict(
                f"{root} exists and is not an empty folder; nothing was changed; "
                f"clone into a new folder: memfile clone {url} PATH"
            )
    made = _first_missing(root)
    try:
        _clone(url, root)
        branch = _vault_branch(url, root)
        _git(root, "checkout", "--quiet", "-B", branch, "--track", f"refs/remotes/{ORIGIN}/{branch}")
        configure_merge_driver(GitStore(root, *DEFAULT_AUTHOR))
    except BaseException:
        _remove(root, made)
        raise


def _clone(url: str, root: Path) -> None:
    """`git clone --no-checkout URL ROOT`: the branch to check out is chosen once the branches are known."""
    status, out = _git(None, "clone", "--quiet", "--no-checkout", "--origin", ORIGIN, "--", url, str(root), check=False)
    if status != 0:
        raise GitError(f"could not clone {url}: {out or 'git gave no reason'}; nothing was made at {root}")


def _vault_branch(url: str, root: Path) -> str:
    """The branch memfile pushed: the remote HEAD's when it holds memfile.toml, else `main`, else the only one.

    Raises:
        NotAVault: no branch, or none holding memfile.toml.
        InvalidInput: several hold one, none of them preferred.
    """
    prefix = f"refs/remotes/{ORIGIN}/"
    _, listed = _git(root, "for-each-ref", "--format=%(refname)", prefix)
    branches = [ref.removeprefix(prefix) for ref in listed.splitlines() if ref.startswith(prefix)]
    branches = [b for b in branches if b != "HEAD"]
    if not branches:
        raise NotAVault(
            f"{url} holds an empty git repository (no branch yet), not a memfile vault; on the machine that "
            f"has the vault, push it there first: memfile remote add {url}, then memfile sync"
        )
    holding = [b for b in branches if _git(root, "cat-file", "-e", f"{prefix}{b}:{CONFIG_NAME}", check=False)[0] == 0]
    status, head = _git(root, "symbolic-ref", "--quiet", f"{prefix}HEAD", check=False)
    head_branch = head.removeprefix(prefix) if status == 0 else None
    for preferred in (head_branch, MAIN):
        if preferred in holding:
            return preferred
    if len(holding) == 1:
        return holding[0]
    if not holding:
        raise NotAVault(
            f"{url} holds a git repository but not a memfile vault: no branch of it ({', '.join(sorted(branches))}) "
            f"has {CONFIG_NAME}; check the URL, or make a vault with: memfile init PATH"
        )
    raise InvalidInput(
        "URL",
        url,
        "a repository whose HEAD or main branch holds the vault",
        reason=f"several branches hold a memfile vault ({', '.join(sorted(holding))}) and neither its HEAD nor "
        f"main is one of them; clone the one you want with: git clone --branch BRANCH {url} PATH, "
        "then run memfile sync in it",
    )


def local_path(url: str, base: Path) -> Path | None:
    """The folder a URL names on this machine (a path, relative to `base`, or file://), else None."""
    if url.startswith("file://"):
        url = url.removeprefix("file://")
    elif "://" in url or ":" in url.split("/", 1)[0]:  # a URL, or scp-like host:path
        return None
    path = base / Path(url).expanduser()
    return path.resolve() if path.is_dir() else None


def clone_command(url: str, root: Path) -> str:
    """The command that sets up another machine: `memfile clone URL ~/NAME` (a URL's password left out)."""
    shown = str(local_path(url, root) or url)
    if "://" in shown:
        parts = urlsplit(shown)
        if parts.password is not None:
            host = parts.netloc.rsplit("@", 1)[1]
            shown = parts._replace(netloc=f"{parts.username}@{host}").geturl()
    return f"memfile clone {shlex.quote(shown)} ~/{shlex.quote(root.name)}"


def point_bare_head(store: GitStore, remote: str, branch: str) -> str | None:
    """After `branch` was first pushed to `remote`: when the remote is a bare repository on this machine
    whose HEAD names a branch that does not exist (`git init --bare` names master), point its HEAD at
    `branch`, so a plain `git clone` checks the vault out too; a notice, or None. Nothing can be lost:
    only an unborn HEAD is changed, in a repository this machine pushes to already, with no hook run.
    """
    url = store.remote_url(remote)
    bare = local_path(url, store.root) if url else None
    if bare is None:
        return None
    status, head = _git(bare, "symbolic-ref", "--quiet", "HEAD", check=False)
    named = head.strip()
    if status != 0 or not named.startswith("refs/heads/") or named == f"refs/heads/{branch}":
        return None
    if _git(bare, "rev-parse", "--is-bare-repository", check=False)[1].strip() != "true":
        return None
    if _git(bare, "rev-parse", "--verify", "--quiet", named, check=False)[0] == 0:
        return None  # HEAD names a branch that exists: the owner's choice
    if _git(bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)[0] != 0:
        return None
    if _git(bare, "symbolic-ref", "HEAD", f"refs/heads/{branch}", check=False)[0] != 0:
        return None
    return (
        f"pointed the HEAD of {bare} at {branch} (it named {named.removeprefix('refs/heads/')}, which does not "
        "exist), so a plain git clone checks out the vault"
    )


def _git(cwd: Path | None, *args: str, check: bool = True) -> tuple[int, str]:
    """Run git (in `cwd`, a repository, or nowhere in particular for the clone): (status, stdout), or
    (status, stderr and stdout) when it fails."""
    env = {"GIT_AUTHOR_NAME": DEFAULT_AUTHOR[0], "GIT_AUTHOR_EMAIL": DEFAULT_AUTHOR[1]}
    env |= {"GIT_COMMITTER_NAME": DEFAULT_AUTHOR[0], "GIT_COMMITTER_EMAIL": DEFAULT_AUTHOR[1]}
    if cwd is not None:
        env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)  # never a repository above the clone
    status, out, err = execute(cwd, list(args), env)
    if check and status != 0:
        raise GitError(f"git {args[0]} failed in {cwd}: {(err or out).strip()}")
    return status, (f"{err}\n{out}".strip() if status != 0 else out)


def _first_missing(root: Path) -> Path | None:
    """The outermost folder of `root`'s path that does not exist yet (what the clone makes), or None."""
    made = None
    for folder in (root, *root.parents):
        if os.path.lexists(folder):
            break
        made = folder
    return made


def _remove(root: Path, made: Path | None) -> None:
    """Undo a clone: the folders it made, else (`root` was an empty folder) what it put in `root`."""
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    if not root.is_dir() or root.is_symlink():
        return
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
