"""Secrets kept out of a vault: the rule table, the scan, masking, the `[secrets]` policy.

`scan(text)` returns `Finding`s naming the rule, the line and a masked value, never the value itself,
so a finding may go into any message, log or commit. The rules are value-shaped and prefix-anchored;
one keyword rule (`PGPASSWORD=X`, "password is X") takes only values that look random. docs/secrets.md
lists the rules and their rates.
"""

from __future__ import annotations

import base64
import bisect
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Final

from .errors import InvalidInput, Notice, Refused

if TYPE_CHECKING:
    from .model import Memory

REFUSE, WARN, OFF = "refuse", "warn", "off"
POLICIES: Final = (REFUSE, WARN, OFF)
#: An allow pattern longer than this is refused: a regex for one known false positive is short.
MAX_ALLOW_LENGTH = 500
#: How many findings a refusal names before "and N more".
SHOWN_FINDINGS = 5
#: The least entropy, in bits per character, of a value the keyword rule takes for a secret.
MIN_ENTROPY = 3.0

# A token must not end inside a longer word (it must not start inside one either: `Rule.bounded`).
_END = r"(?![A-Za-z0-9])"
_END_DASH = r"(?![A-Za-z0-9_-])"
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


@dataclass(frozen=True)
class Rule:
    """One row of the rule table.

    Attributes:
        name: stable, for programs and `allow` documentation (`github-token`).
        what: how a refusal names it ("a GitHub token").
        pattern: the regex; a group named `v` holds the secret when it is only part of the match.
        gate: a check of the secret's value (True: a secret); None when the shape alone decides.
        bounded: the match must not start right after a letter or digit (`xghp_...` is no token).

    Every pattern starts with a literal character, never a class, flag or assertion: the rules are
    joined into one alternation, and Python's `re` then skips ahead to the characters that can
    start one.
    """

    name: str
    what: str
    pattern: str
    gate: Callable[[str], bool] | None = None
    bounded: bool = True


