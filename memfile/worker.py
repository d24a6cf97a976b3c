"""The worker of a resident process: one thread owns every Vault call, for every mind of a vault.

A Vault stays on one thread (its SQLite connection belongs to the thread that opened it, and its caches
live on it), so a resident face (the stdio MCP server, `memfile serve`) hands each call to `Minds` with
the `Caller` it acts for, never calling a Vault from its event loop. Between calls the worker warms the
mind used last; while a store waits for git, it answers the reads waiting; under load a store lets reads
go first for up to `STORE_GATHER` seconds so that the stores coming in share its commit. With
`watch=True`, one `MindsWatcher` (one inotify instance however many minds are open) follows the opened
minds, its batches refreshed on the worker thread too. `unix_listener` makes the socket it listens on.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .config import find_vault, load_config, select_mind
from .errors import InvalidInput
from .model import Source, StoreResult
from .paths import MIND_PATTERN, mind_dirs
from .vault import RefreshReport, Vault, pack_loose_objects
from .watch import MindsWatcher

T = TypeVar("T")

#: Seconds of one warm step between calls (a call that comes in stops it sooner).
WARM_STEP = 0.05
#: Seconds after the warm work was found done before it is looked for again.
WARM_AGAIN = 1.0
#: Seconds between tries to watch a mind that another watcher (`memfile watch`) watched at the last try.
WATCH_AGAIN = 10.0
#: Seconds between looks at git's loose objects (packed past git's `LOOSE_MOST`; see `_tidy`).
TIDY_EVERY = 2.0
#: The worker thread's name, in Python and to the system (`ps -L`, `top -H`, /proc/PID/task/TID/comm).
WORKER_THREAD = "memfile-worker"
#: The longest path a Unix socket may have (sun_path holds 108 bytes with the final NUL).
MAX_SOCKET_PATH = 107
#: Seconds a store lets the reads waiting go first, so that more stores share its commit (see `Minds.store`).
STORE_GATHER = 0.2


@dataclass(frozen=True)
class _Job:
    """A call for the worker thread: `run()` sets `future`; a `read` may run while a commit is being made, and
    ahead of a store's job until its `gather_until` (time.monotonic(); 0: none)."""

    run: Callable[[], Any]
    future: Future[Any]
    read: bool
    gather_until: float = 0.0


@dataclass(frozen=True)
class Caller:
    """Who a served request acts for."""

    mind: str  # the mind folder name
    source: Source  # Source.AGENT for a Mind Key, Source.USER for a person's token
    key: str | None = None  # the credential's label (a Memfile-Key: trailer on commits), None on stdio


