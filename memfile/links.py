"""Wiki links between the memories of one mind: what a memory's text links to, and what links to it.

Pure: parsing reads text and never rewrites it (the text is the person's); resolution reads the mind's
memories as the index gives them. The syntax is Obsidian's: `[[key]]`, `[[category/key]]`,
`[[key|shown text]]`, `[[category/key|shown]]` (a `#heading` or `^block` after the name, and a `.md`
suffix, are allowed and ignored), plus Basic Memory's typed relation, a list line
`- relation name [[target]]`, whose words before the link become the link's `relation` (`relation_name`).
Links inside fenced code blocks and inline code are text, not links.

Resolution follows Obsidian's file-name rule, since each memory is the file `<mind>/<category>/<key>.md`:
`[[key]]` names the file `key.md` in any category folder (one file: that memory; two: ambiguous, said
so, never guessed), `[[category/key]]` names the file by its path; names match case-insensitively, as in
Obsidian. A link to a superseded memory resolves to its successor (`superseded_by`, followed to the end)
and says which memory it named. A link crosses no mind: to another mind's memory, or to nothing, it
resolves to nothing and says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .model import KEY_PATTERN, Category, Memory

#: The category folders, as a link names them.
_CATEGORIES = frozenset(str(c) for c in Category)

#: `[[target]]` or `[[target|shown]]`: no bracket or line break inside (so `[[a[[b]]]]` holds the link `b`).
_LINK = re.compile(r"\[\[([^\[\]|\n]*)(?:\|([^\[\]\n]*))?\]\]")
#: A fence line (``` or ~~~, up to three spaces in): the code block runs to a fence of the same kind.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: A run of backticks: inline code runs from one to the next run of the same length (CommonMark), on one line.
_TICKS = re.compile(r"`+")
#: A list line whose words before its first link are a relation (Basic Memory): `- implements [[x]]`.
_RELATION = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+([A-Za-z][\w \-]{0,79}?)\s*\[\[")

#: How a link resolved: to a memory, to the successor of the superseded memory it names, or to nothing.
RESOLVED, SUPERSEDED, AMBIGUOUS, MISSING, OTHER_MIND, INVALID = (
    "resolved",
    "superseded",
    "ambiguous",
    "missing",
    "other_mind",
    "invalid",
)


@dataclass(frozen=True)
class Link:
    """One `[[...]]` in a memory's text: the name as written (`target`, without `#heading` or `.md`),
    the alias after `|` (`shown`), the typed relation of its list line, and its line in the text (1-based)."""

    target: str
    shown: str | None
    relation: str | None
    line: int


def parse_links(text: str) -> list[Link]:
    """The links of a memory's text, in order. Never raises; text in code is skipped."""
    if "[[" not in text:
        return []
    found: list[Link] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        if "[[" not in line:
            continue
        if "`" in line:
            line = _without_code(line)
        relation = _RELATION.match(line)
        for index, match in enumerate(_LINK.finditer(line)):
            target = _name(match.group(1))
            if not target:
                continue
            typed = relation.group(1) if relation and index == 0 else None
            shown = match.group(2).strip() if match.group(2) is not None else None
            found.append(Link(target, shown or None, snake_relation(typed) if typed else None, number))
    return found


def _without_code(line: str) -> str:
    """The line with its inline code spans blanked (same length), in one pass over its backtick runs."""
    spans: list[tuple[int, int]] = []
    opened: tuple[int, int] | None = None  # (start, length) of the run that opened a span
    for run in _TICKS.finditer(line):
        if opened is None:
            opened = (run.start(), len(run.group()))
        elif len(run.group()) == opened[1]:
            spans.append((opened[0], run.end()))
            opened = None
    pieces, done = [], 0
    for start, end in spans:
        pieces += [line[done:start], " " * (end - start)]
        done = end
    return "".join(pieces) + line[done:]


def _name(written: str) -> str:
    """The file a link names: without a `#heading` / `^block` part, a `.md` suffix, or outer spaces."""
    name = re.split(r"[#^]", written, maxsplit=1)[0].strip()
    return name[:-3] if name.lower().endswith(".md") else name


def snake_relation(words: str) -> str:
    """A relation's words as snake_case: `relates to` -> `relates_to`, `Works-At` -> `works_at`."""
    return re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")


@dataclass(frozen=True)
class ResolvedLink:
    """A link of `source`, and the memory it leads to (`memory`, None when it leads to nothing).

    `status` is one of RESOLVED, SUPERSEDED (`named` is the superseded memory the text names, `memory`
    its successor), AMBIGUOUS (`candidates`: the memories it may name), MISSING, OTHER_MIND (`mind`: the
    mind holding such a file) or INVALID (no memory can have that name). `note` says it in a sentence.
    """

    source: Memory
    link: Link
    status: str
    memory: Memory | None = None
    named: Memory | None = None
    candidates: tuple[Memory, ...] = ()
    mind: str | None = None

    @property
    def note(self) -> str:
        target = f"[[{self.link.target}]]"
        if self.status == SUPERSEDED and self.named and self.memory:
            return f"{target} names {self.named.ref}, superseded by {self.memory.ref}"
        if self.status == AMBIGUOUS:
            names = ", ".join(sorted(m.path for m in self.candidates))
            return f"{target} is ambiguous: {names} (write category/key)"
        if self.status == OTHER_MIND:
            return f"{target} names a memory of mind {self.mind}: links cross no mind"
        if self.status == MISSING:
            return f"{target} names no memory of this mind"
        if self.status == INVALID:
            return f"{target} is not a memory's name (category/key or key)"
        return f"{target} -> {self.memory.ref if self.memory else ''}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the link as written, where it is, and what it leads to."""
        memory = self.memory
        return {
            "source": self.source.ref,
            "source_id": self.source.id,
            "target": self.link.target,
            "shown": self.link.shown,
            "relation": self.link.relation,
            "line": self.link.line,
            "path": self.source.path,
            "status": self.status,
            "ref": memory.ref if memory else None,
            "id": memory.id if memory else None,
            "named": self.named.ref if self.named else None,
            "candidates": sorted(m.ref for m in self.candidates),
            "note": self.note,
        }


