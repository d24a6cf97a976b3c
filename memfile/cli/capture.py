"""`memfile capture`: memories a model proposes from a conversation (`Vault.capture`, docs/capture.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import InvalidInput
from .common import State, json_option, print_json
from .options import MemfileCommand

#: The most bytes of a transcript file read (a conversation of 1,000 long messages fits).
MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024


@click.command(name="capture", cls=MemfileCommand)
@click.argument("transcript", metavar="TRANSCRIPT")
@click.option("--session", metavar="NAME", help="The conversation's name, kept as captured_from (default: the file's).")
@click.option(
    "--review/--no-review", default=None, help="Proposals wait for memfile review (default: [capture] review)."
)
@click.option("--dry-run", is_flag=True, help="Ask the model and show the decisions; write nothing.")
@json_option
def capture(
    state: State, transcript: str, session: str | None, review: bool | None, dry_run: bool, as_json: bool
) -> None:
    """Ask the configured model which memories a conversation holds, then add, update or skip each.

    TRANSCRIPT is a chat, one message per line ({"role": "user", "content": "..."}, JSON lines), or one
    JSON list of messages, or - for stdin. The model is [capture]'s endpoint in memfile.toml (any
    OpenAI-compatible one: llama.cpp's server, Ollama, a hosted API with api_key_env); without one,
    nothing is written (exit 2). Each candidate is decided against the mind: add, update (it supersedes
    the memory it restates) or skip (already known); one commit says each decision and why. With review
    (the default) they wait for a person: memfile review.

    Example: memfile capture chat.jsonl --session support-2026-12-07

    Example: memfile capture - --dry-run < chat.jsonl
    """
    from ..extractor import ChatEndpoint

    messages = _messages(transcript)
    vault = state.vault()
    extract = ChatEndpoint.from_config(vault.config)  # before any work: no extractor, nothing is done
    name = session if session is not None else (Path(transcript).stem if transcript != "-" else None)
    report = vault.capture(messages, extract, name, review=review, dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
        return
    for decision in report.decisions:
        shown = decision.memory.ref if decision.memory is not None else decision.candidate.ref
        click.echo(f"{decision.action:<6} {shown}: {decision.reason}")
    counts = ", ".join(f"{report.counts[action]} {action}" for action in ("add", "update", "skip"))
    if dry_run:
        click.echo(f"dry run: {counts}; nothing written", err=True)
    elif report.commit is None:
        click.echo(f"{counts}: nothing to write", err=True)
    else:
        waiting = sum(1 for d in report.decisions if d.memory is not None and d.memory.proposed)
        tail = f"; {waiting} wait for review: memfile review" if waiting else ""
        click.echo(f"captured {report.session}: {counts} in commit {report.commit[:12]}{tail}", err=True)


def _messages(transcript: str) -> list[Any]:
    """The messages of a transcript file (or stdin, `-`): JSON lines, one message each, or one JSON list (or
    `{"messages": [...]}`).

    Raises:
        InvalidInput: the file cannot be read, is too big, or is not JSON of that shape (the line named).
    """
    try:
        if transcript == "-":
            data = sys.stdin.buffer.read(MAX_TRANSCRIPT_BYTES + 1)
        else:
            with open(transcript, "rb") as f:
                data = f.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(
            "transcript", transcript, "a readable file of chat messages", reason=str(exc.strerror)
        ) from None
    if len(data) > MAX_TRANSCRIPT_BYTES:
        raise InvalidInput("transcript", transcript, f"a file of at most {MAX_TRANSCRIPT_BYTES // 2**20} MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("transcript", transcript, "UTF-8 text") from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        return whole["messages"]
    messages = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            messages.append(json.loads(line))
        except ValueError:
            raise InvalidInput(
                f"transcript line {number}", line[:80], 'one JSON message per line: {"role": ..., "content": ...}'
            ) from None
    return messages
