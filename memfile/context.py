"""The context window, assembled: the system prompt, the recall for the query and as much recent history as fits.

`build` keeps the newest whole messages that fit the budget (*truncation*), or with a `summarize` callable
folds the dropped ones into a *rolling summary* kept as one memory per session. It sends one system message
(the prompt, `## Memory`, `## Earlier in this conversation`) and the kept history, never over the budget.
Uses only the Vault's public verbs (`recall`, `get`, `store`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, NotFound
from .model import KEY_PATTERN, Category, Priority, Report, StoreResult
from .recall import estimate_tokens

if TYPE_CHECKING:
    from .recall import RecallReport
    from .vault import Vault

#: The share of the budget the memory section may take at most (what it leaves unused goes to the history).
RECALL_SHARE = 0.3
#: The rolling summary's memory: `context/<SUMMARY_KEY><session>`.
SUMMARY_KEY = "rolling_summary_"
SUMMARY_TAG = "rolling_summary"
MEMORY_HEADING = "\n\n## Memory\n\n"
SUMMARY_HEADING = "\n\n## Earlier in this conversation\n\n"
#: How many recalls `build` tries, each with a smaller budget, to fit an app's own token count.
_RECALL_TRIES = 8

#: What an app's summarizer is called with: the previous summary (None the first time) and the dropped messages.
Summarize = Callable[[str | None, list[dict[str, Any]]], str]


@dataclass(frozen=True)
class ContextReport(Report):
    """What `build` assembled: the messages to send and what it left out.

    Attributes:
        system: the system prompt with the memory and summary sections, for an API that takes it apart
            (Anthropic: `client.messages.create(system=report.system, messages=report.history, ...)`).
        history: the newest messages that fit, whole and in order (shallow copies of those given).
        dropped: the oldest messages left out, in order; with `summarize` they were folded into `summary`.
            An app keeps only `history` as its conversation from now on (`conversation[:] = report.history`):
            what was dropped is in the summary, and would be folded in twice if passed again.
        summary: the rolling summary (None without `summarize`, or before anything was ever dropped).
        summary_cut: the summary was too long for what the budget left it, and is sent cut (stored whole).
        stored: the store of the updated summary (None when nothing was folded this time).
        recall: the recall in the memory section (None without a vault, or when the mind had nothing to show).
        tokens: what all of `messages` takes by the token count; never more than `budget`.
        budget: the budget asked for.
    """

    system: str
    history: list[dict[str, Any]]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    summary_cut: bool = False
    stored: StoreResult | None = None
    recall: RecallReport | None = None
    tokens: int = 0
    budget: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The system message then the history: what an OpenAI-style API takes as `messages`."""
        return [{"role": "system", "content": self.system}, *self.history]


