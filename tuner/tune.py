"""The whole tuning job: space → baseline → study (tracked) → references → verdict → recommendation document.

`run_tune(TuneRequest)` is what `tailtune tune`, the quickstart job and the benchmarks call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tailtune.base.errors import BadInputError
from tailtune.base.settings import Settings, get_settings
from tailtune.simulation.source import WorkloadSource
from tuner.evaluators import Evaluator, EvaluatorSpec, build_evaluator
from tuner.objective import Metrics, parse_objective
from tuner.recommend import (
    DEFAULT_BASELINE,
    PAPER_DEFAULTS,
    decide,
    metrics_block,
    pareto_front,
    pick_best,
    render,
)
from tuner.recommendation import Recommendation
from tuner.sampling import SamplingSpec
from tuner.space import Candidate, SearchSpace, apply_overrides, space_for
from tuner.study import StudyConfig, evaluate_candidate, run_study

__all__ = ["TuneRequest", "find_summary", "parse_candidate", "run_tune"]

_EVALUATORS = {"cassandra": "kvsim-cassandra", "memcached": "kvsim-memcached"}


@dataclass(frozen=True)
class TuneRequest:
    source: WorkloadSource
    deployment: str
    trials: int = 50
    seeds: int = 3
    objective: str = "p99"
    constraints: tuple[str, ...] = ()
    timeout_s: float | None = None
    jobs: int = 1
    study: str | None = None
    storage: str | None = None
    current: Candidate | None = None
    policies: tuple[str, ...] | None = None
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    summary: Mapping[str, Any] | None = None
    evaluator_options: Mapping[str, Any] = field(default_factory=dict)
    prefix: float = 0.25
    sampler_seed: int = 0
    mlflow: bool = True
    plots: bool = True
    sampling: SamplingSpec | None = None


def parse_candidate(text: str, source: str = "--current") -> Candidate:
    """`policy` or `policy:k=v,k=v` (e.g. `rein:k=4,range_factor=3`)."""
    policy, _, rest = text.partition(":")
    params: dict[str, int | float | str] = {}
    for i, item in enumerate(filter(None, (s.strip() for s in rest.split(","))), start=1):
        name, sep, value = item.partition("=")
        if not sep:
            raise BadInputError.single(source, f"expected NAME=VALUE, got {item!r}", field=f"param {i}")
        try:
            params[name.strip()] = float(value)
        except ValueError:
            params[name.strip()] = value.strip()
    if not policy.strip():
        raise BadInputError.single(source, "missing policy name", field="policy")
    return Candidate(policy.strip(), params)


def find_summary(source: WorkloadSource, settings: Settings) -> dict[str, Any] | None:
    """summary.json of a stored dataset, if `tailtune analyze` left one in a known place."""
    if source.dataset is None:
        return None
    from ingest.store import DatasetStore

    info = DatasetStore(settings).get(source.dataset)
    for p in (info.path / "summary.json", settings.home_dir / "analyses" / info.id / "summary.json"):
        if p.is_file():
            doc: dict[str, Any] = json.loads(p.read_text())
            return doc
    return None


def _study_name(req: TuneRequest, fp: Mapping[str, Any]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", req.source.label)[:60]
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:8]
    return f"{req.deployment}-{base}-{digest}"


def _filter_space(space: SearchSpace, ev: Evaluator) -> tuple[SearchSpace, list[str]]:
    ok = set(ev.policies())
    kept = tuple(p for p in space.policies if p.policy in ok)
    dropped = [p.policy for p in space.policies if p.policy not in ok]
    if not kept:
        raise BadInputError.single("--policies", f"none of the policies can be replayed (replayable: "
                                                 f"{sorted(ok)})", field="policies")
    return SearchSpace(space.deployment, kept), dropped


@dataclass
class _Job:
    """One tuning job's state as it moves through the stages of `run_tune`."""

    req: TuneRequest
    settings: Settings
    ev: Evaluator
    summary: Mapping[str, Any] | None
    space: SearchSpace
    dropped: list[str]
    objective: Any
    seeds: tuple[int, ...]
    baseline: Candidate
    base_res: dict[str, Any]
    config: StudyConfig
    tracker: Any = None


