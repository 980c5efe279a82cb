"""`tailtune replay --deployment NAME --dataset ID --config A=current --config B=recommended [--config C=SPEC ...]
[--rate-scale X | --load F] [--duration S] [--repeats N] [--block-s S] [--json]`: the live replay
(`control.replay.run_replay`; docs/replay.md) of a registered deployment (the metadata DB of
TAILTUNE_DATABASE_URL) that allows it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["register"]


def replay(
    deployment: Annotated[str, typer.Option("--deployment", help="The registered deployment (replay_allowed).")],
    dataset: Annotated[str, typer.Option("--dataset", help="Stored dataset id or name whose requests are sent.")],
    config: Annotated[
        list[str],
        typer.Option("--config", help="NAME=SPEC (repeatable, 2 or more; the first is the baseline). SPEC: current, "
                     "recommended (or recommended@JOB), version:N, or a config as `tune --current` takes it "
                     "(stock:speculative_retry=NEVER)."),
    ],
    rate_scale: Annotated[
        float | None, typer.Option("--rate-scale", help="Multiply the trace's own rate (default 1).")
    ] = None,
    load: Annotated[
        float | None,
        typer.Option("--load", help="Send at this fraction of the deployment's calibrated capacity."),
    ] = None,
    duration: Annotated[
        float | None, typer.Option("--duration", help="Measured seconds per repeat (default: the whole trace).")
    ] = None,
    repeats: Annotated[int, typer.Option(
        "--repeats", help="Measured runs, each dealt anew; configs differing in the dynamic snitch: ABBA pairs.")] = 1,
    block_s: Annotated[
        float, typer.Option("--block-s", help="Seconds per block of the block bootstrap (15 or more to compare).")
    ] = 15.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the dealing, the bootstrap and the model.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report JSON on stdout.")] = False,
) -> None:
    """Replay a dataset's requests at the deployment's live system under several configs at once (twin scratch
    tables or keys), beside the model's prediction of each: observed against predicted p50/p95/p99, each config
    against the first with its interval, whether the model ranks them as the cluster does."""
    from base.console import print_json, progress
    from control.replay import LagTooHigh, parse_arm, run_replay

    arms = [parse_arm(c) for c in config]
    with progress(transient=True) as bar:
        task = bar.add_task("replay", total=100)

        def on_progress(stage: str, fraction: float) -> None:
            bar.update(task, completed=round(100 * fraction), description=stage)

        try:
            report = run_replay(deployment, dataset, arms, rate_scale=rate_scale, load=load, duration_s=duration,
                                repeats=repeats, block_s=block_s, seed=seed, on_progress=on_progress)
        except LagTooHigh as exc:
            _store(deployment, exc.report.as_dict())
            if as_json:
                print_json(exc.report.as_dict())
            raise
    doc = report.as_dict()
    record_id = _store(deployment, doc)
    if as_json:
        print_json(doc)
        return
    _print_text(doc)
    from base.console import err_console

    err_console.print(f"stored as fidelity record {record_id} of {deployment} (GET /deployments/ID/fidelity, the "
                      "console's deployment page)", highlight=False)


def _store(deployment: str, doc: dict[str, Any]) -> int:
    """The report kept among the deployment's fidelity records (`source` cli): pooled with every other replay of
    it, as a replay job's is (a lagging one kept, flagged, not pooled)."""
    from base.settings import get_settings
    from control.db import database_for
    from control.deployments import get_by_name
    from control.fidelity_store import record

    db = database_for(get_settings().resolved_database_url)
    with db.session() as s:
        return record(s, get_by_name(s, deployment).id, doc, job_id=None, source="cli")


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_text(doc: dict[str, Any]) -> None:
    from rich.table import Table

    from base.console import err_console, out_console

    rate, gen = doc["rate"], doc["generator"]
    out_console.print(
        f"live replay of {doc['deployment']} ({doc['kind']}), dataset {doc['dataset']}: "
        f"{doc['duration_s']:.0f} s measured, {doc['blocks']} blocks of {doc['block_s']:g} s, "
        f"{rate['achieved_per_s']:.0f} of {rate['intended_per_s']:.0f} requests/s intended "
        f"(rate scale {rate['scale']:.3g}); generator {gen['driver']}, lag p99 {_ms(gen['lag_ms']['p99'])} ms, "
        f"{gen['cpu_us_per_request']:.0f} µs CPU per request", highlight=False)
    table = Table("arm", "config", "requests", "errors", "observed p50/p95/p99 ms", "predicted p50/p95/p99 ms")
    for arm in doc["arms"]:
        o = doc["observed"].get(arm["name"], {})
        p = doc["predicted"].get(arm["name"], {})
        params = ",".join(f"{k}={v}" for k, v in (arm["config"].get("params") or {}).items())
        table.add_row(arm["name"], f"{arm['config'].get('policy')}:{params}" if params else str(arm["config"].get(
            "policy")), str(o.get("requests", 0)), str((o.get("errors") or 0) + (o.get("timeouts") or 0)),
            " / ".join(_ms(o.get(k)) for k in ("p50_ms", "p95_ms", "p99_ms")),
            " / ".join(_ms(p.get(k)) for k in ("p50_ms", "p95_ms", "p99_ms")))
    out_console.print(table)
    for c in doc["comparisons"]:
        if c["metric"] != "p99":
            continue
        who = f"{c['candidate']} against {c['baseline']}"
        if c["interval_pct"] is None:
            out_console.print(f"  p99 {who}: not estimated ({c['reason']})", highlight=False)
        else:
            lo, hi = c["interval_pct"]
            out_console.print(f"  p99 {who}: {c['diff_pct']:+.1f} % [{lo:+.1f} %, {hi:+.1f} %]", highlight=False)
    agreement = doc["fidelity"]["agreement"]
    out_console.print(f"  the model ranks {agreement['k']} of {agreement['m']} resolved pairs as the cluster does",
                      highlight=False)
    for note in doc["notes"]:
        err_console.print(f"note: {note}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
