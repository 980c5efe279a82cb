"""The Optuna study: ask/tell workers over persistent storage, several seeds per trial, prefix pruning, resume.

- **Trial** = one candidate replayed on every seed of the study (the same seeds for every trial: common random
  numbers). The trial's value is the mean objective over the seeds; the per-seed values, mean metrics and the
  Student-t 95 % half-widths are stored as trial user attributes (`per_seed`, `metrics`, `ci`).
- **Pruning** (single objective), rung by rung: the candidate first replays prefixes of the first seed, the
  shortest first (`StudyConfig.prefixes`: `prefix` alone, or the `rungs` that `prefix_rungs` lays out for a large
  trace), reporting each prefix's objective as an intermediate value (steps 0, 1, ...); with several seeds it
  then replays the whole of the first seed and reports it as the next step, before the other seeds. With one
  prefix rung a `RungPruner` (tuner/pruning.py) stops trials whose value is in the worst `100 - keep_percentile` %
  of the completed trials' values at that rung (after `startup_trials` trials); with several, a `HalvingPruner`
  keeps the best `1 / rung_factor` of every rung. The whole first seed is replayed once: a trial that goes on
  reuses it.
- **Cache**: a candidate already evaluated in the study is not replayed again; the new trial copies the values
  (attribute `cached_from`). Infeasible combinations (e.g. Rein rates <= 0) are pruned without any replay.
- **Workers**: `run_worker` loops ask → evaluate → tell until the study holds `trials` finished-or-running
  trials or the deadline passes. `run_study` runs 1 worker inline or J worker processes (spawned; killed with
  the coordinator on Linux), or `run_spark_workers` one worker per Spark task, all against the same storage.
- **Storage**: `memory`, a JournalStorage file path (default `settings.resolved_optuna_storage`) or an RDB URL.
- **Resume**: re-running a study of the same name continues it. Trials left RUNNING by a killed run are marked
  FAIL and their parameters re-enqueued; finished trials (COMPLETE, PRUNED) are kept and counted, never re-run.
  Start one coordinator per study at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from base.db_url import normalize_url
from base.errors import BadInputError, TailtuneError
from base.secrets import redact_url, scrub, url_secrets
from tuner.evaluators import Evaluator, EvaluatorSpec, build_evaluator
from tuner.objective import Metrics, Objective, mean_ci, parse_objective
from tuner.space import Candidate, SearchSpace

__all__ = [
    "FINISHED",
    "LOCK_GRACE_S",
    "StudyConfig",
    "StudyOutcome",
    "evaluate_candidate",
    "open_storage",
    "prefix_rungs",
    "prepare_study",
    "release_stale_lock",
    "run_spark_workers",
    "run_study",
    "run_worker",
]

POLL_S = 0.3
_log = logging.getLogger("tailtune.tuner")


def prefix_rungs(prefix: float, requests: int, min_requests: int, factor: int = 4) -> tuple[float, ...]:
    """The prefix rungs of a trace of `requests` requests: `prefix`, and below it `prefix / factor`,
    `prefix / factor²`, ... while a rung still replays at least `min_requests` requests (shortest first). A trace
    whose `prefix / factor` would replay fewer keeps the single rung `(prefix,)`; `prefix <= 0` has none."""
    if prefix <= 0:
        return ()
    rungs = [prefix]
    while factor >= 2 and rungs[-1] / factor * requests >= min_requests:
        rungs.append(rungs[-1] / factor)
    return tuple(reversed(rungs))


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@dataclass(frozen=True)
class StudyConfig:
    """Everything a worker needs (JSON-able, so workers in other processes or Spark executors rebuild it)."""

    name: str
    storage: str
    evaluator: EvaluatorSpec
    space: SearchSpace
    objective: Objective
    seeds: tuple[int, ...] = (0, 1, 2)
    trials: int = 50
    prefix: float = 0.25
    keep_percentile: float = 75.0
    startup_trials: int = 10
    #: The prefix rungs (fractions of the first seed, shortest first; the last is `prefix`); empty = `(prefix,)`.
    rungs: tuple[float, ...] = ()
    #: With several prefix rungs: each rung keeps the best `1 / rung_factor` of the trials (`HalvingPruner`).
    rung_factor: int = 4
    sampler_seed: int = 0
    baseline: Candidate | None = None
    baseline_metrics: Metrics | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise BadInputError.single("command line", "need at least one seed", field="seeds")
        if self.trials < 1:
            raise BadInputError.single("command line", "must be >= 1", field="trials")
        if not 0.0 <= self.prefix < 1.0:
            raise BadInputError.single("command line", "must be in [0, 1)", field="prefix")
        if self.rungs and (list(self.rungs) != sorted(set(self.rungs)) or self.rungs[0] <= 0
                           or self.rungs[-1] != self.prefix):
            raise BadInputError.single("command line", "must rise strictly from above 0 to the prefix",
                                       field="rungs")

    @property
    def prefixes(self) -> tuple[float, ...]:
        """The prefix rungs replayed before the whole first seed (none for a multi-objective study)."""
        if self.objective.multi or self.prefix <= 0:
            return ()
        return self.rungs or (self.prefix,)

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a stored study to be resumed with this config."""
        return {
            "evaluator": self.evaluator.as_dict(),
            "space": self.space.as_dict(),
            "objective": self.objective.spec,
            "constraints": [c.label for c in self.objective.constraints],
            "seeds": list(self.seeds),
            "prefix": self.prefix,
            **({"rungs": list(self.rungs), "rung_factor": self.rung_factor} if len(self.rungs) > 1 else {}),
        }

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name,
            "storage": self.storage,
            "evaluator": self.evaluator.as_dict(),
            "space": self.space.as_dict(),
            "objective": self.objective.spec,
            "constraints": [c.label for c in self.objective.constraints],
            "seeds": list(self.seeds),
            "trials": self.trials,
            "prefix": self.prefix,
            "keep_percentile": self.keep_percentile,
            "startup_trials": self.startup_trials,
            "rungs": list(self.rungs),
            "rung_factor": self.rung_factor,
            "sampler_seed": self.sampler_seed,
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "baseline_metrics": self.baseline_metrics.as_dict() if self.baseline_metrics else None,
            "extra": dict(self.extra),
        })

    @classmethod
    def from_json(cls, text: str) -> StudyConfig:
        d = json.loads(text)
        return cls(
            name=d["name"],
            storage=d["storage"],
            evaluator=EvaluatorSpec.from_dict(d["evaluator"]),
            space=SearchSpace.from_dict(d["space"]),
            objective=parse_objective(d["objective"], d["constraints"]),
            seeds=tuple(d["seeds"]),
            trials=d["trials"],
            prefix=d["prefix"],
            keep_percentile=d["keep_percentile"],
            startup_trials=d["startup_trials"],
            rungs=tuple(d.get("rungs", ())),
            rung_factor=d.get("rung_factor", 4),
            sampler_seed=d["sampler_seed"],
            baseline=Candidate.from_dict(d["baseline"]) if d["baseline"] else None,
            baseline_metrics=Metrics.from_dict(d["baseline_metrics"]) if d["baseline_metrics"] else None,
            extra=d.get("extra", {}),
        )


