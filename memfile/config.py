"""memfile.toml and the environment, read in one place.

Finding the vault: `--vault`, else `MEMFILE_VAULT`, else the nearest parent
folder holding `memfile.toml`. Choosing the mind: `--mind`, else
`MEMFILE_MIND`, else `default_mind`, else the only mind folder.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidInput, MemfileError, NotAVault, NotFound
from .model import Source, parse_source
from .paths import MIND_PATTERN, mind_dirs, validate_mind

CONFIG_NAME = "memfile.toml"
STATE_DIR = ".memfile"
DEFAULT_AUTHOR = ("memfile", "memfile@localhost")
DEFAULT_LOCK_TIMEOUT = 10.0


class AmbiguousMind(MemfileError):
    """A vault with several minds and no choice among them."""

    exit_code = InvalidInput.exit_code


@dataclass(frozen=True)
class Config:
    """The settings of one vault (defaults when memfile.toml is absent)."""

    default_mind: str | None = None
    mind_names: dict[str, str] = field(default_factory=dict)
    author_name: str = DEFAULT_AUTHOR[0]
    author_email: str = DEFAULT_AUTHOR[1]
    recall_budget: int | None = None
    half_life_days: float = 30.0
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    autosync: bool = False  # writes push, `watch` pulls, at most every sync_interval seconds
    sync_remote: str = "origin"
    sync_interval: float = 300.0

    def display_name(self, mind: str) -> str:
        return self.mind_names.get(mind, mind)


def _require(table: dict, name: str, kind: type | tuple[type, ...], allowed: str, where: str) -> object:
    value = table.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is not bool):
        raise InvalidInput(f"{where}{name} in {CONFIG_NAME}", value, allowed)
    return value


def load_config(root: Path) -> Config:
    """Read `root/memfile.toml`; a missing file gives the defaults.

    Raises:
        InvalidInput: the file is not valid TOML or a setting has the wrong type.
    """
    path = root / CONFIG_NAME
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return Config()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(CONFIG_NAME, str(path), "valid TOML", reason=str(exc)) from None
    minds = data.get("minds", {})
    if not isinstance(minds, dict):
        raise InvalidInput(f"minds in {CONFIG_NAME}", minds, "tables such as [minds.michael]")
    names = {}
    for mind, table in minds.items():
        name = table.get("name") if isinstance(table, dict) else None
        if isinstance(name, str) and name.strip():
            names[mind] = name.strip()
    git = data.get("git", {}) if isinstance(data.get("git"), dict) else {}
    recall = data.get("recall", {}) if isinstance(data.get("recall"), dict) else {}
    default_mind = _require(data, "default_mind", str, "a mind folder name", "")
    author_name = _require(git, "author_name", str, "a name", "git.") or DEFAULT_AUTHOR[0]
    author_email = _require(git, "author_email", str, "an e-mail address", "git.") or DEFAULT_AUTHOR[1]
    budget = _require(recall, "budget", int, "a whole number of tokens (0 = no limit)", "recall.")
    half_life = _require(recall, "half_life_days", (int, float), "a number of days", "recall.")
    timeout = _require(data, "lock_timeout", (int, float), "a number of seconds", "")
    sync = data.get("sync", {}) if isinstance(data.get("sync"), dict) else {}
    autosync = _require(sync, "autosync", bool, "true or false", "sync.")
    remote = _require(sync, "remote", str, "a git remote name", "sync.")
    interval = _require(sync, "interval", (int, float), "a number of seconds (at least 10)", "sync.")
    if interval is not None and interval < 10:  # type: ignore[operator]
        raise InvalidInput(f"sync.interval in {CONFIG_NAME}", interval, "a number of seconds (at least 10)")
    return Config(
        default_mind=default_mind,  # type: ignore[arg-type]
        mind_names=names,
        author_name=str(author_name),
        author_email=str(author_email),
        recall_budget=int(budget) if budget else None,  # type: ignore[arg-type]
        half_life_days=float(half_life) if half_life else 30.0,  # type: ignore[arg-type]
        lock_timeout=float(timeout) if timeout else DEFAULT_LOCK_TIMEOUT,  # type: ignore[arg-type]
        autosync=bool(autosync),
        sync_remote=str(remote or "origin"),
        sync_interval=float(interval) if interval else 300.0,  # type: ignore[arg-type]
    )


def find_vault(explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """The vault root: explicit path, else `MEMFILE_VAULT`, else the nearest `memfile.toml` upwards.

    Raises:
        NotAVault: nothing was given and no parent folder holds memfile.toml,
            or the given folder does not exist.
    """
    given = explicit if explicit not in (None, "") else os.environ.get("MEMFILE_VAULT") or None
    if given is not None:
        root = Path(given).expanduser()
        if not root.is_dir():
            what = "is not a folder" if root.exists() else "does not exist"
            raise NotAVault(f"vault folder {str(root)!r} {what}; create a vault with: memfile init PATH")
        root = root.resolve()
        if not (root / CONFIG_NAME).is_file():
            for parent in root.parents:
                if (parent / CONFIG_NAME).is_file():
                    raise NotAVault(f"{root} is a folder inside the vault {parent}; pass --vault {parent}")
        return root
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise NotAVault(
        f"no memfile vault here: no {CONFIG_NAME} in {here} or any parent folder; "
        "pass --vault PATH, set MEMFILE_VAULT, or create one with: memfile init PATH"
    )


def select_mind(root: Path, config: Config, explicit: str | None = None) -> str:
    """The mind to work in, by the rules in the module docstring.

    Raises:
        InvalidInput: the name is not a valid mind name.
        NotFound: the chosen mind folder does not exist, or the vault has no mind.
        AmbiguousMind: several minds and nothing chooses one.
    """
    chosen = explicit or os.environ.get("MEMFILE_MIND") or config.default_mind
    existing = [m for m in mind_dirs(root) if MIND_PATTERN.fullmatch(m)]
    if chosen:
        validate_mind(chosen)
        if (root / chosen).is_symlink():
            raise InvalidInput(
                "mind", chosen, "a real folder in the vault",
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
    value = explicit or os.environ.get("MEMFILE_SOURCE") or Source.USER
    return parse_source(value, "MEMFILE_SOURCE" if explicit is None else "source")


def render_config(mind: str, name: str | None) -> str:
    """The memfile.toml written by `memfile init`."""
    lines = [
        "# memfile vault settings: see the README section \"memfile.toml\"",
        f'default_mind = "{mind}"',
        "",
        f"[minds.{mind}]",
    ]
    if name:
        lines.append("name = " + _toml_string(name))
    lines += [
        "",
        "# [git]",
        '# author_name = "memfile"',
        '# author_email = "memfile@localhost"',
        "",
        "# [recall]",
        "# budget = 0            # default token budget of recall; 0 = no limit",
        "# half_life_days = 30   # recency half-life of recall --query",
        "",
        "# [sync]",
        "# autosync = false      # writes push and `memfile watch` pulls, at most every interval",
        '# remote = "origin"',
        "# interval = 300        # seconds",
        "",
    ]
    return "\n".join(lines)


def mind_section(mind: str, name: str | None) -> str:
    """The lines appended to an existing memfile.toml for a new mind."""
    text = f"\n[minds.{mind}]\n"
    return text + ("name = " + _toml_string(name) + "\n" if name else "")


def _toml_string(value: str) -> str:
    escaped = re.sub(r'(["\\])', r"\\\1", value)
    return '"' + re.sub(r"[\x00-\x1f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'
