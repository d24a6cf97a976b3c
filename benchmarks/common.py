"""Shared by the benchmark scripts: the environment, the generated vaults, timing, the table, `--smoke`.

A benchmark script starts with

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # this folder; PYTHONSAFEPATH=1 leaves it out
    from common import ...  # noqa: E402

because `installed_memfile()` sets PYTHONSAFEPATH=1 for every process started from here on, and
then `python benchmarks/bench_x.py` (a benchmark's own writer processes, say) no longer finds
this module by itself.

Benchmarks reach memfile through its public face only: `from memfile import Vault` and the
`memfile` command as a process. The one exception is `IndexPeek` below (see its docstring).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import math
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# LoCoMo (snap-research/locomo, CC BY-NC 4.0) is not in the project: when ../shared is beside the checkout,
# its data and the scripts that convert and score it are there; each benchmark part using them skips without.
SHARED = ROOT.parent / "shared"  # only for the LoCoMo data and scripts below
LOCOMO_DATA = SHARED / "bench-data" / "locomo" / "locomo10.json"
LOCOMO_TO_VAULT = SHARED / "bench" / "locomo_to_vault.py"
RETRIEVAL_EVAL = SHARED / "bench" / "retrieval_eval.py"
MAKE_VAULT = ROOT / "benchmarks" / "make_vault.py"
MIND = "bench"
MEMFILE = [sys.executable, "-m", "memfile"]


# --- the environment ------------------------------------------------------------


def installed_memfile() -> None:
    """Make every `python -m memfile` a benchmark starts run the memfile this Python imports, compiled.

    - `python -m` puts the current folder first on `sys.path`. Run from the
      project root, it would import the source folder `memfile/` instead of
      the installed copy, and with PYTHONDONTWRITEBYTECODE=1 (set on some
      machines) compile it from source in every process: 80 to 130 ms of each
      process figure at 10,000 memories, measured 2026-12-01. PYTHONSAFEPATH=1
      (Python 3.11) keeps the current folder off `sys.path` in every process
      started from here on.
    - The bytecode is written first, as `pip install` does: a fresh editable
      checkout would otherwise compile the package in every process as well.
    """
    os.environ["PYTHONSAFEPATH"] = "1"
    spec = importlib.util.find_spec("memfile")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"memfile is not importable by {sys.executable}; run with the project's venv")
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(Path(folder), quiet=1)


def bench_env() -> dict[str, str]:
    """Prepare this process and return the environment for every process a benchmark starts.

    The installed memfile, compiled (`installed_memfile`); no git configuration of the machine
    (CI has no git identity: memfile supplies its commits' author, plain git commands pass one);
    no MEMFILE_VAULT, MEMFILE_MIND or MEMFILE_SOURCE; MEMFILE_NO_RESIDENT=1 (the rows that measure the
    resident reader drop it). Set in `os.environ`, so the benchmark's
    in-process `Vault` calls run under the same conditions as its processes.
    """
    installed_memfile()
    os.environ.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    os.environ["MEMFILE_NO_RESIDENT"] = "1"  # a read leaves no resident reader to answer the next rows

    for name in ("MEMFILE_VAULT", "MEMFILE_MIND", "MEMFILE_SOURCE"):
        os.environ.pop(name, None)
    return dict(os.environ)


def memfile_commit() -> str:
    """The project's short commit, with "+changes" when memfile/ differs from it ("?" outside git)."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run([*git, "status", "--porcelain", "--", "memfile"], capture_output=True, text=True)
    return (commit or "?") + ("+changes" if commit and changed.stdout.strip() else "")


def say(message: str) -> None:
    print(message, flush=True)


# --- options ----------------------------------------------------------------------


def parse_args(parser: argparse.ArgumentParser, **tiny: Any) -> argparse.Namespace:
    """Add `--smoke` to `parser` and parse; with `--smoke`, the options in `tiny` take those values.

    A smoke run runs the whole benchmark once at a tiny size, in seconds: every step runs, a crash
    exits non-zero, and no target is judged (rows that have one say "smoke"). CI runs every
    benchmark so (tests/test_benchmarks_smoke.py), so a benchmark that no longer runs fails CI.
    """
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="run once at a tiny size (seconds): checks the benchmark runs; judges no target",
    )
    args = parser.parse_args()
    if args.smoke:
        for name, value in tiny.items():
            setattr(args, name, value)
    return args


# --- processes and times ----------------------------------------------------------------


