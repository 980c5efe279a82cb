"""Fidelity records (`control.fidelity_store`) on both DB backends: a report stored and read back whole, the strict
check of what is not a report (each refusal naming the key), the summary pooled over hand-made replays with the
agreement, regret, errors and time series computed here by hand, and a lagged replay kept but not pooled."""

from __future__ import annotations

import copy
import math
from statistics import NormalDist
from typing import Any

import pytest

from control import fidelity_store
from control.db import FidelityRecordRow
from control.errors import Invalid, Missing
from tests.app_fixtures import Svc, memcached_deployment
from tests.control.fidelity_reports import report
from tuner.fidelity import Comparison, Quantiles

pytestmark = pytest.mark.db_backends

API = "/api/v1"


def _deployment(svc: Svc, name: str = "cache") -> int:
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, ["127.0.0.1:11211"]),
                        headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _record(svc: Svc, dep_id: int, doc: dict[str, Any], source: str = "replay", job_id: int | None = 7) -> int:
    with svc.db.session() as s:
        return fidelity_store.record(s, dep_id, doc, job_id=job_id, source=source)


def _wilson(k: int, m: int) -> tuple[float, float]:
    z = NormalDist().inv_cdf(0.975)
    p = k / m
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z / (1 + z * z / m) * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    return centre - half, centre + half


def test_a_report_is_stored_and_read_back_whole(svc: Svc) -> None:
    dep_id = _deployment(svc)
    doc = report(1000.0, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0},
                 [("A", "B", "p99", -20.0, (-30.0, -10.0)), ("A", "B", "p50", 1.0, (-4.0, 6.0))],
                 notes=["fresh twins: their thresholds start from the replay's own reads"])
    rid = _record(svc, dep_id, doc)
    with svc.db.session() as s:
        rows = fidelity_store.list_records(s, dep_id, limit=10, offset=0)
        assert [r.id for r in rows] == [rid]
        out = fidelity_store.record_out(rows[0])
    assert out["report"] == doc  # stored whole, read back the same
    assert (out["job_id"], out["source"], out["at"], out["flag"], out["pooled"]) == (7, "replay", 1000.0, None, True)
    assert (out["arms"], out["blocks"], out["duration_s"]) == (2, 20, 300.0)
    assert out["agreement"] == {"k": 1, "m": 1} and out["contradicts"] is False
    # the readers tuner.fidelity lacked: a stored comparison and quantiles read back
    c = Comparison.from_dict(doc["comparisons"][0])
    assert (c.diff_pct, c.interval_pct, c.resolved) == (-20.0, (-30.0, -10.0), True)
    assert Comparison.from_dict(c.as_dict()) == c
    assert Quantiles.from_dict(doc["observed"]["A"]) == Quantiles(2.5, 5.0, 10.0, 1000)
    assert math.isnan(Quantiles.from_dict({"p50_ms": None, "p95_ms": 1.0, "p99_ms": 2.0}).p50_ms)


def _bad(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = out
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


_DELETE = object()


@pytest.mark.parametrize(("path", "value", "field", "words"), [
    ("observed", _DELETE, "report.observed", "Field required"),
    ("extra", 1, "report.extra", "Extra inputs"),
    ("blocks", True, "report.blocks", "integer"),  # a boolean is not a count
    ("at", "yesterday", "report.at", "number"),
    ("observed.A.p99_ms", "fast", "report.observed.A.p99_ms", "number"),
    ("observed.Z", {"p50_ms": 1.0, "p95_ms": 1.0, "p99_ms": 1.0, "requests": 1, "errors": 0, "timeouts": 0},
     "report.observed", "Z"),
    ("comparisons.0.candidate", "nobody", "report.comparisons.0.candidate", "no arm"),
    ("comparisons.0.metric", "p42", "report.comparisons.0.metric", "p99"),
    ("comparisons.0.interval_pct", [5.0, -5.0], "report.comparisons.0.interval_pct", "low end"),
    ("arms.1.name", "A", "report.arms", "distinct"),
    ("arms.0.name", "no spaces", "report.arms.0.name", "pattern"),
    ("generator.lag_ok", "yes", "report.generator.lag_ok", "boolean"),
    ("observed.A.requests", -1, "report.observed.A.requests", "greater than or equal"),
    ("notes", "one note", "report.notes", "list"),
])
def test_what_is_not_a_report_is_refused_naming_the_key(svc: Svc, path: str, value: Any, field: str,
                                                        words: str) -> None:
    dep_id = _deployment(svc)
    doc = report(1000.0, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0}, [("A", "B", "p99", -20.0, (-30.0, -10.0))])
    with pytest.raises(Invalid) as exc, svc.db.session() as s:
        fidelity_store.record(s, dep_id, _bad(doc, path, value), job_id=None, source="cli")
    assert exc.value.field == field and words in exc.value.detail, (exc.value.field, exc.value.detail)
    assert "not a live replay report" in exc.value.detail
    with svc.db.session() as s:
        assert s.query(FidelityRecordRow).count() == 0  # nothing stored


