"""build_summary on hand-made tables (the tables of the hand trace in conftest.py): exact values, no Spark."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.summary import SCHEMA_VERSION, Collected, build_summary


def _collected(**over: object) -> Collected:
    base: dict[str, object] = dict(
        rows=7, requests=4, t_start=0.0, t_end=4.0,
        size_hist=pd.DataFrame({"size": [1, 2, 3], "requests": [2, 1, 1]}),
        count_of_counts=pd.DataFrame({"count": [3, 2, 1], "keys": [1, 1, 2]}),
        top_keys=pd.DataFrame({"key": ["a", "b"], "count": [3, 2], "share": [3 / 7, 2 / 7]}),
        value_size_hist=pd.DataFrame({"value_size": [100, 200, 300], "keys": [1, 1, 1], "accesses": [3, 2, 1]}),
        hot_sets=pd.DataFrame({"window": [0, 0, 1, 1], "rank": [1, 2, 1, 2], "key": ["a", "b", "a", "d"],
                               "count": [2, 1, 1, 1]}),
        windows=2, window_s=2.0, hot_n=2,
        rate=pd.DataFrame({"window": [0, 1], "start": [0.0, 2.0], "requests": [2, 2], "rate": [1.0, 1.0]}),
        rate_window_s=2.0,
        gaps={"n": 3, "mean": 4 / 3, "std": 0.2357, "p50": 1.5, "p99": 1.5},
        fanout_hist=pd.DataFrame({"opsets": [1, 2], "bottleneck": [1, 2], "requests": [3, 1]}),
        server_load=pd.DataFrame({"server": [0, 1, 2], "load": [2.0, 3.5, 1.5]}),
        servers=3, replication=2,
    )
    base.update(over)
    return Collected(**base)  # type: ignore[arg-type]


def test_hand_summary_exact_values() -> None:
    doc = build_summary(_collected())
    assert doc["schema_version"] == SCHEMA_VERSION
    ms = doc["multiget_size"]
    assert (ms["mean"], ms["p50"], ms["p95"], ms["p99"], ms["max"], ms["frac_multi"]) == (1.75, 1.0, 3.0, 3.0, 3, 0.5)
    assert ms["lognormal_mu"] is None and "multiget_size.lognormal_mu" in doc["null_reasons"]
    kp = doc["key_popularity"]
    assert kp["distinct_keys"] == 4 and kp["accesses"] == 7
    assert kp["one_hit_wonder_share"] == 0.5 and kp["one_hit_access_share"] == pytest.approx(2 / 7)
    assert kp["top_keys"][0] == {"key": "a", "count": 3, "share": pytest.approx(3 / 7)}
    assert kp["zipf_fit_range"] == {"rank_min": 1, "rank_max": 4}
    # hot sets {a,b} then {a,d}: Jaccard 1/3
    assert kp["hot_set_drift"]["jaccard_consecutive"] == [pytest.approx(1 / 3)]
    vs = doc["value_size"]
    assert (vs["p50"], vs["p90"], vs["p99"], vs["max"]) == (100.0, 300.0, 300.0, 300)
    assert vs["per_key"]["p50"] == 200.0
    assert vs["top1pct_bytes_share"] == pytest.approx(300 / 600)
    assert vs["top1pct_access_bytes_share"] == pytest.approx(300 / 1000)
    assert vs["thr_l_candidates"] == [
        {"bytes": 300, "rule": "p90_by_key", "key_share": 0.0, "access_share": 0.0, "bytes_share": 0.0},
        {"bytes": 200, "rule": "largest_jump", "key_share": pytest.approx(1 / 3),
         "access_share": pytest.approx(1 / 6), "bytes_share": pytest.approx(0.3)},
    ]
    assert vs["gpd_xi"] is None and "value_size.gpd_xi" in doc["null_reasons"]
    fo = doc["fanout"]
    assert (fo["servers"], fo["replication"], fo["opsets_mean"], fo["bottleneck_p99"]) == (3, 2, 1.25, 2.0)
    assert fo["hottest_partition_ratio"] == pytest.approx(3.5 / (7 / 3))
    assert fo["hottest_server"] == 1
    ar = doc["arrivals"]
    assert ar["rate_mean"] == 1.0 and ar["fano_factor"] == 0.0
    assert doc["slack_bounds"] == [] and "slack_bounds" in doc["null_reasons"]
    assert doc["latency"]["size_latency_pearson"] is None
    assert any("50% of 4 requests ask for more than one key" in s for s in doc["findings"])
    json.dumps(doc, allow_nan=False)  # JSON-ready, no NaN


def test_missing_value_sizes_and_single_key_trace_give_nulls_with_reasons() -> None:
    doc = build_summary(_collected(
        size_hist=pd.DataFrame({"size": [1], "requests": [4]}),
        count_of_counts=pd.DataFrame({"count": [4], "keys": [1]}),
        top_keys=pd.DataFrame({"key": ["a"], "count": [4], "share": [1.0]}),
        value_size_hist=pd.DataFrame({"value_size": pd.Series([], dtype="int64"),
                                      "keys": pd.Series([], dtype="int64"),
                                      "accesses": pd.Series([], dtype="int64")}),
        fanout_hist=None, server_load=None,
    ))
    assert doc["multiget_size"]["frac_multi"] == 0.0
    assert doc["key_popularity"]["zipf_alpha_mle"] is None
    assert "key_popularity.zipf_alpha_ols" in doc["null_reasons"]
    for f in ("p50", "p90", "p99", "max", "gpd_xi", "gpd_sigma"):
        assert doc["value_size"][f] is None
        assert doc["null_reasons"][f"value_size.{f}"] == "the trace carries no value sizes"
    assert doc["value_size"]["thr_l_candidates"] == []
    assert doc["fanout"]["opsets_mean"] is None and "fanout.opsets_mean" in doc["null_reasons"]
    json.dumps(doc, allow_nan=False)


def test_slack_rows_and_latency_are_reported() -> None:
    doc = build_summary(_collected(
        slack=pd.DataFrame({"utilization": [0.5], "ops": [4], "upper_ms": [0.75], "lower_ms": [0.25]}),
        latency_corr=0.4,
        latency_deciles=pd.DataFrame({"decile": [1], "requests": [2], "mean_size": [1.5],
                                      "mean_latency_us": [100.0]}),
        slack_observed={"ops": 4, "upper_ms": 0.2},
    ))
    assert doc["slack_bounds"] == [{"utilization": 0.5, "ops": 4, "upper_ms": 0.75, "lower_ms": 0.25}]
    assert doc["latency"]["size_latency_pearson"] == 0.4
    assert doc["slack_observed"] == {"ops": 4, "upper_ms": 0.2, "lower_ms": None}
