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

from base.errors import BadInputError
from base.secrets import redact_url
from base.settings import Settings, get_settings
from simulation.kinds import KINDS, find_kind, kind_names, model_kind
from simulation.source import WorkloadSource
from tuner.confirm import Confirmation, confirm, holdout_seeds
from tuner.error_bound import combined_bound
from tuner.evaluators import Evaluator, EvaluatorSpec, build_evaluator
from tuner.flat import idle_reason
from tuner.holdout import Split, split_source
from tuner.kinds import check_timestamps, space_for, tuner_kind
from tuner.objective import Metrics, parse_objective
from tuner.peak_check import PeakReplays, PeakStretch
from tuner.recommend import Verdict, metrics_block, pareto_front, pick_best, rank_trials
from tuner.recommendation import Recommendation
from tuner.sampling import SamplingSpec
from tuner.space import Candidate, SearchSpace, apply_overrides, patched_space
from tuner.study import StudyConfig, evaluate_candidate, prefix_rungs, run_study

__all__ = [
    "SERVERS",
    "TuneRequest",
    "find_summary",
    "parse_candidate",
    "patched_defaults",
    "run_tune",
    "stock_defaults",
]

#: The server builds the tuner knows (a kind's `servers`, `simulation.kinds`): `stock` (released Cassandra: the
#: stock knobs are tuned) or `rein-patched` (a node with the papers' schedulers: the scheduler space is tuned). The
#: other one is searched as the alternative.
SERVERS = ("stock", "rein-patched")
#: The key of each server kind under the recommendation's `alternatives`.
_ALT_KEY = {"stock": "stock", "rein-patched": "patched"}


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
    #: Cassandra: `stock` (default) or `rein-patched`; None = the default. Not a memcached setting.
    server: str | None = None
    #: Cassandra: the application's driver (`java4`, `python`): which driver knobs exist.
    driver: str = "java4"
    #: Cassandra: the tables (`keyspace.table`) the rendered CQL alters.
    tables: tuple[str, ...] = ()
    #: Cassandra: trials of the other server kind's study (the alternative); None = `trials`, 0 = not searched.
    alternative_trials: int | None = None
    sampling: SamplingSpec | None = None
    #: A deployment's tune: where each model input came from (`control.model`), recorded in `tuned_for`
    #: as `model_sources` (input → source) and `model` (each input's value, source, time and how).
    model: Mapping[str, Any] | None = None
    #: Points per latency CDF recorded in the recommendation's `cdfs` (current, recommended or best found, the
    #: other server kind's best), each one more replay of the first seed; 0: none (`tune --json` records none).
    cdf_points: int = 0

    @classmethod
    def for_deployment(cls, source: WorkloadSource, fields: Mapping[str, Any], **run: Any) -> TuneRequest:
        """A registered deployment's request: `fields` as `control.tune_request` makes them (its kind,
        server, driver, tables, model and evaluator options, and its current config `{policy, params}` or None),
        `run` the other fields (trials, seeds, objective, study, ...)."""
        current = fields.get("current")
        cand = Candidate(str(current["policy"]), dict(current.get("params") or {})) if current else None
        return cls(source=source, **{**fields, "current": cand}, **run)


