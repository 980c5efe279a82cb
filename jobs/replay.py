"""The `replay` job: the live replay of a deployment (`control.replay.run_replay`, what `tailtune replay` runs),
its report stored as a fidelity record (`control.fidelity_store.record(..., source="replay")`).

The API enqueues it (`POST /api/v1/deployments/{id}/replays`); the payload is the CLI's options (`dataset`,
`configs` as `[[name, SPEC], ...]`, `rate_scale` or `load`, `duration_s`, `repeats`, `block_s`, `seed`), checked
before the first step (`control.jobspec.check_replay`). One step, `replay`: its progress is the replay's
(`JobContext.progress`: prepare, load, replay, predict, compare); a cancel (or the job's time budget) raises from
the replay's progress callback, so the driver stops its generator and removes its scratch tables or keys before
the job ends `cancelled`. The result: the record's id and the headline figures (`headline`).

Failures: `ReplayRefused` (the deployment does not allow it, a limit, configs that cannot run together, ...) fails
the job for good with its message. `LagTooHigh` (the generator sent late) fails the job with its message too, and
its report is kept: stored as a fidelity record flagged `lag_too_high`, which the fidelity summary lists but does
not pool; the job's error names the record.
"""

from __future__ import annotations

from typing import Any

from control.fidelity_store import record
from control.jobspec import check_replay
from control.replay import LagTooHigh, ReplayRefused, run_replay
from jobs.context import JobContext, JobFailed

__all__ = ["headline", "run_replay_job"]


def headline(record_id: int, doc: dict[str, Any]) -> dict[str, Any]:
    """A stored report's headline figures: what the job's result and its page show."""
    p99 = [{"baseline": c["baseline"], "candidate": c["candidate"], "diff_pct": c["diff_pct"],
            "interval_pct": c["interval_pct"], "resolved": c["resolved"], "reason": c["reason"]}
           for c in doc["comparisons"] if c["metric"] == "p99"]
    return {
        "record_id": record_id,
        "deployment": doc["deployment"],
        "dataset": doc["dataset"],
        "arms": [a["name"] for a in doc["arms"]],
        "duration_s": doc["duration_s"],
        "blocks": doc["blocks"],
        "achieved_per_s": doc["rate"].get("achieved_per_s"),
        "lag_ok": doc["generator"]["lag_ok"],
        "observed_p99_ms": {k: v.get("p99_ms") for k, v in doc["observed"].items()},
        "predicted_p99_ms": {k: v.get("p99_ms") for k, v in doc["predicted"].items()},
        "p99": p99,
        "agreement": {"k": doc["fidelity"]["agreement"]["k"], "m": doc["fidelity"]["agreement"]["m"]},
    }


def run_replay_job(ctx: JobContext) -> dict[str, Any]:
    from control.errors import ServiceError

    if ctx.deployment_id is None:
        raise JobFailed("a replay job needs a deployment")
    dep_id = ctx.deployment_id
    try:
        opts = check_replay(ctx.payload, ctx.settings)
    except ServiceError as exc:
        raise JobFailed(f"job payload: field {exc.field!r}: {exc.detail}") from None

    def relay(stage: str, fraction: float) -> None:
        if ctx.stop_reason is not None:  # cancel or time budget: the driver drops its scratch, then this propagates
            raise ctx.stop_reason
        ctx.progress("replay", stage, fraction)

    def store(doc: dict[str, Any]) -> int:
        try:
            with ctx.db.session() as s:
                return record(s, dep_id, doc, job_id=ctx.job_id, source="replay")
        except ServiceError as exc:
            raise JobFailed(f"the replay's report could not be stored: {exc.detail}") from None

    def step() -> dict[str, Any]:
        from control.deployments import get

        with ctx.db.session() as s:
            name = get(s, dep_id).name
        try:
            report = run_replay(name, opts.dataset, [(a, spec) for a, spec in opts.configs],
                                rate_scale=opts.rate_scale, load=opts.load, duration_s=opts.duration_s,
                                repeats=opts.repeats, block_s=opts.block_s, seed=opts.seed, settings=ctx.settings,
                                on_progress=relay)
        except LagTooHigh as exc:
            rid = store(exc.report.as_dict())
            ctx.log(f"the generator lagged: report kept as fidelity record {rid} (flagged lag_too_high, not pooled)")
            raise JobFailed(f"{exc} (the report is kept as fidelity record {rid}, flagged lag_too_high and not "
                            "pooled into the deployment's fidelity)") from None
        except ReplayRefused as exc:
            raise JobFailed(str(exc)) from None
        doc = report.as_dict()
        rid = store(doc)
        ctx.log(f"report stored as fidelity record {rid}")
        return headline(rid, doc)

    return ctx.step("replay", step)
