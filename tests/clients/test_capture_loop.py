"""The loop on the application's own requests: two real memcached servers, an application on tailtune-client, a
nightly under batching that publishes Chisel, and a nightly under Chisel, on the same application traffic.

* Taken from the clients (`capture.source: clients`), the two nights' traces are the application's requests as it
  made them (recorded before the client split or merged them): their multiget-size distributions agree (KS distance
  below the drift threshold), the second nightly finds the workload unchanged and keeps the running version.
* Taken by the servers' watch, the second night's trace is the client's Chisel chunks and merged queries: its
  request sizes moved far past the threshold (the "false drift" of a watch capture under Chisel). The drift step
  does not count that as workload drift and says why; the nightly keeps the running version.

Both nightlies run the real worker: the capture, the ingest, the Spark characterization, the drift step, the
decision and the publish. The first night's study is given (its tune step done with a Chisel recommendation, as
tests/jobs/test_nightly_confirm.py does): the loop, not the tuner, is under test. The application sends the same
sequence of requests each night (one seed), paced at fixed times; no timing is asserted.
"""

from __future__ import annotations

import functools
import itertools
import random
import socket
import threading
import time
from typing import Any

import pytest
from tailtune_client.capture import RequestCapture
from tailtune_client.memcached import Client

from control.db import JobRow
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher
from tests.app_fixtures import Svc
from tests.servers.memcached_server import MemcachedNode
from validation.memcached_capture import stats

pytestmark = [pytest.mark.slow, pytest.mark.spark]

API = "/api/v1"
BATCHING = {"memcached_client": {"mode": "batching"}}
#: splits the large requests (more than 8 keys) into chunks of 3 keys per server and merges up to 4 mice
CHISEL = {"elephant_threshold": 8, "merge": 4, "split_keys": 3}
KEYS = 3000
REQUESTS = 700
GAP_S = 0.008
CAPTURE_S = 12.0


def _recommendation(params: dict[str, int]) -> dict[str, Any]:
    """A finished tune step recommending Chisel `params` against batching (as tuner.recommend writes it)."""
    return {"policy": "chisel", "params": params, "verdict": "recommend", "reason": "p99 -20% (p=0.01)",
            "expected": {"p50_ms": 0.5, "p95_ms": 1.0, "p99_ms": 2.0},
            "baseline": {"policy": "batching", "params": {}, "p50_ms": 0.6, "p95_ms": 1.3, "p99_ms": 2.5},
            "render": {"json": {"memcached_client": {"mode": "chisel", **params}}}, "study": "s",
            "mlflow_run_id": None}


@functools.cache
def _plan() -> tuple[tuple[str, ...], ...]:
    """The application's requests: mice of 1–2 keys, and about one in three a multiget of 20–40 keys, over
    Zipf-like popular keys (the same every night)."""
    rnd = random.Random(41)
    cum = list(itertools.accumulate(1.0 / (i + 1) ** 0.9 for i in range(KEYS)))
    out = []
    for _ in range(REQUESTS):
        n = rnd.randint(20, 40) if rnd.random() < 0.35 else rnd.randint(1, 2)
        keys: dict[str, None] = {}
        while len(keys) < n:
            keys[f"item:{rnd.choices(range(KEYS), cum_weights=cum)[0]}"] = None
        out.append(tuple(keys))
    return tuple(out)


def test_the_client_and_the_service_name_the_format_alike() -> None:
    from tailtune_client.capture import CAPTURE_SCHEMA, FORMAT

    from ingest.formats import reader_class
    from ingest.formats.tailtune_client import SCHEMA
    from jobs.capture import CLIENT_FORMAT

    assert (CAPTURE_SCHEMA, reader_class(FORMAT).name, CLIENT_FORMAT) == (SCHEMA, FORMAT, FORMAT)


