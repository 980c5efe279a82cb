"""CLI subcommands. Each module has `register(app)`; add a module here only when its command works."""

from __future__ import annotations

from collections.abc import Callable

import typer

__all__ = ["COMMANDS"]

COMMANDS: list[Callable[[typer.Typer], None]] = []
