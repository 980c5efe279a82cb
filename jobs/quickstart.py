"""The main job on embedded defaults (the README's first command runs it).

Today: generate a bundled `soundcloud`-profile trace, ingest it into TAILTUNE_HOME, print the dataset summary.
Later stages (analysis → tuning → recommendation) extend this same job.
"""

from __future__ import annotations

import argparse
import sys

from ingest.generate import write_trace
from ingest.pipeline import ingest_file
from tailtune.console import err_console, out_console
from tailtune.errors import TailtuneError
from tailtune.settings import get_settings

__all__ = ["main", "run"]


def run(*, profile: str = "soundcloud", requests: int = 20_000, seed: int = 1) -> str:
    """Generate → ingest; returns the dataset id."""
    settings = get_settings()
    settings.tmp_dir.mkdir(parents=True, exist_ok=True)
    trace = settings.home_dir / "demo" / f"{profile}-{requests}-seed{seed}.parquet"
    trace.parent.mkdir(parents=True, exist_ok=True)
    out_console.rule(f"[bold]tailtune quickstart[/] — TAILTUNE_HOME={settings.home_dir}")
    out_console.print(f"1/2 generate: profile [cyan]{profile}[/], {requests:,} requests, seed {seed} → {trace}")
    write_trace(trace, profile, requests, seed)
    out_console.print("2/2 ingest")
    info = ingest_file(trace, settings=settings)
    m = info.manifest
    out_console.print(
        f"\n[bold green]dataset {info.id}[/] ({info.name}): {m['rows']:,} rows, {m['requests']:,} requests, "
        f"{m['distinct_keys']:,} distinct keys, span {m['ts_max'] - m['ts_min']:.1f} s"
    )
    out_console.print(f"next: [bold].venv/bin/tailtune datasets show {info.id}[/]")
    return info.id


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="soundcloud")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        run(profile=args.profile, requests=args.requests, seed=args.seed)
    except TailtuneError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
