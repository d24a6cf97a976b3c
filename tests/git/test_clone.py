"""`memfile clone`: a second machine in one command, whatever branch the remote's HEAD names; and the
first `remote add` + `sync` telling how to get there (issue 25)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import commit_count, fails, git, in_vault, ok, run, write

from memfile import Vault
from memfile.errors import EXIT_SYNC_CONFLICTS, Conflict


def bare(path: Path, head: str = "master") -> Path:
    """A bare repository as `git init --bare` makes it (HEAD names `head`, which does not exist yet)."""
    subprocess.run(["git", "init", "-q", "--bare", f"--initial-branch={head}", str(path)], check=True)
    return path


def pushed_vault(tmp_path: Path, remote: Path) -> Vault:
    """The first machine: a vault with two memories, `remote add` and a first `sync`, through the CLI."""
    laptop = Vault.init(tmp_path / "laptop", "michael", "Michael's Mind")
    laptop.store("fact", "office", "The office is in Berlin", tags=["work"])
    laptop.store("preference", "editor", "Uses neovim with a dark theme")
    ok(in_vault(laptop.root, "remote", "add", str(remote)))
    ok(in_vault(laptop.root, "sync"))
    return laptop


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.exists() else set()


def test_clone_from_a_bare_remote_whose_head_names_master(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = pushed_vault(tmp_path, remote)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/master")  # as left by a push memfile did not make
    result = ok(run("clone", remote, tmp_path / "desk"))
    desk = tmp_path / "desk"
    assert f"cloned {remote} into {desk} (branch main, tracking origin/main)" in result.stdout
    assert "michael: Michael's Mind, 2 memories" in result.stdout
    assert f"cd {desk} && memfile recall" in result.stdout
    clone = Vault.open(desk)
    assert clone.search("neovim")[0].memory.key == "editor"  # the index is there at once
    assert "The office is in Berlin" in ok(in_vault(desk, "recall")).stdout
    assert git(desk, "rev-parse", "HEAD") == git(laptop.root, "rev-parse", "HEAD")  # a clone makes no commit
    assert git(desk, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert "merge-file" in git(desk, "config", "--local", "merge.memfile.driver")
    assert clone.status()["git"] | {"remotes": None} == {
        "upstream": "origin/main",
        "remotes": None,
        "ahead": 0,
        "behind": 0,
    }
    assert "Git: origin/main, 0 ahead, 0 behind" in ok(in_vault(desk, "status")).stdout


def test_clone_from_a_remote_whose_head_is_main(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git", head="main")
    pushed_vault(tmp_path, remote)
    data = json.loads(ok(run("clone", remote, tmp_path / "desk", "--json")).stdout)
    assert data["branch"] == "main" and data["upstream"] == "origin/main" and data["mind"] == "michael"
    assert data["minds"] == [{"mind": "michael", "name": "Michael's Mind", "memories": 2}]
    assert data["vault"] == str(tmp_path / "desk") and data["url"] == str(remote)
    assert Vault.clone(str(remote), tmp_path / "desk2").get("fact/office").tags == ("work",)


def test_first_sync_points_a_local_bare_heads_at_main_so_plain_git_clone_works(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = Vault.init(tmp_path / "laptop", "michael")
    laptop.store("fact", "office", "Berlin")
    added = ok(in_vault(laptop.root, "remote", "add", str(remote)))
    assert f"memfile clone {remote} ~/laptop" in added.stderr
    synced = ok(in_vault(laptop.root, "sync"))
    assert f"created main on origin; on another machine: memfile clone {remote} ~/laptop" in synced.stdout
    assert "pointed the HEAD" in synced.stderr and "master" in synced.stderr
    assert git(remote, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "plain")], check=True, capture_output=True)
    assert (tmp_path / "plain" / "memfile.toml").exists() and (tmp_path / "plain" / "michael" / "fact").is_dir()
    assert laptop.status()["git"]["upstream"] == "origin/main"  # the first sync set the upstream
    laptop.store("fact", "editor", "neovim")
    assert "Git: origin/main, 1 ahead, 0 behind" in ok(in_vault(laptop.root, "status")).stdout
    again = ok(in_vault(laptop.root, "sync"))
    assert "memfile clone" not in again.stdout and "pointed" not in again.stderr  # only the first time
    assert json.loads(ok(in_vault(laptop.root, "sync", "--json")).stdout)["clone_command"] is None


def test_a_bare_remote_head_naming_a_real_branch_is_left_alone(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git", head="docs")
    docs = tmp_path / "docs"
    git(tmp_path, "init", "-q", "-b", "docs", str(docs))
    write(docs / "README.md", "not a vault\n")
    git(docs, "add", "README.md")
    git(docs, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", "docs")
    git(docs, "push", "-q", str(remote), "docs")
    pushed_vault(tmp_path, remote)
    assert git(remote, "symbolic-ref", "HEAD").strip() == "refs/heads/docs"  # the owner's choice stays
    result = ok(run("clone", remote, tmp_path / "desk"))  # HEAD's branch holds no vault: main does
    assert "branch main" in result.stdout and (tmp_path / "desk" / "memfile.toml").exists()
    assert git(tmp_path / "desk", "symbolic-ref", "--short", "HEAD").strip() == "main"


def test_several_branches_holding_a_vault_none_preferred_are_named(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = pushed_vault(tmp_path, remote)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/master")
    git(laptop.root, "push", "-q", "origin", "main:alpha", "main:beta", ":main")
    result = fails(run("clone", remote, tmp_path / "desk"), 2)
    assert "alpha, beta" in result.stderr and "git clone --branch" in result.stderr
    assert not (tmp_path / "desk").exists()
    git(laptop.root, "push", "-q", "origin", ":beta")  # one left: it is the vault
    assert "branch alpha" in ok(run("clone", remote, tmp_path / "desk")).stdout


def test_clone_into_an_existing_empty_folder_and_from_a_working_vault(tmp_path: Path) -> None:
    laptop = Vault.init(tmp_path / "laptop", "michael")
    laptop.store("fact", "office", "Berlin")
    (tmp_path / "empty").mkdir()
    ok(run("clone", laptop.root, tmp_path / "empty"))
    assert Vault.open(tmp_path / "empty").get("fact/office").content == "Berlin"


def test_clone_of_a_vault_with_several_minds_lists_each(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = pushed_vault(tmp_path, remote)
    work = Vault.init(laptop.root, "work", "Work")
    for key in ("a", "b", "c"):
        work.store("project", key, f"project {key}")
    laptop.sync()
    out = ok(run("clone", remote, tmp_path / "desk", "--mind", "work")).stdout
    assert "michael: Michael's Mind, 2 memories" in out and "work: Work, 3 memories" in out
    assert f"cd {tmp_path / 'desk'} && memfile --mind work recall" in out
    assert Vault.open(tmp_path / "desk", "work").search("project")  # every mind's index answers


def test_first_conflicting_sync_of_a_clone_merges_through_the_driver(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = pushed_vault(tmp_path, remote)
    ok(run("clone", remote, tmp_path / "desk"))
    desk = Vault.open(tmp_path / "desk")
    # Different fields of one memory: merged field by field, no conflict markers.
    laptop.store("fact", "office", "The office is in Berlin", tags=["work", "city"])
    desk.store("fact", "office", "The office is in Berlin", priority="high", tags=["work", "berlin"])
    laptop.sync()
    assert "Git: origin/main, 1 ahead, 0 behind" in ok(in_vault(desk.root, "status")).stdout
    assert desk.sync().conflicts == []
    laptop.sync()
    for vault in (laptop, desk):
        office = vault.get("fact/office")
        assert office.priority == "high" and set(office.tags) == {"work", "city", "berlin"}
        assert "<<<<<<<" not in (vault.root / office.path).read_text(encoding="utf-8")
    # The same body on both: kept on both sides until resolved.
    laptop.store("preference", "editor", "Uses helix")
    desk.store("preference", "editor", "Uses emacs")
    laptop.sync()
    result = fails(in_vault(desk.root, "sync"), EXIT_SYNC_CONFLICTS)
    assert "conflict: preference/editor" in result.stdout
    editor = desk.get("preference/editor")
    assert editor.content == "Uses emacs" and editor.conflict == "Uses helix"
    ok(in_vault(desk.root, "resolve", "preference/editor", "--theirs"))
    ok(in_vault(desk.root, "sync"))
    laptop.sync()
    assert laptop.get("preference/editor").content == "Uses helix" and laptop.get("preference/editor").conflict is None


def test_path_that_is_not_an_empty_folder_is_refused_untouched(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    pushed_vault(tmp_path, remote)
    busy = write(tmp_path / "busy" / "notes.txt", "mine\n").parent
    result = fails(run("clone", remote, busy), 4)
    assert str(busy) in result.stderr and "not an empty folder" in result.stderr
    assert files(busy) == {"notes.txt"}
    a_file = write(tmp_path / "a-file", "x\n")
    fails(run("clone", remote, a_file), 2)  # click's own check of PATH, as for init
    with pytest.raises(Conflict, match="not an empty folder"):
        Vault.clone(str(remote), a_file)
    assert a_file.read_text(encoding="utf-8") == "x\n"


def test_url_that_is_not_a_vault_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    git(tmp_path, "init", "-q", "-b", "trunk", str(plain))
    write(plain / "README.md", "hello\n")
    git(plain, "add", "README.md")
    git(plain, "-c", "user.name=Hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", "hello")
    result = fails(run("clone", plain, tmp_path / "new" / "desk"), 7)
    assert "not a memfile vault" in result.stderr and "trunk" in result.stderr
    assert not (tmp_path / "new").exists()  # the folders the clone made are gone too
    (tmp_path / "empty").mkdir()
    fails(run("clone", plain, tmp_path / "empty"), 7)
    assert (tmp_path / "empty").is_dir() and files(tmp_path / "empty") == set()  # kept, and empty again
    empty = bare(tmp_path / "empty.git")
    result = fails(run("clone", empty, tmp_path / "desk"), 7)
    assert "empty git repository" in result.stderr and "memfile sync" in result.stderr
    assert not (tmp_path / "desk").exists()


def test_url_that_does_not_exist_is_a_git_error_and_leaves_no_folder(tmp_path: Path) -> None:
    result = fails(run("clone", tmp_path / "gone.git", tmp_path / "desk"), 6)
    assert "could not clone" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "desk").exists()
    fails(run("clone", "https://127.0.0.1:9/nothing.git", tmp_path / "desk"), 6)  # nothing listens on port 9
    assert not (tmp_path / "desk").exists()


@pytest.mark.parametrize("url", ["--upload-pack=touch PWNED", "-u", "ext::sh -c touch% PWNED", "fd::3", ""])
def test_url_that_git_would_read_as_an_option_or_a_command_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = fails(run("clone", "--", url, tmp_path / "desk"), 2)
    assert "URL" in result.stderr
    assert not (tmp_path / "desk").exists() and not (tmp_path / "PWNED").exists()


def test_a_relative_remote_path_is_kept_as_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = bare(tmp_path / "remote.git")
    laptop = Vault.init(tmp_path / "laptop", "michael")
    monkeypatch.chdir(tmp_path)  # not the vault's folder: git would read remote.git from there
    ok(in_vault(laptop.root, "remote", "add", "remote.git"))
    assert git(laptop.root, "remote", "get-url", "origin").strip() == str(remote)
    ok(in_vault(laptop.root, "sync"))


def test_clone_needs_no_git_identity(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git")
    pushed_vault(tmp_path, remote)
    for name in ("user.name", "user.email"):  # conftest blanks the global config: check it is so
        assert subprocess.run(["git", "config", name], cwd=tmp_path, capture_output=True).returncode == 1
    ok(run("clone", remote, tmp_path / "desk"))
    assert commit_count(tmp_path / "desk") == int(git(remote, "rev-list", "--count", "main"))
    assert git(tmp_path / "desk", "status", "--porcelain") == ""


def test_a_clone_asked_for_a_mind_it_lacks_is_kept_and_says_where(tmp_path: Path) -> None:
    remote = bare(tmp_path / "remote.git", "main")
    pushed_vault(tmp_path, remote)
    err = fails(run("clone", remote, tmp_path / "desk", "--mind", "nosuch"), 3).stderr
    assert f"cloned {remote} into {(tmp_path / 'desk').resolve()}, but mind 'nosuch' does not exist" in err
    assert "(minds: michael)" in err
    assert "The office is in Berlin" in ok(in_vault(tmp_path / "desk", "recall")).stdout


def test_without_git_each_git_runner_says_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No git to run (GitPython's executable names nothing): a vault's git and a clone's both answer one
    GitError saying to install git, and the clone leaves nothing behind."""
    import git as gitpython

    from memfile.errors import GitError
    from memfile.git import GitStore, clone_vault

    root = Vault.init(tmp_path / "v", "michael").root
    monkeypatch.setattr(gitpython.Git, "GIT_PYTHON_GIT_EXECUTABLE", str(tmp_path / "no-git"))
    with pytest.raises(GitError, match="(?s)git could not be run: .*; install git and try again"):
        GitStore(root, "memfile", "memfile@localhost").log()
    with pytest.raises(GitError, match="(?s)git could not be run: .*; install git and try again"):
        clone_vault(str(root), tmp_path / "clone")
    assert not (tmp_path / "clone").exists()
