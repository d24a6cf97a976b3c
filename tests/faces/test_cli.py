"""The command line: click's CliRunner on `memfile.cli.main`, plus a few real `python -m memfile` processes."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import Result
from helpers import (
    BROKEN,
    HAND_MADE,
    REPO,
    SAMPLE_VAULT,
    commit_by_hand,
    commit_count,
    fails,
    files_outside_git,
    git,
    in_vault,
    last_subject,
    ok,
    plain_vault,
    run,
    write,
)

from memfile import Vault

CATEGORIES = ("identity", "preference", "fact", "project", "skill", "mistake", "context", "note")


def store_json(root: Path, *args: str, **kwargs) -> dict:
    return json.loads(ok(in_vault(root, "store", *args, "--json", **kwargs)).stdout)


def first_line(result: Result) -> str:
    return result.stdout.splitlines()[0]


@pytest.fixture
def two_minds(root: Path) -> Path:
    Vault.init(root, "bot", "Helper Bot")
    return root


# --- init --------------------------------------------------------------------------------------


def test_init_creates_config_mind_gitignore_and_repository(tmp_path: Path) -> None:
    target = tmp_path / "new"
    result = ok(run("init", target, "--mind", "michael", "--name", "Michael's Mind"))
    assert "michael" in result.stdout
    assert (target / "memfile.toml").is_file()
    assert (target / "michael").is_dir()
    assert ".memfile/" in (target / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert git(target, "log", "--format=%s").splitlines() == ["init mind michael"]
    assert git(target, "ls-files").split() == [".gitattributes", ".gitignore", "memfile.toml", "michael/.gitkeep"]
    assert git(target, "status", "--porcelain").strip() == ""
    assert first_line(ok(in_vault(target, "recall"))) == "Mind: Michael's Mind"


def test_init_twice_with_the_same_mind_exits_4(tmp_path: Path) -> None:
    target = tmp_path / "new"
    ok(run("init", target, "--mind", "michael"))
    before = commit_count(target)
    result = fails(run("init", target, "--mind", "michael"), 4)
    assert "already exists" in result.stderr
    assert commit_count(target) == before


def test_init_second_mind_into_existing_vault(root: Path) -> None:
    before = commit_count(root)
    ok(run("init", root, "--mind", "bot", "--name", "Helper Bot"))
    assert (root / "bot").is_dir()
    assert commit_count(root) == before + 1
    assert first_line(ok(in_vault(root, "--mind", "bot", "recall"))) == "Mind: Helper Bot"
    assert first_line(ok(in_vault(root, "recall"))) == "Mind: Michael's Mind"


# --- vault and mind selection -----------------------------------------------------------------


def test_vault_option(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert first_line(ok(run("--vault", root, "recall"))) == "Mind: Michael's Mind"


def test_memfile_vault_env(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert first_line(ok(run("recall", env={"MEMFILE_VAULT": str(root)}))) == "Mind: Michael's Mind"


def test_vault_option_beats_env(root: Path, sample_copy: Path) -> None:
    ok(in_vault(root, "store", "fact", "only_here", "x"))
    result = ok(run("--vault", root, "show", "only_here", env={"MEMFILE_VAULT": str(sample_copy)}))
    assert "key: only_here" in result.stdout


def test_nearest_parent_holding_memfile_toml(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(in_vault(root, "store", "fact", "a", "found from a subfolder"))
    monkeypatch.chdir(root / "michael" / "fact")
    result = ok(run("show", "fact/a"))
    assert result.stdout.rstrip().endswith("found from a subfolder")


def test_mind_option(two_minds: Path) -> None:
    assert first_line(ok(in_vault(two_minds, "--mind", "bot", "recall"))) == "Mind: Helper Bot"


def test_memfile_mind_env(two_minds: Path) -> None:
    assert first_line(ok(in_vault(two_minds, "recall", env={"MEMFILE_MIND": "bot"}))) == "Mind: Helper Bot"


def test_mind_option_beats_env(two_minds: Path) -> None:
    result = ok(in_vault(two_minds, "--mind", "michael", "recall", env={"MEMFILE_MIND": "bot"}))
    assert first_line(result) == "Mind: Michael's Mind"


def test_memfiles_own_options_may_follow_the_command(two_minds: Path, tmp_path: Path) -> None:
    """--vault, --mind, --debug and --json after the command as before it (`memfile recall --mind bot`)."""
    assert first_line(ok(run("recall", "--vault", two_minds, "--mind", "bot"))) == "Mind: Helper Bot"
    assert first_line(ok(run("recall", f"--vault={two_minds}", "--mind=bot"))) == "Mind: Helper Bot"
    assert first_line(ok(in_vault(two_minds, "--mind", "michael", "recall", "--mind", "bot"))) == "Mind: Helper Bot"
    ok(run("store", "fact", "where", "in the kitchen", "--mind", "bot", "--vault", two_minds))
    assert "key: where" in ok(in_vault(two_minds, "--mind", "bot", "show", "fact/where")).stdout
    debugged = in_vault(two_minds, "show", "nosuch", "--debug")
    assert debugged.exit_code == 3 and "Traceback" in debugged.stderr
    before, after = ok(in_vault(two_minds, "list", "--json")), ok(in_vault(two_minds, "--json", "list"))
    assert json.loads(after.stdout) == json.loads(before.stdout)
    ok(run("remote", "add", tmp_path / "elsewhere.git", "--vault", two_minds))
    assert json.loads(ok(run("search", "kitchen", "--json", "--mind", "bot", "--vault", two_minds)).stdout)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["init", "{tmp}/new", "--vault", "{vault}"], "init takes no --vault: it makes the vault at PATH"),
        (["merge-file", "a", "b", "c", "d", "--mind", "x"], "merge-file takes no --mind: git runs it"),
        (["--vault", "{vault}", "watch", "--json"], "watch has no --json output; see main watch --help"),
        (["--vault", "{vault}", "--json", "recall"], "recall has no --json output; see main recall --help"),
        (
            ["--vault", "{vault}", "--json", "key", "list"],
            "--json goes after the command here: main key COMMAND --json",
        ),
    ],
)
def test_an_option_of_memfiles_own_a_command_cannot_take_says_why(
    root: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    result = fails(run(*(a.format(tmp=tmp_path, vault=root) for a in args)), 2)
    assert says in result.stderr and "No such option" not in result.stderr
    assert not (tmp_path / "new").exists()


def test_default_mind_from_memfile_toml(two_minds: Path) -> None:
    assert first_line(ok(in_vault(two_minds, "recall"))) == "Mind: Michael's Mind"


def test_the_only_mind_folder(tmp_path: Path) -> None:
    root = plain_vault(tmp_path / "v", "", solo={"fact/x": "a fact"})
    result = ok(in_vault(root, "recall"))
    assert first_line(result) == "Mind: solo"
    assert "a fact" in result.stdout


def test_no_vault_exits_7_and_says_memfile_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    result = fails(run("list"), 7)
    assert "memfile init" in result.stderr
    assert result.stdout == ""


def test_missing_vault_folder_exits_7(tmp_path: Path) -> None:
    result = fails(run("--vault", tmp_path / "nowhere", "list"), 7)
    assert "memfile init" in result.stderr


def test_unknown_mind_exits_3(root: Path) -> None:
    result = fails(in_vault(root, "--mind", "ghost", "list"), 3)
    assert "ghost" in result.stderr


def test_unknown_mind_from_env_exits_3(root: Path) -> None:
    fails(in_vault(root, "list", env={"MEMFILE_MIND": "ghost"}), 3)


def test_several_minds_and_no_default_exits_2(tmp_path: Path) -> None:
    root = plain_vault(tmp_path / "v", "", alpha={}, beta={})
    result = fails(in_vault(root, "list"), 2)
    assert "alpha" in result.stderr and "beta" in result.stderr
    assert "--mind" in result.stderr


# --- store ------------------------------------------------------------------------------------


def test_store_creates_file_and_prints_id_and_path(root: Path) -> None:
    result = ok(in_vault(root, "store", "fact", "office_city", "The office is in Berlin."))
    match = re.fullmatch(r"\w+ (mem_[0-9a-z]+) (michael/fact/office_city\.md)", result.stdout.strip())
    assert match, result.stdout
    path = root / match.group(2)
    assert path.is_file()
    text = path.read_text(encoding="utf-8")
    assert f"id: {match.group(1)}\n" in text
    assert text.endswith("The office is in Berlin.\n")


def test_store_json_gives_the_whole_memory(root: Path) -> None:
    data = store_json(root, "project", "synapse_status", "v1.5.0 deployed", "--priority", "high", "--tag", "synapse")
    assert data["id"].startswith("mem_")
    assert data["category"] == "project"
    assert data["key"] == "synapse_status"
    assert data["content"] == "v1.5.0 deployed"
    assert data["priority"] == "high"
    assert data["tags"] == ["synapse"]
    assert data["source"] == "user"
    assert data["verified"] is True
    assert data["confidence"] == 1.0
    assert data["expires_at"] is None
    assert data["path"] == "michael/project/synapse_status.md"
    assert data["created_at"] == data["updated_at"]
    assert data["created_at"].endswith("Z")


def test_store_content_from_stdin_when_omitted(root: Path) -> None:
    ok(in_vault(root, "store", "note", "piped", input="Piped in\non two lines\n"))
    assert json.loads(ok(in_vault(root, "show", "note/piped", "--json")).stdout)["content"] == "Piped in\non two lines"


def test_store_content_from_stdin_with_dash(root: Path) -> None:
    ok(in_vault(root, "store", "note", "dashed", "-", input="From the dash\n"))
    assert json.loads(ok(in_vault(root, "show", "note/dashed", "--json")).stdout)["content"] == "From the dash"


def test_store_empty_content_exits_2(root: Path) -> None:
    result = fails(in_vault(root, "store", "note", "empty", input=""), 2)
    assert "content" in result.stderr
    assert not (root / "michael" / "note" / "empty.md").exists()


def test_store_tags_repeatable_comma_split_lowercased(root: Path) -> None:
    data = store_json(root, "fact", "a", "text", "--tag", "Alpha,BETA", "--tag", "gamma", "--tag", "alpha")
    assert data["tags"] == ["alpha", "beta", "gamma"]
    assert "tags: [alpha, beta, gamma]" in (root / "michael" / "fact" / "a.md").read_text(encoding="utf-8")


def test_store_refuses_more_than_100_tags_by_their_count(root: Path) -> None:
    tags = [f"t{i}" for i in range(40_000)]
    result = fails(in_vault(root, "store", "fact", "many", "text", "--tag", ",".join(tags)), 2)
    assert "invalid tags '40000 tags'; allowed: at most 100 tags per memory" in result.stderr
    result = fails(in_vault(root, "store", "fact", "many", "text", *(f"--tag={t}" for t in tags[:101])), 2)
    assert "'101 tags'" in result.stderr and not (root / "michael" / "fact" / "many.md").exists()
    assert store_json(root, "fact", "many", "text", *(f"--tag={t}" for t in tags[:100]))["tags"] == tags[:100]


def test_store_priority_confidence_source(root: Path) -> None:
    data = store_json(
        root, "project", "p", "text", "--priority", "critical", "--confidence", "0.42", "--source", "agent"
    )
    assert (data["priority"], data["confidence"], data["source"], data["verified"]) == (
        "critical",
        0.42,
        "agent",
        False,
    )


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
    ],
)
def test_store_expires_duration(root: Path, text: str, delta: timedelta) -> None:
    before = datetime.now(timezone.utc)
    data = store_json(root, "context", "trip", "away", "--expires", text)
    after = datetime.now(timezone.utc)
    expires = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00"))
    assert before + delta - timedelta(seconds=2) <= expires <= after + delta + timedelta(seconds=2)


def test_store_expires_iso(root: Path) -> None:
    assert store_json(root, "context", "trip", "away", "--expires", "2031-05-06T07:08:09Z")["expires_at"] == (
        "2031-05-06T07:08:09Z"
    )
    assert store_json(root, "context", "day", "away", "--expires", "2031-05-06")["expires_at"] == "2031-05-06T00:00:00Z"


def test_store_expires_never(root: Path) -> None:
    store_json(root, "context", "trip", "away", "--expires", "7d")
    assert store_json(root, "context", "trip", "away", "--expires", "never")["expires_at"] is None


def test_store_updates_in_place_keeping_id_created_extras_and_comments(root: Path) -> None:
    path = write(root / "michael" / "fact" / "office_hours.md", HAND_MADE)
    commit_by_hand(root, "michael/fact/office_hours.md")
    before = commit_count(root)
    data = store_json(root, "fact", "office_hours", "Office hours: 10-18.", "--priority", "high")
    assert data["id"] == "mem_handmade0001"
    assert data["created_at"] == "2020-01-01T08:00:00Z"
    assert data["updated_at"] > "2020-01-02T08:00:00Z"
    assert data["extra"]["aliases"] == ["hours", "opening"]
    assert commit_count(root) == before + 1
    assert [p.name for p in path.parent.iterdir()] == ["office_hours.md"]
    text = path.read_text(encoding="utf-8")
    assert "id: mem_handmade0001\n" in text
    assert "created_at: 2020-01-01T08:00:00Z\n" in text
    assert "aliases: [hours, opening]   # an inline comment\n" in text
    assert "# a comment kept by memfile\n" in text
    assert 'links:\n  - "https://example.com/hours"\n' in text
    assert text.endswith("---\nOffice hours: 10-18.\n")


def test_store_update_keeps_body_formatting(root: Path) -> None:
    path = write(root / "michael" / "fact" / "office_hours.md", HAND_MADE)
    commit_by_hand(root, "michael/fact/office_hours.md")
    content = json.loads(ok(in_vault(root, "show", "fact/office_hours", "--json")).stdout)["content"]
    ok(in_vault(root, "store", "fact", "office_hours", content, "--tag", "office", "--tag", "work"))
    body = HAND_MADE.split("---\n", 2)[2]
    assert path.read_text(encoding="utf-8").endswith("---\n" + body)


def test_store_one_commit_per_change_with_message(root: Path) -> None:
    before = commit_count(root)
    ok(in_vault(root, "store", "project", "synapse_status", "v1.5.0"))
    assert commit_count(root) == before + 1
    assert last_subject(root) == "store project/synapse_status (user)"
    ok(in_vault(root, "store", "project", "synapse_status", "v1.6.0"))
    assert commit_count(root) == before + 2
    ok(in_vault(root, "store", "project", "synapse_status", "v1.7.0", "--source", "agent"))
    assert commit_count(root) == before + 3
    assert last_subject(root) == "store project/synapse_status (agent)"
    assert git(root, "status", "--porcelain", "--", "michael").strip() == ""


def test_store_identical_content_makes_no_commit(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "same", "--tag", "x"))
    data = (root / "michael" / "fact" / "a.md").read_bytes()
    before = commit_count(root)
    result = ok(in_vault(root, "store", "fact", "a", "same", "--tag", "x"))
    assert result.stdout.startswith("unchanged ")
    assert commit_count(root) == before
    assert (root / "michael" / "fact" / "a.md").read_bytes() == data


def test_agent_env_stores_agent_unverified_confidence_07(root: Path) -> None:
    data = store_json(root, "project", "p", "observed", env={"MEMFILE_SOURCE": "agent"})
    assert (data["source"], data["verified"], data["confidence"]) == ("agent", False, 0.7)
    assert last_subject(root) == "store project/p (agent)"


def test_agent_may_not_pass_source_user(root: Path) -> None:
    before = commit_count(root)
    result = fails(in_vault(root, "store", "fact", "a", "text", "--source", "user", env={"MEMFILE_SOURCE": "agent"}), 2)
    assert "agent" in result.stderr
    assert commit_count(root) == before
    assert not (root / "michael" / "fact" / "a.md").exists()


# --- hand edits -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("store", "fact", "a", "replaced by store"), ("forget", "fact/a"), ("verify", "fact/a")],
    ids=["store", "forget", "verify"],
)
def test_hand_edit_is_committed_first(root: Path, command: tuple[str, ...]) -> None:
    ok(in_vault(root, "store", "fact", "a", "original", "--source", "agent"))
    path = root / "michael" / "fact" / "a.md"
    path.write_text(path.read_text(encoding="utf-8") + "HAND EDITED LINE\n", encoding="utf-8")
    before = commit_count(root)
    ok(in_vault(root, *command))
    assert commit_count(root) == before + 2
    assert "+HAND EDITED LINE" in git(root, "log", "-p", "--all", "--", "michael/fact/a.md")
    assert git(root, "status", "--porcelain").strip() == ""


def test_untracked_hand_made_file_is_committed_before_overwrite(root: Path) -> None:
    path = write(root / "michael" / "fact" / "handmade.md", "A hand-made fact, never committed.\n")
    before = commit_count(root)
    ok(in_vault(root, "store", "fact", "handmade", "Now stored by memfile."))
    assert commit_count(root) == before + 2
    assert "+A hand-made fact, never committed." in git(root, "log", "-p", "--", "michael/fact/handmade.md")
    assert path.read_text(encoding="utf-8").endswith("Now stored by memfile.\n")


# --- show -------------------------------------------------------------------------------------


def test_show_by_id_category_key_and_unique_key(root: Path) -> None:
    stored = store_json(root, "preference", "answer_style", "Concise answers.", "--tag", "style")
    for ref in (stored["id"], "preference/answer_style", "answer_style"):
        result = ok(in_vault(root, "show", ref))
        assert f"id: {stored['id']}" in result.stdout
        assert result.stdout.rstrip().endswith("Concise answers.")
        assert json.loads(ok(in_vault(root, "show", ref, "--json")).stdout)["id"] == stored["id"]


def test_show_ambiguous_key_exits_2_listing_both(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "berlin", "a city"))
    ok(in_vault(root, "store", "note", "berlin", "a note"))
    result = fails(in_vault(root, "show", "berlin"), 2)
    assert "fact/berlin" in result.stderr and "note/berlin" in result.stderr
    assert result.stdout == ""


def test_show_not_found_exits_3(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "text"))
    for ref in ("nothing", "fact/nothing", "mem_0000000000zzzz"):
        fails(in_vault(root, "show", ref), 3)


# --- list -------------------------------------------------------------------------------------


@pytest.fixture
def filled(root: Path) -> Path:
    ok(in_vault(root, "store", "fact", "f1", "fact one", "--tag", "a,b", "--priority", "high"))
    ok(in_vault(root, "store", "fact", "f2", "fact two", "--tag", "a", "--source", "agent"))
    ok(in_vault(root, "store", "project", "p1", "project one", "--tag", "b", "--priority", "low"))
    ok(
        in_vault(
            root,
            "store",
            "note",
            "old",
            "expired note",
            "--tag",
            "a",
            "--tag",
            "b",
            "--expires",
            "2020-01-01T00:00:00Z",
        )
    )
    return root


def listed(root: Path, *options: str) -> list[str]:
    data = json.loads(ok(in_vault(root, "list", *options, "--json")).stdout)
    return [f"{m['category']}/{m['key']}" for m in data]


def test_list_text_hides_expired(filled: Path) -> None:
    result = ok(in_vault(filled, "list"))
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["fact/f1", "fact/f2", "project/p1"]
    assert "michael/fact/f1.md" in lines[0]
    assert "note/old" not in result.stdout


def test_list_json_hides_expired(filled: Path) -> None:
    assert listed(filled) == ["fact/f1", "fact/f2", "project/p1"]


def test_list_include_expired(filled: Path) -> None:
    assert listed(filled, "--include-expired") == ["fact/f1", "fact/f2", "note/old", "project/p1"]


def test_list_category(filled: Path) -> None:
    assert listed(filled, "--category", "fact") == ["fact/f1", "fact/f2"]


def test_list_tags_are_anded(filled: Path) -> None:
    assert listed(filled, "--tag", "a") == ["fact/f1", "fact/f2"]
    assert listed(filled, "--tag", "A", "--tag", "b") == ["fact/f1"]
    assert listed(filled, "--tag", "a", "--tag", "b", "--include-expired") == ["fact/f1", "note/old"]


def test_list_priority(filled: Path) -> None:
    assert listed(filled, "--priority", "low") == ["project/p1"]


def test_list_source(filled: Path) -> None:
    assert listed(filled, "--source", "agent") == ["fact/f2"]
    assert listed(filled, "--source", "user") == ["fact/f1", "project/p1"]


def test_list_unverified(filled: Path) -> None:
    assert listed(filled, "--unverified") == ["fact/f2"]


def test_list_json_gives_whole_memories(filled: Path) -> None:
    data = json.loads(ok(in_vault(filled, "list", "--category", "project", "--json")).stdout)
    assert data[0]["content"] == "project one"
    assert data[0]["priority"] == "low"
    assert data[0]["path"] == "michael/project/p1.md"


def test_list_nothing_matches_exits_0(filled: Path) -> None:
    result = ok(in_vault(filled, "list", "--tag", "nope"))
    assert result.stdout == ""


# --- forget, verify ---------------------------------------------------------------------------


def test_forget_removes_file_in_one_commit_and_history_keeps_it(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "to be forgotten"))
    before = commit_count(root)
    result = ok(in_vault(root, "forget", "fact/a"))
    assert "michael/fact/a.md" in result.stdout
    assert not (root / "michael" / "fact" / "a.md").exists()
    assert commit_count(root) == before + 1
    assert last_subject(root) == "forget fact/a (user)"
    log = git(root, "log", "--all", "--format=%s", "--", "michael/fact/a.md").splitlines()
    assert log == ["forget fact/a (user)", "store fact/a (user)"]
    assert "to be forgotten" in git(root, "log", "-p", "--all", "--", "michael/fact/a.md")
    fails(in_vault(root, "show", "fact/a"), 3)


def test_verify_sets_verified_in_one_commit(root: Path) -> None:
    ok(in_vault(root, "store", "project", "p", "observed", env={"MEMFILE_SOURCE": "agent"}))
    before = commit_count(root)
    ok(in_vault(root, "verify", "project/p"))
    assert commit_count(root) == before + 1
    assert last_subject(root) == "verify project/p (user)"
    assert json.loads(ok(in_vault(root, "show", "project/p", "--json")).stdout)["verified"] is True
    assert "verified: true" in (root / "michael" / "project" / "p.md").read_text(encoding="utf-8")


def test_agent_verify_is_refused(root: Path) -> None:
    ok(in_vault(root, "store", "project", "p", "observed", env={"MEMFILE_SOURCE": "agent"}))
    before = commit_count(root)
    result = fails(in_vault(root, "verify", "project/p", env={"MEMFILE_SOURCE": "agent"}), 2)
    assert "agent" in result.stderr
    assert commit_count(root) == before
    assert "verified: false" in (root / "michael" / "project" / "p.md").read_text(encoding="utf-8")


def test_verify_already_verified_makes_no_commit(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "text"))
    before = commit_count(root)
    ok(in_vault(root, "verify", "fact/a"))
    assert commit_count(root) == before


@pytest.fixture
def to_forget(root: Path) -> Path:
    """A person's memory and a critical one, an agent's own unverified two and one a person verified, all tagged."""
    ok(in_vault(root, "store", "fact", "office", "Berlin", "--tag", "work"))
    ok(in_vault(root, "store", "preference", "style", "Short", "--tag", "work", "--priority", "critical"))
    for key in ("guess_one", "guess_two", "checked"):
        ok(in_vault(root, "store", "context", key, "a guess", "--tag", "work", env={"MEMFILE_SOURCE": "agent"}))
    ok(in_vault(root, "verify", "context/checked"))
    return root


def test_forget_by_filters_lists_first_then_forgets_in_one_commit(to_forget: Path) -> None:
    root = to_forget
    before = commit_count(root)
    dry = ok(in_vault(root, "forget", "--tag", "work", "--source", "agent", "--unverified", "--dry-run"))
    assert [line.split()[0] for line in dry.stdout.splitlines()[:-1]] == ["context/guess_one", "context/guess_two"]
    assert "would forget 2 memories" in dry.stdout and commit_count(root) == before
    planned = json.loads(ok(in_vault(root, "forget", "--tag", "work", "--dry-run", "--json")).stdout)
    done = ok(in_vault(root, "forget", "--tag", "work", "--yes"))
    assert dry.stdout.splitlines()[0] in done.stdout and "forgot 5 memories in one commit" in done.stdout
    assert commit_count(root) == before + 1 and last_subject(root) == "forget 5 memories (user)"
    assert planned["dry_run"] is True and len(planned["forgotten"]) == 5
    assert not list((root / "michael").glob("*/*.md"))
    again = json.loads(ok(in_vault(root, "forget", "--tag", "work", "--yes", "--json")).stdout)
    assert again == {"dry_run": False, "commit": None, "forgotten": [], "left_out": []}
    assert commit_count(root) == before + 1


def test_an_agents_forget_by_filters_leaves_a_persons_verified_and_critical_memories(to_forget: Path) -> None:
    root, agent = to_forget, {"MEMFILE_SOURCE": "agent"}
    result = ok(in_vault(root, "forget", "--tag", "work", "--yes", "--json", env=agent))
    report = json.loads(result.stdout)
    assert [m["key"] for m in report["forgotten"]] == ["guess_one", "guess_two"]
    assert [m["key"] for m in report["left_out"]] == ["checked", "office", "style"]
    assert last_subject(root) == "forget 2 memories (agent)"
    for kept in ("fact/office.md", "preference/style.md", "context/checked.md"):
        assert (root / "michael" / kept).exists(), kept
    text = ok(in_vault(root, "forget", "--category", "fact", "--yes", env=agent))
    assert "left out 1 memory an agent may not forget" in text.stderr and "fact/office" in text.stderr
    refused = fails(in_vault(root, "forget", "--source", "user", "--yes", env=agent), 2)
    assert "only its own unverified memories" in refused.stderr
    assert (root / "michael" / "fact" / "office.md").exists()


def test_forget_refuses_a_ref_with_filters_no_filter_and_no_terminal_without_yes(to_forget: Path) -> None:
    root = to_forget
    head = git(root, "rev-parse", "HEAD")
    both = fails(in_vault(root, "forget", "fact/office", "--tag", "work"), 2)
    assert "a REF or filters" in both.stderr and "not both" in both.stderr
    nothing = fails(in_vault(root, "forget"), 2)
    assert "at least one filter" in nothing.stderr and "--older-than" in nothing.stderr
    fails(in_vault(root, "forget", "--dry-run"), 2)
    piped = fails(in_vault(root, "forget", "--tag", "work", input="y\n"), 2)
    assert "no terminal" in piped.stderr and "--yes" in piped.stderr and "--dry-run" in piped.stderr
    assert "fact/office" in piped.stdout  # the list was shown first
    bad = fails(in_vault(root, "forget", "--older-than", "soon", "--yes"), 2)
    assert "older_than" in bad.stderr or "older-than" in bad.stderr
    assert git(root, "rev-parse", "HEAD") == head
    one = ok(in_vault(root, "forget", "fact/office", "--dry-run"))
    assert "would forget 1 memory" in one.stdout and git(root, "rev-parse", "HEAD") == head
    ok(in_vault(root, "forget", "fact/office"))  # a REF alone forgets at once, as ever
    assert last_subject(root) == "forget fact/office (user)"


def test_forget_by_filters_asks_on_a_terminal(to_forget: Path) -> None:
    import pty

    root = to_forget

    def answer(reply: bytes) -> bytes:
        master, slave = pty.openpty()
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "memfile", "--vault", str(root), "forget", "--source", "agent"],
                stdin=slave,
                stdout=slave,
                stderr=slave,
            )
        finally:
            os.close(slave)
        out = b""
        while b"[y/N]" not in out:
            out += os.read(master, 4096)
        os.write(master, reply)
        process.wait(60)
        try:
            while chunk := os.read(master, 4096):
                out += chunk
        except OSError:  # the terminal closed with the process
            pass
        os.close(master)
        assert process.returncode == 0, out
        return out

    before = commit_count(root)
    said = answer(b"n\n")
    assert b"Forget these 3 memories?" in said and b"nothing was forgotten" in said
    assert commit_count(root) == before
    assert b"forgot 3 memories" in answer(b"y\n")
    assert last_subject(root) == "forget 3 memories (user)"


# --- expiring ---------------------------------------------------------------------------------


def test_expiring_within_7d(root: Path) -> None:
    ok(in_vault(root, "store", "context", "in_3d", "soon", "--expires", "3d"))
    ok(in_vault(root, "store", "context", "in_1d", "sooner", "--expires", "1d"))
    ok(in_vault(root, "store", "context", "in_10d", "later", "--expires", "10d"))
    ok(in_vault(root, "store", "context", "forever", "no end"))
    ok(in_vault(root, "store", "context", "past", "gone", "--expires", "2020-01-01"))
    result = ok(in_vault(root, "expiring", "--within", "7d"))
    assert "context/in_1d" in result.stdout and "context/in_3d" in result.stdout
    assert result.stdout.index("context/in_1d") < result.stdout.index("context/in_3d")
    for absent in ("in_10d", "forever", "past"):
        assert absent not in result.stdout
    data = json.loads(ok(in_vault(root, "expiring", "--within", "7d", "--json")).stdout)
    assert [m["key"] for m in data] == ["in_1d", "in_3d"]


# --- edit -------------------------------------------------------------------------------------


def editor(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text("import pathlib, sys\npath = pathlib.Path(sys.argv[1])\n" + body, encoding="utf-8")
    return f'"{sys.executable}" "{script}"'


def test_edit_commits_the_change(root: Path, tmp_path: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "original text"))
    before = commit_count(root)
    command = editor(
        tmp_path,
        "path.write_text(path.read_text(encoding='utf-8')"
        ".replace('original text', 'edited in the editor'), encoding='utf-8')\n",
    )
    ok(in_vault(root, "edit", "fact/a", env={"EDITOR": command}))
    assert commit_count(root) == before + 1
    assert last_subject(root) == "edit fact/a (user)"
    assert git(root, "status", "--porcelain").strip() == ""
    assert "edited in the editor" in git(root, "show", "HEAD:michael/fact/a.md")


def test_edit_breaking_yaml_exits_2_and_keeps_the_file(root: Path, tmp_path: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "original text"))
    before = commit_count(root)
    command = editor(tmp_path, f"path.write_bytes({BROKEN.encode('utf-8')!r})\n")
    result = fails(in_vault(root, "edit", "fact/a", env={"EDITOR": command}), 2)
    assert "michael/fact/a.md:4" in result.stderr
    assert (root / "michael" / "fact" / "a.md").read_bytes() == BROKEN.encode("utf-8")
    assert commit_count(root) == before
    assert git(root, "status", "--porcelain").strip() == "M michael/fact/a.md"
    assert "original text" in git(root, "show", "HEAD:michael/fact/a.md")


# --- recall -----------------------------------------------------------------------------------


def test_recall_sample_vault(sample_copy: Path) -> None:
    result = ok(in_vault(sample_copy, "recall"))
    assert result.stdout.startswith("Mind: Michael's Mind\nMemories: ")
    assert "conference_trip_march" not in result.stdout
    assert "] identity (CRITICAL) [verified]\n  user_name\n" in result.stdout
    headers = re.findall(r"^\[\d+\] \w+ \((\w+)\)", result.stdout, re.MULTILINE)
    assert headers[:2] == ["CRITICAL", "CRITICAL"]
    assert headers == sorted(headers, key=["CRITICAL", "HIGH", "NORMAL", "LOW"].index)


def test_recall_json_parses(sample_copy: Path) -> None:
    data = json.loads(ok(in_vault(sample_copy, "recall", "--format", "json")).stdout)
    keys = [m["key"] for m in data["memories"]]
    assert "user_name" in keys
    assert "conference_trip_march" not in keys


@pytest.mark.parametrize("budget", [150, 300, 600])
def test_recall_budget_is_respected(sample_copy: Path, budget: int) -> None:
    text = ok(in_vault(sample_copy, "recall", "--budget", str(budget))).stdout
    assert math.ceil(len(text) / 4) <= budget
    total = int(re.search(r"Memories: (\d+) total", text).group(1))
    shown = len(re.findall(r"^\[\d+\] ", text, re.MULTILINE))
    assert shown < total
    closing = text.rstrip().splitlines()[-1]
    assert re.search(rf"\b{total - shown} (memories |memory )?left out", closing), closing
    assert "  user_name\n" in text and "  never_delete_db_volume\n" in text


def test_recall_budget_too_small_exits_2(sample_copy: Path) -> None:
    result = fails(in_vault(sample_copy, "recall", "--budget", "5"), 2)
    assert "budget" in result.stderr
    assert result.stdout == ""


# --- bad input --------------------------------------------------------------------------------


BAD_STORE = [
    (("store", "hobby", "k", "x"), "category", CATEGORIES),
    (("store", "fact", "k", "x", "--priority", "urgent"), "priority", ("low", "normal", "high", "critical")),
    (("store", "fact", "../x", "x"), "key", ("snake_case",)),
    (("store", "fact", "a/b", "x"), "key", ("snake_case",)),
    (("store", "fact", "/etc/passwd", "x"), "key", ("snake_case",)),
    (("store", "fact", "Key With Space", "x"), "key", ("snake_case",)),
    (("store", "fact", "k", "x", "--confidence", "1.5"), "confidence", ("0.0", "1.0")),
    (("store", "fact", "k", "x", "--confidence", "sure"), "confidence", ("0.0", "1.0")),
    (("store", "fact", "k", "x", "--expires", "2026-13-45"), "expires", ("ISO-8601", "7d")),
    (("store", "fact", "k", "x", "--expires", "soonish"), "expires", ("ISO-8601", "7d")),
    (("expiring", "--within", "a week"), "within", ("7d",)),
    (("list", "--category", "hobby"), "category", CATEGORIES),
    (("list", "--priority", "urgent"), "priority", ("low", "normal", "high", "critical")),
    (("list", "--source", "robot"), "source", ("user", "agent")),
    (("store", "fact", "k", "x", "--source", "robot"), "source", ("user", "agent")),
]


@pytest.mark.parametrize(("args", "field", "allowed"), BAD_STORE, ids=[" ".join(a[1:3]) for a, _, _ in BAD_STORE])
def test_bad_input_exits_2_naming_field_and_allowed(
    root: Path, tmp_path: Path, args: tuple, field: str, allowed: tuple
) -> None:
    before_files = files_outside_git(tmp_path)
    before = commit_count(root)
    result = fails(in_vault(root, *args), 2)
    assert field in result.stderr
    for value in allowed:
        assert value in result.stderr
    assert files_outside_git(tmp_path) == before_files
    assert commit_count(root) == before


@pytest.mark.parametrize("ref", ["../../etc/passwd", "%2e%2e/x", "/abs", "a/b/c", "fact/../../x"])
@pytest.mark.parametrize("verb", ["show", "forget", "verify", "edit"])
def test_ref_leaving_the_mind_exits_2(root: Path, tmp_path: Path, ref: str, verb: str) -> None:
    ok(in_vault(root, "store", "fact", "x", "text", "--source", "agent"))
    before_files = files_outside_git(tmp_path)
    before = commit_count(root)
    result = fails(in_vault(root, verb, ref, env={"EDITOR": "false"}), 2)
    assert "REF" in result.stderr
    assert "category/key" in result.stderr
    assert files_outside_git(tmp_path) == before_files
    assert commit_count(root) == before


def test_key_leaving_the_mind_writes_nothing_outside(root: Path, tmp_path: Path) -> None:
    before = files_outside_git(tmp_path)
    for key in ("../../escape", "../escape", "/tmp/escape"):
        fails(in_vault(root, "store", "fact", key, "x"), 2)
    assert files_outside_git(tmp_path) == before
    assert not (tmp_path / "escape.md").exists()
    assert not Path("/tmp/escape.md").exists()


# --- malformed files --------------------------------------------------------------------------


def test_malformed_file_is_named_skipped_and_left_unchanged(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "good", "fine"))
    broken = write(root / "michael" / "fact" / "broken.md", BROKEN)
    for args in (("list",), ("recall",), ("expiring",)):
        result = ok(in_vault(root, *args))
        assert "michael/fact/broken.md:4" in result.stderr, args
        assert "Traceback" not in result.stderr
    # Commands that look for one REF read only the files that could hold it.
    for args in (("show", "good"), ("store", "fact", "another", "still works")):
        result = ok(in_vault(root, *args))
        assert "Traceback" not in result.stderr
    result = in_vault(root, "show", "broken")
    assert result.exit_code == 3 and "michael/fact/broken.md:4" in result.stderr
    assert "fact/good" in ok(in_vault(root, "list")).stdout
    assert broken.read_bytes() == BROKEN.encode("utf-8")
    assert "broken.md" not in git(root, "log", "--all", "--name-only", "--format=")


# --- git: nested repository, identity ---------------------------------------------------------


def test_vault_inside_another_repo_gets_its_own(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    write(outer / "README.md", "outer project\n")
    commit_by_hand(outer, "README.md")
    outer_head = git(outer, "rev-parse", "HEAD")
    vault = outer / "notes" / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    result = ok(in_vault(vault, "store", "fact", "nested", "inside another repo"))
    assert "initialized a git repository" in result.stderr
    assert (vault / ".git").exists()
    assert commit_count(outer) == 1
    assert git(outer, "rev-parse", "HEAD") == outer_head
    assert last_subject(vault) == "store fact/nested (user)"
    assert "michael/fact/vps1_server.md" in git(vault, "ls-files")
    again = ok(in_vault(vault, "store", "fact", "nested_2", "second"))
    assert "initialized" not in again.stderr


def test_commits_without_git_identity_use_memfile_author(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "a", "text"))
    assert git(root, "log", "--format=%an <%ae>").splitlines() == ["memfile <memfile@localhost>"] * commit_count(root)


def test_commits_use_author_from_memfile_toml(root: Path) -> None:
    with open(root / "memfile.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[git]\nauthor_name = "Memory Keeper"\nauthor_email = "keeper@example.com"\n')
    ok(in_vault(root, "store", "fact", "a", "text"))
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == "Memory Keeper <keeper@example.com>"


# --- real processes ---------------------------------------------------------------------------


def test_python_m_memfile_recall(sample_copy: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(sample_copy), "recall"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Mind: Michael's Mind\n")
    assert "Traceback" not in proc.stderr


def test_python_m_memfile_bad_input_exit_code(root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), "store", "hobby", "k", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "category" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_read_ends_its_process_at_once_with_all_its_output_and_its_exit_code(root: Path) -> None:
    for i in range(60):  # more output than a pipe holds
        ok(in_vault(root, "store", "fact", f"long_{i}", f"Line {i} " + "of a long memory " * 80))
    command = [sys.executable, "-m", "memfile", "--vault", str(root)]
    whole = subprocess.run([*command, "recall"], capture_output=True, text=True, timeout=60)
    assert whole.returncode == 0 and whole.stderr == ""
    assert whole.stdout == ok(in_vault(root, "recall")).stdout  # every byte, as the in-process command gives
    assert Vault.open(root).last_recall()["total"] == 60
    missing = subprocess.run([*command, "show", "fact/nowhere"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 3 and "nowhere" in missing.stderr and "Traceback" not in missing.stderr
    bad = subprocess.run([*command, "search", "--limit", "0", "memory"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "limit" in bad.stderr


def test_a_read_whose_reader_leaves_early_ends_quietly(root: Path) -> None:
    for i in range(60):
        ok(in_vault(root, "store", "fact", f"long_{i}", "A long memory " * 100))
    shell = f"{sys.executable} -m memfile --vault {root} recall | head -c 10; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "Mind: Mich"
    assert "Error" not in proc.stderr and "Traceback" not in proc.stderr


def test_python_m_memfile_content_from_stdin(root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), "store", "note", "piped"],
        input="piped through a real pipe\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert (root / "michael" / "note" / "piped.md").read_text(encoding="utf-8").endswith("piped through a real pipe\n")


WRITER = """
import os, subprocess, sys, time
root, prefix, go = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 30
while not os.path.exists(go) and time.monotonic() < deadline:  # start both writers together
    time.sleep(0.002)
