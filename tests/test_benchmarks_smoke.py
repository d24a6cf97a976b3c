"""Every benchmark runs: each script once with `--smoke` (a tiny size, seconds), as a real process.

A benchmark that crashes (it reached into memfile's private classes, lost an import, a step no longer
works) fails here instead of on the day someone needs its numbers. The runs start the scripts with
PYTHONSAFEPATH=1, as the benchmarks start their own processes.

The smoke runs spend most of their time waiting (a watcher's quiet period, a server's start), so
they run RUNNING_AT_ONCE at a time, the longest first, as soon as the first of them is asked for;
each test waits for its own run's end and judges it alone. A smoke run judges no speed target, and
each works in its own temporary vault, so the runs beside it change none of its checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import REPO

from memfile import Vault

BENCHMARKS = REPO / "benchmarks"
SCRIPTS = [
    "bare_whoosh",
    "bench_capture",
    "bench_core",
    "bench_git",
    "bench_index",
    "bench_inout",
    "bench_links",
    "bench_mcp",
    "bench_purge",
    "bench_retrieval",
    "bench_secrets",
    "bench_semantic",
    "bench_serve",
    "bench_watch",
    "bench_writes",
]
TIMEOUT_S = 600  # each smoke run takes seconds; a loaded 2-core machine may be ten times slower
#: Smoke runs at once: they mostly wait, so three overlap well on two cores (the slowest, bench_watch,
#: is 95 % sleeping); more would only queue for the CPU.
RUNNING_AT_ONCE = 3
#: The order the runs start in: the longest first (measured wall time of each smoke run alone), so the
#: short ones fill the gaps beside them. A script missing here starts last.
LONGEST_FIRST = [
    "bench_watch",
    "bench_semantic",
    "bench_git",
    "bench_serve",
    "bench_inout",
    "bench_index",
    "bench_mcp",
]


def smoke(script: Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run(
        [sys.executable, str(script), "--smoke"], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def test_every_benchmark_has_a_smoke_run() -> None:
    found = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in ("common", "make_vault", "capture_probe"))
    assert found == sorted(SCRIPTS), "a benchmark script was added or removed: list it in SCRIPTS"


def linux_only(name: str) -> bool:
    return name in ("bench_watch", "bench_serve") and not sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The smoke run of every script this session selected (by -k or a node id too), started at once."""
    chosen = {
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_benchmark_runs_with_smoke" and item.module is request.module
    }
    order = sorted(chosen, key=lambda n: LONGEST_FIRST.index(n) if n in LONGEST_FIRST else len(LONGEST_FIRST))
    with ThreadPoolExecutor(max_workers=RUNNING_AT_ONCE) as pool:
        runs = {name: pool.submit(smoke, BENCHMARKS / f"{name}.py") for name in order if not linux_only(name)}
        try:
            yield runs
        finally:
            for run in runs.values():
                run.cancel()  # the runs not started yet (an interrupted session); each started one ends by its timeout


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_runs_with_smoke(name: str, smoke_runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    if linux_only(name):
        pytest.skip(f"{name} reads /proc: Linux only")
    proc = smoke_runs[name].result()
    assert proc.returncode == 0, f"{name} --smoke: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_a_smoke_run_that_misses_a_check_fails(tmp_path: Path) -> None:
    """A check (what the figures rest on) is judged in a smoke run; a speed target is not."""
    script = tmp_path / "bench_checks.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "from common import TIMING_COLUMNS, Table\n"
        "table = Table(TIMING_COLUMNS, smoke=True)\n"
        "table.timing('slow', 10, [5.0], limit_s=0.1, target='<= 100 ms')\n"
        "table.add('tree clean', ok=sys.argv[1] == 'clean', check=True, target='clean')\n"
        "table.print()\n"
        "sys.exit(table.exit_code())\n",
        encoding="utf-8",
    )
    run = [sys.executable, str(script)]
    clean = subprocess.run([*run, "clean"], capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "1 PASS, 0 MISS (1 targets not judged: a smoke run)" in clean.stdout
    dirty = subprocess.run([*run, "dirty"], capture_output=True, text=True, timeout=60)
    assert dirty.returncode == 1
    assert "smoke run FAILED its checks: tree clean" in dirty.stdout


def test_retrieval_smoke_without_the_data_skips_with_a_message(tmp_path: Path) -> None:
    """A checkout with no ../shared beside it (no LoCoMo data): the smoke run says so and exits 0."""
    checkout = tmp_path / "checkout" / "benchmarks"
    checkout.mkdir(parents=True)
    for name in ("bench_retrieval.py", "common.py"):
        shutil.copy(BENCHMARKS / name, checkout / name)
    proc = smoke(checkout / "bench_retrieval.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke run skipped" in proc.stdout and "locomo10.json" in proc.stdout
    full = subprocess.run(
        [sys.executable, str(checkout / "bench_retrieval.py")], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert full.returncode == 1 and "not found" in full.stderr


def test_the_vault_generator_is_the_projects_own_and_deterministic(tmp_path: Path) -> None:
    """benchmarks/make_vault.py: the same seed gives the same bytes; memfile reads every file; the probes
    name the memory that holds their answer; no secret rule fires on its prose."""
    made = []
    for name in ("a", "b"):
        argv = [sys.executable, str(BENCHMARKS / "make_vault.py"), "--n", "300", "--seed", "7", "--probes", "6"]
        proc = subprocess.run([*argv, "--out", str(tmp_path / name)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        made.append({p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*.md")})
    assert made[0] == made[1] and len(made[0]) == 300
    vault = Vault.open(tmp_path / "a", mind="bench")
    assert len(vault.memories()) == 300 and vault.issues == []
    assert not vault.doctor().problems
    probes = [json.loads(line) for line in (tmp_path / "a.probes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [p["category_name"] for p in probes] == ["probe-unique", "probe-similar"] * 3
    for probe in probes:
        assert probe["answer"] in vault.get(f"{probe['evidence_category']}/{probe['evidence_keys'][0]}").content
    vault.close()