def _model_record(req: TuneRequest) -> dict[str, Any]:
    """`tuned_for`'s model fields: each input's source, and the record behind it (a deployment's tune only)."""
    if req.model is None:
        return {}
    return {"model_sources": dict(req.model.get("sources") or {}), "model": dict(req.model)}


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (`speculative_retry=MIN(99p,5ms),driver=python` is two items)."""
    items: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
            continue
        depth += (ch == "(") - (ch == ")")
        cur.append(ch)
    items.append("".join(cur))
    return items


def parse_candidate(text: str, source: str = "--current") -> Candidate:
    """`policy` or `policy:k=v,k=v` (e.g. `rein:k=4,range_factor=3`, `stock:speculative_retry=MIN(99p,5ms)`)."""
    policy, _, rest = text.partition(":")
    params: dict[str, int | float | str] = {}
    for i, item in enumerate(filter(None, (s.strip() for s in _split_top(rest))), start=1):
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


def stock_defaults(driver: str, current: Mapping[str, Any] | None = None) -> Candidate:
    """The stock candidate with every searched knob at Cassandra's and `driver`'s default, then `current`'s
    values on top (the user's current settings)."""
    from simulation.stock_knobs import stock_knobs

    params: dict[str, int | float | str] = {k.name: k.default_for(driver) for k in stock_knobs(driver)}
    params.update({k: v for k, v in (current or {}).items() if k != "driver"})
    for k in stock_knobs(driver):  # a knob that exists only with another's value (multiget.chunk with `in`)
        if any(params.get(n) != v for n, v in k.only_with):
            params.pop(k.name, None)
    params["driver"] = driver
    return Candidate("stock", params)


def patched_defaults(cand: Candidate, driver: str) -> Candidate:
    """A Rein-patched server's candidate with every stock knob of `driver` it leaves unset at Cassandra's and the
    driver's default (a patched Cassandra keeps its coordinator: `speculative_retry = 99p`), `driver` stated. The
    snitch knobs stay unset (the selector's own defaults); a candidate of a policy that takes no knobs
    (duplicate, speculative) is returned as it is."""
    from simulation.policies import NO_COORDINATOR
    from simulation.stock import SNITCH_KNOBS
    from simulation.stock_knobs import stock_knobs

    if cand.policy in NO_COORDINATOR or cand.params.get("queue") in NO_COORDINATOR:
        return cand
    knobs = [k for k in stock_knobs(driver) if k.name not in SNITCH_KNOBS]
    params: dict[str, int | float | str] = {k.name: k.default_for(driver) for k in knobs}
    params.update({k: v for k, v in cand.params.items() if k != "driver"})
    for k in knobs:  # a knob that exists only with another's value (multiget.chunk with `in`)
        if any(params.get(n) != v for n, v in k.only_with):
            params.pop(k.name, None)
    params["driver"] = driver
    return Candidate(cand.policy, params)


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
    server: str | None = None
    #: One seed: each candidate's batch means, replayed once however many verdicts read them.
    batches: dict[Any, Any] = field(default_factory=dict)
    #: A sampled study: the trace's burst stretches, over which the best candidates are checked for storms.
    peak: PeakStretch | None = None
    peak_ev: Evaluator | None = None
    #: The peak check of each study (by study name): the trials to pick from and the block, made once.
    peak_checks: dict[str, Any] = field(default_factory=dict)
    #: The replays over the burst stretches, shared by the studies' checks.
    peak_replays: PeakReplays = field(default_factory=PeakReplays)
    #: Where the verdict is confirmed (tuner/confirm.py): the held-out later stretch (or the study's own trace)
    #: and its record; the evaluator on it, built once.
    confirm_source: WorkloadSource | None = None
    holdout: dict[str, Any] | None = None
    confirm_ev: Evaluator | None = None


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
    original = req.source
    req, split = _split(req, settings, evaluator)
    req, sampled, peak = _sample(req, settings)
    job = _prepare(req, settings, evaluator)
    job.peak = peak
    job.confirm_source = split.late if split is not None else None
    job.holdout = split.record if split is not None else None
    alt = _prepare_alternative(job)
    alt_trials = alt.config.trials if alt is not None else 0
    _start_tracking(job)
    paper = job.ev.reference(job.seeds[0]) or tuner_kind(req.deployment).paper_default
    if "rein-patched" in (job.server, alt.server if alt is not None else None):
        paper = patched_defaults(paper, req.driver)
    if req.mlflow and req.plots:  # and the paper default, replayed by the references
        job.ev.keep_latencies([paper], job.seeds[0])
    tracker = job.tracker
    main_progress = None
    if on_progress is not None:
        report = on_progress

        def main_progress(done: int, total: int, best: float | None) -> None:
            report(done, total + alt_trials, best)

    try:
        outcome = run_study(job.config, jobs=req.jobs, warm_start=(paper, job.baseline), timeout_s=req.timeout_s,
                            on_progress=main_progress,
                            on_trial=tracker.log_trial if tracker and tracker.run_id else None,
                            evaluator=job.ev if req.jobs == 1 else None)
        alt_block = _run_alternative(job, alt, paper, outcome.wall_s, on_progress) if alt is not None else None
    except BaseException:
        # stopped from outside (a cancelled job, Ctrl-C) or failed: the MLflow run says so instead of staying open
        if tracker is not None and tracker.run_id is not None:
            tracker.finish(status="KILLED")
        raise
    trials = outcome.study.get_trials(deepcopy=False)
    _log_trials(job, outcome.study, trials)
    rec, peak_block = _recommendation(job, trials, paper, outcome.wall_s)
    if peak_block is not None:
        sampled["sampling"] = {**sampled["sampling"], "peak_check": peak_block,
                               "estimate": _estimate(job, Candidate(rec.policy, rec.params))}  # fmt: skip
    rec = dataclasses.replace(rec, **sampled)
    bound = combined_bound(rec.expected, rec.sampling)
    if bound is not None:
        rec = dataclasses.replace(rec, expected={**rec.expected, "error_bound": bound})
    if split is not None:
        rec = dataclasses.replace(rec, source=original.label)
    if job.server is not None:
        rec = _with_alternatives(job, rec, _best_block(job, job, trials), alt_block)
    if req.cdf_points > 0:
        rec = dataclasses.replace(rec, cdfs=_cdfs(job, rec, req.cdf_points))
    if tracker is not None:
        rec = dataclasses.replace(rec, mlflow_run_id=tracker.run_id)
        _finish_tracking(job, rec, outcome.study, trials, paper)
    return rec


def _server(req: TuneRequest) -> str | None:
    """The server build tuned: None for a kind with a single build (`ModelKind.servers` empty)."""
    servers = model_kind(req.deployment, field="store").servers
    if not servers:
        if req.server is not None:
            raise BadInputError.single("command line", "--server is a Cassandra setting (stock or rein-patched)",
                                       field="server")
        return None
    server = req.server or _implied_server(req)
    if server not in servers:
        raise BadInputError.single("command line", f"unknown server {server!r} (one of {', '.join(servers)})",
                                   field="server")
    return server


def _implied_server(req: TuneRequest) -> str:
    """No `--server`: `rein-patched` when the request names patched policies (a patched `--current`, or
    `--policies`: only a patched server runs them), else `stock`."""
    if req.current is not None and req.current.policy != "stock":
        return "rein-patched"
    if req.policies and any(p != "stock" for p in req.policies):
        return "rein-patched"
    return "stock"


def _space_and_baseline(
    req: TuneRequest, server: str | None, summary: Mapping[str, Any] | None, *, main: bool
) -> tuple[SearchSpace, Candidate]:
    """The search space and the current config of `server` (the main study's: `req.current` is the user's;
    the alternative's: that server's defaults)."""
    stock_ov = {k: v for k, v in req.overrides.items() if k.startswith("stock.")}
    if server == "stock":
        from simulation.stock_knobs import DRIVERS
        from tuner.space import stock_space

        if req.driver not in DRIVERS:
            raise BadInputError.single("command line", f"unknown driver {req.driver!r} (one of "
                                                       f"{', '.join(DRIVERS)})", field="driver")
        space = apply_overrides(stock_space(req.driver), stock_ov)
        cur = req.current if main else None
        if cur is not None and cur.policy != "stock":
            raise BadInputError.single("--current", f"{cur.policy!r} needs a patched server: with --server stock "
                                                    "the current config is stock:KNOB=VALUE,...", field="policy")
        return space, stock_defaults(req.driver, cur.params if cur is not None else None)
    others = {k: v for k, v in req.overrides.items() if k not in stock_ov}
    patched = [p for p in req.policies or () if p != "stock"]
    space = space_for(req.deployment, summary)
    if server == "rein-patched":
        space = patched_space(space, req.driver)
    space = apply_overrides(space, others, policies=patched or None)
    cur = req.current if main else None
    if cur is not None and cur.policy == "stock":
        raise BadInputError.single("--current", "a stock config is current: use --server stock", field="policy")
    baseline = cur or tuner_kind(req.deployment).baseline
    return space, patched_defaults(baseline, req.driver) if server == "rein-patched" else baseline


def _sample(req: TuneRequest, settings: Settings) -> tuple[TuneRequest, dict[str, Any], PeakStretch | None]:
    """With `req.sampling`: the request on the sampled trace (a Parquet file under TAILTUNE_HOME/samples, so the
    `reproduce` commands replay it), the recommendation fields that say so, and the trace's burst stretches of
    the same total length around its most intense bursts for the peak check. See docs/sampling.md."""
    spec = req.sampling
    fraction = spec.resolved_fraction() if spec is not None else 1.0
    if spec is None or fraction >= 1.0:
        return req, {}, None
    from simulation.cassandra import CassandraDeployment
    from tuner import sampling

    if req.evaluator_options.get("use_timestamps"):
        check_timestamps(req.deployment)
    def at_trace_rate(part: sampling.SampleInfo) -> tuple[dict[str, Any], float | None]:
        """The evaluator options replaying `part` at the whole trace's absolute rate, and the load factor."""
        opts = dict(req.evaluator_options)
        if not opts.get("use_timestamps"):
            return opts, None
        if "load" in opts and opts["load"] is None:
            return opts, None  # the part's own timestamps as they are: the trace's absolute rate already
        opts["load"] = float(opts.get("load") or CassandraDeployment().load or 0.75) * part.load_factor
        return opts, part.load_factor

    path, info = sampling.sample_source(req.source, fraction, spec, settings)
    opts, factor = at_trace_rate(info)
    peak_path, peak_info = sampling.peak_source(req.source, fraction, settings)
    peak_opts, peak_factor = at_trace_rate(peak_info)
    peak = PeakStretch(str(peak_path), tuple((w.start, w.end) for w in peak_info.windows), peak_info.requests,
                       peak_info.replayed_fraction, peak_opts, peak_factor)  # fmt: skip
    summary = req.summary if req.summary is not None else find_summary(req.source, settings)
    new = dataclasses.replace(req, source=WorkloadSource(trace=str(path)), evaluator_options=opts, summary=summary)
    return new, {"source": req.source.label, "replayed_fraction": info.replayed_fraction,
                 "sampling": sampling.describe(info, spec, fraction, factor)}, peak


def _split(req: TuneRequest, settings: Settings, evaluator: Evaluator | None) -> tuple[TuneRequest, Split | None]:
    """A trace with timestamps: the request on its earlier part, and the held-out later part the verdict is
    confirmed on (tuner/holdout.py). Not split: a given evaluator (it holds its own source), a sampled tune (it
    confirms on fresh seeds of its sample), a trace without timestamps or too short."""
    if evaluator is not None or req.sampling is not None or settings.tune_holdout_fraction <= 0:
        return req, None
    split = split_source(req.source, settings.tune_holdout_fraction, settings,
                         min_requests=settings.tune_holdout_min_requests)
    if split is None:
        return req, None
    summary = req.summary if req.summary is not None else find_summary(req.source, settings)
    return dataclasses.replace(req, source=split.early, summary=summary), split


def _confirmed(main: _Job, best: Candidate | None, best_metrics: Metrics | None) -> tuple[Verdict, Confirmation | None]:
    """The verdict on `best` against `main`'s current config, decided on held-out replays (tuner/confirm.py):
    fresh seeds, and the later stretch of a trace with timestamps. A best that is the current config, or that
    breaks a constraint on the study's figures, is not replayed again."""
    base_metrics = Metrics.from_dict(main.base_res["metrics"])
    if best is None or best_metrics is None:
        return Verdict(False, "no trial met the constraints", None, None), None
    if best.key() == main.baseline.key():
        return Verdict(False, "the current config is already the best found", None, 0.0), None
    violated = main.objective.violated(best_metrics, base_metrics)
    if violated:
        return Verdict(False, f"constraint(s) violated vs current: {', '.join(violated)}", None, None), None
    if main.confirm_ev is None:
        source = main.confirm_source or main.req.source
        spec = main.ev.spec()
        main.confirm_ev = (main.ev if main.confirm_source is None
                           else build_evaluator(EvaluatorSpec(spec.kind, {**spec.options, "source": source.as_dict()})))
    seeds = holdout_seeds(max(main.settings.tune_confirm_seeds, len(main.seeds)))
    conf = confirm(main.confirm_ev, best, main.baseline, seeds, main.objective,
                   alpha=main.settings.tune_confirm_alpha, holdout=main.holdout)
    if conf.improvement_pct is None:
        return Verdict(False, f"{conf.sentence()}: nothing to decide on", None, None), conf
    if conf.significant:
        return Verdict(True, f"{conf.sentence()}: better than the current config", conf.p_value,
                       conf.improvement_pct), conf
    why = ("no improvement" if conf.improvement_pct <= 0
           else f"not significant (p ≥ {conf.alpha:g})")
    return Verdict(False, f"{conf.sentence()}: {why}", conf.p_value, conf.improvement_pct), conf


def _peak_checked(main: _Job, job: _Job, trials: Sequence[Any]) -> tuple[list[Any], dict[str, Any] | None]:
    """A sampled study: the trials the recommendation may be picked from (those of the best-ranked candidate that
    does not storm over the burst stretches, else one for the calm twin replayed on the sample:
    tuner/peak_check.py) and the check's block; else `trials` and None. Made once per study."""
    if main.peak is None:
        return list(trials), None
    if job.config.name in main.peak_checks:
        return main.peak_checks[job.config.name]  # type: ignore[no-any-return]
    from tuner import peak_check

    if main.peak_ev is None:
        main.peak_ev = build_evaluator(EvaluatorSpec(model_kind(main.req.deployment).evaluator, {
            "source": WorkloadSource(trace=main.peak.path).as_dict(), **main.peak.options}))  # fmt: skip
    result = peak_check.check(main.peak_ev, main.peak, trials, main.objective, main.baseline, main.seeds,
                              top=peak_check.TOP, limit=peak_check.LIMIT, factor=peak_check.STORM_FACTOR,
                              replays=main.peak_replays)  # fmt: skip
    pool = [t for t in trials if Candidate.from_dict(t.user_attrs["candidate"]).key() in result.allowed]
    if result.fallback is not None:
        if job is main:  # the estimate (`_estimate`) reads the twin's latencies on the first seed: kept, not replayed
            main.ev.keep_latencies([result.fallback], main.seeds[0])
        pool = [_twin_trial(main, result.fallback, 1 + max((t.number for t in trials), default=-1))]
    main.peak_checks[job.config.name] = (pool, result.block)
    return pool, result.block


def _twin_trial(main: _Job, twin: Candidate, number: int) -> Any:
    """A complete trial of `twin` replayed on the sample on the study's seeds, as the study records one."""
    import optuna

    res = evaluate_candidate(main.ev, twin, main.seeds, main.objective)
    attrs = {"candidate": twin.as_dict(), "twin": True, **{k: res[k] for k in ("per_seed_metrics", "per_seed",
                                                                               "metrics", "ci")}}  # fmt: skip
    if main.objective.constraints:
        attrs["constraints"] = main.objective.constraint_values(Metrics.from_dict(res["metrics"]),
                                                                Metrics.from_dict(main.base_res["metrics"]))
    trial = optuna.trial.create_trial(values=list(res["values"]), user_attrs=attrs)
    trial.number = number
    return trial


def _with_storm_evidence(
    verdict: Verdict, block: Mapping[str, Any] | None, best: Candidate | None, current: Candidate, objective: Any,
    best_metrics: Metrics | None, current_metrics: Metrics,
) -> Verdict:
    """A "keep current" verdict turned into "recommend" when the current config storms over the burst stretches and
    the best does not, significantly (`peak_check.storm_verdict`), unless the best violates a constraint."""
    if verdict.recommend or block is None or best is None or best_metrics is None:
        return verdict
    if objective.violated(best_metrics, current_metrics):
        return verdict
    from tuner.peak_check import storm_verdict

    return storm_verdict(block, best, current) or verdict


def _estimate(job: _Job, cand: Candidate) -> dict[str, Any]:
    """The whole trace's estimate for `cand` (tuner/peak_check.py `estimate`): its measured latencies on the sample
    and over the burst stretches, per seed, after each replay's warm-up."""
    from tuner.evidence import measured
    from tuner.peak_check import estimate

    assert job.peak is not None and job.peak_ev is not None
    sample, bursts = job.ev, job.peak_ev
    return estimate([measured(sample.latencies_ms(cand, s), sample.warmup_fraction()) for s in job.seeds],
                    [measured(bursts.latencies_ms(cand, s), bursts.warmup_fraction()) for s in job.seeds],
                    job.peak.share)  # fmt: skip


#: The verdict when every checked candidate but the current config storms over the burst stretches.
_ALL_STORM = Verdict(False, "every candidate checked storms over the trace's burst stretches (sampling: peak check)",
                     None, None)  # fmt: skip


def _prepare(req: TuneRequest, settings: Settings, evaluator: Evaluator | None) -> _Job:
    """Validates the request, builds the evaluator and the space, and replays the current config."""
    kind = find_kind(req.deployment)
    if kind is None:
        raise BadInputError.single("command line", f"unknown store {req.deployment!r} ({', '.join(kind_names())})",
                                   field="store")
    if req.seeds < 1:
        raise BadInputError.single("command line", "must be >= 1", field="seeds")
    summary = req.summary if req.summary is not None else find_summary(req.source, settings)
    ev = evaluator or build_evaluator(
        EvaluatorSpec(kind.evaluator, {"source": req.source.as_dict(), **req.evaluator_options})
    )
    summary = ev.adapt_summary(summary)
    server = _server(req)
    space, baseline = _space_and_baseline(req, server, summary, main=True)
    space, dropped = _filter_space(space, ev)
    objective = parse_objective(req.objective, req.constraints)
    seeds = tuple(range(req.seeds))
    if req.mlflow and req.plots:  # the latency CDF figure shows the baseline on the first seed
        ev.keep_latencies([baseline], seeds[0])
    base_res = evaluate_candidate(ev, baseline, seeds, objective)
    n = ev.replay_requests()
    rungs = prefix_rungs(req.prefix, n, settings.tune_min_rung_requests) if n else ()
    config = StudyConfig(
        name="pending", storage=req.storage or settings.resolved_optuna_storage, evaluator=ev.spec(),
        space=space, objective=objective, seeds=seeds, trials=req.trials, prefix=req.prefix,
        rungs=rungs if len(rungs) > 1 else (),
        startup_trials=max(5, min(10, req.trials // 5)), sampler_seed=req.sampler_seed,
        baseline=baseline, baseline_metrics=Metrics.from_dict(base_res["metrics"]),
    )
    config = dataclasses.replace(config, name=req.study or _study_name(req, config.fingerprint()))
    return _Job(req, settings, ev, summary, space, dropped, objective, seeds, baseline, base_res, config,
                server=server)


def _prepare_alternative(main: _Job) -> _Job | None:
    """The other server kind's study (Cassandra): its space, its defaults as its current config, same seeds,
    objective and evaluator; None when not searched (`alternative_trials=0`) or not Cassandra."""
    req = main.req
    trials = req.trials if req.alternative_trials is None else req.alternative_trials
    if main.server is None or trials <= 0:
        return None
    server = next(s for s in SERVERS if s != main.server)
    space, baseline = _space_and_baseline(req, server, main.summary, main=False)
    space, dropped = _filter_space(space, main.ev)
    base_res = evaluate_candidate(main.ev, baseline, main.seeds, main.objective)
    config = dataclasses.replace(
        main.config, space=space, trials=trials, startup_trials=max(5, min(10, trials // 5)), baseline=baseline,
        baseline_metrics=Metrics.from_dict(base_res["metrics"]),
    )
    name = f"{req.study}-{_ALT_KEY[server]}" if req.study else _study_name(req, config.fingerprint())
    config = dataclasses.replace(config, name=name)
    return _Job(req, main.settings, main.ev, main.summary, space, dropped, main.objective, main.seeds, baseline,
                base_res, config, server=server)


def _run_alternative(
    main: _Job, alt: _Job, paper: Candidate, main_wall_s: float,
    on_progress: Callable[[int, int, float | None], None] | None,
) -> dict[str, Any]:
    """Runs the alternative study; its best trial with figures, CI and the verdict against the main study's
    current config (what switching server kind would change)."""
    done_main = main.config.trials
    report = on_progress

    def progress(done: int, total: int, best: float | None) -> None:
        if report is not None:
            report(done_main + done, done_main + total, best)

    outcome = run_study(alt.config, jobs=main.req.jobs, warm_start=(alt.baseline, paper),
                        timeout_s=main.req.timeout_s, on_progress=progress,
                        evaluator=alt.ev if main.req.jobs == 1 else None)
    trials = outcome.study.get_trials(deepcopy=False)
    return _best_block(main, alt, trials)


def _best_block(main: _Job, job: _Job, trials: Sequence[Any]) -> dict[str, Any]:
    """`{policy, params, p50_ms, …, ci, ci_method, verdict, reason, p_value, improvement_pct, trials, study}`
    of the best trial of `job`'s study, judged against `main`'s current config."""
    objective, seeds = main.objective, main.seeds
    pool, peak_block = _peak_checked(main, job, trials)
    best_t = pick_best(pool, objective)
    done = len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")])
    head: dict[str, Any] = {"server": job.server, "trials": done, "study": job.config.name}
    if peak_block is not None:
        head["peak_check"] = peak_block
    if best_t is None:
        reason = _ALL_STORM.reason if rank_trials(trials, objective) else "no trial met the constraints"
        return {**head, "policy": None, "params": {}, "verdict": "keep current", "reason": reason}
    best = Candidate.from_dict(best_t.user_attrs["candidate"])
    per_seed = [v[0] for v in best_t.user_attrs["per_seed"]]
    paired = None
    ci, ci_method = list(best_t.user_attrs["ci"]), f"Student-t over {len(seeds)} seeds"
    if len(seeds) == 1:
        base_b, best_b = _batch_evidence(main, best)
        if base_b and best_b:
            paired = ([v[0] for v in best_b[0]], [v[0] for v in base_b[0]])
            ci, ci_method = best_b[1], f"batch means over {len(best_b[0])} batches of one replay"
        else:
            ci, ci_method = [None] * len(objective.labels), "not estimated (one replay too short)"
    del per_seed, paired  # the study's own figures give the block's interval, not its verdict
    verdict, conf = _confirmed(main, best, Metrics.from_dict(best_t.user_attrs["metrics"]))
    verdict = _with_storm_evidence(verdict, peak_block, best, main.baseline, objective,
                                   Metrics.from_dict(best_t.user_attrs["metrics"]),
                                   Metrics.from_dict(main.base_res["metrics"]))  # fmt: skip
    return {
        **head,
        **metrics_block(best, best_t.user_attrs["metrics"]),
        "ci": {objective.labels[i]: ci[i] for i in range(len(objective.labels))},
        "ci_method": ci_method,
        "verdict": verdict.label,
        "reason": verdict.reason,
        "p_value": verdict.p_value,
        "improvement_pct": verdict.improvement_pct,
        "confirmation": conf.as_dict() if conf is not None else None,
    }


def _with_alternatives(job: _Job, rec: Recommendation, main_block: dict[str, Any],
                       alt_block: dict[str, Any] | None) -> Recommendation:
    """`server` and `alternatives.{stock,patched}`: the main study's best (its verdict is the recommendation's)
    and the other server kind's best, both judged against the current config; a stock recommendation renders
    as the CQL, yaml, JMX and driver settings a stock deployment applies, a patched one carrying stock knobs as
    its scheduler block next to those settings."""
    assert job.server is not None
    other = next(s for s in SERVERS if s != job.server)
    alternatives: dict[str, Any] = {
        _ALT_KEY[job.server]: {**main_block, "verdict": rec.verdict, "reason": rec.reason},
        _ALT_KEY[other]: alt_block if alt_block is not None else {
            "server": other, "policy": None, "params": {}, "verdict": "not searched",
            "reason": "alternative_trials is 0"},
    }
    render = rec.render
    from simulation.stock import COORDINATOR_KNOBS

    knobs = {k: v for k, v in rec.params.items() if k in COORDINATOR_KNOBS}
    if rec.policy == "stock" or knobs:
        from simulation.stock_render import render_stock

        tables = list(job.req.tables) or ["<keyspace>.<table>"]
        stock = render_stock(knobs if rec.policy != "stock" else rec.params, tables=tables, driver=job.req.driver)
        # a patched recommendation: the scheduler block, then the stock knobs it carries
        render = stock if rec.policy == "stock" else {**rec.render, **stock}
    return dataclasses.replace(rec, server=job.server, alternatives=alternatives, render=render)


def _cdfs(job: _Job, rec: Recommendation, points: int) -> dict[str, Any]:
    """The latency CDFs behind the verdict, on the first seed's measured requests (after the warm-up cut): the
    current config, the recommended one (or, when the verdict keeps the current config, the best found) and, for
    Cassandra, the other server kind's best. At most `points` points per curve, the tail drawn exactly
    (`plots.cdf_points`); latencies to 4 significant digits."""
    from tuner.evidence import measured
    from tuner.plots import cdf_points

    seed, warm = job.seeds[0], job.ev.warmup_fraction()
    wanted: list[tuple[str, str, Candidate]] = [("current", "current config", job.baseline)]
    if rec.recommends:
        wanted.append(("recommended", "recommended", Candidate(rec.policy, dict(rec.params))))
    elif rec.best is not None:
        wanted.append(("best", "best found (not recommended)", Candidate.from_dict(rec.best)))
    other = next((k for s, k in _ALT_KEY.items() if s != job.server), None) if job.server is not None else None
    alt = (rec.alternatives or {}).get(other or "") or {}
    if alt.get("policy"):
        alt_cand = Candidate(str(alt["policy"]), dict(alt.get("params") or {}))
        wanted.append((str(other), f"{other} alternative", alt_cand))
    curves = []
    for name, label, cand in wanted:
        x, y = cdf_points(measured(job.ev.latencies_ms(cand, seed), warm), points)
        curves.append({"name": name, "label": f"{label}: {cand.label()}", "policy": cand.policy,
                       "latency_ms": [float(f"{v:.4g}") for v in x], "cdf": [float(f"{v:.6g}") for v in y]})
    return {"seed": seed, "warmup": warm, "curves": curves}


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


def _recommendation(
    job: _Job, trials: Sequence[Any], paper: Candidate, wall_s: float
) -> tuple[Recommendation, dict[str, Any] | None]:
    """Best trial (of those the peak check leaves, when sampled), references, verdict and the chosen config's
    figures; and the peak check's block (None: the whole trace was replayed)."""
    req, ev, objective, seeds, base_res = job.req, job.ev, job.objective, job.seeds, job.base_res
    pool, peak_block = _peak_checked(job, job, trials)
    best_t = pick_best(pool, objective)
    best = Candidate.from_dict(best_t.user_attrs["candidate"]) if best_t is not None else None
    best_metrics = Metrics.from_dict(best_t.user_attrs["metrics"]) if best_t is not None else None
    best_per_seed = [v[0] for v in best_t.user_attrs["per_seed"]] if best_t is not None else None
    paper_res = evaluate_candidate(ev, paper, seeds, objective)
    batches = _batch_evidence(job, best) if len(seeds) == 1 else None
    del best_per_seed  # the study's per-seed figures stay its evidence; the verdict is decided held out
    verdict, conf = _confirmed(job, best, best_metrics)
    all_storm = best_t is None and peak_block is not None and bool(rank_trials(trials, objective))
    if all_storm:
        verdict = _ALL_STORM
    verdict = _with_storm_evidence(verdict, peak_block, best, job.baseline, objective, best_metrics,
                                   Metrics.from_dict(base_res["metrics"]))  # fmt: skip
    # equal trials that all stormed over the burst stretches are not idle servers: the storm is the reason
    idle = None if verdict.recommend or all_storm else idle_reason(trials, tuner_kind(req.deployment).idle_remedy)
    if idle is not None:
        own = verdict.reason.rstrip(".")
        verdict = dataclasses.replace(verdict, reason=f"{idle} (the verdict's own reason: {own})")
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
                  "per_seed": [{"seed": s, **m} for s, m in zip(seeds, per_seed, strict=False)],
                  **_calibration_range(job, chosen)},
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
        storage=redact_url(job.config.storage),
        deployment=req.deployment,
        source=req.source.label,
        policies_not_replayable=job.dropped,
        fanout=(job.summary or {}).get("fanout"),
        wall_s=wall_s,
        render=tuner_kind(req.deployment).render(chosen),
        mlflow_run_id=None,
        tuned_for={**ev.deployment_record(), "seeds": list(seeds), **_model_record(req)},
        reproduce=[_command(a) for a in (ev.simulate_args(chosen, s) for s in seeds) if a],
        pareto_front=[{"trial": t.number, "values": list(t.values), **t.user_attrs.get("candidate", {})}
                      for t in pareto_front(trials)] if objective.multi else None,
        confirmation=conf.as_dict() if conf is not None else None,
    ), peak_block


def _calibration_range(job: _Job, chosen: Candidate) -> dict[str, Any]:
    """`expected.calibration`: the chosen config's p50/p99 on the first seed with the service time at each end of
    the calibration's 95 % interval of its mean (a Cassandra deployment whose service time was calibrated,
    docs/model.md § Calibration) — how much of the expectation rests on that measurement. Empty otherwise."""
    record = job.req.model or {}
    entry = (record.get("inputs") or {}).get("service_time") or {}
    bounds = ((entry.get("uncertainty") or {}).get("mean_ms") if entry.get("source") == "calibrated" else None)
    spec = job.ev.spec()
    calibrated = any(k.calibrated_service_rate and k.evaluator == spec.kind for k in KINDS.values())
    if not bounds or not calibrated or "service_rate" not in spec.options:
        return {}
    lo_ms, hi_ms = (float(b) for b in bounds)
    if not 0 < lo_ms <= hi_ms:
        return {}
    seed = job.seeds[0]
    out: dict[str, list[float]] = {"p50_ms": [], "p99_ms": []}
    for mean_ms in (lo_ms, hi_ms):
        ev = build_evaluator(EvaluatorSpec(spec.kind, {**spec.options, "service_rate": 1000.0 / mean_ms}))
        m = ev.evaluate(chosen, seed)
        out["p50_ms"].append(m.p50_ms)
        out["p99_ms"].append(m.p99_ms)
    return {"calibration": {"service_time_mean_ms": [lo_ms, hi_ms], "seed": seed, **out}}


def _batch_evidence(
    job: _Job, best: Candidate | None
) -> tuple[tuple[list[list[float]], list[float]] | None, tuple[list[list[float]], list[float]] | None]:
    """One seed: (baseline, best) per-batch objective values and half-widths (None/empty: no batches)."""
    from tuner.evidence import batch_metrics, batch_values

    seed, warm = job.seeds[0], job.ev.warmup_fraction()

    def of(cand: Candidate) -> tuple[list[list[float]], list[float]] | None:
        if cand.key() not in job.batches:
            b = batch_metrics(job.ev.latencies_ms(cand, seed), warm)
            job.batches[cand.key()] = batch_values(b, job.objective) if b else None
        return job.batches[cand.key()]  # type: ignore[no-any-return]

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
