"""The watcher: a mind's index follows its files as any editor changes them.

The watchdog callback only records which paths changed and signals; one
worker thread waits until the events stop for the debounce interval (capped
so a continuous stream still lands every `max_wait` seconds), then applies
the whole batch with one index writer (and, with autocommit, one git commit).
Directory events, a queue overflow or a (re)start fall back to the full
stat-only diff, so no change is ever missed. One watcher per vault and mind:
an flock on `.memfile/watch-<mind>.lock` (freed if the process dies).
watchdog is imported only when a watcher starts.
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


class Watcher:
    """Keeps the index of `vault`'s mind in line with the files, in a background thread."""

    def __init__(
        self,
        vault: Vault,
        debounce: float = DEFAULT_DEBOUNCE,
        max_wait: float = MAX_WAIT,
        autocommit: bool = False,
        on_batch: Callable[[RefreshReport, list[str]], None] | None = None,
    ) -> None:
        self.root, self.mind = vault.root, vault.mind
        self.debounce, self.max_wait, self.autocommit = debounce, max(max_wait, debounce), autocommit
        self.on_batch = on_batch
        self.batches = 0
        self._paths: set[str] = set()
        self._full = True  # the first pass is a full diff: whatever changed while nobody watched
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._overflow = _overflow_listener(self._need_full_diff)
        self._clean_marker = vault.root / STATE_DIR / f"watch-{vault.mind}.clean"
        self._clean = False

    # --- life cycle --------------------------------------------------------

    def start(self) -> Watcher:
        """Take the one-watcher lock, start watching the mind folder and the worker.

        Raises:
            Conflict: another watcher already watches this mind.
        """
        self._take_lock()
        self._clean_marker.unlink(missing_ok=True)
        from watchdog import events
        from watchdog.observers import Observer

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
        handler = events.FileSystemEventHandler()
        handler.on_any_event = self._record  # type: ignore[method-assign]
        self._observer = Observer()
        # The mind folder only: .git/ and .memfile/ are never watched (they would exhaust inotify watches).
        self._observer.schedule(handler, str(self.root / self.mind), recursive=True, event_filter=kinds)
        self._observer.start()
        _logger("watchdog").addHandler(self._overflow)
        self._worker = threading.Thread(target=self._run, name=f"memfile-watch-{self.mind}", daemon=True)
        self._worker.start()
        self._wake.set()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching; a pending batch is applied first. Safe to call twice."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
            self._observer = None
        _logger("watchdog").removeHandler(self._overflow)
        self._stopping.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout)
            self._worker = None
        with self._guard:
            self._set_clean(False)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def wait_idle(self, timeout: float) -> bool:
        """Block until no batch is pending (for tests and benchmarks); False on timeout."""
        return self._idle.wait(timeout)

    def _take_lock(self) -> None:
        folder = self.root / STATE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"watch-{self.mind}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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

    # --- events --------------------------------------------------------------

    def _record(self, event: Any) -> None:
        """watchdog's callback: note the paths and wake the worker, nothing more."""
        with self._guard:
            if event.is_directory:
                self._full = True  # a folder moved in, out or away: diff everything
            else:
                found = [r for r in map(self._relpath, (event.src_path, getattr(event, "dest_path", ""))) if r]
                if not found:
                    return  # an editor's swap or backup file, a temp file: nothing to index, still vouching
                self._paths.update(found)
            self._set_clean(False)
            self._idle.clear()
        self._wake.set()

    def _relpath(self, path: str | bytes) -> str | None:
        name = os.fsdecode(path)
        if not is_memory_name(os.path.basename(name)):
            return None
        try:
            relative = Path(name).relative_to(self.root)
        except ValueError:
            return None
        return relative.as_posix() if relative.parts[0] == self.mind else None

    def _need_full_diff(self) -> None:
        with self._guard:
            self._set_clean(False)
            self._full = True
            self._idle.clear()
        self._wake.set()

    # --- the worker ------------------------------------------------------------

    def _run(self) -> None:
        vault = Vault.open(self.root, self.mind)  # its own: SQLite connections stay in one thread
        pull_every = vault.config.sync_interval if vault.config.autosync else None
        try:
            while True:
                if not self._wake.wait(pull_every):
                    self._pull(vault)  # [sync] autosync: the remote's changes come in while idle
                    continue
                if self._pending():
                    self._settle()
                    self._apply(vault)
                else:
                    with self._guard:  # under the guard: an event recorded meanwhile keeps its wake-up
                        if not self._paths and not self._full:
                            self._wake.clear()
                if self._stopping.is_set() and not self._pending():
                    return
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

    def _pending(self) -> bool:
        with self._guard:
            return bool(self._paths) or self._full

    def _settle(self) -> None:
        """Wait until events stop for `debounce` seconds, or `max_wait` passed since the first."""
        first = time.monotonic()
        while not self._stopping.is_set():
            self._wake.clear()
            left = self.max_wait - (time.monotonic() - first)
            if left <= 0 or not self._wake.wait(min(self.debounce, left)):
                return

    def _apply(self, vault: Vault) -> None:
        with self._guard:
            paths, full = sorted(self._paths), self._full
            self._paths, self._full = set(), False
            self._wake.clear()
        if not paths and not full:
            self._finish_batch()
            return
        try:
            report = vault.refresh(paths=None if full else paths, wait=True)
            if self.autocommit:
                vault.commit_hand_edits(None if full else paths)
        except LockTimeout:
            with self._guard:  # another writer is busy: keep the batch for the next round
                self._paths.update(paths)
                self._full = self._full or full
            self._wake.set()
            return
        except Exception as exc:  # noqa: BLE001 - the watcher never dies on bad input; the next batch retries
            report = RefreshReport()
            message = str(exc) if isinstance(exc, MemfileError) else f"{type(exc).__name__}: {exc}"
            vault.notices.append(f"watcher: {message}")
            _logger("memfile.watch").warning("watcher: %s", message)
        self.batches += 1
        if self.on_batch is not None:
            self.on_batch(report, paths if not full else ["(all files)"])
        self._finish_batch()

    def _finish_batch(self) -> None:
        with self._guard:
            if not self._paths and not self._full:
                self._set_clean(True)
                self._idle.set()

    def _set_clean(self, clean: bool) -> None:
        """The marker that lets commands skip their stat-only diff: present only while nothing is pending.

        Called with `_guard` held (or when no other thread runs), so that no event slips
        between the check for pending paths and the marker.
        """
        if clean == self._clean:
            return
        self._clean = clean
        if clean:
            self._clean_marker.write_text(f"{os.getpid()}\n", encoding="ascii")
        else:
            self._clean_marker.unlink(missing_ok=True)


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
