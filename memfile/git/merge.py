"""Merging memories, not lines: the three-way merge git's merge driver runs for memory files. Pure.

Front-matter merges field by field; a body changed on both sides keeps ours and puts theirs in
`conflict_theirs` until `memfile resolve` (docs/sync.md gives every rule). "Ours" is the machine that
made the merge, recorded in `conflict_body_from`; each machine reads the sides from its own point of
view (`conflict_sides`).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from .. import fileformat
from ..errors import FileParseError
from ..model import CONFLICT_KEY, Memory, Source

#: The attribute line that sends memory files to the driver, and the file it lives in (committed).
ATTRIBUTES = ".gitattributes"
MERGE_RULE = "*/**/*.md merge=memfile"  # files in mind folders, not a README.md at the vault's top

_SAME: Any = object()
#: Between two conflicting bodies kept in `conflict_theirs` (a second conflict never drops the first).
CONFLICT_SEPARATOR = "\n\n---- another version ----\n\n"
#: Front-matter of a conflicted memory: the machine (`memfile.machine` in its git config) whose text is the body.
CONFLICT_FROM = "conflict_body_from"


def merge_driver_command() -> str:
    """The command git runs to merge a memory file (`%O %A %B %P`: base, ours, theirs, path)."""
    return f"{shlex.quote(sys.executable)} -m memfile merge-file %O %A %B %P"


@dataclass(frozen=True)
class MergeResult:
    data: bytes
    conflicted: bool  # both sides changed the body: theirs is kept in `conflict_theirs`


def merge_memory(
    base: bytes | None,
    ours: bytes,
    theirs: bytes,
    relpath: str,
    now: datetime | None = None,
    machine: str | None = None,
) -> MergeResult:
    """The merged file of two versions of a memory and their common ancestor (None: both created it).

    Args:
        now: stands in for a missing date (as a file's mtime does when memfile reads it).
        machine: the machine merging (whose text `ours` is), recorded in a conflict it makes.

    Raises:
        FileParseError: one of the versions cannot be read, or one has no front-matter (the
            caller merges it as text or keeps ours; the other version stays in git).
    """
    moment = now or datetime.now(timezone.utc).replace(microsecond=0)
    mine = fileformat.parse(ours, relpath, moment)
    other = fileformat.parse(theirs, relpath, moment)
    old = fileformat.parse(base, relpath, moment) if base else None
    if not (mine.has_front_matter and other.has_front_matter and (old is None or old.has_front_matter)):
        raise FileParseError(relpath, None, "a version has no front-matter: merge it as text")
    if mine == other:
        return MergeResult(ours, False)
    later = other if other.updated_at > mine.updated_at else mine

    def pick(name: str) -> Any:
        a, b = getattr(mine, name), getattr(other, name)
        o = getattr(old, name) if old is not None else _SAME
        if a == b or b == o:
            return a
        if a == o:
            return b
        return getattr(later, name)

    merged = replace(
        mine,
        id=pick("id") if old is not None else min((mine.created_at, mine.id), (other.created_at, other.id))[1],
        priority=pick("priority"),
        source=pick("source"),
        confidence=pick("confidence"),
        expires_at=pick("expires_at"),
        status=pick("status"),
        superseded_by=pick("superseded_by"),
        created_at=min(mine.created_at, other.created_at) if old is None else pick("created_at"),
        updated_at=max(mine.updated_at, other.updated_at),
        tags=_merge_tags(old.tags if old else (), mine.tags, other.tags),
        verified=_merge_verified(old, mine, other),
        id_derived=False,
    )
    extra, conflicted = _merge_extra(old, mine, other, later), False
    base_body = old.content if old is not None else None
    if mine.content != other.content and other.content != base_body:
        if mine.content == base_body:
            merged = replace(merged, content=other.content)
        else:
            conflicted = True
            earlier = [str(v) for v in (mine.conflict, other.conflict) if v is not None]
            versions = dict.fromkeys([*earlier, other.content])  # a second conflict keeps the first one's text
            extra[CONFLICT_KEY] = CONFLICT_SEPARATOR.join(v for v in versions if v != mine.content)
            extra.pop(CONFLICT_FROM, None)
            if machine:
                extra[CONFLICT_FROM] = machine
    merged = replace(merged, extra=tuple(extra.items()))
    text = fileformat.update(fileformat.decode(ours, relpath), mine, merged)
    return MergeResult(text.encode("utf-8"), conflicted)


def _merge_tags(base: tuple[str, ...], ours: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[str, ...]:
    removed = (set(base) - set(ours)) | (set(base) - set(theirs))
    return tuple(dict.fromkeys(t for t in (*ours, *theirs) if t not in removed))


def _merge_verified(base: Memory | None, ours: Memory, theirs: Memory) -> bool:
    """The side that changed `verified`; when both did, the side a person wrote (ours on a tie).

    A person's verification vouches for the text they saw: when the other side
    changed the body meanwhile, the merged memory is not verified.
    """
    if ours.verified == theirs.verified:
        return ours.verified
    if base is not None:
        setter, other = (theirs, ours) if ours.verified == base.verified else (ours, theirs)
        if setter.verified and other.content != base.content:
            return False
        return setter.verified
    if theirs.source is Source.USER and ours.source is not Source.USER:
        return theirs.verified
    return ours.verified


def _merge_extra(base: Memory | None, ours: Memory, theirs: Memory, later: Memory) -> dict[str, Any]:
    mine, other, old = dict(ours.extra), dict(theirs.extra), dict(base.extra) if base else {}
    merged: dict[str, Any] = {}
    for name in dict.fromkeys([*mine, *other]):
        a, b, o = mine.get(name, _SAME), other.get(name, _SAME), old.get(name, _SAME)
        value = a if a == b or b == o else b if a == o else dict(later.extra).get(name, _SAME)
        if value is not _SAME:
            merged[name] = value
    return merged


def conflict_sides(memory: Memory, machine: str | None) -> tuple[str, str]:
    """(this machine's text, the other side's) of a conflicted memory, for the machine named `machine`.

    The body is the text of the machine that made the merge (`conflict_body_from`; when none is
    recorded, this one). On another machine its own text is the other side's at that merge: the last
    version in `conflict_theirs`; the other side is then the body and any earlier versions.
    """
    theirs = str(memory.conflict or "")
    made_by = dict(memory.extra).get(CONFLICT_FROM)
    if made_by is None or str(made_by) == machine:
        return memory.content, theirs
    versions = theirs.split(CONFLICT_SEPARATOR)
    return versions[-1], CONFLICT_SEPARATOR.join([memory.content, *versions[:-1]])
