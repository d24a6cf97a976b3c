"""The watcher under a storm (issue 8): thousands of random edits, renames and deletes while searches
run; at the end the index matches the files.

A real vault is seeded with hand-made memory files (full front-matter, partial, none, front-matter
that disagrees with the path, CRLF, a BOM, some unreadable) and a real `memfile watch` process is
started on it. The test process then changes the mind folder as fast as editors and people would,
from a seeded `random.Random` (the seed is printed; MEMFILE_STORM_SEED=N replays the same
operations): edits in place and through a temp file renamed over the memory (JetBrains, sed -i,
dot-temp, vim with its 4913 probe and `~` backup), bursts of same-size saves of one file, appends,
touches, renames within a folder (to a new name, over another memory, onto a freed name), moves
between category folders, deletes, moves to a trash outside the vault and in from outside, files
broken (bad YAML, unknown category, conflict markers) and fixed, editor junk that is never a memory,
and now and then a whole folder moved, moved in or moved out. Short pauses and a few quiet spells
longer than the debounce let batches land mid-storm.

Meanwhile a second Python process searches without pause (a long-lived Vault and fresh ones, plus
`memories()` and `recall`) and a thread runs `memfile search/list/recall` processes. The pinned
memories, which the storm never touches, must be found by each of those, exactly; nothing may raise
or exit non-zero, and no searcher may take the index for damaged.

Then the searchers stop, and a coda makes every kind of change once more (only the watcher hears
these), writes one more unreadable file and a sentinel. The test polls (up to 60 s, never a fixed
sleep) until the watcher vouches for the index, the index's recorded stats are the files' and the
sentinel is found. Then:

* the catalog read under the watcher's vouching (no stat check) equals, memory for memory and field
  for field, what parsing each file gives; its issues are the unreadable files with line and reason;
  the test's own model of what it wrote agrees with both;
* a search for each live file's unique token finds exactly that file (the hit's memory is the
  file's), OR searches over many tokens find exactly the files holding them, and no token that the
  storm overwrote, deleted, put in junk or in an unreadable file is found;
* the watcher is alive, warned about each unreadable file only it read (line and reason), logged no
  failed batch and no traceback, and stops with exit 0 within 2.5 s on SIGTERM (SIGINT in the quick
  runs), taking its marker away;
* without the watcher a stat-only diff finds nothing to re-read, the same checks hold, and a rebuild
  from scratch (`reindex`) gives the same memories and issues;
* with `--autocommit` (a quick run), no memory file is left uncommitted.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers import git, recorded, wait_until, watcher_vouches

from memfile import Memory, ParseIssue, Vault
from memfile.errors import FileParseError
from memfile.fileformat import parse
from memfile.index.source import stat_walk
from memfile.model import derive_key

MIND = "michael"
CATEGORIES = ("identity", "preference", "fact", "project", "skill", "mistake", "context", "note")
PINNED = 10
CATCH_UP_TIMEOUT = 60.0
#: watchdog holds a move out of the vault back for 0.5 s (to pair it with a move in): after this long
#: it has surely been heard.
SETTLE = 1.5


# --- what the storm writes ------------------------------------------------------------------


@dataclass
class Entry:
    """One file as the storm last wrote it (the model the index is checked against, besides the disk)."""

    meta: dict[str, str] | None  # front-matter fields written; None: no front-matter
    body: str  # "\n" line ends; the memory's content is body.strip() (an unreadable file: its whole text)
    tokens: list[str]  # the unique words the body holds
    broken_line: int | None = None  # an unreadable file: the line its issue names
    crlf: bool = False
    bom: bool = False


def token_of(n: int) -> str:
    """A word no other file holds, unchanged by the analyzer (no vowel, no suffix to stem)."""
    return f"zq{n:07d}k"


def body_of(stem: str, rev: int, token: str) -> str:
    """Fixed-width pieces: a same-size rewrite of one file keeps its size (the racy-stat case)."""
    return f"storm revision {rev:06d} of {stem}: {token}\nfiller line for the index\n"


def render(entry: Entry) -> str:
    if entry.meta is None:
        text = entry.body
    else:
        text = "---\n" + "".join(f"{k}: {v}\n" for k, v in entry.meta.items()) + "---\n" + entry.body
    if entry.crlf:
        text = text.replace("\n", "\r\n")
    return ("\ufeff" if entry.bom else "") + text


BROKEN_KINDS = {
    # kind: (text, the line the issue names)
    "yaml": ("---\nid: mem_broken{n}\ncategory: fact\nkey: a: b\n---\n{body}", 4),
    "category": ("---\ncategory: banana\n---\n{body}", 2),
    "conflict": ("<<<<<<< ours\n{body}=======\nthe other side\n>>>>>>> theirs\n", 1),
}


def expected(path: str, entry: Entry) -> tuple[str, str, str]:
    """(category, key, content) by the README's rules: front-matter first, else the folder and file name."""
    parts = path.split("/")
    parent, stem = parts[-2], parts[-1][:-3]
    meta = entry.meta or {}
    category = meta.get("category") or (parent if parent in CATEGORIES else "note")
    return category, meta.get("key") or derive_key(stem), entry.body.strip()


