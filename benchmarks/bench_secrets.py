"""The secret scanner (memfile/secretscan.py): false positives on real text, positives caught, time per memory.

Run from the project root (one command, about half a minute):

    python benchmarks/bench_secrets.py            # LoCoMo, the sample vault, a generated 10,000-memory vault
    python benchmarks/bench_secrets.py --n 2000   # a smaller generated vault
    python benchmarks/bench_secrets.py --smoke    # 200 generated memories, LoCoMo if present: does it run?

What it measures, each a row of the table:

1. False positives, which must be 0 (issue 27 part 2), on text nobody wrote to contain a secret:
   - LoCoMo's 5,882 dialog turns (snap-research/locomo, CC BY-NC 4.0, read from
     ../shared/bench-data/locomo/locomo10.json, never copied), each as locomo_to_vault.py writes
     a turn's body: "Speaker: text [shares an image: caption]". Without the data the row says
     "skipped" and why, and judges nothing.
   - LoCoMo's other texts (observations, session summaries, questions), as a second row;
   - every paragraph of memfile's README and docs/: prose about keys and tokens;
   - every memory file of sample_vault/, whole (front-matter and body, as doctor would scan it);
   - a generated vault of `--n` memories (benchmarks/make_vault.py, English, Vietnamese
     and Thai prose, ids, dates, inline code), each file whole.
2. Positives caught: token-shaped strings generated at run time (so none is committed; GitHub push
   protection never sees one), one per rule and a few shapes the rules were not written for,
   each inside a sentence.
3. Both rates on memfile's own corpus (benchmarks/data/, written for issue 39), each half apart:
   - secrets_ordinary.jsonl: ordinary memories (config lines whose names hold "password", "token"
     or "key" but whose values are paths, ids, ARNs, UUIDs, variables; prose about tokens; everyday
     facts; English, Vietnamese and Thai): the false-positive rate, the share of them flagged;
   - secrets_formats.jsonl: templates of secrets in many formats (.env lines, YAML, JSON, a Docker
     config.json, connection strings, command lines, prose in three languages, vendors' tokens),
     each filled `--samples` times at run time with random characters (`fill`): the detection rate.
   Each record is in the `tune` half (the rules were fitted to it: 0 false positives and every
   secret found are targets) or the `held` half (never looked at while fitting: its rates are
   what to expect of text nobody tuned for, reported, not judged).
4. Microseconds per memory to `scan()` one text: the median over every text of each corpus (and
   the 95th percentile), in this process, after a warm-up pass.

A false positive prints its rule, line and masked value (never the text: LoCoMo stays in its folder).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import secrets
import statistics
import string
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py's folder; PYTHONSAFEPATH=1 leaves it out
from common import LOCOMO_DATA, ROOT, Column, Table, bench_env, make_vault, p95, parse_args, say  # noqa: E402

from memfile.secretscan import scan  # noqa: E402

SAMPLE_VAULT = ROOT / "sample_vault"
ORDINARY = ROOT / "benchmarks" / "data" / "secrets_ordinary.jsonl"
FORMATS = ROOT / "benchmarks" / "data" / "secrets_formats.jsonl"
HALVES = {"tune": "tune half", "held": "held-out half"}

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "_-"
_B64 = _ALNUM + "+/"


def rand(n: int, alphabet: str = _ALNUM) -> str:
    """`n` random characters of `alphabet`: a short value has no character twice (a password, as a person
    or a generator makes one; the keyword rule's entropy gate takes those), and with letters and digits in
    the alphabet it holds both, a digit before the last two characters (`abcdefgh12` reads as a name in
    code, which the keyword rule rightly skips)."""
    mixed = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        if n <= 16 and n <= len(alphabet):
            value = "".join(secrets.SystemRandom().sample(alphabet, n))
        else:
            value = "".join(secrets.choice(alphabet) for _ in range(n))
        if not mixed or (any(c.isdigit() for c in value[:-2] or value) and any(c.isalpha() for c in value)):
            return value


def positives() -> list[tuple[str, str]]:
    """(what, a sentence holding it): each token assembled here, from pieces no scanner flags."""
    upper = string.ascii_uppercase + string.digits
    hexdigits = "0123456789abcdef"
    return [
        ("AWS key id + secret", f"aws creds: {'AK' + 'IA' + rand(16, upper)} / {rand(40, _B64)}"),
        ("GitHub classic PAT", f"use {'gh' + 'p_' + rand(36)} for the CI push"),
        ("GitHub fine-grained PAT", f"token: {'github' + '_pat_' + rand(22) + '_' + rand(59)}"),
        ("Anthropic key", f"ANTHROPIC_API_KEY={'sk-' + 'ant-api03-' + rand(93, _URLSAFE) + 'AA'}"),
        ("OpenAI project key", f"the key is {'sk-' + 'proj-' + rand(156, _URLSAFE)}"),
        (
            "Slack bot token",
            f"bot: {'xo' + 'xb-' + rand(12, string.digits) + '-' + rand(13, string.digits) + '-' + rand(24)}",
        ),
        ("Stripe live key", f"stripe {'sk' + '_live_' + rand(24)}"),
        ("Google API key", f"maps key {'AI' + 'za' + rand(35, _URLSAFE)}"),
        ("Hugging Face token", f"hf login {'hf' + '_' + rand(34, string.ascii_letters)}"),
        ("GitLab PAT", f"{'gl' + 'pat-' + rand(20, _URLSAFE)} for the mirror"),
        ("npm token", f"//registry.npmjs.org/:_authToken={'np' + 'm_' + rand(36)}"),
        ("PyPI token", f"password = {'py' + 'pi-AgEIcHlwaS5vcmc' + rand(80, _URLSAFE)}"),
        ("SendGrid key", f"{'S' + 'G.' + rand(22, _URLSAFE) + '.' + rand(43, _URLSAFE)}"),
        ("Twilio API key", f"twilio {'S' + 'K' + rand(32, hexdigits)}"),
        (
            "JWT",
            f"cookie {'ey' + 'J' + rand(36, _URLSAFE) + '.ey' + 'J' + rand(60, _URLSAFE) + '.' + rand(43, _URLSAFE)}",
        ),
        (
            "OpenSSH private key",
            "-----BEGIN OPENSSH "
            + "PRIVATE KEY-----\n"
            + "\n".join(rand(70, _B64) for _ in range(5))
            + "\n-----END OPENSSH PRIVATE KEY-----",
        ),
        ("Postgres URL with password", f"DATABASE_URL=postgres://app:{rand(18)}@db.internal:5432/app"),
        ("password in prose", f"The router admin password is {rand(12)}, don't share it"),
        ("password = line", f'password = "{rand(16)}"'),
        (
            "memfile Mind Key",
            f"{'mf' + 'k_' + rand(8, string.ascii_lowercase + string.digits) + '_'}{secrets.token_urlsafe(32)}",
        ),
        # Shapes no rule was written for: only the keyword rule or a generic rule can catch them.
        ("Azure storage AccountKey", f"AccountName=prod;AccountKey={rand(86, _B64)}==;EndpointSuffix=core.windows.net"),
        ("Django SECRET_KEY", f"SECRET_KEY = 'django-insecure-{rand(50, _ALNUM + '!@#%^&*-_=+')}'"),
        ("Datadog DD_API_KEY", f"export DD_API_KEY={rand(32, hexdigits)}"),
        ("Telegram bot token", f"bot token: {rand(10, string.digits)}:AA{rand(33, _URLSAFE)}"),
        ("Vietnamese prose password", f"Mật khẩu wifi là {rand(12)} nhé."),
    ]


#: The alphabets of a template's `{X:n}` (n characters of X); `{UUID}` and `{DOCKERAUTH}` (base64 of user:password).
FILLS = {
    "A": _ALNUM,
    "a": string.ascii_lowercase + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "H": "0123456789abcdef",
    "B": _B64,
    "S": _URLSAFE,
    "L": string.ascii_letters,
    "D": string.digits,
    "P": _ALNUM + "!#%^&*-_=+@",
    "Z": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",  # bech32 (age keys)
}
_FILL = re.compile(r"\{(UUID|DOCKERAUTH|[A-Za-z]):?(\d+)?\}")


def fill(template: str, rng: random.Random) -> str:
    """A secret made from `template` (secrets_formats.jsonl): each `{X:n}` drawn from FILLS[X] by `rng`."""

    def drawn(m: re.Match[str]) -> str:
        if m[1] == "UUID":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if m[1] == "DOCKERAUTH":
            return base64.b64encode(("ci-bot:" + "".join(rng.choices(_ALNUM, k=16))).encode()).decode()
        return "".join(rng.choices(FILLS[m[1]], k=int(m[2])))

    return _FILL.sub(drawn, template)


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def corpus_rows(table: Table, samples: int, seed: int) -> None:
    """The false-positive rate on ordinary memories and the detection rate on secrets, per half."""
    ordinary, formats = read_jsonl(ORDINARY), read_jsonl(FORMATS)
    rng = random.Random(seed)
    for half, label in HALVES.items():
        texts = [record["text"] for record in ordinary if record["half"] == half]
        micro, found = timed_scan(texts)
        for i, findings in found:
            say(f"    {label}: false positive in ordinary memory {i}: " + "; ".join(str(f) for f in findings))
        tuned = half == "tune"
        table.add(
            f"ordinary memories, {label}",
            ok=not found if tuned else None,
            check=tuned,
            target="0 false positives" if tuned else "",
            shown=f"{len(found)} of {len(texts)} flagged ({len(found) / len(texts):.1%} false positives)",
            texts=len(texts),
            chars=statistics.fmean(len(t) for t in texts),
            found_text=f"{len(found)} FP ({len(found) / len(texts):.1%})",
            rate=len(found) / len(texts),
            us_p50=statistics.median(micro),
            us_p95=p95(micro),
        )
        cases = [(r["format"], fill(r["template"], rng)) for r in formats if r["half"] == half for _ in range(samples)]
        micro, found = timed_scan(text for _, text in cases)
        caught = {i for i, _ in found}
        missed = sorted({name for i, (name, _) in enumerate(cases) if i not in caught})
        table.add(
            f"secrets in {len({name for name, _ in cases})} formats x {samples}, {label}",
            ok=not missed if tuned else None,
            check=tuned,
            target="all found" if tuned else "",
            shown=f"{len(caught)} of {len(cases)} found ({len(caught) / len(cases):.1%})"
            + (f"; missed: {', '.join(missed)}" if missed else ""),
            texts=len(cases),
            chars=statistics.fmean(len(t) for _, t in cases),
            found_text=f"{len(caught)}/{len(cases)} ({len(caught) / len(cases):.1%})",
            rate=len(caught) / len(cases),
            us_p50=statistics.median(micro),
            us_p95=p95(micro),
            note="missed: " + ", ".join(missed) if missed else "",
        )


def locomo_turns() -> list[str] | None:
    """Each LoCoMo turn as a memory body (as ../shared/bench/locomo_to_vault.py writes it); None without the data."""
    if not LOCOMO_DATA.exists():
        return None
    samples = json.loads(LOCOMO_DATA.read_text(encoding="utf-8"))
    texts = []
    for sample in samples:
        conversation = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]), v) for k, v in conversation.items() if k.startswith("session_") and k[8:].isdigit()
        )
        for _, turns in sessions:
            for turn in turns:
                body = f"{turn['speaker']}: {turn['text'].strip()}"
                if turn.get("blip_caption"):
                    body += f" [shares an image: {turn['blip_caption'].strip()}]"
                texts.append(body)
    return texts


def locomo_extras() -> list[str] | None:
    """LoCoMo's other texts: the generated observations, the session summaries, the questions."""
    if not LOCOMO_DATA.exists():
        return None
    texts: list[str] = []
    for sample in json.loads(LOCOMO_DATA.read_text(encoding="utf-8")):
        for per_speaker in (sample.get("observation") or {}).values():
            for items in per_speaker.values():
                texts += [item[0] if isinstance(item, list) else str(item) for item in items]
        texts += [str(v) for v in (sample.get("session_summary") or {}).values()]
        texts += [qa["question"] for qa in sample.get("qa", [])]
    return texts


def docs_texts() -> list[str]:
    """memfile's own documentation: technical prose full of "token", "key" and "password", each paragraph."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [part for f in files if f.exists() for part in f.read_text(encoding="utf-8").split("\n\n") if part.strip()]


def vault_files(root: Path) -> list[str]:
    """The text of every memory file under `root`, whole."""
    return [p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md")) if ".memfile" not in p.parts]


def timed_scan(texts: Iterable[str]) -> tuple[list[float], list[tuple[int, list]]]:
    """µs per text, and (text number, findings) for each text with a finding."""
    micro, found = [], []
    for i, text in enumerate(texts):
        start = time.perf_counter()
        findings = scan(text)
        micro.append((time.perf_counter() - start) * 1e6)
        if findings:
            found.append((i, findings))
    return micro, found


COLUMNS = [
    Column("corpus", lambda r: r["figure"]),
    Column("texts", lambda r: f"{r['texts']:,}" if r.get("texts") is not None else "-", right=True),
    Column("mean chars", lambda r: f"{r['chars']:,.0f}" if r.get("chars") else "-", right=True),
    Column("found", lambda r: r.get("found_text", "-"), right=True),
    Column("µs p50", lambda r: f"{r['us_p50']:.0f}" if r.get("us_p50") is not None else "-", right=True),
    Column("µs p95", lambda r: f"{r['us_p95']:.0f}" if r.get("us_p95") is not None else "-", right=True),
    Column("target", lambda r: r["target"] or "-"),
    Column("result", lambda r: r["result"]),
]


def negatives_row(table: Table, name: str, texts: list[str] | None) -> None:
    if texts is None:
        table.add(name, shown="skipped: no LoCoMo data", note=f"skipped: {LOCOMO_DATA} not found (not in the project)")
        return
    timed_scan(texts[:200])  # warm-up
    micro, found = timed_scan(texts)
    for i, findings in found[:10]:
        say(f"    false positive in text {i}: " + "; ".join(str(f) for f in findings))
    table.add(
        name,
        ok=not found,
        check=True,
        target="0 false positives",
        shown=f"{len(found)} false positives in {len(texts):,} texts, p50 {statistics.median(micro):.0f} µs",
        texts=len(texts),
        chars=statistics.fmean(len(t) for t in texts) if texts else 0,
        found_text=f"{len(found)} FP",
        us_p50=statistics.median(micro),
        us_p95=p95(micro),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=10_000, help="memories in the generated vault (default 10,000)")
    parser.add_argument("--seed", type=int, default=42, help="make_vault.py's seed, and the secrets' (`fill`)")
    parser.add_argument("--samples", type=int, default=5, help="secrets made from each template (default 5)")
    args = parse_args(parser, n=200)
    env = bench_env()
    table = Table(COLUMNS, smoke=args.smoke)
    say(f"bench_secrets: python {sys.version.split()[0]}")

    negatives_row(table, "LoCoMo turns", locomo_turns())
    negatives_row(table, "LoCoMo observations, summaries, questions", locomo_extras())
    negatives_row(table, "sample_vault files", vault_files(SAMPLE_VAULT))
    negatives_row(table, "memfile docs paragraphs", docs_texts())
    with tempfile.TemporaryDirectory(prefix="bench-secrets-") as tmp:
        took = make_vault(Path(tmp) / "vault", args.n, env, seed=args.seed)
        say(f"  generated {args.n:,} memories in {took:.1f} s")
        negatives_row(table, f"generated vault files (make_vault --n {args.n})", vault_files(Path(tmp) / "vault"))

    corpus_rows(table, args.samples, args.seed)
    cases = positives()
    missed = [what for what, text in cases if not scan(text)]
    micro = timed_scan([text for _, text in cases] * 20)[0]
    table.add(
        "positives (built at run time)",
        ok=not missed,
        check=True,
        target="all caught",
        shown=f"{len(cases) - len(missed)}/{len(cases)} caught" + (f"; missed: {', '.join(missed)}" if missed else ""),
        texts=len(cases),
        chars=statistics.fmean(len(t) for _, t in cases),
        found_text=f"{len(cases) - len(missed)}/{len(cases)}",
        us_p50=statistics.median(micro),
        us_p95=p95(micro),
        note="missed: " + ", ".join(missed) if missed else "",
    )
    table.print()
    return table.exit_code() or (0 if args.smoke or all(r["result"] != "MISS" for r in table.rows) else 1)


if __name__ == "__main__":
    raise SystemExit(main())
