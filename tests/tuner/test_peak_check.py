"""The peak check of a sampled study: the burst stretches (hand-worked), the storm rule and the extra-reads-off
twin, the check's replays over the stretch, and `tailtune tune` picking the best candidate that does not storm."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.peak_check import STORM_FACTOR, estimate, first_calm, mixture_quantiles, storm_verdict, without_extra_reads
from tuner.sampling import burst_windows, ops_histogram
from tuner.space import Candidate


def test_burst_windows_start_a_quarter_piece_before_the_most_intense_bursts() -> None:
    counts = np.ones(100, dtype=np.int64)  # 100 bins of 1 s over [0, 100]
    counts[[50, 52, 20, 80, 97]] = [100, 90, 50, 40, 30]
    # 3 pieces of 10 bins (0.3 of the span), bursts of 1 bin: the burst at 50 -> [48, 58); 52 would overlap it;
    # then 20 -> [18, 28) and 80 -> [78, 88)
    wins = burst_windows(counts, 0.0, 100.0, 0.3)
    assert [(w.start, w.end) for w in wins] == [(18.0, 28.0), (48.0, 58.0), (78.0, 88.0)]
    assert [w.stratum for w in wins] == [0, 1, 2]
    # a burst near the end: its piece is shifted to end at the span's end, never overlapping another
    counts[97] = 200
    wins = burst_windows(counts, 0.0, 100.0, 0.3)
    assert [(w.start, w.end) for w in wins] == [(20.0 - 2.0, 28.0), (48.0, 58.0), (90.0, 100.0)]
    (whole,) = burst_windows(counts, 0.0, 100.0, 1.0)
    assert whole.start == 0.0 and whole.end > 100.0  # the whole span, its last instant included


def test_burst_windows_take_fewer_pieces_when_no_room_is_left() -> None:
    counts = np.ones(10, dtype=np.int64)
    counts[5] = 10
    # 3 pieces of 3 bins: [5, 8) first; then [0, 3) (the earliest of the equal ones); no room for a third
    wins = burst_windows(counts, 0.0, 10.0, 0.9, pieces=3)
    assert [(w.start, w.end) for w in wins] == [(0.0, 3.0), (5.0, 8.0)]


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


def test_the_first_candidate_in_rank_order_within_the_factor_of_the_floor_is_picked() -> None:
    assert first_calm([90.0, 21.0, 19.0, 5.0], floor=10.0) == 2  # 90 and 21 storm (> 2 x 10)
    assert first_calm([20.0, 1.0], floor=10.0) == 0  # not above 2 x the floor: calm
    assert first_calm([90.0, 21.0], floor=10.0) is None
    assert first_calm([90.0, 21.0], floor=10.0, factor=3.0) == 1
    assert first_calm([], floor=1.0) is None
    assert STORM_FACTOR == 2.0


def test_the_twin_without_extra_reads_sends_each_read_once() -> None:
    hedging = Candidate("stock", {"speculative_retry": "10ms", "driver.speculative_execution.max_executions": 2,
                                  "driver.speculative_execution.delay": 10.0, "multiget.shape": "in"})  # fmt: skip
    twin = without_extra_reads(hedging)
    # the delay between driver executions acts only with more than one: at the java4 driver's default in the twin
    assert twin is not None and twin.params == {**hedging.params, "speculative_retry": "NEVER",
                                                "driver.speculative_execution.max_executions": 1,
                                                "driver.speculative_execution.delay": 100.0}  # fmt: skip
    other_delay = Candidate("stock", {**hedging.params, "driver.speculative_execution.delay": 2.0})
    assert without_extra_reads(other_delay) == twin  # twins that behave alike are one candidate
    assert without_extra_reads(twin) is None  # already sends each read once
    assert without_extra_reads(Candidate("fifo")) is None  # carries no extra-read knob
    only_coordinator = without_extra_reads(Candidate("rein", {"k": 4, "speculative_retry": "99p"}))
    assert only_coordinator == Candidate("rein", {"k": 4, "speculative_retry": "NEVER"})


def test_the_mixture_weighs_each_stratum_by_its_share_of_the_trace() -> None:
    sample, bursts = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0])
    # weights: 0.75 / 4 each for the sample, 0.25 / 2 each for the bursts; cumulative 3/16, 6/16, 9/16, 12/16, 14/16, 1
    assert mixture_quantiles(sample, bursts, 0.25, qs=(0.5, 0.75, 0.8, 0.99)) == [3.0, 4.0, 10.0, 20.0]
    assert mixture_quantiles(sample, bursts, 0.0, qs=(0.99,)) == [4.0]  # the bursts weigh nothing
    assert mixture_quantiles(sample, np.array([]), 0.25, qs=(0.99,)) == [4.0]
    assert mixture_quantiles(np.array([]), bursts, 0.25, qs=(0.5,)) == [10.0]


def test_the_estimate_averages_the_seeds_mixtures() -> None:
    est = estimate([np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 3.0, 4.0, 5.0])],
                   [np.array([10.0, 20.0]), np.array([30.0, 40.0])], 0.25)  # fmt: skip
    assert (est["p50_ms"], est["p99_ms"]) == (3.5, 30.0) and est["burst_share"] == 0.25


def _block(current_storms: bool, picked: list[float], current: list[float], rank: int | None = 0) -> dict[str, Any]:
    return {"current_storms": current_storms, "picked_rank": rank,
            "checked": [{"policy": "stock", "params": {"speculative_retry": "NEVER"}, "current": False,
                         "peak_p99_per_seed_ms": picked}],
            "references": [{"policy": "stock", "params": {"speculative_retry": "99p"}, "current": True,
                            "peak_p99_per_seed_ms": current}]}  # fmt: skip


def test_a_current_config_that_storms_over_the_stretch_is_replaced_on_that_evidence() -> None:
    best, current = Candidate("stock", {"speculative_retry": "NEVER"}), Candidate("stock", {"speculative_retry": "99p"})
    v = storm_verdict(_block(True, [18.0, 19.0], [350.0, 362.0]), best, current)
    assert v is not None and v.recommend and v.p_value is not None and v.p_value < 0.05
    assert v.improvement_pct == pytest.approx(100.0 * (356.0 - 18.5) / 356.0)
    assert v.reason.startswith("the current config storms over the trace's burst stretches (p99 356.000 ms")
    assert storm_verdict(_block(False, [18.0, 19.0], [350.0, 362.0]), best, current) is None  # current calm
    assert storm_verdict(_block(True, [18.0, 500.0], [350.0, 362.0]), best, current) is None  # not significant
    assert storm_verdict(_block(True, [18.0], [350.0]), best, current) is None  # one seed: no test
    assert storm_verdict(_block(True, [18.0, 19.0], [350.0, 362.0], rank=None), best, current) is None
    other = Candidate("stock", {"speculative_retry": "10ms"})
    assert storm_verdict(_block(True, [18.0, 19.0], [350.0, 362.0]), other, current) is None  # not the picked one
    assert storm_verdict(_block(True, [18.0, 19.0], [350.0, 362.0]), current, current) is None


kvsim = pytest.importorskip("kvsim")


def _trace(tmp_path: Path) -> Path:
    from ingest.generate import write_trace

    out = tmp_path / "diurnal.parquet"
    write_trace(out, "diurnal", 4000, 1, rate=1000.0, period_s=4.0, burst_s=0.1, bursts=4.0, drift_s=1.0)
    return out


def _p99(row: dict[str, Any]) -> float:
    """A row's p99 over the stretches; infinite when its replays stopped above a storm's bound (then `storms`)."""
    if row["peak_p99_above_ms"] is not None:
        assert row["peak_p99_ms"] is None and row["peak_p50_ms"] is None and row["storms"]
        return math.inf
    return float(row["peak_p99_ms"])


def _check_args(tmp_path: Path) -> tuple[Any, ...]:
    import optuna

    from simulation.source import WorkloadSource
    from tuner.evaluators import EvaluatorSpec, build_evaluator
    from tuner.objective import parse_objective
    from tuner.peak_check import PeakStretch

    trace = _trace(tmp_path)
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": WorkloadSource(trace=str(trace)).as_dict()}))
    hedge = Candidate("rein", {"k": 4.0, "range_factor": 3.0, "speculative_retry": "ALWAYS"})
    cands = [Candidate("fifo"), hedge, Candidate("brb-equalmax"), Candidate("rein", {"k": 2.0, "range_factor": 2.0})]
    trials = []
    for i, (c, v) in enumerate(zip([*cands, cands[0]], [3.0, 1.0, 2.0, 4.0, 3.0], strict=True)):
        t = optuna.trial.create_trial(value=v, user_attrs={"candidate": c.as_dict(), "metrics": {"p99_ms": v}})
        t.number = i
        trials.append(t)
    stretch = PeakStretch(str(trace), ((0.0, 4.0),), 4000, 1.0, {}, None)
    current = Candidate("fifo", {"speculative_retry": "99p"})
    return ev, stretch, trials, parse_objective("p99"), current


def test_the_delay_between_driver_executions_changes_nothing_with_one_execution(tmp_path: Path) -> None:
    """Why a twin's delay is set to the default: with max_executions 1 the replay is the same whatever the delay."""
    ev = _check_args(tmp_path)[0]
    one: dict[str, int | float | str] = {"speculative_retry": "NEVER", "driver.speculative_execution.max_executions": 1}
    a, b = (Candidate("stock", {**one, "driver.speculative_execution.delay": d}) for d in (1.0, 100.0))
    assert np.array_equal(ev.latencies_ms(a, 0), ev.latencies_ms(b, 0))
    two = {**one, "driver.speculative_execution.max_executions": 2}  # with two executions the delay acts
    a, b = (Candidate("stock", {**two, "driver.speculative_execution.delay": d}) for d in (1.0, 100.0))
    assert not np.array_equal(ev.latencies_ms(a, 0), ev.latencies_ms(b, 0))


