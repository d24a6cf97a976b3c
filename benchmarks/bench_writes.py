"""Write speed (issue 8): `Vault.store` latency in process, and stores per second with 1, 4 and 8 writer processes.

Run from the project root (one command):

    python benchmarks/bench_writes.py                          # 10,000 memories, 50 stores, 1/4/8 writers x 20
    python benchmarks/bench_writes.py --n 2000 --writers 1 8 --per-writer 10 --keep --json-out writes.json
    python benchmarks/bench_writes.py --profile                # also cProfile one store (done anyway on a MISS)
    python benchmarks/bench_writes.py --smoke                  # once, at 100 memories, 1 and 2 writers: does it run?

Setup (untimed, in a temp folder deleted at the end; `--keep` keeps it): a vault of `--n`
memories from benchmarks/make_vault.py, with `lock_timeout = 60` added to its
memfile.toml so writers wait for each other instead of failing. The vault has no git
repository; the first (untimed) `Vault.store` makes it one, as any memfile write does: it
commits the vault as found ("init: record the vault as found"), then the store, and
builds the index. Its time is reported as info.

1. One writer in process: `--stores` stores of new keys (categories rotate) through one
   `Vault.open` object; p50 and p95 of each `Vault.store` call (lock, stat-only check of
   the mind, catalog lookup, file write, git add + commit, index update). Then the same
   with `Vault.open(watch=True)` once its watcher vouches for the index (the stat-only
   check is skipped then, as in every long-lived process that watches: the MCP server).
2. Concurrent writers: for each count in `--writers`, that many processes (this script with
   `--worker`) each open the vault, report ready, wait for the go, then store `--per-writer`
   memories with distinct keys in a loop, timing each store. Wall time runs from the go to
   the last process's report, so interpreter start, imports and `Vault.open` are outside
   it (the time from launching the processes is in the notes). Stores per second is all
   successful stores / wall time. Any exception (a `LockTimeout` too), a store that
   reports no change, or a process that dies counts as an error. The latency rows pool
   every store of every process.

After every phase the benchmark checks that every successful store's file is in the commit
that store reported (`git cat-file --batch-check COMMIT:PATH`), that the commits grew by at
least one and at most the number of stores (stores that waited for the writer lock are
committed together by its holder; the number of commits is reported), that each stored file
exists, and that `git status --porcelain` is empty. When a target misses (or with
`--profile`), one more store of a new key (after an untimed warm-up store) runs under cProfile and
the top functions by cumulative time are printed and put in the JSON blob.

Targets (issue 8), checked at 10,000 memories: `Vault.store` p50 <= 100 ms in process;
with 8 writers no errors and >= 15 stores/s in total. Other sizes and writer counts are
reported without a verdict. Every process runs with GIT_CONFIG_GLOBAL=/dev/null and
GIT_CONFIG_NOSYSTEM=1 (memfile supplies the commits' identity).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import (  # noqa: E402
    MIND,
    Column,
    IndexPeek,
    Table,
    bench_env,
    fmt_ms,
    fmt_size,
    make_vault,
    memfile_commit,
    p50,
    p95,
    parse_args,
    run,
    say,
    wait_until,
)

TARGET_SIZE = 10_000
STORE_TARGET_S = 0.100  # p50 of one Vault.store in process
WRITERS_TARGET = 8  # with this many writer processes...
THROUGHPUT_TARGET = 15.0  # ...at least this many stores per second in total, and no errors
LOCK_TIMEOUT = 60
CATEGORIES = ["fact", "note", "project", "context", "preference", "skill", "mistake", "identity"]


# --- measuring ----------------------------------------------------------------


def content_for(key: str, writer: str, i: int) -> str:
    return (
        f"Benchmark memory {key}: {writer} stored item {i}. The deployment pipeline for the billing "
        f"service now runs the migration step before the release, and the team owns the rollback notes."
    )


def commit_count(vault: Path, env: dict[str, str]) -> int:
    return int(run(["git", "-C", str(vault), "rev-list", "--count", "HEAD"], env)[1].strip())


def git_status(vault: Path, env: dict[str, str]) -> str:
    return run(["git", "-C", str(vault), "status", "--porcelain"], env)[1].strip()


# --- the writer process -----------------------------------------------------------


def worker(vault: str, name: str, count: int) -> int:
    """One writer: open the vault, say ready, wait for "go" on stdin, store `count` memories, print JSON."""
    from memfile import Vault

    v = Vault.open(vault, MIND)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    began = time.perf_counter()
    times: list[float] = []
    paths: list[str] = []
    commits: list[str] = []
    errors: list[str] = []
    notices: set[str] = set()
    for i in range(count):
        key = f"bench_{name}_{i}"
        start = time.perf_counter()
        try:
            result = v.store(CATEGORIES[i % len(CATEGORIES)], key, content_for(key, name, i), tags=["bench", "writes"])
        except Exception as exc:  # any exception is an error of the benchmark
            times.append(time.perf_counter() - start)
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        times.append(time.perf_counter() - start)
        notices.update(result.notices)
        if result.changed and result.commit:
            paths.append(result.memory.path)
            commits.append(result.commit)
        else:
            errors.append(f"store of {key} reported no change (changed={result.changed}, commit={result.commit})")
    print(
        json.dumps(
            {
                "name": name,
                "times": times,
                "paths": paths,
                "commits": commits,
                "errors": errors,
                "notices": sorted(notices),
                "elapsed": time.perf_counter() - began,
            }
        ),
        flush=True,
    )
    v.close()
    return 0


# --- the table --------------------------------------------------------------------

COLUMNS = [
    Column("figure", lambda r: r["figure"]),
    Column("N", lambda r: fmt_size(r["size"]), right=True),
    Column("stores", lambda r: "-" if r["stores"] is None else str(r["stores"]), right=True),
    Column("errors", lambda r: "-" if r["errors"] is None else str(r["errors"]), right=True),
    Column("wall s", lambda r: "-" if r["wall_s"] is None else f"{r['wall_s']:.2f}", right=True),
    Column("stores/s", lambda r: "-" if r["stores_per_s"] is None else f"{r['stores_per_s']:.1f}", right=True),
    Column("p50 ms", lambda r: fmt_ms(r["p50_ms"]), right=True),
    Column("p95 ms", lambda r: fmt_ms(r["p95_ms"]), right=True),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", lambda r: r["result"]),
]
TABLE = Table(COLUMNS)


def row(
    figure: str,
    size: int | None,
    *,
    times: list[float] | None = None,
    stores: int | None = None,
    errors: int | None = None,
    wall_s: float | None = None,
    ok: bool | None = None,
    check: bool = False,
    target: str = "",
    note: str = "",
) -> dict[str, Any]:
    """One line of the table; `ok` None is info, else PASS or MISS (`check`: see Table)."""
    rate = stores / wall_s if stores is not None and wall_s else None
    shown = []
    if times:
        shown.append(f"p50 {p50(times) * 1000:,.1f} ms, p95 {p95(times) * 1000:,.1f} ms;")
    if rate is not None:
        shown.append(f"{stores} stores in {wall_s:.2f} s = {rate:.1f}/s;")
    if errors is not None:
        shown.append(f"{errors} errors;")
    return TABLE.add(
        figure,
        ok=ok,
        check=check,
        target=target,
        note=note,
        shown=f"(N={size or '-'}) " + " ".join(shown).rstrip(";"),
        size=size,
        stores=stores,
        errors=errors,
        wall_s=wall_s,
        stores_per_s=rate,
        p50_ms=p50(times) * 1000 if times else None,
        p95_ms=p95(times) * 1000 if times else None,
    )


# --- the benchmark ------------------------------------------------------------------


def setup_vault(vault: Path, args: argparse.Namespace, env: dict[str, str]) -> None:
    from memfile import Vault

    say("\n== setup ==")
    say(f"  generated {args.n:,} memories in {make_vault(vault, args.n, env, seed=args.seed):.1f} s")
    config = vault / "memfile.toml"  # a top-level key, so before the first [table]
    config.write_text(f"lock_timeout = {LOCK_TIMEOUT}\n" + config.read_text(encoding="utf-8"), encoding="utf-8")
    if (vault / ".git").exists():
        raise SystemExit(f"{vault} is already a git repository; the first store should make it one")
    v = Vault.open(vault, MIND)
    if v.config.lock_timeout != LOCK_TIMEOUT:
        raise SystemExit(f"lock_timeout in memfile.toml was not read: {v.config.lock_timeout}")
    start = time.perf_counter()
    result = v.store("note", "bench_first_store", content_for("bench_first_store", "setup", 0), tags=["bench"])
    took = time.perf_counter() - start
    v.close()
    commits = commit_count(vault, env)
    first = run(["git", "-C", str(vault), "log", "--reverse", "--format=%s"], env)[1].splitlines()[0]
    ok = result.changed and commits == 2 and first.startswith("init") and not git_status(vault, env)
    row(
        "first store (untimed setup: git init, commit as found, index)",
        args.n,
        times=[took],
        stores=1,
        note=f"{commits} commits after it (first: {first!r}); notices: {'; '.join(result.notices) or 'none'}",
    )
    if not ok:
        raise SystemExit(
            f"the first store did not leave 2 commits and a clean tree: {commits} commits, "
            f"first {first!r}, status {git_status(vault, env)!r}"
        )


def check_phase(
    what: str, vault: Path, env: dict[str, str], before: int, stored: list[tuple[str, str]], size: int
) -> None:
    """Every store's file is in the commit it reported, commits grew by 1..stores (stores that waited for the
    lock share a commit), the files exist, the tree is clean."""
    after = commit_count(vault, env)
    paths = [path for _, path in stored]
    missing = [p for p in paths if not (vault / p).is_file()]
    check = subprocess.run(
        ["git", "-C", str(vault), "cat-file", "--batch-check"],
        input="".join(f"{commit}:{path}\n" for commit, path in stored),
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    not_in_commit = [line for line in check.splitlines() if line.endswith("missing")]
    status = git_status(vault, env)
    problems = []
    if not (min(1, len(paths)) <= after - before <= len(paths)):
        problems.append(f"commits grew by {after - before}, stores {len(paths)}")
    if missing:
        problems.append(f"{len(missing)} stored files missing, e.g. {missing[0]}")
    if not_in_commit:
        problems.append(f"{len(not_in_commit)} stores not in the commit they reported, e.g. {not_in_commit[0]}")
    if status:
        problems.append(f"git status not empty: {status.splitlines()[:3]}")
    row(
        f"  check: {what}",
        size,
        ok=not problems,
        check=True,
        target="every store in its commit, tree clean",
        note="; ".join(problems)
        or f"commits {before} -> {after} (+{after - before}) for {len(paths)} stores, each "
        "file in the commit its store reported, git status --porcelain empty",
    )


def bench_in_process(vault: Path, args: argparse.Namespace, env: dict[str, str], watch: bool = False) -> None:
    from memfile import Vault

    how = "a watcher vouching for the index" if watch else "no watcher"
    say(f"\n== one writer in process, {args.stores} stores, {how} ==")
    before = commit_count(vault, env)
    v = Vault.open(vault, MIND, watch=watch)
    if watch:
        wait_for_watcher(vault)
    times, stored, errors, notices = [], [], [], set()
    for i in range(args.stores):
        key = f"bench_inproc_{'w' if watch else ''}{i}"
        start = time.perf_counter()
        result = v.store(CATEGORIES[i % len(CATEGORIES)], key, content_for(key, "in-process", i), tags=["bench"])
        times.append(time.perf_counter() - start)
        notices.update(result.notices)
        if result.changed and result.commit:
            stored.append((result.commit, result.memory.path))
        else:
            errors.append(key)
    v.close()
    on_target = args.n == TARGET_SIZE
    row(
        f"Vault.store, new key (in process, 1 writer, {how})",
        args.n,
        times=times,
        stores=len(stored),
        errors=len(errors),
        ok=(p50(times) <= STORE_TARGET_S and not errors) if on_target else None,
        target=f"p50 <= {STORE_TARGET_S * 1000:g} ms" if on_target else "",
        note=f"{args.stores} stores through one Vault object (the first includes opening the index); "
        + (
            "the stat-only check of the mind is skipped while the watcher vouches; "
            if watch
            else "each store first runs the stat-only check of the mind's files; "
        )
        + f"notices: {'; '.join(sorted(notices)) or 'none'}",
    )
    check_phase(f"in process, {how}", vault, env, before, stored, args.n)


def wait_for_watcher(vault: Path, timeout: float = 120.0) -> None:
    """Until the watcher vouches for the index (see Vault.refresh)."""
    if wait_until(IndexPeek(vault, MIND).vouching, timeout, 0.05) is None:
        raise SystemExit("the watcher did not vouch for the index in time")


def bench_writers(vault: Path, count: int, args: argparse.Namespace, env: dict[str, str]) -> bool:
    say(f"\n== {count} writer process{'es' if count > 1 else ''} x {args.per_writer} stores ==")
    before = commit_count(vault, env)
    launched = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                str(vault),
                f"w{count}p{k}",
                str(args.per_writer),
            ],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(count)
    ]
    for p in procs:
        line = p.stdout.readline().strip() if p.stdout else ""
        if line != "ready":
            for q in procs:
                q.kill()
            raise SystemExit(f"a writer process did not start: {line!r} {p.stderr.read() if p.stderr else ''}")
    ready = time.perf_counter()
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
        p.stdin.close()
    reports: list[dict[str, Any]] = []
    crashed: list[str] = []
    for p in procs:
        out = p.stdout.readline() if p.stdout else ""
        reports.append(json.loads(out) if out.strip().startswith("{") else {})
    wall = time.perf_counter() - start
    for k, p in enumerate(procs):
        err = p.stderr.read() if p.stderr else ""
        p.wait(120)
        if p.returncode != 0 or not reports[k]:
            crashed.append(f"process {k} exit {p.returncode}: {err.strip()[-300:]}")
    times = [t for r in reports for t in r.get("times", [])]
    paths = [path for r in reports for path in r.get("paths", [])]
    stored = [pair for r in reports for pair in zip(r.get("commits", []), r.get("paths", []), strict=True)]
    errors = [e for r in reports for e in r.get("errors", [])]
    error_count = len(errors) + sum(args.per_writer for r in reports if not r)
    notices = sorted({n for r in reports for n in r.get("notices", [])})
    on_target = args.n == TARGET_SIZE and count == WRITERS_TARGET
    rate = len(paths) / wall if wall else 0.0
    samples = (errors + crashed)[:3]
    elapsed = sorted(r["elapsed"] for r in reports if r)
    spread = (
        (
            f"each process from go to its last store: {elapsed[0]:.1f}-{elapsed[-1]:.1f} s; "
            f"slowest single store {max(times) * 1000:,.0f} ms; "
        )
        if elapsed and times
        else ""
    )
    row(
        f"stores with commits, {count} writer process{'es' if count > 1 else ''}",
        args.n,
        times=times,
        stores=len(paths),
        errors=error_count,
        wall_s=wall,
        ok=(error_count == 0 and not crashed and rate >= THROUGHPUT_TARGET) if on_target else None,
        target=f"0 errors, >= {THROUGHPUT_TARGET:g} stores/s" if on_target else "",
        note=f"{count} x {args.per_writer} stores; p50/p95 are per store inside the processes (lock wait included); "
        f"{spread}launch to all ready {ready - launched:.2f} s (outside the wall time); "
        f"notices: {'; '.join(notices) or 'none'}" + (f"; ERRORS e.g. {' | '.join(samples)}" if samples else ""),
    )
    commits = len({commit for commit, _ in stored})
    row(
        f"  commits made by {count} writer process{'es' if count > 1 else ''}",
        args.n,
        stores=len(paths),
        note=f"{commits} commits for {len(paths)} stores: stores that waited for the lock were committed together",
    )
    check_phase(f"{count} writers", vault, env, before, stored, args.n)
    return error_count == 0


def profile_store(vault: Path, top: int) -> dict[str, Any]:
    """cProfile one `Vault.store` of a new key (after a warm-up store); the top functions by cumulative time."""
    from memfile import Vault

    say("\n== profile of one Vault.store ==")
    v = Vault.open(vault, MIND)
    v.store("note", "bench_profile_warmup", content_for("bench_profile_warmup", "profile", 0), tags=["bench"])
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    v.store("note", "bench_profile_store", content_for("bench_profile_store", "profile", 1), tags=["bench"])
    prof.disable()
    took = time.perf_counter() - start
    v.close()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    print(f"  one store under cProfile: {took * 1000:.1f} ms")
    print(buf.getvalue())
    entries = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        entries.append(
            {
                "function": f"{Path(filename).name}:{line}({func})",
                "calls": ncalls,
                "tottime_ms": tottime * 1000,
                "cumtime_ms": cumtime * 1000,
            }
        )
    entries.sort(key=lambda e: e["cumtime_ms"], reverse=True)
    return {"store_ms": took * 1000, "top_cumulative": entries[:top]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=TARGET_SIZE, help="vault size in memories (default 10000)")
    parser.add_argument("--stores", type=int, default=50, help="stores of the in-process writer (default 50)")
    parser.add_argument("--per-writer", type=int, default=20, help="stores per writer process (default 20)")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 4, 8], help="writer process counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile one store even when every target passes")
    parser.add_argument("--keep", action="store_true", help="keep the vault (its folder is printed)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON blob to this file")
    parser.add_argument("--worker", nargs=3, metavar=("VAULT", "NAME", "COUNT"), help=argparse.SUPPRESS)
    args = parse_args(parser, n=100, stores=3, per_writer=2, writers=[1, 2])
    if args.worker:
        return worker(args.worker[0], args.worker[1], int(args.worker[2]))
    TABLE.smoke = args.smoke
    env = bench_env()
    git_version = run(["git", "--version"], env)[1].strip()
    commit = memfile_commit()
    say(
        f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, {git_version}, "
        f"N {args.n:,}, {args.stores} in-process stores, writers {args.writers} x {args.per_writer}"
    )

    work = Path(tempfile.mkdtemp(prefix="memfile-bench-writes-"))
    vault = work / "vault"
    profile: dict[str, Any] | None = None
    try:
        setup_vault(vault, args, env)
        start_commits = commit_count(vault, env)
        bench_in_process(vault, args, env)
        bench_in_process(vault, args, env, watch=True)
        for count in args.writers:
            bench_writers(vault, count, args, env)
        total = sum(r["stores"] or 0 for r in TABLE.rows if r["figure"].startswith(("Vault.store", "stores with")))
        end_commits = commit_count(vault, env)
        status = git_status(vault, env)
        row(
            "check: whole run",
            args.n,
            ok=0 < end_commits - start_commits <= total and not status,
            check=True,
            target="at most 1 commit per store, tree clean",
            note=f"commits {start_commits} -> {end_commits} (+{end_commits - start_commits}) for {total} successful "
            f"stores after the first; git status --porcelain {'empty' if not status else repr(status[:200])}",
        )
        if args.profile or any(r["result"] == "MISS" for r in TABLE.rows):
            profile = profile_store(vault, 25)
    finally:
        if args.keep:
            print(f"\nvault kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    TABLE.print()
    blob = json.dumps(
        {
            "commit": commit,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "git": git_version,
            "n": args.n,
            "stores": args.stores,
            "per_writer": args.per_writer,
            "writers": args.writers,
            "seed": args.seed,
            "lock_timeout": LOCK_TIMEOUT,
            "smoke": args.smoke,
            "rows": TABLE.rows,
            "profile": profile,
        },
        indent=2,
    )
    print(blob)
    if args.json_out:
        args.json_out.write_text(blob + "\n", encoding="utf-8")
    return TABLE.exit_code()


if __name__ == "__main__":
    sys.exit(main())
