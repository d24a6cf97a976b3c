"""Capture: memories proposed from a conversation (`Vault.capture`), and the review of proposed ones.

An app hands over a conversation (chat messages) and its own model call (`extract`); memfile asks it with
`PROMPT` for the facts worth keeping, checks every candidate it answers (nothing is written when one is
wrong), and decides each against what the mind already holds: **add** a new memory, **update** one it
restates (the new memory supersedes it; the old version stays, superseded, and in git), or **skip** a
duplicate. Every decision and its reason is in the commit message. Captured memories are the agent's
(unverified, at most `high`) and carry where they came from: `captured_from` (the session) and
`captured_turns` (the message indexes). With `[capture] review` (the default) they wait as
`status: proposed`, out of recall, search and every agent's read, until a person accepts them (`accept`,
which may change them first: an edit) or rejects them (`reject`: forgotten). docs/capture.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, NotFound, Refused
from .model import (
    AGENT_PRIORITY_CAP,
    CAPTURED_FROM,
    CAPTURED_LINES,
    CAPTURED_TURNS,
    PROPOSED_SUPERSEDES,
    UNSET,
    Category,
    Memory,
    Priority,
    Report,
    Source,
    Status,
    new_id,
    parse_category,
    parse_confidence,
    parse_priority,
    parse_tags,
    utc_now,
    validate_key,
)
from .paths import memory_relpath
from .text import tokens

if TYPE_CHECKING:
    from .index import Index
    from .writer import Writer

#: The version of `PROMPT`: a changed prompt is a new version (captured memories do not record it; the
#: commit message of a capture does).
PROMPT_VERSION = 1
#: What memfile asks the app's model (`extract(PROMPT, transcript)`): the facts worth keeping, as JSON.
PROMPT = """You read a conversation between a user and an assistant and pick out what is worth remembering \
about the user for later conversations: facts about them and the people, places, projects and things in \
their life; their preferences; decisions they made; skills, mistakes and lessons they stated.

Keep only what the conversation states explicitly: what the user said, or what the assistant said and the \
user confirmed. Leave out the assistant's suggestions the user did not take, guesses, small talk, dead ends \
of a debugging session, anything the user asked to forget, and secrets (passwords, keys, tokens). When the \
user corrects or changes something, write the new state only. Write each memory as one short, \
self-contained statement in the conversation's language, naming who it is about.

Answer with JSON only, no prose, in this form:
{"memories": [{"category": "preference", "key": "flight_seat", "content": "Prefers window seats on flights.",
  "tags": ["travel"], "priority": "normal", "confidence": 0.9, "turns": [3]}]}

