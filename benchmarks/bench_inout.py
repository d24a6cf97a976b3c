"""Export and import speed: `memfile export` and `memfile import` of 10,000 memories, as processes.

Run from the project root (one command):

    python benchmarks/bench_inout.py                       # 10,000 memories: exports x5, imports x3
    python benchmarks/bench_inout.py --n 2000 --runs 7 --import-runs 5 --keep
    python benchmarks/bench_inout.py --smoke               # once, at 100 memories: does it still run?

A vault of `--n` memories comes from benchmarks/make_vault.py (a git repository with one
commit), indexed by one untimed `memfile export` before any figure. Every figure is the wall time
of a whole `python -m memfile` process (what a person or an agent pays), the median of several runs,
each run next to its baseline in the same round (issue 25, "Speed"):

1. `memfile export -o FILE`: target <= 2 s; baseline `memfile list --json` (a process that reads
   every memory from the index and prints it as JSON). With `--raw` (each file's exact text and its
   sha256 too): the same target; baseline `tar -cf - MIND` (reading the bytes of every file). The
   peak RSS of each export process is reported (the export streams: it stays bounded).
2. `memfile import FILE` of the export into an empty vault (`memfile init`, untimed, before each
   run): target <= 15 s, as one commit; baseline: the same files copied into an empty git
   repository (untimed), then `git add -A` + `git commit` (timed): the floor of any import that
   commits its files with git. Before each of the two the disk is let settle (`settle`): neither
   pays for the untimed removal and copies before it.
3. `memfile import FILE` of the same file again into that vault: target <= 3 s and no commit;
   baseline `memfile list --json` of that vault.

Checks (what the figures rest on; a smoke run that misses one exits 1, as every benchmark here):
the export holds `--n` memories (its end line counts them); each import made exactly one commit
and left the tree clean; the import answered `--n` created; the import again made no commit and
answered every memory unchanged; after an import of the `--raw` export, each file is byte for byte
the source vault's. A missed speed target is reported, never an exit code.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    timing_label,
)

# issue 25, "Speed": judged at 10,000 memories
TARGET_SIZE = 10_000
EXPORT_TARGET_S = 2.0
IMPORT_TARGET_S = 15.0
IMPORT_AGAIN_TARGET_S = 3.0
#: Set for every process: the command runs in its own process whether a server answers or not.
NO_SERVER = {"MEMFILE_NO_SERVER": "1"}
#: The identity of the baseline's plain git commits (CI has none; memfile supplies its own).
GIT_IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]


# --- measuring ----------------------------------------------------------------


def run_rss(argv: Sequence[str], env: dict[str, str]) -> tuple[float, int]:
    """Run a process to its end (any exit but 0 stops the benchmark): (wall seconds, its peak RSS in KiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{err.decode(errors='replace')[-2000:]}")
    return took, usage.ru_maxrss


def commits(repo: Path, env: dict[str, str]) -> int:
    return int(run(["git", "-C", str(repo), "rev-list", "--count", "HEAD"], env)[1])


def clean(repo: Path, env: dict[str, str]) -> bool:
    return run(["git", "-C", str(repo), "status", "--porcelain"], env)[1].strip() == ""


def end_count(export: Path) -> int | None:
    """The count of the export's end line (None: no end line)."""
    with open(export, "rb") as f:
        f.seek(max(0, export.stat().st_size - 4096))
        last = f.read().decode("utf-8", errors="replace").splitlines()[-1]
    line = json.loads(last)
    return line.get("count") if line.get("type") == "end" else None


def report_of(stdout: str) -> dict[str, Any]:
    """`memfile import --json`'s report."""
    return json.loads(stdout)


def how_many(report: dict[str, Any], name: str) -> int:
    value = report.get(name) or 0
    return len(value) if isinstance(value, list) else int(value)


def files_differ(source: Path, target: Path) -> list[str]:
    """The memory files of `source`'s mind that `target`'s mind lacks or holds with other bytes."""
    differ = []
    for path in sorted((source / MIND).rglob("*.md")):
        other = target / path.relative_to(source)
        if not other.is_file() or other.read_bytes() != path.read_bytes():
            differ.append(str(path.relative_to(source)))
    return differ


# --- the benchmark ------------------------------------------------------------------


def empty_vault(path: Path, env: dict[str, str]) -> Path:
    """`memfile init PATH --mind MIND`: a vault with one empty mind and its first commit."""
    shutil.rmtree(path, ignore_errors=True)
    run([*MEMFILE, "init", str(path), "--mind", MIND], env)
    return path


def bench(args: argparse.Namespace, work: Path, env: dict[str, str], table: Table) -> None:
    n = args.n
    source = work / "source"
    say(f"\n== {n:,} memories ==")
    say(f"  generated in {make_vault(source, n, env, seed=args.seed, git=True):.1f} s")
    base = [*MEMFILE, "--vault", str(source), "--mind", MIND]
    export, raw_export = work / "export.jsonl", work / "export-raw.jsonl"
    judged = n == TARGET_SIZE

    # 1. export, with and without --raw, each round next to its baseline
    run([*base, "export", "-o", str(export)], env)  # untimed: builds the index
    times: dict[str, list[float]] = {"export": [], "raw": [], "list": [], "tar": []}
    rss: dict[str, list[int]] = {"export": [], "raw": []}
    for _ in range(args.runs):
        took, peak = run_rss([*base, "export", "-o", str(export)], env)
        times["export"].append(took)
        rss["export"].append(peak)
        took, peak = run_rss([*base, "export", "--raw", "-o", str(raw_export)], env)
        times["raw"].append(took)
        rss["raw"].append(peak)
        times["list"].append(run([*base, "list", "--json"], env)[0])
        times["tar"].append(run(["tar", "-cf", os.devnull, "-C", str(source), MIND], env)[0])
    sizes = {name: path.stat().st_size for name, path in (("export", export), ("raw", raw_export))}
    for name, figure, baseline, base_times in (
        ("export", "memfile export -o FILE (process)", "memfile list --json", times["list"]),
        ("raw", "memfile export --raw -o FILE (process)", "tar -cf /dev/null MIND", times["tar"]),
    ):
        table.timing(
            figure,
            n,
            times[name],
            p95_too=False,
            baseline=baseline,
            base=base_times,
            limit_s=EXPORT_TARGET_S if judged else None,
            target=f"<= {EXPORT_TARGET_S:g} s" if judged else "",
            note=f"file {sizes[name] / 1e6:.1f} MB; peak RSS {max(rss[name]) / 1024:.0f} MiB",
        )
    counted = [end_count(path) for path in (export, raw_export)]
    table.add(
        "export holds every memory (end line)",
        ok=counted == [n, n],
        check=True,
        target=f"{n:,}",
        size=n,
        shown=", ".join(str(c) for c in counted),
    )

    # 2. import into an empty vault (made before each run, untimed), next to git add + commit of the same files
    import_times, git_times, made, created, trees = [], [], [], [], []
    for attempt in range(args.import_runs):
        target = empty_vault(work / f"target{attempt}", env)  # a new folder each run: see `settle`
        before = commits(target, env)
        settle()
        took, out = run([*MEMFILE, "--vault", str(target), "--mind", MIND, "import", str(export), "--json"], env)
        import_times.append(took)
        made.append(commits(target, env) - before)
        created.append(how_many(report_of(out), "created"))
        trees.append(clean(target, env))
        plain = work / f"plain-git{attempt}"
        shutil.copytree(source / MIND, plain / MIND)
        run(["git", "init", "-q", str(plain)], env)
        settle()
        start = time.perf_counter()
        run(["git", "-C", str(plain), "add", "-A"], env)
        run(["git", "-C", str(plain), *GIT_IDENTITY, "commit", "-q", "-m", "import"], env)
        git_times.append(time.perf_counter() - start)
    table.timing(
        "memfile import FILE, empty vault (process)",
        n,
        import_times,
        p95_too=False,
        baseline="git add -A + commit",
        base=git_times,
        limit_s=IMPORT_TARGET_S if judged else None,
        target=f"<= {IMPORT_TARGET_S:g} s, one commit" if judged else "",
        note="the baseline commits the same files, copied into an empty git repository beforehand (untimed)",
    )
    table.add(
        "import made one commit, tree clean, all created",
        ok=set(made) == {1} and all(trees) and set(created) == {n},
        check=True,
        target=f"1 commit, {n:,} created",
        size=n,
        shown=f"commits {made}, created {created}, clean {trees}",
    )

    # 3. the same file again into the vault it was just imported into: nothing changes, no commit
    again = [*MEMFILE, "--vault", str(target), "--mind", MIND]
    again_times, list_times, made, counts = [], [], [], []
    run([*again, "list", "--json"], env)  # untimed: the import's index is in line
    for _ in range(args.runs):
        before = commits(target, env)
        took, out = run([*again, "import", str(export), "--json"], env)
        again_times.append(took)
        made.append(commits(target, env) - before)
        report = report_of(out)
        counts.append(tuple(how_many(report, name) for name in ("created", "updated", "unchanged")))
        list_times.append(run([*again, "list", "--json"], env)[0])
    table.timing(
        "memfile import FILE again (process)",
        n,
        again_times,
        p95_too=False,
        baseline="memfile list --json",
        base=list_times,
        limit_s=IMPORT_AGAIN_TARGET_S if judged else None,
        target=f"<= {IMPORT_AGAIN_TARGET_S:g} s, no commit" if judged else "",
    )
    table.add(
        "import again made no commit, all unchanged",
        ok=set(made) == {0} and set(counts) == {(0, 0, n)},
        check=True,
        target=f"0 commits, {n:,} unchanged",
        size=n,
        shown=f"commits {made}, (created, updated, unchanged) {counts}",
    )

    # 4. the --raw export imported: the files are the source's, byte for byte (timed once, for information)
    target = empty_vault(work / "raw-target", env)
    settle()
    took, _ = run([*MEMFILE, "--vault", str(target), "--mind", MIND, "import", str(raw_export), "--json"], env)
    table.timing("memfile import FILE (--raw export), empty vault (process)", n, [took], p95_too=False)
    differ = files_differ(source, target)
    table.add(
        "raw round trip: files byte-identical",
        ok=not differ,
        check=True,
        target="identical",
        size=n,
        shown=f"{len(differ)} differ" + (f", e.g. {differ[0]}" if differ else ""),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=TARGET_SIZE, help="memories in the vault")
    parser.add_argument("--runs", type=int, default=5, help="runs of each export and of the import again")
    parser.add_argument("--import-runs", type=int, default=3, help="runs of the import into an empty vault")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the generated vaults (their folder is printed)")
    args = parse_args(parser, n=100, runs=1, import_runs=1)
    env = {**bench_env(), **NO_SERVER}
    commit = memfile_commit()
    say(f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, runs {args.runs}")
    table = Table(TIMING_COLUMNS, smoke=args.smoke, label=timing_label)
    py = [run([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)]
    table.timing("python -c pass", None, py, p95_too=False)

    work = Path(tempfile.mkdtemp(prefix="memfile-bench-inout-"))
    try:
        bench(args, work, env, table)
    finally:
        if args.keep:
            say(f"\nvaults kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    table.print()
    print(
        json.dumps(
            {
                "commit": commit,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "n": args.n,
                "runs": args.runs,
                "import_runs": args.import_runs,
                "seed": args.seed,
                "smoke": args.smoke,
                "python_p50_s": p50(py),
                "rows": table.rows,
            },
            indent=2,
        )
    )
    return table.exit_code()


if __name__ == "__main__":
    sys.exit(main())
