"""`tailtune analyze`: characterize a trace with Spark into summary.json, tables and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


def analyze(
    out: Annotated[Path, typer.Option("--out", help="Output folder (replaced atomically).")],
    file: Annotated[Path | None, typer.Argument(help="Canonical Parquet/CSV file or Parquet folder.")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Stored dataset id.")] = None,
    spark_master: Annotated[
        str | None, typer.Option("--spark-master", help="Spark master URL (default: settings.spark_master).")
    ] = None,
    servers: Annotated[int, typer.Option("--servers", help="Servers on the hash ring (fan-out).")] = 16,
    replication: Annotated[int, typer.Option("--replication", help="Replication factor.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json on stdout.")] = False,
) -> None:
    """Characterize a trace: multiget sizes, key popularity, value sizes, arrivals, fan-out, slack bounds."""
    from analysis.pipeline import STEPS, Options
    from base.console import out_console, print_json, progress
    from base.errors import BadInputError
    from base.settings import get_settings
    from jobs.characterize import REPORT_STEP, run

    if (dataset is None) == (file is None):
        raise BadInputError.single("command line", "give exactly one of --dataset ID or FILE")
    target = dataset if dataset is not None else str(file)
    settings = get_settings()
    spark_log = settings.home_dir / "logs" / "analyze.log"  # Spark's and the JVM's own lines, not the terminal's
    steps = (*STEPS, REPORT_STEP)
    with progress() as bar:
        task = bar.add_task("starting Spark", total=len(steps))

        def on_step(name: str) -> None:
            bar.update(task, completed=steps.index(name), description=f"analyze: {name}")

        doc = run(target, out, dataset=dataset is not None, settings=settings, master=spark_master,
                  opts=Options(servers=servers, replication=replication), on_step=on_step, spark_log=spark_log)
        bar.update(task, completed=len(steps))
    if as_json:
        print_json(doc)
        return
    out_console.print(f"wrote {out}/summary.json, {out}/report.html, {out}/tables/ (Spark's log: {spark_log})",
                      highlight=False)
    for line in doc["findings"]:
        out_console.print(f"• {line}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
