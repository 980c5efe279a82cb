"""The web console through the app (TestClient): sign-in cookie, CSRF, read scope, the upload, the schedule editor,
retry, the verify button's feature detection, the evidence of a nightly job, the analysis page, static files.

The same flow in a real browser against a real server is tests/service/test_console_browser.py."""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest

from control import observations
from control.db import AnalysisRow, DeploymentRow, JobRow, TraceRow
from control.queue import enqueue
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.auth import create_token
from service.console import analysis_view, views
from service.console.render import HTMX, plotly_js, static_files
from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment
from tests.tuner.test_flat import _trial
from tuner.flat import IDLE, idle_reason
from tuner.kinds import tuner_kind

API = "/api/v1"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def sign_in(svc: Svc, header: dict[str, str]) -> str:
    """Sign in with the token of an API header; the session's CSRF token (from a page's form)."""
    token = header["Authorization"].split()[1]
    svc.client.cookies.clear()  # a new browser
    nonce = _CSRF.search(svc.client.get("/login").text)
    assert nonce is not None
    r = svc.client.post("/login", data={"token": token, "csrf_token": nonce.group(1), "next": "/"},
                        follow_redirects=False)
    assert r.status_code == 303, r.text
    found = _CSRF.search(svc.client.get("/").text)
    assert found is not None
    return found.group(1)


def deployment(svc: Svc, name: str = "web") -> dict[str, Any]:
    r = svc.client.post(f"{API}/deployments", headers=svc.write,
                        json=memcached_deployment(name, ["127.0.0.1:1"]))
    assert r.status_code == 201, r.text
    dep: dict[str, Any] = r.json()
    for config in ({"policy": "batching", "params": {}},
                   {"policy": "chisel", "params": {"split_keys": 8, "merge": 2, "elephant_threshold": 50}}):
        v = svc.client.post(f"{API}/configs/{dep['id']}/versions", headers=svc.write,
                            json={"config": config, "publish": False})
        assert v.status_code == 201, v.text
    return dep


def jobs_of(svc: Svc, kind: str) -> list[JobRow]:
    with svc.db.session() as s:
        rows = [r for r in s.query(JobRow).all() if r.kind == kind]
        for r in rows:
            s.expunge(r)
        return rows


# --- sign-in ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/", "/traces", "/analyses", "/jobs", "/deployments/1", "/jobs/1"])
def test_every_page_asks_for_a_token_first(svc: Svc, path: str) -> None:
    r = svc.client.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/login?next={path}"


def test_a_live_fragment_without_a_session_sends_the_browser_to_sign_in(svc: Svc) -> None:
    r = svc.client.get("/jobs/1/live", headers={"HX-Request": "true"}, follow_redirects=False)
    assert r.status_code == 204 and r.headers["HX-Redirect"] == "/login"


