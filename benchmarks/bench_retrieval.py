"""Retrieval quality on LoCoMo: memfile `search` and `recall --query` next to BM25, plus recall latency.

Run from the project root (one command). A full run takes about 10-15 minutes on 2 cores: `search` and
`recall` each start 1,982 processes (~0.3-0.4 s each, mostly Python start-up), two at a time (`--jobs`).

    python benchmarks/bench_retrieval.py                          # convert LoCoMo into a temp folder, all 1,982 questions
    python benchmarks/bench_retrieval.py --work /tmp/locomo-bench # reuse (or make) a conversion there
    python benchmarks/bench_retrieval.py --limit-queries 40       # quick run (first 40 questions)
    python benchmarks/bench_retrieval.py --smoke                  # one small conversation, 4 questions: does it run?

Data: LoCoMo (snap-research/locomo, CC BY-NC 4.0) in ../shared/bench-data/locomo/ (read-only; a smoke run
without it says so and exits 0), converted by ../shared/bench/locomo_to_vault.py
into a vault with one mind per conversation and one memory per dialog turn, plus queries.jsonl
(the question, its LoCoMo category and the keys of the gold evidence turns). `--work DIR` reuses
DIR when DIR/queries.jsonl exists, else converts into DIR; without it everything goes to a temp
folder that is deleted at the end (`--keep` keeps it). Before anything is timed every mind's index
is built once (`memfile reindex`), so no query pays for an index build.

Quality is scored by ../shared/bench/retrieval_eval.py (recall@1/5/10/20 = share of the gold turns
in the top k; MRR over the top 20) for four systems, each in its own retrieval_eval run:

  search     python -m memfile --vault V --mind M search --json --limit 20 -- QUESTION
  recall     python -m memfile --vault V --mind M recall --query QUESTION --limit 20 --budget 0 --format json
             (reported as "not available" when the command fails on the first question)
  bm25       retrieval_eval's built-in Okapi BM25 over the bodies (no stemming, no stop words)
  bm25+stop  the same with retrieval_eval's 56 English stop words dropped (`--stopwords`)

Tables are per LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), "overall" (categories 1-4, the usual LoCoMo headline) and "all" (1-5), for
conversations 0-4 ("tuning set") and 5-9 ("held out"). The verdict checks the targets on the held-out
overall row: recall@10 >= 0.60 and recall@5 >= 0.52, for `recall` and for `search`.

Latency is measured in process: each mind is opened once with `Vault.open(vault, mind=M)`, then
`Vault.search(question, limit=10)` and `Vault.recall(query=question, limit=10, budget=0).items` are
timed on `--latency-queries` questions per mind (spread over the mind's questions; 0 = all),
p50/p95 per split. If `Vault.recall` rejects these arguments only
`Vault.search` is timed and the recall row says so. memfile only ever sees the question text.

`--limit-queries N` is passed to retrieval_eval, which then scores the first N lines of
queries.jsonl: with N up to 997 these all come from the tuning conversations, so the held-out
tables (and the verdict) are empty. `--smoke` converts one conversation only (conv-30, the smallest),
scores its first 4 questions and times 3 per mind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import (  # noqa: E402
    LOCOMO_DATA,
    LOCOMO_TO_VAULT,
    RETRIEVAL_EVAL,
    bench_env,
    fmt_ms,
    memfile_commit,
    p50,
    p95,
    parse_args,
    say,
)

SPLITS = [("0-4", "tuning set"), ("5-9", "held out")]
KS = (1, 5, 10, 20)
METRICS = [f"R@{k}" for k in KS] + ["MRR"]

# Targets on conversations 5-9, categories 1-4.
TARGET_R10 = 0.60
TARGET_R5 = 0.52
# README of shared/bench: bm25s / built-in BM25 on conversations 5-9, overall.
REFERENCE = {"bm25": (0.493, 0.420), "bm25+stop": (0.550, 0.477)}


# --- helpers ----------------------------------------------------------------------


def load_queries(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def conversations(work: Path, queries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(sample id, mind) of every conversation, in LoCoMo order (manifest.json, else first appearance)."""
    manifest = work / "manifest.json"
    if manifest.exists():
        try:
            return [(c["sample_id"], c["mind"]) for c in json.loads(manifest.read_text())["conversations"]]
        except (KeyError, ValueError):
            pass
    return list(dict.fromkeys((q["conv"], q["mind"]) for q in queries))


