"""Validation at the boundary: model.py's parse_*/validate_* and paths.py's path rules.

Every refusal is an `InvalidInput` that names the field, the bad value and the
allowed values, so a face can turn it into a message without knowing the rule.
"""

from __future__ import annotations

import os
import random
import re
import string
from datetime import date, datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfile import Category, InvalidInput, Memory, Priority, Source, model, paths
from memfile.model import (
    DATETIME_RULE,
    DURATION_RULE,
    ID_PATTERN,
    KEY_RULE,
    derive_key,
    format_datetime,
    new_id,
    parse_bool,
    parse_category,
    parse_confidence,
    parse_datetime,
    parse_duration,
    parse_expires,
    parse_optional_datetime,
    parse_priority,
    parse_source,
    parse_tags,
    utc_now,
    validate_key,
)

UTC = timezone.utc
NOW = datetime(2026, 6, 27, 10, 0, 0, tzinfo=UTC)

ALL_CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context", "note"]


def refused(call, *args, **kwargs) -> InvalidInput:
    """The InvalidInput raised by `call(*args)` (fails the test if nothing is raised)."""
    with pytest.raises(InvalidInput) as info:
        call(*args, **kwargs)
    return info.value


# --- enums: category, priority, source --------------------------------------


@pytest.mark.parametrize("name", ALL_CATEGORIES)
def test_parse_category_accepts_every_category(name: str) -> None:
    assert parse_category(name) is Category(name)


def test_parse_category_ignores_case_and_surrounding_spaces() -> None:
    assert parse_category("  Project ") is Category.PROJECT


def test_parse_category_passes_an_enum_member_through() -> None:
    assert parse_category(Category.SKILL) is Category.SKILL


@pytest.mark.parametrize("bad", ["recipes", "", "projects", "note/x", None, 5, True, ["fact"], {"a": 1}])
def test_parse_category_refuses_unknown_values_naming_field_value_and_allowed(bad: object) -> None:
    err = refused(parse_category, bad)
    assert err.field == "category"
    assert err.value == bad
    assert err.allowed.split(", ") == ALL_CATEGORIES


def test_parse_category_uses_the_given_field_name() -> None:
    assert refused(parse_category, "recipes", "--category").field == "--category"


@pytest.mark.parametrize("name", ["low", "normal", "high", "critical", "HIGH", " critical "])
def test_parse_priority_accepts_the_four_levels(name: str) -> None:
    assert parse_priority(name) is Priority(name.strip().lower())


@pytest.mark.parametrize("bad", ["urgent", "5", 5, "", None, True])
def test_parse_priority_refuses_other_values_naming_the_levels(bad: object) -> None:
    err = refused(parse_priority, bad)
    assert (err.field, err.value) == ("priority", bad)
    assert err.allowed == "low, normal, high, critical"


def test_priority_rank_sorts_critical_first() -> None:
    ranked = sorted(Priority, key=lambda p: p.rank)
    assert ranked == [Priority.CRITICAL, Priority.HIGH, Priority.NORMAL, Priority.LOW]


@pytest.mark.parametrize("name", ["user", "agent", "Agent"])
def test_parse_source_accepts_user_and_agent(name: str) -> None:
    assert parse_source(name) is Source(name.lower())


@pytest.mark.parametrize("bad", ["human", "bot", "", None])
def test_parse_source_refuses_other_values(bad: object) -> None:
    err = refused(parse_source, bad)
    assert (err.field, err.value, err.allowed) == ("source", bad, "user, agent")


def test_invalid_input_message_is_a_sentence_naming_field_value_and_allowed() -> None:
    err = refused(parse_priority, "urgent")
    assert str(err) == "invalid priority 'urgent'; allowed: low, normal, high, critical."


