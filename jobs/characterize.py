"""The characterization job: dataset → summary.json + tables/*.parquet + report.html (written atomically).

    python -m jobs.characterize (--dataset ID | FILE) --out DIR [--spark-master URL] [--servers N]
                                [--replication RF]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from analysis.pipeline import Options
    from base.settings import Settings

__all__ = ["REPORT_STEP", "main", "run", "spark_session"]

#: The step after the characterization's (`run`'s `on_step`).
REPORT_STEP = "writing the report"


def spark_session(master: str, app_name: str = "tailtune-characterize", *, log_file: Path | None = None
                  ) -> SparkSession:
    """A SparkSession on `master` (local[*] or spark://host:port), with the settings of docs/analysis.md.

    With `log_file`, a JVM started here writes everything it prints (Spark's log4j console lines, the JVM's own
    warnings) to that file, appended, instead of the terminal. A session already running is returned as it is.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(app_name)
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.memory", "4g")  # local mode: the executors live in the driver JVM
        .set("spark.sql.shuffle.partitions", "8")
        .set("spark.sql.adaptive.enabled", "true")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.execution.arrow.pyspark.enabled", "true")
        # the first-level "fast" aggregation hash map (65 536 slots, full key compares on every probe) only
        # adds cache misses when most keys miss it, as the per-key and per-request aggregations' do
        .set("spark.sql.codegen.aggregate.map.twolevel.enabled", "false")
        # the aggregation hash maps are random-access over ~100 MB: huge pages cut TLB misses (a no-op
        # where the OS has no transparent huge pages; the JVM then prints one warning)
        .set("spark.driver.extraJavaOptions", "-XX:+UseTransparentHugePages")
        .set("spark.executor.extraJavaOptions", "-XX:+UseTransparentHugePages")
    )
    if log_file is not None and SparkContext._gateway is None:  # no JVM yet: this call starts it
        from pyspark.java_gateway import launch_gateway

        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as log:  # the JVM keeps its own descriptors of the file
            streams = {"stdout": log, "stderr": log}
            try:
                gateway = launch_gateway(conf, popen_kwargs=streams)  # type: ignore[no-untyped-call]
            except Exception as exc:
                raise RuntimeError(f"{exc} (the JVM's output is in {log_file})") from exc
        SparkContext(conf=conf, gateway=gateway)
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run(
    target: str, out: Path, *, dataset: bool, settings: Settings, master: str | None = None,
    opts: Options | None = None, on_step: Callable[[str], None] | None = None, spark_log: Path | None = None,
) -> dict[str, Any]:
    """Characterize `target` (a dataset id when `dataset`, else a file path) into `out`; returns summary.
    `on_step(name)`: each step of `analysis.pipeline.STEPS` as it starts, then "writing the report".
    `spark_log`: where a Spark JVM started for this run prints (`spark_session`'s `log_file`)."""
    from analysis import inputs
    from analysis.output import write_outputs
    from analysis.pipeline import Options, characterize
    from analysis.report import render_report
    from analysis.summary import build_summary
    from base.errors import BadInputError
    from control.storage import raise_if_disk_full

    opts = replace(opts or Options(), fanout_requests=settings.analysis_fanout_requests)
    if opts.servers < 1:
        raise BadInputError.single("command line", "must be >= 1", field="servers")
    if not 1 <= opts.replication <= opts.servers:
        raise BadInputError.single("command line", f"must be in 1..{opts.servers} (servers)",
                                   field="replication")
    src = inputs.dataset_source(target, settings) if dataset else inputs.file_source(Path(target))
    spark = spark_session(master or settings.spark_master, log_file=spark_log)
    c = characterize(spark, inputs.load(spark, src), opts, source=src.label, on_step=on_step)
    if on_step is not None:
        on_step(REPORT_STEP)
    doc = build_summary(c)
    tables = c.tables()
    try:
        write_outputs(out, settings.tmp_dir, doc, tables, render_report(doc, tables))
    except OSError as exc:
        raise_if_disk_full(exc, settings)
        raise
    return doc


def main(argv: list[str] | None = None) -> int:
    from analysis.pipeline import Options
    from base.errors import TailtuneError
    from base.settings import get_settings

    ap = argparse.ArgumentParser(prog="python -m jobs.characterize", description=__doc__)
    ap.add_argument("file", nargs="?", help="canonical Parquet/CSV file (or folder of Parquet files)")
    ap.add_argument("--dataset", help="stored dataset id")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--spark-master")
    ap.add_argument("--servers", type=int, default=Options().servers)
    ap.add_argument("--replication", type=int, default=Options().replication)
    a = ap.parse_args(argv)
    if (a.dataset is None) == (a.file is None):
        ap.error("give exactly one of --dataset ID or FILE")
    try:
        run(a.dataset or a.file, a.out, dataset=a.dataset is not None, settings=get_settings(),
            master=a.spark_master, opts=Options(servers=a.servers, replication=a.replication))
    except TailtuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(a.out / "summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
