"""Keys and ids memfile derives for a hand-made file without them (docs/format.md, "The memory file").

An ASCII file name keeps the derivation it always had (pinned here, and against the old formula for
any ASCII name); accented Latin letters fold to ASCII (`Ghi chú` -> `ghi_chu`); a name with letters that
do not fold (Thai, Chinese, Japanese, ...) gets a short hash of the name, so two such files never share
a key.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memfile import Vault, fileformat
from memfile.model import KEY_PATTERN, derive_key, key_fits_name

MTIME = datetime(2026, 6, 28, 9, 30, tzinfo=timezone.utc)


def old_derive_key(stem: str) -> str:
    """The derivation before non-ASCII names were handled: what every ASCII name must still give."""
    key = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")[:100].rstrip("_")
    return key or "untitled"


# --- ASCII names: unchanged ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "key"),
    [
        ("reading-list", "reading_list"),
        ("Reading-List", "reading_list"),
        ("My Notes 2026", "my_notes_2026"),
        ("__x__", "x"),
        ("thai_phrases", "thai_phrases"),
        ("project_synapse_status", "project_synapse_status"),
        ("2026-06-27 standup", "2026_06_27_standup"),
        ("a.b.c", "a_b_c"),
        ("---", "untitled"),
        ("", "untitled"),
        ("word-" * 40, ("word_" * 20)[:99]),
    ],
)
def test_an_ascii_name_derives_the_key_it_always_did(stem: str, key: str) -> None:
    assert derive_key(stem) == key


@given(st.text(st.characters(max_codepoint=127), max_size=300))
def test_any_ascii_name_derives_what_the_old_formula_gave(stem: str) -> None:
    assert derive_key(stem) == old_derive_key(stem)


@pytest.mark.parametrize(
    ("relpath", "derived"),
    [
        ("michael/note/reading-list.md", "mem_hd4daa128b22a76d"),
        ("michael/fact/office.md", "mem_h8a4c03efb429bfd"),
        ("michael/journal/2026/trip.md", "mem_h9404ff9f4210b10"),
    ],
)
def test_the_derived_id_of_a_hand_made_ascii_file_is_unchanged(relpath: str, derived: str) -> None:
    memory = fileformat.parse(b"a hand-made note\n", relpath, MTIME)
    assert (memory.id, memory.id_derived) == (derived, True)


# --- names in other scripts ---------------------------------------------------------------------

HASHED = re.compile(r"(?:[a-z0-9][a-z0-9_]*_)?[0-9a-f]{10}")


@pytest.mark.parametrize(
    ("stem", "key"),
    [
        ("Ghi chú", "ghi_chu"),
        ("Đà Nẵng", "da_nang"),
        ("Nhà Hàng Phở", "nha_hang_pho"),
        ("Café au lait", "cafe_au_lait"),
        ("ÄÖÜ", "aou"),
        ("Straße", "strasse"),
        ("Øresund Łódź", "oresund_lodz"),
        ("Notes — 2026", "notes_2026"),  # an em dash separates words, as `-` does
        ("Ｍｅｍｏ", "memo"),  # fullwidth letters have ASCII forms
    ],
)
def test_accented_latin_letters_fold_to_ascii(stem: str, key: str) -> None:
    assert derive_key(stem) == key


def test_a_name_that_does_not_fold_gets_a_hash_of_the_name() -> None:
    assert derive_key("日本語") == "file_77710aedc7"  # the same on every machine and run: SHA-256, not hash()
    assert derive_key("บันทึก") == "file_445f92396f"
    assert derive_key("Café 日本") == "cafe_fcac3af340"  # the part that folds stays readable
    assert derive_key("🎉 party") == "party_0d844be17c"
    assert len({derive_key(s) for s in ["日本語", "บันทึก", "Заметки", "中文", "中文 ", "한국어"]}) == 6


def test_a_hashed_key_is_the_same_for_the_nfc_and_nfd_spelling_of_a_name() -> None:
    """macOS hands out NFD file names: `が` is `か` plus a combining mark there."""
    for stem in ["がっこう", "Ghi chú", "Phở 日本"]:
        assert derive_key(unicodedata.normalize("NFD", stem)) == derive_key(unicodedata.normalize("NFC", stem))


def test_a_long_name_that_does_not_fold_keeps_its_hash_within_100_characters() -> None:
    key = derive_key("word " * 40 + "日本")
    assert len(key) == 100 and KEY_PATTERN.fullmatch(key)
    assert key.startswith("word_word") and re.search(r"[^_]_[0-9a-f]{10}$", key)


@given(st.text(max_size=300))
def test_any_name_derives_a_valid_key(stem: str) -> None:
    assert KEY_PATTERN.fullmatch(derive_key(stem))


#: Letters that have no ASCII form: Thai, Cyrillic, CJK, kana, Hangul.
UNFOLDABLE = st.one_of(
    st.characters(min_codepoint=lo, max_codepoint=hi)
    for lo, hi in [(0x0E01, 0x0E2E), (0x0410, 0x044F), (0x4E00, 0x9FFF), (0x3041, 0x3096), (0xAC00, 0xD7A3)]
)
STEMS = st.lists(UNFOLDABLE, min_size=1, max_size=8).map("".join)


@settings(max_examples=50)
@given(st.lists(STEMS, min_size=2, max_size=40, unique_by=lambda s: unicodedata.normalize("NFC", s)))
def test_different_names_that_do_not_fold_get_different_keys(stems: list[str]) -> None:
    keys = [derive_key(stem) for stem in stems]
    assert all(HASHED.fullmatch(key) for key in keys)
    assert len(set(keys)) == len(keys)


def test_two_thousand_thai_and_cjk_names_get_two_thousand_keys() -> None:
    thai = [chr(0x0E01 + i % 46) + chr(0x0E01 + i // 46 % 46) + "บันทึก" for i in range(1000)]
    cjk = [chr(0x4E00 + i) + "記" for i in range(1000)]
    keys = {derive_key(stem) for stem in thai + cjk}
    assert len(keys) == 2000


@pytest.mark.parametrize(
    ("key", "stem", "fits"),
    [
        ("reading_list", "Reading-List", True),
        ("cafe_au_lait", "Café au lait", True),
        ("caf_au_lait", "Café au lait", True),  # written into the file by a rewrite before this derivation
        ("file_77710aedc7", "日本語", True),
        ("untitled", "日本語", True),
        ("office", "Café au lait", False),
        ("untitled", "reading-list", False),
    ],
)
def test_a_key_fits_a_name_that_derives_it_now_or_derived_it_before(key: str, stem: str, fits: bool) -> None:
    assert key_fits_name(key, stem) is fits


# --- in a vault ---------------------------------------------------------------------------------


def test_non_ascii_file_names_in_a_vault_get_distinct_keys_and_doctor_finds_no_copy(vault: Vault) -> None:
    """QA's case: `日本語.md` and `บันทึก.md` both got the key `untitled`, `Ghi chú.md` got `ghi_ch`."""
    folder = vault.root / "michael" / "note"
    folder.mkdir(parents=True)
    for name, body in [("日本語", "b"), ("Ghi chú", "c"), ("บันทึก", "t"), ("Đà Nẵng", "d")]:
        (folder / f"{name}.md").write_text(body + "\n", encoding="utf-8")
    keys = {Path(m.path).stem: m.key for m in vault.list()}
    assert keys == {
        "日本語": "file_77710aedc7",
        "Ghi chú": "ghi_chu",
        "บันทึก": "file_445f92396f",
        "Đà Nẵng": "da_nang",
    }
    assert vault.get("note/file_445f92396f").content == "t"
    assert vault.get("note/ghi_chu").content == "c"
    assert not [f for f in vault.doctor().problems if f.kind == "duplicate"]


def test_a_rewrite_of_a_non_ascii_hand_made_file_keeps_its_derived_key_and_id(vault: Vault) -> None:
    folder = vault.root / "michael" / "note"
    folder.mkdir(parents=True)
    (folder / "บันทึก.md").write_text("t\n", encoding="utf-8")
    before = vault.get("note/file_445f92396f")
    after = vault.store("note", "file_445f92396f", "t", tags=["thai"]).memory
    assert (after.key, after.id, after.path) == (before.key, before.id, "michael/note/บันทึก.md")
    text = (folder / "บันทึก.md").read_text(encoding="utf-8")
    assert f"id: {before.id}\n" in text and "key: file_445f92396f\n" in text and text.endswith("---\nt\n")
    assert vault.doctor().problems == []  # its front-matter key is the one its name gives: not misplaced