def build(
    *,
    system: str,
    messages: Sequence[Mapping[str, Any]],
    query: str | None,
    budget: int,
    vault: Vault | None = None,
    summarize: Summarize | None = None,
    session: str = "default",
    count_tokens: Callable[[str], int] | None = None,
    recall_share: float = RECALL_SHARE,
) -> ContextReport:
    """Assemble the context window for the next model call, within `budget` tokens.

    The budget goes, in this order, to: the system prompt and the newest message (or tool call with its
    results), which must fit; the memory section (`vault.recall` for `query`, at most `recall_share` of the
    budget); the rolling summary; then the older messages, newest first, whole, until one does not fit.
    With `summarize`, what does not fit is folded into the session's summary (`summarize(previous, dropped)`,
    called again if the new summary pushes more messages out) and stored as `context/rolling_summary_<session>`
    (updated in place: `vault.history(summary_ref(session))` keeps every version).

    Args:
        system: the system prompt.
        messages: the conversation, oldest first: mappings such as `{"role": "user", "content": "..."}`, whose
            content is a string or a list of blocks (Anthropic `tool_use` / `tool_result`, OpenAI `tool_calls`
            with `role: tool` answers, Responses API `function_call` items); SDK objects in content are read
            with their `model_dump()`.
        query: what the model is about to work on, for the recall; None recalls the whole mind by priority.
        budget: the most tokens all returned messages may take.
        vault: where memories are recalled from and the summary is kept; None sends no memory section.
        summarize: the app's summarizer; None drops old messages (truncation). Needs a vault.
        session: names the conversation whose summary this is (any text; made into a key by `summary_ref`).
        count_tokens: counts one text's tokens (a model's tokenizer); default memfile's estimate.
        recall_share: the most of the budget the memory section may take, from 0 to 1.

    Returns:
        A ContextReport: `.messages` (OpenAI style) or `.system` with `.history` (Anthropic style).

    Raises:
        InvalidInput: the budget cannot hold the system prompt and the newest message, or the memory
            section cannot hold the mind's pinned memories; an argument is not allowed.
    """
    count = count_tokens or estimate_tokens
    _check(system, messages, query, budget, vault, summarize, recall_share)
    key = _summary_key(session) if summarize is not None else None

    def system_cost(text: str) -> int:
        return message_tokens({"role": "system", "content": text}, count)

    units = _units(messages)
    unit_cost = [sum(message_tokens(messages[i], count) for i in range(start, end)) for start, end in units]
    base = system_cost(system)
    required = unit_cost[-1] if units else 0
    if base + required > budget:
        taken = (
            f"the system prompt alone takes {base}" + (f", the newest message {required}" if units else "")
            if base > budget
            else f"the system prompt ({base}) and the newest message ({required}) take that"
        )
        raise InvalidInput("budget", budget, f"at least {base + required} tokens: {taken}")

    report, memory = None, ""
    if vault is not None and recall_share > 0:  # 0: the app recalls no memory here
        cap = min(int(budget * recall_share), budget - base - required)
        shown = [f"{Category.CONTEXT}/{key}"] if key is not None else []  # in its own section, not twice
        report, memory = _memory(vault, query, system, cap, budget, system_cost, shown)

    previous = None
    if key is not None:
        assert vault is not None  # _check
        try:
            previous = vault.get(f"{Category.CONTEXT}/{key}").content
        except NotFound:
            previous = None
    room = budget - required  # what the system message may take

    def head(summary: str | None) -> tuple[str, bool]:
        """The system message with the summary, cut to fit `room` if need be."""
        return _with_summary(system + memory, summary, room, system_cost)

    def first_kept(text: str) -> int:
        """The first unit of the newest ones that fit beside the system message `text`."""
        left, first = budget - system_cost(text), len(units)
        while first > 0 and unit_cost[first - 1] <= left:
            first -= 1
            left -= unit_cost[first]
        return first

    summary = previous
    text, cut = head(summary)
    first = first_kept(text)
    folded = 0  # units already in `summary`
    while summarize is not None and first > folded:
        dropped = [dict(m) for start, end in units[folded:first] for m in messages[start:end]]
        summary = summarize(summary, dropped)
        if not isinstance(summary, str) or not summary.strip():
            raise InvalidInput("summarize", summary, "a function that returns the summary as non-empty text")
        summary = summary.strip()  # as the vault keeps it
        folded = first
        text, cut = head(summary)
        first = max(folded, first_kept(text))  # a shorter summary never brings folded messages back

    stored = None
    if key is not None and summary is not None and summary != previous:
        assert vault is not None
        stored = vault.store(Category.CONTEXT, key, summary, source="agent", tags=[SUMMARY_TAG])
    start = units[first][0] if first < len(units) else len(messages)
    history = [dict(m) for m in messages[start:]]
    tokens = system_cost(text) + sum(message_tokens(m, count) for m in history)
    assert tokens <= budget, (tokens, budget)  # memfile's own bug if not: every part above was fitted
    return ContextReport(
        system=text,
        history=history,
        dropped=[dict(m) for m in messages[:start]],
        summary=summary if key is not None else None,
        summary_cut=cut,
        stored=stored,
        recall=report,
        tokens=tokens,
        budget=budget,
    )


