"""The watcher: a mind's index follows its files as any editor changes them.

The watchdog callback only records which paths changed and signals
(`MindBatch`, one per mind); one batching thread (`Batcher`) waits until a
mind's events stop for the debounce interval (capped so a continuous stream
still lands every `max_wait` seconds), then applies the whole batch with one
index refresh (and, with autocommit, one git commit). Directory events, a
queue overflow or a (re)start fall back to the full stat-only diff, so no
change is ever missed. One watcher per vault and mind: an flock on
`.memfile/watch-<mind>.lock` (freed if the process dies); while a watcher has
nothing pending, its marker `.memfile/watch-<mind>.clean` lets reads skip
their own stat-only diff.

Two watchers share that code: `Watcher` (`memfile watch`, `Vault.open(watch=True)`)
watches one mind and applies its batches with a Vault of its own on its own
thread; `MindsWatcher` (the served vault, `memfile.worker.Minds`) watches many
minds with one watchdog Observer and hands each batch to a `refresh` callable
(the resident process's worker thread). watchdog is imported only when a
watcher starts; since watchdog 7 every Observer of a process shares one
inotify instance.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import STATE_DIR
from .errors import Conflict, LockTimeout, MemfileError
from .index import RefreshReport
from .paths import is_memory_name
from .vault import Vault

DEFAULT_DEBOUNCE = 0.3
MAX_WAIT = 1.0

#: Applies one mind's batch: (mind, vault-relative paths, or None for the full stat-only diff) -> its report.
Refresh = Callable[[str, "list[str] | None"], RefreshReport]
#: Told of each applied batch: (its report, its paths, or ["(all files)"] for a full diff).
OnBatch = Callable[[RefreshReport, "list[str]"], None]


class MindBatch:
    """One watched mind: its one-watcher lock, its clean marker, and what changed since its last batch.

    The watchdog callback (`record`) and the batching thread meet here, under one guard.
    """

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

    # --- the one-watcher lock --------------------------------------------------

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
        """Stop vouching for the index and free the lock. Safe to call twice."""
        with self._guard:
            self.set_clean(False)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # --- events (watchdog's thread) -----------------------------------------------

    def record(self, event: Any) -> None:
        """watchdog's callback: note the paths and wake the batching thread, nothing more."""
        found: list[str] = []
        if not event.is_directory:  # a folder moved in, out or away: diff everything
            found = [r for r in map(self._relpath, (event.src_path, getattr(event, "dest_path", ""))) if r]
            if not found:
                return  # an editor's swap or backup file, a temp file: nothing to index, still vouching
        with self._guard:
            was_pending = self._pending()
            self._paths.update(found)
            self._full = self._full or not found
            self._changed(was_pending)
        self._wake.set()

    def need_full_diff(self) -> None:
        """Some events were lost (a queue overflow): the next batch diffs every file."""
        with self._guard:
            was_pending = self._pending()
            self._full = True
            self._changed(was_pending)
        self._wake.set()

    def _changed(self, was_pending: bool) -> None:
        """With the guard held: a change is pending from now on (the batch's first, unless `was_pending`)."""
        self.set_clean(False)
        self._idle.clear()
        self._last = time.monotonic()
        if not was_pending:
            self._since = self._last

    def _relpath(self, path: str | bytes) -> str | None:
        name = os.fsdecode(path)
        if not is_memory_name(os.path.basename(name)):
            return None
        try:
            relative = Path(name).relative_to(self.root)
        except ValueError:
            return None
        return relative.as_posix() if relative.parts[0] == self.mind else None

    # --- batches (the batching thread) -------------------------------------------------

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
        """A batch that could not be applied (another writer was busy): pending again, for a later round."""
        with self._guard:
            was_pending = self._pending()
            self._paths.update(paths)
            self._full = self._full or full
            self._changed(was_pending)
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
        """The marker that lets commands skip their stat-only diff: present only while nothing is pending.

        Called with the guard held (or when no other thread runs), so that no event slips
        between the check for pending paths and the marker.
        """
        if clean == self._clean:
            return
        self._clean = clean
        if clean:
            self._clean_marker.write_text(f"{os.getpid()}\n", encoding="ascii")
        else:
            self._clean_marker.unlink(missing_ok=True)


