"""Export and import in memfile's own format (issue 25): `Vault.export_lines` / `export` / `import_`,
`memfile export` / `memfile import`.

Real vaults in tmp_path, real git, the real CLI. What the export holds (a header, one record per memory
under Synapse's names, a trailer with the count; raw text and sha256 only with raw; expired, superseded
and unreadable memories never dropped silently), and the import's rules: one commit or nothing, a plan
on --dry-run, the three conflict modes, (category, key) under another id never merged, a truncated or
tampered export refused, hostile paths refused, an agent's import landing unverified and never critical,
and a person's import keeping ids, dates, verified and unknown keys verbatim.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import (
    BROKEN,
    HAND_MADE,
    SYNAPSE_FIELDS,
    commit_by_hand,
    commit_count,
    fails,
    git,
    in_vault,
    last_subject,
    ok,
    write,
)
from helpers.vaults import built_once, copied

import memfile
from memfile import Vault
from memfile.cli import main
from memfile.errors import InvalidInput, MemfileError, Refused
from memfile.git.store import PACKED_ADD, GitStore
from memfile.model import format_datetime
from memfile.secretscan import SecretFound

MIND = "michael"
NAME = "Michael's Mind"
#: A hand-made file with a BOM, CRLF line ends, comments, unknown keys and text in three scripts.
BOM_CRLF = (
    "\ufeff---\r\n"
    "id: mem_bomcrlf0001\r\n"
    "# Ghi chú: a comment in Vietnamese\r\n"
    "category: preference\r\n"
    "key: pho_order\r\n"
    "mood: vui vẻ   # an inline comment\r\n"
    "priority: high\r\n"
    "tags: [ẩm thực, อาหาร]\r\n"
    "created_at: 2021-03-04T05:06:07Z\r\n"
    "updated_at: 2022-03-04T05:06:07Z\r\n"
    "source: user\r\n"
    "zz_last: 1\r\n"
    "---\r\n"
    "Phở bò tái, không hành. ก๋วยเตี๋ยว 很好吃。\r\n"
)


# --- helpers ---------------------------------------------------------------------------------------


def new_vault(tmp_path: Path, name: str = "v", mind: str = MIND) -> Vault:
    return Vault.init(tmp_path / name, mind, NAME)


def exported(vault: Vault, **options: Any) -> list[dict[str, Any]]:
    """The export's lines, parsed; every line ends with exactly one newline."""
    lines = list(vault.export_lines(**options))
    assert all(line.endswith("\n") and "\n" not in line[:-1] for line in lines), lines
    return [json.loads(line) for line in lines]


def records_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("type") == "memory"]


def by_key(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in records_of(lines)}


def export_file(path: Path, lines: list[dict[str, Any]]) -> Path:
    """An export file holding these lines as JSONL."""
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def closed(header: dict[str, Any], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Header, records and a trailer with the right count."""
    return [header, *records, {"type": "end", "count": len(records)}]


def mind_files(vault: Vault) -> dict[str, bytes]:
    """Every memory file of the vault's mind, by vault-relative path."""
    return {
        p.relative_to(vault.root).as_posix(): p.read_bytes()
        for p in sorted(vault.mind_dir.rglob("*.md"))
        if p.is_file()
    }


def every_file(root: Path) -> set[str]:
    """Every file of the vault folder but git's own and the index (a `.git` folder deeper down counts)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in (".git", ".memfile")
    }


def untouched(vault: Vault, commits: int, files: dict[str, bytes]) -> None:
    """Nothing was written: no commit, the mind's files as they were, a clean work tree."""
    assert commit_count(vault.root) == commits
    assert mind_files(vault) == files
    assert git(vault.root, "status", "--porcelain", "--untracked-files=all").strip() == ""


def later() -> str:
    """A time after every memory a test stores, within the day ahead an import allows another clock."""
    return format_datetime(datetime.now(timezone.utc) + timedelta(hours=6))


def comparable(memory_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in memory_dict.items() if k != "mind"}


def build_src(root: Path) -> None:
    """Stored memories (tags, priority, an agent's, a superseded pair) and a hand-made file."""
    vault = Vault.init(root, MIND, NAME)
    vault.store("fact", "office", "The office is in Berlin", tags=["work", "berlin"], priority="high")
    vault.store("preference", "tea", "Green tea, no sugar", confidence=0.9)
    with vault.acting_as("agent"):
        vault.store("project", "synapse_status", "Synapse v1.5.0 deployed. CI green.", tags=["synapse"])
    vault.store("fact", "old_phone", "The phone number ends in 12")
    vault.store("fact", "new_phone", "The phone number ends in 34", supersedes="old_phone")
    write(vault.mind_dir / "fact" / "office_hours.md", HAND_MADE)
    commit_by_hand(vault.root, f"{MIND}/fact/office_hours.md")
    vault.close()


@pytest.fixture(scope="module")
def src_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "src", build_src)


@pytest.fixture(scope="module")
def empty_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "dst", lambda root: Vault.init(root, MIND, NAME).close())


@pytest.fixture
def src(src_template: Path, tmp_path: Path) -> Vault:
    """A vault with stored memories (tags, priority, an agent's, a superseded pair) and a hand-made file:
    each test's own copy of one built for the module (shared_vaults)."""
    return Vault.open(copied(src_template, tmp_path / "src"), MIND)


@pytest.fixture
def dst(empty_template: Path, tmp_path: Path) -> Vault:
    """An empty vault with the same mind (a copy of one `Vault.init` made for the module)."""
    return Vault.open(copied(empty_template, tmp_path / "dst"), MIND)


# --- export: the format ------------------------------------------------------------------------------


def test_export_has_a_header_one_record_per_memory_and_a_trailer_and_makes_no_commit(src: Vault) -> None:
    commits = commit_count(src.root)
    lines = exported(src)
    header, *records, trailer = lines
    assert header["type"] == "header"
    assert header["format"] == "memfile-export"
    assert header["version"] == 1
    assert header["memfile_version"] == memfile.__version__
    assert header["minds"] == [{"mind": MIND, "name": NAME}]
    assert trailer == {"type": "end", "count": 6, "unreadable": 0}
    assert [r["type"] for r in records] == ["memory"] * 6
    assert sorted(r["key"] for r in records) == sorted(m.key for m in src.memories())
    assert commit_count(src.root) == commits


def test_an_export_record_carries_every_field_under_synapse_names_and_unknown_keys_in_file_order(src: Vault) -> None:
    records = by_key(exported(src))
    for memory in src.memories():
        record = records[memory.key]
        assert set(SYNAPSE_FIELDS) <= set(record), memory.ref
        assert record["mind_id"] == MIND and "mind" not in record
        for name, value in comparable(memory.to_dict()).items():
            assert record[name] == value, (memory.ref, name)
        assert "raw" not in record and "sha256" not in record  # raw is opt-in (the issue)
    hand = records["office_hours"]
    assert hand["id"] == "mem_handmade0001"
    assert list(hand["extra"]) == ["aliases", "links"]
    assert hand["extra"] == {"aliases": ["hours", "opening"], "links": ["https://example.com/hours"]}
    assert hand["path"] == f"{MIND}/fact/office_hours.md"
    assert hand["created_at"] == "2020-01-01T08:00:00Z" and hand["updated_at"] == "2020-01-02T08:00:00Z"
    assert records["synapse_status"]["source"] == "agent" and records["synapse_status"]["verified"] is False


def test_a_raw_export_holds_the_exact_file_text_and_its_sha256(src: Vault) -> None:
    path = write(src.mind_dir / "preference" / "pho_order.md", "")
    path.write_bytes(BOM_CRLF.encode("utf-8"))
    commit_by_hand(src.root, f"{MIND}/preference/pho_order.md")
    lines = exported(src, raw=True)
    assert lines[0].get("raw") is True
    for record in records_of(lines):
        data = (src.root / record["path"]).read_bytes()
        assert record["raw"].encode("utf-8") == data, record["path"]
        assert record["sha256"] == hashlib.sha256(data).hexdigest()
    pho = by_key(lines)["pho_order"]
    assert pho["raw"].startswith("\ufeff---\r\n")
    assert list(pho["extra"]) == ["mood", "zz_last"]
    assert pho["tags"] == ["ẩm thực", "อาหาร"]


def test_expired_and_superseded_memories_are_exported_and_marked(src: Vault) -> None:
    write(
        src.mind_dir / "context" / "trip.md",
        "---\nid: mem_expired0001\nexpires_at: 2001-01-01T00:00:00Z\n---\nIn Hanoi this week\n",
    )
    commit_by_hand(src.root, f"{MIND}/context/trip.md")
    records = by_key(exported(src))
    assert records["trip"]["expires_at"] == "2001-01-01T00:00:00Z" and records["trip"]["expired"] is True
    assert records["office"]["expired"] is False
    old, new = records["old_phone"], records["new_phone"]
    assert old["status"] == "superseded" and old["superseded_by"] == new["id"]
    assert new["status"] == "active" and new["superseded_by"] is None


