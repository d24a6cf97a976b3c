"""Claude's memory tool (`memory_20250818`) over one mind of a vault.

`MemoryToolBackend(vault).execute(command)` runs one command (`view`, `create`, `str_replace`,
`insert`, `delete`, `rename`) with `/memories` standing for the mind folder, as an agent, and returns
the text for the model, in the words of the Anthropic SDK's reference backend. memfile's rules come on
top: only `.md` files, an edit must leave a readable memory with the same identity, a verified or
critical memory is a person's, and each command is one commit. Whatever the input, the model gets a
sentence (`MemoryToolError`). Nothing here needs the SDK (memfile.anthropic_tool wraps it).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Mapping
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from . import fileformat
from .errors import Face, FileParseError, InvalidInput, MemfileError, masked
from .model import DEFAULT_CONFIDENCE, Category, Memory, Priority, Source, format_datetime, new_id, utc_now
from .paths import is_inside, safe_path
from .secretscan import SecretFound
from .vault import Vault

#: The folder the model sees: the mind folder.
ROOT = "/memories"
#: The most a command may write into one file (memfile's own 10 MB limit is for people).
MAX_WRITE_BYTES = 64 * 1024
#: The SDK's limits and formats.
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
#: The front-matter key a renamed memory carries: the id of the memory it was renamed from.
RENAMED_FROM = "renamed_from"
#: The longest file or folder name a path may hold, in UTF-8 bytes: a file system takes 255, and the
#: temporary file memfile writes beside a memory adds to its name.
MAX_NAME_BYTES = 200
#: The most folders a path may go down in /memories (memfile's own layout is one: <category>/<key>.md).
MAX_DEPTH = 16
#: The characters of a path a message repeats (a 4,000-character path is not sent back whole).
SHOWN_PATH = 120

LAYOUT = (
    "memories are Markdown files at /memories/<category>/<key>.md, where <category> is one of "
    + ", ".join(c.value for c in Category)
    + " and <key> is snake_case (lowercase letters, digits and _), for example /memories/preference/coffee.md"
)


class MemoryToolError(Exception):
    """A command the backend will not carry out; `str(e)` is the text to give the model as an error result
    (a lone surrogate the command held is written as its escape, so the text is always valid UTF-8)."""

    def __init__(self, message: str) -> None:
        super().__init__(message.encode("utf-8", "backslashreplace").decode("utf-8"))


@dataclass(frozen=True)
class _Target:
    """A tool path checked to lie in the mind: as given (masked if it looks like a secret), mind-relative (`""` for /memories), vault-relative."""

    given: str
    rel: str
    relpath: str
    full: Path


class MemoryToolBackend:
    """Executes the memory tool's commands on `vault`'s mind folder (what `/memories` stands for), as an
    agent (a vault acting as `user` is switched for each call); `max_write_bytes`: the largest file written."""

    def __init__(self, vault: Vault, *, max_write_bytes: int = MAX_WRITE_BYTES) -> None:
        self.vault = vault
        self.max_write_bytes = max_write_bytes

    def execute(self, command: object) -> str:
        """Run one command (the tool call's `input`, e.g. `{"command": "view", "path": "/memories"}`).

        Returns:
            The result text for the model; a refused command's text is the error message (as the
            SDK's ToolError texts), so the model's mistakes never raise. Use `run` to tell them apart.
        """
        try:
            return self.run(command)
        except MemoryToolError as exc:
            return str(exc)

    def run(self, command: object) -> str:
        """`execute`, raising MemoryToolError (with the text for the model) when the command is refused.

        Raises:
            MemoryToolError: a malformed command (not a mapping, no or an unknown `command`, an argument
                of the wrong type or holding a lone surrogate), a path outside /memories, too long, too
                deep or through a symlink loop, a memfile rule, the file system's refusal, or any
                MemfileError of the vault (a busy vault included), in this tool's words (`Face.MEMORY_TOOL`).
        """
        if not isinstance(command, Mapping):
            raise MemoryToolError(
                f"The memory tool's input must be an object with a `command`, got: {_cut(repr(command))}"
            )
        name = command.get("command")
        if name is None:
            raise MemoryToolError(f"The memory tool's input has no `command`: one of {', '.join(COMMANDS)}")
        if not isinstance(name, str) or name not in COMMANDS:
            shown = name if isinstance(name, str) else repr(name)
            raise MemoryToolError(
                f"Unknown command: {_cut(shown)}; the memory tool's commands are {', '.join(COMMANDS)}"
            )
        handler: Callable[[Mapping[str, Any]], str] = getattr(self, f"_{name}")
        # an agent's vault keeps its served credential's label (Vault.acting_as sets it)
        agent = nullcontext() if self.vault.actor is Source.AGENT else self.vault.acting_as(Source.AGENT)
        try:
            with agent:
                return handler(command)
        except SecretFound as exc:  # named as the model names the file
            where = _shown(exc.what) if exc.what.endswith(".md") else exc.what
            raise MemoryToolError(SecretFound(exc.findings, where).said(Face.MEMORY_TOOL)) from None
        except MemfileError as exc:
            raise MemoryToolError(exc.said(Face.MEMORY_TOOL)) from None
        except OSError as exc:  # the file system's refusal of a path memfile let through
            raise MemoryToolError(
                f"The {name} command could not be carried out: the file system refused it "
                f"({exc.strerror or type(exc).__name__}); nothing was changed. Use another path, or tell the user."
            ) from None

    # --- the commands --------------------------------------------------------------------

    def _view(self, command: Mapping[str, Any]) -> str:
        target = self._target(_text(command, "path"))
        full = target.full.resolve()
        self._unseen(target)
        try:
            leaf = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            raise MemoryToolError(f"The path {target.given} does not exist. Please provide a valid path.") from None
        if stat.S_ISDIR(leaf.st_mode):
            return self._listing(target.given, full, leaf)
        if not stat.S_ISREG(leaf.st_mode):
            raise MemoryToolError(f"Unsupported file type for {target.given}")
        try:
            data = full.read_bytes()
        except FileNotFoundError:
            raise MemoryToolError(
                f"The file {target.given} no longer exists (may have been deleted or renamed concurrently)."
            ) from None
        lines = _decoded(data, target.given).split("\n")
        if len(lines) > MAX_LINES:
            raise MemoryToolError(f"File {target.given} exceeds maximum line limit of 999,999 lines.")
        view_range = command.get("view_range")
        start_num = 1
        if view_range is not None:
            if not (
                isinstance(view_range, list | tuple)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
            ):
                shown = _cut(repr(view_range))
                raise MemoryToolError(f"`view_range` must be two line numbers [start, end], got: {shown}")
            if len(view_range) == 2:  # any other length shows the whole file, as the SDK's backend does
                start = max(1, view_range[0]) - 1
                end = len(lines) if view_range[1] == -1 else view_range[1]
                lines, start_num = lines[start:end], start + 1
        numbered = [f"{str(i + start_num).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)]
        return f"Here's the content of {target.given} with line numbers:\n" + "\n".join(numbered)

    def _listing(self, given: str, folder: Path, leaf: os.stat_result) -> str:
        lines = [f"{_size(leaf.st_size)}\t{given}"]
        mind_dir = self.vault.mind_dir
        proposed = self._proposed_files()

        def collect(dir_path: Path, relative: str, depth: int) -> None:
            try:
                entries = sorted(dir_path.iterdir(), key=lambda p: p.name)
            except OSError:
                return
            for item in entries:
                if item.name.startswith("."):
                    continue
                item_relative = f"{relative}/{item.name}" if relative else item.name
                try:
                    if not is_inside(item, mind_dir) or item.resolve() in proposed:  # out of the mind, or a proposal
                        continue
                    size = item.stat().st_size
                except (OSError, RuntimeError):  # gone, unreadable, or a symlink loop (RuntimeError before 3.13)
                    continue
                if item.is_dir():
                    lines.append(f"{_size(size)}\t{given}/{item_relative}/")
                    if depth < 2:
                        collect(item, item_relative, depth + 1)
                elif item.is_file():
                    lines.append(f"{_size(size)}\t{given}/{item_relative}")

        collect(folder, "", 1)
        header = f"Here're the files and directories up to 2 levels deep in {given}, excluding hidden items:"
        return f"{header}\n" + "\n".join(lines)

    def _create(self, command: Mapping[str, Any]) -> str:
        target = self._target(_text(command, "path"))
        file_text = _text(command, "file_text")
        if target.full.resolve() in self._proposed_files():
            raise MemoryToolError(
                f"No change was made: {target.given} is taken by a memory waiting for the user's review; "
                "create this one under another key"
            )
        if target.full.exists() or target.full.is_symlink():
            raise MemoryToolError(f"File {target.given} already exists")
        self._writable(target)
        self._capped(target, file_text)
        memory = self._parsed(target, file_text.encode("utf-8"))
        holder = next((m for m in self.vault.memories() if (m.category, m.key) == (memory.category, memory.key)), None)
        if holder is not None:
            raise MemoryToolError(
                f"A memory {memory.category}/{memory.key} already exists at {_shown(holder.path)}; "
                "view and edit that file (str_replace, insert), or create this one under another key"
            )
        if memory.has_front_matter:
            text, added = self._new_file_text(target, file_text, memory)
        else:  # the file `store` would write for this text at this place
            now = utc_now()
            agents = replace(memory, source=Source.AGENT, verified=False, confidence=DEFAULT_CONFIDENCE[Source.AGENT])
            text = fileformat.serialize(replace(agents, id=new_id(), id_derived=False, created_at=now, updated_at=now))
            stripped = file_text[: len(file_text) - len(file_text.lstrip())].count("\n")
            added = (fileformat.front_matter_lines(text), fileformat.front_matter_lines(text) - stripped)
        try:
            self.vault.write_raw({target.relpath: text}, subject=f"store {memory.ref}", based_on={target.relpath: None})
        except SecretFound as exc:  # its lines counted in the model's text, not in the front-matter memfile added
            after, shift = added
            lines = [replace(f, line=f.line - shift if f.line > after else f.line) for f in exc.findings]
            raise SecretFound(lines, exc.what) from None
        return f"File created successfully at: {target.given}"

    def _str_replace(self, command: Mapping[str, Any]) -> str:
        target = self._target(_text(command, "path"))
        old_str, new_str = _text(command, "old_str"), _text(command, "new_str")
        data, content = self._existing_file(target)
        count = content.count(old_str)
        if count == 0:
            raise MemoryToolError(
                f"No replacement was performed, old_str `{masked(old_str)}` did not appear verbatim in {target.given}."
            )
        if count > 1:
            starts = re.finditer(f"(?={re.escape(old_str)})", content)  # overlapping ones too, as the SDK's
            lines = ", ".join(str(content[: found.start()].count("\n") + 1) for found in starts)
            raise MemoryToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
                f"{lines}. Please ensure it is unique"
            )
        changed_line_index = content[: content.find(old_str)].count("\n")
        new_content = content.replace(old_str, new_str)
        self._edit(target, data, new_content)
        new_lines = new_content.split("\n")
        context_start, context_end = max(0, changed_line_index - 2), min(len(new_lines), changed_line_index + 3)
        snippet = [
            f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(context_start + 1, context_end + 1)
        ]
        return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + (
            "\n".join(snippet)
        )

    def _insert(self, command: Mapping[str, Any]) -> str:
        target = self._target(_text(command, "path"))
        insert_line = command.get("insert_line")
        if not isinstance(insert_line, int) or isinstance(insert_line, bool):
            raise MemoryToolError(f"`insert_line` must be a line number, got: {insert_line!r}")
        insert_text = _text(command, "insert_text")
        data, content = self._existing_file(target)
        lines = content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if insert_line < 0 or insert_line > len(lines):
            raise MemoryToolError(
                f"Invalid `insert_line` parameter: {insert_line}. It should be within the range [0, {len(lines)}]."
            )
        # 0 is the top of the memory's text: below the front-matter, which must stay the file's first lines
        top = fileformat.front_matter_lines(content) if insert_line == 0 else 0
        lines.insert(insert_line or top, insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        self._edit(target, data, new_content)
        if top:
            return (
                f"The file {target.given} has been edited. Line 0 is the top of the memory's text, below its "
                f"front-matter (lines 1-{top}): the text starts at line {top + 1}."
            )
        return f"The file {target.given} has been edited."

    def _delete(self, command: Mapping[str, Any]) -> str:
        target = self._target(_text(command, "path"))
        if target.rel == "":
            raise MemoryToolError("Cannot delete the /memories directory itself")
        full = target.full
        if full.is_file() and not full.is_symlink():
            self._writable(target)
            memories = [self._memory_at(target, "delete")]
        elif full.is_dir() and not full.is_symlink():
            memories = self._memories_in(target, "delete")
        else:
            raise MemoryToolError(f"The path {target.given} does not exist")
        if memories:
            based_on: dict[str, bytes | None] = {m.path: self._bytes(m) for m in memories}
            subject = f"forget {', '.join(m.ref for m in memories)}"
            self.vault.write_raw(dict.fromkeys(based_on), subject=subject, based_on=based_on)
        _remove_empty_folders(full)  # a folder's: a file's is gone
        return f"Successfully deleted {target.given}"

    def _rename(self, command: Mapping[str, Any]) -> str:
        old = self._target(_text(command, "old_path"))
        new = self._target(_text(command, "new_path"))
        if old.rel == "":
            raise MemoryToolError("Cannot rename the /memories directory itself")
        if new.full.exists() or new.full.is_symlink():
            raise MemoryToolError(f"The destination {new.given} already exists")
        if new.rel == "" or (new.rel + "/").startswith(old.rel + "/"):
            raise MemoryToolError(f"Cannot rename {old.given} into itself ({new.given})")
        now = utc_now()
        if old.full.is_file() and not old.full.is_symlink():
            self._writable(old)
            self._writable(new)
            memory = self._memory_at(old, "rename")
            moves = [(memory, new.relpath)]
        elif old.full.is_dir() and not old.full.is_symlink():
            memories = self._memories_in(old, "rename")
            prefix = old.relpath + "/"
            moves = [(m, new.relpath + "/" + m.path.removeprefix(prefix)) for m in memories]
            for _, relpath in moves:
                self._writable(self._target(ROOT + "/" + relpath.split("/", 1)[1]))
        else:
            raise MemoryToolError(f"The path {old.given} does not exist")
        changes: dict[str, str | None] = {}
        based_on: dict[str, bytes | None] = {}
        stored: list[str] = []
        for memory, relpath in moves:
            data = self._bytes(memory)
            changes[memory.path], based_on[memory.path] = None, data
            changes[relpath], based_on[relpath] = _renamed(data, memory, relpath, now), None
            stored.append(fileformat.parse(b"", relpath, now).ref)
        if changes:
            forgotten = ", ".join(m.ref for m, _ in moves)
            subject = f"store {', '.join(stored)}, forget {forgotten}"
            self.vault.write_raw(changes, subject=subject, based_on=based_on)
        if old.full.is_dir():
            _remove_empty_folders(old.full)
        return f"Successfully renamed {old.given} to {new.given}"

    # --- paths ---------------------------------------------------------------------------

    def _target(self, path: str) -> _Target:
        """The path checked: under /memories, no NUL, backslash or `..` (also URL-encoded), not absolute
        once /memories is taken off, names of at most MAX_NAME_BYTES, at most MAX_DEPTH folders down, and
        inside the mind folder with symlinks resolved (paths.safe_path), through no symlink loop."""
        rest = path[len(ROOT) :] if path.startswith(ROOT) else None
        if rest is None or rest and not rest.startswith("/"):
            raise MemoryToolError(f"Path must start with /memories, got: {_cut(path)}")
        rest = rest[1:]
        decoded = [rest]
        while len(decoded) < 4 and unquote(decoded[-1]) != decoded[-1]:
            decoded.append(unquote(decoded[-1]))
        for text in decoded:
            if "\x00" in text or "\\" in text:
                raise MemoryToolError(
                    f"Path {path!r} is not allowed: it holds a NUL character or a backslash; "
                    "separate folders with / (for example /memories/note/example.md)"
                )
            if text.startswith("/") or ".." in text.split("/"):
                raise MemoryToolError(f"Path {_cut(path)} would escape /memories directory")
        names = [name for name in rest.split("/") if name not in ("", ".")]
        if len(names) > MAX_DEPTH + 1:
            raise MemoryToolError(
                f"Path {_cut(path)} goes {len(names) - 1} folders down; the memory tool goes at most {MAX_DEPTH} "
                f"folders down in /memories: {LAYOUT}."
            )
        long = next((name for name in names if len(name.encode("utf-8")) > MAX_NAME_BYTES), None)
        if long is not None:
            raise MemoryToolError(
                f"Path {_cut(path)} holds a name of {len(long.encode('utf-8')):,} bytes, and a file or folder name "
                f"may have at most {MAX_NAME_BYTES}: use a short name; {LAYOUT}."
            )
        rel = "/".join(names)
        mind = self.vault.mind
        relpath = f"{mind}/{rel}" if rel else mind
        try:
            full: Path | None = safe_path(self.vault.root, relpath, mind)
        except InvalidInput:
            raise MemoryToolError(f"Path {_cut(path)} would escape /memories directory") from None
        except RuntimeError:  # resolving a symlink loop (Python 3.12 and before; 3.13 leaves the path as it is)
            full = None
        if full is None or _loops(full):
            raise MemoryToolError(
                f"Path {_cut(path)} goes through a symbolic link that leads in a circle (to itself, or to a link back "
                "to it), so it names no file; nothing was changed. A person must remove that link: tell the user."
            )
        return _Target(masked(path), rel, relpath, full)  # `given`: what answers repeat

    def _writable(self, target: _Target) -> None:
        """Refuse a path memfile would not take for a memory file (the error names the layout)."""
        parts = target.rel.split("/") if target.rel else []
        if not parts or not parts[-1].endswith(".md") or any(p.startswith(".") for p in parts):
            raise MemoryToolError(f"{target.given} is not a memory file: {LAYOUT}.")
        if target.full.resolve() != self.vault.mind_dir.resolve().joinpath(*parts):
            raise MemoryToolError(f"{target.given} goes through a symbolic link; memfile writes memory files only.")

    def _capped(self, target: _Target, text: str) -> None:
        size = len(text.encode("utf-8"))
        if size > self.max_write_bytes:
            raise MemoryToolError(
                f"No change was made: {target.given} would be {size:,} bytes, and the memory tool writes at most "
                f"{self.max_write_bytes:,} bytes per file; keep memories short, or split this one into several files."
            )

    # --- memories ------------------------------------------------------------------------

    def _parsed(self, target: _Target, data: bytes, mtime: datetime | None = None) -> Memory:
        """The memory `data` would be at `target`, or the reason it could not be one."""
        try:
            return fileformat.parse(data, target.relpath, mtime or utc_now())
        except FileParseError as exc:
            line = f" (line {exc.line})" if exc.line else ""
            raise MemoryToolError(
                f"No change was made: {target.given} would not be a memory file memfile can read: {exc.reason}{line}. "
                "Keep the front-matter between the two --- lines valid YAML, or leave it out."
            ) from None

    def _memory_at(self, target: _Target, verb: str) -> Memory:
        """The memory at `target`, refused when memfile cannot read it or it is a person's (verified or critical)
        to `verb`: the model is told what it may do instead."""
        memory = next((m for m in self.vault.memories() if m.path == target.relpath), None)
        if memory is not None and memory.proposed:
            self._unseen(target)
        if memory is None:
            problem = next((i for i in self.vault.issues if i.path == target.relpath), None)
            why = f" ({problem.reason})" if problem else ""
            raise MemoryToolError(
                f"{target.given} is not a memory memfile can read{why}; a person must mend it by hand, tell the user."
            )
        if memory.verified or memory.priority is Priority.CRITICAL:
            why = "verified by a person" if memory.verified else "critical"
            raise MemoryToolError(
                f"No change was made: {memory.ref} ({target.given}) is {why}, so only a person can {verb} it. "
                "Create a new memory file with the correction instead, and tell the user, "
                f"who can mark {memory.ref} superseded by it."
            )
        return memory

    def _memories_in(self, target: _Target, verb: str) -> list[Memory]:
        """Every memory under a folder, refused when the folder holds anything else or a memory that is a
        person's to remove (verified or critical): a folder goes all or nothing."""
        prefix = target.relpath + "/"
        memories = sorted((m for m in self.vault.memories() if m.path.startswith(prefix)), key=lambda m: m.path)
        paths = {m.path for m in memories}
        others = sorted(
            (Path(folder) / name).relative_to(self.vault.root).as_posix()
            for folder, _, names in os.walk(target.full)
            for name in names
        )
        others = [p for p in others if p not in paths]
        if others:
            shown = ", ".join(_shown(p) for p in others[:10]) + (", ..." if len(others) > 10 else "")
            raise MemoryToolError(
                f"Cannot {verb} {target.given}: it holds files that are not memories memfile can read ({shown}); "
                "nothing was changed: a person must look at them, tell the user."
            )
        if any(m.proposed for m in memories):
            raise MemoryToolError(
                f"Cannot {verb} {target.given}: it holds memories waiting for the user's review, which only a "
                f"person accepts or rejects; nothing was changed. {verb.capitalize()} the other files one by one."
            )
        guarded = [m for m in memories if m.verified or m.priority is Priority.CRITICAL]
        if guarded:
            shown = ", ".join(_shown(m.path) for m in guarded[:10]) + (", ..." if len(guarded) > 10 else "")
            raise MemoryToolError(
                f"Cannot {verb} {target.given}: it holds memories a person verified or made critical ({shown}), "
                f"which only a person can {verb}; nothing was changed. {verb.capitalize()} the other files one by "
                "one, and store corrections as new memories."
            )
        return memories

    def _proposed_files(self) -> set[Path]:
        """The files of the mind's captured memories waiting for a person's review (`Status.PROPOSED`),
        resolved: no agent reads or changes one, so the model is shown none."""
        return {(self.vault.root / m.path).resolve() for m in self.vault.memories() if m.proposed}

    def _unseen(self, target: _Target) -> None:
        """Refuse a path that leads to a proposal's file as a path that does not exist."""
        if target.full.resolve() in self._proposed_files():
            raise MemoryToolError(f"The path {target.given} does not exist. Please provide a valid path.")

    def _bytes(self, memory: Memory) -> bytes:
        return safe_path(self.vault.root, memory.path, self.vault.mind).read_bytes()

    def _existing_file(self, target: _Target) -> tuple[bytes, str]:
        full = target.full
        if not full.exists():
            raise MemoryToolError(f"The path {target.given} does not exist. Please provide a valid path.")
        self._unseen(target)
        if not full.is_file():
            raise MemoryToolError(f"The path {target.given} is not a file.")
        self._writable(target)
        data = full.read_bytes()
        return data, _decoded(data, target.given)

    def _edit(self, target: _Target, data: bytes, new_text: str) -> None:
        """Write an edited file: still a memory, the same one, not a person's, moved `updated_at`; one commit."""
        self._capped(target, new_text)
        mtime = datetime.fromtimestamp(target.full.stat().st_mtime, tz=timezone.utc)
        self._memory_at(target, "change")
        before = self._parsed(target, data, mtime)
        after = self._parsed(target, new_text.encode("utf-8"), mtime)
        for name in ("id", "category", "key", "created_at", "source"):
            old_value, new_value = getattr(before, name), getattr(after, name)
            if old_value != new_value:
                raise MemoryToolError(
                    f"No change was made: the edit would change the {name} of {before.ref} "
                    f"({_value(old_value)} -> {_value(new_value)}), which never changes. Leave that line as it "
                    "is; to file the memory elsewhere, rename the file or create a new one."
                )
        if after.verified and not before.verified:
            raise MemoryToolError(
                "No change was made: agents cannot verify memories (verified: true); only a person can."
            )
        encoded = new_text.encode("utf-8")
        if after.has_front_matter and encoded != data:
            encoded = fileformat.rewrite(encoded, target.relpath, after, replace(after, updated_at=utc_now()))
        self.vault.write_raw(
            {target.relpath: encoded.decode("utf-8")}, subject=f"edit {before.ref}", based_on={target.relpath: data}
        )

    def _new_file_text(self, target: _Target, file_text: str, memory: Memory) -> tuple[str, tuple[int, int]]:
        """The text of a new file: the model's, with the front-matter keys an agent's memory carries added
        where missing (id, `source: agent`, created_at, updated_at), and checked to belong where it is;
        and where the model's lines went: its lines after the first are the file's (after, shift) with
        `shift` lines added above them."""
        placed = self._parsed(target, b"")
        if (memory.category, memory.key) != (placed.category, placed.key):
            raise MemoryToolError(
                f"No change was made: the front-matter names {memory.ref}, but a file at {target.given} holds "
                f"{placed.ref}: leave `category` and `key` out of the front-matter, or create the file at "
                f"/memories/{memory.category}/{memory.key}.md"
            )
        now = format_datetime(utc_now())
        wanted = {"id": new_id(), "source": "agent", "created_at": now, "updated_at": now}
        try:
            missing = [
                f"{name}: {value}\n"
                for name, value in wanted.items()
                if (name != "id" or memory.id_derived)
                and _lacks(target.relpath, file_text, memory, f"{name}: {value}\n")
            ]
        except FileParseError:
            raise MemoryToolError(
                f"No change was made: the front-matter of {target.given} must be one `key: value` per line "
                "between the two --- lines (or left out: memfile writes it)."
            ) from None
        return _with_lines(file_text, memory, "".join(missing)), (len(missing) + 1, len(missing))


# --- helpers ---------------------------------------------------------------------------------


def _text(command: Mapping[str, Any], name: str) -> str:
    """The text argument `name` of `command`, refused when missing, of another type, or no valid Unicode."""
    value = command.get(name)
    if not isinstance(value, str):
        what = "missing" if value is None else f"not text: {_cut(repr(value))}"
        raise MemoryToolError(f"The {command.get('command')} command needs `{name}` (text), which is {what}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryToolError(
            f"The {command.get('command')} command's `{name}` is not valid text: character {exc.start + 1} is "
            f"{value[exc.start]!r}, half of a UTF-16 surrogate pair; send the text as UTF-8."
        ) from None
    return value


def _loops(path: Path) -> bool:
    """Whether `path` goes through a symbolic link that leads in a circle."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _cut(text: str) -> str:
    """`text` as a message repeats it: masked when it looks like it holds a secret, then at most SHOWN_PATH
    characters and `…`."""
    text = masked(text)
    return text if len(text) <= SHOWN_PATH else text[:SHOWN_PATH] + "\u2026"


def _with_lines(text: str, memory: Memory, lines: str) -> str:
    """`text` with front-matter `lines` added at the top of its front-matter (made when it has none)."""
    if not lines:
        return text
    if not memory.has_front_matter:
        return "---\n" + lines + "---\n" + text
    first = text.index("\n") + 1
    return text[:first] + lines + text[first:]


def _lacks(relpath: str, text: str, memory: Memory, line: str) -> bool:
    """Whether the front-matter of `text` lacks the key of `line`: adding it gives no key twice."""
    try:
        fileformat.parse(_with_lines(text, memory, line).encode("utf-8"), relpath, utc_now())
    except FileParseError as exc:
        if "appears twice" in exc.reason:
            return False
        raise
    return True


def _renamed(data: bytes, memory: Memory, relpath: str, now: datetime) -> str:
    """The text of `memory`'s file stored anew at `relpath`: a new id, the category and key the place
    gives, `renamed_from: <old id>`; content, dates of creation and every other key kept."""
    placed = fileformat.parse(b"", relpath, now)
    extra = tuple((k, v) for k, v in memory.extra if k != RENAMED_FROM) + ((RENAMED_FROM, memory.id),)
    new = replace(
        memory,
        id=new_id(),
        category=placed.category,
        key=placed.key,
        path=relpath,
        updated_at=now,
        extra=extra,
        id_derived=False,
    )
    return fileformat.rewrite(data, memory.path, memory, new).decode("utf-8")


def _decoded(data: bytes, given: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise MemoryToolError(f"path {given!r} is not valid utf-8") from None


def _size(size: int) -> str:
    """The SDK's file sizes: `0B`, `512B`, `1.5K`, `4K`, `2.0M`."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def _shown(relpath: str) -> str:
    """A vault-relative path as the model sees it: under /memories."""
    return ROOT + "/" + relpath.split("/", 1)[1]


def _value(value: object) -> str:
    return format_datetime(value) if hasattr(value, "astimezone") else str(value)  # type: ignore[arg-type]


def _remove_empty_folders(folder: Path) -> None:
    """Remove `folder` and the folders in it that are left empty (deepest first); others stay."""
    if not folder.is_dir():
        return
    for inner, _, _ in sorted(os.walk(folder), key=lambda entry: -len(entry[0])):
        with suppress(OSError):  # not empty: it stays
            os.rmdir(inner)
