"""Sampling: stratified contiguous windows (deterministic per seed, ≈ the fraction asked), the sampled table,
the error bound from the calibration, and `tailtune tune --sample-fraction / --target-error` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from base.errors import BadInputError
from tuner.sampling import (
    CALIBRATED_ON,
    CALIBRATION,
    SamplingSpec,
    Window,
    error_bound,
    fraction_for_error,
    plan_windows,
    request_times,
    sample_table,
)


def _table(n: int = 1000, span: float = 100.0, keys_per_request: int = 2) -> pa.Table:
    """n requests at evenly spread times over [0, span), `keys_per_request` rows each, rows of a request apart."""
    ts = np.linspace(0.0, span, n, endpoint=False)
    rid = np.tile(np.arange(n, dtype=np.int64), keys_per_request)  # rows of one request are not consecutive
    return pa.table({
        "request_id": pa.array(rid),
        "ts": pa.array(np.tile(ts, keys_per_request)),
        "key": pa.array([f"k{i}" for i in range(rid.size)]),
        "value_size": pa.array(np.full(rid.size, 100, dtype=np.int64)),
    })  # fmt: skip


def test_one_window_per_stratum_of_the_fraction() -> None:
    windows = plan_windows(10.0, 110.0, 0.2, 5, seed=3)
    assert [w.stratum for w in windows] == [0, 1, 2, 3, 4]
    for w in windows:
        lo, hi = 10.0 + 20.0 * w.stratum, 10.0 + 20.0 * (w.stratum + 1)
        assert lo <= w.start and w.end <= hi  # inside its stratum: contiguous, no overlap
        assert w.end - w.start == pytest.approx(4.0)
    assert sum(w.end - w.start for w in windows) == pytest.approx(0.2 * 100.0)


def test_windows_are_deterministic_per_seed() -> None:
    assert plan_windows(0.0, 50.0, 0.1, 8, seed=1) == plan_windows(0.0, 50.0, 0.1, 8, seed=1)
    assert plan_windows(0.0, 50.0, 0.1, 8, seed=1) != plan_windows(0.0, 50.0, 0.1, 8, seed=2)


def test_fraction_one_covers_the_whole_span() -> None:
    table = _table()
    _, ts, _ = request_times(table)
    sample, info = sample_table(table, plan_windows(float(ts[0]), float(ts[-1]), 1.0, 4, seed=0))
    assert info.replayed_fraction == 1.0 and sample.num_rows == table.num_rows


@pytest.mark.parametrize("fraction", [0.05, 0.1, 0.3])
def test_sample_keeps_whole_requests_and_about_the_fraction(fraction: float) -> None:
    table = _table(n=2000)
    windows = plan_windows(0.0, 100.0, fraction, 10, seed=7)
    sample, info = sample_table(table, windows)
    assert info.replayed_fraction == pytest.approx(fraction, abs=0.01)
    counts = np.bincount(sample.column("request_id").to_numpy())
    assert set(counts[counts > 0].tolist()) == {2}  # every kept request keeps all its rows
    assert sample.num_rows == 2 * info.requests and info.ops == sample.num_rows
    ts = sample.column("ts").to_numpy()
    assert np.all(np.diff(ts) >= 0)  # windows laid end to end, in time order
    assert ts.max() - ts.min() <= fraction * 100.0 + 1e-9  # no gaps between windows
    assert info.load_factor == pytest.approx(1.0, rel=0.1)  # an even trace: the windows' rate is the trace's


def test_load_factor_is_the_windows_rate_over_the_traces() -> None:
    # Requests twice as dense in the second half: a window there has ~4/3 of the mean rate.
    ts = np.concatenate([np.linspace(0.0, 50.0, 500, endpoint=False), np.linspace(50.0, 100.0, 1000)])
    table = pa.table({"request_id": pa.array(np.arange(ts.size, dtype=np.int64)), "ts": pa.array(ts)})
    _, info = sample_table(table, [Window(0, 60.0, 90.0)])
    assert info.load_factor == pytest.approx(2.0 / 1.5, rel=0.02)


def test_streamed_sample_equals_the_in_memory_one(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from ingest.generate import generate_table
    from tuner.sampling import parquet_span, sample_parquet

    table = generate_table("diurnal", 3000, 2, period_s=2.0, burst_s=0.1, bursts=4.0, drift_s=0.5)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=1000)
    _, ts, _ = request_times(table)
    assert parquet_span([path]) == (ts[0], ts[-1])
    windows = plan_windows(float(ts[0]), float(ts[-1]), 0.2, 5, seed=4)
    streamed, s_info = sample_parquet([path], windows, batch_rows=777)
    whole, w_info = sample_table(table, windows)
    assert streamed.equals(whole) and s_info == w_info


def test_error_bound_reads_the_calibration() -> None:
    assert error_bound(1.0) == (0.0, 0.0)
    f, p50, p99 = CALIBRATION[0]
    assert error_bound(f) == (p50, p99)
    lo50, lo99 = error_bound(f / 4)
    assert lo99 == pytest.approx(2 * p99) and lo50 == pytest.approx(2 * p50)  # extrapolated: × sqrt(4)
    assert fraction_for_error(CALIBRATION[0][2]) == CALIBRATION[0][0]
    assert fraction_for_error(1e-6) == 1.0
    assert all(error_bound(fraction_for_error(e))[1] <= e for e in (CALIBRATION[0][2], 100.0))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"fraction": 0.0}, "sample_fraction"),
        ({"fraction": 1.5}, "sample_fraction"),
        ({"target_error_pct": -1.0}, "target_error"),
        ({"fraction": 0.1, "target_error_pct": 5.0}, "sample_fraction"),
        ({"strata": 0}, "strata"),
        ({"seed": -1}, "sample_seed"),
    ],
)
def test_bad_spec_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInputError) as err:
        SamplingSpec(**kwargs)
    assert f"field '{field}'" in str(err.value)


kvsim = pytest.importorskip("kvsim")


def _trace(tmp_path: Path) -> Path:
    from ingest.generate import write_trace

    out = tmp_path / "diurnal.parquet"
    write_trace(out, "diurnal", 4000, 1, rate=1000.0, period_s=4.0, burst_s=0.1, bursts=4.0, drift_s=1.0)
    return out


def test_tune_with_a_sample_fraction_reports_it(cli: Any, tmp_path: Path, tailtune_home: Path) -> None:
    trace = _trace(tmp_path)
    r = cli("tune", str(trace), "--store", "cassandra", "--trials", "3", "--seeds", "1", "--policies", "fifo,rein",
            "--use-timestamps", "--sample-fraction", "0.25", "--strata", "4", "--no-mlflow", "--storage", "memory",
            "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["replayed_fraction"] == pytest.approx(0.25, abs=0.08)
    s = doc["sampling"]
    assert s["replayed_fraction"] == doc["replayed_fraction"] and len(s["windows"]) == 4
    assert s["error_bound"]["p99_pct"] > 0 and s["method"] == "stratified contiguous time windows"
    assert s["error_bound"]["calibrated_on"] == CALIBRATED_ON and "burst stretch" in s["error_bound"]["not_valid_for"]
    assert doc["source"] == f"trace:{trace}"  # the trace tuned for, not the sample file
    assert doc["tuned_for"]["load"] == pytest.approx(0.75 * s["load_factor"])
    assert s["requests"] == pytest.approx(0.25 * 4000, rel=0.35)
    assert list((tailtune_home / "samples").glob("*.parquet"))  # the sample the reproduce commands replay
    assert all("/samples/" in c for c in doc["reproduce"])


def test_tune_text_output_says_how_much_was_replayed(cli: Any, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    r = cli("tune", str(trace), "--store", "cassandra", "--trials", "2", "--seeds", "1", "--policies", "fifo",
            "--sample-fraction", "0.5", "--strata", "2", "--no-mlflow", "--storage", "memory")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "of the trace (2 windows); error bound p50 ±" in r.stdout


def test_tune_without_sampling_replays_everything(cli: Any) -> None:
    r = cli("tune", "--profile", "soundcloud", "--requests", "1000", "--store", "cassandra", "--trials", "2",
            "--seeds", "1", "--policies", "fifo", "--no-mlflow", "--storage", "memory", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["replayed_fraction"] == 1.0 and doc["sampling"] is None


def test_target_error_picks_the_fraction(cli: Any, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    target = CALIBRATION[1][2]
    r = cli("tune", str(trace), "--store", "cassandra", "--trials", "2", "--seeds", "1", "--policies", "fifo",
            "--target-error", str(target), "--no-mlflow", "--storage", "memory", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)["sampling"]
    assert s["span_fraction"] == fraction_for_error(target) and s["target_error_pct"] == target
    assert s["error_bound"]["p99_pct"] <= target


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample-fraction", "0"], "--sample-fraction: field 'sample_fraction': expected a number in (0, 1]"),
        (["--sample-fraction", "2"], "expected a number in (0, 1], got 2"),
        (["--target-error", "-3"], "--target-error: field 'target_error': expected a positive percentage"),
        (["--sample-fraction", "0.1", "--target-error", "5"], "not both"),
        (["--strata", "0", "--sample-fraction", "0.1"], "--strata: field 'strata': expected a positive integer"),
        (["--use-timestamps", "--store", "memcached"], "only the cassandra store replays trace timestamps"),
    ],
)
def test_bad_sampling_flags_are_one_line_usage_errors(cli: Any, args: list[str], message: str) -> None:
    r = cli("tune", "--profile", "soundcloud", "--requests", "100", "--no-mlflow", *args)
    assert r.exit_code == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
