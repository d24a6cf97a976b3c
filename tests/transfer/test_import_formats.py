"""The foreign readers of `memfile import`: Synapse's JSON, LangBot's L1/L2 envelopes, OpenClaw's Markdown.

Each reader is a pure function from a file's content to records (memfile.transfer.records); the
fixtures in tests/fixtures/import/ are short files written by hand for these tests. The end-to-end
tests import each fixture into a fresh vault through `Vault.import_` and import it again: no commit.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS, commit_count, in_vault, ok, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfile import Vault
from memfile.errors import InvalidInput, MemfileError
from memfile.model import ID_PATTERN, KEY_PATTERN
from memfile.transfer.langbot import read_langbot
from memfile.transfer.openclaw import guess_category, read_openclaw
from memfile.transfer.records import ImportOptions
from memfile.transfer.synapse import derived_id, read_synapse, slug

FIXTURES = TESTS / "fixtures" / "import"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
OPTIONS = ImportOptions(now=NOW)


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['category']}/{r['key']}": r for r in records}


def at(moment: str) -> float:
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()


def assert_valid(records: list[dict[str, Any]]) -> None:
    """What the core's validation needs from any reader: a key by the rule, a memfile id, text content."""
    ids = [r["id"] for r in records]
    assert len(set(ids)) == len(ids)
    for record in records:
        assert KEY_PATTERN.fullmatch(record["key"]), record["key"]
        assert ID_PATTERN.fullmatch(record["id"]), record["id"]
        assert isinstance(record["content"], str) and record["content"].strip()
        json.dumps(record)  # JSON values only


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The OpenClaw fixture folder, copied, with its files' mtimes set (a checkout's mtimes are its own)."""
    root = tmp_path / "workspace"
    shutil.copytree(FIXTURES / "openclaw", root)
    os.utime(root / "MEMORY.md", (at("2026-03-30T08:00:00Z"),) * 2)
    os.utime(root / "DREAMS.md", (at("2026-03-31T03:00:00Z"),) * 2)
    os.utime(root / "memory" / "2026-03-28.md", (at("2026-03-28T21:15:30Z"),) * 2)  # later that day
    os.utime(root / "memory" / "2026-03-29-trip-planning.md", (at("2026-04-02T10:00:00Z"),) * 2)  # another day
    return root


# ---------------------------------------------------------------------------- Synapse


def test_synapse_fields_map_one_to_one() -> None:
    incoming = read_synapse(load("synapse_array.json"), OPTIONS)
    assert incoming.format == "synapse"
    first = incoming.records[0]
    assert first == {
        "id": "mem_abc123",
        "category": "project",
        "key": "project_synapse_status",
        "content": "Synapse v1.5.0 deployed on vps1. CI green.",
        "tags": ["synapse", "deployment", "v1.5.0"],
        "priority": "high",
        "source": "agent",
        "verified": False,
        "confidence": 0.85,
        "expires_at": None,
        "created_at": "2026-06-27T10:00:00Z",
        "updated_at": "2026-06-27T11:30:00Z",
        "mind_id": "m_xyz789",
        "_where": "memories[0] (id mem_abc123)",
    }
    assert_valid(incoming.records)


def test_synapse_foreign_id_unknown_fields_and_missing_id() -> None:
    incoming = read_synapse(load("synapse_array.json"), OPTIONS)
    second, third = incoming.records[1], incoming.records[2]
    assert second["id"] == derived_id("synapse", "7f3c2a") and second["id"].startswith("mem_")
    assert second["extra"] == {"access_count": 4, "pinned_by": {"name": "Michael"}, "synapse_id": "7f3c2a"}
    assert list(second["extra"]) == ["access_count", "pinned_by", "synapse_id"]  # the memory's order
    assert second["content"] == "Thích cà phê sữa đá, không đường."
    assert second["tags"] == ["đồ uống", "กาแฟ"]
    assert third["id"] == derived_id("synapse", "fact/office")  # no id: named by category/key
    assert third["content"] == "办公室在柏林。" and "extra" not in third
    assert incoming.unmapped == [
        "field 'access_count' (1 memory) is not a Synapse field: kept as a front-matter key",
        "field 'pinned_by' (1 memory) is not a Synapse field: kept as a front-matter key",
    ]


def test_synapse_wrapped_with_a_number_id() -> None:
    incoming = read_synapse(load("synapse_wrapped.json"), OPTIONS)
    (record,) = incoming.records
    assert record["id"] == derived_id("synapse", "42")
    assert record["extra"] == {"synapse_id": 42}
    assert record["expires_at"] == "2027-01-01T00:00:00Z"
    assert record["_where"] == "memories[0] (id 42)"
    assert incoming.unmapped == ["top-level field 'exported_by' of the Synapse file: not imported"]


def test_synapse_memfile_json_fields_are_not_front_matter() -> None:
    memory = {
        "id": "mem_0001abcd",
        "category": "fact",
        "key": "office",
        "content": "Berlin",
        "status": "superseded",
        "superseded_by": "mem_0002abcd",
        "extra": {"aliases": ["hq"]},
        "path": "michael/fact/office.md",
        "mind": "michael",
        "expired": False,
        "id_derived": False,
        "verified": "yes",  # passed on as given: the core validates
    }
    incoming = read_synapse([memory], OPTIONS)
    (record,) = incoming.records
    assert record["status"] == "superseded" and record["superseded_by"] == "mem_0002abcd"
    assert record["extra"] == {"aliases": ["hq"]}
    assert record["verified"] == "yes" and record["mind_id"] == "michael"
    assert "path" not in record
    assert sorted(incoming.unmapped) == sorted(
        f"field {name!r} (1 memory) describes a file, not a memory: not imported"
        for name in ("path", "mind", "expired", "id_derived")
    )


@pytest.mark.parametrize(
    ("data", "place"),
    [
        ("memories", "Synapse import"),
        (7, "Synapse import"),
        (None, "Synapse import"),
        ({"memory": []}, "Synapse import"),
        ({"memories": {"a": 1}}, "Synapse import"),
        ([1], "memories[0]"),
        ([{"category": "fact", "key": "a", "content": "b"}, []], "memories[1]"),
        ([{"id": ["x"], "category": "fact", "key": "a", "content": "b"}], "memories[0].id"),
        ([{"id": True, "category": "fact", "key": "a", "content": "b"}], "memories[0].id"),
        ([{"id": 1.5, "category": "fact", "key": "a", "content": "b"}], "memories[0].id"),
        ([{"extra": "x", "category": "fact", "key": "a", "content": "b"}], "memories[0].extra"),
    ],
)
def test_synapse_refuses_shapes_naming_the_place(data: Any, place: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_synapse(data, OPTIONS)
    assert caught.value.field == place


# ---------------------------------------------------------------------------- LangBot L1


def test_langbot_profiles_field_by_field() -> None:
    incoming = read_langbot(load("langbot_profiles.json"), OPTIONS)
    records = by_key(incoming.records)
    assert list(records)[:5] == [
        "identity/user_name",
        "identity/trait_cadence",
        "identity/trait_ships_on_fridays",
        "preference/short_answers",
        "note/profile_notes",
    ]
    scope = {"langbot_scope_key": "bot-1:group_123"}
    name = records["identity/user_name"]
    assert name == {
        "id": derived_id("langbot", "profile:bot-1:group_123::identity/user_name"),
        "category": "identity",
        "key": "user_name",
        "content": "Release group",
        "tags": ["langbot", "scope:bot-1:group_123"],
        "source": "agent",
        "created_at": "2026-03-15T07:00:00Z",  # the profile's updated_at (+02:00) in UTC
        "updated_at": "2026-03-15T07:00:00Z",
        "priority": "high",
        "extra": scope,
        "_where": "profiles[0] (session profile) name",
    }
    slot = records["identity/trait_cadence"]
    assert slot["content"] == "works in sprints"
    assert slot["confidence"] == 0.9
    assert slot["created_at"] == slot["updated_at"] == "2026-03-14T10:00:00Z"  # the slot's own time
    assert slot["extra"] == {
        **scope,
        "langbot_slot": "cadence",
        "langbot_history": [
            {
                "value": "works in waterfalls",
                "timestamp": "2026-01-02T10:00:00Z",
                "status": "superseded",
                "reason": "correction",
            }
        ],
    }
    freeform = records["identity/trait_ships_on_fridays"]
    assert "confidence" not in freeform and freeform["created_at"] == "2026-03-15T07:00:00Z"
    assert "identity/trait_works_in_sprints" not in records  # the slot's value is not imported twice
    assert records["note/profile_notes"]["content"] == "Mostly talks about releases."
    assert records["preference/short_answers"]["content"] == "short answers"
    assert incoming.unmapped == [
        "profiles[0] (session profile): traits slot 'diet' has no current value (removed):"
        " its history of 1 entries is not imported"
    ]
    assert_valid(incoming.records)


def test_langbot_speaker_profile_keys_tags_and_scripts() -> None:
    records = by_key(read_langbot(load("langbot_profiles.json"), OPTIONS).records)
    name = records["identity/u1_name"]
    assert name["content"] == "Nguyễn Thị Lan" and name["priority"] == "high"
    assert name["tags"] == ["langbot", "speaker:u1", "scope:bot-1:group_123"]
    assert name["extra"] == {"langbot_scope_key": "bot-1:group_123", "langbot_sender_id": "u1"}
    preferences = {r["content"]: key for key, r in records.items() if key.startswith("preference/u1_")}
    assert preferences["Thích phở"] == "preference/u1_thich_pho"
    chinese, thai = preferences["喜欢喝茶"], preferences["ชอบอาหารเผ็ด"]
    assert chinese != thai  # no ASCII form: a hash of the text keeps them apart
    assert chinese == f"preference/u1_{slug('喜欢喝茶')}"
    assert "note/u1_profile_notes" not in records  # empty notes make no memory


def test_langbot_source_user_when_a_person_says_so() -> None:
    options = ImportOptions(now=NOW, source="user")
    incoming = read_langbot(load("langbot_profiles.json"), options)
    assert {r["source"] for r in incoming.records} == {"user"}
    with pytest.raises(InvalidInput) as caught:
        read_langbot(load("langbot_profiles.json"), ImportOptions(now=NOW, source="import"))
    assert caught.value.field == "source"


def test_langbot_colliding_slugs_are_suffixed_not_merged() -> None:
    envelope = {
        "profiles": [
            {
                "type": "session",
                "profile": {
                    "name": "",
                    "updated_at": "2026-01-01T00:00:00Z",
                    "freeform_preferences": ["Likes tea!", "likes tea", "likes tea"],
                },
            }
        ]
    }
    records = read_langbot(envelope, OPTIONS).records
    assert [(r["key"], r["content"]) for r in records] == [
        ("likes_tea", "Likes tea!"),
        ("likes_tea_2", "likes tea"),  # the exact duplicate is one preference, as LangBot keeps it
    ]
    assert records[0]["id"] != records[1]["id"]


def test_langbot_profile_without_slots_reads_the_plain_lists() -> None:
    envelope = {
        "exported_at": "2026-02-01T00:00:00Z",
        "profiles": [{"type": "session", "scope_key": "s", "profile": {"traits": ["calm"], "preferences": ["tea"]}}],
    }
    records = by_key(read_langbot(envelope, OPTIONS).records)
    assert records["identity/trait_calm"]["created_at"] == "2026-02-01T00:00:00Z"  # no updated_at: exported_at
    assert records["preference/tea"]["tags"] == ["langbot", "scope:s"]


def test_langbot_envelope_notes() -> None:
    envelope = load("langbot_profiles.json")
    envelope["version"] = 2
    envelope["count"] = 3
    envelope["owner"] = "x"
    envelope["profiles"].append({"type": "group", "profile": {}})
    envelope["profiles"][1]["profile"]["mood"] = "happy"
    envelope["profiles"][1]["extra_field"] = 1
    unmapped = read_langbot(envelope, OPTIONS).unmapped
    assert "envelope version 2: read as version 1" in unmapped
    assert "the envelope's count says 3 but it holds 3 profiles: the file may have been cut or edited" not in unmapped
    assert "envelope field 'owner': not imported" in unmapped
    assert "profiles[2]: profile type 'group' is neither session nor speaker: skipped" in unmapped
    assert "profiles[1] (speaker profile of u1): profile field 'mood' not imported" in unmapped
    assert "profiles[1] (speaker profile of u1): field 'extra_field' not imported" in unmapped
    envelope["count"] = 9
    assert (
        "the envelope's count says 9 but it holds 3 profiles: the file may have been cut or edited"
        in read_langbot(envelope, OPTIONS).unmapped
    )


# ---------------------------------------------------------------------------- LangBot L2


def test_langbot_episodes_field_by_field() -> None:
    incoming = read_langbot(load("langbot_episodes.json"), OPTIONS)
    records = by_key(incoming.records)
    assert list(records) == [
        "context/episode_a1b2c3d4e5f6",
        "context/episode_b2c3d4e5f6a7",
        "context/episode_c3d4e5f6a7b8",
        "context/episode_d4e5f6a7b8c9",
        "context/episode_f6a7b8c9d0e1",
    ]
    old, new = records["context/episode_a1b2c3d4e5f6"], records["context/episode_b2c3d4e5f6a7"]
    assert old == {
        "id": derived_id("langbot", "a1b2c3d4e5f6"),
        "category": "context",
        "key": "episode_a1b2c3d4e5f6",
        "content": "Lan moved the release to Friday.",
        "tags": ["release", "langbot", "speaker:u1", "scope:bot-1:group_123"],
        "priority": "normal",
        "source": "agent",
        "created_at": "2026-03-18T02:00:00Z",  # +07:00 normalised to Z
        "updated_at": "2026-03-18T02:00:00Z",
        "status": "superseded",
        "superseded_by": new["id"],  # in the same file: resolved
        "extra": {
            "langbot_episode_id": "a1b2c3d4e5f6",
            "langbot_sender_id": "u1",
            "langbot_sender_name": "Lan",
            "langbot_source": "agent",
            "langbot_scope_key": "bot-1:group_123",
        },
        "_where": "episodes[0] (id a1b2c3d4e5f6)",
    }
    assert new["priority"] == "high"  # importance 5, capped at high
    assert "status" not in new and "langbot_superseded_by" not in new["extra"]
    archived = records["context/episode_c3d4e5f6a7b8"]
    assert archived["priority"] == "low"  # importance 1
    assert archived["expires_at"] == archived["created_at"] == "2026-03-10T12:00:00Z"
    assert archived["content"] == "Chuyến đi Đà Nẵng tuần trước rất vui."
    assert archived["extra"]["langbot_source"] == "import"
    thai = records["context/episode_d4e5f6a7b8c9"]
    assert thai["status"] == "superseded" and "superseded_by" not in thai  # its successor is not in the file
    assert thai["extra"]["langbot_superseded_by"] == "ffffffffffff"
    assert thai["tags"][0] == "ประชุม" and thai["priority"] == "high"  # importance 4
    chinese = records["context/episode_f6a7b8c9d0e1"]
    assert chinese["tags"] == ["travel", "langbot", "speaker:u4", "scope:bot-1:group_123"]  # no name: the id
    assert chinese["priority"] == "normal"  # importance 2
    assert incoming.unmapped == [
        "episodes[4] (id e5f6a7b8c9d0): status 'deleted': skipped",
        "episodes[5]: field 'score' not imported",
    ]
    assert_valid(incoming.records)


def test_langbot_importance_five_is_critical_only_when_asked() -> None:
    options = ImportOptions(now=NOW, max_priority="critical")
    records = by_key(read_langbot(load("langbot_episodes.json"), options).records)
    assert records["context/episode_b2c3d4e5f6a7"]["priority"] == "critical"
    assert records["context/episode_d4e5f6a7b8c9"]["priority"] == "high"
    with pytest.raises(InvalidInput) as caught:
        read_langbot(load("langbot_episodes.json"), ImportOptions(now=NOW, max_priority="urgent"))
    assert caught.value.field == "max_priority"


def episode(**fields: Any) -> dict[str, Any]:
    return {"episodes": [{"id": "e1", "content": "text", "timestamp": "2026-03-01T00:00:00Z", **fields}]}


@pytest.mark.parametrize(
    ("importance", "priority"),
    [(None, "normal"), ("", "normal"), (0, "low"), (-3, "low"), (1, "low"), (2, "normal"), (3, "normal")]
    + [(4, "high"), (5, "high"), (9, "high"), ("4", "high"), (3.0, "normal")],
)
def test_langbot_importance_is_clamped_as_langbot_does(importance: Any, priority: str) -> None:
    (record,) = read_langbot(episode(importance=importance), OPTIONS).records
    assert record["priority"] == priority


@pytest.mark.parametrize("importance", ["high", True, 2.5, [], {"v": 1}])
def test_langbot_bad_importance_names_the_episode(importance: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_langbot(episode(importance=importance), OPTIONS)
    assert caught.value.field == "episodes[0].importance"


def test_langbot_episode_edge_cases() -> None:
    envelope = {
        "exported_at": "2026-03-20T00:00:00Z",
        "episodes": [
            {"id": "x1", "content": "first", "tags": "a, b", "status": "ARCHIVED"},
            {"id": "x1", "content": "again"},
            {"id": "x2", "content": "   "},
            {"content": "no id", "timestamp": "2026-03-02T00:00:00", "status": "frozen", "tags": ["-dash", ","]},
            {"id": "x3", "content": "still active", "status": "active", "superseded_by": "x1"},
        ],
    }
    incoming = read_langbot(envelope, OPTIONS)
    first, no_id, active = incoming.records
    assert first["tags"] == ["a", "b", "langbot"]  # LangBot's comma-separated metadata form
    assert first["created_at"] == first["expires_at"] == "2026-03-20T00:00:00Z"  # no timestamp: exported_at
    assert no_id["key"].startswith("episode_") and "langbot_episode_id" not in no_id["extra"]
    assert no_id["created_at"] == "2026-03-02T00:00:00Z"  # a time without zone is UTC
    assert no_id["tags"] == ["dash", "langbot"]
    assert "status" not in active and active["extra"]["langbot_superseded_by"] == "x1"
    assert incoming.unmapped == [
        "episodes[1] (id x1): the same episode id appears earlier in the file: skipped",
        "episodes[2] (id x2): no content: skipped",
        "episodes[3]: status 'frozen' is not LangBot's: read as active, as LangBot does",
    ]
    assert read_langbot(envelope, OPTIONS) == incoming  # the derived id of the unnamed episode is stable


def test_langbot_archived_without_any_time_expires_now() -> None:
    (record,) = read_langbot({"episodes": [{"id": "z", "content": "c", "status": "archived"}]}, OPTIONS).records
    assert record["expires_at"] == "2026-12-01T12:00:00Z"
    assert "created_at" not in record or record["created_at"] is None  # the core's now


@pytest.mark.parametrize(
    ("data", "place"),
    [
        ([], "LangBot import"),
        ("x", "LangBot import"),
        ({"version": 1}, "LangBot import"),
        ({"profiles": {}}, "profiles"),
        ({"profiles": ["x"]}, "profiles[0]"),
        ({"profiles": [{"type": "session"}]}, "profiles[0].profile"),
        ({"profiles": [{"type": "session", "profile": []}]}, "profiles[0].profile"),
        ({"profiles": [{"type": 3, "profile": {}}]}, "profiles[0].type"),
        ({"profiles": [{"type": "speaker", "profile": {}}]}, "profiles[0].sender_id"),
        ({"profiles": [{"sender_id": {}, "profile": {}}]}, "profiles[0].sender_id"),
        ({"profiles": [{"profile": {"name": {"first": "A"}}}]}, "profiles[0].profile.name"),
        ({"profiles": [{"profile": {"notes": ["a"]}}]}, "profiles[0].profile.notes"),
        ({"profiles": [{"profile": {"updated_at": "yesterday"}}]}, "profiles[0].profile.updated_at"),
        ({"profiles": [{"profile": {"updated_at": 1700000000}}]}, "profiles[0].profile.updated_at"),
        ({"profiles": [{"profile": {"profile_slots": []}}]}, "profiles[0].profile.profile_slots"),
        ({"profiles": [{"profile": {"profile_slots": {"traits": []}}}]}, "profiles[0].profile.profile_slots.traits"),
        (
            {"profiles": [{"profile": {"profile_slots": {"traits": {"diet": "vegan"}}}}]},
            "profiles[0].profile.profile_slots.traits.diet",
        ),
        (
            {"profiles": [{"profile": {"profile_slots": {"traits": {"diet": {"value": ["v"]}}}}}]},
            "profiles[0].profile.profile_slots.traits.diet.value",
        ),
        ({"profiles": [{"profile": {"freeform_traits": "calm"}}]}, "profiles[0].profile.freeform_traits"),
        ({"profiles": [{"profile": {"preferences": [{"a": 1}]}}]}, "profiles[0].profile.preferences[0]"),
        ({"episodes": {"id": "e"}}, "episodes"),
        ({"episodes": [None]}, "episodes[0]"),
        ({"episodes": [{"id": ["e"], "content": "c"}]}, "episodes[0].id"),
        ({"episodes": [{"id": "e", "content": 5}]}, "episodes[0].content"),
        ({"episodes": [{"id": "e", "content": "c", "tags": {"a": 1}}]}, "episodes[0].tags"),
        ({"episodes": [{"id": "e", "content": "c", "tags": [["a"]]}]}, "episodes[0].tags[0]"),
        ({"episodes": [{"id": "e", "content": "c", "timestamp": "2026-13-01"}]}, "episodes[0].timestamp"),
        ({"episodes": [{"id": "e", "content": "c", "status": ["active"]}]}, "episodes[0].status"),
        ({"episodes": [{"id": "e", "content": "c", "sender_name": True}]}, "episodes[0].sender_name"),
        ({"episodes": [{"id": "e", "content": "c", "superseded_by": {}}]}, "episodes[0].superseded_by"),
        ({"exported_at": "soon", "episodes": []}, "exported_at"),
        ({"scope_key": ["s"], "episodes": []}, "scope_key"),
    ],
)
def test_langbot_refuses_shapes_naming_the_place(data: Any, place: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_langbot(data, OPTIONS)
    assert caught.value.field == place


WRONG_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], [1], {}, {"a": 1}]


def paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each object field and array item, nested."""
    found = [here] if here else []
    if isinstance(value, dict):
        for name, inner in value.items():
            found += paths(inner, (*here, name))
    elif isinstance(value, list):
        for number, inner in enumerate(value):
            found += paths(inner, (*here, number))
    return found


