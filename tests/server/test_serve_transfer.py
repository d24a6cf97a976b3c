"""`GET /memory/export` and `POST /memory/import` of `memfile serve`, through a real server process and client.

One server serves the module (a vault with the minds michael, the default, and anna); each test uses
memories of its own (keys named after the test). The round trip starts a second vault's server.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from helpers import git
from helpers.serve import Answer, Server, Setup, make_setup, start_server

from memfile import Vault
from memfile.server import transfer as served_app
from memfile.server.auth import MAX_BODY_BYTES, MAX_IMPORT_BODY_BYTES

NDJSON = "application/x-ndjson"


def store(
    server: Server, token: str, key: str, content: str = "some text", mind: str | None = None, **fields: Any
) -> dict:
    path = "/memory" + (f"?mind={mind}" if mind else "")
    answer = server.request("POST", path, token, {"category": "fact", "key": key, "content": content, **fields})
    assert answer.status in (200, 201), answer
    return answer.json()


def export(server: Server, token: str, **query: str) -> Answer:
    return server.request("GET", "/memory/export" + (f"?{urlencode(query)}" if query else ""), token)


def import_(server: Server, token: str, body: bytes | str, **query: str) -> Answer:
    return server.request("POST", "/memory/import" + (f"?{urlencode(query)}" if query else ""), token, body)


def lines_of(answer: Answer) -> list[dict[str, Any]]:
    assert answer.status == 200, (answer.status, answer.body[:500])
    assert answer.headers["content-type"] == NDJSON
    return [json.loads(line) for line in answer.body.decode("utf-8").splitlines()]


def memories_of(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The memory records of an export, by key."""
    return {line["key"]: line for line in lines if line["type"] == "memory"}


def jsonl(*records: dict[str, Any], mind: str = "michael") -> str:
    """A memfile export file holding `records` (each made a memory record)."""
    header = {"type": "header", "format": "memfile-export", "version": 1, "minds": [{"mind": mind, "name": mind}]}
    lines = [header, *({"type": "memory", **r} for r in records), {"type": "end", "count": len(records)}]
    return "".join(json.dumps(line) + "\n" for line in lines)


def record(key: str, content: str = "imported text", **fields: Any) -> dict[str, Any]:
    """A memory record with a fixed id and dates (derived from the key: importing twice is the same)."""
    ident = "mem_" + hashlib.sha1(key.encode()).hexdigest()[:16]
    dates = {"created_at": "2026-03-28T00:00:00Z", "updated_at": "2026-03-28T00:00:00Z"}
    return {"id": ident, "category": "fact", "key": key, "content": content, **dates, **fields}


def commits(setup: Setup) -> int:
    return int(git(setup.root, "rev-list", "--count", "HEAD"))


def attachment_name(answer: Answer) -> str:
    found = re.fullmatch(r'attachment; filename="([^"]+)"', answer.headers["content-disposition"])
    assert found, answer.headers["content-disposition"]
    return found.group(1)


def days_around_now() -> set[str]:
    """Today's date as an export's file name writes it, and yesterday's (a test may run over midnight)."""
    now = datetime.now(timezone.utc)
    return {f"{day:%Y%m%d}" for day in (now, now - timedelta(days=1))}


def dated(name: str) -> str:
    """A file name with its date made DATE (an export made around midnight may name either day)."""
    return re.sub(r"-\d{8}\.", "-DATE.", name)


# --- export -----------------------------------------------------------------------------------------


def test_export_as_a_person_is_the_default_mind_as_jsonl(server: Server, setup: Setup, person: str) -> None:
    store(server, person, "export_person_one", "The blue door")
    store(server, person, "export_person_two", "The red door", tags=["doors"])
    before = commits(setup)
    answer = export(server, person)
    lines = lines_of(answer)
    assert dated(attachment_name(answer)) == "memfile-export-michael-DATE.jsonl"
    assert attachment_name(answer)[-14:-6] in days_around_now()
    assert int(answer.headers["content-length"]) == len(answer.body)
    assert lines[0]["type"] == "header" and lines[0]["format"] == "memfile-export"
    assert [m["mind"] for m in lines[0]["minds"]] == ["michael"]
    assert lines[-1]["type"] == "end"
    found = memories_of(lines)
    assert lines[-1]["count"] == len(found)
    assert found["export_person_two"]["content"] == "The red door" and found["export_person_two"]["tags"] == ["doors"]
    assert {line["mind_id"] for line in found.values()} == {"michael"}
    assert "raw" not in found["export_person_one"]  # --raw is opt-in
    assert commits(setup) == before  # an export changes nothing


