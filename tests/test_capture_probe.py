"""The capture quality set (benchmarks/data/capture_probe.jsonl, benchmarks/capture_probe.py) stays sound.

The set is the figure issue 43's closing note reports: every key and category memfile's, every target a
memory the mind holds, every turn a message of the conversation. A hand edit that breaks one fails here.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO

from memfile.model import KEY_PATTERN, Category, Priority
from memfile.secretscan import scan


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capture_probe", REPO / "benchmarks" / "capture_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe = _module()


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    return probe.load()


def test_the_set_is_sound(cases: list[dict[str, Any]]) -> None:
    assert probe.check(cases) == []
    assert len(cases) >= 24


def test_its_rules_are_memfiles(cases: list[dict[str, Any]]) -> None:
    """The module's own copies of the rules (it imports no memfile) match the model's."""
    assert probe.KEY.pattern == KEY_PATTERN.pattern
    assert set(probe.CATEGORIES) == {c.value for c in Category}
    assert set(probe.PRIORITIES) == {p.value for p in Priority}


def test_the_decisions_are_a_mix_in_both_halves(cases: list[dict[str, Any]]) -> None:
    tune, held = probe.tune_half(cases), probe.held_out(cases)
    assert sorted(c["id"] for c in tune + held) == list(range(len(cases)))
    assert {c["id"] % 2 for c in tune} == {1} and {c["id"] % 2 for c in held} == {0}
    for half in (tune, held):
        n = probe.counts(half)
        total = sum(n.values())
        assert total >= 30
        assert 0.35 <= n["add"] / total <= 0.6, n
        assert n["update"] / total >= 0.15 and n["skip"] / total >= 0.15, n


def test_the_extractor_returns_the_candidates_in_the_documented_shape(cases: list[dict[str, Any]]) -> None:
    for case in cases:
        answer = json.loads(probe.deterministic_extractor(case))
        assert list(answer) == ["memories"]
        assert answer["memories"] == case["candidates"]


def test_no_candidate_holds_a_secret_but_a_conversation_pastes_one(cases: list[dict[str, Any]]) -> None:
    """A secret among the candidates would make capture refuse the whole batch; the pasted one stays in the chat."""
    for case in cases:
        for cand in case["candidates"]:
            assert scan(cand["content"]) == [], (case["id"], cand["key"])
    pasted = next(c for c in cases if c["session"] == "secret-pasted-1")
    assert scan(pasted["messages"][0]["content"])


def test_check_names_each_broken_thing(cases: list[dict[str, Any]]) -> None:
    broken = copy.deepcopy(cases[:2])
    first = broken[0]
    first["candidates"][0]["key"] = "../etc"
    first["candidates"][1]["turns"] = [0, 99]
    first["expected"][1] = {"decision": "update", "target": "fact/nobody", "why": "x"}
    first["candidates"][2]["category"] = "secret"
    first["candidates"][3]["turns"] = [0]  # the system message
    broken[1]["expected"].pop()
    broken[1]["id"] = 5
    problems = "\n".join(probe.check(broken))
    for needle in (
        "key '../etc' is not snake_case",
        "turn 99 is not a message index",
        "target 'fact/nobody' is not a memory of mind_before",
        "category 'secret' is not one of",
        "turn 0 is a system message",
        "3 candidates but 2 expected decisions",
        "case 5: id out of order (expected 1)",
    ):
        assert needle in problems, problems