# --- key ----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["a", "0", "project_synapse_status", "v1_5_0", "2026_goals", "a_", "a" * 100])
def test_validate_key_accepts_snake_case_up_to_100_characters(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "bad",
    ["..", "a/b", "a\\b", "-x", "_x", "Ab", "a" * 101, "café", "ключ", "a-b", "a b", "a.md", "", "a\n", None, 5],
)
def test_validate_key_refuses_non_snake_case_naming_the_rule(bad: object) -> None:
    err = refused(validate_key, bad)
    assert err.field == "key"
    assert err.value == bad
    assert err.allowed == KEY_RULE
    assert "snake_case" in err.allowed and "100" in err.allowed


@pytest.mark.parametrize(
    ("stem", "key"),
    [
        ("Reading-List", "reading_list"),
        ("My Notes 2026", "my_notes_2026"),
        ("__x__", "x"),
        ("thai_phrases", "thai_phrases"),
        ("Café au lait", "cafe_au_lait"),
        ("ÄÖÜ", "aou"),
        ("", "untitled"),
    ],
)
def test_derive_key_makes_a_snake_case_key_from_a_file_name(stem: str, key: str) -> None:
    assert derive_key(stem) == key


def test_derive_key_cuts_long_names_to_100_characters() -> None:
    key = derive_key("word-" * 40)
    assert len(key) <= 100 and validate_key(key) == key and not key.endswith("_")


@given(st.text(max_size=300))
def test_derive_key_always_returns_a_valid_key(stem: str) -> None:
    assert validate_key(derive_key(stem))


# --- confidence, bool ------------------------------------------------------------


@pytest.mark.parametrize(("value", "number"), [(0, 0.0), (0.0, 0.0), (1, 1.0), (0.85, 0.85), ("0.5", 0.5)])
def test_parse_confidence_accepts_numbers_from_0_to_1(value: object, number: float) -> None:
    assert parse_confidence(value) == number


@pytest.mark.parametrize(
    "bad", [-0.1, 1.5, 1.0000001, "high", "", True, False, None, float("nan"), float("inf"), [0.5]]
)
def test_parse_confidence_refuses_out_of_range_and_non_numbers(bad: object) -> None:
    err = refused(parse_confidence, bad)
    assert err.field == "confidence"
    assert err.value is bad
    assert err.allowed == "a number from 0.0 to 1.0"


@pytest.mark.parametrize(
    ("value", "result"), [(True, True), (False, False), ("true", True), ("Yes", True), ("false", False), ("no", False)]
)
def test_parse_bool_accepts_booleans_and_yes_no_words(value: object, result: bool) -> None:
    assert parse_bool(value, "verified") is result


@pytest.mark.parametrize("bad", ["maybe", "", 1, 0, None])
def test_parse_bool_refuses_anything_else(bad: object) -> None:
    err = refused(parse_bool, bad, "verified")
    assert (err.field, err.value, err.allowed) == ("verified", bad, "true, false (or yes, no)")


# --- tags -------------------------------------------------------------------------


def test_parse_tags_lowercases() -> None:
    assert parse_tags(["Synapse", "PostgreSQL"]) == ("synapse", "postgresql")


def test_parse_tags_deduplicates_case_insensitively_keeping_first_order() -> None:
    assert parse_tags(["b", "A", "a", "B", "c"]) == ("b", "a", "c")


def test_parse_tags_splits_a_comma_separated_string() -> None:
    assert parse_tags("synapse, Deployment,v1.5.0") == ("synapse", "deployment", "v1.5.0")


def test_parse_tags_splits_commas_inside_list_items_and_drops_empty_parts() -> None:
    assert parse_tags(["a,b", " , ", "c,"]) == ("a", "b", "c")


def test_parse_tags_collapses_inner_whitespace() -> None:
    assert parse_tags(["  Big \t  Data "]) == ("big data",)


def test_parse_tags_keeps_unicode_letters_lowercased() -> None:
    assert parse_tags(["Ünïcode", "ไทย", "ÜNÏCODE"]) == ("ünïcode", "ไทย")


def test_parse_tags_turns_numbers_into_text() -> None:
    assert parse_tags([2026, 1.5]) == ("2026", "1.5")


@pytest.mark.parametrize("empty", [None, "", [], ()])
def test_parse_tags_of_nothing_is_empty(empty: object) -> None:
    assert parse_tags(empty) == ()