def run_tune(
    req: TuneRequest,
    *,
    settings: Settings | None = None,
    on_progress: Callable[[int, int, float | None], None] | None = None,
    evaluator: Evaluator | None = None,
) -> Recommendation:
    """Run the tuning job and return the recommendation (its `to_json()` is the `tune --json` object):
    space → baseline → tracking → study → references → verdict → recommendation."""
    settings = settings or get_settings()
    req, sampled = _sample(req, settings)
    job = _prepare(req, settings, evaluator)
    _start_tracking(job)
    paper = job.ev.reference(job.seeds[0]) or PAPER_DEFAULTS[req.deployment]
    tracker = job.tracker
    try:
        outcome = run_study(job.config, jobs=req.jobs, warm_start=(paper, job.baseline), timeout_s=req.timeout_s,
                            on_progress=on_progress,
                            on_trial=tracker.log_trial if tracker and tracker.run_id else None,
                            evaluator=job.ev if req.jobs == 1 else None)
    except BaseException:
        # stopped from outside (a cancelled job, Ctrl-C) or failed: the MLflow run says so instead of staying open
        if tracker is not None and tracker.run_id is not None:
            tracker.finish(status="KILLED")
        raise
    trials = outcome.study.get_trials(deepcopy=False)
    _log_trials(job, outcome.study, trials)
    rec = dataclasses.replace(_recommendation(job, trials, paper, outcome.wall_s), **sampled)
    if tracker is not None:
        rec = dataclasses.replace(rec, mlflow_run_id=tracker.run_id)
        _finish_tracking(job, rec, outcome.study, trials, paper)
    return rec


def _sample(req: TuneRequest, settings: Settings) -> tuple[TuneRequest, dict[str, Any]]:
    """With `req.sampling`: the request on the sampled trace (a Parquet file under TAILTUNE_HOME/samples, so the
    `reproduce` commands replay it) and the recommendation fields that say so. See docs/sampling.md."""
    spec = req.sampling
    fraction = spec.resolved_fraction() if spec is not None else 1.0
    if spec is None or fraction >= 1.0:
        return req, {}
    from tailtune.simulation.cassandra import CassandraDeployment
    from tuner import sampling

    if req.evaluator_options.get("use_timestamps") and req.deployment != "cassandra":
        raise BadInputError.single("--use-timestamps", "only the cassandra store replays trace timestamps",
                                   field="use_timestamps")
    path, info = sampling.sample_source(req.source, fraction, spec, settings)
    opts, factor = dict(req.evaluator_options), None
    if opts.get("use_timestamps"):  # the windows replayed at the whole trace's absolute rate
        factor = info.load_factor
        opts["load"] = float(opts.get("load") or CassandraDeployment().load) * factor
    summary = req.summary if req.summary is not None else find_summary(req.source, settings)
    new = dataclasses.replace(req, source=WorkloadSource(trace=str(path)), evaluator_options=opts, summary=summary)
    return new, {"source": req.source.label, "replayed_fraction": info.replayed_fraction,
                 "sampling": sampling.describe(info, spec, fraction, factor)}