# ------------------------------------------------------------------------------------------------ storage
def open_storage(url: str) -> Any:
    """`memory` → InMemoryStorage; `scheme://...` → RDBStorage; anything else → JournalStorage file path."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if url in ("memory", ":memory:"):
        return optuna.storages.InMemoryStorage()
    if "://" in url:
        url = normalize_url(url)  # bare postgresql:// → psycopg 3, the driver tailtune installs
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as exc:  # sqlalchemy raises many kinds
            why = scrub(str(exc), url_secrets(url))
            raise BadInputError.single(
                "optuna storage", f"cannot open {redact_url(url)!r}: {why}", field="storage"
            ) from None
    path = Path(url).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def _sampler(config: StudyConfig, worker: int) -> Any:
    """TPE (multivariate, grouped for conditional spaces, constant liar for parallel workers). Constraints
    reach it through `Trial.set_constraint` (Optuna 5; `constraints_func` is deprecated)."""
    import optuna

    return optuna.samplers.TPESampler(
        seed=config.sampler_seed + 7919 * worker,
        n_startup_trials=config.startup_trials,
        multivariate=True,
        group=config.space.conditional,
        constant_liar=True,
    )


def _pruner(config: StudyConfig) -> Any:
    import optuna

    from tuner.pruning import HalvingPruner, RungPruner  # import optuna: kept out of `import tuner.study`

    if not config.prefixes:
        return optuna.pruners.NopPruner()
    if len(config.prefixes) > 1:
        return HalvingPruner(config.rung_factor)
    return RungPruner(config.keep_percentile, config.startup_trials)


def _load(config: StudyConfig, storage: Any, worker: int = 0) -> Any:
    import optuna

    return optuna.load_study(
        study_name=config.name, storage=storage, sampler=_sampler(config, worker), pruner=_pruner(config)
    )


def _finished_states() -> tuple[Any, ...]:
    from optuna.trial import TrialState

    return (TrialState.COMPLETE, TrialState.PRUNED)


#: Trial states that count as done (kept on resume).
FINISHED = ("COMPLETE", "PRUNED")


#: Optuna's `JournalFileSymlinkLock` grace period: a waiter takes over a lock it has seen unchanged this long.
LOCK_GRACE_S = 30.0


def release_stale_lock(url: str, now: float | None = None) -> bool:
    """Remove the lock of journal storage `url` if it is older than Optuna's own grace period; True if it was.

    A kill -9 inside Optuna's `append_logs` leaves `<journal>.lock`. Optuna's waiter counts its 30 s from when *it*
    first sees the lock, so a study resumed hours later still waits 30 s on its first append. A lock older than
    the grace period is stale by Optuna's own rule; a younger one may belong to another study's append in the same
    journal file, and is left to Optuna."""
    if url in ("memory", ":memory:") or "://" in url:
        return False
    path = Path(url).expanduser()
    lock = path.with_name(path.name + ".lock")  # optuna JournalFileSymlinkLock: the file path + ".lock"
    try:
        age = (time.time() if now is None else now) - lock.lstat().st_mtime
    except FileNotFoundError:
        return False
    if age <= LOCK_GRACE_S:
        return False
    lock.unlink(missing_ok=True)
    _log.warning("removed %s, left by a killed run %.0f s ago", lock, age)
    return True


def prepare_study(config: StudyConfig, storage: Any) -> Any:
    """Create or load the study; check a stored study has the same setup; recover trials of a killed run
    (its RUNNING trials and a journal lock it left). Called by the coordinator, before any worker starts."""
    import optuna
    from optuna.trial import TrialState

    _quiet_optuna()
    release_stale_lock(config.storage)
    study = optuna.create_study(
        storage=storage,
        study_name=config.name,
        directions=config.objective.directions,
        sampler=_sampler(config, 0),
        pruner=_pruner(config),
        load_if_exists=True,
    )
    stored = study.user_attrs.get("tailtune_fingerprint")
    fp = json.loads(json.dumps(config.fingerprint()))
    if stored is None:
        study.set_user_attr("tailtune_fingerprint", fp)
        # the config as stored in the study: its storage URL without the password (the study is read by anyone
        # who can read the storage, and the URL is not needed to resume: the caller opens the storage)
        stored_config = json.loads(config.to_json())
        stored_config["storage"] = redact_url(config.storage)
        study.set_user_attr("tailtune_config", stored_config)
    elif stored != fp:
        diff = sorted(k for k in fp if fp.get(k) != stored.get(k))
        raise BadInputError.single(
            "optuna storage", f"study {config.name!r} exists with a different setup ({', '.join(diff)})",
            field="study", hint="choose another --study name, or repeat the original options to resume it",
        )
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_system_attr(t._trial_id, "tailtune_orphan", True)
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        if t.params:
            study.enqueue_trial(dict(t.params), skip_if_exists=True)
    return study


# ------------------------------------------------------------------------------------------------ one trial
def evaluate_candidate(
    ev: Evaluator, cand: Candidate, seeds: Sequence[int], objective: Objective, *, first: Metrics | None = None
) -> dict[str, Any]:
    """Replay `cand` on every seed: per-seed metrics and objective values, their means and CI half-widths.
    `first`: the metrics of the whole replay of `seeds[0]`, already made (not replayed again)."""
    done = [] if first is None else [first]
    per_seed = done + [ev.evaluate(cand, s) for s in seeds[len(done):]]
    values = [objective.values(m) for m in per_seed]
    stats = [mean_ci([v[i] for v in values]) for i in range(len(objective.terms))]
    return {
        "per_seed_metrics": [m.as_dict() for m in per_seed],
        "per_seed": values,
        "metrics": Metrics.mean_of(per_seed).as_dict(),
        "values": [s[0] for s in stats],
        "ci": [s[1] for s in stats],
    }


def _find_done(study: Any, cand: Candidate) -> Any | None:
    from optuna.trial import TrialState

    key = cand.as_dict()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("candidate") == key and "per_seed" in t.user_attrs:
            return t
    return None


def _run_trial(study: Any, trial: Any, ev: Evaluator, config: StudyConfig) -> Any:
    from optuna.trial import TrialState

    obj = config.objective
    cand = config.space.suggest(trial)
    cand = Candidate(cand.policy, json.loads(json.dumps(dict(cand.params))))
    trial.set_user_attr("candidate", cand.as_dict())
    reason = config.space.infeasible(cand)
    if reason is not None:
        trial.set_user_attr("infeasible", reason)
        return study.tell(trial, state=TrialState.PRUNED)
    prev = _find_done(study, cand)
    if prev is not None:
        for k in ("per_seed_metrics", "per_seed", "metrics", "ci", "constraints", "replays"):
            if k in prev.user_attrs:
                trial.set_user_attr(k, prev.user_attrs[k])
        trial.set_user_attr("cached_from", prev.number)
        trial.set_user_attr("replays", 0.0)
        return study.tell(trial, list(prev.values))
    replays = 0.0
    prefixes = config.prefixes
    try:
        for step, fraction in enumerate(prefixes):
            m = ev.evaluate(cand, config.seeds[0], fraction)
            replays += fraction
            trial.set_user_attr("prefix_metrics", m.as_dict())
            if (overload := ev.overloaded(cand)) is not None:
                return _prune_overloaded(study, trial, overload, replays)
            trial.report(obj.values(m)[0], step)
            if trial.should_prune():
                trial.set_user_attr("replays", replays)
                return study.tell(trial, state=TrialState.PRUNED)
        first = None
        if prefixes and len(config.seeds) > 1:
            first = ev.evaluate(cand, config.seeds[0])
            replays += 1
            trial.set_user_attr("first_seed_metrics", first.as_dict())
            if (overload := ev.overloaded(cand)) is not None:
                return _prune_overloaded(study, trial, overload, replays)
            trial.report(obj.values(first)[0], len(prefixes))
            if trial.should_prune():
                trial.set_user_attr("replays", replays)
                return study.tell(trial, state=TrialState.PRUNED)
        res = evaluate_candidate(ev, cand, config.seeds, obj, first=first)
        replays += len(config.seeds) - (1 if first is not None else 0)
    except BadInputError as exc:
        trial.set_user_attr("error", str(exc))
        trial.set_user_attr("replays", replays)
        return study.tell(trial, state=TrialState.FAIL)
    for k in ("per_seed_metrics", "per_seed", "metrics", "ci"):
        trial.set_user_attr(k, res[k])
    trial.set_user_attr("replays", replays)
    if (overload := ev.overloaded(cand)) is not None:
        return _prune_overloaded(study, trial, overload, replays)
    if obj.constraints:
        cons = obj.constraint_values(Metrics.from_dict(res["metrics"]), config.baseline_metrics)
        trial.set_user_attr("constraints", cons)
        for c, v in zip(obj.constraints, cons, strict=True):
            trial.set_constraint(c.label, v)
    return study.tell(trial, res["values"])


def _prune_overloaded(study: Any, trial: Any, reason: str, replays: float) -> Any:
    """Prunes a trial whose replays so far overload the deployment (`Evaluator.overloaded`): no further rung."""
    from optuna.trial import TrialState

    trial.set_user_attr("infeasible", reason)
    trial.set_user_attr("replays", replays)
    return study.tell(trial, state=TrialState.PRUNED)


def _occupied(study: Any) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(*_finished_states(), TrialState.RUNNING)))


def run_worker(
    config: StudyConfig,
    *,
    worker: int = 0,
    deadline: float | None = None,
    storage: Any = None,
    evaluator: Evaluator | None = None,
    on_trial: Callable[[Any], None] | None = None,
) -> int:
    """Ask/tell until the study holds `config.trials` finished-or-running trials or the deadline passes.

    Returns the number of trials this worker told. Two workers may overshoot the budget by one trial each
    (they check the count before asking).
    """
    _quiet_optuna()
    ev = evaluator or build_evaluator(config.evaluator)
    study = _load(config, storage if storage is not None else open_storage(config.storage), worker)
    parent = os.getppid()
    told = 0
    while True:
        if deadline is not None and time.time() >= deadline:
            break
        if worker > 0 and os.getppid() != parent:  # the coordinator died
            break
        if _occupied(study) >= config.trials:
            break
        trial = study.ask()
        frozen = _run_trial(study, trial, ev, config)
        told += 1
        if on_trial is not None:
            on_trial(frozen)
    return told


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the coordinator dies (kill -9 of the tuner takes its workers with it)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _worker_process(config_json: str, worker: int, deadline: float | None) -> None:
    _die_with_parent()
    run_worker(StudyConfig.from_json(config_json), worker=worker, deadline=deadline)


# ------------------------------------------------------------------------------------------------ coordinator
@dataclass
class StudyOutcome:
    """The study after a run, and what this run did."""

    study: Any
    config: StudyConfig
    wall_s: float
    finished: int
    replays: float


def _best_value(study: Any, multi: bool) -> float | None:
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    if not done:
        return None
    return min(float(t.values[0]) for t in done) if multi else min(float(t.value) for t in done)


def _snapshot(study: Any) -> list[Any]:
    return list(study.get_trials(deepcopy=False, states=_finished_states()))


def run_study(
    config: StudyConfig,
    *,
    jobs: int = 1,
    warm_start: Sequence[Candidate] = (),
    timeout_s: float | None = None,
    on_trial: Callable[[Any], None] | None = None,
    on_progress: Callable[[int, int, float | None], None] | None = None,
    evaluator: Evaluator | None = None,
) -> StudyOutcome:
    """Run the study to `config.trials` finished trials (or the timeout) with `jobs` workers.

    `warm_start` candidates that lie in the space are enqueued as the first trials of a new study.
    `on_trial(frozen_trial)` is called once per trial finished during this run (in the coordinator);
    `on_progress(done, total, best)` after each. With `jobs > 1` the storage must not be `memory`.
    """
    if jobs < 1:
        raise BadInputError.single("command line", "must be >= 1", field="jobs")
    if jobs > 1 and config.storage in ("memory", ":memory:"):
        raise BadInputError.single("command line", "parallel workers need persistent storage", field="storage")
    started = time.time()
    deadline = started + timeout_s if timeout_s is not None else None
    storage = open_storage(config.storage)
    study = prepare_study(config, storage)
    if not study.get_trials(deepcopy=False):
        for cand in warm_start:  # references inside the space are the first trials of a new study
            if config.space.contains(cand):
                study.enqueue_trial(config.space.optuna_params(cand), skip_if_exists=True)
    seen = {t.number for t in _snapshot(study)}
    replays = 0.0
    multi = config.objective.multi

    def note(frozen: Any) -> None:
        nonlocal replays
        seen.add(frozen.number)
        replays += float(frozen.user_attrs.get("replays", 0.0))
        if on_trial is not None:
            on_trial(frozen)
        if on_progress is not None:
            on_progress(len(seen), config.trials, _best_value(study, multi))

    if on_progress is not None:
        on_progress(len(seen), config.trials, _best_value(study, multi))
    if jobs == 1:
        run_worker(config, deadline=deadline, storage=storage, evaluator=evaluator,
                   on_trial=lambda t: note(t) if t.state.name in FINISHED else None)
    else:
        ctx = multiprocessing.get_context("spawn")
        cfg = config.to_json()
        procs = [ctx.Process(target=_worker_process, args=(cfg, i + 1, deadline), daemon=True)
                 for i in range(jobs)]
        for p in procs:
            p.start()
        try:
            while True:
                alive = any(p.is_alive() for p in procs)
                for t in sorted(_snapshot(study), key=lambda t: t.number):
                    if t.number not in seen:
                        note(t)
                if not alive:
                    break
                time.sleep(POLL_S)
        finally:
            for p in procs:
                p.join(timeout=0 if not p.is_alive() else None)
        bad = [p.exitcode for p in procs if p.exitcode not in (0, None)]
        if bad:
            raise TailtuneError(f"{len(bad)} tuner worker process(es) failed (exit codes {bad})")
    return StudyOutcome(study, config, time.time() - started, len(seen), replays)


def _spark_task(config_json: str, worker: int, deadline: float | None) -> int:
    return run_worker(StudyConfig.from_json(config_json), worker=worker, deadline=deadline)


def run_spark_workers(
    config: StudyConfig, spark: Any, *, executors: int = 2, timeout_s: float | None = None
) -> StudyOutcome:
    """One worker per Spark task (`executors` tasks) against the study's shared storage (RDB URL, or a journal
    file every executor can reach); the driver prepares/resumes the study and waits for the tasks."""
    if config.storage in ("memory", ":memory:"):
        raise BadInputError.single("command line", "Spark workers need shared storage", field="storage")
    started = time.time()
    deadline = started + timeout_s if timeout_s is not None else None
    storage = open_storage(config.storage)
    study = prepare_study(config, storage)
    before = {t.number for t in _snapshot(study)}
    cfg = config.to_json()
    sc = spark.sparkContext
    rdd = sc.parallelize(range(1, executors + 1), executors)
    rdd.map(lambda i: _spark_task(cfg, i, deadline)).collect()
    after = _snapshot(study)
    replays = sum(float(t.user_attrs.get("replays", 0.0)) for t in after if t.number not in before)
    return StudyOutcome(study, config, time.time() - started, len(after), replays)

