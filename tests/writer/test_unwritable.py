"""What the file system refuses, said as a sentence with its exit code (issue 39, item 20), never an
"unexpected error": a reindex on read-only media (4), a store or forget on a full disk (4, nothing half
written), a `--vault` folder this user may not enter (7).

Real file systems: a read-only bind mount and a full tmpfs in a mount namespace of the test's own, and a
process run as another user (`setpriv`), since root, which runs the tests here, ignores file modes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import git, in_private_mounts, memfile_command, mount_namespaces

from memfile import Vault

MIND = "michael"
needs_mounts = pytest.mark.skipif(not mount_namespaces(), reason="needs root and mount namespaces (unshare -m)")


def run_script(script: str, out: Path, commands: list[str]) -> tuple[list[int], list[str]]:
    """`script`, then each command with its exit code and stderr recorded, in a mount namespace of its own."""
    for n, command in enumerate(commands):
        script += f"{command} >'{out}/{n}.out' 2>'{out}/{n}.err'; echo $? >'{out}/{n}.rc'\n"
    done = in_private_mounts(script)
    if done.returncode == 99:
        pytest.skip("cannot mount here")
    assert done.returncode == 0, done.stderr
    codes = [int((out / f"{n}.rc").read_text()) for n in range(len(commands))]
    return codes, [(out / f"{n}.err").read_text() for n in range(len(commands))]


@needs_mounts
def test_reindex_of_a_read_only_vault_says_the_index_cannot_be_written(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "vault", MIND) as vault:
        vault.store("fact", "door", "The door code is 1234.")
    root = vault.root
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    out.mkdir()
    mount = f"mount --bind '{root}' '{root}' && mount -o remount,bind,ro '{root}' || exit 99\n"
    codes, errs = run_script(mount, out, [memfile_command(root, "reindex"), memfile_command(root, "list")])
    assert codes == [4, 0], errs
    assert "cannot be written (Read-only file system), so it was not rebuilt" in errs[0], errs[0]
    assert "unexpected" not in "".join(errs)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@needs_mounts
def test_store_and_forget_on_a_full_disk_say_so_and_change_nothing(tmp_path: Path) -> None:
    """The vault on a tiny tmpfs, its index made, then the disk filled to the last byte before each command."""
    mount, out = tmp_path / "disk", tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    root = mount / "vault"
    made = tmp_path / "made"
    with Vault.init(made, MIND) as vault:
        for n in range(3):
            vault.store("fact", f"k{n}", f"Fact number {n}.")
    fill = f"dd if=/dev/zero of='{mount}/filler$RANDOM' bs=4k 2>/dev/null; true"
    setup = (
        f"mount -t tmpfs -o size=3m tmpfs '{mount}' || exit 99\n"
        f"cp -a '{made}' '{root}' && {memfile_command(root, 'list')} >/dev/null 2>&1 || exit 98\n"
    )
    commands = [
        f"{fill}; {memfile_command(root, 'forget', 'fact/k1')}",
        f"{fill}; {memfile_command(root, 'store', 'fact', 'new', 'Something new.')}",
        f"{fill}; {memfile_command(root, 'forget', 'fact/k2')}",
    ]
    state = (
        f"rm -f '{mount}'/filler*; git -C '{root}' status --porcelain >'{out}/git'; "
        f"ls -a '{root}/{MIND}/fact' >'{out}/ls'; git -C '{root}' rev-parse HEAD >'{out}/head'\n"
    )
    codes, errs = run_script(setup, out, [*commands, state])
    assert codes[:3] == [4, 4, 4], errs
    assert all("the disk is full" in err for err in errs[:3]), errs
    assert "unexpected" not in "".join(errs)
    assert (out / "git").read_text() == ""  # nothing half written: no stray file, no uncommitted change
    assert (out / "ls").read_text().split() == [".", "..", "k0.md", "k1.md", "k2.md"]
    assert (out / "head").read_text().strip() == git(made, "rev-parse", "HEAD").strip()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to run as another user"
)
@pytest.mark.parametrize("locked", ["vault", "parent"])
def test_a_vault_folder_this_user_may_not_enter_is_named(locked: str) -> None:
    top = Path(tempfile.mkdtemp())  # pytest's own folders are closed to other users: this one is opened
    try:
        top.chmod(0o755)
        parent = top / "private"
        Vault.init(parent / "vault", MIND).close()
        (parent if locked == "parent" else parent / "vault").chmod(0o700)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        runs = subprocess.run([*nobody, sys.executable, "-c", "import memfile"], capture_output=True, cwd=top)
        if runs.returncode != 0:  # an interpreter under /root (pyenv's) cannot run as another user
            pytest.skip(f"this Python cannot run as another user: {runs.stderr.decode(errors='replace')[:200]}")
        for args in (["list"], ["store", "fact", "x", "y"]):
            done = subprocess.run(
                [*nobody, sys.executable, "-m", "memfile", "--vault", str(parent / "vault"), *args],
                capture_output=True,
                text=True,
                cwd=top,
                env={"PATH": os.environ["PATH"], "HOME": str(top)},
            )
            assert done.returncode == 7, (done.returncode, done.stderr)
            assert "cannot be read: this user may not enter it (or a folder above it)" in done.stderr, done.stderr
            assert "unexpected" not in done.stderr
    finally:
        shutil.rmtree(top)
