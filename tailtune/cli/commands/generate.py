"""`tailtune generate --profile P --requests N --seed S [--out FILE] [--rate R] [--option k=v]... [--json]`"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["PROFILE_NAMES", "register"]

#: For --help only (importing the profiles would pull numpy into CLI start-up); a test keeps it in sync.
PROFILE_NAMES = ("soundcloud", "facebook", "constant50", "bimodal", "mice-elephant", "diurnal")


def generate(
    profile: Annotated[str, typer.Option("--profile", "-p", help=f"One of: {', '.join(PROFILE_NAMES)}.")],
    requests: Annotated[int, typer.Option("--requests", "-n", help="Number of multiget requests.")] = 100_000,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Random seed (same seed → identical file).")] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output file: .csv, .csv.gz, .csv.zst or .parquet "
            "(default: TAILTUNE_HOME/traces/PROFILE-nREQUESTS-sSEED.parquet).",
        ),
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Mean arrival rate, requests/s (default: 1000).")
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", help="Profile option KEY=VALUE (repeatable); see docs/profiles.md."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Generate a synthetic multiget trace in the canonical long format."""
    from base.console import print_json, progress
    from base.settings import get_settings
    from ingest.generate import make_profile, parse_option_strings, write_trace

    options = parse_option_strings(option or [])
    prof = make_profile(profile, options)  # bad profile or option: exit 2 before anything is created
    if out is None:
        out = get_settings().home_dir / "traces" / f"{profile}-n{requests}-s{seed}.parquet"
    with progress() as bar:
        task = bar.add_task(f"generate {profile}", total=max(requests, 0))
        stats = write_trace(
            out, prof, requests, seed, rate=rate, on_progress=lambda done: bar.update(task, completed=done)
        )
    summary = stats.as_dict()
    if as_json:
        print_json(summary)
    else:
        _print_summary(summary)


def _print_summary(s: dict[str, Any]) -> None:
    from rich.table import Table

    from base.console import out_console

    exp = s["expected"]
    table = Table("", "measured", "model", title=f"{s['profile']} trace → {s['out']}", title_justify="left")
    table.add_row("rows (key accesses)", f"{s['rows']:,}", "")
    table.add_row("requests", f"{s['requests']:,}", "")
    table.add_row("mean multiget size", f"{s['mean_size']:.3f}", f"{exp['mean_size']:.3f}")
    table.add_row("multi-key fraction", f"{s['multi_key_fraction']:.4f}", f"{exp['multi_key_fraction']:.4f}")
    table.add_row("max multiget size", f"{s['max_size']:,}", f"≤ {exp['max_size']:,.0f}")
    table.add_row("distinct keys", f"{s['distinct_keys']:,}", "")
    table.add_row("time span", f"{s['duration_s']:.1f} s at {s['rate']:g} req/s", "")
    table.add_row("file", f"{s['format']}, {s['bytes']:,} bytes", "")
    table.add_row("speed", f"{s['rows_per_s']:,.0f} rows/s ({s['elapsed_s']:.2f} s)", "")
    out_console.print(table)


def register(app: typer.Typer) -> None:
    app.command("generate")(generate)
