"""`tailtune simulate --policy batching|chisel`: the memcached deployment kind through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SIMULATE_KEYS = {
    "policy", "params", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms", "requests", "ops", "events",
    "utilization", "server_load_max", "steady_state", "sim_wall_s", "events_per_s",
}


def _mice_elephant_trace(path: Path, n: int = 2000, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    sizes = np.where(rng.random(n) < 0.1, 100, 5)
    ts = np.cumsum(rng.exponential(400e-6, n))
    rid = np.repeat(np.arange(n), sizes)
    keys = [f"k{int(x)}" for x in rng.integers(0, 100_000, int(sizes.sum()))]
    table = pa.table(
        {
            "request_id": pa.array(rid, pa.int64()),
            "ts": pa.array(np.repeat(ts, sizes), pa.float64()),
            "key": pa.array(keys, pa.string()),
            "value_size": pa.array([100] * len(keys), pa.int64()),
        }
    )
    pq.write_table(table, path)
    return path


def test_chisel_without_params_reports_the_analyzer_levels(cli, tmp_path: Path) -> None:
    trace = _mice_elephant_trace(tmp_path / "me.parquet")
    res = cli("simulate", "--trace", str(trace), "--policy", "chisel", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out.keys() >= SIMULATE_KEYS
    assert out["policy"] == "chisel"
    assert out["requests"] == 2000
    # the analyzer chose split/merge levels and they are reported
    assert out["params"]["split_keys"] >= 1 and out["params"]["merge"] >= 1
    # elephants were split: more queries than requests
    assert out["ops"] > out["requests"]


def test_batching_sends_one_query_per_request_and_chisel_cuts_its_p95(cli, tmp_path: Path) -> None:
    trace = _mice_elephant_trace(tmp_path / "me.parquet")
    base = json.loads(cli("simulate", "--trace", str(trace), "--policy", "batching", "--json").stdout)
    assert base["ops"] == base["requests"] == 2000
    assert base["params"] == {}
    chisel = json.loads(cli("simulate", "--trace", str(trace), "--policy", "chisel", "--json").stdout)
    # low load (400 µs gaps): splitting elephants over query threads shortens the tail
    assert chisel["p95_ms"] < base["p95_ms"]


def test_explicit_levels_are_used_and_bad_ones_exit_2(cli, tmp_path: Path) -> None:
    trace = _mice_elephant_trace(tmp_path / "me.parquet")
    res = cli("simulate", "--trace", str(trace), "--policy", "chisel", "--param", "split_keys=25",
              "--param", "merge=1", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["params"]["split_keys"] == 25
    bad = cli("simulate", "--trace", str(trace), "--policy", "chisel", "--param", "split_keys=0")
    assert bad.exit_code == 2
    assert "split_keys" in bad.stderr