class Storm:
    """Random changes to a mind folder, from a seeded generator, with a model of what is on disk."""

    def __init__(self, root: Path, outside: Path, rng: random.Random) -> None:
        self.root, self.outside, self.rng = root, outside, rng
        self.files: dict[str, Entry] = {}  # what the storm may touch
        self.pinned: dict[str, Entry] = {}  # never touched: every search must find them
        self.subfolders: list[str] = []  # michael/<category>/archNNN
        self.freed: list[str] = []  # paths deleted or renamed away: reused by `recreate`
        self.serial = 0
        self.tokens_ever: set[str] = set()
        self.ops: Counter[str] = Counter()
        self.junk: set[str] = set()
        self.seeded_broken: dict[str, int] = {}  # path -> line: the watcher's first pass must warn about each
        self.moved_out = 0.0  # when a file or folder last left the vault (watchdog holds that event back)

    # --- helpers ---------------------------------------------------------------------------

    def next(self) -> int:
        self.serial += 1
        return self.serial

    def token(self) -> str:
        token = token_of(self.next())
        self.tokens_ever.add(token)
        return token

    def stem(self) -> str:
        return f"m{self.next():05d}"

    def abs(self, relpath: str) -> Path:
        return self.root / relpath

    def ok_paths(self) -> list[str]:
        return [p for p, e in self.files.items() if e.broken_line is None]

    def broken_paths(self) -> list[str]:
        return [p for p, e in self.files.items() if e.broken_line is not None]

    def live_tokens(self) -> dict[str, str]:
        """token -> path of every token a readable file holds now."""
        return {t: p for p, e in self.everything().items() if e.broken_line is None for t in e.tokens}

    def everything(self) -> dict[str, Entry]:
        return {**self.files, **self.pinned}

    def new_entry(self, folder: str, stem: str, style: str | None = None) -> Entry:
        style = (
            style or self.rng.choices(["full", "disagree", "minimal", "bare", "crlf", "bom"], [40, 10, 20, 20, 5, 5])[0]
        )
        token = self.token()
        body = body_of(stem, 0, token)
        parent = folder.rsplit("/", 1)[-1]
        category = parent if parent in CATEGORIES else self.rng.choice(CATEGORIES)
        n = self.serial
        meta: dict[str, str] | None
        if style in ("full", "crlf", "bom"):
            meta = {
                "id": f"mem_s{n:010d}",
                "category": category,
                "key": stem,
                "priority": self.rng.choice(["low", "normal", "high"]),
                "tags": f"[storm, t{n % 7}]",
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-02T00:00:00Z",
            }
        elif style == "disagree":  # front-matter names another category and key than the path
            meta = {
                "id": f"mem_s{n:010d}",
                "category": self.rng.choice([c for c in CATEGORIES if c != parent]),
                "key": f"other_{n}",
            }
        elif style == "minimal":
            meta = {"priority": "low", "tags": "[storm]"}
        else:
            meta = None
        return Entry(meta, body, [token], crlf=style == "crlf", bom=style == "bom")

    def broken_entry(self, stem: str) -> Entry:
        kind = self.rng.choice(sorted(BROKEN_KINDS))
        template, line = BROKEN_KINDS[kind]
        token = self.token()
        return Entry(None, template.format(n=self.serial, body=body_of(stem, 0, token)), [token], broken_line=line)

    def write(self, relpath: str, entry: Entry, how: str | None = None) -> None:
        """Write a file as some editor would: in place, or through a temp file renamed over it."""
        path = self.abs(relpath)
        data = render(entry).encode("utf-8") if entry.broken_line is None else entry.body.encode("utf-8")
        how = how or self.rng.choices(["inplace", "jetbrains", "dottemp", "sed", "vim"], [45, 15, 15, 15, 10])[0]
        self.ops[f"write:{how}"] += 1
        if how == "inplace":
            with open(path, "wb") as handle:
                handle.write(data)
        elif how == "vim":  # the 4913 probe, a backup left beside the file, then in place
            probe = path.parent / "4913"
            probe.write_bytes(b"")
            probe.unlink()
            if path.exists():
                shutil.copyfile(path, path.with_name(path.name + "~"))
                self.junk.add(relpath + "~")
            with open(path, "wb") as handle:
                handle.write(data)
        else:
            temp = {
                "jetbrains": path.with_name(path.name + "___jb_tmp___"),
                "dottemp": path.with_name(f".{path.name}.{self.serial}.tmp"),
                "sed": path.parent / f"sed{self.serial:06d}",
            }[how]
            temp.write_bytes(data)
            os.replace(temp, path)
        self.files[relpath] = entry

    def forget(self, relpath: str) -> None:
        del self.files[relpath]
        self.freed.append(relpath)

    # --- seeding ---------------------------------------------------------------------------

    def seed(self, count: int, subfolders: int, per_subfolder: int) -> None:
        for category in CATEGORIES:
            (self.root / MIND / category).mkdir(parents=True, exist_ok=True)
        for i in range(PINNED):
            relpath = f"{MIND}/identity/pinned_{i:02d}.md"
            entry = self.new_entry(f"{MIND}/identity", f"pinned_{i:02d}", style="full")
            self.abs(relpath).write_text(render(entry), encoding="utf-8")
            self.pinned[relpath] = entry
        for _ in range(subfolders):
            folder = f"{MIND}/{self.rng.choice(CATEGORIES)}/arch{self.next():03d}"
            self.abs(folder).mkdir()
            self.subfolders.append(folder)
            for _ in range(per_subfolder):
                stem = self.stem()
                self.write(f"{folder}/{stem}.md", self.new_entry(folder, stem), how="inplace")
        for i in range(count):
            folder = f"{MIND}/{CATEGORIES[i % len(CATEGORIES)]}"
            stem = self.stem()
            entry = self.broken_entry(stem) if i % 40 == 39 else self.new_entry(folder, stem)
            self.write(f"{folder}/{stem}.md", entry, how="inplace")
            if entry.broken_line is not None:
                self.seeded_broken[f"{folder}/{stem}.md"] = entry.broken_line
        self.ops.clear()

    # --- the operations -------------------------------------------------------------------

    OPS = {
        "edit": 24,
        "burst": 4,
        "append": 5,
        "touch": 2,
        "rename": 10,
        "move": 5,
        "delete": 7,
        "trash": 2,
        "import": 2,
        "create": 14,
        "recreate": 3,
        "break": 5,
        "fix": 4,
        "junk": 3,
        "folder_move": 0.1,
        "folder_in": 0.06,
        "folder_out": 0.04,  # rare: a folder event makes a batch a full diff
    }

    def step(self) -> None:
        names = list(self.OPS)
        op = self.rng.choices(names, [self.OPS[n] for n in names])[0]
        if not getattr(self, f"op_{op}")():
            op = "create"
            self.op_create()
        self.ops[op] += 1

    def op_edit(self) -> bool:
        ok = self.ok_paths()
        if not ok:
            return False
        relpath = self.rng.choice(ok)
        old = self.files[relpath]
        stem = relpath.rsplit("/", 1)[1][:-3]
        token = self.token()
        self.write(relpath, Entry(old.meta, body_of(stem, self.serial, token), [token], crlf=old.crlf, bom=old.bom))
        return True

    def op_burst(self) -> bool:
        """One file saved again and again in place, same size each time (an autosaving editor)."""
        ok = self.ok_paths()
        if not ok:
            return False
        relpath = self.rng.choice(ok)
        old = self.files[relpath]
        stem = relpath.rsplit("/", 1)[1][:-3]
        for _ in range(self.rng.randint(2, 6)):
            token = self.token()
            self.write(
                relpath,
                Entry(old.meta, body_of(stem, self.serial % 1_000_000, token), [token], crlf=old.crlf, bom=old.bom),
                how="inplace",
            )
        return True

    def op_append(self) -> bool:
        ok = self.ok_paths()
        if not ok:
            return False
        relpath = self.rng.choice(ok)
        entry = self.files[relpath]
        token = self.token()
        line = f"appended {token}\n"
        with open(self.abs(relpath), "a", encoding="utf-8", newline="") as handle:
            handle.write(line.replace("\n", "\r\n") if entry.crlf else line)
        entry.body += line
        entry.tokens.append(token)
        self.ops["write:append"] += 1
        return True

    def op_touch(self) -> bool:
        if not self.files:
            return False
        os.utime(self.abs(self.rng.choice(list(self.files))))
        return True

    def op_rename(self) -> bool:
        """Within its folder: to a new name, over another memory, or onto a name freed earlier."""
        if not self.files:
            return False
        source = self.rng.choice(list(self.files))
        folder = source.rsplit("/", 1)[0]
        roll = self.rng.random()
        siblings = [p for p in self.files if p.rsplit("/", 1)[0] == folder and p != source]
        freed = [p for p in self.freed if p.rsplit("/", 1)[0] == folder and p not in self.files]
        if roll < 0.15 and siblings:
            target = self.rng.choice(siblings)
            self.ops["rename:over"] += 1
        elif roll < 0.3 and freed:
            target = self.rng.choice(freed)
            self.ops["rename:freed"] += 1
        else:
            target = f"{folder}/{self.stem()}.md"
        os.rename(self.abs(source), self.abs(target))
        entry = self.files.pop(source)
        self.freed.append(source)
        self.files[target] = entry
        return True

    def op_move(self) -> bool:
        """To another category folder (top level), under a name free there."""
        if not self.files:
            return False
        source = self.rng.choice(list(self.files))
        stem = source.rsplit("/", 1)[1]
        target = f"{MIND}/{self.rng.choice(CATEGORIES)}/{stem}"
        if target in self.files or target in self.pinned or target == source:
            target = f"{MIND}/{self.rng.choice(CATEGORIES)}/{self.stem()}.md"
        os.rename(self.abs(source), self.abs(target))
        self.files[target] = self.files.pop(source)
        self.freed.append(source)
        return True

    def op_delete(self) -> bool:
        if not self.files:
            return False
        relpath = self.rng.choice(list(self.files))
        os.remove(self.abs(relpath))
        self.forget(relpath)
        return True

    def op_trash(self) -> bool:
        """Moved out of the vault (a file manager's trash): an unpaired rename watchdog holds back."""
        if not self.files:
            return False
        relpath = self.rng.choice(list(self.files))
        os.rename(self.abs(relpath), self.outside / "trash" / f"{self.next()}.md")
        self.moved_out = time.monotonic()
        self.forget(relpath)
        return True

    def op_import(self) -> bool:
        """Written outside the vault, then moved in."""
        folder = f"{MIND}/{self.rng.choice(CATEGORIES)}"
        stem = self.stem()
        entry = self.new_entry(folder, stem)
        staging = self.outside / "incoming" / f"{stem}.md"
        staging.write_text(render(entry), encoding="utf-8", newline="")
        os.rename(staging, self.abs(f"{folder}/{stem}.md"))
        self.files[f"{folder}/{stem}.md"] = entry
        return True

    def op_create(self) -> bool:
        folders = [f"{MIND}/{c}" for c in CATEGORIES] + self.subfolders
        folder = self.rng.choice(folders)
        stem = self.stem()
        entry = self.broken_entry(stem) if self.rng.random() < 0.1 else self.new_entry(folder, stem)
        self.write(f"{folder}/{stem}.md", entry)
        return True

    def op_recreate(self) -> bool:
        """A new file where one was deleted or renamed away (the same path, maybe the same inode)."""
        candidates = [p for p in self.freed[-50:] if p not in self.files and self.abs(p).parent.is_dir()]
        if not candidates:
            return False
        relpath = self.rng.choice(candidates)
        folder, name = relpath.rsplit("/", 1)
        self.write(relpath, self.new_entry(folder, name[:-3]))
        return True

    def op_break(self) -> bool:
        ok = self.ok_paths()
        if not ok:
            return False
        relpath = self.rng.choice(ok)
        self.write(relpath, self.broken_entry(relpath.rsplit("/", 1)[1][:-3]))
        return True

    def op_fix(self) -> bool:
        broken = self.broken_paths()
        if not broken:
            return False
        relpath = self.rng.choice(broken)
        folder, name = relpath.rsplit("/", 1)
        self.write(relpath, self.new_entry(folder, name[:-3]))
        return True

    def op_junk(self) -> bool:
        """Editor and tool leftovers beside a memory: never memories."""
        if not self.files:
            return False
        relpath = self.rng.choice(list(self.files))
        folder, name = relpath.rsplit("/", 1)
        junk = f"{folder}/" + self.rng.choice(
            [
                f"{name}~",
                f".{name}.swp",
                f".#{name}",
                f"#{name}#",
                f"{name}.orig",
                f"{name}.bak",
                "notes.txt",
                f"{name}.tmp",
            ]
        )
        if junk in self.junk and self.rng.random() < 0.5 and self.abs(junk).exists():
            os.remove(self.abs(junk))
            self.junk.discard(junk)
        else:
            self.abs(junk).write_text(f"junk {self.token()}\n", encoding="utf-8")
            self.junk.add(junk)
        return True

    def _rehome(self, old: str, new: str | None) -> None:
        for relpath in [p for p in self.files if p.startswith(old + "/")]:
            entry = self.files.pop(relpath)
            self.freed.append(relpath)
            if new is not None:
                self.files[new + relpath[len(old) :]] = entry
        self.junk = {j for j in self.junk if not j.startswith(old + "/")} | (
            {new + j[len(old) :] for j in self.junk if j.startswith(old + "/")} if new else set()
        )
        self.subfolders.remove(old)
        if new is not None:
            self.subfolders.append(new)

    def op_folder_move(self) -> bool:
        if not self.subfolders:
            return False
        old = self.rng.choice(self.subfolders)
        new = f"{MIND}/{self.rng.choice(CATEGORIES)}/arch{self.next():03d}"
        os.rename(self.abs(old), self.abs(new))
        self._rehome(old, new)
        return True

    def op_folder_in(self) -> bool:
        name = f"arch{self.next():03d}"
        staging = self.outside / "incoming" / name
        staging.mkdir()
        folder = f"{MIND}/{self.rng.choice(CATEGORIES)}/{name}"
        entries = {}
        for _ in range(3):
            stem = self.stem()
            entries[f"{folder}/{stem}.md"] = entry = self.new_entry(folder, stem)
            (staging / f"{stem}.md").write_text(render(entry), encoding="utf-8", newline="")
        os.rename(staging, self.abs(folder))
        self.files.update(entries)
        self.subfolders.append(folder)
        return True

    def op_folder_out(self) -> bool:
        if len(self.subfolders) < 2:
            return False
        old = self.rng.choice(self.subfolders)
        os.rename(self.abs(old), self.outside / "trash" / f"dir{self.next()}")
        self.moved_out = time.monotonic()
        self._rehome(old, None)
        return True

    #: Every kind of change once more, after the searchers stopped, so that only the watcher hears them:
    #: first the folder changes (their batch is a full diff, which would catch any change made with
    #: them), then, once those are indexed and heard, the file changes, touch last (no later change of
    #: the file may hide a missed one).
    CODA_FOLDERS = ("folder_move", "folder_in", "folder_out")
    CODA_FILES = (
        "edit",
        "burst",
        "append",
        "rename",
        "move",
        "delete",
        "trash",
        "import",
        "create",
        "recreate",
        "break",
        "fix",
        "junk",
        "touch",
    )

    def coda(self, ops: tuple[str, ...]) -> list[str]:
        done = [op for op in ops if getattr(self, f"op_{op}")()]
        self.ops.update(f"coda:{op}" for op in done)
        return done

    def last_broken(self) -> tuple[str, int]:
        """An unreadable file written when only the watcher reads: it must warn about it."""
        relpath = f"{MIND}/fact/storm_last_broken.md"
        entry = self.broken_entry("storm_last_broken")
        self.write(relpath, entry)
        assert entry.broken_line is not None
        return relpath, entry.broken_line

    def sentinel(self, name: str) -> tuple[str, str]:
        """A new file: once it is indexed, the watcher heard every change before it (inotify keeps their
        order, and watchdog holds an unpaired rename at the head of its queue, not aside)."""
        relpath = f"{MIND}/note/{name}.md"
        entry = self.new_entry(f"{MIND}/note", name, style="full")
        self.write(relpath, entry, how="jetbrains")
        return relpath, entry.tokens[0]


