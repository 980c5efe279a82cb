"""The live replay: a dataset's requests sent to a deployment's live system under several configs at once, on
their own arrival times, beside the model's prediction of the same requests under each config.

`run_replay(deployment, dataset, [(arm, SPEC), ...])` is the one entry (`tailtune replay`, the service's replay
job): it checks the deployment may be replayed, resolves each SPEC to a config, reads the dataset's requests,
scales their rate, hands them to the kind's replay driver (`DeploymentKind.replay_driver`: twin scratch tables for
Cassandra, scratch keys through tailtune-client for memcached), and turns what the driver measured into the
report (`ReplayReport.as_dict()`): each arm's observed p50/p95/p99 from its per-block histograms, each arm against
the first with its interval (`tuner.fidelity.compare_concurrent`: the paired block bootstrap, which refuses blocks
shorter than `TAILTUNE_REPLAY_MIN_BLOCK_S` (15 s) or fewer than 20 of them, and says so), the model's predicted
p50/p95/p99 of each arm's config (the deployment's own model, `control.tune_request.deployment_model`, replaying
the same requests at the rate the generator achieved), whether the model ranks the configs as the cluster does
(`tuner.fidelity.fidelity`), and the interference of the arms' reads (`tuner.fidelity.interference`).

**SPECs.** `current` (the deployment's newest config version, else its `current_config`, else the kind's default;
a stock Cassandra server runs no scheduler: a patched policy there means the stock defaults, with a note),
`recommended` (the recommendation of the deployment's newest succeeded job that has one) or `recommended@JOB`,
`version:N` (config version N), or a config written as `tailtune tune --current` takes it
(`stock:speculative_retry=NEVER,driver.speculative_execution.max_executions=2`). A caller may give a config
mapping (`{"policy": ..., "params": {...}}`) instead of a SPEC text: the nightly's `confirm_on` step replays its
own not yet stored recommendation so (`jobs/confirm.py`); the report's `spec` then writes it as the config text
that names it. Each is checked as a config version is (`control.configs.validate_config`).

**Rate.** Request i is sent at offset_i / rate_scale. `rate_scale` multiplies the trace's own rate; `load` sets
it to a fraction of the deployment's calibrated capacity (the model input `capacity`, requests per second, which
calibration records): refused, naming what is missing, while the model has none.

**Alternating** (docs/replay.md § Alternating). Arms that differ in a cluster-wide setting (`driver.modes` says
`alternating`; `driver.cluster_settings` says which) are grouped by it and run whole periods in ABBA order
(`_schedule`; `repeats` is the number of pairs), each period with its group's settings applied by the driver and
the group's arms concurrent in it; an arm of another group than the baseline's is compared over the pairs
(`tuner.fidelity.compare_alternating`, refused with its reason under 2 pairs), a note names what alternated.

**Safety** (docs/replay.md § Safety). Only a deployment whose `replay_allowed` an admin set (`control.grants`),
the admin's record still agreeing, is replayed; its connection goes through the deployment's egress rules and the
admin's password binding; the driver writes only scratch (a `tailtune_replay` keyspace, `tailtune:replay:` keys)
and removes it afterwards, on cancel too (a replay's lease lets the next one drop what a crashed one left);
`TAILTUNE_REPLAY_MAX_RATE` caps the requests in any one second, `TAILTUNE_REPLAY_MAX_ERROR_FRACTION` stops a run
whose requests fail, `TAILTUNE_REPLAY_MAX_LAG_MS` refuses a run whose generator could not send on time
(`LagTooHigh`, the report attached); no credential is in the report (its texts are redacted).

`on_progress(stage, fraction)` is called from the calling thread with the replay's overall fraction 0..1; an
exception it raises cancels the replay (the driver stops and removes its scratch; the exception propagates).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from base.settings import Settings, get_settings
from control.replay_trace import (
    Arm,
    ArmMeasure,
    DriverRun,
    Period,
    ReplayDriver,
    ReplayJob,
    ReplayRefused,
    ReplayTrace,
    deal,
)
from tuner.fidelity import (
    METRICS,
    BlockHistograms,
    Comparison,
    Quantiles,
    ReplayEvidence,
    Run,
    compare_alternating,
    compare_concurrent,
    fidelity,
    interference,
    observed_quantiles,
)

__all__ = [
    "ARM_NAME",
    "Arm",
    "ConfigSpec",
    "LagTooHigh",
    "ReplayDriver",
    "ReplayRefused",
    "ReplayReport",
    "parse_arm",
    "run_replay",
    "spec_text",
]

#: An arm's name (the generator's execution profile name: `[A-Za-z0-9_-]{1,64}`).
ARM_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Most arms of one replay.
MAX_ARMS = 16
#: How an arm runs beside the others (`ReplayDriver.modes`).
MODES = ("concurrent", "alternating")
_VERSION = re.compile(r"version:([0-9]{1,9})")
_RECOMMENDED = re.compile(r"recommended(?:@([0-9]{1,12}))?")

ProgressFn = Callable[[str, float], None]


class LagTooHigh(ReplayRefused):
    """The load generator could not send on time (its lag p99 over `TAILTUNE_REPLAY_MAX_LAG_MS`): its latencies
    are not a comparison of the configs. `report` is what was measured (its `generator.lag_ok` false)."""

    def __init__(self, message: str, report: ReplayReport) -> None:
        super().__init__(message, hint="replay at a lower --rate-scale, or give the generator cores of its own")
        self.report = report


def parse_arm(text: str) -> tuple[str, str]:
    """`NAME=SPEC` (the CLI's `--config`) → (name, SPEC); ReplayRefused naming what is wrong."""
    name, sep, spec = text.partition("=")
    name, spec = name.strip(), spec.strip()
    if not sep or not spec:
        raise ReplayRefused(f"--config {text!r}: expected NAME=SPEC (A=current, B=recommended, C=version:3, "
                            "D=stock:speculative_retry=NEVER)")
    if not ARM_NAME.fullmatch(name):
        raise ReplayRefused(f"--config {text!r}: the arm name must be [A-Za-z0-9_-]{{1,64}}")
    return name, spec


# --------------------------------------------------------------------------------------------------- the report


@dataclass
class ReplayReport:
    """One live replay's figures (module doc); `as_dict()` is its JSON (keys fixed: docs/replay.md § The
    report)."""

    deployment: str
    kind: str
    dataset: str
    at: float
    arms: list[Arm]
    rate: dict[str, float | None]
    duration_s: float
    blocks: int
    block_s: float
    generator: dict[str, Any]
    observed: dict[str, dict[str, Any]]
    predicted: dict[str, dict[str, Any]]
    comparisons: list[Comparison]
    fidelity: dict[str, Any]
    interference: dict[str, Any]
    cluster: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        from control.redact import redact

        out = {
            "deployment": self.deployment,
            "kind": self.kind,
            "dataset": self.dataset,
            "at": self.at,
            "arms": [a.as_dict() for a in self.arms],
            "rate": dict(self.rate),
            "duration_s": self.duration_s,
            "blocks": self.blocks,
            "block_s": self.block_s,
            "generator": self.generator,
            "observed": self.observed,
            "predicted": self.predicted,
            "comparisons": [c.as_dict() for c in self.comparisons],
            "fidelity": self.fidelity,
            "interference": self.interference,
            "cluster": self.cluster,
            "notes": [redact(n) for n in self.notes],
        }
        safe: dict[str, Any] = _json_safe(out)
        return safe


def _json_safe(value: Any) -> Any:
    """NaN and infinities as None, tuples as lists, numpy scalars as Python numbers (strict JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ------------------------------------------------------------------------------------------------ the deployment


@dataclass(frozen=True)
class _Deployment:
    """What the replay reads of the deployment inside its session (used after it)."""

    record: dict[str, Any]
    driver: ReplayDriver
    configs: list[tuple[str, str, dict[str, Any]]]
    notes: list[str]


#: What names an arm's config: a SPEC text, or the config itself (`{"policy", "params"}`).
ConfigSpec = str | Mapping[str, Any]


def spec_text(spec: ConfigSpec) -> str:
    """The SPEC text of `spec`: itself, or a config mapping written as `tailtune tune --current` takes it
    (`chisel:elephant_threshold=2,merge=1,split_keys=1`; a policy without params: its name)."""
    if isinstance(spec, str):
        return spec
    params = dict(spec.get("params") or {})
    knobs = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{spec.get('policy')}:{knobs}" if knobs else str(spec.get("policy"))


def _read_deployment(name: str, specs: Sequence[tuple[str, ConfigSpec]], settings: Settings) -> _Deployment:
    from control.db import database_for
    from control.deployments import get_by_name
    from control.egress import Egress, EgressRefused
    from control.grants import PASSWORD, REPLAY_ALLOWED, granted, replay_grant_problem
    from control.kind import Target
    from control.kinds import operations
    from control.tune_request import deployment_record

    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            row = get_by_name(s, name)
            problem = replay_grant_problem(bool(row.replay_allowed), granted(s, row.id, REPLAY_ALLOWED))
            if problem is not None:
                raise ReplayRefused(f"deployment {name!r}: {problem}")
            try:
                egress = Egress.of(settings).bound(granted(s, row.id, PASSWORD))
            except EgressRefused as exc:
                raise ReplayRefused(str(exc)) from None
            driver = operations(row.kind).replay_driver(Target.of(row, egress))
            if driver is None:
                raise ReplayRefused(f"deployment {name!r}: a {row.kind} deployment has no live replay driver")
            if not isinstance(driver, ReplayDriver):
                raise TypeError(f"{row.kind}'s replay_driver is not a control.replay_trace.ReplayDriver")
            notes: list[str] = []
            configs = [(arm, spec_text(spec), _resolve(s, row, spec, driver, settings, notes)) for arm, spec in specs]
            return _Deployment(deployment_record(row), driver, configs, notes)
    finally:
        db.dispose()


def _resolve(s: Any, row: Any, spec: ConfigSpec, driver: ReplayDriver, settings: Settings, notes: list[str]
             ) -> dict[str, Any]:
    """The config a SPEC names for the deployment of `row`, or the config mapping given (module doc; checked
    later, once the driver completed it: `_check`)."""
    from sqlalchemy import select

    from control import configs
    from control.db import JobRow
    from control.errors import Missing

    config: Any
    if not isinstance(spec, str):
        if not isinstance(spec.get("policy"), str) or not isinstance(spec.get("params") or {}, Mapping):
            raise ReplayRefused(f"config {dict(spec)!r}: a config is {{'policy': NAME, 'params': {{...}}}}")
        return {"policy": spec["policy"], "params": dict(spec.get("params") or {})}
    text = spec.strip()
    if text == "current":
        try:
            config = configs.latest(s, row.id).config
        except Missing:
            config = row.current_config or driver.default_config()
        if (row.server or "stock") == "stock" and "server" in _body_fields(row.kind) \
                and config.get("policy") != "stock":
            notes.append(f"current: the deployment's config {config.get('policy')!r} needs a patched server; a stock "
                         "server runs Cassandra's and the driver's defaults, which are replayed")
            config = driver.default_config()
    elif (m := _VERSION.fullmatch(text)) is not None:
        try:
            config = configs.get_version(s, row.id, int(m.group(1))).config
        except Missing:
            raise ReplayRefused(f"{spec}: deployment {row.name!r} has no config version {m.group(1)}") from None
    elif (m := _RECOMMENDED.fullmatch(text)) is not None:
        query = select(JobRow).where(JobRow.deployment_id == row.id, JobRow.status == "succeeded")
        if m.group(1) is not None:
            query = query.where(JobRow.id == int(m.group(1)))
        config = None
        for job in s.scalars(query.order_by(JobRow.id.desc())):
            rec = (job.result or {}).get("recommendation")
            if isinstance(rec, Mapping) and isinstance(rec.get("policy"), str):
                config = {"policy": rec["policy"], "params": dict(rec.get("params") or {})}
                break
        if config is None:
            which = f"job {m.group(1)}" if m.group(1) else "any succeeded job"
            raise ReplayRefused(f"{spec}: {which} of deployment {row.name!r} holds no recommendation")
    else:
        from tuner.tune import parse_candidate

        cand = parse_candidate(text, source=f"--config {spec}")
        config = {"policy": cand.policy, "params": dict(cand.params)}
    return {"policy": config.get("policy"), "params": dict(config.get("params") or {})}


def _check(arm: Arm, record: Mapping[str, Any], settings: Settings) -> None:
    """The arm's config checked as a config version is (ReplayRefused naming the SPEC and the problem)."""
    from base.errors import BadInputError
    from control import configs
    from control.errors import ServiceError

    try:
        configs.validate_config(arm.config, str(record["kind"]), settings.config_max_bytes,
                                driver=str(record.get("driver") or "java4"), max_depth=settings.config_max_depth)
    except (ServiceError, BadInputError) as exc:
        raise ReplayRefused(f"{arm.name}={arm.spec}: {exc}") from None


def _body_fields(kind: str) -> frozenset[str]:
    from control.kinds import operations

    return operations(kind).body_fields


# ----------------------------------------------------------------------------------------------------- the rate


def _capacity(record: Mapping[str, Any]) -> float | None:
    """The deployment's calibrated capacity, requests per second (the model input `capacity`), or None."""
    entry = ((record.get("model") or {}).get("inputs") or {}).get("capacity")
    if not isinstance(entry, Mapping) or entry.get("source") != "calibrated":
        return None
    value = entry.get("value")
    if isinstance(value, Mapping):
        value = value.get("requests_per_s")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _rate_scale(trace: ReplayTrace, record: Mapping[str, Any], rate_scale: float | None, load: float | None
                ) -> float:
    if rate_scale is not None and load is not None:
        raise ReplayRefused("give --rate-scale or --load, not both")
    if load is not None:
        if not 0 < load <= 10:
            raise ReplayRefused(f"--load {load:g}: a fraction of the calibrated capacity, in (0, 10]")
        capacity = _capacity(record)
        if capacity is None:
            raise ReplayRefused(
                f"--load needs deployment {record['name']!r}'s calibrated capacity (the model input `capacity`, "
                "requests per second, recorded by a calibration that measures it), which its model does not have",
                hint="give --rate-scale X instead (X times the trace's own rate)")
        return load * capacity / trace.mean_rate()
    scale = 1.0 if rate_scale is None else float(rate_scale)
    if not (math.isfinite(scale) and 1e-3 <= scale <= 1e3):
        raise ReplayRefused(f"--rate-scale {scale:g}: from 0.001 to 1000")
    return scale


# ------------------------------------------------------------------------------------------------------ the run


def _drive(driver: ReplayDriver, job: ReplayJob, progress: ProgressFn, low: float, high: float) -> DriverRun:
    """`driver.run(job)` in a thread of its own while this one relays its progress (an exception `progress`
    raises stops the driver, waits for its cleanup and propagates)."""
    stop = threading.Event()
    box: dict[str, Any] = {}

    def report(stage: str, fraction: float) -> None:
        box["progress"] = (stage, fraction)

    def work() -> None:
        try:
            box["run"] = driver.run(job, stop=stop, progress=report)
        except BaseException as exc:  # handed to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="tailtune-replay", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.25)
            if "progress" in box:
                stage, fraction = box.pop("progress")
                progress(stage, low + (high - low) * min(max(fraction, 0.0), 1.0))
    except BaseException:
        stop.set()
        thread.join()
        raise
    if "error" in box:
        raise box["error"]
    run: DriverRun = box["run"]
    return run


def _predict(record: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]], trace: ReplayTrace,
             scale: float, seed: int, settings: Settings, notes: list[str],
             model_params: Mapping[str, float] | None = None) -> dict[str, Quantiles]:
    """Each arm's config replayed by the deployment's own model on `trace` at `scale` (one seed), with
    `model_params` (how the generator ran: the Java driver's timer tick) over each config's params."""
    import shutil

    import pyarrow.parquet as pq

    from base.errors import TailtuneError
    from control.tune_request import deployment_model
    from simulation.kinds import model_kind
    from tuner.evaluators import EvaluatorSpec, build_evaluator
    from tuner.space import Candidate

    folder = settings.tmp_dir / f"replay-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Quantiles] = {}
    try:
        path = Path(folder) / "replayed.parquet"
        pq.write_table(trace.to_table(scale), path)
        model = deployment_model(record, timestamps=True)
        notes.extend(f"model: {n}" for n in model.notes)
        if model_params:
            shown = ", ".join(f"{k} = {v:g}" for k, v in sorted(model_params.items()))
            notes.append(f"model: every arm replayed as the generator ran it ({shown})")
        spec = EvaluatorSpec(model_kind(record["kind"]).evaluator, {"source": {"trace": str(path)}, **model.options})
        evaluator = build_evaluator(spec)
        for arm, config in configs.items():
            try:
                params = {**(config.get("params") or {}), **(model_params or {})}
                m = evaluator.evaluate(Candidate(str(config["policy"]), params), seed)
            except TailtuneError as exc:
                notes.append(f"the model could not replay arm {arm}: {exc}")
                continue
            out[arm] = Quantiles(m.p50_ms, m.p95_ms, m.p99_ms)
    except TailtuneError as exc:
        notes.append(f"no prediction: the model could not be built or replayed ({exc})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _schedule(groups: int, pairs: int) -> list[int]:
    """The groups' periods in order: round j runs every group once, forward (0, 1, …, k−1) when j is even and
    backward when odd — A B B A A B … for two groups. For any k the periods of the baseline's group 0 and of any
    group g, taken two at a time, are (0, g) or (g, 0): `pairs` ABBA pairs for every comparison with the baseline,
    each group run `pairs` times, and a linear drift cancels over two rounds."""
    out: list[int] = []
    for j in range(pairs):
        out.extend(range(groups) if j % 2 == 0 else reversed(range(groups)))
    return out


def _periods(driver: ReplayDriver, arms: Sequence[Arm], repeats: int, notes: list[str]) -> list[Period]:
    """The job's periods: the arms grouped by their cluster-wide settings (`driver.cluster_settings`; the
    baseline's group first), one group → `repeats` periods of every arm; more → `_schedule`'s ABBA order with
    `repeats` pairs, and a note saying which settings alternated."""
    keys: dict[str, int] = {}
    members: list[list[int]] = []
    settings: list[dict[str, Any]] = []
    for i, a in enumerate(arms):
        cs = dict(driver.cluster_settings(a))
        g = keys.setdefault(json.dumps(cs, sort_keys=True, default=str), len(keys))
        if g == len(members):
            members.append([])
            settings.append(cs)
        members[g].append(i)
    if len(members) == 1:
        return [Period(0, tuple(members[0]), settings[0]) for _ in range(repeats)]
    order = _schedule(len(members), repeats)
    knobs = sorted({k for cs in settings for k in cs} - {k for k in settings[0]
                                                          if all(k in c and c[k] == settings[0][k] for c in settings)})
    label = ["+".join(arms[i].name for i in m) for m in members]
    notes.append(
        f"the configs differ in cluster-wide settings ({', '.join(knobs)}), which cannot run concurrently: the arms "
        f"alternated whole runs, {len(order)} periods in ABBA order ({' | '.join(label[g] for g in order)}), each "
        "with its group's settings applied to the whole cluster — every client of the cluster ran under them — and "
        "the group's arms run concurrently in it; arms of different groups are compared over ABBA pairs "
        "(tuner.fidelity.compare_alternating), arms of one group over the blocks they shared")
    return [Period(g, tuple(members[g]), settings[g]) for g in order]


def _deal_period(requests: int, period: Period, seed: int) -> Any:
    """`deal` among the period's arms only, as indices into the job's arms."""
    return np.asarray(period.arms, dtype=np.int16)[deal(requests, len(period.arms), seed)]


def _group(job: ReplayJob, arm: int) -> int:
    return next((p.group for r in range(job.repeats) if arm in (p := job.period(r)).arms), -1)


def _period_blocks(run: DriverRun, job: ReplayJob) -> int:
    """Whole blocks per period in the driver's histograms (each period's blocks, in order)."""
    total = run.arms[0].histograms.blocks if run.arms else 0
    return total // job.repeats if job.repeats else 0


def _runs(hist: BlockHistograms, arm: int, name: str, job: ReplayJob, per: int) -> list[tuple[int, Run]]:
    """(period, the arm's run in it) for each period the arm ran in."""
    return [(r, Run(name, BlockHistograms(hist.upper_us, hist.counts[r * per : (r + 1) * per], hist.block_s)))
            for r in range(job.repeats) if arm in job.period(r).arms]


def _joined(runs: Sequence[tuple[int, Run]], hist: BlockHistograms) -> BlockHistograms:
    """The blocks of the arm's own periods, in order."""
    if not runs:
        return BlockHistograms(hist.upper_us, hist.counts[:0], hist.block_s)
    return BlockHistograms(hist.upper_us, np.vstack([r.histograms.counts for _, r in runs]), hist.block_s)


def run_replay(
    deployment: str,
    dataset: str,
    configs: Sequence[tuple[str, ConfigSpec]],
    *,
    rate_scale: float | None = None,
    load: float | None = None,
    duration_s: float | None = None,
    repeats: int = 1,
    block_s: float = 15.0,
    seed: int = 0,
    settings: Settings | None = None,
    on_progress: Callable[[str, float], None] | None = None,
) -> ReplayReport:
    """The live replay of `dataset` at `deployment` under `configs` ((arm name, SPEC or config), the first the
    baseline) (module doc). Raises ReplayRefused (LagTooHigh with the report), the driver's errors, and what
    `on_progress` raises."""
    settings = settings or get_settings()
    progress: ProgressFn = on_progress or (lambda _stage, _fraction: None)
    names = [a for a, _ in configs]
    if not 2 <= len(configs) <= MAX_ARMS:
        raise ReplayRefused(f"{len(configs)} configs: a live replay compares 2 to {MAX_ARMS}")
    bad = [a for a in names if not ARM_NAME.fullmatch(a)]
    if bad or len(set(names)) != len(names):
        raise ReplayRefused(f"arm names must be distinct [A-Za-z0-9_-]{{1,64}}: {', '.join(names)}")
    if not 1 <= repeats <= 100:
        raise ReplayRefused(f"--repeats {repeats}: 1 to 100")
    if not (math.isfinite(block_s) and 0.01 <= block_s <= 3600):
        raise ReplayRefused(f"--block-s {block_s:g}: 0.01 to 3600 s")
    progress("prepare", 0.0)
    dep = _read_deployment(deployment, configs, settings)
    record, driver, notes = dep.record, dep.driver, list(dep.notes)
    arms = [Arm(a, spec, cfg) for a, spec, cfg in dep.configs]

    from ingest.store import DatasetStore

    info = DatasetStore(settings).get(dataset)
    table = info.read_table()
    trace = ReplayTrace.from_table(table, f"dataset {dataset}")
    del table
    if driver.one_key_per_request and trace.keys and trace.requests != len(trace.keys):
        notes.append(f"the trace's {trace.requests:,} requests read {len(trace.keys):,} keys: each key is replayed "
                     "as a read of its own at its request's arrival, and the model replays them so too")
        trace = trace.flattened()
    scale = _rate_scale(trace, record, rate_scale, load)
    arms = driver.complete(arms, trace, scale, seed, notes)
    for arm in arms:
        _check(arm, record, settings)
    modes = driver.modes(arms)
    if len(modes) != len(arms) or any(m not in MODES for m in modes):
        raise TypeError(f"{record['kind']}'s replay driver's modes() must give one of {', '.join(MODES)} per arm")
    arms = [Arm(a.name, a.spec, a.config, m) for a, m in zip(arms, modes, strict=True)]
    periods = _periods(driver, arms, repeats, notes)
    span = trace.span_s / scale
    measured = span if duration_s is None else float(duration_s)
    if not measured > 0:
        raise ReplayRefused(f"--duration {measured:g}: positive seconds")
    if measured > span:
        notes.append(f"--duration {measured:g} s is longer than the trace at this rate ({span:.3g} s): the whole "
                     "trace is replayed")
        measured = span
    if measured * len(periods) > settings.replay_max_duration_s:
        raise ReplayRefused(f"{len(periods)} × {measured:.0f} s measured: over TAILTUNE_REPLAY_MAX_DURATION_S "
                            f"({settings.replay_max_duration_s:g} s)")
    sent = trace.sent_before(measured, scale)
    # the last whole block's end: requests after it are sent, but not measured into a block
    if math.floor(measured / block_s + 1e-9) < 1:
        raise ReplayRefused(f"a measured run of {measured:.3g} s holds no whole block of {block_s:g} s: a shorter "
                            "--block-s or a longer --duration")
    sent_trace = trace.head(max(sent, 1))
    peak = sent_trace.peak_rate(scale)
    if peak > settings.replay_max_rate:
        raise ReplayRefused(
            f"the trace at rate scale {scale:.4g} sends up to {peak:.0f} requests in one second, over "
            f"TAILTUNE_REPLAY_MAX_RATE ({settings.replay_max_rate:g}/s)",
            hint="a lower --rate-scale or --load, or an operator's higher TAILTUNE_REPLAY_MAX_RATE")
    keys_peak = sent_trace.peak_key_rate(scale)
    if keys_peak > settings.replay_max_key_rate:
        raise ReplayRefused(
            f"the trace at rate scale {scale:.4g} reads up to {keys_peak:.0f} keys in one second, over "
            f"TAILTUNE_REPLAY_MAX_KEY_RATE ({settings.replay_max_key_rate:g}/s)",
            hint="a lower --rate-scale or --load, or an operator's higher TAILTUNE_REPLAY_MAX_KEY_RATE")
    warmup = min(settings.replay_warmup_s, measured)
    run_id = f"{int(time.time()):x}{uuid.uuid4().hex[:6]}"
    job = ReplayJob(
        deployment=deployment, run_id=run_id, arms=tuple(arms), trace=sent_trace,
        dealt=tuple(_deal_period(sent_trace.requests, p, seed + r) for r, p in enumerate(periods)),
        rate_scale=scale, duration_s=measured, warmup_s=warmup, block_s=block_s, seed=seed, settings=settings,
        periods=tuple(periods),
    )
    progress("replay", 0.05)
    run = _drive(driver, job, progress, 0.05, 0.9)
    notes.extend(run.notes)
    progress("predict", 0.9)
    achieved_scale = scale * (run.achieved_per_s / run.intended_per_s) if run.intended_per_s > 0 else scale
    predicted = _predict(record, run.configs, sent_trace, achieved_scale, seed, settings, notes, run.model_params)
    notes.append("the model replays each config alone on all the requests; in the live replay the configs shared "
                 "the cluster (its interference is not in the prediction)")
    progress("compare", 0.97)
    report = _report(record, dataset, arms, run, job, predicted, notes, seed)
    if not report.generator["lag_ok"]:
        lag = report.generator["lag_ms"]
        raise LagTooHigh(
            f"the load generator sent late: lag p99 {lag['p99']:.2f} ms over TAILTUNE_REPLAY_MAX_LAG_MS "
            f"({settings.replay_max_lag_ms:g} ms) at {run.achieved_per_s:.0f} requests/s: its latencies are not a "
            "comparison", report)
    progress("done", 1.0)
    return report


def _report(record: Mapping[str, Any], dataset: str, arms: list[Arm], run: DriverRun, job: ReplayJob,
            predicted: Mapping[str, Quantiles], notes: list[str], seed: int) -> ReplayReport:
    settings = job.settings
    measures: dict[str, ArmMeasure] = {m.name: m for m in run.arms}
    index = {a.name: i for i, a in enumerate(arms)}
    per_period = _period_blocks(run, job)
    runs = {m.name: _runs(m.histograms, index[m.name], m.name, job, per_period) for m in run.arms}
    hists: dict[str, BlockHistograms] = {m.name: _joined(runs[m.name], m.histograms) for m in run.arms}
    observed = observed_quantiles(hists)
    first = arms[0].name
    ordered = [r for _, r in sorted((pr for rs in runs.values() for pr in rs), key=lambda pr: pr[0])]
    comparisons = []
    for a in arms[1:]:
        for metric in METRICS:
            if _group(job, 0) == _group(job, index[a.name]):
                comparisons.append(compare_concurrent(hists, first, a.name, metric=metric, seed=seed,
                                                       min_block_s=settings.replay_min_block_s))
            else:
                comparisons.append(compare_alternating(ordered, first, a.name, metric=metric))
    refused = {c.reason for c in comparisons if c.reason}
    for reason in sorted(refused):
        notes.append(f"comparison not estimated: {reason}")
    known = [c for c in comparisons if c.baseline in predicted and c.candidate in predicted]
    fid = fidelity([ReplayEvidence(job.run_id, observed, dict(predicted), known)])
    reads = {m.name: m.reads for m in run.arms}
    if all(v is not None for v in reads.values()):
        inter = interference({k: int(v or 0) for k, v in reads.items()},
                             {m.name: min(int(m.extra_reads or 0), int(m.reads or 0)) for m in run.arms})
    else:
        inter = interference({}, {})
        notes.append("the arms' reads on the cluster are not known: no interference figure")
    if inter.flagged:
        notes.append(f"interference: {inter.reason}; the observed differences are those of configs sharing that "
                     "load, and the model's, of each config alone: the replay is kept among the deployment's fidelity "
                     "records but not pooled into the model's agreement")
    lag_ok = run.lag_ms.get("p99", math.inf) <= settings.replay_max_lag_ms
    wrong = sum(m.wrong for m in run.arms)
    if wrong:
        notes.append(f"{wrong} answers were not the values written: those requests are counted as errors")
    return ReplayReport(
        deployment=str(record["name"]),
        kind=str(record["kind"]),
        dataset=dataset,
        at=time.time(),
        arms=[Arm(a.name, a.spec, run.configs.get(a.name, a.config), a.mode) for a in arms],
        rate={"scale": job.rate_scale, "intended_per_s": run.intended_per_s, "achieved_per_s": run.achieved_per_s},
        duration_s=job.duration_s * job.repeats,
        blocks=hists[first].blocks if first in hists else 0,
        block_s=job.block_s,
        generator={"driver": run.generator, "cpu_us_per_request": run.cpu_us_per_request,
                   "lag_ms": {k: run.lag_ms.get(k) for k in ("p50", "p99", "max")}, "lag_ok": lag_ok},
        observed={name: {"p50_ms": q.p50_ms, "p95_ms": q.p95_ms, "p99_ms": q.p99_ms,
                         "requests": measures[name].requests, "errors": measures[name].errors + measures[name].wrong,
                         "timeouts": measures[name].timeouts}
                  for name, q in observed.items()},
        predicted={name: {"p50_ms": q.p50_ms, "p95_ms": q.p95_ms, "p99_ms": q.p99_ms} for name, q in predicted.items()},
        comparisons=comparisons,
        fidelity=fid.as_dict(),
        interference=inter.as_dict(),
        cluster=run.cluster,
        notes=notes,
    )
