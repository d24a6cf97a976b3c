"""Proposals made by a real capture, for the review tests of every face: `propose(vault)` stores a person's
memory, then captures a conversation whose extractor (a fixed answer: no model is reachable from here)
proposes an update of it and a new memory.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import json

from memfile import Vault

#: The conversation, and what the extractor answers for it.
MESSAGES = [
    {"role": "user", "content": "I switched: I drink green tea every morning now, no more coffee."},
    {"role": "assistant", "content": "Noted, green tea it is."},
    {"role": "user", "content": "By the way, my dog is called Rex."},
]
CANDIDATES = [
    {
        "category": "preference",
        "key": "coffee",
        "content": "Drinks green tea every morning, no more coffee.",
        "tags": ["drinks"],
        "priority": "normal",
        "confidence": 0.9,
        "turns": [0],
    },
    {
        "category": "fact",
        "key": "dog_name",
        "content": "Has a dog called Rex.",
        "tags": ["pets"],
        "priority": "normal",
        "confidence": 0.9,
        "turns": [2],
    },
]
#: The REFs of the proposals `propose` makes: the update waits beside the memory it would supersede.
UPDATE, ADDED, TARGET = "preference/coffee_2", "fact/dog_name", "preference/coffee"
#: Words only the proposals hold (none of the person's memory).
PROPOSED_WORDS = ("Rex", "green tea")


def propose(vault: Vault, session: str = "s1") -> dict[str, str]:
    """The person's memory (TARGET) and the capture's two proposals (UPDATE, ADDED); their ids by REF."""
    vault.store("preference", "coffee", "Drinks black coffee every morning.", tags=["drinks"])
    report = vault.capture(MESSAGES, lambda system, user: json.dumps({"memories": CANDIDATES}), session=session)
    assert [d.action for d in report.decisions] == ["update", "add"], report.to_dict()
    return {m.ref: m.id for m in vault.memories()}