# --- the searchers ---------------------------------------------------------------------------

SEARCHER = r"""
import json, os, sys, traceback
from pathlib import Path
from memfile import Vault
from memfile.index.source import watcher_vouches

root, stop, pinned = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
stats = {"searches": 0, "vouched": 0, "fresh_vaults": 0, "memories": 0, "recalls": 0}
errors, wrong, notices = [], [], []
long_lived = Vault.open(root, "michael")
i = 0
while True:
    i += 1
    fresh = i % 3 == 0
    vault = Vault.open(root, "michael") if fresh else long_lived
    stats["fresh_vaults"] += fresh
    path, token = pinned[i % len(pinned)]
    try:
        stats["vouched"] += watcher_vouches(Path(root), "michael")
        got = [h.memory.path for h in vault.search(token, limit=5)]
        stats["searches"] += 1
        if got != [path]:
            wrong.append(["search", token, path, got])
        for hit in vault.search("storm revision filler", limit=50):
            if not hit.memory.path.startswith("michael/") or not hit.memory.path.endswith(".md"):
                wrong.append(["broad search", hit.memory.path])
        stats["searches"] += 1
        if i % 5 == 0:
            paths = {m.path for m in vault.memories()}
            stats["memories"] += 1
            missing = sorted(p for p, _ in pinned if p not in paths)
            if missing:
                wrong.append(["memories", missing])
        if i % 7 == 0:
            vault.recall(budget=400)
            stats["recalls"] += 1
    except Exception:
        errors.append(traceback.format_exc())
    finally:
        notices.extend(vault.notices)
        vault.notices.clear()
        if fresh:
            vault.close()
    if i == 1:
        print("ready", flush=True)
    if os.path.exists(stop):
        break
long_lived.close()
print(json.dumps({"stats": stats, "errors": errors[:20], "error_count": len(errors), "wrong": wrong[:20],
                  "wrong_count": len(wrong), "notices": sorted(set(notices))}), flush=True)
"""