for i in range(3):
    subprocess.run([sys.executable, "-m", "memfile", "--vault", root, "store", "fact", f"{prefix}_{i}",
                    f"{prefix} number {i}"], check=True)
"""


def test_two_processes_storing_at_once_both_succeed(root: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    before = commit_count(root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), prefix, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("left", "right")
    ]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    keys = [m["key"] for m in json.loads(ok(in_vault(root, "list", "--json")).stdout)]
    assert sorted(keys) == sorted(f"{p}_{i}" for p in ("left", "right") for i in range(3))
    # a store that waited for the lock may share its holder's commit: each one is in exactly one commit
    subjects = git(root, "log", "--format=%s", f"-{commit_count(root) - before}").splitlines()
    stored = [ref for subject in subjects for ref in subject.removeprefix("store ").removesuffix(" (user)").split(", ")]
    assert sorted(stored) == sorted(f"fact/{p}_{i}" for p in ("left", "right") for i in range(3))
    assert git(root, "status", "--porcelain").strip() == ""


# --- debug ------------------------------------------------------------------------------------


def test_debug_shows_a_traceback(root: Path) -> None:
    result = run("--debug", "--vault", root, "show", "nothing")
    assert result.exit_code == 3
    assert "Traceback" in result.stderr


def test_no_traceback_without_debug(root: Path) -> None:
    result = fails(in_vault(root, "show", "nothing"), 3)
    assert "no memory" in result.stderr


# --- review findings: agents, failed commits, odd folders and values ------------------------------

AGENT = {"MEMFILE_SOURCE": "agent"}


def test_an_agent_cannot_change_a_verified_memory(root: Path) -> None:
    ok(in_vault(root, "store", "identity", "user_name", "Michael"))
    path = root / "michael" / "identity" / "user_name.md"
    data, before = path.read_bytes(), commit_count(root)
    result = fails(in_vault(root, "store", "identity", "user_name", "Bob", env=AGENT), 2)
    assert "verified by a person" in result.stderr
    assert path.read_bytes() == data and commit_count(root) == before
    ok(in_vault(root, "store", "identity", "user_name", "Michael", env=AGENT))  # identical: allowed, no change
    assert commit_count(root) == before


def test_an_agent_may_update_an_unverified_memory(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "vps_os", "Ubuntu 22.04", env=AGENT))
    memory = store_json(root, "fact", "vps_os", "Ubuntu 24.04", env=AGENT)
    assert (memory["source"], memory["verified"], memory["content"]) == ("agent", False, "Ubuntu 24.04")


def test_an_agent_cannot_open_the_editor(root: Path, tmp_path: Path) -> None:
    ok(in_vault(root, "store", "fact", "af", "x", env=AGENT))
    result = fails(in_vault(root, "edit", "af", env={**AGENT, "EDITOR": "true"}), 2)
    assert "for people" in result.stderr


def test_store_during_an_unfinished_merge_changes_nothing(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "base", "one"))
    git(root, "checkout", "-q", "-b", "side")
    ok(in_vault(root, "store", "fact", "base", "two"))
    git(root, "checkout", "-q", "main")
    ok(in_vault(root, "store", "fact", "base", "three"))
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=Hand",
            "-c",
            "user.email=hand@example.com",
            "-c",
            "merge.memfile.driver=false",
            "merge",
            "-q",
            "side",
        ],  # a merge git cannot finish
        cwd=root,
        capture_output=True,
    )
    assert (root / ".git" / "MERGE_HEAD").exists()
    result = fails(in_vault(root, "store", "fact", "during_merge", "x"), 6)
    assert "merge --abort" in result.stderr
    assert not (root / "michael" / "fact" / "during_merge.md").exists()


def test_a_failed_commit_puts_the_file_back_and_a_retry_commits(root: Path) -> None:
    hook = write(root / ".git" / "hooks" / "pre-commit", "#!/bin/sh\necho refused by the hook >&2\nexit 1\n")
    hook.chmod(0o755)
    result = fails(in_vault(root, "store", "fact", "lk", "x"), 6)
    assert "git commit failed" in result.stderr and "refused by the hook" in result.stderr
    assert not (root / "michael" / "fact" / "lk.md").exists()
    hook.unlink()
    ok(in_vault(root, "store", "fact", "lk", "x"))
    assert last_subject(root) == "store fact/lk (user)"
    assert git(root, "status", "--porcelain").strip() == ""


def test_a_store_that_died_before_its_commit_is_committed_by_the_retry(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "k", "version one", env=AGENT))
    path = root / "michael" / "fact" / "k.md"
    path.write_text(path.read_text(encoding="utf-8").replace("version one", "version two"), encoding="utf-8")
    ok(in_vault(root, "store", "fact", "k", "version two", env=AGENT))
    assert last_subject(root) == "store fact/k (agent)"
    assert git(root, "status", "--porcelain").strip() == ""


def test_init_in_a_folder_with_files_commits_only_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "michael" / "identity" / "user_name.md", "Michael Schäfer\n")
    result = ok(run("init", folder, "--mind", "bob"))
    assert "initialized a git repository" in result.stderr and "were not committed" in result.stderr
    assert git(folder, "status", "--porcelain").strip() == "?? michael/"
    assert "Michael Schäfer" not in git(folder, "log", "-p")
    assert git(folder, "log", "--format=%s").splitlines() == ["init mind bob"]


def test_init_adopts_a_folder_of_notes_named_as_the_mind(tmp_path: Path) -> None:
    """A folder that is not a vault yet, holding a folder of notes named as the mind: its notes become
    the mind's memories (exit 4 sent the person to a vault that did not exist)."""
    folder = tmp_path / "notes"
    write(folder / "michael" / "identity" / "user_name.md", "Michael Schäfer\n")
    result = ok(run("init", folder, "--mind", "michael"))
    assert "the files already in michael/ are its memories" in result.stderr and "doctor --fix" in result.stderr
    assert "identity/user_name" in ok(in_vault(folder, "list")).stdout
    assert "Michael Schäfer" not in git(folder, "log", "-p")  # committed when asked, not behind the person's back
    ok(in_vault(folder, "doctor", "--fix"))
    assert "Michael Schäfer" in git(folder, "log", "-p") and git(folder, "status", "--porcelain").strip() == ""
    assert "already exists" in fails(run("init", folder, "--mind", "michael"), 4).stderr  # a vault now


