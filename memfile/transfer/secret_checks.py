"""An import's checks for secrets: everything a record writes into a memory's file passes
`secretscan.guard`, and a refusal names the record and the field. What the mind's memory already holds
is not scanned again (a person's hand edit is theirs).
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Iterable
from datetime import date
from typing import Any

from ..model import Memory
from ..secretscan import OFF, SecretPolicy, guard

#: Runs `compute` in another process while this one goes on: the wait for its bytes (None: it failed), or
#: None when it cannot (nothing runs). The Vault hands one in (`index.fastpath.aside`, `scan_child`).
Aside = Callable[[Callable[[], bytes]], Callable[[], bytes | None] | None]


class SecretChecks:
    """An import's checks for secrets (`secretscan.guard` on everything a record writes into the file: its
    content, its tags, the unknown keys it gives, a raw record's whole text), made in record order once the records
    are checked: the first refusal raises, the warnings come back.

    With `aside` (a large import), every record's texts are scanned in another process meanwhile; only a
    text found holding something there is scanned here again, by `guard`, for its message. `close()`
    waits for that process: call it on the way out, an error's included.
    """

    def __init__(
        self, records: list[Any], secrets: SecretPolicy | None, allow_secret: bool, aside: Aside | None
    ) -> None:
        self._secrets, self._allow_secret = secrets, allow_secret
        self._pending: list[
            tuple[int | None, str, list[tuple[str, str]], bool]
        ] = []  # (position in texts, kind, checks, agent)
        policy = secrets or SecretPolicy()
        texts: list[str | None] = [  # record i's content at i, then the others' (`self._more`)
            r["content"].replace("\r\n", "\n").strip()
            if isinstance(r, dict) and isinstance(r.get("content"), str) and r.get("raw") is None
            else None
            for r in records
        ]
        more: list[tuple[int, str, str]] = []  # (record index, kind, text) of tags, unknown keys and raw texts
        for i, r in enumerate(records):
            if isinstance(r, dict) and (r.get("raw") is not None or r.get("extra") or r.get("tags")):
                raw, extra = r.get("raw"), r.get("extra")
                if isinstance(raw, str):  # its whole text: the content in it too
                    more.append((i, "raw", raw))
                elif raw is None and isinstance(extra, dict):
                    more.append((i, "extra", _scanned_text(extra.items())))
                if raw is None and (tags := _tags_text(r.get("tags"))):
                    more.append((i, "tags", tags))
        self._more = {(i, kind): len(records) + n for n, (i, kind, _) in enumerate(more)}
        texts += [text for _, _, text in more]

        def scan() -> bytes:  # the indexes of the texts holding something
            return marshal.dumps(
                [i for i, text in enumerate(texts) if text is not None and policy.check(text, allow_secret=True)]
            )

        self._texts = texts
        self._wait = aside(scan) if aside is not None and policy.policy != OFF else None
        self._flagged: set[int] | None = None

    def add(self, index: int, kind: str, checks: list[tuple[str, str]], agent: bool) -> None:
        """Check record `index`'s text of `kind` (`content`, `tags`, `extra` or `raw`) before the import is made:
        `checks` holds the texts written, each with how messages name it ("record 3 (fact/x): the content")."""
        if self._allow_secret and agent:  # refused whatever the text
            guard(self._secrets, "", what=checks[0][0], allow_secret=True, agent=True)
        position = index if kind == "content" else self._more.get((index, kind))
        self._pending.append((position, kind, checks, agent))

    def finish(self) -> list[str]:
        """Run the checks added so far: the warnings, in record order.

        Raises:
            SecretFound: the first text the policy refuses.
        """
        self.close()
        flagged, pending, self._pending = self._flagged, self._pending, []
        warnings = []
        for position, kind, checks, agent in pending:
            if (
                flagged is not None
                and position is not None
                and position not in flagged
                and (kind != "content" or self._texts[position] == checks[0][1])
            ):
                continue  # found holding nothing (the unknown keys checked are some of those scanned)
            for what, text in checks:
                if warned := guard(self._secrets, text, what=what, allow_secret=self._allow_secret, agent=agent):
                    warnings.append(warned)
        return warnings

    def close(self) -> None:
        """Wait for the other process (once): what it found, unless it failed."""
        if self._wait is not None:
            found, self._wait = self._wait(), None
            self._flagged = set(marshal.loads(found)) if found is not None else None


def add_checks(
    checks: SecretChecks,
    number: int,
    where: str,
    record: dict[str, Any],
    memory: Memory,
    data: bytes | None,
    old: Memory | None,
    on_disk: bytes | None,
    agent: bool,
) -> None:
    """Add the secret checks of what record `number` (`where`) writes into the mind, not of what stays as
    it is there: a new memory's id and path (git keeps both); a raw record's whole text (unless the file
    holds it already); else its content, and each unknown key it gives whose value the mind's memory does
    not hold (nested values too)."""
    index = number - 1
    # how messages name the record: "record 2, memories[1] (id ...) (fact/s2): the content"
    named = f"{where} ({memory.ref})" if where == f"record {number}" else f"record {number}, {where} ({memory.ref})"
    if old is None:  # a new memory's id and file name go into git too (its commit, its path)
        checks.add(index, "names", [(f"{named}: the id", memory.id), (f"{named}: the path", memory.path)], agent)
    if data is not None:
        if old is None or data != on_disk:
            checks.add(index, "raw", [(f"{named}: the file's text (raw)", record["raw"])], agent)
        return
    if old is None or old.content != memory.content:
        checks.add(index, "content", [(f"{named}: the content", memory.content)], agent)
    if memory.tags and (old is None or old.tags != memory.tags):
        checks.add(index, "tags", [(f"{named}: a tag", "\n".join(memory.tags))], agent)
    if memory.extra:
        held = dict(old.extra) if old is not None else {}
        given = [(name, value) for name, value in memory.extra if name not in held or plain(held[name]) != value]
        if given:
            keys = [
                (f"{named}: the front-matter key {name!r}", _scanned_text(((name, value),))) for name, value in given
            ]
            checks.add(index, "extra", keys, agent)


def _tags_text(tags: Any) -> str:
    """A record's tags as the scan reads them (as written: lowercased, a line each); "" when it has none or
    they are not tags (the record is refused for that)."""
    from ..errors import InvalidInput
    from ..model import parse_tags

    try:
        return "\n".join(parse_tags(tags))
    except InvalidInput:
        return ""


def _scanned_text(items: Iterable[tuple[str, Any]]) -> str:
    """Unknown keys as the scan for secrets reads them: a `name: value` line per value, nested ones too (the
    keyword rule finds `password: ...`; a value-shaped rule finds a token anywhere)."""
    lines: list[str] = []

    def walk(name: str, value: Any) -> None:
        if isinstance(value, dict):
            lines.append(f"{name}:")
            for inner, item in value.items():
                walk(str(inner), item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(name, item)
        else:
            lines.append(f"{name}: {value}")

    for name, value in items:
        walk(str(name), value)
    return "\n".join(lines)


def plain(value: Any) -> Any:
    """A front-matter value as an export record gives it (`Memory.to_dict`'s `extra`: a YAML date as ISO text)."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)
