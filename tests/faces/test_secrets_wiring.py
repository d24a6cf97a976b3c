"""Secrets never reach the vault: every write path scans (store through every face, the memory tool, the
importers), a person's hand edit is only warned about, doctor reports what is on disk.

Token-shaped values are built at run time: no string in this file is one (push protection never flags it)."""

from __future__ import annotations

import json
import logging
import random
import string
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import commit_count, git, in_vault, write
from helpers.serve import Server, Setup, make_setup, start_server

from memfile import InvalidInput, Refused, Vault
from memfile.memory_tool import MemoryToolBackend
from memfile.secretscan import SecretFound

RNG = random.Random(27)


def github_token() -> str:
    return "gh" + "p_" + "".join(RNG.choices(string.ascii_letters + string.digits, k=36))


def stripe_key() -> str:
    return "sk" + "_live_" + "".join(RNG.choices(string.ascii_letters + string.digits, k=24))


def middle(token: str) -> str:
    """A piece of the token no masked value may show."""
    return token[6:-6]


def secrets_config(root: Path, body: str) -> None:
    path = root / "memfile.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n[secrets]\n" + body + "\n", encoding="utf-8")


def no_trace(root: Path, token: str) -> None:
    """The value is nowhere memfile writes: files, git history (every version), its state folder."""
    log = git(root, "log", "--all", "-p", "--format=%B")
    assert middle(token) not in log
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert middle(token) not in path.read_text(encoding="utf-8", errors="replace"), path


# --- the library ------------------------------------------------------------------------------------


def test_a_store_holding_a_token_is_refused_with_the_rule_line_and_a_masked_value(vault: Vault) -> None:
    token = github_token()
    commits = commit_count(vault.root)
    with pytest.raises(SecretFound) as caught:
        vault.store("fact", "ci_token", f"The CI uses this:\n{token}")
    message = str(caught.value)
    assert "line 2" in message and "GitHub" in message and token[:4] + "…" + token[-4:] in message
    assert middle(token) not in message and middle(token) not in repr(caught.value.findings)
    assert isinstance(caught.value, Refused) and caught.value.exit_code == 2
    assert commit_count(vault.root) == commits and vault.list() == []
    with vault.acting_as("agent") as agent, pytest.raises(SecretFound):
        agent.store("fact", "ci_token", f"token {token}")
    no_trace(vault.root, token)


def test_a_token_in_a_tag_is_refused_like_one_in_the_content(vault: Vault) -> None:
    token = github_token().lower()  # tags are written lowercased: a lowercase token stays one
    commits = commit_count(vault.root)
    for who in ("user", "agent"):
        with vault.acting_as(who) as writer, pytest.raises(SecretFound, match="a tag of fact/ci") as caught:
            writer.store("fact", "ci", "The CI token is kept in the password manager", tags=["infra", f"ci {token}"])
        assert "line 2" in str(caught.value) and middle(token) not in str(caught.value)
    vault.store("fact", "ci", "The CI token is kept in the password manager", tags="infra")
    with pytest.raises(SecretFound, match="a tag of fact/ci"):  # an update that gives tags
        vault.store("fact", "ci", "The CI token is kept in the password manager", tags=["infra", token])
    assert vault.store("fact", "ci", "The CI token is kept in the vault").changed  # no tags given: none scanned
    assert commit_count(vault.root) == commits + 2
    no_trace(vault.root, token)


def test_a_person_may_allow_it_an_agent_never(vault: Vault) -> None:
    token = stripe_key()
    result = vault.store("fact", "stripe_test", f"key {token}", allow_secret=True)
    assert result.created and any("written anyway (a person allowed it)" in n for n in result.notices)
    assert not any(middle(token) in n for n in result.notices)
    with vault.acting_as("agent") as agent, pytest.raises(Refused, match="only a person"):
        agent.store("fact", "other", "no secret here", allow_secret=True)


def test_policy_warn_off_and_allow_patterns(vault: Vault) -> None:
    token = github_token()
    secrets_config(vault.root, 'policy = "warn"')
    with Vault.open(vault.root, "michael") as warned:
        result = warned.store("fact", "a", f"token {token}")
        assert result.created and any("GitHub" in n and middle(token) not in n for n in result.notices)
    (vault.root / "memfile.toml").write_text(
        (vault.root / "memfile.toml").read_text().replace('policy = "warn"', 'policy = "off"')
    )
    with Vault.open(vault.root, "michael") as off:
        assert off.store("fact", "b", f"token {token}").notices == ()
    (vault.root / "memfile.toml").write_text(
        (vault.root / "memfile.toml").read_text().replace('policy = "off"', f"allow = ['^{token[:10]}']")
    )
    with Vault.open(vault.root, "michael") as allowed:
        assert allowed.store("fact", "c", f"token {token}").created
        with pytest.raises(SecretFound):
            allowed.store("fact", "d", f"token {github_token()}")