class _Counting:
    def __init__(self, ev: Any) -> None:
        self.ev, self.replays = ev, 0

    def evaluate(self, cand: Candidate, seed: int, fraction: float = 1.0) -> Any:
        self.replays += 1
        return self.ev.evaluate(cand, seed, fraction)

    def evaluate_below(self, cand: Candidate, seed: int, p99_ms: float) -> Any:
        self.replays += 1
        return self.ev.evaluate_below(cand, seed, p99_ms)


def test_the_checks_of_one_job_share_their_replays(tmp_path: Path) -> None:
    """A second check over the same stretches and seeds (the alternative server's study) replays only what the
    first did not, and decides as it would alone."""
    from tuner.peak_check import PeakReplays, check

    ev, stretch, trials, objective, current = _check_args(tmp_path)
    counting = _Counting(ev)
    shared = PeakReplays()
    first = check(counting, stretch, trials, objective, current, (0, 1), top=2, replays=shared)  # type: ignore[arg-type]
    n_first = counting.replays
    assert n_first > 0 and len(shared.metrics) + len(shared.above) > 0
    again = check(counting, stretch, trials, objective, current, (0, 1), top=2, replays=shared)  # type: ignore[arg-type]
    assert counting.replays == n_first and again.block == first.block  # everything known: no replay
    other = trials[2:]  # another study's ranking: brb, fifo, rein k=2 (fifo: the current config's policy)
    alone_counting = _Counting(ev)
    alone = check(alone_counting, stretch, other, objective, current, (0, 1), top=2)  # type: ignore[arg-type]
    before = counting.replays
    both = check(counting, stretch, other, objective, current, (0, 1), top=2, replays=shared)  # type: ignore[arg-type]
    assert both.block == alone.block
    assert counting.replays - before < alone_counting.replays  # the current config and its twin: known


