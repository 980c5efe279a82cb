"""The nightly job's drift step: is the new trace still the workload the running config was tuned on?

The reference is the **last study**: the newest succeeded nightly job of the deployment whose study ran. Such a job
records in its result `basis` — the config its study chose (an accepted version) or kept (the running config), and
a fingerprint of the deployment's tuning inputs (kind, server, driver, tables, objective, constraints, the model's
options). The drift step compares:

* the running config with the study's: another config (a manual version, a rollback, an accepted version left
  unpublished) was not tuned on that workload;
* the deployment's tuning inputs with the study's: a changed objective or model makes the study stale whatever the
  trace;
* the new characterization with the study's, quantity by quantity (`analysis.drift.compare`, thresholds from the
  settings `drift_*`).

The trace's provenance (`provenance`: where it came from — `clients`, a capture of the servers, `upload` — and
whether the running config reshaped it) is recorded with the basis. A capture of the servers under a config that
reshapes the requests (`DeploymentKind.reshapes`: memcached under Chisel, which splits and merges them before the
watch sees them) is the client's traffic, not the application's: when the new trace or the study's is one, the
quantities are still computed and shown, but none is counted as workload drift (`reshaped` says why; capture from
the clients, `capture.source: clients`, to compare the application's requests whatever the mode). A config the
study chose and the nightly published is the running config the next night compares with: its own effect on the
requests is never workload drift.

Any of them → `changed` and the job re-tunes; none → the job records "workload unchanged: kept vN" and skips its
study (steps `tune` and `decide` `skipped`). A job that skipped its study records no basis: the next night compares
against the same study again, so a slow drift adds up against what the config was tuned on, never against
yesterday. `force` re-tunes anyway (the figures are still computed and reported). docs/drift.md.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select

from analysis.drift import Characterization, Thresholds, compare
from control.db import ConfigVersionRow, JobRow
from control.kinds import operations
from jobs.context import JobContext, JobFailed

__all__ = ["basis", "check", "config_sha", "inputs_of", "kept", "provenance", "skip_study", "step"]

#: The deployment's fields a study depends on besides the trace and the running config (`model`: the options of
#: the deployment's model the nightly builds, `control.model`).
INPUTS = ("kind", "server", "driver", "tables", "objective", "constraints", "model")


def _sha(value: Any) -> str:
    doc = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def config_sha(config: Any) -> str:
    """The fingerprint of a config (canonical JSON; None — no config — has one too)."""
    return _sha(config)


def inputs_of(dep: dict[str, Any], shape: dict[str, Any]) -> dict[str, str]:
    """Fingerprint of each tuning input of the deployment (`shape`: its model's options)."""
    values = {**{k: dep.get(k) for k in INPUTS if k != "model"}, "model": shape}
    return {k: _sha(values[k]) for k in INPUTS}


def provenance(dep: dict[str, Any], capture: dict[str, Any] | None) -> dict[str, Any]:
    """Where the nightly's trace came from (`capture`: the ingest step's record of its capture; None: an upload)
    and why the running config reshaped it (None: it holds the application's requests as far as tailtune knows —
    an upload is taken for the application's)."""
    if capture is None:
        return {"source": "upload", "reshaped": None}
    source = str(capture.get("source") or "watch")
    reshaped = None if source == "clients" else operations(dep["kind"]).reshapes(dep.get("current_config"))
    return {"source": source, "reshaped": reshaped}


def _running_version(s: Any, dep_id: int, config: Any) -> int | None:
    """The newest version of the deployment holding `config` (None: no stored version does)."""
    if config is None:
        return None
    want = config_sha(config)
    rows = s.execute(
        select(ConfigVersionRow.version, ConfigVersionRow.config)
        .where(ConfigVersionRow.deployment_id == dep_id)
        .order_by(ConfigVersionRow.version.desc())
    )
    return next((int(v) for v, c in rows if config_sha(c) == want), None)


def _last_study(s: Any, dep_id: int, job_id: int) -> tuple[int, dict[str, Any]] | None:
    """The newest succeeded nightly job of the deployment (not this one) whose study ran: (id, result)."""
    rows = s.execute(
        select(JobRow.id, JobRow.result)
        .where(
            JobRow.deployment_id == dep_id,
            JobRow.kind == "nightly",
            JobRow.status == "succeeded",
            JobRow.id != job_id,
        )
        .order_by(JobRow.finished_at.desc(), JobRow.id.desc())
        .execution_options(yield_per=100)
    )
    for jid, result in rows:
        if isinstance(result, dict) and isinstance(result.get("basis"), dict):
            return int(jid), result
    return None


def _v(version: Any) -> str:
    return f"v{version}" if isinstance(version, int) else "a config that is no stored version"


def _figure(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, int | float) else "n/a"


def _moved(name: str, q: dict[str, Any]) -> str:
    """One moved quantity in the drift's reason: its figure against its threshold, or why it moved otherwise."""
    value, threshold = q["value"], q["threshold"]
    if value is not None and value > threshold:
        return f"{name} ({q['statistic']} {_figure(value)} > {_figure(threshold)})"
    return f"{name} ({q['reason']})"


def check(
    ctx: JobContext, dep_id: int, dep: dict[str, Any], shape: dict[str, Any], analysis: str, *, force: bool,
    trace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The drift step's output: {changed, forced, against_version, against_job, reason, moved, inputs_changed,
    quantities, trace, reshaped}. `analysis`: the new characterization's directory, relative to TAILTUNE_HOME;
    `trace`: the new trace's `provenance`."""
    home = ctx.settings.home_dir
    current = dep.get("current_config")
    with ctx.db.session() as s:
        version = _running_version(s, dep_id, current)
        study = _last_study(s, dep_id, ctx.job_id)
    out: dict[str, Any] = {
        "changed": True, "forced": force, "against_version": version, "against_job": None, "reason": "",
        "moved": [], "inputs_changed": [], "quantities": {}, "trace": trace, "reshaped": None,
    }
    if study is None:
        out["reason"] = "no earlier study of this deployment to compare against"
        ctx.log(f"drift: {out['reason']}")
        return out
    job_id, result = study
    base: dict[str, Any] = result["basis"]
    out["against_job"] = job_id
    why: list[str] = []
    if base.get("config_sha256") != config_sha(current):
        why.append(f"the running config ({_v(version)}) is not the one job {job_id}'s study chose or kept "
                   f"({_v(base.get('version'))})")
    then, now = base.get("inputs_sha256") or {}, inputs_of(dep, shape)
    out["inputs_changed"] = sorted(k for k in now if then.get(k) != now[k])
    if out["inputs_changed"]:
        why.append(f"the deployment's {', '.join(out['inputs_changed'])} changed since job {job_id}'s study")
    try:
        new = Characterization.load(home / analysis)
    except (OSError, ValueError) as exc:
        raise JobFailed(f"the new characterization ({analysis}) cannot be read: {type(exc).__name__}") from None
    old_dir, old = result.get("analysis"), None
    if not isinstance(old_dir, str) or not old_dir:
        why.append(f"job {job_id} names no characterization")
    else:
        try:
            old = Characterization.load(home / old_dir)
        except FileNotFoundError:
            why.append(f"the characterization of job {job_id} ({old_dir}) is gone")
        except (OSError, ValueError) as exc:
            why.append(f"the characterization of job {job_id} ({old_dir}) cannot be read: {type(exc).__name__}")
    if old is not None:
        quantities = compare(old, new, Thresholds.of(ctx.settings))
        out["quantities"] = quantities
        out["moved"] = [n for n, q in quantities.items() if q["moved"]]
        for name, q in quantities.items():
            state = "moved" if q["moved"] else "unchanged"
            note = f" — {q['reason']}" if q["reason"] else ""
            ctx.log(f"drift: {name}: {q['statistic']} {_figure(q['value'])} (threshold {_figure(q['threshold'])}) "
                    f"{state}{note}")
        reshaped = _reshaped(job_id, trace, base.get("trace"))
        out["reshaped"] = reshaped
        if reshaped is not None:
            ctx.log(f"drift: not counted as workload drift: {reshaped}")
        elif out["moved"]:
            why.append(f"moved since job {job_id}'s study: {'; '.join(_moved(n, quantities[n]) for n in out['moved'])}")
    out["changed"] = bool(why)
    unchanged = (f"workload not compared with job {job_id}'s study: {out['reshaped']}" if out["reshaped"]
                 else f"workload unchanged since job {job_id}'s study")
    out["reason"] = "; ".join(why) if why else unchanged
    ctx.log(f"drift: {out['reason']}" + (" (force: re-tuning anyway)" if force and not why else ""))
    return out


def _reshaped(job_id: int, new: dict[str, Any] | None, old: Any) -> str | None:
    """Why the two traces' requests cannot be compared as the application's (None: they can)."""
    for which, p in (("the new trace", new), (f"job {job_id}'s trace", old)):
        if isinstance(p, dict) and p.get("reshaped"):
            return (f"{which} is a {p.get('source')} capture of the servers under a config that reshapes the "
                    f"requests ({p['reshaped']}): its requests are the client's, not the application's — capture "
                    "from the clients (capture.source: clients) to compare the workload")
    return None


def step(
    ctx: JobContext, dep_id: int, dep: dict[str, Any], shape: dict[str, Any], analysis: str, *, force: bool,
    trace: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The checkpointed `drift` step; None for a job resumed after its study finished without one (the study
    is kept)."""
    if ctx.done("tune") is not None and ctx.done("drift") is None:
        return None
    return ctx.step("drift", lambda: check(ctx, dep_id, dep, shape, analysis, force=force, trace=trace))


def kept(drift: dict[str, Any]) -> str:
    """The decision of a job that skipped its study."""
    version = drift.get("against_version")
    running = f"v{version}" if isinstance(version, int) else "the running config"
    if drift.get("reshaped"):
        return f"workload not compared (a capture the running config reshaped): kept {running}"
    return f"workload unchanged: kept {running}"


def skip_study(ctx: JobContext, drift: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Record the study's steps as skipped; the job's result with the drift figures and the decision."""
    reason = kept(drift)
    for name in ("tune", "decide"):
        ctx.skip(name, reason)
    ctx.log(f"decision: keep current — {reason}")
    return {**result, "drift": drift, "decision": {"accepted": False, "reason": reason, "version": None}}


def basis(
    ctx: JobContext, dep_id: int, dep: dict[str, Any], shape: dict[str, Any], decision: dict[str, Any], *,
    trace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a finished study stands for: the config it chose (the accepted version) or kept (the running
    config), the deployment's tuning inputs it ran with, and its trace's `provenance`. A later nightly compares
    against it."""
    with ctx.db.session() as s:
        if decision.get("accepted") and decision.get("version") is not None:
            version: int | None = int(decision["version"])
            config = s.scalar(
                select(ConfigVersionRow.config).where(
                    ConfigVersionRow.deployment_id == dep_id, ConfigVersionRow.version == version
                )
            )
        else:
            config = dep.get("current_config")
            version = _running_version(s, dep_id, config)
    return {"version": version, "config_sha256": config_sha(config), "inputs_sha256": inputs_of(dep, shape),
            "trace": trace}

