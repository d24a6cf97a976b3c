"""Served speed and load: `memfile serve` through a real HTTP client over loopback.

Run from the project root (one command):

    python benchmarks/bench_serve.py                   # 10,000 memories, 16 clients for 60 s, 1,000 minds
    python benchmarks/bench_serve.py --n 2000 --duration 20 --minds 200 --keep --json-out serve.json
    python benchmarks/bench_serve.py --smoke           # everything once at a tiny size: does it still run?
    python benchmarks/bench_serve.py --only console    # the console's pages only (issue 26)

Every figure comes from a real `python -m memfile --vault V serve --port P --keys FILE` process on a
free loopback port, with its keys in a keys file in the benchmark's temp folder (made by `memfile key
add ... --json`, as a person would), driven by `http.client` (stdlib, one keep-alive connection per
client thread). Five parts, each printed as a table with its targets (issue 23, "Speed and load"; part 5, issue 26):

1. One client, on a vault of `--n` memories from benchmarks/make_vault.py (a git repository;
   all but `--critical` critical memories made normal, as bench_mcp.py does, so recall's budget fits),
   indexed once by `memfile reindex` before any server starts:
   * server start: spawn to the first authenticated answer (a Mind Key's search), the median of
     `--starts` starts, each ended by SIGTERM (the time to exit and its exit code are reported too);
     target <= 1 s;
   * `GET /memory/search?q=` with two words that occur together in one memory, p95 <= 15 ms;
   * `GET /memory/recall?q=<question>&budget=800`, p95 <= 25 ms;
   * `POST /memory` (a new key each time: a file, a commit), p50 <= 100 ms;
   * baselines in the same run: `GET /health` (the bare HTTP round trip), the same search and recall
     through the Python API in this process (`Vault.search`, `Vault.recall`: the server-side part),
     `Vault.store` in this process, and the CLI process `memfile search` for contrast; and the same
     search right after each POST (what a write costs the next read).
2. Load: `--clients` threads for `--duration` s against the same server, each a Mind Key agent (the
   threads spread over `--agents` keys): 80 % reads (search and recall?q=, half each) and 20 % stores
   (unique keys; `--store-share` changes the share: 0 and 1 separate the two kinds of work).
   Counted by status: a 503 with Retry-After is documented (the writer lock was busy), anything
   else but 200/201 is an error; reads/s (target >= 100), p50/p95/p99 of reads and stores, the
   server's RSS (VmRSS sampled, peak VmHWM), its CPU per request (the server, its git, the clients)
   and the server's split by thread (the worker, the event loop, the watcher: /proc/PID/task).
   Afterwards every acknowledged store must be at git's HEAD with its content (`git cat-file
   --batch`), and the work tree clean.
3. Hostile: `--hostile` hostile or malformed requests over raw sockets (bad JSON, wrong types,
   unknown fields, huge or broken Content-Length, a 12 MB body, traversal ids such as `../` and
   `%2e%2e%2f`, `?mind=` tricks, another mind's ids, bad tokens, bad Host headers, garbage methods
   and request lines). Target: no 5xx other than a 503 with Retry-After; the server still answers
   `/health` and a search afterwards; the sentinel folder beside the vault is unchanged and nothing
   new appeared outside the vault; no response carries the sentinel's secret or the other mind's.
4. Many minds (LangBot keeps one per chat): a vault of `--minds` minds x `--per-mind` memories,
   written directly in the documented file format (make_vault.py's generator, one mind at a time,
   in this process) with memfile.toml, .gitignore and one commit; a person's token. Start to the
   first answer (`/health`, then a search naming one mind with `?mind=`): target <= 2 s. Then every
   mind is opened with one request each (`GET /memory/recall?mind=`), once right after the vault was
   made (each mind's index is built then) and once more after a restart (indexed): the time to
   open them all, the RSS with every mind open, the server's inotify instances (fds linking to
   `anon_inode:inotify`: must be 1) and watches (`inotify wd:` lines of /proc/PID/fdinfo) next to
   the machine's limits, and its open files next to its soft limit (/proc/PID/limits).

5. The console (issue 26), on the main vault right after part 1 (before load's stores), as a person's
   browser asks: logged in through the login form (its hidden CSRF field, the token, the session cookie
   it sets), then `--console-calls` GETs each of the memories list (page 1, and the middle page, found
   from page 1's rel="next" link), a search of the list (`?q=` with two words, the word pairs cycled),
   and one memory with `--versions` versions (stored through POST /memory first; a check: every
   version's content is on its page). Target: p95 <= 100 ms each at --n >= 10,000. The figures are the
   request's wall time over loopback from this process, a client in another process than the server:
   the server's time plus one loopback round trip (part 1's GET /health). When the console sends a
   `Server-Timing: ...;dur=MS` header, its figures are reported beside them.

Checks (what the figures rest on; a smoke run that misses one exits 1, as every benchmark here):
no load errors, every acknowledged store in git, the tree clean, no 5xx from hostile requests, the
server alive afterwards, nothing written or leaked outside the vault, every mind opened, one inotify
instance, no traceback in any server's log. A missed speed target is reported, never an exit code;
a step that crashes is reported, the other parts still run, and the run exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from bench_mcp import demote_critical  # noqa: E402
from common import (  # noqa: E402
    MEMFILE,
    MIND,
    QUESTIONS,
    Column,
    Table,
    bench_env,
    fmt_ms,
    fmt_size,
    make_vault,
    memfile_commit,
    parse_args,
    probe_questions,
    run,
    say,
    timing_label,
    word_pairs,
)
from make_vault import generate  # noqa: E402

BUDGET = 800  # recall's budget in tokens, as bench_mcp.py
TARGETS = {  # issue 23; judged at --n >= 10,000 (and --minds >= 1,000 for the many-minds start)
    "search_p95_s": 0.015,
    "recall_p95_s": 0.025,
    "post_p50_s": 0.100,
    "start_s": 1.0,
    "minds_start_s": 2.0,
    "reads_per_s": 100.0,
    "console_p95_s": 0.100,  # issue 26: each console page, p95 at 10,000 memories
}
PART_NAMES = {
    "one-client": "1. one client",
    "load": "2. load",
    "hostile": "3. hostile",
    "many-minds": "4. many minds",
    "console": "5. console",
}
PARTS = tuple(PART_NAMES)
OTHER = "other"  # a second mind in the main vault: its ids are what a bench Mind Key must not reach
OTHER_ID = "mem_othermind0001"
OTHER_SECRET = "OTHER-MIND-SECRET-" + uuid.uuid4().hex[:12]
SENTINEL_SECRET = "SENTINEL-SECRET-" + uuid.uuid4().hex[:12]
HTTP_TIMEOUT_S = 60.0


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, -(-99 * len(s) // 100) - 1)]


def _value(r: dict[str, Any]) -> str:
    return str(r["value"]) if r.get("value") is not None else "-"


def _result(r: dict[str, Any]) -> str:
    return r["result"] + (f" (+{fmt_ms(r['over_ms'])} ms)" if r.get("over_ms") else "")


COLUMNS = [
    Column("figure", lambda r: r["figure"]),
    Column("N", lambda r: fmt_size(r.get("size")), right=True),
    Column("runs", lambda r: str(r["n"]) if r.get("n") else "-", right=True),
    Column("p50 ms", lambda r: fmt_ms(r.get("p50_ms")), right=True),
    Column("p95 ms", lambda r: fmt_ms(r.get("p95_ms")), right=True),
    Column("p99 ms", lambda r: fmt_ms(r.get("p99_ms")), right=True),
    Column("value", _value, right=True),
    Column("baseline", lambda r: r.get("baseline") or "-"),
    Column("base ms", lambda r: fmt_ms(r.get("baseline_p50_ms")), right=True),
    Column("x base", lambda r: f"{r['ratio']:.1f}" if r.get("ratio") else "-", right=True),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", _result),
]


class Rows(Table):
    """common's Table; a row with a `value` and nothing else to show prints that value as it is added."""

    def add(self, figure: str, *, shown: str = "", **fields: Any) -> dict[str, Any]:
        if not shown and fields.get("value") is not None:
            shown = str(fields["value"])
        return super().add(figure, shown=shown, **fields)


