"""The one exception tree of memfile.

Every error a user can cause is a `MemfileError` subclass that knows its exit
code (the public table in the README) and carries structured fields, so each
face (CLI, MCP) translates errors in exactly one place. `str(e)` is a full
sentence that ends with what to do next. A value a message quotes goes through `echo`, which masks
one that looks like a secret (`secretscan`, imported when a message quotes a value): the standard library
otherwise.

What to do next is said in the words of the face that answers (`Face`): an error
that names a command or an option carries a `hint` (a key of `HINTS`), and each
face ends the sentence with its own words for it (`MemfileError.said`): the
command line's commands and --options, the HTTP API's endpoints and fields, the
MCP tools and their arguments, the memory tool's commands. `str(e)` is the
command line's (the Python API's too).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_PROBLEMS = 5
EXIT_GIT = 6
EXIT_NOT_A_VAULT = 7
EXIT_SYNC_CONFLICTS = 8

#: The public exit-code table: code -> meaning. Pinned by a test and the README.
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_UNEXPECTED: "unexpected error (a bug: please report it, rerun with --debug)",
    EXIT_BAD_INPUT: "bad input: an invalid argument, option, REF or file content",
    EXIT_NOT_FOUND: "not found: no memory or mind matches",
    EXIT_CONFLICT: "conflict: the vault is locked by another writer or a file is in the way",
    EXIT_PROBLEMS: "a check found problems",
    EXIT_GIT: "git failed",
    EXIT_NOT_A_VAULT: "not a vault: no memfile vault could be found",
    EXIT_SYNC_CONFLICTS: "sync done, but memories changed on both sides wait for memfile resolve",
}


class Face(Enum):
    """Who answers with a message, and so whose words say what to do next."""

    CLI = "cli"  # commands and --options: `memfile list`, `--allow-secret`
    HTTP = "http"  # endpoints and fields: `GET /memory/search`, `allow_secret`
    MCP = "mcp"  # tools and their arguments, or what to ask the user
    MEMORY_TOOL = "memory tool"  # Claude's memory tool: its commands (view, create, ...), or what to ask the user


@dataclass(frozen=True)
class Hint:
    """What to do next, in each face's words; the memory tool says the MCP tools' words unless it has its own.
    `{0}`, `{1}` in a text are the error's `hint_values` (a REF, an id)."""

    cli: str
    http: str
    mcp: str
    memory_tool: str = ""

    def say(self, face: Face, values: Iterable[str] = ()) -> str:
        if face is Face.MEMORY_TOOL:
            words = self.memory_tool or self.mcp
        else:
            words = {Face.CLI: self.cli, Face.HTTP: self.http, Face.MCP: self.mcp}[face]
        return words.format(*values)


#: The hints errors carry, by name (a name, so an error keeps its hint through the store queue's result file).
HINTS = {
    "list": Hint(
        cli="list them with: memfile list",
        http="find it with GET /memory/search?q=WORDS",
        mcp="find it with the `search` tool, or see them all with the `list` tool",
        memory_tool="see the memory files with view /memories",
    ),
    "allow_secret": Hint(
        cli="if it is not a secret, a person may store it with --allow-secret, or add a regex that matches it "
        'to allow = [...] under [secrets] in memfile.toml; policy = "warn" there only warns',
        http="if it is not a secret, a person's token may send it again with allow_secret set to true, or a "
        'person adds a regex that matches it to allow = [...] under [secrets] in memfile.toml; policy = "warn" '
        "there only warns",
        mcp="if it is not a secret, ask the user: a person may store it, or add a regex that matches it to "
        "allow = [...] under [secrets] in memfile.toml",
    ),
    "raise_critical": Hint(
        cli="a person can raise it with: memfile store CATEGORY KEY CONTENT --priority critical",
        http='a person\'s token can raise it with PUT /memory/{{id}} and "priority": "critical"',
        mcp="ask the user if it must be critical",
    ),
    "forget_by_person": Hint(
        cli="ask the user to forget it (memfile forget {0})",
        http="ask a person, whose token can forget it: DELETE /memory/{1}",
        mcp="ask the user to forget it",
    ),
    "verify_by_person": Hint(
        cli="ask the user to run: memfile verify {0}",
        http="ask a person, whose token can verify it: POST /memory/{{id}}/verify",
        mcp="ask the user to verify it",
    ),
    "mend_by_hand": Hint(
        cli="fix the file, see: memfile doctor",
        http="a person must mend the file by hand (the vault's check names the problem)",
        mcp="ask the user to check the vault",
    ),
}