@pytest.mark.parametrize("bad", ["-x", "ok, -rf", ["--force"]])
def test_parse_tags_refuses_a_leading_dash(bad: object) -> None:
    err = refused(parse_tags, bad)
    assert err.field in ("tag", "tags")
    assert err.value in ("-x", "-rf", "--force")
    assert "'-'" in err.allowed


def test_parse_tags_refuses_a_tag_longer_than_100_characters() -> None:
    err = refused(parse_tags, ["x" * 101])
    assert err.value == "x" * 101 and "100" in err.allowed


def test_parse_tags_accepts_a_tag_of_exactly_100_characters() -> None:
    assert parse_tags(["x" * 100]) == ("x" * 100,)


@pytest.mark.parametrize("bad", [{"a": 1}, 5, True])
def test_parse_tags_refuses_a_value_that_is_not_a_list_or_string(bad: object) -> None:
    err = refused(parse_tags, bad)
    assert (err.field, err.value) == ("tags", bad)
    assert err.allowed == "a list of strings or a comma-separated string"


@pytest.mark.parametrize("item", [True, None, ["nested"], {"a": 1}])
def test_parse_tags_refuses_list_items_that_are_not_text(item: object) -> None:
    err = refused(parse_tags, ["ok", item])
    assert (err.field, err.value, err.allowed) == ("tags", item, "strings")


def test_more_than_max_tags_are_refused_before_any_tag_is_looked_at() -> None:
    # 40,000 tags (a 379 KB body) took 75 s to deduplicate: the count is refused first, so a bad tag among
    # them is never reached (the error names the count, not the tag).
    err = refused(parse_tags, ["-bad", *(f"t{i}" for i in range(40_000))])
    assert (err.field, err.value) == ("tags", "40001 tags") and f"at most {model.MAX_TAGS} tags" in err.allowed
    err = refused(parse_tags, ",".join(f"t{i}" for i in range(model.MAX_TAGS + 1)))
    assert err.value == f"{model.MAX_TAGS + 1} tags"
    assert "101 tags" in str(refused(parse_tags, ["a, b"] * 50 + ["c"]))  # commas inside items count too
    assert parse_tags(["same"] * model.MAX_TAGS) == ("same",)


def test_a_file_s_tags_are_read_whatever_their_number_deduplicated_in_order() -> None:
    many = [f"t{i}" for i in range(40_000)]
    assert parse_tags([*many, "t0", "T1"], bounded=False) == tuple(many)


def test_a_value_that_looks_like_a_secret_is_masked_in_every_message_that_quotes_it() -> None:
    token = "gh" + "p_" + "".join(random.Random(13).choices(string.ascii_letters + string.digits, k=36))
    for err in (
        refused(parse_priority, token),
        refused(parse_confidence, token),
        refused(parse_expires, token, utc_now()),
        refused(validate_key, token),
        refused(parse_tags, [token.lower() * 3]),
        refused(model.resolve_ref, token, [], "michael"),
    ):
        assert token[6:-6] not in str(err) and "ghp_…" in str(err), str(err)
    assert token[6:-6] not in str(refused(parse_tags, {"tags": [token]}))  # any value's repr
    with pytest.raises(model.NotFound) as lowered:  # a token that is also a valid key: no memory has it
        model.resolve_ref(token.lower(), [], "michael")
    assert token.lower()[6:-6] not in str(lowered.value) and "ghp_…" in str(lowered.value)
    assert "'priority'" in str(refused(parse_priority, "priority"))  # an ordinary value is quoted as it is


# --- dates and durations -----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-27T10:00:00Z",
        "2026-06-27T10:00:00+00:00",
        "2026-06-27T12:00:00+02:00",
        "2026-06-27T05:30:00-04:30",
        " 2026-06-27T10:00:00Z ",
    ],
)
def test_parse_datetime_reads_iso_with_z_or_offset_as_utc(text: str) -> None:
    moment = parse_datetime(text, "created_at")
    assert moment == NOW
    assert moment.tzinfo is UTC