def test_export_as_json_and_raw(server: Server, setup: Setup, person: str) -> None:
    memory = store(server, person, "export_raw_me", "Raw bytes, kept")
    shaped = export(server, person, format="json")
    assert shaped.status == 200 and shaped.headers["content-type"] == "application/json"
    assert dated(attachment_name(shaped)) == "memfile-export-michael-DATE.json"
    array = shaped.json()
    assert isinstance(array, list)
    mine = next(m for m in array if m["key"] == "export_raw_me")
    assert mine["id"] == memory["id"] and mine["mind_id"] == "michael"
    raw = memories_of(lines_of(export(server, person, raw="true")))["export_raw_me"]
    on_disk = (setup.root / raw["path"]).read_bytes()
    assert raw["raw"].encode("utf-8") == on_disk and raw["sha256"] == hashlib.sha256(on_disk).hexdigest()
    assert "raw" not in memories_of(lines_of(export(server, person, raw="false")))["export_raw_me"]


def test_a_persons_token_names_the_mind_or_takes_every_mind(server: Server, person: str) -> None:
    store(server, person, "export_anna_only", "Anna's", mind="anna")
    store(server, person, "export_michael_only", "Michael's")
    anna = export(server, person, mind="anna")
    assert dated(attachment_name(anna)) == "memfile-export-anna-DATE.jsonl"
    keys = memories_of(lines_of(anna))
    assert "export_anna_only" in keys and "export_michael_only" not in keys
    every = export(server, person, all_minds="true")
    assert dated(attachment_name(every)) == "memfile-export-all-minds-DATE.jsonl"
    lines = lines_of(every)
    assert {m["mind"] for m in lines[0]["minds"]} == {"michael", "anna"}
    both = memories_of(lines)
    assert both["export_anna_only"]["mind_id"] == "anna" and both["export_michael_only"]["mind_id"] == "michael"


def test_a_mind_key_exports_only_its_own_mind(server: Server, setup: Setup, agent: str, person: str) -> None:
    store(server, person, "export_not_for_michael", "Anna's secret", mind="anna")
    store(server, agent, "export_agent_own", "Michael's own")
    own = export(server, agent)
    found = memories_of(lines_of(own))
    assert "export_agent_own" in found and "export_not_for_michael" not in found
    assert {line["mind_id"] for line in found.values()} == {"michael"}
    assert dated(attachment_name(own)) == "memfile-export-michael-DATE.jsonl"
    assert export(server, agent, mind="michael").status == 200
    for query in ({"mind": "anna"}, {"all_minds": "true"}, {"all_minds": "true", "mind": "michael"}):
        refused = export(server, agent, **query)
        assert refused.status == 403 and refused.error == "Refused", (query, refused)
        assert b"Anna's secret" not in refused.body
    other = export(server, setup.tokens["anna"], all_minds="false")
    assert "export_not_for_michael" in memories_of(lines_of(other))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"format": "xml"}, "format"),
        ({"raw": "maybe"}, "raw"),
        ({"all_minds": "perhaps"}, "all_minds"),
        ({"since": "2026-01-01"}, "since"),
        ({"format": ["json", "jsonl"]}, "format"),
        ({"format": "json", "raw": "true"}, "raw"),
    ],
)
def test_export_refuses_bad_parameters_by_name(server: Server, person: str, query: dict, named: str) -> None:
    answer = server.request("GET", "/memory/export?" + urlencode(query, doseq=True), person)
    assert answer.status == 400 and answer.error == "InvalidInput", answer
    assert named in answer.json()["message"]


def test_export_and_import_need_a_credential(server: Server, setup: Setup) -> None:
    before = commits(setup)
    assert export(server, None).status == 401  # type: ignore[arg-type]
    refused = import_(server, None, jsonl(record("import_no_credential")))  # type: ignore[arg-type]
    assert refused.status == 401 and refused.headers.get("www-authenticate") == "Bearer"
    assert commits(setup) == before