def test_stopping_a_storm_early_changes_no_decision(tmp_path: Path) -> None:
    """The check with replays that stop once a candidate certainly storms decides as the check with every
    replay whole, and the stopped candidates' whole p99 is above the bound they stopped at."""
    from tuner.peak_check import check

    ev, stretch, trials, objective, current = _check_args(tmp_path)
    for factor, seeds in ((1.0, (0,)), (1.0, (0, 1)), (1.5, (0, 1))):
        fast = check(ev, stretch, trials, objective, current, seeds, top=2, limit=4, factor=factor)
        whole_ev = _check_args(tmp_path)[0]
        whole_ev.evaluate_below = lambda c, s, bound, ev=whole_ev: ev.evaluate(c, s)  # never stops
        whole = check(whole_ev, stretch, trials, objective, current, seeds, top=2, limit=4, factor=factor)
        a, b = fast.block, whole.block
        for k in ("floor_p99_ms", "picked_rank", "picked_twin", "current_storms", "rejected"):
            assert a[k] == b[k], k
        assert (fast.allowed, fast.fallback) == (whole.allowed, whole.fallback)
        rows_a, rows_b = a["checked"] + a["references"], b["checked"] + b["references"]
        assert [r["storms"] for r in rows_a] == [r["storms"] for r in rows_b]
        assert b["stopped"] == 0 and a["stopped"] == sum(r["peak_p99_above_ms"] is not None for r in rows_a)
        for ra, rb in zip(rows_a, rows_b, strict=True):
            if ra["peak_p99_above_ms"] is None:
                assert ra == {**rb, "peak_p99_above_ms": None}
            else:
                assert rb["peak_p99_ms"] > ra["peak_p99_above_ms"] >= factor * a["floor_p99_ms"]
        if factor == 1.0:
            assert a["stopped"] >= 1  # the hedging candidate storms: its replays stop