def test_parse_datetime_reads_a_date_as_midnight_utc() -> None:
    assert parse_datetime("2026-06-27", "created_at") == datetime(2026, 6, 27, tzinfo=UTC)


def test_parse_datetime_takes_a_naive_time_as_utc() -> None:
    assert parse_datetime("2026-06-27T10:00:00", "created_at") == NOW
    assert parse_datetime(datetime(2026, 6, 27, 10), "created_at") == NOW


def test_parse_datetime_converts_aware_datetimes_and_dates() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert parse_datetime(datetime(2026, 6, 27, 12, tzinfo=plus2), "x").tzinfo is UTC
    assert parse_datetime(datetime(2026, 6, 27, 12, tzinfo=plus2), "x") == NOW
    assert parse_datetime(date(2026, 6, 27), "x") == datetime(2026, 6, 27, tzinfo=UTC)


def test_parse_datetime_keeps_fractional_seconds() -> None:
    assert parse_datetime("2026-06-27T10:00:00.250Z", "x") == NOW.replace(microsecond=250000)


@pytest.mark.parametrize(
    "bad", ["yesterday", "2026-13-01", "2026-02-30", "27/06/2026", "2026-06-27T25:00:00Z", "", 5, None, True]
)
def test_parse_datetime_refuses_garbage_naming_field_and_format(bad: object) -> None:
    err = refused(parse_datetime, bad, "created_at")
    assert (err.field, err.value, err.allowed) == ("created_at", bad, DATETIME_RULE)


@pytest.mark.parametrize("empty", [None, "", "null", "None", "~", " NULL "])
def test_parse_optional_datetime_reads_empty_spellings_as_none(empty: object) -> None:
    assert parse_optional_datetime(empty, "expires_at") is None


def test_parse_optional_datetime_refuses_garbage() -> None:
    assert refused(parse_optional_datetime, "soon", "expires_at").field == "expires_at"


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        (" 7D ", timedelta(days=7)),
        ("0m", timedelta(0)),
    ],
)
def test_parse_duration_reads_minutes_hours_days_weeks(text: str, delta: timedelta) -> None:
    assert parse_duration(text) == delta


def test_parse_duration_passes_a_timedelta_through() -> None:
    assert parse_duration(timedelta(hours=3)) == timedelta(hours=3)


@pytest.mark.parametrize("bad", ["7", "d", "1y", "3s", "-1d", "1.5h", "7days", "d7", "", 7, None])
def test_parse_duration_refuses_other_spellings(bad: object) -> None:
    err = refused(parse_duration, bad)
    assert (err.field, err.value, err.allowed) == ("duration", bad, DURATION_RULE)


@pytest.mark.parametrize(
    ("text", "delta"), [("30m", timedelta(minutes=30)), ("7d", timedelta(days=7)), ("2w", timedelta(weeks=2))]
)
def test_parse_expires_reads_a_duration_from_now(text: str, delta: timedelta) -> None:
    assert parse_expires(text, NOW) == NOW + delta


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-07-01T00:00:00Z", datetime(2026, 7, 1, tzinfo=UTC)),
        ("2026-07-01T02:00:00+02:00", datetime(2026, 7, 1, tzinfo=UTC)),
        ("2026-07-01", datetime(2026, 7, 1, tzinfo=UTC)),
    ],
)
def test_parse_expires_reads_an_iso_moment(text: str, moment: datetime) -> None:
    assert parse_expires(text, NOW) == moment


@pytest.mark.parametrize("never", ["never", "NEVER", "none", "null", None])
def test_parse_expires_reads_never_as_none(never: object) -> None:
    assert parse_expires(never, NOW) is None


def test_parse_expires_passes_a_datetime_through_as_utc() -> None:
    assert parse_expires(datetime(2026, 7, 1, tzinfo=UTC), NOW) == datetime(2026, 7, 1, tzinfo=UTC)


