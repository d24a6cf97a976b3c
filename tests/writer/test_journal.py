"""A write of several files killed before its commit, undone by the next write (memfile/journal.py).

The killed write is a real process: it records its journal and puts its files as a write does
(`journal.journaled`), then dies with `os._exit` inside the write, so nothing after it runs.
The slow end-to-end runs (an import SIGKILLed at three moments) are in tests/reliability/test_killed_import.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import git

from memfile import Vault

KILLED = """
import os, sys
from pathlib import Path
from memfile import journal
from memfile.git import GitStore
root, mind = Path(sys.argv[1]), sys.argv[2]
writes = [(f"{mind}/fact/{name}.md", root / mind / "fact" / f"{name}.md", f"zebra {name}\\n".encode())
          for name in ("old", "new")]
with journal.journaled(root, mind, writes, sys.argv[3], GitStore(root, "t", "t@example.invalid")):
    for _, path, data in writes:
        path.write_bytes(data)
    os._exit(9)  # killed before its commit: nothing after this line runs
"""


def killed_write(root: Path, mind: str, message: str) -> None:
    ran = subprocess.run([sys.executable, "-c", KILLED, str(root), mind, message], capture_output=True, timeout=60)
    assert ran.returncode == 9, ran.stderr
    assert (root / ".memfile" / "unfinished-write").exists()


def test_a_killed_write_of_another_mind_is_put_back_and_never_enters_this_minds_index(tmp_path: Path) -> None:
    """Review of issue 39: mind b's write undid mind a's killed write and read a's files into b's index."""
    a = Vault.init(tmp_path / "vault", "a")
    a.store("fact", "old", "the old fact of a")
    a.close()
    Vault.init(tmp_path / "vault", "b").close()
    killed_write(tmp_path / "vault", "a", "import 2 memories from x.jsonl (user)")
    with Vault.open(tmp_path / "vault", "b") as b:
        b.store("fact", "mine", "b's own fact")
        assert any("undid the write a killed memfile left unfinished" in n for n in b.notices)
        assert [m.ref for m in b.list()] == ["fact/mine"]
        assert b.search("zebra") == [] and b.recall(query="zebra").items == ()
    assert (tmp_path / "vault" / "a" / "fact" / "old.md").read_text().endswith("the old fact of a\n")
    assert not (tmp_path / "vault" / "a" / "fact" / "new.md").exists()
    assert git(tmp_path / "vault", "status", "--porcelain") == ""


def test_a_killed_write_with_the_message_of_the_last_commit_is_still_undone(tmp_path: Path) -> None:
    """The same import run again and killed: its message is the last commit's, yet it was not committed."""
    vault = Vault.init(tmp_path / "vault", "a")
    vault.store("fact", "old", "the old fact")
    subject = git(vault.root, "log", "-1", "--format=%s").strip()
    body = git(vault.root, "log", "-1", "--format=%b").strip()
    killed_write(vault.root, "a", f"{subject}\n\n{body}")
    vault.store("fact", "other", "another fact")
    assert any("undid the write a killed memfile left unfinished" in n for n in vault.notices)
    assert not (vault.root / "a" / "fact" / "new.md").exists()
    assert (vault.root / "a" / "fact" / "old.md").read_text().endswith("the old fact\n")
    assert git(vault.root, "status", "--porcelain") == ""
    assert not (vault.root / ".memfile" / "unfinished-write").exists()


def test_the_journal_names_its_mind_files_and_the_commit_it_started_from(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "vault", "a")
    vault.store("fact", "old", "the old fact")
    killed_write(vault.root, "a", "import 2 memories")
    record = json.loads((vault.root / ".memfile" / "unfinished-write").read_text())
    assert record["mind"] == "a" and record["head"] == git(vault.root, "rev-parse", "HEAD").strip()
    assert sorted(record["files"]) == ["a/fact/new.md", "a/fact/old.md"]
