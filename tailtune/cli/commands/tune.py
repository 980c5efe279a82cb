"""`tailtune tune`: an Optuna study over the replay simulator, tracked in MLflow, ending in a recommendation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from control.tune_request import DeploymentTune
    from simulation.source import WorkloadSource

__all__ = ["peak_check_line", "register"]


def _deployment_help(name: str, text: str) -> str:
    from tailtune.cli.commands.simulate import deployment_default

    return f"{text} (default: {deployment_default(name)})."


def _store_help() -> str:
    from simulation.kinds import kind_names

    names = kind_names()
    listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    return f"Deployment kind: {listed}."


def _default_store() -> str:
    """The first registered kind (`simulation.kinds.KINDS`)."""
    from simulation.kinds import kind_names

    return kind_names()[0]


def tune(
    file: Annotated[Path | None, typer.Argument(help="Canonical trace file (Parquet/CSV).")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Stored dataset id or name.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Generator profile instead of data.")] = None,
    requests: Annotated[int | None, typer.Option("--requests", help="Requests to generate (--profile).")] = None,
    store: Annotated[str, typer.Option("--store", help=_store_help())] = _default_store(),
    deployment: Annotated[
        str | None,
        typer.Option("--deployment", help="Replay this registered deployment's own model (its kind, topology, "
                     "discovered and calibrated inputs; a trace with timestamps on its own arrivals)."),
    ] = None,
    trials: Annotated[int, typer.Option("--trials", help="Trials in the study (total, across resumes).")] = 50,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per trial (common random numbers).")] = 3,
    objective: Annotated[
        str, typer.Option("--objective", help="p50|p95|p99|p999|mean, 0.3*p50+0.7*p99, or p50,p99 (Pareto).")
    ] = "p99",
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", help="METRIC<=X% vs the current config (repeatable).")
    ] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Stop asking new trials after S s.")] = None,
    jobs: Annotated[int, typer.Option("--jobs", help="Parallel worker processes.")] = 1,
    study: Annotated[str | None, typer.Option("--study", help="Study name (default: derived; reruns resume).")]
    = None,
    storage: Annotated[
        str | None, typer.Option("--storage", help="Optuna storage: journal file path, RDB URL or 'memory'.")
    ] = None,
    current: Annotated[
        str | None, typer.Option("--current", help="Your current config, e.g. rein:k=4,range_factor=3.")
    ] = None,
    policies: Annotated[str | None, typer.Option("--policies", help="Comma-separated policies to search.")]
    = None,
    space: Annotated[
        list[str] | None, typer.Option("--space", help="policy.param=V | LOW:HIGH[:STEP] | a|b (repeatable).")
    ] = None,
    summary: Annotated[Path | None, typer.Option("--summary", help="summary.json of `tailtune analyze`.")]
    = None,
    load: Annotated[
        float | None, typer.Option("--load", help=_deployment_help("load", "Cassandra: offered load"))
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="Cassandra: stock (default: tune its own knobs) or rein-patched.")
    ] = None,
    driver: Annotated[str, typer.Option("--driver", help="Cassandra: the application's driver, java4 or python.")]
    = "java4",
    table: Annotated[
        list[str] | None, typer.Option("--table", help="Cassandra: KEYSPACE.TABLE the CQL alters (repeatable).")
    ] = None,
    alternative_trials: Annotated[
        int | None,
        typer.Option("--alternative-trials", help="Cassandra: trials of the other server kind (default --trials; "
                                                  "0 = skip)."),
    ] = None,
    stall_rate: Annotated[
        float | None, typer.Option("--stall-rate", help="Cassandra: stalls per second per server.")
    ] = None,
    stall_ms: Annotated[
        float | None, typer.Option("--stall-ms", help=_deployment_help("stall_ms", "Cassandra: stall length, ms"))
    ] = None,
    use_timestamps: Annotated[
        bool, typer.Option("--use-timestamps", help="Cassandra: arrivals from the trace's own timestamps.")
    ] = False,
    sample_fraction: Annotated[
        float | None, typer.Option("--sample-fraction", help="Replay windows covering this fraction of the span.")
    ] = None,
    target_error: Annotated[
        float | None, typer.Option("--target-error", help="p99 error bound, %: the tuner picks the sample.")
    ] = None,
    strata: Annotated[int, typer.Option("--strata", help="Sampling: strata of the span (one window each).")] = 10,
    sample_seed: Annotated[int, typer.Option("--sample-seed", help="Sampling: seed of the window offsets.")] = 0,
    no_mlflow: Annotated[bool, typer.Option("--no-mlflow", help="Do not track in MLflow.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the recommendation JSON on stdout.")] = False,
) -> None:
    """Tune the scheduler for a trace: best policy and parameters, with evidence vs your current config."""
    import dataclasses
    import json

    from base.console import err_console, print_json, progress
    from base.errors import BadInputError
    from simulation.kinds import find_kind
    from simulation.source import WorkloadSource
    from tuner.kinds import check_timestamps
    from tuner.sampling import SamplingSpec
    from tuner.space import parse_override
    from tuner.tune import TuneRequest, parse_candidate, run_tune

    source = WorkloadSource(
        dataset=dataset, trace=str(file) if file is not None else None, profile=profile, requests=requests
    )
    summary_doc = None
    if summary is not None:
        try:
            summary_doc = json.loads(summary.read_text())
        except (OSError, ValueError) as exc:
            raise BadInputError.single(str(summary), f"not a readable JSON file: {exc}") from None
    overrides = dict(parse_override(s) for s in (space or []))
    ev_opts: dict[str, object] = {}
    kind = find_kind(store)
    if kind is not None:  # the deployment options this kind's model has (an unknown store: run_tune names it)
        fields = {f.name for f in dataclasses.fields(kind.deployment_class())}
        for key, val in (("load", load), ("stall_rate", stall_rate), ("stall_ms", stall_ms)):
            if val is not None and key in fields:
                ev_opts[key] = val
    if use_timestamps:
        check_timestamps(store)
        ev_opts["use_timestamps"] = True
    current_cand = parse_candidate(current) if current else None
    spec = SamplingSpec(fraction=sample_fraction, target_error_pct=target_error, strata=strata, seed=sample_seed)
    sampling = spec if sample_fraction is not None or target_error is not None else None
    run: dict[str, Any] = {
        "trials": trials, "seeds": seeds, "objective": objective, "constraints": tuple(constraint or ()),
        "timeout_s": timeout, "jobs": jobs, "study": study, "storage": storage,
        "policies": tuple(p.strip() for p in policies.split(",") if p.strip()) if policies else None,
        "overrides": overrides, "summary": summary_doc, "mlflow": not no_mlflow,
        "alternative_trials": alternative_trials, "sampling": sampling,
    }
    if deployment is not None:
        tune = _deployment_tune(
            deployment, source, load=load, server=server,
            driver=None if driver == "java4" else driver, tables=table or (),
            current=None if current_cand is None else {"policy": current_cand.policy, "params": current_cand.params},
            evaluator_options={k: v for k, v in ev_opts.items() if k != "load"},
        )
        if tune.warning is not None:
            err_console.print(f"[yellow]warning:[/] {tune.warning}")
        for note in tune.notes:
            err_console.print(f"note: {note}", highlight=False, markup=False)
        req = TuneRequest.for_deployment(source, tune.fields, **run)
    else:
        req = TuneRequest(
            source=source, deployment=store, current=current_cand, evaluator_options=ev_opts, server=server,
            driver=driver, tables=tuple(table or ()), **run,
        )
    with progress(transient=True) as bar:
        found = find_kind(req.deployment)
        alternative = trials if found is not None and found.servers else 0  # two builds: the other one searched
        task = bar.add_task("tuning", total=trials + (alternative_trials if alternative_trials is not None
                                                        else alternative))

        def on_progress(done: int, total: int, best: float | None) -> None:
            best_s = f"best {best:.3f} ms" if best is not None else "best -"
            bar.update(task, completed=min(done, total), total=total,
                       description=f"trial {done}/{total} · {best_s}")

        doc = run_tune(req, on_progress=on_progress).to_json()
    if as_json:
        print_json(doc)
        return
    _print_text(doc)


def _deployment_tune(name: str, source: WorkloadSource, **options: Any) -> DeploymentTune:
    """The tune of the registered deployment `name` (the metadata DB of TAILTUNE_DATABASE_URL) on `source`, as its
    nightly job builds it (`control.tune_request`)."""
    from base.settings import get_settings
    from control.db import database_for
    from control.deployments import get_by_name
    from control.tune_request import deployment_record, deployment_tune

    db = database_for(get_settings().resolved_database_url)
    try:
        with db.session() as s:
            dep = deployment_record(get_by_name(s, name))
    finally:
        db.dispose()
    return deployment_tune(dep, timestamps=source.has_timestamps(), **options)


def _print_text(doc: dict[str, Any]) -> None:
    """The human view: verdict, the chosen config, then current / best stock / best patched side by side."""
    import json

    from base.console import err_console, out_console

    color = "green" if doc["verdict"] == "recommend" else "yellow"
    out_console.print(f"[bold {color}]{doc['verdict']}[/]: {doc['reason']}")
    params = ", ".join(f"{k}={v}" for k, v in doc["params"].items())
    out_console.print(f"policy [bold]{doc['policy']}[/] {params}")
    e, b, p = doc["expected"], doc["baseline"], doc["paper_default"]
    rows: list[tuple[str, dict[str, Any]]] = [("expected", e), (f"current ({b['policy']})", b)]
    alts = doc.get("alternatives") or {}
    for key, label in (("stock", "best stock"), ("patched", "best patched")):
        a = alts.get(key)
        if a and a.get("policy") is not None:
            rows.append((f"{label} ({a['policy']}): {a['verdict']}", a))
    rows.append((f"paper default ({p['policy']})", p))
    for label, m in rows:
        out_console.print(f"  {label:44s} p50 {m['p50_ms']:.3f} ms  p95 {m['p95_ms']:.3f} ms  "
                          f"p99 {m['p99_ms']:.3f} ms", highlight=False)
    eb = e.get("error_bound")
    if eb and eb.get("p99_ms"):
        lo, hi = eb["p99_ms"]
        holds = ["the replay's interval"]
        part = eb.get("parts", {}).get("p99", {})
        if part.get("calibration_ms") is not None:
            holds.append("the calibrated service time's interval")
        if part.get("sampling_pct"):
            holds.append("the sampling error")
        out_console.print(f"  expected p99 within [{lo:.3f}, {hi:.3f}] ms ({', '.join(holds)})", highlight=False)
    if doc.get("sampling"):
        smp, bound = doc["sampling"], doc["sampling"]["error_bound"]
        out_console.print(f"  replayed {doc['replayed_fraction']:.1%} of the trace ({len(smp['windows'])} windows); "
                          f"error bound p50 ±{bound['p50_pct']:.1f}%, p99 ±{bound['p99_pct']:.1f}%", highlight=False)
        est = smp.get("estimate")
        if est:
            out_console.print(f"  estimate for the whole trace: p50 {est['p50_ms']:.3f} ms, p99 {est['p99_ms']:.3f} ms "
                              f"(the burst stretches, {est['burst_share']:.1%} of the requests, and the sample)",
                              highlight=False)  # fmt: skip
        out_console.print(f"  the bound does not hold for {bound['not_valid_for']}", highlight=False)
        check = smp.get("peak_check")
        if check:
            out_console.print(peak_check_line(check), highlight=False)
    out_console.print(f"study {doc['study']} ({doc['trials']} trials) · MLflow run {doc['mlflow_run_id']}")
    render = doc["render"]
    if "cql" in render:
        for line in render["cql"]:
            err_console.print(line, highlight=False)
    else:
        err_console.print(json.dumps(render["json"]), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune)


def peak_check_line(check: Mapping[str, Any]) -> str:
    """The one line `tune` prints for a sampled study's peak check (docs/sampling.md § The peak check)."""
    walked, rank, twin = len(check["checked"]), check["picked_rank"], check.get("picked_twin")
    if rank is not None:
        picked = f"the sample's #{rank + 1} is recommended from"
    elif twin is not None:
        picked = "none of them is recommended: the first calm one with its extra reads off is, replayed on the sample"
    else:
        picked = "none of them is recommended"
    stopped = check.get("stopped") or 0
    return (f"  peak check over {sum(e - b for b, e in check['windows']):.0f} s around the trace's "
            f"{len(check['windows'])} most intense bursts ({check['requests']:,} requests): "
            f"{check['rejected']} of the sample's {walked} best checked "
            f"storm there (p99 over {check['storm_factor']:g}x the floor of {check['floor_p99_ms']:.3f} ms"
            + (f"; {stopped} of them known once their replays stopped" if stopped else "") + f"); {picked}"
            + ("; your current config storms there too" if check["current_storms"] else ""))  # fmt: skip
