"""Hostile input (issue 8): broken, huge, binary, odd and malicious files and arguments.

Every hand-made file in the corpus is dropped into a fresh vault's mind folder,
then every read-only command runs over it. Each one must:

* exit with a code of the public table (0, 2, 3, 4, 5), never 1 (a crash), never show a traceback;
* name the file (its vault-relative path) when it cannot be read, in the warnings and in `doctor`,
  and name the offending field when one is at fault;
* leave every file of the vault (outside .git and .memfile), and every file it points to, byte-for-byte as it was.

Every hostile command-line input must be refused with exit 2 (or 3) and a message naming the
argument at fault, and must write nothing: no commit, no file changed.

The bugs this corpus found (a FIFO hanging every command, a symlink loop crashing doctor, a non-UTF-8
file name breaking the index, NUL content stored, an id of the wrong type accepted) are fixed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import BROKEN, HAND_MADE, commit_count, in_vault

from memfile import Vault
from memfile.errors import EXIT_CODES, EXIT_UNEXPECTED
from memfile.model import Category, derive_key

#: Exit codes a read-only command may end with on a hostile vault.
READ_CODES = {0, 2, 3, 4, 5}
assert READ_CODES <= set(EXIT_CODES) and EXIT_UNEXPECTED not in READ_CODES


# --- the corpus of hand-made files -------------------------------------------


def fm(*lines: str, body: str = "body text\n") -> bytes:
    """A memory file with the given front-matter lines."""
    return ("---\n" + "".join(line + "\n" for line in lines) + "---\n" + body).encode("utf-8")


def _alias_bomb() -> bytes:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return fm(*lines, body="billion laughs\n")


@dataclass(frozen=True)
class Entry:
    """One hostile file.

    expect: "unreadable" (skipped and named, with `field` in the reason when given),
            "memory" (read as a memory), "ignored" (not a memory, no message needed),
            "doctor" (not read; doctor names it).
    """

    name: str
    relpath: str  # vault-relative
    data: bytes | None = None  # None: `make` builds it
    expect: str = "unreadable"
    field: str | None = None
    make: Callable[[Path, Path], None] | None = None  # (vault root, outside folder) -> None


def _symlink_out(root: Path, outside: Path) -> None:
    target = outside / "secret.md"
    target.write_bytes(fm("key: secret", body="outside the vault\n"))
    os.symlink(target, root / "michael/fact/secret.md")


def _symlink_in(root: Path, outside: Path) -> None:
    os.symlink("office.md", root / "michael/fact/alias.md")


def _dangling(root: Path, outside: Path) -> None:
    os.symlink(outside / "does-not-exist.md", root / "michael/fact/dangling.md")


def _symlink_loop(root: Path, outside: Path) -> None:
    os.symlink("loop.md", root / "michael/fact/loop.md")


def _hard_link(root: Path, outside: Path) -> None:
    target = outside / "linked.md"
    target.write_bytes(fm("key: linked", body="hard-linked from outside\n"))
    try:
        os.link(target, root / "michael/fact/linked.md")
    except OSError as exc:  # another file system, or no hard links here
        pytest.skip(f"no hard link possible: {exc}")


def _folder_md(root: Path, outside: Path) -> None:
    (root / "michael/fact/x.md").mkdir(parents=True)
    (root / "michael/fact/x.md/inner.txt").write_text("not a memory\n")


def _bad_name(root: Path, outside: Path) -> None:
    folder = os.fsencode(root / "michael/fact")
    with open(folder + b"/caf\xe9.md", "wb") as handle:  # Latin-1 é: not UTF-8
        handle.write(fm("key: cafe"))


def _large(root: Path, outside: Path) -> None:
    path = root / "michael/fact/large.md"
    with path.open("wb") as handle:
        handle.write(fm("key: large", body=""))
        line = b"all work and no play makes jack a dull boy\n"
        handle.write(line * (11 * 2**20 // len(line) + 1))


CORPUS: list[Entry | object] = [
    # YAML that cannot be read at all
    Entry("broken_yaml", "michael/fact/broken.md", BROKEN.encode()),
    Entry("alias_bomb", "michael/fact/bomb.md", _alias_bomb()),
    Entry("tabs_in_front_matter", "michael/fact/tabs.md", fm("id: mem_tabs0001", "\tcategory: fact", "key: tabs")),
    Entry("deep_nesting", "michael/fact/deep.md", fm("a: " + "[" * 5000 + "]" * 5000)),
    Entry("python_object_tag", "michael/fact/pytag.md", fm("key: !!python/object/apply:os.system [echo pwned]")),
    Entry("unhashable_yaml_key", "michael/fact/unhashable.md", fm("? [a, b]", ": c")),
    Entry("front_matter_is_a_list", "michael/fact/listfm.md", fm("- a", "- b")),
    Entry("front_matter_is_a_string", "michael/fact/scalarfm.md", fm("just some text")),
    Entry("duplicate_keys", "michael/fact/dupkey.md", fm("key: first", "priority: high", "key: second"), field="'key'"),
    # bytes that are not Markdown text
    Entry("invalid_utf8", "michael/fact/latin1.md", b"---\nkey: latin1\n---\ncaf\xe9 au lait\n", field="UTF-8"),
    Entry(
        "binary_named_md",
        "michael/fact/x.md",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(range(256)),
        field="binary",
    ),
    Entry("large_11mb", "michael/fact/large.md", make=_large, field="10 MB"),
    Entry(
        "git_conflict_markers",
        "michael/fact/conflict.md",
        b"---\nkey: conflict\n---\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n",
        field="conflict markers",
    ),
    # wrong values and types for the known fields
    Entry("unknown_category", "michael/fact/cat.md", fm("category: bogus"), field="category"),
    Entry("priority_number", "michael/fact/prio.md", fm("priority: 5"), field="priority"),
    Entry("tags_mapping", "michael/fact/tagmap.md", fm("tags: {a: b}"), field="tags"),
    Entry("tag_leading_dash", "michael/fact/tagdash.md", fm("tags: ['-rf']"), field="tag"),
    Entry("tag_too_long", "michael/fact/taglong.md", fm("tags: [" + "t" * 101 + "]"), field="tag"),
    Entry(
        "ten_thousand_tags", "michael/fact/tags10k.md", fm("tags: [" + ", ".join(f"t{i}" for i in range(10_000)) + "]")
    ),
    Entry("verified_maybe", "michael/fact/maybe.md", fm('verified: "maybe"'), field="verified"),
    Entry("verified_number", "michael/fact/verified1.md", fm("verified: 1"), field="verified"),
    Entry("confidence_seven", "michael/fact/conf.md", fm("confidence: 7"), field="confidence"),
    Entry("confidence_nan", "michael/fact/nan.md", fm("confidence: .nan"), field="confidence"),
    Entry("source_robot", "michael/fact/robot.md", fm("source: robot"), field="source"),
    Entry("expires_tomorrowish", "michael/fact/expires.md", fm('expires_at: "tomorrow-ish"'), field="expires_at"),
    Entry("created_us_date", "michael/fact/usdate.md", fm('created_at: "01/02/2026"'), field="created_at"),
    Entry("updated_epoch_number", "michael/fact/epoch.md", fm("updated_at: 1700000000"), field="updated_at"),
    Entry(
        "created_year_one_east_of_utc",
        "michael/fact/year1.md",
        fm("created_at: 0001-01-01T00:00:00+01:00"),
        field="created_at",
    ),
    Entry("created_month_13", "michael/fact/month13.md", fm("created_at: 2026-13-45")),
    Entry("created_hour_25", "michael/fact/hour25.md", fm("created_at: 2026-06-27T25:00:00Z")),
    Entry("status_bogus", "michael/fact/status.md", fm("status: bogus"), field="status"),
    Entry(
        "superseded_by_not_an_id",
        "michael/fact/superseded.md",
        fm("status: superseded", "superseded_by: not-an-id"),
        field="superseded_by",
    ),
    Entry("key_with_dot", "michael/fact/keydot.md", fm("key: a.b"), field="key"),
    Entry("key_with_slash", "michael/fact/keyslash.md", fm("key: ../../etc/passwd"), field="key"),
    Entry("key_unicode", "michael/fact/keyuni.md", fm("key: ünïcödé"), field="key"),
    Entry("key_leading_dash", "michael/fact/keydash.md", fm("key: '-rf'"), field="key"),
    Entry("key_number", "michael/fact/keyint.md", fm("key: 5"), field="key"),
    pytest.param(Entry("id_list", "michael/fact/idlist.md", fm("id: [a, b]"), field="id"), id="id_list"),
    # odd but readable: memfile reads them and changes nothing
    Entry("bom", "michael/fact/bom.md", b"\xef\xbb\xbf" + fm("key: bom", "tags: [a]"), expect="memory"),
    Entry("crlf", "michael/fact/crlf.md", fm("key: crlf", "tags: [a]").replace(b"\n", b"\r\n"), expect="memory"),
    Entry(
        "bom_and_crlf",
        "michael/fact/bomcrlf.md",
        b"\xef\xbb\xbf" + fm("key: bomcrlf").replace(b"\n", b"\r\n"),
        expect="memory",
    ),
    Entry("empty_file", "michael/fact/empty.md", b"", expect="memory"),
    Entry("front_matter_only", "michael/fact/fmonly.md", b"---\nkey: fmonly\n---\n", expect="memory"),
    Entry(
        "unclosed_front_matter",
        "michael/fact/unclosed.md",
        b"---\nkey: unclosed\nno closing fence\n",
        field="never closed",
    ),
    Entry(
        "odd_valid_dates",
        "michael/fact/dates.md",
        fm("created_at: 2026-06-27 10:00:00+02:00", "updated_at: 2026-06-27", "expires_at: 2999-01-01"),
        expect="memory",
    ),
    Entry(
        "odd_extra_keys",
        "michael/fact/extras.md",
        fm("a.b: dotted", "x/y: slashed", "ünï: unicode", "-lead: dash", "'quoted key': q"),
        expect="memory",
    ),
    Entry("hand_made", "michael/fact/office_hours.md", HAND_MADE.encode(), expect="memory"),
    Entry("unknown_category_folder", "michael/bogus/thing.md", fm("key: thing"), expect="memory"),
    Entry("file_name_unicode", "michael/fact/ünïcödé.md", fm(), expect="memory"),
    Entry("file_name_leading_dash", "michael/fact/-rf.md", fm(), expect="memory"),
    Entry("file_name_newline", "michael/fact/a\nb.md", fm("key: a_b"), expect="memory"),
    Entry("file_name_spaces_dots", "michael/fact/a b..c.md", fm(), expect="memory"),
    Entry("hidden_file", "michael/fact/.hidden.md", BROKEN.encode(), expect="ignored"),
    Entry("folder_named_md", "michael/fact/x.md", make=_folder_md, expect="ignored"),
    # links
    Entry("symlink_outside", "michael/fact/secret.md", make=_symlink_out, field="symlink"),
    Entry("symlink_inside", "michael/fact/alias.md", make=_symlink_in, expect="memory"),
    Entry("symlink_dangling", "michael/fact/dangling.md", make=_dangling, expect="doctor"),
    Entry("hard_link_outside", "michael/fact/linked.md", make=_hard_link, expect="memory"),
    pytest.param(Entry("symlink_loop", "michael/fact/loop.md", make=_symlink_loop, expect="doctor"), id="symlink_loop"),
    # Not a memory (keys are snake_case): skipped by every command, named by doctor (kind bad_name).
    pytest.param(
        Entry("file_name_not_utf8", "michael/fact/caf\udce9.md", make=_bad_name, expect="skipped"),
        id="file_name_not_utf8",
    ),
]


def _id(entry: object) -> str:
    return entry.name if isinstance(entry, Entry) else str(entry)


# --- helpers -------------------------------------------------------------------


def snapshot(*folders: Path) -> dict[bytes, object]:
    """Path -> sha256 (regular files), link target (symlinks) or kind, outside .git and .memfile; never follows links."""
    found: dict[bytes, object] = {}
    for folder in folders:
        for current, dirs, files in os.walk(folder, followlinks=False):
            dirs[:] = [d for d in dirs if d not in (".git", ".memfile")]
            for name in dirs + files:
                path = Path(current) / name
                info = os.lstat(path)
                key = os.fsencode(path)
                if stat.S_ISLNK(info.st_mode):
                    found[key] = ("link", os.readlink(path))
                elif stat.S_ISREG(info.st_mode):
                    found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
                elif not stat.S_ISDIR(info.st_mode):
                    found[key] = ("special", stat.S_IFMT(info.st_mode))
    return found


def check(result, what: str):  # noqa: ANN001, ANN201 - a click Result
    """A command on a hostile vault: a public exit code, never 1, no traceback."""
    out = f"{what}: exit {result.exit_code}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
    assert result.exit_code in READ_CODES, out
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, out
    assert "unexpected error" not in result.stderr, out
    return result


def ref_for(relpath: str) -> str:
    parts = relpath.split("/")
    key = derive_key(parts[-1][:-3] if parts[-1].endswith(".md") else parts[-1])
    return f"{parts[-2]}/{key}" if parts[-2] in Category.__members__.values() else key


@pytest.fixture
def hostile_vault(tmp_path: Path) -> tuple[Path, Path]:
    """A vault with one committed memory (fact/office), and a folder outside it."""
    root = tmp_path / "vault"
    Vault.init(root, "michael", "Michael's Mind").store("fact", "office", "The office is in Berlin", tags=["work"])
    outside = tmp_path / "outside"
    outside.mkdir()
    return root, outside


# --- the hand-made files -------------------------------------------------------


@pytest.mark.parametrize("entry", CORPUS, ids=_id)
def test_hostile_file(hostile_vault: tuple[Path, Path], entry: Entry) -> None:
    root, outside = hostile_vault
    path = root / entry.relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if entry.make is not None:
        entry.make(root, outside)
    else:
        path.write_bytes(entry.data or b"")
    before = snapshot(root, outside)
    commits = commit_count(root)
    ref = ref_for(entry.relpath)

    listed = check(in_vault(root, "list"), "list")
    as_json = check(in_vault(root, "list", "--json"), "list --json")
    check(in_vault(root, "recall"), "recall")
    check(in_vault(root, "recall", "--query", "office body", "--budget", "200"), "recall --query")
    check(in_vault(root, "search", "body"), "search")
    check(in_vault(root, "search", "office", "--json"), "search --json")
    doctor = check(in_vault(root, "doctor"), "doctor")
    doctor_json = check(in_vault(root, "doctor", "--json"), "doctor --json")
    check(in_vault(root, "reindex"), "reindex")
    check(in_vault(root, "stats"), "stats")
    check(in_vault(root, "tags"), "tags")
    check(in_vault(root, "status"), "status")
    check(in_vault(root, "show", ref), f"show {ref}")
    check(in_vault(root, "history", ref), f"history {ref}")
    check(in_vault(root, "show", "fact/office"), "show fact/office")

    import json

    memories = json.loads(as_json.stdout)
    findings = json.loads(doctor_json.stdout)["findings"]
    about = [f for f in findings if f["path"] == entry.relpath]
    assert "fact/office" in listed.stdout, "a hostile file must not hide the good memories"
    if entry.expect == "unreadable":
        assert entry.relpath in listed.stderr, f"list does not name {entry.relpath}: {listed.stderr}"
        assert entry.relpath in doctor.stdout, f"doctor does not name {entry.relpath}: {doctor.stdout}"
        assert doctor.exit_code == 5
        reasons = [f["message"] for f in about if f["kind"] in ("unreadable", "conflict_markers")]
        assert reasons, findings
        if entry.field:
            assert any(entry.field in r for r in reasons), (entry.field, reasons)
        assert entry.relpath not in [m["path"] for m in memories]
    elif entry.expect == "memory":
        assert entry.relpath in [m["path"] for m in memories], (entry.relpath, listed.stderr)
        assert entry.relpath not in listed.stderr, listed.stderr
    elif entry.expect == "doctor":
        assert entry.relpath in doctor.stdout, doctor.stdout
        assert entry.relpath not in [m["path"] for m in memories]
    else:
        assert entry.relpath not in [m["path"] for m in memories]

    assert snapshot(root, outside) == before, "a read-only command changed a file"
    assert commit_count(root) == commits


def test_fifo_named_md_does_not_hang(hostile_vault: tuple[Path, Path]) -> None:
    root, _ = hostile_vault
    os.mkfifo(root / "michael/fact/pipe.md")
    before = snapshot(root)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(root), "list"],
            capture_output=True,
            text=True,
            timeout=4,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("memfile list hangs on a FIFO named pipe.md")
    assert result.returncode in READ_CODES and "Traceback" not in result.stderr
    assert "michael/fact/pipe.md" in result.stderr
    assert snapshot(root) == before


# --- hostile command-line input ------------------------------------------------

TRAVERSALS = [
    "../x",
    "%2e%2e/x",
    "/etc/passwd",
    "fact/../../x",
    "fact\\..\\x",
    "..\\..\\x",
    "fact/office\x00",
    "%2Fetc%2Fpasswd",
    "fact%2f..%2f..%2fx",
    "fact/office/extra",
    "mem_../x",
    "..",
    "C:\\x",
    "",
]
REF_COMMANDS = ["show", "forget", "history", "restore", "verify", "edit", "reactivate"]

CLI: list[tuple[list[str], int, str]] = [
    *[([cmd, ref], 2, "REF") for cmd in REF_COMMANDS for ref in TRAVERSALS],
    (["show", "bogus/office"], 2, "category"),
    (["show", "fact/Bad-Key"], 2, "key"),
    (["forget", "fact/" + "a" * 101], 2, "key"),
    (["show", "fact/nothing_here"], 3, "fact/nothing_here"),
    (["forget", "mem_doesnotexist"], 3, "mem_doesnotexist"),
    (["show", "fact/office", "--at", "--upload-pack=touch /tmp/pwned"], 2, "at"),
    (["restore", "fact/office", "--at", "-x"], 2, "at"),
    (["show", "fact/office", "--at", "not-a-rev"], 2, "at"),
    # store
    (["store", "bogus", "k", "c"], 2, "category"),
    (["store", "fact", "Bad Key", "c"], 2, "key"),
    (["store", "fact", "../x", "c"], 2, "key"),
    (["store", "fact", "a/b", "c"], 2, "key"),
    (["store", "fact", "a.b", "c"], 2, "key"),
    (["store", "fact", "", "c"], 2, "key"),
    (["store", "fact", "ünï", "c"], 2, "key"),
    (["store", "fact", "k", "c", "--priority", "urgent"], 2, "priority"),
    (["store", "fact", "k", "c", "--priority", "5"], 2, "priority"),
    (["store", "fact", "k", "c", "--tag", "-x"], 2, "tag"),
    (["store", "fact", "k", "c", "--tag", "x" * 101], 2, "tag"),
    (["store", "fact", "k", "c", "--expires", "tomorrow-ish"], 2, "expires"),
    (["store", "fact", "k", "c", "--expires", "99999999d"], 2, "expires"),
    (["store", "fact", "k", "c", "--confidence", "7"], 2, "confidence"),
    (["store", "fact", "k", "c", "--confidence", "nan"], 2, "confidence"),
    (["store", "fact", "k", "c", "--source", "robot"], 2, "source"),
    (["store", "fact", "k", "c", "--supersedes", "../x"], 2, "REF"),
    (["store", "fact", "k", ""], 2, "content"),
    # recall, search, list and friends
    (["recall", "--budget", "-5"], 2, "budget"),
    (["recall", "--budget", "abc"], 2, "--budget"),
    (["recall", "--limit", "0"], 2, "limit"),
    (["recall", "--query", "x", "--limit", "-1"], 2, "limit"),
    (["recall", "--query", "x", "--limit", "100000"], 2, "limit"),
    (["search", "x", "--limit", "0"], 2, "limit"),
    (["search", "x", "--limit", "abc"], 2, "--limit"),
    (["search", "x", "--category", "bogus"], 2, "category"),
    (["search", "x", "--priority", "urgent"], 2, "priority"),
    (["search", "x", "--source", "robot"], 2, "source"),
    (["search", "x", "--tag", "-x"], 2, "tag"),
    (["search", "AND"], 2, "query"),
    (["list", "--category", "bogus"], 2, "category"),
    (["list", "--priority", "urgent"], 2, "priority"),
    (["list", "--status", "bogus"], 2, "status"),
    (["list", "--source", "robot"], 2, "source"),
    (["list", "--tag", "-x"], 2, "tag"),
    (["by-tag", ""], 2, "tag"),
    (["expiring", "--within", "soon"], 2, "within"),
    (["log", "--since", "yesterday-ish"], 2, "since"),
    (["--mind", "../x", "list"], 2, "mind"),
    (["--mind", "Bad", "list"], 2, "mind"),
]


def _cli_id(case: tuple[list[str], int, str]) -> str:
    return " ".join(a[:30] for a in case[0]).encode("unicode_escape").decode() or "empty"


@pytest.mark.parametrize("case", CLI, ids=_cli_id)
def test_hostile_argument(hostile_vault: tuple[Path, Path], case: tuple[list[str], int, str]) -> None:
    root, outside = hostile_vault
    args, code, field = case
    (outside / "x").write_text("outside\n")
    before = snapshot(root, outside)
    commits = commit_count(root)
    result = in_vault(root, *args)
    out = f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exit_code == code, out
    assert "Traceback" not in result.stderr and "unexpected error" not in result.stderr, out
    assert field in result.stderr, f"the message does not name {field!r}: {out}"
    assert snapshot(root, outside) == before
    assert commit_count(root) == commits


def test_store_refuses_nul_content(hostile_vault: tuple[Path, Path]) -> None:
    root, _ = hostile_vault
    before = snapshot(root)
    commits = commit_count(root)
    result = in_vault(root, "store", "fact", "nul", input="binary\x00content\n")
    assert result.exit_code == 2 and "content" in result.stderr, (result.exit_code, result.stderr)
    assert snapshot(root) == before
    assert commit_count(root) == commits


def test_corpus_size() -> None:
    """Issue 8 asks for at least 40 hostile files and inputs."""
    assert len(CORPUS) >= 40
    assert len(CORPUS) + len(CLI) + 2 >= 40