def run(
    argv: Sequence[str],
    env: dict[str, str],
    *,
    ok: tuple[int, ...] = (0,),
    cwd: Path | None = None,
    stdin: str | None = None,
) -> tuple[float, str]:
    """Run a process to its end: (wall seconds, stdout). Any other exit code than `ok` stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(list(argv), env=env, cwd=cwd, input=stdin, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took, proc.stdout


def timed(
    argv: Sequence[str], env: dict[str, str], runs: int, *, warmup: bool = True, ok: tuple[int, ...] = (0,)
) -> list[float]:
    """Wall seconds of `runs` runs of a process (after one untimed run with `warmup`)."""
    if warmup:
        run(argv, env, ok=ok)
    return [run(argv, env, ok=ok)[0] for _ in range(runs)]


def p50(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def p95(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.01) -> float | None:
    """Seconds until `predicate()` is true (polled every `interval`), None on timeout."""
    start = time.perf_counter()
    while True:
        if predicate():
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            return None
        time.sleep(interval)


def settle() -> None:
    """Before a timed write: the disk work the untimed steps left (a vault made, files copied) done, so
    that the figure does not pay for it.

    Nor should a timed write follow the removal of many files: each run writes into a new folder, and
    the folders go at the end. On this machine (ext4 mounted with `discard`, 2026-12-02) creating a file
    took 0.5-1.1 ms for more than 20 s after 10,000 files were removed, until about as many new files
    had been created, against 0.04-0.1 ms otherwise: an import of 10,000 memories (and git's 10,000
    objects in the baseline) right after the last run's vault was removed paid 10 s and more for it.
    """
    os.sync()
    time.sleep(1.0)


# --- generated vaults and their queries ----------------------------------------------------


def make_vault(
    out: Path,
    n: int,
    env: dict[str, str],
    *,
    seed: int = 0,
    mind: str = MIND,
    git: bool = False,
    probes_out: Path | None = None,
) -> float:
    """A vault of `n` memories in `out` from benchmarks/make_vault.py (`git`: a repository with one
    commit; `probes_out`: 20 needle probes written there as JSON lines); seconds it took."""
    argv = [sys.executable, str(MAKE_VAULT), "--n", str(n), "--seed", str(seed), "--out", str(out), "--mind", mind]
    if git:
        argv.append("--git")
    if probes_out is not None:
        argv += ["--probes", "20", "--probes-out", str(probes_out)]
    return run(argv, env)[0]


# Natural-language questions over the generator's vocabulary (besides its needle probes).
QUESTIONS = [
    "Which database does the payments service use?",
    "What did the team decide about the deployment pipeline?",
    "Who owns the billing sync service?",
    "Where is the link to the release process notes?",
    "What mistake happened when deploying to production?",
]
STOP = set(
    """about after also again because been before came could does from have into just more most only
other over said same should since some still such than that their them then there these they this those
until very were what when where which while will with would your thinks stay ships""".split()
)


def word_pairs(mind_dir: Path, count: int, seed: int) -> list[tuple[str, str]]:
    """Two words of 4+ letters that occur together in one memory body, from `count` random memories."""
    files = sorted(str(p) for p in mind_dir.rglob("*.md"))
    r = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < count:
        text = Path(r.choice(files)).read_text(encoding="utf-8")
        body = text.split("\n---\n", 1)[-1]
        words = sorted({w.lower() for w in re.findall(r"\b[A-Za-z]{4,}\b", body)} - STOP)
        if len(words) >= 2:
            first, second = r.sample(words, 2)
            if (first, second) not in pairs:
                pairs.append((first, second))
    return pairs


def probe_questions(path: Path, count: int) -> list[str]:
    """The first `count` questions of make_vault.py's needle probes."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["question"] for line in f][:count]


# --- the table ---------------------------------------------------------------------------


def fmt_ms(v: float | None, fine: bool = False) -> str:
    """Milliseconds for a table: no decimals from 100, one below (two below 10 with `fine`)."""
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}" if fine and v < 10 else f"{v:,.1f}"


def fmt_size(size: int | None) -> str:
    return f"{size:,}" if size else "-"


def print_columns(head: Sequence[str], lines: Sequence[Sequence[str]], right: set[int], notes: list[str]) -> None:
    """A plain-text table (columns in `right` right-aligned), then the notes."""
    widths = [max(len(head[i]), *(len(line[i]) for line in lines)) for i in range(len(head))]

    def fmt(cols: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))

    print()
    print(fmt(head).rstrip())
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line).rstrip())
    if notes:
        print("\nnotes:")
        print("\n".join(notes))


@dataclass(frozen=True)
class Column:
    """One column of a table: its heading, its text for a row, right-aligned or not."""

    head: str
    cell: Callable[[dict[str, Any]], str]
    right: bool = False


def _result(r: dict[str, Any]) -> str:
    return r["result"] + (f" (+{fmt_ms(r['over_ms'])} ms)" if r.get("over_ms") else "")


