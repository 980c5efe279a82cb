"""`tailtune capture memcached HOST:PORT [HOST:PORT ...] [--duration S] --out FILE`: record what memcached's watch
shows as a `memcached-watch` trace file (`kinds.memcached.capture`; docs/formats.md § memcached-watch), then
`tailtune ingest FILE`."""

from __future__ import annotations

import math
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from kinds.memcached.capture import CaptureResult

__all__ = ["register"]

_app = typer.Typer(help="Record a trace from a live system (memcached's watch).", no_args_is_help=True)


def _stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    """Ctrl-C (and SIGTERM) set `stop`: the capture ends cleanly and keeps its file. A second one aborts."""
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        signal.signal(signum, previous[signum])

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _summary(result: CaptureResult) -> None:
    from rich.table import Table

    from base.console import out_console

    table = Table(title="capture", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    lost = f"{result.lost:,}"
    if result.lost:
        lost += f" (memcached skipped {result.skipped:,}, its worker threads dropped {result.dropped:,})"
    for k, v in (
        ("file", result.out),
        ("servers", ", ".join(result.servers)),
        ("captured", f"{result.seconds:.1f} s ({result.stopped})"),
        ("watch lines", f"{result.lines:,}"),
        ("fetches", f"{result.fetches:,}"),
        ("requests", f"{result.requests:,} (grouped with a {result.gap_us} µs gap, as `tailtune ingest` will)"),
        ("stores", f"{result.stores:,} (not part of the trace)"),
        ("lost lines", lost),
        ("bytes", f"{result.bytes:,}"),
    ):
        table.add_row(k, v)
    out_console.print(table)


@_app.command("memcached")
def memcached(
    servers: Annotated[list[str], typer.Argument(help="HOST:PORT of each memcached server to watch.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The trace file to write (memcached-watch format).")],
    duration: Annotated[
        float | None, typer.Option("--duration", help="Seconds to capture. Default: until Ctrl-C.")
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes",
            help="Stop once the file holds this many bytes (e.g. 512M; 0: none). Default: TAILTUNE_CAPTURE_MAX_BYTES.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Watch memcached (`watch fetchers mutations`) and write what it shows as a memcached-watch trace.

    Ctrl-C stops the capture and keeps what it wrote. Lines memcached lost under load are counted and reported,
    never hidden. The keys of one multi-key get/gets become one request when the file is ingested (a heuristic:
    docs/formats.md § memcached-watch).
    """
    from base.console import counts_progress, err_console, print_json
    from base.settings import get_settings
    from control.egress import parse_server
    from ingest.limits import parse_size
    from kinds.memcached.capture import CaptureProgress, CaptureTarget, capture_memcached, stats_caps

    if duration is not None and not math.isfinite(duration):  # <= 0: capture_memcached says so
        from base.errors import BadInputError

        raise BadInputError.single("--duration", f"{duration:g} is not a number of seconds (> 0, finite)",
                                   field="duration")
    settings = get_settings()
    targets = [CaptureTarget(s, *parse_server(s)) for s in servers]
    cap = settings.capture_max_bytes if max_bytes is None else parse_size(max_bytes, "--max-bytes")
    stop = threading.Event()
    previous = _stop_on_signals(stop)
    bar = counts_progress()  # shown once every watch is on (an error before that stays one line)
    task = bar.add_task("capture", total=duration, counts="", start=False)
    started = False

    def ready() -> None:
        nonlocal started
        until = f"for {duration:g} s" if duration is not None else "until Ctrl-C"
        err_console.print(
            f"capturing {', '.join(servers)} {until} (Ctrl-C stops and keeps what was captured)", highlight=False
        )
        bar.start()
        bar.start_task(task)
        started = True

    def show(p: CaptureProgress) -> None:
        counts = f"lines {p.lines:,} · requests {p.requests:,} · lost {p.lost:,}"
        bar.update(task, completed=p.elapsed_s, counts=counts)

    try:
        result = capture_memcached(
            targets,
            out,
            duration_s=duration,
            stop=stop,
            timeout_s=settings.capture_timeout_s,
            max_bytes=cap,
            max_line=settings.capture_max_line_bytes,
            stats_caps=stats_caps(settings),
            gap_us=settings.memcached_watch_gap_us,
            on_ready=ready,
            on_progress=show,
        )
    finally:
        if started:
            bar.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if as_json:
        print_json(result.as_dict())
    else:
        _summary(result)
    if result.lost:
        err_console.print(
            f"[yellow]warning:[/] the watch lost {result.lost:,} line(s) (memcached skipped {result.skipped:,}, its "
            f"worker threads dropped {result.dropped:,}): the trace misses their fetches",
            highlight=False,
        )
    if result.closed:
        err_console.print(
            f"[yellow]warning:[/] {', '.join(result.closed)} closed the watch before the end: its lines stop there",
            highlight=False,
        )
    if result.unreadable:
        err_console.print(
            f"[yellow]warning:[/] {result.unreadable:,} line(s) are not memcached watch lines the ingest can read "
            "(memcached 1.5.17 or newer logs the connection, cfd, that requests are grouped by)",
            highlight=False,
        )
    if result.stopped == "size cap":
        err_console.print(f"[yellow]warning:[/] stopped at the size cap ({cap:,} bytes)", highlight=False)
    err_console.print(f"next: tailtune ingest {out}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(_app, name="capture")
