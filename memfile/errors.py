"""The one exception tree of memfile.

Every error a user can cause is a `MemfileError` subclass that knows its exit code (the public table
in the README) and carries structured fields. `str(e)` is a full sentence ending with what to do next;
an error naming a command carries a `hint` (a key of `HINTS`) that each face says in its own words
(`MemfileError.said`); `str(e)` is the command line's. A quoted value goes through `echo`, which masks
one that looks like a secret.
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
EXIT_EXTRACTOR = 9

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
    EXIT_EXTRACTOR: "the extractor failed: the model endpoint gave no usable answer; nothing was written",
}


class Face(Enum):
    """Who answers with a message, and so whose words say what to do next."""

    CLI = "cli"  # commands and --options: `memfile list`, `--allow-secret`
    HTTP = "http"  # endpoints and fields: `GET /memory/search`, `allow_secret`
    MCP = "mcp"  # tools and their arguments, or what to ask the user
    MEMORY_TOOL = "memory tool"  # Claude's memory tool: its commands (view, create, ...), or what to ask the user
    CONSOLE = "console"  # a person in a browser: the console's pages and buttons


@dataclass(frozen=True)
class Hint:
    """What to do next, in each face's words; the memory tool says the MCP tools' words unless it has its own,
    the console the HTTP API's (what a person's token does) where no page or button does it.
    `{0}`, `{1}` in a text are the error's `hint_values` (a REF, an id)."""

    cli: str
    http: str
    mcp: str
    memory_tool: str = ""
    console: str = ""

    def say(self, face: Face, values: Iterable[str] = ()) -> str:
        own = getattr(self, face.name.lower())  # a field for each face, named after it
        return (own or (self.mcp if face is Face.MEMORY_TOOL else self.http)).format(*values)