class Minds:
    """Every Vault of one vault folder, opened lazily (one per mind), all owned by ONE worker thread.

    Attributes:
        root: the vault folder.
        config: its memfile.toml.
        watcher: the in-process watcher of the opened minds (None with `watch=False`).
    """

    def __init__(self, root: Path, *, watch: bool = True, tidy: bool = True) -> None:
        """Each mind's Vault is opened on its first call. `tidy`: pack git's loose objects beside the worker
        (`_tidy`; a resident reader, which makes no commit, leaves that to git).

        Raises:
            NotAVault: `root` is not a vault folder.
        """
        self.root = find_vault(root)
        self.config = load_config(self.root)
        self._home = _identity(self.root)  # the folder opened: nothing is written once it moved or went
        self.watcher = MindsWatcher(self.root, self._refresh) if watch else None
        self._vaults: dict[str, Vault] = {}  # read and written on the worker thread only
        self._release: threading.Event | None = None  # ends the thread holding the Vaults `stop` left open
        self._unwatched: dict[str, float] = {}  # opened minds another watcher had: when we last tried
        self._guard = threading.Lock()
        self._wake = threading.Condition(self._guard)  # a job came in, a commit was made, or the end
        self._jobs: deque[_Job] = deque()  # in order, but a read may run ahead while a commit is made
        self._ending = False  # no job will come in any more: the worker ends once the queue is empty
        self._committing = False  # the worker is inside a write waiting for git (see `_while_committing`)
        self._worker = threading.Thread(target=self._serve, name=WORKER_THREAD, daemon=True)
        self._worker.start()
        self._waiting = 0  # calls submitted and not finished: warm work stops for them
        self._warm_queued = False
        self._closed = False
        self._last: str | None = None  # the mind of the latest call: the one warmed
        self._warmed: tuple[str | None, float] = (None, -WARM_AGAIN)  # (mind, when its warm work was found done)
        # Stores waiting for their mind's next commit (see `store`): (mind, source) -> [(arguments, future)].
        self._stores: dict[tuple[str, Source], list[tuple[dict[str, Any], Future[StoreResult]]]] = {}
        self._tidied = threading.Event()  # set at the end: the tidy thread stops
        if tidy:
            threading.Thread(target=self._tidy, name="memfile-git-tidy", daemon=True).start()

    # --- the vault's minds ------------------------------------------------

    def mind_names(self) -> list[str]:
        """The vault's mind folders, by name (no Vault is opened)."""
        return [name for name in mind_dirs(self.root) if MIND_PATTERN.fullmatch(name)]

    def default_mind(self) -> str:
        """The mind chosen when a request names none: `MEMFILE_MIND`, else `default_mind`, else the only one.

        Raises:
            NotFound: the vault has no mind, or the chosen one does not exist.
            AmbiguousMind: several minds and nothing chooses one.
        """
        return select_mind(self.root, self.config)

    # --- calls --------------------------------------------------------------

    async def call(self, caller: Caller, fn: Callable[[Vault], T], *, read: bool = False) -> T:
        """`fn(vault)` on the worker thread, with the caller's mind's Vault acting as the caller.

        Args:
            read: `fn` only reads (it never writes to the vault): it may then run while a store waits
                for git to make its commit, ahead of calls that came in before it, and may already see
                the memories of that commit.

        Raises:
            NotFound, InvalidInput: the caller's mind does not exist, or is no mind name.
            Whatever `fn` raises.
        """
        asked = time.monotonic()
        return await asyncio.wrap_future(self._submit(lambda: self._act(caller, fn, asked), read=read))

    async def store(self, caller: Caller, arguments: dict[str, Any]) -> StoreResult:
        """`Vault.store(**arguments)` as `caller`, sharing one commit with the stores of its mind and source
        that wait meanwhile (`Vault.store_many`; each credential gets its own `Memfile-Key:` trailer).

        When its turn comes while reads wait, those go first for up to `STORE_GATHER` seconds after the
        first of these stores came in, so the stores coming in meanwhile join its commit: a commit and
        index update cost the worker about three stores' own work, so fewer, fuller commits leave it more
        time for reads. With no read waiting the store is made at once; writes keep their order.

        Raises:
            Whatever `Vault.store` raises for this store (another store of the commit never makes it fail).
        """
        future: Future[StoreResult] = Future()
        group = (caller.mind, caller.source)
        with self._guard:
            waiting = self._stores.setdefault(group, [])
            waiting.append(({**arguments, "credential": caller.key}, future))
            first = len(waiting) == 1
        if first:  # the job that stores every store of this group waiting by the time it runs
            gather_until = time.monotonic() + STORE_GATHER
            self._submit(lambda: self._store_waiting(Caller(caller.mind, caller.source)), gather_until=gather_until)
        return await asyncio.wrap_future(future)

    def run(self, job: Callable[[], T], *, read: bool = False) -> Future[T]:
        """`job()` on the worker thread, which it may use as it likes through `acting`.

        Args:
            read: as in `call`.
        """
        return self._submit(job, read=read)

    def call_sync(self, caller: Caller, fn: Callable[[Vault], T], *, read: bool = False) -> T:
        """`call`, from a thread that is not the worker (blocks until the call is done)."""
        asked = time.monotonic()
        return self._submit(lambda: self._act(caller, fn, asked), read=read).result()

    def close(self) -> None:
        """Stop watching (pending batches are applied first), close every Vault on the worker thread, stop
        the thread. Safe to call twice; no call may be made afterwards. After `stop`, end the thread holding
        the Vaults it left open (left to the garbage collector: SQLite closes a connection only on the
        thread that made it)."""
        if self.watcher is not None:
            self.watcher.stop()
        self._tidied.set()
        with self._guard:
            if self._closed:
                if self._release is not None:
                    self._release.set()
                return
            self._closed = True  # the warm work stops at its next pause
        self._push(self._close_vaults).result()
        self._end()

    def stop(self) -> None:
        """The quick end of a process that exits next (`memfile serve`): stop watching (pending batches are
        dropped: the next reader of those minds diffs them itself), let the calls made finish, stop the
        worker, and leave the Vaults open to the process's end. Closing them one by one (`close`) costs
        3-7 ms per mind whose catalog was written (SQLite checkpoints its log): seconds for 1,000 minds.
        No call may be made afterwards, and `close` then does nothing."""
        if self.watcher is not None:
            self.watcher.stop(finish=False)
        self._tidied.set()
        with self._guard:
            if self._closed:
                return
            self._closed = True  # the warm work stops at its next pause
        self._end()
        vaults, self._vaults, self._release = list(self._vaults.values()), {}, threading.Event()
        args = (vaults, self._release)
        threading.Thread(target=_hold, args=args, name="memfile-vaults-left-open", daemon=True).start()

    def __enter__(self) -> Minds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submit(self, job: Callable[[], T], *, read: bool = False, gather_until: float = 0.0) -> Future[T]:
        with self._guard:
            if self._closed:
                raise RuntimeError("the vault's worker is closed; no call can be made any more")
            self._waiting += 1
            future = self._queue(job, read, gather_until)
        future.add_done_callback(self._done)
        return future

    def _push(self, job: Callable[[], T]) -> Future[T]:
        """`job` on the worker thread, closed or not (the worker's own work: warming, closing)."""
        with self._guard:
            return self._queue(job, False)

    def _queue(self, job: Callable[[], T], read: bool, gather_until: float = 0.0) -> Future[T]:
        """For a caller holding `_guard`: `job` at the end of the queue."""
        future: Future[T] = Future()
        self._jobs.append(_Job(job, future, read, gather_until))
        self._wake.notify()
        return future

    def _end(self) -> None:
        """Let the jobs already queued finish, then end the worker thread."""
        with self._guard:
            self._ending = True
            self._wake.notify()
        if threading.current_thread() is not self._worker:
            self._worker.join()

    def _done(self, _: Future[Any]) -> None:
        """After each call (on the worker thread, or where it was cancelled): warm while nothing waits."""
        with self._guard:
            self._waiting -= 1
            if self._waiting or self._warm_queued or self._closed:
                return
            mind, at = self._warmed
            if mind == self._last and time.monotonic() - at < WARM_AGAIN:
                return  # found done lately; a change to the index makes it start over, looked for later
            self._warm_queued = True
            self._queue(self._warm, False)

    # --- on the worker thread ---------------------------------------------------

    def _serve(self) -> None:
        _name_thread(WORKER_THREAD)
        while True:
            with self._guard:
                while not self._jobs and not self._ending:
                    self._wake.wait()
                if not self._jobs:
                    return
                job = self._next()
            _run(job)

    def _next(self) -> _Job:
        """For the worker holding `_guard`: the next job, out of the queue: the oldest, unless it is a store
        still gathering the stores of its commit (`Minds.store`) while reads wait: then the oldest read."""
        job = self._jobs[0]
        if job.gather_until and time.monotonic() < job.gather_until:
            read = next((j for j in self._jobs if j.read), None)
            if read is not None:
                self._jobs.remove(read)
                return read
        return self._jobs.popleft()

    def _while_committing(self, commit: Future[Any]) -> None:
        """`Vault.while_committing` of every opened Vault: while git makes a store's commit, run the reads
        waiting (the oldest first)."""
        if self._committing:  # a read that wrote (a bug in its caller): it just waits, as without this
            return
        self._committing = True
        commit.add_done_callback(self._nudge)
        try:
            while not commit.done():
                with self._guard:
                    job = next((j for j in self._jobs if j.read), None)
                    if job is None:
                        if not commit.done():
                            self._wake.wait()
                        continue
                    self._jobs.remove(job)
                _run(job)
        finally:
            self._committing = False

    def _nudge(self, _: Future[Any]) -> None:
        with self._guard:
            self._wake.notify()

    def _act(self, caller: Caller, fn: Callable[[Vault], T], asked: float | None = None) -> T:
        """`fn(vault)` as `caller`; `asked`: when the call was made (time.monotonic()), None for now."""
        with self.acting(caller, asked) as vault:
            return fn(vault)

    @contextmanager
    def acting(self, caller: Caller, asked: float | None = None) -> Iterator[Vault]:
        """On the worker thread (inside a `run` job): the caller's mind's Vault, acting as the caller
        and in line with what the watcher heard up to `asked` (time.monotonic(); None for now)."""
        vault = self._vault(caller.mind)
        self._last = caller.mind
        # What the watcher heard is applied here rather than by a walk of every file, once everything changed
        # before this call is sure to be heard (else the marker could vouch for an index that misses an edit
        # whose event is on its way); calls that waited in the queue share the barrier of a call before them.
        if self.watcher is not None:
            if self.watcher.caught_up(since=asked):
                self.watcher.settle(caller.mind, lambda _, paths: vault.refresh(paths=paths, wait=True))
            else:  # not sure all was heard: the marker goes, and this call's read walks the files
                self.watcher.distrust(caller.mind)
        with vault.acting_as(caller.source, key=caller.key):
            yield vault

    def _store_waiting(self, caller: Caller) -> None:
        """Store every store waiting now in `caller`'s mind by callers of its source (`Vault.store_many`)."""
        with self._guard:
            waiting = self._stores.pop((caller.mind, caller.source), [])
        try:
            results = self._act(caller, lambda vault: vault.store_many([arguments for arguments, _ in waiting]))
        except BaseException as exc:  # the mind cannot be opened, or a bug: every waiting store hears of it
            for _, future in waiting:
                _settle(future, exc)
            return
        for (_, future), result in zip(waiting, results, strict=True):
            _settle(future, result)

    def _vault(self, mind: str) -> Vault:
        vault = self._vaults.get(mind)
        if vault is not None:
            if mind in self._unwatched and time.monotonic() - self._unwatched[mind] >= WATCH_AGAIN:
                self._watch(mind)  # that watcher may be gone by now
            return vault
        if not isinstance(mind, str) or not mind:
            raise InvalidInput("mind", mind, "the name of a mind folder of the vault")  # never the default
        vault = Vault.open(self.root, mind, source=Source.AGENT)  # NotFound, InvalidInput for a bad mind
        vault.while_committing = self._while_committing
        vault.resident = True  # `_warm` embeds its memories between requests
        self._vaults[mind] = vault
        self._watch(mind)
        return vault

    def _watch(self, mind: str) -> None:
        """Watch an opened mind, unless another watcher does (its reads then diff by themselves, or trust it)."""
        if self.watcher is None:
            return
        if self.watcher.add(mind):
            self._unwatched.pop(mind, None)
        else:
            self._unwatched[mind] = time.monotonic()

    def moved(self) -> bool:
        """True once the vault folder is not where it was opened (moved, removed or replaced): a batch or
        warm work would then make its index again at the old path."""
        return _identity(self.root) != self._home

    def _refresh(self, mind: str, paths: list[str] | None) -> RefreshReport:
        """A watcher batch of `mind`, applied with its Vault (called from the watcher's thread)."""
        if self.moved():
            return RefreshReport()
        return self._submit(lambda: self._vaults[mind].refresh(paths=paths, wait=True), read=True).result()

    def _warm(self) -> None:
        with self._guard:
            self._warm_queued = False
        mind = self._last
        vault = self._vaults.get(mind) if mind is not None and not self.moved() else None
        while vault is not None and not self._stop_warming():
            try:
                more = vault.warm(WARM_STEP, self._stop_warming)
            except Exception:  # noqa: BLE001 - warming is an extra; the next search shows any real problem
                more = False
            if not more:
                if vault.config.semantic and not self._stop_warming():  # vectors for the searches to come
                    try:
                        vault.embed(batch=4, stop=self._stop_warming)
                    except Exception:  # noqa: BLE001, S110 - an extra: a search by meaning says what is wrong
                        pass
                self._warmed = (mind, time.monotonic())
                return

    def _tidy(self) -> None:
        """Pack git's loose objects now and then (on its own thread, no Vault used), so a memory's history
        stays quick to read however many commits the process makes (git alone waits for 6,700)."""
        while not self._tidied.wait(TIDY_EVERY):
            try:
                pack_loose_objects(self.root)
            except Exception:  # noqa: BLE001, S110 - a repository git cannot pack is the next write's to report
                pass

    def _stop_warming(self) -> bool:
        time.sleep(0)  # lets the event loop's thread take the GIL if a call came in
        return self._waiting > 0 or self._closed

    def _close_vaults(self) -> None:
        vaults, self._vaults = list(self._vaults.values()), {}
        for vault in vaults:
            vault.close()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _run(job: _Job) -> None:
    """Run a job and hand its future the result (a job whose caller gave up meanwhile is skipped)."""
    if not job.future.set_running_or_notify_cancel():
        return
    try:
        result = job.run()
    except BaseException as exc:  # noqa: BLE001 - the caller hears of it; the worker goes on
        job.future.set_exception(exc)
    else:
        job.future.set_result(result)


