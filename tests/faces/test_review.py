"""`memfile review`: the captured memories waiting for a person, listed, accepted, edited and rejected through
the command line (click's CliRunner on real vaults; the proposals come from a real `Vault.capture`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import commit_count, fails, git, in_vault, last_subject, ok
from helpers.review import ADDED, TARGET, UPDATE, propose

from memfile import Vault

AGENT = {"MEMFILE_SOURCE": "agent"}


def editor(tmp_path: Path, body: str) -> str:
    """An $EDITOR that runs `body` on the file it is given (`path`)."""
    script = tmp_path / "editor.py"
    script.write_text("import pathlib, sys\npath = pathlib.Path(sys.argv[1])\n" + body, encoding="utf-8")
    return f'"{sys.executable}" "{script}"'


def test_review_lists_each_proposal_with_its_session_turns_and_what_it_would_supersede(vault: Vault) -> None:
    ids = propose(vault)
    text = ok(in_vault(vault.root, "review")).stdout
    assert text.splitlines() == [
        f"{ADDED:<42} s1, turns 2",
        "    Has a dog called Rex.",
        "    > [2] user: By the way, my dog is called Rex.",
        f"{UPDATE:<42} s1, turns 0; would supersede {TARGET}",
        "    Drinks green tea every morning, no more coffee.",
        "    > [0] user: I switched: I drink green tea every morning now, no more coffee.",
    ]
    listed = json.loads(ok(in_vault(vault.root, "review", "--json")).stdout)
    assert [(m["key"], m["status"], m["would_supersede"]) for m in listed] == [
        ("dog_name", "proposed", None),
        ("coffee_2", "proposed", TARGET),
    ]
    assert listed[1]["extra"] == {
        "captured_from": "s1",
        "captured_turns": [0],
        "captured_lines": ["[0] user: I switched: I drink green tea every morning now, no more coffee."],
        "proposed_supersedes": ids[TARGET],
    }


def test_an_empty_queue_says_so(vault: Vault) -> None:
    result = ok(in_vault(vault.root, "review"))
    assert result.stdout == "" and "no memory waits for review" in result.stderr
    assert json.loads(ok(in_vault(vault.root, "review", "--json")).stdout) == []


def reviewed(vault: Vault, verb: str, *refs: str) -> None:
    """`memfile review VERB REF...`: a line and a commit for each REF."""
    before = commit_count(vault.root)
    result = ok(in_vault(vault.root, "review", verb, *refs))
    assert [line.split()[0] for line in result.stdout.splitlines()] == [f"{verb}ed"] * len(refs)
    assert commit_count(vault.root) == before + len(refs)


def test_accept_verifies_each_proposal_and_supersedes_its_target_one_commit_each(vault: Vault) -> None:
    propose(vault)
    reviewed(vault, "accept", UPDATE, ADDED)
    assert last_subject(vault.root) == f"accept {ADDED} (user)"
    assert (
        git(vault.root, "log", "-2", "--format=%s").splitlines()[1] == f"accept {UPDATE} (user), superseding {TARGET}"
    )
    assert git(vault.root, "status", "--porcelain").strip() == ""
    accepted = vault.get(UPDATE)
    assert (accepted.status, accepted.verified) == (None, True)
    assert vault.get(TARGET).superseded_by == accepted.id
    assert [h.memory.ref for h in vault.search("dog Rex")] == [ADDED]
    assert "green tea" in vault.recall(query="what do I drink in the morning")
    assert ok(in_vault(vault.root, "review")).stdout == ""


def test_accept_json_and_show_of_an_accepted_proposal_keep_its_provenance(vault: Vault) -> None:
    propose(vault)
    [memory] = json.loads(ok(in_vault(vault.root, "review", "accept", ADDED, "--json")).stdout)
    assert (memory["verified"], memory["status"], memory["extra"]) == (
        True,
        "active",
        {"captured_from": "s1", "captured_turns": [2]},
    )
    shown = ok(in_vault(vault.root, "show", ADDED)).stdout
    assert "captured_from: s1\ncaptured_turns: [2]" in shown and "status:" not in shown


def test_reject_forgets_each_proposal_one_commit_each_and_git_keeps_it(vault: Vault) -> None:
    propose(vault)
    reviewed(vault, "reject", ADDED, UPDATE)
    assert last_subject(vault.root) == f"reject {UPDATE} (user)"
    assert [m.ref for m in vault.memories()] == [TARGET]
    assert not vault.get(TARGET).superseded
    assert "Has a dog called Rex." in git(vault.root, "show", "HEAD~2:michael/fact/dog_name.md")


def test_edit_accepts_the_text_as_edited(vault: Vault, tmp_path: Path) -> None:
    propose(vault)
    before = commit_count(vault.root)
    command = editor(tmp_path, "path.write_text(path.read_text(encoding='utf-8').replace('Rex', 'Rex, a beagle'))\n")
    result = ok(in_vault(vault.root, "review", "edit", ADDED, env={"EDITOR": command}))
    assert result.stdout.startswith("accepted ")
    assert commit_count(vault.root) == before + 1
    memory = vault.get(ADDED)
    assert (memory.content, memory.verified, memory.proposed) == ("Has a dog called Rex, a beagle.", True, False)


def test_edit_that_leaves_the_text_unchanged_or_empty_accepts_nothing(vault: Vault, tmp_path: Path) -> None:
    propose(vault)
    before = commit_count(vault.root)
    for body, said in (
        ("path.write_text(path.read_text(encoding='utf-8') + '\\n')\n", "unchanged: nothing was accepted"),
        ("path.write_text('  \\n')\n", "the text is empty: nothing was accepted"),
    ):
        result = ok(in_vault(vault.root, "review", "edit", ADDED, env={"EDITOR": editor(tmp_path, body)}))
        assert said in result.stderr and result.stdout == ""
    assert commit_count(vault.root) == before
    assert vault.get(ADDED).proposed


def test_edit_refuses_a_failing_editor_or_a_content_that_is_no_memory(vault: Vault, tmp_path: Path) -> None:
    propose(vault)
    before = commit_count(vault.root)
    assert "EDITOR" in fails(in_vault(vault.root, "review", "edit", ADDED, env={"EDITOR": "false"}), 2).stderr
    too_big = editor(tmp_path, "path.write_text('x' * (11 * 1024 * 1024))\n")
    assert "content" in fails(in_vault(vault.root, "review", "edit", ADDED, env={"EDITOR": too_big}), 2).stderr
    assert commit_count(vault.root) == before
    assert vault.get(ADDED).proposed


def test_accept_all_asks_and_without_a_terminal_needs_yes(vault: Vault) -> None:
    propose(vault)
    before = commit_count(vault.root)
    refused = fails(in_vault(vault.root, "review", "--accept-all"), 2)
    assert "pass --yes" in refused.stderr and ADDED in refused.stdout
    assert commit_count(vault.root) == before
    result = ok(in_vault(vault.root, "review", "--accept-all", "--yes"))
    assert "accepted 2 proposals, one commit each" in result.stdout
    assert commit_count(vault.root) == before + 2
    assert vault.proposals() == [] and vault.get(TARGET).superseded
    nothing = ok(in_vault(vault.root, "review", "--accept-all", "--yes", "--json"))
    assert json.loads(nothing.stdout) == [] and commit_count(vault.root) == before + 2


def test_misplaced_options_are_usage_errors(vault: Vault) -> None:
    propose(vault)
    assert "--yes goes with --accept-all" in fails(in_vault(vault.root, "review", "--yes"), 2).stderr
    assert "after the subcommand" in fails(in_vault(vault.root, "review", "--accept-all", "accept", ADDED), 2).stderr
    fails(in_vault(vault.root, "review", "accept"), 2)  # no REF


def test_an_unknown_ref_or_one_that_waits_for_nothing_changes_nothing(vault: Vault) -> None:
    ids = propose(vault)
    before = commit_count(vault.root)
    assert "no memory 'nope'" in fails(in_vault(vault.root, "review", "accept", ADDED, "nope"), 3).stderr
    not_proposed = fails(in_vault(vault.root, "review", "reject", ids[ADDED], TARGET), 3).stderr
    assert f"{TARGET} is not waiting for review" in not_proposed
    assert "not waiting for review" in fails(in_vault(vault.root, "review", "edit", TARGET), 3).stderr
    assert "invalid" in fails(in_vault(vault.root, "review", "accept", "../../etc/passwd"), 2).stderr.lower()
    assert commit_count(vault.root) == before
    assert [m.ref for m in vault.proposals()] == [ADDED, UPDATE]


def test_an_agent_is_refused_by_every_review_command_and_sees_no_proposal(vault: Vault, tmp_path: Path) -> None:
    propose(vault)
    before = commit_count(vault.root)
    for args in (
        ("review",),
        ("review", "--json"),
        ("review", "--accept-all", "--yes"),
        ("review", "accept", ADDED),
        ("review", "reject", ADDED),
        ("review", "edit", ADDED),
    ):
        result = fails(in_vault(vault.root, *args, env={**AGENT, "EDITOR": editor(tmp_path, "")}), 2)
        assert "memfile review is for people" in result.stderr and result.stdout == ""
    assert commit_count(vault.root) == before
    for args in (("show", ADDED), ("forget", ADDED), ("store", "fact", "dog_name", "mine now")):
        assert "Rex" not in fails(in_vault(vault.root, *args, env=AGENT), {"store": 4}.get(args[0], 3)).stderr
    agents_search = ok(in_vault(vault.root, "search", "dog", "Rex", "--include-proposed", env=AGENT))
    assert agents_search.stdout == ""
    for query in ([], ["--query", "dog Rex"]):
        agents_recall = ok(in_vault(vault.root, "recall", *query, "--include-proposed", env=AGENT)).stdout
        assert "Has a dog called Rex." not in agents_recall and "[proposed]" not in agents_recall
    assert ok(in_vault(vault.root, "list", "--status", "proposed", env=AGENT)).stdout == ""
    assert "Rex" not in ok(in_vault(vault.root, "list", "--status", "all", env=AGENT)).stdout
    assert commit_count(vault.root) == before


def test_stats_count_proposals_apart_and_an_agents_count_none(vault: Vault) -> None:
    propose(vault)
    stats = vault.stats()
    assert (stats["total"], stats["unverified"], stats["proposed"]) == (1, 0, 2)
    assert stats["by_source"] == {"user": 1, "agent": 0}
    assert Vault.open(vault.root, vault.mind, source="agent").stats()["proposed"] == 0
    text = ok(in_vault(vault.root, "stats")).stdout
    assert "Memories: 1 (1 verified, 0 unverified" in text and "Waiting for review: 2 captured (memfile review)" in text
    assert "Waiting for review" not in ok(in_vault(vault.root, "stats", env=AGENT)).stdout


def test_search_list_and_show_mark_a_proposal_for_a_person(vault: Vault) -> None:
    ids = propose(vault)
    assert ok(in_vault(vault.root, "search", "dog", "Rex")).stdout == ""
    hit = ok(in_vault(vault.root, "search", "dog", "Rex", "--include-proposed")).stdout
    assert hit.startswith(f" 1. {ADDED}  (normal, proposed: memfile review, score ")
    [data] = json.loads(ok(in_vault(vault.root, "search", "dog", "Rex", "--include-proposed", "--json")).stdout)
    assert data["status"] == "proposed"
    listed = ok(in_vault(vault.root, "list", "--status", "proposed")).stdout.splitlines()
    assert [line.split()[:3] for line in listed] == [[ADDED, "normal", "proposed"], [UPDATE, "normal", "proposed"]]
    assert ADDED not in ok(in_vault(vault.root, "list")).stdout
    assert "Has a dog called Rex." not in ok(in_vault(vault.root, "recall", "--query", "dog Rex")).stdout
    recalled = ok(in_vault(vault.root, "recall", "--query", "dog Rex", "--include-proposed")).stdout
    assert "fact (NORMAL) [proposed]\n  dog_name\n  Has a dog called Rex.\n" in recalled
    shown = ok(in_vault(vault.root, "show", UPDATE)).stdout
    assert "status: proposed\npath: michael/preference/coffee_2.md\n" in shown and "superseded_by" not in shown
    assert f"captured_from: s1\ncaptured_turns: [0]\nproposed_supersedes: {ids[TARGET]}\n" in shown
