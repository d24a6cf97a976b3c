"""Watcher: latency from a file write to the index, idle CPU, memory, a 1,000-file checkout, shutdown.

Run from the project root (one command, a few minutes; keep other load off the machine):

    python benchmarks/bench_watch.py                        # 10,000 memories, 200 edits, 60 s idle
    python benchmarks/bench_watch.py --n 10000 --edits 200 --idle 60 --folders 5 --outs 5 --keep
    python benchmarks/bench_watch.py --smoke    # once, at 100 memories, 8 edits, a 20-file checkout: does it run?

What it does (figures and targets from issue 4, "Measure and report"):

1. Generates an N-memory vault with benchmarks/make_vault.py (`--git`: a repository with one
   commit) in a temp folder, runs `memfile reindex` once, then starts `memfile watch` as a real
   process (`python -m memfile --vault V --mind bench watch`, default debounce) and waits until
   `Vault.open(V).status()["watcher_pid"]` is its pid. A few warm-up edits are not counted.
2. Latency from a file write to the change being in the index, over `--edits` edits of eight
   kinds, interleaved in a seeded random order: in-place append; JetBrains safe write
   (`x.md___jb_tmp___`, original renamed to `x.md___jb_old___`, tmp renamed over, old deleted);
   `sed -i` (temp `sedXXXXXX` in the folder, then `os.replace`); vim with `backupcopy=no`
   (`4913` probe, `.x.md.swp`, original renamed to `x.md~`, new `x.md` written, backup deleted);
   a new file; a delete; a rename within its folder; a move to another category folder. Every
   content edit writes a unique token. After each edit this process polls what the index holds
   (`IndexPeek` in common.py: the row of the path in the index's catalog, read-only, and whether
   its stored memory holds the token) every 10 ms, never through a `Vault` call, so the poller
   never brings the index in line itself; the watcher alone must. The catalog is written after
   the Whoosh commit, so a change seen there is searchable. Latency = first poll that sees the change
   minus the moment the file operation returned (10 ms resolution). Target: p95 <= 1 s.
   Besides, `--folders` times a folder of 5 files moved into the mind from outside (a folder event,
   which makes the watcher fall back to the full stat-only diff of all N files), and `--outs` a
   file moved out of the vault (a file manager's "move to trash": an unpaired rename).
   An idle watcher vouches for the index (marker `.memfile/watch-<mind>.clean`; commands then skip
   their stat-only diff), so for each edit the time from the write until the marker is gone is
   measured too (polled every 0.2 ms): a read inside that window answers from the old index.
3. CPU time of the idle watcher over `--idle` seconds: utime+stime from /proc/<pid>/stat before
   and after, as a percentage of one core (target < 1 %, "no polling loop"); also the thread
   count and the context switches per second of all its threads (how often it wakes up).
4. Resident memory (VmRSS, and the peak VmHWM) of the watcher after the edits.
5. A 1,000-file checkout (`--checkout-files`): the edits are committed, 1,000 new files are written, committed on a
   new branch (`git add -A`, commit) and the original branch checked out again (all while the
   watcher runs; it absorbs those too). Then `git checkout <branch>` is timed until all 1,000
   paths are recorded by the index, and the batches it took are counted from the watcher's stdout
   (one "indexed ..." line per batch that changed something). Switching back (1,000 removals)
   is reported beside it.
6. SIGTERM twice: first to the watcher measured above, idle; then a second watcher is started
   (its start is a full stat-only diff, timed), an append is written and 50 ms later (inside the
   debounce) it gets SIGTERM. For both: the time until the process exits (target <= 2 s) and its
   exit code; then whether the pending edit reached the index, the one-watcher lock and the
   vouching marker are gone, and no child process (pgrep -P, seen before the signal) or other
   process naming the vault remains.

Before stopping, the index must be fully in line (`status()["stale"]` empty) and `Vault.search`
must find sampled tokens. Prints a table (figure, value, target, PASS/MISS/info) and a JSON blob.
The vault is deleted at the end (`--keep` keeps it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import (  # noqa: E402
    MEMFILE,
    MIND,
    Column,
    IndexPeek,
    Table,
    bench_env,
    field,
    make_vault,
    memfile_commit,
    p50,
    p95,
    parse_args,
    say,
    wait_until,
)
from common import (
    run as run_process,
)

CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context", "note"]
KINDS = ["append", "jetbrains", "sed_i", "vim", "new", "delete", "rename", "move"]
CONTENT_KINDS = {"append", "jetbrains", "sed_i", "vim", "new"}
IDENT = ["-c", "user.name=memfile-bench", "-c", "user.email=bench@localhost"]

LATENCY_P95_TARGET_S = 1.0
IDLE_CPU_TARGET_PCT = 1.0
STOP_TARGET_S = 2.0
POLL_S = 0.010
EDIT_TIMEOUT_S = 15.0
QUIET_S = 2.0  # no new watcher output for this long (> the 1 s batch cap) = the watcher is idle
BATCH_LINE = re.compile(r"indexed (\d+) added, (\d+) updated, (\d+) removed \((\d+) paths\)")


# --- measuring ------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, str]:
    return proc_status_path(f"/proc/{pid}/status")


def cpu_ticks(pid: int) -> int:
    """utime + stime of the whole process (all threads), in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), counted after "pid (comm)"