def test_init_refuses_an_empty_path_and_a_folder_inside_another_vault(tmp_path: Path) -> None:
    assert "invalid PATH ''" in fails(run("init", ""), 2).stderr
    ok(run("init", tmp_path / "v", "--mind", "alice"))
    inside = fails(run("init", tmp_path / "v" / "alice" / "sub", "--mind", "bob"), 2).stderr
    assert f"is inside the vault {(tmp_path / 'v').resolve()}" in inside and "--mind NAME" in inside
    assert not (tmp_path / "v" / "alice" / "sub").exists()


def test_a_file_with_an_out_of_range_date_is_skipped(root: Path) -> None:
    write(root / "michael" / "note" / "b.md", "---\nexpires_at: 9999-12-31T23:59:59-05:00\n---\nb\n")
    result = ok(in_vault(root, "recall"))
    assert "michael/note/b.md" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("store", "context", "x", "y", "--expires", "3000000d"),
        ("store", "context", "x", "y", "--expires", "9999-12-31T23:59:59-05:00"),
        ("expiring", "--within", "3000000d"),
        ("expiring", "--within", "99999999999w"),
    ],
)
def test_values_out_of_range_are_bad_input(root: Path, args: tuple[str, ...]) -> None:
    err = fails(in_vault(root, *args), 2).stderr
    assert "timedelta" not in err and ("3000000d" in err or "9999-12-31" in err or "w'" in err or "d'" in err), err


