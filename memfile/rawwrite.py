"""Raw writes (`Vault.write_raw`, behind Claude's memory tool): memory files written with the exact text
a caller gives, in one commit through the mind's `Writer`, with the checks a text edit needs and a `store`
gets from its arguments: a file memfile can read, no other file's (category, key) or id, and nothing an
agent could not store (verified, critical, a person's) nor a change to what a person verified or made critical.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import fileformat
from .errors import Conflict, FileParseError, InvalidInput, Refused
from .model import AGENT_PRIORITY_CAP, MAX_TAGS, Memory, Priority, Source, too_many_tags, utc_now
from .paths import safe_path
from .secretscan import guard
from .swap import EditedMeanwhile
from .writer import AGENT_CAP_REFUSAL, Writer


def write_raw(
    writer: Writer,
    changes: Mapping[str, str | None],
    subject: str,
    based_on: Mapping[str, bytes | None],
    allow_secret: bool = False,
) -> str | None:
    with writer.transaction():
        known = {memory.path: memory for memory in writer._index.memories()}
        written: list[tuple[str, bytes | None]] = []
        new: dict[str, Memory] = {}
        for relpath, text in changes.items():
            path = safe_path(writer.root, relpath, writer.mind)
            if not relpath.endswith(".md"):
                raise InvalidInput("path", relpath, "a memory file's path, ending in .md")
            old = known.get(relpath)
            if old is not None:
                data = writer.record_hand_edit(old)
            elif path.exists():
                raise Refused(
                    f"{relpath} is a file memfile cannot read (memfile doctor names the problem); "
                    "it is never overwritten: mend it by hand first"
                )
            else:
                data = None
            if relpath in based_on and based_on[relpath] != data:
                raise EditedMeanwhile(relpath)
            if old is not None and writer.actor is Source.AGENT and (old.verified or old.priority is Priority.CRITICAL):
                why = "verified by a person" if old.verified else "critical"
                raise Refused(
                    f"{old.ref} is {why}, so an agent cannot change or remove it; "
                    f"store the correction as a new memory with supersedes={old.ref!r}"
                )
            encoded = None
            if text is not None:
                encoded = text.encode("utf-8")
                new[relpath] = _checked(writer, relpath, encoded, old)
                agent = writer.actor is Source.AGENT
                for what, checked in (("the new file's path", relpath if old is None else ""), (relpath, text)):
                    if warned := guard(
                        writer.config.secrets, checked, what=what, allow_secret=allow_secret, agent=agent
                    ):
                        writer.notices.append(warned)
            if encoded != data:
                written.append((relpath, encoded))
        _unique(new, [m for path, m in known.items() if path not in changes])
        if not written:
            return None
        return writer.apply_all(written, f"{subject} ({writer.actor})")


def _checked(writer: Writer, relpath: str, data: bytes, old: Memory | None) -> Memory:
    """The memory `data` holds, refused when it cannot be read back or is not the caller's to write."""
    try:
        memory = fileformat.parse(data, relpath, utc_now())
    except FileParseError as exc:
        line = f" (line {exc.line})" if exc.line else ""
        raise InvalidInput("text", relpath, "a memory file memfile can read", reason=f"{exc.reason}{line}") from None
    if len(memory.tags) > MAX_TAGS and (old is None or old.tags != memory.tags):
        raise too_many_tags(f"tags of {relpath}", len(memory.tags))
    if writer.actor is Source.AGENT:
        if memory.source is Source.USER and not (old is not None and old.source is Source.USER):
            raise Refused(
                f"{relpath} would be a person's memory (a file without `source:` is taken as one); "
                "an agent's file says `source: agent` in its front-matter"
            )
        if memory.verified and not (old is not None and old.verified):
            raise Refused("agents cannot verify memories: only a person can (verified: true was refused)")
        if memory.priority.rank < AGENT_PRIORITY_CAP.rank and not (old is not None and old.priority == memory.priority):
            raise Refused(AGENT_CAP_REFUSAL, hint="raise_critical")
    return memory


def _unique(new: dict[str, Memory], others: list[Memory]) -> None:
    """Refuse two files holding one (category, key) or one id: memfile would not know which is the memory."""
    held: dict[object, str] = {}
    for memory in others:
        held[(memory.category, memory.key)] = memory.path
        held[memory.id] = memory.path
    for relpath, memory in new.items():
        for claim, what in (((memory.category, memory.key), memory.ref), (memory.id, f"the id {memory.id}")):
            if claim in held:
                raise Conflict(
                    f"{relpath} would hold {what}, which {held[claim]} already holds; "
                    "change that file instead, or give this one another key"
                )
            held[claim] = relpath
