"""Recall and search as of a date (`Vault.recall(at=...)`, `search(at=...)`, `memfile recall --at`,
`GET /memory/recall?at=`): the mind read from git, recalled as a checkout of that commit would be at the
commit's time, without touching the work tree, git's index or `.memfile`."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import BROKEN, commit_by_hand, fails, git, in_vault, ok, write
from helpers.serve import Server

from memfile import InvalidInput, Vault
from memfile.config import load_config
from memfile.index import Index, SearchOptions
from memfile.model import Source, format_datetime, utc_now
from memfile.recalling import AsOf, Recaller

MIND = "michael"
WORDS = "deploy server vps1 docker backup postgres synapse invoice garden bike berlin coffee".split()
QUERIES = ("deploy server", "backup postgres docker", "coffee berlin")


def at_hour(monkeypatch: pytest.MonkeyPatch, start: datetime, hour: int) -> None:
    """The commits made next are dated `hour` hours after `start` (author and committer)."""
    stamp = f"@{int((start + timedelta(hours=hour)).timestamp())} +0000"
    monkeypatch.setenv("GIT_AUTHOR_DATE", stamp)
    monkeypatch.setenv("GIT_COMMITTER_DATE", stamp)


def edited(path: Path, field: str, value: str) -> None:
    source = path.read_text(encoding="utf-8")
    path.write_text(re.sub(rf"(?m)^{field}: .*$", f"{field}: {value}", source, count=1), encoding="utf-8")


def fifty_commits(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A mind changed by 50 commits or more: stores, updates, forgets, supersedes, expiries, verifies, hand
    edits (one leaving a file that does not parse, fixed later). Returns the commits, oldest first."""
    rng = random.Random(42)
    start = utc_now() + timedelta(hours=1)  # commit k is dated start + k hours: memories age between commits
    root = vault.root
    keys: list[str] = []
    shas = [git(root, "rev-parse", "HEAD").strip()]

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))

    step = 0
    while len(shas) < 51:
        step += 1
        at_hour(monkeypatch, start, step)
        kind = rng.choice(["store"] * 4 + ["update", "forget", "supersede", "expire", "verify", "hand"])
        live = [k for k in keys if (root / MIND / k).with_suffix(".md").is_file()]
        if step == 20:  # a hand edit that leaves the file unparsable
            path = root / MIND / "fact" / "broken.md"
            write(path, BROKEN)
            commit_by_hand(root, str(path.relative_to(root)), message="a broken file by hand")
        elif step == 30:
            (root / MIND / "fact" / "broken.md").unlink()
            commit_by_hand(root, f"{MIND}/fact/broken.md", message="gone by hand")
        elif kind == "store" or not live:
            category = rng.choice(["fact", "project", "note", "preference", "context"])
            key = f"{category}/k{step}"
            priority = rng.choice(["low", "normal", "normal", "high", "critical"])
            vault.store(category, f"k{step}", text(), priority=priority, tags=[rng.choice(WORDS)])
            keys.append(key)
        elif kind == "update":
            ref = rng.choice(live)
            vault.store(*ref.split("/"), text())
        elif kind == "forget":
            vault.forget(rng.choice(live))
        elif kind == "supersede":
            old = rng.choice(live)
            vault.store(old.split("/")[0], f"k{step}", text(), supersedes=old)
            keys.append(f"{old.split('/')[0]}/k{step}")
        elif kind == "expire":  # ends between two later commits
            path = root / MIND / f"{rng.choice(live)}.md"
            edited(path, "expires_at", format_datetime(start + timedelta(hours=step + rng.randint(1, 6), minutes=30)))
            vault.commit_hand_edits()
        elif kind == "verify":
            with vault.acting_as("agent"):
                vault.store("note", f"k{step}", text(), priority="high")
            keys.append(f"note/k{step}")
        else:  # a person's edit of the text, the dates left as they were
            path = root / MIND / f"{rng.choice(live)}.md"
            path.write_text(path.read_text(encoding="utf-8") + f"\nAdded by hand: {text()}\n", encoding="utf-8")
            vault.commit_hand_edits()
        sha = git(root, "rev-parse", "HEAD").strip()
        if sha != shas[-1]:
            shas.append(sha)
    monkeypatch.delenv("GIT_AUTHOR_DATE")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    return shas


def commit_time(root: Path, sha: str) -> datetime:
    return datetime.fromisoformat(git(root, "log", "-1", "--format=%aI", sha).strip()).astimezone(timezone.utc)