def _name_thread(name: str) -> None:
    """Give the calling thread `name` (at most 15 characters) where the system shows threads (`top -H`,
    benchmarks/bench_serve.py), to tell the worker from the event loop (Linux only)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w", encoding="ascii") as comm:
            comm.write(name[:15])
    except OSError:
        pass


def _hold(vaults: list[Vault], released: threading.Event) -> None:
    """Keep `vaults` until the process ends (or `close` sets `released`): Python frees nothing a daemon
    thread holds at exit, so nothing closes them one by one."""
    released.wait()


def _settle(future: Future[StoreResult], result: StoreResult | BaseException) -> None:
    """Hand a store its result (a request whose client left meanwhile was cancelled: nobody hears it)."""
    if future.cancelled():
        return
    if isinstance(result, StoreResult):
        future.set_result(result)
    else:
        future.set_exception(result)


def unix_listener(path: Path) -> socket.socket:
    """A Unix socket listening at `path`, mode 0600 from its first moment: bound in a private 0700 folder
    beside it, then moved into place (no process-wide umask, so no other thread's files are touched). A
    socket left by a server that was killed is replaced.

    Raises:
        FileExistsError: something other than a socket is in the way.
        ConnectionError: a server listens there.
        OSError: the socket cannot be made there.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISSOCK(info.st_mode):
        raise FileExistsError(errno.EEXIST, "a file is in the way", str(path))
    if info is not None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nothing listens there: a socket left by a server that was killed
        else:
            raise ConnectionError(errno.EADDRINUSE, "a server already listens there", str(path))
        finally:
            probe.close()
    folder = Path(tempfile.mkdtemp(prefix=".socket-", dir=path.parent))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inside = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # The private folder's name is longer than the socket's: where its path would pass sun_path's 107
        # bytes, the folder is named through its descriptor (Linux's /proc/self/fd/N leads to it).
        made = str(folder / "s")
        if len(os.fsencode(made)) > MAX_SOCKET_PATH:
            made = f"/proc/self/fd/{inside}/s"
        sock.bind(made)
        os.chmod("s", 0o600, dir_fd=inside)
        sock.listen(64)
        os.rename("s", path, src_dir_fd=inside)
    except OSError:
        sock.close()
        raise
    finally:
        os.close(inside)
        shutil.rmtree(folder, ignore_errors=True)
    return sock
