"""The store queue: stores waiting for the writer lock, so one holder commits them together.

A process that finds the writer lock taken leaves its request in `.memfile/queue/<mind>/` and keeps
trying the lock. Whoever holds it claims the waiting requests (oldest first), stores them in one
commit and leaves each one's result beside it for the waiting process to pick up.

Files, all written atomically:
- `NAME.req`: a request, written by the process that wants the store;
- `NAME.claimed`: the same request once a lock holder took it. Only a lock
  holder claims, and it settles every claim before it lets the lock go, so a
  `.claimed` file seen by the next holder was left by a killed one: it is
  stored again (a store of what is already there changes nothing), by its own
  process at the latest. A request whose process is gone is dropped: it never
  heard back, and storing it later could overwrite what was stored since;
- `NAME.done`: the result, read and removed by the process that asked. A
  result nobody came for (its process was killed) is removed after an hour.

A request still waiting when its process gives up is withdrawn (removed);
once claimed, it will be stored, so the process waits for its result. A request
is a `StoreRequest`, made into plain values (marshal) only in these files.
"""

from __future__ import annotations

import marshal
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from . import errors, secretscan
from .files import atomic_write, try_writer_lock
from .model import UNSET, Category, Priority, Source, StoreRequest, StoreResult, memory_from_row, memory_to_row

#: Results nobody picked up (their process was killed) are removed after this many seconds.
STALE_RESULT = 3600.0
#: Seconds after which a file in the queue that is no request, claim or result is a cut-off write.
CUT_OFF = 60.0
#: At most this many stores go into one commit.
LIMIT = 32


@dataclass(frozen=True)
class Ticket:
    """One request in the queue: `folder/name.req`, later `.claimed`, then `.done`."""

    folder: Path
    name: str

    def file(self, state: str) -> Path:
        return self.folder / f"{self.name}.{state}"