class Batcher:
    """Applies each mind's batch once its events settle, on the thread that calls `run`, one batch at a time."""

    def __init__(self, debounce: float, max_wait: float, on_batch: OnBatch | None = None) -> None:
        self.debounce, self.max_wait, self.on_batch = debounce, max(max_wait, debounce), on_batch
        self.wake = threading.Event()
        self._batches: dict[str, MindBatch] = {}
        self._guard = threading.Lock()
        self._stopping = threading.Event()

    def add(self, batch: MindBatch) -> None:
        """Apply `batch`'s changes from now on (its first batch is the full diff)."""
        with self._guard:
            self._batches[batch.mind] = batch
        self.wake.set()

    def batches(self) -> list[MindBatch]:
        with self._guard:
            return list(self._batches.values())

    def need_full_diff(self) -> None:
        """Events were lost, of any mind: every mind's next batch diffs every file."""
        for batch in self.batches():
            batch.need_full_diff()

    def stop(self) -> None:
        """Make `run` apply what is pending at once, then return."""
        self._stopping.set()
        self.wake.set()

    def run(self, refresh: Refresh, idle_every: float | None = None, on_idle: Callable[[], None] | None = None) -> None:
        """Until `stop`: apply each batch with `refresh` when it is due; `on_idle` every `idle_every` seconds
        in which nothing was pending."""
        while True:
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
                self._apply(batch, refresh)
                applied = True
            if applied:
                continue
            if stopping:
                return
            if not self.wake.wait(min(waits) if waits else idle_every) and not waits and on_idle is not None:
                on_idle()

    def _apply(self, batch: MindBatch, refresh: Refresh) -> None:
        paths, full = batch.take()
        try:
            report = refresh(batch.mind, None if full else paths)
        except LockTimeout:
            batch.keep(paths, full)  # another writer is busy: the batch waits for the next round
            return
        except Exception as exc:  # noqa: BLE001 - the watcher never dies on bad input; the next batch retries
            report = RefreshReport()
            message = str(exc) if isinstance(exc, MemfileError) else f"{type(exc).__name__}: {exc}"
            _logger("memfile.watch").warning("watcher: %s", message)
        batch.batches += 1
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
        self.debounce, self.max_wait, self.autocommit = debounce, max(max_wait, debounce), autocommit
        self.on_batch = on_batch
        self._batcher = Batcher(debounce, max_wait, on_batch)
        self._batch = MindBatch(self.root, self.mind, self._batcher.wake)
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._overflow = _overflow_listener(self._batch.need_full_diff)

    @property
    def batches(self) -> int:
        """Batches applied so far."""
        return self._batch.batches

    # --- life cycle --------------------------------------------------------

    def start(self) -> Watcher:
        """Take the one-watcher lock, start watching the mind folder and the worker.

        Raises:
            Conflict: another watcher already watches this mind.
        """
        self._batch.take_lock()
        self._observer = _observer()
        _schedule(self._observer, self._batch)
        self._observer.start()
        _logger("watchdog").addHandler(self._overflow)
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
        _logger("watchdog").removeHandler(self._overflow)
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

    # --- the worker ------------------------------------------------------------

    def _run(self) -> None:
        vault = Vault.open(self.root, self.mind)  # its own: SQLite connections stay in one thread

        def refresh(mind: str, paths: list[str] | None) -> RefreshReport:
            report = vault.refresh(paths=paths, wait=True)
            if self.autocommit:
                vault.commit_hand_edits(paths)
            return report

        try:
            if vault.config.autosync:  # [sync] autosync: the remote's changes come in while idle
                self._batcher.run(refresh, vault.config.sync_interval, lambda: self._pull(vault))
            else:
                self._batcher.run(refresh)
        finally:
            vault.close()

    def _pull(self, vault: Vault) -> None:
        try:
            report = vault.sync()
        except MemfileError as exc:
            _logger("memfile.watch").warning("autosync: %s", exc)
            return
        if report.came_in or report.went_out:
            _logger("memfile.watch").info("autosync: %d commits in, %d out", report.came_in, report.went_out)