@pytest.mark.parametrize(
    ("body", "field"),
    [('policy = "block"', "secrets.policy"), ("allow = ['']", "secrets.allow[0]"), ("allow = 3", "secrets.allow")],
)
def test_a_bad_secrets_table_names_the_setting(vault: Vault, body: str, field: str) -> None:
    secrets_config(vault.root, body)
    with pytest.raises(InvalidInput) as caught:
        Vault.open(vault.root, "michael")
    assert field in str(caught.value)
    result = in_vault(vault.root, "list")
    assert result.exit_code == 2 and field in result.output and "Traceback" not in result.output


def test_write_raw_and_the_memory_tool_refuse_a_secret(vault: Vault) -> None:
    token = github_token()
    commits = commit_count(vault.root)
    with vault.acting_as("agent") as agent:
        with pytest.raises(SecretFound):
            agent.write_raw({"michael/note/x.md": f"---\nsource: agent\n---\n{token}\n"}, subject="memory-tool create")
        tool = MemoryToolBackend(agent)
        answer = tool.execute({"command": "create", "path": "/memories/note/ci.md", "file_text": f"token: {token}"})
        assert "GitHub" in answer and middle(token) not in answer
        tool.execute(
            {"command": "create", "path": "/memories/note/ci.md", "file_text": "The CI token is in the vault."}
        )
        answer = tool.execute(
            {"command": "str_replace", "path": "/memories/note/ci.md", "old_str": "in the vault", "new_str": token}
        )
        assert "GitHub" in answer and middle(token) not in answer
    assert commit_count(vault.root) == commits + 1  # the clean create only
    no_trace(vault.root, token)


def test_a_token_as_a_file_name_is_refused_as_in_the_content(vault: Vault) -> None:
    # A key is the file's name, and a memory tool path is one too: git keeps both, whatever the content says.
    token = github_token()
    result = in_vault(vault.root, "store", "fact", token.lower(), "Plain.")
    assert result.exit_code == 2 and "the key of this fact memory" in result.stderr
    assert "GitHub token" in result.stderr and middle(token).lower() not in result.output.lower()
    with vault.acting_as("agent") as agent:
        answer = MemoryToolBackend(agent).execute(
            {"command": "create", "path": f"/memories/note/{token}.md", "file_text": "Plain."}
        )
        assert "the new file's path looks like it holds a secret" in answer and middle(token) not in answer
    assert vault.list() == []
    no_trace(vault.root, token)


def test_an_import_stops_at_the_record_holding_a_secret(vault: Vault, tmp_path: Path) -> None:
    token = stripe_key()
    records = [
        {"category": "fact", "key": "fine", "content": "Nothing secret."},
        {"category": "fact", "key": "billing", "content": f"Stripe live key {token}"},
    ]
    file = tmp_path / "in.json"
    file.write_text(json.dumps(records), encoding="utf-8")
    commits = commit_count(vault.root)
    for dry_run in (True, False):
        with pytest.raises(SecretFound, match="record 2") as caught:
            vault.import_(file, dry_run=dry_run)
        assert middle(token) not in str(caught.value)
    assert commit_count(vault.root) == commits and vault.list() == []
    with vault.acting_as("agent") as agent, pytest.raises(Refused):
        agent.import_(file, allow_secret=True)
    report = vault.import_(file, allow_secret=True)
    assert len(report.created) == 2 and any("written anyway" in n for n in report.notices)
    result = in_vault(vault.root, "import", str(file), "--json")  # unchanged now, no new record to refuse
    assert result.exit_code == 0, result.output


def _import_outcome(vault: Vault, file: Path, **options: object) -> tuple[str, list[str]]:
    """What an import said: its refusal, or the notices of what it wrote (the writes undone after)."""
    try:
        report = vault.import_(file, dry_run=True, **options)  # type: ignore[arg-type]
    except SecretFound as exc:
        return str(exc), []
    return "", report.notices


