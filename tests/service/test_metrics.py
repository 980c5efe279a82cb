"""`/metrics` after a nightly with a publish and a verify on a real memcached, with the real worker and the shipped
client reporting to the real API (uvicorn): parsed with `prometheus_client`'s parser, every metric family of the
collector carries the figures the metadata DB holds (counted across the API's and two workers' writes), its labels
are bounded, and it answers only the read scope (or only on its own port, `metrics_port`)."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from tailtune_client.memcached import Client

from base.errors import TailtuneError
from control import fidelity_store
from control.db import ConfigVersionRow, JobRow
from control.queue import JOB_KINDS
from control.verify import STATUSES
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.auth import create_token
from service.metrics.collector import METRICS
from service.metrics.endpoint import PATH, start_metrics_port
from tests.app_fixtures import Svc, memcached_deployment
from tests.clients.conftest import KEY_ENV, config_key, served  # noqa: F401 (fixtures)
from tests.clients.test_verify_live import WORSE, memcached_node  # noqa: F401 (a fixture: a memcached of its own)
from tests.control.fidelity_reports import report
from tests.jobs.test_nightly import REC, _done  # a nightly's stored recommendation; a step an attempt finished
from tests.servers.cassandra_server import free_port
from tests.servers.memcached_server import MemcachedNode
from tests.servers.prometheus_server import PrometheusServer

pytestmark = pytest.mark.slow

API = "/api/v1"
NAME = "metrics-mc"
#: WORSE (tests/clients/test_verify_live.py) splits every request into single-key gets, over ten times slower than
#: one multiget, so the nightly's version (REC: a multiget, 512 keys are below its split size) is not worse.
KEYS = [f"metrics:{i}" for i in range(512)]
N = 200
#: The labels a series may carry: bounded vocabularies and the deployment's name (no key, trace or token).
LABELS = {"deployment", "kind", "status", "outcome", "step", "quantile", "le"}


@dataclass
class Loop:
    dep_id: int
    nightly_id: int
    token: str  # a read token


def _run(worker: Worker) -> list[str]:
    out = []
    while (status := worker.run_once()) is not None:
        out.append(status)
    return out


def _drive(client: Client) -> None:
    want = {k: k.encode() for k in KEYS}
    for _ in range(N):
        assert client.get_many(KEYS) == want


def nightly_with_publish_and_verify(svc: Svc, served: str, node: MemcachedNode, key: str) -> Loop:  # noqa: F811
    """Version 1 published by a publish job (worker A) and reported by a client; a nightly (worker B, resumed after
    its tune step) decides, publishes version 2 and verifies it (pending: nothing reported yet); the client reports
    version 2 and a verify job (worker A) judges it; one live replay's report is stored as a fidelity record."""
    svc.settings.verify_min_requests = 100
    svc.settings.verify_after_windows = 1  # one report window a version: judged at the first check
    svc.settings.memcached_config_key_env = KEY_ENV
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment(NAME, [node.address]), headers=svc.write)
    assert r.status_code == 201, r.text
    dep_id = int(r.json()["id"])
    a = Worker(svc.settings, svc.db, "w-a", handlers=default_handlers(), schedule=False)
    b = Worker(svc.settings, svc.db, "w-b", handlers=default_handlers(), schedule=False)
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": WORSE}, headers=svc.write)
    assert r.status_code == 201, r.text
    assert _run(a) == ["succeeded"]
    reporter = create_token(svc.db, "metrics-app", "report")
    obs = f"{served}{API}/deployments/{dep_id}/observations"
    with Client([node.address], deployment=NAME, config_key=key, poll_interval=0, token=reporter,
                connections_per_server=1) as c:
        c.set_many({k: k.encode() for k in KEYS})
        assert c.config.version == 1
        _drive(c)
        assert c.report_to(obs) is True
        r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep_id}, headers=svc.write)
        nightly_id = int(r.json()["id"])
        with svc.db.session() as s:
            row = s.get(JobRow, nightly_id)
            assert row is not None
            row.steps = [_done("ingest", {"traces": [1], "datasets": ["ds1"]}),
                         _done("analyze", {"dataset_id": "ds1", "out_dir": "/x", "summary": "/x/summary.json"}),
                         _done("tune", REC)]
            row.status, row.lease_owner, row.lease_expires, row.attempts = "running", "dead", time.time() - 1, 1
        assert _run(b) == ["succeeded"]
        job = svc.client.get(f"{API}/jobs/{nightly_id}", headers=svc.read).json()
        assert job["result"]["publish"]["current_version"] == 2 and job["result"]["verify"]["status"] == "pending"
        assert c.refresh_config() is True and c.config.version == 2
        _drive(c)
        assert c.report_to(obs) is True
    r = svc.client.post(f"{API}/deployments/{dep_id}/verify", headers=svc.write)
    assert r.status_code == 202, r.text
    assert _run(a) == ["succeeded"]
    v2 = svc.client.get(f"{API}/configs/{dep_id}", headers=svc.read).json()
    assert v2["version"] == 2 and v2["verification"]["status"] in ("verified", "unexpected"), v2["verification"]
    doc = report(time.time(), {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0},
                 [("A", "B", "p99", -20.0, (-30.0, -10.0))], deployment=NAME)
    with svc.db.session() as s:
        fidelity_store.record(s, dep_id, doc, job_id=None, source="cli")
    return Loop(dep_id, nightly_id, create_token(svc.db, "metrics-reader", "read"))