def context_switches(pid: int) -> dict[int, int]:
    """Voluntary + involuntary context switches of each of the process's threads (its wake-ups)."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            st = proc_status_path(f"/proc/{pid}/task/{task}/status")
        except OSError:
            continue
        found[int(task)] = int(st.get("voluntary_ctxt_switches", 0)) + int(st.get("nonvoluntary_ctxt_switches", 0))
    return found


def proc_status_path(path: str) -> dict[str, str]:
    with open(path, encoding="ascii", errors="replace") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def kib(value: str) -> int:
    return int(value.split()[0])


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def processes_touching(vault: Path, exclude: set[int]) -> list[str]:
    """Processes (other than `exclude`) whose command line names the vault or whose cwd is inside it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                cwd = ""
        except OSError:
            continue
        if str(vault) in cmd or cwd == str(vault) or cwd.startswith(str(vault) + "/"):
            found.append(f"{entry}: {cmd.strip()[:120]}")
    return found


# --- the watcher's output ----------------------------------------------------------


class WatcherLog:
    """The watcher's stdout/stderr, redirected to files (PYTHONUNBUFFERED: a line per batch at once)."""

    def __init__(self, folder: Path, name: str = "watch") -> None:
        self.out_path, self.err_path = folder / f"{name}.stdout", folder / f"{name}.stderr"
        self.out = open(self.out_path, "w+b")
        self.err = open(self.err_path, "w+b")

    def lines(self) -> list[str]:
        return self.out_path.read_text(encoding="utf-8", errors="replace").splitlines()

    def batches(self) -> list[str]:
        return [line for line in self.lines() if BATCH_LINE.search(line)]

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def wait_quiet(self, quiet: float = QUIET_S, timeout: float = 120.0) -> bool:
        """Wait until the watcher has printed nothing for `quiet` seconds."""
        start = time.monotonic()
        last_size, since = -1, time.monotonic()
        while time.monotonic() - start < timeout:
            size = self.out_path.stat().st_size + self.err_path.stat().st_size
            if size != last_size:
                last_size, since = size, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return True
            time.sleep(0.05)
        return False


# --- the table ---------------------------------------------------------------------------


def fmt_value(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:,.0f}" if abs(value) >= 100 else (f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}")
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{text} {unit}".strip()


TABLE = Table(
    [
        Column("figure", lambda r: r["figure"]),
        Column("value", lambda r: fmt_value(r["value"], r["unit"]), right=True),
        Column("target", lambda r: r["target"] or "-"),
        Column("result", lambda r: r["result"]),
    ]
)