@pytest.mark.parametrize("bad", ["soon", "1y", "tomorrow", "2026-13-01"])
def test_parse_expires_refuses_garbage_naming_all_three_forms(bad: str) -> None:
    err = refused(parse_expires, bad, NOW)
    assert (err.field, err.value) == ("expires", bad)
    assert DURATION_RULE in err.allowed and DATETIME_RULE in err.allowed and "never" in err.allowed


def test_format_datetime_writes_utc_with_z() -> None:
    assert format_datetime(datetime(2026, 6, 27, 12, tzinfo=timezone(timedelta(hours=2)))) == "2026-06-27T10:00:00Z"


def test_format_datetime_keeps_microseconds_only_when_present() -> None:
    assert format_datetime(NOW.replace(microsecond=250000)) == "2026-06-27T10:00:00.250000Z"


def test_utc_now_is_aware_utc_with_whole_seconds() -> None:
    now = utc_now()
    assert now.tzinfo is UTC and now.microsecond == 0


# --- ids ----------------------------------------------------------------------


def test_new_id_matches_the_id_pattern() -> None:
    for _ in range(50):
        ident = new_id()
        assert ID_PATTERN.fullmatch(ident)
        assert re.fullmatch(r"mem_[0-9a-z]{16}", ident)


def test_new_id_is_unique() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)


def test_new_id_sorts_by_creation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    for seconds in (1_780_000_000.000, 1_780_000_000.001, 1_790_000_000.0):
        monkeypatch.setattr(model.time, "time", lambda s=seconds: s)
        made.append(new_id())
    assert made == sorted(made)


# --- Memory -------------------------------------------------------------------


def _memory(**changes: object) -> Memory:
    base = dict(
        id="mem_01jf3k8q2w7x",
        mind="michael",
        category=Category.PROJECT,
        key="synapse_status",
        content="v1.5.0 deployed",
        path="michael/project/synapse_status.md",
        created_at=NOW,
        updated_at=NOW,
    )
    return Memory(**(base | changes))  # type: ignore[arg-type]


def test_memory_ref_is_category_slash_key() -> None:
    assert _memory().ref == "project/synapse_status"


def test_memory_is_expired_only_at_or_after_expires_at() -> None:
    memory = _memory(expires_at=NOW + timedelta(days=1))
    assert not memory.is_expired(NOW)
    assert memory.is_expired(NOW + timedelta(days=1))
    assert not _memory().is_expired(NOW + timedelta(days=10_000))


def test_memory_to_dict_writes_dates_as_iso_z_and_extra_as_json() -> None:
    data = _memory(extra=(("aliases", ["a"]), ("seen", date(2026, 1, 2)))).to_dict()
    assert data["created_at"] == "2026-06-27T10:00:00Z"
    assert data["expires_at"] is None
    assert data["extra"] == {"aliases": ["a"], "seen": "2026-01-02"}
    assert data["category"] == "project" and data["priority"] == "normal" and data["source"] == "user"


# --- paths: minds ---------------------------------------------------------------


@pytest.mark.parametrize("mind", ["michael", "bot-1", "chat_2026", "a", "x" * 64])
def test_validate_mind_accepts_lowercase_names(mind: str) -> None:
    assert paths.validate_mind(mind) == mind


@pytest.mark.parametrize(
    "bad", ["Michael", "-x", "_x", ".git", ".memfile", "..", "a/b", "a b", "", "x" * 65, "mïnd", None, 5]
)
def test_validate_mind_refuses_other_names(bad: object) -> None:
    err = refused(paths.validate_mind, bad)
    assert (err.field, err.value, err.allowed) == ("mind", bad, paths.MIND_RULE)


# --- paths: memory_relpath ----------------------------------------------------


def test_memory_relpath_is_mind_category_key_md() -> None:
    assert paths.memory_relpath("michael", Category.FACT, "vps1_server") == PurePosixPath("michael/fact/vps1_server.md")


@pytest.mark.parametrize("key", ["..", "../../etc/passwd", "a/b", "/abs"])
def test_memory_relpath_refuses_a_key_that_would_leave_the_folder(key: str) -> None:
    err = refused(paths.memory_relpath, "michael", Category.FACT, key)
    assert (err.field, err.value) == ("key", key)


