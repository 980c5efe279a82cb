"""With one seed the interval behind the expected figures is estimated from the replay itself (batch means), never
0; the verdict is decided held out either way."""

from __future__ import annotations

from simulation.source import WorkloadSource
from tuner.space import Candidate
from tuner.tune import TuneRequest, run_tune


def test_one_seed_interval_is_estimated_by_batch_means() -> None:
    req = TuneRequest(source=WorkloadSource(profile="soundcloud", requests=3000), deployment="cassandra", trials=6,
                      seeds=1, storage="memory", mlflow=False, plots=False, policies=("rein", "brb-equalmax"),
                      evaluator_options={"servers": 16})
    rec = run_tune(req)
    assert rec.expected["ci_method"].startswith("batch means over 20 batches")
    assert rec.expected["ci"]["p99"] is not None and rec.expected["ci"]["p99"] > 0.0
    # the verdict: held-out replays (tuner/confirm.py), whatever the study's own seeds
    assert rec.confirmation is not None and "held-out seeds" in rec.reason
    assert rec.confirmation["pairs"] == 100 and rec.p_value == rec.confirmation["p_value"]


def test_one_short_replay_never_recommends() -> None:
    req = TuneRequest(source=WorkloadSource(profile="soundcloud", requests=60), deployment="cassandra", trials=4,
                      seeds=1, storage="memory", mlflow=False, plots=False,
                      current=Candidate("fifo"), policies=("rein",), evaluator_options={"servers": 16})
    rec = run_tune(req)
    assert rec.verdict == "keep current"
    assert rec.expected["ci"]["p99"] is None and rec.expected["ci_method"].startswith("not estimated")
