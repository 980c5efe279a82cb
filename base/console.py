"""Shared rich consoles and progress bars: stdout for results, stderr for progress and errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["counts_progress", "err_console", "library_output_to", "out_console", "print_json", "progress"]

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


@contextmanager
def library_output_to(path: Path) -> Iterator[Path]:
    """While the block runs, whatever is written to the process's stderr — Python warnings, library logging
    (MLflow, Optuna, ...), a JVM or native code started meanwhile — goes to `path` (truncated first), not the
    terminal. tailtune's own lines still reach it: results on stdout (`out_console`), progress and errors on the
    terminal's stderr (`err_console`). Restored on exit, before an exception propagates.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal_fd = os.dup(2)
    terminal = os.fdopen(os.dup(terminal_fd), "w", encoding="utf-8", errors="replace", buffering=1)
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    previous = err_console._file
    try:
        os.dup2(log_fd, 2)
        err_console.file = terminal
        yield path
    finally:
        sys.stderr.flush()
        os.dup2(terminal_fd, 2)
        err_console._file = previous
        for fd in (log_fd, terminal_fd):
            os.close(fd)
        terminal.close()


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