def test_sign_in_keeps_the_token_in_an_httponly_samesite_cookie(svc: Svc) -> None:
    token = svc.write["Authorization"].split()[1]
    nonce = _CSRF.search(svc.client.get("/login").text)
    assert nonce is not None
    r = svc.client.post("/login", data={"token": token, "csrf_token": nonce.group(1), "next": "/jobs"},
                        follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/jobs"
    cookies = {c.split("=", 1)[0]: c for c in r.headers.get_list("set-cookie")}
    session = cookies["tailtune_session"].lower()
    for flag in ("httponly", "samesite=lax", "path=/", f"max-age={int(svc.settings.console_session_s)}"):
        assert flag in session, session
    assert "secure" not in session  # plain http: a Secure cookie would never come back
    assert "httponly" in cookies["tailtune_csrf"].lower()
    page = svc.client.get("/")
    assert page.status_code == 200 and token not in page.text
    assert "test-writer" in page.text and "Signed in as test-writer" in page.text


def test_secure_cookies_when_the_setting_says_so(svc: Svc) -> None:
    token = svc.write["Authorization"].split()[1]
    nonce = _CSRF.search(svc.client.get("/login").text)
    assert nonce is not None
    svc.settings.console_secure_cookies = True  # (TLS ends at a proxy in front; this client speaks plain http)
    r = svc.client.post("/login", data={"token": token, "csrf_token": nonce.group(1)}, follow_redirects=False)
    session = next(c for c in r.headers.get_list("set-cookie") if c.startswith("tailtune_session="))
    assert "secure" in session.lower()


def test_unknown_and_report_tokens_do_not_sign_in(svc: Svc) -> None:
    report = create_token(svc.db, "reporter", "report")
    for token, says in (("tt_not-a-token", "not known to this server"), (report, "report token only reports")):
        nonce = _CSRF.search(svc.client.get("/login").text)
        assert nonce is not None
        r = svc.client.post("/login", data={"token": token, "csrf_token": nonce.group(1)}, follow_redirects=False)
        assert r.status_code == 401 and says in r.text
        assert not any(c.startswith("tailtune_session=") for c in r.headers.get_list("set-cookie"))
        assert svc.client.get("/", follow_redirects=False).status_code == 303


def test_the_sign_in_form_needs_its_csrf_value(svc: Svc) -> None:
    token = svc.write["Authorization"].split()[1]
    svc.client.get("/login")
    for sent in ({"token": token}, {"token": token, "csrf_token": "forged"}):
        r = svc.client.post("/login", data=sent, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text
    assert svc.client.get("/", follow_redirects=False).status_code == 303


def test_sign_out_needs_csrf_and_ends_the_session(svc: Svc) -> None:
    csrf = sign_in(svc, svc.write)
    assert svc.client.post("/logout", follow_redirects=False).status_code == 403
    assert svc.client.get("/").status_code == 200
    r = svc.client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login"
    cleared = [c for c in r.headers.get_list("set-cookie") if c.startswith(("tailtune_session=", "tailtune_csrf="))]
    assert len(cleared) == 2 and all("max-age=0" in c.lower() for c in cleared)
    assert svc.client.get("/", follow_redirects=False).status_code == 303


# --- CSRF and scopes -------------------------------------------------------------------------------------------
def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    path = f"/deployments/{dep['id']}/publish"
    for data, headers in (({"version": "1"}, {}), ({"version": "1", "csrf_token": "0" * 64}, {}),
                          ({"version": "1", "csrf_token": csrf}, {"Origin": "https://evil.example"})):
        r = svc.client.post(path, data=data, headers=headers, follow_redirects=False)
        assert r.status_code == 403, r.text
        assert "CSRF token is missing or wrong" in r.text or "another site" in r.text
    assert jobs_of(svc, "publish") == []
    r = svc.client.post(path, data={"version": "1", "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/deployments/{dep['id']}"
    assert [j.payload for j in jobs_of(svc, "publish")] == [{"version": 1}]
    assert "Publishing config version 1" in svc.client.get(r.headers["location"]).text


def test_a_read_token_sees_no_write_control_and_cannot_write(svc: Svc) -> None:
    dep = deployment(svc)
    nightly = enqueue_nightly(svc, dep["id"])
    csrf = sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep['id']}").text
    assert "read only" in page
    for action in ("/publish", "/rollback", "/run", "/discover", "/schedules"):
        assert f'{action}"' not in page, action
    assert 'id="upload-form"' not in svc.client.get("/traces").text
    assert 'id="cancel-job"' not in svc.client.get(f"/jobs/{nightly}").text
    r = svc.client.post(f"/deployments/{dep['id']}/publish", data={"version": "1", "csrf_token": csrf},
                        follow_redirects=False)
    assert r.status_code == 403 and "read scope" in r.text
    r = svc.client.post(f"/jobs/{nightly}/cancel", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 403
    assert jobs_of(svc, "publish") == [] and jobs_of(svc, "nightly")[0].status == "queued"


def enqueue_nightly(svc: Svc, dep_id: int) -> int:
    r = svc.client.post(f"{API}/jobs", headers=svc.write, json={"deployment_id": dep_id})
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


def test_a_service_error_of_a_form_comes_back_as_a_message_on_its_page(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    here = f"http://testserver/deployments/{dep['id']}"
    r = svc.client.post(f"/deployments/{dep['id']}/publish", data={"version": "9", "csrf_token": csrf},
                        headers={"Referer": here}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/deployments/{dep['id']}"
    page = svc.client.get(r.headers["location"]).text
    assert 'class="flash error"' in page and "has no config version 9" in page


# --- actions ---------------------------------------------------------------------------------------------------
def test_rollback_adds_a_version_and_publishes_it(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    r = svc.client.post(f"/deployments/{dep['id']}/rollback",
                        data={"version": "1", "publish": "on", "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    versions = svc.client.get(f"{API}/configs/{dep['id']}/versions", headers=svc.read).json()
    assert versions[0]["version"] == 3 and versions[0]["source"] == "rollback"
    assert versions[0]["config"]["policy"] == "batching"
    assert [j.payload for j in jobs_of(svc, "publish")] == [{"version": 3}]


def test_run_now_queues_a_nightly_job_with_the_forms_options(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    r = svc.client.post(f"/deployments/{dep['id']}/run",
                        data={"trials": "4", "seeds": "1", "traces": "1", "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/jobs/")
    (job,) = jobs_of(svc, "nightly")
    assert job.payload["tune"]["trials"] == 4 and job.payload["tune"]["seeds"] == 1
    assert job.payload["publish"] is False  # an unchecked box
    r = svc.client.post(f"/deployments/{dep['id']}/run", data={"trials": str(10**6), "csrf_token": csrf},
                        headers={"Referer": f"http://testserver/deployments/{dep['id']}"}, follow_redirects=False)
    assert r.status_code == 303
    assert "tune_max_trials" in svc.client.get(r.headers["location"]).text
    assert len(jobs_of(svc, "nightly")) == 1


def test_cancel_and_retry(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    job_id = enqueue_nightly(svc, dep["id"])
    r = svc.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf},
                        headers={"Referer": f"http://testserver/jobs/{job_id}"}, follow_redirects=False)
    assert "only a failed or cancelled job is retried" in svc.client.get(r.headers["location"]).text
    r = svc.client.post(f"/jobs/{job_id}/cancel", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert "retry-job" in svc.client.get(f"/jobs/{job_id}").text
    r = svc.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    old, new = sorted(jobs_of(svc, "nightly"), key=lambda j: j.id)
    assert r.headers["location"] == f"/jobs/{new.id}"
    assert (old.status, new.status) == ("cancelled", "queued")
    assert (new.payload, new.deployment_id) == (old.payload, old.deployment_id)


def test_an_ingest_is_not_retried_its_upload_is_gone(svc: Svc) -> None:
    csrf = sign_in(svc, svc.write)
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "ingest", {"trace_id": 1})
        job.status = "failed"
        job_id = job.id
    page = svc.client.get(f"/jobs/{job_id}").text
    assert "retry-job" not in page and "upload the trace again" in page
    r = svc.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf},
                        headers={"Referer": f"http://testserver/jobs/{job_id}"}, follow_redirects=False)
    assert "is not retried" in svc.client.get(r.headers["location"]).text
    assert len(jobs_of(svc, "ingest")) == 1


def test_a_retried_analysis_points_at_its_new_job(svc: Svc) -> None:
    with svc.db.session() as s:
        row = AnalysisRow(trace_id=None, dataset_id="ds1", options={"servers": 4, "replication": 1},
                          status="failed", out_dir="", error="boom", created_at=time.time())
        s.add(row)
        s.flush()
        job = enqueue(s, svc.settings, "analyze", {"analysis_id": row.id})
        job.status, row.job_id = "failed", job.id
        analysis_id, job_id = row.id, job.id
    csrf = sign_in(svc, svc.write)
    r = svc.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    with svc.db.session() as s:
        again = s.get(AnalysisRow, analysis_id)
        assert again is not None and (again.status, again.error) == ("queued", None) and again.job_id != job_id


def test_verify_a_published_version_again(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    assert 'id="verify-1"' not in svc.client.get(f"/deployments/{dep['id']}").text  # never published: nothing to judge
    with svc.db.session() as s:
        from control.configs import get_version

        get_version(s, dep["id"], 1).published = {"memcached": {"at": time.time(), "current_version": 1}}
    page = svc.client.get(f"/deployments/{dep['id']}").text
    assert 'id="verify-1"' in page and 'id="verify-2"' not in page
    r = svc.client.post(f"/deployments/{dep['id']}/verify", data={"version": "1", "csrf_token": csrf},
                        follow_redirects=False)
    (job,) = jobs_of(svc, "verify")
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{job.id}"
    assert job.payload == {"version": 1, "force": True} and job.deployment_id == dep["id"]


# --- the schedule editor -----------------------------------------------------------------------------------------
def test_schedule_editor_shows_the_next_runs_in_the_deployments_time_zone(svc: Svc) -> None:
    dep = deployment(svc)  # Europe/Berlin
    csrf = sign_in(svc, svc.write)
    preview = svc.client.get(f"/deployments/{dep['id']}/next-runs", params={"cron": "30 2 * * *"}).text
    times = re.findall(r"\d{4}-\d\d-\d\d (\d\d:\d\d):00 (CES?T)", preview)
    assert len(times) == 5 and all(t == ("02:30", times[0][1]) or t[0] == "02:30" for t in times), preview
    other = svc.client.get(f"/deployments/{dep['id']}/next-runs",
                           params={"cron": "0 9 * * *", "timezone": "Asia/Tokyo"}).text
    assert re.findall(r" (\d\d:\d\d):00 CES?T", other)[0] in ("01:00", "02:00"), other  # 09:00 Tokyo in Berlin
    bad = svc.client.get(f"/deployments/{dep['id']}/next-runs", params={"cron": "every night"}).text
    assert "not a 5-field cron expression" in bad
    r = svc.client.post(f"/deployments/{dep['id']}/schedules",
                        data={"cron": "15 3 * * 1", "traces": "2", "enabled": "on", "csrf_token": csrf},
                        follow_redirects=False)
    assert r.status_code == 303
    page = svc.client.get(f"/deployments/{dep['id']}").text
    assert 'value="15 3 * * 1"' in page and page.count("03:15:00 CE") >= 5
    sched = svc.client.get(f"{API}/schedules?deployment_id={dep['id']}", headers=svc.read).json()[0]
    assert (sched["cron"], sched["timezone"], sched["traces"], sched["enabled"]) == (
        "15 3 * * 1", "Europe/Berlin", 2, True)
    r = svc.client.post(f"/schedules/{sched['id']}", data={"cron": "15 3 * * 1", "traces": "2", "csrf_token": csrf},
                        follow_redirects=False)  # the box unchecked: disabled
    assert r.status_code == 303
    assert "Disabled: no run is due" in svc.client.get(f"/deployments/{dep['id']}").text
    r = svc.client.post(f"/schedules/{sched['id']}/delete", data={"csrf_token": csrf}, follow_redirects=False)
    assert svc.client.get(f"{API}/schedules?deployment_id={dep['id']}", headers=svc.read).json() == []


# --- traces ----------------------------------------------------------------------------------------------------
def test_the_console_upload_streams_past_the_json_body_limit(svc: Svc, tmp_path: Path) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    svc.settings.api_max_body_bytes = 1000
    body = "request_id,ts,key,value_size,op\n" + "".join(f"{i},{i}.0,k{i},10,get\n" for i in range(300))
    assert len(body) > 5000
    r = svc.client.post("/traces/upload", files={"file": ("t.csv", body.encode())},
                        data={"deployment_id": str(dep["id"])},
                        headers={"X-CSRF-Token": csrf, "X-Requested-With": "console"})
    assert r.status_code == 202, r.text
    got = r.json()
    assert (got["name"], got["size_bytes"], got["deployment_id"]) == ("t.csv", len(body), dep["id"])
    assert "ingest job" in got["message"]
    # other bodies keep the limit
    assert svc.client.post("/logout", data={"csrf_token": csrf, "pad": "x" * 2000}).status_code == 413


def test_an_upload_without_csrf_or_with_a_read_token_is_refused_and_leaves_nothing(svc: Svc) -> None:
    body = b"request_id,ts,key,value_size,op\n1,1.0,k,1,get\n"
    sign_in(svc, svc.write)
    r = svc.client.post("/traces/upload", files={"file": ("t.csv", body)}, headers={"X-Requested-With": "console"})
    assert r.status_code == 403 and r.json()["field"] == "csrf_token"
    r = svc.client.post("/traces/upload", files={"file": ("t.csv", body)}, data={"csrf_token": "f" * 64},
                        follow_redirects=False)
    assert r.status_code == 403
    read_csrf = sign_in(svc, svc.read)
    r = svc.client.post("/traces/upload", files={"file": ("t.csv", body)},
                        headers={"X-CSRF-Token": read_csrf, "X-Requested-With": "console"})
    assert r.status_code == 403 and "read scope" in r.json()["detail"]
    with svc.db.session() as s:
        assert s.query(TraceRow).count() == 0
    leftovers = [p for d in ("uploads", "tmp") for p in (svc.home / d).glob("*") if p.is_file()]
    assert leftovers == []


def test_the_plain_form_upload_works_without_script(svc: Svc) -> None:
    csrf = sign_in(svc, svc.write)
    body = b"request_id,ts,key,value_size,op\n1,1,k,1,get\n"
    r = svc.client.post("/traces/upload", files={"file": ("plain.csv", body)},
                        data={"csrf_token": csrf, "name": "from the form"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/traces"
    page = svc.client.get("/traces").text
    assert "Uploaded from the form" in page and "hx-trigger=\"every 2s\"" in page  # its ingest is awaited live


def test_a_failed_ingest_lists_its_line_problems(svc: Svc) -> None:
    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    bad = b"request_id,ts,key,value_size,op\n1,0.5,k1,10,get\n2,notanumber,k2,x,get\n,1.5,k3,5,get\n"
    r = svc.client.post("/traces/upload", files={"file": ("bad.csv", bad)}, data={"deployment_id": str(dep["id"])},
                        headers={"X-CSRF-Token": csrf, "X-Requested-With": "console"})
    assert r.status_code == 202
    Worker(svc.settings, svc.db, "t", handlers=default_handlers(), schedule=False).run_once()
    listing = svc.client.get("/traces/list").text
    assert "hx-trigger" not in listing  # nothing left to wait for: the list stops polling
    problems = re.sub(r"<[^>]+>", "", listing.split('-problems">', 1)[1].split("</div>", 1)[0])
    lines = [" ".join(line.split()) for line in problems.splitlines() if "bad.csv" in line]
    assert lines == [
        "bad.csv:3 field ts: expected a number, got &#34;notanumber&#34;",
        "bad.csv:3 field value_size: expected non-negative integer, got &#34;x&#34;",
        "bad.csv:4 field request_id: missing value",
    ]


# --- evidence, model, timeline ---------------------------------------------------------------------------------
def _rec(cdfs: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "policy": "chisel", "params": {"merge": 2}, "verdict": "recommend",
        "reason": "p99 -20.0 % [-30.0 %, -10.0 %] on 5 held-out seeds", "objective": "p99",
        "expected": {"p50_ms": 0.2, "p95_ms": 0.8, "p99_ms": 1.2, "p999_ms": 2.0, "mean_ms": 0.3},
        "baseline": {"policy": "batching", "params": {}, "p50_ms": 0.2, "p95_ms": 0.9, "p99_ms": 1.5,
                     "p999_ms": 3.0},
        "confirmation": {"metric": "p99", "improvement_pct": 20.0, "interval_pct": [10.0, 30.0], "p_value": 0.001},
        "study": "tailtune-web-job1", "source": "dataset:ds1",
        "tuned_for": {"model_sources": {"servers": "declared", "worker_threads": "discovered"}},
    }
    if cdfs:
        rec["cdfs"] = {"seed": 0, "warmup": 0.1, "curves": [
            {"name": "current", "label": "current config: batching", "policy": "batching",
             "latency_ms": [0.1, 1.0, 1.5], "cdf": [0.5, 0.98, 1.0]},
            {"name": "recommended", "label": "recommended: chisel(merge=2)", "policy": "chisel",
             "latency_ms": [0.1, 0.9, 1.2], "cdf": [0.5, 0.98, 1.0]},
        ]}
    return rec


def _nightly_done(svc: Svc, dep_id: int, rec: dict[str, Any], accepted: bool) -> int:
    decision = {"accepted": accepted, "reason": "tuner recommends it" if accepted else "p99 improves by 1 %",
                "version": 2 if accepted else None}
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "nightly", {}, deployment_id=dep_id)
        job.status = "succeeded"
        drift: dict[str, Any] = {"changed": True, "forced": False, "against_job": None, "reason": "a quantity moved",
                 "moved": ["request_rate"], "inputs_changed": [], "quantities": {}}
        job.steps = [{"name": "drift", "status": "done", "output": drift},
                     {"name": "tune", "status": "done", "output": rec},
                     {"name": "decide", "status": "done", "output": decision}]
        job.result = {"decision": decision, "drift": drift}
        return int(job.id)


def _nightly_kept(svc: Svc, dep_id: int, against: int) -> int:
    """A nightly whose workload did not move: its study skipped (docs/drift.md)."""
    reason = "workload unchanged: kept v2"
    drift = {"changed": False, "forced": False, "against_job": against, "against_version": 2, "moved": [],
             "inputs_changed": [], "reason": "nothing moved",
             "quantities": {"request_rate": {"statistic": "relative change", "value": 0.02, "threshold": 0.1,
                                             "moved": False}}}
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "nightly", {}, deployment_id=dep_id)
        job.status = "succeeded"
        job.steps = [{"name": "drift", "status": "done", "output": drift},
                     {"name": "tune", "status": "skipped", "output": {"reason": reason}},
                     {"name": "decide", "status": "skipped", "output": {"reason": reason}}]
        job.result = {"drift": drift, "decision": {"accepted": False, "reason": reason, "version": None}}
        return int(job.id)


@pytest.mark.parametrize("cdfs", [True, False])
def test_the_deployment_page_shows_the_evidence_of_the_newest_recommendation(svc: Svc, cdfs: bool) -> None:
    dep = deployment(svc)
    job_id = _nightly_done(svc, dep["id"], _rec(cdfs), accepted=True)
    sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep['id']}").text
    assert f"nightly job {job_id}</a>" in page
    assert "The tuner says “recommend” for chisel (merge=2)" in page
    assert "accepted it as config version 2" in page
    assert "interval [-30.0 %, -10.0 %]" in page and "-20.0 %" in page
    spec = json.loads(page.split('id="cdf-spec">', 1)[1].split("</script>", 1)[0])
    if cdfs:
        assert [t["name"] for t in spec["data"] if t["visible"]] == ["current config", "recommended"]
        # it opens on the tail: 1 − CDF, without the slowest request (no share is slower: no point on a log axis)
        assert spec["data"][1]["x"] == [0.1, 0.9] and spec["data"][1]["y"] == pytest.approx([0.5, 0.02])
        assert spec["data"][3]["y"] == [0.5, 0.98, 1.0]  # the whole CDF, a button away
    else:
        assert spec["layout"]["title"]["text"].startswith("Percentiles")
        assert spec["data"][0]["x"] == [0.2, 0.9, 1.5, 3.0]
    assert "moved: request_rate" in page  # the job's drift step
    overview = svc.client.get("/").text
    assert f"job {job_id}</a>" in overview and "verdict: <strong>recommend</strong>" in overview


def test_kept_decisions_and_the_change_from_the_night_before(svc: Svc) -> None:
    dep = deployment(svc)
    first = _rec(False)
    second = {**_rec(False), "verdict": "keep current", "baseline": {**first["baseline"], "p99_ms": 1.8}}
    _nightly_done(svc, dep["id"], first, accepted=True)
    studied = _nightly_done(svc, dep["id"], second, accepted=False)
    kept = _nightly_kept(svc, dep["id"], against=studied)
    sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep['id']}").text
    table = page.split('id="nights"', 1)[1].split("</table>", 1)[0]
    assert "kept: p99 improves by 1 %" in table and "accepted: version 2" in table
    assert "(+20.0 %)" in table  # 1.5 ms → 1.8 ms under the same config
    assert f"unchanged since job {studied}" in table and "kept: workload unchanged: kept v2" in table
    assert f"nightly job {studied}</a>" in page  # the evidence: the newest job that ran a study
    job_page = svc.client.get(f"/jobs/{kept}").text
    assert 'id="drift-table"' in job_page and "request_rate" in job_page and "kept the current config" in job_page
    assert job_page.count("s-skipped") >= 2 and "4 of 4 steps done" not in job_page


def test_the_model_table_has_every_input_with_its_source(svc: Svc) -> None:
    dep = deployment(svc)
    _nightly_done(svc, dep["id"], _rec(False), accepted=False)
    sign_in(svc, svc.read)
    table = svc.client.get(f"/deployments/{dep['id']}").text.split('id="model-table"', 1)[1].split("</table>")[0]
    rows = re.findall(r'<th scope="row">(\w+)</th>.*?s-(\w+)">', table, flags=re.S)
    assert rows == [("servers", "declared"), ("worker_threads", "default"), ("client_overhead", "default"),
                    ("arrivals", "trace")]
    assert "s-discovered" in table  # what the last tune used, beside what the next one would


def test_an_idle_study_says_why_once_and_no_minus_zero(svc: Svc) -> None:
    dep = calibrated_cassandra(svc)
    idle = idle_reason([_trial(1.82), _trial(1.8204)], tuner_kind("cassandra").idle_remedy)
    assert idle is not None
    reason = f"{idle} (the verdict's own reason: the current config is already the best found)"
    rec = {**_rec(False), "verdict": "keep current", "policy": "fifo", "params": {}, "reason": reason,
           "confirmation": {"metric": "p99", "improvement_pct": -0.01, "interval_pct": None, "p_value": None}}
    job_id = _nightly_done(svc, dep["id"], rec, accepted=False)
    with svc.db.session() as s:  # the decision as `tuner.recommendation.accept` words a "keep current"
        job = s.get(JobRow, job_id)
        assert job is not None
        decision = {"accepted": False, "reason": f"tuner verdict is 'keep current': {reason}", "version": None}
        job.steps = [*job.steps[:-1], {"name": "decide", "status": "done", "output": decision}]
        job.result = {**(job.result or {}), "decision": decision}
    sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep['id']}").text
    sentence = html.unescape(page.split('id="verdict-sentence">', 1)[1].split("</p>", 1)[0])
    assert f"{IDLE} (2 trials, all 1.82 ms)" in sentence
    assert "connection.jmx_port" in sentence and "--load" in sentence
    assert sentence.count("servers are idle") == 1  # the decision does not repeat the tuner's reason
    assert "The deployment kept its current config." in sentence
    assert "-0.0 %" not in page and "(no interval)" not in page
    assert "Held-out p99: the same for the current and the chosen config" in page


#: p0..p100 of a client round trip of about 0.9 ms with a tail to 6 ms (as calibration stores it)
_RTT = [0.7 + 0.004 * i for i in range(95)] + [1.5, 2.0, 3.0, 4.0, 4.7, 6.0]


def calibrated_cassandra(svc: Svc) -> dict[str, Any]:
    """A Cassandra deployment whose model holds a calibrated network (its round trip's 101 quantiles) and ring."""
    r = svc.client.post(f"{API}/deployments", headers=svc.write, json=cassandra_deployment("cas", 1))
    assert r.status_code == 201, r.text
    dep: dict[str, Any] = r.json()
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep["id"])
        assert row is not None
        row.model = {**row.model, "inputs": {
            "network": {"value": {"one_way_ms": 0.43, "rtt_quantiles_ms": _RTT}, "source": "calibrated",
                        "at": time.time(), "how": "trivial round trips"}}}
    return dep


def test_the_model_table_shows_values_as_fields_and_a_round_trip_as_p50_p99(svc: Svc) -> None:
    dep = calibrated_cassandra(svc)
    sign_in(svc, svc.read)
    table = svc.client.get(f"/deployments/{dep['id']}").text.split('id="model-table"', 1)[1].split("</table>")[0]
    row = table.split('<th scope="row">network</th>', 1)[1].split("</tr>", 1)[0]
    assert "p50 0.9 ms, p99 4.7 ms (of 101 quantiles p0…p100)" in row
    assert '<span class="muted">one_way_ms</span> 0.43' in row
    assert "[" not in row and "{" not in row and "…</code>" not in table  # no raw, cut JSON
    assert "0.704" not in row  # not the quantiles one by one


def _hist(latencies_ms: list[float]) -> dict[str, Any]:
    import math

    counts: dict[int, int] = {}
    for ms in latencies_ms:
        b = math.floor(20 * math.log10(ms * 1000.0)) + 1
        counts[b] = counts.get(b, 0) + 1
    return {"scheme": "log10", "buckets_per_decade": 20, "count": len(latencies_ms),
            "sum_us": 1000.0 * sum(latencies_ms), "min_observed_us": 1000.0 * min(latencies_ms),
            "max_observed_us": 1000.0 * max(latencies_ms), "counts": sorted(counts.items())}


def test_timeline_merges_the_clients_of_each_window(svc: Svc) -> None:
    dep = deployment(svc)
    with svc.db.session() as s:
        for client, start, lat in (("a", 100.0, [1.0] * 99 + [5.0]), ("b", 100.0, [1.0] * 100),
                                   ("a", 700.0, [2.0] * 100)):
            observations.record(s, dep["id"], {
                "schema": observations.SCHEMA, "client": {"id": client}, "window": {"start": start, "end": start + 60},
                "observations": [{"config_version": 1, "all": _hist(lat)}]})
        points = observations.timeline(s, dep["id"]).points
    assert [(p["window_start"], p["clients"], p["requests"]) for p in points] == [(100.0, 2, 200), (700.0, 1, 100)]
    assert points[0]["observed_p99_ms"] == pytest.approx(1.0, rel=0.07)
    assert points[1]["observed_p99_ms"] == pytest.approx(2.0, rel=0.07)
    assert points[0]["expected_p99_ms"] is None  # version 1 was added by hand: nothing expected
    sign_in(svc, svc.read)
    assert 'id="spark-1"' in svc.client.get("/").text and 'id="timeline"' in svc.client.get("/deployments/1").text


# --- analyses --------------------------------------------------------------------------------------------------
def _analysis_dir(out: Path) -> dict[str, Any]:
    """An analysis folder as the characterization writes it: summary.json and tables/*.parquet (a small
    hand-made characterization, no Spark: tests/analysis/test_summary.py)."""
    from analysis.summary import build_summary
    from tests.analysis.test_summary import _collected

    collected = _collected()
    doc = build_summary(collected)
    (out / "tables").mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps(doc))
    for name, frame in collected.tables().items():
        frame.to_parquet(out / "tables" / f"{name}.parquet")
    return doc


def test_the_analysis_page_is_made_of_the_reports_components(tmp_path: Path) -> None:
    from analysis.report import components

    doc = _analysis_dir(tmp_path)
    assert analysis_view.findings(doc) == components.findings(doc)
    expected = components.figures(doc, components.load_tables(tmp_path))
    got = analysis_view.figures(doc, tmp_path)
    assert [f["id"] for f in got] == [f.id for f in expected] and len(got) > len(components.figures(doc))
    assert all(f["spec"]["data"] and f["spec"]["config"]["responsive"] is False for f in got)
    assert analysis_view.tables(doc) == [t.as_dict() for t in components.tables(doc)]


def test_an_analysis_page_shows_findings_first_then_figures_and_numbers(svc: Svc) -> None:
    out = svc.home / "analyses" / "1"
    doc = _analysis_dir(out)
    (out / "report.html").write_text("<html><body>report</body></html>")
    with svc.db.session() as s:
        s.add(AnalysisRow(trace_id=None, dataset_id="ds1", options={"servers": 4, "replication": 1},
                          status="succeeded", out_dir=str(out), error=None, created_at=time.time()))
    sign_in(svc, svc.read)
    page = svc.client.get("/analyses/1").text
    first_figure = analysis_view.figures(doc, out)[0]["id"]
    assert page.index('id="findings"') < page.index(f'id="fig-{first_figure}"') < page.index('id="t-h"')
    assert doc["findings"][0].replace("'", "&#39;") in page
    assert 'id="table-dataset"' in page
    report = svc.client.get("/analyses/1/report.html")
    csp = report.headers["content-security-policy"]
    assert report.status_code == 200 and "sandbox allow-scripts" in csp and "allow-same-origin" not in csp
    assert "connect-src" not in csp and "default-src 'none'" in csp  # its scripts reach nothing


def test_a_nightly_analysis_outside_the_analyses_folder_is_not_served(svc: Svc) -> None:
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "nightly", {}, deployment_id=None)
        job.steps = [{"name": "analyze", "status": "done",
                      "output": {"dataset_id": "ds1", "out_dir": "../../etc", "summary": "../../etc/summary.json"}}]
        job_id = job.id
    sign_in(svc, svc.read)
    r = svc.client.get(f"/jobs/{job_id}/analysis")
    assert r.status_code == 404 and "not where analyses are kept" in r.text


# --- odds and ends ---------------------------------------------------------------------------------------------
def test_pipeline_steps_are_the_handlers(svc: Svc) -> None:
    from jobs.nightly import STEPS

    assert views.PIPELINE_STEPS["nightly"] == STEPS


def test_static_files_htmx_as_pinned_and_plotly_from_its_package(svc: Svc) -> None:
    r = svc.client.get("/static/htmx.min.js")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == HTMX["sha256"]
    assert "immutable" in r.headers["cache-control"] and r.headers["content-type"].startswith("text/javascript")
    assert svc.client.get("/static/plotly.min.js").content == plotly_js().read_bytes()
    assert svc.client.get("/static/..%2Fsession.py").status_code == 404
    assert set(static_files()) == {"console.css", "console.js", "htmx.min.js", "plotly.min.js"}
    license_text = (static_files()["htmx.min.js"].parent / "htmx.LICENSE").read_text()
    assert "Zero-Clause BSD" in license_text


def test_pages_carry_a_strict_content_security_policy(svc: Svc) -> None:
    r = svc.client.get("/login")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp and "unsafe-eval" not in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
    assert "<script>" not in r.text  # no inline script anywhere: the policy allows none


@pytest.mark.parametrize("status", ["verified", "rolled_back"])
def test_a_verify_jobs_page_says_its_outcome_in_words(svc: Svc, status: str) -> None:
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "verify", {"version": 4, "force": True})
        job.status = "succeeded"
        job.result = {"version": 4, "status": status, "reference_version": 3, "reason": "p99 1.2 ms vs 1.2 ms"}
        job_id = job.id
    sign_in(svc, svc.read)
    outcome = svc.client.get(f"/jobs/{job_id}").text.split('id="verify-outcome">', 1)[1].split("</p>", 1)[0]
    assert "Version 4:" in outcome and status.replace("_", " ") in outcome and "p99 1.2 ms vs 1.2 ms" in outcome
    assert ("rolled back to version 3" in outcome) == (status == "rolled_back")


# --- the loop as it is: a rollback, what runs now, the confirmations -------------------------------------------
def _published(svc: Svc, dep_id: int, version: int) -> None:
    """What the publisher records on a version it published (the deployment's kind's entry)."""
    from control.configs import get_version

    with svc.db.session() as s:
        dep = s.get(DeploymentRow, dep_id)
        assert dep is not None
        row = get_version(s, dep_id, version)
        row.published = {**(row.published or {}), dep.kind: {"at": time.time(), "current_version": version}}


def _windows(svc: Svc, dep_id: int, version: int, start: float, ms: float, n: int = 6) -> None:
    """`n` report windows of 600 requests under `version`, latencies spread around `ms`."""
    spread = [ms * (0.5 + 0.01 * ((j * 37) % 100)) for j in range(600)]
    with svc.db.session() as s:
        for k in range(n):
            at = start + 600.0 * k
            observations.record(s, dep_id, {
                "schema": observations.SCHEMA, "client": {"id": "web-1"}, "window": {"start": at, "end": at + 600},
                "observations": [{"config_version": version, "all": _hist(spread)}]})


def _text(markup: str) -> str:
    """What a page says: its tags left out, its entities read, its white space one space."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", markup)))


def _rolled_back(svc: Svc) -> tuple[dict[str, Any], dict[str, Any]]:
    """Version 1 published and reported fast, version 2 published and reported 5× slower, a verify job of version
    2 run by a real worker (no live system: the clients' reports decide): it rolls back to version 1 as version 3.
    Returns the deployment and the verify's outcome."""
    from control.verify import verify_version

    dep = deployment(svc)
    start = time.time() - 8 * 3600.0
    _published(svc, dep["id"], 1)
    _windows(svc, dep["id"], 1, start, 1.0)
    _published(svc, dep["id"], 2)
    _windows(svc, dep["id"], 2, start + 6 * 600.0, 5.0)
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "verify", {"version": 2}, deployment_id=dep["id"])
        job.status = "succeeded"
        job_id = int(job.id)
        out = verify_version(s, svc.settings, dep["id"], 2, job_id=job_id)
    assert out["status"] == "rolled_back" and out["rollback_version"] == 3, out
    return dep, out


def test_the_overview_says_which_verify_rolled_back_and_what_runs_now(svc: Svc) -> None:
    dep, out = _rolled_back(svc)
    sign_in(svc, svc.read)
    # the rollback's publish has not run yet: version 2 still runs, version 3 waits
    page = svc.client.get("/").text
    facts = _text(page.split(f'id="loop-{dep["id"]}"', 1)[1].split("</dl>", 1)[0])
    assert "version 2, by" in facts and f"verify job {out['job_id']}" in facts
    assert "Version 3 brought back the config of version 1; version 2 runs now" in facts
    assert "version 3 is newer and not published" in facts
    # published: version 3 runs, its own check is still to come, and says so with its version
    _published(svc, dep["id"], 3)
    for path in ("/", f"/deployments/{dep['id']}"):
        page = svc.client.get(path).text
        text = _text(page.split(f'id="loop-{dep["id"]}"', 1)[1].split("</dl>", 1)[0])
        assert "version 3: batching" in text, text
        assert "the config of version 1, back after version 2" in text
        assert "Version 3 brought back the config of version 1 and runs now" in text
        assert "version 3 not checked yet" in text and "next check" in text, text
        assert "Verify: not checked yet" not in text and "runs now." in text


def test_a_kept_decision_of_an_older_version_says_what_runs_now(svc: Svc) -> None:
    dep = deployment(svc)
    _nightly_kept(svc, dep["id"], against=0)  # "workload unchanged: kept v2" (its basis: version 2)
    _published(svc, dep["id"], 2)
    sign_in(svc, svc.read)
    text = _text(svc.client.get("/").text)
    assert "kept v2" in text and "(what ran then" not in text  # version 2 runs: nothing to add
    v = svc.client.post(f"{API}/configs/{dep['id']}/versions", headers=svc.write,
                        json={"config": {"policy": "batching", "params": {}}, "publish": False})
    assert v.status_code == 201
    _published(svc, dep["id"], 3)
    text = _text(svc.client.get("/").text)
    assert "kept: workload unchanged: kept v2 (what ran then; version 3 runs now)" in text, text


def test_publish_and_rollback_ask_first_and_say_what_changes_where(svc: Svc) -> None:
    dep, out = _rolled_back(svc)
    _published(svc, dep["id"], 3)
    sign_in(svc, svc.write)
    page = svc.client.get(f"/deployments/{dep['id']}").text

    def block(ident: str) -> str:
        return _text(page.split(f'id="{ident}"', 1)[1].split("</details>", 1)[0])

    # the real buttons sit inside a disclosure that states the servers and the change first
    publish2 = block("confirm-publish-2")
    assert "Publish version 2 (rolled back)…" in publish2
    assert f"A verify rolled version 2 back (job {out['job_id']})" in publish2 and "found worse" in publish2
    assert "On 1 server of web: 127.0.0.1:1." in publish2
    assert "Changes from version 3, which runs now:" in publish2 and "policy: batching → chisel" in publish2
    assert "Yes, publish version 2" in publish2
    rollback1 = block("confirm-rollback-1")
    assert "Adds version 4 with the config of version 1 and publishes it." in rollback1
    assert "nothing changes" in rollback1  # version 3 is version 1's config
    assert "127.0.0.1:1" in rollback1 and "Yes, roll back to version 1" in rollback1
    assert "the servers get the same config again" in block("confirm-publish-3")
    assert "(rolled back)" not in block("confirm-publish-1")


def test_run_now_offers_capture_and_force_and_the_apis_default_trials(svc: Svc) -> None:
    from control.jobspec import DEFAULT_TRIALS, TuneOptions

    dep = deployment(svc)
    csrf = sign_in(svc, svc.write)
    page = svc.client.get(f"/deployments/{dep['id']}").text
    assert f'id="run-trials" name="trials" type="number" min="1" value="{TuneOptions().trials}"' in page
    assert TuneOptions().trials == DEFAULT_TRIALS
    assert 'id="run-force"' in page and '<option value="watch">' in page and '<option value="clients">' in page
    r = svc.client.post(f"/deployments/{dep['id']}/run", data={
        "trials": "4", "seeds": "1", "capture_source": "watch", "capture_duration_s": "30", "force": "on",
        "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303, r.text
    (job,) = jobs_of(svc, "nightly")
    assert job.payload["capture"] == {"source": "watch", "duration_s": 30.0} and job.payload["force"] is True
    # a capture without its duration, or longer than the limit: a message, no job
    for data, says in (({"capture_source": "watch"}, "capture.duration_s"),
                       ({"capture_source": "watch", "capture_duration_s": "1e9"}, "capture_max_duration_s")):
        r = svc.client.post(f"/deployments/{dep['id']}/run", data={**data, "csrf_token": csrf},
                            headers={"Referer": f"http://testserver/deployments/{dep['id']}"}, follow_redirects=False)
        assert r.status_code == 303
        assert says in html.unescape(svc.client.get(r.headers["location"]).text)
    assert len(jobs_of(svc, "nightly")) == 1


def test_a_schedule_shows_its_capture(svc: Svc) -> None:
    dep = deployment(svc)
    for body in ({"cron": "0 2 * * *"}, {"cron": "0 3 * * *", "capture": {"source": "watch", "duration_s": 45}}):
        r = svc.client.post(f"{API}/schedules", headers=svc.write, json={"deployment_id": dep["id"], **body})
        assert r.status_code == 201, r.text
    sign_in(svc, svc.read)
    text = _text(svc.client.get(f"/deployments/{dep['id']}").text)
    assert "Trace: the newest uploaded trace(s)" in text
    assert "Trace: each run captures 45 s of the servers' traffic (watch) and tunes on it" in text


def test_the_timeline_is_on_a_log_axis_with_the_verify_band() -> None:
    from service.console import charts

    points = [{"window_end": 1e9 + 600 * i, "config_version": 2, "requests": 100, "clients": 1,
               "observed_p99_ms": 150.0, "expected_p99_ms": 0.3, "band_ms": [0.1, 0.7]} for i in range(3)]
    fig = charts.timeline_figure(points)
    y = fig["layout"]["yaxis"]
    assert y["type"] == "log"
    lo, hi = y["range"]
    assert lo < math.log10(0.1) and hi > math.log10(150.0)  # the band's foot and the observed line both in view
    band = [d for d in fig["data"] if d.get("fill") == "tonexty"]
    names = [d["name"] for d in fig["data"] if d.get("name")]
    assert names == ["verify band (expected)", "observed p99", "expected p99"]
    assert band and band[0]["y"] == [0.1] * 3 and fig["data"][0]["y"] == [0.7] * 3
    plain = charts.timeline_figure([{**p, "band_ms": None, "expected_p99_ms": None} for p in points])
    assert [d["name"] for d in plain["data"]] == ["observed p99"]  # nothing expected: no band, no empty line