#: The columns of a table of timings (`Table.timing` rows), optionally next to a baseline.
TIMING_COLUMNS = [
    Column("figure", lambda r: r["figure"]),
    Column("N", lambda r: fmt_size(r.get("size")), right=True),
    Column("runs", lambda r: str(r.get("n", 1)), right=True),
    Column("p50 ms", lambda r: fmt_ms(r.get("p50_ms")), right=True),
    Column("p95 ms", lambda r: fmt_ms(r.get("p95_ms")), right=True),
    Column("baseline", lambda r: r.get("baseline") or "-"),
    Column("base ms", lambda r: fmt_ms(r.get("baseline_p50_ms")), right=True),
    Column("x base", lambda r: f"{r['ratio']:.2f}" if r.get("ratio") else "-", right=True),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", _result),
]


class Table:
    """The rows of one benchmark run: each a dict (also what the JSON blob lists), printed as a table at the end.

    A row with a target gets "PASS" or "MISS"; in a smoke run "smoke" (no target is judged at a tiny
    size); a row without one "info". A `check` row states what the benchmark's figures rest on (every
    store is in its commit, the index is in line at the end): it is judged in a smoke run too, and
    `exit_code()` fails a smoke run that missed one.
    """

    def __init__(
        self,
        columns: Sequence[Column],
        smoke: bool = False,
        label: Callable[[dict[str, Any]], str] = lambda r: r["figure"],
    ) -> None:
        self.columns, self.smoke, self.label = list(columns), smoke, label
        self.rows: list[dict[str, Any]] = []

    def result(self, ok: bool | None, check: bool = False) -> str:
        if ok is None:
            return "info"
        return "smoke" if self.smoke and not check else "PASS" if ok else "MISS"

    def add(
        self,
        figure: str,
        *,
        ok: bool | None = None,
        check: bool = False,
        target: str = "",
        note: str = "",
        shown: str = "",
        **fields: Any,
    ) -> dict[str, Any]:
        """A row of `fields`, judged by `ok` (None: info; `check`: see the class); prints `  figure: shown`."""
        r = {
            "figure": figure,
            **fields,
            "target": target or None,
            "result": self.result(ok, check),
            "note": note or None,
        }
        if check:
            r["check"] = True
        self.rows.append(r)
        say(f"  {figure}: {shown}".rstrip(": ") + (f"; target {target}: {r['result']}" if ok is not None else ""))
        return r

    def timing(
        self,
        figure: str,
        size: int | None,
        times: Sequence[float],
        *,
        p95_too: bool = True,
        baseline: str | None = None,
        base: Sequence[float] | None = None,
        limit_s: float | None = None,
        judge: str = "p50",
        target: str = "",
        note: str = "",
    ) -> dict[str, Any]:
        """A row of wall times in seconds (shown in ms): p50, p95 (`p95_too`), mean and max, next to `base`
        times of the `baseline`; with `limit_s`, PASS when the `judge` figure ("p50" or "p95") is within it."""
        ms = [t * 1000 for t in times]
        r: dict[str, Any] = {
            "size": size,
            "n": len(ms),
            "p50_ms": p50(ms),
            "p95_ms": p95(ms) if p95_too else None,
            "mean_ms": statistics.fmean(ms),
            "max_ms": max(ms),
            "baseline": baseline,
            "baseline_p50_ms": p50(base) * 1000 if base else None,
            "baseline_p95_ms": p95(base) * 1000 if base else None,
            "limit_ms": limit_s * 1000 if limit_s is not None else None,
        }
        if r["baseline_p50_ms"]:
            r["ratio"] = r["p50_ms"] / r["baseline_p50_ms"]
        judged = r[f"{judge}_ms"] if limit_s is not None else None
        if judged is not None and not self.smoke:
            r["over_ms"] = max(0.0, judged - r["limit_ms"])
        fine = r["p50_ms"] < 10
        shown = (
            f"p50 {fmt_ms(r['p50_ms'], fine)} ms"
            + (f", p95 {fmt_ms(r['p95_ms'], fine)} ms" if p95_too else "")
            + (f"; {baseline} {fmt_ms(r['baseline_p50_ms'], fine)} ms" if base else "")
        )
        ok = judged <= r["limit_ms"] if judged is not None else None
        return self.add(figure, ok=ok, target=target, note=note, shown=f"(N={size or '-'}) {shown}", **r)

    def counts(self) -> str:
        found = [r["result"] for r in self.rows]
        text = f"{found.count('PASS')} PASS, {found.count('MISS')} MISS"
        if self.smoke:
            failed = [r["figure"].strip() for r in self.rows if r.get("check") and r["result"] == "MISS"]
            text += f" ({found.count('smoke')} targets not judged: a smoke run)"
            text += f"; smoke run FAILED its checks: {', '.join(failed)}" if failed else ""
        return text

    def exit_code(self) -> int:
        """1 for a smoke run that missed a check (its figures would mean nothing), else 0: a full run
        reports its MISSes in the table and still exits 0."""
        return 1 if self.smoke and any(r.get("check") and r["result"] == "MISS" for r in self.rows) else 0

    def print(self) -> None:
        """The table, its notes, and the count of PASS and MISS."""
        lines = [[c.cell(r) for c in self.columns] for r in self.rows]
        right = {i for i, c in enumerate(self.columns) if c.right}
        notes = [f"  {self.label(r)}: {r['note']}" for r in self.rows if r.get("note")]
        print_columns([c.head for c in self.columns], lines, right, notes)
        print(f"\n{self.counts()}")


