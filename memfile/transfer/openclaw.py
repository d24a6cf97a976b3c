"""Reading OpenClaw's memory files into import records.

OpenClaw keeps an agent's memory as Markdown in its workspace (`MEMORY.md`, `USER.md`, daily notes in
`memory/`, what its hooks write); docs/sync.md gives how each file maps to memories. Every file it does
not know is named in `unmapped`; a FIFO is never opened and a link leading out of the folder never
followed. Ids and dates come from the files, so importing the same files twice changes nothing.
"""

from __future__ import annotations

import re
import stat
import textwrap
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..model import parse_category
from .records import SPLITS, ImportOptions, Incoming, reader_source
from .synapse import clean_tag, derived_id, folds, hashes_thai, slug, thai_notice, unique_key

FORMAT = "openclaw"
CURATED = ("MEMORY.md", "memory.md")  # OpenClaw reads the lowercase name when MEMORY.md is absent
USER = "USER.md"
DREAMS = "DREAMS.md"
DIGEST = "context-digest.md"  # in memory/: the context-digest hook's rolling digest
IMPORTANT = "important"  # memory/important/: the session-importance hook's notes
DAILY = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:-(.+))?\.md")
SHAPE = "a folder holding MEMORY.md, USER.md and/or memory/YYYY-MM-DD.md, or one such .md file"