def _token(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


class App:
    """The application: tailtune-client on both servers, its config from the service, its requests captured."""

    def __init__(self, svc: Svc, served: str, dep_id: int, servers: list[str]) -> None:
        self.svc, self.served, self.dep_id = svc, served, dep_id
        self.capture = RequestCapture(rate=1.0, deployment_id=dep_id, upload_bytes_per_s=64 * 1024**2,
                                      max_bytes=64 * 1024**2)
        self.client = Client(servers, config=BATCHING, config_url=f"{served}{API}/configs/{dep_id}",
                             token=_token(svc.read), poll_interval=0.1, capture=self.capture)
        self.client.set_many({f"item:{i}": b"v" * (10 + (i * 37) % 900) for i in range(KEYS)})
        self.capture.take()  # the population is not the application's traffic under study

    def run(self) -> None:
        """The same requests every night, at fixed times, then one upload of what was recorded."""
        t0 = time.monotonic()
        for i, keys in enumerate(_plan()):
            pause = t0 + i * GAP_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self.client.get_many(list(keys))
        assert self.capture.upload(f"{self.served}{API}/traces", _token(self.svc.write)), self.capture.stats()

    def close(self) -> None:
        self.client.close()
        self.capture.close()


def _logs(svc: Svc, job_id: int) -> str:
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        return str(row.logs) if row is not None else ""


def _nightly(svc: Svc, dep_id: int, source: str, start_traffic: Any, *, study: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """A nightly capturing from `source` while the application runs once, worked by a real worker to its end;
    `study`: its tune step's result given."""
    body = {"deployment_id": dep_id, "capture": {"source": source, "duration_s": CAPTURE_S},
            "tune": {"trials": 1, "seeds": 1}}
    r = svc.client.post(f"{API}/jobs", json=body, headers=svc.write)
    assert r.status_code == 202, r.text
    job_id = int(r.json()["id"])
    if study is not None:
        with svc.db.session() as s:
            row = s.get(JobRow, job_id)
            assert row is not None
            row.steps = [{"name": "tune", "status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0,
                          "error": None, "output": study}]
    traffic = threading.Thread(target=start_traffic, args=(job_id,))
    traffic.start()
    worker = Worker(svc.settings, svc.db, "w-loop", handlers=default_handlers(), schedule=False)
    try:
        while worker.run_once() is not None:
            pass
    finally:
        traffic.join(60)
    job: dict[str, Any] = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["status"] == "succeeded", (job["error"], job["logs"][-3000:])
    return job


def _deployment(svc: Svc, name: str, pool: list[MemcachedNode]) -> int:
    body = {"name": name, "kind": "memcached", "topology": {"servers": 2, "replication": 1},
            "connection": {"servers": [n.address for n in pool]},
            "current_config": {"policy": "batching", "params": {}}}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _wait_for(cond: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _chisel_published(app: App) -> None:
    _wait_for(lambda: app.client.config.version == 1, "the client to run v1")
    assert (app.client.config.mode, app.client.config.split_keys) == ("chisel", CHISEL["split_keys"])


def test_client_captures_under_batching_and_chisel_agree_and_the_second_nightly_keeps_the_version(
    svc: Svc, served: str, two_memcached: list[MemcachedNode]
) -> None:
    pool = two_memcached
    dep_id = _deployment(svc, "shop-clients", pool)
    app = App(svc, served, dep_id, [n.address for n in pool])
    try:
        def traffic(job_id: int) -> None:  # once the capture step runs
            _wait_for(lambda: "capture: taking the application's requests" in _logs(svc, job_id), "the capture")
            app.run()

        first = _nightly(svc, dep_id, "clients", traffic, study=_recommendation(CHISEL))
        assert first["result"]["decision"]["accepted"] is True and first["result"]["publish"]["current_version"] == 1
        assert first["result"]["basis"]["trace"] == {"source": "clients", "reshaped": None}
        _chisel_published(app)
        second = _nightly(svc, dep_id, "clients", traffic)
    finally:
        app.close()
    ingest = next(s for s in second["steps"] if s["name"] == "ingest")["output"]
    cap = ingest["capture"]
    assert (cap["source"], cap["uploads"], cap["clients"], cap["requests"]) == ("clients", 1, 1, REQUESTS), cap
    assert cap["lost"] == [] and cap["left_out"] == []
    drift = second["result"]["drift"]
    ks = drift["quantities"]["multiget_size"]
    # the application's requests are the same under Chisel: the size distributions agree exactly
    assert ks["value"] is not None and ks["value"] < ks["threshold"] and not ks["moved"], ks
    assert drift["changed"] is False and drift["reshaped"] is None, drift["reason"]
    assert drift["trace"] == {"source": "clients", "reshaped": None}
    assert second["result"]["decision"]["reason"] == "workload unchanged: kept v1"
    versions = svc.client.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()
    assert [v["version"] for v in versions] == [1]
    assert MemcachedPublisher("shop-clients", {"servers": [n.address for n in pool]}, 2.0).read_current() == (
        1, versions[0]["config"])
    # the trace holds the application's multigets of 20–40 keys, unsplit
    trace = svc.client.get(f"{API}/traces/{ingest['traces'][0]}", headers=svc.read).json()
    assert trace["manifest"]["multiget"]["max"] == max(len(k) for k in _plan())


def test_a_watch_capture_under_chisel_is_not_counted_as_workload_drift(
    svc: Svc, served: str, two_memcached: list[MemcachedNode]
) -> None:
    """On the watch the second night's requests are Chisel's chunks and merged mice: the multiget sizes moved
    (KS far past the threshold). Counted as drift, the nightly would re-tune on the client's reshaped traffic."""
    svc.settings.memcached_watch_gap_us = 2000  # one multiget's fetches arrive within µs; requests 8 ms apart
    pool = two_memcached
    dep_id = _deployment(svc, "shop-watch", pool)
    app = App(svc, served, dep_id, [n.address for n in pool])
    try:
        def traffic(job_id: int) -> None:  # once the worker's watch is on at both servers
            for node in pool:
                with socket.create_connection((node.host, node.port)) as s:
                    _wait_for(lambda s=s: int(stats(s)["log_watchers"]) >= 1, "the watch")
            app.run()

        first = _nightly(svc, dep_id, "watch", traffic, study=_recommendation(CHISEL))
        assert first["result"]["basis"]["trace"] == {"source": "watch", "reshaped": None}
        _chisel_published(app)
        second = _nightly(svc, dep_id, "watch", traffic)
    finally:
        app.close()
    drift = second["result"]["drift"]
    ks = drift["quantities"]["multiget_size"]
    assert ks["moved"] and ks["value"] > ks["threshold"], ks  # what the watch saw: the client's Chisel chunks
    assert drift["trace"]["source"] == "watch" and "Chisel" in drift["trace"]["reshaped"]
    assert drift["changed"] is False and drift["reshaped"] and "capture.source: clients" in drift["reshaped"]
    assert "not counted as workload drift" in second["logs"]
    assert second["result"]["decision"]["reason"] == (
        "workload not compared (a capture the running config reshaped): kept v1")
    versions = svc.client.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()
    assert [v["version"] for v in versions] == [1]
