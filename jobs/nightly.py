"""Job handlers: the nightly pipeline (ingest → analyze → drift → tune → decide → confirm → publish → verify) and its
single-step jobs.

Each step is a checkpoint on the job (`JobContext.step`): its output is stored, a resumed job skips finished
steps. The steps call the other packages' real entry points — `ingest.pipeline.ingest_file`,
`jobs.characterize.run`, `tuner.tune.run_tune` — and fail with a clear message when one is not importable;
nothing is faked. Choices (see docs/operations.md): the newest ready trace of the deployment is analyzed and
tuned (with `traces > 1`, the newer ones are ingested too and listed, but the tuner replays the newest); a
config is accepted only on the tuner's verdict `recommend` and the deployment's absolute constraints; a job whose
workload has not moved since the running config's study skips the study (`jobs/drift.py`, docs/drift.md); a
deployment naming `confirm_on` has an accepted recommendation replayed live against the current config there first,
and its version is made and published only if the replay does not show it worse (`jobs/confirm.py`, docs/replay.md
§ confirm_on).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from base.errors import BadInputError
from base.settings import Settings
from control.common import now
from control.db import AnalysisRow, ConfigVersionRow, Database, DeploymentRow, TraceRow
from control.egress import Egress
from control.errors import Invalid
from control.grants import PASSWORD, granted
from control.jobspec import NightlyOptions, TuneOptions, check_nightly
from control.kind import Target
from control.kinds import operations
from control.redact import public
from control.tune_request import deployment_model, deployment_record, deployment_tune
from control.verify import schedule_after_publish
from jobs.capture import capture_trace
from jobs.context import JobCancelled, JobContext, JobFailed
from jobs.drift import basis, provenance, skip_study
from jobs.drift import step as drift_step
from tuner.recommendation import Recommendation, accept

__all__ = [
    "STEPS",
    "accept",
    "finalize_analyze",
    "finalize_ingest",
    "ingest_trace",
    "publish_version",
    "run_analyze",
    "run_ingest",
    "run_nightly",
    "run_publish",
]

STEPS = ("ingest", "analyze", "drift", "tune", "decide", "confirm", "publish", "verify")


# --- ingest -------------------------------------------------------------------------------------------------
def _retryable(exc: BaseException) -> bool:
    """Ingest reads one local file: only the environment (I/O errors with an errno — disk full, EIO,
    permissions — and the metadata DB) can make another attempt succeed. Anything else the input caused
    (truncated or corrupt compression, unsupported Parquet types, nesting, a decoder's exception), and it would
    fail the same way again."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError | TimeoutError | ConnectionError):
        return True
    return isinstance(exc, OSError) and exc.errno is not None and not isinstance(exc, FileNotFoundError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to be read"
    if isinstance(exc, MemoryError):
        return "reading the input needs more memory than this worker has"
    if isinstance(exc, EOFError):
        return f"the file ends early (truncated?): {exc}"
    return f"the input could not be read: {type(exc).__name__}: {exc}"


def _set_trace(ctx: JobContext, trace_id: int, *, only_if: tuple[str, ...] | None = None, **values: Any) -> bool:
    """One conditional UPDATE of the trace; False when it no longer exists (deleted meanwhile)."""
    q = update(TraceRow).where(TraceRow.id == trace_id)
    if only_if is not None:
        q = q.where(TraceRow.status.in_(only_if))
    with ctx.db.session() as s:
        n: int = s.execute(q.values(**values)).rowcount  # type: ignore[attr-defined]
    return n > 0


def _fail_trace(ctx: JobContext, trace_id: int, path: Path, problems: list[dict[str, Any]]) -> None:
    problems = [{**p, "problem": public(str(p["problem"]), ctx.settings)} for p in problems]
    _set_trace(ctx, trace_id, status="failed", error={"problems": problems}, upload_path=None)
    path.unlink(missing_ok=True)


def _drop_orphan_dataset(ctx: JobContext, dataset_id: str) -> None:
    """A dataset made for a trace deleted during its ingest: removed unless another trace uses it."""
    from ingest.store import DatasetStore

    with ctx.db.session() as s:
        used = s.scalar(select(TraceRow.id).where(TraceRow.dataset_id == dataset_id).limit(1))
    store = DatasetStore(ctx.settings)
    if used is None and store.find(dataset_id) is not None:
        store.delete(dataset_id)


def ingest_trace(ctx: JobContext, trace_id: int) -> str:
    """Ingest one uploaded trace into a dataset; returns the dataset id.

    Every way out leaves the trace in a state that says what happened: `ready`; `failed` with readable problems
    (bad input, or an input that can never be read — not retried — or the last attempt of an environment
    failure); back to `uploaded` when the attempt will be retried or was interrupted (cancel, lease lost). A
    trace deleted during its ingest leaves no dataset behind (the job ends `cancelled`).
    """
    try:
        from ingest.pipeline import ingest_file
    except ImportError as exc:
        raise JobFailed(f"ingest is not available: {exc}") from exc
    with ctx.db.session() as s:
        trace = s.get(TraceRow, trace_id)
        if trace is None:
            raise JobCancelled(f"trace {trace_id} was deleted")
        if trace.dataset_id is not None and trace.status == "ready":
            return trace.dataset_id
        if trace.upload_path is None:
            raise JobFailed(f"trace {trace_id} has no uploaded file")
        path, fmt, name = Path(trace.upload_path), trace.format, trace.name
        trace.status = "ingesting"
    ctx.log(f"ingesting trace {trace_id} ({fmt})")
    if not path.is_file():
        _fail_trace(ctx, trace_id, path, [_problem(name, "the uploaded file is gone")])
        raise JobFailed(f"trace {trace_id}: the uploaded file is gone")
    try:
        info = ingest_file(path, fmt=fmt, name=name, settings=ctx.settings)
    except BadInputError as exc:
        problems = [
            {"file": name, "line": p.line, "field": p.field, "problem": p.problem} for p in exc.problems
        ]
        _fail_trace(ctx, trace_id, path, problems)
        raise
    except Exception as exc:
        if ctx.stop_reason is not None:  # interrupted on purpose: the job's end decides
            _set_trace(ctx, trace_id, only_if=("ingesting",), status="uploaded")
            raise
        retry = _retryable(exc)
        if not retry or ctx.attempt >= ctx.max_attempts:
            reason = _reason(exc)
            if retry:
                reason = f"gave up after {ctx.attempt} attempt(s): {type(exc).__name__}: {exc}"
            _fail_trace(ctx, trace_id, path, [_problem(name, reason)])
            raise JobFailed(f"trace {trace_id} ({name}): {reason}") from exc
        _set_trace(ctx, trace_id, only_if=("ingesting",), status="uploaded")
        raise
    except BaseException:
        _set_trace(ctx, trace_id, only_if=("ingesting",), status="uploaded")
        raise
    # the format the reader used (an upload's `auto` resolved by detection), as the dataset's manifest has it
    detected = str((info.manifest.get("source") or {}).get("format") or fmt)
    ready = _set_trace(ctx, trace_id, status="ready", dataset_id=info.id, error=None, upload_path=None,
                       format=detected)
    path.unlink(missing_ok=True)
    if not ready:  # deleted while it was being ingested: leave no dataset nobody can see or delete
        if not info.reused:
            _drop_orphan_dataset(ctx, info.id)
        raise JobCancelled(f"trace {trace_id} was deleted during its ingest; its dataset was removed")
    ctx.log(f"trace {trace_id} → dataset {info.id}{' (already ingested)' if info.reused else ''}")
    return info.id


def _problem(name: str, problem: str) -> dict[str, Any]:
    return {"file": name, "line": None, "field": None, "problem": problem}


def run_ingest(ctx: JobContext) -> dict[str, Any]:
    trace_id = int(ctx.payload["trace_id"])
    out = ctx.step("ingest", lambda: {"dataset_id": ingest_trace(ctx, trace_id)})
    return {"trace_id": trace_id, **out}


def finalize_ingest(
    db: Database, settings: Settings, job_id: int, kind: str, payload: dict[str, Any], status: str, error: str
) -> None:
    """An ingest job that ended without success by any path: its trace is `failed` (not `ingesting`
    forever) and its upload is removed."""
    trace_id = payload.get("trace_id")
    if not isinstance(trace_id, int):
        return
    with db.session() as s:
        trace = s.get(TraceRow, trace_id)
        if trace is None or trace.status not in ("uploaded", "ingesting"):
            return
        problem = f"ingest job {job_id} {status}: {public(error, settings)}"
        trace.status, trace.error = "failed", {"problems": [_problem(trace.name, problem)]}
        upload, trace.upload_path = trace.upload_path, None
    if upload:
        Path(upload).unlink(missing_ok=True)


def finalize_analyze(
    db: Database, settings: Settings, job_id: int, kind: str, payload: dict[str, Any], status: str, error: str
) -> None:
    """An analyze job that ended without success: its analysis is `failed`, not `running` forever."""
    analysis_id = payload.get("analysis_id")
    if not isinstance(analysis_id, int):
        return
    with db.session() as s:
        s.execute(
            update(AnalysisRow)
            .where(AnalysisRow.id == analysis_id, AnalysisRow.status.in_(("queued", "running")))
            .values(status="failed", error=public(f"job {job_id} {status}: {error}", settings))
        )


# --- analyze ------------------------------------------------------------------------------------------------
def _characterize(
    ctx: JobContext, dataset_id: str, out_dir: Path, servers: int, replication: int
) -> dict[str, Any]:
    try:
        from analysis.pipeline import Options
        from jobs.characterize import run
    except ImportError as exc:
        raise JobFailed(f"the analysis is not available: {exc}") from exc
    ctx.log(f"characterizing dataset {dataset_id}")
    with ctx.on_stop(_cancel_spark):  # a cancel (or the time budget) stops the running Spark job
        run(
            dataset_id,
            out_dir,
            dataset=True,
            settings=ctx.settings,
            opts=Options(servers=servers, replication=replication),
        )
    rel = _home_relative(ctx, out_dir)
    return {"dataset_id": dataset_id, "out_dir": rel, "summary": f"{rel}/summary.json"}


def _cancel_spark() -> None:
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        sc.cancelAllJobs()


def _home_relative(ctx: JobContext, path: Path) -> str:
    """Paths in step outputs and results are relative to TAILTUNE_HOME (no server paths in API answers)."""
    try:
        return str(path.resolve().relative_to(ctx.settings.home_dir))
    except ValueError:
        return path.name


def _in_home(ctx: JobContext, path: str) -> Path:
    return ctx.settings.home_dir / path  # an absolute path (a job of an older version) stays as it is


def run_analyze(ctx: JobContext) -> dict[str, Any]:
    analysis_id = int(ctx.payload["analysis_id"])
    with ctx.db.session() as s:
        row = s.get(AnalysisRow, analysis_id)
        if row is None:
            raise JobFailed(f"analysis {analysis_id} no longer exists")
        row.status = "running"
        dataset_id, out_dir, opts = row.dataset_id, Path(row.out_dir), dict(row.options)
    out = ctx.step(
        "analyze",
        lambda: _characterize(ctx, dataset_id, out_dir, int(opts["servers"]), int(opts["replication"])),
    )  # a failure that ends the job is recorded on the analysis by `finalize_analyze`
    with ctx.db.session() as s:
        row = s.get(AnalysisRow, analysis_id)
        if row is not None:
            row.status, row.error = "succeeded", None
    return {"analysis_id": analysis_id, **out}


# --- publish ------------------------------------------------------------------------------------------------
def _newest_published(s: Any, deployment_id: int, kind: str) -> ConfigVersionRow | None:
    """The newest version of the deployment that was published to its target (targets only move forward)."""
    rows = s.scalars(
        select(ConfigVersionRow)
        .where(ConfigVersionRow.deployment_id == deployment_id)
        .order_by(ConfigVersionRow.version.desc())
    )
    return next((r for r in rows if kind in (r.published or {})), None)


def publish_version(ctx: JobContext, deployment_id: int, version: int) -> dict[str, Any]:
    """Publish one stored version to the deployment's target (retried with backoff); record the outcome.

    Targets and the deployment's record only move forward: the newest version published before is handed to
    the publisher as `head` (a republished older version, or a target that lost its data, gets the newest
    back), and `current_config` is always the newest published version's config. The publisher is also handed
    what the DB knows of the deployment (`Known`: its id, its versions, the live deployments' ids), against
    which it judges what a target holds. A publish that reached only some servers of a pool leaves
    `publish_status: partial` and names them; one that found a server holding content tailtune never made for
    this deployment leaves `publish_status: conflict` and names the server (not retried).
    """
    from control.publishers import Known, PublishConflict, PublishFailed, PublishRejected, publish_with_retry

    with ctx.db.session() as s:
        dep = s.get(DeploymentRow, deployment_id)
        row = s.scalar(
            select(ConfigVersionRow).where(
                ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version
            )
        )
        if dep is None or row is None:
            raise JobFailed(f"deployment {deployment_id} version {version} not found")
        kind, config = dep.kind, dict(row.config)
        grant = granted(s, deployment_id, PASSWORD)
        target = Target.of(dep, Egress())
        newest = _newest_published(s, deployment_id, kind)
        head = (newest.version, dict(newest.config)) if newest is not None and newest.version > version else None
        versions = s.execute(
            select(ConfigVersionRow.version, ConfigVersionRow.config).where(
                ConfigVersionRow.deployment_id == deployment_id
            )
        ).all()
        live = s.execute(select(DeploymentRow.id, DeploymentRow.nonce)).all()
        known = Known(
            deployment_id,
            {int(v): dict(c) for v, c in versions},
            frozenset(int(i) for i, _ in live),
            identity=dep.identity,
            live_identities=frozenset(DeploymentRow.identity_of(int(i), n) for i, n in live),
        )
        dep.publish_status = "publishing"
    if head is not None:
        ctx.log(f"version {version} is older than the published version {head[0]}: the target keeps {head[0]}")
    ops = operations(kind)
    bound = replace(target, egress=Egress.of(ctx.settings).bound(grant))
    publisher = ops.publisher(bound, ctx.settings)
    # the environment's reference before the config changes (control.verify compares the check's with it)
    reference = ops.reference_figures(bound, ctx.settings, log=ctx.log)
    try:
        outcome = publish_with_retry(
            publisher,
            version,
            config,
            attempts=ctx.settings.publish_attempts,
            backoff_s=ctx.settings.publish_backoff_s,
            log=ctx.log,
            head=head,
            known=known,
        )
    except (PublishFailed, PublishConflict, PublishRejected) as exc:
        partial = isinstance(exc, PublishFailed) and exc.partial is not None
        status = "conflict" if isinstance(exc, PublishConflict) else "partial" if partial else "failed"
        with ctx.db.session() as s:
            dep = s.get(DeploymentRow, deployment_id)
            if dep is not None:
                dep.publish_status = status
                dep.publish_error = public(str(exc), ctx.settings)
        if isinstance(exc, PublishConflict | PublishRejected):
            raise JobFailed(str(exc)) from exc
        raise
    for server, what in ((outcome.applied or {}).get("replaced_forged") or {}).items():
        ctx.log(f"{kind} {server}: replaced content tailtune never made for this deployment: {what}")
    check: dict[str, Any] = {"verify_job_id": None, "next_check_at": None, "dropped": []}
    with ctx.db.session() as s:
        dep = s.scalar(select(DeploymentRow).where(DeploymentRow.id == deployment_id).with_for_update())
        row = s.scalar(
            select(ConfigVersionRow).where(
                ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version
            )
        )
        if row is not None:
            record: dict[str, Any] = {"at": now(), "current_version": outcome.current_version}
            record.update(outcome.applied or {})  # cassandra: each table's speculative_retry before/after
            if reference is not None:
                record["reference"] = reference
            row.published = {**row.published, kind: ops.published_record(row.published.get(kind), record)}
            s.flush()
            check = schedule_after_publish(s, ctx.settings, deployment_id, version)
        if dep is not None:
            dep.publish_status, dep.publish_error = "ok", None
            newest = _newest_published(s, deployment_id, kind)
            if newest is not None:
                dep.current_config = dict(newest.config)
    if check["verify_job_id"] is not None:
        ctx.log(f"version {version}: its check (job {check['verify_job_id']}) runs after "
                f"{ctx.settings.verify_after_windows} report windows (verify_after_windows)")
    for dropped in check["dropped"]:
        ctx.log(f"dropped the scheduled check (job {dropped}) of an older version: superseded")
    return {
        "target": kind,
        "version": version,
        "advanced": outcome.advanced,
        "current_version": outcome.current_version,
        "verify_job_id": check["verify_job_id"],
        "next_check_at": check["next_check_at"],
    }


def run_publish(ctx: JobContext) -> dict[str, Any]:
    if ctx.deployment_id is None:
        raise JobFailed("a publish job needs a deployment")
    version = int(ctx.payload["version"])
    dep_id = ctx.deployment_id
    return ctx.step("publish", lambda: publish_version(ctx, dep_id, version))


# --- nightly ------------------------------------------------------------------------------------------------
def _pick_traces(ctx: JobContext, dep_id: int, count: int) -> list[int]:
    with ctx.db.session() as s:
        rows = s.scalars(
            select(TraceRow)
            .where(TraceRow.deployment_id == dep_id, TraceRow.status != "failed")
            .order_by(TraceRow.created_at.desc(), TraceRow.id.desc())
            .limit(count)
        ).all()
        return [r.id for r in rows]


def _step_ingest(ctx: JobContext, dep_id: int) -> dict[str, Any]:
    explicit = ctx.payload.get("dataset_ids")
    if explicit:
        return {"traces": [], "datasets": [str(d) for d in explicit]}
    capture = _options(ctx).capture
    if capture is not None:  # the trace is captured from the deployment's memcached servers (jobs/capture.py)
        trace_id, seen = capture_trace(ctx, dep_id, capture)
        return {"traces": [trace_id], "datasets": [ingest_trace(ctx, trace_id)], "capture": seen}
    traces = _pick_traces(ctx, dep_id, _options(ctx).traces)
    if not traces:
        raise JobFailed(
            f"deployment {dep_id} has no uploaded trace (POST /api/v1/traces?deployment_id={dep_id})"
        )
    ctx.log(f"newest trace(s): {traces}")
    return {"traces": traces, "datasets": [ingest_trace(ctx, t) for t in traces]}


def _has_timestamps(summary: dict[str, Any]) -> bool:
    """Does the analysed trace carry arrival times that span some time (its own arrivals can be replayed)?"""
    arrivals = summary.get("arrivals") or {}
    return bool(arrivals.get("duration_s")) and arrivals.get("rate_mean") is not None


def _step_tune(
    ctx: JobContext, dep: dict[str, Any], dataset_id: str, summary_path: str, opts: TuneOptions
) -> dict[str, Any]:
    import json

    try:
        from simulation.source import WorkloadSource
        from tuner.tune import TuneRequest, run_tune
    except ImportError as exc:
        raise JobFailed(f"the tuner is not available: {exc}") from exc
    study = f"tailtune-{dep['name']}-job{ctx.job_id}"
    ctx.log(f"tuning dataset {dataset_id} (study {study}; resumes from its storage if it exists)")
    summary = json.loads(_in_home(ctx, summary_path).read_text())
    tune = deployment_tune(dep, timestamps=_has_timestamps(summary))
    req = TuneRequest.for_deployment(
        WorkloadSource(dataset=dataset_id),
        tune.fields,
        trials=opts.trials,
        seeds=opts.seeds,
        objective=str(dep["objective"].get("metric", "p99")),
        timeout_s=opts.timeout_s,
        study=study,
        policies=tuple(dep["constraints"]["policies"]) if dep["constraints"].get("policies") else None,
        summary=summary,
        plots=False,
        cdf_points=ctx.settings.nightly_cdf_points,
    )
    ctx.log("model: " + ", ".join(f"{k} {v}" for k, v in tune.model.sources.items()))
    if tune.warning is not None:
        ctx.log(f"warning: {tune.warning}")
    for note in tune.model.notes:
        ctx.log(f"model: {note}")
    for note in tune.notes:
        ctx.log(f"note: {note}")
    try:
        # between two trials, a cancel (or the time budget) stops the study: no further trial starts
        rec = run_tune(req, settings=ctx.settings, on_progress=lambda *_: ctx.check_cancel())
    except BadInputError as exc:  # the tuner names its own inputs as the CLI's: here they come from the job
        raise BadInputError(
            [replace(p, file="job payload" if p.file == "command line" else p.file) for p in exc.problems],
            more=exc.more,
        ) from None
    ctx.set_mlflow_run_id(rec.mlflow_run_id)
    clean: dict[str, Any] = json.loads(json.dumps(rec.to_json(), default=str))
    relative: dict[str, Any] = _relative_paths(ctx, clean)
    return relative


def _relative_paths(ctx: JobContext, doc: Any) -> Any:
    """`doc` with every path under TAILTUNE_HOME written relative to it (the held-out sample in
    `tuned_for.source.trace`, the files the `reproduce` commands name), as every path in a job's answer is."""
    root = str(ctx.settings.home_dir.resolve())
    if isinstance(doc, str):
        return doc.replace(root + "/", "")
    if isinstance(doc, dict):
        return {k: _relative_paths(ctx, v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_relative_paths(ctx, v) for v in doc]
    return doc


def _step_decide(
    ctx: JobContext,
    dep_id: int,
    rec: Recommendation,
    constraints: dict[str, Any],
    objective: dict[str, Any],
    rec_json: dict[str, Any] | None = None,
    *,
    make_version: bool = True,
) -> dict[str, Any]:
    """The model's decision; an accepted recommendation becomes the next version unless `make_version` is False
    (a deployment naming `confirm_on`: the confirm step makes it once the live replay confirmed it)."""
    from control.configs import add_version
    from control.verify import expectation

    ok, reason = accept(rec, constraints, objective)
    ctx.log(f"decision: {'accept' if ok else 'keep current'} — {reason}")
    if not ok:
        return {"accepted": False, "reason": reason, "version": None}
    if not make_version:
        return {"accepted": True, "reason": reason, "version": None}
    config = rec.config()
    with ctx.db.session() as s:
        existing = s.scalar(
            select(ConfigVersionRow).where(
                ConfigVersionRow.deployment_id == dep_id, ConfigVersionRow.job_id == ctx.job_id
            )
        )
        row = existing or add_version(
            s,
            dep_id,
            config,
            settings=ctx.settings,
            source="tuning",
            job_id=ctx.job_id,
            note=f"nightly job {ctx.job_id}: {reason}",
        )
        if existing is None:  # what the verify step will hold the version to
            expected = expectation(rec_json or rec.to_json(), job_id=ctx.job_id)
            row.verification = {"status": "unchecked", "expected": expected} if expected else None
        version = row.version
    return {"accepted": True, "reason": reason, "version": version}


def _options(ctx: JobContext) -> NightlyOptions:
    """The job's payload checked before the first step (limits as at the API): a bad one fails at once."""
    try:
        return check_nightly(ctx.payload, ctx.settings)
    except Invalid as exc:
        raise JobFailed(f"job payload: field '{exc.field}': {exc.detail}") from None


def run_nightly(ctx: JobContext) -> dict[str, Any]:
    if ctx.deployment_id is None:
        raise JobFailed("a nightly job needs a deployment")
    opts = _options(ctx)
    dep_id = ctx.deployment_id
    with ctx.db.session() as s:
        row = s.get(DeploymentRow, dep_id)
        if row is None:
            raise JobFailed(f"deployment {dep_id} no longer exists")
        dep = deployment_record(row)
        confirm_on = row.confirm_on
    ing = ctx.step("ingest", lambda: _step_ingest(ctx, dep_id))
    dataset_id = str(ing["datasets"][0])
    out_dir = ctx.settings.home_dir / "analyses" / f"job-{ctx.job_id}"
    # the analysis's fan-out is computed on the deployment's model (its servers and replication, wherever from)
    shape = deployment_model(dep, timestamps=False).options
    servers = int(shape.get("servers") or dep["topology"].get("servers") or 1)
    replication = int(shape.get("replication", 1))
    ana = ctx.step("analyze", lambda: _characterize(ctx, dataset_id, out_dir, servers, replication))
    # drift: has the workload moved since the study the running config comes from? No → skip the study
    trace = provenance(dep, ing.get("capture"))
    drift = drift_step(ctx, dep_id, dep, shape, str(ana["out_dir"]), force=opts.force, trace=trace)
    if drift is not None and not drift["changed"] and not opts.force:
        skipped = skip_study(ctx, drift, {"datasets": ing["datasets"], "analysis": ana["out_dir"]})
        if ctx.payload.get("publish", True):  # a version still pending from an earlier night is checked again
            from jobs.verify import verify_deployment

            skipped["verify"] = ctx.step("verify", lambda: verify_deployment(ctx, dep_id))
        return skipped
    rec = ctx.step("tune", lambda: _step_tune(ctx, dep, dataset_id, str(ana["summary"]), opts.tune))
    recommendation = Recommendation.from_json(rec)
    dec = ctx.step("decide", lambda: _step_decide(ctx, dep_id, recommendation, dep["constraints"], dep["objective"],
                                                  rec, make_version=confirm_on is None))
    confirm: dict[str, Any] | None = None
    if dec["accepted"] and confirm_on is not None:
        from jobs.confirm import confirm_recommendation

        on, model_dec = confirm_on, dec
        confirm = ctx.step("confirm", lambda: confirm_recommendation(ctx, dep_id, dep, on, dataset_id, recommendation,
                                                                     rec, str(model_dec["reason"])))
        if confirm["outcome"] == "confirmed":
            dec = {**dec, "version": confirm["version"]}
        else:
            dec = {"accepted": False, "version": None,
                   "reason": f"confirm_on {confirm_on!r}: {confirm['outcome']}: {confirm['reason']}"}
    result: dict[str, Any] = {
        "datasets": ing["datasets"],
        "analysis": ana["out_dir"],
        "drift": drift,
        "basis": basis(ctx, dep_id, dep, shape, dec, trace=trace),
        "decision": dec,
        "recommendation": {
            "policy": recommendation.policy,
            "params": recommendation.params,
            "verdict": recommendation.verdict,
            "reason": recommendation.reason,
            "p_value": recommendation.p_value,
            "improvement_pct": recommendation.improvement_pct,
            "confirmation": recommendation.confirmation,
            "expected": recommendation.expected,
            "baseline": recommendation.baseline,
            "study": recommendation.study,
            "mlflow_run_id": recommendation.mlflow_run_id,
            "tuned_for": recommendation.tuned_for,
            "reproduce": recommendation.reproduce,
        },
        "model": {"sources": recommendation.tuned_for.get("model_sources", {}),
                  "defaults": [k for k, v in recommendation.tuned_for.get("model_sources", {}).items()
                               if v == "default"],
                  "warning": (recommendation.tuned_for.get("model") or {}).get("warning")},
    }
    if confirm is not None:
        result["confirm"] = confirm
        if confirm.get("finding"):
            result["findings"] = [confirm["finding"]]
    if dec["accepted"] and ctx.payload.get("publish", True):
        version = int(dec["version"])
        result["publish"] = ctx.step("publish", lambda: publish_version(ctx, dep_id, version))
    if ctx.payload.get("publish", True):
        # the latest version as the real system runs it: the one just published (most likely pending, checked
        # again later), or a pending one of an earlier night (docs/operations.md § Verify, rollback, canary)
        from jobs.verify import verify_deployment

        result["verify"] = ctx.step("verify", lambda: verify_deployment(ctx, dep_id))
    return result
