"""Capture: are `Vault.capture`'s decisions (add / update / skip) right, and what does memfile's part cost?

Run from the project root (one command):

    python benchmarks/bench_capture.py                 # the quality set, then 100 captures timed
    python benchmarks/bench_capture.py --json-out capture.json
    python benchmarks/bench_capture.py --smoke         # a few cases and captures: does it still run?

**Quality.** benchmarks/data/capture_probe.jsonl (benchmarks/capture_probe.py): 29 conversations written by
the team before the prompt or the decision rules were tuned, each with the memories its mind held before,
what a deterministic extractor returns (the conversation's explicit statements: `capture_probe.
deterministic_extractor`, no model) and the decision a careful person makes for each candidate. Each
conversation gets a vault of its own holding its `mind_before`; `Vault.capture(messages, extractor,
dry_run=True)` decides every candidate (a dry run decides as a real one, writing nothing). A decision is
right when its action is the expected one and, for an update or a skip, its target is the expected memory.
Odd ids are the tune half: the rules' constants (memfile/capture.py: SKIP_COVER, UPDATE_SHARE) were chosen
on it by the grid below (judged: the code's values are the grid's best on the tune half, the first in grid
order on a tie); the held-out half (even ids) is reported with them.

**Cost.** One vault of `--filler` memories (benchmarks/make_vault.py) captures `--captures` conversations
(the set's, again and again under new session names), each a real capture with review (one commit each);
the extractor returns at once, so the time is memfile's own: checking, deciding, writing, committing. p50
and p95 of `Vault.capture` in process, next to a `Vault.store` of one memory in the same vault (baseline).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
import capture_probe  # noqa: E402
from common import (  # noqa: E402
    MIND,
    TIMING_COLUMNS,
    Column,
    Table,
    bench_env,
    make_vault,
    parse_args,
    run_sections,
    say,
    timing_label,
)

GRID = [(cover, share) for cover in (0.7, 0.8, 0.9, 1.0) for share in (0.15, 0.2, 0.25, 0.3, 0.35, 0.45)]
QUALITY_COLUMNS = [
    Column("figure", lambda r: r["figure"]),
    Column("right", lambda r: r["value"]),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", lambda r: r["result"]),
]


def case_vault(work: Path, case: dict[str, Any]) -> Any:
    """A vault holding the case's `mind_before` (stored by a person)."""
    from memfile import Vault

    vault = Vault.init(work / f"case-{case['id']}", MIND, "Capture probe")
    for memory in case["mind_before"]:
        vault.store(
            memory["category"],
            memory["key"],
            memory["content"],
            tags=memory.get("tags"),
            priority=memory.get("priority"),
        )
    return vault


def decisions(vault: Any, case: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(action, target REF) of each candidate, as a dry run decides them."""
    answer = capture_probe.deterministic_extractor(case)
    report = vault.capture(case["messages"], lambda _system, _user: answer, case["session"], dry_run=True)
    return [(d.action, d.target.ref if d.target is not None and d.action != "add" else None) for d in report.decisions]


def right(found: list[tuple[str, str | None]], case: dict[str, Any]) -> list[bool]:
    expected = [(e["decision"], e.get("target") if e["decision"] != "add" else None) for e in case["expected"]]
    return [f == e for f, e in zip(found, expected, strict=True)]


def scored(vaults: dict[int, Any], cases: list[dict[str, Any]]) -> tuple[int, int, dict[str, list[int]]]:
    """Right decisions, all decisions, and per expected action [right, all]."""
    total = good = 0
    by: dict[str, list[int]] = {"add": [0, 0], "update": [0, 0], "skip": [0, 0]}
    for case in cases:
        for ok, expected in zip(right(decisions(vaults[case["id"]], case), case), case["expected"], strict=True):
            total, good = total + 1, good + ok
            by[expected["decision"]][0] += ok
            by[expected["decision"]][1] += 1
    return good, total, by


def quality_section(work: Path, args: argparse.Namespace, table: Table) -> None:
    import memfile.capture as capture

    cases = capture_probe.load()[: args.cases or None]
    tune, held = capture_probe.tune_half(cases), capture_probe.held_out(cases)
    vaults = {case["id"]: case_vault(work, case) for case in cases}
    chosen = (capture.SKIP_COVER, capture.UPDATE_SHARE)
    grid: dict[tuple[float, float], int] = {}
    for cover, share in GRID:
        capture.SKIP_COVER, capture.UPDATE_SHARE = cover, share
        grid[(cover, share)] = scored(vaults, tune)[0]
    capture.SKIP_COVER, capture.UPDATE_SHARE = chosen
    best = max(grid.values())
    first = next(g for g in GRID if grid[g] == best)
    say(f"  tune half, grid (SKIP_COVER, UPDATE_SHARE) -> right: {grid}")
    value = f"{chosen}: {grid.get(chosen)}"
    table.add(
        "tune half: the code's (SKIP_COVER, UPDATE_SHARE)",
        ok=chosen == first,
        target=f"the grid's best, first on a tie ({first}: {best})",
        shown=value,
        value=value,
    )
    for label, half in (("tune", tune), ("held out", held)):
        good, total, by = scored(vaults, half)
        parts = ", ".join(f"{a} {r}/{n}" for a, (r, n) in by.items())
        value = f"{good}/{total} ({good / max(1, total):.2f}): {parts}"
        table.add(f"{label} half ({len(half)} conversations)", shown=value, value=value, right=good, decisions=total)
    for vault in vaults.values():
        vault.close()


def cost_section(work: Path, args: argparse.Namespace, costs: Table) -> None:
    from memfile import Vault

    folder = work / "cost"
    make_vault(folder, args.filler, bench_env(), seed=11, git=True)
    cases = capture_probe.load()
    times, stores = [], []
    with Vault.open(folder, MIND) as vault:
        for n in range(args.captures):
            case = cases[n % len(cases)]
            answer = capture_probe.deterministic_extractor(case)
            start = time.perf_counter()
            vault.capture(case["messages"], lambda _s, _u, a=answer: a, f"{case['session']}-{n}")
            times.append(time.perf_counter() - start)
            start = time.perf_counter()
            vault.store("note", f"bench_capture_baseline_{n}", f"A note stored beside capture {n}.")
            stores.append(time.perf_counter() - start)
        proposed = len(vault.proposals())
    say(f"  {args.captures} captures into {args.filler:,} memories: {proposed} proposals waiting")
    costs.timing(
        f"Vault.capture of one conversation ({args.captures} in all)",
        args.filler,
        times,
        baseline="Vault.store of one memory",
        base=stores,
    )
    costs.add("all captures, total", shown=f"{sum(times):.1f} s", value=f"{sum(times):.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=0, help="only the first N conversations (0 = all)")
    parser.add_argument("--captures", type=int, default=100, help="captures timed (default 100)")
    parser.add_argument("--filler", type=int, default=1000, help="memories of the cost vault (default 1,000)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    parser.add_argument("--json-out", type=Path, help="write every row of this run here as JSON")
    args = parse_args(parser, cases=4, captures=3, filler=50)
    return run_sections(
        "capture",
        args,
        [
            (quality_section, Table(QUALITY_COLUMNS, smoke=args.smoke)),
            (cost_section, Table(TIMING_COLUMNS, smoke=args.smoke, label=timing_label)),
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
