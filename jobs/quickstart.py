"""The main job on embedded defaults (the README's first command runs it).

generate a `soundcloud`-profile trace → ingest it into TAILTUNE_HOME → analyze it with Spark (summary.json under
TAILTUNE_HOME/analyses/<id>/, skipped with a note if Spark is unavailable) → tune the Cassandra scheduler with a
small budget (tracked in MLflow) → print the recommendation.

Only tailtune's own lines reach the terminal: what Spark, the JVM, MLflow and other libraries print (log lines,
warnings) goes to TAILTUNE_HOME/logs/demo.log, which the demo names as it starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from base.console import err_console, library_output_to, out_console
from base.errors import TailtuneError
from base.settings import Settings, get_settings
from ingest.generate import write_trace
from ingest.pipeline import ingest_file

__all__ = ["main", "run"]


def run(*, profile: str = "soundcloud", requests: int = 20_000, seed: int = 1, trials: int = 30,
        analyze: bool = True) -> str:
    """Generate → ingest → analyze → tune; returns the dataset id."""
    settings = get_settings()
    log = settings.home_dir / "logs" / "demo.log"
    with library_output_to(log):
        settings.tmp_dir.mkdir(parents=True, exist_ok=True)
        trace = settings.home_dir / "demo" / f"{profile}-{requests}-seed{seed}.parquet"
        trace.parent.mkdir(parents=True, exist_ok=True)
        out_console.rule(f"[bold]tailtune quickstart[/] — TAILTUNE_HOME={settings.home_dir}")
        out_console.print(f"Messages from Spark and other libraries go to {log}", highlight=False)
        out_console.print(f"1/4 generate: profile [cyan]{profile}[/], {requests:,} requests, seed {seed} → {trace}")
        write_trace(trace, profile, requests, seed)
        out_console.print("2/4 ingest")
        info = ingest_file(trace, settings=settings)
        m = info.manifest
        out_console.print(
            f"\n[bold green]dataset {info.id}[/] ({info.name}): {m['rows']:,} rows, {m['requests']:,} requests, "
            f"{m['distinct_keys']:,} distinct keys, span {m['ts_max'] - m['ts_min']:.1f} s"
        )
        if analyze:
            _analyze(info.id, settings, log)
        _tune(info.id, trials)
    return info.id


def _analyze(dataset_id: str, settings: Settings, log: Path) -> None:
    out_console.print("3/4 analyze (Spark)")
    from jobs.characterize import run as characterize

    out = settings.home_dir / "analyses" / dataset_id
    try:
        doc = characterize(dataset_id, out, dataset=True, settings=settings, spark_log=log)
    except TailtuneError:
        raise
    except Exception as exc:  # Spark/Java problems must not stop the demo: the tuner falls back to defaults
        out_console.print(f"  [yellow]skipped[/]: analysis failed ({type(exc).__name__}: {exc}; details in {log})")
        return
    for line in doc.get("findings", []):
        out_console.print(f"  • {line}", highlight=False)
    out_console.print(f"  wrote {out}/report.html (open it in a browser) and {out}/summary.json", highlight=False)


#: The demo's deployment: Cassandra with transient stop-the-world stalls (GC pauses) on every server, the usual
#: reason a stock cluster's tail exists (docs/stock-cassandra.md).
DEMO_STALLS = {"stall_rate": 0.5, "stall_ms": 20.0}


def _tune(dataset_id: str, trials: int) -> None:
    from base.console import progress
    from simulation.source import WorkloadSource
    from tuner.tune import TuneRequest, run_tune

    out_console.print(f"4/4 tune: stock Cassandra knobs, then a patched server's schedulers, {trials} trials × "
                      f"2 seeds each (stalls: {DEMO_STALLS['stall_rate']:g}/s per server, "
                      f"{DEMO_STALLS['stall_ms']:g} ms)")
    with progress() as bar:
        task = bar.add_task("tuning", total=2 * trials)

        def on_progress(done: int, total: int, best: float | None) -> None:
            bar.update(task, completed=min(done, total), total=total, description=f"trial {done}/{total}")

        doc = run_tune(TuneRequest(source=WorkloadSource(dataset=dataset_id), deployment="cassandra",
                                   trials=trials, seeds=2, evaluator_options=DEMO_STALLS,
                                   tables=("app.items",)), on_progress=on_progress).to_json()
    color = "green" if doc["verdict"] == "recommend" else "yellow"
    params = ", ".join(f"{k}={v}" for k, v in doc["params"].items() if k != "driver")
    out_console.rule("[bold]what you can run today: stock Cassandra, Java driver 4[/]")
    out_console.print(f"[bold {color}]{doc['verdict']}[/]: {params}", highlight=False)
    out_console.print(f"  {doc['reason']}", highlight=False)
    b = doc["baseline"]
    for label, m in (("expected", doc["expected"]), ("current (Cassandra's defaults)", b)):
        out_console.print(f"  {label:32s} p50 {m['p50_ms']:.3f} ms  p99 {m['p99_ms']:.3f} ms", highlight=False)
    out_console.print("  apply live (CQL):")
    for line in doc["render"]["cql"]:
        out_console.print(f"    {line}", highlight=False, markup=False)
    out_console.print("  dynamic snitch (cassandra.yaml; live over JMX, not persisted):")
    out_console.print("    " + doc["render"]["yaml"].rstrip().replace("\n", "\n    "), highlight=False, markup=False)
    patched = (doc.get("alternatives") or {}).get("patched") or {}
    out_console.rule("[bold]what a patched server (Rein, BRB, Héron, TailX) would add[/]")
    if patched.get("policy") is not None:
        pp = ", ".join(f"{k}={v}" for k, v in patched["params"].items())
        out_console.print(f"  best patched: [bold]{patched['policy']}[/] {pp}", highlight=False)
        out_console.print(f"  {'expected':32s} p50 {patched['p50_ms']:.3f} ms  p99 {patched['p99_ms']:.3f} ms",
                          highlight=False)
        out_console.print(f"  vs current: {patched['verdict']} — {patched['reason']}", highlight=False)
    else:
        out_console.print(f"  {patched.get('reason', 'not searched')}", highlight=False)
    out_console.print(f"study {doc['study']} · MLflow run {doc['mlflow_run_id']} "
                      f"(mlflow ui --backend-store-uri {get_settings().resolved_mlflow_tracking_uri})")
    out_console.rule("[bold]the decision[/]")
    for line in decision_lines(doc):
        out_console.print(line, highlight=False)


def decision_lines(doc: dict[str, Any]) -> list[str]:
    """What was found, how sure, and what to do next — in words a newcomer can act on."""
    conf = doc.get("confirmation") or {}
    patched = (doc.get("alternatives") or {}).get("patched") or {}
    metric = str(conf.get("metric") or doc.get("objective") or "p99")
    lines: list[str] = []
    if doc["verdict"] == "recommend":
        lo, hi = conf.get("interval_pct") or [None, None]
        span = f" (95 % interval {lo:.0f}–{hi:.0f} %)" if lo is not None and hi is not None else ""
        lines.append(f"Found: stock settings that cut {metric} by {conf.get('improvement_pct', 0):.0f} %{span} "
                     "against Cassandra's defaults.")
        lines.append(f"How sure: confirmed on replays the search never saw ({_where(conf)}): "
                     f"p = {conf.get('p_value', float('nan')):.2g}.")
        lines.append("Next: apply the CQL above to one table, then register the cluster and let tailtune publish "
                     "and verify it: `tailtune serve --create-token write`, `tailtune serve`, `tailtune worker` "
                     "(docs/operations.md).")
    else:
        lines.append(f"Found: nothing that beats Cassandra's defaults by a margin this trace can show — "
                     f"{doc['reason']}.")
        mde = conf.get("min_detectable_pct")
        if mde is not None:
            lines.append(f"How sure: on {_where(conf)} a {metric} change of {mde:.0f} % or more would have been "
                         "detected; smaller gains may exist.")
        lines.append("Next: keep your settings. To look for smaller gains, tune a longer trace of your own "
                     "traffic (`tailtune ingest FILE`, then `tailtune tune --dataset ID`).")
    if patched.get("verdict") == "recommend":
        lines.append(f"A patched server would do better still: {patched.get('policy')} — {patched.get('reason')}.")
    return lines


def _where(conf: dict[str, Any]) -> str:
    seeds = len(conf.get("seeds") or [])
    hold = conf.get("holdout")
    tail = f" and the last {100 * float(hold['fraction']):.0f} % of the trace" if hold else ""
    return f"{seeds} held-out seeds{tail}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="soundcloud")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--no-analyze", action="store_true", help="skip the Spark characterization")
    args = parser.parse_args(argv)
    try:
        run(profile=args.profile, requests=args.requests, seed=args.seed, trials=args.trials,
            analyze=not args.no_analyze)
    except TailtuneError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