_HEADING2 = re.compile(r" {0,3}##(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_HEADING1 = re.compile(r" {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(```+|~~~+)")
_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|$)")  # top level: at the start of the line

#: Heading words -> category, the first match wins ("User preferences" is a preference, not an identity).
GUESSES = (
    ("mistake", ("mistake", "mistakes", "lesson", "lessons", "learned", "learnings", "pitfalls", "gotchas")),
    ("preference", ("preference", "preferences", "likes", "dislikes", "prefers")),
    ("project", ("project", "projects")),
    ("identity", ("about me", "about the user", "user", "identity", "who i am")),
    ("skill", ("skill", "skills")),
    ("fact", ("fact", "facts")),
    ("context", ("context",)),
)


def read_openclaw(path: Path, options: ImportOptions) -> Incoming:
    """Records from an OpenClaw workspace folder, or from one MEMORY.md-like file or daily note.

    Raises InvalidInput for a path that is neither, a file that is not UTF-8 (naming it), or a bad option.
    """
    reader = _Reader(options)
    path = Path(path)
    if path.is_dir():
        reader.folder(path)
    elif path.is_file():
        reader.single(path)
    else:
        raise InvalidInput("OpenClaw import", str(path), SHAPE, reason="no such file or folder")
    notices = [thai_notice(reader.thai_hashed)] if reader.thai_hashed else []
    return Incoming(format=FORMAT, records=reader.records, unmapped=reader.unmapped, notices=notices)


def guess_category(heading: str) -> str | None:
    """The category a heading's words suggest (`Lessons learned` -> mistake), or None."""
    padded = " " + " ".join(re.findall(r"[a-z]+", heading.lower())) + " "
    for category, phrases in GUESSES:
        if any(f" {phrase} " in padded for phrase in phrases):
            return category
    return None


class _Reader:
    def __init__(self, options: ImportOptions) -> None:
        if options.split not in SPLITS:
            raise InvalidInput("split", options.split, SPLITS)
        self.category = str(parse_category(options.category)) if options.category is not None else None
        self.source = reader_source(options)  # OpenClaw's files are written by its agent
        self.options = options
        self.records: list[dict[str, Any]] = []
        self.unmapped: list[str] = []
        self.taken: dict[str, set[str]] = {}
        self.thai_hashed: dict[str, int] = {}  # heading, item, file name -> how many left a hash for Thai

    def slug(self, text: str, limit: int, what: str) -> str:
        """`slug(text, limit)`, counting a Thai `what` whose key is a hash for want of the thai extra."""
        if hashes_thai(text):
            self.thai_hashed[what] = self.thai_hashed.get(what, 0) + 1
        return slug(text, limit)

    # ------------------------------------------------------------ what to read

    def folder(self, root: Path) -> None:
        base = root.resolve()
        known = False
        curated_seen: str | None = None
        for entry, name in self.entries(root, base, ""):
            if name in CURATED and entry.is_file() and curated_seen:
                self.unmapped.append(f"{name}: {curated_seen} is read instead: not imported")
            elif name in CURATED and entry.is_file():
                curated_seen = name
                self.curated(entry, name)
            elif name == USER and entry.is_file():
                self.curated(entry, name)
            elif name == DREAMS and entry.is_file():
                self.dreams(entry)
            elif name == "memory" and entry.is_dir():
                self.memory_folder(entry, base)
            elif DAILY.fullmatch(name) and entry.is_file():
                self.daily(entry, f"memory/{name}")
            else:
                kind = "a folder" if entry.is_dir() else "not an OpenClaw memory file"
                self.unmapped.append(f"{name}: {kind}: not imported")
                continue
            known = True
        if not known:
            raise InvalidInput("OpenClaw folder", str(root), SHAPE, reason="it holds none of them")

    def memory_folder(self, folder: Path, base: Path) -> None:
        for entry, shown_name in self.entries(folder, base, "memory/"):
            if entry.is_file() and DAILY.fullmatch(entry.name):
                self.daily(entry, shown_name)
            elif entry.is_file() and entry.name == DIGEST:
                self.digest(entry, shown_name)
            elif entry.is_dir() and entry.name == IMPORTANT:
                self.important_folder(entry, base)
            else:
                kind = "a folder" if entry.is_dir() else "not a daily note (YYYY-MM-DD[-slug].md)"
                self.unmapped.append(f"{shown_name}: {kind}: not imported")

    def important_folder(self, folder: Path, base: Path) -> None:
        for entry, shown_name in self.entries(folder, base, f"memory/{IMPORTANT}/"):
            if entry.is_file() and DAILY.fullmatch(entry.name):
                self.important(entry, shown_name)
            else:
                kind = "a folder" if entry.is_dir() else "not an important note (YYYY-MM-DD-category-slug.md)"
                self.unmapped.append(f"{shown_name}: {kind}: not imported")

    def single(self, path: Path) -> None:
        name = path.name
        if DAILY.fullmatch(name) and path.parent.name == IMPORTANT:
            self.important(path, f"memory/{IMPORTANT}/{name}")
        elif DAILY.fullmatch(name):
            self.daily(path, f"memory/{name}")
        elif name == DIGEST:
            self.digest(path, f"memory/{name}")
        elif name == DREAMS:
            self.dreams(path)
        elif path.suffix.lower() in (".md", ".markdown"):
            self.curated(path, name)
        else:
            raise InvalidInput("OpenClaw file", name, SHAPE)

    def entries(self, folder: Path, base: Path, prefix: str) -> Iterator[tuple[Path, str]]:
        """The folder's entries to read, each with the name messages give it (`prefix` and its name); a link
        leading out of the folder and what is not a file or a folder are named in unmapped instead."""
        for entry in _listing(folder):
            shown_name = prefix + entry.name
            if self.inside(entry, base, shown_name) and self.regular(entry, shown_name):
                yield entry, shown_name

    def regular(self, entry: Path, name: str) -> bool:
        """True for a file or a folder; anything else (a FIFO, a socket, a device) is named in unmapped, never
        opened (a FIFO would wait for a writer)."""
        try:
            mode = entry.stat().st_mode
        except OSError as error:
            self.unmapped.append(f"{name}: cannot be read ({error.strerror or error}): not imported")
            return False
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return True
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        self.unmapped.append(f"{name}: {kind}, not a regular file: not read")
        return False

    def inside(self, entry: Path, base: Path, name: str) -> bool:
        """True unless `entry` is a symbolic link leading out of the given folder (then it is named in unmapped)."""
        if not entry.is_symlink():
            return True
        try:
            target = entry.resolve()
        except (OSError, RuntimeError):  # a loop of links
            target = None
        if target is not None and target.is_relative_to(base) and target.exists():
            return True
        self.unmapped.append(f"{name}: a symbolic link leading out of the folder (or nowhere): not followed")
        return False

    # ------------------------------------------------------------ the kinds of file

    def curated(self, path: Path, name: str) -> None:
        """MEMORY.md (or any such file), or USER.md: its keys start with `user_`, its category is identity
        unless a heading's words say otherwise (the `category` option is MEMORY.md's)."""
        text, mtime = _read(path, name)
        stamp = _stamp(mtime)
        taken: set[str] = set()
        prefix = "user_" if name == USER else ""
        override, default = (None, "identity") if name == USER else (self.category, "note")

        def category(heading: str | None) -> str:
            return override or guess_category(heading or "") or default

        if self.options.split == "file":
            if not text.strip():
                self.unmapped.append(f"{name}: empty: not imported")
                return
            key = slug(Path(name).stem, 90)
            self.add(name, key, override or default, text.strip(), f"{name} (whole file)", stamp, taken)
            return
        preamble, sections = _sections(text)
        title = next((m.group(1) for line in preamble if (m := _HEADING1.fullmatch(line))), None)
        if self.options.split == "bullets":
            untitled = [line for line in preamble if not _HEADING1.fullmatch(line)]
            where = f"{name} text before the first section"
            self.bullets(name, title, untitled, where, stamp, taken, prefix, category(title))
            for heading, lines in sections:
                where = f"{name} section {heading!r}"
                self.bullets(name, heading, lines, where, stamp, taken, prefix, category(heading))
            return
        body = "\n".join(preamble).strip()
        if body and any(line.strip() and not _HEADING1.fullmatch(line) for line in preamble):
            key = f"{slug(Path(name).stem, 80)}_intro"
            self.add(name, key, category(title), body, f"{name} text before the first section", stamp, taken, title)
        elif body:
            self.unmapped.append(f"{name}: the title {title!r} has no text of its own: not imported")
        for heading, lines in sections:
            content = "\n".join(lines).strip()
            where = f"{name} section {heading!r}"
            if not content:
                self.unmapped.append(f"{where}: empty: not imported")
                continue
            if not folds(heading):  # the key holds a hash or a romanisation of it: its words go into the content
                content = f"## {heading}\n\n{content}"
            key = prefix + self.slug(heading or "untitled", 90 - len(prefix), "heading")
            self.add(name, key, category(heading), content, where, stamp, taken, heading)

    def bullets(
        self,
        name: str,
        heading: str | None,
        lines: list[str],
        where: str,
        stamp: str,
        taken: set[str],
        prefix: str,
        category: str,
    ) -> None:
        items, outside = _items(lines)
        if not items and not outside:
            if heading is not None:  # a section, or a title, with nothing under it
                self.unmapped.append(f"{where}: empty: not imported")
            return
        if outside:
            self.unmapped.append(
                f"{where}: {outside} line{'s' if outside != 1 else ''} outside the list items not imported"
                " (split by sections to keep them)"
            )
        for number, item in enumerate(items, 1):
            if not item.strip():
                self.unmapped.append(f"{where} item {number}: empty: not imported")
                continue
            first_line = item.strip().splitlines()[0]
            key = prefix + self.slug(first_line, 60, "item")
            self.add(name, key, category, item.strip(), f"{where} item {number}", stamp, taken, heading)

    def daily(self, path: Path, name: str) -> None:
        self.dated(path, name, "daily", "context", ["openclaw", "daily"])

    def important(self, path: Path, name: str) -> None:
        """A note of the session-importance hook: `YYYY-MM-DD-<category>-<slug>.md`, its category in its tags."""
        match = DAILY.fullmatch(path.name)
        assert match is not None  # the callers matched it
        kind = clean_tag(match.group(4).split("-", 1)[0]) if match.group(4) else None
        tags = ["openclaw", "important", *([kind] if kind and kind != "important" else [])]
        category = "project" if kind == "project" else "note"
        self.dated(path, name, "important", category, tags, priority="high")

    def dated(
        self, path: Path, name: str, prefix: str, category: str, tags: list[str], priority: str | None = None
    ) -> None:
        """A note named by its day: created that day (at its mtime when that is later the same day), updated at
        its mtime, so a line appended after an import makes it newer than the mind's copy."""
        match = DAILY.fullmatch(path.name)
        assert match is not None  # the callers matched it
        year, month, day, rest = match.groups()
        try:
            day_date = date(int(year), int(month), int(day))
        except ValueError:
            self.unmapped.append(f"{name}: {year}-{month}-{day} is not a date: not imported")
            return
        text, mtime = _read(path, name)
        if not text.strip():
            self.unmapped.append(f"{name}: empty: not imported")
            return
        midnight = datetime(day_date.year, day_date.month, day_date.day, tzinfo=timezone.utc)
        created = mtime if mtime.date() == day_date and mtime > midnight else midnight
        key = f"{prefix}_{year}_{month}_{day}" + (f"_{self.slug(rest, 70, 'file name')}" if rest else "")
        stamp, updated = _stamp(created), max(created, mtime)
        self.add(name, key, category, text.strip(), name, stamp, set(), tags=tags, updated=updated, priority=priority)

    def digest(self, path: Path, name: str) -> None:
        self.whole(path, name, "context_digest", "context", ["openclaw", "digest"])

    def dreams(self, path: Path) -> None:
        if not self.options.include_dreams:
            self.unmapped.append(f"{DREAMS}: the dream diary is skipped (import it with --include-dreams)")
            return
        self.whole(path, DREAMS, "dreams", "note", ["openclaw", "dreams"])

    def whole(self, path: Path, name: str, key: str, category: str, tags: list[str]) -> None:
        """A file as one memory, dated by its mtime (the context digest, the dream diary)."""
        text, mtime = _read(path, name)
        if not text.strip():
            self.unmapped.append(f"{name}: empty: not imported")
            return
        self.add(name, key, category, text.strip(), name, _stamp(mtime), set(), tags=tags)

    def add(
        self,
        name: str,
        key: str,
        category: str,
        content: str,
        where: str,
        stamp: str,
        taken: set[str],
        heading: str | None = None,
        tags: list[str] | None = None,
        updated: datetime | None = None,
        priority: str | None = None,
    ) -> None:
        """One record; a key its file or category already has gets a `_2` suffix, never merged."""
        key = unique_key(key, taken | self.taken.setdefault(category, set()))
        taken.add(key)
        self.taken[category].add(key)
        extra: dict[str, Any] = {"openclaw_file": name}
        if heading is not None:
            extra["openclaw_heading"] = heading
        self.records.append(
            {
                "id": derived_id(FORMAT, f"{name}#{key}"),
                "category": category,
                "key": key,
                "content": content,
                "tags": tags or ["openclaw"],
                **({"priority": priority} if priority else {}),
                "source": self.source,
                "created_at": stamp,
                "updated_at": _stamp(updated) if updated is not None else stamp,
                "_dates_guessed": True,  # from the file's mtime: a memory already here keeps its dates
                "extra": extra,
                "_where": where,
            }
        )


def _listing(folder: Path) -> list[Path]:
    """A folder's entries by name, dot-files left out (a workspace's .git is not memory)."""
    try:
        return sorted((entry for entry in folder.iterdir() if not entry.name.startswith(".")), key=lambda p: p.name)
    except OSError as error:
        raise InvalidInput("OpenClaw folder", str(folder), "a readable folder", reason=error.strerror or "") from None


def _read(path: Path, name: str) -> tuple[str, datetime]:
    """A file's text, UTF-8 (a BOM dropped) with line ends made `\\n`, and its mtime in whole seconds; anything
    else is refused, naming the file."""
    try:
        data, seconds = path.read_bytes(), path.stat().st_mtime
    except OSError as error:
        raise InvalidInput(f"file {name}", name, "a readable file", reason=error.strerror or "") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInput(
            f"file {name}", name, "UTF-8 text", reason=f"byte {error.start} is not UTF-8: convert the file first"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n"), datetime.fromtimestamp(int(seconds), timezone.utc)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _sections(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The lines before the first `##` heading, and each `##` section's heading and lines (code fences respected)."""
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is None and opener:
            fence = opener.group(1)[0] * 3
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None and (heading := _HEADING2.fullmatch(line)):
            sections.append(((heading.group(1) or "").strip(), []))
            continue
        (sections[-1][1] if sections else preamble).append(line)
    return preamble, sections


def _items(lines: list[str]) -> tuple[list[str], int]:
    """The top-level list items in `lines` (each with its continuation lines), and how many lines lie outside them."""
    items: list[list[str]] = []
    outside = 0
    current: list[str] | None = None
    blank = False
    for line in lines:
        item = _ITEM.fullmatch(line)
        if item:
            current = [item.group(1) or ""]
            items.append(current)
            blank = False
        elif not line.strip():
            blank = current is not None
        elif current is not None and (line[0] in " \t" or not blank):
            current.extend([""] if blank else [])
            current.append(line)
            blank = False
        else:
            current = None
            outside += 1
    texts = [item[0] + ("\n" + textwrap.dedent("\n".join(item[1:])) if item[1:] else "") for item in items]
    return texts, outside
