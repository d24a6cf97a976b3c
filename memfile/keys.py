"""The credentials of `memfile serve`: Mind Keys (an agent's, bound to one mind) and a person's tokens.

A token (`mfk_<id>_<secret>` for a Mind Key, `mfp_<id>_<secret>` for a person) is shown once and never
stored: the keys file keeps its SHA-256 beside its public id, label, kind, vault and mind. The file lives
outside every vault (default `$XDG_CONFIG_HOME/memfile/keys.toml`, mode 0600); one other users may read
or write, one memfile did not write, or one inside a vault is refused with the fix, never half-read.
Writes replace it atomically under an flock on a sibling `.lock` file.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import re
import secrets
import stat
import string
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from .config import find_vault, load_config, select_mind, toml_string
from .errors import Conflict, InvalidInput, NotFound, Refused
from .files import atomic_write
from .model import LABEL_PATTERN, LABEL_RULE, format_datetime, utc_now
from .paths import MIND_PATTERN, MIND_RULE, validate_mind

AGENT, PERSON = "agent", "person"
KINDS = (AGENT, PERSON)
#: A token's prefix by kind: the fixed start lets a scanner recognise memfile's own keys.
PREFIX = {AGENT: "mfk", PERSON: "mfp"}
#: The environment variable naming the keys file (before the XDG default).
KEYS_ENV = "MEMFILE_KEYS"

ID_LENGTH = 8
_ID_ALPHABET = string.ascii_lowercase + string.digits
ID_PATTERN = re.compile(r"[a-z0-9]{8}")
#: prefix, id, secret (`secrets.token_urlsafe(32)`: 43 characters of the URL-safe base64 alphabet).
_TOKEN = re.compile(r"(mf[kp])_([a-z0-9]{8})_([A-Za-z0-9_-]{43})")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
#: An entry's fields, in the order they are written.
_FIELDS = ("label", "kind", "vault", "mind", "created_at", "sha256")
#: The most a keys file may hold (a key takes about 250 bytes).
MAX_KEYS_BYTES = 1024 * 1024

_HEADER = (
    "# memfile keys: the credentials of `memfile serve`, written by `memfile key add|revoke`.\n"
    "# Only hashes are kept; a token is shown once, when it is made. Keep this file private (mode 0600).\n"
)


@dataclass(frozen=True)
class Key:
    """One credential, as `memfile key list` shows it: never its hash, never its token.

    Attributes:
        id: public, 8 characters [a-z0-9]; the token's middle part.
        label: the name a person gave it; each commit made with it carries `Memfile-Key: LABEL`.
        kind: AGENT (a Mind Key) or PERSON (a person's token).
        vault: the resolved root of the vault the key belongs to.
        mind: an agent key's one mind; None for a person (who reaches every mind).
        created_at: ISO 8601 UTC.
    """

    id: str
    label: str
    kind: str
    vault: str
    mind: str | None
    created_at: str

    def to_dict(self) -> dict:
        return asdict(self)


class InvalidKeysFile(InvalidInput):
    """The keys file cannot be used: not TOML, not a file, or an entry that is not what memfile writes."""

    def __init__(self, path: Path, reason: str, *, line: int | None = None) -> None:
        super().__init__("keys file", str(path), "a keys file written by memfile key add", reason=reason)
        self.path = str(path)
        where = f"{path}:{line}" if line else str(path)
        self.args = (
            f"invalid keys file {where}: {reason}; fix it by hand, or move it away and make the keys "
            f"again with: memfile key add",
        )


def default_keys_path() -> Path:
    """`$MEMFILE_KEYS`, else `$XDG_CONFIG_HOME/memfile/keys.toml`, else `~/.config/memfile/keys.toml`.

    A relative XDG_CONFIG_HOME is ignored, as the XDG specification asks.
    """
    given = os.environ.get(KEYS_ENV)
    if given:
        return Path(given).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config_home) if os.path.isabs(config_home) else Path.home() / ".config"
    return base / "memfile" / "keys.toml"


def validate_label(label: object) -> str:
    """A key's label as given.

    Raises:
        InvalidInput: not 1-64 characters of LABEL_RULE (the reason names the first problem).
    """
    if isinstance(label, str) and LABEL_PATTERN.fullmatch(label):
        return label
    if not isinstance(label, str):
        reason = "it is not text"
    elif not label:
        reason = "it is empty"
    elif len(label) > 64:
        reason = f"it is {len(label)} characters long"
    else:
        bad = next((c for c in label if not re.fullmatch(r"[A-Za-z0-9._-]", c)), None)
        names = {"\n": "a line break", "\r": "a line break", ":": "a colon", " ": "a space", "\t": "a tab"}
        reason = f"it holds {names.get(bad, repr(bad))}" if bad is not None else f"it starts with {label[0]!r}"
    raise InvalidInput("key name", label, LABEL_RULE, reason=reason)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _resolved(vault: Path | str) -> str:
    return str(Path(vault).expanduser().resolve())


@dataclass(frozen=True)
class _Entry:
    key: Key
    sha256: str


class KeyStore:
    """The keys file: add, list, revoke and check credentials.

    Reads are cached by the file's stat (a revoke or an add by another process is seen at the next
    call); writes re-read the file under its lock.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_keys_path()
        self._cached: tuple[tuple[int, ...], dict[str, _Entry]] | None = None

    def add(self, kind: str, label: str, vault: Path, mind: str | None = None) -> tuple[Key, str]:
        """Make a credential for `vault` and return it with its token (the only time the token exists).

        Args:
            kind: AGENT (a Mind Key for `mind`) or PERSON (a person's token, for every mind).
            label: its name (LABEL_RULE), unique among the vault's keys.
            vault: the vault folder; agent keys also need an existing mind of it.

        Raises:
            InvalidInput: a bad kind or label, a mind missing for an agent or given for a person.
            NotAVault: `vault` is not a vault. NotFound: the mind does not exist (the message names the minds).
            Conflict: the vault already has a key of that label.
            Refused: the keys file is inside the vault; see also `list`. InvalidKeysFile: see `list`.
        """
        if kind not in KINDS:
            raise InvalidInput("key kind", kind, KINDS)
        label = validate_label(label)
        root = find_vault(vault)
        if kind == AGENT:
            if mind is None:
                raise InvalidInput("mind", None, "the mind a Mind Key is for (--mind NAME)")
            mind = select_mind(root, load_config(root), validate_mind(mind))
        elif mind is not None:
            raise InvalidInput("mind", mind, "no mind (--person): a person's token reaches every mind")
        where = str(root)
        try:
            where.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                "vault", where, "a vault whose path is UTF-8", reason="its path holds bytes that are not UTF-8"
            ) from None
        self._check_outside(where)
        with self._locked():
            entries = self._read()
            for entry in entries.values():
                if entry.key.vault == where and entry.key.label == label:
                    raise Conflict(
                        f"the vault {where} already has a key named {label!r} (id {entry.key.id}); pick another "
                        f"--name, or revoke it first: memfile key revoke {entry.key.id}"
                    )
            key_id = _new_id(entries)
            token = f"{PREFIX[kind]}_{key_id}_{secrets.token_urlsafe(32)}"
            key = Key(key_id, label, kind, where, mind, format_datetime(utc_now()))
            entries[key_id] = _Entry(key, _digest(token))
            self._write(entries)
        return key, token

    def list(self, vault: Path | None = None) -> list[Key]:
        """The keys of `vault` (every key when None), oldest first.

        Raises:
            Refused: other users may read or write the keys file (the message gives the chmod), or it
                is inside `vault` or a vault one of its keys belongs to.
            InvalidKeysFile: it is not a file, not TOML, or holds an entry memfile did not write.
        """
        where = _resolved(vault) if vault is not None else None
        if where is not None:
            self._check_outside(where)
        keys = [e.key for e in self._entries().values() if where is None or e.key.vault == where]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    def revoke(self, key_id: str) -> Key:
        """Remove a key from the file; its token stops working at the next request.

        Raises:
            InvalidInput: `key_id` is not an id (say a whole token was given).
            NotFound: no key has that id. Refused / InvalidKeysFile: see `list`.
        """
        if not isinstance(key_id, str) or not ID_PATTERN.fullmatch(key_id):
            pasted = isinstance(key_id, str) and key_id.startswith(tuple(f"{p}_" for p in PREFIX.values()))
            reason = "that is a token, which should stay secret; pass its id" if pasted else ""
            raise InvalidInput(
                "key id",
                "(a token)" if pasted else key_id,
                "the 8-character id shown by memfile key list",
                reason=reason,
            )
        with self._locked():
            entries = self._read()
            entry = entries.pop(key_id, None)
            if entry is None:
                raise NotFound(f"no key has the id {key_id!r} in {self.path}; see the ids with: memfile key list")
            self._write(entries)
        return entry.key

    def authenticate(self, token: str | None, vault: Path) -> Key | None:
        """The key `token` belongs to, if it is a live key of `vault`; None for anything else.

        None for no token, a malformed one, an unknown id, a wrong secret, a revoked key or a key of
        another vault. The hashes are compared in constant time; the token is neither kept nor logged.

        Raises:
            Refused / InvalidKeysFile: the keys file cannot be trusted (see `list`): no key is accepted.
        """
        match = _TOKEN.fullmatch(token) if isinstance(token, str) else None
        if match is None:
            return None
        where = _resolved(vault)
        self._check_outside(where)
        entry = self._entries().get(match[2])
        if entry is None or not hmac.compare_digest(entry.sha256, _digest(match[0])):
            return None
        return entry.key if entry.key.vault == where else None

    def has_keys(self, vault: Path) -> bool:
        """Whether `vault` has at least one key (`memfile serve --allow-remote` needs one)."""
        return bool(self.list(vault))

    # The file.

    def _check_outside(self, vault: str) -> None:
        """The keys file must not be inside the vault `vault` (resolved): a vault is pushed and cloned, and
        its working tree goes into the next hand-edit commit or `git add -A`, hashes and labels with it.

        Raises:
            Refused: it is (its symbolic links followed).
        """
        root = Path(vault)
        resolved = self.path.resolve()
        if resolved == root or root in resolved.parents:
            raise Refused(
                f"the keys file {self.path} is inside the vault {root}, whose files go into git and are pushed "
                f"and cloned; no key is read from it: move it outside the vault, and pass --keys FILE or set "
                f"{KEYS_ENV}"
            )

    def _entries(self) -> dict[str, _Entry]:
        """The file's entries, parsed again only when its stat changed."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InvalidKeysFile(self.path, f"it cannot be read: {exc.strerror}") from None
        signature = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)
        if self._cached is not None and self._cached[0] == signature:
            return self._cached[1]
        entries = self._read()
        self._cached = (signature, entries)
        return entries

    def _read(self) -> dict[str, _Entry]:
        """Read and check the whole file ({} when there is none); never blocks on a FIFO nor reads a huge file."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            reason = "it is a folder" if os.path.isdir(self.path) else f"it cannot be read: {exc.strerror}"
            raise InvalidKeysFile(self.path, reason) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidKeysFile(self.path, "it is not a regular file")
            if info.st_mode & 0o077:
                raise Refused(
                    f"the keys file {self.path} may be read or written by other users "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}); no key is accepted until you fix it "
                    f"with: chmod 600 {self.path}"
                )
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(MAX_KEYS_BYTES + 1)
        except OSError as exc:
            raise InvalidKeysFile(self.path, f"it cannot be read: {exc.strerror}") from None
        finally:
            os.close(fd)
        if len(data) > MAX_KEYS_BYTES:
            raise InvalidKeysFile(self.path, f"it is larger than {MAX_KEYS_BYTES // 1024} KB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidKeysFile(self.path, "it is not UTF-8 text", line=data[: exc.start].count(b"\n") + 1) from None
        entries = _parse(self.path, text)
        for vault in {entry.key.vault for entry in entries.values()}:
            self._check_outside(vault)
        return entries

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the flock of `FILE.lock` (made 0600, its folder 0700 when missing) while the file is changed."""
        folder = self.path.parent
        lock = folder / (self.path.name + ".lock")
        try:
            if not folder.is_dir():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOCTTY, 0o600)
        except OSError as exc:
            raise InvalidInput(
                "keys file",
                str(self.path),
                "a file in a folder you can write (--keys FILE, or MEMFILE_KEYS)",
                reason=f"{exc.filename or folder}: {exc.strerror}",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for milliseconds; a killed holder releases it at once
            yield
        finally:
            os.close(fd)

    def _write(self, entries: dict[str, _Entry]) -> None:
        """Replace the file with `entries`, atomically, mode 0600."""
        atomic_write(self.path, _render(entries).encode("utf-8"), mode=0o600)
        self._cached = None


def _new_id(entries: dict[str, _Entry]) -> str:
    while True:
        key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(ID_LENGTH))
        if key_id not in entries:
            return key_id


def _render(entries: dict[str, _Entry]) -> str:
    parts = [_HEADER]
    for key_id in sorted(entries, key=lambda i: (entries[i].key.created_at, i)):
        fields = asdict(entries[key_id].key) | {"sha256": entries[key_id].sha256}
        lines = [f"{name} = {toml_string(fields[name])}" for name in _FIELDS if fields[name] is not None]
        parts.append("\n".join([f"\n[keys.{key_id}]", *lines]) + "\n")
    return "".join(parts)


def _parse(path: Path, text: str) -> dict[str, _Entry]:
    """The entries of a keys file's text, each checked: anything memfile would not write is refused."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidKeysFile(path, f"it is not valid TOML ({exc})") from None
    except (RecursionError, ValueError):
        raise InvalidKeysFile(path, "it is not valid TOML") from None
    unknown = sorted(set(data) - {"keys"})
    if unknown:
        raise InvalidKeysFile(path, f"unknown top-level entries {', '.join(unknown)} (only [keys.ID] tables)")
    table = data.get("keys", {})
    if not isinstance(table, dict):
        raise InvalidKeysFile(path, "`keys` is not a table of [keys.ID] entries")
    return {key_id: _parse_entry(path, key_id, entry) for key_id, entry in table.items()}


def _parse_entry(path: Path, key_id: str, entry: object) -> _Entry:
    def bad(reason: str) -> InvalidKeysFile:
        return InvalidKeysFile(path, f"[keys.{key_id}] {reason}")

    if not ID_PATTERN.fullmatch(key_id):
        raise bad(f"has an id that is not {ID_LENGTH} characters a-z, 0-9")
    if not isinstance(entry, dict):
        raise bad("is not a table")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise bad(f"has unknown fields: {', '.join(unknown)}")
    missing = sorted(set(_FIELDS) - {"mind"} - set(entry))
    if missing:
        raise bad(f"lacks {', '.join(missing)}")
    wrong = sorted(name for name, value in entry.items() if not isinstance(value, str))
    if wrong:
        raise bad(f"has {', '.join(wrong)} that {'is' if len(wrong) == 1 else 'are'} not text")
    if not LABEL_PATTERN.fullmatch(entry["label"]):
        raise bad(f"has the label {entry['label']!r}, allowed: {LABEL_RULE}")
    kind = entry["kind"]
    if kind not in KINDS:
        raise bad(f"has the kind {kind!r}, allowed: {', '.join(KINDS)}")
    mind = entry.get("mind")
    if kind == AGENT and (mind is None or not MIND_PATTERN.fullmatch(mind)):
        raise bad(f"is an agent key without a valid mind ({MIND_RULE})")
    if kind == PERSON and mind is not None:
        raise bad("is a person's token with a mind (a person's token reaches every mind)")
    if not os.path.isabs(entry["vault"]):
        raise bad(f"has the vault {entry['vault']!r}, which is not an absolute path")
    if not _SHA256_HEX.fullmatch(entry["sha256"]):
        raise bad("has a sha256 that is not 64 lowercase hex digits")
    try:
        datetime.fromisoformat(entry["created_at"])
    except ValueError:
        raise bad(f"has the created_at {entry['created_at']!r}, which is not an ISO 8601 date") from None
    key = Key(key_id, entry["label"], kind, entry["vault"], mind, entry["created_at"])
    return _Entry(key, entry["sha256"])
