"""Links: does `recall --query` bring what a match links to, and what do links cost?

Run from the project root (one command):

    python benchmarks/bench_links.py                 # probe over 2,000 filler memories; costs at 10,000; 5 runs
    python benchmarks/bench_links.py --runs 3 --json-out links.json
    python benchmarks/bench_links.py --smoke         # tiny sizes, once: does it still run?

**The probe** (benchmarks/data/probe_links.jsonl, written by the team before any tuning): 40 cases, each a
question, a few memories of its own and the one memory that answers it. The question matches a "hub"
memory (a project, a person, a place) whose text links to the answer (`[[key]]`, `[[category/key]]`,
`[[key|shown]]`, `- relation [[key]]`); the answer shares no word with the question that the hub does not,
so it is reachable through the link (36 cases one link away, 4 two links away). The cases' memories are
written among `--filler` memories of benchmarks/make_vault.py (seed 7), each at its own random hour of
2024-2026 (never within recall's neighbour window of another, so no case is answered by the order of
storing). A case is answered when the answer is among what `Vault.recall(query=..., limit=5)` shows (no
budget: the filler's pinned memories would take any budget first; the budget's cuts are tested in
tests/recall/test_recall_links.py). Cases with an odd number are the tune half, even the
held-out half: the constants of memfile/recall.py (LINK_OF: how many best matches are followed; LINKED:
how many linked memories are shown) were chosen on the tune half by the grid below (judged: the code's
values are the grid's best on the tune half, fewest shown on a tie); the held-out half is reported with
`[recall] link_hops` 0 (the baseline: links not followed), 1 (the default) and 2, in the same run.

**The costs**, on a `--size`-memory vault (default 10,000) and the same vault with a link added to 30 % of
its memories (to another memory of the mind, by key): the index built from nothing (`Vault.open` then
`refresh()` after removing .memfile/), interleaved, medians of `--runs` (judged: with links at most +10 %);
and a warm `recall(query=...)` of 20 questions in process with `link_hops` 1 against 0 (info).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import (  # noqa: E402
    MIND,
    QUESTIONS,
    TIMING_COLUMNS,
    Column,
    Table,
    bench_env,
    make_vault,
    p50,
    parse_args,
    run_sections,
    say,
    timing_label,
)

PROBE = Path(__file__).resolve().parent / "data" / "probe_links.jsonl"
LIMIT = 5
#: The grid the tune half chooses the constants from: (LINK_OF, LINKED).
PROBE_COLUMNS = [
    Column("figure", lambda r: r["figure"]),
    Column("answered", lambda r: r["value"]),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", lambda r: r["result"]),
]
GRID = [(of, shown) for of in (1, 2, 3, 5) for shown in (1, 2, 3, 5, 8)]


def load_probe() -> list[dict[str, Any]]:
    with open(PROBE, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_cases(vault: Path, cases: list[dict[str, Any]], seed: int) -> None:
    """The cases' memories as hand-written files, each created at its own random minute of 2024-2026."""
    r = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    minutes = r.sample(range(0, 3 * 365 * 24 * 60, 60), sum(len(c["memories"]) for c in cases))  # an hour apart
    for case in cases:
        for memory in case["memories"]:
            when = (start + timedelta(minutes=minutes.pop())).strftime("%Y-%m-%dT%H:%M:%SZ")
            folder = vault / MIND / memory["category"]
            folder.mkdir(parents=True, exist_ok=True)
            head = f"created_at: {when}\nupdated_at: {when}\nsource: user\nverified: true"
            (folder / f"{memory['key']}.md").write_text(f"---\n{head}\n---\n{memory['content']}\n", encoding="utf-8")


def set_hops(vault: Path, hops: int) -> None:
    """`[recall] link_hops` in the vault's memfile.toml (the line this benchmark adds, replaced)."""
    config = vault / "memfile.toml"
    lines = [
        ln for ln in config.read_text(encoding="utf-8").splitlines() if not ln.startswith(("[recall]", "link_hops"))
    ]
    config.write_text("\n".join([*lines, "[recall]", f"link_hops = {hops}", ""]), encoding="utf-8")


def answered(vault: Path, cases: list[dict[str, Any]], hops: int) -> list[bool]:
    """For each case, whether its answer is among what recall shows with `link_hops` = hops."""
    from memfile import Vault

    set_hops(vault, hops)
    with Vault.open(vault, MIND) as v:
        return [
            any(item.memory.ref == case["answer"] for item in v.recall(0, query=case["query"], limit=LIMIT).items)
            for case in cases
        ]


def share(found: list[bool]) -> str:
    return f"{sum(found)}/{len(found)} ({sum(found) / max(1, len(found)):.2f})"