def test_a_confidence_of_minus_zero_is_written_as_zero(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "z", "zero", "--confidence", "-0"))
    assert "confidence: 0.0\n" in (root / "michael" / "fact" / "z.md").read_text(encoding="utf-8")


def test_init_on_a_path_below_a_file_is_bad_input(tmp_path: Path) -> None:
    write(tmp_path / "f", "x")
    assert "PATH" in fails(run("init", tmp_path / "f" / "sub"), 2).stderr


def test_a_failing_editor_is_bad_input_and_keeps_the_file(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "x", "body"))
    data = (root / "michael" / "fact" / "x.md").read_bytes()
    assert "EDITOR" in fails(in_vault(root, "edit", "x", env={"EDITOR": "false"}), 2).stderr
    assert (root / "michael" / "fact" / "x.md").read_bytes() == data


def test_edit_without_editor_or_terminal_says_how_and_draws_nothing(root: Path) -> None:
    """No EDITOR and no terminal: the system's editor (vi) would fill stdout with escape codes, then fail."""
    ok(in_vault(root, "store", "fact", "x", "body"))
    data = (root / "michael" / "fact" / "x.md").read_bytes()
    env = {k: v for k, v in os.environ.items() if k not in ("EDITOR", "VISUAL")} | {"MEMFILE_NO_SERVER": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "memfile", "--vault", str(root), "edit", "fact/x"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode() == (
        "memfile: error: memfile edit has no EDITOR set and no terminal for the system's editor: set EDITOR "
        "(EDITOR=nano memfile edit fact/x), or change the memory with: memfile store fact x TEXT\n"
    )
    assert (root / "michael" / "fact" / "x.md").read_bytes() == data


def test_content_over_10_mb_is_refused(root: Path) -> None:
    result = fails(in_vault(root, "store", "fact", "huge", "-", input="x" * (11 * 2**20)), 2)
    assert "content" in result.stderr
    assert not (root / "michael" / "fact" / "huge.md").exists()


def test_created_at_of_a_hand_made_file_stays_put(root: Path) -> None:
    path = write(root / "michael" / "note" / "partial.md", "---\nkey: partial\n---\nbody\n")
    os.utime(path, (1_735_689_600, 1_735_689_600))  # 2025-01-01
    ok(in_vault(root, "store", "note", "partial", "v2"))
    ok(in_vault(root, "store", "note", "partial", "v3"))
    assert json.loads(ok(in_vault(root, "show", "partial", "--json")).stdout)["created_at"] == "2025-01-01T00:00:00Z"


def test_an_edit_that_changes_the_key_is_refused_and_kept(root: Path, tmp_path: Path) -> None:
    ok(in_vault(root, "store", "fact", "old_key", "body"))
    script = write(
        tmp_path / "rename.py",
        "import sys, re\np = sys.argv[1]\n"
        "t = open(p).read()\nopen(p, 'w').write(re.sub('key: old_key', 'key: new_key', t))\n",
    )
    before = commit_count(root)
    result = fails(in_vault(root, "edit", "old_key", env={"EDITOR": f"{sys.executable} {script}"}), 2)
    assert "never changes" in result.stderr
    assert "key: new_key" in (root / "michael" / "fact" / "old_key.md").read_text(encoding="utf-8")
    assert commit_count(root) == before


def test_a_symlinked_mind_is_refused_with_the_reason(root: Path, tmp_path: Path) -> None:
    (root / "michael").rename(tmp_path / "real")
    (root / "michael").symlink_to(tmp_path / "real")
    assert "symlink" in fails(in_vault(root, "--mind", "michael", "recall"), 2).stderr


def test_the_smallest_budget_named_by_the_error_works(sample_copy: Path) -> None:
    message = fails(in_vault(sample_copy, "recall", "--budget", "1"), 2).stderr
    need = int(re.search(r"allowed: (\d+) tokens", message).group(1))
    text = ok(in_vault(sample_copy, "recall", "--budget", str(need))).stdout
    assert math.ceil(len(text) / 4) <= need


def test_budget_zero_means_no_limit(sample_copy: Path) -> None:
    with open(sample_copy / "memfile.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[recall]\nbudget = 150\n")
    limited = ok(in_vault(sample_copy, "recall", "--budget", "0")).stdout
    assert "left out" not in limited and "[019]" in limited


def test_a_vault_path_inside_another_vault_is_refused(root: Path) -> None:
    result = fails(run("--vault", root / "michael", "recall"), 7)
    assert f"--vault {root}" in result.stderr


def test_a_copied_memory_file_is_named_as_a_copy(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "af", "x"))
    shutil.copy(root / "michael" / "fact" / "af.md", root / "michael" / "fact" / "af_copy.md")
    result = fails(in_vault(root, "show", "fact/af"), 2)
    assert "a copy?" in result.stderr and "af_copy.md" in result.stderr