def submit(
    lock_path: Path,
    folder: Path,
    timeout: float,
    request: StoreRequest,
    hold: Callable[[StoreRequest | None, Ticket | None], StoreResult],
) -> StoreResult:
    """Store `request`: call `hold(request, None)` holding the writer lock if it is free, else queue it;
    whichever process holds the lock stores it (this one too, then `hold(None, ticket)`).

    Raises:
        LockTimeout: the lock stayed taken for `timeout` seconds and the request was still waiting.
        MemfileError: the store failed (raised again here when another process met it).
    """
    ticket: Ticket | None = None
    deadline = time.monotonic() + timeout
    delay = 0.002
    try:
        while True:
            with try_writer_lock(lock_path) as held:
                if held:
                    if ticket is not None and (result := take_result(ticket)) is not None:
                        return decode(result)
                    return hold(request if ticket is None else None, ticket)
            if ticket is None:
                ticket = enqueue(folder, request)
            elif (result := take_result(ticket)) is not None:
                return decode(result)
            elif time.monotonic() >= deadline and withdraw(ticket):
                ticket = None
                raise errors.LockTimeout(str(lock_path), timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
    except BaseException:
        if ticket is not None:
            withdraw(ticket)  # claimed already: it will be stored, as if the process had died after asking
        raise


def joins(request: StoreRequest, taken: list[StoreRequest]) -> bool:
    """Whether a request can share a commit with those taken: same source and caller, made under a
    credential when they were (each credential then gets its `Memfile-Key:` trailer: `Writer.trailers`),
    another memory, and no supersede (which changes a second memory) on either side."""
    if not taken:
        return True
    first = taken[0]
    return (
        request.supersedes is None
        and first.supersedes is None
        and (request.source, request.actor, request.credential is None)
        == (first.source, first.actor, first.credential is None)
        and all((t.category, t.key) != (request.category, request.key) for t in taken)
    )


def _plain(request: StoreRequest) -> dict[str, Any]:
    """A request as plain values, for a `.req` file."""
    expires = request.expires
    return {
        "category": request.category.value,
        "key": request.key,
        "content": request.content,
        "now": request.now.isoformat(),
        "priority": request.priority.value if request.priority else None,
        "tags": list(request.tags) if request.tags is not None else None,
        "confidence": request.confidence,
        "source": request.source.value,
        "actor": request.actor.value,
        "credential": request.credential,
        "expires": "unset" if expires is UNSET else expires.isoformat() if expires else None,
        "supersedes": request.supersedes,
    }


def _request(plain: dict[str, Any]) -> StoreRequest:
    """`_plain` reversed. Raises KeyError, ValueError: not a request."""
    expires = plain["expires"]
    return StoreRequest(
        Category(plain["category"]),
        plain["key"],
        plain["content"],
        datetime.fromisoformat(plain["now"]),
        Priority(plain["priority"]) if plain["priority"] else None,
        tuple(plain["tags"]) if plain["tags"] is not None else None,
        plain["confidence"],
        UNSET if expires == "unset" else datetime.fromisoformat(expires) if expires else None,
        Source(plain["source"]),
        Source(plain["actor"]),
        plain.get("credential"),
        plain["supersedes"],
    )


def encode(result: StoreResult | Exception) -> dict[str, Any]:
    """A store's result (or its failure) as plain values for a `.done` file."""
    if isinstance(result, Exception):
        return error_result(result)
    return {
        "memory": memory_to_row(result.memory),
        "created": result.created,
        "changed": result.changed,
        "commit": result.commit,
        "notices": [
            [n.message, n.hint, list(n.hint_values)] if isinstance(n, errors.Notice) else n for n in result.notices
        ],
        "superseded": memory_to_row(result.superseded) if result.superseded else None,
    }


def decode(result: dict[str, Any]) -> StoreResult:
    """`encode` reversed; a failure is raised."""
    if "error" in result:
        raise_error(result)
    return StoreResult(
        memory_from_row(result["memory"]),
        created=result["created"],
        changed=result["changed"],
        commit=result["commit"],
        notices=tuple(errors.Notice(*n) if isinstance(n, list) else n for n in result["notices"]),
        superseded=memory_from_row(result["superseded"]) if result["superseded"] else None,
    )


def enqueue(folder: Path, request: StoreRequest) -> Ticket:
    """Leave a request in the queue; its name sorts by arrival (oldest first)."""
    ticket = Ticket(folder, f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}")
    atomic_write(ticket.file("req"), marshal.dumps(_plain(request)))
    return ticket


def withdraw(ticket: Ticket) -> bool:
    """Take a request back out of the queue; False when a lock holder already claimed it."""
    try:
        ticket.file("req").unlink()
        return True
    except FileNotFoundError:
        return False


def take_result(ticket: Ticket) -> dict[str, Any] | None:
    """The result a lock holder left for this request (removed from the queue), or None yet."""
    path = ticket.file("done")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    path.unlink(missing_ok=True)
    return marshal.loads(data)


def claim(folder: Path, wanted: Any, limit: int) -> list[tuple[Ticket, StoreRequest]]:
    """Claim up to `limit` waiting requests, oldest first, for the caller holding the writer lock;
    `wanted(request, taken)` says whether a request joins the ones taken (else it waits for the next commit).
    """
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    taken: list[tuple[Ticket, StoreRequest]] = []
    now = time.time()
    for name in names:
        stem, _, state = name.rpartition(".")
        ticket = Ticket(folder, stem)
        if state == "done":
            if _older(ticket.file("done"), now - STALE_RESULT):
                ticket.file("done").unlink(missing_ok=True)
            continue
        if state not in ("req", "claimed") or len(taken) >= limit:
            continue
        if not _alive(stem):
            # Its process was killed before it heard back: it never learnt the store was done, so it is
            # dropped, not stored minutes later over what was stored since (a half-done store is on
            # disk, uncommitted: the next write or doctor --fix commits it as a hand edit).
            ticket.file(state).unlink(missing_ok=True)
            continue
        try:
            request = _request(marshal.loads(ticket.file(state).read_bytes()))
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            ticket.file(state).unlink(missing_ok=True)  # a request its writer never finished
            continue
        if not wanted(request, [r for _, r in taken]):
            continue
        if state == "req":
            try:
                os.rename(ticket.file("req"), ticket.file("claimed"))
            except FileNotFoundError:
                continue  # withdrawn by its process just now
        taken.append((ticket, request))
    return taken


def settle(ticket: Ticket, result: dict[str, Any]) -> None:
    """Leave a claimed request's result for its process and drop the claim."""
    atomic_write(ticket.file("done"), marshal.dumps(result))
    ticket.file("claimed").unlink(missing_ok=True)


def error_result(exc: Exception) -> dict[str, Any]:
    """A failed store, as a result: the MemfileError's class, message and plain fields."""
    if not isinstance(exc, errors.MemfileError):
        return {"error": "MemfileError", "message": f"the store failed unexpectedly: {exc!r}", "fields": {}}
    plain = (str, int, float, bool, type(None))
    fields = {
        k: v
        for k, v in vars(exc).items()
        if isinstance(v, plain) or isinstance(v, list) and all(isinstance(x, str) for x in v)
    }
    return {"error": type(exc).__name__, "message": str(exc), "fields": fields}


def raise_error(result: dict[str, Any]) -> NoReturn:
    """Raise the MemfileError a lock holder met while storing this request (same class, same message)."""
    cls = getattr(errors, result["error"], None) or getattr(secretscan, result["error"], errors.MemfileError)
    if not (isinstance(cls, type) and issubclass(cls, errors.MemfileError)):
        cls = errors.MemfileError
    exc = cls.__new__(cls)
    Exception.__init__(exc, result["message"])
    vars(exc).update(result.get("fields", {}))
    raise exc


def leftovers(folder: Path) -> list[tuple[str, str]]:
    """(file name, what it is) of every queue file no running process will ever take: requests and claims
    of killed processes, results nobody came for within `STALE_RESULT`, and anything else older than
    `CUT_OFF` (a write that was cut off; a newer one may be a request being written now)."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    found = []
    now = time.time()
    for name in names:
        stem, _, state = name.rpartition(".")
        if state in ("req", "claimed") and not _alive(stem):
            found.append((name, "a store asked by a process that was killed before it heard back; never made"))
        elif state == "done" and _older(folder / name, now - STALE_RESULT):
            found.append((name, "the result of a store whose process was killed before it read it"))
        elif state not in ("req", "claimed", "done") and _older(folder / name, now - CUT_OFF):
            found.append((name, "not a queue file (a write that was cut off)"))
    return found


def sweep(folder: Path) -> list[str]:
    """Remove the `leftovers`, for a caller holding the writer lock; the names removed."""
    removed = []
    for name, _ in leftovers(folder):
        (folder / name).unlink(missing_ok=True)
        removed.append(name)
    return removed


def _alive(name: str) -> bool:
    """Whether the process that queued the request `name` (`TIME-PID-RANDOM`) still runs."""
    try:
        os.kill(int(name.split("-")[1]), 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


def _older(path: Path, moment: float) -> bool:
    try:
        return path.stat().st_mtime < moment
    except FileNotFoundError:
        return False
