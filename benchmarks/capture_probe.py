"""The held-out quality set of `Vault.capture`: short conversations and the decisions a careful person makes.

A data module, not a benchmark (standard library only; tests/test_capture_probe.py runs `check()`).
benchmarks/data/capture_probe.jsonl was written by hand before the capture prompt or its decision rules
were tuned. Each line is one conversation:

- `id` (0, 1, ...), `session` (a name such as "trip-planning-1");
- `mind_before`: the memories the mind holds before it ({category, key, content, tags?, priority?});
- `messages`: the conversation in the chat format apps send (role user/assistant/system; content a string
  or a list of `{"type": "text", "text": ...}` blocks);
- `candidates`: what a deterministic extractor returning the conversation's EXPLICIT statements returns
  ({category, key, content, tags, priority, confidence, turns}; `turns` are the 0-based indexes of the
  messages a statement came from). Assistant suggestions the user did not adopt, debugging dead ends and a
  pasted secret are not among them (a careful extractor drops them); restatements of what the mind holds
  and a few junk duplicates are, so that the decision step is tested;
- `expected`: one per candidate, in order: `{"decision": "add"}`, `{"decision": "update", "target":
  "category/key"}` (it restates or changes that memory: it supersedes it) or `{"decision": "skip",
  "target": "category/key"}` (the mind already says the same), each with a short `why`. A target is a
  memory of `mind_before`, or a candidate added earlier in the same conversation (the extractor said the
  same thing twice): capture decides the candidates in order, each against what the mind holds by then.

Odd ids are the tune half (look at them while tuning the prompt or the rules), even ids the held-out half
(report only).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

PROBE = Path(__file__).resolve().parent / "data" / "capture_probe.jsonl"
CATEGORIES = ("identity", "preference", "fact", "project", "skill", "mistake", "context", "note")
PRIORITIES = ("low", "normal", "high", "critical")
#: The highest priority an agent's memory may carry (memfile.model.AGENT_PRIORITY_CAP): captured ones are the agent's.
CANDIDATE_PRIORITIES = ("low", "normal", "high")
DECISIONS = ("add", "update", "skip")
ROLES = ("user", "assistant", "system")
KEY = re.compile(r"[a-z0-9][a-z0-9_]{0,99}")
CANDIDATE_FIELDS = ("category", "key", "content", "tags", "priority", "confidence", "turns")
TURNS = (4, 12)


def load(path: Path | str = PROBE) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def tune_half(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cases if c["id"] % 2 == 1]


def held_out(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cases if c["id"] % 2 == 0]


def deterministic_extractor(case: dict[str, Any]) -> str:
    """What an extractor returns for this conversation: its candidates as `{"memories": [...]}` JSON text."""
    return json.dumps(
        {"memories": [{f: c[f] for f in CANDIDATE_FIELDS} for c in case["candidates"]]}, ensure_ascii=False
    )


def counts(cases: list[dict[str, Any]]) -> Counter[str]:
    """How many candidates the careful person adds, updates and skips."""
    return Counter(e["decision"] for c in cases for e in c["expected"])


def _ref(memory: dict[str, Any]) -> str:
    return f"{memory['category']}/{memory['key']}"


def _memory_problems(where: str, m: dict[str, Any], priorities: tuple[str, ...]) -> list[str]:
    found = []
    if m.get("category") not in CATEGORIES:
        found.append(f"{where}: category {m.get('category')!r} is not one of {', '.join(CATEGORIES)}")
    if not isinstance(m.get("key"), str) or not KEY.fullmatch(m["key"]):
        found.append(f"{where}: key {m.get('key')!r} is not snake_case ({KEY.pattern})")
    if not isinstance(m.get("content"), str) or not m["content"].strip():
        found.append(f"{where}: content is empty or not text")
    tags = m.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        found.append(f"{where}: tags must be a list of non-empty strings")
    if m.get("priority", "normal") not in priorities:
        found.append(f"{where}: priority {m.get('priority')!r} is not one of {', '.join(priorities)}")
    return found


def _message_problems(where: str, message: dict[str, Any]) -> list[str]:
    if message.get("role") not in ROLES:
        return [f"{where}: role {message.get('role')!r} is not one of {', '.join(ROLES)}"]
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return []
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"]
            for b in content
        )
    ):
        return []
    return [f"{where}: content must be text or a list of text blocks"]


def _case_problems(case: dict[str, Any]) -> list[str]:
    name = f"case {case.get('id')} ({case.get('session')})"
    found: list[str] = []
    mind = {}
    for i, m in enumerate(case["mind_before"]):
        found += _memory_problems(f"{name} mind_before[{i}]", m, PRIORITIES)
        if _ref(m) in mind:
            found.append(f"{name} mind_before[{i}]: {_ref(m)} twice")
        mind[_ref(m)] = m
    messages = case["messages"]
    if not TURNS[0] <= len(messages) <= TURNS[1]:
        found.append(f"{name}: {len(messages)} messages, not {TURNS[0]}-{TURNS[1]}")
    for i, message in enumerate(messages):
        found += _message_problems(f"{name} messages[{i}]", message)
    if len(case["candidates"]) != len(case["expected"]):
        found.append(f"{name}: {len(case['candidates'])} candidates but {len(case['expected'])} expected decisions")
    held = set(mind)  # what the mind holds as the candidates are decided in order
    for i, (cand, exp) in enumerate(zip(case["candidates"], case["expected"], strict=False)):
        where = f"{name} candidate {i} ({cand.get('category')}/{cand.get('key')})"
        found += _memory_problems(where, cand, CANDIDATE_PRIORITIES)
        if sorted(cand) != sorted(CANDIDATE_FIELDS):
            found.append(f"{where}: fields {sorted(cand)}, not {sorted(CANDIDATE_FIELDS)}")
        conf = cand.get("confidence")
        if not isinstance(conf, int | float) or not 0 <= conf <= 1:
            found.append(f"{where}: confidence {conf!r} is not a number from 0 to 1")
        turns = cand.get("turns")
        if not isinstance(turns, list) or not turns:
            found.append(f"{where}: turns must be a non-empty list")
        else:
            for t in turns:
                if not isinstance(t, int) or not 0 <= t < len(messages):
                    found.append(f"{where}: turn {t!r} is not a message index (0-{len(messages) - 1})")
                elif messages[t]["role"] == "system":
                    found.append(f"{where}: turn {t} is a system message")
        decision, target = exp.get("decision"), exp.get("target")
        if decision not in DECISIONS:
            found.append(f"{where}: decision {decision!r} is not one of {', '.join(DECISIONS)}")
        if not exp.get("why"):
            found.append(f"{where}: no why")
        if decision == "add":
            if target is not None:
                found.append(f"{where}: an add has no target")
            if _ref(cand) in held:
                found.append(f"{where}: added under {_ref(cand)}, which the mind already holds")
            held.add(_ref(cand))
        elif decision in ("update", "skip") and target not in held:
            found.append(f"{where}: target {target!r} is not a memory of mind_before nor an earlier added candidate")
        elif decision == "update":
            held.add(_ref(cand))
    return found


def check(cases: list[dict[str, Any]] | None = None) -> list[str]:
    """Every problem of the set, one sentence each (an empty list: the set is sound)."""
    cases = load() if cases is None else cases
    found = [f"case {c.get('id')}: id out of order (expected {i})" for i, c in enumerate(cases) if c.get("id") != i]
    sessions = Counter(c.get("session") for c in cases)
    found += [f"session {s!r} is used {n} times" for s, n in sessions.items() if n > 1 or not s]
    for case in cases:
        missing = {"id", "session", "mind_before", "messages", "candidates", "expected"} - set(case)
        if missing:
            found.append(f"case {case.get('id')}: missing {', '.join(sorted(missing))}")
        else:
            found += _case_problems(case)
    return found


if __name__ == "__main__":
    every = load()
    problems = check(every)
    print("\n".join(problems) or "capture_probe.jsonl: sound")
    for label, part in (("all", every), ("tune (odd)", tune_half(every)), ("held out (even)", held_out(every))):
        n = counts(part)
        total = sum(n.values())
        print(f"{label}: {len(part)} conversations, {total} candidates: {dict(n)}")
    raise SystemExit(1 if problems else 0)
