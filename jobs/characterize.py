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
    from analysis.summary import Collected
    from tailtune.base.settings import Settings

__all__ = ["REPORT_STEP", "main", "run", "spark_session"]

#: The step after the characterization's (`run`'s `on_step`).
REPORT_STEP = "writing the report"


def spark_session(master: str, app_name: str = "tailtune-characterize") -> SparkSession:
    """A SparkSession on `master` (local[*] or spark://host:port), with the settings of infra-facts.md."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")  # local mode: the executors live in the driver JVM
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # the first-level "fast" aggregation hash map (65 536 slots, full key compares on every probe) only
        # adds cache misses when most keys miss it, as the per-key and per-request aggregations' do
        .config("spark.sql.codegen.aggregate.map.twolevel.enabled", "false")
        # the aggregation hash maps are random-access over ~100 MB: huge pages cut TLB misses (a no-op
        # where the OS has no transparent huge pages; the JVM then prints one warning)
        .config("spark.driver.extraJavaOptions", "-XX:+UseTransparentHugePages")
        .config("spark.executor.extraJavaOptions", "-XX:+UseTransparentHugePages")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def tables_of(c: Collected) -> dict[str, Any]:
    """The tables written as Parquet next to summary.json."""
    out: dict[str, Any] = {
        "multiget_size_histogram": c.size_hist,
        "key_count_of_counts": c.count_of_counts,
        "top_keys": c.top_keys,
        "value_size_histogram": c.value_size_hist,
        "hot_sets": c.hot_sets,
        "arrival_rate": c.rate,
    }
    optional = {"fanout_histogram": c.fanout_hist, "server_load": c.server_load,
                "latency_deciles": c.latency_deciles, "slack_bounds": c.slack}
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def run(
    target: str, out: Path, *, dataset: bool, settings: Settings, master: str | None = None,
    opts: Options | None = None, on_step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Characterize `target` (a dataset id when `dataset`, else a file path) into `out`; returns summary.
    `on_step(name)`: each step of `analysis.pipeline.STEPS` as it starts, then "writing the report"."""
    from analysis import inputs
    from analysis.output import write_outputs
    from analysis.pipeline import Options, characterize
    from analysis.report import render_report
    from analysis.summary import build_summary
    from tailtune.base.errors import BadInputError

    opts = replace(opts or Options(), fanout_requests=settings.analysis_fanout_requests)
    if opts.servers < 1:
        raise BadInputError.single("command line", "must be >= 1", field="servers")
    if not 1 <= opts.replication <= opts.servers:
        raise BadInputError.single("command line", f"must be in 1..{opts.servers} (servers)",
                                   field="replication")
    src = inputs.dataset_source(target, settings) if dataset else inputs.file_source(Path(target))
    spark = spark_session(master or settings.spark_master)
    c = characterize(spark, inputs.load(spark, src), opts, source=src.label, on_step=on_step)
    if on_step is not None:
        on_step(REPORT_STEP)
    doc = build_summary(c)
    write_outputs(out, settings.tmp_dir, doc, tables_of(c), render_report(c, doc))
    return doc


def main(argv: list[str] | None = None) -> int:
    from analysis.pipeline import Options
    from tailtune.base.errors import TailtuneError
    from tailtune.base.settings import get_settings

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
