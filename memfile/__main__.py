"""The `memfile` command and `python -m memfile`: the command line (memfile.cli) as a process of its own.

A read command goes to the vault's running server first (memfile.cli_client: only the standard library
is imported until it is known that no server answers); else it runs here, and then leaves a resident
reader behind for the next ones (`_leave_resident`).

Its speed tricks for a whole process are the only ones outside memfile/index/: a command that
ends soon runs without the cyclic garbage collector, and a read-only one ends without the
interpreter's teardown (`MEMFILE_PLAIN=1` turns both off).
"""

from __future__ import annotations

import gc
import os
import sys

from . import cli_client
from .cli_client import answer

#: Read-only commands: once their output is flushed, the process ends without the interpreter's
#: teardown (freeing a recall's 10,000 memories one by one takes 20-40 ms). A read has committed
#: or closed whatever it wrote (the catalog's digest, the recall record) by then.
QUICK_EXIT = frozenset({"search", "recall", "list", "show", "by-tag", "tags", "stats", "expiring", "last-recall"})


#: Commands that run until stopped: they keep Python's cyclic garbage collector.
LONG_RUNNING = frozenset({"watch", "mcp", "serve"})


def _started(command: str | None) -> None:
    """A command that ends soon frees by reference counting; collecting cycles only costs it time
    (4 % of `memfile list --json` at 2,000 memories)."""
    from .config import plain

    if command not in LONG_RUNNING and not plain("gc"):
        gc.disable()


def run() -> None:
    """The answer of the vault's server, when one answers for this command; else `main`, and a
    read-only command (QUICK_EXIT) then ends the process at once, with the exit code `main` gave,
    after flushing its output (a speed trick: `MEMFILE_PLAIN=1` turns it off)."""
    served = answer(sys.argv[1:])
    if served is not None:
        sys.exit(served)
    from .cli import RUNNING, main
    from .config import plain

    RUNNING["started"] = _started
    try:
        main()
    except SystemExit as exc:
        _leave_resident()
        if RUNNING["command"] not in QUICK_EXIT or plain("quick_exit"):
            raise
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # the reader (say `| head`) went away: as in cli.MemfileGroup.invoke
            pass
        os._exit(code)


def _leave_resident() -> None:
    """After a read command that found no server for its vault: a resident reader for the next ones
    (cli_client.spawn_resident), unless MEMFILE_NO_RESIDENT=1 or `[cli] resident = false`. It never
    changes the command's output or exit code."""
    vault = cli_client.unserved
    if vault is None or os.environ.get(cli_client.NO_RESIDENT, "") not in ("", "0"):
        return
    from pathlib import Path

    from .config import load_config

    try:
        if load_config(Path(vault)).resident:
            cli_client.spawn_resident(vault)
    except Exception:  # noqa: BLE001, S110 - memfile.toml that cannot be used, no process: the command stands
        pass


if __name__ == "__main__":
    run()
