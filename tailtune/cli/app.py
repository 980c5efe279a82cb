"""The `tailtune` command: one Typer app; each subcommand lives in `tailtune/cli/commands/<name>.py`.

Command modules import their heavy dependencies (pyarrow, pyspark, optuna, ...) inside the command body, so that
`tailtune --help` and every other command start fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import click
import typer
from rich.markup import escape

from tailtune.base.console import err_console
from tailtune.base.errors import TailtuneError
from tailtune.cli.commands import COMMANDS

__all__ = ["app", "main"]

app = typer.Typer(
    name="tailtune",
    help="Tune multiget schedulers for Cassandra and memcached against a trace-driven simulator.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_state: dict[str, bool] = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    _state["debug"] = debug


for _register in COMMANDS:
    _register(app)


def _report(exc: TailtuneError) -> None:
    for i, line in enumerate(str(exc).splitlines()):
        prefix = "error: " if i == 0 else "       "
        err_console.print(f"[bold red]{prefix}[/]{escape(line)}", highlight=False, markup=True, soft_wrap=True)
    if exc.hint:
        err_console.print(f"[yellow]hint:[/] {escape(exc.hint)}", highlight=False, soft_wrap=True)


def _usage_line(exc: typer.TyperException | click.ClickException, args: list[str]) -> str:
    """One line for a usage error: the command, what is wrong, and where to look."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "tailtune"
    if path == "tailtune":  # an option's value was missing before the subcommand's context existed
        names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
        sub = next((a for a in args if not a.startswith("-")), None)
        if sub in names:
            path = f"tailtune {sub}"
    message = " ".join(exc.format_message().split())
    return f"{path}: {message[:1].lower()}{message[1:]} (see '{path} --help')"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: expected errors become one clear message and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        app(args=args, standalone_mode=False)
    except (click.exceptions.Exit, typer.Exit) as exc:
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, typer.Abort):
        err_console.print("aborted")
        sys.exit(130)
    except (click.ClickException, typer.TyperException) as exc:
        if debug:
            raise
        err_console.print(
            f"[bold red]error:[/] {escape(_usage_line(exc, args))}", highlight=False, markup=True, soft_wrap=True
        )
        sys.exit(2)
    except TailtuneError as exc:
        if _state["debug"] or debug:
            raise
        _report(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