def replaced(value: Any, place: tuple[Any, ...], new: Any) -> Any:
    changed = copy.deepcopy(value)
    target = changed
    for step in place[:-1]:
        target = target[step]
    target[place[-1]] = new
    return changed


@pytest.mark.parametrize(
    ("name", "reader"),
    [
        ("langbot_profiles.json", read_langbot),
        ("langbot_episodes.json", read_langbot),
        ("synapse_array.json", read_synapse),
        ("synapse_wrapped.json", read_synapse),
    ],
)
def test_wrong_types_anywhere_raise_invalid_input_or_are_read(name: str, reader: Any) -> None:
    """Every field of every fixture replaced by every wrong kind of value: records or InvalidInput, nothing else."""
    original = load(name)
    tried = 0
    for place in paths(original):
        for wrong in WRONG_VALUES:
            try:
                incoming = reader(replaced(original, place, wrong), OPTIONS)
            except InvalidInput as error:
                assert str(error).endswith(".")  # a full sentence
            else:
                json.dumps(incoming.records)
                assert all(isinstance(line, str) for line in incoming.unmapped)
            tried += 1
    assert tried >= 10 * len(WRONG_VALUES)


# ---------------------------------------------------------------------------- OpenClaw


def test_openclaw_sections_field_by_field(workspace: Path) -> None:
    incoming = read_openclaw(workspace, OPTIONS)
    assert incoming.format == "openclaw"
    records = by_key(incoming.records)
    chinese = f"note/{slug('笔记', 90)}"
    assert list(records) == [
        "note/memory_intro",
        "identity/about_me",
        "preference/preferences",
        "mistake/lessons_learned",
        "project/projects",
        chinese,
        "context/daily_2026_03_28",
        "context/daily_2026_03_29_trip_planning",
    ]
    stamp = "2026-03-30T08:00:00Z"
    assert records["identity/about_me"] == {
        "id": derived_id("openclaw", "MEMORY.md#about_me"),
        "category": "identity",
        "key": "about_me",
        "content": "Michael Schäfer, software engineer in Berlin.",
        "tags": ["openclaw"],
        "source": "agent",
        "created_at": stamp,
        "updated_at": stamp,
        "_dates_guessed": True,
        "extra": {"openclaw_file": "MEMORY.md", "openclaw_heading": "About me"},
        "_where": "MEMORY.md section 'About me'",
    }
    intro = records["note/memory_intro"]
    assert intro["content"] == "# MEMORY.md\n\nLong-term memory of the assistant for Michael."
    assert intro["_where"] == "MEMORY.md text before the first section"
    assert records["preference/preferences"]["content"] == (
        "- Prefers concise technical answers.\n- Dark mode everywhere.\n  Even in the terminal.\n- Thích cà phê sữa đá."
    )
    lessons = records["mistake/lessons_learned"]["content"]
    assert "## this is code, not a heading" in lessons  # a heading inside a code fence splits nothing
    assert (
        records[chinese]["content"] == "## 笔记\n\n用户下周去北京出差。"
    )  # a hash in the key: the words in the content
    assert records[chinese]["extra"]["openclaw_heading"] == "笔记"
    assert incoming.unmapped == [
        "AGENTS.md: not an OpenClaw memory file: not imported",
        "DREAMS.md: the dream diary is skipped (import it with --include-dreams)",
        "MEMORY.md section 'Empty section': empty: not imported",
        "memory/notes.txt: not a daily note (YYYY-MM-DD[-slug].md): not imported",
    ]
    assert_valid(incoming.records)


