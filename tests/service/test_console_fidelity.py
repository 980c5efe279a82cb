"""The deployment page's "the model on your cluster" (through the app): its empty state says how to run a live
replay; with stored replays it shows the pooled pair agreement k of m with its interval, the error per percentile
(table and figure), the agreement over time, the newest replay's arms, comparisons and notes, and a finding for a
replay that contradicted the model. Drawn in a real browser: tests/service/test_console_browser.py."""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

from control import fidelity_store
from tests.app_fixtures import Svc, admin_headers, memcached_deployment
from tests.control.fidelity_reports import report
from tests.service.test_console import sign_in

API = "/api/v1"


def _deployment(svc: Svc, *, allowed: bool) -> int:
    body = {**memcached_deployment("web", ["127.0.0.1:1"]), "replay_allowed": allowed}
    r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc) if allowed else svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _section(page: str) -> str:
    m = re.search(r'<section aria-labelledby="fid-h" id="fidelity">(.*?)</section>', page, re.S)
    assert m is not None, "no fidelity section"
    return m.group(1)


def _spec(page: str, plot: str) -> dict[str, Any]:
    m = re.search(rf'<script type="application/json" id="{plot}-spec">(.*?)</script>', page, re.S)
    assert m is not None, f"no figure {plot}"
    spec: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return spec


def test_the_empty_section_says_how_to_run_a_replay(svc: Svc) -> None:
    dep_id = _deployment(svc, allowed=False)
    sign_in(svc, svc.read)
    r = svc.client.get(f"/deployments/{dep_id}")
    assert r.status_code == 200, r.text
    text = html.unescape(_section(r.text))
    assert "The model on your cluster" in r.text and 'id="fid-empty"' in text
    assert "tailtune replay --deployment web --dataset ID --config A=current --config B=recommended" in text
    assert f"POST /api/v1/deployments/{dep_id}/replays" in text
    assert "does not allow it yet" in text and "fid-error-spec" not in r.text


def test_the_section_shows_the_models_fidelity_and_a_contradiction(svc: Svc) -> None:
    dep_id = _deployment(svc, allowed=True)
    r1 = report(1_700_000_000.0, {"A": 10.0, "B": 8.0, "C": 12.0}, {"A": 10.0, "B": 9.0, "C": 9.5},
                [("A", "B", "p99", -20.0, (-30.0, -10.0)), ("A", "C", "p99", 20.0, (5.0, 35.0))])
    r2 = report(1_700_000_100.0, {"A": 10.0, "B": 11.0}, {"A": 9.0, "B": 10.0},
                [("A", "B", "p99", 10.0, (2.0, 18.0)), ("A", "B", "p50", None, None)],
                notes=["fresh twins: a twin's threshold starts from the replay's own reads"])
    with svc.db.session() as s:
        first = fidelity_store.record(s, dep_id, r1, job_id=None, source="cli")
        fidelity_store.record(s, dep_id, r2, job_id=None, source="cli")
    sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep_id}").text
    text = html.unescape(re.sub(r"\s+", " ", _section(page)))
    assert "fid-empty" not in text
    assert "ranked <strong>2 of 3</strong> resolved pairs" in text and "95 % interval" in text
    # the finding: replay 1's C is slower on the cluster, the model said faster
    finding = re.search(rf'id="fid-finding-{first}">(.*?)</div>', text)
    assert finding is not None and "contradicted the model" in finding.group(1)
    assert "p99 of <code>C</code> against <code>A</code>: observed +20.0 % [+5.0 %, +35.0 %]" in finding.group(1)
    assert "the model predicted -5.0 %" in finding.group(1)
    # the error per percentile: the newest replays' and all pooled (here the same 5 configs)
    rows = dict(re.findall(r'<tr><th scope="row">(p\d\d)</th><td>([^<]*)<', text))
    logs = [0.0, math.log(9 / 8), math.log(9.5 / 12), math.log(9 / 10), math.log(10 / 11)]  # ln(predicted/observed)
    assert rows == {m: f"{100 * math.expm1(sum(logs) / 5):+.1f} % " for m in ("p50", "p95", "p99")}
    assert "(5 configs)" in text
    # the newest replay: its arms, its comparisons (the refused one says why), its notes
    arms = re.search(r'id="fid-arms"(.*?)</table>', text)
    assert arms is not None and ">A</th>" in arms.group(1) and ">B</th>" in arms.group(1) and "C" not in re.sub(
        r"<[^>]+>", "", arms.group(1)).split("p99 error")[1]
    comparisons = re.search(r'id="fid-comparisons"(.*?)</table>', text)
    assert comparisons is not None and "[+2.0 %, +18.0 %]" in comparisons.group(1)
    assert "not estimated: blocks of 0.5 s are shorter than 15 s" in comparisons.group(1)
    assert "fresh twins: a twin's threshold starts from the replay's own reads" in text
    # the figures: error per percentile per replay, agreement so far with its band
    error = _spec(page, "fid-error")
    assert [t["name"] for t in error["data"]] == ["p50 error", "p95 error", "p99 error"]
    assert len(error["data"][2]["y"]) == 2
    agreement = _spec(page, "fid-agreement-plot")
    assert agreement["data"][-1]["y"] == [0.5, 2 / 3] and agreement["data"][-1]["text"] == ["1 of 2 pairs",
                                                                                            "2 of 3 pairs"]
    # a newer replay whose arms interfered: shown with why it is not pooled, the agreement as it was
    r3 = report(1_700_000_200.0, {"A": 10.0, "B": 12.0}, {"A": 10.0, "B": 8.0}, [("A", "B", "p99", 20.0, (5.0, 35.0))])
    r3["interference"].update(flagged=True, reason="B's extra reads are 40.0 % of the cluster's reads")
    with svc.db.session() as s:
        fidelity_store.record(s, dep_id, r3, job_id=None, source="cli")
    text = html.unescape(re.sub(r"\s+", " ", _section(svc.client.get(f"/deployments/{dep_id}").text)))
    assert "Interference: B's extra reads are 40.0 % of the cluster's reads. It is kept here but not pooled" in text
    assert "ranked <strong>2 of 3</strong> resolved pairs" in text