def _place(memory: Memory) -> tuple[str, str]:
    """(category folder, file name without .md) of a memory's file, lowercased: what Obsidian matches."""
    folder, _, name = memory.path.lower().rpartition("/")
    return folder.rpartition("/")[2], name.removesuffix(".md")


class LinkTable:
    """The links of a mind's memories, resolved: built once from `memories`, then each lookup is cheap.

    `elsewhere(category, key)` names another mind holding such a file (category None: any folder), for
    a link that resolves to nothing here; `parsed` is a cache of parsed texts, by path, kept between
    tables (a text that did not change is not parsed again).
    """

    def __init__(
        self,
        memories: Iterable[Memory],
        elsewhere: Callable[[Category | None, str], str | None] | None = None,
        parsed: dict[str, tuple[str, list[Link]]] | None = None,
    ) -> None:
        self.memories = list(memories)
        self._elsewhere = elsewhere
        self._parsed = parsed if parsed is not None else {}
        self._by_name: dict[str, list[Memory]] = {}
        self._by_path: dict[tuple[str, str], list[Memory]] = {}
        self._by_id = {m.id: m for m in self.memories}
        for memory in self.memories:
            category, name = _place(memory)
            self._by_name.setdefault(name, []).append(memory)
            self._by_path.setdefault((category, name), []).append(memory)
        self._backlinks: dict[str, list[ResolvedLink]] | None = None

    def parsed(self, memory: Memory) -> list[Link]:
        """The links written in a memory's text (cached by path while the text is the same)."""
        cached = self._parsed.get(memory.path)
        if cached is not None and cached[0] == memory.content:
            return cached[1]
        links = parse_links(memory.content)
        self._parsed[memory.path] = (memory.content, links)
        return links

    def links(self, memory: Memory) -> list[ResolvedLink]:
        """A memory's outgoing links, resolved, in the order of its text."""
        return [self.resolve(memory, link) for link in self.parsed(memory)]

    def backlinks(self, memory: Memory) -> list[ResolvedLink]:
        """The links of other memories (and its own) that lead to `memory`, by source path and line."""
        if self._backlinks is None:
            incoming: dict[str, list[ResolvedLink]] = {}
            for source in self.memories:
                for resolved in self.links(source):
                    if resolved.memory is not None:
                        incoming.setdefault(resolved.memory.id, []).append(resolved)
            self._backlinks = incoming
        return self._backlinks.get(memory.id, [])

    def broken(self) -> list[ResolvedLink]:
        """Every link that leads to nothing (missing, ambiguous, another mind's, invalid)."""
        return [r for m in self.memories for r in self.links(m) if r.memory is None]

    def resolve(self, source: Memory, link: Link) -> ResolvedLink:
        """Where one link of `source` leads, by Obsidian's file-name rule (module docstring)."""
        parts = link.target.lower().split("/")
        if len(parts) == 1:
            category: str | None = None
            matches = self._by_name.get(parts[0], [])
        elif len(parts) == 2:
            category = parts[0]
            matches = self._by_path.get((parts[0], parts[1]), [])
        elif len(parts) == 3 and parts[0] == source.mind.lower():  # the vault-relative path: `mind/category/key`
            category = parts[1]
            matches = self._by_path.get((parts[1], parts[2]), [])
        elif len(parts) == 3 and parts[1] in _CATEGORIES:
            return ResolvedLink(source, link, OTHER_MIND, mind=link.target.split("/")[0])
        else:
            return ResolvedLink(source, link, INVALID)
        if len(matches) > 1:
            return ResolvedLink(source, link, AMBIGUOUS, candidates=tuple(matches))
        if not matches:
            if any(p in ("", ".", "..") for p in parts):
                return ResolvedLink(source, link, INVALID)
            mind = None
            if self._elsewhere and KEY_PATTERN.fullmatch(parts[-1]) and category in (None, *_CATEGORIES):
                mind = self._elsewhere(Category(category) if category else None, parts[-1])
            return ResolvedLink(source, link, OTHER_MIND if mind else MISSING, mind=mind)
        named = matches[0]
        memory, seen = named, {named.id}
        while memory.superseded and memory.superseded_by in self._by_id and memory.superseded_by not in seen:
            memory = self._by_id[memory.superseded_by]
            seen.add(memory.id)
        if memory is named:
            return ResolvedLink(source, link, RESOLVED, memory)
        return ResolvedLink(source, link, SUPERSEDED, memory, named=named)


@dataclass(frozen=True)
class Linked:
    """A memory with its outgoing links and its backlinks (what `show` prints and returns)."""

    memory: Memory
    links: list[ResolvedLink]
    backlinks: list[ResolvedLink]

    def to_dict(self) -> dict[str, Any]:
        """The memory's dict with `links` and `backlinks` (each a ResolvedLink's dict)."""
        return {
            **self.memory.to_dict(),
            "links": [r.to_dict() for r in self.links],
            "backlinks": [r.to_dict() for r in self.backlinks],
        }
