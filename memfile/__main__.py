"""The `memfile` command and `python -m memfile`: the command line (memfile.cli) as a process of its own.

A read command goes to the vault's running server first (memfile.cli_client: only the standard library
is imported until it is known that no server answers); else it runs here, and then leaves a resident
reader behind for the next ones (`_leave_resident`). Speed for a whole process comes from that resident
reader, not from tricks here (issue 40 removed the garbage-collector and quick-exit ones).
"""

from __future__ import annotations

import os
import sys

from . import cli_client
from .cli_client import answer


def run() -> None:
    """The answer of the vault's server, when one answers for this command; else `main`."""
    served = answer(sys.argv[1:])
    if served is not None:
        sys.exit(served)
    from .cli import main

    try:
        main()
    except SystemExit:
        _leave_resident()
        raise


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