def timing(
    table: Table,
    figure: str,
    size: int | None,
    times: list[float],
    *,
    limit_s: float | None = None,
    judge: str = "p95",
    baseline: str | None = None,
    base: list[float] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A row of wall times (seconds) with p99 too; with `limit_s`, judged on the `judge` figure."""
    r = table.timing(
        figure,
        size,
        times,
        p95_too=len(times) > 1,
        baseline=baseline,
        base=base,
        limit_s=limit_s,
        judge=judge,
        target=f"{judge} <= {limit_s * 1000:g} ms" if limit_s is not None else "",
        note=note,
    )
    r["p99_ms"] = p99([t * 1000 for t in times]) if len(times) >= 20 else None
    return r


# --- the server and its clients ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_status(pid: int) -> dict[str, str]:
    """The fields of /proc/PID/status ({} once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
    except OSError:
        return {}


def cpu_of(pid: int) -> tuple[float, float]:
    """(seconds of CPU of the process itself, of its children waited for: git) from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of a process: tid -> (its name in /proc/PID/task/TID/comm, seconds of CPU so far)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text(encoding="ascii").strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        found[int(tid)] = (comm, (int(fields[11]) + int(fields[12])) / tick)
    return found


def cpu_by_thread(pid: int, before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> Counter[str]:
    """Seconds of CPU between two `thread_cpu` looks, by what each thread is: "event loop" (the main
    thread), "worker" (the busiest thread named memfile-worker: the worker names itself so), "watcher"
    (the other threads of that name: Linux names a thread after the one that starts it, and the worker
    starts the watcher's), "other threads" (the rest: the git tidy's, the command line's socket's).
    Threads that ended meanwhile (a commit's) are not counted."""
    spent = {tid: (name, seconds - before.get(tid, (name, 0.0))[1]) for tid, (name, seconds) in after.items()}
    named = sorted((seconds, tid) for tid, (name, seconds) in spent.items() if name == "memfile-worker")
    worker = named[-1][1] if named else None
    found: Counter[str] = Counter()
    for tid, (name, seconds) in spent.items():
        kind = (
            "event loop"
            if tid == pid
            else "worker"
            if tid == worker
            else "watcher"
            if name == "memfile-worker"
            else "other threads"
        )
        found[kind] += seconds
    return found


def kb(status: dict[str, str], name: str) -> int | None:
    """A `NNN kB` field of /proc/PID/status in kB."""
    found = status.get(name, "").split()
    return int(found[0]) if found else None


def mb(value_kb: int | None) -> str:
    return f"{value_kb / 1024:,.0f} MB" if value_kb else "-"


def inotify_of(pid: int) -> tuple[int, int, int]:
    """(inotify instances, inotify watches, open fds) of a process, from /proc/PID/fd and fdinfo."""
    instances = watches = fds = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        fds += 1
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            instances += 1
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as f:
                watches += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            continue  # closed meanwhile
    return instances, watches, fds


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """One keep-alive HTTP/1.1 connection to the server, acting with one credential."""

    def __init__(self, port: int, token: str | None) -> None:
        self.port, self.token = port, token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)

    def call(self, method: str, path: str, body: Any = None) -> Response:
        """One request; a connection error closes the connection (the next call opens a new one) and raises."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        start = time.perf_counter()
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            got = resp.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            raise
        took = time.perf_counter() - start
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, got, took)

    def ok(self, method: str, path: str, body: Any = None, expect: tuple[int, ...] = (200,)) -> Response:
        """A request that must answer one of `expect` (else the benchmark stops, naming the answer)."""
        r = self.call(method, path, body)
        if r.status not in expect:
            raise SystemExit(f"{method} {path} answered {r.status}, expected {expect}: {r.body[:500]!r}")
        return r

    def fresh(self) -> Client:
        """This client on a new connection (the server closes idle keep-alive connections)."""
        self.conn.close()
        return self

    def close(self) -> None:
        self.conn.close()


class Server:
    """A `memfile serve` process on a free loopback port, its output appended to `log`."""

    def __init__(self, vault: Path, keys: Path, env: dict[str, str], log: Path) -> None:
        self.vault, self.keys, self.env, self.log = vault, keys, env, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, token: str, path: str, timeout: float = 120.0) -> tuple[float, float]:
        """Spawn the server; seconds from the spawn until `/health` answers 200, and until an
        authenticated GET of `path` with `token` does."""
        self.port = free_port()
        argv = [*MEMFILE, "--vault", str(self.vault), "serve", "--port", str(self.port), "--keys", str(self.keys)]
        with open(self.log, "ab") as log:
            log.write(f"\n=== {' '.join(argv)}\n".encode())
            log.flush()
            start = time.perf_counter()
            self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        health = self._poll(None, "/health", start, timeout)
        answered = self._poll(token, path, start, timeout)
        return health, answered

    def _poll(self, token: str | None, path: str, start: float, timeout: float) -> float:
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SystemExit(f"memfile serve exited {self.proc.returncode} before answering:\n{self.tail()}")
            client = Client(self.port, token)
            try:
                r = client.call("GET", path)
            except OSError:
                r = None
            finally:
                client.close()
            if r is not None and r.status == 200:
                return time.perf_counter() - start
            if r is not None and r.status not in (503,):
                raise SystemExit(f"GET {path} answered {r.status} while starting: {r.body[:500]!r}\n{self.tail()}")
            if time.perf_counter() - start > timeout:
                raise SystemExit(f"memfile serve did not answer GET {path} within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.005)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> tuple[float, int | None]:
        """SIGTERM: (seconds until the process exited, its exit code; None if it had to be killed after 20 s)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            return 0.0, self.proc.returncode
        start = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        return time.perf_counter() - start, code

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""


def add_key(vault: Path, keys: Path, env: dict[str, str], label: str, mind: str | None) -> str:
    """A new credential made by `memfile key add ... --json` (a Mind Key for `mind`, else a person's token)."""
    who = ["--mind", mind] if mind else ["--person"]
    out = run(
        [*MEMFILE, "--vault", str(vault), "key", "add", *who, "--name", label, "--keys", str(keys), "--json"], env
    )[1]
    found = re.search(r"\bmf[kp]_[A-Za-z0-9]+_[A-Za-z0-9_-]{16,}", out)
    if not found:
        raise SystemExit(f"memfile key add printed no token: {out[:500]!r}")
    return found.group(0)


def q(path: str, **params: Any) -> str:
    return f"{path}?{urllib.parse.urlencode(params, doseq=True)}" if params else path


# --- git -------------------------------------------------------------------------------------


def git(vault: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    return run(["git", "-C", str(vault), *args], env, stdin=stdin)[1]


def commit_all(vault: Path, env: dict[str, str], message: str) -> None:
    ident = ["-c", "user.name=memfile-bench", "-c", "user.email=bench@localhost"]
    git(vault, env, "add", "-A")
    git(vault, env, *ident, "commit", "-q", "-m", message)


def at_head(vault: Path, paths: list[str]) -> dict[str, bytes | None]:
    """The content of each vault-relative path at git's HEAD (None: not there), in one `git cat-file --batch`."""
    feed = "".join(f"HEAD:{p}\n" for p in paths).encode()
    out = subprocess.run(["git", "-C", str(vault), "cat-file", "--batch"], input=feed, capture_output=True).stdout
    found: dict[str, bytes | None] = {}
    pos = 0
    for p in paths:
        end = out.index(b"\n", pos)
        head = out[pos:end].split()
        pos = end + 1
        if len(head) == 3 and head[1] == b"blob":
            size = int(head[2])
            found[p] = out[pos : pos + size]
            pos += size + 1
        else:
            found[p] = None
    return found


# --- part 1: one client ----------------------------------------------------------------------


@dataclass
class Main:
    """The main vault, its credentials and its running server (shared by parts 1 to 3)."""

    vault: Path
    keys: Path
    env: dict[str, str]
    person: str
    agents: list[tuple[str, str]]  # (label, Mind Key)
    queries: list[str]
    questions: list[str]
    server: Server
    own_id: str = ""  # a memory the first agent stored (for a hostile verify)
    stops: list[tuple[float, int | None]] = field(default_factory=list)


def prepare_main(args: argparse.Namespace, work: Path, env: dict[str, str], table: Table) -> Main:
    """The vault of --n memories plus a small second mind, committed; the keys; the index built."""
    vault = work / "vault"
    probes = work / "vault.probes.jsonl"
    made = make_vault(vault, args.n, env, seed=args.seed, git=True, probes_out=probes)
    demoted = demote_critical(vault / MIND, args.critical)
    toml = vault / "memfile.toml"
    toml.write_text(f'default_mind = "{MIND}"\n' + toml.read_text(encoding="utf-8"), encoding="utf-8")
    other = vault / OTHER / "fact"
    other.mkdir(parents=True)
    (other / "other_secret.md").write_text(
        f"---\nid: {OTHER_ID}\ncategory: fact\nkey: other_secret\npriority: normal\ntags: [secret]\n"
        f"source: user\nverified: true\nconfidence: 1.0\nexpires_at: null\ncreated_at: 2026-01-01T00:00:00Z\n"
        f"updated_at: 2026-01-01T00:00:00Z\n---\nThe other mind's secret is {OTHER_SECRET}.\n",
        encoding="utf-8",
    )
    commit_all(vault, env, f"bench: {demoted} critical memories made normal; a second mind")
    say(f"  vault of {args.n:,} memories generated and committed in {made:.1f} s")
    took = run([*MEMFILE, "--vault", str(vault), "--mind", MIND, "reindex"], env)[0]
    table.add("memfile reindex (setup, before any server)", size=args.n, value=f"{took:.1f} s", shown=f"{took:.1f} s")

    keys = work / "keys.toml"
    start = time.perf_counter()
    person = add_key(vault, keys, env, "bench-person", None)
    agents = [
        (f"bench-agent-{i:02d}", add_key(vault, keys, env, f"bench-agent-{i:02d}", MIND)) for i in range(args.agents)
    ]
    say(f"  {1 + args.agents} keys added in {time.perf_counter() - start:.1f} s")
    queries = [" ".join(pair) for pair in word_pairs(vault / MIND, max(args.calls, 50), args.seed)]
    questions = probe_questions(probes, 20) + QUESTIONS
    server = Server(vault, keys, env, work / "serve-main.log")
    return Main(vault, keys, env, person, agents, queries, questions, server)


def part_one_client(args: argparse.Namespace, m: Main, table: Table) -> None:
    big = args.n >= 10_000
    agent = m.agents[0][1]
    probe_path = q("/memory/search", q=m.queries[0])
    healths, starts = [], []
    for i in range(args.starts):
        to_health, answered = m.server.start(agent, probe_path)
        healths.append(to_health)
        starts.append(answered)
        if i < args.starts - 1:
            m.stops.append(m.server.stop())
    timing(table, "start: spawn to /health 200", args.n, healths, note="no credential, no mind opened")
    timing(
        table,
        "start: spawn to first authenticated answer",
        args.n,
        starts,
        limit_s=TARGETS["start_s"] if big else None,
        judge="p50",
        note=f"median of {args.starts} starts on the indexed vault; a Mind Key's search",
    )

    client = Client(m.server.port, agent)
    person = Client(m.server.port, m.person)
    try:
        for i in range(args.warmup):
            client.ok("GET", "/health")
            client.ok("GET", q("/memory/search", q=m.queries[i % len(m.queries)]))
            client.ok("GET", q("/memory/recall", q=m.questions[i % len(m.questions)], budget=BUDGET))
        health: list[float] = []
        search: list[float] = []
        recall: list[float] = []
        person_search: list[float] = []  # the same route with the other kind of credential, naming the mind
        for i in range(args.calls):
            health.append(client.ok("GET", "/health").seconds)
            search.append(client.ok("GET", q("/memory/search", q=m.queries[i % len(m.queries)])).seconds)
            if i < 50:
                r = person.ok("GET", q("/memory/search", q=m.queries[(i + 1) % len(m.queries)], mind=MIND))
                person_search.append(r.seconds)
            recall.append(
                client.ok("GET", q("/memory/recall", q=m.questions[i % len(m.questions)], budget=BUDGET)).seconds
            )
        posts: list[float] = []
        after_store: list[float] = []  # a search right after each store: what a write costs the next read
        for i in range(args.stores):
            body = {
                "category": "note",
                "key": f"bench_post_{i:05d}",
                "content": f"Served benchmark note {i}: the deployment pipeline moved to the new runner.",
                "tags": ["bench", "served"],
            }
            r = client.ok("POST", "/memory", body, expect=(201,))
            posts.append(r.seconds)
            if not m.own_id:
                m.own_id = str(r.json().get("id", ""))
            after_store.append(client.ok("GET", q("/memory/search", q=m.queries[i % len(m.queries)])).seconds)
    finally:
        client.close()
        person.close()

    base_search, base_recall, base_store = in_process(args, m)
    cli_argv = [*MEMFILE, "--vault", str(m.vault), "--mind", MIND, "search", *m.queries[0].split()]
    run(cli_argv, m.env)
    cli = [run([*cli_argv[:-2], *m.queries[i % len(m.queries)].split()], m.env)[0] for i in range(args.cli_runs)]

    timing(table, "HTTP GET /health (round trip floor)", None, health, note="keep-alive, no credential, no Vault")
    pairs = f"{len(m.queries)} word pairs cycled, e.g. {m.queries[0]!r}"
    timing(
        table,
        "HTTP search, two words (Mind Key)",
        args.n,
        search,
        limit_s=TARGETS["search_p95_s"] if big else None,
        baseline="Vault.search",
        base=base_search,
        note=f"GET /memory/search?q=; {pairs}",
    )
    timing(
        table,
        "HTTP search, two words (person ?mind=)",
        args.n,
        person_search,
        baseline="Vault.search",
        base=base_search,
    )
    timing(
        table,
        f"HTTP recall?q=, budget {BUDGET}",
        args.n,
        recall,
        limit_s=TARGETS["recall_p95_s"] if big else None,
        baseline="Vault.recall",
        base=base_recall,
        note=f"GET /memory/recall?q=&budget={BUDGET}; {len(m.questions)} questions cycled",
    )
    timing(
        table,
        "HTTP POST /memory (new key: file + commit)",
        args.n,
        posts,
        limit_s=TARGETS["post_p50_s"] if big else None,
        judge="p50",
        baseline="Vault.store",
        base=base_store,
        note="201 each; as the agent of a Mind Key (a Memfile-Key trailer on each commit)",
    )
    timing(
        table,
        "HTTP search right after each POST",
        args.n,
        after_store,
        baseline="HTTP search",
        base=search,
        note="the same searches, each right after a store: what a write costs the next read",
    )
    timing(table, "  in process: Vault.search (+ to_dict)", args.n, base_search, note="the server-side part")
    timing(table, f"  in process: Vault.recall, budget {BUDGET}", args.n, base_recall)
    timing(table, "  in process: Vault.store (new key)", args.n, base_store)
    timing(table, "  CLI process: memfile search, two words", args.n, cli, note="a process per search, for contrast")


def in_process(args: argparse.Namespace, m: Main) -> tuple[list[float], list[float], list[float]]:
    """The same searches, recalls and (new) stores through the Python API in this process."""
    from memfile import Vault

    v = Vault.open(m.vault, MIND, source="agent")
    try:
        for i in range(args.warmup):
            v.search(m.queries[i % len(m.queries)])
            v.recall(BUDGET, query=m.questions[i % len(m.questions)])
        while v.warm(0.05):
            pass
        search, recall, store = [], [], []
        for i in range(args.calls):
            start = time.perf_counter()
            [hit.to_dict() for hit in v.search(m.queries[i % len(m.queries)])]
            search.append(time.perf_counter() - start)
            start = time.perf_counter()
            v.recall(BUDGET, query=m.questions[i % len(m.questions)])
            recall.append(time.perf_counter() - start)
        for i in range(args.stores):
            start = time.perf_counter()
            v.store("note", f"bench_inproc_{i:05d}", f"In-process benchmark note {i}.", tags=["bench"])
            store.append(time.perf_counter() - start)
    finally:
        v.close()
    return search, recall, store


# --- part 2: load ---------------------------------------------------------------------------


@dataclass
class Outcome:
    op: str  # "search", "recall" or "store"
    status: int  # 0: the connection failed
    seconds: float
    retry_after: bool = False
    detail: str = ""


@dataclass
class Acked:
    path: str  # vault-relative
    token: str  # a unique word of its content


def load_client(
    t: int,
    m: Main,
    token: str,
    stop_at: float,
    seed: int,
    store_share: float,
    out: list[Outcome],
    acked: list[Acked],
) -> None:
    r = random.Random(seed * 1000 + t)
    client = Client(m.server.port, token)
    i = 0
    try:
        while time.perf_counter() < stop_at:
            i += 1
            x = r.random()
            body: dict[str, Any] | None = None
            if x < store_share:
                op, method = "store", "POST"
                word = f"ld{t:02d}x{i:06d}{uuid.uuid4().hex[:8]}"
                body = {
                    "category": "note",
                    "key": f"load_{t:02d}_{i:06d}",
                    "content": f"Load test note {t}-{i}, marker {word}: the billing sync runs nightly.",
                    "tags": ["bench", "load"],
                }
                path = "/memory"
            elif x < store_share + (1 - store_share) / 2:
                op, method, path = "search", "GET", q("/memory/search", q=r.choice(m.queries))
            else:
                op, method, path = "recall", "GET", q("/memory/recall", q=r.choice(m.questions), budget=BUDGET)
            start = time.perf_counter()
            try:
                resp = client.call(method, path, body)
            except (OSError, http.client.HTTPException) as e:
                out.append(Outcome(op, 0, time.perf_counter() - start, detail=f"{type(e).__name__}: {e}"))
                continue
            retry = "retry-after" in resp.headers
            detail = "" if resp.status in (200, 201) else resp.body[:300].decode(errors="replace")
            out.append(Outcome(op, resp.status, resp.seconds, retry, detail))
            if op == "store" and resp.status in (200, 201):
                assert body is not None
                acked.append(Acked(f"{MIND}/note/{body['key']}.md", word))
    finally:
        client.close()


def part_load(args: argparse.Namespace, m: Main, table: Table) -> None:
    pid = m.server.pid
    outs: list[list[Outcome]] = [[] for _ in range(args.clients)]
    acks: list[list[Acked]] = [[] for _ in range(args.clients)]
    rss: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            found = kb(proc_status(pid), "VmRSS")
            if found:
                rss.append(found)
            done.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    rss_before = kb(proc_status(pid), "VmRSS")
    commits_before = int(git(m.vault, m.env, "rev-list", "--count", "HEAD"))
    cpu_before, client_before, threads_before = cpu_of(pid), time.process_time(), thread_cpu(pid)
    start = time.perf_counter()
    stop_at = start + args.duration
    threads = [
        threading.Thread(
            target=load_client,
            args=(t, m, m.agents[t % len(m.agents)][1], stop_at, args.seed, args.store_share, outs[t], acks[t]),
            name=f"load-{t}",
        )
        for t in range(args.clients)
    ]
    sampler.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    cpu_after, client_cpu, threads_after = cpu_of(pid), time.process_time() - client_before, thread_cpu(pid)
    done.set()
    sampler.join()
    hwm = kb(proc_status(pid), "VmHWM")
    commits = int(git(m.vault, m.env, "rev-list", "--count", "HEAD")) - commits_before

    outcomes = [o for out in outs for o in out]
    acked = [a for ack in acks for a in ack]
    by_status = Counter(o.status for o in outcomes)
    documented = [o for o in outcomes if o.status == 503 and o.retry_after]
    errors = [o for o in outcomes if o.status not in (200, 201) and not (o.status == 503 and o.retry_after)]
    reads = [o.seconds for o in outcomes if o.op != "store" and o.status == 200]
    stores = [o.seconds for o in outcomes if o.op == "store" and o.status in (200, 201)]
    searches = [o.seconds for o in outcomes if o.op == "search" and o.status == 200]
    recalls = [o.seconds for o in outcomes if o.op == "recall" and o.status == 200]
    reads_per_s = len(reads) / elapsed
    shape = (
        f"{args.clients} clients over {len(m.agents)} Mind Keys, {elapsed:.1f} s, "
        f"{args.store_share:.0%} stores, the rest search and recall?q= half each"
    )
    statuses = ", ".join(f"{s or 'no answer'}: {c:,}" for s, c in sorted(by_status.items()))
    table.add("requests by status", value=f"{len(outcomes):,}", shown=statuses, note=f"{statuses}; {shape}")
    first = "; ".join(sorted({f"{o.op} {o.status}: {o.detail[:150]}" for o in errors})[:5])
    table.add(
        "errors (not 200/201, not 503 + Retry-After)",
        ok=not errors,
        check=True,
        target="0",
        value=f"{len(errors):,}",
        shown=str(len(errors)),
        note=first,
    )
    table.add("documented 503 (Retry-After)", value=f"{len(documented):,}", shown=str(len(documented)))
    table.add(
        "reads/s",
        ok=reads_per_s >= TARGETS["reads_per_s"] if args.n >= 10_000 and args.duration >= 60 else None,
        target=f">= {TARGETS['reads_per_s']:g}",
        value=f"{reads_per_s:,.1f}",
        shown=f"{reads_per_s:,.1f} ({len(reads):,} reads in {elapsed:.1f} s)",
    )
    table.add("stores/s", value=f"{len(stores) / elapsed:,.1f}", shown=f"{len(stores) / elapsed:,.1f}")
    table.add(
        "stores per commit",
        value=f"{len(stores) / max(commits, 1):,.2f}",
        shown=f"{len(stores) / max(commits, 1):,.2f} ({len(stores):,} stores in {commits:,} commits)",
    )
    server_cpu, git_cpu = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
    per = 1000 / max(len(outcomes), 1)
    table.add(
        "CPU per request: server, its git, the clients",
        value=f"{server_cpu * per:.1f}, {git_cpu * per:.1f}, {client_cpu * per:.1f} ms",
        shown=f"{server_cpu * per:.1f} ms, {git_cpu * per:.1f} ms, {client_cpu * per:.1f} ms "
        f"({(server_cpu + git_cpu + client_cpu) / elapsed:.2f} of {os.cpu_count()} CPUs busy)",
    )
    by_thread = sorted(
        ((seconds, t) for t, seconds in cpu_by_thread(pid, threads_before, threads_after).items()), reverse=True
    )
    shares = ", ".join(f"{t} {seconds * per:.1f} ms ({seconds / elapsed:.2f} CPUs)" for seconds, t in by_thread)
    table.add(
        "CPU per request by server thread",
        value=", ".join(f"{t}: {seconds * per:.1f} ms" for seconds, t in by_thread),
        shown=shares,
        note="the worker owns every Vault call; the event loop parses, routes and answers; the watcher hears "
        "every file event of the vault. A thread that waits for the GIL or for the disk uses no CPU.",
        threads_ms={t: round(seconds * per, 2) for seconds, t in by_thread},
    )
    for name, times in (("reads", reads), ("  search", searches), ("  recall?q=", recalls), ("stores", stores)):
        if times:
            timing(table, f"load latency: {name}", args.n, times, note=shape if name == "reads" else "")
    table.add(
        "server RSS (VmRSS before, max during; VmHWM)",
        value=f"{mb(rss_before)}, {mb(max(rss, default=None))}; {mb(hwm)}",
        shown=f"{mb(rss_before)} before, {mb(max(rss, default=None))} max; peak {mb(hwm)}",
        rss_before_kb=rss_before,
        rss_max_kb=max(rss, default=None),
        hwm_kb=hwm,
    )

    found = at_head(m.vault, [a.path for a in acked])
    missing = [a.path for a in acked if found[a.path] is None or a.token.encode() not in (found[a.path] or b"")]
    table.add(
        "acknowledged stores at HEAD with their content",
        ok=not missing,
        check=True,
        target="all",
        value=f"{len(acked) - len(missing):,}/{len(acked):,}",
        shown=f"{len(acked) - len(missing):,} of {len(acked):,}",
        note=("missing or stale: " + ", ".join(missing[:5])) if missing else "",
    )
    trailers = git(m.vault, m.env, "log", "--format=%(trailers:key=Memfile-Key,valueonly)", f"-{len(acked) + 50}")
    labelled = sum(1 for line in trailers.splitlines() if line.strip().startswith("bench-agent-"))
    table.add(
        "commits naming a bench Mind Key (Memfile-Key:)",
        value=f"{labelled:,}",
        shown=f"{labelled:,} in the last {len(acked) + 50:,} commits",
    )
    dirty = git(m.vault, m.env, "status", "--porcelain")
    table.add(
        "work tree clean after load",
        ok=not dirty.strip(),
        check=True,
        target="clean",
        value="yes" if not dirty.strip() else "no",
        note=dirty[:300] if dirty.strip() else "",
    )


# --- part 3: hostile ------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    label: str
    raw: bytes
    once: bool = False  # sent once, not in every round (a 12 MB body)
    shut_write: bool = False  # half-close after sending (a cut-off body)


def raw_request(
    method: str,
    target: str,
    *,
    host: str | None,
    token: str | None = None,
    headers: list[tuple[str, str]] | None = None,
    body: bytes | None = None,
    content_length: str | None = None,
    version: str = "HTTP/1.1",
) -> bytes:
    lines = [f"{method} {target} {version}".rstrip()]
    if host is not None:
        lines.append(f"Host: {host}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    for k, v in headers or []:
        lines.append(f"{k}: {v}")
    if body is not None or content_length is not None:
        lines.append(f"Content-Length: {content_length if content_length is not None else len(body or b'')}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace") + (body or b"")


def hostile_requests(port: int, agent: str, person: str, own_id: str) -> list[Hostile]:
    """The hostile and malformed requests, each as raw bytes (sent as is: no client library fixes them)."""
    host = f"127.0.0.1:{port}"
    hs: list[Hostile] = []

    def add(label: str, method: str, target: str, token: str | None = agent, **kw: Any) -> None:
        kw.setdefault("host", host)
        once = kw.pop("once", False)
        shut = kw.pop("shut_write", False)
        hs.append(Hostile(label, raw_request(method, target, token=token, **kw), once, shut))

    def post_json(label: str, body: bytes | str, method: str = "POST", path: str = "/memory", **kw: Any) -> None:
        data = body.encode() if isinstance(body, str) else body
        kw.setdefault("headers", [("Content-Type", "application/json")])
        add(label, method, path, agent, body=data, **kw)

    search = "/memory/search?q=deployment"
    # credentials
    add("no token", "GET", search, None)
    add("empty bearer", "GET", search, None, headers=[("Authorization", "Bearer")])
    add("bearer junk", "GET", search, "not-a-token")
    add("well-formed unknown mind key", "GET", search, "mfk_abcdefgh_" + "A" * 43)
    add("well-formed unknown person token", "GET", search, "mfp_abcdefgh_" + "B" * 43)
    add("a key with its secret cut", "GET", search, agent[:-5])
    add("a key with an extra char", "GET", search, agent + "x")
    add("basic auth", "GET", search, None, headers=[("Authorization", "Basic dXNlcjpwYXNz")])
    add("token in the query", "GET", f"{search}&token={agent}", None)
    add("two Authorization headers", "GET", search, agent, headers=[("Authorization", "Bearer junk")])
    add("8 KB token", "GET", search, "mfk_" + "x" * 8192)
    add("no credential, POST", "POST", "/memory", None, body=b'{"category":"note","key":"x","content":"y"}')
    add("no credential, DELETE", "DELETE", f"/memory/{OTHER_ID}", None)
    add("no credential, verify", "POST", f"/memory/{OTHER_ID}/verify", None)
    add("no credential, openapi", "GET", "/openapi.json", None)
    # Host headers (DNS rebinding)
    add("Host evil.example", "GET", search, host="evil.example")
    add("Host 127.0.0.1.evil.example", "GET", search, host="127.0.0.1.evil.example")
    add("Host empty", "GET", search, host="")
    add("Host missing", "GET", search, host=None)
    add("two Host headers", "GET", search, headers=[("Host", "evil.example")])
    add("Host with a bad port", "GET", search, host="localhost:99999")
    add("Host with bytes", "GET", search, host="l\xf6calhost")
    add("Host evil, no credential", "GET", "/health", None, host="evil.example")
    # methods and request lines
    for method in ("FOO", "TRACE", "PATCH", "OPTIONS", "PROPFIND", "get", "G3T"):
        add(f"method {method}", method, "/memory", agent)
    add("CONNECT", "CONNECT", "127.0.0.1:22", agent)
    add("OPTIONS *", "OPTIONS", "*", agent)
    add("DELETE /memory", "DELETE", "/memory", agent)
    add("PUT /memory", "PUT", "/memory", agent, body=b"{}")
    add("absolute-form target", "GET", f"http://evil.example{search}", agent)
    add("HTTP/0.9 line", "GET", "/health", None, host=None, version="")
    add("HTTP/9.9", "GET", "/health", None, version="HTTP/9.9")
    add("HTTP/1.0", "GET", search, agent, version="HTTP/1.0")
    hs.append(Hostile("garbage line", b"GARBAGE\r\n\r\n"))
    hs.append(Hostile("binary garbage", bytes(range(256)) * 4))
    hs.append(Hostile("TLS client hello", bytes.fromhex("16030100a5010000a10303") + os.urandom(64)))
    hs.append(Hostile("header without colon", f"GET /health HTTP/1.1\r\nHost: {host}\r\nNoColonHere\r\n\r\n".encode()))
    hs.append(Hostile("NUL in the path", f"GET /mem\x00ory HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()))
    hs.append(Hostile("bare LF", f"GET /health HTTP/1.1\nHost: {host}\n\n".encode()))
    add("64 KB URL", "GET", "/memory/search?q=" + "a" * 65536, agent)
    add("100 KB header", "GET", search, agent, headers=[("X-Big", "b" * 102400)])
    add("200 headers", "GET", search, agent, headers=[(f"X-H{i}", "v") for i in range(200)])
    # bodies: JSON
    for label, body in (
        ("JSON cut off", '{"category": "note", "key": "x", "content": "y"'),
        ("JSON {", "{"),
        ("JSON array", "[]"),
        ("JSON null", "null"),
        ("JSON number", "1"),
        ("JSON string", '"text"'),
        ("JSON NaN", '{"category": "note", "key": "nan_conf", "content": "c", "confidence": NaN}'),
        ("JSON Infinity", '{"category": "note", "key": "inf_conf", "content": "c", "confidence": Infinity}'),
        ("JSON duplicate keys", '{"category": "note", "key": "a", "key": "../b", "content": "c"}'),
        ("JSON nested 100,000 deep", "[" * 100_000 + "]" * 100_000),
        ("empty body", ""),
        ("not UTF-8", b'{"category": "note", "key": "x", "content": "\xff\xfe"}'),
        ("UTF-16", '{"category": "note", "key": "x", "content": "y"}'.encode("utf-16")),
        ("lone surrogate", '{"category": "note", "key": "x", "content": "\\ud800"}'),
        ("NUL in content", '{"category": "note", "key": "nul_content", "content": "a\\u0000b"}'),
        ("wrong type: category", '{"category": 5, "key": "x", "content": "y"}'),
        ("wrong type: key", '{"category": "note", "key": ["x"], "content": "y"}'),
        ("wrong type: content", '{"category": "note", "key": "x", "content": {"a": 1}}'),
        ("wrong type: content null", '{"category": "note", "key": "x", "content": null}'),
        ("wrong type: tags", '{"category": "note", "key": "x", "content": "y", "tags": [1, {}]}'),
        ("wrong type: tags object", '{"category": "note", "key": "x", "content": "y", "tags": {"a": 1}}'),
        ("wrong type: priority", '{"category": "note", "key": "x", "content": "y", "priority": 3}'),
        ("bad value: priority", '{"category": "note", "key": "x", "content": "y", "priority": "urgent"}'),
        ("wrong type: confidence", '{"category": "note", "key": "x", "content": "y", "confidence": "high"}'),
        ("bad value: confidence", '{"category": "note", "key": "x", "content": "y", "confidence": 7}'),
        ("bad value: confidence bool", '{"category": "note", "key": "x", "content": "y", "confidence": true}'),
        ("bad value: expires_at", '{"category": "note", "key": "x", "content": "y", "expires_at": "tomorrow"}'),
        ("bad value: expires_at number", '{"category": "note", "key": "x", "content": "y", "expires_at": 1e400}'),
        ("bad value: category", '{"category": "secrets", "key": "x", "content": "y"}'),
        ("traversal: category", '{"category": "../../sentinel", "key": "x", "content": "y"}'),
        ("traversal: key", '{"category": "note", "key": "../../../sentinel/x", "content": "y"}'),
        ("traversal: key encoded", '{"category": "note", "key": "..%2f..%2fsentinel", "content": "y"}'),
        ("absolute key", '{"category": "note", "key": "/tmp/x", "content": "y"}'),
        ("key too long", '{"category": "note", "key": "' + "k" * 300 + '", "content": "y"}'),
        ("key uppercase", '{"category": "note", "key": "Key", "content": "y"}'),
        ("empty content", '{"category": "note", "key": "x", "content": ""}'),
        (
            "conflict markers",
            '{"category": "note", "key": "x", "content": "<<<<<<< HEAD\\na\\n=======\\nb\\n>>>>>>> x"}',
        ),
        ("missing content", '{"category": "note", "key": "x"}'),
        ("missing all", "{}"),
        ("unknown field", '{"category": "note", "key": "x", "content": "y", "bogus": 1}'),
        ("unknown fields", '{"category": "note", "key": "x", "content": "y", "path": "../../x", "__proto__": {}}'),
        ("agent claims source user", '{"category": "note", "key": "x", "content": "y", "source": "user"}'),
        ("agent claims verified", '{"category": "note", "key": "x", "content": "y", "verified": true}'),
        ("agent names another mind_id", f'{{"category": "note", "key": "x", "content": "y", "mind_id": "{OTHER}"}}'),
        (
            "agent writes a critical memory",
            '{"category": "note", "key": "crit", "content": "y", "priority": "critical"}',
        ),
    ):
        post_json(f"POST /memory: {label}", body)
    post_json("POST as text/plain", '{"category": "note", "key": "x", "content": "y"}', headers=None)
    add(
        "POST form-encoded",
        "POST",
        "/memory",
        agent,
        headers=[("Content-Type", "application/x-www-form-urlencoded")],
        body=b"category=note&key=x&content=y",
    )
    # Content-Length tricks
    add("Content-Length 50 MB, no body", "POST", "/memory", agent, content_length="50000000")
    add("Content-Length 2^63", "POST", "/memory", agent, content_length=str(2**63))
    add("Content-Length -1", "POST", "/memory", agent, content_length="-1")
    add("Content-Length abc", "POST", "/memory", agent, content_length="abc")
    add("Content-Length too small", "POST", "/memory", agent, content_length="5", body=b'{"category": "note"}')
    add(
        "two Content-Lengths",
        "POST",
        "/memory",
        agent,
        headers=[("Content-Length", "3"), ("Content-Type", "application/json")],
        body=b"{}",
    )
    add(
        "bad chunked body",
        "POST",
        "/memory",
        agent,
        headers=[("Transfer-Encoding", "chunked"), ("Content-Type", "application/json")],
        body=b"zz\r\n{}\r\n0\r\n\r\n",
    )
    add(
        "chunked and Content-Length",
        "POST",
        "/memory",
        agent,
        headers=[("Transfer-Encoding", "chunked")],
        body=b"2\r\n{}\r\n0\r\n\r\n",
    )
    add("cut-off body", "POST", "/memory", agent, content_length="1000", body=b'{"category": "no', shut_write=True)
    big = b'{"category": "note", "key": "huge", "content": "' + b"x" * (12 * 1024 * 1024) + b'"}'
    post_json("12 MB body", big, once=True)
    put_big = b'{"content": "' + b"y" * (12 * 1024 * 1024) + b'"}'
    post_json("12 MB PUT body", put_big, method="PUT", path=f"/memory/{own_id or OTHER_ID}", once=True)
    # ids and paths
    ids = [
        "../../sentinel/secret",
        "..%2f..%2fsentinel%2fsecret",
        "%2e%2e%2f%2e%2e%2fsentinel%2fsecret",
        "%2e%2e/%2e%2e/sentinel/secret",
        "..%5c..%5csentinel%5csecret",
        "%252e%252e%252fsentinel",
        "..%c0%af..%c0%afsentinel",
        "%2Fetc%2Fpasswd",
        "mem_..%2f..%2fx",
        "mem_%00",
        ".git%2fconfig",
        ".memfile",
        "mem_" + "a" * 5000,
        "MEM_ABC",
        "%ff%fe",
        OTHER_ID,
    ]
    for x in ids:
        add(f"GET id {x[:30]}", "GET", f"/memory/{x}", agent)
        add(f"history of id {x[:30]}", "GET", f"/memory/{x}/history", agent)
        add(f"DELETE id {x[:30]}", "DELETE", f"/memory/{x}", agent)
        add(f"verify id {x[:30]}", "POST", f"/memory/{x}/verify", agent)
        put = b'{"content": "overwritten"}'
        add(f"PUT id {x[:30]}", "PUT", f"/memory/{x}", agent, headers=[("Content-Type", "application/json")], body=put)
    for target in (
        "/memory/../../sentinel/secret.md",
        "/../../../etc/passwd",
        "/memory/..;/..;/sentinel",
        "//etc/passwd",
        "/memory//../health",
        "/%2e%2e/%2e%2e/sentinel/secret.md",
        "/memory/search/../../../../sentinel",
        "/static/../../sentinel/secret.md",
        "/console/../../sentinel",
    ):
        add(f"path {target}", "GET", target, agent)
    if own_id:
        add("agent verifies its own memory", "POST", f"/memory/{own_id}/verify", agent)
        put = b'{"content": "changed", "category": "fact"}'
        add(
            "PUT changing the category",
            "PUT",
            f"/memory/{own_id}",
            agent,
            headers=[("Content-Type", "application/json")],
            body=put,
        )
        put = b'{"content": "changed", "key": "another_key"}'
        add(
            "PUT changing the key",
            "PUT",
            f"/memory/{own_id}",
            agent,
            headers=[("Content-Type", "application/json")],
            body=put,
        )
    # which mind
    for mind in (OTHER, "../sentinel", "..%2fsentinel", "%2e%2e", ".git", ".memfile", "/etc", f"{MIND}%00", "", "nope"):
        add(f"agent ?mind={mind}", "GET", f"{search}&mind={mind}", agent)
    add(
        "agent stores into ?mind=other",
        "POST",
        f"/memory?mind={OTHER}",
        agent,
        body=b'{"category":"note","key":"x","content":"y"}',
    )
    for mind in ("../sentinel", "..%2fsentinel", "%2e%2e%2fsentinel", ".git", ".memfile", "/tmp", "nope", "a" * 500):
        add(f"person ?mind={mind[:20]}", "GET", f"{search}&mind={mind}", person)
        add(
            f"person stores ?mind={mind[:20]}",
            "POST",
            f"/memory?mind={mind}",
            person,
            body=b'{"category":"note","key":"x","content":"y"}',
        )
    # query strings
    for query in (
        "q=",
        "q=%ff%fe",
        "q=" + "w" * 10000,
        "q=a&limit=-1",
        "q=a&limit=abc",
        "q=a&limit=99999999999999999999",
        "q=a&" + "&".join(f"tag=t{i}" for i in range(500)),
        "q=a&category=secrets",
        "q=a&priority=9",
        "q=%00",
        'q=" OR 1=1 --',
        "q=*",
        "q=a%20AND%20(",
    ):
        add(f"search ?{query[:30]}", "GET", f"/memory/search?{query}", agent)
    for query in ("budget=-5", "budget=1e309", "budget=abc", "format=xml", "limit=-3", "q=" + "r" * 5000):
        add(f"recall ?{query[:30]}", "GET", f"/memory/recall?{query}", agent)
    for query in ("within=forever", "within=-1d", "within=99999999999d", "within=", "within=%00"):
        add(f"expiring ?{query}", "GET", f"/memory/expiring?{query}", agent)
    for query in ("", "tag=", "tag=%ff", "tag=" + "t" * 5000):
        add(f"by-tag ?{query[:30]}", "GET", f"/memory/by-tag?{query}", agent)
    return hs


@dataclass
class Answer:
    status: int | None  # None: no status line (the server closed or timed out)
    retry_after: bool
    body: bytes
    note: str = ""


def send_raw(port: int, h: Hostile, timeout: float = 5.0) -> Answer:
    """Send `h` on a new connection; read one response (headers and body) or until the server closes."""
    got = b""
    note = ""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(h.raw)
            if h.shut_write:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:
            note = f"send: {type(e).__name__}"  # the server answered early and closed (413 for a big body)
        deadline = time.perf_counter() + timeout
        try:
            while time.perf_counter() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
                head, sep, body = got.partition(b"\r\n\r\n")
                if sep:
                    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                    if length and len(body) >= int(length.group(1)):
                        break
        except TimeoutError:
            note = note or "timeout"
        except OSError as e:
            note = note or f"recv: {type(e).__name__}"
    status_line = got.split(b"\r\n", 1)[0]
    found = re.match(rb"HTTP/1\.[01] (\d{3})", status_line)
    head = got.partition(b"\r\n\r\n")[0]
    return Answer(
        int(found.group(1)) if found else None,
        bool(re.search(rb"(?im)^retry-after:", head)),
        got,
        note,
    )


def snapshot(folder: Path, skip: set[Path]) -> dict[str, str]:
    """Every file under `folder` (not under a path in `skip`): relative path -> sha256 of its content."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in filenames:
            p = here / name
            if p in skip:
                continue
            try:
                found[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
            except OSError:
                found[str(p.relative_to(folder))] = "?"
    return found


def part_hostile(args: argparse.Namespace, m: Main, work: Path, table: Table, skip: set[Path]) -> None:
    port = m.server.port
    specs = hostile_requests(port, m.agents[0][1], m.person, m.own_id)
    plan: list[Hostile] = [h for h in specs if h.once]
    rounds = [h for h in specs if not h.once]
    need = max(0, args.hostile - len(plan))
    # fewer than the kinds (a smoke run): spread over all of them; more: every kind in turn, again and again
    step = len(rounds) / need if 0 < need < len(rounds) else 1
    plan += [rounds[int(i * step) % len(rounds)] for i in range(need)]
    before = snapshot(work, skip)
    statuses: Counter[str] = Counter()
    bad: list[str] = []
    leaks: list[str] = []
    accepted: set[str] = set()
    start = time.perf_counter()
    for h in plan:
        a = send_raw(port, h)
        if a.status is not None and 200 <= a.status < 300:
            accepted.add(f"{h.label} ({a.status})")
        statuses[str(a.status) if a.status is not None else f"no answer ({a.note or 'closed'})"] += 1
        if a.status is not None and a.status >= 500 and not (a.status == 503 and a.retry_after):
            body = a.body.partition(b"\r\n\r\n")[2][:200]
            bad.append(f"{h.label}: {a.status} {body!r}")
        if SENTINEL_SECRET.encode() in a.body or OTHER_SECRET.encode() in a.body or b"Traceback" in a.body:
            leaks.append(h.label)
    took = time.perf_counter() - start
    after = snapshot(work, skip)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))

    shown = ", ".join(f"{s}: {c}" for s, c in sorted(statuses.items()))
    table.add(
        "hostile requests sent",
        value=f"{len(plan):,}",
        shown=f"{len(plan):,} ({len(specs)} kinds) in {took:.1f} s; {shown}",
        note=f"{len(specs)} kinds cycled; by status: {shown}; answered 2xx: {', '.join(sorted(accepted)) or 'none'}",
        statuses=dict(statuses),
    )
    table.add(
        "5xx answers (other than 503 + Retry-After)",
        ok=not bad,
        check=True,
        target="0",
        value=str(len(bad)),
        shown=str(len(bad)),
        note="; ".join(sorted(set(bad))[:5]),
    )
    client = Client(port, m.agents[0][1])
    try:
        health = client.call("GET", "/health").status if m.server.alive() else None
        search = client.call("GET", q("/memory/search", q=m.queries[0])).status if m.server.alive() else None
    except (OSError, http.client.HTTPException):
        health = search = None
    finally:
        client.close()
    table.add(
        "server still answers (/health, a search)",
        ok=health == 200 and search == 200,
        check=True,
        target="200, 200",
        value=f"{health}, {search}",
    )
    table.add(
        "files changed outside the vault",
        ok=not changed,
        check=True,
        target="none",
        value=str(len(changed)),
        note=", ".join(changed[:5]),
    )
    table.add(
        "answers carrying a secret or a traceback",
        ok=not leaks,
        check=True,
        target="0",
        value=str(len(leaks)),
        note=", ".join(sorted(set(leaks))[:5]),
    )


# --- part 4: many minds -------------------------------------------------------------------


def make_minds(out: Path, minds: int, per_mind: int, seed: int, env: dict[str, str]) -> list[str]:
    """A vault of `minds` minds of `per_mind` memories each, in the documented file format, one commit."""
    names = [f"chat_{i:04d}" for i in range(minds)]
    for i, name in enumerate(names):
        generate(out, per_mind, seed=seed * 100_000 + i, mind=name)
    (out / "memfile.toml").write_text(f'default_mind = "{names[0]}"\n', encoding="utf-8")
    (out / ".gitignore").write_text(".memfile/\n", encoding="utf-8")
    git(out, env, "init", "-q")
    commit_all(out, env, f"{minds} minds of {per_mind} memories")
    return names


def open_all(client: Client, names: list[str]) -> tuple[list[float], list[str]]:
    """One `GET /memory/recall?mind=` per mind: (seconds of each, the failures)."""
    times, failed = [], []
    for name in names:
        try:
            r = client.call("GET", q("/memory/recall", mind=name))
        except (OSError, http.client.HTTPException) as e:
            failed.append(f"{name}: {type(e).__name__}")
            continue
        times.append(r.seconds)
        if r.status != 200:
            failed.append(f"{name}: {r.status} {r.body[:200]!r}")
    return times, failed


def part_many_minds(args: argparse.Namespace, work: Path, env: dict[str, str], table: Table, logs: list[Path]) -> None:
    vault = work / "minds"
    start = time.perf_counter()
    names = make_minds(vault, args.minds, args.per_mind, args.seed, env)
    made = time.perf_counter() - start
    size = args.minds * args.per_mind
    table.add(
        "vault made (files, memfile.toml, one commit)",
        size=size,
        value=f"{made:.1f} s",
        shown=f"{args.minds:,} minds x {args.per_mind} memories in {made:.1f} s",
    )
    keys = work / "keys.toml"
    person = add_key(vault, keys, env, "bench-minds-person", None)
    log = work / "serve-minds.log"
    logs.append(log)
    server = Server(vault, keys, env, log)
    probe = q("/memory/search", q="deployment", mind=names[0])
    healths, firsts = [], []
    limits = (64 * 1024 * 1024, 0)
    try:
        for i in range(args.minds_starts):
            health, first = server.start(person, probe)
            healths.append(health)
            firsts.append(first)
            if i < args.minds_starts - 1:
                server.stop()
        big = args.minds >= 1000
        timing(table, "start: spawn to /health 200", size, healths, note=f"{args.minds:,} minds, none opened")
        timing(
            table,
            "start: spawn to first answer (opens one mind)",
            size,
            firsts,
            limit_s=TARGETS["minds_start_s"] if big else None,
            judge="p50",
            note=f"median of {args.minds_starts} starts (the first on a vault never indexed); person token, ?mind=",
        )
        for round_name in ("first ever: builds each index", "after a restart: indexed"):
            if round_name.startswith("after"):
                server.stop()
                server.start(person, probe)
            client = Client(server.port, person)
            start = time.perf_counter()
            try:
                times, failed = open_all(client, names)
            finally:
                client.close()
            took = time.perf_counter() - start
            timing(
                table,
                f"open every mind ({round_name})",
                args.minds,
                times,
                note=f"GET /memory/recall?mind= once per mind, one client; all {args.minds:,} in {took:.1f} s",
            )
            table.add(
                f"  time to open all {args.minds:,} ({round_name.split(':')[0]})",
                value=f"{took:.1f} s",
                shown=f"{took:.1f} s",
            )
            table.add(
                f"  every mind answered 200 ({round_name.split(':')[0]})",
                ok=not failed,
                check=True,
                target="all",
                value=f"{len(names) - len(failed):,}/{len(names):,}",
                note="; ".join(failed[:3]),
            )
            instances, watches, fds = inotify_of(server.pid)
            # the watcher may still be scheduling the last minds' watches: take the settled figure
            deadline = time.perf_counter() + 10
            while time.perf_counter() < deadline:
                time.sleep(0.5)
                again = inotify_of(server.pid)
                if again == (instances, watches, fds):
                    break
                instances, watches, fds = again
            status = proc_status(server.pid)
            nofile = open_files_limit(server.pid)
            table.add(
                f"  server RSS, all minds open ({round_name.split(':')[0]})",
                value=f"{mb(kb(status, 'VmRSS'))} (peak {mb(kb(status, 'VmHWM'))})",
                rss_kb=kb(status, "VmRSS"),
                hwm_kb=kb(status, "VmHWM"),
            )
            limits = (
                read_int("/proc/sys/fs/inotify/max_user_watches"),
                read_int("/proc/sys/fs/inotify/max_user_instances"),
            )
            table.add(
                f"  inotify instances of the server ({round_name.split(':')[0]})",
                ok=instances == 1,
                check=True,
                target="1",
                value=str(instances),
                note=f"max_user_instances {limits[1]}",
            )
            table.add(
                f"  inotify watches, open fds ({round_name.split(':')[0]})",
                value=f"{watches:,}, {fds:,}",
                shown=f"{watches:,} watches (max_user_watches {limits[0]:,}), {fds:,} fds (soft limit {nofile})",
                note=f"max_user_watches {limits[0]:,}; open files soft limit {nofile}",
                watches=watches,
                fds=fds,
            )
    finally:
        if server.alive():
            stopped, code = server.stop()
            table.add(
                "SIGTERM to exit, all minds open",
                value=f"{stopped:.2f} s, exit {code}",
                shown=f"{stopped:.2f} s, exit {code}",
            )


def tracebacks(log: Path) -> list[str]:
    """The tracebacks in a server's log, each from the line before it (what uvicorn said) to the exception."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            end = i + 1
            while end < len(lines) and end < i + 400 and (lines[end].startswith((" ", "\t")) or not lines[end]):
                end += 1
            found.append("\n".join(lines[max(0, i - 1) : end + 1]))
    return found


def open_files_limit(pid: int) -> str:
    """The soft limit of open files of a process (/proc/PID/limits)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text(encoding="ascii").splitlines():
            if line.startswith("Max open files"):
                return line.split()[3]
    except OSError:
        pass
    return "?"


def read_int(path: str) -> int:
    try:
        return int(Path(path).read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0


# --- part 5: the console -------------------------------------------------------------------


class Console:
    """One keep-alive connection to the console, as a browser sends it: a person logged in through the login
    form, with the session cookie it set (and a same-origin `Origin` on every POST)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.cookies: dict[str, str] = {}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Response:
        """One request with the cookies so far; the answer's Set-Cookie headers are kept."""
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers |= {"Content-Type": "application/x-www-form-urlencoded", "Origin": self.origin}
        start = time.perf_counter()
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            got = resp.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            raise
        took = time.perf_counter() - start
        for value in resp.msg.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, got, took)

    def page(self, path: str) -> Response:
        """A page that must answer 200 with HTML (else the benchmark stops, naming the answer)."""
        r = self.call("GET", path)
        if r.status != 200 or not r.headers.get("content-type", "").startswith("text/html"):
            raise SystemExit(f"GET {path} answered {r.status} {r.headers.get('content-type')}: {r.body[:500]!r}")
        return r

    def login(self, token: str) -> None:
        """Fill the login form as a person would: its hidden fields (the CSRF token) and the token field."""
        form = self.page("/console/login").body.decode()
        fields = {
            name: html.unescape(value)
            for tag in re.findall(r"<input\b[^>]*>", form)
            if 'type="hidden"' in tag
            for name, value in re.findall(r'name="([^"]+)"[^>]*value="([^"]*)"', tag)
        }
        secret = re.search(r'<input\b[^>]*type="password"[^>]*name="([^"]+)"', form) or re.search(
            r'<input\b[^>]*name="([^"]+)"[^>]*type="password"', form
        )
        if not secret:
            raise SystemExit(f"the login page has no password field: {form[:800]!r}")
        r = self.call("POST", "/console/login", fields | {secret.group(1): token})
        if r.status not in (200, 302, 303) or not self.cookies:
            raise SystemExit(f"POST /console/login answered {r.status} and set no cookie: {r.body[:500]!r}")
        self.page("/console")

    def close(self) -> None:
        self.conn.close()


def server_timing(r: Response) -> float | None:
    """The server's own duration from a `Server-Timing: ...;dur=MS` header, in seconds (None: no header)."""
    found = re.search(r"dur=([0-9.]+)", r.headers.get("server-timing", ""))
    return float(found.group(1)) / 1000 if found else None


def page_link(body: bytes, rel: str) -> str | None:
    """The href of the page's `<a rel="REL">` (pagination), unescaped."""
    for tag in re.findall(rb"<a\b[^>]*>", body):
        if re.search(rb'rel="' + rel.encode() + rb'"', tag):
            href = re.search(rb'href="([^"]*)"', tag)
            return html.unescape(href.group(1).decode()) if href else None
    return None


def part_console(args: argparse.Namespace, m: Main, table: Table) -> None:
    """The console's pages at --n memories, as a person's browser asks for them: the memories list (page 1 and a
    middle page), a search, and one memory with --versions versions. Each figure is the request's wall time
    over loopback from this process (the client; the server is another process): the server's time plus one
    loopback round trip (GET /health's time in part 1)."""
    big = args.n >= 10_000
    person = Client(m.server.port, m.person)
    try:  # the memory with history: --versions stores of one key, each a commit, through the API
        for i in range(args.versions):
            body = {"category": "project", "key": "console_history", "content": f"Release {i}: the pipeline runs."}
            history_id = str(person.ok("POST", q("/memory", mind=MIND), body, expect=(200, 201)).json()["id"])
    finally:
        person.close()
    console = Console(m.server.port)
    try:
        console.login(m.person)
        base = f"/console/m/{MIND}"
        first = console.page(f"{base}/memories")
        following = page_link(first.body, "next")
        if following is None:
            raise SystemExit(f"page 1 of {base}/memories has no rel=next link at {args.n:,} memories")
        number = re.search(r"([?&]page=)(\d+)", following)
        pages = -(-args.n // 50)
        middle = (
            following[: number.start(2)] + str(max(2, pages // 2)) + following[number.end(2) :] if number else following
        )
        paths = {
            "memories, page 1": f"{base}/memories",
            f"memories, page {max(2, pages // 2)} (the middle)": middle,
            "memories, a search (two words)": None,  # a query each time: see below
            f"one memory with {args.versions} versions": f"{base}/memory/{history_id}",
        }
        looked = console.page(paths[f"one memory with {args.versions} versions"]).body.decode()
        shown = sum(f"Release {i}: the pipeline runs." in looked for i in range(args.versions))
        table.add(
            "the memory page shows every version",
            ok=shown == args.versions,
            check=True,
            target=f"{args.versions}",
            value=str(shown),
            note="each version's content found in the page",
        )
        for figure, path in paths.items():
            for i in range(args.warmup):
                console.page(path or q(f"{base}/memories", q=m.queries[i % len(m.queries)]))
            times, inside = [], []
            for i in range(args.console_calls):
                r = console.page(path or q(f"{base}/memories", q=m.queries[i % len(m.queries)]))
                times.append(r.seconds)
                if (own := server_timing(r)) is not None:
                    inside.append(own)
            timing(
                table,
                f"console: {figure}",
                args.n,
                times,
                limit_s=TARGETS["console_p95_s"] if big else None,
                note="GET, wall time over loopback from another process (a person's session cookie)",
            )
            if inside:
                timing(table, f"  Server-Timing: {figure}", args.n, inside, note="the server's own figure")
    finally:
        console.close()


# --- the run --------------------------------------------------------------------------------


@contextmanager
def part(name: str, table: Table, crashed: list[str]) -> Iterator[None]:
    """Run one part; a crash is reported (as a failed row and on stdout) and the next part still runs."""
    say(f"\n{name}")
    try:
        yield
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any crash of a part is reported, the run goes on
        crashed.append(name)
        detail = str(e) if isinstance(e, SystemExit) else traceback.format_exc()
        say(f"  {name} CRASHED: {detail}")
        table.add(f"{name}: crashed", ok=False, check=True, target="runs", note=str(e)[:300])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the main vault (default 10,000)")
    parser.add_argument("--calls", type=int, default=200, help="timed searches and recalls, one client (default 200)")
    parser.add_argument("--stores", type=int, default=100, help="timed POST /memory, one client (default 100)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls of each first (default 20)")
    parser.add_argument("--starts", type=int, default=5, help="server starts timed (default 5)")
    parser.add_argument("--cli-runs", type=int, default=10, help="timed `memfile search` processes (default 10)")
    parser.add_argument("--clients", type=int, default=16, help="load: concurrent client threads (default 16)")
    parser.add_argument("--agents", type=int, default=16, help="load: Mind Keys the clients spread over (default 16)")
    parser.add_argument("--duration", type=float, default=60.0, help="load: seconds (default 60)")
    parser.add_argument(
        "--store-share", type=float, default=0.2, help="load: the share of requests that store (default 0.2)"
    )
    parser.add_argument("--hostile", type=int, default=1000, help="hostile requests (default 1,000)")
    parser.add_argument("--minds", type=int, default=1000, help="many minds: minds (default 1,000)")
    parser.add_argument("--per-mind", type=int, default=20, help="many minds: memories each (default 20)")
    parser.add_argument("--minds-starts", type=int, default=3, help="many minds: server starts timed (default 3)")
    parser.add_argument(
        "--console-calls", type=int, default=200, help="console: timed requests of each page (default 200)"
    )
    parser.add_argument("--versions", type=int, default=100, help="console: versions of the one memory (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--critical", type=int, default=5, help="critical memories kept (default 5; as bench_mcp)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (its path is printed)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON result to this file")
    parser.add_argument(
        "--only",
        choices=PARTS,
        action="append",
        help="run only this part (repeatable; the main vault is made for any but many-minds)",
    )
    args = parse_args(
        parser,
        n=100,
        calls=5,
        stores=3,
        warmup=1,
        starts=2,
        cli_runs=1,
        agents=2,
        duration=2.0,
        hostile=50,
        minds=10,
        minds_starts=2,
        console_calls=5,
        versions=3,
    )
    if not sys.platform.startswith("linux"):
        raise SystemExit("bench_serve reads /proc: Linux only")
    env = bench_env()
    commit = memfile_commit()
    say(
        f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, {args.n:,} memories, "
        f"{args.clients} clients x {args.duration:g} s, {args.hostile:,} hostile requests, {args.minds:,} minds"
    )
    only = set(args.only or PARTS)
    tables = {name: Rows(COLUMNS, smoke=args.smoke, label=timing_label) for name in PART_NAMES.values()}
    crashed: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="memfile-bench-serve-"))
    sentinel = work / "sentinel"
    sentinel.mkdir()
    (sentinel / "secret.md").write_text(f"---\ncategory: fact\n---\n{SENTINEL_SECRET}\n", encoding="utf-8")
    logs = [work / "serve-main.log"]
    m: Main | None = None
    try:
        if only & {"one-client", "load", "hostile", "console"}:
            with part("1. one client", tables["1. one client"], crashed):
                m = prepare_main(args, work, env, tables["1. one client"])
                if "one-client" in only:
                    part_one_client(args, m, tables["1. one client"])
                else:  # the server the other parts use, started once
                    m.server.start(m.agents[0][1], q("/memory/search", q=m.queries[0]))
        if m is not None and m.server.alive() and "console" in only:  # before load's stores: at --n memories
            with part("5. console", tables["5. console"], crashed):
                part_console(args, m, tables["5. console"])
        if m is not None and m.server.alive() and "load" in only:
            with part("2. load", tables["2. load"], crashed):
                part_load(args, m, tables["2. load"])
        if m is not None and m.server.alive() and "hostile" in only:
            with part("3. hostile", tables["3. hostile"], crashed):
                # the vault, the logs and the keys file are the server's to write; everything else is not
                skip = {m.vault, work / "minds", *logs, work / "serve-minds.log", m.keys}
                part_hostile(args, m, work, tables["3. hostile"], skip)
        if m is not None and m.server.proc is not None:
            stopped = m.server.stop()
            m.stops.append(stopped)
            stops = [s for s, _ in m.stops]
            codes = [c for _, c in m.stops]
            timing(
                tables["1. one client"],
                "SIGTERM to exit (the last after load and hostile)",
                args.n,
                stops,
                limit_s=2.0,
                judge="p95",
                note=f"exit codes {codes}",
            )
            tables["1. one client"].add(
                "server exit codes after SIGTERM",
                ok=all(c == 0 for c in codes),
                check=True,
                target="all 0",
                value=",".join(str(c) for c in codes),
            )
        if "many-minds" in only:
            with part("4. many minds", tables["4. many minds"], crashed):
                part_many_minds(args, work, env, tables["4. many minds"], logs)
        traced = {p.name: found for p in logs if (found := tracebacks(p))}
        for name, found in traced.items():
            kinds = Counter(t.splitlines()[-1] for t in found)
            say(f"\n{name}: {len(found)} tracebacks: " + "; ".join(f"{k} ({c})" for k, c in kinds.items()))
            say("the end of the first:\n" + "\n".join(found[0].splitlines()[-14:]))
        tables["4. many minds"].add(
            "server logs without a traceback",
            ok=not traced,
            check=True,
            target="none",
            value=", ".join(f"{name}: {len(found)}" for name, found in traced.items()) or "none",
            note="; ".join(
                f"{name}: " + ", ".join(sorted({t.splitlines()[-1][:150] for t in found}))
                for name, found in traced.items()
            ),
        )
    finally:
        if m is not None and m.server.alive():
            m.server.stop()
        if args.keep or crashed:
            print(f"\ntemp folder kept in {work} (server logs: serve-*.log)")
        else:
            shutil.rmtree(work, ignore_errors=True)

    for name, table in tables.items():
        if table.rows:  # a part left out with --only has none
            print(f"\n== {name}")
            table.print()
    blob = {
        "commit": commit,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "tables": {name: table.rows for name, table in tables.items()},
        "crashed": crashed,
    }
    text = json.dumps(blob, indent=2, default=str)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n", encoding="utf-8")
    if crashed:
        print(f"\nCRASHED: {', '.join(crashed)}")
        return 1
    return max(table.exit_code() for table in tables.values())


if __name__ == "__main__":
    sys.exit(main())
