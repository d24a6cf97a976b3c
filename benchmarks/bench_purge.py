"""Purge speed: `memfile purge REF` of one memory with 20 versions from a 10,000-memory vault's history.

Run from the project root (one command):

    python benchmarks/bench_purge.py                # 10,000 memories, 20 versions, 200 other stores, 5 runs
    python benchmarks/bench_purge.py --runs 3 --keep --json-out purge.json
    python benchmarks/bench_purge.py --smoke        # once, at 50 memories and 3 versions: does it still run?

Setup (untimed, in a temp folder deleted at the end; `--keep` keeps it): a vault of `--size`
memories from benchmarks/make_vault.py with `--git` (one commit), then, in process through
`Vault.store`, `--others` stores of new notes (default 200) with the `--versions` versions (default
20) of the target memory spread among them, each store its own commit, so the history has some depth
and the target's versions start near its beginning (a purge rewrites every commit from the first
version on); then `git gc` once, as git's auto gc leaves a vault that has lived a while. Each target
version holds two made-up words found nowhere else: SENTINEL (what a purge must remove) and CODEWORD
(the string `--text` removes).

Each run works on fresh copies of that vault (`shutil.copytree(symlinks=True)`, untimed), each
brought in line first (untimed: `git update-index --refresh` and one `memfile search`, which also
checks that the target is found before; a copy has new inodes, and both git's and memfile's stat
checks would otherwise read every file again inside the timed process), then the disk let settle:

* `python -m memfile --vault V purge REF --yes` as a process (wall), then checked: SENTINEL is in
  no line of `git log --all -p` and no object of `git cat-file --batch-all-objects --batch`,
  `memfile search SENTINEL` finds nothing, and every other memory file is still at HEAD;
* `memfile purge --text CODEWORD REF --yes` on another copy, then checked: CODEWORD is in neither
  git output nor found by search, SENTINEL (the rest of the target) still is;
* the baseline on a third copy: plain git-filter-repo removing the target's file by path
  (`python -m git_filter_repo --force --no-gc --invert-paths --path RELPATH`), then
  `git reflog expire --expire=now --all` and `git gc --prune=now`, timed together as processes and
  checked as the purge (git output only). `--no-gc` only splits out what filter-repo runs itself
  by default (the same two commands), so that its parts are timed apart.

`memfile purge REF --dry-run` changes nothing, so it is timed `--runs` times on one copy (after one
untimed run), and so is `memfile reindex`, the index rebuild a purge ends with. The split of a
purge's time: the baseline's filter-repo and expire + gc parts are what memfile's rewrite and prune
steps run (on the same history: memfile's gc is `git gc --prune=now --force`), `reindex` its
rebuild; the rest is memfile's own (a Python process, finding the versions by id twice: once for the
plan shown and once for the purge, the commit that records it).

No target (issue 41 set none): the table gives the medians and the ratio to the baseline. Every
process runs with GIT_CONFIG_GLOBAL=/dev/null and GIT_CONFIG_NOSYSTEM=1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import (  # noqa: E402
    MEMFILE,
    MIND,
    TIMING_COLUMNS,
    Table,
    bench_env,
    make_vault,
    memfile_commit,
    p50,
    parse_args,
    run,
    say,
    settle,
    timed,
    timing_label,
)

TARGET_REF = "identity/purge_target"
SENTINEL = "zebraquill"  # made up: in every version of the target and nowhere else
CODEWORD = "bluefinchcodeword"  # made up: the string `purge --text` removes
RECORD = {".memfile-purged", ".gitattributes"}  # what a purge adds at HEAD (the record, its merge rule)
IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]


class Setup:
    """The prepared vault (never changed after setup) and its fresh copies."""

    def __init__(self, work: Path, env: dict[str, str], args: argparse.Namespace) -> None:
        from memfile import Vault

        self.work, self.env = work, env
        self.vault = work / "vault"
        self.copies = 0
        say(
            f"  generated {args.size:,} memories in {make_vault(self.vault, args.size, env, seed=args.seed, git=True):.1f} s"
        )
        start = time.perf_counter()
        total = args.versions + args.others
        at = {k * total // args.versions for k in range(args.versions)}  # the target's versions, spread
        vault = Vault.open(self.vault, MIND)
        self.store_times: list[float] = []
        version = other = 0
        for i in range(total):
            begin = time.perf_counter()
            if i in at:
                version += 1
                text = (
                    f"Home address, version {version}: {version} {SENTINEL} lane, north gate. "
                    f"The gate code word is {CODEWORD}; it changed in version {version}."
                )
                result = vault.store(*TARGET_REF.split("/"), text, tags=["bench"])
                self.relpath = str(result.memory.path)
            else:
                other += 1
                result = vault.store("note", f"purge_bench_other_{other}", f"Unrelated note {other}.", tags=["bench"])
            self.store_times.append(time.perf_counter() - begin)
            if not result.changed:
                raise SystemExit(f"store {i + 1} of the setup changed nothing")
        vault.close()
        self.git(self.vault, "gc", "--quiet")
        self.commits = int(self.git(self.vault, "rev-list", "--count", "HEAD"))
        say(
            f"  {version} versions of {TARGET_REF} among {other} other stores ({self.commits} commits), "
            f"then git gc, in {time.perf_counter() - start:.1f} s"
        )

    def git(self, repo: Path, *args: str) -> str:
        return run(["git", *IDENTITY, "-C", str(repo), *args], self.env)[1]

    def mf(self, vault: Path, *args: str) -> tuple[float, str]:
        return run([*MEMFILE, "--vault", str(vault), "--mind", MIND, *args], self.env)

    def tree(self, repo: Path) -> dict[str, str]:
        """Every file at HEAD: path -> its mode, type and blob."""
        return {
            path: entry
            for entry, _, path in (
                line.partition("\t") for line in self.git(repo, "ls-tree", "-r", "HEAD").splitlines()
            )
        }

    def others_changed(self, repo: Path) -> list[str]:
        """The files at HEAD, other than the target and the purge's record, that differ from the prepared vault's."""
        before, after = self.tree(self.vault), self.tree(repo)
        paths = (before.keys() | after.keys()) - RECORD - {self.relpath}
        return sorted(path for path in paths if before.get(path) != after.get(path))

    def copy(self, name: str) -> Path:
        """A fresh copy of the prepared vault, brought in line (git's and memfile's stat checks), the disk settled."""
        self.copies += 1
        copy = self.work / f"{name}-{self.copies}"  # a new folder each time: the copies go at the end
        shutil.copytree(self.vault, copy, symlinks=True)
        self.git(copy, "update-index", "-q", "--refresh")
        if not self.found(copy, SENTINEL):
            raise SystemExit(f"memfile search {SENTINEL} finds nothing in {copy} before any purge")
        settle()
        return copy

    def found(self, vault: Path, word: str) -> bool:
        """`memfile search WORD` finds a memory."""
        return bool(json.loads(self.mf(vault, "search", word, "--json")[1] or "[]"))

    def in_git(self, repo: Path, word: str) -> list[str]:
        """Where `word` still is: `git log --all -p` and `git cat-file --batch-all-objects --batch`."""
        where = []
        for name, argv in (
            ("git log --all -p", ["log", "--all", "-p"]),
            ("git cat-file --batch-all-objects", ["cat-file", "--batch-all-objects", "--batch"]),
        ):
            out = subprocess.run(["git", "-C", str(repo), *argv], env=self.env, capture_output=True, check=True)
            if word.encode() in out.stdout:
                where.append(name)
        return where


# --- the benchmark ------------------------------------------------------------------


def bench(s: Setup, args: argparse.Namespace, table: Table) -> None:
    size, ref = args.size, TARGET_REF
    table.timing(
        "Vault.store in process (making the history)",
        size,
        s.store_times,
        note=f"{args.versions} versions of {ref} among {args.others} other stores, each a commit; the setup",
    )

    say(f"\n== dry run and reindex, {size:,} memories ==")
    still = s.copy("still")
    head = s.git(still, "for-each-ref")
    _, plan_out = s.mf(still, "purge", ref, "--dry-run", "--json")
    [plan] = json.loads(plan_out)  # one REF: one plan
    dry = timed([*MEMFILE, "--vault", str(still), "--mind", MIND, "purge", ref, "--dry-run"], s.env, args.runs)
    reindex = timed([*MEMFILE, "--vault", str(still), "--mind", MIND, "reindex"], s.env, args.runs)
    unchanged = s.git(still, "for-each-ref") == head and s.found(still, SENTINEL)

    say(f"\n== purge, {size:,} memories, {plan['versions']} versions, {plan['commits']} commits rewritten ==")
    purges, texts, filters, gcs, problems = [], [], [], [], []
    for i in range(args.runs):
        copy = s.copy("purge")
        took, _ = s.mf(copy, "purge", ref, "--yes")
        purges.append(took)
        left = s.in_git(copy, SENTINEL) + (["memfile search"] if s.found(copy, SENTINEL) else [])
        problems += [f"run {i}: purge left {SENTINEL} in {', '.join(left)}"] if left else []
        if changed := s.others_changed(copy) + ([s.relpath] if s.relpath in s.tree(copy) else []):
            problems.append(
                f"run {i}: purge changed other files at HEAD (or kept the target): {', '.join(changed[:5])}"
            )

        copy = s.copy("text")
        took, _ = s.mf(copy, "purge", "--text", CODEWORD, ref, "--yes")
        texts.append(took)
        left = s.in_git(copy, CODEWORD) + (["memfile search"] if s.found(copy, CODEWORD) else [])
        problems += [f"run {i}: purge --text left {CODEWORD} in {', '.join(left)}"] if left else []
        if not s.found(copy, SENTINEL) or len(s.in_git(copy, SENTINEL)) != 2:
            problems.append(f"run {i}: purge --text lost the rest of {ref} ({SENTINEL})")
        if changed := s.others_changed(copy):
            problems.append(f"run {i}: purge --text changed other files at HEAD: {', '.join(changed[:5])}")

        copy = s.copy("plain")
        filters.append(
            run(
                [sys.executable, "-m", "git_filter_repo", "--force", "--no-gc", "--quiet"]
                + ["--invert-paths", "--path", s.relpath],
                s.env,
                cwd=copy,
            )[0]
        )
        gcs.append(
            run(["git", "-C", str(copy), "reflog", "expire", "--expire=now", "--all"], s.env)[0]
            + run(["git", "-C", str(copy), "gc", "--prune=now", "--quiet"], s.env)[0]
        )
        if left := s.in_git(copy, SENTINEL):
            problems.append(f"run {i}: the baseline left {SENTINEL} in {', '.join(left)}")
        say(
            f"  run {i + 1}: purge {purges[-1]:.2f} s, --text {texts[-1]:.2f} s, baseline {filters[-1] + gcs[-1]:.2f} s"
        )

    base = [f + g for f, g in zip(filters, gcs, strict=True)]
    baseline = "filter-repo + expire + gc"
    history = f"{plan['versions']} versions, {plan['commits']} of {s.commits} commits rewritten"
    table.timing(
        "memfile purge REF --yes (process)",
        size,
        purges,
        baseline=baseline,
        base=base,
        note=f"{history}; baseline: git-filter-repo --invert-paths --path FILE, then git reflog expire "
        "--expire=now --all and git gc --prune=now, three processes on another copy (no index, no record)",
    )
    table.timing("  baseline part: git-filter-repo --invert-paths --path", size, filters, p95_too=False)
    table.timing(
        "  baseline part: git reflog expire + git gc --prune=now",
        size,
        gcs,
        p95_too=False,
        note="what a purge's prune step runs on the rewritten history",
    )
    table.timing(
        "  memfile reindex (process: a purge's index rebuild)",
        size,
        reindex,
        p95_too=False,
        note=f"on one copy, after one untimed run; rest of a purge (p50): "
        f"{(p50(purges) - p50(base) - p50(reindex)) * 1000:,.0f} ms beside the baseline's and reindex's",
    )
    table.timing(
        "memfile purge --text STRING REF --yes (process)",
        size,
        texts,
        baseline=baseline,
        base=base,
        note=f"one string from the {plan['versions']} versions, every other byte kept; the baseline is the "
        "whole-file removal's (filter-repo's --replace-text would rewrite every blob of the vault)",
    )
    table.timing(
        "memfile purge REF --dry-run (process)",
        size,
        dry,
        note="on one copy, after one untimed run: finds the versions by id and the commits after them",
    )
    table.add(
        "check: the purges removed the text everywhere, kept the rest",
        ok=not problems,
        check=True,
        target="all",
        note="; ".join(problems)
        or f"{SENTINEL} in no git log --all -p, cat-file --batch-all-objects or memfile search after each purge "
        f"and baseline; {CODEWORD} likewise after each --text purge, {SENTINEL} kept; every other file at HEAD",
        shown="; ".join(problems) or "yes",
    )
    table.add(
        "check: the dry run changed nothing",
        ok=unchanged,
        check=True,
        target="refs as before",
        shown="yes" if unchanged else "no",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="memories in the vault (default 10,000)")
    parser.add_argument("--versions", type=int, default=20, help="versions of the purged memory (default 20)")
    parser.add_argument("--others", type=int, default=200, help="other stores among them, each a commit (default 200)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--keep", action="store_true", help="keep the vaults and repositories (their folder is printed)"
    )
    parser.add_argument("--json-out", type=Path, help="also write the JSON blob to this file")
    args = parse_args(parser, size=50, versions=3, others=10, runs=1)
    env = bench_env()
    git_version = run(["git", "--version"], env)[1].strip()
    commit = memfile_commit()
    say(f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, {git_version}, runs {args.runs}")
    table = Table(TIMING_COLUMNS, smoke=args.smoke, label=timing_label)

    work = Path(tempfile.mkdtemp(prefix="memfile-bench-purge-"))
    try:
        say("\n== setup ==")
        bench(Setup(work, env, args), args, table)
    finally:
        if args.keep:
            print(f"\nvaults kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    table.print()
    blob = json.dumps(
        {
            "commit": commit,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "git": git_version,
            "runs": args.runs,
            "size": args.size,
            "versions": args.versions,
            "others": args.others,
            "seed": args.seed,
            "smoke": args.smoke,
            "rows": table.rows,
        },
        indent=2,
    )
    print(blob)
    if args.json_out:
        args.json_out.write_text(blob + "\n", encoding="utf-8")
    return table.exit_code()


if __name__ == "__main__":
    sys.exit(main())