def masked(text: str) -> str:
    """`text`, or its masked form (`ghp_…3f9a`, `secretscan.mask`) when it looks like it holds a secret
    (`secretscan.scan`): what a message or a record may repeat of a value someone gave."""
    from .secretscan import mask, scan

    return mask(text) if scan(text) else text


def echo(value: object) -> str:
    """How a message quotes a value given by a user, an agent or a file: its repr, masked when it looks like
    it holds a secret (a token put in the wrong field is not sent back)."""
    return repr(masked(value)) if isinstance(value, str) else masked(repr(value))


class MemfileError(Exception):
    """Root of all memfile errors.

    Attributes:
        hint: the name of the HINTS entry that ends the message, or None (the message says it all).
        hint_values: what the hint's words name (a REF, an id).
    """

    exit_code = EXIT_UNEXPECTED
    hint: str | None = None
    hint_values: list[str] = []  # noqa: RUF012 - never changed: each error sets its own

    def __init__(self, message: str = "", *, hint: str | None = None, hint_values: Iterable[str] = ()) -> None:
        self.message, self.hint, self.hint_values = message, hint, list(hint_values)
        super().__init__(self.said(Face.CLI))

    def said(self, face: Face) -> str:
        """The message as `face` answers with it: its hint in that face's words."""
        message = getattr(self, "message", str(self))  # the store queue makes errors without __init__
        if self.hint is None:
            return message
        return f"{message}; {HINTS[self.hint].say(face, self.hint_values)}"


class InvalidInput(MemfileError):
    """A value given by a user, an agent or a file is not allowed."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        field: str,
        value: object,
        allowed: str | Iterable[str],
        *,
        reason: str = "",
    ) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed if isinstance(allowed, str) else ", ".join(allowed)
        self.reason = reason
        why = f" ({reason})" if reason else ""
        if value is None:  # nothing was given: never show Python's None to a person
            super().__init__(f"no {field} was given{why}; pass {self.allowed}.")
        else:
            super().__init__(f"invalid {field} {echo(value)}{why}; allowed: {self.allowed}.")


class Refused(MemfileError):
    """A request that is well-formed but not permitted (e.g. an agent verifying)."""

    exit_code = EXIT_BAD_INPUT


class AmbiguousRef(MemfileError):
    """A REF matches more than one memory."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self, ref: str, candidates: list[str], hint: str = "use one of these category/key forms or an id"
    ) -> None:
        self.ref = ref
        self.candidates = candidates
        super().__init__(f"REF {echo(ref)} matches {len(candidates)} memories: {', '.join(candidates)}; {hint}.")


class FileParseError(MemfileError):
    """A memory file on disk cannot be read; it is reported and left untouched."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}; fix the file by hand (memfile never changes it).")


class NotFound(MemfileError):
    """No memory, mind or file matches what was asked for."""

    exit_code = EXIT_NOT_FOUND


class Conflict(MemfileError):
    """Something is in the way of a write (a file, an existing mind)."""

    exit_code = EXIT_CONFLICT


class LockTimeout(Conflict):
    """Another process held the vault's writer lock for too long."""

    def __init__(self, lock_path: str, timeout: float) -> None:
        self.lock_path = lock_path
        self.timeout = timeout
        super().__init__(
            f"the vault is busy: another memfile process held the writer lock "
            f"{lock_path} for more than {timeout:g} s; try again in a moment."
        )


class GitError(MemfileError):
    """A git command failed."""

    exit_code = EXIT_GIT


class NotAVault(MemfileError):
    """No vault could be found or selected."""

    exit_code = EXIT_NOT_A_VAULT