class MindsWatcher:
    """Keeps the index of many minds of one vault in line with their files: one watchdog Observer for them
    all (one inotify instance for the process), each mind folder scheduled when `add`ed, and one batching
    thread that hands each mind's batch to `refresh` (which runs it where that mind's Vault lives)."""

    def __init__(
        self, root: Path, refresh: Refresh, debounce: float = DEFAULT_DEBOUNCE, max_wait: float = MAX_WAIT
    ) -> None:
        self.root, self.refresh = root, refresh
        self._batcher = Batcher(debounce, max_wait)
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._overflow = _overflow_listener(self._batcher.need_full_diff)
        self._guard = threading.Lock()
        self._stopped = False

    def add(self, mind: str) -> bool:
        """Watch `mind` (an existing mind folder) from now on: True, or False when another watcher (a
        `memfile watch`, another server) already watches it; reads then stay right by their own diff."""
        batch = MindBatch(self.root, mind, self._batcher.wake)
        try:
            batch.take_lock()
        except Conflict:
            return False
        with self._guard:
            if self._stopped:
                batch.release()
                return False
            if self._observer is None:
                self._observer = _observer()
                self._observer.start()
                _logger("watchdog").addHandler(self._overflow)
                self._thread = threading.Thread(
                    target=self._batcher.run, args=(self.refresh,), name="memfile-watch-minds", daemon=True
                )
                self._thread.start()
            try:
                _schedule(self._observer, batch)
            except OSError as exc:  # the mind folder went away, or inotify's watch limit is reached
                batch.release()
                _logger("memfile.watch").warning("watcher: mind %s is not watched: %s", mind, exc)
                return False
        self._batcher.add(batch)
        return True

    def watching(self, mind: str) -> bool:
        """Whether this watcher watches `mind`."""
        return any(batch.mind == mind for batch in self._batcher.batches())

    def wait_idle(self, mind: str, timeout: float) -> bool:
        """Block until `mind` has no batch pending (for tests and benchmarks); False on timeout or unwatched."""
        found = [batch for batch in self._batcher.batches() if batch.mind == mind]
        return bool(found) and found[0].wait_idle(timeout)

    def applied(self, mind: str) -> int:
        """How many batches of `mind` were applied so far (for tests and benchmarks)."""
        return sum(batch.batches for batch in self._batcher.batches() if batch.mind == mind)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; pending batches are applied first (through `refresh`). Safe to call twice."""
        with self._guard:
            observer, thread = self._observer, self._thread
            self._observer, self._thread, self._stopped = None, None, True
        if observer is not None:
            observer.stop()
            observer.join(timeout)
        _logger("watchdog").removeHandler(self._overflow)
        self._batcher.stop()
        if thread is not None:
            thread.join(timeout)
        for batch in self._batcher.batches():
            batch.release()


def _observer() -> Any:
    from watchdog.observers import Observer

    return Observer()


def _schedule(observer: Any, batch: MindBatch) -> None:
    """Watch `batch`'s mind folder (only: .git/ and .memfile/ would exhaust inotify watches) for it."""
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
            batch.record(event)

    observer.schedule(Handler(), str(batch.root / batch.mind), recursive=True, event_filter=kinds)


def _logger(name: str) -> Any:
    import logging  # here, so that importing memfile does not import logging

    return logging.getLogger(name)


def _overflow_listener(callback: Callable[[], None]) -> Any:
    """A logging handler for watchdog, which only logs a kernel queue overflow: hearing it means some
    events were lost."""
    import logging

    class OverflowListener(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "overflow" in record.getMessage().lower():
                callback()

    return OverflowListener(logging.WARNING)


def watch_vault(vault: Vault, **options: Any) -> Watcher:
    """Start a watcher over an open Vault (what `Vault.open(..., watch=True)` does)."""
    return Watcher(vault, **options).start()


Vault.watcher_factory = watch_vault  # Vault sits below this module; it is handed the factory, not an import