def test_openclaw_daily_notes(workspace: Path) -> None:
    records = by_key(read_openclaw(workspace, OPTIONS).records)
    day = records["context/daily_2026_03_28"]
    assert day == {
        "id": derived_id("openclaw", "memory/2026-03-28.md#daily_2026_03_28"),
        "category": "context",
        "key": "daily_2026_03_28",
        "content": "# 2026-03-28\n\n- Reviewed PR #42 with Michael.\n- ประชุมทีมเลื่อนไปวันพฤหัสบดี",
        "tags": ["openclaw", "daily"],
        "source": "agent",
        "created_at": "2026-03-28T21:15:30Z",  # the mtime: later the same day
        "updated_at": "2026-03-28T21:15:30Z",
        "_dates_guessed": True,
        "extra": {"openclaw_file": "memory/2026-03-28.md"},
        "_where": "memory/2026-03-28.md",
    }
    trip = records["context/daily_2026_03_29_trip_planning"]
    assert trip["created_at"] == "2026-03-29T00:00:00Z"  # touched on another day: the date's midnight
    assert trip["updated_at"] == "2026-04-02T10:00:00Z"  # ... and updated when it was last written
    assert trip["content"] == "Planned the trip to Đà Nẵng: flights booked for April 10."


def test_openclaw_bullets(workspace: Path) -> None:
    incoming = read_openclaw(workspace, ImportOptions(now=NOW, split="bullets"))
    records = by_key(incoming.records)
    assert list(records)[:4] == [
        "preference/prefers_concise_technical_answers",
        "preference/dark_mode_everywhere",
        "preference/thich_ca_phe_sua_da",
        "mistake/bump_the_npm_version_before_tagging_a_release",
    ]
    assert records["preference/dark_mode_everywhere"]["content"] == "Dark mode everywhere.\nEven in the terminal."
    assert records["preference/dark_mode_everywhere"]["_where"] == "MEMORY.md section 'Preferences' item 2"
    assert "MEMORY.md text before the first section: 1 line outside the list items not imported" in " ".join(
        incoming.unmapped
    )
    assert (
        "MEMORY.md section 'Lessons learned': 4 lines outside the list items not imported"
        " (split by sections to keep them)" in incoming.unmapped
    )
    assert_valid(incoming.records)