class CliSearcher(threading.Thread):
    """`memfile search`, `list` and `recall` processes, one after another, until stopped (at least one of each)."""

    def __init__(self, root: Path, pinned: list[tuple[str, str]]) -> None:
        super().__init__(name="storm-cli", daemon=True)
        self.root, self.pinned = root, pinned
        self.halt = threading.Event()
        self.runs: Counter[str] = Counter()
        self.problems: list[str] = []

    def run(self) -> None:
        i = 0
        while True:
            path, token = self.pinned[i % len(self.pinned)]
            kind = ("search", "list", "recall")[i % 3]
            args = {
                "search": ["search", "--json", token],
                "list": ["list", "--json"],
                "recall": ["recall", "--budget", "300"],
            }[kind]
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "memfile", "--vault", str(self.root), *args],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.problems.append(f"{kind}: {exc!r}")
                return
            self.runs[kind] += 1
            if done.returncode != 0 or "Traceback" in done.stderr:
                self.problems.append(f"{kind} exit {done.returncode}: {done.stderr[-2000:]}")
            elif "damaged" in done.stderr or "cannot be used" in done.stderr:
                self.problems.append(f"{kind} found the index damaged: {done.stderr[-2000:]}")
            elif kind == "search" and [h["path"] for h in json.loads(done.stdout)] != [path]:
                self.problems.append(f"search {token}: {done.stdout[:500]}")
            elif kind == "list" and path not in {m["path"] for m in json.loads(done.stdout)}:
                self.problems.append(f"list lacks {path}")
            i += 1
            if self.halt.is_set() and i >= 3:
                return