- category: one of identity, preference, fact, project, skill, mistake, context, note
- key: snake_case ASCII naming the subject (a-z, 0-9, _; at most 60 characters), stable across conversations \
(the same subject gets the same key)
- priority: low, normal or high
- confidence: 0 to 1, how sure the conversation makes it
- turns: the numbers of the messages it comes from, as shown in [brackets]
Answer {"memories": []} when nothing is worth keeping."""

#: Bounds of what a capture reads: messages, characters of the transcript, bytes of the model's answer,
#: candidates in it. Beyond them the capture is refused, naming the bound.
MAX_MESSAGES, MAX_TRANSCRIPT, MAX_ANSWER, MAX_CANDIDATES = 1_000, 400_000, 4_000_000, 100
#: The decision rules (tuned on the tune half of benchmarks/data/capture_probe.jsonl; docs/capture.md):
#: a candidate whose words are SKIP_COVER covered by a memory's says nothing new (skip); one sharing
#: UPDATE_SHARE of the words of a memory of its category (or with its key) restates it (update).
SKIP_COVER, UPDATE_SHARE, SIMILAR = 0.7, 0.15, 5
ROLES = ("system", "user", "assistant", "tool", "developer")
ADD, UPDATE, SKIP = "add", "update", "skip"
#: A proposal's quote of the conversation (`CAPTURED_LINES`, what its reviewer reads; dropped on accept): at
#: most QUOTED_LINES messages, each on one line, cut at QUOTED_CHARS, every secret in it masked.
QUOTED_LINES, QUOTED_CHARS = 8, 400

#: The app's model call: (the system prompt, the transcript) -> its answer (JSON text, or the parsed object).
Extract = Callable[[str, str], "str | dict[str, Any] | list[Any]"]


@dataclass(frozen=True)
class Candidate:
    """One memory the model proposed, checked."""

    category: Category
    key: str
    content: str
    tags: tuple[str, ...] = ()
    priority: Priority = Priority.NORMAL
    confidence: float = 0.7
    turns: tuple[int, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.category}/{self.key}"


@dataclass(frozen=True)
class Decision:
    """What capture did with a candidate: `action` add, update or skip, why, the memory it restates or
    repeats (`target`), and the memory written (`memory`; None for a skip or a dry run)."""

    candidate: Candidate
    action: str
    reason: str
    target: Memory | None = None
    memory: Memory | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "ref": self.candidate.ref,
            "reason": self.reason,
            "target": self.target.ref if self.target else None,
            "memory": self.memory.to_dict() if self.memory else None,
        }


@dataclass(frozen=True)
class CaptureReport(Report):
    """`Vault.capture`'s answer: the session, each candidate's decision, whether they wait for review, the
    commit (None: nothing written, or a dry run)."""

    session: str
    decisions: list[Decision]
    proposed: bool
    commit: str | None = None
    dry_run: bool = False
    prompt_version: int = PROMPT_VERSION
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"decisions": [d.to_dict() for d in self.decisions]}


# --- the conversation and the model's answer ---------------------------------------------------------------


def transcript(messages: object) -> str:
    """The conversation as the model reads it: one `[N] role: text` block per message (N from 0).

    Raises:
        InvalidInput: not a list of chat messages ({"role": ..., "content": text or text blocks}), or too long.
    """
    if not isinstance(messages, list | tuple) or not messages:
        raise InvalidInput("messages", _short(messages), 'a non-empty list of {"role": ..., "content": ...}')
    if len(messages) > MAX_MESSAGES:
        raise InvalidInput("messages", f"{len(messages)} messages", f"at most {MAX_MESSAGES:,}")
    lines = []
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InvalidInput(f"messages[{n}].role", _short(message), f"a message with role {', '.join(ROLES)}")
        lines.append(f"[{n}] {message['role']}: {_text(message.get('content'), n)}")
    text = "\n\n".join(lines)
    if len(text) > MAX_TRANSCRIPT:
        raise InvalidInput("messages", f"{len(text):,} characters", f"at most {MAX_TRANSCRIPT:,} characters in all")
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def quoted(messages: list[dict[str, Any]], turns: Sequence[int], allow: Sequence[re.Pattern[str]] = ()) -> list[str]:
    """The lines of a checked conversation (`transcript`'s) a proposal came from, as its reviewer reads them:
    `[N] role: text` on one line, at most QUOTED_LINES, each cut at QUOTED_CHARS, with each secret masked
    (`secretscan.redact`: a pasted token never reaches the vault through a quote)."""
    from .secretscan import redact

    lines = []
    for n in list(turns)[:QUOTED_LINES]:
        text = redact(_text(messages[n].get("content"), n), allow)  # before the join: a key block's lines too
        line = " ".join(f"[{n}] {messages[n]['role']}: {text}".split())
        line = _SURROGATE.sub("\ufffd", line)  # a lone surrogate (valid JSON) has no UTF-8: no file holds it
        lines.append(line if len(line) <= QUOTED_CHARS else line[: QUOTED_CHARS - 1] + "…")
    return lines


def _text(content: object, n: int) -> str:
    """A message's text: a string, or its content blocks' text (other blocks named: `[image]`)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and isinstance(block.get("type"), str):
                parts.append(f"[{block['type']}]")
            else:
                raise InvalidInput(
                    f"messages[{n}].content", _short(block), 'text, or blocks {"type": "text", "text": ...}'
                )
        return "\n".join(parts)
    raise InvalidInput(f"messages[{n}].content", _short(content), 'text, or blocks {"type": "text", "text": ...}')


def parse_answer(answer: object, turns: int) -> list[Candidate]:
    """The candidates of the model's answer (JSON text, possibly in a ``` fence, or the parsed object), each
    checked; `turns` is how many messages the conversation has.

    Raises:
        InvalidInput: the answer is not the documented JSON, or a candidate is wrong (named: its number, its
            REF when it has one, the field and the allowed values).
    """
    if isinstance(answer, bytes | str):
        if len(answer) > MAX_ANSWER:
            raise InvalidInput("extractor answer", f"{len(answer):,} characters", f"at most {MAX_ANSWER:,}")
        text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
        fenced = re.fullmatch(r"\s*```[a-zA-Z]*\s*\n(.*?)\n?```\s*", text, re.S)
        try:
            answer = json.loads(fenced.group(1) if fenced else text)
        except ValueError:
            raise InvalidInput("extractor answer", _short(text), 'JSON: {"memories": [...]}') from None
    items = answer.get("memories") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise InvalidInput("extractor answer", _short(answer), 'JSON: {"memories": [...]}')
    if len(items) > MAX_CANDIDATES:
        raise InvalidInput("memories", f"{len(items):,} candidates", f"at most {MAX_CANDIDATES} in one capture")
    return [_candidate(n, item, turns) for n, item in enumerate(items)]


def _candidate(n: int, item: object, turns: int) -> Candidate:
    where = f"memories[{n}]"
    if not isinstance(item, dict):
        raise InvalidInput(
            where, _short(item), "an object with category, key, content (tags, priority, confidence, turns)"
        )
    ref = f"{item.get('category')}/{item.get('key')}"
    where = f"memories[{n}] ({_short(ref, 60)})"
    unknown = sorted(set(item) - {"category", "key", "content", "tags", "priority", "confidence", "turns"})
    if unknown:
        raise InvalidInput(
            f"{where}.{unknown[0]}", item[unknown[0]], "category, key, content, tags, priority, confidence, turns"
        )
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput(f"{where}.content", _short(content), "non-empty text")
    if content.lstrip().startswith("---"):
        raise InvalidInput(
            f"{where}.content", _short(content), "text that does not start with a --- line (front-matter is memfile's)"
        )
    priority = parse_priority(item.get("priority") or "normal", f"{where}.priority")
    if priority.rank < AGENT_PRIORITY_CAP.rank:
        raise InvalidInput(f"{where}.priority", str(priority), "low, normal or high (a captured memory is the agent's)")
    spans = item.get("turns") or []
    if not isinstance(spans, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < turns for t in spans
    ):
        raise InvalidInput(f"{where}.turns", _short(spans), f"a list of message numbers from 0 to {turns - 1}")
    return Candidate(
        parse_category(item.get("category"), f"{where}.category"),
        validate_key(item.get("key"), f"{where}.key"),
        content.replace("\r\n", "\n").strip(),
        parse_tags(item.get("tags") or [], f"{where}.tags"),
        priority,
        parse_confidence(item["confidence"], f"{where}.confidence") if item.get("confidence") is not None else 0.7,
        tuple(sorted(set(spans))),
    )


def _short(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the decision -------------------------------------------------------------------------------------------


def words(text: str) -> set[str]:
    """The folded words of a text that say something (no stop words, no single letters), English ones by
    their stem (Whoosh's Porter stemmer, as the index stems them: `hikes`, `hiking` -> `hike`)."""
    from .index import STOP_WORDS, stem

    return {stem(t) if t.isascii() else t for t, _, _ in tokens(text) if len(t) > 1 and t not in STOP_WORDS}


#: Words that carry a value: a new one in a candidate is news, never a duplicate ("closes at seven", not six).
NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "first second third fourth fifth half".split()
)


def _values(found: set[str], text: str) -> set[str]:
    """The words among `found` (stems, as `words` gives them) that carry a value: numbers, in digits or words,
    and names (words `text` capitalizes after its first: `Porto`, not Lisbon)."""
    from .index import stem

    values = {stem(w) for w in NUMBER_WORDS}
    values |= {w for name in re.findall(r"(?<=[\w,;:] )[A-Z]\w+", text) for w in words(name)}
    return {w for w in found if any(c.isdigit() for c in w) or w in values}


def _said(said: Candidate | Memory) -> set[str]:
    """The words of a memory (or candidate) a decision weighs: its text's and its key's."""
    return words(f"{said.content} {said.key.replace('_', ' ')}")


def decide(candidate: Candidate, similar: Sequence[Memory]) -> tuple[str, str, Memory | None]:
    """(action, reason, target) for a candidate against the mind's memories most like it (`similar`, best
    first, the memory at its REF among them if there is one). Pure; the rules are the module's constants."""
    mine = _said(candidate)
    same = next((m for m in similar if m.category is candidate.category and m.key == candidate.key), None)
    scored = [  # (cover: share of mine it holds, share of both words, memory, its words)
        (len(mine & theirs) / max(1, len(mine)), len(mine & theirs) / max(1, len(mine | theirs)), m, theirs)
        for m in similar
        for theirs in [_said(m)]
    ]
    best = max(scored, key=lambda s: s[:2], default=None)
    if best is not None and best[0] >= SKIP_COVER and not _values(mine - best[3], candidate.content):
        return SKIP, f"{best[2].ref} already says it ({best[0]:.0%} of its words)", best[2]
    if same is not None:
        return UPDATE, f"it changes {same.ref}, at the same key", same
    related = max((s for s in scored if s[2].category is candidate.category), key=lambda s: s[1], default=None)
    if related is not None and related[1] >= UPDATE_SHARE:
        return UPDATE, f"it restates {related[2].ref} ({related[1]:.0%} of their words shared)", related[2]
    return ADD, "nothing in the mind says it", None


# --- the writes ---------------------------------------------------------------------------------------------


class Capturer:
    """Capture and review for one mind, over its writer (the lock, git), its index, and a search for the
    memories most like a text (`similar(text, limit)`: by words, and by meaning where that is on)."""

    def __init__(self, writer: Writer, index: Index, similar: Callable[[str, int], list[Memory]], review: bool) -> None:
        self._writer, self._index, self._similar, self._review = writer, index, similar, review

    def capture(
        self, messages: object, extract: Extract, session: str | None, review: bool | None, dry_run: bool
    ) -> CaptureReport:
        text = transcript(messages)
        session = _session(session)
        candidates = parse_answer(extract(PROMPT, text), len(messages))  # type: ignore[arg-type]
        writer = self._writer
        for candidate in candidates:  # every store rule (secrets, tags, sizes) before anything is written
            writer.checked(
                candidate.category, candidate.key, candidate.content, tags=list(candidate.tags), source=Source.AGENT
            )
        proposed = self._review if review is None else bool(review)
        allow = writer.config.secrets.allow if writer.config.secrets else ()

        def quote(candidate: Candidate) -> list[str]:
            return quoted(messages, candidate.turns, allow)  # type: ignore[arg-type]

        if dry_run:
            return self._decided(session, candidates, proposed, quote, write=False)
        with writer.transaction():
            return self._decided(session, candidates, proposed, quote, write=True)

    def _decided(
        self,
        session: str,
        candidates: list[Candidate],
        proposed: bool,
        quote: Callable[[Candidate], list[str]],
        write: bool,
    ) -> CaptureReport:
        """Decide each candidate in order (an earlier one of the batch counts as held) and, with `write`,
        write them all in one commit; a proposal quotes the lines it came from (`quote`)."""
        now = utc_now()
        decisions: list[Decision] = []
        changes: list[Memory] = []  # what is written, in order
        held: list[Memory] = []  # the batch's memories so far, which later candidates are decided against
        taken = {m.path for m in self._index.memories()}
        for candidate in candidates:
            similar = self._similar(" ".join(sorted(words(candidate.content)))[:4000] or candidate.key, SIMILAR)
            at_ref = self._index.named(
                candidate.ref, memory_relpath(self._writer.mind, candidate.category, candidate.key).as_posix()
            )
            pool = [*held, *at_ref, *(m for m in similar if m not in at_ref)]
            action, reason, target = decide(candidate, pool)
            memory = None
            if action != SKIP:
                waits = proposed or (target is not None and (target.verified or target.proposed))
                if action == UPDATE and not proposed and waits:
                    reason += f"; {target.ref} is a person's, so the change waits for review" if target else ""
                if action == UPDATE and target is not None and not waits and target.ref == candidate.ref:
                    memory = replace(  # the agent's own memory, changed at its key (git keeps the old text)
                        target,
                        content=candidate.content,
                        tags=candidate.tags or target.tags,
                        priority=candidate.priority,
                        confidence=candidate.confidence,
                        updated_at=now,
                        extra=_provenance(target.extra, session, candidate),
                        id_derived=False,
                    )
                    held.append(memory)
                    changes.append(memory)
                    decisions.append(Decision(candidate, action, reason, target, memory if write else None))
                    continue
                key = _free_key(candidate, taken)
                memory = Memory(
                    id=new_id(),
                    mind=self._writer.mind,
                    category=candidate.category,
                    key=key,
                    content=candidate.content,
                    path=memory_relpath(self._writer.mind, candidate.category, key).as_posix(),
                    created_at=now,
                    updated_at=now,
                    priority=candidate.priority,
                    tags=candidate.tags,
                    source=Source.AGENT,
                    verified=False,
                    confidence=candidate.confidence,
                    status=Status.PROPOSED if waits else None,
                    extra=_provenance(
                        ((PROPOSED_SUPERSEDES, target.id),) if waits and action == UPDATE and target else (),
                        session,
                        candidate,
                    )
                    + (((CAPTURED_LINES, quote(candidate)),) if waits and candidate.turns else ()),
                )
                taken.add(memory.path)
                held.append(memory)
                changes.append(memory)
                if action == UPDATE and target is not None and not waits:
                    changes.append(replace(target, status=Status.SUPERSEDED, superseded_by=memory.id, id_derived=False))
            decisions.append(Decision(candidate, action, reason, target, memory if write else None))
        counts = {a: sum(d.action == a for d in decisions) for a in (ADD, UPDATE, SKIP)}
        commit = self._write(session, decisions, changes, counts) if write and changes else None
        return CaptureReport(session, decisions, proposed, commit, not write, counts=counts)

    def _write(
        self, session: str, decisions: list[Decision], changes: list[Memory], counts: dict[str, int]
    ) -> str | None:
        from . import fileformat

        writer = self._writer
        files: list[tuple[str, bytes | None]] = []
        for memory in changes:
            old = next((m for m in self._index.named(memory.ref, memory.path) if m.id == memory.id), None)
            files.append(
                (memory.path, writer.rewritten(old, memory) if old else fileformat.serialize(memory).encode("utf-8"))
            )
        summary = ", ".join(
            f"{counts[a]} {a}{'ed' if a == ADD else 'd' if a == UPDATE else 'ped'}" for a in (ADD, UPDATE, SKIP)
        )
        lines = [f"{d.action} {d.memory.ref if d.memory else d.candidate.ref}: {d.reason}" for d in decisions]
        subject = (
            f"capture {session} ({writer.actor}): {summary}\n\n"
            + "\n".join(lines)
            + f"\n\nprompt: capture v{PROMPT_VERSION}"
        )
        return writer.apply_all(files, subject)

    # --- review ---------------------------------------------------------------------------------------

    def proposals(self) -> list[Memory]:
        """The mind's proposed memories, oldest first."""
        return sorted((m for m in self._index.memories() if m.proposed), key=lambda m: (m.created_at, m.path))

    def accept(self, ref: str, changes: dict[str, Any]) -> Memory:
        """A proposal made a verified memory (with `changes` of content, tags, priority, expires first: an
        edit), superseding the memory it would update; one commit."""
        writer = self._writer
        if writer.actor is Source.AGENT:
            raise Refused("only a person reviews captured memories: ask the user to run memfile review")
        with writer.transaction():
            proposal = self._proposal(ref)
            request = writer.checked(
                proposal.category,
                proposal.key,
                changes.get("content", proposal.content),
                **{k: v for k, v in changes.items() if k != "content"},
            )
            extra = tuple((k, v) for k, v in proposal.extra if k not in (PROPOSED_SUPERSEDES, CAPTURED_LINES))
            accepted = replace(
                proposal,
                content=request.content,
                tags=request.tags if request.tags is not None else proposal.tags,
                priority=request.priority or proposal.priority,
                expires_at=proposal.expires_at if request.expires is UNSET else request.expires,
                status=None,
                verified=True,
                extra=extra,
                updated_at=utc_now(),
            )
            files: list[tuple[str, bytes | None]] = [(proposal.path, writer.rewritten(proposal, accepted))]
            target_id = dict(proposal.extra).get(PROPOSED_SUPERSEDES)
            target = next((m for m in self._index.memories() if m.id == target_id), None) if target_id else None
            subject = f"accept {proposal.ref} ({Source.USER})"
            if target is not None and not target.superseded:
                superseded = replace(target, status=Status.SUPERSEDED, superseded_by=proposal.id, id_derived=False)
                files.append((target.path, writer.rewritten(target, superseded)))
                subject += f", superseding {target.ref}"
            writer.apply_all(files, subject)
            return accepted

    def reject(self, ref: str) -> Memory:
        """A proposal forgotten (git keeps it); one commit."""
        writer = self._writer
        if writer.actor is Source.AGENT:
            raise Refused("only a person reviews captured memories: ask the user to run memfile review")
        with writer.transaction():
            proposal = self._proposal(ref)
            writer.record_hand_edit(proposal)
            writer.apply(proposal.path, None, "reject", proposal.ref, Source.USER)
            return proposal

    def _proposal(self, ref: str) -> Memory:
        memory = self._writer.find(ref)
        if not memory.proposed:
            raise NotFound(f"{memory.ref} is not waiting for review (only proposed memories are: memfile review)")
        return memory


def _session(session: object) -> str:
    """The session's name: given (one line of at most 200 characters), or `capture-<time>`."""
    if session is None:
        return f"capture-{utc_now():%Y%m%dT%H%M%SZ}"
    if not isinstance(session, str) or not session.strip() or len(session) > 200 or any(c < " " for c in session):
        raise InvalidInput("session", _short(session), "one line of text, at most 200 characters")
    return session.strip()


def _provenance(extra: tuple[tuple[str, Any], ...], session: str, candidate: Candidate) -> tuple[tuple[str, Any], ...]:
    """`extra` with where a captured memory came from: the session and the message numbers."""
    kept = tuple((k, v) for k, v in extra if k not in (CAPTURED_FROM, CAPTURED_TURNS))
    return ((CAPTURED_FROM, session), (CAPTURED_TURNS, list(candidate.turns)), *kept)


def _free_key(candidate: Candidate, taken: set[str]) -> str:
    """The candidate's key, or `key_2`, `key_3`... when its file is taken (a proposal beside the memory it
    would update)."""
    mind_path = lambda key: f"{candidate.category}/{key}.md"  # noqa: E731
    taken_here = {path.split("/", 1)[1] for path in taken}
    key, n = candidate.key, 1
    while mind_path(key) in taken_here:
        n += 1
        key = f"{candidate.key[:95]}_{n}"
    return key