#: The hints errors and notices carry, by name (a name, so either keeps its hint through the store queue's result file).
HINTS = {
    "list": Hint(
        cli="list them with: memfile list",
        http="find it with GET /memory/search?q=WORDS",
        mcp="find it with the `search` tool, or see them all with the `list` tool",
        memory_tool="see the memory files with view /memories",
        console="find it on the Memories page",
    ),
    "allow_secret": Hint(
        cli="if it is not a secret, a person may store it with --allow-secret, or add a regex that matches it "
        'to allow = [...] under [secrets] in memfile.toml; policy = "warn" there only warns',
        http="if it is not a secret, a person's token may send it again with allow_secret set to true, or a "
        'person adds a regex that matches it to allow = [...] under [secrets] in memfile.toml; policy = "warn" '
        "there only warns",
        mcp="if it is not a secret, ask the user: a person may store it, or add a regex that matches it to "
        "allow = [...] under [secrets] in memfile.toml",
        console="if it is not a secret, add a regex that matches it to allow = [...] under [secrets] in "
        'memfile.toml; policy = "warn" there only warns',
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
    "edit_out_secret": Hint(
        cli="revoke it where it was issued, then take it out with: memfile {1}edit {0}",
        http="revoke it where it was issued; a person takes it out of the memory's file",
        mcp="never repeat the value; tell the user, who can revoke it and edit it out",
        console="revoke it where it was issued, then take it out of the memory's file",
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
        console="mend the file by hand (Run doctor on the Health page names the problem)",
    ),
    "include_expired": Hint(
        cli="memfile list --include-expired shows it",
        http="GET /memory/search with include_expired finds it",
        mcp="store it again with a later `expires` to bring it back",
        console="the Memories page shows it with Show expired",
    ),
    "reactivate": Hint(
        cli="memfile reactivate {0} brings it back",
        http="a person brings it back with Reactivate on its page in the console",
        mcp="ask the user to bring it back",
        console="Reactivate on its page brings it back",
    ),
    "log": Hint(
        cli="see: memfile log",
        http="a person sees the vault's changes on the Audit log page of the console",
        mcp="ask the user to look at the history",
        console="see the Audit log page",
    ),
    "history": Hint(
        cli="see: memfile history {0}",
        http="see its versions with GET /memory/{{id}}/history",
        mcp="ask the user to look at its history",
        console="see its versions on its page",
    ),
    "restore_last": Hint(
        cli="restore its last version with: memfile restore {0}, or pick one from: memfile history {0}",
        http="its versions are at GET /memory/{{id}}/history; a person restores one on its page in the console",
        mcp="ask the user to restore it",
        console="restore its last version with Restore the last version on its page, or pick one there",
    ),
    "forget_first": Hint(
        cli="forget it first (git keeps it), with: memfile forget {0}",
        http="forget it first (git keeps it): DELETE /memory/{1}",
        mcp="forget it first (git keeps it) with the `forget` tool",
        console="forget it first (git keeps it) with Forget on its page",
    ),
    "sync_again": Hint(
        cli="run memfile sync again",
        http="a person syncs the vault again",
        mcp="ask the user to sync the vault",
    ),
    "resolve": Hint(
        cli="finish it with: memfile resolve {0} --ours|--theirs|--edit",
        http="a person resolves it on its page in the console",
        mcp="ask the user to resolve the conflict",
        console="resolve it on its page with Keep ours or Take theirs",
    ),
    "restore_by_person": Hint(
        cli="ask the user to restore it: memfile restore {0}",
        http="ask a person to restore it on its page in the console",
        mcp="ask the user to restore it",
    ),
}


def masked(text: str) -> str:
    """`text` with each secret in it masked where it stands (`deploy ghp_…3f9a`, `secretscan.redact`): what a
    message or a record may repeat of a value someone gave."""
    from .secretscan import redact

    return redact(text)


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
        return _with_hint(message, self.hint, self.hint_values, face)


def _with_hint(message: str, hint: str | None, values: Iterable[str], face: Face) -> str:
    return message if hint is None else f"{message}; {HINTS[hint].say(face, values)}"


class Notice(str):
    """What a call did that its caller should be told (`Vault.notices`, `StoreResult.notices`), when it ends with
    what to do next: a hint each face says in its own words (`told`). As a str it is the command line's words;
    a notice with nothing to do next is a plain str."""

    message: str
    hint: str
    hint_values: tuple[str, ...]

    def __new__(cls, message: str, hint: str, hint_values: Iterable[str] = ()) -> Notice:
        values = tuple(hint_values)
        notice = super().__new__(cls, _with_hint(message, hint, values, Face.CLI))
        notice.message, notice.hint, notice.hint_values = message, hint, values
        return notice

    def __getnewargs__(self) -> tuple[str, str, tuple[str, ...]]:  # type: ignore[override]  # copy and pickle
        return self.message, self.hint, self.hint_values


def told(notice: str, face: Face) -> str:
    """A notice as `face` tells it: a `Notice`'s hint in that face's words, a plain str as it is."""
    return _with_hint(notice.message, notice.hint, notice.hint_values, face) if isinstance(notice, Notice) else notice


class InvalidInput(MemfileError):
    """A value given by a user, an agent or a file is not allowed."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, field: str, value: object, allowed: str | Iterable[str], *, reason: str = "") -> None:
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


class Busy(Conflict):
    """Another process is at work on the vault (memfile's writer, a git command); the same call succeeds
    once it is done (HTTP 503 with Retry-After)."""


class LockTimeout(Busy):
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


class GitDiskFull(GitError):
    """git could not write for lack of disk space (nothing is wrong with git): exit 4, as any write on a
    full disk."""

    exit_code = EXIT_CONFLICT


class GitBusy(GitError, Busy):
    """A git command met a lock file another git holds (one started meanwhile): nothing was written, and
    the same call succeeds once that git is done (exit 4, HTTP 503 with Retry-After)."""

    exit_code = EXIT_CONFLICT


class NotAVault(MemfileError):
    """No vault could be found or selected."""

    exit_code = EXIT_NOT_A_VAULT


class ExtractorFailed(MemfileError):
    """The extractor endpoint (`[capture] endpoint`, `memfile.extractor.ChatEndpoint`) gave no usable answer:
    unreachable, too slow, an HTTP error, a redirect, too large, or not a chat completion. Nothing was
    written; the same call may succeed once the endpoint answers.

    Attributes:
        url: the endpoint, without user:password@ or query (never the key).
        status: the HTTP status it answered, or None (no answer).
        reason: what went wrong (the server's own error message cut short) and what to do.
    """

    exit_code = EXIT_EXTRACTOR

    def __init__(self, url: str, reason: str, *, status: int | None = None) -> None:
        self.url, self.status, self.reason = url, status, reason
        answered = f" answered HTTP {status}" if status is not None else ""
        super().__init__(f"the extractor endpoint {url}{answered}: {reason}; nothing was written")


class ExtractorNotConfigured(MemfileError):
    """No extractor can be made from memfile.toml's `[capture]` table (no endpoint or model, or the variable
    `api_key_env` names is not set); the message says how to configure one. Nothing was written."""

    exit_code = EXIT_BAD_INPUT