# --- checking ---------------------------------------------------------------------------------


def read_truth(root: Path) -> tuple[dict[str, tuple[int, int, int]], dict[str, Memory], dict[str, ParseIssue]]:
    """Every memory file parsed from disk, as a reader would without any index."""
    disk = stat_walk(root / MIND, root)
    memories: dict[str, Memory] = {}
    issues: dict[str, ParseIssue] = {}
    for relpath, (_, mtime_ns, *_) in sorted(disk.items()):
        mtime = datetime.fromtimestamp(mtime_ns // 1_000_000_000, timezone.utc)
        try:
            memories[relpath] = parse((root / relpath).read_bytes(), relpath, mtime)
        except FileParseError as exc:
            issues[relpath] = ParseIssue(exc.path, exc.line, exc.reason)
    return disk, memories, issues


def differences(
    label: str,
    memories: Iterable[Memory],
    issues: Iterable[ParseIssue],
    truth: dict[str, Memory],
    truth_issues: dict[str, ParseIssue],
) -> list[str]:
    """What differs between an index's memories and issues and the files'."""
    out: list[str] = []
    got: dict[str, Memory] = {}
    for memory in memories:
        if memory.path in got:
            out.append(f"{label}: {memory.path} appears twice")
        got[memory.path] = memory
    for relpath in sorted(got.keys() | truth.keys()):
        if relpath not in truth:
            out.append(
                f"{label}: {relpath} is indexed but is " + ("unreadable" if relpath in truth_issues else "not on disk")
            )
        elif relpath not in got:
            out.append(f"{label}: {relpath} is on disk but not indexed")
        elif got[relpath] != truth[relpath]:
            mine, theirs = got[relpath].to_dict(), truth[relpath].to_dict()
            fields = {
                k: (mine.get(k), theirs.get(k)) for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)
            }
            out.append(f"{label}: {relpath} differs (index, file): {fields or 'in a field to_dict leaves out'}")
    got_issues = {i.path: i for i in issues}
    for relpath in sorted(got_issues.keys() | truth_issues.keys()):
        if got_issues.get(relpath) != truth_issues.get(relpath):
            out.append(
                f"{label}: issue of {relpath}: index {got_issues.get(relpath)}, file {truth_issues.get(relpath)}"
            )
    return out