def summary_ref(session: str) -> str:
    """The REF of a session's rolling summary: `context/rolling_summary_<session>`.

    A session name that is not snake_case (`Alice & Bob`, `chat-42`, Vietnamese text) becomes its
    snake_case letters and digits plus 8 hex digits of its SHA-256, so two names never share a summary.

    Raises:
        InvalidInput: the session is not a non-empty string.
    """
    return f"{Category.CONTEXT}/{_summary_key(session)}"


def _summary_key(session: str) -> str:
    """The key of `summary_ref`."""
    if not isinstance(session, str) or not session.strip():
        raise InvalidInput("session", session, "a non-empty name for the conversation, such as chat_42")
    key = SUMMARY_KEY + session
    if KEY_PATTERN.fullmatch(key):
        return key
    words = re.sub(r"[^a-z0-9]+", "_", session.lower()).strip("_")[:60].rstrip("_")
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return SUMMARY_KEY + (f"{words}_{digest}" if words else digest)


def message_tokens(message: Mapping[str, Any], count_tokens: Callable[[str], int] | None = None) -> int:
    """What one message takes: the tokens of its compact JSON text (role, content, every block field), by
    `count_tokens` (default memfile's estimate). A message's text is what the model reads, plus the few
    characters of its framing: an honest upper bound, and tool calls and images are never free."""
    return (count_tokens or estimate_tokens)(_json(message))


# --- the parts --------------------------------------------------------------------------------------------


def _check(
    system: object,
    messages: object,
    query: object,
    budget: object,
    vault: object,
    summarize: object,
    recall_share: object,
) -> None:
    """Refuse arguments `build` cannot use, each by name."""
    if not isinstance(system, str):
        raise InvalidInput("system", system, "the system prompt as text")
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInput("messages", type(messages).__name__, "a list of messages, oldest first")
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"messages[{n}]", message, "a mapping such as {'role': 'user', 'content': 'Hi'}")
    if query is not None and not isinstance(query, str):
        raise InvalidInput("query", query, "text, or None to recall the whole mind")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInput("budget", budget, "a whole number of tokens, at least 1")
    if isinstance(recall_share, bool) or not isinstance(recall_share, int | float) or not 0 <= recall_share <= 1:
        raise InvalidInput("recall_share", recall_share, "a number from 0 to 1, such as 0.3")
    if summarize is not None and not callable(summarize):
        raise InvalidInput("summarize", summarize, "a function summarize(previous_summary, dropped_messages) -> str")
    if summarize is not None and vault is None:
        raise InvalidInput("vault", None, "a Vault to keep the rolling summary in (or no summarize: truncation)")


