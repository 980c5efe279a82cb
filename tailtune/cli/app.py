"""The `tailtune` command: one Typer app; each subcommand lives in `tailtune/cli/commands/<name>.py`.

Command modules import their heavy dependencies (pyarrow, pyspark, optuna, ...) inside the command body, so that
`tailtune --help` and every other command start fast.
"""

from __future__ import annotations

import errno
import math
import re
import sys
from typing import Annotated

import click
import typer
from rich.markup import escape

from base.console import err_console
from base.errors import TailtuneError
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


def _elide(text: str) -> str:
    """`text` with every run of more than 200 characters without a space shortened in the middle (a 5000-character
    path or number on the command line is named, not echoed whole)."""
    return re.sub(r"\S{201,}", lambda m: f"{m[0][:120]}…{m[0][-60:]}", text)


def _report(exc: TailtuneError) -> None:
    for i, line in enumerate(_elide(str(exc)).splitlines()):
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
    message = _elide(" ".join(exc.format_message().split()))
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
    except Exception as exc:  # not an expected error: still one line (the traceback with --debug)
        if _state["debug"] or debug:
            raise
        code, line = _unexpected(exc, args)
        err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, markup=True, soft_wrap=True)
        sys.exit(code)


#: OS errors that an input names (a path too long, missing, a folder, not allowed): bad input, exit 2.
_INPUT_ERRNOS = frozenset(
    getattr(errno, n) for n in ("ENAMETOOLONG", "ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "ELOOP", "EINVAL")
)


def _too_large(args: list[str]) -> str | None:
    """The option whose number is too large for the machine's integers or floats (what an OverflowError came from)."""
    for i, arg in enumerate(args):
        try:
            big = abs(int(arg)) >= 2**63
        except ValueError:
            try:
                big = not math.isfinite(float(arg))
            except ValueError:
                big = False
        if big and arg.lower().lstrip("+-") not in ("nan",):
            option = args[i - 1] if i > 0 and args[i - 1].startswith("-") else "command line"
            return f"{option}: {_elide(arg)} is too large a number (at most 2^63 - 1, or a finite float)"
    return None


def _unexpected(exc: Exception, args: list[str]) -> tuple[int, str]:
    """The exit code and the one line of an exception no command turned into a TailtuneError: a path the input
    named that the OS refuses (or a NUL byte in one), a number too large for the machine, are bad input (2);
    anything else an internal error (1)."""
    def short(value: object) -> str:
        return _elide(" ".join(str(value).split()))

    if isinstance(exc, OSError) and exc.errno in _INPUT_ERRNOS:
        where = f"{short(exc.filename)}: " if exc.filename is not None else ""
        return 2, f"{where}{exc.strerror or short(exc)}"
    if isinstance(exc, OverflowError) and (line := _too_large(args)) is not None:
        return 2, line
    kvsim = sys.modules.get("kvsim")
    if kvsim is not None and isinstance(exc, kvsim.ParameterError):  # the simulator's own range check of an input
        return 2, short(exc)
    if isinstance(exc, ValueError) and "null byte" in str(exc):
        return 2, "a path or name contains a NUL byte"
    return 1, f"internal error: {type(exc).__name__}: {short(exc)} (run with --debug for the traceback)"


if __name__ == "__main__":
    main()
