"""A tune asked for CDF points records the latency CDFs behind its verdict: the current config, the recommended one
(or the best found), and for Cassandra the other server kind's best; a plain tune records none."""

from __future__ import annotations

import numpy as np

from simulation.source import WorkloadSource
from tuner.evaluators import EvaluatorSpec, build_evaluator
from tuner.evidence import measured
from tuner.space import Candidate
from tuner.tune import TuneRequest, run_tune


def _req(**kw: object) -> TuneRequest:
    base: dict[str, object] = dict(source=WorkloadSource(profile="soundcloud", requests=3000), deployment="cassandra",
                                   trials=6, seeds=1, storage="memory", mlflow=False, plots=False,
                                   policies=("rein", "brb-equalmax"), alternative_trials=6,
                                   evaluator_options={"servers": 16, "load": 0.3})
    base.update(kw)
    return TuneRequest(**base)  # type: ignore[arg-type]


def test_cdfs_are_recorded_for_current_chosen_and_alternative() -> None:
    rec = run_tune(_req(cdf_points=64))
    assert rec.cdfs is not None and rec.to_json()["cdfs"] == rec.cdfs
    names = [c["name"] for c in rec.cdfs["curves"]]
    assert names[0] == "current" and names[1] in ("recommended", "best")
    assert names[1] == ("recommended" if rec.verdict == "recommend" else "best")
    assert rec.server == "rein-patched" and names[2] == "stock"  # the other server kind's best
    for curve in rec.cdfs["curves"]:
        x, y = np.array(curve["latency_ms"]), np.array(curve["cdf"])
        assert 2 <= len(x) <= 64 + 2 and np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0) and y[-1] == 1.0
    # the current config's curve is its replay on the first seed, after the warm-up
    source = WorkloadSource(profile="soundcloud", requests=3000).as_dict()
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": source, "servers": 16, "load": 0.3}))
    current = rec.cdfs["curves"][0]
    kept = measured(ev.latencies_ms(Candidate(current["policy"], dict(rec.baseline["params"])), 0),
                    ev.warmup_fraction())
    assert current["latency_ms"][-1] == float(f"{kept.max():.4g}")
    assert abs(current["cdf"][0] - 1 / kept.size) < 1e-9


def test_a_plain_tune_records_no_cdf() -> None:
    rec = run_tune(_req(alternative_trials=0))
    assert rec.cdfs is None and "cdfs" not in rec.to_json()