def split_of(index: int) -> str | None:
    for sel, _ in SPLITS:
        a, b = map(int, sel.split("-"))
        if a <= index <= b:
            return sel
    return None


# --- steps ------------------------------------------------------------------------


def convert(work: Path, convs: str, env: dict[str, str]) -> None:
    if (work / "queries.jsonl").exists():
        say(f"using the conversion in {work}")
        return
    say(f"converting LoCoMo into {work} ...")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(LOCOMO_TO_VAULT), "--input", str(LOCOMO_DATA), "--out", str(work), "--convs", convs],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"locomo_to_vault.py failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    say(f"  converted in {time.perf_counter() - start:.1f} s")


def warm_indexes(vault: Path, minds: list[str], env: dict[str, str]) -> None:
    say(f"building the index of each mind ({len(minds)} minds, `memfile reindex`) ...")
    for mind in minds:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "memfile", "--vault", str(vault), "--mind", mind, "reindex"],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SystemExit(f"memfile reindex failed for {mind} ({proc.returncode}):\n{proc.stderr[-2000:]}")
        say(f"  {mind}: {time.perf_counter() - start:.1f} s")


def run_eval(
    label: str, extra: list[str], queries: Path, out: Path, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    """One retrieval_eval run; returns {available, error, name, timing, splits}."""
    json_out = out / f"eval-{label}.json"
    log = out / f"eval-{label}.log"
    argv = [
        sys.executable,
        str(RETRIEVAL_EVAL),
        "--queries",
        str(queries),
        *extra,
        "--jobs",
        str(args.jobs),
        "--json-out",
        str(json_out),
    ]
    for sel, _ in SPLITS:
        argv += ["--split", sel]
    if args.limit_queries:
        argv += ["--limit-queries", str(args.limit_queries)]
    say(f"scoring {label} ...")
    start = time.perf_counter()
    messages: list[str] = []
    with open(log, "w", encoding="utf-8") as stdout:
        proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:  # retrieval_eval prints "  NAME: 200/1982" progress lines here
            if line.startswith("  ") and "/" in line and ":" in line:
                say(f"  {line.strip()}")
            elif line.strip():
                messages = (messages + [line.strip()])[-30:]
        rc = proc.wait()
    took = time.perf_counter() - start
    if rc != 0 or not json_out.exists():
        error = " ".join(messages)[-400:] or f"exit {rc}"
        say(f"  {label}: not available ({error})")
        return {"available": False, "error": error, "seconds": round(took, 1), "argv": argv}
    report = json.loads(json_out.read_text(encoding="utf-8"))
    ((name, system),) = report["systems"].items()
    say(
        f"  {label}: done in {took:.1f} s"
        + (f", {system['timing']['errors']} failed queries (see {log})" if system["timing"].get("errors") else "")
    )
    return {
        "available": True,
        "error": None,
        "name": name,
        "seconds": round(took, 1),
        "timing": system["timing"],
        "splits": system["splits"],
        "argv": argv,
    }


def measure_latency(
    vault: Path, convs: list[tuple[str, str]], queries: list[dict[str, Any]], per_mind: int
) -> dict[str, Any]:
    """In-process Vault.search and Vault.recall_items times per split. Only question texts reach memfile."""
    from memfile import Vault

    index_of = {conv: i for i, (conv, _) in enumerate(convs)}
    times: dict[str, dict[str, list[float]]] = {"search": {}, "recall_items": {}}
    recall_error: str | None = None
    recall_failures = 0
    say(f"timing in process ({per_mind or 'all'} questions per mind) ...")
    for conv, mind in convs:
        split = split_of(index_of[conv])
        if split is None:
            continue
        qs = [q["question"] for q in queries if q["conv"] == conv]
        if per_mind and len(qs) > per_mind:
            qs = [qs[i * len(qs) // per_mind] for i in range(per_mind)]
        if not qs:
            continue
        v = Vault.open(vault, mind=mind)
        try:
            v.search(qs[0], limit=10)  # opens the index
            mind_s: list[float] = []
            for q in qs:
                start = time.perf_counter()
                v.search(q, limit=10)
                mind_s.append(time.perf_counter() - start)

            def recall_items(**options: Any) -> Any:
                return v.recall(**options).items  # noqa: B023 - called in this turn of the loop

            if recall_error is None:
                try:
                    recall_items(query=qs[0], limit=10, budget=0)
                except Exception as e:  # noqa: BLE001 - the API is being built; any failure means "not available"
                    recall_error = f"{type(e).__name__}: {e}"
            mind_r: list[float] = []
            if recall_error is None:
                for q in qs:
                    start = time.perf_counter()
                    try:
                        recall_items(query=q, limit=10, budget=0)
                    except Exception:  # noqa: BLE001
                        recall_failures += 1
                        continue
                    mind_r.append(time.perf_counter() - start)
        finally:
            v.close()
        times["search"].setdefault(split, []).extend(mind_s)
        times["recall_items"].setdefault(split, []).extend(mind_r)
        say(
            f"  {mind}: {len(qs)} questions; Vault.search p50 {p50(mind_s) * 1000:.1f} ms"
            + (f", Vault.recall_items p50 {p50(mind_r) * 1000:.1f} ms" if mind_r else "")
        )
    rows = []
    for call, label in (
        ("recall_items", "Vault.recall(query=q, limit=10, budget=0).items"),
        ("search", "Vault.search(q, limit=10)"),
    ):
        for sel, name in SPLITS:
            xs = times[call].get(sel, [])
            rows.append(
                {
                    "call": label,
                    "split": sel,
                    "split_name": name,
                    "n": len(xs),
                    "p50_ms": p50(xs) * 1000 if xs else None,
                    "p95_ms": p95(xs) * 1000 if xs else None,
                    "mean_ms": statistics.fmean(xs) * 1000 if xs else None,
                    "available": call == "search" or recall_error is None,
                    "note": (
                        f"not available ({recall_error}); Vault.search timed instead"
                        if call == "recall_items" and recall_error
                        else None
                    ),
                }
            )
    return {
        "per_mind": per_mind,
        "rows": rows,
        "recall_items_error": recall_error,
        "recall_items_failures": recall_failures,
    }


# --- printing ------------------------------------------------------------------------


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def row_labels(systems: dict[str, dict[str, Any]], sel: str) -> list[str]:
    labels: dict[str, None] = {}
    for s in systems.values():
        if s["available"]:
            labels.update(dict.fromkeys(s["splits"].get(sel, {})))
    cats = sorted((g for g in labels if g not in ("overall", "all")), key=lambda g: int(g.split()[0]))
    return cats + [g for g in ("overall", "all") if g in labels]


def print_quality(systems: dict[str, dict[str, Any]], split_convs: dict[str, list[str]]) -> None:
    shown = [name for name, s in systems.items() if s["available"]]
    for name, s in systems.items():
        if not s["available"]:
            say(f"\n{name}: not available ({s['error'][-300:]})")
    for sel, split_name in SPLITS:
        labels = row_labels(systems, sel)
        title = f"{split_name}: conversations {sel} ({', '.join(split_convs.get(sel, [])) or '-'})"
        print(f"\n== {title} ==")
        if not labels:
            print("  no questions from these conversations were scored (--limit-queries?)")
            continue
        cw = max(len("category"), *(len(g) for g in labels))
        group = 6 * len(METRICS) - 1
        head1 = " " * (cw + 7) + "".join(" | " + name.center(group) for name in shown)
        head2 = f"{'category':<{cw}}  {'n':>5}" + "".join(" | " + " ".join(f"{m:>5}" for m in METRICS) for _ in shown)
        print(head1)
        print(head2)
        print("-" * len(head2))
        for g in labels:
            n = next(
                (systems[name]["splits"][sel][g]["n"] for name in shown if g in systems[name]["splits"].get(sel, {})), 0
            )
            cells = []
            for name in shown:
                agg = systems[name]["splits"].get(sel, {}).get(g)
                cells.append(" ".join(f"{fmt(agg[m] if agg else None):>5}" for m in METRICS))
            if g == "overall":
                print("-" * len(head2))
            print(f"{g:<{cw}}  {n:>5}" + "".join(" | " + c for c in cells))
    print("\n(overall = categories 1-4, all = 1-5; R@k = share of the gold turns in the top k; MRR over the top 20)")


def verdicts(systems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in ("recall", "search", "bm25", "bm25+stop"):
        s = systems.get(name)
        overall = s["splits"].get("5-9", {}).get("overall") if s and s["available"] else None
        v: dict[str, Any] = {
            "system": name,
            "available": bool(s and s["available"]),
            "n": overall["n"] if overall else 0,
            "R@10": overall["R@10"] if overall else None,
            "R@5": overall["R@5"] if overall else None,
        }
        if name in ("recall", "search"):
            if overall:
                ok10, ok5 = overall["R@10"] >= TARGET_R10, overall["R@5"] >= TARGET_R5
                v["result"] = "PASS" if ok10 and ok5 else "MISS"
            else:
                v["result"] = "not available" if not v["available"] else "no held-out questions"
        else:
            v["reference_R@10"], v["reference_R@5"] = REFERENCE[name]
            v["result"] = "reference"
        out.append(v)
    return out


def print_verdict(rows: list[dict[str, Any]]) -> None:
    n = max((r["n"] for r in rows), default=0)
    print(f'\n== targets: held out (conversations 5-9), categories 1-4 ("overall"), {n} questions ==')
    print(f"{'system':<10}  {'R@10':>6}  {'R@5':>6}  result")
    print("-" * 66)
    for r in rows:
        nums = f"{fmt(r['R@10']):>6}  {fmt(r['R@5']):>6}"
        if r["result"] == "reference":
            ref10, ref5 = r["reference_R@10"], r["reference_R@5"]
            same = r["R@10"] is not None and round(r["R@10"], 3) == ref10 and round(r["R@5"], 3) == ref5
            note = f"baseline (README: {ref10:.3f} / {ref5:.3f}" + (", same)" if same else ")")
            print(f"{r['system']:<10}  {nums}  {note}")
        elif r["result"] in ("PASS", "MISS"):
            gaps = []
            for metric, target in (("R@10", TARGET_R10), ("R@5", TARGET_R5)):
                gaps.append(f"{metric} {r[metric]:.3f} {'>=' if r[metric] >= target else '<'} {target:.2f}")
            print(f"{r['system']:<10}  {nums}  {r['result']} ({'; '.join(gaps)})")
        else:
            print(f"{r['system']:<10}  {nums}  {r['result']}")
    print(f"targets: recall@10 >= {TARGET_R10:.2f} and recall@5 >= {TARGET_R5:.2f}")


def print_timing(systems: dict[str, dict[str, Any]], jobs: int) -> None:
    print(
        f"\n== retrieval_eval times (scored questions; command systems run {jobs} at a time, "
        "latency includes process start-up) =="
    )
    print(f"{'system':<10}  {'queries':>7}  {'failed':>6}  {'wall s':>7}  {'p50 ms':>7}  {'p95 ms':>7}  scored as")
    for name, s in systems.items():
        if not s["available"]:
            print(f"{name:<10}  {'-':>7}  {'-':>6}  {'-':>7}  {'-':>7}  {'-':>7}  not available")
            continue
        t = s["timing"]
        print(
            f"{name:<10}  {t['queries']:>7}  {t['errors']:>6}  {t['query_wall_seconds']:>7.1f}  "
            f"{fmt_ms(t['latency_ms_p50']):>7}  {fmt_ms(t['latency_ms_p95']):>7}  {s['name']}"
        )


def print_latency(lat: dict[str, Any]) -> None:
    print(f"\n== in-process latency (Vault opened once per mind; {lat['per_mind'] or 'all'} questions per mind) ==")
    cw = max(len(r["call"]) for r in lat["rows"])
    print(f"{'call':<{cw}}  {'split':<10}  {'n':>5}  {'p50 ms':>7}  {'p95 ms':>7}  {'mean ms':>7}")
    for r in lat["rows"]:
        if not r["available"]:
            if r["split"] == SPLITS[0][0]:
                print(f"{r['call']:<{cw}}  {r['note']}")
            continue
        print(
            f"{r['call']:<{cw}}  {r['split_name']:<10}  {r['n']:>5}  {fmt_ms(r['p50_ms']):>7}  "
            f"{fmt_ms(r['p95_ms']):>7}  {fmt_ms(r['mean_ms']):>7}"
        )
    if lat["recall_items_failures"]:
        print(f"  recall_items raised on {lat['recall_items_failures']} questions (not timed)")


# --- main ----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--work",
        type=Path,
        help="conversion folder: reused when DIR/queries.jsonl exists, "
        "else LoCoMo is converted into it (kept); default a temp folder",
    )
    parser.add_argument("--jobs", type=int, default=2, help="parallel command runs in retrieval_eval (default 2)")
    parser.add_argument(
        "--limit-queries",
        type=int,
        default=0,
        help="score only the first N questions (passed to retrieval_eval; smoke runs)",
    )
    parser.add_argument(
        "--latency-queries",
        type=int,
        default=50,
        help="questions per mind for the in-process latency (default 50; 0 = all)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temp folder (conversion, retrieval_eval JSON and logs); its path is printed",
    )
    parser.add_argument("--json-out", type=Path, help="write every number of this run here as JSON")
    parser.add_argument(
        "--convs",
        default="all",
        help="conversations to convert, as locomo_to_vault.py's --convs "
        "(default all; the splits and the verdict assume all ten)",
    )
    args = parse_args(parser, convs="conv-30", limit_queries=4, latency_queries=3, jobs=1)
    converted = args.work is not None and (args.work / "queries.jsonl").exists()
    missing = [
        path for path in (RETRIEVAL_EVAL, *([] if converted else [LOCOMO_TO_VAULT, LOCOMO_DATA])) if not path.exists()
    ]
    if missing:
        where = ", ".join(str(path) for path in missing)
        if args.smoke:
            say(
                f"bench_retrieval: smoke run skipped: {where} not found (LoCoMo and ../shared/bench beside the project)"
            )
            return 0
        raise SystemExit(
            f"{where} not found (LoCoMo: expected ../shared/bench and ../shared/bench-data beside the project)"
        )
    env = bench_env()
    commit = memfile_commit()
    say(
        f"memfile {commit}, python {platform.python_version()}, {os.cpu_count()} CPUs, jobs {args.jobs}"
        + (f", first {args.limit_queries} questions only" if args.limit_queries else "")
    )

    tmp = Path(tempfile.mkdtemp(prefix="memfile-bench-retrieval-"))
    work = args.work.resolve() if args.work else tmp / "locomo"
    try:
        convert(work, args.convs, env)
        queries_file = work / "queries.jsonl"
        queries = load_queries(queries_file)
        convs = conversations(work, queries)
        vault = (work / queries[0].get("vault", "vault")).resolve()
        split_convs = {sel: [c for i, (c, _) in enumerate(convs) if split_of(i) == sel] for sel, _ in SPLITS}
        say(f"{len(queries)} questions, {len(convs)} conversations, vault {vault}")
        warm_indexes(vault, [m for _, m in convs], env)

        py = shlex.quote(sys.executable)
        systems: dict[str, dict[str, Any]] = {}
        systems["recall"] = run_eval(
            "recall",
            [
                "--cmd",
                f"{py} -m memfile --vault {{vault}} --mind {{mind}} recall --query {{query}} --limit {{k}} "
                "--budget 0 --format json",
                "--name",
                "recall",
            ],
            queries_file,
            tmp,
            args,
            env,
        )
        systems["search"] = run_eval(
            "search",
            [
                "--cmd",
                f"{py} -m memfile --vault {{vault}} --mind {{mind}} search --json --limit {{k}} -- {{query}}",
                "--name",
                "search",
            ],
            queries_file,
            tmp,
            args,
            env,
        )
        systems["bm25"] = run_eval("bm25", ["--baseline", "bm25"], queries_file, tmp, args, env)
        systems["bm25+stop"] = run_eval(
            "bm25+stop", ["--baseline", "bm25", "--stopwords"], queries_file, tmp, args, env
        )
        latency = measure_latency(vault, convs, queries, args.latency_queries)
    finally:
        if args.keep:
            say(f"\nkept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print_quality(systems, split_convs)
    verdict = verdicts(systems)
    print_verdict(verdict)
    print_timing(systems, args.jobs)
    print_latency(latency)

    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "commit": commit,
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "jobs": args.jobs,
                    "limit_queries": args.limit_queries,
                    "convs": args.convs,
                    "smoke": args.smoke,
                    "work": str(work),
                    "splits": dict(SPLITS),
                    "split_conversations": split_convs,
                    "targets": {"R@10": TARGET_R10, "R@5": TARGET_R5},
                    "systems": systems,
                    "verdict": verdict,
                    "latency": latency,
                },
                indent=1,
            ),
            encoding="utf-8",
        )
        say(f"\nJSON written to {args.json_out}")
    return smoke_failures(systems, latency) if args.smoke else 0


def smoke_failures(systems: dict[str, dict[str, Any]], latency: dict[str, Any]) -> int:
    """1 when memfile's part of a smoke run did not work (a full run reports it as "not available" instead)."""
    failed = [
        f"{name}: not available ({s['error']})"
        if not s["available"]
        else f"{name}: {s['timing']['errors']} questions failed"
        for name, s in systems.items()
        if not s["available"] or s["timing"].get("errors")
    ]
    if latency["recall_items_error"] or latency["recall_items_failures"]:
        failed.append(f"Vault.recall_items: {latency['recall_items_error'] or latency['recall_items_failures']}")
    if failed:
        say("\nsmoke run FAILED: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