def _get(url: str, token: str | None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(text: str) -> dict[str, list[Sample]]:
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def _one(samples: list[Sample], name: str, **labels: str) -> float:
    got = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(got) == 1, (name, labels, got)
    return got[0]


def _db_figures(svc: Svc, loop: Loop) -> tuple[dict[tuple[str, str], int], list[ConfigVersionRow]]:
    with svc.db.session() as s:
        jobs: dict[tuple[str, str], int] = {}
        for job in s.query(JobRow).all():
            jobs[(job.kind, job.status)] = jobs.get((job.kind, job.status), 0) + 1
        versions = s.query(ConfigVersionRow).filter_by(deployment_id=loop.dep_id).order_by(ConfigVersionRow.version)
        rows = list(versions)
        s.expunge_all()
    return jobs, rows


@pytest.mark.db_backends  # on SQLite and on PostgreSQL
def test_metrics_after_a_nightly_with_a_publish_and_a_verify(
    svc: Svc, served: str, memcached_node: MemcachedNode, config_key: str  # noqa: F811
) -> None:
    loop = nightly_with_publish_and_verify(svc, served, memcached_node, config_key)
    status, text = _get(f"{served}{PATH}", loop.token)
    assert status == 200, text
    fams = _samples(text)
    assert set(METRICS) <= set(fams), set(METRICS) - set(fams)
    assert all(fams[name] for name in METRICS), [n for n in METRICS if not fams[n]]
    # labels: bounded vocabularies and the deployment's name only
    assert {k for ss in fams.values() for s in ss for k in s.labels} <= LABELS
    assert {s.labels["kind"] for s in fams["tailtune_jobs"]} == {*JOB_KINDS, "other"}
    assert loop.token not in text and "metrics:" not in text and config_key not in text

    jobs, versions = _db_figures(svc, loop)
    every = fams["tailtune_jobs_finished"]
    # the API's and both workers' writes: 2 publish jobs (worker A), the nightly (worker B), the verify job (A)
    assert _one(every, "tailtune_jobs_finished_total", kind="nightly", outcome="succeeded") == 1
    assert _one(every, "tailtune_jobs_finished_total", kind="publish", outcome="succeeded") == 1
    verified = jobs[("verify", "succeeded")]
    assert _one(every, "tailtune_jobs_finished_total", kind="verify", outcome="succeeded") == verified
    for kind, st in jobs:
        assert _one(fams["tailtune_jobs"], "tailtune_jobs", kind=kind, status=st) == jobs[(kind, st)]
    queued = jobs.get(("verify", "queued"), 0)
    assert _one(fams["tailtune_queue_depth"], "tailtune_queue_depth", kind="verify") == queued
    # the step durations: the nightly's decide, publish, verify (this attempt) and its three checkpointed steps
    steps = fams["tailtune_job_step_duration_seconds"]
    for step in ("ingest", "analyze", "tune", "decide", "publish", "verify"):
        n = _one(steps, "tailtune_job_step_duration_seconds_count", kind="nightly", step=step, outcome="done")
        assert n == 1, step
    assert _one(steps, "tailtune_job_step_duration_seconds_bucket", kind="nightly", step="tune", outcome="done",
                le="0.5") == 0
    assert _one(steps, "tailtune_job_step_duration_seconds_bucket", kind="nightly", step="tune", outcome="done",
                le="1.0") == 1
    assert _one(steps, "tailtune_job_step_duration_seconds_sum", kind="nightly", step="tune", outcome="done") == 1.0
    dep = {"deployment": NAME, "kind": "memcached"}
    assert _one(fams["tailtune_publishes"], "tailtune_publishes_total", **dep, outcome="done") == 2
    assert _one(fams["tailtune_publish_status"], "tailtune_publish_status", **dep, status="ok") == 1
    assert _one(fams["tailtune_config_version_running"], "tailtune_config_version_running", **dep) == 2
    assert _one(fams["tailtune_config_version_latest"], "tailtune_config_version_latest", **dep) == 2
    statuses = [str(r.verification["status"]) for r in versions if r.verification]
    assert {s.labels["status"] for s in fams["tailtune_verifications"]} == set(STATUSES)
    for st in STATUSES:
        assert _one(fams["tailtune_verifications"], "tailtune_verifications", **dep, status=st) == statuses.count(st)
    v2 = versions[1].verification
    assert v2 is not None
    assert _one(fams["tailtune_running_p99_expected_seconds"], "tailtune_running_p99_expected_seconds",
                **dep) == pytest.approx(4.0 / 1000)
    assert _one(fams["tailtune_running_p99_observed_seconds"], "tailtune_running_p99_observed_seconds",
                **dep) == pytest.approx(v2["after"]["p99_ms"] / 1000)
    lo, hi = v2["expected"]["band_ms"]
    assert _one(fams["tailtune_running_p99_band_low_seconds"], "tailtune_running_p99_band_low_seconds",
                **dep) == pytest.approx(lo / 1000)
    assert _one(fams["tailtune_running_p99_band_high_seconds"], "tailtune_running_p99_band_high_seconds",
                **dep) == pytest.approx(hi / 1000)
    # the fidelity record: predicted 9 and 7 ms against observed 10 and 8; the one resolved pair agrees
    with svc.db.session() as s:
        fid = fidelity_store.summary(s, loop.dep_id)
    err = _one(fams["tailtune_model_error_ratio"], "tailtune_model_error_ratio", **dep, quantile="p99")
    assert err == pytest.approx(fid["error"]["p99"]["mean_pct"] / 100) and -0.12 < err < -0.1
    assert _one(fams["tailtune_model_pair_agreement"], "tailtune_model_pair_agreement", **dep) == 1.0
    low = _one(fams["tailtune_model_pair_agreement_low"], "tailtune_model_pair_agreement_low", **dep)
    assert low == pytest.approx(fid["agreement"]["interval"][0])
    assert _one(fams["tailtune_model_pairs_resolved"], "tailtune_model_pairs_resolved", **dep) == 1

    # the scope: no token (not from loopback) → 401; a report token → 403; the read token → 200
    assert svc.client.get(PATH).status_code == 401
    reporter = {"Authorization": f"Bearer {create_token(svc.db, 'metrics-report', 'report')}"}
    assert svc.client.get(PATH, headers=reporter).status_code == 403
    assert svc.client.get(PATH, headers=svc.read).status_code == 200


def test_metrics_on_their_own_port_and_not_on_the_api(svc: Svc, served: str) -> None:  # noqa: F811
    svc.client.post(f"{API}/deployments", json=memcached_deployment("own-port", ["127.0.0.1:11211"]),
                    headers=svc.write)
    svc.settings.metrics_port = free_port()
    started = start_metrics_port(svc.settings)
    assert started is not None
    server, thread = started
    try:
        status, text = _get(f"http://127.0.0.1:{svc.settings.metrics_port}{PATH}", None)  # no token on this port
        assert status == 200
        fams = _samples(text)
        assert _one(fams["tailtune_publish_status"], "tailtune_publish_status", deployment="own-port",
                    kind="memcached", status="none") == 1
        assert not fams["tailtune_config_version_latest"]  # no version yet: no series, not a made-up 0
        assert _one(fams["tailtune_verifications"], "tailtune_verifications", deployment="own-port",
                    kind="memcached", status="verified") == 0
        status, body = _get(f"{served}{PATH}", svc.read["Authorization"].removeprefix("Bearer "))
        assert status == 404 and json.loads(body)["detail"].startswith("metrics are served on port ")
        with pytest.raises(TailtuneError) as taken:  # the port is this server's now
            start_metrics_port(svc.settings)
        assert str(taken.value).startswith(f"TAILTUNE_METRICS_PORT: cannot serve the metrics on 127.0.0.1:"
                                           f"{svc.settings.metrics_port}: ")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    svc.settings.metrics_port = None
    assert start_metrics_port(svc.settings) is None


# --- the dashboard: every panel's query through Debian's Prometheus, scraping as docker-compose.yml's does ------

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docker" / "grafana" / "dashboards" / "tailtune.json"
#: Scrapes before the panels are queried: a rate() or increase() needs two samples in its window.
SCRAPES = 3
#: A limit for those scrapes (at 1 s each), not a timed assertion.
SCRAPED_S = 120.0


def _compose() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def _prometheus_config(metrics_port: int) -> str:
    """docker-compose.yml's Prometheus configuration, its target the API's metrics port on 127.0.0.1 (for the
    compose network's `api` host), scraping every second (each scrape within a second); the job, the path and
    the port stay as the compose file has them."""
    services = _compose()["services"]
    mount = next(v for v in services["prometheus"]["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    (job,) = config["scrape_configs"]
    ((target,),) = [c["targets"] for c in job["static_configs"]]
    assert target == f"api:{services['api']['environment']['TAILTUNE_METRICS_PORT']}"
    assert job.get("metrics_path", "/metrics") == PATH
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    config["global"].update(scrape_interval="1s", scrape_timeout="1s")
    return str(yaml.safe_dump(config))


def _panel_queries() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    out = [(p["title"], t["expr"]) for p in doc["panels"] for t in p["targets"]]
    assert out and all(expr.strip() for _, expr in out)
    return out


def test_every_panel_names_only_served_metrics() -> None:
    suffixes = ("_bucket", "_count", "_sum", "_total")
    for title, expr in _panel_queries():
        for name in re.findall(r"\btailtune_[a-z0-9_]+", expr):
            base = next((name.removesuffix(s) for s in suffixes if name.removesuffix(s) in METRICS), name)
            assert base in METRICS, (title, name)


def test_every_dashboard_panel_answers_in_prometheus_after_a_nightly(
    svc: Svc, served: str, memcached_node: MemcachedNode, config_key: str  # noqa: F811
) -> None:
    nightly_with_publish_and_verify(svc, served, memcached_node, config_key)
    svc.settings.metrics_port = free_port()
    started = start_metrics_port(svc.settings)
    assert started is not None
    server, thread = started
    try:
        with PrometheusServer(_prometheus_config(svc.settings.metrics_port)) as prom:
            deadline = time.monotonic() + SCRAPED_S
            while not (prom.query(f'sum_over_time(up{{job="tailtune"}}[5m]) >= {SCRAPES}')):
                assert time.monotonic() < deadline, f"fewer than {SCRAPES} scrapes: {prom.log()}"
                time.sleep(0.5)
            # the panels at the last successful scrape (one that timed out on a busy machine marks the series
            # stale from then on)
            (up,) = prom.query('up{job="tailtune"}[5m]')
            at = max(float(t) for t, v in up["values"] if float(v) == 1.0)
            empty, nan = [], []
            for title, expr in _panel_queries():
                result = prom.query(expr, at)
                if not result:
                    empty.append((title, expr))
                elif all(math.isnan(float(s["value"][1])) for s in result):
                    nan.append((title, expr))
            assert not empty, f"panels whose query returns nothing: {empty}"
            assert not nan, f"panels whose query returns only NaN: {nan}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