def entropy(value: str) -> float:
    """Shannon entropy of `value` in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _random_letters(value: str) -> bool:
    """Looks machine-made without needing a digit (Hugging Face tokens are letters only): two cases or digits."""
    kinds = sum((any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value)))
    return kinds >= 2 and entropy(value) >= MIN_ENTROPY + 0.5


#: Words joined as a name in code or prose: `Bitwarden`, `passwordManager`, `CamelCase` (a random value has
#: two capitals in a row, or a capital last).
_WORDS = re.compile(r"[a-z]*(?:[A-Z][a-z]+)*")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5,}", re.IGNORECASE)
#: Characters that make a value look typed by a password generator (not the `-_.` of names, nor `@:/`).
_SYMBOLS = frozenset("!#$%^&*+=?~")
_SEPARATORS = str.maketrans("", "", "-_.")


def _random(value: str) -> bool:
    """Looks machine-made (or like a password) rather than a word: entropy >= MIN_ENTROPY, and letters mixed
    with digits or symbols, or letters alone in an order no word has (`lqRJpCTBiXlL`, not `Bitwarden`)."""
    if entropy(value) < MIN_ENTROPY or not any(c.isalpha() for c in value):
        return False
    if any(c.isdigit() or c in _SYMBOLS for c in value):
        return True
    letters = value.translate(_SEPARATORS)  # `rk_live_…`: the parts of a token are one draw
    return letters.isalpha() and not letters.isupper() and not letters.islower() and not _wordy(letters)


def _wordy(letters: str) -> bool:
    """Letters that read as words joined (`passwordManager`), not as drawn at random (`oMwdfpkmBiVy`: no
    word has five consonants in a row)."""
    return bool(_WORDS.fullmatch(letters)) and not _CONSONANTS.search(letters)


def _user_and_password(value: str) -> bool:
    """A Docker config.json `auth`: base64 of `user:password`."""
    try:
        user, colon, password = base64.b64decode(value, validate=True).decode("ascii").partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return bool(colon and user.isprintable() and password.isprintable() and len(password) >= 3)


#: Values that stand for a secret rather than being one: variables, templates, examples in docs.
_PLACEHOLDER = re.compile(
    r"^(?:\$|%\(|\{|<|\[)|x{4,}|X{4,}|\*{3,}|\.{3}|…"
    r"|(?i:^(?:your|my|the|some)[_-]|^(?:changeme|redacted|placeholder)$|example)"
)
_PASSWORD_WORDS = frozenset("password passwd pass pwd secret token apikey api_key key changeme redacted hidden".split())


def _url_password(value: str) -> bool:
    """The password of `scheme://user:PASSWORD@host` is real unless it is a placeholder (`${DB_PASS}`, `***`)."""
    return (
        len(value) >= 3
        and value.lower() not in _PASSWORD_WORDS
        and not _PLACEHOLDER.search(value)
        and len(set(value)) > 1
    )


_B64 = r"[A-Za-z0-9+/]"
_URLSAFE = r"[A-Za-z0-9_-]"

#: The value-shaped rules, tried in this order at each position (the more specific first).
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "private-key",
        "a private key block",
        r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:\s|\\[nr])*(?:[A-Za-z-]+:[^\n\\]*(?:\s|\\[nr])+)*(?P<v>[A-Za-z0-9+/=]{40,})",
        bounded=False,
    ),
    Rule("memfile-key", "a memfile key", r"mf[kp]_[a-z0-9]{8}_[A-Za-z0-9_-]{43}" + _END_DASH),
    Rule(
        "aws-access-key-id",
        "an AWS access key id",
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}" + _END,
        lambda v: entropy(v) >= MIN_ENTROPY,
    ),
    Rule(
        "aws-secret-access-key",
        "an AWS secret access key",
        r"(?:aws|AWS|Aws)[\w.-]{0,20}(?i:secret)[\w.-]{0,20}[\"']?\s*(?:[:=]|:=|=>)\s*[\"']?(?P<v>" + _B64 + r"{40})"
        r"(?![A-Za-z0-9+/])",
        _random,
    ),
    Rule("github-token", "a GitHub token", r"gh[pousr]_[A-Za-z0-9]{36,251}" + _END, _random),
    Rule(
        "github-fine-grained-token", "a GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{60,251}" + _END, _random
    ),
    Rule("anthropic-key", "an Anthropic API key", r"sk-ant-" + _URLSAFE + r"{32,}", _random),
    Rule("openai-key", "an OpenAI API key", r"sk-(?:(?:proj|svcacct|admin|None)-)?" + _URLSAFE + r"{32,}", _random),
    Rule("slack-token", "a Slack token", r"xox[abposr]-[A-Za-z0-9-]{10,}", _random),
    Rule(
        "slack-webhook",
        "a Slack webhook URL",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/-]{20,})",
        _random,
    ),
    Rule("stripe-key", "a Stripe secret key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}" + _END, _random),
    Rule("google-api-key", "a Google API key", r"AIza" + _URLSAFE + r"{35}" + _END_DASH),
    Rule("huggingface-token", "a Hugging Face token", r"hf_[A-Za-z0-9]{30,40}" + _END, _random_letters),
    Rule(
        "gitlab-token",
        "a GitLab token",
        r"gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|agent|oas)-[A-Za-z0-9_.-]{20,}",
        _random_letters,
    ),
    Rule("npm-token", "an npm token", r"npm_[A-Za-z0-9]{36}" + _END, _random),
    Rule("pypi-token", "a PyPI token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    Rule("sendgrid-key", "a SendGrid API key", r"SG\." + _URLSAFE + r"{16,32}\." + _URLSAFE + r"{30,}"),
    Rule("twilio-api-key", "a Twilio API key", r"SK[0-9a-fA-F]{32}" + _END, _random),
    Rule("jwt", "a JSON Web Token", r"eyJ" + _URLSAFE + r"{10,}\.eyJ" + _URLSAFE + r"{10,}\." + _URLSAFE + r"{16,}"),
    Rule("bearer-token", "a bearer token", r"(?:Bearer|bearer|BEARER)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)", _random),
    Rule("databricks-token", "a Databricks token", r"dapi[0-9a-f]{32}(?:-[0-9])?" + _END, _random),
    Rule("postman-key", "a Postman API key", r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}" + _END),
    Rule("age-secret-key", "an age secret key", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}" + _END),
    Rule(
        "docker-auth",
        "a registry login (the auth of a Docker config.json)",
        r'"auth"\s*:\s*"(?P<v>[A-Za-z0-9+/]{8,}={0,2})"',
        _user_and_password,
        bounded=False,
    ),
    Rule(
        "signed-url",
        "the signature of a signed URL (an Azure SAS token)",
        r"sig=(?P<v>(?:[A-Za-z0-9+/]|%2[BbFf]){40,}(?:%3[Dd]|=){0,2})",
        _random,
    ),
    Rule(
        "command-line-password",
        "a password on a command line",
        r"(?:sshpass\s+-p\s*|mysql(?:dump|admin)?\s(?:[^\n]*?\s)?-p|-(?:u|-user)\s+[\"']?[^\s:\"'/]+:)"
        r"(?P<v>[^\s\"']{8,200})",
        lambda v: _random(v) and not _PLACEHOLDER.search(v),
    ),
    Rule(
        "url-password",
        "a URL with a password",
        r"://[^\s:/?#@\"'<>]{0,100}:(?P<v>[^\s/?#@\"'<>]{1,200})@[A-Za-z0-9\[][^\s/?#@\"'<>]{0,253}",
        _url_password,
        bounded=False,
    ),
)

_IDENTIFIER = re.compile(r"[A-Za-z]+(?:[._-][A-Za-z]+)*[._-]?[0-9]{0,2}")
#: The name of a variable given as a value: `password_env = WEBAPP3_PASSWORD`.
_VARIABLE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
#: A value that says where a secret is, not what it is: a path, an ARN, a name with folders (`prod/db-v2`).
#: (A path's first folder is a word, `/home/`, `/Users/`: a base64 value may start with `/` too.)
_REFERENCE_VALUE = re.compile(r"/[A-Za-z][a-z]{2,}[a-z0-9._-]*(?:/|$)|~|\.\.?/|arn:|[A-Za-z]:\\|[^A-Z\s]*/[^A-Z\s]*$")
#: The last part of a name that holds a reference to a secret, or a fact about one, rather than the secret:
#: `token_file`, `api_key_id`, `secret_name`, `password_min_length`, `password_env`.
REFERENCE_NAMES: Final = frozenset(
    "alg algo arn budget count dir endpoint env expires expiry field file folder format group header hint id ids "
    "kind label len length limit location max min mode name path policy prefix ref rotation scope scopes size "
    "source store suffix ttl type uri url var version".split()
)


def _code_name(value: str) -> bool:
    """A name in code (`settings.API_KEY2`, `apiKey`): an identifier whose letters are parts joined by `._-`,
    or words, or one case only."""
    if not _IDENTIFIER.fullmatch(value):
        return False
    letters = value.rstrip("0123456789")
    return any(c in "._-" for c in value) or letters.isupper() or letters.islower() or _wordy(letters)


def _keyword_gate(value: str) -> bool:
    """A keyword's value is a secret when it looks like one (`_random`) and is not a name in code
    (`settings.API_KEY2`), a variable (`$DB_PASSWORD`, `WEBAPP3_PASSWORD`), a placeholder or a reference
    (a path, a URL, an ARN, `prod/db-credentials`)."""
    value = value.rstrip(".!?:")
    return (
        len(value) >= 8
        and _random(value)
        and "://" not in value
        and not _code_name(value)
        and not _VARIABLE.fullmatch(value)
        and not _PLACEHOLDER.search(value)
        and not _REFERENCE_VALUE.match(value)
    )


#: The keyword rule: `password = X`, `api_key: "X"`, `DB_PASSWORD=X`, `PGPASSWORD=X`, `pass: X`, "the
#: password is X", "mật khẩu wifi là X", "รหัสผ่านคือ X", `.netrc`'s `password X`. It runs on the text with
#: ASCII letters lowered (`_LOWER`, which keeps every position), so its pattern starts with literal
#: characters as the others do. `scan` takes a match only when:
#: - the keyword starts a word (`password: X`), or ends a name given a value (`PGPASSWORD=X`, `DB_PASS=X`,
#:   `GITHUBTOKEN=X`; `_KEY` counts only so, in capitals: `LICENSE_KEY=X`, not `cache_key: X`), never
#:   inside one in prose ("bypass");
#: - the name does not end in one of REFERENCE_NAMES (`token_file`, `api_key_id`);
#: - it is not inside a path or an ARN (`/run/secrets/...`, `arn:aws:...:secret:...`);
#: - a value after a space alone follows a password (`password X`, `--password X`), not `token cl100k_base`;
#: - the value is not a call in code (`password = getpass()`).
KEYWORD_RULE: Final = Rule(
    "password-assignment",
    "a password or key assigned to a name",
    r"(?P<k>pass(?:word|wd|phrase)?|pwd|secret|token|credential|api[ _-]?key|access[ _-]?key|private[ _-]?key"
    r"|account[ _-]?key|auth[ _-]?key|client[ _-]?secret|_key|mật khẩu|รหัสผ่าน|โทเค็น)"
    r"(?P<suffix>(?:[_.-][a-z0-9]{1,20}){0,3})[\"']?"
    r"(?:(?P<assign>\s*(?:[:=]|:=|=>)\s*)"
    r"|(?:\s+[^\s:=]{1,20}){0,4}?(?:\s+(?:is|was|là)\s+|\s*คือ\s*|\s*:\s+)"
    r"|(?P<space>[ \t]+))"
    r"[\"'`]?(?P<v>[^\s\"'`,;<>()\[\]{}]{8,200})",
    _keyword_gate,
)
#: The keywords a value may follow after a space alone (`.netrc`, `--password X`).
_SPACED: Final = frozenset({"password", "passwd", "passphrase"})
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _keyword_named(text: str, lowered: str, m: re.Match[str]) -> bool:
    """Whether a match of KEYWORD_RULE's pattern in `lowered` (`text` lowered) names a secret (the
    conditions listed above it)."""
    start = name_start = m.start()
    while name_start > 0 and lowered[name_start - 1] in _NAME_CHARS:
        name_start -= 1
    if name_start < start and m["assign"] is None:
        return False  # inside a word in prose: "bypass the cache", "mytoken"
    if m["k"] == "_key" and (name_start == start or not text[name_start : m.end("k")].isupper()):
        return False  # `_KEY` only ends a variable's name: `LICENSE_KEY=`, not `cache_key:`, `sort_key:`
    if name_start > 0 and lowered[name_start - 1] in ":/":
        return False  # inside an ARN or a path: `arn:aws:secretsmanager:...:secret:db`, `/run/secrets/token`
    if m["suffix"] and re.split(r"[_.-]", m["suffix"])[-1] in REFERENCE_NAMES:
        return False
    if lowered.startswith("(", m.end()):
        return False  # a call in code: `password = base64.b64decode(value)`
    return m["space"] is None or m["k"] in _SPACED


_LOWER: Final = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZẬẨ", "abcdefghijklmnopqrstuvwxyzậẩ"
)  # one character for one: positions in the lowered text are positions in the text

_ALL: Final = (*RULES, KEYWORD_RULE)
_BY_NAME: Final = {rule.name: rule for rule in _ALL}
# The rules as one alternation without groups (see `Rule`); a match is then matched again by its rule alone.
_COMBINED: Final = re.compile("|".join(f"(?:{rule.pattern.replace('(?P<v>', '(?:')})" for rule in RULES))
_KEYWORD: Final = re.compile(KEYWORD_RULE.pattern)
_AWS_SECRET_NEARBY: Final = re.compile(r"(?<![A-Za-z0-9+/])" + _B64 + r"{40}(?![A-Za-z0-9+/=])")
#: How far after an AWS access key id its secret key is looked for.
_NEARBY = 200


@dataclass(frozen=True)
class Finding:
    """One secret found: the rule's name, the line (1-based) and the value masked (`mask`).

    It never holds the value itself, so `str()`, `repr()` and `to_dict()` are safe to show and log.
    """

    rule: str
    line: int
    masked: str

    @property
    def what(self) -> str:
        """How a person reads the rule: "a GitHub token"."""
        return _BY_NAME[self.rule].what if self.rule in _BY_NAME else self.rule

    def __str__(self) -> str:
        return f"line {self.line}: {self.what} ({self.masked})"

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "line": self.line, "masked": self.masked}


def mask(value: str) -> str:
    """`value` with its middle hidden: 4 characters each side from 24 characters (`ghp_…3f9a`), 2 from 12,
    the first alone from 8, nothing below (`…`). At most a third of the value is ever shown."""
    n = len(value)
    show = 4 if n >= 24 else 2 if n >= 12 else 1 if n >= 8 else 0
    if show == 0:
        return "…"
    return value[:show] + "…" + (value[-show:] if show > 1 else "")


def _rule_of(text: str, m: re.Match[str]) -> tuple[Rule, re.Match[str]]:
    """The rule whose branch of the alternation made `m`, and its own match (with the group `v`)."""
    for rule in RULES:  # each rule compiled on first use (`re` keeps it): most texts never need one
        found = re.compile(rule.pattern).match(text, m.start())
        if found and found.end() == m.end():
            return rule, found
    raise AssertionError(f"no rule matches what the alternation matched at {m.start()}")  # the same patterns


def scan(text: str, allow: Sequence[re.Pattern[str] | str] = ()) -> list[Finding]:
    """The secrets in `text` (line numbers count from its first line), in the order they appear, one
    `Finding` each. `allow`: regexes of known false positives; a match is skipped when one is found in its
    secret value or in the whole matched text (`user:pw@localhost`)."""
    findings: list[Finding] = []
    line, counted = 1, 0
    for start, name, value, _ in _hits(text, allow):
        line, counted = line + text.count("\n", counted, start), start
        findings.append(Finding(name, line, mask(value)))
    return findings


def redact(text: str, allow: Sequence[re.Pattern[str] | str] = ()) -> str:
    """`text` with each secret `scan` finds in it masked where it stands (`deploy ghp_…3f9a`), the rest as
    it is: what a message or a record may repeat of a text someone gave. A private key is masked from its
    first line of base64 to its END line (or the end of the text): every line of the block is the key."""
    shown: list[str] = []
    end = len(text)
    for _, rule, value, at in sorted(_hits(text, allow), key=lambda hit: hit[3], reverse=True):
        stop = at + len(value)
        if stop <= end:  # one secret's value inside another's is masked with it
            if rule == "private-key":
                block_end = _KEY_END.search(text, stop, end)
                stop = block_end.start() if block_end else end
            shown[:0] = [mask(value), text[stop:end]]
            end = at
    return text[:end] + "".join(shown)


#: Where a private key block ends (`redact` masks the whole block).
_KEY_END = re.compile(r"\s*-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----")


def _hits(text: str, allow: Sequence[re.Pattern[str] | str]) -> list[tuple[int, str, str, int]]:
    """The secrets in `text` in order: (where the match starts, rule, value, where the value starts)."""
    patterns = [re.compile(p) if isinstance(p, str) else p for p in allow]
    hits: list[tuple[int, str, str, int]] = []
    taken: list[tuple[int, int]] = []  # spans of value-shaped matches: the keyword rule skips them
    near_span = (0, 0)  # the last AWS secret key found beside its key id

    def add(start: int, rule: str, value: str, whole: str, at: int) -> None:
        if not any(p.search(value) or p.search(whole) for p in patterns):
            hits.append((start, rule, value, at))

    for m in _COMBINED.finditer(text):
        start = m.start()
        rule, found = _rule_of(text, m)
        if rule.bounded and start and text[start - 1] in _WORD_CHARS:
            continue
        part = "v" if "v" in found.re.groupindex else 0
        value, (value_start, value_end) = found.group(part), found.span(part)
        if near_span[0] < value_end and value_start < near_span[1]:
            continue  # the AWS secret key found beside its key id
        taken.append(m.span())
        if rule.gate is not None and not rule.gate(value):
            continue
        add(start, rule.name, value, found.group(), value_start)
        if rule.name == "aws-access-key-id":
            near = _AWS_SECRET_NEARBY.search(text, m.end(), m.end() + _NEARBY)
            if near and _random(near.group()):
                near_span = near.span()
                taken.append(near_span)
                add(near.start(), "aws-secret-access-key", near.group(), near.group(), near.start())
    taken.sort()
    starts = [s for s, _ in taken]
    lowered = text.translate(_LOWER)
    for m in _KEYWORD.finditer(lowered):
        start, (value_start, value_end) = m.start(), m.span("v")
        if not _keyword_named(text, lowered, m):
            continue
        i = bisect.bisect_left(starts, value_end)  # spans before i start before the value ends
        if i and taken[i - 1][1] > value_start:  # the spans do not overlap: their ends are in order too
            continue  # the value is a token a value-shaped rule already named
        value = text[value_start:value_end].rstrip(".!?:")
        if _keyword_gate(value):
            add(start, KEYWORD_RULE.name, value, text[start:value_end], value_start)
    hits.sort()
    return hits


def describe(findings: Sequence[Finding], what: str = "this text") -> str:
    """The sentence a refused write answers with: each secret (rule, line, masked value), then what to do
    (`SecretFound` adds what a person may do if it is no secret, in the words of the face that answers).

    Example: "this text looks like it holds a secret: line 3 looks like a GitHub token (ghp_…3f9a).
    A vault is pushed and cloned, so ..."
    """
    shown = [f"line {f.line} looks like {f.what} ({f.masked})" for f in findings[:SHOWN_FINDINGS]]
    more = len(findings) - len(shown)
    listed = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    return (
        f"{what} looks like it holds a secret: {listed}. A vault is pushed and cloned, so secrets never go "
        "into it: remove the value (keep where it lives instead, say the password manager's entry)"
    )


class SecretFound(Refused):
    """A write refused because its text holds a secret (`findings`, masked); `str(e)` is `describe()`, then
    what a person may do if it is not one (the `allow_secret` hint: --allow-secret on the command line)."""

    def __init__(self, findings: Sequence[Finding], what: str = "this text") -> None:
        self.findings, self.what = tuple(findings), what
        super().__init__(describe(self.findings, what), hint="allow_secret")


def _default_fail(name: str, value: object, allowed: str, reason: str = "") -> Exception:
    return InvalidInput(f"secrets.{name}", value, allowed, reason=reason)


@dataclass(frozen=True)
class SecretPolicy:
    """The `[secrets]` table of memfile.toml.

    Attributes:
        policy: "refuse" (the default: a write holding a secret is refused, unless a person passes
            --allow-secret), "warn" (written, with a warning) or "off" (not scanned).
        allow: compiled regexes of known false positives (see `scan`).
    """

    policy: str = REFUSE
    allow: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_table(
        cls, table: Mapping[str, object], fail: Callable[[str, object, str, str], Exception] = _default_fail
    ) -> SecretPolicy:
        """The policy of a parsed `[secrets]` table ({} when absent: the defaults); `fail` makes the error for a
        bad setting from (key, value, allowed, reason), so it names memfile.toml and `secrets.KEY`.

        Raises:
            InvalidInput: `policy` is not one of POLICIES, or `allow` is not a list of valid regexes that each
                match only some text (not the empty string), at most MAX_ALLOW_LENGTH long.
        """
        policy = table.get("policy", REFUSE)
        if not isinstance(policy, str) or policy not in POLICIES:
            raise fail("policy", policy, ", ".join(f'"{p}"' for p in POLICIES), "")
        raw = table.get("allow", [])
        if not isinstance(raw, list):
            raise fail("allow", raw, "a list of regular expressions, such as allow = ['^AKIA.*EXAMPLE$']", "")
        return cls(policy, tuple(_allow_pattern(i, p, fail) for i, p in enumerate(raw)))

    def check(self, text: str, *, allow_secret: bool = False, what: str = "this text") -> list[Finding]:
        """The findings of `text` to warn about ([] when the policy is "off" or nothing is found); `allow_secret`
        is a person's --allow-secret, `what` how a refusal names the text ("the content of fact/db").

        Raises:
            SecretFound: the policy is "refuse", a secret was found, and `allow_secret` is False.
        """
        if self.policy == OFF:
            return []
        findings = scan(text, self.allow)
        if findings and self.policy == REFUSE and not allow_secret:
            raise SecretFound(findings, what)
        return findings


def _allow_pattern(index: int, pattern: object, fail: Callable[[str, object, str, str], Exception]) -> re.Pattern[str]:
    name, allowed = f"allow[{index}]", "a regular expression for one known false positive"
    if not isinstance(pattern, str):
        raise fail(name, pattern, allowed, "it is not text")
    if not pattern or len(pattern) > MAX_ALLOW_LENGTH:
        raise fail(name, pattern, allowed, f"it must be 1 to {MAX_ALLOW_LENGTH} characters")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise fail(name, pattern, allowed, f"not a valid regular expression: {exc}") from None
    if compiled.search(""):
        raise fail(name, pattern, allowed, 'it matches every text; to stop scanning set policy = "off"')
    return compiled


def rule_names() -> Iterable[str]:
    """Every rule's name, in table order (the keyword rule last)."""
    return (rule.name for rule in _ALL)