def test_openclaw_whole_file_and_category_override(workspace: Path) -> None:
    whole = by_key(read_openclaw(workspace, ImportOptions(now=NOW, split="file")).records)
    assert whole["note/memory"]["content"].startswith("# MEMORY.md\n")
    assert whole["note/memory"]["content"].endswith("## Empty section")
    assert "openclaw_heading" not in whole["note/memory"]["extra"]
    forced = read_openclaw(workspace, ImportOptions(now=NOW, category="fact")).records
    assert {r["category"] for r in forced if r["extra"]["openclaw_file"] == "MEMORY.md"} == {"fact"}
    assert {r["category"] for r in forced if r["key"].startswith("daily_")} == {"context"}
    for bad in (ImportOptions(now=NOW, category="facts"), ImportOptions(now=NOW, split="lines")):
        with pytest.raises(InvalidInput):
            read_openclaw(workspace, bad)


def test_openclaw_dreams_when_asked(workspace: Path) -> None:
    incoming = read_openclaw(workspace, ImportOptions(now=NOW, include_dreams=True))
    dreams = by_key(incoming.records)["note/dreams"]
    assert dreams["content"] == "# Dream Diary\n\n- Michael seems to prefer mornings for deep work."
    assert dreams["tags"] == ["openclaw", "dreams"] and dreams["created_at"] == "2026-03-31T03:00:00Z"
    assert not any("DREAMS" in line for line in incoming.unmapped)


