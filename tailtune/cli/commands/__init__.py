"""CLI subcommands. Each module has `register(app)`; `COMMANDS` lists them in the order `--help` shows."""

from __future__ import annotations

from collections.abc import Callable

import typer

from tailtune.cli.commands import (
    analyze,
    capture,
    datasets,
    deployments,
    generate,
    ingest,
    replay,
    serve,
    simulate,
    tune,
    worker,
)

__all__ = ["COMMANDS"]

COMMANDS: tuple[Callable[[typer.Typer], None], ...] = (
    analyze.register,
    ingest.register,
    capture.register,
    datasets.register,
    generate.register,
    simulate.register,
    tune.register,
    replay.register,
    serve.register,
    worker.register,
    deployments.register,
)
