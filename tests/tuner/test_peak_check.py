"""The peak check of a sampled study: the busiest stretch (hand-worked), the storm rule, the check's replays over
the stretch, and `tailtune tune` picking among the candidates that do not storm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.peak_check import STORM_FACTOR, storming
from tuner.sampling import ops_histogram, peak_window


def test_peak_window_is_the_busiest_stretch() -> None:
    counts = np.array([1, 1, 1, 9, 9, 1, 1, 1, 1, 1], dtype=np.int64)  # 10 bins of 1 s over [0, 10]
    w = peak_window(counts, 0.0, 10.0, 0.2)
    assert (w.start, w.end) == pytest.approx((3.0, 5.0))
    # 3 bins: sums 3, 11, 19, 19, 11, ... -> the earliest of the two busiest
    w = peak_window(counts, 0.0, 10.0, 0.3)
    assert (w.start, w.end) == pytest.approx((2.0, 5.0))
    w = peak_window(counts, 0.0, 10.0, 1.0)
    assert w.start == 0.0 and w.end > 10.0  # the whole span, its last instant included


def test_ops_histogram_counts_rows_per_bin() -> None:
    ts = np.array([0.0, 0.5, 1.0, 1.2, 3.9, 4.0])
    assert ops_histogram(ts, 0.0, 4.0, bins=4).tolist() == [2, 2, 0, 2]  # the last bin is closed


def test_streamed_histogram_equals_the_in_memory_one(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from ingest.generate import generate_table
    from tuner.sampling import _parquet_histogram

    table = generate_table("diurnal", 3000, 2, period_s=2.0, burst_s=0.1, bursts=4.0, drift_s=0.5)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=1000)
    ts = table.column("ts").to_numpy()
    lo, hi = float(ts.min()), float(ts.max())
    assert np.array_equal(_parquet_histogram([path], lo, hi, batch_rows=777), ops_histogram(ts, lo, hi))


def test_a_candidate_storms_above_the_factor_times_the_lowest_p99() -> None:
    assert storming({"a": 10.0, "b": 19.0, "c": 21.0}) == {"c"}
    assert storming({"a": 10.0, "b": 19.0, "c": 21.0}, factor=1.5) == {"b", "c"}
    assert storming({"a": 3.0}) == set() and storming({}) == set()
    assert STORM_FACTOR == 2.0


kvsim = pytest.importorskip("kvsim")


def _trace(tmp_path: Path) -> Path:
    from ingest.generate import write_trace

    out = tmp_path / "diurnal.parquet"
    write_trace(out, "diurnal", 4000, 1, rate=1000.0, period_s=4.0, burst_s=0.1, bursts=4.0, drift_s=1.0)
    return out


def test_check_replays_the_best_and_the_current_and_flags_storms(tmp_path: Path) -> None:
    import optuna

    from tailtune.simulation.source import WorkloadSource
    from tuner.evaluators import EvaluatorSpec, build_evaluator
    from tuner.objective import parse_objective
    from tuner.peak_check import PeakStretch, check
    from tuner.space import Candidate

    trace = _trace(tmp_path)
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": WorkloadSource(trace=str(trace)).as_dict()}))
    cands = [Candidate("fifo"), Candidate("rein", {"k": 4.0, "range_factor": 3.0}), Candidate("brb-equalmax")]
    trials = []
    for i, (c, v) in enumerate(zip([*cands, cands[0]], [3.0, 1.0, 2.0, 3.0], strict=True)):
        t = optuna.trial.create_trial(value=v, user_attrs={"candidate": c.as_dict(), "metrics": {"p99_ms": v}})
        t.number = i
        trials.append(t)
    stretch = PeakStretch(str(trace), 0.0, 4.0, 4000, {}, None)
    current = Candidate("rein", {"k": 2.0, "range_factor": 2.0})
    res = check(ev, stretch, trials, parse_objective("p99"), current, (0,), top=2, factor=1.0)
    rows = res.block["checked"]
    # the 2 best distinct candidates in rank order (rein 1.0, brb 2.0), then the current config
    assert [(r["policy"], r["current"]) for r in rows] == [("rein", False), ("brb-equalmax", False), ("rein", True)]
    assert [r["sample_p99_ms"] for r in rows] == [1.0, 2.0, None]
    peak = {r["policy"] + str(r["current"]): r["peak_p99_ms"] for r in rows}
    low = min(peak, key=peak.__getitem__)
    # factor 1: everything above the lowest p99 over the stretch storms; the lowest one alone is allowed
    assert [r["storms"] for r in rows] == [k != low for k in peak]
    assert len(res.allowed) == 1 and res.block["rejected"] == sum(not r["current"] and r["storms"] for r in rows)
    assert res.block["current_storms"] == (low != "reinTrue")
    assert res.block["window"] == [0.0, 4.0] and res.block["top"] == 2 and res.block["storm_factor"] == 1.0


def _tune(cli: Any, trace: Path, *extra: str) -> dict[str, Any]:
    r = cli("tune", str(trace), "--store", "cassandra", "--trials", "8", "--seeds", "2", "--use-timestamps",
            "--sample-fraction", "0.25", "--strata", "4", "--alternative-trials", "0", "--no-mlflow", "--storage",
            "memory", "--json", *extra)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_tune_picks_the_best_checked_candidate_that_does_not_storm(cli: Any, tmp_path: Path) -> None:
    doc = _tune(cli, _trace(tmp_path))
    check = doc["sampling"]["peak_check"]
    assert check["requests"] > 0 and check["window"][1] > check["window"][0] and check["top"] == 5
    assert check["load_factor"] > 0  # replayed at the stretch's absolute rate
    rows = check["checked"]
    assert sum(r["current"] for r in rows) == 1  # the current config is checked once, ranked or not
    assert sum(not r["current"] for r in rows) <= check["top"]
    low = min(r["peak_p99_ms"] for r in rows)
    assert [r["storms"] for r in rows] == [r["peak_p99_ms"] > STORM_FACTOR * low for r in rows]
    first_ok = next(r for r in rows if not r["storms"])
    picked = doc["best"]
    if first_ok["current"]:
        assert doc["verdict"] == "keep current"
    else:  # the first candidate in rank order that does not storm is the study's best
        assert (picked["policy"], picked["params"]) == (first_ok["policy"], first_ok["params"])


def test_tune_says_so_when_every_candidate_storms(cli: Any, tmp_path: Path, monkeypatch: Any) -> None:
    import tuner.peak_check

    monkeypatch.setattr(tuner.peak_check, "STORM_FACTOR", 0.5)  # every p99 exceeds half the lowest
    doc = _tune(cli, _trace(tmp_path))
    assert all(r["storms"] for r in doc["sampling"]["peak_check"]["checked"])
    assert doc["verdict"] == "keep current" and doc["best"] is None
    assert doc["reason"] == "every candidate checked storms over the trace's busiest stretch (sampling: peak check)"


def test_tune_text_output_reports_the_peak_check(cli: Any, tmp_path: Path) -> None:
    r = cli("tune", str(_trace(tmp_path)), "--store", "cassandra", "--trials", "3", "--seeds", "1",
            "--policies", "fifo,rein", "--sample-fraction", "0.5", "--strata", "2", "--no-mlflow", "--storage",
            "memory")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "peak check over the busiest" in r.stdout and "best storm there (p99 over 2x the lowest)" in r.stdout