def row(
    figure: str,
    value: float | str | None,
    unit: str = "",
    *,
    target: str = "",
    ok: bool | None = None,
    check: bool = False,
    note: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """A row of one value; `ok` None is info, else PASS or MISS (`check`: see Table)."""
    return TABLE.add(
        figure,
        ok=ok,
        check=check,
        target=target,
        note=note,
        shown=fmt_value(value, unit),
        value=value,
        unit=unit,
        **extra,
    )


# --- edits ------------------------------------------------------------------------------


def token(r: random.Random) -> str:
    # letters only, so the analyzer keeps it one word; "tok" + 12 letters is unique in this vault
    return "tok" + "".join(r.choice("bcdfghjklmnpqrtvwxz") for _ in range(12))


def write(path: Path, data: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(data)


def hand_made(tok: str, what: str) -> str:
    return f"---\ntags: [bench, watch]\n---\n{what} written by bench_watch, marker {tok}.\n"


class Editor:
    """Applies one edit of a kind to the vault; returns (paths that must be gone, path that must appear, token)."""

    def __init__(self, vault: Path, r: random.Random) -> None:
        self.vault, self.r = vault, r
        self.pool = sorted(p.relative_to(vault).as_posix() for p in (vault / MIND).rglob("*.md"))
        r.shuffle(self.pool)
        self.counter = 0
        self.survivors: dict[str, str] = {}  # path -> token, for the final search check

    def take(self) -> str:
        while True:
            rel = self.pool.pop()
            if (self.vault / rel).exists():
                return rel

    def edit(self, kind: str) -> tuple[list[str], str | None, str | None]:
        self.counter += 1
        n, r, vault = self.counter, self.r, self.vault
        tok = token(r)
        if kind == "new":
            rel = f"{MIND}/{r.choice(CATEGORIES)}/watch_new_{n}.md"
            write(vault / rel, hand_made(tok, "A new memory"))
            self.survivors[rel] = tok
            return [], rel, tok
        rel = self.take()
        path = vault / rel
        if kind == "append":
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"\nAppended in place, marker {tok}.\n")
        elif kind == "jetbrains":  # IntelliJ "safe write"
            text = path.read_text(encoding="utf-8") + f"\nSaved by a JetBrains IDE, marker {tok}.\n"
            tmp, old = Path(f"{path}___jb_tmp___"), Path(f"{path}___jb_old___")
            write(tmp, text)
            os.rename(path, old)
            os.rename(tmp, path)
            os.unlink(old)
        elif kind == "sed_i":  # GNU sed -i: a temp file in the same folder, renamed over the original
            text = path.read_text(encoding="utf-8") + f"\nEdited with sed -i, marker {tok}.\n"
            tmp = path.parent / ("sed" + "".join(r.choice(string.ascii_letters + string.digits) for _ in range(6)))
            write(tmp, text)
            os.replace(tmp, path)
        elif kind == "vim":  # vim with backupcopy=no: 4913 probe, swap file, backup by rename, new file
            text = path.read_text(encoding="utf-8") + f"\nSaved by vim, marker {tok}.\n"
            swap = path.parent / f".{path.name}.swp"
            write(swap, "vim swap\n")
            probe = path.parent / "4913"
            write(probe, "")
            os.unlink(probe)
            backup = Path(f"{path}~")
            os.rename(path, backup)
            write(path, text)
            os.unlink(backup)
            os.unlink(swap)
        elif kind == "delete":
            os.unlink(path)
            return [rel], None, None
        elif kind == "rename":
            new = f"{rel[:-3]}_renamed_{n}.md"
            os.rename(path, vault / new)
            return [rel], new, None
        elif kind == "move":
            folder, name = rel.split("/")[1], rel.split("/")[-1]
            other = r.choice([c for c in CATEGORIES if c != folder])
            new = f"{MIND}/{other}/{name}"
            if (vault / new).exists():
                new = f"{MIND}/{other}/{name[:-3]}_moved_{n}.md"
            os.rename(path, vault / new)
            return [rel], new, None
        else:
            raise ValueError(kind)
        self.survivors[rel] = tok
        return [], rel, tok


def arrived(catalog: IndexPeek, gone: list[str], new: str | None, tok: str | None) -> Callable[[], bool]:
    def check() -> bool:
        if any(catalog.has_path(p) for p in gone):
            return False
        if new is None:
            return True
        return catalog.has_token(new, tok) if tok else catalog.has_memory(new)

    return check


def git(vault: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=vault, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout.strip()


# --- the benchmark ---------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path, env: dict[str, str], info: dict[str, Any]) -> None:
    from memfile import Vault

    vault = work / "vault"
    memfile = [*MEMFILE, "--vault", str(vault), "--mind", MIND]
    r = random.Random(args.seed)

    say(f"\n== setup: {args.n:,} memories ==")
    say(f"  generated and committed in {make_vault(vault, args.n, env, seed=args.seed, git=True):.1f} s")
    row("memfile reindex (cold, process, before watching)", run_process([*memfile, "reindex"], env)[0], "s")
    branch = git(vault, env, "rev-parse", "--abbrev-ref", "HEAD")

    started: list[tuple[subprocess.Popen[bytes], WatcherLog]] = []
    marker = vault / ".memfile" / f"watch-{MIND}.clean"

    def start_watcher(name: str) -> tuple[subprocess.Popen[bytes], WatcherLog, float, float | None]:
        """Start `memfile watch`: (process, its output, s until status() names it, s until it vouches)."""
        log = WatcherLog(work, name)
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*memfile, "watch"],
            stdout=log.out,
            stderr=log.err,
            stdin=subprocess.DEVNULL,
            env=dict(env, PYTHONUNBUFFERED="1"),
        )
        started.append((proc, log))

        def watcher_pid() -> int | None:
            with Vault.open(vault, MIND) as v:
                return field(v.status(), "watcher_pid")

        if (
            wait_until(lambda: proc.poll() is not None or watcher_pid() == proc.pid, 60, 0.05) is None
            or proc.poll() is not None
        ):
            raise SystemExit(f"the watcher did not start (exit {proc.poll()}):\n{log.stderr()[-3000:]}")
        took = time.perf_counter() - start
        # the first pass is a full stat-only diff; a watcher that has applied it vouches for the index
        vouched = wait_until(marker.exists, 60, 0.005)
        return proc, log, took, (time.perf_counter() - start) if vouched is not None else None

    try:
        proc, log, took, vouch = start_watcher("watch")
        info["watcher_pid"] = proc.pid
        row("watcher start until status() shows its pid", took, "s")
        row(
            "watcher start until it vouches for the index",
            vouch,
            "s",
            note="" if vouch is not None else f"no {marker.name} marker appeared (memfile without vouching?)",
        )
        measure(args, vault, env, proc, log, r, branch, info, start_watcher, marker)
    finally:
        for proc, log in started:
            if proc.poll() is None:  # only when something above failed: stop our own watcher
                proc.kill()
                proc.wait()
        info["watcher_stdout_lines"] = sum(len(log.lines()) for _, log in started)
        info["watcher_stderr"] = "".join(log.stderr() for _, log in started)[-4000:]