def _prepare(req: TuneRequest, settings: Settings, evaluator: Evaluator | None) -> _Job:
    """Validates the request, builds the evaluator and the space, and replays the current config."""
    if req.deployment not in _EVALUATORS:
        raise BadInputError.single("command line", f"unknown store {req.deployment!r} (cassandra, memcached)",
                                   field="store")
    if req.seeds < 1:
        raise BadInputError.single("command line", "must be >= 1", field="seeds")
    summary = req.summary if req.summary is not None else find_summary(req.source, settings)
    ev = evaluator or build_evaluator(
        EvaluatorSpec(_EVALUATORS[req.deployment], {"source": req.source.as_dict(), **req.evaluator_options})
    )
    summary = ev.adapt_summary(summary)
    space = apply_overrides(space_for(req.deployment, summary), req.overrides,
                            policies=list(req.policies) if req.policies else None)
    space, dropped = _filter_space(space, ev)
    objective = parse_objective(req.objective, req.constraints)
    seeds = tuple(range(req.seeds))
    baseline = req.current or DEFAULT_BASELINE[req.deployment]
    base_res = evaluate_candidate(ev, baseline, seeds, objective)
    config = StudyConfig(
        name="pending", storage=req.storage or settings.resolved_optuna_storage, evaluator=ev.spec(),
        space=space, objective=objective, seeds=seeds, trials=req.trials, prefix=req.prefix,
        startup_trials=max(5, min(10, req.trials // 5)), sampler_seed=req.sampler_seed,
        baseline=baseline, baseline_metrics=Metrics.from_dict(base_res["metrics"]),
    )
    config = dataclasses.replace(config, name=req.study or _study_name(req, config.fingerprint()))
    return _Job(req, settings, ev, summary, space, dropped, objective, seeds, baseline, base_res, config)


def _start_tracking(job: _Job) -> None:
    """The MLflow parent run (started before the study when the study outlives the process)."""
    if not job.req.mlflow:
        return
    from tuner.study import open_storage, prepare_study
    from tuner.tracking import MlflowTracker

    req, config = job.req, job.config
    job.tracker = MlflowTracker(job.settings.resolved_mlflow_tracking_uri,
                                artifact_root=job.settings.home_dir / "mlartifacts")
    if config.storage in ("memory", ":memory:"):
        return
    job.tracker.start(
        prepare_study(config, open_storage(config.storage)),
        params={"source": req.source.label, "deployment": req.deployment, "objective": job.objective.spec,
                "constraints": ",".join(c.label for c in job.objective.constraints) or "-",
                "seeds": len(job.seeds), "trials": req.trials, "study": config.name,
                "baseline": job.baseline.label(), "dataset_id": req.source.dataset or "-"},
        documents={"search_space": job.space.as_dict(), "summary": dict(job.summary or {}),
                   "evaluator": job.ev.describe()},
    )


def _log_trials(job: _Job, study: Any, trials: Sequence[Any]) -> None:
    tracker = job.tracker
    if tracker is None:
        return
    if tracker.run_id is None:  # in-memory study: parent run only now
        tracker.start(study, params={"source": job.req.source.label, "deployment": job.req.deployment,
                                     "objective": job.objective.spec, "study": job.config.name},
                      documents={"search_space": job.space.as_dict(), "summary": dict(job.summary or {})})
    for t in trials:
        if t.state.name in ("COMPLETE", "PRUNED", "FAIL"):
            tracker.log_trial(t)


def _recommendation(job: _Job, trials: Sequence[Any], paper: Candidate, wall_s: float) -> Recommendation:
    """Best trial, references, verdict and the chosen config's figures."""
    req, ev, objective, seeds, base_res = job.req, job.ev, job.objective, job.seeds, job.base_res
    best_t = pick_best(trials, objective)
    best = Candidate.from_dict(best_t.user_attrs["candidate"]) if best_t is not None else None
    best_metrics = Metrics.from_dict(best_t.user_attrs["metrics"]) if best_t is not None else None
    best_per_seed = [v[0] for v in best_t.user_attrs["per_seed"]] if best_t is not None else None
    paper_res = evaluate_candidate(ev, paper, seeds, objective)
    batches = _batch_evidence(job, best) if len(seeds) == 1 else None
    paired = None
    if batches is not None and best is not None and batches[0] and batches[1]:
        paired = ([v[0] for v in batches[1][0]], [v[0] for v in batches[0][0]])
    verdict = decide(best, best_per_seed, best_metrics, job.baseline, [v[0] for v in base_res["per_seed"]],
                     Metrics.from_dict(base_res["metrics"]), objective, paired=paired)
    won = verdict.recommend and best is not None and best_t is not None
    chosen = best if won and best is not None else job.baseline
    chosen_res = best_t.user_attrs if won and best_t is not None else base_res
    ci, ci_method = list(chosen_res["ci"]), f"Student-t over {len(seeds)} seeds"
    if batches is not None:
        chosen_b = batches[1] if won else batches[0]
        if chosen_b:
            ci, ci_method = chosen_b[1], f"batch means over {len(chosen_b[0])} batches of one replay"
        else:
            ci, ci_method = [None] * len(objective.labels), "not estimated (one replay too short)"
    states: dict[str, int] = {}
    for t in trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    per_seed = chosen_res.get("per_seed_metrics") or []
    return Recommendation(
        policy=chosen.policy,
        params=metrics_block(chosen, {})["params"],
        verdict=verdict.label,
        reason=verdict.reason,
        p_value=verdict.p_value,
        improvement_pct=verdict.improvement_pct,
        expected={**{k: chosen_res["metrics"][k] for k in ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms")},
                  "ci": {objective.labels[i]: ci[i] for i in range(len(objective.labels))},
                  "ci_method": ci_method,
                  "seeds": list(seeds),
                  "per_seed": [{"seed": s, **m} for s, m in zip(seeds, per_seed, strict=False)]},
        best=(metrics_block(best, {**best_t.user_attrs["metrics"], "trial": best_t.number})
              if best is not None and best_t is not None else None),
        baseline=metrics_block(job.baseline, base_res["metrics"]),
        paper_default=metrics_block(paper, paper_res["metrics"]),
        objective=objective.spec,
        constraints=[c.label for c in objective.constraints],
        trials=len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]),
        trial_states=states,
        replays=sum(float(t.user_attrs.get("replays", 0.0)) for t in trials),
        study=job.config.name,
        storage=job.config.storage,
        deployment=req.deployment,
        source=req.source.label,
        policies_not_replayable=job.dropped,
        fanout=(job.summary or {}).get("fanout"),
        wall_s=wall_s,
        render=render(req.deployment, chosen),
        mlflow_run_id=None,
        tuned_for={**ev.deployment_record(), "seeds": list(seeds)},
        reproduce=[_command(a) for a in (ev.simulate_args(chosen, s) for s in seeds) if a],
        pareto_front=[{"trial": t.number, "values": list(t.values), **t.user_attrs.get("candidate", {})}
                      for t in pareto_front(trials)] if objective.multi else None,
    )


def _batch_evidence(
    job: _Job, best: Candidate | None
) -> tuple[tuple[list[list[float]], list[float]] | None, tuple[list[list[float]], list[float]] | None]:
    """One seed: (baseline, best) per-batch objective values and half-widths (None/empty: no batches)."""
    from tuner.evidence import batch_metrics, batch_values

    seed, warm = job.seeds[0], job.ev.warmup_fraction()

    def of(cand: Candidate) -> tuple[list[list[float]], list[float]] | None:
        b = batch_metrics(job.ev.latencies_ms(cand, seed), warm)
        return batch_values(b, job.objective) if b else None

    return of(job.baseline), (of(best) if best is not None else None)


def _finish_tracking(job: _Job, rec: Recommendation, study: Any, trials: Sequence[Any], paper: Candidate) -> None:
    figures: dict[str, Any] = {}
    if job.req.plots:
        best = Candidate.from_dict(rec.best) if rec.best is not None else None
        figures = _figures(trials, job.objective.labels[0], study, job.ev, job.baseline, best, paper, job.seeds[0])
    job.tracker.log_result(rec.to_json(), figures)
    job.tracker.finish()
    import matplotlib.pyplot as plt

    plt.close("all")


def _command(args: Sequence[str] | None) -> str:
    import shlex

    return shlex.join(["tailtune", *(args or ()), "--json"])


def _figures(trials: Sequence[Any], label: str, study: Any, ev: Evaluator, baseline: Candidate,
             best: Candidate | None, paper: Candidate, seed: int) -> dict[str, Any]:
    from tuner import plots

    figs: dict[str, Any] = {
        "optimization_history": plots.history_figure(trials, label),
        "k_r_heatmap": plots.kr_heatmap_figure(trials, label),
    }
    try:
        import warnings

        import optuna

        with warnings.catch_warnings():
            # conditional parameters are asked in few trials each: optuna warns per parameter; the plot says enough
            warnings.simplefilter("ignore", UserWarning)
            imp = optuna.importance.get_param_importances(study, target=lambda t: t.values[0])
        figs["param_importance"] = plots.importance_figure(imp)
    except (RuntimeError, ValueError, ZeroDivisionError):
        figs["param_importance"] = None  # too few complete trials or no parameter varies
    curves = {f"current: {baseline.label()}": ev.latencies_ms(baseline, seed),
              f"paper default: {paper.label()}": ev.latencies_ms(paper, seed)}
    if best is not None:
        curves[f"best: {best.label()}"] = ev.latencies_ms(best, seed)
    figs["latency_cdf"] = plots.cdf_figure(curves)
    return figs
