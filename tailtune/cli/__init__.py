"""The `tailtune` command line: the top layer. `app` is the Typer app; `main` the console script's entry point."""

from __future__ import annotations

from tailtune.cli.app import app, main

__all__ = ["app", "main"]
