"""memfile's own options (`--vault`, `--mind`, `--debug`, `--json`) after the command as well as before it.

`memfile recall --mind lan` is `memfile --mind lan recall`: every command takes the options of `memfile`
itself after its name too (hidden in its --help; `memfile --help` lists them once), where it has none of
its own by that name, and one it cannot take is refused with the reason. `memfile --json COMMAND` is
`memfile COMMAND --json`. The values land in the command line's State (memfile/cli/common.py), whichever side
of the command they were given on; the last one given counts, as in click.
"""

from __future__ import annotations

from typing import Any

import click

#: memfile's own options, which a command takes after its name too (`memfile recall --mind lan`): the
#: field of State each one sets.
GLOBAL_OPTIONS = {"--vault": "vault_path", "--mind": "mind", "--debug": "debug"}
#: Commands that open no vault of --vault or --mind (they take --debug only), and why.
NO_VAULT = {
    "init": "it makes the vault at PATH (its own --mind names the first mind)",
    "clone": "it makes the vault at PATH (its own --mind names the mind to open first)",
    "merge-file": "git runs it on three files, in no vault",
}


def _set_global(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value not in (None, False):
        setattr(ctx.obj, GLOBAL_OPTIONS[param.opts[0]], value)  # the State of `memfile`'s own options


def _take_global_options(command: click.Command) -> None:
    """Let `command` take memfile's own options after its name (those it has none of its own by)."""
    taken = {opt for param in command.params for opt in param.opts}
    for opt in GLOBAL_OPTIONS:
        if opt not in taken and (opt == "--debug" or command.name not in NO_VAULT):
            option = click.Option([opt], is_flag=opt == "--debug", expose_value=False, callback=_set_global)
            option.hidden = True  # listed once, in `memfile --help`
            command.params.append(option)


class MemfileCommand(click.Command):
    """A command that takes memfile's own options after its name as well as before it, and says where an
    option goes that it cannot take."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _take_global_options(self)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:  # say where an option of memfile's own goes
            path, name = ctx.command_path, exc.option_name
            if name == "--json":
                raise click.UsageError(f"{path} has no --json output; see {path} --help", ctx) from None
            if name in GLOBAL_OPTIONS:
                raise click.UsageError(
                    f"{path} takes no {name}: {NO_VAULT.get(ctx.info_name or '', '')}", ctx
                ) from None
            raise


class CommandGroup(click.Group):
    """A group under `memfile` (`memfile key ...`): it and its commands take memfile's own options too."""

    command_class = MemfileCommand

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _take_global_options(self)


def json_by_default(ctx: click.Context) -> None:
    """`memfile --json COMMAND`: the command's own --json, by default."""
    name = ctx.invoked_subcommand or ""
    command = ctx.command.get_command(ctx, name) if isinstance(ctx.command, click.Group) else None
    if isinstance(command, click.Group):
        raise click.UsageError(f"--json goes after the command here: {ctx.command_path} {name} COMMAND --json")
    if command is None or not any(param.name == "as_json" for param in command.params):
        raise click.UsageError(f"{ctx.command_path} {name} has no --json output; see {ctx.command_path} {name} --help")
    ctx.default_map = {name: {"as_json": True}}
