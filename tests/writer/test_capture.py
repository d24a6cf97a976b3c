"""Capture (memfile/capture.py, docs/capture.md): the model's answer checked whole, each candidate decided
add / update / skip against the mind, one commit, provenance; proposals out of every read until a person
accepts them; accept (with an edit) and reject, each one commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import commit_count, git

from memfile import InvalidInput, NotFound, Refused, Vault
from memfile.capture import PROMPT, PROMPT_VERSION, Candidate, decide, transcript
from memfile.model import Category, Status
from memfile.secretscan import SecretFound

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "I moved to Porto last month. I prefer tea over coffee."},
    {"role": "assistant", "content": [{"type": "text", "text": "Noted: Porto, and tea."}]},
    {"role": "user", "content": "Also my sister Ana is a nurse."},
]


def answer(*memories: dict[str, Any]) -> Any:
    """An extractor that answers `memories` (as JSON text) and remembers what it was asked."""

    def extract(system: str, user: str) -> str:
        extract.asked = (system, user)  # type: ignore[attr-defined]
        return json.dumps({"memories": list(memories)})

    return extract


def cand(category: str, key: str, content: str, **more: Any) -> dict[str, Any]:
    return {"category": category, "key": key, "content": content, "tags": [], "turns": [1], **more}


def files(vault: Vault) -> set[str]:
    return {p.relative_to(vault.root).as_posix() for p in (vault.root / vault.mind).rglob("*.md")}


@pytest.fixture
def mind(vault: Vault) -> Vault:
    vault.store("identity", "home_city", "Lives in Lisbon.")
    vault.store("preference", "hot_drink", "Prefers coffee in the morning.")
    vault.store("fact", "sister_ana", "Sister Ana is a nurse in Braga.")
    return vault


def test_the_model_is_asked_with_the_prompt_and_a_numbered_transcript(mind: Vault) -> None:
    extract = answer()
    report = mind.capture(MESSAGES, extract, "s1")
    system, user = extract.asked
    assert system == PROMPT and report.prompt_version == PROMPT_VERSION
    assert (
        user.startswith("[0] system: You are a helpful assistant.") and "[2] assistant: Noted: Porto, and tea." in user
    )
    assert report.decisions == [] and report.commit is None


def test_add_update_and_skip_in_one_commit_with_each_reason(mind: Vault) -> None:
    before = commit_count(mind.root)
    report = mind.capture(
        MESSAGES,
        answer(
            cand("identity", "home_city", "Lives in Porto since last month.", turns=[1]),
            cand("preference", "tea", "Prefers tea over coffee now.", turns=[1]),
            cand("note", "blue_teapot", "The blue teapot is chipped.", turns=[2]),
            cand("fact", "sister_nurse", "Sister Ana is a nurse.", turns=[3]),
            cand("fact", "sister_nurse_again", "Sister Ana is a nurse.", turns=[3]),
        ),
        "porto-chat",
    )
    assert [(d.action, d.target.ref if d.target else None) for d in report.decisions] == [
        ("update", "identity/home_city"),
        ("update", "preference/hot_drink"),
        ("add", None),
        ("skip", "fact/sister_ana"),
        ("skip", "fact/sister_ana"),
    ]
    assert report.counts == {"add": 1, "update": 2, "skip": 2} and commit_count(mind.root) == before + 1
    message = git(mind.root, "log", "-1", "--format=%B")
    assert message.startswith("capture porto-chat (user): 1 added, 2 updated, 2 skipped")
    assert (
        "update identity/home_city_2: it changes identity/home_city" in message and "skip fact/sister_nurse:" in message
    )
    assert f"prompt: capture v{PROMPT_VERSION}" in message


def test_captured_memories_are_the_agents_proposals_with_their_provenance(mind: Vault) -> None:
    mind.capture(
        MESSAGES,
        answer(cand("note", "blue_teapot", "The blue teapot is chipped.", turns=[1, 2], priority="high")),
        "s1",
    )
    [proposal] = mind.proposals()
    assert proposal.proposed and proposal.status is Status.PROPOSED and not proposal.verified
    assert str(proposal.source) == "agent" and str(proposal.priority) == "high"
    assert dict(proposal.extra) == {
        "captured_from": "s1",
        "captured_turns": [1, 2],
        "captured_lines": [
            "[1] user: I moved to Porto last month. I prefer tea over coffee.",
            "[2] assistant: Noted: Porto, and tea.",
        ],
    }
    text = (mind.root / proposal.path).read_text(encoding="utf-8")
    assert "status: proposed" in text and "captured_from: s1" in text


def test_a_proposal_quotes_its_lines_on_one_line_each_secrets_masked_and_accept_drops_them(mind: Vault) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    messages = [
        {"role": "user", "content": f"My deploy token is {token}\nplease keep it"},
        {"role": "user", "content": "word " * 300},
        *({"role": "user", "content": f"line {n}"} for n in range(10)),
    ]
    mind.capture(messages, answer(cand("note", "deploys", "Deploys on Fridays.", turns=list(range(12)))), "s1")
    [proposal] = mind.proposals()
    lines = dict(proposal.extra)["captured_lines"]
    assert len(lines) == 8 and lines[2:] == [f"[{n + 2}] user: line {n}" for n in range(6)]
    assert lines[0].startswith("[0] user: My deploy token is ghp_") and lines[0].endswith(" please keep it")
    assert token not in (mind.root / proposal.path).read_text(encoding="utf-8")
    assert token not in git(mind.root, "log", "-p", "--format=%B")
    assert len(lines[1]) == 400 and lines[1].endswith("…")
    accepted = mind.accept(proposal.ref)
    assert "captured_lines" not in dict(accepted.extra) and dict(accepted.extra)["captured_turns"] == list(range(12))
    assert "captured_lines" not in (mind.root / accepted.path).read_text(encoding="utf-8")


def test_a_quoted_private_key_is_masked_whole_and_a_lone_surrogate_is_replaced(mind: Vault) -> None:
    body = [
        ("MIIEowIBAAKCAQEA" + "x7Kq9Lm2Np4Rs6Tv8Wy0Za3Bc5De7Fg9Hj1" * 2)[:64],
        *("Qw3Er5Ty7Ui9Op1As" * 4 for _ in range(3)),
    ]
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----"
    messages = [
        {"role": "user", "content": f"here is my key:\n{key}\nthanks"},
        {"role": "user", "content": "a lone surrogate \ud800 here"},  # valid JSON ("\ud800"): it may come over HTTP
    ]
    mind.capture(messages, answer(cand("note", "key_pasted", "Pasted a key once.", turns=[0, 1])), "s1")
    [proposal] = mind.proposals()
    first, second = dict(proposal.extra)["captured_lines"]
    assert first.startswith("[0] user: here is my key: -----BEGIN RSA PRIVATE KEY----- MIIE")
    assert (
        first.endswith(" -----END RSA PRIVATE KEY----- thanks") and second == "[1] user: a lone surrogate \ufffd here"
    )
    history = git(mind.root, "log", "-p", "--format=%B")
    assert not [line for line in body if line in first or line[8:40] in history]


def test_a_proposal_reaches_no_recall_search_list_or_agent(mind: Vault) -> None:
    mind.capture(MESSAGES, answer(cand("note", "teapot", "The blue teapot is chipped.")), "s1")
    assert not mind.search("teapot") and not mind.recall(query="teapot").items
    assert "teapot" not in {item.memory.key for item in mind.recall().items}
    assert [m.key for m in mind.list()] == ["hot_drink", "home_city", "sister_ana"] or "teapot" not in {
        m.key for m in mind.list()
    }
    assert [m.key for m in mind.list(status="proposed")] == ["teapot"]
    assert [h.memory.key for h in mind.search("teapot", include_proposed=True)] == ["teapot"]
    agent = Vault.open(mind.root, mind.mind, source="agent")
    assert agent.proposals() == [] and not agent.search("teapot", include_proposed=True)
    assert "teapot" not in {m.key for m in agent.list(status="all")}
    with pytest.raises(NotFound):
        agent.get("note/teapot")
    assert mind.get("note/teapot").proposed  # a person reads it to review it


def test_a_person_recalls_proposals_only_when_asked_marked_proposed_and_an_agent_never(mind: Vault) -> None:
    KEY_LINE = "\n  teapot\n"  # noqa: N806  (the entry's key line: the header repeats the query)
    mind.capture(MESSAGES, answer(cand("note", "teapot", "The blue teapot is chipped.")), "s1")
    for query in (None, "blue teapot"):
        shown = mind.recall(query=query, include_proposed=True)
        [item] = [item for item in shown.items if item.memory.key == "teapot"]
        assert item.memory.proposed and "note (NORMAL) [proposed]\n  teapot" in shown
        assert KEY_LINE not in mind.recall(query=query)
    agent = Vault.open(mind.root, mind.mind, source="agent")
    assert KEY_LINE not in agent.recall(include_proposed=True)
    assert KEY_LINE not in agent.recall(query="blue teapot", include_proposed=True)
    assert KEY_LINE not in str(mind.last_recall().to_dict())  # a person's look is not the agent's last recall
    other = Vault.init(mind.root, "anna", "Anna")  # a recall of several minds shows them when asked too
    assert KEY_LINE in other.recall(query="blue teapot", with_minds=[mind.mind], include_proposed=True)
    assert KEY_LINE not in other.recall(query="blue teapot", with_minds=[mind.mind])
    for query in (None, "blue teapot"):  # nor is a look across minds recorded
        assert KEY_LINE in other.recall(query=query, with_minds=[mind.mind], include_proposed=True)
        assert "note/teapot" not in str(other.last_recall().to_dict())


def test_accept_verifies_edits_and_supersedes_in_one_commit(mind: Vault) -> None:
    mind.capture(MESSAGES, answer(cand("identity", "home_city", "Lives in Porto.")), "s1")
    [proposal] = mind.proposals()
    assert dict(proposal.extra)["proposed_supersedes"] == mind.get("identity/home_city").id
    before = commit_count(mind.root)
    accepted = mind.accept(proposal.ref, content="Lives in Porto, Portugal.", tags=["home"])
    assert commit_count(mind.root) == before + 1
    assert (
        git(mind.root, "log", "-1", "--format=%s").strip()
        == f"accept {proposal.ref} (user), superseding identity/home_city"
    )
    again = mind.get(proposal.ref)
    assert again == accepted and again.verified and not again.proposed and again.content == "Lives in Porto, Portugal."
    assert again.tags == ("home",) and "proposed_supersedes" not in dict(again.extra)
    assert dict(again.extra)["captured_from"] == "s1"
    assert mind.get("identity/home_city").superseded_by == again.id
    assert [h.memory.ref for h in mind.search("Porto")] == [again.ref]
    with pytest.raises(NotFound, match="not waiting for review"):
        mind.accept(again.ref)


def test_reject_forgets_it_in_one_commit_and_an_agent_reviews_nothing(mind: Vault) -> None:
    mind.capture(MESSAGES, answer(cand("note", "teapot", "The blue teapot is chipped.")), "s1")
    agent = Vault.open(mind.root, mind.mind, source="agent")
    with pytest.raises(Refused):
        agent.accept("note/teapot")
    with pytest.raises(Refused):
        agent.reject("note/teapot")
    before = commit_count(mind.root)
    mind.reject("note/teapot")
    assert commit_count(mind.root) == before + 1 and mind.proposals() == []
    assert "reject note/teapot (user)" in git(mind.root, "log", "-1", "--format=%s")
    with pytest.raises(InvalidInput, match="priority"):
        mind.accept("identity/home_city", colour="red")


def test_without_review_adds_are_live_and_an_update_of_a_persons_memory_still_waits(mind: Vault) -> None:
    agent = Vault.open(mind.root, mind.mind, source="agent")
    agent.store("note", "tea_shop", "The tea shop on Rua Alta closes at six.")
    report = agent.capture(
        MESSAGES,
        answer(
            cand("note", "tea_shop", "The tea shop on Rua Alta now closes at seven."),
            cand("identity", "home_city", "Lives in Porto."),
            cand("note", "blue_teapot", "The blue teapot is chipped."),
        ),
        "s2",
        review=False,
    )
    assert [d.action for d in report.decisions] == ["update", "update", "add"]
    assert agent.get("note/tea_shop").content.endswith("closes at seven.")  # the agent's own: changed in place
    assert agent.get("note/blue_teapot").status is None  # live: in recall and search
    assert [m.ref for m in mind.proposals()] == ["identity/home_city_2"]  # a person's memory: waits
    assert "waits for review" in report.decisions[1].reason


def test_a_dry_run_decides_and_writes_nothing(mind: Vault) -> None:
    before, on_disk = commit_count(mind.root), files(mind)
    report = mind.capture(MESSAGES, answer(cand("note", "teapot", "The blue teapot is chipped.")), "s1", dry_run=True)
    assert report.dry_run and [d.action for d in report.decisions] == ["add"] and report.decisions[0].memory is None
    assert commit_count(mind.root) == before and files(mind) == on_disk


HOSTILE = [
    ("not json at all", "extractor answer"),
    ('{"memories": {"key": "x"}}', "extractor answer"),
    ('```json\n{"memories": [{"category": "fact", "key": "x"}]}\n```', "content"),
    (json.dumps({"memories": [cand("fact", "../../etc/passwd", "x")]}), "memories[0] (fact/../../etc/passwd).key"),
    (json.dumps({"memories": [cand("planet", "x", "y")]}), "category"),
    (json.dumps({"memories": [cand("fact", "x", 42)]}), "content"),
    (json.dumps({"memories": [cand("fact", "x", "---\nid: mem_evil\n---\nbody")]}), "front-matter"),
    (json.dumps({"memories": [cand("fact", "x", "y", priority="critical")]}), "priority"),
    (json.dumps({"memories": [cand("fact", "x", "y", confidence="very")]}), "confidence"),
    (json.dumps({"memories": [cand("fact", "x", "y", turns=[99])]}), "turns"),
    (json.dumps({"memories": [cand("fact", "x", "y", tags="notalist;" * 50)]}), "tag"),
    (json.dumps({"memories": [cand("fact", "x", "y", id="mem_evil")]}), ".id"),
    (json.dumps({"memories": [cand("fact", f"k{n}", "y") for n in range(10_000)]}), "at most 100"),
]


@pytest.mark.parametrize(("reply", "named"), HOSTILE, ids=[f"hostile-{n}" for n in range(len(HOSTILE))])
def test_a_bad_or_hostile_answer_is_refused_by_name_and_writes_nothing(mind: Vault, reply: str, named: str) -> None:
    before, on_disk = commit_count(mind.root), files(mind)
    with pytest.raises(InvalidInput) as caught:
        mind.capture(MESSAGES, lambda _s, _u: reply, "s1")
    assert named in str(caught.value)
    assert commit_count(mind.root) == before and files(mind) == on_disk


def test_a_secret_in_any_candidate_refuses_the_whole_capture(mind: Vault) -> None:
    before, on_disk = commit_count(mind.root), files(mind)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    reply = {"memories": [cand("note", "fine", "A fine note."), cand("note", "token", f"The token is {token}.")]}
    with pytest.raises(SecretFound):
        mind.capture(MESSAGES, lambda _s, _u: reply, "s1")  # the parsed object is taken as well as JSON text
    assert commit_count(mind.root) == before and files(mind) == on_disk


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ([], "messages"),
        ("hello", "messages"),
        ([{"role": "wizard", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 42}], "messages[0].content"),
        ([{"role": "user", "content": "x"}] * 1001, "at most 1,000"),
        ([{"role": "user", "content": "x" * 400_001}], "characters"),
    ],
)
def test_messages_that_are_not_a_conversation_are_refused(mind: Vault, messages: Any, named: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        mind.capture(messages, answer(), "s1")
    assert named in str(caught.value)


def test_a_session_name_is_one_short_line(mind: Vault) -> None:
    with pytest.raises(InvalidInput, match="session"):
        mind.capture(MESSAGES, answer(), "two\nlines")
    assert mind.capture(MESSAGES, answer(), None).session.startswith("capture-")


def test_provenance_round_trips_through_export_and_import(mind: Vault, tmp_path: Path) -> None:
    mind.capture(MESSAGES, answer(cand("note", "blue_teapot", "The blue teapot is chipped.", turns=[1, 2])), "s1")
    exported = tmp_path / "out.jsonl"
    mind.export(exported)
    other = Vault.init(tmp_path / "other", "michael", "Other")
    other.import_(exported)
    [proposal] = other.proposals()
    assert proposal.proposed and dict(proposal.extra) == dict(mind.proposals()[0].extra)
    assert dict(proposal.extra)["captured_turns"] == [1, 2] and len(dict(proposal.extra)["captured_lines"]) == 2


def test_the_decision_rules_on_known_cases() -> None:
    from datetime import datetime, timezone

    from memfile.model import Memory

    def memory(ref: str, content: str) -> Memory:
        category, key = ref.split("/")
        now = datetime(2026, 1, 1, tzinfo=timezone.utc)
        return Memory(
            "mem_" + key.replace("_", "")[:30] + "0000", "m", Category(category), key, content, f"m/{ref}.md", now, now
        )

    held = [
        memory("preference/hiking", "Loves hiking; prefers trails under 15 km."),
        memory("fact/car", "Drives a Volvo."),
    ]
    assert decide(Candidate(Category.PREFERENCE, "short_trails", "Keeps hikes under 15 km."), held)[0] == "skip"
    assert decide(Candidate(Category.FACT, "car", "Drives a Skoda now."), held)[:1] == ("update",)
    assert decide(Candidate(Category.FACT, "bike", "Rides a red bike to work."), held)[0] == "add"
    assert decide(Candidate(Category.PREFERENCE, "trails", "Prefers trails under 20 km."), held)[0] == "update"


def test_transcript_names_non_text_blocks() -> None:
    text = transcript(
        [{"role": "user", "content": [{"type": "image_url", "image_url": {}}, {"type": "text", "text": "hi"}]}]
    )
    assert text == "[0] user: [image_url]\nhi"


def test_the_capture_example_in_docs_agents_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import io
    import re
    import tempfile

    doc = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
    section = doc.read_text(encoding="utf-8").split("## Capturing what a conversation taught", 1)[1]
    code = re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert code, "docs/agents.md: the capture section has no python example"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(doc), "exec"), {"__name__": "capture_example"})
    printed = out.getvalue().splitlines()
    assert printed[0] == "update identity/home_city - it changes identity/home_city, at the same key"
    assert printed[1].startswith("add preference/transport")
    assert printed[2] == "['identity/home_city_2', 'preference/transport']"
    assert printed[3] == "Michael lives in Porto since May."


def test_a_store_at_a_proposals_key_is_refused_for_a_person_too(mind: Vault) -> None:
    from memfile.errors import Conflict

    mind.capture(MESSAGES, answer(cand("note", "blue_teapot", "The blue teapot is chipped.")), "s1")
    with pytest.raises(Conflict, match="memfile review edit note/blue_teapot"):
        mind.store("note", "blue_teapot", "Mended.")
    assert (
        mind.get("note/blue_teapot").proposed and mind.get("note/blue_teapot").content == "The blue teapot is chipped."
    )
