"""`tailtune ingest FILE`: a trace file (or a full query log directory) → a canonical dataset (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ingest.store import DatasetInfo

__all__ = ["dataset_summary", "register"]


def _parse_map(items: list[str]) -> dict[str, str]:
    from base.errors import BadInputError

    out: dict[str, str] = {}
    for item in items:
        column, sep, fld = item.partition("=")
        if not sep or not column or not fld:
            raise BadInputError.single("command line", f"--map expects COLUMN=FIELD, got '{item}'")
        out[column.strip()] = fld.strip()
    return out


def dataset_summary(info: DatasetInfo) -> dict[str, Any]:
    """The short summary printed by `ingest` and `datasets show` (also their --json output)."""
    m = info.manifest
    return {
        "id": info.id,
        "name": info.name,
        "reused": info.reused,
        "path": str(info.path),
        "format": m["source"]["format"],
        "layout": m["source"].get("layout"),
        "compression": m["source"]["compression"],
        "detected": m["source"].get("detected"),
        "rows": m["rows"],
        "requests": m["requests"],
        "distinct_keys": m["distinct_keys"],
        "ts_min": m["ts_min"],
        "ts_max": m["ts_max"],
        "span_s": m["ts_max"] - m["ts_min"],
        "multiget_mean": m["multiget"]["mean"],
        "multiget_max": m["multiget"]["max"],
        "has_value_size": m["has_value_size"],
        "has_latency": m["has_latency"],
        "skipped_rows": m["errors"]["skipped_rows"],
        "warnings": list(m.get("warnings", [])),
        **({"nodes": _nodes(m["nodes"])} if "nodes" in m else {}),
    }


def _nodes(entry: dict[str, Any]) -> dict[str, Any]:
    """Several nodes' logs: each node's requests, the likely duplicates, what the nodes without a log leave out."""
    out: dict[str, Any] = {
        "logs": {log["name"]: log["requests"] for log in entry["logs"]},
        "likely_duplicates": entry["duplicates"]["likely"],
        "duplicate_window_ms": entry["duplicates"]["window_ms"],
    }
    if "missing" in entry:
        out["missing"] = entry["missing"]
    return out


def print_summary(summary: dict[str, Any], *, title: str) -> None:
    from rich.table import Table

    from base.console import out_console

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    fmt = summary["format"] + (f" ({summary['layout']})" if summary.get("layout") else "")
    if summary.get("compression") not in (None, "none"):
        fmt += f", {summary['compression']}"
    rows = [
        ("id", summary["id"]),
        ("name", summary["name"]),
        ("format", fmt),
        ("rows", f"{summary['rows']:,}"),
        ("requests", f"{summary['requests']:,}"),
        ("distinct keys", f"{summary['distinct_keys']:,}"),
        ("time span", f"{summary['span_s']:.3f} s ({summary['ts_min']} … {summary['ts_max']})"),
        ("multiget size", f"mean {summary['multiget_mean']:.2f}, max {summary['multiget_max']:,}"),
        ("value sizes", "yes" if summary["has_value_size"] else "unknown"),
        ("latency", "yes" if summary["has_latency"] else "no"),
    ]
    nodes = summary.get("nodes")
    if nodes is not None:
        rows.append(("nodes", ", ".join(f"{n} ({r:,} requests)" for n, r in nodes["logs"].items())))
        rows.append(
            ("likely duplicates", f"{nodes['likely_duplicates']:,} (kept; within {nodes['duplicate_window_ms']} ms)")
        )
        missing = nodes.get("missing")
        if missing is not None:
            lost = (
                f"{missing['missing_nodes']} of {missing['cluster_nodes']} nodes, ~{missing['missing_share']:.0%} "
                f"(~{missing['estimated_missing_requests']:,} requests)"
                if missing["missing_nodes"]
                else "none (every node's log)"
            )
            rows.append(("missing", lost))
    if summary.get("skipped_rows"):
        rows.append(("skipped rows", f"{summary['skipped_rows']:,} (--on-error skip)"))
    for k, v in rows:
        table.add_row(k, str(v))
    out_console.print(table)


def _format_help() -> str:
    from ingest.formats import format_choices

    return ", ".join(format_choices()) + "."


def ingest(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...",
            help="Trace file (gz/zst/xz/bz2 are decompressed transparently), or a Cassandra full query log directory; "
            "or one full query log per node of a cluster, merged into one dataset with a `node` column: several "
            "NODE=PATH or PATH (named after its directory), or one directory holding a log directory per node.",
        ),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help=_format_help(),
        ),
    ] = "auto",
    name: Annotated[str | None, typer.Option("--name", help="Dataset name (default: the file name).")] = None,
    mapping: Annotated[
        list[str] | None, typer.Option("--map", help="Rename a column: COLUMN=FIELD (repeatable).")
    ] = None,
    group_window_s: Annotated[
        float | None,
        typer.Option("--group-window-s", help="Single-key traces: same client within W s → one multiget."),
    ] = None,
    group_window_us: Annotated[
        float | None,
        typer.Option(
            "--group-window-us",
            help="The grouping window in µs (as --group-window-s); query logs: a statement's single-partition "
            "reads within it → one multiget (default 1000).",
        ),
    ] = None,
    no_grouping: Annotated[
        bool, typer.Option("--no-grouping", help="Query logs: every single-partition read is its own request.")
    ] = False,
    tables: Annotated[
        list[str] | None,
        typer.Option("--table", help="Query logs: keep only this table, KEYSPACE.TABLE (repeatable)."),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option("--schema", help="Query logs: CQL file with the tables' CREATE TABLE (cqlsh DESCRIBE output)."),
    ] = None,
    max_errors: Annotated[int, typer.Option("--max-errors", help="Problems listed before stopping.")] = 20,
    on_error: Annotated[str, typer.Option("--on-error", help="fail (exit 2) or skip bad rows.")] = "fail",
    unsorted: Annotated[
        str, typer.Option("--unsorted", help="Out-of-order ts: reject (exit 2) or sort (extra pass).")
    ] = "reject",
    rate: Annotated[
        float, typer.Option("--rate", help="Accesses/s used to synthesize ts for formats without time.")
    ] = 1000.0,
    watch_gap_us: Annotated[
        int | None,
        typer.Option(
            "--watch-gap-us",
            help="memcached-watch: fetches of one connection at most this many µs apart form one request. "
            "Default: TAILTUNE_MEMCACHED_WATCH_GAP_US.",
        ),
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            help="Query logs: the cluster's node count; with fewer nodes' logs, the summary says what the missing "
            "ones leave out.",
        ),
    ] = None,
    duplicate_window_ms: Annotated[
        int | None,
        typer.Option(
            "--duplicate-window-ms",
            help="Several nodes' logs: the same statement and values on another node at most this many ms later "
            "count as a likely duplicate (kept, reported). Default: TAILTUNE_FQL_DUPLICATE_WINDOW_MS.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    max_decompressed_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-decompressed-bytes",
            help="Cap on the bytes the input decompresses to (e.g. 64G; 0: none). Default: none.",
        ),
    ] = None,
    max_compression_ratio: Annotated[
        float | None,
        typer.Option("--max-compression-ratio", help="Cap on decompressed/compressed bytes (0: none). Default: none."),
    ] = None,
    max_rows: Annotated[
        int | None, typer.Option("--max-rows", help="Cap on the dataset's rows (0: none). Default: none.")
    ] = None,
    max_line_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-line-bytes",
            help="Cap on one line's bytes (e.g. 4M; 0: none). Default: TAILTUNE_INGEST_MAX_LINE_BYTES.",
        ),
    ] = None,
    max_columns: Annotated[
        int | None,
        typer.Option(
            "--max-columns", help="Cap on a header's columns (0: none). Default: TAILTUNE_INGEST_MAX_COLUMNS."
        ),
    ] = None,
    upload_limits: Annotated[
        bool,
        typer.Option(
            "--upload-limits",
            help="Start from the caps the service applies to uploads (all TAILTUNE_INGEST_MAX_* settings).",
        ),
    ] = False,
) -> None:
    """Ingest a trace file into a canonical, validated dataset (same bytes → same dataset id).

    Caps (docs/operations.md § Limits): a local file gets the line and column caps of the settings and no cap on
    decompressed bytes, compression ratio or rows, unless given here; --upload-limits starts from the service's.
    """

    from base.console import err_console, progress
    from base.errors import BadInputError
    from base.settings import get_settings
    from ingest.formats.cassandra_fql.nodes import node_logs
    from ingest.limits import Limits, parse_size
    from ingest.pipeline import ingest_file, ingest_node_logs
    from ingest.sniff import sniff

    settings = get_settings()
    base = Limits.from_settings(settings) if upload_limits else Limits.local(settings)
    def bytes_option(text: str | None, option: str) -> int | None:
        return parse_size(text, option) if text is not None else None

    limits = base.with_overrides(
        max_decompressed_bytes=bytes_option(max_decompressed_bytes, "--max-decompressed-bytes"),
        max_compression_ratio=max_compression_ratio,
        max_rows=max_rows,
        max_line_bytes=bytes_option(max_line_bytes, "--max-line-bytes"),
        max_columns=max_columns,
    )
    renames = _parse_map(mapping or [])
    if group_window_us is not None:
        if group_window_s is not None:
            raise BadInputError.single("command line", "give --group-window-s or --group-window-us, not both")
        group_window_s = group_window_us / 1e6
    common: dict[str, Any] = {
        "fmt": fmt,
        "name": name,
        "group_window_s": group_window_s,
        "no_grouping": no_grouping,
        "tables": tuple(tables or ()),
        "schema_file": schema,
        "max_errors": max_errors,
        "on_error": on_error,
        "settings": settings,
        "limits": limits,
    }
    logs = node_logs(files)
    if logs is not None:
        given = [flag for flag, value in (("--map", renames), ("--watch-gap-us", watch_gap_us)) if value]
        if given or unsorted != "reject" or rate != 1000.0:
            what = ", ".join(given or ["--unsorted/--rate"])
            raise BadInputError.single("command line", f"{what} do(es) not apply to nodes' query logs")
        info = ingest_node_logs(
            logs, cluster_nodes=nodes, duplicate_window_ms=duplicate_window_ms, **common
        )
        _report(info, as_json)
        return
    if nodes is not None or duplicate_window_ms is not None:
        raise BadInputError.single(
            "command line", "--nodes and --duplicate-window-ms are for nodes' query logs (several, or a directory of "
            "them)"
        )
    file = Path(files[0])
    if fmt == "auto" and (file.is_file() or file.is_dir()):
        chosen = sniff(file, renames, limits)
        err_console.print(f"format: [bold]{chosen.format}[/] (auto: {chosen.reason})", highlight=False)
    size = file.stat().st_size if file.is_file() else 0
    with progress() as bar:
        task = bar.add_task("ingest", total=size, visible=size > 64 << 20)

        def on_progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        info = ingest_file(
            file,
            mapping=renames,
            unsorted=unsorted,
            rate=rate,
            watch_gap_us=watch_gap_us,
            progress=on_progress,
            **common,
        )
    _report(info, as_json)


def _report(info: DatasetInfo, as_json: bool) -> None:
    from rich.markup import escape

    from base.console import err_console, print_json

    summary = dataset_summary(info)
    for warning in summary["warnings"]:
        err_console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    if as_json:
        print_json(summary)
        return
    if info.reused:
        err_console.print(f"already ingested: same bytes and options as dataset {info.id}; nothing written")
    print_summary(summary, title="dataset" + (" (already ingested)" if info.reused else ""))


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
