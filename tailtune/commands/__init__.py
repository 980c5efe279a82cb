"""CLI subcommands. Each module has `register(app)`; add a module here only when its command works."""

from __future__ import annotations

from collections.abc import Callable

import typer

__all__ = ["COMMANDS"]

COMMANDS: list[Callable[[typer.Typer], None]] = []

from tailtune.commands import analyze as _analyze  # noqa: E402

COMMANDS.append(_analyze.register)

from tailtune.commands import datasets as _datasets  # noqa: E402
from tailtune.commands import ingest as _ingest  # noqa: E402

COMMANDS.append(_ingest.register)
COMMANDS.append(_datasets.register)

from tailtune.commands import generate as _generate  # noqa: E402

COMMANDS.append(_generate.register)

from tailtune.commands import simulate as _simulate  # noqa: E402

COMMANDS.append(_simulate.register)

from tailtune.commands import tune as _tune  # noqa: E402

COMMANDS.append(_tune.register)

from tailtune.commands import serve as _serve  # noqa: E402
from tailtune.commands import worker as _worker  # noqa: E402

COMMANDS.append(_serve.register)
COMMANDS.append(_worker.register)
