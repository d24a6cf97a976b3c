"""Property (issue 25): a vault's memories survive export -> import into an empty vault.

Memory files are written by hand into a vault's mind folder and committed as a person would (the
hand-edit path): unknown front-matter keys in any order (some named like the export record's own
fields), YAML comments, CRLF line ends, a UTF-8 BOM, Vietnamese, Thai and Chinese text, superseded
pairs, expired memories, files without front-matter and files without an id. Then:

1. export with raw -> import into an empty vault with the same mind name -> every file byte-identical;
2. export without raw -> import -> every memory `to_dict()`-identical, unknown keys in file order
   (a file without front-matter gets one on import: `has_front_matter` / `id_derived` cannot survive
   without raw, so they are left out of the comparison for such files, and `id_derived` for a file
   with front-matter but no id);
3. importing the same export again makes no commit and changes no file.

A few examples run by default (< 20 s); `-m slow` runs many more.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import commit_by_hand, commit_count, git
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memfile import Vault
from memfile.model import KNOWN_FIELDS, Category

MIND = "michael"
NAME = "Michael's Mind"

FAST = settings(
    max_examples=8,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking by default: each example builds three vaults
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
MANY = settings(FAST, max_examples=80, phases=list(Phase))  # -m slow: shrunk to the smallest failing example

#: Text in the scripts the issue names (and a few more), for bodies, tags, comments and values.
SCRIPTS = [
    "Tiếng Việt: phở bò tái, bánh mì, cà phê sữa đá",
    "Nguyễn Thị Minh Khai, Quận 1, TP. Hồ Chí Minh",
    "ภาษาไทย: ก๋วยเตี๋ยว ต้มยำกุ้ง ส้มตำ",
    "สวัสดีครับ ผมชื่อไมเคิล",
    "中文：我喜欢喝绿茶，不加糖。",
    "北京市海淀区，周一至周五",
    "Ελληνικά, русский, עברית, العربية",
    "emoji 🎉🚀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]
#: Markdown lines for bodies (a `---` rule, a fence-like line and YAML-looking lines among them).
MARKDOWN = [
    "# Heading",
    "## Sub heading",
    "- item",
    "* **bold** _it_",
    "1. one",
    "> quote",
    "```python\nprint('xin chào')\n```",
    "---",
    "key: value",
    "id: mem_notreally1",
    "| a | b |\n|---|---|",
    "",
    "   indented",
    "trailing  ",
    "\ttab",
    "=======",
    "separators: dòng\u2028hai\u2029ย่อหน้า\x85中文",  # line breaks to str.splitlines, not to JSON Lines
]
#: Unknown keys, some named like the export record's own fields (they must stay inside `extra`).
EXTRA_NAMES = ["aliases", "mood", "links", "raw", "path", "type", "sha256", "mind_id", "mind", "content", "extra"]
#: Unknown-key values as YAML text (plain, quoted, flow, block, dates, numbers, null, multi-line).
EXTRA_VALUES = [
    "vui vẻ",
    "'single ''quoted'''",
    '"double: quoted # not a comment"',
    json.dumps("中文：冒号", ensure_ascii=False),
    json.dumps("ภาษาไทย # hash", ensure_ascii=False),
    "42",
    "-7",
    "0.5",
    "true",
    "yes",
    "~",
    "null",
    "2026-06-27",
    "2026-06-27T10:00:00Z",
    "[a, b, phở]",
    "[]",
    "{city: Hà Nội, zip: 100000}",
    "\n  - one\n  - hai\n  - สาม",
    "\n  nested: true\n  deeper:\n    - x",
    "|\n  line one\n  dòng hai\n  บรรทัดสาม",
    ">-\n  folded\n  text",
]
PAST = ["2001-01-01T00:00:00Z", "2019-12-31T23:59:59Z"]
FUTURE = ["2999-01-01T00:00:00Z"]
DATES = ["2020-01-02T03:04:05Z", "2024-02-29T12:00:00Z", "'2023-07-01T09:30:00+07:00'", '"2022-05-05T05:05:05Z"']


@dataclass
class HandFile:
    """One memory file as a person would write it."""

    category: str
    key: str
    id: str | None  # None: no id (derived from the path)
    entries: list[tuple[str, str]]  # (name, YAML value text) in file order, known and unknown keys mixed
    comments: dict[int, str]  # a comment line before entry N
    inline: dict[int, str]  # an end-of-line comment on entry N (single-line values only)
    body: str
    front_matter: bool = True
    crlf: bool = False
    bom: bool = False

    @property
    def relpath(self) -> str:
        return f"{MIND}/{self.category}/{self.key}.md"

    def data(self) -> bytes:
        text = ""
        if self.front_matter:
            lines = ["---"]
            for n, (name, value) in enumerate(self.entries):
                if n in self.comments:
                    lines.append("# " + self.comments[n])
                sep = "" if value.startswith("\n") else " "
                line = f"{name}:{sep}{value}"
                if n in self.inline and "\n" not in value:
                    line += "   # " + self.inline[n]
                lines.append(line)
            lines.append("---")
            text = "\n".join(lines) + "\n"
        text += self.body + "\n"
        if self.crlf:
            text = text.replace("\n", "\r\n")
        return (("\ufeff" if self.bom else "") + text).encode("utf-8")


# --- strategies --------------------------------------------------------------------------------------

_body_chars = st.characters(exclude_categories=["Cs", "Cc"]) | st.sampled_from(list("\t:#-*>`|"))
_body_line = st.sampled_from(SCRIPTS) | st.sampled_from(MARKDOWN) | st.text(_body_chars, max_size=40)
_comment = st.sampled_from(SCRIPTS) | st.text(st.characters(exclude_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=30)


@st.composite
def hand_files(draw: st.DrawFn) -> list[HandFile]:
    """One to six memory files of one mind, each unique by (category, key) and by id."""
    count = draw(st.integers(1, 6))
    files: list[HandFile] = []
    for n in range(count):
        category = draw(st.sampled_from([c.value for c in Category]))
        key = draw(st.sampled_from(["pho", "tra_xanh", "office", "ban_do", "note"])) + f"_{n}"
        front_matter = draw(st.integers(0, 9)) > 0  # mostly with front-matter
        with_id = draw(st.integers(0, 5)) > 0
        id_ = f"mem_t{n:02d}" + draw(st.from_regex(r"[0-9a-z]{4,12}", fullmatch=True)) if with_id else None
        known: list[tuple[str, str]] = []
        if id_:
            known.append(("id", id_))
        if draw(st.booleans()):
            known.append(("category", category))
        if draw(st.booleans()):
            known.append(("key", key))
        if draw(st.booleans()):
            known.append(("priority", draw(st.sampled_from(["low", "normal", "high", "critical"]))))
        if draw(st.booleans()):
            words = draw(
                st.lists(st.sampled_from(["ẩm thực", "อาหาร", "茶", "work", "Hà Nội"]), max_size=3, unique=True)
            )
            known.append(("tags", "[" + ", ".join(words) + "]"))
        if draw(st.booleans()):
            known.append(("source", draw(st.sampled_from(["user", "agent"]))))
        if draw(st.booleans()):
            known.append(("verified", draw(st.sampled_from(["true", "false", "yes"]))))
        if draw(st.booleans()):
            known.append(("confidence", draw(st.sampled_from(["1", "0.85", "0.0", "0.7"]))))
        expires = draw(st.sampled_from([None, "null", *PAST, *FUTURE]))
        if expires is not None:
            known.append(("expires_at", expires))
        if draw(st.booleans()):
            known.append(("created_at", draw(st.sampled_from(DATES))))
        if draw(st.booleans()):
            known.append(("updated_at", "2025-06-01T00:00:00Z"))
        names = draw(st.lists(st.sampled_from(EXTRA_NAMES), max_size=4, unique=True))
        unknown = [(name, draw(st.sampled_from(EXTRA_VALUES))) for name in names]
        entries = draw(st.permutations(known + unknown))
        comments = draw(st.dictionaries(st.integers(0, max(len(entries) - 1, 0)), _comment, max_size=3))
        inline = draw(st.dictionaries(st.integers(0, max(len(entries) - 1, 0)), _comment, max_size=2))
        lines = [draw(st.sampled_from(SCRIPTS))] + draw(st.lists(_body_line, max_size=6))
        body = "\n".join(draw(st.permutations(lines)))
        if not front_matter or not body.strip() or body.lstrip("\ufeff").startswith("-"):
            body = draw(st.sampled_from(SCRIPTS)) + "\n" + body  # a first line that cannot be a fence
        files.append(
            HandFile(
                category=category,
                key=key,
                id=id_ if front_matter else None,
                entries=list(entries),
                comments={k: v.strip() for k, v in comments.items()},
                inline={k: v.strip() for k, v in inline.items()},
                body=body,
                front_matter=front_matter,
                crlf=draw(st.booleans()),
                bom=draw(st.booleans()),
            )
        )
    # superseded pairs: an older memory marked superseded by a newer one that has an id
    with_ids = [f for f in files if f.front_matter and f.id]
    if len(with_ids) >= 2 and draw(st.booleans()):
        old, new = draw(st.permutations(with_ids))[:2]
        old.entries.append(("status", "superseded"))
        old.entries.append(("superseded_by", str(new.id)))
        if draw(st.booleans()):
            new.entries.append(("status", "active"))
    return files


# --- the round trip ----------------------------------------------------------------------------------


def mind_files(vault: Vault) -> dict[str, bytes]:
    return {
        p.relative_to(vault.root).as_posix(): p.read_bytes()
        for p in sorted(vault.mind_dir.rglob("*.md"))
        if p.is_file()
    }


def comparable(memory: Any, lenient: bool) -> dict[str, Any]:
    """`to_dict()` without the mind, with `extra` as ordered pairs (file order counts)."""
    data = memory.to_dict()
    data.pop("mind")
    data["extra"] = list(data["extra"].items())
    if lenient:
        data.pop("has_front_matter")
        data.pop("id_derived")
    return data


def round_trip(files: list[HandFile], tmp: Path) -> None:
    src = Vault.init(tmp / "src", MIND, NAME)
    raw_dst = Vault.init(tmp / "raw", MIND, NAME)
    plain_dst = Vault.init(tmp / "plain", MIND, NAME)
    try:
        for hand in files:
            target = src.root / hand.relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(hand.data())
        commit_by_hand(src.root, *(hand.relpath for hand in files))
        memories = src.memories()
        assert src.issues == [], [str(i) for i in src.issues]  # the generated files are all readable
        assert len(memories) == len(files)
        originals = mind_files(src)

        # 1. raw: byte-identical files
        (tmp / "raw.jsonl").write_text("".join(src.export_lines(raw=True)), encoding="utf-8")
        report = raw_dst.import_(tmp / "raw.jsonl")
        assert len(report.created) == len(files) and report.conflicts == [] and report.skipped == []
        assert mind_files(raw_dst) == originals
        assert git(raw_dst.root, "status", "--porcelain", "--untracked-files=all").strip() == ""

        # 2. without raw: to_dict-identical memories
        (tmp / "plain.jsonl").write_text("".join(src.export_lines()), encoding="utf-8")
        report = plain_dst.import_(tmp / "plain.jsonl")
        assert len(report.created) == len(files) and report.conflicts == [] and report.skipped == []
        lenient = {m.id for m in memories if not m.has_front_matter or m.id_derived}
        theirs = {m.id: comparable(m, m.id in lenient) for m in memories}
        ours = {m.id: comparable(m, m.id in lenient) for m in plain_dst.memories()}
        assert plain_dst.issues == []
        assert ours == theirs

        # 3. the same import again: no commit, no file changed
        for vault, export in ((raw_dst, "raw.jsonl"), (plain_dst, "plain.jsonl")):
            commits, before = commit_count(vault.root), mind_files(vault)
            again = vault.import_(tmp / export)
            assert again.commit is None and again.created == [] and again.unchanged == len(files)
            assert commit_count(vault.root) == commits and mind_files(vault) == before
    finally:
        for vault in (src, raw_dst, plain_dst):
            vault.close()


@FAST
@given(files=hand_files())
def test_hand_made_memories_survive_export_and_import(files: list[HandFile]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        round_trip(files, Path(tmp))


@pytest.mark.slow
@MANY
@given(files=hand_files())
def test_hand_made_memories_survive_export_and_import_many(files: list[HandFile]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        round_trip(files, Path(tmp))


def test_every_hazard_at_once_survives_export_and_import(tmp_path: Path) -> None:
    """All the cases together in one vault, whatever hypothesis draws."""
    everything = [(name, value) for name, value in zip(EXTRA_NAMES, EXTRA_VALUES)]
    files = [
        HandFile(
            category="preference",
            key="pho",
            id="mem_kitchensink01",
            entries=[("ghi_chu", "vui vẻ"), ("id", "mem_kitchensink01"), *everything[:6], ("priority", "high")]
            + [("tags", "[ẩm thực, อาหาร, 茶]"), ("created_at", "'2023-07-01T09:30:00+07:00'"), *everything[6:]],
            comments={0: "Ghi chú đầu tiên", 3: "ความคิดเห็น", 8: "注释"},
            inline={1: "an inline comment", 2: "chú thích"},
            body="\n".join(SCRIPTS + MARKDOWN),
            crlf=True,
            bom=True,
        ),
        HandFile(
            category="fact",
            key="old_office",
            id="mem_kitchensink02",
            entries=[
                ("id", "mem_kitchensink02"),
                ("status", "superseded"),
                ("superseded_by", "mem_kitchensink03"),
                ("zz", "1"),
            ],
            comments={},
            inline={},
            body="Văn phòng ở Quận 1",
        ),
        HandFile(
            category="fact",
            key="new_office",
            id="mem_kitchensink03",
            entries=[("id", "mem_kitchensink03"), ("aa", "[]")],
            comments={},
            inline={},
            body="Văn phòng ở Quận 3",
        ),
        HandFile(
            category="context",
            key="trip",
            id="mem_kitchensink04",
            entries=[("expires_at", PAST[0]), ("id", "mem_kitchensink04"), ("source", "agent")],
            comments={},
            inline={},
            body="เที่ยวเชียงใหม่",
            bom=True,
        ),
        HandFile("note", "no_front_matter", None, [], {}, {}, "中文笔记\n\nNo front-matter at all.", False, True, True),
        HandFile("skill", "no_id", None, [("priority", "low")], {}, {}, "Biết nấu phở", crlf=True),
    ]
    assert not {name for name, _ in everything} & KNOWN_FIELDS
    round_trip(files, tmp_path)


@pytest.mark.parametrize("hand_id", ["my-note-1", "12345", "Mem_Upper", "note 1"])
def test_a_hand_made_id_memfile_reads_survives_export_and_import(hand_id: str, tmp_path: Path) -> None:
    """memfile reads any text (or number) as a hand-made file's id: its own export must import again."""
    quoted = json.dumps(hand_id) if " " in hand_id else hand_id
    files = [HandFile("fact", "hand_id", None, [("id", quoted), ("aa", "1")], {}, {}, "Ghi chú của tôi")]
    round_trip(files, tmp_path)