def _memory(
    vault: Vault,
    query: str | None,
    system: str,
    cap: int,
    budget: int,
    system_cost: Callable[[str], int],
    exclude: list[str],
) -> tuple[RecallReport | None, str]:
    """The recall for `query` and the memory section that shows it, taking at most `cap` tokens of the
    system message by the app's count. The recall's own budget is in memfile's estimate; when the app's
    count says the section is over, the recall is asked again with a budget shrunk in proportion. A recall
    that holds nothing, or nothing recall must keep, is left out rather than refused.

    Raises:
        InvalidInput: `budget`, when the mind's verified critical memories (never left out) do not fit.
    """

    base = system_cost(system)
    asked, need = cap, "more than that by the count given"
    for _ in range(_RECALL_TRIES):
        if asked < 1:  # 0 would mean "no limit" to recall
            break
        try:
            report = vault.recall(asked, query=query, exclude=exclude)
        except InvalidInput as exc:
            if exc.field != "budget":
                raise
            need = f"{exc.allowed} by memfile's estimate"
            break
        if not report.items:
            return None, ""
        section = MEMORY_HEADING + report.text.rstrip("\n")
        taken = system_cost(system + section) - base
        if taken <= cap:
            return report, section
        asked = min(asked - 1, asked * cap // taken)
    if any(m.verified for m in vault.list(priority=Priority.CRITICAL)):
        raise InvalidInput(
            "budget",
            budget,
            f"more tokens, or a larger recall_share: the memory section gets {cap} of them, and the mind's "
            f"pinned memories need {need}",
        )
    return None, ""


def _with_summary(text: str, summary: str | None, room: int, system_cost: Callable[[str], int]) -> tuple[str, bool]:
    """`text` with the summary section, the summary cut at its end (`…`) to what fits `room` tokens,
    or left out when not even its heading fits. `text` itself fits (the memory section was fitted)."""
    if not summary:
        return text, False
    whole = text + SUMMARY_HEADING + summary
    if system_cost(whole) <= room:
        return whole, False
    low, high = 0, len(summary)  # the longest prefix that fits, by bisection (a count grows with the text)
    while low < high:
        middle = (low + high + 1) // 2
        if system_cost(text + SUMMARY_HEADING + summary[:middle] + "…") <= room:
            low = middle
        else:
            high = middle - 1
    if low == 0:
        return text, True
    return text + SUMMARY_HEADING + summary[:low] + "…", True


def _units(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """The messages as (start, end) ranges that are kept or dropped whole: a message alone, or a tool call
    with every message up to its last result (a model API refuses a result without its call)."""
    opened: dict[str, int] = {}
    joined_to = list(range(len(messages)))  # joined_to[i]: the first message of the unit i belongs to
    for i, message in enumerate(messages):
        calls, results = _tool_ids(message)
        for call in calls:
            opened.setdefault(call, i)
        for result in results:
            start = opened.get(result)
            if start is not None and start < i:
                for j in range(start + 1, i + 1):
                    joined_to[j] = min(joined_to[j], joined_to[start])
    units: list[tuple[int, int]] = []
    for i in range(len(messages)):
        if units and joined_to[i] < i:
            units[-1] = (units[-1][0], i + 1)
        else:
            units.append((i, i + 1))
    return units


def _tool_ids(message: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The ids of the tool calls a message makes and of the calls it answers, in the formats of the
    Anthropic Messages API, OpenAI Chat Completions and the OpenAI Responses API."""
    calls: list[str] = []
    results: list[str] = []
    items: list[Any] = [message]
    content = message.get("content")
    if isinstance(content, list | tuple):
        items += [_plain(block) for block in content]
    for call in message.get("tool_calls") or ():  # OpenAI chat: an assistant's calls
        call = _plain(call)
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            calls.append(call["id"])
    if isinstance(message.get("tool_call_id"), str):  # OpenAI chat: a `role: tool` answer
        results.append(message["tool_call_id"])
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if isinstance(kind, str) and kind.endswith("tool_use") and isinstance(item.get("id"), str):
            calls.append(item["id"])  # Anthropic tool_use, server_tool_use, mcp_tool_use
        if isinstance(item.get("tool_use_id"), str):
            results.append(item["tool_use_id"])  # Anthropic tool_result and the server tools' results
        if kind == "function_call" and isinstance(item.get("call_id"), str):
            calls.append(item["call_id"])  # OpenAI Responses
        if kind == "function_call_output" and isinstance(item.get("call_id"), str):
            results.append(item["call_id"])
    return calls, results


def _plain(value: Any) -> Any:
    """An SDK object (pydantic: `model_dump`) as plain data; anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) and not isinstance(value, Mapping) else value


def _json(message: Mapping[str, Any]) -> str:
    def default(value: Any) -> Any:
        plain = _plain(value)
        return plain if plain is not value else str(value)

    return json.dumps(dict(message), ensure_ascii=False, separators=(",", ":"), default=default)