def test_not_json_not_a_mapping_too_big_an_unknown_source_or_deployment(svc: Svc) -> None:
    dep_id = _deployment(svc)
    doc = report(1000.0, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0})
    with svc.db.session() as s:
        with pytest.raises(Invalid, match="JSON object"):
            fidelity_store.record(s, dep_id, [doc], job_id=None, source="cli")  # type: ignore[arg-type]
        with pytest.raises(Invalid, match="strict JSON"):
            fidelity_store.record(s, dep_id, {**doc, "duration_s": float("nan")}, job_id=None, source="cli")
        with pytest.raises(Invalid, match="one of replay, confirm, cli") as exc:
            fidelity_store.record(s, dep_id, doc, job_id=None, source="nightly")
        assert exc.value.field == "source"
        with pytest.raises(Missing):
            fidelity_store.record(s, dep_id + 99, doc, job_id=None, source="cli")
        with pytest.raises(Invalid, match="TAILTUNE_FIDELITY_REPORT_MAX_BYTES"):
            fidelity_store.check_report(doc, max_bytes=1024)
        assert s.query(FidelityRecordRow).count() == 0


def test_the_summary_pools_every_replay_by_hand(svc: Svc) -> None:
    dep_id = _deployment(svc)
    # 1: B faster (the model agrees), C slower (the model says faster: it contradicts) → 1 of 2
    r1 = report(1000.0, {"A": 10.0, "B": 8.0, "C": 12.0}, {"A": 10.0, "B": 9.0, "C": 9.5},
                [("A", "B", "p99", -20.0, (-30.0, -10.0)), ("A", "C", "p99", 20.0, (5.0, 35.0))])
    # 2: B faster, the model says slower → 0 of 1; its pick A is observed 10 / 8.5 − 1 = +17.6 % off the best
    r2 = report(2000.0, {"A": 10.0, "B": 8.5}, {"A": 7.5, "B": 8.0}, [("A", "B", "p99", -15.0, (-25.0, -5.0))])
    # 3: B slower, the model agrees → 1 of 1; its p50 difference is not resolved (not counted)
    r3 = report(3000.0, {"A": 10.0, "B": 11.0}, {"A": 9.0, "B": 10.0},
                [("A", "B", "p99", 10.0, (2.0, 18.0)), ("A", "B", "p50", 1.0, (-3.0, 5.0))])
    # 4: the generator lagged: kept, flagged, not pooled (it would add a disagreement)
    r4 = report(4000.0, {"A": 10.0, "B": 5.0}, {"A": 5.0, "B": 10.0}, [("A", "B", "p99", -50.0, (-60.0, -40.0))],
                lag_ok=False)
    # 5: too short to compare: no interval, nothing counted
    r5 = report(5000.0, {"A": 10.0, "B": 10.0}, {"A": 10.0, "B": 10.0}, [("A", "B", "p99", None, None)])
    ids = [_record(svc, dep_id, r, job_id=i + 1) for i, r in enumerate((r1, r2, r3, r4, r5))]
    with svc.db.session() as s:
        flags = {r.id: r.flag for r in s.query(FidelityRecordRow)}
        out = fidelity_store.summary(s, dep_id)
    assert flags[ids[3]] == "lag_too_high" and [flags[i] for i in ids if i != ids[3]] == [None] * 4
    assert (out["records"], out["pooled"], out["flagged"], out["left_out"]) == (5, 4, 1, 0)
    a = out["agreement"]
    assert (a["k"], a["m"]) == (2, 4) and a["rate"] == 0.5
    assert a["interval"] == pytest.approx(list(_wilson(2, 4)))
    assert (out["agreement_by_metric"]["p50"]["k"], out["agreement_by_metric"]["p50"]["m"]) == (0, 0)
    assert out["regret"]["max_pct"] == pytest.approx(100 * (10 / 8.5 - 1))
    assert out["regret"]["replays"] == 4
    # the pooled p99 error: ln(predicted/observed) over the 9 configs of the pooled replays
    logs = [math.log(p / o) for p, o in ((10, 10), (9, 8), (9.5, 12), (7.5, 10), (8, 8.5), (9, 10), (10, 11),
                                         (10, 10), (10, 10))]
    e = out["error"]["p99"]
    assert e["n"] == 9 and e["mean_log_ratio"] == pytest.approx(sum(logs) / 9)
    assert e["mean_abs_log_ratio"] == pytest.approx(sum(abs(x) for x in logs) / 9)
    assert e["mean_pct"] == pytest.approx(100 * math.expm1(sum(logs) / 9))
    assert out["error"]["p50"]["mean_log_ratio"] == pytest.approx(e["mean_log_ratio"])  # p50 = p99/4 on both sides
    # the series: oldest first, the flagged one left out, the agreement so far
    series = out["series"]
    assert [p["record_id"] for p in series] == [ids[0], ids[1], ids[2], ids[4]]
    assert [(p["agreement_so_far"]["k"], p["agreement_so_far"]["m"]) for p in series] == [(1, 2), (1, 3), (2, 4),
                                                                                        (2, 4)]
    assert series[1]["agreement_so_far"]["interval"] == pytest.approx(list(_wilson(1, 3)))
    assert series[1]["error_pct"]["p99"] == pytest.approx(100 * math.expm1((math.log(.75) + math.log(8 / 8.5)) / 2))
    assert [p["contradicts"] for p in series] == [True, True, False, False]
    # the findings: the replays that contradicted the model, newest first, with the pair at fault
    found = out["contradictions"]
    assert [c["record_id"] for c in found] == [ids[1], ids[0]]
    assert [(p["baseline"], p["candidate"], p["metric"]) for p in found[1]["pairs"]] == [("A", "C", "p99")]