def test_check_replays_the_best_and_the_current_and_picks_the_first_calm(tmp_path: Path) -> None:
    from tuner.peak_check import check

    ev, stretch, trials, objective, current = _check_args(tmp_path)
    res = check(ev, stretch, trials, objective, current, (0,), top=2, limit=3, factor=1.0)
    b = res.block
    checked, refs = b["checked"], b["references"]
    # rank order: hedge (1.0), brb (2.0), fifo (3.0), rein k=2 (4.0) — at most `limit` 3 of them
    assert [r["policy"] for r in checked][:2] == ["rein", "brb-equalmax"] and len(checked) <= 3
    assert [r["sample_p99_ms"] for r in checked] == [1.0, 2.0, 3.0][: len(checked)]
    # references: the current config and the extra-reads-off twins of the top 2 and of the current
    assert [(r["policy"], r["params"].get("speculative_retry"), r["current"]) for r in refs] == [
        ("fifo", "99p", True), ("rein", "NEVER", False), ("fifo", "NEVER", False)]
    floor = min(_p99(r) for r in checked[:2] + refs)
    assert b["floor_p99_ms"] == floor
    assert [r["storms"] for r in checked + refs] == [_p99(r) > floor for r in checked + refs]
    assert all(r["peak_p99_above_ms"] is None for r in refs)  # the references are replayed whole
    calm = next((i for i, r in enumerate(checked) if not r["storms"]), None)
    assert b["picked_rank"] == calm and b["rejected"] == sum(r["storms"] for r in checked)
    if calm is not None:  # the first calm one in rank order is the only one the recommendation may be
        assert res.allowed == {Candidate.from_dict(checked[calm]).key()}
        assert len(checked) == max(2, calm + 1)  # replayed on only until it was found
    else:  # none of the ranked is calm: the first calm twin replaces them, if any
        assert res.allowed == frozenset() and len(checked) == 3
        calm_twins = [r for r in refs if not r["current"] and not r["storms"]]
        if calm_twins:
            assert res.fallback is not None and b["picked_twin"] == res.fallback.as_dict()
            assert Candidate.from_dict(calm_twins[0]) == res.fallback
        else:
            assert res.fallback is None and b["picked_twin"] is None
    assert b["current_storms"] == refs[0]["storms"]
    assert b["windows"] == [[0.0, 4.0]] and (b["top"], b["limit"], b["storm_factor"]) == (2, 3, 1.0)


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
    assert check["requests"] > 0 and len(check["windows"]) == 3 and check["top"] == 3
    assert all(b > a for a, b in check["windows"])
    est = doc["sampling"]["estimate"]
    assert 0 < est["p50_ms"] <= est["p99_ms"] and est["burst_share"] == check["share"]
    assert 0 < check["share"] < 1 and check["requests"] == round(check["share"] * 4000)
    assert check["load_factor"] > 0  # replayed at the stretch's absolute rate
    rows = check["checked"] + check["references"]
    assert sum(r["current"] for r in rows) == 1  # the current config is replayed once, ranked or not
    assert check["floor_p99_ms"] == min(_p99(r) for r in check["checked"][:3] + check["references"])
    assert [r["storms"] for r in rows] == [_p99(r) > STORM_FACTOR * check["floor_p99_ms"] for r in rows]
    calm = check["picked_rank"]
    if calm is None:  # every candidate walked storms: the current config is kept
        assert all(r["storms"] for r in check["checked"]) and doc["verdict"] == "keep current"
        return
    picked = check["checked"][calm]
    assert all(r["storms"] for r in check["checked"][:calm]) and not picked["storms"]
    if picked["current"]:
        assert doc["verdict"] == "keep current"
    else:  # the first candidate in rank order that does not storm is the study's best
        assert (doc["best"]["policy"], doc["best"]["params"]) == (picked["policy"], picked["params"])