@pytest.mark.parametrize("no_color", ["", "1"])
def test_search_bolds_matches_on_a_terminal_unless_no_color(vault: Vault, no_color: str) -> None:
    """On a terminal the matched words are bold; `NO_COLOR` set and not empty (no-color.org) turns it off."""
    import pty

    vault.store("fact", "car", "Drives an old blue Volvo.")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"NO_COLOR": no_color}
    env |= {"MEMFILE_NO_SERVER": "1"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: memfile's output goes to the terminal
        os.execve(sys.executable, [sys.executable, "-m", "memfile", "--vault", str(vault.root), "search", "volvo"], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    assert b"Volvo" in out
    assert (b"\x1b[1m" in out) == (not no_color)


def test_show_gives_unknown_keys_as_json_and_stats_a_z_time(root: Path) -> None:
    write(
        root / "michael" / "fact" / "k3.md",
        "---\nkey: k3\naliases: [one, Hà Nội]\nlinks: {a: 1}\nflag: true\n---\nbody\n",
    )
    shown = ok(in_vault(root, "show", "fact/k3")).stdout
    assert 'aliases: ["one", "Hà Nội"]\nlinks: {"a": 1}\nflag: true\n' in shown
    assert re.search(r"last updated \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", ok(in_vault(root, "stats")).stdout, re.M)


def test_a_ref_may_be_the_path_list_prints_and_errors_say_what_is_wrong(root: Path) -> None:
    ok(in_vault(root, "store", "fact", "office", "In Berlin"))
    path = "michael/fact/office.md"
    assert path in ok(in_vault(root, "list")).stdout
    for ref in (path, "fact/office.md"):
        assert ok(in_vault(root, "show", ref)).stdout.rstrip().endswith("In Berlin")
    assert "category/key holds one /" in fails(in_vault(root, "show", "fact/a/b"), 2).stderr
    assert "outside the mind" in fails(in_vault(root, "show", "michael/../x.md"), 2).stderr
    assert "control character" in fails(in_vault(root, "show", "fact/off\x1bice"), 2).stderr
    write(root / "michael" / "fact" / "broken.md", "---\ntags: true\n---\nbody\n")
    for args in (("show", "broken"), ("forget", "fact/broken")):
        err = fails(in_vault(root, *args), 3).stderr
        assert "michael/fact/broken.md:2 may hold it, but cannot be read (invalid tags" in err, err


def test_a_store_that_expires_in_the_past_says_so(root: Path) -> None:
    result = ok(in_vault(root, "store", "context", "old_trip", "Porto", "--expires", "2020-01-01"))
    assert "context/old_trip expires 2020-01-01 00:00Z, already past: it is stored, and out of recall" in result.stderr
    assert "already past" not in ok(in_vault(root, "store", "context", "trip", "Lisbon", "--expires", "3d")).stderr


def test_an_empty_mind_option_is_refused_not_ignored(root: Path) -> None:
    """`--mind "$UNSET"` must not quietly act on the default mind."""
    err = fails(in_vault(root, "--mind", "", "store", "fact", "k", "v"), 2).stderr
    assert "invalid mind ''" in err and not (root / "michael" / "fact" / "k.md").exists()


# ==============================================================================================================
# The command line on hostile or unusual input (issue 21): bytes that are not UTF-8, a terminal that
# cannot show every character, no content at a terminal, no editor, the install hints, and one line
# about unreadable files instead of one per file.
# ==============================================================================================================


LATIN1 = b"caf\xe9"  # "café" as a Latin-1 terminal sends it
ESCAPED = LATIN1.decode("utf-8", "surrogateescape")  # how Python hands such an argument to click


def memfile(
    *args: str | bytes, stdin: bytes | int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`memfile ARGS` as a process of its own (arguments may be raw bytes)."""
    return subprocess.run(
        [sys.executable, "-m", "memfile", *args],
        input=stdin if isinstance(stdin, bytes) else None,
        stdin=stdin if isinstance(stdin, int) else None,
        capture_output=True,
        env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})},
        check=False,
    )


def refused(done: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, (done.returncode, err)
    assert "Traceback" not in err and "unexpected error" not in err
    return err


# --- issue 21 item 13: bytes that are not UTF-8 ------------------------------------------------------


def test_arguments_that_are_not_utf8_are_refused_by_name(vault: Vault) -> None:
    root = str(vault.root)
    assert "not valid UTF-8" in refused(memfile("--vault", root, "store", "fact", "k", LATIN1))
    assert "not valid UTF-8" in refused(memfile("--vault", root, "store", "fact", "k", "x", "--tag", LATIN1))
    assert "not valid UTF-8" in refused(memfile("--vault", root, "recall", "--query", LATIN1))
    assert not (vault.root / "michael" / "fact" / "k.md").exists()


def test_stdin_that_is_not_utf8_is_refused(vault: Vault) -> None:
    err = refused(memfile("--vault", str(vault.root), "store", "fact", "k", stdin=b"menu: " + LATIN1 + b"\n"))
    assert "stdin" in err and "UTF-8" in err
    assert not (vault.root / "michael" / "fact" / "k.md").exists()


def test_init_with_a_name_that_is_not_utf8_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "v"
    refused(memfile("init", str(target), "--mind", "carol", "--name", LATIN1))
    assert not target.exists()


def test_the_api_refuses_lone_surrogates_in_content_and_tags(vault: Vault) -> None:
    from memfile.errors import InvalidInput

    with pytest.raises(InvalidInput, match="content"):
        vault.store("fact", "k", "bad \ud800 text")
    with pytest.raises(InvalidInput):
        vault.store("fact", "k", "fine", tags=["bad\udce9"])
    fails(in_vault(vault.root, "store", "fact", "k", ESCAPED), 2)


def test_a_latin1_terminal_gets_escapes_instead_of_an_error(vault: Vault) -> None:
    vault.store("fact", "pho", "Nhà hàng phở, ăn ngon", tags=["food"])
    for args in (["show", "fact/pho"], ["search", "pho"], ["recall"], ["list"]):
        done = memfile("--vault", str(vault.root), *args, env={"PYTHONIOENCODING": "latin-1"})
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)
        if args[0] != "list":  # list shows no content
            assert b"ph\\u1edf" in done.stdout or "phở".encode() in done.stdout, args  # escaped, or UTF-8 bytes


# --- issue 21 item 19: what to pass instead of `None` -------------------------------------------------


def test_store_at_a_terminal_without_content_says_what_to_pass(vault: Vault) -> None:
    leader, follower = os.openpty()
    try:
        err = refused(memfile("--vault", str(vault.root), "store", "note", "k", stdin=follower))
    finally:
        os.close(leader)
        os.close(follower)
    assert "None" not in err and "CONTENT" in err and "stdin" in err


def test_edit_without_an_editor_says_to_set_editor(vault: Vault, tmp_path: Path) -> None:
    vault.store("fact", "k", "text")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git",):
        os.symlink(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip(), bare / tool)
    result = fails(
        run("--vault", vault.root, "edit", "fact/k", env={"PATH": str(bare), "EDITOR": None, "VISUAL": None}), 2
    )
    assert "None" not in result.stderr and "EDITOR=" in result.stderr


# --- issue 21 item 20: the distribution name ----------------------------------------------------------


def test_install_hints_name_a_distribution_that_is_memfiles() -> None:
    import tomllib

    from memfile.cli import common, serve

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == common.DISTRIBUTION == "memfile-vault"
    assert "pip install 'memfile-vault[mcp]'" in (serve.mcp.help or "")
    wrong = re.compile(r"(?<![-\w])memfile\[|install[ ]memfile(?![-\w])")  # `memfile` on PyPI: another project
    places = [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("memfile/**/*.py"), *REPO.glob("tests/**/*.py")]
    found = [f"{p.relative_to(REPO)}: {m[0]}" for p in places for m in wrong.finditer(p.read_text(encoding="utf-8"))]
    assert found == [], "docs, docstrings and messages name the distribution memfile-vault"
    assert ok(run("--version")).stdout.startswith("memfile, version")


# --- issue 21 item 23: one line about unreadable files ------------------------------------------------


def test_reads_print_one_line_about_several_unreadable_files(vault: Vault) -> None:
    vault.store("fact", "good", "a good memory about deploys")
    write(vault.root / "michael" / "fact" / "broken1.md", BROKEN)
    write(vault.root / "michael" / "fact" / "broken2.md", BROKEN)
    for args in (["search", "deploys"], ["list"], ["recall"]):
        result = ok(in_vault(vault.root, *args))
        warnings = [line for line in result.stderr.splitlines() if "warning" in line]
        assert warnings == ["memfile: warning: 2 files cannot be read and are skipped; see: memfile doctor"], args
    doctor = in_vault(vault.root, "doctor")
    assert "broken1.md" in doctor.stdout + doctor.stderr and "broken2.md" in doctor.stdout + doctor.stderr


def test_status_lists_every_unreadable_file_with_its_reason(vault: Vault) -> None:
    write(vault.root / "michael" / "fact" / "broken1.md", BROKEN)
    write(vault.root / "michael" / "fact" / "broken2.md", BROKEN)
    assert "2 files cannot be read" in ok(in_vault(vault.root, "list")).stderr  # the read that finds them
    result = ok(in_vault(vault.root, "status"))
    assert "Unreadable (skipped; memfile never changes them): 2" in result.stdout
    assert "michael/fact/broken1.md:4:" in result.stdout and "michael/fact/broken2.md:4:" in result.stdout
    assert "warning" not in result.stderr  # listed once, on stdout