def test_openclaw_single_files_get_the_folder_ids(workspace: Path) -> None:
    folder = by_key(read_openclaw(workspace, OPTIONS).records)
    day = read_openclaw(workspace / "memory" / "2026-03-28.md", OPTIONS)
    assert day.records == [folder["context/daily_2026_03_28"]]
    curated = read_openclaw(workspace / "MEMORY.md", OPTIONS).records
    assert curated == [r for r in folder.values() if r["extra"]["openclaw_file"] == "MEMORY.md"]
    dreams = read_openclaw(workspace / "DREAMS.md", OPTIONS)
    assert dreams.records == [] and dreams.unmapped
    (workspace / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InvalidInput):
        read_openclaw(workspace / "notes.txt", OPTIONS)
    with pytest.raises(InvalidInput):
        read_openclaw(workspace / "missing", OPTIONS)


def test_openclaw_any_md_file_is_memory_like(tmp_path: Path) -> None:
    note = tmp_path / "Ghi chú.md"
    note.write_bytes("\ufeff## Sở thích\r\n\r\nThích trà.\r\n## Sở thích\r\nThích phở.\r\n".encode())
    records = read_openclaw(note, OPTIONS).records
    assert [(r["category"], r["key"], r["content"]) for r in records] == [
        ("note", "so_thich", "Thích trà."),  # a BOM and CRLF read as plain lines
        ("note", "so_thich_2", "Thích phở."),  # the same heading twice: suffixed, never merged
    ]
    assert records[0]["extra"]["openclaw_file"] == "Ghi chú.md"
    assert records[0]["id"] != records[1]["id"]


def test_openclaw_refuses_non_utf8_naming_the_file(workspace: Path) -> None:
    (workspace / "memory" / "2026-03-30.md").write_bytes("Caf\xe9 at 9".encode("latin-1"))
    with pytest.raises(InvalidInput) as caught:
        read_openclaw(workspace, OPTIONS)
    assert "memory/2026-03-30.md" in str(caught.value) and "UTF-8" in str(caught.value)


def test_openclaw_odd_files_are_listed(workspace: Path) -> None:
    (workspace / "memory" / "2026-02-30.md").write_text("not a day", encoding="utf-8")
    (workspace / "memory" / "2026-03-01.md").write_text("\n\n", encoding="utf-8")
    (workspace / "memory" / "archive").mkdir()
    (workspace / ".git").mkdir()
    unmapped = read_openclaw(workspace, OPTIONS).unmapped
    assert "memory/2026-02-30.md: 2026-02-30 is not a date: not imported" in unmapped
    assert "memory/2026-03-01.md: empty: not imported" in unmapped
    assert "memory/archive: a folder: not imported" in unmapped
    assert not any(".git" in line for line in unmapped)