def untouched(root: Path) -> tuple[str, dict[str, int]]:
    """`git status --porcelain` and the mtime of every file of the vault but its git objects and the record
    of the last recall (which a recall writes, as of a date or not)."""
    stamps = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if relative.startswith((".git/objects/", ".git/worktrees/")) or name.startswith("last_recall-"):
                continue
            stamps[relative] = path.stat().st_mtime_ns
    return git(root, "--no-optional-locks", "status", "--porcelain", "--ignored"), stamps


@pytest.mark.slow  # 50 checkouts (about 18 s): the full suite runs it, the quick loop does not
def test_recall_at_every_commit_is_a_checkouts_recall_at_that_moment(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "Done when" of issue 42: for each of 50 commits, `recall(at=sha)` and `search(at=sha)` give what
    a checkout of the commit (`git worktree add`) gives through its own index at the commit's time (the
    moment is given to the plain recall as `AsOf`: the checkout's index, at that time)."""
    shas = fifty_commits(vault, monkeypatch)
    root, config = vault.root, load_config(vault.root)
    expected = {}
    for n, sha in enumerate(shas):
        checkout = tmp_path / f"checkout-{n}"
        git(root, "worktree", "add", "--detach", str(checkout), sha)
        index = Index(checkout, MIND, 10.0, lambda _: None)
        moment = commit_time(root, sha)
        plain = Recaller(checkout, MIND, config, Source.USER, index, [], {})
        reports = [plain.recall(None, as_of=AsOf(sha, moment, index)).to_dict()]
        reports.append(plain.recall(120, as_of=AsOf(sha, moment, index)).to_dict())
        for query in QUERIES:
            reports.append(plain.recall(300, query=query, as_of=AsOf(sha, moment, index)).to_dict())
            reports.append(
                plain.recall(None, query=query, include_superseded=True, as_of=AsOf(sha, moment, index)).to_dict()
            )
        hits = [
            [hit.to_dict() for hit in index.read(lambda view: view.search(query, options, moment)[0])]
            for query in QUERIES
            for options in (SearchOptions(limit=20), SearchOptions(limit=20, include_expired=True))
        ]
        expected[sha] = (reports, hits, [str(i) for i in index.issues])
    assert any(issues for _, _, issues in expected.values())  # the broken file, at some commits
    assert len({json.dumps(reports[0]["memories"]) for reports, _, _ in expected.values()}) > 40

    reopened = Vault.open(root, MIND)
    reopened.memories()  # a plain read first: the index confirms the files it recorded as unsure
    before = untouched(root)
    for sha in shas:
        reports = [reopened.recall(None, at=sha).to_dict(), reopened.recall(120, at=sha).to_dict()]
        for query in QUERIES:
            reports.append(reopened.recall(300, query=query, at=sha).to_dict())
            reports.append(reopened.recall(None, query=query, include_superseded=True, at=sha).to_dict())
        issues = [str(i) for i in reopened.issues]
        hits = [
            [hit.to_dict() for hit in reopened.search(query, limit=20, include_expired=expired, at=sha)]
            for query in QUERIES
            for expired in (False, True)
        ]
        assert (reports, hits, issues) == expected[sha], sha
        assert reopened.last_recall().as_of == {"commit": sha, "date": format_datetime(commit_time(root, sha))}
    assert untouched(root) == before


@pytest.fixture
def dated(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three commits on 2026-03-01, 2026-04-01 and 2026-05-01 (noon UTC), after the vault's first."""
    shas = []
    for day, text in (("2026-03-01", "Deploys go to vps1"), ("2026-04-01", "Deploys go to vps2")):
        monkeypatch.setenv("GIT_AUTHOR_DATE", f"{day}T12:00:00Z")
        monkeypatch.setenv("GIT_COMMITTER_DATE", f"{day}T12:00:00Z")
        vault.store("fact", "deploys", text)
        shas.append(git(vault.root, "rev-parse", "HEAD").strip())
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-05-01T12:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-05-01T12:00:00Z")
    vault.forget("fact/deploys")
    shas.append(git(vault.root, "rev-parse", "HEAD").strip())
    monkeypatch.delenv("GIT_AUTHOR_DATE")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    return shas


def test_a_date_is_the_last_commit_at_or_before_it(vault: Vault, dated: list[str]) -> None:
    march, april, may = dated
    assert "vps1" in vault.recall(0, at="2026-03-15").text
    assert "vps2" in vault.recall(0, at="2026-04-01T12:00:00Z").text  # at the commit itself
    assert "vps1" in vault.recall(0, at="2026-04-01T11:59:59Z").text
    assert vault.last_recall().as_of == {"commit": march, "date": "2026-03-01T12:00:00Z"}
    assert "Deploys" not in vault.recall(0, at="2026-06-01").text
    assert [h.memory.content for h in vault.search("deploys", at="2026-04-02")] == ["Deploys go to vps2"]
    assert vault.search("deploys", at=may) == [] and vault.search("deploys", at="HEAD~1")[0].memory.content.endswith(
        "vps2"
    )
    assert vault.recall(0, at=datetime(2026, 3, 2, tzinfo=timezone.utc)).text == vault.recall(0, at=march).text


def test_a_date_to_come_is_the_latest_commit(vault: Vault, dated: list[str]) -> None:
    vault.store("fact", "office", "The office is in Berlin")
    later = vault.recall(0, at="2999-01-01")
    assert later.text == vault.recall(0, at="HEAD").text and "Berlin" in later.text
    assert vault.last_recall().as_of["commit"] == git(vault.root, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("2001-01-01", "no version of the vault is that old"),
        ("no-such-branch", "allowed: a commit (sha, HEAD~2, a branch), a date (2026-05-01)"),
        ("2026-02-30", "no calendar has that day"),
        ("-v", "allowed"),
    ],
)
def test_an_at_that_names_no_commit_is_refused_naming_it(vault: Vault, dated: list[str], at: str, says: str) -> None:
    for read in (lambda: vault.recall(at=at), lambda: vault.search("deploys", at=at)):
        with pytest.raises(InvalidInput) as caught:
            read()
        assert caught.value.field == "at" and says in str(caught.value)
    result = fails(in_vault(vault.root, "recall", "--at", at), 2)
    assert "invalid at" in result.stderr and "a duration back (7d)" in result.stderr


def test_at_with_other_minds_or_by_meaning_is_refused(vault: Vault, dated: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        vault.recall(at="HEAD", with_minds=["anna"])
    assert caught.value.field == "with_minds"
    with pytest.raises(InvalidInput) as caught:
        vault.search("deploys", at="HEAD", semantic=True)
    assert caught.value.field == "semantic"


def test_a_file_that_did_not_parse_then_is_skipped_with_an_issue(vault: Vault) -> None:
    vault.store("fact", "office", "The office is in Berlin")
    write(vault.mind_dir / "fact" / "broken.md", BROKEN)
    commit_by_hand(vault.root, f"{MIND}/fact/broken.md")
    broken = git(vault.root, "rev-parse", "HEAD").strip()
    (vault.mind_dir / "fact" / "broken.md").unlink()
    commit_by_hand(vault.root, f"{MIND}/fact/broken.md", message="fixed")
    assert "Berlin" in vault.recall(0, at=broken).text
    assert [i.path for i in vault.issues] == [f"{MIND}/fact/broken.md"]
    vault.recall(0, at="HEAD")
    assert vault.issues == []


def test_nothing_is_checked_out_and_the_record_says_as_of_when(vault: Vault, dated: list[str]) -> None:
    march = dated[0]
    vault.memories()  # a plain read first: the index confirms the files it recorded as unsure
    before = untouched(vault.root)
    first = vault.recall(0, at=march)
    assert vault.recall(0, at=march).text == first.text
    assert vault._moment(march, None) is vault._moment(march, None)  # kept per commit  # noqa: SLF001
    assert untouched(vault.root) == before
    record = json.loads((vault.root / ".memfile" / f"last_recall-{MIND}.json").read_text(encoding="utf-8"))
    assert list(record)[:4] == ["served_at", "source", "mind", "query"]
    assert record["as_of"] == {"commit": march, "date": "2026-03-01T12:00:00Z"}
    vault.recall(0)
    assert vault.last_recall().as_of is None


def test_a_look_not_recorded_leaves_the_record_and_commit_at_names_the_commit(vault: Vault, dated: list[str]) -> None:
    """What the console's Recall page uses: `recall(record=False)` (now or as of a date) writes no record, and
    `commit_at` names the commit a recall or search as of `at` reads."""
    vault.recall(0, at=dated[0])
    record = vault.last_recall()
    assert "vps2" in vault.recall(0, query="deploys", at="2026-04-15", record=False).text
    assert "Deploys" not in vault.recall(0, record=False).text
    assert vault.last_recall() == record
    assert vault.commit_at("2026-03-15") == (dated[0], datetime(2026, 3, 1, 12, tzinfo=timezone.utc))
    assert vault.commit_at("HEAD")[0] == dated[2]
    with pytest.raises(InvalidInput) as caught:
        vault.commit_at("2001-01-01")
    assert caught.value.field == "at" and "no version of the vault is that old" in str(caught.value)


def test_cli_recall_and_search_at(vault: Vault, dated: list[str]) -> None:
    text = ok(in_vault(vault.root, "recall", "--at", "2026-03-15", "--budget", "0")).stdout
    assert "vps1" in text
    data = json.loads(ok(in_vault(vault.root, "recall", "--at", "HEAD~1", "--format", "json")).stdout)
    assert "vps2" in data["memories"][0]["content"]
    hits = json.loads(ok(in_vault(vault.root, "search", "vps1", "--at", dated[0], "--json")).stdout)
    assert [h["key"] for h in hits] == ["deploys"]
    assert "no memory matches" in ok(in_vault(vault.root, "search", "vps1", "--at", "HEAD")).stderr
    record = json.loads(ok(in_vault(vault.root, "last-recall", "--json")).stdout)
    assert record["as_of"]["commit"] == dated[1]
    assert "--at" in ok(in_vault(vault.root, "recall", "--help")).stdout
    assert "--at" in ok(in_vault(vault.root, "search", "--help")).stdout


def test_http_recall_at_is_for_people(server: Server, person: str, agent: str) -> None:
    now = server.request("GET", "/memory/recall?mind=michael&format=json", person).json()
    then = server.request("GET", "/memory/recall?mind=michael&format=json&at=HEAD", person)
    assert then.status == 200 and then.json()["memories"] == now["memories"]
    refused = server.request("GET", "/memory/recall?at=HEAD", agent)
    assert refused.status == 403 and refused.error == "Refused" and "leave out at" in refused.json()["message"]
    bad = server.request("GET", "/memory/recall?mind=michael&at=nowhere", person)
    assert bad.status == 400 and "at" in bad.json()["message"] and "a date (2026-05-01)" in bad.json()["message"]


def test_a_person_only_parameter_is_in_the_openapi_document() -> None:
    from memfile.server.app import openapi_document

    parameters = openapi_document(mcp=False)["paths"]["/memory/recall"]["get"]["parameters"]
    assert any(p["name"] == "at" and "Mind Key gets 403" in p["description"] for p in parameters)


def test_no_git_process_writes_anything(vault: Vault, dated: list[str]) -> None:
    """A recall as of a date runs only git's readers: its index file keeps its bytes and mtime."""
    index = vault.root / ".git" / "index"
    stamp, data = index.stat().st_mtime_ns, index.read_bytes()
    vault.recall(query="deploys", at="HEAD~2")
    vault.search("deploys", at="2026-04-15")
    assert (index.stat().st_mtime_ns, index.read_bytes()) == (stamp, data)
    assert (
        subprocess.run(["git", "-C", str(vault.root), "status", "--porcelain"], capture_output=True, text=True).stdout
        == ""
    )


def test_a_file_unchanged_since_is_taken_from_the_index_only_when_its_dates_are_its_own(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The speed trick `as_of` (a file the work tree holds as the commit did is not parsed again) gives
    what the plain path gives (`MEMFILE_PLAIN=as_of`); a file without dates takes the commit's time, not
    its mtime, either way."""
    vault.store("fact", "office", "The office is in Berlin", expires="1h")
    write(vault.mind_dir / "note" / "undated.md", "A note written by hand, without front-matter.\n")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
    commit_by_hand(vault.root, f"{MIND}/note/undated.md")
    monkeypatch.delenv("GIT_AUTHOR_DATE")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    vault.store("fact", "later", "Stored after")
    answers = {}
    for switch in ("", "as_of"):
        monkeypatch.setenv("MEMFILE_PLAIN", switch)
        fresh = Vault.open(vault.root, MIND)
        answers[switch] = [fresh.recall(None, at=at).to_dict() for at in ("HEAD~1", "HEAD")]
    assert answers[""] == answers["as_of"]
    undated = [m for m in answers[""][0]["memories"] if m["key"] == "undated"][0]
    assert undated["created_at"] == "2026-01-02T03:04:05Z"


def test_a_search_as_of_a_commit_reads_that_commit_alone(vault: Vault) -> None:
    """A commit that held no memory finds none, though the vault's own index holds some (its index is made
    in memory by its first search, and never reads the work tree)."""
    empty = git(vault.root, "rev-parse", "HEAD").strip()
    vault.store("fact", "office", "The office is in Berlin")
    assert [hit.memory.key for hit in vault.search("office")] == ["office"]
    assert vault.search("office", at=empty) == []
    assert vault.recall(0, query="office", at=empty).total == 0
    assert [hit.memory.key for hit in vault.search("office", at="HEAD")] == ["office"]
