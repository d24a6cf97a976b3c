"""Claude's memory tool for the Anthropic SDK, backed by a vault (the `memfile-vault[anthropic]` extra).

`MemfileMemoryTool(vault)` is the SDK's `BetaAbstractMemoryTool` running
`memfile.memory_tool.MemoryToolBackend`; a refused command raises the SDK's `ToolError`, which the tool
runner hands back to the model. The SDK is imported here only.
"""

from __future__ import annotations

from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import BetaCacheControlEphemeralParam

from .memory_tool import MAX_WRITE_BYTES, MemoryToolBackend, MemoryToolError
from .vault import Vault


class MemfileMemoryTool(BetaAbstractMemoryTool):
    """The memory tool (`{"type": "memory_20250818", "name": "memory"}`) over one mind of a vault.

    Args:
        vault: the vault, bound to the mind `/memories` stands for; commands run as `agent`.
        cache_control: the SDK's prompt-caching setting for the tool definition.
        max_write_bytes: the largest file a command may write (64 KiB).
    """

    def __init__(
        self,
        vault: Vault,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        max_write_bytes: int = MAX_WRITE_BYTES,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.backend = MemoryToolBackend(vault, max_write_bytes=max_write_bytes)

    def call(self, input: object) -> str:
        """Run one tool call's input as the model sent it: a malformed one (not an object, no or an unknown
        command, arguments of the wrong type) is a ToolError with a sentence too, where the SDK's own `call`
        would fail taking it apart (AttributeError, NotImplementedError, which its runner logs as a crash)."""
        try:
            return self.backend.run(input)
        except MemoryToolError as exc:
            raise ToolError(str(exc)) from None

    def _run(self, command: Any) -> str:
        """One of the SDK's six commands (view, create, str_replace, insert, delete, rename), as `call` runs it."""
        return self.call(command.to_dict(exclude_none=True))

    # The SDK's abstract commands, each handed to the backend whole (it knows every command's arguments).
    view = create = str_replace = insert = delete = rename = _run