def test_openclaw_never_follows_a_link_out_of_the_folder(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("private", encoding="utf-8")
    (workspace / "memory" / "2026-03-31.md").symlink_to(outside / "secret.md")
    (workspace / "memory" / "2026-04-01.md").symlink_to(workspace / "memory" / "2026-03-28.md")  # inside
    (workspace / "memory" / "2026-04-02.md").symlink_to(workspace / "memory" / "2026-04-02.md")  # a loop
    incoming = read_openclaw(workspace, OPTIONS)
    assert not any(r["content"] == "private" for r in incoming.records)
    assert "context/daily_2026_04_01" in by_key(incoming.records)
    for name in ("memory/2026-03-31.md", "memory/2026-04-02.md"):
        assert f"{name}: a symbolic link leading out of the folder (or nowhere): not followed" in incoming.unmapped
    shutil.rmtree(workspace / "memory")
    (workspace / "memory").symlink_to(outside, target_is_directory=True)
    incoming = read_openclaw(workspace, OPTIONS)
    assert not any(r["key"].startswith("daily_") for r in incoming.records)
    assert "memory: a symbolic link leading out of the folder (or nowhere): not followed" in incoming.unmapped


def test_openclaw_folder_without_memory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x", encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        read_openclaw(tmp_path, OPTIONS)
    assert "MEMORY.md" in str(caught.value)


def test_openclaw_daily_files_at_the_top_of_the_folder(tmp_path: Path) -> None:
    (tmp_path / "2026-01-05-standup.md").write_text("Standup moved to 10:00.", encoding="utf-8")
    (record,) = read_openclaw(tmp_path, OPTIONS).records
    assert record["key"] == "daily_2026_01_05_standup"
    assert record["extra"]["openclaw_file"] == "memory/2026-01-05-standup.md"


MARKDOWN = st.text(alphabet=st.sampled_from(list("#-*+1.)` \n\t~ab_Zé笔記ภ")), max_size=200)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=MARKDOWN, split=st.sampled_from(["sections", "bullets", "file"]))
def test_any_markdown_gives_valid_records(tmp_path: Path, text: str, split: str) -> None:
    """Whatever MEMORY.md holds, each split gives records the core accepts (keys, ids, content), and says the rest."""
    path = tmp_path / "MEMORY.md"
    path.write_text(text, encoding="utf-8")
    incoming = read_openclaw(path, ImportOptions(now=NOW, split=split))
    assert_valid(incoming.records)
    if text.strip() and not incoming.records:
        assert incoming.unmapped  # nothing read: the reader says why


@pytest.mark.parametrize(
    ("heading", "category"),
    [
        ("Preferences", "preference"),
        ("User preferences", "preference"),
        ("Mistakes to avoid", "mistake"),
        ("Lessons learned", "mistake"),
        ("Current projects", "project"),
        ("About me", "identity"),
        ("User", "identity"),
        ("Skills", "skill"),
        ("Decisions", None),
        ("笔记", None),
    ],
)
def test_openclaw_guesses_the_category_from_heading_words(heading: str, category: str | None) -> None:
    assert guess_category(heading) == category


# ---------------------------------------------------------------------------- all readers


def test_reading_twice_gives_identical_records(workspace: Path) -> None:
    for name, reader in (
        ("synapse_array.json", read_synapse),
        ("synapse_wrapped.json", read_synapse),
        ("langbot_profiles.json", read_langbot),
        ("langbot_episodes.json", read_langbot),
    ):
        first, second = reader(load(name), OPTIONS), reader(load(name), ImportOptions(now=datetime.now(timezone.utc)))
        assert first == second, name
    for split in ("sections", "bullets", "file"):
        options = ImportOptions(now=NOW, split=split, include_dreams=True)
        assert read_openclaw(workspace, options) == read_openclaw(workspace, options)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thích cà phê sữa đá", "thich_ca_phe_sua_da"),
        ("Likes: TEA & coffee!", "likes_tea_coffee"),
        ("喜欢 Python", f"python_{slug('喜欢 Python')[-8:]}"),
        ("", slug("")),
    ],
)
def test_slug(text: str, expected: str) -> None:
    made = slug(text)
    assert made == expected and KEY_PATTERN.fullmatch(made)
    assert len(slug("word " * 50, 30)) <= 30


# ---------------------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    ("name", "refs"),
    [
        ("synapse_array.json", {"project/project_synapse_status", "preference/ca_phe", "fact/office"}),
        ("synapse_wrapped.json", {"mistake/npm_version"}),
        ("langbot_profiles.json", {"identity/user_name", "identity/u1_name", "preference/u1_thich_pho"}),
        ("langbot_episodes.json", {"context/episode_a1b2c3d4e5f6", "context/episode_f6a7b8c9d0e1"}),
        ("openclaw", {"identity/about_me", "context/daily_2026_03_28", "note/memory_intro"}),
    ],
)
def test_import_each_fixture_into_a_fresh_vault_twice(tmp_path: Path, name: str, refs: set[str]) -> None:
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    source = FIXTURES / name
    if name == "openclaw":
        source = tmp_path / "workspace"
        shutil.copytree(FIXTURES / "openclaw", source)
    report = vault.import_(source)
    assert report.commit is not None and not report.conflicts and not report.skipped
    assert refs <= set(report.created)
    count = commit_count(vault.root)
    again = vault.import_(source)
    assert again.commit is None and again.created == [] and again.updated == []
    assert again.unchanged == len(report.created)
    assert commit_count(vault.root) == count


def test_a_record_without_dates_imported_again_later_keeps_the_minds_dates(tmp_path: Path) -> None:
    """A Synapse memory with no dates is dated now when made; imported again (later) it is unchanged.

    "Later" is made without waiting: the file's dates are set back by hand first.
    """
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    undated = [{"id": "syn-1", "category": "fact", "key": "undated", "content": "From Synapse"}]
    vault.import_(json.dumps(undated).encode(), format="synapse")
    path = vault.root / vault.get("fact/undated").path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(f"{datetime.now(timezone.utc):%Y}-", "2020-"), encoding="utf-8")
    dated = vault.get("fact/undated")
    assert dated.created_at.year == 2020 and dated.updated_at.year == 2020
    again = vault.import_(json.dumps(undated).encode(), format="synapse")
    assert again.unchanged == 1 and again.updated == [] and again.commit is None
    assert vault.get("fact/undated").created_at == dated.created_at
    changed = vault.import_(json.dumps([{**undated[0], "content": "Said anew"}]).encode(), format="synapse")
    assert changed.updated == ["fact/undated"]
    now = vault.get("fact/undated")
    assert now.content == "Said anew" and now.created_at == dated.created_at and now.updated_at.year > 2020


def test_an_openclaw_file_touched_but_not_changed_imports_unchanged(tmp_path: Path) -> None:
    """OpenClaw's dates are the file's mtime, a guess: a newer mtime alone changes nothing."""
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURES / "openclaw", workspace)
    first = vault.import_(workspace)
    memory = workspace / "MEMORY.md"
    os.utime(memory, (at("2026-11-30T00:00:00Z"),) * 2)
    again = vault.import_(workspace)
    assert again.updated == [] and again.unchanged == len(first.created) and again.commit is None
    memory.write_text(memory.read_text(encoding="utf-8") + "\n## Later\n\nA new section.\n", encoding="utf-8")
    os.utime(memory, (at("2026-11-30T00:00:00Z"),) * 2)
    grown = vault.import_(workspace)
    assert grown.updated == [] and len(grown.created) == 1 and grown.commit is not None


