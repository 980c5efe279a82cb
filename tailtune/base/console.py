"""Shared rich consoles and progress bars: stdout for results, stderr for progress and errors."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["counts_progress", "err_console", "out_console", "print_json", "progress"]

out_console = Console()
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print one JSON document on stdout, unstyled, for scripts."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))


def progress(*, transient: bool = True) -> Progress:
    """A progress bar on stderr (so `--json` output on stdout stays clean); hidden when stderr is not a terminal."""
    return Progress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
    )


def counts_progress(*, transient: bool = True) -> Progress:
    """A progress line on stderr for work measured in time (a bar when its task has a total, e.g. a capture's
    duration) that shows running counts: the task's `counts` field (e.g. "lines 1,234 · requests 300 · lost 0")."""
    return Progress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[counts]}"),
        console=err_console,
        transient=transient,
    )