def test_the_pool_keeps_the_newest_and_says_how_many_it_left_out(svc: Svc,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from base.settings import get_settings

    dep_id = _deployment(svc)
    for i in range(3):
        _record(svc, dep_id, report(1000.0 + i, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0},
                                    [("A", "B", "p99", -20.0, (-30.0, -10.0))]))
    monkeypatch.setenv("TAILTUNE_FIDELITY_MAX_POOLED", "2")
    get_settings.cache_clear()
    with svc.db.session() as s:
        out = fidelity_store.summary(s, dep_id)
        assert [r.at for r in fidelity_store.list_records(s, dep_id, limit=2, offset=1)] == [1001.0, 1000.0]
    assert (out["pooled"], out["left_out"], out["agreement"]["m"]) == (2, 1, 2)
    assert [p["at"] for p in out["series"]] == [1001.0, 1002.0]


def test_a_deleted_deployment_takes_its_records(svc: Svc) -> None:
    dep_id = _deployment(svc)
    _record(svc, dep_id, report(1000.0, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0}))
    assert svc.client.delete(f"{API}/deployments/{dep_id}", headers=svc.write).status_code == 204
    with svc.db.session() as s:
        assert s.query(FidelityRecordRow).count() == 0


def test_a_replay_whose_arms_interfered_is_kept_and_not_pooled(svc: Svc) -> None:
    """ALWAYS's extra reads loaded every arm while the model replays each config alone: the pooled agreement is
    restricted to replays where the interference is small, and the flagged one says why it is left out."""
    dep_id = _deployment(svc, "interfered")
    calm = report(1000.0, {"A": 10.0, "B": 8.0}, {"A": 10.0, "B": 9.0}, [("A", "B", "p99", -20.0, (-30.0, -10.0))])
    loud = report(2000.0, {"A": 10.0, "B": 8.0}, {"A": 8.0, "B": 9.0}, [("A", "B", "p99", -20.0, (-30.0, -10.0))])
    loud["interference"] = {**loud["interference"], "flagged": True, "extra_share_pct": 25.0,
                            "reason": "B's extra reads are 25.0 % of the cluster's reads (above 5 %)"}
    ids = [_record(svc, dep_id, r) for r in (calm, loud)]
    with svc.db.session() as s:
        flags = {r.id: r.flag for r in s.query(FidelityRecordRow)}
        out = fidelity_store.summary(s, dep_id)
        shown = [fidelity_store.record_out(r) for r in fidelity_store.list_records(s, dep_id, limit=10, offset=0)]
    assert (flags[ids[0]], flags[ids[1]]) == (None, "interference")
    assert (out["records"], out["pooled"], out["flagged"]) == (2, 1, 1)
    assert (out["agreement"]["k"], out["agreement"]["m"]) == (1, 1)  # the interfering replay's disagreement left out
    assert [(r["id"], r["pooled"]) for r in shown] == [(ids[1], False), (ids[0], True)]
