"""The command line's credentials for `memfile serve`: `memfile key add|list|revoke`."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import find_vault
from ..errors import InvalidInput
from ..keys import AGENT, PERSON, Key, KeyStore
from .common import State, json_option, print_json
from .options import CommandGroup

keys_option = click.option(
    "--keys",
    "keys_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keys file (default: $MEMFILE_KEYS, else $XDG_CONFIG_HOME/memfile/keys.toml, "
    "else ~/.config/memfile/keys.toml).",
)


@click.group(name="key", cls=CommandGroup)
def key_group() -> None:
    """Make, list and revoke the credentials of memfile serve.

    A Mind Key (--mind) is an agent's: it reaches one mind, always as source
    agent, and can never verify. A person's token (--person) can do everything
    in every mind. Only a hash of each token is kept, in a 0600 file outside
    the vault and outside git.

    Example: memfile key add --mind michael --name claude-desktop
    """


@key_group.command(name="add")
@click.option("--mind", "mind", metavar="NAME", help="The mind a Mind Key (an agent's) is bound to.")
@click.option("--person", is_flag=True, help="Make a person's token instead: it reaches every mind and can verify.")
@click.option(
    "--name", "label", required=True, metavar="LABEL", help="Who uses it (say claude-desktop); shown in git log."
)
@keys_option
@json_option
def key_add(state: State, mind: str | None, person: bool, label: str, keys_path: Path | None, as_json: bool) -> None:
    """Make a credential for this vault and print its token, once.

    The token is printed alone on stdout (TOKEN=$(memfile key add ...) works);
    only its hash is kept. git log names LABEL in each commit made with it.

    Example: memfile --vault ~/mind key add --mind michael --name claude-desktop

    Example: memfile key add --person --name michael-laptop
    """
    if person == (mind is not None):
        raise InvalidInput(
            "credential kind",
            "both --mind and --person" if person else None,
            "exactly one of --mind NAME (an agent's Mind Key) or --person (a person's token)",
        )
    root = find_vault(state.vault_path)
    key, token = KeyStore(keys_path).add(PERSON if person else AGENT, label, root, mind)
    if as_json:
        print_json({**key.to_dict(), "token": token})
    else:
        click.echo(token)
    what = f"a Mind Key for the mind {key.mind}" if key.kind == AGENT else "a person's token for every mind"
    click.echo(
        f"memfile: made {what} of {key.vault}: id {key.id}, name {key.label}.\n"
        "memfile: this token is shown only now and cannot be shown again; keep it secret.\n"
        "memfile: use it against `memfile serve` as the header: Authorization: Bearer TOKEN",
        err=True,
    )


def _line(key: Key) -> str:
    return f"{key.id}  {key.label}  {key.kind}  {key.mind or '-'}  {key.created_at}"


@key_group.command(name="list")
@click.option("--all", "every", is_flag=True, help="List the keys of every vault, each with its vault.")
@keys_option
@json_option
def key_list(state: State, every: bool, keys_path: Path | None, as_json: bool) -> None:
    """List this vault's keys: id, name, kind, mind and date (never a hash).

    Example: memfile --vault ~/mind key list
    """
    store = KeyStore(keys_path)
    keys = store.list(None if every else find_vault(state.vault_path))
    if as_json:
        print_json([key.to_dict() for key in keys])
        return
    if not keys:
        scope = "" if every else " for this vault"
        click.echo(f"no keys{scope} in {store.path}; make one with: memfile key add --mind NAME --name LABEL", err=True)
    for key in keys:
        click.echo(_line(key) + (f"  {key.vault}" if every else ""))


@key_group.command(name="revoke")
@click.argument("key_id", metavar="ID")
@keys_option
@json_option
def key_revoke(state: State, key_id: str, keys_path: Path | None, as_json: bool) -> None:
    """Remove a key: its token stops working at the next request.

    ID is the key's id from memfile key list (of any vault).

    Example: memfile key revoke k3x9q2ab
    """
    key = KeyStore(keys_path).revoke(key_id)
    if as_json:
        print_json(key.to_dict())
    else:
        click.echo(f"revoked {_line(key)}  {key.vault}")
