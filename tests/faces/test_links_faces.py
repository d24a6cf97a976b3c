"""Wiki links and backlinks in every face: `memfile links` / `backlinks` / `show` / `doctor` (CLI), the MCP
`show` tool, `GET /memory/{id}`, the console's memory page, and export/import (docs/format.md, "Links").
The library's side and the Obsidian-style vault are in tests/core/test_links.py."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from helpers import fails, in_vault, ok
from helpers.console import Console, memory_url, page
from helpers.serve import Server, Setup

from memfile import Vault

HOSTILE = "<script>window.__pwned=1</script>"


def _linked_vault(vault: Vault) -> None:
    vault.store("identity", "alice", "Alice runs the project.")
    vault.store("identity", "old_owner", "Bob ran it.")
    vault.store("identity", "new_owner", "Carol runs it.", supersedes="identity/old_owner")
    vault.store(
        "project",
        "synapse",
        f"# Synapse\n\n- owned by [[alice|{HOSTILE}]]\n- previously [[old_owner]]\nSee [[nobody]].\n"
        "```\n[[in_code]]\n```\n",
    )


def test_cli_links_backlinks_show_and_doctor(vault: Vault) -> None:
    _linked_vault(vault)
    root = vault.root
    text = ok(in_vault(root, "links", "project/synapse")).stdout.splitlines()
    assert text[0].split() == ["identity/alice", "owned_by", "line", "3"]
    assert text[1].split()[:2] == ["(superseded)", "previously"] and "superseded by identity/new_owner" in text[1]
    assert "(missing)" in text[2] and "[[nobody]] names no memory of this mind" in text[2] and len(text) == 3
    links = json.loads(ok(in_vault(root, "links", "synapse", "--json")).stdout)
    assert [(link["target"], link["status"], link["ref"], link["relation"]) for link in links] == [
        ("alice", "resolved", "identity/alice", "owned_by"),
        ("old_owner", "superseded", "identity/new_owner", "previously"),
        ("nobody", "missing", None, None),
    ]
    assert links[0]["shown"] == HOSTILE  # data as written; a page escapes it
    back = ok(in_vault(root, "backlinks", "identity/new_owner")).stdout.split()
    assert back == ["project/synapse", "previously", "line", "4"]
    empty = ok(in_vault(root, "backlinks", "project/synapse"))
    assert empty.stdout == "" and "no backlinks" in empty.stderr
    assert json.loads(ok(in_vault(root, "backlinks", "project/synapse", "--json")).stdout) == []
    fails(in_vault(root, "links", "project/nothing"), 3)
    fails(in_vault(root, "links", "../../etc/passwd"), 2)
    shown = ok(in_vault(root, "show", "identity/alice")).stdout
    assert "--- backlinks\nproject/synapse" in shown and "owned_by" in shown
    data = json.loads(ok(in_vault(root, "show", "project/synapse", "--json")).stdout)
    assert [link["ref"] for link in data["links"]] == ["identity/alice", "identity/new_owner", None]
    assert data["backlinks"] == [] and data["content"].startswith("# Synapse")
    assert "Example: memfile links" in ok(in_vault(root, "links", "--help")).stdout
    assert "Example: memfile backlinks" in ok(in_vault(root, "backlinks", "--help")).stdout
    doctor = json.loads(ok(in_vault(root, "doctor", "--json")).stdout)  # a link to nothing is information
    [broken] = [f for f in doctor["findings"] if f["kind"] == "broken_link"]
    assert broken["problem"] is False
    lines = (root / broken["path"]).read_text(encoding="utf-8").splitlines()
    assert "[[nobody]]" in lines[broken["line"] - 1] and broken["path"] == "michael/project/synapse.md"


def test_doctor_names_an_ambiguous_link(vault: Vault) -> None:
    vault.store("fact", "office", "Berlin.")
    vault.store("note", "office", "The old office.")
    vault.store("note", "trip", "Go to [[office]].")
    found = [f for f in vault.doctor().findings if f.kind == "ambiguous_link"]
    assert len(found) == 1 and "fact/office.md" in found[0].message and "note/office.md" in found[0].message
    assert found[0].line is not None


def test_export_and_import_carry_links_untouched(vault: Vault, tmp_path: Path) -> None:
    _linked_vault(vault)
    out = io.StringIO()
    vault.export(out)
    other = Vault.init(tmp_path / "other", "michael")
    other.import_(out.getvalue().encode("utf-8"))
    assert other.get("project/synapse").content == vault.get("project/synapse").content
    assert [r.to_dict() | {"id": None, "source_id": None} for r in other.links("project/synapse")] == [
        r.to_dict() | {"id": None, "source_id": None} for r in vault.links("project/synapse")
    ]


def test_mcp_show_carries_links_and_backlinks(vault: Vault) -> None:
    from helpers.mcp import Agent, serve

    _linked_vault(vault)

    async def script(agent: Agent) -> Any:
        return await agent.ok("show", ref="identity/alice"), await agent.ok("show", ref="project/synapse")

    alice, synapse = serve(vault.root, script)
    assert [(b["source"], b["relation"]) for b in alice["backlinks"]] == [("project/synapse", "owned_by")]
    assert [link["status"] for link in synapse["links"]] == ["resolved", "superseded", "missing"]


def test_http_get_memory_carries_links_and_backlinks(setup: Setup, server: Server, agent: str) -> None:
    with Vault.open(setup.root, "michael") as vault:
        vault.store("identity", "http_owner", "Dana.")
        stored = vault.store("project", "http_project", "- owned by [[http_owner]]\n[[anna_thing]]")
    answer = server.request("GET", f"/memory/{stored.memory.id}", agent)
    assert answer.status == 200, answer.body
    data = answer.json()
    assert data["mind_id"] == "michael" and data["backlinks"] == []
    assert [(link["ref"], link["relation"], link["status"]) for link in data["links"]] == [
        ("identity/http_owner", "owned_by", "resolved"),
        (None, None, "missing"),
    ]
    owner = server.request("GET", "/memory/http_owner", agent)
    assert [b["source"] for b in owner.json()["backlinks"]] == ["project/http_project"]


def test_console_memory_page_links_and_backlinks_escaped(console: Console) -> None:
    owner = console.store("console_owner", "Erin.", category="identity")
    project = console.store(
        "console_project", f"- owned by [[console_owner|{HOSTILE}]]\n[[console_nowhere]]", category="project"
    )
    client = console.person()
    html = page(client, memory_url(project.id))
    links = html.split('id="links"', 1)[1].split("</ul>", 1)[0]
    assert f'href="{memory_url(owner.id)}"' in links and "owned_by" in links
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in links
    assert "[[console_nowhere]]" in links and "names no memory" in links
    backlinks = page(client, memory_url(owner.id)).split('id="backlinks"', 1)[1].split("</ul>", 1)[0]
    assert f'href="{memory_url(project.id)}"' in backlinks and "project/console_project" in backlinks