def marker_window(marker: Path, since: float, limit: float = 3.0) -> float | None:
    """Seconds from `since` until the watcher's vouching marker is gone (polled every 0.2 ms); None if it stays."""
    while marker.exists():
        if time.perf_counter() - since > limit:
            return None
        time.sleep(0.0002)
    return time.perf_counter() - since


def measure(
    args: argparse.Namespace,
    vault: Path,
    env: dict[str, str],
    proc: subprocess.Popen[bytes],
    log: WatcherLog,
    r: random.Random,
    branch: str,
    info: dict[str, Any],
    start_watcher: Callable[[str], Any],
    marker: Path,
) -> None:
    from memfile import Vault

    pid = proc.pid
    catalog = IndexPeek(vault, MIND)
    editor = Editor(vault, r)
    rss_start = kib(proc_status(pid)["VmRSS"])

    # --- 2. latency --------------------------------------------------------------------------
    say(f"\n== latency: {args.edits} edits ==")
    for kind in ("append", "new", "rename"):  # warm-up, not counted
        gone, new, tok = editor.edit(kind)
        if wait_until(arrived(catalog, gone, new, tok), 30) is None:
            raise SystemExit(f"warm-up {kind} edit never reached the index; watcher stderr:\n{log.stderr()[-3000:]}")
    log.wait_quiet()
    kinds = [KINDS[i % len(KINDS)] for i in range(args.edits)]
    r.shuffle(kinds)
    per_kind: dict[str, list[float]] = {k: [] for k in KINDS}
    missed: list[str] = []
    windows: list[float] = []
    stuck = 0
    cpu0, wall0 = cpu_ticks(pid), time.perf_counter()
    for i, kind in enumerate(kinds):
        time.sleep(r.uniform(0.0, 0.05))  # edits do not arrive in lockstep with the watcher's batches
        vouched = marker.exists()
        gone, new, tok = editor.edit(kind)
        written = time.perf_counter()
        check = arrived(catalog, gone, new, tok)
        if vouched:
            window = marker_window(marker, written)
            if window is None:
                stuck += 1
            else:
                windows.append(window)
        while not check():
            if time.perf_counter() - written > EDIT_TIMEOUT_S:
                missed.append(f"{kind}: {gone} -> {new}")
                break
            time.sleep(POLL_S)
        else:
            per_kind[kind].append(time.perf_counter() - written)
        if (i + 1) % 50 == 0:
            say(f"  {i + 1} edits done")
    busy_cpu = (cpu_ticks(pid) - cpu0) / os.sysconf("SC_CLK_TCK") / (time.perf_counter() - wall0) * 100
    lat = [x for xs in per_kind.values() for x in xs]
    kind_note = "; ".join(
        f"{k} n={len(v)} p50 {p50(v) * 1000:.0f} p95 {p95(v) * 1000:.0f} max {max(v) * 1000:.0f}"
        for k, v in per_kind.items()
        if v
    )
    ok = not missed and bool(lat)
    row(
        "edits measured",
        len(lat),
        f"of {len(kinds)}",
        target=f"all {len(kinds)} within {EDIT_TIMEOUT_S:g} s",
        ok=ok,
        note=("missed: " + "; ".join(missed[:10])) if missed else "",
    )
    row("write -> indexed, p50", p50(lat) * 1000 if lat else None, "ms", note=f"ms per kind: {kind_note}")
    row(
        "write -> indexed, p95",
        p95(lat) * 1000 if lat else None,
        "ms",
        target=f"<= {LATENCY_P95_TARGET_S * 1000:g} ms",
        ok=bool(lat) and not missed and p95(lat) <= LATENCY_P95_TARGET_S,
    )
    row("write -> indexed, max", max(lat) * 1000 if lat else None, "ms")
    row("watcher CPU while editing", busy_cpu, "% of a core")
    if windows or stuck:
        row(
            "write -> watcher stops vouching, p95",
            p95(windows) * 1000 if windows else None,
            "ms",
            note=f"{len(windows) + stuck} edits made while the watcher vouched; window p50 "
            f"{p50(windows) * 1000:.2f} ms, max {max(windows) * 1000:.2f} ms"
            + (f"; {stuck} kept the marker > 3 s" if stuck else "")
            + ". A read in this window skips the stat-only diff and answers from the index as it was "
            "before the write (no read-your-writes for hand edits)",
        )
    info["vouch_window_ms"] = [round(x * 1000, 2) for x in windows]
    info["latency_ms"] = {k: [round(x * 1000, 1) for x in v] for k, v in per_kind.items()}

    # a folder moved into the mind (a folder event: the watcher falls back to the full stat-only diff)
    folder_lat, folder_kids = [], set()
    for i in range(args.folders):
        outside = vault.parent / f"outside_{i}"
        outside.mkdir()
        names = [f"imported_{i}_{j}.md" for j in range(5)]
        toks = [token(r) for _ in names]
        for name, tok in zip(names, toks):
            write(outside / name, hand_made(tok, "A memory in a folder moved in"))
        dest = vault / MIND / "note" / f"imported_{i}"
        os.rename(outside, dest)
        written = time.perf_counter()
        rels = [f"{MIND}/note/imported_{i}/{name}" for name in names]
        check = lambda: all(catalog.has_token(p, t) for p, t in zip(rels, toks))  # noqa: E731
        while not check() and time.perf_counter() - written < 60:
            folder_kids.update(children(pid))
            time.sleep(POLL_S)
        folder_lat.append(time.perf_counter() - written if check() else math.inf)
        log.wait_quiet()
    if folder_lat:
        row(
            "folder of 5 moved in -> indexed, p50",
            p50(folder_lat) * 1000,
            "ms",
            target=f"<= {LATENCY_P95_TARGET_S * 1000:g} ms",
            ok=p50(folder_lat) <= LATENCY_P95_TARGET_S,
            note=f"{len(folder_lat)} folders, ms: "
            + ", ".join(f"{x * 1000:.0f}" for x in folder_lat)
            + f"; child processes of the watcher seen meanwhile: {sorted(folder_kids) or 'none'}",
        )

    # a memory moved out of the vault (a file manager's "move to trash"): an unpaired IN_MOVED_FROM
    out_lat, out_windows = [], []
    trash = vault.parent / "trash"
    trash.mkdir(exist_ok=True)
    for i in range(args.outs):
        log.wait_quiet(0.5)
        rel = editor.take()
        vouched = marker.exists()
        os.rename(vault / rel, trash / f"{i}_{Path(rel).name}")
        written = time.perf_counter()
        window = marker_window(marker, written) if vouched else None
        if window is not None:
            out_windows.append(window)
        took = wait_until(lambda: not catalog.has_path(rel), 30)  # noqa: B023
        out_lat.append((time.perf_counter() - written) if took is not None else math.inf)
    if out_lat:
        row(
            "file moved out of the vault -> gone from index, p50",
            p50(out_lat) * 1000,
            "ms",
            target=f"<= {LATENCY_P95_TARGET_S * 1000:g} ms",
            ok=p50(out_lat) <= LATENCY_P95_TARGET_S,
            note=f"{len(out_lat)} moves, ms: "
            + ", ".join(f"{x * 1000:.0f}" for x in out_lat)
            + "; write -> watcher stops vouching, ms: "
            + (", ".join(f"{x * 1000:.0f}" for x in out_windows) or "n/a"),
        )

    # --- 3. idle CPU ---------------------------------------------------------------------------
    say(f"\n== idle: {args.idle:g} s ==")
    log.wait_quiet()
    lines_before = len(log.lines())
    threads = int(proc_status(pid)["Threads"])
    load0 = os.getloadavg()
    tck = os.sysconf("SC_CLK_TCK")
    cpu0, cs0, wall0 = cpu_ticks(pid), context_switches(pid), time.perf_counter()
    time.sleep(args.idle)
    cpu1, cs1, wall1 = cpu_ticks(pid), context_switches(pid), time.perf_counter()
    elapsed = wall1 - wall0
    idle_pct = (cpu1 - cpu0) / tck / elapsed * 100
    row(
        "idle watcher CPU",
        idle_pct,
        "% of a core",
        target=f"< {IDLE_CPU_TARGET_PCT:g} %",
        ok=idle_pct < IDLE_CPU_TARGET_PCT,
        note=f"{cpu1 - cpu0} ticks of 1/{tck} s over {elapsed:.1f} s; load average before {load0[0]:.2f}, "
        f"after {os.getloadavg()[0]:.2f}; watcher printed {len(log.lines()) - lines_before} lines meanwhile",
    )
    per_thread = sorted(((cs1.get(t, 0) - c) / elapsed, t) for t, c in cs0.items())
    row(
        "idle wake-ups (context switches, all threads)",
        sum(w for w, _ in per_thread),
        "/s",
        note="per thread (tid: /s, main thread = pid): "
        + ", ".join(f"{t}: {w:.1f}" for w, t in sorted(per_thread, key=lambda x: x[1])),
    )
    row("watcher threads", threads, "")

    # --- 4. memory -------------------------------------------------------------------------------
    st = proc_status(pid)
    row(
        f"watcher RSS at {args.n:,} memories, after the edits",
        kib(st["VmRSS"]) / 1024,
        "MiB",
        note=f"RSS right after start {rss_start / 1024:.1f} MiB; peak (VmHWM) so far {kib(st['VmHWM']) / 1024:.1f} MiB",
    )

    # --- 5. a 1,000-file checkout --------------------------------------------------------------------
    files = args.checkout_files
    say(f"\n== checkout of {files:,} files ==")
    git(vault, env, "add", "-A")
    git(vault, env, *IDENT, "commit", "-q", "-m", "bench_watch: the edits")  # the work tree does not change
    pattern = f"{MIND}/%/checkout_%"
    start = time.perf_counter()
    for i in range(files):
        write(
            vault / MIND / CATEGORIES[i % len(CATEGORIES)] / f"checkout_{i:04d}.md",
            hand_made(token(r), f"Checkout file {i}") + "Some more words about the release process. " * 5 + "\n",
        )
    wrote = time.perf_counter() - start
    took = wait_until(lambda: catalog.count_like(pattern) == files, 120)
    row(
        f"{files:,} files written by a program -> all indexed",
        took,
        "s",
        note=f"writing took {wrote:.2f} s; measured from the last write",
    )
    log.wait_quiet()
    git(vault, env, "checkout", "-q", "-b", "bench-checkout")
    git(vault, env, "add", "-A")
    git(vault, env, *IDENT, "commit", "-q", "-m", f"bench_watch: {files} new files")
    git(vault, env, "checkout", "-q", branch)
    took = wait_until(lambda: catalog.count_like(pattern) == 0, 120)
    log.wait_quiet()
    if took is None:
        raise SystemExit(f"switching back to the original branch: the {files:,} files never left the index")

    def checkout(to: str, want: int, label: str, target: str = "") -> None:
        before = len(log.batches())
        start = time.perf_counter()
        git(vault, env, "checkout", "-q", to)
        git_s = time.perf_counter() - start
        took = wait_until(lambda: catalog.count_like(pattern) == want, 120)
        total = time.perf_counter() - start
        log.wait_quiet()
        batches = log.batches()[before:]
        counts = [tuple(int(x) for x in BATCH_LINE.search(b).groups()) for b in batches]  # type: ignore[union-attr]
        recorded = catalog.count_like(pattern, memories_only=False)
        row(
            label,
            total if took is not None else None,
            "s",
            target=target,
            ok=(took is not None and recorded == want) if target else None,
            note=f"git checkout itself {git_s:.2f} s; {len(batches)} batch(es): "
            + "; ".join(f"{a} added, {u} updated, {d} removed, {n} paths" for a, u, d, n in counts)
            + f"; the index records {recorded} of them afterwards",
            batches=len(batches),
        )
        row(
            "  batches for it",
            len(batches),
            "",
            target="1 (one batch)" if target else "",
            ok=(len(batches) == 1) if target else None,
        )

    checkout(
        "bench-checkout", files, f"git checkout adding {files:,} files -> all indexed", target=f"all {files:,} recorded"
    )
    checkout(branch, 0, f"git checkout removing {files:,} files -> all gone")
    st = proc_status(pid)
    row(
        "watcher RSS after the checkouts",
        kib(st["VmRSS"]) / 1024,
        "MiB",
        note=f"peak (VmHWM) {kib(st['VmHWM']) / 1024:.1f} MiB",
    )

    # --- the index is in line, and searchable --------------------------------------------------
    git(vault, env, "checkout", "-q", "bench-checkout")
    wait_until(lambda: catalog.count_like(pattern) == files, 120)
    log.wait_quiet()
    with Vault.open(vault, MIND) as v:
        status = v.status()  # reads only; does not bring the index in line
        stale = field(status, "stale")
        sample = r.sample(sorted(editor.survivors.items()), min(20, len(editor.survivors)))
        found = sum(
            1 for path, tok in sample if any(h.memory.path == path for h in v.search(tok, include_expired=True))
        )
    row(
        "stale files after everything (status())",
        len(stale),
        "",
        target="0",
        ok=not stale,
        check=True,
        note=("stale: " + ", ".join(stale[:10]))
        if stale
        else f"{field(status, 'on_disk')} on disk, {field(status, 'indexed')} indexed",
    )
    row(
        "sampled tokens found by Vault.search",
        found,
        f"of {len(sample)}",
        target="all",
        ok=found == len(sample),
        check=True,
    )

    # --- 6. SIGTERM -----------------------------------------------------------------------------------
    say("\n== SIGTERM ==")

    def sigterm(proc: subprocess.Popen[bytes], label: str) -> list[int]:
        pid = proc.pid
        kids = children(pid)
        threads = int(proc_status(pid)["Threads"])
        start = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
            stop_s = time.perf_counter() - start
        except subprocess.TimeoutExpired:
            code, stop_s = None, None
        row(
            f"SIGTERM, {label} -> process exited",
            stop_s,
            "s",
            target=f"<= {STOP_TARGET_S:g} s",
            ok=stop_s is not None and stop_s <= STOP_TARGET_S,
            note=f"{threads} threads and child processes {kids or 'none'} just before the signal",
        )
        row("  exit code", code, "", target="0", ok=code == 0, check=True)
        return kids

    # a: the watcher measured above, idle (nothing pending)
    log.wait_quiet()
    wait_until(marker.exists, 10)
    kids = sigterm(proc, "nothing pending")

    # b: a fresh watcher (its start is a full stat-only diff of the whole vault), with a batch pending
    proc, log, took, vouch = start_watcher("watch2")
    row("second watcher: start until it vouches (full diff)", vouch, "s", note=f"status() named it after {took:.2f} s")
    log.wait_quiet(1.0)
    gone, new, tok = editor.edit("append")
    time.sleep(0.05)  # the event is recorded, the 0.3 s debounce has not passed: a batch is pending
    kids += sigterm(proc, "a batch pending")
    applied = arrived(catalog, gone, new, tok)()
    row("  the pending edit reached the index", "yes" if applied else "no", "", target="yes", ok=applied, check=True)
    with Vault.open(vault, MIND) as v:
        holder = field(v.status(), "watcher_pid")
    row(
        "one-watcher lock released",
        "yes" if holder is None else f"no (pid {holder})",
        "",
        target="yes",
        ok=holder is None,
        check=True,
    )
    row(
        "vouching marker removed",
        "no" if marker.exists() else "yes",
        "",
        target="yes",
        ok=not marker.exists(),
        check=True,
    )
    left = [k for k in kids if Path(f"/proc/{k}").exists()]
    others = processes_touching(vault, {os.getpid()})
    row(
        "processes left behind",
        len(left) + len(others),
        "",
        target="0",
        ok=not left and not others,
        check=True,
        note="; ".join([f"child {k}" for k in left] + others),
    )
    catalog.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the vault (default 10,000)")
    parser.add_argument("--edits", type=int, default=200, help="edits timed for the latency (default 200)")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds the idle watcher is watched (default 60)")
    parser.add_argument("--folders", type=int, default=5, help="folders of 5 files moved in, timed (default 5)")
    parser.add_argument("--outs", type=int, default=5, help="files moved out of the vault, timed (default 5)")
    parser.add_argument(
        "--checkout-files", type=int, default=1000, help="files the timed git checkout adds and removes (default 1,000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the vault and the watcher's output")
    args = parse_args(parser, n=100, edits=len(KINDS), idle=1.0, folders=1, outs=1, checkout_files=20)
    TABLE.smoke = args.smoke
    if not sys.platform.startswith("linux"):
        raise SystemExit("this benchmark reads /proc: Linux only")
    env = bench_env()
    commit = memfile_commit()
    import watchdog.version

    info: dict[str, Any] = {
        "commit": commit,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "watchdog": watchdog.version.VERSION_STRING,
        "n": args.n,
        "edits": args.edits,
        "idle_s": args.idle,
        "checkout_files": args.checkout_files,
        "seed": args.seed,
        "smoke": args.smoke,
        "load_average_at_start": os.getloadavg(),
    }
    say(
        f"memfile {commit}, python {platform.python_version()}, watchdog {info['watchdog']}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )

    work = Path(tempfile.mkdtemp(prefix="memfile-bench-watch-"))
    try:
        run(args, work, env, info)
    finally:
        if args.keep:
            say(f"\nvault and watcher output kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    TABLE.print()
    if info.get("watcher_stderr", "").strip():
        print("\nwatcher stderr (tail):\n" + info["watcher_stderr"][-1500:])
    print(json.dumps({**info, "rows": TABLE.rows}, indent=2))
    return TABLE.exit_code()


if __name__ == "__main__":
    sys.exit(main())
