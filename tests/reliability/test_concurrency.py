"""Concurrent writers (issue 8): four processes store into one vault at once, nothing is lost.

Each process stores 100 memories through `Vault.store`: `shared_0..49` (stored by every process,
with process-specific content) and `p{n}_0..49` (its own). A LockTimeout or Conflict is retried.
Afterwards every version a process reported stored is in git history, every file parses, the index
matches the files, doctor finds no problem and the working tree is clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import git

from memfile import Vault

PROCESSES = 4
PER_KIND = 50

SCRIPT = r"""
import json, sys, time
from memfile import Conflict, LockTimeout, Vault

vault, n = sys.argv[1], int(sys.argv[2])
keys = [f"shared_{i}" for i in range(50)] + [f"p{n}_{i}" for i in range(50)]
for key in keys:
    content = f"{key} written by process {n} token{n}x{key.replace('_', 'x')}"
    for attempt in range(20):
        try:
            result = Vault.open(vault, "michael").store("fact", key, content)
            break
        except (LockTimeout, Conflict) as exc:
            print(f"retry {key}: {exc!r}", file=sys.stderr)
            time.sleep(0.05)
    else:
        sys.exit(f"gave up on {key}")
    print(json.dumps({"key": key, "content": content, "commit": result.commit}), flush=True)
"""


@pytest.mark.slow
def test_four_processes_store_at_once(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "v", "michael")
    root = vault.root
    vault.close()
    toml = root / "memfile.toml"
    toml.write_text("lock_timeout = 30\n" + toml.read_text(encoding="utf-8"), encoding="utf-8")
    if git(root, "status", "--porcelain").strip():
        git(
            root,
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "commit",
            "-q",
            "-am",
            "lock_timeout = 30",
        )

    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(root), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for n in range(PROCESSES)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    elapsed = time.monotonic() - started
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, (p.returncode, err[-3000:])

    stored = [json.loads(line) for out, _ in outputs for line in out.splitlines() if line.strip()]
    assert len(stored) == PROCESSES * 2 * PER_KIND, elapsed

    # Every version reported stored is in history, and its commit holds it.
    logs: dict[str, str] = {}
    for s in stored:
        path = f"michael/fact/{s['key']}.md"
        if path not in logs:
            logs[path] = git(root, "log", "-p", "--all", "--", path)
        assert s["content"] in logs[path], f"lost version: {s}"
        if s["commit"]:
            assert s["content"] in git(root, "show", f"{s['commit']}:{path}"), s

    v = Vault.open(root, "michael")
    try:
        memories = v.memories()
        assert v.issues == []
        keys = sorted(m.key for m in memories)
        shared = [k for k in keys if k.startswith("shared_")]
        private = [k for k in keys if not k.startswith("shared_")]
        assert len(shared) == PER_KIND and len(private) == PROCESSES * PER_KIND
        assert len(memories) == PER_KIND + PROCESSES * PER_KIND
        # Each shared memory holds one of the versions the processes stored.
        by_key = {m.key: m.content.strip() for m in memories}
        for i in range(PER_KIND):
            key = f"shared_{i}"
            assert by_key[key] in {s["content"] for s in stored if s["key"] == key}

        assert v.status()["stale"] == []
        hits = v.search("token2xp2x17")
        assert [h.memory.key for h in hits][:1] == ["p2_17"], hits
        assert v.doctor().problems == []
    finally:
        v.close()
    assert git(root, "status", "--porcelain") == ""
