"""The command line's `memfile serve`: the vault's one resident process (the HTTP API, /mcp)."""

from __future__ import annotations
