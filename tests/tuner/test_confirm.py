"""The held-out confirmation: hand-worked statistics on known latencies, held-out seeds disjoint from the
study's, and the later stretch of a trace with timestamps split off the study."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from tuner.confirm import HOLDOUT_SEED_BASE, confirm, holdout_seeds, lag1
from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.evidence import BATCHES, MIN_BATCH
from tuner.objective import Metrics, parse_objective
from tuner.space import Candidate

CUR, NEW = Candidate("fifo"), Candidate("heron")


class BatchEvaluator(Evaluator):
    """Replays whose batch b of seed s has a known constant latency (so each batch's mean is known)."""

    deployment = "cassandra"

    def __init__(self, level: dict[str, Any]) -> None:
        self.level = level
        self.seeds: list[int] = []

    def policies(self) -> tuple[str, ...]:
        return ("fifo", "heron")

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        raise AssertionError("the confirmation replays whole workloads only")

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        self.seeds.append(seed)
        values = self.level[candidate.policy](seed)
        return np.repeat(np.asarray(values, dtype=np.float64), MIN_BATCH)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("none", {})


def test_paired_batches_pooled_over_held_out_seeds_hand_worked() -> None:
    # 3 seeds × 20 batches: the current config's batch means 10 + b/10, the candidate's 6 + b/10 + 0.1·(s mod 2)
    base = {"fifo": lambda s: [10 + b / 10 for b in range(BATCHES)],
            "heron": lambda s: [6 + b / 10 + 0.1 * (s % 2) for b in range(BATCHES)]}
    ev = BatchEvaluator(base)
    seeds = holdout_seeds(3)
    conf = confirm(ev, NEW, CUR, seeds, parse_objective("mean"))
    assert set(ev.seeds) == set(seeds) and min(seeds) == HOLDOUT_SEED_BASE
    diffs = [4.0 - 0.1 * (s % 2) for s in seeds for _ in range(BATCHES)]  # 4.0 ×20, 3.9 ×20, 4.0 ×20
    n = len(diffs)
    mean_b = sum(10 + b / 10 for b in range(BATCHES)) / BATCHES
    d, sd = float(np.mean(diffs)), float(np.std(diffs, ddof=1))
    # lag-1 autocorrelation within each seed's run: (19 + 19·4 + 19)·(0.1/3)² over (40 + 20·4)·(0.1/3)² = 0.95,
    # clipped to 0.9: the variance × 19 on 60/19 − 1 degrees of freedom
    assert lag1(diffs, [BATCHES] * 3) == pytest.approx(0.9)
    inflate = 1.9 / 0.1
    se, df = sd / math.sqrt(n) * math.sqrt(inflate), n / inflate - 1
    assert conf.pairs == n == 60
    assert conf.improvement_pct == pytest.approx(100 * d / mean_b)
    half = stats.t.ppf(0.975, df) * se
    assert conf.interval_pct == pytest.approx([100 * (d - half) / mean_b, 100 * (d + half) / mean_b])
    assert conf.p_value == pytest.approx(stats.t.sf(d / se, df))
    mde = (stats.t.ppf(0.95, df) + stats.t.ppf(0.8, df)) * se
    assert conf.min_detectable_pct == pytest.approx(100 * mde / mean_b)
    assert conf.significant
    text = conf.sentence()
    assert conf.improvement_pct is not None
    assert text.startswith(f"mean {-conf.improvement_pct:+.1f} % [") and "on 3 held-out seeds" in text


def test_equal_configs_are_not_significant_and_a_worse_one_is_no_improvement() -> None:
    same = {"fifo": lambda s: [5.0 + ((b * 7 + s) % 5) for b in range(BATCHES)],
            "heron": lambda s: [5.0 + ((b * 3 + s) % 5) for b in range(BATCHES)]}
    conf = confirm(BatchEvaluator(same), NEW, CUR, holdout_seeds(3), parse_objective("mean"))
    assert conf.improvement_pct == pytest.approx(0.0) and not conf.significant and conf.p_value == pytest.approx(0.5)
    worse = {"fifo": lambda s: [5.0] * BATCHES, "heron": lambda s: [6.0] * BATCHES}
    conf = confirm(BatchEvaluator(worse), NEW, CUR, holdout_seeds(2), parse_objective("mean"))
    assert conf.improvement_pct == pytest.approx(-20.0) and conf.p_value == 1.0 and not conf.significant


def test_lag1_counts_pairs_within_a_seed_only_and_clips() -> None:
    # alternating differences: negative autocorrelation, clipped to 0 (no inflation below the plain t-test)
    assert lag1([1.0, -1.0] * 10, [20]) == 0.0
    # two runs, each constant: within a run every pair is on the same side of the pooled mean
    assert lag1([1.0] * 5 + [-1.0] * 5, [5, 5]) == pytest.approx(0.8)
    # the same values as one run: the pair across the boundary counts against
    assert lag1([1.0] * 5 + [-1.0] * 5, [10]) == pytest.approx(0.7)


def test_a_replay_too_short_for_batches_decides_nothing() -> None:
    class Short(BatchEvaluator):
        def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
            return np.ones(MIN_BATCH, dtype=np.float64)

    conf = confirm(Short({}), NEW, CUR, holdout_seeds(3), parse_objective("p99"))
    assert conf.improvement_pct is None and not conf.significant and "too few" in conf.method


def test_the_study_never_sees_the_held_out_stretch(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from base.settings import get_settings
    from ingest.generate import write_trace
    from simulation.source import WorkloadSource
    from tuner.tune import TuneRequest, run_tune

    monkeypatch.setenv("TAILTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TAILTUNE_TUNE_HOLDOUT_MIN_REQUESTS", "500")
    get_settings.cache_clear()
    trace = tmp_path / "t.parquet"
    write_trace(trace, "soundcloud", 6000, 1)
    req = TuneRequest(source=WorkloadSource(trace=str(trace)), deployment="cassandra", trials=6, seeds=2,
                      server="rein-patched", alternative_trials=0, mlflow=False, plots=False, storage="memory",
                      evaluator_options={"servers": 16, "slots": 4, "replication": 3, "load": 0.5})
    rec = run_tune(req)
    conf = rec.confirmation
    assert conf is not None, rec.reason
    assert set(conf["seeds"]).isdisjoint(rec.expected["seeds"])
    hold = conf["holdout"]
    assert hold is not None and hold["fraction"] == 0.2
    assert hold["requests"] + hold["tuned_on_requests"] == 6000
    # the study replayed the earlier part only: its source is the early file, the recommendation names the trace
    assert rec.tuned_for["source"]["trace"] != str(trace) and rec.source == f"trace:{trace}"
    assert conf["method"].startswith("paired batch means") and len(conf["seeds"]) == 5
    assert rec.reason.startswith("p99 ") and "held-out seeds and the last 20 % of the trace" in rec.reason
    get_settings.cache_clear()


def test_the_calibrations_interval_bounds_the_expectation(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibrated service time's 95 % interval gives the chosen config's p50/p99 at each end (expected.calibration):
    the slower end expects the slower tail."""
    from base.settings import get_settings
    from simulation.source import WorkloadSource
    from tuner.tune import TuneRequest, run_tune

    monkeypatch.setenv("TAILTUNE_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    model = {"sources": {"service_time": "calibrated"}, "inputs": {"service_time": {
        "value": {"mean_ms": 0.3, "dist": "lognormal", "sigma": 0.5}, "source": "calibrated", "at": 0.0, "how": "t",
        "uncertainty": {"mean_ms": [0.2, 0.4]}}}}
    req = TuneRequest(source=WorkloadSource(profile="soundcloud", requests=2000), deployment="cassandra", trials=2,
                      seeds=1, server="rein-patched", alternative_trials=0, mlflow=False, plots=False,
                      storage="memory", model=model,
                      evaluator_options={"servers": 16, "slots": 4, "replication": 3, "service_rate": 1000 / 0.3})
    rec = run_tune(req)
    cal = rec.expected["calibration"]
    assert cal["service_time_mean_ms"] == [0.2, 0.4] and cal["seed"] == 0
    assert 0 < cal["p99_ms"][0] < cal["p99_ms"][1] and cal["p50_ms"][0] < cal["p50_ms"][1]
    # the recommendation's error bound holds that range (tuner/error_bound.py)
    bound = rec.expected["error_bound"]
    assert bound["p99_ms"][0] <= cal["p99_ms"][0] and bound["p99_ms"][1] >= cal["p99_ms"][1]
    assert bound["parts"]["p99"]["calibration_ms"] == cal["p99_ms"]
    # without a calibrated service time there is nothing to bound
    plain = run_tune(dataclasses.replace(req, model=None))
    assert "calibration" not in plain.expected
    assert plain.expected["error_bound"]["parts"]["p99"]["calibration_ms"] is None
    get_settings.cache_clear()