def model_differences(
    storm: Storm, disk: dict[str, Any], truth: dict[str, Memory], truth_issues: dict[str, ParseIssue]
) -> list[str]:
    """What the storm believes it wrote against what parsing the files gives (a check of the test itself)."""
    out: list[str] = []
    model = storm.everything()
    if set(model) != set(disk):
        out.append(
            f"model: paths only in the model {sorted(set(model) - set(disk))[:10]}, "
            f"only on disk {sorted(set(disk) - set(model))[:10]}"
        )
    for relpath, entry in sorted(model.items()):
        if relpath not in disk:
            continue
        if entry.broken_line is not None:
            issue = truth_issues.get(relpath)
            if issue is None or issue.line != entry.broken_line:
                out.append(f"model: {relpath} should be unreadable at line {entry.broken_line}: {issue}")
        elif relpath not in truth:
            out.append(f"model: {relpath} should be readable: {truth_issues.get(relpath)}")
        else:
            memory = truth[relpath]
            if (str(memory.category), memory.key, memory.content) != expected(relpath, entry):
                out.append(
                    f"model: {relpath}: {(str(memory.category), memory.key, memory.content)} "
                    f"!= {expected(relpath, entry)}"
                )
            if entry.meta and "id" in entry.meta and memory.id != entry.meta["id"]:
                out.append(f"model: {relpath}: id {memory.id} != {entry.meta['id']}")
    return out


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def search_differences(
    label: str,
    vault: Vault,
    truth: dict[str, Memory],
    live: dict[str, str],
    dead: list[str],
    singles: int | None = None,
) -> tuple[list[str], int]:
    """Each live token finds exactly its file (all of them, or a fixed sample of `singles`);
    OR groups of live tokens find exactly their files; gone tokens find nothing."""
    out: list[str] = []
    searches = 0
    tokens = sorted(live.items())
    if singles is not None and singles < len(tokens):
        tokens = random.Random(len(dead)).sample(tokens, singles)
    for token, relpath in tokens:
        hits = vault.search(token, limit=10)
        searches += 1
        if [h.memory.path for h in hits] != [relpath]:
            out.append(f"{label}: search {token} found {[h.memory.path for h in hits]}, not [{relpath}]")
        elif hits[0].memory != truth.get(relpath):
            out.append(f"{label}: search {token}: the hit's memory is not the file's ({relpath})")
    for group in chunks(sorted(live.items()), 100):
        hits = vault.search(" ".join(t for t, _ in group), limit=1000)
        searches += 1
        got, want = sorted(h.memory.path for h in hits), sorted({p for _, p in group})
        if got != want:
            out.append(
                f"{label}: OR search of {len(group)} tokens: extra {sorted(set(got) - set(want))[:5]}, "
                f"missing {sorted(set(want) - set(got))[:5]}, duplicates {len(got) - len(set(got))}"
            )
    for group in chunks(dead, 100):
        hits = vault.search(" ".join(group), limit=1000)
        searches += 1
        if hits:
            found = {t for t in group for h in hits if t in h.memory.content}
            out.append(f"{label}: gone tokens found: {[h.memory.path for h in hits][:5]} (tokens {sorted(found)[:5]})")
    return out, searches