def guard(policy: SecretPolicy | None, text: str, *, what: str, allow_secret: bool, agent: bool) -> str | None:
    """What a write path calls before writing `text`: refuse it, or the warning to tell (None: nothing found).
    `policy` None is the defaults; an agent may never pass `allow_secret`.

    Raises:
        SecretFound: the policy refuses and `allow_secret` is not given.
        Refused: an agent passed `allow_secret`.
    """
    if allow_secret and agent:
        raise Refused(
            "only a person can store what looks like a secret; an agent never can: "
            "leave the value out and say where it is kept instead"
        )
    findings = (policy or SecretPolicy()).check(text, allow_secret=allow_secret, what=what)
    if not findings:
        return None
    why = "a person allowed it" if allow_secret else '[secrets] policy = "warn"'
    return f"{what} looks like it holds a secret, written anyway ({why}): {_listed(findings)}"


def _listed(findings: Sequence[Finding]) -> str:
    return "; ".join(str(f) for f in findings[:SHOWN_FINDINGS])


def warning(policy: SecretPolicy | None, text: str, what: str) -> str | None:
    """The warning about secrets in a person's own edit (`what`), which is never refused; None: none found
    or the policy is "off"."""
    findings = (policy or SecretPolicy()).check(text, allow_secret=True)
    if not findings:
        return None
    return (
        f"{what} looks like it holds a secret: {_listed(findings)} (a vault is pushed and cloned: remove it, "
        "and see docs/secrets.md for its git history)"
    )