@pytest.mark.parametrize("mind", ["..", "../other", "/tmp", ""])
def test_memory_relpath_refuses_a_bad_mind(mind: str) -> None:
    assert refused(paths.memory_relpath, mind, Category.FACT, "x").field == "mind"


# --- paths: safe_path -----------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    (vault / "michael" / "fact").mkdir(parents=True)
    (vault / "other" / "fact").mkdir(parents=True)
    return vault


def test_safe_path_returns_the_path_inside_the_mind(root: Path) -> None:
    assert paths.safe_path(root, "michael/fact/x.md", "michael") == root / "michael" / "fact" / "x.md"
    assert paths.safe_path(root, PurePosixPath("michael/fact/x.md"), "michael") == root / "michael" / "fact" / "x.md"


@pytest.mark.parametrize(
    "rel",
    [
        "michael/../other/fact/x.md",
        "michael/fact/../../other/fact/x.md",
        "../outside.md",
        "michael/..",
        "michael\\..\\other\\fact\\x.md",
    ],
)
def test_safe_path_refuses_dot_dot(root: Path, rel: str) -> None:
    err = refused(paths.safe_path, root, rel, "michael")
    assert (err.field, err.value) == ("path", rel)
    assert "michael/" in err.allowed


@pytest.mark.parametrize("rel", ["/etc/passwd", "/michael/fact/x.md"])
def test_safe_path_refuses_absolute_paths(root: Path, rel: str) -> None:
    assert refused(paths.safe_path, root, rel, "michael").value == rel


def test_safe_path_refuses_an_absolute_path_inside_the_vault(root: Path) -> None:
    rel = str(root / "michael" / "fact" / "x.md")
    assert refused(paths.safe_path, root, rel, "michael").field == "path"


@pytest.mark.parametrize("rel", ["other/fact/x.md", "michaelx/fact/x.md", "x.md", ""])
def test_safe_path_refuses_other_minds_and_the_vault_root(root: Path, rel: str) -> None:
    assert refused(paths.safe_path, root, rel, "michael").field == "path"


def test_safe_path_refuses_a_symlinked_folder_pointing_outside(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "michael" / "escape").symlink_to(outside, target_is_directory=True)
    err = refused(paths.safe_path, root, "michael/escape/x.md", "michael")
    assert (err.field, err.value) == ("path", "michael/escape/x.md")
    assert "symlink" in err.allowed


def test_safe_path_refuses_a_symlink_into_another_mind(root: Path) -> None:
    (root / "michael" / "peek").symlink_to(root / "other" / "fact", target_is_directory=True)
    assert "symlink" in refused(paths.safe_path, root, "michael/peek/x.md", "michael").allowed