def test_an_imports_first_error_is_its_first_bad_record_a_secret_or_another_fault(vault: Vault, tmp_path: Path) -> None:
    """The secret checks are made once the records are checked: the error named is still the first
    record's that fails, whether it holds a secret or a bad field."""
    records = [{"category": "fact", "key": f"k{i}", "content": f"Plain fact number {i}."} for i in range(20)]
    secret, bad = dict(records[2], content=f"key {stripe_key()}"), dict(records[9], category="no-such-category")
    for at_secret, at_bad, expected in ((2, 9, SecretFound), (9, 2, InvalidInput)):
        file = tmp_path / f"in{at_secret}.json"
        changed = list(records)
        changed[at_secret], changed[at_bad] = secret, bad
        file.write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(expected, match=r"memories\[2\]"):  # the third record
            vault.import_(file)
    assert vault.list() == []


def test_a_persons_edit_is_warned_about_never_refused(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    token = github_token()
    stored = vault.store("fact", "ci", "The CI token lives in the password manager.")
    memory, path = vault.begin_edit(stored.memory.ref)
    path.write_text(path.read_text().replace("lives in the password manager", token))
    result = vault.finish_edit(memory)
    assert result.changed and any(
        "looks like it holds a secret" in n and middle(token) not in n for n in result.notices
    )
    assert token in vault.get("fact/ci").content  # kept: the person's own edit


def test_the_watcher_warns_of_a_secret_in_a_hand_edit(vault: Vault, caplog: pytest.LogCaptureFixture) -> None:
    from memfile.watch import Watcher

    token = github_token()
    seen: list[list[str]] = []
    (vault.root / "michael" / "fact").mkdir()  # a new folder is heard as a whole diff: doctor finds those
    with caplog.at_level(logging.WARNING, logger="memfile.watch"):
        watcher = Watcher(vault, debounce=0.05, on_batch=lambda report, paths: seen.append(paths)).start()
        try:
            time.sleep(0.3)  # the first pass (a full diff) is not a hand edit
            write(vault.root / "michael" / "fact" / "hand.md", f"Deploy key: {token}\n")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any("hand.md" in r.getMessage() for r in caplog.records):
                time.sleep(0.05)
        finally:
            watcher.stop()
    told = [r.getMessage() for r in caplog.records if "hand.md" in r.getMessage()]
    assert told and "GitHub" in told[0] and middle(token) not in told[0]


def test_doctor_reports_secrets_on_disk_masked(vault: Vault) -> None:
    token = stripe_key()
    write(vault.root / "michael" / "note" / "billing.md", f"---\napi_key: {token}\n---\nBilling notes.\n")
    report = vault.doctor()
    secret = [f for f in report.findings if f.kind == "secret"]
    assert len(secret) == 1 and secret[0].path == "michael/note/billing.md" and secret[0].problem
    assert ":2:" in secret[0].message and middle(token) not in secret[0].message
    result = in_vault(vault.root, "doctor", "--json")
    assert result.exit_code == 5 and middle(token) not in result.output
    secrets_config(vault.root, 'policy = "off"')
    with Vault.open(vault.root, "michael") as off:
        assert not [f for f in off.doctor().findings if f.kind == "secret"]


# --- the command line -----------------------------------------------------------------------------------


def test_the_command_line(vault: Vault) -> None:
    token = github_token()
    refused = in_vault(vault.root, "store", "fact", "ci", f"token {token}")
    assert refused.exit_code == 2 and "GitHub" in refused.output and middle(token) not in refused.output
    assert "--allow-secret" in refused.output and "Traceback" not in refused.output
    allowed = in_vault(vault.root, "store", "fact", "ci", f"token {token}", "--allow-secret")
    assert allowed.exit_code == 0 and "written anyway" in allowed.output
    agent = in_vault(vault.root, "store", "fact", "ci2", "x", "--allow-secret", env={"MEMFILE_SOURCE": "agent"})
    assert agent.exit_code == 2 and "only a person" in agent.output


def test_the_command_line_masks_a_token_it_quotes_and_records_a_recall_query_masked(vault: Vault) -> None:
    token = github_token()
    vault.store("fact", "kept", "Deploys run on Fridays.")
    for option in ("--priority", "--expires", "--confidence", "--source", "--supersedes"):
        result = in_vault(vault.root, "store", "fact", "k", "x", option, token)
        assert result.exit_code == 2 and "ghp_…" in result.stderr and middle(token) not in result.output, option
    for args in (("show", token), ("show", f"fact/{token.lower()}"), ("store", token, "k", "x"), ("forget", token)):
        result = in_vault(vault.root, *args)
        assert result.exit_code in (2, 3) and middle(token).lower() not in result.output.lower(), args
    assert in_vault(vault.root, "recall", "--query", f"deploys {token}").exit_code == 0
    shown = in_vault(vault.root, "last-recall")
    assert shown.exit_code == 0 and f"query: deploys ghp_…{token[-4:]}" in shown.stdout  # the rest of it kept
    assert middle(token) not in shown.stdout
    no_trace(vault.root, token)


# --- the HTTP API ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Server]]:
    setup = make_setup(tmp_path_factory.mktemp("secrets"))
    server = start_server(setup)
    yield setup, server
    code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err


def test_the_http_api(served: tuple[Setup, Server]) -> None:
    setup, server = served
    token = github_token()
    body = {"category": "fact", "key": "ci", "content": f"token {token}"}
    for who in ("michael", "person"):
        answer = server.request("POST", "/memory", setup.tokens[who], body)
        assert (
            answer.status == 403
            and "GitHub" in answer.json()["message"]
            and middle(token) not in answer.json()["message"]
        )
    answer = server.request("POST", "/memory", setup.tokens["michael"], body | {"allow_secret": True})
    assert answer.status == 403 and "only a person" in answer.json()["message"]
    answer = server.request("POST", "/memory", setup.tokens["person"], body | {"allow_secret": True})
    assert answer.status == 201, answer
    answer = server.request("POST", "/memory", setup.tokens["person"], body | {"allow_secret": "yes"})
    assert answer.status == 400 and "allow_secret" in answer.json()["message"]
    records = json.dumps([{"category": "fact", "key": "stripe", "content": f"key {stripe_key()}"}])
    answer = server.request("POST", "/memory/import", setup.tokens["person"], records)
    assert answer.status == 403 and "record 1" in answer.json()["message"]
    answer = server.request("POST", "/memory/import?allow_secret=true", setup.tokens["person"], records)
    assert answer.status == 200, answer
    log = subprocess.run(["git", "log", "-p"], cwd=setup.root, capture_output=True, text=True).stdout
    assert middle(token) in log  # what a person allowed is stored; nothing else was


def test_a_token_in_any_field_is_masked_in_the_answer_and_the_recall_record(served: tuple[Setup, Server]) -> None:
    # A token put in the wrong field came back verbatim in the 400 answer; a recall's query was kept whole
    # in .memfile/last_recall; an agent's import wrote a record's id and file name into git.
    setup, server = served
    token = github_token()
    for field in ("priority", "expires_at", "supersedes", "category", "key", "source", "confidence", "tags"):
        body = {"category": "fact", "key": "k", "content": "x"} | {field: token}
        answer = server.request("POST", "/memory", setup.tokens["michael"], body)
        assert answer.status in (400, 403) and "ghp_…" in answer.json()["message"], (field, answer)
        assert middle(token) not in answer.body.decode(), field
    for path in (f"/memory/{token}", f"/memory/fact/{token.lower()}", f"/memory/{token}/history", f"/no/{token}"):
        answer = server.request("GET", path, setup.tokens["michael"])
        assert answer.status in (400, 404) and middle(token).lower() not in answer.body.decode().lower(), path
    answer = server.request("GET", f"/memory/recall?q=deploy+{token}", setup.tokens["michael"])
    assert answer.status == 200
    record = (setup.root / ".memfile" / "last_recall-michael.json").read_text(encoding="utf-8")
    assert json.loads(record)["query"] == "deploy ghp_…" + token[-4:] and middle(token) not in record
    for given, named in (({"id": token}, "the id"), ({"path": f"michael/fact/{token}.md"}, "the path")):
        record = {"type": "memory", "category": "fact", "key": "imported", "content": "Plain."} | given
        lines = [{"type": "header", "format": "memfile-export", "version": 1}, record, {"type": "end", "count": 1}]
        body = "".join(json.dumps(line) + "\n" for line in lines)
        answer = server.request("POST", "/memory/import", setup.tokens["michael"], body)
        assert answer.status == 403 and f"{named} looks like it holds a secret" in answer.json()["message"], answer
        assert middle(token) not in answer.body.decode()
    synapse = json.dumps([{"id": token, "category": "fact", "key": "imported", "content": "Plain."}])
    answer = server.request("POST", "/memory/import", setup.tokens["michael"], synapse)  # kept as `synapse_id`
    assert answer.status == 403 and "ghp_…" in answer.json()["message"] and middle(token) not in answer.body.decode()
    no_trace(setup.root, token)


# --- reads: a secret a hand edit put in a file is named once per file ------------------------------------

HAND = "michael/fact/deploy.md"


def hand_written(root: Path, token: str) -> None:
    """What a person's editor leaves: a memory file holding a token, never scanned by a write."""
    write(root / HAND, f"---\npriority: high\n---\nDeploy with the token {token} on the build host.\n")


def told(notices: list[str] | tuple[str, ...]) -> list[str]:
    return [n for n in notices if "looks like it holds a secret" in n]


def test_a_read_names_a_memory_holding_a_secret_once_per_file(vault: Vault) -> None:
    token = github_token()
    vault.store("fact", "build", "The build host is build-01; deploys start there.")
    hand_written(vault.root, token)
    vault.recall(query="deploy build host")
    [notice] = told(vault.notices)
    assert notice.startswith("fact/deploy looks like it holds a secret: line 1: a GitHub token")
    assert "memfile edit fact/deploy" in notice and middle(token) not in notice
    vault.search("deploy")
    vault.get("fact/deploy")
    assert told(vault.notices) == []  # told once: this Vault scanned the file already
    with Vault.open(vault.root, "michael") as other:  # another process: told again, by search and by show
        other.search("deploy")
        assert len(told(other.notices)) == 1
    with Vault.open(vault.root, "michael") as other:
        other.get("fact/deploy")
        assert len(told(other.notices)) == 1
    hand_written(vault.root, stripe_key())  # the text changed: scanned, and told, again
    vault.search("deploy")
    assert "a Stripe secret key" in told(vault.notices)[0]
    secrets_config(vault.root, 'policy = "off"')
    with Vault.open(vault.root, "michael") as off:
        off.search("deploy")
        assert told(off.notices) == []


def test_a_read_of_another_mind_names_it_and_how_to_edit_it(vault: Vault) -> None:
    Vault.init(vault.root, "anna").close()
    token = github_token()
    write(vault.root / "anna" / "fact" / "wifi.md", f"The wifi password is {token}\n")
    vault.recall(query="wifi password", with_minds=["anna"])
    [notice] = told(vault.notices)
    assert (
        notice.startswith("anna:fact/wifi looks like it holds a secret")
        and "memfile --mind anna edit fact/wifi" in notice
    )


@pytest.mark.parametrize(
    "command", [["recall", "--query", "deploy host"], ["search", "deploy"], ["show", "fact/deploy"]]
)
def test_the_command_line_names_it_on_stderr(vault: Vault, command: list[str]) -> None:
    token = github_token()
    hand_written(vault.root, token)
    result = in_vault(vault.root, *command)
    assert result.exit_code == 0, result.stderr
    assert "deploy" in result.stdout  # served as it is: the file is the person's
    [line] = told(result.stderr.splitlines())
    assert line.startswith("memfile: fact/deploy looks like it holds a secret: line 1: a GitHub token")
    assert line.endswith("then take it out with: memfile edit fact/deploy") and middle(token) not in line


def test_mcp_tells_the_agent_once_in_its_terms(vault: Vault) -> None:
    from helpers.mcp import Agent, serve

    token = github_token()
    hand_written(vault.root, token)

    async def script(agent: Agent) -> tuple[Any, Any]:
        return await agent.call("search", query="deploy"), await agent.call("recall", query="deploy build host")

    searched, recalled = serve(vault.root, script, mind="michael")
    *hits, notice = [block.text for block in searched.content]
    assert json.loads(hits[0])["key"] == "deploy"
    assert searched.structured_content["result"][0]["key"] == "deploy"  # the result as before
    assert notice.startswith("fact/deploy looks like it holds a secret: line 1: a GitHub token")
    assert "tell the user, who can revoke it and edit it out" in notice
    assert "memfile" not in notice.split(":", 1)[1] and middle(token) not in notice
    assert len(recalled.content) == 1  # told once per file: the recall serves it without a second word


def test_the_http_api_tells_the_servers_log_once(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    token = github_token()
    hand_written(setup.root, token)
    server = start_server(setup)
    try:
        searched = server.request("GET", "/memory/search?q=deploy", setup.tokens["michael"])
        assert searched.status == 200 and searched.json()[0]["key"] == "deploy"
        recalled = server.request("GET", "/memory/recall?q=deploy", setup.tokens["michael"])
        assert recalled.status == 200 and token in recalled.body.decode()
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    [line] = told(err.splitlines())
    assert line.startswith("memfile serve: GET /memory/search by Mind Key 'michael-key' in the mind 'michael': ")
    assert "fact/deploy looks like it holds a secret" in line and middle(token) not in line
