"""The command line's review of captured memories (`Vault.capture`): `memfile review` lists the proposals, and
accepts, edits or rejects them, each one commit. A person's work: an agent (MEMFILE_SOURCE=agent) is refused."""

from __future__ import annotations

import click

from ..errors import NotFound, Refused
from ..model import CAPTURED_FROM, CAPTURED_LINES, CAPTURED_TURNS, PROPOSED_SUPERSEDES, Memory, Source
from ..vault import Vault
from .common import State, confirmed, json_option, print_json, run_editor
from .options import CommandGroup

#: What an agent is told (`Vault.accept` and `Vault.reject` refuse it too; listing would show it nothing).
FOR_PEOPLE = (
    "memfile review is for people: captured memories wait for a person's review, and an agent can neither "
    "see, accept nor reject them"
)


def _reviewer(state: State) -> Vault:
    """The vault, for a person only."""
    vault = state.vault()
    if vault.actor is Source.AGENT:
        raise Refused(FOR_PEOPLE)
    return vault


def _proposal(vault: Vault, ref: str) -> Memory:
    """The proposed memory REF names (NotFound: none, or one that is not waiting for review)."""
    memory = vault.get(ref)
    if not memory.proposed:
        raise NotFound(f"{memory.ref} is not waiting for review (only proposed memories are: memfile review)")
    return memory


def _proposals(vault: Vault, refs: tuple[str, ...]) -> list[Memory]:
    """Every REF's proposal, all checked before anything is written."""
    return [_proposal(vault, ref) for ref in refs]


def _plural(count: int) -> str:
    return f"{count} proposal{'' if count == 1 else 's'}"


def _print_proposals(vault: Vault, proposals: list[Memory], as_json: bool) -> None:
    """Each proposal: its REF, the session and turns it came from, what it would supersede, its text, and the
    conversation lines it came from (`> [N] role: text`)."""
    targets = {m.id: str(dict(m.extra).get(PROPOSED_SUPERSEDES) or "") for m in proposals}
    refs = {m.id: m.ref for m in vault.memories()} if any(targets.values()) else {}
    superseded = {id_: refs.get(target, target) or None for id_, target in targets.items()}
    if as_json:
        print_json([m.to_dict() | {"would_supersede": superseded[m.id]} for m in proposals])
        return
    if not proposals:
        click.echo("no memory waits for review", err=True)
    for memory in proposals:
        extra = dict(memory.extra)
        turns = ", ".join(str(t) for t in extra.get(CAPTURED_TURNS) or [])
        where = f"{extra.get(CAPTURED_FROM, '?')}" + (f", turns {turns}" if turns else "")
        supersedes = f"; would supersede {superseded[memory.id]}" if superseded[memory.id] else ""
        click.echo(f"{memory.ref:<42} {where}{supersedes}")
        click.echo("".join(f"    {line}\n" for line in memory.content.splitlines()), nl=False)
        click.echo("".join(f"    > {line}\n" for line in extra.get(CAPTURED_LINES) or []), nl=False)


@click.group(cls=CommandGroup, invoke_without_command=True)
@click.option("--accept-all", is_flag=True, help="Accept every proposal (asks first, unless --yes).")
@click.option("--yes", is_flag=True, help="With --accept-all: accept without asking (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")
@click.pass_context
def review(ctx: click.Context, accept_all: bool, yes: bool, as_json: bool) -> None:
    """List the captured memories waiting for review; accept, edit or reject them.

    A captured memory (`status: proposed`) stays out of recall, search and every agent's read until a person
    accepts it: it becomes a verified memory (and supersedes the memory it would update) or, rejected, is
    forgotten (git keeps it). Each accept or reject is one commit. For people only: an agent
    (MEMFILE_SOURCE=agent) is refused.

    Example: memfile review

    Example: memfile review accept fact/dog_name preference/coffee_2

    Example: EDITOR=nano memfile review edit fact/dog_name

    Example: memfile review --accept-all --yes
    """
    if ctx.invoked_subcommand is not None:
        if accept_all or yes or as_json:
            raise click.UsageError("--accept-all, --yes and --json go after the subcommand, or with no subcommand")
        return
    if yes and not accept_all:
        raise click.UsageError("--yes goes with --accept-all")
    state: State = ctx.obj
    vault = _reviewer(state)
    proposals = vault.proposals()
    if not accept_all:
        _print_proposals(vault, proposals, as_json)
        return
    if not as_json:
        _print_proposals(vault, proposals, False)
    refusal = (
        f"memfile review --accept-all asks before it accepts {_plural(len(proposals))}, and there is no terminal "
        "to ask on; nothing was accepted: pass --yes to accept them all, or accept them one by one"
    )
    if proposals and not confirmed(yes, f"Accept these {_plural(len(proposals))}?", refusal):
        click.echo("nothing was accepted", err=True)
        return
    accepted = [vault.accept(memory.id) for memory in proposals]
    if as_json:
        print_json([m.to_dict() for m in accepted])
    elif accepted:
        click.echo(f"accepted {_plural(len(accepted))}, one commit each")


@review.command()
@click.argument("refs", metavar="REF...", nargs=-1, required=True)
@json_option
def accept(state: State, refs: tuple[str, ...], as_json: bool) -> None:
    """Accept proposals: each becomes a verified memory, in recall and search (one commit each).

    A proposal that would update a memory supersedes it. Every REF is checked first: an unknown one, or one
    that is not waiting for review, accepts nothing.

    Example: memfile review accept fact/dog_name preference/coffee_2
    """
    vault = _reviewer(state)
    accepted = [vault.accept(memory.id) for memory in _proposals(vault, refs)]
    _print_done(accepted, as_json, "accepted")


@review.command()
@click.argument("refs", metavar="REF...", nargs=-1, required=True)
@json_option
def reject(state: State, refs: tuple[str, ...], as_json: bool) -> None:
    """Reject proposals: each is forgotten (one commit each; git keeps it).

    Every REF is checked first: an unknown one, or one that is not waiting for review, rejects nothing.

    Example: memfile review reject fact/dog_name
    """
    vault = _reviewer(state)
    rejected = [vault.reject(memory.id) for memory in _proposals(vault, refs)]
    _print_done(rejected, as_json, "rejected")


def _print_done(memories: list[Memory], as_json: bool, verb: str) -> None:
    if as_json:
        print_json([m.to_dict() for m in memories])
    for memory in [] if as_json else memories:
        click.echo(f"{verb} {memory.id} {memory.path}")


@review.command()
@click.argument("ref")
@json_option
def edit(state: State, ref: str, as_json: bool) -> None:
    """Open a proposal's text in $EDITOR, then accept it with the edited text (one commit).

    An empty or unchanged text accepts nothing (memfile review accept takes it as it is).

    Example: EDITOR=nano memfile review edit fact/dog_name
    """
    vault = _reviewer(state)
    proposal = _proposal(vault, ref)
    instead = f"or accept it as it is: memfile review accept {proposal.ref}"
    text = run_editor("memfile review edit", proposal.ref, instead, text=proposal.content)
    content = (text or "").strip()
    if text is None or content == proposal.content.strip():
        click.echo(f"unchanged: nothing was accepted (as it is: memfile review accept {proposal.ref})", err=True)
        return
    if not content:
        click.echo(f"the text is empty: nothing was accepted (drop it: memfile review reject {proposal.ref})", err=True)
        return
    memory = vault.accept(proposal.id, content=content)
    print_json(memory.to_dict()) if as_json else click.echo(f"accepted {memory.id} {memory.path}")