def test_safe_path_refuses_a_symlinked_file_pointing_outside(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("secret")
    os.symlink(secret, root / "michael" / "fact" / "leak.md")
    assert refused(paths.safe_path, root, "michael/fact/leak.md", "michael").field == "path"


def test_safe_path_allows_a_symlink_that_stays_inside_the_mind(root: Path) -> None:
    (root / "michael" / "shortcut").symlink_to(root / "michael" / "fact", target_is_directory=True)
    assert paths.safe_path(root, "michael/shortcut/x.md", "michael") == root / "michael" / "shortcut" / "x.md"


def test_safe_paths_answers_as_safe_path_for_each(root: Path, tmp_path: Path) -> None:
    """Each folder resolved once, each symlinked file resolved again: the same path or the same refusal as
    `safe_path` of each path alone, in any order (a symlinked file first or after a plain one)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    mind = root / "michael"
    (mind / "escape").symlink_to(outside, target_is_directory=True)
    (mind / "shortcut").symlink_to(mind / "fact", target_is_directory=True)
    (mind / "bridge").mkdir()
    (mind / "bridge" / "in.md").symlink_to(mind / "fact" / "x.md")  # a file inside, through a link
    (mind / "bridge" / "out.md").symlink_to(outside / "secret.md")  # a file outside, beside plain ones
    (outside / "back.md").symlink_to(mind / "fact" / "x.md")  # a folder outside, a file pointing back in
    cases = [
        "michael/fact/x.md",
        "michael/fact/y.md",
        "michael/shortcut/z.md",
        "michael/bridge/in.md",
        "michael/bridge/plain.md",
        "michael/bridge/out.md",
        "michael/escape/back.md",
        "michael/escape/x.md",
        "michael/../other/fact/x.md",
        "other/fact/x.md",
    ]

    def alone(rel: str) -> Path | str:
        try:
            return paths.safe_path(root, rel, "michael")
        except InvalidInput as exc:
            return str(exc)

    for order in (cases, cases[::-1], sorted(cases, key=lambda c: c.endswith("plain.md"))):
        for n, rel in enumerate(order):
            ok = [r for r in order[:n] if not isinstance(alone(r), str)]  # the paths checked before it
            try:
                got: Path | str = paths.safe_paths(root, [*ok, rel], "michael")[-1]
            except InvalidInput as exc:
                got = str(exc)
            assert got == alone(rel), (order, rel)


# --- paths: ignore rules ---------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        ".x.md.swp",
        ".x.md.swo",
        "x.md.swp",
        "x.md~",
        ".#x.md",
        "#x.md#",
        "4913",
        "x.md___jb_tmp___",
        "x.md___jb_old___",
        "x.md.tmp",
        "x.md.bak",
        "x.md.orig",
        ".hidden.md",
        ".git",
    ],
)
def test_is_ignored_name_ignores_editor_temp_files_and_dot_files(name: str) -> None:
    assert paths.is_ignored_name(name)
    assert not paths.is_memory_name(name)


@pytest.mark.parametrize("name", ["x.md", "reading-list.md", "4913.md", "notes~draft.md", "a#b.md", "swp.md"])
def test_is_ignored_name_keeps_ordinary_markdown_files(name: str) -> None:
    assert not paths.is_ignored_name(name)
    assert paths.is_memory_name(name)


@pytest.mark.parametrize("name", ["x.txt", "x.markdown", "x", "x.md.lock"])
def test_is_memory_name_needs_the_md_suffix(name: str) -> None:
    assert not paths.is_memory_name(name)


def test_mind_dirs_lists_top_level_folders_but_not_dot_folders_or_files(tmp_path: Path) -> None:
    for folder in ("michael", "bot", ".git", ".memfile", ".obsidian"):
        (tmp_path / folder).mkdir()
    (tmp_path / "memfile.toml").write_text("")
    assert paths.mind_dirs(tmp_path) == ["bot", "michael"]


# --- the catalog's rows -------------------------------------------------------------------------


def test_a_memory_comes_back_from_its_row_with_every_field_and_stays_frozen() -> None:
    import dataclasses

    from memfile.model import Status, memory_from_row, memory_to_row

    when = datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=timezone.utc)
    memory = Memory(
        id="mem_abc",
        mind="michael",
        category=Category.PROJECT,
        key="k",
        content="Body\nline two",
        path="michael/project/k.md",
        created_at=when,
        updated_at=when + timedelta(days=1),
        priority=Priority.HIGH,
        tags=("a", "b"),
        source=Source.AGENT,
        verified=False,
        confidence=0.7,
        expires_at=when + timedelta(days=9),
        status=Status.SUPERSEDED,
        superseded_by="mem_new",
        extra=(("owner", "ana"), ("n", 3)),
        has_front_matter=False,
        id_derived=True,
    )
    back = memory_from_row(memory_to_row(memory))
    assert back == memory
    assert set(vars(back)) == {f.name for f in dataclasses.fields(Memory)}
    assert all(getattr(back, f.name) == getattr(memory, f.name) for f in dataclasses.fields(Memory))
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.key = "other"  # type: ignore[misc]
    plain = Memory(
        id="mem_x",
        mind="m",
        category=Category.NOTE,
        key="x",
        content="",
        path="m/note/x.md",
        created_at=when,
        updated_at=when,
    )
    assert memory_from_row(memory_to_row(plain)) == plain