def test_the_export_spools_to_disk_past_its_memory_share(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past EXPORT_SPOOL_BYTES the export moves to a temporary file; what is streamed is the export."""
    root = tmp_path / "vault"
    with Vault.init(root, "solo") as vault:
        for n in range(20):
            vault.store("fact", f"spooled_{n}", f"A memory of some length, number {n}. " * 5)
        expected = io.StringIO()
        vault.export(expected, raw=True)
        monkeypatch.setattr(served_app, "EXPORT_SPOOL_BYTES", 1024)
        monkeypatch.setattr(served_app, "EXPORT_CHUNK_BYTES", 1000)
        exported = served_app.export_file(vault, all_minds=False, format="jsonl", raw=True)
    assert exported.file._rolled  # type: ignore[attr-defined]  # on disk, not in memory
    chunks = list(served_app.file_chunks(exported.file))
    assert exported.file.closed and len(chunks) > 1 and max(len(c) for c in chunks) <= 1000
    data = b"".join(chunks)
    assert exported.memories == 20 and exported.unreadable == 0 and exported.size == len(data)
    strip = re.compile(r'"exported_at": "[^"]*"')  # the two exports were made moments apart
    assert strip.sub("", data.decode("utf-8")) == strip.sub("", expected.getvalue())


# --- import -----------------------------------------------------------------------------------------


def test_a_mind_keys_import_lands_unverified_as_an_agent(server: Server, setup: Setup, agent: str) -> None:
    before = commits(setup)
    body = jsonl(
        record("import_agent_claims", "Claimed verified", verified=True, source="user", priority="critical"),
        record("import_agent_plain", "Plain"),
    )
    answer = import_(server, agent, body)
    assert answer.status == 200, answer.body
    report = answer.json()
    assert report["format"] == "memfile" and report["dry_run"] is False and report["commit"]
    assert len(report["created"]) == 2
    assert commits(setup) == before + 1  # one commit for the whole import
    assert "Memfile-Key: michael-key" in git(setup.root, "log", "-1", "--format=%B")
    claimed = server.request("GET", f"/memory/{record('import_agent_claims')['id']}", agent).json()
    assert claimed["verified"] is False and claimed["source"] == "agent"
    assert claimed["priority"] != "critical"
    assert claimed["created_at"] == "2026-03-28T00:00:00Z"  # kept verbatim


def test_a_persons_import_keeps_verified(server: Server, setup: Setup, person: str) -> None:
    body = jsonl(record("import_person_verified", "Checked by a person", verified=True, source="user"))
    answer = import_(server, person, body)
    assert answer.status == 200, answer.body
    memory = server.request("GET", f"/memory/{record('import_person_verified')['id']}", person).json()
    assert memory["verified"] is True and memory["source"] == "user"
    into_anna = import_(server, person, jsonl(record("import_person_anna")), mind="anna")
    assert into_anna.status == 200 and into_anna.json()["mind"] == "anna"
    assert server.request("GET", f"/memory/{record('import_person_anna')['id']}?mind=anna", person).status == 200
    assert server.request("GET", f"/memory/{record('import_person_anna')['id']}", person).status == 404


def test_a_mind_key_cannot_import_into_another_mind(server: Server, setup: Setup, agent: str) -> None:
    before = commits(setup)
    refused = import_(server, agent, jsonl(record("import_elsewhere")), mind="anna")
    assert refused.status == 403 and refused.error == "Refused"
    assert commits(setup) == before


def test_a_dry_run_writes_nothing(server: Server, setup: Setup, person: str) -> None:
    before, files = commits(setup), sorted(p.name for p in setup.root.rglob("*.md"))
    answer = import_(server, person, jsonl(record("import_dry_one"), record("import_dry_two")), dry_run="true")
    assert answer.status == 200, answer.body
    report = answer.json()
    assert report["dry_run"] is True and report["commit"] is None and len(report["created"]) == 2
    assert commits(setup) == before and sorted(p.name for p in setup.root.rglob("*.md")) == files
    assert server.request("GET", f"/memory/{record('import_dry_one')['id']}", person).status == 404
    assert git(setup.root, "status", "--porcelain") == ""


def test_a_bad_record_is_a_400_naming_it_and_nothing_is_written(server: Server, setup: Setup, person: str) -> None:
    before = commits(setup)
    body = jsonl(
        record("import_bad_first"),
        record("import_bad_second", category="no_such_category"),
        record("import_bad_third"),
    )
    answer = import_(server, person, body)
    assert answer.status == 400 and answer.error == "InvalidInput", answer.body
    message = answer.json()["message"]
    assert "record 2" in message and "category" in message, message
    assert commits(setup) == before
    assert server.request("GET", f"/memory/{record('import_bad_first')['id']}", person).status == 404
    assert git(setup.root, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("query", "body", "named"),
    [
        ({"on_conflict": "merge"}, None, "on_conflict"),
        ({"from": "evernote"}, None, "from"),
        ({"dry_run": "perhaps"}, None, "dry_run"),
        ({"max_priority": "urgent"}, None, "priority"),
        ({"mode": "fast"}, None, "mode"),
        ({"include_dreams": "true"}, None, "include_dreams"),
        ({"split": "words"}, None, "split"),
        ({"source": "robot"}, None, "source"),
        ({"from_mind": "nobody"}, None, "from_mind"),
        ({}, b"", "body"),
        ({}, b"   \n", "body"),
        ({}, b"not a file memfile knows", ""),
        ({"from": "memfile"}, b'{"type": "header", "format": "memfile-export", "version": 1}\n', "end"),
        ({"from": "synapse"}, b"{broken json", ""),
        ({}, "\ud800".encode("utf-8", "surrogatepass"), ""),
        ({}, jsonl(record("import_state", path="michael/.memfile/import_state.md")).encode(), "path of record 1"),
    ],
)
def test_import_refuses_bad_input_by_name_and_writes_nothing(
    server: Server, setup: Setup, person: str, query: dict, body: bytes | None, named: str
) -> None:
    before = commits(setup)
    answer = import_(server, person, jsonl(record("import_refused")) if body is None else body, **query)
    assert answer.status == 400, (answer.status, answer.body)
    assert named in answer.json()["message"]
    assert commits(setup) == before


def test_importing_the_same_file_again_changes_nothing(server: Server, setup: Setup, person: str) -> None:
    body = jsonl(record("import_twice_one"), record("import_twice_two"))
    first = import_(server, person, body).json()
    assert len(first["created"]) == 2 and first["commit"]
    before = commits(setup)
    again = import_(server, person, body)
    assert again.status == 200
    report = again.json()
    assert report["created"] == [] and report["updated"] == [] and report["unchanged"] == 2
    assert report["commit"] is None and commits(setup) == before


def test_the_same_category_and_key_under_another_id_is_a_conflict(server: Server, setup: Setup, person: str) -> None:
    mine = store(server, person, "import_conflicting", "Already here")
    answer = import_(server, person, jsonl(record("import_conflicting", "Arriving")))
    assert answer.status == 200, answer.body
    report = answer.json()
    assert len(report["conflicts"]) == 1 and report["created"] == []
    assert server.request("GET", f"/memory/{mine['id']}", person).json()["content"] == "Already here"


def test_a_mind_keys_import_with_a_token_outside_the_content_is_refused(
    server: Server, setup: Setup, agent: str
) -> None:
    """QA: a token in a field Synapse does not know became a front-matter key, unscanned. Built at run time."""
    token = "gh" + "p_" + hashlib.sha256(b"test_serve_transfer").hexdigest()[:36]
    before = commits(setup)
    memories = [{"category": "fact", "key": "import_token_field", "content": "clean", "aws": token}]
    answer = import_(server, agent, json.dumps(memories))
    assert answer.status == 403, answer.body
    message = answer.json()["message"]
    assert "record 1" in message and "'aws'" in message and token[6:-6] not in message
    assert commits(setup) == before


@pytest.mark.parametrize("field", ["id", "path"])
def test_a_mind_keys_import_with_a_token_in_a_records_id_or_path_is_refused(
    server: Server, setup: Setup, agent: str, field: str
) -> None:
    """Issue 39 item 13: a record's id lands in the file's `id:` line and its path in the file's name, both
    in git: an agent's import over HTTP is refused naming the record and the field, the token masked."""
    token = "gh" + "p_" + hashlib.sha256(f"id or path {field}".encode()).hexdigest()[:36]
    before = commits(setup)
    smuggled = {"id": token} if field == "id" else {"path": f"michael/fact/{token}.md"}
    answer = import_(server, agent, jsonl(record("import_clean_one"), record("import_token_" + field) | smuggled))
    assert answer.status == 403, answer.body
    assert answer.json()["error"] == "SecretFound"
    message = answer.json()["message"]
    assert "record 2" in message and f"the {field} looks like" in message, message
    assert token[6:-6] not in message
    assert commits(setup) == before


def test_an_import_that_would_move_a_memory_is_a_conflict(server: Server, setup: Setup, agent: str) -> None:
    """QA: the same id under another category/key rewrote the memory in place; keys never change."""
    mine = store(server, agent, "import_never_moved", "Stays a fact")
    moved = record("import_moved_away", "Moved", id=mine["id"], category="note")
    answer = import_(server, agent, jsonl(moved), on_conflict="overwrite")
    assert answer.status == 200, answer.body
    report = answer.json()
    assert report["updated"] == [] and [c["ref"] for c in report["conflicts"]] == ["note/import_moved_away"]
    assert "fact/import_never_moved" in report["conflicts"][0]["reason"]
    kept = server.request("GET", f"/memory/{mine['id']}", agent).json()
    assert kept["key"] == "import_never_moved" and kept["content"] == "Stays a fact"


def test_synapse_json_and_an_openclaw_memory_file_are_imported(server: Server, person: str) -> None:
    synapse = [
        {"id": "syn-1", "category": "fact", "key": "import_from_synapse", "content": "From Synapse", "tags": ["s"]},
    ]
    answer = import_(server, person, json.dumps(synapse), **{"from": "synapse"})
    assert answer.status == 200, answer.body
    assert answer.json()["format"] == "synapse" and len(answer.json()["created"]) == 1
    detected = import_(server, person, json.dumps({"memories": synapse}))
    assert detected.status == 200 and detected.json()["format"] == "synapse"
    assert detected.json()["unchanged"] == 1
    markdown = "# Memory\n\n## Preferences\n\nLikes green tea in the morning.\n\n## Projects\n\nBuilds a boat.\n"
    openclaw = import_(server, person, markdown, **{"from": "openclaw", "category": "preference"})
    assert openclaw.status == 200, openclaw.body
    report = openclaw.json()
    assert report["format"] == "openclaw" and len(report["created"]) == 2
    found = server.request("GET", "/memory/search?q=green+tea&category=preference", person).json()
    assert any("green tea" in hit["content"] for hit in found)


def test_the_import_answer_carries_what_the_write_told(server: Server, setup: Setup, person: str) -> None:
    """A notice of the write itself (a killed merge's leftover file removed) is in the answer: the
    server has no stderr for it to go to."""
    (setup.root / ".merge_file_Zq9x8W").write_text("left by a killed merge\n")
    answer = import_(server, person, jsonl(record("import_with_a_notice")))
    assert answer.status == 200, answer.body
    assert answer.json()["notices"] == ["removed 1 temporary files of a merge that was killed (.merge_file_Zq9x8W)"]
    assert not (setup.root / ".merge_file_Zq9x8W").exists()


def test_from_mind_takes_one_mind_of_an_export_of_several(server: Server, person: str) -> None:
    store(server, person, "from_mind_anna", "Anna's to copy", mind="anna")
    store(server, person, "from_mind_michael", "Michael's, not copied")
    every = export(server, person, all_minds="true").body
    refused = import_(server, person, every, mind="anna", dry_run="true")
    assert refused.status == 400 and "from_mind" in refused.json()["message"], refused.body
    plan = import_(server, person, every, mind="anna", from_mind="anna", dry_run="true").json()
    assert plan["mind"] == "anna" and plan["created"] == [] and plan["unchanged"] >= 1


def test_a_mind_keys_langbot_import_is_an_agents_whatever_source_it_names(
    server: Server, agent: str, person: str
) -> None:
    episodes = {
        "version": 1,
        "episodes": [
            {
                "id": "ep_served_1",
                "content": "The user moved to Lisbon",
                "tags": ["move"],
                "importance": 5,
                "timestamp": "2026-03-28T10:00:00Z",
                "sender_name": "ana",
                "status": "active",
            }
        ],
    }
    answer = import_(server, agent, json.dumps(episodes), source="user", max_priority="critical")
    assert answer.status == 200, answer.body
    report = answer.json()
    assert report["format"] == "langbot" and len(report["created"]) == 1
    found = server.request("GET", "/memory/search?q=Lisbon", person).json()
    memory = next(hit for hit in found if "Lisbon" in hit["content"])
    assert memory["source"] == "agent" and memory["verified"] is False and memory["priority"] != "critical"


def test_an_import_over_the_body_limit_is_refused_before_it_is_read(server: Server, setup: Setup, person: str) -> None:
    before = commits(setup)
    conn = server.connection()
    try:
        conn.putrequest("POST", "/memory/import")
        conn.putheader("Authorization", f"Bearer {person}")
        conn.putheader("Content-Length", str(MAX_IMPORT_BODY_BYTES + 1))
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 413
        answer = json.loads(response.read())
        assert answer["error"] == "ContentTooLarge" and "64 MB" in answer["message"]
    finally:
        conn.close()
    assert commits(setup) == before


def test_an_import_may_be_larger_than_a_store(server: Server, setup: Setup, person: str) -> None:
    """A body over the store limit (11 MB) reaches the import, which reads it (here: refused as no JSON)."""
    body = b"[" + b" " * (MAX_BODY_BYTES + 10) + b"x]"
    answer = server.request("POST", "/memory/import?from=synapse", person, body)
    assert answer.status == 400 and "not JSON" in answer.json()["message"]


# --- both, and the document ---------------------------------------------------------------------------


def test_an_export_imported_into_another_vaults_server_gives_the_same_memories(
    server: Server, person: str, tmp_path: Path
) -> None:
    store(server, person, "round_trip_plain", "Plain words", tags=["trip"], priority="high", confidence=0.4)
    store(server, person, "round_trip_thai", "ภาษาไทย, Tiếng Việt, 中文", expires_at="2099-01-01T00:00:00Z")
    old = store(server, person, "round_trip_old", "Old news")
    store(server, person, "round_trip_new", "New news", supersedes=old["id"])
    server.request("POST", f"/memory/{old['id']}/verify", person)
    exported = export(server, person, raw="true")
    source = memories_of(lines_of(exported))
    second = make_setup(tmp_path / "second")
    made = int(git(second.root, "rev-list", "--count", "HEAD"))
    other = start_server(second)
    try:
        token = second.tokens["person"]
        answer = import_(other, token, exported.body)
        assert answer.status == 200, answer.body
        report = answer.json()
        assert len(report["created"]) == len(source) and report["conflicts"] == [] and report["skipped"] == []
        assert int(git(second.root, "rev-list", "--count", "HEAD")) == made + 1  # one commit for the import
        arrived = memories_of(lines_of(export(other, token, raw="true")))
        again = import_(other, token, exported.body).json()
    finally:
        code, _, err = other.stop()
    assert code == 0 and "Traceback" not in err, err
    assert arrived == source  # every field, the raw text and its sha256
    for line in source.values():
        assert (second.root / line["path"]).read_bytes() == line["raw"].encode("utf-8")
    assert again["unchanged"] == len(source) and again["commit"] is None


def test_export_and_import_are_logged_with_the_keys_label_and_count(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    served = start_server(setup)
    try:
        agent = setup.tokens["michael"]
        imported = import_(served, agent, jsonl(record("logged_one"), record("logged_two")))
        assert imported.status == 200, imported.body
        assert export(served, agent).status == 200
    finally:
        code, _, err = served.stop()
    assert code == 0, err
    assert agent not in err  # a token is never logged
    logged = [line for line in err.splitlines() if line.startswith("memfile serve: ")]
    assert any("import" in line and "'michael-key'" in line and "2 created" in line for line in logged), err
    assert any("export" in line and "'michael-key'" in line and "2 memories" in line for line in logged), err


def test_the_import_options_in_the_openapi_document_are_the_librarys() -> None:
    """The HTTP face may not import memfile.transfer (its import costs the vault's readers): its lists are
    held to the library's here."""
    from memfile.server import openapi
    from memfile.transfer import records

    assert openapi.IMPORT_FORMATS == list(records.FORMATS)
    assert openapi.ON_CONFLICT == list(records.ON_CONFLICT)
    assert openapi.SPLITS == list(records.SPLITS)