def test_wrong_types_through_the_whole_import_never_escape_as_bugs(tmp_path: Path) -> None:
    """The readers' records go through the core's validation: a wrong value anywhere is a MemfileError."""
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    for name, fmt in (("synapse_array.json", "synapse"), ("langbot_episodes.json", "langbot")):
        original = load(name)
        for place in paths(original):
            for wrong in (None, -1, True, "x", [1], {"a": 1}):
                data = json.dumps(replaced(original, place, wrong)).encode()
                try:
                    vault.import_(data, format=fmt, dry_run=True)
                except MemfileError:
                    pass
    assert commit_count(vault.root) == 1


def test_imported_memories_keep_what_the_readers_said(tmp_path: Path, workspace: Path) -> None:
    vault = Vault.init(tmp_path / "v", "michael", "Michael's Mind")
    vault.import_(FIXTURES / "langbot_episodes.json")
    old = vault.get("context/episode_a1b2c3d4e5f6")
    new = vault.get("context/episode_b2c3d4e5f6a7")
    assert old.superseded and old.superseded_by == new.id
    assert str(new.priority) == "high" and not new.verified and str(new.source) == "agent"
    assert dict(new.extra)["langbot_episode_id"] == "b2c3d4e5f6a7"
    archived = vault.get("context/episode_c3d4e5f6a7b8")
    assert archived.expires_at == datetime(2026, 3, 10, 12, tzinfo=timezone.utc)
    vault.import_(FIXTURES / "synapse_array.json")
    coffee = vault.get("preference/ca_phe")
    assert coffee.content == "Thích cà phê sữa đá, không đường."
    assert dict(coffee.extra) == {"access_count": 4, "pinned_by": {"name": "Michael"}, "synapse_id": "7f3c2a"}
    vault.import_(workspace)
    day = vault.get("context/daily_2026_03_28")
    assert day.created_at == datetime(2026, 3, 28, 21, 15, 30, tzinfo=timezone.utc)
    assert day.tags == ("openclaw", "daily")
    with vault.acting_as("agent"):
        report = vault.import_(FIXTURES / "langbot_episodes.json", max_priority="critical")
    assert report.commit is None  # the same episodes: an agent's critical is capped back to what is there


# ---------------------------------------------------------------------------- through the command line


def imported(root: Path, *args: object) -> dict[str, Any]:
    """`memfile import ARGS --json`: the report (exit 0)."""
    return json.loads(ok(in_vault(root, "import", *args, "--json")).stdout)


def test_a_line_appended_to_a_daily_note_arrives_on_the_next_import(vault: Vault, tmp_path: Path) -> None:
    """OpenClaw appends to a day's note all day: the note is dated by its name, updated by its mtime. The
    line is appended the next morning (a note's day is the agent's local day, the mtime UTC)."""
    note = tmp_path / "workspace" / "memory" / "2026-11-02.md"
    note.parent.mkdir(parents=True)
    note.write_text("- Booked the flight to Hà Nội.\n", encoding="utf-8")
    os.utime(note, (at("2026-11-03T01:30:00Z"),) * 2)
    assert imported(vault.root, note.parent.parent)["created"] == ["context/daily_2026_11_02"]
    with note.open("a", encoding="utf-8") as handle:
        handle.write("- ประชุมทีมเลื่อนไปวันพฤหัสบดี\n")
    os.utime(note, (at("2026-11-03T02:00:00Z"),) * 2)
    again = imported(vault.root, note.parent.parent)
    assert again["updated"] == ["context/daily_2026_11_02"] and again["skipped"] == []
    day = vault.get("context/daily_2026_11_02")
    assert day.content.endswith("- ประชุมทีมเลื่อนไปวันพฤหัสบดี")
    assert (day.created_at, day.updated_at) == (
        datetime(2026, 11, 2, tzinfo=timezone.utc),
        datetime(2026, 11, 3, 2, tzinfo=timezone.utc),
    )
    os.utime(note, (at("2026-11-03T03:00:00Z"),) * 2)  # touched, not changed: nothing to do
    assert imported(vault.root, note.parent.parent)["unchanged"] == 1


def test_a_daily_note_changed_in_the_mind_after_the_file_keeps_the_minds_copy(vault: Vault, tmp_path: Path) -> None:
    """`newer` still means newer: a hand edit in the mind after the file's last write wins."""
    note = tmp_path / "workspace" / "memory" / "2026-11-02.md"
    note.parent.mkdir(parents=True)
    note.write_text("First line.\n", encoding="utf-8")
    os.utime(note, (at("2026-11-02T09:00:00Z"),) * 2)
    imported(vault.root, note.parent.parent)
    vault.store("context", "daily_2026_11_02", "Rewritten in the mind.")
    note.write_text("First line.\nSecond line.\n", encoding="utf-8")
    os.utime(note, (at("2026-11-03T09:00:00Z"),) * 2)
    again = imported(vault.root, note.parent.parent)
    assert again["skipped"][0]["ref"] == "context/daily_2026_11_02" and again["updated"] == []
    assert vault.get("context/daily_2026_11_02").content == "Rewritten in the mind."


def openclaw_hooks_workspace(root: Path) -> Path:
    """A workspace with what OpenClaw's bundled hooks and its USER.md template write, and a Thai heading."""
    write(root / "MEMORY.md", "## เรียนภาษาไทย\n\nMichael, every Tuesday at 18:00.\n")
    write(
        root / "USER.md",
        "# USER.md - About Your Human\n\n- **Name:** Michael\n- **Timezone:** Europe/Berlin\n\n"
        "## Preferences\n\nShort answers, no emoji.\n\n## Context\n\nWorks on Synapse.\n",
    )
    write(
        root / "memory" / "important" / "2026-03-04-project-api-v3-migration.md",
        "# Important: project - api-v3-migration\n\nDate: 2026-03-04\n\n## Summary\n\nPhased rollout of API v3.\n",
    )
    write(root / "memory" / "important" / "2026-03-05-decision-use-postgres.md", "# Important: decision\n\nPostgres.\n")
    write(
        root / "memory" / "context-digest.md",
        "# Context Digest (auto-generated)\n\n## Open Items / Action Items\n\n- [ ] Draft the migration guide\n",
    )
    for path in root.rglob("*.md"):
        os.utime(path, (at("2026-03-06T08:00:00Z"),) * 2)
    return root


