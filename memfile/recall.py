"""Recall: choose and render memories for an agent's context window. Pure.

Order: priority (critical first), then recency (newest `updated_at` first).
Tokens are estimated as one token per 4 characters of the rendered text,
rounded up (`estimate_tokens`). Under a budget the output is cut in this
order until it fits: low memories are shortened (oldest first), then left
out (oldest first); then the same for normal, then high; critical memories
are shortened as a last resort but never left out. A closing line says what
was cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidInput
from .model import Memory, Priority

CHARS_PER_TOKEN = 4
SHORT_CHARS = 80
_FULL, _SHORT, _OUT = "full", "short", "out"


def estimate_tokens(text: str) -> int:
    """The documented token estimate: ceil(characters / 4)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class RecallItem:
    memory: Memory
    shortened: bool = False


@dataclass(frozen=True)
class RecallReport:
    """What recall chose, and the text it rendered."""

    mind: str
    mind_name: str
    text: str
    items: tuple[RecallItem, ...]
    total: int
    verified: int
    left_out: int
    shortened: int
    budget: int | None
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "mind": self.mind,
            "name": self.mind_name,
            "total": self.total,
            "verified": self.verified,
            "unverified": self.total - self.verified,
            "budget": self.budget,
            "tokens": self.tokens,
            "left_out": self.left_out,
            "shortened": self.shortened,
            "memories": [item.memory.to_dict() | {"shortened": item.shortened} for item in self.items],
        }


def order(memories: list[Memory]) -> list[Memory]:
    """Priority first (critical on top), then newest first, then by REF for stability."""
    by_ref = sorted(memories, key=lambda m: (str(m.category), m.key, m.path))
    by_recency = sorted(by_ref, key=lambda m: m.updated_at, reverse=True)
    return sorted(by_recency, key=lambda m: m.priority.rank)


def _short(content: str) -> str:
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    cut = len(first) > SHORT_CHARS or len([ln for ln in content.splitlines() if ln.strip()]) > 1
    return (first[: SHORT_CHARS - 1].rstrip() + "…") if len(first) > SHORT_CHARS else first + (" …" if cut else "")


def _entry(memory: Memory, shortened: bool) -> str:
    """An entry without its `[NNN] ` number (numbers are added once the selection is final)."""
    state = "verified" if memory.verified else "unverified"
    lines = [f"{memory.category} ({memory.priority.upper()}) [{state}]", f"  {memory.key}"]
    body = _short(memory.content) if shortened else memory.content
    lines += [f"  {line.rstrip()}" for line in body.splitlines() if line.strip()]
    if memory.tags:
        lines.append("  Tags: " + ", ".join(memory.tags))
    return "\n".join(lines)


def _closing(left_out: int, shortened: int, budget: int | None) -> str:
    if not left_out and not shortened:
        return ""
    cut = ", ".join(
        part for part in (f"{left_out} left out" if left_out else "", f"{shortened} shortened" if shortened else "") if part
    )
    hint = "see all: memfile list" if left_out else "read one whole: memfile show REF"
    return f"({cut} to fit {budget} tokens; {hint})"


def recall(memories: list[Memory], mind: str, mind_name: str, budget: int | None = None) -> RecallReport:
    """Choose and render the recall of `memories` (already filtered: no expired ones).

    Args:
        memories: the candidates.
        mind, mind_name: the mind folder and its display name for the header.
        budget: the most tokens the text may take (by `estimate_tokens`); None = no limit.
    """
    chosen = order(memories)
    verified = sum(1 for m in chosen if m.verified)
    header = f"Mind: {mind_name}\nMemories: {len(chosen)} total ({verified} verified, {len(chosen) - verified} unverified)"
    width = max(3, len(str(len(chosen))))
    modes = [_FULL] * len(chosen)
    texts = {(i, _FULL): _entry(m, False) for i, m in enumerate(chosen)}

    def cost(i: int, mode: str) -> int:
        """Characters entry i takes in this mode: `[NNN] `, the entry, the blank line before it."""
        if mode == _OUT:
            return 0
        if (i, mode) not in texts:
            texts[(i, mode)] = _entry(chosen[i], True)
        return width + 3 + len(texts[(i, mode)]) + 2

    body = sum(cost(i, _FULL) for i in range(len(chosen)))
    counts = {_FULL: len(chosen), _SHORT: 0, _OUT: 0}

    def size() -> int:
        closing = _closing(counts[_OUT], counts[_SHORT], budget)
        return len(header) + body + (len(closing) + 2 if closing else 0) + 1

    if budget is not None:
        limit = budget * CHARS_PER_TOKEN
        steps = []
        for tier in (Priority.LOW, Priority.NORMAL, Priority.HIGH, Priority.CRITICAL):
            oldest_first = [i for i in reversed(range(len(chosen))) if chosen[i].priority is tier]
            steps += [(i, _SHORT) for i in oldest_first]
            if tier is not Priority.CRITICAL:
                steps += [(i, _OUT) for i in oldest_first]
        for i, mode in steps:
            if size() <= limit:
                break
            if mode == _SHORT and cost(i, _SHORT) >= cost(i, _FULL):
                continue
            body += cost(i, mode) - cost(i, modes[i])
            counts[modes[i]] -= 1
            counts[mode] += 1
            modes[i] = mode
        if size() > limit:
            need = estimate_tokens("x" * size())
            while len(header) + body + len(_closing(counts[_OUT], counts[_SHORT], need)) + 3 > need * CHARS_PER_TOKEN:
                need += 1  # the closing line names the budget, so its length moves with it
            raise InvalidInput(
                "budget", budget, f"{need} tokens or more for this mind (the header and its critical memories, shortened, need that)"
            )

    kept = [(i, mode) for i, mode in enumerate(modes) if mode != _OUT]
    items = tuple(RecallItem(chosen[i], mode == _SHORT) for i, mode in kept)
    entries = [f"[{n:0{width}d}] {texts[(i, mode)]}" for n, (i, mode) in enumerate(kept, 1)]
    closing = _closing(modes.count(_OUT), modes.count(_SHORT), budget)
    text = "\n\n".join([header, *entries, *([closing] if closing else [])]) + "\n"
    return RecallReport(
        mind=mind, mind_name=mind_name, text=text, items=items, total=len(chosen), verified=verified,
        left_out=modes.count(_OUT), shortened=modes.count(_SHORT), budget=budget, tokens=estimate_tokens(text),
    )
