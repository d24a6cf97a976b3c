"""Git speed: `memfile sync` of one change on a 10,000-memory vault, `memfile history` of 100 versions, and
`recall --at` a month back.

Run from the project root (one command):

    python benchmarks/bench_git.py                  # 10,000 memories, 100 versions, 5 runs
    python benchmarks/bench_git.py --runs 3 --keep --json-out git.json
    python benchmarks/bench_git.py --smoke          # once, at 50 memories and 3 versions: does it still run?

Setup (untimed, in a temp folder deleted at the end; `--keep` keeps it): a vault of
`--size` memories from benchmarks/make_vault.py, made a git repository on `main`
(`git init -b main`, one commit); a bare repository as its remote (`memfile remote add`,
then one `memfile sync`: the first push, the index and the merge driver); a second
machine, a `git clone` of the bare repository synced once with `memfile sync`. Beside
them a plain-git pair (two clones of a copy of the bare repository) for the baseline.

Sync (each figure the median of `--runs` runs, wall time of a fresh
`python -m memfile --vault V sync`, what an agent or a person pays per call):

* came in: the clone stores one memory and syncs it (untimed); the timed sync on the
  first vault fetches it, merges it (a fast-forward when memfile allows one: the first
  vault has nothing of its own; otherwise a merge commit, which it pushes) and updates
  the index;
* came in + went out: the same, after the first vault stored one memory of its own, so
  the sync makes a real merge commit and pushes it;
* same memory on both sides: both changed different fields of one memory, so git runs
  memfile's merge driver (a `python -m memfile merge-file` process) for that file.

The table's notes give the commits in and out that `memfile sync` printed and whether
HEAD ended as a merge commit or a fast-forward; after every timed sync the benchmark
checks that the remote's main is HEAD (and a merge commit where there was local work).

The baseline is the same kind of change in the plain-git pair, timed the same way:
`git fetch`, `git merge --no-edit` and `git push` as three processes (plain git
has no baseline for the merge-driver row: its line merge stops on `updated_at`).

History: one memory gets `--versions` versions (that many `Vault.store` calls in
process, each changing the content; their times are reported too), then
`memfile history REF` is timed as a process next to `git log --format=%H -- FILE`, and
`Vault.history(ref)` in process (p50 and p95), with the part of it that only resolves
the REF (`Vault.memories()`, which `history` calls first).

Recall as of a date (issue 42): the vault's first commit is dated 35 days back, so `at="30d"`
reads its 10,000 memories from git. `Vault.recall(at="30d")` is timed in process on a fresh
Vault each run (cold: git's ls-tree and cat-file, parsing every file, the recall) and again
on the same Vault (kept per commit), with a query too (its first search indexes the commit's
memories in memory); `memfile recall --at 30d` as a process. The baseline: what the same
answer costs through a checkout, `git worktree add --detach` of that commit plus a plain
`memfile recall` there (which builds the checkout's index), and `git archive` of the commit
alone (the reading, no parsing).

Targets (issue 3, "Speed"), checked at 10,000 memories and 100 versions: sync of one
change <= 2 s, history <= 300 ms; (issue 42) a recall a month back <= 2 s cold. Every process runs with GIT_CONFIG_GLOBAL=/dev/null and
GIT_CONFIG_NOSYSTEM=1; the vault's commits need no git identity (memfile supplies one),
plain git commands get one with `-c user.name=... -c user.email=...`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
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
    parse_args,
    run,
    say,
    timed,
    timing_label,
)

TARGET_SIZE = 10_000
TARGET_VERSIONS = 100
SYNC_TARGET_S = 2.0
HISTORY_TARGET_S = 0.300
HISTORY_REF = "project/history_target"
RECALL_AT_TARGET_S = 2.0
MONTH_BACK_DAYS = 35  # the age of the vault's first commit: what `--at 30d` reads
IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
SYNCED = re.compile(r"(\d+) commits? in \((\d+) memory files? changed\), (\d+) commits? out")


# --- the vaults ---------------------------------------------------------------------


class Setup:
    """The vault, its bare remote, the second machine, and the plain-git pair."""

    def __init__(self, work: Path, env: dict[str, str], size: int, seed: int) -> None:
        self.env = env
        self.memfile = MEMFILE
        self.vault = work / "vault"  # the first machine: every timed sync runs here
        self.clone = work / "clone"  # the second machine: its changes come in
        self.bare = work / "remote.git"
        self.plain_bare = work / "plain.git"
        self.plain_a = work / "plain-a"  # the baseline's first machine (timed)
        self.plain_b = work / "plain-b"
        say(f"  generated {size:,} memories in {make_vault(self.vault, size, env, seed=seed):.1f} s")
        start = time.perf_counter()
        if not (self.vault / ".git").exists():  # make_vault leaves git to us (its --git picks no branch name)
            self.git(self.vault, "init", "-q", "-b", "main")
            self.git(self.vault, "add", "-A")
            stamp = f"@{int(time.time()) - MONTH_BACK_DAYS * 86400} +0000"  # what `recall --at 30d` reads
            message = f"synthetic vault: {size} memories, seed {seed}"
            dated = {**env, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
            run(["git", *IDENTITY, "-C", str(self.vault), "commit", "-q", "-m", message], dated)
        self.git(None, "init", "-q", "--bare", "-b", "main", str(self.bare))
        self.mf(self.vault, "remote", "add", str(self.bare))
        self.mf(self.vault, "sync")  # the first push; also the index and the merge driver
        self.git(None, "clone", "-q", str(self.bare), str(self.clone))
        self.mf(self.clone, "sync")  # its index and merge driver
        self.git(None, "clone", "-q", "--bare", str(self.bare), str(self.plain_bare))
        self.git(None, "clone", "-q", str(self.plain_bare), str(self.plain_a))
        self.git(None, "clone", "-q", str(self.plain_bare), str(self.plain_b))
        say(f"  git repositories, remotes, clones and first syncs in {time.perf_counter() - start:.1f} s")

    def git(self, repo: Path | None, *args: str) -> str:
        return run(["git", *IDENTITY, *(["-C", str(repo)] if repo else []), *args], self.env)[1]

    def mf(self, vault: Path, *args: str) -> tuple[float, str]:
        return run([*self.memfile, "--vault", str(vault), "--mind", MIND, *args], self.env)

    # memfile: one change on the clone, synced; optionally one local change; then the timed sync

    def memfile_sync(self, tag: str, local: bool) -> tuple[float, tuple[int, int, int], str]:
        self.mf(self.clone, "store", "note", f"incoming_{tag}", f"Stored on the second machine ({tag}).")
        self.mf(self.clone, "sync")
        if local:
            self.mf(self.vault, "store", "note", f"outgoing_{tag}", f"Stored on the first machine ({tag}).")
        took, out = self.mf(self.vault, "sync")
        kind = self.check_synced(self.vault, f"sync ({tag})", merge=local)
        return took, parse_sync(out), kind

    def memfile_sync_same_memory(self, tag: str) -> tuple[float, tuple[int, int, int], str]:
        key, body = f"both_{tag}", f"One memory both machines change ({tag})."
        self.mf(self.clone, "store", "note", key, body, "--tag", "shared")
        self.mf(self.clone, "sync")
        self.mf(self.vault, "sync")  # brings the memory in (untimed)
        self.mf(self.clone, "store", "note", key, body, "--tag", "shared", "--priority", "high")
        self.mf(self.clone, "sync")
        self.mf(self.vault, "store", "note", key, body, "--tag", "shared,local_tag")
        took, out = self.mf(self.vault, "sync")
        self.check_synced(self.vault, f"sync same memory ({tag})", merge=True)
        merged = (self.vault / MIND / "note" / f"{key}.md").read_text(encoding="utf-8")
        problems = []
        if not re.search(r"^priority: *high", merged, re.MULTILINE):
            problems.append("the clone's priority: high was lost")
        if "local_tag" not in merged:
            problems.append("this machine's tag was lost")
        if "conflict" in out or "kept ours" in out or "conflict_theirs" in merged:
            problems.append("reported a conflict: " + out.strip().replace("\n", " | "))
        return took, parse_sync(out), "; ".join(problems)

    # plain git: the same kind of change in the plain pair, timed as fetch + merge + push

    def plain_sync(self, tag: str, local: bool) -> float:
        self.plain_commit(self.plain_b, f"incoming_{tag}", "Stored on the second machine")
        self.git(self.plain_b, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
        self.git(self.plain_b, "push", "-q", "origin", "HEAD:refs/heads/main")
        if local:
            self.plain_commit(self.plain_a, f"outgoing_{tag}", "Stored on the first machine")
        took = 0.0
        for args in (
            ["fetch", "-q", "origin"],
            ["merge", "-q", "--no-edit", "origin/main"],
            ["push", "-q", "origin", "HEAD:refs/heads/main"],
        ):
            took += run(["git", *IDENTITY, "-C", str(self.plain_a), *args], self.env)[0]
        self.check_synced(self.plain_a, f"plain sync ({tag})", merge=local)
        return took

    def plain_commit(self, repo: Path, key: str, text: str) -> None:
        path = repo / MIND / "note" / f"{key}.md"
        path.write_text(f"---\ncategory: note\nkey: {key}\ntags: [bench]\n---\n\n{text} ({key}).\n", encoding="utf-8")
        self.git(repo, "add", "--", str(path.relative_to(repo)))
        self.git(repo, "commit", "-q", "-m", f"store note/{key}")

    def check_synced(self, repo: Path, what: str, merge: bool) -> str:
        """After a sync the remote's main is HEAD, a merge commit when `merge`; "merge" or "fast-forward"."""
        parents = self.git(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()
        head, remote = self.git(repo, "rev-parse", "HEAD", "origin/main").split()
        if head != remote or merge and len(parents) != 3:
            raise SystemExit(
                f"{what}: expected {'a merge commit' if merge else 'HEAD'} pushed to origin/main, "
                f"got HEAD {head[:8]} with {len(parents) - 1} parents, origin/main {remote[:8]}"
            )
        return "merge" if len(parents) == 3 else "fast-forward"


def parse_sync(out: str) -> tuple[int, int, int]:
    """(commits in, memory files changed, commits out) from `memfile sync`'s summary line."""
    found = SYNCED.search(out)
    if not found:
        raise SystemExit(f"unexpected `memfile sync` output: {out!r}")
    came_in, files, went_out = (int(g) for g in found.groups())
    return came_in, files, went_out


def counts_note(counts: list[tuple[int, int, int]]) -> str:
    def span(xs: list[int]) -> str:
        return f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"

    return (
        f"commits in {span([c[0] for c in counts])} ({span([c[1] for c in counts])} memory files), "
        f"commits out {span([c[2] for c in counts])}"
    )


# --- the benchmark ------------------------------------------------------------------


def bench_sync(s: Setup, args: argparse.Namespace, table: Table) -> None:
    size = args.size
    say(f"\n== sync, {size:,} memories ==")
    on_target = size == TARGET_SIZE
    target = f"<= {SYNC_TARGET_S:g} s" if on_target else ""
    limit = SYNC_TARGET_S if on_target else None
    # a warm-up round, which also brings both pairs to their steady state (the clone's merges come in too)
    s.memfile_sync("warmup", local=False)
    s.plain_sync("warmup", local=False)
    results: dict[bool, tuple[list[float], list[tuple[int, int, int]], list[str], list[float]]] = {}
    for local in (False, True):
        mf_times, counts, kinds, git_times = [], [], [], []
        for i in range(args.runs):
            tag = f"{'out' if local else 'in'}{i}"
            took, count, kind = s.memfile_sync(tag, local)
            mf_times.append(took)
            counts.append(count)
            kinds.append(kind)
            git_times.append(s.plain_sync(tag, local))
        results[local] = (mf_times, counts, kinds, git_times)
    for local, figure in (
        (False, "memfile sync: came in (process)"),
        (True, "memfile sync: came in + went out (process)"),
    ):
        mf_times, counts, kinds, git_times = results[local]
        table.timing(
            figure,
            size,
            mf_times,
            baseline="git fetch+merge+push",
            base=git_times,
            limit_s=limit,
            target=target,
            note=counts_note(counts)
            + "; HEAD after: "
            + ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
            + "; baseline: the same change in a plain-git pair, three git processes",
        )
    same_times, same_counts, problems = [], [], []
    for i in range(args.runs):
        took, count, problem = s.memfile_sync_same_memory(str(i))
        same_times.append(took)
        same_counts.append(count)
        if problem:
            problems.append(f"run {i}: {problem}")
    table.timing(
        "memfile sync: same memory both sides (process)",
        size,
        same_times,
        limit_s=limit,
        target=target,
        note=counts_note(same_counts) + "; different fields of one memory changed on both sides, so git "
        "runs memfile's merge driver; plain git would stop on a conflict (updated_at)"
        + ("; PROBLEMS: " + "; ".join(problems) if problems else "; merged field by field, no conflict"),
    )


def bench_history(s: Setup, args: argparse.Namespace, table: Table) -> None:
    from memfile import Vault

    size, versions = args.size, args.versions
    say(f"\n== history, {versions} versions, {size:,} memories ==")
    vault = Vault.open(s.vault, MIND)
    store_times = []
    for k in range(versions):
        start = time.perf_counter()
        result = vault.store(
            "project",
            HISTORY_REF.split("/", 1)[1],
            f"Roadmap, version {k + 1}: step {k + 1} is done, step {k + 2} is next.",
            tags=["bench"],
        )
        store_times.append(time.perf_counter() - start)
        if not result.changed:
            raise SystemExit(f"store {k + 1} of {HISTORY_REF} changed nothing")
    table.timing(
        "Vault.store in process (making the versions)",
        size,
        store_times,
        note=f"{versions} stores of one memory, each a commit; the setup of the history figures",
    )
    relpath = str(result.memory.path)
    found = vault.history(HISTORY_REF)
    if len(found) != versions:
        raise SystemExit(f"Vault.history({HISTORY_REF!r}) gave {len(found)} versions, expected {versions}")

    on_target = size == TARGET_SIZE and versions == TARGET_VERSIONS
    base = timed(["git", "-C", str(s.vault), "log", "--format=%H", "--", relpath], s.env, args.runs)
    table.timing(
        f"memfile history REF, {versions} versions (process)",
        size,
        timed([*s.memfile, "--vault", str(s.vault), "--mind", MIND, "history", HISTORY_REF], s.env, args.runs),
        baseline="git log --format=%H -- FILE",
        base=base,
        limit_s=HISTORY_TARGET_S if on_target else None,
        target=f"<= {HISTORY_TARGET_S * 1000:g} ms" if on_target else "",
    )
    table.timing(
        "  git log -p -- FILE (process, every version's diff)",
        size,
        timed(["git", "-C", str(s.vault), "log", "-p", "--format=%H", "--", relpath], s.env, args.runs),
        baseline="git log --format=%H -- FILE",
        base=base,
        note="what one git process costs to produce every version's change",
    )

    in_process, resolving = [], []
    for _ in range(max(args.runs, 5)):
        start = time.perf_counter()
        vault.history(HISTORY_REF)
        in_process.append(time.perf_counter() - start)
        start = time.perf_counter()
        vault.memories()
        resolving.append(time.perf_counter() - start)
    vault.close()
    table.timing(f"Vault.history(ref), {versions} versions (in process)", size, in_process)
    table.timing(
        "  of which Vault.memories() (REF resolution)",
        size,
        resolving,
        note="history resolves the REF through every memory of the mind first",
    )


def bench_recall_at(s: Setup, args: argparse.Namespace, table: Table, work: Path) -> None:
    from memfile import Vault

    size = args.size
    say(f"\n== recall --at 30d, {size:,} memories ==")
    sha = s.git(s.vault, "rev-list", "-1", f"--before={MONTH_BACK_DAYS - 1} days ago", "HEAD").strip()
    query = "deploy the server"
    cold, cold_query, cached, cached_query = [], [], [], []
    for _ in range(max(args.runs, 3)):
        vault = Vault.open(s.vault, MIND)
        start = time.perf_counter()
        report = vault.recall(at="30d")
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        vault.recall(at="30d")
        cached.append(time.perf_counter() - start)
        if vault.last_recall().as_of["commit"] != sha:
            raise SystemExit(f"recall --at 30d read {vault.last_recall().as_of}, not the commit {sha[:8]}")
        start = time.perf_counter()
        vault.recall(query=query, at="30d")
        cold_query.append(time.perf_counter() - start)
        start = time.perf_counter()
        vault.recall(query=query, at="30d")
        cached_query.append(time.perf_counter() - start)
        vault.close()
    if report.total < size * 0.9:  # the generated vault's expired memories are left out
        raise SystemExit(f"recall --at 30d saw {report.total} memories of {size:,}")

    checkout = work / "checkout"

    def through_a_checkout() -> float:
        took = run(["git", "-C", str(s.vault), "worktree", "add", "-q", "--detach", str(checkout), sha], s.env)[0]
        took += run([*s.memfile, "--vault", str(checkout), "--mind", MIND, "recall"], s.env)[0]
        run(["git", "-C", str(s.vault), "worktree", "remove", "--force", str(checkout)], s.env)
        return took

    def archive() -> float:
        return run(["sh", "-c", f'git -C "{s.vault}" archive {sha} -- {MIND} | tar -x -C "{work}/archive"'], s.env)[0]

    (work / "archive").mkdir()
    base = [through_a_checkout() for _ in range(args.runs)]
    archived = [archive() for _ in range(args.runs)]
    on_target = size == TARGET_SIZE
    table.timing(
        "Vault.recall(at='30d'), cold (in process)",
        size,
        cold,
        baseline="git worktree add + memfile recall",
        base=base,
        limit_s=RECALL_AT_TARGET_S if on_target else None,
        target=f"<= {RECALL_AT_TARGET_S:g} s" if on_target else "",
        note=f"a fresh Vault each run: ls-tree, one cat-file of {report.total:,} files, parsing, the recall",
    )
    table.timing("  again, kept per commit (in process)", size, cached)
    table.timing(
        "Vault.recall(query, at='30d'), cold (in process)",
        size,
        cold_query,
        note="after the whole recall: its first search indexes the commit's memories in memory",
    )
    table.timing("  again, kept per commit (in process)", size, cached_query)
    table.timing(
        "memfile recall --at 30d (process)",
        size,
        timed([*s.memfile, "--vault", str(s.vault), "--mind", MIND, "recall", "--at", "30d"], s.env, args.runs),
        baseline="git archive COMMIT | tar -x",
        base=archived,
        limit_s=RECALL_AT_TARGET_S if on_target else None,
        target=f"<= {RECALL_AT_TARGET_S:g} s" if on_target else "",
        note="a process each run, no resident reader (MEMFILE_NO_RESIDENT): the commit is read anew each time",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=TARGET_SIZE, help="memories in the vault (default 10,000)")
    parser.add_argument(
        "--versions",
        type=int,
        default=TARGET_VERSIONS,
        help="versions of the memory whose history is read (default 100)",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--keep", action="store_true", help="keep the vaults and repositories (their folder is printed)"
    )
    parser.add_argument("--json-out", type=Path, help="also write the JSON blob to this file")
    args = parse_args(parser, size=50, versions=3, runs=1)
    env = bench_env()
    git_version = run(["git", "--version"], env)[1].strip()
    commit = memfile_commit()
    say(f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, {git_version}, runs {args.runs}")
    table = Table(TIMING_COLUMNS, smoke=args.smoke, label=timing_label)

    work = Path(tempfile.mkdtemp(prefix="memfile-bench-git-"))
    try:
        say("\n== setup ==")
        setup = Setup(work, env, args.size, args.seed)
        bench_sync(setup, args, table)
        bench_history(setup, args, table)
        bench_recall_at(setup, args, table, work)
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
            "seed": args.seed,
            "smoke": args.smoke,
            "rows": table.rows,
        },
        indent=2,
    )
    print(blob)
    if args.json_out:
        args.json_out.write_text(blob + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
