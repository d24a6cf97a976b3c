"""An import's checks for secrets: everything a record writes into a memory's file passes
`secretscan.guard`, and a refusal names the record and the field. What the mind's memory already holds
is not scanned again (a person's hand edit is theirs).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from ..model import Memory
from ..secretscan import SecretPolicy, guard


class SecretChecks:
    """An import's checks for secrets (`secretscan.guard` on everything a record writes into the file: its
    content, its tags, the unknown keys it gives, a raw record's whole text), made in record order once the records
    are checked: the first refusal raises, the warnings come back.
    """

    def __init__(self, secrets: SecretPolicy | None, allow_secret: bool) -> None:
        self._secrets, self._allow_secret = secrets, allow_secret
        self._pending: list[tuple[list[tuple[str, str]], bool]] = []  # (checks, agent)

    def add(self, checks: list[tuple[str, str]], agent: bool) -> None:
        """Check texts a record writes before the import is made: `checks` holds each with how messages
        name it ("record 3 (fact/x): the content")."""
        if self._allow_secret and agent:  # refused whatever the text
            guard(self._secrets, "", what=checks[0][0], allow_secret=True, agent=True)
        self._pending.append((checks, agent))

    def finish(self) -> list[str]:
        """Run the checks added so far: the warnings, in record order.

        Raises:
            SecretFound: the first text the policy refuses.
        """
        pending, self._pending = self._pending, []
        warnings = []
        for checks, agent in pending:
            for what, text in checks:
                if warned := guard(self._secrets, text, what=what, allow_secret=self._allow_secret, agent=agent):
                    warnings.append(warned)
        return warnings


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
    # how messages name the record: "record 2, memories[1] (id ...) (fact/s2): the content"
    named = f"{where} ({memory.ref})" if where == f"record {number}" else f"record {number}, {where} ({memory.ref})"
    if old is None:  # a new memory's id and file name go into git too (its commit, its path)
        checks.add([(f"{named}: the id", memory.id), (f"{named}: the path", memory.path)], agent)
    if data is not None:
        if old is None or data != on_disk:
            checks.add([(f"{named}: the file's text (raw)", record["raw"])], agent)
        return
    if old is None or old.content != memory.content:
        checks.add([(f"{named}: the content", memory.content)], agent)
    if memory.tags and (old is None or old.tags != memory.tags):
        checks.add([(f"{named}: a tag", "\n".join(memory.tags))], agent)
    if memory.extra:
        held = dict(old.extra) if old is not None else {}
        given = [(name, value) for name, value in memory.extra if name not in held or plain(held[name]) != value]
        if given:
            keys = [
                (f"{named}: the front-matter key {name!r}", _scanned_text(((name, value),))) for name, value in given
            ]
            checks.add(keys, agent)


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