def test_an_unreadable_file_is_listed_on_stderr_and_the_export_still_succeeds(src: Vault, tmp_path: Path) -> None:
    write(src.mind_dir / "fact" / "broken.md", BROKEN)
    commit_by_hand(src.root, f"{MIND}/fact/broken.md")
    report = src.export(tmp_path / "api.jsonl")
    assert report.count == 6
    assert any("broken.md" in str(issue) for issue in report.unreadable), report.unreadable
    result = ok(in_vault(src.root, "export", "-o", tmp_path / "cli.jsonl"))
    assert f"{MIND}/fact/broken.md" in result.stderr
    lines = [json.loads(line) for line in (tmp_path / "cli.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[-1] == {"type": "end", "count": 6, "unreadable": 1}
    assert "broken" not in by_key(lines)
    listed = [line for line in lines if line["type"] == "unreadable"]  # named in the file too, never dropped
    assert [line["path"] for line in listed] == [f"{MIND}/fact/broken.md"] and listed[0]["reason"]
    result = ok(in_vault(src.root, "export"))  # to stdout: the warning still goes to stderr, not into the data
    assert f"{MIND}/fact/broken.md" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"type": "end", "count": 6, "unreadable": 1}
    dst = new_vault(tmp_path, "dst")  # the export, unreadable line and all, imports; the line is reported
    report = dst.import_(tmp_path / "cli.jsonl")
    assert len(report.created) == 6 and any("broken.md" in line for line in report.unmapped), report.unmapped


def test_format_json_is_a_plain_array_of_synapse_shaped_memories(src: Vault) -> None:
    result = ok(in_vault(src.root, "export", "--format", "json"))
    data = json.loads(result.stdout)
    assert isinstance(data, list) and len(data) == 6
    for item in data:
        assert set(SYNAPSE_FIELDS) <= set(item)
        assert item["mind_id"] == MIND
    assert json.loads("".join(src.export_lines(format="json"))) == data


def test_all_minds_exports_every_mind_and_otherwise_only_the_chosen_one(src: Vault, tmp_path: Path) -> None:
    work = Vault.init(src.root, "work", "Work")
    work.store("project", "roadmap", "Ship export in Q1")
    src = Vault.open(src.root, MIND)
    only = exported(src)
    assert {r["mind_id"] for r in records_of(only)} == {MIND}
    both = exported(src, all_minds=True)
    assert both[0]["minds"] == [{"mind": MIND, "name": NAME}, {"mind": "work", "name": "Work"}]
    assert {r["mind_id"] for r in records_of(both)} == {MIND, "work"}
    assert both[-1]["count"] == 7
    result = ok(in_vault(src.root, "--mind", "work", "export"))
    assert [json.loads(line)["key"] for line in result.stdout.splitlines()[1:-1]] == ["roadmap"]
    ok(in_vault(src.root, "export", "--all-minds", "-o", tmp_path / "all.jsonl"))
    assert json.loads((tmp_path / "all.jsonl").read_text(encoding="utf-8").splitlines()[-1])["count"] == 7


def test_a_long_lived_vault_names_a_mind_added_since_it_opened_by_its_display_name(src: Vault) -> None:
    Vault.init(src.root, "work", "Work").store("project", "roadmap", "Ship export in Q1")
    assert exported(src, all_minds=True)[0]["minds"][1] == {"mind": "work", "name": "Work"}


def test_export_to_a_file_and_its_json_report(src: Vault, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = ok(in_vault(src.root, "export", "--raw", "-o", out))
    assert '"type": "memory"' not in result.stdout  # the records went to the file
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["count"] == 6 and all("raw" in r for r in records_of(lines))
    assert out.stat().st_mode & 0o777 == 0o600  # it holds the mind's memories: readable by its owner only
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.jsonl")] == []  # no temp file left
    report = json.loads(ok(in_vault(src.root, "export", "-o", tmp_path / "again.jsonl", "--json")).stdout)
    assert report["count"] == 6 and report["minds"] == [MIND] and report["unreadable"] == []
    fails(in_vault(src.root, "export", "--json"), 2)  # the export itself is the data on standard output
    fails(in_vault(src.root, "export", "--raw", "--format", "json"), 2)  # Synapse's JSON has no file text
    fails(in_vault(src.root, "export", "--mind", MIND, "--all-minds"), 2)
    api = src.export(tmp_path / "api.jsonl", raw=True)
    assert api.count == 6 and MIND in json.dumps(api.minds) and list(api.unreadable) == []
    again = [json.loads(line) for line in (tmp_path / "api.jsonl").read_text(encoding="utf-8").splitlines()]
    assert again[1:] == lines[1:]


def test_export_and_import_have_help_with_an_example() -> None:
    from helpers import run

    for command in ("export", "import"):
        assert "Example:" in ok(run(command, "--help")).stdout


# --- import: round trips and idempotence ------------------------------------------------------------


def test_a_persons_import_keeps_ids_dates_verified_and_unknown_keys_verbatim(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    src.export(tmp_path / "export.jsonl")
    report = dst.import_(tmp_path / "export.jsonl")
    assert report.format == "memfile" and report.mind == MIND and not report.dry_run
    assert sorted(report.created) == sorted(m.ref for m in src.memories())
    assert report.commit and report.conflicts == [] and report.skipped == []
    theirs = {m.id: comparable(m.to_dict()) for m in src.memories()}
    ours = {m.id: comparable(m.to_dict()) for m in dst.memories()}
    assert ours == theirs  # ids, dates (updated_at not moved), verified, source, extra, status...
    hand = dst.get("office_hours")
    assert [k for k, _ in hand.extra] == ["aliases", "links"]
    assert dst.get("synapse_status").verified is False and dst.get("office").verified is True


def test_a_raw_import_is_byte_identical(src: Vault, dst: Vault, tmp_path: Path) -> None:
    path = write(src.mind_dir / "preference" / "pho_order.md", "")
    path.write_bytes(BOM_CRLF.encode("utf-8"))
    commit_by_hand(src.root, f"{MIND}/preference/pho_order.md")
    src.export(tmp_path / "export.jsonl", raw=True)
    dst.import_(tmp_path / "export.jsonl")
    assert mind_files(dst) == mind_files(src)


def test_importing_twice_changes_nothing_the_second_time(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "export.jsonl")
    ok(in_vault(dst.root, "import", tmp_path / "export.jsonl"))
    commits, files = commit_count(dst.root), mind_files(dst)
    report = dst.import_(tmp_path / "export.jsonl")
    assert report.commit is None and report.created == [] and report.updated in ([], 0) and report.unchanged == 6
    ok(in_vault(dst.root, "import", tmp_path / "export.jsonl"))
    untouched(dst, commits, files)


def test_the_import_is_one_commit_whose_message_names_the_count_the_file_and_the_source(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    src.export(tmp_path / "export.jsonl")
    commits = commit_count(dst.root)
    ok(in_vault(dst.root, "import", tmp_path / "export.jsonl"))
    assert commit_count(dst.root) == commits + 1
    assert last_subject(dst.root) == "import 6 memories from export.jsonl (user)"
    changed = git(dst.root, "show", "--name-only", "--format=", "HEAD").split()
    assert len(changed) == 6 and all(p.startswith(f"{MIND}/") for p in changed)


def test_import_cli_json_report(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "export.jsonl")
    data = json.loads(ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--json")).stdout)
    assert data["format"] == "memfile" and len(data["created"]) == 6 and data["commit"]
    again = json.loads(ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--json")).stdout)
    assert again["unchanged"] == 6 and again["created"] == [] and again["commit"] is None


def test_the_import_report_carries_what_the_write_told_and_the_cli_says_it_once(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    """A killed sync's merge-driver leftovers removed on the way in: a notice of the write (`Vault.notices`),
    in the report too, so a face that answers with the report alone (HTTP, --json) loses none."""
    src.export(tmp_path / "export.jsonl")
    (dst.root / ".merge_file_a1B2c3").write_text("left by a killed merge\n")
    report = dst.import_(tmp_path / "export.jsonl")
    told = "removed 1 temporary files of a merge that was killed (.merge_file_a1B2c3)"
    assert told in report.notices and told in dst.notices
    (dst.root / ".merge_file_d4E5f6").write_text("left by a killed merge\n")
    data = json.loads(ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--json")).stdout)
    assert data["notices"] == ["removed 1 temporary files of a merge that was killed (.merge_file_d4E5f6)"]
    (dst.root / ".merge_file_g7H8i9").write_text("left by a killed merge\n")
    result = ok(in_vault(dst.root, "import", tmp_path / "export.jsonl"))
    assert ".merge_file_g7H8i9" not in result.stdout  # on stderr, once, like every command's notices
    assert result.stderr.count("removed 1 temporary files of a merge that was killed (.merge_file_g7H8i9)") == 1


def test_the_format_is_detected_without_from_and_a_wrong_from_is_refused(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    src.export(tmp_path / "export.jsonl")
    synapse = tmp_path / "synapse.json"
    synapse.write_text(ok(in_vault(src.root, "export", "--format", "json")).stdout, encoding="utf-8")
    plan = json.loads(ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--dry-run", "--json")).stdout)
    assert plan["format"] == "memfile"
    plan = json.loads(ok(in_vault(dst.root, "import", synapse, "--dry-run", "--json")).stdout)
    assert plan["format"] == "synapse" and len(plan["created"]) == 6
    fails(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--from", "langbot"), 2)
    fails(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--from", "nonsense"), 2)
    assert commit_count(dst.root) == 1


def test_from_mind_picks_one_mind_of_an_all_minds_export(src: Vault, dst: Vault, tmp_path: Path) -> None:
    Vault.init(src.root, "work", "Work").store("project", "roadmap", "Ship export in Q1")
    src.export(tmp_path / "all.jsonl", all_minds=True)
    commits = commit_count(dst.root)
    with pytest.raises(MemfileError, match="from.mind"):  # several minds: which one must be said
        dst.import_(tmp_path / "all.jsonl")
    with pytest.raises(MemfileError, match="nobody"):
        dst.import_(tmp_path / "all.jsonl", from_mind="nobody")
    assert commit_count(dst.root) == commits
    report = dst.import_(tmp_path / "all.jsonl", from_mind="work")
    assert report.created == ["project/roadmap"]
    assert [m.key for m in dst.memories()] == ["roadmap"]


# --- import: one commit or nothing ------------------------------------------------------------------


BAD_RECORDS = {
    "category": ({"category": "nonsense"}, "category"),
    "key": ({"key": "Not A Key"}, "key"),
    "content not text": ({"content": 42}, "content"),
    "content with NUL": ({"content": "a\x00b"}, "content"),
    "content with conflict markers": ({"content": "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other"}, "content"),
    "missing content": ({"content": None}, "content"),
    "priority": ({"priority": "urgent"}, "priority"),
    "id": ({"id": "../../etc/passwd"}, "id"),
    "tags": ({"tags": {"a": 1}}, "tags"),
    "confidence": ({"confidence": 7}, "confidence"),
    "date": ({"created_at": "yesterday"}, "created_at"),
    "status": ({"status": "deleted"}, "status"),
    "superseded_by": ({"status": "superseded", "superseded_by": "not an id"}, "superseded_by"),
    "extra": ({"extra": ["not", "a", "mapping"]}, "extra"),
}


@pytest.mark.parametrize("case", BAD_RECORDS, ids=list(BAD_RECORDS))
def test_a_bad_record_in_the_middle_stops_the_import_naming_its_number_and_writes_nothing(
    case: str, src: Vault, dst: Vault, tmp_path: Path
) -> None:
    change, field = BAD_RECORDS[case]
    header, *records, _ = exported(src)
    bad = dict(records[3])
    for name, value in change.items():
        if value is None:
            bad.pop(name)
        else:
            bad[name] = value
    records[3] = bad
    path = export_file(tmp_path / "export.jsonl", closed(header, records))
    commits, files = commit_count(dst.root), mind_files(dst)
    with pytest.raises(MemfileError) as planned:  # a dry run refuses what the import would refuse
        dst.import_(path, dry_run=True)
    assert field in str(planned.value)
    with pytest.raises(MemfileError) as caught:
        dst.import_(path)
    assert "4" in str(caught.value) and field in str(caught.value), str(caught.value)
    untouched(dst, commits, files)
    result = fails(in_vault(dst.root, "import", path), 2)
    assert "record 4" in result.stderr or "line 5" in result.stderr, result.stderr
    assert field in result.stderr
    untouched(dst, commits, files)


def test_a_bulk_import_whose_commit_fails_leaves_no_file_and_no_trace_in_the_index(dst: Vault, tmp_path: Path) -> None:
    """A write of many files builds the index before git commits (nothing else runs in the process): when
    the commit then fails (a pre-commit hook refuses it), every file is taken away again and the index
    forgets them; once the hook is gone the same import commits."""
    records = [
        {"category": "fact", "key": f"bulk_{i}", "content": f"Bulk memory {i} about zeppelins."} for i in range(40)
    ]
    path = tmp_path / "synapse.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    commits, files, everything = commit_count(dst.root), mind_files(dst), every_file(dst.root)
    hook = dst.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho refused by the hook >&2\nexit 1\n", encoding="utf-8")
    hook.chmod(0o755)
    with pytest.raises(MemfileError, match="refused by the hook"):
        dst.import_(path)
    untouched(dst, commits, files)
    assert every_file(dst.root) == everything  # no temp file left either
    assert dst.search("zeppelins") == [] and dst.status()["stale"] == []
    assert Vault.open(dst.root, MIND).search("zeppelins") == []  # nor in the index on disk
    hook.unlink()
    assert len(dst.import_(path).created) == 40
    assert commit_count(dst.root) == commits + 1 and len(dst.search("zeppelins", limit=100)) == 40


def test_a_record_that_is_not_an_object_or_of_an_unknown_type_is_refused(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    header, *records, _ = exported(src)
    commits, files = commit_count(dst.root), mind_files(dst)
    for odd in ([1, 2], "text", {"type": "martian", **records[0]}):
        path = export_file(tmp_path / "odd.jsonl", [header, records[0], odd, *records[1:], {"type": "end", "count": 7}])
        fails(in_vault(dst.root, "import", path), 2)
        untouched(dst, commits, files)


def test_dry_run_writes_nothing_and_prints_the_plan(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "first.jsonl")
    dst.import_(tmp_path / "first.jsonl")
    dst.store("skill", "clash", "mine")
    header, *records, _ = exported(src)
    records = [
        dict(r, content="The office moved to Hamburg", updated_at=later()) if r["key"] == "office" else r
        for r in records
    ]
    records.append({"type": "memory", "category": "fact", "key": "brand_new", "content": "Something new"})
    records.append({"type": "memory", "id": "mem_clashtheirs01", "category": "skill", "key": "clash", "content": "x"})
    path = export_file(tmp_path / "second.jsonl", closed(header, records))
    commits, files = commit_count(dst.root), mind_files(dst)
    plan = dst.import_(path, dry_run=True)
    assert plan.dry_run and plan.commit is None
    assert plan.created == ["fact/brand_new"]
    assert plan.updated == ["fact/office"]
    assert plan.unchanged == 5
    assert [(c["record"], c["ref"]) for c in plan.conflicts] == [(8, "skill/clash")]
    untouched(dst, commits, files)
    result = fails(in_vault(dst.root, "import", path, "--dry-run"), 4)  # a conflict: exit 4, as a real import
    for word in ("fact/brand_new", "fact/office", "skill/clash", "5 unchanged", "nothing written"):
        assert word in result.stdout, result.stdout
    data = json.loads(fails(in_vault(dst.root, "import", path, "--dry-run", "--json"), 4).stdout)
    assert data["dry_run"] is True and data["created"] == ["fact/brand_new"] and data["unchanged"] == 5
    assert data["updated"] == ["fact/office"] and data["commit"] is None and "unmapped" in data
    untouched(dst, commits, files)
    result = fails(in_vault(dst.root, "import", path), 4)  # the rest goes in, the conflict stays reported
    assert "skill/clash" in result.stdout and commit_count(dst.root) == commits + 1
    assert dst.get("skill/clash").content == "mine" and dst.get("fact/office").content.endswith("Hamburg")


# --- import: conflicts --------------------------------------------------------------------------------


def _one(vault: Vault, ref: str) -> dict[str, Any]:
    return next(r for r in exported(vault) if r.get("type") == "memory" and f"{r['category']}/{r['key']}" == ref)


@pytest.mark.parametrize(
    ("mode", "file_is_newer", "taken"),
    [
        ("newer", True, True),
        ("newer", False, False),
        ("skip", True, False),
        ("skip", False, False),
        ("overwrite", True, True),
        ("overwrite", False, True),
    ],
)
def test_the_same_id_with_other_content_follows_on_conflict(
    mode: str, file_is_newer: bool, taken: bool, dst: Vault, tmp_path: Path
) -> None:
    dst.store("fact", "office", "Berlin")
    header, *_ = exported(dst)
    mine = _one(dst, "fact/office")
    theirs = dict(mine, content="Hamburg", tags=["moved"])
    theirs["updated_at"] = later() if file_is_newer else "2000-01-01T00:00:00Z"
    path = export_file(tmp_path / "export.jsonl", closed(header, [theirs]))
    commits = commit_count(dst.root)
    report = dst.import_(path, on_conflict=mode)
    memory = dst.get("fact/office")
    if taken:
        assert report.updated == ["fact/office"] and report.commit
        assert memory.content == "Hamburg" and memory.tags == ("moved",)
        assert memory.to_dict()["updated_at"] == theirs["updated_at"]  # verbatim, not moved to now
        assert commit_count(dst.root) == commits + 1
    else:
        assert report.updated in ([], 0) and [s["ref"] for s in report.skipped] == ["fact/office"]
        assert report.skipped[0]["reason"]
        assert memory.content == "Berlin" and report.commit is None
        assert commit_count(dst.root) == commits


@pytest.mark.parametrize("mode", ["newer", "overwrite"])
def test_a_newer_raw_record_replaces_the_file_byte_for_byte(mode: str, dst: Vault, tmp_path: Path) -> None:
    dst.store("fact", "office", "Berlin", tags=["work"])
    header, *records, _ = exported(dst, raw=True)
    record = records[0]
    stamp, newer = record["updated_at"], later()
    text = record["raw"].replace("Berlin", "Hà Nội").replace(f"updated_at: {stamp}", f"updated_at: {newer}")
    text = text.replace("---\n", "---\n# a comment from the other machine\n", 1).replace("\n", "\r\n")
    record |= {"raw": text, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    record |= {"content": "Hà Nội", "updated_at": newer}
    report = dst.import_(export_file(tmp_path / "export.jsonl", closed(header, [record])), on_conflict=mode)
    assert report.updated == ["fact/office"] and report.commit
    assert (dst.mind_dir / "fact" / "office.md").read_bytes() == text.encode("utf-8")
    assert dst.get("office").content == "Hà Nội" and dst.get("office").tags == ("work",)
    assert git(dst.root, "status", "--porcelain").strip() == ""


def test_on_conflict_through_the_cli(dst: Vault, tmp_path: Path) -> None:
    dst.store("fact", "office", "Berlin")
    header, *_ = exported(dst)
    theirs = dict(_one(dst, "fact/office"), content="Hamburg", updated_at="2000-01-01T00:00:00Z")
    path = export_file(tmp_path / "export.jsonl", closed(header, [theirs]))
    ok(in_vault(dst.root, "import", path))  # default newer: older file, skipped
    assert dst.get("office").content == "Berlin"
    ok(in_vault(dst.root, "import", path, "--on-conflict", "skip"))
    assert dst.get("office").content == "Berlin"
    ok(in_vault(dst.root, "import", path, "--on-conflict", "overwrite"))
    assert dst.get("office").content == "Hamburg"
    fails(in_vault(dst.root, "import", path, "--on-conflict", "merge"), 2)


@pytest.mark.parametrize("mode", ["skip", "newer", "overwrite"])
def test_the_same_category_and_key_under_another_id_is_a_conflict_never_merged(
    mode: str, dst: Vault, tmp_path: Path
) -> None:
    dst.store("fact", "office", "Berlin")
    header, *_ = exported(dst)
    theirs = dict(_one(dst, "fact/office"), id="mem_othermachine01", content="Hamburg", updated_at=later())
    theirs.pop("path", None)
    other = dict(theirs, id="mem_othermachine02", key="lunch", content="Pho at noon")
    path = export_file(tmp_path / "export.jsonl", closed(header, [theirs, other]))
    before = (dst.mind_dir / "fact" / "office.md").read_bytes()
    report = dst.import_(path, on_conflict=mode)
    assert [c["ref"] for c in report.conflicts] == ["fact/office"] and report.conflicts[0]["reason"]
    assert (dst.mind_dir / "fact" / "office.md").read_bytes() == before
    assert [m.id for m in dst.memories() if m.key == "office"] != ["mem_othermachine01"]
    assert len([m for m in dst.memories() if m.key == "office"]) == 1
    assert report.created == ["fact/lunch"]  # the rest of the import goes in


@pytest.mark.parametrize("twin", ["id", "ref", "path"])
def test_two_records_of_one_memory_in_one_file_are_refused(twin: str, src: Vault, dst: Vault, tmp_path: Path) -> None:
    header, *records, _ = exported(src)
    first = records[0]
    other = dict(first, id="mem_twintwin0001", key="twin_key", path=f"{MIND}/{first['category']}/twin_key.md")
    other |= (
        {"id": first["id"]} if twin == "id" else {"key": first["key"]} if twin == "ref" else {"path": first["path"]}
    )
    path = export_file(tmp_path / "export.jsonl", closed(header, [*records, other]))
    commits, files = commit_count(dst.root), mind_files(dst)
    with pytest.raises(MemfileError, match="record 7") as refusal:
        dst.import_(path)
    assert "record 1" in str(refusal.value)
    untouched(dst, commits, files)


# --- import: a truncated or tampered export -------------------------------------------------------


@pytest.mark.parametrize(
    "cut", ["no trailer", "wrong count", "a record dropped", "cut mid-line", "no header", "only a header", "empty"]
)
def test_a_truncated_export_is_refused(cut: str, src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "full.jsonl")
    text = (tmp_path / "full.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    damaged = {
        "no trailer": "".join(lines[:-1]),
        "wrong count": "".join(lines[:-1]) + '{"type": "end", "count": 7, "unreadable": 0}\n',
        "a record dropped": "".join(lines[:2] + lines[3:]),
        "cut mid-line": "".join(lines[:3]) + lines[3][: len(lines[3]) // 2],
        "no header": "".join(lines[1:]),
        "only a header": lines[0],
        "empty": "",
    }[cut]
    path = tmp_path / "export.jsonl"
    path.write_text(damaged, encoding="utf-8")
    commits, files = commit_count(dst.root), mind_files(dst)
    with pytest.raises(MemfileError):
        dst.import_(path, format="memfile")
    result = fails(in_vault(dst.root, "import", path, "--from", "memfile"), 2)
    assert result.stderr.strip()
    untouched(dst, commits, files)
    fails(in_vault(dst.root, "import", path), 2)  # detected or not, the same refusal
    untouched(dst, commits, files)


def test_lines_after_the_trailer_are_refused(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "export.jsonl")
    extra = next(r for r in exported(src) if r.get("type") == "memory")
    with (tmp_path / "export.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(dict(extra, key="smuggled", id="mem_smuggled01")) + "\n")
    fails(in_vault(dst.root, "import", tmp_path / "export.jsonl"), 2)
    assert commit_count(dst.root) == 1


def _raw_record(src: Vault, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    lines = exported(src, raw=True)
    return lines[0], next(r for r in records_of(lines) if f"{r['category']}/{r['key']}" == ref)


def test_a_raw_record_whose_sha256_does_not_match_is_refused(src: Vault, dst: Vault, tmp_path: Path) -> None:
    header, record = _raw_record(src, "fact/office")
    record["raw"] = record["raw"].replace("Berlin", "Bonn")  # the text changed, the checksum did not
    path = export_file(tmp_path / "export.jsonl", closed(header, [record]))
    commits, files = commit_count(dst.root), mind_files(dst)
    result = fails(in_vault(dst.root, "import", path), 2)
    assert "sha256" in result.stderr
    untouched(dst, commits, files)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("key", "someone_else"),
        ("category", "skill"),
        ("id", "mem_notthesame01"),
        ("content", "Bonn"),
        ("priority", "low"),
        ("verified", False),
        ("updated_at", "2001-01-01T00:00:00Z"),
        ("extra", {"smuggled": True}),
    ],
)
def test_a_raw_record_whose_front_matter_disagrees_with_its_fields_is_refused(
    field: str, value: Any, src: Vault, dst: Vault, tmp_path: Path
) -> None:
    header, record = _raw_record(src, "fact/office")
    record[field] = value
    if field in ("key", "category"):
        record["path"] = f"{MIND}/{record['category']}/{record['key']}.md"
    path = export_file(tmp_path / "export.jsonl", closed(header, [record]))
    commits, files = commit_count(dst.root), mind_files(dst)
    result = fails(in_vault(dst.root, "import", path), 2)
    assert field in result.stderr, result.stderr
    untouched(dst, commits, files)


HOSTILE_PATHS = {
    "dot-dot": f"{MIND}/../evil.md",
    "dot-dot at the start": "../evil.md",
    "deep dot-dot": f"{MIND}/fact/../../evil.md",
    "absolute": "/tmp/evil.md",
    "other mind": "other/fact/office.md",
    "backslashes": f"{MIND}\\fact\\office.md",
    "backslash dot-dot": f"{MIND}\\..\\evil.md",
    "NUL": f"{MIND}/fact/office\x00.md",
    "not markdown": f"{MIND}/fact/office.txt",
    "git folder": f"{MIND}/.git/config.md",
    "memfile folder": ".memfile/evil.md",
    "memfile folder in the mind": f"{MIND}/.memfile/evil.md",
    "hidden folder": f"{MIND}/fact/.hidden/evil.md",
    "top-level config": "memfile.toml",
    "empty": "",
    "the mind itself": f"{MIND}",
}


@pytest.mark.parametrize("name", HOSTILE_PATHS, ids=list(HOSTILE_PATHS))
def test_a_raw_record_whose_path_leaves_the_mind_is_refused(name: str, src: Vault, dst: Vault, tmp_path: Path) -> None:
    header, record = _raw_record(src, "fact/office")
    record["path"] = HOSTILE_PATHS[name]
    path = export_file(tmp_path / "export.jsonl", closed(header, [record]))
    commits, files = commit_count(dst.root), mind_files(dst)
    everything = every_file(dst.root)
    result = fails(in_vault(dst.root, "import", path), 2)
    assert "path" in result.stderr, result.stderr
    untouched(dst, commits, files)
    assert every_file(dst.root) == everything
    assert not (tmp_path / "evil.md").exists() and not Path("/tmp/evil.md").exists()


def test_a_record_whose_path_runs_through_a_symlink_out_of_the_mind_is_refused(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (dst.mind_dir / "fact").mkdir(exist_ok=True)
    (dst.mind_dir / "fact" / "escape").symlink_to(outside, target_is_directory=True)
    for raw in (True, False):
        header, *records, _ = exported(src, raw=raw)
        record = dict(records[0], path=f"{MIND}/fact/escape/{records[0]['key']}.md")
        path = export_file(tmp_path / "export.jsonl", closed(header, [record]))
        commits = commit_count(dst.root)
        result = fails(in_vault(dst.root, "import", path), 2)
        assert "path" in result.stderr or "symlink" in result.stderr, result.stderr
        assert list(outside.iterdir()) == [] and commit_count(dst.root) == commits


@pytest.mark.parametrize("name", ["dot-dot", "absolute", "other mind", "backslashes", "NUL", "git folder"])
def test_a_hostile_path_in_a_record_without_raw_writes_nothing_outside_the_mind(
    name: str, src: Vault, dst: Vault, tmp_path: Path
) -> None:
    header, *records, _ = exported(src)
    record = dict(records[0], path=HOSTILE_PATHS[name])
    path = export_file(tmp_path / "export.jsonl", closed(header, [record]))
    everything = every_file(dst.root)
    result = in_vault(dst.root, "import", path)
    assert result.exit_code in (0, 2) and "Traceback" not in result.stderr, (result.exit_code, result.stderr)
    new = every_file(dst.root) - everything
    assert all(p.startswith(f"{MIND}/") and ".." not in p and ".git" not in p and p.endswith(".md") for p in new), new
    assert not (tmp_path / "evil.md").exists() and not Path("/tmp/evil.md").exists()


@pytest.mark.parametrize(
    "where",
    [f"{MIND}/.memfile/office.md", f"{MIND}/notes.bak/office.md", f"{MIND}/private/office.md"],
    ids=["memfile state", "editor backup folder", "gitignored folder"],
)
def test_a_record_path_git_would_not_commit_is_refused_before_anything_is_written(
    where: str, src: Vault, dst: Vault, tmp_path: Path
) -> None:
    """Written, then `git add` refused it (exit 6) and an empty folder stayed: now bad input, naming the record."""
    (dst.root / ".gitignore").write_text(".memfile/\nprivate/\n", encoding="utf-8")
    commit_by_hand(dst.root, ".gitignore")
    header, *records, _ = exported(src)
    for raw in (False, True):
        _, *records, _ = exported(src, raw=raw)
        fine = [r for r in records if r["key"] != "office"]
        office = next(r for r in records if r["key"] == "office")
        path = export_file(tmp_path / "export.jsonl", closed(header, [*fine, dict(office, path=where)]))
        commits, files = commit_count(dst.root), mind_files(dst)
        for dry_run in ((), ("--dry-run",)):
            result = fails(in_vault(dst.root, "import", path, *dry_run), 2)
            assert f"path of record {len(fine) + 1} (line {len(fine) + 2}) '{where}'" in result.stderr, result.stderr
        untouched(dst, commits, files)
        assert not (dst.root / where).parent.exists()


# --- import: progress ----------------------------------------------------------------------------


def test_an_import_tells_its_progress_checking_writing_indexing(src: Vault, dst: Vault, tmp_path: Path) -> None:
    """A 10,000-memory import took 33 s without a word: each record checked, each file written, then indexed."""
    src.export(tmp_path / "export.jsonl")
    seen: list[tuple[str, int, int]] = []
    dry = dst.import_(tmp_path / "export.jsonl", dry_run=True, progress=lambda *told: seen.append(told))
    assert {step for step, _, _ in seen} == {"checking"} and seen[-1] == ("checking", 6, 6)
    seen.clear()
    report = dst.import_(tmp_path / "export.jsonl", progress=lambda *told: seen.append(told))
    assert len(report.created) == len(dry.created) == 6
    steps = [step for step, _, _ in seen]
    assert steps == sorted(steps, key=["checking", "writing", "indexing"].index)  # one step after the other
    for name in ("checking", "writing", "indexing"):
        counts = [(done, total) for step, done, total in seen if step == name]
        assert counts[-1] == (6, 6) and all(total == 6 for _, total in counts), (name, counts)
        assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    seen.clear()
    dst.import_(tmp_path / "export.jsonl", progress=lambda *told: seen.append(told))
    assert {step for step, _, _ in seen} == {"checking"}  # nothing to write


def test_an_import_draws_no_progress_into_a_pipe(src: Vault, dst: Vault, tmp_path: Path) -> None:
    """The bars are drawn on a terminal only (tests/test_terminal.py): a script reading stderr gets none."""
    src.export(tmp_path / "export.jsonl")
    result = ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", "--json"))
    assert result.stderr == "" and len(json.loads(result.stdout)["created"]) == 6


# --- import: who imports -------------------------------------------------------------------------


def test_an_agents_import_lands_unverified_as_agent(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "export.jsonl")
    agent = Vault.open(dst.root, MIND, source="agent")
    report = agent.import_(tmp_path / "export.jsonl")
    assert len(report.created) == 6
    for memory in dst.memories():
        assert memory.verified is False and memory.source.value == "agent", memory.ref
    assert last_subject(dst.root).endswith("(agent)")


def test_an_agents_cli_import_lands_unverified(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.export(tmp_path / "export.jsonl")
    ok(in_vault(dst.root, "import", tmp_path / "export.jsonl", env={"MEMFILE_SOURCE": "agent"}))
    assert {(m.verified, m.source.value) for m in dst.memories()} == {(False, "agent")}
    assert last_subject(dst.root) == "import 6 memories from export.jsonl (agent)"


def test_an_agents_import_caps_a_critical_memory_at_high_and_says_so(src: Vault, dst: Vault, tmp_path: Path) -> None:
    src.store("identity", "name", "Michael", priority="critical")
    src.export(tmp_path / "export.jsonl")
    agent = Vault.open(dst.root, MIND, source="agent")
    report = agent.import_(tmp_path / "export.jsonl")
    assert dst.get("identity/name").priority.value == "high"
    assert all(m.priority.value != "critical" for m in dst.memories())
    assert any("critical" in notice for notice in report.notices), report.notices
    result = ok(
        in_vault(new_vault(tmp_path, "dst2").root, "import", tmp_path / "export.jsonl", env={"MEMFILE_SOURCE": "agent"})
    )
    assert "critical" in result.stdout + result.stderr


@pytest.mark.parametrize("raw", [False, True], ids=["fields", "raw"])
def test_an_agent_importing_its_own_unchanged_export_gets_unchanged_not_conflicts(
    raw: bool, src: Vault, tmp_path: Path
) -> None:
    """A person verified one memory and made one critical; the agent's export of the mind, imported back as it
    is, changes nothing: no conflict, no "critical imported as high", the same in the dry run."""
    src.store("identity", "name", "Michael", priority="critical")
    src.export(tmp_path / "export.jsonl", raw=raw)
    before = mind_files(src)
    for dry_run in (("--dry-run",), ()):
        result = ok(in_vault(src.root, "import", tmp_path / "export.jsonl", *dry_run, env={"MEMFILE_SOURCE": "agent"}))
        assert ": 0 created, 0 updated, 7 unchanged, 0 skipped, 0 conflicts" in result.stdout, result.stdout
        assert "critical" not in result.stdout + result.stderr
    assert mind_files(src) == before
    header, *records, _ = exported(src)
    name = next(r for r in records if r["key"] == "name")
    changed = export_file(tmp_path / "changed.jsonl", closed(header, [dict(name, content="Micha", updated_at=later())]))
    agent = Vault.open(src.root, MIND, source="agent")
    for dry_run in (True, False):
        report = agent.import_(changed, dry_run=dry_run)
        assert [c["ref"] for c in report.conflicts] == ["identity/name"] and report.notices == []


def test_an_agents_import_cannot_change_a_verified_or_critical_memory(dst: Vault, tmp_path: Path) -> None:
    dst.store("fact", "office", "Berlin")  # a person's: verified
    with dst.acting_as("agent"):
        dst.store("fact", "boss", "Anna", priority="high")
    dst.store("fact", "boss", "Anna", priority="critical")  # a person raised it (verified by that store too)
    header, *_ = exported(dst)
    theirs = [
        dict(_one(dst, ref), content="Hamburg", updated_at=later(), verified=False, priority="low")
        for ref in ("fact/office", "fact/boss")
    ]
    path = export_file(tmp_path / "export.jsonl", closed(header, theirs))
    before = mind_files(dst)
    agent = Vault.open(dst.root, MIND, source="agent")
    for mode in ("newer", "overwrite"):
        report = agent.import_(path, on_conflict=mode)
        assert report.updated == [] and report.commit is None
        assert sorted(c["ref"] for c in report.conflicts) == ["fact/boss", "fact/office"]
        assert mind_files(dst) == before


def test_an_agents_raw_import_is_rewritten_unverified_keeping_the_rest_of_the_file(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    src.export(tmp_path / "export.jsonl", raw=True)
    agent = Vault.open(dst.root, MIND, source="agent")
    report = agent.import_(tmp_path / "export.jsonl")
    assert len(report.created) == 6
    assert all(not m.verified and m.source.value == "agent" for m in dst.memories())
    text = (dst.mind_dir / "fact" / "office_hours.md").read_text(encoding="utf-8")
    assert "# a comment kept by memfile" in text and "aliases: [hours, opening]   # an inline comment" in text
    assert dst.get("office_hours").to_dict()["updated_at"] == "2020-01-02T08:00:00Z"


def test_unknown_fields_of_a_record_are_reported_as_unmapped(src: Vault, dst: Vault, tmp_path: Path) -> None:
    header, *records, _ = exported(src)
    records[0] = dict(records[0], colour="red")
    report = dst.import_(export_file(tmp_path / "export.jsonl", closed(header, records)))
    assert len(report.created) == 6
    assert any("colour" in line for line in report.unmapped), report.unmapped


def test_import_from_standard_input(src: Vault, dst: Vault) -> None:
    text = "".join(src.export_lines())
    ok(in_vault(dst.root, "import", "-", input=text))
    assert len(dst.memories()) == 6
    assert last_subject(dst.root).startswith("import 6 memories from ")


# --- import: hostile input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["binary", "not json", "not utf-8", "a json number", "huge line", "huge file", "missing file", "a folder"]
)
def test_input_that_is_no_export_gives_a_clear_error(kind: str, dst: Vault, tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    if kind == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    elif kind == "not json":
        path.write_text("id,category,key\n1,fact,office\n", encoding="utf-8")
    elif kind == "not utf-8":
        path.write_bytes(b'{"type": "header", "format": "memfile-export", "version": 1, "x": "\xff\xfe"}\n')
    elif kind == "a json number":
        path.write_text("42\n", encoding="utf-8")
    elif kind == "huge line":  # a record whose content is over the 10 MB a memory may hold
        header = {"type": "header", "format": "memfile-export", "version": 1, "minds": [{"mind": MIND}]}
        record = {"type": "memory", "category": "fact", "key": "big", "content": "a" * (11 * 2**20)}
        export_file(path, closed(header, [record]))
    elif kind == "huge file":  # sparse: no disk used, refused before it is read
        with path.open("wb") as out:
            out.truncate(3 * 2**30)
    elif kind == "a folder":
        path.mkdir()
    commits = commit_count(dst.root)
    if kind == "missing file":  # exit 2 (click's check) or 3 (not found), the file named either way
        result = in_vault(dst.root, "import", path)
        assert result.exit_code in (2, 3) and "Traceback" not in result.stderr, (result.exit_code, result.stderr)
        assert "input.jsonl" in result.stderr
    else:
        result = fails(in_vault(dst.root, "import", path), 2)
        assert result.stderr.startswith("memfile: error:"), result.stderr[:500]
    assert len(result.stderr) < 2000
    assert commit_count(dst.root) == commits


@pytest.mark.parametrize("given", ["/dev/zero", "-"])
def test_an_endless_device_or_pipe_is_read_only_up_to_the_limit(given: str, dst: Vault) -> None:
    """A device or a pipe has no size to check first: `/dev/zero` ended in MemoryError (exit 1)."""
    if given == "-":
        with open("/dev/zero", "rb") as zeros:
            result = CliRunner().invoke(main, ["--vault", str(dst.root), "import", "-"], input=zeros)
    else:
        result = in_vault(dst.root, "import", given)
    fails(result, 2)
    assert "a file of at most 512 MB" in result.stderr and "more than 512 MB were read" in result.stderr
    assert commit_count(dst.root) == 1


def test_an_export_from_a_newer_format_version_is_refused(src: Vault, dst: Vault, tmp_path: Path) -> None:
    header, *records, _ = exported(src)
    path = export_file(tmp_path / "export.jsonl", closed(dict(header, version=2), records))
    result = fails(in_vault(dst.root, "import", path, "--from", "memfile"), 2)
    assert "version" in result.stderr
    assert commit_count(dst.root) == 1


def test_line_and_paragraph_separators_in_a_memory_survive_export_and_import(dst: Vault, tmp_path: Path) -> None:
    """JSON Lines are split at \\n only: U+2028, U+2029 and U+0085 inside a string are not line ends."""
    text = "Dòng một\u2028dòng hai\u2029ย่อหน้า\x85中文"
    src = new_vault(tmp_path, "seps")
    src.store("note", "separators", text, tags=["a\u2028b"])
    for raw in (False, True):
        target = new_vault(tmp_path, f"seps_{raw}")
        src.export(tmp_path / f"seps_{raw}.jsonl", raw=raw)
        target.import_(tmp_path / f"seps_{raw}.jsonl")
        assert target.get("note/separators").content == src.get("note/separators").content
        assert mind_files(target) == mind_files(src) or not raw


def test_import_from_bytes(src: Vault, dst: Vault) -> None:
    data = "".join(src.export_lines()).encode("utf-8")
    report = dst.import_(data)
    assert len(report.created) == 6 and report.commit


def test_unknown_keys_memfile_could_not_read_back_are_refused_naming_the_record(dst: Vault, tmp_path: Path) -> None:
    """A record whose `extra` would make an unreadable file (nested past YAML's depth cap) stops the import
    in the plan, dry run included, naming its record; nothing is written."""
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(150):
        inner["a"] = {}
        inner = inner["a"]
    header = {"type": "header", "format": "memfile-export", "version": 1, "minds": [{"mind": MIND}]}
    good = {"type": "memory", "id": "mem_fine00000001", "category": "note", "key": "fine", "content": "ok"}
    bad = {"type": "memory", "id": "mem_deep00000001", "category": "note", "key": "deep", "content": "x", "extra": deep}
    path = export_file(tmp_path / "deep.jsonl", closed(header, [good, bad]))
    commits, files = commit_count(dst.root), mind_files(dst)
    for dry_run in (True, False):
        with pytest.raises(MemfileError, match=r"record 2 .*nested more than 100 levels"):
            dst.import_(path, dry_run=dry_run)
    untouched(dst, commits, files)


def test_a_record_with_more_than_100_tags_is_refused_by_their_count_naming_the_record(
    dst: Vault, tmp_path: Path
) -> None:
    tags = [f"t{i}" for i in range(40_000)]
    header = {"type": "header", "format": "memfile-export", "version": 1, "minds": [{"mind": MIND}]}
    good = {"type": "memory", "category": "note", "key": "fine", "content": "ok", "tags": tags[:100]}
    commits, files = commit_count(dst.root), mind_files(dst)
    for many in (tags, tags[:101]):
        bad = {"type": "memory", "category": "note", "key": "many", "content": "x", "tags": many}
        path = export_file(tmp_path / "many.jsonl", closed(header, [good, bad]))
        with pytest.raises(InvalidInput, match=rf"tags of record 2 .*'{len(many)} tags'; allowed: at most 100 tags"):
            dst.import_(path)
        synapse = synapse_file(tmp_path / "many.json", [good, bad])
        fails(in_vault(dst.root, "import", synapse, env={"MEMFILE_SOURCE": "agent"}), 2)
    untouched(dst, commits, files)
    assert dst.import_(export_file(tmp_path / "fine.jsonl", closed(header, [good]))).created == ["note/fine"]


def test_a_commit_of_many_files_packs_their_contents_into_one_file(tmp_path: Path) -> None:
    """From PACKED_ADD files a commit's `git add` writes one pack, not a file per object: the same blobs
    and tree as a plain `git add` of the same files, and git finds the repository sound."""
    trees = []
    for name, count in (("packed", PACKED_ADD), ("loose", PACKED_ADD - 1)):
        root = tmp_path / name
        store = GitStore(root, "Test", "test@example.com")
        store.init()
        paths = [f"m/note/n{i:04d}.md" for i in range(count)]
        for path in paths:
            write(root / path, f"Note {path}\n")
        assert store.commit(paths, "many") is not None
        loose = [p for p in (root / ".git" / "objects").glob("??/*")]
        assert (len(loose) < 10) is (name == "packed"), len(loose)  # only the trees and the commit stay loose
        assert git(root, "status", "--porcelain") == ""
        assert subprocess.run(["git", "fsck", "--strict"], cwd=root, capture_output=True).returncode == 0
        trees.append(git(root, "ls-tree", "-r", "HEAD").splitlines())
    assert trees[0][:-1] == trees[1]  # the same blob for each file


# --- import: secrets in every part of the file, keys that never move, Synapse's round trip ------------

#: Token-shaped values are built at run time: no string in this file is one (push protection never flags it).
_TOKENS = random.Random(44)


def github_token() -> str:
    return "gh" + "p_" + "".join(_TOKENS.choices(string.ascii_letters + string.digits, k=36))


def synapse_file(path: Path, memories: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(memories, ensure_ascii=False), encoding="utf-8")
    return path


def _smuggled(shape: str, src: Vault, tmp_path: Path, token: str) -> tuple[Path, str, str]:
    """An import file whose second memory hides `token` outside its content: the file, the record named, the
    field named."""
    clean = {"category": "fact", "key": "clean_one", "content": "Nothing secret here."}
    if shape == "synapse field":  # a field Synapse does not know becomes a front-matter key
        memories = [clean, {"category": "fact", "key": "s2", "content": "clean", "aws": token}]
        return synapse_file(tmp_path / "in.json", memories), "record 2", "front-matter key 'aws'"
    if shape == "synapse extra, nested":
        extra = {"ci": {"tokens": ["not this one", f"but {token}"]}}
        memories = [clean, {"category": "fact", "key": "s2", "content": "clean", "extra": extra}]
        return synapse_file(tmp_path / "in.json", memories), "record 2", "front-matter key 'ci'"
    if shape == "synapse tags":  # tags are written lowercased: a lowercase token stays one
        memories = [
            clean,
            {"category": "fact", "key": "s2", "content": "clean", "tags": ["infra", f"ci {token.lower()}"]},
        ]
        return synapse_file(tmp_path / "in.json", memories), "record 2", "a tag"
    if shape == "keyword, nested":  # a password by its name: the keyword rule reads `password: ...` lines
        extra = {"db": {"host": "db.internal", "password": "Xk9qMv2L7pR4tZ8w"}}
        memories = [clean, {"category": "fact", "key": "s2", "content": "clean", "extra": extra}]
        return synapse_file(tmp_path / "in.json", memories), "record 2", "front-matter key 'db'"
    header, *records, _ = exported(src, raw=shape == "raw front-matter")
    second = dict(records[1])
    if shape == "memfile extra":
        second["extra"] = {**second["extra"], "deploy": f"with {token}"}
        return export_file(tmp_path / "in.jsonl", closed(header, records[:1] + [second])), "record 2", "'deploy'"
    if shape in ("memfile id", "memfile path"):  # both land in git: the file's `id:` line, its name
        second |= {"id": token} if shape == "memfile id" else {"path": f"{MIND}/fact/{token}.md"}
        return (
            export_file(tmp_path / "in.jsonl", closed(header, records[:1] + [second])),
            "record 2",
            f"the {shape[8:]} looks like",
        )
    assert shape == "raw front-matter"
    text = second["raw"].replace("\n---\n", f"\nci_token: {token}\n---\n", 1)
    second |= {"raw": text, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    second["extra"] = {**second["extra"], "ci_token": token}
    return export_file(tmp_path / "in.jsonl", closed(header, records[:1] + [second])), "record 2", "raw"


SMUGGLED = [
    "synapse field",
    "synapse extra, nested",
    "synapse tags",
    "keyword, nested",
    "memfile extra",
    "memfile id",
    "memfile path",
    "raw front-matter",
]


@pytest.mark.parametrize("shape", SMUGGLED)
def test_a_secret_outside_the_content_is_refused_naming_the_record_and_the_field(
    shape: str, src: Vault, dst: Vault, tmp_path: Path
) -> None:
    """QA: a token in a field Synapse does not know, in `extra` (nested too) or in a raw record's front-matter
    was written; every importer refuses secrets wherever they are written (docs/secrets.md)."""
    token = github_token()
    path, record, field = _smuggled(shape, src, tmp_path, token)
    commits, files = commit_count(dst.root), mind_files(dst)
    agent = Vault.open(dst.root, MIND, source="agent")
    for importer in (dst, agent):
        for dry_run in (True, False):
            with pytest.raises(SecretFound) as refusal:
                importer.import_(path, dry_run=dry_run)
            message = str(refusal.value)
            assert record in message and field in message, message
            assert token[6:-6] not in message
    untouched(dst, commits, files)
    result = fails(in_vault(dst.root, "import", path, env={"MEMFILE_SOURCE": "agent"}), 2)
    assert record in result.stderr and field in result.stderr
    untouched(dst, commits, files)
    with pytest.raises(Refused, match="only a person"):  # --allow-secret is a person's only
        agent.import_(path, allow_secret=True)
    report = dst.import_(path, allow_secret=True)
    assert len(report.created) == 2
    warned = [n for n in report.notices if "written anyway" in n]
    assert len(warned) == 1 and record in warned[0] and field in warned[0] and token[6:-6] not in warned[0]
    assert dst.import_(path).unchanged == 2  # what stays as it is in the mind is not refused again


def test_a_secret_a_person_left_in_an_unknown_key_does_not_stop_importing_the_memory_again(
    dst: Vault, tmp_path: Path
) -> None:
    """What is written is scanned, not what stays: a hand edit's token in `links` (a person's own decision,
    warned about) does not refuse an import that leaves the key as it is, or changes the content only."""
    token = github_token()
    write(dst.mind_dir / "fact" / "office_hours.md", HAND_MADE.replace("https://example.com/hours", token))
    commit_by_hand(dst.root, f"{MIND}/fact/office_hours.md")
    dst.export(tmp_path / "export.jsonl")
    dst.export(tmp_path / "export.json", format="json")
    assert dst.import_(tmp_path / "export.jsonl").unchanged == 1
    assert dst.import_(tmp_path / "export.json", on_conflict="overwrite").unchanged == 1
    memories = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
    memories[0] |= {"content": "Open 9 to 5 now.", "updated_at": later()}
    report = dst.import_(synapse_file(tmp_path / "changed.json", memories))
    assert report.updated == ["fact/office_hours"] and dst.get("office_hours").content == "Open 9 to 5 now."
    assert token in (dst.mind_dir / "fact" / "office_hours.md").read_text(encoding="utf-8")


def test_secrets_outside_the_content_are_found_in_unknown_keys_raw_texts_and_tags(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    """The unknown keys, raw texts and tags are scanned too: the refusal names the record and the field."""
    token = github_token()
    memories = [{"category": "fact", "key": f"k{i}", "content": f"Plain fact {i}.", "n": i} for i in range(30)]
    memories[17]["extra"] = {"ci": [f"token {token}"]}
    with pytest.raises(SecretFound, match=r"record 18, .*front-matter key 'ci'"):
        dst.import_(synapse_file(tmp_path / "in.json", memories))
    path, _, _ = _smuggled("raw front-matter", src, tmp_path, token)
    with pytest.raises(SecretFound, match=r"record 2 .*raw"):
        dst.import_(path)
    memories[17] = {"category": "fact", "key": "k17", "content": "Plain.", "tags": [f"ci {token.lower()}"]}
    with pytest.raises(SecretFound, match=r"record 18, .*: a tag"):
        dst.import_(synapse_file(tmp_path / "in.json", memories))
    assert dst.list() == []


@pytest.mark.parametrize("raw", [False, True], ids=["fields", "raw"])
@pytest.mark.parametrize("who", ["user", "agent"])
def test_an_import_never_moves_a_memory_to_another_category_or_key(
    who: str, raw: bool, dst: Vault, tmp_path: Path
) -> None:
    """QA: a record with a memory's id under another category/key rewrote that file in place (misplaced, and
    the old REF gone). Keys never change (SPEC 2): it is a conflict, reported, the rest imported (exit 4)."""
    with dst.acting_as(who) as vault:
        kept = vault.store("note", "sec3", "The original text").memory
    header, *records, _ = exported(dst, raw=raw)
    moved = dict(records[0], category="fact", key="moved", content="m", updated_at=later())
    moved["path"] = f"{MIND}/fact/moved.md"
    if raw:
        text = (
            moved["raw"]
            .replace("category: note", "category: fact")
            .replace("key: sec3", "key: moved")
            .replace("The original text", "m")
            .replace(f"updated_at: {records[0]['updated_at']}", f"updated_at: {moved['updated_at']}")
        )
        moved |= {"raw": text, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    other = {"type": "memory", "category": "fact", "key": "other", "content": "Goes in"}
    path = export_file(tmp_path / "export.jsonl", closed(header, [moved, other]))
    before = (dst.mind_dir / "note" / "sec3.md").read_bytes()
    importer = Vault.open(dst.root, MIND, source=who)
    for mode in ("newer", "overwrite"):
        report = importer.import_(path, on_conflict=mode, dry_run=True)
        assert report.updated == [] and [c["ref"] for c in report.conflicts] == ["fact/moved"]
        reason = report.conflicts[0]["reason"]
        assert "note/sec3" in reason and "does not move" in reason and kept.id in reason
    result = fails(in_vault(dst.root, "import", path, "--on-conflict", "overwrite", env={"MEMFILE_SOURCE": who}), 4)
    assert "note/sec3" in result.stdout and "fact/other" in result.stdout
    assert (dst.mind_dir / "note" / "sec3.md").read_bytes() == before
    assert not (dst.mind_dir / "fact" / "moved.md").exists()
    assert dst.get("note/sec3").id == kept.id and dst.get("fact/other").content == "Goes in"
    assert not [f for f in dst.doctor().findings if f.kind == "misplaced"]


@pytest.mark.parametrize("name", ["created_at", "updated_at"])
@pytest.mark.parametrize("who", ["user", "agent"])
def test_a_date_more_than_a_day_ahead_is_refused(who: str, name: str, dst: Vault, tmp_path: Path) -> None:
    """A record from the future (2030) would win every `newer` import and sync merge until then: refused for
    anyone's import, naming the record and the field; another machine's clock a few hours ahead is fine."""
    importer = Vault.open(dst.root, MIND, source=who)
    memories = [
        {"category": "fact", "key": "fine", "content": "Today"},
        {"category": "fact", "key": "ahead", "content": "From 2030", name: "2030-01-01T00:00:00Z"},
    ]
    commits, files = commit_count(dst.root), mind_files(dst)
    with pytest.raises(InvalidInput) as refusal:
        importer.import_(synapse_file(tmp_path / "in.json", memories))
    assert name in str(refusal.value) and "memories[1]" in str(refusal.value) and "future" in str(refusal.value)
    untouched(dst, commits, files)
    memories[1][name] = later()
    if name == "created_at":
        memories[1]["updated_at"] = memories[1][name]
    assert len(importer.import_(synapse_file(tmp_path / "in.json", memories)).created) == 2


@pytest.mark.parametrize("shape", ["as exported", "without memfile's fields"])
def test_reimporting_a_synapse_json_export_with_overwrite_changes_nothing(
    shape: str, src: Vault, tmp_path: Path
) -> None:
    """QA: `export --format json` then `import --on-conflict overwrite` dropped the unknown keys of a hand-made
    file and `status: superseded` (the old memory came back into recall). The json export now carries them,
    and a record that gives none (a Synapse client's, an older export) keeps the file's."""
    src.export(tmp_path / "export.json", format="json")
    memories = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
    hand = next(m for m in memories if m["key"] == "office_hours")
    old = next(m for m in memories if m["key"] == "old_phone")
    assert hand["extra"] == {"aliases": ["hours", "opening"], "links": ["https://example.com/hours"]}
    assert old["status"] == "superseded" and old["superseded_by"]
    if shape != "as exported":
        for memory in memories:
            for name in ("status", "superseded_by", "extra"):
                memory.pop(name)
    path = synapse_file(tmp_path / "in.json", memories)
    commits, files = commit_count(src.root), mind_files(src)
    report = src.import_(path, on_conflict="overwrite")
    assert report.updated == [] and report.unchanged == 6 and report.commit is None
    untouched(src, commits, files)
    assert "old_phone" not in src.recall()


def test_a_synapse_json_export_into_an_empty_vault_keeps_status_and_unknown_keys(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    src.export(tmp_path / "export.json", format="json")
    report = dst.import_(tmp_path / "export.json")
    assert len(report.created) == 6
    ours = {m.id: comparable(m.to_dict()) | {"path": None} for m in dst.memories()}
    theirs = {m.id: comparable(m.to_dict()) | {"path": None} for m in src.memories()}
    for memory in theirs.values():
        memory["has_front_matter"] = True  # the hand-made file's derived id now written down
    assert {k: {n: v for n, v in m.items() if n != "id_derived"} for k, m in ours.items()} == {
        k: {n: v for n, v in m.items() if n != "id_derived"} for k, m in theirs.items()
    }


def test_an_update_keeps_the_files_unknown_keys_and_status_unless_the_record_gives_them(
    src: Vault, tmp_path: Path
) -> None:
    """SPEC 2: unknown keys are kept on every rewrite, in their order; a record's own replace them by name."""
    src.export(tmp_path / "export.json", format="json")
    memories = {m["key"]: m for m in json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))}
    hand, old = memories["office_hours"], memories["old_phone"]
    for memory in (hand, old):
        for name in ("status", "superseded_by", "extra"):
            memory.pop(name)
        memory["content"] += " (changed)"
    report = src.import_(synapse_file(tmp_path / "changed.json", [hand, old]), on_conflict="overwrite")
    assert sorted(report.updated) == ["fact/office_hours", "fact/old_phone"]
    text = (src.mind_dir / "fact" / "office_hours.md").read_text(encoding="utf-8")
    assert "aliases: [hours, opening]   # an inline comment" in text and "links:" in text
    assert src.get("office_hours").content.endswith("(changed)")
    assert src.get("old_phone").superseded and src.get("old_phone").content.endswith("(changed)")
    hand |= {"content": "Given keys", "extra": {"aliases": ["hours"], "floor": 3}}
    old |= {"content": "Back in recall", "status": "active", "superseded_by": None}
    src.import_(synapse_file(tmp_path / "given.json", [hand, old]), on_conflict="overwrite")
    extra = src.get("office_hours").extra
    assert [name for name, _ in extra] == ["aliases", "links", "floor"]
    assert dict(extra)["aliases"] == ["hours"] and dict(extra)["links"] == ["https://example.com/hours"]
    assert not src.get("old_phone").superseded and "Back in recall" in src.recall()


def test_a_mind_id_and_path_of_another_mind_say_where_a_record_came_from(
    src: Vault, dst: Vault, tmp_path: Path
) -> None:
    """QA: a record naming mind alice (`mind_id`, `path`) went into michael without a word. That is what an
    import does (into its own mind only); the report says so."""
    memories = [
        {"category": "fact", "key": "t", "content": "From Alice", "path": "alice/fact/t.md", "mind_id": "alice"}
    ]
    report = dst.import_(synapse_file(tmp_path / "in.json", memories))
    assert report.created == ["fact/t"] and (dst.mind_dir / "fact" / "t.md").exists()
    assert not (dst.root / "alice").exists()
    assert any("'path'" in line for line in report.unmapped)
    assert any("mind alice" in n and f"mind {MIND}" in n for n in report.notices), report.notices
    work = Vault.init(src.root, "work", "Work")
    work.store("project", "roadmap", "Ship export in Q1")
    work.export(tmp_path / "work.jsonl")
    report = dst.import_(tmp_path / "work.jsonl")
    assert report.created == ["project/roadmap"] and (dst.mind_dir / "project" / "roadmap.md").exists()
    assert any("mind work" in n for n in report.notices), report.notices


def test_a_synapse_file_of_several_minds_is_imported_one_mind_at_a_time(src: Vault, dst: Vault, tmp_path: Path) -> None:
    Vault.init(src.root, "work", "Work").store("project", "roadmap", "Ship export in Q1")
    src.export(tmp_path / "all.json", format="json", all_minds=True)
    commits = commit_count(dst.root)
    with pytest.raises(InvalidInput, match="from.mind"):
        dst.import_(tmp_path / "all.json")
    with pytest.raises(InvalidInput, match="nobody"):
        dst.import_(tmp_path / "all.json", from_mind="nobody")
    assert commit_count(dst.root) == commits
    assert dst.import_(tmp_path / "all.json", from_mind="work").created == ["project/roadmap"]


def test_a_record_without_mind_id_has_a_path_in_a_mind_the_file_names(src: Vault, dst: Vault, tmp_path: Path) -> None:
    """A raw record's path must stay in its mind: with no mind_id, that is a mind the header names (or this one)."""
    header, record = _raw_record(src, "fact/office")
    record.pop("mind_id")
    path = export_file(tmp_path / "other.jsonl", closed(header, [dict(record, path="alice/fact/office.md")]))
    result = fails(in_vault(dst.root, "import", path), 2)
    assert "path" in result.stderr
    assert dst.list() == []
    assert dst.import_(export_file(tmp_path / "own.jsonl", closed(header, [record]))).created == ["fact/office"]


def test_an_id_is_a_memorys_within_its_mind(src: Vault, tmp_path: Path) -> None:
    """Ids are resolved within a mind (SPEC 1: minds are isolated; doctor's duplicate_id is per mind): a
    mind's export imported into another mind of the same vault keeps its ids, and each mind reads its own."""
    src.export(tmp_path / "export.jsonl")
    work = Vault.init(src.root, "work", "Work")
    assert len(work.import_(tmp_path / "export.jsonl").created) == 6
    office = src.get("fact/office")
    assert work.get(office.id).path == f"work/{office.category}/{office.key}.md"
    assert src.get(office.id).path == office.path
    assert not [f for f in work.doctor().findings if f.kind == "duplicate_id"]