def probe_section(work: Path, args: argparse.Namespace, table: Table) -> None:
    import memfile.recall as recall

    cases = load_probe()
    tune = [c for c in cases if c["case"] % 2 == 1]
    held = [c for c in cases if c["case"] % 2 == 0]
    vault = work / "probe"
    make_vault(vault, args.filler, bench_env(), seed=7)
    write_cases(vault, cases, seed=7)
    say(f"probe: {len(cases)} cases ({len(tune)} tune, {len(held)} held out) among {args.filler:,} filler memories")

    chosen = (recall.LINK_OF, recall.LINKED)
    scores = {}
    for of, shown in GRID:
        recall.LINK_OF, recall.LINKED = of, shown
        scores[(of, shown)] = sum(answered(vault, tune, 1))
    recall.LINK_OF, recall.LINKED = chosen
    best = max(scores.values())
    fewest = min((g for g in GRID if scores[g] == best), key=lambda g: (g[1], g[0]))
    say(f"  tune half, grid (LINK_OF, LINKED) -> answered of {len(tune)}: {scores}")
    value = f"{chosen}: {scores.get(chosen)} of {len(tune)}"
    table.add(
        "tune half: the code's (LINK_OF, LINKED)",
        ok=chosen == fewest,
        target=f"the grid's best, fewest shown ({fewest}: {best})",
        shown=value,
        value=value,
    )
    for label, half in (("tune", tune), ("held out", held)):
        base = answered(vault, half, 0)
        for hops in (1, 2):
            found = answered(vault, half, hops)
            one_hop = [f for f, c in zip(found, half) if c["hops"] == 1]
            judged = label == "held out" and hops == 1
            value = f"{share(found)}; one link away {share(one_hop)}; link_hops 0: {share(base)}"
            table.add(
                f"{label}, limit {LIMIT}: link_hops {hops}",
                ok=sum(found) >= sum(base) + len(half) // 2 if judged else None,
                target=f">= link_hops 0 + {len(half) // 2}" if judged else "",
                shown=value,
                value=value,
                answered=sum(found),
                answered_without_links=sum(base),
                cases=len(half),
            )


def with_links(source: Path, out: Path, seed: int) -> int:
    """A copy of `source` with `See [[key]].` (another memory of the mind) added to 30 % of its memories."""
    shutil.copytree(source, out, symlinks=True)
    files = sorted((out / MIND).rglob("*.md"))
    r = random.Random(seed)
    linked = r.sample(files, len(files) * 3 // 10)
    for path in linked:
        other = r.choice(files)
        path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + f"\nSee [[{other.stem}]].\n", encoding="utf-8")
    return len(linked)


def index_time(vault: Path) -> float:
    from memfile import Vault

    shutil.rmtree(vault / ".memfile", ignore_errors=True)
    start = time.perf_counter()
    with Vault.open(vault, MIND) as v:
        v.refresh()
    return time.perf_counter() - start


def recall_times(vault: Path, hops: int) -> list[float]:
    from memfile import Vault

    set_hops(vault, hops)
    times = []
    with Vault.open(vault, MIND) as v:
        for question in QUESTIONS:
            v.recall(0, query=question)  # warm: the read and the link table are kept
        for question in QUESTIONS * 4:
            start = time.perf_counter()
            v.recall(0, query=question)
            times.append(time.perf_counter() - start)
    return times


def cost_section(work: Path, args: argparse.Namespace, table: Table) -> None:
    plain, linked = work / "plain", work / "linked"
    make_vault(plain, args.size, bench_env(), seed=args.seed)
    count = with_links(plain, linked, args.seed)
    say(f"costs: {args.size:,} memories, {count:,} of them given a link in the copy")
    times: dict[Path, list[float]] = {plain: [], linked: []}
    for _ in range(args.runs):
        for vault in (plain, linked):
            times[vault].append(index_time(vault))
    table.timing(
        "index from nothing, 30 % with a link",
        args.size,
        times[linked],
        p95_too=False,
        baseline="no links",
        base=times[plain],
        limit_s=p50(times[plain]) * 1.10,
        target="<= no links + 10 %",
    )
    table.timing(
        "recall --query, warm, link_hops 1",
        args.size,
        recall_times(linked, 1),
        baseline="link_hops 0",
        base=recall_times(linked, 0),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--filler", type=int, default=2000, help="filler memories around the probe's (default 2,000)")
    parser.add_argument("--size", type=int, default=10_000, help="memories of the cost vault (default 10,000)")
    parser.add_argument("--runs", type=int, default=5, help="index builds per vault (default 5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    parser.add_argument("--json-out", type=Path, help="write every row of this run here as JSON")
    args = parse_args(parser, filler=50, size=200, runs=1)
    return run_sections(
        "links",
        args,
        [
            (probe_section, Table(PROBE_COLUMNS, smoke=args.smoke)),
            (cost_section, Table(TIMING_COLUMNS, smoke=args.smoke, label=timing_label)),
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
