"""memfile.context.build: the context window assembled within a budget, truncation and the rolling summary,
on real vaults, with a deterministic summarizer standing in for the app's model call."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memfile import InvalidInput, NotFound, Refused, Vault, estimate_tokens
from memfile.context import ContextReport, build, message_tokens, summary_ref

AGENTS_DOC = REPO / "docs" / "agents.md"
SYSTEM = "You are a helpful assistant."


def talk(n: int, words: int = 10) -> list[dict[str, Any]]:
    """n messages, user and assistant in turn, each about `words` words, numbered from 0."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * words} for i in range(n)
    ]


class Summarizer:
    """Deterministic: the previous summary plus one line per dropped message; records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[dict[str, Any]]]] = []
        self.returned: list[str] = []

    def __call__(self, previous: str | None, dropped: list[dict[str, Any]]) -> str:
        if self.calls:
            assert previous == self.returned[-1]  # each call folds into what the last one returned
        self.calls.append((previous, dropped))
        lines = [previous] if previous else []
        lines += [f"{m.get('role')} said {str(m.get('content'))[:12]!r}" for m in dropped]
        self.returned.append("\n".join(lines))
        return self.returned[-1]

    def folded(self, since: int) -> list[dict[str, Any]]:
        """The messages folded in by the calls from number `since` on, in order."""
        return [m for _, dropped in self.calls[since:] for m in dropped]


def total(report: ContextReport, count=estimate_tokens) -> int:
    """What the report's messages take, counted here independently of memfile.context."""
    return sum(count(json.dumps(m, ensure_ascii=False, separators=(",", ":"))) for m in report.messages)


def tool_ids_kept_whole(history: list[dict[str, Any]]) -> bool:
    """Every tool result in the history has its call before it."""
    called: set[str] = set()
    for message in history:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                called.add(block["id"])
            if block.get("type") == "tool_result" and block["tool_use_id"] not in called:
                return False
        for call in message.get("tool_calls") or []:
            called.add(call["id"])
        if message.get("role") == "tool" and message["tool_call_id"] not in called:
            return False
    return True


@pytest.fixture
def mind(tmp_path: Path) -> Vault:
    v = Vault.init(tmp_path / "v", "michael", "Michael")
    v.store("preference", "editor", "Michael uses Helix as his editor", priority="high")
    v.store("fact", "office", "The office is in Berlin, Torstrasse")
    v.store("project", "deploy", "Deploys go through make deploy on the staging host")
    return v


# --- truncation -----------------------------------------------------------------------------------------


def test_everything_fits_nothing_dropped() -> None:
    messages = talk(4)
    window = build(system=SYSTEM, messages=messages, query=None, budget=10_000)
    assert window.history == messages and window.dropped == []
    assert window.messages[0] == {"role": "system", "content": SYSTEM}
    assert window.tokens == total(window) <= 10_000
    assert window.summary is None and window.recall is None and window.stored is None


def test_truncation_keeps_the_newest_whole_messages_in_order() -> None:
    messages = talk(20)
    cost = message_tokens(messages[0])
    budget = message_tokens({"role": "system", "content": SYSTEM}) + 5 * cost + cost // 2
    window = build(system=SYSTEM, messages=messages, query=None, budget=budget)
    assert window.history == messages[-5:]
    assert window.dropped == messages[:-5]
    assert window.tokens == total(window) <= budget


def test_the_returned_messages_are_copies() -> None:
    messages = talk(2)
    window = build(system=SYSTEM, messages=messages, query=None, budget=10_000)
    window.history[0]["content"] = "changed"
    assert messages[0]["content"].startswith("message 0")


def test_a_tool_call_and_its_result_are_never_split() -> None:
    call = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "office " * 30}},
        ],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Berlin " * 30}],
    }
    answer = {"role": "assistant", "content": "The office is in Berlin."}
    messages = [*talk(4), call, result, answer]
    base = message_tokens({"role": "system", "content": SYSTEM})
    fits_answer_and_result = base + message_tokens(answer) + message_tokens(result)
    for budget in range(base + message_tokens(answer), fits_answer_and_result + message_tokens(call) + 5):
        window = build(system=SYSTEM, messages=messages, query=None, budget=budget)
        assert window.tokens <= budget
        assert tool_ids_kept_whole(window.history), budget
        assert window.history in ([answer], [call, result, answer]), budget


