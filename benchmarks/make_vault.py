"""The benchmarks' synthetic vault: deterministic, standard library only.

    python benchmarks/make_vault.py --n 10000 --seed 42 --out /tmp/vault-10k [--git] [--probes 20]

makes, in the file format of docs/format.md:

    OUT/memfile.toml, OUT/.gitignore (".memfile/")
    OUT/<mind>/<category>/<key>.md      (one mind, `--mind`, default "bench")

with N memories:

- the 8 categories in a skewed mix (fact, preference, context and project most common,
  identity rarest); snake_case keys, unique within their category;
- 2-5 lowercase tags from a fixed vocabulary, half of them picked for the category;
- priority low/normal/high/critical at about 15/65/15/5 % (bench_mcp.py and bench_serve.py
  demote the critical ones by the line `priority: critical`);
- source user (60 %, verified) or agent (40 %, mostly unverified, confidence near 0.7);
- created_at between 2023-01-01 and `--now`, updated_at no earlier; about 10 % carry an
  expires_at, half before `--now` and half in 2031-2036;
- about 5 % are hand-written files (`--hand-made`): front-matter with only tags and, when set,
  priority and expires_at, so the category and key come from the folder and the file name;
- bodies of 100-1,500 characters (log-normal, median about 400) of English sentences from the
  word lists below, some as Markdown bullets with inline code; about 5 % hold Vietnamese and
  5 % Thai sentences (Thai written without spaces between words).

The same (N, seed, `--now`) gives the same bytes. `--probes M` also plants M needle facts
("The gate code for X is QZ-1234.") and writes their questions as JSON lines to `--probes-out`
(default OUT.probes.jsonl): each line has `question`, `answer`, `evidence_keys` and `category`
(0 `probe-unique`: the place is a made-up word found nowhere else; 9 `probe-similar`: "the
<colour> <building>", each word shared with other needles). `--git` makes OUT a git repository
with one commit. `generate()` does the same in process (bench_serve.py writes many minds so).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CATEGORIES = {"identity": 4, "preference": 16, "fact": 20, "project": 15, "skill": 9}
CATEGORIES |= {"mistake": 8, "context": 16, "note": 12}
PRIORITIES = {"low": 15, "normal": 65, "high": 15, "critical": 5}

TAGS = (
    "python rust go typescript sql bash docker kubernetes postgres sqlite redis git ci testing security "
    "performance api frontend backend database deployment linux networking auth logging monitoring search "
    "markdown yaml cli design docs review refactor bug incident release migration backup cloud terraform "
    "timezone calendar email privacy billing analytics onboarding meeting deadline client team roadmap budget "
    "travel food health family music reading learning caching concurrency"
).split()
CATEGORY_TAGS = {
    "identity": "family health travel music reading timezone team".split(),
    "preference": "design docs review food music cli".split(),
    "fact": "database networking cloud billing analytics".split(),
    "project": "roadmap deadline release migration refactor client budget".split(),
    "skill": "python rust go typescript sql bash learning".split(),
    "mistake": "bug incident backup security deployment git testing".split(),
    "context": "meeting deadline onboarding team calendar email".split(),
    "note": "reading learning docs roadmap music food".split(),
}
KEY_WORDS = {
    "identity": "name home city job employer birthday languages timezone family pets team role".split(),
    "preference": "editor shell theme indent tone style coffee tea music meeting_time framework formatter".split(),
    "fact": "port region database quota limit office server cluster endpoint budget version owner".split(),
    "project": "atlas cascade ember falcon harbor juniper lumen nimbus orchid quartz roadmap milestone".split(),
    "skill": "python rust go typescript sql docker kubernetes terraform regex profiling debugging".split(),
    "mistake": "force_push migration expired_cert wrong_branch timezone_bug cache_flush typo_config".split(),
    "context": "current_task sprint meeting vacation focus blocker standup oncall review".split(),
    "note": "todo idea reading_list reminder link snippet draft question recipe".split(),
}
KEY_SUFFIXES = "main backup old new alt daily weekly work local remote v2 2025".split()

PEOPLE = "Anh Binh Linh Minh Somchai Niran Ploy Alice Bob Carol David Emma Grace Henry Maya Noah Rosa Victor".split()
CITIES = "Hanoi|Da Nang|Hue|Bangkok|Chiang Mai|Berlin|Lisbon|Toronto|Seattle|London|Tokyo|Nairobi".split("|")
TOOLS = "vim|VS Code|Emacs|tmux|ripgrep|Docker Compose|uv|Make|pytest|Ruff|mypy|Prettier".split("|")
LANGUAGES = "Python Rust Go TypeScript Kotlin Elixir Haskell Java SQL Lua".split()
SYSTEMS = "billing search auth ingestion reporting payments analytics gateway scheduler".split()
COMPONENTS = "parser|indexer|sync service|query planner|cache layer|importer|job queue|web dashboard".split("|")
TECHS = "SQLite|PostgreSQL|Redis|Kafka|Whoosh|Elasticsearch|FastAPI|Django|React|DuckDB|Terraform".split("|")
PROJECTS = "Atlas Cascade Ember Falcon Harbor Juniper Lumen Nimbus Orchid Quartz".split()
NOUNS = "deployment pipeline|search index|test suite|release process|backup job|config file|nightly build".split("|")
ADJECTIVES = "slow flaky quick reliable confusing elegant fragile noisy tidy outdated stable brittle".split()
WHEN = "during the retro|after lunch|before the release|in the standup|on the call|last week|this morning".split("|")
DAYS = "Monday Tuesday Wednesday Thursday Friday".split()
COMMANDS = "git push --force|rm -rf build|terraform apply|kubectl delete|docker system prune|sed -i".split("|")

SENTENCES = {
    "identity": [
        "The user's name is {PEOPLE} and they live in {CITIES}.",
        "{PEOPLE} works on the {SYSTEMS} team and speaks {LANGUAGES} fluently, they joke.",
        "Their cat is called {PEOPLE}, after a friend from {CITIES}.",
    ],
    "preference": [
        "Prefers {TOOLS} over {TOOLS} for everyday work.",
        "Wants {LANGUAGES} examples and short, direct answers.",
        "Likes meetings on {DAYS} mornings and no meetings on {DAYS}.",
    ],
    "fact": [
        "The {SYSTEMS} service listens on port {PORT}.",
        "The {SYSTEMS} database runs on {TECHS} in {CITIES}.",
        "{PEOPLE} owns the {SYSTEMS} {COMPONENTS}.",
    ],
    "project": [
        "Project {PROJECTS}: moving the {COMPONENTS} from {TECHS} to {TECHS}.",
        "The deadline for {PROJECTS} is the first {DAYS} of next month.",
        "{PEOPLE} leads {PROJECTS} and reviews every change to the {COMPONENTS}.",
    ],
    "skill": [
        "Comfortable with {LANGUAGES}; still learning {LANGUAGES}.",
        "Knows how to profile the {NOUNS} with {TOOLS}.",
        "Writes {TECHS} queries without looking at the documentation.",
    ],
    "mistake": [
        "Ran `{COMMANDS}` on {DAYS} without a dry run and broke the {NOUNS}.",
        "Lesson learned: take a backup before deploying the {SYSTEMS} service to production.",
        "Forgot to check the branch and the {COMPONENTS} broke in staging.",
    ],
    "context": [
        "Currently working on the {COMPONENTS} of {PROJECTS}.",
        "The {DAYS} meeting moved to the afternoon.",
        "{PEOPLE} is on vacation in {CITIES} until {DAYS}.",
    ],
    "note": [
        "Remember to review the {NOUNS} by {DAYS}.",
        "Idea: cache the {COMPONENTS} results in {TECHS}.",
        "The link to the {NOUNS} notes is in the team wiki.",
    ],
}
FILLER = [
    "{PEOPLE} said the {NOUNS} is {ADJECTIVES} {WHEN}.",
    "The team agreed to keep the {NOUNS} {ADJECTIVES} until {PROJECTS} ships.",
    "The {ADJECTIVES} {NOUNS} came up again {WHEN}.",
    "{PEOPLE} asked whether the {COMPONENTS} could use {TECHS} instead.",
]
VIETNAMESE = [
    "Tôi thích cà phê sữa đá vào buổi sáng.",
    "Nhóm dự án sẽ kiểm tra máy chủ ở Hà Nội tuần sau.",
    "Chị ấy đã gửi bản báo cáo trước thứ sáu.",
    "Đừng quên sao lưu dữ liệu mỗi ngày.",
]
THAI = ["ฉันชอบกาแฟตอนเช้า", "ทีมงานจะตรวจสอบเซิร์ฟเวอร์ที่กรุงเทพสัปดาห์หน้า", "อย่าลืมสำรองข้อมูลทุกวัน", "หัวหน้าส่งรายงานเมื่อวาน"]
WORDS = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, list)}

COLOURS = "amber azure coral crimson golden indigo ivory jade lilac olive pearl ruby scarlet silver teal violet".split()
BUILDINGS = (
    "greenhouse boathouse observatory bakery lighthouse workshop garage studio cellar attic kiosk hangar".split()
)
SYLLABLES = "ka ko ru ra mi mo lu ne ta vo ze bar dor fen gal kel mir nor pel ros tav vek wyn".split()
EPOCH = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
FUTURE = (dt.datetime(2031, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2036, 12, 31, tzinfo=dt.timezone.utc))


@dataclass(frozen=True)
class Probe:
    """A needle planted in one memory, and the question that finds it."""

    key: str
    category: str
    place: str
    code: str
    unique: bool

    def line(self, n: int, vault: str, mind: str) -> str:
        return json.dumps(
            {
                "qid": f"probe:{n}",
                "vault": vault,
                "mind": mind,
                "question": f"What is the gate code for {self.place}?",
                "answer": self.code,
                "category": 0 if self.unique else 9,
                "category_name": "probe-unique" if self.unique else "probe-similar",
                "evidence_keys": [self.key],
                "evidence_category": self.category,
            }
        )


def sentence(template: str, r: random.Random) -> str:
    """`template` with each {LIST} a word from that list ({PORT} a number)."""
    return re.sub(
        r"\{(\w+)\}", lambda m: str(r.randint(1024, 65000)) if m[1] == "PORT" else r.choice(WORDS[m[1]]), template
    )


def body(category: str, language: str, r: random.Random) -> str:
    """English sentences (with some Vietnamese or Thai for `language` "vi"/"th") to 100-1,500 characters."""
    target = int(min(1500, max(100, math.exp(r.gauss(math.log(400), 0.75)))))
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < target:
        if language != "en" and (not parts or r.random() < 0.5):
            parts.append(r.choice(VIETNAMESE if language == "vi" else THAI))
        else:
            parts.append(sentence(r.choice(SENTENCES[category] if r.random() < 0.55 else FILLER), r))
    if category in ("project", "note", "mistake") and len(parts) > 2 and r.random() < 0.25:
        text = parts[0] + "\n\n" + "\n".join(f"- {p}" for p in parts[1:])
    else:
        text = "\n\n".join(" ".join(parts[i : i + 3]) for i in range(0, len(parts), 3))
    return text[:1500].rstrip()


def key_for(category: str, r: random.Random, used: set[str]) -> str:
    a, b = r.sample(KEY_WORDS[category], 2)
    base = f"{a}_{r.choice(KEY_SUFFIXES)}" if r.random() < 0.5 else f"{a}_{b}"
    key, n = base, 1
    while key in used:
        n += 1
        key = f"{base}_{n}"
    used.add(key)
    return key


def iso(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def between(r: random.Random, start: dt.datetime, end: dt.datetime) -> dt.datetime:
    return start + dt.timedelta(seconds=int(r.uniform(0, (end - start).total_seconds())))


def memory_id(seed: int, i: int) -> str:
    digest = hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=8).digest()
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    x = int.from_bytes(digest, "big")
    return "mem_" + "".join(alphabet[(x >> (5 * j)) & 31] for j in range(12))


def front_matter(i: int, seed: int, category: str, key: str, now: dt.datetime, hand: bool, r: random.Random) -> str:
    """The front-matter lines of memory `i`: every field, or what a person types by hand (`hand`)."""
    priority = r.choices(list(PRIORITIES), list(PRIORITIES.values()))[0]
    picks = r.randint(2, 5)
    tags = dict.fromkeys(r.choice(CATEGORY_TAGS[category] if r.random() < 0.5 else TAGS) for _ in range(picks))
    user = r.random() < 0.6
    verified = user or r.random() < 0.25
    if user:
        confidence = 1.0 if r.random() < 0.8 else round(r.uniform(0.8, 0.99), 2)
    else:
        confidence = round(min(0.99, max(0.3, r.gauss(0.7, 0.12))), 2)
    created = between(r, EPOCH, now)
    updated = created if r.random() < 0.7 else min(now, created + dt.timedelta(days=r.uniform(0.05, 200)))
    chance, day_before = r.random(), now - dt.timedelta(days=1)
    expires = None
    if chance < 0.05 and created < day_before:
        expires = between(r, created, day_before)
    elif chance < 0.10:
        expires = between(r, *FUTURE)
    lines = [f"tags: [{', '.join(tags)}]"]
    if hand:
        lines += [f"priority: {priority}"] if priority != "normal" else []
        lines += [f"expires_at: {iso(expires)}"] if expires else []
        return "\n".join(lines)
    return "\n".join(
        [f"id: {memory_id(seed, i)}", f"category: {category}", f"key: {key}", f"priority: {priority}", *lines]
        + [f"source: {'user' if user else 'agent'}", f"verified: {'true' if verified else 'false'}"]
        + [f"confidence: {confidence}", f"expires_at: {iso(expires) if expires else 'null'}"]
        + [f"created_at: {iso(created)}", f"updated_at: {iso(updated)}"]
    )


def needles(n: int, probes: int, seed: int) -> dict[int, tuple[str, str, bool]]:
    """Which memories get a needle: index -> (place, code, unique); from their own random stream, so
    `probes` changes no other memory."""
    r = random.Random(seed ^ 0x5EED)
    at = sorted(r.sample(range(n), min(probes, n)))
    pairs = [(c, b) for c in COLOURS for b in BUILDINGS]
    r.shuffle(pairs)
    made: set[str] = set()
    found = {}
    for j, i in enumerate(at):
        if j % 2:
            place = "the {} {}".format(*pairs[j // 2])
        else:
            place = "".join(r.choice(SYLLABLES) for _ in range(4)).capitalize()
            while place in made:
                place = "".join(r.choice(SYLLABLES) for _ in range(4)).capitalize()
            made.add(place)
        code = "".join(r.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(2)) + f"-{r.randint(1000, 9999)}"
        found[i] = (place, code, j % 2 == 0)
    return found


def generate(
    out: Path,
    n: int,
    *,
    seed: int = 0,
    mind: str = "bench",
    now: dt.datetime = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc),
    probes: int = 0,
    hand_made: float = 0.05,
) -> list[Probe]:
    """Write `n` memories of `mind` into `out` (see the module's docstring), and the vault's two files
    when missing; returns the `probes` needles planted."""
    r = random.Random(seed)
    planting = needles(n, probes, seed)
    used: dict[str, set[str]] = {c: set() for c in CATEGORIES}
    planted: list[Probe] = []
    folders: set[Path] = set()
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "memfile.toml").exists():
        name = f"Synthetic ({n} memories, seed {seed})"
        (out / "memfile.toml").write_text(f'[minds.{mind}]\nname = "{name}"\n', encoding="utf-8")
    if not (out / ".gitignore").exists():
        (out / ".gitignore").write_text(".memfile/\n", encoding="utf-8")
    for i in range(n):
        category = r.choices(list(CATEGORIES), list(CATEGORIES.values()))[0]
        key = key_for(category, r, used[category])
        needle = planting.get(i)
        if needle:
            key = f"{key}_n{len(planted)}"  # "_n<j>" is in no ordinary key: unique across categories too
        head = front_matter(i, seed, category, key, now, r.random() < hand_made, r)
        text = body(category, r.choices(["vi", "th", "en"], [5, 5, 90])[0], r)
        if needle:
            place, code, unique = needle
            sentence = f"The gate code for {place} is {code}."
            text = text[: 1500 - len(sentence) - 1].rstrip() + " " + sentence
            planted.append(Probe(key, category, place, code, unique))
        folder = out / mind / category
        if folder not in folders:
            folder.mkdir(parents=True, exist_ok=True)
            folders.add(folder)
        (folder / f"{key}.md").write_text(f"---\n{head}\n---\n{text}\n", encoding="utf-8")
    return planted


def commit_all(vault: Path, message: str) -> None:
    """Make `vault` a git repository with one commit (an explicit author; no git configuration of the machine)."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    author = ["-c", "user.name=memfile-bench", "-c", "user.email=bench@localhost"]
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", *author, "commit", "-q", "-m", message]):
        subprocess.run(argv, cwd=vault, check=True, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, required=True, help="memories to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the vault folder (empty or absent)")
    parser.add_argument("--mind", default="bench", help="the mind (default: bench)")
    parser.add_argument("--now", type=dt.date.fromisoformat, default=dt.date(2026, 6, 1), help="latest created_at")
    parser.add_argument("--hand-made", type=float, default=0.05, help="share of hand-written files (default 0.05)")
    parser.add_argument("--probes", type=int, default=0, help="needle facts to plant, with their questions")
    parser.add_argument("--probes-out", type=Path, help="the questions' file (default OUT.probes.jsonl)")
    parser.add_argument("--git", action="store_true", help="make the vault a git repository with one commit")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9][a-z0-9_]{0,99}", args.mind):
        parser.error("--mind must be snake_case (a-z, 0-9, _)")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty: give a new folder")
    now = dt.datetime.combine(args.now, dt.time(), dt.timezone.utc)
    options = {"seed": args.seed, "mind": args.mind, "now": now, "probes": args.probes, "hand_made": args.hand_made}
    planted = generate(args.out, args.n, **options)
    print(f"wrote {args.n} memories to {args.out / args.mind}")
    if planted:
        path = args.probes_out or args.out.with_name(args.out.name + ".probes.jsonl")
        vault = os.path.relpath(args.out.resolve(), path.resolve().parent)
        path.write_text("".join(p.line(j, vault, args.mind) + "\n" for j, p in enumerate(planted)), encoding="utf-8")
        print(f"wrote {len(planted)} probe questions to {path}")
    if args.git:
        commit_all(args.out, f"synthetic vault: {args.n} memories, seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
