"""Reading LangBot LongTermMemory's export envelopes into import records.

An envelope holds a scope's L1 `profiles`, its L2 `episodes`, or both; docs/sync.md gives how each maps
to memories. A speaker's profile and episodes share the tag `speaker:<sender_id>`. Ids are derived from
what names a record and dates come from the envelope, so importing it twice changes nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..errors import InvalidInput, masked
from ..model import Priority, parse_priority
from .records import ImportOptions, Incoming, reader_source
from .synapse import clean_tag, derived_id, iso_z, shown, slug, unique_key

FORMAT = "langbot"
SHAPE = 'a LangBot export envelope: an object with "profiles" (L1) or "episodes" (L2)'
ENVELOPE_FIELDS = ("version", "exported_at", "scope_key", "user_key", "collection_id", "statuses", "count")
ENTRY_FIELDS = ("type", "scope_key", "sender_id", "profile")
PROFILE_FIELDS = (
    "name",
    "traits",
    "preferences",
    "notes",
    "updated_at",
    "profile_slots",
    "freeform_traits",
    "freeform_preferences",
)
EPISODE_FIELDS = (
    "id",
    "content",
    "tags",
    "importance",
    "timestamp",
    "sender_id",
    "sender_name",
    "source",
    "status",
    "superseded_by",
)
#: LangBot's importance (clamped to 1..5, default 2) -> memfile's priority, before the `max_priority` cap.
IMPORTANCE = {1: Priority.LOW, 2: Priority.NORMAL, 3: Priority.NORMAL, 4: Priority.HIGH, 5: Priority.CRITICAL}
#: Profile fields: (field, category, key prefix).
PROFILE_LISTS = (("traits", "identity", "trait_"), ("preferences", "preference", ""))


def read_langbot(data: Any, options: ImportOptions) -> Incoming:
    """Records from a LangBot L1 `profiles` or L2 `episodes` envelope (or one holding both).

    Raises InvalidInput naming the place ("episodes[3].importance") for a shape it cannot read.
    """
    if not isinstance(data, dict) or not ("profiles" in data or "episodes" in data):
        raise InvalidInput("LangBot import", shown(data), SHAPE)
    reader = _Reader(data, options)
    if "profiles" in data:
        reader.profiles(data["profiles"])
    if "episodes" in data:
        reader.episodes(data["episodes"])
    return Incoming(format=FORMAT, records=reader.records, unmapped=reader.unmapped)


class _Reader:
    """One envelope's records, what could not be mapped, and the keys taken so far per category."""

    def __init__(self, data: dict[str, Any], options: ImportOptions) -> None:
        self.options = options
        self.records: list[dict[str, Any]] = []
        self.unmapped: list[str] = []
        self.taken: dict[str, set[str]] = {}
        self.source = reader_source(options)
        self.cap = parse_priority(options.max_priority, "max_priority")
        self.scope = _text(data.get("scope_key"), "scope_key")
        self.exported_at = iso_z(data.get("exported_at"), "exported_at")
        version = data.get("version")
        if version is not None and version != 1:
            self.unmapped.append(f"envelope version {shown(version)!r}: read as version 1")
        lists = [name for name in ("profiles", "episodes") if name in data]
        count = data.get("count")
        if len(lists) == 1 and isinstance(data[lists[0]], list) and isinstance(count, int):
            if count != len(data[lists[0]]):
                self.unmapped.append(
                    f"the envelope's count says {count} but it holds {len(data[lists[0]])} {lists[0]}:"
                    " the file may have been cut or edited"
                )
        known = (*ENVELOPE_FIELDS, "profiles", "episodes")
        self.unmapped += [f"envelope field {name!r}: not imported" for name in data if name not in known]

    # ------------------------------------------------------------ L1

    def profiles(self, entries: Any) -> None:
        if not isinstance(entries, list):
            raise InvalidInput("profiles", shown(entries), "a JSON array of profile entries")
        for number, entry in enumerate(entries):
            place = f"profiles[{number}]"
            if not isinstance(entry, dict):
                raise InvalidInput(place, shown(entry), 'an object {"type", "scope_key", "profile"}')
            self.profile(entry, place)

    def profile(self, entry: dict[str, Any], place: str) -> None:
        sender = _text(entry.get("sender_id"), f"{place}.sender_id")
        kind = entry.get("type", "speaker" if sender else "session")
        if not isinstance(kind, str):
            raise InvalidInput(f"{place}.type", shown(kind), "session, speaker")
        if kind not in ("session", "speaker"):
            self.unmapped.append(f"{place}: profile type {kind!r} is neither session nor speaker: skipped")
            return
        if kind == "speaker" and not sender:
            raise InvalidInput(f"{place}.sender_id", None, "the speaker's id (a speaker profile has one)")
        profile = entry.get("profile")
        if not isinstance(profile, dict):
            raise InvalidInput(f"{place}.profile", shown(profile), "an object with name, traits, preferences, notes")
        scope = _text(entry.get("scope_key"), f"{place}.scope_key") or self.scope
        who = f"{place} ({kind} profile{f' of {sender}' if kind == 'speaker' else ''})"
        self.unmapped += [f"{who}: field {name!r} not imported" for name in entry if name not in ENTRY_FIELDS]
        self.unmapped += [
            f"{who}: profile field {name!r} not imported" for name in profile if name not in PROFILE_FIELDS
        ]
        updated = iso_z(profile.get("updated_at"), f"{place}.profile.updated_at") or self.exported_at
        prefix = f"{slug(sender, 40)}_" if kind == "speaker" else ""
        tags = ["langbot", *_tags([("speaker:", sender), ("scope:", scope)])]
        extra: dict[str, Any] = {}
        if scope:
            extra["langbot_scope_key"] = scope
        if sender:
            extra["langbot_sender_id"] = sender
        base = {"tags": tags, "source": self.source, "created_at": updated, "updated_at": updated}
        naming = f"profile:{scope}:{sender}"

        name = _text(profile.get("name"), f"{place}.profile.name")
        if name:
            key = f"{prefix}name" if kind == "speaker" else "user_name"
            self.add(naming, "identity", key, name, f"{who} name", base, extra, priority="high")
        slots = _or_empty(profile.get("profile_slots"))
        if not isinstance(slots, dict):
            raise InvalidInput(f"{place}.profile.profile_slots", shown(slots), "an object {traits, preferences}")
        for field, category, key_prefix in PROFILE_LISTS:
            self.profile_list(profile, slots, field, category, prefix + key_prefix, place, who, naming, base, extra)
        notes = profile.get("notes")
        if notes is not None and not isinstance(notes, str):
            raise InvalidInput(f"{place}.profile.notes", shown(notes), "text")
        if notes and notes.strip():
            self.add(naming, "note", f"{prefix}profile_notes", notes, f"{who} notes", base, extra)

    def profile_list(
        self,
        profile: dict[str, Any],
        slots: dict[str, Any],
        field: str,
        category: str,
        key_prefix: str,
        place: str,
        who: str,
        naming: str,
        base: dict[str, Any],
        extra: dict[str, Any],
    ) -> None:
        """A profile's traits or preferences: each slot's current value, then the freeform entries."""
        group = _or_empty(slots.get(field))
        if not isinstance(group, dict):
            raise InvalidInput(f"{place}.profile.profile_slots.{field}", shown(group), "an object of slots")
        seen: set[str] = set()
        for slot_key, slot in group.items():
            at = f"{place}.profile.profile_slots.{field}.{slot_key}"
            if not isinstance(slot, dict):
                raise InvalidInput(at, shown(slot), "an object {value, updated_at, history, confidence}")
            value = _text(slot.get("value"), f"{at}.value")
            history = slot.get("history")
            if history is not None and not isinstance(history, list):
                self.unmapped.append(f"{who}: {field} slot {slot_key!r}: history is not a list: not imported")
                history = None
            if not value:
                if history:
                    self.unmapped.append(
                        f"{who}: {field} slot {slot_key!r} has no current value (removed):"
                        f" its history of {len(history)} entries is not imported"
                    )
                continue
            seen.add(value)
            slot_extra = {**extra, "langbot_slot": slot_key}
            if history:
                slot_extra["langbot_history"] = history
            updated = iso_z(slot.get("updated_at"), f"{at}.updated_at") or base["created_at"]
            fields = {**base, "created_at": updated, "updated_at": updated}
            confidence = slot.get("confidence")
            if isinstance(confidence, int | float) and not isinstance(confidence, bool):
                fields["confidence"] = max(0.0, min(1.0, float(confidence)))  # LangBot's own clamp
            elif confidence is not None:
                self.unmapped.append(f"{who}: {field} slot {slot_key!r}: confidence {shown(confidence)!r} not imported")
            key = key_prefix + slug(str(slot_key), 96 - len(key_prefix))
            self.add(naming, category, key, value, f"{who} {field} slot {slot_key!r}", fields, slot_extra)
        freeform = profile.get(f"freeform_{field}")
        at = f"{place}.profile.freeform_{field}"
        if freeform is None:  # LangBot's own fallback: a profile written before the slots
            freeform, at = profile.get(field), f"{place}.profile.{field}"
        if freeform is None:
            return
        if not isinstance(freeform, list):
            raise InvalidInput(at, shown(freeform), "a JSON array of text")
        for number, item in enumerate(freeform):
            value = _text(item, f"{at}[{number}]")
            if not value or value in seen:
                continue
            seen.add(value)
            key = key_prefix + slug(value, 96 - len(key_prefix))
            self.add(naming, category, key, value, f"{who} {field} {value!r}", base, extra)

    # ------------------------------------------------------------ L2

    def episodes(self, episodes: Any) -> None:
        if not isinstance(episodes, list):
            raise InvalidInput("episodes", shown(episodes), "a JSON array of episodes")
        parsed: list[tuple[str, dict[str, Any]]] = []
        imported: dict[str, str] = {}  # LangBot episode id -> the memfile id it gets
        for number, episode in enumerate(episodes):
            place = f"episodes[{number}]"
            if not isinstance(episode, dict):
                raise InvalidInput(place, shown(episode), "an object {id, content, importance, timestamp, ...}")
            fields = self.episode_fields(episode, place)
            label = f"{place} (id {masked(fields['id'])})" if fields["id"] else place
            if fields["status"] == "deleted":
                self.unmapped.append(f"{label}: status 'deleted': skipped")
                continue
            if not fields["content"].strip():
                self.unmapped.append(f"{label}: no content: skipped")
                continue
            naming = (
                fields["id"]
                or "content:" + hashlib.sha1(f"{fields['timestamp']}\n{fields['content']}".encode()).hexdigest()[:12]
            )
            if naming in imported:
                self.unmapped.append(f"{label}: the same episode id appears earlier in the file: skipped")
                continue
            imported[naming] = derived_id(FORMAT, naming)
            parsed.append((label, {**fields, "naming": naming}))
        for label, fields in parsed:
            self.add_episode(label, fields, imported)

    def episode_fields(self, episode: dict[str, Any], place: str) -> dict[str, Any]:
        """One episode's fields, checked: its shape is refused here, never half-read later."""
        self.unmapped += [f"{place}: field {name!r} not imported" for name in episode if name not in EPISODE_FIELDS]
        content = episode.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidInput(f"{place}.content", shown(content), "text")
        status = episode.get("status") or "active"
        if not isinstance(status, str):
            raise InvalidInput(f"{place}.status", shown(status), "active, superseded, archived, deleted")
        status = status.strip().lower()
        if status not in ("active", "superseded", "archived", "deleted"):
            self.unmapped.append(f"{place}: status {status!r} is not LangBot's: read as active, as LangBot does")
            status = "active"
        tags = episode.get("tags")
        if isinstance(tags, str):  # LangBot's vector metadata keeps them comma-separated
            tags = tags.split(",")
        if tags is not None and not isinstance(tags, list):
            raise InvalidInput(f"{place}.tags", shown(tags), "a JSON array of text")
        return {
            "id": _text(episode.get("id"), f"{place}.id"),
            "content": content or "",
            "tags": [_text(tag, f"{place}.tags[{n}]") for n, tag in enumerate(tags or [])],
            "priority": self.priority(episode.get("importance"), f"{place}.importance"),
            "timestamp": iso_z(episode.get("timestamp"), f"{place}.timestamp"),
            "sender_id": _text(episode.get("sender_id"), f"{place}.sender_id"),
            "sender_name": _text(episode.get("sender_name"), f"{place}.sender_name"),
            "source": _text(episode.get("source"), f"{place}.source"),
            "status": status,
            "superseded_by": _text(episode.get("superseded_by"), f"{place}.superseded_by"),
        }

    def priority(self, importance: Any, place: str) -> str:
        """LangBot's importance as a priority: clamped to 1..5 (default 2) as LangBot does, capped at max_priority."""
        if importance is None or importance == "":
            level = 2
        elif isinstance(importance, bool):
            raise InvalidInput(place, importance, "an integer from 1 to 5")
        elif isinstance(importance, int):
            level = importance
        elif isinstance(importance, float) and importance.is_integer():
            level = int(importance)
        elif isinstance(importance, str) and importance.strip().lstrip("-").isdigit():
            level = int(importance.strip())
        else:
            raise InvalidInput(place, shown(importance), "an integer from 1 to 5")
        mapped = IMPORTANCE[max(1, min(5, level))]
        return str(mapped if mapped.rank >= self.cap.rank else self.cap)

    def add_episode(self, label: str, fields: dict[str, Any], imported: dict[str, str]) -> None:
        foreign = fields["id"]
        key_part = slug(foreign, 80) if foreign else fields["naming"].removeprefix("content:")
        extra: dict[str, Any] = {}
        if foreign:
            extra["langbot_episode_id"] = foreign
        for name in ("sender_id", "sender_name", "source"):
            if fields[name]:
                extra[f"langbot_{name}"] = fields[name]
        if self.scope:
            extra["langbot_scope_key"] = self.scope
        moment = fields["timestamp"] or self.exported_at
        speaker = fields["sender_id"] or fields["sender_name"]  # as a speaker profile's tag: one by-tag finds both
        tags = [*_tags([("", tag) for tag in fields["tags"]]), "langbot", *_tags([("speaker:", speaker)])]
        tags += _tags([("scope:", self.scope)])
        record: dict[str, Any] = {
            "id": imported[fields["naming"]],
            "category": "context",
            "key": unique_key(f"episode_{key_part}", self.taken.setdefault("context", set())),
            "content": fields["content"],
            "tags": list(dict.fromkeys(tags)),
            "priority": fields["priority"],
            "source": self.source,
            "created_at": moment,
            "updated_at": moment,
        }
        if fields["status"] == "superseded":
            record["status"] = "superseded"
            target = fields["superseded_by"]
            if target and target in imported:
                record["superseded_by"] = imported[target]
            elif target:
                extra["langbot_superseded_by"] = target
        elif fields["superseded_by"]:
            extra["langbot_superseded_by"] = fields["superseded_by"]
        if fields["status"] == "archived":  # hidden from recall, kept on disk: LangBot's "archived"
            record["expires_at"] = moment or self.options.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        record["extra"] = extra
        record["_where"] = label
        self.records.append(record)

    # ------------------------------------------------------------ both

    def add(
        self,
        naming: str,
        category: str,
        key: str,
        content: str,
        where: str,
        fields: dict[str, Any],
        extra: dict[str, Any],
        **more: Any,
    ) -> None:
        """Append one L1 record; a key another record of this envelope took gets a `_2` suffix, never merged."""
        key = unique_key(key, self.taken.setdefault(category, set()))
        record = {
            "id": derived_id(FORMAT, f"{naming}:{category}/{key}"),
            "category": category,
            "key": key,
            "content": content,
            **fields,
            **more,
            "extra": dict(extra),
            "_where": where,
        }
        self.records.append(record)


def _text(value: Any, place: str) -> str:
    """A scalar as stripped text ("" for none), as LangBot reads its fields; a container is refused."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidInput(place, shown(value), "text")
    return str(value).strip()


def _or_empty(value: Any) -> Any:
    """A missing object read as an empty one (any other value is checked by the caller)."""
    return {} if value is None else value


def _tags(pairs: list[tuple[str, str]]) -> list[str]:
    """Tags made from (prefix, foreign text): empty text makes none."""
    made = (clean_tag(prefix + text) for prefix, text in pairs if text)
    return [tag for tag in made if tag]