def test_tune_says_so_when_every_candidate_storms(cli: Any, tmp_path: Path, monkeypatch: Any) -> None:
    import tuner.peak_check

    monkeypatch.setattr(tuner.peak_check, "STORM_FACTOR", 0.5)  # every p99 exceeds half the lowest
    doc = _tune(cli, _trace(tmp_path))
    check = doc["sampling"]["peak_check"]
    assert all(r["storms"] for r in check["checked"]) and check["picked_rank"] is None
    assert doc["verdict"] == "keep current" and doc["best"] is None
    assert doc["reason"] == "every candidate checked storms over the trace's burst stretches (sampling: peak check)"


def test_tune_recommends_the_calm_twin_when_every_ranked_candidate_storms(
    cli: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    import tuner.peak_check

    monkeypatch.setattr(tuner.peak_check, "first_calm", lambda *a, **k: None)  # every ranked candidate storms
    doc = _tune(cli, _trace(tmp_path), "--current", "stock:speculative_retry=ALWAYS",
                "--server", "stock")  # fmt: skip
    check = doc["sampling"]["peak_check"]
    twin = check["picked_twin"]
    assert check["picked_rank"] is None and twin is not None  # ALWAYS' twin (NEVER) at least is calm here
    assert twin["params"]["speculative_retry"] == "NEVER"
    assert twin["params"].get("driver.speculative_execution.max_executions", 1) == 1
    assert (doc["best"]["policy"], doc["best"]["params"]) == (twin["policy"], twin["params"])
    assert doc["best"]["trial"] == doc["trials"]  # a trial after the study's, replayed on the sample
    assert doc["best"]["p99_ms"] > 0 and doc["sampling"]["estimate"]["p99_ms"] > 0


def test_tune_text_output_reports_the_peak_check(cli: Any, tmp_path: Path) -> None:
    r = cli("tune", str(_trace(tmp_path)), "--store", "cassandra", "--trials", "3", "--seeds", "1",
            "--policies", "fifo,rein", "--sample-fraction", "0.5", "--strata", "2", "--no-mlflow", "--storage",
            "memory")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "s around the trace's 3 most intense bursts (" in r.stdout
    assert "storm there (p99 over 2x the floor of " in r.stdout
    assert "estimate for the whole trace: p50 " in r.stdout


def test_the_peak_check_line_names_the_twin_fallback_and_the_stopped_replays() -> None:
    from tailtune.cli.commands.tune import peak_check_line

    block = {"windows": [[0.0, 10.0], [20.0, 25.0]], "requests": 1234, "checked": [{}, {}], "rejected": 2,
             "storm_factor": 2.0, "floor_p99_ms": 18.7, "picked_rank": None, "stopped": 1, "current_storms": True,
             "picked_twin": {"policy": "stock", "params": {"speculative_retry": "NEVER"}}}  # fmt: skip
    line = peak_check_line(block)
    assert line.startswith("  peak check over 15 s around the trace's 2 most intense bursts (1,234 requests): ")
    assert "2 of the sample's 2 best checked storm there (p99 over 2x the floor of 18.700 ms; 1 of them known" in line
    assert "the first calm one with its extra reads off is, replayed on the sample" in line
    assert line.endswith("; your current config storms there too")
    calm = peak_check_line({**block, "picked_rank": 1, "stopped": 0, "current_storms": False})
    assert calm.endswith("storm there (p99 over 2x the floor of 18.700 ms); the sample's #2 is recommended from")
    none = peak_check_line({**block, "picked_twin": None})
    assert "; none of them is recommended;" in none
