"""The `tailtune` command: one Typer app; each subcommand lives in `tailtune/cli/commands/<name>.py`.

Command modules import their heavy dependencies (pyarrow, pyspark, optuna, ...) inside the command body, so that
`tailtune --help` and every other command start fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import click
import typer

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
        err_console.print(f"[bold red]{prefix}[/]{line}", highlight=False, markup=True, soft_wrap=True)
    if exc.hint:
        err_console.print(f"[yellow]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: expected errors become one clear message and an exit code."""
    try:
        app(args=argv, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TailtuneError as exc:
        if _state["debug"]:
            raise
        _report(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