#: How many of the memories a read serves `ReadWarnings` looks at (the first: what an agent reads first),
#: and how many characters of those not scanned before it scans.
READ_SCAN_MEMORIES, READ_SCAN_CHARACTERS = 100, 16_384


class ReadWarnings:
    """Warnings for secrets in the memories a read serves (a hand edit may put one in a file).

    A file is scanned when first served and again when its text changes, so a secret is told once per
    file for this object's life. A read scans at most READ_SCAN_MEMORIES memories and
    READ_SCAN_CHARACTERS of text, so its cost is bounded whatever it serves."""

    def __init__(self) -> None:
        self._scanned: dict[str, int] = {}  # a file's path -> the hash of the text last scanned there

    def told(
        self, policy: SecretPolicy | None, served: Iterable[Memory], named: Callable[[Memory], tuple[str, str]]
    ) -> list[str]:
        """The warnings about the memories a read serves, in the order served: one for each text not scanned
        before at its path that holds a secret (none when the policy is "off"). `named` gives a memory's
        REF as shown and the --mind option that names its mind (`--mind anna `, or none)."""
        policy = policy or SecretPolicy()
        if policy.policy == OFF:
            return []
        told: list[str] = []
        left = READ_SCAN_CHARACTERS
        for memory in islice(served, READ_SCAN_MEMORIES):
            path, text = memory.path, memory.content
            if self._scanned.get(path) == (key := hash(text)):
                continue
            if left <= 0:
                break
            left -= len(text)
            self._scanned[path] = key
            if findings := scan(text, policy.allow):
                ref, mind_option = named(memory)
                told.append(
                    Notice(
                        f"{ref} looks like it holds a secret: {_listed(findings)}. It was served as written by hand "
                        "(a write would refuse it)",
                        "edit_out_secret",
                        (memory.ref, mind_option),
                    )
                )
        return told
