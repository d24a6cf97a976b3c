"""The watcher: a mind's index follows its files as any editor changes them.

The watchdog callback only records changed paths (`MindBatch`, one per mind); one batching thread
(`Batcher`) applies a mind's batch once its events stop for the debounce interval (or after
`max_wait`). Directory events, a queue overflow or a (re)start fall back to the full stat-only diff,
so no change is missed. One watcher per mind (an flock on `.memfile/watch-<mind>.lock`); while
nothing is pending, the marker `.memfile/watch-<mind>.clean` lets reads skip their own diff.
`Watcher` (`memfile watch`, `Vault.open(watch=True)`) watches one mind with a Vault of its own;
`MindsWatcher` (the served vault) watches the whole vault and hands each mind's batch to `refresh`.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from .config import STATE_DIR
from .errors import Conflict, LockTimeout, MemfileError
from .paths import is_memory_name
from .vault import RefreshReport, Vault

_log = logging.getLogger("memfile.watch")
_WATCHDOG_LOG = logging.getLogger("watchdog")  # it logs a kernel queue overflow only (`_overflow_listener`)
DEFAULT_DEBOUNCE = 0.3
#: Seconds a call waits for the watcher to hear everything made before it (`MindsWatcher.caught_up`).
BARRIER_TIMEOUT = 1.0
MAX_WAIT = 1.0
#: `[search] semantic`: seconds without a change before the watcher embeds what has no vector yet.
EMBED_EVERY = 2.0

#: Applies one mind's batch: (mind, vault-relative paths, or None for the full stat-only diff) -> its report.
Refresh = Callable[[str, "list[str] | None"], RefreshReport]
#: Told of each applied batch: (its report, its paths, or ["(all files)"] for a full diff).
OnBatch = Callable[[RefreshReport, "list[str]"], None]


class MindBatch:
    """One watched mind: its one-watcher lock, its clean marker, and what changed since its last batch
    (the watchdog callback, `record`, and the batching thread meet here, under one guard)."""

    def __init__(self, root: Path, mind: str, wake: threading.Event) -> None:
        self.root, self.mind = root, mind
        self.batches = 0  # batches applied
        self._wake = wake  # the batching thread's
        self._paths: set[str] = set()
        self._full = True  # the first pass is a full diff: whatever changed while nobody watched
        self._since = self._last = time.monotonic()  # the first and the latest change still pending
        self._guard = threading.Lock()
        self._idle = threading.Event()
        self._lock_fd: int | None = None
        self._clean_marker = root / STATE_DIR / f"watch-{mind}.clean"
        self._clean = False
        self._released = False

    def take_lock(self) -> None:
        """Become the one watcher of this mind (and drop a dead watcher's marker).

        Raises:
            Conflict: another watcher already watches this mind.
        """
        folder = self.root / STATE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"watch-{self.mind}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise Conflict(
                f"another memfile watcher (pid {holder}) already watches mind {self.mind} of {self.root}; "
                "commands keep working beside it, no second watcher is needed"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd
        self._clean_marker.unlink(missing_ok=True)
        with self._guard:
            self._since = self._last = time.monotonic()

    def release(self) -> None:
        """Stop vouching for the index for good and free the lock. Safe to call twice."""
        with self._guard:
            self.set_clean(False)
            self._released = True  # a batch still being applied must not put the marker back
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def record(self, event: Any) -> None:
        """watchdog's callback: note the paths and wake the batching thread, nothing more."""
        found: list[str] = []
        if not event.is_directory:  # a folder moved in, out or away: diff everything
            found = [r for r in map(self._relpath, (event.src_path, getattr(event, "dest_path", ""))) if r]
            if not found:
                return  # an editor's swap or backup file, a temp file: nothing to index, still vouching
        self.keep(found, not found)

    def need_full_diff(self) -> None:
        self.keep([], True)

    def _relpath(self, path: str | bytes) -> str | None:
        name = os.fsdecode(path)
        if not is_memory_name(os.path.basename(name)):
            return None
        try:
            relative = Path(name).relative_to(self.root)
        except ValueError:
            return None
        return relative.as_posix() if relative.parts[0] == self.mind else None

    def _pending(self) -> bool:
        return bool(self._paths) or self._full

    def due(self, now: float, debounce: float, max_wait: float) -> float | None:
        """Seconds until the pending batch is due (<= 0: now), None when nothing is pending: due once events
        stopped for `debounce` seconds, or `max_wait` seconds after its first change."""
        with self._guard:
            if not self._pending():
                return None
            return min(self._last + debounce, self._since + max_wait) - now

    def take(self) -> tuple[list[str], bool]:
        """The pending batch, (paths, full diff?), which is pending no more."""
        with self._guard:
            paths, full = sorted(self._paths), self._full
            self._paths, self._full = set(), False
            return paths, full

    def keep(self, paths: list[str], full: bool) -> None:
        """These changes pending (with a full diff when `full`): what the events said, or a batch that could
        not be applied (another writer was busy)."""
        with self._guard:
            self._last = time.monotonic()
            if not self._pending():
                self._since = self._last  # the batch's first change
            self._paths.update(paths)
            self._full = self._full or full
            self.set_clean(False)
            self._idle.clear()
        self._wake.set()

    def finish(self) -> None:
        """After a batch: vouch for the index again, unless a change came in meanwhile."""
        with self._guard:
            if not self._pending():
                self.set_clean(True)
                self._idle.set()

    def wait_idle(self, timeout: float) -> bool:
        """Block until no batch is pending (for tests and benchmarks); False on timeout."""
        return self._idle.wait(timeout)

    def set_clean(self, clean: bool) -> None:
        """The marker that lets commands skip their stat-only diff, present only while nothing is pending
        (called with the guard held, so no event slips between the check for pending paths and the marker)."""
        if clean == self._clean or (clean and self._released):
            return
        if clean:
            try:
                self._clean_marker.write_text(f"{os.getpid()}\n", encoding="ascii")
            except FileNotFoundError:  # the vault folder moved or went: nothing there to vouch for
                return
        else:
            self._clean_marker.unlink(missing_ok=True)
        self._clean = clean


class Batcher:
    """Applies each mind's batch once its events settle, on the thread that calls `run`, one batch at a time."""

    def __init__(self, debounce: float, max_wait: float, on_batch: OnBatch | None = None) -> None:
        self.debounce, self.max_wait, self.on_batch = debounce, max(max_wait, debounce), on_batch
        self.wake = threading.Event()
        self._batches: dict[str, MindBatch] = {}
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        self._dropping = threading.Event()

    def add(self, batch: MindBatch) -> None:
        """Apply `batch`'s changes from now on (its first batch is the full diff)."""
        with self._guard:
            self._batches[batch.mind] = batch
        self.wake.set()

    def batches(self) -> list[MindBatch]:
        with self._guard:
            return list(self._batches.values())

    def batch(self, mind: str) -> MindBatch | None:
        """The batch of `mind`, None when it is not watched."""
        with self._guard:
            return self._batches.get(mind)

    def clear(self) -> list[MindBatch]:
        """Apply no batch any more: the batches it had."""
        with self._guard:
            batches, self._batches = list(self._batches.values()), {}
            return batches

    def need_full_diff(self) -> None:
        for batch in self.batches():
            batch.need_full_diff()

    def stop(self, finish: bool = True) -> None:
        """Make `run` apply what is pending at once (nothing, without `finish`), then return."""
        if not finish:
            self._dropping.set()
        self._stopping.set()
        self.wake.set()

    def run(self, refresh: Refresh, idle_every: float | None = None, on_idle: Callable[[], None] | None = None) -> None:
        """Until `stop`: apply each batch with `refresh` when it is due; `on_idle` every `idle_every` seconds
        in which nothing was pending."""
        while not self._dropping.is_set():
            self.wake.clear()  # before looking: an event recorded from now on keeps its wake-up
            stopping, now = self._stopping.is_set(), time.monotonic()
            waits, applied = [], False
            for batch in self.batches():
                due = batch.due(now, self.debounce, self.max_wait)
                if due is None:
                    continue
                if due > 0 and not stopping:
                    waits.append(due)
                    continue
                if self._dropping.is_set():
                    return
                self.apply(batch, refresh)
                applied = True
            if applied:
                continue
            if stopping:
                return
            if not self.wake.wait(min(waits) if waits else idle_every) and not waits and on_idle is not None:
                on_idle()

    def apply(self, batch: MindBatch, refresh: Refresh) -> None:
        """Apply `batch`'s pending changes now, with `refresh` (on the caller's thread)."""
        paths, full = batch.take()
        try:
            report = refresh(batch.mind, None if full else paths)
        except LockTimeout:
            batch.keep(paths, full)  # another writer is busy: the batch waits for the next round
            return
        except Exception as exc:  # noqa: BLE001 - the watcher never dies on bad input; the next batch retries
            report = RefreshReport()
            message = str(exc) if isinstance(exc, MemfileError) else f"{type(exc).__name__}: {exc}"
            _log.warning("watcher: %s", message)
        batch.batches += 1
        if report.changed and not full:
            _warn_of_secrets(batch.root, paths)
        if self.on_batch is not None:
            self.on_batch(report, paths if not full else ["(all files)"])
        batch.finish()


class Watcher:
    """Keeps the index of `vault`'s mind in line with the files, in a background thread (`memfile watch`)."""

    def __init__(
        self,
        vault: Vault,
        debounce: float = DEFAULT_DEBOUNCE,
        max_wait: float = MAX_WAIT,
        autocommit: bool = False,
        on_batch: OnBatch | None = None,
    ) -> None:
        self.root, self.mind = vault.root, vault.mind
        self.autocommit = autocommit
        self._batcher = Batcher(debounce, max_wait, on_batch)
        self._batch = MindBatch(self.root, self.mind, self._batcher.wake)
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._overflow = _overflow_listener(self._batch.need_full_diff)

    @property
    def batches(self) -> int:
        """Batches applied so far."""
        return self._batch.batches

    def start(self) -> Watcher:
        """Take the one-watcher lock, start watching the mind folder and the worker.

        Raises:
            Conflict: another watcher already watches this mind.
        """
        self._batch.take_lock()
        self._observer = _observer()
        _schedule(self._observer, self.root / self.mind, self._batch.record)  # the mind only: not .git/
        self._observer.start()
        _WATCHDOG_LOG.addHandler(self._overflow)
        self._batcher.add(self._batch)
        self._worker = threading.Thread(target=self._run, name=f"memfile-watch-{self.mind}", daemon=True)
        self._worker.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching; a pending batch is applied first. Safe to call twice."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
            self._observer = None
        _WATCHDOG_LOG.removeHandler(self._overflow)
        self._batcher.stop()
        if self._worker is not None:
            self._worker.join(timeout)
            self._worker = None
        self._batch.release()

    def wait_idle(self, timeout: float) -> bool:
        """Block until no batch is pending (for tests and benchmarks); False on timeout."""
        return self._batch.wait_idle(timeout)

    def _set_clean(self, clean: bool) -> None:
        with self._batch._guard:  # noqa: SLF001 - the batch's own guard, as its callers hold it
            self._batch.set_clean(clean)

    def _run(self) -> None:
        vault = Vault.open(self.root, self.mind)  # its own: SQLite connections stay in one thread

        pulled, semantic, unembedded = time.monotonic(), vault.config.semantic, True

        def refresh(mind: str, paths: list[str] | None) -> RefreshReport:
            nonlocal unembedded
            report = vault.refresh(paths=paths, wait=True)
            if self.autocommit:
                vault.commit_hand_edits(paths)
            unembedded = True  # files were touched (another process may have indexed them first)
            return report

        def idle() -> None:
            nonlocal pulled, semantic, unembedded
            if vault.config.autosync and time.monotonic() - pulled >= vault.config.sync_interval:
                pulled = time.monotonic()
                self._pull(vault)  # [sync] autosync: the remote's changes come in while idle
            if semantic and unembedded:  # nothing changed since the last whole pass: no look at every vector
                semantic = self._embed(vault)
                unembedded = self._batcher.wake.is_set()  # stopped by a change: the next quiet spell goes on

        every = [vault.config.sync_interval] if vault.config.autosync else []
        every += [EMBED_EVERY] if vault.config.semantic else []
        try:
            self._batcher.run(refresh, min(every) if every else None, idle if every else None)
        finally:
            vault.close()

    def _embed(self, vault: Vault) -> bool:
        """`[search] semantic`: embed the memories without a vector (a store embeds its own; this catches
        hand edits, pulls and imports), stopping when a change is heard. False when it cannot: said once."""
        try:
            done = vault.embed(batch=8, stop=self._batcher.wake.is_set)
        except MemfileError as exc:
            _log.warning("semantic: %s; memories are not embedded", exc)
            return False
        if done:
            _log.info("semantic: %d memories embedded", done)
        return True

    def _pull(self, vault: Vault) -> None:
        try:
            report = vault.sync()
        except MemfileError as exc:
            _log.warning("autosync: %s", exc)
            return
        if report.came_in or report.went_out:
            _log.info("autosync: %d commits in, %d out", report.came_in, report.went_out)


class MindsWatcher:
    """Keeps the index of many minds of one vault in line with their files (the served vault).

    One recursive watch covers the vault; each event goes, by the first component of its path, to the
    batch of that mind if it was `add`ed. The watch is set up on the watcher's own thread, so no request
    waits for the walk; that thread hands each batch to `refresh`, which runs it where the mind's Vault lives.
    """

    def __init__(
        self, root: Path, refresh: Refresh, debounce: float = DEFAULT_DEBOUNCE, max_wait: float = MAX_WAIT
    ) -> None:
        self.root, self.refresh = root, refresh
        self._batcher = Batcher(debounce, max_wait)
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._overflow = _overflow_listener(self._batcher.need_full_diff)
        self._prefix = os.path.join(str(root), "")
        self._guard = threading.Lock()
        self._stopped = False
        self._failed = False  # the vault could not be watched: every mind stays unwatched
        self._live = threading.Event()  # the watch is up: from now on no change goes unheard
        # `caught_up`'s barriers: files made in .memfile/ whose creation, heard here, proves every event
        # before it was heard too (one inotify instance keeps its events in order).
        self._barrier_prefix = os.path.join(str(root), STATE_DIR, "watch-barrier-")
        self._barrier = threading.Condition()
        self._barrier_made = self._barrier_heard = 0
        self._barrier_times: dict[int, float] = {}  # barriers made, not yet heard: number -> when made
        self._heard_up_to = float("-inf")  # everything changed before this moment (time.monotonic()) is heard

    def add(self, mind: str) -> bool:
        """Watch `mind` (an existing mind folder) from now on: True, or False when another watcher (a
        `memfile watch`, another server) already watches it, or the vault cannot be watched; reads
        then stay right by their own diff."""
        if self._failed:
            return False
        batch = MindBatch(self.root, mind, self._batcher.wake)
        try:
            batch.take_lock()
        except Conflict:
            return False
        with self._guard:
            if self._stopped or self._failed:
                batch.release()
                return False
            self._batcher.add(batch)  # its first batch, the full diff, comes once the watch is up
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memfile-watch-minds", daemon=True)
                self._thread.start()
        return True

    def settle(self, mind: str, refresh: Refresh) -> None:
        """Apply what was seen of `mind` and not applied yet, now, through `refresh` (a call about to read
        then trusts the marker instead of walking every file); not before the watch is up (a batch applied
        then would vouch for changes nobody listens for yet)."""
        batch = self._batcher.batch(mind)
        if (
            self._live.is_set()
            and batch is not None
            and batch.due(time.monotonic(), self._batcher.debounce, self._batcher.max_wait) is not None
        ):
            self._batcher.apply(batch, refresh)

    def caught_up(self, timeout: float = BARRIER_TIMEOUT, since: float | None = None) -> bool:
        """Wait until every change made to the vault before this call (or before `since`, a
        `time.monotonic()`) has been heard, by making and removing a barrier file and waiting to hear it
        made; a barrier made after `since` and already heard answers at once (queued calls share one).
        False when the watch is not up or the barrier was not heard within `timeout` seconds."""
        if not self._live.is_set() or self._stopped or self._failed:
            return False
        with self._barrier:
            if since is not None and self._heard_up_to >= since:
                return True
            self._barrier_made += 1
            number = self._barrier_made
            self._barrier_times[number] = time.monotonic()  # before the file is made: what came earlier is heard
        path = f"{self._barrier_prefix}{number}"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            os.unlink(path)
        except OSError:  # a read-only vault: nothing to wait for, reads walk as without a watcher
            return False
        with self._barrier:
            return self._barrier.wait_for(lambda: self._barrier_heard >= number, timeout)

    def distrust(self, mind: str) -> None:
        """Stop vouching for `mind` until a full diff of it is applied (`caught_up` failed for it)."""
        batch = self._batcher.batch(mind)
        if batch is not None:
            batch.need_full_diff()

    def watching(self, mind: str) -> bool:
        """Whether this watcher watches `mind`."""
        return self._batcher.batch(mind) is not None

    def wait_idle(self, mind: str, timeout: float) -> bool:
        """Block until `mind` has no batch pending (for tests and benchmarks); False on timeout or unwatched."""
        batch = self._batcher.batch(mind)
        return batch is not None and batch.wait_idle(timeout)

    def applied(self, mind: str) -> int:
        """How many batches of `mind` were applied so far (for tests and benchmarks)."""
        batch = self._batcher.batch(mind)
        return batch.batches if batch is not None else 0

    def stop(self, timeout: float = 5.0, *, finish: bool = True) -> None:
        """Stop watching: every clean marker removed, every lock freed. Pending batches are applied first,
        unless `finish` is False (the next reader of those minds diffs them itself). Safe to call twice."""
        with self._guard:
            observer, thread = self._observer, self._thread
            self._observer, self._thread, self._stopped = None, None, True
        try:
            if observer is not None:
                observer.stop()
                observer.join(timeout)
        except Exception as exc:  # noqa: BLE001 - watchdog's own stop failed: the markers must go all the same
            _log.warning("watcher: stopping watchdog failed: %s", type(exc).__name__)
        finally:
            _WATCHDOG_LOG.removeHandler(self._overflow)
            self._batcher.stop(finish)
            if thread is not None:
                thread.join(timeout)
                if thread.is_alive():  # too much was pending: the rest is left for each mind's next reader
                    self._batcher.stop(finish=False)
                    thread.join(timeout)
            for batch in self._batcher.batches():
                batch.release()

    def _run(self) -> None:
        try:
            observer = _observer()
            _schedule(observer, self.root, self._dispatch)
            observer.start()
        except OSError as exc:  # the vault went away, or inotify's watch limit is reached
            _log.warning("watcher: the vault is not watched, reads diff by themselves: %s", exc)
            with self._guard:
                self._failed = True
            for batch in self._batcher.clear():
                batch.release()
            return
        with self._guard:
            stopped = self._stopped
            if not stopped:
                self._observer = observer
        if stopped:  # `stop` came while the watch was being set up
            observer.stop()
            observer.join()
            return
        _WATCHDOG_LOG.addHandler(self._overflow)
        self._live.set()
        self._batcher.run(self.refresh)

    def _dispatch(self, event: Any) -> None:
        source = os.fsdecode(event.src_path)
        if source.startswith(self._barrier_prefix):  # `caught_up`'s barrier: heard, with all before it
            with suppress(ValueError), self._barrier:
                number = int(source[len(self._barrier_prefix) :])
                self._barrier_heard = max(self._barrier_heard, number)
                for made in [n for n in self._barrier_times if n <= number]:  # inotify keeps events in order
                    self._heard_up_to = max(self._heard_up_to, self._barrier_times.pop(made))
                self._barrier.notify_all()
            return
        minds = {self._mind_of(event.src_path), self._mind_of(getattr(event, "dest_path", ""))}
        for mind in minds:
            batch = self._batcher.batch(mind) if mind else None
            if batch is not None:
                batch.record(event)

    def _mind_of(self, path: str | bytes) -> str | None:
        """The mind folder a watched path is in (None: the vault's own files, a dot folder, elsewhere)."""
        name = os.fsdecode(path)
        if not name.startswith(self._prefix):
            return None
        head = name[len(self._prefix) :].split(os.sep, 1)[0]
        return head if head and not head.startswith(".") else None


def _observer() -> Any:
    from watchdog.observers import Observer

    # watchdog warns when a folder made while it walks the tree is watched twice (harmless: the second
    # callback replaces the first), and the warning prints its whole watch table: hundreds of KB a line.
    warnings.filterwarnings("ignore", message=r"Callback with id .* already exists", category=RuntimeWarning)
    return Observer()


def _schedule(observer: Any, folder: Path, callback: Callable[[Any], None]) -> None:
    """Watch `folder` and everything below it, telling `callback` of each event that may touch a memory."""
    from watchdog import events

    kinds = [
        events.FileCreatedEvent,
        events.FileModifiedEvent,
        events.FileDeletedEvent,
        events.FileMovedEvent,
        events.FileClosedEvent,
        events.FileAttribEvent,
        events.DirCreatedEvent,
        events.DirDeletedEvent,
        events.DirMovedEvent,
    ]

    class Handler(events.FileSystemEventHandler):
        def on_any_event(self, event: events.FileSystemEvent) -> None:
            callback(event)

    observer.schedule(Handler(), str(folder), recursive=True, event_filter=kinds)


def _warn_of_secrets(root: Path, paths: list[str]) -> None:
    """A person's hand edit is never refused, but a secret in it is told (`memfile.secretscan.warning`)."""
    from .config import load_config
    from .secretscan import warning

    try:
        policy = load_config(root).secrets
    except MemfileError:
        return  # memfile.toml is being edited: the next command names its problem
    for relpath in paths:
        try:
            text = (root / relpath).read_text(encoding="utf-8-sig") if relpath.endswith(".md") else ""
        except (OSError, UnicodeDecodeError):
            continue  # gone again, or unreadable: the index names it
        told = warning(policy, text, relpath) if text else None
        if told:
            _log.warning("watcher: %s", told)


def _overflow_listener(callback: Callable[[], None]) -> Any:
    """A logging handler for watchdog, which logs only a kernel queue overflow (events were lost)."""

    class OverflowListener(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "overflow" in record.getMessage().lower():
                callback()

    return OverflowListener(logging.WARNING)