def test_openai_tool_calls_and_responses_items_stay_with_their_answers() -> None:
    calls = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    answers = [{"role": "tool", "tool_call_id": f"call_{x}", "content": "done " * 40} for x in "ab"]
    messages = [*talk(3), calls, *answers]
    last_two = message_tokens(answers[1]) + message_tokens(answers[0])
    base = message_tokens({"role": "system", "content": SYSTEM})
    # The newest unit is the call with both answers: a budget for the answers alone is too small.
    with pytest.raises(InvalidInput) as raised:
        build(system=SYSTEM, messages=messages, query=None, budget=base + last_two)
    assert raised.value.field == "budget" and "newest message" in str(raised.value)
    window = build(system=SYSTEM, messages=messages, query=None, budget=base + last_two + message_tokens(calls))
    assert window.history == [calls, *answers]

    items = [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok " * 40},
    ]
    window = build(
        system=SYSTEM,
        messages=[*talk(2), *items],
        query=None,
        budget=base + sum(message_tokens(m) for m in items),
    )
    assert window.history == items


class Block:
    """An SDK content block (pydantic-like: model_dump), as `response.content` holds them."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def model_dump(self) -> dict[str, Any]:
        return dict(self.fields)


def test_sdk_objects_in_content_are_counted_and_paired() -> None:
    call = {"role": "assistant", "content": [Block(type="tool_use", id="toolu_9", name="f", input={"x": 1})]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "y " * 50}]}
    assert message_tokens(call) == estimate_tokens(
        json.dumps(
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"x": 1}}]},
            separators=(",", ":"),
        )
    )
    base = message_tokens({"role": "system", "content": SYSTEM})
    window = build(
        system=SYSTEM,
        messages=[*talk(2), call, result],
        query=None,
        budget=base + message_tokens(result) + message_tokens(call),
    )
    assert [m["role"] for m in window.history] == ["assistant", "user"]


# --- budgets and arguments ------------------------------------------------------------------------------


def test_a_system_prompt_over_the_budget_is_refused_by_naming_the_budget() -> None:
    with pytest.raises(InvalidInput) as raised:
        build(system="x" * 400, messages=talk(2), query=None, budget=50)
    assert raised.value.field == "budget"
    assert "system prompt alone" in str(raised.value) and "50" in str(raised.value)


def test_a_newest_message_over_the_budget_is_refused() -> None:
    messages = [{"role": "user", "content": "long " * 200}]
    with pytest.raises(InvalidInput) as raised:
        build(system=SYSTEM, messages=messages, query=None, budget=100)
    assert raised.value.field == "budget" and "newest message" in str(raised.value)


def test_no_messages_sends_the_system_prompt_alone() -> None:
    window = build(system=SYSTEM, messages=[], query=None, budget=100)
    assert window.messages == [{"role": "system", "content": SYSTEM}] and window.history == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"budget": 0}, "budget"),
        ({"budget": True}, "budget"),
        ({"budget": 10.5}, "budget"),
        ({"recall_share": 1.5}, "recall_share"),
        ({"recall_share": -0.1}, "recall_share"),
        ({"messages": "hello"}, "messages"),
        ({"messages": {"role": "user"}}, "messages"),
        ({"messages": [("user", "hi")]}, "messages[0]"),
        ({"system": None}, "system"),
        ({"query": 3}, "query"),
        ({"summarize": "yes"}, "summarize"),
        ({"summarize": lambda p, d: "s"}, "vault"),
    ],
)
def test_arguments_it_cannot_use_are_refused_by_name(arguments: dict[str, Any], field: str) -> None:
    given = {"system": SYSTEM, "messages": talk(2), "query": None, "budget": 1000} | arguments
    with pytest.raises(InvalidInput) as raised:
        build(**given)
    assert raised.value.field == field


def test_a_session_is_made_a_key_without_two_names_sharing_one(mind: Vault) -> None:
    assert summary_ref("chat_42") == "context/rolling_summary_chat_42"
    dashed, spaced = summary_ref("chat-42"), summary_ref("chat 42")
    assert dashed != spaced and dashed.startswith("context/rolling_summary_chat_42_")
    for session in ("Cuộc trò chuyện", "บทสนทนา", "x" * 500, "../../etc", "a/b", "UPPER"):
        ref = summary_ref(session)
        category, key = ref.split("/")
        assert category == "context" and re.fullmatch(r"[a-z0-9][a-z0-9_]{0,99}", key), session
    with pytest.raises(InvalidInput) as raised:
        summary_ref("  ")
    assert raised.value.field == "session"


def test_a_summarizer_that_returns_nothing_is_refused_and_nothing_is_stored(mind: Vault) -> None:
    with pytest.raises(InvalidInput) as raised:
        build(
            system=SYSTEM,
            messages=talk(30),
            query=None,
            budget=400,
            vault=mind,
            summarize=lambda previous, dropped: "  ",
            session="s",
        )
    assert raised.value.field == "summarize"
    with pytest.raises(NotFound):
        mind.get(summary_ref("s"))


# --- the memory section ---------------------------------------------------------------------------------


def test_the_recall_for_the_query_is_in_the_system_prompt_within_its_share(mind: Vault) -> None:
    window = build(system=SYSTEM, messages=talk(40), query="where is the office", budget=1000, vault=mind)
    assert window.system.startswith(SYSTEM + "\n\n## Memory\n\n")
    assert "Torstrasse" in window.system and "Helix" in window.system  # the match and the pinned memory
    assert window.recall is not None and window.recall.query == "where is the office"
    memory_tokens = message_tokens({"role": "system", "content": window.system}) - message_tokens(
        {"role": "system", "content": SYSTEM}
    )
    assert memory_tokens <= 300
    assert window.tokens == total(window) <= 1000
    assert mind.last_recall().query == "where is the office"


def test_the_memory_share_is_a_cap_and_an_empty_mind_adds_no_section(tmp_path: Path) -> None:
    empty = Vault.init(tmp_path / "empty", "m")
    window = build(system=SYSTEM, messages=talk(3), query="anything", budget=5000, vault=empty)
    assert window.system == SYSTEM and window.recall is None
    empty.store("identity", "name", "Michael", priority="critical")
    window = build(system=SYSTEM, messages=talk(3), query=None, budget=5000, vault=empty, recall_share=0)
    assert window.system == SYSTEM and window.recall is None  # no share: no memory section, pinned or not


def test_the_recall_fits_the_apps_own_count(mind: Vault) -> None:
    for n in range(12):
        mind.store("note", f"note_{n}", f"Office note {n}: " + "the office plants need water. " * 6)

    def count(text: str) -> int:  # a tokenizer that counts more than memfile's estimate
        return len(text) // 2 + 1

    window = build(system=SYSTEM, messages=talk(10), query="office", budget=900, vault=mind, count_tokens=count)
    assert window.recall is not None and window.recall.items
    share = count(json.dumps({"role": "system", "content": window.system}, separators=(",", ":"))) - count(
        json.dumps({"role": "system", "content": SYSTEM}, separators=(",", ":"))
    )
    assert share <= int(900 * 0.3)
    assert window.tokens == total(window, count) <= 900


def test_pinned_memories_too_big_for_the_share_are_refused_by_naming_the_budget(mind: Vault) -> None:
    for n in range(6):  # critical memories are shortened as a last resort, never left out
        mind.store(
            "identity",
            f"rule_{n}",
            f"Rule {n}: never deploy on a Friday, whatever the ticket says.",
            priority="critical",
        )
    with pytest.raises(InvalidInput) as raised:
        build(system=SYSTEM, messages=talk(2), query="office", budget=400, vault=mind)
    assert raised.value.field == "budget"
    assert "recall_share" in str(raised.value) and "pinned" in str(raised.value)
    window = build(system=SYSTEM, messages=talk(2), query="office", budget=400, vault=mind, recall_share=0.9)
    assert "Rule 5" in window.system and window.tokens <= 400


def test_a_count_that_leaves_no_room_for_the_recall_omits_it_unless_something_is_pinned(mind: Vault) -> None:
    def count(text: str) -> int:  # five tokens a character: the recall's header alone is over its share
        return 5 * len(text)

    budget = 6 * count(json.dumps({"role": "system", "content": SYSTEM}))
    window = build(system=SYSTEM, messages=[], query="office", budget=budget, vault=mind, count_tokens=count)
    assert window.recall is None and window.system == SYSTEM
    mind.store("identity", "name", "Michael", priority="critical")  # a person's: verified, never left out
    with pytest.raises(InvalidInput) as raised:
        build(system=SYSTEM, messages=[], query="office", budget=budget, vault=mind, count_tokens=count)
    assert raised.value.field == "budget" and "pinned" in str(raised.value)


def test_a_query_recall_cannot_parse_is_its_own_error(mind: Vault) -> None:
    with pytest.raises(InvalidInput) as raised:
        build(system=SYSTEM, messages=talk(2), query="x" * 5000, budget=1000, vault=mind)
    assert raised.value.field == "query"


# --- the rolling summary --------------------------------------------------------------------------------


def test_the_rolling_summary_is_stored_superseded_recalled_and_kept_in_history(mind: Vault) -> None:
    summarize = Summarizer()
    conversation = talk(30, words=40)
    ref = summary_ref("Chat 1")

    first = build(
        system=SYSTEM,
        messages=conversation,
        query="deploy",
        budget=900,
        vault=mind,
        summarize=summarize,
        session="Chat 1",
    )
    assert first.dropped and summarize.calls[0][0] is None
    assert summarize.folded(0) == first.dropped  # the summary took room: maybe a second call folded more
    stored = mind.get(ref)
    assert stored.content == first.summary and stored.source == "agent" and not stored.verified
    assert stored.tags == ("rolling_summary",)
    assert first.stored is not None and first.stored.created and first.stored.commit
    assert "\n\n## Earlier in this conversation\n\n" + first.summary in first.system
    assert first.history == conversation[len(first.dropped) :] and first.tokens == total(first) <= 900

    conversation[:] = first.history
    conversation += talk(12, words=40)
    done = len(summarize.calls)
    second = build(
        system=SYSTEM,
        messages=conversation,
        query="deploy",
        budget=900,
        vault=mind,
        summarize=summarize,
        session="Chat 1",
    )
    assert summarize.calls[done][0] == first.summary  # the previous summary is what gets folded into
    assert summarize.folded(done) == second.dropped
    updated = mind.get(ref)
    assert updated.id == stored.id and updated.content == second.summary != first.summary
    assert second.stored is not None and not second.stored.created and second.stored.changed
    assert [m for m in mind.memories() if m.category == "context"] == [updated]  # one memory, updated in place

    versions = mind.history(ref)
    assert [v.memory.content for v in versions if v.memory] == [second.summary, first.summary]

    # Next time, a new Vault (another process) recalls it and build sends it.
    again = Vault.open(mind.root, "michael")
    assert "rolling_summary" in again.recall(query="said message").text
    calls = len(summarize.calls)
    third = build(
        system=SYSTEM, messages=talk(2), query=None, budget=2000, vault=again, summarize=summarize, session="Chat 1"
    )
    assert third.dropped == [] and third.stored is None and third.summary == second.summary
    assert second.summary in third.system and len(summarize.calls) == calls
    assert third.system.count(second.summary) == 1  # in its own section, not also in the memory section
    assert third.recall is not None and ref not in [item.memory.ref for item in third.recall.items]


def test_without_summarize_nothing_is_stored(mind: Vault) -> None:
    before = len(mind.log())
    window = build(system=SYSTEM, messages=talk(40), query="deploy", budget=600, vault=mind)
    assert window.dropped and window.summary is None and window.stored is None
    assert len(mind.log()) == before


def test_sessions_keep_their_own_summaries(mind: Vault) -> None:
    for session in ("alice", "bob"):
        build(
            system=SYSTEM,
            messages=talk(30),
            query=None,
            budget=700,
            vault=mind,
            summarize=lambda p, d, s=session: f"{s}: {len(d)} messages",
            session=session,
        )
    assert mind.get(summary_ref("alice")).content.startswith("alice:")
    assert mind.get(summary_ref("bob")).content.startswith("bob:")


def test_a_summary_that_grows_pushes_more_out_and_folds_those_too(mind: Vault) -> None:
    calls: list[int] = []

    def wordy(previous: str | None, dropped: list[dict[str, Any]]) -> str:
        calls.append(len(dropped))
        return (previous or "") + " summary" * 40 * len(dropped)

    messages = talk(12, words=40)
    window = build(
        system=SYSTEM,
        messages=messages,
        query=None,
        budget=700,
        vault=mind,
        summarize=wordy,
        session="grow",
        recall_share=0,
    )
    assert len(calls) >= 2  # the first summary took the room of messages that were then folded in
    assert sum(calls) == len(window.dropped)
    assert window.dropped + window.history == messages and window.tokens <= 700


def test_a_summary_too_long_is_sent_cut_and_stored_whole(mind: Vault) -> None:
    def huge(previous: str | None, dropped: list[dict[str, Any]]) -> str:
        return "The whole story. " * 500

    window = build(
        system=SYSTEM,
        messages=talk(20, words=40),
        query=None,
        budget=500,
        vault=mind,
        summarize=huge,
        session="cut",
        recall_share=0,
    )
    assert window.summary_cut and window.summary == ("The whole story. " * 500).strip()
    assert window.system.endswith("…") and "## Earlier in this conversation" in window.system
    assert mind.get(summary_ref("cut")).content == window.summary
    assert window.tokens == total(window) <= 500


def test_an_agent_cannot_overwrite_a_summary_a_person_verified(tmp_path: Path) -> None:
    person = Vault.init(tmp_path / "v", "m")
    person.store("context", "rolling_summary_s", "Checked by Michael.")
    person.verify("context/rolling_summary_s")
    agent = Vault.open(tmp_path / "v", "m", source="agent")

    with pytest.raises(Refused):
        build(
            system=SYSTEM,
            messages=talk(30),
            query=None,
            budget=500,
            vault=agent,
            summarize=Summarizer(),
            session="s",
        )
    assert agent.get("context/rolling_summary_s").content == "Checked by Michael."


# --- never over the budget ------------------------------------------------------------------------------

COUNTS = {
    "estimate": estimate_tokens,
    "chars": len,
    "words": lambda text: len(text.split()),
    "lumpy": lambda text: len(text) // 3 + len(text) % 7,  # not monotone in the text's length
}

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=160)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["text", "text", "blocks", "anthropic_tool", "openai_tool"]))
        role = draw(st.sampled_from(["user", "assistant"]))
        if kind == "text":
            messages.append({"role": role, "content": draw(texts)})
        elif kind == "blocks":
            messages.append({"role": role, "content": [{"type": "text", "text": draw(texts)} for _ in range(2)]})
        elif kind == "anthropic_tool":
            call = {"type": "tool_use", "id": f"t{n}", "name": "f", "input": {"q": draw(texts)}}
            messages.append({"role": "assistant", "content": [call]})
            for _ in range(draw(st.integers(0, 2))):
                messages.append({"role": "user", "content": draw(texts)})  # something in between, sometimes
            result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": draw(texts)}
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}", "type": "function"}]})
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": draw(texts)})
    return messages


def check_window(window: ContextReport, messages: list[dict[str, Any]], budget: int, count: Any, system: str) -> None:
    assert window.tokens == total(window, count) <= budget
    assert window.dropped + window.history == messages  # a suffix is kept, whole, in order
    assert window.system.startswith(system)
    assert tool_ids_kept_whole(window.history)
    if messages:
        assert window.history and window.history[-1] == messages[-1]


@settings(max_examples=200, deadline=None)
@given(
    messages=conversations(),
    system=texts,
    budget=st.integers(1, 3000),
    count=st.sampled_from(sorted(COUNTS)),
)
def test_never_over_the_budget(messages: list[dict[str, Any]], system: str, budget: int, count: str) -> None:
    try:
        window = build(system=system, messages=messages, query=None, budget=budget, count_tokens=COUNTS[count])
    except InvalidInput as exc:
        assert exc.field == "budget"
        event("refused: budget")
        needed = int(re.search(r"at least (\d+) tokens", str(exc)).group(1))  # the error names the least that works
        assert needed > budget
        window = build(system=system, messages=messages, query=None, budget=needed, count_tokens=COUNTS[count])
        budget = needed
    event(f"dropped: {bool(window.dropped)}")
    check_window(window, messages, budget, COUNTS[count], system)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=conversations(),
    budget=st.integers(1, 4000),
    count=st.sampled_from(sorted(COUNTS)),
    share=st.floats(0, 1),
    query=st.sampled_from([None, "office", "deploy staging", "word"]),
    summarize=st.booleans(),
)
def test_never_over_the_budget_with_recall_and_a_summary(
    mind: Vault,
    messages: list[dict[str, Any]],
    budget: int,
    count: str,
    share: float,
    query: str | None,
    summarize: bool,
) -> None:
    try:
        window = build(
            system=SYSTEM,
            messages=messages,
            query=query,
            budget=budget,
            vault=mind,
            summarize=(lambda p, d: (p or "")[-200:] + f" and {len(d)} more") if summarize else None,
            count_tokens=COUNTS[count],
            recall_share=share,
        )
    except InvalidInput as exc:
        assert exc.field == "budget"
        event("refused: budget")
        return
    event(f"dropped: {bool(window.dropped)}, summary: {window.summary is not None}, cut: {window.summary_cut}")
    event(f"recall: {window.recall is not None}")
    check_window(window, messages, budget, COUNTS[count], SYSTEM)


# --- the documentation's example ------------------------------------------------------------------------


def test_the_example_in_docs_agents_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = AGENTS_DOC.read_text(encoding="utf-8").split("## Assembling the context window", 1)[1]
    code = re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert code, "docs/agents.md: the section has no python example"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # made again from TMPDIR: the example's vault in tmp_path
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(AGENTS_DOC), "exec"), {"__name__": "agents_example"})
    printed = out.getvalue()
    assert "summarized" in printed and "## Memory" in printed and "Helix" in printed
    assert "## Earlier in this conversation" in printed
    assert list(tmp_path.iterdir()), "the example's vault was made in tmp_path"
    assert printed.rstrip().endswith("user: Question 0 about the deploy script. Question 0 about the dep")