def timing_label(r: dict[str, Any]) -> str:
    """A timing row's name in the notes: its figure and size."""
    return f"{r['figure']} (N={r.get('size') or '-'})"


def run_sections(
    name: str, args: argparse.Namespace, sections: Sequence[tuple[Callable[[Path, Any, Table], None], Table]]
) -> int:
    """A benchmark's run: each section filling its table in one temp folder (kept with `--keep`), the tables
    printed, every row written to `--json-out`; the exit code (1 when a target was missed)."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix=f"memfile-bench-{name}-"))
    say(f"memfile {memfile_commit()}, work folder {work}")
    try:
        for section, table in sections:
            section(work, args, table)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for _, table in sections:
        table.print()
    if args.json_out:
        rows = [row for _, table in sections for row in table.rows]
        args.json_out.write_text(json.dumps({"rows": rows}, indent=2), encoding="utf-8")
    return max(table.exit_code() for _, table in sections)


# --- reports of the public API ------------------------------------------------------------


def field(report: Any, name: str) -> Any:
    """A field of a report of the public API, whether a dict (`Vault.status()` today) or a typed report."""
    return report[name] if isinstance(report, dict) else getattr(report, name)


# --- the one hook into memfile's own files ---------------------------------------------------


class IndexPeek:
    """What a mind's index holds and whether a watcher vouches for it, seen without changing anything.

    Every read of the public API brings the index in line with the files first, so a benchmark
    that measures how fast *a watcher* does that cannot ask through it. This is the one place
    where benchmarks know memfile's own files, both documented in the README's watcher section:

    - the watcher's vouching marker, `.memfile/watch-<mind>.clean`, holding the watcher's pid
      (a marker whose process is gone vouches for nothing);
    - the index's catalog, `.memfile/index/<mind>/catalog_v<N>.sqlite`, opened read-only: its
      `files` table has a row per file the index recorded (`path`, vault-relative with `/`) and
      the memory read from it (`memory`, NULL for a file that could not be parsed). The index
      writes it after its Whoosh commit, so a change seen here is searchable.

    If memfile changes either, tests/test_benchmarks_smoke.py fails: update this class only.
    """

    def __init__(self, vault: Path, mind: str = MIND) -> None:
        self.vault, self.mind = vault, mind
        self.marker = vault / ".memfile" / f"watch-{mind}.clean"
        self._db: sqlite3.Connection | None = None

    def vouching(self) -> bool:
        """A live watcher has applied every change it heard of (its marker names a running process)."""
        try:
            pid = int(self.marker.read_text(encoding="ascii").split()[0])
        except (OSError, ValueError, IndexError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            folder = self.vault / ".memfile" / "index" / self.mind
            found = sorted(folder.glob("catalog_v*.sqlite"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
            if not found:
                raise SystemExit(
                    f"no index catalog (catalog_v*.sqlite) in {folder}: memfile's index layout "
                    "changed? update IndexPeek in benchmarks/common.py"
                )
            self._db = sqlite3.connect(f"file:{found[-1]}?mode=ro", uri=True, timeout=5, isolation_level=None)
        return self._db

    def has_path(self, path: str) -> bool:
        """The index records `path` (parsed or not)."""
        return self.db.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is not None

    def has_memory(self, path: str) -> bool:
        """The index holds a memory read from `path`."""
        found = self.db.execute("SELECT 1 FROM files WHERE path = ? AND memory IS NOT NULL", (path,)).fetchone()
        return found is not None

    def has_token(self, path: str, token: str) -> bool:
        """The memory the index holds for `path` contains `token`."""
        found = self.db.execute("SELECT instr(memory, ?) FROM files WHERE path = ?", (token, path)).fetchone()
        return bool(found and found[0])

    def count_like(self, pattern: str, *, memories_only: bool = True) -> int:
        """Paths the index records matching the SQL LIKE `pattern` (with `memories_only`, those it parsed)."""
        sql = "SELECT count(*) FROM files WHERE path LIKE ?" + (" AND memory IS NOT NULL" if memories_only else "")
        return int(self.db.execute(sql, (pattern,)).fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