def commit_all(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-q", "-m", message)


# --- the test -----------------------------------------------------------------------------------


def run_storm(
    tmp_path: Path,
    operations: int,
    seed_files: int,
    subfolders: int,
    autocommit: bool,
    stop_signal: signal.Signals,
    quiet: float,
) -> dict[str, Any]:
    """The storm and every check; `quiet`: the chance of a quiet spell (0.35-0.6 s) after an operation."""
    seed = int(os.environ.get("MEMFILE_STORM_SEED") or random.SystemRandom().randrange(2**32))
    tag = f"[storm seed {seed}: MEMFILE_STORM_SEED={seed} replays it]"
    print(tag)
    timings: dict[str, float] = {}
    started = time.monotonic()

    vault = Vault.init(tmp_path / "v", MIND)
    root = vault.root
    vault.close()
    outside = tmp_path / "outside"
    (outside / "trash").mkdir(parents=True)
    (outside / "incoming").mkdir()
    storm = Storm(root, outside, random.Random(seed))
    storm.seed(seed_files, subfolders, per_subfolder=5)
    if autocommit:
        commit_all(root, "seed")
    pinned = sorted((p, e.tokens[0]) for p, e in storm.pinned.items())
    timings["seed"] = time.monotonic() - started

    logs = tmp_path / "logs"
    logs.mkdir()
    out_log, err_log = (logs / "watch.out").open("w"), (logs / "watch.err").open("w")
    searcher_log = (logs / "searcher.err").open("w")  # a file, not a pipe: a pipe nobody reads could fill up
    command = [sys.executable, "-m", "memfile", "--vault", str(root), "watch"]
    command += ["--autocommit"] if autocommit else []
    watcher = subprocess.Popen(command, stdout=out_log, stderr=err_log, text=True)
    stop_file = tmp_path / "stop-searching"
    searcher: subprocess.Popen[str] | None = None
    cli = CliSearcher(root, pinned)
    try:

        def ready() -> bool:
            assert watcher.poll() is None, f"{tag} the watcher died at start: {(logs / 'watch.err').read_text()}"
            with Vault.open(root, MIND) as probe:
                return probe.status()["watcher_pid"] == watcher.pid and watcher_vouches(probe.root, probe.mind)

        assert wait_until(ready, 30), (
            f"{tag} the watcher did not index the seeded files: {(logs / 'watch.err').read_text()}"
        )
        timings["watcher_start"] = time.monotonic() - started - timings["seed"]

        searcher = subprocess.Popen(
            [sys.executable, "-c", SEARCHER, str(root), str(stop_file), json.dumps(pinned)],
            stdout=subprocess.PIPE,
            stderr=searcher_log,
            text=True,
        )
        assert searcher.stdout is not None
        first = searcher.stdout.readline()
        if first.strip() != "ready":
            searcher.kill()
            searcher.wait(10)
            pytest.fail(f"{tag} the searcher did not start: {first} {(logs / 'searcher.err').read_text()[-3000:]}")
        cli.start()

        # The storm: as fast as Python goes, with short pauses and now and then a quiet spell longer than
        # the debounce (so batches land and the watcher vouches mid-storm). Pauses come from their own
        # generator: the operations are the same for a seed however the pauses fall.
        pace = random.Random(seed ^ 0x5EED)
        storm_started = time.monotonic()
        for _ in range(operations):
            storm.step()
            roll = pace.random()
            if roll < quiet:
                time.sleep(pace.uniform(0.35, 0.6))
            elif roll < quiet + 0.15:
                time.sleep(pace.choice([0.0005, 0.002, 0.005, 0.01, 0.02]))
        timings["storm"] = time.monotonic() - storm_started

        # The searchers stop (each finishes the round it is in), so that only the watcher reads what follows.
        stop_file.touch()
        cli.halt.set()
        out, _ = searcher.communicate(timeout=120)
        cli.join(300)
        assert not cli.is_alive(), f"{tag} the CLI searcher hangs"
        assert searcher.returncode == 0, f"{tag} the searcher crashed: {(logs / 'searcher.err').read_text()[-3000:]}"
        searched = json.loads(out.strip().splitlines()[-1])
        summary: dict[str, Any] = {
            "seed": seed,
            "operations": operations,
            "autocommit": autocommit,
            "ops": dict(sorted(storm.ops.items())),
            "searcher": searched["stats"],
            "searcher_notices": searched["notices"],
            "cli_runs": dict(cli.runs),
        }
        print(json.dumps(summary))
        assert searched["error_count"] == 0, f"{tag} searches raised: {searched['errors']}"
        assert searched["wrong_count"] == 0, f"{tag} searches missed a pinned memory: {searched['wrong']}"
        assert not [n for n in searched["notices"] if "damaged" in n or "cannot be used" in n], (
            f"{tag} a searcher found the index damaged under the storm: {searched['notices']}"
        )
        assert cli.problems == [], f"{tag} CLI commands failed: {cli.problems[:5]}"
        assert searched["stats"]["searches"] > 0 and sum(cli.runs.values()) >= 3

        # Catching up: the watcher vouches, its recorded stats are the files', the sentinel is found.
        # The probe reads without indexing anything: status() never syncs, and the search comes only
        # once the recorded stats are the files' (so even without vouching it would find nothing to do).
        last_state: dict[str, Any] = {}

        def caught_up(sentinel: str, sentinel_token: str) -> bool:
            assert watcher.poll() is None, f"{tag} the watcher died: {(logs / 'watch.err').read_text()[-3000:]}"
            if time.monotonic() - storm.moved_out < SETTLE:
                last_state["why"] = "waiting for watchdog to let a move out of the vault through"
                return False
            with Vault.open(root, MIND) as probe:
                if not watcher_vouches(probe.root, probe.mind):
                    last_state["why"] = "no vouching"
                    return False
                stale = probe.status()["stale"]
                if stale:
                    indexed, disk = recorded(probe.root, probe.mind), stat_walk(root / MIND, root)
                    last_state["why"] = (
                        f"{len(stale)} stale paths (indexed (size, mtime_ns, inode) -> on disk): "
                        + ", ".join(f"{p} {indexed.get(p)} -> {disk.get(p)}" for p in stale[:10])
                    )
                    return False
                found = [h.memory.path for h in probe.search(sentinel_token)]
                last_state["why"] = f"sentinel search gave {found}"
                return found == [sentinel] and watcher_vouches(probe.root, probe.mind)

        def catch_up(coda: list[str], name: str) -> None:
            """Until the watcher vouches for an index whose recorded stats are the files' and that holds
            the sentinel. A full diff (after a folder event) may index the sentinel before its event is
            heard; an event held back (a move out of the vault) is heard after SETTLE at the latest."""
            sentinel = storm.sentinel(name)
            assert wait_until(lambda: caught_up(*sentinel), CATCH_UP_TIMEOUT, every=0.1), (
                f"{tag} the watcher did not catch up within {CATCH_UP_TIMEOUT} s after {coda}: {last_state['why']}"
            )

        catch_up_started = time.monotonic()
        catch_up(storm.coda(Storm.CODA_FOLDERS), "storm_sentinel_folders")
        coda = storm.coda(Storm.CODA_FILES)
        last_broken, last_broken_line = storm.last_broken()
        catch_up(coda + ["last broken file"], "storm_sentinel_files")
        timings["catch_up"] = time.monotonic() - catch_up_started
        assert watcher.poll() is None, f"{tag} the watcher died: {(logs / 'watch.err').read_text()[-3000:]}"

        # The index the watcher vouches for, read without a stat check, against the files.
        checks_started = time.monotonic()
        disk, truth, truth_issues = read_truth(root)
        timings["read_truth"] = time.monotonic() - checks_started
        live = storm.live_tokens()
        dead = sorted(storm.tokens_ever - set(live))
        mismatches = model_differences(storm, disk, truth, truth_issues)
        vouched_searches = 0
        with Vault.open(root, MIND) as vouched:
            taken: list[tuple[list[Memory], list[ParseIssue]]] = []

            def snapshot() -> bool:
                """The catalog, read while the watcher vouches (no stat check) from start to end."""
                if watcher_vouches(vouched.root, vouched.mind):
                    memories = vouched.memories()
                    if watcher_vouches(vouched.root, vouched.mind):
                        taken.append((memories, vouched.issues))
                return bool(taken)

            assert wait_until(snapshot, 10), f"{tag} the watcher stopped vouching after it caught up"
            memories, issues = taken[0]
            mismatches += differences("vouched catalog", memories, issues, truth, truth_issues)
            if recorded(vouched.root, vouched.mind) != disk:
                mismatches.append("vouched: the recorded stats are not the files'")
            searches_started = time.monotonic()
            found, vouched_searches = search_differences("vouched search", vouched, truth, live, dead)
            timings["vouched_searches"] = time.monotonic() - searches_started
            mismatches += found
            assert wait_until(lambda: watcher_vouches(vouched.root, vouched.mind), 10), (
                f"{tag} the watcher stopped vouching during the checks"
            )
        timings["vouched_checks"] = time.monotonic() - checks_started

        summary.update(
            {
                "files_at_end": {"readable": len(truth), "unreadable": len(truth_issues), "junk": len(storm.junk)},
                "tokens": {"live": len(live), "gone": len(dead)},
                # batches that found something to index (the searchers index what they find changed, too)
                "watcher_batches_indexing": (logs / "watch.out").read_text().count(" indexed "),
                "final_searches": vouched_searches,
                "mismatches": len(mismatches),
            }
        )
        print(json.dumps(summary))
        assert mismatches == [], f"{tag} {len(mismatches)} mismatches: " + "\n".join(mismatches[:30])

        # The watcher stops cleanly, having warned about every unreadable file and failed no batch.
        stopping = time.monotonic()
        watcher.send_signal(stop_signal)
        assert watcher.wait(10) == 0, f"{tag} the watcher exited {watcher.returncode}"
        assert time.monotonic() - stopping < 2.5, f"{tag} the watcher took {time.monotonic() - stopping:.1f} s to stop"
        out_log.close()
        err_log.close()
        warnings = (logs / "watch.err").read_text()
        assert "Traceback" not in warnings, f"{tag} {warnings[-3000:]}"
        assert "watcher:" not in warnings, f"{tag} a batch failed: {warnings[-3000:]}"
        assert warnings.rstrip().endswith("stopped"), f"{tag} {warnings[-500:]}"
        # What only the watcher read (the seeded files, before any search; the file broken after the
        # searchers stopped) it must have named with its line. Files broken during the storm may have
        # been indexed, and reported, by a searcher first: the index's issues are checked above.
        must_warn = {**storm.seeded_broken, last_broken: last_broken_line}
        unwarned = [p for p, line in must_warn.items() if f"memfile: warning: {p}:{line}: " not in warnings]
        assert unwarned == [], f"{tag} the watcher never warned about {unwarned}: {warnings[-2000:]}"
        assert last_broken in truth_issues and storm.seeded_broken
        assert not (root / ".memfile" / f"watch-{MIND}.clean").exists()

        # Without the watcher: a stat-only diff finds nothing to re-read; a rebuild gives the same.
        alone_started = time.monotonic()
        with Vault.open(root, MIND) as alone:
            assert not watcher_vouches(alone.root, alone.mind) and alone.status()["watcher_pid"] is None
            report = alone.refresh()
            assert (report.changed, report.skipped, report.pending) == (0, [], {}), f"{tag} {report}"
            assert alone.status()["stale"] == []
            mismatches += differences(
                "catalog without the watcher", alone.memories(), alone.issues, truth, truth_issues
            )
            mismatches += search_differences("search without the watcher", alone, truth, live, dead, singles=100)[0]
            rebuilt = alone.reindex()
            assert {i.path: i for i in rebuilt.skipped} == truth_issues, f"{tag} {rebuilt.skipped}"
            mismatches += differences("rebuilt index", alone.memories(), alone.issues, truth, truth_issues)
        assert mismatches == [], f"{tag} {len(mismatches)} mismatches: " + "\n".join(mismatches[:30])
        timings["checks_without_watcher"] = time.monotonic() - alone_started

        if autocommit:
            status = git(root, "status", "--porcelain", "--untracked-files=all", "--", MIND)
            left = [
                line
                for line in status.splitlines()
                if line.endswith(".md") and not line.rsplit("/", 1)[-1].startswith(".")
            ]  # not editor junk
            assert left == [], f"{tag} memory files the autocommitting watcher left uncommitted: {left[:10]}"
            assert "record hand edits" in git(root, "log", "-3", "--format=%s")
        timings["total"] = time.monotonic() - started
        summary["timings"] = {k: round(v, 1) for k, v in timings.items()}
        print(json.dumps(summary))
        return summary
    finally:
        stop_file.touch()
        cli.halt.set()
        for process in (searcher, watcher):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
        if cli.is_alive():
            cli.join(60)
        out_log.close()
        err_log.close()
        searcher_log.close()


@pytest.mark.parametrize("autocommit", [False, True], ids=["plain", "autocommit"])
def test_a_short_storm_while_searching(tmp_path: Path, autocommit: bool) -> None:
    run_storm(
        tmp_path,
        operations=300,
        seed_files=60,
        subfolders=2,
        autocommit=autocommit,
        stop_signal=signal.SIGINT,
        quiet=0.02,
    )


@pytest.mark.slow
def test_five_thousand_changes_while_searching(tmp_path: Path) -> None:
    run_storm(
        tmp_path,
        operations=5000,
        seed_files=400,
        subfolders=4,
        autocommit=False,
        stop_signal=signal.SIGTERM,
        quiet=0.004,
    )
