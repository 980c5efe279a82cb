"""Two characterizations compared quantity by quantity (analysis/drift.py): the statistics worked by hand, what
cannot be compared, the thresholds. No Spark: the nightly tests (tests/jobs/test_drift.py) compare real
analyses."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.drift import QUANTITIES, Characterization, Thresholds, compare, ks_critical, ks_distance
from base.settings import Settings


def _h(sizes: list[int], requests: list[int]) -> tuple[Any, Any]:
    return np.asarray(sizes, dtype=np.int64), np.asarray(requests, dtype=np.int64)


def _summary(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "multiget_size": {"mean": 3.0, "p99": 20.0},
        "key_popularity": {
            "zipf_alpha_mle": 0.9,
            "top_keys": [{"key": f"k{i}", "count": 100 - i, "share": 0.02 - 0.001 * i} for i in range(10)],
        },
        "value_size": {"p50": 100.0, "p90": 1000.0, "p99": 4000.0},
        "arrivals": {"rate_mean": 1000.0},
        "fanout": {"servers": 6, "replication": 3, "opsets_mean": 2.5},
        "null_reasons": {},
    }
    for path, value in over.items():
        section, field = path.split("__")
        doc[section][field] = value
    return doc


SIZES = _h(list(range(1, 41)), [1000] * 40)


def _c(doc: dict[str, Any], hist: tuple[Any, Any] | None = SIZES) -> Characterization:
    return Characterization(doc, hist)


def test_ks_distance_worked_by_hand() -> None:
    # a: sizes 1,2,3 with 2,1,1 requests → CDF .5 .75 1;  b: sizes 1,3 with 1,1 → CDF .5 .5 1: largest gap .25 at 2
    assert ks_distance(_h([1, 2, 3], [2, 1, 1]), _h([1, 3], [1, 1])) == pytest.approx(0.25)
    # disjoint supports: 1
    assert ks_distance(_h([1, 2], [5, 5]), _h([7], [3])) == 1.0
    # the order of the table's rows does not matter
    assert ks_distance(_h([3, 1, 2], [1, 2, 1]), _h([3, 1], [1, 1])) == pytest.approx(0.25)
    # c(0.05) = 1.358 (the textbook constant); n = m = 100 → 1.358·√0.02
    assert ks_critical(100, 100, 0.05) == pytest.approx(1.3581 * math.sqrt(0.02), rel=1e-4)


def test_the_same_characterization_has_not_moved() -> None:
    q = compare(_c(_summary()), _c(_summary()))
    assert list(q) == list(QUANTITIES)
    assert not any(e["moved"] for e in q.values())
    assert all(e["value"] == 0 for e in q.values()), q
    assert q["hot_set"]["jaccard"] == 1.0
    assert q["multiget_size"]["threshold"] == 0.05 and q["multiget_size"]["reason"] is None
    assert q["fanout"]["old"] == {"opsets_mean": 2.5, "servers": 6, "replication": 3}


def test_each_quantity_moves_past_its_threshold_and_not_before() -> None:
    t = Thresholds()
    old = _c(_summary())
    # request sizes: 10% of the requests move from 1 key to 40 keys → KS distance 0.1
    heavier = _h(list(range(1, 41)), [0] + [1000] * 38 + [2000])
    cases: list[tuple[str, Characterization, float, bool]] = [
        ("multiget_size", _c(_summary(), heavier), 1000 / 40000, False),
        ("multiget_size_p99", _c(_summary(multiget_size__p99=26.0)), 0.3, True),
        ("multiget_size_p99", _c(_summary(multiget_size__p99=24.0)), 0.2, False),
        ("zipf_alpha", _c(_summary(key_popularity__zipf_alpha_mle=1.05)), 0.15, True),
        ("zipf_alpha", _c(_summary(key_popularity__zipf_alpha_mle=0.85)), 0.05, False),
        ("value_size", _c(_summary(value_size__p99=6000.0)), 0.5, True),
        ("value_size", _c(_summary(value_size__p50=80.0)), 0.2, False),
        ("request_rate", _c(_summary(arrivals__rate_mean=1150.0)), 0.15, True),
        ("request_rate", _c(_summary(arrivals__rate_mean=950.0)), 0.05, False),
        ("fanout", _c(_summary(fanout__opsets_mean=3.0)), 0.2, True),
        ("fanout", _c(_summary(fanout__opsets_mean=2.3)), 0.08, False),
    ]
    for name, new, value, moves in cases:
        q = compare(old, new, t)
        assert q[name]["value"] == pytest.approx(value), name
        assert [n for n, e in q.items() if e["moved"]] == ([name] if moves else []), name
    # the 1 → 40 shift is 2.5% of the requests: below 0.05; 10% of them is above
    big = _h(list(range(1, 41)), [0, 0, 0, 0] + [1000] * 35 + [5000])
    q = compare(old, _c(_summary(), big))
    assert q["multiget_size"]["value"] == pytest.approx(0.1) and q["multiget_size"]["moved"]
    # a looser setting lets the same move pass
    assert not compare(old, _c(_summary(), big), Thresholds(multiget_ks=0.2))["multiget_size"]["moved"]
    assert compare(old, _c(_summary(value_size__p99=6000.0)))["value_size"]["changes"] == {
        "p50": 0.0, "p90": 0.0, "p99": 0.5}


def test_a_small_sample_needs_the_ks_critical_value() -> None:
    """10 requests against 10: a distance of 0.3 is noise at level 0.001 (critical value 0.87)."""
    a = _h([1, 2], [5, 5])
    b = _h([1, 2], [2, 8])
    q = compare(_c(_summary(), a), _c(_summary(), b))["multiget_size"]
    assert q["value"] == pytest.approx(0.3)
    assert q["threshold"] == pytest.approx(ks_critical(10, 10, 0.001)) and not q["moved"]
    assert "critical value" in q["reason"] and "sampling noise" in q["reason"]


def test_hot_set_counts_the_accesses_to_newly_hot_keys() -> None:
    old = _summary()
    new = copy.deepcopy(old)
    # the two hottest keys are replaced by keys that were not in the old top 10
    new["key_popularity"]["top_keys"][0] = {"key": "x0", "count": 100, "share": 0.02}
    new["key_popularity"]["top_keys"][1] = {"key": "x1", "count": 99, "share": 0.019}
    q = compare(_c(old), _c(new))
    assert q["hot_set"]["value"] == pytest.approx(0.039) and not q["hot_set"]["moved"]
    assert q["hot_set"]["jaccard"] == pytest.approx(8 / 12)
    assert q["hot_set_share"]["value"] == pytest.approx(0.0) and not q["hot_set_share"]["moved"]
    # a whole new hot set carrying 15% of the accesses
    new["key_popularity"]["top_keys"] = [{"key": f"y{i}", "count": 500, "share": 0.015} for i in range(10)]
    q = compare(_c(old), _c(new))
    assert q["hot_set"]["value"] == pytest.approx(0.15) and q["hot_set"]["moved"]
    assert q["hot_set"]["jaccard"] == 0.0
    assert q["hot_set_share"]["value"] == pytest.approx(0.005) and not q["hot_set_share"]["moved"]
    # a uniform workload: the top keys change every night, but carry almost nothing
    flat = [{"key": f"u{i}", "count": 3, "share": 0.0001} for i in range(10)]
    other = [{"key": f"v{i}", "count": 3, "share": 0.0001} for i in range(10)]
    q = compare(_c(_summary(key_popularity__top_keys=flat)), _c(_summary(key_popularity__top_keys=other)))
    assert q["hot_set"]["jaccard"] == 0.0 and not q["hot_set"]["moved"]


def test_what_cannot_be_compared_counts_as_moved_and_says_why() -> None:
    old = _summary()
    del old["value_size"]["p99"]
    old["null_reasons"] = {"arrivals.rate_mean": "all requests share one timestamp"}
    old["arrivals"]["rate_mean"] = None
    q = compare(_c(old, None), _c(_summary()))
    for name in ("multiget_size", "value_size", "request_rate"):
        assert q[name]["moved"] and q[name]["value"] is None, name
        assert q[name]["reason"].startswith("cannot be compared: the earlier characterization lacks it"), name
    assert "all requests share one timestamp" in q["request_rate"]["reason"]
    assert "multiget_size_histogram" in q["multiget_size"]["reason"]
    # the new trace lacking what the old had: moved too (the tuner would replay it differently)
    q = compare(_c(_summary()), _c(_summary(arrivals__rate_mean=None)))
    assert q["request_rate"]["moved"] and "the new trace lacks it" in q["request_rate"]["reason"]
    # neither has it: not moved
    none = {"value_size": {"p50": None, "p90": None, "p99": None}}
    reasons = {"null_reasons": {"value_size.p50": "the trace carries no value sizes"}}
    a, b = {**_summary(), **none, **reasons}, {**_summary(), **none, **reasons}
    q = compare(_c(a), _c(b))
    assert not q["value_size"]["moved"] and "neither trace has it" in q["value_size"]["reason"]
    assert "carries no value sizes" in q["value_size"]["reason"]
    # an old summary without top keys, without a fan-out section
    old = _summary()
    del old["key_popularity"]["top_keys"], old["fanout"]
    q = compare(_c(old), _c(_summary()))
    assert q["hot_set"]["moved"] and q["hot_set_share"]["moved"] and q["fanout"]["moved"]
    assert "top_keys" in q["hot_set"]["reason"]


def test_a_topology_change_moves_the_fanout() -> None:
    q = compare(_c(_summary()), _c(_summary(fanout__servers=8)))["fanout"]
    assert q["value"] == 0 and q["moved"]
    assert q["reason"] == "the topology it is computed on changed: 6 servers RF 3 → 8 servers RF 3"


def test_characterization_reads_an_analysis_directory(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    assert Characterization.load(tmp_path).size_hist is None
    (tmp_path / "tables").mkdir()
    pq.write_table(pa.table({"size": pa.array([2, 1], pa.int64()), "requests": pa.array([3, 4], pa.int64())}),
                   tmp_path / "tables" / "multiget_size_histogram.parquet")
    c = Characterization.load(tmp_path)
    assert c.size_hist is not None and c.size_hist[0].tolist() == [2, 1] and c.size_hist[1].tolist() == [3, 4]
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        Characterization.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        Characterization.load(tmp_path / "gone")


def test_thresholds_are_the_settings() -> None:
    s = Settings(drift_multiget_ks=0.2, drift_request_rate=0.3)
    t = Thresholds.of(s)
    assert t.multiget_ks == 0.2 and t.request_rate == 0.3
    assert Thresholds.of(Settings()) == Thresholds()  # the defaults agree