def test_openclaw_user_md_important_notes_and_the_context_digest_are_imported(vault: Vault, tmp_path: Path) -> None:
    workspace = openclaw_hooks_workspace(tmp_path / "workspace")
    report = imported(vault.root, workspace)
    assert set(report["created"]) == {
        f"note/{slug('เรียนภาษาไทย', 90)}",
        "identity/user_intro",
        "preference/user_preferences",
        "context/user_context",
        "project/important_2026_03_04_project_api_v3_migration",
        "note/important_2026_03_05_decision_use_postgres",
        "context/context_digest",
    }
    assert report["unmapped"] == []
    intro = vault.get("identity/user_intro")
    assert intro.content.startswith("# USER.md - About Your Human") and "**Timezone:** Europe/Berlin" in intro.content
    important = vault.get("project/important_2026_03_04_project_api_v3_migration")
    assert important.tags == ("openclaw", "important", "project") and str(important.priority) == "high"
    assert important.created_at == datetime(2026, 3, 4, tzinfo=timezone.utc)
    assert vault.get("note/important_2026_03_05_decision_use_postgres").tags == ("openclaw", "important", "decision")
    digest = vault.get("context/context_digest")
    assert digest.tags == ("openclaw", "digest") and "Draft the migration guide" in digest.content
    found = ok(in_vault(vault.root, "search", "ภาษาไทย", "--json")).stdout
    assert [(hit["category"], hit["key"]) for hit in json.loads(found)] == [
        ("note", slug("เรียนภาษาไทย", 90))
    ]  # the heading's words kept
    assert imported(vault.root, workspace)["unchanged"] == 7


def test_a_fifo_in_an_openclaw_folder_is_named_and_never_opened(vault: Vault, tmp_path: Path) -> None:
    """A FIFO read would wait for a writer for ever; the import names it and goes on."""
    workspace = openclaw_hooks_workspace(tmp_path / "workspace")
    os.mkfifo(workspace / "memory" / "2026-03-07.md")
    os.mkfifo(workspace / "DREAMS.md")
    result = ok(in_vault(vault.root, "import", workspace, "--dry-run"))
    assert "unmapped memory/2026-03-07.md: a named pipe (FIFO), not a regular file: not read" in result.stdout
    assert "unmapped DREAMS.md: a named pipe (FIFO), not a regular file: not read" in result.stdout


THAI_SECTIONS = (
    "## เรียนภาษาไทย\n\nMichael, every Tuesday at 18:00.\n\n"
    "## เรียนภาษาไทย\n\nAnd on Friday mornings.\n\n"
    "## Thai class: เรียนภาษาไทย 2026\n\nAt the community centre.\n"
)
THAI_NOTICE = (
    "3 Thai headings got hash keys: pip install 'memfile-vault[thai]' keeps their words (romanised) in the key"
)


def test_a_thai_heading_keeps_its_words_romanised_through_the_cli(vault: Vault, tmp_path: Path) -> None:
    """With the thai extra a Thai heading's key is its romanised words; a repeated one gets `_2`, a mixed
    heading keeps its Latin words too; the content starts with the heading as written."""
    pytest.importorskip("pythainlp", reason="the thai extra (pip install 'memfile-vault[thai]') is not installed")
    workspace = write(tmp_path / "workspace" / "MEMORY.md", THAI_SECTIONS).parent
    report = imported(vault.root, workspace)
    assert report["created"] == ["note/rian_phasathai", "note/rian_phasathai_2", "note/thai_class_rian_phasathai_2026"]
    assert report["notices"] == []
    assert vault.get("note/rian_phasathai").content == "## เรียนภาษาไทย\n\nMichael, every Tuesday at 18:00."
    assert vault.get("note/rian_phasathai_2").content.startswith("## เรียนภาษาไทย\n\nAnd on Friday")
    found = json.loads(ok(in_vault(vault.root, "search", "ภาษาไทย", "--json")).stdout)
    assert {hit["key"] for hit in found} == {"rian_phasathai", "rian_phasathai_2", "thai_class_rian_phasathai_2026"}
    assert imported(vault.root, workspace)["unchanged"] == 3  # the same keys, so the same ids, on every import


def test_a_thai_heading_keeps_its_words_romanised_through_the_python_api(vault: Vault, tmp_path: Path) -> None:
    pytest.importorskip("pythainlp", reason="the thai extra (pip install 'memfile-vault[thai]') is not installed")
    write(tmp_path / "workspace" / "USER.md", "## ชื่อแมวของฉัน\n\nMali.\n")
    report = vault.import_(tmp_path / "workspace")
    assert report.created == ["identity/user_chue_maeo_khong_chan"] and report.notices == []
    assert slug("Thai: เรียนภาษาไทย " * 20, 60) == "thai_rian_phasathai_thai_rian_phasathai_thai_rian_phasathai"


def test_without_the_thai_extra_a_thai_heading_gets_a_hash_key_and_the_import_says_so_once(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pythainlp cannot be imported (as where the extra is not installed): the keys are hashes as before,
    the heading starts the content, and the import's notices name the extra once, in the CLI and the API."""
    monkeypatch.setitem(sys.modules, "pythainlp", None)
    workspace = write(tmp_path / "workspace" / "MEMORY.md", THAI_SECTIONS).parent
    hashed = slug("เรียนภาษาไทย", 90)
    assert re.fullmatch("[0-9a-f]{8}", hashed)
    dry = ok(in_vault(vault.root, "import", workspace, "--dry-run")).stdout
    assert dry.count("Thai headings") == 1 and f"  note     {THAI_NOTICE}" in dry
    report = imported(vault.root, workspace)
    assert report["created"] == [
        f"note/{hashed}",
        f"note/{hashed}_2",
        f"note/thai_class_2026_{slug('Thai class: เรียนภาษาไทย 2026')[-8:]}",
    ]
    assert report["notices"] == [THAI_NOTICE]
    assert vault.get(f"note/{hashed}").content.startswith("## เรียนภาษาไทย\n\n")
    again = vault.import_(workspace)
    assert again.unchanged == 3 and again.notices == [THAI_NOTICE]


def test_one_speaker_tag_finds_a_langbot_speakers_profile_and_episodes(vault: Vault) -> None:
    """LangBot names a speaker by sender_id in profiles and in episodes: so does the tag."""
    imported(vault.root, FIXTURES / "langbot_profiles.json")
    imported(vault.root, FIXTURES / "langbot_episodes.json")
    listed = json.loads(ok(in_vault(vault.root, "list", "--tag", "speaker:u1", "--json")).stdout)
    refs = {f"{memory['category']}/{memory['key']}" for memory in listed}
    assert {"identity/u1_name", "preference/u1_thich_pho", "context/episode_b2c3d4e5f6a7"} <= refs
    assert not ok(in_vault(vault.root, "list", "--tag", "speaker:lan")).stdout.strip()
